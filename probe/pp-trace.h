/* pp-trace.h — write and read pipescope trace files.
 *
 * The format is specified in docs/trace-format.md (layout in
 * pp-trace-format.h).  No GLib: the writer runs inside training jobs.
 *
 * Writer: every call returns a PpStatus and fills err (may be NULL) on
 * failure.  Frames are built in place in a buffer and only whole frames are
 * handed to write(2), so a process killed at any moment leaves a file that is
 * whole frames plus at most one partial frame, which a reader accepts.  After
 * an I/O error the writer keeps failing with that error.
 *
 * Reader: pp_trace_reader_next() hands out one item at a time.  Pointers in an
 * item (description, plan actions, string names) stay valid until the next
 * call on that reader.  The end of the trace is PP_OK with item->type ==
 * PP_TRACE_ITEM_END; item->truncated is 1 when the file ended inside the
 * header or a frame (a job killed mid-write).  Malformed input is PP_EFORMAT
 * with a message naming the byte offset and frame type; after it the reader
 * keeps returning that error.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-event.h"
#include "pp-status.h"

/* Byte order of a written file.  The non-native one exists for tests. */
enum {
  PP_TRACE_NATIVE = 0,
  PP_TRACE_LITTLE = 1,
  PP_TRACE_BIG    = 2,
};

/* Ranks in any frame lie in [0, PP_TRACE_MAX_RANKS). */
#define PP_TRACE_MAX_RANKS       65536
#define PP_TRACE_MAX_MICROBATCHES (1 << 24)
#define PP_TRACE_MAX_VIRTUAL     4096
/* A process's global rank (format 1.4) lies in [0, PP_TRACE_MAX_PROCESSES):
 * frame headers carry it + 1 in 16 bits. */
#define PP_TRACE_MAX_PROCESSES   65535
/* Longest interned string, NUL not counted. */
#define PP_TRACE_STRING_MAX      4095
/* Most actions one rank's plan may hold (bounded by the frame size). */
#define PP_TRACE_PLAN_MAX_ACTIONS ((64u * 1024u * 1024u - 24u) / 40u)

/* Same numbers as PpActionKind in runtime/pp-action.h (the probe does not
 * depend on the runtime; tests check that the two agree). */
typedef enum {
  PP_TRACE_ACT_F = 0,
  PP_TRACE_ACT_B,
  PP_TRACE_ACT_I,
  PP_TRACE_ACT_W,
  PP_TRACE_ACT_SEND_F,
  PP_TRACE_ACT_RECV_F,
  PP_TRACE_ACT_SEND_B,
  PP_TRACE_ACT_RECV_B,
  PP_TRACE_ACT_OVERLAP_F_B,
  PP_TRACE_ACT_OPT,
  PP_TRACE_ACT_UNSHARD,          /* FSDP's actions (format 1.5) */
  PP_TRACE_ACT_RESHARD,
  PP_TRACE_ACT_REDUCE_GRAD,
  PP_TRACE_ACT_WAIT_REDUCE_GRAD,
} PpTraceActionKind;

/* The run's description.  Strings are NUL-terminated within their array;
 * the writer cuts one that is not at its last byte. */
typedef struct {
  char    schedule[64];        /* "1F1B", "ZBV", ... */
  char    backend[32];         /* "cpu", "cuda" */
  char    host[64];
  char    model[256];          /* model description */
  char    cmdline[1024];
  int32_t n_ranks;             /* P */
  int32_t n_microbatches;      /* M */
  int32_t n_virtual;           /* V, stages per rank */
  int64_t start_unix_ns;       /* wall clock at start */
  int64_t start_monotonic_ns;  /* CLOCK_MONOTONIC at the same instant */
} PpTraceDescription;

/* One planned action; planned_start/end (seconds, from the simulator) are
 * meaningful only in a plan written with has_timeline. */
typedef struct {
  int32_t kind;                /* PpActionKind / PpTraceActionKind */
  int32_t stage;
  int32_t microbatch;          /* -1 where none */
  int32_t sub_kind;            /* OVERLAP_F_B: the backward half; else -1 */
  int32_t sub_stage;
  int32_t sub_microbatch;
  double  planned_start;
  double  planned_end;
} PpTracePlanAction;

/* A process's place on the job's mesh (format 1.4), dimensions in this
 * order; a job without a dimension has size 1 there. */
enum {
  PP_TRACE_MESH_PP = 0,
  PP_TRACE_MESH_DP,
  PP_TRACE_MESH_TP,
  PP_TRACE_MESH_CP,
  PP_TRACE_MESH_EP,
  PP_TRACE_MESH_DIMS
};

