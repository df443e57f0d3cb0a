/* cli-plan.h — a schedule's simulated plan as trace frames: the plan of
 * `schedule --trace` and `schedule --serve`, the PLAN frames `run`
 * writes beside its measurement, and the timed plan `merge` (and so
 * `profile`) appends to a job whose ranks planned without times. */
#pragma once

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-trace.h"
#include "pp-why.h"

/* One simulated time unit is this many nanoseconds (1 ms). */
#define PP_CLI_TRACE_NS_PER_UNIT 1000000.0

/* Writes the simulated plan of s as a trace at path (argv: the schedule
 * command's arguments, for the description's command line).  0, or 1 with
 * one line on stderr. */
int pp_cli_write_sim_trace (const char *path, const PpSchedule *s, const PpSimulation *sim,
                            int argc, char **argv);

/* The PpSpanKind of a compute action kind (F, B, I, W, OVERLAP_F_B), else -1. */
int pp_cli_span_kind_of_action (int kind);
/* An overlapped pair's backward half (B or I) into sp, as the runtime
 * records it: a simulated block is labelled as a measured one ("0F3+3B1"). */
void pp_cli_span_set_sub (PpSpan *sp, const PpAction *a);
/* The description of a simulated run of s: backend "simulated", model
 * "none", this host, the command line from argv, both clocks read now. */
void pp_cli_sim_description (PpTraceDescription *desc, const PpSchedule *s, int argc, char **argv);
/* Writes desc and the plan of s with sim's timeline (seconds, one time unit
 * = PP_CLI_TRACE_NS_PER_UNIT ns) into w. */
PpStatus pp_cli_write_sim_header (PpTraceWriter *w, const PpTraceDescription *desc,
                                  const PpSchedule *s, const PpSimulation *sim, PpError *err);

/* The plan of s into w: one PLAN frame per rank, with sim's timeline (one
 * time unit = seconds_per_unit s) unless sim is NULL. */
PpStatus pp_cli_write_plan (PpTraceWriter *w, const PpSchedule *s, const PpSimulation *sim,
                            double seconds_per_unit, PpError *err);

/* The same as arrays by rank (plan[r][n_plan[r]], s->ranks of them), as
 * pp_trace_write_plan takes them; freed with pp_cli_plan_actions_free. */
PpStatus pp_cli_plan_actions (const PpSchedule *s, const PpSimulation *sim, double seconds_per_unit,
                              PpTracePlanAction ***plan, size_t **n_plan, PpError *err);
void     pp_cli_plan_actions_free (PpTracePlanAction **plan, size_t *n_plan, int n_ranks);

/* The job's plan with the costs it measured: the trace at part analysed
 * (pp_why_analyse_trace: the schedule rebuilt from its plans or its
 * description, the mean measured per-stage costs), simulated, and written
 * to trace (a new file) as part's items followed by timed PLAN frames,
 * which replace the ranks' untimed ones.  Says so in one line on stderr
 * ("planned NAME with the costs it measured: ..."); 0, or 1 with one line
 * on stderr naming who ("merge") and why the plan stays untimed (a CSV
 * schedule, no whole step), trace then not left behind; or 2 when trace
 * could not be written (a full disk: not the plan's fault, the caller's
 * whole output fails), nothing said, the reason in why (why_size bytes). */
int pp_cli_write_timed_plan (const char *part, const char *trace, const char *who, char *why,
                             size_t why_size);

/* The plan at measured costs of a run analysed in rep (its schedule s,
 * the ranks' plans): s with the plans' data-parallel actions placed
 * (pp_why_schedule_with_comms; *with_comms NULL where they cannot be, the
 * reason in comms_err), simulated under rep's costs (seconds).  One rule
 * for merge's timed plan and profile's live one, so that what a viewer
 * saw live is what the saved trace holds.  The caller frees *with_comms
 * and *sim. */
PpStatus pp_cli_simulate_measured_plan (const PpSchedule *s, const PpWhyPlans *plans, const PpWhyReport *rep,
                                        PpSchedule **with_comms, PpSimulation **sim, PpError *comms_err,
                                        PpError *err);

/* Each rank's bubble of timed plans as info prints it ("bubble, plan at
 * ..."): 1 - the rank's work actions' time over the extent of every
 * rank's work actions (pp_timeline_plan_action_is_work: data-parallel
 * ones included), into bubble[n_ranks] (-1 for a rank without a timed
 * plan); returns the extent (seconds), 0 when there is none. */
double pp_cli_plan_bubbles (const PpTracePlanAction *const *actions, const size_t *n_actions, int n_ranks,
                            double *bubble);

/* part as every analysis takes it: where its pipeline ranks ran in
 * several processes (replicas, format 1.4), a copy in memory (*copy_fd,
 * its path in copy) of its median copy of the pipeline, whose numbers
 * every view shows (pp_timeline_model_step_analysis; every replica's would
 * count each block twice); else part itself (copy "", *copy_fd -1).  The
 * caller closes *copy_fd. */
PpStatus pp_cli_one_replica (const char *part, char *copy, size_t size, int *copy_fd, PpError *err);
