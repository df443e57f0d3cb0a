/* test-widgets-panels.c — the panels under the timeline in the window's widgets: Statistics, Why, What if, the loss and memory charts, Compare, the Spans tab and the Stragglers tab. */
#include "test-widgets-private.h"

/* ---- panels -------------------------------------------------------------------- */

/* A 2 x 2 job of replicas, replica dp 1 ending each block 0.5 ms late. */
static PpTimelineModel *
replicas_model (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  const gint64 S = G_GINT64_CONSTANT (1000000000);
  add_description (m, 2, 1, S);
  for (int g = 0; g < 4; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info.process = g;
      it.process_info.rank = g / 2;
      it.process_info.coord[PP_TRACE_MESH_PP] = g / 2;
      it.process_info.coord[PP_TRACE_MESH_DP] = g % 2;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        it.process_info.size[d] = d <= PP_TRACE_MESH_DP ? 2 : 1;
      it.process_info.pid = 100 + g;
      g_snprintf (it.process_info.host, sizeof it.process_info.host, "node%d", g);
      pp_timeline_model_add (m, &it);
      PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN, .process = g };
      sp.span.rank = g / 2;
      sp.span.stage = g / 2;
      sp.span.kind = PP_SPAN_F;
      sp.span.microbatch = 0;
      sp.span.peer_rank = -1;
      sp.span.device = 0xffff;
      sp.span.start_ns = S + MS * (g / 2);
      sp.span.end_ns = sp.span.start_ns + MS + (g % 2) * MS / 2;
      pp_timeline_model_add (m, &sp);
    }
  return m;
}

/* The rows of a job of replicas: folded (2), a click on rank 1's label
 * unfolds it (3) and folds it again (2), all (4); a folded block's tooltip
 * names the slowest replica, its host and how late it ended. */
static void
test_timeline_replicas (void)
{
  PpTimelineModel *m = replicas_model ();
  GtkWidget *tl = pp_timeline_widget_new ();
  PpTimelineWidget *t = PP_TIMELINE_WIDGET (tl);
  pp_timeline_widget_set_model (t, m);
  GtkWidget *win = window_with (tl, WIN_W, WIN_H);
  g_assert_true (pp_timeline_widget_has_replicas (t));
  g_assert_true (pp_timeline_widget_get_model (t) == m);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 2);

  PpTimelineModel *dm = pp_timeline_widget_get_drawn_model (t);
  PpTimelineView v;
  PpTimelineLayout l;
  pp_timeline_widget_get_view (t, &v);
  pp_timeline_layout (dm, &v, &l);
  /* rank 0's folded F0: of [0, 1) and [0, 1.5) ms, dp 0's copy (the lower
   * middle: a copy a replica ran), over a band to 1.5 */
  double x = pp_timeline_x_of (&v, &l, pp_timeline_model_start_ns (dm) + MS / 2);
  double y = l.rows_y + 0.5 * l.block_h;
  char *text = pp_timeline_widget_tooltip_text (t, x, y);
  g_assert_nonnull (text);
  g_assert_nonnull (strstr (text, "CPU rank 0 \u00d72 · stage 0 · micro-batch 0 · F"));
  g_assert_nonnull (strstr (text, "\nthe median of 2 replicas; the slowest, dp 1 (process 1 on node1), ends "
                                  "0.500 ms after the median end; the copy drawn is dp 0's; the band: the "
                                  "replicas' copies, 0.000 ms to 1.500 ms"));
  g_assert_null (strstr (text, "out of step"));   /* the copies overlap */
  g_free (text);
  /* the row's label: what a folded row draws */
  text = pp_timeline_widget_tooltip_text (t, l.x0 - 20, y);
  g_assert_nonnull (text);
  g_assert_nonnull (strstr (text, "CPU rank 0 \u00d72: 2 replicas folded; each block is the copy of the replica "
                                  "with the median start"));
  g_assert_null (strstr (text, "out of step"));
  g_free (text);

  /* a click on rank 1's label, as the pointer gives it */
  GtkGesture *click = NULL;
  GListModel *cs = gtk_widget_observe_controllers (tl);
  for (guint i = 0; i < g_list_model_get_n_items (cs) && click == NULL; i++)
    {
      GObject *c = g_list_model_get_item (cs, i);
      if (GTK_IS_GESTURE_CLICK (c))
        click = GTK_GESTURE (c);
      g_object_unref (c);
    }
  g_object_unref (cs);
  g_assert_nonnull (click);
  double lx = l.x0 / 2, ly = l.rows_y + 1.5 * l.row_h;
  g_signal_emit_by_name (click, "released", 1, lx, ly);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 3);
  dm = pp_timeline_widget_get_drawn_model (t);
  char label[64];
  pp_timeline_model_rank_label (dm, 2, label, sizeof label);
  g_assert_cmpstr (label, ==, "CPU rank 1 dp 1");
  g_signal_emit_by_name (click, "released", 1, lx, ly);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 2);

  pp_timeline_widget_set_replicas (t, -2);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 4);
  pp_timeline_widget_set_replicas (t, 1);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 2);
  pp_timeline_widget_set_replicas (t, -1);
  g_assert_cmpint (pp_timeline_widget_n_rows (t), ==, 2);

  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* A job of 2 pipeline ranks x 2 replicas: the rows fold the replicas, the
 * statistics are one replica's, and say whose. */
static void
test_stats_replicas (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  GtkWidget *p = pp_stats_panel_new ();
  GString *text = g_string_new (NULL);

  add_description (m, 2, 1, 0);
  for (int g = 0; g < 4; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info.process = g;
      it.process_info.rank = g / 2;
      it.process_info.coord[PP_TRACE_MESH_PP] = g / 2;
      it.process_info.coord[PP_TRACE_MESH_DP] = g % 2;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        it.process_info.size[d] = d <= PP_TRACE_MESH_DP ? 2 : 1;
      it.process_info.pid = 100 + g;
      g_strlcpy (it.process_info.host, "h", sizeof it.process_info.host);
      pp_timeline_model_add (m, &it);
      PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN, .process = g };
      sp.span.rank = g / 2;
      sp.span.stage = g / 2;
      sp.span.kind = PP_SPAN_F;
      sp.span.microbatch = 0;
      sp.span.peer_rank = -1;
      sp.span.device = 0xffff;
      sp.span.start_ns = 1000000 * (g / 2);
      sp.span.end_ns = sp.span.start_ns + 1000000;
      pp_timeline_model_add (m, &sp);
    }
  g_object_ref_sink (p);
  pp_stats_panel_update (PP_STATS_PANEL (p), m);
  collect_labels (p, text);
  /* the two copies tie (one step each, equal): the lower middle, dp 0 */
  g_assert_nonnull (strstr (text->str, "4 processes, 2 a pipeline rank, folded in the timeline; these figures: "
                               "the median copy's (replica dp 0, by step length)"));
  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (m);
}

/* The Why tab names what runtime is made of (issue 29): a GPipe 2 x 2
 * trace (F 1 ms, B 2 ms) whose blocks from 3 ms on are 4 ms late, with a
 * 3 ms GC in rank 1's gap and rank 0's run delay growing 1.5 ms across
 * its gap (counters at its block edges): the panel's runtime parts are
 * the analysis's, and its text names them with their shares. */
