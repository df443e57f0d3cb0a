/* pipescope-cli schedule --serve, jobs and record as a user runs them.
 *
 * Every child gets XDG_RUNTIME_DIR set to a fresh temporary directory, so
 * the jobs registry is private to the test. */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-test-util.h"

#define run(c, out, err, ...) pp_test_cli_run ((c)->envp, out, err, __VA_ARGS__)

typedef PpTestCtx Ctx;
#define ctx_init(c) pp_test_ctx_init ((c), "pp-cli-live")
#define ctx_clear(c) pp_test_ctx_clear (c)
#define ctx_path(c, name) pp_test_ctx_path ((c), (name))

/* `info FILE` succeeds; returns its span count and checks the description. */
static long
info_spans (Ctx *c, const char *file, const char *want_schedule)
{
  char *out, *err;
  const char *p;
  long n;

  g_assert_cmpint (run (c, &out, &err, "info", file, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  if (want_schedule != NULL)
    g_assert_nonnull (strstr (out, want_schedule));
  g_assert_nonnull (strstr (out, "truncated: no\n"));
  p = strstr (out, "\nspans: ");
  g_assert_nonnull (p);
  n = strtol (p + 8, NULL, 10);
  g_free (out);
  g_free (err);
  return n;
}

/* ---- a job in the background --------------------------------------------- */

typedef struct {
  GPid  pid;
  int   err_fd;
  char *line;       /* the "serving ..." line */
  char *name;
  char *socket;
  char *tcp;        /* HOST:PORT or NULL */
  char *token;
} Job;

static void
job_start (Ctx *c, Job *job, ...)
{
  GPtrArray *argv = g_ptr_array_new ();
  GError *error = NULL;
  GString *buf = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;   /* a hang guard */
  va_list ap;
  const char *a;
  char pid_text[32];

  memset (job, 0, sizeof *job);
  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  va_start (ap, job);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async_with_pipes (NULL, (char **) argv->pdata, c->envp,
                                 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                 &job->pid, NULL, NULL, &job->err_fd, &error))
    g_error ("spawn: %s", error->message);
  g_ptr_array_free (argv, TRUE);

  /* Read the one line it prints when it serves. */
  while (strchr (buf->str, '\n') == NULL)
    {
      struct pollfd pfd = { .fd = job->err_fd, .events = POLLIN };
      char chunk[256];
      ssize_t n;
      int left = (int) ((deadline - g_get_monotonic_time ()) / 1000);

      if (left <= 0)
        g_error ("the job printed no 'serving' line in a minute (got '%s')", buf->str);
      if (poll (&pfd, 1, left) <= 0)
        continue;
      n = read (job->err_fd, chunk, sizeof chunk);
      if (n <= 0)
        g_error ("the job's stderr ended before its 'serving' line (got '%s')", buf->str);
      g_string_append_len (buf, chunk, n);
    }
  job->line = g_string_free (buf, FALSE);
  g_assert_true (g_str_has_prefix (job->line, "serving "));
  g_assert_cmpint (pp_test_count (job->line, "\n"), ==, 1);
  g_assert_true (g_str_has_suffix (job->line, "; Ctrl-C stops\n"));
  g_snprintf (pid_text, sizeof pid_text, " (pid %d) on ", (int) job->pid);
  {
    const char *p = strstr (job->line, pid_text), *q;
    g_assert_nonnull (p);
    job->name = g_strndup (job->line + 8, (gsize) (p - job->line - 8));
    p += strlen (pid_text);
    q = strstr (p, " and ");
    if (q == NULL)
      q = strstr (p, "; Ctrl-C stops");
    job->socket = g_strndup (p, (gsize) (q - p));
    if (g_str_has_prefix (q, " and "))
      {
        const char *t = strstr (q, ", token ");
        const char *e = strstr (q, "; Ctrl-C stops");
        g_assert_nonnull (t);
        job->tcp = g_strndup (q + 5, (gsize) (t - q - 5));
        job->token = g_strndup (t + 8, (gsize) (e - t - 8));
      }
  }
  g_assert_true (g_file_test (job->socket, G_FILE_TEST_EXISTS));
}

/* Waits up to timeout_ms for the job to exit (a hang guard: callers give a
 * minute); returns its wait status, or -1. */
static int
job_wait (Job *job, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (;;)
    {
      int status;
      pid_t r = waitpid (job->pid, &status, WNOHANG);
      if (r == job->pid)
        {
          job->pid = 0;
          return status;
        }
      if (g_get_monotonic_time () > deadline)
        return -1;
      g_usleep (10000);
    }
}

static void
job_clear (Job *job)
{
  if (job->pid > 0)
    {
      kill (job->pid, SIGKILL);
      job_wait (job, 60000);
    }
  if (job->err_fd > 0)
    close (job->err_fd);
  g_free (job->line);
  g_free (job->name);
  g_free (job->socket);
  g_free (job->tcp);
  g_free (job->token);
}

static char *
pid_str (const Job *job)
{
  return g_strdup_printf ("%d", (int) job->pid);
}

/* `jobs` lists the job (a line that starts with its pid) or not. */
static bool
jobs_lists (Ctx *c, const Job *job, char **out_copy)
{
  char *out, *err, *want = g_strdup_printf ("%d ", (int) job->pid);
  char **lines;
  bool found = false;

  g_assert_cmpint (run (c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  lines = g_strsplit (out, "\n", -1);
  for (char **l = lines; *l; l++)
    if (g_str_has_prefix (*l, want))
      found = true;
  g_strfreev (lines);
  if (out_copy)
    *out_copy = g_strdup (out);
  g_free (out);
  g_free (err);
  g_free (want);
  return found;
}

/* Until the job has served a span: a short record of it (the job keeps its
 * history, so a record sees every span served before it attached) holds
 * one.  Then a later record, however short, holds one too.  A minute is a
 * hang guard, not a claim on speed. */
static void
wait_served (Ctx *c, const Job *job, const char *file)
{
  char *out, *err, *pid = pid_str (job);
  gint64 t0 = g_get_monotonic_time ();
  for (;;)
    {
      g_assert_cmpint (run (c, &out, &err, "record", pid, "-o", file, "--duration", "0.1", NULL), ==, 0);
      g_assert_cmpstr (err, ==, "");
      g_free (out); g_free (err);
      if (info_spans (c, file, NULL) > 0)
        break;
      g_assert_cmpint (g_get_monotonic_time () - t0, <, 60 * G_USEC_PER_SEC);
    }
  g_free (pid);
}

/* Sends sig to the job once record has written what it received into its
 * file (its first item is the job's description: record is attached). */
typedef struct { pid_t pid; const char *file; int sig; } Killer;

static gpointer
kill_when_recording (gpointer data)
{
  Killer *k = data;
  GStatBuf sb;
  for (int i = 0; i < 3000; i++)   /* a minute: a hang guard */
    {
      if (g_stat (k->file, &sb) == 0 && sb.st_size > 0)
        break;
      g_usleep (20000);
    }
  kill (k->pid, k->sig);
  return NULL;
}

/* `record ... ended; recorded N events in ...`: N. */
static long
recorded_events (const char *out)
{
  const char *p = strstr (out, " ended; recorded ");
  g_assert_nonnull (p);
  return strtol (p + strlen (" ended; recorded "), NULL, 10);
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_jobs_and_record (void)
{
  Ctx c;
  Job job;
  char *out, *err, *pid, *listing = NULL;
  char *f1, *f2, *f3, *f0, *saved;
  gint64 t0;
  int status;

  ctx_init (&c);
  f0 = ctx_path (&c, "served.pptrace");
  f1 = ctx_path (&c, "by-pid.pptrace");
  f2 = ctx_path (&c, "by-name.pptrace");
  f3 = ctx_path (&c, "to-the-end.pptrace");
  saved = ctx_path (&c, "saved.pptrace");

  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_free (out); g_free (err);

  /* 1F1B, P=4, M=8, served until the test ends it (SIGTERM, once the last
   * record has attached): a job of a fixed number of steps could end
   * before that record attaches on a loaded machine (CI's did, at 100
   * steps); its own trace file is what the last record must equal. */
  job_start (&c, &job, "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve", "--trace", saved, NULL);
  pid = pid_str (&job);
  {
    char *want = g_strdup_printf ("1F1B-%s", pid);
    g_assert_cmpstr (job.name, ==, want);
    g_free (want);
  }
  g_assert_null (job.tcp);

  /* jobs lists it (a minute at most: a hang guard, not a claim on
   * speed): pid, name, schedule, endpoint. */
  t0 = g_get_monotonic_time ();
  while (!jobs_lists (&c, &job, NULL))
    {
      g_assert_cmpint (g_get_monotonic_time () - t0, <, 60 * G_USEC_PER_SEC);
      g_usleep (20000);
    }
  g_assert_true (jobs_lists (&c, &job, &listing));
  g_assert_nonnull (strstr (listing, job.name));
  g_assert_nonnull (strstr (listing, " 1F1B "));
  g_assert_nonnull (strstr (listing, job.socket));
  /* a line of column headers, then the job's one line */
  g_assert_cmpint (pp_test_count (listing, "\n"), ==, 2);
  g_assert_true (g_str_has_prefix (listing, "PID "));
  g_assert_nonnull (strstr (listing, " NAME "));
  g_assert_nonnull (strstr (listing, " SCHEDULE "));
  g_assert_nonnull (strstr (listing, " STARTED "));
  /* one process, no mesh: the last column is the endpoint alone */
  g_assert_nonnull (strstr (listing, " ENDPOINT\n"));
  g_assert_null (strstr (listing, "RANKS"));
  g_free (listing);

  /* By pid, for half a second (after the job has served a span, so the
   * record holds one however slow the machine). */
  wait_served (&c, &job, f0);
  g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", f1, "--duration", "0.5", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f1, "schedule: 1F1B (P=4, M=8, V=1)\n"), >, 0);

  /* By name. */
  g_assert_cmpint (run (&c, &out, &err, "record", job.name, "-o", f2, "--duration", "0.2", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f2, "schedule: 1F1B (P=4, M=8, V=1)\n"), >, 0);

  /* Until the job ends (SIGTERM once this record has attached): a normal
   * end is a success, one line saying how many events the file keeps:
   * every span the job served from its first step (the job keeps its
   * history), exactly its own trace file's. */
  Killer k = { job.pid, f3, SIGTERM };
  GThread *th = g_thread_new ("terminator", kill_when_recording, &k);
  g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", f3, NULL), ==, 0);
  g_thread_join (th);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, f3));
  long n_recorded = recorded_events (out);
  g_free (out); g_free (err);
  status = job_wait (&job, 60000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  long n_saved = info_spans (&c, saved, "schedule: 1F1B (P=4, M=8, V=1)\n");
  g_assert_cmpint (n_saved, >, 0);
  g_assert_cmpint (info_spans (&c, f3, "schedule: 1F1B (P=4, M=8, V=1)\n"), ==, n_saved);
  g_assert_cmpint (n_recorded, ==, n_saved);
  {
    /* the same steps and the same F and B counts as the saved trace */
    char *o3, *e3, *os, *es;
    g_assert_cmpint (run (&c, &o3, &e3, "info", f3, NULL), ==, 0);
    g_assert_cmpint (run (&c, &os, &es, "info", saved, NULL), ==, 0);
    const char *keys[] = { "\nsteps: ", "\nspans: " };
    for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
      {
        const char *a = strstr (o3, keys[i]), *b = strstr (os, keys[i]);
        g_assert_nonnull (a);
        g_assert_nonnull (b);
        char *la = g_strndup (a, strcspn (a + 1, "\n") + 1), *lb = g_strndup (b, strcspn (b + 1, "\n") + 1);
        g_assert_cmpstr (la, ==, lb);
        g_free (la); g_free (lb);
      }
    g_free (o3); g_free (e3); g_free (os); g_free (es);
  }

  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_false (g_file_test (job.socket, G_FILE_TEST_EXISTS));
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_free (out); g_free (err);

  /* Gone: no such job. */
  g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", f1, "--duration", "0.2", NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  job_clear (&job);
  g_free (pid);
  g_free (f0); g_free (f1); g_free (f2); g_free (f3); g_free (saved);
  ctx_clear (&c);
}

static void
test_serve_trace_to_completion (void)
{
  Ctx c;
  Job job;
  char *out, *err, *t;
  int status;

  ctx_init (&c);
  t = ctx_path (&c, "served.pptrace");
  job_start (&c, &job, "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve", "--steps", "3",
             "--trace", t, NULL);
  status = job_wait (&job, 60000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpint (info_spans (&c, t, "schedule: 1F1B (P=4, M=8, V=1)\n"), ==, 3 * 64);
  g_assert_cmpint (run (&c, &out, &err, "info", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "steps: 3\n"));
  g_assert_nonnull (strstr (out, "plans: 4\n"));
  g_assert_nonnull (strstr (out, "backend: simulated\n"));
  g_assert_nonnull (strstr (out, "--serve"));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_free (out); g_free (err);
  job_clear (&job);
  g_free (t);
  ctx_clear (&c);
}

static void
test_serve_sigterm (void)
{
  Ctx c;
  Job job;
  char *out, *err, *t;
  int status;

  ctx_init (&c);
  t = ctx_path (&c, "stopped.pptrace");
  job_start (&c, &job, "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve", "--trace", t, NULL);
  g_assert_true (jobs_lists (&c, &job, NULL));
  /* once it has served a span, not after a sleep: its trace then has one */
  char *served = ctx_path (&c, "served.pptrace");
  wait_served (&c, &job, served);
  g_free (served);
  g_assert_cmpint (kill (job.pid, SIGTERM), ==, 0);
  status = job_wait (&job, 60000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpint (info_spans (&c, t, "schedule: 1F1B (P=4, M=8, V=1)\n"), >, 0);
  g_assert_false (g_file_test (job.socket, G_FILE_TEST_EXISTS));
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_free (out); g_free (err);

  /* SIGINT too. */
  job_clear (&job);
  job_start (&c, &job, "schedule", "-s", "GPipe", "-p", "2", "-m", "2", "--serve", NULL);
  g_usleep (50000);
  g_assert_cmpint (kill (job.pid, SIGINT), ==, 0);
  status = job_wait (&job, 60000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);

  job_clear (&job);
  g_free (t);
  ctx_clear (&c);
}

/* A job that dies while recorded (SIGKILL: its registry entry is left
 * behind) is not a normal end: exit 1, one line saying so and how much the
 * file kept, and the file reads. */
static void
test_record_killed_job (void)
{
  Ctx c;
  Job job;
  char *out, *err, *pid, *f;

  ctx_init (&c);
  f = ctx_path (&c, "killed.pptrace");
  job_start (&c, &job, "schedule", "-s", "1F1B", "-p", "2", "-m", "4", "--serve", NULL);
  g_assert_true (jobs_lists (&c, &job, NULL));
  pid = pid_str (&job);
  /* the record's history then holds a span before the kill */
  char *served = ctx_path (&c, "served.pptrace");
  wait_served (&c, &job, served);
  g_free (served);
  Killer k = { job.pid, f, SIGKILL };
  GThread *t = g_thread_new ("killer", kill_when_recording, &k);
  g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", f, NULL), ==, 1);
  g_thread_join (t);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "died without ending its stream"));
  g_assert_nonnull (strstr (err, f));
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f, "schedule: 1F1B (P=2, M=4, V=1)\n"), >, 0);
  job_wait (&job, 60000);
  job.pid = 0;
  job_clear (&job);
  g_free (pid);
  g_free (f);
  ctx_clear (&c);
}

static void
test_tcp (void)
{
  Ctx c;
  Job job;
  char *out, *err, *f, *bad;
  int status;

  ctx_init (&c);
  f = ctx_path (&c, "tcp.pptrace");
  bad = ctx_path (&c, "bad-token.pptrace");
  job_start (&c, &job, "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve",
             "--listen", "127.0.0.1:0", NULL);
  g_assert_nonnull (job.tcp);
  g_assert_nonnull (job.token);
  g_assert_true (g_str_has_prefix (job.tcp, "127.0.0.1:"));
  g_assert_cmpstr (job.tcp, !=, "127.0.0.1:0");
  /* once it has served a span, so the short record below holds one */
  {
    char *served = ctx_path (&c, "served.pptrace");
    wait_served (&c, &job, served);
    g_free (served);
  }

  /* HOST:PORT without --token: a usage error. */
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "-o", f, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "--token"));
  g_free (out); g_free (err);
  g_assert_false (g_file_test (f, G_FILE_TEST_EXISTS));

  /* The token from a private file (--token on the command line would add
   * a warning: test-cli-hostile). */
  char *tok = ctx_path (&c, "token"), *badtok = ctx_path (&c, "bad-token");
  g_assert_true (g_file_set_contents (tok, job.token, -1, NULL));
  g_assert_true (g_file_set_contents (badtok, "not-the-token\n", -1, NULL));
  g_assert_cmpint (g_chmod (tok, 0600), ==, 0);
  g_assert_cmpint (g_chmod (badtok, 0600), ==, 0);
  g_assert_cmpint (run (&c, &out, &err, "record", job.tcp, "--token-file", tok, "-o", f,
                        "--duration", "0.3", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  g_assert_cmpint (info_spans (&c, f, "schedule: 1F1B (P=4, M=8, V=1)\n"), >, 0);

  /* A wrong token: refused, one line, exit 1. */
  status = run (&c, &out, &err, "record", job.tcp, "--token-file", badtok, "-o", bad,
                "--duration", "0.3", NULL);
  g_assert_cmpint (status, ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  /* jobs shows the TCP endpoint. */
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_nonnull (strstr (out, job.tcp));
  g_free (out); g_free (err);

  kill (job.pid, SIGTERM);
  status = job_wait (&job, 60000);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  job_clear (&job);
  g_free (f); g_free (bad);
  g_free (tok); g_free (badtok);
  ctx_clear (&c);
}

static void
test_errors (void)
{
  Ctx c;
  char *out, *err, *f;

  ctx_init (&c);
  f = ctx_path (&c, "never.pptrace");

  /* No such job: one line, exit 1, no file. */
  g_assert_cmpint (run (&c, &out, &err, "record", "999999", "-o", f, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_assert_false (g_file_test (f, G_FILE_TEST_EXISTS));

  g_assert_cmpint (run (&c, &out, &err, "record", "no-such-job", "-o", f, "--duration", "1", NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  /* Usage errors: exit 2, one line. */
  {
    const char *cases[][10] = {
      { "record", "999999", NULL },                                   /* no -o */
      { "record", "-o", "x", NULL },                                  /* no job */
      { "record", "1", "2", "-o", "x", NULL },
      { "record", "1", "-o", "x", "--duration", "0", NULL },
      { "record", "1", "-o", "x", "--duration", "soon", NULL },
      { "record", "127.0.0.1:9", "-o", "x", NULL },                   /* TCP, no token */
      { "jobs", "extra", NULL },
      { "jobs", "--bogus", NULL },
      { "schedule", "-s", "1F1B", "-p", "2", "-m", "2", "--steps", "3", NULL },
      { "schedule", "-s", "1F1B", "-p", "2", "-m", "2", "--listen", "127.0.0.1:0", NULL },
    };
    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        const char **a = cases[i];
        int rc = run (&c, &out, &err, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], NULL);
        if (rc != 2)
          g_error ("case %" G_GSIZE_FORMAT ": exit %d, stderr '%s'", i, rc, err);
        pp_test_assert_one_line_error (err);
        g_free (out); g_free (err);
      }
  }
  g_assert_cmpint (run (&c, &out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "2", "--serve",
                        "--steps", "0", NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  /* Help and the command list. */
  g_assert_cmpint (run (&c, &out, &err, "record", "--help", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "Usage: pipescope-cli record JOB -o FILE"));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&c, &out, &err, "--help", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "  jobs "));
  g_assert_nonnull (strstr (out, "  record "));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&c, &out, &err, "frobnicate", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "jobs, record"));
  g_free (out); g_free (err);

  g_free (f);
  ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-live/errors", test_errors);
  g_test_add_func ("/cli-live/jobs-and-record", test_jobs_and_record);
  g_test_add_func ("/cli-live/serve-trace", test_serve_trace_to_completion);
  g_test_add_func ("/cli-live/serve-sigterm", test_serve_sigterm);
  g_test_add_func ("/cli-live/tcp", test_tcp);
  g_test_add_func ("/cli-live/record-killed-job", test_record_killed_job);
  return g_test_run ();
}
