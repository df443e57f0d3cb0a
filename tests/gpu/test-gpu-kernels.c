/* The GPU kernels (pp-kernels-cuda.h) against the CPU kernels (pp-kernels.h)
 * on the same random data, and run twice to show they repeat bit for bit.
 *
 * Without a GPU or a driver the program says why and exits 77 (meson: SKIP);
 * with --tap it prints a TAP plan of 0 with the reason and exits 0 instead.
 *
 * How close is close enough: an fp32 kernel's rounding error scales with the
 * size of the terms it adds, not with the result (which may cancel to nearly
 * zero), so most checks use atol = rtol * max|want|: every element must be
 * within rtol of the largest element of the output.  Element-wise outputs that
 * span many magnitudes (softmax probabilities, AdamW states) are checked
 * element by element instead.
 */
#include <glib.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-kernels.h"
#include "pp-kernels-cuda.h"
#include "gpu-test-util.h"

#define SEED 0x6b75da7au


/* ---- helpers ---- */


static float *
rand_floats (GRand *r, size_t n, double lo, double hi)
{
  float *v = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (r, lo, hi);
  return v;
}


static float *
upload_f (const float *host, size_t n)
{
  return upload (host, n * sizeof (float));
}


static void
copy_to_dev (float *dev, const float *host, size_t n)
{
  CHECK_CUDA (cudaMemcpyAsync (dev, host, n * sizeof (float), cudaMemcpyHostToDevice, stream));
  CHECK_CUDA (cudaStreamSynchronize (stream));
}

static float *
dup_f (const float *v, size_t n)
{
  return g_memdup2 (v, n * sizeof (float));
}


/* max_i |got - want| / (atol + rtol |want|); NaN counts as infinitely bad */
static double
excess (const float *got, const float *want, size_t n, double rtol, double atol)
{
  double worst = 0.0;
  for (size_t i = 0; i < n; i++)
    {
      double e = fabs ((double) got[i] - want[i]) / (atol + rtol * fabs ((double) want[i]));
      if (!(e <= worst))
        worst = isnan (e) ? INFINITY : e;
    }
  return worst;
}

/* every element within rtol of the largest one (see the top of the file) */
static void
check_scaled (const char *what, const float *got, const float *want, size_t n, double rtol)
{
  double atol = rtol * max_abs (want, n);
  if (atol == 0.0)
    atol = 1e-30;
  double e = excess (got, want, n, rtol, atol);
  g_test_message ("%s: worst error %.3g of the tolerance (rtol %.0e)", what, e, rtol);
  if (!(e <= 1.0))
    g_error ("%s: error %.3g times the tolerance (rtol %g of max|want| %g)",
             what, e, rtol, max_abs (want, n));
}

/* element by element: |got - want| <= rtol |want| + atol */
static void
check_elementwise (const char *what, const float *got, const float *want, size_t n,
                   double rtol, double atol)
{
  double e = excess (got, want, n, rtol, atol);
  g_test_message ("%s: worst error %.3g of the tolerance (rtol %.0e)", what, e, rtol);
  if (!(e <= 1.0))
    g_error ("%s: error %.3g times the tolerance (rtol %g, atol %g)", what, e, rtol, atol);
}

/* ---- GEMM ---- */

static const char *compute_names[] = { "fp32", "tf32", "bf16" };

/* Tolerances per compute mode, relative to max|C| (inputs uniform in [-1,1]):
 *  - FP32: true fp32 FMAs; both sides round k products and sums at 2^-24,
 *    a different order gives ~sqrt(k) 2^-24 relative to max|C|: ~1e-6.
 *    1e-5 also proves cuBLASLt did not quietly use TF32 (that errs ~1e-4).
 *  - TF32: inputs keep 10 mantissa bits (unit roundoff 2^-11 ~ 4.9e-4, 2^-10
 *    if truncated); the product errors have random signs and add like a
 *    random walk, ~sqrt(k) * 1e-3 * E|ab| against max|C| ~ sqrt(k): ~3e-4.
 *    2e-3 leaves a margin of about 6.
 *  - BF16: 8 significant bits (unit roundoff 2^-9 ~ 2e-3); even the
 *    worst-case bound k * 2 * 2^-9 * E|ab| / max|C| ~ 8e-3 at k = 72 is
 *    under 2e-2. */
static const double compute_rtol[] = { 1e-5, 2e-3, 2e-2 };

static void
gemm_case (GRand *r, PpCompute compute, int ta, int tb, int m, int n, int k,
           float alpha, float beta, int misalign)
{
  size_t na = (size_t) m * k, nb = (size_t) k * n, nc = (size_t) m * n;
  float *A = rand_floats (r, na, -1, 1);
  float *B = rand_floats (r, nb, -1, 1);
  float *C = rand_floats (r, nc, -1, 1);
  float *want = dup_f (C, nc);
  pp_gemm (ta, tb, m, n, k, alpha, A, B, beta, want);

  /* misalign: every matrix 4 bytes past a 256-byte boundary, so cuBLASLt
   * must pick a kernel that does not assume 16-byte alignment */
  int off = misalign ? 1 : 0;
  float *dA = dev_alloc ((na + off) * sizeof (float));
  float *dB = dev_alloc ((nb + off) * sizeof (float));
  float *dC = dev_alloc ((nc + off) * sizeof (float));
  copy_to_dev (dA + off, A, na);
  copy_to_dev (dB + off, B, nb);
  copy_to_dev (dC + off, C, nc);

  CHECK_PP (pp_cublaslt_gemm, lt, stream, ta, tb, m, n, k, alpha, dA + off, dB + off,
            beta, dC + off, compute, PP_EPI_NONE, NULL, NULL);
  float *got = download_f (dC + off, nc);
  char *what = g_strdup_printf ("gemm %s %c%c %dx%dx%d%s", compute_names[compute],
                                ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                                misalign ? " misaligned" : "");
  check_scaled (what, got, want, nc, compute_rtol[compute]);

  g_free (what);
  g_free (got);
  cudaFree (dA);
  cudaFree (dB);
  cudaFree (dC);
  g_free (A);
  g_free (B);
  g_free (C);
  g_free (want);
}

