/* pp-trace-reader.c — reads a trace (docs/trace-format.md) one item at a
 * time, from memory or from a file descriptor, in either byte order.
 *
 * Every length read from the file is checked against the bytes of its frame
 * before it is used, and every allocation is bounded by the frame size, which
 * is bounded by PP_TRACE_FRAME_MAX. */
#include "pp-trace.h"
#include "pp-trace-format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20)

struct _PpTraceReader {
  int            fd;           /* -1 for memory */
  int            owns_fd;
  const uint8_t *data;         /* bytes [0, len) are loaded; data[pos] is next */
  size_t         pos;
  size_t         len;
  uint64_t       base;         /* file offset of data[0] */
  uint8_t       *buf;          /* fd mode: owns data */
  size_t         cap;
  int            eof;          /* nothing more will be loaded */
  int            stream;       /* bytes come from pp_trace_reader_feed */

  int            header_done;
  int            swap;
  int            major, minor;
  uint64_t       job_id;       /* 1.3; 0 before */

  /* the span batch being handed out */
  const uint8_t *batch;
  size_t         batch_slots;
  size_t         batch_i;
  uint64_t       batch_offset;
  int32_t        batch_process;

  PpTraceDescription desc;
  PpTracePlanAction *plan;
  size_t             plan_cap;

  int            ended;
  int            truncated;
  PpStatus       failed;
  char           failed_msg[PP_ERROR_MSG_MAX];
};

static inline uint16_t r16 (const PpTraceReader *r, uint16_t v) { return r->swap ? __builtin_bswap16 (v) : v; }
static inline uint32_t r32 (const PpTraceReader *r, uint32_t v) { return r->swap ? __builtin_bswap32 (v) : v; }
static inline uint64_t r64 (const PpTraceReader *r, uint64_t v) { return r->swap ? __builtin_bswap64 (v) : v; }

static inline uint32_t ld32 (const PpTraceReader *r, const uint8_t *p) { uint32_t v; memcpy (&v, p, 4); return r32 (r, v); }
static inline uint16_t ld16 (const PpTraceReader *r, const uint8_t *p) { uint16_t v; memcpy (&v, p, 2); return r16 (r, v); }
static inline uint64_t ld64 (const PpTraceReader *r, const uint8_t *p) { uint64_t v; memcpy (&v, p, 8); return r64 (r, v); }
static inline int32_t  ldi32 (const PpTraceReader *r, const uint8_t *p) { return (int32_t) ld32 (r, p); }
static inline int64_t  ldi64 (const PpTraceReader *r, const uint8_t *p) { return (int64_t) ld64 (r, p); }
static inline double
ldf64 (const PpTraceReader *r, const uint8_t *p)
{
  uint64_t u = ld64 (r, p);
  double d;
  memcpy (&d, &u, 8);
  return d;
}

static const char *
frame_type_name (unsigned type)
{
  switch (type)
    {
    case PP_TRACE_FRAME_DESCRIPTION:  return "DESCRIPTION";
    case PP_TRACE_FRAME_PLAN:         return "PLAN";
    case PP_TRACE_FRAME_SPANS:        return "SPANS";
    case PP_TRACE_FRAME_COUNTER:      return "COUNTER";
    case PP_TRACE_FRAME_STEP_MARKER:  return "STEP_MARKER";
    case PP_TRACE_FRAME_CLOCK_OFFSET: return "CLOCK_OFFSET";
    case PP_TRACE_FRAME_RANK:         return "RANK";
    case PP_TRACE_FRAME_PROCESS:      return "PROCESS";
    case PP_TRACE_FRAME_OPEN:         return "OPEN";
    case PP_TRACE_FRAME_STRING:       return "STRING";
    case PP_TRACE_FRAME_DROPPED:      return "DROPPED";
    default:                          return "unknown";
    }
}

__attribute__ ((format (printf, 4, 5)))
static PpStatus
fail (PpTraceReader *r, PpError *err, PpStatus status, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (r->failed_msg, sizeof r->failed_msg, fmt, ap);
  va_end (ap);
  r->failed = status;
  return pp_error_set (err, status, "%s", r->failed_msg);
}

/* Malformed frame at offset off of type type: the message says where. */
#define FRAME_FAIL(r, err, off, type, fmt, ...)                                   \
  fail ((r), (err), PP_EFORMAT, "trace: frame at byte offset %" PRIu64 " (type %u, %s): " fmt, \
        (uint64_t) (off), (unsigned) (type), frame_type_name (type), __VA_ARGS__)

/* Makes n bytes from data[pos] available.  1: they are; 0: the input ends
 * before; -1: I/O error (reader failed, err set). */
