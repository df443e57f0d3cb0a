/* test-runtime.c — the executor trains the same model under every schedule.
 *
 * The correctness pin: a pipeline step is the same update as training the
 * whole model as one part on the whole batch with the same micro-batch
 * split.  For every schedule pp_schedule_list() knows (and a hand-written CSV
 * schedule, and GPipe with --recompute), three steps through pp_run_step
 * must leave every parameter within 1e-5 relative of a reference run — a
 * 1-rank, 1-stage schedule F0..F(M-1), B0..B(M-1) through the same executor —
 * and give the same three losses.
 */
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "pp-run.h"
#include "pp-test-util.h"

#define N_STEPS 3
#define REL_TOL 1e-5
/* The relative tolerance is taken against max(|b|, FLOOR).  Parameters that
 * start at zero (biases, LayerNorm shifts) move by about lr = 1e-3 per AdamW
 * step and can sit at ~1e-6 after three steps, where one float ulp of the
 * update is a large *relative* error.  The floor turns the bound into 1e-8
 * absolute for parameters below 1e-3: still 100x below one ulp of a typical
 * O(0.1) weight's change per step (lr = 1e-3), so a wrong gradient or a
 * missed micro-batch cannot hide under it. */
#define ABS_FLOOR 1e-3

typedef struct {
  int      layers;
  int      width;
  int      batch;
  int      recompute;
  uint64_t seed;     /* model seed; 0 means 11 */
  int      float_grads; /* accumulate in float (the default of a run) instead of exact */
} Setup;

typedef struct {
  float  *params;
  size_t  n;
  double  loss[N_STEPS];
} Trained;

static void
config_for (PpRunConfig *cfg, const PpSchedule *s, const Setup *su)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->schedule = s;
  cfg->model.layers = su->layers;
  cfg->model.width = su->width;
  cfg->model.hidden_mult = 2;
  cfg->model.classes = 8;
  cfg->model.seed = su->seed ? su->seed : 11;
  cfg->batch = su->batch;
  cfg->lr = 1e-3f;
  cfg->weight_decay = 0.01f;
  cfg->data_seed = 5;
  cfg->recompute = su->recompute;
  cfg->exact_grads = !su->float_grads;
}

static void
train (const PpSchedule *s, const Setup *su, Trained *out)
{
  PpRunConfig cfg;
  PpError err = { 0 };
  PpRun *run;

  config_for (&cfg, s, su);
  run = pp_run_new (&cfg, &err);
  if (run == NULL)
    g_error ("%s: pp_run_new: %s", s->name, err.msg);
  for (int i = 0; i < N_STEPS; i++)
    {
      PpStepStats st;
      if (pp_run_step (run, &st, &err) != PP_OK)
        g_error ("%s: step %d: %s", s->name, i, err.msg);
      g_assert_cmpint (st.step, ==, i);
      g_assert_true (isfinite (st.loss));
      out->loss[i] = st.loss;
    }
  out->n = pp_run_n_params (run);
  out->params = g_new (float, out->n);
  g_assert_cmpint (pp_run_copy_params (run, out->params, NULL), ==, PP_OK);
  pp_run_free (run);
}

/* The reference, as the issue states it: the same network trained without a
 * pipeline — one rank, the whole model as one part, the whole batch with the
 * same micro-batch split: F0..F(M-1), then B0..B(M-1).  Both sides sum their
 * micro-batch gradients in double (exact_grads, pp-model.h), so the order in
 * which a schedule adds them (LoopedBFS runs its backwards M-1..0 as
 * PyTorch's does; DualPipe adds two copies' sums) cannot change the update:
 * with float sums AdamW's division by sqrt(v) + 1e-8 turned those last bits
 * into ~1e-4 relative differences after 3 steps for some model seeds, which
 * would say nothing about the schedule.  Runs accumulate in float by default
 * (cheaper); test_float_in_order checks that mode too. */
static PpSchedule *
reference_schedule (const PpSchedule *s)
{
  int M = s->microbatches;
  PpSchedule *ref = pp_schedule_new ("reference", 1, M, 1, PP_PLACE_LOOP);

  g_assert_nonnull (ref);
  for (int m = 0; m < M; m++)
    g_assert_cmpint (pp_schedule_push (ref, 0, pp_action (PP_ACT_F, 0, m)), ==, PP_OK);
  for (int m = 0; m < M; m++)
    g_assert_cmpint (pp_schedule_push (ref, 0, pp_action (PP_ACT_B, 0, m)), ==, PP_OK);
  return ref;
}

