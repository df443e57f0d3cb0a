/* The bundled model: config errors, partitions, initialisation, the synthetic
 * task, gradients (finite differences, chained parts, I+W = B, recompute),
 * in-flight bookkeeping, and that training lowers the loss. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-batch-pool.h"
#include "pp-kernels.h"
#include "pp-model.h"

static PpModel *
model_new (int L, int D, int hidden_mult, int in_dim, int classes, uint64_t seed)
{
  PpModelConfig cfg = { .layers = L, .width = D, .hidden_mult = hidden_mult,
                        .in_dim = in_dim, .classes = classes, .seed = seed };
  PpError err = { 0 };
  PpModel *m = pp_model_new (&cfg, &err);
  if (m == NULL)
    g_error ("pp_model_new: %s", err.msg);
  return m;
}

static void
assert_one_line (const PpError *err)
{
  g_assert_cmpstr (err->msg, !=, "");
  g_assert_null (strchr (err->msg, '\n'));
}

/* ---- config -------------------------------------------------------------- */

static void
test_config (void)
{
  PpError err = { 0 };
  PpModelConfig cfg = { .layers = 2, .width = 4 };
  g_assert_null (pp_model_new (&cfg, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "--width must be at least 8"));
  assert_one_line (&err);

  memset (&err, 0, sizeof err);
  cfg = (PpModelConfig) { .layers = 0, .width = 16 };
  g_assert_null (pp_model_new (&cfg, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "--layers must be at least 1"));
  assert_one_line (&err);

  PpModel *m = model_new (3, 16, 0, 0, 0, 1);
  const PpModelConfig *c = pp_model_config (m);
  g_assert_cmpint (c->hidden_mult, ==, 4);
  g_assert_cmpint (c->in_dim, ==, 16);
  g_assert_cmpint (c->classes, ==, 16);
  /* in 16*16+16, 3 blocks of 2*16 + 16*64 + 64 + 64*16 + 16, head 16*16+16 */
  g_assert_cmpuint (pp_model_n_params (m), ==, 272 + 3 * 2160 + 272);
  g_assert_cmpfloat (pp_model_cost_block (m), >, pp_model_cost_input (m));
  pp_model_free (m);
}

/* ---- partition ----------------------------------------------------------- */

static void
assert_partition (const PpModel *m, int P, const char *spec, const int *want)
{
  int got[64];
  PpError err = { 0 };
  if (pp_model_partition (m, P, spec, got, &err) != PP_OK)
    g_error ("partition %d %s: %s", P, spec ? spec : "auto", err.msg);
  for (int i = 0; i < P; i++)
    if (got[i] != want[i])
      {
        GString *s = g_string_new (NULL);
        for (int j = 0; j < P; j++)
          g_string_append_printf (s, "%s%d", j ? "," : "", got[j]);
        g_error ("partition P=%d %s: got %s, part %d should have %d", P, spec ? spec : "auto",
                 s->str, i, want[i]);
      }
}

static void
assert_partition_error (const PpModel *m, int P, const char *spec, const char *needle)
{
  int got[64];
  PpError err = { 0 };
  g_assert_cmpint (pp_model_partition (m, P, spec, got, &err), ==, PP_EINVAL);
  assert_one_line (&err);
  if (strstr (err.msg, needle) == NULL)
    g_error ("partition %s: message \"%s\" lacks \"%s\"", spec ? spec : "auto", err.msg, needle);
}

static double
max_part_cost (const PpModel *m, int P, const int *b)
{
  double worst = 0;
  for (int i = 0; i < P; i++)
    {
      double c = b[i] * pp_model_cost_block (m);
      if (i == 0)
        c += pp_model_cost_input (m);
      if (i == P - 1)
        c += pp_model_cost_head (m);
      worst = fmax (worst, c);
    }
  return worst;
}

static double
sum_sq_cost (const PpModel *m, int P, const int *b)
{
  double s = 0;
  for (int i = 0; i < P; i++)
    {
      double c = b[i] * pp_model_cost_block (m);
      if (i == 0)
        c += pp_model_cost_input (m);
      if (i == P - 1)
        c += pp_model_cost_head (m);
      s += c * c;
    }
  return s;
}

/* Every composition of L into P positive parts, compared with auto: no
 * smaller largest part, and among those as small, no smaller sum of squares. */
static void
check_auto_is_optimal (const PpModel *m, int L, int P)
{
  int got[16], b[16];
  PpError err = { 0 };
  g_assert_cmpint (pp_model_partition (m, P, NULL, got, &err), ==, PP_OK);
  int sum = 0;
  for (int i = 0; i < P; i++)
    {
      g_assert_cmpint (got[i], >=, 1);
      sum += got[i];
    }
  g_assert_cmpint (sum, ==, L);
  double best = max_part_cost (m, P, got), best_sq = sum_sq_cost (m, P, got);
  /* enumerate compositions by odometer over the first P-1 parts */
  for (int i = 0; i < P - 1; i++)
    b[i] = 1;
  for (;;)
    {
      int s = 0;
      for (int i = 0; i < P - 1; i++)
        s += b[i];
      if (L - s >= 1)
        {
          b[P - 1] = L - s;
          double c = max_part_cost (m, P, b);
          g_assert_cmpfloat (best, <=, c);
          if (c == best)
            g_assert_cmpfloat (best_sq, <=, sum_sq_cost (m, P, b));
        }
      int i = 0;
      while (i < P - 1 && ++b[i] > L)
        b[i++] = 1;
      if (i == P - 1)
        break;
    }
}

