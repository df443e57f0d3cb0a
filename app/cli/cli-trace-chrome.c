/* cli-trace-chrome.c — export --format chrome: the Chrome trace JSON for
 * chrome://tracing and Perfetto: the spans on their tracks, named as
 * blocks, the counters, and the parts the other files write. */
#include "cli-trace-private.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
row_of (int kind)
{
  switch (kind)
    {
    case PP_SPAN_SEND_F: case PP_SPAN_RECV_F: case PP_SPAN_SEND_B: case PP_SPAN_RECV_B:
    case PP_SPAN_WAIT:
      return ROW_COMM;
    case PP_SPAN_KERNEL: case PP_SPAN_MEMCPY: case PP_SPAN_MEMSET:
      return ROW_DEVICE;
    default:
      /* host work (GC, HOST_*) on a row of its own: a GC inside a block
       * would overlap the block, and a thread's slices must nest; a
       * LAUNCH is a host call, made inside the host's code */
      return pp_span_kind_is_host (kind) || kind == PP_SPAN_LAUNCH ? ROW_HOST : ROW_COMPUTE;
    }
}

/* Bits of Chrome.rows past the rows: the track holds counters. */
#define TRACK_COUNTERS (1u << N_ROWS)

/* Counter tracks a process (a rank without places; Perfetto draws "C"
 * events as a track under the process): the loss per step, activation memory in MiB, micro-batches in
 * flight, device memory, the collectives a step (calls, MiB) the hook counted (format 1.5), and the
 * block-edge counters (1.6) as what each sample added since the track's one before, in ms: the time
 * the thread was descheduled, on a CPU (1.7), and the probe's own recording cost (cumulative, they would only climb).
 * -1 out of memory. */
static int
write_counters (FILE *f, const Trace *t, int64_t base, const unsigned char *rows, size_t n_pids)
{
  /* per track, the last value of each block-edge counter (NaN: none yet) */
  double *last = malloc (3 * n_pids * sizeof *last);
  if (last == NULL)
    return -1;
  for (size_t i = 0; i < 3 * n_pids; i++)
    last[i] = NAN;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *c = &t->counters[i];
      /* a counter of a rank with no track (past the trace's ranks): none */
      size_t pid = (size_t) item_pid (t, t->counter_process[i], c->rank);
      if (pid >= n_pids || !(rows[pid] & TRACK_COUNTERS) || !keep_item (t, t->counter_process[i], c->rank, c->step))
        continue;
      const char *name, *unit;
      double v = c->value;
      switch (c->kind)
        {
        case PP_COUNTER_LOSS: name = "loss"; unit = "loss"; break;
        case PP_COUNTER_ACTIVATION_BYTES: name = "activation memory (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_DEVICE_BYTES: name = "device memory (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_INFLIGHT: name = "micro-batches in flight"; unit = "micro-batches"; break;
        case PP_COUNTER_COLLECTIVE_CALLS: name = "collective calls a step"; unit = "calls"; break;
        case PP_COUNTER_COLLECTIVE_BYTES: name = "collective bytes a step (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_RUN_DELAY_NS: name = "descheduled (ms since the last sample)"; unit = "ms"; break;
        case PP_COUNTER_PROBE_SELF_NS: name = "probe's own cost (ms since the last sample)"; unit = "ms"; break;
        case PP_COUNTER_ON_CPU_NS: name = "on a CPU (ms since the last sample)"; unit = "ms"; break;
        default: continue;
        }
      if (!isfinite (v))
        continue;
      if (c->kind == PP_COUNTER_RUN_DELAY_NS || c->kind == PP_COUNTER_PROBE_SELF_NS
          || c->kind == PP_COUNTER_ON_CPU_NS)
        {
          double *prev = &last[3 * pid + (c->kind == PP_COUNTER_PROBE_SELF_NS ? 1
                                          : c->kind == PP_COUNTER_ON_CPU_NS ? 2 : 0)];
          double rise = isnan (*prev) ? 0 : (v - *prev) / 1e6;
          *prev = v;
          v = rise;
        }
      /* each process's own: two replicas' losses are two series */
      fprintf (f, ",\n{\"name\":\"%s\",\"ph\":\"C\",\"pid\":%d,\"ts\":", name,
               out_pid (t, item_pid (t, t->counter_process[i], c->rank)));
      print_us_since (f, clamp_time (c->time_ns), base);
      fprintf (f, ",\"args\":{\"%s\":%.9g}}", unit, v);
    }
  free (last);
  return 0;
}

