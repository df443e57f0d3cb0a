/* pp-model.c — the bundled network, its synthetic task, and its split into parts.
 *
 * Parameters of a chunk, one float array, in this order:
 *   part 0:      Win[in_dim, D], bin[D]
 *   each block:  ln_gamma[D], ln_beta[D], W1[D, H], b1[H], W2[H, D], b2[D]
 *   last part:   Whead[D, C], bhead[C]
 * so the arrays of parts 0..n-1 laid end to end are the whole model's.
 *
 * Every tensor is drawn from a counter-based generator keyed by (seed, global
 * layer id, tensor index): layer id 0 is the input projection, 1 + b block b,
 * L + 1 the head.  Element i of a tensor is the i-th normal of its stream, so
 * where a tensor lands in memory changes nothing.
 *
 * A micro-batch in flight owns a slot: forward activations (allocated on the
 * slot's first forward, reused after) and the gradients the weight half of the
 * backward needs (allocated on the slot's first backward_input).  The chunk
 * input is kept by pointer, never copied.
 */
#include "pp-model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-kernels.h"

#define PP_LN_EPS 1e-5f

/* Streams of the generator; tensor and layer ids live below these. */
enum {
  STREAM_WEIGHTS = 1,
  STREAM_TEACHER = 2,
  STREAM_DATA    = 3,
};

#define TEACHER_MAX 128

/* ---- counter-based normal generator -------------------------------------- */

static inline uint64_t
mix64 (uint64_t z)
{
  /* splitmix64's finaliser */
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t
rng_key (uint64_t seed, uint64_t stream, uint64_t a, uint64_t b)
{
  uint64_t k = mix64 (seed);
  k = mix64 (k ^ stream);
  k = mix64 (k ^ a);
  return mix64 (k ^ b);
}

/* Uniform in (0, 1]: never 0, so log() in Box-Muller is finite. */
static inline double
rng_uniform (uint64_t key, uint64_t counter)
{
  uint64_t x = mix64 (key ^ mix64 (counter));
  return ((x >> 11) + 1) * 0x1.0p-53;
}

/* The i-th standard normal of stream key (Box-Muller over pairs). */
static double
rng_normal (uint64_t key, uint64_t i)
{
  uint64_t pair = i >> 1;
  double u1 = rng_uniform (key, 2 * pair), u2 = rng_uniform (key, 2 * pair + 1);
  double r = sqrt (-2.0 * log (u1));
  double t = 2.0 * M_PI * u2;
  return (i & 1) ? r * sin (t) : r * cos (t);
}

static void
fill_normal (float *p, size_t n, uint64_t key, double scale)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float) (rng_normal (key, i) * scale);
}

/* x[i] = (float) rng_normal (key, i) for i < n, each Box-Muller pair computed
 * once (the same values, half the work). */
static void
fill_normal_pairs (float *x, size_t n, uint64_t key)
{
  size_t i = 0;
  for (; i + 1 < n; i += 2)
    {
      uint64_t pair = i >> 1;
      double u1 = rng_uniform (key, 2 * pair), u2 = rng_uniform (key, 2 * pair + 1);
      double r = sqrt (-2.0 * log (u1));
      double t = 2.0 * M_PI * u2;
      x[i] = (float) (r * cos (t));
      x[i + 1] = (float) (r * sin (t));
    }
  if (i < n)
    x[i] = (float) rng_normal (key, i);
}

/* ---- the model ----------------------------------------------------------- */

struct _PpModel {
  PpModelConfig cfg;
  int    D, H, in_dim, C, L;
  /* the teacher: its first t_in inputs -> t_h (tanh) -> C, biases zero, in
   * double; t_in = min(in_dim, 128), t_h = min(2D, 128), so a batch costs
   * O(rows * 128^2) whatever the width (a wide model on a GPU must not wait
   * for its labels) */
  int     t_in, t_h;
  double *t_w1;    /* [t_in, t_h] */
  double *t_w2;    /* [t_h, C] */
};

static size_t
input_params (const PpModel *m)
{
  return (size_t) m->in_dim * m->D + m->D;
}

static size_t
block_params (const PpModel *m)
{
  size_t D = m->D, H = m->H;
  return 2 * D + D * H + H + H * D + D;
}

static size_t
head_params (const PpModel *m)
{
  return (size_t) m->D * m->C + m->C;
}

