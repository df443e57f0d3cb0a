/* test-panel-numbers.c — issue 30, one analysis: the app's Stats, Why and
 * What-if tabs carry the numbers `info` prints for the same trace.
 *
 * A trace (a 1F1B and a ZBV run written by `pipescope-cli run --trace`, and
 * a PyTorch ZBV job imported from tests/data/kineto) is read into the
 * timeline model the app shows, and each tab's numbers are taken from the
 * functions the tabs call (pp_stats_numbers, pp_why_panel_analyse,
 * pp_whatif_measured and pp_whatif_row_text: no widget, no display):
 *
 * - Stats: the steps analysed, the median step, each rank's measured bubble
 *   a step, the bubble of the plan at measured costs and the closed form
 *   are info's, to the digits info prints;
 * - Why: the steps, the step (the median), each rank's idle split, the
 *   critical path's shares and runtime's parts (issue 29) are info's;
 * - What if: exactly one row is the measured configuration and it shows
 *   info's median step and mean bubble (and suggest's "← measured" row),
 *   not the simulator's prediction; its candidates and every other row's
 *   prediction are suggest's.
 *
 * Issue 36: a PP 2 x DP 2 job whose median copy is not dp 0: the same.
 */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pp-panels.h"
#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-why.h"
#include "pp-why-runtime.h"

/* The What-if tab's costs (pp-whatif-panel.c, exposed for the tests). */
gboolean pp_whatif_measured_costs (const PpTimelineModel *m, PpMeasuredCosts *out);

/* What `info` prints of a trace. */
typedef struct {
  int    first, last, n;        /* steps analysed */
  char   median[32];            /* "0.322" (ms) */
  char   bubble[8][16];         /* "53.5%" per rank */
  char   mean[16];
  char   planned[8][16];        /* the plan at measured costs, per rank */
  char   closed[16];            /* "" when none */
  char   idle[8][128];          /* the idle by cause row of each rank, as printed */
  char   path[256];             /* the critical path line, shares only */
  char   runtime[8][1024];      /* "  rank R: ..." runtime by part, as printed; "" none */
  int    n_ranks;
} Info;

static const char *
line_after (const char *text, const char *prefix)
{
  const char *at = strstr (text, prefix);
  g_assert_nonnull (at);
  return at + strlen (prefix);
}

static void
read_info (const char *trace, Info *in)
{
  char *out = NULL, *err = NULL;
  memset (in, 0, sizeof *in);
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "info", trace, NULL), ==, 0);

  const char *sa = line_after (out, "\nsteps analysed: ");
  if (sscanf (sa, "step %d (1 step", &in->first) == 1)
    in->last = in->first, in->n = 1;
  else
    g_assert_cmpint (sscanf (sa, "steps %d\u2013%d (%d steps", &in->first, &in->last, &in->n), ==, 3);
  g_assert_cmpint (sscanf (line_after (out, "\nmedian step: "), "%31s ms", in->median), ==, 1);
  const char *b = line_after (out, "\nmeasured bubble a step (");
  for (int r = 0; r < 8; r++)
    {
      char want[32];
      g_snprintf (want, sizeof want, "\n  rank %d bubble: ", r);
      const char *at = strstr (b, want);
      if (at == NULL)
        break;
      g_assert_cmpint (sscanf (at + strlen (want), "%15s", in->bubble[r]), ==, 1);
      in->n_ranks = r + 1;
    }
  g_assert_cmpint (in->n_ranks, >=, 2);
  g_assert_cmpint (sscanf (line_after (out, "\nmean bubble a step: "), "%15s", in->mean), ==, 1);

  const char *p = strstr (out, "\nbubble, plan at measured costs (the last plan of each rank, one step ");
  if (p != NULL)
    for (int r = 0; r < in->n_ranks; r++)
      {
        char want[32];
        g_snprintf (want, sizeof want, " rank %d ", r);
        const char *at = strstr (p, want);
        g_assert_nonnull (at);
        g_assert_cmpint (sscanf (at + strlen (want), "%15[0-9.%]", in->planned[r]), ==, 1);
      }
  const char *cf = strstr (out, "\nbubble, closed form (F=1, B=2): ");
  if (cf != NULL)
    g_assert_cmpint (sscanf (cf + strlen ("\nbubble, closed form (F=1, B=2): "), "%15s", in->closed), ==, 1);

  /* the idle table: its header, then a row a rank */
  const char *t = strchr (line_after (out, "\nidle by cause (a step, the mean over the "), '\n');
  g_assert_nonnull (t);
  t = strchr (t + 1, '\n');   /* past the column names */
  g_assert_nonnull (t);
  for (int r = 0; r < in->n_ranks; r++)
    {
      const char *e = strchr (t + 1, '\n');
      g_assert_nonnull (e);
      g_strlcpy (in->idle[r], t + 1, MIN ((size_t) (e - t), sizeof in->idle[r]));
      t = e;
    }
  const char *cp = line_after (out, "\ncritical path (share of the step, mean over ");
  cp = strstr (cp, "): ");
  g_assert_nonnull (cp);
  const char *ce = strchr (cp, '\n');
  g_strlcpy (in->path, cp + 3, MIN ((size_t) (ce - cp - 2), sizeof in->path));
  /* runtime by part (issue 29): a line a rank with runtime, after its header */
  const char *rp = strstr (out, "\nruntime by part (");
  if (rp != NULL)
    for (const char *l = strchr (rp + 1, '\n'); l != NULL && g_str_has_prefix (l, "\n  rank "); )
      {
        const char *e = strchr (l + 1, '\n');
        int r;
        g_assert_nonnull (e);
        g_assert_cmpint (sscanf (l, "\n  rank %d:", &r), ==, 1);
        g_assert_true (r >= 0 && r < 8);
        g_strlcpy (in->runtime[r], l + 1, MIN ((size_t) (e - l), sizeof in->runtime[r]));
        l = e;
      }
  g_free (out);
  g_free (err);
}

