/* pp-kernels-cuda.cu — the hand-written GPU kernels: LayerNorm, GELU, softmax
 * cross-entropy, AdamW, column sums.  The same math, in the same order where
 * it matters, as pp-kernels-cpu.c; the GEMMs are in pp-gemm-cublaslt.c.
 *
 * Determinism: no atomics.  Row reductions are one warp (or one block) per
 * row with a fixed shuffle tree; column reductions (bias and LayerNorm weight
 * gradients) give each column to one block whose threads split the rows in a
 * fixed stride and combine in a fixed order.  Same inputs, same bits.
 *
 * Accuracy: LayerNorm statistics, softmax sums and the loss accumulate in
 * double like the CPU kernels (the H200 has full-rate-enough fp64, and these
 * kernels are memory-bound).  No fast-math: tanhf, expf, sqrtf and division
 * are the accurate ones.
 */
#include "pp-kernels-cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#define PP_GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */
#define PP_GELU_CUBE  0.044715f

#define WARP 32
#define LN_BLOCK 256                  /* 8 warps, 8 rows per block */
#define XENT_BLOCK 256
#define EW_BLOCK 256                  /* elementwise kernels */
#define COL_TILE 32                   /* columns per block in column reductions */
#define COL_ROWS 16                   /* row lanes per column */

static cudaStream_t
as_stream (void *stream)
{
  return (cudaStream_t) stream;
}

/* cudaGetLastError also clears a non-sticky error, so one failed launch does
 * not make every later call report it again. */
static PpStatus
launch_status (const char *what, PpError *err)
{
  cudaError_t e = cudaGetLastError ();
  if (e != cudaSuccess)
    return pp_error_set (err, PP_EIO, "%s: kernel launch failed: %s", what,
                         cudaGetErrorString (e));
  return PP_OK;
}

/* Blocks for an elementwise kernel of n items: one item a thread up to
 * EW_MAX_BLOCKS blocks, grid-stride loops past that.  EW_MAX_BLOCKS fills a
 * whole H200 about once (132 SMs x 8 blocks of 256) and a quarter of it four
 * times.  Fewer, longer blocks also suit CUPTI: before Blackwell it times
 * kernels by instrumenting their code, which profiler authors report costs
 * most on kernels of many short blocks (a 256 x 4096 GELU was 4096 blocks
 * of one item a thread).  Unmeasured here; bench-gpu's CUPTI lines tell. */
#define EW_MAX_BLOCKS 1024u

static unsigned
ew_blocks (size_t n)
{
  size_t b = (n + EW_BLOCK - 1) / EW_BLOCK;
  return (unsigned) (b > EW_MAX_BLOCKS ? EW_MAX_BLOCKS : b);
}

/* ---- device count ---- */

extern "C" PpStatus
pp_cuda_device_count (int *n, PpError *err)
{
  int count = 0;
  if (n != NULL)
    *n = 0;
  cudaError_t e = cudaGetDeviceCount (&count);
  if (e != cudaSuccess)
    {
      (void) cudaGetLastError ();
      switch (e)
        {
        case cudaErrorInsufficientDriver:
          return pp_error_set (err, PP_EUNSUPPORTED,
                               "no CUDA driver (or one older than this CUDA runtime): %s",
                               cudaGetErrorString (e));
        case cudaErrorNoDevice:
          return pp_error_set (err, PP_EUNSUPPORTED, "no CUDA device");
        default:
          return pp_error_set (err, PP_EUNSUPPORTED, "CUDA unavailable: %s (%s)",
                               cudaGetErrorString (e), cudaGetErrorName (e));
        }
    }
  if (count <= 0)
    return pp_error_set (err, PP_EUNSUPPORTED, "no CUDA device");
  if (n != NULL)
    *n = count;
  return PP_OK;
}

/* ---- reductions ---- */

