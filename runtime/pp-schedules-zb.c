/* pp-schedules-zb.c — the handcrafted schedules of Zero Bubble Pipeline
 * Parallelism (Qi, Wan, Huang, Lin; ICLR 2024, arXiv 2401.10241, section 2):
 * ZB-H1 and ZB-H2.  Both split every backward into I (input gradient, on the
 * critical path: the previous stage waits for it) and W (weight gradient,
 * needed by nobody but the optimizer), and move the W's into what would
 * otherwise be bubbles.  One stage per rank, stage r on rank r.
 *
 * Notation below: with warm-up w_r, rank r first runs F0 .. F(w_r - 1); after
 * that I(k) is the k-th input-gradient backward of the rank, and every F, I
 * and W takes micro-batches in increasing order.  "In flight" counts a
 * micro-batch from its F until its W (what pp_simulate calls peak_inflight).
 *
 * ZB-H1 (memory of 1F1B).  Rank r: w_r = P - r forwards (1F1B's warm-up plus
 * its first steady forward), then "I F" with W held back for the first r
 * rounds, then "I W F" rounds while forwards remain, then "I W" to the end,
 * then the r W's still owed.  Holding r W's back lets every rank reach P
 * micro-batches in flight, rank 0's peak in 1F1B, never more (the paper:
 * "delays the start of W ... ensuring all pipeline stages have the same number
 * of in-flight micro-batches"); I's reach rank 0 sooner and the held-back W's
 * fill the cool-down.  With T_W <= min(T_F, T_I) and M >= P every rank idles
 * exactly (P-1)(T_F + T_I - T_W) against 1F1B's (P-1)(T_F + T_I + T_W).
 *
 * ZB-H2 (at most 2P-1 in flight).  Rank r: w_r = 2P-1-2r forwards, which fill
 * the whole wait for the first I under uniform costs, then "I F" for 2r rounds
 * (every rank reaches 2P-1 in flight), then "I W F" while forwards remain, then
 * "I W" to the end, then the 2r W's still owed.  Under uniform costs and
 * M >= 2P-1 every rank is busy without a gap from its first action to its
 * last (the parallelogram of the paper's figure 3); the idle left is the
 * skew of (P-1) T_F at the start of the last rank and the end of the first,
 * which the paper removes by overlapping optimizer steps across iterations
 * (its section 4), something one simulated iteration cannot show.
 *
 * Both orders are built for any P >= 1 and M >= 1: with few micro-batches the
 * warm-up is capped by M and the later phases shrink or vanish.  Dependencies
 * only ever point to earlier micro-batches of a neighbour in the same phase
 * order, so neither order can deadlock whatever the costs (test-zb checks
 * every P in 2..8 and M in 1..4P with pp_schedule_validate and pp_simulate).
 */
#include "pp-schedule.h"

#define PUSH(s, r, a)                                 \
  do {                                                \
    if (pp_schedule_push ((s), (r), (a)) != PP_OK)    \
      goto oom;                                       \
  } while (0)

/* Pushes one rank's order: `warmup` forwards, then `held` rounds of "I F"
 * (W held back), "I W F" while forwards remain, "I W" while backwards remain,
 * and finally every W still owed.  `warmup` is capped by M here. */
static PpStatus
push_rank (PpSchedule *s, int r, int M, int warmup, int held)
{
  int f = 0, i = 0, w = 0;

  if (warmup > M)
    warmup = M;
  while (f < warmup)
    PUSH (s, r, pp_action (PP_ACT_F, r, f++));
  while (f < M && i < held)
    {
      PUSH (s, r, pp_action (PP_ACT_I, r, i++));
      PUSH (s, r, pp_action (PP_ACT_F, r, f++));
    }
  while (f < M)
    {
      PUSH (s, r, pp_action (PP_ACT_I, r, i++));
      PUSH (s, r, pp_action (PP_ACT_W, r, w++));
      PUSH (s, r, pp_action (PP_ACT_F, r, f++));
    }
  while (i < M)
    {
      PUSH (s, r, pp_action (PP_ACT_I, r, i++));
      PUSH (s, r, pp_action (PP_ACT_W, r, w++));
    }
  while (w < M)
    PUSH (s, r, pp_action (PP_ACT_W, r, w++));
  return PP_OK;
oom:
  return PP_ENOMEM;
}

/* Shared checks and construction; `h2` picks ZB-H2's warm-up and hold. */
static PpStatus
build (const char *name, bool h2, int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpSchedule *s;

  *out = NULL;
  if (V > 1)
    return pp_error_set (err, PP_EINVAL, "%s takes one stage per rank (got %d stages per rank)",
                         name, V);
  if (P < 1)
    return pp_error_set (err, PP_EINVAL, "%s needs at least 1 rank (got %d)", name, P);
  if (M < 1)
    return pp_error_set (err, PP_EINVAL, "%s needs at least 1 micro-batch (got %d)", name, M);
  if ((s = pp_schedule_new (name, P, M, 1, PP_PLACE_LOOP)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule");

  for (int r = 0; r < P; r++)
    {
      int warmup = h2 ? 2 * (P - 1 - r) + 1 : P - r;
      int held = h2 ? 2 * r : r;
      if (push_rank (s, r, M, warmup, held) != PP_OK)
        {
          pp_schedule_free (s);
          return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule");
        }
    }
  *out = s;
  return PP_OK;
}

PpStatus
pp_schedule_new_zb_h1 (int P, int M, int V, PpSchedule **out, PpError *err)
{
  return build ("ZB-H1", false, P, M, V, out, err);
}

PpStatus
pp_schedule_new_zb_h2 (int P, int M, int V, PpSchedule **out, PpError *err)
{
  return build ("ZB-H2", true, P, M, V, out, err);
}
