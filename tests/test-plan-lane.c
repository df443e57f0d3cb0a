/* Issue 30, report-grade images and a plan that is never cut: the plan
 * lane draws every planned block of every step, whole, even where the
 * measured step is shorter than the plan; plan and measured blocks are
 * labelled in one grammar; SVG and PDF exports hold no bitmap; the legend
 * keeps every entry at any width; an export "as shown" of a zoomed-out
 * window draws its per-step bars.  The renderer says what it drew
 * (PpTimelineDrawn); no time is asserted. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)
#define MS ((int64_t) 1000000)

/* The plan: 2 ranks, 4 micro-batches, F of 1 ms and B of 2 ms, 14 ms long
 * (rank 0: F0-F3 at 0-4 ms, B0-B3 at 6-14 ms; rank 1 one F later). */
#define N_PLAN 8
static void
plan_of_rank (int r, PpTracePlanAction *a)
{
  for (int k = 0; k < 4; k++)
    {
      a[k] = (PpTracePlanAction) { PP_TRACE_ACT_F, r, k, -1, -1, -1, (k + r) * 1e-3, (k + r + 1) * 1e-3 };
      double b0 = (r == 0 ? 6 : 5) + 2 * k;
      a[4 + k] = (PpTracePlanAction) { PP_TRACE_ACT_B, r, k, -1, -1, -1, b0 * 1e-3, (b0 + 2) * 1e-3 };
    }
}

/* Six steps, the first three slow (20 ms), the last three fast (8 ms,
 * shorter than the 14 ms plan): F and B spans in each, a begin marker. */
#define N_STEPS 6
static const int64_t step_len[N_STEPS] = { 20 * MS, 20 * MS, 20 * MS, 8 * MS, 8 * MS, 8 * MS };

static int64_t
step_start (int k)
{
  int64_t t = 1000 * MS;
  for (int i = 0; i < k; i++)
    t += step_len[i];
  return t;
}

static PpTimelineModel *
slow_then_fast (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceDescription d;
  PpTraceItem it;
  PpTracePlanAction plan[N_PLAN];

  memset (&d, 0, sizeof d);
  snprintf (d.schedule, sizeof d.schedule, "GPipe");
  snprintf (d.backend, sizeof d.backend, "cpu");
  d.n_ranks = 2;
  d.n_microbatches = 4;
  d.n_virtual = 1;
  d.start_monotonic_ns = 1000 * MS;
  memset (&it, 0, sizeof it);
  it.process = -1;
  it.type = PP_TRACE_ITEM_DESCRIPTION;
  it.description = &d;
  pp_timeline_model_add (m, &it);
  for (int r = 0; r < 2; r++)
    {
      plan_of_rank (r, plan);
      it.type = PP_TRACE_ITEM_PLAN;
      it.plan.rank = r;
      it.plan.has_timeline = 1;
      it.plan.n_actions = N_PLAN;
      it.plan.actions = plan;
      pp_timeline_model_add (m, &it);
    }
  for (int k = 0; k < N_STEPS; k++)
    {
      int64_t t0 = step_start (k), unit = step_len[k] / 12;
      for (int r = 0; r < 2; r++)
        {
          it.type = PP_TRACE_ITEM_STEP_MARKER;
          it.step_marker.rank = r;
          it.step_marker.step = k;
          it.step_marker.phase = PP_TRACE_STEP_BEGIN;
          it.step_marker.time_ns = t0;
          pp_timeline_model_add (m, &it);
          it.type = PP_TRACE_ITEM_SPAN;
          for (int mb = 0; mb < 4; mb++)
            {
              it.span = (PpSpan) { .start_ns = t0 + (mb + r) * unit, .end_ns = t0 + (mb + r + 1) * unit,
                                   .rank = r, .stage = r, .microbatch = mb, .step = k,
                                   .kind = PP_SPAN_F, .device = 0xffff, .peer_rank = -1 };
              pp_timeline_model_add (m, &it);
              it.span.start_ns = t0 + (6 + 1.5 * mb) * unit;
              it.span.end_ns = it.span.start_ns + unit * 3 / 2;
              it.span.kind = PP_SPAN_B;
              pp_timeline_model_add (m, &it);
            }
        }
    }
  return m;
}

