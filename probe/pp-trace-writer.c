/* pp-trace-writer.c — builds trace frames in place in a buffer and writes
 * whole frames only (docs/trace-format.md). */
#include "pp-trace.h"
#include "pp-trace-format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUFFER_SIZE      (1u << 20)
#define SPANS_PER_FRAME  4096u   /* worst case 8 + 4096 * 80 bytes fits the buffer */

struct _PpTraceWriter {
  int      fd;            /* -1 with a callback */
  int      owns_fd;
  PpTraceWriteFunc write_fn;  /* NULL: write(2) to fd */
  void    *user;
  size_t   header_pending; /* callback: the header is the first header_pending bytes */
  int      header_out;     /* the header has been handed on: its job id is fixed */
  /* write_item: the last frame in buf is a SPANS frame at this offset that
   * more spans may join; SIZE_MAX when not. */
  size_t   open_spans;
  size_t   open_spans_size;  /* its size so far */
  uint64_t open_spans_from;  /* item offset its spans came from */
  uint16_t open_spans_tag;   /* and their process tag */
  /* 1.4: process + 1 of the process whose frames these are, in every
   * frame header from pp_trace_writer_set_process on; 0: none */
  uint16_t tag;
  int      swap;          /* file order differs from the host's */
  uint8_t *buf;
  size_t   len;
  size_t   cap;
  PpStatus failed;        /* sticky I/O error */
  char     failed_msg[PP_ERROR_MSG_MAX];
};

static inline uint16_t w16 (const PpTraceWriter *w, uint16_t v) { return w->swap ? __builtin_bswap16 (v) : v; }
static inline uint32_t w32 (const PpTraceWriter *w, uint32_t v) { return w->swap ? __builtin_bswap32 (v) : v; }
static inline uint64_t w64 (const PpTraceWriter *w, uint64_t v) { return w->swap ? __builtin_bswap64 (v) : v; }

static inline uint64_t
wdouble (const PpTraceWriter *w, double d)
{
  uint64_t u;
  memcpy (&u, &d, sizeof u);
  return w64 (w, u);
}

static PpStatus
writer_failed (PpTraceWriter *w, PpError *err)
{
  return pp_error_set (err, w->failed, "%s", w->failed_msg);
}

/* Callback output: the header in a call of its own, then the buffered
 * frames (always whole frames) in one call. */
static PpStatus
write_callback (PpTraceWriter *w, PpError *err)
{
  size_t off = 0;
  if (w->header_pending > 0)
    {
      if (w->write_fn (w->user, w->buf, w->header_pending) != 0)
        goto failed;
      off = w->header_pending;
      w->header_pending = 0;
    }
  w->header_out = 1;
  if (off < w->len && w->write_fn (w->user, w->buf + off, w->len - off) != 0)
    goto failed;
  w->len = 0;
  return PP_OK;

failed:
  w->failed = PP_EIO;
  snprintf (w->failed_msg, sizeof w->failed_msg, "trace: the output callback failed");
  w->len = 0;
  return writer_failed (w, err);
}

static PpStatus
write_all (PpTraceWriter *w, PpError *err)
{
  w->open_spans = SIZE_MAX;
  if (w->write_fn != NULL)
    return write_callback (w, err);
  size_t off = 0;
  while (off < w->len)
    {
      ssize_t n = write (w->fd, w->buf + off, w->len - off);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          w->failed = PP_EIO;
          snprintf (w->failed_msg, sizeof w->failed_msg,
                    "trace: cannot write: %s", strerror (errno));
          /* Keep what was not written out of the file: a later call must not
           * append a frame after a partial one. */
          w->len = 0;
          return writer_failed (w, err);
        }
      off += (size_t) n;
      w->header_out = 1;
    }
  w->len = 0;
  return PP_OK;
}

PpStatus
pp_trace_writer_flush (PpTraceWriter *w, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (w->failed != PP_OK)
    return writer_failed (w, err);
  return write_all (w, err);
}

/* Space for a frame of size bytes at the end of the buffer, zeroed so that
 * reserved fields and padding are 0.  NULL on failure with err set. */
static uint8_t *
reserve (PpTraceWriter *w, size_t size, int zero, PpError *err)
{
  if (w->failed != PP_OK)
    {
      writer_failed (w, err);
      return NULL;
    }
  if (w->cap - w->len < size)
    {
      if (write_all (w, err) != PP_OK)
        return NULL;
      if (w->cap < size)
        {
          uint8_t *nb = realloc (w->buf, size);
          if (nb == NULL)
            {
              pp_error_set (err, PP_ENOMEM, "trace: out of memory for a %zu-byte frame", size);
              return NULL;
            }
          w->buf = nb;
          w->cap = size;
        }
    }
  uint8_t *p = w->buf + w->len;
  if (zero)
    memset (p, 0, size);
  return p;
}

