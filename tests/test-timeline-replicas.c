/* test-timeline-replicas.c — the timeline model of a job whose pipeline
 * ranks each run in several processes (issue 27): a row never mixes two
 * replicas' blocks.
 *
 * pp-synth-mesh (its path the first argument) writes a P x D job's
 * per-process files (PROCESS frames, format 1.4).  Every process's file is
 * fed into one model, the higher replicas first (so that a lower place
 * comes after another was shown and must replace it); the model must hold
 * exactly what a model of replica dp 0 alone holds: the same spans a row,
 * the same step bubbles, and say how many processes and replicas the
 * trace has.  A trace without places reads as one replica. */
#include <glib.h>
#include <string.h>

#include "pp-test-util.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"

static const char *synth;

static void
feed (PpTimelineModel *m, const char *path)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem it;
  g_assert_nonnull (r);
  for (;;)
    {
      g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_OK);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      pp_timeline_model_add (m, &it);
    }
  pp_trace_reader_free (r);
}

static void
write_job (PpTestCtx *c, const char *base, int P, int D, int M, const char *sched)
{
  char *path = pp_test_ctx_path (c, base);
  char *sp = g_strdup_printf ("%d", P), *sd = g_strdup_printf ("%d", D), *sm = g_strdup_printf ("%d", M);
  const char *argv[] = { synth, path, sp, sd, sm, "3", sched, NULL };
  int status = -1;
  GError *error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_free (sp); g_free (sd); g_free (sm); g_free (path);
}

/* One P x D job: every process into one model, the higher dp first; and
 * dp 0's processes alone into another. */
static void
check_job (int P, int D, int M, const char *sched)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-replicas-");
  write_job (&c, "job", P, D, M, sched);
  PpTimelineModel *all = pp_timeline_model_new (), *one = pp_timeline_model_new ();
  for (int dp = D - 1; dp >= 0; dp--)
    for (int r = 0; r < P; r++)
      {
        char name[64];
        g_snprintf (name, sizeof name, "job.rank%d", r * D + dp);
        char *path = pp_test_ctx_path (&c, name);
        feed (all, path);
        if (dp == 0)
          feed (one, path);
        g_free (path);
      }

  g_assert_cmpint (pp_timeline_model_n_ranks (all), ==, P);
  g_assert_cmpint (pp_timeline_model_n_processes (all), ==, P * D);
  g_assert_cmpint (pp_timeline_model_n_replicas (all), ==, D);
  g_assert_cmpint (pp_timeline_model_shown_dp (all), ==, 0);
  g_assert_cmpuint (pp_timeline_model_n_hidden_spans (all), ==, (guint64) (P * (D - 1) * 3 * 2 * M));
  char note[64];
  pp_timeline_model_replica_note (all, note, sizeof note);
  char *want = D > 1 ? g_strdup_printf ("replica dp 0 of %d shown", D) : g_strdup ("");
  g_assert_cmpstr (note, ==, want);
  g_free (want);

  /* each row: dp 0's blocks, every one once, as dp 0 alone has them */
  g_assert_cmpuint (pp_timeline_model_n_spans_total (all), ==, pp_timeline_model_n_spans_total (one));
  g_assert_cmpuint (pp_timeline_model_n_spans_total (all), ==, (gsize) (P * 3 * 2 * M));
  for (int r = 0; r < P; r++)
    {
      gsize n = pp_timeline_model_n_spans (all, r);
      g_assert_cmpuint (n, ==, pp_timeline_model_n_spans (one, r));
      g_assert_cmpmem (pp_timeline_model_spans (all, r), n * sizeof (PpSpan),
                       pp_timeline_model_spans (one, r), n * sizeof (PpSpan));
    }
  /* and the analysis over the model is that replica's */
  double *ba = g_new0 (double, P), *bo = g_new0 (double, P);
  g_assert_cmpint (pp_timeline_model_step_bubbles (all, ba), ==, pp_timeline_model_step_bubbles (one, bo));
  for (int r = 0; r < P; r++)
    g_assert_cmpfloat (ba[r], ==, bo[r]);
  g_assert_cmpuint (pp_timeline_model_n_steps (all), ==, 3);
  g_free (ba);
  g_free (bo);
  pp_timeline_model_free (all);
  pp_timeline_model_free (one);
  pp_test_ctx_clear (&c);
}

static void
test_two_by_two (void)
{
  check_job (2, 2, 4, "1f1b");
}

static void
test_four_by_eight (void)
{
  check_job (4, 8, 6, "gpipe");
}

