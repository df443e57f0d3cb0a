/* The live endpoint's latency: a span written and flushed by the job until a
 * viewer attached over the Unix socket has it (the claim test-live made
 * once, "median under 100 ms", which a loaded machine decided, not the
 * server).  RUNS runs of N spans, one at a time, 2 ms apart; prints each
 * run's median and the median of the medians, and the load average first.
 * Target: a median under 100 ms.  Plain C, no GLib; exits non-zero only
 * when a span does not arrive, or arrives other than as written. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-live.h"
#include "pp-trace.h"
#include "bench-util.h"

#define RUNS 5
#define N    50

static int
fail (const char *what, const PpError *err)
{
  fprintf (stderr, "bench-live: %s: %s\n", what, err->msg);
  return 1;
}

/* The next item that is not an idle tick; a minute at most. */
static PpStatus
next_item (PpLiveClient *c, PpTraceItem *item, PpError *err)
{
  double until = bench_now_ms () + 60000;
  PpStatus st;
  do
    st = pp_live_client_next (c, item, 100, err);
  while (st == PP_OK && item->type == PP_TRACE_ITEM_END && item->need_more && bench_now_ms () < until);
  return st;
}

/* One run: the median latency in ms into *median, or non-zero. */
static int
one_run (double *median)
{
  PpLiveConfig cfg = { .no_register = 1 };
  PpError err = { 0 };
  PpLiveServer *s = pp_live_server_new (&cfg, &err);
  if (s == NULL)
    return fail ("server", &err);
  PpTraceWriter *w = pp_trace_writer_new_callback (pp_live_server_write, s, PP_TRACE_NATIVE, &err);
  if (w == NULL)
    return fail ("writer", &err);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  strcpy (d.schedule, "1F1B");
  strcpy (d.backend, "cpu");
  d.n_ranks = 1;
  d.n_microbatches = 1;
  d.n_virtual = 1;
  if (pp_trace_write_description (w, &d, &err) != PP_OK || pp_trace_writer_flush (w, &err) != PP_OK)
    return fail ("description", &err);
  PpLiveClient *c = pp_live_client_connect (pp_live_server_socket_path (s), NULL, &err);
  if (c == NULL)
    return fail ("attach", &err);
  PpTraceItem item;
  if (next_item (c, &item, &err) != PP_OK || item.type != PP_TRACE_ITEM_DESCRIPTION)
    return fail ("the description", &err);

  double lat[N];
  for (int k = 0; k < N; k++)
    {
      PpSpan sp;
      memset (&sp, 0, sizeof sp);
      sp.start_ns = 1000000 + (int64_t) k * 1000;
      sp.end_ns = sp.start_ns + 500;
      sp.device = 0xffff;
      sp.peer_rank = -1;
      double t0 = bench_now_ms ();
      if (pp_trace_write_spans (w, &sp, 1, &err) != PP_OK || pp_trace_writer_flush (w, &err) != PP_OK)
        return fail ("write", &err);
      if (next_item (c, &item, &err) != PP_OK || item.type != PP_TRACE_ITEM_SPAN
          || item.span.start_ns != sp.start_ns)
        return fail ("a span did not arrive as written", &err);
      lat[k] = bench_now_ms () - t0;
      struct timespec gap = { 0, 2000000 };
      nanosleep (&gap, NULL);
    }
  *median = bench_median (lat, N);
  printf ("  run: median %.3f ms, max %.3f ms\n", *median, lat[N - 1]);
  pp_live_client_free (c);
  pp_trace_writer_close (w, NULL);
  pp_live_server_free (s);
  return 0;
}

int
main (void)
{
  double la[3] = { 0 };
  if (getloadavg (la, 3) == 3)
    printf ("load average: %.2f %.2f %.2f (other load distorts every number)\n", la[0], la[1], la[2]);
  printf ("live latency, write + flush until the viewer has the span, %d spans a run:\n", N);
  double med[RUNS];
  for (int r = 0; r < RUNS; r++)
    if (one_run (&med[r]) != 0)
      return 1;
  double m = bench_median (med, RUNS);
  printf ("median of %d runs: %.3f ms (target: under 100 ms)\n", RUNS, m);
  return 0;
}
