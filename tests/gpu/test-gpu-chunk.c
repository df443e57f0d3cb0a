/* The GPU part (pp-chunk-cuda.h) against the CPU part (pp-model.h): a small
 * model split in two parts, two micro-batches forward and backward through
 * both parts, on the CPU and on the GPU from the same inputs.  Then the
 * GPU's own invariants: the I/W split gives exactly the gradients of B,
 * recompute exactly those without it; AdamW, the gradient sum and copy of
 * DualPipe's two copies; and the argument errors.
 *
 * Without a GPU or a driver the program says why and exits 77 (meson: SKIP);
 * with --tap it prints a TAP plan of 0 with the reason and exits 0 instead.
 *
 * How close is close enough (GPU fp32 against CPU fp32).  Every GEMM is true
 * fp32 on both sides (PP_COMPUTE_FP32; test-gpu-kernels holds cuBLASLt to
 * 1e-5 of max|C| there), LayerNorm and softmax reduce in double on both, and
 * GELU' uses tanhf on both: those differ by a few ulp, ~1e-6 of each
 * tensor's largest element.  The one larger difference is the forward GELU,
 * which cuBLASLt fuses into Linear1 with its own tanh (test-gpu-kernels
 * allows 1e-3 of max|y| for it at pre-activations of a few units; think
 * of a tanh.approx-style error of 2^-11 ~ 5e-4 on tanh).  g = x (1 + t) / 2
 * then errs by dt / (1 + t) relative: at most ~5e-4 an element, ~1.6e-4 if
 * the error is relative to t (|h1| < 1 here: weights ~0.02, so
 * pre-activations ~0.2).  It reaches the outputs only through g:
 *  - the residual stream is the input projection's output (~0.13) plus
 *    blocks that add ~10x less (W2 is scaled by 1/sqrt(2L)), so part 0's
 *    output, the logits and the losses move by ~2e-5 relative at most:
 *    losses 1e-5 of their sum (its error averages over 32 rows), activations
 *    and input gradients (which see g only through dlogits) 1e-4 of
 *    max|want|;
 *  - dW2 = g^T dy sees g's error directly, a sum over rows of terms each off
 *    by at most ~5e-4 relative (less once random signs average out): 1e-3
 *    of each gradient tensor's max|want|.
 * Each gradient tensor (W1, b1, gamma, ...) is checked on its own against
 * its own largest element, so a small tensor cannot hide under a large one.
 * Any wiring error (a wrong buffer, a transposed weight, an overwrite where
 * the gradient should accumulate: the second micro-batch doubles it) is off
 * by 10% or more.
 *
 * Bit for bit: the GPU kernels are deterministic (no atomics, fixed
 * reduction order, the same cuBLASLt algorithm for the same shapes and
 * alignments), and the I/W split and recompute run the same kernels on the
 * same inputs, accumulating micro-batches in the same order: their results
 * must equal B's / no-recompute's exactly.
 */
#include <glib.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-chunk-cuda.h"
#include "pp-kernels.h"
#include "pp-kernels-cuda.h"
#include "gpu-test-util.h"
#include "pp-model.h"

#define NMB     2           /* micro-batches */
#define NPARTS  2
#define SEED    0x5eedc0deu
#define DATA_SEED 11

/* The model and its split.  Part 0: the input projection and block 0;
 * part 1: blocks 1 and 2 and the head.  in_dim != width, so a swapped
 * dimension cannot pass. */
typedef struct {
  const char *name;
  int width, hidden_mult, in_dim, classes, rows;
} Shape;

/* The shapes the runtime uses: everything a multiple of 8, cuBLASLt fuses
 * GELU into Linear1, every tensor 16-byte aligned. */
static const Shape shape_even = { "even", 64, 4, 40, 16, 32 };
/* Odd sizes: the hidden width 90 is no multiple of 8, so GELU runs as our
 * own kernel after the GEMM; a width of 30 puts most parameter tensors
 * (weights for cuBLASLt, biases for its epilogue, gamma and beta for the
 * LayerNorm kernels) only 8 or 4 bytes aligned; 24 rows. */
static const Shape shape_odd = { "odd", 30, 3, 20, 10, 24 };

