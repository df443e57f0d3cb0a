/* test-zb.c — the handcrafted Zero Bubble schedules ZB-H1 and ZB-H2 (Qi et al.,
 * "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, section 2
 * and its table of bubble sizes):
 *
 *   1F1B    bubble (P-1)(T_F + T_B + T_W)    peak memory P micro-batches
 *   ZB-H1   bubble (P-1)(T_F + T_B - T_W)    peak memory P
 *   ZB-H2   bubble (P-1)(T_F + T_B - 2 T_W)  peak memory 2P-1
 *
 * The paper's T_B is the input-gradient half of the backward, our I; in our
 * cost model I = B - W, so "F=1, B=2, W=1" is the paper's T_F = T_B = T_W = 1.
 *
 * Which per-rank measure each line is about:
 *
 *  - 1F1B and ZB-H1: the idle time of *every* rank over the whole makespan
 *    (PpSimRank.idle).  Every rank of both runs the same work, and in both
 *    each rank's idle is the same number: r T_F before rank r starts plus the
 *    waits inside it add up to the closed form on every rank.  So we pin every
 *    rank, not only rank 0.
 *
 *  - ZB-H2: the idle time *inside each rank's own span*, from the start of its
 *    first action to the end of its last.  ZB-H2's timeline is a parallelogram:
 *    rank r starts at r T_F and the first rank ends (P-1) T_F before the last.
 *    That skew is idle in one simulated iteration, and no order can remove it
 *    (the last rank cannot start before the first forward reaches it); the paper
 *    removes it by letting the next iteration start on each rank as soon as that
 *    rank is done, which its optimizer post-validation (section 4) allows.  So
 *    the paper's "zero bubble" is zero idle within every rank's span, and the
 *    closed form is the span idle of rank 0 (the widest span).  Over a single
 *    iteration's makespan ZB-H2 under uniform costs has exactly ZB-H1's bubble,
 *    (P-1)/(3M+P-1): test_h2_single_iteration pins that too, because it is
 *    what pp_simulate's `bubble` reports for ZB-H2.
 *
 * Where the closed forms hold: both are exact for T_W <= min(T_F, T_I) (the
 * paper's pictures have all three equal) once M >= P (ZB-H1) or M >= 2P-1
 * (ZB-H2).  ZB-H2's span idle is 0 under uniform costs exactly when
 * M >= 2P-1: rank 0 waits 2P-1 forwards' time for its first I and has only M
 * forwards to fill it, so it idles max(0, 2P-1-M), which we pin for every M.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-test-util.h"

#define EPS 1e-9

typedef PpStatus (*Gen) (int, int, int, PpSchedule **, PpError *);

static PpSchedule *
make (Gen gen, int P, int M)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = gen (P, M, 1, &s, &err);

  if (st != PP_OK)
    g_error ("P=%d M=%d: %s: %s", P, M, pp_status_name (st), err.msg);
  g_assert_nonnull (s);
  return s;
}

/* Idle time of rank r between the start of its first action and the end of
 * its last (actions run one at a time in list order, so the last ends last). */
static double
span_idle (const PpSimulation *sim, int r)
{
  const PpSchedule *s = sim->schedule;
  int n = s->rank[r].n_actions;

  g_assert_cmpint (n, >, 0);
  return sim->timeline[r][n - 1].end - sim->timeline[r][0].start - sim->rank[r].busy;
}

/* ---- arguments ---------------------------------------------------------- */

