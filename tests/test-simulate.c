/* The simulator: closed forms, dependencies, activation memory, deadlocks. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-test-util.h"

/* (P-1)/(M+P-1) for GPipe and 1F1B under uniform costs, for any M (also M < P). */
static void
test_closed_form_gpipe_1f1b (void)
{
  const char *names[] = { "GPipe", "1F1B" };
  for (int n = 0; n < 2; n++)
    for (int P = 2; P <= 8; P++)
      for (int M = 1; M <= 4 * P; M++)
        {
          PpSchedule *s = pp_test_generate (names[n], P, M, 1);
          PpSimulation *sim = pp_test_simulate (s, 1, 2, 1, 0);
          double want = pp_bubble_closed_form_gpipe (P, M);
          if (fabs (sim->bubble - want) > 1e-12)
            g_error ("%s P=%d M=%d: bubble %.6f, closed form %.6f", names[n], P, M, sim->bubble, want);
          /* makespan = (M + P - 1)(F + B) */
          g_assert_cmpfloat_with_epsilon (sim->makespan, (M + P - 1) * 3.0, 1e-9);
          pp_simulation_free (sim);
          pp_schedule_free (s);
        }
}

/* (P-1)/(VM+P-1) for Interleaved1F1B, uniform costs per stage, M >= P
 * (every combination PyTorch's rules accept). */
static void
test_closed_form_interleaved (void)
{
  int checked = 0;
  for (int P = 2; P <= 8; P++)
    for (int V = 2; V <= 3; V++)
      for (int M = P; M <= 4 * P; M++)
        {
          PpSchedule *s = NULL;
          PpError err = { 0 };
          if (pp_schedule_generate ("Interleaved1F1B", P, M, V, &s, &err) != PP_OK)
            continue;
          PpSimulation *sim = pp_test_simulate (s, 1, 2, 1, 0);
          double want = pp_bubble_closed_form_interleaved (P, M, V);
          if (fabs (sim->bubble - want) > 1e-12)
            g_error ("Interleaved1F1B P=%d M=%d V=%d: bubble %.6f, closed form %.6f", P, M, V,
                     sim->bubble, want);
          checked++;
          pp_simulation_free (sim);
          pp_schedule_free (s);
        }
  g_assert_cmpint (checked, >, 100);
  /* below M = P the fill is not shortened V-fold: no closed form */
  g_assert_cmpfloat (pp_bubble_closed_form_interleaved (4, 3, 2), <, 0);
  /* by name, as run's table and the stats panel ask */
  g_assert_cmpfloat (pp_bubble_closed_form ("interleaved1f1b", 4, 8, 2), ==,
                     pp_bubble_closed_form_interleaved (4, 8, 2));
  g_assert_cmpfloat_with_epsilon (pp_bubble_closed_form ("GPipe", 4, 6, 1), 1.0 / 3.0, 1e-12);
  g_assert_cmpfloat_with_epsilon (pp_bubble_closed_form ("1f1b", 4, 24, 0), 3.0 / 27.0, 1e-12);
  g_assert_cmpfloat (pp_bubble_closed_form ("1F1B", 4, 8, 2), <, 0);
  g_assert_cmpfloat (pp_bubble_closed_form ("ZBV", 4, 8, 2), <, 0);
  g_assert_cmpfloat (pp_bubble_closed_form ("no such", 4, 8, 1), <, 0);
}

static void
test_seed_numbers (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpSimulation *sim = pp_test_simulate (s, 1, 2, 1, 0);
  g_assert_cmpfloat_with_epsilon (sim->bubble, 1.0 / 3.0, 1e-12);
  for (int r = 0; r < 4; r++)
    g_assert_cmpfloat_with_epsilon (sim->rank[r].bubble, 1.0 / 3.0, 1e-12);
  pp_simulation_free (sim);
  pp_schedule_free (s);

  s = pp_test_generate ("GPipe", 4, 24, 1);
  sim = pp_test_simulate (s, 1, 2, 1, 0);
  g_assert_cmpfloat_with_epsilon (sim->bubble, 3.0 / 27.0, 1e-12);
  g_assert_cmpint ((int) lround (1000 * sim->bubble), ==, 111);
  pp_simulation_free (sim);
  pp_schedule_free (s);
}

/* 1F1B holds at most P micro-batches in flight on any rank (P - r on rank r);
 * GPipe holds all M. */
