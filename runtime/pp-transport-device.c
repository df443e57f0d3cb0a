/* pp-transport-device.c — stage boundaries between GPU ranks that are
 * threads of this process (pp-transport.h, "device").
 *
 * The host side is the local transport's (borrowed): a producer publishes
 * once its work is *launched*, so consumers wait for launches, never for
 * GPUs.  The data moves on the consumer's stream, ordered after the
 * producer's event:
 *  - one GPU (green-context partitions, or streams): a device-to-device
 *    copy; across GPUs a peer copy;
 *  - an NCCL edge where the mode asks for one (auto: between different
 *    GPUs, when NCCL loads; nccl: every boundary between two ranks, also
 *    on one GPU, through a communicator that sends to itself, which NCCL
 *    allows).  An edge is a directed stage boundary from rank src to rank
 *    dst with its own communicator pair (ncclCommInitAll over the two
 *    devices) and a stream on src's device for the sends.  The CONSUMER's
 *    thread queues both halves inside one ncclGroupStart/End, so the sends
 *    and receives of an edge are posted in one order by one thread and
 *    always match, whatever order the schedule produces them in.
 */
#include "pp-transport.h"

#ifdef PP_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "pp-gpu.h"
#include "pp-nccl.h"
#include "pp-run.h"

/* A directed stage edge through NCCL (see above). */
typedef struct {
  int          src, dst;      /* ranks */
  int          self;          /* one device: one communicator sending to itself */
#ifdef PP_HAVE_NCCL
  ncclComm_t   comm[2];       /* [0] on src's device, [1] on dst's (== [0] if self) */
#endif
  cudaStream_t send;          /* on src's device, in src's context */
} Edge;

typedef struct {
  int           mb_lo, n_mb;
  const float **data[2];      /* [n_mb] by direction: the producer's device buffer */
  cudaEvent_t  *ready[2];     /* [n_mb]: recorded once it is written (not owned) */
  Edge         *edge[2];      /* into this stage as consumer: [0] from prev, [1] from next */
} Stage;

typedef struct {
  PpTransport        base;
  PpTransport       *host;    /* the local transport: launches' order */
  PpGpu             *gpu;
  int                mode;    /* PP_RUN_TRANSPORT_* */
  const PpSchedule  *s;
  Stage             *stages;  /* [n_stages] */
} Device;

static PpStatus
cuda_check (PpError *err, const char *what, cudaError_t e)
{
  if (e == cudaSuccess)
    return PP_OK;
  (void) cudaGetLastError ();
  return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO, "%s: %s", what,
                       cudaGetErrorString (e));
}

/* ---- NCCL edges -------------------------------------------------------- */

#ifdef PP_HAVE_NCCL
static PpStatus
nccl_fail (PpError *err, const char *what, ncclResult_t r)
{
  return pp_error_set (err, PP_EIO, "NCCL %s: %s", what, pp_nccl ()->GetErrorString (r));
}
#endif

static void
edge_free (PpGpu *g, Edge *e)
{
#ifdef PP_HAVE_NCCL
  const PpNccl *nccl = pp_nccl ();
  if (e == NULL)
    return;
  if (e->send != NULL)
    {
      (void) pp_gpu_bind (g, e->src, NULL);
      (void) cudaStreamSynchronize (e->send);
      cudaStreamDestroy (e->send);
    }
  if (e->comm[0] != NULL)
    nccl->CommDestroy (e->comm[0]);
  if (!e->self && e->comm[1] != NULL)
    nccl->CommDestroy (e->comm[1]);
  (void) cudaGetLastError ();
  free (e);
#else
  (void) g;
  free (e);
#endif
}

