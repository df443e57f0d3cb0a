/* pp-timeline-model-private.h — what the renderer needs from the model
 * beyond the public API (not for the widgets). */
#pragma once

#include "pp-timeline-model.h"

/* The step number of each entry of pp_timeline_model_step_starts. */
const int32_t *pp_timeline_model_step_numbers (const PpTimelineModel *m);

/* Index of the first span of rank that may overlap [t, ...): every span
 * before it ends before t. */
size_t pp_timeline_model_first_overlapping (const PpTimelineModel *m, int rank, int64_t t);

/* Bit k set: a span of PpSpanKind k was added. */
uint32_t pp_timeline_model_kinds_seen (const PpTimelineModel *m);

/* First span start and last span end over all ranks (plans not counted);
 * 0 if there is no span. */
int pp_timeline_model_span_extent (const PpTimelineModel *m, int64_t *start, int64_t *end);

/* The planned bubble of rank over [t0, t1] as in rank_stats; -1 if none. */
double pp_timeline_model_planned_bubble (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1);
