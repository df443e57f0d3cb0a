/* The CUPTI collector (probe/pp-cupti.c) against a fake libcupti
 * (fake-cupti.h), on any machine: the logic the GPU tests can only reach
 * where a GPU is lent — tagging device records with their blocks, records
 * that come before their tags, per-block GPU times, the API calls enabled
 * one by one and the switch to every call, flush tickets and the periodic
 * flush, drops, failures, stop.  What the fake cannot show is what real
 * CUPTI does; test-gpu-cupti checks that on a GPU. */
#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-cupti.h"
#include "pp-cupti.h"
#include "pp-probe.h"

#define LAUNCH_RT   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
#define EVENT_RT    CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020
#define COPY_DRV    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2
#define LAUNCH_DRV  CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel
#define SEC_NS      1000000000LL
#define MS_NS       1000000LL

/* ---- a probe whose sink keeps every span ---- */

typedef struct {
  GMutex   lock;
  GArray  *spans;   /* PpSpan */
  PpProbe *probe;
} Sink;

static void
sink_spans (void *user, const PpSpan *s, size_t n)
{
  Sink *k = user;
  g_mutex_lock (&k->lock);
  g_array_append_vals (k->spans, s, (guint) n);
  g_mutex_unlock (&k->lock);
}

static Sink *
sink_new (void)
{
  Sink *k = g_new0 (Sink, 1);
  PpProbeConfig cfg = { 0 };
  PpError err = { 0 };
  g_mutex_init (&k->lock);
  k->spans = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  cfg.sink.user = k;
  cfg.sink.spans = sink_spans;
  k->probe = pp_probe_new (&cfg, &err);
  g_assert_nonnull (k->probe);
  return k;
}

static void
sink_free (Sink *k)
{
  pp_probe_free (k->probe);
  g_array_free (k->spans, TRUE);
  g_mutex_clear (&k->lock);
  g_free (k);
}

/* The spans of that kind whose name is name (NULL: any), copied. */
static GArray *
sink_find (Sink *k, PpCupti *c, int kind, const char *name)
{
  PpError err = { 0 };
  GArray *out = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  g_assert_cmpint (pp_probe_flush (k->probe, &err), ==, PP_OK);
  g_mutex_lock (&k->lock);
  for (guint i = 0; i < k->spans->len; i++)
    {
      PpSpan *s = &g_array_index (k->spans, PpSpan, i);
      if (s->kind == kind && (!name || g_strcmp0 (pp_cupti_name (c, s->name_id), name) == 0))
        g_array_append_val (out, *s);
    }
  g_mutex_unlock (&k->lock);
  return out;
}

static PpCupti *
start (Sink *k, int rank)
{
  PpError err = { 0 };
  PpCupti *c = pp_cupti_start (k->probe, rank, &err);
  if (!c)
    g_error ("pp_cupti_start on the fake: %s", err.msg);
  return c;
}

static void
flush (PpCupti *c)
{
  PpError err = { 0 };
  g_assert_cmpint (pp_cupti_flush (c, &err), ==, PP_OK);
}

static uint64_t
now (void)
{
  return (uint64_t) pp_probe_now_ns ();
}

/* ---- tests ---- */

/* Device records of calls made inside a block carry its tags; the block gets
 * their GPU time; names are interned; untagged work stays untagged. */
