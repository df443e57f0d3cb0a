/* test-span-rows.c — the Spans tab's numbers (issue 30): the table's rows,
 * their order by every column, Find's count, the idle gap before a block,
 * and the histogram of block durations (its bins sum to the blocks of each
 * kind and rank), on a small run whose every span is known.
 *
 * Two ranks, times in µs:
 *   rank 0: F0 0-10 (a kernel inside), F1 10-20, WAIT 20-30, B0 30-50,
 *           REDUCE_GRAD 40-60 (beside B0 and B1), B1 55-75, OPT 80-85
 *   rank 1: F0 10-22, B0 22-44, F1 44-56, B1 56-80, W1 80-90
 * Blocks: 6 on rank 0 (the wait and the kernel are none), 5 on rank 1. */
#include <cairo.h>
#include <glib.h>
#include <string.h>

#include "pp-span-histogram.h"
#include "pp-span-rows.h"
#include "pp-timeline-model.h"

#define US 1000

typedef struct { int rank, kind, mb, step; int64_t t0, t1; } Spec;

static const Spec run[] = {
  { 0, PP_SPAN_F, 0, 0, 0, 10 },
  { 0, PP_SPAN_KERNEL, 0, 0, 2, 8 },
  { 0, PP_SPAN_F, 1, 0, 10, 20 },
  { 0, PP_SPAN_WAIT, -1, 0, 20, 30 },
  { 0, PP_SPAN_B, 0, 0, 30, 50 },
  { 0, PP_SPAN_REDUCE_GRAD, -1, 0, 40, 60 },
  { 0, PP_SPAN_B, 1, 0, 55, 75 },
  { 0, PP_SPAN_OPT, -1, 0, 80, 85 },
  { 1, PP_SPAN_F, 0, 0, 10, 22 },
  { 1, PP_SPAN_B, 0, 0, 22, 44 },
  { 1, PP_SPAN_F, 1, 0, 44, 56 },
  { 1, PP_SPAN_B, 1, 0, 56, 80 },
  { 1, PP_SPAN_W, 1, 0, 80, 90 },
};

static PpTimelineModel *
make_run (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (size_t i = 0; i < G_N_ELEMENTS (run); i++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
      it.span.rank = run[i].rank;
      it.span.stage = run[i].rank;
      it.span.kind = (uint16_t) run[i].kind;
      it.span.microbatch = run[i].mb;
      it.span.step = run[i].step;
      it.span.start_ns = 1000000 + run[i].t0 * US;
      it.span.end_ns = 1000000 + run[i].t1 * US;
      it.span.device = 0xffff;
      it.span.peer_rank = -1;
      pp_timeline_model_add (m, &it);
    }
  return m;
}

static const PpSpan *
span_of (const PpTimelineModel *m, const PpSpanRef *r)
{
  return &pp_timeline_model_spans (m, r->row)[r->index];
}

static PpTimelineFilter
filter (const char *text)
{
  PpTimelineFilter f;
  char err[160];
  g_assert_cmpint (pp_timeline_filter_parse (text, &f, err, sizeof err), ==, 0);
  return f;
}

