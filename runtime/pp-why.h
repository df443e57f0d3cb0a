/* pp-why.h — why the bubble is there: idle time split by cause, the step's
 * critical path, and what to change.
 *
 * Idle time split (pp_why_split): a rank's idle time in a step is
 *   schedule  + the idle of the plan with every stage at the mean measured
 *               cost of an action and free transfers (fill and drain, what
 *               the schedule and the micro-batch count leave);
 *   imbalance + what the measured per-stage costs add to that;
 *   transfers + what the measured transfer times add;
 *   runtime     the rest: measured minus the full plan (late hand-offs,
 *               host overhead, contention, jitter);
 *   dp_comm     the rank's data-parallel communication inside the step
 *               (the union of its UNSHARD, RESHARD, REDUCE_GRAD and
 *               WAIT_REDUCE_GRAD spans, wherever they run: one nested in
 *               a block or a LOSS is that block's communication, and the
 *               block's compute is its length less it): busy, not bubble,
 *               so the four parts above split what is left of the
 *               measured time, its bubble.
 * The measured time of a rank is the whole step (pp-analysis.h) less its
 * compute: its blocks, its LOSS spans (the loss computation, work of the
 * last stage) and its OPT, each less the data-parallel time inside it.
 * Each part is a difference of two levels: the balanced plan's idle, the
 * per-stage plan's, the full plan's and the measured idle.  A level above
 * a later one is first cut to it (pp_why_split_levels): where a slow
 * stage's rank idles less in the per-stage plan than in the balanced one,
 * imbalance is 0 and schedule is the per-stage plan's idle; where a run
 * idles less than its plan, runtime is 0 and the plan's last parts give
 * way first.  The four add up to the measured idle exactly and none is
 * negative (the measured idle never is); where no level is below the one
 * before it, each part is its plain difference.
 *
 * Critical path (pp_why_critical_path): from the step's last block back
 * through, at each block, whichever came last of its dependencies (a
 * neighbour stage's block plus the transfer across that boundary,
 * pp_schedule_dependencies) and the rank's previous block; on a tie the
 * dependency wins, so the path follows the hand-offs between ranks.
 *
 * What to change (pp_why_suggest_partition): the slowest stage, by how
 * much, and for the bundled model the blocks per stage that balance the
 * measured costs (the input projection on stage 0 and the head on the last
 * stage counted), with the step time the simulator predicts for it.
 *
 * Times are in whatever unit the costs and spans are given in; the trace
 * entry points work in seconds.  No GLib.  This file calls the simulator,
 * never the other way round.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pp-analysis.h"
#include "pp-event.h"
#include "pp-model.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-status.h"
#include "pp-suggest.h"
#include "pp-trace.h"

/* ---- idle time split by cause -------------------------------------------- */

/* What runtime is made of (pp-why-runtime.h has the rule), in the order
 * the parts are charged: the JSON names are pp_why_runtime_part_name's.
 * launch_gap (a device idle while its host still launches) needs CUPTI's
 * launch and start times, which no trace carries yet: not a part. */
enum {
  PP_WHY_RT_DESCHEDULED = 0,  /* the rank's thread runnable but not running */
  PP_WHY_RT_GC,               /* the Python garbage collector */
  PP_WHY_RT_HOST_SCHEDULE,    /* the schedule's own code between actions */
  PP_WHY_RT_HOST_LOSS,        /* the loss function run outside a block */
  PP_WHY_RT_HOST_DATA,        /* data loading, batch splitting */
  PP_WHY_RT_HOST_ZERO_GRAD,   /* zero_grad and gradient bookkeeping */
  PP_WHY_RT_PROBE,            /* pipescope's own recording */
  PP_WHY_RT_USER_KERNELS,     /* the rank's device kernels between blocks, its GPU busy in a receive */
  PP_WHY_RT_LAUNCH_GAP,       /* the device idle while the host still launched its next work */
  PP_WHY_RT_HOST_OTHER,       /* the thread on a CPU beyond the named host parts */
  PP_WHY_RT_PEER_LATE,        /* a dependency later than the plan's transfer */
  PP_WHY_RT_REPLICA_LATE,     /* in a data-parallel collective, waiting for a slower replica */
  PP_WHY_RT_UNATTRIBUTED,     /* the rest */
  PP_WHY_N_RUNTIME_PARTS
};