/* reserve() fails with err filled; callers without err still need a status. */
#define RESERVE_OR_RETURN(p, w, size, zero, err)                        \
  do {                                                                  \
    PpError local_;                                                     \
    PpError *e_ = (err) ? (err) : &local_;                              \
    (p) = reserve ((w), (size), (zero), e_);                            \
    if ((p) == NULL)                                                    \
      return e_->status;                                                \
  } while (0)

static inline void
commit (PpTraceWriter *w, uint8_t *frame, uint32_t size, uint16_t type)
{
  w->open_spans = SIZE_MAX;
  PpTraceFrameHeader h = { w32 (w, size), w16 (w, type), w16 (w, w->tag) };
  memcpy (frame, &h, sizeof h);
  w->len += size;
}

static int
host_is_little (void)
{
  const uint16_t one = 1;
  return *(const uint8_t *) &one == 1;
}

static PpTraceWriter *
writer_new (int byte_order, PpError *err)
{
  if (byte_order != PP_TRACE_NATIVE && byte_order != PP_TRACE_LITTLE && byte_order != PP_TRACE_BIG)
    {
      pp_error_set (err, PP_EINVAL, "trace: byte order %d is not PP_TRACE_NATIVE, _LITTLE or _BIG",
                    byte_order);
      return NULL;
    }
  PpTraceWriter *w = calloc (1, sizeof *w);
  if (w != NULL)
    w->buf = malloc (BUFFER_SIZE);
  if (w == NULL || w->buf == NULL)
    {
      free (w);
      pp_error_set (err, PP_ENOMEM, "trace: out of memory for a writer");
      return NULL;
    }
  w->fd = -1;
  w->cap = BUFFER_SIZE;
  w->open_spans = SIZE_MAX;
  int little = byte_order == PP_TRACE_NATIVE ? host_is_little () : byte_order == PP_TRACE_LITTLE;
  w->swap = little != host_is_little ();

  PpTraceFileHeader fh;
  memset (&fh, 0, sizeof fh);
  memcpy (fh.magic, PP_TRACE_MAGIC, sizeof fh.magic);
  fh.byte_order = little ? PP_TRACE_ORDER_LITTLE_CODE : PP_TRACE_ORDER_BIG_CODE;
  fh.version_major = w16 (w, PP_TRACE_VERSION_MAJOR);
  fh.version_minor = w16 (w, PP_TRACE_VERSION_MINOR);
  fh.header_size = w32 (w, sizeof fh);
  memcpy (w->buf, &fh, sizeof fh);
  w->len = sizeof fh;
  return w;
}

PpTraceWriter *
pp_trace_writer_new_fd (int fd, int byte_order, PpError *err)
{
  if (fd < 0)
    {
      pp_error_set (err, PP_EINVAL, "trace: invalid file descriptor %d", fd);
      return NULL;
    }
  PpTraceWriter *w = writer_new (byte_order, err);
  if (w != NULL)
    w->fd = fd;
  return w;
}

PpTraceWriter *
pp_trace_writer_new_callback (PpTraceWriteFunc write_fn, void *user, int byte_order, PpError *err)
{
  if (write_fn == NULL)
    {
      pp_error_set (err, PP_EINVAL, "trace: no output callback");
      return NULL;
    }
  PpTraceWriter *w = writer_new (byte_order, err);
  if (w != NULL)
    {
      w->write_fn = write_fn;
      w->user = user;
      w->header_pending = w->len;
    }
  return w;
}

PpTraceWriter *
pp_trace_writer_new_path (const char *path, int byte_order, PpError *err)
{
  if (path == NULL)
    {
      pp_error_set (err, PP_EINVAL, "trace: no path");
      return NULL;
    }
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    {
      pp_error_set (err, PP_EIO, "trace: cannot create %s: %s", path, strerror (errno));
      return NULL;
    }
  /* Emptied only once no other writer holds it: a file a running job is
   * still writing (its shared lock, below) is never truncated under it. */
  struct stat st;
  if (flock (fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    {
      pp_error_set (err, PP_EIO, "trace: %s is being written by a running job; give another name",
                    path);
      close (fd);
      return NULL;
    }
  if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode) && ftruncate (fd, 0) != 0)
    {
      pp_error_set (err, PP_EIO, "trace: cannot create %s: %s", path, strerror (errno));
      close (fd);
      return NULL;
    }
  PpTraceWriter *w = pp_trace_writer_new_fd (fd, byte_order, err);
  if (w == NULL)
    {
      close (fd);
      return NULL;
    }
  w->owns_fd = 1;
  /* A shared lock for as long as the file is open, released by the kernel
   * when the writer's process dies: pp_trace_file_in_use tells a file
   * still being written from one a dead run left.  Where locks are not
   * supported the file is written all the same. */
  (void) flock (fd, LOCK_SH | LOCK_NB);
  return w;
}

