/* pp-schedules-pytorch.c — the schedules PyTorch's torch.distributed.pipelining
 * also defines, built so that every rank runs the same compute actions in the
 * same order as PyTorch's runtime does for the same (P, M, V).  That is what
 * makes a planned view of a PyTorch job match what the job runs; the test
 * test-pytorch-match pins it against orders generated from PyTorch itself.
 *
 * For GPipe and 1F1B the order is what PyTorch's _step_microbatches runs (not
 * the _get_pipeline_order visualizer path).  Unlike PyTorch we accept fewer
 * micro-batches than ranks for both: M = 1 is the naive model-parallel case.
 */
#include "pp-schedule.h"

#include <stdlib.h>
#include <string.h>

#define PUSH(s, r, a)                                 \
  do {                                                \
    if (pp_schedule_push ((s), (r), (a)) != PP_OK)    \
      goto oom;                                       \
  } while (0)

static PpStatus
need_one_stage (const char *name, int V, PpError *err)
{
  if (V != 1)
    return pp_error_set (err, PP_EINVAL,
                         "%s runs one stage per rank (got --stages-per-rank %d); "
                         "use Interleaved1F1B, LoopedBFS or InterleavedZeroBubble for several",
                         name, V);
  return PP_OK;
}

static PpStatus
need_two_stages (const char *name, int V, PpError *err)
{
  if (V != 2)
    return pp_error_set (err, PP_EINVAL,
                         "%s requires exactly 2 stages per rank (got --stages-per-rank %d)",
                         name, V);
  return PP_OK;
}

static PpStatus
oom_error (PpSchedule *s, PpSchedule **out, PpError *err)
{
  pp_schedule_free (s);
  *out = NULL;
  return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule");
}

PpStatus
pp_schedule_new_gpipe (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpStatus st;
  PpSchedule *s;

  *out = NULL;
  if ((st = need_one_stage ("GPipe", V, err)) != PP_OK)
    return st;
  if ((s = pp_schedule_new ("GPipe", P, M, 1, PP_PLACE_LOOP)) == NULL)
    return oom_error (NULL, out, err);
  for (int r = 0; r < P; r++)
    {
      for (int m = 0; m < M; m++)
        PUSH (s, r, pp_action (PP_ACT_F, r, m));
      for (int m = 0; m < M; m++)
        PUSH (s, r, pp_action (PP_ACT_B, r, m));
    }
  *out = s;
  return PP_OK;
oom:
  return oom_error (s, out, err);
}

PpStatus
pp_schedule_new_1f1b (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpStatus st;
  PpSchedule *s;

  *out = NULL;
  if ((st = need_one_stage ("1F1B", V, err)) != PP_OK)
    return st;
  if ((s = pp_schedule_new ("1F1B", P, M, 1, PP_PLACE_LOOP)) == NULL)
    return oom_error (NULL, out, err);
  for (int r = 0; r < P; r++)
    {
      /* Warm-up: the last stage runs one forward, each earlier stage one more. */
      int warmup = M < P - r ? M : P - r;
      int f = 0, b = 0;
      while (f < warmup)
        PUSH (s, r, pp_action (PP_ACT_F, r, f++));
      /* Steady state, backward first ("1B1F" in PyTorch). */
      for (;;)
        {
          PUSH (s, r, pp_action (PP_ACT_B, r, b++));
          if (f == M)
            break;
          PUSH (s, r, pp_action (PP_ACT_F, r, f++));
        }
      while (b < M)
        PUSH (s, r, pp_action (PP_ACT_B, r, b++));
    }
  *out = s;
  return PP_OK;
oom:
  return oom_error (s, out, err);
}

PpStatus
pp_schedule_new_looped_bfs (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpSchedule *s;

  *out = NULL;
  if ((s = pp_schedule_new ("LoopedBFS", P, M, V, PP_PLACE_LOOP)) == NULL)
    return oom_error (NULL, out, err);
  for (int r = 0; r < P; r++)
    {
      /* Breadth first: every micro-batch through a stage before the next stage;
       * backwards in reverse stage and reverse micro-batch order. */
      for (int l = 0; l < V; l++)
        for (int m = 0; m < M; m++)
          PUSH (s, r, pp_action (PP_ACT_F, l * P + r, m));
      for (int l = V - 1; l >= 0; l--)
        for (int m = M - 1; m >= 0; m--)
          PUSH (s, r, pp_action (PP_ACT_B, l * P + r, m));
    }
  *out = s;
  return PP_OK;
oom:
  return oom_error (s, out, err);
}