typedef struct {
  double measured;   /* idle: = schedule + imbalance + transfers + runtime */
  double schedule;
  double imbalance;
  double transfers;
  double runtime;
  double dp_comm;    /* data-parallel communication: work of the step, not idle (not in measured) */
  /* runtime split (pp-why-runtime.h): sums to runtime, none negative;
   * runtime_measured[k] 1 where the trace measures part k (its spans or
   * counters are there), else the part is 0 for want of data */
  double        runtime_parts[PP_WHY_N_RUNTIME_PARTS];
  unsigned char runtime_measured[PP_WHY_N_RUNTIME_PARTS];
  /* peer_late's main cause: the peer rank whose blocks arrived late
   * (-1 none), the share of peer_late it explains, and what its host did
   * in the gaps just before those blocks and, where their output came
   * after their end, just after them (seconds, by runtime part;
   * peer_late itself 0) */
  int           late_peer;
  double        late_wait;
  double        late_causes[PP_WHY_N_RUNTIME_PARTS];
  /* replica_late's cause (pp-why-runtime.h, rule 0): the replica whose
   * late arrival at the rank's data-parallel collectives held it up most
   * (-1 none), and the rank's whole wait for slower replicas in them
   * (seconds: the latest replica's arrival minus the rank's, each
   * collective; before the cap to runtime that replica_late is) */
  int           late_replica;
  double        replica_wait;
} PpWhyIdle;

/* The idle's part names in order, "schedule", "imbalance", "transfers",
 * "runtime" (index 0..3 as laid out in PpWhyIdle after measured).
 * dp_comm is not one: data-parallel communication is work of the step. */
#define PP_WHY_N_PARTS 4
const char *pp_why_part_name (int part);
/* The part by index (0 schedule .. 3 runtime). */
double      pp_why_idle_part (const PpWhyIdle *idle, int part);

/* The four parts of one rank's idle out->measured from the idle of its
 * three plans (balanced, per stage, with transfers), as above: each level
 * held to the least of itself and the levels after it, the parts their
 * rises. */
void        pp_why_split_levels (double balanced, double per_stage, double full, PpWhyIdle *out);

/* Takes dp, a rank's data-parallel communication time in the step, out of
 * w's idle: it is work of the step.  w->measured comes in as the time the
 * rank ran no other work; dp_comm = min (dp, measured), measured leaves
 * as that less dp_comm, and the four parts split it from the plan levels
 * (pp_why_split_levels): they add up to measured, none negative. */
void        pp_why_split_dp (PpWhyIdle *w, double balanced, double per_stage, double full, double dp);

/* Splits each rank's idle time under the measured per-stage costs (costs:
 * n_stages == s->n_stages) into out[s->ranks].  measured_idle[r] is what the
 * rank measured; NULL takes the full plan's idle (runtime 0): the split of
 * a simulated run.  Three simulations of s. */
PpStatus pp_why_split (const PpSchedule *s, const PpCostModel *costs,
                       const double *measured_idle, PpWhyIdle *out, PpError *err);

/* ---- the critical path ---------------------------------------------------- */

/* One block of a step as run (or planned): an F, B, I, W or OVERLAP_F_B
 * action (PpActionKind) of a rank, with its start and end. */
typedef struct {
  int    rank, kind, stage, microbatch;
  int    sub_kind, sub_stage, sub_microbatch;   /* OVERLAP_F_B: the backward half */
  double start, end;
} PpWhyBlock;

/* How a block on the path was reached from the one before it. */
enum {
  PP_WHY_VIA_START = 0,  /* the first block of the path */
  PP_WHY_VIA_RANK,       /* it waited for its rank's previous block */
  PP_WHY_VIA_DEPENDENCY, /* it waited for a dependency (plus its transfer) */
};

typedef struct {
  PpWhyBlock block;
  int        via;        /* PP_WHY_VIA_*: how this block was reached */
  double     transfer;   /* VIA_DEPENDENCY: the transfer time crossed, else 0 */
} PpWhyPathStep;

