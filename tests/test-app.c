/* test-app.c — the real pipescope window under Xvfb, driven by its own
 * --self-test: the default run starts and draws, Run starts a second one,
 * closing the window stops our jobs; attaching to an outside job draws it,
 * and the job's death leaves the data on screen; a job's torch.profiler
 * traces (JSON.gz, one per rank) open as one run.
 *
 * Runs itself again under `xvfb-run -a` when there is no display; exits 77
 * (skip) when there is neither. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "pp-registry.h"
#include "pp-test-util.h"

static char *tmp_dir;

static const char *
app_path (void)
{
  const char *p = g_getenv ("PIPESCOPE_APP");
  if (!p)
    g_error ("PIPESCOPE_APP is not set (meson sets it)");
  return p;
}

static GSubprocess *
spawn_app (GError **error, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer) app_path ());
  va_list ap;
  va_start (ap, error);
  for (const char *a; (a = va_arg (ap, const char *));)
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return g_subprocess_newv ((const char *const *) argv->pdata,
                            G_SUBPROCESS_FLAGS_STDOUT_PIPE, error);
}

/* Reads the app's lines until it exits; calls on_line for each. */
static char *
read_all_lines (GSubprocess *app, void (*on_line) (const char *line, gpointer data), gpointer data)
{
  g_autoptr (GDataInputStream) in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (app));
  GString *all = g_string_new (NULL);
  char *line;
  while ((line = g_data_input_stream_read_line_utf8 (in, NULL, NULL, NULL)))
    {
      g_test_message ("app: %s", line);
      g_string_append_printf (all, "%s\n", line);
      if (on_line)
        on_line (line, data);
      g_free (line);
    }
  g_assert_true (g_subprocess_wait (app, NULL, NULL));
  return g_string_free (all, FALSE);
}

static void
assert_gone (int pid)
{
  g_assert_cmpint (pid, >, 0);
  errno = 0;
  g_assert_cmpint (kill (pid, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);
}

static size_t
n_registered (void)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  PpError err = { 0 };
  g_assert_cmpint (pp_registry_list (&jobs, &n, &err), ==, PP_OK);
  free (jobs);
  return n;
}

/* ---- torch.profiler traces given on the command line ----------------------------- */