static double
max_rel_diff (const Trained *a, const Trained *b, size_t *worst_i, double *worst_loss)
{
  double worst = 0;

  g_assert_cmpuint (a->n, ==, b->n);
  *worst_i = 0;
  for (size_t i = 0; i < a->n; i++)
    {
      double d = fabs ((double) a->params[i] - (double) b->params[i]);
      double rel = d / fmax (fabs ((double) b->params[i]), ABS_FLOOR);
      if (!(rel <= worst))   /* also catches NaN */
        {
          worst = rel;
          *worst_i = i;
        }
    }
  *worst_loss = 0;
  for (int k = 0; k < N_STEPS; k++)
    {
      double rel = fabs (a->loss[k] - b->loss[k]) / fabs (b->loss[k]);
      if (!(rel <= *worst_loss))
        *worst_loss = rel;
    }
  return worst;
}

/* Trains s and the reference; asserts the pin; returns the max relative
 * parameter difference. */
static double
check_against_reference (const PpSchedule *s, const Setup *su)
{
  PpSchedule *ref = reference_schedule (s);
  Setup ref_setup = *su;
  Trained a = { 0 }, b = { 0 };
  double worst, worst_loss;
  size_t worst_i;

  ref_setup.recompute = 0;
  train (s, su, &a);
  train (ref, &ref_setup, &b);
  worst = max_rel_diff (&a, &b, &worst_i, &worst_loss);
  g_test_message ("%-16s P=%d M=%d V=%d stages=%d seed=%d%s: max rel diff params %.3g, "
                  "losses %.3g; losses %.6f %.6f %.6f",
                  s->name, s->ranks, s->microbatches, s->stages_per_rank, s->n_stages,
                  (int) (su->seed ? su->seed : 11), su->recompute ? " recompute" : "",
                  worst, worst_loss, a.loss[0], a.loss[1], a.loss[2]);
  if (!(worst <= REL_TOL))
    g_error ("%s P=%d M=%d: parameter %zu is %.9g, the reference has %.9g (rel %.3g)",
             s->name, s->ranks, s->microbatches, worst_i, (double) a.params[worst_i],
             (double) b.params[worst_i], worst);
  if (!(worst_loss <= REL_TOL))
    g_error ("%s P=%d M=%d: losses differ from the reference by %.3g relative",
             s->name, s->ranks, s->microbatches, worst_loss);
  /* training moved the parameters (the comparison is not of two initial states) */
  {
    PpRunConfig cfg;
    PpError err = { 0 };
    PpRun *run;
    float *init;
    double moved = 0;
    config_for (&cfg, ref, &ref_setup);
    run = pp_run_new (&cfg, &err);
    g_assert_nonnull (run);
    init = g_new (float, pp_run_n_params (run));
    g_assert_cmpint (pp_run_copy_params (run, init, NULL), ==, PP_OK);
    for (size_t i = 0; i < a.n; i++)
      moved = fmax (moved, fabs ((double) a.params[i] - (double) init[i]));
    g_assert_cmpfloat (moved, >, 1e-3);
    g_free (init);
    pp_run_free (run);
  }
  g_free (a.params);
  g_free (b.params);
  pp_schedule_free (ref);
  return worst;
}

/* The schedules that add micro-batch gradients out of order, over several
 * model seeds: with float sums some seeds broke 1e-5 (up to 1.25e-4). */
/* The default float accumulation: schedules that add micro-batch gradients
 * in order 0..M-1 on every stage take bit for bit the reference's step. */
static void
test_float_in_order (void)
{
  static const char *const names[] = { "GPipe", "1F1B", "Interleaved1F1B", "ZB-H1", "ZBV" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      const PpScheduleInfo *info = pp_schedule_lookup (names[i]);
      PpSchedule *s = pp_test_generate (info->name, 2, 8, info->default_v);
      Setup su = { .layers = 8, .width = 16, .batch = 16, .recompute = 0, .float_grads = 1 };
      g_assert_cmpfloat (check_against_reference (s, &su), ==, 0.0);
      pp_schedule_free (s);
    }
}