typedef struct {
  size_t         n;
  PpWhyPathStep *steps;       /* first to last */
  int            n_stages;
  double         start, end;  /* the step: its first block start to its last block end */
  double        *stage_time;  /* [n_stages] compute time of the path's blocks per stage */
  double         transfer_time;
  double         slack_time;  /* the rest of end - start: gaps the path does not explain */
} PpWhyPath;

/* The critical path of one step's blocks (any order; each rank's blocks must
 * not overlap).  comm[boundary] is the transfer time across a stage boundary
 * (PpCostModel.comm), NULL for none.  Blocks a dependency names that are not
 * in the list are skipped (a trace that dropped events).  Clear out with
 * pp_why_path_clear. */
PpStatus pp_why_critical_path (const PpSchedule *s, const PpWhyBlock *blocks, size_t n,
                               const double *comm, PpWhyPath *out, PpError *err);
void     pp_why_path_clear (PpWhyPath *p);

/* A simulation's timeline as blocks (compute actions only), malloc'd. */
PpStatus pp_why_blocks_of_simulation (const PpSimulation *sim, PpWhyBlock **out, size_t *n_out,
                                      PpError *err);

/* ---- a measured run ------------------------------------------------------- */

/* The most steps one analysis looks at: pp-analysis.h's rule, the same
 * in every view. */
#define PP_WHY_MAX_STEPS PP_ANALYSIS_STEPS

typedef struct {
  int        step;
  int64_t    start_ns;    /* its first work start on the spans' clock: the
                           * path's times are seconds from here */
  double     length;      /* the whole step: first work start to last work end */
  PpWhyIdle *idle;        /* [ranks] */
  PpWhyPath  path;
} PpWhyStep;

typedef struct {
  int          ranks, n_stages;
  int          n_steps;          /* analysed: pp-analysis.h's step rule */
  PpWhyStep   *steps;            /* [n_steps] */
  PpWhyIdle   *idle;             /* [ranks] mean over the analysed steps */
  double       length;           /* the median step (pp-analysis.h) */
  double      *path_share;       /* [n_stages] mean share of the step each stage holds on the path */
  double       path_transfer_share, path_slack_share;
  PpCostModel *costs;            /* mean measured costs over the analysed steps */
  /* A job of several replicas (pp_why_analyse_replicas): each replica's
   * pipeline analysed on its own; idle[r] is rank r's median replica's
   * (by measured idle; the lower of two middles), its whole split, and the
   * rest (steps, path, costs, length) the median replica's by step
   * length.  n_replicas 1 and the arrays NULL for one pipeline. */
  int          n_replicas;       /* replicas analysed (a whole step each) */
  int          median_replica;   /* the replica the steps and path are of */
  int         *idle_replica;     /* [ranks] the replica idle[r] is of */
  double      *idle_min, *idle_max;   /* [ranks] measured idle over the replicas */
  int         *idle_max_replica; /* [ranks] the replica that idles most */
} PpWhyReport;

/* Analyses the spans of a run of schedule s (times in ns on one clock; the
 * result in seconds): per step, every rank's idle inside the whole step
 * (pp-analysis.h: its first work start to its last work end, the
 * data-parallel work and OPT after the last block included, as the stats
 * panel measures it) split by cause under that step's own measured
 * per-stage costs (a stage's F: its forwards' compute plus its LOSS spans
 * outside a block, a micro-batch's share: the plan runs the loss in the
 * F), and its
 * critical path.  Only whole steps count (every compute action of the
 * schedule present), at most the last max_steps (<= 0: PP_WHY_MAX_STEPS).
 * PP_EINVAL "no whole step ..." when none is.  Free with pp_why_report_free. */
PpStatus pp_why_analyse_spans (const PpSchedule *s, const PpSpan *spans, size_t n,
                               int max_steps, PpWhyReport **out, PpError *err);
void     pp_why_report_free (PpWhyReport *r);
/* The same with the run's counters (any kinds; the block-edge ones,
 * RUN_DELAY_NS, PROBE_SELF_NS and ON_CPU_NS, are read), for runtime's parts
 * (pp-why-runtime.h): the spans may hold host kinds and KERNELs too.
 * counters NULL: runtime's parts from the spans alone. */
PpStatus pp_why_analyse_spans_counters (const PpSchedule *s, const PpSpan *spans, size_t n,
                                        const PpCounter *counters, size_t n_counters,
                                        int max_steps, PpWhyReport **out, PpError *err);

