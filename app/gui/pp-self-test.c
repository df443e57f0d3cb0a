/* pp-self-test.c — `pipescope --self-test=run|attach`: the window drives
 * itself the way a person would (tests/test-app.c runs it under Xvfb).
 * Prints one "self-test: ..." line per step and sets the exit status.
 * `--self-test=bench-stream --attach JOB` measures the window for 5 s while
 * the job streams (tests/bench/bench-app-stream) and prints one
 * "bench-stream: ..." line.
 * `--self-test=demo|demo-compare|demo-attach|demo-screenshot` only sets the
 * window up for a screenshot (a zoomed run, two runs compared, a dialog)
 * and leaves it open.
 * `--self-test=open FILE...` waits for the files to open (torch.profiler
 * traces of a job's ranks imported together: one run) and says what the
 * runs hold.
 * `--self-test=second-instance --no-run` (the one mode of a unique app,
 * pp_application_args_unique) waits for another `pipescope FILE` to hand
 * its file over and says what opened, as open does.
 * `--self-test=open-error FILE...` waits for the window to say why the
 * files could not be opened and prints what its empty page then reads.
 * `--self-test=save` stops the default run after a few steps, saves it as
 * Save Trace does and opens the copy: the same spans and steps.
 * `--self-test=replicas FILE` opens a job of replicas (P x D) and checks the
 * rows: folded (P), one rank unfolded as a label click does (P - 1 + D),
 * all (Ctrl+U: P x D), one replica from the switch (P), folded again; with
 * PIPESCOPE_SELF_TEST_SHOTS=DIR it saves each as DIR/replicas-*.png.
 * `--self-test=host-lane FILE` puts the pointer over the first GC pause in
 * the host lane and checks the tooltip names it (DIR/host-lane.png);
 * `--self-test=demo-why FILE` shows the file's last steps and the Why tab
 * and stays open, for a screenshot;
 * `--self-test=spans FILE`: the Spans tab and Find (pp-self-test-spans.c).
 * `--self-test=analysis FILE`: the panels analysed off the main loop
 * (pp-self-test-analysis.c).
 * `--self-test=compare A B C`: the Compare table of two runs filled off
 * the main loop, a stale pair's rows dropped (pp-self-test-compare.c). */
#include "pp-window-private.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-registry.h"
#include "pp-timeline-fold.h"

#define STEP_TIMEOUT_US (30 * G_USEC_PER_SEC)

struct PpSelfTest
{
  PpWindow *win;
  char     *mode;
  int       step;
  gint64    deadline;
  guint     tick_id;
  GArray   *pids;      /* our children */
  gboolean  done;
  char     *png, *svg, *json;
  guint     profiled;    /* profile: the run it added (the default run may be run 0) */
  gboolean  saw_waiting; /* profile: the window said it waits for the ranks */

  /* bench-stream */
  gint64    bench_start, bench_last_loop;
  size_t    bench_spans0;
  guint     bench_frames;
  guint     bench_tick_cb;       /* on the timeline widget */
  GtkWidget *bench_widget;
  GdkFrameClock *bench_clock;
  gulong    bench_paint_id;
  guint     bench_loop_id;       /* the 1 ms probe of the main loop */
  GArray   *bench_gaps;          /* gint64 µs between two probe runs */
};

static int self_test_result = 0;

int
pp_window_self_test_result (void)
{
  return self_test_result;
}

static void
say (const char *fmt, ...) G_GNUC_PRINTF (1, 2);
static void
say (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *s = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  printf ("self-test: %s\n", s);
  fflush (stdout);
}

static void
fail (struct PpSelfTest *t, const char *why)
{
  say ("FAIL: %s", why);
  self_test_result = 1;
  t->done = TRUE;
  t->tick_id = 0;
  gtk_window_close (GTK_WINDOW (t->win));
}

PpRecording *
pp_self_test_run_at (PpWindow *w, guint i)
{
  if (i >= g_list_model_get_n_items (G_LIST_MODEL (w->runs)))
    return NULL;
  PpRecording *r = g_list_model_get_item (G_LIST_MODEL (w->runs), i);
  g_object_unref (r);   /* the store keeps it */
  return r;
}

static void
next_step (struct PpSelfTest *t)
{
  t->step++;
  t->deadline = g_get_monotonic_time () + STEP_TIMEOUT_US;
}

static void
remember_pid (struct PpSelfTest *t, PpRecording *r)
{
  int pid = pp_recording_get_pid (r);
  if (pp_recording_is_child (r) && pid > 0)
    g_array_append_val (t->pids, pid);
}