PpStatus
pp_trace_writer_set_job_id (PpTraceWriter *w, uint64_t job_id, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (w->failed != PP_OK)
    return writer_failed (w, err);
  if (w->header_out)
    return pp_error_set (err, PP_EINVAL, "trace: the job id goes in the file header, which is already written");
  uint64_t v = w64 (w, job_id);
  memcpy (w->buf + offsetof (PpTraceFileHeader, job_id), &v, sizeof v);
  return PP_OK;
}

PpStatus
pp_trace_writer_close (PpTraceWriter *w, PpError *err)
{
  if (w == NULL)
    return PP_OK;
  PpStatus st = pp_trace_writer_flush (w, err);
  if (w->owns_fd && w->fd >= 0 && close (w->fd) != 0 && st == PP_OK)
    st = pp_error_set (err, PP_EIO, "trace: cannot close: %s", strerror (errno));
  free (w->buf);
  free (w);
  return st;
}

static int
rank_ok (int32_t rank)
{
  return rank >= 0 && rank < PP_TRACE_MAX_RANKS;
}

static void
copy_str (char *dst, const char *src, size_t size)
{
  size_t n = strnlen (src, size - 1);
  memcpy (dst, src, n);
  memset (dst + n, 0, size - n);
}

PpStatus
pp_trace_write_description (PpTraceWriter *w, const PpTraceDescription *d, PpError *err)
{
  if (w == NULL || d == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or description");
  if (d->n_ranks < 0 || d->n_ranks > PP_TRACE_MAX_RANKS
      || d->n_microbatches < 0 || d->n_microbatches > PP_TRACE_MAX_MICROBATCHES
      || d->n_virtual < 0 || d->n_virtual > PP_TRACE_MAX_VIRTUAL)
    return pp_error_set (err, PP_EINVAL,
                         "trace: description P=%d M=%d V=%d out of range",
                         d->n_ranks, d->n_microbatches, d->n_virtual);
  PpTraceFrameDescription f;
  memset (&f, 0, sizeof f);
  f.n_ranks = (int32_t) w32 (w, (uint32_t) d->n_ranks);
  f.n_microbatches = (int32_t) w32 (w, (uint32_t) d->n_microbatches);
  f.n_virtual = (int32_t) w32 (w, (uint32_t) d->n_virtual);
  f.start_unix_ns = (int64_t) w64 (w, (uint64_t) d->start_unix_ns);
  f.start_monotonic_ns = (int64_t) w64 (w, (uint64_t) d->start_monotonic_ns);
  copy_str (f.schedule, d->schedule, sizeof f.schedule);
  copy_str (f.backend, d->backend, sizeof f.backend);
  copy_str (f.host, d->host, sizeof f.host);
  copy_str (f.model, d->model, sizeof f.model);
  copy_str (f.cmdline, d->cmdline, sizeof f.cmdline);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_DESCRIPTION);
  return PP_OK;
}

/* One PLAN frame: rank's n actions (checked by the caller). */
static PpStatus
write_plan_frame (PpTraceWriter *w, int32_t rank, const PpTracePlanAction *actions, size_t n,
                  int has_timeline, PpError *err)
{
  size_t size = sizeof (PpTraceFramePlan) + n * sizeof (PpTraceDiskPlanAction);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, size, 1, err);
  PpTraceFramePlan f;
  memset (&f, 0, sizeof f);
  f.rank = (int32_t) w32 (w, (uint32_t) rank);
  f.n_actions = w32 (w, (uint32_t) n);
  f.flags = w32 (w, has_timeline ? PP_TRACE_PLAN_HAS_TIMELINE : 0);
  memcpy (p, &f, sizeof f);
  uint8_t *q = p + sizeof f;
  for (size_t i = 0; i < n; i++, q += sizeof (PpTraceDiskPlanAction))
    {
      const PpTracePlanAction *a = &actions[i];
      PpTraceDiskPlanAction d;
      d.kind = (int32_t) w32 (w, (uint32_t) a->kind);
      d.stage = (int32_t) w32 (w, (uint32_t) a->stage);
      d.microbatch = (int32_t) w32 (w, (uint32_t) a->microbatch);
      d.sub_kind = (int32_t) w32 (w, (uint32_t) a->sub_kind);
      d.sub_stage = (int32_t) w32 (w, (uint32_t) a->sub_stage);
      d.sub_microbatch = (int32_t) w32 (w, (uint32_t) a->sub_microbatch);
      uint64_t s = has_timeline ? wdouble (w, a->planned_start) : 0;
      uint64_t e = has_timeline ? wdouble (w, a->planned_end) : 0;
      memcpy (&d.planned_start, &s, 8);
      memcpy (&d.planned_end, &e, 8);
      memcpy (q, &d, sizeof d);
    }
  commit (w, p, (uint32_t) size, PP_TRACE_FRAME_PLAN);
  return PP_OK;
}

