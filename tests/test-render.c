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

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)
#define MS 1000000

typedef struct {
  char            *dir, *trace;
  PpTimelineModel *m;
} Fixture;

static void
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

static void
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

static guint32
pixel (cairo_surface_t *s, int x, int y)
{
  const unsigned char *d = cairo_image_surface_get_data (s);
  return ((const guint32 *) (d + (size_t) y * cairo_image_surface_get_stride (s)))[x];
}

static double
dist (guint32 px, const double rgb[3])
{
  double r = (px >> 16 & 0xff) / 255.0, g = (px >> 8 & 0xff) / 255.0, b = (px & 0xff) / 255.0;
  return fmax (fabs (r - rgb[0]), fmax (fabs (g - rgb[1]), fabs (b - rgb[2])));
}

/* The share of a 9x9 patch around (x, y) within tol of rgb. */
static double
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

/* ---- issue 17: find and filter, arrows, ranges, summaries, lost ranks --------------- */

static void
test_filter_parse (void)
{
  PpTimelineFilter f;
  char err[160];
  PpSpan w3 = { .kind = PP_SPAN_W, .stage = 2, .microbatch = 3, .step = 5 };
  PpSpan f3 = { .kind = PP_SPAN_F, .stage = 2, .microbatch = 3, .step = 5 };
  PpSpan w4 = { .kind = PP_SPAN_W, .stage = 1, .microbatch = 4, .step = 6 };

  g_assert_cmpint (pp_timeline_filter_parse ("", &f, err, sizeof err), ==, 0);
  g_assert_false (f.active);
  g_assert_true (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_cmpint (pp_timeline_filter_parse ("W", &f, err, sizeof err), ==, 0);
  g_assert_true (f.active);
  g_assert_true (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_false (pp_timeline_filter_match (&f, 0, &f3));
  g_assert_cmpint (pp_timeline_filter_parse ("mb 3", &f, err, sizeof err), ==, 0);
  g_assert_true (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_true (pp_timeline_filter_match (&f, 0, &f3));
  g_assert_false (pp_timeline_filter_match (&f, 0, &w4));
  /* combined: every term holds; kinds are alternatives */
  g_assert_cmpint (pp_timeline_filter_parse ("W, micro-batch 3 step 5", &f, err, sizeof err), ==, 0);
  g_assert_true (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_false (pp_timeline_filter_match (&f, 0, &f3));
  g_assert_false (pp_timeline_filter_match (&f, 0, &w4));
  g_assert_cmpint (pp_timeline_filter_parse ("F w", &f, err, sizeof err), ==, 0);
  g_assert_true (pp_timeline_filter_match (&f, 0, &f3) && pp_timeline_filter_match (&f, 0, &w4));
  g_assert_cmpint (pp_timeline_filter_parse ("stage 1-2 s2 mb3", &f, err, sizeof err), ==, 0);
  g_assert_true (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_false (pp_timeline_filter_match (&f, 0, &w4));
  g_assert_cmpint (pp_timeline_filter_parse ("rank 1", &f, err, sizeof err), ==, 0);
  g_assert_false (pp_timeline_filter_match (&f, 0, &w3));
  g_assert_true (pp_timeline_filter_match (&f, 1, &w3));
  g_assert_cmpint (pp_timeline_filter_parse ("all", &f, err, sizeof err), ==, 0);
  g_assert_false (f.active);
  /* mistakes: one line that says what is accepted */
  static const char *const bad[] = { "foo", "mb", "mb x", "3", "stage 4-2", "step -1" };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_cmpint (pp_timeline_filter_parse (bad[i], &f, err, sizeof err), ==, -1);
      g_assert_cmpuint (strlen (err), >, 10);
      g_assert_null (strchr (err, '\n'));
    }
}

/* A filter dims the blocks it does not name and leaves the others as they
 * were; arrows and a measured range draw where they say. */
static void
test_render_focus (Fixture *f, gconstpointer data)
{
  PpTimelineView v;
  PpTimelineLayout l;
  PpTimelineFilter flt;
  char err[160];
  double fc[3], bc[3];
  int64_t t0 = pp_timeline_model_start_ns (f->m);
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 400);
  cairo_t *cr = cairo_create (s);

  pp_timeline_view_init (&v, f->m, 1200, 400);
  pp_timeline_layout (f->m, &v, &l);
  pp_timeline_color (PP_SPAN_F, 0, fc);
  pp_timeline_color (PP_SPAN_B, 0, bc);
  g_assert_cmpint (pp_timeline_filter_parse ("B", &flt, err, sizeof err), ==, 0);
  v.filter = &flt;
  pp_timeline_render (cr, f->m, &v);
  cairo_surface_flush (s);
  double y = l.rows_y + l.block_h * 0.2;
  double xf = pp_timeline_x_of (&v, &l, t0 + MS / 2);                 /* GPU 0's F0 */
  double xb = pp_timeline_x_of (&v, &l, t0 + 15 * MS + MS);           /* GPU 0's B0 */
  g_assert_cmpfloat (patch_share (s, xf, y, fc, 0.1), ==, 0);
  g_assert_cmpfloat (patch_share (s, xb, y, bc, 0.02), ==, 1.0);

  /* "mb 0": F0 stays, F1 is dimmed */
  g_assert_cmpint (pp_timeline_filter_parse ("mb 0", &flt, err, sizeof err), ==, 0);
  pp_timeline_render (cr, f->m, &v);
  cairo_surface_flush (s);
  g_assert_cmpfloat (patch_share (s, xf, y, fc, 0.02), ==, 1.0);
  g_assert_cmpfloat (patch_share (s, pp_timeline_x_of (&v, &l, t0 + MS + MS / 2), y, fc, 0.1), ==, 0);

  /* with a filter on, the selected block's micro-batch is still outlined
   * on every rank: GPU 1's F0 (from 1 ms), GPU 0's F0 selected */
  {
    const PpSpan *sp = pp_timeline_model_spans (f->m, 0);
    double black[3] = { 0, 0, 0 };
    v.selected_rank = 0;
    v.selected_index = -1;
    for (size_t i = 0; i < pp_timeline_model_n_spans (f->m, 0); i++)
      if (sp[i].kind == PP_SPAN_F && sp[i].microbatch == 0)
        v.selected_index = (long) i;
    g_assert_cmpint (v.selected_index, >=, 0);
    pp_timeline_render (cr, f->m, &v);
    cairo_surface_flush (s);
    double xo = pp_timeline_x_of (&v, &l, t0 + MS) - 1;
    g_assert_cmpfloat (dist (pixel (s, (int) xo, (int) (l.rows_y + l.row_h + l.block_h * 0.5)), black), <, 0.3);
    v.selected_rank = -1;
    v.selected_index = -1;
  }
  v.filter = NULL;

  /* an arrow from GPU 0 at 1 ms to GPU 2 at 9 ms: its middle is dark */
  PpTimelineArrow a = { .from_rank = 0, .to_rank = 2, .from_ns = t0 + MS, .to_ns = t0 + 9 * MS };
  v.arrows = &a;
  v.n_arrows = 1;
  pp_timeline_render (cr, f->m, &v);
  cairo_surface_flush (s);
  {
    double mx = (pp_timeline_x_of (&v, &l, a.from_ns) + pp_timeline_x_of (&v, &l, a.to_ns)) / 2;
    double my = l.rows_y + l.row_h + l.block_h * 0.5;
    double black[3] = { 0, 0, 0 };
    int dark = 0;
    for (int dy = -2; dy <= 2; dy++)
      for (int dx = -2; dx <= 2; dx++)
        dark += dist (pixel (s, (int) mx + dx, (int) my + dy), black) < 0.3;
    g_assert_cmpint (dark, >=, 3);
  }
  v.arrows = NULL;
  v.n_arrows = 0;

  /* a measured range: the ruler is tinted inside it, not outside */
  v.has_range = 1;
  v.range_t0_ns = t0 + 10 * MS;
  v.range_t1_ns = t0 + 20 * MS;
  {
    cairo_surface_t *s0 = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 400);
    cairo_t *cr0 = cairo_create (s0);
    PpTimelineView v0 = v;
    v0.has_range = 0;
    pp_timeline_render (cr0, f->m, &v0);
    pp_timeline_render (cr, f->m, &v);
    cairo_surface_flush (s);
    cairo_surface_flush (s0);
    int yr = (int) (l.ruler_y + l.ruler_h - 2);
    int inside = (int) pp_timeline_x_of (&v, &l, t0 + 12 * MS), outside = (int) pp_timeline_x_of (&v, &l, t0 + 5 * MS);
    g_assert_cmpuint (pixel (s, inside, yr), !=, pixel (s0, inside, yr));
    g_assert_cmpuint (pixel (s, outside, yr), ==, pixel (s0, outside, yr));
    cairo_destroy (cr0);
    cairo_surface_destroy (s0);
  }
  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

/* A long run zoomed out: per rank and step a summary bar, the slow step's
 * length in vermillion under it; zoomed in, blocks again. */
static void
test_render_summaries (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it;
  PpTraceDescription d = { 0 };
  int64_t t = 0, slow_start = 0, slow_end = 0;
  const int n_steps = 300, slow = 150;

  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  d.n_ranks = 2;
  d.n_microbatches = 4;
  d.n_virtual = 1;
  it.type = PP_TRACE_ITEM_DESCRIPTION;
  it.description = &d;
  pp_timeline_model_add (m, &it);
  for (int step = 0; step < n_steps; step++)
    {
      int64_t len = step == slow ? 40 * MS : 14 * MS;
      if (step == slow)
        slow_start = t, slow_end = t + len;
      memset (&it, 0, sizeof it);
      it.type = PP_TRACE_ITEM_STEP_MARKER;
      it.step_marker.time_ns = t;
      it.step_marker.step = step;
      it.step_marker.phase = PP_TRACE_STEP_BEGIN;
      pp_timeline_model_add (m, &it);
      it.type = PP_TRACE_ITEM_SPAN;
      for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++)
          {
            int64_t a = t + r * MS + k * MS;
            it.span = (PpSpan) { .start_ns = a, .end_ns = a + MS, .rank = r, .stage = r, .microbatch = k,
                                 .step = step, .kind = PP_SPAN_F, .peer_rank = -1 };
            pp_timeline_model_add (m, &it);
            a = t + len - (8 - 2 * k) * MS - (1 - r) * MS;
            it.span = (PpSpan) { .start_ns = a, .end_ns = a + 2 * MS, .rank = r, .stage = r, .microbatch = k,
                                 .step = step, .kind = PP_SPAN_B, .peer_rank = -1 };
            pp_timeline_model_add (m, &it);
          }
      t += len;
    }
  {
    PpTimelineStepSummary sum;
    pp_timeline_summarize (m, 0, slow_start, slow_end, &sum);
    g_assert_cmpfloat (fabs (sum.busy_ns[PP_SPAN_F] - 4.0 * MS), <, 1);
    g_assert_cmpfloat (fabs (sum.busy_ns[PP_SPAN_B] - 8.0 * MS), <, 1);
    g_assert_cmpfloat (fabs (sum.busy_total_ns - 12.0 * MS), <, 1);
    g_assert_cmpfloat (fabs (sum.len_ns - 40.0 * MS), <, 1);
  }

  PpTimelineView v;
  PpTimelineLayout l;
  pp_timeline_view_init (&v, m, 1200, 300);
  g_assert_true (pp_timeline_view_summarized (m, &v));
  v.no_summaries = 1;
  g_assert_false (pp_timeline_view_summarized (m, &v));
  v.no_summaries = 0;
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 300);
  cairo_t *cr = cairo_create (s);
  pp_timeline_render (cr, m, &v);
  cairo_surface_flush (s);
  pp_timeline_layout (m, &v, &l);
  double wait_c[3], fc[3], bc[3];
  pp_timeline_color (PP_SPAN_WAIT, 0, wait_c);
  pp_timeline_color (PP_SPAN_F, 0, fc);
  pp_timeline_color (PP_SPAN_B, 0, bc);
  /* the thin lane: the slow step (40 ms against a 14 ms median) full
   * vermillion, a usual one not */
  double ty = l.rows_y + l.block_h + l.thin_h * 0.6;
  int xs = (int) pp_timeline_x_of (&v, &l, (slow_start + slow_end) / 2);
  int xn = (int) pp_timeline_x_of (&v, &l, slow_end + 40 * 14 * MS + 7 * MS);
  g_assert_cmpfloat (dist (pixel (s, xs, (int) ty), wait_c), <, 0.05);
  g_assert_cmpfloat (dist (pixel (s, xn, (int) ty), wait_c), >, 0.3);
  /* the bar: F (4 of 14 ms) at the bottom, B (8) above it, the bubble on top */
  g_assert_cmpfloat (dist (pixel (s, xn, (int) (l.rows_y + l.block_h - 3)), fc), <, 0.02);
  g_assert_cmpfloat (dist (pixel (s, xn, (int) (l.rows_y + l.block_h * 0.45)), bc), <, 0.02);
  {
    double sh = 0;
    double bub[3];
    pp_timeline_color (-1, 0, bub);
    for (int y = (int) l.rows_y + 1; y < (int) (l.rows_y + l.block_h * 0.1); y++)
      sh += dist (pixel (s, xn, y), fc) > 0.2 && dist (pixel (s, xn, y), bc) > 0.2;
    g_assert_cmpfloat (sh, >=, 1);
  }
  /* zoomed to two steps: blocks */
  v.t0_ns = slow_end;
  v.t1_ns = slow_end + 28 * MS;
  g_assert_false (pp_timeline_view_summarized (m, &v));
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);
}

