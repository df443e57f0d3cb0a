/* bench-run — the training runtime measured against its own plan.
 *
 * (1) GPipe, 1F1B, ZB-H1 and ZBV with P = 2, M = 8, ranks pinned: the
 *     measured bubble per rank over the last 20 of 30 steps against the
 *     simulator's prediction from pp_run_measured_costs (target: within 5
 *     percentage points);
 * (2) throughput of 1F1B on 2 ranks against the same network on one rank
 *     without a pipeline (F0..F7 B0..B7), median samples/s (target >= 1.5x);
 * (3) step time with a probe (counting sink) against none, medians of
 *     interleaved steps (target < 1 %).
 *
 * The measured bubble of a rank in a step is 1 - busy / makespan, busy being
 * the rank's F/B/I/W time and makespan the step's first compute start to
 * last compute end over all ranks (the simulator's definition).  Prints a
 * table; exits non-zero only if something fails to run.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-run.h"
#include "pp-model.h"
#include "pp-probe.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "bench-util.h"

#define P        2
#define M        8
#define LAYERS   8
#define WIDTH    256
#define BATCH    64
#define STEPS    30
#define LAST     20

/* ---- a sink that keeps per rank and step what the bubble needs ---------------- */

typedef struct {
  int64_t first, last, busy;
  int     any;
} Cell;

typedef struct {
  pthread_mutex_t lock;
  Cell            cell[STEPS][P];
  uint64_t        n_spans, n_counters;
} Tap;

static int
is_compute (int kind)
{
  return kind == PP_SPAN_F || kind == PP_SPAN_B || kind == PP_SPAN_I || kind == PP_SPAN_W
         || kind == PP_SPAN_OVERLAP_F_B;
}

static void
tap_spans (void *user, const PpSpan *spans, size_t n)
{
  Tap *t = user;
  pthread_mutex_lock (&t->lock);
  t->n_spans += n;
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *sp = &spans[i];
      if (!is_compute (sp->kind) || sp->step < 0 || sp->step >= STEPS || sp->rank < 0 || sp->rank >= P)
        continue;
      Cell *c = &t->cell[sp->step][sp->rank];
      if (!c->any || sp->start_ns < c->first) c->first = sp->start_ns;
      if (!c->any || sp->end_ns > c->last) c->last = sp->end_ns;
      c->busy += sp->end_ns - sp->start_ns;
      c->any = 1;
    }
  pthread_mutex_unlock (&t->lock);
}

static void
tap_counters (void *user, const PpCounter *c, size_t n)
{
  Tap *t = user;
  (void) c;
  pthread_mutex_lock (&t->lock);
  t->n_counters += n;
  pthread_mutex_unlock (&t->lock);
}

static PpRun *
new_run (const PpSchedule *s, PpProbe *probe)
{
  PpRunConfig rc;
  PpError err = { 0 };
  PpRun *run;

  memset (&rc, 0, sizeof rc);
  rc.schedule = s;
  rc.model.layers = LAYERS;
  rc.model.width = WIDTH;
  rc.model.seed = 1;
  rc.batch = BATCH;
  rc.lr = 1e-3f;
  rc.data_seed = 1;
  rc.pin_threads = 1;
  rc.probe = probe;
  run = pp_run_new (&rc, &err);
  if (run == NULL)
    fprintf (stderr, "bench-run: %s: %s\n", s->name, err.msg);
  return run;
}

