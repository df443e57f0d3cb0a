/* pp-cupti.c — the CUPTI collector (see pp-cupti.h for the contract).
 *
 * CUPTI's activity API is process-global: one set of buffer callbacks, one
 * timestamp callback.  So the collector is a singleton (g_owner), and every
 * buffer completion is handled under g_lock, which also guards the
 * correlation map, the pending records and the name table.  Block slots have
 * their own lock (blocks_lock) so a training thread pushing a block never
 * waits for a whole buffer to be parsed.
 *
 * Tagging: push assigns the block an id and pushes it as the external
 * correlation id (CUSTOM0).  CUPTI then writes, before each API record made
 * inside the block, an EXTERNAL_CORRELATION record (externalId = block id,
 * correlationId = the API call's).  Device records carry the correlationId
 * of the call that launched them, so: correlationId -> block id -> tags.
 * A device record can come before the correlation record of its call: CUPTI
 * keeps API records in per-thread buffers and device records elsewhere.  So
 * an untagged device record waits in a bounded pending list until its tags
 * come, or two whole forced flushes (cuptiActivityFlushAll calls with
 * FORCED that started after it was read) have returned: a forced flush
 * hands back every buffer, so by then every API record made before it has
 * been delivered, and it is untagged for good.  Default (periodic) flushes
 * keep back any buffer holding an incomplete record, such as the API record
 * of a thread blocked in a synchronous copy, so they count only after
 * PENDING_ANY of them.  While no block has ever been pushed, nothing waits.
 */
#include "pp-cupti.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#define CORR_MAP_SIZE   (1u << 18)   /* correlation id -> block id, direct-mapped */
#define PENDING_FIRST   16384        /* device records waiting for their tags: first room */
#define PENDING_MAX     (1u << 20)   /* ... and at most (~90 MiB) */
#define PENDING_FLUSHES 2            /* whole forced flushes a record waits for its tags */
#define PENDING_ANY     50           /* ... or whole flushes of any kind (5 s of periodic ones) */
#define NAME_HASH_SIZE  (1u << 17)   /* > 2 * PP_CUPTI_MAX_NAMES */
#define NAME_MAX_LEN    4095         /* PP_TRACE_STRING_MAX */
#define NAME_PTR_CACHE  1024
#define EXT_KIND        CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
#define LAUNCH_CALLS    (1u << 16)   /* API calls' times by correlation id, direct-mapped */
#define LAUNCH_WAITING  (1u << 12)   /* device records of an idle device awaiting their call */
#define LAUNCH_DEVICES  64           /* devices whose last device record end is kept */
#define LAUNCH_IDLE_NS  10000        /* idle before device work, beyond back-to-back kernels */

typedef struct {
  uint64_t id;          /* 0 = empty */
  int32_t  rank, stage, microbatch, kind, step;
  int64_t  gpu_start, gpu_end;
  uint32_t n;
} Block;

typedef struct {
  uint32_t corr;
  uint64_t block;       /* 0 = empty */
} CorrEntry;

typedef struct {
  PpSpan   span;
  uint32_t corr;
  uint64_t any, forced; /* flushes started (every kind, forced) when it began to wait */
} Pending;

/* An API call's host times (from its API record), by correlation id. */
typedef struct {
  uint32_t corr;
  bool     used;
  int64_t  start, end;
} LaunchCall;

/* Device work that began on an idle device, whose API record has not come
 * yet: idle_since is the device's last record end before it. */
typedef struct {
  uint32_t corr;
  bool     used;
  uint16_t device;
  uint32_t stream, name_id;
  int64_t  idle_since;
} LaunchWait;

struct _PpCupti {
  PpProbe        *probe;
  int             rank;

  /* flush thread */
  pthread_t       flush_thread;
  bool            thread_started;
  pthread_mutex_t flush_lock;
  pthread_cond_t  flush_cond;
  bool            stop_requested;
  _Atomic bool    stopped;
  uint64_t        flush_wanted;      /* pp_cupti_request_flush tickets (flush_lock) */
  uint64_t        flush_served;      /* every ticket up to this one is flushed */
  pthread_cond_t  flush_done_cond;

  /* API records: the launch and copy calls only (api_cbids), or all */
  _Atomic bool    api_all;
  bool            api_closed;        /* stopping: no more switching (g_start_lock) */
  uint32_t       *api_cbids[2];      /* [runtime, driver] enabled one by one */
  uint32_t        n_api_cbids[2];

  /* blocks (blocks_lock) */
  pthread_mutex_t blocks_lock;
  Block          *blocks;            /* PP_CUPTI_MAX_BLOCKS */
  _Atomic uint64_t next_block;
  _Atomic int32_t last_step;

  /* under g_lock */
  CorrEntry      *corr;              /* CORR_MAP_SIZE */
  Pending        *pending;           /* pending_cap, grown up to PENDING_MAX */
  size_t          n_pending, pending_cap;
  uint32_t       *name_hash;         /* ids; 0 = empty */
  const char     *ptr_cache_key[NAME_PTR_CACHE];
  uint32_t        ptr_cache_id[NAME_PTR_CACHE];
  uint32_t        memcpy_names[11];
  uint32_t        memset_name;
  LaunchCall     *launch_calls;      /* LAUNCH_CALLS */
  LaunchWait     *launch_waiting;    /* LAUNCH_WAITING */
  int64_t         device_end[LAUNCH_DEVICES];   /* INT64_MIN: none yet */

