/* pp-heatmap-view.h — the app's Stragglers tab: the stage x replica
 * heatmap of a job of replicas (pp-heatmap.h draws it), live. */
#pragma once

#include <adwaita.h>
#include <gtk/gtk.h>

#include "pp-panels.h"
#include "pp-straggler.h"
#include "pp-timeline-model.h"

G_BEGIN_DECLS

/* Signal "open-process" (int process, int pp, int dp): a cell was clicked. */
#define PP_TYPE_HEATMAP_VIEW (pp_heatmap_view_get_type ())
G_DECLARE_FINAL_TYPE (PpHeatmapView, pp_heatmap_view, PP, HEATMAP_VIEW, GtkWidget)
GtkWidget *pp_heatmap_view_new (void);
/* Re-analyses when the model changed or grew (call it a few times a second). */
void       pp_heatmap_view_update (PpHeatmapView *self, const PpTimelineModel *model);
/* update() in two halves, as the Why tab's (pp_why_panel_wants, _compute,
 * _apply): wants on the main loop, compute (pp_why_panel_stragglers) on
 * any thread over a model no other thread touches, apply on the main loop
 * (takes res; source compared, never read). */
typedef struct _PpHeatmapResult PpHeatmapResult;
gboolean         pp_heatmap_view_wants (PpHeatmapView *self, const PpTimelineModel *model);
PpHeatmapResult *pp_heatmap_view_compute (const PpTimelineModel *model);
void             pp_heatmap_result_free (PpHeatmapResult *res);
void             pp_heatmap_view_apply (PpHeatmapView *self, const PpTimelineModel *source, PpHeatmapResult *res);
/* Another run shown, its analysis under way: says so, not the last run's. */
void             pp_heatmap_view_show_pending (PpHeatmapView *self);
/* The analysis shown (NULL: none), for the tests. */
const PpStragglerReport *pp_heatmap_view_get_report (PpHeatmapView *self);
/* The steps the cells count (inclusive). */
void       pp_heatmap_view_set_range (PpHeatmapView *self, int from, int to);
/* What a click on cell (row = pp, col = dp) does; FALSE for no process there. */
gboolean   pp_heatmap_view_click_cell (PpHeatmapView *self, int row, int col);

G_END_DECLS
