/* pp-model.h — the bundled network, its synthetic task, and its split into parts.
 *
 * The network: an input projection (in_dim -> width), `layers` residual blocks
 * x + Linear2(GELU(Linear1(LayerNorm(x)))) with a hidden width of
 * hidden_mult * width, and an output head Linear(width -> classes) with
 * softmax cross-entropy.  The task is learnable: inputs are seeded normal
 * noise, labels the argmax of a fixed random teacher network (seeded), so the
 * loss falls within a few hundred steps.
 *
 * The model description (this file) is separate from the executor: a part
 * ("chunk") is a run of consecutive blocks, plus the input projection on part
 * 0 and the head on the last part, with its parameters, gradients, optimizer
 * state and the activations of the micro-batches in flight.  Parameters are
 * initialised from (seed, global layer index), so every partition of the same
 * model starts from the same weights, and the parameter arrays of parts 0..n-1
 * laid end to end are exactly those of the whole model as one part.
 *
 * No GLib.  Not thread-safe per chunk: one rank thread uses a chunk at a time.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-status.h"

typedef struct {
  int      layers;        /* L residual blocks, >= 1 */
  int      width;         /* D */
  int      hidden_mult;   /* hidden width = hidden_mult * D; 0 means 4 */
  int      in_dim;        /* input features; 0 means D */
  int      classes;       /* output classes; 0 means 16 */
  uint64_t seed;          /* weights and teacher */
} PpModelConfig;

typedef struct _PpModel PpModel;
typedef struct _PpChunk PpChunk;

/* Checks the config (one-line errors: "--width must be at least 8", ...). */
PpModel   *pp_model_new (const PpModelConfig *cfg, PpError *err);
void       pp_model_free (PpModel *m);
const PpModelConfig *pp_model_config (const PpModel *m);   /* defaults filled in */

/* Estimated cost (FLOPs of forward + backward per row) of the input
 * projection, of one block, and of the head. */
double     pp_model_cost_input (const PpModel *m);
double     pp_model_cost_block (const PpModel *m);
double     pp_model_cost_head (const PpModel *m);

/* Parameter count and bytes of activations one row of one micro-batch holds
 * in a part with n_blocks blocks (for memory estimates before a run). */
size_t     pp_model_n_params (const PpModel *m);
size_t     pp_model_activation_bytes_per_row (const PpModel *m, int n_blocks,
                                              int has_input, int has_head);

/* Splits the L blocks over n_parts parts.  spec NULL or "auto": balance the
 * estimated cost, counting part 0's input projection and the last part's
 * head (so those parts get fewer blocks, as Llama 3 did); otherwise a comma
 * list of blocks per part that must sum to L ("7,8,8,7"), each >= 1.
 * One-line errors for a list of the wrong length or sum, or L < n_parts. */
PpStatus   pp_model_partition (const PpModel *m, int n_parts, const char *spec,
                               int *blocks_per_part, PpError *err);

/* ---- the synthetic task ---------------------------------------------- */

/* The inputs x[batch, in_dim] and labels[batch] of training step `step`:
 * the same for the same (model seed, data_seed, step, batch). */
void       pp_model_batch (const PpModel *m, uint64_t data_seed, int step, int batch,
                           float *x, int32_t *labels);
/* Rows [row0, row1) of that batch only, into x + row0 * in_dim and
 * labels + row0 (threads may make disjoint ranges at once). */
void       pp_model_batch_rows (const PpModel *m, uint64_t data_seed, int step, int row0,
                                int row1, float *x, int32_t *labels);

/* ---- parts ------------------------------------------------------------- */

/* Part `part` of n_parts, holding blocks [first_block, first_block + n_blocks),
 * for micro-batches of `rows` rows, at most max_inflight of them held at once
 * (their activations are allocated on first use, then reused).  With
 * recompute, the forward keeps only the part's input and the backward runs
 * the forward again first (as GPipe does). */