/* A rank whose stream was lost: the model keeps what came and marks the
 * row from the last event on; the rest of the chart is unchanged. */
static void
test_rank_lost (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < (r == 1 ? 3 : 10); k++)
      {
        it.span = (PpSpan) { .start_ns = k * 2 * MS, .end_ns = k * 2 * MS + MS, .rank = r, .stage = r,
                             .microbatch = k, .kind = PP_SPAN_F, .peer_rank = -1 };
        pp_timeline_model_add (m, &it);
      }
  g_assert_cmpint (pp_timeline_model_rank_lost (m, 1), ==, INT64_MAX);
  PpTimelineView v;
  PpTimelineLayout l;
  pp_timeline_view_init (&v, m, 800, 300);
  pp_timeline_layout (m, &v, &l);
  cairo_surface_t *s0 = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 800, 300);
  cairo_surface_t *s1 = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 800, 300);
  cairo_t *cr0 = cairo_create (s0), *cr1 = cairo_create (s1);
  pp_timeline_render (cr0, m, &v);

  g_assert_cmpint (pp_timeline_model_set_rank_lost (m, 1, PP_TIMELINE_LOST_AT_LAST_EVENT), ==, 1);
  g_assert_cmpint (pp_timeline_model_rank_lost (m, 1), ==, 5 * MS);   /* its last span's end */
  g_assert_cmpint (pp_timeline_model_set_rank_lost (m, 1, 7 * MS), ==, 0);   /* the first loss stands */
  g_assert_cmpint (pp_timeline_model_rank_lost (m, 0), ==, INT64_MAX);
  g_assert_cmpuint (pp_timeline_model_n_spans (m, 1), ==, 3);                /* nothing dropped */
  pp_timeline_render (cr1, m, &v);
  cairo_surface_flush (s0);
  cairo_surface_flush (s1);
  double y1 = l.rows_y + l.row_h + l.block_h * 0.5, y0 = l.rows_y + l.block_h * 0.5;
  int x_after = (int) pp_timeline_x_of (&v, &l, 12 * MS + MS / 2);
  int x_before = (int) pp_timeline_x_of (&v, &l, 2 * MS + MS / 2);
  int changed = 0;
  for (int dx = 0; dx < 20; dx++)
    changed += pixel (s0, x_after + dx, (int) y1) != pixel (s1, x_after + dx, (int) y1);
  g_assert_cmpint (changed, >=, 15);
  g_assert_cmpuint (pixel (s0, x_before, (int) y1), ==, pixel (s1, x_before, (int) y1));
  g_assert_cmpuint (pixel (s0, x_after, (int) y0), ==, pixel (s1, x_after, (int) y0));   /* rank 0 */
  /* a rank nothing came from is lost from the run's last event on */
  g_assert_cmpint (pp_timeline_model_set_rank_lost (m, 3, PP_TIMELINE_LOST_AT_LAST_EVENT), ==, 1);
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 4);
  g_assert_cmpint (pp_timeline_model_rank_lost (m, 3), ==, 19 * MS);
  g_assert_cmpint (pp_timeline_model_set_rank_lost (m, -1, 0), ==, 0);
  cairo_destroy (cr0);
  cairo_destroy (cr1);
  cairo_surface_destroy (s0);
  cairo_surface_destroy (s1);
  pp_timeline_model_free (m);
}

