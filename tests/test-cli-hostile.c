/* pipescope-cli against another local user and against requests too big to
 * work (issue 18): a FIFO in the registry does not hang `jobs` or `record`;
 * a squatted registry folder still gives a run that writes its --trace and
 * says why; a forged older entry does not win `record NAME`; the token is
 * taken from a private file or the environment, and on the command line
 * only with a warning; oversized `schedule` and `run` requests are refused
 * in one line before anything is allocated or any thread started.
 *
 * Every child gets XDG_RUNTIME_DIR set to a fresh temporary directory. */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-schedule.h"
#include "pp-test-util.h"

#define run(c, out, err, ...) pp_test_cli_run ((c)->envp, out, err, __VA_ARGS__)

typedef PpTestCtx Ctx;

/* `info FILE`: its span count (the file must be a readable trace). */
static long
info_spans (Ctx *c, const char *file)
{
  char *out, *err;
  g_assert_cmpint (run (c, &out, &err, "info", file, NULL), ==, 0);
  const char *p = strstr (out, "\nspans: ");
  g_assert_nonnull (p);
  long n = strtol (p + 8, NULL, 10);
  g_free (out);
  g_free (err);
  return n;
}

/* ---- a job in the background (schedule --serve) ---------------------------- */

typedef struct {
  GPid  pid;
  int   err_fd;
  char *line;    /* its "serving ..." line */
  char *name;
  char *tcp;     /* HOST:PORT or NULL */
  char *token;
} Job;

static void
job_start (Ctx *c, Job *job, const char *listen)
{
  const char *argv[] = { pp_test_cli_path (), "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve",
                         listen ? "--listen" : NULL, listen, NULL };
  GError *error = NULL;
  GString *buf = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;   /* a hang guard */

  memset (job, 0, sizeof *job);
  if (!g_spawn_async_with_pipes (NULL, (char **) argv, c->envp,
                                 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                 &job->pid, NULL, NULL, &job->err_fd, &error))
    g_error ("spawn: %s", error->message);
  while (strchr (buf->str, '\n') == NULL)
    {
      struct pollfd pfd = { .fd = job->err_fd, .events = POLLIN };
      char chunk[256];
      int left = (int) ((deadline - g_get_monotonic_time ()) / 1000);
      if (left <= 0)
        g_error ("the job printed no 'serving' line (got '%s')", buf->str);
      if (poll (&pfd, 1, left) <= 0)
        continue;
      ssize_t n = read (job->err_fd, chunk, sizeof chunk);
      if (n <= 0)
        g_error ("the job's stderr ended before its 'serving' line (got '%s')", buf->str);
      g_string_append_len (buf, chunk, n);
    }
  job->line = g_string_free (buf, FALSE);
  g_assert_true (g_str_has_prefix (job->line, "serving "));
  const char *p = strstr (job->line, " (pid ");
  g_assert_nonnull (p);
  job->name = g_strndup (job->line + 8, (gsize) (p - job->line - 8));
  const char *a = strstr (job->line, " and "), *t = strstr (job->line, ", token ");
  if (a != NULL && t != NULL)
    {
      const char *e = strstr (t, "; Ctrl-C stops");
      job->tcp = g_strndup (a + 5, (gsize) (t - a - 5));
      job->token = g_strndup (t + 8, (gsize) (e - t - 8));
    }

  /* Then until it has served a span: the job keeps its history, so every
   * later record of it holds one, however short and however slow the
   * machine (a minute is a hang guard). */
  char *pid = g_strdup_printf ("%d", (int) job->pid);
  char *f = pp_test_ctx_path (c, "served.pptrace");
  gint64 t0 = g_get_monotonic_time ();
  for (;;)
    {
      char *out, *err;
      g_assert_cmpint (run (c, &out, &err, "record", pid, "-o", f, "--duration", "0.1", NULL), ==, 0);
      g_free (out); g_free (err);
      if (info_spans (c, f) > 0)
        break;
      g_assert_cmpint (g_get_monotonic_time () - t0, <, 60 * G_USEC_PER_SEC);
    }
  g_unlink (f);
  g_free (f);
  g_free (pid);
}

static void
job_stop (Job *job)
{
  int status;
  if (job->pid > 0)
    {
      kill (job->pid, SIGKILL);
      waitpid (job->pid, &status, 0);
    }
  if (job->err_fd > 0)
    close (job->err_fd);
  g_free (job->line);
  g_free (job->name);
  g_free (job->tcp);
  g_free (job->token);
}

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

