/* pp-timeline-render.h — the one drawing function of the timeline.
 *
 * pp_timeline_render draws the Gantt chart of a PpTimelineModel with cairo:
 * the widget calls it on screen, `pipescope-cli render` and the app's
 * screenshot call it on PNG/SVG/PDF surfaces, the pixel tests on an image
 * surface.  What the window shows is what the report gets.
 *
 * Layout, top to bottom: an optional header (run description), the time ruler
 * (units adapt to the zoom), one row per rank (label on the left; a block lane
 * colored by kind with the micro-batch number inside a block when it fits and
 * the stage told apart by shade for interleaved/V schedules; a thin lane
 * below for sends, receives and waits; the plan lane under it when asked;
 * the host lane at the bottom where the trace has host records,
 * pp-timeline-host-lane.h),
 * step boundaries as vertical lines, and an optional legend.  The bubble —
 * time a rank sits idle or waits between its first and last work — is filled
 * in its own color under the blocks.  Spans narrower than a pixel are
 * aggregated per pixel column; a million spans never become a million
 * rectangles.
 */
#pragma once

#include <cairo.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-timeline-filter.h"
#include "pp-timeline-model.h"

typedef struct {
  int64_t t0_ns, t1_ns;     /* visible time range, on the spans' clock */
  double  width, height;    /* of the drawing, in cairo units (px) */
  int     show_header;      /* run description at the top (exports) */
  int     show_legend;      /* legend at the bottom */
  int     show_plan;        /* the plan lane under each rank */
  int     dark;             /* palette for a dark background */
  int     hover_rank;       /* highlight: rank and span index, -1 for none */
  long    hover_index;
  int     selected_rank;
  long    selected_index;
  /* The critical path drawn over the blocks (issue 16): with the flag set
   * and blocks given, pp_timeline_render calls
   * pp_timeline_render_critical_path last.  Borrowed. */
  int     show_critical_path;
  const struct _PpTimelinePathBlock *critical_path;
  size_t  n_critical_path;
  /* Issue 17.  The selected block's micro-batch (its step) is outlined on
   * every rank; arrows (borrowed) join each dependency's end to the start
   * of the block that waited for it. */
  const struct _PpTimelineArrow *arrows;
  size_t  n_arrows;
  /* A measured range (drag on the ruler): shaded, its length on the ruler. */
  int     has_range;
  int64_t range_t0_ns, range_t1_ns;
  /* Find and filter (borrowed; NULL or empty: everything): blocks that do
   * not match are dimmed. */
  const struct _PpTimelineFilter *filter;
  /* Past SUMMARY_PX a block (blocks narrower than that on average), each
   * rank and step is drawn as a summary bar; set to draw blocks anyway.
   * summaries: set to draw the bars whatever the width (where the trace
   * has steps enough to draw them); pp_timeline_view_as_shown sets one. */
  int     no_summaries;
  int     summaries;
  /* NULL, or where pp_timeline_render says what it drew (it adds to the
   * counts: zero it first).  Borrowed. */
  struct _PpTimelineDrawn *drawn;
  /* Issue 37: a stuck job's open actions (the stuck process's row marked
   * from its action's start to now, the waits up to now, arrows to whom
   * they wait for: pp-timeline-render-stuck.c) are drawn when the model's
   * last OPEN frames make a verdict (a kept trace); with stuck_live set
   * (a live job) only once no action has ended for
   * pp_timeline_model_stuck_after_s. */
  int     stuck_live;
} PpTimelineView;

/* What one pp_timeline_render drew, for the tests and for a caller that
 * reports it. */
typedef struct _PpTimelineDrawn {
  size_t plan_blocks;       /* plan blocks drawn, every copy's, whole */
  size_t plan_past_step;    /* of them, those running past the next step's start */
  size_t plan_labels;       /* plan blocks that got their label */
  int    legend_items;      /* entries of the legend */
  int    legend_lines;      /* lines it took */
  int    summarized;        /* per-step bars instead of blocks */
  int    plan_notes;        /* plan lanes that say why they hold no plan (bars) */
  int    stuck_rows;        /* open actions marked stuck (a root's, a cycle's) */
  int    open_waits;        /* waits drawn up to now */
  int    wait_arrows;       /* arrows from a waiting row to the row it waits for */
} PpTimelineDrawn;

/* A dependency drawn as an arrow: from the end of what was waited for to
 * the start of the block that waited. */
typedef struct _PpTimelineArrow {
  int     from_rank, to_rank;
  int64_t from_ns, to_ns;
} PpTimelineArrow;

/* One block on a critical path, on the spans' clock; joined: a line leads
 * to it from the block before it in the array (the same step's path). */
typedef struct _PpTimelinePathBlock {
  int     rank;
  int64_t start_ns, end_ns;
  int     joined;
} PpTimelinePathBlock;

/* Whether rank r's rows are drawn as per-step summaries at this view
 * (blocks narrower than about 2 px on average): what the widget reads to
 * say so. */
int     pp_timeline_view_summarized (const PpTimelineModel *m, const PpTimelineView *v);

