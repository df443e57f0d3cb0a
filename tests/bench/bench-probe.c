/* The probe's hot path and its loss bound.
 *
 * (1) One thread: ns per pp_probe_record_span, median of RUNS runs of N
 *     records, drain running, a sink that only counts.  Target: under 50 ns.
 * (2) 8 threads on however many cores there are:
 *     flat out — each thread records as fast as it can for SECONDS; far past
 *       the bound, so drops are expected and must add up exactly;
 *     paced — each thread records in bursts at half the bound (capped), where
 *       the documented contract says nothing may be lost.
 *     For ring sizes 4096, 65536 and 1M at the default 10 ms drain period.
 * Plain C, no GLib.  Exits non-zero when a count does not add up or the
 * paced run drops anything. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-probe.h"
#include "bench-util.h"

#define RUNS     5
#define N_SINGLE 10000000
#define THREADS  8
#define SECONDS  1.0

typedef struct {
  uint64_t spans;
  uint64_t dropped_reported;
  uint64_t last[THREADS + 1];   /* latest total per rank; [THREADS] is any other */
} CountSink;

static void
count_spans (void *user, const PpSpan *s, size_t n)
{
  (void) s;
  ((CountSink *) user)->spans += n;
}

static void
count_dropped (void *user, int32_t rank, uint64_t total)
{
  /* totals are cumulative per rank: keep the sum of the latest ones */
  CountSink *k = user;
  int i = rank >= 0 && rank < THREADS ? rank : THREADS;
  k->dropped_reported += total - k->last[i];
  k->last[i] = total;
}

static PpProbe *
probe_new (CountSink *k, uint32_t capacity)
{
  PpProbeConfig cfg = {
    .ring_capacity = capacity,
    .sink = { k, count_spans, NULL, count_dropped },
  };
  PpError err = { 0 };
  PpProbe *p = pp_probe_new (&cfg, &err);
  if (p == NULL)
    {
      fprintf (stderr, "bench-probe: %s\n", err.msg);
      exit (1);
    }
  return p;
}

/* ---- (1) single thread ------------------------------------------------- */

static double
single_thread (uint32_t capacity, uint64_t *dropped_out)
{
  CountSink k = { 0 };
  PpProbe *p = probe_new (&k, capacity);
  PpSpan s = { .rank = 0, .stage = 0, .kind = PP_SPAN_F, .device = 0xffff, .peer_rank = -1 };
  double ns[RUNS];

  pp_probe_record_span (p, &s);  /* first record allocates the ring: not timed */
  pp_probe_flush (p, NULL);
  for (int r = 0; r < RUNS; r++)
    {
      int64_t t0 = pp_probe_now_ns ();
      for (int i = 0; i < N_SINGLE; i++)
        {
          s.microbatch = i;
          s.start_ns = i;
          pp_probe_record_span (p, &s);
        }
      int64_t t1 = pp_probe_now_ns ();
      ns[r] = (double) (t1 - t0) / N_SINGLE;
      pp_probe_flush (p, NULL);
    }
  *dropped_out = pp_probe_dropped (p);
  uint64_t recorded = 1 + (uint64_t) RUNS * N_SINGLE;
  pp_probe_free (p);
  if (k.spans + *dropped_out != recorded || k.dropped_reported != *dropped_out)
    {
      fprintf (stderr, "bench-probe: single thread: %llu delivered + %llu dropped != %llu\n",
               (unsigned long long) k.spans, (unsigned long long) *dropped_out,
               (unsigned long long) recorded);
      exit (1);
    }
  qsort (ns, RUNS, sizeof ns[0], bench_cmp_double);
  return ns[RUNS / 2];
}

/* ---- (2) many threads -------------------------------------------------- */

typedef struct {
  PpProbe           *probe;
  pthread_barrier_t *start;
  int                rank;
  double             seconds;
  uint64_t           per_ms;   /* 0: flat out; else records per 1 ms burst */
  uint64_t           recorded;
} Worker;