static void
test_tags (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  FakeCuptiStats fs;
  PpCuptiStats st;

  g_assert_true (fake_cupti_callbacks_registered ());
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_MEMCPY));
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_MEMSET));
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  /* launches, copies and memsets one by one, not every call */
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_RUNTIME));
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_DRIVER));
  g_assert_cmpuint (fake_cupti_calls_enabled (false), ==, 3);
  g_assert_cmpuint (fake_cupti_calls_enabled (true), ==, 3);
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.api_calls, ==, 6);

  /* the records' clock is pp_probe_now_ns's */
  uint64_t a = now (), ts = fake_cupti_timestamp (), b = now ();
  g_assert_cmpuint (ts, >=, a);
  g_assert_cmpuint (ts, <=, b);

  uint64_t T = now ();
  uint64_t id = pp_cupti_push_block_rank (c, 2, 1, 3, PP_SPAN_F, 5);
  g_assert_cmpuint (id, >, 0);
  uint32_t c_launch = fake_cupti_api_call (false, LAUNCH_RT);
  uint32_t c_event = fake_cupti_api_call (false, EVENT_RT);
  uint32_t c_copy = fake_cupti_api_call (true, COPY_DRV);
  pp_cupti_pop_block (c);
  uint32_t c_stray = fake_cupti_api_call (false, LAUNCH_RT);
  (void) c_event;

  fake_cupti_kernel (c_launch, "gemm_tf32", T + 1000, T + 5000);
  fake_cupti_memcpy (c_copy, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 4096, T + 6000, T + 7000);
  fake_cupti_kernel (c_stray, "stray", T + 8000, T + 9000);

  /* an untagged record waits two whole flushes for tags that never come */
  for (int i = 0; i < 3; i++)
    flush (c);

  GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, "gemm_tf32");
  g_assert_cmpuint (ks->len, ==, 1);
  PpSpan *s = &g_array_index (ks, PpSpan, 0);
  g_assert_cmpint (s->rank, ==, 2);
  g_assert_cmpint (s->stage, ==, 1);
  g_assert_cmpint (s->microbatch, ==, 3);
  g_assert_cmpint (s->step, ==, 5);
  g_assert_cmpint (s->start_ns, ==, (int64_t) T + 1000);
  g_assert_cmpint (s->end_ns, ==, (int64_t) T + 5000);
  g_assert_cmpuint (s->stream, ==, 7);
  g_array_free (ks, TRUE);

  GArray *ms = sink_find (k, c, PP_SPAN_MEMCPY, "memcpy DtoD");
  g_assert_cmpuint (ms->len, ==, 1);
  s = &g_array_index (ms, PpSpan, 0);
  g_assert_cmpuint (s->bytes, ==, 4096);
  g_assert_cmpint (s->stage, ==, 1);
  g_assert_cmpint (s->microbatch, ==, 3);
  g_array_free (ms, TRUE);

  GArray *us = sink_find (k, c, PP_SPAN_KERNEL, "stray");
  g_assert_cmpuint (us->len, ==, 1);
  s = &g_array_index (us, PpSpan, 0);
  g_assert_cmpint (s->rank, ==, 0);          /* the collector's */
  g_assert_cmpint (s->stage, ==, -1);
  g_assert_cmpint (s->microbatch, ==, -1);
  g_assert_cmpint (s->step, ==, 5);          /* the last block's */
  g_array_free (us, TRUE);

  int64_t gs = 0, ge = 0;
  uint32_t n = 0;
  g_assert_true (pp_cupti_block_gpu_time (c, id, &gs, &ge, &n));
  g_assert_cmpint (gs, ==, (int64_t) T + 1000);
  g_assert_cmpint (ge, ==, (int64_t) T + 7000);
  g_assert_cmpuint (n, ==, 2);
  g_assert_false (pp_cupti_block_gpu_time (c, id + 1, &gs, &ge, &n));

  /* the event record inside the block wrote no record at all */
  fake_cupti_stats (&fs);
  g_assert_cmpuint (fs.api_calls, ==, 4);
  g_assert_cmpuint (fs.api_records, ==, 3);
  g_assert_cmpuint (fs.ext_records, ==, 2);
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.spans, ==, 3);
  g_assert_cmpuint (st.tagged, ==, 2);
  g_assert_cmpuint (st.dropped, ==, 0);
  g_assert_cmpuint (pp_probe_dropped (k->probe), ==, 0);

  pp_cupti_free (c);
  sink_free (k);
}

/* Device records read before the correlation records of their calls (CUPTI
 * hands API buffers back later than device buffers) still get their tags. */
static void
test_late_tags (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 1);
  uint64_t T = now ();

  fake_cupti_hold_api (1);
  uint64_t id = pp_cupti_push_block (c, 3, 6, PP_SPAN_B, 2);
  uint32_t corr = fake_cupti_api_call (true, LAUNCH_DRV);
  pp_cupti_pop_block (c);
  fake_cupti_kernel (corr, "late", T + 10, T + 20);

  flush (c);   /* the kernel, without its tags: it waits */
  flush (c);   /* the tags */
  GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, "late");
  g_assert_cmpuint (ks->len, ==, 1);
  PpSpan *s = &g_array_index (ks, PpSpan, 0);
  g_assert_cmpint (s->rank, ==, 1);
  g_assert_cmpint (s->stage, ==, 3);
  g_assert_cmpint (s->microbatch, ==, 6);
  g_assert_cmpint (s->step, ==, 2);
  g_array_free (ks, TRUE);
  int64_t gs = 0, ge = 0;
  g_assert_true (pp_cupti_block_gpu_time (c, id, &gs, &ge, NULL));
  g_assert_cmpint (gs, ==, (int64_t) T + 10);
  g_assert_cmpint (ge, ==, (int64_t) T + 20);

  pp_cupti_free (c);
  sink_free (k);
}