#define LAYERS  3
static const int part_blocks[NPARTS] = { 1, 2 };
static const int part_first[NPARTS] = { 0, 1 };

/* the shape in use (use_shape) */
static int width, hidden, in_dim, classes, rows;
static PpModel *model;
static float *batch_x;        /* [NMB * rows, in_dim] */
static int32_t *batch_labels; /* [NMB * rows] */

static void
use_shape (const Shape *sh)
{
  static const Shape *current;
  if (sh == current)
    return;
  pp_model_free (model);
  g_free (batch_x);
  g_free (batch_labels);
  model = NULL;
  batch_x = NULL;
  batch_labels = NULL;
  current = sh;
  if (sh == NULL)
    return;
  width = sh->width;
  hidden = sh->hidden_mult * sh->width;
  in_dim = sh->in_dim;
  classes = sh->classes;
  rows = sh->rows;
  PpModelConfig cfg = { .layers = LAYERS, .width = width, .hidden_mult = sh->hidden_mult,
                        .in_dim = in_dim, .classes = classes, .seed = SEED };
  PpError err = { 0 };
  model = pp_model_new (&cfg, &err);
  if (model == NULL)
    g_error ("pp_model_new (%s shape): %s", sh->name, err.msg);
  batch_x = g_new (float, (size_t) NMB * rows * in_dim);
  batch_labels = g_new (int32_t, NMB * rows);
  pp_model_batch (model, DATA_SEED, 0, NMB * rows, batch_x, batch_labels);
}

/* ---- helpers ---- */





/* every element within rtol of the largest |want| (see the top of the file) */
static void
check_scaled (const char *what, const float *got, const float *want, size_t n, double rtol)
{
  double atol = rtol * max_abs (want, n);
  if (atol == 0.0)
    atol = 1e-30;
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    {
      double e = fabs ((double) got[i] - want[i]) / atol;
      if (!(e <= worst))
        {
          worst = isnan (e) ? INFINITY : e;
          at = i;
        }
    }
  g_test_message ("%s: worst error %.3g of the tolerance (rtol %.0e)", what, worst, rtol);
  if (!(worst <= 1.0))
    g_error ("%s: error %.3g times the tolerance (rtol %g of max|want| %g); "
             "element %zu: got %.9g, want %.9g",
             what, worst, rtol, max_abs (want, n), at, got[at], want[at]);
}

static void
assert_same_bits (const char *what, const float *a, const float *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (memcmp (&a[i], &b[i], sizeof (float)) != 0)
      g_error ("%s: differs at element %zu of %zu: %.9g vs %.9g", what, i, n, a[i], b[i]);
}

/* The parameter tensors of a part, in pp-model.c's layout. */
typedef struct {
  char   name[32];
  size_t off, len;
} Tensor;

static int
part_tensors (int part, Tensor *t)
{
  size_t D = width, H = hidden, off = 0;
  int n = 0;
#define ADD(len_, ...) \
  G_STMT_START { g_snprintf (t[n].name, sizeof t[n].name, __VA_ARGS__); \
    t[n].off = off; t[n].len = (len_); off += (len_); n++; } G_STMT_END
  if (part == 0)
    {
      ADD ((size_t) in_dim * D, "Win");
      ADD (D, "bin");
    }
  for (int k = 0; k < part_blocks[part]; k++)
    {
      int b = part_first[part] + k;
      ADD (D, "block %d gamma", b);
      ADD (D, "block %d beta", b);
      ADD (D * H, "block %d W1", b);
      ADD (H, "block %d b1", b);
      ADD (H * D, "block %d W2", b);
      ADD (D, "block %d b2", b);
    }
  if (part == NPARTS - 1)
    {
      ADD (D * classes, "Whead");
      ADD (classes, "bhead");
    }
#undef ADD
  return n;
}

static void
check_grads_per_tensor (const char *what, int part, const float *got, const float *want,
                        size_t n_params, double rtol)
{
  Tensor t[64];
  int n = part_tensors (part, t);
  g_assert_cmpuint (t[n - 1].off + t[n - 1].len, ==, n_params);
  for (int i = 0; i < n; i++)
    {
      char *w = g_strdup_printf ("%s part %d %s", what, part, t[i].name);
      check_scaled (w, got + t[i].off, want + t[i].off, t[i].len, rtol);
      g_free (w);
    }
}

