/* pp-executor.c — runs a schedule on P rank threads over a local transport.
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
#include "pp-executor.h"

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

#include "pp-kernels.h"

#define WAIT_POLL_NS     10000000LL /* re-check stop/abort while waiting */
#define WAIT_RECORD_NS   1000LL     /* shorter waits are not worth a span */

enum { MB_FWD = 1, MB_INPUT = 2, MB_DONE = 4 };

typedef struct {
  int      rank, part, chain, prev, next;
  int      mb_lo, mb_hi, n_mb;
  int      in_dim, out_dim;
  PpChunk *chunk;
  float   *out;           /* [n_mb][rows * out_dim], NULL on a tail */
  float   *din;           /* [n_mb][rows * in_dim], NULL on a head */

  pthread_mutex_t mu;
  pthread_cond_t  cv;
  uint8_t *out_ready;     /* [n_mb] under mu */
  uint8_t *din_ready;     /* [n_mb] under mu */
  uint8_t *mb_state;      /* [n_mb] MB_*, touched by the owning rank only */

  /* measured: sums of ns and counts over all steps (owning rank only) */
  double   sum_f, sum_b, sum_i, sum_w;
  long     n_f, n_b, n_i, n_w;
} Stage;

typedef struct {
  struct _PpRun *run;
  int            rank;
  pthread_t      thread;
  int            started;
  int            completed;  /* ran every action of the step */
  int64_t        busy_ns, wait_ns, first_ns, last_ns;
  /* of the last finished step, for pp_run_rank_times */
  int64_t        last_busy, last_wait, last_span;
  int           *stages;     /* stages this rank holds */
  int            n_stages;
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
broadcast_all (PpRun *run)
{
  for (int s = 0; s < run->sched->n_stages; s++)
    {
      Stage *st = &run->stages[s];
      pthread_mutex_lock (&st->mu);
      pthread_cond_broadcast (&st->cv);
      pthread_mutex_unlock (&st->mu);
    }
}

static void
abort_step (PpRun *run)
{
  atomic_store (&run->abort, 1);
  broadcast_all (run);
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
record_span (PpRun *run, int rank, int stage, int mb, int kind, int64_t t0, int64_t t1,
             int peer)
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
  sp.step = run->step;
  sp.kind = (uint16_t) kind;
  sp.device = 0xffff;
  sp.stream = 0;
  sp.peer_rank = peer;
  pp_probe_record_span (run->cfg.probe, &sp);
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
 * output if grad == 0, its input gradient if grad == 1).  PP_OK when ready;
 * PP_EINVAL with err filled for a wait that can never end (same rank);
 * PP_EIO without a message when the step was abandoned meanwhile. */
static PpStatus
wait_ready (PpRun *run, Rank *rk, int ps, int grad, int stage, int mb, PpError *err)
{
  Stage *p = &run->stages[ps];
  int k = mb - p->mb_lo;
  uint8_t *flags = grad ? p->din_ready : p->out_ready;
  int64_t t0, t1;
  bool ready;

  if (k < 0 || k >= p->n_mb)
    return pp_error_set (err, PP_EINVAL,
                         "stage %d, micro-batch %d: stage %d does not see that micro-batch",
                         stage, mb, ps);
  pthread_mutex_lock (&p->mu);
  if (flags[k])
    {
      pthread_mutex_unlock (&p->mu);
      return PP_OK;
    }
  if (p->rank == rk->rank)
    {
      pthread_mutex_unlock (&p->mu);
      return pp_error_set (err, PP_EINVAL,
                           "rank %d: stage %d, micro-batch %d needs the %s of stage %d, "
                           "which the same rank has not run yet",
                           rk->rank, stage, mb, grad ? "input gradient" : "forward", ps);
    }
  t0 = pp_probe_now_ns ();
  while (!flags[k] && !atomic_load (&run->abort) && !stop_requested (run))
    {
      struct timespec ts;
      deadline_after (&ts, WAIT_POLL_NS);
      pthread_cond_timedwait (&p->cv, &p->mu, &ts);
    }
  ready = flags[k] != 0;
  pthread_mutex_unlock (&p->mu);
  t1 = pp_probe_now_ns ();
  rk->wait_ns += t1 - t0;
  if (t1 - t0 > WAIT_RECORD_NS)
    record_span (run, rk->rank, stage, mb, PP_SPAN_WAIT, t0, t1, p->rank);
  return ready ? PP_OK : PP_EIO;
}

static void
publish (Stage *st, int grad, int mb)
{
  pthread_mutex_lock (&st->mu);
  (grad ? st->din_ready : st->out_ready)[mb - st->mb_lo] = 1;
  pthread_cond_broadcast (&st->cv);
  pthread_mutex_unlock (&st->mu);
}

/* ---- the halves of an action: get inputs (may wait), compute, publish ---- */

typedef struct {
  int           kind;     /* PP_ACT_F, B, I, W */
  int           stage, mb, k;
  const float  *input;    /* F: input rows; B/I: dout (NULL on a tail) */
  const int32_t *labels;
} Work;

static PpStatus
prepare (PpRun *run, Rank *rk, int kind, int stage, int mb, Work *w, PpError *err)
{
  const PpSchedule *s = run->sched;
  Stage *st;
  PpStatus rc;

  if (stage < 0 || stage >= s->n_stages || s->stage_rank[stage] != rk->rank)
    return pp_error_set (err, PP_EINVAL, "rank %d: stage %d is not on this rank", rk->rank, stage);
  st = &run->stages[stage];
  if (mb < st->mb_lo || mb >= st->mb_hi)
    return pp_error_set (err, PP_EINVAL, "stage %d does not see micro-batch %d", stage, mb);
  w->kind = kind;
  w->stage = stage;
  w->mb = mb;
  w->k = mb - st->mb_lo;
  w->input = NULL;
  w->labels = NULL;
  switch (kind)
    {
    case PP_ACT_F:
      if (st->prev < 0)
        w->input = run->x + (size_t) mb * (size_t) run->rows * (size_t) st->in_dim;
      else
        {
          Stage *p = &run->stages[st->prev];
          if ((rc = wait_ready (run, rk, st->prev, 0, stage, mb, err)) != PP_OK)
            return rc;
          w->input = p->out + (size_t) (mb - p->mb_lo) * (size_t) run->rows * (size_t) p->out_dim;
        }
      if (st->next < 0)
        w->labels = run->labels + (size_t) mb * (size_t) run->rows;
      return PP_OK;
    case PP_ACT_B:
    case PP_ACT_I:
      if (st->next >= 0)
        {
          Stage *n = &run->stages[st->next];
          if ((rc = wait_ready (run, rk, st->next, 1, stage, mb, err)) != PP_OK)
            return rc;
          w->input = n->din + (size_t) (mb - n->mb_lo) * (size_t) run->rows * (size_t) n->in_dim;
        }
      return PP_OK;
    case PP_ACT_W:
      return PP_OK;
    default:
      return pp_error_set (err, PP_EINVAL, "rank %d: cannot run action kind %s",
                           rk->rank, pp_action_kind_name ((PpActionKind) kind));
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
      if (rc == PP_OK)
        st->mb_state[w->k] |= MB_FWD;
      return rc;
    case PP_ACT_B:
    case PP_ACT_I:
      {
        float *din = st->din ? st->din + (size_t) w->k * rows * (size_t) st->in_dim : NULL;
        if (w->kind == PP_ACT_B)
          rc = pp_chunk_backward (st->chunk, w->mb, w->input, din, loss_scale, err);
        else
          rc = pp_chunk_backward_input (st->chunk, w->mb, w->input, din, loss_scale, err);
        if (rc == PP_OK)
          st->mb_state[w->k] |= (w->kind == PP_ACT_B) ? (MB_INPUT | MB_DONE) : MB_INPUT;
        return rc;
      }
    case PP_ACT_W:
      rc = pp_chunk_backward_weight (st->chunk, w->mb, err);
      if (rc == PP_OK)
        st->mb_state[w->k] |= MB_DONE;
      return rc;
    default:
      return pp_error_set (err, PP_EINVAL, "cannot run action kind %d", w->kind);
    }
}

static void
after_compute (PpRun *run, const Work *w, int64_t ns)
{
  Stage *st = &run->stages[w->stage];

  switch (w->kind)
    {
    case PP_ACT_F:
      st->sum_f += (double) ns; st->n_f++;
      if (st->next >= 0)
        publish (st, 0, w->mb);
      break;
    case PP_ACT_B:
      st->sum_b += (double) ns; st->n_b++;
      if (st->prev >= 0)
        publish (st, 1, w->mb);
      break;
    case PP_ACT_I:
      st->sum_i += (double) ns; st->n_i++;
      if (st->prev >= 0)
        publish (st, 1, w->mb);
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
      PpChunk *c = run->stages[rk->stages[i]].chunk;
      bytes += pp_chunk_activation_bytes (c);
      inflight += pp_chunk_inflight (c);
    }
  record_counter (run, rk->rank, PP_COUNTER_ACTIVATION_BYTES, (double) bytes, t);
  record_counter (run, rk->rank, PP_COUNTER_INFLIGHT, (double) inflight, t);
}

/* Runs one action.  PP_EIO without a message: the step was abandoned. */
static PpStatus
run_action (PpRun *run, Rank *rk, const PpAction *a, PpError *err)
{
  Work w[2];
  int n = 1;
  int64_t t0, tm, t1;
  PpStatus rc;

  switch (a->kind)
    {
    case PP_ACT_F: case PP_ACT_B: case PP_ACT_I: case PP_ACT_W:
      if ((rc = prepare (run, rk, a->kind, a->stage, a->microbatch, &w[0], err)) != PP_OK)
        return rc;
      break;
    case PP_ACT_OVERLAP_F_B:
      if (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I)
        return pp_error_set (err, PP_EINVAL, "rank %d: OVERLAP_F_B must pair a forward with B or I",
                             rk->rank);
      if ((rc = prepare (run, rk, PP_ACT_F, a->stage, a->microbatch, &w[0], err)) != PP_OK
          || (rc = prepare (run, rk, a->sub_kind, a->sub_stage, a->sub_microbatch, &w[1], err)) != PP_OK)
        return rc;
      n = 2;
      break;
    default:
      /* SEND/RECV are implicit in the local transport; OPT runs at the step end. */
      return PP_OK;
    }

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

static void
run_rank_step (PpRun *run, Rank *rk)
{
  const PpRankActions *ra = &run->sched->rank[rk->rank];
  PpError err;

  rk->busy_ns = rk->wait_ns = 0;
  rk->first_ns = rk->last_ns = -1;
  rk->completed = 0;
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
  rk->completed = 1;
}

enum { TASK_ACTIONS, TASK_OPTIMIZER };

/* The optimizer step of the rank's own parts, on the rank's thread, so the
 * ranks update in parallel. */
static void
run_rank_optimizer (PpRun *run, Rank *rk)
{
  int64_t t0 = pp_probe_now_ns (), t1;
  for (int i = 0; i < rk->n_stages; i++)
    {
      PpChunk *c = run->stages[rk->stages[i]].chunk;
      pp_chunk_adamw (c, run->cfg.lr, 0.9f, 0.999f, 1e-8f, run->cfg.weight_decay, run->step + 1);
      pp_chunk_zero_grads (c);
    }
  t1 = pp_probe_now_ns ();
  if (rk->n_stages > 0)
    record_span (run, rk->rank, -1, -1, PP_SPAN_OPT, t0, t1, -1);
  rk->last_busy = rk->busy_ns;
  rk->last_wait = rk->wait_ns;
  rk->last_span = rk->first_ns >= 0 ? rk->last_ns - rk->first_ns : 0;
}

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
        run_rank_optimizer (run, rk);
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
  pthread_mutex_init (&run->mu, NULL);
  pthread_cond_init (&run->start, NULL);
  cond_init_monotonic (&run->done);
  atomic_init (&run->abort, 0);

  run->stages = xcalloc ((size_t) s->n_stages, sizeof (Stage), &oom);
  run->ranks = xcalloc ((size_t) run->P, sizeof (Rank), &oom);
  if (oom)
    goto nomem;
  for (int i = 0; i < s->n_stages; i++)
    {
      pthread_mutex_init (&run->stages[i].mu, NULL);
      cond_init_monotonic (&run->stages[i].cv);
    }

  if (find_chains (run, err) != PP_OK)
    goto fail;

  run->model = pp_model_new (&cfg->model, err);
  if (run->model == NULL)
    goto fail;
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
      st->out_ready = xcalloc ((size_t) st->n_mb, 1, &oom);
      st->din_ready = xcalloc ((size_t) st->n_mb, 1, &oom);
      st->mb_state = xcalloc ((size_t) st->n_mb, 1, &oom);
      if (oom)
        {
          free (first);
          goto nomem;
        }
    }
  free (first);

  run->x = xcalloc ((size_t) cfg->batch * (size_t) run->stages[run->chain_stage[0]].in_dim,
                    sizeof (float), &oom);
  run->labels = xcalloc ((size_t) cfg->batch, sizeof (int32_t), &oom);
  run->x_next = xcalloc ((size_t) cfg->batch * (size_t) run->stages[run->chain_stage[0]].in_dim,
                         sizeof (float), &oom);
  run->labels_next = xcalloc ((size_t) cfg->batch, sizeof (int32_t), &oom);
  run->next_step = -1;
  run->zeros = xcalloc ((size_t) run->rows * maxdim, sizeof (float), &oom);
  run->loss_mb = xcalloc ((size_t) run->M, sizeof (double), &oom);
  if (oom)
    goto nomem;

  for (int r = 0; r < run->P; r++)
    {
      Rank *rk = &run->ranks[r];
      rk->run = run;
      rk->rank = r;
      rk->stages = xcalloc ((size_t) s->n_stages, sizeof (int), &oom);
      if (oom)
        goto nomem;
      for (int i = 0; i < s->n_stages; i++)
        if (s->stage_rank[i] == r)
          rk->stages[rk->n_stages++] = i;
    }
  for (int r = 0; r < run->P; r++)
    {
      int e = pthread_create (&run->ranks[r].thread, NULL, rank_main, &run->ranks[r]);
      if (e != 0)
        {
          pp_error_set (err, PP_EIO, "cannot start the thread of rank %d: %s", r, strerror (e));
          goto fail;
        }
      run->ranks[r].started = 1;
      n_created++;
    }
  (void) n_created;
  return run;

nomem:
  pp_error_set (err, PP_ENOMEM, "out of memory");
fail:
  pp_run_free (run);
  return NULL;
}

