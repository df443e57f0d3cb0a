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

#include "pp-chunk-layout.h"
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

size_t
pp_model_activation_bytes_per_row (const PpModel *m, int n_blocks, int has_input, int has_head)
{
  if (n_blocks < 1)
    return 0;
  return sizeof (float)
         * pp_chunk_layout_fwd_floats_per_row (m->D, m->H, m->C, n_blocks, has_input, has_head);
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

struct _PpChunk {
  PpChunkLayout l;
  PpSlots q;
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
  float *scratch_dx;      /* [rows, max(D, in_dim)] */
  float *scratch_out;     /* [rows, D]: chunk output during recompute */
  float *scratch_logits;  /* [rows, C] */
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

static void
init_params (PpChunk *c, uint64_t seed)
{
  size_t D = c->l.D, H = c->l.H, C = c->l.C, in = c->l.in_dim;
  float *p = c->params;
  const double std = 0.02;
  const double resid = std / sqrt (2.0 * c->l.L);
  if (c->l.has_input)
    fill_normal (p + c->l.off_in_W, in * D, rng_key (seed, STREAM_WEIGHTS, 0, 0), std);
  /* biases and beta stay 0 (the array is zeroed) */
  for (int k = 0; k < c->l.n_blocks; k++)
    {
      uint64_t layer = 1 + (uint64_t) (c->l.first_block + k);
      PpBlockParams b = pp_chunk_layout_block (&c->l, p, k);
      float *gamma = (float *) b.gamma;
      for (size_t i = 0; i < D; i++)
        gamma[i] = 1.0f;
      fill_normal ((float *) b.W1, D * H, rng_key (seed, STREAM_WEIGHTS, layer, 2), std);
      fill_normal ((float *) b.W2, H * D, rng_key (seed, STREAM_WEIGHTS, layer, 4), resid);
    }
  if (c->l.has_head)
    fill_normal (p + c->l.off_head_W, D * C,
                 rng_key (seed, STREAM_WEIGHTS, (uint64_t) c->l.L + 1, 0), std);
}

static void
slot_release_buffers (PpSlot *s)
{
  free (s->fwd_buf);
  free (s->grad_buf);
  free (s->labels);
  s->fwd_buf = NULL;
  s->grad_buf = NULL;
  s->labels = NULL;
}

/* Allocates the forward activations of a slot (once; reused after). */
static int
slot_ensure_fwd (PpChunk *c, PpSlot *s)
{
  if (s->fwd_buf != NULL)
    return 1;
  if (c->l.has_head && s->labels == NULL
      && (s->labels = malloc (sizeof (int32_t) * (size_t) c->l.rows)) == NULL)
    return 0;
  if ((s->fwd_buf = alloc_floats (c->l.fwd_floats)) == NULL)
    return 0;
  pp_slot_carve_fwd (&c->l, s);
  return 1;
}

static int
slot_ensure_grad (PpChunk *c, PpSlot *s)
{
  if (s->grad_buf != NULL)
    return 1;
  if ((s->grad_buf = alloc_floats (c->l.grad_floats)) == NULL)
    return 0;
  pp_slot_carve_grad (&c->l, s);
  return 1;
}

PpChunk *
pp_chunk_new (const PpModel *m, int part, int n_parts, int first_block, int n_blocks, int rows,
              int max_inflight, int recompute, PpError *err)
{
  PpChunkLayout l;
  /* every tensor of a slot starts on a cache line (16 floats) */
  if (pp_chunk_layout_init (&l, m != NULL ? &m->cfg : NULL, part, n_parts, first_block, n_blocks, rows, max_inflight,
                            recompute, 16, "part", err)
      != PP_OK)
    return NULL;
  PpChunk *c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory for part %d", part);
      return NULL;
    }
  c->l = l;
  size_t R = rows, D = m->D, C = m->C;
  size_t dx_width = (size_t) (m->in_dim > m->D ? m->in_dim : m->D);
  c->params = alloc_floats (c->l.n_params);
  c->grads = alloc_floats (c->l.n_params);
  c->adam_m = alloc_floats (c->l.n_params);
  c->adam_v = alloc_floats (c->l.n_params);
  c->scratch_dx = alloc_floats (R * dx_width);
  c->scratch_out = alloc_floats (R * D);
  c->scratch_logits = alloc_floats (R * C);
  if (!pp_slots_init (&c->q, &c->l) || c->params == NULL || c->grads == NULL
      || c->adam_m == NULL || c->adam_v == NULL || c->scratch_dx == NULL
      || c->scratch_out == NULL || c->scratch_logits == NULL)
    {
      pp_chunk_free (c);
      pp_error_set (err, PP_ENOMEM, "out of memory for part %d", part);
      return NULL;
    }
  init_params (c, m->cfg.seed);
  return c;
}

void
pp_chunk_free (PpChunk *c)
{
  if (c == NULL)
    return;
  if (c->q.slot != NULL)
    for (int i = 0; i < c->l.max_inflight; i++)
      slot_release_buffers (&c->q.slot[i]);
  slot_release_buffers (&c->q.scratch);
  pp_slots_fini (&c->q);
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
  return c->l.has_input ? c->l.in_dim : c->l.D;
}

int
pp_chunk_out_dim (const PpChunk *c)
{
  return c->l.has_head ? 0 : c->l.D;
}

int
pp_chunk_rows (const PpChunk *c)
{
  return c->l.rows;
}

size_t
pp_chunk_n_params (const PpChunk *c)
{
  return c->l.n_params;
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
      c->gacc = calloc (c->l.n_params ? c->l.n_params : 1, sizeof (double));
      c->gscratch = alloc_floats (c->l.n_params);
      if (c->gacc == NULL || c->gscratch == NULL)
        return PP_ENOMEM;
    }
  /* carry what has accumulated so far into the other representation */
  if (exact)
    for (size_t i = 0; i < c->l.n_params; i++)
      c->gacc[i] = c->grads[i];
  else
    for (size_t i = 0; i < c->l.n_params; i++)
      c->grads[i] = (float) c->gacc[i];
  c->exact_grads = exact;
  return PP_OK;
}