  /* names: written once under g_lock, read anywhere */
  _Atomic(char *) *names;            /* PP_CUPTI_MAX_NAMES + 1 */
  _Atomic uint32_t n_names;

  /* flushes started and returned, every kind and forced ones (pending
   * records count them); stats count the successful ones (flushes) */
  _Atomic uint64_t started, finished, forced_started, forced_finished;

  /* stats */
  _Atomic uint64_t flushes, buffers, records, spans, tagged, dropped, launches;
  _Atomic int64_t  last_flush_ns;

  /* first error after start */
  pthread_mutex_t status_lock;
  PpStatus        status;
  char            status_msg[PP_ERROR_MSG_MAX];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static PpCupti        *g_active;          /* whose records buffers feed, under g_lock */
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
static PpCupti        *g_owner;           /* the running collector, under g_start_lock */
static bool            g_callbacks_registered;   /* under g_start_lock */

static void
set_active (PpCupti *c)
{
  pthread_mutex_lock (&g_lock);
  g_active = c;
  pthread_mutex_unlock (&g_lock);
}

/* ---- the buffer pool (global: CUPTI may hand buffers back late) ---- */

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t        *g_pool_free[PP_CUPTI_BUFFER_COUNT];
static int             g_pool_n_free;
static int             g_pool_allocated;

static void CUPTIAPI
buffer_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
  uint8_t *b = NULL;

  pthread_mutex_lock (&g_pool_lock);
  if (g_pool_n_free > 0)
    b = g_pool_free[--g_pool_n_free];
  else if (g_pool_allocated < PP_CUPTI_BUFFER_COUNT)
    {
      b = aligned_alloc (64, PP_CUPTI_BUFFER_SIZE);
      if (b)
        g_pool_allocated++;
    }
  pthread_mutex_unlock (&g_pool_lock);

  /* No buffer: CUPTI drops records and counts them (pp_cupti_dropped). */
  *buffer = b;
  *size = b ? PP_CUPTI_BUFFER_SIZE : 0;
  *max_records = 0;
}

static void
buffer_release (uint8_t *b)
{
  if (!b)
    return;
  pthread_mutex_lock (&g_pool_lock);
  if (g_pool_n_free < PP_CUPTI_BUFFER_COUNT)
    {
      g_pool_free[g_pool_n_free++] = b;
      b = NULL;
    }
  pthread_mutex_unlock (&g_pool_lock);
  free (b);
}

/* ---- errors ---- */

static const char *
cupti_str (CUptiResult r)
{
  const char *s = NULL;
  if (cuptiGetResultString (r, &s) != CUPTI_SUCCESS || !s)
    return "unknown CUPTI error";
  return s;
}

static void
note_error (PpCupti *c, PpStatus st, const char *what, CUptiResult r)
{
  pthread_mutex_lock (&c->status_lock);
  if (c->status == PP_OK)
    {
      c->status = st;
      snprintf (c->status_msg, sizeof c->status_msg, "CUPTI: %s failed: %s", what, cupti_str (r));
    }
  pthread_mutex_unlock (&c->status_lock);
}

/* ---- names (g_lock held for interning) ---- */

static uint64_t
hash_str (const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; s[i] && i < NAME_MAX_LEN; i++)
    h = (h ^ (uint8_t) s[i]) * 1099511628211ull;
  return h;
}

static uint32_t
intern (PpCupti *c, const char *name)
{
  if (!name || !*name)
    return 0;

  size_t slot_p = ((uintptr_t) name >> 4) % NAME_PTR_CACHE;
  if (c->ptr_cache_key[slot_p] == name)
    {
      /* A module unloaded and its name's memory reused: check. */
      uint32_t cid = c->ptr_cache_id[slot_p];
      const char *have = atomic_load_explicit (&c->names[cid], memory_order_relaxed);
      size_t hl = strlen (have);
      if (strncmp (have, name, hl) == 0 && (name[hl] == '\0' || hl == NAME_MAX_LEN))
        return cid;
    }

  uint64_t h = hash_str (name);
  size_t len = strnlen (name, NAME_MAX_LEN);
  uint32_t id = 0;
  for (size_t i = 0; i < NAME_HASH_SIZE; i++)
    {
      size_t slot = (h + i) & (NAME_HASH_SIZE - 1);
      uint32_t cand = c->name_hash[slot];
      if (cand == 0)
        {
          uint32_t n = atomic_load_explicit (&c->n_names, memory_order_relaxed);
          if (n >= PP_CUPTI_MAX_NAMES)
            return 0;
          char *copy = malloc (len + 1);
          if (!copy)
            return 0;
          memcpy (copy, name, len);
          copy[len] = '\0';
          id = n + 1;
          atomic_store_explicit (&c->names[id], copy, memory_order_release);
          atomic_store_explicit (&c->n_names, id, memory_order_release);
          c->name_hash[slot] = id;
          break;
        }
      const char *have = atomic_load_explicit (&c->names[cand], memory_order_relaxed);
      if (strncmp (have, name, len) == 0 && have[len] == '\0')
        {
          id = cand;
          break;
        }
    }
  /* Only a kernel's name pointer is stable (shared by its records). */
  if (id)
    {
      c->ptr_cache_key[slot_p] = name;
      c->ptr_cache_id[slot_p] = id;
    }
  return id;
}

const char *
pp_cupti_name (PpCupti *c, uint32_t id)
{
  if (!c || id == 0 || id > PP_CUPTI_MAX_NAMES)
    return NULL;
  if (id > atomic_load_explicit (&c->n_names, memory_order_acquire))
    return NULL;
  return atomic_load_explicit (&c->names[id], memory_order_acquire);
}