/* A requested flush is forced and served by the flush thread; requests do
 * not hold back the periodic flushes; a ticket open at stop is served. */
static void
test_request_flush (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  FakeCuptiStats f0, f1;
  uint64_t T = now ();

  uint64_t id = pp_cupti_push_block (c, 0, 0, PP_SPAN_F, 0);
  uint32_t corr = fake_cupti_api_call (false, LAUNCH_RT);
  pp_cupti_pop_block (c);
  fake_cupti_kernel (corr, "k", T + 1, T + 2);

  fake_cupti_stats (&f0);
  uint64_t t = pp_cupti_request_flush (c);
  g_assert_cmpuint (t, >, 0);
  g_assert_true (pp_cupti_wait_flush (c, t, 5 * SEC_NS));
  fake_cupti_stats (&f1);
  g_assert_cmpuint (f1.forced_flushes, >, f0.forced_flushes);
  g_assert_true (pp_cupti_block_gpu_time (c, id, NULL, NULL, NULL));
  /* a ticket not yet given is not served */
  g_assert_false (pp_cupti_wait_flush (c, t + 100, 20 * MS_NS));

  /* a request every 10 ms for 650 ms: the 100 ms flushes go on (6 due) */
  fake_cupti_stats (&f0);
  int64_t end = pp_probe_now_ns () + 650 * MS_NS;
  int requests = 0;
  while (pp_probe_now_ns () < end)
    {
      uint64_t tk = pp_cupti_request_flush (c);
      g_assert_true (pp_cupti_wait_flush (c, tk, 5 * SEC_NS));
      requests++;
      g_usleep (10 * 1000);
    }
  fake_cupti_stats (&f1);
  uint64_t periodic = (f1.flushes - f1.forced_flushes) - (f0.flushes - f0.forced_flushes);
  g_test_message ("%d requests, %" G_GUINT64_FORMAT " periodic flushes in 650 ms", requests,
                  periodic);
  g_assert_cmpuint (f1.forced_flushes - f0.forced_flushes, >=, (uint64_t) requests);
  g_assert_cmpuint (periodic, >=, 3);

  /* open at stop: served by the stop; none given after */
  t = pp_cupti_request_flush (c);
  pp_cupti_stop (c);
  g_assert_true (pp_cupti_wait_flush (c, t, 0));
  g_assert_cmpuint (pp_cupti_request_flush (c), ==, 0);

  pp_cupti_free (c);
  sink_free (k);
}

/* Records CUPTI could not store for want of a buffer are counted once. */
static void
test_drops (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  FakeCuptiStats fs;

  /* 4 KiB buffers kept by CUPTI: the pool (16) runs out */
  fake_cupti_set_buffer_limit (4096);
  fake_cupti_hold_api (1000000);
  pp_cupti_push_block (c, 0, 0, PP_SPAN_F, 0);
  for (int i = 0; i < 2000; i++)
    fake_cupti_api_call (false, LAUNCH_RT);
  pp_cupti_pop_block (c);
  fake_cupti_hold_api (0);
  flush (c);
  flush (c);

  fake_cupti_stats (&fs);
  g_test_message ("%" G_GUINT64_FORMAT " buffers asked, %" G_GUINT64_FORMAT " records dropped",
                  fs.requested, fs.dropped);
  g_assert_cmpuint (fs.requested, >, PP_CUPTI_BUFFER_COUNT);
  g_assert_cmpuint (fs.dropped, >, 0);
  g_assert_cmpuint (pp_cupti_dropped (c), ==, fs.dropped);
  PpCuptiStats st;
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.dropped, ==, fs.dropped);
  /* every stored record was read */
  g_assert_cmpuint (st.records, ==, fs.api_records + fs.ext_records);

  /* the pool came back: records flow again */
  uint64_t T = now ();
  uint64_t id = pp_cupti_push_block (c, 0, 1, PP_SPAN_F, 0);
  uint32_t corr = fake_cupti_api_call (false, LAUNCH_RT);
  pp_cupti_pop_block (c);
  fake_cupti_kernel (corr, "after", T + 1, T + 2);
  flush (c);
  g_assert_true (pp_cupti_block_gpu_time (c, id, NULL, NULL, NULL));

  pp_cupti_free (c);
  sink_free (k);
}

