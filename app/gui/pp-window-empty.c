/* pp-window-empty.c — what the window says where it has no timeline to
 * draw: how to start, why a file could not be opened (the importer's one
 * line, as text), or that the run on screen has no block yet.  The page is
 * an AdwStatusPage, whose description is Pango markup: everything put in
 * it is escaped first. */
#include "pp-window-private.h"

/* The empty page as the template has it (after an open error, once a run
 * has been shown). */
void
pp_window_reset_empty_page (PpWindow *self)
{
  if (self->empty_page == NULL || self->empty_default == NULL)
    return;
  adw_status_page_set_title (self->empty_page, "No Run Selected");
  adw_status_page_set_icon_name (self->empty_page, "io.github.pipescope.Pipescope");
  adw_status_page_set_description (self->empty_page, self->empty_default);
}

void
pp_window_show_open_error (PpWindow *self, const char *message)
{
  pp_window_toast (self, message);
  if (self->shown[0] != NULL || self->empty_page == NULL)
    return;
  /* the page's description is markup: the message goes in as text */
  g_autofree char *text = g_markup_escape_text (message, -1);
  adw_status_page_set_title (self->empty_page, "Could Not Open the Trace");
  adw_status_page_set_icon_name (self->empty_page, "dialog-warning-symbolic");
  adw_status_page_set_description (self->empty_page, text);
}

/* A run on screen with no block yet (a job still importing PyTorch and
 * building its schedule, or one that ended before its first block) is
 * said in words on the empty page, not drawn as an empty timeline ruled
 * at the clock's seconds since boot.  Comparing shows the timelines. */
void
pp_window_update_waiting (PpWindow *self)
{
  if (self->empty_page == NULL || self->main_stack == NULL)
    return;   /* the window is going */
  PpRecording *run = self->shown[0];
  gboolean none = run && !self->shown[1]
                  && pp_timeline_model_n_spans_total (pp_recording_get_model (run)) == 0;
  PpRecordingState st = run ? pp_recording_get_state (run) : PP_RECORDING_FILE;
  const char *title = NULL;
  g_autofree char *text = NULL;
  if (none && (st == PP_RECORDING_STARTING || st == PP_RECORDING_LIVE))
    {
      title = "Waiting for Ranks";
      text = g_strdup_printf ("%s is %s; its ranks appear with their first blocks (a PyTorch job "
                              "imports torch and builds its schedule first).",
                              pp_recording_get_title (run), st == PP_RECORDING_STARTING ? "starting" : "attached");
    }
  else if (none && (st == PP_RECORDING_ENDED || st == PP_RECORDING_FAILED))
    {
      title = "No Blocks Recorded";
      text = g_strdup_printf ("%s: %s before its first block.", pp_recording_get_title (run),
                              pp_recording_get_status (run));
    }
  if (title == NULL)
    {
      if (self->waiting)
        pp_window_reset_empty_page (self);
      self->waiting = FALSE;
      if (run)
        gtk_stack_set_visible_child_name (self->main_stack, "timeline");
      return;
    }
  self->waiting = TRUE;
  g_autofree char *escaped = g_markup_escape_text (text, -1);   /* the page's description is markup */
  adw_status_page_set_title (self->empty_page, title);
  adw_status_page_set_icon_name (self->empty_page, "io.github.pipescope.Pipescope");
  adw_status_page_set_description (self->empty_page, escaped);
  gtk_stack_set_visible_child_name (self->main_stack, "empty");
}