PpStatus
pp_trace_write_plan (PpTraceWriter *w, int n_ranks, const PpTracePlanAction *const *actions,
                     const size_t *n_actions, int has_timeline, PpError *err)
{
  if (w == NULL || n_ranks < 0 || n_ranks > PP_TRACE_MAX_RANKS
      || (n_ranks > 0 && (actions == NULL || n_actions == NULL)))
    return pp_error_set (err, PP_EINVAL, "trace: invalid plan (%d ranks)", n_ranks);
  for (int r = 0; r < n_ranks; r++)
    {
      if (n_actions[r] > PP_TRACE_PLAN_MAX_ACTIONS)
        return pp_error_set (err, PP_EINVAL, "trace: plan of rank %d has %zu actions, at most %u fit",
                             r, n_actions[r], PP_TRACE_PLAN_MAX_ACTIONS);
      if (n_actions[r] > 0 && actions[r] == NULL)
        return pp_error_set (err, PP_EINVAL, "trace: plan of rank %d has no actions array", r);
    }
  for (int r = 0; r < n_ranks; r++)
    {
      PpStatus st = write_plan_frame (w, r, actions[r], n_actions[r], has_timeline, err);
      if (st != PP_OK)
        return st;
    }
  return PP_OK;
}

PpStatus
pp_trace_write_rank_plan (PpTraceWriter *w, int rank, const PpTracePlanAction *actions,
                          size_t n_actions, int has_timeline, PpError *err)
{
  if (w == NULL || rank < 0 || rank >= PP_TRACE_MAX_RANKS || (n_actions > 0 && actions == NULL))
    return pp_error_set (err, PP_EINVAL, "trace: invalid plan of rank %d", rank);
  if (n_actions > PP_TRACE_PLAN_MAX_ACTIONS)
    return pp_error_set (err, PP_EINVAL, "trace: plan of rank %d has %zu actions, at most %u fit",
                         rank, n_actions, PP_TRACE_PLAN_MAX_ACTIONS);
  return write_plan_frame (w, rank, actions, n_actions, has_timeline, err);
}

static inline int
fits16 (int32_t v)
{
  return v >= INT16_MIN && v <= INT16_MAX;
}

static inline void
swap_disk_span (PpTraceDiskSpan *d)
{
  d->start_ns = (int64_t) __builtin_bswap64 ((uint64_t) d->start_ns);
  d->duration_ns = __builtin_bswap32 (d->duration_ns);
  d->bytes = __builtin_bswap32 (d->bytes);
  d->step = (int32_t) __builtin_bswap32 ((uint32_t) d->step);
  d->name_id = __builtin_bswap32 (d->name_id);
  d->stream = __builtin_bswap32 (d->stream);
  d->rank = (int16_t) __builtin_bswap16 ((uint16_t) d->rank);
  d->stage = (int16_t) __builtin_bswap16 ((uint16_t) d->stage);
  d->microbatch = (int16_t) __builtin_bswap16 ((uint16_t) d->microbatch);
  d->peer_rank = (int16_t) __builtin_bswap16 ((uint16_t) d->peer_rank);
  d->device = __builtin_bswap16 (d->device);
}

static inline void
swap_disk_span_ext (PpTraceDiskSpanExt *x)
{
  x->end_ns = (int64_t) __builtin_bswap64 ((uint64_t) x->end_ns);
  x->bytes = __builtin_bswap64 (x->bytes);
  x->rank = (int32_t) __builtin_bswap32 ((uint32_t) x->rank);
  x->stage = (int32_t) __builtin_bswap32 ((uint32_t) x->stage);
  x->microbatch = (int32_t) __builtin_bswap32 ((uint32_t) x->microbatch);
  x->peer_rank = (int32_t) __builtin_bswap32 ((uint32_t) x->peer_rank);
  x->kind = __builtin_bswap16 (x->kind);
}

/* Encodes s at q as one slot, or two when it needs the extension; returns
 * the bytes written (24 or 48). */