/* Every API call: asked for, where calls cannot be picked, and switched to
 * at run time. */
static void
test_every_api_call (void)
{
  FakeCuptiStats f0, f1;
  PpCuptiStats st;

  /* asked for */
  fake_cupti_reset ();
  Sink *k = sink_new ();
  g_setenv ("PIPESCOPE_CUPTI_API", "all", TRUE);
  PpCupti *c = start (k, 0);
  g_unsetenv ("PIPESCOPE_CUPTI_API");
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_RUNTIME));
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_DRIVER));
  g_assert_cmpuint (fake_cupti_calls_enabled (false), ==, 0);
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.api_calls, ==, 0);
  g_assert_false (pp_cupti_record_all_api (c));    /* already */
  pp_cupti_free (c);
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_RUNTIME));
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_DRIVER));

  /* a CUPTI that cannot enable calls one by one */
  fake_cupti_reset ();
  fake_cupti_fail ("cuptiActivityEnableDriverApi", CUPTI_ERROR_NOT_SUPPORTED);
  c = start (k, 0);
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_RUNTIME));
  g_assert_true (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_DRIVER));
  g_assert_cmpuint (fake_cupti_calls_enabled (false), ==, 0);   /* undone */
  pp_cupti_free (c);

  /* switched to at run time: calls the selection left out get records */
  fake_cupti_reset ();
  c = start (k, 0);
  pp_cupti_push_block (c, 0, 0, PP_SPAN_F, 0);
  fake_cupti_stats (&f0);
  fake_cupti_api_call (false, EVENT_RT);
  fake_cupti_stats (&f1);
  g_assert_cmpuint (f1.ext_records, ==, f0.ext_records);
  g_assert_true (pp_cupti_record_all_api (c));
  g_assert_false (pp_cupti_record_all_api (c));
  fake_cupti_api_call (false, EVENT_RT);
  fake_cupti_stats (&f1);
  g_assert_cmpuint (f1.ext_records, ==, f0.ext_records + 1);
  pp_cupti_pop_block (c);
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.api_calls, ==, 0);
  pp_cupti_stop (c);
  g_assert_false (pp_cupti_record_all_api (c));    /* stopped */
  /* nothing left on: kinds, and the calls enabled one by one */
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_RUNTIME));
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_DRIVER));
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  g_assert_cmpuint (fake_cupti_calls_enabled (false), ==, 0);
  g_assert_cmpuint (fake_cupti_calls_enabled (true), ==, 0);
  pp_cupti_free (c);
  sink_free (k);
}

static void
assert_unavailable (PpCupti *c, const PpError *err, const char *why)
{
  g_assert_null (c);
  g_assert_cmpint (err->status, ==, PP_EUNSUPPORTED);
  g_assert_null (strchr (err->msg, '\n'));
  g_assert_true (g_str_has_prefix (err->msg, "GPU tracing unavailable: "));
  if (!strstr (err->msg, why))
    g_error ("expected \"%s\" in: %s", why, err->msg);
}

