/* pp-run.h — trains the bundled network under any valid schedule.
 *
 * P ranks run as threads in this process, or (cfg.transport an MPI one)
 * this process runs one rank of a job started by mpirun; rank r executes
 * its actions of the schedule in order.  The transport (pp-transport.h)
 * hands activations forward and gradients backward: the local one through
 * bounded per-edge queues of pointers (no copy), the MPI one as messages.
 * The gradients of all micro-batches are summed, then one AdamW step: a step
 * is the same update as training on the whole batch with the same
 * micro-batch split.  Every action becomes a probe span (rank, stage,
 * micro-batch, kind, step); the time a rank waits for a peer is a WAIT span;
 * loss and activation memory are counters.
 *
 * One schedule walker runs over a compute backend (pp-run-private.h): with
 * cfg.backend == PP_BACKEND_CUDA (builds with CUDA) the same walker runs on
 * GPUs: each rank queues its actions on its own stream (its own GPU, or its
 * green-context SM partition of a shared one), a stage boundary is the
 * transport's device half (a device-to-device or peer copy, or NCCL; under
 * mpirun NCCL between processes, one GPU each) on the consumer's stream
 * ordered after the producer's event, so the host threads only wait for
 * each other's *launches* and the GPUs run the schedule asynchronously.  Spans carry GPU
 * times: from CUPTI (each block's first kernel start to last kernel end,
 * kernels and copies as child spans) or, where CUPTI cannot trace, from CUDA
 * events; they reach the probe once the step has completed.  Transfers are
 * RECV_F / RECV_B spans; the GPU idling before a transfer is a WAIT span.
 *
 * Schedule stages map to model parts along their chains: on one chain (every
 * schedule but DualPipe) stage s runs part s; DualPipe's second chain holds a
 * second copy of every part, whose gradients are summed with the first
 * copy's before the optimizer step, so both copies stay equal.
 */
#pragma once

#include <signal.h>
#include <stdint.h>

#include "pp-model.h"
#include "pp-probe.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-status.h"
#include "pp-trace.h"
#include "pp-transport.h"

enum { PP_BACKEND_CPU = 0, PP_BACKEND_CUDA = 1 };
/* How ranks share a GPU when there are fewer GPUs than ranks (pp-gpu.h). */
enum { PP_RUN_GPU_AUTO = 0, PP_RUN_GPU_GREEN = 1, PP_RUN_GPU_STREAMS = 2 };
/* Stage boundaries on the CUDA backend: auto = NCCL send/receive between
 * ranks on different GPUs (when built with NCCL), copies ordered by events
 * on one GPU; copy = always copies (peer copies across GPUs); nccl = NCCL
 * for every boundary between two ranks, also on one GPU (a communicator
 * that sends to itself). */
enum { PP_RUN_TRANSPORT_AUTO = 0, PP_RUN_TRANSPORT_COPY = 1, PP_RUN_TRANSPORT_NCCL = 2 };
/* GEMM compute type of the CUDA backend; weights stay fp32. */
enum { PP_RUN_COMPUTE_TF32 = 0, PP_RUN_COMPUTE_FP32 = 1, PP_RUN_COMPUTE_BF16 = 2 };

/* Whether this build has the CUDA backend. */
int        pp_run_have_cuda (void);

typedef struct {
  const PpSchedule *schedule;     /* borrowed; validated by pp_run_new */
  PpModelConfig     model;
  const char       *partition;    /* NULL/"auto", or blocks per part "7,8,8,7" */
  int               batch;        /* rows per step; a multiple of the micro-batches */
  float             lr;           /* 0: 1e-3 */
  float             weight_decay; /* AdamW's decoupled decay */
  uint64_t          data_seed;
  int               recompute;    /* drop activations inside a part, recompute in backward */
  int               pin_threads;  /* pin rank r to CPU r % n_cpus */
  int               exact_grads;  /* sum micro-batch gradients in double (pp-model.h):
                                   * bit-identical steps whatever the schedule's order */
  int               backend;      /* PP_BACKEND_CPU (0) or PP_BACKEND_CUDA */
  int               gpu_partition;/* PP_RUN_GPU_* (CUDA backend): 0 auto */
  int               compute;      /* PP_RUN_COMPUTE_* (CUDA backend): 0 TF32 */
  int               no_cupti;     /* CUDA backend: time blocks with CUDA events only */
  int               gpu_transport;/* PP_RUN_TRANSPORT_*: 0 auto */
  PpProbe          *probe;        /* NULL: nothing recorded (this process's ranks only) */
  PpTransport      *transport;    /* borrowed; NULL: every rank a thread here (local) */
  volatile sig_atomic_t *stop;    /* NULL, or set to 1 (e.g. from a signal handler) to stop */
  /* A straggler on purpose (issue 38): pipeline rank slow_rank's compute
   * takes slow_factor times as long (CPU backend: after each action's
   * compute the thread sleeps (slow_factor - 1) times its length, inside
   * the block, as a slower device would take); slow_factor <= 1: none. */
  int               slow_rank;
  double            slow_factor;
  /* What each rank of this process is doing now (issue 37; trace format
   * 1.10's OPEN frames; docs/stuck.md): the rank's thread stores its open
   * action (a block, a wait for a peer, the optimizer; a few stores), and a
   * thread of the run's own calls open_sink with each rank's when it
   * changes and at least once a second (the heartbeat), never from a rank's
   * thread.  A nonzero return stops the heartbeat.  NULL: none. */
  int             (*open_sink) (void *user, const PpTraceOpen *o);
  void             *open_user;
  /* A stuck rank on purpose (issue 37): with hang, pipeline rank hang_rank
   * sleeps inside its first forward of step hang_step (from 0) until the
   * run is stopped (*stop). */
  int               hang;
  int               hang_rank, hang_step;
} PpRunConfig;

