/* pp-span-histogram.c — block durations by kind and rank (pp-span-histogram.h). */
#include "pp-span-histogram.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-span-rows.h"
#include "pp-timeline-render.h"

static const int histogram_kinds[PP_SPAN_HISTOGRAM_MAX_KINDS] = {
  PP_SPAN_F, PP_SPAN_B, PP_SPAN_I, PP_SPAN_W, PP_SPAN_OVERLAP_F_B,
};

void
pp_span_histogram_clear (PpSpanHistogram *h)
{
  free (h->counts);
  free (h->blocks);
  memset (h, 0, sizeof *h);
}

static int
kind_slot (int kind)
{
  for (int k = 0; k < PP_SPAN_HISTOGRAM_MAX_KINDS; k++)
    if (histogram_kinds[k] == kind)
      return k;
  return -1;
}

/* Durations on a log scale; a block of 0 ns counts as 1 ns. */
static double
log_ns (int64_t ns)
{
  return log ((double) (ns < 1 ? 1 : ns));
}

/* lo and hi: the logs of the kind's range (a count pass takes them once
 * a kind, not twice a block) */
static int
bin_of (double lo, double hi, int n_bins, int64_t dur_ns)
{
  if (hi <= lo)
    return 0;
  int b = (int) floor ((log_ns (dur_ns) - lo) / (hi - lo) * n_bins);
  return b < 0 ? 0 : b >= n_bins ? n_bins - 1 : b;
}

int
pp_span_histogram_bin (const PpSpanHistogram *h, int k, int64_t dur_ns)
{
  return bin_of (log_ns (h->lo_ns[k]), log_ns (h->hi_ns[k]), h->n_bins, dur_ns);
}

double
pp_span_histogram_edge_ns (const PpSpanHistogram *h, int k, int e)
{
  double lo = log_ns (h->lo_ns[k]), hi = log_ns (h->hi_ns[k]);
  return exp (lo + (hi - lo) * e / (h->n_bins > 0 ? h->n_bins : 1));
}

int
pp_span_histogram_compute (PpSpanHistogram *out, const PpTimelineModel *m, const PpTimelineFilter *f,
                           int n_bins)
{
  int64_t lo[PP_SPAN_HISTOGRAM_MAX_KINDS], hi[PP_SPAN_HISTOGRAM_MAX_KINDS];
  int slot_of[PP_SPAN_HISTOGRAM_MAX_KINDS];

  pp_span_histogram_clear (out);
  int n_rows = m != NULL ? pp_timeline_model_n_ranks (m) : 0;
  if (n_bins < 1 || n_rows < 1)
    return 0;
  for (int k = 0; k < PP_SPAN_HISTOGRAM_MAX_KINDS; k++)
    lo[k] = INT64_MAX, hi[k] = INT64_MIN;

  /* first pass: which kinds there are and each one's range */
  for (int r = 0; r < n_rows; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      size_t n = pp_timeline_model_n_spans (m, r);
      for (size_t i = 0; i < n; i++)
        {
          int k = kind_slot (sp[i].kind);
          if (k < 0 || !pp_span_rows_match (f, r, &sp[i]))
            continue;
          int64_t d = sp[i].end_ns - sp[i].start_ns;
          if (d < lo[k])
            lo[k] = d;
          if (d > hi[k])
            hi[k] = d;
        }
    }
  for (int k = 0; k < PP_SPAN_HISTOGRAM_MAX_KINDS; k++)
    {
      slot_of[k] = -1;
      if (hi[k] < lo[k])
        continue;
      slot_of[k] = out->n_kinds;
      out->kinds[out->n_kinds] = histogram_kinds[k];
      out->lo_ns[out->n_kinds] = lo[k];
      out->hi_ns[out->n_kinds] = hi[k];
      out->n_kinds++;
    }
  out->n_rows = n_rows;
  out->n_bins = n_bins;
  if (out->n_kinds == 0)
    return 0;
  size_t cells = (size_t) out->n_kinds * (size_t) n_rows;
  out->counts = calloc (cells * (size_t) n_bins, sizeof *out->counts);
  out->blocks = calloc (cells, sizeof *out->blocks);
  if (out->counts == NULL || out->blocks == NULL)
    {
      pp_span_histogram_clear (out);
      return -1;
    }

  /* second pass: the counts */
  double lo_log[PP_SPAN_HISTOGRAM_MAX_KINDS], hi_log[PP_SPAN_HISTOGRAM_MAX_KINDS];
  for (int k = 0; k < out->n_kinds; k++)
    lo_log[k] = log_ns (out->lo_ns[k]), hi_log[k] = log_ns (out->hi_ns[k]);
  for (int r = 0; r < n_rows; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      size_t n = pp_timeline_model_n_spans (m, r);
      for (size_t i = 0; i < n; i++)
        {
          int k0 = kind_slot (sp[i].kind);
          if (k0 < 0 || !pp_span_rows_match (f, r, &sp[i]))
            continue;
          int k = slot_of[k0];
          size_t cell = (size_t) k * (size_t) n_rows + (size_t) r;
          int b = bin_of (lo_log[k], hi_log[k], n_bins, sp[i].end_ns - sp[i].start_ns);
          out->counts[cell * (size_t) n_bins + (size_t) b]++;
          out->blocks[cell]++;
        }
    }
  return 0;
}