/* CUPTI refusing: one line, nothing left enabled, a later start works. */
static void
test_refused (void)
{
  Sink *k = sink_new ();
  PpError err = { 0 };

  fake_cupti_reset ();
  fake_cupti_fail ("cuptiActivityEnable", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  PpCupti *c = pp_cupti_start (k->probe, 0, &err);
  assert_unavailable (c, &err, "another profiler");
  g_assert_false (fake_cupti_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

  fake_cupti_reset ();
  fake_cupti_fail ("cuptiActivityEnable", CUPTI_ERROR_NOT_SUPPORTED);
  memset (&err, 0, sizeof err);
  c = pp_cupti_start (k->probe, 0, &err);
  assert_unavailable (c, &err, "not supported on this GPU");

  fake_cupti_reset ();
  fake_cupti_fail ("cuptiActivityRegisterTimestampCallback", CUPTI_ERROR_NOT_INITIALIZED);
  memset (&err, 0, sizeof err);
  c = pp_cupti_start (k->probe, 0, &err);
  assert_unavailable (c, &err, "no usable GPU or CUDA driver");
  for (int kind = 0; kind < 64; kind++)
    g_assert_false (fake_cupti_kind_enabled ((CUpti_ActivityKind) kind));

  /* one collector per process */
  fake_cupti_reset ();
  c = start (k, 0);
  memset (&err, 0, sizeof err);
  assert_unavailable (pp_cupti_start (k->probe, 1, &err), &err, "already runs");

  /* a failing flush: kept as the status, collection goes on */
  fake_cupti_fail ("cuptiActivityFlushAll", CUPTI_ERROR_UNKNOWN);
  PpError ferr = { 0 };
  g_assert_cmpint (pp_cupti_flush (c, &ferr), ==, PP_EIO);
  g_assert_null (strchr (ferr.msg, '\n'));
  PpError serr = { 0 };
  g_assert_cmpint (pp_cupti_status (c, &serr), ==, PP_EIO);
  g_assert_nonnull (strstr (serr.msg, "cuptiActivityFlushAll"));
  pp_cupti_free (c);
  sink_free (k);
}

/* Stop hands over what was still in CUPTI's buffers; block times and names
 * stay readable; a new collector may start. */
static void
test_stop (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  uint64_t T = now ();
  uint64_t id = pp_cupti_push_block (c, 1, 1, PP_SPAN_W, 9);
  uint32_t corr = fake_cupti_api_call (false, LAUNCH_RT);
  pp_cupti_pop_block (c);
  fake_cupti_kernel (corr, "last", T + 3, T + 4);
  fake_cupti_memset (fake_cupti_api_call (true, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async),
                     64, T + 5, T + 6);
  pp_cupti_stop (c);

  GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, "last");
  g_assert_cmpuint (ks->len, ==, 1);
  g_assert_cmpint (g_array_index (ks, PpSpan, 0).step, ==, 9);
  g_array_free (ks, TRUE);
  GArray *ms = sink_find (k, c, PP_SPAN_MEMSET, "memset");
  g_assert_cmpuint (ms->len, ==, 1);     /* untagged, out at stop without waiting */
  g_assert_cmpint (g_array_index (ms, PpSpan, 0).stage, ==, -1);
  g_assert_cmpuint (g_array_index (ms, PpSpan, 0).bytes, ==, 64);
  g_array_free (ms, TRUE);
  g_assert_true (pp_cupti_block_gpu_time (c, id, NULL, NULL, NULL));

  PpError err = { 0 };
  PpCupti *c2 = pp_cupti_start (k->probe, 0, &err);
  g_assert_nonnull (c2);
  pp_cupti_free (c2);
  pp_cupti_free (c);
  sink_free (k);
}

/* Four training threads tag their blocks at once while the flush thread
 * runs: every kernel arrives once, with its own thread's tags. */
#define N_THREADS 4
#define N_BLOCKS  300
#define N_KERNELS 4

typedef struct {
  PpCupti *c;
  int      rank;
} Worker;

static const char *const worker_names[N_THREADS] = { "rank0", "rank1", "rank2", "rank3" };

static void *
worker_main (void *data)
{
  Worker *w = data;
  for (int b = 0; b < N_BLOCKS; b++)
    {
      uint64_t T = now ();
      pp_cupti_push_block_rank (w->c, w->rank, w->rank, b, PP_SPAN_F, b / 10);
      for (int i = 0; i < N_KERNELS; i++)
        {
          uint32_t corr = fake_cupti_api_call (i % 2 == 1, i % 2 ? LAUNCH_DRV : LAUNCH_RT);
          fake_cupti_api_call (false, EVENT_RT);
          fake_cupti_kernel (corr, worker_names[w->rank], T + 10 * (uint64_t) i,
                             T + 10 * (uint64_t) i + 5);
        }
      pp_cupti_pop_block (w->c);
      if (b % 50 == 0)
        pp_cupti_wait_flush (w->c, pp_cupti_request_flush (w->c), SEC_NS);
    }
  return NULL;
}

static void
test_threads (void)
{
  fake_cupti_reset ();
  fake_cupti_set_buffer_limit (64 * 1024);
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  pthread_t th[N_THREADS];
  Worker w[N_THREADS];
  for (int r = 0; r < N_THREADS; r++)
    {
      w[r] = (Worker) { c, r };
      g_assert_cmpint (pthread_create (&th[r], NULL, worker_main, &w[r]), ==, 0);
    }
  for (int r = 0; r < N_THREADS; r++)
    pthread_join (th[r], NULL);
  pp_cupti_stop (c);

  PpCuptiStats st;
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.dropped, ==, 0);
  g_assert_cmpuint (st.spans, ==, N_THREADS * N_BLOCKS * N_KERNELS);
  g_assert_cmpuint (st.tagged, ==, N_THREADS * N_BLOCKS * N_KERNELS);
  for (int r = 0; r < N_THREADS; r++)
    {
      GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, worker_names[r]);
      g_assert_cmpuint (ks->len, ==, N_BLOCKS * N_KERNELS);
      int per_block[N_BLOCKS] = { 0 };
      for (guint i = 0; i < ks->len; i++)
        {
          PpSpan *s = &g_array_index (ks, PpSpan, i);
          g_assert_cmpint (s->rank, ==, r);
          g_assert_cmpint (s->stage, ==, r);
          g_assert_cmpint (s->microbatch, >=, 0);
          g_assert_cmpint (s->microbatch, <, N_BLOCKS);
          g_assert_cmpint (s->step, ==, s->microbatch / 10);
          per_block[s->microbatch]++;
        }
      for (int b = 0; b < N_BLOCKS; b++)
        g_assert_cmpint (per_block[b], ==, N_KERNELS);
      g_array_free (ks, TRUE);
    }
  g_assert_cmpuint (pp_probe_dropped (k->probe), ==, 0);
  pp_cupti_free (c);
  sink_free (k);
}

