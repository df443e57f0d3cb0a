/* pp-kernels.h — the CPU kernels of the bundled network, forward and backward.
 *
 * Plain C over float32, row-major: a matrix [rows, cols] is rows*cols floats,
 * row after row.  GEMMs go through OpenBLAS (cblas_sgemm); everything else is
 * plain C.  Backward kernels are split the way the Zero Bubble schedules split
 * a backward pass: the *_input part computes the gradient of the input (what
 * the previous stage waits for), the *_weight part the gradients of the
 * parameters, which ACCUMULATE (+=) so micro-batches sum up.  No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Makes every BLAS call of this process single-threaded (each pipeline rank
 * is one thread; BLAS threads would oversubscribe the cores).  Call once
 * before any kernel; idempotent. */
void  pp_kernels_init (void);

/* C[m,n] = alpha * op(A) op(B) + beta * C, row-major; op(X) = X or X^T.
 * A is [m,k] (or [k,m] if trans_a), B is [k,n] (or [n,k] if trans_b). */
void  pp_gemm (int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *A, const float *B, float beta, float *C);

/* Linear layer y[n,out] = x[n,in] W[in,out] + b[out]. */
void  pp_linear_forward (const float *x, const float *W, const float *b, float *y,
                         int n, int in, int out);
/* dx[n,in] = dy[n,out] W^T  (dx is overwritten) */
void  pp_linear_backward_input (const float *dy, const float *W, float *dx,
                                int n, int in, int out);
/* dW[in,out] += x^T dy;  db[out] += sum over rows of dy */
void  pp_linear_backward_weight (const float *x, const float *dy, float *dW, float *db,
                                 int n, int in, int out);

/* LayerNorm over the last dimension: y = (x - mean) * rstd * gamma + beta.
 * mean[n] and rstd[n] are saved for the backward pass. */
void  pp_layernorm_forward (const float *x, const float *gamma, const float *beta,
                            float *y, float *mean, float *rstd, int n, int d, float eps);
/* dx (overwritten) from dy, x and the saved statistics */
void  pp_layernorm_backward_input (const float *dy, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, float *dx,
                                   int n, int d);
/* dgamma += sum dy * xhat;  dbeta += sum dy */
void  pp_layernorm_backward_weight (const float *dy, const float *x, const float *mean,
                                    const float *rstd, float *dgamma, float *dbeta,
                                    int n, int d);

/* GELU, tanh approximation (as GPT-2): y = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))). */
void  pp_gelu_forward (const float *x, float *y, size_t n);
/* dx = dy * gelu'(x)  (dx is overwritten; dx may alias dy) */
void  pp_gelu_backward (const float *x, const float *dy, float *dx, size_t n);

/* Softmax cross-entropy over c classes for n rows: probs[n,c] saved; returns
 * the SUM of the n losses (callers divide by the batch size). */
double pp_softmax_xent_forward (const float *logits, const int32_t *labels, float *probs,
                                int n, int c);
/* dlogits = (probs - onehot(labels)) * scale  (overwritten) */
void  pp_softmax_xent_backward (const float *probs, const int32_t *labels, float *dlogits,
                                int n, int c, float scale);

/* One AdamW step (decoupled weight decay, bias-corrected; t counts from 1):
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p ). */
void  pp_adamw (float *p, const float *g, float *m, float *v, size_t n,
                float lr, float b1, float b2, float eps, float wd, int t);