PpModel *
pp_model_new (const PpModelConfig *cfg, PpError *err)
{
  if (cfg == NULL)
    {
      pp_error_set (err, PP_EINVAL, "no model configuration given");
      return NULL;
    }
  if (cfg->layers < 1)
    {
      pp_error_set (err, PP_EINVAL, "--layers must be at least 1 (got %d)", cfg->layers);
      return NULL;
    }
  if (cfg->width < 8)
    {
      pp_error_set (err, PP_EINVAL, "--width must be at least 8 (got %d)", cfg->width);
      return NULL;
    }
  if (cfg->hidden_mult < 0)
    {
      pp_error_set (err, PP_EINVAL, "the hidden width multiplier must be at least 1 (got %d)",
                    cfg->hidden_mult);
      return NULL;
    }
  if (cfg->in_dim < 0)
    {
      pp_error_set (err, PP_EINVAL, "the input width must be at least 1 (got %d)", cfg->in_dim);
      return NULL;
    }
  if (cfg->classes < 0 || cfg->classes == 1)
    {
      pp_error_set (err, PP_EINVAL, "--classes must be at least 2 (got %d)", cfg->classes);
      return NULL;
    }
  /* Keep every tensor and activation well inside size_t and int indexing. */
  if (cfg->layers > 4096)
    {
      pp_error_set (err, PP_EINVAL, "--layers must be at most 4096 (got %d)", cfg->layers);
      return NULL;
    }
  const int64_t big = 1 << 20;
  if (cfg->width > big || cfg->in_dim > big || cfg->classes > big
      || (int64_t) cfg->hidden_mult * cfg->width > 8 * big)
    {
      pp_error_set (err, PP_EINVAL, "model too large (width, layers, inputs and classes must be at most %lld)",
                    (long long) big);
      return NULL;
    }

  PpModel *m = calloc (1, sizeof *m);
  if (m == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory for the model");
      return NULL;
    }
  m->cfg = *cfg;
  if (m->cfg.hidden_mult == 0)
    m->cfg.hidden_mult = 4;
  if (m->cfg.in_dim == 0)
    m->cfg.in_dim = cfg->width;
  if (m->cfg.classes == 0)
    m->cfg.classes = 16;
  m->L = m->cfg.layers;
  m->D = m->cfg.width;
  m->H = m->cfg.hidden_mult * m->cfg.width;
  m->in_dim = m->cfg.in_dim;
  m->C = m->cfg.classes;

  m->t_in = m->in_dim < TEACHER_MAX ? m->in_dim : TEACHER_MAX;
  m->t_h = 2 * m->D < TEACHER_MAX ? 2 * m->D : TEACHER_MAX;
  size_t th = (size_t) m->t_h;
  m->t_w1 = malloc (sizeof (double) * m->t_in * th);
  m->t_w2 = malloc (sizeof (double) * th * m->C);
  if (m->t_w1 == NULL || m->t_w2 == NULL)
    {
      pp_model_free (m);
      pp_error_set (err, PP_ENOMEM, "out of memory for the teacher network");
      return NULL;
    }
  /* Pre-activations ~ N(0, 1.5^2): tanh well into its curve, so the task is
   * not just linear; logits ~ N(0, 1) per class, so labels are balanced. */
  uint64_t k1 = rng_key (m->cfg.seed, STREAM_TEACHER, 0, 0);
  uint64_t k2 = rng_key (m->cfg.seed, STREAM_TEACHER, 1, 0);
  for (size_t i = 0; i < (size_t) m->t_in * th; i++)
    m->t_w1[i] = rng_normal (k1, i) * 1.5 / sqrt ((double) m->t_in);
  for (size_t i = 0; i < th * m->C; i++)
    m->t_w2[i] = rng_normal (k2, i) / sqrt ((double) th);
  return m;
}

void
pp_model_free (PpModel *m)
{
  if (m == NULL)
    return;
  free (m->t_w1);
  free (m->t_w2);
  free (m);
}

const PpModelConfig *
pp_model_config (const PpModel *m)
{
  return &m->cfg;
}

/* FLOPs per row, forward + backward.  A linear in -> out costs 2*in*out
 * forward and 4*in*out backward (input and weight gradients), its bias
 * 1 forward and 1 backward per output.  LayerNorm: ~8 per element forward,
 * ~12 backward (input and weight halves).  GELU (tanh form): ~10 forward,
 * ~20 backward per element.  Residual add: 1 forward, 1 backward.
 * Softmax cross-entropy: ~5 per class forward, ~2 backward. */
static double
linear_cost (double in, double out)
{
  return 6.0 * in * out + 2.0 * out;
}

double
pp_model_cost_input (const PpModel *m)
{
  return linear_cost (m->in_dim, m->D);
}

double
pp_model_cost_block (const PpModel *m)
{
  double D = m->D, H = m->H;
  return 20.0 * D + linear_cost (D, H) + 30.0 * H + linear_cost (H, D) + 2.0 * D;
}

double
pp_model_cost_head (const PpModel *m)
{
  return linear_cost (m->D, m->C) + 7.0 * m->C;
}

size_t
pp_model_n_params (const PpModel *m)
{
  return input_params (m) + (size_t) m->L * block_params (m) + head_params (m);
}

/* Forward activations one row holds in a part (after F, without recompute):
 * the input projection's output; per block LN mean, rstd, LN output, W1
 * output, GELU output, and the block output where the chunk owns it (every
 * block's but the last one's, which goes to the caller's `out` unless the
 * head reads it); on the last part the softmax probabilities and the label.
 * The chunk input itself is the caller's and not counted. */
static size_t
fwd_floats_per_row (int D, int H, int C, int n_blocks, int has_input, int has_head)
{
  size_t owned_hidden = (size_t) (n_blocks - 1) + (has_input ? 1 : 0) + (has_head ? 1 : 0);
  size_t f = owned_hidden * D;
  f += (size_t) n_blocks * (2 + (size_t) D + 2 * (size_t) H);
  if (has_head)
    f += (size_t) C + 1;   /* probs, and the label (an int32, same size) */
  return f;
}

/* What backward_input keeps for backward_weight: the output gradient of each
 * block (the W2 dy; on the last block of a middle part, a copy of dout), the
 * gradient of the input projection's output (part 0), the W1 dy (after
 * GELU'), the LN dy, and the head's dlogits. */
static size_t
grad_floats_per_row (int D, int H, int C, int n_blocks, int has_input, int has_head)
{
  size_t f = (size_t) (n_blocks + (has_input ? 1 : 0)) * D;
  f += (size_t) n_blocks * ((size_t) H + D);
  if (has_head)
    f += C;
  return f;
}

size_t
pp_model_activation_bytes_per_row (const PpModel *m, int n_blocks, int has_input, int has_head)
{
  if (n_blocks < 1)
    return 0;
  return sizeof (float) * fwd_floats_per_row (m->D, m->H, m->C, n_blocks, has_input, has_head);
}

/* ---- partition ----------------------------------------------------------- */