typedef struct {
  int     step;                   /* from 0 */
  double  loss;                   /* mean loss over the batch */
  int64_t start_ns, end_ns;       /* CLOCK_MONOTONIC */
  double  seconds;
  double  samples_per_s;
} PpStepStats;

typedef struct _PpRun PpRun;

/* Builds the parts (one-line errors for an impossible request: fewer blocks
 * than parts, a batch that the micro-batches do not divide, ...) and starts
 * the rank threads, idle until the first step. */
PpRun     *pp_run_new (const PpRunConfig *cfg, PpError *err);

/* The cores this process may run on (a container's or taskset's share),
 * or the machine's where that cannot be asked. */
long       pp_run_usable_cores (void);

/* Runs one training step on every rank and waits for it.  PP_EINVAL with
 * "stopped" if *stop was set (the step is abandoned cleanly). */
PpStatus   pp_run_step (PpRun *run, PpStepStats *stats, PpError *err);

/* Mean measured time of F, B (or I + W), W per stage and of a transfer over
 * (every process's stages under MPI: reports are shared at each step's end)
 * the steps run so far but the first (warm-up) one, once there are two, as a
 * cost model for the simulator, in nanoseconds (caller frees). */
PpCostModel *pp_run_measured_costs (const PpRun *run);

/* Per rank over the last step: time computing and time waiting, ns. */
void       pp_run_rank_times (const PpRun *run, int rank, int64_t *busy_ns, int64_t *wait_ns,
                              int64_t *span_ns);

/* Start of the rank's first action and end of its last in the last step
 * (CLOCK_MONOTONIC ns; GPU times on the CUDA backend), -1 before any.  The
 * step's makespan is the latest end minus the earliest start over the ranks:
 * what the simulator's per-rank bubble is a fraction of. */
void       pp_run_rank_window (const PpRun *run, int rank, int64_t *first_ns, int64_t *last_ns);

/* The model's parameters in the order of the whole model as one part (for
 * the correctness test); out has pp_run_n_params floats.  Over MPI every
 * process gets every part's (a collective: all processes call it). */
size_t     pp_run_n_params (const PpRun *run);
PpStatus   pp_run_copy_params (const PpRun *run, float *out, PpError *err);

/* CUDA backend: where the ranks run and how blocks are timed, one line
 * each ("1 x NVIDIA H200 (132 SMs): 4 green-context partitions of 32 SMs",
 * "CUPTI traces kernels and copies"); "" on the CPU backend. */
const char *pp_run_device_note (const PpRun *run);
const char *pp_run_timing_note (const PpRun *run);
/* Hands every completed device record (CUPTI) to the probe now; nothing on
 * the CPU backend or without CUPTI. */
void       pp_run_flush_device_records (PpRun *run);
/* The name of a span's name_id (a kernel's, "memcpy DtoD", ...), or NULL:
 * ids run 1, 2, 3, ... in order of first use, so a trace writer writes
 * every id from the last it wrote until this returns NULL. */
const char *pp_run_span_name (const PpRun *run, uint32_t id);
/* Device records CUPTI dropped so far (its buffers were full); 0 without
 * CUPTI. */
uint64_t   pp_run_cupti_dropped (const PpRun *run);
/* SMs rank may use (CUDA backend), 0 on the CPU backend. */
int        pp_run_rank_sms (const PpRun *run, int rank);

/* This process's clock (pp_probe_now_ns) against rank 0's: rank 0's time =
 * this process's + *offset_ns, measured over the transport with the least
 * round trip *rtt_ns; 0 for ranks that are threads of one process.
 * Measured at pp_run_new and again every 2 s or so (at a step's end); the
 * return value counts the measurements, so a caller sees a new one. */
int        pp_run_clock_offset (const PpRun *run, int64_t *offset_ns, int64_t *rtt_ns);

/* Blocks per part chosen by the partition, for reports. */
const int *pp_run_blocks_per_part (const PpRun *run, int *n_parts);

/* Stops the heartbeat of cfg.open_sink: each rank's last frame says it
 * closed, unless the run was stopped (a stuck job being ended keeps what
 * it was in).  Before the sink's writers close; pp_run_free does it too. */
void       pp_run_end_heartbeat (PpRun *run);

void       pp_run_free (PpRun *run);