static void
test_why_runtime_parts (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-widgets-why-rt-");
  char *path = pp_test_ctx_path (&c, "run.pptrace");
  PpSchedule *s = pp_test_generate ("GPipe", 2, 2, 1);
  PpSimulation *sim = pp_test_simulate (s, 1e-3, 2e-3, 0, 0);
  PpError e = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &e);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &e), ==, PP_OK);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        int64_t t0 = llround (sim->timeline[r][k].start * 1e9), t1 = llround (sim->timeline[r][k].end * 1e9);
        int64_t late = t0 >= 3000000 ? 4000000 : 0;
        PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .peer_rank = -1,
                      .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B,
                      .start_ns = t0 + late, .end_ns = t1 + late };
        g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &e), ==, PP_OK);
        for (int edge = 0; r == 0 && edge < 2; edge++)
          {
            PpCounter ct = { .rank = 0, .kind = PP_COUNTER_RUN_DELAY_NS,
                             .time_ns = edge == 0 ? sp.start_ns : sp.end_ns };
            ct.value = ct.time_ns >= 9000000 ? 1.5e6 : 0;
            g_assert_cmpint (pp_trace_write_counter (w, &ct, &e), ==, PP_OK);
          }
      }
  PpSpan gc = { .rank = 1, .stage = -1, .microbatch = -1, .peer_rank = -1, .kind = PP_SPAN_GC,
                .start_ns = 3000000, .end_ns = 6000000 };
  g_assert_cmpint (pp_trace_write_spans (w, &gc, 1, &e), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);

  PpWhyReport *want = NULL;
  g_assert_cmpint (pp_why_analyse_trace (path, 0, &want, NULL, NULL, &e), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (want->idle[1].runtime_parts[PP_WHY_RT_GC], 3e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (want->idle[0].runtime_parts[PP_WHY_RT_DESCHEDULED], 1.5e-3, 1e-9);
  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &e);
  g_assert_nonnull (m);
  GtkWidget *p = pp_why_panel_new ();
  g_object_ref_sink (p);
  pp_why_panel_update (PP_WHY_PANEL (p), m);
  for (int r = 0; r < 2; r++)
    {
      PpWhyIdle got;
      int n_rep = 0;
      g_assert_true (pp_why_panel_get_idle (PP_WHY_PANEL (p), r, &got, &n_rep));
      for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
        g_assert_cmpfloat_with_epsilon (got.runtime_parts[k], want->idle[r].runtime_parts[k], 1e-9);
    }
  GString *text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "Inside runtime"));
  g_assert_nonnull (strstr (text->str, ": 4.00 ms = descheduled 38%, gc 0%"));
  g_assert_nonnull (strstr (text->str, ": 4.00 ms = descheduled 0%, gc 75%"));
  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (m);
  pp_why_report_free (want);
  pp_simulation_free (sim);
  pp_schedule_free (s);
  g_free (path);
  pp_test_ctx_clear (&c);
}

/* The Why tab reads the trace's span names as info does (issue 41): rank
 * 0's wait for rank 1's late B (everything from 5 ms 3 ms late) split by
 * NCCL into "nccl:peer_late" [2, 6] ms and "nccl:local" [6, 8]: the 2 ms
 * local are rank 0's own GPU (user_kernels), and rank 1 is late by the
 * wait to 6 beyond the plan's 3 ms of idle, 1 ms (not the whole 3 ms of
 * runtime, which a tab reading no names would show). */
static void
test_why_nccl_local (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-widgets-why-nccl-");
  char *path = pp_test_ctx_path (&c, "run.pptrace");
  PpSchedule *s = pp_test_generate ("GPipe", 2, 2, 1);
  PpSimulation *sim = pp_test_simulate (s, 1e-3, 2e-3, 0, 0);
  PpError e = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &e);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &e), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_string (w, 1, "nccl:peer_late", &e), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_string (w, 2, "nccl:local", &e), ==, PP_OK);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        int64_t t0 = llround (sim->timeline[r][k].start * 1e9), t1 = llround (sim->timeline[r][k].end * 1e9);
        int64_t late = t0 >= 5 * MS ? 3 * MS : 0;
        PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .peer_rank = -1,
                      .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B,
                      .start_ns = t0 + late, .end_ns = t1 + late };
        g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &e), ==, PP_OK);
      }
  for (int part = 0; part < 2; part++)
    {
      PpSpan wt = { .rank = 0, .stage = -1, .microbatch = -1, .peer_rank = 1, .kind = PP_SPAN_WAIT,
                    .name_id = (uint32_t) part + 1, .start_ns = part == 0 ? 2 * MS : 6 * MS,
                    .end_ns = part == 0 ? 6 * MS : 8 * MS };
      g_assert_cmpint (pp_trace_write_spans (w, &wt, 1, &e), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);

  PpTimelineModel *m = pp_timeline_model_new_from_file (path, &e);
  g_assert_nonnull (m);
  GtkWidget *p = pp_why_panel_new ();
  g_object_ref_sink (p);
  pp_why_panel_update (PP_WHY_PANEL (p), m);
  PpWhyIdle got;
  int n_rep = 0;
  g_assert_true (pp_why_panel_get_idle (PP_WHY_PANEL (p), 0, &got, &n_rep));
  g_assert_cmpfloat_with_epsilon (got.runtime, 3e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (got.runtime_parts[PP_WHY_RT_PEER_LATE], 1e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (got.runtime_parts[PP_WHY_RT_USER_KERNELS], 2e-3, 1e-9);
  g_assert_cmpint (got.late_peer, ==, 1);
  GString *text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "user_kernels 67%"));
  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (m);
  pp_simulation_free (sim);
  pp_schedule_free (s);
  g_free (path);
  pp_test_ctx_clear (&c);
}

/* The Why tab of a 2 x 2 job says what info and export --format why say:
 * each pipeline rank's median replica over the two (pp_why_analyse_replicas
 * over every process's spans), not the one replica its rows show.  Replica
 * dp 0's rank 1 is slow (pp-synth-mesh --slow-stage 0), so rank 0 idles
 * more in dp 0: its median replica (the lower of two middles) is dp 1. */
/* The Stragglers tab live (issue 38): a PP 2 x DP 3 job whose process at
 * pp 1, dp 1 runs twice as slow (pp-synth-mesh --slow-stage 1), fed to a
 * model as a live stream grows: its first 3 steps, then the rest.  The
 * tab's analysis follows (more steps, the same straggler first), and its
 * numbers are export --format why's for the whole trace. */
static void
feed (PpTimelineModel *m, const char *path, gboolean later)
{
  PpError e = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &e);
  PpTraceItem it;
  g_assert_nonnull (r);
  while (pp_trace_reader_next (r, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    {
      gboolean is_later = it.type == PP_TRACE_ITEM_SPAN && it.span.step > 2;
      if (is_later == later)
        pp_timeline_model_add (m, &it);
    }
  pp_trace_reader_free (r);
}

static void
test_stragglers_live (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-widgets-stragglers-");
  char *base = pp_test_ctx_path (&c, "job"), *merged = pp_test_ctx_path (&c, "job.pptrace");
  const char *argv[] = { g_getenv ("PIPESCOPE_SYNTH_MESH"), base, "2", "3", "4", "5", "1f1b",
                         "--slow-stage", "1", NULL };
  int status = -1;
  g_assert_nonnull (argv[0]);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  char *in[6], *out = NULL, *err = NULL;
  for (int g = 0; g < 6; g++)
    in[g] = g_strdup_printf ("%s.rank%d", base, g);
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "merge", "-o", merged, in[0], in[1], in[2], in[3], in[4],
                                    in[5], NULL), ==, 0);
  g_free (out);
  g_free (err);

  PpTimelineModel *m = pp_timeline_model_new ();
  GtkWidget *v = g_object_ref_sink (pp_heatmap_view_new ());
  feed (m, merged, FALSE);
  pp_heatmap_view_update (PP_HEATMAP_VIEW (v), m);
  const PpStragglerReport *r = pp_heatmap_view_get_report (PP_HEATMAP_VIEW (v));
  g_assert_nonnull (r);
  int n_before = r->n_steps;
  g_assert_cmpint (r->steps[n_before - 1], ==, 2);
  g_assert_cmpint (r->procs[r->items[0].proc].process, ==, 1 * 3 + 1);
  feed (m, merged, TRUE);
  pp_heatmap_view_update (PP_HEATMAP_VIEW (v), m);
  r = pp_heatmap_view_get_report (PP_HEATMAP_VIEW (v));
  g_assert_nonnull (r);
  g_assert_cmpint (r->n_steps, >, n_before);
  g_assert_cmpint (r->steps[r->n_steps - 1], ==, 4);
  const PpStragglerProcess *q = &r->procs[r->items[0].proc];
  g_assert_cmpint (q->process, ==, 1 * 3 + 1);
  g_assert_true (q->saving_s > 0);
  /* the tab's numbers are the CLI's */
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "export", merged, "--format", "why", "-o", "-", NULL), ==, 0);
  const char *at = strstr (out, "\"stragglers\": [\n    {\"process\": 4,");
  g_assert_nonnull (at);
  at = strstr (at, "\"saving_s\": ");
  g_assert_nonnull (at);
  g_assert_cmpfloat_with_epsilon (g_ascii_strtod (at + strlen ("\"saving_s\": "), NULL), q->saving_s, 1e-9);
  g_free (out);
  g_free (err);
  g_object_unref (v);
  pp_timeline_model_free (m);
  for (int g = 0; g < 6; g++)
    g_free (in[g]);
  g_free (base);
  g_free (merged);
  pp_test_ctx_clear (&c);
}