static void
test_app_open_json (void)
{
  const char *data = g_getenv ("PP_TEST_DATA_DIR");
  g_assert_nonnull (data);
  g_autofree char *r0 = g_build_filename (data, "kineto", "zbv", "rank0.json.gz", NULL);
  g_autofree char *r1 = g_build_filename (data, "kineto", "zbv", "rank1.json.gz", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=open", r0, r1, NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  /* the two ranks' files are one run, imported as the ZBV it ran */
  g_assert_nonnull (strstr (out, "self-test: opened 1 run(s): 2 ranks, "));
  g_assert_nonnull (strstr (out, "schedule ZBV\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: open"));
}

/* issue 42: a trace of a schedule with a long name (Megatron-Interleaved)
 * selects it in the run controls; the row's title stays whole, on one
 * line, where it wrapped as "Sch-edul-e" */
static void
test_app_open_long_schedule (void)
{
  g_autofree char *trace = g_build_filename (tmp_dir, "megatron.pptrace", NULL);
  const char *make[] = { g_getenv ("PIPESCOPE_CLI"), "schedule", "-s", "Megatron-Interleaved", "-p", "4", "-m", "8",
                         "-v", "2", "--trace", trace, NULL };
  int status = 0;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=open", trace, NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "schedule Megatron-Interleaved"));
  g_assert_nonnull (strstr (out, "self-test: the Schedule title on 1 line(s)\n"));
}

/* ---- a second pipescope hands its file to the first -------------------------------- */

struct Second
{
  const char *trace;
  gboolean    spawned, exited, timed_out;
  int         status;
  char       *out;
};

static gboolean
on_timeout_flag (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static void
on_second_exited (GObject *source, GAsyncResult *res, gpointer data)
{
  struct Second *s = data;
  g_assert_true (g_subprocess_wait_finish (G_SUBPROCESS (source), res, NULL));
  s->exited = TRUE;
}

/* The first says its mode once it owns the app's name: then the second,
 * a plain `pipescope FILE`, starts, and must end by itself (a hang guard,
 * not a time asserted: a second that opened its own window never would). */
static void
on_first_line (const char *line, gpointer data)
{
  struct Second *s = data;
  if (s->spawned || strstr (line, "self-test: mode second-instance") == NULL)
    return;
  s->spawned = TRUE;
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) second = spawn_app (&error, s->trace, NULL);
  g_assert_no_error (error);
  g_subprocess_wait_async (second, NULL, on_second_exited, s);
  guint id = g_timeout_add (60000, on_timeout_flag, &s->timed_out);
  while (!s->exited && !s->timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!s->exited)
    {
      g_subprocess_force_exit (second);
      g_error ("the second pipescope did not exit: it opened a window of its own");
    }
  g_source_remove (id);
  g_assert_true (g_subprocess_get_if_exited (second));
  s->status = g_subprocess_get_exit_status (second);
  g_autoptr (GBytes) out = NULL;
  GInputStream *in = g_subprocess_get_stdout_pipe (second);
  out = g_input_stream_read_bytes (in, 65536, NULL, NULL);
  s->out = g_strndup (out ? g_bytes_get_data (out, NULL) : "", out ? g_bytes_get_size (out) : 0);
}

/* issue 42: `pipescope FILE` while one runs spent seconds starting a
 * process of its own; now the running one (unique on the session bus)
 * opens the file as a new run of its window, and the second exits. */
static void
test_app_second_instance (void)
{
  g_autofree char *daemon = g_find_program_in_path ("dbus-daemon");
  if (daemon == NULL)
    {
      g_test_skip ("no dbus-daemon for a session bus");
      return;
    }
  g_autofree char *trace = g_build_filename (tmp_dir, "second.pptrace", NULL);
  const char *make[] = { g_getenv ("PIPESCOPE_CLI"), "schedule", "-s", "1F1B", "-p", "2", "-m", "4",
                         "--trace", trace, NULL };
  int status = 0;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));

  /* a session bus of our own; up and down, it unsets DISPLAY (no X11
   * autolaunch) and the bus's address: the app and the next tests need
   * them back */
  g_autofree char *display = g_strdup (g_getenv ("DISPLAY"));
  g_autofree char *address = g_strdup (g_getenv ("DBUS_SESSION_BUS_ADDRESS"));
  GTestDBus *bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (bus);
  if (display != NULL)
    g_setenv ("DISPLAY", display, TRUE);
  struct Second s = { .trace = trace, .status = -1 };
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) first = spawn_app (&error, "--self-test=second-instance", "--no-run", NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (first, on_first_line, &s);
  g_test_dbus_down (bus);
  g_object_unref (bus);
  if (display != NULL)
    g_setenv ("DISPLAY", display, TRUE);
  if (address != NULL)
    g_setenv ("DBUS_SESSION_BUS_ADDRESS", address, TRUE);

  g_assert_true (s.spawned);
  g_assert_true (s.exited);
  g_assert_cmpint (s.status, ==, 0);
  g_assert_null (strstr (s.out, "self-test"));   /* no window of its own */
  g_free (s.out);
  /* the first process opened the second's file */
  g_assert_true (g_subprocess_get_if_exited (first));
  g_assert_cmpint (g_subprocess_get_exit_status (first), ==, 0);
  g_assert_nonnull (strstr (out, "self-test: opened 1 run(s): 2 ranks, "));
  g_assert_nonnull (strstr (out, "schedule 1F1B\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: second-instance"));
}

/* ---- a trace the window cannot show: the reason, as text -------------------------- */

/* Schedule1F1B labels none of its actions for torch.profiler: the import
 * refuses it with one line naming `<action>`.  The window says the same
 * line on its empty page (not markup: no GTK warning), as the CLI does. */
