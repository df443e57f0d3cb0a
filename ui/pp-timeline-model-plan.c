/* pp-timeline-model-plan.c — the planned schedule of each rank: kept as
 * read (seconds from the run's start), placed on the spans' clock once the
 * origin is known and again when it moves, and the extent of the plans'
 * work. */
#include "pp-timeline-model-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
plan_kind_is_compute (int kind)
{
  return kind == PP_TRACE_ACT_F || kind == PP_TRACE_ACT_B || kind == PP_TRACE_ACT_I
         || kind == PP_TRACE_ACT_W || kind == PP_TRACE_ACT_OVERLAP_F_B || kind == PP_TRACE_ACT_OPT;
}

/* A planned action that keeps its rank busy: compute, or data-parallel
 * communication (a plan from pipeline_order_with_comms), never bubble. */
int
pp_timeline_plan_action_is_work (int kind)
{
  return plan_kind_is_compute (kind) || kind == PP_TRACE_ACT_UNSHARD || kind == PP_TRACE_ACT_RESHARD
         || kind == PP_TRACE_ACT_REDUCE_GRAD || kind == PP_TRACE_ACT_WAIT_REDUCE_GRAD;
}

int
plan_kind_is_busy (int kind)
{
  return pp_timeline_plan_action_is_work (kind);
}

static int64_t
seconds_to_ns (double s)
{
  if (!isfinite (s))
    return 0;
  double ns = s * 1e9;
  if (ns > (double) PP_TIMELINE_MAX_ABS_NS)
    return PP_TIMELINE_MAX_ABS_NS;
  if (ns < -(double) PP_TIMELINE_MAX_ABS_NS)
    return -PP_TIMELINE_MAX_ABS_NS;
  return (int64_t) llround (ns);
}

/* The work extent of all plans (what planned_bubble measures over: the
 * plan's step, its data-parallel actions included), kept so that a query
 * is one rank's plan, not every rank's. */
void
recompute_plan_extent (PpTimelineModel *m)
{
  m->plan_ps = INT64_MAX;
  m->plan_pe = INT64_MIN;
  for (int r = 0; r < m->n_ranks; r++)
    for (size_t k = 0; k < m->ranks[r].n_plan; k++)
      if (plan_kind_is_busy (m->ranks[r].plan[k].kind))
        {
          if (m->ranks[r].plan[k].start_ns < m->plan_ps)
            m->plan_ps = m->ranks[r].plan[k].start_ns;
          if (m->ranks[r].plan[k].end_ns > m->plan_pe)
            m->plan_pe = m->ranks[r].plan[k].end_ns;
        }
}

/* The plan extent widened by rank r's placed plan (its first: nothing shrinks). */
void
widen_plan_extent (PpTimelineModel *m, int r)
{
  const Rank *rk = &m->ranks[r];
  for (size_t k = 0; k < rk->n_plan; k++)
    if (plan_kind_is_busy (rk->plan[k].kind))
      {
        if (rk->plan[k].start_ns < m->plan_ps)
          m->plan_ps = rk->plan[k].start_ns;
        if (rk->plan[k].end_ns > m->plan_pe)
          m->plan_pe = rk->plan[k].end_ns;
      }
}

/* Places rank r's stored plan on the spans' clock. */
int
place_plan (PpTimelineModel *m, int r)
{
  Rank *rk = &m->ranks[r];
  /* A plan without times is the order only: nothing to place in time. */
  size_t n = m->raw_plans[r].timed ? m->raw_plans[r].n : 0;
  PpTimelinePlanned *p;

  free (rk->plan);
  rk->plan = NULL;
  rk->n_plan = 0;
  if (n == 0 || m->plan_origin_ns == INT64_MIN)
    return 0;
  p = malloc (n * sizeof *p);
  if (p == NULL)
    return -1;
  for (size_t k = 0; k < n; k++)
    {
      const PpTracePlanAction *a = &m->raw_plans[r].a[k];
      p[k].kind = a->kind;
      p[k].stage = a->stage;
      p[k].microbatch = a->microbatch;
      p[k].sub_kind = a->sub_kind;
      p[k].sub_stage = a->sub_stage;
      p[k].sub_microbatch = a->sub_microbatch;
      p[k].start_ns = add_ns (m->plan_origin_ns, seconds_to_ns (a->planned_start));
      p[k].end_ns = add_ns (m->plan_origin_ns, seconds_to_ns (a->planned_end));
      if (p[k].end_ns < p[k].start_ns)
        p[k].end_ns = p[k].start_ns;
      see_time (m, p[k].start_ns, p[k].end_ns);
    }
  rk->plan = p;
  rk->n_plan = n;
  return 0;
}

int
set_plan_origin (PpTimelineModel *m, int64_t origin)
{
  if (origin == m->plan_origin_ns)
    return 0;
  m->plan_origin_ns = clamp_ns (origin);
  for (int r = 0; r < m->n_ranks; r++)
    if (place_plan (m, r) != 0)
      return -1;
  m->extent_stale = 1;
  m->plan_extent_stale = 1;
  return 0;
}

int
add_plan (PpTimelineModel *m, const PpTraceItem *item)
{
  int r = item->plan.rank;
  size_t n = item->plan.n_actions;

  if (ensure_rank (m, r) != 0)
    return 0;
  m->n_plan_items++;
  /* a replaced plan may have held either extent */
  if (m->ranks[r].n_plan > 0)
    m->extent_stale = m->plan_extent_stale = 1;
  free (m->raw_plans[r].a);
  m->raw_plans[r].a = NULL;
  m->raw_plans[r].n = 0;
  m->raw_plans[r].timed = item->plan.has_timeline != 0;
  /* kept timed or not: an untimed plan is the order the why analysis
   * builds the schedule from */
  if (n > 0)
    {
      m->raw_plans[r].a = malloc (n * sizeof *m->raw_plans[r].a);
      if (m->raw_plans[r].a == NULL)
        return 0;
      memcpy (m->raw_plans[r].a, item->plan.actions, n * sizeof *m->raw_plans[r].a);
      m->raw_plans[r].n = n;
    }
  if (place_plan (m, r) != 0)
    return 0;
  widen_plan_extent (m, r);
  return 1;
}

size_t
pp_timeline_model_n_planned (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].n_plan : 0;
}

int
pp_timeline_model_plans (const PpTimelineModel *m, const PpTracePlanAction ***actions,
                         size_t **n_actions)
{
  int n = 0;

  *actions = NULL;
  *n_actions = NULL;
  if (m == NULL)
    return 0;
  for (int r = 0; r < m->n_ranks; r++)
    if (m->raw_plans[r].n > 0)
      n = r + 1;
  if ((*actions = calloc ((size_t) n + 1, sizeof **actions)) == NULL
      || (*n_actions = calloc ((size_t) n + 1, sizeof **n_actions)) == NULL)
    {
      free (*actions);
      *actions = NULL;
      return -1;
    }
  for (int r = 0; r < n; r++)
    {
      (*actions)[r] = m->raw_plans[r].a;
      (*n_actions)[r] = m->raw_plans[r].n;
    }
  return n;
}

size_t
pp_timeline_model_n_plan_items (const PpTimelineModel *m)
{
  return m != NULL ? m->n_plan_items : 0;
}

const PpTimelinePlanned *
pp_timeline_model_planned (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].plan : NULL;
}
