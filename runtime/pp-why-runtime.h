/* pp-why-runtime.h — what runtime is made of: the idle a rank's full plan
 * does not explain, split into named, measured parts.
 *
 * The rule.  Per rank, per analysed step, runtime (pp-why.h) splits into
 * the parts of PP_WHY_RT_* that add up to it exactly, none negative.
 *
 * 0. replica_late (a job of replicas, pp_why_analyse_replicas): the time
 *    the rank waited inside its data-parallel collectives (UNSHARD,
 *    REDUCE_GRAD) for a slower replica: per collective, the latest
 *    replica's arrival minus the rank's (their clock-aligned starts; at
 *    most the span), the collective matched across the replicas as the
 *    k-th of its kind and stage the pipeline rank runs in the step.  It
 *    is taken out of dp_comm (what is left is the collective's own
 *    transfer) into the bubble, and charged to runtime first (capped to
 *    it), naming the replica waited for most (PpWhyIdle.late_replica).
 *    Without replicas: 0, not measured.
 * 1. In each idle gap of the rank inside the step's compute window (a gap:
 *    between two consecutive work spans of the rank, pp_span_kind_is_work,
 *    no work span covering it; the first and last gap clipped to the
 *    window), each part is measured and capped to what is left of the gap,
 *    in this order (GC before descheduled: a pause placed in time before
 *    an amount without a place, so a thread descheduled inside a GC pause
 *    counts once, as the pause, and on a machine that deschedules a lot
 *    the job's collections still show):
 *      gc             the training thread's GC spans' overlap with the gap,
 *                     then what the process's other threads' collections
 *                     (a GC span's stream, format 1.8) add to it: their
 *                     time in the gap outside the rank's WAIT spans,
 *                     capped to the time the thread was blocked in the gap
 *                     (the gap less the ON_CPU_NS and RUN_DELAY_NS growth
 *                     across it, as descheduled; uncapped where either is
 *                     not measured).  Why: another thread's collection
 *                     holds the GIL (or, without one, stops the world),
 *                     which holds the training thread up only when it
 *                     wants the interpreter.  In a WAIT it sits in a C
 *                     call that released it (a gloo receive): not held,
 *                     unless the collection outlasts the receive and the
 *                     thread's return waits for the GIL; that tail lies
 *                     inside the WAIT as recorded (its end is read with
 *                     the interpreter back) and is not told from the
 *                     wait: left to the later parts.  Outside the waits the
 *                     thread runs the schedule's Python, which wants the
 *                     interpreter all the time, so it waits for the GIL:
 *                     blocked, neither on a CPU nor runnable, so never
 *                     longer than the counters' blocked time.  What of
 *                     the thread's time there was a GIL-free C call the
 *                     records do not show: not told apart (the cap bounds
 *                     it).  The same rule without a GIL (PP_GC_STOPS_WORLD):
 *                     a stopped world stops a thread at its next use of
 *                     the interpreter, not inside a C call that let go
 *                     of it;
 *      descheduled    the RUN_DELAY_NS difference between the samples at
 *                     the gap's two edges (the counter's last sample at or
 *                     before the previous work's end, and at or before the
 *                     next work's start: a recorder may sample only when
 *                     the value changed;
 *                     a gap the window clips gets the clipped share of it);
 *      host_schedule, host_loss, host_data, host_zero_grad
 *                     each host kind's overlap with the gap less what the
 *                     kinds before it (GC first) already cover;
 *      probe          the PROBE_SELF_NS difference across the gap, as
 *                     descheduled;
 *      user_kernels   the rank's KERNEL spans' overlap with the gap, and
 *                     its local WAITs' (pp_why_wait_is_local: NCCL's
 *                     "nccl:local", the rank's own GPU busy inside a
 *                     receive, neither the peer nor the data moving),
 *                     the union of the two: the device-side part, the
 *                     one for the rank's own device at work;
 *      launch_gap     the device idle while the host was in the calls
 *                     that launched its next work: the union of the
 *                     rank's LAUNCH spans (format 1.8: a launch an idle
 *                     device waited for) clipped to the gap, less the
 *                     host kinds' and kernels' time in it; a LAUNCH counts
 *                     in the gap if it started before the gap's end and
 *                     ended after its start, no later than the end of the
 *                     work that starts at the gap's end (a launch may
 *                     return after its kernel started; one ending later
 *                     launched a later gap's work);
 *      host_other     the ON_CPU_NS difference across the gap (the thread's
 *                     time on a CPU there), as descheduled, less the
 *                     training thread's gc (not another thread's: the
 *                     thread did not run it), the host kinds, probe and
 *                     launch_gap (each on the thread or a pause of it:
 *                     counted once): host work the probe did not
 *                     name.  What is left is neither on a CPU nor
 *                     runnable (the thread blocked: a peer, a lock, I/O)
 *                     or not measured.
 *    A counter difference that is negative, NaN or longer than the gap
 *    (a sample missing, a thread changed) is cut to [0, what is left].
 * 2. Per rank, the gaps' sums are charged to runtime in that order, each
 *    capped to what runtime has left: host work in a PLANNED bubble (a GC
 *    in the fill) does not lengthen the bubble beyond the plan, so what
 *    does not fit in runtime is not runtime's.  host_other is charged
 *    last, after peer_late (rule 3): a thread that spins while it waits
 *    (a busy-polling transport) is on a CPU for the whole wait, and that
 *    wait is the late peer's, so host_other takes only from what would
 *    otherwise be unattributed.
 * 3. peer_late: the rank's measured waiting for a dependency (a peer's
 *    block end plus the plan's transfer time, pp_schedule_dependencies,
 *    or, where later, the end of the rank's own recorded WAIT before the
 *    block: the input came late although its block ended in time, the
 *    peer having done host work, a GC, before handing it over.  A local
 *    WAIT is no such mark: the data was there when the WAIT before it
 *    ended (an NCCL receive's "nccl:peer_late" or "nccl:transfer" part),
 *    and its time is the rank's own, user_kernels (rule 1), charged before
 *    peer_late; later
 *    than the rank's own previous block end, or the window start for its
 *    first block) beyond the full plan's idle of the rank, capped to what
 *    runtime has left.  The peer whose late blocks made the rank wait
 *    most is named (PpWhyIdle.late_peer) with what its host did in the
 *    gaps just before those blocks, and just after them where the input
 *    came after the block's end (late_causes).
 * 4. unattributed: the rest.
 * The mean over the analysed steps is taken part by part, as for the
 * other parts.
 *
 * No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pp-event.h"
#include "pp-schedule.h"
#include "pp-status.h"
#include "pp-why.h"

/* "descheduled", "gc", "host_schedule", "host_loss", "host_data",
 * "host_zero_grad", "probe", "user_kernels", "launch_gap", "host_other", "peer_late",
 * "replica_late", "unattributed";
 * NULL out of range. */
