/* The GTK widgets: the timeline's pixels (F blocks and the bubble where
 * GPipe 4x6 puts them), zoom, fit, range round trip and its signal, live
 * following, tooltips (and "waited ... for GPU k"), and that the stats, loss
 * and what-if panels show what the model holds without a warning.
 *
 * Needs a display: meson runs it under xvfb-run; without one it skips (77).
 * Pixels go through GSK_RENDERER=cairo so every machine agrees. */
#include <gtk/gtk.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "pp-compare.h"
#include "pp-heatmap-view.h"
#include "pp-panels.h"
#include "pp-span-table.h"
#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-timeline-widget.h"
#include "pp-timeline-details.h"
#include "pp-timeline-fold.h"
#include "pp-why-runtime.h"

#include "test-widgets-private.h"



char *tmpdir;

/* ---- helpers --------------------------------------------------------------- */

PpTimelineModel *
gpipe_model (void)
{
  char *path = g_build_filename (tmpdir, "gpipe.pptrace", NULL);
  char *out = NULL, *err = NULL;
  int rc = pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "GPipe", "-p", "4", "-m", "6",
                            "--trace", path, NULL);
  if (rc != 0)
    g_error ("pipescope-cli schedule failed (%d): %s", rc, err);
  PpError perr = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &perr);
  if (m == NULL)
    g_error ("%s: %s", path, perr.msg);
  g_free (out);
  g_free (err);
  g_free (path);
  return m;
}

void
wt_add_span (PpTimelineModel *m, int rank, int kind, int stage, int mb, int peer,
          gint64 start, gint64 end)
{
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  it.span.rank = rank;
  it.span.kind = (uint16_t) kind;
  it.span.stage = stage;
  it.span.microbatch = mb;
  it.span.peer_rank = peer;
  it.span.start_ns = start;
  it.span.end_ns = end;
  it.span.device = 0xffff;
  pp_timeline_model_add (m, &it);
}

void
add_description (PpTimelineModel *m, int P, int M, gint64 start)
{
  PpTraceDescription d = { 0 };
  g_strlcpy (d.schedule, "1F1B", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  g_strlcpy (d.model, "test, batch 8", sizeof d.model);
  d.n_ranks = P;
  d.n_microbatches = M;
  d.n_virtual = 1;
  d.start_monotonic_ns = start;
  PpTraceItem it = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &d };
  pp_timeline_model_add (m, &it);
}

gboolean
on_timeout (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Spins the main loop until the widget has its final size (or a minute
 * passes: a hang guard, as Xvfb on a loaded machine may take seconds). */
static void
wait_for_size (GtkWidget *w, int width, int height)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add (60000, on_timeout, &timed_out);   /* a hang guard */
  while (!timed_out && !(gtk_widget_get_mapped (w) && gtk_widget_get_width (w) == width
                         && gtk_widget_get_height (w) == height))
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  /* a few more frames: the first may still be in flight */
  for (int i = 0; i < 20 && g_main_context_pending (NULL); i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpint (gtk_widget_get_width (w), ==, width);
  g_assert_cmpint (gtk_widget_get_height (w), ==, height);
}

GtkWidget *
window_with (GtkWidget *child, int width, int height)
{
  GtkWidget *win = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (win), width, height);
  gtk_window_set_decorated (GTK_WINDOW (win), FALSE);
  gtk_window_set_child (GTK_WINDOW (win), child);
  gtk_window_present (GTK_WINDOW (win));
  wait_for_size (child, width, height);
  return win;
}

/* The widget's pixels, through its paintable, drawn by GSK's cairo path. */
cairo_surface_t *
render_widget (GtkWidget *w)
{
  int width = gtk_widget_get_width (w), height = gtk_widget_get_height (w);
  GdkPaintable *paintable = gtk_widget_paintable_new (w);
  gboolean drawn = FALSE, timed_out = FALSE;

  /* The paintable holds what the widget drew in its last frame: draw one. */
  g_signal_connect_swapped (paintable, "invalidate-contents", G_CALLBACK (on_timeout), &drawn);
  gtk_widget_queue_draw (w);
  guint id = g_timeout_add (60000, on_timeout, &timed_out);   /* a hang guard */
  while (!drawn && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  g_assert_true (drawn);

  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  GskRenderNode *node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);

  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width, height);
  cairo_t *cr = cairo_create (surface);
  cairo_set_source_rgb (cr, 1, 0, 1);       /* magenta: anything not drawn shows */
  cairo_paint (cr);
  gsk_render_node_draw (node, cr);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  gsk_render_node_unref (node);
  g_object_unref (paintable);
  return surface;
}

