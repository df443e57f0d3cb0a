/* pp-stuck.h — where a stuck job is stuck: the wait-for graph of its
 * processes' open actions (trace format 1.10's OPEN frames), its root or
 * its cycle, and the one line that says it (docs/stuck.md).
 *
 * Who waits for whom: a receive (RECV_F, RECV_B, a WAIT) waits for its
 * sender and a send for its receiver (the process at the peer's pipeline
 * rank with the same dp, tp, cp and ep); a data-parallel collective
 * (UNSHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD) waits for the members of its dp
 * group that are not in the same collective of the same stage and step.
 * Work (F, B, I, W, the optimizer, the loss), no action at all, a closed
 * process or one whose heartbeat stopped waits for nobody.
 *
 * The root: a process that waits for nobody and that others wait for.  A
 * cycle: processes each of which waits for the next, none reaching a root
 * (a deadlock).  Every number and word of the diagnosis comes from here;
 * views print the line.  No GLib: the CLI and the app both call it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-trace.h"

#define PP_STUCK_MAX 64   /* processes a verdict names */

/* One process as its trace or live stream says it. */
typedef struct {
  int32_t     process;                      /* global rank; -1: the trace has no PROCESS frames (then rank) */
  int32_t     coord[PP_TRACE_MESH_DIMS];    /* pp, dp, tp, cp, ep */
  int32_t     size[PP_TRACE_MESH_DIMS];
  int32_t     pid;
  char        host[64];
  bool        has_open;                     /* an OPEN frame came (a 1.10 hook) */
  PpTraceOpen open;                         /* its last */
  bool        gone;                         /* its heartbeat stopped: dead or frozen whole */
} PpStuckProcess;

typedef enum {
  PP_STUCK_NONE = 0,     /* nobody waits (or no process has an open action) */
  PP_STUCK_ROOT,         /* who[0..n) are roots others wait for */
  PP_STUCK_CYCLE,        /* who[0..n) wait each for the next, the last for the first */
} PpStuckKind;

typedef struct {
  PpStuckKind kind;
  int         n;
  int32_t     who[PP_STUCK_MAX];           /* process numbers (global rank, else pipeline rank) */
  int         n_waiting;                   /* processes that wait for somebody */
} PpStuckVerdict;

/* The verdict for ps[n], and into line (may be NULL) its diagnosis: one
 * line a root ("stuck: process 3 (pp 1 dp 1, host H, pid N) in F mb 2 of
 * step 2 for 41 s, in train.py:88 forward; processes 0, 1, 2 wait for it:
 * 1 in RECV_B mb 1 from 3; 0 and 2 in the dp all-reduce of stage 0") or
 * one line for the cycle ("stuck: deadlock: ..."), each ending in '\n';
 * "" for PP_STUCK_NONE.  Cut (never overrun) at size. */
PpStuckKind pp_stuck_diagnose (const PpStuckProcess *ps, size_t n, PpStuckVerdict *v, char *line,
                               size_t size);

/* The action's words: "F mb 2 of step 2", "RECV_B mb 1", "the optimizer
 * of step 3", "no recorded action".  Into buf. */
const char *pp_stuck_action_words (const PpTraceOpen *o, bool with_step, char *buf, size_t size);

/* One process's last OPEN frame, by process (its global rank; -1: a trace
 * without PROCESS frames, then by the frame's rank). */
typedef struct {
  int32_t     process;
  PpTraceOpen open;
} PpStuckOpen;

/* Keeps o as process's last in *opens (grown as needed); false on no memory. */
bool        pp_stuck_keep_open (PpStuckOpen **opens, size_t *n, size_t *cap, int32_t process,
                                const PpTraceOpen *o);

/* The verdict and its line for processes procs[n_procs] (may be 0: then
 * every process is its pipeline rank, dp 0) with their last open actions
 * opens[n_opens].  gone (may be NULL): [n_opens], true where that
 * process's heartbeat stopped. */
PpStuckKind pp_stuck_from_places (const PpTraceProcess *procs, size_t n_procs, const PpStuckOpen *opens,
                                  size_t n_opens, const bool *gone, PpStuckVerdict *v, char *line,
                                  size_t size);

