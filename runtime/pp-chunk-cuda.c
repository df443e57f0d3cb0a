/* pp-chunk-cuda.c — a part of the bundled network on a GPU (pp-chunk-cuda.h).
 *
 * The parameter and slot layout and the micro-batch bookkeeping are
 * pp-chunk-layout.c's, as for the CPU chunk.  The math follows pp-model.c's
 * line for line (run_forward, pp_chunk_backward_input,
 * pp_chunk_backward_weight, recompute), with the kernels of pp-kernels-cuda.h
 * in place of the CPU ones:
 *  - Linear1 and GELU are one cuBLASLt call (the pre-activation h1 is its
 *    aux output, what the GELU backward needs);
 *  - the residual y = x + (g W2 + b2) is that GEMM with beta = 1 on x;
 *  - the backward's dx = dy + LayerNorm's dx is the LayerNorm kernel's;
 *  - a block's weight step sums its three column sums (b2, b1, LayerNorm)
 *    in one launch: 10 kernels per block and micro-batch, not 14;
 *  - the head's losses stay on the device, one per row.
 *
 * Memory.  Parameters, gradients and the two Adam moments are one device
 * buffer; the chunk's scratch tensors (the output during a recompute, the logits, the losses nobody asked for, the labels of each
 * slot) another.  A slot gets one buffer for its forward activations (on its
 * first forward, or its first backward with recompute) and one for what W
 * needs (on its first backward_input), then keeps them.  Every tensor carved
 * out of a buffer starts on a 256-byte boundary, the alignment cuBLASLt
 * assumes by default.  The bytes "held" are counted exactly as the CPU chunk
 * counts them.
 *
 * Everything runs on the chunk's one stream, in call order, so the chunk's
 * scratch tensors can be shared by all micro-batches.  Nothing synchronizes
 * except creation, free and the copies to the host.
 */
#include "pp-chunk-cuda.h"

#include "pp-chunk-layout.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* pp-model.c's LayerNorm epsilon */
#define PP_LN_EPS 1e-5f

struct _PpGpuChunk {
  PpChunkLayout l;        /* the slots' tensors rounded to 64 floats (256 bytes) */
  PpSlots q;              /* a slot's labels live in the device scratch */
  int device;
  PpCompute compute;
  PpCublasLt *lt;
  void *stream;
  /* device: params, grads, adam_m, adam_v carved out of state */
  float *state;
  float *params, *grads, *adam_m, *adam_v;
  float *gscratch;        /* n_params: src's gradients in add_grads (on first use) */
  /* device scratch, carved out of scratch */
  float *scratch;
  float *scratch_out;     /* [rows, D]: chunk output during recompute */
  float *scratch_logits;  /* [rows, C] (last part) */
  float *scratch_losses;  /* [rows] (last part) */
  float *scratch_bias;    /* [max(D, H, C)]: a bias cuBLASLt may not read in place */
};

/* 64 floats = 256 bytes */
static size_t
r64 (size_t n)
{
  return (n + 63) & ~(size_t) 63;
}

static float *
take (float **q, size_t n)
{
  float *p = *q;
  *q += r64 (n);
  return p;
}

static size_t
mib (size_t bytes)
{
  return (bytes + ((size_t) 1 << 20) - 1) >> 20;
}

/* a CUDA call failed: clear the (non-sticky) error, one line in err */
static PpStatus
cuda_fail (const PpGpuChunk *c, PpError *err, const char *what, cudaError_t e)
{
  (void) cudaGetLastError ();
  return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO,
                       "GPU part %d: %s: %s", c->l.part, what, cudaGetErrorString (e));
}

/* a kernel call failed with err filled in: prefix the part */
static PpStatus
kernel_fail (const PpGpuChunk *c, PpStatus st, PpError *err)
{
  if (err != NULL)
    {
      char msg[PP_ERROR_MSG_MAX];
      memcpy (msg, err->msg, sizeof msg);
      msg[sizeof msg - 1] = '\0';
      pp_error_set (err, st, "GPU part %d: %s", c->l.part, msg);
    }
  return st;
}

#define TRY(call) \
  do { PpStatus st_ = (call); if (st_ != PP_OK) return kernel_fail (c, st_, err); } while (0)

#define TRY_CUDA(call, what) \
  do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_fail (c, err, (what), e_); } while (0)

