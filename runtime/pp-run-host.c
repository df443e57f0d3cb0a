/* pp-run-host.c — what a rank's thread does between its blocks, recorded
 * for the runtime's parts of the idle (trace format 1.6, pp-why.h).
 *
 * At every block edge the rank's thread samples three cumulative counters:
 * its run-queue delay (PP_COUNTER_RUN_DELAY_NS) and its time on a CPU
 * (PP_COUNTER_ON_CPU_NS, format 1.7), both from the kernel in one read, and
 * the time pipescope's own recording took on it (PP_COUNTER_PROBE_SELF_NS:
 * every span and counter this file's caller records, and the schedstat
 * read itself, timed with the clock the spans use).  All are recorded at
 * every edge, changed or not, so that a reader finds a sample at each
 * edge whichever it takes (the nearest, the latest before).  The sample at
 * a block's end is stamped at the block's end, the one at its start just
 * before the block's start.  A sample costs a pread (about a microsecond)
 * and two records: where a block starts less than PP_RUN_EDGE_SKIP_NS
 * after the previous one ended, its start takes none, so a pipeline that
 * runs without gaps pays one sample a block.  The previous end's sample is
 * then the nearest to that start too (a block is longer than such a gap),
 * and whatever delay fell in the gap counts as the block's, at most that
 * short gap; the description's model line says so ("no edge samples in gaps under
 * 10 us", app/cli/cli-run.c).
 *
 * The walker's own code between two blocks (the loop, an action's checks,
 * its inputs' bookkeeping, the backend's dispatch) is a HOST_SCHEDULE
 * span: from the end of the previous block's recording (its span, memory
 * counters and edge sample: the probe's own cost) to the next block's
 * start, cut out where the thread waited for a peer's data (a WAIT or
 * not).  A piece shorter than PP_RUN_WAIT_RECORD_NS is not worth a span.
 * HOST_DATA (the batch, made on the main thread) and HOST_ZERO_GRAD
 * (inside the optimizer's block) are recorded where they run (pp-run.c,
 * pp-backend-cpu.c); the loss runs inside the last stage's forward, so
 * there is no HOST_LOSS, and no GC in C.
 *
 * Only for a backend that times its blocks on the host (the CPU one): a
 * GPU's blocks are the device's, and their edges are not the host
 * thread's.
 */
#include "pp-run-private.h"

#include "pp-event.h"


static bool
host_on (const PpRun *run, const PpRunRank *rk)
{
  return run->cfg.probe != NULL && rk->host_on;
}

void
pp_run_host_open (PpRun *run, PpRunRank *rk, bool on)
{
  rk->host_on = on && run->cfg.probe != NULL;   /* nothing to record into: nothing read */
  rk->host_from = -1;
  rk->end_edge_ns = INT64_MIN / 2;
  if (!rk->host_on || pp_schedstat_open (&rk->sched) != 0)
    rk->sched.fd = -1;
}

void
pp_run_host_close (PpRunRank *rk)
{
  pp_schedstat_close (&rk->sched);
}

/* Records the counters at the edge t: delay and on_cpu (-1: the kernel
 * gives none) and self. */
static void
edge_counters (PpRun *run, PpRunRank *rk, int64_t t, int64_t delay, int64_t on_cpu, int64_t self)
{
  if (delay >= 0)
    pp_run_record_counter (run, rk->rank, PP_COUNTER_RUN_DELAY_NS, (double) delay, t);
  if (on_cpu >= 0)
    pp_run_record_counter (run, rk->rank, PP_COUNTER_ON_CPU_NS, (double) on_cpu, t);
  pp_run_record_counter (run, rk->rank, PP_COUNTER_PROBE_SELF_NS, (double) self, t);
}

void
pp_run_host_step_begin (PpRun *run, PpRunRank *rk)
{
  if (host_on (run, rk))
    rk->host_from = pp_probe_now_ns ();
}

void
pp_run_host_block_start (PpRun *run, PpRunRank *rk)
{
  int64_t a, delay, on_cpu, t;

  if (!host_on (run, rk))
    return;
  a = pp_probe_now_ns ();
  pp_run_record_host_schedule (run, rk, rk->host_from, a);
  rk->host_from = -1;
  /* a gap too short to matter has no sample of its own (see the top) */
  if (a - rk->end_edge_ns < PP_RUN_EDGE_SKIP_NS)
    return;
  a = pp_probe_now_ns ();
  pp_schedstat_read (&rk->sched, &on_cpu, &delay);
  t = pp_probe_now_ns ();
  pp_run_host_add_self (t - a);
  edge_counters (run, rk, t, delay, on_cpu, pp_run_host_self ());
}

void
pp_run_host_block_end (PpRun *run, PpRunRank *rk, int64_t t_end, int64_t self_at_end)
{
  int64_t a, delay, on_cpu;

  if (!host_on (run, rk))
    return;
  a = pp_probe_now_ns ();
  pp_schedstat_read (&rk->sched, &on_cpu, &delay);
  pp_run_host_add_self (pp_probe_now_ns () - a);
  edge_counters (run, rk, t_end, delay, on_cpu, self_at_end);
  rk->end_edge_ns = t_end;
  rk->host_from = pp_probe_now_ns ();
}