static void
test_out_of_order_seeds (void)
{
  static const char *const names[] = { "LoopedBFS", "DualPipe", "ZBV", "DualPipeV" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    for (uint64_t seed = 1; seed <= 8; seed++)
      {
        const PpScheduleInfo *info = pp_schedule_lookup (names[i]);
        PpSchedule *s = pp_test_generate (info->name, 2, 4, info->default_v);
        Setup su = { .layers = 8, .width = 16, .batch = 8, .recompute = 0, .seed = seed };
        check_against_reference (s, &su);
        pp_schedule_free (s);
      }
}

static void
test_every_schedule (void)
{
  static const int PM[][2] = { { 2, 4 }, { 2, 8 }, { 4, 8 } };
  Setup su = { .layers = 8, .width = 16, .batch = 0, .recompute = 0 };
  int n_checked = 0;

  for (const PpScheduleInfo *info = pp_schedule_list (); info->name != NULL; info++)
    for (size_t c = 0; c < G_N_ELEMENTS (PM); c++)
      {
        int P = PM[c][0], M = PM[c][1];
        PpSchedule *s = pp_test_generate (info->name, P, M, info->default_v);
        su.batch = (c == 1 ? 4 : 2) * M;
        check_against_reference (s, &su);
        pp_schedule_free (s);
        n_checked++;
      }
  g_assert_cmpint (n_checked, >=, 30);
}

/* A custom order from a CSV, with a split backward on rank 1. */
static void
test_csv_schedule (void)
{
  static const char csv[] =
    "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n"
    "1F0,1I0,1F1,1I1,1W0,1F2,1I2,1W1,1F3,1I3,1W2,1W3\n";
  Setup su = { .layers = 4, .width = 16, .batch = 16, .recompute = 0 };
  PpSchedule *s = NULL;
  PpError err = { 0 };
  FILE *f = fmemopen ((void *) csv, strlen (csv), "r");

  g_assert_nonnull (f);
  if (pp_schedule_read_csv (f, "custom", &s, &err) != PP_OK)
    g_error ("read_csv: %s", err.msg);
  fclose (f);
  g_assert_cmpint (s->ranks, ==, 2);
  g_assert_cmpint (s->microbatches, ==, 4);
  check_against_reference (s, &su);
  pp_schedule_free (s);
}

static void
test_recompute (void)
{
  Setup su = { .layers = 8, .width = 16, .batch = 16, .recompute = 1 };
  PpSchedule *s = pp_test_generate ("GPipe", 2, 8, 1);
  check_against_reference (s, &su);
  pp_schedule_free (s);
  s = pp_test_generate ("1F1B", 4, 8, 1);
  check_against_reference (s, &su);
  pp_schedule_free (s);
}

/* ---- the probe sees every action once ----------------------------------- */

typedef struct {
  GMutex  lock;
  int     n_steps;
  int     compute[N_STEPS][PP_N_SPAN_KINDS];
  int     other[PP_N_SPAN_KINDS];
  int     n_wait, bad_wait, bad_span;
  int     n_loss, n_act, n_inflight;
  int     P;
} Sink;

static void
sink_spans (void *user, const PpSpan *sp, size_t n)
{
  Sink *k = user;
  g_mutex_lock (&k->lock);
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *s = &sp[i];
      if (s->end_ns < s->start_ns || s->rank < 0 || s->rank >= k->P || s->device != 0xffff)
        k->bad_span++;
      switch (s->kind)
        {
        case PP_SPAN_F: case PP_SPAN_B: case PP_SPAN_I: case PP_SPAN_W: case PP_SPAN_OVERLAP_F_B:
          if (s->step >= 0 && s->step < N_STEPS && s->peer_rank == -1)
            k->compute[s->step][s->kind]++;
          else
            k->bad_span++;
          break;
        case PP_SPAN_WAIT:
          k->n_wait++;
          if (s->peer_rank < 0 || s->peer_rank >= k->P || s->peer_rank == s->rank)
            k->bad_wait++;
          break;
        default:
          k->other[s->kind]++;
        }
    }
  g_mutex_unlock (&k->lock);
}

static void
sink_counters (void *user, const PpCounter *c, size_t n)
{
  Sink *k = user;
  g_mutex_lock (&k->lock);
  for (size_t i = 0; i < n; i++)
    switch (c[i].kind)
      {
      case PP_COUNTER_LOSS: k->n_loss++; break;
      case PP_COUNTER_ACTIVATION_BYTES: k->n_act++; break;
      case PP_COUNTER_INFLIGHT: k->n_inflight++; break;
      }
  g_mutex_unlock (&k->lock);
}

