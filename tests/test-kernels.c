/* The CPU kernels against plain double-precision versions of the same math:
 * GEMM and linear against triple loops, the backward kernels against central
 * finite differences of a double reference forward.  Every gradient check is
 * also run on deliberately wrong gradients, which must fail it, so the
 * tolerances are shown to be tight enough to matter.
 *
 * Tolerances are "excess" ratios: max_i |got - want| / (atol + rtol |want|),
 * which passes at <= 1.
 */
#include <glib.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-kernels.h"

#define SEED 0x5eed1234u

/* ---- helpers ---- */

static float *
rand_floats (GRand *r, size_t n, double lo, double hi)
{
  float *v = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (r, lo, hi);
  return v;
}

static double
excess_d (const double *got, const double *want, size_t n, double rtol, double atol)
{
  double worst = 0.0;
  for (size_t i = 0; i < n; i++)
    {
      double e = fabs (got[i] - want[i]) / (atol + rtol * fabs (want[i]));
      if (!(e <= worst))            /* NaN counts as worst */
        worst = isnan (e) ? INFINITY : e;
    }
  return worst;
}

static double
excess_f (const float *got, const double *want, size_t n, double rtol, double atol)
{
  double *g = g_new (double, n);
  for (size_t i = 0; i < n; i++)
    g[i] = got[i];
  double e = excess_d (g, want, n, rtol, atol);
  g_free (g);
  return e;
}

static double
max_abs_d (const double *v, size_t n)
{
  double m = 0.0;
  for (size_t i = 0; i < n; i++)
    m = fmax (m, fabs (v[i]));
  return m;
}

#define assert_within(excess, what) \
  G_STMT_START { double e_ = (excess); \
    if (!(e_ <= 1.0)) g_error ("%s: error %.3g times the tolerance", (what), e_); \
  } G_STMT_END

/* a wrong answer must miss by a wide margin, not by luck */
#define assert_caught(excess, what) \
  G_STMT_START { double e_ = (excess); \
    if (!(e_ > 10.0)) g_error ("%s: a wrong gradient passed (%.3g)", (what), e_); \
  } G_STMT_END

/* ---- init ---- */

static gpointer
num_threads_in_thread (gpointer data)
{
  (void) data;
  return GINT_TO_POINTER (openblas_get_num_threads ());
}

/* Runs in a fresh process whose OpenBLAS loaded with OPENBLAS_NUM_THREADS=2
 * (the variable is read at load time, so it cannot be set from inside the
 * test process); the exit status is the verdict. */
static int
init_child (void)
{
  int before = openblas_get_num_threads ();
  if (g_get_num_processors () > 1 && before < 2)
    return 2;                               /* the environment did not take */
  pp_kernels_init ();
  if (openblas_get_num_threads () != 1)
    return 3;

  /* large enough that OpenBLAS would split it across threads */
  int n = 256;
  float *a = g_new0 (float, n * n), *c = g_new0 (float, n * n);
  pp_gemm (0, 0, n, n, n, 1.0f, a, a, 0.0f, c);
  g_free (a);
  g_free (c);
  return openblas_get_num_threads () == 1 ? 0 : 4;
}

static void
test_init (void)
{
  g_test_message ("openblas: %s, parallel mode %d", openblas_get_config (),
                  openblas_get_parallel ());
  pp_kernels_init ();
  pp_kernels_init ();
  g_assert_cmpint (openblas_get_num_threads (), ==, 1);

  /* each pipeline rank is its own thread: the setting must hold there too
   * (it would not under an OpenMP build, where it is per thread) */
  GThread *t = g_thread_new ("other", num_threads_in_thread, NULL);
  g_assert_cmpint (GPOINTER_TO_INT (g_thread_join (t)), ==, 1);

  /* a process started with OpenBLAS told to use threads is still pinned */
  char **env = g_get_environ ();
  env = g_environ_setenv (env, "OPENBLAS_NUM_THREADS", "2", TRUE);
  env = g_environ_setenv (env, "PP_TEST_KERNELS_INIT_CHILD", "1", TRUE);
  char *argv[] = { (char *) "/proc/self/exe", NULL };
  int wait_status = 0;
  GError *error = NULL;
  g_assert_true (g_spawn_sync (NULL, argv, env, G_SPAWN_DEFAULT, NULL, NULL,
                               NULL, NULL, &wait_status, &error));
  g_assert_no_error (error);
  g_spawn_check_wait_status (wait_status, &error);
  g_assert_no_error (error);
  g_strfreev (env);
}

/* ---- GEMM ---- */

/* element (i, j) of op(X), X stored row-major as [rows, cols] */
static double
at (const float *X, int cols, int trans, int i, int j)
{
  return trans ? X[(size_t) j * cols + i] : X[(size_t) i * cols + j];
}