static void
test_partition (void)
{
  PpModel *m = model_new (32, 64, 0, 0, 0, 1);
  /* input and head far cheaper than a block: as even as possible, the
   * shorter parts at the ends */
  assert_partition (m, 4, NULL, (int[]) { 8, 8, 8, 8 });
  assert_partition (m, 4, "auto", (int[]) { 8, 8, 8, 8 });
  assert_partition (m, 1, NULL, (int[]) { 32 });
  assert_partition (m, 32, NULL, (int[]) { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                           1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 });
  assert_partition (m, 4, "5,9,9,9", (int[]) { 5, 9, 9, 9 });
  assert_partition (m, 4, " 5, 9 ,9,9", (int[]) { 5, 9, 9, 9 });
  pp_model_free (m);

  m = model_new (30, 64, 0, 0, 0, 1);
  assert_partition (m, 4, NULL, (int[]) { 7, 8, 8, 7 });
  assert_partition (m, 2, NULL, (int[]) { 15, 15 });
  pp_model_free (m);

  /* a tie: one part must hold 3 blocks; not an end part (it carries an
   * extra), and among the middle ones the later */
  m = model_new (9, 64, 0, 0, 0, 1);
  assert_partition (m, 4, NULL, (int[]) { 2, 2, 3, 2 });
  pp_model_free (m);

  /* a heavy head (classes = 8 D costs about one block) takes a block from
   * the last part: 31 blocks go 7,8,8,8 with the default 16 classes (part
   * 0's input projection outweighs the small head), 8,8,8,7 with it */
  m = model_new (31, 64, 0, 0, 0, 1);
  assert_partition (m, 4, NULL, (int[]) { 7, 8, 8, 8 });
  pp_model_free (m);
  m = model_new (31, 64, 0, 0, 8 * 64, 1);
  g_assert_cmpfloat (pp_model_cost_head (m), >, 0.9 * pp_model_cost_block (m));
  assert_partition (m, 4, NULL, (int[]) { 8, 8, 8, 7 });
  pp_model_free (m);
  /* 16 D: about two blocks */
  m = model_new (32, 64, 0, 0, 16 * 64, 1);
  int b[4];
  PpError err = { 0 };
  g_assert_cmpint (pp_model_partition (m, 4, NULL, b, &err), ==, PP_OK);
  g_assert_cmpint (b[0] + b[1] + b[2] + b[3], ==, 32);
  g_assert_cmpint (b[3], <, b[1]);
  g_assert_cmpint (b[3], <, b[2]);
  g_assert_cmpint (b[3], <, 8);
  pp_model_free (m);

  /* a heavy input (in_dim = 16 D) likewise on part 0 */
  m = model_new (30, 64, 0, 16 * 64, 0, 1);
  g_assert_cmpint (pp_model_partition (m, 4, NULL, b, &err), ==, PP_OK);
  g_assert_cmpint (b[0], <, b[1]);
  g_assert_cmpint (b[0], <, b[3]);
  pp_model_free (m);

  /* brute force over small cases, with cheap, even and heavy extras */
  const int extras[][2] = { { 0, 0 }, { 8 * 16, 0 }, { 0, 8 * 16 }, { 4 * 16, 12 * 16 } };
  for (size_t e = 0; e < G_N_ELEMENTS (extras); e++)
    for (int L = 1; L <= 9; L++)
      {
        PpModel *mm = model_new (L, 16, 0, extras[e][0], extras[e][1], 1);
        for (int P = 1; P <= L && P <= 5; P++)
          check_auto_is_optimal (mm, L, P);
        pp_model_free (mm);
      }

  m = model_new (30, 64, 0, 0, 0, 1);
  assert_partition_error (m, 4, "7,8,8", "has 3 entries; the schedule has 4 stages");
  assert_partition_error (m, 4, "7,8,8,8", "sums to 31 blocks; --layers is 30");
  assert_partition_error (m, 4, "0,8,8,14", "every stage needs at least 1 block");
  assert_partition_error (m, 4, "7,x,8,8", "is not a comma list");
  assert_partition_error (m, 4, "7,8,8,7,", "is not a comma list");
  assert_partition_error (m, 4, "7,,8,8", "is not a comma list");
  assert_partition_error (m, 4, "", "is not a comma list");
  assert_partition_error (m, 4, "-7,8,8,7", "is not a comma list");
  assert_partition_error (m, 4, "7.5,8,8,7", "is not a comma list");
  assert_partition_error (m, 4, "99999999999999999999,8,8,7", "more than the 30 layers");
  assert_partition_error (m, 0, NULL, "at least 1 stage");
  pp_model_free (m);

  m = model_new (3, 16, 0, 0, 0, 1);
  assert_partition_error (m, 4, NULL, "--layers 3 cannot be split into 4 stages; use at least 4 layers");
  assert_partition_error (m, 4, "1,1,1,0", "--layers 3 cannot be split into 4 stages");
  pp_model_free (m);
}

