/* test-hostile.c — the crafted traces of issue 18 ("Hostile input"): each
 * consumer finishes on each, within a memory limit (the CLI runs under
 * RLIMIT_AS = 1 GiB, so a blow-up fails the test), and says what it should:
 * counts of steps, ranks, rows and lines, and one-line errors.  Never a time.
 *
 *   test-hostile --write DIR          writes the small traces (tests/data/hostile/)
 *   test-hostile --write-corpus DIR   writes the fuzz seeds (tests/fuzz/corpus/)
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "hostile-traces.h"
#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

#define AS_LIMIT ((rlim_t) 1 << 30)

static char *tmpdir;

static char *
trace_path (const char *name)
{
  char *file = g_strdup_printf ("%s.pptrace", name);
  char *p = g_build_filename (tmpdir, file, NULL);
  g_free (file);
  if (!g_file_test (p, G_FILE_TEST_EXISTS) && pp_hostile_write (name, p) != 0)
    g_error ("cannot write %s", p);
  return p;
}

static void
limit_memory (gpointer data)
{
  struct rlimit rl = { AS_LIMIT, AS_LIMIT };
  setrlimit (RLIMIT_AS, &rl);
}

/* Runs pipescope-cli under the memory limit; returns its exit status. */
static int
cli (char **out, char **err, ...)
{
  GPtrArray *argv = g_ptr_array_new ();
  GError *error = NULL;
  va_list ap;
  const char *a;
  int status = -1;
  char **envp = g_environ_setenv (g_get_environ (), "OPENBLAS_NUM_THREADS", "1", TRUE);

  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  va_start (ap, err);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, limit_memory, NULL,
                     out, err, &status, &error))
    g_error ("spawn: %s", error->message);
  g_ptr_array_free (argv, TRUE);
  g_strfreev (envp);
  if (!WIFEXITED (status))
    g_error ("pipescope-cli was killed (signal %d)", WIFSIGNALED (status) ? WTERMSIG (status) : 0);
  return WEXITSTATUS (status);
}

static PpTimelineModel *
model_of (const char *name)
{
  char *p = trace_path (name);
  PpError err = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (p, &err);
  if (m == NULL)
    g_error ("%s: %s", p, err.msg);
  g_free (p);
  return m;
}

