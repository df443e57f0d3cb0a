/* pp-straggler.h — stragglers across the mesh, and what each costs.
 *
 * A job of several replicas (data-parallel copies of the pipeline, and
 * tensor ranks: pp_why_replicas_of_spans's buckets) is analysed replica by
 * replica with the Why analysis (pp-why.h, the same per-replica analysis
 * pp_why_analyse_replicas folds).  From each replica's analysed steps:
 *
 * Slowdown.  A process's time a step by kind: compute (the whole step less
 * its measured idle: its blocks, LOSS and OPT less the data-parallel time
 * in them), dp comm (its dp_comm part: its own collectives' time, the wait
 * for a slower replica taken out), tp comm (no trace records tensor-parallel
 * collectives apart yet: 0) and host (its runtime parts descheduled, gc,
 * host_schedule, host_loss, host_data, host_zero_grad and host_other).
 * Its copies are the processes at the same pp, tp, cp and ep place in the
 * other replicas; its median copy the median of them by their time a step
 * over the analysed steps (pp_why_median_index: the lower of two middles).
 * Its slowdown in a step: its time over the median of its copies' times
 * that step, less 1.  Its cause: of its excess over its median copy a step
 * (slower compute, descheduled, gc, host work, dp comm), the largest.
 *
 * What if it ran like the median.  Each replica's step is replayed with the
 * simulator (pp_simulate, the replica's schedule as pp_why_analyse_run
 * rebuilt it: its plans' order, so the recorded order of sends and
 * receives between stages) under the replica's measured per-stage costs,
 * each rank's host time a step spread over its compute actions; the
 * replicas join in the data-parallel reduction, so the job's step is the
 * longest replica's.  A straggler's saving is that replayed step less the
 * same replay with its stages' costs and host time replaced by its median
 * copy's (both replays: the replay's own error cancels).  Groups are
 * replayed the same way: a stage (every tensor rank of one pipeline rank
 * of one replica, where there is more than one) and a host (every process
 * on it, where a host holds more than one).  Ranked by saving a step.
 *
 * No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pp-event.h"
#include "pp-status.h"
#include "pp-trace.h"
#include "pp-why.h"

enum {
  PP_STRAGGLER_COMPUTE = 0,
  PP_STRAGGLER_DP_COMM,
  PP_STRAGGLER_TP_COMM,
  PP_STRAGGLER_HOST,
  PP_STRAGGLER_N_KINDS
};

/* What makes a process slower than its median copy. */
enum {
  PP_STRAGGLER_CAUSE_NONE = 0,
  PP_STRAGGLER_CAUSE_COMPUTE,      /* "slower compute" */
  PP_STRAGGLER_CAUSE_DESCHEDULED,  /* "descheduled" */
  PP_STRAGGLER_CAUSE_GC,           /* "gc" */
  PP_STRAGGLER_CAUSE_HOST,         /* "host work" */
  PP_STRAGGLER_CAUSE_DP_COMM,      /* "dp comm" */
  PP_STRAGGLER_N_CAUSES
};

/* "none", "slower compute", "descheduled", "gc", "host work", "dp comm";
 * NULL out of range. */
const char *pp_straggler_cause_name (int cause);

typedef struct {
  int32_t process;            /* its global rank */
  int32_t pp, dp, tp;         /* its place (dp as numbered for an unplaced process) */
  int32_t replica;            /* its pipeline (pp_why_replicas_of_spans's numbering) */
  char    host[64];
  int32_t median_copy;        /* index in procs of its median copy (itself when it is) */
  int32_t n_copies;           /* its copies, itself included */
  double  time[PP_STRAGGLER_N_KINDS];   /* mean seconds a step by kind */
  double  parts[PP_STRAGGLER_N_CAUSES]; /* mean seconds a step per cause's measure */
  double  slowdown;           /* mean over the steps: its time over its median copy's, less 1 */
  double  saving_s;           /* the replayed step less the replay with its median copy's costs */
  int     cause;              /* PP_STRAGGLER_CAUSE_* of its excess over the median copy */
} PpStragglerProcess;