/* ---- steps -------------------------------------------------------------- */

/* Releases what an abandoned step left in the chunks and zeroes gradients. */
static void
recover (PpRun *run)
{
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      Stage *st = &run->stages[i];
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
        st->sum_f = st->sum_b = st->sum_i = st->sum_w = 0;
        st->n_f = st->n_b = st->n_i = st->n_w = 0;
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
  else
    pp_model_batch (run->model, run->cfg.data_seed, run->step, run->cfg.batch, run->x, run->labels);
  run->next_step = -1;
  for (int i = 0; i < s->n_stages; i++)
    {
      Stage *st = &run->stages[i];
      pthread_mutex_lock (&st->mu);
      memset (st->out_ready, 0, (size_t) st->n_mb);
      memset (st->din_ready, 0, (size_t) st->n_mb);
      pthread_mutex_unlock (&st->mu);
      memset (st->mb_state, 0, (size_t) st->n_mb);
    }
  for (int m = 0; m < run->M; m++)
    run->loss_mb[m] = 0;

  pthread_mutex_lock (&run->mu);
  atomic_store (&run->abort, 0);
  run->failed = 0;
  memset (&run->first_err, 0, sizeof run->first_err);
  run->remaining = run->P;
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
    all_done &= run->ranks[r].completed;
  stopped = !all_done;
  if (run->failed || stopped)
    {
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
  for (int p = 0; p < run->n_parts && run->n_chains > 1; p++)
    {
      PpChunk *c0 = run->stages[run->chain_stage[p]].chunk;
      for (int c = 1; c < run->n_chains; c++)
        pp_chunk_add_grads (c0, run->stages[run->chain_stage[c * run->n_parts + p]].chunk);
      for (int c = 1; c < run->n_chains; c++)
        pp_chunk_copy_grads (run->stages[run->chain_stage[c * run->n_parts + p]].chunk, c0);
    }
  pthread_mutex_lock (&run->mu);
  run->remaining = run->P;
  run->task = TASK_OPTIMIZER;
  run->gen++;
  pthread_cond_broadcast (&run->start);
  pthread_mutex_unlock (&run->mu);
  pp_model_batch (run->model, run->cfg.data_seed, run->step + 1, run->cfg.batch, run->x_next,
                  run->labels_next);
  run->next_step = run->step + 1;
  pthread_mutex_lock (&run->mu);
  while (run->remaining > 0)
    pthread_cond_wait (&run->done, &run->mu);
  pthread_mutex_unlock (&run->mu);

  for (int m = 0; m < run->M; m++)
    loss += run->loss_mb[m];
  loss /= (double) run->cfg.batch;
  t_end = pp_probe_now_ns ();
  {
    int tail = run->chain_stage[run->n_parts - 1];
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
      const Stage *st = &run->stages[i];
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
      cm->comm[i] = 0;
    }
  return cm;
}

void
pp_run_rank_times (const PpRun *run, int rank, int64_t *busy_ns, int64_t *wait_ns,
                   int64_t *span_ns)
{
  const Rank *rk = (run != NULL && rank >= 0 && rank < run->P) ? &run->ranks[rank] : NULL;

  if (busy_ns) *busy_ns = rk ? rk->last_busy : 0;
  if (wait_ns) *wait_ns = rk ? rk->last_wait : 0;
  if (span_ns) *span_ns = rk ? rk->last_span : 0;
}

size_t
pp_run_n_params (const PpRun *run)
{
  size_t n = 0;
  for (int p = 0; p < run->n_parts; p++)
    n += pp_chunk_n_params (run->stages[run->chain_stage[p]].chunk);
  return n;
}

void
pp_run_copy_params (const PpRun *run, float *out)
{
  for (int p = 0; p < run->n_parts; p++)
    {
      PpChunk *c = run->stages[run->chain_stage[p]].chunk;
      size_t n = pp_chunk_n_params (c);
      memcpy (out, pp_chunk_params (c), n * sizeof (float));
      out += n;
    }
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
  if (run->ranks != NULL)
    {
      pthread_mutex_lock (&run->mu);
      run->quit = 1;
      pthread_cond_broadcast (&run->start);
      pthread_mutex_unlock (&run->mu);
      for (int r = 0; r < run->P; r++)
        if (run->ranks[r].started)
          pthread_join (run->ranks[r].thread, NULL);
      for (int r = 0; r < run->P; r++)
        free (run->ranks[r].stages);
      free (run->ranks);
    }
  if (run->stages != NULL)
    {
      for (int i = 0; i < run->sched->n_stages; i++)
        {
          Stage *st = &run->stages[i];
          if (st->chunk != NULL)
            pp_chunk_free (st->chunk);
          free (st->out);
          free (st->din);
          free (st->out_ready);
          free (st->din_ready);
          free (st->mb_state);
          pthread_mutex_destroy (&st->mu);
          pthread_cond_destroy (&st->cv);
        }
      free (run->stages);
    }
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
  pthread_mutex_destroy (&run->mu);
  pthread_cond_destroy (&run->start);
  pthread_cond_destroy (&run->done);
  free (run);
}