static void
test_app_open_error (void)
{
  const char *data = g_getenv ("PP_TEST_DATA_DIR"), *cli = g_getenv ("PIPESCOPE_CLI");
  g_assert_nonnull (data);
  g_assert_nonnull (cli);
  g_autofree char *r0 = g_build_filename (data, "kineto", "1f1b", "rank0.json.gz", NULL);
  g_autofree char *r1 = g_build_filename (data, "kineto", "1f1b", "rank1.json.gz", NULL);
  g_autofree char *out_trace = g_build_filename (tmp_dir, "refused.pptrace", NULL);

  /* the CLI's reason */
  g_autofree char *cli_err = NULL;
  int status = -1;
  const char *import[] = { cli, "import", r0, r1, "-o", out_trace, NULL };
  g_assert_true (g_spawn_sync (NULL, (char **) import, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                               &cli_err, &status, NULL));
  g_assert_false (g_spawn_check_wait_status (status, NULL));
  const char *prefix = "pipescope-cli: error: ";
  g_assert_true (g_str_has_prefix (cli_err, prefix));
  g_strchomp (cli_err);
  g_assert_null (strchr (cli_err, '\n'));
  g_assert_nonnull (strstr (cli_err, "<action>"));

  /* the app's, with its stderr read too */
  g_autoptr (GError) error = NULL;
  const char *argv[] = { app_path (), "--self-test=open-error", r0, r1, NULL };
  g_autoptr (GSubprocess) app = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                                         | G_SUBPROCESS_FLAGS_STDERR_MERGE, &error);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "self-test: open failed, shown: Could Not Open the Trace\n"));
  g_autofree char *want = g_strdup_printf ("self-test: reason shown: %s\n", cli_err + strlen (prefix));
  g_assert_nonnull (strstr (out, want));
  g_assert_null (strstr (out, "Gtk-WARNING"));
  g_assert_null (strstr (out, "markup"));
  g_assert_nonnull (strstr (out, "self-test: PASS: open-error"));
  g_assert_false (g_file_test (out_trace, G_FILE_TEST_EXISTS));
}

/* ---- Save Trace: the run on screen, saved and opened again ------------------------- */

static void
test_app_save (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=save", NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  /* the counts the window showed, and the same ones read back */
  const char *saved = strstr (out, "self-test: saved ");
  const char *again = strstr (out, "self-test: reopened saved.pptrace: ");
  g_assert_nonnull (saved);
  g_assert_nonnull (again);
  size_t s_spans = 0, s_steps = 0, a_spans = 0, a_steps = 0;
  const char *c = strstr (saved + strlen ("self-test: saved "), ": ");
  g_assert_nonnull (c);
  g_assert_cmpint (sscanf (c, ": %zu spans, %zu steps shown", &s_spans, &s_steps), ==, 2);
  g_assert_cmpint (sscanf (again + strlen ("self-test: reopened saved.pptrace"), ": %zu spans, %zu steps",
                           &a_spans, &a_steps), ==, 2);
  g_assert_cmpuint (s_spans, >, 0);
  g_assert_cmpuint (s_steps, >=, 3);
  g_assert_cmpuint (a_spans, ==, s_spans);
  g_assert_cmpuint (a_steps, ==, s_steps);
  g_assert_nonnull (strstr (out, "self-test: PASS: save"));
}

/* ---- a job of replicas: folded, a rank unfolded, all, one replica ------------------ */

/* A PP 2 x DP 2 job (pp-synth-mesh, merged by the CLI): the window opens
 * it folded (2 rows), a label click unfolds rank 1 (3), Ctrl+U every rank
 * (4), the switch shows replica 1 (2) and folds again (2); a screenshot
 * of each is a PNG of the rows shown. */
