/* test-dualpipe.c — DeepSeek's DualPipe (and DualPipeV) generators against
 * deepseek-ai/DualPipe: its step() order, its asserts, and its README's
 * bubble and activation table.
 *
 * The README table ("based on the same number of PP stages"):
 *
 *   DualPipe   bubble (PP/2-1)(F&B + B - 3W)   activation PP+1   PP devices
 *   DualPipeV  bubble (PP/2-1)(F&B + B - 3W)   activation PP+1   PP/2 devices
 *
 * PP is the number of stages along one pass of the model: for DualPipe on P
 * ranks PP = P (each direction runs a P-stage copy); for DualPipeV on P ranks
 * PP = 2P (2P stages folded into a V).  F&B is an overlapped forward and
 * backward; our simulator charges an OVERLAP_F_B as F + B, so the bubble
 * reads (PP/2-1)(F + 2B - 3W).
 *
 * Which per-rank measure: every rank of both schedules runs the same work
 * (one forward and one backward of each (stage, micro-batch) it holds,
 * counting an overlap as one of each), so busy is the same on every rank —
 * M (F + B) for DualPipe, 2M (F + B) for DualPipeV — and idle = makespan -
 * busy is one number for all ranks: max, mean and rank 0 coincide.  The
 * README's "bubble" is that per-device idle time (as for its 1F1B row,
 * (PP-1)(F+B), exactly the idle time of every 1F1B rank).  We pin every
 * rank's idle, and the makespan busy + bubble.
 *
 * The closed form is exact when I = F (B = F + W) and W <= F — the regime of
 * the README's picture, where F, the input-gradient half of B, and W are one
 * cell each.  Outside it, the same orders give other numbers (see
 * test_bubble_off_regime): the formula is a statement about that picture, not
 * about every cost.
 */
#include <glib.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-test-util.h"

static PpSchedule *
make_dualpipe (int P, int M)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_new_dualpipe (P, M, 0, &s, &err);

  if (st != PP_OK)
    g_error ("DualPipe P=%d M=%d: %s: %s", P, M, pp_status_name (st), err.msg);
  g_assert_nonnull (s);
  return s;
}

/* ---- stage layout ------------------------------------------------------ */

static void
test_layout (void)
{
  for (int P = 2; P <= 8; P += 2)
    {
      int M = 2 * P + 2, N = M / 2;
      PpSchedule *s = make_dualpipe (P, M);

      g_assert_cmpstr (s->name, ==, "DualPipe");
      g_assert_cmpint (s->ranks, ==, P);
      g_assert_cmpint (s->microbatches, ==, M);
      g_assert_cmpint (s->stages_per_rank, ==, 2);
      g_assert_cmpint (s->n_stages, ==, 2 * P);
      for (int j = 0; j < P; j++)
        {
          /* down copy: part j on rank j */
          g_assert_cmpint (s->stage_rank[j], ==, j);
          g_assert_cmpint (s->stage_prev[j], ==, j == 0 ? -1 : j - 1);
          g_assert_cmpint (s->stage_next[j], ==, j == P - 1 ? -1 : j + 1);
          g_assert_cmpint (s->stage_mb_lo[j], ==, 0);
          g_assert_cmpint (s->stage_mb_hi[j], ==, N);
          /* up copy: part j on rank P-1-j */
          g_assert_cmpint (s->stage_rank[P + j], ==, P - 1 - j);
          g_assert_cmpint (s->stage_prev[P + j], ==, j == 0 ? -1 : P + j - 1);
          g_assert_cmpint (s->stage_next[P + j], ==, j == P - 1 ? -1 : P + j + 1);
          g_assert_cmpint (s->stage_mb_lo[P + j], ==, N);
          g_assert_cmpint (s->stage_mb_hi[P + j], ==, M);
        }
      pp_schedule_free (s);
    }
}

/* ---- the exact order, worked by hand from DualPipe.step() ---------------
 * P=4, M=8 (N=4 chunks per direction).  Rank 0 (half_rank 0, not middle):
 *   step 1: F F of phase 0;  step 2: F0 F1;  step 3: I1 W F1;
 *   step 4 (1 round): F0&B1, F1&B0;  step 5: B1, F1&B0;
 *   step 6 (1 round): B1 then I0 (split from i = 0 on, half_rank even);
 *   step 7: W, I0;  step 8: W.
 * Rank 1 (half_rank 1, a middle rank): step 2 twice; step 4 (2 rounds) with
 * the first F0, B1 not overlapped; step 6 (2 rounds), split from i = 1.
 * Ranks 2 and 3 mirror 1 and 0 with the directions swapped. */
