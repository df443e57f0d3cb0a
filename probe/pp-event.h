/* pp-event.h — what the probe records: spans of work and counters.
 *
 * One record per block of work on a rank (DESIGN.md, The event model).  Times
 * are CLOCK_MONOTONIC nanoseconds on the recording host; a per-rank clock
 * offset (carried in the trace) aligns hosts.  No GLib here: the probe loads
 * into any process.
 */
#pragma once

#include <stdint.h>

typedef enum {
  PP_SPAN_F = 0,        /* forward */
  PP_SPAN_B,            /* full backward */
  PP_SPAN_I,            /* backward, input gradient */
  PP_SPAN_W,            /* backward, weight gradient */
  PP_SPAN_SEND_F,
  PP_SPAN_RECV_F,
  PP_SPAN_SEND_B,
  PP_SPAN_RECV_B,
  PP_SPAN_OPT,          /* optimizer step */
  PP_SPAN_WAIT,         /* the rank waits for a peer: never work */
  PP_SPAN_KERNEL,       /* device kernel, child of the F/B/I/W that launched it */
  PP_SPAN_MEMCPY,       /* device copy */
  PP_SPAN_MEMSET,
  PP_SPAN_OVERLAP_F_B,  /* a forward and a backward run together (DualPipe) */
  /* Data-parallel communication (format 1.5): FSDP's actions as PyTorch's
   * schedules run them, and the gradient reduction across replicas at a
   * step's end.  Busy time of its own: never bubble, never compute.  stage
   * is the stage, microbatch -1, bytes the bytes moved where known. */
  PP_SPAN_UNSHARD,          /* all-gather a stage's parameters */
  PP_SPAN_RESHARD,          /* free them again */
  PP_SPAN_REDUCE_GRAD,      /* reduce(-scatter) the stage's gradients across replicas */
  PP_SPAN_WAIT_REDUCE_GRAD, /* wait for that reduction to finish */
  /* What the rank's host did between blocks (format 1.6): never work,
   * never bubble of their own; the analysis charges the part of them that
   * falls in a rank's idle time to the runtime share of the bubble
   * (pp-why.h, runtime parts).  stage -1, microbatch -1 (HOST_LOSS: the
   * micro-batch where known). */
  PP_SPAN_GC,               /* the Python garbage collector paused the rank's thread */
  PP_SPAN_HOST_SCHEDULE,    /* the schedule's own code between actions */
  PP_SPAN_HOST_LOSS,        /* the loss function, outside a block */
  PP_SPAN_HOST_DATA,        /* data loading, splitting a batch into micro-batches */
  PP_SPAN_HOST_ZERO_GRAD,   /* zero_grad and gradient bookkeeping between steps */
  /* A launch the device waited for (format 1.8): the host API call
   * (cudaLaunchKernel, cudaMemcpyAsync, ...) that queued device work onto
   * an idle device, [call start, call end] on the host, device and stream
   * of its work; the CUPTI collector writes one only where the device was
   * idle before the call returned (pp-cupti.h, "Launches").  Neither work
   * nor host work: runtime's launch_gap (pp-why-runtime.h). */
  PP_SPAN_LAUNCH,
  /* The loss computation (format 1.9): what runs inside the schedule's
   * loss call on the last stage (torchtitan's chunked loss runs the
   * lm_head and the cross-entropy, forward and backward, there).  Work of
   * the last stage: busy, counted in its cost and in the plan.  stage: the
   * stage, microbatch: the micro-batch.  Host time around the call that is
   * not inside it stays HOST_LOSS. */
  PP_SPAN_LOSS,
  PP_N_SPAN_KINDS
} PpSpanKind;

/* A GC span's stream (format 1.8; host spans have no device stream) says
 * whose collection it was.  0: the rank's training thread collected (it
 * paused that thread; every GC span before 1.8).  Otherwise another thread
 * of the process collected: its native thread id (Linux's tid) in the low
 * bits, and PP_GC_STOPS_WORLD where the interpreter has no GIL (a
 * free-threaded CPython, whose collection stops every thread).  Such a
 * pause held the training thread only where it wanted the interpreter,
 * which no record says: the analysis charges it by its own rule (pp-why-
 * runtime.h, rule 1). */
#define PP_GC_STOPS_WORLD  0x80000000u
#define PP_GC_THREAD_MASK  0x7fffffffu