/* ---- parts from a partition ---------------------------------------------- */

typedef struct {
  int      P;
  int      blocks[16];
  PpChunk *c[16];
} Parts;

static void
parts_new (Parts *p, const PpModel *m, int P, const char *spec, int rows, int inflight,
           int recompute)
{
  PpError err = { 0 };
  p->P = P;
  if (pp_model_partition (m, P, spec, p->blocks, &err) != PP_OK)
    g_error ("partition: %s", err.msg);
  int first = 0;
  for (int i = 0; i < P; i++)
    {
      p->c[i] = pp_chunk_new (m, i, P, first, p->blocks[i], rows, inflight, recompute, &err);
      if (p->c[i] == NULL)
        g_error ("chunk %d: %s", i, err.msg);
      first += p->blocks[i];
    }
}

static void
parts_free (Parts *p)
{
  for (int i = 0; i < p->P; i++)
    pp_chunk_free (p->c[i]);
}

static size_t
parts_n_params (Parts *p)
{
  size_t n = 0;
  for (int i = 0; i < p->P; i++)
    n += pp_chunk_n_params (p->c[i]);
  return n;
}

/* Concatenated parameters (grads = 0) or gradients (grads = 1). */
static float *
parts_concat (Parts *p, int grads)
{
  float *out = g_new (float, parts_n_params (p));
  size_t off = 0;
  for (int i = 0; i < p->P; i++)
    {
      size_t n = pp_chunk_n_params (p->c[i]);
      memcpy (out + off, grads ? pp_chunk_grads (p->c[i]) : pp_chunk_params (p->c[i]),
              n * sizeof (float));
      off += n;
    }
  return out;
}

static void
test_init_partition_invariant (void)
{
  PpModel *m = model_new (5, 16, 3, 12, 10, 77);
  Parts one, three;
  parts_new (&one, m, 1, NULL, 4, 1, 0);
  parts_new (&three, m, 3, "2,1,2", 4, 1, 0);
  g_assert_cmpuint (parts_n_params (&one), ==, pp_model_n_params (m));
  g_assert_cmpuint (parts_n_params (&three), ==, pp_model_n_params (m));
  float *a = parts_concat (&one, 0), *b = parts_concat (&three, 0);
  g_assert_cmpint (memcmp (a, b, pp_model_n_params (m) * sizeof (float)), ==, 0);

  /* the layout: Win 12x16 ~ N(0, 0.02^2), bin 0, gamma 1, beta 0, ... */
  double s2 = 0;
  for (int i = 0; i < 12 * 16; i++)
    s2 += (double) a[i] * a[i];
  g_assert_cmpfloat (fabs (sqrt (s2 / (12 * 16)) - 0.02), <, 0.004);
  for (int i = 0; i < 16; i++)
    {
      g_assert_cmpfloat (a[12 * 16 + i], ==, 0.0f);          /* bin */
      g_assert_cmpfloat (a[12 * 16 + 16 + i], ==, 1.0f);     /* gamma of block 0 */
      g_assert_cmpfloat (a[12 * 16 + 32 + i], ==, 0.0f);     /* beta of block 0 */
    }
  /* W2 of block 0 scaled by 1/sqrt(2L) */
  size_t w2 = 12 * 16 + 16 + 32 + 16 * 48 + 48;
  s2 = 0;
  for (int i = 0; i < 48 * 16; i++)
    s2 += (double) a[w2 + i] * a[w2 + i];
  g_assert_cmpfloat (fabs (sqrt (s2 / (48 * 16)) - 0.02 / sqrt (10.0)), <, 0.001);
  /* blocks differ from each other */
  g_assert_cmpint (memcmp (a + 12 * 16 + 16 + 32, a + 12 * 16 + 16 + 32 + (32 + 16 * 48 * 2 + 48 + 16),
                           16 * 48 * sizeof (float)), !=, 0);
  g_free (a);
  g_free (b);
  parts_free (&one);
  parts_free (&three);

  /* another seed, other weights */
  PpModel *m2 = model_new (5, 16, 3, 12, 10, 78);
  parts_new (&one, m, 1, NULL, 4, 1, 0);
  parts_new (&three, m2, 1, NULL, 4, 1, 0);
  a = parts_concat (&one, 0);
  b = parts_concat (&three, 0);
  g_assert_cmpint (memcmp (a, b, pp_model_n_params (m) * sizeof (float)), !=, 0);
  g_free (a);
  g_free (b);
  parts_free (&one);
  parts_free (&three);
  pp_model_free (m2);
  pp_model_free (m);
}

