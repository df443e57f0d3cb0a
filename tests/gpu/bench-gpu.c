/* bench-gpu — the CUDA backend's numbers on a GPU machine (suite gpu,
 * `meson test --benchmark --suite gpu`).  Exits 77 without a GPU.
 *
 *  1. Bubble: 4 ranks on the machine's GPUs (one H200: 4 green-context
 *     partitions), GPipe, 1F1B, ZB-H1, ZBV and DualPipeV; per rank the
 *     measured bubble (1 - GPU busy / GPU span, median over the steps after
 *     the first two) against the simulator's prediction from the measured
 *     costs (F, B, I, W and transfers per stage).  Target: within 5 points.
 *     Also the loss at the first and the last step.
 *  2. GEMM: the block's first GEMM ([rows, D] x [D, 4D], TF32) alone in one
 *     partition, then in all partitions at once (what a full pipeline does);
 *     per-partition throughput against the alone number.  Target: >= 70%.
 *     The whole GPU's throughput for the same call is printed for scale.
 *  3. CUPTI on against off: 1F1B with a probe, step time median with the
 *     collector and with CUDA events only, runs alternated.  Target: < 3%.
 *     Also the collector with an API record for every call
 *     (PIPESCOPE_CUPTI_API=all) instead of the launches and copies only: what
 *     that choice saves.  Twice: at the benchmarks' size (256 rows per
 *     micro-batch), and with 4x the work in every kernel (1024 rows).
 *
 * Environment: PP_BENCH_STEPS (default 14) steps per bubble run.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-run.h"
#include "pp-gpu.h"
#include "pp-kernels-cuda.h"
#include "pp-probe.h"
#include "pp-schedule.h"
#include "pp-simulate.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
  qsort (v, (size_t) n, sizeof *v, cmp_double);
  return n == 0 ? NAN : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

static void
die (const char *what, const PpError *err)
{
  fprintf (stderr, "bench-gpu: %s: %s\n", what, err->msg);
  exit (1);
}

/* The benchmarks' model: 16 blocks of width 1024 (hidden 4096), 256 rows
 * per micro-batch, TF32, on the GPUs; bench_config_sized for others. */
static PpRunConfig
bench_config_sized (const PpSchedule *s, int width, int rows)
{
  PpRunConfig rc;
  memset (&rc, 0, sizeof rc);
  rc.schedule = s;
  rc.model.layers = 16;
  rc.model.width = width;
  rc.model.hidden_mult = 4;
  rc.model.seed = 1;
  rc.batch = rows * s->microbatches;
  rc.lr = 5e-5f;   /* width 1024: AdamW at 1e-3 throws the loss to ~30 */
  rc.data_seed = 1;
  rc.backend = PP_BACKEND_CUDA;
  rc.compute = PP_RUN_COMPUTE_TF32;
  return rc;
}

static PpRunConfig
bench_config (const PpSchedule *s)
{
  return bench_config_sized (s, 1024, 256);
}

/* ---- 1. bubble ---- */

