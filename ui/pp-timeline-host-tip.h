/* pp-timeline-host-tip.h — the host lane's tooltip at a point of a
 * drawing (issue 29): which rank's lane (pp_timeline_layout) and when
 * (pp_timeline_t_of), then what the lane holds there
 * (pp_timeline_host_lane_describe).  Above both the renderer and the
 * lane, so neither calls the other back. */
#pragma once

#include "pp-timeline-render.h"

/* A malloc'd string ("GC pause 3.2 ms", "descheduled 1.1 ms of this 8.0 ms
 * gap ..."), NULL where (x, y) is not on a part of a host lane. */
char *pp_timeline_host_lane_tooltip (const PpTimelineModel *m, const PpTimelineView *v,
                                     double x, double y);
