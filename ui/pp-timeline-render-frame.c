/* pp-timeline-render-frame.c — what frames the rows: the header, the
 * ruler (and its unit), the steps' lines and the legend.
 */
#include "pp-timeline-render-private.h"

/* ---- the parts ---------------------------------------------------------------------- */

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

/* The header's measured figure: with steps, the mean over ranks of each
 * rank's bubble a step (pp_timeline_model_step_bubbles: what the stats
 * panel, info and run print, and what compares with the plan's); without,
 * the mean idle share of the visible part (what the row labels say). */
void
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

void
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

void
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

/* The legend: what each mark means, drawn as the rows draw it (the
 * bubble's hatch, the thin lane's marks thin, the plan see-through), kinds
 * this trace does not hold left out.  It keeps every entry at any width:
 * where one line is too short it wraps onto more (the layout leaves room,
 * legend_height_of), so a narrow image or a window beside its side panel
 * says as much as a wide one (up to a third of the height, legend_build). */
void
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
