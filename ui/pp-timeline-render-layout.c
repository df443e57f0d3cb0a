/* pp-timeline-render-layout.c — where things go: the view's start, the
 * legend's entries, the layout (header, ruler, legend, rows and their
 * lanes), time to x and back, whether a view is zoomed out to summaries,
 * and hit testing (what lies under a pixel).
 */
#include "pp-timeline-render-private.h"

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
  /* a job whose processes are still in an action (a stuck job's kept
   * trace): up to now, where its waits are drawn to */
  int64_t now = pp_timeline_model_now_ns (m);
  if (now > v->t1_ns)
    {
      if (pp_timeline_model_n_spans_total (m) == 0)
        {
          /* stuck before any action ended: from the first open action on
           * (the run's start when the description says one before it) */
          PpTimelineOpen o[64];
          size_t n = pp_timeline_model_opens (m, o, 64);
          int64_t first = INT64_MAX;
          for (size_t i = 0; i < n && i < 64; i++)
            if (o[i].open.start_ns > 0 && o[i].open.start_ns < first)
              first = o[i].open.start_ns;
          if (first != INT64_MAX && (v->t0_ns <= 0 || v->t0_ns > first))
            v->t0_ns = first;
        }
      v->t1_ns = now;
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

static int    plan_lane_of (const PpTimelineModel *m, const PpTimelineView *v);

static int    folded_rows (const PpTimelineModel *m);

/* The legend's height for n lines (one line: LEGEND_H, as it always was). */
double
legend_height_of (int lines)
{
  return LEGEND_H + LEGEND_LINE_H * (lines > 1 ? lines - 1 : 0);
}

double
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
void
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
int
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
void
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
  /* the rows share what is left, however thin (more processes than
   * pixels: each a blend of its blocks), so that none runs on under the
   * legend or off the bottom (issue 42) */
  out->row_h = avail > 0 ? avail / n : 0;
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
void
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
double
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

int
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
void
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
double
lane_y_host (const PpTimelineLayout *l, int r)
{
  return l->rows_y + r * l->row_h + l->block_h + l->thin_h + l->plan_h;
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
