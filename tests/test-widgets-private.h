/* test-widgets-private.h — what test-widgets.c (the timeline widget) and
 * test-widgets-panels.c (the panels under it) share: one test program's
 * helpers. */
#pragma once

#include <gtk/gtk.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "pp-compare.h"
#include "pp-heatmap-view.h"
#include "pp-panels.h"
#include "pp-span-table.h"
#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-timeline-widget.h"
#include "pp-timeline-details.h"
#include "pp-timeline-fold.h"
#include "pp-why-runtime.h"

/* Not in the headers: the widgets expose these for tests. */
char    *pp_timeline_widget_tooltip_text (PpTimelineWidget *self, double x, double y);
gboolean pp_whatif_measured_costs (const PpTimelineModel *m, PpMeasuredCosts *out);

#define WIN_W 900
#define WIN_H 420
#define MS    G_GINT64_CONSTANT (1000000)

extern char *tmpdir;

PpTimelineModel *gpipe_model (void);
void wt_add_span (PpTimelineModel *m, int rank, int kind, int stage, int mb, int peer,
              gint64 start, gint64 end);
void add_description (PpTimelineModel *m, int P, int M, gint64 start);
gboolean on_timeout (gpointer data);
GtkWidget *window_with (GtkWidget *child, int width, int height);
cairo_surface_t *render_widget (GtkWidget *w);
void pixel (cairo_surface_t *s, double x, double y, double rgb[3]);
void save_png (cairo_surface_t *s, const char *name);
void collect_labels (GtkWidget *w, GString *out);

void test_widgets_panels_register (void);   /* test-widgets-panels.c's tests */