static void
test_why_replicas (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-widgets-why-");
  char *base = pp_test_ctx_path (&c, "job"), *merged = pp_test_ctx_path (&c, "job.pptrace");
  const char *argv[] = { g_getenv ("PIPESCOPE_SYNTH_MESH"), base, "2", "2", "4", "4", "1f1b",
                         "--slow-stage", "0", NULL };
  int status = -1;
  g_assert_nonnull (argv[0]);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  char *in[4], *out = NULL, *err = NULL;
  for (int g = 0; g < 4; g++)
    in[g] = g_strdup_printf ("%s.rank%d", base, g);
  int rc = pp_test_cli_run (NULL, &out, &err, "merge", "-o", merged, in[0], in[1], in[2], in[3], NULL);
  g_assert_cmpint (rc, ==, 0);

  PpError e = { 0 };
  PpWhyReport *want = NULL;
  g_assert_cmpint (pp_why_analyse_trace (merged, 0, &want, NULL, NULL, &e), ==, PP_OK);
  g_assert_cmpint (want->n_replicas, ==, 2);
  PpTimelineModel *m = pp_timeline_model_new_from_file (merged, &e);
  g_assert_nonnull (m);
  GtkWidget *p = pp_why_panel_new ();
  g_object_ref_sink (p);
  pp_why_panel_update (PP_WHY_PANEL (p), m);
  g_assert_cmpint (pp_why_panel_get_n_rows (PP_WHY_PANEL (p)), ==, 2);
  for (int r = 0; r < 2; r++)
    {
      PpWhyIdle got;
      int n_rep = 0;
      g_assert_true (pp_why_panel_get_idle (PP_WHY_PANEL (p), r, &got, &n_rep));
      g_assert_cmpint (n_rep, ==, 2);
      g_assert_cmpfloat_with_epsilon (got.measured, want->idle[r].measured, 1e-9);
      for (int k = 0; k < PP_WHY_N_PARTS; k++)
        g_assert_cmpfloat_with_epsilon (pp_why_idle_part (&got, k), pp_why_idle_part (&want->idle[r], k), 1e-9);
    }
  pp_why_report_free (want);
  g_object_unref (p);

  /* the statistics' bubble over replicas is info's */
  g_free (out);
  g_free (err);
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "info", merged, NULL), ==, 0);
  GtkWidget *st = pp_stats_panel_new ();
  g_object_ref_sink (st);
  pp_stats_panel_update (PP_STATS_PANEL (st), m);
  GString *text = g_string_new (NULL);
  collect_labels (st, text);
  for (int r = 0; r < 2; r++)
    {
      char key[32], cell[64];
      double med, lo, hi;
      g_snprintf (key, sizeof key, "  rank %d: median ", r);
      const char *line = strstr (out, key);
      g_assert_nonnull (line);
      g_assert_cmpint (sscanf (line + strlen (key), "%lf%%, %lf%% to %lf%%", &med, &lo, &hi), ==, 3);
      if (hi > lo)
        g_snprintf (cell, sizeof cell, "%.1f%% (%.1f\u2013%.1f%%, dp ", med, lo, hi);
      else
        g_snprintf (cell, sizeof cell, "%.1f%% (every replica)", med);
      g_assert_nonnull (strstr (text->str, cell));
    }
  g_string_free (text, TRUE);
  g_object_unref (st);

  if (g_getenv ("PP_WIDGETS_SCREENSHOT_DIR"))
    {
      GtkWidget *wp = g_object_ref_sink (pp_why_panel_new ()), *sp = g_object_ref_sink (pp_stats_panel_new ());
      pp_why_panel_update (PP_WHY_PANEL (wp), m);
      pp_stats_panel_update (PP_STATS_PANEL (sp), m);
      GtkWidget *panels[2] = { wp, sp };
      const char *names[2] = { "why-replicas.png", "stats-replicas.png" };
      for (int i = 0; i < 2; i++)
        {
          GtkWidget *win = window_with (g_object_ref (panels[i]), 1100, 300);
          cairo_surface_t *shot = render_widget (panels[i]);
          save_png (shot, names[i]);
          cairo_surface_destroy (shot);
          gtk_window_set_child (GTK_WINDOW (win), NULL);
          gtk_window_destroy (GTK_WINDOW (win));
        }
      g_object_unref (wp);
      g_object_unref (sp);
    }

  /* the details pane of a folded block: the median, the slowest replica
   * (dp 0, whose rank 1 is slow), where, how late */
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &fold);
  PpTimelineBlockDetails d;
  g_assert_true (pp_timeline_block_details (v, NULL, 1, 0, &d));
  char *dt = pp_timeline_block_details_text (v, &d);
  g_assert_nonnull (strstr (dt, "Folded: the median of 2 replicas (the copy of dp "));
  g_assert_nonnull (strstr (dt, "Slowest replica: dp 0 (process 2 on node0), ended "));
  g_assert_nonnull (strstr (dt, " after the median end\nBand: the replicas' copies from "));
  g_free (dt);
  pp_timeline_model_free (v);
  /* unfolded: a row a process says which */
  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  v = pp_timeline_view_new (m, &all);
  g_assert_true (pp_timeline_block_details (v, NULL, 3, 0, &d));
  dt = pp_timeline_block_details_text (v, &d);
  g_assert_nonnull (strstr (dt, "Process: 3 (pid 1003)"));
  g_assert_null (strstr (dt, "Folded"));
  g_free (dt);
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
  for (int g = 0; g < 4; g++)
    g_free (in[g]);
  g_free (out);
  g_free (err);
  g_free (base);
  g_free (merged);
  pp_test_ctx_clear (&c);
}

