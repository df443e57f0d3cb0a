/* cli-merge-nccl.h — where merge splits the waits of NCCL receives within
 * a node.  There NCCL reports no proxy steps, so the profiler plugin
 * (probe/nccl/, docs/nccl-plugin.md) records each receive and send as a
 * KERNEL span and cannot split its wait alone; each side is in its own
 * process's file.  The merge keeps every "nccl:*" span as it copies the
 * files, then meets each receive with its send (runtime/pp-nccl-match.h)
 * and writes the receive's WAIT spans "nccl:peer_late" and
 * "nccl:transfer" into the merged trace, in the receiving process. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-event.h"
#include "pp-status.h"
#include "pp-trace.h"

typedef struct {
  uint32_t id;     /* the merged trace's name id */
  char    *text;
} PpCliNcclName;

typedef struct {
  PpCliNcclName *names;   /* the "nccl:*" names only */
  size_t         n_names, cap_names;
  PpSpan        *spans;   /* KERNEL and WAIT spans so named, merged ids */
  int32_t       *process; /* each one's process (-1: a rank's own file) */
  size_t         n_spans, cap_spans, cap_process;
} PpCliNccl;

/* A name written to the merged trace under id: kept where it is NCCL's.
 * 0; -1 out of memory. */
int      pp_cli_nccl_name (PpCliNccl *n, uint32_t id, const char *name);
/* A span written to the merged trace (name_id the merged one): kept where
 * it is an NCCL KERNEL or WAIT.  0; -1 out of memory. */
int      pp_cli_nccl_span (PpCliNccl *n, const PpSpan *s, int32_t process);
/* After every input: each receive met with its send and not split by the
 * plugin, its wait written as WAIT spans through w, their names under new
 * ids from *next_name; *n_written of them. */
PpStatus pp_cli_nccl_write_split (PpCliNccl *n, PpTraceWriter *w, uint32_t *next_name, size_t *n_written,
                                  PpError *err);
void     pp_cli_nccl_clear (PpCliNccl *n);
