/* pp-window-analysis.c — the panels that analyse the run on screen
 * (Statistics, Why, Stragglers, What if's measured costs, the Memory
 * chart's planned peaks) and the Compare table of two runs, computed on a
 * worker thread, so that the window never blocks: a trace of 11,000
 * replicas took the main loop for a third of a second and more as it
 * opened, a live job's analyses a few times a second, and comparing it
 * with another run as long again (its step analysis and bubbles, twice).
 *
 * What is safe: the timeline model is not thread-safe even for readers
 * (its const queries settle late spans, sort steps and places, fill
 * caches), a live run grows it on the main loop, and a run removed from
 * the list frees it.  So the worker never reads the run's model: it reads
 * a snapshot (pp_timeline_model_snapshot), a copy made here on the main
 * loop that the worker alone owns and frees.  The analyses' qsort
 * closures are thread-local (runtime/), so the main loop may draw (fold,
 * step bubbles) while the worker analyses.  Each panel's compute half
 * (pp_stats_panel_compute, ...) touches no widget; its apply half runs
 * here, in the task's callback, on the main loop.
 *
 * At most one analysis is in flight; a request meanwhile (a live run
 * refreshes the panels a few times a second) is one more run when it
 * ends, over the model as it is then.  A result is dropped when the run
 * shown changed since it started (generation), its Compare rows when the
 * pair compared changed (compare_generation), and when the window went:
 * the task holds it by a weak ref (GTK 4 disposes a window destroyed only
 * when its last ref goes: a task's ref would keep it and its widgets) and
 * its cancellable is cancelled as it closes, so the callback touches
 * nothing of a window closed. */
#include "pp-window-private.h"

/* Analyses under way, and results dropped because their window went, in
 * the process (for the self-test). */
static guint n_in_flight, n_dropped;

typedef struct {
  GWeakRef               win;             /* the task holds no ref: a window closed goes */
  PpTimelineModel       *snapshot;        /* the worker's alone; it frees it */
  const PpTimelineModel *source;          /* the run's model it copies: compared, never read */
  guint                  generation;
  /* comparing: the lower run's, as snapshot and source are the upper's */
  PpTimelineModel       *snapshot_b;
  const PpTimelineModel *source_b;
  guint                  compare_generation;
  PpCompareResult       *compare;
  gboolean               want_why, want_stragglers;
  PpStatsResult         *stats;
  PpWhyResult           *why;
  PpHeatmapResult       *stragglers;
  PpWhatifResult        *whatif;
  char                   memory_key[128]; /* what the Memory chart's planned peaks are for */
  PpMemoryResult        *memory;
} Job;

static void
job_free (gpointer data)
{
  Job *j = data;
  g_weak_ref_clear (&j->win);
  pp_timeline_model_free (j->snapshot);
  pp_timeline_model_free (j->snapshot_b);
  pp_compare_result_free (j->compare);
  pp_stats_result_free (j->stats);
  pp_why_result_free (j->why);
  pp_heatmap_result_free (j->stragglers);
  pp_whatif_result_free (j->whatif);
  pp_memory_result_free (j->memory);
  g_free (j);
}

static void
analysis_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
  Job *j = data;
  j->stats = pp_stats_panel_compute (j->snapshot);
  if (j->want_why)
    j->why = pp_why_panel_compute (j->snapshot);
  if (j->want_stragglers)
    j->stragglers = pp_heatmap_view_compute (j->snapshot);
  j->whatif = pp_whatif_panel_compute (j->snapshot);
  j->memory = pp_memory_chart_compute (j->snapshot, j->memory_key);
  if (j->snapshot_b != NULL)
    j->compare = pp_compare_table_compute (j->snapshot, j->snapshot_b);
  /* the copies go here, not on the main loop */
  g_clear_pointer (&j->snapshot, pp_timeline_model_free);
  g_clear_pointer (&j->snapshot_b, pp_timeline_model_free);
  g_task_return_boolean (task, TRUE);
}

