/* pp-timeline-widget.h — the Gantt chart as a GTK widget.
 *
 * Draws with pp_timeline_render (the same function as the exports).  Zoom
 * with Ctrl+scroll, pinch and +/-, pan by dragging and scrolling, zoom to fit;
 * while live it follows the newest events unless the user has moved away.
 * Hover shows a tooltip (rank, stage, micro-batch, kind, start, duration and
 * what it waited for); a click selects a span ("span-selected").
 */
#pragma once

#include <gtk/gtk.h>

#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

G_BEGIN_DECLS

#define PP_TYPE_TIMELINE_WIDGET (pp_timeline_widget_get_type ())
G_DECLARE_FINAL_TYPE (PpTimelineWidget, pp_timeline_widget, PP, TIMELINE_WIDGET, GtkWidget)

GtkWidget *pp_timeline_widget_new (void);

/* The model to draw (borrowed: the caller keeps it alive and calls
 * set_model (NULL) before freeing it). */
void       pp_timeline_widget_set_model (PpTimelineWidget *self, PpTimelineModel *model);
PpTimelineModel *pp_timeline_widget_get_model (PpTimelineWidget *self);
/* What is drawn: the model, or for a job of replicas its view (owned by
 * the widget, valid until the rows or the model change). */
PpTimelineModel *pp_timeline_widget_get_drawn_model (PpTimelineWidget *self);

/* New data arrived in the model: redraw (coalesced to the frame clock), and
 * follow the newest events if live and the user has not moved away. */
void       pp_timeline_widget_model_changed (PpTimelineWidget *self);

void       pp_timeline_widget_set_live (PpTimelineWidget *self, gboolean live);
void       pp_timeline_widget_zoom_to_fit (PpTimelineWidget *self);
void       pp_timeline_widget_zoom (PpTimelineWidget *self, double factor);   /* > 1 zooms in */

/* The visible range; setting it lets two widgets share a time scale. */
void       pp_timeline_widget_get_range (PpTimelineWidget *self, gint64 *t0_ns, gint64 *t1_ns);
void       pp_timeline_widget_set_range (PpTimelineWidget *self, gint64 t0_ns, gint64 t1_ns);

/* The view as shown (for "save screenshot of the timeline as shown"). */
void       pp_timeline_widget_get_view (PpTimelineWidget *self, PpTimelineView *out);

/* Selection (issue 17): a click selects a block; its micro-batch is
 * outlined on every rank with its dependency arrows.  select (-1: none)
 * does what a click does; selection_text is everything known of the
 * selected block for a details pane (NULL when none; g_free it). */
void       pp_timeline_widget_select (PpTimelineWidget *self, int rank, long index);
char      *pp_timeline_widget_selection_text (PpTimelineWidget *self);
size_t     pp_timeline_widget_get_arrows (PpTimelineWidget *self, const PpTimelineArrow **arrows);

/* Measuring: a drag on the ruler selects a time range (a click on the
 * ruler or Escape clears it; z or Enter zooms to it).  range_text: its
 * length and each rank's busy and idle time in it (NULL when none). */
void       pp_timeline_widget_set_measured_range (PpTimelineWidget *self, gint64 t0_ns, gint64 t1_ns);
gboolean   pp_timeline_widget_get_measured_range (PpTimelineWidget *self, gint64 *t0_ns, gint64 *t1_ns);
char      *pp_timeline_widget_range_text (PpTimelineWidget *self);
void       pp_timeline_widget_zoom_to_measured (PpTimelineWidget *self);

/* Find and filter: the search entry's text (pp-timeline-filter.h's
 * grammar: "W", "mb 3", "stage 2 step 5"); what does not match is dimmed.
 * FALSE with a one-line error for text it cannot read (the filter stays). */
gboolean   pp_timeline_widget_set_filter_text (PpTimelineWidget *self, const char *text, GError **error);

/* A job of replicas (pp-timeline-fold.h): the rows fold each pipeline
 * rank's processes by default.  set_replicas: -1 fold, -2 all (a row a
 * process), N replica dp N alone; it folds every rank back.  toggle_rank:
 * what a click on a row's label does, unfold that rank into a row a
 * process or fold it again.  has_replicas: whether the rows are such a
 * view; n_rows: the rows drawn. */
void       pp_timeline_widget_set_replicas (PpTimelineWidget *self, int replica);
int        pp_timeline_widget_get_replicas (PpTimelineWidget *self);
gboolean   pp_timeline_widget_has_replicas (PpTimelineWidget *self);
void       pp_timeline_widget_toggle_rank (PpTimelineWidget *self, int rank);
int        pp_timeline_widget_n_rows (PpTimelineWidget *self);

/* Properties: "show-plan" (gboolean), "live" (gboolean).
 * Signals: "span-selected" (int rank, long index: -1 when cleared),
 *          "range-changed" (the visible range moved),
 *          "range-measured" (the measured range changed or was cleared),
 *          "rows-changed" (a job of replicas folded or unfolded). */
void       pp_timeline_widget_set_show_plan (PpTimelineWidget *self, gboolean show);
/* Issue 37: the model is a live job's: a stuck job's waits are drawn only
 * once it is stuck by the rule (PpTimelineView's stuck_live). */
void       pp_timeline_widget_set_stuck_live (PpTimelineWidget *self, gboolean live);
gboolean   pp_timeline_widget_get_show_plan (PpTimelineWidget *self);

G_END_DECLS
