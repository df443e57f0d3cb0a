/* The timeline model and its one drawing function, checked on pixels: a
 * GPipe 4x6 trace (1 unit = 1 ms) drawn into an image surface must show F,
 * B and the bubble where the schedule puts them.  No display needed. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-timeline-model-private.h"
#include "pp-timeline-render.h"
#include "pp-timeline-host-lane.h"
#include "pp-timeline-host-tip.h"
#include "pp-timeline-summary.h"

#include "test-render-private.h"



void
fixture_setup (Fixture *f, gconstpointer data)
{
  char *out, *err;
  PpError e = { 0 };
  f->dir = g_dir_make_tmp ("pp-render-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->trace = g_build_filename (f->dir, "g.pptrace", NULL);
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "GPipe", "-p", "4", "-m", "6",
                        "--trace", f->trace, NULL), ==, 0);
  g_free (out);
  g_free (err);
  f->m = pp_timeline_model_new_from_file (f->trace, &e);
  g_assert_nonnull (f->m);
}

void
fixture_teardown (Fixture *f, gconstpointer data)
{
  pp_timeline_model_free (f->m);
  pp_test_rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->trace);
}

/* ---- the model -------------------------------------------------------------- */

static void
test_model_gpipe (Fixture *f, gconstpointer data)
{
  const PpTimelineModel *m = f->m;
  int64_t t0 = pp_timeline_model_start_ns (m);
  PpTimelineRankStats st;

  g_assert_nonnull (pp_timeline_model_description (m));
  g_assert_cmpstr (pp_timeline_model_description (m)->schedule, ==, "GPipe");
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 4);
  g_assert_cmpuint (pp_timeline_model_n_spans_total (m), ==, 48);
  g_assert_cmpint (pp_timeline_model_end_ns (m) - t0, ==, 27 * MS);
  for (int r = 0; r < 4; r++)
    {
      const PpSpan *s = pp_timeline_model_spans (m, r);
      g_assert_cmpuint (pp_timeline_model_n_spans (m, r), ==, 12);
      g_assert_cmpint (pp_timeline_model_max_span_ns (m, r), ==, 2 * MS);
      for (size_t i = 1; i < 12; i++)
        g_assert_cmpint (s[i - 1].start_ns, <=, s[i].start_ns);
      /* F0 of rank r starts at r ms; the plan lies on the spans. */
      g_assert_cmpint (s[0].start_ns - t0, ==, (int64_t) r * MS);
      g_assert_cmpuint (pp_timeline_model_n_planned (m, r), ==, 12);
      g_assert_cmpint (pp_timeline_model_planned (m, r)[0].start_ns, ==, s[0].start_ns);
      pp_timeline_model_rank_stats (m, r, t0, pp_timeline_model_end_ns (m), &st);
      g_assert_cmpfloat (fabs (st.busy_ns - 18.0 * MS), <, 1);
      g_assert_cmpfloat (fabs (st.bubble - 1.0 / 3), <, 1e-9);
      g_assert_cmpfloat (fabs (st.planned_bubble - 1.0 / 3), <, 1e-9);
      g_assert_cmpfloat (st.peak_activation_bytes, ==, -1);
    }
  /* Over GPU 0's forwards only, no bubble. */
  pp_timeline_model_rank_stats (m, 0, t0, t0 + 6 * MS, &st);
  g_assert_cmpfloat (fabs (st.bubble), <, 1e-9);
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 1);
  g_assert_cmpint (pp_timeline_model_step_starts (m)[0], ==, t0);
}

/* Bubble inside the steps: three steps of a 2-rank pattern in which rank 1
 * computes half of each window, rank 0 all of it; step 0 is a slow warm-up
 * (rank 1 idles 90% of it), a set-up memset comes long before and the steps
 * are 100 ms apart.  The whole-run idle share drowns in the gaps; the
 * per-step median over the steps that count (pp-analysis.h: the first
 * one left out) is the pattern's. */
