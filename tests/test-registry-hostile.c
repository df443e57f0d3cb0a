/* The job registry against another local user (issue 18): a FIFO among the
 * entries does not block a listing; a forged older entry with a job's name
 * does not win over the job; a squatted registry folder is refused and jobs
 * register in a private fallback that every reader finds. */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp-live.h"
#include "pp-registry.h"

#include "pp-test-util.h"

typedef struct {
  char *root;   /* a fresh XDG_RUNTIME_DIR */
  char *dir;    /* root/pipescope */
} Fixture;

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  (void) data;
  GError *error = NULL;
  fx->root = g_dir_make_tmp ("pp-reghostile-XXXXXX", &error);
  g_assert_no_error (error);
  fx->dir = g_build_filename (fx->root, "pipescope", NULL);
  g_setenv ("XDG_RUNTIME_DIR", fx->root, TRUE);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  (void) data;
  pp_test_rm_rf (fx->root);
  g_free (fx->root);
  g_free (fx->dir);
}

/* Field 22 of /proc/<pid>/stat, as a job records it. */
static gint64
start_ticks (int pid)
{
  char path[64], *text = NULL;
  g_snprintf (path, sizeof path, "/proc/%d/stat", pid);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  char *p = strrchr (text, ')') + 2;
  for (int field = 3; field < 22; field++)
    p = strchr (p, ' ') + 1;
  gint64 t = g_ascii_strtoll (p, NULL, 10);
  g_free (text);
  return t;
}

/* A hand-made entry file <pid>.job in dir with the given mode. */
static char *
write_entry (const char *dir, int pid, const char *name, gint64 start, gint64 ticks,
             const char *endpoint, int mode)
{
  char *path = g_strdup_printf ("%s/%d.job", dir, pid);
  char *text = g_strdup_printf ("pid=%d\nstart_unix_ns=%" G_GINT64_FORMAT "\nproc_start_ticks=%"
                                G_GINT64_FORMAT "\nhost=h\nname=%s\nschedule=1F1B\nendpoint=%s\n",
                                pid, start, ticks, name, endpoint);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_assert_cmpint (g_chmod (path, mode), ==, 0);
  g_free (text);
  return path;
}

static PpLiveServer *
serve (const char *name)
{
  PpError err = { 0 };
  PpLiveConfig cfg = { .name = name, .schedule = "1F1B" };
  PpLiveServer *s = pp_live_server_new (&cfg, &err);
  if (s == NULL)
    g_error ("serve: %s", err.msg);
  return s;
}

static void
test_fifo (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_OK);
  PpLiveServer *s = serve ("real");

  /* a FIFO named after a live pid (our parent): a plain open would block
   * until someone writes; the listing must return and skip it */
  char *fifo = g_strdup_printf ("%s/%d.job", dir, (int) getppid ());
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpint (jobs[0].pid, ==, getpid ());
  free (jobs);
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("real", &found, &err), ==, PP_OK);
  char *ppid = g_strdup_printf ("%d", (int) getppid ());
  g_assert_cmpint (pp_registry_find (ppid, &found, &err), ==, PP_EINVAL);
  g_assert_null (pp_live_client_connect (ppid, NULL, &err));
  /* left alone: it is not an entry */
  struct stat st;
  g_assert_cmpint (lstat (fifo, &st), ==, 0);
  g_assert_true (S_ISFIFO (st.st_mode));

  /* a symlink to a readable entry elsewhere is not one either */
  g_assert_cmpint (g_unlink (fifo), ==, 0);
  char *elsewhere = write_entry (fx->root, (int) getppid (), "linked", 1, start_ticks ((int) getppid ()),
                                 "", 0600);
  g_assert_cmpint (symlink (elsewhere, fifo), ==, 0);
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 1);
  free (jobs);

  pp_live_server_free (s);
  g_free (elsewhere);
  g_free (ppid);
  g_free (fifo);
}

