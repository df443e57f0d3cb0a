/* The CUDA backend of the executor (pp-run.h with PP_BACKEND_CUDA)
 * against the CPU backend, and what it records.
 *
 * Without a GPU or a driver the program says why and exits 77 (meson: SKIP).
 *
 *  /gpu-run/correctness   every schedule, 3 steps, fp32 GEMMs: the losses of
 *      every step and the weights after 3 steps match the CPU backend's
 *      (exact gradients: the literal training step).
 *      How close: the two backends add the same numbers in other orders
 *      (cuBLASLt's split-K and tiles, our fixed-order column sums), so each
 *      step's gradients differ in the last bits; AdamW divides by sqrt(v), so
 *      on near-cancelling gradients those bits move single weights by up to
 *      lr per step.  What must hold is that the two runs took the same
 *      *steps*: with d = w3 - w0 the update of the 3 steps,
 *        ||d_gpu - d_cpu|| / ||d_cpu|| <= 1e-2  (fp32),
 *      5e-2 for TF32 (10-bit mantissas in the GEMMs), 1e-1 for BF16 (8-bit).
 *      A missing micro-batch, a gradient scaled wrong, a part whose update is
 *      lost or a transfer of the wrong micro-batch all give 0.1 to 1 and more.
 *      Losses: within 1e-4 relative (fp32), 2e-3 (TF32), 1e-2 (BF16).
 *  /gpu-run/compute-types TF32 and BF16 on 1F1B with those bounds.
 *  /gpu-run/trains        4 ranks on one GPU in green-context partitions (or
 *      whatever pp_gpu_open gives on this machine, printed): GPipe, 1F1B,
 *      ZB-H1, ZBV and DualPipeV each bring the loss down by a quarter in 40
 *      steps.
 *  /gpu-run/spans         with a probe: every F/B/I/W span of a step has GPU
 *      times inside the step, stage transfers appear as RECV spans, and with
 *      CUPTI each block has kernel child spans tagged with its rank, stage
 *      and micro-batch (else the test says CUPTI was unavailable and checks
 *      the event timing only).
 *  /gpu-run/partitions    --gpu-partition streams works too, and green either
 *      works or fails with one line.
 */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-run.h"
#include "pp-gpu.h"
#include "pp-kernels-cuda.h"
#include "pp-probe.h"
#include "pp-schedule.h"

typedef struct {
  const char *name;
  int P, M, V;
} Case;

static const Case cases[] = {
  { "GPipe", 4, 8, 0 },
  { "1F1B", 4, 8, 0 },
  { "Interleaved1F1B", 2, 4, 2 },
  { "LoopedBFS", 2, 4, 2 },
  { "InterleavedZeroBubble", 2, 4, 2 },
  { "ZB-H1", 4, 8, 0 },
  { "ZB-H2", 4, 8, 0 },
  { "ZBV", 2, 4, 2 },
  { "DualPipeV", 2, 4, 2 },
  { "DualPipe", 4, 8, 0 },
};

static PpSchedule *
gen (const char *name, int P, int M, int V)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  if (pp_schedule_generate (name, P, M, V, &s, &err) != PP_OK)
    g_error ("%s P=%d M=%d V=%d: %s", name, P, M, V, err.msg);
  return s;
}

static int transport = PP_RUN_TRANSPORT_AUTO, partition = PP_RUN_GPU_AUTO;

typedef struct {
  float  *w0, *w3;
  double  loss[3];
  size_t  n;
} Result;

static PpRunConfig
base_config (const PpSchedule *s, int backend, int compute)
{
  PpRunConfig rc;
  memset (&rc, 0, sizeof rc);
  rc.schedule = s;
  rc.model.layers = 8;
  rc.model.width = 64;
  rc.model.hidden_mult = 4;
  rc.model.seed = 7;
  rc.batch = 4 * s->microbatches;
  rc.lr = 3e-3f;
  rc.data_seed = 11;
  rc.backend = backend;
  rc.compute = compute;
  rc.exact_grads = backend == PP_BACKEND_CPU;
  rc.gpu_transport = transport;
  rc.gpu_partition = partition;
  return rc;
}

