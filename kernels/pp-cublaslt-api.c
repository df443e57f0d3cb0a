/* pp-cublaslt-api.c — libcublasLt opened on first use (pp-cublaslt-api.h). */
#include "pp-cublaslt-api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PP_STR_(x) #x
#define PP_STR(x)  PP_STR_ (x)
/* the soname of the major version the header is from */
#define PP_CUBLASLT_SONAME "libcublasLt.so." PP_STR (CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
PpCublasLtApi         pp_cublaslt_fns;
static int            api_ok;
static char           api_why[256];

static void
open_library (void)
{
  void *h = dlopen (PP_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    {
      const char *e = dlerror ();
      snprintf (api_why, sizeof api_why, "cannot open %s (%s)", PP_CUBLASLT_SONAME, e ? e : "unknown");
      return;
    }
  struct { const char *name; void **slot; } fns[] = {
#define PP_FN(f) { "cublasLt" #f, (void **) &pp_cublaslt_fns.f }
    PP_FN (Create), PP_FN (Destroy), PP_FN (GetStatusName), PP_FN (GetStatusString), PP_FN (Matmul),
    PP_FN (MatmulAlgoGetHeuristic), PP_FN (MatmulDescCreate), PP_FN (MatmulDescDestroy),
    PP_FN (MatmulDescSetAttribute), PP_FN (MatmulPreferenceCreate), PP_FN (MatmulPreferenceDestroy),
    PP_FN (MatmulPreferenceSetAttribute), PP_FN (MatrixLayoutCreate), PP_FN (MatrixLayoutDestroy),
#undef PP_FN
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    if ((*fns[i].slot = dlsym (h, fns[i].name)) == NULL)
      {
        snprintf (api_why, sizeof api_why, "%s has no %s", PP_CUBLASLT_SONAME, fns[i].name);
        memset (&pp_cublaslt_fns, 0, sizeof pp_cublaslt_fns);
        dlclose (h);
        return;
      }
  api_ok = 1;   /* kept open for the process: its functions are called until exit */
}

const PpCublasLtApi *
pp_cublaslt_api (PpError *err)
{
  pthread_once (&once, open_library);
  if (!api_ok)
    {
      pp_error_set (err, PP_EUNSUPPORTED, "cuBLASLt: %s", api_why);
      return NULL;
    }
  return &pp_cublaslt_fns;
}