const char *pp_why_runtime_part_name (int part);
/* What the part is, in the manual's words (docs/why.md, "Inside runtime"), one short
 * phrase without a final stop; NULL out of range. */
const char *pp_why_runtime_part_meaning (int part);

/* One idle gap of a rank: its time (ns on the spans' clock, clipped to
 * the window asked for) and its parts in seconds by rule 1 (peer_late 0;
 * unattributed what is left of the gap).  The parts sum to the gap. */
typedef struct {
  int64_t start_ns, end_ns;
  double  parts[PP_WHY_N_RUNTIME_PARTS];
} PpWhyGap;

/* Rank's idle gaps in [from_ns, to_ns] from a run's spans and counters
 * (either may be NULL with 0), in time order, malloc'd into *out (NULL
 * when none).  For the timeline's host lane.  The spans are read unnamed
 * (no local WAIT in user_kernels): the lane draws descheduled alone,
 * which comes before it and no name changes. */
PpStatus pp_why_runtime_gaps (const PpSpan *spans, size_t n_spans, const PpCounter *counters,
                              size_t n_counters, int rank, int64_t from_ns, int64_t to_ns,
                              PpWhyGap **out, size_t *n_out, PpError *err);

/* The spans and counters of a run indexed per rank, for the analysis.
 * name (may be NULL: every span unnamed) resolves a span's name_id, as
 * pp_nccl_match's does; only WAIT spans' names are asked for, each of
 * the first 16 ids once (a trace has a few).  A local WAIT (pp_why_wait_is_local) is read as the
 * rules above say; every other WAIT, named or not, as a wait for a peer. */
typedef struct PpWhyRuntimeIndex PpWhyRuntimeIndex;

PpWhyRuntimeIndex *pp_why_runtime_index_new (const PpSpan *spans, size_t n_spans,
                                             const PpCounter *counters, size_t n_counters,
                                             int ranks, PpWhyNameFunc name, void *user,
                                             PpError *err);
void               pp_why_runtime_index_free (PpWhyRuntimeIndex *ix);

/* Whether a WAIT span of this name (NULL: none) is the rank's own device
 * busy, not a wait for a peer: NCCL's "nccl:local" part of a receive's or
 * a send's wait (pp-nccl-split.h: this GPU had not taken or handed over
 * the data), and the proxy step states it is made of, "nccl:RecvGPUWait"
 * and "nccl:SendGPUWait" (the plugin writes them beside the split). */
int pp_why_wait_is_local (const char *name);

/* Fills idle[r].runtime_parts, runtime_measured and the late peer of every
 * rank of one step (window [lo_ns, hi_ns]) whose split idle[] already
 * holds, by the rule above.  blocks[nb] are the step's blocks in seconds
 * from lo_ns (pp_why_analyse_spans's), comm the plan's transfer times per
 * boundary (NULL none). */
PpStatus pp_why_runtime_step (const PpWhyRuntimeIndex *ix, const PpSchedule *s, int64_t lo_ns,
                              int64_t hi_ns, const PpWhyBlock *blocks, size_t nb,
                              const double *comm, PpWhyIdle *idle, PpError *err);

/* runtime all unattributed, no late peer: a split with nothing measured. */
void pp_why_runtime_reset (PpWhyIdle *w);

/* mean[r]'s runtime parts and late peer as the mean over steps[n_steps]
 * (the late peer: the one that explains most over them). */
PpStatus pp_why_runtime_mean (const PpWhyStep *steps, int n_steps, int ranks, PpWhyIdle *mean,
                              PpError *err);

/* ---- reports ----------------------------------------------------------------
 * Under the Why table: a line per rank with runtime > 0, its measured parts
 * (and any non-zero one) in unit (values x scale) with their share of
 * runtime, and the late peer with what its host did before its late
 * blocks; then a line for each part named above saying what it is.
 * Nothing when no rank has runtime. */
void pp_why_print_runtime_parts (FILE *f, const PpWhyIdle *idle, int ranks, double scale,
                                 const char *unit);
/* w's JSON members, each after ", ": "runtime_parts": {name: seconds}
 * (gc, descheduled, unattributed always; the others where measured or
 * non-zero), "runtime_replica_late": {"replica", "seconds"} where
 * replica_late has a replica, and "runtime_peer_late": {"peer", "seconds",
 * "causes"} where peer_late has a peer. */
void pp_why_runtime_write_json (FILE *f, const PpWhyIdle *w);