void
pixel (cairo_surface_t *s, double x, double y, double rgb[3])
{
  int ix = (int) floor (x), iy = (int) floor (y);
  g_assert_cmpint (ix, >=, 0);
  g_assert_cmpint (iy, >=, 0);
  g_assert_cmpint (ix, <, cairo_image_surface_get_width (s));
  g_assert_cmpint (iy, <, cairo_image_surface_get_height (s));
  const unsigned char *row = cairo_image_surface_get_data (s) + iy * cairo_image_surface_get_stride (s);
  guint32 p = ((const guint32 *) (const void *) row)[ix];
  rgb[0] = ((p >> 16) & 0xff) / 255.0;
  rgb[1] = ((p >> 8) & 0xff) / 255.0;
  rgb[2] = (p & 0xff) / 255.0;
}

/* Most of the 7x7 square around (x, y) has the color: hatching, outlines
 * and text may cover a few pixels, not half of them. */
static void
assert_region_color (cairo_surface_t *s, double x, double y, const double want[3], const char *what)
{
  int hits = 0, n = 0;
  double got[3];
  for (int dy = -3; dy <= 3; dy++)
    for (int dx = -3; dx <= 3; dx++, n++)
      {
        pixel (s, x + dx, y + dy, got);
        hits += fabs (got[0] - want[0]) + fabs (got[1] - want[1]) + fabs (got[2] - want[2]) <= 0.06;
      }
  if (2 * hits < n)
    {
      pixel (s, x, y, got);
      g_error ("%s: %d of %d pixels near (%.0f, %.0f) are rgb(%.3f, %.3f, %.3f); "
               "rgb(%.3f, %.3f, %.3f) at the centre",
               what, hits, n, x, y, want[0], want[1], want[2], got[0], got[1], got[2]);
    }
}

void
save_png (cairo_surface_t *s, const char *name)
{
  const char *dir = g_getenv ("PP_WIDGETS_SCREENSHOT_DIR");
  if (dir == NULL || !*dir)
    return;
  char *path = g_build_filename (dir, name, NULL);
  g_assert_cmpint (cairo_surface_write_to_png (s, path), ==, CAIRO_STATUS_SUCCESS);
  g_free (path);
}

void
collect_labels (GtkWidget *w, GString *out)
{
  if (GTK_IS_LABEL (w))
    {
      g_string_append (out, gtk_label_get_text (GTK_LABEL (w)));
      g_string_append_c (out, '\n');
    }
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    collect_labels (c, out);
}

static void
count_cb (gpointer instance, gpointer data)
{
  (*(int *) data)++;
}

static void
count_notify_cb (GObject *object, GParamSpec *pspec, gpointer data)
{
  (*(int *) data)++;
}

/* ---- timeline ------------------------------------------------------------------ */

