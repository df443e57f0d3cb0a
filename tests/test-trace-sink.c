/* The trace sink: a probe's drain writes every span into several trace
 * writers at once; drop totals become per-report deltas; a failing writer is
 * reported and skipped while the others get everything. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "pp-probe.h"
#include "pp-trace.h"
#include "pp-trace-sink.h"

#define N_THREADS 4
#define N_SPANS   10000

typedef struct {
  GByteArray *bytes;
  int         calls;
  int         fail_at;   /* this call and later fail; 0: never */
} Collect;

static int
collect_write (void *user, const void *data, size_t size)
{
  Collect *c = user;
  c->calls++;
  if (c->fail_at != 0 && c->calls >= c->fail_at)
    return -1;
  g_byte_array_append (c->bytes, data, (guint) size);
  return 0;
}

typedef struct {
  PpProbe *probe;
  int      id;
} Worker;

static gpointer
record_thread (gpointer data)
{
  Worker *wk = data;
  for (int i = 0; i < N_SPANS; i++)
    {
      PpSpan s = { 0 };
      s.start_ns = pp_probe_now_ns ();
      s.end_ns = s.start_ns + 10;
      s.rank = wk->id;
      s.stream = (uint32_t) wk->id;
      s.step = i;
      s.microbatch = -1;
      s.peer_rank = -1;
      while (!pp_probe_record_span (wk->probe, &s))
        g_usleep (100);   /* ring full: the test wants every span, so retry */
    }
  PpCounter c = { .time_ns = pp_probe_now_ns (), .value = wk->id, .rank = wk->id, .step = 1 };
  g_assert_true (pp_probe_record_counter (wk->probe, &c));
  return NULL;
}

/* Reads a whole trace; checks each thread's spans arrived complete and in
 * order; returns the number of counters. */
static int
check_trace (PpTraceReader *r, uint64_t *dropped)
{
  int next[N_THREADS] = { 0 };
  int counters = 0;
  *dropped = 0;
  PpTraceItem it;
  for (;;)
    {
      PpError err = { 0 };
      if (pp_trace_reader_next (r, &it, &err) != PP_OK)
        g_error ("reading back: %s", err.msg);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (it.type == PP_TRACE_ITEM_SPAN)
        {
          int id = it.span.rank;
          g_assert_cmpint (id, >=, 0);
          g_assert_cmpint (id, <, N_THREADS);
          g_assert_cmpint ((int) it.span.stream, ==, id);
          g_assert_cmpint (it.span.step, ==, next[id]);
          next[id]++;
        }
      else if (it.type == PP_TRACE_ITEM_COUNTER)
        counters++;
      else if (it.type == PP_TRACE_ITEM_DROPPED)
        *dropped += it.dropped.count;
    }
  g_assert_cmpint (it.truncated, ==, 0);
  for (int t = 0; t < N_THREADS; t++)
    g_assert_cmpint (next[t], ==, N_SPANS);
  return counters;
}