/* xor butterfly: every lane ends with the same bits (a + b == b + a) */
static __device__ __forceinline__ double
warp_sum (double v)
{
  for (int o = WARP / 2; o > 0; o /= 2)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float
warp_max (float v)
{
  for (int o = WARP / 2; o > 0; o /= 2)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

/* Block-wide sum, fixed order: each warp's tree, then warp 0 over the warps.
 * Every thread gets the result.  sh holds blockDim/32 doubles. */
static __device__ double
block_sum (double v, double *sh)
{
  int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
  int nwarps = blockDim.x / WARP;
  v = warp_sum (v);
  __syncthreads ();                 /* sh may still be read from a previous call */
  if (lane == 0)
    sh[warp] = v;
  __syncthreads ();
  if (warp == 0)
    {
      double w = lane < nwarps ? sh[lane] : 0.0;
      w = warp_sum (w);
      if (lane == 0)
        sh[0] = w;
    }
  __syncthreads ();
  return sh[0];
}

static __device__ float
block_max (float v, float *sh)
{
  int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
  int nwarps = blockDim.x / WARP;
  v = warp_max (v);
  __syncthreads ();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads ();
  if (warp == 0)
    {
      float w = lane < nwarps ? sh[lane] : -INFINITY;
      w = warp_max (w);
      if (lane == 0)
        sh[0] = w;
    }
  __syncthreads ();
  return sh[0];
}

/* ---- column sums (bias and LayerNorm weight gradients) ---- */

/* Tile `tile` (COL_TILE columns) of a column sum, by a block of COL_TILE x
 * COL_ROWS threads: thread (tx, ty) sums rows ty, ty+COL_ROWS, ... of column
 * tx, then ty == 0 adds the COL_ROWS partials in order.  With x/mean/rstd
 * given it also sums dy * xhat into sums_xhat (LayerNorm dgamma). */
static __device__ __forceinline__ void
column_sum_tile (const float *__restrict__ dy, const float *__restrict__ x,
                 const float *__restrict__ mean, const float *__restrict__ rstd,
                 float *__restrict__ sums, float *__restrict__ sums_xhat, int n, int d,
                 int tile)
{
  __shared__ float sh[COL_ROWS][COL_TILE + 1];
  __shared__ float sh2[COL_ROWS][COL_TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int col = tile * COL_TILE + tx;
  float acc = 0.0f, acc2 = 0.0f;

  if (col < d)
    for (int r = ty; r < n; r += COL_ROWS)
      {
        float g = dy[(size_t) r * d + col];
        acc += g;
        if (x != NULL)
          {
            float xhat = (x[(size_t) r * d + col] - mean[r]) * rstd[r];
            acc2 += g * xhat;
          }
      }
  sh[ty][tx] = acc;
  sh2[ty][tx] = acc2;
  __syncthreads ();
  if (ty == 0 && col < d)
    {
      float s = 0.0f, s2 = 0.0f;
      for (int i = 0; i < COL_ROWS; i++)
        {
          s += sh[i][tx];
          s2 += sh2[i][tx];
        }
      sums[col] += s;
      if (sums_xhat != NULL)
        sums_xhat[col] += s2;
    }
}

/* One block per tile. */
static __global__ void
column_sum_kernel (const float *__restrict__ dy, const float *__restrict__ x,
                   const float *__restrict__ mean, const float *__restrict__ rstd,
                   float *__restrict__ sums, float *__restrict__ sums_xhat, int n, int d)
{
  column_sum_tile (dy, x, mean, rstd, sums, sums_xhat, n, d, blockIdx.x);
}

/* Several column sums in one launch: job k takes blocks [first[k],
 * first[k+1]); each tile runs the code of column_sum_kernel, so every sum is
 * the one a launch of its own gives, bit for bit. */
#define COL_JOBS_MAX 4

typedef struct {
  PpColumnSum job[COL_JOBS_MAX];
  unsigned    first[COL_JOBS_MAX + 1];
  int         n_jobs;
} ColumnJobs;

static __global__ void
column_sums_kernel (ColumnJobs jobs)
{
  int k = 0;
  while (k + 1 < jobs.n_jobs && blockIdx.x >= jobs.first[k + 1])
    k++;
  const PpColumnSum *j = &jobs.job[k];
  column_sum_tile (j->x, j->x_ln, j->mean, j->rstd, j->sums, j->sums_xhat, j->n, j->d,
                   (int) (blockIdx.x - jobs.first[k]));
}

extern "C" PpStatus
pp_cuda_column_sums_add (void *stream, const PpColumnSum *jobs, int n_jobs, PpError *err)
{
  ColumnJobs cj;
  unsigned blocks = 0;
  int n = 0;
  if (n_jobs < 0 || n_jobs > COL_JOBS_MAX || (n_jobs > 0 && jobs == NULL))
    return pp_error_set (err, PP_EINVAL, "column sums: %d jobs (at most %d)", n_jobs,
                         COL_JOBS_MAX);
  memset (&cj, 0, sizeof cj);
  for (int i = 0; i < n_jobs; i++)
    {
      const PpColumnSum *j = &jobs[i];
      bool ln = j->x_ln != NULL;
      if (j->n < 0 || j->d < 0 || (j->n > 0 && j->d > 0 && (j->x == NULL || j->sums == NULL))
          || (ln && (j->mean == NULL || j->rstd == NULL || j->sums_xhat == NULL)))
        return pp_error_set (err, PP_EINVAL, "column sums: job %d: bad arguments (n %d, d %d)",
                             i, j->n, j->d);
      if (j->n == 0 || j->d == 0)
        continue;
      cj.job[n] = *j;
      if (!ln)
        cj.job[n].mean = cj.job[n].rstd = NULL, cj.job[n].sums_xhat = NULL;
      cj.first[n] = blocks;
      blocks += (unsigned) ((j->d + COL_TILE - 1) / COL_TILE);
      n++;
    }
  if (n == 0)
    return PP_OK;
  cj.first[n] = blocks;
  cj.n_jobs = n;
  dim3 block (COL_TILE, COL_ROWS);
  column_sums_kernel<<<blocks, block, 0, as_stream (stream)>>> (cj);
  return launch_status ("column sums", err);
}

extern "C" PpStatus
pp_cuda_column_sum_add (void *stream, const float *x, float *sums, int n, int d,
                        PpError *err)
{
  if (n < 0 || d < 0 || ((x == NULL || sums == NULL) && n > 0 && d > 0))
    return pp_error_set (err, PP_EINVAL, "column sum: bad arguments (n %d, d %d)", n, d);
  if (n == 0 || d == 0)
    return PP_OK;
  dim3 block (COL_TILE, COL_ROWS);
  column_sum_kernel<<<(d + COL_TILE - 1) / COL_TILE, block, 0, as_stream (stream)>>>
    (x, NULL, NULL, NULL, sums, NULL, n, d);
  return launch_status ("column sum", err);
}

/* ---- LayerNorm ---- */

/* One warp per row.  When d is a multiple of 4 and the row pointers are
 * 16-byte aligned, x is read as float4 (vec); the order of the sums then
 * differs from the scalar path but is fixed for a given call. */
template <bool VEC>
static __global__ void
layernorm_forward_kernel (const float *__restrict__ x, const float *__restrict__ gamma,
                          const float *__restrict__ beta, float *__restrict__ y,
                          float *__restrict__ mean, float *__restrict__ rstd,
                          int n, int d, float eps)
{
  int lane = threadIdx.x % WARP;
  int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
  if (row >= n)
    return;
  const float *xi = x + (size_t) row * d;
  float *yi = y + (size_t) row * d;

  /* two passes in double: no cancellation when |mean| >> std */
  double sum = 0.0;
  if (VEC)
    for (int j = lane * 4; j < d; j += WARP * 4)
      {
        float4 v = *(const float4 *) (xi + j);
        sum += (double) v.x + (double) v.y + (double) v.z + (double) v.w;
      }
  else
    for (int j = lane; j < d; j += WARP)
      sum += xi[j];
  double mu = warp_sum (sum) / d;

  double ss = 0.0;
  if (VEC)
    for (int j = lane * 4; j < d; j += WARP * 4)
      {
        float4 v = *(const float4 *) (xi + j);
        double c0 = v.x - mu, c1 = v.y - mu, c2 = v.z - mu, c3 = v.w - mu;
        ss += c0 * c0 + c1 * c1 + c2 * c2 + c3 * c3;
      }
  else
    for (int j = lane; j < d; j += WARP)
      {
        double c = xi[j] - mu;
        ss += c * c;
      }
  double var = warp_sum (ss) / d;              /* biased, as PyTorch */
  float m = (float) mu;
  float s = (float) (1.0 / sqrt (var + (double) eps));

  if (VEC)
    for (int j = lane * 4; j < d; j += WARP * 4)
      {
        float4 v = *(const float4 *) (xi + j);
        float4 g = *(const float4 *) (gamma + j);
        float4 b = *(const float4 *) (beta + j);
        float4 o;
        o.x = (v.x - m) * s * g.x + b.x;
        o.y = (v.y - m) * s * g.y + b.y;
        o.z = (v.z - m) * s * g.z + b.z;
        o.w = (v.w - m) * s * g.w + b.w;
        *(float4 *) (yi + j) = o;
      }
  else
    for (int j = lane; j < d; j += WARP)
      yi[j] = (xi[j] - m) * s * gamma[j] + beta[j];
  if (lane == 0)
    {
      mean[row] = m;
      rstd[row] = s;
    }
}

static int
aligned16 (const void *p)
{
  return ((uintptr_t) p & 15u) == 0;
}

extern "C" PpStatus
pp_cuda_layernorm_forward (void *stream, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd,
                           int n, int d, float eps, PpError *err)
{
  if (n < 0 || d <= 0)
    return pp_error_set (err, PP_EINVAL, "layernorm forward: bad shape (n %d, d %d)", n, d);
  if (n == 0)
    return PP_OK;
  if (!x || !gamma || !beta || !y || !mean || !rstd)
    return pp_error_set (err, PP_EINVAL, "layernorm forward: a NULL buffer");
  unsigned blocks = (unsigned) ((n + LN_BLOCK / WARP - 1) / (LN_BLOCK / WARP));
  int vec = d % 4 == 0 && aligned16 (x) && aligned16 (gamma) && aligned16 (beta)
            && aligned16 (y);
  if (vec)
    layernorm_forward_kernel<true><<<blocks, LN_BLOCK, 0, as_stream (stream)>>>
      (x, gamma, beta, y, mean, rstd, n, d, eps);
  else
    layernorm_forward_kernel<false><<<blocks, LN_BLOCK, 0, as_stream (stream)>>>
      (x, gamma, beta, y, mean, rstd, n, d, eps);
  return launch_status ("layernorm forward", err);
}

static __global__ void
layernorm_backward_input_kernel (const float *__restrict__ dy, const float *__restrict__ x,
                                 const float *__restrict__ gamma,
                                 const float *__restrict__ mean,
                                 const float *__restrict__ rstd,
                                 const float *__restrict__ res, float *__restrict__ dx,
                                 int n, int d)
{
  int lane = threadIdx.x % WARP;
  int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
  if (row >= n)
    return;
  const float *dyi = dy + (size_t) row * d;
  const float *xi = x + (size_t) row * d;
  const float *resi = res ? res + (size_t) row * d : NULL;
  float *dxi = dx + (size_t) row * d;
  float m = mean[row], s = rstd[row];

  double sum_g = 0.0, sum_gx = 0.0;
  for (int j = lane; j < d; j += WARP)
    {
      float xhat = (xi[j] - m) * s;
      float g = dyi[j] * gamma[j];
      sum_g += g;
      sum_gx += (double) g * xhat;
    }
  float mean_g = (float) (warp_sum (sum_g) / d);
  float mean_gx = (float) (warp_sum (sum_gx) / d);

  for (int j = lane; j < d; j += WARP)
    {
      float xhat = (xi[j] - m) * s;
      float g = dyi[j] * gamma[j];
      float v = s * (g - mean_g - xhat * mean_gx);
      /* rounded like add_kernel after this one: no fused multiply-add */
      dxi[j] = resi ? __fadd_rn (resi[j], v) : v;
    }
}

extern "C" PpStatus
pp_cuda_layernorm_backward_input (void *stream, const float *dy, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *residual, float *dx, int n, int d, PpError *err)
{
  if (n < 0 || d <= 0)
    return pp_error_set (err, PP_EINVAL, "layernorm backward: bad shape (n %d, d %d)", n, d);
  if (n == 0)
    return PP_OK;
  if (!dy || !x || !gamma || !mean || !rstd || !dx)
    return pp_error_set (err, PP_EINVAL, "layernorm backward: a NULL buffer");
  if (dx == dy || dx == x || dx == residual)
    return pp_error_set (err, PP_EINVAL, "layernorm backward: dx overlaps an input");
  unsigned blocks = (unsigned) ((n + LN_BLOCK / WARP - 1) / (LN_BLOCK / WARP));
  layernorm_backward_input_kernel<<<blocks, LN_BLOCK, 0, as_stream (stream)>>>
    (dy, x, gamma, mean, rstd, residual, dx, n, d);
  return launch_status ("layernorm backward (input)", err);
}

extern "C" PpStatus
pp_cuda_layernorm_backward_weight (void *stream, const float *dy, const float *x,
                                   const float *mean, const float *rstd,
                                   float *dgamma, float *dbeta, int n, int d, PpError *err)
{
  if (n < 0 || d <= 0)
    return pp_error_set (err, PP_EINVAL, "layernorm backward: bad shape (n %d, d %d)", n, d);
  if (n == 0)
    return PP_OK;
  if (!dy || !x || !mean || !rstd || !dgamma || !dbeta)
    return pp_error_set (err, PP_EINVAL, "layernorm backward: a NULL buffer");
  dim3 block (COL_TILE, COL_ROWS);
  column_sum_kernel<<<(d + COL_TILE - 1) / COL_TILE, block, 0, as_stream (stream)>>>
    (dy, x, mean, rstd, dbeta, dgamma, n, d);
  return launch_status ("layernorm backward (weight)", err);
}

/* ---- GELU (tanh approximation) ---- */

static __device__ __forceinline__ float
gelu (float x)
{
  float u = PP_GELU_SCALE * (x + PP_GELU_CUBE * x * x * x);
  return 0.5f * x * (1.0f + tanhf (u));
}

static __global__ void
gelu_forward_kernel (const float *x, float *y, size_t n)   /* y may alias x */
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    y[i] = gelu (x[i]);
}

/* dx may alias dy: no __restrict__ there; dy[i] is read before dx[i] is written */
static __global__ void
gelu_backward_kernel (const float *__restrict__ x, const float *dy, float *dx, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    {
      float xi = x[i];
      float u = PP_GELU_SCALE * (xi + PP_GELU_CUBE * xi * xi * xi);
      float t = tanhf (u);
      float du = PP_GELU_SCALE * (1.0f + 3.0f * PP_GELU_CUBE * xi * xi);
      float grad = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * du;
      dx[i] = dy[i] * grad;
    }
}

extern "C" PpStatus
pp_cuda_gelu_forward (void *stream, const float *x, float *y, size_t n, PpError *err)
{
  if (n == 0)
    return PP_OK;
  if (!x || !y)
    return pp_error_set (err, PP_EINVAL, "gelu forward: a NULL buffer");
  gelu_forward_kernel<<<ew_blocks (n), EW_BLOCK, 0, as_stream (stream)>>> (x, y, n);
  return launch_status ("gelu forward", err);
}

extern "C" PpStatus
pp_cuda_gelu_backward (void *stream, const float *x, const float *dy, float *dx, size_t n,
                       PpError *err)
{
  if (n == 0)
    return PP_OK;
  if (!x || !dy || !dx)
    return pp_error_set (err, PP_EINVAL, "gelu backward: a NULL buffer");
  gelu_backward_kernel<<<ew_blocks (n), EW_BLOCK, 0, as_stream (stream)>>> (x, dy, dx, n);
  return launch_status ("gelu backward", err);
}

/* ---- GEMM with k == 0: only the epilogue is left ---- */

static __global__ void
empty_epilogue_kernel (float *C, int m, int n, float beta, const float *bias, float *aux,
                       int use_gelu)
{
  size_t total = (size_t) m * n;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < total;
       i += (size_t) gridDim.x * blockDim.x)
    {
      float pre = beta == 0.0f ? 0.0f : beta * C[i];   /* beta 0 never reads C */
      if (bias != NULL)
        pre += bias[i % n];
      if (use_gelu)
        {
          if (aux != NULL)
            aux[i] = pre;
          C[i] = gelu (pre);
        }
      else
        C[i] = pre;
    }
}

extern "C" PpStatus
pp_cuda_gemm_empty_epilogue (void *stream, float *C, int m, int n, float beta,
                             const float *bias, float *aux, int use_gelu, PpError *err)
{
  if (m <= 0 || n <= 0)
    return PP_OK;
  if (C == NULL)
    return pp_error_set (err, PP_EINVAL, "gemm: C is NULL");
  empty_epilogue_kernel<<<ew_blocks ((size_t) m * n), EW_BLOCK, 0, as_stream (stream)>>>
    (C, m, n, beta, bias, aux, use_gelu);
  return launch_status ("gemm (k = 0)", err);
}

/* ---- Softmax cross-entropy ---- */

/* One block per row: max, then exp and its double sum, then normalize. */
static __global__ void
softmax_xent_forward_kernel (const float *__restrict__ logits,
                             const int32_t *__restrict__ labels,
                             float *__restrict__ probs, float *__restrict__ losses, int c)
{
  __shared__ double shd[XENT_BLOCK / WARP];
  __shared__ float shf[XENT_BLOCK / WARP];
  int row = blockIdx.x;
  const float *li = logits + (size_t) row * c;
  float *pi = probs + (size_t) row * c;

  float mx = -INFINITY;
  for (int j = threadIdx.x; j < c; j += blockDim.x)
    mx = fmaxf (mx, li[j]);
  mx = block_max (mx, shf);

  double sum = 0.0;
  for (int j = threadIdx.x; j < c; j += blockDim.x)
    {
      float e = expf (li[j] - mx);
      pi[j] = e;
      sum += e;
    }
  sum = block_sum (sum, shd);

  /* each thread rescales the entries it wrote itself: no barrier needed */
  float inv = (float) (1.0 / sum);
  for (int j = threadIdx.x; j < c; j += blockDim.x)
    pi[j] *= inv;

  if (threadIdx.x == 0)
    {
      int32_t lab = labels[row];
      /* -log p[label] as log-sum-exp minus the logit: finite when p[label]
       * underflows in float */
      double loss = lab >= 0 && lab < c ? log (sum) - ((double) li[lab] - (double) mx) : NAN;
      losses[row] = (float) loss;
    }
}

extern "C" PpStatus
pp_cuda_softmax_xent_forward (void *stream, const float *logits, const int32_t *labels,
                              float *probs, float *losses, int n, int c, PpError *err)
{
  if (n < 0 || c <= 0)
    return pp_error_set (err, PP_EINVAL, "softmax xent: bad shape (n %d, c %d)", n, c);
  if (n == 0)
    return PP_OK;
  if (!logits || !labels || !probs || !losses)
    return pp_error_set (err, PP_EINVAL, "softmax xent: a NULL buffer");
  softmax_xent_forward_kernel<<<(unsigned) n, XENT_BLOCK, 0, as_stream (stream)>>>
    (logits, labels, probs, losses, c);
  return launch_status ("softmax xent forward", err);
}

static __global__ void
softmax_xent_backward_kernel (const float *__restrict__ probs,
                              const int32_t *__restrict__ labels,
                              float *__restrict__ dlogits, int n, int c, float scale)
{
  size_t total = (size_t) n * c;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < total;
       i += (size_t) gridDim.x * blockDim.x)
    {
      size_t row = i / (size_t) c;
      int j = (int) (i - row * (size_t) c);
      float p = probs[i];
      dlogits[i] = j == labels[row] ? (p - 1.0f) * scale : p * scale;
    }
}

