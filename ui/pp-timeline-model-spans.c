/* pp-timeline-model-spans.c — a span onto its row (a live run's
 * provisional step and the plan's origin with it), the queries over a
 * row's spans, and the run's extents, a cache recomputed at the first
 * query after what may shrink them. */
#include "pp-timeline-model-internal.h"


/* Recomputes the extent from scratch (after a clock offset moved a rank). */
static void
recompute_extent (PpTimelineModel *m)
{
  m->start_ns = INT64_MAX;
  m->end_ns = INT64_MIN;
  m->span_start_ns = INT64_MAX;
  m->span_end_ns = INT64_MIN;
  for (int r = 0; r < m->n_ranks; r++)
    {
      const Rank *rk = &m->ranks[r];
      settle (m, r);
      if (rk->n_spans > 0)
        {
          see_time (m, rk->spans[0].start_ns, rk->max_end_ns);
          if (rk->spans[0].start_ns < m->span_start_ns)
            m->span_start_ns = rk->spans[0].start_ns;
          if (rk->max_end_ns > m->span_end_ns)
            m->span_end_ns = rk->max_end_ns;
        }
      for (size_t k = 0; k < rk->n_plan; k++)
        see_time (m, rk->plan[k].start_ns, rk->plan[k].end_ns);
    }
  for (size_t k = 0; k < m->n_marks; k++)
    see_time (m, m->marks[k].t, m->marks[k].t);
}

/* Recomputes the stale extents before a query reads them: a cache, like
 * settle's sorting, so queries keep a const model. */
void
fresh_extents (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (m->extent_stale)
    {
      recompute_extent (m);
      m->extent_stale = 0;
    }
  if (m->plan_extent_stale)
    {
      recompute_plan_extent (m);
      m->plan_extent_stale = 0;
    }
}

/* A span onto its rank's row, moved by offset (its clock's: offset_for). */
void
add_span (PpTimelineModel *m, const PpSpan *in, int64_t offset)
{
  PpSpan s = *in;
  Rank *rk;

  if (ensure_rank (m, s.rank) != 0)
    return;
  rk = &m->ranks[s.rank];
  s.start_ns = add_ns (s.start_ns, offset);
  s.end_ns = add_ns (s.end_ns, offset);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  append_span (rk, &s, 0);   /* moved above: the rest reads its times */
  if (m->max_marked_step >= 0 && s.step == m->max_marked_step + 1 && s.step != m->provisional_step
      && pp_span_kind_is_block (s.kind))
    {
      m->provisional_step = s.step;
      push_mark (m, s.start_ns, s.step);
    }
  m->n_spans_total++;
  if (s.kind < 32)
    m->kinds_seen |= 1u << s.kind;
  if (s.end_ns - s.start_ns > rk->max_span_ns)
    rk->max_span_ns = s.end_ns - s.start_ns;
  if (s.end_ns > rk->max_end_ns)
    rk->max_end_ns = s.end_ns;
  see_time (m, s.start_ns, s.end_ns);
  if (s.start_ns < m->span_start_ns)
    m->span_start_ns = s.start_ns;
  if (s.end_ns > m->span_end_ns)
    m->span_end_ns = s.end_ns;
  /* No description: the plan's origin is the first span's start. */
  if (!m->has_desc && m->plan_origin_ns == INT64_MIN)
    set_plan_origin (m, s.start_ns);
}

int
pp_timeline_model_set_rank_lost (PpTimelineModel *m, int rank, int64_t t_ns)
{
  if (m == NULL || m->frozen || rank < 0 || rank >= PP_TRACE_MAX_RANKS || ensure_rank (m, rank) != 0)
    return 0;
  Rank *r = &m->ranks[rank];
  m->generation++;
  fresh_extents (m);
  if (t_ns == PP_TIMELINE_LOST_AT_LAST_EVENT)
    t_ns = r->max_end_ns != INT64_MIN ? r->max_end_ns
           : m->span_end_ns != INT64_MIN ? m->span_end_ns : m->end_ns;
  if (t_ns == INT64_MIN || t_ns == INT64_MAX)
    return 0;   /* nothing received at all: no time to mark from */
  if (t_ns > PP_TIMELINE_MAX_ABS_NS)
    t_ns = PP_TIMELINE_MAX_ABS_NS;
  if (t_ns < -PP_TIMELINE_MAX_ABS_NS)
    t_ns = -PP_TIMELINE_MAX_ABS_NS;
  /* the first loss stands: a later report of the same end moves nothing */
  if (r->lost_ns <= t_ns)
    return 0;
  r->lost_ns = t_ns;
  return 1;
}

int64_t
pp_timeline_model_start_ns (const PpTimelineModel *m)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->start_ns == INT64_MAX)
    return m != NULL && m->has_desc ? m->desc.start_monotonic_ns : 0;
  return m->start_ns;
}

int64_t
pp_timeline_model_end_ns (const PpTimelineModel *m)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->end_ns == INT64_MIN)
    return pp_timeline_model_start_ns (m);
  return m->end_ns;
}

size_t
pp_timeline_model_n_spans_total (const PpTimelineModel *m)
{
  return m ? m->n_spans_total : 0;
}

size_t
pp_timeline_model_n_spans (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].n_spans : 0;
}

const PpSpan *
pp_timeline_model_spans (const PpTimelineModel *m, int rank)
{
  settle (m, rank);
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].spans : NULL;
}

int64_t
pp_timeline_model_max_span_ns (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].max_span_ns : 0;
}

size_t
pp_timeline_model_first_overlapping (const PpTimelineModel *m, int rank, int64_t t)
{
  const Rank *rk;
  size_t lo = 0, hi;
  int64_t from;

  if (m == NULL || rank < 0 || rank >= m->n_ranks)
    return 0;
  settle (m, rank);
  rk = &m->ranks[rank];
  hi = rk->n_spans;
  /* No span is longer than max_span_ns: one that starts before
   * t - max_span_ns ends before t. */
  if (__builtin_sub_overflow (t, rk->max_span_ns, &from))
    from = INT64_MIN;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rk->spans[mid].start_ns < from)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

uint32_t
pp_timeline_model_kinds_seen (const PpTimelineModel *m)
{
  return m ? m->kinds_seen : 0;
}

int
pp_timeline_model_step_extent (const PpTimelineModel *m, int64_t *start, int64_t *end)
{
  if (!pp_timeline_model_span_extent (m, start, end))
    return 0;
  int64_t first = INT64_MAX;
  for (int r = 0; r < m->n_ranks; r++)
    {
      const Rank *rk = &m->ranks[r];
      settle ((PpTimelineModel *) m, r);
      /* spans by start: the rank's first block ends the scan */
      for (size_t i = 0; i < rk->n_spans && rk->spans[i].start_ns < first; i++)
        if (pp_span_kind_is_block (rk->spans[i].kind))
          {
            first = rk->spans[i].start_ns;
            break;
          }
    }
  if (first != INT64_MAX && first > *start)
    *start = first;
  return 1;
}

int
pp_timeline_model_span_extent (const PpTimelineModel *m, int64_t *start, int64_t *end)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->span_start_ns == INT64_MAX)
    return 0;
  *start = m->span_start_ns;
  *end = m->span_end_ns;
  return 1;
}
