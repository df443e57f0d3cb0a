/* The job registry: entries are added, listed, found by pid, name and socket
 * path, removed; stale entries (dead pid, reused pid) are skipped and
 * cleaned up; a directory open to others is refused. */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
  fx->root = g_dir_make_tmp ("pp-registry-XXXXXX", &error);
  g_assert_no_error (error);
  fx->dir = g_build_filename (fx->root, "pipescope", NULL);
  g_setenv ("XDG_RUNTIME_DIR", fx->root, TRUE);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  (void) data;
  g_chmod (fx->dir, 0700);
  pp_test_rm_rf (fx->root);
  g_free (fx->root);
  g_free (fx->dir);
}

static PpJobInfo
job_for (int32_t pid, const char *name, int64_t start, const char *dir)
{
  PpJobInfo j;
  memset (&j, 0, sizeof j);
  PpError err = { 0 };
  g_assert_cmpint (pp_registry_self (&j, &err), ==, PP_OK);
  j.pid = pid;
  j.start_unix_ns = start;
  g_strlcpy (j.name, name, sizeof j.name);
  g_strlcpy (j.schedule, "1F1B", sizeof j.schedule);
  g_strlcpy (j.cmdline, "python train.py --lr 3e-4\n--second line \\ with backslash", sizeof j.cmdline);
  g_snprintf (j.endpoint, sizeof j.endpoint, "unix:%s/%d.sock", dir, (int) pid);
  return j;
}

static void
assert_job_equal (const PpJobInfo *a, const PpJobInfo *b)
{
  g_assert_cmpint (a->pid, ==, b->pid);
  g_assert_cmpint (a->start_unix_ns, ==, b->start_unix_ns);
  g_assert_cmpint (a->proc_start_ticks, ==, b->proc_start_ticks);
  g_assert_cmpstr (a->host, ==, b->host);
  g_assert_cmpstr (a->name, ==, b->name);
  g_assert_cmpstr (a->schedule, ==, b->schedule);
  g_assert_cmpstr (a->cmdline, ==, b->cmdline);
  g_assert_cmpstr (a->endpoint, ==, b->endpoint);
  g_assert_cmpstr (a->tcp, ==, b->tcp);
}