static void
analysis_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Job *j = g_task_get_task_data (G_TASK (result));
  g_autoptr (PpWindow) self = g_weak_ref_get (&j->win);

  n_in_flight--;
  /* the window went (finalized, disposed, or destroyed: cancelled as it
   * closed): nothing of it is touched */
  if (self == NULL || g_cancellable_is_cancelled (g_task_get_cancellable (G_TASK (result))) || self->stats == NULL)
    {
      n_dropped++;
      return;
    }
  self->analysis_running = FALSE;
  gboolean same_run = j->generation == self->analysis_generation && self->shown[0] != NULL
                      && pp_recording_get_model (self->shown[0]) == j->source;
  if (j->compare != NULL)
    {
      /* the rows of the pair compared now, else none (another pair's
       * comparison is under way or asked for: its own rows come) */
      if (same_run && j->compare_generation == self->compare_generation && self->shown[1] != NULL
          && pp_recording_get_model (self->shown[1]) == j->source_b)
        {
          g_autofree char *na = pp_window_run_name (self->shown[0]), *nb = pp_window_run_name (self->shown[1]);
          pp_compare_table_apply (self->compare, g_steal_pointer (&j->compare), na, nb);
          self->compares_shown++;
        }
      else
        self->compares_dropped++;
    }
  if (same_run)
    {
      pp_stats_panel_apply (self->stats, g_steal_pointer (&j->stats));
      if (j->why != NULL)
        pp_why_panel_apply (self->why, j->source, g_steal_pointer (&j->why));
      if (j->stragglers != NULL)
        pp_heatmap_view_apply (self->stragglers, j->source, g_steal_pointer (&j->stragglers));
      pp_whatif_panel_apply (self->whatif, j->source, g_steal_pointer (&j->whatif));
      pp_memory_chart_apply (self->memory, g_steal_pointer (&j->memory));
      pp_memory_chart_set_budget (self->memory, pp_whatif_panel_get_budget (self->whatif));
      /* What if offers the partition that would balance the stages */
      PpWhyChange ch;
      if (pp_why_panel_get_change (self->why, &ch) && ch.has_partition && ch.changed)
        pp_whatif_panel_set_partition (self->whatif, ch.partition, ch.current, ch.predicted_step,
                                       ch.current_step);
      else
        pp_whatif_panel_set_partition (self->whatif, NULL, NULL, 0, 0);
      gtk_widget_queue_draw (self->path_overlay);   /* the Why tab's critical path */
      self->analyses_shown++;
    }
  if (self->analysis_pending)
    {
      self->analysis_pending = FALSE;
      pp_window_analysis_start (self);
    }
}

void
pp_window_analysis_start (PpWindow *self)
{
  PpRecording *run = self->shown[0];
  if (run == NULL || self->stats == NULL)
    return;
  if (self->analysis_running)
    {
      self->analysis_pending = TRUE;
      return;
    }
  PpTimelineModel *m = pp_recording_get_model (run);
  Job *j = g_new0 (Job, 1);
  j->source = m;
  j->generation = self->analysis_generation;
  j->want_why = pp_why_panel_wants (self->why, m);
  j->want_stragglers = pp_heatmap_view_wants (self->stragglers, m);
  g_strlcpy (j->memory_key, pp_memory_chart_plan_key (self->memory), sizeof j->memory_key);
  if (self->shown[1] != NULL)
    {
      j->source_b = pp_recording_get_model (self->shown[1]);
      j->compare_generation = self->compare_generation;
    }
  if ((j->snapshot = pp_timeline_model_snapshot (m)) == NULL
      || (j->source_b != NULL && (j->snapshot_b = pp_timeline_model_snapshot (j->source_b)) == NULL))
    {
      job_free (j);
      pp_window_toast (self, "Out of memory: the panels were not analysed again");
      return;
    }
  if (self->analysis_cancel == NULL)
    self->analysis_cancel = g_cancellable_new ();
  self->analysis_running = TRUE;
  n_in_flight++;
  g_weak_ref_init (&j->win, self);
  GTask *task = g_task_new (NULL, self->analysis_cancel, analysis_done, NULL);
  g_task_set_source_tag (task, pp_window_analysis_start);
  g_task_set_task_data (task, j, job_free);
  g_task_run_in_thread (task, analysis_thread);
  g_object_unref (task);
}

void
pp_window_analysis_reset (PpWindow *self, PpRecording *a, PpRecording *b)
{
  if (a != self->shown[0])
    {
      self->analysis_generation++;
      self->analysis_pending = FALSE;
      /* not the last run's numbers under another run's timeline */
      if (self->stats != NULL && a != NULL)
        {
          pp_stats_panel_show_pending (self->stats);
          pp_why_panel_show_pending (self->why);
          pp_heatmap_view_show_pending (self->stragglers);
        }
    }
  if (a != self->shown[0] || b != self->shown[1])
    {
      self->compare_generation++;
      /* nor the last pair's rows under another pair's timelines */
      if (self->compare != NULL && a != NULL && b != NULL)
        pp_compare_table_show_pending (self->compare);
    }
}

gboolean
pp_window_analysis_busy (PpWindow *self)
{
  return self->analysis_running || self->analysis_pending;
}

void
pp_window_analysis_counts (guint *in_flight, guint *dropped)
{
  *in_flight = n_in_flight;
  *dropped = n_dropped;
}

void
pp_window_analysis_dispose (PpWindow *self)
{
  if (self->analysis_cancel != NULL)
    g_cancellable_cancel (self->analysis_cancel);
  g_clear_object (&self->analysis_cancel);
  self->analysis_pending = FALSE;
}
