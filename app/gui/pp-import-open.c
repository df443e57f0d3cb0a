/* pp-import-open.c — torch.profiler traces opened in the window.
 *
 * JSON and JSON.gz traces (a job's ranks, one file each) go through the
 * converter `pipescope-cli import` uses (import/pp-import.h), in a thread,
 * into a .pptrace in the user's cache folder; that file is then opened as
 * any trace, so one loader serves both and Export, Why and What if read it
 * as they read a bundled run.  Several JSON files opened at once are one
 * job: one run. */
#include "pp-import-open.h"

#include "pp-import.h"
#include "pp-window-private.h"

typedef struct {
  char **paths;     /* the JSON traces */
  char  *out;       /* the .pptrace made from them */
} ImportJob;

static void
import_job_free (gpointer data)
{
  ImportJob *j = data;
  g_strfreev (j->paths);
  g_free (j->out);
  g_free (j);
}

/* <cache>/pipescope/imported/<first file, without .json[.gz]>-<time>.pptrace */
static char *
import_out_path (const char *first)
{
  g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "pipescope", "imported", NULL);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      g_free (dir);
      dir = g_build_filename (g_get_tmp_dir (), "pipescope-imported", NULL);
      if (g_mkdir_with_parents (dir, 0700) != 0)
        return NULL;
    }
  g_autofree char *base = g_path_get_basename (first);
  for (const char *suffix = ".gz"; suffix; suffix = g_str_equal (suffix, ".gz") ? ".json" : NULL)
    if (g_str_has_suffix (base, suffix))
      base[strlen (base) - strlen (suffix)] = '\0';
  if (g_str_has_suffix (base, ".pt.trace"))
    base[strlen (base) - strlen (".pt.trace")] = '\0';
  g_strcanon (base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", '_');
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%H%M%S");
  static guint counter;
  g_autofree char *name = g_strdup_printf ("%s-%s-%u.pptrace", base, stamp, ++counter);
  return g_build_filename (dir, name, NULL);
}

static void
import_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  ImportJob *j = data;
  PpError err = { 0 };
  if (j->out == NULL)
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED,
                               "No folder to write the imported trace into");
      return;
    }
  if (pp_import_kineto_files ((const char *const *) j->paths, g_strv_length (j->paths), j->out,
                              NULL, &err) != PP_OK)
    {
      /* one line that names the file */
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", err.msg);
      return;
    }
  g_task_return_boolean (task, TRUE);
}

static void
import_done (GObject *source, GAsyncResult *result, gpointer data)
{
  PpWindow *self = PP_WINDOW (source);
  ImportJob *j = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      pp_window_show_open_error (self, error->message);
      return;
    }
  g_autoptr (GFile) file = g_file_new_for_path (j->out);
  pp_window_open_file (self, file);
}

gboolean
pp_gui_is_json_trace (GFile *file)
{
  g_autofree char *path = g_file_get_path (file);
  return path != NULL && pp_import_is_json_file (path);
}

void
pp_gui_open_files (PpWindow *self, GFile **files, guint n)
{
  g_autoptr (GPtrArray) json = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < n; i++)
    {
      if (pp_gui_is_json_trace (files[i]))
        g_ptr_array_add (json, g_file_get_path (files[i]));
      else
        pp_window_open_file (self, files[i]);
    }
  if (json->len == 0)
    return;
  g_ptr_array_add (json, NULL);
  ImportJob *j = g_new0 (ImportJob, 1);
  j->paths = (char **) g_ptr_array_steal (json, NULL);
  j->out = import_out_path (j->paths[0]);
  g_autoptr (GTask) task = g_task_new (self, NULL, import_done, NULL);
  g_task_set_task_data (task, j, import_job_free);
  g_task_run_in_thread (task, import_thread);
}