/* The view shown (a window's) drawn at width x height: the same range,
 * and the same choice of blocks or per-step bars as the window made at its
 * own width, so an export "as shown" of a zoomed-out window draws its bars
 * (and of a zoomed-in one its blocks) whatever the export's size. */
void    pp_timeline_view_as_shown (const PpTimelineModel *m, const PpTimelineView *shown,
                                   double width, double height, PpTimelineView *out);

/* The unit the ruler reads in at this view ("s", "ms", "µs" or "ns"), its
 * length in ns and the decimals its labels show: tooltips give their times
 * in it, so a time reads as the ruler above it does. */
const char *pp_timeline_ruler_unit (const PpTimelineModel *m, const PpTimelineView *v,
                                    double *ns_per_unit, int *decimals);

/* A view of the whole run at width x height, everything else off. */
void    pp_timeline_view_init (PpTimelineView *v, const PpTimelineModel *m,
                               double width, double height);

void    pp_timeline_render (cairo_t *cr, const PpTimelineModel *m, const PpTimelineView *v);

/* Outlines v->critical_path's blocks and joins each to the one before it:
 * over the blocks, so anyone drawing the timeline (or an overlay above the
 * widget, which has the same view) can add it. */
void    pp_timeline_render_critical_path (cairo_t *cr, const PpTimelineModel *m,
                                          const PpTimelineView *v);

/* Geometry shared with the widget (hit testing, scrolling). */
typedef struct {
  double  x0, x1;           /* plot area, x */
  double  ruler_y, ruler_h;
  double  rows_y;           /* first row's top */
  double  row_h;            /* one rank: block lane + thin lane (+ plan lane) + gap */
  double  block_h, thin_h, plan_h;
  int     legend_lines;     /* the legend wraps onto this many lines (0: none) */
  double  host_h;           /* the host lane, at the row's bottom (0: none) */
} PpTimelineLayout;

void    pp_timeline_layout (const PpTimelineModel *m, const PpTimelineView *v,
                            PpTimelineLayout *out);
double  pp_timeline_x_of (const PpTimelineView *v, const PpTimelineLayout *l, int64_t t_ns);
int64_t pp_timeline_t_of (const PpTimelineView *v, const PpTimelineLayout *l, double x);

typedef struct {
  int   rank;
  long  index;              /* into pp_timeline_model_spans (rank), -1 if none */
  int   planned;            /* 1: a plan entry (index into planned) */
} PpTimelineHit;

/* What is under (x, y): a span of the block or thin lane, or a plan entry. */
/* Where the plan's step starts on its own clock (its first drawn block on
 * any rank): copies under the steps are shifted from here. */
int64_t pp_timeline_plan_origin (const PpTimelineModel *m);
/* The plan as the plan lane draws it, for anyone who shows it elsewhere
 * (the Chrome export): one copy under every step, its start on the step's
 * first begin marker; one where the model placed it without step markers;
 * none without a timed plan.  Copy k of a planned entry p runs from
 * p->start_ns + shift to p->end_ns + shift, whole: the plan lane never
 * cuts a block.  limit is where the copy meets the next one (the next
 * step's start; INT64_MAX for the last): a block that ends past it runs
 * into the next step's copy, and the lane draws it paler and dashed.
 * Entries of a kind pp_timeline_plan_span_kind gives -1 (the transfers)
 * are not drawn; the others are drawn as that span kind. */
size_t  pp_timeline_plan_copies (const PpTimelineModel *m);
void    pp_timeline_plan_copy (const PpTimelineModel *m, size_t k, int64_t *shift, int64_t *limit);
int     pp_timeline_plan_span_kind (int action_kind);
int     pp_timeline_hit (const PpTimelineModel *m, const PpTimelineView *v, double x, double y,
                         PpTimelineHit *out);

/* The palette (colorblind-safe, Okabe–Ito based); kind is a PpSpanKind, or
 * -1 for the bubble. */
void    pp_timeline_color (int kind, int dark, double rgb[3]);
/* The color of a part of the host lane (PP_HOST_PART_*, pp-timeline-host-lane.h). */
void    pp_timeline_host_color (int part, int dark, double rgb[3]);

/* Writes the timeline to path as PNG, SVG or PDF (by extension) at
 * width x height with header and legend; one-line errors. */
PpStatus pp_timeline_export (const PpTimelineModel *m, const PpTimelineView *v,
                             const char *path, PpError *err);
/* The same, written to path (a temporary, say) as the image type name's
 * extension says; messages name name. */
PpStatus pp_timeline_export_as (const PpTimelineModel *m, const PpTimelineView *v,
                                const char *path, const char *name, PpError *err);

/* Any drawing to a file as the timeline's export writes it (PNG, SVG or
 * PDF by name's extension, width x height px, a PDF page at 96 dpi):
 * draw(cr, data) draws it.  The heatmap's export (pp-heatmap.h) too. */
typedef void (*PpRenderDrawFn) (cairo_t *cr, const void *data);
PpStatus pp_render_export_as (const char *path, const char *name, double width, double height,
                              PpRenderDrawFn draw, const void *data, PpError *err);
