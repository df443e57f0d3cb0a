/* pp-kernels-cpu.c — the CPU kernels: GEMM through OpenBLAS, the rest plain C.
 *
 * Every loop runs in a fixed order on the calling thread, and BLAS is pinned
 * to one thread, so the same inputs give bit-identical outputs on every run
 * and on every pipeline rank.  Reductions that decide accuracy (layernorm
 * statistics, softmax sums, the loss) accumulate in double.
 */
#include "pp-kernels.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>

static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void
kernels_init_once (void)
{
  /* The pthread build of OpenBLAS sizes its pool from OPENBLAS_NUM_THREADS or
   * the core count when the library loads; setting 1 here is process-wide and
   * makes every later call run on the caller's thread, whatever the
   * environment said.  (The OpenMP build keeps the count per thread; pkg-config
   * gives us the pthread one.) */
  openblas_set_num_threads (1);
}

void
pp_kernels_init (void)
{
  pthread_once (&kernels_once, kernels_init_once);
}

/* ---- GEMM ---- */

void
pp_gemm (int trans_a, int trans_b, int m, int n, int k, float alpha,
         const float *A, const float *B, float beta, float *C)
{
  /* A caller that forgot pp_kernels_init must still not get BLAS threads;
   * once initialized this is one load. */
  pp_kernels_init ();

  if (m <= 0 || n <= 0)
    return;
  if (k <= 0)
    {
      /* BLAS rejects a zero leading dimension; the product is empty, so
       * C = beta * C (beta 0 clears, without reading C). */
      for (size_t i = 0; i < (size_t) m * n; i++)
        C[i] = beta == 0.0f ? 0.0f : beta * C[i];
      return;
    }

  /* Row-major: the leading dimension is the stored row length. */
  int lda = trans_a ? m : k;
  int ldb = trans_b ? k : n;
  cblas_sgemm (CblasRowMajor,
               trans_a ? CblasTrans : CblasNoTrans,
               trans_b ? CblasTrans : CblasNoTrans,
               m, n, k, alpha, A, lda, B, ldb, beta, C, n);
}

/* ---- Linear ---- */

void
pp_linear_forward (const float *x, const float *W, const float *b, float *y,
                   int n, int in, int out)
{
  pp_gemm (0, 0, n, out, in, 1.0f, x, W, 0.0f, y);
  if (b == NULL)
    return;
  for (int i = 0; i < n; i++)
    {
      float *yi = y + (size_t) i * out;
      for (int j = 0; j < out; j++)
        yi[j] += b[j];
    }
}

void
pp_linear_backward_input (const float *dy, const float *W, float *dx,
                          int n, int in, int out)
{
  pp_gemm (0, 1, n, in, out, 1.0f, dy, W, 0.0f, dx);
}

void
pp_linear_backward_weight (const float *x, const float *dy, float *dW, float *db,
                           int n, int in, int out)
{
  pp_gemm (1, 0, in, out, n, 1.0f, x, dy, 1.0f, dW);
  if (db == NULL)
    return;
  for (int i = 0; i < n; i++)
    {
      const float *dyi = dy + (size_t) i * out;
      for (int j = 0; j < out; j++)
        db[j] += dyi[j];
    }
}

/* ---- LayerNorm ---- */

void
pp_layernorm_forward (const float *x, const float *gamma, const float *beta,
                      float *y, float *mean, float *rstd, int n, int d, float eps)
{
  for (int i = 0; i < n; i++)
    {
      const float *xi = x + (size_t) i * d;
      float *yi = y + (size_t) i * d;

      /* two passes in double: no cancellation when |mean| >> std */
      double sum = 0.0;
      for (int j = 0; j < d; j++)
        sum += xi[j];
      double mu = sum / d;
      double ss = 0.0;
      for (int j = 0; j < d; j++)
        {
          double c = xi[j] - mu;
          ss += c * c;
        }
      double var = ss / d;                       /* biased, as PyTorch */
      float m = (float) mu;
      float s = (float) (1.0 / sqrt (var + (double) eps));

      for (int j = 0; j < d; j++)
        yi[j] = (xi[j] - m) * s * gamma[j] + beta[j];
      mean[i] = m;
      rstd[i] = s;
    }
}