/* ---- the task ------------------------------------------------------------ */

static void
test_batch (void)
{
  PpModel *m = model_new (2, 16, 0, 24, 8, 5);
  const int B = 512, in = 24;
  float *x1 = g_new (float, B * in), *x2 = g_new (float, B * in);
  int32_t *l1 = g_new (int32_t, B), *l2 = g_new (int32_t, B);

  pp_model_batch (m, 9, 3, B, x1, l1);
  pp_model_batch (m, 9, 3, B, x2, l2);
  g_assert_cmpint (memcmp (x1, x2, sizeof (float) * B * in), ==, 0);
  g_assert_cmpint (memcmp (l1, l2, sizeof (int32_t) * B), ==, 0);

  /* a smaller batch is a prefix: micro-batches of any size see the same rows */
  memset (x2, 0, sizeof (float) * B * in);
  pp_model_batch (m, 9, 3, 17, x2, l2);
  g_assert_cmpint (memcmp (x1, x2, sizeof (float) * 17 * in), ==, 0);
  g_assert_cmpint (memcmp (l1, l2, sizeof (int32_t) * 17), ==, 0);

  /* the same labels from a second model object with the same seed */
  PpModel *same = model_new (7, 16, 2, 24, 8, 5);   /* depth does not matter */
  pp_model_batch (same, 9, 3, B, x2, l2);
  g_assert_cmpint (memcmp (l1, l2, sizeof (int32_t) * B), ==, 0);
  pp_model_free (same);

  /* another step, another data seed: other inputs */
  pp_model_batch (m, 9, 4, B, x2, l2);
  g_assert_cmpint (memcmp (x1, x2, sizeof (float) * B * in), !=, 0);
  pp_model_batch (m, 10, 3, B, x2, l2);
  g_assert_cmpint (memcmp (x1, x2, sizeof (float) * B * in), !=, 0);

  /* another model seed: same inputs, another teacher */
  PpModel *other = model_new (2, 16, 0, 24, 8, 6);
  pp_model_batch (other, 9, 3, B, x2, l2);
  g_assert_cmpint (memcmp (x1, x2, sizeof (float) * B * in), ==, 0);
  g_assert_cmpint (memcmp (l1, l2, sizeof (int32_t) * B), !=, 0);
  pp_model_free (other);

  /* inputs ~ N(0, 1); labels in range and spread over the classes */
  double s = 0, s2 = 0;
  for (int i = 0; i < B * in; i++)
    s += x1[i], s2 += (double) x1[i] * x1[i];
  g_assert_cmpfloat (fabs (s / (B * in)), <, 0.05);
  g_assert_cmpfloat (fabs (s2 / (B * in) - 1.0), <, 0.05);
  int count[8] = { 0 };
  for (int i = 0; i < B; i++)
    {
      g_assert_cmpint (l1[i], >=, 0);
      g_assert_cmpint (l1[i], <, 8);
      count[l1[i]]++;
    }
  for (int c = 0; c < 8; c++)
    {
      g_assert_cmpint (count[c], >, 0);
      g_assert_cmpint (count[c], <, B * 2 / 5);
    }
  g_free (x1);
  g_free (x2);
  g_free (l1);
  g_free (l2);
  pp_model_free (m);
}

/* ---- gradients ----------------------------------------------------------- */

/* Loss sum of one forward (then a backward to release the slot; grads are
 * saved and restored around it). */
static double
chunk_loss (PpChunk *c, const float *x, const int32_t *labels)
{
  size_t n = pp_chunk_n_params (c);
  float *save = g_memdup2 (pp_chunk_grads (c), n * sizeof (float));
  double loss;
  PpError err = { 0 };
  g_assert_cmpint (pp_chunk_forward (c, 0, x, labels, NULL, &loss, &err), ==, PP_OK);
  g_assert_cmpint (pp_chunk_backward (c, 0, NULL, NULL, 1.0f, &err), ==, PP_OK);
  pp_chunk_set_grads (c, save);
  g_free (save);
  return loss;
}

/* Largest relative difference between central differences of the loss and
 * the gradient g, over the values v[0..n) (parameters or inputs): the
 * difference is measured against max(|fd|, |g|, floor), so values with a tiny
 * gradient are held to an absolute bound.  *n_big counts those whose
 * gradient exceeds the floor. */
static double
fd_check (PpChunk *c, float *v, const float *g, size_t n, const float *x, const int32_t *labels,
          float eps, double floor, int *n_big)
{
  double worst = 0;
  *n_big = 0;
  for (size_t i = 0; i < n; i++)
    {
      float keep = v[i];
      v[i] = keep + eps;
      double lp = chunk_loss (c, x, labels);
      v[i] = keep - eps;
      double lm = chunk_loss (c, x, labels);
      v[i] = keep;
      /* the step actually taken in float */
      double h = (double) (keep + eps) - (double) (keep - eps);
      double fd = (lp - lm) / h;
      double scale = fmax (fmax (fabs (fd), fabs (g[i])), floor);
      worst = fmax (worst, fabs (fd - g[i]) / scale);
      if (fabs (g[i]) > floor)
        (*n_big)++;
    }
  return worst;
}