enum {
  PP_STRAGGLER_GROUP_PROCESS = 0,
  PP_STRAGGLER_GROUP_STAGE,   /* every tensor rank of a pipeline rank of one replica */
  PP_STRAGGLER_GROUP_HOST     /* every process on a host */
};

/* One replay: a process, a stage or a host made to run like its copies. */
typedef struct {
  int    group;               /* PP_STRAGGLER_GROUP_* */
  int32_t proc;               /* index in procs: the process, or the group's member that saves most alone */
  int32_t n_members;
  double saving_s;
} PpStragglerItem;

typedef struct {
  size_t              n_procs;
  PpStragglerProcess *procs;      /* sorted by (pp, dp, tp, cp, ep) */
  int                 n_pp, n_dp; /* the heatmap's rows and columns (dp + 1 at most: the largest dp) */
  int                 n_steps;
  int32_t            *steps;      /* [n_steps] the steps every replica analysed, ascending */
  /* [n_procs * n_steps]: each process's time a step (all kinds), and the
   * median of its copies' that step; NAN where it has no such step */
  double             *step_time, *step_median;
  double              measured_step;  /* mean over the steps of the longest replica's step */
  double              replayed_step;  /* the replay with every measured cost */
  size_t              n_items;
  PpStragglerItem    *items;      /* every process and group, by saving (largest first) */
} PpStragglerReport;

/* The analysis of a trace already read (times on one clock): its
 * description, plans (may be NULL), spans[n] with the process that wrote
 * each (span_process, -1 none), counters[n_counters] with theirs (may be
 * NULL), and its PROCESS frames procs[n_procs] (a later frame of a process
 * replacing an earlier).  *out NULL (PP_OK) for a job of one replica or
 * without places.  PP_EINVAL with one line when no replica has a whole
 * step.  Free with pp_straggler_report_free. */
PpStatus pp_straggler_analyse (const PpTraceDescription *desc, const PpWhyPlans *plans,
                               const PpSpan *spans, const int32_t *span_process, size_t n,
                               const PpCounter *counters, const int32_t *counter_process,
                               size_t n_counters, const PpTraceProcess *procs, size_t n_procs,
                               PpStragglerReport **out, PpError *err);
/* The same with the spans' names (pp-why.h's PpWhyNames; NULL none): each
 * replica's Why analysis reads its WAITs' NCCL parts, as the Why tab's. */
PpStatus pp_straggler_analyse_named (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                     const PpSpan *spans, const int32_t *span_process, size_t n,
                                     const PpCounter *counters, const int32_t *counter_process,
                                     size_t n_counters, const PpTraceProcess *procs, size_t n_procs,
                                     const PpWhyNames *names, PpStragglerReport **out, PpError *err);
void     pp_straggler_report_free (PpStragglerReport *r);

/* The most cells a heatmap is drawn with (n_pp x n_dp: a trace's places
 * may claim a mesh far larger than its processes). */
#define PP_STRAGGLER_HEATMAP_MAX_CELLS (1L << 22)

/* The heatmap: cell[pp * n_dp + dp] the slowdown of place (pp, dp) over
 * the steps in [from_step, to_step] (its time summed over them over its
 * copies' medians summed, less 1; the largest of its tensor ranks), NAN
 * where no process is; proc[pp * n_dp + dp] (may be NULL) the process
 * (index in procs) the cell shows, -1 none.  Returns the steps counted. */
int      pp_straggler_heatmap (const PpStragglerReport *r, int32_t from_step, int32_t to_step,
                               double *cell, int32_t *proc);

/* info's table (values x scale in unit), at most max_rows items with a
 * saving; a line saying none is worth naming where none saves; nothing for
 * NULL. */
void     pp_straggler_print (FILE *f, const PpStragglerReport *r, size_t max_rows, double scale,
                             const char *unit);
/* export --format why's member, after ",\n  ": "stragglers": [ {process,
 * pp, dp, tp, host, saving_s, cause, slowdown}, ... ] by saving (the
 * processes only), and "straggler_groups": the stages and hosts replayed.
 * Writes "stragglers": [] for NULL. */
void     pp_straggler_write_json (FILE *f, const PpStragglerReport *r);
