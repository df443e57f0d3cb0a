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

/* Building a view (pp-timeline-fold.c): a model with src's description,
 * step markers, strings and losses and no rows; rows are added one by
 * one (with the plan of their rank when with_plan), then their spans, by
 * start, with a fold each for a folded row.  -1 out of memory. */
PpTimelineModel *pp_timeline_model_new_like (const PpTimelineModel *src);
int  pp_timeline_model_view_add_row (PpTimelineModel *v, const PpTimelineModel *src, int rank,
                                     int process, int n_folded, const char *label, int with_plan);
int  pp_timeline_model_view_add_spans (PpTimelineModel *v, int row, const PpSpan *spans, size_t n,
                                       const PpTimelineFold *fold);
/* A row's label, replaced (a folded row whose replicas ran out of step). */
void pp_timeline_model_view_set_row_label (PpTimelineModel *v, int row, const char *label);
/* What the view shows, for the header and the statistics (replica_note). */
void pp_timeline_model_view_set_note (PpTimelineModel *v, const char *note);
/* The bubble a step each row reports (pp_timeline_model_step_bubbles):
 * its pipeline rank's in by_rank.  A folded or unfolded view gives the
 * source's numbers (the analysis' replica), not its rows' own: rows of
 * replicas side by side would stretch each step's window over them all. */
void pp_timeline_model_view_set_bubbles (PpTimelineModel *v, const double *by_rank, int n_steps);

/* Row r's block-edge counters (pp_timeline_model_edge_counters' of its
 * rank and the process it shows), .rank the row: the RUN_DELAY_NS ones
 * first (*n_delay of them), then the other kinds by kind number
 * (PROBE_SELF_NS, ON_CPU_NS), each kind in time order; *n in all.  Kept until the model changes.  NULL if none. */
const PpCounter *pp_timeline_model_row_edge_counters (const PpTimelineModel *m, int r, size_t *n_delay,
                                                      size_t *n);