static void
test_gemm_transposes (void)
{
  GRand *r = g_rand_new_with_seed (SEED);
  for (int c = PP_COMPUTE_FP32; c <= PP_COMPUTE_BF16; c++)
    for (int ta = 0; ta <= 1; ta++)
      for (int tb = 0; tb <= 1; tb++)
        {
          /* m, n, k all different: a swapped operand or transpose cannot pass */
          gemm_case (r, (PpCompute) c, ta, tb, 96, 80, 72, 1.0f, 0.0f, 0);
          gemm_case (r, (PpCompute) c, ta, tb, 33, 17, 29, 0.75f, 0.5f, 0);
          gemm_case (r, (PpCompute) c, ta, tb, 33, 17, 29, 1.0f, 1.0f, 1);
        }
  g_rand_free (r);
}

/* Round to bfloat16 as __float2bfloat16_rn does (nearest, ties to even). */
static float
round_bf16 (float f)
{
  uint32_t u;
  memcpy (&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy (&f, &u, sizeof f);
  return f;
}

/* BF16 compute rounds both operands to bf16 and sums the (exact) products in
 * fp32: the result matches the fp32 product of the rounded operands to fp32
 * accumulation error, and is measurably off the product of the unrounded
 * ones (2^-9 relative per operand: far above the 1e-5 the first check
 * allows) — so a mode that quietly ran TF32 or fp32 fails here. */
static void
test_gemm_bf16_rounds (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 7);
  int m = 96, n = 80, k = 72;
  float *A = rand_floats (r, (size_t) m * k, -1, 1);
  float *B = rand_floats (r, (size_t) k * n, -1, 1);
  float *Ar = dup_f (A, (size_t) m * k), *Br = dup_f (B, (size_t) k * n);
  for (size_t i = 0; i < (size_t) m * k; i++)
    Ar[i] = round_bf16 (Ar[i]);
  for (size_t i = 0; i < (size_t) k * n; i++)
    Br[i] = round_bf16 (Br[i]);
  float *want = g_new0 (float, (size_t) m * n), *exact = g_new0 (float, (size_t) m * n);
  pp_gemm (0, 0, m, n, k, 1.0f, Ar, Br, 0.0f, want);
  pp_gemm (0, 0, m, n, k, 1.0f, A, B, 0.0f, exact);

  float *dA = upload_f (A, (size_t) m * k), *dB = upload_f (B, (size_t) k * n);
  float *dC = dev_alloc ((size_t) m * n * sizeof (float));
  CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, m, n, k, 1.0f, dA, dB, 0.0f, dC,
            PP_COMPUTE_BF16, PP_EPI_NONE, NULL, NULL);
  float *got = download_f (dC, (size_t) m * n);
  check_scaled ("gemm bf16 against the rounded operands", got, want, (size_t) m * n, 1e-5);
  double off = excess (got, exact, (size_t) m * n, 1e-5, 1e-5 * max_abs (exact, (size_t) m * n));
  g_test_message ("gemm bf16 against the unrounded operands: %.3g times an fp32 tolerance", off);
  if (!(off > 5.0))
    g_error ("gemm bf16: the result is within %.3g fp32 tolerances of the unrounded product: "
             "the operands were not rounded to bf16", off);

  g_free (got);
  cudaFree (dA); cudaFree (dB); cudaFree (dC);
  g_free (A); g_free (B); g_free (Ar); g_free (Br); g_free (want); g_free (exact);
  g_rand_free (r);
}

static void
test_gemm_empty (void)
{
  /* k == 0: C = epi(beta C); m == 0 or n == 0: nothing at all */
  GRand *r = g_rand_new_with_seed (SEED + 1);
  int m = 5, n = 12;
  float *C = rand_floats (r, (size_t) m * n, -1, 1);
  float *bias = rand_floats (r, n, -1, 1);
  float *want = g_new (float, (size_t) m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      want[i * n + j] = 0.5f * C[i * n + j] + bias[j];
  float *dC = upload_f (C, (size_t) m * n), *dbias = upload_f (bias, n);

  CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, m, n, 0, 1.0f, NULL, NULL, 0.5f, dC,
            PP_COMPUTE_FP32, PP_EPI_BIAS, dbias, NULL);
  float *got = download_f (dC, (size_t) m * n);
  check_scaled ("gemm k = 0 with bias", got, want, (size_t) m * n, 1e-6);
  CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, 0, n, 4, 1.0f, NULL, NULL, 0.0f, NULL,
            PP_COMPUTE_FP32, PP_EPI_NONE, NULL, NULL);

  /* argument errors come back as a status and a message, not a crash */
  PpError e = { 0 };
  g_assert_cmpint (pp_cublaslt_gemm (lt, stream, 0, 0, m, n, 4, 1.0f, dC, dC, 0.0f, dC,
                                     PP_COMPUTE_FP32, PP_EPI_BIAS, NULL, NULL, &e),
                   ==, PP_EINVAL);
  g_assert_cmpstr (e.msg, !=, "");
  g_assert_cmpint (pp_cublaslt_gemm (lt, stream, 0, 0, -1, n, 4, 1.0f, dC, dC, 0.0f, dC,
                                     PP_COMPUTE_FP32, PP_EPI_NONE, NULL, NULL, &e),
                   ==, PP_EINVAL);

  g_free (got);
  cudaFree (dC);
  cudaFree (dbias);
  g_free (C);
  g_free (bias);
  g_free (want);
  g_rand_free (r);
}

/* ---- epilogues ---- */

static void
test_gemm_bias (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 2);
  int m = 64, n = 48, k = 40;
  float beta = 0.5f;
  float *A = rand_floats (r, (size_t) m * k, -1, 1);
  float *B = rand_floats (r, (size_t) k * n, -1, 1);
  float *C = rand_floats (r, (size_t) m * n, -1, 1);
  float *bias = rand_floats (r, n, -1, 1);
  /* cuBLASLt: D = alpha A B + beta C + bias, all in one rounding chain */
  float *want = dup_f (C, (size_t) m * n);
  pp_gemm (0, 0, m, n, k, 1.0f, A, B, beta, want);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      want[i * n + j] += bias[j];

  float *dA = upload_f (A, (size_t) m * k), *dB = upload_f (B, (size_t) k * n);
  float *dC = upload_f (C, (size_t) m * n), *dbias = upload_f (bias, n);
  CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, m, n, k, 1.0f, dA, dB, beta, dC,
            PP_COMPUTE_FP32, PP_EPI_BIAS, dbias, NULL);
  float *got = download_f (dC, (size_t) m * n);
  check_scaled ("gemm + bias (beta 0.5)", got, want, (size_t) m * n, 1e-5);

  g_free (got);
  cudaFree (dA); cudaFree (dB); cudaFree (dC); cudaFree (dbias);
  g_free (A); g_free (B); g_free (C); g_free (bias); g_free (want);
  g_rand_free (r);
}