/* ---- the registry ---------------------------------------------------------- */

static void
test_fifo (void)
{
  Ctx c;
  char *out, *err;
  pp_test_ctx_init (&c, "pp-cli-hostile");
  char *dir = pp_test_ctx_path (&c, "pipescope");
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  /* named after a live pid (this test): a blocking open would hang */
  char *fifo = g_strdup_printf ("%s/%d.job", dir, (int) getpid ());
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  char *pid = g_strdup_printf ("%d", (int) getpid ());

  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);

  char *f = pp_test_ctx_path (&c, "r.pptrace");
  g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", f, "--duration", "0.2", NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "no running pipescope jobs"));
  g_free (out); g_free (err);

  /* with a job serving beside it, both see the job and only it */
  Job job;
  job_start (&c, &job, NULL);
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpint (pp_test_count (out, "\n"), ==, 2);   /* the headers, the job */
  g_assert_nonnull (strstr (out, job.name));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&c, &out, &err, "record", job.name, "-o", f, "--duration", "0.3", NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f), >, 0);
  job_stop (&job);

  g_free (f);
  g_free (pid);
  g_free (fifo);
  g_free (dir);
  pp_test_ctx_clear (&c);
}

static void
test_forged_name (void)
{
  Ctx c;
  char *out, *err;
  pp_test_ctx_init (&c, "pp-cli-hostile");
  Job job;
  job_start (&c, &job, NULL);

  /* An entry with the job's name, older, for a live process of ours (this
   * test) with its true start time, private: the best forgery there is. */
  char *dir = pp_test_ctx_path (&c, "pipescope");
  char *forged = g_strdup_printf ("%s/%d.job", dir, (int) getpid ());
  char *text = g_strdup_printf ("pid=%d\nstart_unix_ns=1\nproc_start_ticks=%" G_GINT64_FORMAT
                                "\nname=%s\nschedule=1F1B\nendpoint=unix:%s/%d.sock\n",
                                (int) getpid (), start_ticks ((int) getpid ()), job.name, dir,
                                (int) getpid ());
  g_assert_true (g_file_set_contents (forged, text, -1, NULL));
  g_assert_cmpint (g_chmod (forged, 0600), ==, 0);

  char *f = pp_test_ctx_path (&c, "named.pptrace");
  g_assert_cmpint (run (&c, &out, &err, "record", job.name, "-o", f, "--duration", "0.3", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f), >, 0);

  job_stop (&job);
  g_free (f);
  g_free (text);
  g_free (forged);
  g_free (dir);
  pp_test_ctx_clear (&c);
}

/* A run whose registry folder is squatted (how: 0 = mode 0777, 1 = another
 * uid, 2 = no folder can be made at all) writes its trace and says why. */
static void
squatted_run (int how)
{
  Ctx c;
  char *out, *err;
  pp_test_ctx_init (&c, "pp-cli-hostile");
  char *dir = pp_test_ctx_path (&c, "pipescope");
  if (how == 2)
    {
      /* XDG_RUNTIME_DIR is a file: neither the folder nor a fallback */
      char *file = pp_test_ctx_path (&c, "not-a-dir");
      g_assert_true (g_file_set_contents (file, "", 0, NULL));
      c.envp = g_environ_setenv (c.envp, "XDG_RUNTIME_DIR", file, TRUE);
      g_free (file);
    }
  else
    {
      g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
      if (how == 0)
        g_assert_cmpint (g_chmod (dir, 0777), ==, 0);
      else if (geteuid () == 0)
        g_assert_cmpint (chown (dir, 65534, 65534), ==, 0);
      else
        {
          g_test_skip ("chown to another uid needs root");
          g_free (dir);
          pp_test_ctx_clear (&c);
          return;
        }
    }
  char *t = pp_test_ctx_path (&c, "run.pptrace");
  g_assert_cmpint (run (&c, &out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4",
                        "--width", "16", "--steps", "3", "--trace", t, NULL), ==, 0);
  g_test_message ("stderr: %s", err);
  if (how == 2)
    {
      g_assert_nonnull (strstr (err, "pipescope-cli: not serving live ("));
      g_assert_nonnull (strstr (err, "running without a live endpoint\n"));
      g_assert_null (strstr (err, "serving 1F1B"));
    }
  else
    {
      /* live from a private fallback beside it, named in one line */
      g_assert_nonnull (strstr (err, how == 0 ? "is open to other users (mode 777)" : "belongs to uid 65534"));
      char *want = g_strdup_printf ("; using %s.", dir);
      g_assert_nonnull (strstr (err, want));
      g_free (want);
      g_assert_nonnull (strstr (err, "serving 1F1B"));
    }
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, t), >, 0);
  g_free (t);
  g_free (dir);
  pp_test_ctx_clear (&c);
}