static void
test_add_list_find (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_OK);
  g_assert_cmpstr (dir, ==, fx->dir);
  struct stat st;
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);

  /* empty */
  PpJobInfo *jobs = NULL;
  size_t n = 99;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 0);
  free (jobs);
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("4242", &found, &err), ==, PP_EINVAL);
  g_assert_cmpstr (err.msg, ==, "no running pipescope jobs");

  /* this process, and its parent (alive, another pid) */
  PpJobInfo self = job_for ((int32_t) getpid (), "mine", 200, dir);
  g_strlcpy (self.tcp, "node-1:7000", sizeof self.tcp);
  g_assert_cmpint (pp_registry_add (&self, &err), ==, PP_OK);
  PpJobInfo parent = job_for ((int32_t) getppid (), "", 100, dir);
  PpError perr = { 0 };
  PpJobInfo pself;
  g_assert_cmpint (pp_registry_self (&pself, &perr), ==, PP_OK);
  /* the parent's own start time, read the way a job would */
  {
    char path[64], text[1024];
    g_snprintf (path, sizeof path, "/proc/%d/stat", (int) parent.pid);
    FILE *f = fopen (path, "r");
    if (f != NULL)
      {
        size_t k = fread (text, 1, sizeof text - 1, f);
        fclose (f);
        text[k] = '\0';
        char *p = strrchr (text, ')') + 2;
        for (int field = 3; field < 22; field++)
          p = strchr (p, ' ') + 1;
        parent.proc_start_ticks = g_ascii_strtoll (p, NULL, 10);
      }
    else
      parent.proc_start_ticks = 0;
  }
  g_assert_cmpint (pp_registry_add (&parent, &err), ==, PP_OK);
  char *job_path = g_strdup_printf ("%s/%d.job", dir, (int) self.pid);
  g_assert_cmpint (g_stat (job_path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_free (job_path);

  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 2);
  /* sorted by start time; an empty name becomes <schedule>-<pid> */
  g_assert_cmpint (jobs[0].pid, ==, parent.pid);
  char *pname = g_strdup_printf ("1F1B-%d", (int) parent.pid);
  g_assert_cmpstr (jobs[0].name, ==, pname);
  g_strlcpy (parent.name, pname, sizeof parent.name);
  assert_job_equal (&jobs[0], &parent);
  assert_job_equal (&jobs[1], &self);
  free (jobs);

  /* by pid, by name, by socket path */
  char *spec = g_strdup_printf ("%d", (int) self.pid);
  g_assert_cmpint (pp_registry_find (spec, &found, &err), ==, PP_OK);
  assert_job_equal (&found, &self);
  g_free (spec);
  g_assert_cmpint (pp_registry_find (pname, &found, &err), ==, PP_OK);
  assert_job_equal (&found, &parent);
  g_assert_cmpint (pp_registry_find ("mine", &found, &err), ==, PP_OK);
  g_assert_cmpint (found.pid, ==, self.pid);
  /* names match as users type them: case-insensitively */
  char *lower = g_ascii_strdown (pname, -1);
  g_assert_cmpint (pp_registry_find (lower, &found, &err), ==, PP_OK);
  g_assert_cmpint (found.pid, ==, parent.pid);
  g_free (lower);
  g_assert_cmpint (pp_registry_find (self.endpoint + 5, &found, &err), ==, PP_OK);
  g_assert_cmpint (found.pid, ==, self.pid);

  /* no match: the message lists what runs */
  g_assert_cmpint (pp_registry_find ("999999999", &found, &err), ==, PP_EINVAL);
  char *want = g_strdup_printf ("no running job '999999999'; running: %s (pid %d), mine (pid %d)",
                                pname, (int) parent.pid, (int) self.pid);
  g_assert_cmpstr (err.msg, ==, want);
  g_free (want);
  g_assert_cmpint (pp_registry_find ("nope", &found, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_registry_find ("/no/such.sock", &found, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_registry_find ("", &found, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_registry_find ("99999999999999999999", &found, &err), ==, PP_EINVAL);

  /* remove */
  char *sock = g_strdup_printf ("%s/%d.sock", dir, (int) self.pid);
  g_assert_true (g_file_set_contents (sock, "", 0, NULL));
  g_assert_cmpint (pp_registry_remove (self.pid, &err), ==, PP_OK);
  g_assert_false (g_file_test (sock, G_FILE_TEST_EXISTS));
  g_assert_cmpint (pp_registry_remove (self.pid, &err), ==, PP_OK);   /* twice is fine */
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpint (jobs[0].pid, ==, parent.pid);
  free (jobs);
  g_assert_cmpint (pp_registry_remove (parent.pid, &err), ==, PP_OK);
  g_assert_cmpint (pp_registry_remove (0, &err), ==, PP_EINVAL);
  g_free (sock);
  g_free (pname);
}

static void
test_stale (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_OK);

  /* a job that died */
  pid_t child = fork ();
  g_assert_cmpint (child, >=, 0);
  if (child == 0)
    _exit (0);
  PpJobInfo dead = job_for ((int32_t) child, "dead", 1, dir);
  g_assert_cmpint (pp_registry_add (&dead, &err), ==, PP_OK);
  int status;
  g_assert_cmpint (waitpid (child, &status, 0), ==, child);
  char *dead_job = g_strdup_printf ("%s/%d.job", dir, (int) child);
  char *dead_sock = g_strdup_printf ("%s/%d.sock", dir, (int) child);
  g_assert_true (g_file_set_contents (dead_sock, "", 0, NULL));

  /* a job that exited and was not reaped yet (a zombie answers kill 0),
   * without /proc start ticks to tell */
  pid_t zombie = fork ();
  g_assert_cmpint (zombie, >=, 0);
  if (zombie == 0)
    _exit (0);
  {
    /* wait until it is a zombie: waitid with WNOWAIT leaves it one */
    siginfo_t si;
    g_assert_cmpint (waitid (P_PID, (id_t) zombie, &si, WEXITED | WNOWAIT), ==, 0);
  }
  g_assert_cmpint (kill (zombie, 0), ==, 0);
  PpJobInfo undead = job_for ((int32_t) zombie, "zombie", 3, dir);
  undead.proc_start_ticks = 0;
  g_assert_cmpint (pp_registry_add (&undead, &err), ==, PP_OK);

  /* our pid, another start time: a reused pid */
  PpJobInfo reused = job_for ((int32_t) getpid (), "reused", 2, dir);
  reused.proc_start_ticks += 12345;
  g_assert_cmpint (pp_registry_add (&reused, &err), ==, PP_OK);
  char *reused_job = g_strdup_printf ("%s/%d.job", dir, (int) getpid ());

  /* files that are not entries are left alone; a garbage entry is skipped */
  char *other = g_build_filename (dir, "notes.txt", NULL);
  g_assert_true (g_file_set_contents (other, "pid=1\n", -1, NULL));
  char *garbage = g_build_filename (dir, "77.job", NULL);
  g_assert_true (g_file_set_contents (garbage, "no pid here\n\n=\nname=x", -1, NULL));

  PpJobInfo *jobs;
  size_t n;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 0);
  free (jobs);
  g_assert_false (g_file_test (dead_job, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (dead_sock, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (reused_job, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (other, G_FILE_TEST_EXISTS));
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("dead", &found, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_registry_find ("zombie", &found, &err), ==, PP_EINVAL);
  g_assert_cmpint (waitpid (zombie, &status, 0), ==, zombie);

  /* a hand-written entry: unknown keys, an overlong line and CRLF-free
   * escapes are taken in stride */
  GString *text = g_string_new (NULL);
  g_string_append_printf (text, "future_key=whatever\npid=%d\nname=hand\\nmade\n", (int) getpid ());
  {
    /* an entry is trusted only with its process's start time (a bad value
     * later is ignored) */
    PpJobInfo me;
    g_assert_cmpint (pp_registry_self (&me, &err), ==, PP_OK);
    g_string_append_printf (text, "proc_start_ticks=%" G_GINT64_FORMAT "\n", me.proc_start_ticks);
  }
  g_string_append (text, "cmdline=");
  for (int i = 0; i < 5000; i++)
    g_string_append_c (text, 'y');
  g_string_append (text, "\nschedule=ZBV\nproc_start_ticks=notanumber\n");
  char *hand = g_strdup_printf ("%s/%d.job", dir, (int) getpid ());
  g_assert_true (g_file_set_contents (hand, text->str, (gssize) text->len, NULL));
  g_assert_cmpint (g_chmod (hand, 0600), ==, 0);   /* entries are private (pp-registry.h) */
  g_string_free (text, TRUE);
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpstr (jobs[0].name, ==, "hand\nmade");
  g_assert_cmpstr (jobs[0].cmdline, ==, "");
  g_assert_cmpstr (jobs[0].schedule, ==, "ZBV");
  free (jobs);

  g_free (hand);
  g_free (garbage);
  g_free (other);
  g_free (reused_job);
  g_free (dead_job);
  g_free (dead_sock);
}

static void
test_refused (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (g_mkdir (fx->dir, 0700), ==, 0);
  g_assert_cmpint (g_chmod (fx->dir, 0755), ==, 0);
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_EIO);
  g_assert_nonnull (strstr (err.msg, fx->dir));
  g_assert_nonnull (strstr (err.msg, "755"));
  g_assert_null (strchr (err.msg, '\n'));
  PpJobInfo j = job_for ((int32_t) getpid (), "x", 1, fx->dir);
  g_assert_cmpint (pp_registry_add (&j, &err), ==, PP_EIO);
  PpJobInfo *jobs;
  size_t n;
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_EIO);
  g_assert_cmpint (pp_registry_find ("x", &j, &err), ==, PP_EIO);

  /* not a directory */
  g_assert_cmpint (g_chmod (fx->dir, 0700), ==, 0);
  g_assert_cmpint (g_rmdir (fx->dir), ==, 0);
  g_assert_true (g_file_set_contents (fx->dir, "", 0, NULL));
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_EIO);
  g_assert_cmpint (g_unlink (fx->dir), ==, 0);

  /* a symlink to a good directory is not followed */
  char *real = g_build_filename (fx->root, "elsewhere", NULL);
  g_assert_cmpint (g_mkdir (real, 0700), ==, 0);
  g_assert_cmpint (symlink (real, fx->dir), ==, 0);
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_EIO);
  g_unlink (fx->dir);
  g_free (real);

  g_assert_cmpint (pp_registry_dir (dir, 4, &err), ==, PP_EINVAL);
}

