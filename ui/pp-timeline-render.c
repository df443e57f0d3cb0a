/* pp-timeline-render.c — the Gantt chart of a run, drawn with cairo only.
 *
 * One function draws everything (STYLE.md: drawing as a free function); the
 * widget, the exports and the pixel tests share it.  Cost is bounded by the
 * pixels, not the spans: per rank a binary search finds the first span that
 * can overlap the view, spans wider than SPAN_MIN_PX become rectangles
 * batched by color, narrower ones add their coverage to per-pixel columns
 * that are drawn once (an ARGB32 strip on image surfaces, merged runs of
 * rectangles on vector ones).
 */
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

/* ---- palette ----------------------------------------------------------------- */

typedef struct { double r, g, b; } Rgb;

#define HEX(h) { ((h) >> 16 & 0xff) / 255.0, ((h) >> 8 & 0xff) / 255.0, ((h) & 0xff) / 255.0 }

/* Okabe & Ito's colorblind-safe set, chosen so that every two colors of the
 * block lane, the bubble and a wait stay apart (CIELAB distance 15 or
 * more) for normal vision and simulated protanopia, deuteranopia and
 * tritanopia (tests/test-render.c holds it there).  Vermillion is kept for
 * what is lost (waits, the bubble's hatch), so the eye finds it first; I is
 * yellow, not the orange that read as a second vermillion beside it; the
 * bubble's ground is neutral, so that it never passes for an I block. */
static const Rgb light_kind[PP_N_SPAN_KINDS] = {
  [PP_SPAN_F]           = HEX (0x0072B2),   /* blue */
  [PP_SPAN_B]           = HEX (0x009E73),   /* bluish green */
  [PP_SPAN_I]           = HEX (0xF0E442),   /* yellow */
  [PP_SPAN_W]           = HEX (0xCC79A7),   /* reddish purple */
  [PP_SPAN_SEND_F]      = HEX (0x56B4E9),   /* sky blue */
  [PP_SPAN_RECV_F]      = HEX (0x56B4E9),
  [PP_SPAN_SEND_B]      = HEX (0x6FCFAE),   /* light green */
  [PP_SPAN_RECV_B]      = HEX (0x6FCFAE),
  [PP_SPAN_OPT]         = HEX (0x4D4D4D),   /* near black */
  [PP_SPAN_WAIT]        = HEX (0xD55E00),   /* vermillion */
  [PP_SPAN_KERNEL]      = HEX (0x333333),
  [PP_SPAN_MEMCPY]      = HEX (0x882255),   /* wine (Tol) */
  [PP_SPAN_MEMSET]      = HEX (0x999999),
  [PP_SPAN_OVERLAP_F_B] = HEX (0x56B4E9),   /* sky blue */
  /* data-parallel communication: violet, the one hue left clear of every
   * kind above for all four visions; deep for the parameters (FSDP's
   * unshard and reshard), light for the gradients' reduction */
  [PP_SPAN_UNSHARD]          = HEX (0x5E00BB),
  [PP_SPAN_RESHARD]          = HEX (0x5E00BB),
  [PP_SPAN_REDUCE_GRAD]      = HEX (0x9933FF),
  [PP_SPAN_WAIT_REDUCE_GRAD] = HEX (0x9933FF),
  /* the host lane's (pp-timeline-host-lane.c; apart from each other, a
   * wait and the lane's descheduled hatch for the four visions) */
  [PP_SPAN_GC]             = HEX (0x332288),   /* indigo (Tol) */
  [PP_SPAN_HOST_SCHEDULE]  = HEX (0x77AADD),   /* light blue (Tol) */
  [PP_SPAN_HOST_LOSS]      = HEX (0x663333),   /* brown */
  [PP_SPAN_HOST_DATA]      = HEX (0xEECC66),   /* sand (Tol) */
  [PP_SPAN_HOST_ZERO_GRAD] = HEX (0xAAAAAA),   /* grey */
  /* the last stage's loss computation: work of its own, saddle brown
   * (the host lane's loss is a darker brown), apart from every block-lane
   * kind, the bubble and a wait */
  [PP_SPAN_LOSS]           = HEX (0x8B4513),
};
static const Rgb dark_kind[PP_N_SPAN_KINDS] = {
  [PP_SPAN_F]           = HEX (0x2E8FD0),
  [PP_SPAN_B]           = HEX (0x14B889),
  [PP_SPAN_I]           = HEX (0xF0E442),
  [PP_SPAN_W]           = HEX (0xDA8CB8),
  [PP_SPAN_SEND_F]      = HEX (0x6CC2F0),
  [PP_SPAN_RECV_F]      = HEX (0x6CC2F0),
  [PP_SPAN_SEND_B]      = HEX (0x7DDBB9),
  [PP_SPAN_RECV_B]      = HEX (0x7DDBB9),
  [PP_SPAN_OPT]         = HEX (0x707070),
  [PP_SPAN_WAIT]        = HEX (0xD55E00),
  [PP_SPAN_KERNEL]      = HEX (0xE0E0E0),
  [PP_SPAN_MEMCPY]      = HEX (0xC0608F),
  [PP_SPAN_MEMSET]      = HEX (0x8C8C8C),
  [PP_SPAN_OVERLAP_F_B] = HEX (0xA6DCF7),
  [PP_SPAN_UNSHARD]          = HEX (0x5A1AE0),
  [PP_SPAN_RESHARD]          = HEX (0x5A1AE0),
  [PP_SPAN_REDUCE_GRAD]      = HEX (0xA050FF),
  [PP_SPAN_WAIT_REDUCE_GRAD] = HEX (0xA050FF),
  [PP_SPAN_GC]             = HEX (0xEECC66),   /* sand: the lane's brightest on dark */
  [PP_SPAN_HOST_SCHEDULE]  = HEX (0x33BBEE),
  [PP_SPAN_HOST_LOSS]      = HEX (0x994455),
  [PP_SPAN_HOST_DATA]      = HEX (0x0077BB),
  [PP_SPAN_HOST_ZERO_GRAD] = HEX (0x332288),
  [PP_SPAN_LOSS]           = HEX (0xA0522D),   /* sienna */
};
static const Rgb light_bubble = HEX (0xCCCCCC), dark_bubble = HEX (0x454545);

typedef struct {
  Rgb bg, fg, dim, ruler_bg, grid, bubble, hatch;
} Theme;

static void
theme_of (int dark, Theme *t)
{
  static const Theme light = { HEX (0xFFFFFF), HEX (0x1A1A1A), HEX (0x666666), HEX (0xF2F2F2),
                               HEX (0x8A8A8A), HEX (0xCCCCCC), HEX (0xD55E00) };
  static const Theme darkt = { HEX (0x1E1E1E), HEX (0xE8E8E8), HEX (0xA0A0A0), HEX (0x2A2A2A),
                               HEX (0x9A9A9A), HEX (0x454545), HEX (0xF07A2A) };
  *t = dark ? darkt : light;
}

void
pp_timeline_color (int kind, int dark, double rgb[3])
{
  Rgb c;
  if (kind < 0)
    c = dark ? dark_bubble : light_bubble;
  else if (kind < PP_N_SPAN_KINDS)
    c = dark ? dark_kind[kind] : light_kind[kind];
  else
    c = (Rgb) { 0.5, 0.5, 0.5 };
  rgb[0] = c.r;
  rgb[1] = c.g;
  rgb[2] = c.b;
}

void
pp_timeline_host_color (int part, int dark, double rgb[3])
{
  int kind = pp_timeline_host_lane_part_kind (part);
  if (kind < 0)
    pp_timeline_host_lane_descheduled_rgb (dark, rgb);
  else
    pp_timeline_color (kind, dark, rgb);
}

static Rgb
kind_rgb (int kind, int dark)
{
  double c[3];
  pp_timeline_color (kind, dark, c);
  return (Rgb) { c[0], c[1], c[2] };
}

/* The local chunk (0, 1, ...) of an interleaved or V schedule: lighter or
 * darker shades of the kind's color. */
static Rgb
shade (Rgb c, int chunk)
{
  static const double f[] = { 0, 0.42, -0.32, 0.66, -0.52 };
  double k = f[chunk % (int) (sizeof f / sizeof f[0])];
  if (k > 0)
    return (Rgb) { c.r + (1 - c.r) * k, c.g + (1 - c.g) * k, c.b + (1 - c.b) * k };
  return (Rgb) { c.r * (1 + k), c.g * (1 + k), c.b * (1 + k) };
}

static double
luminance (Rgb c)
{
  return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
}

static void
set_rgb (cairo_t *cr, Rgb c)
{
  cairo_set_source_rgb (cr, c.r, c.g, c.b);
}

static void
set_rgba (cairo_t *cr, Rgb c, double a)
{
  cairo_set_source_rgba (cr, c.r, c.g, c.b, a);
}

/* ---- geometry ------------------------------------------------------------------ */

void
pp_timeline_view_init (PpTimelineView *v, const PpTimelineModel *m, double width, double height)
{
  memset (v, 0, sizeof *v);
  /* The run's work: a live job's description comes well before its first
   * span (set-up), and its plan is drawn under the steps anyway.  From the
   * first step on where steps are known: a GPU run's set-up (contexts,
   * weights uploaded: seconds of memsets and copies) is not what one
   * opens a trace to see, and stays a scroll away. */
  if (!pp_timeline_model_span_extent (m, &v->t0_ns, &v->t1_ns))
    {
      v->t0_ns = pp_timeline_model_start_ns (m);
      v->t1_ns = pp_timeline_model_end_ns (m);
    }
  else if (pp_timeline_model_n_steps (m) > 0)
    {
      int64_t first_step = pp_timeline_model_step_starts (m)[0];
      if (first_step > v->t0_ns && first_step < v->t1_ns)
        v->t0_ns = first_step;
    }
  if (v->t1_ns <= v->t0_ns)
    v->t1_ns = v->t0_ns + 1000000;
  v->width = width;
  v->height = height;
  v->hover_rank = -1;
  v->hover_index = -1;
  v->selected_rank = -1;
  v->selected_index = -1;
}

/* ---- the legend's entries and where they go ------------------------------------ */

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

static void   font (cairo_t *cr, double size, int bold);
static double text_w (cairo_t *cr, const char *s);
static int    plan_lane_of (const PpTimelineModel *m, const PpTimelineView *v);
static int    plan_runs_over (const PpTimelineModel *m, const PpTimelineView *v);
static int    folded_rows (const PpTimelineModel *m);

/* The legend's height for n lines (one line: LEGEND_H, as it always was). */
static double
legend_height_of (int lines)
{
  return LEGEND_H + LEGEND_LINE_H * (lines > 1 ? lines - 1 : 0);
}

static double
legend_swatch_w (int swatch)
{
  return swatch == SW_CHUNKS || swatch == SW_PLAN || swatch == SW_PLAN_OVER ? 21 : 19;
}

static void
legend_add (Legend *lg, int swatch, int kind, const char *label)
{
  if (lg->n < LEGEND_MAX)
    lg->it[lg->n++] = (LegendItem) { swatch, kind, label, 0, 0 };
}

/* The entries of the legend for this view, laid out from x0 to the
 * image's right edge, wrapped where a line is full.  Widths are measured
 * on a scratch image surface in the legend's font, so that the layout
 * (which has no cairo_t) and the drawing agree on the lines. */
static void
legend_build (const PpTimelineModel *m, const PpTimelineView *v, double x0, Legend *lg)
{
  static const struct { int kind; const char *label; int thin; } kinds[] = {
    { PP_SPAN_F, "forward F", 0 }, { PP_SPAN_B, "backward B", 0 }, { PP_SPAN_I, "input grad I", 0 },
    { PP_SPAN_W, "weight grad W", 0 }, { PP_SPAN_OVERLAP_F_B, "F+B overlapped", 0 },
    { PP_SPAN_LOSS, "loss", 0 }, { PP_SPAN_OPT, "optimizer", 0 }, { PP_SPAN_UNSHARD, "unshard/reshard (DP)", 0 },
    { PP_SPAN_REDUCE_GRAD, "grad. reduce (DP)", 0 }, { PP_SPAN_SEND_F, "send/recv act.", 1 },
    { PP_SPAN_SEND_B, "send/recv grad.", 1 }, { PP_SPAN_WAIT, "wait", 1 },
    { PP_SPAN_KERNEL, "kernel", 1 }, { PP_SPAN_MEMCPY, "memcpy", 1 },
  };
  uint32_t seen = pp_timeline_model_kinds_seen (m);
  int summary = pp_timeline_view_summarized (m, v);
  const PpTraceDescription *d = pp_timeline_model_description (m);

  memset (lg, 0, sizeof *lg);
  legend_add (lg, SW_HATCH, -1, "bubble (idle or waiting)");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    {
      int k = kinds[i].kind;
      uint32_t bits = 1u << k;
      if (k == PP_SPAN_SEND_F)
        bits |= 1u << PP_SPAN_RECV_F;
      if (k == PP_SPAN_SEND_B)
        bits |= 1u << PP_SPAN_RECV_B;
      if (k == PP_SPAN_UNSHARD)
        bits |= 1u << PP_SPAN_RESHARD;
      if (k == PP_SPAN_REDUCE_GRAD)
        bits |= 1u << PP_SPAN_WAIT_REDUCE_GRAD;
      if (!(seen & bits) && k != PP_SPAN_F)
        continue;
      if (summary && kinds[i].thin)
        continue;   /* zoomed out, the thin lane says something else */
      legend_add (lg, kinds[i].thin ? SW_THIN : SW_BLOCK, k, kinds[i].label);
    }
  /* the host lane's parts this trace holds (kind: the part) */
  unsigned host = !summary && pp_timeline_host_lane_present (m) ? pp_timeline_host_lane_parts_seen (m) : 0;
  static const int host_order[] = { PP_HOST_PART_GC, PP_HOST_PART_DESCHEDULED, PP_HOST_PART_WAIT,
                                    PP_HOST_PART_SCHEDULE, PP_HOST_PART_LOSS, PP_HOST_PART_DATA,
                                    PP_HOST_PART_ZERO_GRAD };
  for (size_t o = 0; o < sizeof host_order / sizeof host_order[0]; o++)
    {
      int p = host_order[o];
      if ((host & (1u << p)) && !(p == PP_HOST_PART_WAIT && (seen & (1u << PP_SPAN_WAIT))))
        legend_add (lg, SW_HOST, p, pp_timeline_host_lane_part_name (p));
    }
  if (d != NULL && d->n_virtual > 1)
    legend_add (lg, SW_CHUNKS, -1, "chunk 0 / 1 (shade)");
  /* zoomed out the plan lane is not drawn (per-step bars instead) */
  if (plan_lane_of (m, v) && !summary)
    {
      /* which plan, in the words the header's plan bubble uses */
      legend_add (lg, SW_PLAN, -1, pp_analysis_plan_label (pp_analysis_plan_of_backend (d ? d->backend : NULL)));
      if (plan_runs_over (m, v))
        legend_add (lg, SW_PLAN_OVER, -1, "plan past its step's end");
    }
  if (summary)
    legend_add (lg, SW_HEAT, -1, "step length: median to 2x (bars: work by kind a step)");
  if (folded_rows (m))
    legend_add (lg, SW_FOLD, -1, "replicas folded: the median copy, a band from the first start, a mark to the latest end");
  legend_add (lg, SW_STEP, -1, "step boundary");

  /* at most a third of the height: a tiny window keeps some rows */
  int max_lines = (int) fmax (1, floor ((v->height / 3 - LEGEND_H) / LEGEND_LINE_H) + 1);
  cairo_surface_t *scratch = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t *cr = cairo_create (scratch);
  double x = x0, right = v->width - 4, y = 0;
  font (cr, 11, 0);
  lg->lines = 1;
  for (int i = 0; i < lg->n; i++)
    {
      double w = legend_swatch_w (lg->it[i].swatch) + text_w (cr, lg->it[i].label);
      if (x > x0 && x + w > right)
        {
          if (lg->lines == max_lines)
            {
              lg->n = i;
              break;
            }
          x = x0;
          y += LEGEND_LINE_H;
          lg->lines++;
        }
      lg->it[i].x = x;
      lg->it[i].y = y;
      x += w + 14;
    }
  cairo_destroy (cr);
  cairo_surface_destroy (scratch);
}

