/* The probe's recording API: every record reaches the sink once and in
 * per-thread order, or is dropped and counted; flush, thread exit and free
 * lose nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <glib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-probe.h"
#include "pp-schedstat.h"

#define N_THREADS 8
#define MAX_RANKS 16

/* A sink that checks what it gets.  Called only from the drain thread; the
 * test reads it after pp_probe_flush or pp_probe_free, which order the two. */
typedef struct {
  PpProbe *probe;              /* for the flush-from-sink test */
  guint    sleep_us;           /* a slow sink */
  gint     stuck;              /* a stuck sink: blocks until the test clears it */
  guint64  spans;
  guint64  counters;
  gint64   next_mb[MAX_RANKS]; /* per rank: lowest microbatch still allowed */
  guint64  per_rank[MAX_RANKS];
  guint64  order_errors;
  guint64  dropped_total[MAX_RANKS + 1];  /* [MAX_RANKS] is rank -1 */
  guint64  dropped_calls;
  gboolean dropped_decreased;
  gboolean strict;             /* no gaps allowed: exactly next_mb */
  PpStatus flush_from_sink;
  gboolean try_flush;
  GThread *drain_thread;       /* the thread that called us; must stay one */
  gboolean other_thread;
} Sink;

static void
sink_spans (void *user, const PpSpan *s, size_t n)
{
  Sink *k = user;
  GThread *self = g_thread_self ();
  if (k->drain_thread == NULL)
    k->drain_thread = self;
  else if (k->drain_thread != self)
    k->other_thread = TRUE;
  g_assert_cmpuint (n, >, 0);
  for (size_t i = 0; i < n; i++)
    {
      int r = s[i].rank;
      g_assert_cmpint (r, >=, 0);
      g_assert_cmpint (r, <, MAX_RANKS);
      if (k->strict ? s[i].microbatch != k->next_mb[r] : s[i].microbatch < k->next_mb[r])
        k->order_errors++;
      k->next_mb[r] = s[i].microbatch + 1;
      k->per_rank[r]++;
    }
  k->spans += n;
  if (k->try_flush)
    {
      k->flush_from_sink = pp_probe_flush (k->probe, NULL);
      k->try_flush = FALSE;
    }
  if (k->sleep_us)
    g_usleep (k->sleep_us);
  while (g_atomic_int_get (&k->stuck))
    g_usleep (1000);
}

static void
sink_counters (void *user, const PpCounter *c, size_t n)
{
  Sink *k = user;
  g_assert_cmpuint (n, >, 0);
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat (c[i].value, ==, (double) c[i].step);
  k->counters += n;
}

static void
sink_dropped (void *user, int32_t rank, uint64_t total)
{
  Sink *k = user;
  int i = rank == -1 ? MAX_RANKS : rank;
  g_assert_cmpint (i, >=, 0);
  g_assert_cmpint (i, <=, MAX_RANKS);
  if (total < k->dropped_total[i])
    k->dropped_decreased = TRUE;
  k->dropped_total[i] = total;
  k->dropped_calls++;
}

static guint64
sink_dropped_sum (const Sink *k)
{
  guint64 sum = 0;
  for (int i = 0; i <= MAX_RANKS; i++)
    sum += k->dropped_total[i];
  return sum;
}

static PpProbe *
probe_new (Sink *k, guint32 capacity, gint64 period_ns)
{
  PpProbeConfig cfg = {
    .ring_capacity = capacity,
    .drain_period_ns = period_ns,
    .sink = { k, sink_spans, sink_counters, sink_dropped },
  };
  PpError err = { 0 };
  PpProbe *p = pp_probe_new (&cfg, &err);
  g_assert_nonnull (p);
  k->probe = p;
  return p;
}

static PpSpan
span (int rank, int mb)
{
  return (PpSpan) {
    .start_ns = pp_probe_now_ns (), .end_ns = pp_probe_now_ns () + 1,
    .rank = rank, .stage = rank, .microbatch = mb, .kind = PP_SPAN_F,
    .device = 0xffff, .peer_rank = -1,
  };
}

typedef struct {
  PpProbe *probe;
  int      rank;
  int      k;
  guint64  recorded;   /* record returned true */
  guint64  refused;    /* record returned false */
} Worker;

static int worker_yield_every;  /* > 0: yield the CPU every so many records */

static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  for (int i = 0; i < w->k; i++)
    {
      PpSpan s = span (w->rank, i);
      if (pp_probe_record_span (w->probe, &s))
        w->recorded++;
      else
        w->refused++;
      if (worker_yield_every > 0 && i % worker_yield_every == 0)
        g_thread_yield ();
    }
  return NULL;
}

