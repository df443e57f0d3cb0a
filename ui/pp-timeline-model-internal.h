/* pp-timeline-model-internal.h — between the model's own files
 * (pp-timeline-model*.c) only: the model's layout and the helpers one file
 * calls in another.  Not for the renderer (pp-timeline-model-private.h) nor
 * the widgets (pp-timeline-model.h). */
#pragma once

#include "pp-analysis-loss.h"
#include "pp-timeline-model-private.h"

typedef struct {
  PpSpan            *spans;          /* by start once settled (settle) */
  size_t             n_spans, cap_spans;
  size_t             n_sorted;       /* spans[0, n_sorted) are by start; the rest came after */
  int64_t            max_span_ns;
  int64_t            max_end_ns;
  int64_t            offset_ns;      /* the offset its spans are moved by (its shown process's) */
  int64_t            untagged_offset_ns;   /* the rank's CLOCK_OFFSET of no process */
  PpTimelinePlanned *plan;
  size_t             n_plan;
  double             peak_activation;
  int                peak_inflight;
  char               host[64];       /* RANK: where the rank ran; "" unknown */
  int64_t            lost_ns;        /* its stream ended abnormally here; INT64_MAX: not lost */
  /* the process whose items the row shows (-1: none placed yet) and its place */
  int32_t            shown_process;
  int32_t            shown_coord[PP_TRACE_MESH_DIMS];
  uint32_t           shown_flags;    /* PP_TRACE_PROCESS_*: its place was not read */
  /* A job of processes: the rank's spans no process tagged, on its
   * untagged clock, and how many of them its single process took in */
  PpSpan            *untagged;
  size_t             n_untagged, cap_untagged, n_adopted;
  /* activation bytes over time: every stride-th counter, at most
   * PP_TIMELINE_MEMORY_MAX (halved, stride doubled, when full) */
  PpTimelineMemorySample *mem;
  size_t             n_mem;
  unsigned           mem_stride, mem_skip;
} Rank;

typedef struct {
  uint32_t id;
  char    *name;
} String;

/* One process of a job of replicas: its place and its spans, by start once
 * settled, on the clock of its own CLOCK_OFFSET frames, or where it has
 * none, of its rank's untagged one (as cli-trace-load.c and pp-why-trace.c
 * read them). */
typedef struct {
  PpTraceProcess place;            /* numbered where its place was not read */
  PpTraceProcess read;             /* as its PROCESS frame said */
  int            placed;           /* its PROCESS frame came */
  int32_t        rank;             /* the pipeline rank of its spans, -1 not known */
  int            has_own_offset;
  int64_t        own_offset_ns;    /* its own CLOCK_OFFSET, when has_own_offset */
  Rank           r;                /* spans, n_spans, n_sorted, offset_ns used */
} Proc;

/* One replica's losses by step (NaN where unknown). */
typedef struct {
  int32_t dp;
  double *v;
  size_t  n;
} LossSeries;

/* A view's row: the pipeline rank it belongs to, the process it shows (-1:
 * folded), its label, and for a folded row one PpTimelineFold a span. */
typedef struct {
  int             rank, process, n_folded;
  char            label[40];
  PpTimelineFold *fold;
} Row;

typedef struct {
  int64_t t;
  int32_t step;
} StepMark;

