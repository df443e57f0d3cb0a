/* pp-heatmap-view.c — the app's Stragglers tab (issue 38): the stage x
 * replica heatmap (ui/pp-heatmap.c draws it, as render --heatmap does),
 * for the analysed steps or a range of them, the straggler that saves
 * most named above it; a click on a cell emits "open-process" (the
 * window shows that replica's rows).  The numbers are pp-straggler.c's
 * (pp_why_panel_stragglers: the spans the Why tab reads), recomputed when
 * the model grows: live on an attached job.  compute (the analysis, no
 * GTK: the app runs it on a worker over a snapshot) is apart from apply
 * (on the main loop). */
#include "pp-heatmap-view.h"

#include <math.h>

#include "pp-heatmap.h"
#include "pp-timeline-fold.h"

struct _PpHeatmapView {
  GtkWidget          parent_instance;
  GtkWidget         *box, *title, *from, *to, *area;
  PpStragglerReport *rep;
  double            *cell;
  int32_t           *proc;
  int                n_counted;
  int                sel_row, sel_col;
  const PpTimelineModel *seen_model;
  size_t             seen_spans;
  gboolean           updating;
};

G_DEFINE_FINAL_TYPE (PpHeatmapView, pp_heatmap_view, GTK_TYPE_WIDGET)

enum { SIGNAL_OPEN_PROCESS, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
fill (PpHeatmap *h, PpHeatmapView *self)
{
  memset (h, 0, sizeof *h);
  h->selected_row = self->sel_row;
  h->selected_col = self->sel_col;
  if (self->rep == NULL)
    return;
  h->n_rows = self->rep->n_pp;
  h->n_cols = self->rep->n_dp;
  h->cell = self->cell;
  h->step_from = (int32_t) gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->from));
  h->step_to = (int32_t) gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->to));
  h->n_steps = self->n_counted;
  h->title = "slowdown of each process against its copies";
  h->dark = adw_style_manager_get_dark (adw_style_manager_get_default ());
}

static void
draw (GtkDrawingArea *a, cairo_t *cr, int w, int h, gpointer data)
{
  PpHeatmapView *self = data;
  PpHeatmap hm;
  fill (&hm, self);
  pp_heatmap_draw (cr, &hm, w, h);
}

/* The cells of the range the spin buttons hold. */
static void
recount (PpHeatmapView *self)
{
  if (self->rep == NULL)
    return;
  self->n_counted = pp_straggler_heatmap (self->rep,
                                          (int32_t) gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->from)),
                                          (int32_t) gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->to)),
                                          self->cell, self->proc);
  gtk_widget_queue_draw (self->area);
}

static void
on_range (GtkSpinButton *b, PpHeatmapView *self)
{
  if (!self->updating)
    recount (self);
}

static void
on_click (GtkGestureClick *g, int n_press, double x, double y, PpHeatmapView *self)
{
  PpHeatmap hm;
  int r, c;
  fill (&hm, self);
  if (!pp_heatmap_hit (&hm, gtk_widget_get_width (self->area), gtk_widget_get_height (self->area), x, y, &r, &c))
    return;
  int32_t p = self->proc[r * hm.n_cols + c];
  if (p < 0)
    return;
  self->sel_row = r;
  self->sel_col = c;
  gtk_widget_queue_draw (self->area);
  const PpStragglerProcess *q = &self->rep->procs[p];
  g_signal_emit (self, signals[SIGNAL_OPEN_PROCESS], 0, (int) q->process, (int) q->pp, (int) q->dp);
}

