/* pp-run.c — runs a schedule on its ranks: threads of this process over the
 * local transport, or one rank per process over MPI.
 *
 * Layout
 * ------
 * Every schedule stage gets one chunk (PpChunk) of the model part its chain
 * position names.  Stage s owns two arrays of per-micro-batch buffers, both
 * allocated once and reused every step:
 *   out[k]  the forward output of micro-batch mb_lo + k (what stage_next reads),
 *   din[k]  the input gradient of it (what stage_prev's backward reads).
 * A buffer of micro-batch k is written by exactly one action per step and
 * read by its consumer in place (no copy); a chunk keeps its input pointer
 * until the backward of that micro-batch, which is fine because nothing
 * overwrites a buffer before the next step.  Readiness of those buffers is a
 * flag per micro-batch under the producer stage's mutex, with a condvar that
 * consumers wait on — the "bounded per-edge queue keyed by micro-batch".
 * That hand-off is the transport's (pp-transport.h): the local one reads
 * the producer's buffer in place; the MPI one, with one rank per process,
 * sends it and hands the consumer its received copy.  In a process that
 * runs one rank of an MPI job, only that rank's stages have chunks and
 * buffers, and what the reports need of the other ranks is summed over
 * the processes at every step's end.
 *
 * Threads
 * -------
 * One thread per rank, parked on run->start between steps.  pp_run_step
 * bumps the generation, and waits on run->done until every rank reports.
 * Waits are timed (10 ms) so that a stop flag set from a signal handler
 * (which cannot signal a condvar) is noticed; a failure or a stop sets
 * run->abort and broadcasts every stage condvar.
 *
 * After an abandoned step (stop or failure) the micro-batches still held by
 * the chunks are released by running their backward with a zero gradient,
 * and all gradients are zeroed, so the run can step again (or be freed).
 */
#define _GNU_SOURCE
#include "pp-run.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pp-batch-pool.h"
#include "pp-transport.h"
#include "pp-kernels.h"

#ifdef PP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "pp-chunk-cuda.h"
#include "pp-gpu.h"
#ifdef PP_HAVE_CUPTI
#include "pp-cupti.h"
#endif
#endif

#define WAIT_POLL_NS     10000000LL /* re-check stop/abort while waiting */
#define WAIT_RECORD_NS   1000LL     /* shorter waits are not worth a span */
#define CLOCK_EVERY_NS   2000000000LL /* clocks drift: measure them again this often */

enum { MB_FWD = 1, MB_INPUT = 2, MB_DONE = 4 };

/* What a micro-batch has been through once a work of this kind ran on it
 * (what recover() must undo after an abandoned step). */
static uint8_t
work_done_bits (int kind)
{
  switch (kind)
    {
    case PP_ACT_F: return MB_FWD;
    case PP_ACT_B: return MB_INPUT | MB_DONE;
    case PP_ACT_I: return MB_INPUT;
    case PP_ACT_W: return MB_DONE;
    default: return 0;
    }
}

typedef struct {
  int      rank, part, chain, prev, next;
  int      mb_lo, mb_hi, n_mb;
  int      in_dim, out_dim;
  PpChunk *chunk;
  float   *out;           /* [n_mb][rows * out_dim], NULL on a tail */
  float   *din;           /* [n_mb][rows * in_dim], NULL on a head */

  uint8_t *mb_state;      /* [n_mb] MB_*, touched by the owning rank only */

  /* measured: sums of ns and counts over all steps (owning rank only) */
  double   sum_f, sum_b, sum_i, sum_w, sum_x;
  long     n_f, n_b, n_i, n_w, n_x;

#ifdef PP_HAVE_CUDA
  /* CUDA backend: device buffers on the stage's rank, [n_mb][rows * dim] */
  PpGpuChunk *gchunk;
  float      *d_out, *d_din;    /* produced here (NULL on a tail / head) */
  float      *d_in;             /* head: the batch rows; else prev's out, copied */
  float      *d_dout;           /* next's din, copied (NULL on a tail) */
  int32_t    *d_labels;         /* tail */
  float      *d_losses;         /* tail: per-row losses */
  cudaEvent_t *ev_out, *ev_din; /* [n_mb]: the event (a GpuRec's, not owned) recorded
                                 * once out / din is written, set before publishing */
  PpGpuEdge  *edge_f, *edge_b;  /* NCCL edges receiving from prev / next, or NULL */
#endif
} Stage;

#ifdef PP_HAVE_CUDA
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
#endif

typedef struct {
  struct _PpRun *run;
  int            rank;
  pthread_t      thread;
  int            started;
  int            completed;  /* ran every action of the step */
  int64_t        busy_ns, wait_ns, first_ns, last_ns;
  /* of the last finished step, for pp_run_rank_times */
  int64_t        last_busy, last_wait, last_first, last_last;
  int           *stages;     /* stages this rank holds */
  int            n_stages;
#ifdef PP_HAVE_CUDA
  GpuRec        *recs;       /* [cap_recs] with their events */
  int            n_recs, cap_recs;
  /* With CUPTI, a step's spans go out at the next step's end (or when the
   * run flushes or ends), once a flush requested after the step has
   * delivered its kernels: no rank waits for CUPTI.  [cap_recs], times set */
  GpuRec        *pend;
  int            n_pend, pend_step;
  uint64_t       pend_ticket;
  float         *d_zeros;    /* [rows * max dim] on the rank's device */
#endif
} Rank;

struct _PpRun {
  PpRunConfig  cfg;
  const PpSchedule *sched;
  PpModel     *model;
  int          P, M, rows, n_parts, n_chains;
  int         *blocks;       /* [n_parts] */
  int         *chain_stage;  /* [n_chains * n_parts]: stage at (chain, position) */
  Stage       *stages;       /* [n_stages] */
  Rank        *ranks;        /* [P] */
  float       *x;            /* [batch * in_dim] */
  int32_t     *labels;       /* [batch] */
  /* The next step's batch, made by the main thread while the ranks take
   * their optimizer step, so no rank waits for data at the next step's start. */
  float       *x_next;
  int32_t     *labels_next;
  int          next_step;    /* the step x_next holds, -1 if none */
  float       *zeros;        /* [rows * max dim] for releasing abandoned micro-batches */
  double      *loss_mb;      /* [M] loss sum per micro-batch */
  int          step;         /* steps completed */
  int          broken;

  pthread_mutex_t mu;
  pthread_cond_t  start, done;
  unsigned long   gen;
  int             remaining;
  int             quit;
  int             task;      /* what a wake-up asks of the ranks: TASK_* */
  atomic_int      abort;
  int             failed;
  PpError         first_err;
  int             gpu_mode;   /* cfg.backend == PP_BACKEND_CUDA */
  uint64_t        flush_ticket;/* GPU: the CUPTI flush asked for after this step */
  PpTransport    *transport;  /* stage boundaries (cfg.transport, or our local one) */
  int             own_transport;
  int             n_local;    /* ranks this process runs */
  size_t         *part_params;/* [n_parts]: parameters of each part (all processes') */
  /* What the reports give, for every rank and stage of the job: this
   * process's values, summed over the processes at each step's end. */
  double         *shared_rank;/* [P * 4]: busy, wait, first + 1, last + 1 of the last step */
  double         *shared_cost;/* [n_stages * 10]: sum_f,b,i,w,x then n_f,b,i,w,x */
  /* This process's clock against rank 0's (pp_transport clock_offset),
   * measured at the start and again every CLOCK_EVERY_NS of rank 0's. */
  int64_t         clock_offset, clock_rtt, clock_measured_at;
  int             clock_generation;
  PpBatchPool    *pool;       /* GPU: makes the next batch while the GPUs run */
#ifdef PP_HAVE_CUDA
  PpGpu          *gpu;
  float          *h_losses;   /* [rows] host copy of a micro-batch's losses */
#endif
};

static void
cond_init_monotonic (pthread_cond_t *cv)
{
  pthread_condattr_t attr;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (cv, &attr);
  pthread_condattr_destroy (&attr);
}

static bool
stop_requested (const PpRun *run)
{
  /* an atomic load: the flag may be set by a signal handler or, as the
   * tests do, by another thread */
  return run->cfg.stop != NULL && __atomic_load_n (run->cfg.stop, __ATOMIC_RELAXED) != 0;
}

static void
abort_step (PpRun *run)
{
  atomic_store (&run->abort, 1);
  run->transport->ops->interrupt (run->transport);
}

static PpStatus measure_clock (PpRun *run, PpError *err);

/* The transport's question while it waits. */
static bool
step_abandoned (void *user)
{
  PpRun *run = user;
  return atomic_load (&run->abort) || stop_requested (run);
}

static void
fail (PpRun *run, const PpError *e)
{
  pthread_mutex_lock (&run->mu);
  if (!run->failed)
    {
      run->failed = 1;
      run->first_err = *e;
    }
  pthread_mutex_unlock (&run->mu);
  abort_step (run);
}

static void
deadline_after (struct timespec *ts, int64_t ns)
{
  clock_gettime (CLOCK_MONOTONIC, ts);
  ts->tv_nsec += ns % 1000000000LL;
  ts->tv_sec += ns / 1000000000LL + ts->tv_nsec / 1000000000LL;
  ts->tv_nsec %= 1000000000LL;
}

static void
record_step_span (PpRun *run, int step, int rank, int stage, int mb, int kind, int64_t t0,
                  int64_t t1, int peer)
{
  PpSpan sp;

  if (run->cfg.probe == NULL)
    return;
  memset (&sp, 0, sizeof sp);
  sp.start_ns = t0;
  sp.end_ns = t1;
  sp.rank = rank;
  sp.stage = stage;
  sp.microbatch = mb;
  sp.step = step;
  sp.kind = (uint16_t) kind;
  sp.device = 0xffff;
  sp.stream = 0;
  sp.peer_rank = peer;
  pp_probe_record_span (run->cfg.probe, &sp);
}

static void
record_span (PpRun *run, int rank, int stage, int mb, int kind, int64_t t0, int64_t t1,
             int peer)
{
  record_step_span (run, run->step, rank, stage, mb, kind, t0, t1, peer);
}

static void
record_counter (PpRun *run, int rank, int kind, double value, int64_t t)
{
  PpCounter c;

  if (run->cfg.probe == NULL)
    return;
  memset (&c, 0, sizeof c);
  c.time_ns = t;
  c.value = value;
  c.rank = rank;
  c.step = run->step;
  c.kind = (uint16_t) kind;
  pp_probe_record_counter (run->cfg.probe, &c);
}

/* Waits until producer stage `ps` has published micro-batch mb (its forward
 * output if grad == 0, its input gradient if grad == 1), through the
 * transport; *data then points at it.  PP_OK when ready; PP_EINVAL with err
 * filled for a wait that can never end (same rank); PP_EIO without a
 * message when the step was abandoned meanwhile. */
