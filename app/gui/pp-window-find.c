/* pp-window-find.c — Find's matches: their count, the next and the previous.
 *
 * The find entry's words (pp-window-details.c dims the timeline with them)
 * also filter the Spans tab, whose lines are the matches: the label beside
 * the entry says how many ("41 matches") and, once one is selected, which
 * ("3 of 41").  Enter goes to the next match and Shift+Enter to the
 * previous one (Ctrl+G and Shift+Ctrl+G as well), in the table's order —
 * by start unless a column's header says otherwise —, selecting the block
 * on the timeline and bringing it into view.  Ctrl+F goes to the entry.
 */
#include "pp-window-private.h"

/* The line of the block selected on the upper timeline, -1 if none is or
 * it is no match. */
static long
selected_position (PpWindow *self)
{
  PpTimelineView v;
  pp_timeline_widget_get_view (self->timeline[0], &v);
  if (v.selected_rank < 0)
    return -1;
  return pp_span_table_position (self->span_table, v.selected_rank, v.selected_index);
}

static void
update_count (PpWindow *self)
{
  if (self->find_count == NULL || self->span_table == NULL)   /* the window is going */
    return;
  if (!pp_span_table_filter_active (self->span_table) || self->shown[0] == NULL)
    {
      gtk_widget_set_visible (GTK_WIDGET (self->find_count), FALSE);
      return;
    }
  guint n = pp_span_table_n_rows (self->span_table);
  long at = n > 0 ? selected_position (self) : -1;
  g_autofree char *text = n == 0 ? g_strdup ("No match")
                        : at >= 0 ? g_strdup_printf ("%ld of %u", at + 1, n)
                        : g_strdup_printf (n == 1 ? "%u match" : "%u matches", n);
  gtk_label_set_text (self->find_count, text);
  gtk_widget_set_visible (GTK_WIDGET (self->find_count), TRUE);
}

void
pp_window_find_step (PpWindow *self, int dir)
{
  g_return_if_fail (PP_IS_WINDOW (self));
  if (!pp_span_table_filter_active (self->span_table))
    return;
  guint n = pp_span_table_n_rows (self->span_table);
  if (n == 0)
    return;
  long at = selected_position (self);
  guint next = at < 0 ? (dir > 0 ? 0 : n - 1) : (guint) ((at + (dir > 0 ? 1 : (long) n - 1)) % n);
  pp_span_table_activate (self->span_table, next);
  update_count (self);
}

static void
on_find_changed (GtkSearchEntry *entry, PpWindow *self)
{
  /* a text Find cannot read keeps the last filter (the entry says why) */
  pp_span_table_set_filter_text (self->span_table, gtk_editable_get_text (GTK_EDITABLE (entry)));
  update_count (self);
}

static void
on_next (GtkSearchEntry *entry, PpWindow *self)
{
  pp_window_find_step (self, 1);
}

static void
on_previous (GtkSearchEntry *entry, PpWindow *self)
{
  pp_window_find_step (self, -1);
}

/* Shift+Enter: GtkSearchEntry has no signal for it. */
static gboolean
on_key_pressed (GtkEventControllerKey *c, guint keyval, guint keycode, GdkModifierType state, PpWindow *self)
{
  if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter || keyval == GDK_KEY_ISO_Enter)
      && (state & GDK_SHIFT_MASK))
    {
      pp_window_find_step (self, -1);
      return TRUE;
    }
  return FALSE;
}

static void
on_selection_moved (PpWindow *self)
{
  update_count (self);
}

static void
action_find (GSimpleAction *a, GVariant *p, gpointer data)
{
  PpWindow *self = data;
  gtk_widget_grab_focus (GTK_WIDGET (self->find_entry));
}

void
pp_window_find_init (PpWindow *self)
{
  static const GActionEntry entries[] = { { "find", action_find } };
  g_action_map_add_action_entries (G_ACTION_MAP (self), entries, G_N_ELEMENTS (entries), self);

  pp_span_table_set_timeline (self->span_table, self->timeline[0]);
  g_signal_connect (self->find_entry, "search-changed", G_CALLBACK (on_find_changed), self);
  g_signal_connect (self->find_entry, "activate", G_CALLBACK (on_next), self);
  g_signal_connect (self->find_entry, "next-match", G_CALLBACK (on_next), self);
  g_signal_connect (self->find_entry, "previous-match", G_CALLBACK (on_previous), self);
  GtkEventController *keys = gtk_event_controller_key_new ();
  gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_key_pressed), self);
  gtk_widget_add_controller (GTK_WIDGET (self->find_entry), keys);
  /* the selected block moved (a click, the table, Find): "3 of 41" follows;
   * new spans came: the count too */
  g_signal_connect_swapped (self->timeline[0], "span-selected", G_CALLBACK (on_selection_moved), self);
  g_signal_connect_swapped (self->span_table, "rows-changed", G_CALLBACK (on_selection_moved), self);
}
