/* pp-live-history.c — the stream a live server keeps in memory, and what
 * of it each viewer is sent next (pp-live-private.h).
 *
 * pp_live_server_write appends whole frames to an in-memory history (a list
 * of chunks, each holding whole frames) and indexes them: a sequence number,
 * logical byte offset, type, and the number of events the frame holds
 * (SPANS: its spans; COUNTER, STEP_MARKER: 1; DROPPED: its count).  Essential
 * frames (DESCRIPTION, PLAN, CLOCK_OFFSET, STRING, RANK) are also kept apart,
 * the newest of each rank (or string id) only (pp-live-retained.c); an
 * older one still in the history is marked superseded and not sent to a
 * viewer that has not had it yet.  When the history (its frames, their
 * index and the retained frames) grows past history_max_bytes the oldest
 * chunks are freed; a viewer that reaches the freed part gets the retained
 * frames and a DROPPED count for the rest.
 *
 * Every viewer has a cursor (the sequence number of its next frame) and a
 * staging buffer: under the lock, whole frames are copied from the history
 * into it (skipping non-essential frames while the viewer lags more than
 * viewer_lag_bytes, down to half of it, and counting what it skipped).
 * Before the next non-essential frame after a skip, and when the viewer has
 * caught up, a DROPPED frame (rank -1) carries the count.
 */
#include "pp-live-private.h"

#include <errno.h>
#include <sys/socket.h>

#define STAGE_MAX             (256u * 1024u)
#define STAGE_MIN             (16u * 1024u)
#define STAGE_ALL_MAX         (64u * 1024u * 1024u)

/* What a viewer stages at most before the socket takes it: 256 KiB, less
 * when many are connected, so that all of them together stage 64 MiB at
 * most (1,500 viewers that never read held 256 KiB each, 390 MB in all),
 * never under 16 KiB; a frame larger than that is staged alone. */
static size_t
stage_max (const PpLiveServer *s)
{
  size_t n = s->n_viewers_arr > 0 ? s->n_viewers_arr : 1, per = STAGE_ALL_MAX / n;
  return per > STAGE_MAX ? STAGE_MAX : per < STAGE_MIN ? STAGE_MIN : per;
}

static uint64_t
frame_events (PpLiveServer *s, const uint8_t *f, uint32_t size, uint16_t type)
{
  switch (type)
    {
    case PP_TRACE_FRAME_SPANS:
      {
        uint64_t n = 0;
        for (uint32_t o = 8; o + 40 <= size; o += 40)
          if (!(f[o + 39] & PP_TRACE_SPAN_IS_EXT))
            n++;
        return n;
      }
    case PP_TRACE_FRAME_DROPPED:
      if (size >= 24)
        {
          uint64_t c;
          memcpy (&c, f + 16, 8);
          return s64 (s, c);
        }
      return 0;
    default:
      return 1;
    }
}

/* Frees the oldest chunk, the last one too (the history is then empty
 * until the next frame: the retained set's bound may need that much).  Its
 * frames' index entries go with it.  0, or -1 when there is none. */
int
pp_live_history_evict_oldest (PpLiveServer *s)
{
  if (s->n_chunks == 0)
    return -1;
  Chunk *c = &s->chunks[0];
  uint64_t end = s->n_chunks > 1 ? s->chunks[1].first_seq : s->next_seq;
  uint64_t n = end - c->first_seq;
  s->head += n;
  s->first_seq = end;
  s->base_cum = s->head < s->n_frames ? s->frames[s->head].cum : s->cum_end;
  s->window_bytes -= c->len + n * sizeof (Frame);
  free (c->data);
  memmove (s->chunks, s->chunks + 1, (s->n_chunks - 1) * sizeof *s->chunks);
  s->n_chunks--;
  if (s->head > 0 && s->head >= s->n_frames / 2)
    {
      memmove (s->frames, s->frames + s->head, (s->n_frames - s->head) * sizeof *s->frames);
      s->n_frames -= s->head;
      s->head = 0;
    }
  return 0;
}

/* Frees the oldest chunks while the history (its frames, their index, and
 * the retained frames) is over its cap; the newest chunk stays. */
static void
evict (PpLiveServer *s)
{
  while (s->n_chunks > 1 && s->window_bytes + pp_live_kept_cost (s) > s->history_max)
    pp_live_history_evict_oldest (s);
}

