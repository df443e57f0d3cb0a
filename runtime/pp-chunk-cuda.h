/* pp-chunk-cuda.h — a part ("chunk") of the bundled network on a GPU.
 *
 * PpChunk (pp-model.h) on a device: the same parameters (initialised by the
 * CPU code, then copied), the same math (the kernels of pp-kernels-cuda.h),
 * and the same layout, micro-batch bookkeeping and error checks, which both
 * take from pp-chunk-layout.h.
 * Plain C with no CUDA types: device pointers are float * / int32_t *, a
 * stream is a void * holding a cudaStream_t.
 *
 * Threads, devices and streams:
 *  - A chunk lives in the CUDA context that was current when it was created
 *    (the rank's device, or a green context on it): make that context current
 *    before any call, as for any CUDA allocation.
 *  - All work is queued on the chunk's stream; forward and backward never
 *    synchronize (nor allocate, after a slot's first use).  Only creation,
 *    pp_gpu_chunk_free and the copies to the host wait for the stream.
 *  - Every pointer the caller passes to forward / backward is read or
 *    written on the stream, later: keep inputs valid and unmodified (and
 *    outputs unread) until the stream has got there.  d_input is read again
 *    by the backward (recompute, LayerNorm of a later part's first block) and
 *    by backward_weight (part 0's input projection): keep it until mb's
 *    backward_weight has run on the stream.
 *  - GEMMs go through the caller's PpCublasLt, which must serve this stream
 *    only (its workspace is shared by every call).
 *
 * Gradients accumulate in float on the device, micro-batch after micro-batch
 * (there is no exact-gradients mode here).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-kernels-cuda.h"
#include "pp-model.h"

typedef struct _PpGpuChunk PpGpuChunk;

/* Same arguments as pp_chunk_new, plus the compute mode of the GEMMs, the
 * cuBLASLt context and the stream.  Allocates (cudaMalloc) in the current
 * context; parameters are those of pp_chunk_new, copied; gradients and Adam
 * moments zero.  Activations are allocated per slot on its first use (one
 * device buffer for the forward, one for what W needs), then reused. */
PpGpuChunk *pp_gpu_chunk_new (const PpModel *m, int part, int n_parts, int first_block,
                              int n_blocks, int rows, int max_inflight, int recompute,
                              PpCompute compute, PpCublasLt *lt, void *stream,
                              PpError *err);
void        pp_gpu_chunk_free (PpGpuChunk *c);   /* synchronizes its stream first; NULL ok */

int         pp_gpu_chunk_in_dim (const PpGpuChunk *c);    /* in_dim on part 0, else width */
int         pp_gpu_chunk_out_dim (const PpGpuChunk *c);   /* width; 0 on the last part */
int         pp_gpu_chunk_rows (const PpGpuChunk *c);
size_t      pp_gpu_chunk_n_params (const PpGpuChunk *c);

/* Forward of mb.  d_input[rows, in_dim] (device) is kept by pointer until
 * mb's backward_weight.  Not on the last part: d_out[rows, out_dim] receives
 * the output.  On the last part: d_labels[rows] (device; copied on the
 * stream, so it may be reused once the stream has passed this call) and
 * d_losses[rows] (device; may be NULL) receives each row's loss; sum them in
 * double on the host for pp_chunk_forward's *loss_sum.  PP_EINVAL if mb is
 * already in flight, or more than max_inflight would be. */
PpStatus pp_gpu_chunk_forward (PpGpuChunk *c, int mb, const float *d_input,
                               const int32_t *d_labels, float *d_out, float *d_losses,
                               PpError *err);
/* As pp_chunk_backward_input / _weight / pp_chunk_backward: d_dout[rows,
 * out_dim] (ignored on the last part, which scales its loss gradient by
 * loss_scale) is copied on the stream; d_din[rows, in_dim] is written unless
 * NULL. */
PpStatus pp_gpu_chunk_backward_input (PpGpuChunk *c, int mb, const float *d_dout,
                                      float *d_din, float loss_scale, PpError *err);
PpStatus pp_gpu_chunk_backward_weight (PpGpuChunk *c, int mb, PpError *err);
PpStatus pp_gpu_chunk_backward (PpGpuChunk *c, int mb, const float *d_dout, float *d_din,
                                float loss_scale, PpError *err);

/* Parameters and gradients: n_params floats each, device memory, laid out as
 * pp_chunk_params. */
PpStatus pp_gpu_chunk_zero_grads (PpGpuChunk *c, PpError *err);   /* cudaMemsetAsync */
float   *pp_gpu_chunk_grads_device (PpGpuChunk *c);
float   *pp_gpu_chunk_params_device (PpGpuChunk *c);

/* dst.grads += src.grads, and dst.grads = src.grads (DualPipe's two copies
 * of a part).  src may live on another device: its gradients are copied
 * with cudaMemcpyPeerAsync (dst's device, src's device) on dst's stream, into
 * a scratch of dst for the sum (allocated on the first add).  The caller has
 * synchronized src's stream (src's gradients are final) and made dst's
 * context current.  Asynchronous on dst's stream.  PP_EINVAL when the two
 * chunks differ in size. */
PpStatus pp_gpu_chunk_add_grads (PpGpuChunk *dst, const PpGpuChunk *src, PpError *err);
PpStatus pp_gpu_chunk_copy_grads (PpGpuChunk *dst, const PpGpuChunk *src, PpError *err);

/* AdamW over the chunk's parameters with its own moments (pp_cuda_adamw);
 * t counts from 1. */
PpStatus pp_gpu_chunk_adamw (PpGpuChunk *c, float lr, float b1, float b2, float eps,
                             float wd, int t, PpError *err);

/* Synchronous: wait for the stream, then copy n_params floats to out. */
PpStatus pp_gpu_chunk_copy_params_to_host (PpGpuChunk *c, float *out, PpError *err);
PpStatus pp_gpu_chunk_copy_grads_to_host (PpGpuChunk *c, float *out, PpError *err);

/* Bytes of activations held now, counted as pp_chunk_activation_bytes counts
 * them (so a CPU and a GPU chunk report the same), and micro-batches in
 * flight. */
size_t   pp_gpu_chunk_activation_bytes (const PpGpuChunk *c);
int      pp_gpu_chunk_inflight (const PpGpuChunk *c);
/* The device (cudaGetDevice) current when the chunk was created. */
int      pp_gpu_chunk_device (const PpGpuChunk *c);
