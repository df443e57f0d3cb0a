/* gpu-test-util.h — what the GPU test programs share: the GPU or SKIP at
 * start, one cuBLASLt context and stream, device buffers that fail the test
 * on any CUDA error. */
#pragma once

#include <cuda_runtime_api.h>
#include <glib.h>

#include "pp-kernels-cuda.h"

/* The context and non-blocking stream every call of a test uses. */
extern PpCublasLt  *lt;
extern cudaStream_t stream;

/* CHECK_PP (fn, args...) calls fn (args..., &err) and fails the test with
 * err's message unless it returns PP_OK */
#define CHECK_PP(fn, ...) \
  G_STMT_START { PpError e_ = { 0 }; \
    if (fn (__VA_ARGS__, &e_) != PP_OK) g_error ("%s: %s", #fn, e_.msg); \
  } G_STMT_END

#define CHECK_CUDA(call) \
  G_STMT_START { cudaError_t c_ = (call); \
    if (c_ != cudaSuccess) g_error ("%s: %s", #call, cudaGetErrorString (c_)); \
  } G_STMT_END

/* Without a GPU: prints why and exits 77 (meson: SKIP), or with --tap a
 * TAP plan of 0 and exits 0.  With one: g_test_init, the CPU kernels, lt
 * and stream.  `name` prefixes the messages. */
void   gpu_test_init (int *argc, char ***argv, const char *name);
/* Frees lt and stream (after g_test_run). */
void   gpu_test_finish (void);

void  *dev_alloc (size_t bytes);
/* On the test's stream: a plain cudaMemcpy (legacy stream) is not ordered
 * with a non-blocking stream.  Both wait for the copy. */
void  *upload (const void *host, size_t bytes);
/* waits for the stream, then copies back; fails the test on a device error */
float *download_f (const float *dev, size_t n);
double max_abs (const float *v, size_t n);