static int
add_frame (PpLiveServer *s, const uint8_t *data, uint32_t size)
{
  uint16_t type;
  memcpy (&type, data + 4, 2);
  type = s16 (s, type);

  Chunk *c = s->n_chunks ? &s->chunks[s->n_chunks - 1] : NULL;
  if (c == NULL || c->cap - c->len < size)
    {
      if (grow ((void **) &s->chunks, &s->chunks_cap, s->n_chunks + 1, sizeof *s->chunks) < 0)
        return -1;
      size_t cap = size > s->chunk_size ? size : s->chunk_size;
      uint8_t *d = malloc (cap);
      if (d == NULL)
        return -1;
      c = &s->chunks[s->n_chunks++];
      c->data = d;
      c->len = 0;
      c->cap = cap;
      c->first_seq = s->next_seq;
    }
  if (grow ((void **) &s->frames, &s->frames_cap, s->n_frames + 1, sizeof *s->frames) < 0)
    return -1;
  int ess = pp_live_kept_is_essential (type);
  uint64_t replaced = UINT64_MAX;
  if (ess && pp_live_kept_add (s, type, data, size, s->next_seq, s->cum_end, &replaced) < 0)
    return -1;
  if (replaced != UINT64_MAX && replaced >= s->first_seq)
    s->frames[s->head + (replaced - s->first_seq)].superseded = 1;
  uint8_t *dst = c->data + c->len;
  memcpy (dst, data, size);
  c->len += size;
  s->window_bytes += size + sizeof (Frame);
  Frame *f = &s->frames[s->n_frames++];
  f->off = s->end_off;
  f->cum = s->cum_end;
  f->events = ess ? 0 : frame_events (s, dst, size, type);
  f->data = dst;
  f->size = size;
  f->type = type;
  f->essential = (uint8_t) ess;
  f->superseded = 0;
  if (type == PP_TRACE_FRAME_SPANS)
    pp_live_kept_refs (s, dst, size, s->next_seq);
  s->next_seq++;
  s->cum_end += f->events;
  s->end_off += size;
  evict (s);
  /* over the retained set's bound: the oldest events go first where the
   * names they use are what holds it */
  uint64_t horizon = pp_live_kept_bound_begin (s);
  while (horizon != UINT64_MAX && s->first_seq < horizon && pp_live_history_evict_oldest (s) == 0)
    ;
  pp_live_kept_bound_end (s);
  return 0;
}

static int
frame_size_ok (PpLiveServer *s, const uint8_t *h, uint32_t *size)
{
  uint32_t sz;
  memcpy (&sz, h, 4);
  sz = s32 (s, sz);
  if (sz < 8 || sz % 8 != 0 || sz > PP_TRACE_FRAME_MAX)
    return 0;
  *size = sz;
  return 1;
}

/* Appends bytes of frames (possibly partial) to the history; lock held. */
int
pp_live_history_append (PpLiveServer *s, const uint8_t *p, size_t n)
{
  /* the file header */
  while (!s->hdr_done && n > 0)
    {
      size_t want = s->hdr_size ? s->hdr_size : 20;
      size_t k = want - s->hdr_len;
      if (k > n)
        k = n;
      memcpy (s->hdr + s->hdr_len, p, k);
      s->hdr_len += k;
      p += k;
      n -= k;
      if (s->hdr_len < want)
        return 0;
      if (s->hdr_size == 0)
        {
          if (memcmp (s->hdr, PP_TRACE_MAGIC, 8) != 0)
            return -1;
          uint8_t bo = s->hdr[8];
          int host_little = 1;
          {
            uint16_t one = 1;
            uint8_t b;
            memcpy (&b, &one, 1);
            host_little = b == 1;
          }
          if (bo == PP_TRACE_ORDER_LITTLE_CODE)
            s->swap = !host_little;
          else if (bo == PP_TRACE_ORDER_BIG_CODE)
            s->swap = host_little;
          else
            return -1;
          uint32_t hs;
          memcpy (&hs, s->hdr + 16, 4);
          hs = s32 (s, hs);
          if (hs < 32 || hs > PP_TRACE_HEADER_MAX || hs % 8 != 0)
            return -1;
          s->hdr_size = hs;
          if (s->hdr_len == hs)
            s->hdr_done = 1;
        }
      else
        s->hdr_done = 1;
      if (s->hdr_done)
        s->end_off = s->hdr_size;
    }

  while (n > 0)
    {
      uint32_t size;
      if (s->tail_len == 0 && n >= 8)
        {
          if (!frame_size_ok (s, p, &size))
            return -1;
          if (size <= n)
            {
              if (add_frame (s, p, size) < 0)
                return -2;
              p += size;
              n -= size;
              continue;
            }
        }
      /* a partial frame: gather it in the tail */
      size_t want = 8;
      if (s->tail_len >= 8 || (s->tail_len == 0 && n >= 8))
        {
          const uint8_t *h = s->tail_len >= 8 ? s->tail : p;
          if (!frame_size_ok (s, h, &size))
            return -1;
          want = size;
        }
      if (grow ((void **) &s->tail, &s->tail_cap, want, 1) < 0)
        return -2;
      size_t k = want - s->tail_len;
      if (k > n)
        k = n;
      memcpy (s->tail + s->tail_len, p, k);
      s->tail_len += k;
      p += k;
      n -= k;
      if (s->tail_len == want && want >= 8)
        {
          if (want == 8)
            {
              if (!frame_size_ok (s, s->tail, &size))
                return -1;
              if (size > 8)
                continue;   /* now gather the body */
            }
          if (add_frame (s, s->tail, (uint32_t) s->tail_len) < 0)
            return -2;
          s->tail_len = 0;
        }
    }
  return 0;
}