static gboolean
tick_run (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0), *r1 = pp_self_test_run_at (w, 1);
  switch (t->step)
    {
    case 0:
      if (!r0 || !pp_recording_has_spans_on_every_rank (r0))
        return FALSE;
      {
        PpTimelineModel *m = pp_recording_get_model (r0);
        say ("run 1 (pid %d) live: spans on all %d ranks (%zu spans)", pp_recording_get_pid (r0),
             pp_timeline_model_n_ranks (m), pp_timeline_model_n_spans_total (m));
        int want = CLAMP ((int) g_get_num_processors (), 2, 4);
        if (pp_timeline_model_n_ranks (m) != want)
          {
            fail (t, "the default run should have one rank per core (2 to 4)");
            return TRUE;
          }
        remember_pid (t, r0);
      }
      /* Values a schedule rejects are explained before the run. */
      {
        GListModel *names = gtk_drop_down_get_model (w->schedule);
        guint dualpipe = GTK_INVALID_LIST_POSITION, onef1b = gtk_drop_down_get_selected (w->schedule);
        for (guint i = 0; i < g_list_model_get_n_items (names); i++)
          {
            g_autoptr (GtkStringObject) s = g_list_model_get_item (names, i);
            if (strcmp (gtk_string_object_get_string (s), "DualPipe") == 0)
              dualpipe = i;
          }
        if (dualpipe != GTK_INVALID_LIST_POSITION)
          {
            gtk_drop_down_set_selected (w->schedule, dualpipe);
            gtk_spin_button_set_value (w->ranks, 3);
            gboolean enabled = g_action_group_get_action_enabled (G_ACTION_GROUP (w), "run");
            say ("DualPipe with 3 ranks: Run %s, \"%s\"", enabled ? "enabled" : "disabled",
                 gtk_label_get_text (w->verdict));
            if (enabled || !*gtk_label_get_text (w->verdict))
              {
                fail (t, "a rejected configuration must disable Run and say why");
                return TRUE;
              }
            gtk_drop_down_set_selected (w->schedule, onef1b);
            gtk_spin_button_set_value (w->ranks, 4);
          }
      }
      /* As if a What if row were chosen: 12 micro-batches, the same model. */
      g_signal_emit_by_name (w->whatif, "apply", "1F1B", 4, 12, 0);
      if (!g_action_group_get_action_enabled (G_ACTION_GROUP (w), "run")
          || gtk_spin_button_get_value_as_int (w->microbatches) != 12)
        {
          fail (t, "1F1B, 4 ranks, 12 micro-batches should be accepted");
          return TRUE;
        }
      g_action_group_activate_action (G_ACTION_GROUP (w), "run", NULL);
      next_step (t);
      return FALSE;

    case 1:
      if (!r1 || !pp_recording_has_spans_on_every_rank (r1))
        return FALSE;
      {
        const PpTraceDescription *d = pp_timeline_model_description (pp_recording_get_model (r1));
        say ("run 2 (pid %d) live: %s, %d micro-batches, spans on all ranks", pp_recording_get_pid (r1),
             pp_recording_get_title (r1), d ? d->n_microbatches : -1);
        if (!d || d->n_microbatches != 12)
          {
            fail (t, "the second run should have 12 micro-batches");
            return TRUE;
          }
        /* What if ranked for the first run's batch: the second keeps it (to
         * a multiple of 12), not the app's 8 rows a micro-batch (96) */
        const PpTraceDescription *d0 = pp_timeline_model_description (pp_recording_get_model (r0));
        int batch0 = (int) pp_timeline_description_number (d0, "batch", 0);
        int batch1 = (int) pp_timeline_description_number (d, "batch", 0);
        say ("batch %d after What if, from a run with batch %d", batch1, batch0);
        if (batch0 <= 0 || batch1 % 12 != 0 || abs (batch1 - batch0) > 6)
          {
            fail (t, "a run applied from What if should train the batch What if ranked for");
            return TRUE;
          }
        remember_pid (t, r1);
        if (!pp_recording_has_spans_on_every_rank (r0))
          {
            fail (t, "the first run lost its data");
            return TRUE;
          }
      }
      /* A click on a block: the details pane says what it was and what it
       * waited for; the find entry takes "W mb 0" and refuses a word it
       * does not know (issue 17). */
      {
        PpTimelineModel *m = pp_timeline_widget_get_model (w->timeline[0]);
        const PpSpan *sp = m ? pp_timeline_model_spans (m, 1) : NULL;
        long pick = -1;
        for (size_t i = 0; sp && i < pp_timeline_model_n_spans (m, 1) && pick < 0; i++)
          if (sp[i].kind == PP_SPAN_F && sp[i].microbatch >= 0)
            pick = (long) i;
        pp_timeline_widget_select (w->timeline[0], 1, pick);
        const char *details = pp_window_details_text (w);
        say ("details of rank 1's first F: %s", strchr (details, '\n') ? "shown" : details);
        if (pick < 0 || !strstr (details, "Kind: F") || !strstr (details, "Waited for: F of stage 0"))
          {
            fail (t, "a selected block's details should name it and what it waited for");
            return TRUE;
          }
        gtk_editable_set_text (GTK_EDITABLE (w->find_entry), "bogus");
        g_signal_emit_by_name (w->find_entry, "search-changed");
        gboolean refused = gtk_widget_has_css_class (GTK_WIDGET (w->find_entry), "error");
        gtk_editable_set_text (GTK_EDITABLE (w->find_entry), "W mb 0");
        g_signal_emit_by_name (w->find_entry, "search-changed");
        gboolean taken = !gtk_widget_has_css_class (GTK_WIDGET (w->find_entry), "error");
        say ("find: 'bogus' %s, 'W mb 0' %s", refused ? "refused" : "taken", taken ? "taken" : "refused");
        gtk_editable_set_text (GTK_EDITABLE (w->find_entry), "");
        g_signal_emit_by_name (w->find_entry, "search-changed");
        pp_timeline_widget_select (w->timeline[0], -1, -1);
        if (!refused || !taken)
          {
            fail (t, "the find entry should take 'W mb 0' and refuse 'bogus'");
            return TRUE;
          }
      }
      /* Save Screenshot and Export, as their dialogs do once a file is chosen. */
      {
        g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "pipescope-self-test", NULL);
        g_mkdir_with_parents (dir, 0700);
        t->png = g_build_filename (dir, "shot.png", NULL);
        t->svg = g_build_filename (dir, "shot.svg", NULL);
        t->json = g_build_filename (dir, "run.json", NULL);
        g_autoptr (GError) error = NULL;
        if (!pp_window_save_screenshot (w, t->png, TRUE, 1920, 1080, &error) ||
            !pp_window_save_screenshot (w, t->svg, FALSE, 1920, 1080, &error))
          {
            fail (t, error->message);
            return TRUE;
          }
        g_autofree char *png = NULL;
        gsize len = 0;
        if (!g_file_get_contents (t->png, &png, &len, NULL) || len < 8 || memcmp (png, "\x89PNG", 4) != 0)
          {
            fail (t, "the screenshot is not a PNG");
            return TRUE;
          }
        say ("saved %s (%zu bytes) and %s", t->png, (size_t) len, t->svg);
        pp_window_export_chrome_to (w, t->json);
      }
      next_step (t);
      return FALSE;

    case 2:
      {
        g_autofree char *json = NULL;
        gsize len = 0;
        if (!g_file_get_contents (t->json, &json, &len, NULL) || len < 2)
          return FALSE;
        if (!strstr (json, "traceEvents") && json[0] != '[')
          {
            fail (t, "the Chrome export is not a trace");
            return TRUE;
          }
        say ("exported Chrome JSON %s (%zu bytes)", t->json, (size_t) len);
      }
      /* Compare: both selected, two timelines. */
      gtk_list_box_select_all (w->run_list);
      if (w->shown[0] != r0 || w->shown[1] != r1 || !gtk_widget_get_visible (w->timeline_box[1]))
        {
          fail (t, "selecting two runs should show both");
          return TRUE;
        }
      /* each named by where it comes from, and a table of what differs */
      {
        const char *la = gtk_label_get_text (w->timeline_label[0]), *lb = gtk_label_get_text (w->timeline_label[1]);
        say ("two runs selected: two timelines, '%s' and '%s'", la, lb);
        if (!strstr (la, "run, pid ") || !strstr (lb, "run, pid ") || strcmp (la, lb) == 0
            || !adw_view_stack_page_get_visible (w->compare_page))
          {
            fail (t, "compared runs should be named by their source, with the Compare table shown");
            return TRUE;
          }
      }
      next_step (t);
      return FALSE;

    case 3:
      /* Ranks as processes, where mpirun is there: the switch, then Run. */
      if (w->mpirun_path == NULL)
        {
          say ("no mpirun on PATH: ranks as processes not tried");
          t->step = 5;
          return FALSE;
        }
      if (!gtk_widget_get_visible (w->processes_row))
        {
          fail (t, "with mpirun on PATH the ranks-as-processes switch should show");
          return TRUE;
        }
      gtk_switch_set_active (w->processes, TRUE);
      gtk_spin_button_set_value (w->ranks, 2);
      gtk_spin_button_set_value (w->microbatches, 4);
      g_action_group_activate_action (G_ACTION_GROUP (w), "run", NULL);
      next_step (t);
      return FALSE;

    case 4:
      {
        PpRecording *r2 = pp_self_test_run_at (w, 2);
        if (!r2 || !pp_recording_has_spans_on_every_rank (r2))
          return FALSE;
        PpTimelineModel *m = pp_recording_get_model (r2);
        say ("run 3 as processes (mpirun, pid %d) live: spans on all %d ranks (%zu spans)",
             pp_recording_get_pid (r2), pp_timeline_model_n_ranks (m), pp_timeline_model_n_spans_total (m));
        remember_pid (t, r2);
        gtk_switch_set_active (w->processes, FALSE);
      }
      next_step (t);
      return FALSE;

    case 5:
      /* Let the comparison be drawn once, then close. */
      say ("closing the window");
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  return FALSE;
}

