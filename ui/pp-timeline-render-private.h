/* pp-timeline-render-private.h — what the timeline renderer's files
 * share; pp-timeline-render.h is its API.  The renderer is ten files, one
 * idea each:
 *
 *   pp-timeline-render.c         pp_timeline_render and the critical path;
 *                                the per-render scratch, a rank's row and
 *                                its plan lane
 *   pp-timeline-render-palette.c the colors of kinds, the themes, shades
 *   pp-timeline-render-layout.c  where things go: the legend's entries,
 *                                the layout, time to x and back, hit testing
 *   pp-timeline-render-text.c    fonts, text shown (or sunk into an SVG),
 *                                ellipsized lines, times in a unit
 *   pp-timeline-render-frame.c   the header, the ruler, steps, the legend
 *   pp-timeline-render-blocks.c  a lane's blocks, their labels, the hatch
 *   pp-timeline-render-plan.c    the plan in time: its copies over steps
 *   pp-timeline-render-focus.c   find and filter, the selection, arrows,
 *                                a lost stream, the measured range
 *   pp-timeline-render-zoomed.c  per-step summaries, folded rows' marks
 *   pp-timeline-render-stuck.c   a stuck job: its root's row marked, the
 *                                waits up to now, arrows to whom they wait for
 *   pp-timeline-render-export.c  PNG, SVG, PDF, PostScript files
 *
 * They call each other downwards only (test-layers): the export calls
 * the render, the render every part; frame, blocks, focus, stuck and zoomed call
 * layout, text and palette (frame also blocks' hatch); layout calls plan
 * and text; palette, plan and text call no other part.
 * Nothing here is part of the render library's API.
 */
#pragma once

#include "pp-timeline-render.h"
#include "pp-timeline-host-lane.h"
#include "pp-timeline-model-private.h"
#include "pp-timeline-summary.h"
#include "pp-trace-text.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#define SPAN_MIN_PX     1.5    /* narrower spans are aggregated per column */
#define KERNEL_BLOCK_PX 80.0   /* kernels show under blocks at least this wide */
#define LABEL_W         100.0  /* rank labels, left of the plot: "CPU rank 12", "nodeB:rank 3" */
#define LABEL_W_VIEW    150.0  /* a view's rows say more: "CPU rank 12 ×128", "rank 3 dp 17 tp 1" */
#define RIGHT_MARGIN    14.0
#define HEADER_H        48.0
#define RULER_H         30.0
#define LEGEND_H        30.0   /* one line of legend; more lines LEGEND_LINE_H each */
#define LEGEND_LINE_H   18.0
#define SUMMARY_PX      2.0    /* blocks narrower than this on average: summaries */
#define LABEL_MIN_FS    7.0    /* a block's label no smaller than this (px) */
#define LABEL_EM        0.62   /* a label character's advance, in font sizes */

typedef struct { double r, g, b; } Rgb;

#define HEX(h) { ((h) >> 16 & 0xff) / 255.0, ((h) >> 8 & 0xff) / 255.0, ((h) & 0xff) / 255.0 }

typedef struct {
  Rgb bg, fg, dim, ruler_bg, grid, bubble, hatch;
} Theme;

enum { SW_HATCH, SW_BLOCK, SW_THIN, SW_CHUNKS, SW_PLAN, SW_PLAN_OVER, SW_HEAT, SW_FOLD, SW_STEP, SW_HOST };
typedef struct {
  int         swatch, kind;
  const char *label;
  double      x, y;          /* the swatch's left and top, y from the legend's first line */
} LegendItem;
#define LEGEND_MAX  32
typedef struct {
  LegendItem it[LEGEND_MAX];
  int        n, lines;
} Legend;

/* Which lane a span kind lives in. */
enum { LANE_BLOCK, LANE_THIN, LANE_KERNEL, LANE_NONE,
       LANE_PLAN_OVER };   /* a Box's: a plan block past its step's end */

typedef struct {
  float    x, w;
  uint16_t kind;
  uint8_t  chunk, lane;
  int32_t  mb, stage;
  /* an overlapped F+B's backward half (kind B or I; 0: none known) */
  int32_t  sub_mb, sub_stage;
  uint16_t sub_kind;
} Box;

typedef struct {
  const PpTimelineModel *m;
  const PpTimelineView  *v;
  PpTimelineLayout       l;
  Theme                  th;
  int                    image;      /* target is an image surface */
  int                    n_ranks, P, V;
  int64_t                run0, run1; /* the run's extent */
  int64_t                plan0, plan1;   /* the plans' extent (one step) */
  int64_t                origin;     /* the ruler's zero: the model's start */
  int                    ncols;
  float                 *cov;        /* [ncols][N_SLOTS] */
  int                    cmin[2], cmax[2];   /* touched columns, per lane */
  uint32_t              *strip;      /* [ncols] */
  Box                   *boxes;
  size_t                 n_boxes, cap_boxes;
  double                 font;       /* block label size */
  double                 bubble_sum; int bubble_n;
  int                    summary;    /* per-step summaries instead of blocks */
  double                 median_step_ns;
  int                    vector;     /* an SVG, PDF or PS surface: the hatch as paths */
  cairo_pattern_t       *hatch;      /* the bubble's tile, on other surfaces */
} Ctx;

