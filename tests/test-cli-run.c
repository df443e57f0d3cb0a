/* pipescope-cli run: trains the bundled network as a user runs it.
 *
 * Every child gets XDG_RUNTIME_DIR set to a fresh temporary directory, so
 * the jobs registry is private to the test. */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <math.h>
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
#define ctx_init(c) pp_test_ctx_init ((c), "pp-cli-run")
#define ctx_clear(c) pp_test_ctx_clear (c)
#define ctx_path(c, name) pp_test_ctx_path ((c), (name))

/* The losses of the "step N  loss X  time T ms  samples/s S" lines, in order. */
static GArray *
step_losses (const char *out, GArray *steps)
{
  GArray *losses = g_array_new (FALSE, FALSE, sizeof (double));
  char **lines = g_strsplit (out, "\n", -1);

  for (char **l = lines; *l; l++)
    {
      int step;
      double loss, ms, sps;
      if (g_str_has_prefix (*l, "step ")
          && sscanf (*l, "step %d  loss %lf  time %lf ms  samples/s %lf", &step, &loss, &ms, &sps) == 4)
        {
          g_assert_true (isfinite (loss));
          g_assert_cmpfloat (ms, >=, 0);
          g_assert_cmpfloat (sps, >, 0);
          g_array_append_val (losses, loss);
          if (steps)
            g_array_append_val (steps, step);
        }
    }
  g_strfreev (lines);
  return losses;
}

/* A run's stderr is quiet, but for the one-line notice of a CUDA build that
 * trains on the CPU (these tests run where there is no GPU). */
static void
assert_run_stderr_quiet (const char *err)
{
  if (g_getenv ("PP_HAVE_CUDA") != NULL)
    {
      g_assert_true (g_str_has_suffix (err, "; using the CPU backend\n"));
      g_assert_cmpint (pp_test_count (err, "\n"), ==, 1);
    }
  else
    g_assert_cmpstr (err, ==, "");
}

static void
test_run_trace (void)
{
  Ctx c;
  char *out, *err, *t;
  GArray *losses, *steps = g_array_new (FALSE, FALSE, sizeof (int));

  ctx_init (&c);
  t = ctx_path (&c, "run.pptrace");
  g_assert_cmpint (run (&c, &out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4",
                        "--width", "16", "--steps", "30", "--no-live", "--trace", t, NULL), ==, 0);
  assert_run_stderr_quiet (err);
  g_assert_nonnull (strstr (out, "backend: cpu"));
  losses = step_losses (out, steps);
  /* N = 30 > 20: step 1, every 30/20 = 1 steps, and the last: all of them. */
  g_assert_cmpint (losses->len, ==, 30);
  /* numbered from 0, as the trace and every other output (issue 30) */
  g_assert_cmpint (g_array_index (steps, int, 0), ==, 0);
  g_assert_cmpint (g_array_index (steps, int, steps->len - 1), ==, 29);
  g_assert_cmpfloat (g_array_index (losses, double, losses->len - 1), <, g_array_index (losses, double, 0));
  /* The table: a line per rank, the closed form of 1F1B (P-1)/(M+P-1) = 20%. */
  g_assert_nonnull (strstr (out, "steps 14\u201329 (16 steps: whole steps after the first, the last 16 at most)"));
  g_assert_nonnull (strstr (out, "measured bubble a step"));
  g_assert_cmpint (pp_test_count (out, "20.0%\n"), ==, 2);
  g_assert_nonnull (strstr (out, "samples/s"));
  g_array_free (losses, TRUE);
  g_array_free (steps, TRUE);
  char *run_out = out;
  g_free (err);

  g_assert_cmpint (run (&c, &out, &err, "info", t, NULL), ==, 0);
  /* One bubble: run's figure a rank is info's (and the app's, which is
   * the same model function as info's) for the same trace, to the digit. */
  for (int r = 0; r < 2; r++)
    {
      char want[32], *line = g_strdup_printf ("\n%4d  ", r);
      const char *at = strstr (run_out, "measured bubble a step");
      g_assert_nonnull (at);
      at = strstr (at, line);
      g_assert_nonnull (at);
      double b = -1;
      g_assert_cmpint (sscanf (at, " %*d %lf%%", &b), ==, 1);
      g_snprintf (want, sizeof want, "  rank %d bubble: %.1f%%\n", r, b);
      g_assert_nonnull (strstr (out, want));
      g_free (line);
    }
  g_free (run_out);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, "schedule: 1F1B (P=2, M=4, V=1)\n"));
  g_assert_nonnull (strstr (out, "backend: cpu\n"));
  g_assert_nonnull (strstr (out, "model: residual MLP: 4 blocks, width 16, hidden 64, batch 16; "
                                 "no edge samples in gaps under 10 us\n"));
  g_assert_nonnull (strstr (out, "steps: 30\n"));
  /* 30 steps x 4 micro-batches x 2 ranks of F and of B. */
  g_assert_nonnull (strstr (out, "(F 240, B 240"));
  g_assert_nonnull (strstr (out, "bubble, plan at measured costs (the last plan of each rank"));
  g_assert_nonnull (strstr (out, "truncated: no\n"));
  g_free (out);
  g_free (err);

  /* Sampled step lines: N = 100 prints the first step, every 5th, and the last. */
  g_assert_cmpint (run (&c, &out, &err, "run", "-s", "GPipe", "-p", "2", "-m", "2", "--layers", "2",
                        "--width", "8", "--steps", "100", "--no-live", NULL), ==, 0);
  steps = g_array_new (FALSE, FALSE, sizeof (int));
  losses = step_losses (out, steps);
  g_assert_cmpint (losses->len, ==, 21);
  g_assert_cmpint (g_array_index (steps, int, 0), ==, 0);   /* numbered from 0 */
  g_assert_cmpint (g_array_index (steps, int, 1), ==, 4);
  g_assert_cmpint (g_array_index (steps, int, steps->len - 1), ==, 99);
  g_array_free (losses, TRUE);
  g_array_free (steps, TRUE);
  g_free (out);
  g_free (err);

  g_free (t);
  ctx_clear (&c);
}