static void
run_workers (PpProbe *p, Worker *w, int n, int k)
{
  GThread *t[N_THREADS];
  g_assert_cmpint (n, <=, N_THREADS);
  for (int i = 0; i < n; i++)
    {
      w[i] = (Worker) { .probe = p, .rank = i, .k = k };
      t[i] = g_thread_new ("recorder", worker_main, &w[i]);
    }
  for (int i = 0; i < n; i++)
    g_thread_join (t[i]);
}

/* 8 threads, rings big enough: every span arrives exactly once, in order. */
static void
test_no_loss (void)
{
  const int K = 100000;
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 1u << 17, 1000000);
  Worker w[N_THREADS];

  run_workers (p, w, N_THREADS, K);
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);

  g_assert_cmpuint (k.spans, ==, (guint64) N_THREADS * K);
  for (int i = 0; i < N_THREADS; i++)
    {
      g_assert_cmpuint (w[i].recorded, ==, K);
      g_assert_cmpuint (k.per_rank[i], ==, K);
      g_assert_cmpint (k.next_mb[i], ==, K);
    }
  g_assert_cmpuint (k.order_errors, ==, 0);
  g_assert_cmpuint (pp_probe_dropped (p), ==, 0);
  g_assert_cmpuint (k.dropped_calls, ==, 0);
  g_assert_false (k.other_thread);
  g_assert_true (k.drain_thread != g_thread_self ());
  pp_probe_free (p);
  g_assert_cmpuint (k.spans, ==, (guint64) N_THREADS * K);
}

/* Tiny rings, slow sink: drops happen, each is counted, none is silent. */
static void
test_drops_counted (void)
{
  const int K = 20000;
  Sink k = { .sleep_us = 200 };
  PpProbe *p = probe_new (&k, 16, 1000000);
  Worker w[N_THREADS];

  worker_yield_every = 64;  /* let the drain in now and then: drops and deliveries mix */
  run_workers (p, w, N_THREADS, K);
  worker_yield_every = 0;
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);

  guint64 refused = 0;
  for (int i = 0; i < N_THREADS; i++)
    {
      refused += w[i].refused;
      g_assert_cmpuint (w[i].recorded + w[i].refused, ==, K);
      /* per rank: delivered + dropped (as the sink was told) == recorded */
      g_assert_cmpuint (k.per_rank[i] + k.dropped_total[i], ==, K);
      g_assert_cmpuint (k.per_rank[i], ==, w[i].recorded);
    }
  g_assert_cmpuint (refused, >, 0);
  g_assert_cmpuint (pp_probe_dropped (p), ==, refused);
  g_assert_cmpuint (sink_dropped_sum (&k), ==, refused);
  g_assert_cmpuint (k.dropped_total[MAX_RANKS], ==, 0);
  g_assert_cmpuint (k.spans + pp_probe_dropped (p), ==, (guint64) N_THREADS * K);
  g_assert_cmpuint (k.order_errors, ==, 0);
  g_assert_false (k.dropped_decreased);
  pp_probe_free (p);
  g_test_message ("recorded %d, delivered %" G_GUINT64_FORMAT ", dropped %" G_GUINT64_FORMAT,
                  N_THREADS * K, k.spans, refused);
}

/* Flush delivers everything recorded before it; the drain period (1 h here)
 * would not. */
static void
test_flush (void)
{
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 1024, 3600 * G_GINT64_CONSTANT (1000000000));
  int mb = 0;

  for (int round = 1; round <= 20; round++)
    {
      for (int i = 0; i < round * 37; i++)
        {
          PpSpan s = span (3, mb++);
          g_assert_true (pp_probe_record_span (p, &s));
          PpCounter c = { .time_ns = pp_probe_now_ns (), .value = round, .rank = 3, .step = round };
          g_assert_true (pp_probe_record_counter (p, &c));
        }
      g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
      g_assert_cmpuint (k.spans, ==, (guint64) mb);
      g_assert_cmpuint (k.counters, ==, (guint64) mb);
    }
  /* A flush with nothing pending returns too. */
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
  g_assert_cmpuint (k.order_errors, ==, 0);
  pp_probe_free (p);
}

/* Threads record and exit before anything is drained: nothing is lost, and
 * their rings are freed (ASan would report the leak otherwise). */
