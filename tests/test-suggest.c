/* pp_suggest, pp_measured_costs_from_trace and pipescope-cli suggest. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-trace.h"

#define P 4
#define M 8

/* f = 1, b = 2, w = 1 on every rank of a P = 4, M = 8 run. */
static PpMeasuredCosts
uniform_costs (double *f, double *b, double *w)
{
  PpMeasuredCosts c = { .ranks = P, .microbatches = M, .f = f, .b = b, .w = w, .comm = 0 };
  for (int r = 0; r < P; r++)
    {
      f[r] = 1;
      b[r] = 2;
      w[r] = 1;
    }
  return c;
}

static PpSuggestion *
suggest (const PpMeasuredCosts *c, double budget, size_t *n)
{
  PpSuggestion *out = NULL;
  PpError err = { 0 };
  if (pp_suggest (c, budget, &out, n, &err) != PP_OK)
    g_error ("pp_suggest: %s", err.msg);
  g_assert_nonnull (out);
  return out;
}

static const PpSuggestion *
find (const PpSuggestion *s, size_t n, const char *name, int Mp)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (s[i].schedule, name) == 0 && s[i].microbatches == Mp)
      return &s[i];
  return NULL;
}

static void
test_sorted_and_candidates (void)
{
  double f[P], b[P], w[P];
  PpMeasuredCosts c = uniform_costs (f, b, w);
  size_t n;
  PpSuggestion *s = suggest (&c, 0, &n);
  double best_bubble = INFINITY;
  const char *best_bubble_name = NULL;

  g_assert_cmpuint (n, >, 20);
  for (size_t i = 0; i < n; i++)
    {
      const PpScheduleInfo *info = pp_schedule_lookup (s[i].schedule);
      g_assert_nonnull (info);
      g_assert_cmpint (s[i].ranks, ==, P);
      /* M' in {P, 2P, 4P, 8P, M} */
      g_assert_true (s[i].microbatches == 4 || s[i].microbatches == 8
                     || s[i].microbatches == 16 || s[i].microbatches == 32);
      g_assert_cmpint (s[i].stages_per_rank, ==, info->takes_v ? 2 : info->default_v);
      g_assert_cmpfloat (s[i].step_time, >, 0);
      g_assert_cmpfloat (s[i].bubble, >=, 0);
      g_assert_cmpfloat (s[i].bubble, <, 1);
      g_assert_cmpfloat (s[i].peak_activation, >, 0);
      if (i > 0)
        {
          g_assert_cmpfloat (s[i - 1].step_time, <=, s[i].step_time * (1 + 1e-9));
          if (fabs (s[i - 1].step_time - s[i].step_time) <= 1e-9 * s[i].step_time)
            g_assert_cmpfloat (s[i - 1].peak_activation, <=, s[i].peak_activation * (1 + 1e-9));
        }
      /* no duplicate candidate */
      for (size_t j = 0; j < i; j++)
        g_assert_false (strcmp (s[i].schedule, s[j].schedule) == 0
                        && s[i].microbatches == s[j].microbatches);
      if (s[i].bubble < best_bubble)
        {
          best_bubble = s[i].bubble;
          best_bubble_name = s[i].schedule;
        }
    }
  /* 1F1B: M' = 4, 8 (= 2P = M, once), 16, 32 */
  g_assert_nonnull (find (s, n, "1F1B", 4));
  g_assert_nonnull (find (s, n, "1F1B", 8));
  g_assert_nonnull (find (s, n, "1F1B", 16));
  g_assert_nonnull (find (s, n, "1F1B", 32));
  /* DualPipe needs M' >= 2P */
  g_assert_null (find (s, n, "DualPipe", 4));
  g_assert_nonnull (find (s, n, "DualPipe", 8));

  /* The fastest and the least bubble belong to a zero-bubble-like schedule. */
  if (g_test_verbose ())
    for (size_t i = 0; i < n; i++)
      g_test_message ("%2zu %-22s M'=%2d V=%d step %.4f bubble %.4f peak %.3f", i + 1,
                      s[i].schedule, s[i].microbatches, s[i].stages_per_rank,
                      s[i].step_time, s[i].bubble, s[i].peak_activation);
  {
    const char *zb[] = { "ZB-H2", "ZBV", "DualPipe", "DualPipeV", "InterleavedZeroBubble" };
    bool ok_step = false, ok_bubble = false;
    for (size_t k = 0; k < G_N_ELEMENTS (zb); k++)
      {
        ok_step = ok_step || strcmp (s[0].schedule, zb[k]) == 0;
        ok_bubble = ok_bubble || strcmp (best_bubble_name, zb[k]) == 0;
      }
    if (!ok_step || !ok_bubble)
      g_error ("fastest %s, least bubble %s: want a zero-bubble schedule", s[0].schedule, best_bubble_name);
  }
  free (s);
}

