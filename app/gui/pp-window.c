/* pp-window.c — the window: run controls with validation before the run,
 * the session's runs, one or two timelines sharing a time scale, panels. */
#include "pp-window-private.h"
#include "pp-timeline-fold.h"

#include "pp-application.h"
#include "pp-import-open.h"
#include "pp-schedule.h"
#include "pp-simulate.h"

G_DEFINE_FINAL_TYPE (PpWindow, pp_window, ADW_TYPE_APPLICATION_WINDOW)

/* ---- helpers ----------------------------------------------------------------- */

void
pp_window_toast (PpWindow *self, const char *message)
{
  /* An AdwToast's title is Pango markup (libadwaita 1.2 has no switch):
   * a message is text, and one that names `<action>` or a file with '&'
   * must show as written, not vanish with a markup warning. */
  g_autofree char *text = g_markup_escape_text (message, -1);
  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_timeout (toast, 4);
  adw_toast_overlay_add_toast (self->toasts, toast);
}

PpRecording *
pp_window_get_shown_run (PpWindow *self)
{
  return self->shown[0];
}

/* A run as a timeline's label and the compare table name it: where it
 * comes from (its file, its job) and what it ran, so that two runs of one
 * schedule are told apart. */
char *
pp_window_run_name (PpRecording *run)
{
  const char *src = pp_recording_get_source (run), *title = pp_recording_get_title (run);
  if (g_strcmp0 (src, title) == 0)
    return g_strdup (title);
  return g_strdup_printf ("%s — %s", src, title);
}

static const char *
pp_window_schedule_name (PpWindow *self)
{
  GtkStringObject *item = gtk_drop_down_get_selected_item (self->schedule);
  return item ? gtk_string_object_get_string (item) : "1F1B";
}

static void
pp_window_update_subtitle (PpWindow *self)
{
  g_autofree char *sub = NULL;
  PpRecording *run = self->shown[0];
  if (run && self->shown[1])
    {
      g_autofree char *a = pp_window_run_name (run), *b = pp_window_run_name (self->shown[1]);
      sub = g_strdup_printf ("%s  vs  %s", a, b);
    }
  else if (run)
    sub = g_strdup_printf ("%s — %s", pp_recording_get_title (run), pp_recording_get_status (run));
  else
    sub = g_strdup ("no run");
  adw_window_title_set_subtitle (self->title, sub);

  gboolean any_child = FALSE;
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
    {
      g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      if (pp_recording_child_running (r) || pp_recording_get_state (r) == PP_RECORDING_LIVE)
        any_child = TRUE;
    }
  GAction *stop = g_action_map_lookup_action (G_ACTION_MAP (self), "stop");
  g_simple_action_set_enabled (G_SIMPLE_ACTION (stop), any_child);
}

/* ---- validation before the run --------------------------------------------- */

/* The description of the (upper) run on screen, or NULL. */
static const PpTraceDescription *
shown_description (PpWindow *self)
{
  return self->shown[0] ? pp_timeline_model_description (pp_recording_get_model (self->shown[0])) : NULL;
}

static void
pp_window_validate (PpWindow *self)
{
  const char *name = pp_window_schedule_name (self);
  const PpScheduleInfo *info = pp_schedule_lookup (name);
  int P = gtk_spin_button_get_value_as_int (self->ranks);
  int M = gtk_spin_button_get_value_as_int (self->microbatches);
  int V = gtk_spin_button_get_value_as_int (self->stages_per_rank);
  PpSchedule *s = NULL;
  PpError err = { 0 };

  if (info && !info->takes_v)
    {
      gtk_spin_button_set_value (self->stages_per_rank, info->default_v);
      V = info->default_v;
    }
  gtk_widget_set_sensitive (GTK_WIDGET (self->stages_per_rank), info && info->takes_v);

  PpStatus st = pp_schedule_generate (name, P, M, info && info->takes_v ? V : 0, &s, &err);
  g_autofree char *text = NULL;
  if (st == PP_OK)
    {
      /* What the plan promises under unit costs (F=1, B=2, W=1). */
      PpCostModel *cost = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0);
      PpSimulation *sim = NULL;
      if (cost && pp_simulate (s, cost, &sim, NULL) == PP_OK)
        text = g_strdup_printf ("Ready: %d stages, bubble %.1f%% (%s, F=1, B=2)",
                                s->n_stages, 100.0 * sim->bubble, pp_analysis_plan_label (PP_ANALYSIS_PLAN_UNIT_COSTS));
      else
        text = g_strdup_printf ("Ready: %d stages", s->n_stages);
      pp_simulation_free (sim);
      pp_cost_model_free (cost);
      pp_schedule_free (s);
      /* the run shown is someone's PyTorch job: Run is not a rerun of it */
      const PpTraceDescription *d = shown_description (self);
      if (pp_timeline_description_is_pytorch (d))
        {
          char *more = g_strdup_printf ("%s. Shown: a PyTorch job; Run trains pipescope's model", text);
          g_free (text);
          text = more;
        }
      gtk_image_set_from_icon_name (self->verdict_icon, "emblem-ok-symbolic");
      gtk_widget_remove_css_class (GTK_WIDGET (self->verdict), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->verdict_icon), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->verdict_icon), "success");
    }
  else
    {
      text = g_strdup (err.msg[0] ? err.msg : pp_status_message (st));
      gtk_image_set_from_icon_name (self->verdict_icon, "dialog-warning-symbolic");
      gtk_widget_add_css_class (GTK_WIDGET (self->verdict), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->verdict_icon), "success");
      gtk_widget_add_css_class (GTK_WIDGET (self->verdict_icon), "error");
    }
  gtk_label_set_text (self->verdict, text);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->verdict), text);
  self->controls_ok = st == PP_OK;
  GAction *run = g_action_map_lookup_action (G_ACTION_MAP (self), "run");
  g_simple_action_set_enabled (G_SIMPLE_ACTION (run), self->controls_ok);
}

static void
on_control_changed (PpWindow *self)
{
  /* set by hand: the app's own model again */
  if (!self->applying_whatif)
    memset (&self->whatif_model, 0, sizeof self->whatif_model);
  pp_window_validate (self);
}

/* ---- showing runs -------------------------------------------------------------- */

/* The panels that analyse the run (Statistics, Why, Stragglers, What if's
 * costs, Memory) and the Compare table on a worker (pp-window-analysis.c),
 * shown when it is done; the others here, now. */
