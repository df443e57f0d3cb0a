/* pp-chart.c — what the charts draw alike (pp-chart.h). */
#include "pp-chart.h"

#include <math.h>

double
pp_chart_nice_step (double span, int target)
{
  if (!(span > 0))
    return 1;
  double raw = span / (target > 1 ? target : 1);
  double mag = pow (10, floor (log10 (raw)));
  double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

void
pp_chart_axis_titles (cairo_t *cr, double h, double left, double right, double top,
                      double bottom, const char *x_title, const char *y_title)
{
  cairo_text_extents_t ext;

  cairo_text_extents (cr, x_title, &ext);
  cairo_move_to (cr, (left + right) / 2 - ext.width / 2 - ext.x_bearing, h - 6);
  cairo_show_text (cr, x_title);
  cairo_text_extents (cr, y_title, &ext);
  cairo_save (cr);
  cairo_translate (cr, 14, (top + bottom) / 2 + ext.width / 2);
  cairo_rotate (cr, -M_PI / 2);
  cairo_move_to (cr, -ext.x_bearing, 0);
  cairo_show_text (cr, y_title);
  cairo_restore (cr);
}