/* The lines the legend takes in this view; 0 without a legend. */
static int
legend_lines (const PpTimelineModel *m, const PpTimelineView *v, double x0)
{
  Legend lg;
  if (!v->show_legend)
    return 0;
  legend_build (m, v, x0, &lg);
  return lg.lines;
}

/* The plot's left and right edges (what the legend and the zoom's
 * summaries need, before the rest of the layout). */
static void
layout_x (const PpTimelineModel *m, const PpTimelineView *v, double *x0, double *x1)
{
  *x0 = v->width >= 320 ? (pp_timeline_model_is_view (m) ? LABEL_W_VIEW : LABEL_W) : floor (v->width * 0.2);
  *x1 = v->width - RIGHT_MARGIN;
  if (*x1 < *x0 + 1)
    *x1 = *x0 + 1;
}

/* Whether the rows carry a plan lane: asked for, and, for rows of
 * processes (replicas unfolded), which carry no plan (a pipeline rank's),
 * only where some row has one: no lane kept empty, no "plan" label. */
static int
plan_lane_of (const PpTimelineModel *m, const PpTimelineView *v)
{
  int plan = v->show_plan;
  if (plan && pp_timeline_model_is_view (m))
    {
      plan = 0;
      for (int r = 0; r < pp_timeline_model_n_ranks (m) && !plan; r++)
        plan = pp_timeline_model_n_planned (m, r) > 0;
    }
  return plan;
}

void
pp_timeline_view_as_shown (const PpTimelineModel *m, const PpTimelineView *shown, double width,
                           double height, PpTimelineView *out)
{
  int bars = pp_timeline_view_summarized (m, shown);
  *out = *shown;
  out->width = width;
  out->height = height;
  out->summaries = bars;
  out->no_summaries = !bars;
}

void
pp_timeline_layout (const PpTimelineModel *m, const PpTimelineView *v, PpTimelineLayout *out)
{
  int n = pp_timeline_model_n_ranks (m);
  double y = 0, avail, inner, gap;

  if (n < 1)
    n = 1;
  memset (out, 0, sizeof *out);
  layout_x (m, v, &out->x0, &out->x1);
  out->legend_lines = legend_lines (m, v, out->x0);
  if (v->show_header)
    y += HEADER_H;
  out->ruler_y = y;
  out->ruler_h = RULER_H;
  out->rows_y = y + RULER_H + 4;
  avail = v->height - out->rows_y - (v->show_legend ? legend_height_of (out->legend_lines) : 0) - 4;
  out->row_h = avail > n ? avail / n : 1;
  gap = out->row_h >= 20 ? fmax (3, out->row_h * 0.14) : out->row_h * 0.1;
  inner = out->row_h - gap;
  out->plan_h = 0;
  if (plan_lane_of (m, v))
    {
      /* the plan lane tall enough for its numbers (a report prints it) */
      out->block_h = inner * 0.55;
      out->thin_h = inner * 0.13;
      out->plan_h = inner * 0.32;
    }
  else
    {
      out->block_h = inner * 0.80;
      out->thin_h = inner * 0.20;
    }
  /* the host lane at the row's bottom, taken from the blocks */
  out->host_h = pp_timeline_host_lane_present (m) ? inner * 0.14 : 0;
  out->block_h -= out->host_h;
}

/* The view with its range inside the model's time range (see
 * PP_TIMELINE_MAX_ABS_NS) and not empty: a range a widget or a file set to
 * anything then leaves every difference of a model time and a view time in
 * an int64. */
static void
view_clamped (const PpTimelineView *v, PpTimelineView *out)
{
  const int64_t lim = PP_TIMELINE_MAX_ABS_NS;
  *out = *v;
  if (out->t0_ns > lim - 1)
    out->t0_ns = lim - 1;
  if (out->t0_ns < -lim)
    out->t0_ns = -lim;
  if (out->t1_ns > lim)
    out->t1_ns = lim;
  if (out->t1_ns <= out->t0_ns)
    out->t1_ns = out->t0_ns + 1;
}

/* t - t0 as a double: exact enough, and no int64 overflow whatever the two. */
static double
ns_between (int64_t t0, int64_t t)
{
  int64_t d;
  if (!__builtin_sub_overflow (t, t0, &d))
    return (double) d;
  return (double) t - (double) t0;
}

double
pp_timeline_x_of (const PpTimelineView *v, const PpTimelineLayout *l, int64_t t_ns)
{
  double span = ns_between (v->t0_ns, v->t1_ns);
  if (span <= 0)
    span = 1;
  return l->x0 + ns_between (v->t0_ns, t_ns) * (l->x1 - l->x0) / span;
}

int64_t
pp_timeline_t_of (const PpTimelineView *v, const PpTimelineLayout *l, double x)
{
  double w = l->x1 - l->x0;
  if (w <= 0)
    w = 1;
  double t = (double) v->t0_ns + (x - l->x0) * ns_between (v->t0_ns, v->t1_ns) / w;
  if (!(t < (double) PP_TIMELINE_MAX_ABS_NS))
    return PP_TIMELINE_MAX_ABS_NS;
  if (!(t > -(double) PP_TIMELINE_MAX_ABS_NS))
    return -PP_TIMELINE_MAX_ABS_NS;
  return (int64_t) llround (t);
}

/* Which lane a span kind lives in. */
enum { LANE_BLOCK, LANE_THIN, LANE_KERNEL, LANE_NONE,
       LANE_PLAN_OVER };   /* a Box's: a plan block past its step's end */

static int
lane_of (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: case PP_SPAN_B: case PP_SPAN_I: case PP_SPAN_W:
    case PP_SPAN_OVERLAP_F_B: case PP_SPAN_OPT: case PP_SPAN_LOSS:
    case PP_SPAN_UNSHARD: case PP_SPAN_RESHARD: case PP_SPAN_REDUCE_GRAD:
    case PP_SPAN_WAIT_REDUCE_GRAD:
      return LANE_BLOCK;
    case PP_SPAN_SEND_F: case PP_SPAN_RECV_F: case PP_SPAN_SEND_B: case PP_SPAN_RECV_B:
    case PP_SPAN_WAIT:
      return LANE_THIN;
    case PP_SPAN_KERNEL: case PP_SPAN_MEMCPY: case PP_SPAN_MEMSET:
      return LANE_KERNEL;
    default:
      return LANE_NONE;
    }
}

/* Vertical extent of a lane of rank r. */
static void
lane_y (const PpTimelineLayout *l, int r, int lane, double *y, double *h)
{
  double top = l->rows_y + r * l->row_h;
  switch (lane)
    {
    case LANE_BLOCK:
      *y = top;
      *h = l->block_h;
      break;
    case LANE_THIN:   /* comm and waits: upper part of the thin lane */
      *y = top + l->block_h + (l->thin_h >= 4 ? 1 : 0);
      *h = l->thin_h - (l->thin_h >= 4 ? 1 : 0);
      break;
    case LANE_KERNEL: /* kernels: lower half of the thin lane, over comm */
      *y = top + l->block_h + l->thin_h * 0.5;
      *h = l->thin_h * 0.5;
      break;
    default:          /* plan */
      *y = top + l->block_h + l->thin_h + (l->plan_h >= 6 ? 2 : 0);
      *h = l->plan_h - (l->plan_h >= 6 ? 2 : 0);
      break;
    }
}

/* The host lane: the row's bottom, under the plan lane. */
static double
lane_y_host (const PpTimelineLayout *l, int r)
{
  return l->rows_y + r * l->row_h + l->block_h + l->thin_h + l->plan_h;
}

static int
plan_span_kind (int action_kind)
{
  switch (action_kind)
    {
    case PP_TRACE_ACT_F: return PP_SPAN_F;
    case PP_TRACE_ACT_B: return PP_SPAN_B;
    case PP_TRACE_ACT_I: return PP_SPAN_I;
    case PP_TRACE_ACT_W: return PP_SPAN_W;
    case PP_TRACE_ACT_OVERLAP_F_B: return PP_SPAN_OVERLAP_F_B;
    case PP_TRACE_ACT_OPT: return PP_SPAN_OPT;
    case PP_TRACE_ACT_UNSHARD: return PP_SPAN_UNSHARD;
    case PP_TRACE_ACT_RESHARD: return PP_SPAN_RESHARD;
    case PP_TRACE_ACT_REDUCE_GRAD: return PP_SPAN_REDUCE_GRAD;
    case PP_TRACE_ACT_WAIT_REDUCE_GRAD: return PP_SPAN_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

/* ---- the per-render scratch ------------------------------------------------------ */

/* Aggregation slots: the kinds of the block lane, then those of the thin lane. */
enum { N_SLOTS = 16, N_BLOCK_SLOTS = 11 };
static const int slot_kind[N_SLOTS] = {
  PP_SPAN_F, PP_SPAN_B, PP_SPAN_I, PP_SPAN_W, PP_SPAN_OVERLAP_F_B, PP_SPAN_OPT,
  PP_SPAN_UNSHARD, PP_SPAN_RESHARD, PP_SPAN_REDUCE_GRAD, PP_SPAN_WAIT_REDUCE_GRAD, PP_SPAN_LOSS,
  PP_SPAN_SEND_F, PP_SPAN_RECV_F, PP_SPAN_SEND_B, PP_SPAN_RECV_B, PP_SPAN_WAIT,
};
/* slot_kind inverted, plus one (0: no slot): every span narrower than a
 * pixel asks it, so a table, not a search. */
static const signed char slot_plus1[PP_N_SPAN_KINDS] = {
  [PP_SPAN_F] = 1, [PP_SPAN_B] = 2, [PP_SPAN_I] = 3, [PP_SPAN_W] = 4, [PP_SPAN_OVERLAP_F_B] = 5,
  [PP_SPAN_OPT] = 6, [PP_SPAN_UNSHARD] = 7, [PP_SPAN_RESHARD] = 8, [PP_SPAN_REDUCE_GRAD] = 9,
  [PP_SPAN_WAIT_REDUCE_GRAD] = 10, [PP_SPAN_LOSS] = 11, [PP_SPAN_SEND_F] = 12, [PP_SPAN_RECV_F] = 13,
  [PP_SPAN_SEND_B] = 14, [PP_SPAN_RECV_B] = 15, [PP_SPAN_WAIT] = 16,
};
static int
slot_of (int kind)
{
  return kind >= 0 && kind < PP_N_SPAN_KINDS ? slot_plus1[kind] - 1 : -1;
}

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

static int
push_box (Ctx *c, const Box *b)
{
  if (c->n_boxes == c->cap_boxes)
    {
      size_t cap = c->cap_boxes ? 2 * c->cap_boxes : 1024;
      Box *n = realloc (c->boxes, cap * sizeof *n);
      if (n == NULL)
        return -1;
      c->boxes = n;
      c->cap_boxes = cap;
    }
  c->boxes[c->n_boxes++] = *b;
  return 0;
}

/* Adds [xa, xb) (plot-relative px) of slot to the columns. */
static inline void
cover (Ctx *c, int lane, int slot, double xa, double xb)
{
  int ca, cb;
  if (xa < 0)
    xa = 0;
  if (xb > c->ncols)
    xb = c->ncols;
  if (xb <= xa)
    {
      if (xa >= c->ncols || xb < 0)
        return;
      xb = xa + 0.05;   /* an instant still shows, faintly */
    }
  ca = (int) xa;
  float *cv = &c->cov[(size_t) ca * N_SLOTS + slot];
  if (xb <= ca + 1)
    {
      /* The common case: inside one column. */
      cv[0] += (float) (xb - xa);
      cb = ca;
    }
  else
    {
      cb = (int) xb;
      if (cb >= c->ncols || cb == xb)
        cb--;
      cv[0] += (float) (ca + 1 - xa);
      for (int col = ca + 1; col < cb; col++)
        c->cov[(size_t) col * N_SLOTS + slot] += 1.0f;
      c->cov[(size_t) cb * N_SLOTS + slot] += (float) (xb - cb);
    }
  if (ca < c->cmin[lane])
    c->cmin[lane] = ca;
  if (cb > c->cmax[lane])
    c->cmax[lane] = cb;
}

/* Draws and clears the aggregated columns of one lane. */
static void
flush_columns (Ctx *c, cairo_t *cr, int lane, double y, double h)
{
  int s0 = lane == 0 ? 0 : N_BLOCK_SLOTS, s1 = lane == 0 ? N_BLOCK_SLOTS : N_SLOTS;
  int ca = c->cmin[lane], cb = c->cmax[lane];
  Rgb col[N_SLOTS];

  if (ca > cb)
    return;
  for (int s = s0; s < s1; s++)
    col[s] = kind_rgb (slot_kind[s], c->v->dark);
  y = round (y);
  h = round (h);
  if (h < 1)
    h = 1;

  if (c->image)
    {
      int n = cb - ca + 1;
      for (int i = ca; i <= cb; i++)
        {
          float *cv = &c->cov[(size_t) i * N_SLOTS];
          float tot = 0, best = 0;
          int bs = -1;
          for (int s = s0; s < s1; s++)
            {
              tot += cv[s];
              if (cv[s] > best)
                {
                  best = cv[s];
                  bs = s;
                }
              cv[s] = 0;
            }
          uint32_t px = 0;
          if (bs >= 0)
            {
              double a = tot > 1 ? 1 : tot;
              if (a < 0.25)
                a = 0.25;   /* a lone tiny span must stay visible */
              px = (uint32_t) (a * 255 + 0.5) << 24
                   | (uint32_t) (col[bs].r * a * 255 + 0.5) << 16
                   | (uint32_t) (col[bs].g * a * 255 + 0.5) << 8
                   | (uint32_t) (col[bs].b * a * 255 + 0.5);
            }
          c->strip[i - ca] = px;
        }
      cairo_surface_t *s = cairo_image_surface_create_for_data ((unsigned char *) c->strip,
                                                                CAIRO_FORMAT_ARGB32, n, 1, n * 4);
      cairo_save (cr);
      cairo_rectangle (cr, c->l.x0 + ca, y, n, h);
      cairo_clip (cr);
      cairo_translate (cr, c->l.x0 + ca, y);
      cairo_scale (cr, 1, h);
      cairo_set_source_surface (cr, s, 0, 0);
      cairo_pattern_set_filter (cairo_get_source (cr), CAIRO_FILTER_NEAREST);
      cairo_paint (cr);
      cairo_restore (cr);
      cairo_surface_destroy (s);
    }
  else
    {
      /* Vector output: one rectangle per run of equal columns. */
      int run_s = -1, run_bs = -1, run_a = 0;
      for (int i = ca; i <= cb + 1; i++)
        {
          int bs = -1, aq = 0;
          if (i <= cb)
            {
              float *cv = &c->cov[(size_t) i * N_SLOTS];
              float tot = 0, best = 0;
              for (int s = s0; s < s1; s++)
                {
                  tot += cv[s];
                  if (cv[s] > best)
                    {
                      best = cv[s];
                      bs = s;
                    }
                  cv[s] = 0;
                }
              aq = bs >= 0 ? (int) lround (fmax (0.25, fmin (1.0, tot)) * 16) : 0;
            }
          if (run_s >= 0 && (bs != run_bs || aq != run_a))
            {
              set_rgba (cr, col[run_bs], run_a / 16.0);
              cairo_rectangle (cr, c->l.x0 + run_s, y, i - run_s, h);
              cairo_fill (cr);
              run_s = -1;
            }
          if (bs >= 0 && run_s < 0)
            {
              run_s = i;
              run_bs = bs;
              run_a = aq;
            }
        }
    }
  c->cmin[lane] = c->ncols;
  c->cmax[lane] = -1;
}

/* ---- text helpers ------------------------------------------------------------------ */

static void
font (cairo_t *cr, double size, int bold)
{
  cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL,
                          bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, size);
}

/* Text from a trace (a model, a span's name) may be anything: cairo
 * refuses what is not UTF-8 (and stops drawing), and no picture shows a
 * control character; both become U+FFFD (pp-trace-text.h). */
#define SHOWN_MAX 2048

static double
text_w (cairo_t *cr, const char *s)
{
  cairo_text_extents_t e;
  char shown[SHOWN_MAX];
  pp_trace_text_printable (s, shown, sizeof shown);
  cairo_text_extents (cr, shown, &e);
  return e.x_advance;
}

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
static const cairo_user_data_key_t text_sink_key;

/* Shows s at the current point: on the surface, or into the sink. */
static void
show_text (cairo_t *cr, const char *s)
{
  TextSink *k = cairo_get_user_data (cr, &text_sink_key);
  double x, y;
  char shown[SHOWN_MAX];
  pp_trace_text_printable (s, shown, sizeof shown);
  s = shown;
  if (k == NULL)
    {
      cairo_show_text (cr, s);
      return;
    }
  if (!cairo_has_current_point (cr))
    return;
  cairo_get_current_point (cr, &x, &y);
  cairo_new_path (cr);
  if (!cairo_in_clip (cr, x, y) || *s == 0)
    return;
  if (k->n == k->cap)
    {
      size_t cap = k->cap ? 2 * k->cap : 256;
      SinkText *n = realloc (k->t, cap * sizeof *n);
      if (n == NULL)
        return;
      k->t = n;
      k->cap = cap;
    }
  SinkText *t = &k->t[k->n];
  cairo_matrix_t fm;
  double dx = 0, dy;
  cairo_get_font_matrix (cr, &fm);
  dy = fm.yy;
  cairo_user_to_device_distance (cr, &dx, &dy);
  cairo_user_to_device (cr, &x, &y);
  t->x = x;
  t->y = y;
  t->size = fabs (dy);
  t->bold = cairo_toy_font_face_get_weight (cairo_get_font_face (cr)) == CAIRO_FONT_WEIGHT_BOLD;
  t->rgba[0] = t->rgba[1] = t->rgba[2] = 0;
  t->rgba[3] = 1;
  cairo_pattern_get_rgba (cairo_get_source (cr), &t->rgba[0], &t->rgba[1], &t->rgba[2], &t->rgba[3]);
  t->s = strdup (s);
  if (t->s != NULL)
    k->n++;
}

/* Text at x (align 0 left, 0.5 center, 1 right), baseline y. */
static void
text_at (cairo_t *cr, const char *s, double x, double y, double align)
{
  cairo_move_to (cr, x - align * text_w (cr, s), y);
  show_text (cr, s);
}

static const char *
kind_letter (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: return "F";
    case PP_SPAN_B: return "B";
    case PP_SPAN_I: return "I";
    case PP_SPAN_W: return "W";
    case PP_SPAN_OVERLAP_F_B: return "FB";
    case PP_SPAN_OPT: return "OPT";
    case PP_SPAN_LOSS: return "L";
    default: return "";
    }
}