static void
test_thread_exit (void)
{
  const int K = 5000;
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 8192, 3600 * G_GINT64_CONSTANT (1000000000));
  Worker w[N_THREADS];

  for (int round = 0; round < 3; round++)
    {
      run_workers (p, w, N_THREADS, K);  /* all joined: the threads are gone */
      g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
      g_assert_cmpuint (k.spans, ==, (guint64) (round + 1) * N_THREADS * K);
      for (int i = 0; i < N_THREADS; i++)
        k.next_mb[i] = 0;   /* the next round's threads start again at 0 */
    }
  g_assert_cmpuint (k.order_errors, ==, 0);
  g_assert_cmpuint (pp_probe_dropped (p), ==, 0);
  pp_probe_free (p);
}

/* Thread exit with records pending, then free with no flush in between. */
static void
test_thread_exit_then_free (void)
{
  const int K = 3000;
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 4096, 3600 * G_GINT64_CONSTANT (1000000000));
  Worker w[4];

  run_workers (p, w, 4, K);
  pp_probe_free (p);
  g_assert_cmpuint (k.spans, ==, 4 * K);
  g_assert_cmpuint (k.order_errors, ==, 0);
}

/* Free with records pending (from a live thread, the caller) delivers them. */
static void
test_free_delivers (void)
{
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 4096, 3600 * G_GINT64_CONSTANT (1000000000));
  for (int i = 0; i < 4000; i++)
    {
      PpSpan s = span (1, i);
      g_assert_true (pp_probe_record_span (p, &s));
    }
  PpCounter c = { .value = 7, .rank = 1, .step = 7 };
  g_assert_true (pp_probe_record_counter (p, &c));
  g_assert_cmpuint (k.spans, ==, 0);
  pp_probe_free (p);
  g_assert_cmpuint (k.spans, ==, 4000);
  g_assert_cmpuint (k.counters, ==, 1);
  g_assert_cmpuint (k.order_errors, ==, 0);
}

static void
test_null (void)
{
  PpSpan s = span (0, 0);
  PpCounter c = { 0 };
  g_assert_false (pp_probe_record_span (NULL, &s));
  g_assert_false (pp_probe_record_counter (NULL, &c));
  g_assert_cmpint (pp_probe_flush (NULL, NULL), ==, PP_OK);
  g_assert_cmpuint (pp_probe_dropped (NULL), ==, 0);
  pp_probe_free (NULL);

  /* A probe with no sink at all: records are accepted and discarded. */
  PpProbe *p = pp_probe_new (NULL, NULL);
  g_assert_nonnull (p);
  g_assert_false (pp_probe_record_span (p, NULL));
  g_assert_true (pp_probe_record_span (p, &s));
  g_assert_true (pp_probe_record_counter (p, &c));
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
  PpProbeConfig cfg;
  pp_probe_get_config (p, &cfg);
  g_assert_cmpuint (cfg.ring_capacity, ==, PP_PROBE_DEFAULT_RING_CAPACITY);
  g_assert_cmpint (cfg.drain_period_ns, ==, PP_PROBE_DEFAULT_DRAIN_PERIOD_NS);
  pp_probe_free (p);
}