/* Closed forms under f = 1, b = 2 per rank, V = 1, P = 4, M = 8. */
static void
test_hand_computed (void)
{
  double f[P], b[P], w[P];
  PpMeasuredCosts c = uniform_costs (f, b, w);
  size_t n;
  PpSuggestion *s = suggest (&c, 0, &n);
  const PpSuggestion *g;

  /* GPipe, M' = M: (M + P - 1)(f + b) = 11 x 3; all M forwards held: 8. */
  g = find (s, n, "GPipe", 8);
  g_assert_nonnull (g);
  g_assert_cmpfloat_with_epsilon (g->step_time, 33.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (g->bubble, 3.0 / 11.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (g->peak_activation, 8.0, 1e-9);
  /* GPipe, M' = 8P = 32: each micro-batch costs M/M' = 1/4: (32 + 3) x 3/4;
   * peak M' x M/M' = 8 micro-batches still. */
  g = find (s, n, "GPipe", 32);
  g_assert_nonnull (g);
  g_assert_cmpfloat_with_epsilon (g->step_time, 35 * 0.75, 1e-9);
  g_assert_cmpfloat_with_epsilon (g->peak_activation, 8.0, 1e-9);
  /* GPipe, M' = P = 4: (4 + 3) x 3 x 2 */
  g = find (s, n, "GPipe", 4);
  g_assert_nonnull (g);
  g_assert_cmpfloat_with_epsilon (g->step_time, 42.0, 1e-9);
  /* 1F1B, M' = M: as GPipe in time, P = 4 held on rank 0. */
  g = find (s, n, "1F1B", 8);
  g_assert_nonnull (g);
  g_assert_cmpfloat_with_epsilon (g->step_time, 33.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (g->peak_activation, 4.0, 1e-9);
  /* 1F1B, M' = 32: P held, each 1/4 of a measured one. */
  g = find (s, n, "1F1B", 32);
  g_assert_nonnull (g);
  g_assert_cmpfloat_with_epsilon (g->peak_activation, 1.0, 1e-9);
  /* Interleaved 1F1B, V = 2, M' = 8: each chunk costs half a rank's. */
  g = find (s, n, "Interleaved1F1B", 8);
  g_assert_nonnull (g);
  g_assert_cmpint (g->stages_per_rank, ==, 2);
  {
    PpSchedule *sc = pp_test_generate ("Interleaved1F1B", P, 8, 2);
    PpSimulation *sim = pp_test_simulate (sc, 0.5, 1.0, 0.5, 0);
    int peak = 0;
    g_assert_cmpfloat_with_epsilon (g->step_time, sim->makespan, 1e-9);
    for (int r = 0; r < P; r++)
      peak = MAX (peak, sim->rank[r].peak_inflight);
    g_assert_cmpfloat_with_epsilon (g->peak_activation, peak / 2.0, 1e-9);
    pp_simulation_free (sim);
    pp_schedule_free (sc);
  }
  /* DualPipe: a micro-batch passes one of a rank's two stages, so each stage
   * costs the rank's whole f, b, w; total busy time per rank = M (f + b). */
  g = find (s, n, "DualPipe", 8);
  g_assert_nonnull (g);
  {
    PpSchedule *sc = pp_test_generate ("DualPipe", P, 8, 2);
    PpSimulation *sim = pp_test_simulate (sc, 1, 2, 1, 0);
    g_assert_cmpfloat_with_epsilon (g->step_time, sim->makespan, 1e-9);
    for (int r = 0; r < P; r++)
      g_assert_cmpfloat_with_epsilon (sim->rank[r].busy, 8 * 3.0, 1e-9);
    pp_simulation_free (sim);
    pp_schedule_free (sc);
  }
  free (s);
}

static void
test_budget (void)
{
  double f[P], b[P], w[P];
  PpMeasuredCosts c = uniform_costs (f, b, w);
  const double budgets[] = { 0.5, 1, 2, 4, 4.5, 7 };
  size_t n_all;
  PpSuggestion *all = suggest (&c, 0, &n_all);

  for (size_t k = 0; k < G_N_ELEMENTS (budgets); k++)
    {
      size_t n, fit = 0;
      PpSuggestion *s = suggest (&c, budgets[k], &n);
      for (size_t i = 0; i < n; i++)
        {
          g_assert_cmpfloat (s[i].peak_activation, <=, budgets[k] * (1 + 1e-9));
          if (i > 0)
            g_assert_cmpfloat (s[i - 1].step_time, <=, s[i].step_time * (1 + 1e-9));
        }
      for (size_t i = 0; i < n_all; i++)
        fit += all[i].peak_activation <= budgets[k] * (1 + 1e-9);
      g_assert_cmpuint (n, ==, fit);
      if (budgets[k] == 4)
        {
          /* GPipe holds all 8 measured micro-batches whatever M' */
          for (size_t i = 0; i < n; i++)
            g_assert_cmpstr (s[i].schedule, !=, "GPipe");
          g_assert_nonnull (find (s, n, "1F1B", 8));   /* exactly 4 */
          g_assert_null (find (s, n, "1F1B", 4));      /* 4 x 8/4 = 8 */
        }
      free (s);
    }
  {
    size_t n = 99;
    PpSuggestion *s = suggest (&c, 1e-6, &n);
    g_assert_cmpuint (n, ==, 0);
    free (s);
  }
  free (all);
}

static void
test_invalid (void)
{
  double f[P], b[P], w[P];
  PpMeasuredCosts c = uniform_costs (f, b, w);
  PpSuggestion *s = (PpSuggestion *) 1;
  size_t n = 7;
  PpError err = { 0 };

  f[2] = 0;
  g_assert_cmpint (pp_suggest (&c, 0, &s, &n, &err), ==, PP_EINVAL);
  g_assert_null (s);
  g_assert_cmpuint (n, ==, 0);
  g_assert_nonnull (strstr (err.msg, "rank 2"));
  f[2] = 1;
  w[1] = 3;
  g_assert_cmpint (pp_suggest (&c, 0, &s, &n, &err), ==, PP_EINVAL);
  w[1] = 1;
  c.ranks = 0;
  g_assert_cmpint (pp_suggest (&c, 0, &s, &n, &err), ==, PP_EINVAL);
  c.ranks = P;
  c.microbatches = 0;
  g_assert_cmpint (pp_suggest (&c, 0, &s, &n, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_suggest (NULL, 0, &s, &n, &err), ==, PP_EINVAL);
  pp_measured_costs_clear (NULL);
}

/* ---- from a trace ---------------------------------------------------------- */

static char *
sim_trace (const char *dir, const char *name, const char *sched, const char *p, const char *m)
{
  char *t = g_build_filename (dir, name, NULL);
  char *out, *err;
  int rc = pp_test_cli_run (NULL, &out, &err, "schedule", "-s", sched, "-p", p, "-m", m, "--trace", t, NULL);
  if (rc != 0)
    g_error ("schedule %s: %s", sched, err);
  g_free (out);
  g_free (err);
  return t;
}

static void
test_costs_from_trace (void)
{
  char *dir = g_dir_make_tmp ("pp-suggest-XXXXXX", NULL);
  PpMeasuredCosts c;
  PpError err = { 0 };
  char *t;

  /* 1F1B, default costs 1,2,1 units, 1 unit = 1 ms: F 1 ms, B 2 ms, no W. */
  t = sim_trace (dir, "1f1b.pptrace", "1F1B", "4", "8");
  g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), ==, PP_OK);
  g_assert_cmpint (c.ranks, ==, 4);
  g_assert_cmpint (c.microbatches, ==, 8);
  g_assert_cmpfloat_with_epsilon (c.comm, 0, 1e-12);
  for (int r = 0; r < 4; r++)
    {
      g_assert_cmpfloat_with_epsilon (c.f[r], 0.001, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.b[r], 0.002, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.w[r], 0, 1e-12);
    }
  pp_measured_costs_clear (&c);
  g_assert_null (c.f);
  pp_measured_costs_clear (&c);   /* twice is fine */
  g_free (t);

  /* ZBV: two stages per rank, each F 1, B 2 (I 1 + W 1): the rank's sums. */
  t = sim_trace (dir, "zbv.pptrace", "ZBV", "4", "8");
  g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), ==, PP_OK);
  for (int r = 0; r < 4; r++)
    {
      g_assert_cmpfloat_with_epsilon (c.f[r], 0.002, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.b[r], 0.004, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.w[r], 0.002, 1e-9);
    }
  pp_measured_costs_clear (&c);
  g_free (t);

  /* DualPipe: each of a rank's two stages sees half of the micro-batches, so
   * one micro-batch costs one stage's F 1, B 2, W 1 (overlapped pairs skipped). */
  t = sim_trace (dir, "dualpipe.pptrace", "DualPipe", "4", "8");
  g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), ==, PP_OK);
  for (int r = 0; r < 4; r++)
    {
      g_assert_cmpfloat_with_epsilon (c.f[r], 0.001, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.b[r], 0.002, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.w[r], 0.001, 1e-9);
    }
  pp_measured_costs_clear (&c);
  g_free (t);

  /* A trace with a description but no spans. */
  t = g_build_filename (dir, "empty.pptrace", NULL);
  {
    PpTraceWriter *w = pp_trace_writer_new_path (t, PP_TRACE_NATIVE, &err);
    PpTraceDescription d = { .schedule = "1F1B", .n_ranks = 4, .n_microbatches = 8, .n_virtual = 1 };
    g_assert_nonnull (w);
    g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
    g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  }
  memset (&c, 0x5a, sizeof c);
  g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "has no measured F/B spans; record a run first"));
  g_assert_null (c.f);
  g_free (t);

  /* A missing file. */
  t = g_build_filename (dir, "missing.pptrace", NULL);
  g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), !=, PP_OK);
  g_assert_null (c.f);
  g_free (t);

  pp_test_rm_rf (dir);
  g_free (dir);
}