static void
test_gemm (void)
{
  GRand *r = g_rand_new_with_seed (SEED);
  static const int shapes[][3] = {
    { 1, 1, 1 }, { 3, 5, 7 }, { 17, 9, 33 }, { 64, 31, 67 }, { 5, 128, 2 }, { 40, 1, 100 },
  };
  for (size_t s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int beta_i = 0; beta_i < 2; beta_i++)
          {
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            float alpha = 0.75f, beta = (float) beta_i;
            float *A = rand_floats (r, (size_t) m * k, -1, 1);
            float *B = rand_floats (r, (size_t) k * n, -1, 1);
            float *C0 = rand_floats (r, (size_t) m * n, -1, 1);
            float *C = g_memdup2 (C0, sizeof (float) * m * n);
            if (beta == 0.0f)
              for (int i = 0; i < m * n; i++)
                C[i] = NAN;            /* beta 0 must not read C */
            double *want = g_new (double, (size_t) m * n);
            double *bound = g_new (double, (size_t) m * n);
            int acols = ta ? m : k, bcols = tb ? k : n;

            pp_gemm (ta, tb, m, n, k, alpha, A, B, beta, C);

            double maxref = 0.0, maxdiff = 0.0;
            for (int i = 0; i < m; i++)
              for (int j = 0; j < n; j++)
                {
                  double sum = 0.0, abs_sum = 0.0;
                  for (int l = 0; l < k; l++)
                    {
                      double p = at (A, acols, ta, i, l) * at (B, bcols, tb, l, j);
                      sum += p;
                      abs_sum += fabs (p);
                    }
                  size_t ij = (size_t) i * n + j;
                  want[ij] = alpha * sum + beta * (double) C0[ij];
                  /* float GEMM error is bounded by ~k u sum |a b|; 1e-5 covers
                   * k <= 128 with room */
                  bound[ij] = 1e-5 * (fabs (alpha) * abs_sum + fabs (beta * C0[ij])) + 1e-30;
                  maxref = fmax (maxref, fabs (want[ij]));
                  maxdiff = fmax (maxdiff, fabs (C[ij] - want[ij]));
                  if (!(fabs (C[ij] - want[ij]) <= bound[ij]))
                    g_error ("gemm m=%d n=%d k=%d ta=%d tb=%d beta=%g: C[%d,%d] = %.9g, want %.9g",
                             m, n, k, ta, tb, beta, i, j, C[ij], want[ij]);
                }
            /* and norm-wise relative error */
            g_assert_cmpfloat (maxdiff, <=, 1e-5 * maxref);

            g_free (A);
            g_free (B);
            g_free (C0);
            g_free (C);
            g_free (want);
            g_free (bound);
          }
  g_rand_free (r);
}

static void
test_gemm_empty (void)
{
  float A[1] = { 1 }, B[1] = { 1 };
  float C[6] = { 1, 2, 3, 4, 5, 6 };
  pp_gemm (0, 0, 2, 3, 0, 1.0f, A, B, 1.0f, C);      /* k = 0, beta 1: unchanged */
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat (C[i], ==, i + 1);
  pp_gemm (0, 0, 2, 3, 0, 1.0f, A, B, 0.5f, C);      /* k = 0: C = beta C */
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat (C[i], ==, 0.5f * (i + 1));
  for (int i = 0; i < 6; i++)
    C[i] = NAN;
  pp_gemm (1, 1, 2, 3, 0, 1.0f, A, B, 0.0f, C);      /* k = 0, beta 0: zeros */
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat (C[i], ==, 0.0f);
  pp_gemm (0, 0, 0, 3, 4, 1.0f, A, B, 0.0f, C);      /* m = 0: nothing touched */
  g_assert_cmpfloat (C[0], ==, 0.0f);
}

/* ---- Linear ---- */