static const char *const order_p4_m8[4] = {
  "0F0 0F1 0F2 7F4 7I4 7W4 7F5 (0F3;7B5)OVERLAP_F_B (7F6;0B0)OVERLAP_F_B 7B6 "
  "(7F7;0B1)OVERLAP_F_B 7B7 0I2 0W2 0I3 0W3",
  "1F0 6F4 1F1 6F5 1F2 6B4 (6F6;1B0)OVERLAP_F_B (1F3;6B5)OVERLAP_F_B "
  "(6F7;1B1)OVERLAP_F_B 6B6 1B2 6I7 1I3 6W7 1W3",
  "5F4 2F0 5F5 2F1 5F6 2B0 (2F2;5B4)OVERLAP_F_B (5F7;2B1)OVERLAP_F_B "
  "(2F3;5B5)OVERLAP_F_B 2B2 5B6 2I3 5I7 2W3 5W7",
  "4F4 4F5 4F6 3F0 3I0 3W0 3F1 (4F7;3B1)OVERLAP_F_B (3F2;4B4)OVERLAP_F_B 3B2 "
  "(3F3;4B5)OVERLAP_F_B 3B3 4I6 4W6 4I7 4W7",
};

static void
test_order (void)
{
  PpSchedule *s = make_dualpipe (4, 8);

  for (int r = 0; r < 4; r++)
    {
      GString *got = g_string_new (NULL);
      char buf[PP_ACTION_STR_MAX];

      for (int i = 0; i < s->rank[r].n_actions; i++)
        {
          if (i)
            g_string_append_c (got, ' ');
          g_string_append (got, pp_action_to_string (&s->rank[r].actions[i], buf, sizeof buf));
        }
      g_assert_cmpstr (got->str, ==, order_p4_m8[r]);
      g_string_free (got, TRUE);
    }
  pp_schedule_free (s);
}

/* ---- valid, complete, simulable --------------------------------------- */

enum { CNT_F, CNT_B, CNT_I, CNT_W, N_CNT };

static void
count (const PpSchedule *s, int *cnt, int rank, int kind, int stage, int mb)
{
  g_assert_cmpint (stage, >=, 0);
  g_assert_cmpint (stage, <, s->n_stages);
  g_assert_cmpint (s->stage_rank[stage], ==, rank);
  g_assert_cmpint (mb, >=, s->stage_mb_lo[stage]);
  g_assert_cmpint (mb, <, s->stage_mb_hi[stage]);
  switch (kind)
    {
    case PP_ACT_F: cnt[(stage * s->microbatches + mb) * N_CNT + CNT_F]++; break;
    case PP_ACT_B: cnt[(stage * s->microbatches + mb) * N_CNT + CNT_B]++; break;
    case PP_ACT_I: cnt[(stage * s->microbatches + mb) * N_CNT + CNT_I]++; break;
    case PP_ACT_W: cnt[(stage * s->microbatches + mb) * N_CNT + CNT_W]++; break;
    default: g_assert_not_reached ();
    }
}

static void
check_complete (const PpSchedule *s)
{
  int *cnt = g_new0 (int, (gsize) s->n_stages * s->microbatches * N_CNT);

  for (int r = 0; r < s->ranks; r++)
    {
      int forwards = 0;
      for (int i = 0; i < s->rank[r].n_actions; i++)
        {
          const PpAction *a = &s->rank[r].actions[i];

          /* compute only: no SEND/RECV, no OPT */
          g_assert_true (pp_action_is_compute (a));
          if (a->kind == PP_ACT_OVERLAP_F_B)
            {
              g_assert_true (a->sub_kind == PP_ACT_B || a->sub_kind == PP_ACT_I);
              count (s, cnt, r, PP_ACT_F, a->stage, a->microbatch);
              count (s, cnt, r, a->sub_kind, a->sub_stage, a->sub_microbatch);
              forwards++;
            }
          else
            {
              count (s, cnt, r, a->kind, a->stage, a->microbatch);
              forwards += a->kind == PP_ACT_F;
            }
        }
      /* every rank runs M/2 forwards of each of its two stages */
      g_assert_cmpint (forwards, ==, s->microbatches);
    }

  for (int st = 0; st < s->n_stages; st++)
    for (int mb = 0; mb < s->microbatches; mb++)
      {
        const int *c = &cnt[(st * s->microbatches + mb) * N_CNT];
        gboolean seen = mb >= s->stage_mb_lo[st] && mb < s->stage_mb_hi[st];

        if (!seen)
          {
            g_assert_cmpint (c[CNT_F] + c[CNT_B] + c[CNT_I] + c[CNT_W], ==, 0);
            continue;
          }
        g_assert_cmpint (c[CNT_F], ==, 1);
        if (c[CNT_B] == 1)
          {
            g_assert_cmpint (c[CNT_I], ==, 0);
            g_assert_cmpint (c[CNT_W], ==, 0);
          }
        else
          {
            g_assert_cmpint (c[CNT_B], ==, 0);
            g_assert_cmpint (c[CNT_I], ==, 1);
            g_assert_cmpint (c[CNT_W], ==, 1);
          }
      }
  g_free (cnt);
}