static void
test_timeline_pixels (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *tl = pp_timeline_widget_new ();
  pp_timeline_widget_set_model (PP_TIMELINE_WIDGET (tl), m);
  GtkWidget *win = window_with (tl, WIN_W, WIN_H);

  PpTimelineView v;
  PpTimelineLayout l;
  pp_timeline_widget_get_view (PP_TIMELINE_WIDGET (tl), &v);
  g_assert_cmpfloat (v.width, ==, WIN_W);
  g_assert_cmpfloat (v.height, ==, WIN_H);
  gint64 start = pp_timeline_model_start_ns (m);
  g_assert_cmpint (v.t0_ns, ==, start);
  g_assert_cmpint (v.t1_ns, ==, pp_timeline_model_end_ns (m));
  g_assert_cmpint (v.t1_ns - v.t0_ns, ==, 27 * MS);
  pp_timeline_layout (m, &v, &l);

  cairo_surface_t *s = render_widget (tl);
  save_png (s, "timeline.png");

  double want[3];
  /* rank 0: F0 on [0, 1) ms, idle from 6 to 15 ms, B0 from 15 ms;
   * rank 3: F0 on [3, 4) ms.  Sample off the block's centre (its number). */
  double y0 = l.rows_y + 0.25 * l.block_h;
  double y3 = l.rows_y + 3 * l.row_h + 0.25 * l.block_h;
  pp_timeline_color (PP_SPAN_F, v.dark, want);
  assert_region_color (s, pp_timeline_x_of (&v, &l, start + MS / 5), y0, want, "rank 0 F0");
  assert_region_color (s, pp_timeline_x_of (&v, &l, start + 3 * MS + MS / 5), y3, want, "rank 3 F0");
  pp_timeline_color (-1, v.dark, want);
  assert_region_color (s, pp_timeline_x_of (&v, &l, start + 10 * MS), y0, want, "rank 0 bubble");
  assert_region_color (s, pp_timeline_x_of (&v, &l, start + 1 * MS + MS / 2), y3, want, "rank 3 bubble before its first F");
  pp_timeline_color (PP_SPAN_B, v.dark, want);
  assert_region_color (s, pp_timeline_x_of (&v, &l, start + 15 * MS + MS / 5), y0, want, "rank 0 B0");
  /* the window has the exports' legend (issue 17): F's and B's swatches
   * in the strip under the rows */
  g_assert_true (v.show_legend);
  for (int k = 0; k < 2; k++)
    {
      int hits = 0;
      double got[3];
      pp_timeline_color (k == 0 ? PP_SPAN_F : PP_SPAN_B, v.dark, want);
      for (int y = WIN_H - 28; y < WIN_H - 4; y++)
        for (int x = 0; x < WIN_W; x++)
          {
            pixel (s, x, y, got);
            hits += fabs (got[0] - want[0]) + fabs (got[1] - want[1]) + fabs (got[2] - want[2]) <= 0.06;
          }
      g_assert_cmpint (hits, >=, 100);
    }
  cairo_surface_destroy (s);

  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* Issue 17: a selected block's details and its micro-batch's arrows, a
 * measured range's busy and idle time and the zoom to it, find and filter. */
static long
span_index (PpTimelineModel *m, int rank, int kind, int mb)
{
  const PpSpan *sp = pp_timeline_model_spans (m, rank);
  for (size_t i = 0; i < pp_timeline_model_n_spans (m, rank); i++)
    if (sp[i].kind == kind && sp[i].microbatch == mb)
      return (long) i;
  g_error ("no span of kind %d, micro-batch %d on rank %d", kind, mb, rank);
  return -1;
}

static void
count_selected_cb (GtkWidget *w, int rank, glong index, gpointer data)
{
  (*(int *) data)++;
}

static void
test_timeline_details (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  GtkWidget *win = window_with (tl, WIN_W, WIN_H);
  int selected = 0, measured = 0;
  char r0[64], want[160];
  gint64 start = pp_timeline_model_start_ns (m), a, b;
  g_signal_connect (tl, "span-selected", G_CALLBACK (count_selected_cb), &selected);
  g_signal_connect (tl, "range-measured", G_CALLBACK (count_cb), &measured);
  pp_timeline_model_rank_label (m, 0, r0, sizeof r0);

  /* GPU 1's F0 waited for GPU 0's F0 and nothing else */
  pp_timeline_widget_select (t, 1, span_index (m, 1, PP_SPAN_F, 0));
  g_assert_cmpint (selected, ==, 1);
  char *text = pp_timeline_widget_selection_text (t);
  g_assert_nonnull (text);
  g_assert_nonnull (strstr (text, "Kind: F"));
  g_assert_nonnull (strstr (text, "Stage: 1"));
  g_assert_nonnull (strstr (text, "Micro-batch: 0"));
  g_assert_nonnull (strstr (text, "Step: 0"));
  g_assert_nonnull (strstr (text, "Start: 1.000 ms"));
  g_assert_nonnull (strstr (text, "Duration: 1.000 ms"));
  g_assert_nonnull (strstr (text, "Idle before it: none"));
  g_snprintf (want, sizeof want, "Waited for: F of stage 0, micro-batch 0 on %s, ended 0 ns before it — ended last", r0);
  g_assert_nonnull (strstr (text, want));
  g_free (text);
  /* micro-batch 0's arrows: F 0→1→2→3, each B after its F, B 3→2→1→0 */
  const PpTimelineArrow *arrows;
  g_assert_cmpuint (pp_timeline_widget_get_arrows (t, &arrows), ==, 10);
  PpTimelineView v;
  pp_timeline_widget_get_view (t, &v);
  g_assert_true (v.arrows == arrows);
  g_assert_cmpuint (v.n_arrows, ==, 10);

  /* GPU 0's B0 (15 ms) waited 9 ms since its F5; GPU 1's B0 ended last */
  pp_timeline_widget_select (t, 0, span_index (m, 0, PP_SPAN_B, 0));
  text = pp_timeline_widget_selection_text (t);
  g_assert_nonnull (strstr (text, "Idle before it: 9.000 ms (since F of stage 0, micro-batch 5"));
  g_assert_nonnull (strstr (text, "Waited for: B of stage 1, micro-batch 0"));
  g_assert_nonnull (strstr (text, "ended last"));
  g_free (text);
  pp_timeline_widget_select (t, -1, -1);
  g_assert_null (pp_timeline_widget_selection_text (t));
  g_assert_cmpuint (pp_timeline_widget_get_arrows (t, NULL), ==, 0);
  g_assert_cmpint (selected, ==, 3);

  /* a measured range: GPU 0 computes its six forwards, then idles */
  g_assert_null (pp_timeline_widget_range_text (t));
  pp_timeline_widget_set_measured_range (t, start + 10 * MS, start);
  g_assert_cmpint (measured, ==, 1);
  g_assert_true (pp_timeline_widget_get_measured_range (t, &a, &b));
  g_assert_cmpint (a, ==, start);
  g_assert_cmpint (b, ==, start + 10 * MS);
  text = pp_timeline_widget_range_text (t);
  g_assert_nonnull (strstr (text, "Range: 10.000 ms"));
  g_snprintf (want, sizeof want, "%s: busy 6.000 ms, idle 4.000 ms (40%%)", r0);
  g_assert_nonnull (strstr (text, want));
  g_free (text);
  pp_timeline_widget_zoom_to_measured (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, start);
  g_assert_cmpint (b, ==, start + 10 * MS);
  pp_timeline_widget_set_measured_range (t, 0, 0);
  g_assert_false (pp_timeline_widget_get_measured_range (t, NULL, NULL));
  g_assert_cmpint (measured, ==, 2);

  /* find and filter */
  GError *error = NULL;
  g_assert_false (pp_timeline_widget_set_filter_text (t, "bogus 3", &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "bogus"));
  g_clear_error (&error);
  g_assert_true (pp_timeline_widget_set_filter_text (t, "B mb 3", &error));
  pp_timeline_widget_get_view (t, &v);
  g_assert_nonnull (v.filter);
  g_assert_true (v.filter->active);
  g_assert_true (pp_timeline_widget_set_filter_text (t, "", NULL));
  pp_timeline_widget_get_view (t, &v);
  g_assert_null (v.filter);

  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);

  /* an overlapped F+B (format 1.2) names both halves */
  m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  it.span = (PpSpan) { .start_ns = 0, .end_ns = MS, .stage = 2, .microbatch = 2, .kind = PP_SPAN_OVERLAP_F_B,
                       .sub_kind = PP_SPAN_B, .sub_stage = 1, .sub_microbatch = 0, .peer_rank = -1,
                       .device = 0xffff };
  pp_timeline_model_add (m, &it);
  PpTimelineBlockDetails d;
  g_assert_true (pp_timeline_block_details (m, NULL, 0, 0, &d));
  text = pp_timeline_block_details_text (m, &d);
  g_assert_nonnull (strstr (text, "Stage: 2\nMicro-batch: 2\nOverlapped with: B of stage 1, micro-batch 0\n"));
  g_free (text);
  pp_timeline_model_free (m);
}