/* One replica: no note, nothing hidden; a trace without PROCESS frames
 * (the same bytes said to be 1.3) holds no processes and one replica. */
static void
test_one_replica (void)
{
  check_job (3, 1, 4, "1f1b");

  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-replicas-");
  write_job (&c, "old", 2, 2, 2, "gpipe");
  char *path = pp_test_ctx_path (&c, "old.rank1");
  gchar *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  guint16 minor = GUINT16_TO_LE (3);   /* pp-synth-mesh writes the host's order: x86 and arm64 are little */
  memcpy (data + 14, &minor, 2);
  g_assert_true (g_file_set_contents (path, data, (gssize) len, NULL));
  PpTimelineModel *m = pp_timeline_model_new ();
  feed (m, path);
  g_assert_cmpint (pp_timeline_model_n_processes (m), ==, 0);
  g_assert_cmpint (pp_timeline_model_n_replicas (m), ==, 1);
  g_assert_cmpuint (pp_timeline_model_n_hidden_spans (m), ==, 0);
  g_assert_cmpuint (pp_timeline_model_n_spans_total (m), ==, 3 * 2 * 2);
  pp_timeline_model_free (m);
  g_free (data);
  g_free (path);
  pp_test_ctx_clear (&c);
}

/* Whose rows these are, said by every view alike: tensor ranks are
 * replicas of a row too (a TP job's note read "dp 0 of 1 shown"). */
static void
test_note (void)
{
  char buf[160];
  int32_t shown[PP_TRACE_MESH_DIMS] = { 0, 0, 0, 0, 0 };
  int32_t dp[PP_TRACE_MESH_DIMS] = { 2, 2, 1, 1, 1 }, tp[PP_TRACE_MESH_DIMS] = { 2, 1, 2, 1, 1 };
  int32_t both[PP_TRACE_MESH_DIMS] = { 16, 8, 4, 1, 1 }, none[PP_TRACE_MESH_DIMS] = { 4, 1, 1, 1, 1 };
  pp_timeline_replica_note_format (shown, dp, 0, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "replica dp 0 of 2 shown");
  pp_timeline_replica_note_format (shown, tp, 0, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "1 of 2 processes a rank shown (tp 0 of tp 2)");
  shown[PP_TRACE_MESH_DP] = 3;
  pp_timeline_replica_note_format (shown, both, 0, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "1 of 32 processes a rank shown (dp 3 tp 0 of dp 8 \u00d7 tp 4)");
  pp_timeline_replica_note_format (shown, none, 0, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "");
}

/* Two models that answer alike: rows, places, steps, the one analysis. */
static void
assert_same_model (const PpTimelineModel *a, const PpTimelineModel *b)
{
  int P = pp_timeline_model_n_ranks (a);
  g_assert_cmpint (P, ==, pp_timeline_model_n_ranks (b));
  g_assert_cmpuint (pp_timeline_model_n_spans_total (a), ==, pp_timeline_model_n_spans_total (b));
  g_assert_cmpuint (pp_timeline_model_n_hidden_spans (a), ==, pp_timeline_model_n_hidden_spans (b));
  g_assert_cmpint (pp_timeline_model_n_processes (a), ==, pp_timeline_model_n_processes (b));
  for (int r = 0; r < P; r++)
    {
      gsize n = pp_timeline_model_n_spans (a, r);
      g_assert_cmpuint (n, ==, pp_timeline_model_n_spans (b, r));
      g_assert_cmpmem (pp_timeline_model_spans (a, r), n * sizeof (PpSpan), pp_timeline_model_spans (b, r),
                       n * sizeof (PpSpan));
    }
  g_assert_cmpint (pp_timeline_model_n_places (a), ==, pp_timeline_model_n_places (b));
  for (int i = 0; i < pp_timeline_model_n_places (a); i++)
    {
      gsize na, nb;
      const PpSpan *sa = pp_timeline_model_place_spans (a, i, &na), *sb = pp_timeline_model_place_spans (b, i, &nb);
      g_assert_cmpint (pp_timeline_model_place (a, i)->process, ==, pp_timeline_model_place (b, i)->process);
      g_assert_cmpuint (na, ==, nb);
      g_assert_cmpmem (sa, na * sizeof (PpSpan), sb, nb * sizeof (PpSpan));
    }
  gsize ns = pp_timeline_model_n_steps (a);
  g_assert_cmpuint (ns, ==, pp_timeline_model_n_steps (b));
  g_assert_cmpmem (pp_timeline_model_step_starts (a), ns * sizeof (int64_t), pp_timeline_model_step_starts (b),
                   ns * sizeof (int64_t));
  PpAnalysisSteps sa, sb;
  g_assert_cmpint (pp_timeline_model_step_analysis (a, &sa), ==, pp_timeline_model_step_analysis (b, &sb));
  g_assert_cmpfloat (sa.median_step, ==, sb.median_step);
  g_assert_cmpfloat (sa.bubble_mean, ==, sb.bubble_mean);
  g_assert_cmpint (pp_timeline_model_analysis_dp (a), ==, pp_timeline_model_analysis_dp (b));
  pp_analysis_steps_clear (&sa);
  pp_analysis_steps_clear (&sb);
  PpTimelineSpread *xa = g_new0 (PpTimelineSpread, MAX (P, 1)), *xb = g_new0 (PpTimelineSpread, MAX (P, 1));
  g_assert_cmpint (pp_timeline_replica_bubbles (a, P, xa), ==, pp_timeline_replica_bubbles (b, P, xb));
  g_assert_cmpmem (xa, P * sizeof *xa, xb, P * sizeof *xb);
  g_free (xa);
  g_free (xb);
}

