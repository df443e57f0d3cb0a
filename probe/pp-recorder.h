/* pp-recorder.h — where a recording process's events go: trace writers (a
 * live server's stream, a trace file, a caller's callback) fed by one probe
 * through one trace sink.
 *
 * pipescope-cli's jobs (app/cli/cli-job.c) and libpipescope-probe.so's ranks
 * (pp-foreign.c) are recorders.  The writers take frames from two sides: the
 * probe's drain (spans, counters, drops, through the trace sink) and the
 * caller's threads (headers, plans, markers, names: pp_recorder_write).  One
 * lock per recorder keeps frames whole; the drain takes it for each batch,
 * and it is never held across a drain, so a caller must not hold it across
 * pp_probe_flush.  No GLib here.
 *
 * Use: pp_recorder_new, add the writers, pp_recorder_start (the probe),
 * record into pp_recorder_probe, write frames with pp_recorder_write,
 * pp_recorder_close (or pp_recorder_free on an error path).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pp-live.h"
#include "pp-probe.h"
#include "pp-trace.h"

#define PP_RECORDER_MAX_WRITERS 3

typedef struct _PpRecorder PpRecorder;

/* What the drain calls besides the writers.  Zero-initialize; all optional. */
typedef struct {
  void *user;
  /* Under the lock, on the drain thread, after the writers took a batch of
   * spans or of counters, and once more after the final drain in
   * pp_recorder_close: for frames a caller queued to follow what was
   * recorded before them (pp_recorder_write_locked writes them).  Only
   * with at least one writer. */
  void (*after_batch) (void *user);
  /* Under the lock, on the drain thread, before the writers take a batch
   * of spans: for frames the spans need before them (their names).  Only
   * with at least one writer. */
  void (*before_spans) (void *user, const PpSpan *spans, size_t n);
  /* Every batch once more, after the writers, outside the lock. */
  PpProbeSink tap;
} PpRecorderHooks;

/* An empty recorder (no writers, no probe); NULL and err on no memory. */
PpRecorder   *pp_recorder_new (PpError *err);

/* Add a writer, before pp_recorder_start; each returns its index (0, 1, ...
 * in the order added) or -1 with err (then nothing was added).
 * add_live: server's live stream; the recorder owns server from the call
 * on, even when it fails.  add_file: path, created (truncated), mode 0600.
 * add_callback: every byte written goes to write (under the lock). */
int           pp_recorder_add_live (PpRecorder *r, PpLiveServer *server, PpError *err);
int           pp_recorder_add_file (PpRecorder *r, const char *path, PpError *err);
int           pp_recorder_add_callback (PpRecorder *r, PpTraceWriteFunc write, void *user,
                                        PpError *err);
int           pp_recorder_n_writers (const PpRecorder *r);
/* The server add_live was given, or NULL. */
PpLiveServer *pp_recorder_server (const PpRecorder *r);

/* Starts the probe.  Its records go to the writers through a trace sink
 * (when there is a writer), then to hooks->tap.  hooks may be NULL.  Once. */
PpStatus      pp_recorder_start (PpRecorder *r, const PpRecorderHooks *hooks, PpError *err);
/* The probe, once started (else NULL). */
PpProbe      *pp_recorder_probe (const PpRecorder *r);

/* fn on every writer in order, each flushed after it, under the lock; from
 * any thread but the drain's.  A writer that fails keeps its error (the
 * close reports it) and the next writers still get fn.  PP_OK, or the
 * first failure's status with its writer's index in *failed (may be NULL)
 * and its message in err.  NULL r: nothing, PP_OK. */
typedef PpStatus (*PpRecorderWriteFunc) (PpTraceWriter *w, void *user, PpError *err);
PpStatus      pp_recorder_write (PpRecorder *r, PpRecorderWriteFunc fn, void *user, int *failed,
                                 PpError *err);
/* The same with the lock already held (in after_batch, or between
 * pp_recorder_lock and unlock). */
PpStatus      pp_recorder_write_locked (PpRecorder *r, PpRecorderWriteFunc fn, void *user,
                                        int *failed, PpError *err);
/* fn on writer index alone, then flushed, under the lock. */
PpStatus      pp_recorder_write_one (PpRecorder *r, int index, PpRecorderWriteFunc fn, void *user,
                                     PpError *err);
/* The writers' lock, for a caller's own state that its writers' callbacks
 * or after_batch read.  NULL r: nothing. */
void          pp_recorder_lock (PpRecorder *r);
void          pp_recorder_unlock (PpRecorder *r);

/* Stops the probe (a final drain: everything recorded reaches the writers),
 * calls after_batch once more, closes the writers (the last added first)
 * and the server (its registry entry goes), frees r.  PP_OK, or the first
 * failure: the trace sink's (*failed = -1) or a writer's (*failed = its
 * index), message in err.  NULL r: PP_OK. */
PpStatus      pp_recorder_close (PpRecorder *r, int *failed, PpError *err);
/* The same without reporting, for error paths.  NULL is a no-op. */
void          pp_recorder_free (PpRecorder *r);