static double
part_cost (const PpModel *m, int part, int n_parts, int n_blocks)
{
  double c = n_blocks * pp_model_cost_block (m);
  if (part == 0)
    c += pp_model_cost_input (m);
  if (part == n_parts - 1)
    c += pp_model_cost_head (m);
  return c;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Most blocks part i can hold within cost bound M (0 if none). */
static int
part_cap (const PpModel *m, int part, int n_parts, double M)
{
  double extra = part_cost (m, part, n_parts, 0);
  double n = floor ((M - extra) / pp_model_cost_block (m));
  return n < 0 ? 0 : n > m->L ? m->L : (int) n;
}

static int
bound_feasible (const PpModel *m, int n_parts, double M)
{
  long sum = 0;
  for (int i = 0; i < n_parts; i++)
    {
      int cap = part_cap (m, i, n_parts, M);
      if (cap < 1)
        return 0;
      sum += cap;
    }
  return sum >= m->L;
}

/* Two steps, both exact.  First the smallest bound M on the largest part
 * cost that some partition meets: M is a part cost n * block + extra, so
 * binary search over those values (feasible iff every part can hold 1 block
 * within M and together they hold L).  Then, within M, the most even costs:
 * the minimum sum of squared part costs, found greedily (the objective is
 * separable and convex): start from 1 block each and give each further block
 * to the part that is cheapest now, a tie to the LATER part -- later stages
 * hold fewer micro-batches in flight under 1F1B-like schedules, so a block
 * costs less memory there.  Costs are whole FLOP counts, exact in double. */
static PpStatus
partition_auto (const PpModel *m, int n_parts, int *out, PpError *err)
{
  int L = m->L;
  double extras[4] = { 0, pp_model_cost_input (m), pp_model_cost_head (m),
                       pp_model_cost_input (m) + pp_model_cost_head (m) };
  size_t n_cand = 4 * (size_t) L;
  double *cand = malloc (sizeof (double) * n_cand);
  if (cand == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory partitioning the model");
  for (int e = 0; e < 4; e++)
    for (int n = 1; n <= L; n++)
      cand[(size_t) e * L + (n - 1)] = n * pp_model_cost_block (m) + extras[e];
  qsort (cand, n_cand, sizeof (double), cmp_double);
  size_t lo = 0, hi = n_cand - 1;   /* the largest candidate is always feasible */
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (bound_feasible (m, n_parts, cand[mid]))
        hi = mid;
      else
        lo = mid + 1;
    }
  double M = cand[lo];
  free (cand);

  for (int i = 0; i < n_parts; i++)
    out[i] = 1;
  for (int left = L - n_parts; left > 0; left--)
    {
      int pick = -1;
      double pick_cost = INFINITY;
      for (int i = n_parts - 1; i >= 0; i--)
        {
          if (out[i] >= part_cap (m, i, n_parts, M))
            continue;
          double c = part_cost (m, i, n_parts, out[i]);
          if (c < pick_cost)
            pick = i, pick_cost = c;
        }
      out[pick]++;   /* always found: the caps hold L in all */
    }
  return PP_OK;
}

PpStatus
pp_model_partition (const PpModel *m, int n_parts, const char *spec, int *blocks_per_part,
                    PpError *err)
{
  if (n_parts < 1)
    return pp_error_set (err, PP_EINVAL, "a model needs at least 1 stage (got %d)", n_parts);
  if (m->L < n_parts)
    return pp_error_set (err, PP_EINVAL,
                         "--layers %d cannot be split into %d stages; use at least %d layers",
                         m->L, n_parts, n_parts);
  if (spec == NULL || strcmp (spec, "auto") == 0)
    return partition_auto (m, n_parts, blocks_per_part, err);

  int *tmp = malloc (sizeof (int) * n_parts);
  if (tmp == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory partitioning the model");
  const char *p = spec;
  int count = 0;
  long sum = 0;
  PpStatus st = PP_OK;
  for (;;)
    {
      while (*p == ' ')
        p++;
      if (*p < '0' || *p > '9')
        {
          st = pp_error_set (err, PP_EINVAL,
                             "--partition \"%s\" is not a comma list of blocks per stage such as \"7,8,8,7\"",
                             spec);
          goto out;
        }
      errno = 0;
      char *end;
      long v = strtol (p, &end, 10);
      if (errno != 0 || v > m->L)
        {
          st = pp_error_set (err, PP_EINVAL,
                             "--partition \"%s\": entry %d is more than the %d layers", spec,
                             count + 1, m->L);
          goto out;
        }
      if (v < 1)
        {
          st = pp_error_set (err, PP_EINVAL,
                             "--partition \"%s\": entry %d is 0; every stage needs at least 1 block",
                             spec, count + 1);
          goto out;
        }
      if (count < n_parts)
        tmp[count] = (int) v;
      count++;
      sum += v;
      p = end;
      while (*p == ' ')
        p++;
      if (*p == '\0')
        break;
      if (*p != ',')
        {
          st = pp_error_set (err, PP_EINVAL,
                             "--partition \"%s\" is not a comma list of blocks per stage such as \"7,8,8,7\"",
                             spec);
          goto out;
        }
      p++;
    }
  if (count != n_parts)
    {
      st = pp_error_set (err, PP_EINVAL,
                         "--partition \"%s\" has %d entries; the schedule has %d stages", spec,
                         count, n_parts);
      goto out;
    }
  if (sum != m->L)
    {
      st = pp_error_set (err, PP_EINVAL,
                         "--partition \"%s\" sums to %ld blocks; --layers is %d", spec, sum, m->L);
      goto out;
    }
  memcpy (blocks_per_part, tmp, sizeof (int) * n_parts);
out:
  free (tmp);
  return st;
}

/* ---- the synthetic task -------------------------------------------------- */

void
pp_model_batch (const PpModel *m, uint64_t data_seed, int step, int batch, float *x,
                int32_t *labels)
{
  pp_model_batch_rows (m, data_seed, step, 0, batch, x, labels);
}

void
pp_model_batch_rows (const PpModel *m, uint64_t data_seed, int step, int row0, int row1,
                     float *x, int32_t *labels)
{
  int in = m->in_dim, th = m->t_h, C = m->C;
  double *h = malloc (sizeof (double) * (th + C));
  double *z = h + th;
  for (int r = row0; r < row1; r++)
    {
      /* Row r depends on (data_seed, step, r) only: any split into
       * micro-batches sees the same rows. */
      uint64_t key = rng_key (data_seed, STREAM_DATA, (uint64_t) (uint32_t) step, (uint64_t) r);
      float *xr = x + (size_t) r * in;
      fill_normal_pairs (xr, (size_t) in, key);
      if (h == NULL)
        {
          labels[r] = 0;
          continue;
        }
      /* Teacher in double, on the float inputs the student sees. */
      for (int j = 0; j < th; j++)
        h[j] = 0.0;
      for (int i = 0; i < m->t_in; i++)
        {
          const double *w = m->t_w1 + (size_t) i * th;
          double xi = xr[i];
          for (int j = 0; j < th; j++)
            h[j] += xi * w[j];
        }
      for (int j = 0; j < th; j++)
        h[j] = tanh (h[j]);
      for (int c = 0; c < C; c++)
        z[c] = 0.0;
      for (int j = 0; j < th; j++)
        {
          const double *w = m->t_w2 + (size_t) j * C;
          for (int c = 0; c < C; c++)
            z[c] += h[j] * w[c];
        }
      int arg = 0;
      for (int c = 1; c < C; c++)
        if (z[c] > z[arg])
          arg = c;
      labels[r] = arg;
    }
  free (h);
}

/* ---- parts --------------------------------------------------------------- */

typedef struct {
  const float *gamma, *beta, *W1, *b1, *W2, *b2;
} BlockParams;

typedef struct {
  float *gamma, *beta, *W1, *b1, *W2, *b2;
} BlockGrads;

typedef struct {
  int      mb;            /* -1: free */
  int      input_done;    /* backward_input ran; backward_weight next */
  const float *input;     /* the caller's, not copied */
  int32_t *labels;        /* copy, last part only */
  /* forward activations (fwd_buf), allocated on first use */
  float   *fwd_buf;
  float  **hid;           /* [n_blocks + 1]: input of block k; hid[n] the chunk output */
  float  **mean, **rstd, **ln, **h1, **g;   /* [n_blocks] */
  float   *probs;
  /* what W needs from I (grad_buf), allocated on first backward_input */
  float   *grad_buf;
  float  **dhid;          /* [n_blocks + 1]: gradient of hid[k] (dhid[0] on part 0 only) */
  float  **dh1, **dln;    /* [n_blocks] */
  float   *dlogits;
  size_t   held;          /* bytes counted in the chunk's activation bytes */
} Slot;

struct _PpChunk {
  int part, n_parts, first_block, n_blocks, rows, max_inflight, recompute;
  int has_input, has_head;
  int D, H, in_dim, C, L;
  size_t n_params;
  float *params, *adam_m, *adam_v;
  /* Gradients accumulate in float (W adds into grads), as in any fp32
   * training.  With exact_grads they sum in double instead: W writes one
   * micro-batch's gradients into gscratch, then adds them into gacc, so the
   * order in which a schedule adds its micro-batches (LoopedBFS runs them
   * backwards, DualPipe adds two copies) cannot change the result.  That
   * costs a pass over the parameters per micro-batch. */
  int     exact_grads;
  double *gacc;           /* exact_grads only */
  float  *gscratch;       /* exact_grads only */
  float  *grads;          /* the gradients; with exact_grads, gacc rounded */
  /* parameter offsets */
  size_t off_in_W, off_in_b, off_blocks, off_head_W, off_head_b;
  size_t block_stride;
  Slot  *slots;
  Slot   scratch_slot;    /* where a recompute forward runs */
  float *scratch_dx;      /* [rows, max(D, in_dim)] */
  float *scratch_out;     /* [rows, D]: chunk output during recompute */
  float *scratch_logits;  /* [rows, C] */
  size_t fwd_floats, grad_floats;   /* per slot, as allocated (padded) */
  size_t fwd_bytes, grad_bytes;     /* per slot, as counted (exact) */
  size_t act_bytes;
  int    inflight;
};

static void *
alloc_floats (size_t n)
{
  void *p = NULL;
  size_t bytes = (n ? n : 1) * sizeof (float);
  bytes = (bytes + 63) & ~(size_t) 63;
  if (posix_memalign (&p, 64, bytes) != 0)
    return NULL;
  memset (p, 0, bytes);
  return p;
}

/* 16 floats = 64 bytes: every tensor of a slot starts on a cache line. */
static size_t
round16 (size_t n)
{
  return (n + 15) & ~(size_t) 15;
}

static BlockParams
block_params_at (const PpChunk *c, const float *base, int k)
{
  size_t D = c->D, H = c->H;
  const float *p = base + c->off_blocks + (size_t) k * c->block_stride;
  BlockParams b;
  b.gamma = p;
  b.beta = p + D;
  b.W1 = p + 2 * D;
  b.b1 = b.W1 + D * H;
  b.W2 = b.b1 + H;
  b.b2 = b.W2 + H * D;
  return b;
}

static BlockGrads
block_grads_at (PpChunk *c, float *base, int k)
{
  BlockParams b = block_params_at (c, base, k);
  BlockGrads g = { (float *) b.gamma, (float *) b.beta, (float *) b.W1,
                   (float *) b.b1, (float *) b.W2, (float *) b.b2 };
  return g;
}

static void
init_params (PpChunk *c, uint64_t seed)
{
  size_t D = c->D, H = c->H, C = c->C, in = c->in_dim;
  float *p = c->params;
  const double std = 0.02;
  const double resid = std / sqrt (2.0 * c->L);
  if (c->has_input)
    fill_normal (p + c->off_in_W, in * D, rng_key (seed, STREAM_WEIGHTS, 0, 0), std);
  /* biases and beta stay 0 (the array is zeroed) */
  for (int k = 0; k < c->n_blocks; k++)
    {
      uint64_t layer = 1 + (uint64_t) (c->first_block + k);
      BlockParams b = block_params_at (c, p, k);
      float *gamma = (float *) b.gamma;
      for (size_t i = 0; i < D; i++)
        gamma[i] = 1.0f;
      fill_normal ((float *) b.W1, D * H, rng_key (seed, STREAM_WEIGHTS, layer, 2), std);
      fill_normal ((float *) b.W2, H * D, rng_key (seed, STREAM_WEIGHTS, layer, 4), resid);
    }
  if (c->has_head)
    fill_normal (p + c->off_head_W, D * C,
                 rng_key (seed, STREAM_WEIGHTS, (uint64_t) c->L + 1, 0), std);
}

static void
slot_release_buffers (Slot *s)
{
  free (s->fwd_buf);
  free (s->grad_buf);
  free (s->hid);      /* one allocation holds every pointer array */
  free (s->dhid);
  free (s->labels);
  memset (s, 0, sizeof *s);
  s->mb = -1;
}

/* Allocates the forward activations of a slot (once; reused after). */
static int
slot_ensure_fwd (PpChunk *c, Slot *s)
{
  if (s->fwd_buf != NULL)
    return 1;
  int n = c->n_blocks;
  size_t R = c->rows, D = c->D, H = c->H, C = c->C;
  s->hid = calloc ((size_t) (n + 1) + 5 * (size_t) n, sizeof (float *));
  s->fwd_buf = alloc_floats (c->fwd_floats);
  if (c->has_head && s->labels == NULL)
    s->labels = malloc (sizeof (int32_t) * R);
  if (s->hid == NULL || s->fwd_buf == NULL || (c->has_head && s->labels == NULL))
    {
      free (s->hid);
      free (s->fwd_buf);
      s->hid = NULL;
      s->fwd_buf = NULL;
      return 0;
    }
  s->mean = s->hid + n + 1;
  s->rstd = s->mean + n;
  s->ln = s->rstd + n;
  s->h1 = s->ln + n;
  s->g = s->h1 + n;
  float *q = s->fwd_buf;
  /* hid[0] is the caller's input unless part 0; hid[n] the caller's out
   * unless the head reads it: both set at forward time. */
  for (int k = 1; k < n; k++)
    s->hid[k] = q, q += round16 (R * D);
  if (c->has_input)
    s->hid[0] = q, q += round16 (R * D);
  float *own_last = NULL;
  if (c->has_head)
    own_last = q, q += round16 (R * D);
  for (int k = 0; k < n; k++)
    {
      s->mean[k] = q, q += round16 (R);
      s->rstd[k] = q, q += round16 (R);
      s->ln[k] = q, q += round16 (R * D);
      s->h1[k] = q, q += round16 (R * H);
      s->g[k] = q, q += round16 (R * H);
    }
  if (c->has_head)
    {
      s->probs = q, q += round16 (R * C);
      s->hid[n] = own_last;
    }
  return 1;
}

static int
slot_ensure_grad (PpChunk *c, Slot *s)
{
  if (s->grad_buf != NULL)
    return 1;
  int n = c->n_blocks;
  size_t R = c->rows, D = c->D, H = c->H, C = c->C;
  s->dhid = calloc ((size_t) (n + 1) + 2 * (size_t) n, sizeof (float *));
  s->grad_buf = alloc_floats (c->grad_floats);
  if (s->dhid == NULL || s->grad_buf == NULL)
    {
      free (s->dhid);
      free (s->grad_buf);
      s->dhid = NULL;
      s->grad_buf = NULL;
      return 0;
    }
  s->dh1 = s->dhid + n + 1;
  s->dln = s->dh1 + n;
  float *q = s->grad_buf;
  for (int k = 1; k <= n; k++)
    s->dhid[k] = q, q += round16 (R * D);
  if (c->has_input)
    s->dhid[0] = q, q += round16 (R * D);
  for (int k = 0; k < n; k++)
    {
      s->dh1[k] = q, q += round16 (R * H);
      s->dln[k] = q, q += round16 (R * D);
    }
  if (c->has_head)
    s->dlogits = q, q += round16 (R * C);
  return 1;
}

PpChunk *
pp_chunk_new (const PpModel *m, int part, int n_parts, int first_block, int n_blocks, int rows,
              int max_inflight, int recompute, PpError *err)
{
  if (m == NULL)
    {
      pp_error_set (err, PP_EINVAL, "no model given");
      return NULL;
    }
  if (n_parts < 1 || part < 0 || part >= n_parts)
    {
      pp_error_set (err, PP_EINVAL, "part %d of %d does not exist", part, n_parts);
      return NULL;
    }
  if (n_blocks < 1 || first_block < 0 || first_block + n_blocks > m->L)
    {
      pp_error_set (err, PP_EINVAL, "blocks %d..%d are outside the model's %d layers",
                    first_block, first_block + n_blocks - 1, m->L);
      return NULL;
    }
  if ((part == 0) != (first_block == 0))
    {
      pp_error_set (err, PP_EINVAL, "part %d cannot start at block %d (only part 0 starts at block 0)",
                    part, first_block);
      return NULL;
    }
  if ((part == n_parts - 1) != (first_block + n_blocks == m->L))
    {
      pp_error_set (err, PP_EINVAL, "part %d of %d cannot end at block %d (only the last part ends at block %d)",
                    part, n_parts, first_block + n_blocks - 1, m->L - 1);
      return NULL;
    }
  if (rows < 1 || rows > (1 << 24))
    {
      pp_error_set (err, PP_EINVAL, "a micro-batch needs between 1 and %d rows (got %d)", 1 << 24, rows);
      return NULL;
    }
  if (max_inflight < 1)
    {
      pp_error_set (err, PP_EINVAL, "at least 1 micro-batch must be allowed in flight (got %d)",
                    max_inflight);
      return NULL;
    }

  PpChunk *c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory for part %d", part);
      return NULL;
    }
  c->part = part;
  c->n_parts = n_parts;
  c->first_block = first_block;
  c->n_blocks = n_blocks;
  c->rows = rows;
  c->max_inflight = max_inflight;
  c->recompute = recompute != 0;
  c->has_input = part == 0;
  c->has_head = part == n_parts - 1;
  c->D = m->D;
  c->H = m->H;
  c->in_dim = m->in_dim;
  c->C = m->C;
  c->L = m->L;

  size_t off = 0;
  if (c->has_input)
    {
      c->off_in_W = off;
      off += (size_t) m->in_dim * m->D;
      c->off_in_b = off;
      off += m->D;
    }
  c->off_blocks = off;
  c->block_stride = block_params (m);
  off += (size_t) n_blocks * c->block_stride;
  if (c->has_head)
    {
      c->off_head_W = off;
      off += (size_t) m->D * m->C;
      c->off_head_b = off;
      off += m->C;
    }
  c->n_params = off;

  /* Slot sizes: the layouts of slot_ensure_fwd / slot_ensure_grad, each
   * tensor rounded up to a cache line. */
  size_t R = rows, D = m->D, H = m->H, C = m->C;
  size_t owned_hidden = (size_t) (n_blocks - 1) + c->has_input + c->has_head;
  c->fwd_floats = owned_hidden * round16 (R * D)
                  + (size_t) n_blocks * (2 * round16 (R) + round16 (R * D) + 2 * round16 (R * H))
                  + (c->has_head ? round16 (R * C) : 0);
  c->grad_floats = (size_t) (n_blocks + c->has_input) * round16 (R * D)
                   + (size_t) n_blocks * (round16 (R * H) + round16 (R * D))
                   + (c->has_head ? round16 (R * C) : 0);

  c->fwd_bytes = sizeof (float) * R
                 * fwd_floats_per_row (m->D, m->H, m->C, n_blocks, c->has_input, c->has_head);
  c->grad_bytes = sizeof (float) * R
                  * grad_floats_per_row (m->D, m->H, m->C, n_blocks, c->has_input, c->has_head);

  size_t dx_width = (size_t) (m->in_dim > m->D ? m->in_dim : m->D);
  c->params = alloc_floats (c->n_params);
  c->grads = alloc_floats (c->n_params);
  c->adam_m = alloc_floats (c->n_params);
  c->adam_v = alloc_floats (c->n_params);
  c->slots = calloc (max_inflight, sizeof (Slot));
  c->scratch_dx = alloc_floats (R * dx_width);
  c->scratch_out = alloc_floats (R * D);
  c->scratch_logits = alloc_floats (R * C);
  if (c->params == NULL || c->grads == NULL || c->adam_m == NULL || c->adam_v == NULL
      || c->slots == NULL || c->scratch_dx == NULL || c->scratch_out == NULL
      || c->scratch_logits == NULL)
    {
      pp_chunk_free (c);
      pp_error_set (err, PP_ENOMEM, "out of memory for part %d", part);
      return NULL;
    }
  for (int i = 0; i < max_inflight; i++)
    c->slots[i].mb = -1;
  c->scratch_slot.mb = -1;
  init_params (c, m->cfg.seed);
  return c;
}

void
pp_chunk_free (PpChunk *c)
{
  if (c == NULL)
    return;
  if (c->slots != NULL)
    for (int i = 0; i < c->max_inflight; i++)
      slot_release_buffers (&c->slots[i]);
  slot_release_buffers (&c->scratch_slot);
  free (c->slots);
  free (c->params);
  free (c->grads);
  free (c->gscratch);
  free (c->gacc);
  free (c->adam_m);
  free (c->adam_v);
  free (c->scratch_dx);
  free (c->scratch_out);
  free (c->scratch_logits);
  free (c);
}

int
pp_chunk_in_dim (const PpChunk *c)
{
  return c->has_input ? c->in_dim : c->D;
}

int
pp_chunk_out_dim (const PpChunk *c)
{
  return c->has_head ? 0 : c->D;
}

int
pp_chunk_rows (const PpChunk *c)
{
  return c->rows;
}

size_t
pp_chunk_n_params (const PpChunk *c)
{
  return c->n_params;
}

float *
pp_chunk_params (PpChunk *c)
{
  return c->params;
}

PpStatus
pp_chunk_set_exact_grads (PpChunk *c, int exact)
{
  exact = exact != 0;
  if (exact == c->exact_grads)
    return PP_OK;
  if (exact && c->gacc == NULL)
    {
      c->gacc = calloc (c->n_params ? c->n_params : 1, sizeof (double));
      c->gscratch = alloc_floats (c->n_params);
      if (c->gacc == NULL || c->gscratch == NULL)
        return PP_ENOMEM;
    }
  /* carry what has accumulated so far into the other representation */
  if (exact)
    for (size_t i = 0; i < c->n_params; i++)
      c->gacc[i] = c->grads[i];
  else
    for (size_t i = 0; i < c->n_params; i++)
      c->grads[i] = (float) c->gacc[i];
  c->exact_grads = exact;
  return PP_OK;
}

const float *
pp_chunk_grads (PpChunk *c)
{
  if (c->exact_grads)
    for (size_t i = 0; i < c->n_params; i++)
      c->grads[i] = (float) c->gacc[i];
  return c->grads;
}

void
pp_chunk_set_grads (PpChunk *c, const float *grads)
{
  if (c->exact_grads)
    for (size_t i = 0; i < c->n_params; i++)
      c->gacc[i] = grads[i];
  else
    memcpy (c->grads, grads, sizeof (float) * c->n_params);
}

PpStatus
pp_chunk_add_grads (PpChunk *dst, const PpChunk *src)
{
  if (dst->n_params != src->n_params || dst->exact_grads != src->exact_grads)
    return PP_EINVAL;
  if (dst->exact_grads)
    for (size_t i = 0; i < dst->n_params; i++)
      dst->gacc[i] += src->gacc[i];
  else
    for (size_t i = 0; i < dst->n_params; i++)
      dst->grads[i] += src->grads[i];
  return PP_OK;
}

PpStatus
pp_chunk_copy_grads (PpChunk *dst, const PpChunk *src)
{
  if (dst->n_params != src->n_params || dst->exact_grads != src->exact_grads)
    return PP_EINVAL;
  if (dst->exact_grads)
    memcpy (dst->gacc, src->gacc, sizeof (double) * dst->n_params);
  else
    memcpy (dst->grads, src->grads, sizeof (float) * dst->n_params);
  return PP_OK;
}

void *
pp_chunk_grad_storage (PpChunk *c, size_t *bytes)
{
  *bytes = c->n_params * (c->exact_grads ? sizeof (double) : sizeof (float));
  return c->exact_grads ? (void *) c->gacc : (void *) c->grads;
}

PpStatus
pp_chunk_add_grad_storage (PpChunk *dst, const void *src, size_t bytes)
{
  if (bytes != dst->n_params * (dst->exact_grads ? sizeof (double) : sizeof (float)))
    return PP_EINVAL;
  if (dst->exact_grads)
    {
      const double *g = src;
      for (size_t i = 0; i < dst->n_params; i++)
        dst->gacc[i] += g[i];
    }
  else
    {
      const float *g = src;
      for (size_t i = 0; i < dst->n_params; i++)
        dst->grads[i] += g[i];
    }
  return PP_OK;
}

void
pp_chunk_zero_grads (PpChunk *c)
{
  if (c->exact_grads)
    memset (c->gacc, 0, sizeof (double) * c->n_params);
  else
    memset (c->grads, 0, sizeof (float) * c->n_params);
}

void
pp_chunk_adamw (PpChunk *c, float lr, float beta1, float beta2, float eps, float weight_decay,
                int t)
{
  pp_chunk_grads (c);
  pp_adamw (c->params, c->grads, c->adam_m, c->adam_v, c->n_params, lr, beta1, beta2, eps,
            weight_decay, t);
}

size_t
pp_chunk_activation_bytes (const PpChunk *c)
{
  return c->act_bytes;
}

int
pp_chunk_inflight (const PpChunk *c)
{
  return c->inflight;
}

static Slot *
find_slot (PpChunk *c, int mb)
{
  for (int i = 0; i < c->max_inflight; i++)
    if (c->slots[i].mb == mb)
      return &c->slots[i];
  return NULL;
}

static void
slot_hold (PpChunk *c, Slot *s, size_t bytes)
{
  c->act_bytes -= s->held;
  s->held = bytes;
  c->act_bytes += bytes;
}

/* The forward of the chunk into slot s's activations (allocated).  out:
 * where the last block writes on a middle part.  Returns the loss sum on the
 * last part (labels already in s->labels), else 0. */
static double
run_forward (PpChunk *c, Slot *s, const float *input, float *out)
{
  int n = c->n_blocks, R = c->rows, D = c->D, H = c->H;
  const float *P = c->params;
  if (c->has_input)
    pp_linear_forward (input, P + c->off_in_W, P + c->off_in_b, s->hid[0], R, c->in_dim, D);
  else
    s->hid[0] = (float *) input;
  if (!c->has_head)
    s->hid[n] = out;
  for (int k = 0; k < n; k++)
    {
      BlockParams b = block_params_at (c, P, k);
      const float *x = s->hid[k];
      float *y = s->hid[k + 1];
      pp_layernorm_forward (x, b.gamma, b.beta, s->ln[k], s->mean[k], s->rstd[k], R, D,
                            PP_LN_EPS);
      pp_linear_forward (s->ln[k], b.W1, b.b1, s->h1[k], R, D, H);
      pp_gelu_forward (s->h1[k], s->g[k], (size_t) R * H);
      pp_linear_forward (s->g[k], b.W2, b.b2, y, R, H, D);
      for (size_t i = 0; i < (size_t) R * D; i++)
        y[i] += x[i];
    }
  if (!c->has_head)
    return 0.0;
  pp_linear_forward (s->hid[n], P + c->off_head_W, P + c->off_head_b, c->scratch_logits, R, D,
                     c->C);
  return pp_softmax_xent_forward (c->scratch_logits, s->labels, s->probs, R, c->C);
}

PpStatus
pp_chunk_forward (PpChunk *c, int mb, const float *input, const int32_t *labels, float *out,
                  double *loss_sum, PpError *err)
{
  if (mb < 0)
    return pp_error_set (err, PP_EINVAL, "part %d: micro-batch %d does not exist", c->part, mb);
  if (input == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without an input",
                         c->part, mb);
  if (c->has_head && labels == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without labels",
                         c->part, mb);
  if (!c->has_head && out == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without an output",
                         c->part, mb);
  if (find_slot (c, mb) != NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: micro-batch %d is already in flight", c->part,
                         mb);
  Slot *s = find_slot (c, -1);
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "part %d: forward of micro-batch %d would hold more than %d micro-batches in flight",
                         c->part, mb, c->max_inflight);

  Slot *act = c->recompute ? &c->scratch_slot : s;
  if (!slot_ensure_fwd (c, act))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for activations", c->part);
  if (c->has_head)
    {
      if (s->labels == NULL && (s->labels = malloc (sizeof (int32_t) * c->rows)) == NULL)
        return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for labels", c->part);
      memcpy (s->labels, labels, sizeof (int32_t) * c->rows);
      if (act != s)
        memcpy (act->labels, labels, sizeof (int32_t) * c->rows);
    }

  double loss = run_forward (c, act, input, out);
  if (loss_sum != NULL)
    *loss_sum = loss;

  s->mb = mb;
  s->input_done = 0;
  s->input = input;
  c->inflight++;
  if (c->recompute)
    slot_hold (c, s, c->has_head ? sizeof (int32_t) * (size_t) c->rows : 0);
  else
    slot_hold (c, s, c->fwd_bytes);
  return PP_OK;
}