static int
step (PpRun *run, PpStepStats *st)
{
  PpError err = { 0 };
  if (pp_run_step (run, st, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: step: %s\n", err.msg);
      return -1;
    }
  return 0;
}

/* ---- (1) measured bubble against the prediction ---------------------------- */

static int
bench_bubble (const char *name, double *worst)
{
  PpError err = { 0 };
  PpSchedule *s = NULL;
  PpProbe *probe = NULL;
  PpRun *run = NULL;
  PpCostModel *cm = NULL;
  PpSimulation *sim = NULL;
  Tap *tap = calloc (1, sizeof *tap);
  PpProbeConfig pc;
  double ms[STEPS];
  int rc = 1;

  if (tap == NULL)
    return 1;
  pthread_mutex_init (&tap->lock, NULL);
  if (pp_schedule_generate (name, P, M, 0, &s, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: %s\n", err.msg);
      goto out;
    }
  memset (&pc, 0, sizeof pc);
  pc.sink.user = tap;
  pc.sink.spans = tap_spans;
  pc.sink.counters = tap_counters;
  probe = pp_probe_new (&pc, &err);
  if (probe == NULL || (run = new_run (s, probe)) == NULL)
    goto out;
  for (int i = 0; i < STEPS; i++)
    {
      PpStepStats st;
      if (step (run, &st) != 0)
        goto out;
      ms[i] = st.seconds * 1e3;
    }
  if (pp_probe_flush (probe, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: %s\n", err.msg);
      goto out;
    }
  cm = pp_run_measured_costs (run);
  if (cm == NULL || pp_simulate (s, cm, &sim, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: %s: cannot simulate the measured costs: %s\n", name, err.msg);
      goto out;
    }

  {
    /* Per step and rank, then the median over the last LAST steps: a step
     * disturbed by another process on the machine does not move it. */
    double bub[P][LAST], spans[LAST];
    int n = 0;
    pthread_mutex_lock (&tap->lock);
    for (int k = STEPS - LAST; k < STEPS; k++)
      {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int r = 0; r < P; r++)
          if (tap->cell[k][r].any)
            {
              if (tap->cell[k][r].first < lo) lo = tap->cell[k][r].first;
              if (tap->cell[k][r].last > hi) hi = tap->cell[k][r].last;
            }
        if (hi <= lo)
          continue;
        for (int r = 0; r < P; r++)
          bub[r][n] = 100.0 * (1.0 - (double) tap->cell[k][r].busy / (double) (hi - lo));
        spans[n++] = (double) (hi - lo) * 1e-6;
      }
    pthread_mutex_unlock (&tap->lock);
    if (n == 0)
      {
        fprintf (stderr, "bench-run: %s: no spans recorded\n", name);
        goto out;
      }
    double step_ms = bench_median (ms + STEPS - LAST, LAST);
    for (int r = 0; r < P; r++)
      {
        double meas = bench_median (bub[r], n);
        double pred = 100.0 * sim->rank[r].bubble;
        double d = meas - pred;
        if (fabs (d) > *worst)
          *worst = fabs (d);
        printf ("%-6s %4d  %9.1f ms  %8.1f%%  %9.1f%%  %+7.1f pp  %s\n", name, r, step_ms, meas, pred, d,
                fabs (d) <= 5.0 ? "ok" : "MISS");
      }
    printf ("%-6s       planned makespan %.1f ms, measured compute makespan %.1f ms (median)\n",
            name, sim->makespan * 1e-6, bench_median (spans, n));
  }
  rc = 0;
out:
  if (run)
    pp_run_free (run);
  pp_probe_free (probe);
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
  pthread_mutex_destroy (&tap->lock);
  free (tap);
  return rc;
}

/* ---- (2) pipeline against one rank ------------------------------------------ */

static int
samples_per_s (const PpSchedule *s, double *out)
{
  PpRun *run = new_run (s, NULL);
  double v[STEPS];
  int n = 0;

  if (run == NULL)
    return 1;
  for (int i = 0; i < 3 + 15; i++)
    {
      PpStepStats st;
      if (step (run, &st) != 0)
        {
          pp_run_free (run);
          return 1;
        }
      if (i >= 3)
        v[n++] = st.samples_per_s;
    }
  pp_run_free (run);
  *out = bench_median (v, n);
  return 0;
}

static int
bench_throughput (double *ratio)
{
  PpError err = { 0 };
  PpSchedule *pipe = NULL, *one = NULL;
  double sp = 0, s1 = 0;
  int rc = 1;

  if (pp_schedule_generate ("1F1B", P, M, 0, &pipe, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: %s\n", err.msg);
      return 1;
    }
  one = pp_schedule_new ("1 rank", 1, M, 1, PP_PLACE_LOOP);
  if (one == NULL)
    goto out;
  for (int m = 0; m < M; m++)
    if (pp_schedule_push (one, 0, pp_action (PP_ACT_F, 0, m)) != PP_OK)
      goto out;
  for (int m = 0; m < M; m++)
    if (pp_schedule_push (one, 0, pp_action (PP_ACT_B, 0, m)) != PP_OK)
      goto out;
  if (pp_schedule_validate (one, &err) != PP_OK)
    {
      fprintf (stderr, "bench-run: 1-rank schedule: %s\n", err.msg);
      goto out;
    }
  if (samples_per_s (one, &s1) != 0 || samples_per_s (pipe, &sp) != 0)
    goto out;
  *ratio = sp / s1;
  printf ("1 rank (F0..F7 B0..B7)   %8.0f samples/s\n", s1);
  printf ("1F1B on 2 ranks          %8.0f samples/s   %.2fx  %s\n", sp, *ratio,
          *ratio >= 1.5 ? "ok" : "MISS");
  rc = 0;
out:
  pp_schedule_free (pipe);
  pp_schedule_free (one);
  return rc;
}

/* ---- (3) the probe's cost ------------------------------------------------------ */

static int
bench_probe (double *diff)
{
  PpError err = { 0 };
  PpSchedule *s = NULL;
  PpProbe *probe = NULL;
  PpRun *on = NULL, *off = NULL;
  Tap *tap = calloc (1, sizeof *tap);
  PpProbeConfig pc;
  enum { WARM = 3, N = 101 };
  double t_on[N], t_off[N], paired[N];
  int rc = 1;

  if (tap == NULL)
    return 1;
  pthread_mutex_init (&tap->lock, NULL);
  if (pp_schedule_generate ("1F1B", P, M, 0, &s, &err) != PP_OK)
    goto out;
  memset (&pc, 0, sizeof pc);
  pc.sink.user = tap;
  pc.sink.spans = tap_spans;
  pc.sink.counters = tap_counters;
  probe = pp_probe_new (&pc, &err);
  if (probe == NULL || (on = new_run (s, probe)) == NULL || (off = new_run (s, NULL)) == NULL)
    goto out;
  for (int i = 0; i < WARM + N; i++)
    {
      PpStepStats a, b;
      /* Alternate which goes first so that neither always follows the other. */
      if (i % 2 == 0)
        {
          if (step (on, &a) != 0 || step (off, &b) != 0)
            goto out;
        }
      else if (step (off, &b) != 0 || step (on, &a) != 0)
        goto out;
      if (i >= WARM)
        {
          t_on[i - WARM] = a.seconds;
          t_off[i - WARM] = b.seconds;
        }
    }
  pp_probe_flush (probe, NULL);
  {
    /* Steps are paired (run back to back, alternating which goes first):
     * the median of the paired relative differences cancels most of the
     * machine's drift, which the difference of two medians does not. */
    for (int i = 0; i < N; i++)
      paired[i] = (t_on[i] - t_off[i]) / t_off[i];
    double mon = bench_median (t_on, N), moff = bench_median (t_off, N);
    *diff = 100.0 * bench_median (paired, N);
    printf ("probe off                %8.1f ms/step\n", moff * 1e3);
    printf ("probe on (counting sink) %8.1f ms/step   %+.2f%%  %s   (%llu spans, %llu counters, %llu dropped)\n",
            /* the target bounds the cost; on faster than off is noise */
            mon * 1e3, *diff, *diff < 1.0 ? (*diff > -1.0 ? "ok" : "ok (on faster: noise)") : "MISS",
            (unsigned long long) tap->n_spans, (unsigned long long) tap->n_counters,
            (unsigned long long) pp_probe_dropped (probe));
  }
  rc = 0;
out:
  if (on)
    pp_run_free (on);
  if (off)
    pp_run_free (off);
  pp_probe_free (probe);
  pp_schedule_free (s);
  pthread_mutex_destroy (&tap->lock);
  free (tap);
  return rc;
}

int
main (void)
{
  static const char *const names[] = { "GPipe", "1F1B", "ZB-H1", "ZBV" };
  double worst = 0, ratio = 0, diff = 0;
  int failed = 0;

  {
    FILE *f = fopen ("/proc/loadavg", "r");
    double load = -1;
    if (f != NULL)
      {
        if (fscanf (f, "%lf", &load) != 1)
          load = -1;
        fclose (f);
      }
    printf ("load average at start: %.2f (other busy processes on this machine distort every number below)\n",
            load);
  }
  printf ("bench-run: P=%d, M=%d, residual MLP %d blocks, width %d, hidden %d, batch %d; "
          "ranks pinned\n\n", P, M, LAYERS, WIDTH, 4 * WIDTH, BATCH);
  printf ("(1) bubble, median over the last %d of %d steps: measured vs simulated from measured costs\n", LAST, STEPS);
  printf ("sched  rank  step (med)  measured  predicted  difference\n");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    failed |= bench_bubble (names[i], &worst);
  printf ("largest difference: %.1f pp (target: within 5 pp)\n\n", worst);

  printf ("(2) throughput, median of 15 steps\n");
  failed |= bench_throughput (&ratio);
  printf ("\n(3) probe on vs off, 101 paired steps (1F1B): median step times, and the median\n"
          "    of the paired relative differences\n");
  failed |= bench_probe (&diff);
  fflush (stdout);
  return failed ? 1 : 0;
}