/* ---- interleaved 1F1B and interleaved zero bubble ----------------------
 * Both walk "ops": warm-up forwards, then forward+backward pairs, then
 * cool-down backwards.  Micro-batches go in rounds of `per_round`; the local
 * stage of an op changes every round.  With zero bubble, the backward is split
 * into I, and each W follows `lag` I's behind, then the rest at the end. */

typedef struct {
  int P, M, V, rank, warmup, per_round;
} Interleave;

static int
forward_stage (const Interleave *iv, int op)
{
  return ((op / iv->per_round) % iv->V) * iv->P + iv->rank;
}

static int
backward_stage (const Interleave *iv, int op)
{
  int local = iv->V - 1 - ((op - iv->warmup) / iv->per_round) % iv->V;
  return local * iv->P + iv->rank;
}

static PpStatus
interleaved_rank (PpSchedule *s, const Interleave *iv, bool zero_bubble, int lag)
{
  const int n_stages = iv->P * iv->V;
  const int mb_ops = iv->V * iv->M;
  const int fwd_bwd = mb_ops - iv->warmup;
  const int total = iv->warmup + fwd_bwd + iv->warmup;
  const int bkind = zero_bubble ? PP_ACT_I : PP_ACT_B;
  int *fwd_mb = calloc ((size_t) n_stages * 3, sizeof (int));
  int *bwd_mb = fwd_mb + n_stages, *w_mb = bwd_mb + n_stages;
  int *bwd_ops = malloc ((size_t) (mb_ops > 0 ? mb_ops : 1) * sizeof (int));
  int n_bwd = 0, n_w = 0;

  if (fwd_mb == NULL || bwd_ops == NULL)
    goto oom;

  for (int op = 0; op < total; op++)
    {
      if (op < iv->warmup + fwd_bwd)
        {
          int fs = forward_stage (iv, op);
          PUSH (s, iv->rank, pp_action (PP_ACT_F, fs, fwd_mb[fs]++));
          if (op < iv->warmup)
            continue;
        }
      int bs = backward_stage (iv, op);
      PUSH (s, iv->rank, pp_action (bkind, bs, bwd_mb[bs]++));
      bwd_ops[n_bwd++] = op;
      if (zero_bubble && op - iv->warmup >= lag)
        {
          int ws = backward_stage (iv, bwd_ops[n_w++]);
          PUSH (s, iv->rank, pp_action (PP_ACT_W, ws, w_mb[ws]++));
        }
    }
  while (zero_bubble && n_w < n_bwd)
    {
      int ws = backward_stage (iv, bwd_ops[n_w++]);
      PUSH (s, iv->rank, pp_action (PP_ACT_W, ws, w_mb[ws]++));
    }
  free (fwd_mb);
  free (bwd_ops);
  return PP_OK;
oom:
  free (fwd_mb);
  free (bwd_ops);
  return PP_ENOMEM;
}

static PpStatus
interleaved (const char *name, int P, int M, int V, bool zero_bubble,
             PpSchedule **out, PpError *err)
{
  const int rounds = M / P > 1 ? M / P : 1;
  const int per_round = M / rounds;
  const int factor = zero_bubble ? 1 : 2;
  PpSchedule *s;

  *out = NULL;
  if (M % rounds != 0)
    return pp_error_set (err, PP_EINVAL,
                         "%s needs the micro-batches to be a multiple of the rounds "
                         "max(1, M/P) = %d (got M=%d); try M=%d or M=%d",
                         name, rounds, M, M - M % rounds, M - M % rounds + rounds);
  if ((s = pp_schedule_new (name, P, M, V, PP_PLACE_LOOP)) == NULL)
    return oom_error (NULL, out, err);
  for (int r = 0; r < P; r++)
    {
      Interleave iv = { P, M, V, r, 0, per_round };
      int warmup = (V - 1) * per_round + factor * (P - 1 - r);
      iv.warmup = warmup < M * V ? warmup : M * V;
      if (interleaved_rank (s, &iv, zero_bubble, r) != PP_OK)
        return oom_error (s, out, err);
    }
  *out = s;
  return PP_OK;
}

PpStatus
pp_schedule_new_interleaved_1f1b (int P, int M, int V, PpSchedule **out, PpError *err)
{
  return interleaved ("Interleaved1F1B", P, M, V, false, out, err);
}

PpStatus
pp_schedule_new_interleaved_zb (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpStatus st = interleaved ("InterleavedZeroBubble", P, M, V, true, out, err);
  if (st != PP_OK)
    return st;
  /* PyTorch refuses an order it cannot lower to sends and receives; so do we. */
  if ((st = pp_schedule_validate (*out, err)) != PP_OK)
    {
      char why[PP_ERROR_MSG_MAX];
      snprintf (why, sizeof why, "%s", err ? err->msg : "");
      pp_schedule_free (*out);
      *out = NULL;
      return pp_error_set (err, PP_EINVAL,
                           "InterleavedZeroBubble cannot run P=%d M=%d V=%d (%s); use more micro-batches",
                           P, M, V, why);
    }
  return PP_OK;
}