/* The unit for times a step_ns apart, the largest of them max_abs_ns. */
typedef struct {
  const char *name;
  double      scale;   /* ns a unit */
} TimeUnit;

static TimeUnit
time_unit (double step_ns, double max_abs_ns)
{
  if (step_ns >= 1e8 || max_abs_ns >= 1e10)
    return (TimeUnit) { "s", 1e9 };
  if (step_ns >= 1e5)
    return (TimeUnit) { "ms", 1e6 };
  if (step_ns >= 1e2)
    return (TimeUnit) { "µs", 1e3 };
  return (TimeUnit) { "ns", 1 };
}

/* The decimals that tell times step_ns apart in unit u. */
static int
time_decimals (double step_ns, TimeUnit u)
{
  int dec = (int) ceil (-log10 (step_ns / u.scale) - 1e-9);
  return dec < 0 ? 0 : dec > 6 ? 6 : dec;
}

static void
format_time_in (char *buf, size_t n, double ns, double step_ns, TimeUnit u)
{
  snprintf (buf, n, "%.*f %s", time_decimals (step_ns, u), ns / u.scale, u.name);
}

/* "1.5 ms" style: value in ns with a unit chosen for a step of step_ns. */
static void
format_time (char *buf, size_t n, double ns, double step_ns)
{
  format_time_in (buf, n, ns, step_ns, time_unit (step_ns, fabs (ns)));
}

/* A 1-2-5 step near raw. */
static double
nice_step (double raw)
{
  double p = pow (10, floor (log10 (raw)));
  double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

const char *
pp_timeline_ruler_unit (const PpTimelineModel *m, const PpTimelineView *view, double *ns_per_unit,
                        int *decimals)
{
  PpTimelineView v;
  double x0, x1;
  view_clamped (view, &v);
  layout_x (m, &v, &x0, &x1);
  double span = ns_between (v.t0_ns, v.t1_ns);
  double step = nice_step (90 / ((x1 - x0) / (span > 0 ? span : 1)));
  double origin = (double) pp_timeline_model_start_ns (m);
  TimeUnit u = time_unit (step, fmax (fabs ((double) v.t0_ns - origin), fabs ((double) v.t1_ns - origin)));
  if (ns_per_unit != NULL)
    *ns_per_unit = u.scale;
  if (decimals != NULL)
    *decimals = time_decimals (step, u);
  return u.name;
}

/* ---- the parts ---------------------------------------------------------------------- */

/* The longest prefix of s (at most n bytes, cut on a UTF-8 character's
 * start) with "…" after it that is at most max_w wide in cr's font, into
 * buf; "…" alone when nothing fits beside it.  Binary search on the cut. */
static void
ellipsize (cairo_t *cr, const char *s, size_t n, const char *after, double max_w, char *buf, size_t size)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo + 1) / 2, cut = mid;
      while (cut > 0 && ((unsigned char) s[cut] & 0xC0) == 0x80)
        cut--;
      snprintf (buf, size, "%.*s…%s", (int) cut, s, after);
      if (text_w (cr, buf) <= max_w)
        lo = mid;
      else
        hi = mid - 1;
    }
  while (lo > 0 && ((unsigned char) s[lo] & 0xC0) == 0x80)
    lo--;
  snprintf (buf, size, "%.*s…%s", (int) lo, s, after);
}

/* A header line fitted into max_w: as it is when it fits, else with the
 * middle part (the model line, which runs long: a PyTorch job's names its
 * stages) cut short, so that the figures after it stay; else with the
 * middle left out and the rest cut at its end. */
static void
fit_line (cairo_t *cr, const char *head, const char *middle, const char *tail, double max_w,
          char *buf, size_t size)
{
  char whole[1280], trial[1280];
  snprintf (buf, size, "%s%s%s", head, middle, tail);
  if (text_w (cr, buf) <= max_w)
    return;
  snprintf (trial, sizeof trial, "%s…%s", head, tail);
  if (middle[0] != '\0' && text_w (cr, trial) <= max_w)
    {
      /* head + "…" + tail fits: the longest cut falls inside middle */
      snprintf (whole, sizeof whole, "%s%s", head, middle);
      ellipsize (cr, whole, strlen (whole), tail, max_w, buf, size);
    }
  else
    {
      /* too narrow even so: the middle gone, the rest cut at its end */
      snprintf (whole, sizeof whole, "%s%s%s", head, middle[0] ? "…" : "", tail);
      ellipsize (cr, whole, strlen (whole), "", max_w, buf, size);
    }
}

/* The header's measured figure: with steps, the mean over ranks of each
 * rank's bubble a step (pp_timeline_model_step_bubbles: what the stats
 * panel, info and run print, and what compares with the plan's); without,
 * the mean idle share of the visible part (what the row labels say). */
static void
draw_header (Ctx *c, cairo_t *cr, double mean_idle_in_view, double mean_planned)
{
  double mean_bubble = -1;
  int n_steps = 0;
  {
    double *per = calloc ((size_t) c->n_ranks + 1, sizeof *per);
    if (per != NULL && c->n_ranks > 0 && (n_steps = pp_timeline_model_step_bubbles (c->m, per)) > 0)
      {
        double sum = 0;
        int n = 0;
        for (int r = 0; r < c->n_ranks; r++)
          if (per[r] >= 0)
            {
              sum += per[r];
              n++;
            }
        if (n > 0)
          mean_bubble = sum / n;
      }
    free (per);
  }
  const PpTraceDescription *d = pp_timeline_model_description (c->m);
  char line[1024], dur[64];
  double span = ns_between (c->v->t0_ns, c->v->t1_ns);

  /* both lines fit between the margins, however narrow the image */
  double max_w = c->v->width - 2 * 12;
  char fitted[1024];

  set_rgb (cr, c->th.fg);
  font (cr, 16, 1);
  if (d != NULL)
    snprintf (line, sizeof line, "%s   P=%d  M=%d  V=%d", d->schedule, d->n_ranks,
              d->n_microbatches, d->n_virtual > 0 ? d->n_virtual : 1);
  else
    snprintf (line, sizeof line, "trace without description   P=%d", c->n_ranks);
  fit_line (cr, "", line, "", max_w, fitted, sizeof fitted);
  text_at (cr, fitted, 12, 20, 0);

  format_time (dur, sizeof dur, span, nice_step (span / 10));
  char head[256] = "", middle[sizeof d->model + 8] = "";
  if (d != NULL)
    {
      snprintf (head, sizeof head, "backend %s  ·  model ", d->backend);
      snprintf (middle, sizeof middle, "%s", d->model);
    }
  {
    size_t len = 0;
    line[0] = 0;
    if (d != NULL)
      len += snprintf (line + len, sizeof line - len, "  ·  host %s  ·  ", d->host);
    if (len < sizeof line)
      len += snprintf (line + len, sizeof line - len, "%s shown", dur);
    if (mean_bubble >= 0 && len < sizeof line)
      len += snprintf (line + len, sizeof line - len, "  ·  " PP_ANALYSIS_MEASURED_LABEL " %.1f%% (median of %d steps)",
                       100 * mean_bubble, n_steps);
    else if (mean_idle_in_view >= 0 && len < sizeof line)
      len += snprintf (line + len, sizeof line - len, "  ·  idle %.1f%% of what is shown",
                       100 * mean_idle_in_view);
    /* the rows are one replica of each pipeline rank: said where the
     * bubble is, so that a report's image says whose bubble it is */
    char note[256];
    pp_timeline_model_replica_note (c->m, note, sizeof note);
    if (note[0] && len < sizeof line)
      len += snprintf (line + len, sizeof line - len, "  ·  %s", note);
    if (mean_planned >= 0 && len < sizeof line)
      len += snprintf (line + len, sizeof line - len, "  ·  bubble, %s %.1f%%",
                       pp_analysis_plan_label (pp_analysis_plan_of_backend (d ? d->backend : NULL)), 100 * mean_planned);
    if (pp_timeline_model_dropped (c->m) > 0 && len < sizeof line)
      snprintf (line + len, sizeof line - len, "  ·  %llu events dropped",
                (unsigned long long) pp_timeline_model_dropped (c->m));
  }
  set_rgb (cr, c->th.dim);
  font (cr, 12, 0);
  /* the model line gives way first: the figures after it stay */
  fit_line (cr, head, middle, line, max_w, fitted, sizeof fitted);
  text_at (cr, fitted, 12, 39, 0);
}

static void
draw_ruler (Ctx *c, cairo_t *cr)
{
  const PpTimelineLayout *l = &c->l;
  double span = ns_between (c->v->t0_ns, c->v->t1_ns);
  double px_per_ns = (l->x1 - l->x0) / (span > 0 ? span : 1);
  double step = nice_step (90 / px_per_ns);   /* a label every ~90 px or more */
  double origin = (double) c->origin;
  double first = ceil (((double) c->v->t0_ns - origin) / step) * step;
  /* one unit along the ruler (its labels, and the tooltips, read in it) */
  TimeUnit unit = time_unit (step, fmax (fabs ((double) c->v->t0_ns - origin),
                                         fabs ((double) c->v->t1_ns - origin)));
  double ybot = l->ruler_y + l->ruler_h;
  char buf[64];
  /* Counted, not stepped until past the end: far from zero, t += step may
   * not move t at all.  About one a 90 px; never more than a few hundred. */
  double n_ticks = floor (((double) c->v->t1_ns - origin + step * 1e-6 - first) / step) + 1;
  if (!(n_ticks >= 0))
    n_ticks = 0;
  if (n_ticks > 1000)
    n_ticks = 1000;

  set_rgb (cr, c->th.ruler_bg);
  cairo_rectangle (cr, l->x0, l->ruler_y, l->x1 - l->x0, l->ruler_h);
  cairo_fill (cr);
  font (cr, 11, 0);
  cairo_set_line_width (cr, 1);
  for (int i = 0; i < (int) n_ticks; i++)
    {
      double t = first + i * step;
      double x = round (l->x0 + (t + origin - (double) c->v->t0_ns) * px_per_ns) + 0.5;
      set_rgb (cr, c->th.dim);
      cairo_move_to (cr, x, ybot - 6);
      cairo_line_to (cr, x, ybot);
      cairo_stroke (cr);
      /* Minor ticks, five per step. */
      for (int k = 1; k < 5; k++)
        {
          double xm = round (x + k * step / 5 * px_per_ns);
          if (xm < l->x1)
            {
              cairo_move_to (cr, xm + 0.5, ybot - 3);
              cairo_line_to (cr, xm + 0.5, ybot);
              cairo_stroke (cr);
            }
        }
      format_time_in (buf, sizeof buf, fabs (t) < step * 1e-6 ? 0 : t, step, unit);
      set_rgb (cr, c->th.fg);
      double w = text_w (cr, buf);
      double tx = x - w / 2;
      if (tx < l->x0 - 10)
        tx = l->x0 - 10;
      if (tx + w > c->v->width - 2)
        tx = c->v->width - 2 - w;
      cairo_move_to (cr, tx, ybot - 9);
      show_text (cr, buf);
    }
  set_rgb (cr, c->th.dim);
  cairo_move_to (cr, l->x0, ybot - 0.5);
  cairo_line_to (cr, l->x1, ybot - 0.5);
  cairo_stroke (cr);
}

