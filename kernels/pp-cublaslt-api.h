/* pp-cublaslt-api.h — cuBLASLt's functions, opened at the first GEMM
 * context (pp_cublaslt_new) rather than linked.
 *
 * Linked, libcublasLt cost every process that holds the CUDA backend about
 * 80 ms of CPU and 25,000 page faults as it started (its 370,000
 * relocations), whether it ever ran a GEMM or not: each `pipescope-cli
 * info`, `schedule` or `export`, the app, every test program.  Opened
 * here, only a run on the GPU pays it.  The names are cuBLASLt's own less
 * the prefix, typed from its header (cublasLt.h), so a prototype cannot
 * drift from the library's.
 */
#ifndef PP_CUBLASLT_API_H
#define PP_CUBLASLT_API_H

#include <cublasLt.h>

#include "pp-status.h"

typedef struct {
  __typeof__ (cublasLtCreate)                       *Create;
  __typeof__ (cublasLtDestroy)                      *Destroy;
  __typeof__ (cublasLtGetStatusName)                *GetStatusName;
  __typeof__ (cublasLtGetStatusString)              *GetStatusString;
  __typeof__ (cublasLtMatmul)                       *Matmul;
  __typeof__ (cublasLtMatmulAlgoGetHeuristic)       *MatmulAlgoGetHeuristic;
  __typeof__ (cublasLtMatmulDescCreate)             *MatmulDescCreate;
  __typeof__ (cublasLtMatmulDescDestroy)            *MatmulDescDestroy;
  __typeof__ (cublasLtMatmulDescSetAttribute)       *MatmulDescSetAttribute;
  __typeof__ (cublasLtMatmulPreferenceCreate)       *MatmulPreferenceCreate;
  __typeof__ (cublasLtMatmulPreferenceDestroy)      *MatmulPreferenceDestroy;
  __typeof__ (cublasLtMatmulPreferenceSetAttribute) *MatmulPreferenceSetAttribute;
  __typeof__ (cublasLtMatrixLayoutCreate)           *MatrixLayoutCreate;
  __typeof__ (cublasLtMatrixLayoutDestroy)          *MatrixLayoutDestroy;
} PpCublasLtApi;

/* The library's functions, opened once for the process (thread-safe); NULL
 * with err set (one line: the library and dlopen's or dlsym's reason) where
 * it cannot be opened or lacks one of them. */
const PpCublasLtApi *pp_cublaslt_api (PpError *err);

/* What pp_cublaslt_api returns, filled by its first call: read it only
 * after a call returned non-NULL (pthread_once orders the two). */
extern PpCublasLtApi pp_cublaslt_fns;

#endif
