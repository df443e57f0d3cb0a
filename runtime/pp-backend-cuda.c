/* pp-backend-cuda.c — the CUDA compute backend of the schedule walker
 * (pp-run-private.h): the same actions, queued on the ranks' streams.
 *
 * Each rank queues its actions on its own stream (its own GPU, or its
 * green-context SM partition of a shared one, pp-gpu.h); a stage's part is
 * a PpGpuChunk (pp-chunk-cuda.h).  A stage boundary is the transport's
 * device half (pp-transport.h: the device transport's copies or NCCL edges
 * between threads, the nccl transport's between processes), queued on the
 * consumer's stream after the producer's event, so the host threads only
 * wait for each other's *launches* and the GPUs run the schedule
 * asynchronously.  Spans
 * carry GPU times: from CUPTI (each block's first kernel start to last
 * kernel end, kernels and copies as child spans) or, where CUPTI cannot
 * trace, from CUDA events; they reach the probe once the step has
 * completed.  Transfers are RECV_F / RECV_B spans; the GPU idling before a
 * transfer is a WAIT span.
 *
 * Without CUDA this file builds to pp_run_backend_cuda () == NULL.
 */
#define _GNU_SOURCE
#include "pp-run-private.h"

#ifdef PP_HAVE_CUDA
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "pp-chunk-cuda.h"
#include "pp-gpu.h"
#include "pp-transport.h"
#ifdef PP_HAVE_CUPTI
#include "pp-cupti.h"
#endif

/* What a rank queued in a step, timed once the step has completed. */
typedef struct {
  int         span;        /* PP_SPAN_* */
  int         stage, mb, peer;
  int         works;       /* 1 or 2 (OVERLAP_F_B) */
  int         work_kind[2];/* PP_ACT_* of each work (cost sums) */
  int         work_stage[2];
  cudaEvent_t ev[3];       /* start, between the works, end */
  int64_t     t[3];        /* their times once the step has completed */
  uint64_t    block;       /* CUPTI block id, 0 = none */
} GpuRec;

/* A stage's device buffers on its rank, [n_mb][rows * dim]. */
typedef struct {
  PpGpuChunk *gchunk;
  float      *d_out, *d_din;    /* produced here (NULL on a tail / head) */
  float      *d_in;             /* head: the batch rows; else prev's out, copied */
  float      *d_dout;           /* next's din, copied (NULL on a tail) */
  int32_t    *d_labels;         /* tail */
  float      *d_losses;         /* tail: per-row losses */
} CudaStage;

typedef struct {
  GpuRec        *recs;       /* [cap_recs] with their events */
  int            n_recs, cap_recs;
  /* With CUPTI, a step's spans go out at the next step's end (or when the
   * run flushes or ends), once a flush requested after the step has
   * delivered its kernels: no rank waits for CUPTI.  [cap_recs], times set */
  GpuRec        *pend;
  int            n_pend, pend_step;
  uint64_t       pend_ticket;
  float         *d_zeros;    /* [rows * max dim] on the rank's device */
} CudaRank;

typedef struct {
  PpGpu          *gpu;
  PpTransport    *host;       /* the run's transport under the device one we made, or NULL */
  uint64_t        flush_ticket;/* the CUPTI flush asked for after this step */
} CudaRun;

#define CUDA_RUN(run) ((CudaRun *) (run)->bk)
#define GPU(run)      (CUDA_RUN (run)->gpu)
#define CS(st)        ((CudaStage *) (st)->bk)
#define CR(rk)        ((CudaRank *) (rk)->bk)

static PpStatus
cuda_check (PpError *err, const char *what, cudaError_t e)
{
  if (e == cudaSuccess)
    return PP_OK;
  (void) cudaGetLastError ();
  return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO, "%s: %s", what,
                       cudaGetErrorString (e));
}

static cudaStream_t
rank_stream (PpRun *run, int rank)
{
  return (cudaStream_t) pp_gpu_stream (GPU (run), rank);
}

static PpCupti *
run_cupti (PpRun *run)
{
#ifdef PP_HAVE_CUPTI
  return pp_gpu_cupti (GPU (run));
#else
  (void) run;
  return NULL;
#endif
}

static uint64_t
tag_push (PpRun *run, int rank, int stage, int mb, int kind)
{
#ifdef PP_HAVE_CUPTI
  return pp_cupti_push_block_rank (run_cupti (run), rank, stage, mb, kind, run->step);
#else
  (void) run; (void) rank; (void) stage; (void) mb; (void) kind;
  return 0;
#endif
}

/* A rank's device work of the step outside its F/B/I/W blocks (the batch's
 * upload, the gradient sums, AdamW, the losses' copy): tagged with the rank
 * and step only (stage and micro-batch -1), so CUPTI's records of it carry
 * the step that ran them, not the step of the last block when a flush read
 * them. */
static uint64_t
tag_step_work (PpRun *run, int rank)
{
  return tag_push (run, rank, -1, -1, PP_SPAN_OPT);
}

static void
tag_pop (PpRun *run, uint64_t block)
{
#ifdef PP_HAVE_CUPTI
  if (block != 0)
    pp_cupti_pop_block (run_cupti (run));
#else
  (void) run; (void) block;
#endif
}