static void
draw_steps (Ctx *c, cairo_t *cr, double rows_bottom)
{
  const int64_t *st = pp_timeline_model_step_starts (c->m);
  const int32_t *num = pp_timeline_model_step_numbers (c->m);
  size_t n = pp_timeline_model_n_steps (c->m);
  double last_label_end = -1e9;
  const double dash[] = { 4, 3 };
  char buf[32];

  font (cr, 10, 1);
  double last_line_x = -1e9;
  for (size_t i = 0; i < n; i++)
    {
      if (st[i] < c->v->t0_ns || st[i] > c->v->t1_ns)
        continue;
      double x = round (pp_timeline_x_of (c->v, &c->l, st[i])) + 0.5;
      snprintf (buf, sizeof buf, "step %d", num[i]);
      double w = text_w (cr, buf);
      int labelled = x + 3 > last_label_end + 6 && x + 3 + w <= c->l.x1 + RIGHT_MARGIN;
      /* Zoomed out, steps come closer than their labels: an unlabelled
       * step's line starts at the rows (in the ruler it would cross the
       * labels), and lines closer than 4 px are left out (they would grey
       * the rows). */
      if (!labelled && x - last_line_x < 4)
        continue;
      /* zoomed out, the summary bars are the steps: only labelled lines */
      if (!labelled && c->summary)
        continue;
      cairo_save (cr);
      cairo_set_dash (cr, dash, 2, 0);
      cairo_set_line_width (cr, 1);
      set_rgba (cr, c->th.fg, 0.55);
      cairo_move_to (cr, x, labelled ? c->l.ruler_y + 2 : c->l.rows_y);
      cairo_line_to (cr, x, rows_bottom);
      cairo_stroke (cr);
      cairo_restore (cr);
      last_line_x = x;
      if (labelled)
        {
          set_rgb (cr, c->th.fg);
          text_at (cr, buf, x + 3, c->l.ruler_y + 11, 0);
          last_label_end = x + 3 + w;
        }
    }
}

static void fill_hatched (Ctx *c, cairo_t *cr, double x, double y, double w, double h);

/* The legend: what each mark means, drawn as the rows draw it (the
 * bubble's hatch, the thin lane's marks thin, the plan see-through), kinds
 * this trace does not hold left out.  It keeps every entry at any width:
 * where one line is too short it wraps onto more (the layout leaves room,
 * legend_height_of), so a narrow image or a window beside its side panel
 * says as much as a wide one (up to a third of the height, legend_build). */
static void
draw_legend (Ctx *c, cairo_t *cr)
{
  Legend lg;
  double top = c->v->height - legend_height_of (c->l.legend_lines) + 9;

  legend_build (c->m, c->v, c->l.x0, &lg);
  font (cr, 11, 0);
  for (int i = 0; i < lg.n; i++)
    {
      const LegendItem *it = &lg.it[i];
      double x = it->x, y = top + it->y;
      Rgb f = kind_rgb (PP_SPAN_F, c->v->dark);
      switch (it->swatch)
        {
        case SW_HATCH:
          /* the bubble first: it is what the chart is for */
          fill_hatched (c, cr, x, y, 14, 12);
          cairo_rectangle (cr, x, y, 14, 12);
          set_rgb (cr, c->th.dim);
          cairo_set_line_width (cr, 1);
          cairo_stroke (cr);
          break;
        case SW_BLOCK:
          cairo_rectangle (cr, x, y, 14, 12);
          set_rgb (cr, kind_rgb (it->kind, c->v->dark));
          cairo_fill (cr);
          break;
        case SW_HOST:
          {
            double rgb[3];
            pp_timeline_host_color (it->kind, c->v->dark, rgb);
            pp_timeline_host_lane_swatch (cr, it->kind, rgb, c->v->dark, x, y + 4, 14, 8);
          }
          break;
        case SW_THIN:
          /* the thin lane's marks as thin as the lane draws them */
          cairo_rectangle (cr, x, y + 8, 14, 4);
          set_rgb (cr, kind_rgb (it->kind, c->v->dark));
          cairo_fill (cr);
          break;
        case SW_CHUNKS:
          for (int k = 0; k < 2; k++)
            {
              cairo_rectangle (cr, x + k * 8, y, 8, 12);
              set_rgb (cr, shade (f, k));
              cairo_fill (cr);
            }
          break;
        case SW_PLAN:
        case SW_PLAN_OVER:
          /* the plan's two shades, as its lane draws them: see-through
           * chunks 0 and 1 (F) of a chunked schedule, else F and B; past
           * its step, paler and dashed */
          cairo_save (cr);
          cairo_set_line_width (cr, 1);
          if (it->swatch == SW_PLAN_OVER)
            {
              static const double dash[] = { 3, 2 };
              cairo_set_dash (cr, dash, 2, 0);
            }
          for (int k = 0; k < 2; k++)
            {
              Rgb col = c->V > 1 ? shade (f, k) : kind_rgb (k ? PP_SPAN_B : PP_SPAN_F, c->v->dark);
              cairo_rectangle (cr, x + k * 8 + 0.5, y + 0.5, 7, 11);
              set_rgba (cr, col, it->swatch == SW_PLAN_OVER ? 0.18 : 0.4);
              cairo_fill_preserve (cr);
              set_rgb (cr, col);
              cairo_stroke (cr);
            }
          cairo_restore (cr);
          break;
        case SW_HEAT:
          {
            /* zoomed out: the thin lane is the step's length against the median */
            Rgb base = c->th.ruler_bg, heat = kind_rgb (PP_SPAN_WAIT, c->v->dark);
            for (int k = 0; k < 14; k++)
              {
                double t = k / 13.0;
                set_rgb (cr, (Rgb) { base.r + (heat.r - base.r) * t, base.g + (heat.g - base.g) * t,
                                     base.b + (heat.b - base.b) * t });
                cairo_rectangle (cr, x + k, y + 6, 1, 6);
                cairo_fill (cr);
              }
          }
          break;
        case SW_FOLD:
          /* drawn as the rows draw it (draw_fold_bands, draw_whiskers) */
          {
            Rgb k = kind_rgb (PP_SPAN_F, c->v->dark);
            set_rgba (cr, k, 0.35);
            cairo_rectangle (cr, x - 4, y + 1, 16, 14);
            cairo_fill (cr);
          }
          set_rgba (cr, c->th.fg, 0.8);
          cairo_rectangle (cr, x, y + 8, 10, 1.5);
          cairo_rectangle (cr, x + 10, y + 3, 1.5, 10);
          cairo_fill (cr);
          break;
        case SW_STEP:
          {
            const double dash[] = { 4, 3 };
            cairo_save (cr);
            cairo_set_dash (cr, dash, 2, 0);
            cairo_set_line_width (cr, 1);
            set_rgba (cr, c->th.fg, 0.55);
            cairo_move_to (cr, x + 7.5, y - 1);
            cairo_line_to (cr, x + 7.5, y + 13);
            cairo_stroke (cr);
            cairo_restore (cr);
          }
          break;
        }
      set_rgb (cr, c->th.fg);
      text_at (cr, it->label, x + legend_swatch_w (it->swatch), y + 10, 0);
    }
  if (c->v->drawn != NULL)
    {
      c->v->drawn->legend_items += lg.n;
      c->v->drawn->legend_lines += lg.lines;
    }
}

/* The label inside a block: "3", or "2F3" for a chunked schedule; a
 * data-parallel one by its action's name, "0UNSHARD" ("U" where narrow). */
static void
block_label (Ctx *c, const Box *b, char *buf, size_t n, int wide)
{
  if (pp_span_kind_is_dp_comm (b->kind))
    {
      static const char *const narrow[] = { "U", "R", "RG", "WRG" };
      const char *name = pp_span_kind_name ((PpSpanKind) b->kind);
      if (wide && b->stage >= 0)
        snprintf (buf, n, "%d%s", b->stage, name);
      else
        snprintf (buf, n, "%s", narrow[b->kind - PP_SPAN_UNSHARD]);
    }
  else if (b->mb < 0)
    snprintf (buf, n, "%s", b->kind == PP_SPAN_OPT ? "opt" : "");
  else if (b->kind == PP_SPAN_LOSS)
    snprintf (buf, n, wide ? "L%d" : "L", b->mb);   /* never read as the micro-batch's F */
  else if (b->kind == PP_SPAN_OVERLAP_F_B && b->sub_kind != 0)
    {
      /* both halves: "2F2+1B0", or "2+0" where narrow */
      if (wide && b->stage >= 0)
        snprintf (buf, n, "%dF%d+%d%s%d", b->stage, b->mb, b->sub_stage, kind_letter (b->sub_kind), b->sub_mb);
      else
        snprintf (buf, n, "%d+%d", b->mb, b->sub_mb);
    }
  else if (c->V > 1 && wide && b->stage >= 0)
    snprintf (buf, n, "%d%s%d", b->stage, kind_letter (b->kind), b->mb);
  else
    snprintf (buf, n, "%d", b->mb);
}

/* The longest of b's labels (block_label, wide then narrow, then an
 * overlapped pair's forward half) that fits b at font size fs, into buf:
 * 1, or 0 with the shortest in buf ("" for a block without one). */
static int
fit_label (Ctx *c, const Box *b, double fs, char *buf, size_t n)
{
  int wide = b->w >= fs * 2.4 + 4;
  block_label (c, b, buf, n, wide);
  if (!buf[0] || fs * LABEL_EM * strlen (buf) + 3 <= b->w)
    return buf[0] != 0;
  if (wide)
    block_label (c, b, buf, n, 0);
  if (fs * LABEL_EM * strlen (buf) + 3 > b->w && b->kind == PP_SPAN_OVERLAP_F_B && b->mb >= 0)
    snprintf (buf, n, "%d", b->mb);   /* an overlapped pair's forward half */
  return fs * LABEL_EM * strlen (buf) + 3 <= b->w;
}

/* Whether box i of the plan lane, past its step's end, lies over a block
 * of the next copy: its label would run into that one's. */
static int
plan_box_covered (const Ctx *c, const Box *b)
{
  for (size_t i = 0; i < c->n_boxes; i++)
    {
      const Box *o = &c->boxes[i];
      if (o->lane == LANE_BLOCK && o->x < b->x + b->w && b->x < o->x + o->w)
        return 1;
    }
  return 0;
}

/* Fills the boxes of one lane, batched by color; outlines wide ones.
 * plan: 0 measured, 1 the plan, 2 the plan past its step's end (paler,
 * dashed, labelled where no other block lies under it). */
static void
draw_boxes (Ctx *c, cairo_t *cr, int r, int lane, int plan)
{
  double y, h;
  int dark = c->v->dark;
  /* A color is (kind, chunk); at most 32 x 8 of them. */
  uint64_t used[4] = { 0, 0, 0, 0 };

  lane_y (&c->l, r, plan ? 3 : lane, &y, &h);
  y = round (y);
  h = round (y + h) - y;
  if (h < 1)
    h = 1;
  for (size_t i = 0; i < c->n_boxes; i++)
    if (c->boxes[i].lane == lane)
      {
        int key = (c->boxes[i].kind & 31) * 8 + (c->boxes[i].chunk & 7);
        used[key >> 6] |= 1ull << (key & 63);
      }
  for (int key = 0; key < 256; key++)
    {
      if (!(used[key >> 6] >> (key & 63) & 1))
        continue;
      int kind = key / 8, chunk = key % 8, any_wide = 0;
      Rgb col = shade (kind_rgb (kind, dark), chunk);
      for (size_t i = 0; i < c->n_boxes; i++)
        {
          const Box *b = &c->boxes[i];
          if (b->lane != lane || b->kind != kind || b->chunk != chunk)
            continue;
          double xa = round (b->x), xb = round (b->x + b->w);
          if (xb <= xa)
            xb = xa + 1;
          cairo_rectangle (cr, xa, y, xb - xa, h);
          any_wide |= b->w >= (plan ? 2 : 5);
        }
      if (plan)
        {
          /* see-through, but not so pale that a printed page loses it */
          set_rgba (cr, col, plan == 2 ? 0.18 : 0.4);
          cairo_fill (cr);
        }
      else
        {
          set_rgb (cr, col);
          cairo_fill (cr);
        }
      if (!any_wide || h < 4)
        continue;
      /* Outlines tell adjacent blocks of one kind apart. */
      for (size_t i = 0; i < c->n_boxes; i++)
        {
          const Box *b = &c->boxes[i];
          if (b->lane != lane || b->kind != kind || b->chunk != chunk || b->w < (plan ? 2 : 5))
            continue;
          double xa = round (b->x), xb = round (b->x + b->w);
          cairo_rectangle (cr, xa + 0.5, y + 0.5, xb - xa - 1, h - 1);
        }
      if (plan)
        set_rgb (cr, col);
      else
        set_rgb (cr, shade (col, 2));
      cairo_set_line_width (cr, 1);
      if (plan == 2)
        {
          static const double dash[] = { 3, 2 };
          cairo_set_dash (cr, dash, 2, 0);
        }
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }

  /* Micro-batch numbers where they fit. */
  if ((lane != LANE_BLOCK && lane != LANE_PLAN_OVER) || h < 9)
    return;
  /* The lane's size, and smaller (to LABEL_MIN_FS) in a block too narrow
   * for it: a tall lane (an A4 page of few ranks) would otherwise ask 12
   * px of text of blocks that hold 8 px well. */
  double fs = fmin (12, fmax (LABEL_MIN_FS, h * (plan ? 0.7 : 0.45))), cur = fs;
  font (cr, fs, !plan);
  char buf[48];
  for (size_t i = 0; i < c->n_boxes; i++)
    {
      const Box *b = &c->boxes[i];
      if (b->lane != lane || b->w < LABEL_MIN_FS * LABEL_EM + 3)
        continue;
      double f = fs;
      if (!fit_label (c, b, f, buf, sizeof buf))
        {
          if (!buf[0])
            continue;
          f = fmin (fs, (b->w - 3) / (LABEL_EM * strlen (buf)));
          if (f < LABEL_MIN_FS || !fit_label (c, b, f, buf, sizeof buf))
            continue;
        }
      if (f != cur)
        cairo_set_font_size (cr, cur = f);
      if (plan == 2 && plan_box_covered (c, b))
        continue;
      if (plan && c->v->drawn != NULL)
        c->v->drawn->plan_labels++;
      Rgb col = shade (kind_rgb (b->kind, dark), b->chunk);
      if (plan)
        set_rgb (cr, c->th.fg);
      else
        set_rgb (cr, luminance (col) < 0.5 ? (Rgb) { 1, 1, 1 } : (Rgb) { 0.08, 0.08, 0.08 });
      double xc = fmax (b->x, c->l.x0) + fmin (b->w, c->l.x1 - fmax (b->x, c->l.x0)) / 2;
      text_at (cr, buf, xc, y + h / 2 + f * 0.36, 0.5);
    }
}

/* The bubble's ground and hatch over a rectangle: on image surfaces (the
 * PNG, the widget's, the pixel tests) an 8 px tile repeated; on SVG and
 * PDF, whose viewers would scale that tile as a bitmap (blurred, seamed
 * where tiles meet), the same diagonals as paths clipped to the rectangle. */
static void
fill_hatched (Ctx *c, cairo_t *cr, double x, double y, double w, double h)
{
  if (!(w > 0) || !(h > 0))
    return;
  if (!c->vector)
    {
      cairo_rectangle (cr, x, y, w, h);
      cairo_set_source (cr, c->hatch);
      cairo_fill (cr);
      return;
    }
  cairo_save (cr);
  cairo_rectangle (cr, x, y, w, h);
  cairo_clip_preserve (cr);
  set_rgb (cr, c->th.bubble);
  cairo_fill (cr);
  set_rgba (cr, c->th.hatch, 0.8);
  cairo_set_line_width (cr, 1.2);
  /* the tile's lines are x + y = 8k in user space: the same here, so a
   * vector export lines up with the PNG of the same view */
  for (double k = floor ((x + y) / 8); k <= ceil ((x + w + y + h) / 8); k++)
    {
      cairo_move_to (cr, 8 * k - (y + h), y + h);
      cairo_line_to (cr, 8 * k - y, y);
    }
  cairo_stroke (cr);
  cairo_restore (cr);
}