static void
render_drawn (const PpTimelineModel *m, PpTimelineView *v, PpTimelineDrawn *drawn)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int) v->width, (int) v->height);
  cairo_t *cr = cairo_create (s);
  memset (drawn, 0, sizeof *drawn);
  v->drawn = drawn;
  pp_timeline_render (cr, m, v);
  v->drawn = NULL;
  g_assert_cmpint (cairo_status (cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

/* Every planned block of every step is drawn, whole: three steps are
 * shorter than the plan, and their copies run into the next step's
 * (drawn so) instead of losing their last blocks.  The plan's labels are
 * drawn, the legend says how the part past a step looks, and the hover
 * finds a block drawn past its step. */
static void
test_plan_never_cut (void)
{
  PpTimelineModel *m = slow_then_fast ();
  PpTimelineView v;
  PpTimelineDrawn drawn;

  g_assert_cmpuint (pp_timeline_model_n_steps (m), ==, N_STEPS);
  g_assert_cmpuint (pp_timeline_plan_copies (m), ==, N_STEPS);
  pp_timeline_view_init (&v, m, 3000, 400);
  v.t1_ns = step_start (N_STEPS - 1) + 16 * MS;   /* the last copy whole too */
  v.show_plan = 1;
  v.show_legend = 1;
  render_drawn (m, &v, &drawn);
  g_assert_false (drawn.summarized);
  /* every copy holds the plan's 8 actions of each of the 2 ranks */
  g_assert_cmpuint (drawn.plan_blocks, ==, (size_t) N_STEPS * 2 * N_PLAN);
  /* steps 3 and 4 (8 ms) are shorter than the plan (14 ms): rank 0's B1-B3
   * and rank 1's B1-B3 of each end past the next step's start */
  g_assert_cmpuint (drawn.plan_past_step, ==, 2 * 6);
  g_assert_cmpuint (drawn.plan_labels, >=, drawn.plan_blocks / 2);

  /* A view of step 3 alone (to step 4's start): its plan's last blocks are
   * past the view's end on the right, not gone; the next copy's first
   * blocks come in under them. */
  v.t0_ns = step_start (3);
  v.t1_ns = step_start (4) + 6 * MS;
  render_drawn (m, &v, &drawn);
  g_assert_cmpuint (drawn.plan_blocks, ==, 2 * N_PLAN + 2 * 4 + 2 /* copy 4: F0-F3, B0 of rank 1, B0 of rank 0 */);

  /* The hover finds rank 0's B3 of step 3 where it runs alone past step 4's
   * start (copy 4's rank 0 is idle from 4 to 6 ms into its step). */
  {
    PpTimelineLayout l;
    PpTimelineHit hit;
    pp_timeline_layout (m, &v, &l);
    double x = pp_timeline_x_of (&v, &l, step_start (4) + 5 * MS);
    double y = l.rows_y + l.block_h + l.thin_h + l.plan_h * 0.6;
    g_assert_true (pp_timeline_hit (m, &v, x, y, &hit));
    g_assert_true (hit.planned);
    g_assert_cmpint (hit.rank, ==, 0);
    g_assert_cmpint (hit.index, ==, 7);   /* B3 */
  }
  pp_timeline_model_free (m);
}

/* The legend names the plan's shades, and the part past a step when some
 * copy in view has one; not otherwise. */
static void
test_plan_legend (void)
{
  PpTimelineModel *m = slow_then_fast ();
  PpTimelineView v;
  PpTimelineDrawn with, without;
  pp_timeline_view_init (&v, m, 3000, 400);
  v.show_legend = 1;
  render_drawn (m, &v, &without);
  v.show_plan = 1;
  render_drawn (m, &v, &with);
  g_assert_cmpint (with.legend_items, ==, without.legend_items + 2);
  /* only the slow steps in view: no copy runs past its step */
  v.t1_ns = step_start (2);
  render_drawn (m, &v, &with);
  render_drawn (m, &v, &without);
  g_assert_cmpint (with.legend_items, ==, without.legend_items);
  pp_timeline_model_free (m);
}

/* ---- exports ------------------------------------------------------------------- */

typedef struct {
  char *dir, *trace;
} Dir;

static void
dir_setup (Dir *f, gconstpointer data)
{
  char *out, *err;
  f->dir = g_dir_make_tmp ("pp-plan-lane-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->trace = g_build_filename (f->dir, "dpv.pptrace", NULL);
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "DualPipeV", "-p", "4", "-m", "8",
                        "--trace", f->trace, NULL), ==, 0);
  g_free (out);
  g_free (err);
}

static void
dir_teardown (Dir *f, gconstpointer data)
{
  pp_test_rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->trace);
}

