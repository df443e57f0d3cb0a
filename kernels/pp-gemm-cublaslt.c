/* pp-gemm-cublaslt.c — row-major GEMMs (pp_gemm's semantics) through cuBLASLt,
 * with the bias and GELU epilogues, and the linear layers built on them.
 *
 * cuBLASLt is column-major.  A row-major [r,c] matrix is, byte for byte, a
 * column-major [c,r] one, so row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T: swap the operands, keep the transposes, and C^T's
 * rows are C's columns — which is also why a cuBLASLt bias (one value per
 * column-major row) is our per-column bias b[n].
 */
#include "pp-kernels-cuda.h"

#include "pp-cublaslt-api.h"
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What llm.c gives cuBLASLt on Hopper; some sm_90 kernels want more than 4 MiB. */
#define PP_CUBLASLT_WORKSPACE ((size_t) 32 << 20)

/* A GEMM's plan: its descriptor, layouts and the algorithm cuBLASLt's
 * heuristic chose, for one shape, types, epilogue and set of alignments.
 * Asking the heuristic takes tens of microseconds of host time, and a step
 * makes the same few GEMMs hundreds of times, so each context keeps its
 * plans; a call only sets its bias / aux pointers on the plan's descriptor.
 * A plan with found == 0 remembers that no algorithm exists. */
typedef struct {
  int                 trans_a, trans_b, m, n, k;
  cudaDataType_t      ab_type;
  cublasComputeType_t compute;
  cublasLtEpilogue_t  epilogue;
  uint32_t            al_a, al_b, al_c, al_d, al_bias, al_aux;
  int                 has_bias, has_aux;
} PlanKey;

typedef struct {
  int                      used;
  PlanKey                  key;
  int                      found;
  cublasStatus_t           status;      /* the heuristic's answer when not found */
  cublasLtMatmulDesc_t     desc;
  cublasLtMatrixLayout_t   lay_a, lay_b, lay_c;
  cublasLtMatmulAlgo_t     algo;
} Plan;

#define PP_CUBLASLT_PLANS 64

/* the library's functions (opened by pp_cublaslt_new, which every other
 * call here follows: each needs its context) */
static const PpCublasLtApi *const lt = &pp_cublaslt_fns;

struct PpCublasLt {
  cublasLtHandle_t handle;
  void            *workspace;
  size_t           workspace_size;
  void            *bf16;           /* BF16 compute: both operands rounded, grown on demand */
  size_t           bf16_size;
  Plan             plans[PP_CUBLASLT_PLANS];
  int              next_plan;      /* the slot a new plan takes when all are used */
  uint64_t         plan_hits, plan_misses;
};

static void
plan_clear (Plan *p)
{
  if (p->desc != NULL)
    lt->MatmulDescDestroy (p->desc);
  if (p->lay_a != NULL)
    lt->MatrixLayoutDestroy (p->lay_a);
  if (p->lay_b != NULL)
    lt->MatrixLayoutDestroy (p->lay_b);
  if (p->lay_c != NULL)
    lt->MatrixLayoutDestroy (p->lay_c);
  memset (p, 0, sizeof *p);
}

static PpStatus
lt_error (PpError *err, const char *what, cublasStatus_t s)
{
  return pp_error_set (err, PP_EIO, "cuBLASLt %s failed: %s (%s)", what,
                       lt->GetStatusName (s), lt->GetStatusString (s));
}