/* PpTraceProcess.flags.  UNPLACED: the hook could not read the process's
 * place from the job (groups laid out irregularly); only its global rank
 * and pipeline rank are known.  Its file says coord (rank, 0, 0, 0, 0);
 * merge numbers such processes as replicas of their pipeline rank in order
 * of global rank (pp_trace_number_unplaced) and keeps the flag, so every
 * view can say the place was not read.  Other bits are kept, not read. */
#define PP_TRACE_PROCESS_UNPLACED 0x1u

typedef struct {
  int32_t process;                     /* global rank G, [0, PP_TRACE_MAX_PROCESSES) */
  int32_t rank;                        /* pipeline rank (the rank of its spans) */
  int32_t coord[PP_TRACE_MESH_DIMS];   /* coord[PP_TRACE_MESH_PP] == rank */
  int32_t size[PP_TRACE_MESH_DIMS];    /* >= 1 each; coord[d] < size[d] */
  int32_t pid;
  uint32_t flags;                      /* PP_TRACE_PROCESS_* */
  char    host[64];                    /* NUL-terminated */
} PpTraceProcess;

/* PP_OK when p is a place a trace can hold, else PP_EINVAL and one line
 * naming the field that is wrong. */
PpStatus pp_trace_process_check (const PpTraceProcess *p, PpError *err);

/* The processes a mesh of these sizes holds over dimensions from .. ep (a
 * size below 1 counts 1), saturated at INT64_MAX: what the views print as
 * "N replicas", never a signed overflow, however a file's places disagree
 * (each place holds at most PP_TRACE_MAX_PROCESSES, the largest sizes of
 * several may not: issue 40). */
int64_t  pp_trace_mesh_count (const int32_t size[PP_TRACE_MESH_DIMS], int from);

/* Whether the processes ps[n] can be one job: PP_OK, or PP_EFORMAT and one
 * line (beginning "trace: ") naming two processes at one place (the same
 * pipeline rank, dp, tp, cp and ep: merge refuses them too), or the mesh
 * their largest sizes make holding more than PP_TRACE_MAX_PROCESSES
 * processes.  Processes whose place was not read
 * (PP_TRACE_PROCESS_UNPLACED) are numbered apart from the others and never
 * collide.  One sort of an index: PP_ENOMEM. */
PpStatus pp_trace_places_check (const PpTraceProcess *ps, size_t n, PpError *err);

/* Numbers the processes of ps[n] whose place was not read
 * (PP_TRACE_PROCESS_UNPLACED) as replicas of their pipeline rank: within a
 * rank, in order of global rank, dp = k (after the largest dp a placed
 * process of that rank holds), tp, cp, ep 0; their dp size the most any
 * rank then has.  Placed processes are left as they are.  One sort of an
 * index; PP_ENOMEM, else PP_OK. */
PpStatus pp_trace_number_unplaced (PpTraceProcess *ps, size_t n, PpError *err);

/* What a process is doing now (format 1.10, an OPEN frame): the action
 * it began and has not ended, as the hook's own thread saw it at time_ns
 * (its heartbeat); kind -1 when none is open.  CLOSED: the process closed
 * its rank (it ended; nothing of it is open). */
#define PP_TRACE_OPEN_CLOSED 0x1u
#define PP_TRACE_OPEN_WHERE_MAX 128

typedef struct {
  int64_t  time_ns;            /* the rank's monotonic clock, as its spans */
  int64_t  start_ns;           /* when the action began (kind -1: the last ended); 0: not known */
  int32_t  rank;               /* pipeline rank, [0, PP_TRACE_MAX_RANKS) */
  int32_t  step;
  int32_t  stage;
  int32_t  microbatch;
  int32_t  peer_rank;          /* -1: none */
  int32_t  kind;               /* PpSpanKind, -1: none open */
  uint32_t flags;              /* PP_TRACE_OPEN_* */
  char     where[PP_TRACE_OPEN_WHERE_MAX];   /* NUL-terminated; "" when not taken */
} PpTraceOpen;

typedef enum {
  PP_TRACE_STEP_BEGIN = 0,
  PP_TRACE_STEP_END   = 1,
} PpTraceStepPhase;

typedef struct _PpTraceWriter PpTraceWriter;
typedef struct _PpTraceReader PpTraceReader;

/* ---- writer ---- */

/* Writes to fd, which the writer does not close.  The file header goes out
 * with the first flush.  NULL on failure, with err filled. */
PpTraceWriter *pp_trace_writer_new_fd (int fd, int byte_order, PpError *err);
/* Creates (truncates) path, mode 0600; the writer closes it.  It holds a
 * shared flock on the file while open (pp_trace_file_in_use). */
