/* pp-cupti-module.c — inside libpipescope-cupti.so: the probe calls the
 * collector makes, forwarded to the library that opened the module
 * (pp-cupti-module.h).  The module links with -Bsymbolic, so the collector
 * calls these and never a program's own pp_probe_* of the same name. */
#include "pp-cupti-module.h"

#include <time.h>

static PpCuptiHost host;

int
pp_cupti_module_init (int abi, const PpCuptiHost *h)
{
  if (abi != PP_CUPTI_MODULE_ABI || h == NULL || h->record_span == NULL || h->now_ns == NULL)
    return -1;
  host = *h;
  return 0;
}

bool
pp_probe_record_span (PpProbe *p, const PpSpan *span)
{
  return host.record_span ? host.record_span (p, span) : false;
}

int64_t
pp_probe_now_ns (void)
{
  struct timespec ts;
  if (host.now_ns)
    return host.now_ns ();
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}
