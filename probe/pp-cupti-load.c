/* pp-cupti-load.c — inside libpipescope-probe.so: opens libpipescope-cupti.so
 * and gives its calls (pp-cupti-module.h). */
#define _GNU_SOURCE 1   /* dladdr */
#include "pp-cupti-module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t      load_once = PTHREAD_ONCE_INIT;
static PpCuptiModule       module;
static const PpCuptiModule *loaded;
static char                load_why[PP_ERROR_MSG_MAX];

/* PP_CUPTI_MODULE_FILE in the folder of the library this code is in. */
static void
beside_this_library (char *path, size_t size)
{
  Dl_info info;
  const char *slash;
  snprintf (path, size, "%s", PP_CUPTI_MODULE_FILE);
  if (dladdr ((void *) &beside_this_library, &info) == 0 || info.dli_fname == NULL
      || (slash = strrchr (info.dli_fname, '/')) == NULL)
    return;
  snprintf (path, size, "%.*s/%s", (int) (slash - info.dli_fname), info.dli_fname,
            PP_CUPTI_MODULE_FILE);
}

#define FIND(field, symbol)                                      \
  do {                                                           \
    *(void **) &module.field = dlsym (h, symbol);                \
    if (module.field == NULL)                                    \
      {                                                          \
        snprintf (load_why, sizeof load_why, "%.400s lacks %s", path, symbol); \
        return;                                                  \
      }                                                          \
  } while (0)

static void
load (void)
{
  char own[4096];
  const char *path = getenv ("PIPESCOPE_CUPTI_LIB");
  int (*init) (int, const PpCuptiHost *);
  PpCuptiHost host = { pp_probe_record_span, pp_probe_now_ns };

  if (path == NULL || path[0] == '\0')
    {
      beside_this_library (own, sizeof own);
      path = own;
    }
  /* RTLD_LOCAL: its symbols (pp_probe_now_ns, the collector's) stay its own */
  void *h = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    {
      const char *e = dlerror ();
      snprintf (load_why, sizeof load_why, "cannot load %.200s (%.280s)", path, e ? e : "no reason given");
      return;
    }
  *(void **) &init = dlsym (h, "pp_cupti_module_init");
  if (init == NULL || init (PP_CUPTI_MODULE_ABI, &host) != 0)
    {
      snprintf (load_why, sizeof load_why, "%.400s is not this build's CUPTI part", path);
      return;   /* left open: a library may not be closed once opened (its constructors ran) */
    }
  FIND (start, "pp_cupti_start");
  FIND (push_block_rank, "pp_cupti_push_block_rank");
  FIND (pop_block, "pp_cupti_pop_block");
  FIND (block_gpu_time, "pp_cupti_block_gpu_time");
  FIND (flush, "pp_cupti_flush");
  FIND (request_flush, "pp_cupti_request_flush");
  FIND (wait_flush, "pp_cupti_wait_flush");
  FIND (name, "pp_cupti_name");
  FIND (stop, "pp_cupti_stop");
  FIND (free, "pp_cupti_free");
  loaded = &module;
}

const PpCuptiModule *
pp_cupti_module_load (char *why, size_t size)
{
  pthread_once (&load_once, load);
  if (loaded == NULL && why != NULL && size > 0)
    snprintf (why, size, "%s", load_why);
  return loaded;
}