PpTraceWriter *pp_trace_writer_new_path (const char *path, int byte_order, PpError *err);
/* The file header's job id (format 1.3): which run wrote the file, so
 * that a run's rank files are told apart from another's.  Before the
 * header goes out (the first flush); PP_EINVAL after. */
PpStatus pp_trace_writer_set_job_id (PpTraceWriter *w, uint64_t job_id, PpError *err);

PpStatus pp_trace_write_description (PpTraceWriter *w, const PpTraceDescription *desc,
                                     PpError *err);
/* One PLAN frame per rank: actions[r] holds n_actions[r] actions of rank r.
 * has_timeline says planned_start/end are filled in. */
PpStatus pp_trace_write_plan (PpTraceWriter *w, int n_ranks,
                              const PpTracePlanAction *const *actions,
                              const size_t *n_actions, int has_timeline,
                              PpError *err);
/* The PLAN frame of one rank alone (a rank process writing its own plan). */
PpStatus pp_trace_write_rank_plan (PpTraceWriter *w, int rank, const PpTracePlanAction *actions,
                                   size_t n_actions, int has_timeline, PpError *err);
/* Batched: n spans go into as few frames as fit.  Every field round-trips. */
PpStatus pp_trace_write_spans (PpTraceWriter *w, const PpSpan *spans, size_t n,
                               PpError *err);
PpStatus pp_trace_write_counter (PpTraceWriter *w, const PpCounter *counter,
                                 PpError *err);
PpStatus pp_trace_write_step_marker (PpTraceWriter *w, int32_t rank, int32_t step,
                                     PpTraceStepPhase phase, int64_t time_ns,
                                     PpError *err);
/* Reference time = rank's time + offset_ns.  The last frame for a rank wins. */
PpStatus pp_trace_write_clock_offset (PpTraceWriter *w, int32_t rank, int64_t offset_ns,
                                      PpError *err);
/* Where rank ran: the process's pid and host (format 1.1).  The last frame
 * for a rank wins. */
PpStatus pp_trace_write_rank (PpTraceWriter *w, int32_t rank, int32_t pid, const char *host,
                              PpError *err);
/* The PROCESS frame (format 1.4): who writes what follows.  It does not
 * tag anything itself: see pp_trace_writer_set_process. */
PpStatus pp_trace_write_process (PpTraceWriter *w, const PpTraceProcess *p, PpError *err);
/* Every frame written from now on carries process (its header's process
 * field, 1.4); -1: none (as before 1.4).  PP_EINVAL outside
 * [-1, PP_TRACE_MAX_PROCESSES).  pp_trace_write_item tags each item's
 * frame with the item's own process instead. */
PpStatus pp_trace_writer_set_process (PpTraceWriter *w, int32_t process, PpError *err);
/* The OPEN frame (format 1.10): what a process is doing now. */
PpStatus pp_trace_write_open (PpTraceWriter *w, const PpTraceOpen *o, PpError *err);
/* Interns name under id (>= 1) for PpSpan.name_id.  The last one for an id wins. */
PpStatus pp_trace_write_string (PpTraceWriter *w, uint32_t id, const char *name,
                                PpError *err);
/* The same, a name longer than PP_TRACE_STRING_MAX bytes cut to it (a
 * mangled template kernel name can be longer than a trace string). */
PpStatus pp_trace_write_string_cut (PpTraceWriter *w, uint32_t id, const char *name,
                                    PpError *err);
/* count events of rank (-1: unknown) were dropped since the previous call for
 * that rank; readers sum the frames. */
PpStatus pp_trace_write_dropped (PpTraceWriter *w, int32_t rank, uint64_t count,
                                 PpError *err);
/* Hands everything buffered to write(2). */
PpStatus pp_trace_writer_flush (PpTraceWriter *w, PpError *err);
/* Flushes, closes a path's fd, frees w (always, even on error).  NULL is fine. */
PpStatus pp_trace_writer_close (PpTraceWriter *w, PpError *err);

/* ---- reader ---- */

typedef enum {
  PP_TRACE_ITEM_END = 0,
  PP_TRACE_ITEM_DESCRIPTION,
  PP_TRACE_ITEM_PLAN,
  PP_TRACE_ITEM_SPAN,
  PP_TRACE_ITEM_COUNTER,
  PP_TRACE_ITEM_STEP_MARKER,
  PP_TRACE_ITEM_CLOCK_OFFSET,
  PP_TRACE_ITEM_STRING,
  PP_TRACE_ITEM_DROPPED,
  PP_TRACE_ITEM_RANK,
  PP_TRACE_ITEM_PROCESS,       /* 1.4 */
  PP_TRACE_ITEM_OPEN,          /* 1.10 */
} PpTraceItemType;