static inline size_t
encode_span (const PpSpan *s, int swap, uint8_t *q)
{
  /* end - start in unsigned arithmetic: no overflow UB for any times. */
  uint64_t dur = (uint64_t) s->end_ns - (uint64_t) s->start_ns;
  PpTraceDiskSpan d;
  d.start_ns = s->start_ns;
  d.step = s->step;
  d.name_id = s->name_id;
  d.stream = s->stream;
  d.device = s->device;
  int sub = pp_span_has_sub (s) && fits16 (s->sub_stage) && fits16 (s->sub_microbatch);
  if (__builtin_expect (!sub && s->end_ns >= s->start_ns && dur <= UINT32_MAX
                        && s->bytes <= UINT32_MAX && s->kind <= UINT8_MAX
                        && fits16 (s->rank) && fits16 (s->stage)
                        && fits16 (s->microbatch) && fits16 (s->peer_rank), 1))
    {
      d.duration_ns = (uint32_t) dur;
      d.bytes = (uint32_t) s->bytes;
      d.rank = (int16_t) s->rank;
      d.stage = (int16_t) s->stage;
      d.microbatch = (int16_t) s->microbatch;
      d.peer_rank = (int16_t) s->peer_rank;
      d.kind = (uint8_t) s->kind;
      d.flags = 0;
      if (swap)
        swap_disk_span (&d);
      memcpy (q, &d, sizeof d);
      return sizeof d;
    }
  PpTraceDiskSpanExt x;
  memset (&x, 0, sizeof x);
  d.duration_ns = 0;
  d.bytes = 0;
  d.rank = d.stage = d.microbatch = d.peer_rank = 0;
  d.kind = 0;
  d.flags = PP_TRACE_SPAN_EXT;
  if (sub)
    {
      d.stage = (int16_t) s->sub_stage;
      d.microbatch = (int16_t) s->sub_microbatch;
      d.kind = (uint8_t) s->sub_kind;
      d.flags |= PP_TRACE_SPAN_SUB;
    }
  x.end_ns = s->end_ns;
  x.bytes = s->bytes;
  x.rank = s->rank;
  x.stage = s->stage;
  x.microbatch = s->microbatch;
  x.peer_rank = s->peer_rank;
  x.kind = s->kind;
  x.flags = PP_TRACE_SPAN_IS_EXT;
  if (swap)
    {
      swap_disk_span (&d);
      swap_disk_span_ext (&x);
    }
  memcpy (q, &d, sizeof d);
  memcpy (q + sizeof d, &x, sizeof x);
  return sizeof d + sizeof x;
}

PpStatus
pp_trace_write_spans (PpTraceWriter *w, const PpSpan *spans, size_t n, PpError *err)
{
  if (w == NULL || (n > 0 && spans == NULL))
    return pp_error_set (err, PP_EINVAL, "trace: no writer or spans");
  for (size_t i = 0; i < n; i++)
    if (!rank_ok (spans[i].rank))
      return pp_error_set (err, PP_EINVAL, "trace: span %zu has rank %d, outside [0, %d)",
                           i, spans[i].rank, PP_TRACE_MAX_RANKS);

  const int swap = w->swap;
  while (n > 0)
    {
      size_t k = n < SPANS_PER_FRAME ? n : SPANS_PER_FRAME;
      uint8_t *p;
      RESERVE_OR_RETURN (p, w, sizeof (PpTraceFrameSpans) + 2 * k * sizeof (PpTraceDiskSpan), 0, err);
      uint8_t *q = p + sizeof (PpTraceFrameSpans);
      for (size_t i = 0; i < k; i++)
        q += encode_span (&spans[i], swap, q);
      commit (w, p, (uint32_t) (q - p), PP_TRACE_FRAME_SPANS);
      spans += k;
      n -= k;
    }
  return PP_OK;
}

PpStatus
pp_trace_write_counter (PpTraceWriter *w, const PpCounter *c, PpError *err)
{
  if (w == NULL || c == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or counter");
  if (!rank_ok (c->rank))
    return pp_error_set (err, PP_EINVAL, "trace: counter rank %d outside [0, %d)",
                         c->rank, PP_TRACE_MAX_RANKS);
  PpTraceFrameCounter f;
  memset (&f, 0, sizeof f);
  f.time_ns = (int64_t) w64 (w, (uint64_t) c->time_ns);
  uint64_t v = wdouble (w, c->value);
  memcpy (&f.value, &v, 8);
  f.rank = (int32_t) w32 (w, (uint32_t) c->rank);
  f.step = (int32_t) w32 (w, (uint32_t) c->step);
  f.kind = w16 (w, c->kind);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_COUNTER);
  return PP_OK;
}

PpStatus
pp_trace_write_step_marker (PpTraceWriter *w, int32_t rank, int32_t step,
                            PpTraceStepPhase phase, int64_t time_ns, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (!rank_ok (rank))
    return pp_error_set (err, PP_EINVAL, "trace: step marker rank %d outside [0, %d)",
                         rank, PP_TRACE_MAX_RANKS);
  if (phase != PP_TRACE_STEP_BEGIN && phase != PP_TRACE_STEP_END)
    return pp_error_set (err, PP_EINVAL, "trace: step phase %d is not BEGIN or END", (int) phase);
  PpTraceFrameStepMarker f;
  memset (&f, 0, sizeof f);
  f.time_ns = (int64_t) w64 (w, (uint64_t) time_ns);
  f.rank = (int32_t) w32 (w, (uint32_t) rank);
  f.step = (int32_t) w32 (w, (uint32_t) step);
  f.phase = w32 (w, (uint32_t) phase);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_STEP_MARKER);
  return PP_OK;
}

