/* The whole step of a mesh job (issue 36): a step's data-parallel work and
 * optimizer step inside it, data-parallel spans nested in blocks counted
 * as dp_comm and not as compute, the loss computation (LOSS) as the last
 * stage's work.  Every trace is built by hand from a simulated plan;
 * nothing timed on this machine is asserted. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-analysis.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-suggest.h"
#include "pp-test-util.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-why.h"
#include "pp-why-runtime.h"

#define EPS 1e-8
#define STEP_NS 1000000000LL

/* The blocks of steps 0..n_steps-1 of sim, step k at k seconds; f_len[stage]
 * (may be NULL) the recorded length of an F, less than the plan's where a
 * LOSS span of the rest follows it. */
static void
add_blocks (GArray *spans, const PpSchedule *s, const PpSimulation *sim, int n_steps, const double *f_len)
{
  for (int step = 0; step < n_steps; step++)
    for (int r = 0; r < s->ranks; r++)
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          PpSpan sp = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .step = step,
                        .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B, .peer_rank = -1 };
          sp.start_ns = step * STEP_NS + (int64_t) llround (sim->timeline[r][k].start * 1e9);
          sp.end_ns = step * STEP_NS + (int64_t) llround (sim->timeline[r][k].end * 1e9);
          if (a->kind == PP_ACT_F && f_len != NULL && f_len[a->stage] > 0)
            {
              PpSpan loss = sp;
              sp.end_ns = sp.start_ns + (int64_t) llround (f_len[a->stage] * 1e9);
              loss.kind = PP_SPAN_LOSS;
              loss.start_ns = sp.end_ns;
              g_array_append_val (spans, loss);
            }
          g_array_append_val (spans, sp);
        }
}

static PpSpan
span (int kind, int rank, int stage, int step, double start, double end)
{
  PpSpan sp = { .rank = rank, .stage = stage, .microbatch = -1, .step = step, .kind = kind,
                .peer_rank = -1 };
  sp.start_ns = step * STEP_NS + (int64_t) llround (start * 1e9);
  sp.end_ns = step * STEP_NS + (int64_t) llround (end * 1e9);
  return sp;
}