static void
pp_window_update_panels (PpWindow *self)
{
  PpRecording *run = self->shown[0];
  if (!run)
    return;
  PpTimelineModel *m = pp_recording_get_model (run);
  pp_window_analysis_start (self);
  if (self->shown[1])
    pp_loss_chart_update_compare (self->loss, m, pp_recording_get_title (run),
                                  pp_recording_get_model (self->shown[1]), pp_recording_get_title (self->shown[1]));
  else
    pp_loss_chart_update (self->loss, m);
  pp_span_table_update (self->span_table);
  self->panels_dirty = FALSE;
}

/* The panels recompute over the whole run (statistics, measured costs), so
 * their cost grows with a live run: after an update that took d of the
 * main loop (the analyses' snapshot, the charts), the next waits at least
 * 10 d, which keeps them under a tenth of the main loop however long the
 * job streams; the analyses themselves run on a worker, one at a time. */
static gboolean
pp_window_panels_tick (gpointer data)
{
  PpWindow *self = data;
  static gint64 next_allowed;   /* one main loop: shared by the windows */
  gint64 now = g_get_monotonic_time ();
  if (self->panels_dirty && now >= next_allowed)
    {
      pp_window_update_panels (self);
      next_allowed = now + 10 * (g_get_monotonic_time () - now);
    }
  return G_SOURCE_CONTINUE;
}

/* The controls say what the run on screen ran (its description), once it
 * is known: editable from there, and Run starts what they then say. */
static void
pp_window_controls_from_run (PpWindow *self, PpRecording *run)
{
  const PpTraceDescription *d;
  const PpScheduleInfo *info;

  if (run == NULL || run == self->controls_from)
    return;
  d = pp_timeline_model_description (pp_recording_get_model (run));
  if (d == NULL || (info = pp_schedule_lookup (d->schedule)) == NULL)
    return;   /* not yet (a live run's comes first thing), or not one of ours */
  self->controls_from = run;
  GListModel *names = gtk_drop_down_get_model (self->schedule);
  for (guint i = 0; i < g_list_model_get_n_items (names); i++)
    {
      g_autoptr (GtkStringObject) s = g_list_model_get_item (names, i);
      if (strcmp (gtk_string_object_get_string (s), info->name) == 0)
        gtk_drop_down_set_selected (self->schedule, i);
    }
  if (d->n_ranks > 0)
    gtk_spin_button_set_value (self->ranks, d->n_ranks);
  if (d->n_microbatches > 0)
    gtk_spin_button_set_value (self->microbatches, d->n_microbatches);
  if (info->takes_v && d->n_virtual > 0)
    gtk_spin_button_set_value (self->stages_per_rank, d->n_virtual);
  GListModel *backends = gtk_drop_down_get_model (self->backend);
  for (guint i = 0; i < g_list_model_get_n_items (backends); i++)
    {
      g_autoptr (GtkStringObject) s = g_list_model_get_item (backends, i);
      if (strcmp (gtk_string_object_get_string (s), d->backend) == 0)
        gtk_drop_down_set_selected (self->backend, i);
    }
}

/* The replicas switch: shown for a job of replicas, listing Fold, All and
 * each replica; it follows the upper timeline (a label click, Ctrl+U). */
static void
update_replicas_switch (PpWindow *self)
{
  PpTimelineWidget *t = self->timeline[0];
  PpTimelineModel *m = pp_timeline_widget_get_model (t);
  /* the replicas by the dp values the trace holds: one node's trace may
   * hold dp 4 and 5 of 8 */
  int32_t *dps = NULL;
  int D = pp_timeline_widget_has_replicas (t) ? pp_timeline_model_replica_dps (m, &dps) : 0;
  if (D < 0)
    D = 0;
  if (D != self->replicas_dp || (D > 0 && memcmp (dps, self->replica_dps, (size_t) D * sizeof *dps) != 0))
    {
      GtkStringList *items = gtk_string_list_new (NULL);
      gtk_string_list_append (items, "Fold replicas");
      gtk_string_list_append (items, "A row a process");
      for (int k = 0; k < D; k++)
        {
          char name[32];
          g_snprintf (name, sizeof name, "Replica %d", dps[k]);
          gtk_string_list_append (items, name);
        }
      self->replicas_dp = D;
      free (self->replica_dps);
      self->replica_dps = dps;
      dps = NULL;
      gtk_drop_down_set_model (self->replicas_switch, G_LIST_MODEL (items));
      g_object_unref (items);
      gtk_widget_set_visible (GTK_WIDGET (self->replicas_switch), D > 0);
    }
  free (dps);
  int r = pp_timeline_widget_get_replicas (t);
  guint want = r == -2 ? 1 : 0;
  for (int k = 0; r >= 0 && k < self->replicas_dp; k++)
    if (self->replica_dps[k] == r)
      want = (guint) k + 2;
  if (D > 0 && gtk_drop_down_get_selected (self->replicas_switch) != want)
    gtk_drop_down_set_selected (self->replicas_switch, want);
}

static void
on_replicas_selected (GtkDropDown *dd, GParamSpec *pspec, PpWindow *self)
{
  guint i = gtk_drop_down_get_selected (dd);
  if (i == GTK_INVALID_LIST_POSITION || self->replicas_dp == 0 || i >= (guint) self->replicas_dp + 2)
    return;
  int want = i == 0 ? -1 : i == 1 ? -2 : self->replica_dps[i - 2];
  if (want == pp_timeline_widget_get_replicas (self->timeline[0]))
    return;
  pp_timeline_widget_set_replicas (self->timeline[0], want);
}

/* The Stragglers tab's cell clicked: that process's replica's rows. */
static void
on_straggler_open (PpHeatmapView *view, int process, int pp, int dp, PpWindow *self)
{
  if (!pp_timeline_widget_has_replicas (self->timeline[0]))
    return;
  pp_timeline_widget_set_replicas (self->timeline[0], dp);
  update_replicas_switch (self);
}

/* Ctrl+U: every rank unfolded, or folded again. */
static void
action_unfold_replicas (GSimpleAction *a, GVariant *p, gpointer data)
{
  PpWindow *self = data;
  if (!pp_timeline_widget_has_replicas (self->timeline[0]))
    return;
  pp_timeline_widget_set_replicas (self->timeline[0],
                                   pp_timeline_widget_get_replicas (self->timeline[0]) == -2 ? -1 : -2);
  update_replicas_switch (self);
}

/* issue 37: the banner over the timeline names where the shown job is
 * stuck (docs/stuck.md): a trace that ended so, or a live job on which no
 * action has ended for as long as runtime/pp-stuck.c's rule says (10
 * median steps, at least 30 s: pp_timeline_model_stuck_after_s); the
 * line runtime/pp-stuck.c says. */