static void
test_model_step_bubbles (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it;
  double b[2];

  g_assert_cmpint (pp_timeline_model_step_bubbles (m, b), ==, 0);
  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_SPAN;
  it.span = (PpSpan) { .start_ns = 0, .end_ns = 1 * MS, .rank = 0, .stage = -1, .microbatch = -1,
                       .kind = PP_SPAN_MEMSET };
  pp_timeline_model_add (m, &it);
  for (int step = 0; step < 3; step++)
    {
      int64_t t = 1000 * (int64_t) MS + step * 100 * (int64_t) MS;
      int64_t len = step == 0 ? 20 * MS : 10 * MS;
      int64_t busy1 = step == 0 ? 2 * MS : 5 * MS;
      it.span = (PpSpan) { .start_ns = t, .end_ns = t + len, .rank = 0, .step = step, .kind = PP_SPAN_F };
      pp_timeline_model_add (m, &it);
      it.span = (PpSpan) { .start_ns = t + len - busy1, .end_ns = t + len, .rank = 1, .step = step,
                           .kind = PP_SPAN_B };
      pp_timeline_model_add (m, &it);
      /* the optimizer step ends the whole step (pp-analysis.h): 13 ms */
      it.span = (PpSpan) { .start_ns = t + len + MS, .end_ns = t + len + 3 * MS, .rank = 1,
                           .step = step, .kind = PP_SPAN_OPT };
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpint (pp_timeline_model_step_bubbles (m, b), ==, 2);
  /* steps 1 and 2 alike: rank 0 idles 3 of 13 ms (rank 1's OPT after
   * its block), rank 1 works 5 + 2 of them */
  g_assert_cmpfloat (fabs (b[0] - 3.0 / 13), <, 1e-12);
  g_assert_cmpfloat (fabs (b[1] - 6.0 / 13), <, 1e-12);
  {
    PpTimelineRankStats st;
    pp_timeline_model_rank_stats (m, 1, pp_timeline_model_start_ns (m), pp_timeline_model_end_ns (m), &st);
    g_assert_cmpfloat (st.bubble, >, 0.95);
  }
  pp_timeline_model_free (m);
}

static void
test_model_items (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it;
  int64_t starts[] = { 100, 300, 200, 50, 300, 400 };

  memset (&it, 0, sizeof it);
  it.process = -1;   /* untagged, as a reader gives a trace before 1.4: a process's offset is its own */
  it.type = PP_TRACE_ITEM_SPAN;
  for (size_t i = 0; i < G_N_ELEMENTS (starts); i++)
    {
      memset (&it.span, 0, sizeof it.span);
      it.span.rank = 2;
      it.span.start_ns = starts[i];
      it.span.end_ns = starts[i] + 10 + (int64_t) i;
      it.span.microbatch = (int32_t) i;
      g_assert_cmpint (pp_timeline_model_add (m, &it), ==, 1);
    }
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 3);
  const PpSpan *s = pp_timeline_model_spans (m, 2);
  int want[] = { 3, 0, 2, 1, 4, 5 };   /* equal starts keep arrival order */
  for (size_t i = 0; i < 6; i++)
    g_assert_cmpint (s[i].microbatch, ==, want[i]);
  g_assert_cmpint (pp_timeline_model_start_ns (m), ==, 50);
  g_assert_cmpint (pp_timeline_model_end_ns (m), ==, 415);

  /* A clock offset moves the rank's spans, earlier and later ones. */
  it.type = PP_TRACE_ITEM_CLOCK_OFFSET;
  it.clock_offset.rank = 2;
  it.clock_offset.offset_ns = 1000;
  pp_timeline_model_add (m, &it);
  g_assert_cmpint (pp_timeline_model_spans (m, 2)[0].start_ns, ==, 1050);
  g_assert_cmpint (pp_timeline_model_start_ns (m), ==, 1050);

  /* Counters, steps, strings, dropped. */
  it.type = PP_TRACE_ITEM_COUNTER;
  it.counter = (PpCounter) { .time_ns = 0, .value = 2.5, .rank = 3, .step = 2, .kind = PP_COUNTER_LOSS };
  pp_timeline_model_add (m, &it);
  g_assert_cmpuint (pp_timeline_model_n_losses (m), ==, 3);
  g_assert_true (isnan (pp_timeline_model_losses (m)[0]));
  g_assert_cmpfloat (pp_timeline_model_losses (m)[2], ==, 2.5);
  it.counter = (PpCounter) { .value = 4096, .rank = 1, .kind = PP_COUNTER_ACTIVATION_BYTES };
  pp_timeline_model_add (m, &it);
  it.counter = (PpCounter) { .value = 1024, .rank = 1, .kind = PP_COUNTER_ACTIVATION_BYTES };
  pp_timeline_model_add (m, &it);
  it.counter = (PpCounter) { .value = 3, .rank = 1, .kind = PP_COUNTER_INFLIGHT };
  pp_timeline_model_add (m, &it);
  {
    PpTimelineRankStats st;
    pp_timeline_model_rank_stats (m, 1, 0, 100, &st);
    g_assert_cmpfloat (st.peak_activation_bytes, ==, 4096);
    g_assert_cmpint (st.peak_inflight, ==, 3);
    g_assert_cmpfloat (st.planned_bubble, ==, -1);
  }
  it.type = PP_TRACE_ITEM_STEP_MARKER;
  it.step_marker.phase = PP_TRACE_STEP_BEGIN;
  int64_t marks[][3] = { { 0, 1, 700 }, { 1, 1, 650 }, { 0, 0, 200 }, { 1, 0, 180 } };
  for (size_t i = 0; i < 4; i++)
    {
      it.step_marker.rank = (int32_t) marks[i][0];
      it.step_marker.step = (int32_t) marks[i][1];
      it.step_marker.time_ns = marks[i][2];
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 2);
  g_assert_cmpint (pp_timeline_model_step_starts (m)[0], ==, 180);
  g_assert_cmpint (pp_timeline_model_step_starts (m)[1], ==, 650);
  it.type = PP_TRACE_ITEM_STRING;
  it.string.id = 7;
  it.string.name = "gemm";
  pp_timeline_model_add (m, &it);
  it.string.name = "gemm_v2";
  pp_timeline_model_add (m, &it);
  g_assert_cmpstr (pp_timeline_model_string (m, 7), ==, "gemm_v2");
  g_assert_null (pp_timeline_model_string (m, 8));
  it.type = PP_TRACE_ITEM_DROPPED;
  it.dropped.rank = 5;
  it.dropped.count = 4;
  pp_timeline_model_add (m, &it);
  pp_timeline_model_add (m, &it);
  g_assert_cmpuint (pp_timeline_model_dropped (m), ==, 8);
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 6);
  pp_timeline_model_free (m);
}

/* ---- pixels ------------------------------------------------------------------- */

guint32
pixel (cairo_surface_t *s, int x, int y)
{
  const unsigned char *d = cairo_image_surface_get_data (s);
  return ((const guint32 *) (d + (size_t) y * cairo_image_surface_get_stride (s)))[x];
}

double
dist (guint32 px, const double rgb[3])
{
  double r = (px >> 16 & 0xff) / 255.0, g = (px >> 8 & 0xff) / 255.0, b = (px & 0xff) / 255.0;
  return fmax (fabs (r - rgb[0]), fmax (fabs (g - rgb[1]), fabs (b - rgb[2])));
}

/* The share of a 9x9 patch around (x, y) within tol of rgb. */
double
patch_share (cairo_surface_t *s, double x, double y, const double rgb[3], double tol)
{
  int hit = 0;
  for (int dy = -4; dy <= 4; dy++)
    for (int dx = -4; dx <= 4; dx++)
      hit += dist (pixel (s, (int) x + dx, (int) y + dy), rgb) <= tol;
  return hit / 81.0;
}

