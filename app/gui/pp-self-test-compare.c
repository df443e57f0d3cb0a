/* pp-self-test-compare.c — `pipescope --self-test=compare A B C`: the
 * Compare table of two runs is computed off the main loop, with the other
 * panels (pp-window-analysis.c); tests/test-app.c runs it on three traces.
 *
 * Run A shown alone and analysed, B is added to it as a Ctrl-click does:
 * in that same dispatch the table shows no rows, an analysis is under way
 * ("self-test: compare: two runs shown: 0 rows, the analysis running";
 * the rows came in that dispatch as they were computed on the main loop).
 * Still in it, B is taken away and C added: the rows of A and B, when they
 * come, are dropped, and those of A and C shown once their own analysis
 * ends ("... the first pair's rows dropped").  A 1 ms timeout counts its
 * runs meanwhile (the main loop went on), and the rows shown are those of
 * pp_compare_runs over the models, computed here, directly ("self-test:
 * compare: as computed directly: ...").  With PIPESCOPE_SELF_TEST_SHOTS=DIR
 * the window then, as DIR/compare.png. */
#include "pp-window-private.h"

#include <stdio.h>
#include <string.h>

#define MAX_ROWS 64

static guint    probe_id;
static guint    ticks_waiting;     /* probe runs while the pair waited for its rows */
static guint    shown_before, dropped_before;
static GWeakRef probe_win;

static gboolean
probe (gpointer data)
{
  g_autoptr (PpWindow) w = g_weak_ref_get (&probe_win);
  if (w == NULL || w->compares_shown > shown_before)
    {
      probe_id = 0;
      return G_SOURCE_REMOVE;
    }
  ticks_waiting++;
  return G_SOURCE_CONTINUE;
}

static void
select_only (PpWindow *w, int i)
{
  gtk_list_box_unselect_all (w->run_list);
  gtk_list_box_select_row (w->run_list, gtk_list_box_get_row_at_index (w->run_list, i));
}

/* Steps 0 and 1: A alone on screen, analysed, nothing in flight. */
static int
show_first (PpWindow *w, int step)
{
  for (guint i = 0; i < 3; i++)
    if (pp_self_test_run_at (w, i) == NULL || pp_timeline_model_n_spans_total (pp_recording_get_model (pp_self_test_run_at (w, i))) == 0)
      return 0;
  if (step == 0)
    {
      select_only (w, 0);
      return 1;
    }
  if (w->shown[0] != pp_self_test_run_at (w, 0) || w->shown[1] != NULL || w->analyses_shown == 0 || pp_window_analysis_busy (w))
    return 0;
  return 1;
}

/* Step 2: B added, then C instead, in one dispatch. */
static int
compare_two (PpWindow *w, char **why)
{
  shown_before = w->compares_shown;
  dropped_before = w->compares_dropped;
  gtk_list_box_select_row (w->run_list, gtk_list_box_get_row_at_index (w->run_list, 1));
  const PpCompareRow *rows;
  size_t n = pp_compare_table_get_rows (w->compare, &rows);
  gboolean running = w->analysis_running;
  printf ("self-test: compare: two runs shown: %zu rows, the analysis %s\n", n, running ? "running" : "NOT RUNNING");
  fflush (stdout);
  if (w->shown[1] != pp_self_test_run_at (w, 1) || n != 0 || !running || w->compares_shown != shown_before)
    {
      *why = g_strdup ("the Compare table should be filled by the worker, after the dispatch that shows two runs");
      return -1;
    }
  gtk_list_box_unselect_row (w->run_list, gtk_list_box_get_row_at_index (w->run_list, 1));
  gtk_list_box_select_row (w->run_list, gtk_list_box_get_row_at_index (w->run_list, 2));
  if (w->shown[0] != pp_self_test_run_at (w, 0) || w->shown[1] != pp_self_test_run_at (w, 2))
    {
      *why = g_strdup ("runs 1 and 3 should be compared");
      return -1;
    }
  ticks_waiting = 0;
  g_weak_ref_init (&probe_win, w);
  probe_id = g_timeout_add (1, probe, NULL);
  return 1;
}

/* Step 3: the rows of A and C, as computed directly. */
static int
check_rows (PpWindow *w, char **why)
{
  if (w->compares_shown == shown_before || pp_window_analysis_busy (w))
    return 0;
  printf ("self-test: compare: %u main-loop ticks while it ran; the first pair's rows %s\n", ticks_waiting,
          w->compares_dropped > dropped_before ? "dropped" : "NOT DROPPED");
  if (ticks_waiting == 0 || w->compares_dropped == dropped_before)
    {
      *why = g_strdup ("the main loop should run while the runs are compared, and a stale pair's rows be dropped");
      return -1;
    }
  PpCompareRow direct[MAX_ROWS];
  size_t n = pp_compare_runs (pp_recording_get_model (w->shown[0]), pp_recording_get_model (w->shown[1]),
                              direct, MAX_ROWS);
  const PpCompareRow *rows;
  size_t shown = pp_compare_table_get_rows (w->compare, &rows);
  gboolean same = shown == n && n > 0;
  for (size_t i = 0; same && i < n; i++)
    same = strcmp (rows[i].what, direct[i].what) == 0 && strcmp (rows[i].a, direct[i].a) == 0
           && strcmp (rows[i].b, direct[i].b) == 0 && strcmp (rows[i].ratio, direct[i].ratio) == 0;
  if (!same)
    {
      *why = g_strdup_printf ("the Compare table shows %zu rows, pp_compare_runs gives %zu%s", shown, n,
                              shown == n ? ", other numbers" : "");
      return -1;
    }
  printf ("self-test: compare: as computed directly: %zu rows, %s: %s against %s, %s: %s against %s\n", n,
          rows[0].what, rows[0].a, rows[0].b, rows[n - 1].what, rows[n - 1].a, rows[n - 1].b);
  fflush (stdout);
  return 1;
}

int
pp_self_test_compare (PpWindow *w, int step, char **why)
{
  switch (step)
    {
    case 0:
    case 1:
      return show_first (w, step);
    case 2:
      return compare_two (w, why);
    case 3:
      return check_rows (w, why);
    default:
      {
        /* the window as it is, asked for: again later while not drawn yet */
        const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
        g_autofree char *path = dir != NULL ? g_build_filename (dir, "compare.png", NULL) : NULL;
        if (path != NULL && !pp_self_test_save_window_png (GTK_WIDGET (w), path))
          return 0;
        return 2;
      }
    }
}
