/* pp-timeline-model.h — what the timeline shows: a run's trace, in memory.
 *
 * Fed item by item from a trace file or a live stream (PpTraceItem from
 * pp-trace.h), it keeps per rank the spans sorted by start time, the planned
 * schedule with its simulated times, step markers, counters (loss per step,
 * activation memory), the description and the dropped-event count, and
 * answers what the renderer, the widgets and `pipescope-cli render` ask.
 * Plain C over cairo-free data; no GTK.  Not thread-safe: feed it on the
 * thread that draws (the app's main loop); another thread reads a
 * snapshot (pp_timeline_model_snapshot).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-analysis.h"
#include "pp-stuck.h"
#include "pp-trace.h"

typedef struct _PpTimelineModel PpTimelineModel;

/* What a hostile file can make the model hold is bounded by what it holds:
 * times (span ends, clock offsets, plan times, step markers) are clamped to
 * [-PP_TIMELINE_MAX_ABS_NS, PP_TIMELINE_MAX_ABS_NS], about 73 years either
 * side of the clock's zero, so that the difference of two times and a time
 * plus a difference fit in an int64 for every consumer.  Steps are kept
 * sparse (any int32 step costs what one step costs) except losses, which are
 * indexed by step up to PP_TIMELINE_LOSS_SLACK + 16 x the loss counters
 * seen; a loss further out is not kept. */
#define PP_TIMELINE_MAX_ABS_NS  ((int64_t) 1 << 61)
#define PP_TIMELINE_LOSS_SLACK  4096

typedef struct {
  int     kind;          /* PpTraceActionKind */
  int     stage, microbatch;
  int     sub_kind, sub_stage, sub_microbatch;   /* OVERLAP_F_B */
  int64_t start_ns, end_ns;                      /* planned, on the spans' clock */
} PpTimelinePlanned;

typedef struct {
  double  busy_ns;        /* compute (F, B, I, W, OVERLAP_F_B, OPT) inside the extent */
  double  wait_ns;        /* WAIT spans */
  double  bubble;         /* 1 - busy / extent (idle and waiting), 0..1 */
  double  planned_bubble; /* from the plan, -1 if none */
  double  peak_activation_bytes;   /* from counters, -1 if none */
  int     peak_inflight;           /* from counters, -1 if none */
} PpTimelineRankStats;

PpTimelineModel *pp_timeline_model_new (void);
void             pp_timeline_model_free (PpTimelineModel *m);

/* Takes one item (any type; END is ignored).  Returns 1 if what is drawn
 * changed.  Plans: the last plan seen for a rank replaces the earlier one;
 * its times (seconds from the run's start) are placed on the spans' clock
 * using the description's start_monotonic_ns. */
int              pp_timeline_model_add (PpTimelineModel *m, const PpTraceItem *item);

/* A copy of m as it is now, for an analysis on another thread (the app's
 * panels): the model is not thread-safe even for readers (its queries
 * settle and cache), so a worker reads a snapshot it owns alone, made on
 * the thread that feeds m.  It answers every query as m did when it was
 * made, takes no add, and is freed with pp_timeline_model_free.  NULL out
 * of memory, or for a view (pp-timeline-fold.h). */
PpTimelineModel *pp_timeline_model_snapshot (const PpTimelineModel *m);

/* Reads a whole trace file into a new model; NULL with a one-line error. */
PpTimelineModel *pp_timeline_model_new_from_file (const char *path, PpError *err);
/* Whether the file it was read from ends inside a frame (cut short). */
int              pp_timeline_model_truncated (const PpTimelineModel *m);

const PpTraceDescription *pp_timeline_model_description (const PpTimelineModel *m); /* NULL until seen */
/* What to call rank r where a user reads it: the device the trace knows
 * ("GPU 3" on the CUDA backend, "CPU rank 3" on the CPU's, "rank 3" for a
 * plan or an unknown backend), and "host:rank 3" when the ranks ran on
 * more than one host (RANK frames). */