static void
test_tmp_fallback (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  g_unsetenv ("XDG_RUNTIME_DIR");
  g_setenv ("TMPDIR", fx->root, TRUE);
  PpError err = { 0 };
  char dir[4096];
  g_assert_cmpint (pp_registry_dir (dir, sizeof dir, &err), ==, PP_OK);
  char *want = g_strdup_printf ("%s/pipescope-%u", fx->root, (unsigned) geteuid ());
  g_assert_cmpstr (dir, ==, want);
  struct stat st;
  g_assert_cmpint (g_stat (want, &st), ==, 0);
  g_assert_true (S_ISDIR (st.st_mode));
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);

  PpJobInfo j = job_for ((int32_t) getpid (), "tmpjob", 1, dir);
  g_assert_cmpint (pp_registry_add (&j, &err), ==, PP_OK);
  PpJobInfo found;
  g_assert_cmpint (pp_registry_find ("tmpjob", &found, &err), ==, PP_OK);
  g_assert_cmpint (pp_registry_remove (j.pid, &err), ==, PP_OK);
  g_unsetenv ("TMPDIR");
  g_free (want);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/registry/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("add-list-find", test_add_list_find);
  ADD ("stale", test_stale);
  ADD ("refused", test_refused);
  ADD ("tmp-fallback", test_tmp_fallback);
  return g_test_run ();
}