static PpStatus
wait_ready (PpRun *run, Rank *rk, int ps, int grad, int stage, int mb, const float **data,
            PpError *err)
{
  int64_t t0 = pp_probe_now_ns (), t1;
  const float *got = NULL;
  PpStatus rc = run->transport->ops->acquire (run->transport, ps, grad, mb, &got, err);

  t1 = pp_probe_now_ns ();
  rk->wait_ns += t1 - t0;
  if (t1 - t0 > WAIT_RECORD_NS && !run->gpu_mode && rc != PP_EINVAL)
    record_span (run, rk->rank, stage, mb, PP_SPAN_WAIT, t0, t1, run->stages[ps].rank);
  if (data != NULL)
    *data = got;
  return rc;
}

/* Hands what stage produced for mb to its consumer (data: n floats, or
 * NULL where the data moves on the GPU). */
static void
publish (PpRun *run, int stage, int grad, int mb, const float *data, size_t n)
{
  run->transport->ops->publish (run->transport, stage, grad, mb, data, n);
}

/* ---- the halves of an action: get inputs (may wait), compute, publish ---- */

typedef struct {
  int           kind;     /* PP_ACT_F, B, I, W */
  int           stage, mb, k;
  const float  *input;    /* F: input rows; B/I: dout (NULL on a tail) */
  const int32_t *labels;
} Work;

/* The checks every action passes before it runs; fills w's identity. */
static PpStatus
check_action (PpRun *run, Rank *rk, int kind, int stage, int mb, Work *w, PpError *err)
{
  const PpSchedule *s = run->sched;
  Stage *st;

  if (stage < 0 || stage >= s->n_stages || s->stage_rank[stage] != rk->rank)
    return pp_error_set (err, PP_EINVAL, "rank %d: stage %d is not on this rank", rk->rank, stage);
  st = &run->stages[stage];
  if (mb < st->mb_lo || mb >= st->mb_hi)
    return pp_error_set (err, PP_EINVAL, "stage %d does not see micro-batch %d", stage, mb);
  if (kind != PP_ACT_F && kind != PP_ACT_B && kind != PP_ACT_I && kind != PP_ACT_W)
    return pp_error_set (err, PP_EINVAL, "rank %d: cannot run action kind %s",
                         rk->rank, pp_action_kind_name ((PpActionKind) kind));
  w->kind = kind;
  w->stage = stage;
  w->mb = mb;
  w->k = mb - st->mb_lo;
  w->input = NULL;
  w->labels = NULL;
  return PP_OK;
}

static PpStatus
prepare (PpRun *run, Rank *rk, int kind, int stage, int mb, Work *w, PpError *err)
{
  Stage *st;
  PpStatus rc;

  if ((rc = check_action (run, rk, kind, stage, mb, w, err)) != PP_OK)
    return rc;
  st = &run->stages[stage];
  switch (kind)
    {
    case PP_ACT_F:
      if (st->prev < 0)
        w->input = run->x + (size_t) mb * (size_t) run->rows * (size_t) st->in_dim;
      else
        {
          if ((rc = wait_ready (run, rk, st->prev, 0, stage, mb, &w->input, err)) != PP_OK)
            return rc;
        }
      if (st->next < 0)
        w->labels = run->labels + (size_t) mb * (size_t) run->rows;
      return PP_OK;
    case PP_ACT_B:
    case PP_ACT_I:
      if (st->next >= 0
          && (rc = wait_ready (run, rk, st->next, 1, stage, mb, &w->input, err)) != PP_OK)
        return rc;
      return PP_OK;
    case PP_ACT_W:
      return PP_OK;
    default:
      return pp_error_set (err, PP_EINVAL, "rank %d: cannot run action kind %s",
                           rk->rank, pp_action_kind_name ((PpActionKind) kind));
    }
}

typedef PpStatus (*PrepareFn) (PpRun *run, Rank *rk, int kind, int stage, int mb, Work *w,
                               PpError *err);

/* The works of an action (one; two for OVERLAP_F_B), their inputs got
 * ready by `prep` (which may wait).  *n = 0 for an action with nothing to
 * compute: SEND/RECV are implicit in the transports, OPT runs at the step's
 * end. */
static PpStatus
prepare_action (PpRun *run, Rank *rk, const PpAction *a, PrepareFn prep, Work w[2], int *n,
                PpError *err)
{
  PpStatus rc;

  *n = 0;
  switch (a->kind)
    {
    case PP_ACT_F: case PP_ACT_B: case PP_ACT_I: case PP_ACT_W:
      if ((rc = prep (run, rk, a->kind, a->stage, a->microbatch, &w[0], err)) != PP_OK)
        return rc;
      *n = 1;
      return PP_OK;
    case PP_ACT_OVERLAP_F_B:
      if (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I)
        return pp_error_set (err, PP_EINVAL, "rank %d: OVERLAP_F_B must pair a forward with B or I",
                             rk->rank);
      if ((rc = prep (run, rk, PP_ACT_F, a->stage, a->microbatch, &w[0], err)) != PP_OK
          || (rc = prep (run, rk, a->sub_kind, a->sub_stage, a->sub_microbatch, &w[1], err)) != PP_OK)
        return rc;
      *n = 2;
      return PP_OK;
    default:
      return PP_OK;
    }
}

static PpStatus
compute (PpRun *run, const Work *w, PpError *err)
{
  Stage *st = &run->stages[w->stage];
  size_t rows = (size_t) run->rows;
  float loss_scale = 1.0f / (float) run->cfg.batch;
  PpStatus rc;

  switch (w->kind)
    {
    case PP_ACT_F:
      rc = pp_chunk_forward (st->chunk, w->mb, w->input, w->labels,
                             st->out ? st->out + (size_t) w->k * rows * (size_t) st->out_dim : NULL,
                             st->next < 0 ? &run->loss_mb[w->mb] : NULL, err);
      break;
    case PP_ACT_B:
    case PP_ACT_I:
      {
        float *din = st->din ? st->din + (size_t) w->k * rows * (size_t) st->in_dim : NULL;
        if (w->kind == PP_ACT_B)
          rc = pp_chunk_backward (st->chunk, w->mb, w->input, din, loss_scale, err);
        else
          rc = pp_chunk_backward_input (st->chunk, w->mb, w->input, din, loss_scale, err);
        break;
      }
    case PP_ACT_W:
      rc = pp_chunk_backward_weight (st->chunk, w->mb, err);
      break;
    default:
      return pp_error_set (err, PP_EINVAL, "cannot run action kind %d", w->kind);
    }
  if (rc == PP_OK)
    st->mb_state[w->k] |= work_done_bits (w->kind);
  return rc;
}

static void
after_compute (PpRun *run, const Work *w, int64_t ns)
{
  Stage *st = &run->stages[w->stage];
  size_t n_out = (size_t) run->rows * (size_t) st->out_dim;
  size_t n_in = (size_t) run->rows * (size_t) st->in_dim;

  switch (w->kind)
    {
    case PP_ACT_F:
      st->sum_f += (double) ns; st->n_f++;
      if (st->next >= 0)
        publish (run, w->stage, 0, w->mb, st->out + (size_t) w->k * n_out, n_out);
      break;
    case PP_ACT_B:
      st->sum_b += (double) ns; st->n_b++;
      if (st->prev >= 0)
        publish (run, w->stage, 1, w->mb, st->din + (size_t) w->k * n_in, n_in);
      break;
    case PP_ACT_I:
      st->sum_i += (double) ns; st->n_i++;
      if (st->prev >= 0)
        publish (run, w->stage, 1, w->mb, st->din + (size_t) w->k * n_in, n_in);
      break;
    case PP_ACT_W:
      st->sum_w += (double) ns; st->n_w++;
      break;
    }
}

static int
span_kind (int act)
{
  switch (act)
    {
    case PP_ACT_F: return PP_SPAN_F;
    case PP_ACT_B: return PP_SPAN_B;
    case PP_ACT_I: return PP_SPAN_I;
    case PP_ACT_W: return PP_SPAN_W;
    default: return PP_SPAN_OVERLAP_F_B;
    }
}

static void
record_memory (PpRun *run, Rank *rk, int64_t t)
{
  size_t bytes = 0;
  int inflight = 0;

  if (run->cfg.probe == NULL)
    return;
  for (int i = 0; i < rk->n_stages; i++)
    {
      const Stage *st = &run->stages[rk->stages[i]];
#ifdef PP_HAVE_CUDA
      if (run->gpu_mode)
        {
          bytes += pp_gpu_chunk_activation_bytes (st->gchunk);
          inflight += pp_gpu_chunk_inflight (st->gchunk);
          continue;
        }
#endif
      bytes += pp_chunk_activation_bytes (st->chunk);
      inflight += pp_chunk_inflight (st->chunk);
    }
  record_counter (run, rk->rank, PP_COUNTER_ACTIVATION_BYTES, (double) bytes, t);
  record_counter (run, rk->rank, PP_COUNTER_INFLIGHT, (double) inflight, t);
}

/* The end of a rank's step: its optimizer span [t0, t1] and the times
 * pp_run_rank_times and pp_run_rank_window report until the next one. */
static void
end_rank_step (PpRun *run, Rank *rk, int64_t t0, int64_t t1)
{
  if (rk->n_stages > 0)
    record_span (run, rk->rank, -1, -1, PP_SPAN_OPT, t0, t1, -1);
  rk->last_busy = rk->busy_ns;
  rk->last_wait = rk->wait_ns;
  rk->last_first = rk->first_ns;
  rk->last_last = rk->last_ns;
}

/* Runs one action.  PP_EIO without a message: the step was abandoned. */
static PpStatus
run_action (PpRun *run, Rank *rk, const PpAction *a, PpError *err)
{
  Work w[2];
  int n = 0;
  int64_t t0, tm, t1;
  PpStatus rc;

  if ((rc = prepare_action (run, rk, a, prepare, w, &n, err)) != PP_OK || n == 0)
    return rc;

  t0 = pp_probe_now_ns ();
  if ((rc = compute (run, &w[0], err)) != PP_OK)
    return rc;
  tm = pp_probe_now_ns ();
  after_compute (run, &w[0], tm - t0);
  t1 = tm;
  if (n == 2)
    {
      if ((rc = compute (run, &w[1], err)) != PP_OK)
        return rc;
      t1 = pp_probe_now_ns ();
      after_compute (run, &w[1], t1 - tm);
    }
  record_span (run, rk->rank, a->stage, a->microbatch, span_kind (a->kind), t0, t1, -1);
  rk->busy_ns += t1 - t0;
  if (rk->first_ns < 0)
    rk->first_ns = t0;
  rk->last_ns = t1;
  record_memory (run, rk, t1);
  return PP_OK;
}

/* ---- the CUDA backend: the same actions, queued on the ranks' streams ---- */

#ifdef PP_HAVE_CUDA
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
  return (cudaStream_t) pp_gpu_stream (run->gpu, rank);
}