/* Predicting the measured configuration from its own trace gives back the
 * step the trace was simulated with (1 unit = 1 ms). */
static void
test_reproduces_measured (void)
{
  char *dir = g_dir_make_tmp ("pp-suggest-self-XXXXXX", NULL);
  const char *names[] = { "1F1B", "GPipe", "ZB-H1", "Interleaved1F1B", "ZBV", "DualPipeV", "DualPipe" };

  for (size_t i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *t = sim_trace (dir, "self.pptrace", names[i], "4", "8");
      PpMeasuredCosts c;
      PpError err = { 0 };
      PpSuggestion *s;
      const PpSuggestion *g;
      size_t n;
      const PpScheduleInfo *info = pp_schedule_lookup (names[i]);
      PpSchedule *sc = pp_test_generate (names[i], 4, 8, 0);
      PpSimulation *sim = pp_test_simulate (sc, 1, 2, 1, 0);

      g_assert_cmpint (pp_measured_costs_from_trace (t, &c, &err), ==, PP_OK);
      s = suggest (&c, 0, &n);
      g = find (s, n, info->name, 8);
      g_assert_nonnull (g);
      g_assert_cmpint (g->stages_per_rank, ==, sc->stages_per_rank);
      if (fabs (g->step_time - sim->makespan * 1e-3) > 1e-9)
        g_error ("%s: predicted %.6f s, simulated %.6f ms", names[i], g->step_time, sim->makespan);
      g_assert_cmpfloat_with_epsilon (g->bubble, sim->bubble, 1e-6);
      free (s);
      pp_measured_costs_clear (&c);
      pp_simulation_free (sim);
      pp_schedule_free (sc);
      g_free (t);
    }
  pp_test_rm_rf (dir);
  g_free (dir);
}