/* A kept plan serves the calls of its shape with their own pointers: the
 * same GEMM with two biases and two outputs gives each its own result, and
 * only the first call asks cuBLASLt's heuristic. */
static void
test_gemm_plans (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 12);
  int m = 77, n = 56, k = 40;       /* a shape no other test uses */
  float *A = rand_floats (r, (size_t) m * k, -1, 1);
  float *B = rand_floats (r, (size_t) k * n, -1, 1);
  float *bias1 = rand_floats (r, n, -1, 1), *bias2 = rand_floats (r, n, 5, 6);
  float *want1 = g_new (float, (size_t) m * n), *want2 = g_new (float, (size_t) m * n);
  pp_linear_forward (A, B, bias1, want1, m, k, n);
  pp_linear_forward (A, B, bias2, want2, m, k, n);

  float *dA = upload_f (A, (size_t) m * k), *dB = upload_f (B, (size_t) k * n);
  float *db1 = upload_f (bias1, n), *db2 = upload_f (bias2, n);
  float *dC1 = dev_alloc ((size_t) m * n * sizeof (float));
  float *dC2 = dev_alloc ((size_t) m * n * sizeof (float));
  uint64_t h0, m0, h1, m1;
  pp_cublaslt_plan_stats (lt, &h0, &m0);
  for (int i = 0; i < 5; i++)
    {
      CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, m, n, k, 1.0f, dA, dB, 0.0f, dC1,
                PP_COMPUTE_FP32, PP_EPI_BIAS, db1, NULL);
      CHECK_PP (pp_cublaslt_gemm, lt, stream, 0, 0, m, n, k, 1.0f, dA, dB, 0.0f, dC2,
                PP_COMPUTE_FP32, PP_EPI_BIAS, db2, NULL);
    }
  pp_cublaslt_plan_stats (lt, &h1, &m1);
  g_test_message ("plans: %" G_GUINT64_FORMAT " hits, %" G_GUINT64_FORMAT " made for 10 calls",
                  h1 - h0, m1 - m0);
  g_assert_cmpuint (m1 - m0, ==, 1);     /* cudaMalloc aligns both outputs alike */
  g_assert_cmpuint (h1 - h0, ==, 9);
  float *got1 = download_f (dC1, (size_t) m * n), *got2 = download_f (dC2, (size_t) m * n);
  check_scaled ("kept plan, first bias", got1, want1, (size_t) m * n, 1e-5);
  check_scaled ("kept plan, second bias", got2, want2, (size_t) m * n, 1e-5);

  g_free (got1); g_free (got2);
  cudaFree (dA); cudaFree (dB); cudaFree (db1); cudaFree (db2); cudaFree (dC1); cudaFree (dC2);
  g_free (A); g_free (B); g_free (bias1); g_free (bias2); g_free (want1); g_free (want2);
  g_rand_free (r);
}

/* n a multiple of 8: cuBLASLt fuses GELU and writes the pre-activation to aux.
 * n = 30: it cannot (aux ld), so the bias GEMM writes aux and our GELU kernel
 * follows.  The pre-activation must match to fp32 rounding either way.  The
 * fused GELU is cuBLASLt's own (undocumented rounding, possibly a hardware
 * tanh approximation with ~2^-11 relative error): 1e-3 of max|y| for it;
 * our kernel uses tanhf and must match the CPU to 1e-5.  The worst errors
 * are printed (g_test_message) for whoever reads the log on the GPU machine. */
static void
gelu_epilogue_case (GRand *r, int m, int n, int k, int with_bias, double gelu_rtol)
{
  float *A = rand_floats (r, (size_t) m * k, -1, 1);
  float *B = rand_floats (r, (size_t) k * n, -1, 1);
  float *bias = with_bias ? rand_floats (r, n, -1, 1) : NULL;
  float *pre = g_new (float, (size_t) m * n);
  float *want = g_new (float, (size_t) m * n);
  pp_linear_forward (A, B, bias, pre, m, k, n);
  pp_gelu_forward (pre, want, (size_t) m * n);

  float *dA = upload_f (A, (size_t) m * k), *dB = upload_f (B, (size_t) k * n);
  float *dbias = bias ? upload_f (bias, n) : NULL;
  float *dY = dev_alloc ((size_t) m * n * sizeof (float));
  float *dpre = dev_alloc ((size_t) m * n * sizeof (float));
  CHECK_PP (pp_cuda_linear_gelu_forward, lt, stream, dA, dB, dbias, dpre, dY, m, k, n,
            PP_COMPUTE_FP32);
  float *got_pre = download_f (dpre, (size_t) m * n);
  float *got = download_f (dY, (size_t) m * n);
  char *what = g_strdup_printf ("linear+gelu %dx%dx%d%s", m, n, k, bias ? " + bias" : "");
  char *what_pre = g_strconcat (what, " (pre-activation)", NULL);
  check_scaled (what_pre, got_pre, pre, (size_t) m * n, 1e-5);
  check_scaled (what, got, want, (size_t) m * n, gelu_rtol);

  g_free (what); g_free (what_pre);
  g_free (got); g_free (got_pre);
  cudaFree (dA); cudaFree (dB); cudaFree (dbias); cudaFree (dY); cudaFree (dpre);
  g_free (A); g_free (B); g_free (bias); g_free (pre); g_free (want);
}

static void
test_gemm_gelu (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 3);
  gelu_epilogue_case (r, 64, 96, 48, 1, 1e-3);   /* fused by cuBLASLt */
  gelu_epilogue_case (r, 64, 96, 48, 0, 1e-3);   /* fused, no bias */
  gelu_epilogue_case (r, 37, 30, 20, 1, 1e-5);   /* our GELU kernel */
  g_rand_free (r);
}