extern "C" PpStatus
pp_cuda_softmax_xent_backward (void *stream, const float *probs, const int32_t *labels,
                               float *dlogits, int n, int c, float scale, PpError *err)
{
  if (n < 0 || c <= 0)
    return pp_error_set (err, PP_EINVAL, "softmax xent: bad shape (n %d, c %d)", n, c);
  if (n == 0)
    return PP_OK;
  if (!probs || !labels || !dlogits)
    return pp_error_set (err, PP_EINVAL, "softmax xent: a NULL buffer");
  softmax_xent_backward_kernel<<<ew_blocks ((size_t) n * c), EW_BLOCK, 0,
                                 as_stream (stream)>>> (probs, labels, dlogits, n, c, scale);
  return launch_status ("softmax xent backward", err);
}

/* ---- AdamW ---- */

static __global__ void
adamw_kernel (float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
              float *__restrict__ v, size_t n, float lr, float b1, float b2, float eps,
              float wd, float c1, float c2)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    {
      float gi = g[i];
      float mi = b1 * m[i] + (1.0f - b1) * gi;
      float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float mhat = mi / c1;
      float vhat = vi / c2;
      float pi = p[i];
      p[i] = pi - lr * (mhat / (sqrtf (vhat) + eps) + wd * pi);
    }
}

