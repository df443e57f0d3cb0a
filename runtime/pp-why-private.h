/* pp-why-private.h — what the analysis of one pipeline takes from the
 * analysis of a job of replicas (pp-why-replicas.c), and what its files
 * (pp-why.c, pp-why-split.c, ...) take from one another, inside runtime/. */
#pragma once

#include "pp-why.h"

/* Each span's wait for slower replicas (pp-why-runtime.h, rule 0): for a
 * data-parallel collective span, wait_ns[i] the latest replica's arrival
 * at that collective minus this one's (clock-aligned starts; at most the
 * span's length, 0 where it came last) and of[i] that replica; 0 and -1
 * for any other span.  Parallel to the spans analysed. */
typedef struct {
  const int64_t *wait_ns;
  const int32_t *of;
} PpWhyReplicaWaits;

/* pp_why_analyse_spans_counters with the spans' waits for slower replicas
 * (NULL: a pipeline of its own, replica_late not measured). */
PpStatus pp_why_analyse_spans_waits (const PpSchedule *s, const PpSpan *spans, size_t n,
                                     const PpWhyReplicaWaits *waits, const PpCounter *counters,
                                     size_t n_counters, const PpWhyNames *names, int max_steps,
                                     PpWhyReport **out, PpError *err);

/* pp_why_analyse_run_counters, the same. */
PpStatus pp_why_analyse_run_waits (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                   const PpSpan *spans, size_t n, const PpWhyReplicaWaits *waits,
                                   const PpCounter *counters, size_t n_counters,
                                   const PpWhyNames *names, int max_steps, PpWhyReport **out,
                                   PpWhyChange *change, PpSchedule **sched_out, PpError *err);

/* pp_why_analyse_run_waits with the schedule built (taken: freed, or
 * handed to *sched_out): a job of replicas builds it once for them all. */
PpStatus pp_why_analyse_schedule_waits (const PpTraceDescription *desc, PpSchedule *s, const PpSpan *spans,
                                        size_t n, const PpWhyReplicaWaits *waits, const PpCounter *counters,
                                        size_t n_counters, const PpWhyNames *names, int max_steps,
                                        PpWhyReport **out, PpWhyChange *change, PpSchedule **sched_out,
                                        PpError *err);

/* s's compute actions (a whole step has a block for each). */
long     pp_why_n_compute (const PpSchedule *s);
/* PP_OK when spans[n] hold at least n_compute blocks (a whole step may
 * be among them), else PP_EINVAL with the message the analysis gives: in
 * O(n), so that a replica too small for a step costs its own spans, not
 * the schedule's. */
PpStatus pp_why_check_blocks (const PpSchedule *s, long n_compute, const PpSpan *spans, size_t n,
                              PpError *err);

/* pp_why_split, with dp[r] (may be NULL) each rank's data-parallel
 * communication in the step: its own part (pp_why_split_dp).  In
 * pp-why-split.c, for pp-why.c's steps. */
PpStatus split_with_dp (const PpSchedule *s, const PpCostModel *costs, const double *measured_idle,
                        const double *dp, PpWhyIdle *out, PpError *err);

/* The median of value[n] as the analysis over replicas takes it: the
 * indices sorted by value, then by tie[i] (NULL: by index), and the lower
 * of two middles; -1 for n <= 0.  pp-straggler.c's median copy too. */
int pp_why_median_index (const double *value, const int32_t *tie, int n);