static PpWhyReport *
analyse (const PpSchedule *s, GArray *spans)
{
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  if (pp_why_analyse_spans (s, (const PpSpan *) spans->data, spans->len, 0, &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  return rep;
}

/* The Why of a 1F1B job (P 2, M 4) of replicas, rep_of[i] span i's. */
static PpWhyReport *
analyse_replicas (GArray *spans, GArray *rep_of)
{
  PpTraceDescription d = { .n_ranks = 2, .n_microbatches = 4, .n_virtual = 1 };
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  strcpy (d.schedule, "1F1B");
  if (pp_why_analyse_replicas (&d, NULL, (const PpSpan *) spans->data, (const int32_t *) rep_of->data,
                               spans->len, 0, &rep, NULL, NULL, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  return rep;
}

static void
assert_adds_up (const PpWhyIdle *w)
{
  g_assert_cmpfloat_with_epsilon (w->schedule + w->imbalance + w->transfers + w->runtime, w->measured, EPS);
}

/* The median step of the one analysis (pp-analysis.h), in seconds. */
static double
median_step (GArray *spans, int ranks)
{
  PpAnalysisSteps a;
  const PpSpan *rows[1] = { (const PpSpan *) spans->data };
  size_t n[1] = { spans->len };
  g_assert_cmpint (pp_analysis_steps (rows, n, NULL, 1, ranks, 0, &a, NULL), ==, PP_OK);
  double m = a.median_step * 1e-9;
  pp_analysis_steps_clear (&a);
  return m;
}

/* megatron's finalize_model_grads after the last block: a REDUCE_GRAD on
 * every rank once rank 0's last backward is done (2 ms), then each rank's
 * OPT (1 ms).  The step ends at the last OPT, not the last B: its length
 * is the plan's makespan + 3 ms in Why and in the one analysis alike, the
 * reductions are dp_comm (work, not idle) and the OPT busy. */
static void
test_step_ends_after_grads_and_opt (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  add_blocks (spans, s, sim, 3, NULL);
  double T = sim->makespan;
  for (int step = 0; step < 3; step++)
    for (int r = 0; r < 2; r++)
      {
        PpSpan g = span (PP_SPAN_REDUCE_GRAD, r, r, step, T, T + 2e-3);
        PpSpan o = span (PP_SPAN_OPT, r, -1, step, T + 2e-3, T + 3e-3);
        g_array_append_val (spans, g);
        g_array_append_val (spans, o);
      }
  PpWhyReport *rep = analyse (s, spans);
  g_assert_cmpint (rep->n_steps, ==, 2);
  g_assert_cmpfloat_with_epsilon (rep->length, T + 3e-3, EPS);
  g_assert_cmpfloat_with_epsilon (median_step (spans, 2), rep->length, EPS);
  for (int r = 0; r < 2; r++)
    {
      const PpWhyIdle *w = &rep->idle[r];
      assert_adds_up (w);
      g_assert_cmpfloat_with_epsilon (w->dp_comm, 2e-3, EPS);
      /* idle in the step: the plan's (the reduction is work, the OPT busy) */
      g_assert_cmpfloat_with_epsilon (w->measured, sim->rank[r].idle, EPS);
      g_assert_cmpfloat_with_epsilon (w->runtime, 0, EPS);
    }
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* FSDP2's all-gather in the pre-forward hook: an UNSHARD nested in rank
 * 0's first F (0.6 ms of its 1 ms).  It is dp_comm (0.6 ms), not the F's
 * compute: the stage's F cost is the mean of 0.4 and three 1 ms forwards,
 * and the rank's busy time is not counted twice. */
static void
test_nested_dp_is_dp_comm (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  add_blocks (spans, s, sim, 3, NULL);
  for (int step = 0; step < 3; step++)
    {
      PpSpan u = span (PP_SPAN_UNSHARD, 0, 0, step, 0.1e-3, 0.7e-3);
      g_array_append_val (spans, u);
    }
  PpWhyReport *rep = analyse (s, spans);
  g_assert_cmpint (rep->n_steps, ==, 2);
  g_assert_cmpfloat_with_epsilon (rep->length, sim->makespan, EPS);
  g_assert_cmpfloat_with_epsilon (rep->idle[0].dp_comm, 0.6e-3, EPS);
  g_assert_cmpfloat_with_epsilon (rep->idle[1].dp_comm, 0, EPS);
  /* the idle is the plan's: the nested 0.6 ms is work (dp_comm), not idle */
  g_assert_cmpfloat_with_epsilon (rep->idle[0].measured, sim->rank[0].idle, EPS);
  assert_adds_up (&rep->idle[0]);
  g_assert_cmpfloat_with_epsilon (rep->costs->f[0], (0.4e-3 + 3e-3) / 4, EPS);
  g_assert_cmpfloat_with_epsilon (rep->costs->f[1], 1e-3, EPS);
  g_assert_cmpfloat_with_epsilon (pp_cost_model_dp (rep->costs, PP_ACT_UNSHARD, 0), 0.6e-3, EPS);
  pp_why_report_free (rep);
  /* suggest's and What if's costs the same */
  PpMeasuredCosts mc;
  const PpSpan *rows[1] = { (const PpSpan *) spans->data };
  size_t nrow[1] = { spans->len };
  g_assert_cmpint (pp_measured_costs_from_spans (NULL, rows, nrow, 1, "the run", &mc, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (mc.f[0], (0.4e-3 + 3e-3) / 4, EPS);
  g_assert_cmpfloat_with_epsilon (mc.f[1], 1e-3, EPS);
  pp_measured_costs_clear (&mc);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* torchtitan's chunked loss: the last stage's F is 1 ms and its LOSS after
 * it 0.8 ms a micro-batch, planned as one 1.8 ms F.  The LOSS is busy (the
 * measured idle is the plan's, runtime 0 on every rank) and in the
 * stage's cost (F 1.8 ms: the slowest stage), and the median step is the
 * plan's.  A LOSS nested in an F is the F's time already: not added. */
static void
test_loss_is_last_stage_work (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  c->f[1] = 1.8e-3;
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  double f_len[2] = { 0, 1e-3 };
  add_blocks (spans, s, sim, 3, f_len);
  PpWhyReport *rep = analyse (s, spans);
  g_assert_cmpint (rep->n_steps, ==, 2);
  g_assert_cmpfloat_with_epsilon (rep->length, sim->makespan, EPS);
  g_assert_cmpfloat_with_epsilon (median_step (spans, 2), sim->makespan, EPS);
  for (int r = 0; r < 2; r++)
    {
      assert_adds_up (&rep->idle[r]);
      g_assert_cmpfloat_with_epsilon (rep->idle[r].measured, sim->rank[r].idle, EPS);
      g_assert_cmpfloat_with_epsilon (rep->idle[r].runtime, 0, EPS);
    }
  g_assert_cmpfloat_with_epsilon (rep->costs->f[1], 1.8e-3, EPS);
  g_assert_cmpfloat_with_epsilon (rep->costs->f[0], 1e-3, EPS);
  /* the critical path runs through the loss as through its F: no gaps */
  g_assert_cmpfloat_with_epsilon (rep->path_slack_share, 0, EPS);
  g_assert_cmpfloat_with_epsilon (rep->path_share[0] + rep->path_share[1], 1, EPS);
  PpWhyChange ch;
  g_assert_cmpint (pp_why_suggest_partition (s, rep->costs, NULL, NULL, 0, &ch, &err), ==, PP_OK);
  g_assert_cmpint (ch.slowest_stage, ==, 1);
  pp_why_report_free (rep);
  /* suggest's and What if's costs (one copy's, per rank) count it alike */
  PpMeasuredCosts mc;
  const PpSpan *rows[1] = { (const PpSpan *) spans->data };
  size_t nrow[1] = { spans->len };
  g_assert_cmpint (pp_measured_costs_from_spans (NULL, rows, nrow, 1, "the run", &mc, &err), ==, PP_OK);
  g_assert_cmpint (mc.ranks, ==, 2);
  g_assert_cmpfloat_with_epsilon (mc.f[0], 1e-3, EPS);
  g_assert_cmpfloat_with_epsilon (mc.f[1], 1.8e-3, EPS);
  pp_measured_costs_clear (&mc);

  /* the same LOSS inside a 1.8 ms F: counted once */
  g_array_set_size (spans, 0);
  add_blocks (spans, s, sim, 3, NULL);
  guint n = spans->len;
  for (guint i = 0; i < n; i++)
    {
      PpSpan sp = g_array_index (spans, PpSpan, i);
      if (sp.kind == PP_SPAN_F && sp.stage == 1)
        {
          sp.kind = PP_SPAN_LOSS;
          sp.start_ns += 1000000;
          g_array_append_val (spans, sp);
        }
    }
  rep = analyse (s, spans);
  g_assert_cmpfloat_with_epsilon (rep->costs->f[1], 1.8e-3, EPS);
  g_assert_cmpfloat_with_epsilon (rep->idle[1].measured, sim->rank[1].idle, EPS);
  pp_why_report_free (rep);
  rows[0] = (const PpSpan *) spans->data;
  nrow[0] = spans->len;
  g_assert_cmpint (pp_measured_costs_from_spans (NULL, rows, nrow, 1, "the run", &mc, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (mc.f[1], 1.8e-3, EPS);
  pp_measured_costs_clear (&mc);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* Three replicas of a 1F1B pipeline (P 2, M 4); replica 2 starts each
 * step 3 ms late (its data came late).  After its blocks every rank
 * reduces its gradients with its replicas (1 ms once all have arrived):
 * replicas 0 and 1 wait 3 ms in each REDUCE_GRAD for replica 2.  That wait is idle with a
 * cause of its own, replica_late, naming replica 2, apart from the 1 ms
 * transfer that stays dp_comm. */
static void
test_wait_for_slower_replica (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  GArray *rep_of = g_array_new (FALSE, TRUE, sizeof (int32_t));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  double T = sim->makespan;
  for (int32_t q = 0; q < 3; q++)
    {
      guint from = spans->len;
      add_blocks (spans, s, sim, 3, NULL);
      for (int step = 0; step < 3; step++)
        for (int r = 0; r < 2; r++)
          {
            /* a rank arrives after its last block (rank 0 at T, rank 1
             * at T - 2 ms), replica 2's 3 ms later; each reduction ends
             * 1 ms after its last arrival */
            double last = (r == 0 ? T : T - 2e-3) + 3e-3;
            double arrive = q == 2 ? last : last - 3e-3;
            PpSpan g = span (PP_SPAN_REDUCE_GRAD, r, r, step, arrive, last + 1e-3);
            g_array_append_val (spans, g);
          }
      for (guint i = from; i < spans->len; i++)
        {
          PpSpan *sp = &g_array_index (spans, PpSpan, i);
          if (q == 2 && sp->kind != PP_SPAN_REDUCE_GRAD)
            sp->start_ns += 3000000, sp->end_ns += 3000000;
          g_array_append_val (rep_of, q);
        }
    }
  PpWhyReport *rep = analyse_replicas (spans, rep_of);
  g_assert_cmpint (rep->n_replicas, ==, 3);
  for (int r = 0; r < 2; r++)
    {
      const PpWhyIdle *w = &rep->idle[r];
      /* every rank's row is the median copy's (by step length, as the
       * bubble's): 0 or 1, both waited */
      g_assert_cmpint (rep->idle_replica[r], ==, rep->median_replica);
      g_assert_cmpint (rep->idle_replica[r], !=, 2);
      assert_adds_up (w);
      double waited = 3e-3;
      g_assert_cmpfloat_with_epsilon (w->dp_comm, 1e-3, EPS);
      g_assert_cmpfloat_with_epsilon (w->replica_wait, waited, EPS);
      g_assert_cmpfloat_with_epsilon (w->runtime_parts[PP_WHY_RT_REPLICA_LATE], waited, EPS);
      g_assert_true (w->runtime_measured[PP_WHY_RT_REPLICA_LATE]);
      g_assert_cmpint (w->late_replica, ==, 2);
      g_assert_cmpfloat_with_epsilon (w->runtime_parts[PP_WHY_RT_UNATTRIBUTED], 0, EPS);
      /* the late replica itself waited for nobody */
      g_assert_cmpfloat_with_epsilon (rep->idle_min[r], rep->idle_max[r] - waited, EPS);
      g_assert_cmpint (rep->idle_max_replica[r], !=, 2);
    }
  g_assert_cmpstr (pp_why_runtime_part_name (PP_WHY_RT_REPLICA_LATE), ==, "replica_late");
  g_assert_nonnull (pp_why_runtime_part_meaning (PP_WHY_RT_REPLICA_LATE));
  /* the export names the replica */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  pp_why_runtime_write_json (f, &rep->idle[0]);
  fclose (f);
  g_assert_nonnull (strstr (buf, "\"replica_late\": 0.003"));
  g_assert_nonnull (strstr (buf, "\"runtime_replica_late\": {\"replica\": 2, \"seconds\": 0.003}"));
  free (buf);
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
  g_array_free (rep_of, TRUE);
}

/* The wait for a slower replica where the plan idles too: the last
 * stage's all-gather runs in its bubble before its first F (0 .. 0.9 ms of
 * the 1 ms it waits for rank 0's forward), and replicas 0 and 1 start it
 * 0.6 ms before replica 2 does.  Their data-parallel time is 0.9 ms: 0.6
 * the wait (replica_late), 0.3 the transfer (dp_comm).  The plan's
 * schedule idle of that bubble must not take the wait: dp_comm +
 * replica_late is the data-parallel spans' time, and the parts still add
 * up to the idle (test-titan's last stage lost 27-34 ms a step of its
 * 254 ms this way, the wait's share that the bubble's levels held). */
static void
test_replica_wait_in_bubble (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  GArray *rep_of = g_array_new (FALSE, TRUE, sizeof (int32_t));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  for (int32_t q = 0; q < 3; q++)
    {
      guint from = spans->len;
      add_blocks (spans, s, sim, 3, NULL);
      for (int step = 0; step < 3; step++)
        {
          PpSpan u = span (PP_SPAN_UNSHARD, 1, 1, step, q == 2 ? 0.6e-3 : 0, 0.9e-3);
          g_array_append_val (spans, u);
        }
      for (guint i = from; i < spans->len; i++)
        g_array_append_val (rep_of, q);
    }
  PpWhyReport *rep = analyse_replicas (spans, rep_of);
  g_assert_cmpint (rep->n_replicas, ==, 3);
  /* every replica idles alike: the median by idle and by step is replica 1 */
  g_assert_cmpint (rep->idle_replica[1], ==, 1);
  g_assert_cmpint (rep->median_replica, ==, 1);
  g_assert_cmpfloat_with_epsilon (rep->length, sim->makespan, EPS);
  const PpWhyIdle *w = &rep->idle[1];
  assert_adds_up (w);
  /* the idle: the plan's less the transfer (work), the wait in it */
  g_assert_cmpfloat_with_epsilon (w->measured, sim->rank[1].idle - 0.3e-3, EPS);
  g_assert_cmpfloat_with_epsilon (w->replica_wait, 0.6e-3, EPS);
  g_assert_cmpfloat_with_epsilon (w->runtime_parts[PP_WHY_RT_REPLICA_LATE], 0.6e-3, EPS);
  g_assert_cmpfloat_with_epsilon (w->dp_comm, 0.3e-3, EPS);
  g_assert_cmpint (w->late_replica, ==, 2);
  for (int i = 0; i < rep->n_steps; i++)
    {
      const PpWhyIdle *x = &rep->steps[i].idle[1];
      g_assert_cmpfloat_with_epsilon (x->dp_comm + x->runtime_parts[PP_WHY_RT_REPLICA_LATE], 0.9e-3, EPS);
    }
  /* rank 0 ran no collective: nothing of the kind */
  g_assert_cmpfloat_with_epsilon (rep->idle[0].dp_comm + rep->idle[0].replica_wait, 0, EPS);
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
  g_array_free (rep_of, TRUE);
}

/* The measured bubble and Why agree on a job of replicas: two replicas
 * of a 1F1B pipeline (P 2, M 4), replica 1 starts each step 3 ms late, so
 * replica 0 waits 3 ms in every REDUCE_GRAD (1 ms of transfer once both
 * have arrived); each rank's OPT follows its reduction, replica 1's 3.5
 * ms after it.  Rank 1's first receive is posted before the step's first
 * block: the step starts at that block in both views.  Replica 0's step is the shorter (the median copy) and the
 * less idle on every rank (Why's row): both views read replica 0, and its
 * wait is idle in both.  For each rank, the one analysis's bubble a step
 * times its median step (the app's model over every process, as info,
 * export and the app read it) is Why's idle, the sum of its parts; the
 * bubble counting the wait busy would read 3 ms less. */
static void
test_bubble_is_why_idle (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  GArray *rep_of = g_array_new (FALSE, TRUE, sizeof (int32_t));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  double T = sim->makespan;
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS };
  for (int32_t q = 0; q < 2; q++)
    {
      guint from = spans->len;
      add_blocks (spans, s, sim, 3, NULL);
      for (int step = 0; step < 3; step++)
        for (int r = 0; r < 2; r++)
          {
            double last = (r == 0 ? T : T - 2e-3) + 3e-3;   /* replica 1's arrival */
            PpSpan g = span (PP_SPAN_REDUCE_GRAD, r, r, step, q == 1 ? last : last - 3e-3, last + 1e-3);
            double opt = last + 1e-3 + (q == 1 ? 3.5e-3 : 0);
            PpSpan o = span (PP_SPAN_OPT, r, -1, step, opt, opt + 1e-3);
            g_array_append_val (spans, g);
            g_array_append_val (spans, o);
          }
      /* rank 1 posts its first receive 0.5 ms before the step's first
       * block: a transfer, not work, it bounds no step (in Why neither) */
      for (int step = 0; step < 3; step++)
        {
          PpSpan rv = span (PP_SPAN_RECV_F, 1, 1, step, -0.5e-3, 1e-3);
          rv.microbatch = 0;
          g_array_append_val (spans, rv);
        }
      for (guint i = from; i < spans->len; i++)
        {
          PpSpan *sp = &g_array_index (spans, PpSpan, i);
          if (q == 1 && (pp_span_kind_is_block (sp->kind) || sp->kind == PP_SPAN_RECV_F))
            sp->start_ns += 3000000, sp->end_ns += 3000000;
          g_array_append_val (rep_of, q);
        }
      for (int r = 0; r < 2; r++)
        {
          it.process = r * 2 + q;
          it.process_info = (PpTraceProcess) { .process = r * 2 + q, .rank = r, .coord = { r, q, 0, 0, 0 },
                                               .size = { 2, 2, 1, 1, 1 } };
          pp_timeline_model_add (m, &it);
        }
    }
  for (guint i = 0; i < spans->len; i++)
    {
      PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN, .span = g_array_index (spans, PpSpan, i) };
      sp.process = sp.span.rank * 2 + g_array_index (rep_of, int32_t, i);
      pp_timeline_model_add (m, &sp);
    }
  PpWhyReport *rep = analyse_replicas (spans, rep_of);
  g_assert_cmpint (rep->n_replicas, ==, 2);
  g_assert_cmpint (rep->median_replica, ==, 0);
  PpAnalysisSteps a;
  g_assert_cmpint (pp_timeline_model_step_analysis (m, &a), ==, 2);
  g_assert_cmpint (pp_timeline_model_analysis_dp (m), ==, 0);
  g_assert_cmpfloat_with_epsilon (a.median_step * 1e-9, rep->length, EPS);
  for (int r = 0; r < 2; r++)
    {
      const PpWhyIdle *w = &rep->idle[r];
      g_assert_cmpint (rep->idle_replica[r], ==, 0);
      g_assert_cmpfloat_with_epsilon (w->runtime_parts[PP_WHY_RT_REPLICA_LATE], 3e-3, EPS);
      g_assert_cmpfloat_with_epsilon (w->dp_comm, 1e-3, EPS);
      assert_adds_up (w);
      g_assert_cmpfloat_with_epsilon (a.bubble[r] * a.median_step * 1e-9,
                                      w->schedule + w->imbalance + w->transfers + w->runtime, EPS);
    }
  /* each replica's bubble (info's and the Statistics tab's spread, a view
   * of one replica) counts its waits alike: replica 0's is the headline's */
  PpTimelineSpread spread[2];
  g_assert_cmpint (pp_timeline_replica_bubbles (m, 2, spread), ==, 2);
  PpTimelineReplicas one = { .replica = 0 };
  PpTimelineModel *v = pp_timeline_view_new (m, &one);
  double vb[2];
  g_assert_cmpint (pp_timeline_model_step_bubbles (v, vb), ==, 2);
  for (int r = 0; r < 2; r++)
    {
      g_assert_cmpfloat (spread[r].min, ==, a.bubble[r]);
      g_assert_cmpfloat (vb[r], ==, a.bubble[r]);
    }
  pp_timeline_model_free (v);
  pp_analysis_steps_clear (&a);
  pp_why_report_free (rep);
  pp_timeline_model_free (m);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
  g_array_free (rep_of, TRUE);
}

/* Set-up before step 0 (the interleaved runtime's first-step set-up, a
 * lazy all-gather long before the first block) is never a step's: a run of
 * one whole step, step 0, with an UNSHARD 5 s before its first block
 * reads the plan's step in Why and in the one analysis (an UNSHARD before
 * a later step's first block is that step's work: test-cli-trace's
 * dp-kinds case). */
static void
test_setup_before_step0 (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 2, 4, 1);
  PpCostModel *c = pp_cost_model_new_uniform (2, 1e-3, 2e-3, 0, 0);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  GArray *spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  g_assert_cmpint (pp_simulate (s, c, &sim, &err), ==, PP_OK);
  add_blocks (spans, s, sim, 1, NULL);
  PpSpan u = span (PP_SPAN_UNSHARD, 0, 0, 0, 0, 0.5);
  u.start_ns -= 5 * STEP_NS;
  u.end_ns = u.start_ns + 500000000;
  g_array_append_val (spans, u);
  PpWhyReport *rep = analyse (s, spans);
  g_assert_cmpint (rep->n_steps, ==, 1);
  g_assert_cmpfloat_with_epsilon (rep->length, sim->makespan, EPS);
  g_assert_cmpfloat_with_epsilon (median_step (spans, 2), sim->makespan, EPS);
  g_assert_cmpfloat_with_epsilon (rep->idle[0].measured, sim->rank[0].idle, EPS);
  pp_why_report_free (rep);
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
  g_array_free (spans, TRUE);
}

/* The median copy, one rule for Why and the timeline's model: by step
 * length, ties by replica, the lower of two middles. */
static void
test_median_copy (void)
{
  const double len[4] = { 3, 1, 2, 2 };
  const int32_t key[4] = { 0, 1, 3, 2 };
  g_assert_cmpint (pp_analysis_median_copy (len, key, 4), ==, 3);   /* 1, 2 (dp 2), 2 (dp 3), 3 */
  g_assert_cmpint (pp_analysis_median_copy (len, key, 3), ==, 2);   /* 1, 2, 3 */
  const double tie[2] = { 2, 2 };
  const int32_t tkey[2] = { 1, 0 };
  g_assert_cmpint (pp_analysis_median_copy (tie, tkey, 2), ==, 1);
  g_assert_cmpint (pp_analysis_median_copy (len, key, 0), ==, -1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/why-mesh/step-ends-after-grads-and-opt", test_step_ends_after_grads_and_opt);
  g_test_add_func ("/why-mesh/nested-dp-is-dp-comm", test_nested_dp_is_dp_comm);
  g_test_add_func ("/why-mesh/loss-is-last-stage-work", test_loss_is_last_stage_work);
  g_test_add_func ("/why-mesh/wait-for-slower-replica", test_wait_for_slower_replica);
  g_test_add_func ("/why-mesh/replica-wait-in-bubble", test_replica_wait_in_bubble);
  g_test_add_func ("/why-mesh/bubble-is-why-idle", test_bubble_is_why_idle);
  g_test_add_func ("/why-mesh/setup-before-step0", test_setup_before_step0);
  g_test_add_func ("/why-mesh/median-copy", test_median_copy);
  return g_test_run ();
}
