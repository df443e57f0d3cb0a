/* cli-trace-chrome-meta.c — the Chrome export's "pipescope" member: what
 * import needs to give the same run back, which Chrome's events cannot
 * say exactly (issue 30). */
#include "cli-trace-private.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A double as the 16 hex digits of its bits, in a string: exact, and read
 * back without a locale's decimal point (the app runs under the user's). */
static void
print_double_bits (FILE *f, double x)
{
  uint64_t bits;
  memcpy (&bits, &x, sizeof bits);
  fprintf (f, "\"%016" PRIx64 "\"", bits);
}

/* What `import` needs to give the same run back from this export, which
 * Chrome's events cannot say exactly (issue 30): the description, each
 * rank's host and pid, the processes' places, each rank's plan (its
 * compute actions, with their planned times where it has them), the step
 * markers and counters as recorded (time from origin_ns, the events' zero),
 * and the dropped count.  Spans come from the events themselves (their
 * args: rank, kind, stage, micro-batch, step, ...).  Times are on the
 * common clock (clock offsets applied), so no offset is written.  Perfetto
 * and chrome://tracing ignore a top-level member they do not know. */
void
write_pipescope_meta (FILE *f, const Trace *t, int64_t base)
{
  fprintf (f, ",\"pipescope\":{\"format\":1,\"origin_ns\":%" PRId64 ",\"dropped\":%" PRIu64, base,
           t->dropped);
  if (t->has_desc)
    {
      const PpTraceDescription *d = &t->desc;
      fputs (",\n\"description\":{\"schedule\":", f);
      json_string (f, d->schedule);
      fputs (",\"backend\":", f);
      json_string (f, d->backend);
      fputs (",\"host\":", f);
      json_string (f, d->host);
      fputs (",\"model\":", f);
      json_string (f, d->model);
      fputs (",\"cmdline\":", f);
      json_string (f, d->cmdline);
      fprintf (f, ",\"n_ranks\":%d,\"n_microbatches\":%d,\"n_virtual\":%d,\"start_unix_ns\":%" PRId64
                  ",\"start_monotonic_ns\":%" PRId64 "}", d->n_ranks, d->n_microbatches, d->n_virtual,
               d->start_unix_ns, d->start_monotonic_ns);
    }
  /* [rank, pid, host]: the last RANK frame of each */
  fputs (",\n\"ranks\":[", f);
  bool first = true;
  for (size_t i = 0; i < t->n_rank_items; i++)
    {
      const PpTraceItem *it = &t->rank_items[i];
      if (it->type != PP_TRACE_ITEM_RANK)
        continue;
      fprintf (f, "%s[%d,%d,", first ? "" : ",", it->rank_info.rank, it->rank_info.pid);
      json_string (f, it->rank_info.host);
      fputc (']', f);
      first = false;
    }
  /* [process, rank, flags, pid, host, coord..., size...] */
  fputs ("],\n\"processes\":[", f);
  for (size_t i = 0; i < t->n_procs; i++)
    {
      const PpTraceProcess *p = &t->procs[i];
      fprintf (f, "%s[%d,%d,%u,%d,", i ? "," : "", p->process, p->rank, p->flags, p->pid);
      json_string (f, p->host);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        fprintf (f, ",%d", p->coord[d]);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        fprintf (f, ",%d", p->size[d]);
      fputc (']', f);
    }
  /* {rank, has_timeline, actions: [kind, stage, mb, sub_kind, sub_stage, sub_mb, start, end]},
   * the times (seconds) as their bits */
  fputs ("],\n\"plans\":[", f);
  first = true;
  for (int r = 0; r < t->cap_plans; r++)
    {
      const PlanSummary *ps = &t->plans[r];
      if (!ps->seen)
        continue;
      fprintf (f, "%s{\"rank\":%d,\"has_timeline\":%d,\"actions\":[", first ? "" : ",\n", r,
               ps->has_timeline ? 1 : 0);
      for (size_t k = 0; k < ps->n_order; k++)
        {
          const PpTracePlanAction *a = &ps->order[k];
          fprintf (f, "%s[%d,%d,%d,%d,%d,%d,", k ? "," : "", a->kind, a->stage, a->microbatch,
                   a->sub_kind, a->sub_stage, a->sub_microbatch);
          print_double_bits (f, a->planned_start);
          fputc (',', f);
          print_double_bits (f, a->planned_end);
          fputc (']', f);
        }
      fputs ("]}", f);
      first = false;
    }
  /* [rank, step, phase, ns from origin, process] */
  fputs ("],\n\"markers\":[", f);
  first = true;
  for (size_t i = 0; i < t->n_markers; i++)
    {
      const StepMarker *m = &t->markers[i];
      if (!keep_item (t, m->process, m->rank, m->step))
        continue;
      fprintf (f, "%s[%d,%d,%d,", first ? "" : ",", m->rank, m->step, m->phase);
      print_ns_since (f, clamp_time (m->t), base);
      fprintf (f, ",%d]", m->process);
      first = false;
    }
  /* [rank, step, kind, ns from origin, value's bits, process] */
  fputs ("],\n\"counters\":[", f);
  first = true;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *c = &t->counters[i];
      if (!isfinite (c->value) || !keep_item (t, t->counter_process[i], c->rank, c->step))
        continue;
      fprintf (f, "%s[%d,%d,%u,", first ? "" : ",", c->rank, c->step, (unsigned) c->kind);
      print_ns_since (f, clamp_time (c->time_ns), base);
      fputc (',', f);
      print_double_bits (f, c->value);
      fprintf (f, ",%d]", t->counter_process[i]);
      first = false;
    }
  fputs ("]}", f);
}