/* A span's name (NULL where it has none): the trace's string table, as
 * pp_nccl_match takes it (pp-nccl-match.h).  The analysis reads the
 * names of WAIT spans only: NCCL's profiler plugin splits a receive's
 * wait into "nccl:peer_late", "nccl:transfer" and "nccl:local" parts
 * (docs/nccl-plugin.md), and the local part is the rank's own GPU, not
 * the peer (pp-why-runtime.h, rules 1 and 3). */
typedef const char *(*PpWhyNameFunc) (void *user, uint32_t name_id);
typedef struct {
  PpWhyNameFunc name;
  void         *user;
} PpWhyNames;

/* pp_why_analyse_spans_counters with the spans' names (NULL, or a NULL
 * name: every span unnamed, as pp_why_analyse_spans_counters). */
PpStatus pp_why_analyse_spans_named (const PpSchedule *s, const PpSpan *spans, size_t n,
                                     const PpCounter *counters, size_t n_counters,
                                     const PpWhyNames *names, int max_steps, PpWhyReport **out,
                                     PpError *err);

/* The schedule a trace's description names, rebuilt (P x M x V at most
 * PP_SUGGEST_MAX_WORK); PP_EINVAL with one line otherwise. */
PpStatus pp_why_schedule_of_description (const PpTraceDescription *d, PpSchedule **out,
                                         PpError *err);

/* A trace's plans, the last PLAN of each rank: actions[r] holds
 * n_actions[r] actions of rank r (0 where it wrote none), r < n_ranks.  A
 * view: the caller owns the arrays. */
typedef struct {
  int                             n_ranks;
  const PpTracePlanAction *const *actions;
  const size_t                   *n_actions;
} PpWhyPlans;

/* Most actions the plans of all ranks may hold for the analysis to build
 * a schedule from them: a forward, an input and a weight gradient for
 * every stage visit PP_SUGGEST_MAX_WORK allows, and as many again of
 * transfers and steps. */
#define PP_WHY_PLAN_MAX_ACTIONS (6L * PP_SUGGEST_MAX_WORK)

/* The schedule a trace runs.  Where plans (may be NULL) hold a plan with
 * compute actions for every rank of the description (0 .. n_ranks - 1, and
 * none past it), the schedule is built from them (pp_schedule_from_actions:
 * what the job runs, whatever its name; at most PP_WHY_PLAN_MAX_ACTIONS
 * actions and PP_SUGGEST_MAX_WORK stages x micro-batches, M as the
 * description says) and validated, named as the description names it; its
 * transfers and optimizer steps are left out.  Where the named schedule
 * runs the same order on every rank, that is the one (DualPipe's two
 * chains kept).  Else, and where the plan cannot be used, the schedule the
 * description names (pp_why_schedule_of_description).  When neither
 * works, PP_EINVAL (or the plan's PP_EFORMAT) with one line naming both
 * problems. */
PpStatus pp_why_schedule_of_trace (const PpTraceDescription *d, const PpWhyPlans *plans,
                                   PpSchedule **out, PpError *err);
/* How many schedules pp_why_schedule_of_trace built in this process (a
 * job of replicas builds one for them all: tests count it). */
size_t   pp_why_schedules_built (void);

/* s (the compute order pp_why_schedule_of_trace built) with the plans'
 * data-parallel actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD:
 * a plan from PyTorch's pipeline_order_with_comms) put back where the
 * plans hold them, for the simulator to place them as PyTorch's runtime
 * runs them (their times: the costs' dp).  Each rank's plan must hold s's
 * compute actions in s's order and its data-parallel actions only for its
 * own stages; PP_EINVAL with one line where not.  *out NULL (PP_OK) where
 * the plans hold no data-parallel action. */
PpStatus pp_why_schedule_with_comms (const PpSchedule *s, const PpWhyPlans *plans,
                                     PpSchedule **out, PpError *err);

/* ---- what to change --------------------------------------------------------- */

#define PP_WHY_PARTITION_MAX 256

