/* pp-cupti.h — the CUPTI collector: device kernels, copies and memsets as
 * PpSpan children of the F/B/I/W blocks that launched them.
 *
 * Built only when CUDA and CUPTI are found (libpipescope_cupti,
 * cupti_probe_dep); links libcupti and libcudart, never libcuda, so a binary
 * that uses it still loads where no driver is installed.  No GLib here.
 *
 * Starting
 * --------
 * pp_cupti_start registers a CLOCK_MONOTONIC timestamp callback (so every
 * record's start/end is on pp_probe_now_ns's clock), the buffer callbacks
 * (a bounded pool of PP_CUPTI_BUFFER_COUNT buffers of PP_CUPTI_BUFFER_SIZE
 * bytes, allocated on demand), enables CONCURRENT_KERNEL, MEMCPY, MEMSET and
 * EXTERNAL_CORRELATION activity, and API records for the launch, memcpy and
 * memset calls of the runtime and the driver only (pp_cupti_traces_api; every
 * call with PIPESCOPE_CUPTI_API=all, or where CUPTI cannot pick calls), and
 * starts a flush thread that calls cuptiActivityFlushAll(0) every
 * PP_CUPTI_FLUSH_PERIOD_NS, so
 * device records reach the probe within about that period plus the probe's
 * drain period.  Call it before the process's first CUDA call when you can
 * (records of contexts created earlier are still collected, but work queued
 * before the call is not).
 *
 * When tracing is unavailable it returns NULL, fills err with PP_EUNSUPPORTED
 * and a one-line reason a user can read as it is, and leaves nothing enabled:
 *   - no GPU or no driver (CUPTI answers UNKNOWN / NOT_INITIALIZED / NO_DEVICE);
 *   - another CUPTI client in the process: nsys, ncu, an active PyTorch
 *     profiler (MULTIPLE_SUBSCRIBERS);
 *   - a collector already running in this process (one per process);
 *   - PIPESCOPE_CUPTI=0 in the environment (the user turned it off).
 * The caller then keeps running and times its blocks with CUDA events.
 * Other failures are PP_ENOMEM / PP_EIO.  Nothing here ever aborts or exits.
 *
 * Tagging blocks
 * --------------
 *   uint64_t id = pp_cupti_push_block (c, stage, mb, PP_SPAN_F, step);
 *   ... launch the block's kernels, copies, memsets (on this thread) ...
 *   pp_cupti_pop_block (c);
 * push gives the block a fresh id (never 0, increasing) and pushes it as
 * CUPTI's external correlation id (kind CUSTOM0) on the calling thread; every
 * CUDA call made by this thread until the matching pop is tagged with it.
 * Blocks nest (a stack per thread; the innermost wins) and must be popped on
 * the thread that pushed them.  The device records of tagged calls become
 * spans with the block's rank, stage, microbatch and step; untagged device
 * work becomes spans with stage = microbatch = -1 and step = the step of the
 * last block pushed (0 before any).  Once any block has been pushed, an
 * untagged record reaches the probe later than a tagged one: it waits for
 * tags that CUPTI may deliver from another thread's buffer, until two forced
 * flushes (pp_cupti_flush, a served pp_cupti_request_flush) or 50 periodic
 * ones have begun and returned after it was read, or until stop.  push/pop take one short lock each; with c == NULL they do nothing
 * and push returns 0.
 *
 * Spans
 * -----
 * Kernel / copy / memset records become PpSpan with kind PP_SPAN_KERNEL /
 * PP_SPAN_MEMCPY / PP_SPAN_MEMSET, start_ns/end_ns from the record, device
 * (CUDA device index), stream (CUPTI stream id), bytes (copies and memsets),
 * peer_rank -1 and name_id: an interned name (the kernel's mangled name,
 * "memcpy HtoD", "memset", ...) that pp_cupti_name gives back.  They are
 * recorded with pp_probe_record_span from a CUPTI thread (the flush thread or
 * CUPTI's own worker), so they arrive at the sink like any other thread's.
 * A sink that writes a trace writes pp_cupti_name (c, id) for each name_id it
 * has not written yet (ids are 1, 2, 3, ... in order of first use, at most
 * PP_CUPTI_MAX_NAMES; past that, name_id 0).
 *
 * Launches
 * --------
 * The API records of the launch, copy and memset calls give each call's
 * host start and end (same correlation id as its device record; either
 * may come first, each waits for the other in a bounded table).  Where a
 * device record began more than 10 us after every record read before it
 * on its device had ended (the device idle, not back-to-back kernels) and
 * its call ended after that end (the host still launching while the
 * device was idle), the collector also records a PP_SPAN_LAUNCH span: the
 * call's [start, end], the work's device, stream and name, the block's
 * tags as for the device record.  Work queued behind busy work gets none,
 * so a busy pipeline adds few.  The analysis takes it as runtime's
 * launch_gap (pp-why-runtime.h).  Counted in stats.launches, not spans.
 *
 * GPU time of a block
 * -------------------
 * pp_cupti_block_gpu_time (c, id, &start, &end, &n) gives the earliest start
 * and latest end of the device records seen so far for block id, so the
 * executor can give each F/B/I/W span its GPU start and end.  Records arrive
 * asynchronously: the answer is final once the block's work has completed
 * on the device (synchronize its stream or event) and pp_cupti_flush has
 * returned after that.  The last PP_CUPTI_MAX_BLOCKS blocks are kept; an
 * older id answers false.
 *
 * Drops
 * -----
 * When every pool buffer is in use, CUPTI drops records; each buffer
 * completion adds cuptiActivityGetNumDroppedRecords to pp_cupti_dropped.
 * Spans the probe's ring refuses are counted by the probe (pp_probe_dropped),
 * not here.
 *
 * Errors after start (a failed flush, push or pop) are kept, the first one
 * only, in pp_cupti_status; collection goes on where it can.
 *
 * Threads: everything may be called from any thread, except that
 * pp_cupti_free must not run concurrently with other calls on c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "pp-probe.h"
#include "pp-status.h"

#define PP_CUPTI_BUFFER_SIZE     (4u * 1024u * 1024u)  /* bytes per activity buffer */
#define PP_CUPTI_BUFFER_COUNT    16                     /* buffers at most (64 MiB) */
#define PP_CUPTI_FLUSH_PERIOD_NS 100000000LL            /* 100 ms */
#define PP_CUPTI_MAX_BLOCKS      262144                 /* blocks whose GPU time is kept */
#define PP_CUPTI_MAX_NAMES       65535                  /* interned names */

