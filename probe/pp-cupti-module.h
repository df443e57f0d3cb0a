/* pp-cupti-module.h — the CUPTI collector (pp-cupti.h) as libpipescope-cupti.so,
 * a module libpipescope-probe.so opens at run time.
 *
 * libpipescope-probe.so must load into any process, also where no CUDA
 * toolkit (no libcupti) is installed; so the collector, which links
 * libcupti, is a module of its own: pp-cupti.c, pp-status.c and
 * pp-cupti-module.c, built only with CUDA and CUPTI.  It has no link to
 * the probe library: the two calls the collector makes of the probe
 * (pp_probe_record_span, pp_probe_now_ns) are forwarded to the opener's,
 * handed over by pp_cupti_module_init before anything else.  The module is
 * opened once per process and never closed (CUPTI may call its callbacks
 * until the process ends).
 *
 * Inside the module (pp-cupti-module.c): pp_cupti_module_init.
 * Inside libpipescope-probe.so (pp-cupti-load.c): pp_cupti_module_load,
 * which finds the module, checks it was built with the same structures,
 * and gives its calls as pointers.  No GLib.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-cupti.h"

#define PP_CUPTI_MODULE_FILE "libpipescope-cupti.so"

/* Changes with PpSpan, PpError and the calls below: a module of another
 * build refuses to start. */
#define PP_CUPTI_MODULE_ABI \
  (1000000 + 1000 * (int) sizeof (PpSpan) + (int) sizeof (PpError))

/* What the module calls back. */
typedef struct {
  bool    (*record_span) (PpProbe *probe, const PpSpan *span);
  int64_t (*now_ns) (void);
} PpCuptiHost;

/* The module's one entry besides the collector's own calls: 0, or -1 when
 * abi is not the module's (the opener then leaves it alone). */
int pp_cupti_module_init (int abi, const PpCuptiHost *host);

/* The collector's calls, as the module has them. */
typedef struct {
  PpCupti    *(*start) (PpProbe *probe, int rank, PpError *err);
  uint64_t    (*push_block_rank) (PpCupti *c, int rank, int stage, int microbatch, int kind,
                                  int step);
  void        (*pop_block) (PpCupti *c);
  bool        (*block_gpu_time) (PpCupti *c, uint64_t block_id, int64_t *start_ns,
                                 int64_t *end_ns, uint32_t *n_records);
  PpStatus    (*flush) (PpCupti *c, PpError *err);
  uint64_t    (*request_flush) (PpCupti *c);
  bool        (*wait_flush) (PpCupti *c, uint64_t ticket, int64_t timeout_ns);
  const char *(*name) (PpCupti *c, uint32_t id);
  void        (*stop) (PpCupti *c);
  void        (*free) (PpCupti *c);
} PpCuptiModule;

/* Opens the module (once per process; later calls give the same answer):
 * $PIPESCOPE_CUPTI_LIB, else PP_CUPTI_MODULE_FILE beside the library this
 * code is in.  NULL, with one line in why, when it cannot be had. */
const PpCuptiModule *pp_cupti_module_load (char *why, size_t size);