static int
ensure (PpTraceReader *r, size_t n, PpError *err)
{
  if (r->len - r->pos >= n)
    return 1;
  if (r->eof || r->stream)
    return 0;
  /* fd mode: keep the unread tail, then read until n bytes are there. */
  size_t tail = r->len - r->pos;
  if (r->pos > 0)
    {
      memmove (r->buf, r->buf + r->pos, tail);
      r->base += r->pos;
      r->pos = 0;
      r->len = tail;
    }
  if (r->cap < n)
    {
      size_t ncap = n < READ_CHUNK ? READ_CHUNK : n;
      uint8_t *nb = realloc (r->buf, ncap);
      if (nb == NULL)
        {
          fail (r, err, PP_ENOMEM, "trace: out of memory reading a %zu-byte frame", n);
          return -1;
        }
      r->buf = nb;
      r->cap = ncap;
    }
  r->data = r->buf;
  while (r->len < n)
    {
      ssize_t got = read (r->fd, r->buf + r->len, r->cap - r->len);
      if (got < 0)
        {
          if (errno == EINTR)
            continue;
          fail (r, err, PP_EIO, "trace: cannot read at byte offset %" PRIu64 ": %s",
                r->base + r->len, strerror (errno));
          return -1;
        }
      if (got == 0)
        {
          r->eof = 1;
          return 0;
        }
      r->len += (size_t) got;
    }
  return 1;
}

static PpTraceReader *
reader_new (PpError *err)
{
  PpTraceReader *r = calloc (1, sizeof *r);
  if (r == NULL)
    pp_error_set (err, PP_ENOMEM, "trace: out of memory for a reader");
  return r;
}

PpTraceReader *
pp_trace_reader_new_memory (const void *data, size_t size, PpError *err)
{
  if (data == NULL && size > 0)
    {
      pp_error_set (err, PP_EINVAL, "trace: no data");
      return NULL;
    }
  PpTraceReader *r = reader_new (err);
  if (r == NULL)
    return NULL;
  r->fd = -1;
  r->data = data;
  r->len = size;
  r->eof = 1;
  return r;
}

PpTraceReader *
pp_trace_reader_new_fd (int fd, PpError *err)
{
  if (fd < 0)
    {
      pp_error_set (err, PP_EINVAL, "trace: invalid file descriptor %d", fd);
      return NULL;
    }
  PpTraceReader *r = reader_new (err);
  if (r == NULL)
    return NULL;
  r->fd = fd;
  return r;
}

PpTraceReader *
pp_trace_reader_new_path (const char *path, PpError *err)
{
  if (path == NULL)
    {
      pp_error_set (err, PP_EINVAL, "trace: no path");
      return NULL;
    }
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      pp_error_set (err, PP_EIO, "trace: cannot open %s: %s", path, strerror (errno));
      return NULL;
    }
  PpTraceReader *r = pp_trace_reader_new_fd (fd, err);
  if (r == NULL)
    {
      close (fd);
      return NULL;
    }
  r->owns_fd = 1;
  return r;
}

void
pp_trace_reader_free (PpTraceReader *r)
{
  if (r == NULL)
    return;
  if (r->owns_fd)
    close (r->fd);
  free (r->buf);
  free (r->plan);
  free (r);
}

void
pp_trace_reader_get_version (PpTraceReader *r, int *major, int *minor)
{
  if (major)
    *major = r ? r->major : 0;
  if (minor)
    *minor = r ? r->minor : 0;
}

static PpStatus
end (PpTraceReader *r, PpTraceItem *item, int truncated)
{
  r->ended = 1;
  r->truncated = truncated;
  item->type = PP_TRACE_ITEM_END;
  item->truncated = truncated;
  item->need_more = 0;
  item->offset = r->base + r->pos;
  return PP_OK;
}

/* The input holds no whole header or frame at pos.  A stream that may still
 * grow asks for more; otherwise this is the end (truncated: bytes are left). */
static PpStatus
short_input (PpTraceReader *r, PpTraceItem *item, int truncated)
{
  if (r->stream && !r->eof)
    {
      item->type = PP_TRACE_ITEM_END;
      item->truncated = 0;
      item->need_more = 1;
      item->offset = r->base + r->pos;
      return PP_OK;
    }
  return end (r, item, truncated);
}

