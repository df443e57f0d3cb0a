/* pp-probe.h — the probe's recording API: spans and counters from many
 * threads at once, no lock on the hot path.
 *
 * Each thread that records into a probe gets its own single-producer /
 * single-consumer ring on its first record.  A drain thread, owned by the
 * probe, empties every ring once per drain period (and on pp_probe_flush) and
 * hands the records to a sink.  The trace writer and the live endpoint are
 * sinks; so is a test.  No GLib here: the probe loads into any process.
 *
 * What a caller may rely on
 * -------------------------
 * Recording (pp_probe_record_span, pp_probe_record_counter):
 *   - never blocks, never waits for the drain or the sink, never exits or
 *     aborts, and is a no-op returning false when the probe is NULL;
 *   - takes no lock and allocates nothing, except on a thread's first record
 *     into a given probe, which allocates that thread's ring (one malloc of
 *     capacity records, pre-faulted) and takes the probe's registry lock once;
 *   - copies the record; the caller's PpSpan/PpCounter may be reused at once;
 *   - when the thread's ring is full, drops the record, counts the drop
 *     against the record's rank and returns false.  A drop is never silent:
 *     it shows in pp_probe_dropped() and reaches sink->dropped.
 *
 * Delivery (the sink):
 *   - every sink callback runs on the drain thread and only there, one at a
 *     time, so a sink needs no locking against recorders or itself;
 *   - every record not dropped reaches sink->spans / sink->counters exactly
 *     once; the records of one thread arrive in the order that thread
 *     recorded them.  Records of different threads are not ordered with
 *     respect to each other (sort by time if you need to);
 *   - the array passed to a callback points into the ring: it is valid only
 *     for the duration of the call; copy what you keep.  n is never 0;
 *   - sink->dropped (rank, total) gives the cumulative number of records
 *     (spans and counters together) dropped for that rank since the probe was
 *     created; it is called after a drain pass in which that total grew.
 *     Rank -1 collects drops that could not be attributed: a thread that
 *     dropped records of more than PP_PROBE_DROP_RANKS distinct ranks, or a
 *     thread whose ring could not be allocated;
 *   - a callback may be NULL: those records are then discarded, but still
 *     count as delivered (not as dropped);
 *   - a callback must not call pp_probe_flush or pp_probe_free on its own
 *     probe (flush returns PP_EINVAL if it does).
 *
 * Thread exit: a thread's ring outlives the thread until the drain has
 * emptied it; records made just before a thread exits are delivered, never
 * lost.  Dead, empty rings are freed by the drain.
 *
 * The loss bound
 * --------------
 * The drain visits each ring at least once every drain_period plus the time
 * of one drain pass (which includes the sink's time).  Nothing is dropped as
 * long as no thread records more than ring_capacity spans (and
 * counter_ring_capacity counters) between two visits.  Sustained, that is
 *
 *     ring_capacity / drain_period  records per second per thread
 *
 * e.g. the defaults, 65536 spans per 10 ms, allow bursts of 65536 spans and a
 * sustained 6.5 M spans/s on every thread — far above what a training job
 * emits (a few hundred to a few thousand spans per step per rank) — provided
 * the drain thread gets CPU time and the sink keeps up.  Past the bound,
 * records are dropped and counted, never queued without limit and never
 * blocking the recorder.
 *
 * The bound assumes the drain thread gets a CPU: on a machine with more busy
 * threads than cores its visits stretch by the scheduler's delay (measured on
 * 2 cores with 8 threads flat out: about 1.5 periods), so size rings with
 * 2x headroom.
 *
 * Lifetime: pp_probe_free must not run concurrently with a record or flush on
 * the same probe (as with any free).  A thread that outlives a probe keeps a
 * small ring header (under 1 KiB, no slots) until it exits or registers with
 * another probe.  In a child forked from the process, recording still works
 * (and, with no drain there, fills the ring and counts drops), flush returns
 * PP_EUNSUPPORTED, pp_probe_dropped returns 0 and free does nothing.  Recording into a probe from a thread
 * that started before the probe was created is fine; so is using several
 * probes from one thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-event.h"
#include "pp-status.h"

#define PP_PROBE_DEFAULT_RING_CAPACITY         65536        /* spans per thread */
#define PP_PROBE_DEFAULT_COUNTER_RING_CAPACITY 4096         /* counters per thread */
#define PP_PROBE_DEFAULT_DRAIN_PERIOD_NS       10000000LL   /* 10 ms */
#define PP_PROBE_DEFAULT_FLUSH_TIMEOUT_NS      5000000000LL /* 5 s */
#define PP_PROBE_MAX_RING_CAPACITY             (1u << 24)
#define PP_PROBE_DROP_RANKS                    8  /* distinct ranks a thread's drops are kept for */

/* Where drained records go.  Called only from the drain thread (see above). */
typedef struct {
  void *user;
  void (*spans) (void *user, const PpSpan *spans, size_t n);
  void (*counters) (void *user, const PpCounter *counters, size_t n);
  void (*dropped) (void *user, int32_t rank, uint64_t total_dropped);
} PpProbeSink;

/* Zero-initialize and set what you need: 0 means "default" for every number. */
typedef struct {
  uint32_t    ring_capacity;          /* spans per thread, power of two, >= 2 */
  uint32_t    counter_ring_capacity;  /* counters per thread, power of two, >= 2 */
  int64_t     drain_period_ns;        /* how often the drain empties the rings */
  int64_t     flush_timeout_ns;       /* how long pp_probe_flush waits at most */
  PpProbeSink sink;
} PpProbeConfig;

typedef struct _PpProbe PpProbe;

/* Creates a probe and starts its drain thread.  cfg may be NULL (all
 * defaults, no sink).  Returns NULL and fills err on a bad config (PP_EINVAL)
 * or when memory or the thread cannot be had (PP_ENOMEM, PP_EIO). */
PpProbe *pp_probe_new (const PpProbeConfig *cfg, PpError *err);

/* Stops the drain thread after a final drain pass (so everything recorded
 * before the call reaches the sink, and final drop totals are reported), then
 * frees every ring.  NULL is a no-op. */
void pp_probe_free (PpProbe *p);

/* Hot path.  Returns true when the record was queued, false when it was
 * dropped (ring full, counted) or p/record is NULL. */
bool pp_probe_record_span (PpProbe *p, const PpSpan *span);
bool pp_probe_record_counter (PpProbe *p, const PpCounter *counter);

/* Waits until every record recorded before this call (that is, by any
 * thread, before something that happens-before this call) has been handed to
 * the sink, together with the drop totals so far.  Waits at most the
 * config's flush_timeout_ns; returns PP_EIO if that passes (a sink that is
 * stuck), PP_EINVAL when called from a sink callback, PP_EUNSUPPORTED in a
 * forked child.  NULL is PP_OK. */
PpStatus pp_probe_flush (PpProbe *p, PpError *err);

/* Total records dropped so far, by every thread, counted exactly at the
 * moment of the call (it may include drops the sink has not yet been told
 * of).  0 for NULL. */
uint64_t pp_probe_dropped (PpProbe *p);

/* The configuration in effect, defaults filled in. */
void pp_probe_get_config (PpProbe *p, PpProbeConfig *out);

/* CLOCK_MONOTONIC in nanoseconds: the clock every record's times use (plus
 * PIPESCOPE_TEST_CLOCK_SKEW_NS where a test sets it, to play another host). */
int64_t pp_probe_now_ns (void);