PpStatus
pp_trace_write_clock_offset (PpTraceWriter *w, int32_t rank, int64_t offset_ns, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (!rank_ok (rank))
    return pp_error_set (err, PP_EINVAL, "trace: clock offset rank %d outside [0, %d)",
                         rank, PP_TRACE_MAX_RANKS);
  PpTraceFrameClockOffset f;
  memset (&f, 0, sizeof f);
  f.rank = (int32_t) w32 (w, (uint32_t) rank);
  f.offset_ns = (int64_t) w64 (w, (uint64_t) offset_ns);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_CLOCK_OFFSET);
  return PP_OK;
}

PpStatus
pp_trace_write_rank (PpTraceWriter *w, int32_t rank, int32_t pid, const char *host, PpError *err)
{
  if (w == NULL || host == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or host");
  if (!rank_ok (rank))
    return pp_error_set (err, PP_EINVAL, "trace: rank %d outside [0, %d)", rank, PP_TRACE_MAX_RANKS);
  PpTraceFrameRank f;
  memset (&f, 0, sizeof f);
  f.rank = (int32_t) w32 (w, (uint32_t) rank);
  f.pid = (int32_t) w32 (w, (uint32_t) pid);
  snprintf (f.host, sizeof f.host, "%s", host);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_RANK);
  return PP_OK;
}