static void
set_report (PpHeatmapView *self, PpStragglerReport *rep, const char *why)
{
  pp_straggler_report_free (self->rep);
  g_clear_pointer (&self->cell, g_free);
  g_clear_pointer (&self->proc, g_free);
  self->rep = rep;
  if (rep != NULL && (size_t) rep->n_pp * (size_t) rep->n_dp > (size_t) PP_STRAGGLER_HEATMAP_MAX_CELLS)
    {
      pp_straggler_report_free (rep);
      self->rep = rep = NULL;
      why = "the trace's places make more stages x replicas than a heatmap draws";
    }
  if (rep == NULL || rep->n_steps == 0)
    {
      char *t = g_strdup_printf ("Stragglers: %s", why);
      gtk_label_set_text (GTK_LABEL (self->title), t);
      g_free (t);
      gtk_widget_queue_draw (self->area);
      return;
    }
  size_t nc = (size_t) rep->n_pp * (size_t) rep->n_dp;
  self->cell = g_new (double, nc + 1);
  self->proc = g_new (int32_t, nc + 1);
  /* the range: kept where it still lies in the steps, else all of them */
  int lo = rep->steps[0], hi = rep->steps[rep->n_steps - 1];
  int from = gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->from));
  int to = gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->to));
  gboolean was_all = to >= (int) gtk_adjustment_get_upper (gtk_spin_button_get_adjustment (GTK_SPIN_BUTTON (self->to)));
  self->updating = TRUE;
  gtk_spin_button_set_range (GTK_SPIN_BUTTON (self->from), lo, hi);
  gtk_spin_button_set_range (GTK_SPIN_BUTTON (self->to), lo, hi);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (self->from), from >= lo && from <= hi && !was_all ? from : lo);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (self->to), to >= lo && to <= hi && !was_all ? to : hi);
  self->updating = FALSE;
  recount (self);
  const PpStragglerItem *top = rep->n_items > 0 ? &rep->items[0] : NULL;
  char *t;
  if (top != NULL && top->saving_s > 0)
    {
      const PpStragglerProcess *q = &rep->procs[top->proc];
      t = g_strdup_printf ("Stragglers: process %d (pp %d dp %d tp %d, %s) %+.0f%% slower, %s; running like its "
                           "median copy would save %.3f ms a step (replayed). Click a cell to see its rows.",
                           (int) q->process, q->pp, q->dp, q->tp, q->host[0] ? q->host : "?", 100 * q->slowdown,
                           pp_straggler_cause_name (q->cause), top->saving_s * 1e3);
    }
  else
    t = g_strdup ("Stragglers: none; no process running like its median copy would shorten the step.");
  gtk_label_set_text (GTK_LABEL (self->title), t);
  g_free (t);
}

/* What the tab shows of a model: the straggler analysis, or why none. */
struct _PpHeatmapResult
{
  size_t             n_spans;   /* of the model analysed: update's key */
  PpStragglerReport *rep;
  char               why[PP_ERROR_MSG_MAX + 64];
};

void
pp_heatmap_result_free (PpHeatmapResult *res)
{
  if (res == NULL)
    return;
  pp_straggler_report_free (res->rep);
  g_free (res);
}

gboolean
pp_heatmap_view_wants (PpHeatmapView *self, const PpTimelineModel *model)
{
  g_return_val_if_fail (PP_IS_HEATMAP_VIEW (self), FALSE);
  return model != self->seen_model || pp_timeline_model_n_spans_analysed (model) != self->seen_spans;
}

PpHeatmapResult *
pp_heatmap_view_compute (const PpTimelineModel *model)
{
  PpHeatmapResult *res = g_new0 (PpHeatmapResult, 1);
  PpError err = { 0 };
  res->n_spans = pp_timeline_model_n_spans_analysed (model);
  if (model == NULL || !pp_timeline_model_has_replicas (model))
    {
      g_strlcpy (res->why, "the job has one process a pipeline rank: no copies to compare with", sizeof res->why);
      return res;
    }
  pp_why_panel_stragglers (model, &res->rep, &err);
  g_strlcpy (res->why, err.msg[0] ? err.msg : "no whole step in every replica yet", sizeof res->why);
  return res;
}

void
pp_heatmap_view_apply (PpHeatmapView *self, const PpTimelineModel *source, PpHeatmapResult *res)
{
  g_return_if_fail (PP_IS_HEATMAP_VIEW (self));
  g_return_if_fail (res != NULL);
  self->seen_model = source;
  self->seen_spans = res->n_spans;
  set_report (self, g_steal_pointer (&res->rep), res->why);
  pp_heatmap_result_free (res);
}

void
pp_heatmap_view_update (PpHeatmapView *self, const PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_HEATMAP_VIEW (self));
  if (pp_heatmap_view_wants (self, model))
    pp_heatmap_view_apply (self, model, pp_heatmap_view_compute (model));
}

void
pp_heatmap_view_show_pending (PpHeatmapView *self)
{
  g_return_if_fail (PP_IS_HEATMAP_VIEW (self));
  self->seen_model = NULL;
  self->seen_spans = 0;
  set_report (self, NULL, "analysing the run\u2026");
}