static void
test_app_replicas (void)
{
  const char *synth = g_getenv ("PP_SYNTH_MESH"), *cli = g_getenv ("PIPESCOPE_CLI");
  g_assert_nonnull (synth);
  g_assert_nonnull (cli);
  g_autofree char *dir = g_build_filename (tmp_dir, "replicas", NULL);
  g_autofree char *base = g_build_filename (dir, "job", NULL);
  g_autofree char *trace = g_build_filename (dir, "job.pptrace", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_autofree char *r0 = g_strconcat (base, ".rank0", NULL), *r1 = g_strconcat (base, ".rank1", NULL);
  g_autofree char *r2 = g_strconcat (base, ".rank2", NULL), *r3 = g_strconcat (base, ".rank3", NULL);
  const char *make[] = { synth, base, "2", "2", "4", "3", "1f1b", "--straggler", "1", "--stuck", "3", NULL };
  const char *merge[] = { cli, "merge", "-o", trace, r0, r1, r2, r3, NULL };
  const char *const *cmds[] = { make, merge };
  for (guint i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      int status = -1;
      g_assert_true (g_spawn_sync (NULL, (char **) cmds[i], NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                                   NULL, &status, NULL));
      g_assert_true (g_spawn_check_wait_status (status, NULL));
    }
  g_setenv ("PIPESCOPE_SELF_TEST_SHOTS", dir, TRUE);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=replicas", trace, NULL);
  g_unsetenv ("PIPESCOPE_SELF_TEST_SHOTS");
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "self-test: replicas folded: 2 rows (P 2, D 2)\n"));
  /* issue 37: the trace ended with process 3 stuck in a forward, 1
   * waiting for it: the banner over the timeline names it, as info does */
  g_assert_nonnull (strstr (out, "self-test: stuck banner: stuck: process 3 (pp 1 dp 1, host node0, pid 1003) in F mb 1 of "
                                 "step 3 for 40 s, in train.py:88 forward; process 1 waits for it: 1 in RECV_B "
                                 "mb 1 from 3\n"));
  g_assert_nonnull (strstr (out, "self-test: replicas rank-1-unfolded: 3 rows (P 2, D 2)\n"));
  g_assert_nonnull (strstr (out, "self-test: replicas all: 4 rows (P 2, D 2)\n"));
  g_assert_nonnull (strstr (out, "self-test: replicas replica-1: 2 rows (P 2, D 2)\n"));
  g_assert_nonnull (strstr (out, "self-test: replicas folded-again: 2 rows (P 2, D 2)\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: replicas"));
  const char *shots[] = { "folded", "rank-1-unfolded", "all", "replica-1", "folded-again" };
  for (guint i = 0; i < G_N_ELEMENTS (shots); i++)
    {
      g_autofree char *name = g_strdup_printf ("replicas-%s.png", shots[i]);
      g_autofree char *png = g_build_filename (dir, name, NULL);
      g_autofree char *data = NULL;
      gsize len = 0;
      g_assert_true (g_file_get_contents (png, &data, &len, NULL));
      g_assert_cmpuint (len, >, 8);
      g_assert_cmpmem (data, 8, "\x89PNG\r\n\x1a\n", 8);
    }
}

/* ---- the Stragglers tab (issue 38) ------------------------------------------------ */

/* A P x D job made by pp-synth-mesh (1F1B, M micro-batches, STEPS steps;
 * FLAG VALUE one of its options) and merged into one trace in
 * tmp_dir/NAME, whose path this returns. */