void        pp_timeline_model_rank_label (const PpTimelineModel *m, int r, char *buf, size_t size);
/* "GPU", "CPU rank" or "rank": the word for a rank of this trace. */
const char *pp_timeline_model_rank_word (const PpTimelineModel *m);
/* A rank's activation memory over time (ACTIVATION_BYTES counters), in
 * time order as they came: at most PP_TIMELINE_MEMORY_MAX samples a rank
 * (evenly thinned past that). */
#define PP_TIMELINE_MEMORY_MAX 8192
typedef struct {
  int64_t t;       /* ns, on the timeline's clock */
  double  bytes;
} PpTimelineMemorySample;
const PpTimelineMemorySample *pp_timeline_model_memory (const PpTimelineModel *m, int r, size_t *n);
/* A lost rank (issue 17): rank's stream ended abnormally (its connection
 * dropped, its process was killed) while the others went on.  Everything
 * received stays; the timeline marks the rank's row lost from t_ns (on
 * the spans' clock) on, or, with PP_TIMELINE_LOST_AT_LAST_EVENT, from the
 * end of the last event received of that rank (of the run, for a rank
 * nothing came from).  Makes the rank exist.  The earliest loss reported
 * stands.  Returns 1 if what is drawn changed. */
#define PP_TIMELINE_LOST_AT_LAST_EVENT INT64_MIN
int              pp_timeline_model_set_rank_lost (PpTimelineModel *m, int rank, int64_t t_ns);
/* Where rank was lost, INT64_MAX if it was not. */
int64_t          pp_timeline_model_rank_lost (const PpTimelineModel *m, int rank);
/* Where rank r ran (a RANK frame), "" when the trace does not say. */
const char *pp_timeline_model_rank_host (const PpTimelineModel *m, int r);
/* A number in a description's model line ("residual MLP: 8 blocks, width
 * 256, hidden 1024, batch 64"): the one right before word (before) or
 * after it (after " ", "=" or ":"), word standing alone ("batch", not
 * "micro-batch"); 0 if none. */
long             pp_timeline_description_number (const PpTraceDescription *d, const char *word,
                                                 int before);
/* Whether the run is a PyTorch job (the hook's model line, "PyTorch 2.15.0 gloo ..."). */
int              pp_timeline_description_is_pytorch (const PpTraceDescription *d);
int              pp_timeline_model_n_ranks (const PpTimelineModel *m);
/* A job whose pipeline ranks each run in several processes (PROCESS
 * frames, trace format 1.4): a rank's spans here are one of them, its
 * lowest place (dp, then tp, cp, ep), and every number computed over the
 * ranks is that replica's; every process's spans are kept besides (the
 * places below) for the views that fold them (pp-timeline-fold.h).
 * n_processes: the processes placed (0: a trace without places, one
 * process a rank); n_replicas: the data-parallel size (1 without);
 * shown_dp: the dp the ranks hold; n_hidden_spans: the other replicas'
 * spans, which the ranks leave out (the places keep them).  replica_note: "replica dp 0 of 2 shown", or "" when
 * the trace has one replica, for a header. */
int              pp_timeline_model_n_processes (const PpTimelineModel *m);
int              pp_timeline_model_n_replicas (const PpTimelineModel *m);
int              pp_timeline_model_shown_dp (const PpTimelineModel *m);
uint64_t         pp_timeline_model_n_hidden_spans (const PpTimelineModel *m);
void             pp_timeline_model_replica_note (const PpTimelineModel *m, char *buf, size_t size);
/* The note itself, from the shown process's coordinates and the mesh's
 * sizes (dimensions as PP_TRACE_MESH_*): "replica dp 0 of 2 shown", "1 of
 * 4 processes a rank shown (dp 0 tp 0 of dp 2 × tp 2)", "" for one; with
 * " (place not read: dp by global rank)" after it when flags (of the
 * processes shown, PP_TRACE_PROCESS_*) say a place was not read. */
void             pp_timeline_replica_note_format (const int32_t shown[PP_TRACE_MESH_DIMS],
                                                  const int32_t size[PP_TRACE_MESH_DIMS], uint32_t flags,
                                                  char *buf, size_t bufsize);