/* ---- one training step's forward and backward, CPU and GPU ---- */

typedef struct {
  double loss[NMB];           /* sum over the micro-batch's rows */
  float *out[NMB];            /* part 0's output [rows, width] */
  float *dh[NMB];             /* part 1's input gradient [rows, width] */
  float *dx[NMB];             /* part 0's input gradient [rows, in_dim] */
  float *grads[NPARTS];
  size_t n_params[NPARTS];
  size_t act_after_forward[NPARTS];
} Result;

static void
result_clear (Result *r)
{
  for (int i = 0; i < NMB; i++)
    {
      g_free (r->out[i]);
      g_free (r->dh[i]);
      g_free (r->dx[i]);
    }
  for (int p = 0; p < NPARTS; p++)
    g_free (r->grads[p]);
  memset (r, 0, sizeof *r);
}

static float
loss_scale (void)
{
  return 1.0f / (NMB * rows);
}

static void
run_cpu (Result *res, int recompute)
{
  memset (res, 0, sizeof *res);
  PpChunk *c[NPARTS];
  for (int p = 0; p < NPARTS; p++)
    {
      PpError err = { 0 };
      c[p] = pp_chunk_new (model, p, NPARTS, part_first[p], part_blocks[p], rows, NMB,
                           recompute, &err);
      if (c[p] == NULL)
        g_error ("pp_chunk_new: %s", err.msg);
    }
  for (int mb = 0; mb < NMB; mb++)
    {
      res->out[mb] = g_new (float, rows * width);
      res->dh[mb] = g_new (float, rows * width);
      res->dx[mb] = g_new (float, rows * in_dim);
      CHECK_PP (pp_chunk_forward, c[0], mb, batch_x + (size_t) mb * rows * in_dim, NULL,
                res->out[mb], NULL);
      CHECK_PP (pp_chunk_forward, c[1], mb, res->out[mb], batch_labels + mb * rows, NULL,
                &res->loss[mb]);
    }
  for (int p = 0; p < NPARTS; p++)
    res->act_after_forward[p] = pp_chunk_activation_bytes (c[p]);
  for (int mb = 0; mb < NMB; mb++)
    {
      CHECK_PP (pp_chunk_backward, c[1], mb, NULL, res->dh[mb], loss_scale ());
      CHECK_PP (pp_chunk_backward, c[0], mb, res->dh[mb], res->dx[mb], loss_scale ());
    }
  for (int p = 0; p < NPARTS; p++)
    {
      res->n_params[p] = pp_chunk_n_params (c[p]);
      res->grads[p] = g_memdup2 (pp_chunk_grads (c[p]), res->n_params[p] * sizeof (float));
      pp_chunk_free (c[p]);
    }
}

static PpGpuChunk *
gpu_chunk (int part, int recompute)
{
  PpError err = { 0 };
  PpGpuChunk *c = pp_gpu_chunk_new (model, part, NPARTS, part_first[part], part_blocks[part],
                                    rows, NMB, recompute, PP_COMPUTE_FP32, lt, stream, &err);
  if (c == NULL)
    g_error ("pp_gpu_chunk_new: %s", err.msg);
  return c;
}

/* split: I of both micro-batches, then W of both (Zero Bubble's order),
 * instead of B, B */