static void
probe_check (const char *name, int P, int M)
{
  Sink k;
  PpProbeConfig pc = { 0 };
  PpError err = { 0 };
  PpSchedule *s = pp_test_generate (name, P, M, pp_schedule_lookup (name)->default_v);
  Setup su = { .layers = 8, .width = 32, .batch = 4 * M, .recompute = 0 };
  PpRunConfig cfg;
  PpProbe *probe;
  PpRun *run;
  int expect[PP_N_SPAN_KINDS] = { 0 };
  long n_actions = 0;

  memset (&k, 0, sizeof k);
  g_mutex_init (&k.lock);
  k.P = P;
  pc.sink.user = &k;
  pc.sink.spans = sink_spans;
  pc.sink.counters = sink_counters;
  probe = pp_probe_new (&pc, &err);
  g_assert_nonnull (probe);

  for (int r = 0; r < s->ranks; r++)
    for (int i = 0; i < s->rank[r].n_actions; i++)
      {
        const PpAction *a = &s->rank[r].actions[i];
        switch (a->kind)
          {
          case PP_ACT_F: expect[PP_SPAN_F]++; break;
          case PP_ACT_B: expect[PP_SPAN_B]++; break;
          case PP_ACT_I: expect[PP_SPAN_I]++; break;
          case PP_ACT_W: expect[PP_SPAN_W]++; break;
          case PP_ACT_OVERLAP_F_B: expect[PP_SPAN_OVERLAP_F_B]++; break;
          default: continue;
          }
        n_actions++;
      }

  config_for (&cfg, s, &su);
  cfg.probe = probe;
  cfg.pin_threads = 1;
  run = pp_run_new (&cfg, &err);
  if (run == NULL)
    g_error ("pp_run_new: %s", err.msg);
  for (int i = 0; i < N_STEPS; i++)
    if (pp_run_step (run, NULL, &err) != PP_OK)
      g_error ("step %d: %s", i, err.msg);

  /* reports */
  {
    PpCostModel *cm = pp_run_measured_costs (run);
    int np;
    const int *bpp = pp_run_blocks_per_part (run, &np);
    int sum = 0;
    g_assert_nonnull (cm);
    g_assert_cmpint (cm->n_stages, ==, s->n_stages);
    for (int i = 0; i < s->n_stages; i++)
      {
        g_assert_cmpfloat (cm->f[i], >, 0);
        g_assert_cmpfloat (cm->b[i], >, 0);
        g_assert_cmpfloat (cm->w[i], >=, 0);
        g_assert_cmpfloat (cm->w[i], <, cm->b[i]);
        g_assert_cmpfloat (cm->comm[i], ==, 0);
      }
    pp_cost_model_free (cm);
    for (int p = 0; p < np; p++)
      sum += bpp[p];
    g_assert_cmpint (sum, ==, su.layers);
    for (int r = 0; r < P; r++)
      {
        int64_t busy, wait, span;
        pp_run_rank_times (run, r, &busy, &wait, &span);
        g_assert_cmpint (busy, >, 0);
        g_assert_cmpint (wait, >=, 0);
        g_assert_cmpint (span, >=, busy);
      }
  }
  pp_run_free (run);
  g_assert_cmpint (pp_probe_flush (probe, &err), ==, PP_OK);
  g_assert_cmpuint (pp_probe_dropped (probe), ==, 0);
  pp_probe_free (probe);

  g_assert_cmpint (k.bad_span, ==, 0);
  for (int st = 0; st < N_STEPS; st++)
    for (int kind = 0; kind < PP_N_SPAN_KINDS; kind++)
      g_assert_cmpint (k.compute[st][kind], ==, expect[kind]);
  g_assert_cmpint (k.n_wait, >, 0);
  g_assert_cmpint (k.bad_wait, ==, 0);
  g_assert_cmpint (k.n_loss, ==, N_STEPS);
  g_assert_cmpint (k.n_act, ==, N_STEPS * n_actions);
  g_assert_cmpint (k.n_inflight, ==, N_STEPS * n_actions);
  g_assert_cmpint (k.other[PP_SPAN_OPT], ==, N_STEPS * P);
  g_test_message ("%s P=%d M=%d: %ld actions/step, %d WAIT spans", name, P, M, n_actions, k.n_wait);
  g_mutex_clear (&k.lock);
  pp_schedule_free (s);
}

static void
test_probe_spans (void)
{
  probe_check ("1F1B", 4, 8);
  probe_check ("DualPipe", 4, 8);
  probe_check ("ZBV", 2, 4);
}

/* ---- stop and errors ----------------------------------------------------- */

static volatile sig_atomic_t stop_flag;

