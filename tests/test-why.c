/* Why the bubble is there: idle split by cause, the critical path, what to
 * change (runtime/pp-why.h).  Every number is simulated or built by hand;
 * nothing timed on this machine is asserted. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-test-util.h"
#include "pp-trace.h"
#include "pp-why.h"

#define EPS 1e-9

static PpWhyIdle *
split (const PpSchedule *s, const PpCostModel *c, const double *measured)
{
  PpWhyIdle *out = g_new0 (PpWhyIdle, s->ranks);
  PpError err = { 0 };
  if (pp_why_split (s, c, measured, out, &err) != PP_OK)
    g_error ("split %s P=%d M=%d: %s", s->name, s->ranks, s->microbatches, err.msg);
  return out;
}

static void
assert_adds_up (const PpWhyIdle *w)
{
  g_assert_cmpfloat_with_epsilon (w->schedule + w->imbalance + w->transfers + w->runtime, w->measured, EPS);
}

/* Uniform costs: every idle second is the schedule's, and it is the closed form. */
static void
test_uniform_is_schedule (void)
{
  const char *names[] = { "GPipe", "1F1B", "Interleaved1F1B" };
  int checked = 0;
  for (int k = 0; k < 3; k++)
    for (int P = 2; P <= 6; P++)
      for (int M = P; M <= 3 * P; M += P)
        {
          int V = k == 2 ? 2 : 1;
          PpSchedule *s = pp_test_generate (names[k], P, M, V);
          PpCostModel *c = pp_cost_model_new_uniform (s->n_stages, 1, 2, 0, 0);
          PpSimulation *sim = pp_test_simulate (s, 1, 2, 0, 0);
          PpWhyIdle *w = split (s, c, NULL);
          double sum = 0, closed = pp_bubble_closed_form (names[k], P, M, V);
          for (int r = 0; r < P; r++)
            {
              assert_adds_up (&w[r]);
              g_assert_cmpfloat_with_epsilon (w[r].measured, sim->rank[r].idle, EPS);
              g_assert_cmpfloat_with_epsilon (w[r].schedule, w[r].measured, EPS);
              g_assert_cmpfloat_with_epsilon (w[r].imbalance, 0, EPS);
              g_assert_cmpfloat_with_epsilon (w[r].transfers, 0, EPS);
              g_assert_cmpfloat_with_epsilon (w[r].runtime, 0, EPS);
              sum += w[r].schedule;
            }
          g_assert_cmpfloat (closed, >, 0);
          g_assert_cmpfloat_with_epsilon (sum / (P * sim->makespan), closed, 1e-12);
          g_free (w);
          pp_simulation_free (sim);
          pp_cost_model_free (c);
          pp_schedule_free (s);
          checked++;
        }
  g_assert_cmpint (checked, ==, 3 * 5 * 3);
}

/* GPipe 4x6, stage 1 twice as slow (F 2, B 4; the others F 1, B 2): the
 * plan at the mean action (F 1.25, B 2.5) idles (P-1)(F+B) = 11.25 a rank;
 * the full plan (worked out by hand: makespan 45, rank 1 busy 36, the others
 * 18) idles 27, 9, 27, 27: the difference is imbalance.  Rank 1, the slow
 * stage's, idles less than the balanced plan: its imbalance is 0, not
 * -2.25, and its schedule part the per-stage plan's 9. */
static void
test_slow_stage_is_imbalance (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1, 2, 0, 0);
  const double full[4] = { 27, 9, 27, 27 };
  double measured[4];
  c->f[1] = 2;
  c->b[1] = 4;
  for (int r = 0; r < 4; r++)
    measured[r] = full[r] + 0.5 * r;   /* what the run adds: runtime */
  PpWhyIdle *w = split (s, c, measured);
  for (int r = 0; r < 4; r++)
    {
      assert_adds_up (&w[r]);
      g_assert_cmpfloat_with_epsilon (w[r].schedule, r == 1 ? 9 : 11.25, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].imbalance, r == 1 ? 0 : full[r] - 11.25, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].transfers, 0, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].runtime, 0.5 * r, EPS);
    }
  g_free (w);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* A transfer time C = 0.5 on every boundary of GPipe 4x6 (F 1, B 2): the
 * fill and the drain each cross three boundaries, so the makespan grows by
 * 6C = 3 with the busy time unchanged: 3 of each rank's idle is transfers,
 * the schedule's 9 = (P-1)(F+B) stays. */
static void
test_transfer_is_transfers (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1, 2, 0, 0.5);
  PpWhyIdle *w = split (s, c, NULL);
  for (int r = 0; r < 4; r++)
    {
      assert_adds_up (&w[r]);
      g_assert_cmpfloat_with_epsilon (w[r].schedule, 9, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].imbalance, 0, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].transfers, 3, EPS);
      g_assert_cmpfloat_with_epsilon (w[r].runtime, 0, EPS);
    }
  g_free (w);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

static void
assert_none_negative (const PpWhyIdle *w)
{
  assert_adds_up (w);
  g_assert_cmpfloat (w->schedule, >=, 0);
  g_assert_cmpfloat (w->imbalance, >=, 0);
  g_assert_cmpfloat (w->transfers, >=, 0);
  g_assert_cmpfloat (w->runtime, >=, 0);
}

/* The idle of rank r in three plans of s: costs at the mean action with
 * free transfers, per stage, per stage with the transfers. */
static void
plan_levels (const PpSchedule *s, const PpCostModel *c, int r, double level[3])
{
  double f = 0, b = 0, w = 0;
  for (int q = 0; q < c->n_stages; q++)
    f += c->f[q], b += c->b[q], w += c->w[q];
  PpCostModel *m[3] = { pp_cost_model_new_uniform (s->n_stages, f / c->n_stages, b / c->n_stages,
                                                   w / c->n_stages, 0),
                        pp_cost_model_new_uniform (s->n_stages, 0, 0, 0, 0),
                        pp_cost_model_new_uniform (s->n_stages, 0, 0, 0, 0) };
  for (int q = 0; q < c->n_stages; q++)
    {
      m[1]->f[q] = m[2]->f[q] = c->f[q];
      m[1]->b[q] = m[2]->b[q] = c->b[q];
      m[1]->w[q] = m[2]->w[q] = c->w[q];
      m[2]->comm[q] = c->comm[q];
    }
  for (int k = 0; k < 3; k++)
    {
      PpSimulation *sim = NULL;
      PpError err = { 0 };
      if (pp_simulate (s, m[k], &sim, &err) != PP_OK)
        g_error ("simulate %s: %s", s->name, err.msg);
      level[k] = sim->rank[r].idle;
      pp_simulation_free (sim);
      pp_cost_model_free (m[k]);
    }
}

/* The review's case: rank 1 of a DualPipeV PyTorch job (P=2, M=8, the
 * per-stage costs it measured, ms) showed -0.21 ms of imbalance, the
 * per-stage plan idling less than the balanced one on that rank.  Now its
 * imbalance is 0, schedule is the per-stage plan's idle, transfers and
 * runtime are the plain differences, and nothing is negative. */
