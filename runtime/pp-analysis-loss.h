/* pp-analysis-loss.h — the job's loss: one series per replica, never
 * mixed, and the headline every view shows (info, the app's chart,
 * render), over all replicas reduced as the framework reduces it.
 *
 * A replica is a data-parallel index of the last pipeline stage's
 * processes (the caller names it: the process's dp coordinate, or, where
 * its place is not known, any number of its own that tells processes
 * apart).  Several values of one replica in one step (its tensor ranks
 * report the same loss) are one value: their mean.
 *
 * THE HEADLINE of a step: where the job reports PP_COUNTER_LOSS_PART (a
 * process's summed part of a loss the framework sums over replicas,
 * torchtitan), the sum of the replicas' parts; else PP_COUNTER_LOSS (a
 * process's mean over its micro-batches: megatron-core, PyTorch's
 * schedules), the mean over the replicas.  A step counts once every
 * replica seen (of that kind) has reported it: a step some replica has
 * not reported yet has no headline (NaN), never a part of one.
 *
 * Incremental (a live view adds as counters come) and bounded by what is
 * added.  No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-event.h"
#include "pp-status.h"

typedef struct PpAnalysisLoss PpAnalysisLoss;

PpAnalysisLoss *pp_analysis_loss_new (void);
void            pp_analysis_loss_free (PpAnalysisLoss *a);

/* Adds one counter (kinds other than LOSS and LOSS_PART, a negative step
 * and a value not finite are ignored: 0) of replica (-1: one replica of
 * its own, numbered apart from every named one).  1 when taken, -1 out
 * of memory. */
int    pp_analysis_loss_add (PpAnalysisLoss *a, const PpCounter *c, int32_t replica);

/* The headline's counter kind (PP_COUNTER_LOSS_PART where any such was
 * added, else PP_COUNTER_LOSS) and its replicas (0: no loss). */
int    pp_analysis_loss_kind (const PpAnalysisLoss *a);
int    pp_analysis_loss_n_replicas (const PpAnalysisLoss *a);

/* The headline of step (NaN where the step is not whole, above). */
double pp_analysis_loss_at (const PpAnalysisLoss *a, int32_t step);

/* The headline's whole steps in order: step[i], value[i] for i < the
 * count returned (either array may be NULL to count; at most max). */
size_t pp_analysis_loss_series (const PpAnalysisLoss *a, int32_t *step, double *value, size_t max);

/* Replica k's own series (k < pp_analysis_loss_n_replicas, in the order
 * of their numbers; *replica gets its number), as above. */
size_t pp_analysis_loss_replica_series (const PpAnalysisLoss *a, int k, int32_t *replica, int32_t *step,
                                        double *value, size_t max);

/* "loss: 7.98771 -> 5.22162 (6 values, a step's the sum over 2 replicas,
 * as the job reduces it)" ("(6 values, as the job computed it)" for one
 * replica) into buf, "" when there is no whole step.  Returns buf. */
char  *pp_analysis_loss_describe (const PpAnalysisLoss *a, char *buf, size_t size);
