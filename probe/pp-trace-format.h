/* pp-trace-format.h — the trace file's on-disk layout, version 1.10.
 *
 * docs/trace-format.md is the specification; this header is its C form and
 * must agree with it.  Every struct is laid out with natural alignment and no
 * hidden padding; its size is pinned below with a static assert, as Sysprof's
 * capture format does.  Multi-byte fields are in the byte order the file
 * header names; the reader swaps when that is not the host's.
 *
 * Private to the writer and reader (and tests that forge frames).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PP_TRACE_MAGIC          "PPTRACE"  /* 8 bytes with the NUL */
#define PP_TRACE_VERSION_MAJOR  1
#define PP_TRACE_VERSION_MINOR  10  /* 1.1: RANK frames; 1.2: overlapped halves (SPAN_SUB);
                                       1.3: the header's job_id; 1.4: PROCESS frames and
                                       the frame header's process; 1.5: data-parallel
                                       span, action and counter kinds; 1.6: host
                                       span kinds, block-edge counters; 1.7: the
                                       on_cpu_ns block-edge counter; 1.8: the
                                       LAUNCH span kind, a GC span's stream
                                       (the collecting thread); 1.9: the LOSS
                                       span kind, the loss_part counter;
                                       1.10: OPEN frames (what a process
                                       is doing now, its heartbeat) */

#define PP_TRACE_ORDER_LITTLE_CODE 1
#define PP_TRACE_ORDER_BIG_CODE    2

/* A frame larger than this is malformed: it bounds every allocation. */
#define PP_TRACE_FRAME_MAX      (64u * 1024u * 1024u)
/* A file header larger than this is malformed. */
#define PP_TRACE_HEADER_MAX     4096u

typedef struct {
  char     magic[8];        /* "PPTRACE\0" */
  uint8_t  byte_order;      /* PP_TRACE_ORDER_*_CODE */
  uint8_t  reserved0[3];
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t header_size;     /* bytes from file start to the first frame */
  uint32_t reserved1;
  uint64_t job_id;          /* 1.3: the run that wrote the file (profile's); 0: none or older */
} PpTraceFileHeader;
_Static_assert (sizeof (PpTraceFileHeader) == 32, "file header is 32 bytes");

typedef enum {
  PP_TRACE_FRAME_DESCRIPTION  = 1,
  PP_TRACE_FRAME_PLAN         = 2,
  PP_TRACE_FRAME_SPANS        = 3,
  PP_TRACE_FRAME_COUNTER      = 4,
  PP_TRACE_FRAME_STEP_MARKER  = 5,
  PP_TRACE_FRAME_CLOCK_OFFSET = 6,
  PP_TRACE_FRAME_STRING       = 7,
  PP_TRACE_FRAME_DROPPED      = 8,
  PP_TRACE_FRAME_RANK         = 9,   /* 1.1 */
  PP_TRACE_FRAME_PROCESS      = 10,  /* 1.4 */
  PP_TRACE_FRAME_OPEN         = 11,  /* 1.10 */
} PpTraceFrameType;

/* Not a frame of any file: a rank's clock ping on its push to a collector
 * (pp-live-clock.c; docs/transport.md, "Clocks").  Types from 0x7f00 are the
 * live endpoint's own; a reader skips them as it skips any unknown type. */
#define PP_TRACE_FRAME_PUSH_CLOCK_PING 0x7f01

typedef struct {
  uint32_t size;            /* whole frame, this header included; multiple of 8 */
  uint16_t type;            /* PpTraceFrameType */
  /* 1.4: the writing process's global rank + 1 (its PROCESS frame's
   * process); 0: not said, the frame is its pipeline rank's as before 1.4.
   * Written 0 and ignored before 1.4. */
  uint16_t process;
} PpTraceFrameHeader;
_Static_assert (sizeof (PpTraceFrameHeader) == 8, "frame header is 8 bytes");

