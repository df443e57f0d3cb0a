/* pp-dialogs.c — Attach…, Open…, Save Screenshot…, Export Chrome JSON…. */
#include "pp-window-private.h"

#include "pp-import-open.h"

#include "pp-registry.h"
#include "pp-timeline-render.h"

/* ---- Open trace ------------------------------------------------------------------ */

static void
open_response (GtkNativeDialog *dialog, int response, PpWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      /* several torch.profiler traces chosen together: one job, one run */
      g_autoptr (GListModel) list = gtk_file_chooser_get_files (GTK_FILE_CHOOSER (dialog));
      guint n = g_list_model_get_n_items (list);
      GFile **files = g_new0 (GFile *, n + 1);
      for (guint i = 0; i < n; i++)
        files[i] = g_list_model_get_item (list, i);
      pp_gui_open_files (self, files, n);
      for (guint i = 0; i < n; i++)
        g_object_unref (files[i]);
      g_free (files);
    }
  g_object_unref (dialog);
}

void
pp_window_show_open_dialog (PpWindow *self)
{
  GtkFileChooserNative *dialog =
    gtk_file_chooser_native_new ("Open Trace", GTK_WINDOW (self), GTK_FILE_CHOOSER_ACTION_OPEN,
                                 "_Open", "_Cancel");
  GtkFileFilter *filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, "pipescope traces");
  gtk_file_filter_add_pattern (filter, "*.pptrace");
  gtk_file_filter_add_pattern (filter, "*.json");
  gtk_file_filter_add_pattern (filter, "*.json.gz");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_object_unref (filter);
  filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, "torch.profiler traces (one file per rank)");
  gtk_file_filter_add_pattern (filter, "*.json");
  gtk_file_filter_add_pattern (filter, "*.json.gz");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_object_unref (filter);
  gtk_file_chooser_set_select_multiple (GTK_FILE_CHOOSER (dialog), TRUE);
  filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, "All files");
  gtk_file_filter_add_pattern (filter, "*");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_object_unref (filter);
  g_signal_connect (dialog, "response", G_CALLBACK (open_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

/* ---- Attach ------------------------------------------------------------------------ */

/* The jobs running on this machine, which the window fills in and keeps
 * up to date while the dialog is open, or a remote job by address and
 * token (pp-attach-dialog.ui).  The window it attaches for is the one it
 * is transient for. */
#define PP_TYPE_ATTACH_DIALOG (pp_attach_dialog_get_type ())
G_DECLARE_FINAL_TYPE (PpAttachDialog, pp_attach_dialog, PP, ATTACH_DIALOG, AdwWindow)

struct _PpAttachDialog
{
  AdwWindow    parent_instance;
  GtkListBox  *list;
  GtkEditable *addr;
  GtkEditable *token;
  gboolean     listed;    /* the list shows the registry's jobs, not its error */
  guint        tick_id;
};

G_DEFINE_FINAL_TYPE (PpAttachDialog, pp_attach_dialog, ADW_TYPE_WINDOW)

typedef struct {
  PpJobInfo *jobs;
  size_t     n;
} JobList;

static void
job_list_free (gpointer p)
{
  JobList *l = p;
  free (l->jobs);
  g_free (l);
}

static void
list_jobs_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  JobList *l = g_new0 (JobList, 1);
  PpError err = { 0 };
  if (pp_registry_list (&l->jobs, &l->n, &err) != PP_OK)
    {
      job_list_free (l);
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", err.msg);
      return;
    }
  g_task_return_pointer (task, l, job_list_free);
}

static void
attach_row_activated (GtkButton *button, PpWindow *self)
{
  const char *pid = g_object_get_data (G_OBJECT (button), "pp-pid");
  pp_window_attach (self, pid, NULL);
  if (self->attach_dialog)
    gtk_window_destroy (GTK_WINDOW (self->attach_dialog));
}

static void
list_jobs_done (GObject *source, GAsyncResult *result, gpointer data)
{
  PpWindow *self = PP_WINDOW (source);
  g_autoptr (GError) error = NULL;
  JobList *l = g_task_propagate_pointer (G_TASK (result), &error);
  if (!self->attach_dialog)
    {
      if (l)
        job_list_free (l);
      return;
    }
  PpAttachDialog *d = PP_ATTACH_DIALOG (self->attach_dialog);
  GtkListBox *list = d->list;
  /* refreshed every 2 s: rebuild only when the jobs changed (a rebuild
   * loses the pointer's row and the keyboard focus) */
  if (l && d->listed && l->n == self->attach_pids->len)
    {
      gboolean same = TRUE;
      for (size_t i = 0; i < l->n && same; i++)
        same = l->jobs[i].pid == g_array_index (self->attach_pids, int, i);
      if (same)
        {
          job_list_free (l);
          return;
        }
    }
  d->listed = l != NULL;
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (list))))
    gtk_list_box_remove (list, child);
  g_array_set_size (self->attach_pids, 0);

  if (!l || l->n == 0)
    {
      GtkWidget *row = adw_action_row_new ();
      /* a row's title and subtitle are markup unless told: these are text */
      adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row),
                                     l ? "No running jobs" : error->message);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row),
                                   "Jobs started with pipescope-cli run appear here while they run");
      gtk_list_box_append (list, row);
    }
  for (size_t i = 0; l && i < l->n; i++)
    {
      const PpJobInfo *j = &l->jobs[i];
      g_autoptr (GDateTime) started = g_date_time_new_from_unix_local (j->start_unix_ns / 1000000000);
      g_autofree char *when = started ? g_date_time_format (started, "%H:%M:%S") : g_strdup ("?");
      g_autofree char *sub = g_strdup_printf ("pid %d · %s · started %s%s%s", (int) j->pid,
                                              j->schedule[0] ? j->schedule : "?", when,
                                              j->tcp[0] ? " · tcp " : "", j->tcp);
      GtkWidget *row = adw_action_row_new ();
      adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);   /* a job's name is text */
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), j->name);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), sub);
      gtk_widget_set_tooltip_text (row, j->cmdline);
      GtkWidget *button = gtk_button_new_with_label ("Attach");
      gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (button, "suggested-action");
      g_object_set_data_full (G_OBJECT (button), "pp-pid", g_strdup_printf ("%d", (int) j->pid), g_free);
      g_signal_connect (button, "clicked", G_CALLBACK (attach_row_activated), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), button);
      adw_action_row_set_activatable_widget (ADW_ACTION_ROW (row), button);
      gtk_list_box_append (list, row);
      int pid = j->pid;
      g_array_append_val (self->attach_pids, pid);
    }
  if (l)
    job_list_free (l);
}