static void
test_valid (void)
{
  for (int P = 2; P <= 8; P += 2)
    {
      int Ms[] = { 2 * P, 2 * P + 2, 4 * P };

      for (guint k = 0; k < G_N_ELEMENTS (Ms); k++)
        {
          int M = Ms[k];
          PpSchedule *s = make_dualpipe (P, M);
          PpError err = { 0 };
          PpStatus st = pp_schedule_validate (s, &err);
          PpSimulation *sim;

          if (st != PP_OK)
            g_error ("DualPipe P=%d M=%d does not validate: %s", P, M, err.msg);
          check_complete (s);
          sim = pp_test_simulate (s, 1.0, 2.0, 1.0, 0);
          g_assert_cmpfloat (sim->makespan, >, 0.0);
          pp_simulation_free (sim);
          pp_schedule_free (s);
        }
    }
}

/* The registry path: the name and the default V. */
static void
test_generate (void)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };

  g_assert_cmpint (pp_schedule_generate ("dualpipe", 4, 8, 0, &s, &err), ==, PP_OK);
  g_assert_nonnull (s);
  g_assert_cmpint (s->n_stages, ==, 8);
  pp_schedule_free (s);

  s = NULL;
  g_assert_cmpint (pp_schedule_generate ("DualPipe", 6, 12, 2, &s, &err), ==, PP_OK);
  g_assert_nonnull (s);
  pp_schedule_free (s);
}

/* ---- rejected shapes --------------------------------------------------- */