typedef struct {
  int    slowest_stage;
  double slowest_cost;        /* F + B of one micro-batch on it */
  double mean_cost;           /* the same, mean over the stages */
  double excess;              /* slowest / mean - 1 */
  double current_step;        /* the plan under the measured costs */
  /* Bundled model only (has_partition): blocks per stage that balance the
   * measured costs, and the plan's step time under the costs they would
   * have.  changed: it differs from the current partition. */
  int    has_partition;
  int    changed;
  char   current[PP_WHY_PARTITION_MAX];    /* "5,1,1,1" */
  char   partition[PP_WHY_PARTITION_MAX];  /* "2,2,2,2" */
  double predicted_step;
  /* > 0: the ranks share this many cores (fewer than they are), and both
   * steps above come from pp_simulate_shared. */
  int    cores;
} PpWhyChange;

/* From measured per-stage costs under schedule s.  With model (its config)
 * and blocks (blocks per stage now, [s->n_stages]) non-NULL and s one chain
 * (stage i runs part i), fits the time of a block, of the input projection
 * and of the head per kind to the stages (least squares; the model's FLOP
 * estimates scaled when the stages cannot tell them apart), picks the
 * partition whose slowest stage is fastest, and simulates it.  cores > 0
 * and fewer than the ranks: the ranks share that many (the CPU backend's
 * threads on a small machine), and the steps are simulated so. */
PpStatus pp_why_suggest_partition (const PpSchedule *s, const PpCostModel *costs,
                                   const PpModelConfig *model, const int *blocks, int cores,
                                   PpWhyChange *out, PpError *err);

/* The cores a bundled CPU run's rank threads shared, from its model line
 * ("...; 4 rank threads on 2 cores", written only when they were fewer
 * than the ranks); 0 when it says none. */
int      pp_why_cores_of_description (const PpTraceDescription *d);

/* The bundled model and its partition from a trace's description: the
 * model line ("residual MLP: 8 blocks, width 256, ...") and --partition in
 * the command line (else "auto"), into blocks[n_parts].  PP_EINVAL for a
 * trace of another runtime. */
PpStatus pp_why_model_of_description (const PpTraceDescription *d, int n_parts,
                                      PpModelConfig *model, int *blocks, PpError *err);

/* Whether the analysis reads spans of this kind (the rest it ignores):
 * every work kind (OPT too: it bounds runtime's gaps), transfers, host
 * kinds, device kernels, launches, and a rank's waits (when its input
 * came: peer_late; where another thread's GC did not hold it up).  One
 * rule for every reader: the trace reader, info's and the Why tab's. */
int pp_why_span_kind_analysed (int kind);

/* Everything for a trace file: reads it (clock offsets applied), rebuilds
 * its schedule (from its plans where they are whole, else its name:
 * pp_why_schedule_of_trace), analyses the last max_steps steps and, where the trace is
 * of the bundled model, suggests a partition (change->has_partition).
 * *sched_out (may be NULL) gets the schedule, which the report's paths
 * refer to; free with pp_schedule_free. */
PpStatus pp_why_analyse_trace (const char *path, int max_steps, PpWhyReport **out,
                               PpWhyChange *change, PpSchedule **sched_out, PpError *err);

/* The same over a trace already read: its description, its plans (may be
 * NULL: the schedule then goes by its name; pp_why_schedule_of_trace) and
 * spans (times on one clock: the clock offsets applied). */
PpStatus pp_why_analyse_run (const PpTraceDescription *desc, const PpWhyPlans *plans,
                             const PpSpan *spans, size_t n, int max_steps, PpWhyReport **out,
                             PpWhyChange *change, PpSchedule **sched_out, PpError *err);
/* The same with the run's counters (times on the spans' clock). */
PpStatus pp_why_analyse_run_counters (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                      const PpSpan *spans, size_t n, const PpCounter *counters,
                                      size_t n_counters, int max_steps, PpWhyReport **out,
                                      PpWhyChange *change, PpSchedule **sched_out, PpError *err);

/* A job whose pipeline ranks each run in several processes (data-parallel
 * replicas, tensor ranks): replica[i] is the pipeline span i belongs to
 * (the processes sharing dp, tp, cp, ep: 0 .. n_replicas - 1; -1 for a
 * span of no placed process, a pipeline of its own).  Each replica's spans
 * are analysed on their own (pp_why_analyse_run, never one replica's
 * blocks beside another's), and aggregated per pipeline rank as
 * PpWhyReport says: the median replica, with the spread.  change and
 * sched_out are the median replica's.  replica NULL or one replica: what
 * pp_why_analyse_run gives.  Replicas without a whole step are left out;
 * when none has one, the first one's error. */
