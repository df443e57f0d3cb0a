/* pp-self-test-stragglers.c — `pipescope --self-test=stragglers FILE`: the
 * Stragglers tab (issue 38), driven as a person would (tests/test-app.c
 * runs it on a job of replicas with one slow process).
 *
 * The trace opens; the tab shows; its analysis names the straggler first
 * ("self-test: stragglers first: process G pp P dp D"); a click on its
 * cell shows that replica's rows on the timeline ("self-test: stragglers
 * opened: replica dp D"); one step chosen instead of all, the cells count
 * one step ("self-test: stragglers one step: N"). */
#include "pp-window-private.h"

#include <stdio.h>

#include "pp-timeline-fold.h"

int
pp_self_test_stragglers (PpWindow *w, PpRecording *run, int step, gboolean demo, char **why)
{
  PpTimelineModel *m = run != NULL ? pp_recording_get_model (run) : NULL;
  const PpStragglerReport *rep;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0 || w->shown[0] == NULL
      || !pp_timeline_widget_has_replicas (w->timeline[0]))
    return 0;
  /* the window's analysis (on its worker) shown, as a person sees it */
  if (w->analyses_shown == 0 || pp_window_analysis_busy (w))
    return 0;
  if ((rep = pp_heatmap_view_get_report (w->stragglers)) == NULL || rep->n_items == 0)
    return 0;
  const PpStragglerProcess *q = &rep->procs[rep->items[0].proc];
  switch (step)
    {
    case 0:
      {
        GtkWidget *stack = gtk_widget_get_ancestor (GTK_WIDGET (w->stragglers), ADW_TYPE_VIEW_STACK);
        if (stack != NULL)
          adw_view_stack_set_visible_child_name (ADW_VIEW_STACK (stack), "stragglers");
        printf ("self-test: stragglers first: process %d pp %d dp %d\n", (int) q->process, q->pp, q->dp);
        return 1;
      }
    case 1:
      if (!pp_heatmap_view_click_cell (w->stragglers, q->pp, q->dp))
        {
          *why = g_strdup ("the straggler's cell holds no process");
          return -1;
        }
      if (pp_timeline_widget_get_replicas (w->timeline[0]) != q->dp)
        {
          *why = g_strdup_printf ("a click on the cell showed replicas %d, not dp %d",
                                  pp_timeline_widget_get_replicas (w->timeline[0]), q->dp);
          return -1;
        }
      printf ("self-test: stragglers opened: replica dp %d\n", q->dp);
      return demo ? 2 : 1;
    default:
      pp_heatmap_view_set_range (w->stragglers, rep->steps[0], rep->steps[0]);
      {
        double *cell = g_new (double, (gsize) rep->n_pp * rep->n_dp + 1);
        int n = pp_straggler_heatmap (rep, rep->steps[0], rep->steps[0], cell, NULL);
        g_free (cell);
        printf ("self-test: stragglers one step: %d\n", n);
      }
      return 2;
    }
}