/* 1: header read; 0: input ended inside it (item set to END); <0: failed. */
static int
read_header (PpTraceReader *r, PpTraceItem *item, PpError *err)
{
  int got = ensure (r, sizeof (PpTraceFileHeader), err);
  if (got < 0)
    return -1;
  /* No bytes yet (a stream not fed): data may be NULL, and NULL + 0 is
   * undefined. */
  const uint8_t *p = r->data != NULL ? r->data + r->pos : NULL;
  size_t avail = r->len - r->pos;
  size_t m = avail < 8 ? avail : 8;
  if (m > 0 && memcmp (p, PP_TRACE_MAGIC, m) != 0)
    {
      fail (r, err, PP_EFORMAT, "trace: not a pipescope trace (bad magic at byte offset 0)");
      return -1;
    }
  if (avail > 8 && p[8] != PP_TRACE_ORDER_LITTLE_CODE && p[8] != PP_TRACE_ORDER_BIG_CODE)
    {
      fail (r, err, PP_EFORMAT, "trace: byte order code %u at byte offset 8 is neither 1 (little) nor 2 (big)",
            p[8]);
      return -1;
    }
  if (got == 0)
    {
      short_input (r, item, 1);
      return 0;
    }
  const uint16_t one = 1;
  int host_little = *(const uint8_t *) &one == 1;
  r->swap = (p[8] == PP_TRACE_ORDER_LITTLE_CODE) != host_little;
  r->major = ld16 (r, p + offsetof (PpTraceFileHeader, version_major));
  r->minor = ld16 (r, p + offsetof (PpTraceFileHeader, version_minor));
  if (r->major > PP_TRACE_VERSION_MAJOR)
    {
      fail (r, err, PP_EFORMAT,
            "trace: format version %d.%d (byte offset 12) is newer than this reader understands (%d.x); use a newer pipescope",
            r->major, r->minor, PP_TRACE_VERSION_MAJOR);
      return -1;
    }
  if (r->major < PP_TRACE_VERSION_MAJOR)
    {
      fail (r, err, PP_EFORMAT, "trace: format version %d.%d (byte offset 12) is not supported (expected %d.x)",
            r->major, r->minor, PP_TRACE_VERSION_MAJOR);
      return -1;
    }
  uint32_t hsize = ld32 (r, p + offsetof (PpTraceFileHeader, header_size));
  if (hsize < sizeof (PpTraceFileHeader) || hsize > PP_TRACE_HEADER_MAX || hsize % 8 != 0)
    {
      fail (r, err, PP_EFORMAT, "trace: header size %" PRIu32 " at byte offset 16 is not a multiple of 8 in [32, %u]",
            hsize, PP_TRACE_HEADER_MAX);
      return -1;
    }
  got = ensure (r, hsize, err);
  if (got < 0)
    return -1;
  if (got == 0)
    {
      short_input (r, item, 1);
      return 0;
    }
  /* the field was reserved, written 0, before 1.3 */
  if (r->minor >= 3)
    r->job_id = ld64 (r, p + offsetof (PpTraceFileHeader, job_id));
  r->pos += hsize;
  r->header_done = 1;
  return 1;
}

uint64_t
pp_trace_reader_get_job_id (PpTraceReader *r)
{
  return r ? r->job_id : 0;
}

PpStatus
pp_trace_file_job_id (const char *path, uint64_t *job_id, PpError *err)
{
  /* the header alone (at most PP_TRACE_HEADER_MAX bytes), however large
   * the file: profile asks this of every rank file in a folder */
  uint8_t head[PP_TRACE_HEADER_MAX];
  ssize_t n = -1;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  *job_id = 0;
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "trace: cannot open %s: %s", path, strerror (errno));
  do
    n = pread (fd, head, sizeof head, 0);
  while (n < 0 && errno == EINTR);
  int read_errno = errno;
  close (fd);
  if (n < 0)
    return pp_error_set (err, PP_EIO, "trace: cannot read %s: %s", path, strerror (read_errno));
  PpTraceItem it;
  PpTraceReader *r = pp_trace_reader_new_memory (head, (size_t) n, NULL);
  if (r == NULL)
    return pp_error_set (err, PP_ENOMEM, "trace: out of memory reading %s", path);
  (void) pp_trace_reader_next (r, &it, NULL);   /* the header, then the bytes run out */
  int whole = r->header_done;
  *job_id = r->job_id;
  pp_trace_reader_free (r);
  if (!whole)
    return pp_error_set (err, PP_EFORMAT, "%s: not a pipescope trace, or empty", path);
  return PP_OK;
}