static char *
synth_job (const char *name, int P, int D, int M, int steps, const char *flag, const char *value)
{
  const char *synth = g_getenv ("PP_SYNTH_MESH"), *cli = g_getenv ("PIPESCOPE_CLI");
  g_assert_nonnull (synth);
  g_assert_nonnull (cli);
  g_autofree char *dir = g_build_filename (tmp_dir, name, NULL);
  g_autofree char *base = g_build_filename (dir, "job", NULL);
  char *trace = g_build_filename (dir, "job.pptrace", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  GPtrArray *merge = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (merge, g_strdup (cli));
  g_ptr_array_add (merge, g_strdup ("merge"));
  g_ptr_array_add (merge, g_strdup ("-o"));
  g_ptr_array_add (merge, g_strdup (trace));
  for (int g = 0; g < P * D; g++)
    g_ptr_array_add (merge, g_strdup_printf ("%s.rank%d", base, g));
  g_ptr_array_add (merge, NULL);
  g_autofree char *p = g_strdup_printf ("%d", P), *d = g_strdup_printf ("%d", D);
  g_autofree char *m = g_strdup_printf ("%d", M), *n = g_strdup_printf ("%d", steps);
  const char *make[] = { synth, base, p, d, m, n, "1f1b", flag, value, NULL };
  const char *const *cmds[] = { make, (const char *const *) merge->pdata };
  for (guint i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      int status = -1;
      g_assert_true (g_spawn_sync (NULL, (char **) cmds[i], NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                                   NULL, &status, NULL));
      g_assert_true (g_spawn_check_wait_status (status, NULL));
    }
  g_ptr_array_free (merge, TRUE);
  return trace;
}

/* A PP 2 x DP 3 job whose process at pp 1, dp 1 runs its blocks twice as
 * long (pp-synth-mesh --slow-stage 1): the tab names it first, a click on
 * its cell shows replica dp 1's rows, one step chosen counts one step. */
static void
test_app_stragglers (void)
{
  g_autofree char *trace = synth_job ("stragglers", 2, 3, 4, 3, "--slow-stage", "1");
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=stragglers", trace, NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  /* process G = pp x D + dp = 1 x 3 + 1 */
  g_assert_nonnull (strstr (out, "self-test: stragglers first: process 4 pp 1 dp 1\n"));
  g_assert_nonnull (strstr (out, "self-test: stragglers opened: replica dp 1\n"));
  g_assert_nonnull (strstr (out, "self-test: stragglers one step: 1\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: stragglers"));
}

/* ---- the panels analysed off the main loop (issue 40) ---------------------------- */

/* A PP 4 x DP 256 job (1,024 processes, one slow replica): the Statistics,
 * Why, Stragglers and What if tabs analyse it on a worker, so the main
 * loop runs meanwhile (its ticks counted between the run shown and its
 * analysis: none when the analysis ran inside that dispatch, as it did on
 * the main loop), and what they show is what pp_stats_numbers,
 * pp_why_panel_analyse and pp_why_panel_stragglers give directly.  The
 * window then closes with an analysis running; its result is dropped and
 * the app exits cleanly. */
static void
test_app_analysis (void)
{
  g_autofree char *trace = synth_job ("analysis", 4, 256, 8, 6, "--straggler", "3");
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=analysis", trace, NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  const char *ticks = strstr (out, "self-test: analysis: ");
  g_assert_nonnull (ticks);
  g_assert_cmpuint (strtoul (ticks + strlen ("self-test: analysis: "), NULL, 10), >, 0);
  g_assert_nonnull (strstr (out, " main-loop ticks while it ran\n"));
  g_assert_nonnull (strstr (out, "self-test: analysis: as computed directly: 4 ranks, 5 steps counted, 4 Why rows, "));
  g_assert_nonnull (strstr (out, "self-test: analysis: closing with an analysis running\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: analysis"));
  g_assert_nonnull (strstr (out, "self-test: analysis: the window went during its analysis; its result came after it, "
                                 "dropped\n"));
}

/* A plan-only trace of schedule S on 4 ranks, M micro-batches, in tmp_dir/NAME. */
static char *
schedule_trace (const char *name, const char *s, const char *m)
{
  char *trace = g_build_filename (tmp_dir, name, NULL);
  const char *make[] = { g_getenv ("PIPESCOPE_CLI"), "schedule", "-s", s, "-p", "4", "-m", m, "--trace", trace, NULL };
  int status = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return trace;
}

/* The Compare table of two runs is filled by the same worker (issue 40):
 * in the dispatch that adds a second run the table has no rows and the
 * analysis runs (on the main loop it had them at once); the pair changed
 * meanwhile (GPipe against 1F1B, then against 1F1B with 12 micro-batches),
 * the first pair's rows are dropped, the main loop runs until the second
 * pair's come, and they are pp_compare_runs' (schedule, P, M, V, steps,
 * median step, 4 ranks' bubbles, their mean: 11 rows; the mean bubble
 * 3/9 against 3/15). */
static void
test_app_compare (void)
{
  g_autofree char *a = schedule_trace ("cmp-gpipe.pptrace", "GPipe", "6");
  g_autofree char *b = schedule_trace ("cmp-1f1b.pptrace", "1F1B", "6");
  g_autofree char *c = schedule_trace ("cmp-1f1b-12.pptrace", "1F1B", "12");
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--no-run", "--self-test=compare", a, b, c, NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_nonnull (strstr (out, "self-test: compare: two runs shown: 0 rows, the analysis running\n"));
  const char *ticks = strstr (out, "self-test: compare: ");
  g_assert_nonnull ((ticks = strstr (ticks, "\nself-test: compare: ")));
  g_assert_cmpuint (strtoul (ticks + strlen ("\nself-test: compare: "), NULL, 10), >, 0);
  g_assert_nonnull (strstr (out, " main-loop ticks while it ran; the first pair's rows dropped\n"));
  g_assert_nonnull (strstr (out, "self-test: compare: as computed directly: 11 rows, Schedule: GPipe against 1F1B, "
                                 "Bubble a step, mean: 33.3 % against 20.0 %\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: compare"));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
}

/* ---- the host lane: a GC pause under the pointer (issue 29) ---------------------- */

/* pp-synth-host's trace (GC pauses of 3.2 ms in rank 0's gaps): the
 * self-test zooms to the first, puts the pointer over it in the host lane,
 * and the tooltip names it; the screenshot is a PNG. */
static void
test_app_host_lane (void)
{
  const char *synth = g_getenv ("PP_SYNTH_HOST");
  g_assert_nonnull (synth);
  g_autofree char *dir = g_build_filename (tmp_dir, "host-lane", NULL);
  g_autofree char *trace = g_build_filename (dir, "host.pptrace", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  const char *make[] = { synth, trace, NULL };
  int status = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_setenv ("PIPESCOPE_SELF_TEST_SHOTS", dir, TRUE);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=host-lane", trace, NULL);
  g_unsetenv ("PIPESCOPE_SELF_TEST_SHOTS");
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "self-test: host lane tooltip: GC pause 3.2 ms\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: host-lane"));
  g_autofree char *png = g_build_filename (dir, "host-lane.png", NULL);
  g_autofree char *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (png, &data, &len, NULL));
  g_assert_cmpuint (len, >, 8);
  g_assert_cmpmem (data, 8, "\x89PNG\r\n\x1a\n", 8);
}

