/* pp-run.c — the schedule walker: runs a schedule on its ranks, threads of
 * this process over the local transport, or one rank per process over
 * MPI (or NCCL), over a compute backend (pp-run-private.h: CPU or CUDA).
 *
 * A step
 * ------
 * Every rank walks its actions of the schedule in order.  An action's
 * works (one; two for OVERLAP_F_B) first get their inputs: a head's rows of
 * the step's batch, or what the producer stage published, through the
 * transport; then the backend computes each and publishes its output to
 * the consumer; SEND and RECV are implicit in the transport, OPT runs at
 * the step's end.  Then, ranks parked, the backend sums DualPipe's copies'
 * gradients, every rank takes its parts' AdamW step on its thread, and what
 * the reports need of every rank is summed over the processes.  Every
 * schedule stage gets one part of the model, the one its chain position
 * names; in a process that runs one rank of a job, only that rank's stages
 * have parts and buffers.
 *
 * Threads
 * -------
 * One thread per rank, parked on run->start between steps.  pp_run_step
 * bumps the generation, and waits on run->done until every rank reports.
 * Waits are timed (10 ms) so that a stop flag set from a signal handler
 * (which cannot signal a condvar) is noticed; a failure or a stop sets
 * run->abort and wakes every wait of the transport.
 *
 * After an abandoned step (stop or failure) the backend releases the
 * micro-batches still held by the parts (each stage's mb_state says how
 * far each got) and zeroes all gradients, so the run can step again (or be
 * freed).
 */
#define _GNU_SOURCE
#include "pp-run-private.h"

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

#include "pp-transport.h"
#include "pp-kernels.h"

#define WAIT_POLL_NS     10000000LL /* re-check stop/abort while waiting */
#define CLOCK_EVERY_NS   2000000000LL /* clocks drift: measure them again this often */

enum { TASK_ACTIONS, TASK_OPTIMIZER };

static void
cond_init_monotonic (pthread_cond_t *cv)
{
  pthread_condattr_t attr;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (cv, &attr);
  pthread_condattr_destroy (&attr);
}

static PpStatus measure_clock (PpRun *run, PpError *err);

/* The transport's question while it waits. */
static bool
step_abandoned (void *user)
{
  PpRun *run = user;
  return atomic_load (&run->abort) || pp_run_stop_requested (run);
}

static void
deadline_after (struct timespec *ts, int64_t ns)
{
  clock_gettime (CLOCK_MONOTONIC, ts);
  ts->tv_nsec += ns % 1000000000LL;
  ts->tv_sec += ns / 1000000000LL + ts->tv_nsec / 1000000000LL;
  ts->tv_nsec %= 1000000000LL;
}

/* ---- an action: its inputs (may wait), its works, their outputs ---- */