static void
update_stuck_banner (PpWindow *self)
{
  PpRecording *run = self->shown[0];
  PpTimelineModel *m = run != NULL ? pp_recording_get_model (run) : NULL;
  char line[2048] = "";
  gboolean live = run != NULL && pp_recording_get_state (run) == PP_RECORDING_LIVE;
  double quiet = live ? pp_timeline_model_stuck_after_s (m) : 0;
  for (int i = 0; i < 2; i++)   /* the timeline draws the waits by the same rule */
    pp_timeline_widget_set_stuck_live (self->timeline[i], live);
  if (m != NULL && pp_timeline_model_stuck (m, quiet, line, sizeof line) != PP_STUCK_NONE)
    {
      size_t n = strlen (line);
      while (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
      gtk_label_set_text (self->stuck_banner, line);
      gtk_widget_set_visible (GTK_WIDGET (self->stuck_banner), TRUE);
    }
  else
    gtk_widget_set_visible (GTK_WIDGET (self->stuck_banner), FALSE);
}

static void
on_run_changed (PpRecording *run, PpWindow *self)
{
  if (run == self->shown[0])
    pp_window_controls_from_run (self, run);
  if (run == self->shown[0])
    update_stuck_banner (self);
  for (int i = 0; i < 2; i++)
    if (self->shown[i] == run)
      pp_timeline_widget_model_changed (self->timeline[i]);
  update_replicas_switch (self);
  if (run == self->shown[0] && self->waiting)
    pp_window_update_waiting (self);
  /* the loss chart draws the compared run too */
  if (self->shown[0] == run || self->shown[1] == run)
    self->panels_dirty = TRUE;
}

static void pp_window_remove_run (PpWindow *self, PpRecording *run);

typedef struct { PpWindow *self; PpRecording *run; } RemoveLater;

static gboolean
pp_window_remove_failed (gpointer data)
{
  RemoveLater *r = data;
  if (r->self->runs)
    pp_window_remove_run (r->self, r->run);
  return G_SOURCE_REMOVE;
}

static void
remove_later_free (gpointer data)
{
  RemoveLater *r = data;
  g_object_unref (r->self);
  g_object_unref (r->run);
  g_free (r);
}

static void
on_run_notify (PpRecording *run, GParamSpec *pspec, PpWindow *self)
{
  for (int i = 0; i < 2; i++)
    if (self->shown[i] == run)
      {
        pp_timeline_widget_set_live (self->timeline[i], pp_recording_get_state (run) == PP_RECORDING_LIVE);
        g_autofree char *name = pp_window_run_name (run);
        gtk_label_set_text (self->timeline_label[i], name);
      }
  if (self->shown[0] == run)
    {
      pp_window_update_waiting (self);
      self->panels_dirty = TRUE;
      if (self->shown[1])
        {
          g_autofree char *what = g_strdup_printf ("Statistics and What if of the upper run, %s (Loss shows both)",
                                                   pp_recording_get_title (run));
          gtk_label_set_text (self->panels_label, what);
        }
    }
  pp_window_update_subtitle (self);
  /* An attach that failed or ended before anything arrived (a refused
   * connection, something that is not a job) leaves nothing to look at:
   * its toast said why, and the row would only clutter the list. */
  if ((pp_recording_get_state (run) == PP_RECORDING_FAILED || pp_recording_get_state (run) == PP_RECORDING_ENDED)
      && !pp_recording_is_child (run)
      && pp_timeline_model_n_spans_total (pp_recording_get_model (run)) == 0
      && pp_timeline_model_description (pp_recording_get_model (run)) == NULL)
    {
      /* not while the run is emitting */
      RemoveLater *r = g_new (RemoveLater, 1);
      r->self = g_object_ref (self);
      r->run = g_object_ref (run);
      g_idle_add_full (G_PRIORITY_DEFAULT, pp_window_remove_failed, r, remove_later_free);
    }
}

static void
on_run_message (PpRecording *run, const char *message, PpWindow *self)
{
  pp_window_toast (self, message);
}

static void
pp_window_show_runs (PpWindow *self, PpRecording *a, PpRecording *b)
{
  /* another run's analysis, another pair's comparison, is not shown */
  pp_window_analysis_reset (self, a, b);
  self->shown[0] = a;
  self->shown[1] = b;
  pp_window_controls_from_run (self, a);
  pp_window_validate (self);   /* its note follows the run shown */
  for (int i = 0; i < 2; i++)
    {
      PpRecording *r = self->shown[i];
      pp_timeline_widget_set_model (self->timeline[i], r ? pp_recording_get_model (r) : NULL);
      pp_timeline_widget_set_live (self->timeline[i], r && pp_recording_get_state (r) == PP_RECORDING_LIVE);
      if (r)
        {
          g_autofree char *name = pp_window_run_name (r);
          gtk_label_set_text (self->timeline_label[i], name);
          pp_timeline_widget_zoom_to_fit (self->timeline[i]);
        }
    }
  update_replicas_switch (self);
  update_stuck_banner (self);
  /* Comparing: the timelines take most of the height, the panels the rest. */
  gboolean comparing = gtk_widget_get_visible (self->timeline_box[1]);
  if (b && !comparing)
    {
      int h = gtk_widget_get_height (GTK_WIDGET (self->vpaned));
      self->single_position = gtk_paned_get_position (self->vpaned);
      gtk_paned_set_position (self->vpaned, MAX (self->single_position, (h > 0 ? h : 870) - 190));
    }
  else if (!b && comparing && self->single_position > 0)
    gtk_paned_set_position (self->vpaned, self->single_position);
  gtk_widget_set_visible (self->timeline_box[1], b != NULL);
  /* comparing: the table of what differs, shown as the comparison starts */
  adw_view_stack_page_set_visible (self->compare_page, b != NULL);
  if (b != NULL && !comparing)
    adw_view_stack_set_visible_child_name (self->panels, "compare");
  /* comparing: the panels describe the upper run; say so */
  if (b != NULL)
    {
      g_autofree char *what = g_strdup_printf ("Statistics and What if of the upper run, %s (Loss shows both)",
                                               pp_recording_get_title (a));
      gtk_label_set_text (self->panels_label, what);
    }
  gtk_widget_set_visible (GTK_WIDGET (self->panels_label), b != NULL);
  gtk_widget_set_visible (GTK_WIDGET (self->timeline_label[0]), b != NULL);
  if (a)
    pp_window_reset_empty_page (self);
  gtk_stack_set_visible_child_name (self->main_stack, a ? "timeline" : "empty");
  pp_window_update_waiting (self);
  if (a)
    pp_window_update_panels (self);
  pp_window_update_subtitle (self);
}

/* A click shows one run; Ctrl-click adds a second to compare (or takes one
 * away).  A third Ctrl-click replaces the earliest of the two picks. */
static void
on_selected_rows_changed (GtkListBox *list, PpWindow *self)
{
  GPtrArray *picked = g_ptr_array_new ();   /* borrowed: the store holds the runs */
  GPtrArray *rows = g_ptr_array_new ();
  for (int i = 0;; i++)
    {
      GtkListBoxRow *row = gtk_list_box_get_row_at_index (list, i);
      if (!row)
        break;
      if (!gtk_list_box_row_is_selected (row))
        continue;
      PpRecording *run = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      g_object_unref (run);
      g_ptr_array_add (picked, run);
      g_ptr_array_add (rows, row);
    }
  /* every run that joins the selection gets the next pick number */
  for (guint i = 0; i < picked->len; i++)
    if (picked->pdata[i] != self->shown[0] && picked->pdata[i] != self->shown[1])
      g_object_set_data (G_OBJECT (picked->pdata[i]), "pp-pick", GUINT_TO_POINTER (++self->pick_seq));
  PpRecording *a = picked->len > 0 ? picked->pdata[0] : NULL;
  PpRecording *b = picked->len > 1 ? picked->pdata[1] : NULL;
  if (picked->len > 2 && !self->syncing_selection)
    {
      /* keep the two latest picks, upper one first */
      guint best = 0, second = 0;
      gint i1 = -1, i2 = -1;
      for (guint i = 0; i < picked->len; i++)
        {
          guint seq = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (picked->pdata[i]), "pp-pick"));
          if (i1 < 0 || seq > best)
            {
              second = best;
              i2 = i1;
              best = seq;
              i1 = (gint) i;
            }
          else if (i2 < 0 || seq > second)
            {
              second = seq;
              i2 = (gint) i;
            }
        }
      self->syncing_selection = TRUE;
      for (guint i = 0; i < picked->len; i++)
        if ((gint) i != i1 && (gint) i != i2)
          gtk_list_box_unselect_row (list, rows->pdata[i]);
      self->syncing_selection = FALSE;
      a = picked->pdata[MIN (i1, i2)];
      b = picked->pdata[MAX (i1, i2)];
    }
  g_ptr_array_unref (picked);
  g_ptr_array_unref (rows);
  if (!self->syncing_selection)
    pp_window_show_runs (self, a, b);
}