/* Renders through the CLI (PNG) and in process; both finish. */
static void
assert_renders (const char *name)
{
  char *p = trace_path (name), *png = g_strdup_printf ("%s/%s.png", tmpdir, name);
  char *out = NULL, *err = NULL;
  g_assert_cmpint (cli (&out, &err, "render", p, "-o", png, NULL), ==, 0);
  g_assert_true (g_file_test (png, G_FILE_TEST_EXISTS));
  g_free (out);
  g_free (err);

  PpTimelineModel *m = model_of (name);
  PpTimelineView v;
  pp_timeline_view_init (&v, m, 800, 400);
  v.show_header = v.show_legend = v.show_plan = 1;
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 800, 400);
  cairo_t *cr = cairo_create (s);
  pp_timeline_render (cr, m, &v);
  /* the whole clock range, as a user zoomed all the way out */
  v.t0_ns = INT64_MIN;
  v.t1_ns = INT64_MAX;
  pp_timeline_render (cr, m, &v);
  g_assert_cmpint (cairo_status (cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
  g_free (png);
  g_free (p);
}

static char *
info (const char *name)
{
  char *p = trace_path (name), *out = NULL, *err = NULL;
  g_assert_cmpint (cli (&out, &err, "info", p, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (err);
  g_free (p);
  return out;
}

static void
test_step_max (void)
{
  char *out = info ("step-max");
  /* steps 0, 1 and 2^31-1: three, the last number said without overflow */
  g_assert_nonnull (strstr (out, "steps: 3 (0 to 2147483647)\n"));
  g_assert_nonnull (strstr (out, "steps analysed: step 1 (1 step"));
  g_free (out);
  out = info ("step-3e8");
  g_assert_nonnull (strstr (out, "steps: 3 (0 to 300000000)\n"));
  g_free (out);

  PpTimelineModel *m = model_of ("step-max");
  double b[2];
  /* 0, 1 and 2^31-1 seen; 1 counted: 2^31-1 is not whole, 0 the first */
  g_assert_cmpint (pp_timeline_model_step_bubbles (m, b), ==, 1);
  pp_timeline_model_free (m);
  assert_renders ("step-max");
  assert_renders ("step-3e8");
}

static void
test_rank_65535 (void)
{
  char *out = info ("rank-65535");
  g_assert_nonnull (strstr (out, "ranks: 65536\n"));
  g_assert_nonnull (strstr (out, "dropped events: 3\n"));
  /* it names rank 65535 and holds none of its spans: not measured, not 100 % idle */
  g_assert_cmpint (pp_test_count (out, "  rank 65535 idle: \u2013 (no spans of it in the trace)\n"), ==, 1);
  g_free (out);
  PpTimelineModel *m = model_of ("rank-65535");
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 65536);
  g_assert_cmpuint (pp_timeline_model_dropped (m), ==, 3);
  pp_timeline_model_free (m);
  assert_renders ("rank-65535");
}

static void
test_m_2e24 (void)
{
  char *p = trace_path ("m-2e24"), *out = NULL, *err = NULL;
  g_assert_cmpint (cli (&out, &err, "suggest", p, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "measured: GPipe, P=2, M=16777216"));
  /* the candidates of M' = 2^24 are left out, and said to be */
  g_assert_nonnull (strstr (out, " over 65536 ranks x micro-batches x stages per rank (too large to simulate)\n"));
  g_free (out);
  g_free (err);

  PpMeasuredCosts c = { 0 };
  PpError e = { 0 };
  g_assert_cmpint (pp_measured_costs_from_trace (p, &c, &e), ==, PP_OK);
  g_assert_cmpint (c.microbatches, ==, 1 << 24);
  g_assert_cmpuint (pp_suggest_n_too_large (&c), >, 0);
  /* what is simulated: under the limit a candidate, and few of them */
  g_assert_cmpint (pp_suggest_work (&c), <=, 64 * PP_SUGGEST_MAX_WORK);
  pp_measured_costs_clear (&c);
  g_free (p);
}

/* One past the limit: the reader's one line names the value and the limits. */
static void
test_m_over_limit (void)
{
  char *p = trace_path ("m-2e24"), *bytes = NULL, *out = NULL, *err = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (p, &bytes, &len, NULL));
  /* file header 32 bytes, then DESCRIPTION: n_microbatches at +12 (little endian) */
  guint32 m = GUINT32_TO_LE ((1u << 24) + 1);
  g_assert_cmpuint (len, >, 48);
  memcpy (bytes + 32 + 12, &m, 4);
  char *bad = g_strdup_printf ("%s/m-over.pptrace", tmpdir);
  g_assert_true (g_file_set_contents (bad, bytes, (gssize) len, NULL));
  g_assert_cmpint (cli (&out, &err, "info", bad, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "(type 1, DESCRIPTION): P=2 M=16777217 V=1 out of range "
                                 "(the limits: P <= 65536, M <= 16777216, V <= 4096)\n"));
  g_free (out);
  g_free (err);
  g_free (bad);
  g_free (bytes);
  g_free (p);
}

static void
test_ranks_4096 (void)
{
  char *p = trace_path ("ranks-4096"), *out = NULL, *err = NULL;
  g_assert_cmpint (cli (&out, &err, "suggest", p, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "P=4096 is too large to simulate: every candidate exceeds 65536"));
  g_free (out);
  g_free (err);
  g_free (p);
  out = info ("ranks-4096");
  g_assert_cmpint (pp_test_count (out, "% (busy "), ==, 4096);
  g_free (out);
}

static void
test_span_9e18 (void)
{
  char *out = info ("span-9e18");
  g_assert_null (strstr (out, "busy -"));
  g_assert_null (strstr (out, "bubble: -"));
  g_assert_null (strstr (out, "idle: -"));
  g_assert_nonnull (strstr (out, "  rank 0 idle: 0.0% (busy 18000000000000.000 ms)\n"));
  g_free (out);

  char *p = trace_path ("span-9e18"), *json = g_strdup_printf ("%s/span.json", tmpdir), *err = NULL;
  g_assert_cmpint (cli (&out, &err, "export", p, "-o", json, NULL), ==, 0);
  char *text = NULL;
  g_assert_true (g_file_get_contents (json, &text, NULL, NULL));
  /* the span as the app holds it, clamped to +-2^61 ns: 2^62 ns long, from
   * the run's start */
  g_assert_null (strstr (text, "\"ts\":-"));
  g_assert_nonnull (strstr (text, "\"ts\":0.000,\"dur\":4611686018427387.904"));
  g_free (text);
  g_free (out);
  g_free (err);
  g_free (json);
  g_free (p);
  assert_renders ("span-9e18");
}

static void
test_plan_far (void)
{
  char *out = info ("plan-far");
  g_assert_nonnull (strstr (out, "plans: 2\n"));
  g_free (out);
  PpTimelineModel *m = model_of ("plan-far");
  g_assert_cmpuint (pp_timeline_model_n_planned (m, 0), ==, 2);
  /* -9.3e9 s is clamped to -2^61 ns, then placed after the origin (1 s) */
  g_assert_cmpint (pp_timeline_model_planned (m, 0)[0].start_ns, ==, -PP_TIMELINE_MAX_ABS_NS + 1000000000);
  pp_timeline_model_free (m);
  assert_renders ("plan-far");
}

static void
test_loss_far (void)
{
  PpTimelineModel *m = model_of ("loss-far");
  /* a loss that far out is not kept; the markers are, sparse */
  g_assert_cmpuint (pp_timeline_model_n_losses (m), ==, 0);
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 4);
  const int32_t *num = pp_timeline_model_step_numbers (m);
  g_assert_cmpint (num[2], ==, 1 << 26);
  g_assert_cmpint (num[3], ==, INT32_MAX);
  pp_timeline_model_free (m);
  assert_renders ("loss-far");
}