/* Every placed process's spans are kept too, whatever the rows show: the
 * views of pp-timeline-fold.h fold or unfold them.  Places in mesh order
 * (pipeline rank, then dp, tp, cp, ep), i in [0, n_places); the spans by
 * start, valid until the next add.  process_place: the place of global
 * rank process, NULL if none came. */
int                   pp_timeline_model_n_places (const PpTimelineModel *m);
const PpTraceProcess *pp_timeline_model_place (const PpTimelineModel *m, int i);
const PpSpan         *pp_timeline_model_place_spans (const PpTimelineModel *m, int i, size_t *n);
const PpTraceProcess *pp_timeline_model_process_place (const PpTimelineModel *m, int32_t process);
/* Spans of a placed job that no process tagged: a rank of one process
 * counts them its own (its place_spans hold them); those of a rank of
 * several belong to none, and this says how many a view leaves out. */
uint64_t              pp_timeline_model_n_unassigned_spans (const PpTimelineModel *m);

/* A view's rows (pp-timeline-fold.h): a model whose "ranks" are rows.  A
 * row shows a pipeline rank folded over its replicas (row_folded: how
 * many; row_process -1) or one process (row_process: its global rank).
 * For a model that is no view, a row is its rank: row_rank(r) = r,
 * row_process -1, row_folded 0. */
typedef struct {
  int64_t latest_end_ns;     /* the end of the replica that ended last */
  int64_t earliest_start_ns; /* the start of the replica that started first */
  int64_t latest_start_ns;   /* the start of the replica that started last */
  int32_t slowest_process;   /* its global rank */
  int32_t slowest_dp;        /* and its replica */
  int32_t n;                 /* replicas that ran the block */
  int32_t median_dp;         /* the replica whose copy is drawn (the median start's) */
} PpTimelineFold;
/* Whether a folded block's replicas ran it out of step: their copies'
 * starts further apart than the drawn copy is long (span: that copy). */
int                   pp_timeline_fold_apart (const PpTimelineFold *f, const PpSpan *span);
int                   pp_timeline_model_is_view (const PpTimelineModel *m);
int                   pp_timeline_model_row_rank (const PpTimelineModel *m, int row);
int                   pp_timeline_model_row_process (const PpTimelineModel *m, int row);
int                   pp_timeline_model_row_folded (const PpTimelineModel *m, int row);
/* A folded block's spread (NULL for a row that is not folded). */
const PpTimelineFold *pp_timeline_model_fold (const PpTimelineModel *m, int row, long index);

/* The run's time zero: its earliest span or plan start (a plan is placed
 * at the description's start_monotonic_ns, the run's start).  Every time a
 * user reads counts from here: the ruler, the tooltips, render, info and
 * the CSV and Chrome exports. */
int64_t          pp_timeline_model_start_ns (const PpTimelineModel *m);
int64_t          pp_timeline_model_end_ns (const PpTimelineModel *m);    /* latest end */
size_t           pp_timeline_model_n_spans_total (const PpTimelineModel *m);
/* The spans an analysis reads: the rows' and the other replicas' (hidden)
 * ones; a panel re-analyses when it changes. */
size_t           pp_timeline_model_n_spans_analysed (const PpTimelineModel *m);

/* Spans of a rank, sorted by start_ns; valid until the next add. */
size_t           pp_timeline_model_n_spans (const PpTimelineModel *m, int rank);
const PpSpan    *pp_timeline_model_spans (const PpTimelineModel *m, int rank);
/* The longest span of a rank (bounds a search for what overlaps a range). */
int64_t          pp_timeline_model_max_span_ns (const PpTimelineModel *m, int rank);

size_t           pp_timeline_model_n_planned (const PpTimelineModel *m, int rank);
const PpTimelinePlanned *pp_timeline_model_planned (const PpTimelineModel *m, int rank);

/* Every rank's last plan as it came, timed or not (an untimed one is
 * placed nowhere, but it is the order the rank runs), for the why
 * analysis (PpWhyPlans, pp-why.h): *actions and *n_actions by rank up to
 * the highest rank with a plan, whose count is returned; -1 out of memory.
 * The caller frees both arrays; the actions are the model's, valid until
 * the next add. */