static GpuRec *
gpu_rec (PpRunRank *rk, PpError *err)
{
  GpuRec *r;
  if (CR (rk)->n_recs >= CR (rk)->cap_recs)
    {
      pp_error_set (err, PP_EINVAL, "rank %d: more GPU work in one step than planned (%d records)",
                    rk->rank, CR (rk)->cap_recs);
      return NULL;
    }
  r = &CR (rk)->recs[CR (rk)->n_recs++];
  r->block = 0;
  r->works = 0;
  r->peer = -1;
  return r;
}

/* Brings what producer stage ps published for mb (its forward output, or
 * with grad its input gradient) into stage `stage`'s receive buffer, on
 * this rank's stream, through the transport (a copy after the producer's
 * event, or NCCL): the stage boundary, a RECV record of its own. */
static PpStatus
gpu_receive (PpRun *run, PpRunRank *rk, int stage, int ps, int grad, int mb, PpError *err)
{
  PpRunStage *st = &run->stages[stage], *p = &run->stages[ps];
  PpTransport *t = run->transport;
  int k = mb - st->mb_lo;
  size_t rows = (size_t) run->rows;
  size_t dim = grad ? (size_t) st->out_dim : (size_t) st->in_dim;
  float *dst = (grad ? CS (st)->d_dout : CS (st)->d_in) + (size_t) k * rows * dim;
  cudaStream_t s = rank_stream (run, rk->rank);
  GpuRec *r;
  PpStatus rc;

  if ((r = gpu_rec (rk, err)) == NULL)
    return PP_EINVAL;
  r->span = grad ? PP_SPAN_RECV_B : PP_SPAN_RECV_F;
  r->stage = stage;
  r->mb = mb;
  r->peer = p->rank;
  r->block = tag_push (run, rk->rank, stage, mb, r->span);
  rc = t->ops->acquire_device (t, ps, grad, mb, dst, rows * dim, s, r->ev[0], err);
  if (rc == PP_OK)
    rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[2], s));
  tag_pop (run, r->block);
  return rc;
}

/* An F: its input rows are in d_in (the batch's, uploaded at the step's
 * start, or a copy of the previous stage's output); a tail's labels. */
static void
cuda_batch_rows (PpRun *run, PpRunWork *w)
{
  PpRunStage *st = &run->stages[w->stage];
  size_t rows = (size_t) run->rows;

  w->input = CS (st)->d_in + (size_t) w->k * rows * (size_t) st->in_dim;
  if (st->next < 0)
    w->labels = CS (st)->d_labels + (size_t) w->k * rows;
}

/* The host waits for the producer's launch (not for its GPU), then the
 * stage boundary is queued on this rank's stream. */
static PpStatus
cuda_receive (PpRun *run, PpRunRank *rk, PpRunWork *w, int ps, int grad, PpError *err)
{
  PpRunStage *st = &run->stages[w->stage];
  size_t rows = (size_t) run->rows;
  PpStatus rc;

  if ((rc = pp_run_wait_ready (run, rk, ps, grad, w->stage, w->mb, NULL, false, err)) != PP_OK
      || (rc = gpu_receive (run, rk, w->stage, ps, grad, w->mb, err)) != PP_OK)
    return rc;
  if (grad)
    w->input = CS (st)->d_dout + (size_t) w->k * rows * (size_t) st->out_dim;
  return PP_OK;
}

/* Queues one work (published by publish_gpu once its end event is recorded). */
static PpStatus
cuda_compute (PpRun *run, PpRunRank *rk, const PpRunWork *w, PpError *err)
{
  PpRunStage *st = &run->stages[w->stage];
  size_t rows = (size_t) run->rows;
  float loss_scale = 1.0f / (float) run->cfg.batch;
  PpStatus rc;

  switch (w->kind)
    {
    case PP_ACT_F:
      rc = pp_gpu_chunk_forward (CS (st)->gchunk, w->mb, w->input, w->labels,
                                 CS (st)->d_out ? CS (st)->d_out + (size_t) w->k * rows * (size_t) st->out_dim : NULL,
                                 st->next < 0 ? CS (st)->d_losses + (size_t) w->k * rows : NULL, err);
      break;
    case PP_ACT_B:
    case PP_ACT_I:
      {
        float *din = CS (st)->d_din ? CS (st)->d_din + (size_t) w->k * rows * (size_t) st->in_dim : NULL;
        if (w->kind == PP_ACT_B)
          rc = pp_gpu_chunk_backward (CS (st)->gchunk, w->mb, w->input, din, loss_scale, err);
        else
          rc = pp_gpu_chunk_backward_input (CS (st)->gchunk, w->mb, w->input, din, loss_scale, err);
        break;
      }
    case PP_ACT_W:
      rc = pp_gpu_chunk_backward_weight (CS (st)->gchunk, w->mb, err);
      break;
    default:
      return pp_error_set (err, PP_EINVAL, "cannot run action kind %d", w->kind);
    }
  return rc;
}

/* The work's output is ready once `done` (recorded after it on the rank's
 * stream) is: consumers wait for that event. */