static void
test_markers_5000 (void)
{
  PpTimelineModel *m = model_of ("markers-5000");
  size_t n = pp_timeline_model_n_steps (m);
  const int64_t *st = pp_timeline_model_step_starts (m);
  const int32_t *num = pp_timeline_model_step_numbers (m);
  g_assert_cmpuint (n, ==, 5002);
  for (size_t i = 1; i < n; i++)
    g_assert_cmpint (st[i - 1], <=, st[i]);
  g_assert_cmpint (num[0], ==, 0);
  g_assert_cmpint (num[2], ==, 5001);   /* the latest marker, earliest of the 5,000 */
  g_assert_cmpint (num[n - 1], ==, 2);
  pp_timeline_model_free (m);
  assert_renders ("markers-5000");
}

static void
test_ranks_65536 (void)
{
  char *out = info ("ranks-65536");
  g_assert_nonnull (strstr (out, "ranks: 65536\n"));
  g_assert_nonnull (strstr (out, "spans: 100000 (F 65536, B 34464)\n"));
  g_assert_cmpint (pp_test_count (out, "% (busy "), ==, 65536);
  g_free (out);
}

static void
test_strings_50k (void)
{
  char *p = trace_path ("strings-50k"), *csv = g_strdup_printf ("%s/strings.csv", tmpdir);
  char *out = NULL, *err = NULL, *text = NULL;
  g_assert_cmpint (cli (&out, &err, "export", p, "--format", "csv", "-o", csv, NULL), ==, 0);
  g_assert_true (g_file_get_contents (csv, &text, NULL, NULL));
  g_assert_cmpint (pp_test_count (text, "\n"), ==, 50001);
  g_assert_nonnull (strstr (text, ",kernel_1,,,,\n"));   /* name, then sub, process, dp, tp (empty) */
  g_assert_nonnull (strstr (text, ",kernel_50000,,,,\n"));
  g_free (text);
  g_free (out);
  g_free (err);
  g_free (csv);
  g_free (p);
}

