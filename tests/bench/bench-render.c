/* bench-render: the timeline's drawing cost on a big synthetic run.
 *
 * 1,000,000 spans over 64 ranks (F, B, sends, receives, waits), drawn into
 * a 1920x1080 ARGB32 image: fully zoomed out and at 1/20 of the range.
 * Prints the time to build the model from items and the median frame time;
 * the target is a median of at most 16 ms for both views.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-timeline-model.h"
#include "pp-timeline-render.h"
#include "bench-util.h"

#define N_SPANS 1000000
#define N_RANKS 64
#define N_FRAMES 21

static double
median_frame_ms (cairo_t *cr, const PpTimelineModel *m, const PpTimelineView *v)
{
  double t[N_FRAMES];
  for (int i = 0; i < N_FRAMES; i++)
    {
      double a = bench_now_ms ();
      pp_timeline_render (cr, m, v);
      cairo_surface_flush (cairo_get_target (cr));
      t[i] = bench_now_ms () - a;
    }
  qsort (t, N_FRAMES, sizeof t[0], bench_cmp_double);
  return t[N_FRAMES / 2];
}

int
main (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceDescription desc;
  PpTraceItem item;
  const int per_rank = N_SPANS / N_RANKS;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  double t_build;

  memset (&desc, 0, sizeof desc);
  snprintf (desc.schedule, sizeof desc.schedule, "1F1B");
  snprintf (desc.backend, sizeof desc.backend, "synthetic");
  desc.n_ranks = N_RANKS;
  desc.n_microbatches = 64;
  desc.n_virtual = 1;
  desc.start_monotonic_ns = 1000000000;

  /* Items arrive as a live trace delivers them: rank after rank within a
   * window, in time order per rank. */
  int64_t *clock = calloc (N_RANKS, sizeof *clock);
  PpSpan *all = malloc ((size_t) N_SPANS * sizeof *all);
  size_t n = 0;
  for (int i = 0; i < per_rank; i++)
    for (int r = 0; r < N_RANKS; r++)
      {
        PpSpan *s = &all[n++];
        memset (s, 0, sizeof *s);
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        int k = i % 4;
        int64_t len = k == 0 ? 40000 : k == 1 ? 80000 : k == 2 ? 5000 : 15000;
        len += (int64_t) (rng % 20000);
        if (clock[r] == 0)
          clock[r] = desc.start_monotonic_ns + r * 50000;
        s->start_ns = clock[r];
        s->end_ns = clock[r] + len;
        clock[r] += len + (int64_t) (rng >> 40) % 10000;
        s->rank = r;
        s->stage = r;
        s->microbatch = (i / 4) % 64;
        s->kind = k == 0 ? PP_SPAN_F : k == 1 ? PP_SPAN_B : k == 2 ? PP_SPAN_SEND_F : PP_SPAN_WAIT;
        s->peer_rank = -1;
        s->device = 0xffff;
      }

  double a = bench_now_ms ();
  memset (&item, 0, sizeof item);
  item.type = PP_TRACE_ITEM_DESCRIPTION;
  item.description = &desc;
  pp_timeline_model_add (m, &item);
  item.type = PP_TRACE_ITEM_SPAN;
  for (size_t i = 0; i < n; i++)
    {
      item.span = all[i];
      pp_timeline_model_add (m, &item);
    }
  t_build = bench_now_ms () - a;
  free (all);
  free (clock);

  cairo_surface_t *surf = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1920, 1080);
  cairo_t *cr = cairo_create (surf);
  PpTimelineView v;
  pp_timeline_view_init (&v, m, 1920, 1080);
  v.show_header = 1;
  v.show_legend = 1;
  double full = median_frame_ms (cr, m, &v);
  int64_t len = v.t1_ns - v.t0_ns;
  v.t0_ns += len / 2;
  v.t1_ns = v.t0_ns + len / 20;
  double mid = median_frame_ms (cr, m, &v);
  v.t1_ns = v.t0_ns + len / 2000;
  double deep = median_frame_ms (cr, m, &v);

  printf ("bench-render: %zu spans over %d ranks, 1920x1080 ARGB32\n",
          pp_timeline_model_n_spans_total (m), pp_timeline_model_n_ranks (m));
  printf ("  model build from items: %.1f ms (%.0f ns per span)\n", t_build, t_build * 1e6 / N_SPANS);
  printf ("  render, whole run:      median %.2f ms\n", full);
  printf ("  render, 1/20 zoom:      median %.2f ms\n", mid);
  printf ("  render, 1/2000 zoom:    median %.2f ms\n", deep);
  printf ("  target: <= 16 ms for the whole run and 1/20: %s\n",
          full <= 16 && mid <= 16 ? "met" : "MISSED");
  cairo_destroy (cr);
  cairo_surface_destroy (surf);
  pp_timeline_model_free (m);
  return 0;
}