static double
bench_bubble (void)
{
  static const struct { const char *name; int V; } sched[] = {
    { "GPipe", 0 }, { "1F1B", 0 }, { "ZB-H1", 0 }, { "ZBV", 2 }, { "DualPipeV", 2 },
  };
  const int P = 4, M = 8;
  int steps = getenv ("PP_BENCH_STEPS") ? atoi (getenv ("PP_BENCH_STEPS")) : 14;
  double worst = 0;

  if (steps < 4)
    steps = 4;
  printf ("== bubble: P=%d M=%d, 16 blocks of width 1024 (hidden 4096), 256 rows per micro-batch, TF32 ==\n",
          P, M);
  for (size_t i = 0; i < sizeof sched / sizeof sched[0]; i++)
    {
      PpSchedule *s = NULL;
      PpError err = { 0 };
      PpRunConfig rc;
      PpRun *run;
      double bub[4][64], loss0 = 0, loss1 = 0, secs[64];
      int n = 0;

      if (pp_schedule_generate (sched[i].name, P, M, sched[i].V, &s, &err) != PP_OK)
        die (sched[i].name, &err);
      rc = bench_config (s);
      if ((run = pp_run_new (&rc, &err)) == NULL)
        die (sched[i].name, &err);
      if (i == 0)
        printf ("placement: %s\n", pp_run_device_note (run));
      for (int k = 0; k < steps && k < 64; k++)
        {
          PpStepStats st;
          if (pp_run_step (run, &st, &err) != PP_OK)
            die (sched[i].name, &err);
          if (k == 0)
            loss0 = st.loss;
          loss1 = st.loss;
          if (k < 2)
            continue;
          {
            /* a rank's bubble is its idle share of the step's makespan
             * (first start to last end over all ranks), as the simulator's */
            int64_t lo = INT64_MAX, hi = INT64_MIN;
            for (int r = 0; r < P; r++)
              {
                int64_t a, b;
                pp_run_rank_window (run, r, &a, &b);
                if (a >= 0 && a < lo) lo = a;
                if (b > hi) hi = b;
              }
            for (int r = 0; r < P; r++)
              {
                int64_t busy, wait, span;
                pp_run_rank_times (run, r, &busy, &wait, &span);
                bub[r][n] = hi > lo ? 1.0 - (double) busy / (double) (hi - lo) : NAN;
              }
          }
          secs[n] = st.seconds;
          n++;
        }
      {
        PpCostModel *cm = pp_run_measured_costs (run);
        PpSimulation *sim = NULL;
        if (cm == NULL || pp_simulate (s, cm, &sim, &err) != PP_OK)
          die ("simulate", &err);
        printf ("%-10s step %.2f ms, loss %.4f -> %.4f; F %.3f B %.3f W %.3f xfer %.3f ms (stage 0)\n",
                s->name, 1e3 * median (secs, n), loss0, loss1, cm->f[0] * 1e-6, cm->b[0] * 1e-6,
                cm->w[0] * 1e-6, cm->comm[0] * 1e-6);
        for (int r = 0; r < P; r++)
          {
            double m = median (bub[r], n), p = sim->rank[r].bubble;
            double d = fabs (m - p) * 100.0;
            if (d > worst)
              worst = d;
            printf ("  rank %d: measured %5.1f%%  predicted %5.1f%%  (diff %.1f pp)\n", r, 100 * m, 100 * p, d);
          }
        pp_simulation_free (sim);
        pp_cost_model_free (cm);
      }
      if (!(loss1 < loss0))
        printf ("  NOTE: the loss did not fall\n");
      pp_run_free (run);
      pp_schedule_free (s);
    }
  printf ("bubble: worst |measured - predicted| %.1f pp (target 5)\n\n", worst);
  return worst;
}

/* ---- 2. GEMM throughput per partition ---- */

typedef struct {
  PpGpu  *g;
  int     rank, iters, m, n, k;
  double  tflops;
  int     ok;
  pthread_barrier_t *bar;
} GemmJob;

static void *
gemm_main (void *data)
{
  GemmJob *j = data;
  PpError err = { 0 };
  float *A = NULL, *B = NULL, *C = NULL;
  cudaEvent_t e0, e1;
  cudaStream_t s;
  float ms = 0;

  j->ok = 0;
  if (pp_gpu_bind (j->g, j->rank, &err) != PP_OK)
    goto out;
  s = (cudaStream_t) pp_gpu_stream (j->g, j->rank);
  if (cudaMalloc ((void **) &A, sizeof (float) * (size_t) j->m * j->k) != cudaSuccess
      || cudaMalloc ((void **) &B, sizeof (float) * (size_t) j->k * j->n) != cudaSuccess
      || cudaMalloc ((void **) &C, sizeof (float) * (size_t) j->m * j->n) != cudaSuccess)
    goto out;
  cudaMemset (A, 0, sizeof (float) * (size_t) j->m * j->k);
  cudaMemset (B, 0, sizeof (float) * (size_t) j->k * j->n);
  cudaEventCreate (&e0);
  cudaEventCreate (&e1);
  for (int w = 0; w < 5; w++)    /* warm-up: heuristics, caches */
    pp_cublaslt_gemm (pp_gpu_lt (j->g, j->rank), s, 0, 0, j->m, j->n, j->k, 1.0f, A, B, 0.0f, C,
                      PP_COMPUTE_TF32, PP_EPI_NONE, NULL, NULL, &err);
  cudaStreamSynchronize (s);
  if (j->bar)
    pthread_barrier_wait (j->bar);
  cudaEventRecord (e0, s);
  for (int it = 0; it < j->iters; it++)
    if (pp_cublaslt_gemm (pp_gpu_lt (j->g, j->rank), s, 0, 0, j->m, j->n, j->k, 1.0f, A, B, 0.0f,
                          C, PP_COMPUTE_TF32, PP_EPI_NONE, NULL, NULL, &err) != PP_OK)
      goto out;
  cudaEventRecord (e1, s);
  cudaEventSynchronize (e1);
  cudaEventElapsedTime (&ms, e0, e1);
  j->tflops = 2.0 * j->m * j->n * (double) j->k * j->iters / (ms * 1e-3) / 1e12;
  j->ok = ms > 0;
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
out:
  if (!j->ok)
    fprintf (stderr, "bench-gpu: GEMM on rank %d failed: %s\n", j->rank, err.msg[0] ? err.msg : "CUDA error");
  cudaFree (A);
  cudaFree (B);
  cudaFree (C);
  return NULL;
}