static void
test_reject (void)
{
  static const struct { int P, M, V; const char *needle; } bad[] = {
    { 3, 12, 0, "even number of ranks" },   /* dualpipe.py: num_ranks % 2 == 0 */
    { 5, 20, 2, "even number of ranks" },
    { 0, 8, 0, "ranks" },
    { 4, 9, 0, "even number of micro-batches" }, /* num_chunks % 2 == 0 */
    { 4, 0, 0, "micro-batches" },                /* num_chunks > 0 */
    { 4, 6, 0, "at least" },                     /* num_chunks >= 2 * num_ranks */
    { 8, 14, 0, "at least" },
    { 2, 2, 0, "at least" },
    { 4, 8, 1, "two stages per rank" },          /* always two copies per rank */
    { 4, 8, 3, "two stages per rank" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      PpSchedule *s = (PpSchedule *) 0x1;
      PpError err = { 0 };
      PpStatus st = pp_schedule_new_dualpipe (bad[i].P, bad[i].M, bad[i].V, &s, &err);

      g_test_message ("P=%d M=%d V=%d: %s", bad[i].P, bad[i].M, bad[i].V, err.msg);
      g_assert_cmpint (st, ==, PP_EINVAL);
      g_assert_null (s);
      g_assert_cmpint (err.status, ==, PP_EINVAL);
      g_assert_cmpuint (strlen (err.msg), >, 0);
      g_assert_null (strchr (err.msg, '\n'));
      g_assert_nonnull (strstr (err.msg, bad[i].needle));
    }

  /* the smallest accepted shapes */
  for (int P = 2; P <= 8; P += 2)
    {
      PpSchedule *s = make_dualpipe (P, 2 * P);
      pp_schedule_free (s);
    }
}

/* ---- the README's bubble ----------------------------------------------- */

static double
readme_bubble (int PP, double f, double b, double w)
{
  double f_and_b = f + b; /* our simulator's cost of an OVERLAP_F_B */
  return (PP / 2 - 1) * (f_and_b + b - 3 * w);
}

/* Every rank idles exactly `bubble`; the makespan is busy + bubble, where
 * busy = M (F + B) for DualPipe (two stages, M/2 micro-batches each) and
 * 2M (F + B) for DualPipeV (two stages, M each). */
static void
check_bubble (const PpSchedule *s, double f, double b, double w, double bubble)
{
  PpSimulation *sim = pp_test_simulate (s, f, b, w, 0);
  /* every rank: each (stage, micro-batch) it holds once forward, once backward */
  double busy = (double) s->stages_per_rank * (s->stage_mb_hi[0] - s->stage_mb_lo[0]) * (f + b);

  g_test_message ("%s P=%d M=%d F=%g B=%g W=%g: makespan %g, idle %g, expected %g",
                  s->name, s->ranks, s->microbatches, f, b, w, sim->makespan,
                  sim->rank[0].idle, bubble);
  for (int r = 0; r < s->ranks; r++)
    {
      g_assert_cmpfloat_with_epsilon (sim->rank[r].busy, busy, 1e-9);
      g_assert_cmpfloat_with_epsilon (sim->rank[r].idle, bubble, 1e-9);
    }
  g_assert_cmpfloat_with_epsilon (sim->makespan, busy + bubble, 1e-9);
  pp_simulation_free (sim);
}

/* Costs in the README's regime: I = B - W equal to F, W <= F. */
static const double readme_costs[][3] = {
  { 1.0, 2.0, 1.0 },   /* F = I = W: the picture */
  { 2.0, 3.0, 1.0 },
  { 2.0, 4.0, 2.0 },
  { 1.0, 1.5, 0.5 },
  { 3.0, 3.0, 0.0 },   /* no split gain at all */
};

static void
test_bubble_readme (void)
{
  for (int P = 2; P <= 10; P += 2)
    {
      int Ms[] = { 2 * P, 2 * P + 2, 4 * P };

      for (guint k = 0; k < G_N_ELEMENTS (Ms); k++)
        {
          PpSchedule *s = make_dualpipe (P, Ms[k]);

          for (guint c = 0; c < G_N_ELEMENTS (readme_costs); c++)
            {
              double f = readme_costs[c][0], b = readme_costs[c][1], w = readme_costs[c][2];
              check_bubble (s, f, b, w, readme_bubble (P, f, b, w));
            }
          pp_schedule_free (s);
        }
    }
}

/* Outside I = F the README formula is not what this order gives.
 *
 * For F >= I (I = B - W) the idle time of every rank is
 *     (P/2-1) (2F + I - min (W, I)),
 * which equals the README's (P/2-1)(F + 2B - 3W) = (P/2-1)(F + 2I - W) only
 * when F = I and W <= F (derived from the order, checked against an
 * independent simulator over P <= 16, F, I, W in small integers).
 *
 * For F < I there is no single line; we pin F=2, B=4, W=1 (I = 3): the
 * README says 7, 14, 21 for P = 4, 6, 8; this order idles 6, 12, 19 — less
 * than the formula, by (I - F) min (P/2-1, F) for these costs.  */
static void
test_bubble_off_regime (void)
{
  static const double costs_f_ge_i[][3] = {
    { 2.0, 3.0, 2.0 },  /* I = 1 < W */
    { 2.0, 2.0, 1.0 },  /* I = W = 1 */
    { 3.0, 3.0, 1.0 },  /* I = 2 > W */
    { 2.0, 1.0, 0.0 },
  };
  static const struct { int P; double idle; } pinned[] = {
    { 2, 0.0 }, { 4, 6.0 }, { 6, 12.0 }, { 8, 19.0 },
  };

  for (int P = 2; P <= 10; P += 2)
    {
      PpSchedule *s = make_dualpipe (P, 2 * P + 2);

      for (guint c = 0; c < G_N_ELEMENTS (costs_f_ge_i); c++)
        {
          double f = costs_f_ge_i[c][0], b = costs_f_ge_i[c][1], w = costs_f_ge_i[c][2];
          double i = b - w;
          g_assert_cmpfloat (f, >=, i);
          check_bubble (s, f, b, w, (P / 2 - 1) * (2 * f + i - MIN (w, i)));
        }
      pp_schedule_free (s);
    }

  for (guint k = 0; k < G_N_ELEMENTS (pinned); k++)
    {
      int P = pinned[k].P;
      PpSchedule *s = make_dualpipe (P, 4 * P);

      check_bubble (s, 2.0, 4.0, 1.0, pinned[k].idle);
      if (P > 2)
        g_assert_cmpfloat (pinned[k].idle, <, readme_bubble (P, 2.0, 4.0, 1.0));
      pp_schedule_free (s);
    }
}

/* ---- the README's activation column ------------------------------------
 * 1F1B's "PP" is the number of micro-batches whose activations its first
 * rank holds at once, one stage's worth each; DualPipe's "PP+1" is in the
 * same unit, one (stage, micro-batch) — what PpSimRank.peak_inflight counts.
 * The README gives one number per schedule, the worst device: PP+1.
 *
 * Per rank it depends on how an OVERLAP_F_B is counted.  The simulator counts
 * the forward's activations before the overlapped backward frees its own, so
 * every rank peaks at PP+1 (a rank runs overlapped pairs while holding PP).
 * Counted without that transient, the two middle ranks (DualPipe) or the
 * bottom of the V (DualPipeV) hold PP+1 and every other rank PP.  Either
 * way the worst rank is PP+1 and the middle ranks reach it. */
static void
check_peak (const PpSchedule *s, int PP, int middle_lo, int middle_hi)
{
  PpSimulation *sim = pp_test_simulate (s, 1.0, 2.0, 1.0, 0);
  int peak = 0;

  for (int r = 0; r < s->ranks; r++)
    {
      g_test_message ("%s P=%d M=%d rank %d: peak %d", s->name, s->ranks, s->microbatches,
                      r, sim->rank[r].peak_inflight);
      peak = MAX (peak, sim->rank[r].peak_inflight);
      g_assert_cmpint (sim->rank[r].peak_inflight, >=, PP);
      g_assert_cmpint (sim->rank[r].peak_inflight, <=, PP + 1);
      if (r >= middle_lo && r <= middle_hi)
        g_assert_cmpint (sim->rank[r].peak_inflight, ==, PP + 1);
    }
  g_assert_cmpint (peak, ==, PP + 1);
  pp_simulation_free (sim);
}

static void
test_peak_activation (void)
{
  for (int P = 2; P <= 10; P += 2)
    {
      int Ms[] = { 2 * P, 4 * P };
      for (guint k = 0; k < G_N_ELEMENTS (Ms); k++)
        {
          PpSchedule *s = make_dualpipe (P, Ms[k]);
          check_peak (s, P, P / 2 - 1, P / 2);
          pp_schedule_free (s);
        }
    }
}

/* ---- DualPipeV: the same row with PP = 2P stages on P devices ---------- */

static PpSchedule *
make_dualpipev (int P, int M)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_new_dualpipev (P, M, 2, &s, &err);

  if (st != PP_OK)
    g_error ("DualPipeV P=%d M=%d: %s: %s", P, M, pp_status_name (st), err.msg);
  return s;
}