static void
test_finite_difference (void)
{
  PpModel *m = model_new (2, 8, 0, 0, 4, 11);
  const int R = 3, in = 8;
  PpError err = { 0 };
  PpChunk *c = pp_chunk_new (m, 0, 1, 0, 2, R, 1, 0, &err);
  g_assert_nonnull (c);
  size_t n = pp_chunk_n_params (c);
  float *p = pp_chunk_params (c);

  /* Larger weights than the 0.02 of the init, so every nonlinearity bends
   * and every gradient is well above float noise. */
  GRand *rng = g_rand_new_with_seed (3);
  for (size_t i = 0; i < n; i++)
    p[i] = (float) g_rand_double_range (rng, -0.6, 0.6);
  float x[3 * 8];
  int32_t labels[3] = { 1, 3, 0 };
  for (int i = 0; i < R * in; i++)
    x[i] = (float) g_rand_double_range (rng, -1.5, 1.5);
  g_rand_free (rng);

  pp_chunk_zero_grads (c);
  double loss;
  float din[3 * 8];
  g_assert_cmpint (pp_chunk_forward (c, 0, x, labels, NULL, &loss, &err), ==, PP_OK);
  g_assert_cmpint (pp_chunk_backward (c, 0, NULL, din, 1.0f, &err), ==, PP_OK);
  g_assert_true (isfinite (loss));
  g_assert_cmpfloat (loss, >, 0.1);
  float *g = g_memdup2 (pp_chunk_grads (c), n * sizeof (float));

  const float eps = 1e-2f;
  const double floor = 1e-2;
  int big;
  double worst = fd_check (c, p, g, n, x, labels, eps, floor, &big);
  g_test_message ("finite differences over %zu parameters: worst relative error %.3g (%d gradients above %g)",
                  n, worst, big, floor);
  g_assert_cmpfloat (worst, <, 5e-2);
  g_assert_cmpint (big, >, (int) n / 4);

  /* the input gradient likewise */
  double worst_in = fd_check (c, x, din, R * in, x, labels, eps, floor, &big);
  g_test_message ("finite differences over the input: worst relative error %.3g", worst_in);
  g_assert_cmpfloat (worst_in, <, 5e-2);
  g_assert_cmpint (big, >, R * in / 2);

  /* the check can fail: a gradient 10% off, or one entry of the head bias
   * 8% off, is caught */
  float *wrong = g_memdup2 (g, n * sizeof (float));
  for (size_t i = 0; i < n; i++)
    wrong[i] *= 1.1f;
  g_assert_cmpfloat (fd_check (c, p, wrong, n, x, labels, eps, floor, &big), >, 5e-2);
  memcpy (wrong, g, n * sizeof (float));
  wrong[n - 1] *= 1.08f;
  g_assert_cmpfloat (fd_check (c, p + n - 4, wrong + n - 4, 4, x, labels, eps, floor, &big), >, 5e-2);
  g_free (wrong);

  g_free (g);
  pp_chunk_free (c);
  pp_model_free (m);
}

enum { MODE_B, MODE_IW };

/* Runs M micro-batches of one step through the parts (all forwards, then the
 * backwards from the last micro-batch down); returns the loss sum and leaves
 * the gradients in the chunks. */