extern "C" PpStatus
pp_cuda_adamw (void *stream, float *p, const float *g, float *m, float *v, size_t n,
               float lr, float b1, float b2, float eps, float wd, int t, PpError *err)
{
  if (t < 1)
    return pp_error_set (err, PP_EINVAL, "adamw: step %d (steps count from 1)", t);
  if (n == 0)
    return PP_OK;
  if (!p || !g || !m || !v)
    return pp_error_set (err, PP_EINVAL, "adamw: a NULL buffer");
  /* the bias corrections on the host, with the CPU kernel's powf */
  float c1 = 1.0f - powf (b1, (float) t);
  float c2 = 1.0f - powf (b2, (float) t);
  adamw_kernel<<<ew_blocks (n), EW_BLOCK, 0, as_stream (stream)>>>
    (p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
  return launch_status ("adamw", err);
}

/* ---- Element-wise sum (residual adds, summing gradient copies) ---- */

/* y may alias a or b: no __restrict__; y[i] is written after a[i] and b[i]
 * are read, by the same thread */
static __global__ void
add_kernel (const float *a, const float *b, float *y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    y[i] = a[i] + b[i];
}

extern "C" PpStatus
pp_cuda_add (void *stream, const float *a, const float *b, float *y, size_t n, PpError *err)
{
  if (n == 0)
    return PP_OK;
  if (!a || !b || !y)
    return pp_error_set (err, PP_EINVAL, "add: a NULL buffer");
  add_kernel<<<ew_blocks (n), EW_BLOCK, 0, as_stream (stream)>>> (a, b, y, n);
  return launch_status ("add", err);
}

/* ---- fp32 -> bf16 (GEMM operands in BF16 compute) ---- */

static __global__ void
to_bf16_kernel (const float *__restrict__ x, __nv_bfloat16 *__restrict__ y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    y[i] = __float2bfloat16_rn (x[i]);
}

extern "C" PpStatus
pp_cuda_to_bf16 (void *stream, const float *x, void *y, size_t n, PpError *err)
{
  if (n == 0)
    return PP_OK;
  if (!x || !y)
    return pp_error_set (err, PP_EINVAL, "to_bf16: a NULL buffer");
  to_bf16_kernel<<<ew_blocks (n), EW_BLOCK, 0, as_stream (stream)>>> (x, (__nv_bfloat16 *) y, n);
  return launch_status ("to_bf16", err);
}