static void
test_dualpipev_no_negative_imbalance (void)
{
  PpSchedule *s = pp_test_generate ("DualPipeV", 2, 8, 2);
  PpCostModel *c = pp_cost_model_new_uniform (4, 0, 0, 0, 0);
  const double f[4] = { 0.448175833, 0.543807167, 0.413797, 0.485328 };
  const double b[4] = { 0.731393, 0.934336, 1.05628267, 1.05643433 };
  const double w[4] = { 0.68558475, 0.7094765, 0.815706, 0.8216665 };
  const double comm[4] = { 0.249705469, 0, 0.355268266, 0 };
  const double measured[2] = { 27.8768975, 33.126641 };
  for (int q = 0; q < 4; q++)
    c->f[q] = f[q], c->b[q] = b[q], c->w[q] = w[q], c->comm[q] = comm[q];
  PpWhyIdle *out = split (s, c, measured);
  int negative = 0;
  for (int r = 0; r < 2; r++)
    {
      double lv[3];
      plan_levels (s, c, r, lv);
      assert_none_negative (&out[r]);
      g_assert_cmpfloat_with_epsilon (out[r].measured, measured[r], EPS);
      g_assert_cmpfloat (measured[r], >, lv[2]);
      g_assert_cmpfloat (lv[2], >, lv[1]);
      if (lv[1] < lv[0])
        {
          /* what used to be a negative imbalance */
          negative++;
          g_assert_cmpfloat_with_epsilon (out[r].schedule, lv[1], EPS);
          g_assert_cmpfloat_with_epsilon (out[r].imbalance, 0, EPS);
        }
      else
        {
          g_assert_cmpfloat_with_epsilon (out[r].schedule, lv[0], EPS);
          g_assert_cmpfloat_with_epsilon (out[r].imbalance, lv[1] - lv[0], EPS);
        }
      g_assert_cmpfloat_with_epsilon (out[r].transfers, lv[2] - lv[1], EPS);
      g_assert_cmpfloat_with_epsilon (out[r].runtime, measured[r] - lv[2], EPS);
    }
  g_assert_cmpint (negative, ==, 1);   /* rank 1's, as in the review */
  g_free (out);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* The levels by hand: a level above a later one is cut to it, the parts
 * before it giving way latest first; none negative, the sum exact. */
static void
test_split_levels (void)
{
  static const struct {
    double balanced, per_stage, full, measured;
    double schedule, imbalance, transfers, runtime;
  } cases[] = {
    { 5, 8, 10, 12,    5, 3, 2, 2 },     /* rising: the plain differences */
    { 11.25, 9, 9, 9.5, 9, 0, 0, 0.5 },  /* a slow stage's rank */
    { 5, 8, 10, 7,     5, 2, 0, 0 },     /* a run that idles less than its plan */
    { 5, 8, 6, 9,      5, 1, 0, 3 },     /* transfers that would give idle back */
    { 5, 8, 10, 3,     3, 0, 0, 0 },     /* below the balanced plan's idle */
    { 5, 8, 10, 0,     0, 0, 0, 0 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PpWhyIdle w = { .measured = cases[i].measured };
      pp_why_split_levels (cases[i].balanced, cases[i].per_stage, cases[i].full, &w);
      assert_none_negative (&w);
      g_assert_cmpfloat_with_epsilon (w.schedule, cases[i].schedule, EPS);
      g_assert_cmpfloat_with_epsilon (w.imbalance, cases[i].imbalance, EPS);
      g_assert_cmpfloat_with_epsilon (w.transfers, cases[i].transfers, EPS);
      g_assert_cmpfloat_with_epsilon (w.runtime, cases[i].runtime, EPS);
    }
}

/* Every schedule under lopsided per-stage costs and transfers, measured
 * idle above and below the plan's: the parts never go negative and always
 * add up, on cases where a plain difference would have been negative. */
static void
test_split_never_negative (void)
{
  const char *names[] = { "GPipe", "1F1B", "Interleaved1F1B", "ZB-H1", "ZBV", "DualPipeV" };
  const int vs[] = { 1, 1, 2, 1, 2, 2 };
  int would_be_negative = 0, checked = 0;
  guint32 seed = 12345;
  for (gsize k = 0; k < G_N_ELEMENTS (names); k++)
    for (int P = 2; P <= 4; P++)
      {
        PpSchedule *s = pp_test_generate (names[k], P, 2 * P, vs[k]);
        for (int trial = 0; trial < 4; trial++)
          {
            PpCostModel *c = pp_cost_model_new_uniform (s->n_stages, 0, 0, 0, 0);
            for (int q = 0; q < s->n_stages; q++)
              {
                /* a small deterministic generator: no seed of this machine's */
                seed = seed * 1103515245u + 12345u;
                c->f[q] = 0.5 + (seed >> 16) % 100 / 50.0;
                c->b[q] = 2 * c->f[q];
                c->w[q] = vs[k] > 1 || strncmp (names[k], "ZB", 2) == 0 ? 0.4 * c->b[q] : 0;
                seed = seed * 1103515245u + 12345u;
                c->comm[q] = (seed >> 16) % 100 / 200.0;
              }
            double *measured = g_new (double, s->ranks);
            for (int r = 0; r < s->ranks; r++)
              {
                double lv[3];
                plan_levels (s, c, r, lv);
                /* above the plan on even trials, below it on odd ones */
                measured[r] = trial % 2 == 0 ? lv[2] + 0.25 * r : 0.8 * lv[2];
                would_be_negative += lv[1] < lv[0] || lv[2] < lv[1] || measured[r] < lv[2];
              }
            PpWhyIdle *w = split (s, c, measured);
            for (int r = 0; r < s->ranks; r++)
              {
                assert_none_negative (&w[r]);
                g_assert_cmpfloat_with_epsilon (w[r].measured, measured[r], EPS);
                checked++;
              }
            g_free (w);
            g_free (measured);
            pp_cost_model_free (c);
          }
        pp_schedule_free (s);
      }
  g_assert_cmpint (checked, ==, 4 * (2 + 3 + 4) * (int) G_N_ELEMENTS (names));
  g_assert_cmpint (would_be_negative, >, checked / 4);
}

typedef struct {
  int kind, stage, mb, via;
} Hop;

static PpWhyPath
path_of_plan (const PpSchedule *s, const PpCostModel *c)
{
  PpSimulation *sim = NULL;
  PpWhyBlock *b = NULL;
  size_t n = 0;
  PpWhyPath p;
  PpError err = { 0 };
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  g_assert_cmpint (pp_why_blocks_of_simulation (sim, &b, &n, &err), ==, PP_OK);
  g_assert_cmpint (n, ==, 2 * s->n_stages * s->microbatches);
  if (pp_why_critical_path (s, b, n, c->comm, &p, &err) != PP_OK)
    g_error ("critical path: %s", err.msg);
  g_assert_cmpfloat_with_epsilon (p.end - p.start, sim->makespan, EPS);
  g_free (b);
  pp_simulation_free (sim);
  return p;
}

static void
assert_path (const PpWhyPath *p, const Hop *want, size_t n_want)
{
  g_assert_cmpuint (p->n, ==, n_want);
  for (size_t i = 0; i < n_want; i++)
    {
      const PpWhyPathStep *st = &p->steps[i];
      if (st->block.kind != want[i].kind || st->block.stage != want[i].stage
          || st->block.microbatch != want[i].mb || st->via != want[i].via)
        g_error ("path step %zu: kind %d stage %d mb %d via %d; want kind %d stage %d mb %d via %d",
                 i, st->block.kind, st->block.stage, st->block.microbatch, st->via,
                 want[i].kind, want[i].stage, want[i].mb, want[i].via);
    }
}

enum { F = PP_ACT_F, B = PP_ACT_B, S0 = PP_WHY_VIA_START, RK = PP_WHY_VIA_RANK, DP = PP_WHY_VIA_DEPENDENCY };

/* GPipe 4x6, F 1, B 2, by hand: rank 0's six forwards, the last
 * micro-batch's forward down the pipe (ties go to the hand-off), rank 3's
 * six backwards, the last micro-batch's backward up the pipe.  Stage 0 holds
 * 6 + 2 = 8 of the 27, stage 3 1 + 12 = 13, stages 1 and 2 3 each. */
static void
test_critical_path_gpipe_uniform (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1, 2, 0, 0);
  Hop want[18];
  size_t n = 0;
  for (int m = 0; m < 6; m++)
    want[n++] = (Hop) { F, 0, m, m == 0 ? S0 : RK };
  for (int st = 1; st < 4; st++)
    want[n++] = (Hop) { F, st, 5, DP };
  for (int m = 0; m < 6; m++)
    want[n++] = (Hop) { B, 3, m, RK };
  for (int st = 2; st >= 0; st--)
    want[n++] = (Hop) { B, st, 5, DP };
  PpWhyPath p = path_of_plan (s, c);
  assert_path (&p, want, n);
  g_assert_cmpfloat_with_epsilon (p.stage_time[0], 8, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[1], 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[2], 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[3], 13, EPS);
  g_assert_cmpfloat_with_epsilon (p.transfer_time, 0, EPS);
  g_assert_cmpfloat_with_epsilon (p.slack_time, 0, EPS);
  pp_why_path_clear (&p);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* The same with stage 1 at F 2, B 4 (by hand: makespan 45): F0,0; all six
 * of stage 1's forwards; F2,5, F3,5; B3,0, B2,0; all six of stage 1's
 * backwards; B0,5.  Stage 1 holds 12 + 24 = 36 of the 45 (80%). */
static void
test_critical_path_gpipe_slow_stage (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1, 2, 0, 0);
  Hop want[18];
  size_t n = 0;
  c->f[1] = 2;
  c->b[1] = 4;
  want[n++] = (Hop) { F, 0, 0, S0 };
  for (int m = 0; m < 6; m++)
    want[n++] = (Hop) { F, 1, m, m == 0 ? DP : RK };
  want[n++] = (Hop) { F, 2, 5, DP };
  want[n++] = (Hop) { F, 3, 5, DP };
  want[n++] = (Hop) { B, 3, 0, RK };
  want[n++] = (Hop) { B, 2, 0, DP };
  for (int m = 0; m < 6; m++)
    want[n++] = (Hop) { B, 1, m, m == 0 ? DP : RK };
  want[n++] = (Hop) { B, 0, 5, DP };
  PpWhyPath p = path_of_plan (s, c);
  assert_path (&p, want, n);
  g_assert_cmpfloat_with_epsilon (p.stage_time[0], 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[1], 36, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[2], 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.stage_time[3], 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.end - p.start, 45, EPS);
  pp_why_path_clear (&p);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* A transfer on the path is counted as one: GPipe 4x6 with C = 0.5 has the
 * uniform path's shape and three hand-offs each way: 6 x 0.5 of transfers. */
static void
test_critical_path_transfers (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1, 2, 0, 0.5);
  PpWhyPath p = path_of_plan (s, c);
  g_assert_cmpfloat_with_epsilon (p.transfer_time, 3, EPS);
  g_assert_cmpfloat_with_epsilon (p.slack_time, 0, EPS);
  g_assert_cmpfloat_with_epsilon (p.end - p.start, 30, EPS);
  pp_why_path_clear (&p);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* Spans of three steps laid out as a plan (ms, on a clock in ns), the first
 * (warm-up) step slower: the analysis leaves it out, finds no runtime part
 * in the plan-shaped steps, and the runtime part of a step whose last block
 * was held back by 2 ms. */
static void
test_analyse_spans (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  c->f[0] = 4e-3;   /* stage 0 four times as slow: imbalance */
  c->b[0] = 8e-3;
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  for (int step = 0; step < 4; step++)
    {
      int64_t base = (int64_t) step * 1000000000;
      double stretch = step == 0 ? 3 : 1;
      for (int r = 0; r < 4; r++)
        for (int k = 0; k < s->rank[r].n_actions; k++)
          {
            const PpAction *a = &s->rank[r].actions[k];
            PpSpan sp = { 0 };
            sp.rank = r;
            sp.stage = a->stage;
            sp.microbatch = a->microbatch;
            sp.step = step;
            sp.kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B;
            sp.start_ns = base + (int64_t) llround (sim->timeline[r][k].start * stretch * 1e9);
            sp.end_ns = base + (int64_t) llround (sim->timeline[r][k].end * stretch * 1e9);
            if (step == 3 && r == 0 && k == s->rank[r].n_actions - 1)
              {
                /* the step's last block starts 2 ms late */
                sp.start_ns += 2000000;
                sp.end_ns += 2000000;
              }
            g_array_append_val (spans, sp);
          }
    }
  PpWhyReport *rep = NULL;
  if (pp_why_analyse_spans (s, (const PpSpan *) spans->data, spans->len, 0, &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  g_assert_cmpint (rep->n_steps, ==, 3);
  g_assert_cmpint (rep->steps[0].step, ==, 1);
  for (int i = 0; i < 3; i++)
    {
      const PpWhyStep *ws = &rep->steps[i];
      double extra = i == 2 ? 2e-3 : 0;
      g_assert_cmpfloat_with_epsilon (ws->length, sim->makespan + extra, 1e-8);
      for (int r = 0; r < 4; r++)
        {
          assert_adds_up (&ws->idle[r]);
          g_assert_cmpfloat_with_epsilon (ws->idle[r].transfers, 0, 1e-8);
          /* the fast ranks wait for stage 0: most of their idle is imbalance */
          if (r > 0)
            g_assert_cmpfloat (ws->idle[r].imbalance, >, ws->idle[r].schedule);
          /* every rank idles 2 ms more in the late step; it is runtime */
          g_assert_cmpfloat_with_epsilon (ws->idle[r].runtime, extra, 1e-8);
        }
      /* stage 0 holds most of the path */
      double L = ws->path.end - ws->path.start;
      g_assert_cmpfloat (ws->path.stage_time[0] / L, >, 0.7);
    }
  g_assert_cmpfloat_with_epsilon (rep->costs->f[0], 4e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (rep->costs->b[1], 2e-3, 1e-9);
  g_assert_cmpfloat (rep->path_share[0], >, 0.7);

  /* a step with a block missing is not a whole step */
  g_array_remove_index (spans, spans->len - 1);
  pp_why_report_free (rep);
  rep = NULL;
  g_assert_cmpint (pp_why_analyse_spans (s, (const PpSpan *) spans->data, spans->len, 2, &rep, &err), ==, PP_OK);
  g_assert_cmpint (rep->n_steps, ==, 2);
  g_assert_cmpint (rep->steps[1].step, ==, 2);
  pp_why_report_free (rep);
  g_assert_cmpint (pp_why_analyse_spans (s, NULL, 0, 0, &rep, &err), ==, PP_EINVAL);
  g_assert_null (rep);
  g_array_free (spans, TRUE);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* 8 blocks as 5,1,1,1 under 1F1B with the costs a block, the input
 * projection and the head would have: stage 0 is the slowest, and 2,2,2,2
 * balances it with a shorter predicted step. */
static void
test_suggest_partition (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 0, 0, 0, 0);
  const int blocks[4] = { 5, 1, 1, 1 };
  PpModelConfig mc = { .layers = 8, .width = 256 };
  PpWhyChange ch;
  PpError err = { 0 };
  for (int i = 0; i < 4; i++)
    {
      c->f[i] = blocks[i] * 1.0 + (i == 0 ? 0.1 : 0) + (i == 3 ? 0.05 : 0);
      c->b[i] = 2 * c->f[i];
    }
  g_assert_cmpint (pp_why_suggest_partition (s, c, &mc, blocks, 0, &ch, &err), ==, PP_OK);
  g_assert_cmpint (ch.slowest_stage, ==, 0);
  g_assert_cmpfloat_with_epsilon (ch.slowest_cost, 15.3, 1e-9);
  g_assert_cmpfloat_with_epsilon (ch.excess, 15.3 / ((15.3 + 3 + 3 + 3.15) / 4) - 1, 1e-9);
  g_assert_true (ch.has_partition);
  g_assert_true (ch.changed);
  g_assert_cmpstr (ch.current, ==, "5,1,1,1");
  g_assert_cmpstr (ch.partition, ==, "2,2,2,2");
  /* 1F1B under the balanced costs: (M + P - 1) x the slowest stage's F + B
   * is an upper bound, the plan under today's costs far above it */
  g_assert_cmpfloat (ch.predicted_step, <=, 11 * 6.3 + 1e-9);
  g_assert_cmpfloat (ch.predicted_step, <, 0.6 * ch.current_step);

  g_assert_cmpint (ch.cores, ==, 0);

  /* the 4 ranks sharing 2 cores: both steps simulated so, neither shorter
   * than with a core each, the same partition proposed; 4 cores or more
   * is a core each */
  double alone = ch.predicted_step, now_alone = ch.current_step;
  g_assert_cmpint (pp_why_suggest_partition (s, c, &mc, blocks, 2, &ch, &err), ==, PP_OK);
  g_assert_cmpint (ch.cores, ==, 2);
  g_assert_cmpstr (ch.partition, ==, "2,2,2,2");
  g_assert_cmpfloat (ch.predicted_step, >, alone * 1.2);
  g_assert_cmpfloat (ch.current_step, >=, now_alone - 1e-9);
  double two = ch.predicted_step;
  g_assert_cmpint (pp_why_suggest_partition (s, c, &mc, blocks, 4, &ch, &err), ==, PP_OK);
  g_assert_cmpint (ch.cores, ==, 0);
  g_assert_cmpfloat_with_epsilon (ch.predicted_step, alone, 1e-9 * alone);
  GString *text = g_string_new (NULL);
  {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    ch.cores = 2;
    ch.predicted_step = two;
    pp_why_print_change (f, &ch, 1, "ms");
    fclose (f);
    g_string_append (text, buf);
    free (buf);
  }
  g_assert_nonnull (strstr (text->str, "the ranks sharing 2 cores"));
  g_string_free (text, TRUE);

  /* without the model: the slowest stage only */
  g_assert_cmpint (pp_why_suggest_partition (s, c, NULL, NULL, 0, &ch, &err), ==, PP_OK);
  g_assert_false (ch.has_partition);
  g_assert_cmpint (ch.slowest_stage, ==, 0);
  /* a partition of the wrong sum is one line */
  const int bad[4] = { 5, 1, 1, 2 };
  g_assert_cmpint (pp_why_suggest_partition (s, c, &mc, bad, 0, &ch, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "9 blocks"));
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

static void
test_model_of_description (void)
{
  PpTraceDescription d;
  PpModelConfig mc;
  int blocks[4];
  PpError err = { 0 };
  memset (&d, 0, sizeof d);
  snprintf (d.model, sizeof d.model, "residual MLP: 8 blocks, width 256, hidden 1024, batch 64");
  snprintf (d.cmdline, sizeof d.cmdline, "pipescope-cli run -s 1F1B -p 4 --partition 5,1,1,1 --width 256");
  g_assert_cmpint (pp_why_model_of_description (&d, 4, &mc, blocks, &err), ==, PP_OK);
  g_assert_cmpint (mc.layers, ==, 8);
  g_assert_cmpint (mc.width, ==, 256);
  g_assert_cmpint (blocks[0], ==, 5);
  g_assert_cmpint (blocks[3], ==, 1);
  snprintf (d.cmdline, sizeof d.cmdline, "pipescope-cli run --partition=3,3,1,1");
  g_assert_cmpint (pp_why_model_of_description (&d, 4, &mc, blocks, &err), ==, PP_OK);
  g_assert_cmpint (blocks[1], ==, 3);
  g_assert_cmpint (blocks[2], ==, 1);
  g_assert_cmpint (pp_why_cores_of_description (&d), ==, 0);
  /* the CPU run's rank threads on fewer cores, as `run` says it */
  snprintf (d.model, sizeof d.model,
            "residual MLP: 8 blocks, width 256, hidden 1024, batch 64; 4 rank threads on 2 cores");
  g_assert_cmpint (pp_why_model_of_description (&d, 4, &mc, blocks, &err), ==, PP_OK);
  g_assert_cmpint (mc.layers, ==, 8);
  g_assert_cmpint (pp_why_cores_of_description (&d), ==, 2);
  snprintf (d.model, sizeof d.model, "residual MLP: 8 blocks, width 256; 2 rank threads on 4 cores");
  g_assert_cmpint (pp_why_cores_of_description (&d), ==, 0);
  snprintf (d.model, sizeof d.model, "residual MLP: 8 blocks, width 256; -4 rank threads on -2 cores");
  g_assert_cmpint (pp_why_cores_of_description (&d), ==, 0);
  snprintf (d.model, sizeof d.model, "torch: GPT-2");
  g_assert_cmpint (pp_why_model_of_description (&d, 4, &mc, blocks, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_why_cores_of_description (&d), ==, 0);
}

/* The CLI: `run` prints the split a rank after its table, `info` the split,
 * the critical path and what to change, `export --format why` the JSON.
 * Only what is printed is checked, never a time this machine measured. */
static void
test_cli (void)
{
  PpTestCtx ctx;
  char *out = NULL, *err = NULL, *json = NULL;
  pp_test_ctx_init (&ctx, "why");
  char *t = pp_test_ctx_path (&ctx, "run.pptrace");
  char *j = pp_test_ctx_path (&ctx, "why.json");
  int rc = pp_test_cli_run (ctx.envp, &out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "4", "--layers", "4",
                            "--width", "16", "--batch", "8", "--steps", "4", "--partition", "3,1",
                            "--no-live", "--trace", t, NULL);
  if (rc != 0)
    g_error ("run: %s", err);
  g_assert_nonnull (strstr (out, "idle by cause"));
  g_assert_nonnull (strstr (out, "slowest stage: "));
  g_assert_cmpint (pp_test_count (out, " ms  "), >=, 2 * 5);
  g_free (out);
  g_free (err);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "info", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "idle by cause (a step, the mean over the 3 steps analysed"));
  g_assert_nonnull (strstr (out, "critical path (share of the step, mean over 3 steps): stage 0 "));
  g_assert_nonnull (strstr (out, "(now 3,1)"));
  g_free (out);
  g_free (err);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "export", t, "--format", "why", "-o", j, NULL), ==, 0);
  g_assert_true (g_file_get_contents (j, &json, NULL, NULL));
  g_assert_nonnull (strstr (json, "\"steps_analysed\": 3"));
  g_assert_cmpint (pp_test_count (json, "\"runtime\": "), ==, 2 + 3 * 2);
  g_assert_nonnull (strstr (json, "\"partition_now\": \"3,1\""));
  g_free (json);
  g_free (out);
  g_free (err);
  g_free (t);
  g_free (j);
  pp_test_ctx_clear (&ctx);
}

/* ---- the schedule from the trace's plans --------------------------------- */

static int
span_kind_of (int act)
{
  switch (act)
    {
    case PP_ACT_F: return PP_SPAN_F;
    case PP_ACT_B: return PP_SPAN_B;
    case PP_ACT_I: return PP_SPAN_I;
    case PP_ACT_W: return PP_SPAN_W;
    default: return -1;
    }
}

/* steps copies of a simulated run (1 s apart) as spans, rank 0's last block
 * of the last step 1 ms late. */
static GArray *
spans_of_run (const PpSchedule *s, const PpSimulation *sim, int steps)
{
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  for (int step = 0; step < steps; step++)
    for (int r = 0; r < s->ranks; r++)
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          PpSpan sp = { 0 };
          g_assert_cmpint (span_kind_of (a->kind), >=, 0);
          sp.rank = r;
          sp.stage = a->stage;
          sp.microbatch = a->microbatch;
          sp.step = step;
          sp.kind = (uint16_t) span_kind_of (a->kind);
          sp.device = 0xffff;
          sp.peer_rank = -1;
          sp.start_ns = (int64_t) step * 1000000000 + (int64_t) llround (sim->timeline[r][k].start * 1e9);
          sp.end_ns = (int64_t) step * 1000000000 + (int64_t) llround (sim->timeline[r][k].end * 1e9);
          if (step == steps - 1 && r == 0 && k == s->rank[r].n_actions - 1)
            {
              sp.start_ns += 1000000;
              sp.end_ns += 1000000;
            }
          g_array_append_val (spans, sp);
        }
  return spans;
}

/* A schedule's orders as the trace's plans (untimed, as a PyTorch rank
 * writes them), with a transfer after every forward and an optimizer step
 * at the end, which the analysis leaves out. */
typedef struct {
  int                 ranks;
  PpTracePlanAction **a;
  size_t             *n;
  PpWhyPlans          view;
} TestPlans;

static void
test_plans_init (TestPlans *tp, const PpSchedule *s)
{
  tp->ranks = s->ranks;
  tp->a = g_new0 (PpTracePlanAction *, s->ranks);
  tp->n = g_new0 (size_t, s->ranks);
  for (int r = 0; r < s->ranks; r++)
    {
      tp->a[r] = g_new0 (PpTracePlanAction, 2 * s->rank[r].n_actions + 1);
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          tp->a[r][tp->n[r]++] = (PpTracePlanAction) { a->kind, a->stage, a->microbatch,
                                                       a->sub_kind, a->sub_stage, a->sub_microbatch, 0, 0 };
          if (a->kind == PP_ACT_F)
            tp->a[r][tp->n[r]++] = (PpTracePlanAction) { PP_ACT_SEND_F, a->stage, a->microbatch, -1, -1, -1, 0, 0 };
        }
      tp->a[r][tp->n[r]++] = (PpTracePlanAction) { PP_ACT_OPT, 0, -1, -1, -1, -1, 0, 0 };
    }
  tp->view = (PpWhyPlans) { tp->ranks, (const PpTracePlanAction *const *) tp->a, tp->n };
}

static void
test_plans_clear (TestPlans *tp)
{
  for (int r = 0; r < tp->ranks; r++)
    g_free (tp->a[r]);
  g_free (tp->a);
  g_free (tp->n);
}

static PpTraceDescription
description (const char *name, int P, int M, int V)
{
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, name, sizeof d.schedule);
  g_strlcpy (d.model, "PyTorch 2.x gloo _PipelineScheduleRuntime", sizeof d.model);
  d.n_ranks = P;
  d.n_microbatches = M;
  d.n_virtual = V;
  return d;
}

