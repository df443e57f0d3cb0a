/* pp-recorder.c — trace writers fed by one probe through one trace sink
 * (pp-recorder.h). */
#include "pp-recorder.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace-sink.h"

struct _PpRecorder {
  PpLiveServer   *server;
  PpTraceWriter  *w[PP_RECORDER_MAX_WRITERS];
  int             n;
  PpTraceSink    *sink;
  PpProbeSink     trace_sink;   /* the sink's callbacks (none without writers) */
  PpRecorderHooks hooks;
  PpProbe        *probe;
  pthread_mutex_t lock;
};

PpRecorder *
pp_recorder_new (PpError *err)
{
  PpRecorder *r = calloc (1, sizeof *r);
  if (r == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  pthread_mutex_init (&r->lock, NULL);
  return r;
}

static int
add (PpRecorder *r, PpTraceWriter *w)
{
  if (w == NULL)
    return -1;
  r->w[r->n] = w;
  return r->n++;
}

static bool
room (PpRecorder *r, PpError *err)
{
  if (r->n < PP_RECORDER_MAX_WRITERS && r->probe == NULL)
    return true;
  pp_error_set (err, PP_EINVAL, "recorder: no writer can be added now");
  return false;
}

int
pp_recorder_add_live (PpRecorder *r, PpLiveServer *server, PpError *err)
{
  if (r->server != NULL)
    pp_error_set (err, PP_EINVAL, "recorder: one live server only");
  if (r->server != NULL || !room (r, err))
    {
      pp_live_server_free (server);
      return -1;
    }
  r->server = server;
  return add (r, pp_trace_writer_new_callback (pp_live_server_write, server, PP_TRACE_NATIVE, err));
}

int
pp_recorder_add_file (PpRecorder *r, const char *path, PpError *err)
{
  if (!room (r, err))
    return -1;
  return add (r, pp_trace_writer_new_path (path, PP_TRACE_NATIVE, err));
}

int
pp_recorder_add_callback (PpRecorder *r, PpTraceWriteFunc write, void *user, PpError *err)
{
  if (!room (r, err))
    return -1;
  return add (r, pp_trace_writer_new_callback (write, user, PP_TRACE_NATIVE, err));
}

int
pp_recorder_n_writers (const PpRecorder *r)
{
  return r ? r->n : 0;
}

PpLiveServer *
pp_recorder_server (const PpRecorder *r)
{
  return r ? r->server : NULL;
}

PpProbe *
pp_recorder_probe (const PpRecorder *r)
{
  return r ? r->probe : NULL;
}

/* ---- the drain's side: the trace sink under the lock, then the tap ---- */

static void
rec_spans (void *user, const PpSpan *spans, size_t n)
{
  PpRecorder *r = user;
  if (r->trace_sink.spans)
    {
      pthread_mutex_lock (&r->lock);
      if (r->hooks.before_spans)
        r->hooks.before_spans (r->hooks.user, spans, n);
      r->trace_sink.spans (r->trace_sink.user, spans, n);
      if (r->hooks.after_batch)
        r->hooks.after_batch (r->hooks.user);
      pthread_mutex_unlock (&r->lock);
    }
  if (r->hooks.tap.spans)
    r->hooks.tap.spans (r->hooks.tap.user, spans, n);
}

static void
rec_counters (void *user, const PpCounter *counters, size_t n)
{
  PpRecorder *r = user;
  if (r->trace_sink.counters)
    {
      pthread_mutex_lock (&r->lock);
      r->trace_sink.counters (r->trace_sink.user, counters, n);
      if (r->hooks.after_batch)
        r->hooks.after_batch (r->hooks.user);
      pthread_mutex_unlock (&r->lock);
    }
  if (r->hooks.tap.counters)
    r->hooks.tap.counters (r->hooks.tap.user, counters, n);
}

static void
rec_dropped (void *user, int32_t rank, uint64_t total)
{
  PpRecorder *r = user;
  if (r->trace_sink.dropped)
    {
      pthread_mutex_lock (&r->lock);
      r->trace_sink.dropped (r->trace_sink.user, rank, total);
      pthread_mutex_unlock (&r->lock);
    }
  if (r->hooks.tap.dropped)
    r->hooks.tap.dropped (r->hooks.tap.user, rank, total);
}

PpStatus
pp_recorder_start (PpRecorder *r, const PpRecorderHooks *hooks, PpError *err)
{
  PpProbeConfig pcfg;

  if (r->probe != NULL)
    return pp_error_set (err, PP_EINVAL, "recorder: started already");
  if (r->n > 0)
    {
      r->sink = pp_trace_sink_new (r->w, r->n, err);
      if (r->sink == NULL)
        return err ? err->status : PP_EINVAL;
      r->trace_sink = pp_trace_sink_probe_sink (r->sink);
    }
  if (hooks != NULL)
    r->hooks = *hooks;
  memset (&pcfg, 0, sizeof pcfg);
  pcfg.sink.user = r;
  pcfg.sink.spans = rec_spans;
  pcfg.sink.counters = rec_counters;
  pcfg.sink.dropped = rec_dropped;
  r->probe = pp_probe_new (&pcfg, err);
  return r->probe ? PP_OK : (err ? err->status : PP_EIO);
}

/* ---- the caller's side ---- */

void
pp_recorder_lock (PpRecorder *r)
{
  if (r != NULL)
    pthread_mutex_lock (&r->lock);
}

void
pp_recorder_unlock (PpRecorder *r)
{
  if (r != NULL)
    pthread_mutex_unlock (&r->lock);
}

static PpStatus
write_to (PpRecorder *r, int i, PpRecorderWriteFunc fn, void *user, PpError *err)
{
  PpStatus st = fn (r->w[i], user, err);
  if (st == PP_OK)
    st = pp_trace_writer_flush (r->w[i], err);
  return st;
}

PpStatus
pp_recorder_write_locked (PpRecorder *r, PpRecorderWriteFunc fn, void *user, int *failed,
                          PpError *err)
{
  PpStatus first = PP_OK;
  if (r == NULL)
    return PP_OK;
  for (int i = 0; i < r->n; i++)
    {
      PpError e = { 0 };
      PpStatus st = write_to (r, i, fn, user, first == PP_OK ? err : &e);
      if (st != PP_OK && first == PP_OK)
        {
          first = st;
          if (failed)
            *failed = i;
        }
    }
  return first;
}

PpStatus
pp_recorder_write (PpRecorder *r, PpRecorderWriteFunc fn, void *user, int *failed, PpError *err)
{
  if (r == NULL)
    return PP_OK;
  pthread_mutex_lock (&r->lock);
  PpStatus st = pp_recorder_write_locked (r, fn, user, failed, err);
  pthread_mutex_unlock (&r->lock);
  return st;
}

PpStatus
pp_recorder_write_one (PpRecorder *r, int index, PpRecorderWriteFunc fn, void *user, PpError *err)
{
  if (r == NULL || index < 0 || index >= r->n)
    return pp_error_set (err, PP_EINVAL, "recorder: no writer %d", index);
  pthread_mutex_lock (&r->lock);
  PpStatus st = write_to (r, index, fn, user, err);
  pthread_mutex_unlock (&r->lock);
  return st;
}

/* ---- the end ---- */

PpStatus
pp_recorder_close (PpRecorder *r, int *failed, PpError *err)
{
  PpStatus first = PP_OK;

  if (r == NULL)
    return PP_OK;
  pp_probe_free (r->probe);   /* the final drain */
  r->probe = NULL;
  if (r->sink != NULL && r->hooks.after_batch)
    {
      pthread_mutex_lock (&r->lock);
      r->hooks.after_batch (r->hooks.user);   /* what no record came after */
      pthread_mutex_unlock (&r->lock);
    }
  if (r->sink != NULL && (first = pp_trace_sink_status (r->sink, err)) != PP_OK && failed)
    *failed = -1;
  for (int i = r->n - 1; i >= 0; i--)
    {
      PpError e = { 0 };
      PpStatus st = pp_trace_writer_close (r->w[i], first == PP_OK ? err : &e);
      r->w[i] = NULL;
      if (st != PP_OK && first == PP_OK)
        {
          first = st;
          if (failed)
            *failed = i;
        }
    }
  r->n = 0;
  pp_recorder_free (r);
  return first;
}

void
pp_recorder_free (PpRecorder *r)
{
  if (r == NULL)
    return;
  pp_probe_free (r->probe);
  pp_trace_sink_free (r->sink);
  for (int i = 0; i < r->n; i++)
    pp_trace_writer_close (r->w[i], NULL);
  pp_live_server_free (r->server);
  pthread_mutex_destroy (&r->lock);
  free (r);
}
