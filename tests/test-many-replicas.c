/* test-many-replicas.c — issue 40, finding 2: a job of thousands of
 * one-process replicas is analysed in work bounded a replica, counted,
 * not timed:
 *
 *  - the why analysis over replicas builds the schedule once for them all
 *    (InterleavedZeroBubble at M 8192, V 4: a plan of 65,536 actions a
 *    rank, built once a replica before), and a replica without the blocks
 *    of a whole step is told so (the one message);
 *  - the bubble over replicas (info, the Statistics panel) builds no view
 *    a replica (each copied the whole source), and gives what a view of
 *    each replica gives: the same median, least, largest and which dp;
 *  - the median copy's steps are those of a copy by copy reading. */
#include <glib.h>
#include <string.h>

#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"
#include "pp-straggler.h"
#include "pp-why.h"

#define N_REP 2000
#define MS_NS INT64_C (1000000)

/* N_REP processes, each replica dp d of pipeline rank 0 alone, two steps
 * of F and B of micro-batch 0; replica d's backward lasts 2 ms + (d * 7
 * % 101) us, so that their bubbles differ and none is in order. */
static PpTimelineModel *
many (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int d = 0; d < N_REP; d++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = d };
      it.process_info = (PpTraceProcess) { .process = d, .rank = 0, .coord = { 0, d, 0, 0, 0 },
                                           .size = { 1, N_REP, 1, 1, 1 }, .pid = 1000 + d };
      pp_timeline_model_add (m, &it);
      for (int s = 0; s < 2; s++)
        {
          int64_t t0 = 1000 * MS_NS + s * 10 * MS_NS + d * 1000;
          int64_t b = 2 * MS_NS + (d * 7 % 101) * 1000;
          PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN, .process = d };
          sp.span = (PpSpan) { .start_ns = t0, .end_ns = t0 + MS_NS, .rank = 0, .stage = 0, .microbatch = 0,
                               .step = s, .kind = PP_SPAN_F, .device = 0xffff, .peer_rank = -1 };
          pp_timeline_model_add (m, &sp);
          sp.span.start_ns = t0 + 2 * MS_NS;
          sp.span.end_ns = t0 + 2 * MS_NS + b;
          sp.span.kind = PP_SPAN_B;
          pp_timeline_model_add (m, &sp);
        }
    }
  return m;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
test_bubbles_without_views (void)
{
  PpTimelineModel *m = many ();
  PpTimelineSpread sp[1];
  size_t before = pp_timeline_views_built ();
  g_assert_cmpint (pp_timeline_replica_bubbles (m, 1, sp), ==, N_REP);
  g_assert_cmpuint (pp_timeline_views_built (), ==, before);
  /* what a view of each replica says (the way it was counted before) */
  double *b = g_new (double, N_REP), x, min = 2, max = -1;
  int max_dp = -1;
  for (int d = 0; d < N_REP; d++)
    {
      PpTimelineReplicas how = { .replica = d };
      PpTimelineModel *v = pp_timeline_view_new (m, &how);
      g_assert_cmpint (pp_timeline_model_step_bubbles (v, &x), >, 0);
      b[d] = x;
      if (x < min)
        min = x;
      if (x > max)
        max_dp = d, max = x;
      pp_timeline_model_free (v);
    }
  qsort (b, N_REP, sizeof *b, cmp_double);
  g_assert_cmpint (sp[0].n, ==, N_REP);
  g_assert_cmpfloat (sp[0].min, ==, min);
  g_assert_cmpfloat (sp[0].max, ==, max);
  g_assert_cmpint (sp[0].max_dp, ==, max_dp);
  g_assert_cmpfloat (sp[0].median, ==, 0.5 * (b[N_REP / 2 - 1] + b[N_REP / 2]));
  g_assert_cmpfloat (min, <, max);
  g_free (b);
  pp_timeline_model_free (m);
}