struct _PpTimelineModel {
  int                has_desc;
  int                frozen;        /* a snapshot (pp-timeline-model-snapshot.c): takes no add */
  int                truncated;     /* read from a file that ends inside a frame */
  PpTraceDescription desc;
  Rank              *ranks;
  int                n_ranks, cap_ranks;
  size_t             n_spans_total;
  int64_t            start_ns, end_ns;   /* INT64_MAX / INT64_MIN until something is seen */
  int64_t            span_start_ns, span_end_ns;   /* the same, spans only */
  /* Plans arrive before any span in a file; they are kept as read (seconds)
   * and placed again when the origin moves (description seen later). */
  int64_t            plan_origin_ns;     /* INT64_MIN: not known yet */
  struct { PpTracePlanAction *a; size_t n; int timed; } *raw_plans;   /* [cap_ranks] */
  size_t             n_plan_items;       /* PLAN items taken */
  /* Step begin markers as they came (at most one per step after a
   * rebuild); step_starts/numbers are rebuilt from them, sorted, on the
   * first query after a change: a marker costs O(1) when added, and a
   * query O(S log S) once, whatever order the markers come in. */
  StepMark          *marks;
  size_t             n_marks, cap_marks;
  int                steps_dirty;
  int64_t           *step_starts;        /* ascending, steps with a marker */
  int32_t           *step_numbers;
  size_t             n_steps;
  double            *losses;           /* the job's loss a step: pp_analysis_loss_at of loss_acc */
  PpAnalysisLoss    *loss_acc;
  size_t             n_losses;
  size_t             n_loss_counters;    /* loss counters kept (bounds n_losses) */
  /* a job of replicas: each replica's losses by step, apart (never mixed) */
  LossSeries        *loss_series;
  size_t             n_loss_series;
  /* the block-edge counters (run delay, probe self, on CPU; 1.6, 1.7),
   * for the Why panel's runtime parts: every one (the arrays grow by
   * doubling, no cap: a long job's first steps are as much its run as its
   * last), who wrote each, and its time as read (edge_raw_ns).  edge's
   * times are edge_raw_ns on the clock of its process or rank as it now
   * stands: a CLOCK_OFFSET frame that comes later moves them as it moves
   * the spans (edge_retime, done at the next query: one pass, however
   * many frames came) */
  PpCounter         *edge;
  int32_t           *edge_process;
  int64_t           *edge_raw_ns;
  size_t             n_edge, cap_edge;
  int                edge_retime;
  int64_t            plan_ps, plan_pe;   /* compute extent of all plans; ps > pe: none */
  /* The extents are a cache: what only widens them (a span, a first plan)
   * widens them as it comes; what may shrink them (a plan replaced, a clock
   * offset, the plan's origin moved) marks them stale, and the next query
   * recomputes them once.  A file of 65,536 such frames then costs one
   * pass over the ranks, not one per frame. */
  int                extent_stale, plan_extent_stale;
  String            *strings;            /* sorted by id */
  size_t             n_strings, cap_strings;
  uint64_t           dropped;
  uint32_t           kinds_seen;         /* bit per PpSpanKind */
  char               first_host[64];     /* the first RANK frame's host */
  /* A live run marks a step once it is over: the step after the last
   * marked one begins, provisionally, at its first block */
  int32_t            max_marked_step;    /* -1: no marker yet */
  int32_t            provisional_step;   /* the step given a boundary from a block */
  int                several_hosts;      /* RANK frames name more than one host */
  /* format 1.4: the processes placed (a bit each), their count, and the
   * largest dp size a place says */
  uint8_t           *process_bits;
  int                n_processes;
  int32_t            n_replicas;         /* processes a pipeline rank has: dp x tp x cp x ep */
  int32_t            mesh_size[PP_TRACE_MESH_DIMS];   /* the largest size each place says */
  uint64_t           hidden_spans;       /* other replicas' spans left out */
  /* Every placed process's spans, for the views that fold or unfold the
   * replicas (pp-timeline-fold.c): procs by arrival, proc_at by process id
   * (-1: none), places the placed ones in mesh order, rebuilt on query. */
  Proc              *procs;
  int                n_procs, cap_procs;
  int32_t           *proc_at;            /* [PP_TRACE_MAX_PROCESSES] */
  int               *places;
  int                n_places, places_dirty;
  /* A view (pp_timeline_model_new_like): what each row is and says */
  int                is_view;
  Row               *rows;               /* [cap_ranks] */
  double            *row_bubbles;        /* [n_ranks]: step_bubbles' answer, when set */
  int                row_bubble_steps;
  char               note[256];
  int                n_unplaced;         /* processes whose place was not read */
  int                untagged_pending;   /* spans in a rank's untagged not yet adopted */
  /* Bumped by whatever changes what the model holds: a cache of a
   * whole-run figure is good while it stands (step_bubbles' answer,
   * asked by every frame's header, costs a pass and a sort over every
   * span: a million spans redrawn at any zoom paid it each time). */
  uint64_t           generation;
  struct { double *bubble; int n_ranks, n_steps; uint64_t generation; } step_cache;
  /* the edge counters per row, in time order (row_edge_counters): row r's
   * are c[at[r] .. at[r + 1]), RUN_DELAY_NS first; valid for generation */
  struct { PpCounter *c; size_t *at; int n_ranks, built; uint64_t generation; } row_edge;
  /* issue 37 (pp-timeline-model-stuck.c): each process's place and last
   * OPEN frame, when the job last made progress (CLOCK_MONOTONIC here) */
  PpStuckWatch       stuck;
};

/* What one file calls in another, by the file that has it, the lowest
 * first (pp-timeline-model.c's top comment says the order). */

/* pp-timeline-model-ranks.c */
int64_t clamp_ns (int64_t t);
int64_t add_ns (int64_t a, int64_t b);
int ensure_rank (PpTimelineModel *m, int r);
void see_time (PpTimelineModel *m, int64_t a, int64_t b);
void settle_rank (Rank *rk);
void settle (const PpTimelineModel *cm, int r);
void append_span (Rank *rk, const PpSpan *in, int64_t offset);

/* pp-timeline-model-plan.c */
int plan_kind_is_busy (int kind);
void recompute_plan_extent (PpTimelineModel *m);
void widen_plan_extent (PpTimelineModel *m, int r);
int place_plan (PpTimelineModel *m, int r);
int set_plan_origin (PpTimelineModel *m, int64_t origin);
int add_plan (PpTimelineModel *m, const PpTraceItem *item);

/* pp-timeline-model-stuck.c */
void stuck_take (PpTimelineModel *m, const PpTraceItem *item);
/* A view's copy of src's watch, its open actions moved onto the spans'
 * clock as src's are now; false on no memory. */
bool stuck_copy (PpTimelineModel *v, const PpTimelineModel *src);

/* pp-timeline-model-processes.c */
int64_t offset_for (const PpTimelineModel *m, int r, int32_t process);
void proc_add_span (PpTimelineModel *m, const PpSpan *in, int32_t process);
int take_clock_offset (PpTimelineModel *m, int r, int32_t process, int64_t offset);
void proc_place (PpTimelineModel *m, const PpTraceProcess *pl);
void keep_untagged (PpTimelineModel *m, const PpSpan *in);

/* pp-timeline-model-steps.c */
int add_step_marker (PpTimelineModel *m, const PpTraceItem *item);
int push_mark (PpTimelineModel *m, int64_t t, int step);

/* pp-timeline-model-counters.c */
void retime_edges (const PpTimelineModel *cm);
int add_counter (PpTimelineModel *m, const PpCounter *c, int32_t process);

/* pp-timeline-model-spans.c */
void fresh_extents (const PpTimelineModel *cm);
void add_span (PpTimelineModel *m, const PpSpan *in, int64_t offset);

/* pp-timeline-model-replicas.c */
int is_shown (PpTimelineModel *m, int r, int32_t process);
int add_process (PpTimelineModel *m, const PpTraceProcess *in);
int item_rank (const PpTraceItem *item);

/* pp-timeline-model.c */
int add_string (PpTimelineModel *m, uint32_t id, const char *name);
