/* Stragglers across the mesh (issue 38): a hand-built PP 2 x DP 3 job of
 * 1F1B (4 micro-batches, F 1 ms, B 2 ms) whose process at pp 1, dp 2 runs
 * its blocks twice as long.  It is named first, its slowdown is +100 %,
 * its cause slower compute, and its saving the one computed by hand below;
 * no other process saves anything.  Nothing timed on this machine is
 * asserted: the spans are written from a simulated plan. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-straggler.h"
#include "pp-test-util.h"
#include "pp-why.h"

#define EPS 1e-8
#define STEP_NS 1000000000LL
#define D 3

/* Replica dp's blocks of steps 0..2 as simulated under c, step k at k s. */
static void
add_replica (GArray *spans, GArray *who, const PpSchedule *s, const PpCostModel *c, int dp)
{
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  for (int step = 0; step < 3; step++)
    for (int r = 0; r < s->ranks; r++)
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .step = step,
                        .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B, .peer_rank = -1 };
          sp.start_ns = step * STEP_NS + (int64_t) llround (sim->timeline[r][k].start * 1e9);
          sp.end_ns = step * STEP_NS + (int64_t) llround (sim->timeline[r][k].end * 1e9);
          int32_t g = r * D + dp;
          g_array_append_val (spans, sp);
          g_array_append_val (who, g);
        }
  pp_simulation_free (sim);
}