static void
test_rejections (void)
{
  static const struct {
    const char *args[24];
    const char *want;
  } cases[] = {
    { { "-s", "1F1B", "-p", "4", "-m", "4", "--layers", "3", NULL },
      "--layers 3 cannot be split over 4 stages; use --layers 4 or more" },
    { { "-s", "ZBV", "-p", "2", "-m", "4", "--layers", "3", NULL },
      "--layers 3 cannot be split over 4 stages" },
    { { "-s", "DualPipeV", "-p", "2", "-m", "3", NULL }, NULL },
    { { "-s", "nope", "-p", "2", "-m", "4", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--batch", "10", NULL }, "--batch 10 is not a multiple of --microbatches 4" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4", "--partition", "1,2", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4", "--partition", "1,1,2", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4", "--partition", "x", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--width", "100000", "--layers", "1000", NULL },
      "the machine has" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--backend", "cuda", NULL }, "use --backend cpu" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--backend", "tpu", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--gpu-partition", "mig", NULL }, "unknown --gpu-partition 'mig'" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--compute", "fp8", NULL }, "unknown --compute 'fp8'" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--gpu-transport", "ib", NULL }, "unknown --gpu-transport 'ib'" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--no-live", "--listen", "127.0.0.1:0", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", NULL }, "--microbatches" },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--steps", "0", NULL }, NULL },
    { { "-s", "1F1B", "-p", "2", "-m", "4", "--lr", "-1", NULL }, NULL },
  };
  Ctx c;
  char *t;

  ctx_init (&c);
  t = ctx_path (&c, "never.pptrace");
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *argv[40];
      int n = 0;
      char *out, *err;
      GError *error = NULL;
      int status;

      argv[n++] = pp_test_cli_path ();
      argv[n++] = "run";
      for (int k = 0; cases[i].args[k]; k++)
        argv[n++] = cases[i].args[k];
      argv[n++] = "--trace";
      argv[n++] = t;
      argv[n++] = NULL;
      if (!g_spawn_sync (NULL, (char **) argv, c.envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                         &status, &error))
        g_error ("spawn: %s", error->message);
      g_test_message ("case %zu: %s", i, err);
      g_assert_true (WIFEXITED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 2);
      pp_test_assert_one_line_error (err);
      if (cases[i].want)
        g_assert_nonnull (strstr (err, cases[i].want));
      g_assert_cmpstr (out, ==, "");
      /* Refused before any work: no trace, no job. */
      g_assert_false (g_file_test (t, G_FILE_TEST_EXISTS));
      g_free (out);
      g_free (err);
    }
  g_free (t);
  ctx_clear (&c);
}

/* ---- a run in the background ---------------------------------------------- */

typedef struct {
  GPid pid;
  int  out_fd, err_fd;
} Child;