int              pp_timeline_model_plans (const PpTimelineModel *m,
                                          const PpTracePlanAction ***actions,
                                          size_t **n_actions);
/* How many PLAN items the model has taken: a cache of anything built from
 * the plans is stale when it changed. */
size_t           pp_timeline_model_n_plan_items (const PpTimelineModel *m);

/* Step boundaries: the times where a step begins (any rank's first begin
 * marker of the step), ascending.  Sorted on the first query after an add
 * (O(S log S) once), so the pointers are valid until the next add. */
size_t           pp_timeline_model_n_steps (const PpTimelineModel *m);
const int64_t   *pp_timeline_model_step_starts (const PpTimelineModel *m);
/* The step number of each entry of pp_timeline_model_step_starts. */
const int32_t   *pp_timeline_model_step_numbers (const PpTimelineModel *m);
/* First span start and last span end over all ranks (plans not counted);
 * 0 if there is no span. */
int              pp_timeline_model_span_extent (const PpTimelineModel *m, int64_t *start, int64_t *end);
/* The run's steps: from its first block (set-up before step 0 is never a
 * step's, pp-analysis.h) to the last span end; the span extent where the
 * model has no block.  0 if there is no span.  Where the bubble is drawn. */
int              pp_timeline_model_step_extent (const PpTimelineModel *m, int64_t *start, int64_t *end);

/* Loss per step (NaN where unknown), indexed by step: a job of replicas'
 * lowest replica's (dp 0), never two replicas' values on one series. */
size_t           pp_timeline_model_n_losses (const PpTimelineModel *m);
const double    *pp_timeline_model_losses (const PpTimelineModel *m);
/* A job of replicas (placed processes): each replica's losses by step,
 * series i of n_loss_series, dp ascending; *dp its replica, *n its length.
 * 0 series for a trace without places.  The job's loss over its replicas
 * (as the framework reduces it) is the analysis', not a series here. */
size_t           pp_timeline_model_n_loss_series (const PpTimelineModel *m);
const double    *pp_timeline_model_loss_series (const PpTimelineModel *m, size_t i, int32_t *dp, size_t *n);

/* The block-edge counters (RUN_DELAY_NS, PROBE_SELF_NS; format 1.6;
 * ON_CPU_NS, 1.7), every one read, times with the clock offsets applied
 * (a CLOCK_OFFSET frame that came after them moves them as it moves the
 * spans), and who wrote each (process, -1 none); their count. */
size_t           pp_timeline_model_edge_counters (const PpTimelineModel *m, const PpCounter **counters,
                                                  const int32_t **process);

/* Resolves a span's name_id; NULL if none. */
const char      *pp_timeline_model_string (const PpTimelineModel *m, uint32_t id);

uint64_t         pp_timeline_model_dropped (const PpTimelineModel *m);

/* Each rank's measured bubble a step over the steps that count, as
 * pp-analysis.h defines both (every view reads the same): bubble[r] gets
 * the median over the counted steps of the share of the whole step (its
 * first work start to its last work end over the ranks) in which rank r
 * runs no work.  bubble[n_ranks] gets -1 for every rank
 * when no step counts.  Returns the number of steps counted. */
int              pp_timeline_model_step_bubbles (const PpTimelineModel *m, double *bubble);
/* Whether a timed plan's action of this kind (PP_TRACE_ACT_*) is work:
 * compute (F, B, I, W, F+B) and data-parallel (UNSHARD, RESHARD,
 * REDUCE_GRAD, WAIT_REDUCE_GRAD).  A plan's step runs from its first work
 * action's start to its last one's end over the ranks, a rank's plan
 * bubble is the share of it without work: info, merge's and profile's
 * lines, render's header and the Statistics tab all measure so. */
int              pp_timeline_plan_action_is_work (int kind);

/* The whole analysis of the steps (which count, the median step, the
 * bubbles), out cleared with pp_analysis_steps_clear; returns its n_steps.
 * A job of replicas: its median copy's (the copy of the pipeline whose
 * median step is the median, the lower of two middles: the one the why
 * analysis, pp_why_analyse_replicas, takes its steps and path from), so
 * that every view shows one copy's numbers whichever copy that is. */