static void
test_schedule_once (void)
{
  PpTraceDescription desc = { .n_ranks = 2, .n_microbatches = 8192, .n_virtual = 4 };
  snprintf (desc.schedule, sizeof desc.schedule, "InterleavedZeroBubble");
  PpSpan *spans = g_new0 (PpSpan, 2 * N_REP);
  int32_t *replica = g_new (int32_t, 2 * N_REP);
  for (int d = 0; d < N_REP; d++)
    for (int k = 0; k < 2; k++)
      {
        int64_t t0 = 1000 * MS_NS + d * 1000 + k * MS_NS;
        spans[2 * d + k] = (PpSpan) { .start_ns = t0, .end_ns = t0 + MS_NS, .rank = 0, .stage = 0,
                                      .microbatch = 0, .step = 0, .kind = k ? PP_SPAN_B : PP_SPAN_F,
                                      .device = 0xffff, .peer_rank = -1 };
        replica[2 * d + k] = d;
      }
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  size_t before = pp_why_schedules_built ();
  g_assert_cmpint (pp_why_analyse_replicas (&desc, NULL, spans, replica, 2 * N_REP, 0, &rep, NULL, NULL, &err),
                   ==, PP_EINVAL);
  g_assert_null (rep);
  g_assert_cmpuint (pp_why_schedules_built () - before, ==, 1);
  g_assert_cmpstr (err.msg, ==,
                   "no whole step to analyse: no step has a block for every action of the InterleavedZeroBubble plan");
  g_free (spans);
  g_free (replica);
}

/* The straggler analysis of the same replicas builds the schedule once
 * too (it built one a replica: info took 74 s on 11,000), each replica too
 * small for a step told so from its own spans. */
static void
test_straggler_schedule_once (void)
{
  PpTraceDescription desc = { .n_ranks = 2, .n_microbatches = 8192, .n_virtual = 4 };
  snprintf (desc.schedule, sizeof desc.schedule, "InterleavedZeroBubble");
  PpSpan *spans = g_new0 (PpSpan, 2 * N_REP);
  int32_t *process = g_new (int32_t, 2 * N_REP);
  PpTraceProcess *procs = g_new0 (PpTraceProcess, N_REP);
  for (int d = 0; d < N_REP; d++)
    {
      procs[d] = (PpTraceProcess) { .process = d, .rank = 0, .coord = { 0, d, 0, 0, 0 },
                                    .size = { 1, N_REP, 1, 1, 1 }, .pid = 1000 + d };
      for (int k = 0; k < 2; k++)
        {
          int64_t t0 = 1000 * MS_NS + d * 1000 + k * MS_NS;
          spans[2 * d + k] = (PpSpan) { .start_ns = t0, .end_ns = t0 + MS_NS, .rank = 0, .stage = 0,
                                        .microbatch = 0, .step = 0, .kind = k ? PP_SPAN_B : PP_SPAN_F,
                                        .device = 0xffff, .peer_rank = -1 };
          process[2 * d + k] = d;
        }
    }
  PpStragglerReport *rep = NULL;
  PpError err = { 0 };
  size_t before = pp_why_schedules_built ();
  PpStatus st = pp_straggler_analyse (&desc, NULL, spans, process, 2 * N_REP, NULL, NULL, 0, procs, N_REP, &rep,
                                      &err);
  g_assert_cmpuint (pp_why_schedules_built () - before, ==, 1);
  g_assert_cmpint (st, !=, PP_OK);   /* no replica has a whole step */
  pp_straggler_report_free (rep);
  g_free (spans);
  g_free (process);
  g_free (procs);
}

/* The median copy's steps: the copy whose median step is the median of
 * them all (the lower of two middles), found in one pass over the places. */
static void
test_median_copy (void)
{
  PpTimelineModel *m = many ();
  PpAnalysisSteps a;
  g_assert_cmpint (pp_timeline_model_step_analysis (m, &a), >, 0);
  int dp = pp_timeline_model_analysis_dp (m);
  /* replica d's step lasts 3 ms + its backward: the median over d of
   * (d * 7 % 101), by step length then dp */
  int best = -1;
  for (int d = 0; d < N_REP; d++)
    {
      long below = 0, same_before = 0;
      for (int e = 0; e < N_REP; e++)
        {
          below += e * 7 % 101 < d * 7 % 101;
          same_before += e * 7 % 101 == d * 7 % 101 && e < d;
        }
      if (below + same_before == (N_REP - 1) / 2)
        best = d;
    }
  g_assert_cmpint (dp, ==, best);
  pp_analysis_steps_clear (&a);
  pp_timeline_model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/many-replicas/bubbles-without-views", test_bubbles_without_views);
  g_test_add_func ("/many-replicas/schedule-once", test_schedule_once);
  g_test_add_func ("/many-replicas/straggler-schedule-once", test_straggler_schedule_once);
  g_test_add_func ("/many-replicas/median-copy", test_median_copy);
  return g_test_run ();
}
