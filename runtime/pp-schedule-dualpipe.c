/* pp-schedule-dualpipe.c — DeepSeek's DualPipe (bidirectional pipeline).
 *
 * Follows the order of DualPipe.step() in deepseek-ai/DualPipe
 * (dualpipe/dualpipe.py), compute actions only.
 *
 * Model: P ranks (even), M micro-batches (even, M >= 2P), 2P stages.
 *   - "down" copy: stage s (s < P) on rank s, chain 0 → 1 → … → P-1,
 *     micro-batches [0, M/2);
 *   - "up" copy: stage P+j holds model part j on rank P-1-j, chain
 *     P → P+1 → … → 2P-1, micro-batches [M/2, M).
 * So rank r holds stage r (down) and stage 2P-1-r (up).
 *
 * DualPipe speaks of two "phases" per rank, seen from the rank: on the first
 * half of the ranks phase 0 is the down direction and phase 1 the up one; on
 * the second half it is the other way round.  With h = min(r, P-1-r) (the
 * distance from the nearer end), Ph = P/2 and N = M/2, each rank runs:
 *
 *   1. 2(Ph-h-1) × F(phase 0)
 *   2. (h+1)    × F(phase 0), F(phase 1)
 *   3. (Ph-h-1) × I(phase 1), W, F(phase 1)              (zero bubble)
 *   4. (N-P+h+1)× F(0)&B(1), F(1)&B(0)    — overlapped pairs; on the two
 *                 middle ranks the very first F(0), B(1) run one after the other
 *   5. (Ph-h-1) × B(phase 1), F(1)&B(0)
 *   6. (h+1)    × B(phase 1), B(phase 0)  — from the middle of the loop on,
 *                 backwards are split (I, with W deferred)
 *   7. (Ph-h-1) × W, I(phase 0)
 *   8. (h+1)    × W
 *
 * Each phase consumes its chunks in order, forward and backward alike, and
 * the deferred weight gradients are run first in, first out.
 */
#include "pp-schedule.h"

#include <stdlib.h>

typedef struct {
  PpSchedule *s;
  int         rank;
  int         stage[2];  /* stage of local phase 0 and 1 on this rank */
  int         mb0[2];    /* first micro-batch of local phase 0 and 1 */
  int         next_f[2]; /* next chunk to run forward, per local phase */
  int         next_b[2]; /* next chunk to run backward, per local phase */
  int        *wq_stage;  /* deferred W queue (FIFO) */
  int        *wq_mb;
  int         wq_head, wq_tail;
  PpStatus    status;
} Rank;

static void
emit (Rank *k, PpAction a)
{
  if (k->status == PP_OK)
    k->status = pp_schedule_push (k->s, k->rank, a);
}

static void
fwd (Rank *k, int ph)
{
  emit (k, pp_action (PP_ACT_F, k->stage[ph], k->mb0[ph] + k->next_f[ph]++));
}

/* A backward of local phase ph; split = DualPipe's enable_zb: I now, W later. */
static void
bwd (Rank *k, int ph, int split)
{
  int st = k->stage[ph], mb = k->mb0[ph] + k->next_b[ph]++;

  if (!split)
    {
      emit (k, pp_action (PP_ACT_B, st, mb));
      return;
    }
  emit (k, pp_action (PP_ACT_I, st, mb));
  k->wq_stage[k->wq_tail] = st;
  k->wq_mb[k->wq_tail] = mb;
  k->wq_tail++;
}

static void
weight (Rank *k)
{
  if (k->wq_head == k->wq_tail)
    {
      /* cannot happen for the orders below; a bug if it does */
      if (k->status == PP_OK)
        k->status = PP_EINVAL;
      return;
    }
  emit (k, pp_action (PP_ACT_W, k->wq_stage[k->wq_head], k->wq_mb[k->wq_head]));
  k->wq_head++;
}

/* Forward of local phase fph overlapped with the (full) backward of bph. */
static void
fwd_bwd (Rank *k, int fph, int bph)
{
  int fst = k->stage[fph], fmb = k->mb0[fph] + k->next_f[fph]++;
  int bst = k->stage[bph], bmb = k->mb0[bph] + k->next_b[bph]++;

  emit (k, pp_action_overlap (fst, fmb, PP_ACT_B, bst, bmb));
}