static void
publish_gpu (PpRun *run, const PpRunWork *w, cudaEvent_t done)
{
  PpRunStage *st = &run->stages[w->stage];
  PpTransport *t = run->transport;
  size_t rows = (size_t) run->rows;
  if (w->kind == PP_ACT_F && st->next >= 0)
    t->ops->publish_device (t, w->stage, 0, w->mb,
                            CS (st)->d_out + (size_t) w->k * rows * (size_t) st->out_dim,
                            rows * (size_t) st->out_dim, done);
  else if ((w->kind == PP_ACT_B || w->kind == PP_ACT_I) && st->prev >= 0)
    t->ops->publish_device (t, w->stage, 1, w->mb,
                            CS (st)->d_din + (size_t) w->k * rows * (size_t) st->in_dim,
                            rows * (size_t) st->in_dim, done);
}

/* An action is one record: two events (three for OVERLAP_F_B), its start
 * and the end of each work, which is also what consumers of that work wait
 * for — every event recorded between two blocks widens the gap between
 * them. */
static PpStatus
cuda_action_begin (PpRun *run, PpRunRank *rk, const PpAction *a, const PpRunWork *w, int n,
                   PpError *err)
{
  GpuRec *r;
  PpStatus rc;

  if ((r = gpu_rec (rk, err)) == NULL)
    return PP_EINVAL;
  r->span = pp_run_span_kind (a->kind);
  r->stage = a->stage;
  r->mb = a->microbatch;
  r->works = n;
  for (int i = 0; i < n; i++)
    {
      r->work_kind[i] = w[i].kind;
      r->work_stage[i] = w[i].stage;
    }
  r->block = tag_push (run, rk->rank, a->stage, a->microbatch, r->span);
  rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[0], rank_stream (run, rk->rank)));
  if (rc != PP_OK)
    tag_pop (run, r->block);
  return rc;
}

static PpStatus
cuda_work_end (PpRun *run, PpRunRank *rk, const PpRunWork *w, int i, PpError *err)
{
  GpuRec *r = &CR (rk)->recs[CR (rk)->n_recs - 1];
  PpStatus rc = cuda_check (err, "cudaEventRecord",
                            cudaEventRecord (r->ev[i + 1], rank_stream (run, rk->rank)));
  if (rc == PP_OK)
    publish_gpu (run, w, r->ev[i + 1]);
  return rc;
}

static void
cuda_action_end (PpRun *run, PpRunRank *rk, const PpAction *a, PpStatus rc, int64_t *t_end)
{
  tag_pop (run, CR (rk)->recs[CR (rk)->n_recs - 1].block);
  *t_end = pp_probe_now_ns ();
}

/* Start of a step on a rank: its context, its clock reference, and the
 * batch rows its head stages read and the labels its tail stages need. */
static PpStatus
gpu_step_begin (PpRun *run, PpRunRank *rk, PpError *err)
{
  cudaStream_t s = rank_stream (run, rk->rank);
  size_t rows = (size_t) run->rows;
  PpStatus rc;

  CR (rk)->n_recs = 0;
  if ((rc = pp_gpu_bind (GPU (run), rk->rank, err)) != PP_OK
      || (rc = pp_gpu_calibrate (GPU (run), rk->rank, err)) != PP_OK)
    return rc;
  uint64_t tag = tag_step_work (run, rk->rank);
  for (int i = 0; i < rk->n_stages && rc == PP_OK; i++)
    {
      PpRunStage *st = &run->stages[rk->stages[i]];
      if (st->prev < 0)
        rc = cuda_check (err, "copying the batch to the GPU",
                         cudaMemcpyAsync (CS (st)->d_in, run->x + (size_t) st->mb_lo * rows * (size_t) st->in_dim,
                                          (size_t) st->n_mb * rows * (size_t) st->in_dim * sizeof (float),
                                          cudaMemcpyHostToDevice, s));
      if (rc == PP_OK && st->next < 0)
        rc = cuda_check (err, "copying the labels to the GPU",
                         cudaMemcpyAsync (CS (st)->d_labels, run->labels + (size_t) st->mb_lo * rows,
                                          (size_t) st->n_mb * rows * sizeof (int32_t),
                                          cudaMemcpyHostToDevice, s));
    }
  tag_pop (run, tag);
  return rc;
}

static PpStatus
gpu_step_end (PpRun *run, PpRunRank *rk, PpError *err)
{
  return cuda_check (err, "running the step on the GPU",
                     cudaStreamSynchronize (rank_stream (run, rk->rank)));
}

static void
add_cost (PpRunStage *st, int kind, double ns)
{
  switch (kind)
    {
    case PP_ACT_F: st->sum_f += ns; st->n_f++; break;
    case PP_ACT_B: st->sum_b += ns; st->n_b++; break;
    case PP_ACT_I: st->sum_i += ns; st->n_i++; break;
    case PP_ACT_W: st->sum_w += ns; st->n_w++; break;
    default: break;
    }
}

/* A rank's spans for recs of step `step`: GPU start and end from CUPTI's
 * records of the block where it has them (cu != NULL), else from the CUDA
 * events; a WAIT span where the GPU idled before a transfer.  Returns how
 * many of its F/B/I/W blocks had CUPTI records. */