/* The wait-for graph's edges: process from waits for process to
 * (process numbers as PpStuckVerdict's who). */
typedef struct {
  int32_t from, to;
} PpStuckEdge;

/* The edges of ps[n] into edges[max] (may be NULL with max 0), in order
 * of the waiting process: their number (more than max when some were left
 * out).  The same waits_for the verdict reads: a view draws these, never
 * its own. */
size_t      pp_stuck_edges (const PpStuckProcess *ps, size_t n, PpStuckEdge *edges, size_t max);
/* The same of pp_stuck_from_places's processes. */
size_t      pp_stuck_edges_from_places (const PpTraceProcess *procs, size_t n_procs, const PpStuckOpen *opens,
                                        size_t n_opens, const bool *gone, PpStuckEdge *edges, size_t max);

/* ---- when a job is stuck (issue 37) ----
 * A job is stuck when no action has ended on any process for
 * PP_STUCK_AFTER_STEPS median steps and at least PP_STUCK_AFTER_MIN_S:
 * profile's collector ('jobs'), record and the app all ask
 * pp_stuck_after_s.  The steps are the last PP_STUCK_STEPS_KEPT lengths
 * between a process's step ends (any process's, its own clock). */
#define PP_STUCK_AFTER_STEPS 10
#define PP_STUCK_AFTER_MIN_S 30.0
#define PP_STUCK_STEPS_KEPT  32
typedef struct {
  int64_t  ns[PP_STUCK_STEPS_KEPT];
  uint32_t n;                    /* lengths added (the last PP_STUCK_STEPS_KEPT kept) */
} PpStuckSteps;

/* Keeps a step's length (ignored unless > 0). */
void        pp_stuck_steps_add (PpStuckSteps *s, int64_t step_ns);
/* The seconds without an action ending after which the job is stuck:
 * PP_STUCK_AFTER_STEPS times the median kept step (the lower middle), at
 * least PP_STUCK_AFTER_MIN_S (that alone without steps; s may be NULL). */
double      pp_stuck_after_s (const PpStuckSteps *s);

/* What a viewer keeps of a job's stream to say whether and where it is
 * stuck: each process's place and last OPEN frame, and when the job last
 * made progress (a span came, or a process's open action changed), on the
 * caller's clock.  Zero-initialize; pp_stuck_watch_clear frees. */
typedef struct {
  PpStuckOpen    *opens;
  size_t          n_opens, cap_opens;
  PpTraceProcess *places;
  size_t          n_places, cap_places;
  int64_t         progress_ns;   /* 0: none yet */
  PpStuckSteps    steps;         /* the last steps' lengths (STEP_MARKER ends) */
  PpStuckOpen    *step_ends;     /* each process's last step end (open.time_ns) */
  size_t          n_step_ends, cap_step_ends;
} PpStuckWatch;

/* Takes what item says (SPAN, PROCESS, OPEN, STEP_MARKER's ends; others
 * are ignored) at now_ns; false on no memory. */
bool        pp_stuck_watch_take (PpStuckWatch *w, const PpTraceItem *item, int64_t now_ns);
/* The diagnosis of what w holds: PP_STUCK_NONE and "" when quiet_s > 0 and
 * the job made progress within quiet_s seconds of now_ns, or nobody waits. */
PpStuckKind pp_stuck_watch_diagnose (const PpStuckWatch *w, double quiet_s, int64_t now_ns,
                                     PpStuckVerdict *v, char *line, size_t size);
/* The job is stuck by the rule after this long: pp_stuck_after_s of the
 * steps w saw. */
double      pp_stuck_watch_after_s (const PpStuckWatch *w);
/* The wait-for graph's edges of what w holds, as pp_stuck_edges. */
size_t      pp_stuck_watch_edges (const PpStuckWatch *w, PpStuckEdge *edges, size_t max);
/* A copy of src into dst (zero-initialized; cleared first); false on no
 * memory (dst then empty). */
bool        pp_stuck_watch_copy (PpStuckWatch *dst, const PpStuckWatch *src);
void        pp_stuck_watch_clear (PpStuckWatch *w);