/* ---- linear layers ---- */

static void
test_linear (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 4);
  int n = 48, in = 40, out = 56;
  float *x = rand_floats (r, (size_t) n * in, -1, 1);
  float *W = rand_floats (r, (size_t) in * out, -1, 1);
  float *b = rand_floats (r, out, -1, 1);
  float *dy = rand_floats (r, (size_t) n * out, -1, 1);
  float *dW = rand_floats (r, (size_t) in * out, -1, 1);  /* accumulated into */
  float *db = rand_floats (r, out, -1, 1);

  float *y = g_new (float, (size_t) n * out), *dx = g_new (float, (size_t) n * in);
  float *want_dW = dup_f (dW, (size_t) in * out), *want_db = dup_f (db, out);
  pp_linear_forward (x, W, b, y, n, in, out);
  pp_linear_backward_input (dy, W, dx, n, in, out);
  pp_linear_backward_weight (x, dy, want_dW, want_db, n, in, out);

  float *d_x = upload_f (x, (size_t) n * in), *d_W = upload_f (W, (size_t) in * out);
  float *d_b = upload_f (b, out), *d_dy = upload_f (dy, (size_t) n * out);
  float *d_dW = upload_f (dW, (size_t) in * out), *d_db = upload_f (db, out);
  float *d_y = dev_alloc ((size_t) n * out * sizeof (float));
  float *d_dx = dev_alloc ((size_t) n * in * sizeof (float));

  CHECK_PP (pp_cuda_linear_forward, lt, stream, d_x, d_W, d_b, d_y, n, in, out,
            PP_COMPUTE_FP32);
  CHECK_PP (pp_cuda_linear_backward_input, lt, stream, d_dy, d_W, d_dx, n, in, out,
            PP_COMPUTE_FP32);
  CHECK_PP (pp_cuda_linear_backward_weight, lt, stream, d_x, d_dy, d_dW, d_db, n, in, out,
            PP_COMPUTE_FP32);
  float *got_y = download_f (d_y, (size_t) n * out);
  float *got_dx = download_f (d_dx, (size_t) n * in);
  float *got_dW = download_f (d_dW, (size_t) in * out);
  float *got_db = download_f (d_db, out);
  check_scaled ("linear forward", got_y, y, (size_t) n * out, 1e-5);
  check_scaled ("linear backward input", got_dx, dx, (size_t) n * in, 1e-5);
  check_scaled ("linear backward dW (+=)", got_dW, want_dW, (size_t) in * out, 1e-5);
  check_scaled ("linear backward db (+=)", got_db, want_db, out, 1e-5);

  /* the residual block's second layer: + residual in the same call, the
   * residual untouched */
  float *res = rand_floats (r, (size_t) n * out, -1, 1);
  float *want_r = g_new (float, (size_t) n * out);
  for (size_t i = 0; i < (size_t) n * out; i++)
    want_r[i] = y[i] + res[i];
  float *d_res = upload_f (res, (size_t) n * out);
  CHECK_PP (pp_cuda_linear_residual_forward, lt, stream, d_x, d_W, d_b, d_res, d_y, n, in, out,
            PP_COMPUTE_FP32);
  float *got_r = download_f (d_y, (size_t) n * out), *got_res = download_f (d_res, (size_t) n * out);
  check_scaled ("linear + residual", got_r, want_r, (size_t) n * out, 1e-5);
  g_assert_cmpint (memcmp (got_res, res, (size_t) n * out * sizeof (float)), ==, 0);
  PpError e = { 0 };
  g_assert_cmpint (pp_cuda_linear_residual_forward (lt, stream, d_x, d_W, d_b, d_y, d_y, n, in,
                                                    out, PP_COMPUTE_FP32, &e), ==, PP_EINVAL);
  g_free (res); g_free (want_r); g_free (got_r); g_free (got_res);
  cudaFree (d_res);

  g_free (got_y); g_free (got_dx); g_free (got_dW); g_free (got_db);
  cudaFree (d_x); cudaFree (d_W); cudaFree (d_b); cudaFree (d_dy);
  cudaFree (d_dW); cudaFree (d_db); cudaFree (d_y); cudaFree (d_dx);
  g_free (x); g_free (W); g_free (b); g_free (dy); g_free (dW); g_free (db);
  g_free (y); g_free (dx); g_free (want_dW); g_free (want_db);
  g_rand_free (r);
}

/* ---- LayerNorm ---- */

/* d = 768: the float4 path; d = 30: the scalar one.  offset shifts x far from
 * zero, where single-pass or float statistics would lose digits. */