PpStatus
pp_chunk_backward_input (PpChunk *c, int mb, const float *dout, float *din, float loss_scale,
                         PpError *err)
{
  Slot *s = mb >= 0 ? find_slot (c, mb) : NULL;
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: backward of micro-batch %d, which is not in flight",
                         c->part, mb);
  if (s->input_done)
    return pp_error_set (err, PP_EINVAL, "part %d: input gradient of micro-batch %d computed twice",
                         c->part, mb);
  if (!c->has_head && dout == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: backward of micro-batch %d without an output gradient",
                         c->part, mb);
  if (c->recompute && !slot_ensure_fwd (c, s))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for activations", c->part);
  if (!slot_ensure_grad (c, s))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for gradients", c->part);
  if (c->recompute)
    run_forward (c, s, s->input, c->scratch_out);

  int n = c->n_blocks, R = c->rows, D = c->D, H = c->H;
  size_t RD = (size_t) R * D;
  const float *P = c->params;
  if (c->has_head)
    {
      pp_softmax_xent_backward (s->probs, s->labels, s->dlogits, R, c->C, loss_scale);
      pp_linear_backward_input (s->dlogits, P + c->off_head_W, s->dhid[n], R, D, c->C);
    }
  else
    memcpy (s->dhid[n], dout, sizeof (float) * RD);

  for (int k = n - 1; k >= 0; k--)
    {
      BlockParams b = block_params_at (c, P, k);
      const float *dy = s->dhid[k + 1];
      pp_linear_backward_input (dy, b.W2, s->dh1[k], R, H, D);
      pp_gelu_backward (s->h1[k], s->dh1[k], s->dh1[k], (size_t) R * H);
      pp_linear_backward_input (s->dh1[k], b.W1, s->dln[k], R, D, H);
      pp_layernorm_backward_input (s->dln[k], s->hid[k], b.gamma, s->mean[k], s->rstd[k],
                                   c->scratch_dx, R, D);
      /* block 0 of a later part: its input gradient is din itself */
      float *dx = s->dhid[k];
      if (k == 0 && !c->has_input)
        dx = din != NULL ? din : c->scratch_out;
      for (size_t i = 0; i < RD; i++)
        dx[i] = dy[i] + c->scratch_dx[i];
    }
  if (c->has_input && din != NULL)
    pp_linear_backward_input (s->dhid[0], P + c->off_in_W, din, R, c->in_dim, D);

  s->input_done = 1;
  slot_hold (c, s, c->fwd_bytes + c->grad_bytes);
  return PP_OK;
}