static gboolean
tick_attach (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  switch (t->step)
    {
    case 0:
      if (!r0 || !pp_recording_has_spans_on_every_rank (r0))
        return FALSE;
      say ("attached to pid %d: spans on all %d ranks (%zu spans)", pp_recording_get_pid (r0),
           pp_timeline_model_n_ranks (pp_recording_get_model (r0)),
           pp_timeline_model_n_spans_total (pp_recording_get_model (r0)));
      /* the controls follow the run on screen: the attached job's 4
       * micro-batches, not the window's default 8 */
      {
        const PpTraceDescription *d = pp_timeline_model_description (pp_recording_get_model (r0));
        int m = gtk_spin_button_get_value_as_int (w->microbatches);
        say ("controls after attaching: %d ranks, %d micro-batches",
             gtk_spin_button_get_value_as_int (w->ranks), m);
        if (d == NULL || m != d->n_microbatches
            || gtk_spin_button_get_value_as_int (w->ranks) != d->n_ranks)
          {
            fail (t, "the controls should say what the run on screen ran");
            return TRUE;
          }
      }
      pp_window_show_attach_dialog (w);
      next_step (t);
      return FALSE;

    case 1:
      {
        gboolean listed = FALSE;
        for (guint i = 0; w->attach_pids && i < w->attach_pids->len; i++)
          if (g_array_index (w->attach_pids, int, i) == pp_recording_get_pid (r0))
            listed = TRUE;
        if (!listed)
          {
            /* The job may have ended on its own meanwhile: then it is not listed. */
            if (pp_recording_get_state (r0) == PP_RECORDING_ENDED)
              say ("job ended before the dialog listed it");
            else
              return FALSE;
          }
        else
          say ("the attach dialog lists pid %d", pp_recording_get_pid (r0));
        if (w->attach_dialog)
          gtk_window_destroy (GTK_WINDOW (w->attach_dialog));
        say ("attached");   /* the test kills the job now */
        next_step (t);
        return FALSE;
      }

    case 2:
      if (pp_recording_get_state (r0) != PP_RECORDING_ENDED)
        return FALSE;
      {
        const char *sub = adw_window_title_get_subtitle (w->title);
        say ("run ended: subtitle \"%s\", %zu spans kept", sub,
             pp_timeline_model_n_spans_total (pp_recording_get_model (r0)));
        /* the test killed the job (SIGKILL): the run says killed, not ended */
        if (!pp_recording_has_spans_on_every_rank (r0) || !strstr (sub, "killed"))
          {
            fail (t, "a run whose job was killed keeps its data and says it was killed");
            return TRUE;
          }
        /* and its rows are marked lost from their last events on (issue 17) */
        PpTimelineModel *m = pp_recording_get_model (r0);
        int lost = 0;
        for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
          lost += pp_timeline_model_rank_lost (m, r) != INT64_MAX;
        say ("%d of %d ranks marked lost", lost, pp_timeline_model_n_ranks (m));
        if (lost != pp_timeline_model_n_ranks (m))
          {
            fail (t, "a killed job's ranks should be marked lost");
            return TRUE;
          }
      }
      say ("closing the window");
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  return FALSE;
}

/* Zooms the first timeline to `count` steps from step `first` (from the
 * end when first < 0). */
static void
zoom_to_steps (PpWindow *w, int first, int count)
{
  PpTimelineModel *m = pp_recording_get_model (w->shown[0]);
  size_t n = pp_timeline_model_n_steps (m);
  const int64_t *starts = pp_timeline_model_step_starts (m);
  if (n < 2)
    return;
  if (first < 0)
    first = MAX (0, (int) n - 1 - count);
  int last = MIN ((int) n - 1, first + count);
  gint64 t0 = starts[first], t1 = starts[last];
  gint64 pad = (t1 - t0) / 50;
  if (t1 > t0)
    pp_timeline_widget_set_range (w->timeline[0], t0 - pad, t1 + pad);
}

/* demo, demo-compare: set the window up for a screenshot and stay open. */
static gboolean
tick_demo (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0), *r1 = pp_self_test_run_at (w, 1);
  gboolean compare = strcmp (t->mode, "demo-compare") == 0;
  switch (t->step)
    {
    case 0:
      if (!r0 || pp_recording_get_state (r0) != PP_RECORDING_ENDED)
        return FALSE;
      if (strcmp (t->mode, "demo-attach") == 0 || strcmp (t->mode, "demo-screenshot") == 0)
        {
          if (t->mode[5] == 'a')
            pp_window_show_attach_dialog (w);
          else
            pp_window_show_screenshot_dialog (w);
          say ("demo ready");
          t->done = TRUE;
          return TRUE;
        }
      if (!compare)
        {
          gtk_toggle_button_set_active (w->plan_toggle, TRUE);
          zoom_to_steps (w, -1, 3);
          say ("demo ready");
          t->done = TRUE;
          return TRUE;
        }
      gtk_spin_button_set_value (w->microbatches, 16);
      g_action_group_activate_action (G_ACTION_GROUP (w), "run", NULL);
      next_step (t);
      return FALSE;
    case 1:
      if (!r1 || pp_recording_get_state (r1) != PP_RECORDING_ENDED)
        return FALSE;
      gtk_list_box_select_all (w->run_list);
      zoom_to_steps (w, 100, 3);
      say ("demo ready");
      t->done = TRUE;
      return TRUE;
    }
  return FALSE;
}