static void
run_gpu (Result *res, int recompute, int split)
{
  memset (res, 0, sizeof *res);
  PpGpuChunk *c[NPARTS];
  for (int p = 0; p < NPARTS; p++)
    c[p] = gpu_chunk (p, recompute);
  g_assert_cmpint (pp_gpu_chunk_in_dim (c[0]), ==, in_dim);
  g_assert_cmpint (pp_gpu_chunk_out_dim (c[0]), ==, width);
  g_assert_cmpint (pp_gpu_chunk_in_dim (c[1]), ==, width);
  g_assert_cmpint (pp_gpu_chunk_out_dim (c[1]), ==, 0);

  float *d_x[NMB], *d_out[NMB], *d_loss[NMB], *d_dh[NMB], *d_dx[NMB];
  int32_t *d_lab[NMB];
  for (int mb = 0; mb < NMB; mb++)
    {
      d_x[mb] = upload (batch_x + (size_t) mb * rows * in_dim,
                        sizeof (float) * rows * in_dim);
      d_lab[mb] = upload (batch_labels + mb * rows, sizeof (int32_t) * rows);
      d_out[mb] = dev_alloc (sizeof (float) * rows * width);
      d_loss[mb] = dev_alloc (sizeof (float) * rows);
      d_dh[mb] = dev_alloc (sizeof (float) * rows * width);
      d_dx[mb] = dev_alloc (sizeof (float) * rows * in_dim);
    }

  for (int mb = 0; mb < NMB; mb++)
    {
      CHECK_PP (pp_gpu_chunk_forward, c[0], mb, d_x[mb], NULL, d_out[mb], NULL);
      CHECK_PP (pp_gpu_chunk_forward, c[1], mb, d_out[mb], d_lab[mb], NULL, d_loss[mb]);
    }
  for (int p = 0; p < NPARTS; p++)
    {
      res->act_after_forward[p] = pp_gpu_chunk_activation_bytes (c[p]);
      g_assert_cmpint (pp_gpu_chunk_inflight (c[p]), ==, NMB);
    }
  if (split)
    {
      for (int mb = 0; mb < NMB; mb++)
        {
          CHECK_PP (pp_gpu_chunk_backward_input, c[1], mb, NULL, d_dh[mb], loss_scale ());
          CHECK_PP (pp_gpu_chunk_backward_input, c[0], mb, d_dh[mb], d_dx[mb], loss_scale ());
        }
      for (int mb = 0; mb < NMB; mb++)
        {
          CHECK_PP (pp_gpu_chunk_backward_weight, c[1], mb);
          CHECK_PP (pp_gpu_chunk_backward_weight, c[0], mb);
        }
    }
  else
    for (int mb = 0; mb < NMB; mb++)
      {
        CHECK_PP (pp_gpu_chunk_backward, c[1], mb, NULL, d_dh[mb], loss_scale ());
        CHECK_PP (pp_gpu_chunk_backward, c[0], mb, d_dh[mb], d_dx[mb], loss_scale ());
      }
  for (int p = 0; p < NPARTS; p++)
    {
      g_assert_cmpint (pp_gpu_chunk_inflight (c[p]), ==, 0);
      g_assert_cmpuint (pp_gpu_chunk_activation_bytes (c[p]), ==, 0);
    }

  for (int mb = 0; mb < NMB; mb++)
    {
      float *losses = download_f (d_loss[mb], rows);
      for (int i = 0; i < rows; i++)
        res->loss[mb] += losses[i];
      g_free (losses);
      res->out[mb] = download_f (d_out[mb], rows * width);
      res->dh[mb] = download_f (d_dh[mb], rows * width);
      res->dx[mb] = download_f (d_dx[mb], rows * in_dim);
    }
  for (int p = 0; p < NPARTS; p++)
    {
      res->n_params[p] = pp_gpu_chunk_n_params (c[p]);
      res->grads[p] = g_new (float, res->n_params[p]);
      CHECK_PP (pp_gpu_chunk_copy_grads_to_host, c[p], res->grads[p]);
      pp_gpu_chunk_free (c[p]);
    }
  for (int mb = 0; mb < NMB; mb++)
    {
      cudaFree (d_x[mb]); cudaFree (d_lab[mb]); cudaFree (d_out[mb]);
      cudaFree (d_loss[mb]); cudaFree (d_dh[mb]); cudaFree (d_dx[mb]);
    }
}

static void
assert_results_identical (const char *what, const Result *a, const Result *b)
{
  char *w;
  for (int mb = 0; mb < NMB; mb++)
    {
      if (a->loss[mb] != b->loss[mb])
        g_error ("%s: loss of micro-batch %d: %.17g vs %.17g", what, mb, a->loss[mb],
                 b->loss[mb]);
      w = g_strdup_printf ("%s: part 0 output, micro-batch %d", what, mb);
      assert_same_bits (w, a->out[mb], b->out[mb], rows * width);
      g_free (w);
      w = g_strdup_printf ("%s: part 1 input gradient, micro-batch %d", what, mb);
      assert_same_bits (w, a->dh[mb], b->dh[mb], rows * width);
      g_free (w);
      w = g_strdup_printf ("%s: part 0 input gradient, micro-batch %d", what, mb);
      assert_same_bits (w, a->dx[mb], b->dx[mb], rows * in_dim);
      g_free (w);
    }
  for (int p = 0; p < NPARTS; p++)
    {
      g_assert_cmpuint (a->n_params[p], ==, b->n_params[p]);
      w = g_strdup_printf ("%s: gradients of part %d", what, p);
      assert_same_bits (w, a->grads[p], b->grads[p], a->n_params[p]);
      g_free (w);
    }
}

