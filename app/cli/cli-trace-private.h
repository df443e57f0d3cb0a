/* cli-trace-private.h — what the files of pipescope-cli's info and export
 * share: a trace read whole (Trace) and the app's view of it (AppView).
 * Eleven files, one idea each, each calling only those above it:
 *
 *   cli-trace-load.c           reading a trace: frames kept, clock offsets
 *                              applied, processes indexed; what the export
 *                              keeps of it; the app's view
 *   cli-trace-why.c            the why report over the replicas, the one
 *                              analysis's steps, export --format why
 *   cli-trace-info.c           info
 *   cli-trace-write.c          the text the exports write (JSON, times)
 *   cli-trace-csv.c            export --format csv
 *   cli-trace-chrome-tracks.c  the Chrome export's tracks and names
 *   cli-trace-chrome-flows.c   its arrows: transfers and dependencies
 *   cli-trace-chrome-steps.c   its step and plan tracks
 *   cli-trace-chrome-meta.c    its "pipescope" member, for import
 *   cli-trace-chrome.c         export --format chrome: spans, counters
 *   cli-trace-export.c         export: options, selection, clock, output
 *
 * Nothing here leaves pipescope-cli. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli-select.h"
#include "pp-stuck.h"
#include "pp-analysis.h"
#include "pp-schedule.h"
#include "pp-straggler.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"
#include "pp-why.h"

/* ---- reading a whole trace ------------------------------------------------ */

typedef struct {
  uint32_t id;
  char    *name;
} NamedString;

/* The last plan of a rank (a later PLAN for a rank replaces the earlier). */
typedef struct {
  bool   seen;
  bool   has_timeline;
  size_t n_actions;
  double start, end, busy;   /* seconds: first start, last end, compute time */
  /* its compute actions in order: the why analysis builds the schedule
   * from them, and of a plan without times the Chrome export's plan track
   * names them (a timed plan it reads from the model) */
  PpTracePlanAction *order;
  size_t             n_order;
} PlanSummary;

/* A STEP_MARKER frame as it came (its time on the common clock once the
 * offsets are applied). */
typedef struct {
  int64_t t;
  int32_t rank, step;
  int     phase;
  int32_t process;   /* format 1.4: the process that wrote it; -1 not said */
} StepMarker;

typedef struct {
  bool               has_desc;
  PpTraceDescription desc;
  /* every span; in a trace with places (format 1.4) those of the shown
   * replica first, spans[0, n_spans), which every analysis reads (the
   * timeline model shows them alone), and then the other replicas' up
   * to n_all_spans, which the exports write too */
  PpSpan            *spans;
  size_t             n_spans, cap_spans, n_all_spans;
  int                max_rank;       /* -1: none seen */
  int                n_plans;
  PlanSummary       *plans;          /* [cap_plans] by rank */
  int                cap_plans;
  uint64_t           dropped;
  int                truncated;
  NamedString       *strings;
  size_t             n_strings, cap_strings;
  /* RANK and CLOCK_OFFSET items as they came (the last one for a rank holds) */
  PpTraceItem       *rank_items;
  size_t             n_rank_items, cap_rank_items;
  /* counters (loss, activation memory, ...): the Chrome export's counter tracks */
  PpCounter         *counters;
  int32_t           *counter_process;  /* [cap_counters] who wrote each (1.4); -1 not said */
  size_t             n_counters, cap_counters;
  StepMarker        *markers;
  size_t             n_markers, cap_markers;
  /* the plans' compute orders as the why analysis takes them (build_why_plans) */
  PpWhyPlans                why_plans;
  const PpTracePlanAction **why_actions;
  size_t                   *why_n;
  /* format 1.4: the process that wrote each span (-1: not said) and the
   * PROCESS frames, one a process (its last), sorted by process; for the
   * Chrome export, each pipeline rank's track (its shown replica's) */
  int32_t           *span_process;     /* [cap_spans] */
  PpTraceProcess    *procs;
  size_t             n_procs, cap_procs;
  int32_t           *proc_at;          /* [PP_TRACE_MAX_PROCESSES]: index in procs, -1 none; NULL without */
  int               *rank_pid;         /* [n_rank_pid], NULL without places */
  int                n_rank_pid;
  /* [n_procs]: the pipeline a process belongs to, its (dp, tp, cp, ep)
   * numbered densely in that order: the replica of the pipeline */
  int32_t           *proc_replica;
  int32_t            n_replicas;       /* 1 without places */
  size_t             n_unplaced;       /* processes whose place was not read */
  /* export only: what it keeps (--steps, --ranks, --replicas; NULL:
   * everything), and with --clock realtime each Chrome track's real pid,
   * [n_out_pids] by pipescope's track number (NULL: those numbers) */
  /* format 1.10: each process's last OPEN frame (cli-stuck.h) */
  PpStuckOpen         *opens;
  size_t             n_opens, cap_opens;
  const PpCliSelection *keep;
  int32_t              *out_pids;
  size_t                n_out_pids;
} Trace;