/* ---- bench-stream -------------------------------------------------------------- */

#define BENCH_US (5 * G_USEC_PER_SEC)

/* Every frame: the timeline is drawn again (as a view that keeps moving
 * would be), so the frames counted are frames the window could draw. */
static gboolean
bench_tick (GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
  gtk_widget_queue_draw (widget);
  return G_SOURCE_CONTINUE;
}

static void
bench_after_paint (GdkFrameClock *clock, struct PpSelfTest *t)
{
  t->bench_frames++;
}

/* Runs every millisecond when the main loop is free: the gaps between two
 * runs are how long the loop was busy elsewhere. */
static gboolean
bench_loop_probe (gpointer data)
{
  struct PpSelfTest *t = data;
  gint64 now = g_get_monotonic_time ();
  gint64 gap = now - t->bench_last_loop;
  g_array_append_val (t->bench_gaps, gap);
  t->bench_last_loop = now;
  return G_SOURCE_CONTINUE;
}

static void
bench_stop (struct PpSelfTest *t)
{
  if (t->bench_tick_cb && t->bench_widget)
    gtk_widget_remove_tick_callback (t->bench_widget, t->bench_tick_cb);
  t->bench_tick_cb = 0;
  g_clear_object (&t->bench_widget);
  if (t->bench_paint_id && t->bench_clock)
    g_signal_handler_disconnect (t->bench_clock, t->bench_paint_id);
  t->bench_paint_id = 0;
  g_clear_object (&t->bench_clock);
  g_clear_handle_id (&t->bench_loop_id, g_source_remove);
}

static int
cmp_gint64 (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;
  return (x > y) - (x < y);
}