static cairo_pattern_t *
hatch_pattern (const Theme *th)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 8, 8);
  cairo_t *cr = cairo_create (s);
  set_rgb (cr, th->bubble);
  cairo_paint (cr);
  /* strong enough to read as "lost" beside the palest block (I, yellow) */
  set_rgba (cr, th->hatch, 0.8);
  cairo_set_line_width (cr, 1.2);
  cairo_move_to (cr, -1, 9);
  cairo_line_to (cr, 9, -1);
  cairo_move_to (cr, -1, 1);
  cairo_line_to (cr, 1, -1);
  cairo_move_to (cr, 7, 9);
  cairo_line_to (cr, 9, 7);
  cairo_stroke (cr);
  cairo_destroy (cr);
  cairo_pattern_t *p = cairo_pattern_create_for_surface (s);
  cairo_surface_destroy (s);
  cairo_pattern_set_extend (p, CAIRO_EXTEND_REPEAT);
  return p;
}

/* First planned start and last planned end over all ranks. */
static void
plan_extent (const PpTimelineModel *m, int64_t *p0, int64_t *p1)
{
  *p0 = INT64_MAX;
  *p1 = INT64_MIN;
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      const PpTimelinePlanned *p = pp_timeline_model_planned (m, r);
      for (size_t k = 0; k < pp_timeline_model_n_planned (m, r); k++)
        if (plan_span_kind (p[k].kind) >= 0)
          {
            if (p[k].start_ns < *p0)
              *p0 = p[k].start_ns;
            if (p[k].end_ns > *p1)
              *p1 = p[k].end_ns;
          }
    }
}

int64_t
pp_timeline_plan_origin (const PpTimelineModel *m)
{
  int64_t p0, p1;
  plan_extent (m, &p0, &p1);
  return p0;
}

/* The plan is one step: it is drawn under every step, its start on the
 * step's first begin marker (where it already is for a simulated trace);
 * without step markers, where the model placed it.  The number of copies;
 * copy k is shifted by plan_shift (k). */
static size_t
plan_copies (const PpTimelineModel *m, int64_t plan0)
{
  size_t n = pp_timeline_model_n_steps (m);
  return plan0 == INT64_MAX ? 0 : n > 0 ? n : 1;
}

static int64_t
plan_shift (const PpTimelineModel *m, int64_t plan0, size_t k)
{
  if (pp_timeline_model_n_steps (m) == 0)
    return 0;
  return pp_timeline_model_step_starts (m)[k] - plan0;
}

/* Where copy k meets the next one: the next step's start; INT64_MAX for
 * the last.  A plan longer than the step it stands under runs on past it,
 * drawn whole (draw_plan_lane): never cut there. */
static int64_t
plan_limit (const PpTimelineModel *m, size_t k)
{
  size_t n = pp_timeline_model_n_steps (m);
  return k + 1 < n ? pp_timeline_model_step_starts (m)[k + 1] : INT64_MAX;
}

/* The copies [*k0, *k1) that can show in [t0, t1]: copy k covers
 * [step k's start, + the plan's length]; found by binary search, so a
 * frame costs the copies it shows, not every step of the run. */
static void
plan_copies_in (const PpTimelineModel *m, int64_t plan0, int64_t plan1, int64_t t0, int64_t t1,
                size_t *k0, size_t *k1)
{
  size_t n = plan_copies (m, plan0), lo, hi;
  *k0 = *k1 = 0;
  if (n == 0 || plan1 < plan0)
    return;
  if (pp_timeline_model_n_steps (m) == 0)
    {
      *k1 = plan1 >= t0 && plan0 <= t1 ? 1 : 0;
      return;
    }
  const int64_t *st = pp_timeline_model_step_starts (m);
  double len = (double) plan1 - (double) plan0;
  /* first copy whose end (st[k] + len) reaches t0 */
  for (lo = 0, hi = n; lo < hi;)
    {
      size_t mid = lo + (hi - lo) / 2;
      if ((double) st[mid] + len < (double) t0)
        lo = mid + 1;
      else
        hi = mid;
    }
  *k0 = lo;
  /* first copy that starts past t1 */
  for (hi = n; lo < hi;)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (st[mid] <= t1)
        lo = mid + 1;
      else
        hi = mid;
    }
  *k1 = lo;
}

/* Whether a copy of the plan that shows in v runs past its step's end
 * (the legend then says how that part is drawn). */
static int
plan_runs_over (const PpTimelineModel *m, const PpTimelineView *v)
{
  int64_t p0, p1;
  size_t k0, k1;
  plan_extent (m, &p0, &p1);
  plan_copies_in (m, p0, p1, v->t0_ns, v->t1_ns, &k0, &k1);
  for (size_t k = k0; k < k1; k++)
    if ((double) p1 + (double) plan_shift (m, p0, k) > (double) plan_limit (m, k))
      return 1;
  return 0;
}

size_t
pp_timeline_plan_copies (const PpTimelineModel *m)
{
  return plan_copies (m, pp_timeline_plan_origin (m));
}

void
pp_timeline_plan_copy (const PpTimelineModel *m, size_t k, int64_t *shift, int64_t *limit)
{
  int64_t p0 = pp_timeline_plan_origin (m);
  *shift = k < plan_copies (m, p0) ? plan_shift (m, p0, k) : 0;
  *limit = plan_limit (m, k);
}

int
pp_timeline_plan_span_kind (int action_kind)
{
  return plan_span_kind (action_kind);
}

/* ---- focus: find and filter, the selected micro-batch, its arrows ------------------- */

/* Find and filter dims what does not match (a veil over the rows, the
 * matches drawn again over it); the selected block's micro-batch, in its
 * step, is outlined on every rank. */
static void
draw_focus (Ctx *c, cairo_t *cr)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  int filt = v->filter != NULL && v->filter->active, have_sel = 0, mb = -1, step = 0;

  if (v->selected_rank >= 0 && v->selected_rank < c->n_ranks && v->selected_index >= 0
      && (size_t) v->selected_index < pp_timeline_model_n_spans (c->m, v->selected_rank))
    {
      const PpSpan *s = &pp_timeline_model_spans (c->m, v->selected_rank)[v->selected_index];
      if (pp_span_kind_is_block (s->kind) && s->microbatch >= 0)
        {
          have_sel = 1;
          mb = s->microbatch;
          step = s->step;
        }
    }
  if (!filt && !have_sel)
    return;
  if (filt)
    {
      set_rgba (cr, c->th.bg, 0.75);
      cairo_rectangle (cr, l->x0, l->rows_y, l->x1 - l->x0, c->n_ranks * l->row_h);
      cairo_fill (cr);
    }
  for (int r = 0; r < c->n_ranks; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (c->m, r);
      size_t n = pp_timeline_model_n_spans (c->m, r);
      double by, bh;
      lane_y (l, r, LANE_BLOCK, &by, &bh);
      cairo_new_path (cr);
      int outlined = 0;
      /* two passes: the matches drawn again, then the outlines (a fill
       * between would eat the outlines' path) */
      for (int pass = 0; pass < 2; pass++)
      for (size_t i = pp_timeline_model_first_overlapping (c->m, r, v->t0_ns); i < n && sp[i].start_ns < v->t1_ns; i++)
        {
          const PpSpan *s = &sp[i];
          if (s->end_ns < v->t0_ns || s->kind >= PP_N_SPAN_KINDS || lane_of (s->kind) != LANE_BLOCK)
            continue;
          int match = pass == 0 && filt && pp_timeline_filter_match (v->filter, r, s);
          int same = pass == 1 && have_sel && s->microbatch == mb && s->step == step
                     && pp_span_kind_is_block (s->kind);
          if (!match && !same)
            continue;
          double xa = fmax (pp_timeline_x_of (v, l, s->start_ns), l->x0 - 3);
          double xb = fmin (pp_timeline_x_of (v, l, s->end_ns), l->x1 + 3);
          if (xb - xa < 1)
            xb = xa + 1;
          if (match)
            {
              cairo_save (cr);
              cairo_new_path (cr);
              set_rgb (cr, shade (kind_rgb (s->kind, v->dark),
                                  c->P > 0 && s->stage >= 0 ? (s->stage / c->P) & 7 : 0));
              Rgb col = shade (kind_rgb (s->kind, v->dark),
                               c->P > 0 && s->stage >= 0 ? (s->stage / c->P) & 7 : 0);
              cairo_rectangle (cr, round (xa), round (by), fmax (1, round (xb) - round (xa)), round (bh));
              cairo_fill (cr);
              if (xb - xa >= 8)
                {
                  cairo_rectangle (cr, round (xa) + 0.5, round (by) + 0.5, round (xb) - round (xa) - 1, round (bh) - 1);
                  set_rgb (cr, shade (col, 2));
                  cairo_set_line_width (cr, 1);
                  cairo_stroke (cr);
                }
              /* its number again, over the veil */
              char lab[16];
              double fs = fmin (12, fmax (7, bh * 0.45));
              snprintf (lab, sizeof lab, "%d", s->microbatch);
              font (cr, fs, 1);
              if (s->microbatch >= 0 && bh >= 9 && text_w (cr, lab) + 3 < xb - xa)
                {
                  set_rgb (cr, luminance (col) < 0.5 ? (Rgb) { 1, 1, 1 } : (Rgb) { 0.08, 0.08, 0.08 });
                  text_at (cr, lab, (fmax (xa, l->x0) + fmin (xb, l->x1)) / 2, by + bh / 2 + fs * 0.36, 0.5);
                }
              cairo_restore (cr);
            }
          if (same)
            {
              cairo_rectangle (cr, xa - 1, by - 1, xb - xa + 2, bh + 2);
              outlined = 1;
            }
        }
      if (outlined)
        {
          set_rgb (cr, v->dark ? (Rgb) { 1, 1, 1 } : (Rgb) { 0, 0, 0 });
          cairo_set_line_width (cr, 2);
          cairo_stroke (cr);
        }
      cairo_new_path (cr);
    }
}

/* The selected micro-batch's dependencies: a curve from the end of what
 * was waited for to the start of the block that waited, an arrowhead at
 * the block; dark under light (or the reverse) so it reads on any color. */
static void
draw_arrows (Ctx *c, cairo_t *cr)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  if (v->arrows == NULL || v->n_arrows == 0)
    return;
  cairo_save (cr);
  cairo_set_line_cap (cr, CAIRO_LINE_CAP_ROUND);
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < v->n_arrows; i++)
      {
        const PpTimelineArrow *a = &v->arrows[i];
        if (a->from_rank < 0 || a->from_rank >= c->n_ranks || a->to_rank < 0 || a->to_rank >= c->n_ranks)
          continue;
        if ((a->from_ns < v->t0_ns && a->to_ns < v->t0_ns) || (a->from_ns > v->t1_ns && a->to_ns > v->t1_ns))
          continue;
        double x0 = pp_timeline_x_of (v, l, a->from_ns), x1 = pp_timeline_x_of (v, l, a->to_ns);
        x0 = fmax (l->x0 - 50, fmin (l->x1 + 50, x0));
        x1 = fmax (l->x0 - 50, fmin (l->x1 + 50, x1));
        /* between ranks from mid-block to mid-block; on one rank along the
         * blocks' top edge, clear of their numbers */
        double yf = a->from_rank == a->to_rank ? fmin (4, l->block_h * 0.15) : l->block_h * 0.5;
        double y0 = l->rows_y + a->from_rank * l->row_h + yf;
        double y1 = l->rows_y + a->to_rank * l->row_h + yf;
        double dx = fmax (12, fabs (x1 - x0) * 0.4);
        if (pass == 0)
          {
            set_rgb (cr, v->dark ? (Rgb) { 0, 0, 0 } : (Rgb) { 1, 1, 1 });
            cairo_set_line_width (cr, 4);
          }
        else
          {
            set_rgb (cr, v->dark ? (Rgb) { 1, 1, 1 } : (Rgb) { 0.05, 0.05, 0.05 });
            cairo_set_line_width (cr, 1.6);
          }
        cairo_move_to (cr, x0, y0);
        cairo_curve_to (cr, x0 + dx, y0, x1 - dx, y1, x1, y1);
        cairo_stroke (cr);
        /* the head, pointing along the curve's end (rightwards) */
        cairo_move_to (cr, x1, y1);
        cairo_line_to (cr, x1 - 8, y1 - 4.5);
        cairo_line_to (cr, x1 - 8, y1 + 4.5);
        cairo_close_path (cr);
        if (pass == 0)
          cairo_stroke (cr);
        else
          cairo_fill (cr);
      }
  cairo_restore (cr);
}

/* A rank whose stream ended abnormally: from where it was lost on, its row
 * is veiled and crossed, and says so; what came before stays as it was. */
static void
draw_lost (Ctx *c, cairo_t *cr, int r)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  int64_t t = pp_timeline_model_rank_lost (c->m, r);
  if (t == INT64_MAX || t > v->t1_ns)
    return;
  double xa = fmax (l->x0, pp_timeline_x_of (v, l, t));
  double top = l->rows_y + r * l->row_h;
  double h = l->block_h + l->thin_h + l->plan_h;
  cairo_save (cr);
  set_rgba (cr, c->th.fg, v->dark ? 0.22 : 0.14);
  cairo_rectangle (cr, xa, top, l->x1 - xa, h);
  cairo_fill (cr);
  /* crossed: sparse diagonals, the other way from the bubble's hatch */
  cairo_rectangle (cr, xa, top, l->x1 - xa, h);
  cairo_clip (cr);
  set_rgba (cr, c->th.fg, 0.35);
  cairo_set_line_width (cr, 1);
  for (double x = xa - h; x < l->x1; x += 10)
    {
      cairo_move_to (cr, x, top);
      cairo_line_to (cr, x + h, top + h);
    }
  cairo_stroke (cr);
  cairo_reset_clip (cr);
  cairo_restore (cr);
  set_rgb (cr, kind_rgb (PP_SPAN_WAIT, v->dark));
  cairo_set_line_width (cr, 2);
  cairo_move_to (cr, round (xa) + 1, top);
  cairo_line_to (cr, round (xa) + 1, top + h);
  cairo_stroke (cr);
  if (l->block_h >= 12 && l->x1 - xa > 60)
    {
      font (cr, fmin (12, l->block_h * 0.4), 1);
      set_rgb (cr, c->th.fg);
      text_at (cr, "stream lost", xa + 6, top + fmin (l->block_h * 0.5 + 4, 16), 0);
    }
}

/* The measured range: shaded over ruler and rows, its length on the ruler. */
static void
draw_range (Ctx *c, cairo_t *cr, double rows_bottom)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  if (!v->has_range || v->range_t1_ns <= v->range_t0_ns
      || v->range_t1_ns < v->t0_ns || v->range_t0_ns > v->t1_ns)
    return;
  double xa = fmax (l->x0, pp_timeline_x_of (v, l, v->range_t0_ns));
  double xb = fmin (l->x1, pp_timeline_x_of (v, l, v->range_t1_ns));
  if (xb - xa < 1)
    xb = xa + 1;
  Rgb tint = kind_rgb (PP_SPAN_F, v->dark);
  set_rgba (cr, tint, 0.13);
  cairo_rectangle (cr, xa, l->ruler_y, xb - xa, rows_bottom - l->ruler_y);
  cairo_fill (cr);
  set_rgba (cr, tint, 0.9);
  cairo_set_line_width (cr, 1);
  cairo_move_to (cr, round (xa) + 0.5, l->ruler_y);
  cairo_line_to (cr, round (xa) + 0.5, rows_bottom);
  cairo_move_to (cr, round (xb) - 0.5, l->ruler_y);
  cairo_line_to (cr, round (xb) - 0.5, rows_bottom);
  cairo_stroke (cr);
  char buf[64];
  double len = (double) v->range_t1_ns - (double) v->range_t0_ns;
  format_time (buf, sizeof buf, len, nice_step (len / 1000));
  font (cr, 11, 1);
  double w = text_w (cr, buf) + 10;
  double xc = fmin (fmax ((xa + xb) / 2, l->x0 + w / 2), l->x1 - w / 2);
  set_rgb (cr, tint);
  cairo_rectangle (cr, xc - w / 2, l->ruler_y + 2, w, 15);
  cairo_fill (cr);
  set_rgb (cr, (Rgb) { 1, 1, 1 });
  text_at (cr, buf, xc, l->ruler_y + 13.5, 0.5);
}