/* Text in an SVG stays text (issue 17): cairo's SVG surface writes glyphs
 * as paths, so a report's labels could be neither searched nor edited.  An
 * export to SVG hangs a sink on the cairo_t; text goes there instead of to
 * cairo (where the clip lets it show), and pp_timeline_export writes it
 * into the file as <text> elements. */
typedef struct {
  char  *s;
  double x, y, size, rgba[4];
  int    bold;
} SinkText;
typedef struct {
  SinkText *t;
  size_t    n, cap;
} TextSink;

/* The unit for times a step_ns apart, the largest of them max_abs_ns. */
typedef struct {
  const char *name;
  double      scale;   /* ns a unit */
} TimeUnit;

extern const cairo_user_data_key_t text_sink_key;   /* pp-timeline-render-text.c */

/* pp-timeline-render-palette.c */
void theme_of (int dark, Theme *t);
Rgb kind_rgb (int kind, int dark);
Rgb shade (Rgb c, int chunk);
double luminance (Rgb c);
void set_rgb (cairo_t *cr, Rgb c);
void set_rgba (cairo_t *cr, Rgb c, double a);

/* pp-timeline-render-layout.c */
double legend_height_of (int lines);
double legend_swatch_w (int swatch);
void legend_build (const PpTimelineModel *m, const PpTimelineView *v, double x0, Legend *lg);
int legend_lines (const PpTimelineModel *m, const PpTimelineView *v, double x0);
void layout_x (const PpTimelineModel *m, const PpTimelineView *v, double *x0, double *x1);
void view_clamped (const PpTimelineView *v, PpTimelineView *out);
double ns_between (int64_t t0, int64_t t);
int lane_of (int kind);
void lane_y (const PpTimelineLayout *l, int r, int lane, double *y, double *h);
double lane_y_host (const PpTimelineLayout *l, int r);

/* pp-timeline-render-text.c */
void font (cairo_t *cr, double size, int bold);
double text_w (cairo_t *cr, const char *s);
void show_text (cairo_t *cr, const char *s);
void text_at (cairo_t *cr, const char *s, double x, double y, double align);
const char *kind_letter (int kind);
TimeUnit time_unit (double step_ns, double max_abs_ns);
int time_decimals (double step_ns, TimeUnit u);
void format_time_in (char *buf, size_t n, double ns, double step_ns, TimeUnit u);
void format_time (char *buf, size_t n, double ns, double step_ns);
double nice_step (double raw);
void fit_line (cairo_t *cr, const char *head, const char *middle, const char *tail, double max_w,
               char *buf, size_t size);

/* pp-timeline-render-frame.c */
void draw_header (Ctx *c, cairo_t *cr, double mean_idle_in_view, double mean_planned);
void draw_ruler (Ctx *c, cairo_t *cr);
void draw_steps (Ctx *c, cairo_t *cr, double rows_bottom);
void draw_legend (Ctx *c, cairo_t *cr);

/* pp-timeline-render-blocks.c */
int push_box (Ctx *c, const Box *b);
void draw_boxes (Ctx *c, cairo_t *cr, int r, int lane, int plan);
void fill_hatched (Ctx *c, cairo_t *cr, double x, double y, double w, double h);
cairo_pattern_t *hatch_pattern (const Theme *th);

/* pp-timeline-render-plan.c */
int plan_span_kind (int action_kind);
void plan_extent (const PpTimelineModel *m, int64_t *p0, int64_t *p1);
int64_t plan_shift (const PpTimelineModel *m, int64_t plan0, size_t k);
int64_t plan_limit (const PpTimelineModel *m, size_t k);
void plan_copies_in (const PpTimelineModel *m, int64_t plan0, int64_t plan1, int64_t t0, int64_t t1,
                     size_t *k0, size_t *k1);
int plan_runs_over (const PpTimelineModel *m, const PpTimelineView *v);

/* pp-timeline-render-focus.c */
void draw_focus (Ctx *c, cairo_t *cr);
void draw_arrows (Ctx *c, cairo_t *cr);
void draw_lost (Ctx *c, cairo_t *cr, int r);
void draw_range (Ctx *c, cairo_t *cr, double rows_bottom);

/* pp-timeline-render-stuck.c */
void draw_stuck (Ctx *c, cairo_t *cr);

/* pp-timeline-render-zoomed.c */
double median_step_ns (const PpTimelineModel *m);
double draw_rank_summary (Ctx *c, cairo_t *cr, int r, int64_t w0, int64_t w1);
void draw_whiskers (Ctx *c, cairo_t *cr, int r);
void draw_fold_bands (Ctx *c, cairo_t *cr, int r);