static void
test_linear (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 1);
  const int n = 13, in = 24, out = 10;
  float *x = rand_floats (r, (size_t) n * in, -1, 1);
  float *W = rand_floats (r, (size_t) in * out, -1, 1);
  float *b = rand_floats (r, out, -1, 1);
  float *dy = rand_floats (r, (size_t) n * out, -1, 1);
  float *y = g_new (float, (size_t) n * out);
  float *dx = g_new (float, (size_t) n * in);
  float *dW0 = rand_floats (r, (size_t) in * out, -1, 1);
  float *db0 = rand_floats (r, out, -1, 1);
  float *dW = g_memdup2 (dW0, sizeof (float) * in * out);
  float *db = g_memdup2 (db0, sizeof (float) * out);

  /* every entry below sums at most 24 products of magnitude <= 1 */
  const double rtol = 1e-5, atol = 1e-5 * 24;

  pp_linear_forward (x, W, b, y, n, in, out);
  double *want = g_new (double, (size_t) n * out);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < out; j++)
      {
        double s = b[j];
        for (int a = 0; a < in; a++)
          s += (double) x[i * in + a] * W[a * out + j];
        want[i * out + j] = s;
      }
  assert_within (excess_f (y, want, (size_t) n * out, rtol, atol), "linear forward");
  g_free (want);

  for (int i = 0; i < n * in; i++)
    dx[i] = NAN;                                   /* overwritten, not accumulated */
  pp_linear_backward_input (dy, W, dx, n, in, out);
  want = g_new (double, (size_t) n * in);
  for (int i = 0; i < n; i++)
    for (int a = 0; a < in; a++)
      {
        double s = 0.0;
        for (int j = 0; j < out; j++)
          s += (double) dy[i * out + j] * W[a * out + j];
        want[i * in + a] = s;
      }
  assert_within (excess_f (dx, want, (size_t) n * in, rtol, atol), "linear backward_input");
  g_free (want);

  double *xtdy = g_new (double, (size_t) in * out);
  double *colsum = g_new (double, out);
  for (int a = 0; a < in; a++)
    for (int j = 0; j < out; j++)
      {
        double s = 0.0;
        for (int i = 0; i < n; i++)
          s += (double) x[i * in + a] * dy[i * out + j];
        xtdy[a * out + j] = s;
      }
  for (int j = 0; j < out; j++)
    {
      double s = 0.0;
      for (int i = 0; i < n; i++)
        s += dy[i * out + j];
      colsum[j] = s;
    }

  double *wantW = g_new (double, (size_t) in * out);
  double *wantb = g_new (double, out);
  for (int times = 1; times <= 2; times++)
    {
      pp_linear_backward_weight (x, dy, dW, db, n, in, out);
      for (int i = 0; i < in * out; i++)
        wantW[i] = dW0[i] + times * xtdy[i];
      for (int j = 0; j < out; j++)
        wantb[j] = db0[j] + times * colsum[j];
      assert_within (excess_f (dW, wantW, (size_t) in * out, rtol, atol),
                     times == 1 ? "linear dW once" : "linear dW accumulated twice");
      assert_within (excess_f (db, wantb, out, rtol, atol),
                     times == 1 ? "linear db once" : "linear db accumulated twice");
    }

  g_free (wantW);
  g_free (wantb);
  g_free (xtdy);
  g_free (colsum);
  g_free (x);
  g_free (W);
  g_free (b);
  g_free (dy);
  g_free (y);
  g_free (dx);
  g_free (dW0);
  g_free (db0);
  g_free (dW);
  g_free (db);
  g_rand_free (r);
}

/* ---- LayerNorm ---- */

enum { LN_N = 6, LN_D = 37 };
static const float LN_EPS = 1e-5f;

/* y in double; mean/rstd/xhat out if non-NULL */
static void
ref_layernorm (const double *x, const double *gamma, const double *beta, double *y,
               double *xhat_out, double *mean_out, double *rstd_out, int n, int d, double eps)
{
  for (int i = 0; i < n; i++)
    {
      double mu = 0.0, var = 0.0;
      for (int j = 0; j < d; j++)
        mu += x[i * d + j];
      mu /= d;
      for (int j = 0; j < d; j++)
        var += (x[i * d + j] - mu) * (x[i * d + j] - mu);
      var /= d;
      double rs = 1.0 / sqrt (var + eps);
      for (int j = 0; j < d; j++)
        {
          double xh = (x[i * d + j] - mu) * rs;
          if (xhat_out)
            xhat_out[i * d + j] = xh;
          y[i * d + j] = xh * gamma[j] + beta[j];
        }
      if (mean_out)
        mean_out[i] = mu;
      if (rstd_out)
        rstd_out[i] = rs;
    }
}

/* L = sum y * r */
static double
ln_loss (const double *x, const double *gamma, const double *beta, const double *r)
{
  double y[LN_N * LN_D];
  ref_layernorm (x, gamma, beta, y, NULL, NULL, NULL, LN_N, LN_D, LN_EPS);
  double L = 0.0;
  for (int i = 0; i < LN_N * LN_D; i++)
    L += y[i] * r[i];
  return L;
}

/* central differences of L in each entry of v (which ln_loss reads) */
static void
ln_fd (double *v, size_t len, const double *x, const double *gamma, const double *beta,
       const double *r, double *grad)
{
  const double h = 1e-5;       /* truncation ~h^2, rounding ~1e-16/h: both << 1e-6 */
  for (size_t i = 0; i < len; i++)
    {
      double keep = v[i];
      v[i] = keep + h;
      double up = ln_loss (x, gamma, beta, r);
      v[i] = keep - h;
      double down = ln_loss (x, gamma, beta, r);
      v[i] = keep;
      grad[i] = (up - down) / (2 * h);
    }
}

