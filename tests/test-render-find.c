/* test-render-find.c — the timeline's drawing of what a user asks for (issue 17): find and filter, the dependency arrows, time ranges, zoomed-out summaries, lost ranks; and the exports and the CLI's render. */
#include "test-render-private.h"

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

void
test_render_find_register (void)
{
  g_test_add ("/render/model-truncated", Fixture, NULL, fixture_setup, test_model_truncated, fixture_teardown);
  g_test_add_func ("/render/description-number", test_description_number);
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
}