/* ---- tests ---- */

static void
test_params_match (gconstpointer shape)
{
  use_shape (shape);
  /* the GPU part starts from the CPU part's parameters, bit for bit */
  for (int p = 0; p < NPARTS; p++)
    {
      PpError err = { 0 };
      PpChunk *cpu = pp_chunk_new (model, p, NPARTS, part_first[p], part_blocks[p], rows, 1, 0,
                                   &err);
      g_assert_nonnull (cpu);
      PpGpuChunk *gpu = gpu_chunk (p, 0);
      size_t n = pp_chunk_n_params (cpu);
      g_assert_cmpuint (pp_gpu_chunk_n_params (gpu), ==, n);
      float *got = g_new (float, n);
      CHECK_PP (pp_gpu_chunk_copy_params_to_host, gpu, got);
      assert_same_bits ("initial parameters", got, pp_chunk_params (cpu), n);
      /* gradients start at zero */
      CHECK_PP (pp_gpu_chunk_copy_grads_to_host, gpu, got);
      g_assert_cmpfloat (max_abs (got, n), ==, 0.0);
      int dev = -1;
      CHECK_CUDA (cudaGetDevice (&dev));
      g_assert_cmpint (pp_gpu_chunk_device (gpu), ==, dev);
      g_free (got);
      pp_gpu_chunk_free (gpu);
      pp_chunk_free (cpu);
    }
}

static void
test_cpu_match (gconstpointer shape)
{
  use_shape (shape);
  Result cpu, gpu;
  run_cpu (&cpu, 0);
  run_gpu (&gpu, 0, 0);
  for (int mb = 0; mb < NMB; mb++)
    {
      g_test_message ("micro-batch %d loss: gpu %.9g cpu %.9g", mb, gpu.loss[mb], cpu.loss[mb]);
      if (!(fabs (gpu.loss[mb] - cpu.loss[mb]) <= 1e-5 * fabs (cpu.loss[mb])))
        g_error ("micro-batch %d loss: gpu %.9g, cpu %.9g", mb, gpu.loss[mb], cpu.loss[mb]);
      char *w = g_strdup_printf ("part 0 output, micro-batch %d", mb);
      check_scaled (w, gpu.out[mb], cpu.out[mb], rows * width, 1e-4);
      g_free (w);
      w = g_strdup_printf ("part 1 input gradient, micro-batch %d", mb);
      check_scaled (w, gpu.dh[mb], cpu.dh[mb], rows * width, 1e-4);
      g_free (w);
      w = g_strdup_printf ("part 0 input gradient, micro-batch %d", mb);
      check_scaled (w, gpu.dx[mb], cpu.dx[mb], rows * in_dim, 1e-4);
      g_free (w);
    }
  for (int p = 0; p < NPARTS; p++)
    {
      g_assert_cmpuint (gpu.n_params[p], ==, cpu.n_params[p]);
      check_grads_per_tensor ("gradient", p, gpu.grads[p], cpu.grads[p], cpu.n_params[p], 1e-3);
      /* activations are counted the same way */
      g_assert_cmpuint (gpu.act_after_forward[p], ==, cpu.act_after_forward[p]);
      g_assert_cmpuint (gpu.act_after_forward[p], >, 0);
    }
  result_clear (&cpu);
  result_clear (&gpu);
}

/* AdamW on the same gradients (the CPU's, given to both): computed grads
 * differ by rounding, and Adam's first step moves each parameter by ~lr
 * times the sign of its gradient, so a gradient near zero could flip a
 * step; with equal gradients only the kernels' rounding is left (an ulp or
 * two: CUDA contracts into FMAs).  Two steps, so the second uses the moments
 * the first stored.  Parameters to 1e-6 of max|p|, the updates themselves to
 * 1e-3 of the largest update (as test-gpu-kernels' AdamW test argues). */