static void
test_arguments (void)
{
  Gen gens[] = { pp_schedule_new_zb_h1, pp_schedule_new_zb_h2 };
  const char *names[] = { "ZB-H1", "ZB-H2" };

  for (int g = 0; g < 2; g++)
    {
      PpSchedule *s = (PpSchedule *) 0x1;
      PpError err = { 0 };
      g_autofree char *want = g_strdup_printf ("%s takes one stage per rank", names[g]);

      /* V > 1 is refused with the reason; V <= 1 means one stage per rank. */
      g_assert_cmpint (gens[g] (4, 8, 2, &s, &err), ==, PP_EINVAL);
      g_assert_null (s);
      g_assert_nonnull (strstr (err.msg, want));
      g_assert_null (strchr (err.msg, '\n'));

      for (int V = -1; V <= 1; V++)
        {
          g_assert_cmpint (gens[g] (4, 8, V, &s, &err), ==, PP_OK);
          g_assert_cmpstr (s->name, ==, names[g]);
          g_assert_cmpint (s->stages_per_rank, ==, 1);
          g_assert_cmpint (s->n_stages, ==, 4);
          pp_schedule_free (s);
        }

      memset (&err, 0, sizeof err);
      g_assert_cmpint (gens[g] (4, 0, 1, &s, &err), ==, PP_EINVAL);
      g_assert_null (s);
      g_assert_cmpstr (err.msg, !=, "");
      memset (&err, 0, sizeof err);
      g_assert_cmpint (gens[g] (0, 4, 1, &s, &err), ==, PP_EINVAL);
      g_assert_null (s);
      g_assert_cmpstr (err.msg, !=, "");

      /* Reachable by canonical name and alias through the registry. */
      g_assert_cmpint (pp_schedule_generate (g == 0 ? "zbh1" : "ZB-H2", 3, 5, 0, &s, &err), ==, PP_OK);
      g_assert_cmpstr (s->name, ==, names[g]);
      pp_schedule_free (s);
    }
}

/* ---- the orders themselves ----------------------------------------------- */

static void
assert_order (const PpSchedule *s, int r, const char *want)
{
  GString *got = g_string_new (NULL);
  char buf[PP_ACTION_STR_MAX];

  for (int k = 0; k < s->rank[r].n_actions; k++)
    g_string_append_printf (got, "%s%s", k ? " " : "",
                            pp_action_to_string (&s->rank[r].actions[k], buf, sizeof buf));
  g_assert_cmpstr (got->str, ==, want);
  g_string_free (got, TRUE);
}

static void
test_orders (void)
{
  PpSchedule *s = make (pp_schedule_new_zb_h1, 3, 6);

  /* ZB-H1: 1F1B's warm-up; rank r holds its first r W's back. */
  assert_order (s, 0, "0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0F4 0I2 0W2 0F5 0I3 0W3 0I4 0W4 0I5 0W5");
  assert_order (s, 1, "1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1F4 1I3 1W2 1F5 1I4 1W3 1I5 1W4 1W5");
  assert_order (s, 2, "2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2F4 2I4 2W2 2F5 2I5 2W3 2W4 2W5");
  pp_schedule_free (s);

  /* ZB-H2: 2(P-1-r)+1 warm-up forwards; rank r holds 2r W's back. */
  s = make (pp_schedule_new_zb_h2, 3, 6);
  assert_order (s, 0, "0F0 0F1 0F2 0F3 0F4 0I0 0W0 0F5 0I1 0W1 0I2 0W2 0I3 0W3 0I4 0W4 0I5 0W5");
  assert_order (s, 1, "1F0 1F1 1F2 1I0 1F3 1I1 1F4 1I2 1W0 1F5 1I3 1W1 1I4 1W2 1I5 1W3 1W4 1W5");
  assert_order (s, 2, "2F0 2I0 2F1 2I1 2F2 2I2 2F3 2I3 2F4 2I4 2W0 2F5 2I5 2W1 2W2 2W3 2W4 2W5");
  pp_schedule_free (s);
}

/* ---- every (P, M) builds, validates and simulates --------------------------- */