static int
stage_dropped (PpLiveServer *s, Viewer *v)
{
  uint8_t f[sizeof (PpTraceFrameDropped)] = { 0 };
  put32 (s, f, sizeof f);
  put16 (s, f + 4, PP_TRACE_FRAME_DROPPED);
  put32 (s, f + 8, (uint32_t) -1);
  put64 (s, f + 16, v->pend_drop);
  if (pp_live_stage (v, f, sizeof f) < 0)
    return -1;
  v->pend_drop = 0;
  return 0;
}

static void
count_drop (PpLiveServer *s, Viewer *v, uint64_t n)
{
  v->pend_drop += n;
  s->dropped += n;
}

/* Copies whole frames from the history to the viewer's staging buffer, lock
 * held.  Returns -1 when out of memory (the viewer is then dropped). */
int
pp_live_viewer_fill (PpLiveServer *s, Viewer *v)
{
  const size_t most = stage_max (s);
  if (!v->header_sent)
    {
      if (!s->hdr_done)
        return 0;
      if (pp_live_stage (v, s->hdr, s->hdr_size) < 0)
        return -1;
      v->header_sent = 1;
      v->mark = v->len;   /* the header is not a frame */
    }
  for (;;)
    {
      if (v->seq < s->first_seq)
        {
          /* the history has lost what comes next: the retained frames
           * only, and the count of what went (pp-live-retained.c) */
          const Kept *e = pp_live_kept_next (s, v->seq, s->first_seq);
          if (e != NULL && e->data == NULL)
            {
              count_drop (s, v, e->gone);
              v->seq = e->seq + 1;
              continue;
            }
          if (e != NULL)
            {
              if (pending (v) > 0 && pending (v) + e->size > most)
                return 0;
              count_drop (s, v, e->cum - v->cum);
              if (pp_live_stage (v, e->data, e->size) < 0)
                return -1;
              v->cum = e->cum;
              v->seq = e->seq + 1;
              continue;
            }
          count_drop (s, v, s->base_cum - v->cum);
          v->cum = s->base_cum;
          v->seq = s->first_seq;
          continue;
        }
      if (v->seq >= s->next_seq)
        {
          /* caught up: report what was skipped once the socket took the
           * rest (a stalled viewer gets one DROPPED frame, not one a wake) */
          if (v->pend_drop > 0 && pending (v) == 0 && stage_dropped (s, v) < 0)
            return -1;
          return 0;
        }
      Frame *f = &s->frames[s->head + (v->seq - s->first_seq)];
      uint64_t lag = s->end_off - (f->off + f->size);   /* bytes written after this frame */
      int lagging = lag > s->lag_bytes || (v->skipping && lag > s->lag_bytes / 2);
      if (!f->essential)
        {
          if (lagging)
            {
              v->skipping = 1;
              count_drop (s, v, f->events);
              v->cum += f->events;
              v->seq++;
              continue;
            }
          v->skipping = 0;
          if (pending (v) > 0 && pending (v) + f->size > most)
            return 0;
          if (v->pend_drop > 0 && stage_dropped (s, v) < 0)
            return -1;
          if (pp_live_stage (v, f->data, f->size) < 0)
            return -1;
          v->cum += f->events;
          v->seq++;
        }
      else if (f->superseded)
        v->seq++;   /* a newer one of its rank (or id) follows: that one is sent */
      else
        {
          if (!lagging && pending (v) > 0 && pending (v) + f->size > most)
            return 0;
          if (pp_live_stage (v, f->data, f->size) < 0)
            return -1;
          v->seq++;
        }
    }
}