PpStatus
pp_chunk_backward_weight (PpChunk *c, int mb, PpError *err)
{
  Slot *s = mb >= 0 ? find_slot (c, mb) : NULL;
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "part %d: weight gradient of micro-batch %d, which is not in flight",
                         c->part, mb);
  if (!s->input_done)
    return pp_error_set (err, PP_EINVAL,
                         "part %d: weight gradient of micro-batch %d before its input gradient",
                         c->part, mb);
  int n = c->n_blocks, R = c->rows, D = c->D, H = c->H;
  float *G = c->grads;
  if (c->exact_grads)
    {
      G = c->gscratch;
      memset (G, 0, sizeof (float) * c->n_params);
    }
  if (c->has_head)
    pp_linear_backward_weight (s->hid[n], s->dlogits, G + c->off_head_W, G + c->off_head_b, R,
                               D, c->C);
  for (int k = n - 1; k >= 0; k--)
    {
      BlockGrads g = block_grads_at (c, G, k);
      pp_linear_backward_weight (s->g[k], s->dhid[k + 1], g.W2, g.b2, R, H, D);
      pp_linear_backward_weight (s->ln[k], s->dh1[k], g.W1, g.b1, R, D, H);
      pp_layernorm_backward_weight (s->dln[k], s->hid[k], s->mean[k], s->rstd[k], g.gamma,
                                    g.beta, R, D);
    }
  if (c->has_input)
    pp_linear_backward_weight (s->input, s->dhid[0], G + c->off_in_W, G + c->off_in_b, R,
                               c->in_dim, D);
  if (c->exact_grads)
    for (size_t i = 0; i < c->n_params; i++)
      c->gacc[i] += G[i];

  slot_hold (c, s, 0);
  s->mb = -1;
  s->input_done = 0;
  s->input = NULL;
  if (!c->has_input)
    s->hid[0] = NULL;
  if (!c->has_head)
    s->hid[n] = NULL;
  c->inflight--;
  return PP_OK;
}

PpStatus
pp_chunk_backward (PpChunk *c, int mb, const float *dout, float *din, float loss_scale,
                   PpError *err)
{
  PpStatus st = pp_chunk_backward_input (c, mb, dout, din, loss_scale, err);
  if (st != PP_OK)
    return st;
  return pp_chunk_backward_weight (c, mb, err);
}