static double
run_step (Parts *p, const PpModel *m, int rows, int M, int mode, int step)
{
  const PpModelConfig *cfg = pp_model_config (m);
  int B = rows * M, D = cfg->width;
  float *x = g_new (float, (size_t) B * cfg->in_dim);
  int32_t *labels = g_new (int32_t, B);
  pp_model_batch (m, 42, step, B, x, labels);
  /* act[i][mb]: output of part i; grad[i][mb]: input gradient of part i */
  float *act = g_new0 (float, (size_t) p->P * B * D);
  float *grad = g_new0 (float, (size_t) p->P * B * D);
  double loss = 0;
  PpError err = { 0 };
  for (int i = 0; i < p->P; i++)
    pp_chunk_zero_grads (p->c[i]);
  for (int mb = 0; mb < M; mb++)
    for (int i = 0; i < p->P; i++)
      {
        const float *in = i == 0 ? x + (size_t) mb * rows * cfg->in_dim
                                 : act + ((size_t) (i - 1) * B + (size_t) mb * rows) * D;
        float *out = i == p->P - 1 ? NULL : act + ((size_t) i * B + (size_t) mb * rows) * D;
        double l = 0;
        if (pp_chunk_forward (p->c[i], mb, in, labels + mb * rows, out, &l, &err) != PP_OK)
          g_error ("forward: %s", err.msg);
        loss += l;
      }
  for (int mb = M - 1; mb >= 0; mb--)
    for (int i = p->P - 1; i >= 0; i--)
      {
        const float *dout = i == p->P - 1 ? NULL
                                          : grad + ((size_t) (i + 1) * B + (size_t) mb * rows) * D;
        float *din = i == 0 ? NULL : grad + ((size_t) i * B + (size_t) mb * rows) * D;
        PpStatus st = mode == MODE_B
          ? pp_chunk_backward (p->c[i], mb, dout, din, 1.0f / B, &err)
          : pp_chunk_backward_input (p->c[i], mb, dout, din, 1.0f / B, &err);
        if (st != PP_OK)
          g_error ("backward: %s", err.msg);
      }
  if (mode == MODE_IW)   /* all the W halves later, as Zero Bubble defers them */
    for (int mb = M - 1; mb >= 0; mb--)
      for (int i = p->P - 1; i >= 0; i--)
        if (pp_chunk_backward_weight (p->c[i], mb, &err) != PP_OK)
          g_error ("backward_weight: %s", err.msg);
  for (int i = 0; i < p->P; i++)
    {
      g_assert_cmpint (pp_chunk_inflight (p->c[i]), ==, 0);
      g_assert_cmpuint (pp_chunk_activation_bytes (p->c[i]), ==, 0);
    }
  g_free (x);
  g_free (labels);
  g_free (act);
  g_free (grad);
  return loss;
}

static void
assert_close (const float *a, const float *b, size_t n, double rel, const char *what)
{
  double amax = 0;
  for (size_t i = 0; i < n; i++)
    amax = fmax (amax, fabs (b[i]));
  g_assert_cmpfloat (amax, >, 0);
  for (size_t i = 0; i < n; i++)
    if (fabs ((double) a[i] - b[i]) > rel * fabs (b[i]) + 1e-6 * rel * amax)
      g_error ("%s: element %zu: %.9g vs %.9g", what, i, a[i], b[i]);
}

static void
test_chained_parts (void)
{
  PpModel *m = model_new (4, 16, 0, 12, 6, 21);
  const int rows = 5, M = 3;
  Parts one, two, three;
  parts_new (&one, m, 1, NULL, rows, M, 0);
  parts_new (&two, m, 2, "2,2", rows, M, 0);
  parts_new (&three, m, 3, "1,2,1", rows, M, 0);   /* a middle part: no input, no head */
  double l1 = run_step (&one, m, rows, M, MODE_B, 0);
  double l2 = run_step (&two, m, rows, M, MODE_B, 0);
  double l3 = run_step (&three, m, rows, M, MODE_B, 0);
  g_assert_cmpfloat (fabs (l2 - l1), <=, 1e-6 * fabs (l1));
  g_assert_cmpfloat (fabs (l3 - l1), <=, 1e-6 * fabs (l1));
  float *g1 = parts_concat (&one, 1), *g2 = parts_concat (&two, 1), *g3 = parts_concat (&three, 1);
  size_t n = pp_model_n_params (m);
  assert_close (g2, g1, n, 1e-6, "2 parts vs 1");
  assert_close (g3, g1, n, 1e-6, "3 parts vs 1");
  g_free (g1);
  g_free (g2);
  g_free (g3);
  parts_free (&one);
  parts_free (&two);
  parts_free (&three);
  pp_model_free (m);
}

/* I then W (all W's deferred) gives B's gradients bit for bit; recompute
 * gives the gradients without recompute bit for bit. */
static void
test_split_and_recompute (void)
{
  PpModel *m = model_new (4, 16, 0, 12, 6, 23);
  const int rows = 4, M = 4;
  size_t n = pp_model_n_params (m);
  Parts b, iw, rb, riw;
  parts_new (&b, m, 3, "1,2,1", rows, M, 0);
  parts_new (&iw, m, 3, "1,2,1", rows, M, 0);
  parts_new (&rb, m, 3, "1,2,1", rows, M, 1);
  parts_new (&riw, m, 3, "1,2,1", rows, M, 1);
  for (int step = 0; step < 2; step++)   /* the second step reuses the slots */
    {
      double lb = run_step (&b, m, rows, M, MODE_B, step);
      double liw = run_step (&iw, m, rows, M, MODE_IW, step);
      double lrb = run_step (&rb, m, rows, M, MODE_B, step);
      double lriw = run_step (&riw, m, rows, M, MODE_IW, step);
      g_assert_cmpfloat (lb, ==, liw);
      g_assert_cmpfloat (lb, ==, lrb);
      g_assert_cmpfloat (lb, ==, lriw);
      float *gb = parts_concat (&b, 1), *giw = parts_concat (&iw, 1);
      float *grb = parts_concat (&rb, 1), *griw = parts_concat (&riw, 1);
      g_assert_cmpint (memcmp (gb, giw, n * sizeof (float)), ==, 0);
      g_assert_cmpint (memcmp (gb, grb, n * sizeof (float)), ==, 0);
      g_assert_cmpint (memcmp (gb, griw, n * sizeof (float)), ==, 0);
      double norm = 0;
      for (size_t i = 0; i < n; i++)
        norm += (double) gb[i] * gb[i];
      g_assert_cmpfloat (norm, >, 0);
      g_free (gb);
      g_free (giw);
      g_free (grb);
      g_free (griw);
    }
  parts_free (&b);
  parts_free (&iw);
  parts_free (&rb);
  parts_free (&riw);
  pp_model_free (m);
}

