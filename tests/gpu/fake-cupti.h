/* fake-cupti.h — a stand-in for libcupti, so the CUPTI collector
 * (probe/pp-cupti.c) runs its whole logic on a machine without a GPU.
 *
 * fake-cupti.c defines the 13 CUPTI calls pp-cupti.c makes, against the real
 * <cupti.h> of the toolkit (so record layouts are CUPTI's own), and these
 * functions, with which a test plays the CUDA side.  It models what the
 * collector relies on, as CUPTI documents it:
 *
 *  - An API call gets a correlation id.  It gets an API record when its
 *    layer's kind (RUNTIME, DRIVER) is enabled or the call is enabled by
 *    itself (cuptiActivityEnable{Runtime,Driver}Api); then, if the calling
 *    thread has pushed an external correlation id and EXTERNAL_CORRELATION is
 *    enabled, an EXTERNAL_CORRELATION record (top of the stack, the call's
 *    correlation id) goes just before it.  Calls without an API record get
 *    no correlation record: that is the collector's assumption for calls
 *    enabled one by one, which only a GPU can confirm.
 *  - API records and device records go to two different buffers (CUPTI keeps
 *    API records per thread), taken from the client's buffer callback when
 *    needed.  A full buffer is handed back at once (a held API buffer
 *    queues them); with no buffer given,
 *    records are dropped and counted (cuptiActivityGetNumDroppedRecords,
 *    reset on each call).
 *  - cuptiActivityFlushAll hands back every buffer that holds records, on
 *    the calling thread, except the API buffer while it is held
 *    (fake_cupti_hold_api): so a test can make device records arrive before
 *    the correlation records of their calls, as happens across threads.  A
 *    default flush (flag 0) also keeps back the API buffer while a call is
 *    running (fake_cupti_api_begin): CUPTI's default flush returns only
 *    buffers whose records are all complete.
 *
 * Not thread-safe against fake_cupti_reset: reset only while no collector
 * runs.  Everything else may be called from any thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

typedef struct {
  uint64_t flushes;         /* cuptiActivityFlushAll calls, every flag */
  uint64_t forced_flushes;  /* of those, with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */
  uint64_t api_calls;       /* fake_cupti_api_call */
  uint64_t api_records;     /* API records written */
  uint64_t ext_records;     /* EXTERNAL_CORRELATION records written */
  uint64_t device_records;  /* kernel / memcpy / memset records written */
  uint64_t dropped;         /* records dropped for want of a buffer */
  uint64_t delivered;       /* buffers handed back */
  uint64_t requested;       /* buffers asked for (given or not) */
} FakeCuptiStats;

/* Back to nothing registered, nothing enabled, no failure planned, counters
 * zero, buffers forgotten (the collector's pool keeps its own). */
void     fake_cupti_reset (void);
/* From now on the named CUPTI call ("cuptiActivityEnableRuntimeApi", ...)
 * returns r (until reset). */
void     fake_cupti_fail (const char *function, CUptiResult r);
/* Full buffers at this many bytes (0: the size the client gave). */
void     fake_cupti_set_buffer_limit (size_t bytes);
/* The API buffer is not handed back by the next n flushes. */
void     fake_cupti_hold_api (int n_flushes);

/* A runtime (driver false) or driver API call on this thread; returns its
 * correlation id. */
uint32_t fake_cupti_api_call (bool driver, uint32_t cbid);
/* The same with the API record's start and end given (ns, the records'
 * clock) instead of now: a launch that took that long. */
uint32_t fake_cupti_api_call_at (bool driver, uint32_t cbid, uint64_t start, uint64_t end);
/* The same for a call that has not returned (a synchronous copy): its API
 * record stays incomplete until fake_cupti_api_end, and a default flush
 * keeps back the API buffer meanwhile (a forced one does not). */
uint32_t fake_cupti_api_begin (bool driver, uint32_t cbid);
void     fake_cupti_api_end (void);
/* The device records of call corr. */
void     fake_cupti_kernel (uint32_t corr, const char *name, uint64_t start, uint64_t end);
void     fake_cupti_memcpy (uint32_t corr, uint8_t copy_kind, uint64_t bytes, uint64_t start,
                            uint64_t end);
void     fake_cupti_memset (uint32_t corr, uint64_t bytes, uint64_t start, uint64_t end);

/* What the client set up. */
bool     fake_cupti_kind_enabled (CUpti_ActivityKind kind);
uint32_t fake_cupti_calls_enabled (bool driver);   /* calls enabled one by one */
bool     fake_cupti_callbacks_registered (void);
/* The client's timestamp callback, called now (0 when none). */
uint64_t fake_cupti_timestamp (void);
void     fake_cupti_stats (FakeCuptiStats *out);