PpChunk   *pp_chunk_new (const PpModel *m, int part, int n_parts, int first_block,
                         int n_blocks, int rows, int max_inflight, int recompute,
                         PpError *err);
void       pp_chunk_free (PpChunk *c);

int        pp_chunk_in_dim (const PpChunk *c);    /* in_dim on part 0, else width */
int        pp_chunk_out_dim (const PpChunk *c);   /* width; 0 on the last part */
int        pp_chunk_rows (const PpChunk *c);

/* Forward of micro-batch mb.  The chunk keeps the input pointer (no copy)
 * until mb's backward is complete, so the caller keeps it valid until then.
 * Writes out[rows, out_dim] (not on the last part).  On the last part, labels
 * are used and *loss_sum receives the sum of the rows' losses.  PP_EINVAL if
 * mb is already in flight or more than max_inflight are. */
PpStatus   pp_chunk_forward (PpChunk *c, int mb, const float *input,
                             const int32_t *labels, float *out, double *loss_sum,
                             PpError *err);

/* Full backward of mb.  dout[rows, out_dim] is the gradient from the next
 * part (ignored on the last part, where the loss gradient is used, scaled by
 * loss_scale, normally 1 / batch).  Writes din[rows, in_dim] unless din is
 * NULL (part 0 needs none).  Adds the parameter gradients and releases mb. */
PpStatus   pp_chunk_backward (PpChunk *c, int mb, const float *dout, float *din,
                              float loss_scale, PpError *err);

/* The backward split in two (Zero Bubble): I computes din and keeps what W
 * needs; W adds the parameter gradients and releases mb.  I then W gives
 * exactly the gradients of B. */
PpStatus   pp_chunk_backward_input (PpChunk *c, int mb, const float *dout, float *din,
                                    float loss_scale, PpError *err);
PpStatus   pp_chunk_backward_weight (PpChunk *c, int mb, PpError *err);

/* Parameters: a contiguous float array of pp_chunk_n_params. */
size_t     pp_chunk_n_params (const PpChunk *c);
float     *pp_chunk_params (PpChunk *c);

/* Gradients accumulate in float, micro-batch after micro-batch in the order
 * the schedule runs them, as in any fp32 training.  With exact grads
 * (pp_chunk_set_exact_grads) they sum in double, so that order cannot change
 * the result: every schedule then takes bit for bit the step of training on
 * the whole batch (the correctness test); it costs a pass over the parameters
 * per micro-batch.  pp_chunk_grads returns the gradients as floats (valid
 * until the next call on the chunk); set replaces them; add sums another
 * copy's into this one (DualPipe's two copies); copy makes this copy's equal
 * to another's (both chunks in the same mode). */
PpStatus   pp_chunk_set_exact_grads (PpChunk *c, int exact);
const float *pp_chunk_grads (PpChunk *c);
void       pp_chunk_set_grads (PpChunk *c, const float *grads);
PpStatus   pp_chunk_add_grads (PpChunk *dst, const PpChunk *src);
PpStatus   pp_chunk_copy_grads (PpChunk *dst, const PpChunk *src);
/* The gradient accumulator itself (doubles with exact gradients, else
 * floats) and its size, to carry it to another process; and adding one
 * carried here, as pp_chunk_add_grads adds a chunk's. */
void      *pp_chunk_grad_storage (PpChunk *c, size_t *bytes);
PpStatus   pp_chunk_add_grad_storage (PpChunk *dst, const void *src, size_t bytes);
void       pp_chunk_zero_grads (PpChunk *c);

/* AdamW over the chunk's parameters with its own moments; t counts from 1. */
void       pp_chunk_adamw (PpChunk *c, float lr, float beta1, float beta2, float eps,
                           float weight_decay, int t);

/* Bytes of activations held now, and micro-batches in flight. */
size_t     pp_chunk_activation_bytes (const PpChunk *c);
int        pp_chunk_inflight (const PpChunk *c);