/* What the app reads off a trace (its timeline model): the run's time
 * zero (pp_timeline_model_start_ns), which info and every export count
 * from, its step boundaries, and its plan as the plan lane places it (one
 * copy under every step).  Taken from the model and the model freed before
 * the trace is read for the rest: a command never holds two copies of the
 * spans. */
typedef struct {
  int64_t             origin;
  size_t              n_steps;
  int64_t            *step_starts;   /* [n_steps] */
  int32_t            *step_numbers;  /* [n_steps] */
  size_t              n_copies;      /* of the plan */
  int64_t            *shift, *limit; /* [n_copies] pp_timeline_plan_copy */
  int                 n_ranks;
  PpTimelinePlanned **plan;          /* [n_ranks] placed entries, NULL for none */
  size_t             *n_plan;
} AppView;

/* cli-trace-load.c: reading (app_view_read, trace_load: 0, or one line
 * printed and 1), freeing, and what every command reads off a loaded
 * trace: a span's place and replica, a time clamped as the model keeps
 * it, a name, the mesh, the ranks, a kind's name, the run's start, an
 * item's replica (dp) and whether the export keeps it (t->keep). */
void app_view_clear (AppView *v);
int app_view_read (const char *path, bool with_plan, AppView *v);
void trace_clear (Trace *t);
const PpTraceProcess *span_place (const Trace *t, size_t i);
int32_t span_replica (const Trace *t, size_t i);
int64_t clamp_time (int64_t t);
const char *trace_string (const Trace *t, uint32_t id);
int trace_load (const char *path, Trace *t);
void mesh_sizes (const Trace *t, int32_t size[PP_TRACE_MESH_DIMS]);
int n_ranks_of (const Trace *t);
const char *kind_name (int kind);
int64_t run_start (const Trace *t, const AppView *v);
bool time_unrepresentable (int64_t t);
size_t times_unrepresentable (const Trace *t, size_t *spans, size_t *markers, size_t *counters);
int32_t process_dp (const Trace *t, int32_t process);
bool keep_item (const Trace *t, int32_t process, int32_t rank, int32_t step);
bool keep_span (const Trace *t, size_t i);

/* cli-trace-why.c */
PpStatus analyse_why (const Trace *t, PpWhyReport **why, PpWhyChange *ch, PpSchedule **s, PpError *e);
void step_analysis_of (const Trace *t, PpAnalysisSteps *a);
PpStatus analyse_stragglers (const Trace *t, PpStragglerReport **out, PpError *e);
int write_why_json (FILE *f, const Trace *t, const PpSchedule *s, const PpWhyReport *why, const PpWhyChange *ch);

/* ---- export ----------------------------------------------------------------- */

/* cli-trace-write.c */
size_t json_strings_replaced (void);
void json_string (FILE *f, const char *s);
void print_us_since (FILE *f, int64_t t, int64_t base);
void print_ns_since (FILE *f, int64_t t, int64_t base);

/* cli-trace-csv.c */
int write_csv (FILE *f, const Trace *t, int64_t base);

/* The track of pipeline rank r's plan in a trace with places: one of its
 * own, past the process and rank tracks (plan_pid). */
#define PLAN_PID_BASE (2 * PP_TRACE_MAX_RANKS)

/* The Chrome export's tracks a rank: tid and what Perfetto calls it, in
 * the order it shows them (steps above the blocks, their host work and
 * the plan under them). */
enum { ROW_COMPUTE, ROW_COMM, ROW_DEVICE, ROW_STEPS, ROW_PLAN, ROW_HOST, N_ROWS };

/* A step of one track: in a trace with places each process's own steps
 * (rank holds the track's pid, item_pid), else each rank's. */
typedef struct {
  int32_t rank, step;
  int64_t begin, end;   /* end INT64_MIN: no END marker */
} StepSlice;

/* cli-trace-chrome-tracks.c: a span's, an item's, a plan's track and the
 * pid written for it; a span's action kind and a block's name; the
 * tracks' names (rows[pid]: the rows each track uses, 0 for none) */
int span_pid (const Trace *t, const PpSpan *s);
int item_pid (const Trace *t, int32_t process, int r);
int plan_pid (const Trace *t, int r);
int out_pid (const Trace *t, int pid);
int action_kind_of_span (int kind);
void action_name (const PpAction *a, int V, char *buf, size_t size);
int write_tracks (FILE *f, const Trace *t, const unsigned char *rows, int n_ranks, bool *first);

/* cli-trace-chrome-flows.c */
int write_flows (FILE *f, const Trace *t, int64_t base);
int write_dependency_flows (FILE *f, const Trace *t, int64_t base);

/* cli-trace-chrome-steps.c */
int step_slices (const Trace *t, StepSlice **out, size_t *n_out);
size_t write_plan_track (FILE *f, const Trace *t, const AppView *v, int r, int V, int64_t base, int64_t *first_t);

/* cli-trace-chrome-meta.c */
void write_pipescope_meta (FILE *f, const Trace *t, int64_t base);

/* cli-trace-chrome.c: the whole export */
int write_chrome (FILE *f, const Trace *t, const AppView *v, int64_t base, bool run_clock);