/* ---- blocks ---- */

uint64_t
pp_cupti_push_block (PpCupti *c, int stage, int microbatch, int kind, int step)
{
  return c ? pp_cupti_push_block_rank (c, c->rank, stage, microbatch, kind, step) : 0;
}

uint64_t
pp_cupti_push_block_rank (PpCupti *c, int rank, int stage, int microbatch, int kind, int step)
{
  if (!c)
    return 0;

  uint64_t id = atomic_fetch_add (&c->next_block, 1);
  Block *b = &c->blocks[id % PP_CUPTI_MAX_BLOCKS];
  pthread_mutex_lock (&c->blocks_lock);
  *b = (Block) {
    .id = id, .rank = rank, .stage = stage, .microbatch = microbatch,
    .kind = kind, .step = step, .gpu_start = INT64_MAX, .gpu_end = INT64_MIN,
  };
  pthread_mutex_unlock (&c->blocks_lock);
  atomic_store_explicit (&c->last_step, step, memory_order_relaxed);

  CUptiResult r = cuptiActivityPushExternalCorrelationId (EXT_KIND, id);
  if (r != CUPTI_SUCCESS)
    {
      note_error (c, PP_EIO, "cuptiActivityPushExternalCorrelationId", r);
      return 0;
    }
  return id;
}

void
pp_cupti_pop_block (PpCupti *c)
{
  if (!c)
    return;
  uint64_t last = 0;
  CUptiResult r = cuptiActivityPopExternalCorrelationId (EXT_KIND, &last);
  if (r != CUPTI_SUCCESS)
    note_error (c, PP_EIO, "cuptiActivityPopExternalCorrelationId", r);
}

/* Fills the span's tags from block id, and with gpu the block's GPU time
 * from the span's; false when the id is gone. */
static bool
block_tag (PpCupti *c, uint64_t id, PpSpan *s, bool gpu)
{
  bool ok = false;
  Block *b = &c->blocks[id % PP_CUPTI_MAX_BLOCKS];
  pthread_mutex_lock (&c->blocks_lock);
  if (b->id == id)
    {
      s->rank = b->rank;
      s->stage = b->stage;
      s->microbatch = b->microbatch;
      s->step = b->step;
      if (gpu)
        {
          if (s->start_ns < b->gpu_start)
            b->gpu_start = s->start_ns;
          if (s->end_ns > b->gpu_end)
            b->gpu_end = s->end_ns;
          b->n++;
        }
      ok = true;
    }
  pthread_mutex_unlock (&c->blocks_lock);
  return ok;
}

bool
pp_cupti_block_kept (PpCupti *c, uint64_t block_id)
{
  if (!c || block_id == 0)
    return false;
  Block *b = &c->blocks[block_id % PP_CUPTI_MAX_BLOCKS];
  pthread_mutex_lock (&c->blocks_lock);
  bool kept = b->id == block_id;
  pthread_mutex_unlock (&c->blocks_lock);
  return kept;
}

bool
pp_cupti_block_gpu_time (PpCupti *c, uint64_t block_id, int64_t *start_ns,
                         int64_t *end_ns, uint32_t *n_records)
{
  if (!c || block_id == 0)
    return false;
  bool ok = false;
  Block *b = &c->blocks[block_id % PP_CUPTI_MAX_BLOCKS];
  pthread_mutex_lock (&c->blocks_lock);
  if (b->id == block_id && b->n > 0)
    {
      if (start_ns)
        *start_ns = b->gpu_start;
      if (end_ns)
        *end_ns = b->gpu_end;
      if (n_records)
        *n_records = b->n;
      ok = true;
    }
  pthread_mutex_unlock (&c->blocks_lock);
  return ok;
}

/* ---- records (g_lock held) ---- */

static void
emit (PpCupti *c, PpSpan *s, uint64_t block)
{
  if (block && block_tag (c, block, s, true))
    atomic_fetch_add_explicit (&c->tagged, 1, memory_order_relaxed);
  pp_probe_record_span (c->probe, s);
  atomic_fetch_add_explicit (&c->spans, 1, memory_order_relaxed);
}

static uint64_t
corr_lookup (PpCupti *c, uint32_t corr)
{
  CorrEntry *e = &c->corr[corr % CORR_MAP_SIZE];
  return (e->block && e->corr == corr) ? e->block : 0;
}

/* Room for one more pending record (g_lock held). */
static bool
pending_room (PpCupti *c)
{
  if (c->n_pending < c->pending_cap)
    return true;
  if (c->pending_cap >= PENDING_MAX)
    return false;
  size_t cap = c->pending_cap ? 2 * c->pending_cap : PENDING_FIRST;
  Pending *p = realloc (c->pending, cap * sizeof *p);
  if (!p)
    return false;
  c->pending = p;
  c->pending_cap = cap;
  return true;
}

/* A device record: tag and emit it now, or let it wait for its tags. */
static void
device_record (PpCupti *c, PpSpan *s, uint32_t corr)
{
  uint64_t block = corr_lookup (c, corr);
  if (block || atomic_load_explicit (&c->next_block, memory_order_relaxed) == 1
      || !pending_room (c))
    {
      emit (c, s, block);
      return;
    }
  c->pending[c->n_pending++] = (Pending) {
    .span = *s, .corr = corr,
    .any = atomic_load (&c->started), .forced = atomic_load (&c->forced_started),
  };
}