static void
test_adamw (gconstpointer shape)
{
  use_shape (shape);
  Result cpu;
  run_cpu (&cpu, 0);
  for (int p = 0; p < NPARTS; p++)
    {
      PpError err = { 0 };
      PpChunk *cc = pp_chunk_new (model, p, NPARTS, part_first[p], part_blocks[p], rows, 1, 0,
                                  &err);
      g_assert_nonnull (cc);
      PpGpuChunk *gc = gpu_chunk (p, 0);
      size_t n = cpu.n_params[p];
      float *p0 = g_memdup2 (pp_chunk_params (cc), n * sizeof (float));
      pp_chunk_set_grads (cc, cpu.grads[p]);
      CHECK_CUDA (cudaMemcpyAsync (pp_gpu_chunk_grads_device (gc), cpu.grads[p],
                                   n * sizeof (float), cudaMemcpyHostToDevice, stream));
      for (int t = 1; t <= 2; t++)
        {
          pp_chunk_adamw (cc, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
          CHECK_PP (pp_gpu_chunk_adamw, gc, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        }
      float *got = g_new (float, n);
      CHECK_PP (pp_gpu_chunk_copy_params_to_host, gc, got);
      const float *want = pp_chunk_params (cc);
      char *w = g_strdup_printf ("part %d parameters after 2 AdamW steps", p);
      check_scaled (w, got, want, n, 1e-6);
      g_free (w);
      float *want_dp = g_new (float, n), *got_dp = g_new (float, n);
      for (size_t i = 0; i < n; i++)
        {
          want_dp[i] = want[i] - p0[i];
          got_dp[i] = got[i] - p0[i];
        }
      w = g_strdup_printf ("part %d AdamW updates", p);
      check_scaled (w, got_dp, want_dp, n, 1e-3);
      g_free (w);
      /* the device pointer is the parameters pp_gpu_chunk_copy_params_to_host reads */
      float *via_ptr = download_f (pp_gpu_chunk_params_device (gc), n);
      assert_same_bits ("pp_gpu_chunk_params_device", via_ptr, got, n);
      g_free (via_ptr);
      g_free (want_dp);
      g_free (got_dp);
      g_free (got);
      g_free (p0);
      pp_gpu_chunk_free (gc);
      pp_chunk_free (cc);
    }
  result_clear (&cpu);
}

static void
test_split (gconstpointer shape)
{
  use_shape (shape);
  Result b, iw;
  run_gpu (&b, 0, 0);
  run_gpu (&iw, 0, 1);
  assert_results_identical ("I then W against B", &iw, &b);
  result_clear (&b);
  result_clear (&iw);
}

static void
test_recompute (gconstpointer shape)
{
  use_shape (shape);
  Result plain, rc, rc_split, cpu_rc;
  run_gpu (&plain, 0, 0);
  run_gpu (&rc, 1, 0);
  run_gpu (&rc_split, 1, 1);
  run_cpu (&cpu_rc, 1);
  assert_results_identical ("recompute against none", &rc, &plain);
  assert_results_identical ("recompute, I then W, against none", &rc_split, &plain);
  for (int p = 0; p < NPARTS; p++)
    {
      /* recompute holds only the labels after the forward, as the CPU part */
      g_assert_cmpuint (rc.act_after_forward[p], ==, cpu_rc.act_after_forward[p]);
      g_assert_cmpuint (rc.act_after_forward[p], <, plain.act_after_forward[p]);
    }
  result_clear (&plain);
  result_clear (&rc);
  result_clear (&rc_split);
  result_clear (&cpu_rc);
}

/* DualPipe's two copies of a part: dst += src, then dst = src, then zero. */
static void
test_add_copy_grads (void)
{
  use_shape (&shape_even);
  PpGpuChunk *a = gpu_chunk (1, 0), *b = gpu_chunk (1, 0);
  size_t n = pp_gpu_chunk_n_params (a);
  GRand *r = g_rand_new_with_seed (SEED);
  float *ga = g_new (float, n), *gb = g_new (float, n), *want = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    {
      ga[i] = (float) g_rand_double_range (r, -1, 1);
      gb[i] = (float) g_rand_double_range (r, -1, 1);
      want[i] = ga[i] + gb[i];
    }
  CHECK_CUDA (cudaMemcpyAsync (pp_gpu_chunk_grads_device (a), ga, n * sizeof (float),
                               cudaMemcpyHostToDevice, stream));
  CHECK_CUDA (cudaMemcpyAsync (pp_gpu_chunk_grads_device (b), gb, n * sizeof (float),
                               cudaMemcpyHostToDevice, stream));
  CHECK_CUDA (cudaStreamSynchronize (stream));

  float *got = g_new (float, n);
  CHECK_PP (pp_gpu_chunk_add_grads, a, b);
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, a, got);
  assert_same_bits ("add_grads", got, want, n);
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, b, got);
  assert_same_bits ("add_grads leaves src alone", got, gb, n);
  CHECK_PP (pp_gpu_chunk_add_grads, a, b);       /* the scratch is reused */
  for (size_t i = 0; i < n; i++)
    want[i] += gb[i];
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, a, got);
  assert_same_bits ("add_grads twice", got, want, n);

  CHECK_PP (pp_gpu_chunk_copy_grads, b, a);
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, b, got);
  assert_same_bits ("copy_grads", got, want, n);

  CHECK_PP (pp_gpu_chunk_zero_grads, b);
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, b, got);
  g_assert_cmpfloat (max_abs (got, n), ==, 0.0);

  /* parts of different sizes */
  PpGpuChunk *other = gpu_chunk (0, 0);
  PpError e = { 0 };
  g_assert_cmpint (pp_gpu_chunk_add_grads (a, other, &e), ==, PP_EINVAL);
  g_assert_cmpstr (e.msg, !=, "");
  g_assert_cmpint (pp_gpu_chunk_copy_grads (other, a, &e), ==, PP_EINVAL);

  pp_gpu_chunk_free (other);
  pp_gpu_chunk_free (a);
  pp_gpu_chunk_free (b);
  g_free (ga); g_free (gb); g_free (want); g_free (got);
  g_rand_free (r);
}