static void
test_cli (void)
{
  char *dir = g_dir_make_tmp ("pp-suggest-cli-XXXXXX", NULL);
  char *t = sim_trace (dir, "1f1b.pptrace", "1F1B", "4", "8");
  char *e = g_build_filename (dir, "empty.pptrace", NULL);
  char *out, *err, **lines;
  int measured = 0;

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", t, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, "measured: 1F1B, P=4, M=8, V=1"));
  g_assert_nonnull (strstr (out, "  rank 0: F 1.000 ms, B 2.000 ms, W 0.000 ms\n"));
  g_assert_nonnull (strstr (out, "  rank 3: F 1.000 ms, B 2.000 ms, W 0.000 ms\n"));
  lines = g_strsplit (out, "\n", -1);
  for (char **l = lines; *l; l++)
    if (strstr (*l, "← measured"))
      {
        char **f = g_strsplit_set (g_strstrip (*l), " ", -1);
        GPtrArray *w = g_ptr_array_new ();
        for (char **x = f; *x; x++)
          if (**x)
            g_ptr_array_add (w, *x);
        /* rank#, schedule, M, V, step, ... */
        g_assert_cmpuint (w->len, >=, 7);
        g_assert_cmpstr (w->pdata[1], ==, "1F1B");
        g_assert_cmpstr (w->pdata[2], ==, "8");
        g_assert_cmpstr (w->pdata[3], ==, "1");
        g_assert_cmpstr (w->pdata[4], ==, "33.000");
        g_ptr_array_free (w, TRUE);
        g_strfreev (f);
        measured++;
      }
  g_assert_cmpint (measured, ==, 1);
  g_strfreev (lines);
  g_free (out); g_free (err);

  /* --top: the measured row falls off and is named below. */
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", t, "--top", "3", NULL), ==, 0);
  g_assert_null (strstr (out, "← measured"));
  g_assert_nonnull (strstr (out, "more; --top to see them)"));
  g_assert_nonnull (strstr (out, "measured configuration: #"));
  g_assert_nonnull (strstr (out, "\n   3  "));
  g_assert_null (strstr (out, "\n   4  "));
  g_free (out); g_free (err);

  /* A budget below the measured 1F1B's 4 micro-batches. */
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", t, "--memory-budget", "2", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "memory budget: 2 micro-batches"));
  g_assert_nonnull (strstr (out, "over the memory budget"));
  g_assert_null (strstr (out, " GPipe "));
  g_free (out); g_free (err);

  /* No spans: one line, exit 1. */
  {
    PpError perr = { 0 };
    PpTraceWriter *w = pp_trace_writer_new_path (e, PP_TRACE_NATIVE, &perr);
    PpTraceDescription d = { .schedule = "1F1B", .n_ranks = 4, .n_microbatches = 8, .n_virtual = 1 };
    g_assert_nonnull (w);
    g_assert_cmpint (pp_trace_write_description (w, &d, &perr), ==, PP_OK);
    g_assert_cmpint (pp_trace_writer_close (w, &perr), ==, PP_OK);
  }
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", e, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "has no measured F/B spans; record a run first"));
  g_assert_cmpstr (out, ==, "");
  g_free (out); g_free (err);

  /* A missing file: one line, exit 1. */
  {
    char *m = g_build_filename (dir, "missing.pptrace", NULL);
    g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", m, NULL), ==, 1);
    pp_test_assert_one_line_error (err);
    g_free (out); g_free (err);
    g_free (m);
  }

  /* Usage errors: exit 2, one line. */
  {
    const char *bad[][3] = {
      { "suggest", NULL, NULL },
      { "suggest", "--top", "0" },
      { "suggest", "--memory-budget", "-1" },
      { "suggest", "--bogus", NULL },
    };
    for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
      {
        int rc = bad[i][1] == NULL ? pp_test_cli_run (NULL, &out, &err, bad[i][0], NULL)
                 : bad[i][2] == NULL ? pp_test_cli_run (NULL, &out, &err, bad[i][0], t, bad[i][1], NULL)
                 : pp_test_cli_run (NULL, &out, &err, bad[i][0], t, bad[i][1], bad[i][2], NULL);
        g_assert_cmpint (rc, ==, 2);
        pp_test_assert_one_line_error (err);
        g_free (out); g_free (err);
      }
    g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", t, "extra", NULL), ==, 2);
    pp_test_assert_one_line_error (err);
    g_free (out); g_free (err);
  }

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "suggest", "--help", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "Usage: pipescope-cli suggest FILE"));
  g_free (out); g_free (err);

  pp_test_rm_rf (dir);
  g_free (dir);
  g_free (t);
  g_free (e);
}