/* Two reports of the same spans are the same analysis: every step's idle
 * split (adding up to the idle exactly) and critical path. */
static void
assert_same_report (const PpWhyReport *a, const PpWhyReport *b)
{
  g_assert_cmpint (a->ranks, ==, b->ranks);
  g_assert_cmpint (a->n_stages, ==, b->n_stages);
  g_assert_cmpint (a->n_steps, ==, b->n_steps);
  g_assert_cmpint (a->n_steps, >, 0);
  for (int i = 0; i < a->n_steps; i++)
    {
      const PpWhyStep *x = &a->steps[i], *y = &b->steps[i];
      g_assert_cmpint (x->step, ==, y->step);
      for (int r = 0; r < a->ranks; r++)
        {
          assert_adds_up (&x->idle[r]);
          g_assert_cmpfloat (x->idle[r].measured, ==, y->idle[r].measured);
          for (int k = 0; k < PP_WHY_N_PARTS; k++)
            g_assert_cmpfloat (pp_why_idle_part (&x->idle[r], k), ==, pp_why_idle_part (&y->idle[r], k));
        }
      g_assert_cmpuint (x->path.n, >, 0);
      g_assert_cmpuint (x->path.n, ==, y->path.n);
      for (size_t k = 0; k < x->path.n; k++)
        {
          g_assert_cmpint (x->path.steps[k].block.rank, ==, y->path.steps[k].block.rank);
          g_assert_cmpint (x->path.steps[k].block.stage, ==, y->path.steps[k].block.stage);
          g_assert_cmpint (x->path.steps[k].block.kind, ==, y->path.steps[k].block.kind);
          g_assert_cmpint (x->path.steps[k].block.microbatch, ==, y->path.steps[k].block.microbatch);
          g_assert_cmpint (x->path.steps[k].via, ==, y->path.steps[k].via);
        }
    }
  for (int q = 0; q < a->n_stages; q++)
    g_assert_cmpfloat (a->path_share[q], ==, b->path_share[q]);
}

