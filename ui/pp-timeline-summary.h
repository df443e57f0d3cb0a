/* pp-timeline-summary.h — a rank's work in a time window, by kind: what
 * the timeline draws, one bar a rank and step, when zoomed out too far for
 * blocks (a 300-step run on one screen), so that a slow step or a rank
 * that idles stands out instead of a mush of one-pixel blocks. */
#pragma once

#include <stdint.h>

#include "pp-timeline-model.h"

typedef struct {
  double len_ns;                         /* t1 - t0 */
  double busy_ns[PP_N_SPAN_KINDS];       /* block-lane work by kind, clipped to the window */
  double busy_total_ns;                  /* their sum, at most len_ns */
} PpTimelineStepSummary;

/* Rank's F, B, I, W, F+B and OPT time inside [t0, t1). */
void pp_timeline_summarize (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1,
                            PpTimelineStepSummary *out);