/* issue 28: a job is offered only what its framework runs, one rule for
 * `suggest` and the What if panel (pp_suggest's costs.framework). */
static void
test_frameworks (void)
{
  double f[P], b[P], w[P];
  PpMeasuredCosts c = uniform_costs (f, b, w);
  PpSuggestion *s;
  size_t n;
  int n_dualpipe = 0, n_megatron = 0;

  /* pipescope's runtime: every general schedule, no framework-specific one */
  s = suggest (&c, 0, &n);
  for (size_t i = 0; i < n; i++)
    {
      n_dualpipe += strcmp (s[i].schedule, "DualPipe") == 0;
      g_assert_false (g_str_has_prefix (s[i].schedule, "Megatron-"));
    }
  g_assert_cmpint (n_dualpipe, >, 0);
  free (s);

  /* PyTorch: only what torch.distributed.pipelining runs (a class or its CSV) */
  c.framework = PP_FRAMEWORK_PYTORCH;
  s = suggest (&c, 0, &n);
  g_assert_cmpuint (n, >, 10);
  for (size_t i = 0; i < n; i++)
    {
      g_assert_nonnull (pp_schedule_pytorch_class (s[i].schedule));
      g_assert_true (pp_schedule_runs_on (s[i].schedule, PP_FRAMEWORK_PYTORCH));
    }
  g_assert_null (find (s, n, "DualPipe", 8));
  g_assert_nonnull (find (s, n, "DualPipeV", 8));
  g_assert_nonnull (find (s, n, "ZB-H1", 8));
  free (s);

  /* megatron-core: 1F1B and its interleaved schedule at V 2 and 4, groups P,
   * 2P and M', never a configuration it refuses */
  c.framework = PP_FRAMEWORK_MEGATRON;
  s = suggest (&c, 0, &n);
  gboolean seen_v4 = FALSE, seen_g2p = FALSE, seen_gm = FALSE;
  for (size_t i = 0; i < n; i++)
    {
      if (strcmp (s[i].schedule, "1F1B") == 0)
        {
          g_assert_cmpint (s[i].stages_per_rank, ==, 1);
          continue;
        }
      int g = pp_schedule_name_group (s[i].schedule);
      g_assert_true (g_str_has_prefix (s[i].schedule, "Megatron-Interleaved:group="));
      g_assert_cmpint (g, >=, P);
      g_assert_cmpint (pp_megatron_check_group (P, s[i].microbatches, g, NULL), ==, PP_OK);
      g_assert_true (s[i].stages_per_rank == 2 || s[i].stages_per_rank == 4);
      seen_v4 |= s[i].stages_per_rank == 4;
      seen_g2p |= g == 2 * P;
      seen_gm |= g == s[i].microbatches && g > 2 * P;
      n_megatron++;
    }
  g_assert_true (seen_v4 && seen_g2p && seen_gm);
  g_assert_nonnull (find (s, n, "1F1B", 8));
  g_assert_nonnull (find (s, n, "Megatron-Interleaved:group=4", 8));
  g_assert_null (find (s, n, "Interleaved1F1B", 8));
  g_assert_cmpint (n_megatron, >, 10);
  g_assert_cmpint (pp_suggest_work (&c), >, 0);
  /* each row says how the job runs it */
  char how[256];
  const PpSuggestion *g4 = find (s, n, "Megatron-Interleaved:group=4", 8);
  g_assert_cmpstr (pp_suggestion_how (g4, PP_FRAMEWORK_MEGATRON, how, sizeof how), ==,
                   g4->stages_per_rank == 2
                   ? "virtual_pipeline_model_parallel_size=2, microbatch_group_size_per_vp_stage=4, num_microbatches=8"
                   : "virtual_pipeline_model_parallel_size=4, microbatch_group_size_per_vp_stage=4, num_microbatches=8");
  free (s);
}