static void
percent (char *buf, size_t size, double fraction)
{
  pp_analysis_format_percent (buf, size, fraction, 1);
}

/* ---- Stats ---------------------------------------------------------------- */

static void
check_stats (const PpTimelineModel *m, const Info *in, gboolean has_plan)
{
  PpStatsNumbers num;
  char buf[32];

  pp_stats_numbers (m, PP_STATS_PANEL_MAX_ROWS, &num);
  g_assert_cmpint (num.steps.n_steps, ==, in->n);
  g_assert_cmpint (num.steps.steps[0], ==, in->first);
  g_assert_cmpint (num.steps.steps[num.steps.n_steps - 1], ==, in->last);
  g_snprintf (buf, sizeof buf, "%.3f", num.steps.median_step / 1e6);
  g_assert_cmpstr (buf, ==, in->median);
  g_assert_cmpint (num.n_ranks, ==, in->n_ranks);
  g_assert_false (num.measured_is_idle);
  for (int r = 0; r < in->n_ranks; r++)
    {
      percent (buf, sizeof buf, num.measured[r]);
      g_assert_cmpstr (buf, ==, in->bubble[r]);
      if (has_plan)
        {
          percent (buf, sizeof buf, num.planned[r]);
          g_assert_cmpstr (buf, ==, in->planned[r]);
        }
    }
  percent (buf, sizeof buf, num.steps.bubble_mean);
  g_assert_cmpstr (buf, ==, in->mean);
  /* a run's plan is timed with its measured costs, and says so */
  g_assert_cmpint (num.plan, ==, PP_ANALYSIS_PLAN_MEASURED_COSTS);
  g_assert_cmpstr (pp_analysis_plan_label (num.plan), ==, "plan at measured costs");
  if (in->closed[0])
    {
      percent (buf, sizeof buf, num.closed);
      g_assert_cmpstr (buf, ==, in->closed);
    }
  else
    g_assert_cmpfloat (num.closed, <, 0);
  pp_stats_numbers_clear (&num);
}

/* ---- Why ------------------------------------------------------------------ */

static int n_runtime_lines;   /* runtime-by-part lines compared, over a test */

