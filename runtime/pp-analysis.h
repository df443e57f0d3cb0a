/* pp-analysis.h — the one place a trace's step numbers are decided.
 *
 * Every view (run's summary, info, export --format why, suggest, render's
 * header, the app's Stats, Why and What-if tabs, live or not) reads these;
 * none picks its own steps or its own statistic.
 *
 * WHICH STEPS COUNT (the step rule): the whole steps, except the run's
 * first step (its lowest step number: warm-up, caches and allocators),
 * the last PP_ANALYSIS_STEPS of them at most.  A step is whole when it
 * holds a block for every compute action of the schedule; where a view
 * does not know the schedule, when it holds as many blocks as the fullest
 * step of the run (the same steps for a run that dropped nothing).  A run
 * of one whole step keeps it.
 *
 * THE WHOLE STEP: a step runs from its first work span's start to its
 * last work span's end over every process (pp_analysis_span_counts: its
 * blocks, the loss computation LOSS, its data-parallel communication,
 * also what is recorded after its last block, such as megatron's
 * finalize_model_grads, and its optimizer step OPT), whichever process
 * ends last.  Set-up before step 0 is never a step's: the run's first
 * step (its lowest number) starts at its first block.
 *
 * THE STEP STATISTIC: the "median step", the median over the counted
 * steps of a step's length (the whole step; the mean of the two middles
 * for an even count).
 *
 * MEASURED BUBBLE ("bubble a step"): per rank, the median over the counted
 * steps of the share of the step in which the rank runs no work (its
 * data-parallel communication, loss computation and optimizer step count
 * as busy); a rank with no block in a step idles all of it.  Overall: the
 * mean over the ranks.
 *
 * PLAN BUBBLES are never unlabelled: PP_ANALYSIS_PLAN_* names which plan.
 *
 * No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pp-event.h"
#include "pp-status.h"

/* The most steps one analysis counts: the last ones.  Bounds what a live
 * view re-simulates on each update. */
#define PP_ANALYSIS_STEPS 16

/* Whether a span of this kind bounds its step and is busy in it (the
 * whole step above): pp_span_kind_is_work's kinds.  A view hands the
 * analysis these spans, never a list of its own. */
int pp_analysis_span_counts (int kind);

/* The rule in one phrase, for the views' labels. */
#define PP_ANALYSIS_STEP_RULE "whole steps after the first, the last 16 at most"
#define PP_ANALYSIS_STEP_STATISTIC "median step"

/* The name of the measured bubble wherever it is shown beside a plan's. */
#define PP_ANALYSIS_MEASURED_LABEL "measured bubble a step"

/* The plans a bubble may come from; each view labels its plan bubble by it:
 * "closed form (F=1, B=2)", "plan at unit costs", "plan at measured costs". */
typedef enum {
  PP_ANALYSIS_PLAN_CLOSED_FORM = 0,   /* (P-1)/(M+P-1) and its kin */
  PP_ANALYSIS_PLAN_UNIT_COSTS,        /* the simulated plan, F=1 B=2 */
  PP_ANALYSIS_PLAN_MEASURED_COSTS,    /* the simulated plan under the run's costs */
} PpAnalysisPlan;
const char *pp_analysis_plan_label (PpAnalysisPlan plan);
/* Which plan a trace's timed PLAN frames are, by its description's backend:
 * "simulated" (`schedule --trace`, `--serve`) the plan at unit costs, any
 * other (run, merge, profile) the plan at measured costs. */
PpAnalysisPlan pp_analysis_plan_of_backend (const char *backend);

/* Of n whole steps (their numbers ascending), the counted ones: returns how
 * many, *first the index of the first.  lowest is the run's lowest step
 * number (INT32_MIN: steps[0]). */
size_t pp_analysis_pick_steps (const int32_t *steps, size_t n, int32_t lowest, size_t *first);

/* The median of v[n] (reordered); 0 for n == 0. */
double pp_analysis_median (double *v, size_t n);

/* THE MEDIAN COPY of a job of replicas (the copy of the pipeline whose
 * steps, critical path and costs the analysis reports): of n copies, copy
 * i's step length len[i] and its order key[i] (its replica), the index i
 * of the median by length, ties by key, the lower of two middles; -1 for
 * n <= 0 or out of memory.  Why (pp-why-replicas.c) and the timeline's
 * model both pick by it. */
int    pp_analysis_median_copy (const double *len, const int32_t *key, int n);

/* "12.3%" of a fraction with `decimals` digits, never "-0.0%" (a rounding
 * of a tiny negative reads 0); "–" for a negative sentinel or NaN when
 * dash is set.  Returns buf. */
char  *pp_analysis_format_percent (char *buf, size_t size, double fraction, int decimals);

typedef struct {
  int      n_ranks;
  int      n_steps;        /* counted */
  int32_t *steps;          /* [n_steps] their numbers, ascending */
  double  *length;         /* [n_steps] each one's length, ns */
  double   median_step;    /* ns */
  double  *bubble;         /* [n_ranks] measured bubble a step (median over the steps) */
  double   bubble_mean;    /* over the ranks */
} PpAnalysisSteps;

/* The counted steps of spans given as n_rows arrays rows[i][n_in[i]] (a
 * trace's one array, or a timeline's one per rank), ranks 0 .. n_ranks-1,
 * any order.  n_compute > 0: a whole step holds that many blocks (the
 * schedule's compute actions); 0: as many as the fullest step.  n_steps 0
 * (PP_OK) when no step is whole.  Clear with pp_analysis_steps_clear. */
PpStatus pp_analysis_steps (const PpSpan *const *rows, const size_t *n_in, int n_rows, int n_ranks,
                            long n_compute, PpAnalysisSteps *out, PpError *err);

/* The same from a table already measured (run's summary, as it runs):
 * step numbers steps[n] ascending, every one whole, their lengths and
 * bubble[n][n_ranks]. */
PpStatus pp_analysis_steps_of_table (const int32_t *steps, const double *length, const double *bubble,
                                     size_t n, int n_ranks, PpAnalysisSteps *out, PpError *err);
void     pp_analysis_steps_clear (PpAnalysisSteps *a);

/* "steps 4–19 (16 whole steps after the first, the last 16 at most)" */
char    *pp_analysis_describe_steps (const PpAnalysisSteps *a, char *buf, size_t size);

/* The JSON member ("\"analysis\": {...}") of a, for export --format why. */
void     pp_analysis_write_json_member (FILE *f, const PpAnalysisSteps *a);