/* Where a run's time counts from when two are compared: its first step
 * (set-up differs from run to run and says nothing of the schedule), or
 * its start when it has no steps. */
static gint64
compare_origin (PpRecording *run)
{
  PpTimelineModel *m = pp_recording_get_model (run);
  if (pp_timeline_model_n_steps (m) > 0)
    return pp_timeline_model_step_starts (m)[0];
  return pp_timeline_model_start_ns (m);
}

/* Two runs share the time scale: offsets from each run's first step. */
static void
on_range_changed (PpTimelineWidget *widget, PpWindow *self)
{
  if (widget == self->timeline[0])
    gtk_widget_queue_draw (self->path_overlay);
  if (self->syncing_range || !self->shown[1])
    return;
  int from = widget == self->timeline[0] ? 0 : 1, to = 1 - from;
  gint64 t0, t1;
  pp_timeline_widget_get_range (widget, &t0, &t1);
  gint64 off = compare_origin (self->shown[to]) - compare_origin (self->shown[from]);
  self->syncing_range = TRUE;
  pp_timeline_widget_set_range (self->timeline[to], t0 + off, t1 + off);
  self->syncing_range = FALSE;
}

/* The critical path over the upper timeline: the same view, so the same
 * place as its blocks. */
static void
draw_path_overlay (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  PpWindow *self = data;
  PpTimelineModel *m = pp_timeline_widget_get_model (self->timeline[0]);
  PpTimelineView v;
  (void) area;
  if (m == NULL || !self->shown[0] || pp_recording_get_model (self->shown[0]) != m)
    return;
  if (!pp_why_panel_is_for (self->why, m))
    return;   /* its analysis has not come yet: not the previous run's path */
  pp_timeline_widget_get_view (self->timeline[0], &v);
  v.width = width;
  v.height = height;
  v.critical_path = pp_why_panel_get_critical_path (self->why, &v.n_critical_path);
  /* over the rows drawn (a job of replicas: folded, or one replica); rows
   * of processes are no pipeline's, and the path is */
  PpTimelineModel *drawn = pp_timeline_widget_get_drawn_model (self->timeline[0]);
  if (pp_timeline_model_n_ranks (drawn) != pp_timeline_model_n_ranks (m))
    return;
  pp_timeline_render_critical_path (cr, drawn, &v);
}

static void
pp_window_zoom_to_fit (PpWindow *self)
{
  if (!self->shown[0])
    return;
  if (!self->shown[1])
    {
      pp_timeline_widget_zoom_to_fit (self->timeline[0]);
      return;
    }
  /* both from their first step, as long as the longer one */
  gint64 span = 0;
  for (int i = 0; i < 2; i++)
    {
      PpTimelineModel *m = pp_recording_get_model (self->shown[i]);
      span = MAX (span, pp_timeline_model_end_ns (m) - compare_origin (self->shown[i]));
    }
  self->syncing_range = TRUE;
  for (int i = 0; i < 2; i++)
    {
      gint64 s = compare_origin (self->shown[i]);
      pp_timeline_widget_set_range (self->timeline[i], s, s + MAX (span, 1));
    }
  self->syncing_range = FALSE;
}

/* Takes run out of the list (and out of the timelines): a job of ours
 * still running is stopped as the run goes (PpRecording's dispose). */
static void
pp_window_remove_run (PpWindow *self, PpRecording *run)
{
  guint pos;
  if (!g_list_store_find (self->runs, run, &pos))
    return;
  /* A job of ours stops (its wait and stderr reader keep the run alive
   * until it exits, so dispose would not), an attach lets go. */
  pp_recording_stop (run);
  GtkListBoxRow *row = gtk_list_box_get_row_at_index (self->run_list, (int) pos);
  if (row && gtk_list_box_row_is_selected (row))
    gtk_list_box_unselect_row (self->run_list, row);
  /* nothing borrowed may outlive it */
  if (self->controls_from == run)
    self->controls_from = NULL;
  if (self->shown[0] == run || self->shown[1] == run)
    pp_window_show_runs (self, self->shown[0] == run ? self->shown[1] : self->shown[0], NULL);
  g_list_store_remove (self->runs, pos);
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->runs));
  if (n > 0 && gtk_list_box_get_selected_rows (self->run_list) == NULL)
    gtk_list_box_select_row (self->run_list, gtk_list_box_get_row_at_index (self->run_list, (int) n - 1));
}