static PpCupti *
run_cupti (PpRun *run)
{
#ifdef PP_HAVE_CUPTI
  return pp_gpu_cupti (run->gpu);
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
gpu_rec (Rank *rk, PpError *err)
{
  GpuRec *r;
  if (rk->n_recs >= rk->cap_recs)
    {
      pp_error_set (err, PP_EINVAL, "rank %d: more GPU work in one step than planned (%d records)",
                    rk->rank, rk->cap_recs);
      return NULL;
    }
  r = &rk->recs[rk->n_recs++];
  r->block = 0;
  r->works = 0;
  r->peer = -1;
  return r;
}

/* Copies what producer stage ps published for mb (its forward output, or
 * with grad its input gradient) into stage `stage`'s receive buffer, on this
 * rank's stream, after the producer's event: the stage boundary. */
static PpStatus
gpu_receive (PpRun *run, Rank *rk, int stage, int ps, int grad, int mb, PpError *err)
{
  Stage *st = &run->stages[stage], *p = &run->stages[ps];
  int kp = mb - p->mb_lo, k = mb - st->mb_lo;
  size_t rows = (size_t) run->rows;
  size_t dim = grad ? (size_t) st->out_dim : (size_t) st->in_dim;
  size_t bytes = rows * dim * sizeof (float);
  const float *src = (grad ? p->d_din : p->d_out) + (size_t) kp * rows * dim;
  float *dst = (grad ? st->d_dout : st->d_in) + (size_t) k * rows * dim;
  cudaStream_t s = rank_stream (run, rk->rank);
  int dd = pp_gpu_device (run->gpu, rk->rank), sd = pp_gpu_device (run->gpu, p->rank);
  GpuRec *r;
  cudaError_t e;
  PpStatus rc = PP_OK;

  if ((r = gpu_rec (rk, err)) == NULL)
    return PP_EINVAL;
  r->span = grad ? PP_SPAN_RECV_B : PP_SPAN_RECV_F;
  r->stage = stage;
  r->mb = mb;
  r->peer = p->rank;
  if ((grad ? st->edge_b : st->edge_f) != NULL)
    {
      /* NCCL: the receive itself waits for the send, which waits for the
       * producer's event */
      r->block = tag_push (run, rk->rank, stage, mb, r->span);
      rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[0], s));
      if (rc == PP_OK)
        rc = pp_gpu_edge_transfer (run->gpu, grad ? st->edge_b : st->edge_f, src, dst, rows * dim,
                                   (grad ? p->ev_din : p->ev_out)[kp], err);
      if (rc == PP_OK)
        rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[2], s));
      tag_pop (run, r->block);
      return rc;
    }
  if ((e = cudaStreamWaitEvent (s, (grad ? p->ev_din : p->ev_out)[kp], 0)) != cudaSuccess)
    return cuda_check (err, "cudaStreamWaitEvent", e);
  r->block = tag_push (run, rk->rank, stage, mb, r->span);
  if ((e = cudaEventRecord (r->ev[0], s)) != cudaSuccess)
    rc = cuda_check (err, "cudaEventRecord", e);
  else if (dd == sd)
    rc = cuda_check (err, "stage transfer (device to device)",
                     cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  else
    rc = cuda_check (err, "stage transfer (peer copy)",
                     cudaMemcpyPeerAsync (dst, dd, src, sd, bytes, s));
  if (rc == PP_OK)
    rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[2], s));
  tag_pop (run, r->block);
  return rc;
}

static PpStatus
prepare_gpu (PpRun *run, Rank *rk, int kind, int stage, int mb, Work *w, PpError *err)
{
  Stage *st;
  PpStatus rc;
  size_t rows = (size_t) run->rows;

  if ((rc = check_action (run, rk, kind, stage, mb, w, err)) != PP_OK)
    return rc;
  st = &run->stages[stage];
  switch (kind)
    {
    case PP_ACT_F:
      if (st->prev >= 0)
        {
          if ((rc = wait_ready (run, rk, st->prev, 0, stage, mb, NULL, err)) != PP_OK
              || (rc = gpu_receive (run, rk, stage, st->prev, 0, mb, err)) != PP_OK)
            return rc;
        }
      w->input = st->d_in + (size_t) w->k * rows * (size_t) st->in_dim;
      if (st->next < 0)
        w->labels = st->d_labels + (size_t) w->k * rows;
      return PP_OK;
    case PP_ACT_B:
    case PP_ACT_I:
      if (st->next >= 0)
        {
          if ((rc = wait_ready (run, rk, st->next, 1, stage, mb, NULL, err)) != PP_OK
              || (rc = gpu_receive (run, rk, stage, st->next, 1, mb, err)) != PP_OK)
            return rc;
          w->input = st->d_dout + (size_t) w->k * rows * (size_t) st->out_dim;
        }
      return PP_OK;
    default:
      return PP_OK;
    }
}

/* Queues one work (published by publish_gpu once its end event is recorded). */
static PpStatus
compute_gpu (PpRun *run, Rank *rk, const Work *w, PpError *err)
{
  Stage *st = &run->stages[w->stage];
  size_t rows = (size_t) run->rows;
  float loss_scale = 1.0f / (float) run->cfg.batch;
  PpStatus rc;

  switch (w->kind)
    {
    case PP_ACT_F:
      rc = pp_gpu_chunk_forward (st->gchunk, w->mb, w->input, w->labels,
                                 st->d_out ? st->d_out + (size_t) w->k * rows * (size_t) st->out_dim : NULL,
                                 st->next < 0 ? st->d_losses + (size_t) w->k * rows : NULL, err);
      break;
    case PP_ACT_B:
    case PP_ACT_I:
      {
        float *din = st->d_din ? st->d_din + (size_t) w->k * rows * (size_t) st->in_dim : NULL;
        if (w->kind == PP_ACT_B)
          rc = pp_gpu_chunk_backward (st->gchunk, w->mb, w->input, din, loss_scale, err);
        else
          rc = pp_gpu_chunk_backward_input (st->gchunk, w->mb, w->input, din, loss_scale, err);
        break;
      }
    case PP_ACT_W:
      rc = pp_gpu_chunk_backward_weight (st->gchunk, w->mb, err);
      break;
    default:
      return pp_error_set (err, PP_EINVAL, "cannot run action kind %d", w->kind);
    }
  if (rc == PP_OK)
    st->mb_state[w->k] |= work_done_bits (w->kind);
  return rc;
}

/* The work's output is ready once `done` (recorded after it on the rank's
 * stream) is: consumers wait for that event. */
static void
publish_gpu (PpRun *run, const Work *w, cudaEvent_t done)
{
  Stage *st = &run->stages[w->stage];
  if (w->kind == PP_ACT_F && st->next >= 0)
    {
      st->ev_out[w->k] = done;
      publish (run, w->stage, 0, w->mb, NULL, 0);
    }
  else if ((w->kind == PP_ACT_B || w->kind == PP_ACT_I) && st->prev >= 0)
    {
      st->ev_din[w->k] = done;
      publish (run, w->stage, 1, w->mb, NULL, 0);
    }
}

/* Queues one action; PP_EIO without a message: the step was abandoned. */
static PpStatus
run_action_gpu (PpRun *run, Rank *rk, const PpAction *a, PpError *err)
{
  Work w[2];
  int n = 0;
  GpuRec *r;
  cudaStream_t s = rank_stream (run, rk->rank);
  PpStatus rc;

  if ((rc = prepare_action (run, rk, a, prepare_gpu, w, &n, err)) != PP_OK || n == 0)
    return rc;

  if ((r = gpu_rec (rk, err)) == NULL)
    return PP_EINVAL;
  r->span = span_kind (a->kind);
  r->stage = a->stage;
  r->mb = a->microbatch;
  r->works = n;
  for (int i = 0; i < n; i++)
    {
      r->work_kind[i] = w[i].kind;
      r->work_stage[i] = w[i].stage;
    }
  /* Two events per action (three for OVERLAP_F_B): its start, and the end
   * of each work, which is also what consumers of that work wait for —
   * every event recorded between two blocks widens the gap between them. */
  r->block = tag_push (run, rk->rank, a->stage, a->microbatch, r->span);
  rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[0], s));
  if (rc == PP_OK)
    rc = compute_gpu (run, rk, &w[0], err);
  if (rc == PP_OK)
    rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[1], s));
  if (rc == PP_OK)
    publish_gpu (run, &w[0], r->ev[1]);
  if (rc == PP_OK && n == 2)
    {
      rc = compute_gpu (run, rk, &w[1], err);
      if (rc == PP_OK)
        rc = cuda_check (err, "cudaEventRecord", cudaEventRecord (r->ev[2], s));
      if (rc == PP_OK)
        publish_gpu (run, &w[1], r->ev[2]);
    }
  tag_pop (run, r->block);
  if (rc == PP_OK)
    record_memory (run, rk, pp_probe_now_ns ());
  return rc;
}

/* Start of a step on a rank: its context, its clock reference, and the
 * batch rows its head stages read and the labels its tail stages need. */
static PpStatus
gpu_step_begin (PpRun *run, Rank *rk, PpError *err)
{
  cudaStream_t s = rank_stream (run, rk->rank);
  size_t rows = (size_t) run->rows;
  PpStatus rc;

  rk->n_recs = 0;
  if ((rc = pp_gpu_bind (run->gpu, rk->rank, err)) != PP_OK
      || (rc = pp_gpu_calibrate (run->gpu, rk->rank, err)) != PP_OK)
    return rc;
  uint64_t tag = tag_step_work (run, rk->rank);
  for (int i = 0; i < rk->n_stages && rc == PP_OK; i++)
    {
      Stage *st = &run->stages[rk->stages[i]];
      if (st->prev < 0)
        rc = cuda_check (err, "copying the batch to the GPU",
                         cudaMemcpyAsync (st->d_in, run->x + (size_t) st->mb_lo * rows * (size_t) st->in_dim,
                                          (size_t) st->n_mb * rows * (size_t) st->in_dim * sizeof (float),
                                          cudaMemcpyHostToDevice, s));
      if (rc == PP_OK && st->next < 0)
        rc = cuda_check (err, "copying the labels to the GPU",
                         cudaMemcpyAsync (st->d_labels, run->labels + (size_t) st->mb_lo * rows,
                                          (size_t) st->n_mb * rows * sizeof (int32_t),
                                          cudaMemcpyHostToDevice, s));
    }
  tag_pop (run, tag);
  return rc;
}

static PpStatus
gpu_step_end (PpRun *run, Rank *rk, PpError *err)
{
  return cuda_check (err, "running the step on the GPU",
                     cudaStreamSynchronize (rank_stream (run, rk->rank)));
}

static void
add_cost (Stage *st, int kind, double ns)
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
emit_gpu_spans (PpRun *run, Rank *rk, const GpuRec *recs, int n, int step, PpCupti *cu)
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
      if (r->peer >= 0 && prev_end >= 0 && s0 - prev_end > WAIT_RECORD_NS)
        record_step_span (run, step, rk->rank, r->stage, r->mb, PP_SPAN_WAIT, prev_end, s0, r->peer);
      record_step_span (run, step, rk->rank, r->stage, r->mb, r->span, s0, s1, r->peer);
      if (s1 > prev_end)
        prev_end = s1;
    }
  return timed;
}