int              pp_timeline_model_step_analysis (const PpTimelineModel *m, PpAnalysisSteps *out);
/* The replica (dp) whose numbers pp_timeline_model_step_analysis gives:
 * the median copy's, or the shown one's (pp_timeline_model_shown_dp)
 * where the job has one copy or none has a whole step. */
int              pp_timeline_model_analysis_dp (const PpTimelineModel *m);
/* The median copy's place (coord[dp .. ep]; coord[pp] -1): 1, or 0 where
 * the job has one copy or none has a whole step. */
int              pp_timeline_model_analysis_copy (const PpTimelineModel *m, int32_t coord[PP_TRACE_MESH_DIMS]);
/* Each replica's bubble a step by the one analysis (its waits for a
 * slower replica idle, as in the median copy's): of replica dps[k] (its
 * lowest place's copy, as a view of that replica shows it; dps sorted,
 * n_dps of them: pp_timeline_model_replica_dps) into
 * bubble[k * n_ranks + r], its counted steps into n_steps[k] (0: none).
 * Returns how many replicas have a step (0: no replicas). */
int              pp_timeline_model_replica_step_bubbles (const PpTimelineModel *m, int n_ranks,
                                                         const int32_t *dps, int n_dps, double *bubble,
                                                         int *n_steps);
/* The spans each rank's numbers are of, rows[r][n[r]] for every rank: the
 * median copy's processes' (a job of replicas), else the rows'. */
void             pp_timeline_model_analysis_rows (const PpTimelineModel *m, const PpSpan **rows, size_t *n);

/* Per-rank statistics over [t0, t1] (use start/end for the whole run). */
void             pp_timeline_model_rank_stats (const PpTimelineModel *m, int rank,
                                               int64_t t0, int64_t t1,
                                               PpTimelineRankStats *out);

/* issue 37: the stuck diagnosis of the model's job (runtime/pp-stuck.c's
 * line, as info prints it) from its processes' last OPEN frames, into
 * line; PP_STUCK_NONE and "" when nobody waits, or when quiet_s > 0 and
 * the job made progress (a span came, an action changed) within the last
 * quiet_s seconds (a live job). */
PpStuckKind pp_timeline_model_stuck (const PpTimelineModel *m, double quiet_s, char *line, size_t size);
/* When a live job is stuck: no action has ended for this many seconds
 * (runtime/pp-stuck.c's rule, pp_stuck_after_s, over the steps the model's
 * stream said: 10 median steps and at least 30 s). */
double      pp_timeline_model_stuck_after_s (const PpTimelineModel *m);
/* The verdict as pp_timeline_model_stuck, and the wait-for graph's edges
 * (runtime/pp-stuck.c's, pp_stuck_watch_edges) into edges[max]: *n_edges
 * their number (0 when PP_STUCK_NONE). */
PpStuckKind pp_timeline_model_stuck_graph (const PpTimelineModel *m, double quiet_s, PpStuckVerdict *v,
                                           PpStuckEdge *edges, size_t max, size_t *n_edges);
/* A process's last open action, as the timeline draws it. */
typedef struct {
  int32_t     number;   /* the process's number as PpStuckEdge's (global rank, else pipeline rank) */
  int         row;      /* the row that shows it, -1 none */
  PpTraceOpen open;     /* its times on the spans' clock (start_ns 0: not known) */
} PpTimelineOpen;
/* The model's processes' last open actions into out[max]: their number. */
size_t      pp_timeline_model_opens (const PpTimelineModel *m, PpTimelineOpen *out, size_t max);
/* Now, as the model knows it: its latest end, or a process's latest
 * OPEN frame (its heartbeat) of an action still open when later.  A stuck
 * job's waits are drawn up to it. */
int64_t     pp_timeline_model_now_ns (const PpTimelineModel *m);
/* The row process number (as PpStuckEdge's) shows on: its own row, else
 * its pipeline rank's; -1 none. */
int         pp_timeline_model_process_row (const PpTimelineModel *m, int32_t number);