static void
on_remove_clicked (GtkButton *button, PpWindow *self)
{
  PpRecording *run = g_object_get_data (G_OBJECT (button), "pp-run");
  if (run)
    pp_window_remove_run (self, run);
}

static GtkWidget *
pp_window_create_row (gpointer item, gpointer data)
{
  PpRecording *run = item;
  PpWindow *self = data;
  GtkWidget *row = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  gtk_widget_set_hexpand (box, TRUE);
  gtk_widget_set_margin_top (row, 6);
  gtk_widget_set_margin_bottom (row, 6);
  gtk_widget_set_margin_start (row, 6);
  gtk_widget_set_margin_end (row, 2);
  GtkWidget *title = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_ellipsize (GTK_LABEL (title), PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (title, "heading");
  GtkWidget *status = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (status), 0);
  gtk_label_set_ellipsize (GTK_LABEL (status), PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (status, "caption");
  gtk_widget_add_css_class (status, "dim-label");
  g_object_bind_property (run, "title", title, "label", G_BINDING_SYNC_CREATE);
  g_object_bind_property (run, "title", box, "tooltip-text", G_BINDING_SYNC_CREATE);
  g_object_bind_property (run, "status", status, "label", G_BINDING_SYNC_CREATE);
  gtk_box_append (GTK_BOX (box), title);
  gtk_box_append (GTK_BOX (box), status);
  gtk_box_append (GTK_BOX (row), box);
  GtkWidget *remove = gtk_button_new_from_icon_name ("window-close-symbolic");
  gtk_widget_add_css_class (remove, "flat");
  gtk_widget_add_css_class (remove, "circular");
  gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (remove, "Remove from the list (a run started here stops)");
  g_object_set_data (G_OBJECT (remove), "pp-run", run);   /* the row dies with the run */
  g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_clicked), self);
  gtk_box_append (GTK_BOX (row), remove);
  return row;
}

static gboolean
pp_window_scroll_runs_to_end (gpointer data)
{
  PpWindow *self = data;
  if (self->run_list == NULL)
    return G_SOURCE_REMOVE;
  GtkWidget *scroll = gtk_widget_get_ancestor (GTK_WIDGET (self->run_list), GTK_TYPE_SCROLLED_WINDOW);
  GtkAdjustment *adj = scroll ? gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (scroll)) : NULL;
  if (adj)
    gtk_adjustment_set_value (adj, gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj));
  return G_SOURCE_REMOVE;
}

/* The run joins the list at pos (the end where past it), selected. */
static void
pp_window_add_run_at (PpWindow *self, PpRecording *run, guint pos)
{
  g_signal_connect_object (run, "changed", G_CALLBACK (on_run_changed), self, 0);
  g_signal_connect_object (run, "notify", G_CALLBACK (on_run_notify), self, 0);
  g_signal_connect_object (run, "message", G_CALLBACK (on_run_message), self, 0);
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->runs));
  if (pos > n)
    pos = n;
  g_list_store_insert (self->runs, pos, run);
  gtk_list_box_unselect_all (self->run_list);
  gtk_list_box_select_row (self->run_list, gtk_list_box_get_row_at_index (self->run_list, (int) pos));
  /* a new last row: show it once the list has its height */
  if (pos == n)
    g_idle_add_full (G_PRIORITY_LOW, pp_window_scroll_runs_to_end, g_object_ref (self), g_object_unref);
}

static void
pp_window_add_run (PpWindow *self, PpRecording *run)
{
  pp_window_add_run_at (self, run, G_MAXUINT);
}

/* ---- what the window does ------------------------------------------------------- */

void
pp_window_run (PpWindow *self)
{
  g_return_if_fail (PP_IS_WINDOW (self));
  if (!self->controls_ok)
    {
      pp_window_toast (self, gtk_label_get_text (self->verdict));
      return;
    }
  if (!self->cli_path)
    {
      pp_window_toast (self, "pipescope-cli not found beside pipescope or on PATH");
      return;
    }
  /* One job of ours at a time: the current one stops, its data stays. */
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
    {
      g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      if (pp_recording_child_running (r))
        pp_recording_stop (r);
    }

  const char *name = pp_window_schedule_name (self);
  const PpScheduleInfo *info = pp_schedule_lookup (name);
  GtkStringObject *be = gtk_drop_down_get_selected_item (self->backend);
  g_autoptr (GError) error = NULL;
  g_autoptr (PpRecording) run = pp_recording_new_child (self->cli_path, name,
                                            gtk_spin_button_get_value_as_int (self->ranks),
                                            gtk_spin_button_get_value_as_int (self->microbatches),
                                            info && info->takes_v
                                              ? gtk_spin_button_get_value_as_int (self->stages_per_rank) : 0,
                                            be ? gtk_string_object_get_string (be) : "auto",
                                            &self->whatif_model,
                                            gtk_switch_get_active (self->processes) ? self->mpirun_path : NULL,
                                            &error);
  if (!run)
    {
      g_autofree char *msg = g_strdup_printf ("Could not start pipescope-cli: %s", error->message);
      pp_window_toast (self, msg);
      return;
    }
  pp_window_add_run (self, run);
}

/* Profile a command: `pipescope-cli profile -- COMMAND` as a child, shown
 * as it runs, a row per rank (a PyTorch job). */
gboolean
pp_window_profile (PpWindow *self, const char *command_line, GError **error)
{
  g_auto (GStrv) argv = NULL;
  g_return_val_if_fail (PP_IS_WINDOW (self), FALSE);
  if (!self->cli_path)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "pipescope-cli not found beside pipescope or on PATH");
      return FALSE;
    }
  if (!g_shell_parse_argv (command_line, NULL, &argv, error))
    return FALSE;
  g_autoptr (PpRecording) run = pp_recording_new_profile (self->cli_path, (const char *const *) argv, error);
  if (!run)
    return FALSE;
  pp_window_add_run (self, run);
  /* where its trace goes, as nsys says where its report goes */
  if (pp_recording_get_report_path (run))
    {
      g_autofree char *msg = g_strdup_printf ("Profiling; the trace is written to %s when the command ends",
                                              pp_recording_get_report_path (run));
      pp_window_toast (self, msg);
    }
  return TRUE;
}

void
pp_window_attach (PpWindow *self, const char *job, const char *token)
{
  g_return_if_fail (PP_IS_WINDOW (self));
  g_return_if_fail (job != NULL);
  g_autoptr (PpRecording) run = pp_recording_new_attach (job, token);
  pp_window_add_run (self, run);
}