static void
layernorm_case (GRand *r, int n, int d, double offset)
{
  size_t nd = (size_t) n * d;
  float *x = rand_floats (r, nd, offset - 1, offset + 1);
  float *gamma = rand_floats (r, d, 0.5, 1.5);
  float *beta = rand_floats (r, d, -0.5, 0.5);
  float *dy = rand_floats (r, nd, -1, 1);
  float *dgamma = rand_floats (r, d, -1, 1), *dbeta = rand_floats (r, d, -1, 1);
  float eps = 1e-5f;

  float *y = g_new (float, nd), *mean = g_new (float, n), *rstd = g_new (float, n);
  float *dx = g_new (float, nd);
  float *want_dgamma = dup_f (dgamma, d), *want_dbeta = dup_f (dbeta, d);
  pp_layernorm_forward (x, gamma, beta, y, mean, rstd, n, d, eps);
  pp_layernorm_backward_input (dy, x, gamma, mean, rstd, dx, n, d);
  pp_layernorm_backward_weight (dy, x, mean, rstd, want_dgamma, want_dbeta, n, d);

  float *d_x = upload_f (x, nd), *d_gamma = upload_f (gamma, d), *d_beta = upload_f (beta, d);
  float *d_dy = upload_f (dy, nd);
  float *d_dgamma = upload_f (dgamma, d), *d_dbeta = upload_f (dbeta, d);
  float *d_y = dev_alloc (nd * sizeof (float)), *d_dx = dev_alloc (nd * sizeof (float));
  float *d_mean = dev_alloc (n * sizeof (float)), *d_rstd = dev_alloc (n * sizeof (float));

  CHECK_PP (pp_cuda_layernorm_forward, stream, d_x, d_gamma, d_beta, d_y, d_mean, d_rstd,
            n, d, eps);
  CHECK_PP (pp_cuda_layernorm_backward_input, stream, d_dy, d_x, d_gamma, d_mean, d_rstd,
            NULL, d_dx, n, d);
  CHECK_PP (pp_cuda_layernorm_backward_weight, stream, d_dy, d_x, d_mean, d_rstd,
            d_dgamma, d_dbeta, n, d);
  /* with a residual: the same as adding it after, bit for bit */
  float *res = rand_floats (r, nd, -1, 1);
  float *d_res = upload_f (res, nd), *d_dxr = dev_alloc (nd * sizeof (float));
  float *d_sum = dev_alloc (nd * sizeof (float));
  CHECK_PP (pp_cuda_layernorm_backward_input, stream, d_dy, d_x, d_gamma, d_mean, d_rstd,
            d_res, d_dxr, n, d);
  CHECK_PP (pp_cuda_add, stream, d_res, d_dx, d_sum, nd);
  float *got_dxr = download_f (d_dxr, nd), *got_sum = download_f (d_sum, nd);
  if (memcmp (got_dxr, got_sum, nd * sizeof (float)) != 0)
    g_error ("layernorm %dx%d: dx with a residual differs from dx + residual", n, d);
  PpError alias_err = { 0 };
  g_assert_cmpint (pp_cuda_layernorm_backward_input (stream, d_dy, d_x, d_gamma, d_mean, d_rstd,
                                                     d_dxr, d_dxr, n, d, &alias_err), ==, PP_EINVAL);
  float *want_dxr = g_new (float, nd);
  for (size_t i = 0; i < nd; i++)
    want_dxr[i] = res[i] + dx[i];
  float *got_y = download_f (d_y, nd), *got_dx = download_f (d_dx, nd);
  float *got_mean = download_f (d_mean, n), *got_rstd = download_f (d_rstd, n);
  float *got_dgamma = download_f (d_dgamma, d), *got_dbeta = download_f (d_dbeta, d);

  char *tag = g_strdup_printf ("layernorm %dx%d offset %g", n, d, offset);
#define CHECK_LN(name, got, want, len) \
  G_STMT_START { char *w_ = g_strconcat (tag, " ", name, NULL); \
    check_scaled (w_, got, want, len, 1e-5); g_free (w_); } G_STMT_END
  CHECK_LN ("y", got_y, y, nd);
  /* the statistics in double on both sides, rounded once to float */
  check_elementwise ("layernorm mean", got_mean, mean, n, 1e-6, 1e-7);
  check_elementwise ("layernorm rstd", got_rstd, rstd, n, 1e-6, 0.0);
  CHECK_LN ("dx", got_dx, dx, nd);
  CHECK_LN ("dx + residual", got_dxr, want_dxr, nd);
  g_free (res); g_free (want_dxr); g_free (got_dxr); g_free (got_sum);
  cudaFree (d_res); cudaFree (d_dxr); cudaFree (d_sum);
  CHECK_LN ("dgamma (+=)", got_dgamma, want_dgamma, d);
  CHECK_LN ("dbeta (+=)", got_dbeta, want_dbeta, d);
#undef CHECK_LN

  g_free (tag);
  g_free (got_y); g_free (got_dx); g_free (got_mean); g_free (got_rstd);
  g_free (got_dgamma); g_free (got_dbeta);
  cudaFree (d_x); cudaFree (d_gamma); cudaFree (d_beta); cudaFree (d_dy);
  cudaFree (d_dgamma); cudaFree (d_dbeta); cudaFree (d_y); cudaFree (d_dx);
  cudaFree (d_mean); cudaFree (d_rstd);
  g_free (x); g_free (gamma); g_free (beta); g_free (dy); g_free (dgamma); g_free (dbeta);
  g_free (y); g_free (mean); g_free (rstd); g_free (dx);
  g_free (want_dgamma); g_free (want_dbeta);
}

static void
test_layernorm (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 5);
  layernorm_case (r, 64, 768, 0.0);
  layernorm_case (r, 19, 30, 0.0);
  layernorm_case (r, 64, 768, 100.0);
  layernorm_case (r, 300, 100, 0.0);      /* more rows than a block's row lanes */
  g_rand_free (r);
}

/* ---- GELU ---- */

static void
test_gelu (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 6);
  size_t n = 600011;   /* not a multiple of the block; past 1024 blocks (grid-stride) */
  float *x = rand_floats (r, n, -6, 6);
  float *dy = rand_floats (r, n, -1, 1);
  float *y = g_new (float, n), *dx = g_new (float, n);
  pp_gelu_forward (x, y, n);
  pp_gelu_backward (x, dy, dx, n);

  float *d_x = upload_f (x, n), *d_dy = upload_f (dy, n);
  float *d_y = dev_alloc (n * sizeof (float));
  CHECK_PP (pp_cuda_gelu_forward, stream, d_x, d_y, n);
  CHECK_PP (pp_cuda_gelu_backward, stream, d_x, d_dy, d_dy, n);   /* in place */
            float *got_y = download_f (d_y, n), *got_dx = download_f (d_dy, n);
  /* tanhf differs by an ulp or two between CUDA and glibc; where 1 + tanh
   * cancels (x < -3) that is a larger relative error of a tiny y, hence
   * scaled by max|y| */
  check_scaled ("gelu forward", got_y, y, n, 1e-5);
  check_scaled ("gelu backward (dx aliases dy)", got_dx, dx, n, 1e-5);

  g_free (got_y); g_free (got_dx);
  cudaFree (d_x); cudaFree (d_dy); cudaFree (d_y);
  g_free (x); g_free (dy); g_free (y); g_free (dx);
  g_rand_free (r);
}

/* ---- softmax cross-entropy ---- */

