/* pp-heatmap.h — the stage x replica heatmap of stragglers (issue 38): rows
 * the pipeline's stages, columns its replicas, each cell colored by its
 * slowdown against its copies (pp_straggler_heatmap's numbers).  One
 * drawing function for the app's view, `render --heatmap` and the tests;
 * it draws what it is given and computes nothing.  No GTK. */
#pragma once

#include <cairo.h>
#include <stdint.h>

#include "pp-status.h"

typedef struct {
  int           n_rows, n_cols;   /* stages (pp), replicas (dp) */
  const double *cell;             /* [n_rows * n_cols] slowdown (0.25: 25 % slower), NAN none */
  int32_t       step_from, step_to;
  int           n_steps;          /* steps counted in the cells */
  const char   *title;            /* may be NULL */
  int           dark;
  int           selected_row, selected_col;   /* outlined; -1 none */
} PpHeatmap;

/* Draws h into [0, width] x [0, height] of cr. */
void     pp_heatmap_draw (cairo_t *cr, const PpHeatmap *h, double width, double height);

/* The cell under (x, y) of a drawing that size: 1 and *row, *col, else 0. */
int      pp_heatmap_hit (const PpHeatmap *h, double width, double height, double x, double y, int *row,
                         int *col);

/* The cell's color: grey at 0, linearly to red at +100 % and more and to
 * blue at -50 % and less (rgb in [0, 1]): a few per cent of noise stays
 * pale. */
void     pp_heatmap_color (double slowdown, int dark, double rgb[3]);

/* The drawing into an image file (PNG, SVG or PDF by name's extension),
 * written at path (pp_render_export_as). */
PpStatus pp_heatmap_export_as (const PpHeatmap *h, double width, double height, const char *path,
                               const char *name, PpError *err);