static void
to_double (const float *f, double *d, size_t n)
{
  for (size_t i = 0; i < n; i++)
    d[i] = f[i];
}

static void
test_layernorm_forward (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 2);
  const int n = LN_N, d = LN_D;
  float *x = rand_floats (r, (size_t) n * d, -2, 2);
  for (int j = 0; j < d; j++)
    x[j] += 100.0f;                         /* a row far from 0: cancellation */
  for (int j = 0; j < d; j++)
    x[d + j] *= 0.01f;                      /* a narrow row: eps matters more */
  float *gamma = rand_floats (r, d, -1.5, 1.5);
  float *beta = rand_floats (r, d, -1, 1);
  float *ones = g_new (float, d), *zeros = g_new0 (float, d);
  for (int j = 0; j < d; j++)
    ones[j] = 1.0f;
  float y[LN_N * LN_D], mean[LN_N], rstd[LN_N];
  double xd[LN_N * LN_D], gd[LN_D], bd[LN_D], want[LN_N * LN_D], xhat[LN_N * LN_D];
  double mu[LN_N], rs[LN_N];
  to_double (x, xd, (size_t) n * d);
  to_double (gamma, gd, d);
  to_double (beta, bd, d);
  ref_layernorm (xd, gd, bd, want, xhat, mu, rs, n, d, LN_EPS);

  /* gamma 1, beta 0: y is xhat; each row has mean 0 and variance
   * var / (var + eps) */
  pp_layernorm_forward (x, ones, zeros, y, mean, rstd, n, d, LN_EPS);
  for (int i = 0; i < n; i++)
    {
      double m = 0.0, v = 0.0;
      for (int j = 0; j < d; j++)
        m += y[i * d + j];
      m /= d;
      for (int j = 0; j < d; j++)
        v += (y[i * d + j] - m) * (y[i * d + j] - m);
      v /= d;
      double var = 1.0 / (rs[i] * rs[i]) - LN_EPS;
      g_assert_cmpfloat (fabs (m), <, 1e-5);
      g_assert_cmpfloat (fabs (v - var / (var + LN_EPS)), <, 1e-5);
      if (i != 1)                   /* the narrow row: var ~1e-4, eps shows */
        g_assert_cmpfloat (fabs (v - 1.0), <, 1e-4);
    }

  /* against the double version: float rounding is a few ulps of
   * |xhat gamma| + |beta|, plus the mean rounded to float (half an ulp of
   * |mean|, times rstd |gamma|; matters for the row at 100); an unbiased
   * variance would be off by 1/(2d) ~ 1e-2 */
  pp_layernorm_forward (x, gamma, beta, y, mean, rstd, n, d, LN_EPS);
  for (int i = 0; i < n * d; i++)
    {
      double tol = 1e-5 * (fabs (xhat[i] * gd[i % d]) + fabs (bd[i % d]))
                   + 1.2e-7 * fabs (mu[i / d]) * rs[i / d] * fabs (gd[i % d]) + 1e-7;
      if (!(fabs (y[i] - want[i]) <= tol))
        g_error ("layernorm y[%d] = %.9g, want %.9g", i, y[i], want[i]);
    }
  assert_within (excess_f (mean, mu, n, 1e-6, 1e-6), "layernorm mean");
  assert_within (excess_f (rstd, rs, n, 1e-6, 0), "layernorm rstd");

  g_free (x);
  g_free (gamma);
  g_free (beta);
  g_free (ones);
  g_free (zeros);
  g_rand_free (r);
}

