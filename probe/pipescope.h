/* pipescope.h — the probe's stable C API for runtimes that are not ours.
 *
 * libpipescope-probe.so records a foreign runtime's pipeline (a PyTorch job,
 * through pipescope's Python hook; any C or C++ runtime directly) with the
 * same code as pipescope's bundled runtime: the per-thread rings, the drain,
 * the live endpoint and job registry, the trace writer.  What a rank records
 * is served live (`pipescope-cli jobs`, `record`, the app) and written to a
 * trace file when asked.
 *
 * Stability: the functions below take and return only scalars and strings;
 * no structure crosses the boundary.  Their meaning, the numbers of the kinds
 * and pipescope_api_version() change only together: a caller checks the
 * version once and refuses (or degrades) on one it does not know.
 *
 * Never hurts the job: no call blocks on a viewer, a disk or a peer; none
 * exits, aborts or raises a signal; recording allocates nothing after a
 * thread's first record; a record that does not fit is dropped and counted
 * (pipescope_dropped), never queued without limit.  A NULL rank is accepted
 * everywhere and does nothing, so a caller can keep calling after an open
 * failed.  Every function is safe to call from any thread.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (pipescope_now_ns); steps count from
 * 0; stage and micro-batch are -1 where none.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIPESCOPE_API_VERSION 1

#if defined(PIPESCOPE_BUILDING)
#define PIPESCOPE_API __attribute__ ((visibility ("default")))
#else
#define PIPESCOPE_API
#endif

/* The kinds of a block or transfer: the trace format's span kinds. */
enum {
  PIPESCOPE_F = 0,          /* forward */
  PIPESCOPE_B = 1,          /* full backward */
  PIPESCOPE_I = 2,          /* backward, input gradient */
  PIPESCOPE_W = 3,          /* backward, weight gradient */
  PIPESCOPE_SEND_F = 4,     /* a transfer: activations out */
  PIPESCOPE_RECV_F = 5,     /* activations in */
  PIPESCOPE_SEND_B = 6,     /* gradients out */
  PIPESCOPE_RECV_B = 7,     /* gradients in */
  PIPESCOPE_OPT = 8,        /* optimizer step */
  PIPESCOPE_WAIT = 9,       /* the rank waits for a peer */
  PIPESCOPE_OVERLAP_F_B = 13, /* a forward and a backward run together (pipescope_overlap) */
  /* Data-parallel communication, recorded as blocks (stage: the stage,
   * micro-batch -1): FSDP's actions as PyTorch names them, and the
   * gradient reduction across replicas at a step's end.  Added to version
   * 1: an older library refuses them (the call returns -1). */
  PIPESCOPE_UNSHARD = 14,
  PIPESCOPE_RESHARD = 15,
  PIPESCOPE_REDUCE_GRAD = 16,
  PIPESCOPE_WAIT_REDUCE_GRAD = 17,
  /* What the host did between blocks (trace format 1.6), recorded as
   * blocks (stage -1, micro-batch -1; HOST_LOSS: the micro-batch where
   * known): neither work nor bubble, they say where a gap went.  Added to
   * version 1: an older library refuses them (the call returns -1). */
  PIPESCOPE_GC = 18,             /* the garbage collector paused the thread */
  PIPESCOPE_HOST_SCHEDULE = 19,  /* the schedule's own code between actions */
  PIPESCOPE_HOST_LOSS = 20,      /* the loss function, outside a block */
  PIPESCOPE_HOST_DATA = 21,      /* data loading, splitting a batch */
  PIPESCOPE_HOST_ZERO_GRAD = 22, /* zero_grad, gradient bookkeeping between steps */
  /* A launch an idle device waited for (trace format 1.8): written by the
   * probe's CUPTI collector only; the calls here refuse it (-1).  Named so
   * that a reader of the trace knows the number. */
  PIPESCOPE_LAUNCH = 23,
  /* The loss computation inside the schedule's loss call (trace format
   * 1.9): the last stage's work, with its stage and micro-batch.  Added to
   * version 1: an older library refuses it (-1). */
  PIPESCOPE_LOSS_BLOCK = 24,
};