static void
open_file_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  const char *path = data;
  PpError err = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &err);
  g_autofree char *base = g_path_get_basename (path);
  if (m && pp_timeline_model_description (m) == NULL && pp_timeline_model_n_spans_total (m) == 0)
    {
      /* nothing to show: not a run, whatever the reader let through */
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s: %s", base,
                               pp_timeline_model_truncated (m)
                                 ? "the trace is empty or cut before its first record"
                                 : "the trace holds no run (no description, no spans)");
      pp_timeline_model_free (m);
    }
  else if (m)
    g_task_return_pointer (task, m, (GDestroyNotify) pp_timeline_model_free);
  else
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s: %s", base, err.msg);
}

static void
open_file_done (GObject *source, GAsyncResult *result, gpointer data)
{
  PpWindow *self = PP_WINDOW (source);
  g_autoptr (GError) error = NULL;
  PpTimelineModel *m = g_task_propagate_pointer (G_TASK (result), &error);
  const char *path = g_task_get_task_data (G_TASK (result));
  if (!m)
    {
      pp_window_show_open_error (self, error->message);
      return;
    }
  gboolean cut = pp_timeline_model_truncated (m);
  g_autoptr (PpRecording) run = pp_recording_new_file (m, path);
  /* files read on threads end in any order; the list keeps the order they
   * were opened in (`pipescope A B C` lists A, B, C): before the first run
   * opened after this one that is already in */
  guint seq = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (result), "pp-open-seq"));
  g_object_set_data (G_OBJECT (run), "pp-open-seq", GUINT_TO_POINTER (seq));
  guint pos = G_MAXUINT, n = g_list_model_get_n_items (G_LIST_MODEL (self->runs));
  for (guint i = 0; i < n && pos == G_MAXUINT; i++)
    {
      g_autoptr (GObject) other = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      guint o = GPOINTER_TO_UINT (g_object_get_data (other, "pp-open-seq"));
      if (o > seq)
        pos = i;
    }
  pp_window_add_run_at (self, run, pos);
  if (cut)
    {
      g_autofree char *base = g_path_get_basename (path);
      g_autofree char *msg = g_strdup_printf ("%s ends inside a record (cut short?): "
                                              "showing what it holds", base);
      pp_window_toast (self, msg);
    }
}

void
pp_window_open_file (PpWindow *self, GFile *file)
{
  g_return_if_fail (PP_IS_WINDOW (self));
  if (pp_gui_is_json_trace (file))
    {
      /* a torch.profiler trace: imported into a .pptrace first, which
       * then comes back here (pp-import-open.c) */
      pp_gui_open_files (self, &file, 1);
      return;
    }
  char *path = g_file_get_path (file);
  if (!path)
    {
      pp_window_toast (self, "Only local trace files can be opened");
      return;
    }
  g_autoptr (GTask) task = g_task_new (self, NULL, open_file_done, NULL);
  g_task_set_task_data (task, path, g_free);
  g_object_set_data (G_OBJECT (task), "pp-open-seq", GUINT_TO_POINTER (++self->open_seq));
  g_task_run_in_thread (task, open_file_thread);
}

/* ---- actions ---------------------------------------------------------------------- */

static void
action_run (GSimpleAction *a, GVariant *param, gpointer w)
{
  pp_window_run (PP_WINDOW (w));
}

static void
action_stop (GSimpleAction *a, GVariant *param, gpointer w)
{
  PpWindow *self = PP_WINDOW (w);
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
    {
      g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      pp_recording_stop (r);
    }
}

static void action_open (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_show_open_dialog (PP_WINDOW (w)); }
static void action_attach (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_show_attach_dialog (PP_WINDOW (w)); }
static void action_profile (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_show_profile_dialog (PP_WINDOW (w)); }
static void action_export (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_export_chrome (PP_WINDOW (w)); }
static void action_screenshot (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_show_screenshot_dialog (PP_WINDOW (w)); }
static void action_save_trace (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_show_save_trace_dialog (PP_WINDOW (w)); }
static void action_zoom_fit (GSimpleAction *a, GVariant *p, gpointer w) { pp_window_zoom_to_fit (PP_WINDOW (w)); }

/* What if predicts for the model and batch it measured: the next Run
 * trains that one (the run on screen's blocks, width and batch), not the
 * app's default (8 rows a micro-batch would double the batch with M). */
static void
whatif_model_from_shown (PpWindow *self)
{
  const PpTraceDescription *d = shown_description (self);
  memset (&self->whatif_model, 0, sizeof self->whatif_model);
  if (d)
    {
      self->whatif_model.layers = (int) pp_timeline_description_number (d, "blocks", TRUE);
      self->whatif_model.width = (int) pp_timeline_description_number (d, "width", FALSE);
      self->whatif_model.batch = (int) pp_timeline_description_number (d, "batch", FALSE);
    }
}

/* A PyTorch or megatron-core job's What if row: how to run it in the job
 * (the controls drive pipescope's own model, not the job), said and copied. */
static gboolean
whatif_for_job (PpWindow *self, const char *schedule, int ranks, int microbatches, int stages_per_rank)
{
  const PpTraceDescription *d = shown_description (self);
  PpFramework fw = d ? pp_framework_of_description (d->schedule, d->model) : PP_FRAMEWORK_PIPESCOPE;
  if (fw == PP_FRAMEWORK_PIPESCOPE)
    return FALSE;
  PpSuggestion s = { .ranks = ranks, .microbatches = microbatches,
                     .stages_per_rank = stages_per_rank > 0 ? stages_per_rank : 1 };
  char how[512];
  g_strlcpy (s.schedule, schedule, sizeof s.schedule);
  pp_suggestion_how (&s, fw, how, sizeof how);
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self)), how);
  g_autofree char *msg = g_strdup_printf ("In your job: %s (copied)", how);
  pp_window_toast (self, msg);
  return TRUE;
}

static void
on_whatif_apply (PpWhatifPanel *panel, const char *schedule, int ranks, int microbatches,
                 int stages_per_rank, PpWindow *self)
{
  if (whatif_for_job (self, schedule, ranks, microbatches, stages_per_rank))
    return;
  self->applying_whatif = TRUE;
  GListModel *names = gtk_drop_down_get_model (self->schedule);
  for (guint i = 0; i < g_list_model_get_n_items (names); i++)
    {
      g_autoptr (GtkStringObject) s = g_list_model_get_item (names, i);
      if (g_ascii_strcasecmp (gtk_string_object_get_string (s), schedule) == 0)
        gtk_drop_down_set_selected (self->schedule, i);
    }
  gtk_spin_button_set_value (self->ranks, ranks);
  gtk_spin_button_set_value (self->microbatches, microbatches);
  if (stages_per_rank > 0)
    gtk_spin_button_set_value (self->stages_per_rank, stages_per_rank);
  whatif_model_from_shown (self);
  pp_window_validate (self);
  self->applying_whatif = FALSE;
  g_autofree char *msg = NULL;
  if (self->whatif_model.batch > 0)
    msg = g_strdup_printf ("Controls set from What if; Run (Ctrl+R) trains the same model "
                           "(batch %d) to try it", self->whatif_model.batch);
  else
    msg = g_strdup ("Controls set from What if; Run (Ctrl+R) to try it");
  pp_window_toast (self, msg);
}