PpCublasLt *
pp_cublaslt_new (PpError *err)
{
  int count;
  if (pp_cuda_device_count (&count, err) != PP_OK)
    return NULL;

  if (pp_cublaslt_api (err) == NULL)
    return NULL;
  PpCublasLt *ctx = calloc (1, sizeof *ctx);
  if (ctx == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "cuBLASLt context: out of memory");
      return NULL;
    }
  cublasStatus_t s = lt->Create (&ctx->handle);
  if (s != CUBLAS_STATUS_SUCCESS)
    {
      lt_error (err, "handle creation", s);
      free (ctx);
      return NULL;
    }
  cudaError_t e = cudaMalloc (&ctx->workspace, PP_CUBLASLT_WORKSPACE);
  if (e != cudaSuccess)
    {
      (void) cudaGetLastError ();
      pp_error_set (err, PP_ENOMEM, "cuBLASLt workspace (%zu MiB): %s",
                    PP_CUBLASLT_WORKSPACE >> 20, cudaGetErrorString (e));
      lt->Destroy (ctx->handle);
      free (ctx);
      return NULL;
    }
  ctx->workspace_size = PP_CUBLASLT_WORKSPACE;
  return ctx;
}

void
pp_cublaslt_free (PpCublasLt *ctx)
{
  if (ctx == NULL)
    return;
  for (int i = 0; i < PP_CUBLASLT_PLANS; i++)
    plan_clear (&ctx->plans[i]);
  /* cudaFree waits for the device, so no call still uses the workspace */
  cudaFree (ctx->workspace);
  cudaFree (ctx->bf16);
  lt->Destroy (ctx->handle);
  free (ctx);
}

void
pp_cublaslt_plan_stats (const PpCublasLt *ctx, uint64_t *hits, uint64_t *misses)
{
  if (hits)
    *hits = ctx ? ctx->plan_hits : 0;
  if (misses)
    *misses = ctx ? ctx->plan_misses : 0;
}

/* The largest power of two (at most 256) dividing the address: what we may
 * promise cuBLASLt about alignment (its default assumes 256). */
static uint32_t
alignment_of (const void *p)
{
  uintptr_t a = (uintptr_t) p;
  uint32_t al = 256;
  while (al > 1 && (a & (al - 1)) != 0)
    al >>= 1;
  return al;
}

typedef struct {
  int trans_a, trans_b, m, n, k;
  float alpha, beta;
  const float *A, *B, *C;
  float *D;
  const void *Ain, *Bin;          /* what cuBLASLt reads: A, B or their bf16 copies */
  cudaDataType_t ab_type;         /* CUDA_R_32F or CUDA_R_16BF */
  cublasComputeType_t compute;
  cublasLtEpilogue_t epilogue;
  const float *bias;
  float *aux;
} LtCall;

/* Builds plan p for call c (p zeroed, key set): descriptor, layouts and the
 * heuristic's algorithm.  A cuBLASLt failure is returned (p cleared); no
 * algorithm is a plan with found == 0. */
