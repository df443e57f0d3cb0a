/* pp-nccl.h — NCCL, opened at run time.
 *
 * libnccl.so.2 is dlopen'ed, not linked, so the binaries load where it is
 * not installed (the CUDA backend then moves stage data with copies, and
 * the nccl transport refuses in one line).  Built with CUDA and NCCL's
 * header only (PP_HAVE_NCCL); the functions are NCCL's own, by name.
 */
#pragma once

#ifdef PP_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

typedef struct {
  ncclResult_t (*GetUniqueId) (ncclUniqueId *);
  ncclResult_t (*CommInitRank) (ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*CommInitAll) (ncclComm_t *, int, const int *);
  ncclResult_t (*CommDestroy) (ncclComm_t);
  ncclResult_t (*CommAbort) (ncclComm_t);
  ncclResult_t (*CommGetAsyncError) (ncclComm_t, ncclResult_t *);
  ncclResult_t (*GroupStart) (void);
  ncclResult_t (*GroupEnd) (void);
  ncclResult_t (*Send) (const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv) (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  const char  *(*GetErrorString) (ncclResult_t);
} PpNccl;

/* NCCL's functions, or NULL where libnccl.so.2 cannot be opened (or lacks
 * one of them).  Opened once per process; never closed. */
const PpNccl *pp_nccl (void);
#endif
