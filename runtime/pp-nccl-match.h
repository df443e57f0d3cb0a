/* pp-nccl-match.h — a receive's wait within a node, from the two sides'
 * NCCL spans (offline: over a trace, never in the job).
 *
 * Within a node NCCL moves data without proxy steps, so the profiler
 * plugin (probe/nccl/, docs/nccl-plugin.md) cannot split a receive's wait
 * on its own: it records each operation as a KERNEL span named "nccl:Send"
 * or "nccl:Recv", timed by its channel kernels, with the communicator in
 * stream, the recording side's rank in the communicator in stage, the
 * peer's in peer_rank and the sequence number on that pair in microbatch.
 * Here a receive meets its send (same communicator, pair and sequence
 * number; of several such, in time order) and its wait splits as
 * pp_nccl_split_kernels says: peer_late until the send's kernel started,
 * transfer after.  A receive the plugin already split (its proxy steps
 * gave "nccl:peer_late", "nccl:transfer" or "nccl:local" WAIT spans over
 * it) is left alone; so is one whose send is not in the spans.  No GLib. */
#pragma once

#include <stddef.h>

#include "pp-event.h"
#include "pp-status.h"

/* A span's name (NULL where it has none): the reader's string table. */
typedef const char *(*PpNcclNameFunc) (void *user, uint32_t name_id);

typedef struct {
  PpSpan wait;   /* kind WAIT: the receiving side's rank, step, peer and communicator */
  int    part;   /* PpNcclPart (pp-nccl-split.h): PEER_LATE or TRANSFER */
  size_t recv;   /* the receive's index in spans (its process, for a merge) */
} PpNcclMatchedWait;

/* The waits of every receive matched in spans (n of them, any order),
 * into *out (malloc'd, *n_out of them; NULL and 0 for none).  PP_ENOMEM
 * with err set when memory runs out. */
PpStatus pp_nccl_match (const PpSpan *spans, size_t n, PpNcclNameFunc name, void *user,
                        PpNcclMatchedWait **out, size_t *n_out, PpError *err);