/* The framework comes from the trace; `suggest` on a PyTorch job never
 * offers DualPipe (it ranked it first before), on a Megatron job only what
 * megatron-core runs, with the measured configuration found. */
static void
test_frameworks_cli (void)
{
  char *dir = g_dir_make_tmp ("pp-suggest-fw-XXXXXX", NULL);
  const char *data = g_getenv ("PP_TEST_DATA_DIR");
  PpMeasuredCosts c;
  PpError err = { 0 };
  char *out, *errs;

  char *meg = sim_trace (dir, "megatron.pptrace", "Megatron-Interleaved", "4", "8");
  g_assert_cmpint (pp_measured_costs_from_trace (meg, &c, &err), ==, PP_OK);
  g_assert_cmpint (c.framework, ==, PP_FRAMEWORK_MEGATRON);
  pp_measured_costs_clear (&c);
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &errs, "suggest", meg, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "candidates: what a megatron-core job can run"));
  g_assert_nonnull (strstr (out, "Megatron-Interleaved:group=4       8   2"));
  g_assert_nonnull (strstr (out, "← measured"));
  g_assert_nonnull (strstr (out, "to run #1 in your job: virtual_pipeline_model_parallel_size="));
  g_assert_null (strstr (out, "DualPipe"));
  g_assert_null (strstr (out, "ZB"));
  g_free (out);
  g_free (errs);

  /* a real PyTorch job's torch.profiler traces, imported */
  g_autofree char *torch = g_build_filename (dir, "torch.pptrace", NULL);
  g_autofree char *r0 = g_build_filename (data, "kineto", "interleaved", "rank0.pt.trace.json.gz", NULL);
  g_autofree char *r1 = g_build_filename (data, "kineto", "interleaved", "rank1.pt.trace.json.gz", NULL);
  if (pp_test_cli_run (NULL, &out, &errs, "import", r0, r1, "-o", torch, NULL) != 0)
    g_error ("import: %s", errs);
  g_free (out);
  g_free (errs);
  g_assert_cmpint (pp_measured_costs_from_trace (torch, &c, &err), ==, PP_OK);
  g_assert_cmpint (c.framework, ==, PP_FRAMEWORK_PYTORCH);
  pp_measured_costs_clear (&c);
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &errs, "suggest", torch, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "candidates: what a PyTorch job can run"));
  g_assert_null (strstr (out, "DualPipe "));
  g_assert_null (strstr (out, "Megatron"));
  g_assert_nonnull (strstr (out, "   1  "));
  g_free (out);
  g_free (errs);

  g_unlink (meg);
  g_unlink (torch);
  g_rmdir (dir);
  g_free (meg);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/suggest/sorted-and-candidates", test_sorted_and_candidates);
  g_test_add_func ("/suggest/hand-computed", test_hand_computed);
  g_test_add_func ("/suggest/budget", test_budget);
  g_test_add_func ("/suggest/invalid", test_invalid);
  g_test_add_func ("/suggest/costs-from-trace", test_costs_from_trace);
  g_test_add_func ("/suggest/reproduces-measured", test_reproduces_measured);
  g_test_add_func ("/suggest/cli", test_cli);
  g_test_add_func ("/suggest/frameworks", test_frameworks);
  g_test_add_func ("/suggest/frameworks-cli", test_frameworks_cli);
  return g_test_run ();
}