/* Counter kinds. */
enum {
  PIPESCOPE_LOSS = 0,             /* the step's loss (last stage) */
  PIPESCOPE_ACTIVATION_BYTES = 1, /* activation memory the rank holds */
  PIPESCOPE_DEVICE_BYTES = 2,     /* device memory in use */
  PIPESCOPE_INFLIGHT = 3,         /* micro-batches whose activations the rank holds */
  /* Collectives the caller saw inside its blocks (tensor-parallel
   * all-reduce, all-gather, reduce-scatter): one value of each a step,
   * that step's total, at the step's end.  Added to version 1. */
  PIPESCOPE_COLLECTIVE_CALLS = 4,
  PIPESCOPE_COLLECTIVE_BYTES = 5,
  /* Cumulative nanoseconds of the thread that records the rank's blocks,
   * sampled at block edges (trace format 1.6): the run-queue delay
   * (runnable, not running; /proc/thread-self/schedstat's second field)
   * and the time the caller's own recording took.  Added to version 1. */
  PIPESCOPE_RUN_DELAY_NS = 6,
  PIPESCOPE_PROBE_SELF_NS = 7,
  /* The same thread's time on a CPU (schedstat's first field), sampled
   * with the run delay (trace format 1.7).  Added to version 1. */
  PIPESCOPE_ON_CPU_NS = 8,
  /* The process's part of the step's loss where the framework sums it over
   * micro-batches and replicas (trace format 1.9): the sum of its
   * micro-batches' losses; the job's loss is the sum over replicas.
   * PIPESCOPE_LOSS is a mean, and the job's loss the mean over replicas.
   * Added to version 1. */
  PIPESCOPE_LOSS_PART = 9,
};

typedef struct pipescope_rank pipescope_rank;

/* PIPESCOPE_API_VERSION of the loaded library. */
PIPESCOPE_API int      pipescope_api_version (void);
/* CLOCK_MONOTONIC, nanoseconds: the clock of every time below. */
PIPESCOPE_API int64_t  pipescope_now_ns (void);

/* Opens rank `rank` of a job of n_ranks processes named job (NULL or "":
 * "<runtime>-<pid>", a job of this process alone).  The rank registers as
 * "<job>.r<rank>" in the job registry (rank 0 too, when a collector such
 * as `pipescope-cli profile` serves the job; see docs/foreign-api.md) and
 * serves its live stream on a Unix socket, on TCP too when listen is
 * "HOST:PORT".  trace_path, when not NULL, is written as the rank's trace
 * file.  runtime names the caller ("pytorch").  On failure NULL, and one
 * line in err (err_size bytes, may be 0); the job runs on unrecorded. */
PIPESCOPE_API pipescope_rank *pipescope_rank_open (const char *job, int rank, int n_ranks, const char *runtime,
                                     const char *trace_path, const char *listen, char *err,
                                     size_t err_size);
/* With device activity, the blocks still waiting go out and the collector
 * stops; then the final drain (everything recorded reaches the file and
 * viewers), closes the file, unregisters.  Returns 0, or -1 if the trace file could not be
 * written whole (the reason in err). */
PIPESCOPE_API int      pipescope_rank_close (pipescope_rank *r, char *err, size_t err_size);

/* The run's description: the schedule's name (pipescope's or the
 * runtime's), the backend ("cpu", "cuda"), P ranks, M micro-batches, V
 * stages per rank, a one-line model description, the command line.  Once,
 * before the first block; a later one replaces it for new viewers. */
PIPESCOPE_API int      pipescope_describe (pipescope_rank *r, const char *schedule, const char *backend,
                             int n_ranks, int n_microbatches, int n_virtual, const char *model,
                             const char *cmdline);
/* The plan of rank `rank` (usually this rank's), as the order the runtime
 * will run: n actions, 6 integers each (kind, stage, micro-batch, and for
 * PIPESCOPE_OVERLAP_F_B the backward half's kind, stage, micro-batch, else
 * -1, -1, -1).  kind is F, B, I, W, OVERLAP_F_B, or one of FSDP's
 * actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD: a plan from
 * PyTorch's pipeline_order_with_comms; micro-batch -1).  A collector
 * simulates it with the costs it measures. */