void
pp_layernorm_backward_input (const float *dy, const float *x, const float *gamma,
                             const float *mean, const float *rstd, float *dx,
                             int n, int d)
{
  for (int i = 0; i < n; i++)
    {
      const float *dyi = dy + (size_t) i * d;
      const float *xi = x + (size_t) i * d;
      float *dxi = dx + (size_t) i * d;
      float m = mean[i], s = rstd[i];

      double sum_g = 0.0, sum_gx = 0.0;
      for (int j = 0; j < d; j++)
        {
          float xhat = (xi[j] - m) * s;
          float g = dyi[j] * gamma[j];
          sum_g += g;
          sum_gx += (double) g * xhat;
        }
      float mean_g = (float) (sum_g / d);
      float mean_gx = (float) (sum_gx / d);

      for (int j = 0; j < d; j++)
        {
          float xhat = (xi[j] - m) * s;
          float g = dyi[j] * gamma[j];
          dxi[j] = s * (g - mean_g - xhat * mean_gx);
        }
    }
}

void
pp_layernorm_backward_weight (const float *dy, const float *x, const float *mean,
                              const float *rstd, float *dgamma, float *dbeta,
                              int n, int d)
{
  for (int i = 0; i < n; i++)
    {
      const float *dyi = dy + (size_t) i * d;
      const float *xi = x + (size_t) i * d;
      float m = mean[i], s = rstd[i];
      for (int j = 0; j < d; j++)
        {
          float xhat = (xi[j] - m) * s;
          dgamma[j] += dyi[j] * xhat;
          dbeta[j] += dyi[j];
        }
    }
}

/* ---- GELU (tanh approximation) ---- */

#define PP_GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */
#define PP_GELU_CUBE  0.044715f

void
pp_gelu_forward (const float *x, float *y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      float xi = x[i];
      float u = PP_GELU_SCALE * (xi + PP_GELU_CUBE * xi * xi * xi);
      y[i] = 0.5f * xi * (1.0f + tanhf (u));
    }
}

void
pp_gelu_backward (const float *x, const float *dy, float *dx, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      float xi = x[i];
      float u = PP_GELU_SCALE * (xi + PP_GELU_CUBE * xi * xi * xi);
      float t = tanhf (u);
      float du = PP_GELU_SCALE * (1.0f + 3.0f * PP_GELU_CUBE * xi * xi);
      float grad = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * du;
      dx[i] = dy[i] * grad;              /* dy[i] is read before dx[i] is written */
    }
}

/* ---- Softmax cross-entropy ---- */

double
pp_softmax_xent_forward (const float *logits, const int32_t *labels, float *probs,
                         int n, int c)
{
  double loss = 0.0;
  for (int i = 0; i < n; i++)
    {
      const float *li = logits + (size_t) i * c;
      float *pi = probs + (size_t) i * c;

      float max = li[0];
      for (int j = 1; j < c; j++)
        if (li[j] > max)
          max = li[j];

      double sum = 0.0;
      for (int j = 0; j < c; j++)
        {
          pi[j] = expf (li[j] - max);
          sum += pi[j];
        }
      float inv = (float) (1.0 / sum);
      for (int j = 0; j < c; j++)
        pi[j] *= inv;

      /* -log p[label] as log-sum-exp minus the logit: stays finite when
       * p[label] underflows to 0 in float */
      loss += log (sum) - ((double) li[labels[i]] - (double) max);
    }
  return loss;
}

void
pp_softmax_xent_backward (const float *probs, const int32_t *labels, float *dlogits,
                          int n, int c, float scale)
{
  for (int i = 0; i < n; i++)
    {
      const float *pi = probs + (size_t) i * c;
      float *di = dlogits + (size_t) i * c;
      for (int j = 0; j < c; j++)
        di[j] = pi[j] * scale;
      di[labels[i]] = (pi[labels[i]] - 1.0f) * scale;
    }
}

/* ---- AdamW ---- */

void
pp_adamw (float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
          size_t n, float lr, float b1, float b2, float eps, float wd, int t)
{
  /* restrict (the four arrays never overlap) lets gcc vectorise the loop
   * without run-time alias checks, which -O2's cheap cost model refuses. */
  float c1 = 1.0f - powf (b1, (float) t);
  float c2 = 1.0f - powf (b2, (float) t);
  for (size_t i = 0; i < n; i++)
    {
      float gi = g[i];
      float mi = b1 * m[i] + (1.0f - b1) * gi;
      float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float mhat = mi / c1;
      float vhat = vi / c2;
      p[i] -= lr * (mhat / (sqrtf (vhat) + eps) + wd * p[i]);
    }
}
