/* pp-transport.h — how a stage boundary's data gets from the rank that
 * produces it to the rank that consumes it: one small interface, a struct
 * of functions chosen at run time (as libdex picks its backends).
 *
 *   local  every rank is a thread of this process: the consumer reads the
 *          producer's buffer in place once it is published (no copy);
 *   mpi    one rank per process (mpirun): non-blocking point-to-point,
 *          each message tagged by (producer stage, direction, micro-batch)
 *          so that any schedule's order of sends and receives matches;
 *   device (CUDA builds) every rank a thread of this process, on GPUs: the
 *          local hand-off orders the launches, the data moves as a device
 *          (or peer) copy or an NCCL send/receive on the consumer's stream;
 *   nccl   (CUDA, NCCL and MPI builds) one rank per process, one GPU each:
 *          ncclSend/ncclRecv between the ranks' GPUs, everything else MPI.
 *
 * The executor (pp-run.c) calls these and nothing else to move data between
 * stages; adding a transport touches no schedule code.  A producer's buffer
 * passed to publish stays untouched until step_end; what acquire returns
 * stays valid until step_end.  Directions: grad 0 is a forward output
 * (stage -> stage_next), grad 1 an input gradient (stage -> stage_prev).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-schedule.h"
#include "pp-status.h"

typedef struct PpTransport PpTransport;

/* Polled while acquire or step_end waits: true once the step is abandoned
 * (a stop, another rank's failure); the wait then ends with PP_EIO and no
 * message. */
typedef bool (*PpTransportAbandoned) (void *user);

typedef struct {
  const char *name;
  /* Once, before the first step: the schedule (borrowed for the transport's
   * life) and, per stage that lives in this process, the floats of one
   * micro-batch's input (in_floats) and output (out_floats); 0 elsewhere. */
  PpStatus (*setup)      (PpTransport *t, const PpSchedule *s, const size_t *in_floats,
                          const size_t *out_floats, PpTransportAbandoned abandoned, void *user,
                          PpError *err);
  /* A new step: nothing is published yet (receives may be posted). */
  PpStatus (*step_begin) (PpTransport *t, PpError *err);
  /* stage's result for mb is ready in data (n floats; NULL, 0 where the
   * data moves some other way, as on the GPU, and only the order counts). */
  void     (*publish)    (PpTransport *t, int stage, int grad, int mb, const float *data, size_t n);
  /* Waits until stage's result for mb is there for its consumer in this
   * process, and points *data at it.  PP_EINVAL with a message for a wait
   * that can never end (the consumer's own rank has not produced it yet). */
  PpStatus (*acquire)    (PpTransport *t, int stage, int grad, int mb, const float **data,
                          PpError *err);
  /* Wakes every acquire now (the step is being abandoned). */
  void     (*interrupt)  (PpTransport *t);
  /* The step is over in this process: every send has gone out. */
  PpStatus (*step_end)   (PpTransport *t, PpError *err);
  /* Sums values[0..n) over the processes, in place (every process calls
   * it at the same point; the local transport has one process: nothing). */
  PpStatus (*sum)        (PpTransport *t, double *values, size_t n, PpError *err);
  /* Blocking bytes to or from the process of rank (DualPipe's gradient
   * copies); both ends call in the same order. */
  PpStatus (*send_bytes) (PpTransport *t, int rank, const void *buf, size_t n, PpError *err);
  PpStatus (*recv_bytes) (PpTransport *t, int rank, void *buf, size_t n, PpError *err);
  /* This process's clock against rank 0's: *offset_ns such that rank 0's
   * time = this clock (now) + offset, from rounds of ping-pong that keep
   * the one with the least round trip (*rtt_ns), as NTP does.  Every
   * process calls it at the same point; one process: 0. */
  PpStatus (*clock_offset) (PpTransport *t, int64_t (*now) (void), int64_t *offset_ns,
                            int64_t *rtt_ns, PpError *err);
  /* Rank 0 gets every process's n bytes (its own too): all[r] (malloc'd,
   * the caller frees) and sizes[r] for each rank r; the others only send
   * (all, sizes unused).  Every process calls it at the same point. */
  PpStatus (*gather_bytes) (PpTransport *t, const void *buf, size_t n, void **all, size_t *sizes,
                            PpError *err);
  /* Device data (the CUDA backend); NULL on a transport that moves host
   * memory only.  publish_device: stage's result for mb is in d_data (n
   * floats on the producer's GPU, untouched until step_end) once `ready`
   * (a cudaEvent_t recorded on the producer's stream) has completed; the
   * consumer's acquire then returns (with *data unused).  acquire_device,
   * called once acquire has returned PP_OK for the same result: queues on
   * `stream` (the consumer's cudaStream_t, its context current) what
   * orders it after the producer, then `start` (a cudaEvent_t: where the
   * transfer's span begins), then the transfer into d_dst (n floats on the
   * consumer's GPU).  Nothing waits on the host. */
  void     (*publish_device) (PpTransport *t, int stage, int grad, int mb, const float *d_data,
                              size_t n, void *ready);
  PpStatus (*acquire_device) (PpTransport *t, int stage, int grad, int mb, float *d_dst,
                              size_t n, void *stream, void *start, PpError *err);
  /* Optional: a transport that moves device data between this one's
   * processes, one GPU per rank (over mpi: nccl), borrowing this one for
   * everything else; the caller frees it before this one.  Every process
   * calls it at the same point.  NULL with a one-line error where it
   * cannot be made (no NCCL, two ranks for one GPU). */
  PpTransport *(*for_device) (PpTransport *t, PpError *err);
  void     (*free)       (PpTransport *t);
} PpTransportOps;