/* ---- the Spans tab and Find (issue 30) -------------------------------------------- */

/* A ZB-H1 run of 4 ranks, 8 micro-batches, 6 steps on the CPU (F, I, W
 * blocks and the optimizer): the Spans tab lists every block in start
 * order and longest first after a click on Duration; Find "W" counts the
 * 4 x 8 x 6 W blocks, Enter and Shift+Enter walk them ("1 of 192", ...,
 * around to "192 of 192"), each selected on the timeline and in view; a
 * click on a line selects its block; the histogram holds each W once.
 * The window with the tab in view is saved as spans.png. */
static void
test_app_spans (void)
{
  const char *cli = g_getenv ("PIPESCOPE_CLI");
  g_assert_nonnull (cli);
  g_autofree char *dir = g_build_filename (tmp_dir, "spans", NULL);
  g_autofree char *trace = g_build_filename (dir, "zbh1.pptrace", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  const char *make[] = { cli, "run", "-s", "zbh1", "-p", "4", "-m", "8", "--steps", "6", "--backend", "cpu",
                         "--no-live", "--trace", trace, NULL };
  int status = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_setenv ("PIPESCOPE_SELF_TEST_SHOTS", dir, TRUE);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=spans", trace, NULL);
  g_unsetenv ("PIPESCOPE_SELF_TEST_SHOTS");
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  /* 4 ranks x 6 steps x (8 F + 8 I + 8 W + 1 OPT) blocks */
  g_assert_nonnull (strstr (out, "self-test: spans tab: 600 lines, 600 blocks on the timeline\n"));
  g_assert_nonnull (strstr (out, "self-test: sorted by duration: 600 lines, the longest first"));
  const char *counts[] = { "192 matches", "1 of 192", "2 of 192", "192 of 192", "3 of 192" };
  for (guint i = 0; i < G_N_ELEMENTS (counts); i++)
    {
      g_autofree char *line = g_strdup_printf ("self-test: find count: \"%s\"\n", counts[i]);
      g_assert_nonnull (strstr (out, line));
    }
  g_assert_nonnull (strstr (out, "self-test: histogram of W: 1 kind(s) x 4 rank(s), 192 blocks in its bins\n"));
  g_assert_nonnull (strstr (out, "self-test: a click on line 3 selects its block on the timeline, in view\n"));
  g_assert_nonnull (strstr (out, "self-test: PASS: spans"));
  g_autofree char *png = g_build_filename (dir, "spans.png", NULL);
  g_autofree char *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (png, &data, &len, NULL));
  g_assert_cmpuint (len, >, 8);
  g_assert_cmpmem (data, 8, "\x89PNG\r\n\x1a\n", 8);
}

/* ---- Profile a command: a real PyTorch job, a row per rank ---------------------- */