static void test_squatted_mode (void) { squatted_run (0); }
static void test_squatted_owner (void) { squatted_run (1); }
static void test_no_registry (void) { squatted_run (2); }

/* ---- the token --------------------------------------------------------------- */

static void
test_token (void)
{
  Ctx c;
  char *out, *err;
  pp_test_ctx_init (&c, "pp-cli-hostile");
  Job job;
  job_start (&c, &job, "127.0.0.1:0");
  g_assert_nonnull (job.token);
  char *f = pp_test_ctx_path (&c, "tcp.pptrace");
  char *tok = pp_test_ctx_path (&c, "token");
  char *line = g_strdup_printf ("%s\n", job.token);
  g_assert_true (g_file_set_contents (tok, line, -1, NULL));

  /* --help says where a token may come from */
  g_assert_cmpint (run (&c, &out, &err, "record", "--help", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "--token-file FILE"));
  g_assert_nonnull (strstr (out, "PIPESCOPE_TOKEN"));
  g_free (out); g_free (err);

  /* a token file others may read: refused, one line, nothing written */
  g_assert_cmpint (g_chmod (tok, 0640), ==, 0);
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token-file", tok, "-o", f, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "mode 640"));
  g_assert_nonnull (strstr (err, "chmod 600"));
  g_free (out); g_free (err);
  g_assert_false (g_file_test (f, G_FILE_TEST_EXISTS));
  if (geteuid () == 0)
    {
      /* one that is not ours */
      g_assert_cmpint (g_chmod (tok, 0600), ==, 0);
      g_assert_cmpint (chown (tok, 65534, 65534), ==, 0);
      g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token-file", tok, "-o", f, NULL), ==, 2);
      pp_test_assert_one_line_error (err);
      g_assert_nonnull (strstr (err, "belongs to uid 65534"));
      g_free (out); g_free (err);
      g_assert_cmpint (chown (tok, 0, 0), ==, 0);
    }

  /* a private one: works, and says nothing on stderr */
  g_assert_cmpint (g_chmod (tok, 0600), ==, 0);
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token-file", tok, "-o", f,
                        "--duration", "0.3", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f), >, 0);
  g_unlink (f);

  /* the environment */
  char **env = g_environ_setenv (g_strdupv (c.envp), "PIPESCOPE_TOKEN", job.token, TRUE);
  g_assert_cmpint (pp_test_cli_run (env, &out, &err, "record", job.tcp, "-o", f, "--duration", "0.3",
                                    NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f), >, 0);
  g_unlink (f);
  g_strfreev (env);

  /* --token still works, with one line of warning */
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token", job.token, "-o", f,
                        "--duration", "0.3", NULL), ==, 0);
  g_assert_cmpint (pp_test_count (err, "\n"), ==, 1);
  g_assert_true (g_str_has_prefix (err, "pipescope-cli: warning: --token"));
  g_assert_nonnull (strstr (err, "other local users"));
  g_assert_nonnull (strstr (err, "--token-file"));
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f), >, 0);

  /* both at once: which one? a usage error */
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token", job.token, "--token-file", tok,
                        "-o", f, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  job_stop (&job);
  g_free (line);
  g_free (tok);
  g_free (f);
  pp_test_ctx_clear (&c);
}

/* ---- sizes inside the accepted limits ------------------------------------------- */

/* Runs the CLI with argv (NULL-terminated, after the program), stdout to
 * /dev/null; returns its exit status, its stderr and its peak RSS in KiB. */