PIPESCOPE_API int      pipescope_plan (pipescope_rank *r, int rank, size_t n, const int32_t *actions);

/* A block of work (F, B, I, W, OPT) or of data-parallel communication
 * (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD) from start_ns to
 * end_ns. */
PIPESCOPE_API int      pipescope_block (pipescope_rank *r, int kind, int stage, int microbatch, int step,
                          int64_t start_ns, int64_t end_ns);
/* An overlapped forward and backward (DualPipe's OVERLAP_F_B): both
 * halves' stage and micro-batch; the backward half's kind (B or I). */
PIPESCOPE_API int      pipescope_overlap (pipescope_rank *r, int f_stage, int f_microbatch, int b_kind,
                            int b_stage, int b_microbatch, int step, int64_t start_ns,
                            int64_t end_ns);
/* The same as pipescope_block, timed here: begin now, end now.  Begins
 * nest per thread (at most 16 deep); an end without a begin is ignored. */
PIPESCOPE_API int      pipescope_begin (pipescope_rank *r, int kind, int stage, int microbatch, int step);
PIPESCOPE_API int      pipescope_end (pipescope_rank *r);
/* A transfer (SEND_F, RECV_F, SEND_B, RECV_B) of bytes with rank peer. */
PIPESCOPE_API int      pipescope_transfer (pipescope_rank *r, int kind, int stage, int microbatch, int peer,
                             uint64_t bytes, int step, int64_t start_ns, int64_t end_ns);
/* The rank waited for peer (-1: unknown) before stage's micro-batch. */
PIPESCOPE_API int      pipescope_wait (pipescope_rank *r, int stage, int microbatch, int peer, int step,
                         int64_t start_ns, int64_t end_ns);
/* A step begins (phase 0) or ends (phase 1) at time_ns.  Queued: the
 * drain writes it after the spans recorded before it. */
PIPESCOPE_API int      pipescope_step (pipescope_rank *r, int step, int phase, int64_t time_ns);
/* A counter's value at time_ns. */
PIPESCOPE_API int      pipescope_counter (pipescope_rank *r, int kind, double value, int step, int64_t time_ns);
/* Where this rank runs (its host name; the pid is the caller's). */
PIPESCOPE_API int      pipescope_rank_info (pipescope_rank *r, const char *host);

/* The process's place on the job's mesh (trace format 1.4), for a job
 * whose pipeline ranks are each run by several processes (data-parallel
 * replicas, tensor ranks): process is its global rank, coord and size its
 * coordinates and the mesh's sizes in the order pp, dp, tp, cp, ep (size
 * 1 where the job has no such dimension; coord[0] is the rank given at
 * open).  Right after pipescope_rank_open (and pipescope_rank_info),
 * before the first record: writes the PROCESS frame to the file and the
 * live stream, tags every later frame of this rank with the process, and
 * registers the rank again as "<job>.r<rank>.p<process>".  Returns 0, or
 * -1 on a bad argument (a coordinate outside its size, coord[0] not the
 * rank, process outside [0, 65535)) or a second call: recording goes on
 * untagged (or as first placed).  Added to version 1 without changing any
 * call above: look it up by name. */
PIPESCOPE_API int      pipescope_rank_place (pipescope_rank *r, int process, const int32_t coord[5],
                                             const int32_t size[5]);
/* A process whose place on the job's mesh could not be read (its
 * groups say none): its global rank alone, in a PROCESS frame flagged
 * "place not read" (coord: its pipeline rank, dp 0).  Two such processes
 * of one pipeline rank never collide: the merge numbers them as replicas
 * in order of global rank, and every view says the place was not read.
 * Returns as pipescope_rank_place does.  Added to version 1 without
 * changing any call above: look it up by name. */
PIPESCOPE_API int      pipescope_rank_unplaced (pipescope_rank *r, int process);