/* The export of name in chrome format, through the CLI (under the limit). */
static char *
export_chrome (const char *name)
{
  char *p = trace_path (name), *json = g_strdup_printf ("%s/%s.json", tmpdir, name);
  char *out = NULL, *err = NULL, *text = NULL;
  g_assert_cmpint (cli (&out, &err, "export", p, "--format", "chrome", "-o", json, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_true (g_file_get_contents (json, &text, NULL, NULL));
  g_free (out);
  g_free (err);
  g_free (json);
  g_free (p);
  return text;
}

/* Issue "Never destroy a trace": 65,536 PLAN frames (what importing a
 * torch.profiler trace that claims world_size 65536 writes) each cost a
 * pass over every rank: minutes for info, render and export.  Linear now:
 * each finishes (under the limit, within the test's timeout) with every
 * rank and plan counted. */
static void
test_plans_65536 (void)
{
  char *out = info ("plans-65536");
  g_assert_nonnull (strstr (out, "ranks: 65536\n"));
  g_assert_nonnull (strstr (out, "plans: 65536\n"));
  g_assert_nonnull (strstr (out, "spans: 4 (F 2, B 2)\n"));
  /* every rank has its line: the one with spans measured, the rest not */
  g_assert_cmpint (pp_test_count (out, "% (busy "), ==, 1);
  g_assert_cmpint (pp_test_count (out, " idle: \u2013 (no spans of it in the trace)\n"), ==, 65535);
  g_free (out);

  char *json = export_chrome ("plans-65536");
  /* a track only where there is an event (issue 27's review: no empty
   * tracks): the one rank with the spans; its plans hold no action */
  g_assert_cmpint (pp_test_count (json, "\"name\":\"process_name\""), ==, 1);
  g_assert_cmpint (pp_test_count (json, "\"ph\":\"X\""), ==, 4);
  g_free (json);

  PpTimelineModel *m = model_of ("plans-65536");
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 65536);
  g_assert_cmpuint (pp_timeline_model_n_plan_items (m), ==, 65536);
  g_assert_cmpuint (pp_timeline_model_n_planned (m, 0), ==, 0);   /* no times: nothing to place */
  pp_timeline_model_free (m);
  assert_renders ("plans-65536");
}

/* Rank 0's plan replaced 65,536 times, each shorter than the one before:
 * the plan extent is the last plan's (1 us), as the run's end is its last
 * block's, however the extents are kept. */
static void
test_plans_replaced (void)
{
  PpTimelineModel *m = model_of ("plans-replaced");
  g_assert_cmpuint (pp_timeline_model_n_plan_items (m), ==, 65536);
  g_assert_cmpuint (pp_timeline_model_n_planned (m, 0), ==, 1);
  g_assert_cmpint (pp_timeline_model_planned (m, 0)[0].end_ns, ==, 1000000000 + 1000);
  g_assert_cmpint (pp_timeline_model_end_ns (m), ==, 1000000000 + 70000);   /* B1's end */
  /* busy over the whole extent of the plans: no planned bubble */
  PpTimelineRankStats st;
  pp_timeline_model_rank_stats (m, 0, pp_timeline_model_start_ns (m), pp_timeline_model_end_ns (m), &st);
  g_assert_cmpfloat (st.planned_bubble, ==, 0.0);
  pp_timeline_model_free (m);

  char *out = info ("plans-replaced");
  g_assert_nonnull (strstr (out, "ranks: 65536\n"));
  g_assert_nonnull (strstr (out, "plans: 65536\n"));   /* PLAN frames read */
  g_free (out);
  assert_renders ("plans-replaced");
}

/* A RANK and a CLOCK_OFFSET frame for each of 65,536 ranks (each offset
 * moved the extent with a pass over every rank; info looked each rank's
 * frames up with a pass over all of them): rank 0's blocks moved by its
 * 1 us, every rank listed once with its host and offset. */
static void
test_offsets_65536 (void)
{
  PpTimelineModel *m = model_of ("offsets-65536");
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 65536);
  g_assert_cmpint (pp_timeline_model_start_ns (m), ==, 1000000000 + 1000);
  g_assert_cmpint (pp_timeline_model_end_ns (m), ==, 1000000000 + 71000);
  pp_timeline_model_free (m);
  char *out = info ("offsets-65536");
  g_assert_nonnull (strstr (out, "ranks: 65536\n"));
  g_assert_cmpint (pp_test_count (out, "\nrank "), ==, 65536);
  g_assert_nonnull (strstr (out, "\nrank 0: host h0 pid 100, clock +0.001 ms to rank 0's\n"));
  g_assert_nonnull (strstr (out, "\nrank 65535: host h65535 pid 65635, clock +0.067 ms to rank 0's\n"));
  g_free (out);
}

/* What the fuzzer found (tests/fuzz/corpus/finding-*): each goes through
 * the model, its step bubbles and the renderer (under ASan in the fuzz
 * test; here for the answer).  finding-step-bubbles-touched: a step visited
 * again and again with nothing inside its window was listed once a visit,
 * past the end of the per-step array. */
static void
test_findings (void)
{
  const char *dir = g_getenv ("PP_TEST_DATA_DIR");
  if (dir == NULL)
    {
      g_test_skip ("PP_TEST_DATA_DIR is not set");
      return;
    }
  char *p = g_build_filename (dir, "..", "fuzz", "corpus", "finding-step-bubbles-touched.pptrace", NULL);
  PpError err = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (p, &err);
  if (m == NULL)   /* a reader error is an answer too: one line */
    g_assert_null (strchr (err.msg, '\n'));
  else
    {
      int P = pp_timeline_model_n_ranks (m);
      double *b = g_new0 (double, P > 0 ? P : 1);
      int n = pp_timeline_model_step_bubbles (m, b);
      g_assert_cmpint (n, >=, 0);
      g_assert_cmpuint ((size_t) n, <=, pp_timeline_model_n_spans_total (m));
      for (int r = 0; r < P; r++)
        g_assert_true (b[r] == -1 || (b[r] >= 0 && b[r] <= 1));
      g_free (b);
      pp_timeline_model_free (m);
    }
  g_free (p);
}