PpStatus
pp_trace_process_check (const PpTraceProcess *p, PpError *err)
{
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  if (p == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no process");
  if (p->process < 0 || p->process >= PP_TRACE_MAX_PROCESSES)
    return pp_error_set (err, PP_EINVAL, "trace: process %d outside [0, %d)", p->process,
                         PP_TRACE_MAX_PROCESSES);
  if (!rank_ok (p->rank))
    return pp_error_set (err, PP_EINVAL, "trace: process %d has pipeline rank %d, outside [0, %d)",
                         p->process, p->rank, PP_TRACE_MAX_RANKS);
  if (p->coord[PP_TRACE_MESH_PP] != p->rank)
    return pp_error_set (err, PP_EINVAL, "trace: process %d has pp coordinate %d, not its pipeline rank %d",
                         p->process, p->coord[PP_TRACE_MESH_PP], p->rank);
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (p->size[d] < 1 || p->size[d] > PP_TRACE_MAX_PROCESSES || p->coord[d] < 0
        || p->coord[d] >= p->size[d])
      return pp_error_set (err, PP_EINVAL, "trace: process %d has %s %d of size %d, not in [0, size) "
                           "with a size in [1, %d]", p->process, dim[d], p->coord[d], p->size[d],
                           PP_TRACE_MAX_PROCESSES);
  /* global ranks lie below PP_TRACE_MAX_PROCESSES: a mesh of more
   * processes is no job's (and its products would pass 64 bits) */
  if (pp_trace_mesh_count (p->size, PP_TRACE_MESH_PP) > PP_TRACE_MAX_PROCESSES)
    return pp_error_set (err, PP_EINVAL, "trace: process %d's mesh (pp %d x dp %d x tp %d x cp %d x ep %d) "
                         "holds more than %d processes", p->process, p->size[0], p->size[1], p->size[2],
                         p->size[3], p->size[4], PP_TRACE_MAX_PROCESSES);
  return PP_OK;
}

PpStatus
pp_trace_write_process (PpTraceWriter *w, const PpTraceProcess *p, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  PpStatus st = pp_trace_process_check (p, err);
  if (st != PP_OK)
    return st;
  PpTraceFrameProcess f;
  memset (&f, 0, sizeof f);
  f.process = (int32_t) w32 (w, (uint32_t) p->process);
  f.rank = (int32_t) w32 (w, (uint32_t) p->rank);
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    {
      f.coord[d] = (int32_t) w32 (w, (uint32_t) p->coord[d]);
      f.size[d] = (int32_t) w32 (w, (uint32_t) p->size[d]);
    }
  f.pid = (int32_t) w32 (w, (uint32_t) p->pid);
  f.flags = w32 (w, p->flags);
  copy_str (f.host, p->host, sizeof f.host);
  uint8_t *q;
  RESERVE_OR_RETURN (q, w, sizeof f, 0, err);
  memcpy (q, &f, sizeof f);
  commit (w, q, sizeof f, PP_TRACE_FRAME_PROCESS);
  return PP_OK;
}

PpStatus
pp_trace_write_open (PpTraceWriter *w, const PpTraceOpen *o, PpError *err)
{
  if (w == NULL || o == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or open action");
  if (!rank_ok (o->rank))
    return pp_error_set (err, PP_EINVAL, "trace: open action's rank %d outside [0, %d)", o->rank,
                         PP_TRACE_MAX_RANKS);
  if (o->kind < -1 || o->kind > INT16_MAX)
    return pp_error_set (err, PP_EINVAL, "trace: open action's kind %d outside [-1, %d]", o->kind,
                         INT16_MAX);
  PpTraceFrameOpen f;
  memset (&f, 0, sizeof f);
  f.time_ns = (int64_t) w64 (w, (uint64_t) o->time_ns);
  f.start_ns = (int64_t) w64 (w, (uint64_t) o->start_ns);
  f.rank = (int32_t) w32 (w, (uint32_t) o->rank);
  f.step = (int32_t) w32 (w, (uint32_t) o->step);
  f.stage = (int32_t) w32 (w, (uint32_t) o->stage);
  f.microbatch = (int32_t) w32 (w, (uint32_t) o->microbatch);
  f.peer_rank = (int32_t) w32 (w, (uint32_t) o->peer_rank);
  f.kind = (int16_t) w16 (w, (uint16_t) (int16_t) o->kind);
  f.flags = w16 (w, (uint16_t) o->flags);
  copy_str (f.where, o->where, sizeof f.where);
  uint8_t *q;
  RESERVE_OR_RETURN (q, w, sizeof f, 0, err);
  memcpy (q, &f, sizeof f);
  commit (w, q, sizeof f, PP_TRACE_FRAME_OPEN);
  return PP_OK;
}

PpStatus
pp_trace_writer_set_process (PpTraceWriter *w, int32_t process, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (process < -1 || process >= PP_TRACE_MAX_PROCESSES)
    return pp_error_set (err, PP_EINVAL, "trace: process %d outside [-1, %d)", process,
                         PP_TRACE_MAX_PROCESSES);
  w->tag = (uint16_t) (process + 1);
  return PP_OK;
}

PpStatus
pp_trace_write_string (PpTraceWriter *w, uint32_t id, const char *name, PpError *err)
{
  if (w == NULL || name == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or string");
  if (id == 0)
    return pp_error_set (err, PP_EINVAL, "trace: string id 0 is reserved for \"no name\"");
  size_t len = strnlen (name, PP_TRACE_STRING_MAX + 1);
  if (len > PP_TRACE_STRING_MAX)
    return pp_error_set (err, PP_EINVAL, "trace: string %u is longer than %d bytes",
                         id, PP_TRACE_STRING_MAX);
  size_t size = (sizeof (PpTraceFrameString) + len + 1 + 7) & ~(size_t) 7;
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, size, 1, err);
  PpTraceFrameString f;
  memset (&f, 0, sizeof f);
  f.id = w32 (w, id);
  f.length = w32 (w, (uint32_t) len);
  memcpy (p, &f, sizeof f);
  memcpy (p + sizeof f, name, len);
  commit (w, p, (uint32_t) size, PP_TRACE_FRAME_STRING);
  return PP_OK;
}

PpStatus
pp_trace_write_string_cut (PpTraceWriter *w, uint32_t id, const char *name, PpError *err)
{
  char cut[PP_TRACE_STRING_MAX + 1];
  if (name != NULL && strnlen (name, PP_TRACE_STRING_MAX + 1) > PP_TRACE_STRING_MAX)
    {
      memcpy (cut, name, PP_TRACE_STRING_MAX);
      cut[PP_TRACE_STRING_MAX] = '\0';
      name = cut;
    }
  return pp_trace_write_string (w, id, name, err);
}

PpStatus
pp_trace_write_dropped (PpTraceWriter *w, int32_t rank, uint64_t count, PpError *err)
{
  if (w == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer");
  if (rank != -1 && !rank_ok (rank))
    return pp_error_set (err, PP_EINVAL, "trace: dropped-events rank %d outside [-1, %d)",
                         rank, PP_TRACE_MAX_RANKS);
  PpTraceFrameDropped f;
  memset (&f, 0, sizeof f);
  f.rank = (int32_t) w32 (w, (uint32_t) rank);
  f.count = w64 (w, count);
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof f, 0, err);
  memcpy (p, &f, sizeof f);
  commit (w, p, sizeof f, PP_TRACE_FRAME_DROPPED);
  return PP_OK;
}

/* One span into the open SPANS frame, or a new one: span items that came
 * from one frame (same item offset) go into one frame again, so a copy keeps
 * the original's batches, not one frame per span. */
static PpStatus
write_one_span (PpTraceWriter *w, const PpSpan *span, uint64_t from, PpError *err)
{
  if (!rank_ok (span->rank))
    return pp_error_set (err, PP_EINVAL, "trace: span has rank %d, outside [0, %d)",
                         span->rank, PP_TRACE_MAX_RANKS);
  const size_t most = 2 * sizeof (PpTraceDiskSpan);
  if (w->failed == PP_OK && w->open_spans != SIZE_MAX && w->open_spans_from == from
      && w->open_spans_tag == w->tag
      && w->open_spans_size + most <= sizeof (PpTraceFrameSpans) + SPANS_PER_FRAME * most
      && w->cap - w->len >= most)
    {
      size_t n = encode_span (span, w->swap, w->buf + w->len);
      w->len += n;
      w->open_spans_size += n;
      uint32_t size = w32 (w, (uint32_t) w->open_spans_size);
      memcpy (w->buf + w->open_spans + offsetof (PpTraceFrameHeader, size), &size, sizeof size);
      return PP_OK;
    }
  uint8_t *p;
  RESERVE_OR_RETURN (p, w, sizeof (PpTraceFrameSpans) + most, 0, err);
  size_t n = sizeof (PpTraceFrameSpans) + encode_span (span, w->swap, p + sizeof (PpTraceFrameSpans));
  commit (w, p, (uint32_t) n, PP_TRACE_FRAME_SPANS);
  w->open_spans = (size_t) (p - w->buf);
  w->open_spans_size = n;
  w->open_spans_from = from;
  w->open_spans_tag = w->tag;
  return PP_OK;
}

static PpStatus write_item (PpTraceWriter *w, const PpTraceItem *item, PpError *err);

PpStatus
pp_trace_write_item (PpTraceWriter *w, const PpTraceItem *item, PpError *err)
{
  if (w == NULL || item == NULL)
    return pp_error_set (err, PP_EINVAL, "trace: no writer or item");
  if (w->failed != PP_OK)
    return writer_failed (w, err);
  /* a copy keeps who wrote each frame: merge's inputs are per process */
  uint16_t own = w->tag;
  w->tag = item->process >= 0 && item->process < PP_TRACE_MAX_PROCESSES
           ? (uint16_t) (item->process + 1) : 0;
  PpStatus st = write_item (w, item, err);
  w->tag = own;
  return st;
}

static PpStatus
write_item (PpTraceWriter *w, const PpTraceItem *item, PpError *err)
{
  switch (item->type)
    {
    case PP_TRACE_ITEM_DESCRIPTION:
      if (item->description == NULL)
        return pp_error_set (err, PP_EINVAL, "trace: description item without a description");
      return pp_trace_write_description (w, item->description, err);

    case PP_TRACE_ITEM_PLAN:
      if (!rank_ok (item->plan.rank))
        return pp_error_set (err, PP_EINVAL, "trace: plan rank %d outside [0, %d)",
                             item->plan.rank, PP_TRACE_MAX_RANKS);
      if (item->plan.n_actions > PP_TRACE_PLAN_MAX_ACTIONS)
        return pp_error_set (err, PP_EINVAL, "trace: plan of rank %d has %zu actions, at most %u fit",
                             item->plan.rank, item->plan.n_actions, PP_TRACE_PLAN_MAX_ACTIONS);
      if (item->plan.n_actions > 0 && item->plan.actions == NULL)
        return pp_error_set (err, PP_EINVAL, "trace: plan of rank %d has no actions array",
                             item->plan.rank);
      return write_plan_frame (w, item->plan.rank, item->plan.actions, item->plan.n_actions,
                               item->plan.has_timeline, err);

    case PP_TRACE_ITEM_SPAN:
      return write_one_span (w, &item->span, item->offset, err);

    case PP_TRACE_ITEM_COUNTER:
      return pp_trace_write_counter (w, &item->counter, err);

    case PP_TRACE_ITEM_STEP_MARKER:
      return pp_trace_write_step_marker (w, item->step_marker.rank, item->step_marker.step,
                                         item->step_marker.phase, item->step_marker.time_ns, err);

    case PP_TRACE_ITEM_CLOCK_OFFSET:
      return pp_trace_write_clock_offset (w, item->clock_offset.rank, item->clock_offset.offset_ns,
                                          err);

    case PP_TRACE_ITEM_STRING:
      if (item->string.name == NULL)
        return pp_error_set (err, PP_EINVAL, "trace: string item without a name");
      return pp_trace_write_string (w, item->string.id, item->string.name, err);

    case PP_TRACE_ITEM_DROPPED:
      return pp_trace_write_dropped (w, item->dropped.rank, item->dropped.count, err);

    case PP_TRACE_ITEM_RANK:
      return pp_trace_write_rank (w, item->rank_info.rank, item->rank_info.pid, item->rank_info.host,
                                  err);

    case PP_TRACE_ITEM_PROCESS:
      return pp_trace_write_process (w, &item->process_info, err);

    case PP_TRACE_ITEM_OPEN:
      return pp_trace_write_open (w, &item->open, err);

    case PP_TRACE_ITEM_END:
    default:
      return pp_error_set (err, PP_EINVAL, "trace: item type %d cannot be written", (int) item->type);
    }
}
