/* pp-heatmap.c — the stage x replica heatmap (see pp-heatmap.h). */
#include "pp-heatmap.h"

#include <math.h>
#include <stdio.h>

#include "pp-timeline-render.h"

#define TOP 44.0
#define LEFT 58.0
#define RIGHT 14.0
#define BOTTOM 40.0

typedef struct {
  double x0, y0, cw, ch;
} Layout;

static int
layout_of (const PpHeatmap *h, double width, double height, Layout *l)
{
  if (h == NULL || h->n_rows <= 0 || h->n_cols <= 0)
    return 0;
  l->x0 = LEFT;
  l->y0 = TOP;
  l->cw = (width - LEFT - RIGHT) / h->n_cols;
  l->ch = (height - TOP - BOTTOM) / h->n_rows;
  return l->cw > 0 && l->ch > 0;
}

void
pp_heatmap_color (double v, int dark, double rgb[3])
{
  double base = dark ? 0.22 : 0.93;
  double hot[3] = { 0.85, 0.12, 0.10 }, cold[3] = { 0.15, 0.35, 0.85 };
  double t;
  const double *to;
  if (isnan (v))
    {
      rgb[0] = rgb[1] = rgb[2] = dark ? 0.12 : 0.80;
      return;
    }
  if (v >= 0)
    {
      t = fmin (1, v);
      to = hot;
    }
  else
    {
      t = fmin (1, -v / 0.5);
      to = cold;
    }
  for (int i = 0; i < 3; i++)
    rgb[i] = base + (to[i] - base) * t;
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
pp_heatmap_draw (cairo_t *cr, const PpHeatmap *h, double width, double height)
{
  double fg = h != NULL && h->dark ? 0.9 : 0.1;
  Layout l;
  char buf[96];

  cairo_save (cr);
  cairo_set_source_rgb (cr, h != NULL && h->dark ? 0.1 : 1.0, h != NULL && h->dark ? 0.1 : 1.0,
                        h != NULL && h->dark ? 0.11 : 1.0);
  cairo_paint (cr);
  cairo_select_font_face (cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb (cr, fg, fg, fg);
  cairo_set_font_size (cr, 13);
  if (h != NULL && h->title != NULL)
    text_at (cr, 8, 18, h->title, 0);
  if (!layout_of (h, width, height, &l))
    {
      text_at (cr, 8, 40, "no replicas: nothing to compare a process with", 0);
      cairo_restore (cr);
      return;
    }
  cairo_set_font_size (cr, 11);
  /* column and row labels, as many as fit */
  int every_c = (int) ceil (40.0 / l.cw), every_r = (int) ceil (14.0 / l.ch);
  for (int c = 0; c < h->n_cols; c += every_c)
    {
      snprintf (buf, sizeof buf, "dp %d", c);
      text_at (cr, l.x0 + (c + 0.5) * l.cw, TOP - 6, buf, every_c > 1 ? 0 : 0.5);
    }
  for (int r = 0; r < h->n_rows; r += every_r)
    {
      snprintf (buf, sizeof buf, "pp %d", r);
      text_at (cr, LEFT - 6, l.y0 + (r + 0.5) * l.ch + 4, buf, 1);
    }
  /* the cells */
  int gap = l.cw > 6 && l.ch > 6;
  for (int r = 0; r < h->n_rows; r++)
    for (int c = 0; c < h->n_cols; c++)
      {
        double v = h->cell[r * h->n_cols + c], rgb[3];
        pp_heatmap_color (v, h->dark, rgb);
        cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle (cr, l.x0 + c * l.cw, l.y0 + r * l.ch, l.cw - gap, l.ch - gap);
        cairo_fill (cr);
        if (!isnan (v) && l.cw >= 44 && l.ch >= 16)
          {
            double ink = rgb[0] * 0.3 + rgb[1] * 0.59 + rgb[2] * 0.11 < 0.5 ? 1.0 : 0.1;
            cairo_set_source_rgb (cr, ink, ink, ink);
            snprintf (buf, sizeof buf, "%+.0f%%", 100 * v);
            text_at (cr, l.x0 + (c + 0.5) * l.cw, l.y0 + (r + 0.5) * l.ch + 4, buf, 0.5);
          }
      }
  if (h->selected_row >= 0 && h->selected_row < h->n_rows && h->selected_col >= 0 && h->selected_col < h->n_cols)
    {
      cairo_set_source_rgb (cr, fg, fg, fg);
      cairo_set_line_width (cr, 2);
      cairo_rectangle (cr, l.x0 + h->selected_col * l.cw + 1, l.y0 + h->selected_row * l.ch + 1, l.cw - gap - 2,
                       l.ch - gap - 2);
      cairo_stroke (cr);
    }
  /* the legend: -50 % .. 0 .. +100 % */
  double ly = height - BOTTOM + 12, lw = fmin (240, width - LEFT - RIGHT - 180), lx = LEFT;
  for (int i = 0; lw > 0 && i < 60; i++)
    {
      double v = -0.5 + 1.5 * i / 59.0, rgb[3];
      pp_heatmap_color (v, h->dark, rgb);
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle (cr, lx + lw * i / 60.0, ly, lw / 60.0 + 0.5, 10);
      cairo_fill (cr);
    }
  cairo_set_source_rgb (cr, fg, fg, fg);
  if (lw > 0)
    {
      text_at (cr, lx, ly + 24, "-50%", 0);
      text_at (cr, lx + lw / 3, ly + 24, "0", 0.5);
      text_at (cr, lx + lw, ly + 24, "+100% slower", 0.5);
    }
  if (h->n_steps > 0)
    {
      if (h->step_from == h->step_to)
        snprintf (buf, sizeof buf, "step %d", (int) h->step_from);
      else
        snprintf (buf, sizeof buf, "steps %d-%d (%d)", (int) h->step_from, (int) h->step_to, h->n_steps);
    }
  else
    snprintf (buf, sizeof buf, "no step in the range");
  text_at (cr, width - RIGHT, ly + 10, buf, 1);
  cairo_restore (cr);
}

int
pp_heatmap_hit (const PpHeatmap *h, double width, double height, double x, double y, int *row, int *col)
{
  Layout l;
  if (!layout_of (h, width, height, &l) || x < l.x0 || y < l.y0)
    return 0;
  int c = (int) floor ((x - l.x0) / l.cw), r = (int) floor ((y - l.y0) / l.ch);
  if (c < 0 || c >= h->n_cols || r < 0 || r >= h->n_rows)
    return 0;
  *row = r;
  *col = c;
  return 1;
}

typedef struct {
  const PpHeatmap *h;
  double           w, ht;
} Export;

static void
draw_export (cairo_t *cr, const void *data)
{
  const Export *e = data;
  pp_heatmap_draw (cr, e->h, e->w, e->ht);
}

PpStatus
pp_heatmap_export_as (const PpHeatmap *h, double width, double height, const char *path, const char *name,
                      PpError *err)
{
  Export e = { h, width, height };
  return pp_render_export_as (path, name, width, height, draw_export, &e, err);
}