static char *
slurp (const char *path, gsize *len)
{
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, len, NULL));
  return text;
}

/* Whether data[0, len) holds needle (binary: NULs and all). */
static gboolean
holds (const char *data, gsize len, const char *needle)
{
  gsize n = strlen (needle);
  for (gsize i = 0; i + n <= len; i++)
    if (memcmp (data + i, needle, n) == 0)
      return TRUE;
  return FALSE;
}

/* The bubble's hatch in SVG and PDF is paths, not a bitmap tile: neither
 * file holds an image (cairo's PDF names one /Subtype /Image in its
 * object's dictionary, which is never compressed). */
static void
test_vector_hatch (Dir *f, gconstpointer data)
{
  char *out, *err;
  char *svg = g_build_filename (f->dir, "t.svg", NULL), *pdf = g_build_filename (f->dir, "t.pdf", NULL);
  gsize len;
  char *text;

  for (int dark = 0; dark < 2; dark++)
    {
      g_assert_cmpint (run (&out, &err, "render", f->trace, "--plan", "-o", svg, dark ? "--dark" : NULL, NULL), ==, 0);
      g_free (out); g_free (err);
      text = slurp (svg, &len);
      g_assert_null (strstr (text, "<image"));
      g_assert_nonnull (strstr (text, "<path"));
      g_assert_nonnull (strstr (text, ">bubble (idle or waiting)</text>"));
      g_free (text);
      g_assert_cmpint (run (&out, &err, "render", f->trace, "--plan", "-o", pdf, "--paper", "a4",
                            dark ? "--dark" : NULL, NULL), ==, 0);
      g_free (out); g_free (err);
      text = slurp (pdf, &len);
      g_assert_true (holds (text, len, "%PDF"));
      g_assert_false (holds (text, len, "/Subtype /Image"));
      g_free (text);
    }
  g_free (svg);
  g_free (pdf);
}

/* Plan and measured blocks speak one grammar: a simulated DualPipeV's
 * overlapped pairs read "0F7+7B3" in its blocks and in its plan, each label
 * twice (once a lane); "FB" as a label (the old "0FB7") is gone. */
static void
test_one_grammar (Dir *f, gconstpointer data)
{
  char *out, *err, *svg = g_build_filename (f->dir, "g.svg", NULL);
  gsize len;
  g_assert_cmpint (run (&out, &err, "render", f->trace, "--plan", "-W", "2400", "-o", svg, NULL), ==, 0);
  g_free (out); g_free (err);
  char *text = slurp (svg, &len);
  GRegex *re = g_regex_new (">([0-9]+F[0-9]+\\+[0-9]+[BI][0-9]+)</text>", 0, 0, NULL);
  GMatchInfo *mi = NULL;
  int pairs = 0;
  g_regex_match (re, text, 0, &mi);
  for (; g_match_info_matches (mi); g_match_info_next (mi, NULL))
    {
      char *label = g_match_info_fetch (mi, 1), *needle = g_strdup_printf (">%s</text>", label);
      g_assert_cmpint (pp_test_count (text, needle), ==, 2);
      pairs++;
      g_free (label);
      g_free (needle);
    }
  g_match_info_free (mi);
  g_regex_unref (re);
  /* DualPipeV P=4 M=8 overlaps 25 pairs; every one is labelled twice */
  g_assert_cmpint (pairs, ==, 2 * 25);
  g_assert_false (g_regex_match_simple (">[0-9]+FB[0-9]+</text>", text, 0, 0));
  g_free (text);
  g_free (svg);
}

/* The legend keeps every entry at any width: at 800 px it wraps onto more
 * lines with as many entries as at 1920, every label inside the image. */
