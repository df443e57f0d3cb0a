/* pp-gpu.c — devices, green-context partitions and streams of a GPU run.
 * See pp-gpu.h.  Driver-API functions come from cudaGetDriverEntryPointByVersion. */
#include "pp-gpu.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PP_HAVE_CUPTI
#include "pp-cupti.h"
#endif
#include "pp-nccl.h"

/* The driver functions we use, resolved once per open. */
typedef struct {
  CUresult (*DeviceGet) (CUdevice *, int);
  CUresult (*DeviceGetDevResource) (CUdevice, CUdevResource *, CUdevResourceType);
  CUresult (*DevSmResourceSplitByCount) (CUdevResource *, unsigned int *, const CUdevResource *,
                                         CUdevResource *, unsigned int, unsigned int);
  CUresult (*DevResourceGenerateDesc) (CUdevResourceDesc *, CUdevResource *, unsigned int);
  CUresult (*GreenCtxCreate) (CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
  CUresult (*GreenCtxDestroy) (CUgreenCtx);
  CUresult (*CtxFromGreenCtx) (CUcontext *, CUgreenCtx);
  CUresult (*GreenCtxStreamCreate) (CUstream *, CUgreenCtx, unsigned int, int);
  CUresult (*CtxSetCurrent) (CUcontext);
  CUresult (*StreamDestroy) (CUstream);
  CUresult (*GetErrorString) (CUresult, const char **);
} Driver;

typedef struct {
  int          device;
  int          sms;
  CUgreenCtx   green;      /* NULL unless green */
  CUcontext    ctx;        /* the green context's CUcontext, or NULL */
  cudaStream_t stream;
  PpCublasLt  *lt;
  cudaEvent_t  ref;        /* calibration event */
  int64_t      ref_ns;
} Place;

struct _PpGpu {
  int            P, n_dev;
  PpGpuPartition partition;
  Place         *place;
  Driver         drv;
  int            have_drv;
  char           describe[256];
  char           cupti_note[256];
#ifdef PP_HAVE_CUPTI
  PpCupti       *cupti;
#endif
};

const char *
pp_gpu_error_string (int e)
{
  return cudaGetErrorString ((cudaError_t) e);
}

static PpStatus
cuda_fail (PpError *err, const char *what, cudaError_t e)
{
  (void) cudaGetLastError ();
  return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO, "%s: %s", what,
                       cudaGetErrorString (e));
}

static const char *
drv_error (const PpGpu *g, CUresult r)
{
  const char *s = NULL;
  if (g->drv.GetErrorString == NULL || g->drv.GetErrorString (r, &s) != CUDA_SUCCESS || s == NULL)
    return "unknown driver error";
  return s;
}

static int
resolve (const char *name, void **fn)
{
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  *fn = NULL;
  if (cudaGetDriverEntryPointByVersion (name, fn, CUDA_VERSION, cudaEnableDefault, &q) != cudaSuccess
      || q != cudaDriverEntryPointSuccess || *fn == NULL)
    {
      (void) cudaGetLastError ();
      *fn = NULL;
      return 0;
    }
  return 1;
}

static int
resolve_driver (Driver *d)
{
  int ok = 1;
  ok &= resolve ("cuDeviceGet", (void **) &d->DeviceGet);
  ok &= resolve ("cuDeviceGetDevResource", (void **) &d->DeviceGetDevResource);
  ok &= resolve ("cuDevSmResourceSplitByCount", (void **) &d->DevSmResourceSplitByCount);
  ok &= resolve ("cuDevResourceGenerateDesc", (void **) &d->DevResourceGenerateDesc);
  ok &= resolve ("cuGreenCtxCreate", (void **) &d->GreenCtxCreate);
  ok &= resolve ("cuGreenCtxDestroy", (void **) &d->GreenCtxDestroy);
  ok &= resolve ("cuCtxFromGreenCtx", (void **) &d->CtxFromGreenCtx);
  ok &= resolve ("cuGreenCtxStreamCreate", (void **) &d->GreenCtxStreamCreate);
  ok &= resolve ("cuCtxSetCurrent", (void **) &d->CtxSetCurrent);
  ok &= resolve ("cuStreamDestroy", (void **) &d->StreamDestroy);
  (void) resolve ("cuGetErrorString", (void **) &d->GetErrorString);
  return ok;
}

