/* pp-trace-sink.h — the probe's drain writes into trace writers.
 *
 * A PpProbeSink whose callbacks encode spans, counters and drop counts into
 * up to PP_TRACE_SINK_MAX writers (a file, a live server, ...) and flush them
 * after every batch, so a live viewer sees events within a drain period.
 * The callbacks run on the probe's drain thread only; a writer that fails is
 * reported once (pp_trace_sink_status) and skipped afterwards, never fatal.
 */
#pragma once

#include "pp-probe.h"
#include "pp-trace.h"

#define PP_TRACE_SINK_MAX 4

typedef struct _PpTraceSink PpTraceSink;

PpTraceSink *pp_trace_sink_new (PpTraceWriter *const *writers, int n_writers, PpError *err);

/* The PpProbeSink to put in PpProbeConfig.sink. */
PpProbeSink  pp_trace_sink_probe_sink (PpTraceSink *sink);

/* PP_OK, or the first error a writer hit (with its message). */
PpStatus     pp_trace_sink_status (PpTraceSink *sink, PpError *err);

/* Frees the sink, not the writers. */
void         pp_trace_sink_free (PpTraceSink *sink);