/* ---- zoomed out: a bar a rank and step ------------------------------------------ */

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* Whether blocks would be narrower than SUMMARY_PX on average: the mean
 * step's width over the blocks a rank runs in a step (from the
 * description, else from the spans). */
int
pp_timeline_view_summarized (const PpTimelineModel *m, const PpTimelineView *v)
{
  double x0, x1;
  size_t n_steps = pp_timeline_model_n_steps (m);
  int n_ranks = pp_timeline_model_n_ranks (m);
  if (v->no_summaries || n_steps < 3 || n_ranks < 1 || v->t1_ns <= v->t0_ns)
    return 0;
  if (v->summaries)
    return 1;
  const int64_t *st = pp_timeline_model_step_starts (m);
  double mean_step = ((double) st[n_steps - 1] - (double) st[0]) / (double) (n_steps - 1);
  const PpTraceDescription *d = pp_timeline_model_description (m);
  double blocks;
  if (d != NULL && d->n_microbatches > 0)
    {
      uint32_t seen = pp_timeline_model_kinds_seen (m);
      int split = (seen >> PP_SPAN_I & 1) || (seen >> PP_SPAN_W & 1);
      blocks = (double) d->n_microbatches * (d->n_virtual > 1 ? d->n_virtual : 1) * (split ? 3 : 2);
    }
  else
    blocks = (double) pp_timeline_model_n_spans_total (m) / n_ranks / (double) n_steps;
  if (!(blocks >= 1) || !(mean_step > 0))
    return 0;
  layout_x (m, v, &x0, &x1);
  double px_per_ns = (x1 - x0) / ((double) v->t1_ns - (double) v->t0_ns);
  return mean_step * px_per_ns / blocks < SUMMARY_PX;
}

/* The median step length, for the heat of the thin lane. */
static double
median_step_ns (const PpTimelineModel *m)
{
  size_t n = pp_timeline_model_n_steps (m);
  const int64_t *st = pp_timeline_model_step_starts (m);
  if (n < 2)
    return 0;
  double *len = malloc ((n - 1) * sizeof *len);
  if (len == NULL)
    return 0;
  for (size_t i = 0; i + 1 < n; i++)
    len[i] = (double) st[i + 1] - (double) st[i];
  qsort (len, n - 1, sizeof *len, cmp_double);
  double med = len[(n - 1) / 2];
  free (len);
  return med;
}

/* Rank r zoomed out: for every step (or run of steps narrower than 3 px
 * together) a bar in the block lane, its work stacked by kind from the
 * bottom and the rest (idle) left hatched on top, so the bubble's share
 * reads as height; under it, in the thin lane, the step's length against
 * the median step from neutral to vermillion (twice the median and more),
 * so a slow step stands out.  Returns the idle share of [w0, w1). */
static double
draw_rank_summary (Ctx *c, cairo_t *cr, int r, int64_t w0, int64_t w1)
{
  static const int order[] = { PP_SPAN_F, PP_SPAN_B, PP_SPAN_I, PP_SPAN_W, PP_SPAN_OVERLAP_F_B, PP_SPAN_OPT,
                               PP_SPAN_LOSS, PP_SPAN_UNSHARD, PP_SPAN_RESHARD, PP_SPAN_REDUCE_GRAD,
                               PP_SPAN_WAIT_REDUCE_GRAD };
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  size_t n = pp_timeline_model_n_steps (c->m);
  const int64_t *st = pp_timeline_model_step_starts (c->m);
  double by, bh, ty, tht, busy = 0;
  Rgb heat = kind_rgb (PP_SPAN_WAIT, v->dark);

  lane_y (l, r, LANE_BLOCK, &by, &bh);
  lane_y (l, r, LANE_THIN, &ty, &tht);
  by = round (by);
  bh = round (by + bh) - by;
  /* from the last step that starts by the view's start: a million steps
   * off screen cost a binary search, not a walk */
  size_t k0 = 0;
  {
    size_t lo = 0, hi = n;
    while (lo < hi)
      {
        size_t mid = lo + (hi - lo) / 2;
        if (st[mid] <= v->t0_ns)
          lo = mid + 1;
        else
          hi = mid;
      }
    k0 = lo > 0 ? lo - 1 : 0;
  }
  for (size_t k = k0; k < n;)
    {
      int64_t a = st[k];
      if (a > v->t1_ns)
        break;
      size_t j = k + 1;
      /* a cell of at least 3 px: several steps when they are narrower */
      while (j < n && pp_timeline_x_of (v, l, st[j]) - pp_timeline_x_of (v, l, a) < 3)
        j++;
      int64_t b = j < n ? st[j] : c->run1;
      size_t steps_in = j - k;
      k = j;
      if (b <= a || b < v->t0_ns || a > v->t1_ns)
        continue;
      PpTimelineStepSummary sum;
      pp_timeline_summarize (c->m, r, a, b, &sum);
      int64_t ca = a > w0 ? a : w0, cb = b < w1 ? b : w1;
      if (cb > ca)
        busy += sum.busy_total_ns * (double) (cb - ca) / sum.len_ns;
      double xa = round (pp_timeline_x_of (v, l, a)), xb = round (pp_timeline_x_of (v, l, b));
      if (xb - xa < 1)
        xb = xa + 1;
      double y = by + bh;
      for (size_t q = 0; q < sizeof order / sizeof order[0]; q++)
        {
          double h = bh * sum.busy_ns[order[q]] / sum.len_ns;
          if (h <= 0)
            continue;
          set_rgb (cr, kind_rgb (order[q], v->dark));
          cairo_rectangle (cr, xa, y - h, xb - xa, h);
          cairo_fill (cr);
          y -= h;
        }
      /* the step's length against the median */
      if (c->median_step_ns > 0 && tht >= 1)
        {
          double ratio = (double) (b - a) / steps_in / c->median_step_ns;
          double t = fmin (1, fmax (0, ratio - 1));
          Rgb base = c->th.ruler_bg;
          Rgb col = { base.r + (heat.r - base.r) * t, base.g + (heat.g - base.g) * t,
                      base.b + (heat.b - base.b) * t };
          set_rgb (cr, col);
          cairo_rectangle (cr, xa, round (ty), xb - xa, fmax (1, round (tht)));
          cairo_fill (cr);
        }
      /* cells apart: a hairline of the background between them */
      if (xb - xa >= 5)
        {
          set_rgba (cr, c->th.bg, 0.8);
          cairo_rectangle (cr, xb - 1, by, 1, bh);
          cairo_fill (cr);
        }
    }
  return w1 > w0 ? fmax (0, 1.0 - busy / (double) (w1 - w0)) : -1;
}

/* Whether some row folds replicas (the legend then says what its mark is). */
static int
folded_rows (const PpTimelineModel *m)
{
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    if (pp_timeline_model_row_folded (m, r) > 1)
      return 1;
  return 0;
}

/* A folded row's blocks are the replicas' median; a thin line from a
 * block's end to the latest replica's end, with a tick there, shows a
 * straggler at a glance.  Marks under a pixel are left out. */
static void
draw_whiskers (Ctx *c, cairo_t *cr, int r)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  const PpSpan *sp = pp_timeline_model_spans (c->m, r);
  size_t n = pp_timeline_model_n_spans (c->m, r);

  if (pp_timeline_model_row_folded (c->m, r) < 2)
    return;
  /* blocks, and the sends, receives and waits of the thin lane: a late
   * hand-off is a straggler too */
  for (int lane = LANE_BLOCK; lane <= LANE_THIN; lane++)
    {
      double by, bh;
      lane_y (l, r, lane, &by, &bh);
      if (bh < 2)
        continue;
      cairo_save (cr);
      cairo_rectangle (cr, l->x0, by - 2, l->x1 - l->x0, bh + 4);
      cairo_clip (cr);
      set_rgba (cr, c->th.fg, 0.8);
      for (size_t i = pp_timeline_model_first_overlapping (c->m, r, v->t0_ns);
           i < n && sp[i].start_ns < v->t1_ns; i++)
        {
          const PpTimelineFold *f = pp_timeline_model_fold (c->m, r, (long) i);
          if (f == NULL || f->latest_end_ns <= sp[i].end_ns || f->latest_end_ns < v->t0_ns
              || sp[i].kind >= PP_N_SPAN_KINDS || lane_of (sp[i].kind) != lane)
            continue;
          double xa = pp_timeline_x_of (v, l, sp[i].end_ns), xb = pp_timeline_x_of (v, l, f->latest_end_ns);
          if (xb - xa < 1)
            continue;
          double y = round (by + bh * 0.75);
          cairo_rectangle (cr, xa, y, xb - xa, lane == LANE_BLOCK ? 1.5 : 1);
          cairo_rectangle (cr, round (xb) - 1, by + bh * 0.45, lane == LANE_BLOCK ? 1.5 : 1, bh * 0.55);
        }
      cairo_fill (cr);
      cairo_restore (cr);
    }
}

/* A folded row's bands: under each block of the block lane, from the
 * earliest start to the latest end of its replicas' copies, in the
 * block's colour, faint, outlined; the median copy is drawn over it.  So
 * replicas out of step show where each ran, not a block where none did. */
static void
draw_fold_bands (Ctx *c, cairo_t *cr, int r)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  const PpSpan *sp = pp_timeline_model_spans (c->m, r);
  size_t n = pp_timeline_model_n_spans (c->m, r);
  int64_t width = v->t1_ns - v->t0_ns;
  double by, bh;

  if (pp_timeline_model_row_folded (c->m, r) < 2)
    return;
  lane_y (l, r, LANE_BLOCK, &by, &bh);
  by = round (by);
  bh = round (bh);
  if (bh < 2)
    return;
  cairo_save (cr);
  cairo_rectangle (cr, l->x0, by, l->x1 - l->x0, bh);
  cairo_clip (cr);
  cairo_set_line_width (cr, 1);
  /* a band reaches before its block's start: look a view's width back */
  int64_t from = v->t0_ns > INT64_MIN + width ? v->t0_ns - width : v->t0_ns;
  for (size_t i = pp_timeline_model_first_overlapping (c->m, r, from); i < n && sp[i].start_ns < v->t1_ns + width; i++)
    {
      const PpTimelineFold *f = pp_timeline_model_fold (c->m, r, (long) i);
      if (f == NULL || f->n < 2 || sp[i].kind >= PP_N_SPAN_KINDS || lane_of (sp[i].kind) != LANE_BLOCK
          || (f->earliest_start_ns >= sp[i].start_ns && f->latest_end_ns <= sp[i].end_ns)
          || f->latest_end_ns < v->t0_ns || f->earliest_start_ns > v->t1_ns)
        continue;
      double xa = floor (pp_timeline_x_of (v, l, f->earliest_start_ns));
      double xb = ceil (pp_timeline_x_of (v, l, f->latest_end_ns));
      xa = fmax (xa, l->x0 - 2);
      xb = fmin (xb, l->x1 + 2);
      if (xb - xa < 1)
        continue;
      Rgb k = kind_rgb (sp[i].kind, v->dark);
      set_rgba (cr, k, 0.35);
      cairo_rectangle (cr, xa, by, xb - xa, bh);
      cairo_fill (cr);
      set_rgba (cr, k, 0.9);
      cairo_rectangle (cr, xa + 0.5, by + 0.5, xb - xa - 1, bh - 1);
      cairo_stroke (cr);
    }
  cairo_restore (cr);
}

/* The plan lane of rank r: the plan's copy under every step, in the block
 * lane's colors, see-through.  A copy is never cut: where the plan is
 * longer than the measured step it stands under, its blocks past the next
 * step's start are drawn whole over the next copy, paler and dashed
 * (draw_boxes, LANE_PLAN_OVER), so that no planned block goes missing. */
static void
draw_plan_lane (Ctx *c, cairo_t *cr, int r)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  const PpTimelinePlanned *p = pp_timeline_model_planned (c->m, r);
  size_t np = pp_timeline_model_n_planned (c->m, r);
  double px_per_ns = (l->x1 - l->x0) / fmax (1, ns_between (v->t0_ns, v->t1_ns));
  size_t k0, k1;

  c->n_boxes = 0;
  plan_copies_in (c->m, c->plan0, c->plan1, v->t0_ns, v->t1_ns, &k0, &k1);
  for (size_t copy = k0; copy < k1; copy++)
    {
      int64_t sh = plan_shift (c->m, c->plan0, copy), limit = plan_limit (c->m, copy);
      for (size_t k = 0; k < np; k++)
        {
          int kind = plan_span_kind (p[k].kind);
          int64_t ps = p[k].start_ns + sh, pe = p[k].end_ns + sh;
          if (kind < 0 || pe < v->t0_ns || ps > v->t1_ns)
            continue;
          double x = ns_between (v->t0_ns, ps) * px_per_ns;
          double w = (double) (pe - ps) * px_per_ns;
          double xa = fmax (x, -4), xb = fmin (x + w, l->x1 - l->x0 + 4);
          int over = pe > limit;
          Box b = { (float) (l->x0 + xa), (float) fmax (1, xb - xa), (uint16_t) kind,
                    (uint8_t) (c->P > 0 && p[k].stage >= 0 ? (p[k].stage / c->P) & 7 : 0),
                    over ? LANE_PLAN_OVER : LANE_BLOCK, p[k].microbatch, p[k].stage, 0, 0, 0 };
          if (kind == PP_SPAN_OVERLAP_F_B && (p[k].sub_kind == PP_TRACE_ACT_B || p[k].sub_kind == PP_TRACE_ACT_I))
            {
              b.sub_kind = p[k].sub_kind == PP_TRACE_ACT_B ? PP_SPAN_B : PP_SPAN_I;
              b.sub_stage = p[k].sub_stage;
              b.sub_mb = p[k].sub_microbatch;
            }
          if (push_box (c, &b) != 0)
            break;
          if (v->drawn != NULL)
            {
              v->drawn->plan_blocks++;
              v->drawn->plan_past_step += over;
            }
        }
    }
  draw_boxes (c, cr, r, LANE_BLOCK, 1);
  draw_boxes (c, cr, r, LANE_PLAN_OVER, 2);
}

/* Draws rank r; returns its idle share of the visible part of the run (-1
 * if none of the run is visible). */