static void
child_start (Ctx *c, Child *ch, const char *const *args)
{
  GPtrArray *argv = g_ptr_array_new ();
  GError *error = NULL;

  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  for (int i = 0; args[i]; i++)
    g_ptr_array_add (argv, (char *) args[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async_with_pipes (NULL, (char **) argv->pdata, c->envp, G_SPAWN_DO_NOT_REAP_CHILD,
                                 NULL, NULL, &ch->pid, NULL, &ch->out_fd, &ch->err_fd, &error))
    g_error ("spawn: %s", error->message);
  g_ptr_array_free (argv, TRUE);
}

/* Reads fd to its end (the child exited or will). */
static char *
read_all (int fd)
{
  GString *s = g_string_new (NULL);
  char buf[4096];
  ssize_t n;
  while ((n = read (fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (s, buf, n);
  return g_string_free (s, FALSE);
}

/* Reads fd until a line with prefix arrives (a minute at most: a hang
 * guard, not a claim on speed). */
static char *
read_line_with (int fd, const char *prefix)
{
  GString *buf = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  for (;;)
    {
      const char *p = strstr (buf->str, prefix);
      if (p != NULL && strchr (p, '\n') != NULL)
        return g_string_free (buf, FALSE);
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      char chunk[256];
      int left = (int) ((deadline - g_get_monotonic_time ()) / 1000);
      if (left <= 0)
        g_error ("no '%s' line in a minute (got '%s')", prefix, buf->str);
      if (poll (&pfd, 1, left) <= 0)
        continue;
      ssize_t n = read (fd, chunk, sizeof chunk);
      if (n <= 0)
        g_error ("output ended before a '%s' line (got '%s')", prefix, buf->str);
      g_string_append_len (buf, chunk, n);
    }
}

static int
child_wait (Child *ch, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (;;)
    {
      int status;
      if (waitpid (ch->pid, &status, WNOHANG) == ch->pid)
        {
          ch->pid = 0;
          return status;
        }
      if (g_get_monotonic_time () > deadline)
        return -1;
      g_usleep (10000);
    }
}

static void
child_clear (Child *ch)
{
  if (ch->pid > 0)
    {
      kill (ch->pid, SIGKILL);
      child_wait (ch, 5000);
    }
  close (ch->out_fd);
  close (ch->err_fd);
}

static void
test_sigint (void)
{
  Ctx c;
  Child ch;
  char *out, *err, *t, *first;
  int status;

  ctx_init (&c);
  t = ctx_path (&c, "stopped.pptrace");
  {
    const char *args[] = { "run", "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4", "--width", "32",
                           "--steps", "1000000", "--no-live", "--trace", t, NULL };
    child_start (&c, &ch, args);
  }
  first = read_line_with (ch.out_fd, "step 0 ");
  g_usleep (G_USEC_PER_SEC);
  g_assert_cmpint (kill (ch.pid, SIGINT), ==, 0);
  status = child_wait (&ch, 60000);   /* a hang guard */
  g_assert_cmpint (status, !=, -1);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  out = read_all (ch.out_fd);
  err = read_all (ch.err_fd);
  assert_run_stderr_quiet (err);
  g_assert_nonnull (strstr (out, "stopped after "));
  g_assert_nonnull (strstr (out, "measured bubble a step"));
  g_free (out);
  g_free (err);
  g_free (first);

  g_assert_cmpint (run (&c, &out, &err, "info", t, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, "schedule: 1F1B (P=2, M=4, V=1)\n"));
  g_assert_nonnull (strstr (out, "truncated: no\n"));
  g_assert_null (strstr (out, "\nspans: 0"));
  g_free (out);
  g_free (err);

  child_clear (&ch);
  g_free (t);
  ctx_clear (&c);
}

static void
test_live (void)
{
  Ctx c;
  Child ch;
  char *out, *err, *line, *want, *rec;
  int status;

  ctx_init (&c);
  rec = ctx_path (&c, "recorded.pptrace");
  {
    const char *args[] = { "run", "-s", "ZB-H1", "-p", "2", "-m", "4", "--layers", "4", "--width", "32",
                           "--steps", "1000000", NULL };
    child_start (&c, &ch, args);
  }
  line = read_line_with (ch.err_fd, "; Ctrl-C stops");
  want = g_strdup_printf ("serving ZB-H1-%d (pid %d) on ", (int) ch.pid, (int) ch.pid);
  /* after the CPU-backend notice of a CUDA build, if any */
  g_assert_nonnull (strstr (line, want));
  g_free (want);
  g_free (line);

  /* jobs lists it while it runs. */
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  want = g_strdup_printf ("\n%d ", (int) ch.pid);   /* under the column headers */
  g_assert_true (g_str_has_prefix (out, "PID "));
  g_assert_nonnull (strstr (out, want));
  g_assert_nonnull (strstr (out, " ZB-H1 "));
  g_free (want);
  g_free (out);
  g_free (err);

  /* record attaches to it, again until what it records holds a W block
   * (the job keeps its history: once it has served one, every record
   * holds it; on a loaded machine the first half second may not).  A
   * minute is a hang guard. */
  {
    char *pid = g_strdup_printf ("%d", (int) ch.pid);
    gint64 t0 = g_get_monotonic_time ();
    for (;;)
      {
        g_assert_cmpint (run (&c, &out, &err, "record", pid, "-o", rec, "--duration", "0.5", NULL), ==, 0);
        g_assert_cmpstr (err, ==, "");
        g_free (out);
        g_free (err);
        g_assert_cmpint (run (&c, &out, &err, "info", rec, NULL), ==, 0);
        if (strstr (out, "W ") != NULL || g_get_monotonic_time () - t0 > 60 * G_USEC_PER_SEC)
          break;
        g_free (out);
        g_free (err);
      }
    g_free (pid);
  }
  g_assert_nonnull (strstr (out, "schedule: ZB-H1 (P=2, M=4, V=1)\n"));
  g_assert_nonnull (strstr (out, "backend: cpu\n"));
  g_assert_nonnull (strstr (out, "W "));
  g_free (out);
  g_free (err);

  g_assert_cmpint (kill (ch.pid, SIGTERM), ==, 0);
  status = child_wait (&ch, 60000);   /* a hang guard */
  g_assert_cmpint (status, !=, -1);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  out = read_all (ch.out_fd);
  g_assert_nonnull (strstr (out, "stopped after "));
  g_free (out);

  /* Gone from the registry. */
  g_assert_cmpint (run (&c, &out, &err, "jobs", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "no running pipescope jobs\n");
  g_free (out);
  g_free (err);

  child_clear (&ch);
  g_free (rec);
  ctx_clear (&c);
}

/* A custom order from PyTorch's CSV trains like the named schedule it was
 * written from: the same losses, step by step. */
static void
test_csv (void)
{
  Ctx c;
  char *out, *err, *csv, *out2, *err2;
  ctx_init (&c);
  csv = ctx_path (&c, "zbv.csv");
  g_assert_cmpint (run (&c, &out, &err, "schedule", "-s", "ZBV", "-p", "2", "-m", "4", "-f", "csv", NULL), ==, 0);
  g_assert_true (g_file_set_contents (csv, out, -1, NULL));
  g_free (out); g_free (err);

  g_assert_cmpint (run (&c, &out, &err, "run", "--csv", csv, "--layers", "4", "--width", "16",
                        "--steps", "5", "--no-live", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "run custom: P=2, M=4, V=2"));
  g_assert_cmpint (run (&c, &out2, &err2, "run", "-s", "ZBV", "-p", "2", "-m", "4", "--layers", "4",
                        "--width", "16", "--steps", "5", "--no-live", NULL), ==, 0);
  GArray *a = step_losses (out, NULL), *b = step_losses (out2, NULL);
  g_assert_cmpuint (a->len, ==, 5);
  g_assert_cmpuint (b->len, ==, 5);
  for (guint i = 0; i < a->len; i++)
    g_assert_cmpfloat (g_array_index (a, double, i), ==, g_array_index (b, double, i));
  g_array_free (a, TRUE); g_array_free (b, TRUE);
  g_free (out); g_free (err); g_free (out2); g_free (err2);

  /* --csv with --schedule is a usage error; a missing file is one line */
  g_assert_cmpint (run (&c, &out, &err, "run", "--csv", csv, "-s", "ZBV", NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&c, &out, &err, "run", "--csv", "/nonexistent.csv", NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_free (csv);
  ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-run/trace", test_run_trace);
  g_test_add_func ("/cli-run/csv", test_csv);
  g_test_add_func ("/cli-run/rejections", test_rejections);
  g_test_add_func ("/cli-run/sigint", test_sigint);
  g_test_add_func ("/cli-run/live", test_live);
  return g_test_run ();
}