/* Whether every record that could carry p's tags has been handed over: two
 * whole forced flushes (they return every buffer) began after p was read,
 * or PENDING_ANY whole flushes of any kind (a default flush keeps back a
 * buffer with an incomplete record: a thread blocked in a traced call
 * holds its tags).  Started counts were read when p began to wait, so
 * finished >= started + n means n whole flushes began after it. */
static bool
pending_done (PpCupti *c, const Pending *p)
{
  return atomic_load (&c->forced_finished) >= p->forced + PENDING_FLUSHES
         || atomic_load (&c->finished) >= p->any + PENDING_ANY;
}

static void
retry_pending (PpCupti *c, bool all)
{
  size_t kept = 0;
  for (size_t i = 0; i < c->n_pending; i++)
    {
      Pending *p = &c->pending[i];
      uint64_t block = corr_lookup (c, p->corr);
      if (block || all || pending_done (c, p))
        emit (c, &p->span, block);
      else
        c->pending[kept++] = *p;
    }
  c->n_pending = kept;
}

static const char *
memcpy_kind_name (uint8_t k)
{
  switch (k)
    {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
    }
}

static PpSpan
base_span (PpCupti *c, PpSpanKind kind, uint64_t start, uint64_t end,
           uint32_t device, uint32_t stream)
{
  return (PpSpan) {
    .start_ns = (int64_t) start,
    .end_ns = (int64_t) (end >= start ? end : start),
    .rank = c->rank,
    .stage = -1,
    .microbatch = -1,
    .step = atomic_load_explicit (&c->last_step, memory_order_relaxed),
    .kind = (uint16_t) kind,
    .device = (uint16_t) (device < 0xffff ? device : 0xfffe),
    .stream = stream,
    .peer_rank = -1,
  };
}

/* ---- launches (g_lock held): see pp-cupti.h, "Launches" ----
 *
 * A call's API record and its device record come in either order (API
 * records from per-thread buffers, device records from others), so each
 * side is kept for the other in a direct-mapped table by correlation id:
 * bounded memory, and an entry overwritten by a call 2^16 (2^12) ids later
 * only costs that launch its LAUNCH span.  Whether a device was idle is
 * decided when its record is read, against the latest end of the records
 * read before it on that device: CUPTI hands a device's records over
 * roughly in order; one read late can only make an extra LAUNCH, whose
 * overlap with a gap the analysis still bounds by the gap. */

/* Writes the LAUNCH span of call corr: the call's host times, the device
 * and stream of its work, the tags of the block it was made in. */
static void
launch_emit (PpCupti *c, uint32_t corr, int64_t start, int64_t end, uint16_t device,
             uint32_t stream, uint32_t name_id)
{
  PpSpan s = base_span (c, PP_SPAN_LAUNCH, (uint64_t) start, (uint64_t) end, device, stream);
  s.name_id = name_id;
  uint64_t block = corr_lookup (c, corr);
  if (block)
    (void) block_tag (c, block, &s, false);   /* host times: not the block's GPU time */
  pp_probe_record_span (c->probe, &s);
  atomic_fetch_add_explicit (&c->launches, 1, memory_order_relaxed);
}

/* Device record s of call corr, as read: when its device had been idle
 * for more than LAUNCH_IDLE_NS before it, its call may be what the device
 * waited for: a LAUNCH when the call ended after the device went idle,
 * decided now if the call's API record came first, else when it comes. */
static void
launch_device (PpCupti *c, const PpSpan *s, uint32_t corr)
{
  if (s->device >= LAUNCH_DEVICES)
    return;
  int64_t *last = &c->device_end[s->device];
  int64_t since = *last;
  if (s->end_ns > *last)
    *last = s->end_ns;
  /* since == INT64_MIN: the device's first record, idle since we started */
  if (since != INT64_MIN && (double) s->start_ns - (double) since <= LAUNCH_IDLE_NS)
    return;
  LaunchCall *k = &c->launch_calls[corr % LAUNCH_CALLS];
  if (k->used && k->corr == corr)
    {
      if (k->end > since)
        launch_emit (c, corr, k->start, k->end, s->device, s->stream, s->name_id);
      return;
    }
  c->launch_waiting[corr % LAUNCH_WAITING] = (LaunchWait) {
    .corr = corr, .used = true, .device = s->device, .stream = s->stream,
    .name_id = s->name_id, .idle_since = since,
  };
}

/* An API record: its times, kept for device records to come (a graph
 * launch has many), and the LAUNCH of a device record that waited for it.
 * Both layers' records of one call, if they share the id, widen it. */
static void
launch_call (PpCupti *c, uint32_t corr, uint64_t start, uint64_t end)
{
  if (start == 0 || end < start || end > (uint64_t) INT64_MAX)
    return;   /* no times (a call still running), or nonsense */
  LaunchCall *k = &c->launch_calls[corr % LAUNCH_CALLS];
  if (k->used && k->corr == corr)
    {
      if ((int64_t) start < k->start)
        k->start = (int64_t) start;
      if ((int64_t) end > k->end)
        k->end = (int64_t) end;
    }
  else
    *k = (LaunchCall) { .corr = corr, .used = true, .start = (int64_t) start, .end = (int64_t) end };
  LaunchWait *w = &c->launch_waiting[corr % LAUNCH_WAITING];
  if (w->used && w->corr == corr)
    {
      w->used = false;
      if (k->end > w->idle_since)
        launch_emit (c, corr, k->start, k->end, w->device, w->stream, w->name_id);
    }
}