static double
draw_rank (Ctx *c, cairo_t *cr, int r)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  const PpSpan *sp = pp_timeline_model_spans (c->m, r);
  size_t n = pp_timeline_model_n_spans (c->m, r);
  double span_ns = ns_between (v->t0_ns, v->t1_ns);
  double px_per_ns = (l->x1 - l->x0) / (span_ns > 0 ? span_ns : 1);
  int64_t w0 = c->run0 > v->t0_ns ? c->run0 : v->t0_ns;
  int64_t w1 = c->run1 < v->t1_ns ? c->run1 : v->t1_ns;
  double by, bh;
  double last_block_px = 0;
  int64_t last_block_end = INT64_MIN;
  /* Busy time (union of compute) inside [w0, w1), for the row's label. */
  int64_t cs = 0, ce = INT64_MIN;
  double busy = 0;

  c->n_boxes = 0;
  lane_y (l, r, LANE_BLOCK, &by, &bh);

  /* The bubble: the whole run's lane, compute drawn over it. */
  if (w1 > w0)
    {
      double xa = round (pp_timeline_x_of (v, l, w0)), xb = round (pp_timeline_x_of (v, l, w1));
      fill_hatched (c, cr, xa, round (by), fmax (1, xb - xa), round (by + bh) - round (by));
    }
  if (c->summary)
    return draw_rank_summary (c, cr, r, w0, w1);
  draw_fold_bands (c, cr, r);

  for (size_t i = pp_timeline_model_first_overlapping (c->m, r, v->t0_ns);
       i < n && sp[i].start_ns < v->t1_ns; i++)
    {
      const PpSpan *s = &sp[i];
      int lane;
      double x, w;

      if (s->end_ns < v->t0_ns)
        continue;
      lane = s->kind < PP_N_SPAN_KINDS ? lane_of (s->kind) : LANE_NONE;
      if (lane == LANE_NONE)
        continue;
      x = ns_between (v->t0_ns, s->start_ns) * px_per_ns;   /* plot-relative */
      w = (double) (s->end_ns - s->start_ns) * px_per_ns;
      if (lane == LANE_BLOCK)
        {
          int64_t a = s->start_ns > w0 ? s->start_ns : w0, b = s->end_ns < w1 ? s->end_ns : w1;
          if (b > a)
            {
              if (a > ce)
                {
                  if (ce > cs)
                    busy += (double) (ce - cs);
                  cs = a;
                  ce = b;
                }
              else if (b > ce)
                ce = b;
            }
          last_block_px = w;
          last_block_end = s->end_ns;
        }
      else if (lane == LANE_KERNEL)
        {
          /* Kernels only under a block zoomed in far enough. */
          if (last_block_px < KERNEL_BLOCK_PX || s->start_ns > last_block_end + (int64_t) (span_ns / 4))
            continue;
          if (w < 1)
            w = 1;
        }
      if (w < SPAN_MIN_PX && lane != LANE_KERNEL)
        {
          cover (c, lane == LANE_BLOCK ? 0 : 1, slot_of (s->kind), x, x + w);
          continue;
        }
      {
        /* Clip far-off edges so coordinates stay small. */
        double xa = x > -4 ? x : -4, xb = x + w < l->x1 - l->x0 + 4 ? x + w : l->x1 - l->x0 + 4;
        Box b = { (float) (l->x0 + xa), (float) (xb - xa), s->kind,
                  (uint8_t) (c->P > 0 && s->stage >= 0 ? (s->stage / c->P) & 7 : 0),
                  (uint8_t) lane, s->microbatch, s->stage, 0, 0, 0 };
        if (pp_span_has_sub (s))
          {
            b.sub_kind = s->sub_kind;
            b.sub_stage = s->sub_stage;
            b.sub_mb = s->sub_microbatch;
          }
        if (push_box (c, &b) != 0)
          break;
      }
    }
  if (ce > cs)
    busy += (double) (ce - cs);

  /* Aggregated columns first, whole blocks over them. */
  {
    double ty, tht;
    lane_y (l, r, LANE_THIN, &ty, &tht);
    flush_columns (c, cr, 0, by, bh);
    flush_columns (c, cr, 1, ty, tht);
  }
  draw_boxes (c, cr, r, LANE_BLOCK, 0);
  draw_boxes (c, cr, r, LANE_THIN, 0);
  draw_boxes (c, cr, r, LANE_KERNEL, 0);
  draw_whiskers (c, cr, r);
  if (l->host_h > 0)
    {
      PpHostLaneScale sc = { v->t0_ns, v->t1_ns, l->x0, l->x1, v->dark, { { 0 } } };
      for (int p = 0; p < PP_HOST_N_PARTS; p++)
        pp_timeline_host_color (p, v->dark, sc.rgb[p]);
      pp_timeline_host_lane_draw (cr, c->m, r, &sc, lane_y_host (l, r), l->host_h);
    }

  if (v->show_plan && l->plan_h >= 2)
    draw_plan_lane (c, cr, r);
  return w1 > w0 ? 1.0 - busy / (double) (w1 - w0) : -1;
}

/* The rank labels' font size for rows of this height. */
static double
label_font_size (const PpTimelineLayout *l)
{
  return fmin (13, fmax (7, l->row_h * 0.32));
}

/* *last_y: the baseline of the label drawn last (-1e9 before the first).
 * Rows shorter than a line of text (2,048 processes unfolded in 4,000 px)
 * would stack their labels into one black smear: a label that would
 * overlap the one above it is left out, so every label drawn is legible
 * and the rows between two labels are those of the label above. */
static void
draw_rank_label (Ctx *c, cairo_t *cr, int r, double bubble, double *last_y)
{
  const PpTimelineLayout *l = &c->l;
  double by, bh;
  char buf[48];
  double fs = label_font_size (l);

  lane_y (l, r, LANE_BLOCK, &by, &bh);
  if (by + bh / 2 + fs * 0.36 - *last_y < fs + 2)
    return;
  *last_y = l->row_h >= 30 ? by + bh / 2 + fs : by + bh / 2 + fs * 0.36;
  pp_timeline_model_rank_label (c->m, r, buf, sizeof buf);
  set_rgb (cr, c->th.fg);
  font (cr, fs, 1);
  /* a process's label ("CPU rank 0 dp 0 tp 0") can be wider than the
   * column: a smaller font, not a name cut at the image's left edge */
  double tw = text_w (cr, buf), room = l->x0 - 12;
  if (tw > room && room > 0)
    {
      fs = fmax (5, fs * room / tw);
      font (cr, fs, 1);
    }
  if (l->row_h >= 30 && pp_timeline_model_rank_lost (c->m, r) != INT64_MAX)
    {
      text_at (cr, buf, l->x0 - 8, by + bh / 2 - 1, 1);
      font (cr, fmin (11, fs - 1), 1);
      set_rgb (cr, c->v->dark ? kind_rgb (PP_SPAN_WAIT, 1) : (Rgb) HEX (0xB04A00));
      text_at (cr, "lost", l->x0 - 8, by + bh / 2 + fs, 1);
    }
  else if (l->row_h >= 30 && bubble >= 0)
    {
      text_at (cr, buf, l->x0 - 8, by + bh / 2 - 1, 1);
      /* idle over what is shown (zooming changes it; gaps between steps
       * count), named so: the measured bubble a step is another figure */
      snprintf (buf, sizeof buf, "idle %.0f%% in view", 100 * bubble);
      double ifs = fmin (11, fs - 1), iw;
      font (cr, ifs, 0);
      if ((iw = text_w (cr, buf)) > l->x0 - 12 && l->x0 > 12)
        font (cr, fmax (5, ifs * (l->x0 - 12) / iw), 0);
      set_rgb (cr, c->v->dark ? kind_rgb (PP_SPAN_WAIT, 1) : (Rgb) HEX (0xB04A00));
      text_at (cr, buf, l->x0 - 8, by + bh / 2 + fs, 1);
    }
  else
    text_at (cr, buf, l->x0 - 8, by + bh / 2 + fs * 0.36, 1);
  if (c->v->show_plan && l->plan_h >= 9)
    {
      double py, ph;
      lane_y (l, r, 3, &py, &ph);
      font (cr, fmin (10, ph * 0.8), 0);
      set_rgb (cr, c->th.dim);
      text_at (cr, "plan", l->x0 - 8, py + ph / 2 + 3.5, 1);
      /* zoomed out the lane holds no plan (the bars are per step): say so,
       * an empty lane would read as "no plan" */
      if (c->summary)
        {
          text_at (cr, "the plan shows when a few steps are in view", l->x0 + 6, py + ph / 2 + 3.5, 0);
          if (c->v->drawn != NULL)
            c->v->drawn->plan_notes++;
        }
    }
}

/* The rectangle of span index of rank r as drawn; 0 if not drawn. */
static int
span_rect (const Ctx *c, int r, long index, double *x, double *y, double *w, double *h)
{
  if (r < 0 || r >= c->n_ranks || index < 0 || (size_t) index >= pp_timeline_model_n_spans (c->m, r))
    return 0;
  const PpSpan *s = &pp_timeline_model_spans (c->m, r)[index];
  int lane = s->kind < PP_N_SPAN_KINDS ? lane_of (s->kind) : LANE_NONE;
  if (lane == LANE_NONE || s->end_ns < c->v->t0_ns || s->start_ns > c->v->t1_ns)
    return 0;
  double xa = fmax (pp_timeline_x_of (c->v, &c->l, s->start_ns), c->l.x0 - 3);
  double xb = fmin (pp_timeline_x_of (c->v, &c->l, s->end_ns), c->l.x1 + 3);
  lane_y (&c->l, r, lane, y, h);
  *x = xa;
  *w = fmax (2, xb - xa);
  return 1;
}

void
pp_timeline_render_critical_path (cairo_t *cr, const PpTimelineModel *m, const PpTimelineView *v)
{
  PpTimelineLayout l;
  int n_ranks;
  double px = 0, py = 0;
  int have_prev = 0;

  if (cr == NULL || m == NULL || v == NULL || v->critical_path == NULL || v->n_critical_path == 0
      || v->t1_ns <= v->t0_ns)
    return;
  pp_timeline_layout (m, v, &l);
  n_ranks = pp_timeline_model_n_ranks (m);
  cairo_save (cr);
  cairo_rectangle (cr, l.x0, l.rows_y - 2, l.x1 - l.x0, n_ranks * l.row_h + 4);
  cairo_clip (cr);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
  /* the foreground color, wide, under a thin orange line (Okabe-Ito): it
   * reads on every block color and on the bubble */
  for (int pass = 0; pass < 2; pass++)
    {
      have_prev = 0;
      if (pass == 0)
        {
          if (v->dark)
            cairo_set_source_rgb (cr, 1, 1, 1);
          else
            cairo_set_source_rgb (cr, 0, 0, 0);
          cairo_set_line_width (cr, 3.5);
        }
      else
        {
          cairo_set_source_rgb (cr, 0.90, 0.62, 0.0);
          cairo_set_line_width (cr, 1.5);
        }
      for (size_t i = 0; i < v->n_critical_path; i++)
        {
          const PpTimelinePathBlock *b = &v->critical_path[i];
          if (b->rank < 0 || b->rank >= n_ranks || b->end_ns < v->t0_ns - (v->t1_ns - v->t0_ns)
              || b->start_ns > v->t1_ns + (v->t1_ns - v->t0_ns))
            {
              have_prev = 0;
              continue;
            }
          double x0 = pp_timeline_x_of (v, &l, b->start_ns), x1 = pp_timeline_x_of (v, &l, b->end_ns);
          double y = l.rows_y + b->rank * l.row_h, h = l.block_h;
          if (x1 - x0 < 1)
            x1 = x0 + 1;
          if (have_prev && b->joined)
            {
              cairo_move_to (cr, px, py);
              cairo_line_to (cr, x0, y + h * 0.5);
              cairo_stroke (cr);
            }
          cairo_rectangle (cr, x0 + 0.5, y + 0.5, x1 - x0 - 1, h - 1);
          cairo_stroke (cr);
          px = x1;
          py = y + h * 0.5;
          have_prev = 1;
        }
    }
  cairo_restore (cr);
}

void
pp_timeline_render (cairo_t *cr, const PpTimelineModel *m, const PpTimelineView *view)
{
  Ctx c;
  double sum_planned = 0;
  int n_planned = 0;
  PpTimelineView vc;
  const PpTimelineView *v = &vc;

  if (cr == NULL || m == NULL || view == NULL || view->width < 1 || view->height < 1)
    return;
  view_clamped (view, &vc);
  memset (&c, 0, sizeof c);
  c.m = m;
  c.v = v;
  pp_timeline_layout (m, v, &c.l);
  theme_of (v->dark, &c.th);
  c.image = cairo_surface_get_type (cairo_get_target (cr)) == CAIRO_SURFACE_TYPE_IMAGE;
  {
    cairo_surface_type_t t = cairo_surface_get_type (cairo_get_target (cr));
    c.vector = t == CAIRO_SURFACE_TYPE_SVG || t == CAIRO_SURFACE_TYPE_PDF || t == CAIRO_SURFACE_TYPE_PS;
  }
  c.hatch = c.vector ? NULL : hatch_pattern (&c.th);
  c.n_ranks = pp_timeline_model_n_ranks (m);
  c.P = c.n_ranks;
  {
    const PpTraceDescription *d = pp_timeline_model_description (m);
    c.V = d != NULL && d->n_virtual > 1 ? d->n_virtual : 1;
    if (d != NULL && d->n_ranks > 0)
      c.P = d->n_ranks;
  }
  /* The bubble spans the run's work: first span to last span. */
  if (!pp_timeline_model_span_extent (m, &c.run0, &c.run1))
    {
      c.run0 = pp_timeline_model_start_ns (m);
      c.run1 = pp_timeline_model_end_ns (m);
    }
  plan_extent (m, &c.plan0, &c.plan1);
  c.origin = pp_timeline_model_start_ns (m);
  c.summary = pp_timeline_view_summarized (m, v);
  c.median_step_ns = c.summary ? median_step_ns (m) : 0;
  if (v->drawn != NULL)
    v->drawn->summarized |= c.summary;
  c.ncols = (int) ceil (c.l.x1 - c.l.x0) + 1;
  c.cov = calloc ((size_t) c.ncols * N_SLOTS, sizeof *c.cov);
  c.strip = malloc ((size_t) c.ncols * sizeof *c.strip);
  c.cmin[0] = c.cmin[1] = c.ncols;
  c.cmax[0] = c.cmax[1] = -1;

  cairo_save (cr);
  set_rgb (cr, c.th.bg);
  cairo_rectangle (cr, 0, 0, v->width, v->height);
  cairo_fill (cr);
  if (c.cov == NULL || c.strip == NULL)
    goto out;

  {
    double rows_bottom = c.l.rows_y + c.n_ranks * c.l.row_h;
    double *bubbles = calloc ((size_t) c.n_ranks + 1, sizeof *bubbles);

    /* Rows are clipped to the plot; labels live left of it. */
    cairo_save (cr);
    cairo_rectangle (cr, c.l.x0, c.l.rows_y - 2, c.l.x1 - c.l.x0, rows_bottom - c.l.rows_y + 2);
    cairo_clip (cr);
    for (int r = 0; r < c.n_ranks; r++)
      {
        double ry = c.l.rows_y + r * c.l.row_h;
        if (ry > v->height || ry + c.l.row_h < c.l.rows_y)
          continue;
        double b = draw_rank (&c, cr, r);
        if (bubbles)
          bubbles[r] = b;
        if (b >= 0)
          {
            c.bubble_sum += b;
            c.bubble_n++;
          }
      }
    draw_focus (&c, cr);
    for (int r = 0; r < c.n_ranks; r++)
      draw_lost (&c, cr, r);
    cairo_restore (cr);

    /* Where labels cannot all be drawn, a pipeline rank's first row (its
     * folded row, or its first process) keeps its label: a process's
     * label that would crowd the next rank's first one is left out. */
    double last_label_y = -1e9, gap = label_font_size (&c.l) + 2;
    int next_first = 0;   /* the next rank's first row after r, once looked for */
    for (int r = 0; r < c.n_ranks; r++)
      {
        double ry = c.l.rows_y + r * c.l.row_h;
        if (ry > v->height)
          break;   /* rows below the image: nothing of them is drawn */
        int first = r == 0 || pp_timeline_model_row_rank (m, r) != pp_timeline_model_row_rank (m, r - 1);
        if (!first && next_first <= r)
          for (next_first = r + 1; next_first < c.n_ranks; next_first++)
            if (pp_timeline_model_row_rank (m, next_first) != pp_timeline_model_row_rank (m, next_first - 1))
              break;
        if (!first && next_first < c.n_ranks && (next_first - r) * c.l.row_h < gap)
          continue;
        draw_rank_label (&c, cr, r, bubbles ? bubbles[r] : -1, &last_label_y);
      }
    free (bubbles);

    draw_ruler (&c, cr);
    draw_steps (&c, cr, rows_bottom);
    draw_range (&c, cr, rows_bottom);
    {
      cairo_save (cr);
      cairo_rectangle (cr, c.l.x0 - 2, c.l.rows_y - 2, c.l.x1 - c.l.x0 + 4, rows_bottom - c.l.rows_y + 4);
      cairo_clip (cr);
      draw_arrows (&c, cr);
      cairo_restore (cr);
    }

    /* Hover and selection: outlines over everything. */
    {
      double x, y, w, h;
      if (span_rect (&c, v->hover_rank, v->hover_index, &x, &y, &w, &h))
        {
          set_rgb (cr, c.th.fg);
          cairo_set_line_width (cr, 1.5);
          cairo_rectangle (cr, x - 0.75, y - 0.75, w + 1.5, h + 1.5);
          cairo_stroke (cr);
        }
      if (span_rect (&c, v->selected_rank, v->selected_index, &x, &y, &w, &h))
        {
          set_rgb (cr, v->dark ? (Rgb) { 1, 1, 1 } : (Rgb) { 0, 0, 0 });
          cairo_set_line_width (cr, 2.5);
          cairo_rectangle (cr, x - 1.25, y - 1.25, w + 2.5, h + 2.5);
          cairo_stroke (cr);
          set_rgb (cr, v->dark ? (Rgb) { 0, 0, 0 } : (Rgb) { 1, 1, 1 });
          cairo_set_line_width (cr, 1);
          cairo_rectangle (cr, x - 2.5, y - 2.5, w + 5, h + 5);
          cairo_stroke (cr);
        }
    }

    if (v->show_header)
      {
        int64_t w0 = c.run0 > v->t0_ns ? c.run0 : v->t0_ns, w1 = c.run1 < v->t1_ns ? c.run1 : v->t1_ns;
        for (int r = 0; r < c.n_ranks && w1 > w0; r++)
          {
            double pb = pp_timeline_model_planned_bubble (m, r, INT64_MIN, INT64_MAX);
            if (pb >= 0)
              {
                sum_planned += pb;
                n_planned++;
              }
          }
        draw_header (&c, cr, c.bubble_n ? c.bubble_sum / c.bubble_n : -1,
                     n_planned == c.n_ranks && n_planned > 0 ? sum_planned / n_planned : -1);
      }
    if (v->show_legend)
      draw_legend (&c, cr);
  }
  if (v->show_critical_path)
    pp_timeline_render_critical_path (cr, m, v);
out:
  cairo_restore (cr);
  if (c.hatch != NULL)
    cairo_pattern_destroy (c.hatch);
  free (c.cov);
  free (c.strip);
  free (c.boxes);
}