typedef struct _PpCupti PpCupti;

/* Counters, for tests and the status line.  All cumulative since start. */
typedef struct {
  uint64_t flushes;        /* cuptiActivityFlushAll calls that succeeded */
  int64_t  last_flush_ns;  /* pp_probe_now_ns of the last one; 0 = none */
  uint64_t buffers;        /* completed buffers handled */
  uint64_t records;        /* activity records read, every kind */
  uint64_t spans;          /* spans handed to pp_probe_record_span */
  uint64_t tagged;         /* of those, inside a pushed block */
  uint64_t dropped;        /* records CUPTI dropped (no buffer) */
  uint64_t launches;       /* LAUNCH spans handed to the probe (not in spans) */
  uint32_t api_calls;      /* API calls (runtime + driver) with records; 0 = all */
} PpCuptiStats;

/* Starts collecting for rank into probe (which must outlive c).  See above. */
PpCupti    *pp_cupti_start (PpProbe *probe, int rank, PpError *err);

/* Tags this thread's CUDA calls until the matching pop.  kind is a PpSpanKind
 * (PP_SPAN_F, ...), kept for the caller's bookkeeping.  Returns the block id,
 * or 0 when c is NULL or the push failed (then the calls go untagged). */
uint64_t    pp_cupti_push_block (PpCupti *c, int stage, int microbatch, int kind, int step);
/* The same for a process that runs several ranks (a thread per rank): the
 * block's device records carry `rank` instead of the collector's. */
uint64_t    pp_cupti_push_block_rank (PpCupti *c, int rank, int stage, int microbatch,
                                      int kind, int step);
void        pp_cupti_pop_block (PpCupti *c);

/* Earliest start and latest end of block id's device records so far (see
 * "GPU time of a block").  Returns false (outputs untouched) when none has
 * arrived yet, the id is too old or unknown, or c is NULL.  n_records may be
 * NULL. */
bool        pp_cupti_block_gpu_time (PpCupti *c, uint64_t block_id,
                                     int64_t *start_ns, int64_t *end_ns,
                                     uint32_t *n_records);

/* Whether block id is still among the last PP_CUPTI_MAX_BLOCKS pushed (its
 * GPU time, if any, can be read).  False for 0 or NULL. */
bool        pp_cupti_block_kept (PpCupti *c, uint64_t block_id);

/* Hands every completed device record to the probe now (synchronous
 * cuptiActivityFlushAll with FORCED: buffers not yet full too), except
 * untagged ones still waiting for their tags (see "Tagging blocks").  Device
 * work that has not finished is not waited for.  PP_OK for NULL. */
PpStatus    pp_cupti_flush (PpCupti *c, PpError *err);

/* The same without waiting: the flush thread does it now.  Returns a ticket
 * for pp_cupti_wait_flush (0 for NULL or once stopping, which waits for
 * nothing).  Every device record completed before the call is delivered once
 * the ticket is served. */
uint64_t    pp_cupti_request_flush (PpCupti *c);
/* Waits until the flush of ticket has returned, at most timeout_ns; false
 * if it has not by then. */
bool        pp_cupti_wait_flush (PpCupti *c, uint64_t ticket, int64_t timeout_ns);

/* Whether a call of that name (cuptiGetCallbackName's) gets an API record:
 * the calls that make device records (launches, copies, memsets) of the
 * runtime (driver false) or the driver. */
bool        pp_cupti_traces_api (bool driver, const char *name);

/* From now on every API call gets a record, as with PIPESCOPE_CUPTI_API=all:
 * for a caller whose blocks found no device records with the launch and
 * copy calls alone.  True if it switched now. */
bool        pp_cupti_record_all_api (PpCupti *c);

/* The interned name of a span's name_id, or NULL.  The string lives until
 * pp_cupti_free. */
const char *pp_cupti_name (PpCupti *c, uint32_t id);

/* Records CUPTI dropped so far (0 for NULL). */
uint64_t    pp_cupti_dropped (PpCupti *c);
void        pp_cupti_get_stats (PpCupti *c, PpCuptiStats *out);

/* PP_OK, or the first error since start, with its message. */
PpStatus    pp_cupti_status (PpCupti *c, PpError *err);

/* Stops collecting: joins the flush thread, flushes every buffer (forced),
 * disables the activity kinds.  Synchronize the device first if its last
 * work must be seen.  Names, block times, stats stay readable until
 * pp_cupti_free.  Idempotent; NULL is a no-op.  After it another
 * pp_cupti_start is allowed. */
void        pp_cupti_stop (PpCupti *c);

/* Stops (if needed) and frees c.  NULL is a no-op. */
void        pp_cupti_free (PpCupti *c);