static void
test_legend_fits (Dir *f, gconstpointer data)
{
  PpError e = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (f->trace, &e);
  g_assert_nonnull (m);
  PpTimelineView v;
  PpTimelineDrawn wide, narrow;
  pp_timeline_view_init (&v, m, 1920, 500);
  v.show_legend = 1;
  v.show_plan = 1;
  render_drawn (m, &v, &wide);
  v.width = 800;
  render_drawn (m, &v, &narrow);
  g_assert_cmpint (wide.legend_items, >=, 9);
  g_assert_cmpint (narrow.legend_items, ==, wide.legend_items);
  g_assert_cmpint (wide.legend_lines, ==, 1);
  g_assert_cmpint (narrow.legend_lines, >, 1);
  pp_timeline_model_free (m);

  /* render -W 800: the last entry is there, and its text ends inside */
  char *out, *err, *svg = g_build_filename (f->dir, "l.svg", NULL);
  g_assert_cmpint (run (&out, &err, "render", f->trace, "--plan", "-W", "800", "-o", svg, NULL), ==, 0);
  g_free (out); g_free (err);
  gsize len;
  char *text = slurp (svg, &len);
  GRegex *re = g_regex_new ("<text x=\"([0-9.]+)\" y=\"[0-9.]+\" font-size=\"([0-9.]+)\"[^>]*>"
                            "(step boundary|plan at unit costs|chunk 0 / 1 \\(shade\\))</text>", 0, 0, NULL);
  GMatchInfo *mi = NULL;
  int found = 0;
  cairo_surface_t *scratch = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t *cr = cairo_create (scratch);
  g_regex_match (re, text, 0, &mi);
  for (; g_match_info_matches (mi); g_match_info_next (mi, NULL))
    {
      char *x = g_match_info_fetch (mi, 1), *size = g_match_info_fetch (mi, 2), *label = g_match_info_fetch (mi, 3);
      cairo_text_extents_t te;
      cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
      cairo_set_font_size (cr, g_ascii_strtod (size, NULL));
      cairo_text_extents (cr, label, &te);
      g_assert_cmpfloat (g_ascii_strtod (x, NULL) + te.x_advance, <=, 800);
      found++;
      g_free (x); g_free (size); g_free (label);
    }
  g_assert_cmpint (found, ==, 3);
  g_match_info_free (mi);
  g_regex_unref (re);
  cairo_destroy (cr);
  cairo_surface_destroy (scratch);
  g_free (text);
  g_free (svg);
}

/* The legend names the plan the lane shows in the header's words: the
 * plan at unit costs of a schedule, at measured costs of a run. */