PpStatus pp_why_analyse_replicas (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                  const PpSpan *spans, const int32_t *replica, size_t n,
                                  int max_steps, PpWhyReport **out, PpWhyChange *change,
                                  PpSchedule **sched_out, PpError *err);
/* The same with the run's counters, counter_replica[i] the replica of
 * counters[i] as replica is of the spans (NULL: all of one pipeline). */
PpStatus pp_why_analyse_replicas_counters (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                           const PpSpan *spans, const int32_t *replica, size_t n,
                                           const PpCounter *counters, const int32_t *counter_replica,
                                           size_t n_counters, int max_steps, PpWhyReport **out,
                                           PpWhyChange *change, PpSchedule **sched_out, PpError *err);

/* The same with the spans' names (NULL: none; PpWhyNames), for a trace
 * read with its string table: info, export --format why, the Why tab. */
PpStatus pp_why_analyse_replicas_named (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                        const PpSpan *spans, const int32_t *replica, size_t n,
                                        const PpCounter *counters, const int32_t *counter_replica,
                                        size_t n_counters, const PpWhyNames *names, int max_steps,
                                        PpWhyReport **out, PpWhyChange *change,
                                        PpSchedule **sched_out, PpError *err);

/* The replica of each of n spans (span_process[i]: the process that wrote
 * it, -1 none) from a trace's PROCESS frames procs[n_procs] as read (a
 * later frame of a process replacing an earlier; processes whose place was
 * not read numbered as pp_trace_number_unplaced does): the pipelines
 * (dp, tp, cp, ep) numbered densely in that order, -1 for a span of no
 * placed process.  malloc'd [n]; NULL with err set when out of memory. */
int32_t *pp_why_replicas_of_spans (const PpTraceProcess *procs, size_t n_procs, const int32_t *span_process,
                                   size_t n, PpError *err);

/* The waits of spans[n] of a job of replicas (replica[i] as
 * pp_why_analyse_replicas takes it) into wait_ns[n] and of[n]: a
 * collective (UNSHARD, REDUCE_GRAD) is the k-th span of its kind and
 * stage a replica's pipeline rank runs in a step, matched across the
 * replicas by (step, rank, kind, stage, k).  Why's replica_late, and the
 * measured bubble's idle in a collective (pp_analysis_steps' waits).  0 on
 * success, -1 out of memory. */
int pp_why_replica_waits (const PpSpan *spans, const int32_t *replica, size_t n, int64_t *wait_ns,
                          int32_t *of);

/* ---- reports ---------------------------------------------------------------
 * For the CLI: the split a rank a line (values x scale, in unit: 1e3 and
 * "ms" for seconds), the what-to-change lines, the critical path shares,
 * and the whole report as one JSON object (seconds). */
void pp_why_print_idle (FILE *f, const PpWhyIdle *idle, int ranks, double scale, const char *unit);
void pp_why_print_change (FILE *f, const PpWhyChange *c, double scale, const char *unit);
void pp_why_print_path (FILE *f, const PpWhyReport *r);
void pp_why_write_json (FILE *f, const PpSchedule *s, const PpWhyReport *r, const PpWhyChange *c);
/* A report of several replicas: "over 2 replicas: ..." lines of the
 * statistic and each rank's spread (nothing for one), and its JSON member
 * (",\n  \"replicas\": {...}", nothing for one), which pp_why_write_json
 * writes. */
void pp_why_print_replicas (FILE *f, const PpWhyReport *r, double scale, const char *unit);
void pp_why_write_replicas_json (FILE *f, const PpWhyReport *r);

/* The per-stage cost model of a one-chain, one-stage-per-rank run's
 * measured costs (pp_measured_costs_from_trace: per rank = per stage when
 * V is 1), for What if's partition row; NULL for V > 1 or out of memory. */
PpCostModel *pp_why_cost_model_of_measured (const PpSchedule *s, const PpMeasuredCosts *mc);