static PpWhyReport *
analyse (const PpTraceDescription *d, const PpWhyPlans *plans, GArray *spans, PpWhyChange *ch,
         PpSchedule **s_out)
{
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  if (pp_why_analyse_run (d, plans, (const PpSpan *) spans->data, spans->len, 0, &rep, ch, s_out, &err) != PP_OK)
    g_error ("analyse %s: %s", d->schedule, err.msg);
  return rep;
}

/* A schedule pipescope cannot generate by its name ("MyCsvSchedule", as a
 * PyTorch job that loaded its schedule from a CSV describes itself) whose
 * plan holds a valid 1F1B, interleaved or ZBV order: the analysis builds
 * the schedule from the plan, and it is what the same trace named after
 * its schedule gives. */
static void
test_plan_unnamed (void)
{
  static const struct { const char *name; int P, M, V; } cases[] = {
    { "1F1B", 4, 8, 1 },
    { "Interleaved1F1B", 2, 4, 2 },
    { "ZBV", 2, 4, 2 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PpSchedule *s = pp_test_generate (cases[i].name, cases[i].P, cases[i].M, cases[i].V);
      PpCostModel *c = pp_cost_model_new_uniform (s->n_stages, 1e-3, 2e-3, 1e-3, 1e-4);
      PpSimulation *sim = NULL;
      PpError err = { 0 };
      c->f[0] = 3e-3;
      c->b[0] = 6e-3;
      c->w[0] = 3e-3;
      g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
      GArray *spans = spans_of_run (s, sim, 4);
      TestPlans tp;
      test_plans_init (&tp, s);

      PpTraceDescription named = description (cases[i].name, s->ranks, s->microbatches, s->stages_per_rank);
      PpTraceDescription csv = description ("MyCsvSchedule", s->ranks, s->microbatches, s->stages_per_rank);
      PpWhyChange ch_named, ch_csv;
      PpSchedule *got = NULL;
      PpWhyReport *want = analyse (&named, NULL, spans, &ch_named, NULL);
      PpWhyReport *rep = analyse (&csv, &tp.view, spans, &ch_csv, &got);
      assert_same_report (rep, want);
      g_assert_cmpint (rep->n_steps, ==, 3);
      g_assert_cmpint (ch_csv.slowest_stage, ==, ch_named.slowest_stage);
      g_assert_cmpfloat (ch_csv.current_step, ==, ch_named.current_step);
      /* the plan's schedule, under the description's name, its stages where they run */
      g_assert_cmpstr (got->name, ==, "MyCsvSchedule");
      g_assert_cmpint (got->n_stages, ==, s->n_stages);
      for (int q = 0; q < s->n_stages; q++)
        g_assert_cmpint (got->stage_rank[q], ==, s->stage_rank[q]);
      for (int r = 0; r < s->ranks; r++)
        g_assert_cmpint (got->rank[r].n_actions, ==, s->rank[r].n_actions);
      /* the same trace named after the schedule, with its plan: the same */
      PpWhyReport *both = analyse (&named, &tp.view, spans, NULL, NULL);
      assert_same_report (both, want);

      /* without the plan the name alone says nothing: one line */
      PpWhyReport *none = NULL;
      g_assert_cmpint (pp_why_analyse_run (&csv, NULL, (const PpSpan *) spans->data, spans->len, 0, &none,
                                           NULL, NULL, &err), ==, PP_EINVAL);
      g_assert_null (none);
      g_assert_nonnull (strstr (err.msg, "MyCsvSchedule"));
      g_assert_null (strchr (err.msg, '\n'));

      pp_why_report_free (both);
      pp_why_report_free (rep);
      pp_why_report_free (want);
      pp_schedule_free (got);
      test_plans_clear (&tp);
      g_array_free (spans, TRUE);
      pp_simulation_free (sim);
      pp_cost_model_free (c);
      pp_schedule_free (s);
    }
}

/* A job that runs another order than pipescope's generator of the same
 * name (here GPipe's, described as "1F1B"): its plan wins, and the
 * analysis is GPipe's. */
static void
test_plan_order_differs (void)
{
  PpSchedule *g = pp_test_generate ("GPipe", 4, 8, 1);
  PpSimulation *sim = pp_test_simulate (g, 1, 2, 0, 0);
  GArray *spans = spans_of_run (g, sim, 3);
  TestPlans tp;
  test_plans_init (&tp, g);
  PpTraceDescription as_1f1b = description ("1F1B", 4, 8, 1), as_gpipe = description ("GPipe", 4, 8, 1);
  PpSchedule *got = NULL;
  PpWhyReport *want = analyse (&as_gpipe, NULL, spans, NULL, NULL);
  PpWhyReport *rep = analyse (&as_1f1b, &tp.view, spans, NULL, &got);
  assert_same_report (rep, want);
  for (int r = 0; r < 4; r++)
    {
      g_assert_cmpint (got->rank[r].n_actions, ==, g->rank[r].n_actions);
      for (int k = 0; k < g->rank[r].n_actions; k++)
        g_assert_true (pp_action_equal (&got->rank[r].actions[k], &g->rank[r].actions[k]));
    }
  pp_why_report_free (rep);
  pp_why_report_free (want);
  pp_schedule_free (got);
  test_plans_clear (&tp);
  g_array_free (spans, TRUE);
  pp_simulation_free (sim);
  pp_schedule_free (g);
}

/* pp_why_schedule_of_trace on d and plans fails with one line holding
 * needle (NULL: any). */
static void
assert_plan_refused (const PpTraceDescription *d, const PpWhyPlans *plans, const char *needle)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  if (pp_why_schedule_of_trace (d, plans, &s, &err) == PP_OK)
    g_error ("%s: a bad plan accepted", d->schedule);
  g_assert_null (s);
  g_assert_cmpstr (err.msg, !=, "");
  g_assert_null (strchr (err.msg, '\n'));
  if (needle != NULL && strstr (err.msg, needle) == NULL)
    g_error ("'%s' does not mention '%s'", err.msg, needle);
}

