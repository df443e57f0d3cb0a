/* bench-span-rows: the Spans tab's cost on a big synthetic run.
 *
 * 1,000,000 blocks over 64 ranks (F and B, a step every 64 micro-batches):
 * the rows listed with no filter and with Find "B" and "F", sorted by
 * duration (longest first) and by idle gap, sorted again by every column
 * (a click on a header: the listed rows sorted, no listing), the histogram
 * counted, a line found by its block.  Prints each time (the median of 5)
 * and the rows' memory; the window's lines are made only when shown, and
 * a relist rewrites the few it shows, so this is what a click on a header
 * or a Find costs.  "before" is what a click on a header cost when it
 * listed again and counted the histogram (as a Find still does).  Never
 * part of the pass/fail suite.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-span-histogram.h"
#include "pp-span-rows.h"
#include "pp-timeline-model.h"
#include "bench-util.h"

#define N_SPANS 1000000
#define N_RANKS 64
#define N_RUNS  5

static double
time_build (PpSpanRows *rows, const PpTimelineModel *m, const PpTimelineFilter *f, PpSpanColumn c, int desc)
{
  double t[N_RUNS];
  pp_span_rows_set_order (rows, c, desc);
  for (int i = 0; i < N_RUNS; i++)
    {
      double a = bench_now_ms ();
      if (pp_span_rows_build (rows, m, f) != 0)
        {
          fprintf (stderr, "bench-span-rows: out of memory\n");
          exit (1);
        }
      t[i] = bench_now_ms () - a;
    }
  return bench_median (t, N_RUNS);
}

/* A click on a header: the listed rows sorted again by c. */
static double
time_sort (PpSpanRows *rows, const PpTimelineModel *m, PpSpanColumn c, int desc)
{
  double t[N_RUNS];
  for (int i = 0; i < N_RUNS; i++)
    {
      pp_span_rows_set_order (rows, c, desc);
      double a = bench_now_ms ();
      if (pp_span_rows_sort (rows, m) != 0)
        {
          fprintf (stderr, "bench-span-rows: could not sort again\n");
          exit (1);
        }
      t[i] = bench_now_ms () - a;
      pp_span_rows_set_order (rows, PP_SPAN_COL_START, 0);   /* from another order each time */
      pp_span_rows_sort (rows, m);
    }
  return bench_median (t, N_RUNS);
}

int
main (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  const int per_rank = N_SPANS / N_RANKS;
  for (int r = 0; r < N_RANKS; r++)
    {
      int64_t t = 1000000;
      for (int i = 0; i < per_rank; i++)
        {
          PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
          rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
          it.span.rank = r;
          it.span.stage = r;
          it.span.kind = (uint16_t) (i % 2 ? PP_SPAN_B : PP_SPAN_F);
          it.span.microbatch = (i / 2) % 64;
          it.span.step = i / 128;
          it.span.start_ns = t + (int64_t) (rng % 2000);
          it.span.end_ns = it.span.start_ns + 20000 + (int64_t) (rng % 30000);
          it.span.device = 0xffff;
          it.span.peer_rank = -1;
          t = it.span.end_ns;
          pp_timeline_model_add (m, &it);
        }
    }

  PpSpanRows *rows = pp_span_rows_new ();
  PpTimelineFilter b;
  char err[160];
  pp_timeline_filter_parse ("B", &b, err, sizeof err);
  double all = time_build (rows, m, NULL, PP_SPAN_COL_START, 0);
  size_t n_all = pp_span_rows_n (rows);
  double by_dur = time_build (rows, m, NULL, PP_SPAN_COL_DURATION, 1);
  double by_wait = time_build (rows, m, NULL, PP_SPAN_COL_WAIT, 1);
  double find_b = time_build (rows, m, &b, PP_SPAN_COL_START, 0);
  size_t n_b = pp_span_rows_n (rows);
  PpTimelineFilter fw;
  pp_timeline_filter_parse ("F", &fw, err, sizeof err);
  double find_f = time_build (rows, m, &fw, PP_SPAN_COL_DURATION, 1);
  size_t n_f = pp_span_rows_n (rows);

  static const char *names[PP_SPAN_N_COLS] = { "kind", "rank", "stage", "mb", "step", "start", "duration", "idle" };
  double sorted[PP_SPAN_N_COLS], sorted_max = 0;
  time_build (rows, m, NULL, PP_SPAN_COL_START, 0);
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    {
      sorted[c] = time_sort (rows, m, (PpSpanColumn) c, 1);
      sorted_max = sorted[c] > sorted_max ? sorted[c] : sorted_max;
    }

  double t[N_RUNS];
  PpSpanHistogram h = { 0 };
  for (int i = 0; i < N_RUNS; i++)
    {
      double a = bench_now_ms ();
      pp_span_histogram_compute (&h, m, NULL, 24);
      t[i] = bench_now_ms () - a;
    }
  double hist = bench_median (t, N_RUNS);
  for (int i = 0; i < N_RUNS; i++)
    {
      double a = bench_now_ms ();
      volatile long at = pp_span_rows_position (rows, N_RANKS - 1, per_rank - 1);
      (void) at;
      t[i] = bench_now_ms () - a;
    }
  double find_line = bench_median (t, N_RUNS);

  printf ("bench-span-rows: %zu blocks over %d ranks; rows %.1f MB\n", n_all, N_RANKS,
          (double) n_all * sizeof (PpSpanRef) * 3 / 1e6);
  printf ("  list by start %.1f ms, by duration (longest first) %.1f ms, by idle gap %.1f ms\n", all, by_dur,
          by_wait);
  printf ("  Find \"B\" (%zu lines) %.1f ms, Find \"F\" by duration (%zu lines) %.1f ms, histogram %.1f ms, "
          "a block's line %.2f ms\n", n_b, find_b, n_f, find_f, hist, find_line);
  printf ("  a click on a header (sorted again, down):");
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    printf (" %s %.1f ms%s", names[c], sorted[c], c + 1 < PP_SPAN_N_COLS ? "," : "\n");
  printf ("  a click on a header, the slowest: %.1f ms now; before: listed again and the histogram, %.1f ms\n",
          sorted_max, by_dur + hist);
  pp_span_histogram_clear (&h);
  pp_span_rows_free (rows);
  pp_timeline_model_free (m);
  return 0;
}