/* Moves the viewer's mark past the frames it has begun to send, while
 * they are still in its buffer.  SIZE_MAX: not known (the push's line and
 * clock pings are not frames; a size that cannot be a frame). */
static void
mark_sent (PpLiveServer *s, Viewer *v)
{
  if (v->outbound)
    v->mark = SIZE_MAX;
  while (v->mark < v->off)
    {
      uint32_t size;
      memcpy (&size, v->buf + v->mark, 4);
      size = s32 (s, size);
      if (size < sizeof (PpTraceFrameHeader) || size > v->len - v->mark)
        {
          v->mark = SIZE_MAX;
          break;
        }
      v->mark += size;
    }
}

/* Ranks lie in [0, 65536) (docs/trace-format.md); a count of any other
 * goes to rank -1's DROPPED frame. */
#define RANKS_COUNTED 65536

/* The rank of the span whose compact slot is at o (its extension's, where
 * it has one). */
static int32_t
span_rank (PpLiveServer *s, const uint8_t *f, uint32_t size, uint32_t o)
{
  uint8_t flags = f[o + offsetof (PpTraceDiskSpan, flags)];
  if ((flags & PP_TRACE_SPAN_EXT) && o + 80 <= size
      && (f[o + 40 + offsetof (PpTraceDiskSpanExt, flags)] & PP_TRACE_SPAN_IS_EXT))
    {
      uint32_t r;
      memcpy (&r, f + o + 40 + offsetof (PpTraceDiskSpanExt, rank), 4);
      return (int32_t) s32 (s, r);
    }
  uint16_t r;
  memcpy (&r, f + o + offsetof (PpTraceDiskSpan, rank), 2);
  return (int16_t) s16 (s, r);
}

static void
count_rank (uint64_t *by_rank, uint64_t *other, int32_t rank, uint64_t n)
{
  if (rank >= 0 && rank < RANKS_COUNTED)
    by_rank[rank] += n;
  else
    *other += n;
}

/* Counts a frame the cut leaves out, by the rank of each of its events:
 * spans and counters by theirs, a step marker as -1 (an event, as the
 * history counts it, whose rank a DROPPED frame would mistake: rank 0's
 * markers speak for every rank).  1 when it is left out, 0 when it goes
 * as it is (names, plans, clock offsets, the stream's DROPPED frames). */
static int
cut_frame (PpLiveServer *s, const uint8_t *f, uint32_t size, uint16_t type, uint64_t *by_rank,
           uint64_t *other)
{
  if (type == PP_TRACE_FRAME_SPANS)
    {
      for (uint32_t o = sizeof (PpTraceFrameHeader); o + sizeof (PpTraceDiskSpan) <= size;
           o += sizeof (PpTraceDiskSpan))
        if (!(f[o + offsetof (PpTraceDiskSpan, flags)] & PP_TRACE_SPAN_IS_EXT))
          count_rank (by_rank, other, span_rank (s, f, size, o), 1);
      return 1;
    }
  if (type == PP_TRACE_FRAME_COUNTER && size >= sizeof (PpTraceFrameCounter))
    {
      uint32_t rank;
      memcpy (&rank, f + offsetof (PpTraceFrameCounter, rank), 4);
      count_rank (by_rank, other, (int32_t) s32 (s, rank), 1);
      return 1;
    }
  if (type == PP_TRACE_FRAME_STEP_MARKER)
    {
      *other += 1;
      return 1;
    }
  return 0;
}

/* The job ends and the viewer has not caught up within the final drain's
 * time (pp-live-server.c): what it still lacks is counted, not cut off
 * unsaid.  Lock held, on the server thread.  The spans and counters it
 * has not begun to receive (those staged and not begun too: a viewer that
 * barely reads must still get to the count) are left out and counted by
 * their rank, in a DROPPED frame of each rank, as a collector's own drops
 * are: a viewer still tells a quiet rank from a lossy one.  Step markers
 * are left out and counted as rank -1's; the small frames (names, plans,
 * clock offsets, the stream's DROPPED frames) go as they are.  What the
 * history had already lost for it is counted as the fill counts it.  A
 * frame partly sent is finished first.  0, or -1 when out of memory (the
 * viewer is then dropped). */
