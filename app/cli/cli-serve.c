/* cli-serve.c — `schedule --serve`: the simulated plan replayed in real
 * time and served live, as a training job would (cli-serve.h). */
#include "cli-serve.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli-job.h"
#include "cli-plan.h"
#define stop_signal pp_cli_stopping ()
#define now_ns pp_cli_now_ns

/* Sleeps until CLOCK_MONOTONIC reaches t (ns) or a stop signal arrives;
 * returns false in the latter case. */
static bool
sleep_until (int64_t t)
{
  /* Already due (most spans of a fast replay): no syscall.  clock_gettime
   * is a vDSO call, clock_nanosleep a real one (tens of µs each, which
   * capped schedule --serve near 60,000 spans/s whatever its --speed). */
  if (now_ns () >= t)
    return !stop_signal;
  while (!stop_signal)
    {
      /* 50 ms at most at a time: the signal may land on a thread we did
       * not start and could not mask (OpenBLAS starts its pool when it is
       * loaded), and then it does not cut this sleep short. */
      int64_t until = now_ns () + 50 * 1000000LL;
      if (until > t)
        until = t;
      struct timespec ts = { .tv_sec = (time_t) (until / 1000000000),
                             .tv_nsec = (long) (until % 1000000000) };
      int rc = clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
      if ((rc != 0 && rc != EINTR) || now_ns () >= t)
        return !stop_signal;
    }
  return false;
}

typedef struct {
  double start, end;          /* time units, from the step's start */
  int    rank, stage, microbatch, kind;
  const PpAction *action;     /* the schedule's (an overlapped pair's halves) */
} ReplayAction;

