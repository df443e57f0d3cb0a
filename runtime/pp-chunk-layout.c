/* pp-chunk-layout.c — a part's parameter and activation layout and its
 * micro-batch bookkeeping, shared by the CPU and the GPU chunk. */
#include "pp-chunk-layout.h"

#include <stdlib.h>
#include <string.h>

static size_t
round_up (const PpChunkLayout *l, size_t n)
{
  return (n + l->align - 1) & ~(l->align - 1);
}

size_t
pp_chunk_layout_fwd_floats_per_row (int D, int H, int C, int n_blocks, int has_input,
                                    int has_head)
{
  /* the input projection's output; per block LN mean, rstd, LN output, W1
   * output, GELU output, and the block output where the chunk owns it (every
   * block's but the last one's, which goes to the caller's `out` unless the
   * head reads it); on the last part the softmax probabilities and the label
   * (an int32, the size of a float).  The chunk input is the caller's. */
  size_t owned_hidden = (size_t) (n_blocks - 1) + (has_input ? 1 : 0) + (has_head ? 1 : 0);
  size_t f = owned_hidden * (size_t) D;
  f += (size_t) n_blocks * (2 + (size_t) D + 2 * (size_t) H);
  if (has_head)
    f += (size_t) C + 1;
  return f;
}

/* What backward_input keeps for backward_weight, a row: the output gradient
 * of each block (on the last block of a middle part, a copy of dout), the
 * gradient of the input projection's output (part 0), the W1 dy (after
 * GELU'), the LN dy, and the head's dlogits. */
static size_t
grad_floats_per_row (int D, int H, int C, int n_blocks, int has_input, int has_head)
{
  size_t f = (size_t) (n_blocks + (has_input ? 1 : 0)) * (size_t) D;
  f += (size_t) n_blocks * ((size_t) H + (size_t) D);
  if (has_head)
    f += (size_t) C;
  return f;
}

PpStatus
pp_chunk_layout_init (PpChunkLayout *l, const PpModelConfig *cfg, int part, int n_parts,
                      int first_block, int n_blocks, int rows, int max_inflight, int recompute,
                      size_t align, const char *who, PpError *err)
{
  memset (l, 0, sizeof *l);
  if (cfg == NULL)
    return pp_error_set (err, PP_EINVAL, "no model given");
  int L = cfg->layers;
  if (n_parts < 1 || part < 0 || part >= n_parts)
    return pp_error_set (err, PP_EINVAL, "%s %d of %d does not exist", who, part, n_parts);
  if (n_blocks < 1 || first_block < 0 || first_block + n_blocks > L)
    return pp_error_set (err, PP_EINVAL, "blocks %d..%d are outside the model's %d layers",
                         first_block, first_block + n_blocks - 1, L);
  if ((part == 0) != (first_block == 0))
    return pp_error_set (err, PP_EINVAL,
                         "%s %d cannot start at block %d (only part 0 starts at block 0)", who,
                         part, first_block);
  if ((part == n_parts - 1) != (first_block + n_blocks == L))
    return pp_error_set (err, PP_EINVAL,
                         "%s %d of %d cannot end at block %d (only the last part ends at block %d)",
                         who, part, n_parts, first_block + n_blocks - 1, L - 1);
  if (rows < 1 || rows > (1 << 24))
    return pp_error_set (err, PP_EINVAL, "a micro-batch needs between 1 and %d rows (got %d)",
                         1 << 24, rows);
  if (max_inflight < 1)
    return pp_error_set (err, PP_EINVAL,
                         "at least 1 micro-batch must be allowed in flight (got %d)",
                         max_inflight);

  l->who = who;
  l->part = part;
  l->n_parts = n_parts;
  l->first_block = first_block;
  l->n_blocks = n_blocks;
  l->rows = rows;
  l->max_inflight = max_inflight;
  l->recompute = recompute != 0;
  l->has_input = part == 0;
  l->has_head = part == n_parts - 1;
  l->D = cfg->width;
  l->H = cfg->hidden_mult * cfg->width;
  l->in_dim = cfg->in_dim;
  l->C = cfg->classes;
  l->L = L;
  l->align = align;

  size_t D = l->D, H = l->H, C = l->C, R = rows;
  size_t off = 0;
  if (l->has_input)
    {
      l->off_in_W = off;
      off += (size_t) l->in_dim * D;
      l->off_in_b = off;
      off += D;
    }
  l->off_blocks = off;
  l->block_stride = 2 * D + D * H + H + H * D + D;
  off += (size_t) n_blocks * l->block_stride;
  if (l->has_head)
    {
      l->off_head_W = off;
      off += D * C;
      l->off_head_b = off;
      off += C;
    }
  l->n_params = off;

  /* the layouts of pp_slot_carve_fwd / pp_slot_carve_grad */
  size_t owned_hidden = (size_t) (n_blocks - 1) + l->has_input + l->has_head;
  l->fwd_floats = owned_hidden * round_up (l, R * D)
                  + (size_t) n_blocks * (2 * round_up (l, R) + round_up (l, R * D)
                                         + 2 * round_up (l, R * H))
                  + (l->has_head ? round_up (l, R * C) : 0);
  l->grad_floats = (size_t) (n_blocks + l->has_input) * round_up (l, R * D)
                   + (size_t) n_blocks * (round_up (l, R * H) + round_up (l, R * D))
                   + (l->has_head ? round_up (l, R * C) : 0);
  l->fwd_bytes = sizeof (float) * R
                 * pp_chunk_layout_fwd_floats_per_row (l->D, l->H, l->C, n_blocks, l->has_input,
                                                       l->has_head);
  l->grad_bytes = sizeof (float) * R
                  * grad_floats_per_row (l->D, l->H, l->C, n_blocks, l->has_input, l->has_head);
  return PP_OK;
}