static int
emit_gpu_spans (PpRun *run, PpRunRank *rk, const GpuRec *recs, int n, int step, PpCupti *cu)
{
  int64_t prev_end = -1;
  int timed = 0;

  for (int i = 0; i < n; i++)
    {
      const GpuRec *r = &recs[i];
      int64_t s0 = r->t[0], s1 = r->t[2];
#ifdef PP_HAVE_CUPTI
      int64_t cs, ce;
      if (cu != NULL && r->block != 0 && pp_cupti_block_gpu_time (cu, r->block, &cs, &ce, NULL))
        {
          s0 = cs;
          s1 = ce;
          timed += r->works > 0;
        }
#else
      (void) cu;
#endif
      if (s1 < s0)
        s1 = s0;
      if (r->peer >= 0 && prev_end >= 0 && s0 - prev_end > PP_RUN_WAIT_RECORD_NS)
        pp_run_record_step_span (run, step, rk->rank, r->stage, r->mb, PP_SPAN_WAIT, prev_end, s0, r->peer);
      pp_run_record_step_span (run, step, rk->rank, r->stage, r->mb, r->span, s0, s1, r->peer);
      if (s1 > prev_end)
        prev_end = s1;
    }
  return timed;
}

/* The rank's previous step's spans, now that CUPTI has its records (a
 * flush was asked for after that step's work completed). */
static void
emit_pending_spans (PpRun *run, PpRunRank *rk)
{
  PpCupti *cu = run_cupti (run);
  if (CR (rk)->n_pend == 0)
    return;
#ifdef PP_HAVE_CUPTI
  /* served within milliseconds; past a second CUPTI is stuck, and the
   * events' times are better than partial kernel times */
  if (!pp_cupti_wait_flush (cu, CR (rk)->pend_ticket, 1000000000LL))
    cu = NULL;
#endif
  int timed = emit_gpu_spans (run, rk, CR (rk)->pend, CR (rk)->n_pend, CR (rk)->pend_step, cu);
#ifdef PP_HAVE_CUPTI
  /* A safety net under the launch/copy-only API records: blocks that got no
   * kernel at all mean CUPTI did not correlate those calls; record every
   * call from now on (the spans lost so far keep the events' times). */
  int blocks = 0;
  for (int i = 0; i < CR (rk)->n_pend; i++)
    blocks += CR (rk)->pend[i].works > 0 && pp_cupti_block_kept (cu, CR (rk)->pend[i].block);
  if (cu != NULL && blocks >= 4 && timed == 0)
    (void) pp_cupti_record_all_api (cu);
#else
  (void) timed;
#endif
  CR (rk)->n_pend = 0;
}

/* After the step has completed on the device: its times from the CUDA
 * events (the rank's busy / wait times and window, the measured costs), its
 * spans (now, or at the next step's end with CUPTI's kernel times), and the
 * losses of its tail stages. */