static void
test_layernorm_backward (void)
{
  GRand *rng = g_rand_new_with_seed (SEED + 3);
  const int n = LN_N, d = LN_D;
  const size_t nd = (size_t) n * d;
  float *x = rand_floats (rng, nd, -2, 2);
  for (int j = 0; j < d; j++)
    x[d + j] = 5.0f + 0.3f * x[d + j];
  float *gamma = rand_floats (rng, d, -1.5, 1.5);
  float *beta = rand_floats (rng, d, -1, 1);
  float *r = rand_floats (rng, nd, -1, 1);          /* dL/dy */
  float y[LN_N * LN_D], mean[LN_N], rstd[LN_N], dx[LN_N * LN_D];
  double xd[LN_N * LN_D], gd[LN_D], bd[LN_D], rd[LN_N * LN_D];
  to_double (x, xd, nd);
  to_double (gamma, gd, d);
  to_double (beta, bd, d);
  to_double (r, rd, nd);

  pp_layernorm_forward (x, gamma, beta, y, mean, rstd, n, d, LN_EPS);

  /* dx.  FD of the double forward is good to ~1e-9; the float kernel to a few
   * ulps of rstd |dy gamma| ~ 1e-6.  rtol 1e-4 plus a floor of 1e-4 of the
   * largest entry leaves room for both, while a dropped term (~rstd * mean of
   * 37 random products ~ 0.1) or a sign flip misses by 100x and more. */
  double fd_x[LN_N * LN_D];
  ln_fd (xd, nd, xd, gd, bd, rd, fd_x);
  double atol_x = 1e-4 * max_abs_d (fd_x, nd);
  for (size_t i = 0; i < nd; i++)
    dx[i] = NAN;
  pp_layernorm_backward_input (r, x, gamma, mean, rstd, dx, n, d);
  assert_within (excess_f (dx, fd_x, nd, 1e-4, atol_x), "layernorm backward_input");

  /* the check catches wrong formulas */
  {
    double xhat[LN_N * LN_D], ydummy[LN_N * LN_D], mu[LN_N], rs[LN_N];
    double no_xhat_term[LN_N * LN_D], no_mean_term[LN_N * LN_D], flipped[LN_N * LN_D];
    double no_rstd[LN_N * LN_D];
    ref_layernorm (xd, gd, bd, ydummy, xhat, mu, rs, n, d, LN_EPS);
    for (int i = 0; i < n; i++)
      {
        double mg = 0.0, mgx = 0.0;
        for (int j = 0; j < d; j++)
          {
            mg += rd[i * d + j] * gd[j];
            mgx += rd[i * d + j] * gd[j] * xhat[i * d + j];
          }
        mg /= d;
        mgx /= d;
        for (int j = 0; j < d; j++)
          {
            double g = rd[i * d + j] * gd[j], xh = xhat[i * d + j];
            no_xhat_term[i * d + j] = rs[i] * (g - mg);
            no_mean_term[i * d + j] = rs[i] * (g - xh * mgx);
            flipped[i * d + j] = -rs[i] * (g - mg - xh * mgx);
            no_rstd[i * d + j] = g - mg - xh * mgx;
          }
      }
    assert_caught (excess_d (no_xhat_term, fd_x, nd, 1e-4, atol_x), "dx without xhat term");
    assert_caught (excess_d (no_mean_term, fd_x, nd, 1e-4, atol_x), "dx without mean term");
    assert_caught (excess_d (flipped, fd_x, nd, 1e-4, atol_x), "dx sign flipped");
    assert_caught (excess_d (no_rstd, fd_x, nd, 1e-4, atol_x), "dx without rstd");
  }

  /* dgamma, dbeta: accumulate on top of what is there */
  double fd_g[LN_D], fd_b[LN_D];
  ln_fd (gd, d, xd, gd, bd, rd, fd_g);
  ln_fd (bd, d, xd, gd, bd, rd, fd_b);
  float *dgamma0 = rand_floats (rng, d, -1, 1), *dbeta0 = rand_floats (rng, d, -1, 1);
  float *dgamma = g_memdup2 (dgamma0, sizeof (float) * d);
  float *dbeta = g_memdup2 (dbeta0, sizeof (float) * d);
  double want_g[LN_D], want_b[LN_D];
  double atol_g = 1e-4 * max_abs_d (fd_g, d), atol_b = 1e-4 * max_abs_d (fd_b, d);
  for (int times = 1; times <= 2; times++)
    {
      pp_layernorm_backward_weight (r, x, mean, rstd, dgamma, dbeta, n, d);
      for (int j = 0; j < d; j++)
        {
          want_g[j] = dgamma0[j] + times * fd_g[j];
          want_b[j] = dbeta0[j] + times * fd_b[j];
        }
      assert_within (excess_f (dgamma, want_g, d, 1e-4, atol_g), "layernorm dgamma");
      assert_within (excess_f (dbeta, want_b, d, 1e-4, atol_b), "layernorm dbeta");
    }
  {
    /* dgamma taken as sum dy (xhat forgotten) is caught */
    double wrong[LN_D];
    for (int j = 0; j < d; j++)
      wrong[j] = fd_b[j];
    assert_caught (excess_d (wrong, fd_g, d, 1e-4, atol_g), "dgamma without xhat");
  }

  g_free (x);
  g_free (gamma);
  g_free (beta);
  g_free (r);
  g_free (dgamma0);
  g_free (dbeta0);
  g_free (dgamma);
  g_free (dbeta);
  g_rand_free (rng);
}

/* ---- GELU ---- */

static double
ref_gelu (double x)
{
  return 0.5 * x * (1.0 + tanh (sqrt (2.0 / G_PI) * (x + 0.044715 * x * x * x)));
}