/* The rank's previous step's spans, now that CUPTI has its records (a
 * flush was asked for after that step's work completed). */
static void
emit_pending_spans (PpRun *run, Rank *rk)
{
  PpCupti *cu = run_cupti (run);
  if (rk->n_pend == 0)
    return;
#ifdef PP_HAVE_CUPTI
  /* served within milliseconds; past a second CUPTI is stuck, and the
   * events' times are better than partial kernel times */
  if (!pp_cupti_wait_flush (cu, rk->pend_ticket, 1000000000LL))
    cu = NULL;
#endif
  int timed = emit_gpu_spans (run, rk, rk->pend, rk->n_pend, rk->pend_step, cu);
#ifdef PP_HAVE_CUPTI
  /* A safety net under the launch/copy-only API records: blocks that got no
   * kernel at all mean CUPTI did not correlate those calls; record every
   * call from now on (the spans lost so far keep the events' times). */
  int blocks = 0;
  for (int i = 0; i < rk->n_pend; i++)
    blocks += rk->pend[i].works > 0 && pp_cupti_block_kept (cu, rk->pend[i].block);
  if (cu != NULL && blocks >= 4 && timed == 0)
    (void) pp_cupti_record_all_api (cu);
#else
  (void) timed;
#endif
  rk->n_pend = 0;
}

/* After the step has completed on the device: its times from the CUDA
 * events (the rank's busy / wait times and window, the measured costs), its
 * spans (now, or at the next step's end with CUPTI's kernel times), and the
 * losses of its tail stages. */