/* A training thread blocked in a synchronous traced call keeps its API
 * buffer out of the periodic (default) flushes, with the tags of the
 * kernels it launched before: those kernels wait for a forced flush instead
 * of going out untagged after two periodic ones. */
static void
test_blocked_thread (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  FakeCuptiStats f0, f1;
  uint64_t T = now ();

  uint64_t id = pp_cupti_push_block (c, 2, 4, PP_SPAN_F, 1);
  uint32_t corr = fake_cupti_api_call (false, LAUNCH_RT);
  fake_cupti_api_begin (false, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  fake_cupti_kernel (corr, "before_sync", T + 1, T + 2);

  /* four periodic flushes while the call runs (about 400 ms) */
  fake_cupti_stats (&f0);
  int64_t give_up = pp_probe_now_ns () + 5 * SEC_NS;
  do
    {
      g_usleep (20 * 1000);
      fake_cupti_stats (&f1);
    }
  while (f1.flushes - f0.flushes < 4 && pp_probe_now_ns () < give_up);
  g_assert_cmpuint (f1.flushes - f0.flushes, >=, 4);
  g_assert_cmpuint (f1.forced_flushes, ==, f0.forced_flushes);
  GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, "before_sync");
  g_assert_cmpuint (ks->len, ==, 0);     /* still waiting, not untagged */
  g_array_free (ks, TRUE);

  fake_cupti_api_end ();
  pp_cupti_pop_block (c);
  uint64_t t = pp_cupti_request_flush (c);
  g_assert_true (pp_cupti_wait_flush (c, t, 5 * SEC_NS));
  ks = sink_find (k, c, PP_SPAN_KERNEL, "before_sync");
  g_assert_cmpuint (ks->len, ==, 1);
  g_assert_cmpint (g_array_index (ks, PpSpan, 0).stage, ==, 2);
  g_assert_cmpint (g_array_index (ks, PpSpan, 0).microbatch, ==, 4);
  g_array_free (ks, TRUE);
  g_assert_true (pp_cupti_block_gpu_time (c, id, NULL, NULL, NULL));

  pp_cupti_free (c);
  sink_free (k);
}

/* A step with more device records than the first room for waiting ones
 * (a long pipeline): all of them keep their tags. */
static void
test_many_waiting (void)
{
  enum { N = 40000 };
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  uint64_t T = now ();

  fake_cupti_hold_api (1);
  pp_cupti_push_block (c, 1, 0, PP_SPAN_F, 0);
  for (int i = 0; i < N; i++)
    fake_cupti_kernel (fake_cupti_api_call (false, LAUNCH_RT), "many", T + (uint64_t) i,
                       T + (uint64_t) i + 1);
  pp_cupti_pop_block (c);
  flush (c);
  flush (c);

  PpCuptiStats st;
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.dropped, ==, 0);
  g_assert_cmpuint (st.spans, ==, N);
  g_assert_cmpuint (st.tagged, ==, N);
  pp_cupti_free (c);
  sink_free (k);
}