static void
test_grid (void)
{
  Gen gens[] = { pp_schedule_new_zb_h1, pp_schedule_new_zb_h2 };

  for (int g = 0; g < 2; g++)
    for (int P = 2; P <= 8; P++)
      for (int M = 1; M <= 4 * P; M++)
        {
          PpSchedule *s = make (gens[g], P, M);
          PpError err = { 0 };
          PpStatus st = pp_schedule_validate (s, &err);
          int cap = g == 0 ? P : 2 * P - 1;

          if (st != PP_OK)
            g_error ("%s P=%d M=%d does not validate: %s: %s", s->name, P, M,
                     pp_status_name (st), err.msg);
          g_assert_cmpint (s->ranks, ==, P);
          g_assert_cmpint (s->microbatches, ==, M);
          g_assert_cmpint (pp_schedule_total_actions (s), ==, 3L * P * M);

          /* Only F, I and W, each on the rank's own stage; never a fused B. */
          for (int r = 0; r < P; r++)
            for (int k = 0; k < s->rank[r].n_actions; k++)
              {
                const PpAction *a = &s->rank[r].actions[k];
                g_assert_true (a->kind == PP_ACT_F || a->kind == PP_ACT_I || a->kind == PP_ACT_W);
                g_assert_cmpint (a->stage, ==, r);
              }

          /* Deadlock-free under uniform costs, uneven costs and transfers. */
          PpSimulation *sim = pp_test_simulate (s, 1, 2, 1, 0);
          PpSimulation *sim2 = pp_test_simulate (s, 1.3, 3.1, 0.7, 0.25);

          /* Memory: ZB-H1 never above 1F1B's P, ZB-H2 never above 2P-1, on
           * any rank; both reach their cap when there are enough batches. */
          for (int r = 0; r < P; r++)
            {
              g_assert_cmpint (sim->rank[r].peak_inflight, <=, cap);
              g_assert_cmpint (sim->rank[r].peak_inflight, ==, MIN (M, cap));
            }
          pp_simulation_free (sim2);
          pp_simulation_free (sim);
          pp_schedule_free (s);
        }
}

/* ---- ZB-H1 ---------------------------------------------------------------- */

static void
test_h1_uniform (void)
{
  for (int P = 2; P <= 8; P++)
    for (int M = P; M <= 4 * P; M++)
      {
        PpSchedule *zb = make (pp_schedule_new_zb_h1, P, M);
        PpSchedule *ob = make (pp_schedule_new_1f1b, P, M);
        PpSimulation *szb = pp_test_simulate (zb, 1, 2, 1, 0);
        PpSimulation *sob = pp_test_simulate (ob, 1, 2, 1, 0);

        /* (P-1)(T_F + T_I - T_W) = P-1 on every rank; 1F1B's 3(P-1). */
        for (int r = 0; r < P; r++)
          {
            g_assert_cmpfloat_with_epsilon (szb->rank[r].idle, P - 1, EPS);
            g_assert_cmpfloat_with_epsilon (sob->rank[r].idle, 3 * (P - 1), EPS);
          }
        g_assert_cmpfloat_with_epsilon (szb->makespan, 3 * M + P - 1, EPS);
        g_assert_cmpint (szb->rank[0].peak_inflight, ==, P);
        g_assert_cmpint (sob->rank[0].peak_inflight, ==, P);

        /* The bubble *size* (idle per rank) is exactly a third of 1F1B's.  The
         * bubble *fraction* is idle / makespan, and ZB-H1's makespan is the
         * shorter one, so the fractions' ratio is
         *   [(P-1)/(3M+P-1)] / [(P-1)/(M+P-1)] = (M+P-1)/(3M+P-1),
         * which is 1/3 + (2/3)(P-1)/(3M+P-1): within (1/3, 1/2) for M >= P and
         * tending to 1/3 as M grows.  We pin it exactly and bound it. */
        double ratio = szb->bubble / sob->bubble;
        g_assert_cmpfloat_with_epsilon (szb->bubble, (double) (P - 1) / (3 * M + P - 1), EPS);
        g_assert_cmpfloat_with_epsilon (sob->bubble, pp_bubble_closed_form_gpipe (P, M), EPS);
        g_assert_cmpfloat_with_epsilon (ratio, (double) (M + P - 1) / (3 * M + P - 1), EPS);
        g_assert_cmpfloat (ratio, >, 1.0 / 3);
        g_assert_cmpfloat (ratio, <, 0.5);
        if (M >= 4 * P)
          g_assert_cmpfloat (ratio, <, 0.4);

        pp_simulation_free (szb);
        pp_simulation_free (sob);
        pp_schedule_free (zb);
        pp_schedule_free (ob);
      }
}

