/* cli-replicas.h — info's part on a job of replicas: each pipeline rank's
 * bubble over its replicas, and the slowest replica of every step. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-trace.h"

/* procs: the PROCESS frames (one a process); spans[i] was written by
 * span_process[i] (-1: not said).  Prints nothing for a job without
 * replicas. */
void pp_cli_print_replicas (const PpTraceProcess *procs, size_t n_procs, const PpSpan *spans,
                            const int32_t *span_process, size_t n_spans, int n_ranks);
