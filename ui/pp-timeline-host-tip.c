/* pp-timeline-host-tip.c — the host lane's tooltip at a point (see the header). */
#include "pp-timeline-host-tip.h"

#include <math.h>

#include "pp-timeline-host-lane.h"

char *
pp_timeline_host_lane_tooltip (const PpTimelineModel *m, const PpTimelineView *v, double x, double y)
{
  PpTimelineLayout l;

  if (m == NULL || v == NULL || v->t1_ns <= v->t0_ns)
    return NULL;
  pp_timeline_layout (m, v, &l);
  if (l.host_h <= 0 || x < l.x0 || x > l.x1 || y < l.rows_y || l.row_h <= 0 || l.x1 <= l.x0)
    return NULL;
  int r = (int) floor ((y - l.rows_y) / l.row_h);
  /* the lane is the row's bottom (pp_timeline_layout) */
  double dy = y - l.rows_y - r * l.row_h - (l.block_h + l.thin_h + l.plan_h);
  if (r >= pp_timeline_model_n_ranks (m) || dy < 0 || dy >= l.host_h)
    return NULL;
  double span = (double) v->t1_ns - (double) v->t0_ns;
  int64_t tol = (int64_t) (1.5 * span / (l.x1 - l.x0)) + 1;
  /* a gap that starts up to a view's width back */
  return pp_timeline_host_lane_describe (m, r, pp_timeline_t_of (v, &l, x), tol, (int64_t) span,
                                         dy >= l.host_h * 0.5);
}
