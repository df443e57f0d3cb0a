/* pp-run-common.c — what the schedule walker and its compute backends both
 * call (pp-run-private.h): recording spans and counters, failing or
 * abandoning a step, waiting for a stage boundary's data. */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include "pp-run-private.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "pp-transport.h"

uint8_t
pp_run_work_done_bits (int kind)
{
  switch (kind)
    {
    case PP_ACT_F: return PP_MB_FWD;
    case PP_ACT_B: return PP_MB_INPUT | PP_MB_DONE;
    case PP_ACT_I: return PP_MB_INPUT;
    case PP_ACT_W: return PP_MB_DONE;
    default: return 0;
    }
}

bool
pp_run_stop_requested (const PpRun *run)
{
  /* an atomic load: the flag may be set by a signal handler or, as the
   * tests do, by another thread */
  return run->cfg.stop != NULL && __atomic_load_n (run->cfg.stop, __ATOMIC_RELAXED) != 0;
}

void
pp_run_abort_step (PpRun *run)
{
  atomic_store (&run->abort, 1);
  run->transport->ops->interrupt (run->transport);
}

void
pp_run_fail (PpRun *run, const PpError *e)
{
  pthread_mutex_lock (&run->mu);
  if (!run->failed)
    {
      run->failed = 1;
      run->first_err = *e;
    }
  pthread_mutex_unlock (&run->mu);
  pp_run_abort_step (run);
}

/* What recording took on this thread: the record helpers below and the
 * schedstat reads of pp-run-host.c add to it; each rank thread reads its
 * own (PROBE_SELF_NS). */
static _Thread_local int64_t self_ns;

int64_t
pp_run_host_self (void)
{
  return self_ns;
}

void
pp_run_host_add_self (int64_t ns)
{
  self_ns += ns;
}

/* A host span of rank's work, step's, with no device, stream or name. */
static void
host_span (PpSpan *sp, int step, int rank, int stage, int mb, int kind, int64_t t0, int64_t t1, int peer)
{
  memset (sp, 0, sizeof *sp);
  sp->start_ns = t0;
  sp->end_ns = t1;
  sp->rank = rank;
  sp->stage = stage;
  sp->microbatch = mb;
  sp->step = step;
  sp->kind = (uint16_t) kind;
  sp->device = 0xffff;
  sp->peer_rank = peer;
}

void
pp_run_record_step_span (PpRun *run, int step, int rank, int stage, int mb, int kind, int64_t t0,
                         int64_t t1, int peer)
{
  PpSpan sp;

  if (run->cfg.probe == NULL)
    return;
  int64_t a = pp_probe_now_ns ();
  host_span (&sp, step, rank, stage, mb, kind, t0, t1, peer);
  pp_probe_record_span (run->cfg.probe, &sp);
  pp_run_host_add_self (pp_probe_now_ns () - a);
}

void
pp_run_record_span (PpRun *run, int rank, int stage, int mb, int kind, int64_t t0, int64_t t1,
                    int peer)
{
  pp_run_record_step_span (run, run->step, rank, stage, mb, kind, t0, t1, peer);
}

void
pp_run_record_action_span (PpRun *run, int rank, const PpAction *a, int64_t t0, int64_t t1)
{
  PpSpan sp;

  if (run->cfg.probe == NULL)
    return;
  int64_t t_rec = pp_probe_now_ns ();
  host_span (&sp, run->step, rank, a->stage, a->microbatch, pp_run_span_kind (a->kind), t0, t1, -1);
  if (a->kind == PP_ACT_OVERLAP_F_B && (a->sub_kind == PP_ACT_B || a->sub_kind == PP_ACT_I))
    {
      /* both halves of the pair (trace format 1.2) */
      sp.sub_kind = (uint16_t) pp_run_span_kind (a->sub_kind);
      sp.sub_stage = a->sub_stage;
      sp.sub_microbatch = a->sub_microbatch;
    }
  pp_probe_record_span (run->cfg.probe, &sp);
  pp_run_host_add_self (pp_probe_now_ns () - t_rec);
}

void
pp_run_record_counter (PpRun *run, int rank, int kind, double value, int64_t t)
{
  PpCounter c;

  if (run->cfg.probe == NULL)
    return;
  int64_t a = pp_probe_now_ns ();
  memset (&c, 0, sizeof c);
  c.time_ns = t;
  c.value = value;
  c.rank = rank;
  c.step = run->step;
  c.kind = (uint16_t) kind;
  pp_probe_record_counter (run->cfg.probe, &c);
  pp_run_host_add_self (pp_probe_now_ns () - a);
}

int
pp_run_span_kind (int act)
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

void
pp_run_record_host_schedule (PpRun *run, PpRunRank *rk, int64_t t0, int64_t t1)
{
  if (rk->host_on && t0 >= 0 && t1 - t0 >= PP_RUN_WAIT_RECORD_NS)
    pp_run_record_span (run, rk->rank, -1, -1, PP_SPAN_HOST_SCHEDULE, t0, t1, -1);
}

PpStatus
pp_run_wait_ready (PpRun *run, PpRunRank *rk, int ps, int grad, int stage, int mb,
                   const float **data, bool record, PpError *err)
{
  int64_t t0 = pp_probe_now_ns (), t1;
  const float *got = NULL;
  PpRunOpen was;
  bool peer = run->stages[ps].rank != rk->rank;
  if (peer)
    {
      pp_run_open_get (rk, &was);
      pp_run_open_set (rk, PP_SPAN_WAIT, stage, mb, run->step, run->stages[ps].rank, t0);
    }
  PpStatus rc = run->transport->ops->acquire (run->transport, ps, grad, mb, &got, err);
  if (peer)
    pp_run_open_set (rk, was.kind, was.stage, was.mb, was.step, was.peer, was.t0);

  t1 = pp_probe_now_ns ();
  rk->wait_ns += t1 - t0;
  /* the schedule's own code up to this wait; the next piece starts at its end */
  if (rk->host_on)
    {
      pp_run_record_host_schedule (run, rk, rk->host_from, t0);
      rk->host_from = t1;
    }
  /* A producer on this rank ran before on this thread: time spent here is
   * the machine's (a descheduled thread), not a wait for a peer. */
  if (t1 - t0 > PP_RUN_WAIT_RECORD_NS && record && rc != PP_EINVAL && run->stages[ps].rank != rk->rank)
    pp_run_record_span (run, rk->rank, stage, mb, PP_SPAN_WAIT, t0, t1, run->stages[ps].rank);
  if (data != NULL)
    *data = got;
  return rc;
}

void
pp_run_end_rank_step (PpRun *run, PpRunRank *rk, int64_t t0, int64_t t1)
{
  if (rk->n_stages > 0)
    pp_run_record_span (run, rk->rank, -1, -1, PP_SPAN_OPT, t0, t1, -1);
  rk->last_busy = rk->busy_ns;
  rk->last_wait = rk->wait_ns;
  rk->last_first = rk->first_ns;
  rk->last_last = rk->last_ns;
}

long
pp_run_usable_cores (void)
{
  cpu_set_t set;
  CPU_ZERO (&set);
  if (sched_getaffinity (0, sizeof set, &set) == 0 && CPU_COUNT (&set) > 0)
    return CPU_COUNT (&set);
  return sysconf (_SC_NPROCESSORS_ONLN);
}
