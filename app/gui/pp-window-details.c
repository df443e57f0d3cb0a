/* pp-window-details.c — the window's find entry and details pane.
 *
 * The pane right of the timeline says everything known of the selected
 * block (pp_timeline_widget_selection_text: rank, stage, micro-batch, kind,
 * step, times, the idle gap before it and which dependency ended last, its
 * kernels), or, after a drag on the ruler, the measured range: its length
 * and each rank's busy and idle time in it, with a button to zoom to it.
 * The find entry dims every block its words do not name; a word it cannot
 * read turns the entry red and says why in its tooltip.
 */
#include "pp-window-private.h"

static void
update_pane (PpWindow *self)
{
  PpTimelineWidget *tl = self->timeline[0];
  char *text = pp_timeline_widget_selection_text (tl);
  const char *title = "Block";
  gboolean range = FALSE;
  if (text == NULL)
    {
      text = pp_timeline_widget_range_text (tl);
      title = "Measured range";
      range = text != NULL;
    }
  gtk_label_set_text (self->details_title, title);
  gtk_label_set_text (self->details_label, text ? text : "");
  gtk_widget_set_visible (self->zoom_range_button, range);
  gtk_widget_set_visible (self->details_pane, text != NULL);
  g_free (text);
}

const char *
pp_window_details_text (PpWindow *self)
{
  if (!gtk_widget_get_visible (self->details_pane))
    return "";
  return gtk_label_get_text (self->details_label);
}

static void
on_span_selected (PpTimelineWidget *tl, int rank, glong index, PpWindow *self)
{
  update_pane (self);
}

static void
on_range_measured (PpTimelineWidget *tl, PpWindow *self)
{
  update_pane (self);
}

static void
on_close (GtkButton *b, PpWindow *self)
{
  pp_timeline_widget_select (self->timeline[0], -1, -1);
  pp_timeline_widget_set_measured_range (self->timeline[0], 0, 0);
  update_pane (self);
}

static void
on_zoom (GtkButton *b, PpWindow *self)
{
  pp_timeline_widget_zoom_to_measured (self->timeline[0]);
}

static void
on_find_changed (GtkSearchEntry *entry, PpWindow *self)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (entry));
  GError *error = NULL;
  gboolean ok = TRUE;
  for (int i = 0; i < 2; i++)
    if (!pp_timeline_widget_set_filter_text (self->timeline[i], text, i == 0 ? &error : NULL))
      ok = FALSE;
  if (ok)
    {
      gtk_widget_remove_css_class (GTK_WIDGET (entry), "error");
      gtk_widget_set_tooltip_text (GTK_WIDGET (entry),
                                   "Dim every block but those named: a kind (F, B, I, W, FB, OPT), "
                                   "mb 3, stage 2, step 5, rank 1, combined (W mb 3)");
    }
  else
    {
      gtk_widget_add_css_class (GTK_WIDGET (entry), "error");
      gtk_widget_set_tooltip_text (GTK_WIDGET (entry), error ? error->message : NULL);
    }
  g_clear_error (&error);
}

void
pp_window_details_init (PpWindow *self)
{
  g_signal_connect (self->timeline[0], "span-selected", G_CALLBACK (on_span_selected), self);
  g_signal_connect (self->timeline[0], "range-measured", G_CALLBACK (on_range_measured), self);
  g_signal_connect (self->details_close, "clicked", G_CALLBACK (on_close), self);
  g_signal_connect (self->zoom_range_button, "clicked", G_CALLBACK (on_zoom), self);
  g_signal_connect (self->find_entry, "search-changed", G_CALLBACK (on_find_changed), self);
}
