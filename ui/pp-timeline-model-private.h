/* pp-timeline-model-private.h — what the renderer needs from the model
 * beyond the public API (not for the widgets). */
#pragma once

#include "pp-timeline-model.h"

/* Index of the first span of rank that may overlap [t, ...): every span
 * before it ends before t. */
size_t pp_timeline_model_first_overlapping (const PpTimelineModel *m, int rank, int64_t t);

/* Bit k set: a span of PpSpanKind k was added. */
uint32_t pp_timeline_model_kinds_seen (const PpTimelineModel *m);

/* The planned bubble of rank over [t0, t1] as in rank_stats; -1 if none. */
double pp_timeline_model_planned_bubble (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1);