/* The schedule named 1F1B, by name: what a bad plan falls back to. */
static void
assert_falls_back (const PpTraceDescription *d, const PpWhyPlans *plans)
{
  PpSchedule *s = NULL, *want = pp_test_generate ("1F1B", 4, 8, 1);
  PpError err = { 0 };
  g_assert_cmpint (pp_why_schedule_of_trace (d, plans, &s, &err), ==, PP_OK);
  g_assert_cmpstr (s->name, ==, "1F1B");
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < want->rank[r].n_actions; k++)
      g_assert_true (pp_action_equal (&s->rank[r].actions[k], &want->rank[r].actions[k]));
  pp_schedule_free (s);
  pp_schedule_free (want);
}

/* A plan that contradicts itself, that is incomplete or hostile: the
 * schedule's name where it names one pipescope knows, else one line that
 * names what is wrong with both; never a crash or a huge allocation. */
static void
test_plan_bad (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  PpTraceDescription csv = description ("MyCsvSchedule", 4, 8, 1), named = description ("1F1B", 4, 8, 1);
  TestPlans tp;

  /* a stage on two ranks */
  test_plans_init (&tp, s);
  tp.a[1][0].stage = 0;
  assert_plan_refused (&csv, &tp.view, "also runs");
  assert_plan_refused (&csv, &tp.view, "by its name");
  assert_falls_back (&named, &tp.view);
  test_plans_clear (&tp);

  /* an order that deadlocks: rank 1 runs its backwards first */
  test_plans_init (&tp, s);
  for (size_t i = 0, j = tp.n[1] - 2; i < j; i++, j--)
    {
      PpTracePlanAction t = tp.a[1][i];
      tp.a[1][i] = tp.a[1][j];
      tp.a[1][j] = t;
    }
  assert_plan_refused (&csv, &tp.view, "the trace's plan: ");
  assert_falls_back (&named, &tp.view);
  test_plans_clear (&tp);

  /* a micro-batch's backward missing */
  test_plans_init (&tp, s);
  tp.n[3] -= 2;
  assert_plan_refused (&csv, &tp.view, "the trace's plan: ");
  assert_falls_back (&named, &tp.view);
  test_plans_clear (&tp);

  /* incomplete: rank 3 wrote no plan; a plan for a rank the description has not */
  test_plans_init (&tp, s);
  tp.view.n_ranks = 3;
  assert_plan_refused (&csv, &tp.view, "MyCsvSchedule");
  assert_falls_back (&named, &tp.view);
  PpTraceDescription three = description ("1F1B", 3, 8, 1);
  PpSchedule *got = NULL;
  PpError err = { 0 };
  tp.view.n_ranks = 4;
  g_assert_cmpint (pp_why_schedule_of_trace (&three, &tp.view, &got, &err), ==, PP_OK);
  g_assert_cmpint (got->ranks, ==, 3);   /* by name: the plan does not fit the description */
  pp_schedule_free (got);
  /* another micro-batch count than the description's */
  PpTraceDescription m16 = description ("MyCsvSchedule", 4, 16, 1);
  assert_plan_refused (&m16, &tp.view, "micro-batches");
  test_plans_clear (&tp);

  /* hostile values, one at a time */
  static const struct { int field; int32_t value; const char *needle; } hostile[] = {
    { 0, 999, "not a compute action" },
    { 0, -1, "not a compute action" },
    { 1, -5, "out of range" },
    { 1, INT32_MAX, "out of range" },
    { 2, INT32_MIN, "out of range" },
    { 2, 1 << 19, "more than supported" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (hostile); i++)
    {
      test_plans_init (&tp, s);
      PpTracePlanAction *a = &tp.a[2][3];
      if (hostile[i].field == 0)
        a->kind = hostile[i].value;
      else if (hostile[i].field == 1)
        a->stage = hostile[i].value;
      else
        a->microbatch = hostile[i].value;
      if (a->kind == PP_ACT_SEND_F)
        a->kind = PP_ACT_F;   /* a transfer is left out whatever it holds */
      assert_plan_refused (&csv, &tp.view, hostile[i].needle);
      test_plans_clear (&tp);
    }
  /* an overlapped pair whose backward half is neither a B nor an I */
  test_plans_init (&tp, s);
  tp.a[0][0] = (PpTracePlanAction) { PP_ACT_OVERLAP_F_B, 0, 0, PP_ACT_W, 0, 1, 0, 0 };
  assert_plan_refused (&csv, &tp.view, "out of range");
  test_plans_clear (&tp);

  /* more actions than the analysis takes: refused before anything is built */
  {
    size_t big = (size_t) PP_WHY_PLAN_MAX_ACTIONS + 1;
    PpTracePlanAction *many = g_new0 (PpTracePlanAction, big);   /* 0F0 each */
    const PpTracePlanAction *acts[4] = { many, many, many, many };
    size_t n[4] = { big, 1, 1, 1 };
    PpWhyPlans v = { 4, acts, n };
    assert_plan_refused (&csv, &v, "too many");
    n[0] = big / 3;
    n[1] = n[2] = n[3] = big / 3;
    assert_plan_refused (&csv, &v, "too many");
    g_free (many);
  }
  pp_schedule_free (s);
}

/* The CLI over a trace file whose description names "MyCsvSchedule" and
 * whose PLAN frames hold 1F1B's orders: info prints the idle split, the
 * critical path and what to change exactly as for the same trace named
 * 1F1B, and export --format why writes them; a trace whose plan
 * contradicts itself says why in one line. */
static char *
write_trace (PpTestCtx *ctx, const char *file, const char *name, const TestPlans *tp, GArray *spans)
{
  char *path = pp_test_ctx_path (ctx, file);
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  PpTraceDescription d = description (name, tp->ranks, 8, 1);
  if (w == NULL)
    g_error ("%s: %s", path, err.msg);
  d.start_monotonic_ns = 0;
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_plan (w, tp->ranks, (const PpTracePlanAction *const *) tp->a, tp->n, 0, &err),
                   ==, PP_OK);
  g_assert_cmpint (pp_trace_write_spans (w, (const PpSpan *) spans->data, spans->len, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  return path;
}

/* info's lines from "idle by cause" up to "dropped events" */
static char *
why_section (const char *info)
{
  const char *a = strstr (info, "idle by cause"), *b = a ? strstr (a, "dropped events") : NULL;
  if (a == NULL || b == NULL)
    g_error ("info has no why section:\n%s", info);
  return g_strndup (a, (gsize) (b - a));
}

static void
test_plan_cli (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "why-plan");
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1e-3, 2e-3, 0, 1e-4);
  PpSimulation *sim = NULL;
  PpError e = { 0 };
  c->f[2] = 2e-3;
  c->b[2] = 4e-3;
  g_assert_cmpint (pp_simulate (s, c, &sim, &e), ==, PP_OK);
  GArray *spans = spans_of_run (s, sim, 4);
  TestPlans tp;
  test_plans_init (&tp, s);
  char *t_csv = write_trace (&ctx, "csv.pptrace", "MyCsvSchedule", &tp, spans);
  char *t_named = write_trace (&ctx, "named.pptrace", "1F1B", &tp, spans);
  char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL, *json = NULL;

  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "info", t_csv, NULL), ==, 0);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out2, &err2, "info", t_named, NULL), ==, 0);
  char *w1 = why_section (out), *w2 = why_section (out2);
  g_assert_nonnull (strstr (w1, "idle by cause (a step, the mean over the 3 steps analysed"));
  g_assert_nonnull (strstr (w1, "critical path (share of the step, mean over 3 steps): stage 0 "));
  g_assert_nonnull (strstr (w1, "slowest stage: 2,"));
  g_assert_cmpstr (w1, ==, w2);
  g_free (w1);
  g_free (w2);
  g_free (out);
  g_free (err);
  g_free (out2);
  g_free (err2);

  char *j = pp_test_ctx_path (&ctx, "why.json");
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "export", t_csv, "--format", "why", "-o", j, NULL), ==, 0);
  g_assert_true (g_file_get_contents (j, &json, NULL, NULL));
  g_assert_nonnull (strstr (json, "\"steps_analysed\": 3"));
  g_assert_nonnull (strstr (json, "MyCsvSchedule"));
  g_assert_cmpint (pp_test_count (json, "\"runtime\": "), ==, 4 + 3 * 4);
  g_free (json);
  g_free (out);
  g_free (err);

  /* a plan that contradicts itself, under a name pipescope does not know */
  tp.a[1][0].stage = 0;
  char *t_bad = write_trace (&ctx, "bad.pptrace", "MyCsvSchedule", &tp, spans);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "info", t_bad, NULL), ==, 0);
  const char *na = strstr (out, "idle by cause: n/a (the trace's plan: ");
  g_assert_nonnull (na);
  g_assert_nonnull (strstr (na, "also runs"));
  g_assert_true (strchr (na, '\n') == strstr (na, ")\n") + 1);
  g_free (out);
  g_free (err);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "export", t_bad, "--format", "why", "-o", j, NULL), !=, 0);
  pp_test_assert_one_line_error (err);
  g_free (out);
  g_free (err);

  g_free (t_bad);
  g_free (j);
  g_free (t_csv);
  g_free (t_named);
  test_plans_clear (&tp);
  g_array_free (spans, TRUE);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  pp_test_ctx_clear (&ctx);
}