static gboolean
tick_bench_stream (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  switch (t->step)
    {
    case 0:
      if (!r0 || pp_recording_get_state (r0) != PP_RECORDING_LIVE || !pp_recording_has_spans_on_every_rank (r0) ||
          w->shown[0] != r0 || !gtk_widget_get_realized (GTK_WIDGET (w->timeline[0])))
        return FALSE;
      say ("attached to pid %d: %d ranks, measuring for %d s", pp_recording_get_pid (r0),
           pp_timeline_model_n_ranks (pp_recording_get_model (r0)), (int) (BENCH_US / G_USEC_PER_SEC));
      t->bench_widget = g_object_ref (GTK_WIDGET (w->timeline[0]));
      t->bench_clock = g_object_ref (gtk_widget_get_frame_clock (GTK_WIDGET (w)));
      t->bench_gaps = g_array_sized_new (FALSE, FALSE, sizeof (gint64), 8192);
      t->bench_tick_cb = gtk_widget_add_tick_callback (t->bench_widget, bench_tick, t, NULL);
      t->bench_paint_id = g_signal_connect (t->bench_clock, "after-paint", G_CALLBACK (bench_after_paint), t);
      t->bench_frames = 0;
      t->bench_spans0 = pp_timeline_model_n_spans_total (pp_recording_get_model (r0));
      t->bench_start = t->bench_last_loop = g_get_monotonic_time ();
      t->bench_loop_id = g_timeout_add_full (G_PRIORITY_HIGH, 1, bench_loop_probe, t, NULL);
      next_step (t);
      return FALSE;

    case 1:
      {
        gint64 now = g_get_monotonic_time ();
        if (now - t->bench_start < BENCH_US)
          return FALSE;
        double secs = (now - t->bench_start) / (double) G_USEC_PER_SEC;
        size_t spans = pp_timeline_model_n_spans_total (pp_recording_get_model (r0)) - t->bench_spans0;
        guint frames = t->bench_frames;
        bench_stop (t);
        double gap_max = 0, gap_p99 = 0;
        if (t->bench_gaps->len > 0)
          {
            g_array_sort (t->bench_gaps, cmp_gint64);
            guint n = t->bench_gaps->len;
            gap_max = g_array_index (t->bench_gaps, gint64, n - 1) / 1000.0;
            gap_p99 = g_array_index (t->bench_gaps, gint64, MIN (n - 1, (guint) (n * 0.99))) / 1000.0;
          }
        say ("%u frames, %u main-loop probes, %zu spans in %.2f s (run %s)", frames,
             t->bench_gaps->len, spans, secs,
             pp_recording_get_state (r0) == PP_RECORDING_LIVE ? "still live" : "no longer live");
        printf ("bench-stream: %.0f spans/s, %.1f fps, main-loop gap max %.1f ms p99 %.1f ms\n",
                spans / secs, frames / secs, gap_max, gap_p99);
        fflush (stdout);
        if (pp_recording_get_state (r0) != PP_RECORDING_LIVE)
          {
            fail (t, "the job stopped streaming during the measurement");
            return TRUE;
          }
      }
      /* Attached, so the job is not ours: it keeps running. */
      say ("closing the window");
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  return FALSE;
}

/* profile: Profile a command with the one in PIPESCOPE_SELF_TEST_PROFILE (a
 * PyTorch or megatron-core job), as the dialog does; the run it adds (not run
 * 0, the default run without --no-run) is on screen with a row per rank,
 * spans on every one (with PIPESCOPE_SELF_TEST_SHOTS=DIR, DIR/profile.png);
 * then Stop ends it. */
static gboolean
tick_profile (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = t->step > 0 ? pp_self_test_run_at (w, t->profiled) : NULL;
  switch (t->step)
    {
    case 0:
      {
        const char *cmd = g_getenv ("PIPESCOPE_SELF_TEST_PROFILE");
        g_autoptr (GError) error = NULL;
        if (cmd == NULL || !*cmd)
          {
            fail (t, "profile needs PIPESCOPE_SELF_TEST_PROFILE, the command to profile");
            return TRUE;
          }
        say ("profiling: %s", cmd);
        t->profiled = g_list_model_get_n_items (G_LIST_MODEL (w->runs));
        if (!pp_window_profile (w, cmd, &error))
          {
            g_autofree char *why = g_strdup_printf ("profile did not start: %s", error->message);
            fail (t, why);
            return TRUE;
          }
        next_step (t);
        /* PyTorch takes a while to import and to build its schedule */
        t->deadline = g_get_monotonic_time () + 4 * STEP_TIMEOUT_US;
        return FALSE;
      }
    case 1:
      {
        PpTimelineModel *m = r0 ? pp_recording_get_model (r0) : NULL;
        const PpTraceDescription *d = m ? pp_timeline_model_description (m) : NULL;
        /* before its first block: words, not an empty timeline */
        if (m && pp_timeline_model_n_spans_total (m) == 0 && w->shown[0] == r0)
          {
            const char *page = gtk_stack_get_visible_child_name (w->main_stack);
            if (g_strcmp0 (page, "empty") == 0
                && g_strcmp0 (adw_status_page_get_title (w->empty_page), "Waiting for Ranks") == 0)
              t->saw_waiting = TRUE;
            else
              {
                fail (t, "a profiled job with no block yet should show 'Waiting for Ranks'");
                return TRUE;
              }
          }
        if (!d || pp_timeline_model_n_ranks (m) < 2 || !pp_recording_has_spans_on_every_rank (r0))
          return FALSE;
        say ("'Waiting for Ranks' %s before the first block; then the timeline (%s)",
             t->saw_waiting ? "shown" : "not seen", gtk_stack_get_visible_child_name (w->main_stack));
        if (g_strcmp0 (gtk_stack_get_visible_child_name (w->main_stack), "timeline") != 0)
          {
            fail (t, "a profiled job with blocks should show its timeline");
            return TRUE;
          }
        char row0[96], row1[96];
        pp_timeline_model_rank_label (m, 0, row0, sizeof row0);
        pp_timeline_model_rank_label (m, 1, row1, sizeof row1);
        say ("profiled %s: %s, %d ranks, rows '%s' and '%s' (%zu spans)", pp_recording_get_title (r0),
             d->schedule, pp_timeline_model_n_ranks (m), row0, row1, pp_timeline_model_n_spans_total (m));
        const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
        if (dir && *dir)
          {
            g_autofree char *path = g_build_filename (dir, "profile.png", NULL);
            g_autoptr (GError) error = NULL;
            if (!pp_window_save_screenshot (w, path, TRUE, 1600, 900, &error))
              say ("screenshot %s: %s", path, error->message);
          }
        pp_recording_stop (r0);
        next_step (t);
        return FALSE;
      }
    case 2:
      if (pp_recording_child_running (r0))
        return FALSE;
      say ("the profiled job stopped");
      /* its trace, kept by default where the window said (issue 30) */
      {
        const char *report = pp_recording_get_report_path (r0);
        PpError err = { 0 };
        PpTimelineModel *m = report ? pp_timeline_model_new_from_file (report, &err) : NULL;
        say ("profile trace: %s, %zu spans", report ? report : "none",
             m ? pp_timeline_model_n_spans_total (m) : (size_t) 0);
        if (m == NULL || pp_timeline_model_n_spans_total (m) == 0)
          {
            pp_timeline_model_free (m);
            fail (t, "Profile a Command should keep the job's trace");
            return TRUE;
          }
        pp_timeline_model_free (m);
      }
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  return FALSE;
}

/* open: the files given are on screen as runs; one line says what they hold */
static GtkWidget *
label_with_text (GtkWidget *w, const char *text)
{
  if (GTK_IS_LABEL (w) && g_strcmp0 (gtk_label_get_text (GTK_LABEL (w)), text) == 0)
    return w;
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = label_with_text (c, text);
      if (found != NULL)
        return found;
    }
  return NULL;
}

static gboolean
tick_open (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  PpTimelineModel *m = r0 ? pp_recording_get_model (r0) : NULL;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0)
    return FALSE;
  const PpTraceDescription *d = pp_timeline_model_description (m);
  /* the run controls' titles laid out: on how many lines "Schedule" went
   * (issue 42: a long schedule name squeezed it to "Sch-edul-e") */
  GtkWidget *title = label_with_text (GTK_WIDGET (w), "Schedule");
  if (title == NULL || gtk_widget_get_width (title) == 0 || t->step++ < 2)
    return FALSE;   /* a frame or two: laid out with the run's schedule */
  say ("opened %u run(s): %d ranks, %zu spans, schedule %s", g_list_model_get_n_items (G_LIST_MODEL (w->runs)),
       pp_timeline_model_n_ranks (m), pp_timeline_model_n_spans_total (m), d ? d->schedule : "unknown");
  say ("the Schedule title on %d line(s)", pango_layout_get_line_count (gtk_label_get_layout (GTK_LABEL (title))));
  t->done = TRUE;
  gtk_window_close (GTK_WINDOW (w));
  return TRUE;
}