static PpStatus
dev_alloc (const PpGpuChunk *c, float **p, size_t bytes, const char *what, PpError *err)
{
  void *q = NULL;
  cudaError_t e = cudaMalloc (&q, bytes > 0 ? bytes : 256);
  if (e != cudaSuccess)
    {
      *p = NULL;
      (void) cudaGetLastError ();
      return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO,
                           "GPU part %d: out of device memory for %s (%zu MiB): %s",
                           c->l.part, what, mib (bytes), cudaGetErrorString (e));
    }
  *p = q;
  return PP_OK;
}

/* Allocates the forward activations of a slot (once; reused after). */
static PpStatus
slot_ensure_fwd (PpGpuChunk *c, PpSlot *s, PpError *err)
{
  if (s->fwd_buf != NULL)
    return PP_OK;
  PpStatus st = dev_alloc (c, &s->fwd_buf, sizeof (float) * c->l.fwd_floats, "activations", err);
  if (st != PP_OK)
    return st;
  pp_slot_carve_fwd (&c->l, s);
  return PP_OK;
}

static PpStatus
slot_ensure_grad (PpGpuChunk *c, PpSlot *s, PpError *err)
{
  if (s->grad_buf != NULL)
    return PP_OK;
  PpStatus st = dev_alloc (c, &s->grad_buf, sizeof (float) * c->l.grad_floats,
                           "activation gradients", err);
  if (st != PP_OK)
    return st;
  pp_slot_carve_grad (&c->l, s);
  return PP_OK;
}

static void
slot_release_buffers (PpSlot *s)
{
  if (s->fwd_buf != NULL)
    cudaFree (s->fwd_buf);
  if (s->grad_buf != NULL)
    cudaFree (s->grad_buf);
  s->fwd_buf = NULL;
  s->grad_buf = NULL;
}

void
pp_gpu_chunk_free (PpGpuChunk *c)
{
  if (c == NULL)
    return;
  /* nothing queued may still use what is freed */
  if (cudaStreamSynchronize ((cudaStream_t) c->stream) != cudaSuccess)
    (void) cudaGetLastError ();
  if (c->q.slot != NULL)
    for (int i = 0; i < c->l.max_inflight; i++)
      slot_release_buffers (&c->q.slot[i]);
  slot_release_buffers (&c->q.scratch);
  if (c->state != NULL)
    cudaFree (c->state);
  if (c->gscratch != NULL)
    cudaFree (c->gscratch);
  if (c->scratch != NULL)
    cudaFree (c->scratch);
  (void) cudaGetLastError ();
  pp_slots_fini (&c->q);
  free (c);
}