static double
bench_gemm (void)
{
  const int P = 4, m = 256, k = 1024, n = 4096, iters = 200;
  PpError err = { 0 };
  PpGpu *g = pp_gpu_open (P, PP_GPU_PARTITION_AUTO, NULL, 0, &err), *whole;
  GemmJob alone, jobs[4];
  pthread_t th[4];
  pthread_barrier_t bar;
  double worst = INFINITY;

  if (g == NULL)
    die ("GEMM partitions", &err);
  printf ("== GEMM [%d x %d] x [%d x %d], TF32, %d calls ==\n", m, k, k, n, iters);
  printf ("placement: %s\n", pp_gpu_describe (g));
  alone = (GemmJob) { g, 0, iters, m, n, k, 0, 0, NULL };
  gemm_main (&alone);
  printf ("alone in partition 0 (%d SMs): %.1f TFLOP/s\n", pp_gpu_sms (g, 0), alone.tflops);
  pthread_barrier_init (&bar, NULL, (unsigned) P);
  for (int r = 0; r < P; r++)
    {
      jobs[r] = (GemmJob) { g, r, iters, m, n, k, 0, 0, &bar };
      pthread_create (&th[r], NULL, gemm_main, &jobs[r]);
    }
  for (int r = 0; r < P; r++)
    pthread_join (th[r], NULL);
  pthread_barrier_destroy (&bar);
  for (int r = 0; r < P; r++)
    {
      double ratio = alone.ok && jobs[r].ok ? jobs[r].tflops / alone.tflops : 0;
      printf ("all %d at once, partition %d (%d SMs): %.1f TFLOP/s = %.0f%% of alone\n", P, r,
              pp_gpu_sms (g, r), jobs[r].tflops, 100 * ratio);
      if (ratio < worst)
        worst = ratio;
    }
  pp_gpu_close (g);

  whole = pp_gpu_open (1, PP_GPU_PARTITION_AUTO, NULL, 0, &err);
  if (whole != NULL)
    {
      GemmJob w = { whole, 0, iters, m, n, k, 0, 0, NULL };
      gemm_main (&w);
      printf ("whole GPU (%d SMs): %.1f TFLOP/s\n", pp_gpu_sms (whole, 0), w.tflops);
      pp_gpu_close (whole);
    }
  printf ("GEMM: worst partition at %.0f%% of the same call alone on an equal SM share (target 70%%)\n\n",
          100 * worst);
  return worst;
}

/* ---- 3. CUPTI overhead ---- */

typedef struct {
  long kernels, tagged;
} KernelCount;

static void
count_spans (void *user, const PpSpan *spans, size_t n)
{
  KernelCount *k = user;   /* the drain thread only */
  for (size_t i = 0; i < n; i++)
    if (spans[i].kind == PP_SPAN_KERNEL)
      {
        k->kernels++;
        if (spans[i].stage >= 0 && spans[i].microbatch >= 0)
          k->tagged++;
      }
}

