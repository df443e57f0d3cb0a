/* pp-suggest.h — what if: rank schedules and micro-batch counts by the step
 * time the simulator predicts from the costs measured in a run.
 *
 * The measured run gives, per rank, the mean time of a forward, a full
 * backward and its weight part for one micro-batch of that run (all of the
 * rank's layers).  A candidate with V stages per rank gives each chunk 1/V of
 * its rank's cost; one with M' micro-batches gives each micro-batch M/M' of
 * the measured micro-batch's cost (the batch stays the same).  Activation
 * memory is counted in units of one measured micro-batch's activations on one
 * rank: peak (stage, micro-batch) pairs held x (1/V) x (M/M').
 * (Exactly: V is the number of the rank's stages one micro-batch passes
 * through — V for one chain, 1 for DualPipe, whose two stages per rank each
 * serve half of the micro-batches.)  Candidates take V = 2 where V is free,
 * the schedule's own V otherwise; the transfer time stays costs->comm.
 */
#pragma once

#include <stdint.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-status.h"
#include "pp-trace.h"

typedef struct {
  int     ranks;              /* P of the measured run */
  int     microbatches;       /* M of the measured run */
  double *f, *b, *w;          /* [ranks] measured seconds per micro-batch (all the rank's layers) */
  double  comm;               /* measured transfer seconds (0 for the local transport) */
  PpFramework framework;      /* who ran the job: its candidates are only what that
                               * framework runs (0: pipescope's runtime, every schedule) */
} PpMeasuredCosts;

typedef struct {
  char   schedule[48];        /* a name pp_schedule_generate takes (with its ":group=N") */
  int    ranks, microbatches, stages_per_rank;
  double step_time;           /* predicted seconds, one step between barriers */
  double bubble;              /* predicted, 0..1 */
  double peak_activation;     /* in measured micro-batches (see above), worst rank */
} PpSuggestion;

/* The largest candidate simulated: P x M' x V (stage visits of one step)
 * at most this.  It bounds what one candidate costs (about 60 MB and a
 * tenth of a second at the limit), so a trace that names a huge P or M
 * cannot make suggest, or the app's What-if panel, run for minutes. */
#define PP_SUGGEST_MAX_WORK (1L << 16)

/* Every schedule the job's framework runs (costs->framework,
 * pp_schedule_runs_on) x M' in {P, 2P, 4P, 8P, M} (deduplicated, only what
 * the schedule accepts, P x M' x V <= PP_SUGGEST_MAX_WORK; for
 * megatron-core also Megatron-Interleaved at V = 4 and with groups P, 2P
 * and M', named "Megatron-Interleaved:group=G") whose peak_activation
 * <= memory_budget (<= 0: no limit), sorted by predicted step time, then
 * memory.  *out is malloc'd.  When every candidate is over the limit: PP_EINVAL,
 * "P=4096 is too large to simulate: every candidate exceeds 65536 ranks x
 * micro-batches x stages per rank". */
PpStatus pp_suggest (const PpMeasuredCosts *costs, double memory_budget,
                     PpSuggestion **out, size_t *n_out, PpError *err);

/* How a job of `framework` runs suggestion s, in its own terms, into buf:
 * PyTorch: "ScheduleInterleaved1F1B with n_microbatches=8 and 2 stages a
 * rank" (or the CSV it loads); megatron-core: the config it takes
 * ("virtual_pipeline_model_parallel_size=2, microbatch_group_size_per_vp_stage=4,
 * num_microbatches=8"); "" for pipescope's runtime.  Returns buf. */
char    *pp_suggestion_how (const PpSuggestion *s, PpFramework framework, char *buf, size_t size);

/* The measured configuration as pp_suggest names its candidates, for the
 * row every view marks as measured (suggest, the app's What if): the
 * schedule's canonical name (with ":group=G" where it takes a group: the
 * description's G, else P) into name, and *V (the description's
 * n_virtual, else the schedule's default).  An unknown schedule keeps its
 * name, V 1 unless given. */
void     pp_suggest_measured_name (const char *schedule, int n_virtual, int ranks, char *name, size_t size,
                                   int *V);
/* Whether s is that configuration (name, M, V). */
int      pp_suggestion_is (const PpSuggestion *s, const char *name, int microbatches, int V);

/* How many candidates pp_suggest leaves out for being over PP_SUGGEST_MAX_WORK. */
size_t   pp_suggest_n_too_large (const PpMeasuredCosts *costs);
/* The sum of P x M' x V over the candidates pp_suggest simulates: what a
 * caller with a main loop weighs to run it there or on a worker thread. */
int64_t  pp_suggest_work (const PpMeasuredCosts *costs);

/* ---- measured costs from a trace ------------------------------------------
 * Reads the trace at path (every step in it).  Per (rank, stage): the mean
 * duration of its F spans (plus its LOSS spans' time a forward: the loss
 * computation is the last stage's work, pp-why.h), of its full backwards (a B span, or an I span plus
 * the stage's mean W) and of its W spans (0 when the run never split the
 * backward).  A rank's cost is the sum over its stages of those means, each
 * weighted by the share of the micro-batches the stage sees when the run's
 * schedule (the description's name, P, M, V) can be rebuilt — 1 for one
 * chain, so plainly the sum; 1/2 for DualPipe's stages — and 1 otherwise.
 * OVERLAP_F_B spans count only for a stage with no plain F (resp. B/I) spans,
 * split F : B = 1 : 2.  P and M come from the description (else the largest
 * rank and micro-batch seen + 1); comm is the mean SEND_F/SEND_B span, 0
 * without any.  A trace with no F/B/I/W/OVERLAP spans is PP_EINVAL "PATH has
 * no measured F/B spans; record a run first"; a rank without F or backward
 * spans is PP_EINVAL too.  framework is the description's
 * (pp_framework_of_description).  The run's schedule is rebuilt only when its
 * P x M x V is at most PP_SUGGEST_MAX_WORK (else every stage counts 1).
 * On failure *out is left cleared.  Free with
 * pp_measured_costs_clear (NULL and cleared structs are fine). */
PpStatus pp_measured_costs_from_trace (const char *path, PpMeasuredCosts *out, PpError *err);
/* The same from spans in memory (a trace's, or a timeline's rows: rows[i]
 * holds n[i] spans, any order) and the run's description (NULL: none);
 * what names the run in the errors ("PATH", "the run").  suggest and the
 * app's What if tab take their costs by this one rule. */
PpStatus pp_measured_costs_from_spans (const PpTraceDescription *desc, const PpSpan *const *rows,
                                       const size_t *n, int n_rows, const char *what,
                                       PpMeasuredCosts *out, PpError *err);
void     pp_measured_costs_clear (PpMeasuredCosts *c);