static void
test_gelu (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 4);
  enum { N = 400 };
  float *x = rand_floats (r, N, -6, 6);
  static const float special[] = { 0.0f, -0.0f, 1e-3f, -1e-3f, 1.0f, -1.0f, 10.0f, -10.0f, 3.0f, -3.0f };
  memcpy (x, special, sizeof special);
  float *dy = rand_floats (r, N, -1, 1);
  float y[N], dx[N];
  double want[N], erf_gelu[N], fd[N], wrong[N];

  /* forward: 1 + tanh cancels for negative x, costing up to |x| ulp(1) / 2
   * ~ 6e-7 absolute for |x| <= 10; the erf form of GELU differs by up to
   * ~1e-3 and must be caught */
  pp_gelu_forward (x, y, N);
  for (int i = 0; i < N; i++)
    {
      want[i] = ref_gelu (x[i]);
      erf_gelu[i] = 0.5 * x[i] * (1.0 + erf (x[i] / G_SQRT2));
    }
  assert_within (excess_f (y, want, N, 1e-5, 2e-6), "gelu forward");
  assert_caught (excess_d (erf_gelu, want, N, 1e-5, 2e-6), "erf gelu taken for tanh gelu");

  /* backward vs central differences (h 1e-6 in double: error ~1e-10); the
   * float derivative loses up to |x| du ulp(1) ~ 1e-5 in 1 - tanh^2 */
  const double h = 1e-6;
  for (int i = 0; i < N; i++)
    {
      fd[i] = dy[i] * (ref_gelu ((double) x[i] + h) - ref_gelu ((double) x[i] - h)) / (2 * h);
      double u = sqrt (2.0 / G_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
      wrong[i] = dy[i] * 0.5 * (1.0 + tanh (u));       /* product rule half forgotten */
    }
  pp_gelu_backward (x, dy, dx, N);
  assert_within (excess_f (dx, fd, N, 1e-5, 1e-5), "gelu backward");
  assert_caught (excess_d (wrong, fd, N, 1e-5, 1e-5), "gelu derivative without tanh' term");

  /* dx may alias dy: same bits in place */
  float inplace[N];
  memcpy (inplace, dy, sizeof inplace);
  pp_gelu_backward (x, inplace, inplace, N);
  g_assert_cmpmem (inplace, sizeof inplace, dx, sizeof dx);

  g_free (x);
  g_free (dy);
  g_rand_free (r);
}

/* ---- softmax cross-entropy ---- */

/* sum of -log softmax(l)[label] in double, stable; probs too if asked */
static double
ref_xent (const double *l, const int32_t *labels, double *probs, int n, int c)
{
  double loss = 0.0;
  for (int i = 0; i < n; i++)
    {
      double mx = l[i * c];
      for (int j = 1; j < c; j++)
        mx = fmax (mx, l[i * c + j]);
      double s = 0.0;
      for (int j = 0; j < c; j++)
        s += exp (l[i * c + j] - mx);
      if (probs)
        for (int j = 0; j < c; j++)
          probs[i * c + j] = exp (l[i * c + j] - mx) / s;
      loss += log (s) + mx - l[i * c + labels[i]];
    }
  return loss;
}

static void
test_softmax_xent (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 5);
  enum { N = 7, C = 11 };
  float *logits = rand_floats (r, N * C, -4, 4);
  int32_t labels[N];
  for (int i = 0; i < N; i++)
    labels[i] = g_rand_int_range (r, 0, C);
  float probs[N * C], dl[N * C];
  double ld[N * C], want_p[N * C], fd[N * C];
  to_double (logits, ld, N * C);

  /* loss: per row, log-sum-exp carries ~1 ulp of expf, ~1e-7 */
  double loss = pp_softmax_xent_forward (logits, labels, probs, N, C);
  double want = ref_xent (ld, labels, want_p, N, C);
  g_assert_cmpfloat (fabs (loss - want), <=, 1e-6 * N);
  assert_within (excess_f (probs, want_p, N * C, 1e-6, 1e-9), "softmax probs");
  for (int i = 0; i < N; i++)
    {
      double s = 0.0;
      for (int j = 0; j < C; j++)
        s += probs[i * C + j];
      g_assert_cmpfloat (fabs (s - 1.0), <, 1e-6);
    }

  /* backward vs central differences of the double loss, scaled as a caller
   * averaging over the batch does */
  const float scale = 1.0f / N;
  const double h = 1e-6;
  for (int i = 0; i < N * C; i++)
    {
      double keep = ld[i];
      ld[i] = keep + h;
      double up = ref_xent (ld, labels, NULL, N, C);
      ld[i] = keep - h;
      double down = ref_xent (ld, labels, NULL, N, C);
      ld[i] = keep;
      fd[i] = scale * (up - down) / (2 * h);
    }
  for (int i = 0; i < N * C; i++)
    dl[i] = NAN;
  pp_softmax_xent_backward (probs, labels, dl, N, C, scale);
  assert_within (excess_f (dl, fd, N * C, 1e-5, 1e-6 * scale), "softmax xent backward");
  {
    double no_onehot[N * C], flipped[N * C];
    for (int i = 0; i < N * C; i++)
      {
        no_onehot[i] = scale * want_p[i];
        flipped[i] = -fd[i];
      }
    assert_caught (excess_d (no_onehot, fd, N * C, 1e-5, 1e-6 * scale), "xent grad without onehot");
    assert_caught (excess_d (flipped, fd, N * C, 1e-5, 1e-6 * scale), "xent grad sign flipped");
  }

  g_free (logits);
  g_rand_free (r);
}

