/* pp-timeline-host-lane.h — the host lane: what a rank's host was doing
 * while the rank waited (issue 29).
 *
 * A thin lane at the bottom of each rank's row, at the blocks' time scale:
 * GC pauses, the host's own work by kind (HOST_SCHEDULE, HOST_LOSS,
 * HOST_DATA, HOST_ZERO_GRAD, trace format 1.6), waiting (WAIT spans and
 * receives), and, per gap between two works of the rank, the time its
 * thread was descheduled: the difference of the rank's RUN_DELAY_NS
 * counter across the gap, at most the gap.  That is a quantity without a
 * position, so it is drawn as a hatched segment of that length at the
 * gap's start, in the lane's lower half, and its tooltip says where in the
 * gap it fell is not known.
 *
 * Drawn only for a trace that has host kinds or run-delay counters (older
 * traces keep their layout).  pp_timeline_render draws it, so the widget,
 * `render` and the tests see the same lane; this file calls nothing of the
 * renderer's (it is below it: the renderer hands it a scale and colors).
 */
#pragma once

#include <cairo.h>
#include <stddef.h>

#include <stdint.h>

#include "pp-timeline-model.h"

/* Whether the trace has anything for the lane. */
int   pp_timeline_host_lane_present (const PpTimelineModel *m);

/* The lane's parts: the host span kinds, waiting, and descheduled. */
enum {
  PP_HOST_PART_GC, PP_HOST_PART_SCHEDULE, PP_HOST_PART_LOSS, PP_HOST_PART_DATA,
  PP_HOST_PART_ZERO_GRAD, PP_HOST_PART_WAIT, PP_HOST_PART_DESCHEDULED, PP_HOST_N_PARTS
};
/* The span kind a part is drawn in the color of (the renderer's palette,
 * pp_timeline_host_color); -1 for descheduled, whose ground is its own. */
int   pp_timeline_host_lane_part_kind (int part);
void  pp_timeline_host_lane_descheduled_rgb (int dark, double rgb[3]);
/* The part's name as the legend and tooltips say it. */
const char *pp_timeline_host_lane_part_name (int part);
/* Which parts this trace holds, as bits (1 << part), for the legend. */
unsigned pp_timeline_host_lane_parts_seen (const PpTimelineModel *m);

/* Where the lane is drawn: the plot's x range for the time range, and the
 * parts' colors (the renderer fills them in). */
typedef struct {
  int64_t t0_ns, t1_ns;
  double  x0, x1;
  int     dark;
  double  rgb[PP_HOST_N_PARTS][3];
} PpHostLaneScale;

/* Draws rank r's lane in [x0, x1] x [y, y + h). */
void  pp_timeline_host_lane_draw (cairo_t *cr, const PpTimelineModel *m, int r,
                                  const PpHostLaneScale *sc, double y, double h);
/* A legend swatch of part at (x, y), w x h, drawn as the lane draws it. */
void  pp_timeline_host_lane_swatch (cairo_t *cr, int part, const double rgb[3], int dark,
                                    double x, double y, double w, double h);

/* What rank r's lane says at time t (within tol; back_ns: how far back a
 * gap may start), lower: in the lane's lower half (where descheduled is
 * drawn): "GC pause 3.2 ms", "descheduled 1.1 ms of this 8.0 ms gap ...".
 * A malloc'd string, NULL for nothing.  pp-timeline-host-tip.h turns a
 * point of a drawing into these. */
char *pp_timeline_host_lane_describe (const PpTimelineModel *m, int r, int64_t t, int64_t tol,
                                      int64_t back_ns, int lower);