PpBlockParams
pp_chunk_layout_block (const PpChunkLayout *l, const float *base, int k)
{
  size_t D = l->D, H = l->H;
  const float *p = base + l->off_blocks + (size_t) k * l->block_stride;
  PpBlockParams b;
  b.gamma = p;
  b.beta = p + D;
  b.W1 = p + 2 * D;
  b.b1 = b.W1 + D * H;
  b.W2 = b.b1 + H;
  b.b2 = b.W2 + H * D;
  return b;
}

PpBlockGrads
pp_chunk_layout_block_grads (const PpChunkLayout *l, float *base, int k)
{
  PpBlockParams b = pp_chunk_layout_block (l, base, k);
  PpBlockGrads g = { (float *) b.gamma, (float *) b.beta, (float *) b.W1,
                     (float *) b.b1, (float *) b.W2, (float *) b.b2 };
  return g;
}

static float *
take (const PpChunkLayout *l, float **q, size_t n)
{
  float *p = *q;
  *q += round_up (l, n);
  return p;
}

void
pp_slot_carve_fwd (const PpChunkLayout *l, PpSlot *s)
{
  int n = l->n_blocks;
  size_t R = l->rows, D = l->D, H = l->H, C = l->C;
  float *q = s->fwd_buf;
  for (int k = 1; k < n; k++)
    s->hid[k] = take (l, &q, R * D);
  if (l->has_input)
    s->hid[0] = take (l, &q, R * D);
  float *own_last = NULL;
  if (l->has_head)
    own_last = take (l, &q, R * D);
  for (int k = 0; k < n; k++)
    {
      s->mean[k] = take (l, &q, R);
      s->rstd[k] = take (l, &q, R);
      s->ln[k] = take (l, &q, R * D);
      s->h1[k] = take (l, &q, R * H);
      s->g[k] = take (l, &q, R * H);
    }
  if (l->has_head)
    {
      s->probs = take (l, &q, R * C);
      s->hid[n] = own_last;
    }
}

void
pp_slot_carve_grad (const PpChunkLayout *l, PpSlot *s)
{
  int n = l->n_blocks;
  size_t R = l->rows, D = l->D, H = l->H, C = l->C;
  float *q = s->grad_buf;
  for (int k = 1; k <= n; k++)
    s->dhid[k] = take (l, &q, R * D);
  if (l->has_input)
    s->dhid[0] = take (l, &q, R * D);
  for (int k = 0; k < n; k++)
    {
      s->dh1[k] = take (l, &q, R * H);
      s->dln[k] = take (l, &q, R * D);
    }
  if (l->has_head)
    s->dlogits = take (l, &q, R * C);
}

/* pointer arrays of a slot: (n+1) hid + 5n + (n+1) dhid + 2n */
static size_t
slot_n_ptrs (int n)
{
  return (size_t) (n + 1) + 5 * (size_t) n + (size_t) (n + 1) + 2 * (size_t) n;
}

