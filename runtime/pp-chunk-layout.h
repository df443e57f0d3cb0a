/* pp-chunk-layout.h — a part ("chunk") of the bundled network as numbers:
 * where its parameters lie, how a micro-batch's activations are laid out in
 * a slot, and which micro-batch holds which slot.
 *
 * The CPU chunk (pp-model.c) and the GPU chunk (pp-chunk-cuda.c) differ in
 * where memory lives and which kernels run; everything here is the same for
 * both, so it is written once.  Nothing here allocates a tensor or touches
 * one: a slot's buffers are the backend's (malloc or cudaMalloc), this file
 * only carves them into tensors by pointer arithmetic, which is valid for
 * device pointers too.
 *
 * Parameters of a part, in floats: [input projection W (in_dim x D), b (D)]
 * on part 0; per block gamma (D), beta (D), W1 (D x H), b1 (H), W2 (H x D),
 * b2 (D); [head W (D x C), b (C)] on the last part.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "pp-model.h"

typedef struct {
  const float *gamma, *beta, *W1, *b1, *W2, *b2;
} PpBlockParams;

typedef struct {
  float *gamma, *beta, *W1, *b1, *W2, *b2;
} PpBlockGrads;

typedef struct {
  const char *who;        /* "part" or "GPU part": the errors' prefix */
  int part, n_parts, first_block, n_blocks, rows, max_inflight, recompute;
  int has_input, has_head;
  int D, H, in_dim, C, L;
  size_t n_params;
  size_t off_in_W, off_in_b, off_blocks, off_head_W, off_head_b;
  size_t block_stride;
  size_t align;                     /* each tensor of a slot starts on a multiple of this (floats) */
  size_t fwd_floats, grad_floats;   /* a slot's two buffers, as allocated (aligned) */
  size_t fwd_bytes, grad_bytes;     /* what they hold, as counted (exact) */
} PpChunkLayout;

/* One micro-batch's activations.  fwd_buf / grad_buf and labels belong to
 * the backend; the pointer arrays to the PpSlots. */
typedef struct {
  int      mb;            /* -1: free */
  int      input_done;    /* backward_input ran; backward_weight next */
  const float *input;     /* the caller's, not copied */
  int32_t *labels;        /* last part only: the backend's copy */
  float   *fwd_buf;       /* forward activations, NULL until first use */
  float  **hid;           /* [n_blocks + 1]: input of block k; hid[n] the chunk output */
  float  **mean, **rstd, **ln, **h1, **g;   /* [n_blocks] */
  float   *probs;
  float   *grad_buf;      /* what W needs from I, NULL until first backward_input */
  float  **dhid;          /* [n_blocks + 1]: gradient of hid[k] (dhid[0] on part 0 only) */
  float  **dh1, **dln;    /* [n_blocks] */
  float   *dlogits;
  size_t   held;          /* bytes counted in the chunk's activation bytes */
} PpSlot;

/* The micro-batches in flight: max_inflight slots and the one a recompute
 * forward runs in. */
typedef struct {
  PpSlot  *slot;          /* [max_inflight] */
  PpSlot   scratch;
  float  **ptrs;          /* every slot's pointer arrays, one allocation */
  size_t   act_bytes;     /* sum of held */
  int      inflight;
} PpSlots;

/* Checks the arguments of a part as pp_chunk_new documents them and fills l
 * in.  cfg: the model's, defaults filled in (pp_model_config); align:
 * floats (a power of two) each slot tensor is rounded up to. */
PpStatus pp_chunk_layout_init (PpChunkLayout *l, const PpModelConfig *cfg, int part, int n_parts,
                               int first_block, int n_blocks, int rows, int max_inflight,
                               int recompute, size_t align, const char *who, PpError *err);

/* Floats of forward activations one row of a part holds (after F, without
 * recompute), as pp_model_activation_bytes_per_row counts them. */
size_t pp_chunk_layout_fwd_floats_per_row (int D, int H, int C, int n_blocks, int has_input,
                                           int has_head);

/* Block k's parameters (or gradients) in an array laid out as above. */
PpBlockParams pp_chunk_layout_block (const PpChunkLayout *l, const float *base, int k);
PpBlockGrads  pp_chunk_layout_block_grads (const PpChunkLayout *l, float *base, int k);

/* Lays the tensors of s over s->fwd_buf (fwd_floats) / s->grad_buf
 * (grad_floats).  hid[0] (on a later part) and hid[n] (unless the head reads
 * it) are the caller's and set at forward time. */
void pp_slot_carve_fwd (const PpChunkLayout *l, PpSlot *s);
void pp_slot_carve_grad (const PpChunkLayout *l, PpSlot *s);

/* Every slot free, no buffers yet.  0: out of memory. */
int  pp_slots_init (PpSlots *q, const PpChunkLayout *l);
/* Frees the pointer arrays; the backend has freed the slots' buffers. */
void pp_slots_fini (PpSlots *q);

/* The slot a forward of mb goes into: PP_EINVAL if mb does not exist, is
 * already in flight, or would be one more than max_inflight. */
PpStatus pp_slots_for_forward (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out,
                               PpError *err);
/* mb's forward ran into s: in flight, holding what it keeps. */
void     pp_slots_forwarded (PpSlots *q, const PpChunkLayout *l, PpSlot *s, int mb,
                             const float *input);
/* mb's slot for its input gradient: PP_EINVAL if not in flight or done. */
PpStatus pp_slots_for_input_grad (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out,
                                  PpError *err);
void     pp_slots_input_done (PpSlots *q, const PpChunkLayout *l, PpSlot *s);
/* mb's slot for its weight gradient: PP_EINVAL if not in flight or its
 * input gradient has not run. */
PpStatus pp_slots_for_weight_grad (PpSlots *q, const PpChunkLayout *l, int mb, PpSlot **out,
                                   PpError *err);
/* mb is done: its slot is free again (its buffers are kept for reuse). */
void     pp_slots_release (PpSlots *q, const PpChunkLayout *l, PpSlot *s);