static void
xent_case (GRand *r, int n, int c)
{
  size_t nc = (size_t) n * c;
  float *logits = rand_floats (r, nc, -8, 8);
  int32_t *labels = g_new (int32_t, n);
  for (int i = 0; i < n; i++)
    labels[i] = g_rand_int_range (r, 0, c);
  float scale = 1.0f / n;
  float *probs = g_new (float, nc), *dlogits = g_new (float, nc);
  double want_loss = pp_softmax_xent_forward (logits, labels, probs, n, c);
  pp_softmax_xent_backward (probs, labels, dlogits, n, c, scale);

  float *d_logits = upload_f (logits, nc);
  int32_t *d_labels = upload (labels, n * sizeof (int32_t));
  float *d_probs = dev_alloc (nc * sizeof (float)), *d_losses = dev_alloc (n * sizeof (float));
  float *d_dlogits = dev_alloc (nc * sizeof (float));
  CHECK_PP (pp_cuda_softmax_xent_forward, stream, d_logits, d_labels, d_probs, d_losses,
            n, c);
  float *got_probs = download_f (d_probs, nc), *got_losses = download_f (d_losses, n);
  /* the backward on the CPU's probabilities: it is exact arithmetic on both
   * sides (one multiply, or a subtract and a multiply), so any difference
   * is a layout or label bug */
  copy_to_dev (d_probs, probs, nc);
  CHECK_PP (pp_cuda_softmax_xent_backward, stream, d_probs, d_labels, d_dlogits, n, c,
            scale);
  float *got_dlogits = download_f (d_dlogits, nc);

  char *tag = g_strdup_printf ("xent %dx%d", n, c);
  char *w1 = g_strconcat (tag, " probs", NULL), *w2 = g_strconcat (tag, " dlogits", NULL);
  /* expf is within 2 ulp on CUDA; each probability is one exp times one
   * reciprocal of a double sum: 1e-5 of each element, however small */
  check_elementwise (w1, got_probs, probs, nc, 1e-5, 1e-30);
  check_elementwise (w2, got_dlogits, dlogits, nc, 1e-6, 1e-30);
  double got_loss = 0.0;
  for (int i = 0; i < n; i++)
    got_loss += got_losses[i];
  g_test_message ("%s loss: gpu %.9g cpu %.9g", tag, got_loss, want_loss);
  /* per-row losses are rounded to float once (2^-24) and summed in double */
  if (!(fabs (got_loss - want_loss) <= 1e-5 * fabs (want_loss)))
    g_error ("%s loss: gpu %.9g, cpu %.9g", tag, got_loss, want_loss);

  g_free (tag); g_free (w1); g_free (w2);
  g_free (got_probs); g_free (got_losses); g_free (got_dlogits);
  cudaFree (d_logits); cudaFree (d_labels); cudaFree (d_probs); cudaFree (d_losses);
  cudaFree (d_dlogits);
  g_free (logits); g_free (labels); g_free (probs); g_free (dlogits);
}

static void
test_xent (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 7);
  xent_case (r, 37, 1000);
  xent_case (r, 4, 50257);               /* GPT-2's vocabulary */
  xent_case (r, 5, 3);                   /* fewer classes than threads */
  g_rand_free (r);
}

/* ---- AdamW ---- */

static void
test_adamw (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 8);
  size_t n = 70001;
  float *p = rand_floats (r, n, -1, 1), *g = rand_floats (r, n, -1, 1);
  float *m = rand_floats (r, n, -0.1, 0.1), *v = rand_floats (r, n, 0, 0.01);
  float *p0 = dup_f (p, n);
  float *d_p = upload_f (p, n), *d_g = upload_f (g, n);
  float *d_m = upload_f (m, n), *d_v = upload_f (v, n);
  for (int t = 1; t <= 3; t++)
    {
      pp_adamw (p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, t);
      CHECK_PP (pp_cuda_adamw, stream, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                0.1f, t);
    }
  float *got_p = download_f (d_p, n), *got_m = download_f (d_m, n), *got_v = download_f (d_v, n);
  /* same operations in the same order; CUDA contracts a*b + c into one FMA
   * where the x86-64 CPU build rounds twice: an ulp or two per step */
  check_scaled ("adamw m", got_m, m, n, 1e-5);          /* m may cancel to ~0 */
  check_elementwise ("adamw v", got_v, v, n, 1e-5, 1e-12);
  check_elementwise ("adamw p", got_p, p, n, 1e-5, 1e-9);
  /* p moves by ~1e-3 a step, so an error in the update itself hides in p's
   * rounding: compare the updates.  Rounding p (2^-24 |p| <= 6e-8) against
   * max|update| ~ 3e-3 gives ~2e-5; 1e-3 still catches a 1% error. */
  float *want_dp = g_new (float, n), *got_dp = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    {
      want_dp[i] = p[i] - p0[i];
      got_dp[i] = got_p[i] - p0[i];
    }
  check_scaled ("adamw update", got_dp, want_dp, n, 1e-3);
  g_free (want_dp);
  g_free (got_dp);
  g_free (p0);

  PpError e = { 0 };
  g_assert_cmpint (pp_cuda_adamw (stream, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.999f,
                                  1e-8f, 0.1f, 0, &e), ==, PP_EINVAL);

  g_free (got_p); g_free (got_m); g_free (got_v);
  cudaFree (d_p); cudaFree (d_g); cudaFree (d_m); cudaFree (d_v);
  g_free (p); g_free (g); g_free (m); g_free (v);
  g_rand_free (r);
}

/* ---- determinism ---- */

/* Each op twice on the same inputs and buffers; the outputs must match bit
 * for bit.  Sizes large enough that cuBLASLt may pick split-K kernels and
 * the column reductions span many rows. */
static void
assert_same_bits (const char *what, const float *a, const float *b, size_t n)
{
  if (memcmp (a, b, n * sizeof (float)) != 0)
    g_error ("%s: two runs differ", what);
}