static void
check_why (const PpTimelineModel *m, const Info *in)
{
  PpWhyReport *rep = NULL;
  PpWhyChange ch;
  PpError err = { 0 };
  PpAnalysisSteps a;

  g_assert_true (pp_why_panel_analyse (m, &rep, &ch, NULL, &err));
  g_assert_nonnull (rep);
  g_assert_cmpint (rep->n_steps, ==, in->n);
  for (int i = 0; i < rep->n_steps; i++)
    g_assert_cmpint (rep->steps[i].step, ==, in->first + i);
  /* the step statistic is the analysis's median step, exactly */
  pp_timeline_model_step_analysis (m, &a);
  g_assert_cmpfloat (fabs (rep->length - a.median_step * 1e-9), <, 1e-12);
  pp_analysis_steps_clear (&a);
  g_assert_cmpint (rep->ranks, ==, in->n_ranks);

  /* each rank's idle split as info prints it (pp_why_print_idle) */
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream (&buf, &size);
  pp_why_print_idle (f, rep->idle, rep->ranks, 1e3, "ms");
  fclose (f);
  char **lines = g_strsplit (buf, "\n", -1);
  for (int r = 0; r < in->n_ranks; r++)
    {
      /* the rank and its idle, schedule, imbalance, transfers and runtime
       * (each a number and its unit): the first 11 words of both rows */
      g_assert_nonnull (lines[r + 1]);
      char **ours = g_strsplit_set (lines[r + 1], " ", -1), **theirs = g_strsplit_set (in->idle[r], " ", -1);
      char **o = ours, **t = theirs;
      for (int k = 0; k < 11; k++)
        {
          while (*o != NULL && **o == '\0')
            o++;
          while (*t != NULL && **t == '\0')
            t++;
          g_assert_nonnull (*o);
          g_assert_nonnull (*t);
          g_assert_cmpstr (*o, ==, *t);
          o++;
          t++;
        }
      g_strfreev (ours);
      g_strfreev (theirs);
    }
  g_strfreev (lines);
  free (buf);

  GString *p = g_string_new (NULL);
  for (int q = 0; q < rep->n_stages; q++)
    g_string_append_printf (p, "%sstage %d %.1f%%", q ? ", " : "", q, 100 * rep->path_share[q]);
  g_string_append_printf (p, ", transfers %.1f%%, gaps %.1f%%", 100 * rep->path_transfer_share,
                          100 * rep->path_slack_share);
  g_assert_cmpstr (p->str, ==, in->path);
  g_string_free (p, TRUE);

  /* runtime's parts (issue 29) as info prints them, rank by rank: the
   * panel analyses the same spans (the optimizer's block among them) */
  buf = NULL;
  f = open_memstream (&buf, &size);
  pp_why_print_runtime_parts (f, rep->idle, rep->ranks, 1e3, "ms");
  fclose (f);
  for (int r = 0; r < in->n_ranks; r++)
    if (in->runtime[r][0] != '\0')
      {
        g_assert_nonnull (strstr (buf, in->runtime[r]));
        n_runtime_lines++;
      }
  free (buf);
  pp_why_report_free (rep);
}

/* ---- What if --------------------------------------------------------------- */

/* suggest's row marked "← measured": its step and bubble, as printed. */
static void
suggest_measured_row (const char *trace, char *step, char *bubble, GHashTable *names)
{
  char *out = NULL, *err = NULL;
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", trace, "--top", "100000", NULL), ==, 0);
  char **lines = g_strsplit (out, "\n", -1);
  int marked = 0;
  for (char **l = lines; *l != NULL; l++)
    {
      int rank, M, V;
      char name[64], st[32], bu[32];
      if (sscanf (*l, "%d %63s %d %d %31s %31s", &rank, name, &M, &V, st, bu) != 6)
        continue;
      g_hash_table_insert (names, g_strdup_printf ("%s M=%d V=%d", name, M, V), g_strdup_printf ("%s ms|bubble %s", st, bu));
      if (strstr (*l, "\u2190 measured") != NULL)
        {
          g_strlcpy (step, st, 32);
          g_strlcpy (bubble, bu, 32);
          marked++;
        }
    }
  g_assert_cmpint (marked, ==, 1);
  g_strfreev (lines);
  g_free (out);
  g_free (err);
}