/* The committed copies are what the generator writes now (frame for frame). */
static void
test_committed (void)
{
  const char *dir = g_getenv ("PP_TEST_DATA_DIR");
  if (dir == NULL)
    {
      g_test_skip ("PP_TEST_DATA_DIR is not set");
      return;
    }
  int n = 0;
  for (const PpHostileTrace *t = pp_hostile_traces; t->name; t++)
    if (t->small)
      {
        char *file = g_strdup_printf ("%s.pptrace", t->name);
        char *committed = g_build_filename (dir, "hostile", file, NULL);
        char *fresh = trace_path (t->name);
        char *a = NULL, *b = NULL;
        gsize la = 0, lb = 0;
        g_assert_true (g_file_get_contents (committed, &a, &la, NULL));
        g_assert_true (g_file_get_contents (fresh, &b, &lb, NULL));
        /* the same frames; the header's version may differ (a writer of a
         * later minor version writes the same frames under a new number) */
        g_assert_cmpuint (la, ==, lb);
        g_assert_cmpuint (la, >=, 32);
        g_assert_cmpmem (a, 12, b, 12);
        g_assert_cmpmem (a + 16, la - 16, b + 16, lb - 16);
        g_assert_cmpuint (la, <=, 4096);
        n++;
        g_free (a);
        g_free (b);
        g_free (fresh);
        g_free (committed);
        g_free (file);
      }
  g_assert_cmpint (n, ==, 7);
  /* the fuzz seeds the generator writes (tests/fuzz/corpus/) */
  n = 0;
  for (const PpHostileTrace *t = pp_hostile_traces; t->name; t++)
    if (t->corpus)
      {
        char *file = g_strdup_printf ("%s.pptrace", t->name);
        char *committed = g_build_filename (dir, "..", "fuzz", "corpus", file, NULL);
        char *fresh = trace_path (t->name);
        char *a = NULL, *b = NULL;
        gsize la = 0, lb = 0;
        g_assert_true (g_file_get_contents (committed, &a, &la, NULL));
        g_assert_true (g_file_get_contents (fresh, &b, &lb, NULL));
        g_assert_cmpuint (la, ==, lb);
        g_assert_cmpmem (a + 16, la - 16, b + 16, lb - 16);
        n++;
        g_free (a);
        g_free (b);
        g_free (fresh);
        g_free (committed);
        g_free (file);
      }
  g_assert_cmpint (n, ==, 1);
}

int
main (int argc, char **argv)
{
  if (argc == 3 && (strcmp (argv[1], "--write") == 0 || strcmp (argv[1], "--write-corpus") == 0))
    {
      bool corpus = strcmp (argv[1], "--write-corpus") == 0;
      for (const PpHostileTrace *t = pp_hostile_traces; t->name; t++)
        if (corpus ? t->corpus : t->small)
          {
            char *file = g_strdup_printf ("%s.pptrace", t->name);
            char *p = g_build_filename (argv[2], file, NULL);
            if (pp_hostile_write (t->name, p) != 0)
              return 1;
            g_free (p);
            g_free (file);
          }
      return 0;
    }
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("pp-hostile-XXXXXX", NULL);
  g_test_add_func ("/hostile/step-max", test_step_max);
  g_test_add_func ("/hostile/rank-65535", test_rank_65535);
  g_test_add_func ("/hostile/m-2e24", test_m_2e24);
  g_test_add_func ("/hostile/m-over-limit", test_m_over_limit);
  g_test_add_func ("/hostile/ranks-4096", test_ranks_4096);
  g_test_add_func ("/hostile/span-9e18", test_span_9e18);
  g_test_add_func ("/hostile/plan-far", test_plan_far);
  g_test_add_func ("/hostile/loss-far", test_loss_far);
  g_test_add_func ("/hostile/markers-5000", test_markers_5000);
  g_test_add_func ("/hostile/ranks-65536", test_ranks_65536);
  g_test_add_func ("/hostile/strings-50k", test_strings_50k);
  g_test_add_func ("/hostile/plans-65536", test_plans_65536);
  g_test_add_func ("/hostile/plans-replaced", test_plans_replaced);
  g_test_add_func ("/hostile/offsets-65536", test_offsets_65536);
  g_test_add_func ("/hostile/committed", test_committed);
  g_test_add_func ("/hostile/findings", test_findings);
  int rc = g_test_run ();
  pp_test_rm_rf (tmpdir);
  g_free (tmpdir);
  return rc;
}