/* ---- in-flight bookkeeping ----------------------------------------------- */

static void
test_inflight (void)
{
  PpModel *m = model_new (3, 16, 0, 0, 0, 1);
  const int rows = 6, D = 16;
  PpError err = { 0 };
  float x[4][6 * 16], out[4][6 * 16], dout[6 * 16], din[6 * 16];
  int32_t labels[6] = { 0, 1, 2, 3, 4, 5 };
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < rows * D; i++)
      x[k][i] = sinf (0.37f * i + k);
  for (int i = 0; i < rows * D; i++)
    dout[i] = cosf (0.11f * i);

  for (int recompute = 0; recompute <= 1; recompute++)
    {
      /* parts: 0 (input), 1 (middle), 2 (head) */
      for (int part = 0; part < 3; part++)
        {
          PpChunk *c = pp_chunk_new (m, part, 3, part, 1, rows, 2, recompute, &err);
          g_assert_nonnull (c);
          int has_head = part == 2;
          size_t per_mb = rows * pp_model_activation_bytes_per_row (m, 1, part == 0, has_head);
          size_t held = recompute ? (has_head ? rows * sizeof (int32_t) : 0) : per_mb;
          g_assert_cmpint (pp_chunk_in_dim (c), ==, D);
          g_assert_cmpint (pp_chunk_out_dim (c), ==, has_head ? 0 : D);
          g_assert_cmpint (pp_chunk_rows (c), ==, rows);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), ==, 0);

          double loss;
          g_assert_cmpint (pp_chunk_forward (c, 0, x[0], labels, out[0], &loss, &err), ==, PP_OK);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), ==, held);
          g_assert_cmpint (pp_chunk_forward (c, 0, x[1], labels, out[1], &loss, &err), ==, PP_EINVAL);
          assert_one_line (&err);
          g_assert_cmpint (pp_chunk_forward (c, 1, x[1], labels, out[1], &loss, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_inflight (c), ==, 2);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), ==, 2 * held);
          memset (&err, 0, sizeof err);
          g_assert_cmpint (pp_chunk_forward (c, 2, x[2], labels, out[2], &loss, &err), ==, PP_EINVAL);
          assert_one_line (&err);
          g_assert_nonnull (strstr (err.msg, "more than 2"));
          g_assert_cmpint (pp_chunk_inflight (c), ==, 2);

          /* backward of an unknown micro-batch, W before I */
          g_assert_cmpint (pp_chunk_backward (c, 7, dout, din, 1.0f, &err), ==, PP_EINVAL);
          g_assert_cmpint (pp_chunk_backward_weight (c, 1, &err), ==, PP_EINVAL);
          assert_one_line (&err);

          g_assert_cmpint (pp_chunk_backward_input (c, 1, dout, din, 1.0f, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_backward_input (c, 1, dout, din, 1.0f, &err), ==, PP_EINVAL);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), >, 2 * held);
          g_assert_cmpint (pp_chunk_backward_weight (c, 1, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_inflight (c), ==, 1);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), ==, held);

          /* the freed slot is reused */
          g_assert_cmpint (pp_chunk_forward (c, 2, x[2], labels, out[2], &loss, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_backward (c, 0, dout, din, 1.0f, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_backward (c, 2, dout, NULL, 1.0f, &err), ==, PP_OK);
          g_assert_cmpint (pp_chunk_inflight (c), ==, 0);
          g_assert_cmpuint (pp_chunk_activation_bytes (c), ==, 0);
          pp_chunk_free (c);
        }
    }

  /* a part that does not fit the model */
  g_assert_null (pp_chunk_new (m, 1, 3, 2, 2, rows, 2, 0, &err));
  assert_one_line (&err);
  g_assert_null (pp_chunk_new (m, 0, 1, 0, 3, rows, 0, 0, &err));
  assert_one_line (&err);

  /* bytes per row grow with blocks; the head and input add theirs */
  size_t b1 = pp_model_activation_bytes_per_row (m, 1, 0, 0);
  g_assert_cmpuint (pp_model_activation_bytes_per_row (m, 2, 0, 0), >, b1);
  g_assert_cmpuint (pp_model_activation_bytes_per_row (m, 1, 1, 0), >, b1);
  g_assert_cmpuint (pp_model_activation_bytes_per_row (m, 1, 0, 1), >, b1);
  pp_model_free (m);
}

/* ---- training ------------------------------------------------------------ */