static void
check_whatif (const PpTimelineModel *m, const char *trace, const Info *in)
{
  PpWhatifMeasured mr;
  PpMeasuredCosts costs;
  PpSuggestion *rows = NULL;
  size_t n = 0;
  PpError err = { 0 };
  char step[64], bubble[64], sug_step[32] = "", sug_bubble[32] = "", want[64];
  /* suggest's rows: "NAME M=8 V=2" -> "1.234 ms|bubble 5.6%" */
  GHashTable *sug_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  g_assert_true (pp_whatif_measured (m, &mr));
  g_assert_cmpint (mr.n_steps, ==, in->n);
  g_assert_true (pp_whatif_measured_costs (m, &costs));
  g_assert_cmpint (pp_suggest (&costs, 0, &rows, &n, &err), ==, PP_OK);
  suggest_measured_row (trace, sug_step, sug_bubble, sug_names);

  int marked = 0;
  for (size_t i = 0; i < n; i++)
    {
      char name[96];
      g_snprintf (name, sizeof name, "%s M=%d V=%d", rows[i].schedule, rows[i].microbatches,
                  rows[i].stages_per_rank);
      /* the same candidates as suggest: what the job's framework runs */
      g_assert_true (g_hash_table_contains (sug_names, name));
      if (!pp_whatif_row_text (&rows[i], &mr, step, bubble, sizeof step))
        {
          /* a prediction shows the simulator's numbers, from the costs
           * suggest takes (one rule): suggest's prediction */
          char both[160];
          g_snprintf (want, sizeof want, "%.3f ms", rows[i].step_time * 1e3);
          g_assert_cmpstr (step, ==, want);
          g_snprintf (both, sizeof both, "%s|%s", step, bubble);
          g_assert_cmpstr (both, ==, g_hash_table_lookup (sug_names, name));
          continue;
        }
      marked++;
      /* the measured row: info's median step and mean bubble a step */
      g_snprintf (want, sizeof want, "%s ms", in->median);
      g_assert_cmpstr (step, ==, want);
      g_snprintf (want, sizeof want, "bubble %s", in->mean);
      g_assert_cmpstr (bubble, ==, want);
      /* and suggest's "← measured" row's */
      g_snprintf (want, sizeof want, "%s ms", sug_step);
      g_assert_cmpstr (step, ==, want);
      g_snprintf (want, sizeof want, "bubble %s", sug_bubble);
      g_assert_cmpstr (bubble, ==, want);
    }
  g_assert_cmpint (marked, ==, 1);
  g_assert_cmpuint (g_hash_table_size (sug_names), ==, n);
  free (rows);
  pp_measured_costs_clear (&costs);
  g_hash_table_unref (sug_names);
}

/* ---- the traces ----------------------------------------------------------- */

static void
check_trace_with (const char *trace, gboolean has_plan, gboolean whatif)
{
  PpError err = { 0 };
  Info in;

  read_info (trace, &in);
  g_assert_cmpint (in.n, >=, 1);
  /* a run's trace holds its plan timed with its costs; the Stats tab
   * shows it wherever info does */
  if (has_plan)
    g_assert_cmpstr (in.planned[0], !=, "");
  has_plan = in.planned[0][0] != '\0';
  PpTimelineModel *m = pp_timeline_model_new_from_file (trace, &err);
  g_assert_nonnull (m);
  check_stats (m, &in, has_plan);
  check_why (m, &in);
  if (whatif)
    check_whatif (m, trace, &in);
  pp_timeline_model_free (m);
}

static void
check_trace (const char *trace, gboolean has_plan)
{
  check_trace_with (trace, has_plan, TRUE);
}

static void
check_run (const char *schedule)
{
  PpTestCtx c;
  char *out = NULL, *err = NULL;

  pp_test_ctx_init (&c, "pp-panel-numbers-");
  char *t = pp_test_ctx_path (&c, "run.pptrace");
  g_assert_cmpint (pp_test_cli_run (c.envp, &out, &err, "run", "-s", schedule, "-p", "2", "-m", "4", "--steps",
                                    "20", "--layers", "4", "--width", "64", "--batch", "32", "--backend", "cpu",
                                    "--no-live", "--trace", t, NULL), ==, 0);
  n_runtime_lines = 0;
  check_trace (t, TRUE);
  /* the bundled runtime records its host: some rank has runtime's parts */
  g_assert_cmpint (n_runtime_lines, >=, 1);
  g_free (out);
  g_free (err);
  g_free (t);
  pp_test_ctx_clear (&c);
}