/* ---- data-parallel communication (issue 27) -------------------------------------- */

/* 1F1B's plans as PyTorch's pipeline_order_with_comms writes them: each
 * rank unshards its stage first, reduces its gradients after its last
 * backward, waits for that, reshards.  Into plans[r] (n[r] actions). */
static void
plans_with_comms (const PpSchedule *s, PpTracePlanAction **plans, size_t *n)
{
  for (int r = 0; r < s->ranks; r++)
    {
      int k = 0;
      plans[r] = g_new0 (PpTracePlanAction, s->rank[r].n_actions + 4);
      plans[r][k++] = (PpTracePlanAction) { PP_ACT_UNSHARD, r, -1, -1, -1, -1, 0, 0 };
      for (int j = 0; j < s->rank[r].n_actions; j++)
        {
          const PpAction *a = &s->rank[r].actions[j];
          plans[r][k++] = (PpTracePlanAction) { a->kind, a->stage, a->microbatch, -1, -1, -1, 0, 0 };
        }
      plans[r][k++] = (PpTracePlanAction) { PP_ACT_REDUCE_GRAD, r, -1, -1, -1, -1, 0, 0 };
      plans[r][k++] = (PpTracePlanAction) { PP_ACT_WAIT_REDUCE_GRAD, r, -1, -1, -1, -1, 0, 0 };
      plans[r][k++] = (PpTracePlanAction) { PP_ACT_RESHARD, r, -1, -1, -1, -1, 0, 0 };
      n[r] = (size_t) k;
    }
}