static void
test_softmax_xent_stable (void)
{
  enum { N = 3, C = 5 };
  const float logits[N * C] = {
    1e4f, 0.0f, -1e4f, 1e4f - 1.0f, 5e3f,     /* label -1e4: p underflows to 0 */
    1e4f, 1e4f, 1e4f, 1e4f, 1e4f,             /* uniform */
    -1e4f, -1e4f + 2.0f, -1e4f, -1e4f, -1e4f,
  };
  const int32_t labels[N] = { 2, 3, 1 };
  float probs[N * C], dl[N * C];
  double ld[N * C], want_p[N * C];
  to_double (logits, ld, N * C);

  double loss = pp_softmax_xent_forward (logits, labels, probs, N, C);
  double want = ref_xent (ld, labels, want_p, N, C);
  g_assert_true (isfinite (loss));
  g_assert_cmpfloat (fabs (loss - want), <=, 1e-6 * fabs (want));
  /* row 0 alone: 2e4 + log(1 + e^-1) */
  g_assert_cmpfloat (want, >, 2e4);
  for (int i = 0; i < N * C; i++)
    g_assert_true (isfinite (probs[i]));
  assert_within (excess_f (probs, want_p, N * C, 1e-6, 1e-9), "softmax probs at 1e4");
  for (int j = 0; j < C; j++)
    g_assert_cmpfloat (fabs (probs[C + j] - 0.2), <, 1e-7);

  pp_softmax_xent_backward (probs, labels, dl, N, C, 1.0f);
  for (int i = 0; i < N * C; i++)
    g_assert_true (isfinite (dl[i]));
  g_assert_cmpfloat (dl[2], ==, -1.0f);             /* p = 0 exactly, minus 1 */
}

/* ---- AdamW ---- */

static void
test_adamw (void)
{
  GRand *r = g_rand_new_with_seed (SEED + 6);
  enum { N = 64, STEPS = 3 };
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  float *p = rand_floats (r, N, -2, 2);
  float m[N] = { 0 }, v[N] = { 0 };
  double pd[N], md[N] = { 0 }, vd[N] = { 0 }, nobias[N];
  to_double (p, pd, N);
  to_double (p, nobias, N);

  for (int t = 1; t <= STEPS; t++)
    {
      float *g = rand_floats (r, N, -1, 1);
      g[0] = 0.0f;
      g[1] = 1e-7f;                       /* below eps after sqrt: eps matters */
      g[2] = 30.0f;
      pp_adamw (p, g, m, v, N, lr, b1, b2, eps, wd, t);

      /* the header's formula in double, with the float hyperparameters */
      double c1 = 1.0 - pow (b1, t), c2 = 1.0 - pow (b2, t);
      for (int i = 0; i < N; i++)
        {
          md[i] = (double) b1 * md[i] + (1.0 - (double) b1) * g[i];
          vd[i] = (double) b2 * vd[i] + (1.0 - (double) b2) * g[i] * g[i];
          pd[i] -= lr * ((md[i] / c1) / (sqrt (vd[i] / c2) + eps) + wd * pd[i]);
          nobias[i] -= lr * (md[i] / (sqrt (vd[i]) + eps) + wd * nobias[i]);
        }
      /* an update is ~lr, carried in float to a few ulps; p itself rounds at
       * ~6e-8 |p| per step */
      double atol = 1e-5 * lr * t;
      char *what = g_strdup_printf ("adamw p after %d step(s)", t);
      assert_within (excess_f (p, pd, N, 1e-6 * t, atol), what);
      assert_caught (excess_d (nobias, pd, N, 1e-6 * t, atol), "adamw without bias correction");
      g_free (what);
      /* b1 m + (1 - b1) g cancels when the signs differ: a few ulps of the
       * terms (<= 1 here, but for g[2]), so an absolute floor */
      assert_within (excess_f (m, md, N, 1e-6, 2e-7), "adamw m");
      assert_within (excess_f (v, vd, N, 1e-6, 1e-15), "adamw v");
      g_free (g);
    }
  g_free (p);
  g_rand_free (r);
}