typedef struct {
  PpTraceItemType type;
  int             truncated;   /* END only: the file ended inside a frame */
  int             need_more;   /* END only, stream readers: no whole frame buffered
                                * yet; feed more bytes and call next again */
  uint64_t        offset;      /* byte offset of the frame the item came from */
  /* 1.4: the global rank of the process that wrote the item's frame; -1
   * when the frame does not say (every frame before 1.4) */
  int32_t         process;
  union {
    const PpTraceDescription *description;
    struct {
      int32_t                  rank;
      int                      has_timeline;
      size_t                   n_actions;
      const PpTracePlanAction *actions;
    } plan;
    PpSpan    span;
    PpCounter counter;
    struct {
      int64_t          time_ns;
      int32_t          rank;
      int32_t          step;
      PpTraceStepPhase phase;
    } step_marker;
    struct {
      int32_t rank;
      int64_t offset_ns;
    } clock_offset;
    struct {
      uint32_t    id;
      size_t      length;
      const char *name;        /* NUL-terminated */
    } string;
    struct {
      int32_t  rank;
      uint64_t count;
    } dropped;
    struct {
      int32_t rank;
      int32_t pid;
      char    host[64];        /* NUL-terminated */
    } rank_info;
    PpTraceProcess process_info;
    PpTraceOpen    open;          /* 1.10 */
  };
} PpTraceItem;

PpTraceReader *pp_trace_reader_new_path (const char *path, PpError *err);
/* Reads fd from its current position; the reader does not close it. */
PpTraceReader *pp_trace_reader_new_fd (int fd, PpError *err);
/* Reads data in place; it must outlive the reader. */
PpTraceReader *pp_trace_reader_new_memory (const void *data, size_t size, PpError *err);

PpStatus pp_trace_reader_next (PpTraceReader *r, PpTraceItem *item, PpError *err);
/* Version of the file, known once the first call to next has returned. */
void     pp_trace_reader_get_version (PpTraceReader *r, int *major, int *minor);
/* The header's job id, known likewise: 0 for none (and in files before 1.3). */
uint64_t pp_trace_reader_get_job_id (PpTraceReader *r);

/* A trace file's job id from its header alone.  PP_EFORMAT (one line
 * naming path) when it holds no whole pipescope header. */
PpStatus pp_trace_file_job_id (const char *path, uint64_t *job_id, PpError *err);
/* 1 while some process has path open for writing through
 * pp_trace_writer_new_path (its lock), 0 when none does or it cannot be
 * told. */
int      pp_trace_file_in_use (const char *path);
void     pp_trace_reader_free (PpTraceReader *r);

/* ---- streaming: live endpoints ------------------------------------------
 * A writer can hand its bytes to a function instead of a file: it calls
 * write with the file header first, then with whole frames only, so whatever
 * the function has received is always a valid trace prefix.  write returns 0,
 * or -1 on failure (the writer then returns PP_EIO from then on). */
typedef int (*PpTraceWriteFunc) (void *user, const void *data, size_t size);

PpTraceWriter *pp_trace_writer_new_callback (PpTraceWriteFunc write, void *user,
                                             int byte_order, PpError *err);

/* Writes what a reader delivered (any item but END), so a viewer can store
 * what it receives; PLAN items are written as one rank's plan.  The frame
 * carries the item's process (none when it is outside [0,
 * PP_TRACE_MAX_PROCESSES)). */
PpStatus pp_trace_write_item (PpTraceWriter *w, const PpTraceItem *item, PpError *err);

/* A reader over bytes that arrive in pieces (a socket).  Feed bytes as they
 * come; pp_trace_reader_next delivers the items of whole frames and returns
 * PP_OK with an END item with need_more = 1 when it needs more.  After
 * pp_trace_reader_feed_end (the peer closed), END has need_more = 0 and
 * truncated = 1 if a partial frame was left.  Buffered bytes never exceed the
 * largest legal frame plus one feed: call next until need_more between feeds;
 * a feed while more than a frame's worth is unread is refused (PP_EINVAL,
 * nothing taken).  Malformed input fails as in the file reader, and the
 * reader (feed included) keeps returning that error. */
PpTraceReader *pp_trace_reader_new_stream (PpError *err);
PpStatus       pp_trace_reader_feed (PpTraceReader *r, const void *data, size_t size,
                                     PpError *err);
void           pp_trace_reader_feed_end (PpTraceReader *r);