static void
handle_record (PpCupti *c, CUpti_Activity *rec)
{
  switch (rec->kind)
    {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      {
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *) rec;
        if (k->start == 0 || k->end == 0)
          return;
        PpSpan s = base_span (c, PP_SPAN_KERNEL, k->start, k->end, k->deviceId, k->streamId);
        s.name_id = intern (c, k->name);
        launch_device (c, &s, k->correlationId);
        device_record (c, &s, k->correlationId);
        break;
      }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      {
        CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *) rec;
        if (m->start == 0 || m->end == 0)
          return;
        PpSpan s = base_span (c, PP_SPAN_MEMCPY, m->start, m->end, m->deviceId, m->streamId);
        s.bytes = m->bytes;
        uint8_t k = m->copyKind <= 10 ? m->copyKind : 0;
        if (!c->memcpy_names[k])
          c->memcpy_names[k] = intern (c, memcpy_kind_name (k));
        s.name_id = c->memcpy_names[k];
        launch_device (c, &s, m->correlationId);
        device_record (c, &s, m->correlationId);
        break;
      }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      {
        CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *) rec;
        if (m->start == 0 || m->end == 0)
          return;
        PpSpan s = base_span (c, PP_SPAN_MEMSET, m->start, m->end, m->deviceId, m->streamId);
        s.bytes = m->bytes;
        if (!c->memset_name)
          c->memset_name = intern (c, "memset");
        s.name_id = c->memset_name;
        launch_device (c, &s, m->correlationId);
        device_record (c, &s, m->correlationId);
        break;
      }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      {
        CUpti_ActivityExternalCorrelation *x = (CUpti_ActivityExternalCorrelation *) rec;
        if (x->externalKind != EXT_KIND || x->externalId == 0)
          return;
        CorrEntry *e = &c->corr[x->correlationId % CORR_MAP_SIZE];
        e->corr = x->correlationId;
        e->block = x->externalId;
        break;
      }
    /* DRIVER / RUNTIME records: CUPTI writes the EXTERNAL_CORRELATION
     * records with them; their times say when a launch returned */
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      {
        CUpti_ActivityAPI *a = (CUpti_ActivityAPI *) rec;
        launch_call (c, a->correlationId, a->start, a->end);
        break;
      }
    default:
      break;
    }
}

static void CUPTIAPI
buffer_completed (CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                  size_t size, size_t valid)
{
  /* Asked before g_lock: no CUPTI call while holding it (see start). */
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords (ctx, stream_id, &dropped) != CUPTI_SUCCESS)
    dropped = 0;

  pthread_mutex_lock (&g_lock);
  PpCupti *c = g_active;
  if (c && buffer)
    {
      CUpti_Activity *rec = NULL;
      uint64_t n = 0;
      while (valid > 0 && cuptiActivityGetNextRecord (buffer, valid, &rec) == CUPTI_SUCCESS)
        {
          handle_record (c, rec);
          n++;
        }
      retry_pending (c, false);
      atomic_fetch_add_explicit (&c->records, n, memory_order_relaxed);
      atomic_fetch_add_explicit (&c->buffers, 1, memory_order_relaxed);
    }
  if (c && dropped)
    atomic_fetch_add_explicit (&c->dropped, dropped, memory_order_relaxed);
  pthread_mutex_unlock (&g_lock);
  buffer_release (buffer);
}

/* ---- the clock ---- */

static uint64_t CUPTIAPI
monotonic_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* ---- flushing ---- */

static CUptiResult
flush_all (PpCupti *c, uint32_t flag)
{
  bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  atomic_fetch_add (&c->started, 1);
  if (forced)
    atomic_fetch_add (&c->forced_started, 1);
  CUptiResult r = cuptiActivityFlushAll (flag);
  if (forced)
    atomic_fetch_add (&c->forced_finished, 1);
  atomic_fetch_add (&c->finished, 1);
  if (r == CUPTI_SUCCESS)
    {
      atomic_fetch_add (&c->flushes, 1);
      atomic_store (&c->last_flush_ns, pp_probe_now_ns ());
    }
  /* Records that waited for their tags: found now, or never. */
  pthread_mutex_lock (&g_lock);
  if (g_active == c)
    retry_pending (c, false);
  pthread_mutex_unlock (&g_lock);
  return r;
}

static void
add_ns (struct timespec *t, int64_t ns)
{
  t->tv_sec += (time_t) (ns / 1000000000LL);
  t->tv_nsec += (long) (ns % 1000000000LL);
  if (t->tv_nsec >= 1000000000L)
    {
      t->tv_nsec -= 1000000000L;
      t->tv_sec++;
    }
}

