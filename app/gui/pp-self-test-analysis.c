/* pp-self-test-analysis.c — `pipescope --self-test=analysis FILE`: the
 * panels that analyse the run (Statistics, Why, Stragglers, What if) are
 * computed off the main loop (pp-window-analysis.c); tests/test-app.c runs
 * it on a job of many replicas.
 *
 * From the start a 1 ms timeout counts its runs while the run is on
 * screen and its analysis not yet shown: the main loop went on meanwhile
 * ("self-test: analysis: N main-loop ticks while it ran"; 0 when the
 * analysis ran inside the dispatch that showed the run, as it did on the
 * main loop).  Once shown, the numbers are those of pp_stats_numbers,
 * pp_why_panel_analyse and pp_why_panel_stragglers over the run's model,
 * computed here, directly ("self-test: analysis: as computed directly:
 * ...").  Then the window closes, an analysis started as it goes: its
 * result comes to a window disposed, which drops it; the app waits for
 * that ("self-test: analysis: the window went during its analysis; its
 * result came after it, dropped").  With PIPESCOPE_SELF_TEST_SHOTS=DIR the
 * window once the results came, as DIR/analysis.png. */
#include "pp-window-private.h"

#include <stdio.h>

static guint  probe_id;
static guint  ticks_waiting;     /* probe runs while the run waited for its analysis */
static GWeakRef probe_win;

static gboolean
probe (gpointer data)
{
  g_autoptr (PpWindow) w = g_weak_ref_get (&probe_win);
  if (w == NULL || w->analyses_shown > 0)
    {
      probe_id = 0;
      return G_SOURCE_REMOVE;
    }
  if (w->shown[0] != NULL)
    ticks_waiting++;
  return G_SOURCE_CONTINUE;
}

void
pp_self_test_analysis_begin (PpWindow *w)
{
  g_weak_ref_init (&probe_win, w);
  ticks_waiting = 0;
  probe_id = g_timeout_add (1, probe, NULL);
}

/* ---- closing during an analysis ------------------------------------------------ */

static GApplication *held;
static guint         dropped_before;

/* Until every analysis under way has come back (a 1 ms tick counted on,
 * no time bound): the closed window's must have been dropped. */
static gboolean
watch_closing (gpointer data)
{
  guint in_flight, dropped;
  pp_window_analysis_counts (&in_flight, &dropped);
  if (in_flight > 0)
    return G_SOURCE_CONTINUE;
  printf ("self-test: analysis: the window went during its analysis; its result came after it, %s\n",
          dropped > dropped_before ? "dropped" : "NOT DROPPED");
  fflush (stdout);
  g_application_release (held);
  held = NULL;
  return G_SOURCE_REMOVE;
}

void
pp_self_test_analysis_closing (PpWindow *w)
{
  /* again, started in the dispatch that destroys the window: its result
   * comes to a window that is gone, whatever the worker's speed */
  guint in_flight;
  pp_window_analysis_counts (&in_flight, &dropped_before);
  pp_window_analysis_start (w);
  if (!w->analysis_running)
    return;
  printf ("self-test: analysis: closing with an analysis running\n");
  held = G_APPLICATION (gtk_window_get_application (GTK_WINDOW (w)));
  g_application_hold (held);   /* the app waits for the result */
  g_timeout_add (1, watch_closing, NULL);
}

/* ---- the checks ---------------------------------------------------------------- */

static gboolean
same_stats (const PpStatsNumbers *a, const PpStatsNumbers *b, char **why)
{
  if (a->n_ranks != b->n_ranks || a->steps.n_steps != b->steps.n_steps || a->steps.median_step != b->steps.median_step
      || a->steps.bubble_mean != b->steps.bubble_mean || a->closed != b->closed || a->plan != b->plan
      || a->measured_is_idle != b->measured_is_idle)
    {
      *why = g_strdup_printf ("Statistics: %d ranks, %d steps, median %.0f ns shown; pp_stats_numbers: %d, %d, %.0f",
                              a->n_ranks, a->steps.n_steps, a->steps.median_step, b->n_ranks, b->steps.n_steps,
                              b->steps.median_step);
      return FALSE;
    }
  for (int r = 0; r < a->n_ranks; r++)
    if (a->measured[r] != b->measured[r] || a->planned[r] != b->planned[r]
        || a->rank[r].peak_inflight != b->rank[r].peak_inflight
        || a->rank[r].peak_activation_bytes != b->rank[r].peak_activation_bytes)
      {
        *why = g_strdup_printf ("Statistics: rank %d measured %g shown, %g by pp_stats_numbers", r, a->measured[r],
                                b->measured[r]);
        return FALSE;
      }
  return TRUE;
}