static void
test_timeline_range (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  int changed = 0;
  gint64 a, b;

  g_object_ref_sink (tl);
  g_signal_connect (tl, "range-changed", G_CALLBACK (count_cb), &changed);
  pp_timeline_widget_set_model (t, m);
  gint64 start = pp_timeline_model_start_ns (m), end = pp_timeline_model_end_ns (m);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, start);
  g_assert_cmpint (b, ==, end);
  g_assert_cmpint (changed, ==, 1);

  /* zoom 2: half the width, same centre */
  pp_timeline_widget_zoom (t, 2.0);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (llabs ((b - a) - (end - start) / 2), <=, 1);
  g_assert_cmpint (llabs ((a + b) - (start + end)), <=, 2);
  g_assert_cmpint (changed, ==, 2);
  pp_timeline_widget_zoom (t, 0.5);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (llabs ((b - a) - (end - start)), <=, 2);

  /* fit restores the whole run */
  pp_timeline_widget_zoom (t, 8.0);
  pp_timeline_widget_zoom_to_fit (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, start);
  g_assert_cmpint (b, ==, end);

  /* set/get round trip; one signal per change, none for the same range */
  changed = 0;
  pp_timeline_widget_set_range (t, start + 2 * MS, start + 7 * MS);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, start + 2 * MS);
  g_assert_cmpint (b, ==, start + 7 * MS);
  g_assert_cmpint (changed, ==, 1);
  pp_timeline_widget_set_range (t, start + 2 * MS, start + 7 * MS);
  g_assert_cmpint (changed, ==, 1);
  PpTimelineView v;
  pp_timeline_widget_get_view (t, &v);
  g_assert_cmpint (v.t0_ns, ==, start + 2 * MS);
  g_assert_cmpint (v.t1_ns, ==, start + 7 * MS);

  /* properties notify only on change */
  int notified = 0;
  g_signal_connect (tl, "notify::show-plan", G_CALLBACK (count_notify_cb), &notified);
  pp_timeline_widget_set_show_plan (t, TRUE);
  pp_timeline_widget_set_show_plan (t, TRUE);
  g_assert_true (pp_timeline_widget_get_show_plan (t));
  g_assert_cmpint (notified, ==, 1);
  pp_timeline_widget_get_view (t, &v);
  g_assert_true (v.show_plan);

  pp_timeline_widget_set_model (t, NULL);
  g_assert_null (pp_timeline_widget_get_model (t));
  g_object_unref (tl);
  pp_timeline_model_free (m);
}