PpGpuChunk *
pp_gpu_chunk_new (const PpModel *m, int part, int n_parts, int first_block, int n_blocks,
                  int rows, int max_inflight, int recompute, PpCompute compute,
                  PpCublasLt *lt, void *stream, PpError *err)
{
  if (lt == NULL)
    {
      pp_error_set (err, PP_EINVAL, "GPU part %d: no cuBLASLt context given", part);
      return NULL;
    }
  if (compute != PP_COMPUTE_FP32 && compute != PP_COMPUTE_TF32 && compute != PP_COMPUTE_BF16)
    {
      pp_error_set (err, PP_EINVAL, "GPU part %d: unknown compute mode %d", part, (int) compute);
      return NULL;
    }
  PpChunkLayout l;
  if (pp_chunk_layout_init (&l, m != NULL ? pp_model_config (m) : NULL, part, n_parts, first_block, n_blocks, rows, max_inflight,
                            recompute, 64, "GPU part", err)
      != PP_OK)
    return NULL;
  /* The CPU chunk initialises the parameters. */
  PpChunk *cpu = pp_chunk_new (m, part, n_parts, first_block, n_blocks, rows, max_inflight,
                               recompute, err);
  if (cpu == NULL)
    return NULL;

  PpGpuChunk *c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      pp_chunk_free (cpu);
      pp_error_set (err, PP_ENOMEM, "out of memory for GPU part %d", part);
      return NULL;
    }
  c->l = l;
  c->compute = compute;
  c->lt = lt;
  c->stream = stream;
  cudaStream_t cs = (cudaStream_t) stream;
  size_t D = l.D, H = l.H, C = l.C, R = rows;

  cudaError_t e = cudaGetDevice (&c->device);
  if (e != cudaSuccess)
    {
      cuda_fail (c, err, "no current CUDA device", e);
      goto fail;
    }
  if (!pp_slots_init (&c->q, &c->l))
    {
      pp_error_set (err, PP_ENOMEM, "out of memory for GPU part %d", part);
      goto fail;
    }

  /* device: parameters, gradients, moments */
  size_t np = r64 (c->l.n_params);
  size_t state_bytes = sizeof (float) * 4 * np;
  if (dev_alloc (c, &c->state, state_bytes, "parameters and optimizer state", err) != PP_OK)
    goto fail;
  c->params = c->state;
  c->grads = c->state + np;
  c->adam_m = c->state + 2 * np;
  c->adam_v = c->state + 3 * np;

  /* device scratch */
  size_t bias_width = D > H ? D : H;
  if (C > bias_width)
    bias_width = C;
  size_t scratch_floats = r64 (R * D) + r64 (bias_width);
  if (c->l.has_head)
    scratch_floats += r64 (R * C) + r64 (R) + (size_t) max_inflight * r64 (R);
  if (dev_alloc (c, &c->scratch, sizeof (float) * scratch_floats, "scratch", err) != PP_OK)
    goto fail;
  float *q = c->scratch;
  c->scratch_out = take (&q, R * D);
  c->scratch_bias = take (&q, bias_width);
  if (c->l.has_head)
    {
      c->scratch_logits = take (&q, R * C);
      c->scratch_losses = take (&q, R);
      /* int32 and float have the same size */
      for (int i = 0; i < max_inflight; i++)
        c->q.slot[i].labels = (int32_t *) take (&q, R);
    }

  /* everything on the chunk's stream: a plain cudaMemcpy runs on the legacy
   * stream, which a non-blocking stream does not wait for */
  e = cudaMemsetAsync (c->state, 0, state_bytes, cs);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync (c->params, pp_chunk_params (cpu), sizeof (float) * c->l.n_params,
                         cudaMemcpyHostToDevice, cs);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize (cs);
  if (e != cudaSuccess)
    {
      cuda_fail (c, err, "copying the initial parameters", e);
      goto fail;
    }
  pp_chunk_free (cpu);
  return c;

fail:
  pp_chunk_free (cpu);
  pp_gpu_chunk_free (c);
  return NULL;
}

int
pp_gpu_chunk_in_dim (const PpGpuChunk *c)
{
  return c->l.has_input ? c->l.in_dim : c->l.D;
}

int
pp_gpu_chunk_out_dim (const PpGpuChunk *c)
{
  return c->l.has_head ? 0 : c->l.D;
}

int
pp_gpu_chunk_rows (const PpGpuChunk *c)
{
  return c->l.rows;
}

size_t
pp_gpu_chunk_n_params (const PpGpuChunk *c)
{
  return c->l.n_params;
}

float *
pp_gpu_chunk_grads_device (PpGpuChunk *c)
{
  return c->grads;
}

float *
pp_gpu_chunk_params_device (PpGpuChunk *c)
{
  return c->params;
}

size_t
pp_gpu_chunk_activation_bytes (const PpGpuChunk *c)
{
  return c->q.act_bytes;
}

int
pp_gpu_chunk_inflight (const PpGpuChunk *c)
{
  return c->q.inflight;
}

int
pp_gpu_chunk_device (const PpGpuChunk *c)
{
  return c->device;
}

/* The bias of a cuBLASLt epilogue: cuBLASLt wants it 16-byte aligned (a
 * misaligned one fails or faults on some GPUs, and there is no alignment
 * preference for it).  A part's biases sit where pp-model.c's layout puts
 * them, which is only 4-byte aligned when a width is not a multiple of 4:
 * then a copy into an aligned scratch, on the stream (the next copy waits
 * for the GEMM that reads this one). */
static PpStatus
lt_bias (PpGpuChunk *c, const float *b, int n, const float **out, PpError *err)
{
  *out = b;
  if (((uintptr_t) b & 15u) == 0)
    return PP_OK;
  TRY_CUDA (cudaMemcpyAsync (c->scratch_bias, b, sizeof (float) * (size_t) n,
                             cudaMemcpyDeviceToDevice, (cudaStream_t) c->stream),
            "aligning a bias");
  *out = c->scratch_bias;
  return PP_OK;
}

/* The forward of the chunk into slot s's activations (allocated), queued on
 * the stream.  out: where the last block writes on a middle part.  On the
 * last part, labels (device) are read and losses[rows] (device) written. */
