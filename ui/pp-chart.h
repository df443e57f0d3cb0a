/* pp-chart.h — what the charts (loss, memory) draw alike: tick steps and
 * axis titles.  Private to ui/. */
#pragma once

#include <cairo.h>

/* A tick step of 1, 2 or 5 x 10^k giving about `target` ticks over span. */
double pp_chart_nice_step (double span, int target);

/* The x title centred under the plot [left, right] at the widget's bottom
 * (h), and the y title turned along the left edge, centred on [top,
 * bottom]; in the current source colour and font. */
void   pp_chart_axis_titles (cairo_t *cr, double h, double left, double right, double top,
                             double bottom, const char *x_title, const char *y_title);
