/* pp-why-gaps-private.h — the per-rank index of spans and counters that
 * rule 1 (pp-why-gaps.c) measures gaps in and the rest of the runtime
 * parts (pp-why-runtime.c) read; not for other callers.  No GLib. */
#pragma once

#include "pp-why-runtime.h"

#define N_HOST (PP_SPAN_HOST_ZERO_GRAD - PP_SPAN_GC + 1)
#define N_SAMPLED 3   /* RUN_DELAY_NS, PROBE_SELF_NS, ON_CPU_NS */

typedef struct {
  int64_t a, b;
} Iv;

typedef struct {
  int64_t t;
  double  v;
} Sample;

/* One rank's records, each list sorted; the interval lists merged
 * (disjoint), but launch: its LAUNCH spans as they are, by end.
 * host[0]: the training thread's GC pauses; other_gc: the collections of
 * the process's other threads (a GC span's stream, format 1.8); wait: its
 * WAIT spans (a wait that released the GIL), every one; arrive: those
 * that wait for a peer (rule 3's marks: all but the local ones), local:
 * the local ones (pp_why_wait_is_local: its own device busy). */
typedef struct {
  Iv     *work, *host[N_HOST], *kern, *launch, *other_gc, *wait, *arrive, *local;
  size_t  n_work, n_host[N_HOST], n_kern, n_launch, n_other_gc, n_wait, n_arrive, n_local;
  Sample *smp[N_SAMPLED];
  size_t  n_smp[N_SAMPLED];
} RankIx;

struct PpWhyRuntimeIndex {
  int           ranks;
  RankIx       *r;
  unsigned char host_seen[N_HOST];
  Iv           *scratch;   /* per gap: the host intervals covered so far */
  size_t        cap_scratch;
};

/* The first interval of v[n] (disjoint, sorted) ending after t. */
size_t pp_why_first_ending_after (const Iv *v, size_t n, int64_t t);

/* v capped to [0, left]; 0 for NaN. */
double pp_why_capped (double v, double left);

/* Rule 1 over the gap [a, b] of rank x (its edges; INT64_MIN/MAX none),
 * clipped to [lo, hi] (non-empty): parts in seconds. */
PpStatus pp_why_gap_parts (PpWhyRuntimeIndex *ix, const RankIx *x, int64_t a, int64_t b, int64_t lo,
                           int64_t hi, double *parts, PpError *err);

/* pp_why_each_gap calls fn for each gap of rank r inside [lo, hi]: its
 * edges and parts. */
typedef PpStatus (*PpWhyGapFn) (void *user, int64_t a, int64_t b, int64_t ca, int64_t cb,
                                const double *parts, PpError *err);
PpStatus pp_why_each_gap (PpWhyRuntimeIndex *ix, int r, int64_t lo, int64_t hi, PpWhyGapFn fn, void *user,
                          PpError *err);