static PpStatus
run_forward (PpGpuChunk *c, PpSlot *s, const float *input, const int32_t *labels, float *out,
             float *losses, PpError *err)
{
  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  const float *P = c->params;
  void *st = c->stream;
  const float *bias;
  PpStatus status;
  if (c->l.has_input)
    {
      if ((status = lt_bias (c, P + c->l.off_in_b, D, &bias, err)) != PP_OK)
        return status;
      TRY (pp_cuda_linear_forward (c->lt, st, input, P + c->l.off_in_W, bias, s->hid[0], R,
                                   c->l.in_dim, D, c->compute, err));
    }
  else
    s->hid[0] = (float *) input;
  if (!c->l.has_head)
    s->hid[n] = out;
  for (int k = 0; k < n; k++)
    {
      PpBlockParams b = pp_chunk_layout_block (&c->l, P, k);
      const float *x = s->hid[k];
      float *y = s->hid[k + 1];
      TRY (pp_cuda_layernorm_forward (st, x, b.gamma, b.beta, s->ln[k], s->mean[k], s->rstd[k],
                                      R, D, PP_LN_EPS, err));
      /* h1 = ln W1 + b1 (saved), g = gelu(h1) */
      if ((status = lt_bias (c, b.b1, H, &bias, err)) != PP_OK)
        return status;
      TRY (pp_cuda_linear_gelu_forward (c->lt, st, s->ln[k], b.W1, bias, s->h1[k], s->g[k],
                                        R, D, H, c->compute, err));
      if ((status = lt_bias (c, b.b2, D, &bias, err)) != PP_OK)
        return status;
      /* y = g W2 + b2 + x: the residual in the same GEMM */
      TRY (pp_cuda_linear_residual_forward (c->lt, st, s->g[k], b.W2, bias, x, y, R, H, D,
                                            c->compute, err));
    }
  if (!c->l.has_head)
    return PP_OK;
  if ((status = lt_bias (c, P + c->l.off_head_b, c->l.C, &bias, err)) != PP_OK)
    return status;
  TRY (pp_cuda_linear_forward (c->lt, st, s->hid[n], P + c->l.off_head_W, bias,
                               c->scratch_logits, R, D, c->l.C, c->compute, err));
  TRY (pp_cuda_softmax_xent_forward (st, c->scratch_logits, labels, s->probs, losses, R, c->l.C,
                                     err));
  return PP_OK;
}