static void
test_stats_panel (void)
{
  PpTimelineModel *m = gpipe_model ();
  GtkWidget *p = pp_stats_panel_new ();
  GString *text = g_string_new (NULL);

  g_object_ref_sink (p);
  pp_stats_panel_update (PP_STATS_PANEL (p), m);
  pp_stats_panel_update (PP_STATS_PANEL (p), m);   /* again: rows are reused */
  collect_labels (p, text);
  /* 4 ranks x (measured, plan, closed form), and the summary's mean */
  g_assert_cmpint (pp_test_count (text->str, "33.3%"), ==, 13);
  g_assert_nonnull (strstr (text->str, "measured bubble a step 33.3% (mean over the ranks)"));
  /* every bubble says which it is (issue 30); a simulated run's plan is
   * the plan at unit costs */
  g_assert_nonnull (strstr (text->str, "Measured bubble a step"));
  g_assert_nonnull (strstr (text->str, "Bubble, plan at unit costs"));
  g_assert_nonnull (strstr (text->str, "Bubble, closed form (F=1, B=2)"));
  /* a simulated plan ran on no device: its ranks are ranks, not GPUs */
  g_assert_nonnull (strstr (text->str, "rank 3"));
  g_assert_null (strstr (text->str, "rank 4"));
  g_assert_null (strstr (text->str, "GPU"));
  g_assert_nonnull (strstr (text->str, "Dropped events: 0"));

  if (g_getenv ("PP_WIDGETS_SCREENSHOT_DIR"))
    {
      GtkWidget *win = window_with (g_object_ref (p), 900, 220);
      cairo_surface_t *shot = render_widget (p);
      save_png (shot, "stats.png");
      cairo_surface_destroy (shot);
      gtk_window_set_child (GTK_WINDOW (win), NULL);
      gtk_window_destroy (GTK_WINDOW (win));
    }

  pp_stats_panel_update (PP_STATS_PANEL (p), NULL);
  g_string_truncate (text, 0);
  collect_labels (p, text);
  g_assert_null (strstr (text->str, "rank 0"));

  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (m);
}

/* The memory chart: each rank's peak against what the schedule says it
 * holds (1F1B on 2 ranks: rank 0 up to 2 micro-batches, rank 1 up to 1),
 * and lines where there are samples. */
static void
test_memory_chart (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceDescription d = { 0 };
  g_strlcpy (d.schedule, "1F1B", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 4;
  d.n_virtual = 1;
  PpTraceItem it = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &d };
  pp_timeline_model_add (m, &it);
  it.type = PP_TRACE_ITEM_COUNTER;
  for (int t = 0; t < 40; t++)
    for (int r = 0; r < 2; r++)
      {
        int held = r == 0 ? 1 + t % 2 : t % 2;   /* rank 0 peaks at 2, rank 1 at 1 */
        it.counter.rank = r;
        it.counter.time_ns = (int64_t) t * 1000000;
        it.counter.kind = PP_COUNTER_ACTIVATION_BYTES;
        it.counter.value = held * 1048576.0;
        pp_timeline_model_add (m, &it);
        it.counter.kind = PP_COUNTER_INFLIGHT;
        it.counter.value = held;
        pp_timeline_model_add (m, &it);
      }
  GtkWidget *chart = pp_memory_chart_new ();
  GtkWidget *win = window_with (chart, 900, 240);
  cairo_surface_t *empty = render_widget (chart);
  pp_memory_chart_update (PP_MEMORY_CHART (chart), m);
  char buf[160];
  g_assert_cmpstr (pp_memory_chart_summary (PP_MEMORY_CHART (chart), 0, buf, sizeof buf), ==,
                   "CPU rank 0: peak 2.00 MiB · 2 in flight (1F1B: 2)");
  g_assert_cmpstr (pp_memory_chart_summary (PP_MEMORY_CHART (chart), 1, buf, sizeof buf), ==,
                   "CPU rank 1: peak 1.00 MiB · 1 in flight (1F1B: 1)");
  g_assert_null (pp_memory_chart_summary (PP_MEMORY_CHART (chart), 2, buf, sizeof buf));
  pp_memory_chart_set_budget (PP_MEMORY_CHART (chart), 3);
  cairo_surface_t *full = render_widget (chart);
  save_png (full, "memory-chart.png");
  int w = cairo_image_surface_get_width (full), h = cairo_image_surface_get_height (full);
  int differ = 0, blue = 0;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      {
        double a[3], b[3];
        pixel (empty, x, y, a);
        pixel (full, x, y, b);
        differ += fabs (a[0] - b[0]) + fabs (a[1] - b[1]) + fabs (a[2] - b[2]) > 0.1;
        blue += b[2] > 0.6 && b[0] < 0.2;   /* rank 0's line, Okabe-Ito blue */
      }
  g_assert_cmpint (differ, >, 500);
  g_assert_cmpint (blue, >, 50);
  cairo_surface_destroy (empty);
  cairo_surface_destroy (full);
  g_assert_null (pp_memory_chart_empty_reason (PP_MEMORY_CHART (chart)));
  pp_memory_chart_update (PP_MEMORY_CHART (chart), NULL);
  g_assert_null (pp_memory_chart_summary (PP_MEMORY_CHART (chart), 0, buf, sizeof buf));
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);

  /* A PyTorch job's hook records no activation memory: the empty chart
   * says so, not "not yet" (issue 30); a run of ours says "not yet". */
  for (int pytorch = 0; pytorch < 2; pytorch++)
    {
      PpTimelineModel *pm = pp_timeline_model_new ();
      PpTraceDescription pd = d;
      if (pytorch)
        g_strlcpy (pd.model, "PyTorch 2.5.0 gloo Schedule1F1B", sizeof pd.model);
      PpTraceItem pit = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &pd };
      pp_timeline_model_add (pm, &pit);
      GtkWidget *c2 = pp_memory_chart_new ();
      pp_memory_chart_update (PP_MEMORY_CHART (c2), pm);
      const char *why = pp_memory_chart_empty_reason (PP_MEMORY_CHART (c2));
      g_assert_nonnull (why);
      if (pytorch)
        {
          g_assert_nonnull (strstr (why, "records none for PyTorch jobs"));
          /* no in-flight counter either: Statistics' column reads "-", so
           * the reason does not send the reader there */
          g_assert_null (strstr (why, "Statistics"));
        }
      else
        g_assert_cmpstr (why, ==, "No activation memory reported yet");
      g_object_ref_sink (c2);
      g_object_unref (c2);
      pp_timeline_model_free (pm);
    }
}

/* Two runs compared (issue 30): what differs, with the ratio.  GPipe with
 * 6 micro-batches against 1F1B with 12 on 4 ranks (plans at unit costs):
 * the schedule and M differ, P does not; every rank's bubble a step goes
 * from 3/9 (33.3 %) to 3/15 (20.0 %), x0.60. */