static void
test_timeline_live_follow (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  const gint64 S = G_GINT64_CONSTANT (5000000000);   /* 5 s on the monotonic clock */
  const gint64 SEC = 1000 * MS;
  gint64 a, b;

  g_object_ref_sink (tl);
  add_description (m, 1, 1, S);
  pp_timeline_widget_set_model (t, m);
  pp_timeline_widget_set_live (t, TRUE);
  g_assert_true (gtk_widget_get_focusable (tl));

  /* short run: everything in view */
  wt_add_span (m, 0, PP_SPAN_F, 0, 0, -1, S, S + 1 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, S);
  g_assert_cmpint (b, ==, S + 1 * SEC);
  wt_add_span (m, 0, PP_SPAN_B, 0, 0, -1, S + 1 * SEC, S + 4 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, S);
  g_assert_cmpint (b, ==, S + 4 * SEC);

  /* past 10 s: the width stays, the end follows */
  wt_add_span (m, 0, PP_SPAN_F, 0, 1, -1, S + 4 * SEC, S + 9 * SEC);
  pp_timeline_widget_model_changed (t);
  wt_add_span (m, 0, PP_SPAN_B, 0, 1, -1, S + 9 * SEC, S + 12 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (b, ==, S + 12 * SEC);
  g_assert_cmpint (b - a, ==, 9 * SEC);
  wt_add_span (m, 0, PP_SPAN_F, 0, 2, -1, S + 12 * SEC, S + 14 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, S + 5 * SEC);
  g_assert_cmpint (b, ==, S + 14 * SEC);

  /* the user zooms: the view stays where it is */
  pp_timeline_widget_zoom (t, 2.0);
  gint64 za, zb;
  pp_timeline_widget_get_range (t, &za, &zb);
  wt_add_span (m, 0, PP_SPAN_B, 0, 2, -1, S + 14 * SEC, S + 16 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, za);
  g_assert_cmpint (b, ==, zb);

  /* fit: follows again */
  pp_timeline_widget_zoom_to_fit (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (a, ==, S);
  g_assert_cmpint (b, ==, S + 16 * SEC);
  wt_add_span (m, 0, PP_SPAN_F, 0, 3, -1, S + 16 * SEC, S + 17 * SEC);
  pp_timeline_widget_model_changed (t);
  pp_timeline_widget_get_range (t, &a, &b);
  g_assert_cmpint (b, ==, S + 17 * SEC);
  g_assert_cmpint (b - a, ==, 16 * SEC);

  pp_timeline_widget_set_model (t, NULL);
  g_object_unref (tl);
  pp_timeline_model_free (m);
}

static void
test_timeline_tooltip (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  GtkWidget *win = window_with (tl, WIN_W, WIN_H);

  PpTimelineView v;
  PpTimelineLayout l;
  PpTimelineHit hit;
  pp_timeline_widget_get_view (t, &v);
  pp_timeline_layout (m, &v, &l);
  gint64 start = pp_timeline_model_start_ns (m);

  /* rank 1, F2 runs [3, 4) ms */
  double x = pp_timeline_x_of (&v, &l, start + 3 * MS + MS / 2);
  double y = l.rows_y + l.row_h + 0.5 * l.block_h;
  g_assert_true (pp_timeline_hit (m, &v, x, y, &hit));
  g_assert_cmpint (hit.rank, ==, 1);
  g_assert_false (hit.planned);
  const PpSpan *sp = &pp_timeline_model_spans (m, 1)[hit.index];
  g_assert_cmpint (sp->kind, ==, PP_SPAN_F);
  g_assert_cmpint (sp->microbatch, ==, 2);
  char *text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_cmpstr (text, ==, "rank 1 · stage 1 · micro-batch 2 · F · start 3.000 ms · 1.000 ms");
  g_free (text);

  /* zoomed in until the ruler reads µs, the tooltip reads µs (issue 30) */
  pp_timeline_widget_set_range (t, start + 3 * MS + MS / 2 - 20000, start + 3 * MS + MS / 2 + 20000);
  pp_timeline_widget_get_view (t, &v);
  g_assert_cmpstr (pp_timeline_ruler_unit (m, &v, NULL, NULL), ==, "µs");
  pp_timeline_layout (m, &v, &l);
  x = pp_timeline_x_of (&v, &l, start + 3 * MS + MS / 2);
  text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_cmpstr (text, ==, "rank 1 · stage 1 · micro-batch 2 · F · start 3000.000 µs · 1000.000 µs");
  g_free (text);
  pp_timeline_widget_zoom_to_fit (t);
  pp_timeline_widget_get_view (t, &v);
  pp_timeline_layout (m, &v, &l);

  /* the bubble has no tooltip */
  x = pp_timeline_x_of (&v, &l, start + 10 * MS);
  y = l.rows_y + 0.5 * l.block_h;
  text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_null (text);

  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);

  /* a block after a WAIT says what it waited for */
  const gint64 S = G_GINT64_CONSTANT (1000000000);
  m = pp_timeline_model_new ();
  add_description (m, 2, 1, S);
  wt_add_span (m, 0, PP_SPAN_F, 0, 0, -1, S, S + 1 * MS);
  wt_add_span (m, 0, PP_SPAN_SEND_F, 0, 0, 1, S + 1 * MS, S + 1 * MS + MS / 5);
  wt_add_span (m, 1, PP_SPAN_WAIT, 1, 0, 0, S + MS / 5, S + 1 * MS);
  wt_add_span (m, 1, PP_SPAN_RECV_F, 1, 0, 0, S + 1 * MS, S + 1 * MS + MS / 5);
  wt_add_span (m, 1, PP_SPAN_F, 1, 0, -1, S + 1 * MS + MS / 5, S + 2 * MS + MS / 5);
  tl = pp_timeline_widget_new ();
  t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  win = window_with (tl, WIN_W, WIN_H);
  pp_timeline_widget_get_view (t, &v);
  pp_timeline_layout (m, &v, &l);
  x = pp_timeline_x_of (&v, &l, S + 1 * MS + MS / 2 + MS / 5);
  y = l.rows_y + l.row_h + 0.5 * l.block_h;
  text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_cmpstr (text, ==, "CPU rank 1 · stage 1 · micro-batch 0 · F · start 1.200 ms · 1.000 ms\n"
                             "waited 0.800 ms for CPU rank 0");
  g_free (text);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);

  /* an overlapped F+B (format 1.2) names both halves */
  m = pp_timeline_model_new ();
  add_description (m, 2, 4, S);
  {
    PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
    it.span.rank = 0;
    it.span.kind = PP_SPAN_OVERLAP_F_B;
    it.span.stage = 2;
    it.span.microbatch = 2;
    it.span.sub_kind = PP_SPAN_B;
    it.span.sub_stage = 1;
    it.span.sub_microbatch = 0;
    it.span.peer_rank = -1;
    it.span.start_ns = S;
    it.span.end_ns = S + 2 * MS;
    it.span.device = 0xffff;
    pp_timeline_model_add (m, &it);
  }
  tl = pp_timeline_widget_new ();
  t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  win = window_with (tl, WIN_W, WIN_H);
  pp_timeline_widget_get_view (t, &v);
  pp_timeline_layout (m, &v, &l);
  x = pp_timeline_x_of (&v, &l, S + MS);
  y = l.rows_y + 0.5 * l.block_h;
  text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_cmpstr (text, ==, "CPU rank 0 · 2F2 + 1B0 overlapped (forward: stage 2, micro-batch 2; "
                             "backward B: stage 1, micro-batch 0) · start 0.000 ms · 2.000 ms");
  g_free (text);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* Issue 30: the arrow keys pan the timeline without a click into it first
 * (the window hands them over, focus on a button), but never while the
 * focus is in a text entry (Find's keys stay Find's); and they stop at
 * the run's ends. */
static void
test_timeline_arrows_from_window (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *button = gtk_button_new_with_label ("Run"), *entry = gtk_entry_new ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  gtk_box_append (GTK_BOX (box), button);
  gtk_box_append (GTK_BOX (box), entry);
  gtk_widget_set_vexpand (tl, TRUE);
  gtk_box_append (GTK_BOX (box), tl);
  pp_timeline_widget_set_model (t, m);
  GtkWidget *win = window_with (box, WIN_W, WIN_H);

  /* the window's key controller that runs before any child's */
  GtkEventController *keys = NULL;
  GListModel *cs = gtk_widget_observe_controllers (win);
  for (guint i = 0; i < g_list_model_get_n_items (cs) && keys == NULL; i++)
    {
      GObject *c = g_list_model_get_item (cs, i);
      if (GTK_IS_EVENT_CONTROLLER_KEY (c)
          && gtk_event_controller_get_propagation_phase (GTK_EVENT_CONTROLLER (c)) == GTK_PHASE_CAPTURE)
        keys = GTK_EVENT_CONTROLLER (c);
      g_object_unref (c);
    }
  g_object_unref (cs);
  g_assert_nonnull (keys);

  gint64 a0, a1, b0, b1;
  gboolean handled = FALSE;
  pp_timeline_widget_zoom (t, 4);
  pp_timeline_widget_get_range (t, &a0, &a1);
  gtk_widget_grab_focus (button);
  g_assert_true (gtk_root_get_focus (GTK_ROOT (win)) == button);
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Right, 0, 0, &handled);
  g_assert_true (handled);
  pp_timeline_widget_get_range (t, &b0, &b1);
  g_assert_cmpint (b0, >, a0);
  g_assert_cmpint (b1 - b0, ==, a1 - a0);

  /* in the entry, Left is the entry's */
  gtk_widget_grab_focus (entry);
  handled = FALSE;
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Left, 0, 0, &handled);
  g_assert_false (handled);
  pp_timeline_widget_get_range (t, &a0, &a1);
  g_assert_cmpint (a0, ==, b0);
  g_assert_cmpint (a1, ==, b1);

  /* with a modifier the window's own shortcuts keep it */
  gtk_widget_grab_focus (button);
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Left, 0, GDK_CONTROL_MASK, &handled);
  g_assert_false (handled);
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Left, 0, 0, &handled);
  g_assert_true (handled);
  pp_timeline_widget_get_range (t, &a0, &a1);
  g_assert_cmpint (a0, <, b0);

  /* "+" (Shift+= on most layouts) and "-" zoom likewise, not in the entry */
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_plus, 0, GDK_SHIFT_MASK, &handled);
  g_assert_true (handled);
  pp_timeline_widget_get_range (t, &b0, &b1);
  g_assert_cmpint (b1 - b0, <, a1 - a0);
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_minus, 0, 0, &handled);
  g_assert_true (handled);
  pp_timeline_widget_get_range (t, &a0, &a1);
  g_assert_cmpint (a1 - a0, >, b1 - b0);
  gtk_widget_grab_focus (entry);
  handled = FALSE;
  g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_minus, 0, 0, &handled);
  g_assert_false (handled);

  /* a held arrow stops at the run's end (and start), the width kept: a
   * tenth of the view at a time, 50 presses cross the run five times */
  gtk_widget_grab_focus (button);
  pp_timeline_widget_get_range (t, &a0, &a1);
  for (int i = 0; i < 50; i++)
    g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Right, 0, 0, &handled);
  pp_timeline_widget_get_range (t, &b0, &b1);
  g_assert_cmpint (b1, ==, pp_timeline_model_end_ns (m));
  g_assert_cmpint (b1 - b0, ==, a1 - a0);
  for (int i = 0; i < 50; i++)
    g_signal_emit_by_name (keys, "key-pressed", GDK_KEY_Left, 0, 0, &handled);
  pp_timeline_widget_get_range (t, &b0, &b1);
  g_assert_cmpint (b0, ==, pp_timeline_model_start_ns (m));
  g_assert_cmpint (b1 - b0, ==, a1 - a0);

  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* Where the pointer is over w, in w's coordinates, asked of GDK. */
