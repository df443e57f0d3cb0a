/* pp-timeline-render-plan.c — the plan in time: its extent, its copy
 * under every step (which copies show, where each is cut), the span kind
 * of a planned action.  The plan lane that draws it: pp-timeline-render.c.
 */
#include "pp-timeline-render-private.h"

int
plan_span_kind (int action_kind)
{
  switch (action_kind)
    {
    case PP_TRACE_ACT_F: return PP_SPAN_F;
    case PP_TRACE_ACT_B: return PP_SPAN_B;
    case PP_TRACE_ACT_I: return PP_SPAN_I;
    case PP_TRACE_ACT_W: return PP_SPAN_W;
    case PP_TRACE_ACT_OVERLAP_F_B: return PP_SPAN_OVERLAP_F_B;
    case PP_TRACE_ACT_OPT: return PP_SPAN_OPT;
    case PP_TRACE_ACT_UNSHARD: return PP_SPAN_UNSHARD;
    case PP_TRACE_ACT_RESHARD: return PP_SPAN_RESHARD;
    case PP_TRACE_ACT_REDUCE_GRAD: return PP_SPAN_REDUCE_GRAD;
    case PP_TRACE_ACT_WAIT_REDUCE_GRAD: return PP_SPAN_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

/* First planned start and last planned end over all ranks. */
void
plan_extent (const PpTimelineModel *m, int64_t *p0, int64_t *p1)
{
  *p0 = INT64_MAX;
  *p1 = INT64_MIN;
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      const PpTimelinePlanned *p = pp_timeline_model_planned (m, r);
      for (size_t k = 0; k < pp_timeline_model_n_planned (m, r); k++)
        if (plan_span_kind (p[k].kind) >= 0)
          {
            if (p[k].start_ns < *p0)
              *p0 = p[k].start_ns;
            if (p[k].end_ns > *p1)
              *p1 = p[k].end_ns;
          }
    }
}

int64_t
pp_timeline_plan_origin (const PpTimelineModel *m)
{
  int64_t p0, p1;
  plan_extent (m, &p0, &p1);
  return p0;
}

/* The plan is one step: it is drawn under every step, its start on the
 * step's first begin marker (where it already is for a simulated trace);
 * without step markers, where the model placed it.  The number of copies;
 * copy k is shifted by plan_shift (k). */
static size_t
plan_copies (const PpTimelineModel *m, int64_t plan0)
{
  size_t n = pp_timeline_model_n_steps (m);
  return plan0 == INT64_MAX ? 0 : n > 0 ? n : 1;
}

int64_t
plan_shift (const PpTimelineModel *m, int64_t plan0, size_t k)
{
  if (pp_timeline_model_n_steps (m) == 0)
    return 0;
  return pp_timeline_model_step_starts (m)[k] - plan0;
}

/* Where copy k meets the next one: the next step's start; INT64_MAX for
 * the last.  A plan longer than the step it stands under runs on past it,
 * drawn whole (draw_plan_lane): never cut there. */
int64_t
plan_limit (const PpTimelineModel *m, size_t k)
{
  size_t n = pp_timeline_model_n_steps (m);
  return k + 1 < n ? pp_timeline_model_step_starts (m)[k + 1] : INT64_MAX;
}

/* The copies [*k0, *k1) that can show in [t0, t1]: copy k covers
 * [step k's start, + the plan's length]; found by binary search, so a
 * frame costs the copies it shows, not every step of the run. */
void
plan_copies_in (const PpTimelineModel *m, int64_t plan0, int64_t plan1, int64_t t0, int64_t t1,
                size_t *k0, size_t *k1)
{
  size_t n = plan_copies (m, plan0), lo, hi;
  *k0 = *k1 = 0;
  if (n == 0 || plan1 < plan0)
    return;
  if (pp_timeline_model_n_steps (m) == 0)
    {
      *k1 = plan1 >= t0 && plan0 <= t1 ? 1 : 0;
      return;
    }
  const int64_t *st = pp_timeline_model_step_starts (m);
  double len = (double) plan1 - (double) plan0;
  /* first copy whose end (st[k] + len) reaches t0 */
  for (lo = 0, hi = n; lo < hi;)
    {
      size_t mid = lo + (hi - lo) / 2;
      if ((double) st[mid] + len < (double) t0)
        lo = mid + 1;
      else
        hi = mid;
    }
  *k0 = lo;
  /* first copy that starts past t1 */
  for (hi = n; lo < hi;)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (st[mid] <= t1)
        lo = mid + 1;
      else
        hi = mid;
    }
  *k1 = lo;
}

/* Whether a copy of the plan that shows in v runs past its step's end
 * (the legend then says how that part is drawn). */
int
plan_runs_over (const PpTimelineModel *m, const PpTimelineView *v)
{
  int64_t p0, p1;
  size_t k0, k1;
  plan_extent (m, &p0, &p1);
  plan_copies_in (m, p0, p1, v->t0_ns, v->t1_ns, &k0, &k1);
  for (size_t k = k0; k < k1; k++)
    if ((double) p1 + (double) plan_shift (m, p0, k) > (double) plan_limit (m, k))
      return 1;
  return 0;
}

size_t
pp_timeline_plan_copies (const PpTimelineModel *m)
{
  return plan_copies (m, pp_timeline_plan_origin (m));
}

void
pp_timeline_plan_copy (const PpTimelineModel *m, size_t k, int64_t *shift, int64_t *limit)
{
  int64_t p0 = pp_timeline_plan_origin (m);
  *shift = k < plan_copies (m, p0) ? plan_shift (m, p0, k) : 0;
  *limit = plan_limit (m, k);
}

int
pp_timeline_plan_span_kind (int action_kind)
{
  return plan_span_kind (action_kind);
}