/* ---- hit testing ---------------------------------------------------------------------- */

int
pp_timeline_hit (const PpTimelineModel *m, const PpTimelineView *view, double x, double y,
                 PpTimelineHit *out)
{
  PpTimelineLayout l;
  int n, r, lane;
  double dy;
  PpTimelineView vc;
  const PpTimelineView *v = NULL;

  if (view != NULL)
    {
      view_clamped (view, &vc);
      v = &vc;
    }
  if (out == NULL)
    return 0;
  out->rank = -1;
  out->index = -1;
  out->planned = 0;
  if (m == NULL || v == NULL)
    return 0;
  pp_timeline_layout (m, v, &l);
  n = pp_timeline_model_n_ranks (m);
  if (x < l.x0 || x > l.x1 || y < l.rows_y || n <= 0 || l.row_h <= 0)
    return 0;
  r = (int) floor ((y - l.rows_y) / l.row_h);
  if (r >= n)
    return 0;
  out->rank = r;
  dy = y - l.rows_y - r * l.row_h;
  if (dy < l.block_h)
    lane = LANE_BLOCK;
  else if (dy < l.block_h + l.thin_h)
    lane = LANE_THIN;
  else if (dy < l.block_h + l.thin_h + l.plan_h)
    lane = 3;
  else
    return 0;
  /* zoomed out to per-step bars the plan lane draws no block: none to hit */
  if (lane == 3 && pp_timeline_view_summarized (m, v))
    return 0;

  int64_t t = pp_timeline_t_of (v, &l, x);
  int64_t tol = (int64_t) (2.0 * ns_between (v->t0_ns, v->t1_ns) / (l.x1 - l.x0)) + 1;

  if (lane == 3)
    {
      const PpTimelinePlanned *p = pp_timeline_model_planned (m, r);
      size_t np = pp_timeline_model_n_planned (m, r);
      long best = -1;
      int64_t best_d = INT64_MAX;
      int64_t p0, p1;
      size_t k0, k1;
      int best_over = 1;
      plan_extent (m, &p0, &p1);
      int64_t ta, tb;
      if (__builtin_sub_overflow (t, tol, &ta))
        ta = INT64_MIN;
      if (__builtin_add_overflow (t, tol, &tb))
        tb = INT64_MAX;
      plan_copies_in (m, p0, p1, ta, tb, &k0, &k1);
      for (size_t copy = k0; copy < k1; copy++)
        {
          int64_t sh = plan_shift (m, p0, copy), limit = plan_limit (m, copy);
          int64_t tt = t - sh;   /* |t| <= 2^61, |sh| <= 2^62 */
          if (tt > ((int64_t) 1 << 62))
            tt = (int64_t) 1 << 62;
          if (tt < -((int64_t) 1 << 62))
            tt = -((int64_t) 1 << 62);
          for (size_t k = 0; k < np; k++)
            {
              if (plan_span_kind (p[k].kind) < 0)
                continue;
              int64_t d = tt < p[k].start_ns ? p[k].start_ns - tt
                          : tt > p[k].end_ns ? tt - p[k].end_ns : 0;
              /* a block past its step's end lies over the next copy's:
               * the next copy's own block wins where both are */
              int over = p[k].end_ns + sh > limit;
              if (d <= tol && (d < best_d || (d == best_d && best_over && !over)))
                {
                  best = (long) k;
                  best_d = d;
                  best_over = over;
                }
            }
        }
      out->index = best;
      out->planned = best >= 0;
      return best >= 0;
    }

  /* The span containing t (the shortest, so a kernel beats its block), else
   * the nearest within two pixels. */
  const PpSpan *sp = pp_timeline_model_spans (m, r);
  size_t ns = pp_timeline_model_n_spans (m, r);
  long best = -1;
  int64_t best_d = INT64_MAX, best_len = INT64_MAX;
  double kernel_from = l.block_h + l.thin_h * 0.5;
  for (size_t i = pp_timeline_model_first_overlapping (m, r, t - tol);
       i < ns && sp[i].start_ns <= t + tol; i++)
    {
      int sl = sp[i].kind < PP_N_SPAN_KINDS ? lane_of (sp[i].kind) : LANE_NONE;
      if (sl == LANE_NONE)
        continue;
      if (lane == LANE_BLOCK ? sl != LANE_BLOCK : sl == LANE_BLOCK)
        continue;
      /* In the thin lane, kernels are in its lower half. */
      if (lane == LANE_THIN && sl == LANE_KERNEL && dy < kernel_from)
        continue;
      int64_t d = t < sp[i].start_ns ? sp[i].start_ns - t : t > sp[i].end_ns ? t - sp[i].end_ns : 0;
      int64_t len = sp[i].end_ns - sp[i].start_ns;
      if (d > tol)
        continue;
      if (d < best_d || (d == best_d && len < best_len))
        {
          best = (long) i;
          best_d = d;
          best_len = len;
        }
    }
  out->index = best;
  return best >= 0;
}

/* ---- export ---------------------------------------------------------------------------- */

#define PDF_PT_PER_PX (72.0 / 96.0)

static void
sink_clear (TextSink *k)
{
  for (size_t i = 0; i < k->n; i++)
    free (k->t[i].s);
  free (k->t);
  memset (k, 0, sizeof *k);
}

static void
xml_escaped (FILE *f, const char *s)
{
  for (; *s; s++)
    switch (*s)
      {
      case '<': fputs ("&lt;", f); break;
      case '>': fputs ("&gt;", f); break;
      case '&': fputs ("&amp;", f); break;
      case '"': fputs ("&quot;", f); break;
      default: fputc (*s, f); break;
      }
}

/* Writes the sink's text into the finished SVG at path, before its
 * closing tag: <text> a label, in the renderer's font, size and color. */
static PpStatus
svg_add_text (const char *path, const TextSink *k, PpError *err)
{
  FILE *f = fopen (path, "rb");
  char *data = NULL;
  long len;
  if (f == NULL || fseek (f, 0, SEEK_END) != 0 || (len = ftell (f)) < 0 || fseek (f, 0, SEEK_SET) != 0
      || (data = malloc ((size_t) len + 1)) == NULL || fread (data, 1, (size_t) len, f) != (size_t) len)
    {
      if (f)
        fclose (f);
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cannot read back: %s", path, strerror (errno));
    }
  fclose (f);
  data[len] = 0;
  char *end = NULL;
  for (char *p = strstr (data, "</svg>"); p; p = strstr (p + 1, "</svg>"))
    end = p;
  if (end == NULL)
    {
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cairo wrote no closing </svg>", path);
    }
  f = fopen (path, "wb");
  if (f == NULL)
    {
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", path, strerror (errno));
    }
  fwrite (data, 1, (size_t) (end - data), f);
  fputs ("<g font-family=\"DejaVu Sans, Verdana, sans-serif\">\n", f);
  for (size_t i = 0; i < k->n; i++)
    {
      const SinkText *t = &k->t[i];
      fprintf (f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.2f\"%s fill=\"#%02x%02x%02x\"",
               t->x, t->y, t->size, t->bold ? " font-weight=\"bold\"" : "",
               (int) lround (fmin (1, fmax (0, t->rgba[0])) * 255),
               (int) lround (fmin (1, fmax (0, t->rgba[1])) * 255),
               (int) lround (fmin (1, fmax (0, t->rgba[2])) * 255));
      if (t->rgba[3] < 1)
        fprintf (f, " fill-opacity=\"%.2f\"", t->rgba[3]);
      fputs (" xml:space=\"preserve\">", f);
      xml_escaped (f, t->s);
      fputs ("</text>\n", f);
    }
  fputs ("</g>\n", f);
  fputs (end, f);
  free (data);
  if (fclose (f) != 0)
    return pp_error_set (err, PP_EIO, "%s: cannot write: %s", path, strerror (errno));
  return PP_OK;
}

/* cairo's file output does not see a failed flush at its close (a full
 * disk under a small PDF): the image goes through this stream, whose every
 * write and whose close are checked. */
static cairo_status_t
export_write (void *closure, const unsigned char *data, unsigned int length)
{
  FILE *f = closure;
  return fwrite (data, 1, length, f) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

PpStatus
pp_timeline_export (const PpTimelineModel *m, const PpTimelineView *v, const char *path,
                    PpError *err)
{
  return pp_timeline_export_as (m, v, path, path, err);
}

PpStatus
pp_timeline_export_as (const PpTimelineModel *m, const PpTimelineView *v, const char *path,
                       const char *name, PpError *err)
{
  PpTimelineView view;
  const char *dot;
  cairo_surface_t *s;
  cairo_status_t cs;
  cairo_t *cr;
  int kind;   /* 0 png, 1 svg, 2 pdf */
  TextSink sink = { 0 };
  FILE *f;

  if (m == NULL || v == NULL || path == NULL || name == NULL)
    return pp_error_set (err, PP_EINVAL, "nothing to export");
  view = *v;
  view.show_header = 1;
  view.show_legend = 1;
  if (view.width < 1 || view.height < 1 || view.width > 32767 || view.height > 32767)
    return pp_error_set (err, PP_EINVAL, "%s: size %.0fx%.0f is out of range (1 to 32767 px)",
                         name, view.width, view.height);
  dot = strrchr (name, '.');
  if (dot != NULL && strcasecmp (dot, ".png") == 0)
    kind = 0;
  else if (dot != NULL && strcasecmp (dot, ".svg") == 0)
    kind = 1;
  else if (dot != NULL && strcasecmp (dot, ".pdf") == 0)
    kind = 2;
  else
    return pp_error_set (err, PP_EINVAL, "%s: unknown image type; name the file .png, .svg or .pdf",
                         name);

  /* opened here, not by cairo, which says only "error while writing to
   * output stream": the system's reason (no such folder, no permission) */
  if ((f = fopen (path, "wb")) == NULL)
    return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, strerror (errno));
  if (kind == 0)
    s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int) ceil (view.width),
                                    (int) ceil (view.height));
  else if (kind == 1)
    {
      s = cairo_svg_surface_create_for_stream (export_write, f, view.width, view.height);
      /* a 1920-wide export is 1920 px wide, not 1920 pt (2560 px) */
      cairo_svg_surface_set_document_unit (s, CAIRO_SVG_UNIT_PX);
    }
  else
    /* the pixel size at 96 dpi (CSS's px): a 1123 x 794 drawing is an A4
     * page, not 1123 pt wide */
    s = cairo_pdf_surface_create_for_stream (export_write, f, view.width * PDF_PT_PER_PX,
                                             view.height * PDF_PT_PER_PX);
  cs = cairo_surface_status (s);
  if (cs != CAIRO_STATUS_SUCCESS)
    {
      cairo_surface_destroy (s);
      fclose (f);
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, cairo_status_to_string (cs));
    }
  cr = cairo_create (s);
  if (kind == 1)
    cairo_set_user_data (cr, &text_sink_key, &sink, NULL);
  if (kind == 2)
    cairo_scale (cr, PDF_PT_PER_PX, PDF_PT_PER_PX);
  pp_timeline_render (cr, m, &view);
  cs = cairo_status (cr);
  cairo_destroy (cr);
  if (cs == CAIRO_STATUS_SUCCESS && kind == 0)
    cs = cairo_surface_write_to_png_stream (s, export_write, f);
  cairo_surface_finish (s);
  if (cs == CAIRO_STATUS_SUCCESS)
    cs = cairo_surface_status (s);
  cairo_surface_destroy (s);
  int e = (fflush (f) != 0 || ferror (f)) ? errno : 0;
  if (fclose (f) != 0 && e == 0)
    e = errno;
  if (cs != CAIRO_STATUS_SUCCESS || e != 0)
    {
      sink_clear (&sink);
      if (cs == CAIRO_STATUS_WRITE_ERROR || cs == CAIRO_STATUS_SUCCESS)
        return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, strerror (e ? e : EIO));
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, cairo_status_to_string (cs));
    }
  if (kind == 1)
    {
      PpStatus st = svg_add_text (path, &sink, err);
      sink_clear (&sink);
      return st;
    }
  return PP_OK;
}
