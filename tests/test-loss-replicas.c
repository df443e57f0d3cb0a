/* The job's loss (issue 36, pp-analysis-loss.h): a series per replica,
 * never mixed, and the headline over the replicas reduced as the
 * framework reduces it (the sum of LOSS_PART parts, the mean of LOSS
 * means), the same in info and in the app's chart (the timeline model).
 * Values are built by hand. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-analysis-loss.h"
#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"

#define EPS 1e-12

static PpCounter
loss (int kind, int step, double v)
{
  return (PpCounter) { .time_ns = 1000 + step, .value = v, .rank = 1, .step = step, .kind = (uint16_t) kind };
}

/* torchtitan: each replica's part, summed; a replica's tensor ranks
 * report the same part (one value); a step one replica has not reported
 * has no headline. */
static void
test_parts_sum (void)
{
  PpAnalysisLoss *a = pp_analysis_loss_new ();
  for (int step = 0; step < 3; step++)
    {
      PpCounter c0 = loss (PP_COUNTER_LOSS_PART, step, 4.0 - step);
      PpCounter c1 = loss (PP_COUNTER_LOSS_PART, step, 3.0 - step);
      g_assert_cmpint (pp_analysis_loss_add (a, &c0, 0), ==, 1);
      g_assert_cmpint (pp_analysis_loss_add (a, &c1, 1), ==, 1);
      g_assert_cmpint (pp_analysis_loss_add (a, &c1, 1), ==, 1);   /* its tensor rank: the same */
    }
  PpCounter late = loss (PP_COUNTER_LOSS_PART, 3, 1.0);
  pp_analysis_loss_add (a, &late, 0);
  PpCounter other = loss (PP_COUNTER_INFLIGHT, 0, 99);
  g_assert_cmpint (pp_analysis_loss_add (a, &other, 0), ==, 0);
  g_assert_cmpint (pp_analysis_loss_kind (a), ==, PP_COUNTER_LOSS_PART);
  g_assert_cmpint (pp_analysis_loss_n_replicas (a), ==, 2);
  int32_t step[8], rep;
  double v[8];
  g_assert_cmpuint (pp_analysis_loss_series (a, step, v, 8), ==, 3);
  for (int i = 0; i < 3; i++)
    {
      g_assert_cmpint (step[i], ==, i);
      g_assert_cmpfloat_with_epsilon (v[i], 7.0 - 2 * i, EPS);
      g_assert_cmpfloat_with_epsilon (pp_analysis_loss_at (a, i), 7.0 - 2 * i, EPS);
    }
  g_assert_true (isnan (pp_analysis_loss_at (a, 3)));
  /* each replica's own series, apart */
  g_assert_cmpuint (pp_analysis_loss_replica_series (a, 0, &rep, step, v, 8), ==, 4);
  g_assert_cmpint (rep, ==, 0);
  g_assert_cmpfloat_with_epsilon (v[0], 4.0, EPS);
  g_assert_cmpfloat_with_epsilon (v[3], 1.0, EPS);
  g_assert_cmpuint (pp_analysis_loss_replica_series (a, 1, &rep, step, v, 8), ==, 3);
  g_assert_cmpint (rep, ==, 1);
  g_assert_cmpfloat_with_epsilon (v[2], 1.0, EPS);
  char buf[256];
  g_assert_cmpstr (pp_analysis_loss_describe (a, buf, sizeof buf), ==,
                   "loss: 7 -> 3 (3 values, a step's the sum over 2 replicas, as the job reduces it)");
  pp_analysis_loss_free (a);
}

/* megatron-core, PyTorch's schedules: each replica's mean, averaged; one
 * replica reads as the job computed it. */
