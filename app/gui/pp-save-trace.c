/* pp-save-trace.c — Save Trace… (Ctrl+Shift+S): any run on screen as a
 * pipescope trace file.
 *
 * Every run already has one: a run of ours, a profiled command and an
 * attached job stream into a copy in the user's cache as they arrive
 * (pp-recording.c), a profiled command's own report is written where
 * Profile said, an opened trace is its file, and an imported
 * torch.profiler trace is the .pptrace the import made.  Saving copies
 * that file, so what is saved is exactly what the window reads back.  An
 * imported trace is saved in pipescope's format, not as the JSON it came
 * from: the user has the JSON already, and the .pptrace holds what the
 * import found (blocks, waits, the plan) without importing again.  A live
 * run is saved as far as it has come: its copy is flushed a few times a
 * second, and a frame cut at that instant reads as the file's end (a
 * reader takes any prefix of a trace). */
#include "pp-window-private.h"

#include <errno.h>
#include <unistd.h>

#include <glib/gstdio.h>

/* The file the shown run's data is in, or NULL (with error). */
static const char *
source_of (PpWindow *self, PpRecording *run, GError **error)
{
  const char *src = run ? pp_recording_get_report_path (run) : NULL;
  if (src == NULL || !g_file_test (src, G_FILE_TEST_IS_REGULAR))
    src = run ? pp_recording_get_trace_path (run) : NULL;
  if (run == NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "Nothing to save: select a run first");
  else if (src == NULL || !g_file_test (src, G_FILE_TEST_IS_REGULAR))
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "%s has no trace to save (it never started, or its copy could not be written)",
                 pp_recording_get_title (run));
  else
    return src;
  return NULL;
}

gboolean
pp_window_save_trace_to (PpWindow *self, const char *path, GError **error)
{
  g_return_val_if_fail (PP_IS_WINDOW (self) && path != NULL, FALSE);
  const char *src = source_of (self, self->shown[0], error);
  if (src == NULL)
    return FALSE;
  g_autoptr (GFile) from = g_file_new_for_path (src);
  g_autoptr (GFile) to = g_file_new_for_path (path);
  if (g_file_equal (from, to))
    return TRUE;   /* the run is that file already */
  /* a copy beside the target, renamed over it when whole: a failed save
   * leaves no half file and keeps what was there */
  g_autofree char *tmp = g_strdup_printf ("%s.part-%d", path, (int) getpid ());
  g_autoptr (GFile) part = g_file_new_for_path (tmp);
  if (!g_file_copy (from, part, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, error))
    return FALSE;
  if (g_rename (tmp, path) != 0)
    {
      int e = errno;
      g_unlink (tmp);
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "Cannot write %s: %s", path,
                   g_strerror (e));
      return FALSE;
    }
  return TRUE;
}

static void
save_response (GtkNativeDialog *chooser, int response, PpWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *path = g_file_get_path (file);
      g_autoptr (GError) error = NULL;
      g_autofree char *msg = NULL;
      if (path == NULL)
        msg = g_strdup ("Only a local file can be saved to");
      else
        {
          if (!g_str_has_suffix (path, ".pptrace"))
            {
              char *with = g_strconcat (path, ".pptrace", NULL);
              g_free (path);
              path = with;
            }
          if (pp_window_save_trace_to (self, path, &error))
            msg = g_strdup_printf ("Saved %s%s", path,
                                   self->shown[0] && pp_recording_get_state (self->shown[0]) == PP_RECORDING_LIVE
                                     ? " (the run so far: it is still live)" : "");
          else
            msg = g_strdup (error->message);
        }
      pp_window_toast (self, msg);
    }
  g_object_unref (chooser);
}

/* "1F1B · P=4 · M=8" -> "1F1B-P4-M8.pptrace" */
static char *
suggested_name (PpRecording *run)
{
  g_autofree char *base = g_strdup (pp_recording_get_title (run));
  GString *s = g_string_new (NULL);
  gboolean dash = FALSE;
  for (const char *p = base; *p; p++)
    {
      if (g_ascii_isalnum (*p) || *p == '_' || *p == '.')
        {
          g_string_append_c (s, *p);
          dash = FALSE;
        }
      else if (!dash && s->len > 0 && *p != '=')
        {
          g_string_append_c (s, '-');
          dash = TRUE;
        }
    }
  while (s->len > 0 && s->str[s->len - 1] == '-')
    g_string_truncate (s, s->len - 1);
  if (s->len == 0)
    g_string_append (s, "run");
  if (!g_str_has_suffix (s->str, ".pptrace"))
    g_string_append (s, ".pptrace");
  return g_string_free (s, FALSE);
}

void
pp_window_show_save_trace_dialog (PpWindow *self)
{
  g_autoptr (GError) error = NULL;
  if (source_of (self, self->shown[0], &error) == NULL)
    {
      pp_window_toast (self, error->message);
      return;
    }
  /* GtkFileChooserNative, as Open and Export do: GtkFileDialog is GTK 4.10 */
  GtkFileChooserNative *chooser =
    gtk_file_chooser_native_new ("Save Trace", GTK_WINDOW (self), GTK_FILE_CHOOSER_ACTION_SAVE,
                                 "_Save", "_Cancel");
  g_autofree char *name = suggested_name (self->shown[0]);
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), name);
  GtkFileFilter *filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, "pipescope traces");
  gtk_file_filter_add_pattern (filter, "*.pptrace");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
  g_object_unref (filter);
  g_signal_connect (chooser, "response", G_CALLBACK (save_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}