/* A plan with FSDP's actions: put back in the compute order where the
 * plans hold them, accepted by validation, and simulated in order on
 * their rank with the cost model's time of that kind on that stage (0
 * where none): REDUCE_GRAD right after the rank's last backward, busy. */
static void
test_dp_plan_lines_up (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1), *full = NULL;
  PpTracePlanAction *plans[2];
  size_t n[2];
  PpError err = { 0 };
  plans_with_comms (s, plans, n);
  PpWhyPlans wp = { 2, (const PpTracePlanAction *const *) plans, n };
  g_assert_cmpint (pp_why_schedule_with_comms (s, &wp, &full, &err), ==, PP_OK);
  g_assert_nonnull (full);
  for (int r = 0; r < 2; r++)
    g_assert_cmpint (full->rank[r].n_actions, ==, s->rank[r].n_actions + 4);
  g_assert_cmpint (pp_schedule_validate (full, &err), ==, PP_OK);

  PpCostModel *c = pp_cost_model_new_uniform (2, 1, 2, 0, 0);
  for (int st = 0; st < 2; st++)
    {
      c->dp[(PP_ACT_UNSHARD - PP_ACT_UNSHARD) * 2 + st] = 0.5;
      c->dp[(PP_ACT_REDUCE_GRAD - PP_ACT_UNSHARD) * 2 + st] = 3;
      /* WAIT_REDUCE_GRAD and RESHARD never measured: 0 */
    }
  PpSimulation *sim = NULL, *plain = NULL;
  g_assert_cmpint (pp_simulate (full, c, &sim, &err), ==, PP_OK);
  g_assert_cmpint (pp_simulate (s, c, &plain, &err), ==, PP_OK);
  for (int r = 0; r < 2; r++)
    {
      int last = full->rank[r].n_actions - 1;
      const PpSimAction *t = sim->timeline[r];
      g_assert_cmpint (full->rank[r].actions[0].kind, ==, PP_ACT_UNSHARD);
      g_assert_cmpfloat_with_epsilon (t[0].end - t[0].start, 0.5, EPS);
      /* REDUCE_GRAD follows the last backward at once and lasts 3 */
      g_assert_cmpint (full->rank[r].actions[last - 2].kind, ==, PP_ACT_REDUCE_GRAD);
      g_assert_cmpfloat_with_epsilon (t[last - 2].start, t[last - 3].end, EPS);
      g_assert_cmpfloat_with_epsilon (t[last - 2].end - t[last - 2].start, 3, EPS);
      g_assert_cmpfloat_with_epsilon (t[last].end - t[last].start, 0, EPS);
      /* busy, not idle: the compute's plus 3.5 */
      g_assert_cmpfloat_with_epsilon (sim->rank[r].busy, plain->rank[r].busy + 3.5, EPS);
    }
  pp_simulation_free (sim);
  pp_simulation_free (plain);

  /* a plan whose compute order is not the schedule's: refused in one line */
  PpTracePlanAction swap = plans[1][1];
  plans[1][1] = plans[1][2];
  plans[1][2] = swap;
  PpSchedule *bad = NULL;
  g_assert_cmpint (pp_why_schedule_with_comms (s, &wp, &bad, &err), ==, PP_EINVAL);
  g_assert_null (bad);
  g_assert_null (strchr (err.msg, '\n'));
  /* plans without data-parallel actions: nothing to add */
  size_t n_plain[2] = { 0, 0 };
  PpWhyPlans none = { 2, (const PpTracePlanAction *const *) plans, n_plain };
  g_assert_cmpint (pp_why_schedule_with_comms (s, &none, &bad, &err), ==, PP_OK);
  g_assert_null (bad);

  for (int r = 0; r < 2; r++)
    g_free (plans[r]);
  pp_cost_model_free (c);
  pp_schedule_free (full);
  pp_schedule_free (s);
}