static void
test_dualpipev_bubble_readme (void)
{
  for (int P = 2; P <= 8; P++)
    {
      int Ms[] = { 2 * P, 2 * P + 1, 4 * P };

      for (guint k = 0; k < G_N_ELEMENTS (Ms); k++)
        {
          PpSchedule *s = make_dualpipev (P, Ms[k]);
          PpError err = { 0 };

          if (pp_schedule_validate (s, &err) != PP_OK)
            g_error ("DualPipeV P=%d M=%d does not validate: %s", P, Ms[k], err.msg);
          for (guint c = 0; c < G_N_ELEMENTS (readme_costs); c++)
            {
              double f = readme_costs[c][0], b = readme_costs[c][1], w = readme_costs[c][2];
              check_bubble (s, f, b, w, readme_bubble (2 * P, f, b, w));
            }
          pp_schedule_free (s);
        }
    }
}

static void
test_dualpipev_peak_activation (void)
{
  for (int P = 2; P <= 8; P++)
    {
      PpSchedule *s = make_dualpipev (P, 4 * P);
      /* the bottom of the V, rank P-1, is DualPipe's middle rank */
      check_peak (s, 2 * P, P - 1, P - 1);
      pp_schedule_free (s);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dualpipe/layout", test_layout);
  g_test_add_func ("/dualpipe/order", test_order);
  g_test_add_func ("/dualpipe/valid", test_valid);
  g_test_add_func ("/dualpipe/generate", test_generate);
  g_test_add_func ("/dualpipe/reject", test_reject);
  g_test_add_func ("/dualpipe/bubble-readme", test_bubble_readme);
  g_test_add_func ("/dualpipe/bubble-off-regime", test_bubble_off_regime);
  g_test_add_func ("/dualpipe/peak-activation", test_peak_activation);
  g_test_add_func ("/dualpipev/bubble-readme", test_dualpipev_bubble_readme);
  g_test_add_func ("/dualpipev/peak-activation", test_dualpipev_peak_activation);
  return g_test_run ();
}