int
pp_live_viewer_cut (PpLiveServer *s, Viewer *v)
{
  uint64_t other = 0;
  uint64_t *by_rank = calloc (RANKS_COUNTED, sizeof *by_rank);
  int r = -1;

  if (by_rank == NULL)
    return -1;
  if (!v->header_sent)
    {
      if (!s->hdr_done)
        goto done_ok;
      if (pp_live_stage (v, s->hdr, s->hdr_size) < 0)
        goto out;
      v->header_sent = 1;
      v->mark = v->len;
    }
  if (!v->outbound && v->mark != SIZE_MAX && v->mark >= v->off && v->mark <= v->len)
    {
      size_t in = v->mark, out = v->mark;
      while (in + sizeof (PpTraceFrameHeader) <= v->len)
        {
          uint32_t size;
          uint16_t type;
          memcpy (&size, v->buf + in, 4);
          memcpy (&type, v->buf + in + 4, 2);
          size = s32 (s, size);
          type = s16 (s, type);
          if (size < sizeof (PpTraceFrameHeader) || size > v->len - in)
            break;   /* cannot be (whole frames are staged): the rest goes as it is */
          if (!cut_frame (s, v->buf + in, size, type, by_rank, &other))
            {
              memmove (v->buf + out, v->buf + in, size);
              out += size;
            }
          in += size;
        }
      memmove (v->buf + out, v->buf + in, v->len - in);
      v->len = out + (v->len - in);
    }
  while (v->seq < s->first_seq)
    {
      /* as the fill walks what the history lost: the retained frames go,
       * the rest is counted */
      const Kept *e = pp_live_kept_next (s, v->seq, s->first_seq);
      if (e == NULL)
        {
          other += s->base_cum - v->cum;
          v->cum = s->base_cum;
          v->seq = s->first_seq;
        }
      else if (e->data == NULL)
        {
          other += e->gone;
          v->seq = e->seq + 1;
        }
      else
        {
          other += e->cum - v->cum;
          if (pp_live_stage (v, e->data, e->size) < 0)
            goto out;
          v->cum = e->cum;
          v->seq = e->seq + 1;
        }
    }
  for (; v->seq < s->next_seq; v->seq++)
    {
      Frame *f = &s->frames[s->head + (v->seq - s->first_seq)];
      if (f->superseded)
        continue;
      v->cum += f->events;
      if (!cut_frame (s, f->data, f->size, f->type, by_rank, &other)
          && pp_live_stage (v, f->data, f->size) < 0)
        goto out;
    }
  s->dropped += other;   /* the ranks' below; what was pending is in already */
  other += v->pend_drop;
  v->pend_drop = 0;
  for (int32_t rank = -1; rank < RANKS_COUNTED; rank++)
    {
      uint64_t n = rank < 0 ? other : by_rank[rank];
      if (n == 0)
        continue;
      uint8_t d[sizeof (PpTraceFrameDropped)] = { 0 };
      put32 (s, d, sizeof d);
      put16 (s, d + 4, PP_TRACE_FRAME_DROPPED);
      put32 (s, d + offsetof (PpTraceFrameDropped, rank), (uint32_t) rank);
      put64 (s, d + offsetof (PpTraceFrameDropped, count), n);
      if (pp_live_stage (v, d, sizeof d) < 0)
        goto out;
      if (rank >= 0)
        s->dropped += n;
    }
done_ok:
  r = 0;
out:
  free (by_rank);
  return r;
}

/* Sends what the viewer has, refilling from the history; never blocks.
 * Returns 1 if some bytes went out. */
int
pp_live_viewer_pump (PpLiveServer *s, Viewer *v)
{
  int progress = 0;
  pthread_mutex_lock (&s->lock);
  int r = pp_live_viewer_fill (s, v);
  pthread_mutex_unlock (&s->lock);
  if (r < 0)
    {
      v->dead = 1;
      return 0;
    }
  for (;;)
    {
      if (pending (v) == 0)
        {
          v->off = v->len = v->mark = 0;
          pthread_mutex_lock (&s->lock);
          r = pp_live_viewer_fill (s, v);
          pthread_mutex_unlock (&s->lock);
          if (r < 0)
            {
              v->dead = 1;
              return progress;
            }
          if (pending (v) == 0)
            return progress;
        }
      ssize_t n = send (v->fd, v->buf + v->off, pending (v), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        {
          v->off += (size_t) n;
          mark_sent (s, v);
          progress = 1;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return progress;
      v->err_no = n < 0 ? errno : 0;
      v->dead = 1;
      return progress;
    }
}

/* Sends what the viewer has, refilling from the history; never blocks.
 * Returns 1 if some bytes went out. */

void
pp_live_history_free (PpLiveServer *s)
{
  for (size_t i = 0; i < s->n_chunks; i++)
    free (s->chunks[i].data);
  free (s->chunks);
  free (s->frames);
  pp_live_kept_free (s);
  free (s->tail);
}