/* LAUNCH spans (pp-cupti.h, "Launches"), on device 0, times from T in ms:
 *   c0 call [-1, -0.9]  K0 [0, 10]      the device's first work: a LAUNCH
 *   c1 call [1, 1.01]   K1 [10, 12]     queued behind K0: none
 *   c2 call [13, 15]    K2 [15.005, 16] the device idle since 12 while the
 *                                       call ran: LAUNCH [13, 15]
 *   c3 call [16.1, 16.2] M3 [20, 21]    a copy; idle since 16, the call
 *                                       ended after: LAUNCH [16.1, 16.2]
 *   c4 call [20.2, 20.3] K4 [25, 26]    idle before it, but its call had
 *                                       returned while M3 ran: none
 *   c5 call [26, 27]    K5 [26.005, 27.5] 5 us after K4: back to back, none
 * c0..c2 in block A (API records read before the device records), c3..c5
 * in block B (the device records read first: the LAUNCH waits for its
 * call).  The LAUNCHes carry their block's tags, the work's device, stream
 * and name, and leave the blocks' GPU times alone. */
static void
test_launches (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  uint64_t T = now () + 100 * MS_NS;
#define AT(ms) ((uint64_t) ((int64_t) T + (int64_t) ((ms) * 1e6 + ((ms) < 0 ? -0.5 : 0.5))))

  uint64_t a = pp_cupti_push_block_rank (c, 3, 1, 0, PP_SPAN_F, 2);
  uint32_t c0 = fake_cupti_api_call_at (false, LAUNCH_RT, AT (-1), AT (-0.9));
  uint32_t c1 = fake_cupti_api_call_at (true, LAUNCH_DRV, AT (1), AT (1.01));
  uint32_t c2 = fake_cupti_api_call_at (false, LAUNCH_RT, AT (13), AT (15));
  pp_cupti_pop_block (c);
  flush (c);   /* the calls first */
  fake_cupti_kernel (c0, "k0", AT (0), AT (10));
  fake_cupti_kernel (c1, "k1", AT (10), AT (12));
  fake_cupti_kernel (c2, "k2", AT (15.005), AT (16));
  flush (c);

  uint64_t b = pp_cupti_push_block_rank (c, 4, 2, 1, PP_SPAN_B, 2);
  uint32_t c3 = fake_cupti_api_call_at (true, COPY_DRV, AT (16.1), AT (16.2));
  uint32_t c4 = fake_cupti_api_call_at (false, LAUNCH_RT, AT (20.2), AT (20.3));
  uint32_t c5 = fake_cupti_api_call_at (false, LAUNCH_RT, AT (26), AT (27));
  pp_cupti_pop_block (c);
  fake_cupti_memcpy (c3, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 64, AT (20), AT (21));
  fake_cupti_kernel (c4, "k4", AT (25), AT (26));
  fake_cupti_kernel (c5, "k5", AT (26.005), AT (27.5));
  flush (c);   /* device records, then the calls (the fake's order) */
  flush (c);

  GArray *ls = sink_find (k, c, PP_SPAN_LAUNCH, NULL);
  g_assert_cmpuint (ls->len, ==, 3);
  static const double want[3][2] = { { -1, -0.9 }, { 13, 15 }, { 16.1, 16.2 } };
  static const char *const names[3] = { "k0", "k2", "memcpy HtoD" };
  for (guint i = 0; i < ls->len; i++)
    {
      const PpSpan *s = &g_array_index (ls, PpSpan, i);
      g_assert_cmpint (s->start_ns, ==, (int64_t) AT (want[i][0]));
      g_assert_cmpint (s->end_ns, ==, (int64_t) AT (want[i][1]));
      g_assert_cmpuint (s->device, ==, 0);
      g_assert_cmpuint (s->stream, ==, 7);
      g_assert_cmpstr (pp_cupti_name (c, s->name_id), ==, names[i]);
      g_assert_cmpint (s->rank, ==, i < 2 ? 3 : 4);
      g_assert_cmpint (s->stage, ==, i < 2 ? 1 : 2);
      g_assert_cmpint (s->microbatch, ==, i < 2 ? 0 : 1);
      g_assert_cmpint (s->step, ==, 2);
      g_assert_cmpint (s->peer_rank, ==, -1);
    }
  g_array_free (ls, TRUE);

  /* every device record is there once, the blocks' GPU times are theirs */
  GArray *ks = sink_find (k, c, PP_SPAN_KERNEL, NULL);
  g_assert_cmpuint (ks->len, ==, 5);
  g_array_free (ks, TRUE);
  int64_t gs = 0, ge = 0;
  g_assert_true (pp_cupti_block_gpu_time (c, a, &gs, &ge, NULL));
  g_assert_cmpint (gs, ==, (int64_t) AT (0));
  g_assert_cmpint (ge, ==, (int64_t) AT (16));
  g_assert_true (pp_cupti_block_gpu_time (c, b, &gs, &ge, NULL));
  g_assert_cmpint (gs, ==, (int64_t) AT (20));
  g_assert_cmpint (ge, ==, (int64_t) AT (27.5));
  PpCuptiStats st;
  pp_cupti_get_stats (c, &st);
  g_assert_cmpuint (st.launches, ==, 3);
  g_assert_cmpuint (st.spans, ==, 6);
#undef AT
  pp_cupti_free (c);
  sink_free (k);
}