/* The checks every work passes before it runs; fills w's identity. */
static PpStatus
check_work (PpRun *run, PpRunRank *rk, int kind, int stage, int mb, PpRunWork *w, PpError *err)
{
  const PpSchedule *s = run->sched;
  PpRunStage *st;

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

/* A work's inputs: F reads the batch (a head) or the previous stage's
 * output, B and I the next stage's input gradient (but on a tail), W
 * nothing new. */
static PpStatus
prepare (PpRun *run, PpRunRank *rk, int kind, int stage, int mb, PpRunWork *w, PpError *err)
{
  const PpRunBackend *b = run->backend;
  PpRunStage *st;
  PpStatus rc;

  if ((rc = check_work (run, rk, kind, stage, mb, w, err)) != PP_OK)
    return rc;
  st = &run->stages[stage];
  switch (kind)
    {
    case PP_ACT_F:
      if (st->prev >= 0 && (rc = b->receive (run, rk, w, st->prev, 0, err)) != PP_OK)
        return rc;
      b->batch_rows (run, w);
      return PP_OK;
    case PP_ACT_B:
    case PP_ACT_I:
      if (st->next >= 0)
        return b->receive (run, rk, w, st->next, 1, err);
      return PP_OK;
    default:
      return PP_OK;
    }
}

/* The works of an action (one; two for OVERLAP_F_B), their inputs ready.
 * *n = 0 for an action with nothing to compute. */
static PpStatus
prepare_action (PpRun *run, PpRunRank *rk, const PpAction *a, PpRunWork w[2], int *n,
                PpError *err)
{
  PpStatus rc;

  *n = 0;
  switch (a->kind)
    {
    case PP_ACT_F: case PP_ACT_B: case PP_ACT_I: case PP_ACT_W:
      if ((rc = prepare (run, rk, a->kind, a->stage, a->microbatch, &w[0], err)) != PP_OK)
        return rc;
      *n = 1;
      return PP_OK;
    case PP_ACT_OVERLAP_F_B:
      if (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I)
        return pp_error_set (err, PP_EINVAL, "rank %d: OVERLAP_F_B must pair a forward with B or I",
                             rk->rank);
      if ((rc = prepare (run, rk, PP_ACT_F, a->stage, a->microbatch, &w[0], err)) != PP_OK
          || (rc = prepare (run, rk, a->sub_kind, a->sub_stage, a->sub_microbatch, &w[1], err)) != PP_OK)
        return rc;
      *n = 2;
      return PP_OK;
    default:
      return PP_OK;
    }
}

static void
record_memory (PpRun *run, PpRunRank *rk, int64_t t)
{
  size_t bytes = 0;
  int inflight = 0;

  if (run->cfg.probe == NULL)
    return;
  for (int i = 0; i < rk->n_stages; i++)
    {
      size_t b = 0;
      int f = 0;
      run->backend->memory (run, rk->stages[i], &b, &f);
      bytes += b;
      inflight += f;
    }
  pp_run_record_counter (run, rk->rank, PP_COUNTER_ACTIVATION_BYTES, (double) bytes, t);
  pp_run_record_counter (run, rk->rank, PP_COUNTER_INFLIGHT, (double) inflight, t);
}

/* The batch made on the main thread (CPU backend, no pool): a HOST_DATA
 * span on the head's rank, whose first forward reads it, of the step in
 * whose time it was made: before the step's actions (the first step's), or
 * the next step's while the ranks take their optimizer step; either way in
 * the head's gap between steps. */
static void
record_data (PpRun *run, int step, int64_t t0, int64_t t1)
{
  int head = run->stages[run->chain_stage[0]].rank;
  if (pp_transport_runs_rank (run->transport, head))
    pp_run_record_step_span (run, step, head, -1, -1, PP_SPAN_HOST_DATA, t0, t1, -1);
}

/* The straggler on purpose (PpRunConfig.slow_rank): compute that took
 * took_ns takes factor times as long, the rest asleep as on a slower
 * device (the thread leaves its core to the other ranks). */
static void
slow_down (int64_t took_ns, double factor)
{
  double x = (double) took_ns * (factor - 1);
  if (!(x > 0) || x > 1e12)
    return;
  int64_t extra = (int64_t) x, until = pp_probe_now_ns () + extra;
  /* asleep for all but the last 100 us (a sleep overshoots by tens of
   * microseconds), then yielding until the deadline */
  if (extra > 200000)
    {
      int64_t nap = extra - 100000;
      struct timespec ts = { (time_t) (nap / 1000000000), (long) (nap % 1000000000) };
      while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
    }
  while (pp_probe_now_ns () < until)
    sched_yield ();
}

/* Runs one action.  PP_EIO without a message: the step was abandoned. */
static PpStatus
run_action (PpRun *run, PpRunRank *rk, const PpAction *a, PpError *err)
{
  const PpRunBackend *b = run->backend;
  PpRunWork w[2];
  int n = 0;
  int64_t t_end = 0, self_at_end;
  PpStatus rc;

  if ((rc = prepare_action (run, rk, a, w, &n, err)) != PP_OK || n == 0)
    return rc;
  pp_run_open_set (rk, pp_run_span_kind (a->kind), a->stage, a->microbatch, run->step, -1,
                   pp_probe_now_ns ());
  if (pp_run_open_hang (run, rk, a))
    {
      pp_run_abort_step (run);   /* stopped while it hung: the step is abandoned */
      return PP_EIO;
    }
  pp_run_host_block_start (run, rk);
  if ((rc = b->action_begin (run, rk, a, w, n, err)) != PP_OK)
    {
      pp_run_open_clear (rk, pp_probe_now_ns ());
      return rc;
    }
  bool slow = rk->rank == run->cfg.slow_rank && run->cfg.slow_factor > 1;
  for (int i = 0; i < n && rc == PP_OK; i++)
    {
      int64_t c0 = slow ? pp_probe_now_ns () : 0;
      if ((rc = b->compute (run, rk, &w[i], err)) != PP_OK)
        break;
      /* before its end is read and its output sent: a slower device */
      if (slow)
        slow_down (pp_probe_now_ns () - c0, run->cfg.slow_factor);
      run->stages[w[i].stage].mb_state[w[i].k] |= pp_run_work_done_bits (w[i].kind);
      rc = b->work_end (run, rk, &w[i], i, err);
    }
  self_at_end = pp_run_host_self ();
  b->action_end (run, rk, a, rc, &t_end);
  pp_run_open_clear (rk, pp_probe_now_ns ());
  if (rc == PP_OK)
    {
      record_memory (run, rk, t_end);
      pp_run_host_block_end (run, rk, t_end, self_at_end);
    }
  return rc;
}

static void
run_rank_step (PpRun *run, PpRunRank *rk)
{
  const PpRankActions *ra = &run->sched->rank[rk->rank];
  const PpRunBackend *b = run->backend;
  PpError err;

  rk->busy_ns = rk->wait_ns = 0;
  rk->first_ns = rk->last_ns = -1;
  rk->completed = 0;
  memset (&err, 0, sizeof err);
  if (b->rank_step_begin != NULL && b->rank_step_begin (run, rk, &err) != PP_OK)
    {
      pp_run_fail (run, &err);
      return;
    }
  pp_run_host_step_begin (run, rk);
  for (int i = 0; i < ra->n_actions; i++)
    {
      PpStatus rc;

      if (atomic_load (&run->abort))
        return;
      if (pp_run_stop_requested (run))
        {
          pp_run_abort_step (run);
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
          pp_run_fail (run, &err);
          return;
        }
    }
  memset (&err, 0, sizeof err);
  if (b->rank_step_end != NULL && b->rank_step_end (run, rk, &err) != PP_OK)
    {
      pp_run_fail (run, &err);
      return;
    }
  rk->completed = 1;
}

static void *
rank_main (void *data)
{
  PpRunRank *rk = data;
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
  /* this thread's schedstat; host edges where blocks are timed on the host */
  pp_run_host_open (run, rk, run->backend == pp_run_backend_cpu ());

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
          pp_run_open_set (rk, PP_SPAN_OPT, -1, -1, run->step, -1, pp_probe_now_ns ());
          run->backend->optimizer (run, rk);
          pp_run_open_clear (rk, pp_probe_now_ns ());
        }
      else
        run_rank_step (run, rk);

      pthread_mutex_lock (&run->mu);
      if (--run->remaining == 0)
        pthread_cond_broadcast (&run->done);
      pthread_mutex_unlock (&run->mu);
    }
  pp_run_host_close (rk);
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

  run->stages = xcalloc ((size_t) s->n_stages, sizeof (PpRunStage), &oom);
  run->ranks = xcalloc ((size_t) run->P, sizeof (PpRunRank), &oom);
  if (oom)
    goto nomem;
  if (find_chains (run, err) != PP_OK)
    goto fail;

  run->model = pp_model_new (&cfg->model, err);
  if (run->model == NULL)
    goto fail;
  if (cfg->backend == PP_BACKEND_CUDA)
    {
      if ((run->backend = pp_run_backend_cuda ()) == NULL)
        {
          pp_error_set (err, PP_EUNSUPPORTED, "this pipescope was built without CUDA");
          goto fail;
        }
    }
  else if (cfg->backend == PP_BACKEND_CPU)
    run->backend = pp_run_backend_cpu ();
  else
    {
      pp_error_set (err, PP_EINVAL, "unknown backend %d", cfg->backend);
      goto fail;
    }
  if (run->backend->open (run, err) != PP_OK)
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
      PpRunStage *st = &run->stages[i];
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
      if (run->backend->setup_stage (run, i, first[st->part], err) != PP_OK)
        {
          free (first);
          goto fail;
        }
      if ((size_t) st->in_dim > maxdim) maxdim = (size_t) st->in_dim;
      if ((size_t) st->out_dim > maxdim) maxdim = (size_t) st->out_dim;
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
      if (run->stages[run->chain_stage[p]].bk != NULL)
        counts[p] = (double) run->backend->stage_params (run, run->chain_stage[p]);
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
      PpRunRank *rk = &run->ranks[r];
      rk->run = run;
      rk->rank = r;
      rk->last_first = rk->last_last = -1;   /* no step yet */
      rk->stages = xcalloc ((size_t) s->n_stages, sizeof (int), &oom);
      if (oom)
        goto nomem;
      for (int i = 0; i < s->n_stages; i++)
        if (s->stage_rank[i] == r)
          rk->stages[rk->n_stages++] = i;
      if (run->backend->setup_rank != NULL && pp_transport_runs_rank (run->transport, r)
          && run->backend->setup_rank (run, rk, maxdim, err) != PP_OK)
        goto fail;
    }
  if (run->backend->setup_links != NULL && run->backend->setup_links (run, err) != PP_OK)
    goto fail;
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
  if (pp_run_open_start (run, err) != PP_OK)
    goto fail;
  return run;

