/* pp-status.h — status codes and error messages for the GLib-free layers.
 *
 * Every fallible call returns a PpStatus and, when given a PpError, fills in a
 * one-line message a caller can show to a user as it is.  Never exits.
 */
#pragma once

#include <stdarg.h>

#define PP_STATUS_MAP(X)                                   \
  X (OK,       "success")                                  \
  X (EINVAL,   "invalid argument")                         \
  X (ENOMEM,   "out of memory")                            \
  X (EIO,      "input/output error")                       \
  X (EFORMAT,  "malformed input")                          \
  X (EDEADLOCK,"schedule deadlocks")                       \
  X (EUNSUPPORTED, "not supported")

typedef enum {
#define PP_STATUS_ENUM(name, msg) PP_##name,
  PP_STATUS_MAP (PP_STATUS_ENUM)
#undef PP_STATUS_ENUM
  PP_N_STATUS
} PpStatus;

#define PP_ERROR_MSG_MAX 512

typedef struct {
  PpStatus status;
  char     msg[PP_ERROR_MSG_MAX];
} PpError;

const char *pp_status_name (PpStatus status);     /* "EINVAL" */
const char *pp_status_message (PpStatus status);  /* "invalid argument" */

/* Records status and a printf-style message in err (which may be NULL);
 * returns status so a caller can write `return pp_error_set (err, ...)`. */
PpStatus pp_error_set (PpError *err, PpStatus status, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