const float *
pp_chunk_grads (PpChunk *c)
{
  if (c->exact_grads)
    for (size_t i = 0; i < c->l.n_params; i++)
      c->grads[i] = (float) c->gacc[i];
  return c->grads;
}

void
pp_chunk_set_grads (PpChunk *c, const float *grads)
{
  if (c->exact_grads)
    for (size_t i = 0; i < c->l.n_params; i++)
      c->gacc[i] = grads[i];
  else
    memcpy (c->grads, grads, sizeof (float) * c->l.n_params);
}

PpStatus
pp_chunk_add_grads (PpChunk *dst, const PpChunk *src)
{
  if (dst->l.n_params != src->l.n_params || dst->exact_grads != src->exact_grads)
    return PP_EINVAL;
  if (dst->exact_grads)
    for (size_t i = 0; i < dst->l.n_params; i++)
      dst->gacc[i] += src->gacc[i];
  else
    for (size_t i = 0; i < dst->l.n_params; i++)
      dst->grads[i] += src->grads[i];
  return PP_OK;
}

PpStatus
pp_chunk_copy_grads (PpChunk *dst, const PpChunk *src)
{
  if (dst->l.n_params != src->l.n_params || dst->exact_grads != src->exact_grads)
    return PP_EINVAL;
  if (dst->exact_grads)
    memcpy (dst->gacc, src->gacc, sizeof (double) * dst->l.n_params);
  else
    memcpy (dst->grads, src->grads, sizeof (float) * dst->l.n_params);
  return PP_OK;
}