static void
test_determinism (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 9);
  int m = 256, n = 384, k = 8192;        /* a long k: split-K territory */
  float *A = rand_floats (r, (size_t) k * m, -1, 1);
  float *B = rand_floats (r, (size_t) k * n, -1, 1);
  float *dA = upload_f (A, (size_t) k * m), *dB = upload_f (B, (size_t) k * n);
  float *dC = dev_alloc ((size_t) m * n * sizeof (float));

  for (int c = PP_COMPUTE_FP32; c <= PP_COMPUTE_BF16; c++)
    {
      float *runs[2];
      for (int i = 0; i < 2; i++)
        {
          /* the weight-gradient shape: A^T B with a long k */
          CHECK_PP (pp_cublaslt_gemm, lt, stream, 1, 0, m, n, k, 1.0f, dA, dB, 0.0f, dC,
                    (PpCompute) c, PP_EPI_NONE, NULL, NULL);
          runs[i] = download_f (dC, (size_t) m * n);
        }
      char *what = g_strdup_printf ("gemm %s TN %dx%dx%d", compute_names[c], m, n, k);
      assert_same_bits (what, runs[0], runs[1], (size_t) m * n);
      g_free (what);
      g_free (runs[0]);
      g_free (runs[1]);
    }

  /* LayerNorm and the column sums over 8192 rows */
  int rows = 8192, d = 768;
  size_t nd = (size_t) rows * d;
  float *x = rand_floats (r, nd, -2, 2), *dy = rand_floats (r, nd, -1, 1);
  float *gamma = rand_floats (r, d, 0.5, 1.5), *beta = rand_floats (r, d, -0.5, 0.5);
  float *d_x = upload_f (x, nd), *d_dy = upload_f (dy, nd);
  float *d_gamma = upload_f (gamma, d), *d_beta = upload_f (beta, d);
  float *d_y = dev_alloc (nd * sizeof (float)), *d_dx = dev_alloc (nd * sizeof (float));
  float *d_mean = dev_alloc (rows * sizeof (float)), *d_rstd = dev_alloc (rows * sizeof (float));
  float *d_dgamma = dev_alloc (d * sizeof (float)), *d_dbeta = dev_alloc (d * sizeof (float));
  float *d_losses = dev_alloc (rows * sizeof (float));
  int32_t *labels = g_new (int32_t, rows);
  for (int i = 0; i < rows; i++)
    labels[i] = g_rand_int_range (r, 0, d);
  int32_t *d_labels = upload (labels, rows * sizeof (int32_t));

  float *out[2][6];
  for (int i = 0; i < 2; i++)
    {
      CHECK_CUDA (cudaMemsetAsync (d_dgamma, 0, d * sizeof (float), stream));
      CHECK_CUDA (cudaMemsetAsync (d_dbeta, 0, d * sizeof (float), stream));
      CHECK_PP (pp_cuda_layernorm_forward, stream, d_x, d_gamma, d_beta, d_y, d_mean, d_rstd,
                rows, d, 1e-5f);
      CHECK_PP (pp_cuda_layernorm_backward_input, stream, d_dy, d_x, d_gamma, d_mean, d_rstd,
                NULL, d_dx, rows, d);
      CHECK_PP (pp_cuda_layernorm_backward_weight, stream, d_dy, d_x, d_mean, d_rstd,
                d_dgamma, d_dbeta, rows, d);
      out[i][0] = download_f (d_y, nd);
      out[i][1] = download_f (d_dx, nd);
      out[i][2] = download_f (d_dgamma, d);
      out[i][3] = download_f (d_dbeta, d);
      /* the x buffer as logits: one block per row, block-wide reductions */
      CHECK_PP (pp_cuda_softmax_xent_forward, stream, d_x, d_labels, d_y, d_losses, rows, d);
      out[i][4] = download_f (d_y, nd);
      out[i][5] = download_f (d_losses, rows);
    }
  assert_same_bits ("layernorm y", out[0][0], out[1][0], nd);
  assert_same_bits ("layernorm dx", out[0][1], out[1][1], nd);
  assert_same_bits ("layernorm dgamma", out[0][2], out[1][2], d);
  assert_same_bits ("layernorm dbeta", out[0][3], out[1][3], d);
  assert_same_bits ("xent probs", out[0][4], out[1][4], nd);
  assert_same_bits ("xent losses", out[0][5], out[1][5], rows);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 6; j++)
      g_free (out[i][j]);

  cudaFree (dA); cudaFree (dB); cudaFree (dC);
  cudaFree (d_x); cudaFree (d_dy); cudaFree (d_gamma); cudaFree (d_beta);
  cudaFree (d_y); cudaFree (d_dx); cudaFree (d_mean); cudaFree (d_rstd);
  cudaFree (d_dgamma); cudaFree (d_dbeta); cudaFree (d_losses); cudaFree (d_labels);
  g_free (A); g_free (B); g_free (x); g_free (dy); g_free (gamma); g_free (beta);
  g_free (labels);
  g_rand_free (r);
}

/* ---- element-wise add ---- */

/* One float addition per element on both sides, correctly rounded by IEEE
 * (no FMA to contract): the results must match bit for bit.  Also in place
 * (y aliases a, then b), as the residual adds and the gradient sums use it. */
static void
test_add (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 10);
  size_t n = 600011;   /* not a multiple of the block; past 1024 blocks (grid-stride) */
  float *a = rand_floats (r, n, -1, 1), *b = rand_floats (r, n, -1000, 1000);
  float *want = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    want[i] = a[i] + b[i];

  float *d_a = upload_f (a, n), *d_b = upload_f (b, n);
  float *d_y = dev_alloc (n * sizeof (float));
  CHECK_PP (pp_cuda_add, stream, d_a, d_b, d_y, n);
  float *got = download_f (d_y, n);
  assert_same_bits ("add", got, want, n);
  g_free (got);

  CHECK_PP (pp_cuda_add, stream, d_a, d_b, d_a, n);     /* a += b */
  got = download_f (d_a, n);
  assert_same_bits ("add (y aliases a)", got, want, n);
  g_free (got);

  copy_to_dev (d_a, a, n);
  CHECK_PP (pp_cuda_add, stream, d_a, d_b, d_b, n);     /* b += a */
  got = download_f (d_b, n);
  assert_same_bits ("add (y aliases b)", got, want, n);
  g_free (got);

  CHECK_PP (pp_cuda_add, stream, NULL, NULL, NULL, 0);  /* n == 0: nothing */
  PpError e = { 0 };
  g_assert_cmpint (pp_cuda_add (stream, d_a, NULL, d_y, n, &e), ==, PP_EINVAL);
  g_assert_cmpstr (e.msg, !=, "");

  cudaFree (d_a); cudaFree (d_b); cudaFree (d_y);
  g_free (a); g_free (b); g_free (want);
  g_rand_free (r);
}

/* ---- several column sums in one launch ---- */