static void
attach_refresh (PpWindow *self)
{
  g_autoptr (GTask) task = g_task_new (self, NULL, list_jobs_done, NULL);
  g_task_run_in_thread (task, list_jobs_thread);
}

/* While the dialog is open its list follows the registry: jobs that end
 * leave it, new ones appear. */
static gboolean
attach_tick (gpointer data)
{
  attach_refresh (PP_WINDOW (data));
  return G_SOURCE_CONTINUE;
}

static void
attach_dialog_refresh (PpAttachDialog *d)
{
  attach_refresh (PP_WINDOW (gtk_window_get_transient_for (GTK_WINDOW (d))));
}

static void
attach_remote (GtkButton *button, PpAttachDialog *d)
{
  PpWindow *self = PP_WINDOW (gtk_window_get_transient_for (GTK_WINDOW (d)));
  const char *a = gtk_editable_get_text (d->addr);
  if (!a || !*a)
    {
      pp_window_toast (self, "Give HOST:PORT of a job served with --listen");
      return;
    }
  pp_window_attach (self, a, gtk_editable_get_text (d->token));
  gtk_window_destroy (GTK_WINDOW (d));
}

static void
pp_attach_dialog_dispose (GObject *object)
{
  PpAttachDialog *d = PP_ATTACH_DIALOG (object);
  g_clear_handle_id (&d->tick_id, g_source_remove);
  gtk_widget_dispose_template (GTK_WIDGET (d), PP_TYPE_ATTACH_DIALOG);
  G_OBJECT_CLASS (pp_attach_dialog_parent_class)->dispose (object);
}

static void
pp_attach_dialog_class_init (PpAttachDialogClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  G_OBJECT_CLASS (klass)->dispose = pp_attach_dialog_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/pipescope/Pipescope/pp-attach-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, PpAttachDialog, list);
  gtk_widget_class_bind_template_child (widget_class, PpAttachDialog, addr);
  gtk_widget_class_bind_template_child (widget_class, PpAttachDialog, token);
  gtk_widget_class_bind_template_callback (widget_class, attach_dialog_refresh);
  gtk_widget_class_bind_template_callback (widget_class, attach_remote);
}

static void
pp_attach_dialog_init (PpAttachDialog *d)
{
  gtk_widget_init_template (GTK_WIDGET (d));
}