/* Costs (F, B, W) with T_W <= min(T_F, T_I), where the closed forms are exact,
 * and some outside that regime. */
static const double in_regime[][3] = {
  { 1, 3, 1 },      /* T_I = 2 > T_W */
  { 2, 3, 1 },      /* T_F = 2 */
  { 1, 2, 0.5 },    /* T_I = 1.5, T_W = 0.5 */
  { 1.5, 2.5, 1 },
  { 1, 4, 1 },
  { 3, 4, 1 },
  { 1, 1.75, 0.75 },
};
static const double off_regime[][3] = {
  { 1, 3, 2 },      /* T_W = 2 > T_I = 1 */
  { 0.5, 2, 1 },    /* T_W > T_F */
  { 1, 1.5, 1 },    /* T_W = 1 > T_I = 0.5 */
};

static void
test_h1_costs (void)
{
  for (int P = 2; P <= 8; P += 3)
    for (int M = P; M <= 4 * P; M += P + 1)
      {
        PpSchedule *s = make (pp_schedule_new_zb_h1, P, M);

        for (gsize c = 0; c < G_N_ELEMENTS (in_regime); c++)
          {
            double f = in_regime[c][0], b = in_regime[c][1], w = in_regime[c][2];
            PpSimulation *sim = pp_test_simulate (s, f, b, w, 0);
            double closed = (P - 1) * (f + (b - w) - w);

            for (int r = 0; r < P; r++)
              g_assert_cmpfloat_with_epsilon (sim->rank[r].idle, closed, EPS);
            g_assert_cmpfloat_with_epsilon (sim->makespan, M * (f + b) + closed, EPS);
            pp_simulation_free (sim);
          }
        /* Outside the regime the formula is not what happens: the order wastes
         * more than it promises (it is a lower bound here, never exceeded). */
        for (gsize c = 0; c < G_N_ELEMENTS (off_regime); c++)
          {
            double f = off_regime[c][0], b = off_regime[c][1], w = off_regime[c][2];
            PpSimulation *sim = pp_test_simulate (s, f, b, w, 0);
            double closed = (P - 1) * (f + (b - w) - w);

            g_assert_cmpfloat (sim->rank[0].idle, >, closed + EPS);
            pp_simulation_free (sim);
          }
        pp_schedule_free (s);
      }
}

/* ---- ZB-H2 ---------------------------------------------------------------- */

static void
test_h2_uniform (void)
{
  for (int P = 2; P <= 8; P++)
    for (int M = 1; M <= 4 * P; M++)
      {
        PpSchedule *s = make (pp_schedule_new_zb_h2, P, M);
        PpSimulation *sim = pp_test_simulate (s, 1, 2, 1, 0);
        int short_by = MAX (0, 2 * P - 1 - M);

        /* Rank 0 idles exactly as long as its warm-up lacks forwards; it has
         * the widest span, so no rank idles more inside its own. */
        g_assert_cmpfloat_with_epsilon (span_idle (sim, 0), short_by, EPS);
        for (int r = 1; r < P; r++)
          g_assert_cmpfloat (span_idle (sim, r), <=, span_idle (sim, 0) + EPS);

        if (M >= 2 * P - 1)
          {
            /* Zero bubble: a parallelogram, every rank busy from r T_F to
             * makespan - (P-1-r) T_F, without a gap. */
            double span_sum = 0, idle_sum = 0;
            for (int r = 0; r < P; r++)
              {
                int n = s->rank[r].n_actions;
                g_assert_cmpfloat_with_epsilon (span_idle (sim, r), 0, EPS);
                g_assert_cmpfloat_with_epsilon (sim->timeline[r][0].start, r, EPS);
                g_assert_cmpfloat_with_epsilon (sim->timeline[r][n - 1].end,
                                                sim->makespan - (P - 1 - r), EPS);
                span_sum += sim->timeline[r][n - 1].end - sim->timeline[r][0].start;
                idle_sum += span_idle (sim, r);
              }
            g_assert_cmpfloat (idle_sum / span_sum, <, EPS);
            /* 2x 1F1B's memory on rank 0, and more than 1F1B's P. */
            g_assert_cmpint (sim->rank[0].peak_inflight, ==, 2 * P - 1);
          }
        else
          g_assert_cmpfloat (span_idle (sim, 0), >, 0.5);  /* the condition is tight */

        if (M > P)
          g_assert_cmpint (sim->rank[0].peak_inflight, >, P);
        pp_simulation_free (sim);
        pp_schedule_free (s);
      }
}