static int
run_measured_nproc (Ctx *c, const char *const *args, char **err, long *maxrss_kb, long nproc)
{
  GPtrArray *argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  for (const char *const *a = args; *a; a++)
    g_ptr_array_add (argv, (char *) *a);
  g_ptr_array_add (argv, NULL);
  int fds[2];
  g_assert_cmpint (pipe (fds), ==, 0);
  pid_t pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      int null = open ("/dev/null", O_WRONLY);
      dup2 (null, 1);
      dup2 (fds[1], 2);
      close (fds[0]);
      if (nproc > 0)
        {
          struct rlimit rl = { (rlim_t) nproc, (rlim_t) nproc };
          if (setrlimit (RLIMIT_NPROC, &rl) != 0)
            _exit (126);
        }
      execve (pp_test_cli_path (), (char **) argv->pdata, c->envp);
      _exit (127);
    }
  close (fds[1]);
  GString *buf = g_string_new (NULL);
  char chunk[1024];
  ssize_t n;
  while ((n = read (fds[0], chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (buf, chunk, n);
  close (fds[0]);
  int status;
  struct rusage ru;
  g_assert_cmpint (wait4 (pid, &status, 0, &ru), ==, pid);
  *maxrss_kb = ru.ru_maxrss;
  *err = g_string_free (buf, FALSE);
  g_ptr_array_free (argv, TRUE);
  g_assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static int
run_measured (Ctx *c, const char *const *args, char **err, long *maxrss_kb)
{
  return run_measured_nproc (c, args, err, maxrss_kb, 0);
}

static void
test_sizes (void)
{
  Ctx c;
  char *err;
  long base_kb, kb;
  pp_test_ctx_init (&c, "pp-cli-hostile");

  /* what the program takes doing almost nothing (its libraries) */
  const char *tiny[] = { "schedule", "-s", "1F1B", "-p", "2", "-m", "1", NULL };
  g_assert_cmpint (run_measured (&c, tiny, &err, &base_kb), ==, 0);
  g_free (err);

  struct {
    const char *args[16];
    const char *want;
  } big[] = {
    { { "schedule", "-s", "1F1B", "-p", "4096", "-m", "1048576", NULL }, "1F1B at P=4096, V=1, M=1048576 is about 1.29e+10 actions" },
    { { "schedule", "-s", "Interleaved1F1B", "-p", "4096", "-m", "1048576", "-v", "64", "--format", "json", NULL },
      "Interleaved1F1B at P=4096, V=64, M=1048576 is about" },
    { { "schedule", "-s", "ZBV", "-p", "4096", "-m", "1048576", "--format", "csv", NULL }, "ZBV at P=4096, V=2, M=1048576 is about" },
    { { "run", "-s", "1F1B", "-p", "4096", "-m", "1048576", "--no-live", NULL }, "1F1B at P=4096, V=1, M=1048576 is about" },
    { { "run", "-s", "1F1B", "-p", "4096", "-m", "8", "--layers", "4096", "--no-live", NULL }, "4096 ranks need 4096 threads; this process may start" },
  };
  /* (a machine with over a TiB free would be asked to try them) */
  double avail = pp_mem_available_bytes ();
  if (avail > 1152.0 * 1024 * 1024 * 1024)
    {
      g_test_skip ("this machine has the memory for these");
      pp_test_ctx_clear (&c);
      return;
    }
  for (size_t i = 0; i < G_N_ELEMENTS (big); i++)
    {
      int status = run_measured (&c, big[i].args, &err, &kb);
      g_test_message ("%s: exit %d, %ld KiB (the tiny request: %ld KiB): %s", big[i].args[0], status, kb,
                      base_kb, err);
      g_assert_cmpint (status, ==, 2);
      pp_test_assert_one_line_error (err);
      g_assert_nonnull (strstr (err, big[i].want));
      g_assert_nonnull (strstr (err, "; lower --ranks"));
      /* refused before anything was built: no more memory than the tiny one */
      g_assert_cmpint (kb, <, base_kb + 64 * 1024);
      g_free (err);
    }

  /* the user's process limit bounds the rank threads too */
  const char *ranks64[] = { "run", "-s", "GPipe", "-p", "64", "-m", "1", "--layers", "64", "--no-live", NULL };
  g_assert_cmpint (run_measured_nproc (&c, ranks64, &err, &kb, 100), ==, 2);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "64 ranks need 64 threads; this process may start 36 (ulimit -u is 100)"));
  g_free (err);

  /* an ordinary request is not refused */
  const char *fine[] = { "schedule", "-s", "ZBV", "-p", "8", "-m", "64", "--format", "csv", NULL };
  g_assert_cmpint (run_measured (&c, fine, &err, &kb), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (err);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-hostile/registry-fifo", test_fifo);
  g_test_add_func ("/cli-hostile/registry-forged-name", test_forged_name);
  g_test_add_func ("/cli-hostile/registry-squatted-mode", test_squatted_mode);
  g_test_add_func ("/cli-hostile/registry-squatted-owner", test_squatted_owner);
  g_test_add_func ("/cli-hostile/registry-none", test_no_registry);
  g_test_add_func ("/cli-hostile/token", test_token);
  g_test_add_func ("/cli-hostile/sizes", test_sizes);
  return g_test_run ();
}