/* What this rank is doing now (trace format 1.10, an OPEN frame to the
 * file and the live stream): the action it began at start_ns and has not
 * ended (kind a span kind, -1 for none), with its step, stage,
 * micro-batch and peer (-1: none; with kind -1, start_ns is when the
 * last action ended), and where the training thread is
 * ("train.py:88 forward", or NULL).  The caller's own thread calls it (a
 * heartbeat, about once a second, and when the action changes), never the
 * training thread: it writes, flushes and may block on a slow disk.
 * closed 1: the rank is closing (nothing of it stays open).  Returns 0, or
 * -1 (NULL rank, a bad kind, a failed write).  Added to version 1
 * without changing any call above: look it up by name. */
PIPESCOPE_API int      pipescope_open_action (pipescope_rank *r, int kind, int stage, int microbatch,
                                              int step, int peer, int64_t start_ns, const char *where,
                                              int closed);

/* Records dropped so far (rings full, or step markers past a queue of
 * 256 while the drain is stuck); 0 for NULL. */
PIPESCOPE_API uint64_t pipescope_dropped (pipescope_rank *r);

/* Many records in one call, for a caller whose calls cost more than the
 * recording does (Python through ctypes: converting seven 64-bit arguments
 * takes microseconds; a record takes tens of nanoseconds).  Added to
 * version 1 without changing any call above: look it up by name.
 *
 * records holds n records of PIPESCOPE_RECORD_FIELDS int64_t each, in this
 * order: kind, stage, microbatch, step, start_ns, end_ns, peer, bytes.  A
 * block kind (F, B, I, W, OPT) is recorded as pipescope_block records it
 * (peer and bytes ignored), a data-parallel one (UNSHARD, ...) likewise
 * but with its bytes, a transfer kind as pipescope_transfer, WAIT as
 * pipescope_wait (bytes ignored), and PIPESCOPE_STEP_BEGIN / _END as
 * pipescope_step records phase 0 / 1 of step at start_ns (the other fields
 * ignored), after the records before it in the batch, a host kind (GC,
 * HOST_*) as pipescope_block (GC: its bytes field, below 2^32, is the span's
 * stream, the thread that collected: 0 the rank's own, else another
 * thread's native id, with bit 31 where the interpreter has no GIL; trace
 * format 1.8, pp-event.h), and PIPESCOPE_COUNTER_RECORD as
 * pipescope_counter of (stage, bytes, step, start_ns).  Returns how many
 * were not recorded: a kind this call does not take (OVERLAP_F_B has its
 * own), a stage, step or peer outside int, negative bytes, an end before
 * its start, or full rings and marker queue (those also counted in
 * pipescope_dropped); n for a NULL rank. */
#define PIPESCOPE_RECORD_FIELDS 8
#define PIPESCOPE_STEP_BEGIN    64   /* pipescope_records only: not a span kind */
#define PIPESCOPE_STEP_END      65
/* pipescope_records only: a counter (the record's stage field: its kind,
 * PIPESCOPE_LOSS ...) of the integer value in the bytes field at start_ns
 * in step; for the cumulative block-edge counters, a batch's samples cost
 * no call of their own.  Added to version 1 (an older library refuses the
 * record: counted as not recorded). */
#define PIPESCOPE_COUNTER_RECORD 66
PIPESCOPE_API size_t   pipescope_records (pipescope_rank *r, size_t n, const int64_t *records);

/* ---- Device activity: kernels and copies as children of their blocks ----
 *
 * Added to version 1 without changing any call above: a caller looks them
 * up by name (dlsym; hasattr in ctypes) and goes on without them where a
 * library lacks them.  In a library built with CUDA and CUPTI they run
 * CUPTI's collector in this process, which the library opens at run time
 * (libpipescope-cupti.so beside it, or $PIPESCOPE_CUPTI_LIB): the library
 * itself loads where no driver, GPU or CUPTI is.  Where the collector cannot
 * run, start says why and every other call is a no-op (push 0, pop -1) or
 * records as the plain call does (block, overlap): a caller needs no second
 * code path. */

/* Starts collecting the kernels, copies and memsets of this process's GPU
 * work for rank r.  0: collecting (also when already started); 1: not here,
 * the reason in err, one line: no CUPTI part in this build, libcupti
 * missing, no usable GPU or driver, another profiler (nsys, ncu, a PyTorch
 * profiler) holds CUPTI, a collector already runs in the process, or
 * PIPESCOPE_CUPTI=0; -1: r is NULL.  Prints nothing, never aborts.  One
 * collector a process: call it for the rank whose stages launch there. */
