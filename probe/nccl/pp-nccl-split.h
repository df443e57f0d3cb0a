/* pp-nccl-split.h — what one NCCL operation's wait was made of.
 *
 * NCCL's proxy reports, for each network step (chunk) of a send or a
 * receive, the states it went through (pp-nccl-abi.h).  Each state interval
 * says who held the chunk up:
 *
 *   peer_late  the peer had not sent: a receive's RecvWait before the
 *              operation's first data arrived, a send's SendPeerWait (the
 *              receiver had not cleared the chunk);
 *   transfer   data moving: RecvWait once data flows, RecvFlushWait,
 *              SendWait;
 *   local      this GPU busy: SendGPUWait (the kernel had not handed the
 *              chunk over), RecvGPUWait (it had not taken the data).
 *
 * Steps overlap (NCCL keeps several in flight), so the operation's time is
 * split instant by instant: an instant where some chunk moves is transfer;
 * else, where some chunk waits for the peer, peer_late; else, where some
 * chunk waits for this GPU, local.  The parts never overlap and their union
 * is the union of the intervals.  The first chunk's own flight time counts
 * as peer_late (NCCL says when data arrived, not when it left).
 *
 * Within a node NCCL reports no proxy steps; there the split comes from
 * the two peers' kernel times (pp_nccl_split_kernels).  Plain C, no
 * allocation but the caller's. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum {
  PP_NCCL_PART_PEER_LATE = 0,
  PP_NCCL_PART_TRANSFER,
  PP_NCCL_PART_LOCAL,
  PP_NCCL_N_PARTS,
  /* an input class only: a RecvWait, peer_late before the operation's
   * first data arrived and transfer after */
  PP_NCCL_PART_RECV_WAIT = PP_NCCL_N_PARTS,
} PpNcclPart;

typedef struct {
  int64_t start_ns, end_ns;
  int     part;              /* PpNcclPart, PP_NCCL_PART_RECV_WAIT as input */
} PpNcclInterval;

/* The class of a proxy step state (pp-nccl-abi.h's numbers); -1 for a
 * state that says nothing of the wait. */
int         pp_nccl_state_part (int state);
/* "peer_late", "transfer", "local" (the part's name in a trace: "nccl:"
 * before it). */
const char *pp_nccl_part_name (int part);

/* Splits n intervals (input classes, any order) into out, at most cap
 * runs, in time order, adjacent runs of one part merged; totals[part] the
 * nanoseconds of each part (may be NULL).  first_data: when the
 * operation's first data arrived (the earliest end of a RecvWait);
 * INT64_MAX: the earliest end among iv's (give it where RecvWaits were
 * merged, pp_nccl_intervals_add).  scratch holds 2 n + 2 entries (the
 * sweep's edges).  Returns the runs written; runs past cap are counted in
 * totals but not written. */
size_t pp_nccl_split (const PpNcclInterval *iv, size_t n, int64_t first_data, PpNcclInterval *out,
                      size_t cap, int64_t totals[PP_NCCL_N_PARTS], PpNcclInterval *scratch);

/* An operation's intervals as its steps close them, kept few: one that
 * overlaps or touches the last kept of its class joins it (several steps
 * in flight wait in the same state at once), which changes no split
 * given first_data. */
typedef struct {
  PpNcclInterval *iv;
  size_t          n, cap, max;       /* max: past it, intervals are dropped (add returns -1) */
  long            last[PP_NCCL_N_PARTS + 1];   /* index of the last of each class, -1 */
  int64_t         first_data;        /* INT64_MAX until a RecvWait closed */
} PpNcclIntervals;

void pp_nccl_intervals_init (PpNcclIntervals *s, size_t max);
/* 0, or -1 when it could not be kept (memory, max). */
int  pp_nccl_intervals_add (PpNcclIntervals *s, int64_t start_ns, int64_t end_ns, int part);
void pp_nccl_intervals_clear (PpNcclIntervals *s);

/* A receive matched with its send by sequence number (within a node):
 * the receiving kernel ran [recv_start, recv_end], the sending one
 * [send_start, send_end], on one clock.  The receive's wait up to the
 * send's start is peer_late, the rest of it transfer.  Writes at most 2
 * runs; returns how many. */
size_t pp_nccl_split_kernels (int64_t recv_start, int64_t recv_end, int64_t send_start,
                              int64_t send_end, PpNcclInterval out[2]);