static void
test_inflight (void)
{
  for (int P = 2; P <= 8; P++)
    for (int M = 1; M <= 4 * P; M++)
      {
        PpSchedule *g = pp_test_generate ("GPipe", P, M, 1), *o = pp_test_generate ("1F1B", P, M, 1);
        PpSimulation *gs = pp_test_simulate (g, 1, 2, 1, 0), *os = pp_test_simulate (o, 1, 2, 1, 0);
        for (int r = 0; r < P; r++)
          {
            g_assert_cmpint (gs->rank[r].peak_inflight, ==, M);
            g_assert_cmpint (os->rank[r].peak_inflight, <=, P);
            g_assert_cmpint (os->rank[r].peak_inflight, ==, MIN (M, P - r));
          }
        pp_simulation_free (gs);
        pp_simulation_free (os);
        pp_schedule_free (g);
        pp_schedule_free (o);
      }
}

/* Whatever the schedule and costs, the timeline honours every dependency and
 * never runs two actions on one rank at once. */
static void
check_dependencies (const PpSchedule *s, const PpSimulation *sim, const PpCostModel *cm)
{
  const int M = s->microbatches;
  gsize cells = (gsize) s->n_stages * M;
  double *fs = g_new (double, cells), *fe = g_new (double, cells);
  double *gs = g_new (double, cells), *ge = g_new (double, cells), *ie = g_new (double, cells);
  double *ws = g_new (double, cells);
  for (gsize i = 0; i < cells; i++)
    fs[i] = fe[i] = gs[i] = ge[i] = ie[i] = ws[i] = NAN;

  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        const PpSimAction *t = &sim->timeline[r][k];
        g_assert_cmpfloat (t->end, >=, t->start);
        if (k > 0)
          g_assert_cmpfloat (t->start, >=, sim->timeline[r][k - 1].end - 1e-9);
        int parts[2][3] = { { a->kind, a->stage, a->microbatch }, { -1, -1, -1 } };
        if (a->kind == PP_ACT_OVERLAP_F_B)
          {
            parts[0][0] = PP_ACT_F;
            parts[1][0] = a->sub_kind;
            parts[1][1] = a->sub_stage;
            parts[1][2] = a->sub_microbatch;
          }
        for (int p = 0; p < 2; p++)
          {
            if (parts[p][0] < 0)
              continue;
            gsize c = (gsize) parts[p][1] * M + parts[p][2];
            switch (parts[p][0])
              {
              case PP_ACT_F: fs[c] = t->start; fe[c] = t->end; break;
              case PP_ACT_B: gs[c] = t->start; ge[c] = t->end; break;
              case PP_ACT_I: gs[c] = t->start; ge[c] = t->end; ie[c] = t->end; break;
              case PP_ACT_W: ws[c] = t->start; break;
              default: break;
              }
          }
      }
  for (int st = 0; st < s->n_stages; st++)
    for (int m = s->stage_mb_lo[st]; m < s->stage_mb_hi[st]; m++)
      {
        gsize c = (gsize) st * M + m;
        int prev = s->stage_prev[st], next = s->stage_next[st];
        if (prev >= 0)
          {
            double x = s->stage_rank[prev] == s->stage_rank[st] ? 0 : cm->comm[prev];
            g_assert_cmpfloat (fs[c], >=, fe[(gsize) prev * M + m] + x - 1e-9);
          }
        g_assert_cmpfloat (gs[c], >=, fe[c] - 1e-9);
        if (next >= 0)
          {
            double x = s->stage_rank[next] == s->stage_rank[st] ? 0 : cm->comm[st];
            g_assert_cmpfloat (gs[c], >=, ge[(gsize) next * M + m] + x - 1e-9);
          }
        if (!isnan (ws[c]))
          g_assert_cmpfloat (ws[c], >=, ie[c] - 1e-9);
      }
  g_free (fs); g_free (fe); g_free (gs); g_free (ge); g_free (ie); g_free (ws);
}