PIPESCOPE_API int      pipescope_device_start (pipescope_rank *r, char *err, size_t err_size);
/* Tags the device work the calling thread launches from now until the
 * matching pop as block (kind, stage, microbatch, step): returns the
 * block's id (> 0), for pipescope_device_block; 0 when nothing is tagged
 * (no collector, or CUPTI refused), and then pop does nothing.  Nests per
 * thread (16 deep); pop on the pushing thread.  Work launched by another
 * thread (PyTorch's autograd device threads) is not tagged. */
PIPESCOPE_API uint64_t pipescope_device_push (pipescope_rank *r, int kind, int stage, int microbatch,
                                              int step);
/* 0, or -1 when this thread has no push of r's collector to pop. */
PIPESCOPE_API int      pipescope_device_pop (pipescope_rank *r);
/* The block of push id, as pipescope_block records it, given once its
 * device work has completed (its end event has passed; never before): timed
 * from its first device record's start to its last one's end, on the clock
 * of every time here; start_ns..end_ns (the caller's own GPU times, CUDA
 * events) where it had none, where id is 0 or where no collector runs.  Its
 * kernels, copies and memsets are spans of kind 10, 11, 12 (the trace
 * format's) with the block's rank, stage, micro-batch and step, inside its
 * span: its children; their names precede them.  The block's span goes
 * out once the collector has handed over every record of it: within a
 * flush after this call, at a later device or step call, at close at the
 * latest. */
PIPESCOPE_API int      pipescope_device_block (pipescope_rank *r, uint64_t id, int kind, int stage,
                                               int microbatch, int step, int64_t start_ns,
                                               int64_t end_ns);
/* The same for pipescope_overlap: f_id and b_id the two halves' pushes
 * (either may be 0); the span covers both halves' device work. */
PIPESCOPE_API int      pipescope_device_overlap (pipescope_rank *r, uint64_t f_id, uint64_t b_id,
                                                 int f_stage, int f_microbatch, int b_kind,
                                                 int b_stage, int b_microbatch, int step,
                                                 int64_t start_ns, int64_t end_ns);

/* ---- Spans from a library the job loaded (the NCCL profiler plugin) ------
 *
 * A library that another runtime loads into the job (NCCL loads
 * libnccl-profiler-pipescope.so, docs/nccl-plugin.md) is never handed a
 * rank: it records into the process's rank, the first rank opened in this
 * process and not yet closed (the Python hook's).  Each call takes that
 * rank under a lock that pipescope_rank_close takes before it frees the
 * rank, so a call racing a close records or does nothing, never touches
 * freed memory.  Where no rank is open every call does nothing.  Added to
 * version 1 without changing any call above: look them up by name. */

/* The step the process's rank last began (pipescope_step phase 0, a
 * batch's STEP_BEGIN); 0 before any; -1 where no rank is open. */
PIPESCOPE_API int      pipescope_process_step (void);
/* name, interned for these spans' name_id: the same id (> 0) for the same
 * name, also before a rank opens; 0 for NULL or "", or once the table's
 * PIPESCOPE_PROCESS_NAMES names are taken.  Names are cut to 63 bytes.  A
 * rank writes a name before the first span of its that uses it. */
#define PIPESCOPE_PROCESS_NAMES 256
PIPESCOPE_API uint32_t pipescope_process_name (const char *name);
/* A span of kind (a span kind of the trace format, not OVERLAP_F_B) into
 * the process's rank with every field a span has: name_id from
 * pipescope_process_name or 0, device the GPU (0xffff: none, the host),
 * stream (its meaning is the kind's: docs/nccl-plugin.md says what the
 * plugin's spans carry).  0, or -1 where no rank is open, the span is
 * refused (kind, an end before its start) or dropped (full rings). */
PIPESCOPE_API int      pipescope_process_span (int kind, uint32_t name_id, int stage, int microbatch,
                                               int step, int peer, uint64_t bytes, int device,
                                               uint32_t stream, int64_t start_ns, int64_t end_ns);

#ifdef __cplusplus
}
#endif