typedef struct {
  PpTraceFrameHeader h;
  int32_t  n_ranks;         /* P */
  int32_t  n_microbatches;  /* M */
  int32_t  n_virtual;       /* V: stages per rank */
  int32_t  reserved;
  int64_t  start_unix_ns;   /* CLOCK_REALTIME at start */
  int64_t  start_monotonic_ns; /* CLOCK_MONOTONIC at the same instant */
  char     schedule[64];
  char     backend[32];
  char     host[64];
  char     model[256];
  char     cmdline[1024];
} PpTraceFrameDescription;
_Static_assert (sizeof (PpTraceFrameDescription) == 1480, "description frame");
_Static_assert (offsetof (PpTraceFrameDescription, schedule) == 40, "description layout");
_Static_assert (offsetof (PpTraceFrameDescription, cmdline) == 456, "description layout");

typedef struct {
  int32_t  kind;            /* PpActionKind value */
  int32_t  stage;
  int32_t  microbatch;
  int32_t  sub_kind;        /* OVERLAP_F_B only, else -1 */
  int32_t  sub_stage;
  int32_t  sub_microbatch;
  double   planned_start;   /* seconds of simulated time; 0 without a timeline */
  double   planned_end;
} PpTraceDiskPlanAction;
_Static_assert (sizeof (PpTraceDiskPlanAction) == 40, "plan action record");

#define PP_TRACE_PLAN_HAS_TIMELINE 0x1u

typedef struct {
  PpTraceFrameHeader h;
  int32_t  rank;
  uint32_t n_actions;
  uint32_t flags;           /* PP_TRACE_PLAN_HAS_TIMELINE */
  uint32_t reserved;
  /* PpTraceDiskPlanAction actions[n_actions]; */
} PpTraceFramePlan;
_Static_assert (sizeof (PpTraceFramePlan) == 24, "plan frame fixed part");

/* A span batch frame is the header and then (size - 8) / 40 slots.  A span is
 * one compact slot, or — when a field does not fit the compact form — a
 * compact slot with PP_TRACE_SPAN_EXT and an extension slot right after it. */
#define PP_TRACE_SPAN_EXT       0x01u  /* next slot is this span's extension */
#define PP_TRACE_SPAN_IS_EXT    0x02u  /* this slot is an extension */
/* 1.2: with EXT, the compact slot's stage, microbatch and kind (unused by
 * an EXT span) hold an OVERLAP_F_B span's backward half.  Readers before
 * 1.2 ignore the bit and read the span as before. */
#define PP_TRACE_SPAN_SUB       0x04u

typedef struct {
  int64_t  start_ns;
  uint32_t duration_ns;     /* end_ns - start_ns; 0 when EXT */
  uint32_t bytes;
  int32_t  step;
  uint32_t name_id;
  uint32_t stream;
  int16_t  rank;
  int16_t  stage;
  int16_t  microbatch;
  int16_t  peer_rank;
  uint16_t device;
  uint8_t  kind;
  uint8_t  flags;           /* PP_TRACE_SPAN_EXT */
} PpTraceDiskSpan;
_Static_assert (sizeof (PpTraceDiskSpan) == 40, "compact span record");

typedef struct {
  int64_t  end_ns;
  uint64_t bytes;
  int32_t  rank;
  int32_t  stage;
  int32_t  microbatch;
  int32_t  peer_rank;
  uint16_t kind;
  uint8_t  reserved[5];
  uint8_t  flags;           /* PP_TRACE_SPAN_IS_EXT */
} PpTraceDiskSpanExt;
_Static_assert (sizeof (PpTraceDiskSpanExt) == 40, "span extension record");
_Static_assert (offsetof (PpTraceDiskSpanExt, flags) == offsetof (PpTraceDiskSpan, flags),
                "flags byte at the same place in both slots");

typedef struct {
  PpTraceFrameHeader h;
  /* PpTraceDiskSpan slots[(size - 8) / 40]; */
} PpTraceFrameSpans;
_Static_assert (sizeof (PpTraceFrameSpans) == 8, "span batch fixed part");