static void
expect_einval (const char *what, PpStatus st, const PpError *e)
{
  g_test_message ("%s: %s", what, e->msg);
  if (st != PP_EINVAL)
    g_error ("%s: got %s, want EINVAL", what, pp_status_name (st));
  g_assert_cmpstr (e->msg, !=, "");
  g_assert_null (strchr (e->msg, '\n'));
}

static void
test_errors (void)
{
  use_shape (&shape_even);
  PpError e = { 0 };
  /* creation: the CPU part's argument checks, and our own */
  g_assert_null (pp_gpu_chunk_new (model, 2, NPARTS, 1, 2, rows, 1, 0, PP_COMPUTE_FP32, lt,
                                   stream, &e));
  expect_einval ("part out of range", e.status, &e);
  memset (&e, 0, sizeof e);
  g_assert_null (pp_gpu_chunk_new (model, 1, NPARTS, 1, 2, rows, 1, 0, PP_COMPUTE_FP32, NULL,
                                   stream, &e));
  expect_einval ("no cuBLASLt context", e.status, &e);

  PpGpuChunk *c0 = gpu_chunk (0, 0), *c1 = gpu_chunk (1, 0);
  float *d_x = dev_alloc (sizeof (float) * rows * in_dim);
  float *d_h = dev_alloc (sizeof (float) * rows * width);
  float *d_h2 = dev_alloc (sizeof (float) * rows * width);
  float *d_h3 = dev_alloc (sizeof (float) * rows * width);
  int32_t *d_lab = upload (batch_labels, sizeof (int32_t) * rows);
  CHECK_CUDA (cudaMemsetAsync (d_x, 0, sizeof (float) * rows * in_dim, stream));

  memset (&e, 0, sizeof e);
  expect_einval ("forward without an output",
                 pp_gpu_chunk_forward (c0, 0, d_x, NULL, NULL, NULL, &e), &e);
  expect_einval ("forward without an input",
                 pp_gpu_chunk_forward (c0, 0, NULL, NULL, d_h, NULL, &e), &e);
  expect_einval ("forward of micro-batch -1",
                 pp_gpu_chunk_forward (c0, -1, d_x, NULL, d_h, NULL, &e), &e);
  expect_einval ("last part's forward without labels",
                 pp_gpu_chunk_forward (c1, 0, d_h, NULL, NULL, NULL, &e), &e);

  CHECK_PP (pp_gpu_chunk_forward, c0, 0, d_x, NULL, d_h, NULL);
  expect_einval ("forward of a micro-batch in flight",
                 pp_gpu_chunk_forward (c0, 0, d_x, NULL, d_h2, NULL, &e), &e);
  CHECK_PP (pp_gpu_chunk_forward, c0, 1, d_x, NULL, d_h2, NULL);
  expect_einval ("more than max_inflight",
                 pp_gpu_chunk_forward (c0, 2, d_x, NULL, d_h3, NULL, &e), &e);
  expect_einval ("backward of a micro-batch not in flight",
                 pp_gpu_chunk_backward_input (c0, 5, d_h, NULL, 1.0f, &e), &e);
  expect_einval ("W before I", pp_gpu_chunk_backward_weight (c0, 0, &e), &e);
  expect_einval ("backward without an output gradient",
                 pp_gpu_chunk_backward_input (c0, 0, NULL, NULL, 1.0f, &e), &e);
  /* the last part: no output gradient needed, losses may go nowhere */
  CHECK_PP (pp_gpu_chunk_forward, c1, 0, d_h, d_lab, NULL, NULL);
  CHECK_PP (pp_gpu_chunk_backward_input, c1, 0, NULL, d_h3, 1.0f);
  expect_einval ("I twice", pp_gpu_chunk_backward_input (c1, 0, NULL, d_h3, 1.0f, &e), &e);
  CHECK_PP (pp_gpu_chunk_backward_weight, c1, 0);
  expect_einval ("W twice", pp_gpu_chunk_backward_weight (c1, 0, &e), &e);
  /* part 0 without din */
  CHECK_PP (pp_gpu_chunk_backward, c0, 0, d_h3, NULL, 1.0f);
  CHECK_PP (pp_gpu_chunk_backward, c0, 1, d_h3, NULL, 1.0f);
  g_assert_cmpint (pp_gpu_chunk_inflight (c0), ==, 0);
  g_assert_cmpint (pp_gpu_chunk_inflight (c1), ==, 0);
  /* AdamW's step count */
  expect_einval ("AdamW step 0",
                 pp_gpu_chunk_adamw (c0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0, &e), &e);
  /* nothing failed on the device meanwhile */
  float *g = g_new (float, pp_gpu_chunk_n_params (c0));
  CHECK_PP (pp_gpu_chunk_copy_grads_to_host, c0, g);
  g_free (g);

  pp_gpu_chunk_free (c0);
  pp_gpu_chunk_free (c1);
  pp_gpu_chunk_free (NULL);
  cudaFree (d_x); cudaFree (d_h); cudaFree (d_h2); cudaFree (d_h3); cudaFree (d_lab);
}

/* ---- main ---- */

int
main (int argc, char **argv)
{
  gpu_test_init (&argc, &argv, "test-gpu-chunk");

  const Shape *shapes[] = { &shape_even, &shape_odd };
  for (size_t i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      const char *n = shapes[i]->name;
      char *path;
#define ADD_SHAPE_TEST(name, fn) \
      path = g_strdup_printf ("/gpu/chunk/%s/%s", n, name); \
      g_test_add_data_func (path, shapes[i], fn); \
      g_free (path)
      ADD_SHAPE_TEST ("params", test_params_match);
      ADD_SHAPE_TEST ("cpu-match", test_cpu_match);
      ADD_SHAPE_TEST ("adamw", test_adamw);
      ADD_SHAPE_TEST ("split", test_split);
      ADD_SHAPE_TEST ("recompute", test_recompute);
#undef ADD_SHAPE_TEST
    }
  g_test_add_func ("/gpu/chunk/add-copy-grads", test_add_copy_grads);
  g_test_add_func ("/gpu/chunk/errors", test_errors);

  int rc = g_test_run ();
  gpu_test_finish ();
  use_shape (NULL);
  return rc;
}