int
pp_trace_file_in_use (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return 0;
  int busy = flock (fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close (fd);   /* drops the lock taken, if taken */
  return busy;
}

static PpStatus
decode_span (PpTraceReader *r, PpTraceItem *item, PpError *err)
{
  size_t i = r->batch_i;
  const uint8_t *slot = r->batch + i * sizeof (PpTraceDiskSpan);
  uint64_t slot_off = r->batch_offset + sizeof (PpTraceFrameSpans) + i * sizeof (PpTraceDiskSpan);
  PpTraceDiskSpan d;
  memcpy (&d, slot, sizeof d);
  if (__builtin_expect (d.flags & PP_TRACE_SPAN_IS_EXT, 0))
    return FRAME_FAIL (r, err, r->batch_offset, PP_TRACE_FRAME_SPANS,
                       "slot %zu at byte offset %" PRIu64 " is a span extension with no span before it",
                       i, slot_off);
  PpSpan *s = &item->span;
  s->start_ns = ldi64 (r, slot + offsetof (PpTraceDiskSpan, start_ns));
  s->step = (int32_t) r32 (r, (uint32_t) d.step);
  s->name_id = r32 (r, d.name_id);
  s->stream = r32 (r, d.stream);
  s->device = r16 (r, d.device);
  s->sub_stage = s->sub_microbatch = 0;
  s->sub_kind = 0;
  if (__builtin_expect (!(d.flags & PP_TRACE_SPAN_EXT), 1))
    {
      s->end_ns = (int64_t) ((uint64_t) s->start_ns + r32 (r, d.duration_ns));
      s->bytes = r32 (r, d.bytes);
      s->rank = (int16_t) r16 (r, (uint16_t) d.rank);
      s->stage = (int16_t) r16 (r, (uint16_t) d.stage);
      s->microbatch = (int16_t) r16 (r, (uint16_t) d.microbatch);
      s->peer_rank = (int16_t) r16 (r, (uint16_t) d.peer_rank);
      s->kind = d.kind;
      r->batch_i = i + 1;
    }
  else
    {
      if (i + 1 >= r->batch_slots)
        return FRAME_FAIL (r, err, r->batch_offset, PP_TRACE_FRAME_SPANS,
                           "span in slot %zu at byte offset %" PRIu64 " needs an extension slot after the frame's end",
                           i, slot_off);
      const uint8_t *x = slot + sizeof (PpTraceDiskSpan);
      if (!(x[offsetof (PpTraceDiskSpanExt, flags)] & PP_TRACE_SPAN_IS_EXT))
        return FRAME_FAIL (r, err, r->batch_offset, PP_TRACE_FRAME_SPANS,
                           "slot %zu at byte offset %" PRIu64 " should be a span extension but is not",
                           i + 1, slot_off + sizeof (PpTraceDiskSpan));
      s->end_ns = ldi64 (r, x + offsetof (PpTraceDiskSpanExt, end_ns));
      s->bytes = ld64 (r, x + offsetof (PpTraceDiskSpanExt, bytes));
      s->rank = ldi32 (r, x + offsetof (PpTraceDiskSpanExt, rank));
      s->stage = ldi32 (r, x + offsetof (PpTraceDiskSpanExt, stage));
      s->microbatch = ldi32 (r, x + offsetof (PpTraceDiskSpanExt, microbatch));
      s->peer_rank = ldi32 (r, x + offsetof (PpTraceDiskSpanExt, peer_rank));
      s->kind = ld16 (r, x + offsetof (PpTraceDiskSpanExt, kind));
      if (d.flags & PP_TRACE_SPAN_SUB)
        {
          /* 1.2: an overlapped pair's backward half; anything but a B or I
           * behind an OVERLAP_F_B is not one, and is ignored */
          int sk = d.kind;
          if (s->kind == PP_SPAN_OVERLAP_F_B && (sk == PP_SPAN_B || sk == PP_SPAN_I))
            {
              s->sub_kind = (uint16_t) sk;
              s->sub_stage = (int16_t) r16 (r, (uint16_t) d.stage);
              s->sub_microbatch = (int16_t) r16 (r, (uint16_t) d.microbatch);
            }
        }
      r->batch_i = i + 2;
    }
  if (__builtin_expect (s->rank < 0 || s->rank >= PP_TRACE_MAX_RANKS, 0))
    return FRAME_FAIL (r, err, r->batch_offset, PP_TRACE_FRAME_SPANS,
                       "span in slot %zu at byte offset %" PRIu64 " has rank %d outside [0, %d)",
                       i, slot_off, s->rank, PP_TRACE_MAX_RANKS);
  item->type = PP_TRACE_ITEM_SPAN;
  item->truncated = 0;
  item->offset = r->batch_offset;
  return PP_OK;
}

static int
field_terminated (const char *field, size_t size)
{
  return memchr (field, '\0', size) != NULL;
}

static PpStatus
decode_description (PpTraceReader *r, const uint8_t *f, uint64_t off, PpTraceItem *item, PpError *err)
{
  PpTraceFrameDescription d;
  memcpy (&d, f, sizeof d);
  static const struct { size_t offset, size; const char *name; } strings[] = {
    { offsetof (PpTraceFrameDescription, schedule), sizeof d.schedule, "schedule" },
    { offsetof (PpTraceFrameDescription, backend),  sizeof d.backend,  "backend" },
    { offsetof (PpTraceFrameDescription, host),     sizeof d.host,     "host" },
    { offsetof (PpTraceFrameDescription, model),    sizeof d.model,    "model" },
    { offsetof (PpTraceFrameDescription, cmdline),  sizeof d.cmdline,  "cmdline" },
  };
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    if (!field_terminated ((const char *) f + strings[i].offset, strings[i].size))
      return FRAME_FAIL (r, err, off, PP_TRACE_FRAME_DESCRIPTION,
                         "string field %s is not NUL-terminated within its %zu bytes",
                         strings[i].name, strings[i].size);
  PpTraceDescription *o = &r->desc;
  o->n_ranks = (int32_t) r32 (r, (uint32_t) d.n_ranks);
  o->n_microbatches = (int32_t) r32 (r, (uint32_t) d.n_microbatches);
  o->n_virtual = (int32_t) r32 (r, (uint32_t) d.n_virtual);
  if (o->n_ranks < 0 || o->n_ranks > PP_TRACE_MAX_RANKS
      || o->n_microbatches < 0 || o->n_microbatches > PP_TRACE_MAX_MICROBATCHES
      || o->n_virtual < 0 || o->n_virtual > PP_TRACE_MAX_VIRTUAL)
    return FRAME_FAIL (r, err, off, PP_TRACE_FRAME_DESCRIPTION,
                       "P=%d M=%d V=%d out of range (the limits: P <= %d, M <= %d, V <= %d)",
                       o->n_ranks, o->n_microbatches, o->n_virtual, PP_TRACE_MAX_RANKS,
                       PP_TRACE_MAX_MICROBATCHES, PP_TRACE_MAX_VIRTUAL);
  o->start_unix_ns = (int64_t) r64 (r, (uint64_t) d.start_unix_ns);
  o->start_monotonic_ns = (int64_t) r64 (r, (uint64_t) d.start_monotonic_ns);
  memcpy (o->schedule, d.schedule, sizeof o->schedule);
  memcpy (o->backend, d.backend, sizeof o->backend);
  memcpy (o->host, d.host, sizeof o->host);
  memcpy (o->model, d.model, sizeof o->model);
  memcpy (o->cmdline, d.cmdline, sizeof o->cmdline);
  item->type = PP_TRACE_ITEM_DESCRIPTION;
  item->description = o;
  return PP_OK;
}

static PpStatus
decode_plan (PpTraceReader *r, const uint8_t *f, uint32_t size, uint64_t off,
             PpTraceItem *item, PpError *err)
{
  int32_t rank = ldi32 (r, f + offsetof (PpTraceFramePlan, rank));
  uint32_t n = ld32 (r, f + offsetof (PpTraceFramePlan, n_actions));
  uint32_t flags = ld32 (r, f + offsetof (PpTraceFramePlan, flags));
  if (rank < 0 || rank >= PP_TRACE_MAX_RANKS)
    return FRAME_FAIL (r, err, off, PP_TRACE_FRAME_PLAN, "rank %d outside [0, %d)", rank, PP_TRACE_MAX_RANKS);
  size_t room = (size - sizeof (PpTraceFramePlan)) / sizeof (PpTraceDiskPlanAction);
  if (n > room)
    return FRAME_FAIL (r, err, off, PP_TRACE_FRAME_PLAN,
                       "%" PRIu32 " actions do not fit in a %" PRIu32 "-byte frame", n, size);
  if (n > r->plan_cap)
    {
      /* n <= room <= PP_TRACE_FRAME_MAX / 40: bounded by the frame. */
      PpTracePlanAction *np = realloc (r->plan, (size_t) n * sizeof *np);
      if (np == NULL)
        return fail (r, err, PP_ENOMEM, "trace: out of memory for a plan of %" PRIu32 " actions", n);
      r->plan = np;
      r->plan_cap = n;
    }
  int has_timeline = (flags & PP_TRACE_PLAN_HAS_TIMELINE) != 0;
  const uint8_t *q = f + sizeof (PpTraceFramePlan);
  for (uint32_t i = 0; i < n; i++, q += sizeof (PpTraceDiskPlanAction))
    {
      PpTracePlanAction *a = &r->plan[i];
      a->kind = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, kind));
      a->stage = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, stage));
      a->microbatch = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, microbatch));
      a->sub_kind = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, sub_kind));
      a->sub_stage = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, sub_stage));
      a->sub_microbatch = ldi32 (r, q + offsetof (PpTraceDiskPlanAction, sub_microbatch));
      a->planned_start = has_timeline ? ldf64 (r, q + offsetof (PpTraceDiskPlanAction, planned_start)) : 0.0;
      a->planned_end = has_timeline ? ldf64 (r, q + offsetof (PpTraceDiskPlanAction, planned_end)) : 0.0;
    }
  item->type = PP_TRACE_ITEM_PLAN;
  item->plan.rank = rank;
  item->plan.has_timeline = has_timeline;
  item->plan.n_actions = n;
  item->plan.actions = r->plan;
  return PP_OK;
}