struct PpTransport {
  const PpTransportOps *ops;
  /* The one rank this process runs, or -1: every rank (threads). */
  int process_rank;
  /* Processes in the job: 1 for the local transport. */
  int n_processes;
  /* The GPU this process's rank runs on (nccl: one GPU per rank), or -1. */
  int device;
};

/* Whether this process runs rank r. */
static inline bool
pp_transport_runs_rank (const PpTransport *t, int r)
{
  return t->process_rank < 0 || t->process_rank == r;
}

/* Every rank a thread of this process. */
PpTransport *pp_transport_new_local (PpError *err);

/* Whether this build has the MPI transport, and whether this process was
 * started by an MPI launcher (mpirun sets its rank in the environment). */
bool         pp_transport_have_mpi (void);
bool         pp_transport_launched_by_mpi (void);
/* Initialises MPI (once per process; MPI_Finalize at pp_transport_free):
 * this process runs rank MPI_COMM_WORLD's rank.  NULL with a one-line error
 * without MPI. */
PpTransport *pp_transport_new_mpi (PpError *err);

/* GPU ranks as processes: stage data through NCCL between the ranks' GPUs
 * (rank r on GPU r's index among its host's ranks), all else over `mpi`
 * (borrowed).  A collective of the job's processes.  NULL with one line
 * (and on every process) where NCCL does not load or a host has more ranks
 * than GPUs.  In the MPI transport's library: reached through the MPI
 * transport's for_device. */
PpTransport *pp_transport_new_nccl (PpTransport *mpi, PpError *err);
/* Whether this build has the nccl transport and libnccl.so.2 loads. */
bool         pp_transport_have_nccl (void);

/* CUDA builds: the device transport over `host` (a local transport, which
 * it borrows: the caller frees both, this one first) for the ranks placed
 * by gpu (a PpGpu, pp-gpu.h).  mode: PP_RUN_TRANSPORT_* of pp-run.h (auto:
 * NCCL between different GPUs where NCCL loads, copies on one GPU).  NULL
 * with a one-line error without CUDA. */
struct _PpGpu;
PpTransport *pp_transport_new_device (PpTransport *host, struct _PpGpu *gpu, int mode,
                                      PpError *err);

static inline void
pp_transport_free (PpTransport *t)
{
  if (t != NULL)
    t->ops->free (t);
}