/* A busy pipeline: 10,000 kernels queued back to back behind the first,
 * their calls long returned when each starts, make one LAUNCH (the
 * first's), whichever record comes first. */
static void
test_launches_queued (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);
  uint64_t T = now () + 100 * MS_NS;
  for (int order = 0; order < 2; order++)
    {
      uint64_t t0 = T + (uint64_t) order * SEC_NS;
      uint32_t corr[10000];
      pp_cupti_push_block (c, 0, order, PP_SPAN_F, 0);
      for (int i = 0; i < 10000; i++)
        corr[i] = fake_cupti_api_call_at (false, LAUNCH_RT, t0 + (uint64_t) i * 1000,
                                          t0 + (uint64_t) i * 1000 + 500);
      pp_cupti_pop_block (c);
      if (order == 0)
        flush (c);
      for (int i = 0; i < 10000; i++)   /* 20 us each, from 1 ms on: queued */
        fake_cupti_kernel (corr[i], "q", t0 + MS_NS + (uint64_t) i * 20000,
                           t0 + MS_NS + (uint64_t) (i + 1) * 20000);
      flush (c);
      flush (c);
    }
  GArray *ls = sink_find (k, c, PP_SPAN_LAUNCH, NULL);
  g_assert_cmpuint (ls->len, ==, 2);   /* the first kernel of each burst */
  g_assert_cmpint (g_array_index (ls, PpSpan, 0).end_ns, ==, (int64_t) T + 500);
  g_array_free (ls, TRUE);
  pp_cupti_free (c);
  sink_free (k);
}

/* Block times are kept for the last PP_CUPTI_MAX_BLOCKS blocks; an evicted
 * block says so, apart from a block without records. */
static void
test_blocks_kept (void)
{
  fake_cupti_reset ();
  Sink *k = sink_new ();
  PpCupti *c = start (k, 0);

  uint64_t first = pp_cupti_push_block (c, 0, 0, PP_SPAN_F, 0);
  pp_cupti_pop_block (c);
  g_assert_true (pp_cupti_block_kept (c, first));
  g_assert_false (pp_cupti_block_gpu_time (c, first, NULL, NULL, NULL));   /* no records */
  uint64_t last = first;
  for (int i = 0; i < PP_CUPTI_MAX_BLOCKS; i++)
    {
      last = pp_cupti_push_block (c, 0, i % 64, PP_SPAN_F, 0);
      pp_cupti_pop_block (c);
    }
  g_assert_cmpuint (last, ==, first + PP_CUPTI_MAX_BLOCKS);
  g_assert_false (pp_cupti_block_kept (c, first));
  g_assert_true (pp_cupti_block_kept (c, first + 1));
  g_assert_true (pp_cupti_block_kept (c, last));
  g_assert_false (pp_cupti_block_kept (c, 0));
  g_assert_false (pp_cupti_block_kept (NULL, last));
  pp_cupti_free (c);
  sink_free (k);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cupti-fake/tags", test_tags);
  g_test_add_func ("/cupti-fake/late-tags", test_late_tags);
  g_test_add_func ("/cupti-fake/request-flush", test_request_flush);
  g_test_add_func ("/cupti-fake/drops", test_drops);
  g_test_add_func ("/cupti-fake/every-api-call", test_every_api_call);
  g_test_add_func ("/cupti-fake/refused", test_refused);
  g_test_add_func ("/cupti-fake/stop", test_stop);
  g_test_add_func ("/cupti-fake/threads", test_threads);
  g_test_add_func ("/cupti-fake/blocked-thread", test_blocked_thread);
  g_test_add_func ("/cupti-fake/many-waiting", test_many_waiting);
  g_test_add_func ("/cupti-fake/blocks-kept", test_blocks_kept);
  g_test_add_func ("/cupti-fake/launches", test_launches);
  g_test_add_func ("/cupti-fake/launches-queued", test_launches_queued);
  return g_test_run ();
}
