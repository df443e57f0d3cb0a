/* pp-timeline-render-focus.c — what the eye is pointed at: find and
 * filter, the selected micro-batch and its arrows, a lost stream, the
 * measured range.
 */
#include "pp-timeline-render-private.h"

/* ---- focus: find and filter, the selected micro-batch, its arrows ------------------- */

/* Find and filter dims what does not match (a veil over the rows, the
 * matches drawn again over it); the selected block's micro-batch, in its
 * step, is outlined on every rank. */
void
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
void
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
void
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
void
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