/* ---- ZBV ---------------------------------------------------------------- */

PpStatus
pp_schedule_new_zbv (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpStatus st;
  PpSchedule *s;
  /* Built for at least 2P-1 micro-batches (enough to fill the V), then the
   * ones past M are dropped, as PyTorch does. */
  const int n = M > 2 * P - 1 ? M : 2 * P - 1;

  *out = NULL;
  if ((st = need_two_stages ("ZBV", V, err)) != PP_OK)
    return st;
  if ((s = pp_schedule_new ("ZBV", P, M, 2, PP_PLACE_V)) == NULL)
    return oom_error (NULL, out, err);

#define ZPUSH(kind, stage, mb)                                  \
  do {                                                          \
    if ((mb) < M)                                               \
      PUSH (s, r, pp_action ((kind), (stage), (mb)));           \
  } while (0)

  for (int r = 0; r < P; r++)
    {
      const int c0 = r, c1 = 2 * P - 1 - r;
      int f0 = 0, f1 = 0, b0 = 0, b1 = 0, w0, w1;

      for (int i = 0; i < 2 * (P - r) - 1; i++)
        { ZPUSH (PP_ACT_F, c0, f0); f0++; }
      for (int i = 0; i < r; i++)
        {
          ZPUSH (PP_ACT_F, c1, f1); f1++;
          ZPUSH (PP_ACT_F, c0, f0); f0++;
        }
      for (int i = 0; i < P - r; i++)
        {
          ZPUSH (PP_ACT_F, c1, f1); f1++;
          ZPUSH (PP_ACT_I, c1, b1);
          ZPUSH (PP_ACT_W, c1, b1); b1++;
        }
      while (f1 < f0 || f0 < n)
        {
          if (f0 < n)
            { ZPUSH (PP_ACT_F, c0, f0); f0++; }
          ZPUSH (PP_ACT_I, c0, b0);
          ZPUSH (PP_ACT_W, c0, b0); b0++;
          ZPUSH (PP_ACT_F, c1, f1); f1++;
          ZPUSH (PP_ACT_I, c1, b1);
          ZPUSH (PP_ACT_W, c1, b1); b1++;
        }
      w0 = b0;
      w1 = b1;
      for (int i = 0; i < r; i++)
        {
          ZPUSH (PP_ACT_I, c0, b0); b0++;
          ZPUSH (PP_ACT_I, c1, b1); b1++;
        }
      for (int i = 0; i < P - r; i++)
        {
          ZPUSH (PP_ACT_I, c0, b0); b0++;
          ZPUSH (PP_ACT_W, c0, w0); w0++;
        }
      while (w1 < b1)
        { ZPUSH (PP_ACT_W, c1, w1); w1++; }
      while (w0 < b0)
        { ZPUSH (PP_ACT_W, c0, w0); w0++; }
    }
#undef ZPUSH
  *out = s;
  return PP_OK;
oom:
  return oom_error (s, out, err);
}

/* ---- DualPipeV -----------------------------------------------------------
 * DeepSeek's DualPipe folded into a V (PyTorch's ScheduleDualPipeV): each
 * rank holds stages r and 2P-1-r; the steady state overlaps a forward of one
 * with a full backward of the other.  Micro-batch indices come from
 * per-(stage, kind) counters; an I leaves its W in a queue that later steps
 * drain, oldest first. */

typedef struct {
  PpSchedule *s;
  int rank;
  int *f, *i, *w;        /* [n_stages] next micro-batch per kind */
  int *queue_stage, *queue_mb;
  int q_head, q_tail;
} DualV;

static PpStatus
dv_action (DualV *d, int stage, int kind)
{
  int mb = kind == PP_ACT_F ? d->f[stage] : kind == PP_ACT_W ? d->w[stage] : d->i[stage];
  if (pp_schedule_push (d->s, d->rank, pp_action (kind, stage, mb)) != PP_OK)
    return PP_ENOMEM;
  switch (kind)
    {
    case PP_ACT_F: d->f[stage]++; break;
    case PP_ACT_B: d->i[stage]++; d->w[stage]++; break;
    case PP_ACT_I:
      d->queue_stage[d->q_tail] = stage;
      d->queue_mb[d->q_tail++] = mb;
      d->i[stage]++;
      break;
    default: d->w[stage]++; break;
    }
  return PP_OK;
}