static void
test_h2_single_iteration (void)
{
  /* One iteration on its own: the skew stays idle, so under uniform costs
   * ZB-H2's makespan and bubble are ZB-H1's, both (P-1)/(3M+P-1). */
  for (int P = 2; P <= 8; P++)
    for (int M = P; M <= 4 * P; M += 3)
      {
        PpSchedule *h1 = make (pp_schedule_new_zb_h1, P, M);
        PpSchedule *h2 = make (pp_schedule_new_zb_h2, P, M);
        PpSimulation *s1 = pp_test_simulate (h1, 1, 2, 1, 0);
        PpSimulation *s2 = pp_test_simulate (h2, 1, 2, 1, 0);

        g_assert_cmpfloat_with_epsilon (s2->makespan, s1->makespan, EPS);
        g_assert_cmpfloat_with_epsilon (s2->bubble, (double) (P - 1) / (3 * M + P - 1), EPS);
        for (int r = 0; r < P; r++)
          g_assert_cmpfloat_with_epsilon (s2->rank[r].idle, P - 1, EPS);
        pp_simulation_free (s1);
        pp_simulation_free (s2);
        pp_schedule_free (h1);
        pp_schedule_free (h2);
      }
}

static void
test_h2_costs (void)
{
  for (int P = 2; P <= 8; P += 3)
    for (int M = 2 * P - 1; M <= 4 * P; M += P)
      {
        PpSchedule *h1 = make (pp_schedule_new_zb_h1, P, M);
        PpSchedule *h2 = make (pp_schedule_new_zb_h2, P, M);

        for (gsize c = 0; c < G_N_ELEMENTS (in_regime); c++)
          {
            double f = in_regime[c][0], b = in_regime[c][1], w = in_regime[c][2];
            PpSimulation *s1 = pp_test_simulate (h1, f, b, w, 0);
            PpSimulation *s2 = pp_test_simulate (h2, f, b, w, 0);
            double closed = (P - 1) * (f + (b - w) - 2 * w);

            /* (P-1)(T_F + T_I - 2 T_W) inside rank 0's span, the widest. */
            g_assert_cmpfloat_with_epsilon (span_idle (s2, 0), closed, EPS);
            for (int r = 1; r < P; r++)
              g_assert_cmpfloat (span_idle (s2, r), <=, closed + EPS);
            /* One iteration adds the skew: the makespan is
             * M (F + B) + (P-1) max(T_F, T_F + T_I - 2 T_W), never above ZB-H1's. */
            g_assert_cmpfloat_with_epsilon (s2->makespan, M * (f + b) + (P - 1) * MAX (f, f + (b - w) - 2 * w), EPS);
            g_assert_cmpfloat (s2->makespan, <=, s1->makespan + EPS);
            pp_simulation_free (s1);
            pp_simulation_free (s2);
          }
        pp_schedule_free (h1);
        pp_schedule_free (h2);
      }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/zb/arguments", test_arguments);
  g_test_add_func ("/zb/orders", test_orders);
  g_test_add_func ("/zb/grid", test_grid);
  g_test_add_func ("/zb/h1/uniform", test_h1_uniform);
  g_test_add_func ("/zb/h1/costs", test_h1_costs);
  g_test_add_func ("/zb/h2/uniform", test_h2_uniform);
  g_test_add_func ("/zb/h2/single-iteration", test_h2_single_iteration);
  g_test_add_func ("/zb/h2/costs", test_h2_costs);
  return g_test_run ();
}