static void
test_compare_runs (void)
{
  PpTimelineModel *a = gpipe_model ();
  g_autofree char *path = g_build_filename (tmpdir, "1f1b-12.pptrace", NULL);
  char *out = NULL, *err = NULL;
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "1F1B", "-p", "4", "-m", "12",
                                    "--trace", path, NULL), ==, 0);
  g_free (out);
  g_free (err);
  PpError perr = { 0 };
  PpTimelineModel *b = pp_timeline_model_new_from_file (path, &perr);
  g_assert_nonnull (b);
  PpCompareRow rows[32];
  size_t n = pp_compare_runs (a, b, rows, G_N_ELEMENTS (rows));
  /* schedule, P, M, V, steps, step time, 4 ranks' bubbles, their mean */
  g_assert_cmpuint (n, ==, 11);
  g_assert_cmpstr (rows[0].what, ==, "Schedule");
  g_assert_cmpstr (rows[0].a, ==, "GPipe");
  g_assert_cmpstr (rows[0].b, ==, "1F1B");
  g_assert_true (rows[0].differs);
  g_assert_cmpstr (rows[1].what, ==, "Ranks (P)");
  g_assert_false (rows[1].differs);
  g_assert_cmpstr (rows[1].ratio, ==, "same");
  g_assert_cmpstr (rows[2].what, ==, "Micro-batches (M)");
  g_assert_cmpstr (rows[2].a, ==, "6");
  g_assert_cmpstr (rows[2].b, ==, "12");
  g_assert_true (rows[2].differs);
  /* the one analysis's median step, as the Statistics tab shows it (not a
   * mean over every step) */
  g_assert_cmpstr (rows[5].what, ==, "Median step");
  PpAnalysisSteps an;
  g_assert_cmpint (pp_timeline_model_step_analysis (b, &an), >, 0);
  char want[32];
  g_snprintf (want, sizeof want, "%.3f ms", an.median_step * 1e-6);
  g_assert_cmpstr (rows[5].b, ==, want);
  pp_analysis_steps_clear (&an);
  for (int r = 0; r < 4; r++)
    {
      char what[48];
      g_snprintf (what, sizeof what, "Bubble a step, rank %d", r);
      g_assert_cmpstr (rows[6 + r].what, ==, what);
      g_assert_cmpstr (rows[6 + r].a, ==, "33.3 %");
      g_assert_cmpstr (rows[6 + r].b, ==, "20.0 %");
      g_assert_cmpstr (rows[6 + r].ratio, ==, "×0.60");
    }
  g_assert_cmpstr (rows[10].what, ==, "Bubble a step, mean");
  g_assert_cmpstr (rows[10].ratio, ==, "×0.60");
  /* a run against itself: nothing differs */
  n = pp_compare_runs (a, a, rows, G_N_ELEMENTS (rows));
  for (size_t i = 0; i < n; i++)
    g_assert_false (rows[i].differs);
  /* the table shows them (a header and a line a row, four cells each) */
  GtkWidget *table = pp_compare_table_new ();
  g_object_ref_sink (table);
  pp_compare_table_update (PP_COMPARE_TABLE (table), a, "gpipe.pptrace — GPipe", b, "1f1b-12.pptrace — 1F1B");
  const PpCompareRow *shown = NULL;
  g_assert_cmpuint (pp_compare_table_get_rows (PP_COMPARE_TABLE (table), &shown), ==, 11);
  g_assert_cmpstr (shown[0].b, ==, "1F1B");
  /* another pair under way (the app's worker): none of these rows */
  pp_compare_table_show_pending (PP_COMPARE_TABLE (table));
  g_assert_cmpuint (pp_compare_table_get_rows (PP_COMPARE_TABLE (table), &shown), ==, 0);
  g_assert_null (shown);
  /* its rows computed apart (any thread), shown as they come */
  pp_compare_table_apply (PP_COMPARE_TABLE (table), pp_compare_table_compute (b, a), "b", "a");
  g_assert_cmpuint (pp_compare_table_get_rows (PP_COMPARE_TABLE (table), &shown), ==, 11);
  g_assert_cmpstr (shown[0].a, ==, "1F1B");
  g_assert_null (pp_compare_table_compute (a, NULL));
  g_object_unref (table);
  pp_timeline_model_free (a);
  pp_timeline_model_free (b);
}

static void
test_loss_chart (void)
{
  const gint64 S = G_GINT64_CONSTANT (1000000000);
  PpTimelineModel *m = pp_timeline_model_new ();
  add_description (m, 1, 1, S);
  wt_add_span (m, 0, PP_SPAN_F, 0, 0, -1, S, S + 10 * MS);
  for (int step = 0; step < 30; step++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER };
      it.counter.kind = PP_COUNTER_LOSS;
      it.counter.step = step;
      it.counter.rank = 0;
      it.counter.time_ns = S + step * MS;
      it.counter.value = 2.5 * exp (-step / 10.0) + 0.1;
      pp_timeline_model_add (m, &it);
    }
  g_assert_cmpuint (pp_timeline_model_n_losses (m), ==, 30);

  GtkWidget *chart = pp_loss_chart_new ();
  GtkWidget *win = window_with (chart, 400, 200);
  cairo_surface_t *empty = render_widget (chart);
  pp_loss_chart_update (PP_LOSS_CHART (chart), m);
  pp_loss_chart_update (PP_LOSS_CHART (chart), m);
  cairo_surface_t *full = render_widget (chart);
  save_png (full, "loss-chart.png");

  /* the line is there: many more pixels differ from the background once
   * the losses arrived */
  int w = cairo_image_surface_get_width (full), h = cairo_image_surface_get_height (full);
  int differ = 0;
  for (int y = 0; y < h; y += 2)
    for (int x = 0; x < w; x += 2)
      {
        double a[3], b[3];
        pixel (empty, x, y, a);
        pixel (full, x, y, b);
        differ += fabs (a[0] - b[0]) + fabs (a[1] - b[1]) + fabs (a[2] - b[2]) > 0.1;
      }
  g_assert_cmpint (differ, >, 100);
  /* the axis titles: text along the left edge (the loss, turned), left
   * of the tick labels, where nothing else draws */
  {
    int left_ink = 0;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        {
          double a[3];
          pixel (full, x, y, a);
          int ink = a[0] + a[1] + a[2] < 1.2;   /* dark text on the light theme */
          left_ink += ink && x < 20;
        }
    g_assert_cmpint (left_ink, >, 30);
  }
  cairo_surface_destroy (empty);
  cairo_surface_destroy (full);

  /* compared with a second run: its line, in a color of its own, and a
   * legend; the first run's alone does not draw that color anywhere */
  {
    PpTimelineModel *m2 = pp_timeline_model_new ();
    add_description (m2, 1, 1, S);
    wt_add_span (m2, 0, PP_SPAN_F, 0, 0, -1, S, S + 10 * MS);
    for (int step = 0; step < 40; step++)
      {
        PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER };
        it.counter.kind = PP_COUNTER_LOSS;
        it.counter.step = step;
        it.counter.time_ns = S + step * MS;
        it.counter.value = 2.0 * exp (-step / 20.0) + 0.3;
        pp_timeline_model_add (m2, &it);
      }
    pp_loss_chart_update (PP_LOSS_CHART (chart), m);
    cairo_surface_t *one = render_widget (chart);
    pp_loss_chart_update_compare (PP_LOSS_CHART (chart), m, "1F1B", m2, "ZBV");
    cairo_surface_t *two = render_widget (chart);
    save_png (two, "loss-chart-compare.png");
    int w2 = cairo_image_surface_get_width (two), h2 = cairo_image_surface_get_height (two);
    int orange_one = 0, orange_two = 0;
    for (int y = 0; y < h2; y++)
      for (int x = 0; x < w2; x++)
        {
          double a[3], b[3];
          pixel (one, x, y, a);
          pixel (two, x, y, b);
          /* reddish orange: red high, blue low */
          orange_one += a[0] > 0.6 && a[2] < 0.3 && a[0] - a[1] > 0.2;
          orange_two += b[0] > 0.6 && b[2] < 0.3 && b[0] - b[1] > 0.2;
        }
    g_assert_cmpint (orange_one, ==, 0);
    g_assert_cmpint (orange_two, >, 50);
    cairo_surface_destroy (one);
    cairo_surface_destroy (two);
    pp_timeline_model_free (m2);
  }

  pp_loss_chart_update (PP_LOSS_CHART (chart), NULL);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* Issue 36: a job of two replicas whose last stage reports each its own
 * loss (dp 1 above dp 0): the model keeps a series a replica, never the
 * two alternating on one, its one series the job's (the mean over the
 * replicas, pp-analysis-loss.h), and the chart draws
 * a line a replica, the second in a colour of its own (vermillion), none
 * of which a one-replica job draws. */