static void
train3 (const PpSchedule *s, int backend, int compute, Result *out)
{
  PpRunConfig rc = base_config (s, backend, compute);
  PpError err = { 0 };
  PpRun *run = pp_run_new (&rc, &err);
  if (run == NULL)
    g_error ("%s on %s: %s", s->name, backend ? "cuda" : "cpu", err.msg);
  out->n = pp_run_n_params (run);
  out->w0 = g_new (float, out->n);
  out->w3 = g_new (float, out->n);
  g_assert_cmpint (pp_run_copy_params (run, out->w0, NULL), ==, PP_OK);
  for (int i = 0; i < 3; i++)
    {
      PpStepStats st;
      if (pp_run_step (run, &st, &err) != PP_OK)
        g_error ("%s on %s, step %d: %s", s->name, backend ? "cuda" : "cpu", i, err.msg);
      out->loss[i] = st.loss;
    }
  g_assert_cmpint (pp_run_copy_params (run, out->w3, NULL), ==, PP_OK);
  pp_run_free (run);
}

static void
result_clear (Result *r)
{
  g_free (r->w0);
  g_free (r->w3);
}

/* ||d_gpu - d_cpu|| / ||d_cpu|| over the whole model */
static double
update_error (const Result *cpu, const Result *gpu)
{
  double num = 0, den = 0;
  g_assert_cmpuint (cpu->n, ==, gpu->n);
  for (size_t i = 0; i < cpu->n; i++)
    {
      double dc = (double) cpu->w3[i] - cpu->w0[i];
      double dg = (double) gpu->w3[i] - gpu->w0[i];
      num += (dg - dc) * (dg - dc);
      den += dc * dc;
    }
  return den > 0 ? sqrt (num / den) : INFINITY;
}

static void
compare (const char *what, const PpSchedule *s, int compute, double upd_tol, double loss_tol)
{
  Result cpu, gpu;
  double e, worst_loss = 0;

  train3 (s, PP_BACKEND_CPU, 0, &cpu);
  train3 (s, PP_BACKEND_CUDA, compute, &gpu);
  /* same initial weights: both backends start from the model's seed */
  for (size_t i = 0; i < cpu.n; i++)
    if (cpu.w0[i] != gpu.w0[i])
      g_error ("%s: initial weight %zu differs (%g vs %g)", what, i, cpu.w0[i], gpu.w0[i]);
  e = update_error (&cpu, &gpu);
  for (int i = 0; i < 3; i++)
    {
      double d = fabs (gpu.loss[i] - cpu.loss[i]) / fabs (cpu.loss[i]);
      if (d > worst_loss)
        worst_loss = d;
    }
  g_test_message ("%-32s update error %.2e (bound %.0e), loss %.6f vs %.6f -> %.6f vs %.6f (worst rel %.1e)",
                  what, e, upd_tol, gpu.loss[0], cpu.loss[0], gpu.loss[2], cpu.loss[2], worst_loss);
  if (!(e <= upd_tol))
    g_error ("%s: the GPU's 3-step update differs from the CPU's by %.3g (bound %.0e)", what, e, upd_tol);
  if (!(worst_loss <= loss_tol))
    g_error ("%s: a step's loss differs by %.3g relative (bound %.0e)", what, worst_loss, loss_tol);
  result_clear (&cpu);
  result_clear (&gpu);
}

static void
test_correctness (void)
{
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PpSchedule *s = gen (cases[i].name, cases[i].P, cases[i].M, cases[i].V);
      char what[96];
      g_snprintf (what, sizeof what, "%s P=%d M=%d fp32", s->name, cases[i].P, cases[i].M);
      compare (what, s, PP_RUN_COMPUTE_FP32, 1e-2, 1e-4);
      pp_schedule_free (s);
    }
}

/* NCCL send/receive at every boundary; on one GPU through communicators that
 * send to themselves (two ranks on one GPU cannot share one), on streams. */
static void
test_nccl (void)
{
  PpSchedule *s;
  if (!pp_gpu_have_nccl ())
    {
      g_test_skip ("libnccl.so.2 cannot be loaded here");
      return;
    }
  transport = PP_RUN_TRANSPORT_NCCL;
  partition = PP_RUN_GPU_STREAMS;
  s = gen ("1F1B", 4, 8, 0);
  compare ("1F1B P=4 M=8 fp32, NCCL", s, PP_RUN_COMPUTE_FP32, 1e-2, 1e-4);
  pp_schedule_free (s);
  s = gen ("ZBV", 2, 4, 2);
  compare ("ZBV P=2 M=4 fp32, NCCL", s, PP_RUN_COMPUTE_FP32, 1e-2, 1e-4);
  pp_schedule_free (s);
  transport = PP_RUN_TRANSPORT_AUTO;
  partition = PP_RUN_GPU_AUTO;
}