/* save: the default run, stopped after a few steps, saved as Save Trace
 * does and opened again: the copy holds what the window showed (its spans
 * and steps, counted). */
static gboolean
tick_save (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0), *r1 = pp_self_test_run_at (w, 1);
  PpTimelineModel *m0 = r0 ? pp_recording_get_model (r0) : NULL;
  switch (t->step)
    {
    case 0:
      if (!r0 || !pp_recording_has_spans_on_every_rank (r0) || pp_timeline_model_n_steps (m0) < 3)
        return FALSE;
      remember_pid (t, r0);
      pp_recording_stop (r0);
      next_step (t);
      return FALSE;
    case 1:
      if (pp_recording_get_state (r0) != PP_RECORDING_ENDED || pp_recording_child_running (r0))
        return FALSE;
      {
        g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "pipescope-self-test", NULL);
        g_mkdir_with_parents (dir, 0700);
        g_free (t->json);
        t->json = g_build_filename (dir, "saved.pptrace", NULL);
        g_autoptr (GError) error = NULL;
        if (!pp_window_save_trace_to (w, t->json, &error))
          {
            fail (t, error->message);
            return TRUE;
          }
        say ("saved %s: %zu spans, %zu steps shown", t->json, pp_timeline_model_n_spans_total (m0),
             pp_timeline_model_n_steps (m0));
        g_autoptr (GFile) file = g_file_new_for_path (t->json);
        pp_window_open_file (w, file);
      }
      next_step (t);
      return FALSE;
    case 2:
      if (!r1 || pp_timeline_model_n_spans_total (pp_recording_get_model (r1)) == 0)
        return FALSE;
      {
        PpTimelineModel *m1 = pp_recording_get_model (r1);
        say ("reopened %s: %zu spans, %zu steps", pp_recording_get_status (r1),
             pp_timeline_model_n_spans_total (m1), pp_timeline_model_n_steps (m1));
        if (pp_timeline_model_n_spans_total (m1) != pp_timeline_model_n_spans_total (m0)
            || pp_timeline_model_n_steps (m1) != pp_timeline_model_n_steps (m0))
          {
            fail (t, "the saved trace does not hold what the window showed");
            return TRUE;
          }
      }
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  return FALSE;
}

/* open-error: a file the window cannot show (a torch.profiler trace with
 * no pipeline labels): the empty page says why, as text; the line printed
 * is what a user reads there (the description's markup parsed as GTK does) */
static gboolean
tick_open_error (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  const char *title = adw_status_page_get_title (w->empty_page);
  if (g_list_model_get_n_items (G_LIST_MODEL (w->runs)) > 0)
    {
      fail (t, "a file that cannot be opened added a run");
      return TRUE;
    }
  if (g_strcmp0 (title, "No Run Selected") == 0)
    return FALSE;
  const char *desc = adw_status_page_get_description (w->empty_page);
  g_autofree char *shown = NULL;
  g_autoptr (GError) error = NULL;
  if (!pango_parse_markup (desc ? desc : "", -1, 0, NULL, &shown, NULL, &error))
    {
      g_autofree char *why = g_strdup_printf ("the empty page's description is not valid markup: %s",
                                              error->message);
      fail (t, why);
      return TRUE;
    }
  say ("open failed, shown: %s", title);
  say ("reason shown: %s", shown);
  t->done = TRUE;
  gtk_window_close (GTK_WINDOW (w));
  return TRUE;
}

/* replicas: the rows of a job of replicas, each view in turn */
static gboolean
replicas_shot (struct PpSelfTest *t, const char *name)
{
  const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
  g_autoptr (GError) error = NULL;
  if (dir == NULL || !*dir)
    return TRUE;
  g_autofree char *path = g_strdup_printf ("%s/replicas-%s.png", dir, name);
  if (!pp_window_save_screenshot (t->win, path, TRUE, 1600, 900, &error))
    {
      g_autofree char *why = g_strdup_printf ("screenshot %s: %s", path, error->message);
      fail (t, why);
      return FALSE;
    }
  return TRUE;
}

static gboolean
tick_replicas (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpTimelineWidget *tl = w->timeline[0];
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  PpTimelineModel *m = r0 ? pp_recording_get_model (r0) : NULL;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0 || !pp_timeline_widget_has_replicas (tl))
    return FALSE;
  int P = pp_timeline_model_n_ranks (m), D = pp_timeline_model_dp_size (m);
  struct { const char *name; int rows; } want[] = {
    { "folded", P }, { "rank-1-unfolded", P - 1 + D }, { "all", P * D }, { "replica-1", P }, { "folded-again", P },
  };
  /* each step: what the user does, then the rows it must give */
  switch (t->step)
    {
    case 0:   /* as opened: folded, and the switch says so */
      if (gtk_drop_down_get_selected (w->replicas_switch) != 0
          || !gtk_widget_get_visible (GTK_WIDGET (w->replicas_switch)))
        {
          fail (t, "the replicas switch is not shown on Fold");
          return TRUE;
        }
      break;
    case 1:   /* what a click on rank 1's label does */
      pp_timeline_widget_toggle_rank (tl, 1);
      break;
    case 2:   /* Ctrl+U */
      g_action_group_activate_action (G_ACTION_GROUP (w), "unfold-replicas", NULL);
      if (gtk_drop_down_get_selected (w->replicas_switch) != 1)
        {
          fail (t, "Ctrl+U did not set the switch to a row a process");
          return TRUE;
        }
      break;
    case 3:   /* the switch: Replica 1 */
      gtk_drop_down_set_selected (w->replicas_switch, 3);
      break;
    case 4:   /* the switch: Fold */
      gtk_drop_down_set_selected (w->replicas_switch, 0);
      break;
    default:
      t->done = TRUE;
      gtk_window_close (GTK_WINDOW (w));
      return TRUE;
    }
  int rows = pp_timeline_widget_n_rows (tl);
  say ("replicas %s: %d rows (P %d, D %d)", want[t->step].name, rows, P, D);
  if (t->step == 0)   /* issue 37: the banner over the timeline, as shown */
    say ("stuck banner: %s", gtk_widget_get_visible (GTK_WIDGET (w->stuck_banner))
                             ? gtk_label_get_text (w->stuck_banner) : "(none)");
  if (rows != want[t->step].rows)
    {
      g_autofree char *why = g_strdup_printf ("%s: %d rows, not %d", want[t->step].name, rows, want[t->step].rows);
      fail (t, why);
      return TRUE;
    }
  if (!replicas_shot (t, want[t->step].name))
    return TRUE;
  t->step++;
  return FALSE;
}