static void
test_loss_chart_replicas (void)
{
  const gint64 S = G_GINT64_CONSTANT (1000000000);
  PpTimelineModel *m = pp_timeline_model_new ();
  add_description (m, 1, 1, S);
  for (int g = 0; g < 2; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info = (PpTraceProcess) { .process = g, .rank = 0, .coord = { 0, g, 0, 0, 0 },
                                           .size = { 1, 2, 1, 1, 1 }, .pid = 10 + g };
      pp_timeline_model_add (m, &it);
    }
  /* the replicas' counters interleaved, as a merged trace holds them */
  for (int step = 0; step < 20; step++)
    for (int g = 1; g >= 0; g--)
      {
        PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER, .process = g };
        it.counter.kind = PP_COUNTER_LOSS;
        it.counter.step = step;
        it.counter.time_ns = S + step * MS;
        it.counter.value = 2.0 * exp (-step / 8.0) + 0.2 + g;
        pp_timeline_model_add (m, &it);
      }
  g_assert_cmpuint (pp_timeline_model_n_loss_series (m), ==, 2);
  for (size_t i = 0; i < 2; i++)
    {
      int32_t dp;
      size_t n;
      const double *v = pp_timeline_model_loss_series (m, i, &dp, &n);
      g_assert_cmpint (dp, ==, (int) i);
      g_assert_cmpuint (n, ==, 20);
      for (int step = 0; step < 20; step++)
        g_assert_cmpfloat (v[step], ==, 2.0 * exp (-step / 8.0) + 0.2 + dp);
    }
  g_assert_cmpuint (pp_timeline_model_n_losses (m), ==, 20);
  for (int step = 0; step < 20; step++)   /* the job's: the mean over its replicas (loss, not loss_part) */
    g_assert_cmpfloat_with_epsilon (pp_timeline_model_losses (m)[step], 2.0 * exp (-step / 8.0) + 0.2 + 0.5, 1e-12);

  GtkWidget *chart = pp_loss_chart_new ();
  GtkWidget *win = window_with (chart, 400, 200);
  pp_loss_chart_update (PP_LOSS_CHART (chart), m);
  cairo_surface_t *two = render_widget (chart);
  save_png (two, "loss-chart-replicas.png");
  int w = cairo_image_surface_get_width (two), h = cairo_image_surface_get_height (two);
  int blue = 0, orange = 0;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      {
        double a[3];
        pixel (two, x, y, a);
        blue += a[2] > 0.55 && a[0] < 0.2;
        orange += a[0] > 0.6 && a[2] < 0.3 && a[0] - a[1] > 0.2;
      }
  g_assert_cmpint (blue, >, 50);
  g_assert_cmpint (orange, >, 50);
  cairo_surface_destroy (two);
  pp_loss_chart_update (PP_LOSS_CHART (chart), NULL);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

static void
on_apply (GtkWidget *panel, const char *schedule, int P, int M, int V, gpointer data)
{
  *(char **) data = g_strdup_printf ("%s %d %d %d", schedule, P, M, V);
}

static void
on_apply_partition (GtkWidget *panel, const char *partition, gpointer data)
{
  *(char **) data = g_strdup (partition);
}

/* The first button under w whose label starts with prefix, NULL if none
 * (a spin button's + and - are buttons too, without labels). */
static GtkWidget *
find_button (GtkWidget *w, const char *prefix)
{
  if (GTK_IS_BUTTON (w) && gtk_button_get_label (GTK_BUTTON (w)) != NULL
      && g_str_has_prefix (gtk_button_get_label (GTK_BUTTON (w)), prefix))
    return w;
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *f = find_button (c, prefix);
      if (f)
        return f;
    }
  return NULL;
}