/* base: the zero times count from (export_base); run_clock: that zero is
 * the run's start, lowered to anything of the export before it (the plan)
 * so that no ts is negative. */
int
write_chrome (FILE *f, const Trace *t, const AppView *v, int64_t base, bool run_clock)
{
  int n_ranks = n_ranks_of (t);
  int V = t->has_desc && t->desc.n_virtual > 1 ? t->desc.n_virtual : 1;
  /* bit per used row, by track: a rank's, or with places a process's
   * (pids below 65535), a rank's no process placed (65536 + rank) and a
   * pipeline rank's plan (131072 + rank) */
  size_t n_pids = t->rank_pid != NULL ? (size_t) PLAN_PID_BASE + (size_t) n_ranks : (size_t) n_ranks;
  unsigned char *rows = calloc (n_pids + 1, 1);
  StepSlice *sl = NULL;
  size_t n_sl = 0;
  bool first = true;

  if (rows == NULL || step_slices (t, &sl, &n_sl) != 0)
    {
      free (rows);
      return -1;
    }
  /* the tracks the export uses: those of the spans, steps, plans and
   * counters it keeps */
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (keep_span (t, i))
      rows[span_pid (t, &t->spans[i])] |= (unsigned char) (1u << row_of (t->spans[i].kind));
  for (size_t i = 0; i < n_sl; i++)
    if (sl[i].rank >= 0 && (size_t) sl[i].rank < n_pids)
      rows[sl[i].rank] |= 1u << ROW_STEPS;
  int64_t first_plan = INT64_MAX;
  for (int r = 0; r < n_ranks; r++)
    if (write_plan_track (NULL, t, v, r, V, 0, &first_plan) > 0)
      rows[plan_pid (t, r)] |= 1u << ROW_PLAN;
  if (run_clock && first_plan < base)
    base = first_plan;
  bool any_span = t->n_all_spans > 0;
  for (size_t i = 0; any_span && i < t->n_counters; i++)
    if (t->counters[i].kind < PP_N_COUNTER_KINDS && isfinite (t->counters[i].value)
        && (size_t) item_pid (t, t->counter_process[i], t->counters[i].rank) < n_pids
        && keep_item (t, t->counter_process[i], t->counters[i].rank, t->counters[i].step))
      rows[item_pid (t, t->counter_process[i], t->counters[i].rank)] |= TRACK_COUNTERS;

  fputs ("{\"traceEvents\":[", f);
  if (write_tracks (f, t, rows, n_ranks, &first) != 0)
    {
      free (rows);
      free (sl);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      const PpSpan *s = &t->spans[i];
      const char *kn = kind_name (s->kind);
      const char *str = trace_string (t, s->name_id);
      int act = action_kind_of_span (s->kind);
      char name[PP_ACTION_STR_MAX];

      if (!keep_span (t, i))
        continue;
      if (act >= 0)
        {
          /* a block is named as everywhere else, whatever its source called it */
          PpAction a = pp_action (act, s->stage, s->microbatch);
          if (pp_span_has_sub (s))
            a = pp_action_overlap (s->stage, s->microbatch, action_kind_of_span (s->sub_kind), s->sub_stage,
                                   s->sub_microbatch);
          action_name (&a, V, name, sizeof name);
        }
      else if (pp_span_gc_other_thread (s))
        snprintf (name, sizeof name, "%s (thread %u)", kn, (unsigned) (s->stream & PP_GC_THREAD_MASK));
      else if (s->microbatch < 0)
        snprintf (name, sizeof name, "%s", kn);
      else if (V > 1 && s->stage >= 0)
        snprintf (name, sizeof name, "%d%s%d", s->stage, kn, s->microbatch);
      else
        snprintf (name, sizeof name, "%s%d", kn, s->microbatch);
      fprintf (f, ",\n{\"name\":");
      json_string (f, act < 0 && str ? str : name);
      fprintf (f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", kn, out_pid (t, span_pid (t, s)),
               row_of (s->kind));
      /* times as the model holds them: within +-2^61 ns */
      int64_t t0 = clamp_time (s->start_ns), t1 = clamp_time (s->end_ns);
      print_us_since (f, t0, base);
      fputs (",\"dur\":", f);
      print_us_since (f, t1 > t0 ? t1 : t0, t0);
      fprintf (f, ",\"args\":{\"stage\":%d,\"microbatch\":%d,\"step\":%d,\"kind\":", s->stage, s->microbatch,
               s->step);
      /* a kind newer than this pipescope: its number, which import keeps */
      if (s->kind < PP_N_SPAN_KINDS && pp_span_kind_name ((PpSpanKind) s->kind) != NULL)
        fprintf (f, "\"%s\"", kn);
      else
        fprintf (f, "%u", (unsigned) s->kind);
      fprintf (f, ",\"rank\":%d", s->rank);
      if (t->span_process != NULL && t->span_process[i] >= 0)
        fprintf (f, ",\"process\":%d", t->span_process[i]);
      /* its recorded name (a kernel's, a block's label), for import */
      if (str)
        {
          fputs (",\"source_name\":", f);
          json_string (f, str);
        }
      if (s->peer_rank >= 0)
        fprintf (f, ",\"peer_rank\":%d", s->peer_rank);
      if (pp_span_has_sub (s))
        fprintf (f, ",\"backward_kind\":\"%s\",\"backward_stage\":%d,\"backward_microbatch\":%d",
                 kind_name (s->sub_kind), s->sub_stage, s->sub_microbatch);
      if (s->bytes)
        fprintf (f, ",\"bytes\":%" PRIu64, s->bytes);
      if (s->device != 0xffff)
        fprintf (f, ",\"device\":%u,\"stream\":%u", (unsigned) s->device, (unsigned) s->stream);
      /* another thread's collection (format 1.8): which, and whether it stopped every thread */
      if (pp_span_gc_other_thread (s))
        fprintf (f, ",\"gc_thread\":%u,\"gc_stops_world\":%s", (unsigned) (s->stream & PP_GC_THREAD_MASK),
                 s->stream & PP_GC_STOPS_WORLD ? "true" : "false");
      fputs ("}}", f);
    }
  /* each track's steps, as its own markers mark them */
  for (size_t i = 0; i < n_sl; i++)
    {
      if (sl[i].rank < 0 || (size_t) sl[i].rank >= n_pids)
        continue;
      fprintf (f, ",\n{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
               sl[i].step, out_pid (t, sl[i].rank), ROW_STEPS);
      print_us_since (f, sl[i].begin, base);
      fputs (",\"dur\":", f);
      print_us_since (f, sl[i].end, sl[i].begin);
      fprintf (f, ",\"args\":{\"step\":%d}}", sl[i].step);
    }
  free (sl);
  for (int r = 0; r < n_ranks; r++)
    if (rows[plan_pid (t, r)] & (1u << ROW_PLAN))
      write_plan_track (f, t, v, r, V, base, NULL);
  if (any_span && (write_flows (f, t, base) != 0 || write_dependency_flows (f, t, base) != 0))
    {
      free (rows);
      return -1;
    }
  if (any_span && write_counters (f, t, base, rows, n_pids) != 0)
    {
      free (rows);
      return -1;
    }
  free (rows);
  fputs ("\n],\"displayTimeUnit\":\"ms\"", f);
  /* the wall clock's ts are from the epoch: said as torch's own traces say
   * their zero (torch >= 2.4), for the tools that line traces up by it */
  if (!run_clock)
    fputs (",\"baseTimeNanoseconds\":0", f);
  write_pipescope_meta (f, t, base);
  fputs ("}\n", f);
  return 0;
}