static PpStatus
dv_overlap (DualV *d, int f_stage, int b_stage)
{
  PpAction a = pp_action_overlap (f_stage, d->f[f_stage], PP_ACT_B, b_stage, d->i[b_stage]);
  if (pp_schedule_push (d->s, d->rank, a) != PP_OK)
    return PP_ENOMEM;
  d->f[f_stage]++;
  d->i[b_stage]++;
  d->w[b_stage]++;
  return PP_OK;
}

static PpStatus
dv_pending_weight (DualV *d)
{
  if (d->q_head == d->q_tail)
    return PP_OK;
  int stage = d->queue_stage[d->q_head], mb = d->queue_mb[d->q_head++];
  if (pp_schedule_push (d->s, d->rank, pp_action (PP_ACT_W, stage, mb)) != PP_OK)
    return PP_ENOMEM;
  d->w[stage]++;
  return PP_OK;
}

PpStatus
pp_schedule_new_dualpipev (int P, int M, int V, PpSchedule **out, PpError *err)
{
  PpStatus st;
  PpSchedule *s;
  DualV d;
  int *mem;
  const int n_stages = 2 * P;

  *out = NULL;
  if ((st = need_two_stages ("DualPipeV", V, err)) != PP_OK)
    return st;
  if (M < n_stages)
    return pp_error_set (err, PP_EINVAL,
                         "DualPipeV needs at least as many micro-batches as stages "
                         "(2 x %d ranks = %d; got M=%d)", P, n_stages, M);
  if ((s = pp_schedule_new ("DualPipeV", P, M, 2, PP_PLACE_V)) == NULL)
    return oom_error (NULL, out, err);
  mem = malloc (((size_t) n_stages * 3 + (size_t) 2 * (2 * (size_t) M + 2)) * sizeof (int));
  if (mem == NULL)
    return oom_error (s, out, err);

#define DV(call)                     \
  do {                               \
    if ((call) != PP_OK)             \
      goto dv_oom;                   \
  } while (0)

  for (int r = 0; r < P; r++)
    {
      const int s0 = r, s1 = 2 * P - 1 - r;
      bool zb = false;

      memset (mem, 0, (size_t) n_stages * 3 * sizeof (int));
      d = (DualV) { s, r, mem, mem + n_stages, mem + 2 * n_stages,
                    mem + 3 * n_stages, mem + 3 * n_stages + 2 * M + 2, 0, 0 };

      for (int k = 0; k < 2 * (P - r - 1); k++)   /* 1: F0 */
        DV (dv_action (&d, s0, PP_ACT_F));
      for (int k = 0; k < r + 1; k++)             /* 2: F0 F1 */
        {
          DV (dv_action (&d, s0, PP_ACT_F));
          DV (dv_action (&d, s1, PP_ACT_F));
        }
      for (int k = 0; k < P - r - 1; k++)         /* 3: I1 W F1 */
        {
          DV (dv_action (&d, s1, PP_ACT_I));
          DV (dv_pending_weight (&d));
          DV (dv_action (&d, s1, PP_ACT_F));
        }
      for (int k = 0; k < M - 2 * P + r + 1; k++) /* 4: F0B1 overlapped with F1B0 */
        {
          if (k == 0 && r == P - 1)
            {
              DV (dv_action (&d, s0, PP_ACT_F));
              DV (dv_action (&d, s1, PP_ACT_B));
            }
          else
            DV (dv_overlap (&d, s0, s1));
          DV (dv_overlap (&d, s1, s0));
        }
      for (int k = 0; k < P - r - 1; k++)         /* 5: B1, F1B0 */
        {
          DV (dv_action (&d, s1, PP_ACT_B));
          DV (dv_overlap (&d, s1, s0));
        }
      for (int k = 0; k < r + 1; k++)             /* 6: B1 B0, second half split */
        {
          if (k == (r + 1) / 2 && r % 2 == 1)
            zb = true;
          DV (dv_action (&d, s1, zb ? PP_ACT_I : PP_ACT_B));
          if (k == (r + 1) / 2 && r % 2 == 0)
            zb = true;
          DV (dv_action (&d, s0, zb ? PP_ACT_I : PP_ACT_B));
        }
      for (int k = 0; k < P - r - 1; k++)         /* 7: W, B0 */
        {
          DV (dv_pending_weight (&d));
          DV (dv_action (&d, s0, zb ? PP_ACT_I : PP_ACT_B));
        }
      for (int k = 0; k < r + 1; k++)             /* 8: W */
        DV (dv_pending_weight (&d));
    }
#undef DV
  free (mem);
  *out = s;
  return PP_OK;
dv_oom:
  free (mem);
  return oom_error (s, out, err);
}