static void
test_dependencies (void)
{
  const double costs[][4] = { { 1, 2, 1, 0 }, { 1.3, 2.9, 0.7, 0.25 }, { 2, 2.5, 1.5, 1 } };
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    for (gsize c = 0; c < G_N_ELEMENTS (costs); c++)
      {
        PpSchedule *s = NULL;
        PpError err = { 0 };
        if (pp_schedule_generate (i->name, 4, 8, i->default_v, &s, &err) != PP_OK)
          g_error ("%s P=4 M=8: %s", i->name, err.msg);
        PpCostModel *cm = pp_cost_model_new_uniform (s->n_stages, costs[c][0], costs[c][1],
                                                     costs[c][2], costs[c][3]);
        PpSimulation *sim = NULL;
        g_assert_cmpint (pp_simulate (s, cm, &sim, &err), ==, PP_OK);
        check_dependencies (s, sim, cm);
        pp_simulation_free (sim);
        pp_cost_model_free (cm);
        pp_schedule_free (s);
      }
}

/* A transfer cost delays the pipeline: GPipe's makespan grows by 2(P-1)C. */
static void
test_transfer_cost (void)
{
  PpSchedule *s = pp_test_generate ("GPipe", 4, 6, 1);
  PpSimulation *a = pp_test_simulate (s, 1, 2, 1, 0), *b = pp_test_simulate (s, 1, 2, 1, 0.5);
  g_assert_cmpfloat_with_epsilon (b->makespan - a->makespan, 2 * 3 * 0.5, 1e-9);
  g_assert_cmpfloat (b->bubble, >, a->bubble);
  pp_simulation_free (a);
  pp_simulation_free (b);
  pp_schedule_free (s);
}

/* rank 0: 0F0 0B0 0F1 0B1; rank 1: 1F1 1F0 1B0 1B1 — rank 1 waits for 0F1,
 * which comes after 0B0, which waits for 1B0: a cycle. */
static void
test_deadlock_reported (void)
{
  PpSchedule *s = pp_schedule_new ("custom", 2, 2, 1, PP_PLACE_LOOP);
  PpError err = { 0 };
  PpSimulation *sim = NULL;
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 0));
  pp_schedule_push (s, 0, pp_action (PP_ACT_B, 0, 0));
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 1));
  pp_schedule_push (s, 0, pp_action (PP_ACT_B, 0, 1));
  pp_schedule_push (s, 1, pp_action (PP_ACT_F, 1, 1));
  pp_schedule_push (s, 1, pp_action (PP_ACT_F, 1, 0));
  pp_schedule_push (s, 1, pp_action (PP_ACT_B, 1, 0));
  pp_schedule_push (s, 1, pp_action (PP_ACT_B, 1, 1));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EDEADLOCK);
  g_assert_nonnull (strstr (err.msg, "rank 0 stalls at step 1 on 0B0"));
  g_assert_nonnull (strstr (err.msg, "rank 1"));
  g_assert_null (strchr (err.msg, '\n'));

  PpCostModel *cm = pp_cost_model_new_uniform (2, 1, 2, 1, 0);
  g_assert_cmpint (pp_simulate (s, cm, &sim, &err), ==, PP_EDEADLOCK);
  g_assert_null (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
}

static void
test_validate_errors (void)
{
  PpError err = { 0 };
  /* missing backward */
  PpSchedule *s = pp_schedule_new ("custom", 2, 1, 1, PP_PLACE_LOOP);
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 0));
  pp_schedule_push (s, 1, pp_action (PP_ACT_F, 1, 0));
  pp_schedule_push (s, 1, pp_action (PP_ACT_B, 1, 0));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "stage 0"));
  /* a W without its I */
  pp_schedule_push (s, 0, pp_action (PP_ACT_W, 0, 0));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "I"));
  pp_schedule_free (s);

  /* a stage on the wrong rank */
  s = pp_schedule_new ("custom", 2, 1, 1, PP_PLACE_LOOP);
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 1, 0));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "belongs to rank 1"));
  pp_schedule_free (s);

  /* twice the same forward; micro-batch out of range */
  s = pp_schedule_new ("custom", 2, 1, 1, PP_PLACE_LOOP);
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 0));
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 0));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "second time"));
  pp_schedule_free (s);
  s = pp_schedule_new ("custom", 2, 1, 1, PP_PLACE_LOOP);
  pp_schedule_push (s, 0, pp_action (PP_ACT_F, 0, 5));
  g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_EFORMAT);
  pp_schedule_free (s);
}