/* The W step's three column sums (two biases, a LayerNorm's beta and gamma)
 * in one launch give, bit for bit, what three launches give; an empty job is
 * skipped; more than 4 jobs are refused. */
static void
test_column_sums (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 11);
  int n = 300, d1 = 1000, d2 = 37, d3 = 768;   /* 37: not a multiple of the tile */
  float *x1 = rand_floats (r, (size_t) n * d1, -1, 1);
  float *x2 = rand_floats (r, (size_t) n * d2, -1, 1);
  float *dy3 = rand_floats (r, (size_t) n * d3, -1, 1);
  float *in3 = rand_floats (r, (size_t) n * d3, -2, 2);
  float *mean = rand_floats (r, n, -0.5, 0.5), *rstd = rand_floats (r, n, 0.5, 2);
  float *s1 = rand_floats (r, d1, -1, 1), *s2 = rand_floats (r, d2, -1, 1);
  float *beta = rand_floats (r, d3, -1, 1), *gamma = rand_floats (r, d3, -1, 1);

  float *d_x1 = upload_f (x1, (size_t) n * d1), *d_x2 = upload_f (x2, (size_t) n * d2);
  float *d_dy3 = upload_f (dy3, (size_t) n * d3), *d_in3 = upload_f (in3, (size_t) n * d3);
  float *d_mean = upload_f (mean, n), *d_rstd = upload_f (rstd, n);
  float *a_s1 = upload_f (s1, d1), *a_s2 = upload_f (s2, d2);
  float *a_beta = upload_f (beta, d3), *a_gamma = upload_f (gamma, d3);
  float *b_s1 = upload_f (s1, d1), *b_s2 = upload_f (s2, d2);
  float *b_beta = upload_f (beta, d3), *b_gamma = upload_f (gamma, d3);

  CHECK_PP (pp_cuda_column_sum_add, stream, d_x1, a_s1, n, d1);
  CHECK_PP (pp_cuda_column_sum_add, stream, d_x2, a_s2, n, d2);
  CHECK_PP (pp_cuda_layernorm_backward_weight, stream, d_dy3, d_in3, d_mean, d_rstd, a_gamma,
            a_beta, n, d3);
  PpColumnSum jobs[5] = {
    { .x = d_x1, .sums = b_s1, .n = n, .d = d1 },
    { .x = NULL, .sums = NULL, .n = 0, .d = 16 },          /* empty: skipped */
    { .x = d_x2, .sums = b_s2, .n = n, .d = d2 },
    { .x = d_dy3, .sums = b_beta, .x_ln = d_in3, .mean = d_mean, .rstd = d_rstd,
      .sums_xhat = b_gamma, .n = n, .d = d3 },
    { .x = d_x1, .sums = b_s1, .n = n, .d = d1 },
  };
  CHECK_PP (pp_cuda_column_sums_add, stream, jobs, 4);

  float *g1a = download_f (a_s1, d1), *g1b = download_f (b_s1, d1);
  float *g2a = download_f (a_s2, d2), *g2b = download_f (b_s2, d2);
  float *gba = download_f (a_beta, d3), *gbb = download_f (b_beta, d3);
  float *gga = download_f (a_gamma, d3), *ggb = download_f (b_gamma, d3);
  assert_same_bits ("column sums: x1", g1b, g1a, d1);
  assert_same_bits ("column sums: x2", g2b, g2a, d2);
  assert_same_bits ("column sums: LayerNorm beta", gbb, gba, d3);
  assert_same_bits ("column sums: LayerNorm gamma", ggb, gga, d3);

  /* and the sums are sums (the CPU in double) */
  float *want1 = dup_f (s1, d1);
  for (int j = 0; j < d1; j++)
    {
      double acc = 0;
      for (int i = 0; i < n; i++)
        acc += x1[(size_t) i * d1 + j];
      want1[j] = (float) (want1[j] + acc);
    }
  check_scaled ("column sums vs CPU", g1b, want1, d1, 1e-5);

  PpError e = { 0 };
  g_assert_cmpint (pp_cuda_column_sums_add (stream, jobs, 5, &e), ==, PP_EINVAL);
  g_assert_cmpstr (e.msg, !=, "");

  cudaFree (d_x1); cudaFree (d_x2); cudaFree (d_dy3); cudaFree (d_in3);
  cudaFree (d_mean); cudaFree (d_rstd);
  cudaFree (a_s1); cudaFree (a_s2); cudaFree (a_beta); cudaFree (a_gamma);
  cudaFree (b_s1); cudaFree (b_s2); cudaFree (b_beta); cudaFree (b_gamma);
  g_free (x1); g_free (x2); g_free (dy3); g_free (in3); g_free (mean); g_free (rstd);
  g_free (s1); g_free (s2); g_free (beta); g_free (gamma); g_free (want1);
  g_free (g1a); g_free (g1b); g_free (g2a); g_free (g2b);
  g_free (gba); g_free (gbb); g_free (gga); g_free (ggb);
  g_rand_free (r);
}

/* ---- main ---- */

int
main (int argc, char **argv)
{
  gpu_test_init (&argc, &argv, "test-gpu-kernels");

  g_test_add_func ("/gpu/gemm/transposes", test_gemm_transposes);
  g_test_add_func ("/gpu/gemm/empty", test_gemm_empty);
  g_test_add_func ("/gpu/gemm/bf16-rounds", test_gemm_bf16_rounds);
  g_test_add_func ("/gpu/gemm/bias", test_gemm_bias);
  g_test_add_func ("/gpu/gemm/plans", test_gemm_plans);
  g_test_add_func ("/gpu/gemm/gelu", test_gemm_gelu);
  g_test_add_func ("/gpu/linear", test_linear);
  g_test_add_func ("/gpu/layernorm", test_layernorm);
  g_test_add_func ("/gpu/gelu", test_gelu);
  g_test_add_func ("/gpu/xent", test_xent);
  g_test_add_func ("/gpu/adamw", test_adamw);
  g_test_add_func ("/gpu/determinism", test_determinism);
  g_test_add_func ("/gpu/add", test_add);
  g_test_add_func ("/gpu/column-sums", test_column_sums);

  int rc = g_test_run ();
  gpu_test_finish ();
  return rc;
}
