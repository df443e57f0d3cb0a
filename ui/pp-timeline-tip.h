/* pp-timeline-tip.h — the timeline's tooltip text: a block, a planned
 * block, a folded row's label (the host lane's is pp-timeline-host-tip.h). */
#pragma once

#include "pp-timeline-render.h"

/* The tooltip of what a hit found (pp_timeline_hit); NULL for nothing.
 * Malloc'd (g_free). */
char *pp_timeline_hit_tooltip (const PpTimelineModel *m, const PpTimelineView *v, const PpTimelineHit *hit);
/* The tooltip of row's label: what a folded row shows and where its
 * replicas ran out of step; NULL for other rows. */
char *pp_timeline_row_label_tooltip (const PpTimelineModel *m, int row, const PpTimelineView *v);