static void
test_app_profile (void)
{
  const char *py = g_getenv ("PIPESCOPE_TORCH_PYTHON"), *data = g_getenv ("PP_TEST_DATA_DIR");
  if (py == NULL || !*py)
    {
      g_test_skip ("PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)");
      return;
    }
  g_assert_nonnull (data);
  g_autofree char *bin = g_path_get_dirname (py);
  g_autofree char *torchrun = g_build_filename (bin, "torchrun", NULL);
  g_autofree char *train = g_build_filename (data, "..", "pytorch", "train.py", NULL);
  g_autofree char *out = g_build_filename (tmp_dir, "profile-out", NULL);
  g_autofree char *q_run = g_shell_quote (torchrun), *q_train = g_shell_quote (train), *q_out = g_shell_quote (out);
  g_autofree char *cmd = g_strdup_printf ("%s --standalone --nproc-per-node 2 %s --schedule Schedule1F1B "
                                          "--microbatches 4 --steps 100000 --out %s", q_run, q_train, q_out);
  g_setenv ("PIPESCOPE_SELF_TEST_PROFILE", cmd, TRUE);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=profile", "--no-run", NULL);
  g_unsetenv ("PIPESCOPE_SELF_TEST_PROFILE");
  g_assert_no_error (error);
  g_autofree char *lines = read_all_lines (app, NULL, NULL);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  /* one run, the job's two ranks as rows, named for what they are */
  g_assert_nonnull (strstr (lines, ": 1F1B, 2 ranks, rows 'CPU rank 0' and 'CPU rank 1'"));
  g_assert_nonnull (strstr (lines, "self-test: 'Waiting for Ranks' shown before the first block; then the timeline"));
  g_assert_nonnull (strstr (lines, "self-test: the profiled job stopped"));
  /* kept by default under the data folder, as nsys keeps a report */
  g_autofree char *kept = g_strdup_printf ("self-test: profile trace: %s/data/pipescope/profiles/train-", tmp_dir);
  g_assert_nonnull (strstr (lines, kept));
  g_assert_nonnull (strstr (lines, "self-test: PASS: profile"));
}

/* ---- the default run, a second run, close --------------------------------------- */

static void
test_app_run (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) app = spawn_app (&error, "--self-test=run", NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, NULL, NULL);

  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "self-test: PASS: run"));
  /* the default run has one rank per core, 2 to 4 */
  g_autofree char *ranks = g_strdup_printf ("spans on all %d ranks",
                                            CLAMP ((int) g_get_num_processors (), 2, 4));
  g_assert_nonnull (strstr (out, ranks));
  g_assert_nonnull (strstr (out, "12 micro-batches"));
  g_assert_nonnull (strstr (out, "Run disabled"));
  g_assert_nonnull (strstr (out, "exported Chrome JSON"));

  /* Both jobs the window started are gone, and unregistered. */
  int n_pids = 0;
  for (const char *p = out; (p = strstr (p, "(pid ")); p++)
    {
      assert_gone (atoi (p + 5));
      n_pids++;
    }
  g_assert_cmpint (n_pids, ==, 2);
  g_assert_cmpuint (n_registered (), ==, 0);
}

/* ---- attach to a job started elsewhere, which then dies ----------------------------- */

typedef struct {
  int      job_pid;
  gboolean killed;
} AttachState;

static void
on_attach_line (const char *line, gpointer data)
{
  AttachState *s = data;
  if (!s->killed && strcmp (line, "self-test: attached") == 0)
    {
      g_assert_cmpint (kill (s->job_pid, SIGKILL), ==, 0);
      s->killed = TRUE;
    }
}

static void
test_app_attach (void)
{
  g_autoptr (GError) error = NULL;
  /* Many steps: the job must outlive the app's start-up; the test kills it. */
  g_autoptr (GSubprocess) job =
    g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE, &error,
                      pp_test_cli_path (), "run", "-s", "1F1B", "-p", "2", "-m", "4",
                      "--steps", "100000", "--layers", "4", "--width", "32", NULL);
  g_assert_no_error (error);
  AttachState s = { atoi (g_subprocess_get_identifier (job)), FALSE };

  /* Wait until it registered (a minute: a hang guard). */
  char spec[16];
  g_snprintf (spec, sizeof spec, "%d", s.job_pid);
  PpJobInfo info;
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (pp_registry_find (spec, &info, NULL) != PP_OK)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (20000);
    }

  g_autoptr (GSubprocess) app = spawn_app (&error, "--attach", spec, "--self-test=attach", NULL);
  g_assert_no_error (error);
  g_autofree char *out = read_all_lines (app, on_attach_line, &s);
  if (!s.killed)
    kill (s.job_pid, SIGKILL);
  g_subprocess_wait (job, NULL, NULL);

  g_assert_true (s.killed);
  g_assert_true (g_subprocess_get_if_exited (app));
  g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 0);
  g_assert_nonnull (strstr (out, "spans on all 2 ranks"));
  g_assert_nonnull (strstr (out, "the attach dialog lists pid"));
  g_assert_nonnull (strstr (out, "run ended"));
  g_assert_nonnull (strstr (out, "self-test: PASS: attach"));
}

/* The token of a job on TCP stays off the command line: --token-file is
 * refused unless private, says why in one line, and exits 2 before any
 * window; --token with --token-file is refused too. */