/* Data-parallel work: a REDUCE_GRAD on rank 1 inside the step (after its
 * last backward, while rank 0 still computes) is dp_comm, work and not
 * idle (issue 36): the idle is the plan's less it, the four parts add up
 * to it and none of them is dp_comm; the report's costs hold its mean
 * duration for the plan. */
static void
test_dp_part (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  for (int step = 0; step < 3; step++)
    {
      int64_t base = (int64_t) step * 1000000000;
      for (int r = 0; r < 2; r++)
        for (int k = 0; k < s->rank[r].n_actions; k++)
          {
            const PpAction *a = &s->rank[r].actions[k];
            PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .step = step,
                          .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B, .peer_rank = -1 };
            sp.start_ns = base + (int64_t) llround (sim->timeline[r][k].start * 1e9);
            sp.end_ns = base + (int64_t) llround (sim->timeline[r][k].end * 1e9);
            g_array_append_val (spans, sp);
          }
      /* rank 1's last backward ends 2 ms before rank 0's: 1 ms of it reducing */
      int last = s->rank[1].n_actions - 1;
      PpSpan rg = { .rank = 1, .stage = 1, .microbatch = -1, .step = step,
                    .kind = PP_SPAN_REDUCE_GRAD, .peer_rank = -1 };
      rg.start_ns = base + (int64_t) llround (sim->timeline[1][last].end * 1e9);
      rg.end_ns = rg.start_ns + 1000000;
      g_array_append_val (spans, rg);
    }
  PpWhyReport *rep = NULL;
  if (pp_why_analyse_spans (s, (const PpSpan *) spans->data, spans->len, 0, &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  g_assert_cmpint (rep->n_steps, ==, 2);
  for (int i = 0; i < rep->n_steps; i++)
    for (int r = 0; r < 2; r++)
      {
        const PpWhyIdle *w = &rep->steps[i].idle[r];
        assert_adds_up (w);
        g_assert_cmpfloat_with_epsilon (w->dp_comm, r == 1 ? 1e-3 : 0, 1e-8);
        g_assert_cmpfloat (w->runtime, >=, 0);
        /* the rank's idle is the plan's less the reduction (work) */
        g_assert_cmpfloat_with_epsilon (w->measured, sim->rank[r].idle - (r == 1 ? 1e-3 : 0), 1e-8);
      }
  g_assert_cmpfloat_with_epsilon (rep->idle[1].dp_comm, 1e-3, 1e-8);
  /* dp_comm is no idle part: none is named so, none holds it */
  g_assert_cmpint (PP_WHY_N_PARTS, ==, 4);
  for (int k = 0; k < PP_WHY_N_PARTS; k++)
    g_assert_cmpstr (pp_why_part_name (k), !=, "dp_comm");
  g_assert_cmpfloat_with_epsilon (rep->idle[1].schedule + rep->idle[1].imbalance + rep->idle[1].transfers
                                  + rep->idle[1].runtime, sim->rank[1].idle - 1e-3, 1e-8);
  g_assert_cmpfloat_with_epsilon (pp_cost_model_dp (rep->costs, PP_ACT_REDUCE_GRAD, 1), 1e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (pp_cost_model_dp (rep->costs, PP_ACT_REDUCE_GRAD, 0), 0, 1e-12);
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* A run without data-parallel spans has a dp_comm of exactly 0, never
 * the noise of a difference of two equal sums of seconds (the export
 * wrote "dp_comm": 6.3e-19): blocks at odd nanoseconds, 1F1B P 4, M 8. */
static void
test_dp_exact_zero (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  PpCostModel *c = pp_cost_model_new_uniform (4, 1.1e-3, 2.3e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  guint32 jitter = 12345;
  for (int step = 0; step < 12; step++)
    {
      int64_t base = 1000000007 + (int64_t) step * 100000000;
      for (int r = 0; r < 4; r++)
        for (int k = 0; k < s->rank[r].n_actions; k++)
          {
            const PpAction *a = &s->rank[r].actions[k];
            PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .step = step,
                          .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B, .peer_rank = -1 };
            /* a start up to 65 us late, an end up to 65 us early: odd sums */
            jitter = jitter * 1103515245u + 12345u;
            sp.start_ns = base + (int64_t) llround (sim->timeline[r][k].start * 1e9) + (jitter >> 16);
            jitter = jitter * 1103515245u + 12345u;
            sp.end_ns = base + (int64_t) llround (sim->timeline[r][k].end * 1e9) - (jitter >> 16);
            g_array_append_val (spans, sp);
          }
    }
  PpWhyReport *rep = NULL;
  if (pp_why_analyse_spans (s, (const PpSpan *) spans->data, spans->len, 0, &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  g_assert_cmpint (rep->n_steps, ==, 11);
  for (int i = 0; i < rep->n_steps; i++)
    for (int r = 0; r < 4; r++)
      {
        assert_adds_up (&rep->steps[i].idle[r]);
        g_assert_cmpfloat (rep->steps[i].idle[r].dp_comm, ==, 0);
      }
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream (&buf, &n);
  pp_why_write_json (f, s, rep, NULL);
  fclose (f);
  /* the mean and each step, per rank: all an exact 0 */
  g_assert_cmpint (pp_test_count (buf, "\"dp_comm\": 0,"), ==, 4 * (1 + 11));
  g_assert_cmpint (pp_test_count (buf, "\"dp_comm\": "), ==, 4 * (1 + 11));
  free (buf);
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* 16 stages of equal cost (1 ms F, 2 ms B, as pp-synth-mesh's job): no
 * stage is above the mean, and the line says "0% above", never "-0%". */
static void
test_excess_equal_stages (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 16, 32, 1);
  PpCostModel *c = pp_cost_model_new_uniform (16, 1e-3, 2e-3, 0, 0);
  PpWhyChange ch;
  PpError err = { 0 };
  g_assert_cmpint (pp_why_suggest_partition (s, c, NULL, NULL, 0, &ch, &err), ==, PP_OK);
  g_assert_cmpfloat (ch.excess, >=, 0);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream (&buf, &n);
  pp_why_print_change (f, &ch, 1e3, "ms");
  fclose (f);
  g_assert_nonnull (strstr (buf, ", 0% above the mean stage"));
  free (buf);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/why/split/uniform-is-schedule", test_uniform_is_schedule);
  g_test_add_func ("/why/split/slow-stage-is-imbalance", test_slow_stage_is_imbalance);
  g_test_add_func ("/why/split/transfer-is-transfers", test_transfer_is_transfers);
  g_test_add_func ("/why/split/levels", test_split_levels);
  g_test_add_func ("/why/split/dualpipev-no-negative-imbalance", test_dualpipev_no_negative_imbalance);
  g_test_add_func ("/why/split/never-negative", test_split_never_negative);
  g_test_add_func ("/why/path/gpipe-uniform", test_critical_path_gpipe_uniform);
  g_test_add_func ("/why/path/gpipe-slow-stage", test_critical_path_gpipe_slow_stage);
  g_test_add_func ("/why/path/transfers", test_critical_path_transfers);
  g_test_add_func ("/why/analyse-spans", test_analyse_spans);
  g_test_add_func ("/why/dp-exact-zero", test_dp_exact_zero);
  g_test_add_func ("/why/suggest-partition", test_suggest_partition);
  g_test_add_func ("/why/model-of-description", test_model_of_description);
  g_test_add_func ("/why/cli", test_cli);
  g_test_add_func ("/why/plan/unnamed", test_plan_unnamed);
  g_test_add_func ("/why/plan/order-differs", test_plan_order_differs);
  g_test_add_func ("/why/plan/bad", test_plan_bad);
  g_test_add_func ("/why/plan/cli", test_plan_cli);
  g_test_add_func ("/why/dp/plan-lines-up", test_dp_plan_lines_up);
  g_test_add_func ("/why/dp/part", test_dp_part);
  g_test_add_func ("/why/partition/excess-equal", test_excess_equal_stages);
  return g_test_run ();
}