static size_t
min_size (unsigned type)
{
  switch (type)
    {
    case PP_TRACE_FRAME_DESCRIPTION:  return sizeof (PpTraceFrameDescription);
    case PP_TRACE_FRAME_PLAN:         return sizeof (PpTraceFramePlan);
    case PP_TRACE_FRAME_SPANS:        return sizeof (PpTraceFrameSpans);
    case PP_TRACE_FRAME_COUNTER:      return sizeof (PpTraceFrameCounter);
    case PP_TRACE_FRAME_STEP_MARKER:  return sizeof (PpTraceFrameStepMarker);
    case PP_TRACE_FRAME_CLOCK_OFFSET: return sizeof (PpTraceFrameClockOffset);
    case PP_TRACE_FRAME_RANK:         return sizeof (PpTraceFrameRank);
    case PP_TRACE_FRAME_PROCESS:      return sizeof (PpTraceFrameProcess);
    case PP_TRACE_FRAME_OPEN:         return sizeof (PpTraceFrameOpen);
    case PP_TRACE_FRAME_STRING:       return sizeof (PpTraceFrameString);
    case PP_TRACE_FRAME_DROPPED:      return sizeof (PpTraceFrameDropped);
    default:                          return sizeof (PpTraceFrameHeader);
    }
}