static void
test_app_token_file (void)
{
  g_autofree char *tok = g_build_filename (tmp_dir, "token", NULL);
  g_assert_true (g_file_set_contents (tok, "0123456789abcdef\n", -1, NULL));
  g_assert_cmpint (g_chmod (tok, 0644), ==, 0);
  const char *const cases[][2] = {
    { "--token-file", "chmod 600" },
    { "--token", "not both" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (GPtrArray) argv = g_ptr_array_new ();
      g_ptr_array_add (argv, (gpointer) app_path ());
      if (i == 1)
        {
          g_ptr_array_add (argv, "--token");
          g_ptr_array_add (argv, "0123456789abcdef");
        }
      g_ptr_array_add (argv, "--token-file");
      g_ptr_array_add (argv, tok);
      g_ptr_array_add (argv, "--attach");
      g_ptr_array_add (argv, "127.0.0.1:9");
      g_ptr_array_add (argv, NULL);
      g_autoptr (GSubprocess) app = g_subprocess_newv ((const char *const *) argv->pdata,
                                                       G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
      g_assert_no_error (error);
      g_autofree char *err = NULL;
      g_assert_true (g_subprocess_communicate_utf8 (app, NULL, NULL, NULL, &err, &error));
      g_assert_true (g_subprocess_get_if_exited (app));
      g_assert_cmpint (g_subprocess_get_exit_status (app), ==, 2);
      g_assert_nonnull (strstr (err, cases[i][1]));
      g_assert_cmpint (pp_test_count (err, "\n"), ==, 1);
    }
}

int
main (int argc, char **argv)
{
  if (!g_getenv ("DISPLAY") && !g_getenv ("WAYLAND_DISPLAY"))
    {
      g_autofree char *xvfb = g_find_program_in_path ("xvfb-run");
      if (!xvfb || g_getenv ("PP_TEST_APP_REEXEC"))
        {
          printf ("no display and no xvfb-run: skipped\n");
          return 77;
        }
      g_setenv ("PP_TEST_APP_REEXEC", "1", TRUE);
      g_autoptr (GPtrArray) args = g_ptr_array_new ();
      g_ptr_array_add (args, xvfb);
      g_ptr_array_add (args, "-a");
      g_ptr_array_add (args, "-s");
      g_ptr_array_add (args, "-screen 0 1600x1000x24");
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_ptr_array_add (args, self ? self : argv[0]);
      for (int i = 1; i < argc; i++)
        g_ptr_array_add (args, argv[i]);
      g_ptr_array_add (args, NULL);
      execv (xvfb, (char **) args->pdata);
      printf ("could not run xvfb-run: %s: skipped\n", g_strerror (errno));
      return 77;
    }

  /* A private world: registry, cache, no accessibility bus, one renderer. */
  tmp_dir = g_dir_make_tmp ("test-app-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  g_autofree char *cache = g_build_filename (tmp_dir, "cache", NULL);
  g_setenv ("XDG_RUNTIME_DIR", tmp_dir, TRUE);
  g_setenv ("XDG_CACHE_HOME", cache, TRUE);
  /* Profile a Command keeps its traces under the data folder */
  g_autofree char *data_home = g_build_filename (tmp_dir, "data", NULL);
  g_setenv ("XDG_DATA_HOME", data_home, TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_setenv ("NO_AT_BRIDGE", "1", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("G_DEBUG", "fatal-criticals", TRUE);

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/app/run", test_app_run);
  g_test_add_func ("/app/attach", test_app_attach);
  g_test_add_func ("/app/token-file", test_app_token_file);
  g_test_add_func ("/app/open-json", test_app_open_json);
  g_test_add_func ("/app/open-long-schedule", test_app_open_long_schedule);
  g_test_add_func ("/app/second-instance", test_app_second_instance);
  g_test_add_func ("/app/profile", test_app_profile);
  g_test_add_func ("/app/replicas", test_app_replicas);
  g_test_add_func ("/app/stragglers", test_app_stragglers);
  g_test_add_func ("/app/open-error", test_app_open_error);
  g_test_add_func ("/app/save", test_app_save);
  g_test_add_func ("/app/spans", test_app_spans);
  g_test_add_func ("/app/host-lane", test_app_host_lane);
  g_test_add_func ("/app/analysis", test_app_analysis);
  g_test_add_func ("/app/compare", test_app_compare);
  int rc = g_test_run ();
  pp_test_rm_rf (tmp_dir);
  g_free (tmp_dir);
  return rc;
}