nomem:
  pp_error_set (err, PP_ENOMEM, "out of memory");
fail:
  pp_run_free (run);
  return NULL;
}

/* ---- steps -------------------------------------------------------------- */

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
        const PpRunRank *rk = &run->ranks[r];
        v[r * 4 + 0] = (double) rk->last_busy;
        v[r * 4 + 1] = (double) rk->last_wait;
        v[r * 4 + 2] = (double) (rk->last_first + 1);
        v[r * 4 + 3] = (double) (rk->last_last + 1);
      }
  for (int i = 0; i < S; i++)
    if (pp_transport_runs_rank (run->transport, run->stages[i].rank))
      {
        const PpRunStage *st = &run->stages[i];
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
  if (pp_run_stop_requested (run))
    return pp_error_set (err, PP_EINVAL, "stopped");

  /* The first step pays for first touches (activation buffers, caches):
   * once a second step runs, the measured costs leave it out. */
  if (run->step == 1)
    for (int i = 0; i < s->n_stages; i++)
      {
        PpRunStage *st = &run->stages[i];
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
    {
      int64_t d0 = pp_probe_now_ns ();
      pp_model_batch (run->model, run->cfg.data_seed, run->step, run->cfg.batch, run->x, run->labels);
      record_data (run, run->step, d0, pp_probe_now_ns ());
    }
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
      if (run->remaining > 0 && pp_run_stop_requested (run) && !atomic_load (&run->abort))
        {
          /* wake ranks that wait for a peer; they poll the flag anyway */
          pthread_mutex_unlock (&run->mu);
          pp_run_abort_step (run);
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
        pp_run_fail (run, &terr);
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
      run->backend->recover (run);
      return rc;
    }

  /* Every copy of a part gets the sum of the copies' gradients (DualPipe),
   * summed in double like the micro-batches; then every rank takes its
   * parts' AdamW step on its own thread. */
  {
    PpStatus rc = run->backend->sum_copies (run, err);
    if (rc != PP_OK)
      {
        run->broken = 1;
        if (run->pool != NULL)
          pp_batch_pool_wait (run->pool);
        return rc;
      }
  }
  pthread_mutex_lock (&run->mu);
  run->remaining = run->n_local;
  run->task = TASK_OPTIMIZER;
  run->gen++;
  pthread_cond_broadcast (&run->start);
  pthread_mutex_unlock (&run->mu);
  if (run->pool != NULL)
    pp_batch_pool_wait (run->pool);
  else
    {
      int64_t d0 = pp_probe_now_ns ();
      pp_model_batch (run->model, run->cfg.data_seed, run->step + 1, run->cfg.batch, run->x_next,
                      run->labels_next);
      record_data (run, run->step, d0, pp_probe_now_ns ());   /* made in this step's time */
    }
  run->next_step = run->step + 1;
  pthread_mutex_lock (&run->mu);
  while (run->remaining > 0)
    pthread_cond_wait (&run->done, &run->mu);
  pthread_mutex_unlock (&run->mu);
  if (run->failed)
    {
      /* only a device's optimizer step can fail (a CUDA error): the weights
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
      pp_run_record_counter (run, run->stages[tail].rank, PP_COUNTER_LOSS, loss, t_end);
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
      size_t n = run->part_params[p];
      run->backend->copy_params ((PpRun *) run, run->chain_stage[p], out + off, n);
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
  return pp_run_backend_cuda () != NULL;
}

const char *
pp_run_device_note (const PpRun *run)
{
  if (run != NULL && run->backend != NULL && run->backend->device_note != NULL)
    return run->backend->device_note (run);
  return "";
}

const char *
pp_run_timing_note (const PpRun *run)
{
  if (run != NULL && run->backend != NULL && run->backend->timing_note != NULL)
    return run->backend->timing_note (run);
  return "";
}

void
pp_run_flush_device_records (PpRun *run)
{
  if (run != NULL && run->backend != NULL && run->backend->flush_records != NULL)
    run->backend->flush_records (run);
}

const char *
pp_run_span_name (const PpRun *run, uint32_t id)
{
  if (run != NULL && run->backend != NULL && run->backend->span_name != NULL)
    return run->backend->span_name (run, id);
  return NULL;
}

uint64_t
pp_run_cupti_dropped (const PpRun *run)
{
  if (run != NULL && run->backend != NULL && run->backend->dropped != NULL)
    return run->backend->dropped (run);
  return 0;
}

int
pp_run_rank_sms (const PpRun *run, int rank)
{
  if (run != NULL && run->backend != NULL && run->backend->rank_sms != NULL
      && rank >= 0 && rank < run->P)
    return run->backend->rank_sms (run, rank);
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
pp_run_end_heartbeat (PpRun *run)
{
  if (run != NULL && run->ranks != NULL)
    pp_run_open_stop (run);
}

void
pp_run_free (PpRun *run)
{
  const PpRunBackend *b;

  if (run == NULL)
    return;
  b = run->backend;
  pp_run_end_heartbeat (run);   /* its last frames, while the sink's writers are open */
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
      /* the last step's device records (spans), before the devices close */
      if (b != NULL && b->ranks_joined != NULL)
        b->ranks_joined (run);
      for (int r = 0; r < run->P; r++)
        {
          if (b != NULL && run->ranks[r].bk != NULL)
            b->free_rank (run, &run->ranks[r]);
          free (run->ranks[r].stages);
        }
      free (run->ranks);
    }
  if (run->stages != NULL)
    {
      for (int i = 0; i < run->sched->n_stages; i++)
        {
          PpRunStage *st = &run->stages[i];
          if (b != NULL && st->bk != NULL)
            b->free_stage (run, st);
          free (st->mb_state);
        }
      free (run->stages);
    }
  if (b != NULL)
    b->close (run);
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