void *
pp_chunk_grad_storage (PpChunk *c, size_t *bytes)
{
  *bytes = c->l.n_params * (c->exact_grads ? sizeof (double) : sizeof (float));
  return c->exact_grads ? (void *) c->gacc : (void *) c->grads;
}

PpStatus
pp_chunk_add_grad_storage (PpChunk *dst, const void *src, size_t bytes)
{
  if (bytes != dst->l.n_params * (dst->exact_grads ? sizeof (double) : sizeof (float)))
    return PP_EINVAL;
  if (dst->exact_grads)
    {
      const double *g = src;
      for (size_t i = 0; i < dst->l.n_params; i++)
        dst->gacc[i] += g[i];
    }
  else
    {
      const float *g = src;
      for (size_t i = 0; i < dst->l.n_params; i++)
        dst->grads[i] += g[i];
    }
  return PP_OK;
}

void
pp_chunk_zero_grads (PpChunk *c)
{
  if (c->exact_grads)
    memset (c->gacc, 0, sizeof (double) * c->l.n_params);
  else
    memset (c->grads, 0, sizeof (float) * c->l.n_params);
}

void
pp_chunk_adamw (PpChunk *c, float lr, float beta1, float beta2, float eps, float weight_decay,
                int t)
{
  pp_chunk_grads (c);
  pp_adamw (c->params, c->grads, c->adam_m, c->adam_v, c->l.n_params, lr, beta1, beta2, eps,
            weight_decay, t);
}

size_t
pp_chunk_activation_bytes (const PpChunk *c)
{
  return c->q.act_bytes;
}

int
pp_chunk_inflight (const PpChunk *c)
{
  return c->q.inflight;
}

/* The forward of the chunk into slot s's activations (allocated).  out:
 * where the last block writes on a middle part.  Returns the loss sum on the
 * last part (labels already in s->labels), else 0. */