static void
test_probe_to_writers (void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp ("pp-sink-XXXXXX", &error);
  g_assert_no_error (error);
  char *path = g_build_filename (dir, "probe.pptrace", NULL);
  PpError err = { 0 };
  PpTraceWriter *file_w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (file_w);
  Collect good = { g_byte_array_new (), 0, 0 };
  Collect bad = { g_byte_array_new (), 0, 3 };   /* header, one batch, then fails */
  PpTraceWriter *cb_w = pp_trace_writer_new_callback (collect_write, &good, PP_TRACE_BIG, &err);
  PpTraceWriter *bad_w = pp_trace_writer_new_callback (collect_write, &bad, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (cb_w);
  g_assert_nonnull (bad_w);

  PpTraceWriter *writers[3] = { file_w, bad_w, cb_w };
  PpTraceSink *sink = pp_trace_sink_new (writers, 3, &err);
  g_assert_nonnull (sink);
  g_assert_cmpint (pp_trace_sink_status (sink, &err), ==, PP_OK);
  PpProbeConfig cfg = { 0 };
  cfg.sink = pp_trace_sink_probe_sink (sink);
  cfg.drain_period_ns = 1000000;
  PpProbe *probe = pp_probe_new (&cfg, &err);
  g_assert_nonnull (probe);

  Worker workers[N_THREADS];
  GThread *threads[N_THREADS];
  for (int t = 0; t < N_THREADS; t++)
    {
      workers[t] = (Worker) { probe, t };
      threads[t] = g_thread_new ("rec", record_thread, &workers[t]);
    }
  for (int t = 0; t < N_THREADS; t++)
    g_thread_join (threads[t]);
  g_assert_cmpint (pp_probe_flush (probe, &err), ==, PP_OK);
  pp_probe_free (probe);

  /* the failing writer is reported, once, with its message */
  PpError serr = { 0 };
  g_assert_cmpint (pp_trace_sink_status (sink, &serr), ==, PP_EIO);
  g_assert_nonnull (strstr (serr.msg, "writer 1"));
  g_assert_nonnull (strstr (serr.msg, "callback"));
  int bad_calls = bad.calls;
  g_assert_cmpint (bad_calls, ==, 3);   /* skipped after it failed */

  /* the others got everything, as it came: readable before close */
  PpTraceReader *r = pp_trace_reader_new_memory (good.bytes->data, good.bytes->len, &err);
  uint64_t dropped;
  g_assert_cmpint (check_trace (r, &dropped), ==, N_THREADS);
  g_assert_cmpuint (dropped, ==, 0);
  pp_trace_reader_free (r);
  g_assert_cmpint (pp_trace_writer_close (file_w, &err), ==, PP_OK);
  r = pp_trace_reader_new_path (path, &err);
  g_assert_nonnull (r);
  g_assert_cmpint (check_trace (r, &dropped), ==, N_THREADS);
  pp_trace_reader_free (r);

  pp_trace_sink_free (sink);
  pp_trace_writer_close (cb_w, NULL);
  pp_trace_writer_close (bad_w, NULL);
  g_byte_array_unref (good.bytes);
  g_byte_array_unref (bad.bytes);
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (dir);
}

/* Called directly: totals become deltas; impossible ranks are counted, not
 * fatal; every callback ends with a flush. */
static void
test_callbacks (void)
{
  PpError err = { 0 };
  Collect c = { g_byte_array_new (), 0, 0 };
  PpTraceWriter *w = pp_trace_writer_new_callback (collect_write, &c, PP_TRACE_NATIVE, &err);
  PpTraceSink *sink = pp_trace_sink_new (&w, 1, &err);
  PpProbeSink ps = pp_trace_sink_probe_sink (sink);

  ps.dropped (ps.user, 0, 5);
  g_assert_cmpint (c.calls, ==, 2);   /* header, then the frame: flushed */
  ps.dropped (ps.user, 0, 12);
  ps.dropped (ps.user, 0, 12);        /* no growth: nothing */
  ps.dropped (ps.user, 3, 4);
  ps.dropped (ps.user, -1, 1);
  ps.dropped (ps.user, 0, 13);
  PpSpan spans[3] = { { .rank = 1, .step = 1 }, { .rank = -5 }, { .rank = 2, .step = 2 } };
  ps.spans (ps.user, spans, 3);
  PpCounter counters[2] = { { .rank = PP_TRACE_MAX_RANKS }, { .rank = 1, .value = 0.5 } };
  ps.counters (ps.user, counters, 2);
  g_assert_cmpint (pp_trace_sink_status (sink, &err), ==, PP_OK);

  static const struct { PpTraceItemType type; int32_t rank; uint64_t count; } want[] = {
    { PP_TRACE_ITEM_DROPPED, 0, 5 }, { PP_TRACE_ITEM_DROPPED, 0, 7 }, { PP_TRACE_ITEM_DROPPED, 3, 4 },
    { PP_TRACE_ITEM_DROPPED, -1, 1 }, { PP_TRACE_ITEM_DROPPED, 0, 1 },
    { PP_TRACE_ITEM_SPAN, 1, 0 }, { PP_TRACE_ITEM_SPAN, 2, 0 }, { PP_TRACE_ITEM_DROPPED, -1, 1 },
    { PP_TRACE_ITEM_COUNTER, 1, 0 }, { PP_TRACE_ITEM_DROPPED, -1, 1 },
  };
  PpTraceReader *r = pp_trace_reader_new_memory (c.bytes->data, c.bytes->len, &err);
  PpTraceItem it;
  for (size_t i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_OK);
      g_assert_cmpint (it.type, ==, want[i].type);
      if (it.type == PP_TRACE_ITEM_DROPPED)
        {
          g_assert_cmpint (it.dropped.rank, ==, want[i].rank);
          g_assert_cmpuint (it.dropped.count, ==, want[i].count);
        }
      else if (it.type == PP_TRACE_ITEM_SPAN)
        g_assert_cmpint (it.span.rank, ==, want[i].rank);
      else
        g_assert_cmpint (it.counter.rank, ==, want[i].rank);
    }
  g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_OK);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  pp_trace_reader_free (r);

  pp_trace_sink_free (sink);
  pp_trace_writer_close (w, NULL);
  g_byte_array_unref (c.bytes);

  /* bad arguments */
  g_assert_null (pp_trace_sink_new (NULL, 1, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  PpTraceWriter *five[5] = { 0 };
  g_assert_null (pp_trace_sink_new (five, 5, &err));
  g_assert_null (pp_trace_sink_new (five, 1, &err));
  g_assert_cmpint (pp_trace_sink_status (NULL, &err), ==, PP_EINVAL);
  pp_trace_sink_free (NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/trace-sink/probe-to-writers", test_probe_to_writers);
  g_test_add_func ("/trace-sink/callbacks", test_callbacks);
  return g_test_run ();
}
