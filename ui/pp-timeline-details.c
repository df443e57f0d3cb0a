/* pp-timeline-details.c — everything known of one block (pp-timeline-details.h).
 *
 * Dependencies come from the schedule's rules (pp_schedule_dependencies),
 * found in the trace as the same micro-batch's block of the named kind and
 * stage, in the same step, on the rank that holds that stage.  A search is
 * a walk over one rank's spans: it runs once a click, not once a frame.
 */
#include "pp-timeline-details.h"
#include "pp-timeline-summary.h"
#include "pp-schedule-rules.h"

#include <string.h>

static int
action_of_span (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: case PP_SPAN_OVERLAP_F_B: return PP_ACT_F;
    case PP_SPAN_B: return PP_ACT_B;
    case PP_SPAN_I: return PP_ACT_I;
    case PP_SPAN_W: return PP_ACT_W;
    default: return -1;
    }
}

/* The span of (dependency kind, stage, micro-batch, step); -1 if absent.
 * PP_ACT_F: a forward of the stage; PP_ACT_I: the stage's input gradient,
 * the end of its B or I. */
static long
find_block (const PpTimelineModel *m, int rank, int dep_kind, int stage, int mb, int step)
{
  const PpSpan *sp = pp_timeline_model_spans (m, rank);
  size_t n = pp_timeline_model_n_spans (m, rank);
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *s = &sp[i];
      if (s->stage != stage || s->microbatch != mb || s->step != step)
        continue;
      if (dep_kind == PP_ACT_F ? (s->kind == PP_SPAN_F || s->kind == PP_SPAN_OVERLAP_F_B)
                               : (s->kind == PP_SPAN_B || s->kind == PP_SPAN_I))
        return (long) i;
    }
  return -1;
}

static int
deps_of (const PpTimelineModel *m, const PpSchedule *s, const PpSpan *b, PpTimelineDependency out[2])
{
  PpDependency d[2];
  int act = action_of_span (b->kind), n, k = 0;
  if (s == NULL || act < 0 || b->stage < 0 || b->stage >= s->n_stages || b->microbatch < 0)
    return 0;
  n = pp_schedule_dependencies (s, act, b->stage, d);
  for (int i = 0; i < n && i < 2; i++)
    {
      if (d[i].stage < 0 || d[i].stage >= s->n_stages)
        continue;
      int r = s->stage_rank[d[i].stage];
      PpTimelineDependency *o = &out[k++];
      o->kind = d[i].kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_I;
      o->stage = d[i].stage;
      o->rank = r;
      o->index = r >= 0 && r < pp_timeline_model_n_ranks (m)
                 ? find_block (m, r, d[i].kind, d[i].stage, b->microbatch, b->step) : -1;
      o->end_ns = o->index >= 0 ? pp_timeline_model_spans (m, r)[o->index].end_ns : INT64_MIN;
      if (o->index >= 0)
        o->kind = pp_timeline_model_spans (m, r)[o->index].kind;
    }
  return k;
}

gboolean
pp_timeline_block_details (const PpTimelineModel *m, const PpSchedule *s, int rank, long index,
                           PpTimelineBlockDetails *out)
{
  memset (out, 0, sizeof *out);
  out->prev_index = -1;
  out->idle_before_ns = -1;
  out->last = -1;
  if (m == NULL || rank < 0 || rank >= pp_timeline_model_n_ranks (m) || index < 0
      || (size_t) index >= pp_timeline_model_n_spans (m, rank))
    return FALSE;
  const PpSpan *sp = pp_timeline_model_spans (m, rank);
  size_t n = pp_timeline_model_n_spans (m, rank);
  const PpSpan *b = &sp[index];
  if (!pp_span_kind_is_work (b->kind))
    return FALSE;
  out->rank = rank;
  out->index = index;
  out->span = *b;

  /* the rank's previous block: the latest-ending work that ended by this start */
  int64_t prev_end = INT64_MIN;
  for (long i = index - 1; i >= 0; i--)
    {
      if (!pp_span_kind_is_work (sp[i].kind) || sp[i].end_ns > b->start_ns)
        continue;
      if (sp[i].end_ns > prev_end)
        {
          prev_end = sp[i].end_ns;
          out->prev_index = i;
        }
      /* spans are sorted by start: one that starts before the best end
       * found, less the longest span, cannot end later */
      if (sp[i].start_ns + pp_timeline_model_max_span_ns (m, rank) < prev_end)
        break;
    }
  if (out->prev_index >= 0)
    out->idle_before_ns = b->start_ns - prev_end;

  /* waits between the previous block and this one */
  for (long i = index - 1; i >= 0 && (prev_end == INT64_MIN || sp[i].end_ns >= prev_end); i--)
    if (sp[i].kind == PP_SPAN_WAIT && sp[i].end_ns <= b->start_ns + 1000
        && (prev_end == INT64_MIN || sp[i].start_ns >= prev_end - 1000))
      out->wait_ns += sp[i].end_ns - sp[i].start_ns;

  out->n_deps = deps_of (m, s, b, out->deps);
  int64_t latest = prev_end;
  for (int i = 0; i < out->n_deps; i++)
    if (out->deps[i].index >= 0 && out->deps[i].end_ns > latest)
      {
        latest = out->deps[i].end_ns;
        out->last = i;
      }

  /* kernels, copies and memsets that ran under it */
  for (size_t i = (size_t) index + 1; i < n && sp[i].start_ns < b->end_ns; i++)
    if (sp[i].kind == PP_SPAN_KERNEL || sp[i].kind == PP_SPAN_MEMCPY || sp[i].kind == PP_SPAN_MEMSET)
      {
        if (out->n_children < PP_TIMELINE_DETAILS_MAX_CHILDREN)
          out->children[out->n_children++] = (long) i;
        else
          out->more_children++;
      }
  return TRUE;
}

