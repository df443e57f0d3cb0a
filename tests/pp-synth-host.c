/* pp-synth-host.c — writes a small trace with the host kinds and run-delay
 * counters of trace format 1.6, for the host lane's tests (test-render,
 * test-app's self-test).
 *
 * Usage: pp-synth-host FILE
 *
 * Two ranks, GPipe, M = 4, three steps of 34 ms.  Rank 0: forwards of 2 ms
 * back to back from the step's start, backwards of 4 ms from 15 ms on;
 * rank 1: forwards of 1.5 ms every 2 ms from 2.5 ms, backwards of 4 ms
 * from 10 ms.  In rank 0's gap from 8 ms to 15 ms (a wait for rank 1's
 * first backward): 50 µs of the schedule's own code, then a WAIT on rank
 * 1, and in steps 1 and 2 a GC pause from 9 ms to 12.2 ms (3.2 ms).  Rank
 * 0's RUN_DELAY_NS grows by 1.1 ms across that gap in every step and by
 * nothing elsewhere; rank 1's by 0.3 ms across its gap from 4 to 4.5 ms.
 * Each step's batch (HOST_DATA, 0.6 ms) comes before its first forward,
 * zero_grad (HOST_ZERO_GRAD, 0.2 ms) at the end of each optimizer step.
 */
#include <stdio.h>
#include <string.h>

#include "pp-event.h"
#include "pp-trace.h"

#define MS 1000000LL
#define US 1000LL

static PpSpan
span (int rank, int kind, int mb, int step, int64_t t0, int64_t t1, int peer)
{
  PpSpan s;
  memset (&s, 0, sizeof s);
  s.start_ns = t0;
  s.end_ns = t1;
  s.rank = rank;
  s.stage = pp_span_kind_is_host (kind) || kind == PP_SPAN_OPT ? -1 : rank;
  s.microbatch = pp_span_kind_is_host (kind) || kind == PP_SPAN_OPT ? -1 : mb;
  s.step = step;
  s.kind = (uint16_t) kind;
  s.device = 0xffff;
  s.peer_rank = peer;
  return s;
}

static int
die (const char *path, const PpError *err)
{
  fprintf (stderr, "pp-synth-host: %s: %s\n", path, err->msg);
  return 1;
}

int
main (int argc, char **argv)
{
  if (argc != 2)
    {
      fprintf (stderr, "usage: pp-synth-host FILE\n");
      return 2;
    }
  const char *path = argv[1];
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  if (w == NULL)
    return die (path, &err);
  PpTraceDescription desc = { .n_ranks = 2, .n_microbatches = 4, .n_virtual = 1 };
  snprintf (desc.schedule, sizeof desc.schedule, "GPipe");
  snprintf (desc.backend, sizeof desc.backend, "cpu");
  snprintf (desc.host, sizeof desc.host, "synth");
  snprintf (desc.model, sizeof desc.model, "synthetic host lane");
  snprintf (desc.cmdline, sizeof desc.cmdline, "pp-synth-host");
  if (pp_trace_write_description (w, &desc, &err) != PP_OK)
    return die (path, &err);

  double delay[2] = { 0, 0 };
  for (int step = 0; step < 3; step++)
    {
      int64_t T = MS + (int64_t) step * 34 * MS;
      PpSpan sp[64];
      PpCounter c[64];
      int n = 0, nc = 0;
#define EDGE(r, t) (c[nc++] = (PpCounter) { .time_ns = (t), .value = delay[r], .rank = (r), \
                                            .step = step, .kind = PP_COUNTER_RUN_DELAY_NS })
      if (pp_trace_write_step_marker (w, 0, step, PP_TRACE_STEP_BEGIN, T, &err) != PP_OK
          || pp_trace_write_step_marker (w, 1, step, PP_TRACE_STEP_BEGIN, T, &err) != PP_OK)
        return die (path, &err);
      sp[n++] = span (0, PP_SPAN_HOST_DATA, -1, step, T - 800 * US, T - 200 * US, -1);
      for (int m = 0; m < 4; m++)
        {
          /* rank 0 */
          EDGE (0, T + 2 * m * MS);
          sp[n++] = span (0, PP_SPAN_F, m, step, T + 2 * m * MS, T + (2 * m + 2) * MS, -1);
          EDGE (0, T + (2 * m + 2) * MS);
          /* rank 1: its gap from 4 to 4.5 ms holds 0.3 ms of run delay */
          int64_t f0 = T + 2500 * US + 2 * m * MS;
          if (m == 1)
            delay[1] += 0.3 * MS;
          EDGE (1, f0);
          sp[n++] = span (1, PP_SPAN_F, m, step, f0, f0 + 1500 * US, -1);
          EDGE (1, f0 + 1500 * US);
        }
      /* rank 0's gap 8 .. 15 ms */
      sp[n++] = span (0, PP_SPAN_HOST_SCHEDULE, -1, step, T + 8 * MS, T + 8 * MS + 50 * US, -1);
      sp[n++] = span (0, PP_SPAN_WAIT, 3, step, T + 8 * MS + 50 * US, T + 15 * MS, 1);
      if (step > 0)
        sp[n++] = span (0, PP_SPAN_GC, -1, step, T + 9 * MS, T + 12200 * US, -1);
      delay[0] += 1.1 * MS;
      for (int k = 0; k < 4; k++)
        {
          int m = 3 - k;
          int64_t b1 = T + 10 * MS + 4 * k * MS, b0 = T + 15 * MS + 4 * k * MS;
          EDGE (1, b1);
          sp[n++] = span (1, PP_SPAN_B, m, step, b1, b1 + 4 * MS, -1);
          EDGE (1, b1 + 4 * MS);
          EDGE (0, b0);
          sp[n++] = span (0, PP_SPAN_B, m, step, b0, b0 + 4 * MS, -1);
          EDGE (0, b0 + 4 * MS);
        }
      sp[n++] = span (1, PP_SPAN_OPT, -1, step, T + 26 * MS, T + 27 * MS, -1);
      sp[n++] = span (1, PP_SPAN_HOST_ZERO_GRAD, -1, step, T + 26800 * US, T + 27 * MS, -1);
      sp[n++] = span (0, PP_SPAN_OPT, -1, step, T + 31 * MS, T + 32 * MS, -1);
      sp[n++] = span (0, PP_SPAN_HOST_ZERO_GRAD, -1, step, T + 31800 * US, T + 32 * MS, -1);
#undef EDGE
      if (pp_trace_write_spans (w, sp, (size_t) n, &err) != PP_OK)
        return die (path, &err);
      for (int i = 0; i < nc; i++)
        if (pp_trace_write_counter (w, &c[i], &err) != PP_OK)
          return die (path, &err);
      if (pp_trace_write_step_marker (w, 0, step, PP_TRACE_STEP_END, T + 32 * MS, &err) != PP_OK
          || pp_trace_write_step_marker (w, 1, step, PP_TRACE_STEP_END, T + 27 * MS, &err) != PP_OK)
        return die (path, &err);
    }
  if (pp_trace_writer_close (w, &err) != PP_OK)
    return die (path, &err);
  return 0;
}