static int
cmp_replay (const void *a, const void *b)
{
  const ReplayAction *x = a, *y = b;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* t time units in ns on the replay's clock (ns_per_unit = 1 ms / speed). */
static int64_t
units_ns (double t, double ns_per_unit)
{
  return (int64_t) llround (t * ns_per_unit);
}

typedef struct {
  const PpSchedule   *s;
  const PpSimulation *sim;
  int                 step;
  PpTraceStepPhase    phase;
  int64_t             base;
  double              ns_per_unit;
} Markers;

/* Every rank's step marker of one phase, into one writer.  Only called while
 * the probe's drain has nothing to deliver (right after pp_probe_flush,
 * before the next record), so the drain thread never touches a writer at the
 * same time. */
static PpStatus
write_markers (PpTraceWriter *w, void *user, PpError *err)
{
  const Markers *m = user;
  for (int r = 0; r < m->s->ranks; r++)
    {
      int n = m->s->rank[r].n_actions;
      double t = n == 0 ? 0 : m->phase == PP_TRACE_STEP_BEGIN ? m->sim->timeline[r][0].start
                                                              : m->sim->timeline[r][n - 1].end;
      if (pp_trace_write_step_marker (w, r, m->step, m->phase, m->base + units_ns (t, m->ns_per_unit), err) != PP_OK)
        return err->status;
    }
  return PP_OK;
}

typedef struct {
  const PpTraceDescription *desc;
  const PpSchedule         *s;
  const PpSimulation       *sim;
  double                    ns_per_unit;
} SimHeader;

/* The description and the plan, one unit = h->ns_per_unit ns (the replay's
 * clock, so the plan lines up with the spans at any --speed). */
static PpStatus
write_sim_header (PpTraceWriter *w, void *user, PpError *err)
{
  const SimHeader *h = user;
  if (h->ns_per_unit == PP_CLI_TRACE_NS_PER_UNIT)
    return pp_cli_write_sim_header (w, h->desc, h->s, h->sim, err);
  PpStatus st = pp_trace_write_description (w, h->desc, err);
  if (st == PP_OK)
    st = pp_cli_write_plan (w, h->s, h->sim, h->ns_per_unit * 1e-9, err);
  return st;
}

int
pp_cli_serve (const PpSchedule *s, const PpSimulation *sim, const char *listen,
              int steps, double speed, const char *trace, int argc, char **argv)
{
  const double ns_per_unit = PP_CLI_TRACE_NS_PER_UNIT / (speed > 0 ? speed : 1.0);
  PpError err = { 0 };
  PpTraceDescription desc;
  PpCliJob job;
  ReplayAction *acts = NULL;
  size_t n_acts = 0;
  int status = 1;
  int64_t base, step_ns;

  memset (&job, 0, sizeof job);
  /* The probe's drain thread and the server's thread inherit this mask, so
   * a Ctrl-C lands on the main thread and cuts its sleep short (or on a
   * thread OpenBLAS started before main; sleep_until wakes every 50 ms). */
  pp_cli_catch_stop_signals ();
  pp_cli_mask_stop_signals (SIG_BLOCK);

  acts = calloc ((size_t) pp_schedule_total_actions (s) + 1, sizeof *acts);
  if (acts == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        int sk = pp_cli_span_kind_of_action (a->kind);
        if (sk < 0)
          continue;
        acts[n_acts].start = sim->timeline[r][k].start;
        acts[n_acts].end = sim->timeline[r][k].end;
        acts[n_acts].rank = r;
        acts[n_acts].stage = a->stage;
        acts[n_acts].microbatch = a->microbatch;
        acts[n_acts].kind = sk;
        acts[n_acts].action = a;
        n_acts++;
      }
  qsort (acts, n_acts, sizeof *acts, cmp_replay);

  pp_cli_sim_description (&desc, s, argc, argv);
  if (pp_cli_job_open (&job, s->name, desc.cmdline, true, listen, trace) != 0)
    goto out;
  {
    SimHeader h = { &desc, s, sim, ns_per_unit };
    if (pp_cli_job_write (&job, write_sim_header, &h) != 0)
      goto out;
  }
  if (pp_cli_job_start_probe (&job, NULL) != 0)
    goto out;
  pp_cli_job_announce (&job, listen);

  pp_cli_mask_stop_signals (SIG_UNBLOCK);

  step_ns = units_ns (sim->makespan, ns_per_unit);
  if (step_ns <= 0)
    step_ns = 1;
  base = desc.start_monotonic_ns;
  for (int step = 0; (steps == 0 || step < steps) && !stop_signal; step++)
    {
      bool whole = true;
      Markers m = { s, sim, step, PP_TRACE_STEP_BEGIN, base, ns_per_unit };

      if (pp_cli_job_write (&job, write_markers, &m) != 0)
        goto out;
      for (size_t i = 0; i < n_acts; i++)
        {
          const ReplayAction *a = &acts[i];
          PpSpan sp;

          if (!sleep_until (base + units_ns (a->end, ns_per_unit)))
            {
              whole = false;
              break;
            }
          memset (&sp, 0, sizeof sp);
          sp.start_ns = base + units_ns (a->start, ns_per_unit);
          sp.end_ns = base + units_ns (a->end, ns_per_unit);
          sp.rank = a->rank;
          sp.stage = a->stage;
          sp.microbatch = a->microbatch;
          sp.step = step;
          sp.kind = (uint16_t) a->kind;
          sp.device = 0xffff;
          sp.peer_rank = -1;
          pp_cli_span_set_sub (&sp, a->action);
          pp_probe_record_span (job.probe, &sp);
        }
      if (pp_probe_flush (job.probe, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          goto out;
        }
      if (!whole)
        break;
      m.phase = PP_TRACE_STEP_END;
      if (pp_cli_job_write (&job, write_markers, &m) != 0)
        goto out;
      /* The next step starts when this one's plan ends, or now if the
       * flush made us late. */
      base += step_ns;
      if (base < now_ns ())
        base = now_ns ();
      if (!sleep_until (base))
        break;
    }

  status = pp_cli_job_close (&job);

out:
  pp_cli_job_abort (&job);
  free (acts);
  pp_cli_mask_stop_signals (SIG_UNBLOCK);
  return status;
}