/* What if's balanced partition: the run on screen again (the controls
 * follow it), the same model and batch, these blocks per stage. */
static void
on_whatif_apply_partition (PpWhatifPanel *panel, const char *partition, PpWindow *self)
{
  self->applying_whatif = TRUE;
  whatif_model_from_shown (self);
  g_strlcpy (self->whatif_model.partition, partition, sizeof self->whatif_model.partition);
  pp_window_validate (self);
  self->applying_whatif = FALSE;
  g_autofree char *msg = g_strdup_printf ("Run (Ctrl+R) trains the same run with --partition %s",
                                          partition);
  pp_window_toast (self, msg);
}

static gboolean
on_drop (GtkDropTarget *target, const GValue *value, double x, double y, PpWindow *self)
{
  if (!G_VALUE_HOLDS (value, G_TYPE_FILE))
    return FALSE;
  pp_window_open_file (self, g_value_get_object (value));
  return TRUE;
}

/* ---- closing: our jobs stop with the window --------------------------------------- */

static gboolean
pp_window_any_child_running (PpWindow *self)
{
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
    {
      g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      if (pp_recording_child_running (r))
        return TRUE;
    }
  return FALSE;
}

static gboolean
pp_window_closing_tick (gpointer data)
{
  PpWindow *self = data;
  gboolean running = pp_window_any_child_running (self);
  if (running && g_get_monotonic_time () - self->closing_since > 5 * G_USEC_PER_SEC)
    for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
      {
        g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
        pp_recording_kill (r);
      }
  if (running)
    return G_SOURCE_CONTINUE;
  self->closing_id = 0;
  self->closing = TRUE;
  GApplication *app = G_APPLICATION (gtk_window_get_application (GTK_WINDOW (self)));
  if (self->self_test)
    pp_self_test_window_closed (self->self_test);
  pp_window_analysis_dispose (self);   /* a result under way is dropped */
  gtk_window_destroy (GTK_WINDOW (self));
  g_application_release (app);
  return G_SOURCE_REMOVE;
}

static gboolean
pp_window_close_request (GtkWindow *window)
{
  PpWindow *self = PP_WINDOW (window);
  if (self->closing)
    return FALSE;
  if (self->closing_id)
    return TRUE;
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
    {
      g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
      pp_recording_stop (r);
    }
  /* Wait for the children off screen, then go; the app stays until then. */
  g_application_hold (G_APPLICATION (gtk_window_get_application (window)));
  gtk_widget_set_visible (GTK_WIDGET (window), FALSE);
  self->closing_since = g_get_monotonic_time ();
  self->closing_id = g_timeout_add (50, pp_window_closing_tick, self);
  return TRUE;
}

/* ---- construction (the widgets are in pp-window.ui) ------------------------------- */

/* The panels keep their height as the window grows (the timeline takes
 * it), but as it shrinks they give up theirs first: at most 2/5 of it. */
static void
on_vpaned_resized (GObject *object, GParamSpec *pspec, PpWindow *self)
{
  GtkPaned *paned = GTK_PANED (object);
  int max = 0;
  g_object_get (paned, "max-position", &max, NULL);
  int cap = MAX (180, max * 2 / 5);
  if (max > 0 && max - gtk_paned_get_position (paned) > cap)
    gtk_paned_set_position (paned, max - cap);
}

static void
pp_window_dispose (GObject *object)
{
  PpWindow *self = PP_WINDOW (object);
  g_clear_handle_id (&self->panels_id, g_source_remove);
  g_clear_handle_id (&self->closing_id, g_source_remove);
  pp_window_analysis_dispose (self);
  g_clear_pointer (&self->self_test, pp_self_test_free);
  g_clear_pointer (&self->attach_pids, g_array_unref);
  if (self->run_list)
    g_signal_handlers_disconnect_by_data (self->run_list, self);
  for (int i = 0; i < 2; i++)
    if (self->timeline[i])
      g_signal_handlers_disconnect_by_data (self->timeline[i], self);
  if (self->runs)
    for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->runs)); i++)
      {
        g_autoptr (PpRecording) r = g_list_model_get_item (G_LIST_MODEL (self->runs), i);
        g_signal_handlers_disconnect_by_data (r, self);
      }
  for (int i = 0; i < 2; i++)
    if (self->timeline[i])
      pp_timeline_widget_set_model (self->timeline[i], NULL);
  self->shown[0] = self->shown[1] = NULL;
  /* The bound fields go NULL: idles that outlive the window look at them. */
  gtk_widget_dispose_template (GTK_WIDGET (self), PP_TYPE_WINDOW);
  G_OBJECT_CLASS (pp_window_parent_class)->dispose (object);
  /* The models die with the runs, after the widgets let go of them. */
  g_clear_object (&self->runs);
}

static void
pp_window_finalize (GObject *object)
{
  PpWindow *self = PP_WINDOW (object);
  g_free (self->cli_path);
  g_free (self->mpirun_path);
  g_free (self->empty_default);
  free (self->replica_dps);
  G_OBJECT_CLASS (pp_window_parent_class)->finalize (object);
}