/* host-lane: a trace with a GC pause (tests/pp-synth-host.c) opened, zoomed
 * to the pause's step, the pointer put over the pause in its rank's host
 * lane: the tooltip must name it; with PIPESCOPE_SELF_TEST_SHOTS=DIR the
 * view is saved as DIR/host-lane.png (issue 29). */
char *pp_timeline_widget_tooltip_text (PpTimelineWidget *self, double x, double y);

static gboolean
tick_host_lane (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpTimelineWidget *tl = w->timeline[0];
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  PpTimelineModel *m = r0 ? pp_recording_get_model (r0) : NULL;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0)
    return FALSE;
  /* the first GC pause of any rank */
  int rank = -1;
  const PpSpan *gc = NULL;
  for (int r = 0; r < pp_timeline_model_n_ranks (m) && gc == NULL; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      for (size_t i = 0; i < pp_timeline_model_n_spans (m, r) && gc == NULL; i++)
        if (sp[i].kind == PP_SPAN_GC)
          {
            gc = &sp[i];
            rank = r;
          }
    }
  if (gc == NULL)
    {
      fail (t, "the trace has no GC pause");
      return TRUE;
    }
  if (t->step == 0)
    {
      /* its step, as a user would zoom to it */
      int64_t mid = gc->start_ns / 2 + gc->end_ns / 2, len = gc->end_ns - gc->start_ns;
      pp_timeline_widget_set_range (tl, mid - 6 * len, mid + 6 * len);
      t->step++;
      return FALSE;
    }
  PpTimelineView v;
  PpTimelineLayout l;
  pp_timeline_widget_get_view (tl, &v);
  pp_timeline_layout (pp_timeline_widget_get_drawn_model (tl), &v, &l);
  if (l.host_h <= 0)
    {
      fail (t, "no host lane is drawn for a trace with a GC pause");
      return TRUE;
    }
  double x = pp_timeline_x_of (&v, &l, gc->start_ns / 2 + gc->end_ns / 2);
  double y = l.rows_y + rank * l.row_h + l.block_h + l.thin_h + l.plan_h + l.host_h * 0.25;
  g_autofree char *tip = pp_timeline_widget_tooltip_text (tl, x, y);
  say ("host lane tooltip: %s", tip ? tip : "(none)");
  if (tip == NULL || strstr (tip, "GC pause") == NULL)
    {
      fail (t, "the tooltip over the GC pause does not name it");
      return TRUE;
    }
  const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
  if (dir != NULL && *dir)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *path = g_build_filename (dir, "host-lane.png", NULL);
      if (!pp_window_save_screenshot (w, path, TRUE, 1400, 560, &error))
        {
          g_autofree char *why = g_strdup_printf ("screenshot %s: %s", path, error->message);
          fail (t, why);
          return TRUE;
        }
    }
  t->done = TRUE;
  gtk_window_close (GTK_WINDOW (w));
  return TRUE;
}

/* demo-why FILE: the file's last steps zoomed, the Why tab shown, the
 * window left open (tools/why-screenshot.sh captures it). */
static gboolean
tick_demo_why (struct PpSelfTest *t)
{
  PpWindow *w = t->win;
  PpRecording *r0 = pp_self_test_run_at (w, 0);
  PpTimelineModel *m = r0 ? pp_recording_get_model (r0) : NULL;
  if (m == NULL || pp_timeline_model_n_spans_total (m) == 0 || w->shown[0] == NULL)
    return FALSE;
  zoom_to_steps (w, -1, 2);
  GtkWidget *stack = gtk_widget_get_ancestor (GTK_WIDGET (w->why), ADW_TYPE_VIEW_STACK);
  if (stack != NULL)
    adw_view_stack_set_visible_child_name (ADW_VIEW_STACK (stack), "why");
  say ("demo ready");
  t->done = TRUE;
  return TRUE;
}

/* What a mode driven a step at a time in a file of its own answers
 * (pp-self-test-spans.c, pp-self-test-stragglers.c): 0 again later, 1 the
 * next step, 2 done (the window closed, or left open and "demo ready"
 * said for a demo), else failed (why). */
static gboolean
tick_by_steps (struct PpSelfTest *t, int rc, const char *why, gboolean demo)
{
  switch (rc)
    {
    case 0:
      return FALSE;
    case 1:
      next_step (t);
      return FALSE;
    case 2:
      t->done = TRUE;
      if (demo)
        say ("demo ready");
      else
        gtk_window_close (GTK_WINDOW (t->win));
      return TRUE;
    default:
      fail (t, why ? why : t->mode);
      return TRUE;
    }
}

/* stragglers and demo-stragglers: the Stragglers tab (pp-self-test-stragglers.c) */
static gboolean
tick_stragglers (struct PpSelfTest *t)
{
  g_autofree char *why = NULL;
  gboolean demo = strcmp (t->mode, "demo-stragglers") == 0;
  int rc = pp_self_test_stragglers (t->win, pp_self_test_run_at (t->win, 0), t->step, demo, &why);
  return tick_by_steps (t, rc, why, demo);
}