static void
test_forged (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_OK);
  PpLiveServer *s = serve ("train");
  int ppid = (int) getppid ();
  gint64 pticks = start_ticks (ppid);
  char *real_ep = g_strdup_printf ("unix:%s", pp_live_server_socket_path (s));
  char *own_ep = g_strdup_printf ("unix:%s/%d.sock", dir, ppid);

  /* Forgeries that are not trusted at all: each leaves the listing with
   * the real job alone.  Named after a live process (our parent), older. */
  struct {
    const char *what;
    gint64      ticks;
    const char *endpoint;
    int         mode;
  } bad[] = {
    { "readable by others", 0, NULL, 0644 },
    { "writable by the group", 0, NULL, 0620 },
    { "no start time", -1, NULL, 0600 },
    { "another start time", 1, NULL, 0600 },
    { "the real job's socket", 0, "real", 0600 },
    { "a socket elsewhere", 0, "unix:/tmp/elsewhere.sock", 0600 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      gint64 ticks = bad[i].ticks == 0 ? pticks : bad[i].ticks == -1 ? 0 : pticks + bad[i].ticks;
      const char *ep = bad[i].endpoint == NULL ? own_ep
                       : strcmp (bad[i].endpoint, "real") == 0 ? real_ep : bad[i].endpoint;
      char *path = write_entry (dir, ppid, "train", 1, ticks, ep, bad[i].mode);
      PpJobInfo *jobs = NULL;
      size_t n = 0;
      g_test_message ("forged: %s", bad[i].what);
      g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
      g_assert_cmpuint (n, ==, 1);
      g_assert_cmpint (jobs[0].pid, ==, getpid ());
      free (jobs);
      g_unlink (path);
      g_free (path);
    }

  /* The best forgery a same-name file can be: private, a live process of
   * ours with its true start time, its own socket path, an earlier start.
   * Listed (it names a live process), but it serves nothing: the name
   * resolves to the job that does. */
  char *path = write_entry (dir, ppid, "train", 1, pticks, own_ep, 0600);
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpint (jobs[0].pid, ==, ppid);   /* the older first */
  free (jobs);
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("train", &found, &err), ==, PP_OK);
  g_assert_cmpint (found.pid, ==, getpid ());
  g_assert_cmpstr (found.endpoint, ==, real_ep);
  /* and attaching by name reaches the real job's stream */
  PpLiveClient *c = pp_live_client_connect ("train", NULL, &err);
  g_assert_nonnull (c);   /* the forged entry has no socket: connecting to it fails */
  pp_live_client_free (c);

  g_unlink (path);
  g_free (path);
  pp_live_server_free (s);
  g_free (real_ep);
  g_free (own_ep);
}

/* A squatted folder (mode 0777, or another user's): a job registers in a
 * private fallback, says so in one line, and every reader finds it there. */
static void
squatted (Fixture *fx, int how)
{
  PpError err = { 0 };
  g_assert_cmpint (g_mkdir (fx->dir, 0700), ==, 0);
  if (how == 0)
    g_assert_cmpint (g_chmod (fx->dir, 0777), ==, 0);
  else if (geteuid () == 0)
    g_assert_cmpint (chown (fx->dir, 65534, 65534), ==, 0);
  else
    {
      g_test_skip ("chown to another uid needs root");
      return;
    }
  /* a planted folder that looks like a fallback: open to others, or not
   * ours; never used */
  char *decoy = g_strdup_printf ("%s.AAAAAA", fx->dir);
  g_assert_cmpint (g_mkdir (decoy, 0700), ==, 0);
  g_assert_cmpint (g_chmod (decoy, 0755), ==, 0);
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_EIO);

  char note[PP_ERROR_MSG_MAX];
  g_assert_cmpint (pp_registry_dir_for_job (dir, sizeof dir, note, sizeof note, &err), ==, PP_OK);
  g_assert_cmpstr (dir, !=, fx->dir);
  g_assert_cmpstr (dir, !=, decoy);
  g_assert_true (g_str_has_prefix (dir, fx->dir));
  struct stat st;
  g_assert_cmpint (lstat (dir, &st), ==, 0);
  g_assert_true (S_ISDIR (st.st_mode));
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  g_assert_cmpint (st.st_uid, ==, geteuid ());
  g_assert_nonnull (strstr (note, fx->dir));
  g_assert_nonnull (strstr (note, dir));
  g_assert_null (strchr (note, '\n'));
  /* asked again, the same fallback */
  char again[4096];
  g_assert_cmpint (pp_registry_dir_for_job (again, sizeof again, NULL, 0, &err), ==, PP_OK);
  g_assert_cmpstr (again, ==, dir);

  PpLiveServer *s = serve ("squat");
  g_assert_nonnull (pp_live_server_notice (s));
  g_assert_true (g_str_has_prefix (pp_live_server_socket_path (s), dir));
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpstr (jobs[0].name, ==, "squat");
  free (jobs);
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("squat", &found, &err), ==, PP_OK);
  PpLiveClient *c = pp_live_client_connect ("squat", NULL, &err);
  g_assert_nonnull (c);
  pp_live_client_free (c);
  /* nothing was written into the squatted folder */
  GDir *d = g_dir_open (fx->dir, 0, NULL);
  g_assert_nonnull (d);
  g_assert_null (g_dir_read_name (d));
  g_dir_close (d);
  pp_live_server_free (s);
  char *entry = g_strdup_printf ("%s/%d.job", dir, (int) getpid ());
  g_assert_false (g_file_test (entry, G_FILE_TEST_EXISTS));
  g_free (entry);
  g_free (decoy);
}

static void
test_squatted_mode (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  squatted (fx, 0);
}

static void
test_squatted_owner (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  squatted (fx, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/registry-hostile/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("fifo", test_fifo);
  ADD ("forged", test_forged);
  ADD ("squatted-mode", test_squatted_mode);
  ADD ("squatted-owner", test_squatted_owner);
  return g_test_run ();
}
