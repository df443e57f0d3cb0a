/* pp-kernels-cuda.h — the GPU kernels of the bundled network, forward and backward.
 *
 * The same math as pp-kernels.h, on device memory: GEMMs through cuBLASLt
 * (bias and GELU fused as epilogues), LayerNorm, GELU, softmax cross-entropy
 * and AdamW as hand-written kernels.  Plain C with no CUDA types: a device
 * pointer is a float * (or int32_t *), a stream is a void * holding a
 * cudaStream_t (NULL: the legacy default stream).
 *
 * What a caller may rely on:
 *  - Every call is asynchronous on its stream and returns a PpStatus; when
 *    given a PpError it fills in a one-line message.  Nothing exits or aborts.
 *    A failure found by the device after the launch (a bad pointer) shows up
 *    at the next synchronizing call, as with any CUDA launch.
 *  - Row-major layouts and argument meanings are those of pp-kernels.h;
 *    *_weight backward kernels ACCUMULATE (+=) into their outputs.
 *  - Deterministic: no atomics anywhere, every reduction runs in a fixed
 *    order, so the same inputs on the same GPU give bit-identical outputs.
 *  - Reductions that decide accuracy (LayerNorm statistics, softmax sums, the
 *    loss) accumulate in double, as the CPU kernels do.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "pp-status.h"

/* How many CUDA devices this process sees.  *n is always set (0 on failure).
 * Returns PP_OK when *n >= 1; PP_EUNSUPPORTED with the reason ("no CUDA
 * driver", "no CUDA device", ...) when there is nothing to run on. */
PpStatus pp_cuda_device_count (int *n, PpError *err);

/* ---- GEMM through cuBLASLt ---- */

typedef enum {
  PP_COMPUTE_FP32,   /* full fp32 FMAs: matches pp_gemm to rounding */
  PP_COMPUTE_TF32,   /* fp32 storage, tensor cores with 10-bit-mantissa inputs */
  PP_COMPUTE_BF16,   /* fp32 storage; both operands rounded to bf16 (round to nearest
                      * even) into the context's scratch, products summed in fp32 on
                      * the tensor cores.  (CUBLAS_COMPUTE_32F_FAST_16BF alone only
                      * permits that: on an H200 it chose the TF32 kernels.)  Where
                      * cuBLASLt has no bf16 kernel for a layout, FAST_16BF on the
                      * fp32 operands, then plain fp32. */
} PpCompute;

typedef enum {
  PP_EPI_NONE,
  PP_EPI_BIAS,       /* C[i,j] += bias[j] */
  PP_EPI_GELU_BIAS,  /* aux = pre-activation (with bias if given), C = gelu(aux) */
} PpEpilogue;

/* One cuBLASLt handle and its workspace.  A context serves one stream at a
 * time (its workspace is shared by every call) and one thread at a time (its
 * kept GEMM plans are not locked): give each concurrently running stream or
 * thread its own.  Uses the current device. */
typedef struct PpCublasLt PpCublasLt;

PpCublasLt *pp_cublaslt_new (PpError *err);
void        pp_cublaslt_free (PpCublasLt *ctx);   /* NULL is fine */
/* A context keeps the plan (descriptor, layouts, the heuristic's algorithm)
 * of each GEMM shape, types, epilogue and alignments it has run, up to 64:
 * calls that found their plan (hits) and calls that made one (misses). */
void        pp_cublaslt_plan_stats (const PpCublasLt *ctx, uint64_t *hits, uint64_t *misses);

/* C[m,n] = epi(alpha * op(A) op(B) + beta * C), row-major exactly as pp_gemm:
 * A is [m,k] (or [k,m] if trans_a), B is [k,n] (or [n,k] if trans_b).
 * bias[n] is required for PP_EPI_BIAS, optional (NULL) for PP_EPI_GELU_BIAS.
 * aux[m,n] (row-major, like C) receives the pre-activation for
 * PP_EPI_GELU_BIAS (what pp_cuda_gelu_backward needs); NULL otherwise.
 * cuBLASLt fuses GELU when the layout allows (n a multiple of 8, aux aligned
 * to 16 bytes); otherwise the bias GEMM writes aux and a GELU kernel follows.
 * The result is the same either way, up to cuBLASLt's GELU rounding.
 * m, n or k may be 0 (k == 0 gives C = epi(beta * C)). */
PpStatus pp_cublaslt_gemm (PpCublasLt *ctx, void *stream,
                           int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const float *A, const float *B,
                           float beta, float *C,
                           PpCompute compute, PpEpilogue epilogue,
                           const float *bias, float *aux, PpError *err);

/* ---- Linear layers (pp_linear_* of pp-kernels.h) ---- */

/* y[n,out] = x[n,in] W[in,out] + b[out]  (b may be NULL) */
PpStatus pp_cuda_linear_forward (PpCublasLt *ctx, void *stream,
                                 const float *x, const float *W, const float *b,
                                 float *y, int n, int in, int out,
                                 PpCompute compute, PpError *err);
/* y[n,out] = x[n,in] W[in,out] + b[out] + residual[n,out], one cuBLASLt call
 * (beta = 1 on the residual, read in place of C): a residual block's second
 * linear layer.  residual and y are distinct buffers; in > 0. */
PpStatus pp_cuda_linear_residual_forward (PpCublasLt *ctx, void *stream,
                                          const float *x, const float *W, const float *b,
                                          const float *residual, float *y,
                                          int n, int in, int out,
                                          PpCompute compute, PpError *err);