PpStatus
pp_gpu_chunk_forward (PpGpuChunk *c, int mb, const float *d_input, const int32_t *d_labels,
                      float *d_out, float *d_losses, PpError *err)
{
  if (d_input == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "GPU part %d: forward of micro-batch %d without an input", c->l.part, mb);
  if (c->l.has_head && d_labels == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "GPU part %d: forward of micro-batch %d without labels", c->l.part, mb);
  if (!c->l.has_head && d_out == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "GPU part %d: forward of micro-batch %d without an output", c->l.part, mb);
  PpSlot *s;
  PpStatus st = pp_slots_for_forward (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;

  PpSlot *act = c->l.recompute ? &c->q.scratch : s;
  st = slot_ensure_fwd (c, act, err);
  if (st != PP_OK)
    return st;
  if (c->l.has_head)
    TRY_CUDA (cudaMemcpyAsync (s->labels, d_labels, sizeof (int32_t) * (size_t) c->l.rows,
                               cudaMemcpyDefault, (cudaStream_t) c->stream),
              "copying the labels");
  st = run_forward (c, act, d_input, s->labels, d_out,
                    d_losses != NULL ? d_losses : c->scratch_losses, err);
  if (st != PP_OK)
    return st;

  pp_slots_forwarded (&c->q, &c->l, s, mb, d_input);
  return PP_OK;
}

PpStatus
pp_gpu_chunk_backward_input (PpGpuChunk *c, int mb, const float *d_dout, float *d_din,
                             float loss_scale, PpError *err)
{
  PpSlot *s;
  PpStatus st = pp_slots_for_input_grad (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;
  if (!c->l.has_head && d_dout == NULL)
    return pp_error_set (err, PP_EINVAL,
                         "GPU part %d: backward of micro-batch %d without an output gradient",
                         c->l.part, mb);
  if (c->l.recompute && (st = slot_ensure_fwd (c, s, err)) != PP_OK)
    return st;
  if ((st = slot_ensure_grad (c, s, err)) != PP_OK)
    return st;
  if (c->l.recompute
      && (st = run_forward (c, s, s->input, s->labels, c->scratch_out, c->scratch_losses, err))
         != PP_OK)
    return st;

  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  size_t RD = (size_t) R * D;
  const float *P = c->params;
  void *str = c->stream;
  if (c->l.has_head)
    {
      TRY (pp_cuda_softmax_xent_backward (str, s->probs, s->labels, s->dlogits, R, c->l.C,
                                          loss_scale, err));
      TRY (pp_cuda_linear_backward_input (c->lt, str, s->dlogits, P + c->l.off_head_W,
                                          s->dhid[n], R, D, c->l.C, c->compute, err));
    }
  else
    /* W needs it after the caller has reused d_dout */
    TRY_CUDA (cudaMemcpyAsync (s->dhid[n], d_dout, sizeof (float) * RD, cudaMemcpyDefault,
                               (cudaStream_t) str),
              "copying the output gradient");

  for (int k = n - 1; k >= 0; k--)
    {
      PpBlockParams b = pp_chunk_layout_block (&c->l, P, k);
      const float *dy = s->dhid[k + 1];
      TRY (pp_cuda_linear_backward_input (c->lt, str, dy, b.W2, s->dh1[k], R, H, D,
                                          c->compute, err));
      TRY (pp_cuda_gelu_backward (str, s->h1[k], s->dh1[k], s->dh1[k], (size_t) R * H, err));
      TRY (pp_cuda_linear_backward_input (c->lt, str, s->dh1[k], b.W1, s->dln[k], R, D, H,
                                          c->compute, err));
      /* block 0 of a later part: its input gradient is din itself */
      float *dx = s->dhid[k];
      if (k == 0 && !c->l.has_input)
        dx = d_din != NULL ? d_din : c->scratch_out;
      /* dx = dy (the residual path) + LayerNorm's input gradient, one kernel */
      TRY (pp_cuda_layernorm_backward_input (str, s->dln[k], s->hid[k], b.gamma, s->mean[k],
                                             s->rstd[k], dy, dx, R, D, err));
    }
  if (c->l.has_input && d_din != NULL)
    TRY (pp_cuda_linear_backward_input (c->lt, str, s->dhid[0], P + c->l.off_in_W, d_din, R,
                                        c->l.in_dim, D, c->compute, err));

  pp_slots_input_done (&c->q, &c->l, s);
  return PP_OK;
}

PpStatus
pp_gpu_chunk_backward_weight (PpGpuChunk *c, int mb, PpError *err)
{
  PpSlot *s;
  PpStatus st = pp_slots_for_weight_grad (&c->q, &c->l, mb, &s, err);
  if (st != PP_OK)
    return st;
  int n = c->l.n_blocks, R = c->l.rows, D = c->l.D, H = c->l.H;
  float *G = c->grads;
  void *str = c->stream;
  if (c->l.has_head)
    TRY (pp_cuda_linear_backward_weight (c->lt, str, s->hid[n], s->dlogits, G + c->l.off_head_W,
                                         G + c->l.off_head_b, R, D, c->l.C, c->compute, err));
  for (int k = n - 1; k >= 0; k--)
    {
      PpBlockGrads g = pp_chunk_layout_block_grads (&c->l, G, k);
      TRY (pp_cuda_linear_backward_weight (c->lt, str, s->g[k], s->dhid[k + 1], g.W2, NULL, R,
                                           H, D, c->compute, err));
      TRY (pp_cuda_linear_backward_weight (c->lt, str, s->ln[k], s->dh1[k], g.W1, NULL, R, D,
                                           H, c->compute, err));
      /* the block's three column sums (b2, b1, LayerNorm's beta and gamma)
       * in one launch, each as its own launch would give it */
      PpColumnSum sums[3] = {
        { .x = s->dhid[k + 1], .sums = g.b2, .n = R, .d = D },
        { .x = s->dh1[k], .sums = g.b1, .n = R, .d = H },
        { .x = s->dln[k], .sums = g.beta, .x_ln = s->hid[k], .mean = s->mean[k],
          .rstd = s->rstd[k], .sums_xhat = g.gamma, .n = R, .d = D },
      };
      TRY (pp_cuda_column_sums_add (str, sums, 3, err));
    }
  if (c->l.has_input)
    TRY (pp_cuda_linear_backward_weight (c->lt, str, s->input, s->dhid[0], G + c->l.off_in_W,
                                         G + c->l.off_in_b, R, c->l.in_dim, D, c->compute, err));

  pp_slots_release (&c->q, &c->l, s);
  return PP_OK;
}

PpStatus
pp_gpu_chunk_backward (PpGpuChunk *c, int mb, const float *d_dout, float *d_din,
                       float loss_scale, PpError *err)
{
  PpStatus st = pp_gpu_chunk_backward_input (c, mb, d_dout, d_din, loss_scale, err);
  if (st != PP_OK)
    return st;
  return pp_gpu_chunk_backward_weight (c, mb, err);
}

PpStatus
pp_gpu_chunk_zero_grads (PpGpuChunk *c, PpError *err)
{
  TRY_CUDA (cudaMemsetAsync (c->grads, 0, sizeof (float) * c->l.n_params,
                             (cudaStream_t) c->stream),
            "zeroing the gradients");
  return PP_OK;
}

static PpStatus
check_pair (const PpGpuChunk *dst, const PpGpuChunk *src, const char *what, PpError *err)
{
  if (dst == NULL || src == NULL)
    return pp_error_set (err, PP_EINVAL, "%s gradients: no chunk given", what);
  if (dst->l.n_params != src->l.n_params)
    return pp_error_set (err, PP_EINVAL,
                         "GPU part %d: cannot %s the gradients of a part with %zu parameters (this one has %zu)",
                         dst->l.part, what, src->l.n_params, dst->l.n_params);
  return PP_OK;
}

PpStatus
pp_gpu_chunk_add_grads (PpGpuChunk *dst, const PpGpuChunk *src, PpError *err)
{
  PpGpuChunk *c = dst;
  PpStatus st = check_pair (dst, src, "add", err);
  if (st != PP_OK || dst->l.n_params == 0)
    return st;
  size_t bytes = sizeof (float) * dst->l.n_params;
  if (dst->gscratch == NULL
      && (st = dev_alloc (dst, &dst->gscratch, bytes, "a copy of the gradients", err)) != PP_OK)
    return st;
  TRY_CUDA (cudaMemcpyPeerAsync (dst->gscratch, dst->device, src->grads, src->device, bytes,
                                 (cudaStream_t) dst->stream),
            "copying the other copy's gradients");
  TRY (pp_cuda_add (dst->stream, dst->grads, dst->gscratch, dst->grads, dst->l.n_params, err));
  return PP_OK;
}

PpStatus
pp_gpu_chunk_copy_grads (PpGpuChunk *dst, const PpGpuChunk *src, PpError *err)
{
  PpGpuChunk *c = dst;
  PpStatus st = check_pair (dst, src, "copy", err);
  if (st != PP_OK || dst->l.n_params == 0 || dst == src)
    return st;
  TRY_CUDA (cudaMemcpyPeerAsync (dst->grads, dst->device, src->grads, src->device,
                                 sizeof (float) * dst->l.n_params, (cudaStream_t) dst->stream),
            "copying the other copy's gradients");
  return PP_OK;
}

PpStatus
pp_gpu_chunk_adamw (PpGpuChunk *c, float lr, float b1, float b2, float eps, float wd, int t,
                    PpError *err)
{
  TRY (pp_cuda_adamw (c->stream, c->params, c->grads, c->adam_m, c->adam_v, c->l.n_params, lr,
                      b1, b2, eps, wd, t, err));
  return PP_OK;
}

static PpStatus
copy_to_host (PpGpuChunk *c, const float *dev, float *out, const char *what, PpError *err)
{
  cudaStream_t cs = (cudaStream_t) c->stream;
  if (out == NULL && c->l.n_params > 0)
    return pp_error_set (err, PP_EINVAL, "GPU part %d: nowhere to copy the %s to", c->l.part,
                         what);
  /* the stream first: a failure queued earlier is reported as such */
  TRY_CUDA (cudaStreamSynchronize (cs), "waiting for the part's work");
  if (c->l.n_params == 0)
    return PP_OK;
  TRY_CUDA (cudaMemcpyAsync (out, dev, sizeof (float) * c->l.n_params, cudaMemcpyDeviceToHost,
                             cs),
            what);
  TRY_CUDA (cudaStreamSynchronize (cs), what);
  return PP_OK;
}

PpStatus
pp_gpu_chunk_copy_params_to_host (PpGpuChunk *c, float *out, PpError *err)
{
  return copy_to_host (c, c->params, out, "parameters", err);
}

PpStatus
pp_gpu_chunk_copy_grads_to_host (PpGpuChunk *c, float *out, PpError *err)
{
  return copy_to_host (c, c->grads, out, "gradients", err);
}