const PpStragglerReport *
pp_heatmap_view_get_report (PpHeatmapView *self)
{
  g_return_val_if_fail (PP_IS_HEATMAP_VIEW (self), NULL);
  return self->rep;
}

void
pp_heatmap_view_set_range (PpHeatmapView *self, int from, int to)
{
  g_return_if_fail (PP_IS_HEATMAP_VIEW (self));
  self->updating = TRUE;
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (self->from), from);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (self->to), to);
  self->updating = FALSE;
  recount (self);
}

gboolean
pp_heatmap_view_click_cell (PpHeatmapView *self, int row, int col)
{
  g_return_val_if_fail (PP_IS_HEATMAP_VIEW (self), FALSE);
  if (self->rep == NULL || row < 0 || col < 0 || row >= self->rep->n_pp || col >= self->rep->n_dp)
    return FALSE;
  int32_t p = self->proc[row * self->rep->n_dp + col];
  if (p < 0)
    return FALSE;
  self->sel_row = row;
  self->sel_col = col;
  const PpStragglerProcess *q = &self->rep->procs[p];
  g_signal_emit (self, signals[SIGNAL_OPEN_PROCESS], 0, (int) q->process, (int) q->pp, (int) q->dp);
  return TRUE;
}

static void
pp_heatmap_view_dispose (GObject *o)
{
  PpHeatmapView *self = PP_HEATMAP_VIEW (o);
  g_clear_pointer (&self->box, gtk_widget_unparent);
  pp_straggler_report_free (self->rep);
  self->rep = NULL;
  g_clear_pointer (&self->cell, g_free);
  g_clear_pointer (&self->proc, g_free);
  G_OBJECT_CLASS (pp_heatmap_view_parent_class)->dispose (o);
}

static void
pp_heatmap_view_class_init (PpHeatmapViewClass *k)
{
  G_OBJECT_CLASS (k)->dispose = pp_heatmap_view_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (k), GTK_TYPE_BIN_LAYOUT);
  signals[SIGNAL_OPEN_PROCESS] = g_signal_new ("open-process", G_TYPE_FROM_CLASS (k), G_SIGNAL_RUN_LAST, 0, NULL,
                                               NULL, NULL, G_TYPE_NONE, 3, G_TYPE_INT, G_TYPE_INT, G_TYPE_INT);
}

static void
pp_heatmap_view_init (PpHeatmapView *self)
{
  self->sel_row = self->sel_col = -1;
  self->box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_parent (self->box, GTK_WIDGET (self));
  gtk_widget_set_margin_start (self->box, 12);
  gtk_widget_set_margin_end (self->box, 12);
  gtk_widget_set_margin_top (self->box, 8);
  self->title = gtk_label_new ("Stragglers: nothing yet");
  gtk_label_set_xalign (GTK_LABEL (self->title), 0);
  gtk_label_set_wrap (GTK_LABEL (self->title), TRUE);
  gtk_box_append (GTK_BOX (self->box), self->title);
  GtkWidget *row = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_box_append (GTK_BOX (row), gtk_label_new ("Steps"));
  self->from = gtk_spin_button_new_with_range (0, 1, 1);
  self->to = gtk_spin_button_new_with_range (0, 1, 1);
  gtk_box_append (GTK_BOX (row), self->from);
  gtk_box_append (GTK_BOX (row), gtk_label_new ("to"));
  gtk_box_append (GTK_BOX (row), self->to);
  g_signal_connect (self->from, "value-changed", G_CALLBACK (on_range), self);
  g_signal_connect (self->to, "value-changed", G_CALLBACK (on_range), self);
  gtk_box_append (GTK_BOX (self->box), row);
  self->area = gtk_drawing_area_new ();
  gtk_widget_set_vexpand (self->area, TRUE);
  gtk_widget_set_hexpand (self->area, TRUE);
  gtk_drawing_area_set_content_height (GTK_DRAWING_AREA (self->area), 220);
  gtk_drawing_area_set_draw_func (GTK_DRAWING_AREA (self->area), draw, self, NULL);
  GtkGesture *click = gtk_gesture_click_new ();
  g_signal_connect (click, "released", G_CALLBACK (on_click), self);
  gtk_widget_add_controller (self->area, GTK_EVENT_CONTROLLER (click));
  gtk_box_append (GTK_BOX (self->box), self->area);
}

GtkWidget *
pp_heatmap_view_new (void)
{
  return g_object_new (PP_TYPE_HEATMAP_VIEW, NULL);
}