static Edge *
edge_new (PpGpu *g, int src, int dst, PpError *err)
{
#ifdef PP_HAVE_NCCL
  const PpNccl *nccl = pp_nccl ();
  Edge *e = calloc (1, sizeof *e);
  int devs[2] = { pp_gpu_device (g, src), pp_gpu_device (g, dst) };
  ncclResult_t r;
  cudaError_t ce;

  if (nccl == NULL)
    {
      free (e);
      pp_error_set (err, PP_EUNSUPPORTED, "NCCL (libnccl.so.2) cannot be loaded here");
      return NULL;
    }
  if (e == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  e->src = src;
  e->dst = dst;
  e->self = devs[0] == devs[1];
  r = nccl->CommInitAll (e->comm, e->self ? 1 : 2, devs);
  if (r != ncclSuccess)
    {
      nccl_fail (err, "communicator for a stage edge", r);
      free (e);
      return NULL;
    }
  if (e->self)
    e->comm[1] = e->comm[0];
  if (pp_gpu_bind (g, src, err) != PP_OK)
    {
      edge_free (g, e);
      return NULL;
    }
  if ((ce = cudaStreamCreateWithFlags (&e->send, cudaStreamNonBlocking)) != cudaSuccess)
    {
      cuda_check (err, "cudaStreamCreate (NCCL sends)", ce);
      edge_free (g, e);
      return NULL;
    }
  return e;
#else
  (void) g; (void) src; (void) dst;
  pp_error_set (err, PP_EUNSUPPORTED, "this pipescope was built without NCCL");
  return NULL;
#endif
}

/* After `ready` (recorded on src's stream): count floats from src (on src's
 * device) into dst (on dst's device), the receive queued on dst's stream.
 * Called on dst's thread with dst bound; it stays bound. */
static PpStatus
edge_transfer (PpGpu *g, Edge *e, const float *src, float *dst, size_t count, cudaEvent_t ready,
               PpError *err)
{
#ifdef PP_HAVE_NCCL
  const PpNccl *nccl = pp_nccl ();
  ncclResult_t r, r2;
  cudaError_t ce;
  PpStatus rc;

  /* the send side waits for the producer, on src's device */
  if ((rc = pp_gpu_bind (g, e->src, err)) != PP_OK)
    return rc;
  if ((ce = cudaStreamWaitEvent (e->send, ready, 0)) != cudaSuccess)
    {
      cuda_check (err, "cudaStreamWaitEvent (NCCL send)", ce);
      (void) pp_gpu_bind (g, e->dst, NULL);
      return PP_EIO;
    }
  if ((r = nccl->GroupStart ()) != ncclSuccess)
    {
      (void) pp_gpu_bind (g, e->dst, NULL);
      return nccl_fail (err, "group start", r);
    }
  r = nccl->Send (src, count, ncclFloat32, e->self ? 0 : 1, e->comm[0], e->send);
  if (r == ncclSuccess)
    r = nccl->Recv (dst, count, ncclFloat32, 0, e->comm[1], (cudaStream_t) pp_gpu_stream (g, e->dst));
  r2 = nccl->GroupEnd ();
  if ((rc = pp_gpu_bind (g, e->dst, err)) != PP_OK)
    return rc;
  if (r != ncclSuccess)
    return nccl_fail (err, "send/receive of a stage boundary", r);
  if (r2 != ncclSuccess)
    return nccl_fail (err, "group end", r2);
  return PP_OK;
#else
  (void) g; (void) e; (void) src; (void) dst; (void) count; (void) ready;
  return pp_error_set (err, PP_EUNSUPPORTED, "this pipescope was built without NCCL");
#endif
}

/* NCCL edges into every stage whose neighbour runs on another rank, where
 * the mode asks for them (pp-run.h). */
static PpStatus
setup_edges (Device *d, PpError *err)
{
  const PpSchedule *s = d->s;
  int t = d->mode;

  if (t == PP_RUN_TRANSPORT_COPY)
    return PP_OK;
  if (!pp_gpu_have_nccl ())
    return t == PP_RUN_TRANSPORT_NCCL
           ? pp_error_set (err, PP_EUNSUPPORTED, "--gpu-transport nccl: this pipescope was built without NCCL")
           : PP_OK;
  for (int i = 0; i < s->n_stages; i++)
    for (int dir = 0; dir < 2; dir++)
      {
        int ps = dir == 0 ? s->stage_prev[i] : s->stage_next[i];
        int src;
        if (ps < 0 || (src = s->stage_rank[ps]) == s->stage_rank[i])
          continue;
        if (t != PP_RUN_TRANSPORT_NCCL
            && pp_gpu_device (d->gpu, src) == pp_gpu_device (d->gpu, s->stage_rank[i]))
          continue;
        if ((d->stages[i].edge[dir] = edge_new (d->gpu, src, s->stage_rank[i], err)) == NULL)
          return err != NULL && err->status ? err->status : PP_EIO;
      }
  return PP_OK;
}

/* ---- the transport ------------------------------------------------------ */

static PpStatus
device_setup (PpTransport *t, const PpSchedule *s, const size_t *in_floats,
              const size_t *out_floats, PpTransportAbandoned abandoned, void *user, PpError *err)
{
  Device *d = (Device *) t;
  PpStatus rc = d->host->ops->setup (d->host, s, in_floats, out_floats, abandoned, user, err);

  if (rc != PP_OK)
    return rc;
  d->s = s;
  if ((d->stages = calloc ((size_t) s->n_stages, sizeof (Stage))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int i = 0; i < s->n_stages; i++)
    {
      Stage *st = &d->stages[i];
      st->mb_lo = s->stage_mb_lo[i];
      st->n_mb = s->stage_mb_hi[i] - s->stage_mb_lo[i];
      for (int g = 0; g < 2; g++)
        {
          st->data[g] = calloc ((size_t) st->n_mb + 1, sizeof (float *));
          st->ready[g] = calloc ((size_t) st->n_mb + 1, sizeof (cudaEvent_t));
          if (st->data[g] == NULL || st->ready[g] == NULL)
            return pp_error_set (err, PP_ENOMEM, "out of memory");
        }
    }
  return setup_edges (d, err);
}

static PpStatus
device_step_begin (PpTransport *t, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->step_begin (d->host, err);
}

static void
device_publish (PpTransport *t, int stage, int grad, int mb, const float *data, size_t n)
{
  Device *d = (Device *) t;
  d->host->ops->publish (d->host, stage, grad, mb, data, n);
}

static PpStatus
device_acquire (PpTransport *t, int stage, int grad, int mb, const float **data, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->acquire (d->host, stage, grad, mb, data, err);
}

/* The event and buffer are set before the host's flag, which the consumer
 * reads under the flag's mutex: it sees them. */
static void
device_publish_device (PpTransport *t, int stage, int grad, int mb, const float *d_data,
                       size_t n, void *ready)
{
  Device *d = (Device *) t;
  Stage *st = &d->stages[stage];
  st->data[grad][mb - st->mb_lo] = d_data;
  st->ready[grad][mb - st->mb_lo] = (cudaEvent_t) ready;
  d->host->ops->publish (d->host, stage, grad, mb, NULL, 0);
}

static PpStatus
device_acquire_device (PpTransport *t, int ps, int grad, int mb, float *d_dst, size_t n,
                       void *stream, void *start, PpError *err)
{
  Device *d = (Device *) t;
  const PpSchedule *s = d->s;
  const Stage *p = &d->stages[ps];
  int consumer = grad ? s->stage_prev[ps] : s->stage_next[ps];
  int kp = mb - p->mb_lo;
  const float *src = p->data[grad][kp];
  cudaEvent_t ready = p->ready[grad][kp];
  cudaStream_t cs = (cudaStream_t) stream;
  Edge *edge = d->stages[consumer].edge[grad];
  int dd = pp_gpu_device (d->gpu, s->stage_rank[consumer]), sd = pp_gpu_device (d->gpu, s->stage_rank[ps]);
  size_t bytes = n * sizeof (float);
  cudaError_t e;
  PpStatus rc = PP_OK;

  if (edge != NULL)
    {
      /* NCCL: the receive itself waits for the send, which waits for the
       * producer's event */
      rc = cuda_check (err, "cudaEventRecord", cudaEventRecord ((cudaEvent_t) start, cs));
      if (rc == PP_OK)
        rc = edge_transfer (d->gpu, edge, src, d_dst, n, ready, err);
      return rc;
    }
  if ((e = cudaStreamWaitEvent (cs, ready, 0)) != cudaSuccess)
    return cuda_check (err, "cudaStreamWaitEvent", e);
  if ((e = cudaEventRecord ((cudaEvent_t) start, cs)) != cudaSuccess)
    rc = cuda_check (err, "cudaEventRecord", e);
  else if (dd == sd)
    rc = cuda_check (err, "stage transfer (device to device)",
                     cudaMemcpyAsync (d_dst, src, bytes, cudaMemcpyDeviceToDevice, cs));
  else
    rc = cuda_check (err, "stage transfer (peer copy)",
                     cudaMemcpyPeerAsync (d_dst, dd, src, sd, bytes, cs));
  return rc;
}

static void
device_interrupt (PpTransport *t)
{
  Device *d = (Device *) t;
  d->host->ops->interrupt (d->host);
}

static PpStatus
device_step_end (PpTransport *t, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->step_end (d->host, err);
}

static PpStatus
device_sum (PpTransport *t, double *values, size_t n, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->sum (d->host, values, n, err);
}

static PpStatus
device_send_bytes (PpTransport *t, int rank, const void *buf, size_t n, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->send_bytes (d->host, rank, buf, n, err);
}

static PpStatus
device_recv_bytes (PpTransport *t, int rank, void *buf, size_t n, PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->recv_bytes (d->host, rank, buf, n, err);
}

static PpStatus
device_clock_offset (PpTransport *t, int64_t (*now) (void), int64_t *offset_ns, int64_t *rtt_ns,
                     PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->clock_offset (d->host, now, offset_ns, rtt_ns, err);
}

static PpStatus
device_gather_bytes (PpTransport *t, const void *buf, size_t n, void **all, size_t *sizes,
                     PpError *err)
{
  Device *d = (Device *) t;
  return d->host->ops->gather_bytes (d->host, buf, n, all, sizes, err);
}

static void
device_free (PpTransport *t)
{
  Device *d = (Device *) t;
  if (d->stages != NULL)
    {
      for (int i = 0; i < d->s->n_stages; i++)
        {
          Stage *st = &d->stages[i];
          for (int g = 0; g < 2; g++)
            {
              edge_free (d->gpu, st->edge[g]);
              free (st->data[g]);
              free (st->ready[g]);
            }
        }
      free (d->stages);
    }
  free (d);
}

static const PpTransportOps device_ops = {
  .name = "device",
  .setup = device_setup,
  .step_begin = device_step_begin,
  .publish = device_publish,
  .acquire = device_acquire,
  .interrupt = device_interrupt,
  .step_end = device_step_end,
  .sum = device_sum,
  .send_bytes = device_send_bytes,
  .recv_bytes = device_recv_bytes,
  .clock_offset = device_clock_offset,
  .gather_bytes = device_gather_bytes,
  .publish_device = device_publish_device,
  .acquire_device = device_acquire_device,
  .free = device_free,
};

PpTransport *
pp_transport_new_device (PpTransport *host, struct _PpGpu *gpu, int mode, PpError *err)
{
  Device *d = calloc (1, sizeof *d);
  if (d == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  d->base.ops = &device_ops;
  d->base.process_rank = host->process_rank;
  d->base.n_processes = host->n_processes;
  d->base.device = host->device;
  d->host = host;
  d->gpu = gpu;
  d->mode = mode;
  return &d->base;
}

#else /* !PP_HAVE_CUDA */

PpTransport *
pp_transport_new_device (PpTransport *host, struct _PpGpu *gpu, int mode, PpError *err)
{
  pp_error_set (err, PP_EUNSUPPORTED, "this pipescope was built without CUDA");
  return NULL;
}

#endif
