/* fake-cupti.c — see fake-cupti.h.  Test code: one global state under one
 * lock; client callbacks are always called without it (the collector's
 * buffer callback calls back into CUPTI). */
#include "fake-cupti.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KIND   128
#define MAX_FAILS  8
#define MAX_DEPTH  16
#define MAX_OUT    32      /* full buffers a held stream queues, at most */
#define OUT_ROOM   (2 * MAX_OUT + 2)   /* buffers one call may hand back */

typedef struct {
  uint8_t *buf;
  size_t   size, valid;
} Out;

typedef struct {
  uint8_t *buf;
  size_t   size;     /* usable bytes (limit applied) */
  size_t   used;
  int      held;     /* flushes still to skip: full buffers queue meanwhile */
  Out      queue[MAX_OUT];
  int      n_queue;
} Stream;

static pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  CUpti_BuffersCallbackRequestFunc  request;
  CUpti_BuffersCallbackCompleteFunc complete;
  CUpti_TimestampCallbackFunc       timestamp;
  bool     kind_on[MAX_KIND];
  uint8_t  rt_on[CUPTI_RUNTIME_TRACE_CBID_SIZE];
  uint8_t  drv_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
  struct { const char *fn; CUptiResult r; } fails[MAX_FAILS];
  int      n_fails;
  size_t   limit;
  Stream   api, dev;    /* [API + correlation records], [device records] */
  uint32_t next_corr;
  int      api_incomplete;   /* API records of calls still running */
  size_t   dropped_unread;
  FakeCuptiStats st;
} fk = { .next_corr = 1 };