/* y = gelu(x W + b) with pre[n,out] = x W + b saved for the backward
 * (b may be NULL). */
PpStatus pp_cuda_linear_gelu_forward (PpCublasLt *ctx, void *stream,
                                      const float *x, const float *W, const float *b,
                                      float *pre, float *y, int n, int in, int out,
                                      PpCompute compute, PpError *err);
/* dx[n,in] = dy[n,out] W^T  (overwritten) */
PpStatus pp_cuda_linear_backward_input (PpCublasLt *ctx, void *stream,
                                        const float *dy, const float *W, float *dx,
                                        int n, int in, int out,
                                        PpCompute compute, PpError *err);
/* dW[in,out] += x^T dy;  db[out] += column sums of dy (db may be NULL) */
PpStatus pp_cuda_linear_backward_weight (PpCublasLt *ctx, void *stream,
                                         const float *x, const float *dy,
                                         float *dW, float *db, int n, int in, int out,
                                         PpCompute compute, PpError *err);

/* ---- Hand-written kernels (pp-kernels-cuda.cu) ---- */

/* sums[j] += sum over the n rows of x[n,d] column j; fixed order, no atomics */
PpStatus pp_cuda_column_sum_add (void *stream, const float *x, float *sums,
                                 int n, int d, PpError *err);

/* Up to 4 column sums in one launch, each exactly what its own launch gives:
 * sums[j] += sum over rows of x[n,d] column j, and where x_ln is given (a
 * LayerNorm's weight gradient: x = dy, x_ln its input) also sums_xhat[j] +=
 * sum of x * xhat.  The sums of different jobs must not overlap. */
typedef struct {
  const float *x;
  float       *sums;
  const float *x_ln, *mean, *rstd;   /* LayerNorm only, else NULL */
  float       *sums_xhat;
  int          n, d;
} PpColumnSum;
PpStatus pp_cuda_column_sums_add (void *stream, const PpColumnSum *jobs, int n_jobs,
                                  PpError *err);

/* LayerNorm over the last dimension, one warp per row; mean[n], rstd[n] saved. */
PpStatus pp_cuda_layernorm_forward (void *stream, const float *x, const float *gamma,
                                    const float *beta, float *y, float *mean, float *rstd,
                                    int n, int d, float eps, PpError *err);
/* dx (overwritten) from dy, x and the saved statistics, plus residual[n,d]
 * where not NULL (a residual block's input gradient in the same kernel:
 * exactly what pp_cuda_add after it gives).  dx aliases none of the inputs. */
PpStatus pp_cuda_layernorm_backward_input (void *stream, const float *dy, const float *x,
                                           const float *gamma, const float *mean,
                                           const float *rstd, const float *residual,
                                           float *dx, int n, int d, PpError *err);
/* dgamma += sum dy * xhat;  dbeta += sum dy  (column reductions, fixed order) */
PpStatus pp_cuda_layernorm_backward_weight (void *stream, const float *dy, const float *x,
                                            const float *mean, const float *rstd,
                                            float *dgamma, float *dbeta,
                                            int n, int d, PpError *err);

/* GELU, tanh approximation, as pp_gelu_forward / pp_gelu_backward
 * (y may alias x, dx may alias dy). */
PpStatus pp_cuda_gelu_forward (void *stream, const float *x, float *y, size_t n,
                               PpError *err);
PpStatus pp_cuda_gelu_backward (void *stream, const float *x, const float *dy, float *dx,
                                size_t n, PpError *err);

/* Softmax cross-entropy over c classes for n rows, one block per row:
 * probs[n,c] saved, losses[n] the per-row -log p[label] (sum them on the
 * host, in double, to get what pp_softmax_xent_forward returns).  labels is
 * a device array; a label outside [0, c) gives that row a NaN loss. */
PpStatus pp_cuda_softmax_xent_forward (void *stream, const float *logits,
                                       const int32_t *labels, float *probs, float *losses,
                                       int n, int c, PpError *err);
/* dlogits = (probs - onehot(labels)) * scale  (overwritten) */
PpStatus pp_cuda_softmax_xent_backward (void *stream, const float *probs,
                                        const int32_t *labels, float *dlogits,
                                        int n, int c, float scale, PpError *err);

/* One AdamW step, as pp_adamw (t counts from 1). */
PpStatus pp_cuda_adamw (void *stream, float *p, const float *g, float *m, float *v,
                        size_t n, float lr, float b1, float b2, float eps, float wd,
                        int t, PpError *err);

/* Used by pp_cublaslt_gemm when k == 0: C = epi(beta * C), aux as above. */
PpStatus pp_cuda_gemm_empty_epilogue (void *stream, float *C, int m, int n, float beta,
                                      const float *bias, float *aux, int gelu,
                                      PpError *err);

/* y[i] = a[i] + b[i] for i < n; y may alias a or b (y == a: a += b).
 * The residual adds of the blocks and the sum of two gradient copies. */
PpStatus pp_cuda_add (void *stream, const float *a, const float *b, float *y, size_t n,
                      PpError *err);

/* y[i] = x[i] rounded to bfloat16 (round to nearest even); y holds n
 * 2-byte values. */
PpStatus pp_cuda_to_bf16 (void *stream, const float *x, void *y, size_t n, PpError *err);

#ifdef __cplusplus
}
#endif