typedef struct {
  PpTraceFrameHeader h;
  int64_t  time_ns;
  double   value;
  int32_t  rank;
  int32_t  step;
  uint16_t kind;            /* PpCounterKind */
  uint16_t reserved0;
  uint32_t reserved1;
} PpTraceFrameCounter;
_Static_assert (sizeof (PpTraceFrameCounter) == 40, "counter frame");

typedef struct {
  PpTraceFrameHeader h;
  int64_t  time_ns;
  int32_t  rank;
  int32_t  step;
  uint32_t phase;           /* 0 begin, 1 end */
  uint32_t reserved;
} PpTraceFrameStepMarker;
_Static_assert (sizeof (PpTraceFrameStepMarker) == 32, "step marker frame");

typedef struct {
  PpTraceFrameHeader h;
  int32_t  rank;
  uint32_t reserved;
  int64_t  offset_ns;       /* reference time = rank's time + offset_ns */
} PpTraceFrameClockOffset;
_Static_assert (sizeof (PpTraceFrameClockOffset) == 24, "clock offset frame");

typedef struct {
  PpTraceFrameHeader h;
  uint32_t id;              /* name_id, never 0 */
  uint32_t length;          /* bytes of name, NUL not counted */
  /* char name[length], NUL, zero padding to a multiple of 8 */
} PpTraceFrameString;
_Static_assert (sizeof (PpTraceFrameString) == 16, "string frame fixed part");

typedef struct {
  PpTraceFrameHeader h;
  int32_t  rank;            /* -1: not known */
  uint32_t reserved;
  uint64_t count;           /* dropped since this rank's previous DROPPED frame */
} PpTraceFrameDropped;
_Static_assert (sizeof (PpTraceFrameDropped) == 24, "dropped frame");

/* 1.1: where a rank ran (a job's ranks may be processes on several hosts). */
typedef struct {
  PpTraceFrameHeader h;
  int32_t  rank;
  int32_t  pid;             /* of the process that ran the rank */
  uint64_t reserved;
  char     host[64];        /* NUL-terminated */
} PpTraceFrameRank;
_Static_assert (sizeof (PpTraceFrameRank) == 88, "rank frame");

/* 1.4: a process of the job and its place on the job's mesh.  coord and
 * size are in the order pp, dp, tp, cp, ep; coord[0] is rank, a size is 1
 * where the job has no such dimension.  The frames the process writes
 * after it carry process + 1 in their header. */
typedef struct {
  PpTraceFrameHeader h;
  int32_t  process;         /* global rank G, [0, 65535) */
  int32_t  rank;            /* pipeline rank: its spans' rank */
  int32_t  coord[5];
  int32_t  size[5];
  int32_t  pid;
  uint32_t flags;           /* PP_TRACE_PROCESS_* (written 0 before: reserved) */
  char     host[64];        /* NUL-terminated */
} PpTraceFrameProcess;
_Static_assert (sizeof (PpTraceFrameProcess) == 128, "process frame");
_Static_assert (offsetof (PpTraceFrameProcess, host) == 64, "process frame layout");

/* 1.10: what a process is doing now: the action it began and has not
 * ended (kind -1: none), as the hook's own thread saw it at time_ns (its
 * heartbeat).  The last OPEN frame of a process is its state when the
 * trace ended; one with PP_TRACE_OPEN_CLOSED says it closed its rank.  A
 * reader before 1.10 skips the frame (an unknown type). */
typedef struct {
  PpTraceFrameHeader h;
  int64_t  time_ns;         /* when the hook's thread looked (monotonic, the rank's clock) */
  int64_t  start_ns;        /* when the action began (kind -1: the last ended); 0: not known */
  int32_t  rank;            /* pipeline rank */
  int32_t  step;
  int32_t  stage;
  int32_t  microbatch;
  int32_t  peer_rank;       /* -1: none */
  int16_t  kind;            /* PpSpanKind; -1: no action open */
  uint16_t flags;           /* PP_TRACE_OPEN_* */
  char     where[128];      /* the training thread's frame ("train.py:88 forward") or "" */
} PpTraceFrameOpen;
_Static_assert (sizeof (PpTraceFrameOpen) == 176, "open frame");