static void
test_cost_parse (void)
{
  double c[4];
  PpError err = { 0 };
  g_assert_cmpint (pp_cost_parse ("1,2,1,0.5", c, &err), ==, PP_OK);
  g_assert_cmpfloat (c[3], ==, 0.5);
  g_assert_cmpint (pp_cost_parse ("1,2,1", c, &err), ==, PP_OK);
  g_assert_cmpfloat (c[3], ==, 0);
  const char *bad[] = { "", "1,2", "1,2,1,0,3", "a,b,c", "1,2,2", "0,2,1", "1,2,-1", "1,2,1,-1",
                        "1;2;1", "1,2,1,", "nan,2,1", "1,inf,0" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      if (pp_cost_parse (bad[i], c, &err) == PP_OK)
        g_error ("cost '%s' accepted", bad[i]);
      g_assert_cmpstr (err.msg, !=, "");
    }
}

/* The Zero Bubble paper's table with T_F = T_I = T_W: 1F1B idles (P-1)(F+I+W)
 * per rank, ZB-H1 a third of that, and ZB-H2 and ZBV none once M >= 2P-1 —
 * with steps back to back, since within one step the pipeline still fills
 * (the paper's post-validation removes the barrier between steps). */
static void
test_zero_bubble_table (void)
{
  for (int P = 2; P <= 8; P++)
    for (int M = 2 * P - 1; M <= 4 * P; M++)
      {
        PpSchedule *o = pp_test_generate ("1F1B", P, M, 1), *h1 = pp_test_generate ("ZB-H1", P, M, 1);
        PpSchedule *h2 = pp_test_generate ("ZB-H2", P, M, 1), *v = pp_test_generate ("ZBV", P, M, 2);
        PpSimulation *so = pp_test_simulate (o, 1, 2, 1, 0), *s1 = pp_test_simulate (h1, 1, 2, 1, 0);
        PpSimulation *s2 = pp_test_simulate (h2, 1, 2, 1, 0), *sv = pp_test_simulate (v, 1, 2, 1, 0);
        for (int r = 0; r < P; r++)
          {
            g_assert_cmpfloat_with_epsilon (so->rank[r].idle, 3.0 * (P - 1), 1e-9);
            g_assert_cmpfloat_with_epsilon (s1->rank[r].idle, 1.0 * (P - 1), 1e-9);
          }
        /* barrier-free: 1F1B and ZB-H1 keep their bubble, H2 and ZBV lose it */
        g_assert_cmpfloat_with_epsilon (so->steady_bubble, so->bubble, 1e-12);
        g_assert_cmpfloat (s1->steady_bubble, >, 0);
        if (s2->steady_bubble > 1e-12 || sv->steady_bubble > 1e-12)
          g_error ("P=%d M=%d: steady bubble ZB-H2 %.4f ZBV %.4f, want 0", P, M,
                   s2->steady_bubble, sv->steady_bubble);
        /* and H2/ZBV never do worse than H1 within a step */
        g_assert_cmpfloat (s2->bubble, <=, s1->bubble + 1e-12);
        pp_simulation_free (so); pp_simulation_free (s1);
        pp_simulation_free (s2); pp_simulation_free (sv);
        pp_schedule_free (o); pp_schedule_free (h1); pp_schedule_free (h2); pp_schedule_free (v);
      }
}

/* Ranks sharing cores (the CPU backend's threads on a small machine).
 * With a core per rank it is pp_simulate; with one core and free
 * transfers the pipeline never stalls, so the step is all the work done
 * one block after another; fewer cores never make it shorter. */