/* external correlation ids pushed by this thread (CUSTOM0 .. CUSTOM2 and the rest alike) */
static __thread uint64_t tl_stack[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][MAX_DEPTH];
static __thread int      tl_depth[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

static CUptiResult
planned (const char *fn)
{
  CUptiResult r = CUPTI_SUCCESS;
  pthread_mutex_lock (&fk_lock);
  for (int i = 0; i < fk.n_fails; i++)
    if (strcmp (fk.fails[i].fn, fn) == 0)
      r = fk.fails[i].r;
  pthread_mutex_unlock (&fk_lock);
  return r;
}

#define FAIL_IF_PLANNED()                     \
  do {                                        \
    CUptiResult planned_r = planned (__func__); \
    if (planned_r != CUPTI_SUCCESS)           \
      return planned_r;                       \
  } while (0)

static size_t
record_size (CUpti_ActivityKind kind)
{
  size_t n;
  switch (kind)
    {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: n = sizeof (CUpti_ActivityKernel10); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: n = sizeof (CUpti_ActivityMemcpy6); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: n = sizeof (CUpti_ActivityMemset4); break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      n = sizeof (CUpti_ActivityExternalCorrelation);
      break;
    default: n = sizeof (CUpti_ActivityAPI); break;
    }
  return (n + 7) & ~(size_t) 7;
}

/* ---- buffers (fk_lock held; *out collects what to hand back after) ---- */

/* The queued full buffers, then the current one if it holds records, go to
 * out (OUT_ROOM entries: both streams' queues and current buffers fit). */
static void
detach (Stream *s, Out *out, int *n_out)
{
  for (int i = 0; i < s->n_queue; i++)
    out[(*n_out)++] = s->queue[i];
  fk.st.delivered += (uint64_t) s->n_queue;
  s->n_queue = 0;
  if (s->buf && s->used > 0)
    {
      out[(*n_out)++] = (Out) { s->buf, s->size, s->used };
      fk.st.delivered++;
      s->buf = NULL;
      s->used = 0;
    }
}

/* Room for a record of n bytes in s, or NULL (dropped).  Asking the client
 * for a buffer means calling it under fk_lock: the collector's request
 * callback takes only its pool lock, never calls CUPTI. */
static void *
room (Stream *s, size_t n, Out *out, int *n_out)
{
  if (s->buf && s->used + n > s->size)
    {
      if (s->held > 0 && s->n_queue < MAX_OUT)
        s->queue[s->n_queue++] = (Out) { s->buf, s->size, s->used };
      else if (s->held > 0)
        goto drop;
      else
        {
          out[(*n_out)++] = (Out) { s->buf, s->size, s->used };
          fk.st.delivered++;
        }
      s->buf = NULL;
      s->used = 0;
    }
  if (!s->buf)
    {
      uint8_t *b = NULL;
      size_t size = 0, max_records = 0;
      fk.st.requested++;
      if (fk.request)
        fk.request (&b, &size, &max_records);
      if (!b || size < n)
        goto drop;
      s->buf = b;
      s->size = fk.limit && fk.limit < size ? fk.limit : size;
      s->used = 0;
      if (s->size < n)
        s->size = n;
    }
  void *p = s->buf + s->used;
  memset (p, 0, n);
  s->used += n;
  return p;

drop:
  fk.st.dropped++;
  fk.dropped_unread++;
  return NULL;
}

static void
hand_back (Out *out, int n_out)
{
  CUpti_BuffersCallbackCompleteFunc complete;
  pthread_mutex_lock (&fk_lock);
  complete = fk.complete;
  pthread_mutex_unlock (&fk_lock);
  for (int i = 0; i < n_out; i++)
    if (complete)
      complete (NULL, 0, out[i].buf, out[i].size, out[i].valid);
    else
      free (out[i].buf);
}

/* ---- the CUPTI calls pp-cupti.c makes ---- */

CUptiResult CUPTIAPI
cuptiGetResultString (CUptiResult result, const char **str)
{
  switch (result)
    {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    default: *str = "CUPTI_ERROR (fake)"; break;
    }
  return CUPTI_SUCCESS;
}

/* A few names of each layer, with the real ids; other ids are unknown. */
CUptiResult CUPTIAPI
cuptiGetCallbackName (CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
  static const struct { CUpti_CallbackDomain d; uint32_t id; const char *name; } names[] = {
    { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
      "cudaMemcpyAsync_v3020" },
    { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
      "cudaMemsetAsync_v3020" },
    { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
      "cudaEventRecord_v3020" },
    { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
      "cudaStreamWaitEvent_v3020" },
    { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      "cudaLaunchKernel_v7000" },
    { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventRecord, "cuEventRecord" },
    { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, "cuMemsetD32Async" },
    { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
      "cuMemcpyDtoDAsync_v2" },
    { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent, "cuCtxSetCurrent" },
    { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel" },
  };
  FAIL_IF_PLANNED ();
  if (!name)
    return CUPTI_ERROR_INVALID_PARAMETER;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].d == domain && names[i].id == cbid)
      {
        *name = names[i].name;
        return CUPTI_SUCCESS;
      }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback (CUpti_TimestampCallbackFunc funcTimestamp)
{
  FAIL_IF_PLANNED ();
  pthread_mutex_lock (&fk_lock);
  fk.timestamp = funcTimestamp;
  pthread_mutex_unlock (&fk_lock);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks (CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
  FAIL_IF_PLANNED ();
  if (!funcBufferRequested || !funcBufferCompleted)
    return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock (&fk_lock);
  fk.request = funcBufferRequested;
  fk.complete = funcBufferCompleted;
  pthread_mutex_unlock (&fk_lock);
  return CUPTI_SUCCESS;
}

static CUptiResult
set_kind (CUpti_ActivityKind kind, bool on)
{
  if ((unsigned) kind >= MAX_KIND)
    return CUPTI_ERROR_INVALID_KIND;
  pthread_mutex_lock (&fk_lock);
  fk.kind_on[kind] = on;
  pthread_mutex_unlock (&fk_lock);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityEnable (CUpti_ActivityKind kind)
{
  FAIL_IF_PLANNED ();
  return set_kind (kind, true);
}

CUptiResult CUPTIAPI
cuptiActivityDisable (CUpti_ActivityKind kind)
{
  FAIL_IF_PLANNED ();
  return set_kind (kind, false);
}

static CUptiResult
set_call (uint8_t *on, uint32_t size, CUpti_CallbackId cbid, uint8_t enable)
{
  if (cbid == 0 || cbid >= size)
    return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock (&fk_lock);
  on[cbid] = enable != 0;
  pthread_mutex_unlock (&fk_lock);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityEnableRuntimeApi (CUpti_CallbackId cbid, uint8_t enable)
{
  FAIL_IF_PLANNED ();
  return set_call (fk.rt_on, CUPTI_RUNTIME_TRACE_CBID_SIZE, cbid, enable);
}

CUptiResult CUPTIAPI
cuptiActivityEnableDriverApi (CUpti_CallbackId cbid, uint8_t enable)
{
  FAIL_IF_PLANNED ();
  return set_call (fk.drv_on, CUPTI_DRIVER_TRACE_CBID_SIZE, cbid, enable);
}

CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId (CUpti_ExternalCorrelationKind kind, uint64_t id)
{
  FAIL_IF_PLANNED ();
  if ((unsigned) kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE || tl_depth[kind] == MAX_DEPTH)
    return CUPTI_ERROR_INVALID_PARAMETER;
  tl_stack[kind][tl_depth[kind]++] = id;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId (CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
  FAIL_IF_PLANNED ();
  if ((unsigned) kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (tl_depth[kind] == 0)
    return CUPTI_ERROR_QUEUE_EMPTY;
  uint64_t id = tl_stack[kind][--tl_depth[kind]];
  if (lastId)
    *lastId = id;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityFlushAll (uint32_t flag)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  FAIL_IF_PLANNED ();
  pthread_mutex_lock (&fk_lock);
  if (!fk.complete)
    {
      pthread_mutex_unlock (&fk_lock);
      return CUPTI_ERROR_INVALID_OPERATION;
    }
  fk.st.flushes++;
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
    fk.st.forced_flushes++;
  detach (&fk.dev, out, &n_out);
  if (fk.api.held > 0)
    fk.api.held--;
  else if (fk.api_incomplete == 0 || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
    detach (&fk.api, out, &n_out);   /* a default flush keeps back incomplete records */
  pthread_mutex_unlock (&fk_lock);
  hand_back (out, n_out);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityGetNextRecord (uint8_t *buffer, size_t validBufferSizeBytes,
                            CUpti_Activity **record)
{
  size_t off = 0;
  if (!buffer || !record)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (*record)
    off = (size_t) ((uint8_t *) *record - buffer) + record_size ((*record)->kind);
  if (off + sizeof (CUpti_Activity) > validBufferSizeBytes)
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *) (buffer + off);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityGetNumDroppedRecords (CUcontext context, uint32_t streamId, size_t *dropped)
{
  FAIL_IF_PLANNED ();
  if (!dropped)
    return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock (&fk_lock);
  *dropped = fk.dropped_unread;
  fk.dropped_unread = 0;
  pthread_mutex_unlock (&fk_lock);
  return CUPTI_SUCCESS;
}

/* ---- the test's side ---- */

void
fake_cupti_reset (void)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  pthread_mutex_lock (&fk_lock);
  /* Buffers still out go back to the client (its pool counts them); the
   * callbacks stay registered, as in a process. */
  detach (&fk.dev, out, &n_out);
  detach (&fk.api, out, &n_out);
  if (fk.dev.buf)
    out[n_out++] = (Out) { fk.dev.buf, fk.dev.size, 0 };
  if (fk.api.buf)
    out[n_out++] = (Out) { fk.api.buf, fk.api.size, 0 };
  CUpti_BuffersCallbackRequestFunc request = fk.request;
  CUpti_BuffersCallbackCompleteFunc complete = fk.complete;
  CUpti_TimestampCallbackFunc timestamp = fk.timestamp;
  memset (&fk, 0, sizeof fk);
  fk.request = request;
  fk.complete = complete;
  fk.timestamp = timestamp;
  fk.next_corr = 1;
  pthread_mutex_unlock (&fk_lock);
  hand_back (out, n_out);
  memset (tl_depth, 0, sizeof tl_depth);
}

void
fake_cupti_fail (const char *function, CUptiResult r)
{
  pthread_mutex_lock (&fk_lock);
  if (fk.n_fails < MAX_FAILS)
    {
      fk.fails[fk.n_fails].fn = function;
      fk.fails[fk.n_fails].r = r;
      fk.n_fails++;
    }
  pthread_mutex_unlock (&fk_lock);
}

void
fake_cupti_set_buffer_limit (size_t bytes)
{
  pthread_mutex_lock (&fk_lock);
  fk.limit = bytes;
  pthread_mutex_unlock (&fk_lock);
}

void
fake_cupti_hold_api (int n_flushes)
{
  pthread_mutex_lock (&fk_lock);
  fk.api.held = n_flushes;
  pthread_mutex_unlock (&fk_lock);
}

static uint32_t api_call (bool driver, uint32_t cbid, bool running, uint64_t start, uint64_t end);

uint32_t
fake_cupti_api_call (bool driver, uint32_t cbid)
{
  return api_call (driver, cbid, false, 0, 0);
}

uint32_t
fake_cupti_api_call_at (bool driver, uint32_t cbid, uint64_t start, uint64_t end)
{
  return api_call (driver, cbid, false, start, end);
}

uint32_t
fake_cupti_api_begin (bool driver, uint32_t cbid)
{
  return api_call (driver, cbid, true, 0, 0);
}

void
fake_cupti_api_end (void)
{
  pthread_mutex_lock (&fk_lock);
  if (fk.api_incomplete > 0)
    fk.api_incomplete--;
  pthread_mutex_unlock (&fk_lock);
}

/* start == end == 0: the call's times are the timestamp callback's now */
static uint32_t
api_call (bool driver, uint32_t cbid, bool running, uint64_t start, uint64_t end)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  int k = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

  pthread_mutex_lock (&fk_lock);
  uint32_t corr = fk.next_corr++;
  fk.st.api_calls++;
  bool one = driver ? (cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && fk.drv_on[cbid])
                    : (cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && fk.rt_on[cbid]);
  if (fk.kind_on[kind] || one)
    {
      if (tl_depth[k] > 0 && fk.kind_on[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION])
        {
          CUpti_ActivityExternalCorrelation *x =
            room (&fk.api, record_size (CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), out, &n_out);
          if (x)
            {
              x->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
              x->externalKind = (CUpti_ExternalCorrelationKind) k;
              x->externalId = tl_stack[k][tl_depth[k] - 1];
              x->correlationId = corr;
              fk.st.ext_records++;
            }
        }
      CUpti_ActivityAPI *a = room (&fk.api, record_size (kind), out, &n_out);
      if (a)
        {
          a->kind = kind;
          a->cbid = cbid;
          a->correlationId = corr;
          if (start != 0 || end != 0)
            a->start = start, a->end = end;
          else if (fk.timestamp)
            a->start = a->end = fk.timestamp ();
          if (running)
            {
              a->end = 0;
              fk.api_incomplete++;
            }
          fk.st.api_records++;
        }
    }
  pthread_mutex_unlock (&fk_lock);
  hand_back (out, n_out);
  return corr;
}

/* A device record of kind, zeroed, in the device buffer; NULL when the kind
 * is off or the record was dropped.  Returns with fk_lock held. */
static void *
device_room (CUpti_ActivityKind kind, Out *out, int *n_out)
{
  pthread_mutex_lock (&fk_lock);
  if (!fk.kind_on[kind])
    return NULL;
  CUpti_Activity *r = room (&fk.dev, record_size (kind), out, n_out);
  if (r)
    {
      r->kind = kind;
      fk.st.device_records++;
    }
  return r;
}

static void
device_done (Out *out, int n_out)
{
  pthread_mutex_unlock (&fk_lock);
  hand_back (out, n_out);
}

void
fake_cupti_kernel (uint32_t corr, const char *name, uint64_t start, uint64_t end)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  CUpti_ActivityKernel10 *k = device_room (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, out, &n_out);
  if (k)
    {
      k->correlationId = corr;
      k->name = name;
      k->start = start;
      k->end = end;
      k->deviceId = 0;
      k->streamId = 7;
    }
  device_done (out, n_out);
}

void
fake_cupti_memcpy (uint32_t corr, uint8_t copy_kind, uint64_t bytes, uint64_t start,
                   uint64_t end)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  CUpti_ActivityMemcpy6 *m = device_room (CUPTI_ACTIVITY_KIND_MEMCPY, out, &n_out);
  if (m)
    {
      m->correlationId = corr;
      m->copyKind = copy_kind;
      m->bytes = bytes;
      m->start = start;
      m->end = end;
      m->streamId = 7;
    }
  device_done (out, n_out);
}

void
fake_cupti_memset (uint32_t corr, uint64_t bytes, uint64_t start, uint64_t end)
{
  Out out[OUT_ROOM];
  int n_out = 0;
  CUpti_ActivityMemset4 *m = device_room (CUPTI_ACTIVITY_KIND_MEMSET, out, &n_out);
  if (m)
    {
      m->correlationId = corr;
      m->bytes = bytes;
      m->start = start;
      m->end = end;
      m->streamId = 7;
    }
  device_done (out, n_out);
}

bool
fake_cupti_kind_enabled (CUpti_ActivityKind kind)
{
  bool on;
  pthread_mutex_lock (&fk_lock);
  on = (unsigned) kind < MAX_KIND && fk.kind_on[kind];
  pthread_mutex_unlock (&fk_lock);
  return on;
}

uint32_t
fake_cupti_calls_enabled (bool driver)
{
  uint32_t n = 0;
  pthread_mutex_lock (&fk_lock);
  if (driver)
    for (uint32_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
      n += fk.drv_on[i];
  else
    for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
      n += fk.rt_on[i];
  pthread_mutex_unlock (&fk_lock);
  return n;
}

bool
fake_cupti_callbacks_registered (void)
{
  bool r;
  pthread_mutex_lock (&fk_lock);
  r = fk.complete != NULL;
  pthread_mutex_unlock (&fk_lock);
  return r;
}

uint64_t
fake_cupti_timestamp (void)
{
  CUpti_TimestampCallbackFunc f;
  pthread_mutex_lock (&fk_lock);
  f = fk.timestamp;
  pthread_mutex_unlock (&fk_lock);
  return f ? f () : 0;
}

void
fake_cupti_stats (FakeCuptiStats *out)
{
  pthread_mutex_lock (&fk_lock);
  *out = fk.st;
  pthread_mutex_unlock (&fk_lock);
}