static void
attach_dialog_destroyed (GtkWidget *dialog, PpWindow *self)
{
  self->attach_dialog = NULL;
}

void
pp_window_show_attach_dialog (PpWindow *self)
{
  if (self->attach_dialog)
    {
      gtk_window_present (GTK_WINDOW (self->attach_dialog));
      return;
    }
  if (!self->attach_pids)
    self->attach_pids = g_array_new (FALSE, FALSE, sizeof (int));

  PpAttachDialog *d = g_object_new (PP_TYPE_ATTACH_DIALOG, "transient-for", self, NULL);
  g_signal_connect (d, "destroy", G_CALLBACK (attach_dialog_destroyed), self);
  self->attach_dialog = GTK_WIDGET (d);
  g_array_set_size (self->attach_pids, 0);
  attach_refresh (self);
  d->tick_id = g_timeout_add_seconds (2, attach_tick, self);
  gtk_window_present (GTK_WINDOW (d));
}

/* ---- Profile a command ---------------------------------------------------------------- */

static void
profile_response (AdwMessageDialog *d, const char *response, gpointer data)
{
  PpWindow *self = data;
  GtkEditable *entry = g_object_get_data (G_OBJECT (d), "entry");
  if (g_strcmp0 (response, "profile") != 0)
    return;
  g_autoptr (GError) error = NULL;
  const char *text = gtk_editable_get_text (entry);
  if (!pp_window_profile (self, text, &error))
    {
      g_autofree char *msg = g_strdup_printf ("Could not profile '%s': %s", text, error->message);
      pp_window_toast (self, msg);
    }
}

void
pp_window_show_profile_dialog (PpWindow *self)
{
  AdwMessageDialog *d = ADW_MESSAGE_DIALOG (adw_message_dialog_new (
    GTK_WINDOW (self), "Profile a Command",
    "Runs the command with pipescope's hook in every Python process it starts: each rank of a "
    "torch.distributed.pipelining job is a row, as it trains. Nothing in the job's code changes. "
    "Its trace is kept in ~/.local/share/pipescope/profiles ($XDG_DATA_HOME); Save Trace "
    "(Ctrl+Shift+S) copies it elsewhere."));
  GtkWidget *entry = gtk_entry_new ();
  gtk_entry_set_placeholder_text (GTK_ENTRY (entry), "torchrun --nproc-per-node 2 train.py");
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  adw_message_dialog_set_extra_child (d, entry);
  adw_message_dialog_add_responses (d, "cancel", "_Cancel", "profile", "_Profile", NULL);
  adw_message_dialog_set_response_appearance (d, "profile", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (d, "profile");
  adw_message_dialog_set_close_response (d, "cancel");
  g_object_set_data (G_OBJECT (d), "entry", entry);
  g_signal_connect (d, "response", G_CALLBACK (profile_response), self);
  gtk_window_present (GTK_WINDOW (d));
}

/* ---- Save screenshot ------------------------------------------------------------------ */

gboolean
pp_window_save_screenshot (PpWindow *self, const char *path, gboolean as_shown, int width,
                           int height, GError **error)
{
  PpRecording *run = self->shown[0];
  if (!run)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "Nothing to save: select a run first");
      return FALSE;
    }
  PpTimelineModel *m = pp_recording_get_model (run);
  /* a job of replicas: the rows as the timeline shows them (folded or not) */
  if (pp_timeline_widget_get_model (self->timeline[0]) == m)
    m = pp_timeline_widget_get_drawn_model (self->timeline[0]);
  PpTimelineView v;
  if (as_shown)
    {
      /* its range, and blocks or per-step bars as the window draws them */
      PpTimelineView shown;
      pp_timeline_widget_get_view (self->timeline[0], &shown);
      pp_timeline_view_as_shown (m, &shown, width, height, &v);
    }
  else
    {
      pp_timeline_view_init (&v, m, width, height);
      v.show_plan = gtk_toggle_button_get_active (self->plan_toggle);
    }
  /* A report gets the description and the legend, on white. */
  v.show_header = 1;
  v.show_legend = 1;
  v.dark = 0;
  v.hover_rank = -1;
  v.hover_index = -1;
  PpError err = { 0 };
  if (pp_timeline_export (m, &v, path, &err) != PP_OK)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", err.msg);
      return FALSE;
    }
  return TRUE;
}

/* What to draw (pp-screenshot-dialog.ui); Save… asks where, for the
 * window it is transient for. */