static PpStragglerReport *
analyse (int slow_dp, int n_dp)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *fast = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpCostModel *slow = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  slow->f[1] = 2e-3;
  slow->b[1] = 4e-3;
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  GArray *who = g_array_new (FALSE, TRUE, sizeof (int32_t));
  PpTraceProcess procs[2 * D];
  memset (procs, 0, sizeof procs);
  for (int dp = 0; dp < n_dp; dp++)
    {
      add_replica (spans, who, s, dp == slow_dp ? slow : fast, dp);
      for (int r = 0; r < 2; r++)
        {
          PpTraceProcess *p = &procs[r * n_dp + dp];
          p->process = r * D + dp;
          p->rank = r;
          p->coord[PP_TRACE_MESH_PP] = r;
          p->coord[PP_TRACE_MESH_DP] = dp;
          for (int k = 0; k < PP_TRACE_MESH_DIMS; k++)
            p->size[k] = 1;
          p->size[PP_TRACE_MESH_PP] = 2;
          p->size[PP_TRACE_MESH_DP] = n_dp;
          strcpy (p->host, dp == 2 ? "node-b" : "node-a");
        }
    }
  PpTraceDescription d = { .n_ranks = 2, .n_microbatches = 4, .n_virtual = 1 };
  strcpy (d.schedule, "1F1B");
  PpStragglerReport *rep = NULL;
  PpError err = { 0 };
  if (pp_straggler_analyse (&d, NULL, (const PpSpan *) spans->data, (const int32_t *) who->data, spans->len,
                            NULL, NULL, 0, procs, (size_t) (2 * n_dp), &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  pp_cost_model_free (fast);
  pp_cost_model_free (slow);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
  g_array_free (who, TRUE);
  return rep;
}

/* By hand, 1F1B on 2 ranks, 4 micro-batches, times in ms.  Fast: rank 1
 * runs F B alternately from 1 ms, each F waiting for rank 0's (F 1, B 2):
 * F10 1-2 B10 2-4 F11 4-5 B11 5-7 F12 7-8 (F02 6-7) B12 8-10 F13 10-11
 * B13 11-13; rank 0 ends with B02 10-12, B03 13-15: 15 ms.  Slow stage 1
 * (F 2, B 4): F10 1-3 B10 3-7 F11 7-9 B11 9-13 F12 13-15 B12 15-19 F13
 * 19-21 B13 21-25, and rank 0's B03 25-27: 27 ms.  The job's step is the
 * slowest replica's: running the straggler like its copies saves 12 ms. */
#define FAST_STEP 15e-3
#define SLOW_STEP 27e-3

static void
test_slow_process_first (void)
{
  PpStragglerReport *r = analyse (2, D);
  g_assert_nonnull (r);
  g_assert_cmpint ((int) r->n_procs, ==, 2 * D);
  /* the one analysis leaves the first of several steps out (set-up) */
  g_assert_cmpint (r->n_steps, ==, 2);
  g_assert_cmpint (r->steps[0], ==, 1);
  g_assert_cmpint (r->n_pp, ==, 2);
  g_assert_cmpint (r->n_dp, ==, D);
  g_assert_cmpfloat_with_epsilon (r->replayed_step, SLOW_STEP, EPS);
  g_assert_cmpfloat_with_epsilon (r->measured_step, SLOW_STEP, 1e-6);
  /* first: the slow process itself, then the host it is on (same saving) */
  g_assert_cmpuint (r->n_items, >=, 2);
  const PpStragglerItem *it = &r->items[0];
  const PpStragglerProcess *p = &r->procs[it->proc];
  g_assert_cmpint (it->group, ==, PP_STRAGGLER_GROUP_PROCESS);
  g_assert_cmpint (p->pp, ==, 1);
  g_assert_cmpint (p->dp, ==, 2);
  g_assert_cmpint (p->process, ==, 1 * D + 2);
  g_assert_cmpstr (p->host, ==, "node-b");
  g_assert_cmpfloat_with_epsilon (it->saving_s, SLOW_STEP - FAST_STEP, EPS);
  g_assert_cmpfloat_with_epsilon (p->slowdown, 1.0, 1e-6);
  g_assert_cmpint (p->cause, ==, PP_STRAGGLER_CAUSE_COMPUTE);
  g_assert_cmpint (p->n_copies, ==, D);
  g_assert_cmpint (r->procs[p->median_copy].dp, !=, 2);
  g_assert_cmpfloat_with_epsilon (p->time[PP_STRAGGLER_COMPUTE], 24e-3, 1e-6);
  g_assert_cmpint (r->items[1].group, ==, PP_STRAGGLER_GROUP_HOST);
  g_assert_cmpfloat_with_epsilon (r->items[1].saving_s, SLOW_STEP - FAST_STEP, EPS);
  /* nothing else saves */
  for (size_t i = 2; i < r->n_items; i++)
    g_assert_cmpfloat_with_epsilon (r->items[i].saving_s, 0, EPS);

  /* the heatmap: the slow cell +100 %, the others 0, over any range */
  double cell[2 * D];
  int32_t proc[2 * D];
  g_assert_cmpint (pp_straggler_heatmap (r, 0, 2, cell, proc), ==, 2);
  g_assert_cmpint (pp_straggler_heatmap (r, 1, 1, cell, proc), ==, 1);
  for (int i = 0; i < 2 * D; i++)
    {
      g_assert_cmpint (proc[i], >=, 0);
      g_assert_cmpint (r->procs[proc[i]].pp * D + r->procs[proc[i]].dp, ==, i);
      g_assert_cmpfloat_with_epsilon (cell[i], i == 1 * D + 2 ? 1.0 : 0.0, 1e-6);
    }
  g_assert_cmpint (pp_straggler_heatmap (r, 5, 9, cell, proc), ==, 0);
  g_assert_true (isnan (cell[0]));

  /* the export: ordered by saving, the slow process first */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  pp_straggler_write_json (f, r);
  fclose (f);
  g_assert_true (g_str_has_prefix (buf, "\"stragglers\": [\n    {\"process\": 5, \"pp\": 1, \"dp\": 2, \"tp\": 0, "
                                        "\"host\": \"node-b\", \"saving_s\": 0.012, \"cause\": \"slower compute\""));
  g_assert_nonnull (strstr (buf, "\"straggler_groups\": [\n    {\"group\": \"host\", \"pp\": 1, \"dp\": 2, "
                                 "\"host\": \"node-b\", \"processes\": 2, \"saving_s\": 0.012}"));
  free (buf);
  pp_straggler_report_free (r);
}

/* The same job with nobody slow saves nothing; one replica has no copies. */
static void
test_none_and_one_replica (void)
{
  PpStragglerReport *r = analyse (-1, D);
  g_assert_nonnull (r);
  g_assert_cmpfloat_with_epsilon (r->replayed_step, FAST_STEP, EPS);
  for (size_t i = 0; i < r->n_items; i++)
    g_assert_cmpfloat_with_epsilon (r->items[i].saving_s, 0, EPS);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  pp_straggler_print (f, r, 10, 1e3, "ms");
  fclose (f);
  g_assert_nonnull (strstr (buf, "  none: "));
  free (buf);
  pp_straggler_report_free (r);
  g_assert_null (analyse (-1, 1));
  g_assert_cmpstr (pp_straggler_cause_name (PP_STRAGGLER_CAUSE_GC), ==, "gc");
  g_assert_null (pp_straggler_cause_name (PP_STRAGGLER_N_CAUSES));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/straggler/slow-process-first", test_slow_process_first);
  g_test_add_func ("/straggler/none-and-one-replica", test_none_and_one_replica);
  return g_test_run ();
}