typedef enum {
  PP_COUNTER_LOSS = 0,         /* value: loss of the step (last stage) */
  PP_COUNTER_ACTIVATION_BYTES, /* activation memory held by the rank */
  PP_COUNTER_DEVICE_BYTES,     /* device memory in use */
  PP_COUNTER_INFLIGHT,         /* micro-batches whose activations the rank holds */
  /* Collectives inside the step's blocks (tensor-parallel all-reduce, ...)
   * that the hook saw: one value a step a process, that step's total
   * (format 1.5). */
  PP_COUNTER_COLLECTIVE_CALLS,
  PP_COUNTER_COLLECTIVE_BYTES,
  /* Sampled at block edges on the rank's recording thread (format 1.6):
   * cumulative nanoseconds, so the difference of two samples is what
   * happened between them.  RUN_DELAY: the time the thread was runnable
   * but not running (the kernel's run-queue delay, the second field of
   * /proc/thread-self/schedstat).  PROBE_SELF: the time pipescope's own
   * recording took on that thread (the hook's cost). */
  PP_COUNTER_RUN_DELAY_NS,
  PP_COUNTER_PROBE_SELF_NS,
  /* Sampled with RUN_DELAY (format 1.7): the time the thread ran on a
   * CPU, the first field of /proc/thread-self/schedstat; across a gap,
   * host work whether named or not (runtime's host_other, pp-why.h). */
  PP_COUNTER_ON_CPU_NS,
  /* The process's part of the step's loss where the framework sums it
   * (format 1.9): the sum of its micro-batches' losses, each already
   * divided by the job's global count (torchtitan); the job's loss of the
   * step is the sum of these over the replicas.  PP_COUNTER_LOSS, by
   * contrast, is the process's mean over its micro-batches, and the job's
   * loss is the mean of those over the replicas (megatron-core, PyTorch's
   * schedules). */
  PP_COUNTER_LOSS_PART,
  PP_N_COUNTER_KINDS
} PpCounterKind;

/* A span as the recording API takes it and the reader gives it back. */
typedef struct {
  int64_t  start_ns;
  int64_t  end_ns;
  uint64_t bytes;        /* transfers and copies; 0 otherwise */
  int32_t  rank;
  int32_t  stage;        /* -1 where none */
  int32_t  microbatch;   /* -1 where none */
  int32_t  step;         /* training step, from 0 */
  uint32_t name_id;      /* interned short name (kernel name, ...); 0 = none */
  uint16_t kind;         /* PpSpanKind */
  uint16_t device;       /* GPU index; 0xffff = host */
  uint32_t stream;       /* device stream; 0 = none */
  int32_t  peer_rank;    /* SEND/RECV/WAIT: the other rank; -1 where none */
  /* OVERLAP_F_B: the backward half (stage, micro-batch, kind B or I) run
   * together with the forward half in stage/microbatch (format 1.2).
   * sub_kind 0 (F, never a backward half) means none is known. */
  int32_t  sub_stage;
  int32_t  sub_microbatch;
  uint16_t sub_kind;
} PpSpan;

/* Whether a span carries an overlapped pair's backward half. */
static inline int
pp_span_has_sub (const PpSpan *s)
{
  return s->kind == PP_SPAN_OVERLAP_F_B && (s->sub_kind == PP_SPAN_B || s->sub_kind == PP_SPAN_I);
}

/* Whether a GC span is a collection another thread of the process ran
 * (its stream non-zero: PP_GC_STOPS_WORLD above). */
static inline int
pp_span_gc_other_thread (const PpSpan *s)
{
  return s->kind == PP_SPAN_GC && s->stream != 0;
}

typedef struct {
  int64_t  time_ns;
  double   value;
  int32_t  rank;
  int32_t  step;
  uint16_t kind;         /* PpCounterKind */
} PpCounter;

const char *pp_span_kind_name (PpSpanKind kind);      /* "F", "SEND_F", "WAIT", "KERNEL", ... */

/* Is a span of this kind a rank's work (F, B, I, W, OVERLAP_F_B, OPT, and
 * the data-parallel communication UNSHARD ... WAIT_REDUCE_GRAD, and the
 * loss computation LOSS (format 1.9): busy, not
 * compute), as opposed to pipeline transfers, waiting, or device detail
 * under a block?  What is not work between a rank's first and last work is
 * its bubble. */
int         pp_span_kind_is_work (int kind);
/* A schedule's block: F, B, I, W or OVERLAP_F_B (work without OPT).  A
 * step's compute window runs from its first block to its last. */
int         pp_span_kind_is_block (int kind);
/* Data-parallel communication: UNSHARD, RESHARD, REDUCE_GRAD,
 * WAIT_REDUCE_GRAD (format 1.5). */
int         pp_span_kind_is_dp_comm (int kind);
/* What the host did between blocks: GC, HOST_SCHEDULE, HOST_LOSS,
 * HOST_DATA, HOST_ZERO_GRAD (format 1.6). */
int         pp_span_kind_is_host (int kind);
const char *pp_counter_kind_name (PpCounterKind kind); /* "loss", ... */