static void
append_time (GString *s, double ns)
{
  if (ns < 0)
    g_string_append_c (s, '-'), ns = -ns;
  if (ns < 1e3)
    g_string_append_printf (s, "%.0f ns", ns);
  else if (ns < 1e4)
    g_string_append_printf (s, "%.2f µs", ns / 1e3);
  else
    g_string_append_printf (s, "%.3f ms", ns / 1e6);
}

static void
append_block_name (GString *t, const PpTimelineModel *m, int rank, long index)
{
  const PpSpan *s = &pp_timeline_model_spans (m, rank)[index];
  char who[96];
  pp_timeline_model_rank_label (m, rank, who, sizeof who);
  g_string_append_printf (t, "%s", pp_span_kind_name ((PpSpanKind) s->kind));
  if (s->stage >= 0)
    g_string_append_printf (t, " of stage %d", s->stage);
  if (s->microbatch >= 0)
    g_string_append_printf (t, ", micro-batch %d", s->microbatch);
  g_string_append_printf (t, " on %s", who);
}

char *
pp_timeline_block_details_text (const PpTimelineModel *m, const PpTimelineBlockDetails *d)
{
  GString *t = g_string_new (NULL);
  const PpSpan *s = &d->span;
  char who[96];
  int64_t origin = pp_timeline_model_start_ns (m);

  pp_timeline_model_rank_label (m, d->rank, who, sizeof who);
  g_string_append_printf (t, "Rank: %s\n", who);
  const char *host = pp_timeline_model_rank_host (m, d->rank);
  if (host[0])
    g_string_append_printf (t, "Host: %s\n", host);
  g_string_append_printf (t, "Kind: %s\n", pp_span_kind_name ((PpSpanKind) s->kind));
  if (s->stage >= 0)
    g_string_append_printf (t, "Stage: %d\n", s->stage);
  if (s->microbatch >= 0)
    g_string_append_printf (t, "Micro-batch: %d\n", s->microbatch);
  /* an overlapped F+B (format 1.2): its backward half too */
  if (pp_span_has_sub (s))
    g_string_append_printf (t, "Overlapped with: %s of stage %d, micro-batch %d\n",
                            pp_span_kind_name ((PpSpanKind) s->sub_kind), s->sub_stage, s->sub_microbatch);
  g_string_append_printf (t, "Step: %d\n", s->step);
  g_string_append (t, "Start: ");
  append_time (t, (double) (s->start_ns - origin));
  g_string_append (t, "\nDuration: ");
  append_time (t, (double) (s->end_ns - s->start_ns));
  g_string_append_c (t, '\n');
  /* a folded row's block is the replicas' median: say so, and which
   * replica ended last, where, and how late (the tooltip's words) */
  const PpTimelineFold *f = pp_timeline_model_fold (m, d->rank, d->index);
  if (f != NULL && f->n > 1)
    {
      const PpTraceProcess *p = pp_timeline_model_process_place (m, f->slowest_process);
      g_string_append_printf (t, "Folded: the median of %d replicas (the copy of dp %d, whose start is the median)\n",
                              f->n, f->median_dp);
      g_string_append_printf (t, "Slowest replica: dp %d (process %d%s%s), ended ", f->slowest_dp,
                              f->slowest_process, p && p->host[0] ? " on " : "", p && p->host[0] ? p->host : "");
      append_time (t, (double) (f->latest_end_ns - s->end_ns));
      g_string_append (t, " after the median end\nBand: the replicas' copies from ");
      append_time (t, (double) (f->earliest_start_ns - origin));
      g_string_append (t, " to ");
      append_time (t, (double) (f->latest_end_ns - origin));
      g_string_append (t, pp_timeline_fold_apart (f, s) ? " (out of step: their starts more than the block's length "
                                                          "apart)\n" : "\n");
    }
  else if (pp_timeline_model_row_process (m, d->rank) >= 0)
    {
      /* an unfolded row: the process it is */
      const PpTraceProcess *p = pp_timeline_model_process_place (m, pp_timeline_model_row_process (m, d->rank));
      if (p != NULL)
        g_string_append_printf (t, "Process: %d (pid %d%s)\n", p->process, p->pid,
                                p->flags & PP_TRACE_PROCESS_UNPLACED ? ", place not read: dp by global rank" : "");
    }

  if (d->idle_before_ns >= 0)
    {
      g_string_append (t, "Idle before it: ");
      append_time (t, (double) d->idle_before_ns);
      g_string_append (t, " (since ");
      append_block_name (t, m, d->rank, d->prev_index);
      g_string_append (t, ")\n");
    }
  else
    g_string_append (t, "Idle before it: none (its rank's first block)\n");
  if (d->wait_ns > 0)
    {
      g_string_append (t, "Waiting in it: ");
      append_time (t, (double) d->wait_ns);
      g_string_append_c (t, '\n');
    }
  for (int i = 0; i < d->n_deps; i++)
    {
      const PpTimelineDependency *p = &d->deps[i];
      char pr[96];
      pp_timeline_model_rank_label (m, p->rank, pr, sizeof pr);
      g_string_append (t, "Waited for: ");
      if (p->index < 0)
        {
          g_string_append_printf (t, "%s of stage %d on %s, not in the trace\n",
                                  p->kind == PP_SPAN_F ? "F" : "the input gradient (B or I)", p->stage, pr);
          continue;
        }
      append_block_name (t, m, p->rank, p->index);
      g_string_append (t, ", ended ");
      append_time (t, (double) (s->start_ns - p->end_ns));
      g_string_append (t, " before it");
      if (i == d->last)
        g_string_append (t, " — ended last: this block waited for it");
      g_string_append_c (t, '\n');
    }
  if (d->n_deps > 0 && d->last < 0 && d->prev_index >= 0)
    g_string_append (t, "Ended last: its rank's previous block (the rank was busy)\n");
  if (d->n_children > 0)
    {
      g_string_append_printf (t, "Kernels and copies (%d):\n", d->n_children + d->more_children);
      for (int i = 0; i < d->n_children; i++)
        {
          const PpSpan *c = &pp_timeline_model_spans (m, d->rank)[d->children[i]];
          const char *name = c->name_id ? pp_timeline_model_string (m, c->name_id) : NULL;
          g_string_append_printf (t, "  %s ", name && *name ? name : pp_span_kind_name ((PpSpanKind) c->kind));
          append_time (t, (double) (c->end_ns - c->start_ns));
          g_string_append_c (t, '\n');
        }
      if (d->more_children > 0)
        g_string_append_printf (t, "  and %d more\n", d->more_children);
    }
  if (t->len > 0 && t->str[t->len - 1] == '\n')
    g_string_truncate (t, t->len - 1);
  return g_string_free (t, FALSE);
}