static void
test_means_mean (void)
{
  PpAnalysisLoss *a = pp_analysis_loss_new ();
  for (int step = 0; step < 2; step++)
    for (int q = 0; q < 4; q++)
      {
        PpCounter c = loss (PP_COUNTER_LOSS, step, 1.0 + q + step);
        pp_analysis_loss_add (a, &c, q);
      }
  g_assert_cmpint (pp_analysis_loss_kind (a), ==, PP_COUNTER_LOSS);
  g_assert_cmpfloat_with_epsilon (pp_analysis_loss_at (a, 0), 2.5, EPS);
  g_assert_cmpfloat_with_epsilon (pp_analysis_loss_at (a, 1), 3.5, EPS);
  pp_analysis_loss_free (a);
  a = pp_analysis_loss_new ();
  PpCounter c = loss (PP_COUNTER_LOSS, 0, 0.5);
  pp_analysis_loss_add (a, &c, -1);
  char buf[256];
  g_assert_cmpstr (pp_analysis_loss_describe (a, buf, sizeof buf), ==,
                   "loss: 0.5 -> 0.5 (1 value, as the job computed it)");
  pp_analysis_loss_free (a);
}

/* PP 2 x DP 2: the last stage's two processes (dp 0, dp 1) write their
 * parts.  info prints the sum over the replicas and the timeline model
 * (the app's chart, render) holds the same per step. */
static void
test_info_and_chart (void)
{
  PpTestCtx ctx;
  PpError e = { 0 };
  pp_test_ctx_init (&ctx, "loss");
  char *t = pp_test_ctx_path (&ctx, "mesh.pptrace");
  PpTraceWriter *w = pp_trace_writer_new_path (t, PP_TRACE_NATIVE, &e);
  g_assert_nonnull (w);
  PpTraceDescription d = { .n_ranks = 2, .n_microbatches = 2, .n_virtual = 1 };
  strcpy (d.schedule, "1F1B");
  strcpy (d.backend, "pytorch");
  g_assert_cmpint (pp_trace_write_description (w, &d, &e), ==, PP_OK);
  for (int g = 0; g < 4; g++)
    {
      PpTraceProcess p = { .process = g, .rank = g % 2 };
      for (int k = 0; k < PP_TRACE_MESH_DIMS; k++)
        p.size[k] = 1;
      p.size[PP_TRACE_MESH_PP] = 2;
      p.size[PP_TRACE_MESH_DP] = 2;
      p.coord[PP_TRACE_MESH_PP] = g % 2;
      p.coord[PP_TRACE_MESH_DP] = g / 2;
      g_assert_cmpint (pp_trace_writer_set_process (w, g, &e), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_process (w, &p, &e), ==, PP_OK);
    }
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int step = 0; step < 3; step++)
    for (int g = 1; g < 4; g += 2)
      {
        PpCounter c = loss (PP_COUNTER_LOSS_PART, step, (g == 1 ? 4.0 : 3.0) - step);
        g_assert_cmpint (pp_trace_writer_set_process (w, g, &e), ==, PP_OK);
        g_assert_cmpint (pp_trace_write_counter (w, &c, &e), ==, PP_OK);
        PpSpan f = { .rank = 1, .stage = 1, .microbatch = 0, .step = step, .kind = PP_SPAN_F, .peer_rank = -1,
                     .device = 0xffff };
        f.start_ns = 1000000 * (int64_t) step;
        f.end_ns = f.start_ns + 500000;
        g_assert_cmpint (pp_trace_write_spans (w, &f, 1, &e), ==, PP_OK);
      }
  g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);
  /* the app reads the same file into its model */
  PpTraceReader *rd = pp_trace_reader_new_path (t, &e);
  PpTraceItem it;
  g_assert_nonnull (rd);
  while (pp_trace_reader_next (rd, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    pp_timeline_model_add (m, &it);
  pp_trace_reader_free (rd);
  g_assert_cmpuint (pp_timeline_model_n_losses (m), ==, 3);
  for (int step = 0; step < 3; step++)
    g_assert_cmpfloat_with_epsilon (pp_timeline_model_losses (m)[step], 7.0 - 2 * step, EPS);
  pp_timeline_model_free (m);
  char *out = NULL, *err = NULL;
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &err, "info", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "loss: 7 -> 3 (3 values, a step's the sum over 2 replicas, as the job reduces it)"));
  g_free (out);
  g_free (err);
  g_free (t);
  pp_test_ctx_clear (&ctx);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/loss-replicas/parts-sum", test_parts_sum);
  g_test_add_func ("/loss-replicas/means-mean", test_means_mean);
  g_test_add_func ("/loss-replicas/info-and-chart", test_info_and_chart);
  return g_test_run ();
}