static gpointer
stopper (gpointer data)
{
  g_usleep (GPOINTER_TO_INT (data));
  __atomic_store_n (&stop_flag, 1, __ATOMIC_RELAXED);
  return NULL;
}

static void
test_stop (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  Setup su = { .layers = 8, .width = 256, .batch = 512, .recompute = 0 };
  PpRunConfig cfg;
  PpError err = { 0 };
  PpRun *run;
  GThread *t;
  PpStatus rc = PP_OK;
  int steps = 0;

  config_for (&cfg, s, &su);
  __atomic_store_n (&stop_flag, 0, __ATOMIC_RELAXED);
  cfg.stop = &stop_flag;
  run = pp_run_new (&cfg, &err);
  g_assert_nonnull (run);
  {
    /* a step's time, then a stop a quarter into a step, retried until one
     * lands inside a step (a loaded machine may wake the stopper after the
     * step every time for a while; a minute is a hang guard) */
    PpStepStats st;
    int64_t quarter_us;
    gint64 t0 = g_get_monotonic_time ();
    g_assert_cmpint (pp_run_step (run, &st, &err), ==, PP_OK);
    quarter_us = (int64_t) (st.seconds * 1e6 / 4);
    g_test_message ("a step takes %.3f ms", st.seconds * 1e3);
    while (g_get_monotonic_time () - t0 < 60 * G_USEC_PER_SEC)
      {
        __atomic_store_n (&stop_flag, 0, __ATOMIC_RELAXED);
        t = g_thread_new ("stopper", stopper, GINT_TO_POINTER ((int) MAX (quarter_us, 200)));
        rc = pp_run_step (run, NULL, &err);
        g_thread_join (t);
        steps++;
        if (rc != PP_OK)
          break;
      }
  }
  g_assert_cmpint (rc, ==, PP_EINVAL);
  g_assert_cmpstr (err.msg, ==, "stopped");
  g_test_message ("stopped during step %d", steps);
  /* still stopped */
  memset (&err, 0, sizeof err);
  g_assert_cmpint (pp_run_step (run, NULL, &err), ==, PP_EINVAL);
  g_assert_cmpstr (err.msg, ==, "stopped");
  /* cleared: the abandoned step left nothing behind */
  __atomic_store_n (&stop_flag, 0, __ATOMIC_RELAXED);
  g_assert_cmpint (pp_run_step (run, NULL, &err), ==, PP_OK);
  g_assert_cmpint (pp_run_step (run, NULL, &err), ==, PP_OK);
  pp_run_free (run);

  /* stopped in the middle of a step, again: then freed at once */
  __atomic_store_n (&stop_flag, 0, __ATOMIC_RELAXED);
  run = pp_run_new (&cfg, &err);
  g_assert_nonnull (run);
  t = g_thread_new ("stopper", stopper, GINT_TO_POINTER (1000));
  while ((rc = pp_run_step (run, NULL, &err)) == PP_OK)
    ;
  g_thread_join (t);
  g_assert_cmpstr (err.msg, ==, "stopped");
  pp_run_free (run);
  pp_schedule_free (s);
}

static void
assert_one_line (const PpError *err)
{
  g_assert_cmpuint (strlen (err->msg), >, 0);
  g_assert_null (strchr (err->msg, '\n'));
}

/* A failure on one rank (here a chunk refusing a forward of a micro-batch
 * already in flight: the schedule is changed behind the run's back) ends the
 * step on every rank, even those blocked waiting for a peer, comes back with
 * the chunk's message, and leaves the run able to step again: the abandoned
 * step changes nothing, so three good steps after it equal the reference. */