static void
slot_init (const PpChunkLayout *l, PpSlot *s, float **ptrs)
{
  int n = l->n_blocks;
  memset (s, 0, sizeof *s);
  s->mb = -1;
  s->hid = ptrs;
  s->mean = s->hid + n + 1;
  s->rstd = s->mean + n;
  s->ln = s->rstd + n;
  s->h1 = s->ln + n;
  s->g = s->h1 + n;
  s->dhid = s->g + n;
  s->dh1 = s->dhid + n + 1;
  s->dln = s->dh1 + n;
}

int
pp_slots_init (PpSlots *q, const PpChunkLayout *l)
{
  memset (q, 0, sizeof *q);
  size_t nptr = slot_n_ptrs (l->n_blocks);
  q->slot = calloc ((size_t) l->max_inflight, sizeof (PpSlot));
  q->ptrs = calloc (nptr * ((size_t) l->max_inflight + 1), sizeof (float *));
  if (q->slot == NULL || q->ptrs == NULL)
    {
      pp_slots_fini (q);
      return 0;
    }
  for (int i = 0; i < l->max_inflight; i++)
    slot_init (l, &q->slot[i], q->ptrs + nptr * (size_t) i);
  slot_init (l, &q->scratch, q->ptrs + nptr * (size_t) l->max_inflight);
  return 1;
}

void
pp_slots_fini (PpSlots *q)
{
  free (q->slot);
  free (q->ptrs);
  memset (q, 0, sizeof *q);
}

static PpSlot *
find (PpSlots *q, const PpChunkLayout *l, int mb)
{
  if (q->slot == NULL)
    return NULL;
  for (int i = 0; i < l->max_inflight; i++)
    if (q->slot[i].mb == mb)
      return &q->slot[i];
  return NULL;
}

static void
hold (PpSlots *q, PpSlot *s, size_t bytes)
{
  q->act_bytes -= s->held;
  s->held = bytes;
  q->act_bytes += bytes;
}

PpStatus
pp_slots_for_forward (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out, PpError *err)
{
  *out = NULL;
  if (mb < 0)
    return pp_error_set (err, PP_EINVAL, "%s %d: micro-batch %d does not exist", l->who, l->part,
                         mb);
  if (find (q, l, mb) != NULL)
    return pp_error_set (err, PP_EINVAL, "%s %d: micro-batch %d is already in flight", l->who,
                         l->part, mb);
  PpSlot *s = find (q, l, -1);
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "%s %d: forward of micro-batch %d would hold more than %d micro-batches in flight",
                         l->who, l->part, mb, l->max_inflight);
  *out = s;
  return PP_OK;
}

void
pp_slots_forwarded (PpSlots *q, const PpChunkLayout *l, PpSlot *s, int mb, const float *input)
{
  s->mb = mb;
  s->input_done = 0;
  s->input = input;
  q->inflight++;
  /* recomputing keeps only the labels until the backward */
  if (l->recompute)
    hold (q, s, l->has_head ? sizeof (int32_t) * (size_t) l->rows : 0);
  else
    hold (q, s, l->fwd_bytes);
}

PpStatus
pp_slots_for_input_grad (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out, PpError *err)
{
  PpSlot *s = mb >= 0 ? find (q, l, mb) : NULL;
  *out = NULL;
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "%s %d: backward of micro-batch %d, which is not in flight", l->who,
                         l->part, mb);
  if (s->input_done)
    return pp_error_set (err, PP_EINVAL, "%s %d: input gradient of micro-batch %d computed twice",
                         l->who, l->part, mb);
  *out = s;
  return PP_OK;
}

void
pp_slots_input_done (PpSlots *q, const PpChunkLayout *l, PpSlot *s)
{
  s->input_done = 1;
  hold (q, s, l->fwd_bytes + l->grad_bytes);
}

PpStatus
pp_slots_for_weight_grad (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out,
                          PpError *err)
{
  PpSlot *s = mb >= 0 ? find (q, l, mb) : NULL;
  *out = NULL;
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "%s %d: weight gradient of micro-batch %d, which is not in flight",
                         l->who, l->part, mb);
  if (!s->input_done)
    return pp_error_set (err, PP_EINVAL,
                         "%s %d: weight gradient of micro-batch %d before its input gradient",
                         l->who, l->part, mb);
  *out = s;
  return PP_OK;
}

void
pp_slots_release (PpSlots *q, const PpChunkLayout *l, PpSlot *s)
{
  hold (q, s, 0);
  s->mb = -1;
  s->input_done = 0;
  s->input = NULL;
  if (!l->has_input)
    s->hid[0] = NULL;
  if (!l->has_head)
    s->hid[l->n_blocks] = NULL;
  q->inflight--;
}