static void
test_run_1f1b (void)
{
  check_run ("1F1B");
}

static void
test_run_zbv (void)
{
  check_run ("ZBV");
}

/* A PyTorch job: the What-if candidates are what torch.distributed.pipelining
 * runs (no DualPipe), in the app as in suggest. */
static void
test_pytorch_zbv (void)
{
  PpTestCtx c;
  char *out = NULL, *err = NULL;
  const char *data = g_getenv ("PP_TEST_DATA_DIR");

  g_assert_nonnull (data);
  pp_test_ctx_init (&c, "pp-panel-numbers-");
  char *t = pp_test_ctx_path (&c, "kzbv.pptrace");
  char *r0 = g_build_filename (data, "kineto", "zbv", "rank0.json.gz", NULL);
  char *r1 = g_build_filename (data, "kineto", "zbv", "rank1.json.gz", NULL);
  g_assert_cmpint (pp_test_cli_run (c.envp, &out, &err, "import", r0, r1, "-o", t, NULL), ==, 0);
  check_trace (t, FALSE);   /* the import's plan, if any, checked as info prints it */
  g_free (r0);
  g_free (r1);
  g_free (out);
  g_free (err);
  g_free (t);
  pp_test_ctx_clear (&c);
}

/* Issue 36, one analysis on meshes: a PP 2 x DP 2 job (pp-synth-mesh)
 * whose replica dp 0 runs its last stage twice as slow, so that the
 * median copy (by step length, the lower middle) is dp 1: the tabs carry
 * info's numbers, whichever copy is the median. */
static void
test_mesh_median_not_dp0 (void)
{
  PpTestCtx c;
  char *out = NULL, *err = NULL;
  const char *synth = g_getenv ("PP_SYNTH_MESH");

  g_assert_nonnull (synth);
  pp_test_ctx_init (&c, "pp-panel-numbers-");
  char *base = pp_test_ctx_path (&c, "mesh");
  char *t = pp_test_ctx_path (&c, "mesh.pptrace");
  const char *argv[] = { synth, base, "2", "2", "4", "6", "1f1b", "--comm", "--slow-stage", "0", NULL };
  int status;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, c.envp, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, NULL));
  g_assert_cmpint (status, ==, 0);
  char *parts[4];
  for (int g = 0; g < 4; g++)
    parts[g] = g_strdup_printf ("%s.rank%d", base, g);
  g_assert_cmpint (pp_test_cli_run (c.envp, &out, &err, "merge", "-o", t, parts[0], parts[1], parts[2], parts[3],
                                    NULL), ==, 0);
  for (int g = 0; g < 4; g++)
    g_free (parts[g]);
  /* the median copy is dp 1: the analysis says so */
  {
    PpError e = { 0 };
    PpTimelineModel *m = pp_timeline_model_new_from_file (t, &e);
    PpWhyReport *rep = NULL;
    PpWhyChange ch;
    g_assert_nonnull (m);
    g_assert_true (pp_why_panel_analyse (m, &rep, &ch, NULL, &e));
    g_assert_cmpint (rep->n_replicas, ==, 2);
    g_assert_cmpint (rep->median_replica, ==, 1);
    pp_why_report_free (rep);
    pp_timeline_model_free (m);
  }
  /* Stats, Why, and What if against suggest (which reads a trace of
   * replicas since issue 36's item 5) */
  check_trace_with (t, TRUE, TRUE);
  g_free (out);
  g_free (err);
  g_free (base);
  g_free (t);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/panel-numbers/run-1f1b", test_run_1f1b);
  g_test_add_func ("/panel-numbers/run-zbv", test_run_zbv);
  g_test_add_func ("/panel-numbers/pytorch-zbv", test_pytorch_zbv);
  g_test_add_func ("/panel-numbers/mesh-median-not-dp0", test_mesh_median_not_dp0);
  return g_test_run ();
}