static void
test_bad_config (void)
{
  static const PpProbeConfig bad[] = {
    { .ring_capacity = 1000 },
    { .ring_capacity = 1 },
    { .ring_capacity = 1u << 31 },
    { .counter_ring_capacity = 3 },
    { .drain_period_ns = -1 },
    { .flush_timeout_ns = -5 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      PpError err = { 0 };
      g_assert_null (pp_probe_new (&bad[i], &err));
      g_assert_cmpint (err.status, ==, PP_EINVAL);
      g_assert_cmpuint (strlen (err.msg), >, 0);
      g_assert_null (strchr (err.msg, '\n'));
    }
  g_assert_null (pp_probe_new (&bad[0], NULL));  /* no error out: still no crash */
}

/* One thread, two probes, and a probe freed while the thread lives on. */
static void
test_two_probes (void)
{
  Sink a = { .strict = TRUE }, b = { .strict = TRUE };
  PpProbe *pa = probe_new (&a, 64, 3600 * G_GINT64_CONSTANT (1000000000));
  PpProbe *pb = probe_new (&b, 64, 3600 * G_GINT64_CONSTANT (1000000000));
  for (int i = 0; i < 50; i++)
    {
      PpSpan s = span (0, i);
      g_assert_true (pp_probe_record_span (pa, &s));
      s.rank = 1;
      g_assert_true (pp_probe_record_span (pb, &s));
    }
  pp_probe_free (pa);
  g_assert_cmpuint (a.spans, ==, 50);

  /* pb still works; a third probe on this thread reclaims pa's ring. */
  Sink c = { .strict = TRUE };
  PpProbe *pc = probe_new (&c, 64, 3600 * G_GINT64_CONSTANT (1000000000));
  for (int i = 50; i < 60; i++)
    {
      PpSpan s = span (1, i);
      g_assert_true (pp_probe_record_span (pb, &s));
      s.rank = 2;
      s.microbatch = i - 50;
      g_assert_true (pp_probe_record_span (pc, &s));
    }
  pp_probe_free (pb);
  pp_probe_free (pc);
  g_assert_cmpuint (b.spans, ==, 60);
  g_assert_cmpuint (c.spans, ==, 10);
  g_assert_cmpuint (a.order_errors + b.order_errors + c.order_errors, ==, 0);
}

/* A full ring drops, and the drop is attributed to the record's rank. */
static void
test_drop_attribution (void)
{
  Sink k = { 0 };
  PpProbe *p = probe_new (&k, 8, 3600 * G_GINT64_CONSTANT (1000000000));
  int ok = 0;
  for (int i = 0; i < 8; i++)
    {
      PpSpan s = span (2, i);
      ok += pp_probe_record_span (p, &s);
    }
  g_assert_cmpint (ok, ==, 8);
  PpSpan s = span (5, 8);
  g_assert_false (pp_probe_record_span (p, &s));
  g_assert_false (pp_probe_record_span (p, &s));
  s.rank = 6;
  g_assert_false (pp_probe_record_span (p, &s));
  g_assert_cmpuint (pp_probe_dropped (p), ==, 3);
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
  g_assert_cmpuint (k.spans, ==, 8);
  g_assert_cmpuint (k.dropped_total[5], ==, 2);
  g_assert_cmpuint (k.dropped_total[6], ==, 1);
  g_assert_cmpuint (k.dropped_total[2], ==, 0);
  /* room again after the drain */
  g_assert_true (pp_probe_record_span (p, &s));
  pp_probe_free (p);
  g_assert_cmpuint (k.spans, ==, 9);
}

/* A stuck sink: flush gives up after its bound with an error, never hangs.
 * The sink stays stuck until flush has returned, so a flush that waited for
 * it would hang (the test's timeout ends it), however loaded the machine. */
static void
test_flush_timeout (void)
{
  Sink k = { .stuck = 1 };
  PpProbeConfig cfg = {
    .drain_period_ns = 3600 * G_GINT64_CONSTANT (1000000000),
    .flush_timeout_ns = 50 * 1000000,
    .sink = { &k, sink_spans, sink_counters, sink_dropped },
  };
  PpProbe *p = pp_probe_new (&cfg, NULL);
  PpSpan s = span (0, 0);
  g_assert_true (pp_probe_record_span (p, &s));
  PpError err = { 0 };
  g_assert_cmpint (pp_probe_flush (p, &err), ==, PP_EIO);
  g_assert_nonnull (strstr (err.msg, "timed out"));
  g_atomic_int_set (&k.stuck, 0);
  pp_probe_free (p);
  g_assert_cmpuint (k.spans, ==, 1);
}

/* A sink may not flush its own probe: refused, not deadlocked. */
static void
test_flush_from_sink (void)
{
  Sink k = { .try_flush = TRUE, .flush_from_sink = PP_OK };
  PpProbe *p = probe_new (&k, 64, 3600 * G_GINT64_CONSTANT (1000000000));
  PpSpan s = span (0, 0);
  g_assert_true (pp_probe_record_span (p, &s));
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
  g_assert_cmpint (k.flush_from_sink, ==, PP_EINVAL);
  pp_probe_free (p);
}

/* A forked child (a data-loader worker) may record, but never waits on the
 * parent's drain or lock; the parent is unaffected. */
static void
test_fork (void)
{
  Sink k = { .strict = TRUE };
  PpProbe *p = probe_new (&k, 64, 3600 * G_GINT64_CONSTANT (1000000000));
  PpSpan s = span (0, 0);
  g_assert_true (pp_probe_record_span (p, &s));
  pid_t pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      int rc = 0;
      for (int i = 0; i < 200; i++)   /* fills the copy of the ring: drops, no crash */
        pp_probe_record_span (p, &s);
      if (pp_probe_flush (p, NULL) != PP_EUNSUPPORTED)
        rc = 1;
      pp_probe_free (p);
      _exit (rc);
    }
  int status = 0;
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  s.microbatch = 1;
  g_assert_true (pp_probe_record_span (p, &s));
  g_assert_cmpint (pp_probe_flush (p, NULL), ==, PP_OK);
  g_assert_cmpuint (k.spans, ==, 2);
  pp_probe_free (p);
}