#define PP_TYPE_SCREENSHOT_DIALOG (pp_screenshot_dialog_get_type ())
G_DECLARE_FINAL_TYPE (PpScreenshotDialog, pp_screenshot_dialog, PP, SCREENSHOT_DIALOG, AdwWindow)

struct _PpScreenshotDialog
{
  AdwWindow            parent_instance;
  AdwPreferencesGroup *group;
  GtkDropDown         *format;    /* PNG, SVG, PDF */
  GtkDropDown         *range;     /* as shown, whole run */
  GtkSpinButton       *width;
  GtkSpinButton       *height;
  GtkDropDown         *paper;     /* custom, A4, Letter: sets the size */
};

G_DEFINE_FINAL_TYPE (PpScreenshotDialog, pp_screenshot_dialog, ADW_TYPE_WINDOW)

static const char *const shot_exts[] = { "png", "svg", "pdf" };

/* What the file chooser needs once it answers, taken when it opens: the
 * settings dialog may be gone by then (closed behind a chooser that is not
 * modal on every platform), and its widgets with it. */
typedef struct {
  PpWindow *self;        /* a reference */
  GWeakRef  dialog;
  guint     format;
  gboolean  as_shown;
  int       width, height;
} ShotRequest;

static void
shot_request_free (gpointer p)
{
  ShotRequest *r = p;
  g_object_unref (r->self);
  g_weak_ref_clear (&r->dialog);
  g_free (r);
}

static void
shot_file_response (GtkNativeDialog *chooser, int response, gpointer data)
{
  ShotRequest *r = g_object_get_data (G_OBJECT (chooser), "pp-request");
  PpWindow *self = r->self;
  if (response == GTK_RESPONSE_ACCEPT && self->shown[0])
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *path = g_file_get_path (file);
      /* The format is the file's extension; add the chosen one if it has none. */
      if (!g_str_has_suffix (path, ".png") && !g_str_has_suffix (path, ".svg") && !g_str_has_suffix (path, ".pdf"))
        {
          char *with = g_strconcat (path, ".", shot_exts[r->format], NULL);
          g_free (path);
          path = with;
        }
      g_autoptr (GError) error = NULL;
      g_autofree char *msg = NULL;
      if (pp_window_save_screenshot (self, path, r->as_shown, r->width, r->height, &error))
        msg = g_strdup_printf ("Saved %s", path);
      else
        msg = g_strdup (error->message);
      pp_window_toast (self, msg);
    }
  GtkWidget *dialog = g_weak_ref_get (&r->dialog);
  if (dialog)
    {
      gtk_window_destroy (GTK_WINDOW (dialog));
      g_object_unref (dialog);
    }
  g_object_unref (chooser);
}

static void
shot_save_clicked (GtkButton *button, PpScreenshotDialog *d)
{
  GtkFileChooserNative *chooser =
    gtk_file_chooser_native_new ("Save Screenshot", GTK_WINDOW (d), GTK_FILE_CHOOSER_ACTION_SAVE,
                                 "_Save", "_Cancel");
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  ShotRequest *r = g_new0 (ShotRequest, 1);
  r->self = g_object_ref (PP_WINDOW (gtk_window_get_transient_for (GTK_WINDOW (d))));
  g_weak_ref_init (&r->dialog, d);
  r->format = gtk_drop_down_get_selected (d->format);
  r->as_shown = gtk_drop_down_get_selected (d->range) == 0;
  r->width = gtk_spin_button_get_value_as_int (d->width);
  r->height = gtk_spin_button_get_value_as_int (d->height);
  g_object_set_data_full (G_OBJECT (chooser), "pp-request", r, shot_request_free);
  g_autofree char *name = g_strdup_printf ("pipescope-timeline.%s", shot_exts[r->format]);
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), name);
  /* Pictures (or home), not wherever the app was started from */
  {
    const char *dir = g_get_user_special_dir (G_USER_DIRECTORY_PICTURES);
    if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
      dir = g_get_home_dir ();
    g_autoptr (GFile) folder = g_file_new_for_path (dir);
    gtk_file_chooser_set_current_folder (GTK_FILE_CHOOSER (chooser), folder, NULL);
  }
  g_signal_connect (chooser, "response", G_CALLBACK (shot_file_response), NULL);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

static void
pp_screenshot_dialog_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), PP_TYPE_SCREENSHOT_DIALOG);
  G_OBJECT_CLASS (pp_screenshot_dialog_parent_class)->dispose (object);
}