static void
pp_window_class_init (PpWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  GtkWindowClass *window_class = GTK_WINDOW_CLASS (klass);

  object_class->dispose = pp_window_dispose;
  object_class->finalize = pp_window_finalize;
  window_class->close_request = pp_window_close_request;

  /* GtkBuilder finds the template's own widgets by type name: register them */
  g_type_ensure (PP_TYPE_TIMELINE_WIDGET);
  g_type_ensure (PP_TYPE_STATS_PANEL);
  g_type_ensure (PP_TYPE_LOSS_CHART);
  g_type_ensure (PP_TYPE_MEMORY_CHART);
  g_type_ensure (PP_TYPE_WHATIF_PANEL);
  g_type_ensure (PP_TYPE_WHY_PANEL);
  g_type_ensure (PP_TYPE_HEATMAP_VIEW);
  g_type_ensure (PP_TYPE_COMPARE_TABLE);
  g_type_ensure (PP_TYPE_SPAN_TABLE);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/pipescope/Pipescope/pp-window.ui");
  gtk_widget_class_bind_template_child (widget_class, PpWindow, title);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, run_button);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, stop_button);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, schedule);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, ranks);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, microbatches);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, stages_per_rank);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, backend);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, processes_row);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, processes);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, verdict);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, verdict_icon);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, toasts);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, run_list);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, empty_page);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, vpaned);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, plan_toggle);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, stats);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, loss);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, memory);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, whatif);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, stragglers);
  gtk_widget_class_bind_template_callback (widget_class, on_straggler_open);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, why);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, panels);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, compare_page);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, compare);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, path_toggle);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, replicas_switch);
  gtk_widget_class_bind_template_callback (widget_class, on_replicas_selected);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, path_overlay);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, panels_label);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, find_entry);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, find_count);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, span_table);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, details_pane);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, details_title);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, details_label);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, details_close);
  gtk_widget_class_bind_template_child (widget_class, PpWindow, zoom_range_button);
  /* the two timelines (the lower one shows only while comparing) */
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_upper", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline[0]));
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_lower", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline[1]));
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_box_upper", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline_box[0]));
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_box_lower", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline_box[1]));
  gtk_widget_class_bind_template_child_full (widget_class, "stuck_banner", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, stuck_banner));
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_label_upper", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline_label[0]));
  gtk_widget_class_bind_template_child_full (widget_class, "timeline_label_lower", FALSE,
                                             G_STRUCT_OFFSET (PpWindow, timeline_label[1]));

  gtk_widget_class_bind_template_callback (widget_class, on_control_changed);
  gtk_widget_class_bind_template_callback (widget_class, on_selected_rows_changed);
  gtk_widget_class_bind_template_callback (widget_class, on_range_changed);
  gtk_widget_class_bind_template_callback (widget_class, on_whatif_apply);
  gtk_widget_class_bind_template_callback (widget_class, on_whatif_apply_partition);
  gtk_widget_class_bind_template_callback (widget_class, on_vpaned_resized);
}

static const GActionEntry win_entries[] = {
  { "run", action_run },
  { "stop", action_stop },
  { "open", action_open },
  { "attach", action_attach },
  { "profile", action_profile },
  { "export-chrome", action_export },
  { "screenshot", action_screenshot },
  { "save-trace", action_save_trace },
  { "zoom-fit", action_zoom_fit },
  { "unfold-replicas", action_unfold_replicas },
};

/* The schedule's button shows its name cut short ("Megatron-Interl…",
 * the whole name its tooltip), its list the whole names: a long name
 * never squeezes the row's title into a letter or two a line
 * ("Sch-edul-e"). */
static void
setup_schedule_name (GtkSignalListItemFactory *f, GtkListItem *item, gpointer ellipsize)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  if (ellipsize)
    {
      gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
      gtk_label_set_max_width_chars (GTK_LABEL (label), 14);   /* "Interleaved1F1B" nearly whole */
    }
  gtk_list_item_set_child (item, label);
}

static void
bind_schedule_name (GtkSignalListItemFactory *f, GtkListItem *item, gpointer ellipsize)
{
  GtkStringObject *name = gtk_list_item_get_item (item);
  GtkWidget *label = gtk_list_item_get_child (item);
  gtk_label_set_text (GTK_LABEL (label), name ? gtk_string_object_get_string (name) : "");
  if (ellipsize)
    gtk_widget_set_tooltip_text (label, name ? gtk_string_object_get_string (name) : NULL);
}

static void
schedule_factories (GtkDropDown *dropdown)
{
  for (int ellipsize = 0; ellipsize < 2; ellipsize++)
    {
      GtkListItemFactory *f = gtk_signal_list_item_factory_new ();
      g_signal_connect (f, "setup", G_CALLBACK (setup_schedule_name), GINT_TO_POINTER (ellipsize));
      g_signal_connect (f, "bind", G_CALLBACK (bind_schedule_name), GINT_TO_POINTER (ellipsize));
      if (ellipsize)
        gtk_drop_down_set_factory (dropdown, f);
      else
        gtk_drop_down_set_list_factory (dropdown, f);
      g_object_unref (f);
    }
}

static void
pp_window_init (PpWindow *self)
{
  self->runs = g_list_store_new (PP_TYPE_RECORDING);
  self->cli_path = pp_application_find_cli ();
  /* before the template: its controls validate as they change, which
   * enables or disables "run" */
  g_action_map_add_action_entries (G_ACTION_MAP (self), win_entries, G_N_ELEMENTS (win_entries), self);
  gtk_widget_init_template (GTK_WIDGET (self));
  self->empty_default = g_strdup (adw_status_page_get_description (self->empty_page));
  gtk_drawing_area_set_draw_func (GTK_DRAWING_AREA (self->path_overlay), draw_path_overlay, self, NULL);
  g_signal_connect_swapped (self->timeline[0], "rows-changed", G_CALLBACK (update_replicas_switch), self);
  pp_window_details_init (self);
  pp_window_find_init (self);

  GtkStringList *names = gtk_string_list_new (NULL);
  guint default_index = 0, i = 0;
  for (const PpScheduleInfo *s = pp_schedule_list (); s->name; s++, i++)
    {
      gtk_string_list_append (names, s->name);
      if (g_ascii_strcasecmp (s->name, "1F1B") == 0)
        default_index = i;
    }
  gtk_drop_down_set_model (self->schedule, G_LIST_MODEL (names));
  schedule_factories (self->schedule);
  g_object_unref (names);
  gtk_drop_down_set_selected (self->schedule, default_index);
  /* One rank per core by default (at least 2, at most 4): CPU ranks are
   * threads, and more of them than cores would measure the scheduler's
   * bubble, not the pipeline's. */
  gtk_spin_button_set_value (self->ranks, CLAMP (g_get_num_processors (), 2, 4));
  /* ranks as processes where an MPI launcher is there to start them */
  self->mpirun_path = g_find_program_in_path ("mpirun");
  gtk_widget_set_visible (self->processes_row, self->mpirun_path != NULL);

  gtk_list_box_bind_model (self->run_list, G_LIST_MODEL (self->runs), pp_window_create_row, self, NULL);

  GtkDropTarget *drop = gtk_drop_target_new (G_TYPE_FILE, GDK_ACTION_COPY);
  g_signal_connect (drop, "drop", G_CALLBACK (on_drop), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drop));

  self->panels_id = g_timeout_add (250, pp_window_panels_tick, self);
  pp_window_validate (self);
  pp_window_update_subtitle (self);
}

PpWindow *
pp_window_new (GtkApplication *app)
{
  /* its Keyboard Shortcuts come from gtk/help-overlay.ui (GtkApplication) */
  return g_object_new (PP_TYPE_WINDOW, "application", app, NULL);
}