static PpStatus
gpu_finalize (PpRun *run, PpRunRank *rk, PpError *err)
{
  PpCupti *cu = run_cupti (run);
  int64_t prev_end = -1, busy = 0, wait = 0, first = -1, last = -1;

  for (int i = 0; i < CR (rk)->n_recs; i++)
    {
      GpuRec *r = &CR (rk)->recs[i];
      /* ev[0] start; works: ev[1] end of the first, ev[2] of the second;
       * transfers: ev[2] their end */
      int64_t t0 = pp_gpu_event_ns (GPU (run), rk->rank, r->ev[0]);
      int64_t t1 = r->works >= 1 ? pp_gpu_event_ns (GPU (run), rk->rank, r->ev[1]) : 0;
      int64_t t2 = r->works != 1 ? pp_gpu_event_ns (GPU (run), rk->rank, r->ev[2]) : t1;
      if (r->works == 0)
        t1 = t2;
      if (t1 < t0)
        t1 = t0;
      if (t2 < t1)
        t2 = t1;
      r->t[0] = t0;
      r->t[1] = t1;
      r->t[2] = t2;
      if (r->peer >= 0 && prev_end >= 0 && t0 - prev_end > PP_RUN_WAIT_RECORD_NS)
        wait += t0 - prev_end;
      if (r->works == 0)
        {
          PpRunStage *st = &run->stages[r->stage];
          st->sum_x += (double) (t2 - t0);
          st->n_x++;
        }
      else
        {
          busy += t2 - t0;
          add_cost (&run->stages[r->work_stage[0]], r->work_kind[0], (double) (t1 - t0));
          if (r->works == 2)
            add_cost (&run->stages[r->work_stage[1]], r->work_kind[1], (double) (t2 - t1));
        }
      if (first < 0 || t0 < first)
        first = t0;
      if (t2 > last)
        last = t2;
      if (t2 > prev_end)
        prev_end = t2;
    }
  rk->busy_ns = busy;
  rk->wait_ns = wait;
  rk->first_ns = first;
  rk->last_ns = last;

  if (cu == NULL)
    (void) emit_gpu_spans (run, rk, CR (rk)->recs, CR (rk)->n_recs, run->step, NULL);
  else
    {
      emit_pending_spans (run, rk);
      memcpy (CR (rk)->pend, CR (rk)->recs, (size_t) CR (rk)->n_recs * sizeof *CR (rk)->recs);
      CR (rk)->n_pend = CR (rk)->n_recs;
      CR (rk)->pend_step = run->step;
      CR (rk)->pend_ticket = CUDA_RUN (run)->flush_ticket;
    }

  for (int i = 0; i < rk->n_stages; i++)
    {
      PpRunStage *st = &run->stages[rk->stages[i]];
      size_t n = (size_t) st->n_mb * (size_t) run->rows;
      float *h;
      PpStatus rc;
      if (st->next >= 0)
        continue;
      if ((h = malloc (n * sizeof (float))) == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      rc = cuda_check (err, "copying the losses from the GPU",
                       cudaMemcpy (h, CS (st)->d_losses, n * sizeof (float), cudaMemcpyDeviceToHost));
      for (int k = 0; rc == PP_OK && k < st->n_mb; k++)
        {
          double sum = 0;
          for (int j = 0; j < run->rows; j++)
            sum += h[(size_t) k * (size_t) run->rows + (size_t) j];
          run->loss_mb[st->mb_lo + k] = sum;
        }
      free (h);
      if (rc != PP_OK)
        return rc;
    }
  return PP_OK;
}

/* Every rank's spans still waiting for CUPTI, after a forced flush.  Ranks
 * parked (between steps, or joined). */
static void
emit_all_pending_spans (PpRun *run)
{
  int any = 0;
  for (int r = 0; r < run->P; r++)
    any |= CR (&run->ranks[r]) != NULL && CR (&run->ranks[r])->n_pend > 0;
  if (!any)
    return;
#ifdef PP_HAVE_CUPTI
  (void) pp_cupti_flush (run_cupti (run), NULL);
#endif
  for (int r = 0; r < run->P; r++)
    if (CR (&run->ranks[r]) != NULL)   /* a rank of this process */
      emit_pending_spans (run, &run->ranks[r]);
}

static void
run_rank_optimizer_gpu (PpRun *run, PpRunRank *rk)
{
  PpError err;
  PpStatus rc;
  int64_t t0;

  memset (&err, 0, sizeof err);
  t0 = pp_probe_now_ns ();
  rc = pp_gpu_bind (GPU (run), rk->rank, &err);
  uint64_t tag = rc == PP_OK ? tag_step_work (run, rk->rank) : 0;
  for (int i = 0; i < rk->n_stages && rc == PP_OK; i++)
    {
      PpGpuChunk *c = CS (&run->stages[rk->stages[i]])->gchunk;
      rc = pp_gpu_chunk_adamw (c, run->cfg.lr, 0.9f, 0.999f, 1e-8f, run->cfg.weight_decay,
                               run->step + 1, &err);
      if (rc == PP_OK)
        rc = pp_gpu_chunk_zero_grads (c, &err);
    }
  if (rc == PP_OK)
    rc = gpu_finalize (run, rk, &err);   /* copies the losses */
  tag_pop (run, tag);
  if (rc == PP_OK)
    rc = gpu_step_end (run, rk, &err);
  if (rc != PP_OK)
    {
      pp_run_fail (run, &err);
      return;
    }
  pp_run_end_rank_step (run, rk, t0, pp_probe_now_ns ());
}

/* DualPipe: every copy of a part gets the sum of the copies' gradients.
 * Main thread, ranks parked, streams idle. */
static PpStatus
gpu_sum_copies_streams (PpRun *run, PpError *err)
{
  PpStatus rc = PP_OK;
  for (int p = 0; p < run->n_parts && run->n_chains > 1 && rc == PP_OK; p++)
    {
      PpRunStage *s0 = &run->stages[run->chain_stage[p]];
      uint64_t tag;
      if ((rc = pp_gpu_bind (GPU (run), s0->rank, err)) != PP_OK)
        return rc;
      tag = tag_step_work (run, s0->rank);
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        rc = pp_gpu_chunk_add_grads (CS (s0)->gchunk,
                                     CS (&run->stages[run->chain_stage[c * run->n_parts + p]])->gchunk, err);
      tag_pop (run, tag);
      if (rc == PP_OK)
        rc = cuda_check (err, "summing gradient copies", cudaStreamSynchronize (rank_stream (run, s0->rank)));
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          PpRunStage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          if ((rc = pp_gpu_bind (GPU (run), sc->rank, err)) != PP_OK)
            break;
          tag = tag_step_work (run, sc->rank);
          rc = pp_gpu_chunk_copy_grads (CS (sc)->gchunk, CS (s0)->gchunk, err);
          tag_pop (run, tag);
          if (rc == PP_OK)
            rc = cuda_check (err, "copying summed gradients",
                             cudaStreamSynchronize (rank_stream (run, sc->rank)));
        }
    }
  return rc;
}

static PpStatus
gpu_sum_copies (PpRun *run, PpError *err)
{
  PpStatus rc = gpu_sum_copies_streams (run, err);
#ifdef PP_HAVE_CUPTI
  /* Every stream is synchronised: a flush from now on delivers the step's
   * kernels, for its spans at the next step's end.  The flush thread does
   * it while the GPUs work; nobody waits for it now. */
  if (rc == PP_OK)
    CUDA_RUN (run)->flush_ticket = pp_cupti_request_flush (run_cupti (run));
#endif
  return rc;
}

