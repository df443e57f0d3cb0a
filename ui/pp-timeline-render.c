/* pp-timeline-render.c — the Gantt chart of a run, drawn with cairo only.
 *
 * One function draws everything (STYLE.md: drawing as a free function); the
 * widget, the exports and the pixel tests share it.  Cost is bounded by the
 * pixels, not the spans: per rank a binary search finds the first span that
 * can overlap the view, spans wider than SPAN_MIN_PX become rectangles
 * batched by color, narrower ones add their coverage to per-pixel columns
 * that are drawn once (an ARGB32 strip on image surfaces, merged runs of
 * rectangles on vector ones).
 *
 * This file: pp_timeline_render and the critical path over it, the
 * per-render scratch (its columns), and a rank's row with its plan lane;
 * the other parts are pp-timeline-render-*.c (pp-timeline-render-private.h).
 */
#include "pp-timeline-render-private.h"

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
  /* The bubble spans the run's steps: first block (set-up before step 0
   * is no step's, never bubble) to last span. */
  if (!pp_timeline_model_step_extent (m, &c.run0, &c.run1))
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
    draw_stuck (&c, cr);   /* issue 37: clipped to the rows itself */

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