static void
test_legend_names_plan (Dir *f, gconstpointer data)
{
  char *out, *err, *t = g_build_filename (f->dir, "run.pptrace", NULL);
  const char *traces[2] = { f->trace, t }, *plans[2] = { "unit", "measured" };
  g_assert_cmpint (run (&out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "2", "--layers", "2", "--width", "16",
                        "--batch", "8", "--steps", "3", "--no-live", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  for (int i = 0; i < 2; i++)
    {
      char *svg = g_build_filename (f->dir, "named.svg", NULL), *text;
      g_assert_cmpint (run (&out, &err, "render", traces[i], "--plan", "-o", svg, NULL), ==, 0);
      g_free (out); g_free (err);
      text = slurp (svg, NULL);
      char *legend = g_strdup_printf (">plan at %s costs</text>", plans[i]);
      char *header = g_strdup_printf ("  ·  bubble, plan at %s costs ", plans[i]);
      g_assert_cmpint (pp_test_count (text, legend), ==, 1);
      g_assert_nonnull (strstr (text, header));
      g_assert_null (strstr (text, "simulated)"));
      g_free (legend); g_free (header); g_free (text); g_free (svg);
    }
  g_free (t);
}

/* An A4 page (1123 x 794 px, render --paper a4) of 1F1B on 2 ranks with
 * 48 micro-batches: the plan lane is tall, so its font is 12 px, and a B of
 * 14 px could not hold "47" in it; a smaller font can, so every planned B
 * gets its number (an F of 7 px holds none). */
static void
test_a4_plan_labels (Dir *f, gconstpointer data)
{
  char *out, *err, *t = g_build_filename (f->dir, "long.pptrace", NULL);
  PpError e = { 0 };
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "48", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  PpTimelineModel *m = pp_timeline_model_new_from_file (t, &e);
  g_assert_nonnull (m);
  PpTimelineView v;
  PpTimelineDrawn drawn;
  pp_timeline_view_init (&v, m, 1123, 794);
  v.show_plan = v.show_header = v.show_legend = 1;
  render_drawn (m, &v, &drawn);
  g_assert_cmpuint (drawn.plan_blocks, ==, 2 * 2 * 48);
  g_assert_cmpuint (drawn.plan_labels, >=, 2 * 48);
  pp_timeline_model_free (m);
  g_free (t);
}

/* An export "as shown" draws what the window drew: a window zoomed out
 * into per-step bars exported wider still draws bars (the wider image
 * alone would have drawn blocks), and a window of blocks exported
 * narrower still draws blocks. */
static void
test_as_shown (void)
{
  PpTimelineModel *m = slow_then_fast ();
  PpTimelineView window, out;
  PpTimelineDrawn drawn;
  /* 8 blocks a step of 15 ms on average: bars below 2 px a block */
  pp_timeline_view_init (&window, m, 120, 300);
  g_assert_true (pp_timeline_view_summarized (m, &window));
  pp_timeline_view_as_shown (m, &window, 3000, 800, &out);
  out.show_plan = 1;
  render_drawn (m, &out, &drawn);
  g_assert_true (drawn.summarized);
  /* bars hold no plan: each rank's plan lane says so, not left empty */
  g_assert_cmpuint (drawn.plan_blocks, ==, 0);
  g_assert_cmpint (drawn.plan_notes, ==, 2);
  /* and a pointer over that lane finds no plan block (no tooltip of a
   * block that is not drawn) */
  PpTimelineLayout l;
  PpTimelineHit hit;
  pp_timeline_layout (m, &out, &l);
  g_assert_cmpfloat (l.plan_h, >, 0);
  for (double fx = 0.1; fx < 1.0; fx += 0.2)
    g_assert_false (pp_timeline_hit (m, &out, l.x0 + fx * (l.x1 - l.x0),
                                     l.rows_y + l.block_h + l.thin_h + l.plan_h / 2, &hit)
                    && hit.planned);
  out = window;
  out.width = 3000;
  out.height = 800;
  g_assert_false (pp_timeline_view_summarized (m, &out));   /* what the width alone gives */

  pp_timeline_view_init (&window, m, 3000, 800);
  g_assert_false (pp_timeline_view_summarized (m, &window));
  pp_timeline_view_as_shown (m, &window, 120, 300, &out);
  render_drawn (m, &out, &drawn);
  g_assert_false (drawn.summarized);
  pp_timeline_model_free (m);
}

/* The header's bubble a step is kept between frames (it cost a pass and a
 * sort over every span each frame, at any zoom): kept while the model
 * stands, computed again when a span comes. */
static void
test_step_bubbles_follow_adds (void)
{
  PpTimelineModel *m = slow_then_fast ();
  double before[2], again[2], after[2];
  /* the steps the one analysis counts: every whole step but the first */
  g_assert_cmpint (pp_timeline_model_step_bubbles (m, before), ==, N_STEPS - 1);
  g_assert_cmpint (pp_timeline_model_step_bubbles (m, again), ==, N_STEPS - 1);
  g_assert_cmpfloat (again[0], ==, before[0]);
  g_assert_cmpfloat (again[1], ==, before[1]);
  /* rank 1 fills its steps' gaps: its bubble falls, rank 0's stays */
  PpTraceItem it;
  memset (&it, 0, sizeof it);
  it.process = -1;
  it.type = PP_TRACE_ITEM_SPAN;
  for (int k = 0; k < N_STEPS; k++)
    {
      it.span = (PpSpan) { .start_ns = step_start (k), .end_ns = step_start (k) + step_len[k] * 3 / 4,
                           .rank = 1, .stage = 1, .microbatch = 0, .step = k, .kind = PP_SPAN_W,
                           .device = 0xffff, .peer_rank = -1 };
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpint (pp_timeline_model_step_bubbles (m, after), ==, N_STEPS - 1);
  g_assert_cmpfloat (after[0], ==, before[0]);
  g_assert_cmpfloat (after[1], <, before[1]);
  pp_timeline_model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/plan-lane/never-cut", test_plan_never_cut);
  g_test_add_func ("/plan-lane/legend", test_plan_legend);
  g_test_add_func ("/plan-lane/step-bubbles-follow-adds", test_step_bubbles_follow_adds);
  g_test_add ("/plan-lane/vector-hatch", Dir, NULL, dir_setup, test_vector_hatch, dir_teardown);
  g_test_add ("/plan-lane/one-grammar", Dir, NULL, dir_setup, test_one_grammar, dir_teardown);
  g_test_add ("/plan-lane/legend-fits", Dir, NULL, dir_setup, test_legend_fits, dir_teardown);
  g_test_add ("/plan-lane/legend-names-plan", Dir, NULL, dir_setup, test_legend_names_plan, dir_teardown);
  g_test_add ("/plan-lane/a4-labels", Dir, NULL, dir_setup, test_a4_plan_labels, dir_teardown);
  g_test_add_func ("/plan-lane/as-shown", test_as_shown);
  return g_test_run ();
}