/* issue 40: the app's worker analyses a snapshot of a run's model: it
 * answers as the model did when it was made, whatever the model takes
 * after (a live run grows on the main loop meanwhile), and takes nothing
 * itself.  Made halfway through a 3 x 4 job fed the higher replicas first
 * (a lower place that comes later replaces the row's), it is the model of
 * that half. */
static void
test_snapshot (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-replicas-");
  write_job (&c, "job", 3, 4, 4, "1f1b");
  PpTimelineModel *all = pp_timeline_model_new (), *half = pp_timeline_model_new (), *snap = NULL;
  int n = 0;
  for (int dp = 3; dp >= 0; dp--)
    for (int r = 0; r < 3; r++, n++)
      {
        char name[64];
        g_snprintf (name, sizeof name, "job.rank%d", r * 4 + dp);
        char *path = pp_test_ctx_path (&c, name);
        if (n == 7)
          {
            snap = pp_timeline_model_snapshot (all);
            g_assert_nonnull (snap);
          }
        feed (all, path);
        if (n < 7)
          feed (half, path);
        g_free (path);
      }
  g_assert_cmpuint (pp_timeline_model_n_spans_total (all) + pp_timeline_model_n_hidden_spans (all), >,
                    pp_timeline_model_n_spans_total (snap) + pp_timeline_model_n_hidden_spans (snap));
  assert_same_model (snap, half);
  /* a snapshot of the whole, and of it: the whole */
  PpTimelineModel *whole = pp_timeline_model_snapshot (all), *again = pp_timeline_model_snapshot (whole);
  assert_same_model (whole, all);
  assert_same_model (again, all);
  /* it takes no item */
  size_t before = pp_timeline_model_n_spans_total (snap);
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
  it.span = (PpSpan) { .start_ns = 1, .end_ns = 2, .rank = 0, .kind = PP_SPAN_F, .device = 0xffff, .peer_rank = -1 };
  g_assert_cmpint (pp_timeline_model_add (snap, &it), ==, 0);
  g_assert_cmpint (pp_timeline_model_set_rank_lost (snap, 0, 5), ==, 0);
  g_assert_cmpuint (pp_timeline_model_n_spans_total (snap), ==, before);
  g_assert_cmpint (pp_timeline_model_rank_lost (snap, 0), ==, INT64_MAX);
  /* a view is no run: not copied */
  PpTimelineReplicas how = { .replica = -1 };
  PpTimelineModel *view = pp_timeline_view_new (all, &how);
  g_assert_nonnull (view);
  g_assert_null (pp_timeline_model_snapshot (view));
  pp_timeline_model_free (view);
  pp_timeline_model_free (again);
  pp_timeline_model_free (whole);
  pp_timeline_model_free (snap);
  pp_timeline_model_free (half);
  pp_timeline_model_free (all);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_assert_cmpint (argc, >=, 2);
  synth = argv[1];
  g_test_add_func ("/timeline-replicas/2x2", test_two_by_two);
  g_test_add_func ("/timeline-replicas/4x8", test_four_by_eight);
  g_test_add_func ("/timeline-replicas/one-replica", test_one_replica);
  g_test_add_func ("/timeline-replicas/note", test_note);
  g_test_add_func ("/timeline-replicas/snapshot", test_snapshot);
  return g_test_run ();
}