static double
timed_run (int width, int rows, int no_cupti, int all_api, double *out, int n_out)
{
  KernelCount kc = { 0, 0 };
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpProbeConfig pc;
  PpProbe *probe;
  PpRunConfig rc;
  PpRun *run;
  double med;

  memset (&pc, 0, sizeof pc);
  pc.sink.spans = count_spans;
  pc.sink.user = &kc;
  if ((probe = pp_probe_new (&pc, &err)) == NULL)
    die ("probe", &err);
  if (pp_schedule_generate ("1F1B", 4, 8, 0, &s, &err) != PP_OK)
    die ("1F1B", &err);
  rc = bench_config_sized (s, width, rows);
  rc.probe = probe;
  rc.no_cupti = no_cupti;
  if (all_api)
    setenv ("PIPESCOPE_CUPTI_API", "all", 1);
  run = pp_run_new (&rc, &err);
  unsetenv ("PIPESCOPE_CUPTI_API");
  if (run == NULL)
    die ("CUPTI run", &err);
  for (int k = 0; k < n_out + 2; k++)
    {
      PpStepStats st;
      if (pp_run_step (run, &st, &err) != PP_OK)
        die ("CUPTI run", &err);
      if (k >= 2)
        out[k - 2] = st.seconds;
    }
  char note[256];
  snprintf (note, sizeof note, "%s", pp_run_timing_note (run));
  pp_run_free (run);
  pp_probe_free (probe);   /* after a last drain: every span counted */
  if (!no_cupti)
    printf ("  %s%s; %ld kernel spans (%ld a step), %ld tagged\n", note,
            all_api ? " (every API call recorded)" : "", kc.kernels,
            kc.kernels / (n_out + 2), kc.tagged);
  pp_schedule_free (s);
  med = median (out, n_out);
  /* a CUPTI run that did not trace measured events only: no overhead */
  if (!no_cupti && (strncmp (note, "CUPTI traces", 12) != 0 || kc.tagged == 0))
    {
      printf ("  NOT TRACING: that run is not a CUPTI measurement\n");
      return NAN;
    }
  return med;
}

/* CUPTI's cost is per kernel and per call, so its share of a step falls as
 * the kernels grow: measured at the benchmarks' size (256 rows per
 * micro-batch: GEMMs of ~2 GFLOP on a quarter of the GPU, tens of
 * microseconds each) and with 4x the work in every kernel, the same count of
 * kernels (1024 rows; same model, so no longer to set up). */
static double
bench_cupti (int width, int rows, int N)
{
  enum { ROUNDS = 3, NMAX = 20 };
  double on[ROUNDS], off[ROUNDS], all[ROUNDS], v[NMAX];
  if (N > NMAX)
    N = NMAX;
  printf ("== CUPTI (1F1B P=4 M=8, width %d, %d rows per micro-batch, with a probe) ==\n",
          width, rows);
  for (int i = 0; i < ROUNDS; i++)
    {
      off[i] = timed_run (width, rows, 1, 0, v, N);
      on[i] = timed_run (width, rows, 0, 0, v, N);
      all[i] = timed_run (width, rows, 0, 1, v, N);
    }
  double mon = median (on, ROUNDS), moff = median (off, ROUNDS), mall = median (all, ROUNDS);
  for (int i = 0; i < ROUNDS; i++)
    {
      if (isnan (on[i]))
        mon = NAN;
      if (isnan (all[i]))
        mall = NAN;
    }
  printf ("step time: CUDA events only %.3f ms, CUPTI %.3f ms, CUPTI recording every API call %.3f ms\n"
          "(medians over %d runs of the median of %d steps, runs alternated)\n",
          moff * 1e3, mon * 1e3, mall * 1e3, ROUNDS, N);
  printf ("CUPTI every API call vs off: %+.2f%%\n", 100 * (mall / moff - 1));
  printf ("CUPTI on vs off: %+.2f%% of step time (target < 3%%)\n\n", 100 * (mon / moff - 1));
  return 100 * (mon / moff - 1);
}

int
main (void)
{
  int n = 0;
  PpError err = { 0 };
  /* line by line: a run stopped at its time limit keeps what it printed */
  setvbuf (stdout, NULL, _IOLBF, 0);
  if (pp_cuda_device_count (&n, &err) != PP_OK)
    {
      printf ("SKIP: %s\n", err.msg);
      return 77;
    }
  double b = bench_bubble ();
  double g = bench_gemm ();
  double c = bench_cupti (1024, 256, 20);
  double c4 = bench_cupti (1024, 1024, 10);
  printf ("summary: bubble worst diff %.1f pp (target 5), GEMM worst %.0f%% (target 70%%), "
          "CUPTI %+.2f%% at 256 rows, %+.2f%% at 1024 rows (target < 3%%)\n",
          b, 100 * g, c, c4);
  return 0;
}