static void
test_rank_failure (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  Setup su = { .layers = 8, .width = 16, .batch = 16, .recompute = 0 };
  PpRunConfig cfg;
  PpError err = { 0 };
  PpRun *run;
  PpAction *victim = NULL, saved;
  Trained a = { 0 }, b = { 0 };
  PpSchedule *ref = reference_schedule (s);
  size_t wi;
  double wl;

  config_for (&cfg, s, &su);
  run = pp_run_new (&cfg, &err);
  g_assert_nonnull (run);
  for (int i = 0; i < s->rank[2].n_actions && victim == NULL; i++)
    if (s->rank[2].actions[i].kind == PP_ACT_F && s->rank[2].actions[i].microbatch == 1)
      victim = &s->rank[2].actions[i];
  g_assert_nonnull (victim);
  saved = *victim;
  victim->microbatch = 0;
  g_assert_cmpint (pp_run_step (run, NULL, &err), !=, PP_OK);
  assert_one_line (&err);
  g_test_message ("failed step: %s", err.msg);
  *victim = saved;
  for (int i = 0; i < N_STEPS; i++)
    {
      PpStepStats st;
      if (pp_run_step (run, &st, &err) != PP_OK)
        g_error ("step %d after the failure: %s", i, err.msg);
      g_assert_cmpint (st.step, ==, i);
      a.loss[i] = st.loss;
    }
  a.n = pp_run_n_params (run);
  a.params = g_new (float, a.n);
  g_assert_cmpint (pp_run_copy_params (run, a.params, NULL), ==, PP_OK);
  pp_run_free (run);
  train (ref, &su, &b);
  g_assert_cmpfloat (max_rel_diff (&a, &b, &wi, &wl), <=, REL_TOL);
  g_assert_cmpfloat (wl, <=, REL_TOL);
  g_free (a.params);
  g_free (b.params);
  pp_schedule_free (ref);
  pp_schedule_free (s);
}

static void
test_bad_requests (void)
{
  PpSchedule *s = pp_test_generate ("1F1B", 4, 8, 1);
  Setup su = { .layers = 8, .width = 16, .batch = 30, .recompute = 0 };
  PpRunConfig cfg;
  PpError err = { 0 };

  config_for (&cfg, s, &su);
  g_assert_null (pp_run_new (&cfg, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_assert_cmpstr (err.msg, ==, "--batch 30 is not a multiple of --microbatches 8");

  memset (&err, 0, sizeof err);
  su.batch = 32;
  su.layers = 2;   /* fewer blocks than parts */
  config_for (&cfg, s, &su);
  g_assert_null (pp_run_new (&cfg, &err));
  g_assert_cmpint (err.status, !=, PP_OK);
  assert_one_line (&err);

  memset (&err, 0, sizeof err);
  su.layers = 8;
  config_for (&cfg, s, &su);
  cfg.partition = "1,2,3";
  g_assert_null (pp_run_new (&cfg, &err));
  assert_one_line (&err);

  memset (&err, 0, sizeof err);
  cfg.partition = "1,3,3,1";
  {
    PpRun *run = pp_run_new (&cfg, &err);
    int n;
    const int *b;
    g_assert_nonnull (run);
    b = pp_run_blocks_per_part (run, &n);
    g_assert_cmpint (n, ==, 4);
    g_assert_cmpint (b[0], ==, 1);
    g_assert_cmpint (b[1], ==, 3);
    pp_run_free (run);
  }

  /* The CUDA backend where it cannot run (a build without CUDA, or no
   * driver or GPU: CI): NULL, PP_EUNSUPPORTED and one line a user can read,
   * so `run --backend auto` falls back to the CPU.  Where a GPU is there it
   * runs a step (then its device note names it). */
  memset (&err, 0, sizeof err);
  cfg.partition = NULL;
  cfg.backend = PP_BACKEND_CUDA;
  {
    PpRun *run = pp_run_new (&cfg, &err);
    if (run == NULL)
      {
        g_assert_cmpint (err.status, ==, PP_EUNSUPPORTED);
        assert_one_line (&err);
        g_test_message ("CUDA backend here: %s", err.msg);
        if (!pp_run_have_cuda ())
          g_assert_cmpstr (err.msg, ==, "this pipescope was built without CUDA");
      }
    else
      {
        PpStepStats st;
        g_assert_true (pp_run_have_cuda ());
        g_assert_cmpstr (pp_run_device_note (run), !=, "");
        g_assert_cmpint (pp_run_step (run, &st, &err), ==, PP_OK);
        pp_run_free (run);
      }
  }
  memset (&err, 0, sizeof err);
  cfg.backend = 7;
  g_assert_null (pp_run_new (&cfg, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  assert_one_line (&err);
  pp_schedule_free (s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/runtime/bad-requests", test_bad_requests);
  g_test_add_func ("/runtime/every-schedule", test_every_schedule);
  g_test_add_func ("/runtime/out-of-order-seeds", test_out_of_order_seeds);
  g_test_add_func ("/runtime/float-in-order", test_float_in_order);
  g_test_add_func ("/runtime/csv-schedule", test_csv_schedule);
  g_test_add_func ("/runtime/recompute", test_recompute);
  g_test_add_func ("/runtime/probe-spans", test_probe_spans);
  g_test_add_func ("/runtime/stop", test_stop);
  g_test_add_func ("/runtime/rank-failure", test_rank_failure);
  return g_test_run ();
}