/* Nanoseconds of CLOCK_MONOTONIC: an interval on it lies within the same
 * interval read around it on GLib's monotonic clock (microseconds), so the
 * check holds however long a loaded machine makes the sleep. */
static void
test_now (void)
{
  gint64 g0 = g_get_monotonic_time ();
  gint64 a = pp_probe_now_ns ();
  g_usleep (2000);
  gint64 b = pp_probe_now_ns ();
  gint64 g1 = g_get_monotonic_time ();
  g_assert_cmpint (b - a, >=, 2000000);
  g_assert_cmpint (b - a, <=, (g1 - g0 + 1) * 1000);
}

/* The thread's run-queue delay: read again and again through one
 * descriptor (pread at 0 rereads), never decreasing; and while a second
 * thread of ours spins on the same single CPU this thread is pinned to,
 * this thread waits for the CPU and the delay grows. */
static volatile int spin_stop;

static void *
spin_on (void *arg)
{
  cpu_set_t *set = arg;
  pthread_setaffinity_np (pthread_self (), sizeof *set, set);
  while (!spin_stop)
    ;
  return NULL;
}

static void
test_schedstat (void)
{
  PpSchedstat st;
  if (pp_schedstat_open (&st) != 0)
    {
      g_test_skip ("this kernel offers no /proc/thread-self/schedstat");
      return;
    }
  int64_t last = pp_schedstat_run_delay_ns (&st);
  g_assert_cmpint (last, >=, 0);
  for (int i = 0; i < 1000; i++)
    {
      int64_t d = pp_schedstat_run_delay_ns (&st);
      g_assert_cmpint (d, >=, last);
      last = d;
    }
  /* Pin this thread and a spinner to one CPU: each runs only when the
   * other is preempted, so this thread's delay must grow while it asks
   * for the CPU over and over (sched_yield keeps it runnable). */
  cpu_set_t one;
  CPU_ZERO (&one);
  if (sched_getcpu () < 0)
    {
      pp_schedstat_close (&st);
      g_test_skip ("no sched_getcpu");
      return;
    }
  CPU_SET (sched_getcpu (), &one);
  cpu_set_t old;
  pthread_getaffinity_np (pthread_self (), sizeof old, &old);
  g_assert_cmpint (pthread_setaffinity_np (pthread_self (), sizeof one, &one), ==, 0);
  spin_stop = 0;
  pthread_t t;
  g_assert_cmpint (pthread_create (&t, NULL, spin_on, &one), ==, 0);
  int64_t before = pp_schedstat_run_delay_ns (&st);
  int64_t after = before;
  for (int i = 0; i < 200000 && after == before; i++)
    {
      for (volatile int k = 0; k < 10000; k++)
        ;
      after = pp_schedstat_run_delay_ns (&st);
    }
  spin_stop = 1;
  pthread_join (t, NULL);
  pthread_setaffinity_np (pthread_self (), sizeof old, &old);
  g_assert_cmpint (after, >, before);
  pp_schedstat_close (&st);
  g_assert_cmpint (pp_schedstat_run_delay_ns (&st), ==, -1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/probe/no-loss", test_no_loss);
  g_test_add_func ("/probe/drops-counted", test_drops_counted);
  g_test_add_func ("/probe/drop-attribution", test_drop_attribution);
  g_test_add_func ("/probe/flush", test_flush);
  g_test_add_func ("/probe/flush-timeout", test_flush_timeout);
  g_test_add_func ("/probe/flush-from-sink", test_flush_from_sink);
  g_test_add_func ("/probe/thread-exit", test_thread_exit);
  g_test_add_func ("/probe/thread-exit-then-free", test_thread_exit_then_free);
  g_test_add_func ("/probe/free-delivers", test_free_delivers);
  g_test_add_func ("/probe/two-probes", test_two_probes);
  g_test_add_func ("/probe/null", test_null);
  g_test_add_func ("/probe/bad-config", test_bad_config);
  g_test_add_func ("/probe/fork", test_fork);
  g_test_add_func ("/probe/now", test_now);
  g_test_add_func ("/probe/schedstat", test_schedstat);
  return g_test_run ();
}