/* Every block listed once, in start order; the wait and the kernel not. */
static void
test_rows_all (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanRows *t = pp_span_rows_new ();
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  g_assert_cmpuint (pp_span_rows_n (t), ==, 11);
  g_assert_cmpuint (pp_span_rows_n_blocks (t), ==, 11);
  int64_t last = INT64_MIN;
  for (size_t i = 0; i < pp_span_rows_n (t); i++)
    {
      const PpSpan *s = span_of (m, pp_span_rows_get (t, i));
      g_assert_true (pp_span_kind_is_work (s->kind));
      g_assert_cmpint (s->start_ns, >=, last);
      last = s->start_ns;
    }
  /* rank 0's F1 and rank 1's F0 both start at 10 µs: rank 0 first */
  g_assert_cmpint (pp_span_rows_get (t, 1)->row, ==, 0);
  g_assert_cmpint (pp_span_rows_get (t, 2)->row, ==, 1);
  g_assert_null (pp_span_rows_get (t, 11));
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* The idle gap before a block, as the details pane says it. */
static void
test_rows_idle (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanRows *t = pp_span_rows_new ();
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  struct { int row; int64_t start_us, wait_us; } want[] = {
    { 0, 0, -1 },      /* nothing before it */
    { 0, 30, 10 },     /* B0 after F1 (the wait is idle) */
    { 0, 55, 5 },      /* B1: REDUCE_GRAD still runs; B0 ended at 50 */
    { 0, 80, 5 },      /* OPT after B1 */
    { 1, 22, 0 },      /* B0 right after F0 */
    { 1, 10, -1 },
  };
  for (size_t w = 0; w < G_N_ELEMENTS (want); w++)
    {
      gboolean found = FALSE;
      for (size_t i = 0; i < pp_span_rows_n (t); i++)
        {
          const PpSpanRef *r = pp_span_rows_get (t, i);
          const PpSpan *s = span_of (m, r);
          if (r->row != want[w].row || s->start_ns != 1000000 + want[w].start_us * US || s->kind == PP_SPAN_REDUCE_GRAD)
            continue;
          g_assert_cmpint (r->wait_ns, ==, want[w].wait_us < 0 ? -1 : want[w].wait_us * US);
          g_assert_cmpint (pp_span_rows_idle_before (m, r->row, r->index), ==, r->wait_ns);
          found = TRUE;
        }
      g_assert_true (found);
    }
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* Every column sorts, up and down; equal keys stay in (row, start) order. */
static void
test_rows_sort (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanRows *t = pp_span_rows_new ();
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    for (int desc = 0; desc < 2; desc++)
      {
        pp_span_rows_set_order (t, (PpSpanColumn) c, desc);
        g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
        g_assert_cmpuint (pp_span_rows_n (t), ==, 11);
        g_assert_cmpint (pp_span_rows_sort_column (t), ==, c);
        for (size_t i = 1; i < pp_span_rows_n (t); i++)
          {
            const PpSpanRef *a = pp_span_rows_get (t, i - 1), *b = pp_span_rows_get (t, i);
            if (desc)
              g_assert_cmpint (a->key, >=, b->key);
            else
              g_assert_cmpint (a->key, <=, b->key);
            if (a->key == b->key)
              g_assert_true (a->row < b->row || (a->row == b->row && a->index < b->index));
          }
      }
  /* the longest block first: rank 1's B1 (24 µs), then B0 (22) */
  pp_span_rows_set_order (t, PP_SPAN_COL_DURATION, 1);
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  const PpSpan *s = span_of (m, pp_span_rows_get (t, 0));
  g_assert_cmpint (s->kind, ==, PP_SPAN_B);
  g_assert_cmpint (s->microbatch, ==, 1);
  g_assert_cmpint (s->end_ns - s->start_ns, ==, 24 * US);
  g_assert_cmpint (pp_span_rows_get (t, 0)->row, ==, 1);
  /* the longest idle gap first: rank 0's REDUCE_GRAD (20 µs after F1) */
  pp_span_rows_set_order (t, PP_SPAN_COL_WAIT, 1);
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  g_assert_cmpint (span_of (m, pp_span_rows_get (t, 0))->kind, ==, PP_SPAN_REDUCE_GRAD);
  g_assert_cmpint (pp_span_rows_get (t, 0)->wait_ns, ==, 20 * US);
  /* by rank, up: rank 0's six, then rank 1's five, each in start order */
  pp_span_rows_set_order (t, PP_SPAN_COL_RANK, 0);
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  for (size_t i = 0; i < 11; i++)
    g_assert_cmpint (pp_span_rows_get (t, i)->row, ==, i < 6 ? 0 : 1);
  g_assert_cmpint (pp_span_rows_position (t, 1, 0), ==, 6);
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* A click on a header sorts the listed rows again (pp_span_rows_sort):
 * the very order a build in that order gives, for every column both
 * ways; longest first, each line at least as long as the next; Find "F"
 * keeps exactly the F blocks, in the order asked. */
static void
test_rows_sort_again (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanRows *t = pp_span_rows_new (), *fresh = pp_span_rows_new ();
  g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    for (int desc = 0; desc < 2; desc++)
      {
        pp_span_rows_set_order (t, (PpSpanColumn) c, desc);
        g_assert_cmpint (pp_span_rows_sort (t, m), ==, 0);
        pp_span_rows_set_order (fresh, (PpSpanColumn) c, desc);
        g_assert_cmpint (pp_span_rows_build (fresh, m, NULL), ==, 0);
        g_assert_cmpuint (pp_span_rows_n (t), ==, pp_span_rows_n (fresh));
        for (size_t i = 0; i < pp_span_rows_n (t); i++)
          {
            const PpSpanRef *a = pp_span_rows_get (t, i), *b = pp_span_rows_get (fresh, i);
            g_assert_cmpint (a->row, ==, b->row);
            g_assert_cmpuint (a->index, ==, b->index);
            g_assert_cmpint (a->key, ==, b->key);
            g_assert_cmpint (a->wait_ns, ==, b->wait_ns);
          }
      }
  pp_span_rows_set_order (t, PP_SPAN_COL_DURATION, 1);
  g_assert_cmpint (pp_span_rows_sort (t, m), ==, 0);
  g_assert_cmpuint (pp_span_rows_n (t), ==, 11);
  for (size_t i = 0; i + 1 < pp_span_rows_n (t); i++)
    {
      const PpSpan *a = span_of (m, pp_span_rows_get (t, i)), *b = span_of (m, pp_span_rows_get (t, i + 1));
      g_assert_cmpint (a->end_ns - a->start_ns, >=, b->end_ns - b->start_ns);
    }
  /* Find "F", longest first: the F blocks, counted by kind, and no other */
  size_t n_f = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (run); i++)
    n_f += run[i].kind == PP_SPAN_F;
  PpTimelineFilter f = filter ("F");
  g_assert_cmpint (pp_span_rows_build (t, m, &f), ==, 0);
  g_assert_cmpuint (pp_span_rows_n (t), ==, n_f);
  for (size_t i = 0; i < pp_span_rows_n (t); i++)
    {
      const PpSpan *a = span_of (m, pp_span_rows_get (t, i));
      g_assert_cmpint (a->kind, ==, PP_SPAN_F);
      if (i + 1 < pp_span_rows_n (t))
        {
          const PpSpan *b = span_of (m, pp_span_rows_get (t, i + 1));
          g_assert_cmpint (a->end_ns - a->start_ns, >=, b->end_ns - b->start_ns);
        }
    }
  /* rows of another model are built again, not sorted */
  PpTimelineModel *other = make_run ();
  g_assert_cmpint (pp_span_rows_sort (t, other), ==, -1);
  pp_timeline_model_free (other);
  pp_span_rows_free (fresh);
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* Keys too far apart to pack beside a row's place (starts 2^62 ns apart)
 * take the rows' own radix sort: the same order rules. */
static void
test_rows_sort_wide (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  const int64_t starts[] = { 1, INT64_C (1) << 62, 5, INT64_C (1) << 61, 5 };
  for (size_t i = 0; i < G_N_ELEMENTS (starts); i++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
      it.span.rank = (int) (i % 2);
      it.span.stage = it.span.rank;
      it.span.kind = PP_SPAN_F;
      it.span.microbatch = (int) i;
      it.span.start_ns = starts[i];
      it.span.end_ns = starts[i] + 10;
      it.span.device = 0xffff;
      it.span.peer_rank = -1;
      pp_timeline_model_add (m, &it);
    }
  PpSpanRows *t = pp_span_rows_new ();
  for (int desc = 0; desc < 2; desc++)
    {
      pp_span_rows_set_order (t, PP_SPAN_COL_START, desc);
      g_assert_cmpint (pp_span_rows_build (t, m, NULL), ==, 0);
      g_assert_cmpuint (pp_span_rows_n (t), ==, G_N_ELEMENTS (starts));
      for (size_t i = 1; i < pp_span_rows_n (t); i++)
        {
          const PpSpanRef *a = pp_span_rows_get (t, i - 1), *b = pp_span_rows_get (t, i);
          const PpSpan *sa = span_of (m, a), *sb = span_of (m, b);
          if (desc)
            g_assert_cmpint (sa->start_ns, >=, sb->start_ns);
          else
            g_assert_cmpint (sa->start_ns, <=, sb->start_ns);
          if (sa->start_ns == sb->start_ns)   /* the two at 5: rank 0 first */
            g_assert_true (a->row < b->row || (a->row == b->row && a->index < b->index));
        }
    }
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* Find's count: what the words name, as the timeline dims. */
static void
test_rows_find (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanRows *t = pp_span_rows_new ();
  struct { const char *text; size_t n; } want[] = {
    { "", 11 }, { "B", 4 }, { "F", 4 }, { "mb 1", 5 }, { "W", 1 }, { "rank 1 F", 2 },
    { "I W", 1 }, { "B mb 0 rank 0", 1 }, { "step 3", 0 }, { "opt", 1 }, { "reduce_grad", 1 },
  };
  for (size_t w = 0; w < G_N_ELEMENTS (want); w++)
    {
      PpTimelineFilter f = filter (want[w].text);
      g_assert_cmpint (pp_span_rows_build (t, m, &f), ==, 0);
      g_test_message ("'%s': %zu", want[w].text, pp_span_rows_n (t));
      g_assert_cmpuint (pp_span_rows_n (t), ==, want[w].n);
      g_assert_cmpuint (pp_span_rows_n_blocks (t), ==, 11);
      /* the count is exactly the blocks the match names */
      size_t named = 0;
      for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
        for (size_t i = 0; i < pp_timeline_model_n_spans (m, r); i++)
          named += pp_span_rows_match (&f, r, &pp_timeline_model_spans (m, r)[i]) != 0;
      g_assert_cmpuint (named, ==, want[w].n);
    }
  pp_span_rows_free (t);
  pp_timeline_model_free (m);
}

/* The histogram's bins hold every block of a kind on a rank, once. */
static void
check_histogram (const PpTimelineModel *m, const PpTimelineFilter *f)
{
  PpSpanHistogram h = { 0 };
  g_assert_cmpint (pp_span_histogram_compute (&h, m, f, 8), ==, 0);
  g_assert_cmpint (h.n_rows, ==, 2);
  g_assert_cmpint (h.n_bins, ==, 8);
  for (int k = 0; k < h.n_kinds; k++)
    for (int r = 0; r < h.n_rows; r++)
      {
        unsigned sum = 0, blocks = 0;
        for (int b = 0; b < h.n_bins; b++)
          sum += h.counts[((size_t) k * h.n_rows + r) * h.n_bins + b];
        for (size_t i = 0; i < pp_timeline_model_n_spans (m, r); i++)
          {
            const PpSpan *s = &pp_timeline_model_spans (m, r)[i];
            blocks += s->kind == h.kinds[k] && pp_timeline_filter_match (f, r, s);
          }
        g_assert_cmpuint (sum, ==, blocks);
        g_assert_cmpuint (h.blocks[(size_t) k * h.n_rows + r], ==, blocks);
      }
  pp_span_histogram_clear (&h);
}

/* A row's name beside the bars: a long one is cut, at a character, with
 * "…", to the width asked; a short one is left alone. */
static void
test_fit_label (void)
{
  cairo_surface_t *surf = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 10, 10);
  cairo_t *cr = cairo_create (surf);
  cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 11);
  char out[96];
  cairo_text_extents_t e;
  pp_span_histogram_fit_label (cr, "pp 0", 80, out, sizeof out);
  g_assert_cmpstr (out, ==, "pp 0");
  const char *lng = "pp 1 · dp 3 · tp 0 · ñode-ümlaut-host-with-a-long-name (pid 123456)";
  cairo_text_extents (cr, lng, &e);
  g_assert_cmpfloat (e.x_advance, >, 80);
  pp_span_histogram_fit_label (cr, lng, 80, out, sizeof out);
  cairo_text_extents (cr, out, &e);
  g_assert_cmpfloat (e.x_advance, <=, 80);
  g_assert_true (g_str_has_suffix (out, "…"));
  g_assert_true (g_utf8_validate (out, -1, NULL));
  g_assert_true (strncmp (out, "pp 1", 4) == 0);
  /* nothing fits: "…" alone */
  pp_span_histogram_fit_label (cr, lng, 1, out, sizeof out);
  g_assert_cmpstr (out, ==, "…");
  cairo_destroy (cr);
  cairo_surface_destroy (surf);
}

static void
test_histogram (void)
{
  PpTimelineModel *m = make_run ();
  PpSpanHistogram h = { 0 };
  g_assert_cmpint (pp_span_histogram_compute (&h, m, NULL, 8), ==, 0);
  /* F, B and W: OPT and REDUCE_GRAD are no compute block */
  g_assert_cmpint (h.n_kinds, ==, 3);
  g_assert_cmpint (h.kinds[0], ==, PP_SPAN_F);
  g_assert_cmpint (h.kinds[1], ==, PP_SPAN_B);
  g_assert_cmpint (h.kinds[2], ==, PP_SPAN_W);
  g_assert_cmpint (h.lo_ns[0], ==, 10 * US);
  g_assert_cmpint (h.hi_ns[0], ==, 12 * US);
  g_assert_cmpint (h.lo_ns[1], ==, 20 * US);
  g_assert_cmpint (h.hi_ns[1], ==, 24 * US);
  /* the shortest in the first bin, the longest in the last */
  g_assert_cmpint (pp_span_histogram_bin (&h, 1, 20 * US), ==, 0);
  g_assert_cmpint (pp_span_histogram_bin (&h, 1, 24 * US), ==, 7);
  /* rank 0's B: two of 20 µs, both in bin 0; rank 1's B0 22 µs, B1 24 µs */
  g_assert_cmpuint (h.counts[((size_t) 1 * 2 + 0) * 8 + 0], ==, 2);
  g_assert_cmpuint (h.counts[((size_t) 1 * 2 + 1) * 8 + 7], ==, 1);
  pp_span_histogram_clear (&h);

  check_histogram (m, NULL);
  const char *texts[] = { "B", "mb 1", "rank 1", "step 3" };
  for (size_t i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      PpTimelineFilter f = filter (texts[i]);
      check_histogram (m, &f);
    }
  /* an empty run draws nothing and counts nothing */
  PpTimelineModel *e = pp_timeline_model_new ();
  g_assert_cmpint (pp_span_histogram_compute (&h, e, NULL, 8), ==, 0);
  g_assert_cmpint (h.n_kinds, ==, 0);
  pp_span_histogram_clear (&h);
  pp_timeline_model_free (e);
  pp_timeline_model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/span-rows/all", test_rows_all);
  g_test_add_func ("/span-rows/idle-before", test_rows_idle);
  g_test_add_func ("/span-rows/sort", test_rows_sort);
  g_test_add_func ("/span-rows/sort-again", test_rows_sort_again);
  g_test_add_func ("/span-rows/sort-wide", test_rows_sort_wide);
  g_test_add_func ("/span-rows/find-count", test_rows_find);
  g_test_add_func ("/span-histogram/sums", test_histogram);
  g_test_add_func ("/span-histogram/fit-label", test_fit_label);
  return g_test_run ();
}