PpStatus
pp_trace_reader_next (PpTraceReader *r, PpTraceItem *item, PpError *err)
{
  if (r == NULL || item == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no reader or item");
  if (r->failed != PP_OK)
    return pp_error_set (err, r->failed, "%s", r->failed_msg);
  item->need_more = 0;
  item->process = -1;
  if (r->batch_i < r->batch_slots)
    {
      item->process = r->batch_process;
      return decode_span (r, item, err);
    }
  if (r->ended)
    return end (r, item, r->truncated);
  if (!r->header_done)
    {
      int h = read_header (r, item, err);
      if (h < 0)
        return r->failed;
      if (h == 0)
        return PP_OK;
    }

  for (;;)
    {
      int got = ensure (r, sizeof (PpTraceFrameHeader), err);
      if (got < 0)
        return r->failed;
      if (got == 0)
        return short_input (r, item, r->len - r->pos > 0);
      const uint8_t *f = r->data + r->pos;
      uint64_t off = r->base + r->pos;
      uint32_t size = ld32 (r, f);
      unsigned type = ld16 (r, f + 4);
      /* before 1.4 a PROCESS frame is a newer writer's unknown frame, and
       * the header's process was reserved */
      if (type == PP_TRACE_FRAME_PROCESS && r->minor < 4)
        type = UINT16_MAX;
      if (type == PP_TRACE_FRAME_OPEN && r->minor < 10)
        type = UINT16_MAX;
      if (size < min_size (type))
        return FRAME_FAIL (r, err, off, type, "size %" PRIu32 " is below the minimum %zu",
                           size, min_size (type));
      if (size % 8 != 0)
        return FRAME_FAIL (r, err, off, type, "size %" PRIu32 " is not a multiple of 8", size);
      if (size > PP_TRACE_FRAME_MAX)
        return FRAME_FAIL (r, err, off, type, "size %" PRIu32 " is above the maximum %u",
                           size, PP_TRACE_FRAME_MAX);
      got = ensure (r, size, err);
      if (got < 0)
        return r->failed;
      if (got == 0)
        return short_input (r, item, 1);
      f = r->data + r->pos;   /* ensure() may have moved the bytes */
      off = r->base + r->pos;
      r->pos += size;

      item->truncated = 0;
      item->offset = off;
      item->process = r->minor >= 4 ? (int32_t) ld16 (r, f + offsetof (PpTraceFrameHeader, process)) - 1 : -1;
      switch (type)
        {
        case PP_TRACE_FRAME_DESCRIPTION:
          return decode_description (r, f, off, item, err);

        case PP_TRACE_FRAME_PLAN:
          return decode_plan (r, f, size, off, item, err);

        case PP_TRACE_FRAME_SPANS:
          if ((size - sizeof (PpTraceFrameSpans)) % sizeof (PpTraceDiskSpan) != 0)
            return FRAME_FAIL (r, err, off, type, "size %" PRIu32 " is not 8 + a multiple of %zu",
                               size, sizeof (PpTraceDiskSpan));
          r->batch = f + sizeof (PpTraceFrameSpans);
          r->batch_slots = (size - sizeof (PpTraceFrameSpans)) / sizeof (PpTraceDiskSpan);
          r->batch_i = 0;
          r->batch_offset = off;
          r->batch_process = item->process;
          if (r->batch_slots == 0)
            continue;
          return decode_span (r, item, err);

        case PP_TRACE_FRAME_COUNTER:
          {
            PpCounter *c = &item->counter;
            c->time_ns = ldi64 (r, f + offsetof (PpTraceFrameCounter, time_ns));
            c->value = ldf64 (r, f + offsetof (PpTraceFrameCounter, value));
            c->rank = ldi32 (r, f + offsetof (PpTraceFrameCounter, rank));
            c->step = ldi32 (r, f + offsetof (PpTraceFrameCounter, step));
            c->kind = ld16 (r, f + offsetof (PpTraceFrameCounter, kind));
            if (c->rank < 0 || c->rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [0, %d)", c->rank, PP_TRACE_MAX_RANKS);
            item->type = PP_TRACE_ITEM_COUNTER;
            return PP_OK;
          }

        case PP_TRACE_FRAME_STEP_MARKER:
          {
            int32_t rank = ldi32 (r, f + offsetof (PpTraceFrameStepMarker, rank));
            uint32_t phase = ld32 (r, f + offsetof (PpTraceFrameStepMarker, phase));
            if (rank < 0 || rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [0, %d)", rank, PP_TRACE_MAX_RANKS);
            if (phase > PP_TRACE_STEP_END)
              return FRAME_FAIL (r, err, off, type, "phase %" PRIu32 " is neither 0 (begin) nor 1 (end)", phase);
            item->type = PP_TRACE_ITEM_STEP_MARKER;
            item->step_marker.time_ns = ldi64 (r, f + offsetof (PpTraceFrameStepMarker, time_ns));
            item->step_marker.rank = rank;
            item->step_marker.step = ldi32 (r, f + offsetof (PpTraceFrameStepMarker, step));
            item->step_marker.phase = (PpTraceStepPhase) phase;
            return PP_OK;
          }

        case PP_TRACE_FRAME_CLOCK_OFFSET:
          {
            int32_t rank = ldi32 (r, f + offsetof (PpTraceFrameClockOffset, rank));
            if (rank < 0 || rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [0, %d)", rank, PP_TRACE_MAX_RANKS);
            item->type = PP_TRACE_ITEM_CLOCK_OFFSET;
            item->clock_offset.rank = rank;
            item->clock_offset.offset_ns = ldi64 (r, f + offsetof (PpTraceFrameClockOffset, offset_ns));
            return PP_OK;
          }

        case PP_TRACE_FRAME_RANK:
          {
            int32_t rank = ldi32 (r, f + offsetof (PpTraceFrameRank, rank));
            if (rank < 0 || rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [0, %d)", rank, PP_TRACE_MAX_RANKS);
            item->type = PP_TRACE_ITEM_RANK;
            item->rank_info.rank = rank;
            item->rank_info.pid = ldi32 (r, f + offsetof (PpTraceFrameRank, pid));
            memcpy (item->rank_info.host, f + offsetof (PpTraceFrameRank, host),
                    sizeof item->rank_info.host);
            item->rank_info.host[sizeof item->rank_info.host - 1] = '\0';
            return PP_OK;
          }

        case PP_TRACE_FRAME_PROCESS:
          {
            PpTraceProcess *p = &item->process_info;
            p->process = ldi32 (r, f + offsetof (PpTraceFrameProcess, process));
            p->rank = ldi32 (r, f + offsetof (PpTraceFrameProcess, rank));
            for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
              {
                p->coord[d] = ldi32 (r, f + offsetof (PpTraceFrameProcess, coord) + 4 * (size_t) d);
                p->size[d] = ldi32 (r, f + offsetof (PpTraceFrameProcess, size) + 4 * (size_t) d);
              }
            p->pid = ldi32 (r, f + offsetof (PpTraceFrameProcess, pid));
            p->flags = ld32 (r, f + offsetof (PpTraceFrameProcess, flags));
            memcpy (p->host, f + offsetof (PpTraceFrameProcess, host), sizeof p->host);
            p->host[sizeof p->host - 1] = '\0';
            PpError why = { 0 };
            if (pp_trace_process_check (p, &why) != PP_OK)
              return FRAME_FAIL (r, err, off, type, "%s", why.msg + strlen ("trace: "));
            item->type = PP_TRACE_ITEM_PROCESS;
            return PP_OK;
          }

        case PP_TRACE_FRAME_OPEN:
          {
            PpTraceOpen *o = &item->open;
            o->time_ns = ldi64 (r, f + offsetof (PpTraceFrameOpen, time_ns));
            o->start_ns = ldi64 (r, f + offsetof (PpTraceFrameOpen, start_ns));
            o->rank = ldi32 (r, f + offsetof (PpTraceFrameOpen, rank));
            o->step = ldi32 (r, f + offsetof (PpTraceFrameOpen, step));
            o->stage = ldi32 (r, f + offsetof (PpTraceFrameOpen, stage));
            o->microbatch = ldi32 (r, f + offsetof (PpTraceFrameOpen, microbatch));
            o->peer_rank = ldi32 (r, f + offsetof (PpTraceFrameOpen, peer_rank));
            o->kind = (int16_t) ld16 (r, f + offsetof (PpTraceFrameOpen, kind));
            o->flags = ld16 (r, f + offsetof (PpTraceFrameOpen, flags));
            memcpy (o->where, f + offsetof (PpTraceFrameOpen, where), sizeof o->where);
            o->where[sizeof o->where - 1] = '\0';
            if (o->rank < 0 || o->rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [0, %d)", o->rank, PP_TRACE_MAX_RANKS);
            if (o->kind < -1)
              return FRAME_FAIL (r, err, off, type, "kind %d below -1", o->kind);
            item->type = PP_TRACE_ITEM_OPEN;
            return PP_OK;
          }

        case PP_TRACE_FRAME_STRING:
          {
            uint32_t id = ld32 (r, f + offsetof (PpTraceFrameString, id));
            uint32_t len = ld32 (r, f + offsetof (PpTraceFrameString, length));
            const char *name = (const char *) f + sizeof (PpTraceFrameString);
            if (id == 0)
              return FRAME_FAIL (r, err, off, type, "string id 0 is reserved%s", "");
            if (len > PP_TRACE_STRING_MAX || len >= size - sizeof (PpTraceFrameString))
              return FRAME_FAIL (r, err, off, type, "string length %" PRIu32 " does not fit (frame %" PRIu32
                                 " bytes, at most %d)", len, size, PP_TRACE_STRING_MAX);
            if (name[len] != '\0' || memchr (name, '\0', len) != NULL)
              return FRAME_FAIL (r, err, off, type, "string %" PRIu32 " is not NUL-terminated at its length %" PRIu32,
                                 id, len);
            item->type = PP_TRACE_ITEM_STRING;
            item->string.id = id;
            item->string.length = len;
            item->string.name = name;
            return PP_OK;
          }

        case PP_TRACE_FRAME_DROPPED:
          {
            int32_t rank = ldi32 (r, f + offsetof (PpTraceFrameDropped, rank));
            if (rank < -1 || rank >= PP_TRACE_MAX_RANKS)
              return FRAME_FAIL (r, err, off, type, "rank %d outside [-1, %d)", rank, PP_TRACE_MAX_RANKS);
            item->type = PP_TRACE_ITEM_DROPPED;
            item->dropped.rank = rank;
            item->dropped.count = ld64 (r, f + offsetof (PpTraceFrameDropped, count));
            return PP_OK;
          }

        default:
          /* Unknown type, from a newer writer: skip by size. */
          continue;
        }
    }
}

/* ---- streaming ---- */

PpTraceReader *
pp_trace_reader_new_stream (PpError *err)
{
  PpTraceReader *r = reader_new (err);
  if (r == NULL)
    return NULL;
  r->fd = -1;
  r->stream = 1;
  return r;
}

PpStatus
pp_trace_reader_feed (PpTraceReader *r, const void *data, size_t size, PpError *err)
{
  if (r == NULL || !r->stream)
    return pp_error_set (err, PP_EINVAL, "trace: not a stream reader");
  if (data == NULL && size > 0)
    return pp_error_set (err, PP_EINVAL, "trace: no data");
  if (r->failed != PP_OK)
    return pp_error_set (err, r->failed, "%s", r->failed_msg);
  if (r->eof)
    return pp_error_set (err, PP_EINVAL, "trace: bytes fed after the end of the stream");
  if (size == 0)
    return PP_OK;

  /* Drop what has been consumed; a span batch still being handed out points
   * into the buffer and is kept. */
  int in_batch = r->batch_i < r->batch_slots;
  size_t keep = r->pos;
  if (in_batch && (size_t) (r->batch - r->buf) < keep)
    keep = (size_t) (r->batch - r->buf);
  size_t unread = r->len - keep;
  /* Drained down to need_more, the unread bytes are less than one frame.
   * More means the caller feeds without reading: refuse rather than grow. */
  if (unread > PP_TRACE_FRAME_MAX)
    return pp_error_set (err, PP_EINVAL,
                         "trace: stream reader already holds %zu unread bytes; "
                         "call pp_trace_reader_next until it needs more before feeding",
                         unread);
  if (keep > 0)
    {
      memmove (r->buf, r->buf + keep, unread);
      r->base += keep;
      r->pos -= keep;
      r->len = unread;
      if (in_batch)
        r->batch -= keep;
    }
  if (size > SIZE_MAX - r->len)
    return pp_error_set (err, PP_ENOMEM, "trace: feed of %zu bytes is too large", size);
  size_t need = r->len + size;
  if (r->cap < need)
    {
      size_t ncap = r->cap > 0 ? r->cap : 65536;
      while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
      size_t batch_at = in_batch ? (size_t) (r->batch - r->buf) : 0;
      uint8_t *nb = realloc (r->buf, ncap);
      if (nb == NULL)
        return pp_error_set (err, PP_ENOMEM, "trace: out of memory buffering %zu bytes", need);
      if (in_batch)
        r->batch = nb + batch_at;
      r->buf = nb;
      r->cap = ncap;
    }
  if (size > 0)
    memcpy (r->buf + r->len, data, size);
  r->len = need;
  r->data = r->buf;
  return PP_OK;
}

void
pp_trace_reader_feed_end (PpTraceReader *r)
{
  if (r != NULL && r->stream)
    r->eof = 1;
}