static void
test_loss_falls (void)
{
  PpModel *m = model_new (2, 32, 0, 0, 0, 1);
  const int B = 64, M = 4, rows = B / M, steps = 200;
  Parts p;
  parts_new (&p, m, 1, NULL, rows, M, 0);
  double first = 0, last10 = 0;
  GString *curve = g_string_new ("loss:");
  for (int t = 0; t < steps; t++)
    {
      double loss = run_step (&p, m, rows, M, MODE_B, t) / B;
      g_assert_true (isfinite (loss));
      pp_chunk_adamw (p.c[0], 3e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, t + 1);
      if (t == 0)
        first = loss;
      if (t >= steps - 10)
        last10 += loss / 10;
      if (t % 20 == 0 || t == steps - 1)
        g_string_append_printf (curve, " %d:%.3f", t, loss);
    }
  g_test_message ("%s; last 10 mean %.3f (first %.3f)", curve->str, last10, first);
  g_string_free (curve, TRUE);
  g_assert_cmpfloat (fabs (first - log (16.0)), <, 0.05);   /* small init: uniform guess */
  g_assert_cmpfloat (last10, <, 0.7 * first);
  parts_free (&p);
  pp_model_free (m);
}

/* The batch pool (what the GPU backend makes batches with) writes exactly
 * pp_model_batch's rows, whatever its number of threads, batch after batch
 * into reused buffers; pp_model_batch_rows over disjoint ranges does too.
 * The teacher reads at most 128 inputs, so a wide model's labels are still
 * spread over the classes (a broken teacher gives one class). */
static void
test_batch_pool (void)
{
  static const int widths[] = { 16, 200 };
  for (guint w = 0; w < G_N_ELEMENTS (widths); w++)
    {
      PpModelConfig cfg = { .layers = 2, .width = widths[w], .seed = 5 };
      PpError err = { 0 };
      PpModel *m = pp_model_new (&cfg, &err);
      int in = pp_model_config (m)->in_dim, B = 301;
      float *want = g_new (float, (gsize) B * in), *got = g_new (float, (gsize) B * in);
      int32_t *lwant = g_new (int32_t, B), *lgot = g_new (int32_t, B);
      g_assert_nonnull (m);
      for (int threads = 1; threads <= 8; threads += 3)
        {
          PpBatchPool *p = pp_batch_pool_new (m, threads, &err);
          g_assert_nonnull (p);
          g_assert_cmpint (pp_batch_pool_threads (p), ==, threads);
          for (int step = 0; step < 3; step++)
            {
              int classes[64] = { 0 }, used = 0;
              pp_model_batch (m, 9, step, B, want, lwant);
              memset (got, 0xff, sizeof (float) * (gsize) B * in);
              memset (lgot, 0xff, sizeof (int32_t) * B);
              pp_batch_pool_start (p, 9, step, B, got, lgot);
              pp_batch_pool_wait (p);
              g_assert_cmpmem (got, sizeof (float) * (gsize) B * in, want, sizeof (float) * (gsize) B * in);
              g_assert_cmpmem (lgot, sizeof (int32_t) * B, lwant, sizeof (int32_t) * B);
              for (int r = 0; r < B; r++)
                if (lwant[r] >= 0 && lwant[r] < 64 && classes[lwant[r]]++ == 0)
                  used++;
              g_assert_cmpint (used, >=, 8);   /* of 16 classes */
            }
          /* freed while a batch is in progress: it waits, nothing leaks */
          pp_batch_pool_start (p, 9, 7, B, got, lgot);
          pp_batch_pool_free (p);
        }
      /* rows in two ranges == the whole batch */
      pp_model_batch (m, 3, 4, B, want, lwant);
      pp_model_batch_rows (m, 3, 4, 100, B, got, lgot);
      pp_model_batch_rows (m, 3, 4, 0, 100, got, lgot);
      g_assert_cmpmem (got, sizeof (float) * (gsize) B * in, want, sizeof (float) * (gsize) B * in);
      g_assert_cmpmem (lgot, sizeof (int32_t) * B, lwant, sizeof (int32_t) * B);
      g_free (want);
      g_free (got);
      g_free (lwant);
      g_free (lgot);
      pp_model_free (m);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  pp_kernels_init ();
  g_test_add_func ("/model/config", test_config);
  g_test_add_func ("/model/partition", test_partition);
  g_test_add_func ("/model/init-partition-invariant", test_init_partition_invariant);
  g_test_add_func ("/model/batch", test_batch);
  g_test_add_func ("/model/batch-pool", test_batch_pool);
  g_test_add_func ("/model/finite-difference", test_finite_difference);
  g_test_add_func ("/model/chained-parts", test_chained_parts);
  g_test_add_func ("/model/split-and-recompute", test_split_and_recompute);
  g_test_add_func ("/model/inflight", test_inflight);
  g_test_add_func ("/model/loss-falls", test_loss_falls);
  return g_test_run ();
}
