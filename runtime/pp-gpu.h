/* pp-gpu.h — where the ranks of a GPU run live: devices, SM partitions, streams.
 *
 * Built only with CUDA (PP_HAVE_CUDA).  Links libcudart, never libcuda: the
 * driver-API calls (green contexts) are looked up at run time through
 * cudaGetDriverEntryPointByVersion, so a binary loads where no driver is
 * installed and pp_gpu_open then fails with PP_EUNSUPPORTED and a line a user
 * can read ("no CUDA driver", "no CUDA device"); the caller falls back to the
 * CPU backend.
 *
 * Placement of P ranks on G GPUs
 * ------------------------------
 *  - G >= P: rank r runs on GPU r, on its own non-blocking stream, with the
 *    whole GPU ("devices").  Stage transfers are NCCL or peer copies
 *    (the device transport, pp-transport-device.c).  A rank that is a
 *    process of its own opens alone on its GPU (pp_gpu_open_rank).
 *  - G < P: ranks are spread over the GPUs in contiguous groups (ceil(P/G)
 *    per GPU) and each GPU is split between its ranks:
 *      green   — one CUDA green context per rank, each with its own SMs
 *                (cuDevSmResourceSplitByCount: on sm_90 multiples of 8 SMs,
 *                132 SMs -> 4 x 32, the few left over unused).  A rank's
 *                kernels can only run on its SMs, as on its own smaller GPU;
 *                memory and L2 stay shared.
 *      streams — one stream per rank in the device's primary context; the
 *                ranks' kernels share every SM as the hardware schedules them.
 *    PP_GPU_PARTITION_AUTO tries green first and falls back to streams (the
 *    reason is kept in pp_gpu_describe).  Transfers are device-to-device
 *    copies ordered by events.
 *
 * CUPTI
 * -----
 * pp_gpu_open starts the CUPTI collector (when built with CUPTI, given a
 * probe, and asked to) BEFORE any context exists.  When CUPTI cannot trace
 * (no GPU, another profiler such as nsys holds it, PIPESCOPE_CUPTI=0) the run
 * goes on: pp_gpu_cupti returns NULL and pp_gpu_cupti_note says why, once.
 *
 * Threads: pp_gpu_bind makes a rank's context (green or the device's
 * primary one) current on the calling thread; every CUDA call for that rank
 * must be made with it bound.  No GLib.
 */
#pragma once

#include <stdint.h>

#include "pp-kernels-cuda.h"
#include "pp-probe.h"
#include "pp-status.h"

typedef enum {
  PP_GPU_PARTITION_AUTO = 0,   /* green where it works, else streams */
  PP_GPU_PARTITION_GREEN,
  PP_GPU_PARTITION_STREAMS,
  PP_GPU_PARTITION_DEVICES,    /* what open reports when every rank has its own GPU */
} PpGpuPartition;

typedef struct _PpGpu PpGpu;
typedef struct _PpCupti PpCupti;

/* Places n_ranks ranks (see above).  cupti: 1 to start the CUPTI collector
 * into probe (ignored when probe is NULL or CUPTI is not built). */
PpGpu      *pp_gpu_open (int n_ranks, PpGpuPartition want, PpProbe *probe, int cupti,
                         PpError *err);
/* One rank of a job whose ranks are processes (the nccl transport): rank
 * alone, with the whole of GPU `device`; the other ranks are elsewhere
 * (calls for them are not allowed). */
PpGpu      *pp_gpu_open_rank (int n_ranks, int rank, int device, PpProbe *probe, int cupti,
                              PpError *err);
/* Synchronizes every stream, frees what open made, stops CUPTI.  NULL ok. */
void        pp_gpu_close (PpGpu *g);

/* One line: "1 x NVIDIA H200 (132 SMs): 4 green-context partitions of 32 SMs". */
const char *pp_gpu_describe (const PpGpu *g);
PpGpuPartition pp_gpu_partition (const PpGpu *g);
int         pp_gpu_n_devices (const PpGpu *g);

PpStatus    pp_gpu_bind (PpGpu *g, int rank, PpError *err);
int         pp_gpu_device (const PpGpu *g, int rank);
int         pp_gpu_sms (const PpGpu *g, int rank);       /* SMs the rank may use */
void       *pp_gpu_stream (const PpGpu *g, int rank);    /* a cudaStream_t */
PpCublasLt *pp_gpu_lt (const PpGpu *g, int rank);        /* the rank's cuBLASLt context */

/* Records the rank's reference event and waits for it (the stream must be
 * idle), noting pp_probe_now_ns then: later events of the rank convert to
 * CLOCK_MONOTONIC through it.  Once per step, at its start. */
PpStatus    pp_gpu_calibrate (PpGpu *g, int rank, PpError *err);
/* CLOCK_MONOTONIC ns of a completed event (a cudaEvent_t) recorded on the
 * rank's stream after its calibration; 0 if CUDA cannot tell. */
int64_t     pp_gpu_event_ns (PpGpu *g, int rank, void *event);

/* The CUPTI collector, or NULL (then the note says why). */
PpCupti    *pp_gpu_cupti (const PpGpu *g);
const char *pp_gpu_cupti_note (const PpGpu *g);

/* Whether NCCL can be used here (built with it, libnccl.so.2 loads):
 * stage transfers between the ranks' GPUs are then the device transport's
 * NCCL edges (pp-transport-device.c). */
int         pp_gpu_have_nccl (void);

/* "cuda error text" for a cudaError_t value, for messages. */
const char *pp_gpu_error_string (int cuda_error);