static PpStatus
gpu_finalize (PpRun *run, Rank *rk, PpError *err)
{
  PpCupti *cu = run_cupti (run);
  int64_t prev_end = -1, busy = 0, wait = 0, first = -1, last = -1;

  for (int i = 0; i < rk->n_recs; i++)
    {
      GpuRec *r = &rk->recs[i];
      /* ev[0] start; works: ev[1] end of the first, ev[2] of the second;
       * transfers: ev[2] their end */
      int64_t t0 = pp_gpu_event_ns (run->gpu, rk->rank, r->ev[0]);
      int64_t t1 = r->works >= 1 ? pp_gpu_event_ns (run->gpu, rk->rank, r->ev[1]) : 0;
      int64_t t2 = r->works != 1 ? pp_gpu_event_ns (run->gpu, rk->rank, r->ev[2]) : t1;
      if (r->works == 0)
        t1 = t2;
      if (t1 < t0)
        t1 = t0;
      if (t2 < t1)
        t2 = t1;
      r->t[0] = t0;
      r->t[1] = t1;
      r->t[2] = t2;
      if (r->peer >= 0 && prev_end >= 0 && t0 - prev_end > WAIT_RECORD_NS)
        wait += t0 - prev_end;
      if (r->works == 0)
        {
          Stage *st = &run->stages[r->stage];
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
    (void) emit_gpu_spans (run, rk, rk->recs, rk->n_recs, run->step, NULL);
  else
    {
      emit_pending_spans (run, rk);
      memcpy (rk->pend, rk->recs, (size_t) rk->n_recs * sizeof *rk->recs);
      rk->n_pend = rk->n_recs;
      rk->pend_step = run->step;
      rk->pend_ticket = run->flush_ticket;
    }

  for (int i = 0; i < rk->n_stages; i++)
    {
      Stage *st = &run->stages[rk->stages[i]];
      size_t n = (size_t) st->n_mb * (size_t) run->rows;
      float *h;
      PpStatus rc;
      if (st->next >= 0)
        continue;
      if ((h = malloc (n * sizeof (float))) == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      rc = cuda_check (err, "copying the losses from the GPU",
                       cudaMemcpy (h, st->d_losses, n * sizeof (float), cudaMemcpyDeviceToHost));
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
    any |= run->ranks[r].n_pend > 0;
  if (!any)
    return;
#ifdef PP_HAVE_CUPTI
  (void) pp_cupti_flush (run_cupti (run), NULL);
#endif
  for (int r = 0; r < run->P; r++)
    emit_pending_spans (run, &run->ranks[r]);
}

static void
run_rank_optimizer_gpu (PpRun *run, Rank *rk)
{
  PpError err;
  PpStatus rc;
  int64_t t0;

  memset (&err, 0, sizeof err);
  t0 = pp_probe_now_ns ();
  rc = pp_gpu_bind (run->gpu, rk->rank, &err);
  uint64_t tag = rc == PP_OK ? tag_step_work (run, rk->rank) : 0;
  for (int i = 0; i < rk->n_stages && rc == PP_OK; i++)
    {
      PpGpuChunk *c = run->stages[rk->stages[i]].gchunk;
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
      fail (run, &err);
      return;
    }
  end_rank_step (run, rk, t0, pp_probe_now_ns ());
}

/* DualPipe: every copy of a part gets the sum of the copies' gradients.
 * Main thread, ranks parked, streams idle. */
static PpStatus
gpu_sum_copies (PpRun *run, PpError *err)
{
  PpStatus rc = PP_OK;
  for (int p = 0; p < run->n_parts && run->n_chains > 1 && rc == PP_OK; p++)
    {
      Stage *s0 = &run->stages[run->chain_stage[p]];
      uint64_t tag;
      if ((rc = pp_gpu_bind (run->gpu, s0->rank, err)) != PP_OK)
        return rc;
      tag = tag_step_work (run, s0->rank);
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        rc = pp_gpu_chunk_add_grads (s0->gchunk,
                                     run->stages[run->chain_stage[c * run->n_parts + p]].gchunk, err);
      tag_pop (run, tag);
      if (rc == PP_OK)
        rc = cuda_check (err, "summing gradient copies", cudaStreamSynchronize (rank_stream (run, s0->rank)));
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          Stage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          if ((rc = pp_gpu_bind (run->gpu, sc->rank, err)) != PP_OK)
            break;
          tag = tag_step_work (run, sc->rank);
          rc = pp_gpu_chunk_copy_grads (sc->gchunk, s0->gchunk, err);
          tag_pop (run, tag);
          if (rc == PP_OK)
            rc = cuda_check (err, "copying summed gradients",
                             cudaStreamSynchronize (rank_stream (run, sc->rank)));
        }
    }
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
  Stage *st = &run->stages[i];
  size_t rows = (size_t) run->rows, n = (size_t) st->n_mb;
  PpStatus rc;

  if ((rc = pp_gpu_bind (run->gpu, st->rank, err)) != PP_OK)
    return rc;
  st->gchunk = pp_gpu_chunk_new (run->model, st->part, run->n_parts, first_block,
                                 run->blocks[st->part], run->rows, st->n_mb, run->cfg.recompute,
                                 run_compute (run->cfg.compute), pp_gpu_lt (run->gpu, st->rank),
                                 pp_gpu_stream (run->gpu, st->rank), err);
  if (st->gchunk == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
  st->in_dim = pp_gpu_chunk_in_dim (st->gchunk);
  st->out_dim = pp_gpu_chunk_out_dim (st->gchunk);
  if ((st->d_in = dev_alloc (n * rows * (size_t) st->in_dim * sizeof (float), "inputs", i, err)) == NULL)
    return PP_ENOMEM;
  if (st->next >= 0)
    {
      if ((st->d_out = dev_alloc (n * rows * (size_t) st->out_dim * sizeof (float), "outputs", i, err)) == NULL
          || (st->d_dout = dev_alloc (n * rows * (size_t) st->out_dim * sizeof (float), "output gradients", i, err)) == NULL)
        return PP_ENOMEM;
    }
  else if ((st->d_labels = dev_alloc (n * rows * sizeof (int32_t), "labels", i, err)) == NULL
           || (st->d_losses = dev_alloc (n * rows * sizeof (float), "losses", i, err)) == NULL)
    return PP_ENOMEM;
  if (st->prev >= 0
      && (st->d_din = dev_alloc (n * rows * (size_t) st->in_dim * sizeof (float), "input gradients", i, err)) == NULL)
    return PP_ENOMEM;
  st->ev_out = calloc (n, sizeof (cudaEvent_t));
  st->ev_din = calloc (n, sizeof (cudaEvent_t));
  if (st->ev_out == NULL || st->ev_din == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  return PP_OK;
}

static void
free_stage_gpu (PpRun *run, Stage *st)
{
  if (run->gpu == NULL)
    return;
  pp_gpu_edge_free (run->gpu, st->edge_f);
  pp_gpu_edge_free (run->gpu, st->edge_b);
  (void) pp_gpu_bind (run->gpu, st->rank, NULL);
  pp_gpu_chunk_free (st->gchunk);
  cudaFree (st->d_in);
  cudaFree (st->d_out);
  cudaFree (st->d_dout);
  cudaFree (st->d_din);
  cudaFree (st->d_labels);
  cudaFree (st->d_losses);
  free (st->ev_out);
  free (st->ev_din);
  (void) cudaGetLastError ();
}

/* NCCL edges into every stage whose neighbour runs on another rank, where
 * the transport asks for them (pp-run.h). */
static PpStatus
setup_edges_gpu (PpRun *run, PpError *err)
{
  int t = run->cfg.gpu_transport;
  if (t == PP_RUN_TRANSPORT_COPY)
    return PP_OK;
  if (!pp_gpu_have_nccl ())
    return t == PP_RUN_TRANSPORT_NCCL
           ? pp_error_set (err, PP_EUNSUPPORTED, "--gpu-transport nccl: this pipescope was built without NCCL")
           : PP_OK;
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      Stage *st = &run->stages[i];
      for (int dir = 0; dir < 2; dir++)
        {
          int ps = dir == 0 ? st->prev : st->next;
          int src;
          if (ps < 0 || (src = run->stages[ps].rank) == st->rank)
            continue;
          if (t != PP_RUN_TRANSPORT_NCCL
              && pp_gpu_device (run->gpu, src) == pp_gpu_device (run->gpu, st->rank))
            continue;
          PpGpuEdge *e = pp_gpu_edge_new (run->gpu, src, st->rank, err);
          if (e == NULL)
            return err != NULL && err->status ? err->status : PP_EIO;
          if (dir == 0)
            st->edge_f = e;
          else
            st->edge_b = e;
        }
    }
  return PP_OK;
}

/* The rank's timing records (3 events each) and its zero rows. */
static PpStatus
setup_rank_gpu (PpRun *run, Rank *rk, size_t maxdim, PpError *err)
{
  const PpRankActions *ra = &run->sched->rank[rk->rank];
  PpStatus rc;

  if ((rc = pp_gpu_bind (run->gpu, rk->rank, err)) != PP_OK)
    return rc;
  /* an action is one record, plus a transfer per input it receives (two for
   * OVERLAP_F_B) */
  rk->cap_recs = 3 * ra->n_actions + 4;
  rk->recs = calloc ((size_t) rk->cap_recs, sizeof (GpuRec));
  rk->pend = calloc ((size_t) rk->cap_recs, sizeof (GpuRec));
  if (rk->recs == NULL || rk->pend == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int i = 0; i < rk->cap_recs; i++)
    for (int j = 0; j < 3; j++)
      if ((rc = cuda_check (err, "cudaEventCreate", cudaEventCreate (&rk->recs[i].ev[j]))) != PP_OK)
        return rc;
  if ((rk->d_zeros = dev_alloc ((size_t) run->rows * maxdim * sizeof (float), "zero rows", -1, err)) == NULL)
    return PP_ENOMEM;
  return PP_OK;
}

static void
free_rank_gpu (PpRun *run, Rank *rk)
{
  if (run->gpu == NULL)
    return;
  (void) pp_gpu_bind (run->gpu, rk->rank, NULL);
  if (rk->recs != NULL)
    for (int i = 0; i < rk->cap_recs; i++)
      for (int j = 0; j < 3; j++)
        if (rk->recs[i].ev[j] != NULL)
          cudaEventDestroy (rk->recs[i].ev[j]);
  free (rk->recs);
  free (rk->pend);
  cudaFree (rk->d_zeros);
  (void) cudaGetLastError ();
}
#endif /* PP_HAVE_CUDA */

static void
run_rank_step (PpRun *run, Rank *rk)
{
  const PpRankActions *ra = &run->sched->rank[rk->rank];
  PpError err;

  rk->busy_ns = rk->wait_ns = 0;
  rk->first_ns = rk->last_ns = -1;
  rk->completed = 0;
#ifdef PP_HAVE_CUDA
  if (run->gpu_mode)
    {
      memset (&err, 0, sizeof err);
      if (gpu_step_begin (run, rk, &err) != PP_OK)
        {
          fail (run, &err);
          return;
        }
    }
#endif
  for (int i = 0; i < ra->n_actions; i++)
    {
      PpStatus rc;

      if (atomic_load (&run->abort))
        return;
      if (stop_requested (run))
        {
          abort_step (run);
          return;
        }
      memset (&err, 0, sizeof err);
#ifdef PP_HAVE_CUDA
      if (run->gpu_mode)
        rc = run_action_gpu (run, rk, &ra->actions[i], &err);
      else
#endif
        rc = run_action (run, rk, &ra->actions[i], &err);
      if (rc == PP_EIO && err.msg[0] == '\0')
        return;            /* abandoned while waiting */
      if (rc != PP_OK)
        {
          if (err.msg[0] == '\0')
            pp_error_set (&err, rc, "rank %d: action %d failed: %s", rk->rank, i,
                          pp_status_message (rc));
          fail (run, &err);
          return;
        }
    }
#ifdef PP_HAVE_CUDA
  if (run->gpu_mode)
    {
      memset (&err, 0, sizeof err);
      if (gpu_step_end (run, rk, &err) != PP_OK)
        {
          fail (run, &err);
          return;
        }
    }
#endif
  rk->completed = 1;
}

enum { TASK_ACTIONS, TASK_OPTIMIZER };

/* The optimizer step of the rank's own parts, on the rank's thread, so the
 * ranks update in parallel. */
static void
run_rank_optimizer (PpRun *run, Rank *rk)
{
  int64_t t0 = pp_probe_now_ns ();
  for (int i = 0; i < rk->n_stages; i++)
    {
      PpChunk *c = run->stages[rk->stages[i]].chunk;
      pp_chunk_adamw (c, run->cfg.lr, 0.9f, 0.999f, 1e-8f, run->cfg.weight_decay, run->step + 1);
      pp_chunk_zero_grads (c);
    }
  end_rank_step (run, rk, t0, pp_probe_now_ns ());
}

#ifdef PP_HAVE_CUDA
/* The cores this process may run on (a container's or taskset's share),
 * or the machine's where that cannot be asked. */
static long
usable_cpus (void)
{
  cpu_set_t set;
  CPU_ZERO (&set);
  if (sched_getaffinity (0, sizeof set, &set) == 0 && CPU_COUNT (&set) > 0)
    return CPU_COUNT (&set);
  return sysconf (_SC_NPROCESSORS_ONLN);
}
#endif

static void *
rank_main (void *data)
{
  Rank *rk = data;
  PpRun *run = rk->run;
  unsigned long seen = 0;

  if (run->cfg.pin_threads)
    {
      long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
      if (ncpu > 0)
        {
          cpu_set_t set;
          CPU_ZERO (&set);
          CPU_SET ((int) (rk->rank % ncpu), &set);
          (void) pthread_setaffinity_np (pthread_self (), sizeof set, &set);
        }
    }

  for (;;)
    {
      pthread_mutex_lock (&run->mu);
      while (run->gen == seen && !run->quit)
        pthread_cond_wait (&run->start, &run->mu);
      if (run->quit)
        {
          pthread_mutex_unlock (&run->mu);
          break;
        }
      seen = run->gen;
      int task = run->task;
      pthread_mutex_unlock (&run->mu);

      if (task == TASK_OPTIMIZER)
        {
#ifdef PP_HAVE_CUDA
          if (run->gpu_mode)
            run_rank_optimizer_gpu (run, rk);
          else
#endif
            run_rank_optimizer (run, rk);
        }
      else
        run_rank_step (run, rk);

      pthread_mutex_lock (&run->mu);
      if (--run->remaining == 0)
        pthread_cond_broadcast (&run->done);
      pthread_mutex_unlock (&run->mu);
    }
  return NULL;
}

/* ---- construction ------------------------------------------------------ */

static void *
xcalloc (size_t n, size_t size, int *oom)
{
  void *p;
  if (n == 0)
    n = 1;
  p = calloc (n, size);
  if (p == NULL)
    *oom = 1;
  return p;
}

/* Finds the chains (heads are stages with stage_prev == -1, in stage order)
 * and checks they are equally long, cover every stage once and see disjoint
 * micro-batch ranges covering [0, M). */
static PpStatus
find_chains (PpRun *run, PpError *err)
{
  const PpSchedule *s = run->sched;
  int n = s->n_stages, heads = 0, len = -1;
  int *seen, *mb_seen, oom = 0;
  PpStatus rc = PP_OK;

  for (int i = 0; i < n; i++)
    if (s->stage_prev[i] < 0)
      heads++;
  if (heads == 0 || n % heads != 0)
    return pp_error_set (err, PP_EINVAL, "schedule %s: its stages do not form equal chains", s->name);
  len = n / heads;
  run->n_chains = heads;
  run->n_parts = len;
  run->chain_stage = xcalloc ((size_t) n, sizeof (int), &oom);
  seen = xcalloc ((size_t) n, sizeof (int), &oom);
  mb_seen = xcalloc ((size_t) s->microbatches, sizeof (int), &oom);
  if (oom)
    {
      free (seen);
      free (mb_seen);
      return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  for (int i = 0, c = 0; i < n && rc == PP_OK; i++)
    {
      int pos = 0, st;
      if (s->stage_prev[i] >= 0)
        continue;
      for (st = i; st >= 0 && rc == PP_OK; st = s->stage_next[st], pos++)
        {
          if (st >= n || pos >= len || seen[st]
              || (pos > 0 && s->stage_prev[st] != run->chain_stage[c * len + pos - 1])
              || s->stage_mb_lo[st] != s->stage_mb_lo[i] || s->stage_mb_hi[st] != s->stage_mb_hi[i])
            rc = pp_error_set (err, PP_EINVAL,
                               "schedule %s: its stages do not form equal chains", s->name);
          else
            {
              seen[st] = 1;
              run->chain_stage[c * len + pos] = st;
              run->stages[st].part = pos;
              run->stages[st].chain = c;
            }
        }
      if (rc == PP_OK && pos != len)
        rc = pp_error_set (err, PP_EINVAL, "schedule %s: its stages do not form equal chains", s->name);
      if (rc == PP_OK)
        {
          int lo = s->stage_mb_lo[i], hi = s->stage_mb_hi[i];
          if (lo < 0 || hi > s->microbatches || lo >= hi)
            rc = pp_error_set (err, PP_EINVAL, "schedule %s: stage %d sees micro-batches %d..%d of %d",
                               s->name, i, lo, hi - 1, s->microbatches);
          for (int m = lo; rc == PP_OK && m < hi; m++)
            if (mb_seen[m]++)
              rc = pp_error_set (err, PP_EINVAL, "schedule %s: micro-batch %d runs on two chains",
                                 s->name, m);
        }
      c++;
    }
  for (int m = 0; rc == PP_OK && m < s->microbatches; m++)
    if (!mb_seen[m])
      rc = pp_error_set (err, PP_EINVAL, "schedule %s: no chain runs micro-batch %d", s->name, m);
  free (seen);
  free (mb_seen);
  return rc;
}

PpRun *
pp_run_new (const PpRunConfig *cfg, PpError *err)
{
  PpRun *run;
  const PpSchedule *s;
  int oom = 0, n_created = 0, *first;
  size_t maxdim;

  if (cfg == NULL || cfg->schedule == NULL)
    {
      pp_error_set (err, PP_EINVAL, "no schedule to run");
      return NULL;
    }
  s = cfg->schedule;
  if (pp_schedule_validate (s, err) != PP_OK)
    return NULL;
  if (cfg->batch <= 0)
    {
      pp_error_set (err, PP_EINVAL, "--batch must be at least 1");
      return NULL;
    }
  if (cfg->batch % s->microbatches != 0)
    {
      pp_error_set (err, PP_EINVAL, "--batch %d is not a multiple of --microbatches %d",
                    cfg->batch, s->microbatches);
      return NULL;
    }

  pp_kernels_init ();
  run = calloc (1, sizeof *run);
  if (run == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  run->cfg = *cfg;
  if (run->cfg.lr == 0.0f)
    run->cfg.lr = 1e-3f;
  run->sched = s;
  run->P = s->ranks;
  run->M = s->microbatches;
  run->rows = cfg->batch / s->microbatches;
  run->transport = cfg->transport;
  if (run->transport == NULL)
    {
      if ((run->transport = pp_transport_new_local (err)) == NULL)
        {
          free (run);
          return NULL;
        }
      run->own_transport = 1;
    }
  pthread_mutex_init (&run->mu, NULL);
  pthread_cond_init (&run->start, NULL);
  cond_init_monotonic (&run->done);
  atomic_init (&run->abort, 0);

  run->stages = xcalloc ((size_t) s->n_stages, sizeof (Stage), &oom);
  run->ranks = xcalloc ((size_t) run->P, sizeof (Rank), &oom);
  if (oom)
    goto nomem;
  if (find_chains (run, err) != PP_OK)
    goto fail;

  run->model = pp_model_new (&cfg->model, err);
  if (run->model == NULL)
    goto fail;
  if (cfg->backend == PP_BACKEND_CUDA && run->transport->process_rank >= 0)
    {
      pp_error_set (err, PP_EUNSUPPORTED,
                    "the CUDA backend runs its ranks as threads of one process (green-context "
                    "partitions or one GPU each); ranks as MPI processes are CPU ranks for now");
      goto fail;
    }
  if (cfg->backend == PP_BACKEND_CUDA)
    {
#ifdef PP_HAVE_CUDA
      PpGpuPartition want = cfg->gpu_partition == PP_RUN_GPU_GREEN ? PP_GPU_PARTITION_GREEN
                            : cfg->gpu_partition == PP_RUN_GPU_STREAMS ? PP_GPU_PARTITION_STREAMS
                            : PP_GPU_PARTITION_AUTO;
      run->gpu_mode = 1;
      run->gpu = pp_gpu_open (run->P, want, cfg->probe, !cfg->no_cupti, err);
      if (run->gpu == NULL)
        goto fail;
      {
        /* the cores the rank threads, the main thread, the probe's drain
         * thread and CUPTI's two (its flush thread, its own worker) leave
         * free: a rank thread that loses its core stops feeding its GPU */
        long ncpu = usable_cpus ();
        long n = ncpu - run->P - 1 - (cfg->probe != NULL) - 2 * (run_cupti (run) != NULL);
        if (n < 1) n = 1;
        if (n > 16) n = 16;
        if ((run->pool = pp_batch_pool_new (run->model, (int) n, err)) == NULL)
          goto fail;
      }
#else
      pp_error_set (err, PP_EUNSUPPORTED, "this pipescope was built without CUDA");
      goto fail;
#endif
    }
  else if (cfg->backend != PP_BACKEND_CPU)
    {
      pp_error_set (err, PP_EINVAL, "unknown backend %d", cfg->backend);
      goto fail;
    }
  run->blocks = xcalloc ((size_t) run->n_parts, sizeof (int), &oom);
  first = xcalloc ((size_t) run->n_parts, sizeof (int), &oom);
  if (oom)
    {
      free (first);
      goto nomem;
    }
  if (pp_model_partition (run->model, run->n_parts, cfg->partition, run->blocks, err) != PP_OK)
    {
      free (first);
      goto fail;
    }
  for (int p = 1; p < run->n_parts; p++)
    first[p] = first[p - 1] + run->blocks[p - 1];

  maxdim = 1;
  for (int i = 0; i < s->n_stages; i++)
    {
      Stage *st = &run->stages[i];
      st->rank = s->stage_rank[i];
      st->prev = s->stage_prev[i];
      st->next = s->stage_next[i];
      st->mb_lo = s->stage_mb_lo[i];
      st->mb_hi = s->stage_mb_hi[i];
      st->n_mb = st->mb_hi - st->mb_lo;
      st->mb_state = xcalloc ((size_t) st->n_mb, 1, &oom);
      if (oom)
        {
          free (first);
          goto nomem;
        }
      if (!pp_transport_runs_rank (run->transport, st->rank))
        continue;   /* another process's stage */
#ifdef PP_HAVE_CUDA
      if (run->gpu_mode)
        {
          if (setup_stage_gpu (run, i, first[st->part], err) != PP_OK)
            {
              free (first);
              goto fail;
            }
          if ((size_t) st->in_dim > maxdim) maxdim = (size_t) st->in_dim;
          if ((size_t) st->out_dim > maxdim) maxdim = (size_t) st->out_dim;
          continue;
        }
#endif
      st->chunk = pp_chunk_new (run->model, st->part, run->n_parts, first[st->part],
                                run->blocks[st->part], run->rows, st->n_mb, cfg->recompute, err);
      if (st->chunk == NULL)
        {
          free (first);
          goto fail;
        }
      if (cfg->exact_grads && pp_chunk_set_exact_grads (st->chunk, 1) != PP_OK)
        {
          free (first);
          pp_error_set (err, PP_ENOMEM, "out of memory for the gradients of stage %d", i);
          goto fail;
        }
      st->in_dim = pp_chunk_in_dim (st->chunk);
      st->out_dim = pp_chunk_out_dim (st->chunk);
      if ((size_t) st->in_dim > maxdim) maxdim = (size_t) st->in_dim;
      if ((size_t) st->out_dim > maxdim) maxdim = (size_t) st->out_dim;
      if (st->next >= 0)
        st->out = xcalloc ((size_t) st->n_mb * (size_t) run->rows * (size_t) st->out_dim,
                           sizeof (float), &oom);
      if (st->prev >= 0)
        st->din = xcalloc ((size_t) st->n_mb * (size_t) run->rows * (size_t) st->in_dim,
                           sizeof (float), &oom);
      if (oom)
        {
          free (first);
          goto nomem;
        }
    }
  free (first);

  {
    size_t in_dim = (size_t) pp_model_config (run->model)->in_dim;
    run->x = xcalloc ((size_t) cfg->batch * in_dim, sizeof (float), &oom);
    run->x_next = xcalloc ((size_t) cfg->batch * in_dim, sizeof (float), &oom);
  }
  run->labels = xcalloc ((size_t) cfg->batch, sizeof (int32_t), &oom);
  run->labels_next = xcalloc ((size_t) cfg->batch, sizeof (int32_t), &oom);
  run->next_step = -1;
  run->zeros = xcalloc ((size_t) run->rows * maxdim, sizeof (float), &oom);
  run->loss_mb = xcalloc ((size_t) run->M, sizeof (double), &oom);
  run->part_params = xcalloc ((size_t) run->n_parts, sizeof (size_t), &oom);
  run->shared_rank = xcalloc ((size_t) run->P * 4, sizeof (double), &oom);
  run->shared_cost = xcalloc ((size_t) s->n_stages * 10, sizeof (double), &oom);
  if (oom)
    goto nomem;

  /* The transport learns each local stage's message sizes; every process
   * learns every part's parameter count. */
  {
    size_t *in_floats = xcalloc ((size_t) s->n_stages, sizeof (size_t), &oom);
    size_t *out_floats = xcalloc ((size_t) s->n_stages, sizeof (size_t), &oom);
    double *counts = xcalloc ((size_t) run->n_parts, sizeof (double), &oom);
    PpStatus rc = oom ? pp_error_set (err, PP_ENOMEM, "out of memory") : PP_OK;
    for (int i = 0; i < s->n_stages && rc == PP_OK; i++)
      if (pp_transport_runs_rank (run->transport, run->stages[i].rank))
        {
          in_floats[i] = (size_t) run->rows * (size_t) run->stages[i].in_dim;
          out_floats[i] = (size_t) run->rows * (size_t) run->stages[i].out_dim;
        }
    for (int p = 0; p < run->n_parts && rc == PP_OK; p++)
      {
        const Stage *st = &run->stages[run->chain_stage[p]];
        if (st->chunk != NULL)
          counts[p] = (double) pp_chunk_n_params (st->chunk);
#ifdef PP_HAVE_CUDA
        else if (st->gchunk != NULL)
          counts[p] = (double) pp_gpu_chunk_n_params (st->gchunk);
#endif
      }
    if (rc == PP_OK)
      rc = run->transport->ops->setup (run->transport, s, in_floats, out_floats, step_abandoned,
                                       run, err);
    if (rc == PP_OK)
      rc = run->transport->ops->sum (run->transport, counts, (size_t) run->n_parts, err);
    if (rc == PP_OK)
      rc = measure_clock (run, err);
    for (int p = 0; p < run->n_parts && rc == PP_OK; p++)
      run->part_params[p] = (size_t) counts[p];
    free (in_floats);
    free (out_floats);
    free (counts);
    if (rc != PP_OK)
      goto fail;
  }

  for (int r = 0; r < run->P; r++)
    {
      Rank *rk = &run->ranks[r];
      rk->run = run;
      rk->rank = r;
      rk->last_first = rk->last_last = -1;   /* no step yet */
      rk->stages = xcalloc ((size_t) s->n_stages, sizeof (int), &oom);
      if (oom)
        goto nomem;
      for (int i = 0; i < s->n_stages; i++)
        if (s->stage_rank[i] == r)
          rk->stages[rk->n_stages++] = i;
#ifdef PP_HAVE_CUDA
      if (run->gpu_mode && setup_rank_gpu (run, rk, maxdim, err) != PP_OK)
        goto fail;
#endif
    }
#ifdef PP_HAVE_CUDA
  if (run->gpu_mode && setup_edges_gpu (run, err) != PP_OK)
    goto fail;
#endif
  for (int r = 0; r < run->P; r++)
    {
      if (!pp_transport_runs_rank (run->transport, r))
        continue;
      int e = pthread_create (&run->ranks[r].thread, NULL, rank_main, &run->ranks[r]);
      if (e != 0)
        {
          pp_error_set (err, PP_EIO, "cannot start the thread of rank %d: %s", r, strerror (e));
          goto fail;
        }
      run->ranks[r].started = 1;
      n_created++;
    }
  run->n_local = n_created;
  return run;

nomem:
  pp_error_set (err, PP_ENOMEM, "out of memory");
fail:
  pp_run_free (run);
  return NULL;
}

/* ---- steps -------------------------------------------------------------- */

/* Releases what an abandoned step left in the chunks and zeroes gradients. */
#ifdef PP_HAVE_CUDA
static void
recover_gpu (PpRun *run)
{
  for (int r = 0; r < run->P; r++)
    if (pp_gpu_bind (run->gpu, r, NULL) != PP_OK
        || cudaStreamSynchronize (rank_stream (run, r)) != cudaSuccess)
      run->broken = 1;
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      Stage *st = &run->stages[i];
      float *zeros = run->ranks[st->rank].d_zeros;
      if (pp_gpu_bind (run->gpu, st->rank, NULL) != PP_OK)
        {
          run->broken = 1;
          continue;
        }
      for (int k = 0; k < st->n_mb; k++)
        {
          uint8_t m = st->mb_state[k];
          PpStatus rc = PP_OK;
          if (!(m & MB_FWD) || (m & MB_DONE))
            continue;
          if (m & MB_INPUT)
            rc = pp_gpu_chunk_backward_weight (st->gchunk, st->mb_lo + k, NULL);
          else
            rc = pp_gpu_chunk_backward (st->gchunk, st->mb_lo + k, st->next >= 0 ? zeros : NULL,
                                        st->d_din ? st->d_din + (size_t) k * (size_t) run->rows * (size_t) st->in_dim : NULL,
                                        1.0f, NULL);
          if (rc != PP_OK)
            run->broken = 1;
        }
      if (pp_gpu_chunk_zero_grads (st->gchunk, NULL) != PP_OK
          || cudaStreamSynchronize (rank_stream (run, st->rank)) != cudaSuccess)
        run->broken = 1;
    }
  (void) cudaGetLastError ();
}
#endif

static void
recover (PpRun *run)
{
#ifdef PP_HAVE_CUDA
  if (run->gpu_mode)
    {
      recover_gpu (run);
      return;
    }
#endif
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      Stage *st = &run->stages[i];
      if (st->chunk == NULL)
        continue;   /* another process's */
      for (int k = 0; k < st->n_mb; k++)
        {
          uint8_t m = st->mb_state[k];
          PpStatus rc = PP_OK;
          if (!(m & MB_FWD) || (m & MB_DONE))
            continue;
          if (m & MB_INPUT)
            rc = pp_chunk_backward_weight (st->chunk, st->mb_lo + k, NULL);
          else
            rc = pp_chunk_backward (st->chunk, st->mb_lo + k, st->next >= 0 ? run->zeros : NULL,
                                    st->din ? st->din + (size_t) k * (size_t) run->rows * (size_t) st->in_dim : NULL,
                                    1.0f, NULL);
          if (rc != PP_OK)
            run->broken = 1;
        }
      pp_chunk_zero_grads (st->chunk);
    }
}

/* DualPipe: every copy of a part gets the sum of the copies' gradients,
 * copy 0 + copy 1 + ... in that order whichever process holds them, so a
 * run over MPI updates exactly as one over threads (summed in double with
 * --exact-grads, like the micro-batches).  Both ends of a pair walk the
 * parts in the same order: no two processes ever wait on each other. */
static PpStatus
sum_copies (PpRun *run, PpError *err)
{
  PpTransport *t = run->transport;
  PpStatus rc = PP_OK;
  void *tmp = NULL;

  for (int p = 0; p < run->n_parts && run->n_chains > 1 && rc == PP_OK; p++)
    {
      Stage *s0 = &run->stages[run->chain_stage[p]];
      bool here0 = pp_transport_runs_rank (t, s0->rank);
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          Stage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          bool herec = pp_transport_runs_rank (t, sc->rank);
          size_t bytes = 0;
          if (here0 && herec)
            rc = pp_chunk_add_grads (s0->chunk, sc->chunk);
          else if (here0)
            {
              pp_chunk_grad_storage (s0->chunk, &bytes);
              if (tmp == NULL && (tmp = malloc (bytes ? bytes : 1)) == NULL)
                return pp_error_set (err, PP_ENOMEM, "out of memory");
              if ((rc = t->ops->recv_bytes (t, sc->rank, tmp, bytes, err)) == PP_OK)
                rc = pp_chunk_add_grad_storage (s0->chunk, tmp, bytes);
            }
          else if (herec)
            {
              const void *g = pp_chunk_grad_storage (sc->chunk, &bytes);
              rc = t->ops->send_bytes (t, s0->rank, g, bytes, err);
            }
        }
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          Stage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          bool herec = pp_transport_runs_rank (t, sc->rank);
          size_t bytes = 0;
          if (here0 && herec)
            rc = pp_chunk_copy_grads (sc->chunk, s0->chunk);
          else if (here0)
            {
              const void *g = pp_chunk_grad_storage (s0->chunk, &bytes);
              rc = t->ops->send_bytes (t, sc->rank, g, bytes, err);
            }
          else if (herec)
            {
              void *g = pp_chunk_grad_storage (sc->chunk, &bytes);
              rc = t->ops->recv_bytes (t, s0->rank, g, bytes, err);
            }
        }
      free (tmp);
      tmp = NULL;
    }
  if (rc != PP_OK && err != NULL && err->msg[0] == '\0')
    pp_error_set (err, rc, "summing the gradients of DualPipe's two copies failed");
  return rc;
}

/* Measures this process's clock against rank 0's (a collective). */
static PpStatus
measure_clock (PpRun *run, PpError *err)
{
  PpStatus rc = run->transport->ops->clock_offset (run->transport, pp_probe_now_ns,
                                                   &run->clock_offset, &run->clock_rtt, err);
  if (rc == PP_OK)
    {
      run->clock_measured_at = pp_probe_now_ns ();
      run->clock_generation++;
    }
  return rc;
}

/* What the reports need of every rank and stage, and the losses: this
 * process's values, summed over the processes (each value has one owner,
 * zeros elsewhere, so the sums are exact). */
static PpStatus
share_reports (PpRun *run, PpError *err)
{
  int S = run->sched->n_stages;
  /* the last slot: rank 0 asks every process to measure its clock again */
  size_t n = (size_t) run->P * 4 + (size_t) S * 10 + (size_t) run->M + 1;
  double *v = calloc (n, sizeof (double));
  PpStatus rc;

  if (v == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int r = 0; r < run->P; r++)
    if (run->ranks[r].started)
      {
        const Rank *rk = &run->ranks[r];
        v[r * 4 + 0] = (double) rk->last_busy;
        v[r * 4 + 1] = (double) rk->last_wait;
        v[r * 4 + 2] = (double) (rk->last_first + 1);
        v[r * 4 + 3] = (double) (rk->last_last + 1);
      }
  for (int i = 0; i < S; i++)
    if (pp_transport_runs_rank (run->transport, run->stages[i].rank))
      {
        const Stage *st = &run->stages[i];
        double *c = v + (size_t) run->P * 4 + (size_t) i * 10;
        c[0] = st->sum_f; c[1] = st->sum_b; c[2] = st->sum_i; c[3] = st->sum_w; c[4] = st->sum_x;
        c[5] = (double) st->n_f; c[6] = (double) st->n_b; c[7] = (double) st->n_i;
        c[8] = (double) st->n_w; c[9] = (double) st->n_x;
      }
  memcpy (v + (size_t) run->P * 4 + (size_t) S * 10, run->loss_mb, (size_t) run->M * sizeof (double));
  if (run->transport->process_rank == 0
      && pp_probe_now_ns () - run->clock_measured_at >= CLOCK_EVERY_NS)
    v[n - 1] = 1;
  rc = run->transport->ops->sum (run->transport, v, n, err);
  if (rc == PP_OK)
    {
      memcpy (run->shared_rank, v, (size_t) run->P * 4 * sizeof (double));
      memcpy (run->shared_cost, v + (size_t) run->P * 4, (size_t) S * 10 * sizeof (double));
      memcpy (run->loss_mb, v + (size_t) run->P * 4 + (size_t) S * 10, (size_t) run->M * sizeof (double));
    }
  if (rc == PP_OK && v[n - 1] > 0)
    rc = measure_clock (run, err);
  free (v);
  return rc;
}

PpStatus
pp_run_step (PpRun *run, PpStepStats *stats, PpError *err)
{
  const PpSchedule *s;
  int64_t t_start, t_end;
  int all_done = 1, stopped;
  double loss = 0;

  if (run == NULL)
    return pp_error_set (err, PP_EINVAL, "no run");
  s = run->sched;
  if (run->broken)
    return pp_error_set (err, PP_EINVAL, "the run cannot continue after an abandoned step");
  if (stop_requested (run))
    return pp_error_set (err, PP_EINVAL, "stopped");

  /* The first step pays for first touches (activation buffers, caches):
   * once a second step runs, the measured costs leave it out. */
  if (run->step == 1)
    for (int i = 0; i < s->n_stages; i++)
      {
        Stage *st = &run->stages[i];
        st->sum_f = st->sum_b = st->sum_i = st->sum_w = st->sum_x = 0;
        st->n_f = st->n_b = st->n_i = st->n_w = st->n_x = 0;
      }

  t_start = pp_probe_now_ns ();
  if (run->next_step == run->step)
    {
      float *x = run->x;
      int32_t *labels = run->labels;
      run->x = run->x_next;
      run->labels = run->labels_next;
      run->x_next = x;
      run->labels_next = labels;
    }
  else if (run->pool != NULL)
    {
      pp_batch_pool_start (run->pool, run->cfg.data_seed, run->step, run->cfg.batch, run->x, run->labels);
      pp_batch_pool_wait (run->pool);
    }
  else
    pp_model_batch (run->model, run->cfg.data_seed, run->step, run->cfg.batch, run->x, run->labels);
  run->next_step = -1;
  /* GPU: the next step's batch is made by the pool while the GPUs run this
   * one (on the CPU backend the cores are the ranks', and the main thread
   * makes it during the optimizer step) */
  if (run->pool != NULL)
    pp_batch_pool_start (run->pool, run->cfg.data_seed, run->step + 1, run->cfg.batch, run->x_next,
                         run->labels_next);
  for (int i = 0; i < s->n_stages; i++)
    memset (run->stages[i].mb_state, 0, (size_t) run->stages[i].n_mb);
  for (int m = 0; m < run->M; m++)
    run->loss_mb[m] = 0;
  {
    PpStatus rc = run->transport->ops->step_begin (run->transport, err);
    if (rc != PP_OK)
      {
        run->broken = 1;
        return rc;
      }
  }

  pthread_mutex_lock (&run->mu);
  atomic_store (&run->abort, 0);
  run->failed = 0;
  memset (&run->first_err, 0, sizeof run->first_err);
  run->remaining = run->n_local;
  run->task = TASK_ACTIONS;
  run->gen++;
  pthread_cond_broadcast (&run->start);
  while (run->remaining > 0)
    {
      struct timespec ts;
      deadline_after (&ts, WAIT_POLL_NS);
      pthread_cond_timedwait (&run->done, &run->mu, &ts);
      if (run->remaining > 0 && stop_requested (run) && !atomic_load (&run->abort))
        {
          /* wake ranks that wait for a peer; they poll the flag anyway */
          pthread_mutex_unlock (&run->mu);
          abort_step (run);
          pthread_mutex_lock (&run->mu);
        }
    }
  pthread_mutex_unlock (&run->mu);

  for (int r = 0; r < run->P; r++)
    if (run->ranks[r].started)
      all_done &= run->ranks[r].completed;
  stopped = !all_done;
  if (!run->failed && !stopped)
    {
      /* every message of this process's ranks has gone out */
      PpError terr = { 0 };
      PpStatus rc = run->transport->ops->step_end (run->transport, &terr);
      if (rc == PP_EIO && terr.msg[0] == '\0')
        stopped = 1;
      else if (rc != PP_OK)
        fail (run, &terr);
    }
  else
    {
      PpError ignored = { 0 };
      (void) run->transport->ops->step_end (run->transport, &ignored);
    }
  if (run->failed || stopped)
    {
      if (run->pool != NULL)
        pp_batch_pool_wait (run->pool);   /* it writes x_next; next_step stays -1 */
      PpStatus rc;
      if (run->failed)
        {
          if (err != NULL)
            *err = run->first_err;
          rc = run->first_err.status != PP_OK ? run->first_err.status : PP_EINVAL;
        }
      else
        rc = pp_error_set (err, PP_EINVAL, "stopped");
      recover (run);
      return rc;
    }

  /* Every copy of a part gets the sum of the copies' gradients (DualPipe),
   * summed in double like the micro-batches; then every rank takes its
   * parts' AdamW step on its own thread. */
#ifdef PP_HAVE_CUDA
  if (run->gpu_mode)
    {
      PpStatus rc;
      if ((rc = gpu_sum_copies (run, err)) != PP_OK)
        {
          run->broken = 1;
          pp_batch_pool_wait (run->pool);
          return rc;
        }
    }
#endif
  if (!run->gpu_mode)
    {
      PpStatus rc = sum_copies (run, err);
      if (rc != PP_OK)
        {
          run->broken = 1;
          return rc;
        }
    }
  pthread_mutex_lock (&run->mu);
  run->remaining = run->n_local;
  run->task = TASK_OPTIMIZER;
#if defined(PP_HAVE_CUDA) && defined(PP_HAVE_CUPTI)
  /* Every stream is synchronised: a flush from now on delivers the step's
   * kernels, for its spans at the next step's end.  The flush thread does
   * it while the GPUs work; nobody waits for it now. */
  if (run->gpu_mode)
    run->flush_ticket = pp_cupti_request_flush (run_cupti (run));
#endif
  run->gen++;
  pthread_cond_broadcast (&run->start);
  pthread_mutex_unlock (&run->mu);
  if (run->pool != NULL)
    pp_batch_pool_wait (run->pool);
  else
    pp_model_batch (run->model, run->cfg.data_seed, run->step + 1, run->cfg.batch, run->x_next,
                    run->labels_next);
  run->next_step = run->step + 1;
  pthread_mutex_lock (&run->mu);
  while (run->remaining > 0)
    pthread_cond_wait (&run->done, &run->mu);
  pthread_mutex_unlock (&run->mu);
  if (run->failed)
    {
      /* only the GPU optimizer step can fail (a CUDA error): the weights
       * are no longer those of a complete step (the pool was waited for) */
      if (err != NULL)
        *err = run->first_err;
      run->broken = 1;
      return run->first_err.status != PP_OK ? run->first_err.status : PP_EIO;
    }

  {
    PpStatus rc = share_reports (run, err);
    if (rc != PP_OK)
      {
        run->broken = 1;
        return rc;
      }
  }
  for (int m = 0; m < run->M; m++)
    loss += run->loss_mb[m];
  loss /= (double) run->cfg.batch;
  t_end = pp_probe_now_ns ();
  {
    int tail = run->chain_stage[run->n_parts - 1];
    if (pp_transport_runs_rank (run->transport, run->stages[tail].rank))
      record_counter (run, run->stages[tail].rank, PP_COUNTER_LOSS, loss, t_end);
  }
  if (stats != NULL)
    {
      stats->step = run->step;
      stats->loss = loss;
      stats->start_ns = t_start;
      stats->end_ns = t_end;
      stats->seconds = (double) (t_end - t_start) * 1e-9;
      stats->samples_per_s = stats->seconds > 0 ? run->cfg.batch / stats->seconds : 0;
    }
  run->step++;
  return PP_OK;
}

/* ---- reports ------------------------------------------------------------ */

PpCostModel *
pp_run_measured_costs (const PpRun *run)
{
  PpCostModel *cm;

  if (run == NULL)
    return NULL;
  cm = pp_cost_model_new_uniform (run->sched->n_stages, 0, 0, 0, 0);
  if (cm == NULL)
    return NULL;
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      /* every process's measurements (share_reports), as one stage's sums */
      const double *c = run->shared_cost + (size_t) i * 10;
      const struct { double sum_f, sum_b, sum_i, sum_w, sum_x; long n_f, n_b, n_i, n_w, n_x; } each = {
        c[0], c[1], c[2], c[3], c[4], (long) c[5], (long) c[6], (long) c[7], (long) c[8], (long) c[9]
      }, *st = &each;
      double w = st->n_w ? st->sum_w / (double) st->n_w : 0;
      double i_mean = st->n_i ? st->sum_i / (double) st->n_i : 0;
      cm->f[i] = st->n_f ? st->sum_f / (double) st->n_f : 0;
      if (st->n_b && st->n_i)
        {
          /* Both kinds (DualPipe): B and I + W both measure the full backward;
           * weight them by how often each ran, and give W the share of it
           * that W took where the backward was split, so I = b - w stays
           * positive however noisy the means of tiny actions are. */
          cm->b[i] = (st->sum_b + (double) st->n_i * (i_mean + w)) / (double) (st->n_b + st->n_i);
          cm->w[i] = i_mean + w > 0 ? cm->b[i] * (w / (i_mean + w)) : 0;
        }
      else if (st->n_b)
        {
          cm->b[i] = st->sum_b / (double) st->n_b;
          cm->w[i] = 0;
        }
      else
        {
          cm->b[i] = i_mean + w;
          cm->w[i] = w;
        }
      cm->comm[i] = st->n_x ? st->sum_x / (double) st->n_x : 0;
    }
  return cm;
}

void
pp_run_rank_times (const PpRun *run, int rank, int64_t *busy_ns, int64_t *wait_ns,
                   int64_t *span_ns)
{
  const double *v = (run != NULL && rank >= 0 && rank < run->P) ? run->shared_rank + rank * 4 : NULL;

  if (busy_ns) *busy_ns = v ? (int64_t) v[0] : 0;
  if (wait_ns) *wait_ns = v ? (int64_t) v[1] : 0;
  if (span_ns) *span_ns = v && v[2] > 0 ? (int64_t) v[3] - (int64_t) v[2] : 0;
}

void
pp_run_rank_window (const PpRun *run, int rank, int64_t *first_ns, int64_t *last_ns)
{
  const double *v = (run != NULL && rank >= 0 && rank < run->P) ? run->shared_rank + rank * 4 : NULL;

  if (first_ns) *first_ns = v ? (int64_t) v[2] - 1 : -1;
  if (last_ns) *last_ns = v ? (int64_t) v[3] - 1 : -1;
}

int
pp_run_clock_offset (const PpRun *run, int64_t *offset_ns, int64_t *rtt_ns)
{
  if (offset_ns) *offset_ns = run->clock_offset;
  if (rtt_ns) *rtt_ns = run->clock_rtt;
  return run->clock_generation;
}

size_t
pp_run_n_params (const PpRun *run)
{
  size_t n = 0;
  for (int p = 0; p < run->n_parts; p++)
    n += run->part_params[p];
  return n;
}

PpStatus
pp_run_copy_params (const PpRun *run, float *out, PpError *err)
{
  size_t n_all = pp_run_n_params (run), off = 0;
  double *gathered = NULL;
  PpStatus rc = PP_OK;

  for (int p = 0; p < run->n_parts; p++)
    {
      Stage *st = &run->stages[run->chain_stage[p]];
      size_t n = run->part_params[p];
#ifdef PP_HAVE_CUDA
      if (run->gpu_mode)
        {
          (void) pp_gpu_bind (run->gpu, st->rank, NULL);
          (void) pp_gpu_chunk_copy_params_to_host (st->gchunk, out + off, NULL);
          off += n;
          continue;
        }
#endif
      if (st->chunk != NULL)
        memcpy (out + off, pp_chunk_params (st->chunk), n * sizeof (float));
      else
        memset (out + off, 0, n * sizeof (float));
      off += n;
    }
  if (run->transport->n_processes <= 1)
    return PP_OK;
  /* the other processes' parts: a float is exact in a double, and x + 0 is x */
  if ((gathered = malloc ((n_all ? n_all : 1) * sizeof (double))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t i = 0; i < n_all; i++)
    gathered[i] = out[i];
  rc = run->transport->ops->sum (run->transport, gathered, n_all, err);
  for (size_t i = 0; i < n_all && rc == PP_OK; i++)
    out[i] = (float) gathered[i];
  free (gathered);
  return rc;
}

int
pp_run_have_cuda (void)
{
#ifdef PP_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

const char *
pp_run_device_note (const PpRun *run)
{
#ifdef PP_HAVE_CUDA
  if (run != NULL && run->gpu != NULL)
    return pp_gpu_describe (run->gpu);
#else
  (void) run;
#endif
  return "";
}

const char *
pp_run_timing_note (const PpRun *run)
{
#ifdef PP_HAVE_CUDA
  if (run != NULL && run->gpu != NULL)
    return pp_gpu_cupti_note (run->gpu);
#else
  (void) run;
#endif
  return "";
}

void
pp_run_flush_device_records (PpRun *run)
{
#if defined(PP_HAVE_CUDA) && defined(PP_HAVE_CUPTI)
  if (run != NULL && run->gpu != NULL)
    {
      (void) pp_cupti_flush (pp_gpu_cupti (run->gpu), NULL);
      if (run->ranks != NULL)
        emit_all_pending_spans (run);
    }
#else
  (void) run;
#endif
}

const char *
pp_run_span_name (const PpRun *run, uint32_t id)
{
#if defined(PP_HAVE_CUDA) && defined(PP_HAVE_CUPTI)
  if (run != NULL && run->gpu != NULL)
    return pp_cupti_name (pp_gpu_cupti (run->gpu), id);
#else
  (void) run;
  (void) id;
#endif
  return NULL;
}

uint64_t
pp_run_cupti_dropped (const PpRun *run)
{
#if defined(PP_HAVE_CUDA) && defined(PP_HAVE_CUPTI)
  if (run != NULL && run->gpu != NULL)
    return pp_cupti_dropped (pp_gpu_cupti (run->gpu));
#else
  (void) run;
#endif
  return 0;
}

int
pp_run_rank_sms (const PpRun *run, int rank)
{
#ifdef PP_HAVE_CUDA
  if (run != NULL && run->gpu != NULL && rank >= 0 && rank < run->P)
    return pp_gpu_sms (run->gpu, rank);
#else
  (void) run;
  (void) rank;
#endif
  return 0;
}

const int *
pp_run_blocks_per_part (const PpRun *run, int *n_parts)
{
  if (n_parts)
    *n_parts = run ? run->n_parts : 0;
  return run ? run->blocks : NULL;
}

void
pp_run_free (PpRun *run)
{
  if (run == NULL)
    return;
  pp_batch_pool_free (run->pool);   /* before the buffers it may write */
  if (run->ranks != NULL)
    {
      pthread_mutex_lock (&run->mu);
      run->quit = 1;
      pthread_cond_broadcast (&run->start);
      pthread_mutex_unlock (&run->mu);
      for (int r = 0; r < run->P; r++)
        if (run->ranks[r].started)
          pthread_join (run->ranks[r].thread, NULL);
#ifdef PP_HAVE_CUDA
      /* the last step's spans, before CUPTI stops */
      if (run->gpu != NULL)
        emit_all_pending_spans (run);
#endif
      for (int r = 0; r < run->P; r++)
        {
#ifdef PP_HAVE_CUDA
          free_rank_gpu (run, &run->ranks[r]);
#endif
          free (run->ranks[r].stages);
        }
      free (run->ranks);
    }
  if (run->stages != NULL)
    {
      for (int i = 0; i < run->sched->n_stages; i++)
        {
          Stage *st = &run->stages[i];
#ifdef PP_HAVE_CUDA
          free_stage_gpu (run, st);
#endif
          if (st->chunk != NULL)
            pp_chunk_free (st->chunk);
          free (st->out);
          free (st->din);
          free (st->mb_state);
        }
      free (run->stages);
    }
#ifdef PP_HAVE_CUDA
  pp_gpu_close (run->gpu);
#endif
  if (run->model != NULL)
    pp_model_free (run->model);
  free (run->blocks);
  free (run->chain_stage);
  free (run->x);
  free (run->labels);
  free (run->x_next);
  free (run->labels_next);
  free (run->zeros);
  free (run->loss_mb);
  free (run->part_params);
  free (run->shared_rank);
  free (run->shared_cost);
  if (run->own_transport)
    pp_transport_free (run->transport);
  pthread_mutex_destroy (&run->mu);
  pthread_cond_destroy (&run->start);
  pthread_cond_destroy (&run->done);
  free (run);
}