static void
test_whatif_panel (void)
{
  PpTimelineModel *m = gpipe_model ();
  PpMeasuredCosts c;

  g_assert_true (pp_whatif_measured_costs (m, &c));
  g_assert_cmpint (c.ranks, ==, 4);
  g_assert_cmpint (c.microbatches, ==, 6);
  for (int r = 0; r < 4; r++)
    {
      g_assert_cmpfloat_with_epsilon (c.f[r], 1e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (c.b[r], 2e-3, 1e-9);
      /* no W span (a backward never split): W = 0, suggest's rule */
      g_assert_cmpfloat (c.w[r], ==, 0);
    }
  pp_measured_costs_clear (&c);

  GtkWidget *p = pp_whatif_panel_new ();
  GtkWidget *win = window_with (p, 700, 500);
  char *applied = NULL;
  g_signal_connect (p, "apply", G_CALLBACK (on_apply), &applied);
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), m);
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), m);  /* same costs: nothing to do */

  /* the list box: the first GtkListBox under the panel */
  GtkWidget *list = NULL;
  GPtrArray *stack = g_ptr_array_new ();
  g_ptr_array_add (stack, p);
  while (stack->len && list == NULL)
    {
      GtkWidget *w = g_ptr_array_steal_index (stack, stack->len - 1);
      if (GTK_IS_LIST_BOX (w))
        list = w;
      for (GtkWidget *ch = gtk_widget_get_first_child (w); ch; ch = gtk_widget_get_next_sibling (ch))
        g_ptr_array_add (stack, ch);
    }
  g_ptr_array_unref (stack);
  g_assert_nonnull (list);
  GtkListBoxRow *row = gtk_list_box_get_row_at_index (GTK_LIST_BOX (list), 0);
  g_assert_nonnull (row);

  GString *text = g_string_new (NULL);
  collect_labels (GTK_WIDGET (row), text);
  g_assert_nonnull (strstr (text->str, " ms"));
  g_assert_nonnull (strstr (text->str, "bubble"));
  g_string_free (text, TRUE);

  /* issue 30: the measured configuration's row shows what was measured
   * and says so, every other row says it is a prediction */
  {
    PpWhatifMeasured mr;
    GString *all = g_string_new ("\n");
    g_assert_true (pp_whatif_measured (m, &mr));
    g_assert_cmpint (mr.n_steps, >, 0);
    collect_labels (list, all);
    g_assert_cmpint (pp_test_count (all->str, "\nmeasured\n"), ==, 1);
    int n_rows = pp_test_count (all->str, "\nM = ");
    g_assert_cmpint (n_rows, >, 1);
    g_assert_cmpint (pp_test_count (all->str, "\npredicted\n"), ==, n_rows - 1);
    g_string_free (all, TRUE);
  }
  /* the memory budget 0 reads "no limit" */
  {
    GtkWidget *spin = NULL;
    GPtrArray *st = g_ptr_array_new ();
    g_ptr_array_add (st, p);
    while (st->len && spin == NULL)
      {
        GtkWidget *w = g_ptr_array_steal_index (st, st->len - 1);
        if (GTK_IS_SPIN_BUTTON (w))
          spin = w;
        for (GtkWidget *ch = gtk_widget_get_first_child (w); ch; ch = gtk_widget_get_next_sibling (ch))
          g_ptr_array_add (st, ch);
      }
    g_ptr_array_unref (st);
    g_assert_nonnull (spin);
    g_assert_cmpfloat (pp_whatif_panel_get_budget (PP_WHATIF_PANEL (p)), ==, 0);
    g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (spin)), ==, "no limit");
  }

  cairo_surface_t *shot = render_widget (p);
  save_png (shot, "whatif.png");
  cairo_surface_destroy (shot);

  g_signal_emit_by_name (row, "activate");
  g_assert_nonnull (applied);
  /* P stays the measured run's */
  g_assert_nonnull (strstr (applied, " 4 "));
  g_free (applied);

  /* the partition that would balance the stages (from the Why tab): shown
   * with its prediction, and choosing it says which partition */
  {
    char *partition = NULL;
    g_signal_connect (p, "apply-partition", G_CALLBACK (on_apply_partition), &partition);
    pp_whatif_panel_set_partition (PP_WHATIF_PANEL (p), "2,2,2,2", "5,1,1,1", 0.0438, 0.068);
    GtkWidget *button = find_button (p, "Balance the stages");
    g_assert_nonnull (button);
    g_assert_true (gtk_widget_get_visible (button));
    g_assert_nonnull (strstr (gtk_button_get_label (GTK_BUTTON (button)),
                              "--partition 2,2,2,2 (now 5,1,1,1) · predicted 43.8 ms a step (now 68.0 ms)"));
    g_signal_emit_by_name (button, "clicked");
    g_assert_cmpstr (partition, ==, "2,2,2,2");
    g_free (partition);
    pp_whatif_panel_set_partition (PP_WHATIF_PANEL (p), NULL, NULL, 0, 0);
    g_assert_false (gtk_widget_get_visible (button));
  }

  /* A PyTorch job (the hook's model line): only rows the job can run, no
   * DualPipe (two model copies), which the bundled run's rows have; each
   * with its class or the CSV route */
  {
    int n_dualpipe = 0, n_rows = 0;
    for (GtkListBoxRow *r; (r = gtk_list_box_get_row_at_index (GTK_LIST_BOX (list), n_rows)) != NULL; n_rows++)
      {
        GString *t = g_string_new (NULL);
        collect_labels (GTK_WIDGET (r), t);
        n_dualpipe += g_str_has_prefix (t->str, "DualPipe\n");
        g_assert_null (strstr (t->str, "Schedule"));
        g_string_free (t, TRUE);
      }
    g_assert_cmpint (n_dualpipe, >, 0);
    PpTimelineModel *torch = gpipe_model ();
    PpTraceDescription d = *pp_timeline_model_description (torch);
    g_strlcpy (d.model, "PyTorch 2.15.0 gloo ScheduleGPipe", sizeof d.model);
    PpTraceItem it = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &d };
    pp_timeline_model_add (torch, &it);
    g_assert_true (pp_timeline_description_is_pytorch (pp_timeline_model_description (torch)));
    pp_whatif_panel_update (PP_WHATIF_PANEL (p), torch);
    int n_torch = 0;
    for (GtkListBoxRow *r; (r = gtk_list_box_get_row_at_index (GTK_LIST_BOX (list), n_torch)) != NULL; n_torch++)
      {
        GString *t = g_string_new (NULL);
        collect_labels (GTK_WIDGET (r), t);
        g_assert_false (g_str_has_prefix (t->str, "DualPipe\n"));
        g_assert_true (strstr (t->str, "\nSchedule") != NULL || strstr (t->str, "CSV, loaded with _load_csv") != NULL);
        g_string_free (t, TRUE);
      }
    g_assert_cmpint (n_torch, ==, n_rows - n_dualpipe);
    pp_whatif_panel_update (PP_WHATIF_PANEL (p), NULL);
    pp_timeline_model_free (torch);

    /* a megatron-core job (its schedule's name says so): only 1F1B and
     * Megatron-Interleaved, each saying its group (issue 28) */
    PpTimelineModel *meg = gpipe_model ();
    PpTraceDescription md = *pp_timeline_model_description (meg);
    g_strlcpy (md.schedule, "Megatron-1F1B", sizeof md.schedule);
    g_strlcpy (md.model, "megatron-core 0.16.1 gloo", sizeof md.model);
    PpTraceItem mit = { .type = PP_TRACE_ITEM_DESCRIPTION, .description = &md };
    pp_timeline_model_add (meg, &mit);
    pp_whatif_panel_update (PP_WHATIF_PANEL (p), meg);
    int n_meg = 0, n_interleaved = 0;
    for (GtkListBoxRow *r; (r = gtk_list_box_get_row_at_index (GTK_LIST_BOX (list), n_meg)) != NULL; n_meg++)
      {
        GString *t = g_string_new (NULL);
        collect_labels (GTK_WIDGET (r), t);
        if (g_str_has_prefix (t->str, "Megatron-Interleaved:group="))
          {
            g_assert_nonnull (strstr (t->str, "\ngroup "));
            n_interleaved++;
          }
        else
          {
            g_assert_true (g_str_has_prefix (t->str, "1F1B\n"));
            g_assert_nonnull (strstr (t->str, "\nnot interleaved"));
          }
        g_string_free (t, TRUE);
      }
    g_assert_cmpint (n_interleaved, >, 0);
    g_assert_cmpint (n_meg, >, n_interleaved);
    pp_whatif_panel_update (PP_WHATIF_PANEL (p), NULL);
    pp_timeline_model_free (meg);
  }

  pp_whatif_panel_update (PP_WHATIF_PANEL (p), NULL);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}


/* ---- the Spans tab (issue 35) ------------------------------------------------------ */

/* 4 ranks x 500 blocks, F and B in turn, each B longer than each F: by
 * start the first line is an F, longest first a B. */
static PpTimelineModel *
spans_model (size_t *n_f)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  *n_f = 0;
  for (int r = 0; r < 4; r++)
    {
      int64_t t = 1000000;
      for (int i = 0; i < 500; i++)
        {
          PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
          it.span.rank = r;
          it.span.stage = r;
          it.span.kind = (uint16_t) (i % 2 ? PP_SPAN_B : PP_SPAN_F);
          it.span.microbatch = i / 2 % 8;
          it.span.step = i / 16;
          it.span.start_ns = t;
          it.span.end_ns = t + (i % 2 ? 40000 : 10000) + (i * 7919 + r * 104729) % 5000;
          it.span.device = 0xffff;
          it.span.peer_rank = -1;
          t = it.span.end_ns + 1000;
          pp_timeline_model_add (m, &it);
          *n_f += i % 2 == 0;
        }
    }
  return m;
}

/* The first cell (its text widget) of the first line the view holds:
 * depth first inside the list, past the headers. */
static GtkWidget *
first_cell_in (GtkWidget *w, gboolean in_list)
{
  in_list = in_list || GTK_IS_LIST_VIEW (w);
  if (in_list && (GTK_IS_INSCRIPTION (w) || GTK_IS_LABEL (w)))
    return w;
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = first_cell_in (c, in_list);
      if (found != NULL)
        return found;
    }
  return NULL;
}

static GtkWidget *
first_cell (GtkWidget *table)
{
  return first_cell_in (table, FALSE);
}

static const char *
cell_text (GtkWidget *cell)
{
  return GTK_IS_INSCRIPTION (cell) ? gtk_inscription_get_text (GTK_INSCRIPTION (cell))
                                   : gtk_label_get_text (GTK_LABEL (cell));
}

static void
spin_frames (void)
{
  for (int i = 0; i < 50 && g_main_context_pending (NULL); i++)
    g_main_context_iteration (NULL, FALSE);
}

static gint64
line_duration (PpSpanTable *st, const PpTimelineModel *m, guint i)
{
  int row = -1;
  long index = -1;
  g_assert_true (pp_span_table_get_row (st, i, &row, &index));
  const PpSpan *s = &pp_timeline_model_spans (m, row)[index];
  return s->end_ns - s->start_ns;
}

/* A click on the Duration header lists every line again, longest first,
 * and Find "F" exactly the F blocks; the row widgets the view showed
 * stay (GTK 4.8 destroyed and built them again on every relist, 0.1–0.2 s
 * each way on a million lines) and show the new lines' text. */
