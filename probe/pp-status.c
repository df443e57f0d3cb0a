#include "pp-status.h"

#include <stdio.h>
#include <string.h>

const char *
pp_status_name (PpStatus status)
{
  switch (status)
    {
#define PP_STATUS_CASE(name, msg) case PP_##name: return #name;
      PP_STATUS_MAP (PP_STATUS_CASE)
#undef PP_STATUS_CASE
    default:
      return "UNKNOWN";
    }
}

const char *
pp_status_message (PpStatus status)
{
  switch (status)
    {
#define PP_STATUS_CASE(name, msg) case PP_##name: return msg;
      PP_STATUS_MAP (PP_STATUS_CASE)
#undef PP_STATUS_CASE
    default:
      return "unknown status";
    }
}

PpStatus
pp_error_set (PpError *err, PpStatus status, const char *fmt, ...)
{
  if (err != NULL)
    {
      va_list ap;
      err->status = status;
      va_start (ap, fmt);
      vsnprintf (err->msg, sizeof err->msg, fmt, ap);
      va_end (ap);
    }
  return status;
}
