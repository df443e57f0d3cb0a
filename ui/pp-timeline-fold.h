/* pp-timeline-fold.h — what the rows of a job of replicas show.
 *
 * A job whose pipeline ranks each run in D processes (data-parallel
 * replicas, times tensor, context or expert ranks: PROCESS frames, trace
 * format 1.4) is drawn from a view: a model whose rows are built from the
 * source model's per-process spans (pp_timeline_model_place_spans).
 *
 * - fold (the default): a row a pipeline rank, labelled "rank r ×D".  A
 *   block is matched across the rank's processes by (kind, stage,
 *   micro-batch, step, and its n-th such block on the process) and drawn
 *   as the copy of the replica with the median start (the lower of two
 *   middles: a block some replica ran), over a band from the earliest
 *   start to the latest end of its copies; PpTimelineFold says where the
 *   latest replica ended and which one it was.  A row whose replicas ran
 *   a block more than its length apart is labelled "rank r ×D out of
 *   step" (pp_timeline_row_apart).
 * - unfolded ranks (or all): a row a process of the rank, labelled by its
 *   place ("rank 1 dp 3", " tp 1" where the job has tensor ranks).  Tensor
 *   ranks get rows of their own: they run the same blocks in lockstep, and
 *   a straggler among them stalls the replica as much as one across dp.
 * - replica N: a row a pipeline rank, each the lowest place of dp N.
 *
 * A trace without places (one replica) needs no view: it is drawn as it is.
 * Plans go on the rows when rows are pipeline ranks (nothing unfolded):
 * What if and the plan stay per pipeline.
 */
#pragma once

#include "pp-timeline-model.h"

typedef struct {
  int            replica;      /* -1: fold; N >= 0: replica dp N alone */
  int            all;          /* fold: every rank unfolded */
  const uint8_t *unfolded;     /* fold: ranks unfolded (a byte a rank), or NULL */
  int            n_unfolded;   /* entries of unfolded */
} PpTimelineReplicas;

/* Whether some pipeline rank of m runs in more than one process. */
int              pp_timeline_model_has_replicas (const PpTimelineModel *m);
/* The largest dp size of m's places, at most their number (1 without). */
int              pp_timeline_model_dp_size (const PpTimelineModel *m);
/* The largest dp size m's places say (1 without), for messages. */
int              pp_timeline_model_dp_size_said (const PpTimelineModel *m);

/* The dp values m's places hold, ascending, each once, into *out (the
 * caller's to free): their number, 0 without places (*out NULL), -1 out
 * of memory.  A trace of one node of a job holds some replicas of it (dp
 * 4 and 5 of 8): they are offered by these, not by 0 .. size - 1. */
int              pp_timeline_model_replica_dps (const PpTimelineModel *m, int32_t **out);
/* Whether replica dp is among dps[0, n) (ascending). */
int              pp_timeline_dps_holds (const int32_t *dps, int n, int32_t dp);
/* dps[0, n) (ascending) in words: "dp 4", "dp 4 and 5", "dp 0 to 7",
 * "dp 0 to 3, 6 and 9"; past a few runs the first ones and how many. */
void             pp_timeline_dps_words (const int32_t *dps, int n, char *buf, size_t size);

/* "fold", "all" or a replica dp N: PP_OK, or PP_EINVAL and one line. */
PpStatus         pp_timeline_replicas_parse (const char *text, PpTimelineReplicas *out, PpError *err);

/* A new view of src (free it with pp_timeline_model_free; it borrows
 * nothing), NULL out of memory.  Its replica_note says what it shows
 * ("2 replicas folded (median, mark to the latest end)"). */
PpTimelineModel *pp_timeline_view_new (const PpTimelineModel *src, const PpTimelineReplicas *how);
/* How many views pp_timeline_view_new built in this process (a view
 * copies its source: the statistics over replicas build none; tests count
 * it). */
size_t           pp_timeline_views_built (void);

/* Whether blocks of this kind say a row is out of step (work blocks, not
 * device kernels or hand-offs: a late send follows its block). */
int              pp_timeline_span_kind_folds_apart (int kind);
/* A folded row's blocks whose replicas ran them out of step
 * (pp_timeline_fold_apart): how many, the widest distance between two
 * replicas' starts of one and its step (-1 none).  0 for a row not folded. */
size_t           pp_timeline_row_apart (const PpTimelineModel *m, int row, int64_t *max_apart_ns,
                                        int32_t *step);

/* A statistic of a pipeline rank over its replicas: each replica's value
 * (replica dp N's lowest place), then their median, least and largest
 * and the replica with the largest. */
typedef struct {
  double  median, min, max;
  int32_t max_dp;
  int     n;                   /* replicas with a value */
} PpTimelineSpread;
/* Each pipeline rank's bubble a step (pp_timeline_model_step_bubbles of
 * each replica) over the replicas, into out[0, n_ranks); the number of
 * replicas measured (0: no step, or no places). */
int              pp_timeline_replica_bubbles (const PpTimelineModel *src, int n_ranks,
                                              PpTimelineSpread *out);

/* The replica that ended a step last: for rank -1 the whole step (a
 * replica's end is its processes' latest end of a block of the step), for
 * a rank r its process whose last block of the step ended last; lag: that
 * end minus the median end (over the replicas, or over rank r's
 * processes). */
typedef struct {
  int32_t step;
  int     rank;                /* -1: the whole step */
  int32_t process;             /* global rank of the slowest (a process of it, for a step) */
  int32_t dp;
  int64_t end_ns, lag_ns;
} PpTimelineSlowest;
/* One entry for each step (rank -1) followed by one a pipeline rank, steps
 * ascending; *out is the caller's to free.  0 when there is nothing to
 * compare (fewer than two replicas, no step), SIZE_MAX out of memory. */
size_t           pp_timeline_slowest_replicas (const PpTimelineModel *src, PpTimelineSlowest **out);