/* ---- drawing --------------------------------------------------------------------- */

#define HEAD_H    22.0
#define AXIS_H    29.0
#define LABEL_MIN 60.0   /* the rows' names' column: at least, at most a third of the width */
#define GAP       10.0
#define MIN_ROW_H 18.0
#define MAX_ROW_H 44.0

double
pp_span_histogram_min_height (const PpSpanHistogram *h)
{
  return HEAD_H + AXIS_H + 4 + (h->n_rows > 0 ? h->n_rows : 1) * MIN_ROW_H;
}

static void
format_ns (char *buf, size_t size, double ns)
{
  if (ns < 1e3)
    snprintf (buf, size, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf (buf, size, "%.3g µs", ns / 1e3);
  else if (ns < 1e9)
    snprintf (buf, size, "%.3g ms", ns / 1e6);
  else
    snprintf (buf, size, "%.3g s", ns / 1e9);
}

static const char *
kind_title (int kind)
{
  return kind == PP_SPAN_OVERLAP_F_B ? "F+B" : pp_span_kind_name ((PpSpanKind) kind);
}

static void
row_name (const PpTimelineModel *m, int r, char *name, size_t size)
{
  if (m != NULL && r < pp_timeline_model_n_ranks (m))
    pp_timeline_model_rank_label (m, r, name, size);
  else
    snprintf (name, size, "row %d", r);
}

static void
text_at (cairo_t *cr, double x, double y, const char *s, double align)
{
  cairo_text_extents_t e;
  cairo_text_extents (cr, s, &e);
  cairo_move_to (cr, x - align * e.x_advance, y);
  cairo_show_text (cr, s);
}

void
pp_span_histogram_fit_label (cairo_t *cr, const char *name, double max_w, char *out, size_t size)
{
  snprintf (out, size, "%s", name);
  cairo_text_extents_t e;
  cairo_text_extents (cr, out, &e);
  if (e.x_advance <= max_w)
    return;
  /* cut at a character's start (UTF-8), one at a time, until it and "…" fit */
  size_t len = strlen (out);
  while (len > 0)
    {
      do
        len--;
      while (len > 0 && ((unsigned char) out[len] & 0xC0) == 0x80);
      if (len + 4 > size)
        continue;
      memcpy (out + len, "…", 4);   /* 3 bytes and the NUL */
      cairo_text_extents (cr, out, &e);
      if (e.x_advance <= max_w)
        return;
    }
  snprintf (out, size, "…");
}

void
pp_span_histogram_draw (cairo_t *cr, const PpSpanHistogram *h, const PpTimelineModel *m, double width,
                        double height, int dark)
{
  double fg = dark ? 0.92 : 0.13, dim = dark ? 0.62 : 0.42, grid = dark ? 0.30 : 0.86;
  cairo_save (cr);
  cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 11);
  if (h->n_kinds == 0 || h->n_rows == 0)
    {
      cairo_set_source_rgb (cr, dim, dim, dim);
      text_at (cr, width / 2, height / 2, "No F, B, I or W block to count", 0.5);
      cairo_restore (cr);
      return;
    }
  double row_h = (height - HEAD_H - AXIS_H - 4) / h->n_rows;
  row_h = row_h < MIN_ROW_H ? MIN_ROW_H : row_h > MAX_ROW_H ? MAX_ROW_H : row_h;
  /* the rows' names: their column as wide as the widest (a mesh's
   * "pp 1 dp 3 tp 0" and its host), at most a third of the width, a longer
   * name cut with "…", never over the bars */
  double label_w = LABEL_MIN;
  for (int r = 0; r < h->n_rows; r++)
    {
      char name[96];
      row_name (m, r, name, sizeof name);
      cairo_text_extents_t e;
      cairo_text_extents (cr, name, &e);
      label_w = fmax (label_w, e.x_advance + 12);
    }
  label_w = fmin (label_w, fmax (LABEL_MIN, width / 3));
  for (int r = 0; r < h->n_rows; r++)
    {
      char name[96], fit[96];
      row_name (m, r, name, sizeof name);
      pp_span_histogram_fit_label (cr, name, label_w - 8, fit, sizeof fit);
      cairo_set_source_rgb (cr, fg, fg, fg);
      text_at (cr, 4, HEAD_H + r * row_h + row_h / 2 + 4, fit, 0);
    }
  double col_w = (width - label_w - GAP * h->n_kinds) / h->n_kinds;
  if (col_w < 40)
    col_w = 40;

  for (int k = 0; k < h->n_kinds; k++)
    {
      double x0 = label_w + k * (col_w + GAP), rgb[3];
      pp_timeline_color (h->kinds[k], dark, rgb);
      /* the column's title: its kind, its color */
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle (cr, x0, 6, 10, 10);
      cairo_fill (cr);
      cairo_set_source_rgb (cr, fg, fg, fg);
      cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
      text_at (cr, x0 + 14, 15, kind_title (h->kinds[k]), 0);
      cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

      for (int r = 0; r < h->n_rows; r++)
        {
          size_t cell = (size_t) k * (size_t) h->n_rows + (size_t) r;
          const uint32_t *c = &h->counts[cell * (size_t) h->n_bins];
          double y0 = HEAD_H + r * row_h, base = y0 + row_h - 3;
          uint32_t most = 0;
          for (int b = 0; b < h->n_bins; b++)
            most = c[b] > most ? c[b] : most;
          cairo_set_source_rgb (cr, grid, grid, grid);
          cairo_rectangle (cr, x0, base, col_w, 1);
          cairo_fill (cr);
          if (most == 0)
            continue;
          /* each cell its own height scale: the shapes compare, the count is written */
          cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
          double bw = col_w / h->n_bins;
          for (int b = 0; b < h->n_bins; b++)
            if (c[b] > 0)
              {
                double bh = fmax (1.5, (row_h - 6) * c[b] / most);
                cairo_rectangle (cr, x0 + b * bw + 0.5, base - bh, fmax (1, bw - 1), bh);
              }
          cairo_fill (cr);
          char n[32];
          snprintf (n, sizeof n, "%u", h->blocks[cell]);
          cairo_set_font_size (cr, 9);
          cairo_set_source_rgb (cr, dim, dim, dim);
          text_at (cr, x0 + col_w, y0 + 10, n, 1);
          cairo_set_font_size (cr, 11);
        }
      /* its axis: the shortest, the middle and the longest */
      double ya = HEAD_H + h->n_rows * row_h + 13;
      char lo[32], mid[32], hi[32];
      format_ns (lo, sizeof lo, (double) h->lo_ns[k]);
      format_ns (mid, sizeof mid, pp_span_histogram_edge_ns (h, k, h->n_bins / 2));
      format_ns (hi, sizeof hi, (double) h->hi_ns[k]);
      cairo_set_font_size (cr, 9);
      cairo_set_source_rgb (cr, dim, dim, dim);
      cairo_text_extents_t el, eh;
      cairo_text_extents (cr, lo, &el);
      cairo_text_extents (cr, hi, &eh);
      text_at (cr, x0, ya, lo, 0);
      /* a narrow column: the longest on a line of its own */
      if (el.x_advance + eh.x_advance + 6 > col_w)
        ya += 11;
      else if (col_w > 150)
        text_at (cr, x0 + col_w / 2, ya, mid, 0.5);
      text_at (cr, x0 + col_w, ya, hi, 1);
      cairo_set_font_size (cr, 11);
    }
  cairo_restore (cr);
}