/* ---- exports and the CLI -------------------------------------------------------- */

static void
assert_magic (const char *path, const char *magic, const char *magic2)
{
  char *data;
  gsize len;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  g_assert_true ((len >= strlen (magic) && memcmp (data, magic, strlen (magic)) == 0)
                 || (magic2 && len >= strlen (magic2) && memcmp (data, magic2, strlen (magic2)) == 0));
  g_free (data);
}

/* Whether the file holds needle anywhere (binary files: NULs and all). */
static gboolean
file_holds (const char *path, const char *needle)
{
  char *data = NULL;
  gsize len = 0, n = strlen (needle);
  gboolean found = FALSE;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  for (gsize i = 0; !found && i + n <= len; i++)
    found = memcmp (data + i, needle, n) == 0;
  g_free (data);
  return found;
}

static void
test_export (Fixture *f, gconstpointer data)
{
  PpTimelineView v;
  PpError err = { 0 };
  char *png = g_build_filename (f->dir, "t.png", NULL);
  char *svg = g_build_filename (f->dir, "t.svg", NULL);
  char *pdf = g_build_filename (f->dir, "t.pdf", NULL);
  char *bmp = g_build_filename (f->dir, "t.bmp", NULL);
  char *bad = g_build_filename (f->dir, "no", "such", "t.png", NULL);

  pp_timeline_view_init (&v, f->m, 900, 350);
  v.show_plan = 1;
  g_assert_cmpint (pp_timeline_export (f->m, &v, png, &err), ==, PP_OK);
  assert_magic (png, "\x89PNG", NULL);
  {
    cairo_surface_t *s = cairo_image_surface_create_from_png (png);
    g_assert_cmpint (cairo_surface_status (s), ==, CAIRO_STATUS_SUCCESS);
    g_assert_cmpint (cairo_image_surface_get_width (s), ==, 900);
    g_assert_cmpint (cairo_image_surface_get_height (s), ==, 350);
    cairo_surface_destroy (s);
  }
  g_assert_cmpint (pp_timeline_export (f->m, &v, svg, &err), ==, PP_OK);
  assert_magic (svg, "<?xml", "<svg");
  {
    /* sized in pixels, as asked */
    char *text = NULL;
    g_assert_true (g_file_get_contents (svg, &text, NULL, NULL));
    g_assert_nonnull (strstr (text, "width=\"900px\""));
    g_assert_nonnull (strstr (text, "height=\"350px\""));
    /* text stays text, searchable (issue 17): labels as <text>, no glyph
     * outlines, and still one closing tag */
    g_assert_nonnull (strstr (text, ">step 0</text>"));
    g_assert_nonnull (strstr (text, ">GPipe   P=4  M=6  V=1</text>"));
    g_assert_nonnull (strstr (text, ">forward F</text>"));
    g_assert_null (strstr (text, "glyph"));
    g_assert_cmpint (pp_test_count (text, "</svg>"), ==, 1);
    g_assert_true (g_str_has_suffix (g_strchomp (text), "</svg>"));
    g_free (text);
  }
  v.dark = 1;
  g_assert_cmpint (pp_timeline_export (f->m, &v, pdf, &err), ==, PP_OK);
  assert_magic (pdf, "%PDF", NULL);
  /* the page is the pixel size at 96 dpi: 900 x 350 px, 675 x 262.5 pt */
  g_assert_true (file_holds (pdf, "/MediaBox [ 0 0 675 262.5 ]"));

  g_assert_cmpint (pp_timeline_export (f->m, &v, bmp, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, ".png"));
  g_assert_null (strchr (err.msg, '\n'));
  g_assert_false (g_file_test (bmp, G_FILE_TEST_EXISTS));
  g_assert_cmpint (pp_timeline_export (f->m, &v, bad, &err), ==, PP_EIO);
  g_assert_null (strchr (err.msg, '\n'));
  g_free (png); g_free (svg); g_free (pdf); g_free (bmp); g_free (bad);
}