/* Splits device dev between ranks [r0, r0 + n) with green contexts. */
static PpStatus
make_green (PpGpu *g, int dev, int r0, int n, PpError *err)
{
  CUdevice cudev;
  CUdevResource all, *groups;
  CUresult r;
  unsigned int nb, per, align;

  if (!g->have_drv)
    return pp_error_set (err, PP_EUNSUPPORTED,
                         "green contexts need driver functions this driver does not offer");
  if ((r = g->drv.DeviceGet (&cudev, dev)) != CUDA_SUCCESS)
    return pp_error_set (err, PP_EIO, "cuDeviceGet(%d): %s", dev, drv_error (g, r));
  memset (&all, 0, sizeof all);
  if ((r = g->drv.DeviceGetDevResource (cudev, &all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS)
    return pp_error_set (err, PP_EUNSUPPORTED, "GPU %d: no SM resource to split: %s", dev,
                         drv_error (g, r));
  align = all.sm.smCoscheduledAlignment > 0 ? all.sm.smCoscheduledAlignment : 1;
  if (all.sm.minSmPartitionSize > align)
    align = all.sm.minSmPartitionSize;
  per = all.sm.smCount / (unsigned) n;
  per -= per % align;
  if (per == 0)
    return pp_error_set (err, PP_EUNSUPPORTED,
                         "GPU %d: %u SMs cannot be split into %d partitions of at least %u",
                         dev, all.sm.smCount, n, align);
  groups = calloc ((size_t) n, sizeof *groups);
  if (groups == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  nb = (unsigned) n;
  r = g->drv.DevSmResourceSplitByCount (groups, &nb, &all, NULL, 0, per);
  if (r != CUDA_SUCCESS || nb < (unsigned) n)
    {
      free (groups);
      return pp_error_set (err, PP_EUNSUPPORTED,
                           "GPU %d: splitting %u SMs into %d groups of %u failed: %s", dev,
                           all.sm.smCount, n, per,
                           r != CUDA_SUCCESS ? drv_error (g, r) : "too few groups");
    }
  for (int i = 0; i < n; i++)
    {
      Place *pl = &g->place[r0 + i];
      CUdevResourceDesc desc;
      CUstream s;
      if ((r = g->drv.DevResourceGenerateDesc (&desc, &groups[i], 1)) != CUDA_SUCCESS
          || (r = g->drv.GreenCtxCreate (&pl->green, desc, cudev, CU_GREEN_CTX_DEFAULT_STREAM))
               != CUDA_SUCCESS)
        {
          free (groups);
          pl->green = NULL;
          return pp_error_set (err, PP_EUNSUPPORTED, "GPU %d: green context %d: %s", dev, i,
                               drv_error (g, r));
        }
      if ((r = g->drv.CtxFromGreenCtx (&pl->ctx, pl->green)) != CUDA_SUCCESS
          || (r = g->drv.GreenCtxStreamCreate (&s, pl->green, CU_STREAM_NON_BLOCKING, 0))
               != CUDA_SUCCESS)
        {
          free (groups);
          return pp_error_set (err, PP_EUNSUPPORTED, "GPU %d: stream of green context %d: %s",
                               dev, i, drv_error (g, r));
        }
      pl->stream = (cudaStream_t) s;
      pl->sms = (int) groups[i].sm.smCount;
    }
  free (groups);
  return PP_OK;
}

static void
destroy_place (PpGpu *g, Place *pl)
{
  if (pl->stream != NULL)
    (void) cudaStreamSynchronize (pl->stream);
  pp_cublaslt_free (pl->lt);
  pl->lt = NULL;
  if (pl->ref != NULL)
    cudaEventDestroy (pl->ref);
  pl->ref = NULL;
  if (pl->green != NULL)
    {
      if (pl->stream != NULL)
        g->drv.StreamDestroy ((CUstream) pl->stream);
      pl->stream = NULL;
      g->drv.GreenCtxDestroy (pl->green);
      pl->green = NULL;
      pl->ctx = NULL;
    }
  else if (pl->stream != NULL)
    {
      cudaSetDevice (pl->device);
      cudaStreamDestroy (pl->stream);
      pl->stream = NULL;
    }
  (void) cudaGetLastError ();
}

static PpStatus
make_streams (PpGpu *g, int dev, int r0, int n, PpError *err)
{
  cudaError_t e;
  int sms = 0;
  if ((e = cudaSetDevice (dev)) != cudaSuccess)
    return cuda_fail (err, "cudaSetDevice", e);
  (void) cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, dev);
  for (int i = 0; i < n; i++)
    {
      Place *pl = &g->place[r0 + i];
      if ((e = cudaStreamCreateWithFlags (&pl->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail (err, "cudaStreamCreate", e);
      pl->sms = sms;
    }
  return PP_OK;
}

/* Every rank (only < 0), or rank `only` alone on GPU `only_device`. */
static PpGpu *
gpu_open (int n_ranks, int only, int only_device, PpGpuPartition want, PpProbe *probe,
          int cupti, PpError *err)
{
  PpGpu *g;
  int n_dev = 0;
  char why_streams[160] = "";

  if (n_ranks < 1)
    {
      pp_error_set (err, PP_EINVAL, "a GPU run needs at least one rank");
      return NULL;
    }
  g = calloc (1, sizeof *g);
  if (g == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  g->P = n_ranks;

#ifdef PP_HAVE_CUPTI
  /* before the first context: CUPTI sees every record of the run */
  if (probe != NULL && cupti)
    {
      PpError ce;
      memset (&ce, 0, sizeof ce);
      g->cupti = pp_cupti_start (probe, 0, &ce);
      if (g->cupti == NULL)
        snprintf (g->cupti_note, sizeof g->cupti_note,
                  "%.180s; timing blocks with CUDA events", ce.msg[0] ? ce.msg : "CUPTI unavailable");
      else
        snprintf (g->cupti_note, sizeof g->cupti_note, "CUPTI traces kernels and copies");
    }
  else
    snprintf (g->cupti_note, sizeof g->cupti_note,
              probe == NULL ? "nothing recorded" : "CUPTI off; timing blocks with CUDA events");
#else
  (void) probe;
  (void) cupti;
  snprintf (g->cupti_note, sizeof g->cupti_note,
            "built without CUPTI; timing blocks with CUDA events");
#endif

  if (pp_cuda_device_count (&n_dev, err) != PP_OK)
    goto fail;
  g->n_dev = n_dev;
  g->place = calloc ((size_t) n_ranks, sizeof (Place));
  if (g->place == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      goto fail;
    }
  g->have_drv = resolve_driver (&g->drv);

  if (only >= 0)
    {
      /* one rank of a job's processes: the other ranks are elsewhere */
      g->partition = PP_GPU_PARTITION_DEVICES;
      for (int r = 0; r < n_ranks; r++)
        g->place[r].device = -1;
      if (only_device < 0 || only_device >= n_dev)
        {
          pp_error_set (err, PP_EUNSUPPORTED, "rank %d: no GPU %d here (%d GPUs)", only,
                        only_device, n_dev);
          goto fail;
        }
      g->place[only].device = only_device;
      if (make_streams (g, only_device, only, 1, err) != PP_OK)
        goto fail;
    }
  else if (n_dev >= n_ranks)
    {
      g->partition = PP_GPU_PARTITION_DEVICES;
      for (int r = 0; r < n_ranks; r++)
        {
          g->place[r].device = r;
          if (make_streams (g, r, r, 1, err) != PP_OK)
            goto fail;
        }
    }
  else
    {
      int per = (n_ranks + n_dev - 1) / n_dev;
      PpGpuPartition got = want == PP_GPU_PARTITION_STREAMS ? PP_GPU_PARTITION_STREAMS
                                                            : PP_GPU_PARTITION_GREEN;
      for (int r = 0; r < n_ranks; r++)
        g->place[r].device = r / per;
      if (got == PP_GPU_PARTITION_GREEN)
        {
          PpError ge;
          memset (&ge, 0, sizeof ge);
          for (int d = 0, r0 = 0; r0 < n_ranks && got == PP_GPU_PARTITION_GREEN; d++, r0 += per)
            {
              int n = n_ranks - r0 < per ? n_ranks - r0 : per;
              if (make_green (g, d, r0, n, &ge) != PP_OK)
                got = PP_GPU_PARTITION_STREAMS;
            }
          if (got != PP_GPU_PARTITION_GREEN)
            {
              if (want == PP_GPU_PARTITION_GREEN)
                {
                  pp_error_set (err, ge.status ? ge.status : PP_EUNSUPPORTED,
                                "--gpu-partition green: %s", ge.msg);
                  goto fail;
                }
              snprintf (why_streams, sizeof why_streams, " (green contexts: %.100s)", ge.msg);
              for (int r = 0; r < n_ranks; r++)
                {
                  int dev = g->place[r].device;
                  destroy_place (g, &g->place[r]);
                  memset (&g->place[r], 0, sizeof (Place));
                  g->place[r].device = dev;
                }
            }
        }
      if (got == PP_GPU_PARTITION_STREAMS)
        for (int d = 0, r0 = 0; r0 < n_ranks; d++, r0 += per)
          {
            int n = n_ranks - r0 < per ? n_ranks - r0 : per;
            if (make_streams (g, d, r0, n, err) != PP_OK)
              goto fail;
          }
      g->partition = got;
    }

  for (int r = 0; r < n_ranks; r++)
    {
      Place *pl = &g->place[r];
      cudaError_t e;
      if (pl->device < 0)
        continue;
      if (pp_gpu_bind (g, r, err) != PP_OK)
        goto fail;
      if ((pl->lt = pp_cublaslt_new (err)) == NULL)
        goto fail;
      if ((e = cudaEventCreate (&pl->ref)) != cudaSuccess)
        {
          cuda_fail (err, "cudaEventCreate", e);
          goto fail;
        }
    }

  {
    struct cudaDeviceProp prop;
    const char *name = "GPU";
    int total = 0;
    if (cudaGetDeviceProperties (&prop, g->place[only >= 0 ? only : 0].device) == cudaSuccess)
      {
        name = prop.name;
        total = prop.multiProcessorCount;
      }
    (void) cudaGetLastError ();
    if (only >= 0)
      snprintf (g->describe, sizeof g->describe, "%.60s (%d SMs), GPU %d for rank %d, one GPU per rank process",
                name, total, only_device, only);
    else switch (g->partition)
      {
      case PP_GPU_PARTITION_DEVICES:
        snprintf (g->describe, sizeof g->describe, "%d x %.60s (%d SMs), one GPU per rank",
                  n_ranks, name, total);
        break;
      case PP_GPU_PARTITION_GREEN:
        snprintf (g->describe, sizeof g->describe,
                  "%d x %.60s (%d SMs): %d green-context partitions of %d SMs", n_dev < n_ranks ? n_dev : n_ranks,
                  name, total, n_ranks, g->place[0].sms);
        break;
      default:
        snprintf (g->describe, sizeof g->describe,
                  "%d x %.60s (%d SMs): %d ranks on streams sharing all SMs%s",
                  n_dev < n_ranks ? n_dev : n_ranks, name, total, n_ranks, why_streams);
        break;
      }
  }
  return g;

fail:
  pp_gpu_close (g);
  return NULL;
}

PpGpu *
pp_gpu_open (int n_ranks, PpGpuPartition want, PpProbe *probe, int cupti, PpError *err)
{
  return gpu_open (n_ranks, -1, -1, want, probe, cupti, err);
}

PpGpu *
pp_gpu_open_rank (int n_ranks, int rank, int device, PpProbe *probe, int cupti, PpError *err)
{
  if (rank < 0 || rank >= n_ranks)
    {
      pp_error_set (err, PP_EINVAL, "rank %d is not one of %d", rank, n_ranks);
      return NULL;
    }
  return gpu_open (n_ranks, rank, device, PP_GPU_PARTITION_DEVICES, probe, cupti, err);
}

void
pp_gpu_close (PpGpu *g)
{
  if (g == NULL)
    return;
  if (g->place != NULL)
    {
      for (int r = 0; r < g->P; r++)
        {
          if (g->place[r].device < 0)
            continue;   /* another process's rank */
          if (g->place[r].ctx != NULL && g->drv.CtxSetCurrent != NULL)
            g->drv.CtxSetCurrent (g->place[r].ctx);
          else
            (void) cudaSetDevice (g->place[r].device);
          destroy_place (g, &g->place[r]);
        }
      if (g->drv.CtxSetCurrent != NULL)
        g->drv.CtxSetCurrent (NULL);
      free (g->place);
    }
#ifdef PP_HAVE_CUPTI
  pp_cupti_free (g->cupti);
#endif
  free (g);
}

const char *
pp_gpu_describe (const PpGpu *g)
{
  return g ? g->describe : "";
}

PpGpuPartition
pp_gpu_partition (const PpGpu *g)
{
  return g->partition;
}

int
pp_gpu_n_devices (const PpGpu *g)
{
  return g->n_dev;
}

PpStatus
pp_gpu_bind (PpGpu *g, int rank, PpError *err)
{
  Place *pl = &g->place[rank];
  if (pl->ctx != NULL)
    {
      CUresult r = g->drv.CtxSetCurrent (pl->ctx);
      if (r != CUDA_SUCCESS)
        return pp_error_set (err, PP_EIO, "rank %d: cannot make its green context current: %s",
                             rank, drv_error (g, r));
      return PP_OK;
    }
  cudaError_t e = cudaSetDevice (pl->device);
  if (e != cudaSuccess)
    return cuda_fail (err, "cudaSetDevice", e);
  return PP_OK;
}

int
pp_gpu_device (const PpGpu *g, int rank)
{
  return g->place[rank].device;
}

int
pp_gpu_sms (const PpGpu *g, int rank)
{
  return g->place[rank].sms;
}

void *
pp_gpu_stream (const PpGpu *g, int rank)
{
  return g->place[rank].stream;
}

PpCublasLt *
pp_gpu_lt (const PpGpu *g, int rank)
{
  return g->place[rank].lt;
}

PpStatus
pp_gpu_calibrate (PpGpu *g, int rank, PpError *err)
{
  Place *pl = &g->place[rank];
  cudaError_t e;
  if ((e = cudaEventRecord (pl->ref, pl->stream)) != cudaSuccess
      || (e = cudaEventSynchronize (pl->ref)) != cudaSuccess)
    return cuda_fail (err, "rank calibration event", e);
  pl->ref_ns = pp_probe_now_ns ();
  return PP_OK;
}

int64_t
pp_gpu_event_ns (PpGpu *g, int rank, void *event)
{
  Place *pl = &g->place[rank];
  float ms = 0;
  if (cudaEventElapsedTime (&ms, pl->ref, (cudaEvent_t) event) != cudaSuccess)
    {
      (void) cudaGetLastError ();
      return 0;
    }
  return pl->ref_ns + (int64_t) ((double) ms * 1e6);
}

PpCupti *
pp_gpu_cupti (const PpGpu *g)
{
#ifdef PP_HAVE_CUPTI
  return g ? g->cupti : NULL;
#else
  (void) g;
  return NULL;
#endif
}

const char *
pp_gpu_cupti_note (const PpGpu *g)
{
  return g ? g->cupti_note : "";
}

int
pp_gpu_have_nccl (void)
{
#ifdef PP_HAVE_NCCL
  return pp_nccl () != NULL;
#else
  return 0;
#endif
}