static void
build_rank (Rank *k, int P, int N)
{
  int r = k->rank;
  int half = P / 2;
  int h = r < P - 1 - r ? r : P - 1 - r;
  int second = r >= half;
  int middle = (r == half - 1) || (r == half);
  int n1 = half - h - 1; /* the count DualPipe calls step 1/2, 3, 5 and 7 */
  int n4 = N - P + h + 1;
  int n6 = h + 1;
  int split;

  /* local phase 0 is the down copy on the first half, the up copy on the second */
  for (int ph = 0; ph < 2; ph++)
    {
      int up = ph ^ second;
      k->stage[ph] = up ? 2 * P - 1 - r : r;
      k->mb0[ph] = up ? N : 0;
    }

  /* 1: warm-up forwards of phase 0 */
  for (int i = 0; i < 2 * n1; i++)
    fwd (k, 0);

  /* 2: forwards alternating between the phases */
  for (int i = 0; i < h + 1; i++)
    {
      fwd (k, 0);
      fwd (k, 1);
    }

  /* 3: split backward of phase 1, its W at once, a forward of phase 1 */
  for (int i = 0; i < n1; i++)
    {
      bwd (k, 1, 1);
      weight (k);
      fwd (k, 1);
    }

  /* 4: the main loop, two overlapped pairs per round */
  for (int i = 0; i < n4; i++)
    {
      if (i == 0 && middle)
        {
          /* DualPipe does not overlap this pair, to shorten the bubble */
          fwd (k, 0);
          bwd (k, 1, 0);
        }
      else
        fwd_bwd (k, 0, 1);
      fwd_bwd (k, 1, 0);
    }

  /* 5: a lone backward of phase 1, then an overlapped pair */
  for (int i = 0; i < n1; i++)
    {
      bwd (k, 1, 0);
      fwd_bwd (k, 1, 0);
    }

  /* 6: backwards of both phases; split from the middle of the loop on */
  split = 0;
  for (int i = 0; i < n6; i++)
    {
      if (i == n6 / 2 && h % 2 == 1)
        split = 1;
      bwd (k, 1, split);
      if (i == n6 / 2 && h % 2 == 0)
        split = 1;
      bwd (k, 0, split);
    }

  /* 7: deferred W, then a split backward of phase 0 */
  for (int i = 0; i < n1; i++)
    {
      weight (k);
      bwd (k, 0, 1);
    }

  /* 8: the remaining deferred W */
  for (int i = 0; i < h + 1; i++)
    weight (k);
}

PpStatus
pp_schedule_new_dualpipe (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpSchedule *s;
  PpStatus st = PP_OK;
  int N;
  int *wq = NULL;

  *out = NULL;
  if (V > 0 && V != 2)
    return pp_error_set (err, PP_EINVAL,
                         "DualPipe holds exactly two stages per rank (got V=%d); give V=2 or none", V);
  if (P < 2 || P % 2 != 0)
    return pp_error_set (err, PP_EINVAL,
                         "DualPipe needs an even number of ranks, at least 2 (got %d)", P);
  if (M <= 0 || M % 2 != 0)
    return pp_error_set (err, PP_EINVAL,
                         "DualPipe needs an even number of micro-batches, half per direction (got %d)", M);
  if (M / 2 < P)
    return pp_error_set (err, PP_EINVAL,
                         "DualPipe needs at least 2 x ranks = %d micro-batches (got %d)", 2 * P, M);

  s = pp_schedule_new ("DualPipe", P, M, 2, PP_PLACE_CUSTOM);
  if (s == NULL)
    return pp_error_set (err, PP_ENOMEM, "DualPipe: out of memory");

  N = M / 2;
  for (int j = 0; j < P; j++)
    {
      int down = j, up = P + j;

      s->stage_rank[down] = j;
      s->stage_prev[down] = j > 0 ? down - 1 : -1;
      s->stage_next[down] = j < P - 1 ? down + 1 : -1;
      s->stage_mb_lo[down] = 0;
      s->stage_mb_hi[down] = N;

      s->stage_rank[up] = P - 1 - j;
      s->stage_prev[up] = j > 0 ? up - 1 : -1;
      s->stage_next[up] = j < P - 1 ? up + 1 : -1;
      s->stage_mb_lo[up] = N;
      s->stage_mb_hi[up] = M;
    }

  /* a rank defers at most one W per backward it runs: 2N */
  wq = malloc (2 * (size_t) M * sizeof (int));
  if (wq == NULL)
    {
      pp_schedule_free (s);
      return pp_error_set (err, PP_ENOMEM, "DualPipe: out of memory");
    }

  for (int r = 0; r < P && st == PP_OK; r++)
    {
      Rank k = { 0 };

      k.s = s;
      k.rank = r;
      k.wq_stage = wq;
      k.wq_mb = wq + M;
      k.status = PP_OK;
      build_rank (&k, P, N);
      st = k.status;
      if (st == PP_OK && (k.wq_head != k.wq_tail || k.next_f[0] != N || k.next_f[1] != N
                          || k.next_b[0] != N || k.next_b[1] != N))
        st = PP_EINVAL;
    }
  free (wq);

  if (st != PP_OK)
    {
      pp_schedule_free (s);
      if (st == PP_ENOMEM)
        return pp_error_set (err, PP_ENOMEM, "DualPipe: out of memory");
      return pp_error_set (err, st, "DualPipe: internal error building P=%d M=%d", P, M);
    }

  *out = s;
  return PP_OK;
}