static void
test_shared_cores (void)
{
  const double costs[][4] = { { 1, 2, 1, 0 }, { 1.3, 2.9, 0.7, 0.25 } };
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    for (gsize c = 0; c < G_N_ELEMENTS (costs); c++)
      {
        PpSchedule *s = NULL;
        PpError err = { 0 };
        if (pp_schedule_generate (i->name, 4, 8, i->default_v, &s, &err) != PP_OK)
          g_error ("%s P=4 M=8: %s", i->name, err.msg);
        PpCostModel *cm = pp_cost_model_new_uniform (s->n_stages, costs[c][0], costs[c][1],
                                                     costs[c][2], costs[c][3]);
        PpSimulation *sim = NULL;
        g_assert_cmpint (pp_simulate (s, cm, &sim, &err), ==, PP_OK);
        double all = 0, one = 0, two = 0, four = 0;
        for (int r = 0; r < s->ranks; r++)
          all += sim->rank[r].busy;
        g_assert_cmpint (pp_simulate_shared (s, cm, 4, &four, &err), ==, PP_OK);
        g_assert_cmpint (pp_simulate_shared (s, cm, 64, &four, &err), ==, PP_OK);
        g_assert_cmpfloat_with_epsilon (four, sim->makespan, 1e-9 * sim->makespan);
        g_assert_cmpint (pp_simulate_shared (s, cm, 4, &four, &err), ==, PP_OK);
        g_assert_cmpfloat_with_epsilon (four, sim->makespan, 1e-9 * sim->makespan);
        g_assert_cmpint (pp_simulate_shared (s, cm, 2, &two, &err), ==, PP_OK);
        g_assert_cmpint (pp_simulate_shared (s, cm, 1, &one, &err), ==, PP_OK);
        g_assert_cmpfloat (two, >=, four - 1e-9);
        g_assert_cmpfloat (one, >=, two - 1e-9);
        /* half the cores: at most twice the step, at least the work over 2 */
        g_assert_cmpfloat (two, <=, 2 * four + 1e-9);
        g_assert_cmpfloat (two, >=, all / 2 - 1e-9);
        if (costs[c][3] == 0)
          g_assert_cmpfloat_with_epsilon (one, all, 1e-9 * all);
        else
          g_assert_cmpfloat (one, >=, all - 1e-9);
        pp_simulation_free (sim);
        pp_cost_model_free (cm);
        pp_schedule_free (s);
      }
  /* by hand: GPipe P=2 M=2, F 1, B 2.  A core each: 0F0 [0,1], 0F1 and 1F0
   * [1,2], 1F1 [2,3], 1B0 [3,5], 1B1 and 0B0 [5,7], 0B1 [7,9]: 9.  One
   * core: the 12 units of work in a row.  1F1B P=2 M=2 on one core: also 12. */
  PpSchedule *g = pp_test_generate ("GPipe", 2, 2, 1);
  PpCostModel *cm = pp_cost_model_new_uniform (2, 1, 2, 0, 0);
  PpError err = { 0 };
  double t = 0;
  g_assert_cmpint (pp_simulate_shared (g, cm, 2, &t, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (t, 9, 1e-12);
  g_assert_cmpint (pp_simulate_shared (g, cm, 1, &t, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (t, 12, 1e-12);
  g_assert_cmpint (pp_simulate_shared (g, cm, 0, &t, &err), ==, PP_EINVAL);
  pp_schedule_free (g);
  /* 1F1B P=4 M=8, F 1, B 2, on 2 cores: 51 against 33 on 4 (fill and
   * drain near full speed, the steady state at half), as a separate
   * 40-line processor-sharing model of the 1F1B order also gives */
  PpSchedule *o = pp_test_generate ("1F1B", 4, 8, 1);
  PpCostModel *c4 = pp_cost_model_new_uniform (4, 1, 2, 0, 0);
  g_assert_cmpint (pp_simulate_shared (o, c4, 4, &t, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (t, 33, 1e-9);
  g_assert_cmpint (pp_simulate_shared (o, c4, 2, &t, &err), ==, PP_OK);
  g_assert_cmpfloat_with_epsilon (t, 51, 1e-9);
  pp_cost_model_free (c4);
  pp_schedule_free (o);
  pp_cost_model_free (cm);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/simulate/closed-form-gpipe-1f1b", test_closed_form_gpipe_1f1b);
  g_test_add_func ("/simulate/closed-form-interleaved", test_closed_form_interleaved);
  g_test_add_func ("/simulate/seed-numbers", test_seed_numbers);
  g_test_add_func ("/simulate/inflight", test_inflight);
  g_test_add_func ("/simulate/dependencies", test_dependencies);
  g_test_add_func ("/simulate/transfer-cost", test_transfer_cost);
  g_test_add_func ("/simulate/deadlock", test_deadlock_reported);
  g_test_add_func ("/simulate/validate-errors", test_validate_errors);
  g_test_add_func ("/simulate/cost-parse", test_cost_parse);
  g_test_add_func ("/simulate/zero-bubble-table", test_zero_bubble_table);
  g_test_add_func ("/simulate/shared-cores", test_shared_cores);
  return g_test_run ();
}