static void *
flush_main (void *data)
{
  PpCupti *c = data;
  struct timespec deadline;

  clock_gettime (CLOCK_MONOTONIC, &deadline);
  add_ns (&deadline, PP_CUPTI_FLUSH_PERIOD_NS);
  pthread_mutex_lock (&c->flush_lock);
  for (;;)
    {
      while (!c->stop_requested && c->flush_wanted == c->flush_served
             && pthread_cond_timedwait (&c->flush_cond, &c->flush_lock, &deadline) != ETIMEDOUT)
        ;
      /* A request (pp_cupti_request_flush) is served at once and forced:
       * its caller's work has completed and it wants all of it.  It does
       * not move the periodic flushes.  Stopping, a ticket still open gets
       * its flush (no new ones are given). */
      uint64_t serving = c->flush_wanted;
      bool forced = serving != c->flush_served;
      if (c->stop_requested && !forced)
        break;
      if (!forced)
        {
          struct timespec now;
          add_ns (&deadline, PP_CUPTI_FLUSH_PERIOD_NS);
          /* Behind by more than a period (a stalled machine): no catch-up burst. */
          clock_gettime (CLOCK_MONOTONIC, &now);
          if (now.tv_sec > deadline.tv_sec + 1)
            {
              deadline = now;
              add_ns (&deadline, PP_CUPTI_FLUSH_PERIOD_NS);
            }
        }
      pthread_mutex_unlock (&c->flush_lock);
      CUptiResult r = flush_all (c, forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
      if (r != CUPTI_SUCCESS)
        note_error (c, PP_EIO, "cuptiActivityFlushAll", r);
      pthread_mutex_lock (&c->flush_lock);
      if (forced)
        {
          c->flush_served = serving;
          pthread_cond_broadcast (&c->flush_done_cond);
        }
    }
  pthread_mutex_unlock (&c->flush_lock);
  return NULL;
}

uint64_t
pp_cupti_request_flush (PpCupti *c)
{
  uint64_t ticket;
  if (!c || c->stopped)
    return 0;
  pthread_mutex_lock (&c->flush_lock);
  if (c->stop_requested)
    {
      pthread_mutex_unlock (&c->flush_lock);
      return 0;
    }
  ticket = ++c->flush_wanted;
  pthread_cond_signal (&c->flush_cond);
  pthread_mutex_unlock (&c->flush_lock);
  return ticket;
}

bool
pp_cupti_wait_flush (PpCupti *c, uint64_t ticket, int64_t timeout_ns)
{
  struct timespec deadline;
  bool done;
  if (!c || ticket == 0)
    return true;
  clock_gettime (CLOCK_MONOTONIC, &deadline);
  add_ns (&deadline, timeout_ns);
  pthread_mutex_lock (&c->flush_lock);
  while (c->flush_served < ticket
         && pthread_cond_timedwait (&c->flush_done_cond, &c->flush_lock, &deadline) != ETIMEDOUT)
    ;
  done = c->flush_served >= ticket;
  pthread_mutex_unlock (&c->flush_lock);
  return done;
}

PpStatus
pp_cupti_flush (PpCupti *c, PpError *err)
{
  if (!c)
    return PP_OK;
  if (c->stopped)
    return PP_OK;
  CUptiResult r = flush_all (c, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS)
    {
      note_error (c, PP_EIO, "cuptiActivityFlushAll", r);
      return pp_error_set (err, PP_EIO, "CUPTI: cuptiActivityFlushAll failed: %s", cupti_str (r));
    }
  return PP_OK;
}

/* ---- start / stop ---- */

/* Device records, and the correlation of API calls with our blocks.  The API
 * records themselves are enabled by enable_api_records. */
static const CUpti_ActivityKind kinds[] = {
  CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
  CUPTI_ACTIVITY_KIND_MEMCPY,
  CUPTI_ACTIVITY_KIND_MEMSET,
  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};
static const char *const kind_names[] = {
  "CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "EXTERNAL_CORRELATION",
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

static void
disable_kinds (size_t n)
{
  for (size_t i = 0; i < n; i++)
    cuptiActivityDisable (kinds[i]);
}

/* ---- API records ----
 *
 * A device record finds its block through the API record of the call that
 * launched it (its EXTERNAL_CORRELATION record precedes that API record).
 * Both API layers are needed: with the driver's alone (tried on the H200)
 * the kernels our runtime calls launch lost their tags.  But only the calls
 * that make device records need one: every other call (event records,
 * stream waits, context switches: about half of a step's calls) would cost
 * a record and its correlation record for nothing.  So the launch, copy and
 * memset calls of both layers are enabled one by one, by name, from the
 * CUPTI in use; PIPESCOPE_CUPTI_API=all, or a CUPTI without per-call
 * control, records every call. */

bool
pp_cupti_traces_api (bool driver, const char *name)
{
  const char *prefix = driver ? "cu" : "cuda";
  size_t n = strlen (prefix);
  if (name == NULL)
    return false;
  if (strstr (name, "Launch") != NULL)   /* kernels, cooperative, Ex, graphs, __cudaLaunchKernel */
    return true;
  if (strncmp (name, prefix, n) != 0)
    return false;
  return strncmp (name + n, "Memcpy", 6) == 0 || strncmp (name + n, "Memset", 6) == 0;
}

static CUptiResult
enable_api (int layer, uint32_t cbid, uint8_t on)
{
  return layer == 0 ? cuptiActivityEnableRuntimeApi ((CUpti_CallbackId) cbid, on)
                    : cuptiActivityEnableDriverApi ((CUpti_CallbackId) cbid, on);
}

static void
disable_api_records (PpCupti *c)
{
  if (c->api_all)
    {
      cuptiActivityDisable (CUPTI_ACTIVITY_KIND_RUNTIME);
      cuptiActivityDisable (CUPTI_ACTIVITY_KIND_DRIVER);
    }
  for (int layer = 0; layer < 2; layer++)
    for (uint32_t i = 0; i < c->n_api_cbids[layer]; i++)
      (void) enable_api (layer, c->api_cbids[layer][i], 0);
}

static bool
enable_selected_api_records (PpCupti *c)
{
  static const uint32_t size[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
  static const CUpti_CallbackDomain domain[2] = { CUPTI_CB_DOMAIN_RUNTIME_API,
                                                  CUPTI_CB_DOMAIN_DRIVER_API };
  for (int layer = 0; layer < 2; layer++)
    {
      c->api_cbids[layer] = calloc (size[layer], sizeof (uint32_t));
      if (c->api_cbids[layer] == NULL)
        return false;
      for (uint32_t cbid = 1; cbid < size[layer]; cbid++)
        {
          const char *name = NULL;
          if (cuptiGetCallbackName (domain[layer], cbid, &name) != CUPTI_SUCCESS
              || !pp_cupti_traces_api (layer == 1, name))
            continue;
          if (enable_api (layer, cbid, 1) != CUPTI_SUCCESS)
            return false;
          c->api_cbids[layer][c->n_api_cbids[layer]++] = cbid;
        }
    }
  /* a kernel launch of each layer, or this CUPTI names its calls otherwise */
  return c->n_api_cbids[0] > 0 && c->n_api_cbids[1] > 0;
}

/* Every call of both layers; on failure neither, and *what names the call. */
static CUptiResult
enable_every_api_record (const char **what)
{
  CUptiResult r;
  if ((r = cuptiActivityEnable (CUPTI_ACTIVITY_KIND_RUNTIME)) != CUPTI_SUCCESS)
    *what = "cuptiActivityEnable(RUNTIME)";
  else if ((r = cuptiActivityEnable (CUPTI_ACTIVITY_KIND_DRIVER)) != CUPTI_SUCCESS)
    {
      cuptiActivityDisable (CUPTI_ACTIVITY_KIND_RUNTIME);
      *what = "cuptiActivityEnable(DRIVER)";
    }
  return r;
}

bool
pp_cupti_record_all_api (PpCupti *c)
{
  const char *what = NULL;
  bool done = false;
  if (!c || c->stopped)
    return false;
  pthread_mutex_lock (&g_start_lock);
  if (!c->api_all && !c->api_closed && g_owner == c
      && enable_every_api_record (&what) == CUPTI_SUCCESS)
    done = c->api_all = true;
  pthread_mutex_unlock (&g_start_lock);
  return done;
}

static CUptiResult
enable_api_records (PpCupti *c, const char **what)
{
  const char *env = getenv ("PIPESCOPE_CUPTI_API");
  c->api_all = env != NULL && strcmp (env, "all") == 0;
  if (!c->api_all && !enable_selected_api_records (c))
    {
      disable_api_records (c);
      c->n_api_cbids[0] = c->n_api_cbids[1] = 0;
      c->api_all = true;
    }
  return c->api_all ? enable_every_api_record (what) : CUPTI_SUCCESS;
}

static PpStatus
unavailable (PpError *err, const char *what, CUptiResult r)
{
  const char *why;
  switch ((int) r)
    {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      why = "another profiler (nsys, ncu, a PyTorch profiler) already holds CUPTI in this process";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_UNKNOWN:
    case CUPTI_ERROR_INVALID_DEVICE:
      why = "no usable GPU or CUDA driver";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      why = "not permitted (profiling is restricted to admin users)";
      break;
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_SUPPORTED:
      why = "not supported on this GPU or setup";
      break;
    default:
      why = "CUPTI refused";
      break;
    }
  return pp_error_set (err, PP_EUNSUPPORTED, "GPU tracing unavailable: %s (%s: %s)",
                       why, what, cupti_str (r));
}

static void
cupti_free_memory (PpCupti *c)
{
  if (c->names)
    {
      uint32_t n = atomic_load (&c->n_names);
      for (uint32_t i = 1; i <= n; i++)
        free (atomic_load (&c->names[i]));
    }
  free (c->names);
  free (c->name_hash);
  free (c->pending);
  free (c->launch_calls);
  free (c->launch_waiting);
  free (c->corr);
  free (c->blocks);
  free (c->api_cbids[0]);
  free (c->api_cbids[1]);
  pthread_mutex_destroy (&c->blocks_lock);
  pthread_mutex_destroy (&c->status_lock);
  pthread_mutex_destroy (&c->flush_lock);
  pthread_cond_destroy (&c->flush_cond);
  pthread_cond_destroy (&c->flush_done_cond);
  free (c);
}

PpCupti *
pp_cupti_start (PpProbe *probe, int rank, PpError *err)
{
  if (!probe)
    {
      pp_error_set (err, PP_EINVAL, "pp_cupti_start: no probe");
      return NULL;
    }
  const char *env = getenv ("PIPESCOPE_CUPTI");
  if (env && strcmp (env, "0") == 0)
    {
      pp_error_set (err, PP_EUNSUPPORTED, "GPU tracing unavailable: turned off (PIPESCOPE_CUPTI=0)");
      return NULL;
    }

  PpCupti *c = calloc (1, sizeof *c);
  if (!c)
    {
      pp_error_set (err, PP_ENOMEM, "CUPTI collector: out of memory");
      return NULL;
    }
  c->probe = probe;
  c->rank = rank;
  atomic_init (&c->next_block, 1);
  pthread_mutex_init (&c->blocks_lock, NULL);
  pthread_mutex_init (&c->status_lock, NULL);
  pthread_mutex_init (&c->flush_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&c->flush_cond, &ca);
  pthread_cond_init (&c->flush_done_cond, &ca);
  pthread_condattr_destroy (&ca);
  c->blocks = calloc (PP_CUPTI_MAX_BLOCKS, sizeof *c->blocks);
  c->corr = calloc (CORR_MAP_SIZE, sizeof *c->corr);
  c->name_hash = calloc (NAME_HASH_SIZE, sizeof *c->name_hash);
  c->names = calloc (PP_CUPTI_MAX_NAMES + 1, sizeof *c->names);
  c->launch_calls = calloc (LAUNCH_CALLS, sizeof *c->launch_calls);
  c->launch_waiting = calloc (LAUNCH_WAITING, sizeof *c->launch_waiting);
  for (int d = 0; d < LAUNCH_DEVICES; d++)
    c->device_end[d] = INT64_MIN;
  if (!c->blocks || !c->corr || !c->name_hash || !c->names || !c->launch_calls
      || !c->launch_waiting || !pending_room (c))
    {
      cupti_free_memory (c);
      pp_error_set (err, PP_ENOMEM, "CUPTI collector: out of memory");
      return NULL;
    }

  /* g_start_lock, not g_lock, around CUPTI calls: a CUPTI thread may hold
   * CUPTI's own locks while it waits for g_lock in buffer_completed. */
  pthread_mutex_lock (&g_start_lock);
  if (g_owner)
    {
      pthread_mutex_unlock (&g_start_lock);
      cupti_free_memory (c);
      pp_error_set (err, PP_EUNSUPPORTED,
                    "GPU tracing unavailable: a CUPTI collector already runs in this process");
      return NULL;
    }

  CUptiResult r;
  const char *what = NULL;
  char what_buf[96];
  /* The clock first: every record after this is CLOCK_MONOTONIC. */
  if ((r = cuptiActivityRegisterTimestampCallback (monotonic_ns)) != CUPTI_SUCCESS)
    what = "cuptiActivityRegisterTimestampCallback";
  else if (!g_callbacks_registered
           && (r = cuptiActivityRegisterCallbacks (buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
    what = "cuptiActivityRegisterCallbacks";
  else
    {
      g_callbacks_registered = true;
      set_active (c);
      for (size_t i = 0; i < N_KINDS; i++)
        if ((r = cuptiActivityEnable (kinds[i])) != CUPTI_SUCCESS)
          {
            snprintf (what_buf, sizeof what_buf, "cuptiActivityEnable(%s)", kind_names[i]);
            what = what_buf;
            disable_kinds (i);
            set_active (NULL);
            break;
          }
      if (!what && (r = enable_api_records (c, &what)) != CUPTI_SUCCESS)
        {
          disable_kinds (N_KINDS);
          set_active (NULL);
        }
    }
  if (what)
    {
      pthread_mutex_unlock (&g_start_lock);
      cupti_free_memory (c);
      unavailable (err, what, r);
      return NULL;
    }

  if (pthread_create (&c->flush_thread, NULL, flush_main, c) != 0)
    {
      disable_api_records (c);
      disable_kinds (N_KINDS);
      cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      set_active (NULL);
      pthread_mutex_unlock (&g_start_lock);
      cupti_free_memory (c);
      pp_error_set (err, PP_EIO, "CUPTI collector: cannot start the flush thread");
      return NULL;
    }
  g_owner = c;
  pthread_mutex_unlock (&g_start_lock);
  c->thread_started = true;
  return c;
}

void
pp_cupti_stop (PpCupti *c)
{
  if (!c || c->stopped)
    return;

  if (c->thread_started)
    {
      pthread_mutex_lock (&c->flush_lock);
      c->stop_requested = true;
      pthread_cond_signal (&c->flush_cond);
      pthread_mutex_unlock (&c->flush_lock);
      pthread_join (c->flush_thread, NULL);
      c->thread_started = false;
    }

  CUptiResult r = flush_all (c, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS)
    note_error (c, PP_EIO, "cuptiActivityFlushAll", r);
  /* under g_start_lock: pp_cupti_record_all_api may be switching now */
  pthread_mutex_lock (&g_start_lock);
  c->api_closed = true;
  disable_api_records (c);
  disable_kinds (N_KINDS);
  pthread_mutex_unlock (&g_start_lock);
  /* Whatever disabling pushed out, then the records still waiting. */
  cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

  pthread_mutex_lock (&g_lock);
  if (g_active == c)
    {
      retry_pending (c, true);
      g_active = NULL;
    }
  pthread_mutex_unlock (&g_lock);
  c->stopped = true;

  pthread_mutex_lock (&g_start_lock);
  if (g_owner == c)
    g_owner = NULL;
  pthread_mutex_unlock (&g_start_lock);
}

void
pp_cupti_free (PpCupti *c)
{
  if (!c)
    return;
  pp_cupti_stop (c);
  cupti_free_memory (c);
}

uint64_t
pp_cupti_dropped (PpCupti *c)
{
  return c ? atomic_load (&c->dropped) : 0;
}

void
pp_cupti_get_stats (PpCupti *c, PpCuptiStats *out)
{
  if (!out)
    return;
  memset (out, 0, sizeof *out);
  if (!c)
    return;
  out->flushes = atomic_load (&c->flushes);
  out->last_flush_ns = atomic_load (&c->last_flush_ns);
  out->buffers = atomic_load (&c->buffers);
  out->records = atomic_load (&c->records);
  out->spans = atomic_load (&c->spans);
  out->tagged = atomic_load (&c->tagged);
  out->dropped = atomic_load (&c->dropped);
  out->launches = atomic_load (&c->launches);
  out->api_calls = c->api_all ? 0 : c->n_api_cbids[0] + c->n_api_cbids[1];
}

PpStatus
pp_cupti_status (PpCupti *c, PpError *err)
{
  if (!c)
    return PP_OK;
  pthread_mutex_lock (&c->status_lock);
  PpStatus st = c->status;
  if (st != PP_OK)
    pp_error_set (err, st, "%s", c->status_msg);
  pthread_mutex_unlock (&c->status_lock);
  return st;
}