static void
pp_screenshot_dialog_class_init (PpScreenshotDialogClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  G_OBJECT_CLASS (klass)->dispose = pp_screenshot_dialog_dispose;
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/pipescope/Pipescope/pp-screenshot-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, group);
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, format);
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, range);
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, width);
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, height);
  gtk_widget_class_bind_template_child (widget_class, PpScreenshotDialog, paper);
  gtk_widget_class_bind_template_callback (widget_class, shot_save_clicked);
  gtk_widget_class_bind_template_callback (widget_class, gtk_window_destroy);
}

/* A paper: its landscape page at 96 px an inch, which is what a PDF page
 * of that size holds (pp_timeline_export draws PDFs at 96 dpi). */
static void
shot_paper_changed (GtkDropDown *paper, GParamSpec *pspec, PpScreenshotDialog *d)
{
  static const int size[][2] = { { 0, 0 }, { 1123, 794 }, { 1056, 816 } };
  guint i = gtk_drop_down_get_selected (paper);
  if (i == 0 || i >= G_N_ELEMENTS (size))
    return;
  gtk_spin_button_set_value (d->width, size[i][0]);
  gtk_spin_button_set_value (d->height, size[i][1]);
}

static void
pp_screenshot_dialog_init (PpScreenshotDialog *d)
{
  gtk_widget_init_template (GTK_WIDGET (d));
  g_signal_connect (d->paper, "notify::selected", G_CALLBACK (shot_paper_changed), d);
}

void
pp_window_show_screenshot_dialog (PpWindow *self)
{
  if (!self->shown[0])
    {
      pp_window_toast (self, "Nothing to save: select a run first");
      return;
    }
  PpScreenshotDialog *d = g_object_new (PP_TYPE_SCREENSHOT_DIALOG, "transient-for", self, NULL);
  adw_preferences_group_set_description (d->group,
    self->shown[1] ? "The upper run's timeline (while comparing, one run a picture) with its "
                     "description and a legend, drawn by the same code as the window."
                   : "The timeline with the run's description and a legend, drawn by the same "
                     "code as the window.");
  gtk_window_present (GTK_WINDOW (d));
}

/* ---- Export Chrome JSON ------------------------------------------------------------------- */

static void
export_done (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (PpWindow) self = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *err_text = NULL;
  GSubprocess *child = G_SUBPROCESS (source);
  const char *out = g_object_get_data (source, "pp-out");
  g_autofree char *msg = NULL;
  if (!g_subprocess_communicate_utf8_finish (child, result, NULL, &err_text, &error))
    msg = g_strdup (error->message);
  else if (!g_subprocess_get_successful (child))
    msg = g_strdup_printf ("Export failed: %s", err_text && *err_text ? g_strstrip (err_text) : "?");
  else
    msg = g_strdup_printf ("Exported %s", out);
  pp_window_toast (self, msg);
}

void
pp_window_export_chrome_to (PpWindow *self, const char *out)
{
  PpRecording *run = self->shown[0];
  if (run && pp_recording_get_trace_path (run) && self->cli_path)
    {
      g_autoptr (GError) error = NULL;
      GSubprocess *child = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                                             &error, self->cli_path, "export", pp_recording_get_trace_path (run),
                                             "--format", "chrome", "-o", out, NULL);
      if (!child)
        pp_window_toast (self, error->message);
      else
        {
          g_object_set_data_full (G_OBJECT (child), "pp-out", g_strdup (out), g_free);
          g_subprocess_communicate_utf8_async (child, NULL, NULL, export_done, g_object_ref (self));
          g_object_unref (child);
        }
    }
}

static void
export_response (GtkNativeDialog *chooser, int response, PpWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *out = g_file_get_path (file);
      if (out)
        pp_window_export_chrome_to (self, out);
    }
  g_object_unref (chooser);
}

void
pp_window_export_chrome (PpWindow *self)
{
  PpRecording *run = self->shown[0];
  if (!run || !pp_recording_get_trace_path (run))
    {
      pp_window_toast (self, "Nothing to export: select a run with a trace");
      return;
    }
  if (!self->cli_path)
    {
      pp_window_toast (self, "pipescope-cli not found beside pipescope or on PATH");
      return;
    }
  GtkFileChooserNative *chooser =
    gtk_file_chooser_native_new ("Export Chrome Trace JSON", GTK_WINDOW (self),
                                 GTK_FILE_CHOOSER_ACTION_SAVE, "_Export", "_Cancel");
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), "pipescope-trace.json");
  g_signal_connect (chooser, "response", G_CALLBACK (export_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}