static double
run_forward (PpChunk *c, PpSlot *s, const float *input, float *out)
{
  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  const float *P = c->params;
  if (c->l.has_input)
    pp_linear_forward (input, P + c->l.off_in_W, P + c->l.off_in_b, s->hid[0], R, c->l.in_dim, D);
  else
    s->hid[0] = (float *) input;
  if (!c->l.has_head)
    s->hid[n] = out;
  for (int k = 0; k < n; k++)
    {
      PpBlockParams b = pp_chunk_layout_block (&c->l, P, k);
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
  if (!c->l.has_head)
    return 0.0;
  pp_linear_forward (s->hid[n], P + c->l.off_head_W, P + c->l.off_head_b, c->scratch_logits, R, D,
                     c->l.C);
  return pp_softmax_xent_forward (c->scratch_logits, s->labels, s->probs, R, c->l.C);
}

PpStatus
pp_chunk_forward (PpChunk *c, int mb, const float *input, const int32_t *labels, float *out,
                  double *loss_sum, PpError *err)
{
  if (input == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without an input",
                         c->l.part, mb);
  if (c->l.has_head && labels == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without labels",
                         c->l.part, mb);
  if (!c->l.has_head && out == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: forward of micro-batch %d without an output",
                         c->l.part, mb);
  PpSlot *s;
  PpStatus st = pp_slots_for_forward (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;

  PpSlot *act = c->l.recompute ? &c->q.scratch : s;
  if (!slot_ensure_fwd (c, act))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for activations", c->l.part);
  if (c->l.has_head)
    {
      if (s->labels == NULL && (s->labels = malloc (sizeof (int32_t) * c->l.rows)) == NULL)
        return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for labels", c->l.part);
      memcpy (s->labels, labels, sizeof (int32_t) * c->l.rows);
      if (act != s)
        memcpy (act->labels, labels, sizeof (int32_t) * c->l.rows);
    }

  double loss = run_forward (c, act, input, out);
  if (loss_sum != NULL)
    *loss_sum = loss;

  pp_slots_forwarded (&c->q, &c->l, s, mb, input);
  return PP_OK;
}

PpStatus
pp_chunk_backward_input (PpChunk *c, int mb, const float *dout, float *din, float loss_scale,
                         PpError *err)
{
  PpSlot *s;
  PpStatus st = pp_slots_for_input_grad (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;
  if (!c->l.has_head && dout == NULL)
    return pp_error_set (err, PP_EINVAL, "part %d: backward of micro-batch %d without an output gradient",
                         c->l.part, mb);
  if (c->l.recompute && !slot_ensure_fwd (c, s))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for activations", c->l.part);
  if (!slot_ensure_grad (c, s))
    return pp_error_set (err, PP_ENOMEM, "part %d: out of memory for gradients", c->l.part);
  if (c->l.recompute)
    run_forward (c, s, s->input, c->scratch_out);

  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  size_t RD = (size_t) R * D;
  const float *P = c->params;
  if (c->l.has_head)
    {
      pp_softmax_xent_backward (s->probs, s->labels, s->dlogits, R, c->l.C, loss_scale);
      pp_linear_backward_input (s->dlogits, P + c->l.off_head_W, s->dhid[n], R, D, c->l.C);
    }
  else
    memcpy (s->dhid[n], dout, sizeof (float) * RD);

  for (int k = n - 1; k >= 0; k--)
    {
      PpBlockParams b = pp_chunk_layout_block (&c->l, P, k);
      const float *dy = s->dhid[k + 1];
      pp_linear_backward_input (dy, b.W2, s->dh1[k], R, H, D);
      pp_gelu_backward (s->h1[k], s->dh1[k], s->dh1[k], (size_t) R * H);
      pp_linear_backward_input (s->dh1[k], b.W1, s->dln[k], R, D, H);
      pp_layernorm_backward_input (s->dln[k], s->hid[k], b.gamma, s->mean[k], s->rstd[k],
                                   c->scratch_dx, R, D);
      /* block 0 of a later part: its input gradient is din itself */
      float *dx = s->dhid[k];
      if (k == 0 && !c->l.has_input)
        dx = din != NULL ? din : c->scratch_out;
      for (size_t i = 0; i < RD; i++)
        dx[i] = dy[i] + c->scratch_dx[i];
    }
  if (c->l.has_input && din != NULL)
    pp_linear_backward_input (s->dhid[0], P + c->l.off_in_W, din, R, c->l.in_dim, D);

  pp_slots_input_done (&c->q, &c->l, s);
  return PP_OK;
}

PpStatus
pp_chunk_backward_weight (PpChunk *c, int mb, PpError *err)
{
  PpSlot *s;
  PpStatus st = pp_slots_for_weight_grad (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;
  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  float *G = c->grads;
  if (c->exact_grads)
    {
      G = c->gscratch;
      memset (G, 0, sizeof (float) * c->l.n_params);
    }
  if (c->l.has_head)
    pp_linear_backward_weight (s->hid[n], s->dlogits, G + c->l.off_head_W, G + c->l.off_head_b, R,
                               D, c->l.C);
  for (int k = n - 1; k >= 0; k--)
    {
      PpBlockGrads g = pp_chunk_layout_block_grads (&c->l, G, k);
      pp_linear_backward_weight (s->g[k], s->dhid[k + 1], g.W2, g.b2, R, H, D);
      pp_linear_backward_weight (s->ln[k], s->dh1[k], g.W1, g.b1, R, D, H);
      pp_layernorm_backward_weight (s->dln[k], s->hid[k], s->mean[k], s->rstd[k], g.gamma,
                                    g.beta, R, D);
    }
  if (c->l.has_input)
    pp_linear_backward_weight (s->input, s->dhid[0], G + c->l.off_in_W, G + c->l.off_in_b, R,
                               c->l.in_dim, D);
  if (c->exact_grads)
    for (size_t i = 0; i < c->l.n_params; i++)
      c->gacc[i] += G[i];

  pp_slots_release (&c->q, &c->l, s);
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