static gboolean
same_why (PpWindow *w, const PpTimelineModel *m, int *rows, char **why)
{
  PpWhyReport *rep = NULL;
  PpWhyChange ch, shown_ch;
  PpError err = { 0 };
  pp_why_panel_analyse (m, &rep, &ch, NULL, &err);
  *rows = pp_why_panel_get_n_rows (w->why);
  gboolean ok = TRUE;
  if (rep == NULL)
    ok = *rows == 0 && !pp_why_panel_get_change (w->why, NULL);
  else if (*rows != MIN (rep->ranks, PP_STATS_PANEL_MAX_ROWS) || !pp_why_panel_get_change (w->why, &shown_ch)
           || shown_ch.slowest_stage != ch.slowest_stage || shown_ch.slowest_cost != ch.slowest_cost)
    ok = FALSE;
  for (int r = 0; ok && rep != NULL && r < *rows; r++)
    {
      PpWhyIdle idle;
      int n_rep = 0;
      ok = pp_why_panel_get_idle (w->why, r, &idle, &n_rep) && n_rep == rep->n_replicas
           && idle.measured == rep->idle[r].measured;
      for (int k = 0; ok && k < PP_WHY_N_PARTS; k++)
        ok = pp_why_idle_part (&idle, k) == pp_why_idle_part (&rep->idle[r], k);
    }
  if (!ok)
    *why = g_strdup_printf ("Why: %d rows shown, pp_why_panel_analyse: %s", *rows,
                            rep != NULL ? "other numbers" : err.msg);
  pp_why_report_free (rep);
  return ok;
}

static gboolean
same_stragglers (PpWindow *w, const PpTimelineModel *m, int *items, char **why)
{
  PpStragglerReport *rep = NULL;
  PpError err = { 0 };
  pp_why_panel_stragglers (m, &rep, &err);
  const PpStragglerReport *shown = pp_heatmap_view_get_report (w->stragglers);
  gboolean ok = (rep == NULL) == (shown == NULL);
  if (ok && rep != NULL)
    ok = shown->n_items == rep->n_items && shown->n_steps == rep->n_steps
         && (rep->n_items == 0 || (shown->items[0].proc == rep->items[0].proc
                                   && shown->items[0].saving_s == rep->items[0].saving_s));
  *items = rep != NULL ? (int) rep->n_items : 0;
  if (!ok)
    *why = g_strdup_printf ("Stragglers: %s shown, pp_why_panel_stragglers: %s", shown ? "a report" : "none",
                            rep ? "another report" : err.msg);
  pp_straggler_report_free (rep);
  return ok;
}

int
pp_self_test_analysis (PpWindow *w, int step, char **why)
{
  PpRecording *run = w->shown[0];
  PpTimelineModel *m = run != NULL ? pp_recording_get_model (run) : NULL;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0 || w->analyses_shown == 0 || pp_window_analysis_busy (w))
    return 0;
  if (step > 0)
    {
      /* the window as it is, asked for: again later while not drawn yet */
      const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
      g_autofree char *path = dir != NULL ? g_build_filename (dir, "analysis.png", NULL) : NULL;
      if (path != NULL && !pp_self_test_save_window_png (GTK_WIDGET (w), path))
        return 0;
      /* the window closes; pp_self_test_analysis_closing as it goes */
      return 2;
    }
  /* counted, not timed: the main loop ran while the worker did */
  printf ("self-test: analysis: %u main-loop ticks while it ran\n", ticks_waiting);
  if (ticks_waiting == 0)
    {
      *why = g_strdup ("the main loop did not run between the run shown and its analysis");
      return -1;
    }
  PpStatsNumbers direct;
  pp_stats_numbers (m, PP_STATS_PANEL_MAX_ROWS, &direct);
  const PpStatsNumbers *shown = pp_stats_panel_get_numbers (w->stats);
  int why_rows = 0, items = 0;
  gboolean ok = shown != NULL && same_stats (shown, &direct, why) && same_why (w, m, &why_rows, why)
                && same_stragglers (w, m, &items, why);
  if (shown == NULL)
    *why = g_strdup ("the Statistics tab shows no numbers");
  if (ok)
    printf ("self-test: analysis: as computed directly: %d ranks, %d steps counted, %d Why rows, "
            "%d stragglers\n", direct.n_ranks, direct.steps.n_steps, why_rows, items);
  pp_stats_numbers_clear (&direct);
  fflush (stdout);
  return ok ? 1 : -1;
}