static void
test_render_pixels (Fixture *f, gconstpointer data)
{
  PpTimelineView v;
  PpTimelineLayout l;
  double fc[3], bc[3], bub[3];
  int64_t t0 = pp_timeline_model_start_ns (f->m);
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 400);
  cairo_t *cr = cairo_create (s);

  pp_timeline_view_init (&v, f->m, 1200, 400);
  g_assert_cmpint (v.t0_ns, ==, t0);
  g_assert_cmpint (v.t1_ns, ==, t0 + 27 * MS);
  pp_timeline_render (cr, f->m, &v);
  g_assert_cmpint (cairo_status (cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_surface_flush (s);
  pp_timeline_layout (f->m, &v, &l);
  g_assert_cmpfloat (l.block_h, >=, 30);
  pp_timeline_color (PP_SPAN_F, 0, fc);
  pp_timeline_color (PP_SPAN_B, 0, bc);
  pp_timeline_color (-1, 0, bub);
  /* The three colors are far apart. */
  g_assert_cmpfloat (fmax (fabs (fc[0] - bub[0]), fmax (fabs (fc[1] - bub[1]), fabs (fc[2] - bub[2]))), >, 0.3);

  /* Near the top of the block lane: above the micro-batch numbers. */
  for (int r = 0; r < 4; r++)
    {
      double y = l.rows_y + r * l.row_h + l.block_h * 0.2;
      for (int k = 0; k < 6; k++)
        {
          double xf = pp_timeline_x_of (&v, &l, t0 + (int64_t) (r + k) * MS + MS / 2);
          double xb = pp_timeline_x_of (&v, &l, t0 + (int64_t) (15 - 2 * r + 2 * k) * MS + MS);
          g_assert_cmpfloat (patch_share (s, xf, y, fc, 0.02), ==, 1.0);
          g_assert_cmpfloat (patch_share (s, xb, y, bc, 0.02), ==, 1.0);
        }
      /* The bubble: before the first forward (GPU 3: three cells) and
       * between the last forward and the first backward; hatched, so most
       * of a patch is the tint and none of it is F or B. */
      for (int cell = 0; cell < r; cell++)
        {
          double x = pp_timeline_x_of (&v, &l, t0 + (int64_t) cell * MS + MS / 2);
          g_assert_cmpfloat (patch_share (s, x, y, bub, 0.05), >=, 0.5);
          g_assert_cmpfloat (patch_share (s, x, y, fc, 0.1), ==, 0);
        }
      for (int cell = r + 6; cell < 15 - 2 * r; cell++)
        {
          double x = pp_timeline_x_of (&v, &l, t0 + (int64_t) cell * MS + MS / 2);
          g_assert_cmpfloat (patch_share (s, x, y, bub, 0.05), >=, 0.5);
          g_assert_cmpfloat (patch_share (s, x, y, bc, 0.1), ==, 0);
        }
    }

  /* Hit testing: the center of GPU 2's F3 (2 + 3 ms .. 6 ms). */
  {
    PpTimelineHit hit;
    double x = pp_timeline_x_of (&v, &l, t0 + 5 * MS + MS / 2);
    double y = l.rows_y + 2 * l.row_h + l.block_h / 2;
    g_assert_cmpint (pp_timeline_hit (f->m, &v, x, y, &hit), ==, 1);
    g_assert_cmpint (hit.rank, ==, 2);
    g_assert_cmpint (hit.planned, ==, 0);
    g_assert_cmpint (hit.index, >=, 0);
    const PpSpan *sp = &pp_timeline_model_spans (f->m, 2)[hit.index];
    g_assert_cmpint (sp->kind, ==, PP_SPAN_F);
    g_assert_cmpint (sp->microbatch, ==, 3);
    /* Left of the plot: nothing. */
    g_assert_cmpint (pp_timeline_hit (f->m, &v, l.x0 - 5, y, &hit), ==, 0);
  }

  /* A zoomed view: F1 of GPU 0 fills the middle. */
  v.t0_ns = t0 + MS;
  v.t1_ns = t0 + 2 * MS;
  pp_timeline_render (cr, f->m, &v);
  cairo_surface_flush (s);
  g_assert_cmpfloat (patch_share (s, (l.x0 + l.x1) / 2 - 100, l.rows_y + l.block_h * 0.2, fc, 0.02), ==, 1.0);

  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

/* A million-span-like case in small: spans narrower than a pixel are
 * aggregated, and the columns they cover are not left blank. */
static void
test_render_aggregated (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it;
  PpTimelineView v;
  PpTimelineLayout l;
  double fc[3];
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 400, 200);
  cairo_t *cr = cairo_create (s);

  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_SPAN;
  for (int i = 0; i < 100000; i++)
    {
      it.span.rank = 0;
      it.span.kind = PP_SPAN_F;
      it.span.start_ns = (int64_t) i * 100;
      it.span.end_ns = (int64_t) i * 100 + 100;   /* back to back: full coverage */
      it.span.microbatch = i;
      pp_timeline_model_add (m, &it);
    }
  pp_timeline_view_init (&v, m, 400, 200);
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  pp_timeline_layout (m, &v, &l);
  pp_timeline_color (PP_SPAN_F, 0, fc);
  for (double x = l.x0 + 10; x < l.x1 - 10; x += 37)
    g_assert_cmpfloat (patch_share (s, x, l.rows_y + l.block_h / 2, fc, 0.02), ==, 1.0);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* A counter a hostile file sets past an int (in-flight micro-batches of
 * 1e233): the peak is held at INT_MAX, not cast (undefined; the fuzzer
 * found it). */
static void
test_model_huge_counter (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER };
  PpTimelineRankStats st;
  it.counter = (PpCounter) { .time_ns = 5, .value = 3.9e233, .rank = 0, .kind = PP_COUNTER_INFLIGHT };
  g_assert_cmpint (pp_timeline_model_add (m, &it), ==, 1);
  it.counter.value = NAN;
  pp_timeline_model_add (m, &it);
  pp_timeline_model_rank_stats (m, 0, 0, 10, &st);
  g_assert_cmpint (st.peak_inflight, ==, G_MAXINT);
  pp_timeline_model_free (m);
}

/* ---- the block-edge counters in the model ------------------------------------ */

/* Rank 0's items written 50 ms late, its CLOCK_OFFSET of -50 ms after
 * them all: the model moves its edge counters back with its spans, and
 * the host lane's split of its gap [2, 8] ms is what the samples say
 * (1.1 ms descheduled); counters left where they were read would be
 * 50 ms after the gap and measure nothing there. */
static void
test_model_edge_clock_offset (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "render-edge-clock");
  char *path = pp_test_ctx_path (&ctx, "run.pptrace");
  const int64_t late = 50 * MS;
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  const struct { int rank; int64_t t0, t1; } spans[] = { { 0, 0, 2 * MS }, { 0, 8 * MS, 10 * MS }, { 1, 2 * MS, 8 * MS } };
  for (guint i = 0; i < G_N_ELEMENTS (spans); i++)
    {
      int64_t d = spans[i].rank == 0 ? late : 0;
      PpSpan sp = { .start_ns = spans[i].t0 + d, .end_ns = spans[i].t1 + d, .rank = spans[i].rank,
                    .kind = PP_SPAN_F, .peer_rank = -1, .microbatch = (int32_t) i };
      g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &err), ==, PP_OK);
    }
  const struct { int64_t t; double v; } delay[] = { { 0, 5e6 }, { 2 * MS, 5e6 }, { 8 * MS, 6.1e6 }, { 10 * MS, 6.1e6 } };
  for (guint i = 0; i < G_N_ELEMENTS (delay); i++)
    {
      PpCounter c = { .time_ns = delay[i].t + late, .value = delay[i].v, .rank = 0, .kind = PP_COUNTER_RUN_DELAY_NS };
      g_assert_cmpint (pp_trace_write_counter (w, &c, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_write_clock_offset (w, 0, -late, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &err);
  g_assert_nonnull (m);
  g_assert_cmpint (pp_timeline_model_spans (m, 0)[0].start_ns, ==, 0);
  const PpCounter *c = NULL;
  size_t n = pp_timeline_model_edge_counters (m, &c, NULL);
  g_assert_cmpuint (n, ==, G_N_ELEMENTS (delay));
  for (size_t i = 0; i < n; i++)
    g_assert_cmpint (c[i].time_ns, ==, delay[i].t);
  char *tip = pp_timeline_host_lane_describe (m, 0, 2500000, 0, 10 * MS, 1);
  g_assert_nonnull (tip);
  g_assert_true (g_str_has_prefix (tip, "descheduled 1.1 ms of this 6.0 ms gap"));
  free (tip);
  pp_timeline_model_free (m);
  g_free (path);
  pp_test_ctx_clear (&ctx);
}

/* A long job's edge counters are all kept: 2^20 + 10 samples read from a
 * file, the first and the last among them (the model once kept the last
 * 2^20 at most, halving when full). */
static void
test_model_edge_unbounded (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "render-edge-many");
  char *path = pp_test_ctx_path (&ctx, "run.pptrace");
  const size_t total = ((size_t) 1 << 20) + 10;
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  for (size_t i = 0; i < total; i++)
    {
      PpCounter c = { .time_ns = (int64_t) i * 1000, .value = (double) i, .rank = (int32_t) (i % 2),
                      .kind = PP_COUNTER_RUN_DELAY_NS };
      g_assert_cmpint (pp_trace_write_counter (w, &c, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &err);
  g_assert_nonnull (m);
  const PpCounter *c = NULL;
  size_t n = pp_timeline_model_edge_counters (m, &c, NULL);
  g_assert_cmpuint (n, ==, total);
  g_assert_cmpfloat (c[0].value, ==, 0);
  g_assert_cmpfloat (c[n - 1].value, ==, (double) (total - 1));
  g_assert_cmpint (c[n - 1].time_ns, ==, (int64_t) (total - 1) * 1000);
  pp_timeline_model_free (m);
  g_free (path);
  pp_test_ctx_clear (&ctx);
}

/* ---- the palette -------------------------------------------------------------- */

static double
srgb_linear (double c)
{
  return c <= 0.04045 ? c / 12.92 : pow ((c + 0.055) / 1.055, 2.4);
}

/* CIELAB of a linear RGB color (D65). */
static void
lab_of_linear (const double l[3], double lab[3])
{
  double X = (0.4124 * l[0] + 0.3576 * l[1] + 0.1805 * l[2]) / 0.95047;
  double Y = 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  double Z = (0.0193 * l[0] + 0.1192 * l[1] + 0.9505 * l[2]) / 1.08883;
  double f[3] = { X, Y, Z };
  for (int i = 0; i < 3; i++)
    f[i] = f[i] > 0.008856 ? cbrt (f[i]) : 7.787 * f[i] + 16.0 / 116;
  lab[0] = 116 * f[1] - 16;
  lab[1] = 500 * (f[0] - f[1]);
  lab[2] = 200 * (f[1] - f[2]);
}

/* Every two colors a reader must tell apart in the block lane (the kinds,
 * the bubble as drawn, its hatch averaged in as the eye does from a
 * distance, and a wait under them) are at least 15 CIELAB units apart, and
 * the two reds and oranges of the chart (I against a wait) at least 30, for
 * normal vision and for protanopia, deuteranopia and tritanopia as Machado,
 * Oliveira and Fernandes (2009) simulate them (severity 1), on the light
 * and the dark palette.  Issue 17: I's orange read as a second vermillion
 * beside the waits (18 apart for a deuteranope), and the hatched bubble
 * vanished against I for a tritanope (7). */
static const double sim[4][3][3] = {
  { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } },
  { { 0.152286, 1.052583, -0.204868 }, { 0.114503, 0.786281, 0.099216 }, { -0.003882, -0.048116, 1.051998 } },
  { { 0.367322, 0.860646, -0.227968 }, { 0.280085, 0.672501, 0.047413 }, { -0.011820, 0.042940, 0.968881 } },
  { { 1.255528, -0.076749, -0.178779 }, { -0.078411, 0.930809, 0.147602 }, { 0.004733, 0.691367, 0.303900 } },
};
static const char *const vision[] = { "normal", "protanopia", "deuteranopia", "tritanopia" };

static void
test_palette_distinct (void)
{
  static const int kinds[] = { PP_SPAN_F, PP_SPAN_B, PP_SPAN_I, PP_SPAN_W, PP_SPAN_OVERLAP_F_B,
                               PP_SPAN_OPT, PP_SPAN_WAIT, PP_SPAN_UNSHARD, PP_SPAN_REDUCE_GRAD, PP_SPAN_LOSS,
                               -1 };
  const int n = G_N_ELEMENTS (kinds);

  for (int dark = 0; dark < 2; dark++)
    {
      /* the bubble as drawn: the mean of a hatched stretch (linear light) */
      double bubble_lin[3] = { 0, 0, 0 };
      {
        PpTimelineModel *m = pp_timeline_model_new ();
        PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
        PpTimelineView v;
        PpTimelineLayout l;
        cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 400, 200);
        cairo_t *cr = cairo_create (s);
        it.span = (PpSpan) { .start_ns = 0, .end_ns = MS, .kind = PP_SPAN_F, .peer_rank = -1 };
        pp_timeline_model_add (m, &it);
        it.span.start_ns = 100 * MS;
        it.span.end_ns = 101 * MS;
        pp_timeline_model_add (m, &it);
        pp_timeline_view_init (&v, m, 400, 200);
        v.dark = dark;
        pp_timeline_render (cr, m, &v);
        cairo_surface_flush (s);
        pp_timeline_layout (m, &v, &l);
        int np = 0;
        for (int y = (int) (l.rows_y + 4); y < (int) (l.rows_y + l.block_h - 4); y++)
          for (int x = (int) l.x0 + 40; x < (int) l.x1 - 40; x++, np++)
            for (int k = 0; k < 3; k++)
              bubble_lin[k] += srgb_linear ((pixel (s, x, y) >> (16 - 8 * k) & 0xff) / 255.0);
        g_assert_cmpint (np, >, 1000);
        for (int k = 0; k < 3; k++)
          bubble_lin[k] /= np;
        cairo_destroy (cr);
        cairo_surface_destroy (s);
        pp_timeline_model_free (m);
      }
    for (int v = 0; v < 4; v++)
      {
        double lab[G_N_ELEMENTS (kinds)][3];
        for (int i = 0; i < n; i++)
          {
            double c[3], lin[3], out[3];
            pp_timeline_color (kinds[i] < 0 ? PP_SPAN_F : kinds[i], dark, c);
            for (int k = 0; k < 3; k++)
              lin[k] = kinds[i] < 0 ? bubble_lin[k] : srgb_linear (c[k]);
            for (int k = 0; k < 3; k++)
              out[k] = CLAMP (sim[v][k][0] * lin[0] + sim[v][k][1] * lin[1] + sim[v][k][2] * lin[2], 0, 1);
            lab_of_linear (out, lab[i]);
          }
        for (int i = 0; i < n; i++)
          for (int j = i + 1; j < n; j++)
            {
              double d = sqrt ((lab[i][0] - lab[j][0]) * (lab[i][0] - lab[j][0])
                               + (lab[i][1] - lab[j][1]) * (lab[i][1] - lab[j][1])
                               + (lab[i][2] - lab[j][2]) * (lab[i][2] - lab[j][2]));
              int orange_pair = (kinds[i] == PP_SPAN_I && kinds[j] == PP_SPAN_WAIT)
                                || (kinds[j] == PP_SPAN_I && kinds[i] == PP_SPAN_WAIT);
              if (g_getenv ("PP_PALETTE_VERBOSE"))
                g_printerr ("%d %d %d %d %.1f\n", dark, v, kinds[i], kinds[j], d);
              if (d < (orange_pair ? 30 : 15))
                g_error ("%s palette, %s: %s and %s are only %.1f apart",
                         dark ? "dark" : "light", vision[v],
                         kinds[i] < 0 ? "bubble" : pp_span_kind_name (kinds[i]),
                         kinds[j] < 0 ? "bubble" : pp_span_kind_name (kinds[j]), d);
            }
      }
    }
}

/* The host lane (issue 29): every two of its parts (GC, the host kinds,
 * waiting, descheduled) and the ground they lie on at least 15 CIELAB units
 * apart, for the four visions, light and dark. */
static void
test_host_lane_palette (void)
{
  for (int dark = 0; dark < 2; dark++)
    for (int v = 0; v < 4; v++)
      {
        double lab[PP_HOST_N_PARTS + 1][3];
        for (int i = 0; i <= PP_HOST_N_PARTS; i++)
          {
            double c[3], lin[3], out[3];
            if (i < PP_HOST_N_PARTS)
              pp_timeline_host_color (i, dark, c);
            else
              c[0] = c[1] = c[2] = dark ? 0x1E / 255.0 : 1.0;   /* the background */
            for (int k = 0; k < 3; k++)
              lin[k] = srgb_linear (c[k]);
            for (int k = 0; k < 3; k++)
              out[k] = CLAMP (sim[v][k][0] * lin[0] + sim[v][k][1] * lin[1] + sim[v][k][2] * lin[2], 0, 1);
            lab_of_linear (out, lab[i]);
          }
        for (int i = 0; i <= PP_HOST_N_PARTS; i++)
          for (int j = i + 1; j <= PP_HOST_N_PARTS; j++)
            {
              double d = sqrt ((lab[i][0] - lab[j][0]) * (lab[i][0] - lab[j][0])
                               + (lab[i][1] - lab[j][1]) * (lab[i][1] - lab[j][1])
                               + (lab[i][2] - lab[j][2]) * (lab[i][2] - lab[j][2]));
              if (d < 15)
                g_error ("%s palette, %s: host lane's %s and %s are only %.1f apart",
                         dark ? "dark" : "light", vision[v], pp_timeline_host_lane_part_name (i),
                         j < PP_HOST_N_PARTS ? pp_timeline_host_lane_part_name (j) : "background", d);
            }
      }
}

/* The host lane (issue 29): drawn only where the trace has host kinds or
 * run-delay counters; a GC pause in a gap drawn in its color at the
 * blocks' scale; the tooltips name the part under the pointer and its
 * length, and say descheduled time has no known place in its gap. */
static void
test_host_lane (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  PpTimelineView v;
  PpTimelineLayout l;
  const struct { int rank, kind; int64_t t0, t1; } spans[] = {
    { 0, PP_SPAN_F, 0, 2 * MS }, { 0, PP_SPAN_F, 8 * MS, 10 * MS }, { 1, PP_SPAN_F, 2 * MS, 8 * MS },
    { 0, PP_SPAN_GC, 3 * MS, 6200000 },
  };

  for (guint i = 0; i < 3; i++)
    {
      it.span = (PpSpan) { .start_ns = spans[i].t0, .end_ns = spans[i].t1, .rank = spans[i].rank,
                           .kind = (uint16_t) spans[i].kind, .peer_rank = -1, .microbatch = (int32_t) i };
      pp_timeline_model_add (m, &it);
    }
  pp_timeline_view_init (&v, m, 1000, 300);
  pp_timeline_layout (m, &v, &l);
  g_assert_cmpfloat (l.host_h, ==, 0);   /* an older trace: no lane */
  g_assert_false (pp_timeline_host_lane_present (m));

  it.span = (PpSpan) { .start_ns = spans[3].t0, .end_ns = spans[3].t1, .rank = 0, .kind = PP_SPAN_GC,
                       .peer_rank = -1, .stage = -1, .microbatch = -1 };
  pp_timeline_model_add (m, &it);
  /* another thread's collection in the same gap (format 1.8: its stream) */
  it.span.start_ns = 6500000;
  it.span.end_ns = 7500000;
  it.span.stream = 4242;
  pp_timeline_model_add (m, &it);
  /* rank 0's run delay: 1.1 ms more across its gap (2 .. 8 ms) */
  const struct { int64_t t; double v; } delay[] = { { 0, 5e6 }, { 2 * MS, 5e6 }, { 8 * MS, 6.1e6 }, { 10 * MS, 6.1e6 } };
  for (guint i = 0; i < G_N_ELEMENTS (delay); i++)
    {
      PpTraceItem c = { .type = PP_TRACE_ITEM_COUNTER };
      c.counter = (PpCounter) { .time_ns = delay[i].t, .value = delay[i].v, .rank = 0,
                                .kind = PP_COUNTER_RUN_DELAY_NS };
      pp_timeline_model_add (m, &c);
    }
  g_assert_true (pp_timeline_host_lane_present (m));
  g_assert_cmpuint (pp_timeline_host_lane_parts_seen (m), ==,
                    (1u << PP_HOST_PART_GC) | (1u << PP_HOST_PART_DESCHEDULED));

  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1000, 600);
  cairo_t *cr = cairo_create (s);
  pp_timeline_view_init (&v, m, 1000, 600);
  v.t0_ns = 0;
  v.t1_ns = 10 * MS;
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  pp_timeline_layout (m, &v, &l);
  g_assert_cmpfloat (l.host_h, >=, 20);   /* the patches below fit in its halves */
  double lane_y = l.rows_y + l.block_h + l.thin_h + l.plan_h;
  double gc[3];
  pp_timeline_host_color (PP_HOST_PART_GC, 0, gc);
  /* the GC pause's middle, in the lane's upper half (descheduled is in the lower) */
  double xg = pp_timeline_x_of (&v, &l, 4600000), yg = lane_y + l.host_h * 0.25;
  g_assert_cmpfloat (patch_share (s, xg, yg, gc, 0.02), ==, 1.0);
  /* nothing of the lane before the gap or on rank 1, which has neither */
  g_assert_cmpfloat (patch_share (s, pp_timeline_x_of (&v, &l, MS), yg, gc, 0.1), ==, 0);
  g_assert_cmpfloat (patch_share (s, xg, yg + l.row_h, gc, 0.1), ==, 0);

  char *tip = pp_timeline_host_lane_tooltip (m, &v, xg, yg);
  g_assert_cmpstr (tip, ==, "GC pause 3.2 ms");
  free (tip);
  /* another thread's: the upper half only, its tooltip names the thread */
  double xo = pp_timeline_x_of (&v, &l, 7000000);
  g_assert_cmpfloat (patch_share (s, xo, yg, gc, 0.02), ==, 1.0);
  g_assert_cmpfloat (patch_share (s, xo, lane_y + l.host_h * 0.8, gc, 0.1), ==, 0);
  tip = pp_timeline_host_lane_tooltip (m, &v, xo, yg);
  g_assert_nonnull (tip);
  g_assert_true (g_str_has_prefix (tip, "GC pause on thread 4242, 1.0 ms (another thread's collection"));
  free (tip);
  tip = pp_timeline_host_lane_tooltip (m, &v, pp_timeline_x_of (&v, &l, 2500000), lane_y + l.host_h * 0.75);
  g_assert_nonnull (tip);
  g_assert_true (g_str_has_prefix (tip, "descheduled 1.1 ms of this 6.0 ms gap"));
  g_assert_nonnull (strstr (tip, "not known"));
  free (tip);
  /* the blocks' lane is not the host lane's */
  g_assert_null (pp_timeline_host_lane_tooltip (m, &v, xg, l.rows_y + l.block_h * 0.5));

  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* The legend row of an image holds the kinds' swatches, the bubble's hatch
 * among them: a ZB trace's I, and F, W, the wait's mark. */
static void
test_render_legend (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  static const int kinds[] = { PP_SPAN_F, PP_SPAN_I, PP_SPAN_W, PP_SPAN_WAIT };
  for (int k = 0; k < 4; k++)
    {
      it.span = (PpSpan) { .start_ns = k * 2 * MS, .end_ns = (k * 2 + 1) * MS, .rank = 0, .stage = 0,
                           .microbatch = 0, .kind = (uint16_t) kinds[k], .peer_rank = -1 };
      pp_timeline_model_add (m, &it);
    }
  PpTimelineView v;
  pp_timeline_view_init (&v, m, 1200, 300);
  v.show_legend = 1;
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 300);
  cairo_t *cr = cairo_create (s);
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  for (int k = 0; k < 4; k++)
    {
      double c[3];
      int hits = 0;
      pp_timeline_color (kinds[k], 0, c);
      for (int y = 300 - 30; y < 300; y++)
        for (int x = 0; x < 1200; x++)
          hits += dist (pixel (s, x, y), c) < 0.02;
      if (hits < 30)
        g_error ("legend: %s has %d pixels", pp_span_kind_name (kinds[k]), hits);
    }
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* More rows than the plot has pixels (a job's processes unfolded, 16 × 128
 * in a window): the rows share the height between the ruler and the
 * legend, however thin, and the legend covers none of them (issue 42: the
 * rows kept at least a pixel each and ran on under the legend and off the
 * image's bottom). */
static void
test_render_legend_below_rows (void)
{
  enum { N = 400, W = 1200, H = 300 };
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  for (int r = 0; r < N; r++)
    {
      it.span = (PpSpan) { .start_ns = 0, .end_ns = 10 * MS, .rank = r, .stage = r,
                           .microbatch = 0, .kind = PP_SPAN_F, .peer_rank = -1 };
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, N);
  PpTimelineView v;
  pp_timeline_view_init (&v, m, W, H);
  v.show_header = 1;
  v.show_legend = 1;
  PpTimelineLayout l;
  pp_timeline_layout (m, &v, &l);
  g_assert_cmpint (l.legend_lines, ==, 1);
  /* the legend's line: its bottom 30 px */
  double legend_top = H - 30;
  g_assert_cmpfloat (l.row_h, >, 0);
  g_assert_cmpfloat (l.rows_y + N * l.row_h, <=, legend_top);

  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, W, H);
  cairo_t *cr = cairo_create (s);
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  double f[3], white[3] = { 1, 1, 1 };
  pp_timeline_color (PP_SPAN_F, 0, f);
  /* the legend's band right of its entries: no row's forward block there */
  int under = 0;
  for (int y = (int) legend_top; y < H; y++)
    for (int x = (int) (l.x0 + (l.x1 - l.x0) / 2); x < (int) l.x1; x++)
      under += dist (pixel (s, x, y), f) < 0.3;
  g_assert_cmpint (under, ==, 0);
  /* and the last row is drawn, inside the image, above the legend */
  int y_last = (int) (l.rows_y + (N - 0.5) * l.row_h);
  g_assert_cmpint (y_last, <, (int) legend_top);
  g_assert_cmpfloat (dist (pixel (s, (int) ((l.x0 + l.x1) / 2), y_last), white), >, 0.3);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* Format 1.9's LOSS blocks (the last stage's loss computation) are work:
 * drawn solid in the block lane in a colour of their own, light and dark,
 * never hatched as the bubble or the host lane's loss; in the legend, hit
 * as themselves, and labelled apart from the micro-batch's forward. */
static void
test_render_loss_blocks (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  /* rank 1 (the last stage): F 0-2, LOSS 2-6, B 6-10; rank 0: F 0-2 only,
   * idle after it */
  const struct { int rank, kind; int64_t t0, t1; } spans[] = {
    { 0, PP_SPAN_F, 0, 2 * MS }, { 1, PP_SPAN_F, 0, 2 * MS }, { 1, PP_SPAN_LOSS, 2 * MS, 6 * MS },
    { 1, PP_SPAN_B, 6 * MS, 10 * MS }, { 0, PP_SPAN_B, 10 * MS, 12 * MS },
  };
  for (guint i = 0; i < G_N_ELEMENTS (spans); i++)
    {
      it.span = (PpSpan) { .start_ns = spans[i].t0, .end_ns = spans[i].t1, .rank = spans[i].rank,
                           .stage = spans[i].rank, .microbatch = 0, .kind = (uint16_t) spans[i].kind,
                           .peer_rank = -1 };
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpstr (pp_span_kind_name (PP_SPAN_LOSS), ==, "LOSS");
  for (int dark = 0; dark < 2; dark++)
    {
      PpTimelineView v;
      PpTimelineLayout l;
      double lc[3], bub[3], hl[3];
      cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 300);
      cairo_t *cr = cairo_create (s);
      pp_timeline_view_init (&v, m, 1200, 300);
      v.dark = dark;
      v.show_legend = 1;
      pp_timeline_render (cr, m, &v);
      cairo_surface_flush (s);
      pp_timeline_layout (m, &v, &l);
      pp_timeline_color (PP_SPAN_LOSS, dark, lc);
      pp_timeline_color (-1, dark, bub);
      pp_timeline_color (PP_SPAN_HOST_LOSS, dark, hl);
      g_assert_cmpfloat (dist (0, lc), >, 0.1);   /* not the ground */
      /* the LOSS block's top: its colour, solid (no hatch, no bubble) */
      double y1 = l.rows_y + l.row_h + l.block_h * 0.2, y0 = l.rows_y + l.block_h * 0.2;
      for (int64_t t = 2 * MS + MS / 2; t < 6 * MS; t += MS)
        {
          double x = pp_timeline_x_of (&v, &l, pp_timeline_model_start_ns (m) + t);
          g_assert_cmpfloat (patch_share (s, x, y1, lc, 0.02), ==, 1.0);
          g_assert_cmpfloat (patch_share (s, x, y1, bub, 0.05), ==, 0);
          g_assert_cmpfloat (patch_share (s, x, y1, hl, 0.05), ==, 0);
          /* rank 0 idles then: the bubble, not the loss's colour */
          g_assert_cmpfloat (patch_share (s, x, y0, lc, 0.1), ==, 0);
          g_assert_cmpfloat (patch_share (s, x, y0, bub, 0.05), >=, 0.5);
        }
      /* hit: the block under the pointer is the LOSS span */
      PpTimelineHit hit;
      double x = pp_timeline_x_of (&v, &l, pp_timeline_model_start_ns (m) + 4 * MS);
      g_assert_cmpint (pp_timeline_hit (m, &v, x, l.rows_y + l.row_h + l.block_h / 2, &hit), ==, 1);
      g_assert_cmpint (hit.rank, ==, 1);
      g_assert_cmpint (pp_timeline_model_spans (m, 1)[hit.index].kind, ==, PP_SPAN_LOSS);
      /* the legend names it with its swatch */
      int hits = 0;
      for (int y = 300 - 30; y < 300; y++)
        for (int xx = 0; xx < 1200; xx++)
          hits += dist (pixel (s, xx, y), lc) < 0.02;
      g_assert_cmpint (hits, >=, 30);
      cairo_destroy (cr);
      cairo_surface_destroy (s);
    }
  g_assert_true (pp_timeline_model_kinds_seen (m) & (1u << PP_SPAN_LOSS));
  PpTimelineFilter f;
  char err[128];
  g_assert_cmpint (pp_timeline_filter_parse ("loss", &f, err, sizeof err), ==, 0);
  g_assert_cmpuint (f.kinds, ==, 1u << PP_SPAN_LOSS);
  pp_timeline_model_free (m);
}

/* Issue 36: set-up before step 0 (the interleaved runtime's first-step
 * set-up, a lazy all-gather long before the first block) is never bubble:
 * drawn without --steps, the bubble's hatch starts at the first block, as
 * the analysis's first step does (pp-analysis.h).  Rank 0 all-gathers at
 * 0-8 ms; the blocks run 10-22 ms: rank 1 has nothing before 12 ms, and
 * only 10-12 ms of that is its bubble. */
static void
test_render_setup_not_bubble (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  const struct { int rank, kind; int64_t t0, t1; } spans[] = {
    { 0, PP_SPAN_UNSHARD, 0, 8 * MS }, { 0, PP_SPAN_F, 10 * MS, 12 * MS }, { 1, PP_SPAN_F, 12 * MS, 14 * MS },
    { 1, PP_SPAN_B, 14 * MS, 18 * MS }, { 0, PP_SPAN_B, 18 * MS, 22 * MS },
  };
  for (guint i = 0; i < G_N_ELEMENTS (spans); i++)
    {
      it.span = (PpSpan) { .start_ns = spans[i].t0, .end_ns = spans[i].t1, .rank = spans[i].rank,
                           .stage = spans[i].rank, .microbatch = 0, .kind = (uint16_t) spans[i].kind,
                           .peer_rank = -1 };
      pp_timeline_model_add (m, &it);
    }
  int64_t a, b;
  g_assert_cmpint (pp_timeline_model_step_extent (m, &a, &b), ==, 1);
  g_assert_cmpint (a - pp_timeline_model_start_ns (m), ==, 10 * MS);
  g_assert_cmpint (b - pp_timeline_model_start_ns (m), ==, 22 * MS);
  PpTimelineView v;
  PpTimelineLayout l;
  double bub[3];
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 200);
  cairo_t *cr = cairo_create (s);
  pp_timeline_view_init (&v, m, 1200, 200);
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  pp_timeline_layout (m, &v, &l);
  pp_timeline_color (-1, 0, bub);
  double y1 = l.rows_y + l.row_h + l.block_h * 0.5;
  for (int64_t t = MS; t < 9 * MS; t += MS)   /* the set-up: no hatch */
    g_assert_cmpfloat (patch_share (s, pp_timeline_x_of (&v, &l, pp_timeline_model_start_ns (m) + t), y1, bub,
                                    0.05), ==, 0);
  /* rank 1 waits for rank 0's first forward: the bubble */
  g_assert_cmpfloat (patch_share (s, pp_timeline_x_of (&v, &l, pp_timeline_model_start_ns (m) + 11 * MS), y1,
                                  bub, 0.05), >=, 0.5);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* Issue 36: a plan's step holds its data-parallel actions (profile's
 * closing line printed the simulation's makespan with them, 605 ms, info
 * the extent of the compute actions, 479 ms, both "the plan at measured
 * costs").  A timed plan whose rank 0 ends in a REDUCE_GRAD: the step runs
 * to its end, in info and in the model the app and render read, and the
 * rank bubbles agree. */
static void
test_plan_step_with_dp (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "pp-render-");
  char *path = pp_test_ctx_path (&ctx, "plan-dp.pptrace");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d = { .n_ranks = 2, .n_microbatches = 1, .n_virtual = 1 };
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  /* rank 0: F 0-1 ms, B 3-5, REDUCE_GRAD 5-8; rank 1: F 1-2, B 2-3 */
  PpTracePlanAction p0[] = {
    { .kind = PP_TRACE_ACT_F, .stage = 0, .microbatch = 0, .sub_kind = -1, .sub_stage = -1, .sub_microbatch = -1,
      .planned_start = 0, .planned_end = 0.001 },
    { .kind = PP_TRACE_ACT_B, .stage = 0, .microbatch = 0, .sub_kind = -1, .sub_stage = -1, .sub_microbatch = -1,
      .planned_start = 0.003, .planned_end = 0.005 },
    { .kind = PP_TRACE_ACT_REDUCE_GRAD, .stage = 0, .microbatch = -1, .sub_kind = -1, .sub_stage = -1,
      .sub_microbatch = -1, .planned_start = 0.005, .planned_end = 0.008 },
  };
  PpTracePlanAction p1[] = {
    { .kind = PP_TRACE_ACT_F, .stage = 1, .microbatch = 0, .sub_kind = -1, .sub_stage = -1, .sub_microbatch = -1,
      .planned_start = 0.001, .planned_end = 0.002 },
    { .kind = PP_TRACE_ACT_B, .stage = 1, .microbatch = 0, .sub_kind = -1, .sub_stage = -1, .sub_microbatch = -1,
      .planned_start = 0.002, .planned_end = 0.003 },
  };
  g_assert_cmpint (pp_trace_write_rank_plan (w, 0, p0, G_N_ELEMENTS (p0), 1, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_rank_plan (w, 1, p1, G_N_ELEMENTS (p1), 1, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

  char *out = NULL, *e = NULL;
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "info", path, NULL), ==, 0);
  /* 8 ms: rank 0 works 6 of them (25% idle), rank 1 2 (75%) */
  g_assert_nonnull (strstr (out, "bubble, plan at measured costs (the last plan of each rank, one step 8.000 ms): "
                                 "rank 0 25.0%, rank 1 75.0%"));
  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &err);
  g_assert_nonnull (m);
  g_assert_cmpfloat_with_epsilon (pp_timeline_model_planned_bubble (m, 0, INT64_MIN, INT64_MAX), 0.25, 1e-9);
  g_assert_cmpfloat_with_epsilon (pp_timeline_model_planned_bubble (m, 1, INT64_MIN, INT64_MAX), 0.75, 1e-9);
  g_assert_true (pp_timeline_plan_action_is_work (PP_TRACE_ACT_REDUCE_GRAD));
  g_assert_false (pp_timeline_plan_action_is_work (PP_TRACE_ACT_SEND_F));
  pp_timeline_model_free (m);
  g_free (out);
  g_free (e);
  g_free (path);
  pp_test_ctx_clear (&ctx);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/render/model-gpipe", Fixture, NULL, fixture_setup, test_model_gpipe, fixture_teardown);
  test_render_find_register ();
  g_test_add_func ("/render/model-items", test_model_items);
  g_test_add_func ("/render/model-step-bubbles", test_model_step_bubbles);
  g_test_add ("/render/pixels", Fixture, NULL, fixture_setup, test_render_pixels, fixture_teardown);
  g_test_add_func ("/render/aggregated", test_render_aggregated);
  g_test_add_func ("/render/palette-distinct", test_palette_distinct);
  g_test_add_func ("/render/host-lane-palette", test_host_lane_palette);
  g_test_add_func ("/render/host-lane", test_host_lane);
  g_test_add_func ("/render/model-huge-counter", test_model_huge_counter);
  g_test_add_func ("/render/model-edge-clock-offset", test_model_edge_clock_offset);
  g_test_add_func ("/render/model-edge-unbounded", test_model_edge_unbounded);
  g_test_add_func ("/render/legend", test_render_legend);
  g_test_add_func ("/render/legend-below-rows", test_render_legend_below_rows);
  g_test_add_func ("/render/loss-blocks", test_render_loss_blocks);
  g_test_add_func ("/render/setup-not-bubble", test_render_setup_not_bubble);
  g_test_add_func ("/render/plan-step-with-dp", test_plan_step_with_dp);
  return g_test_run ();
}