static void
test_cli_render (Fixture *f, gconstpointer data)
{
  char *out, *err;
  char *png = g_build_filename (f->dir, "c.png", NULL);
  char *pdf = g_build_filename (f->dir, "c.pdf", NULL);
  char *missing = g_build_filename (f->dir, "missing.pptrace", NULL);

  g_assert_cmpint (run (&out, &err, "render", f->trace, "-o", png, "--width", "800", "--height", "300", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);
  {
    cairo_surface_t *s = cairo_image_surface_create_from_png (png);
    g_assert_cmpint (cairo_surface_status (s), ==, CAIRO_STATUS_SUCCESS);
    g_assert_cmpint (cairo_image_surface_get_width (s), ==, 800);
    g_assert_cmpint (cairo_image_surface_get_height (s), ==, 300);
    cairo_surface_destroy (s);
  }
  g_assert_cmpint (run (&out, &err, "render", f->trace, "-o", pdf, "--from", "1.5ms", "--to", "12ms",
                        "--plan", "--dark", NULL), ==, 0);
  g_free (out); g_free (err);
  assert_magic (pdf, "%PDF", NULL);
  /* a paper size: landscape A4, 1123 x 794 px at 96 dpi */
  g_assert_cmpint (run (&out, &err, "render", f->trace, "-o", pdf, "--paper", "a4", "--plan", NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (file_holds (pdf, "/MediaBox [ 0 0 842.25 595.5 ]"));
  /* a step by its number */
  g_assert_cmpint (run (&out, &err, "render", f->trace, "-o", png, "--steps", "0", NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_free (out); g_free (err);

  /* Mistakes: one line, exit 2 for usage, 1 for a file that cannot be read. */
  static const char *const bad[][8] = {
    { "render", NULL },
    { "render", "T", NULL },                                  /* no -o */
    { "render", "T", "-o", "x.bmp", NULL },
    { "render", "T", "-o", "x.png", "--width", "wide", NULL },
    { "render", "T", "-o", "x.png", "--from", "12 parsecs", NULL },
    { "render", "T", "-o", "x.png", "--from", "5ms", "--to", "2ms" },
    { "render", "T", "-o", "x.png", "--bogus", NULL },
    { "render", "T", "-o", "x.png", "--from", "100s", "--to", "200s" },   /* nothing there */
    { "render", "T", "-o", "x.png", "--steps", "9", NULL },             /* no such step */
    { "render", "T", "-o", "x.png", "--steps", "3-1", NULL },
    { "render", "T", "-o", "x.png", "--steps", "0", "--from", "1ms" },
    { "render", "T", "-o", "x.pdf", "--paper", "a5", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *a[8] = { 0 };
      for (int k = 0; k < 8 && bad[i][k]; k++)
        a[k] = strcmp (bad[i][k], "T") == 0 ? f->trace : bad[i][k];
      g_assert_cmpint (run (&out, &err, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL), ==, 2);
      pp_test_assert_one_line_error (err);
      g_free (out); g_free (err);
    }
  g_assert_cmpint (run (&out, &err, "render", missing, "-o", png, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_free (png); g_free (pdf); g_free (missing);
}

/* The header's two lines as render wrote them into an SVG (y 20 and 39),
 * each checked to fit: its text's advance, measured in the renderer's font
 * and size, from its x, ends inside the image.  Returns the second line. */
static char *
header_fits (const char *svg, double width)
{
  char *text = NULL, *second = NULL;
  int lines = 0;
  g_assert_true (g_file_get_contents (svg, &text, NULL, NULL));
  GRegex *re = g_regex_new ("<text x=\"([0-9.]+)\" y=\"(20|39)\\.00\" font-size=\"([0-9.]+)\"( font-weight=\"bold\")?"
                            "[^>]*>([^<]*)</text>", 0, 0, NULL);
  GMatchInfo *mi = NULL;
  cairo_surface_t *surf = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 16, 16);
  cairo_t *cr = cairo_create (surf);
  /* as an SVG surface measures (and a viewer draws) text: advances not
   * rounded to whole pixels */
  cairo_font_options_t *fo = cairo_font_options_create ();
  cairo_font_options_set_hint_metrics (fo, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style (fo, CAIRO_HINT_STYLE_NONE);
  cairo_set_font_options (cr, fo);
  cairo_font_options_destroy (fo);
  g_regex_match (re, text, 0, &mi);
  for (; g_match_info_matches (mi); g_match_info_next (mi, NULL))
    {
      char *x = g_match_info_fetch (mi, 1), *y = g_match_info_fetch (mi, 2), *size = g_match_info_fetch (mi, 3);
      char *bold = g_match_info_fetch (mi, 4), *body = g_match_info_fetch (mi, 5);
      /* the SVG's escapes back to the text drawn */
      GString *t = g_string_new (body);
      g_string_replace (t, "&gt;", ">", 0);
      g_string_replace (t, "&lt;", "<", 0);
      g_string_replace (t, "&apos;", "'", 0);
      g_string_replace (t, "&quot;", "\"", 0);
      g_string_replace (t, "&amp;", "&", 0);
      cairo_text_extents_t e;
      cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL,
                              bold[0] ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
      cairo_set_font_size (cr, g_ascii_strtod (size, NULL));
      cairo_text_extents (cr, t->str, &e);
      g_assert_cmpfloat (g_ascii_strtod (x, NULL) + e.x_advance, <=, width);
      if (strcmp (y, "39") == 0)
        {
          g_free (second);
          second = g_strdup (t->str);
        }
      lines++;
      g_string_free (t, TRUE);
      g_free (x); g_free (y); g_free (size); g_free (bold); g_free (body);
    }
  g_assert_cmpint (lines, ==, 2);
  g_match_info_free (mi);
  g_regex_unref (re);
  cairo_destroy (cr);
  cairo_surface_destroy (surf);
  g_free (text);
  g_assert_nonnull (second);
  return second;
}

/* render -W 1000 of a PyTorch job, whose model line names its stages:
 * the header fits the width, the model line cut short so that the run's
 * figures after it stay; wide enough, nothing is cut. */
static void
test_header_fits (Fixture *f, gconstpointer data)
{
  char *t = g_build_filename (f->dir, "long.pptrace", NULL);
  char *svg = g_build_filename (f->dir, "long.svg", NULL);
  char *out, *err;
  PpError e = { 0 };
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  snprintf (d.schedule, sizeof d.schedule, "DualPipeV");
  snprintf (d.backend, sizeof d.backend, "cpu");
  snprintf (d.host, sizeof d.host, "vm");
  snprintf (d.model, sizeof d.model, "PyTorch 2.15.0+cu132 gloo ScheduleDualPipeV stages->ranks 0:0,1:1,2:1,3:0; "
            "params of rank 0's stages s0 8.3k s3 8.3k & more <stages>");
  d.n_ranks = 2;
  d.n_microbatches = 4;
  d.n_virtual = 2;
  d.start_monotonic_ns = 1000 * MS;
  PpTraceWriter *w = pp_trace_writer_new_path (t, PP_TRACE_NATIVE, &e);
  g_assert_nonnull (w);
  g_assert_cmpint (pp_trace_write_description (w, &d, &e), ==, PP_OK);
  PpSpan sp[4];
  memset (sp, 0, sizeof sp);
  for (int i = 0; i < 4; i++)
    {
      sp[i].rank = i % 2;
      sp[i].stage = i % 2;
      sp[i].microbatch = i / 2;
      sp[i].kind = PP_SPAN_F;
      sp[i].device = 0xffff;
      sp[i].peer_rank = -1;
      sp[i].start_ns = (1000 + 2 * i) * MS;
      sp[i].end_ns = sp[i].start_ns + MS;
    }
  g_assert_cmpint (pp_trace_write_spans (w, sp, 4, &e), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);

  g_assert_cmpint (run (&out, &err, "render", t, "-W", "1000", "-o", svg, NULL), ==, 0);
  g_free (out); g_free (err);
  char *second = header_fits (svg, 1000);
  g_assert_nonnull (strstr (second, "model PyTorch 2.15.0"));
  g_assert_nonnull (strstr (second, "…  ·  host vm  ·  "));
  g_assert_nonnull (strstr (second, " shown"));
  g_free (second);
  /* narrower than the figures: cut at the end, still inside */
  g_assert_cmpint (run (&out, &err, "render", t, "-W", "300", "-o", svg, NULL), ==, 0);
  g_free (out); g_free (err);
  g_free (header_fits (svg, 300));
  /* wide: the whole model line */
  g_assert_cmpint (run (&out, &err, "render", t, "-W", "3000", "-o", svg, NULL), ==, 0);
  g_free (out); g_free (err);
  second = header_fits (svg, 3000);
  g_assert_nonnull (strstr (second, d.model));
  g_assert_null (strstr (second, "…"));
  g_free (second);
  g_free (t);
  g_free (svg);
}

/* A file cut inside a record opens with what it holds, and says so. */
static void
test_model_truncated (Fixture *f, gconstpointer data)
{
  g_assert_false (pp_timeline_model_truncated (f->m));
  char *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (f->trace, &bytes, &len, NULL));
  char *cut = g_build_filename (f->dir, "cut.pptrace", NULL);
  PpError e = { 0 };
  /* mid-way (not on a record's edge: records are 8-byte aligned), then
   * before the first record, then nothing at all */
  gsize sizes[] = { len / 2 + 3, 5, 0 };
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_assert_true (g_file_set_contents (cut, bytes, (gssize) sizes[i], NULL));
      PpTimelineModel *m = pp_timeline_model_new_from_file (cut, &e);
      g_assert_nonnull (m);
      g_assert_true (pp_timeline_model_truncated (m));
      if (i == 0)
        g_assert_cmpuint (pp_timeline_model_n_spans_total (m), <, pp_timeline_model_n_spans_total (f->m));
      else
        g_assert_cmpuint (pp_timeline_model_n_spans_total (m), ==, 0);
      pp_timeline_model_free (m);
    }
  g_free (cut);
  g_free (bytes);
}

/* Numbers in a description's model line, as the stats panel and What if
 * read them. */
static void
test_description_number (void)
{
  PpTraceDescription d = { 0 };
  g_strlcpy (d.model, "residual MLP: 8 blocks, width 256, hidden 1024, batch 64", sizeof d.model);
  g_assert_cmpint (pp_timeline_description_number (&d, "blocks", 1), ==, 8);
  g_assert_cmpint (pp_timeline_description_number (&d, "width", 0), ==, 256);
  g_assert_cmpint (pp_timeline_description_number (&d, "batch", 0), ==, 64);
  g_assert_cmpint (pp_timeline_description_number (&d, "layers", 0), ==, 0);
  g_strlcpy (d.model, "gpt: micro-batch 4, batch=32", sizeof d.model);
  g_assert_cmpint (pp_timeline_description_number (&d, "batch", 0), ==, 32);
  g_strlcpy (d.model, "test, batch: 8", sizeof d.model);
  g_assert_cmpint (pp_timeline_description_number (&d, "batch", 0), ==, 8);
  g_assert_cmpint (pp_timeline_description_number (NULL, "batch", 0), ==, 0);
}

/* Spans that come out of order are in start order at the next query, and
 * spans that start together keep the order they came in; a million that
 * come reversed are taken in time linear in their number (they were moved
 * one by one: a million would take hours, which the test's timeout
 * catches as a hang). */
static void
test_model_reversed_spans (void)
{
  const int N = 1000000;
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  it.span.rank = 0;
  it.span.stage = 0;
  it.span.kind = PP_SPAN_F;
  it.span.device = 0xffff;
  it.span.peer_rank = -1;
  for (int i = N - 1; i >= 0; i--)
    {
      /* two spans a start time: the first to come is micro-batch 0 */
      it.span.start_ns = 1000 + (int64_t) (i / 2) * 10;
      it.span.end_ns = it.span.start_ns + 5;
      it.span.microbatch = i % 2 == 1 ? 0 : 1;
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpuint (pp_timeline_model_n_spans (m, 0), ==, (size_t) N);
  const PpSpan *sp = pp_timeline_model_spans (m, 0);
  size_t bad_order = 0, bad_ties = 0;
  for (int i = 1; i < N; i++)
    {
      bad_order += sp[i].start_ns < sp[i - 1].start_ns;
      bad_ties += sp[i].start_ns == sp[i - 1].start_ns && !(sp[i - 1].microbatch == 0 && sp[i].microbatch == 1);
    }
  g_assert_cmpuint (bad_order, ==, 0);
  g_assert_cmpuint (bad_ties, ==, 0);
  /* a query in the middle finds the first span that can overlap */
  size_t k = pp_timeline_model_first_overlapping (m, 0, 1000 + 250000 * 10);
  g_assert_cmpint (sp[k].start_ns, >=, 1000 + 250000 * 10 - 5);
  g_assert_cmpint (sp[k].start_ns, <=, 1000 + 250000 * 10);

  /* in order again after more come, late ones included */
  it.span.start_ns = 1000 + 5;   /* between the first two starts */
  it.span.end_ns = it.span.start_ns + 1;
  it.span.microbatch = 7;
  pp_timeline_model_add (m, &it);
  sp = pp_timeline_model_spans (m, 0);
  g_assert_cmpint (sp[2].microbatch, ==, 7);
  g_assert_cmpint (sp[2].start_ns, ==, 1005);
  pp_timeline_model_free (m);
}

/* Activation memory over time costs a bounded amount per rank, whatever
 * the number of counters: thinned evenly, in time order, the first kept. */
static void
test_model_memory_bounded (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER };
  it.counter.kind = PP_COUNTER_ACTIVATION_BYTES;
  const int N = 100000;
  for (int i = 0; i < N; i++)
    {
      it.counter.time_ns = (int64_t) i * 1000;
      it.counter.value = i % 7;
      pp_timeline_model_add (m, &it);
    }
  size_t n = 0;
  const PpTimelineMemorySample *v = pp_timeline_model_memory (m, 0, &n);
  g_assert_cmpuint (n, >, PP_TIMELINE_MEMORY_MAX / 4);
  g_assert_cmpuint (n, <=, PP_TIMELINE_MEMORY_MAX);
  g_assert_cmpint (v[0].t, ==, 0);
  size_t out_of_order = 0;
  for (size_t i = 1; i < n; i++)
    out_of_order += v[i].t <= v[i - 1].t;
  g_assert_cmpuint (out_of_order, ==, 0);
  pp_timeline_model_free (m);
}

/* The live step: before its marker (written once the step is over), the
 * step after the last marked one begins where its first block does; the
 * marker, earlier, wins when it comes.  A block of a step far ahead adds
 * no step. */
static void
test_model_live_step_boundary (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem mk = { .type = PP_TRACE_ITEM_STEP_MARKER };
  PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN };
  sp.span.kind = PP_SPAN_F;
  sp.span.device = 0xffff;
  sp.span.peer_rank = -1;
  for (int step = 0; step < 3; step++)
    {
      mk.step_marker.step = step;
      mk.step_marker.phase = PP_TRACE_STEP_BEGIN;
      mk.step_marker.time_ns = step * 1000;
      pp_timeline_model_add (m, &mk);
      sp.span.step = step;
      sp.span.start_ns = step * 1000 + 10;
      sp.span.end_ns = sp.span.start_ns + 100;
      pp_timeline_model_add (m, &sp);
    }
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 3);
  /* step 3 has begun: its first block is here, its marker not yet */
  sp.span.step = 3;
  sp.span.start_ns = 3050;
  sp.span.end_ns = 3150;
  pp_timeline_model_add (m, &sp);
  sp.span.start_ns = 3200;   /* a second block: still one boundary */
  sp.span.end_ns = 3300;
  pp_timeline_model_add (m, &sp);
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 4);
  g_assert_cmpint (pp_timeline_model_step_starts (m)[3], ==, 3050);
  /* a block far ahead (a crafted step number) adds no step */
  sp.span.step = 1000;
  sp.span.start_ns = 3400;
  pp_timeline_model_add (m, &sp);
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 4);
  /* the marker, earlier than the block, wins */
  mk.step_marker.step = 3;
  mk.step_marker.time_ns = 3000;
  pp_timeline_model_add (m, &mk);
  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, 4);
  g_assert_cmpint (pp_timeline_model_step_starts (m)[3], ==, 3000);
  pp_timeline_model_free (m);
}

/* A rank is named for what the trace knows: its device by the backend, and
 * its host once the ranks ran on more than one. */
static void
test_rank_labels (void)
{
  static const struct { const char *backend, *want; } cases[] = {
    { "cuda", "GPU 2" }, { "cpu", "CPU rank 2" }, { "simulated", "rank 2" }, { "", "rank 2" },
  };
  char buf[96];
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PpTimelineModel *m = pp_timeline_model_new ();
      PpTraceDescription d = { 0 };
      g_strlcpy (d.backend, cases[i].backend, sizeof d.backend);
      d.n_ranks = 4;
      PpTraceItem it = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &d };
      pp_timeline_model_add (m, &it);
      pp_timeline_model_rank_label (m, 2, buf, sizeof buf);
      g_assert_cmpstr (buf, ==, cases[i].want);

      /* where the ranks ran: one host says nothing more, two name it */
      PpTraceItem rk = { .type = PP_TRACE_ITEM_RANK };
      for (int r = 0; r < 4; r++)
        {
          rk.rank_info.rank = r;
          rk.rank_info.pid = 100 + r;
          g_strlcpy (rk.rank_info.host, "nodeA", sizeof rk.rank_info.host);
          pp_timeline_model_add (m, &rk);
        }
      pp_timeline_model_rank_label (m, 2, buf, sizeof buf);
      g_assert_cmpstr (buf, ==, cases[i].want);
      g_assert_cmpstr (pp_timeline_model_rank_host (m, 2), ==, "nodeA");
      rk.rank_info.rank = 3;
      g_strlcpy (rk.rank_info.host, "nodeB", sizeof rk.rank_info.host);
      pp_timeline_model_add (m, &rk);
      pp_timeline_model_rank_label (m, 3, buf, sizeof buf);
      g_assert_cmpstr (buf, ==, "nodeB:rank 3");
      pp_timeline_model_rank_label (m, 2, buf, sizeof buf);
      g_assert_cmpstr (buf, ==, "nodeA:rank 2");
      pp_timeline_model_free (m);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/render/model-gpipe", Fixture, NULL, fixture_setup, test_model_gpipe, fixture_teardown);
  g_test_add ("/render/model-truncated", Fixture, NULL, fixture_setup, test_model_truncated, fixture_teardown);
  g_test_add_func ("/render/model-items", test_model_items);
  g_test_add_func ("/render/description-number", test_description_number);
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
  g_test_add_func ("/render/filter-parse", test_filter_parse);
  g_test_add ("/render/focus", Fixture, NULL, fixture_setup, test_render_focus, fixture_teardown);
  g_test_add_func ("/render/summaries", test_render_summaries);
  g_test_add_func ("/render/rank-lost", test_rank_lost);
  g_test_add_func ("/render/rank-labels", test_rank_labels);
  g_test_add_func ("/render/model-live-step-boundary", test_model_live_step_boundary);
  g_test_add_func ("/render/model-memory-bounded", test_model_memory_bounded);
  g_test_add_func ("/render/model-reversed-spans", test_model_reversed_spans);
  g_test_add ("/render/export", Fixture, NULL, fixture_setup, test_export, fixture_teardown);
  g_test_add ("/render/cli", Fixture, NULL, fixture_setup, test_cli_render, fixture_teardown);
  g_test_add ("/render/header-fits", Fixture, NULL, fixture_setup, test_header_fits, fixture_teardown);
  return g_test_run ();
}
