/* pp-nccl.c — NCCL opened at run time (pp-nccl.h). */
#include "pp-nccl.h"

#ifdef PP_HAVE_NCCL
#include <dlfcn.h>
#include <pthread.h>

static PpNccl nccl;
static int nccl_ok;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void
nccl_load (void)
{
  void *h = dlopen ("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    h = dlopen ("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    return;
  *(void **) &nccl.GetUniqueId = dlsym (h, "ncclGetUniqueId");
  *(void **) &nccl.CommInitRank = dlsym (h, "ncclCommInitRank");
  *(void **) &nccl.CommInitAll = dlsym (h, "ncclCommInitAll");
  *(void **) &nccl.CommDestroy = dlsym (h, "ncclCommDestroy");
  *(void **) &nccl.CommAbort = dlsym (h, "ncclCommAbort");
  *(void **) &nccl.CommGetAsyncError = dlsym (h, "ncclCommGetAsyncError");
  *(void **) &nccl.GroupStart = dlsym (h, "ncclGroupStart");
  *(void **) &nccl.GroupEnd = dlsym (h, "ncclGroupEnd");
  *(void **) &nccl.Send = dlsym (h, "ncclSend");
  *(void **) &nccl.Recv = dlsym (h, "ncclRecv");
  *(void **) &nccl.GetErrorString = dlsym (h, "ncclGetErrorString");
  nccl_ok = nccl.GetUniqueId && nccl.CommInitRank && nccl.CommInitAll && nccl.CommDestroy
            && nccl.CommAbort && nccl.CommGetAsyncError && nccl.GroupStart && nccl.GroupEnd && nccl.Send && nccl.Recv
            && nccl.GetErrorString;
}

const PpNccl *
pp_nccl (void)
{
  pthread_once (&nccl_once, nccl_load);
  return nccl_ok ? &nccl : NULL;
}
#endif