static PpCompute
run_compute (int c)
{
  switch (c)
    {
    case PP_RUN_COMPUTE_FP32: return PP_COMPUTE_FP32;
    case PP_RUN_COMPUTE_BF16: return PP_COMPUTE_BF16;
    default: return PP_COMPUTE_TF32;
    }
}

static void *
dev_alloc (size_t bytes, const char *what, int stage, PpError *err)
{
  void *p = NULL;
  cudaError_t e = cudaMalloc (&p, bytes ? bytes : 16);
  if (e != cudaSuccess)
    {
      (void) cudaGetLastError ();
      pp_error_set (err, PP_ENOMEM, "stage %d: no GPU memory for %s (%.1f MiB): %s", stage, what,
                    (double) bytes / 1048576.0, cudaGetErrorString (e));
      return NULL;
    }
  (void) cudaMemset (p, 0, bytes ? bytes : 16);
  return p;
}

/* The stage's chunk, buffers and events, on its rank's device. */
static PpStatus
setup_stage_gpu (PpRun *run, int i, int first_block, PpError *err)
{
  PpRunStage *st = &run->stages[i];
  size_t rows = (size_t) run->rows, n = (size_t) st->n_mb;
  PpStatus rc;

  if ((st->bk = calloc (1, sizeof (CudaStage))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  if ((rc = pp_gpu_bind (GPU (run), st->rank, err)) != PP_OK)
    return rc;
  CS (st)->gchunk = pp_gpu_chunk_new (run->model, st->part, run->n_parts, first_block,
                                 run->blocks[st->part], run->rows, st->n_mb, run->cfg.recompute,
                                 run_compute (run->cfg.compute), pp_gpu_lt (GPU (run), st->rank),
                                 pp_gpu_stream (GPU (run), st->rank), err);
  if (CS (st)->gchunk == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
  st->in_dim = pp_gpu_chunk_in_dim (CS (st)->gchunk);
  st->out_dim = pp_gpu_chunk_out_dim (CS (st)->gchunk);
  if ((CS (st)->d_in = dev_alloc (n * rows * (size_t) st->in_dim * sizeof (float), "inputs", i, err)) == NULL)
    return PP_ENOMEM;
  if (st->next >= 0)
    {
      if ((CS (st)->d_out = dev_alloc (n * rows * (size_t) st->out_dim * sizeof (float), "outputs", i, err)) == NULL
          || (CS (st)->d_dout = dev_alloc (n * rows * (size_t) st->out_dim * sizeof (float), "output gradients", i, err)) == NULL)
        return PP_ENOMEM;
    }
  else if ((CS (st)->d_labels = dev_alloc (n * rows * sizeof (int32_t), "labels", i, err)) == NULL
           || (CS (st)->d_losses = dev_alloc (n * rows * sizeof (float), "losses", i, err)) == NULL)
    return PP_ENOMEM;
  if (st->prev >= 0
      && (CS (st)->d_din = dev_alloc (n * rows * (size_t) st->in_dim * sizeof (float), "input gradients", i, err)) == NULL)
    return PP_ENOMEM;
  return PP_OK;
}

static void
free_stage_gpu (PpRun *run, PpRunStage *st)
{
  if (GPU (run) == NULL)
    {
      free (st->bk);
      st->bk = NULL;
      return;
    }
  (void) pp_gpu_bind (GPU (run), st->rank, NULL);
  pp_gpu_chunk_free (CS (st)->gchunk);
  cudaFree (CS (st)->d_in);
  cudaFree (CS (st)->d_out);
  cudaFree (CS (st)->d_dout);
  cudaFree (CS (st)->d_din);
  cudaFree (CS (st)->d_labels);
  cudaFree (CS (st)->d_losses);
  free (st->bk);
  st->bk = NULL;
  (void) cudaGetLastError ();
}

/* The rank's timing records (3 events each) and its zero rows. */
static PpStatus
setup_rank_gpu (PpRun *run, PpRunRank *rk, size_t maxdim, PpError *err)
{
  const PpRankActions *ra = &run->sched->rank[rk->rank];
  PpStatus rc;

  if ((rk->bk = calloc (1, sizeof (CudaRank))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  if ((rc = pp_gpu_bind (GPU (run), rk->rank, err)) != PP_OK)
    return rc;
  /* an action is one record, plus a transfer per input it receives (two for
   * OVERLAP_F_B) */
  CR (rk)->cap_recs = 3 * ra->n_actions + 4;
  CR (rk)->recs = calloc ((size_t) CR (rk)->cap_recs, sizeof (GpuRec));
  CR (rk)->pend = calloc ((size_t) CR (rk)->cap_recs, sizeof (GpuRec));
  if (CR (rk)->recs == NULL || CR (rk)->pend == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int i = 0; i < CR (rk)->cap_recs; i++)
    for (int j = 0; j < 3; j++)
      if ((rc = cuda_check (err, "cudaEventCreate", cudaEventCreate (&CR (rk)->recs[i].ev[j]))) != PP_OK)
        return rc;
  if ((CR (rk)->d_zeros = dev_alloc ((size_t) run->rows * maxdim * sizeof (float), "zero rows", -1, err)) == NULL)
    return PP_ENOMEM;
  return PP_OK;
}

static void
free_rank_gpu (PpRun *run, PpRunRank *rk)
{
  if (GPU (run) == NULL)
    {
      free (rk->bk);
      rk->bk = NULL;
      return;
    }
  (void) pp_gpu_bind (GPU (run), rk->rank, NULL);
  if (CR (rk)->recs != NULL)
    for (int i = 0; i < CR (rk)->cap_recs; i++)
      for (int j = 0; j < 3; j++)
        if (CR (rk)->recs[i].ev[j] != NULL)
          cudaEventDestroy (CR (rk)->recs[i].ev[j]);
  free (CR (rk)->recs);
  free (CR (rk)->pend);
  cudaFree (CR (rk)->d_zeros);
  free (rk->bk);
  rk->bk = NULL;
  (void) cudaGetLastError ();
}

static void
recover_gpu (PpRun *run)
{
  for (int r = 0; r < run->P; r++)
    if (run->ranks[r].bk != NULL   /* a rank of this process */
        && (pp_gpu_bind (GPU (run), r, NULL) != PP_OK
            || cudaStreamSynchronize (rank_stream (run, r)) != cudaSuccess))
      run->broken = 1;
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      PpRunStage *st = &run->stages[i];
      if (st->bk == NULL)
        continue;   /* another process's */
      float *zeros = CR (&run->ranks[st->rank])->d_zeros;
      if (pp_gpu_bind (GPU (run), st->rank, NULL) != PP_OK)
        {
          run->broken = 1;
          continue;
        }
      for (int k = 0; k < st->n_mb; k++)
        {
          uint8_t m = st->mb_state[k];
          PpStatus rc = PP_OK;
          if (!(m & PP_MB_FWD) || (m & PP_MB_DONE))
            continue;
          if (m & PP_MB_INPUT)
            rc = pp_gpu_chunk_backward_weight (CS (st)->gchunk, st->mb_lo + k, NULL);
          else
            rc = pp_gpu_chunk_backward (CS (st)->gchunk, st->mb_lo + k, st->next >= 0 ? zeros : NULL,
                                        CS (st)->d_din ? CS (st)->d_din + (size_t) k * (size_t) run->rows * (size_t) st->in_dim : NULL,
                                        1.0f, NULL);
          if (rc != PP_OK)
            run->broken = 1;
        }
      if (pp_gpu_chunk_zero_grads (CS (st)->gchunk, NULL) != PP_OK
          || cudaStreamSynchronize (rank_stream (run, st->rank)) != cudaSuccess)
        run->broken = 1;
    }
  (void) cudaGetLastError ();
}

/* ---- the backend's functions ------------------------------------------ */

static PpStatus
cuda_open (PpRun *run, PpError *err)
{
  const PpRunConfig *cfg = &run->cfg;
  PpGpuPartition want = cfg->gpu_partition == PP_RUN_GPU_GREEN ? PP_GPU_PARTITION_GREEN
                        : cfg->gpu_partition == PP_RUN_GPU_STREAMS ? PP_GPU_PARTITION_STREAMS
                        : PP_GPU_PARTITION_AUTO;

  if ((run->bk = calloc (1, sizeof (CudaRun))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  if (run->transport->process_rank >= 0)
    {
      /* ranks as processes: one GPU each, stage data through a transport
       * that moves device data (nccl over mpi), made before any GPU work */
      PpTransport *d;
      if (run->n_chains > 1)
        return pp_error_set (err, PP_EUNSUPPORTED,
                             "%s keeps two copies of each part on different ranks, and the CUDA "
                             "backend sums their gradients within one process; run its GPU ranks as "
                             "threads (no mpirun)", run->sched->name);
      if (run->transport->ops->for_device == NULL)
        return pp_error_set (err, PP_EUNSUPPORTED,
                             "the CUDA backend runs ranks as processes only over NCCL; the %s "
                             "transport has no device half", run->transport->ops->name);
      if ((d = run->transport->ops->for_device (run->transport, err)) == NULL)
        return err != NULL && err->status != PP_OK ? err->status : PP_EUNSUPPORTED;
      CUDA_RUN (run)->host = run->transport;
      run->transport = d;
      GPU (run) = pp_gpu_open_rank (run->P, d->process_rank, d->device, cfg->probe, !cfg->no_cupti,
                                    err);
    }
  else
    GPU (run) = pp_gpu_open (run->P, want, cfg->probe, !cfg->no_cupti, err);
  if (GPU (run) == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_EIO;
  {
    /* the cores the rank threads, the main thread, the probe's drain
     * thread and CUPTI's two (its flush thread, its own worker) leave
     * free: a rank thread that loses its core stops feeding its GPU */
    long ncpu = pp_run_usable_cores ();
    long n = ncpu - (run->transport->process_rank >= 0 ? 1 : run->P) - 1 - (cfg->probe != NULL) - 2 * (run_cupti (run) != NULL);
    if (n < 1) n = 1;
    if (n > 16) n = 16;
    if ((run->pool = pp_batch_pool_new (run->model, (int) n, err)) == NULL)
      return err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
  }
  if (CUDA_RUN (run)->host == NULL)
    {
      /* ranks as threads: the local hand-off orders the launches, the
       * device transport moves the data (copies, NCCL edges) */
      PpTransport *d = pp_transport_new_device (run->transport, GPU (run), cfg->gpu_transport, err);
      if (d == NULL)
        return err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
      CUDA_RUN (run)->host = run->transport;
      run->transport = d;
    }
  return PP_OK;
}

static size_t
cuda_stage_params (PpRun *run, int stage)
{
  return pp_gpu_chunk_n_params (CS (&run->stages[stage])->gchunk);
}

static void
cuda_memory (PpRun *run, int stage, size_t *bytes, int *inflight)
{
  const CudaStage *c = CS (&run->stages[stage]);
  *bytes = pp_gpu_chunk_activation_bytes (c->gchunk);
  *inflight = pp_gpu_chunk_inflight (c->gchunk);
}

static void
cuda_copy_params (PpRun *run, int stage, float *out, size_t n)
{
  PpRunStage *st = &run->stages[stage];
  if (st->bk == NULL)
    {
      memset (out, 0, n * sizeof (float));   /* another process's: summed in */
      return;
    }
  (void) pp_gpu_bind (GPU (run), st->rank, NULL);
  (void) pp_gpu_chunk_copy_params_to_host (CS (st)->gchunk, out, NULL);
}

static const char *
cuda_device_note (const PpRun *run)
{
  return run->bk != NULL && GPU (run) != NULL ? pp_gpu_describe (GPU (run)) : "";
}

static const char *
cuda_timing_note (const PpRun *run)
{
  return run->bk != NULL && GPU (run) != NULL ? pp_gpu_cupti_note (GPU (run)) : "";
}

static void
cuda_flush_records (PpRun *run)
{
#ifdef PP_HAVE_CUPTI
  if (run->bk != NULL && GPU (run) != NULL)
    {
      (void) pp_cupti_flush (pp_gpu_cupti (GPU (run)), NULL);
      if (run->ranks != NULL)
        emit_all_pending_spans (run);
    }
#endif
}

static void
cuda_ranks_joined (PpRun *run)
{
  /* the last step's spans, before CUPTI stops */
  if (run->bk != NULL && GPU (run) != NULL)
    emit_all_pending_spans (run);
}

static const char *
cuda_span_name (const PpRun *run, uint32_t id)
{
#ifdef PP_HAVE_CUPTI
  if (run->bk != NULL && GPU (run) != NULL)
    return pp_cupti_name (pp_gpu_cupti (GPU (run)), id);
#endif
  return NULL;
}

static uint64_t
cuda_dropped (const PpRun *run)
{
#ifdef PP_HAVE_CUPTI
  if (run->bk != NULL && GPU (run) != NULL)
    return pp_cupti_dropped (pp_gpu_cupti (GPU (run)));
#endif
  return 0;
}

static int
cuda_rank_sms (const PpRun *run, int rank)
{
  return run->bk != NULL && GPU (run) != NULL ? pp_gpu_sms (GPU (run), rank) : 0;
}

static void
cuda_close (PpRun *run)
{
  if (run->bk == NULL)
    return;
  if (CUDA_RUN (run)->host != NULL)
    {
      /* the device half (NCCL edges or links) goes before the devices close */
      pp_transport_free (run->transport);
      run->transport = CUDA_RUN (run)->host;
    }
  pp_gpu_close (GPU (run));
  free (run->bk);
  run->bk = NULL;
}

static const PpRunBackend cuda_backend = {
  .name = "cuda",
  .open = cuda_open,
  .setup_stage = setup_stage_gpu,
  .stage_params = cuda_stage_params,
  .setup_rank = setup_rank_gpu,
  .rank_step_begin = gpu_step_begin,
  .rank_step_end = gpu_step_end,
  .batch_rows = cuda_batch_rows,
  .receive = cuda_receive,
  .action_begin = cuda_action_begin,
  .compute = cuda_compute,
  .work_end = cuda_work_end,
  .action_end = cuda_action_end,
  .memory = cuda_memory,
  .sum_copies = gpu_sum_copies,
  .optimizer = run_rank_optimizer_gpu,
  .recover = recover_gpu,
  .copy_params = cuda_copy_params,
  .device_note = cuda_device_note,
  .timing_note = cuda_timing_note,
  .flush_records = cuda_flush_records,
  .span_name = cuda_span_name,
  .dropped = cuda_dropped,
  .rank_sms = cuda_rank_sms,
  .ranks_joined = cuda_ranks_joined,
  .free_rank = free_rank_gpu,
  .free_stage = free_stage_gpu,
  .close = cuda_close,
};

const PpRunBackend *
pp_run_backend_cuda (void)
{
  return &cuda_backend;
}

#else /* !PP_HAVE_CUDA */

const PpRunBackend *
pp_run_backend_cuda (void)
{
  return NULL;
}

#endif