/* ---- determinism ---- */

typedef struct
{
  float out[64 * 48 + 64 * 32 + 64 * 48 + 64 * 32 + 32 * 48];
  double loss;
} Outputs;

/* a little forward + backward over every kernel, on fixed inputs */
static void
run_all (Outputs *o)
{
  enum { N = 64, IN = 32, OUT = 48 };
  GRand *r = g_rand_new_with_seed (SEED + 7);
  float *x = rand_floats (r, N * IN, -1, 1);
  float *W = rand_floats (r, IN * OUT, -1, 1);
  float *b = rand_floats (r, OUT, -1, 1);
  float *gamma = rand_floats (r, OUT, -1, 1), *beta = rand_floats (r, OUT, -1, 1);
  int32_t labels[N];
  for (int i = 0; i < N; i++)
    labels[i] = g_rand_int_range (r, 0, OUT);
  float *h = o->out, *dx = h + N * OUT, *ln = dx + N * IN, *dln = ln + N * OUT;
  float *dW = dln + N * IN;
  float mean[N], rstd[N], dgamma[OUT] = { 0 }, dbeta[OUT] = { 0 }, db[OUT] = { 0 };
  float probs[N * OUT], dl[N * OUT], g[N * OUT], dg[N * OUT];
  float m[IN * OUT] = { 0 }, v[IN * OUT] = { 0 };

  memset (dW, 0, sizeof (float) * IN * OUT);
  pp_linear_forward (x, W, b, h, N, IN, OUT);
  pp_gelu_forward (h, g, (size_t) N * OUT);
  pp_layernorm_forward (g, gamma, beta, ln, mean, rstd, N, OUT, 1e-5f);
  o->loss = pp_softmax_xent_forward (ln, labels, probs, N, OUT);
  pp_softmax_xent_backward (probs, labels, dl, N, OUT, 1.0f / N);
  pp_layernorm_backward_weight (dl, g, mean, rstd, dgamma, dbeta, N, OUT);
  pp_layernorm_backward_input (dl, g, gamma, mean, rstd, dg, N, OUT);
  pp_gelu_backward (h, dg, dg, (size_t) N * OUT);
  pp_linear_backward_input (dg, W, dx, N, IN, OUT);
  pp_linear_backward_weight (x, dg, dW, db, N, IN, OUT);
  pp_adamw (W, dW, m, v, IN * OUT, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
  memcpy (ln, W, sizeof (float) * IN * OUT);       /* the updated weights too */
  memcpy (dln, dg, sizeof (float) * N * IN);

  g_free (x);
  g_free (W);
  g_free (b);
  g_free (gamma);
  g_free (beta);
  g_rand_free (r);
}

static gpointer
run_all_thread (gpointer data)
{
  run_all (data);
  return NULL;
}

static void
test_deterministic (void)
{
  Outputs *a = g_new0 (Outputs, 1), *b = g_new0 (Outputs, 1);
  Outputs *c = g_new0 (Outputs, 1), *d = g_new0 (Outputs, 1);
  run_all (a);
  run_all (b);
  g_assert_cmpmem (a, sizeof *a, b, sizeof *b);

  /* two ranks at once, each on its own thread: same bits */
  GThread *t1 = g_thread_new ("rank0", run_all_thread, c);
  GThread *t2 = g_thread_new ("rank1", run_all_thread, d);
  g_thread_join (t1);
  g_thread_join (t2);
  g_assert_cmpmem (a, sizeof *a, c, sizeof *c);
  g_assert_cmpmem (a, sizeof *a, d, sizeof *d);
  g_free (a);
  g_free (b);
  g_free (c);
  g_free (d);
}

int
main (int argc, char **argv)
{
  if (g_getenv ("PP_TEST_KERNELS_INIT_CHILD"))
    return init_child ();

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/kernels/init", test_init);
  g_test_add_func ("/kernels/gemm", test_gemm);
  g_test_add_func ("/kernels/gemm-empty", test_gemm_empty);
  g_test_add_func ("/kernels/linear", test_linear);
  g_test_add_func ("/kernels/layernorm/forward", test_layernorm_forward);
  g_test_add_func ("/kernels/layernorm/backward", test_layernorm_backward);
  g_test_add_func ("/kernels/gelu", test_gelu);
  g_test_add_func ("/kernels/softmax-xent", test_softmax_xent);
  g_test_add_func ("/kernels/softmax-xent/stable", test_softmax_xent_stable);
  g_test_add_func ("/kernels/adamw", test_adamw);
  g_test_add_func ("/kernels/deterministic", test_deterministic);
  return g_test_run ();
}