/* analysis: the panels analysed off the main loop (pp-self-test-analysis.c) */
static gboolean
tick_analysis (struct PpSelfTest *t)
{
  g_autofree char *why = NULL;
  int rc = pp_self_test_analysis (t->win, t->step, &why);
  return tick_by_steps (t, rc, why, FALSE);
}

/* compare: the Compare table filled off the main loop (pp-self-test-compare.c) */
static gboolean
tick_compare (struct PpSelfTest *t)
{
  g_autofree char *why = NULL;
  int rc = pp_self_test_compare (t->win, t->step, &why);
  return tick_by_steps (t, rc, why, FALSE);
}

/* spans: the Spans tab and Find (pp-self-test-spans.c) */
static gboolean
tick_spans (struct PpSelfTest *t)
{
  g_autofree char *why = NULL;
  int rc = pp_self_test_spans (t->win, t->step, &why);
  return tick_by_steps (t, rc, why, FALSE);
}

static gboolean
self_test_tick (gpointer data)
{
  struct PpSelfTest *t = data;
  if (t->done)
    {
      t->tick_id = 0;
      return G_SOURCE_REMOVE;
    }
  if (g_get_monotonic_time () > t->deadline)
    {
      g_autofree char *why = g_strdup_printf ("step %d of '%s' timed out", t->step, t->mode);
      fail (t, why);
      return G_SOURCE_REMOVE;
    }
  gboolean finished = strcmp (t->mode, "run") == 0 ? tick_run (t)
                    : strcmp (t->mode, "attach") == 0 ? tick_attach (t)
                    : strcmp (t->mode, "bench-stream") == 0 ? tick_bench_stream (t)
                    : strcmp (t->mode, "open") == 0 || strcmp (t->mode, "second-instance") == 0 ? tick_open (t)
                    : strcmp (t->mode, "open-error") == 0 ? tick_open_error (t)
                    : strcmp (t->mode, "save") == 0 ? tick_save (t)
                    : strcmp (t->mode, "replicas") == 0 ? tick_replicas (t)
                    : strcmp (t->mode, "host-lane") == 0 ? tick_host_lane (t)
                    : strcmp (t->mode, "demo-why") == 0 ? tick_demo_why (t)
                    : strcmp (t->mode, "spans") == 0 ? tick_spans (t)
                    : strcmp (t->mode, "analysis") == 0 ? tick_analysis (t)
                    : strcmp (t->mode, "compare") == 0 ? tick_compare (t)
                    : g_str_has_suffix (t->mode, "stragglers") ? tick_stragglers (t)
                    : strcmp (t->mode, "profile") == 0 ? tick_profile (t) : tick_demo (t);
  if (finished)
    {
      t->tick_id = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

void
pp_window_start_self_test (PpWindow *self, const char *mode)
{
  g_return_if_fail (PP_IS_WINDOW (self));
  struct PpSelfTest *t = g_new0 (struct PpSelfTest, 1);
  t->win = self;
  t->mode = g_strdup (mode);
  t->pids = g_array_new (FALSE, FALSE, sizeof (int));
  t->deadline = g_get_monotonic_time () + STEP_TIMEOUT_US;
  self->self_test = t;
  t->tick_id = g_timeout_add (100, self_test_tick, t);
  if (strcmp (mode, "analysis") == 0)
    pp_self_test_analysis_begin (self);
  say ("mode %s", mode);
}

void
pp_self_test_window_closed (struct PpSelfTest *t)
{
  if (t->tick_id)
    g_source_remove (t->tick_id);
  t->tick_id = 0;
  bench_stop (t);
  if (self_test_result == 0 && t->done && strcmp (t->mode, "analysis") == 0)
    pp_self_test_analysis_closing (t->win);
  if (self_test_result != 0)
    return;
  if (!t->done)
    {
      say ("FAIL: the window closed before the test ended");
      self_test_result = 1;
      return;
    }
  for (guint i = 0; i < t->pids->len; i++)
    {
      int pid = g_array_index (t->pids, int, i);
      if (kill (pid, 0) == 0 || errno != ESRCH)
        {
          say ("FAIL: job pid %d still exists after the window closed", pid);
          self_test_result = 1;
          return;
        }
    }
  if (strcmp (t->mode, "run") == 0)
    {
      /* The processes the app started are gone; a rank that mpirun started
       * may still be on its way out (mpirun does not wait for every rank's
       * exit), and its entry goes with it.  So: until none is left, for at
       * most 10 s, then name what is left and what state its process is in. */
      PpJobInfo *jobs = NULL;
      size_t n = 0;
      for (int tries = 0; tries < 100; tries++)
        {
          free (jobs);
          jobs = NULL;
          n = 0;
          if (pp_registry_list (&jobs, &n, NULL) != PP_OK || n == 0)
            break;
          g_usleep (100 * 1000);
        }
      if (n != 0)
        {
          for (size_t i = 0; i < n; i++)
            {
              char path[64], state = '?';
              snprintf (path, sizeof path, "/proc/%d/stat", (int) jobs[i].pid);
              FILE *f = fopen (path, "r");
              if (f != NULL)
                {
                  char buf[512];
                  size_t len = fread (buf, 1, sizeof buf - 1, f);
                  buf[len] = '\0';
                  const char *close = strrchr (buf, ')');
                  if (close != NULL && close[1] == ' ')
                    state = close[2];
                  fclose (f);
                }
              say ("still registered: %s (pid %d, process state %c)", jobs[i].name,
                   (int) jobs[i].pid, state);
            }
          free (jobs);
          say ("FAIL: %zu jobs still registered 10 s after the window closed", n);
          self_test_result = 1;
          return;
        }
      free (jobs);
    }
  say ("PASS: %s (%u job(s) of ours, all exited)", t->mode, t->pids->len);
}

void
pp_self_test_free (struct PpSelfTest *t)
{
  if (!t)
    return;
  if (t->tick_id)
    g_source_remove (t->tick_id);
  bench_stop (t);
  if (t->bench_gaps)
    g_array_unref (t->bench_gaps);
  g_array_unref (t->pids);
  g_free (t->mode);
  g_free (t->png);
  g_free (t->svg);
  g_free (t->json);
  g_free (t);
}
