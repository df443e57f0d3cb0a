/* pp-timeline-render-zoomed.c — zoomed out and folded: a bar a rank and
 * step where blocks would be too narrow, and a folded row's whiskers and
 * bands (the spread of its replicas).
 */
#include "pp-timeline-render-private.h"

/* ---- zoomed out: a bar a rank and step ------------------------------------------ */

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* The median step length, for the heat of the thin lane. */
double
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
double
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

/* A folded row's blocks are the replicas' median; a thin line from a
 * block's end to the latest replica's end, with a tick there, shows a
 * straggler at a glance.  Marks under a pixel are left out. */
void
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
void
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