static PpStatus
plan_build (PpCublasLt *ctx, Plan *p, const LtCall *c, PpError *err)
{
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t s;
  const char *what = "";

#define LT_TRY(call, name) \
  do { what = (name); s = (call); if (s != CUBLAS_STATUS_SUCCESS) goto lt_fail; } while (0)

  /* column-major view: D^T[n,m] = op(B)^T[n,k] op(A)^T[k,m] */
  cublasOperation_t op_b = c->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_a = c->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_TRY (lt->MatmulDescCreate (&p->desc, c->compute, CUDA_R_32F), "descriptor");
  LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &op_b, sizeof op_b), "TRANSA");
  LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &op_a, sizeof op_a), "TRANSB");
  LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                          &c->epilogue, sizeof c->epilogue), "EPILOGUE");
  if (c->bias != NULL)
    LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                            &c->bias, sizeof c->bias), "BIAS_POINTER");
  if (c->aux != NULL)
    {
      int64_t ld_aux = c->n;
      LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &c->aux, sizeof c->aux), "AUX_POINTER");
      LT_TRY (lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                              &ld_aux, sizeof ld_aux), "AUX_LD");
    }

  /* row-major B [k,n] is column-major [n,k] (ld n); B^T stored [n,k] is [k,n] (ld k) */
  if (c->trans_b)
    LT_TRY (lt->MatrixLayoutCreate (&p->lay_b, c->ab_type, c->k, c->n, c->k), "layout B");
  else
    LT_TRY (lt->MatrixLayoutCreate (&p->lay_b, c->ab_type, c->n, c->k, c->n), "layout B");
  if (c->trans_a)
    LT_TRY (lt->MatrixLayoutCreate (&p->lay_a, c->ab_type, c->m, c->k, c->m), "layout A");
  else
    LT_TRY (lt->MatrixLayoutCreate (&p->lay_a, c->ab_type, c->k, c->m, c->k), "layout A");
  LT_TRY (lt->MatrixLayoutCreate (&p->lay_c, CUDA_R_32F, c->n, c->m, c->n), "layout C");

  uint64_t ws = ctx->workspace_size;
  LT_TRY (lt->MatmulPreferenceCreate (&pref), "preference");
  LT_TRY (lt->MatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &ws, sizeof ws), "workspace preference");
  LT_TRY (lt->MatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &p->key.al_b, sizeof p->key.al_b),
          "alignment preference");
  LT_TRY (lt->MatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &p->key.al_a, sizeof p->key.al_a),
          "alignment preference");
  LT_TRY (lt->MatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &p->key.al_c, sizeof p->key.al_c),
          "alignment preference");
  LT_TRY (lt->MatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &p->key.al_d, sizeof p->key.al_d),
          "alignment preference");

  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  s = lt->MatmulAlgoGetHeuristic (ctx->handle, p->desc, p->lay_b, p->lay_a, p->lay_c,
                                      p->lay_c, pref, 1, &heur, &found);
  lt->MatmulPreferenceDestroy (pref);
  pref = NULL;
  /* kept: an algorithm, or cuBLASLt's "none for this"; anything else (out
   * of memory, an internal error) may pass, so it is not remembered */
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
    {
      what = "algorithm heuristic";
      goto lt_fail;
    }
  p->used = 1;
  p->status = s;
  p->found = s == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p->found)
    p->algo = heur.algo;
  return PP_OK;

lt_fail:
  if (pref != NULL)
    lt->MatmulPreferenceDestroy (pref);
  plan_clear (p);
  return lt_error (err, what, s);
#undef LT_TRY
}

/* The plan for call c: kept, or built now in a free slot (or the oldest). */
static Plan *
plan_for (PpCublasLt *ctx, const LtCall *c, PpError *err)
{
  PlanKey key;
  memset (&key, 0, sizeof key);   /* padding too: keys are compared with memcmp */
  key.trans_a = c->trans_a;
  key.trans_b = c->trans_b;
  key.m = c->m;
  key.n = c->n;
  key.k = c->k;
  key.ab_type = c->ab_type;
  key.compute = c->compute;
  key.epilogue = c->epilogue;
  key.al_a = alignment_of (c->Ain);
  key.al_b = alignment_of (c->Bin);
  key.al_c = alignment_of (c->C);
  key.al_d = alignment_of (c->D);
  key.has_bias = c->bias != NULL;
  key.al_bias = c->bias != NULL ? alignment_of (c->bias) : 0;
  key.has_aux = c->aux != NULL;
  key.al_aux = c->aux != NULL ? alignment_of (c->aux) : 0;

  Plan *free_slot = NULL;
  for (int i = 0; i < PP_CUBLASLT_PLANS; i++)
    {
      Plan *p = &ctx->plans[i];
      if (p->used && memcmp (&p->key, &key, sizeof key) == 0)
        {
          ctx->plan_hits++;
          return p;
        }
      if (!p->used && free_slot == NULL)
        free_slot = p;
    }
  if (free_slot == NULL)
    {
      free_slot = &ctx->plans[ctx->next_plan];
      ctx->next_plan = (ctx->next_plan + 1) % PP_CUBLASLT_PLANS;
      plan_clear (free_slot);
    }
  ctx->plan_misses++;
  free_slot->key = key;
  if (plan_build (ctx, free_slot, c, err) != PP_OK)
    return NULL;
  return free_slot;
}