static gboolean
pointer_in (GtkWidget *w, double *x, double *y)
{
  GtkNative *native = gtk_widget_get_native (w);
  GdkSeat *seat = gdk_display_get_default_seat (gtk_widget_get_display (w));
  GdkDevice *pointer = seat ? gdk_seat_get_pointer (seat) : NULL;
  double sx, sy, nx, ny;
  if (pointer == NULL
      || !gdk_surface_get_device_position (gtk_native_get_surface (native), pointer, &sx, &sy, NULL))
    return FALSE;
  gtk_native_get_surface_transform (native, &nx, &ny);
  graphene_point_t p = GRAPHENE_POINT_INIT ((float) (sx - nx), (float) (sy - ny)), q;
  if (!gtk_widget_compute_point (GTK_WIDGET (native), w, &p, &q) || !gtk_widget_contains (w, q.x, q.y))
    return FALSE;
  *x = q.x;
  *y = q.y;
  return TRUE;
}

/* The pointer stays where it is (the app's window opens under it, a live
 * view scrolls beneath it): no motion, no crossing reaches the widget, and
 * still its hover (and with it the tooltip) follows the block under the
 * pointer as the range moves. */
static void
test_timeline_still_pointer (void)
{
  const gint64 S = G_GINT64_CONSTANT (1000000000);
  PpTimelineModel *m = pp_timeline_model_new ();
  add_description (m, 1, 10, S);
  for (int i = 0; i < 10; i++)
    wt_add_span (m, 0, PP_SPAN_F, 0, i, -1, S + i * MS, S + (i + 1) * MS);
  /* a window over the middle of the screen, where Xvfb keeps its pointer */
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  GtkWidget *win = window_with (tl, 1000, 900);
  double px, py;
  if (!pointer_in (tl, &px, &py))
    {
      g_test_skip ("the pointer is not over the test window (run under xvfb-run)");
      gtk_window_destroy (GTK_WINDOW (win));
      pp_timeline_model_free (m);
      return;
    }

  int targets[] = { 2, 7, -1, 4 };   /* -1: after the last block */
  for (guint k = 0; k < G_N_ELEMENTS (targets); k++)
    {
      int i = targets[k];
      gint64 mid = i >= 0 ? S + i * MS + MS / 2 : S + 13 * MS;
      /* a 4 ms range with mid under the pointer */
      PpTimelineView v;
      PpTimelineLayout l;
      pp_timeline_widget_set_range (t, S, S + 4 * MS);
      pp_timeline_widget_get_view (t, &v);
      pp_timeline_layout (m, &v, &l);
      gint64 at = pp_timeline_t_of (&v, &l, px);
      pp_timeline_widget_set_range (t, S + (mid - at), S + (mid - at) + 4 * MS);
      for (int n = 0; n < 10 && g_main_context_pending (NULL); n++)
        g_main_context_iteration (NULL, FALSE);

      pp_timeline_widget_get_view (t, &v);
      pp_timeline_layout (m, &v, &l);
      PpTimelineHit hit;
      gboolean on_block = pp_timeline_hit (m, &v, px, py, &hit) && hit.index >= 0;
      if (i >= 0)
        {
          /* the layout must put a block row under the pointer */
          if (!on_block)
            g_error ("no block at the pointer (%.0f, %.0f): rows at %.0f, %.0f high", px, py,
                     l.rows_y, l.block_h);
          g_assert_cmpint (pp_timeline_model_spans (m, 0)[hit.index].microbatch, ==, i);
          g_assert_cmpint (v.hover_rank, ==, 0);
          g_assert_cmpint (v.hover_index, ==, hit.index);
          char *text = pp_timeline_widget_tooltip_text (t, px, py);
          char *want = g_strdup_printf ("micro-batch %d · F", i);
          g_assert_nonnull (strstr (text, want));
          g_free (want);
          g_free (text);
        }
      else
        {
          g_assert_false (on_block);
          g_assert_cmpint (v.hover_rank, ==, -1);
          g_assert_cmpint (v.hover_index, ==, -1);
        }
    }
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

int
main (int argc, char **argv)
{
  gboolean tap = FALSE;
  for (int i = 1; i < argc; i++)
    tap |= strcmp (argv[i], "--tap") == 0;

  g_setenv ("GSK_RENDERER", "cairo", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_disable_setlocale ();
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      /* No display: skip (meson's TAP reads the plan, a plain run the 77). */
      if (tap)
        {
          g_print ("1..0 # SKIP no display: run under xvfb-run\n");
          return 0;
        }
      g_printerr ("test-widgets: no display, skipped (run under xvfb-run)\n");
      return 77;
    }

  tmpdir = g_dir_make_tmp ("pp-widgets-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);

  g_test_add_func ("/widgets/timeline/pixels", test_timeline_pixels);
  g_test_add_func ("/widgets/timeline/range", test_timeline_range);
  g_test_add_func ("/widgets/timeline/details", test_timeline_details);
  g_test_add_func ("/widgets/timeline/live-follow", test_timeline_live_follow);
  g_test_add_func ("/widgets/timeline/tooltip", test_timeline_tooltip);
  g_test_add_func ("/widgets/timeline/arrows-from-window", test_timeline_arrows_from_window);
  g_test_add_func ("/widgets/timeline/still-pointer", test_timeline_still_pointer);
  test_widgets_panels_register ();
  int rc = g_test_run ();
  pp_test_rm_rf (tmpdir);
  g_free (tmpdir);
  return rc;
}