static void
test_compute_types (void)
{
  PpSchedule *s = gen ("1F1B", 4, 8, 0);
  compare ("1F1B P=4 M=8 tf32", s, PP_RUN_COMPUTE_TF32, 5e-2, 2e-3);
  compare ("1F1B P=4 M=8 bf16", s, PP_RUN_COMPUTE_BF16, 1e-1, 1e-2);
  pp_schedule_free (s);
}

static void
test_trains (void)
{
  static const Case train[] = {
    { "GPipe", 4, 8, 0 }, { "1F1B", 4, 8, 0 }, { "ZB-H1", 4, 8, 0 },
    { "ZBV", 4, 8, 2 }, { "DualPipeV", 4, 8, 2 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (train); i++)
    {
      PpSchedule *s = gen (train[i].name, train[i].P, train[i].M, train[i].V);
      PpRunConfig rc = base_config (s, PP_BACKEND_CUDA, PP_RUN_COMPUTE_TF32);
      PpError err = { 0 };
      PpRun *run;
      double first = 0, last = 0;

      rc.gpu_partition = PP_RUN_GPU_AUTO;
      rc.model.layers = 8;
      rc.model.width = 128;
      rc.batch = 32 * s->microbatches;
      rc.lr = 3e-3f;
      if ((run = pp_run_new (&rc, &err)) == NULL)
        g_error ("%s: %s", s->name, err.msg);
      for (int k = 0; k < 40; k++)
        {
          PpStepStats st;
          if (pp_run_step (run, &st, &err) != PP_OK)
            g_error ("%s step %d: %s", s->name, k, err.msg);
          if (k == 0)
            first = st.loss;
          last = st.loss;
        }
      g_test_message ("%-10s on %s: loss %.4f -> %.4f in 40 steps", s->name,
                      pp_run_device_note (run), first, last);
      if (!(last < 0.75 * first))
        g_error ("%s: the loss did not fall by a quarter (%.4f -> %.4f)", s->name, first, last);
      pp_run_free (run);
      pp_schedule_free (s);
    }
}

/* ---- spans ---- */

typedef struct {
  GMutex  lock;
  GArray *spans;
} Sink;

static void
sink_spans (void *user, const PpSpan *spans, size_t n)
{
  Sink *k = user;
  g_mutex_lock (&k->lock);
  g_array_append_vals (k->spans, spans, (guint) n);
  g_mutex_unlock (&k->lock);
}

static void
check_spans (int no_cupti)
{
  PpSchedule *s = gen ("1F1B", 4, 8, 0);
  PpRunConfig rc = base_config (s, PP_BACKEND_CUDA, PP_RUN_COMPUTE_TF32);
  Sink k;
  PpProbeConfig pc;
  PpError err = { 0 };
  PpProbe *probe;
  PpRun *run;
  PpStepStats st[3];
  int work = 0, recv = 0, kernels = 0, tagged = 0, outside = 0;
  char note[256];

  g_mutex_init (&k.lock);
  k.spans = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  memset (&pc, 0, sizeof pc);
  pc.sink.user = &k;
  pc.sink.spans = sink_spans;
  probe = pp_probe_new (&pc, &err);
  g_assert_nonnull (probe);
  rc.probe = probe;
  rc.no_cupti = no_cupti;
  if ((run = pp_run_new (&rc, &err)) == NULL)
    g_error ("spans: %s", err.msg);
  g_strlcpy (note, pp_run_timing_note (run), sizeof note);
  g_test_message ("%s; %s", pp_run_device_note (run), note);
  for (int i = 0; i < 3; i++)
    if (pp_run_step (run, &st[i], &err) != PP_OK)
      g_error ("spans step %d: %s", i, err.msg);
  pp_run_free (run);          /* stops CUPTI after a last flush */
  g_assert_cmpint (pp_probe_flush (probe, &err), ==, PP_OK);

  g_mutex_lock (&k.lock);
  for (guint i = 0; i < k.spans->len; i++)
    {
      const PpSpan *sp = &g_array_index (k.spans, PpSpan, i);
      if (sp->step < 0 || sp->step > 2)
        continue;
      if (pp_span_kind_is_work (sp->kind) && sp->kind != PP_SPAN_OPT)
        {
          work++;
          g_assert_cmpint (sp->end_ns, >=, sp->start_ns);
          if (sp->start_ns < st[sp->step].start_ns || sp->end_ns > st[sp->step].end_ns)
            outside++;
        }
      else if (sp->kind == PP_SPAN_RECV_F || sp->kind == PP_SPAN_RECV_B)
        {
          recv++;
          g_assert_cmpint (sp->peer_rank, >=, 0);
        }
      else if (sp->kind == PP_SPAN_KERNEL)
        {
          kernels++;
          if (sp->stage >= 0 && sp->microbatch >= 0 && sp->rank >= 0 && sp->rank < 4)
            tagged++;
        }
    }
  g_mutex_unlock (&k.lock);
  g_test_message ("%s: %d work spans (%d outside their step), %d transfers, %d kernels (%d tagged)",
                  no_cupti ? "events" : "default", work, outside, recv, kernels, tagged);
  /* 1F1B P=4 M=8: 4 ranks x 8 micro-batches x (F + B) per step */
  g_assert_cmpint (work, ==, 3 * 4 * 8 * 2);
  g_assert_cmpint (outside, ==, 0);
  /* 3 boundaries x 8 micro-batches x 2 directions per step */
  g_assert_cmpint (recv, ==, 3 * 3 * 8 * 2);
  if (no_cupti || !g_str_has_prefix (note, "CUPTI traces"))
    {
      g_test_message ("no CUPTI: %s", note);
      g_assert_cmpint (kernels, ==, 0);
    }
  else
    {
      /* The spans went out a step late with CUPTI's times: each block runs
       * from its first device record's start to its last one's end, so
       * every tagged kernel, copy, memset lies inside a block span of its
       * (rank, stage, micro-batch, step), and every block starts exactly
       * where one of them does. */
      int outside_block = 0, exact = 0, blocks = 0, dup = 0, late = 0, misstepped = 0;
      int step_work[4] = { 0, 0, 0, 0 };
      GHashTable *seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_assert_cmpint (tagged, >=, work * 5);   /* every block launches several kernels */
      g_mutex_lock (&k.lock);
      for (guint i = 0; i < k.spans->len; i++)
        {
          const PpSpan *d = &g_array_index (k.spans, PpSpan, i);
          int inside = 0;
          if (d->kind != PP_SPAN_KERNEL && d->kind != PP_SPAN_MEMCPY && d->kind != PP_SPAN_MEMSET)
            continue;
          /* Device work carries the step that ran it, tagged or not (the
           * batch upload, AdamW, the losses' copy are tagged with their
           * rank and step only), even though CUPTI's records of a step are
           * read during the next one. */
          late += d->step > 2;
          /* inside a step's host time, 50 us from its ends (CUPTI's GPU
           * clock maps onto CLOCK_MONOTONIC within microseconds) */
          for (int q = 0; q < 3; q++)
            misstepped += d->start_ns > st[q].start_ns + 50000 && d->start_ns < st[q].end_ns - 50000
                          && d->step != q;
          if (d->stage < 0 && d->rank >= 0 && d->rank < 4 && d->start_ns >= st[0].start_ns)
            step_work[d->rank]++;
          if (d->stage < 0 || d->microbatch < 0 || d->step < 0 || d->step > 2)
            continue;
          for (guint j = 0; j < k.spans->len && !inside; j++)
            {
              const PpSpan *b = &g_array_index (k.spans, PpSpan, j);
              inside = (pp_span_kind_is_block (b->kind) || b->kind == PP_SPAN_RECV_F
                        || b->kind == PP_SPAN_RECV_B)
                       && b->rank == d->rank && b->stage == d->stage
                       && b->microbatch == d->microbatch && b->step == d->step
                       && b->start_ns <= d->start_ns && d->end_ns <= b->end_ns;
            }
          outside_block += !inside;
        }
      for (guint j = 0; j < k.spans->len; j++)
        {
          const PpSpan *b = &g_array_index (k.spans, PpSpan, j);
          int hit = 0;
          if (!pp_span_kind_is_block (b->kind) || b->step < 0 || b->step > 2)
            continue;
          blocks++;
          /* written once, although a step late */
          if (!g_hash_table_add (seen, g_strdup_printf ("%d/%d/%d/%d/%d", b->rank, b->stage,
                                                         b->microbatch, b->step, b->kind)))
            dup++;
          for (guint i = 0; i < k.spans->len && !hit; i++)
            {
              const PpSpan *d = &g_array_index (k.spans, PpSpan, i);
              hit = (d->kind == PP_SPAN_KERNEL || d->kind == PP_SPAN_MEMCPY || d->kind == PP_SPAN_MEMSET)
                    && d->rank == b->rank && d->stage == b->stage && d->microbatch == b->microbatch
                    && d->step == b->step && d->start_ns == b->start_ns;
            }
          exact += hit;
        }
      g_mutex_unlock (&k.lock);
      g_test_message ("device spans outside their block: %d; blocks starting at a kernel: %d of %d; "
                      "blocks written twice: %d; device spans of a later step: %d, with another "
                      "step's number: %d; step work (batch, AdamW, losses) per rank: %d %d %d %d",
                      outside_block, exact, blocks, dup, late, misstepped, step_work[0],
                      step_work[1], step_work[2], step_work[3]);
      g_assert_cmpint (outside_block, ==, 0);
      g_assert_cmpint (exact, ==, blocks);
      g_assert_cmpint (dup, ==, 0);
      g_assert_cmpint ((int) g_hash_table_size (seen), ==, work);
      g_assert_cmpint (late, ==, 0);
      g_assert_cmpint (misstepped, ==, 0);
      for (int r = 0; r < 4; r++)
        g_assert_cmpint (step_work[r], >=, 3);   /* AdamW at least, every step */
      g_hash_table_unref (seen);
    }
  g_array_unref (k.spans);
  g_mutex_clear (&k.lock);
  pp_probe_free (probe);
  pp_schedule_free (s);
}

static void
test_spans (void)
{
  check_spans (0);
}

static void
test_spans_events (void)
{
  check_spans (1);
}

static void
test_partitions (void)
{
  PpSchedule *s = gen ("1F1B", 4, 8, 0);
  for (int part = PP_RUN_GPU_GREEN; part <= PP_RUN_GPU_STREAMS; part++)
    {
      PpRunConfig rc = base_config (s, PP_BACKEND_CUDA, PP_RUN_COMPUTE_TF32);
      PpError err = { 0 };
      PpRun *run;
      PpStepStats st;
      rc.gpu_partition = part;
      run = pp_run_new (&rc, &err);
      if (run == NULL)
        {
          /* green may be impossible (an old driver, MIG): one line, no crash */
          g_assert_cmpint (part, ==, PP_RUN_GPU_GREEN);
          g_assert_null (strchr (err.msg, '\n'));
          g_test_message ("green: %s", err.msg);
          continue;
        }
      g_test_message ("%s: %s; rank 0 has %d SMs", part == PP_RUN_GPU_GREEN ? "green" : "streams",
                      pp_run_device_note (run), pp_run_rank_sms (run, 0));
      g_assert_cmpint (pp_run_rank_sms (run, 0), >, 0);
      if (part == PP_RUN_GPU_GREEN)
        g_assert_nonnull (strstr (pp_run_device_note (run), "green"));
      g_assert_cmpint (pp_run_step (run, &st, &err), ==, PP_OK);
      g_assert_true (isfinite (st.loss));
      pp_run_free (run);
    }
  pp_schedule_free (s);
}

int
main (int argc, char **argv)
{
  int n = 0;
  PpError err = { 0 };

  if (pp_cuda_device_count (&n, &err) != PP_OK)
    {
      printf ("SKIP: %s\n", err.msg);
      return 77;
    }
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gpu-run/partitions", test_partitions);
  g_test_add_func ("/gpu-run/correctness", test_correctness);
  g_test_add_func ("/gpu-run/compute-types", test_compute_types);
  g_test_add_func ("/gpu-run/nccl", test_nccl);
  g_test_add_func ("/gpu-run/spans", test_spans);
  g_test_add_func ("/gpu-run/spans-events", test_spans_events);
  g_test_add_func ("/gpu-run/trains", test_trains);
  return g_test_run ();
}