/* One cublasLtMatmul.  PP_EUNSUPPORTED (message set) when cuBLASLt offers no
 * algorithm for this shape and epilogue, so the caller can fall back. */
static PpStatus
lt_matmul (PpCublasLt *ctx, void *stream, const LtCall *c, PpError *err)
{
  cublasStatus_t s;
  Plan *p = plan_for (ctx, c, err);
  if (p == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_EIO;
  if (!p->found)
    return pp_error_set (err, PP_EUNSUPPORTED,
                         "cuBLASLt has no algorithm for %s%s GEMM %dx%dx%d (epilogue %d): %s",
                         c->trans_a ? "T" : "N", c->trans_b ? "T" : "N", c->m, c->n, c->k,
                         (int) c->epilogue, lt->GetStatusName (p->status));
  /* this call's pointers: the plan was made for their alignments only */
  if (c->bias != NULL
      && (s = lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                              &c->bias, sizeof c->bias)) != CUBLAS_STATUS_SUCCESS)
    return lt_error (err, "BIAS_POINTER", s);
  if (c->aux != NULL
      && (s = lt->MatmulDescSetAttribute (p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &c->aux, sizeof c->aux)) != CUBLAS_STATUS_SUCCESS)
    return lt_error (err, "AUX_POINTER", s);
  s = lt->Matmul (ctx->handle, p->desc, &c->alpha, c->Bin, p->lay_b, c->Ain, p->lay_a,
                      &c->beta, c->C, p->lay_c, c->D, p->lay_c, &p->algo,
                      ctx->workspace, ctx->workspace_size, (cudaStream_t) stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return lt_error (err, "matmul", s);
  return PP_OK;
}

/* A tensor-core mode may have no kernel for a layout (4-byte aligned
 * pointers, odd leading dimensions): then the next more accurate one rather
 * than a failure — bf16 operands, then FAST_16BF on the fp32 ones, then
 * plain fp32. */
static PpStatus
lt_matmul_any (PpCublasLt *ctx, void *stream, LtCall *c, PpError *err)
{
  PpStatus st = lt_matmul (ctx, stream, c, err);
  if (st != PP_EUNSUPPORTED)
    return st;
  if (c->ab_type == CUDA_R_16BF)
    {
      c->ab_type = CUDA_R_32F;
      c->Ain = c->A;
      c->Bin = c->B;
      c->compute = CUBLAS_COMPUTE_32F_FAST_16BF;
      st = lt_matmul (ctx, stream, c, err);
      if (st != PP_EUNSUPPORTED)
        return st;
    }
  if (c->compute == CUBLAS_COMPUTE_32F)
    return st;
  c->compute = CUBLAS_COMPUTE_32F;
  return lt_matmul (ctx, stream, c, err);
}

/* The context's bf16 scratch holds at least `bytes`.  Growing it waits for
 * the stream: earlier calls on it may still read the old one. */
static PpStatus
bf16_scratch (PpCublasLt *ctx, void *stream, size_t bytes, PpError *err)
{
  cudaError_t e;
  if (bytes <= ctx->bf16_size)
    return PP_OK;
  if ((e = cudaStreamSynchronize ((cudaStream_t) stream)) != cudaSuccess)
    {
      (void) cudaGetLastError ();
      return pp_error_set (err, PP_EIO, "gemm: waiting for the stream: %s", cudaGetErrorString (e));
    }
  cudaFree (ctx->bf16);
  ctx->bf16 = NULL;
  ctx->bf16_size = 0;
  bytes += bytes / 4;
  if ((e = cudaMalloc (&ctx->bf16, bytes)) != cudaSuccess)
    {
      (void) cudaGetLastError ();
      ctx->bf16 = NULL;
      return pp_error_set (err, PP_ENOMEM, "gemm: bf16 operands (%.1f MiB): %s",
                           (double) bytes / 1048576.0, cudaGetErrorString (e));
    }
  ctx->bf16_size = bytes;
  return PP_OK;
}

/* pp_cublaslt_gemm with the result in D, C read only (D == C: in place).
 * Out of place only without GELU, and with k > 0. */
static PpStatus
gemm (PpCublasLt *ctx, void *stream, int trans_a, int trans_b, int m, int n, int k,
      float alpha, const float *A, const float *B, float beta, const float *C, float *D,
      PpCompute compute, PpEpilogue epilogue, const float *bias, float *aux, PpError *err)
{
  if (ctx == NULL)
    return pp_error_set (err, PP_EINVAL, "gemm: no cuBLASLt context");
  if (m < 0 || n < 0 || k < 0)
    return pp_error_set (err, PP_EINVAL, "gemm: negative shape %dx%dx%d", m, n, k);
  if (epilogue == PP_EPI_BIAS && bias == NULL)
    return pp_error_set (err, PP_EINVAL, "gemm: the bias epilogue needs a bias");
  if (epilogue != PP_EPI_NONE && epilogue != PP_EPI_BIAS && epilogue != PP_EPI_GELU_BIAS)
    return pp_error_set (err, PP_EINVAL, "gemm: unknown epilogue %d", (int) epilogue);
  if (epilogue == PP_EPI_NONE)
    bias = NULL;
  if (epilogue != PP_EPI_GELU_BIAS)
    aux = NULL;

  cublasComputeType_t ct;
  switch (compute)
    {
    case PP_COMPUTE_FP32: ct = CUBLAS_COMPUTE_32F; break;
    case PP_COMPUTE_TF32: ct = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case PP_COMPUTE_BF16: ct = CUBLAS_COMPUTE_32F_FAST_16BF; break;
    default:
      return pp_error_set (err, PP_EINVAL, "gemm: unknown compute mode %d", (int) compute);
    }

  if (m == 0 || n == 0)
    return PP_OK;
  if (C == NULL || D == NULL || (k > 0 && (A == NULL || B == NULL)))
    return pp_error_set (err, PP_EINVAL, "gemm: a NULL matrix");
  if (D != C && (k == 0 || epilogue == PP_EPI_GELU_BIAS))
    return pp_error_set (err, PP_EINVAL, "gemm: out of place only with k > 0 and no GELU");
  if (k == 0)
    return pp_cuda_gemm_empty_epilogue (stream, D, m, n, beta, bias, aux,
                                        epilogue == PP_EPI_GELU_BIAS, err);

  LtCall call = {
    .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
    .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C, .D = D,
    .Ain = A, .Bin = B, .ab_type = CUDA_R_32F,
    .compute = ct, .bias = bias, .aux = NULL,
  };

  if (compute == PP_COMPUTE_BF16)
    {
      /* both operands rounded to bf16, 256-byte aligned, products summed in fp32 */
      size_t na = (size_t) m * (size_t) k, nb = (size_t) k * (size_t) n;
      size_t off_b = (na * 2 + 255) & ~(size_t) 255;
      PpStatus st = bf16_scratch (ctx, stream, off_b + nb * 2, err);
      if (st == PP_OK)
        st = pp_cuda_to_bf16 (stream, A, ctx->bf16, na, err);
      if (st == PP_OK)
        st = pp_cuda_to_bf16 (stream, B, (char *) ctx->bf16 + off_b, nb, err);
      if (st != PP_OK)
        return st;
      call.Ain = ctx->bf16;
      call.Bin = (const char *) ctx->bf16 + off_b;
      call.ab_type = CUDA_R_16BF;
      call.compute = CUBLAS_COMPUTE_32F;
    }

  if (epilogue != PP_EPI_GELU_BIAS)
    {
      call.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      return lt_matmul_any (ctx, stream, &call, err);
    }

  /* Fused GELU: cuBLASLt wants the aux leading dimension (our n) a multiple
   * of 8 and the aux buffer 16-byte aligned. */
  if (n % 8 == 0 && ((uintptr_t) aux & 15u) == 0)
    {
      call.aux = aux;
      if (aux != NULL)
        call.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      else
        call.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      PpStatus st = lt_matmul (ctx, stream, &call, err);
      if (st != PP_EUNSUPPORTED)
        return st;
    }

  /* Unfused: the pre-activation into aux (or C), then GELU into C. */
  call.aux = NULL;
  call.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  call.D = aux != NULL ? aux : D;
  PpStatus st = lt_matmul_any (ctx, stream, &call, err);
  if (st != PP_OK)
    return st;
  return pp_cuda_gelu_forward (stream, call.D, D, (size_t) m * n, err);
}

PpStatus
pp_cublaslt_gemm (PpCublasLt *ctx, void *stream,
                  int trans_a, int trans_b, int m, int n, int k,
                  float alpha, const float *A, const float *B,
                  float beta, float *C,
                  PpCompute compute, PpEpilogue epilogue,
                  const float *bias, float *aux, PpError *err)
{
  return gemm (ctx, stream, trans_a, trans_b, m, n, k, alpha, A, B, beta, C, C, compute,
               epilogue, bias, aux, err);
}

/* ---- Linear layers ---- */

PpStatus
pp_cuda_linear_forward (PpCublasLt *ctx, void *stream,
                        const float *x, const float *W, const float *b,
                        float *y, int n, int in, int out,
                        PpCompute compute, PpError *err)
{
  return pp_cublaslt_gemm (ctx, stream, 0, 0, n, out, in, 1.0f, x, W, 0.0f, y, compute,
                           b != NULL ? PP_EPI_BIAS : PP_EPI_NONE, b, NULL, err);
}

PpStatus
pp_cuda_linear_residual_forward (PpCublasLt *ctx, void *stream,
                                 const float *x, const float *W, const float *b,
                                 const float *residual, float *y, int n, int in, int out,
                                 PpCompute compute, PpError *err)
{
  if (residual == NULL || residual == y)
    return pp_error_set (err, PP_EINVAL, "linear + residual: the residual must be its own buffer");
  return gemm (ctx, stream, 0, 0, n, out, in, 1.0f, x, W, 1.0f, residual, y, compute,
               b != NULL ? PP_EPI_BIAS : PP_EPI_NONE, b, NULL, err);
}

PpStatus
pp_cuda_linear_gelu_forward (PpCublasLt *ctx, void *stream,
                             const float *x, const float *W, const float *b,
                             float *pre, float *y, int n, int in, int out,
                             PpCompute compute, PpError *err)
{
  if (pre == NULL)
    return pp_error_set (err, PP_EINVAL, "linear+gelu: the pre-activation buffer is NULL");
  return pp_cublaslt_gemm (ctx, stream, 0, 0, n, out, in, 1.0f, x, W, 0.0f, y, compute,
                           PP_EPI_GELU_BIAS, b, pre, err);
}

PpStatus
pp_cuda_linear_backward_input (PpCublasLt *ctx, void *stream,
                               const float *dy, const float *W, float *dx,
                               int n, int in, int out,
                               PpCompute compute, PpError *err)
{
  return pp_cublaslt_gemm (ctx, stream, 0, 1, n, in, out, 1.0f, dy, W, 0.0f, dx, compute,
                           PP_EPI_NONE, NULL, NULL, err);
}

PpStatus
pp_cuda_linear_backward_weight (PpCublasLt *ctx, void *stream,
                                const float *x, const float *dy,
                                float *dW, float *db, int n, int in, int out,
                                PpCompute compute, PpError *err)
{
  PpStatus st = pp_cublaslt_gemm (ctx, stream, 1, 0, in, out, n, 1.0f, x, dy, 1.0f, dW,
                                  compute, PP_EPI_NONE, NULL, NULL, err);
  if (st != PP_OK || db == NULL)
    return st;
  return pp_cuda_column_sum_add (stream, dy, db, n, out, err);
}
