/* pp-timeline-details.h — everything known of one block of the timeline.
 *
 * What the details pane shows for a selected block: where it ran (rank,
 * stage, micro-batch, kind, step), when and for how long, the idle gap
 * before it on its rank and what it waited for: which of its dependencies
 * (pp_schedule_dependencies: F(s,m) after F(s-1,m), B and I after their F
 * and the next stage's input gradient, W after I) or its rank's previous
 * block ended last; its kernels and child spans.  And the dependency arrows
 * of its micro-batch in its step on every rank, for the renderer to draw.
 * Plain model reads; GLib for the text only.
 */
#pragma once

#include <glib.h>

#include "pp-schedule.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

#define PP_TIMELINE_DETAILS_MAX_CHILDREN 16

typedef struct {
  int     kind;          /* PpSpanKind of the block waited for */
  int     stage, rank;
  long    index;         /* into that rank's spans; -1: not in the trace */
  int64_t end_ns;
} PpTimelineDependency;

typedef struct {
  int                  rank;
  long                 index;
  PpSpan               span;
  long                 prev_index;     /* the rank's previous block (F/B/I/W/F+B/OPT), -1 if none */
  int64_t              idle_before_ns; /* from its end to this start; -1 without one */
  int                  n_deps;
  PpTimelineDependency deps[2];
  int                  last;           /* which dep ended last (0, 1), or -1: the previous block */
  int64_t              wait_ns;        /* WAIT spans right before it, summed */
  int                  n_children;     /* kernels, copies, memsets inside it */
  long                 children[PP_TIMELINE_DETAILS_MAX_CHILDREN];
  int                  more_children;  /* how many more there are */
} PpTimelineBlockDetails;

/* Fills out for span index of rank (a block of the block lane); s may be
 * NULL (no schedule known: no dependencies).  FALSE if it is not a block. */
gboolean pp_timeline_block_details (const PpTimelineModel *m, const PpSchedule *s, int rank, long index,
                                    PpTimelineBlockDetails *out);
/* The pane's text, lines "name: value"; free with g_free. */
char    *pp_timeline_block_details_text (const PpTimelineModel *m, const PpTimelineBlockDetails *d);

/* The dependency arrows of the micro-batch of span index of rank, in its
 * step, on every rank: one per (dependency → block) both in the trace.
 * At most max into out; returns how many. */
size_t   pp_timeline_microbatch_arrows (const PpTimelineModel *m, const PpSchedule *s, int rank, long index,
                                        PpTimelineArrow *out, size_t max);

/* The per-rank busy and idle time in [t0, t1], as the pane shows them. */
char    *pp_timeline_range_text (const PpTimelineModel *m, int64_t t0, int64_t t1);