size_t
pp_timeline_microbatch_arrows (const PpTimelineModel *m, const PpSchedule *s, int rank, long index,
                               PpTimelineArrow *out, size_t max)
{
  size_t k = 0;
  if (m == NULL || s == NULL || rank < 0 || rank >= pp_timeline_model_n_ranks (m) || index < 0
      || (size_t) index >= pp_timeline_model_n_spans (m, rank))
    return 0;
  const PpSpan *sel = &pp_timeline_model_spans (m, rank)[index];
  if (!pp_span_kind_is_block (sel->kind) || sel->microbatch < 0)
    return 0;
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      size_t n = pp_timeline_model_n_spans (m, r);
      for (size_t i = 0; i < n && k < max; i++)
        {
          const PpSpan *b = &sp[i];
          PpTimelineDependency d[2];
          if (b->microbatch != sel->microbatch || b->step != sel->step || !pp_span_kind_is_block (b->kind))
            continue;
          int nd = deps_of (m, s, b, d);
          for (int j = 0; j < nd && k < max; j++)
            if (d[j].index >= 0)
              out[k++] = (PpTimelineArrow) { .from_rank = d[j].rank, .to_rank = r,
                                             .from_ns = d[j].end_ns, .to_ns = b->start_ns };
        }
    }
  return k;
}

char *
pp_timeline_range_text (const PpTimelineModel *m, int64_t t0, int64_t t1)
{
  GString *t = g_string_new (NULL);
  if (t1 < t0)
    {
      int64_t x = t0;
      t0 = t1;
      t1 = x;
    }
  g_string_append (t, "Range: ");
  append_time (t, (double) (t1 - t0));
  g_string_append (t, " (from ");
  append_time (t, (double) (t0 - pp_timeline_model_start_ns (m)));
  g_string_append (t, ")\n");
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      PpTimelineStepSummary sum;
      char who[96];
      pp_timeline_summarize (m, r, t0, t1, &sum);
      pp_timeline_model_rank_label (m, r, who, sizeof who);
      g_string_append_printf (t, "%s: busy ", who);
      append_time (t, sum.busy_total_ns);
      g_string_append (t, ", idle ");
      append_time (t, sum.len_ns - sum.busy_total_ns);
      g_string_append_printf (t, " (%.0f%%)\n", sum.len_ns > 0 ? 100 * (1 - sum.busy_total_ns / sum.len_ns) : 0);
    }
  if (t->len > 0 && t->str[t->len - 1] == '\n')
    g_string_truncate (t, t->len - 1);
  return g_string_free (t, FALSE);
}