static void
test_span_table (void)
{
  size_t n_f = 0;
  PpTimelineModel *m = spans_model (&n_f);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *tl = pp_timeline_widget_new ();
  gtk_widget_set_size_request (tl, -1, 100);
  pp_timeline_widget_set_model (PP_TIMELINE_WIDGET (tl), m);
  GtkWidget *table = pp_span_table_new ();
  PpSpanTable *st = PP_SPAN_TABLE (table);
  gtk_widget_set_vexpand (table, TRUE);
  gtk_box_append (GTK_BOX (box), tl);
  gtk_box_append (GTK_BOX (box), table);
  pp_span_table_set_timeline (st, PP_TIMELINE_WIDGET (tl));
  GtkWidget *win = window_with (box, WIN_W, WIN_H);

  g_assert_cmpuint (pp_span_table_n_rows (st), ==, 2000);
  gboolean timed_out = FALSE;   /* a hang guard, not a time asserted */
  guint id = g_timeout_add (5000, on_timeout, &timed_out);
  while (!timed_out && first_cell (table) == NULL)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  GtkWidget *cell = first_cell (table);
  g_assert_nonnull (cell);
  g_assert_cmpstr (cell_text (cell), ==, "F");
  g_object_add_weak_pointer (G_OBJECT (cell), (gpointer *) &cell);

  pp_span_table_sort (st, PP_SPAN_COL_DURATION, TRUE);
  spin_frames ();
  g_assert_cmpuint (pp_span_table_n_rows (st), ==, 2000);
  for (guint i = 0; i + 1 < 2000; i++)
    g_assert_cmpint (line_duration (st, m, i), >=, line_duration (st, m, i + 1));
  /* the same widget, the longest line's text */
  g_assert_nonnull (cell);
  g_assert_true (first_cell (table) == cell);
  g_assert_cmpstr (cell_text (cell), ==, "B");

  /* Find "F": exactly the F blocks, still longest first */
  g_assert_true (pp_span_table_set_filter_text (st, "F"));
  spin_frames ();
  g_assert_cmpuint (pp_span_table_n_rows (st), ==, n_f);
  for (guint i = 0; i < n_f; i++)
    {
      int row = -1;
      long index = -1;
      g_assert_true (pp_span_table_get_row (st, i, &row, &index));
      g_assert_cmpint (pp_timeline_model_spans (m, row)[index].kind, ==, PP_SPAN_F);
      if (i + 1 < n_f)
        g_assert_cmpint (line_duration (st, m, i), >=, line_duration (st, m, i + 1));
    }
  g_assert_nonnull (cell);
  g_assert_cmpstr (cell_text (cell), ==, "F");

  /* a block selected on the timeline keeps its line through a sort */
  int row = -1;
  long index = -1;
  g_assert_true (pp_span_table_get_row (st, 7, &row, &index));
  pp_timeline_widget_select (PP_TIMELINE_WIDGET (tl), row, index);
  pp_span_table_sort (st, PP_SPAN_COL_START, FALSE);
  spin_frames ();
  long at = pp_span_table_position (st, row, index);
  g_assert_cmpint (at, >=, 0);
  int row2 = -1;
  long index2 = -1;
  g_assert_true (pp_span_table_get_row (st, (guint) at, &row2, &index2));
  g_assert_cmpint (row2, ==, row);
  g_assert_cmpint (index2, ==, index);

  /* Find cleared: every block again */
  g_assert_true (pp_span_table_set_filter_text (st, ""));
  spin_frames ();
  g_assert_cmpuint (pp_span_table_n_rows (st), ==, 2000);
  if (cell != NULL)
    g_object_remove_weak_pointer (G_OBJECT (cell), (gpointer *) &cell);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

/* Every cell under a column's text: count the cells whose text is wider
 * than the cell (an ellipsized "RESH…"), depth first inside the list. */
static guint
cut_cells (GtkWidget *w, gboolean in_list, guint *seen)
{
  guint cut = 0;
  in_list = in_list || GTK_IS_LIST_VIEW (w);
  if (in_list && GTK_IS_INSCRIPTION (w) && gtk_widget_get_mapped (w))
    {
      const char *text = gtk_inscription_get_text (GTK_INSCRIPTION (w));
      if (text != NULL && *text)
        {
          PangoLayout *layout = gtk_widget_create_pango_layout (w, text);
          int width = 0;
          pango_layout_get_pixel_size (layout, &width, NULL);
          g_object_unref (layout);
          cut += width > gtk_widget_get_width (w);
          (*seen)++;
        }
    }
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    cut += cut_cells (c, in_list, seen);
  return cut;
}

/* issue 42: the columns fit their text (RESHARD, WAIT_REDUCE_GRAD, a
 * step in the thousands, times past a thousand seconds): no cell cut,
 * where the fixed widths cut the kinds to "RESH…" */
static void
test_span_table_fits (void)
{
  static const PpSpanKind kinds[] = { PP_SPAN_F, PP_SPAN_RESHARD, PP_SPAN_WAIT_REDUCE_GRAD, PP_SPAN_B };
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 8; i++)
      {
        PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
        it.span.rank = r;
        it.span.stage = r;
        it.span.kind = (uint16_t) kinds[i % 4];
        it.span.microbatch = i;
        it.span.step = 12345 + i;
        it.span.start_ns = INT64_C (1234567000000) * (i + 1);
        it.span.end_ns = it.span.start_ns + INT64_C (98765432100);
        it.span.device = 0xffff;
        it.span.peer_rank = -1;
        pp_timeline_model_add (m, &it);
      }
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *tl = pp_timeline_widget_new ();
  gtk_widget_set_size_request (tl, -1, 100);
  pp_timeline_widget_set_model (PP_TIMELINE_WIDGET (tl), m);
  GtkWidget *table = pp_span_table_new ();
  gtk_widget_set_vexpand (table, TRUE);
  gtk_box_append (GTK_BOX (box), tl);
  gtk_box_append (GTK_BOX (box), table);
  pp_span_table_set_timeline (PP_SPAN_TABLE (table), PP_TIMELINE_WIDGET (tl));
  GtkWidget *win = window_with (box, WIN_W, WIN_H);
  g_assert_cmpuint (pp_span_table_n_rows (PP_SPAN_TABLE (table)), ==, 16);
  gboolean timed_out = FALSE;   /* a hang guard, not a time asserted */
  guint id = g_timeout_add (5000, on_timeout, &timed_out);
  while (!timed_out && first_cell (table) == NULL)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  spin_frames ();
  guint seen = 0;
  g_assert_cmpuint (cut_cells (table, FALSE, &seen), ==, 0);
  /* by start, the first four lines: F, F, RESHARD, RESHARD; every column */
  g_assert_cmpuint (seen, >=, 4 * PP_SPAN_N_COLS);
  gtk_window_destroy (GTK_WINDOW (win));
  pp_timeline_model_free (m);
}

void
test_widgets_panels_register (void)
{
  g_test_add_func ("/widgets/stats", test_stats_panel);
  g_test_add_func ("/widgets/stats-replicas", test_stats_replicas);
  g_test_add_func ("/widgets/why-replicas", test_why_replicas);
  g_test_add_func ("/widgets/stragglers-live", test_stragglers_live);
  g_test_add_func ("/widgets/why-runtime-parts", test_why_runtime_parts);
  g_test_add_func ("/widgets/why-nccl-local", test_why_nccl_local);
  g_test_add_func ("/widgets/timeline-replicas", test_timeline_replicas);
  g_test_add_func ("/widgets/loss-chart", test_loss_chart);
  g_test_add_func ("/widgets/loss-chart-replicas", test_loss_chart_replicas);
  g_test_add_func ("/widgets/memory-chart", test_memory_chart);
  g_test_add_func ("/widgets/compare-runs", test_compare_runs);
  g_test_add_func ("/widgets/whatif", test_whatif_panel);
  g_test_add_func ("/widgets/span-table-fits", test_span_table_fits);
  g_test_add_func ("/widgets/span-table", test_span_table);
}