static void *
worker_main (void *data)
{
  Worker *w = data;
  PpSpan s = { .rank = w->rank, .stage = w->rank, .kind = PP_SPAN_F, .device = 0xffff,
               .peer_rank = -1 };
  pp_probe_record_span (w->probe, &s);  /* registers the ring before the clock starts */
  w->recorded = 1;
  pthread_barrier_wait (w->start);

  int64_t t0 = pp_probe_now_ns ();
  int64_t end = t0 + (int64_t) (w->seconds * 1e9);
  if (w->per_ms == 0)
    {
      for (;;)
        {
          for (int i = 0; i < 1024; i++)
            {
              s.microbatch++;
              pp_probe_record_span (w->probe, &s);
            }
          w->recorded += 1024;
          if (pp_probe_now_ns () >= end)
            break;
        }
    }
  else
    {
      int64_t next = t0;
      while (next < end)
        {
          for (uint64_t i = 0; i < w->per_ms; i++)
            {
              s.microbatch++;
              pp_probe_record_span (w->probe, &s);
            }
          w->recorded += w->per_ms;
          next += 1000000;
          struct timespec ts = { .tv_sec = next / 1000000000, .tv_nsec = next % 1000000000 };
          clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
    }
  return NULL;
}

typedef struct {
  uint64_t recorded, delivered, dropped, dropped_reported;
  double   seconds;
} Result;

static Result
many_threads (uint32_t capacity, uint64_t per_ms)
{
  CountSink k = { 0 };
  PpProbe *p = probe_new (&k, capacity);
  pthread_t t[THREADS];
  Worker w[THREADS];
  pthread_barrier_t start;
  Result res = { 0 };

  pthread_barrier_init (&start, NULL, THREADS + 1);
  for (int i = 0; i < THREADS; i++)
    {
      w[i] = (Worker) { .probe = p, .start = &start, .rank = i, .seconds = SECONDS,
                        .per_ms = per_ms };
      pthread_create (&t[i], NULL, worker_main, &w[i]);
    }
  pthread_barrier_wait (&start);
  int64_t t0 = pp_probe_now_ns ();
  for (int i = 0; i < THREADS; i++)
    {
      pthread_join (t[i], NULL);
      res.recorded += w[i].recorded;
    }
  res.seconds = (pp_probe_now_ns () - t0) / 1e9;
  res.dropped = pp_probe_dropped (p);
  pp_probe_free (p);   /* final drain: delivered and the drop totals are final */
  res.delivered = k.spans;
  res.dropped_reported = k.dropped_reported;
  pthread_barrier_destroy (&start);
  return res;
}

int
main (void)
{
  int bad = 0;
  const double period_s = PP_PROBE_DEFAULT_DRAIN_PERIOD_NS / 1e9;

  printf ("(1) one thread, %d records, median of %d runs, drain running, counting sink\n",
          N_SINGLE, RUNS);
  {
    int64_t t0 = pp_probe_now_ns ();
    volatile int64_t sink = 0;
    for (int i = 0; i < 1000000; i++)
      sink += pp_probe_now_ns ();
    double now_ns = (pp_probe_now_ns () - t0) / 1e6;
    uint64_t d_big, d_def;
    double big = single_thread (1u << 24, &d_big);
    double def = single_thread (PP_PROBE_DEFAULT_RING_CAPACITY, &d_def);
    printf ("  %-44s %8s %12s\n", "", "ns/rec", "dropped");
    printf ("  %-44s %8.2f %12llu\n", "ring 16M (never full: the queued path)", big,
            (unsigned long long) d_big);
    printf ("  %-44s %8.2f %12llu\n", "ring 65536 (default; full most of the time)", def,
            (unsigned long long) d_def);
    printf ("  %-44s %8.2f\n", "for scale: pp_probe_now_ns ()", now_ns);
    if (big >= 50)
      {
        printf ("  SLOW: %.2f ns per record, target under 50\n", big);
        bad = 1;
      }
  }

  static const uint32_t caps[] = { 4096, 65536, 1u << 20 };
  for (int mode = 0; mode < 2; mode++)
    {
      printf ("\n(2%c) %d threads %s, %.0f s, drain period %.0f ms\n", mode ? 'b' : 'a', THREADS,
              mode ? "paced at half the bound (at most 2 M/s each)" : "flat out", SECONDS,
              period_s * 1e3);
      printf ("  %8s %14s %12s %12s %12s %7s %13s %13s\n", "ring", "bound/thread", "recorded",
              "delivered", "dropped", "drop%", "offered/s", "delivered/s");
      for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
        {
          double bound = caps[c] / period_s;       /* records/s per thread */
          uint64_t per_ms = 0;
          if (mode == 1)
            {
              double rate = bound / 2 < 2e6 ? bound / 2 : 2e6;
              per_ms = (uint64_t) (rate / 1000);
            }
          Result r = many_threads (caps[c], per_ms);
          printf ("  %8u %12.2fM/s %12llu %12llu %12llu %6.2f%% %11.2fM %11.2fM\n", caps[c],
                  bound / 1e6, (unsigned long long) r.recorded, (unsigned long long) r.delivered,
                  (unsigned long long) r.dropped, 100.0 * r.dropped / r.recorded,
                  r.recorded / r.seconds / 1e6, r.delivered / r.seconds / 1e6);
          if (r.delivered + r.dropped != r.recorded || r.dropped_reported != r.dropped)
            {
              printf ("  MISMATCH: delivered + dropped != recorded, or sink told %llu drops\n",
                      (unsigned long long) r.dropped_reported);
              bad = 1;
            }
          if (mode == 1 && r.dropped != 0)
            {
              printf ("  LOSS under the bound\n");
              bad = 1;
            }
        }
    }

  printf ("\nbound: nothing is lost while no thread records more than ring_capacity spans\n"
          "between two drain visits (drain period + one pass), i.e. a sustained\n"
          "ring_capacity / drain_period records/s per thread; past it, drops are counted\n"
          "(delivered + dropped == recorded, checked above).\n");
  return bad;
}
