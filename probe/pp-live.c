/* pp-live.c — a job's live endpoint and the viewer side of it (pp-live.h).
 *
 * Server.  pp_live_server_write appends whole frames to an in-memory history
 * (a list of chunks, each holding whole frames) and indexes them: a sequence
 * number, logical byte offset, type, and the number of events the frame holds
 * (SPANS: its spans; COUNTER, STEP_MARKER: 1; DROPPED: its count).  Essential
 * frames (DESCRIPTION, PLAN, CLOCK_OFFSET, STRING, RANK) are also copied to a
 * separate store that is never evicted.  When the history grows past
 * history_max_bytes the oldest chunks are freed; a viewer that reaches the
 * freed part gets the essential frames from the store and a DROPPED count for
 * the rest.
 *
 * One server thread polls the listeners, the viewers and a wake pipe.  Every
 * viewer has a cursor (the sequence number of its next frame) and a staging
 * buffer: under the lock, whole frames are copied from the history into it
 * (skipping non-essential frames while the viewer lags more than
 * viewer_lag_bytes, down to half of it, and counting what it skipped); out of
 * the lock, the staging buffer goes to the socket with non-blocking sends.
 * Before the next non-essential frame after a skip, and when the viewer has
 * caught up, a DROPPED frame (rank -1) carries the count.
 *
 * Client.  A socket and a streaming trace reader.
 */
#define _GNU_SOURCE   /* pthread_setname_np */
#include "pp-live.h"
#include "pp-probe.h"
#include "pp-trace-format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

#define DEFAULT_LAG_BYTES     (64u * 1024u * 1024u)
#define DEFAULT_HISTORY_MAX   (1024ull * 1024u * 1024u)
#define STAGE_MAX             (256u * 1024u)
/* TCP viewers that have not sent their token yet ("pending"): each holds a
 * descriptor of the job's, so a flood of them (a thousand connections a
 * second against a job whose fd limit is 64) used to lock the real viewer
 * out.  They get AUTH_TIMEOUT_MS to send the line (a real viewer sends it
 * with its connect: it is usually there when we accept), and at most
 * PENDING_MAX of them wait at once, PENDING_PER_PEER_MAX from one address.
 *
 * At a bound, the oldest pending one goes (from the same address first),
 * after one last read of its line, rather than refusing the newcomer.
 * Refusing new ones would let a flooder who keeps PENDING_MAX idle
 * connections open (reopening each when it times out) lock everyone out for
 * as long as it likes; dropping the oldest means a real viewer is only ever
 * dropped when PENDING_PER_PEER_MAX newer connections from its own address
 * arrive before its token line, which on any link is microseconds away.
 * Reserving descriptors for authenticated viewers would not help: every
 * viewer is unauthenticated until its line is read.  Authenticated viewers
 * are never dropped for this. */
#define AUTH_TIMEOUT_MS       1000
#define PENDING_MAX           16
#define PENDING_PER_PEER_MAX  4
#define AUTH_LINE_MAX         256
#define DRAIN_TOTAL_MS        1000
#define DRAIN_IDLE_MS         200
#define TOKEN_HEX             32
/* A rank's push to a collector on another host (pp-live.h, push): a
 * connect may take PUSH_CONNECT_MS, and PUSH_TRIES of them are made,
 * PUSH_RETRY_MS apart (a collector that is a moment late), then one line
 * says it and the rank records on without.  A push that was connected and
 * ends is not made again: the collector would get the stream twice. */
#define PUSH_CONNECT_MS       3000
#define PUSH_TRIES            5
#define PUSH_RETRY_MS         1000
/* The push's clock (pp-live.h; docs/transport.md, "Clocks"): a session of
 * up to CLOCK_ROUNDS ping-pongs, one at a time, each answered within
 * CLOCK_REPLY_MS or lost, the whole session within CLOCK_SESSION_MS; one
 * at the start and every CLOCK_EVERY_MS after, to follow drift.  A
 * collector that never answers (one older than the pings) is not asked
 * again. */
#define CLOCK_ROUNDS          32
#define CLOCK_REPLY_MS        500
#define CLOCK_SESSION_MS      2000
#define CLOCK_EVERY_MS        10000
#define CLOCK_CLOSE_WAIT_MS   200
#define CLOCK_PING_SIZE       32
#define CLOCK_REPLY_SIZE      32
static const char clock_reply_magic[8] = { 'P', 'P', 'C', 'L', 'O', 'C', 'K', '1' };

/* ---- small helpers ---- */

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
set_nonblock_cloexec (int fd)
{
  int fl = fcntl (fd, F_GETFL);
  if (fl < 0 || fcntl (fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -1;
  fl = fcntl (fd, F_GETFD);
  if (fl < 0 || fcntl (fd, F_SETFD, fl | FD_CLOEXEC) < 0)
    return -1;
  return 0;
}

static void
no_sigpipe (int fd)
{
#ifdef SO_NOSIGPIPE
  int one = 1;
  setsockopt (fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#else
  (void) fd;
#endif
}

/* ---- server ---- */

typedef struct {
  uint64_t off;        /* logical byte offset in the stream */
  uint64_t cum;        /* events in non-essential frames before this one */
  uint64_t events;     /* events this frame holds (0 for essential frames) */
  uint8_t *data;       /* in a chunk */
  uint32_t size;
  uint16_t type;
  uint8_t  essential;
} Frame;

typedef struct {
  uint64_t seq;
  uint64_t cum;
  size_t   store_off;
  uint32_t size;
} EssFrame;

typedef struct {
  uint8_t *data;
  size_t   len, cap;
  uint64_t first_seq;  /* of the first frame in it */
} Chunk;

typedef struct {
  int      fd;
  int      is_tcp;
  int      authed;
  int      dead;
  int      outbound;           /* our push to a collector, not a viewer that came */
  int      connecting;         /* outbound, its connect not done yet */
  int      err_no;             /* outbound: why it ended, 0 if the peer closed */
  int64_t  auth_deadline;
  uint64_t accept_seq;         /* order of arrival, for dropping the oldest pending */
  struct sockaddr_storage peer;
  socklen_t peer_len;
  char     line[AUTH_LINE_MAX];
  size_t   line_len;

  int      header_sent;
  uint64_t seq;        /* next frame to stage */
  uint64_t cum;        /* events before seq */
  size_t   ess_idx;    /* cursor in the essential store (evicted region) */
  uint64_t pend_drop;  /* events skipped, not yet reported */
  int      skipping;
  uint8_t *buf;        /* staging: whole frames */
  size_t   off, len, cap;
} Viewer;

struct _PpLiveServer {
  pthread_mutex_t lock;
  pthread_t       thread;
  int             thread_started;
  int             wake_r, wake_w;
  atomic_int      wake_pending;
  atomic_int      stop;

  int   unix_fd, tcp_fd;
  char  sock_path[sizeof (((struct sockaddr_un *) 0)->sun_path)];
  char  priv_dir[PATH_MAX];       /* no_register: our temp dir, else "" */
  int   registered;
  char  reg_dir[PATH_MAX];        /* where the entry is (the registry or its fallback) */
  char  notice[PP_ERROR_MSG_MAX]; /* why the usual registry was not used, or "" */
  int32_t pid;
  char  token[TOKEN_HEX + 1];
  char  auth_line[AUTH_LINE_MAX];
  size_t auth_line_len;
  int   tcp_port;

  size_t lag_bytes;
  size_t history_max;
  size_t chunk_size;

  /* history, under lock */
  int      broken;
  int      swap;             /* stream byte order differs from the host's */
  uint8_t  hdr[PP_TRACE_HEADER_MAX];
  size_t   hdr_len, hdr_size; /* hdr_size 0 until known */
  int      hdr_done;
  uint8_t *tail;             /* a partial frame */
  size_t   tail_len, tail_cap;

  Chunk   *chunks;
  size_t   n_chunks, chunks_cap;
  size_t   window_bytes;

  Frame   *frames;           /* frames[head..n_frames): seq first_seq.. */
  size_t   head, n_frames, frames_cap;
  uint64_t first_seq, next_seq;
  uint64_t base_cum;         /* events before first_seq */
  uint64_t cum_end;          /* events before next_seq */
  uint64_t end_off;          /* logical offset after the last frame */

  uint8_t *ess_store;
  size_t   ess_len, ess_cap;
  EssFrame *ess;
  size_t   n_ess, ess_arr_cap;

  uint64_t dropped;

  /* server thread only */
  uint64_t accept_seq;
  int64_t  accept_pause_until;  /* out of descriptors: stop polling the listener until then */
  Viewer **viewers;
  size_t   n_viewers_arr, viewers_cap;
  atomic_uint n_viewers;
  atomic_ullong refused;

  /* pushing (a rank): the collector's address and our line to it */
  enum { PUSH_NONE, PUSH_WANTED, PUSH_CONNECTING, PUSH_LIVE, PUSH_OVER } push_state;
  char     push_spec[256];
  char     push_line[AUTH_LINE_MAX];
  size_t   push_line_len;
  char     push_label[128];
  int      push_tries;
  int      push_errno;        /* why the last try failed */
  int64_t  push_next;
  Viewer  *push_v;
  /* the push's clock against the collector's (server thread only, but the
   * result, which pp_live_server_clock reads from any thread) */
  int      clk_off;           /* the collector does not answer: measure no more */
  int      clk_in_session, clk_waiting, clk_rounds, clk_answered_ever, clk_report;
  int      clk_outstanding;   /* pings sent whose reply has not come */
  uint32_t clk_seq;
  int64_t  clk_sent;          /* the ping's time, this process's record clock */
  int64_t  clk_deadline, clk_session_end, clk_next;   /* now_ms */
  int64_t  clk_best_rtt, clk_best_off;
  int64_t  clk_last_rtt;      /* the last session's, told the collector in each ping */
  uint8_t  clk_in[CLOCK_REPLY_SIZE];
  size_t   clk_in_len;
  atomic_llong clk_offset, clk_rtt;
  atomic_uint  clk_gen;
  /* collecting: who takes pushed streams */
  int    (*on_push) (void *user, int fd, const void *data, size_t n, const char *peer);
  void    *push_user;
};

static inline uint16_t s16 (const PpLiveServer *s, uint16_t v) { return s->swap ? __builtin_bswap16 (v) : v; }
static inline uint32_t s32 (const PpLiveServer *s, uint32_t v) { return s->swap ? __builtin_bswap32 (v) : v; }
static inline uint64_t s64 (const PpLiveServer *s, uint64_t v) { return s->swap ? __builtin_bswap64 (v) : v; }

static int
grow (void **p, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need)
    n *= 2;
  void *q = realloc (*p, n * elem);
  if (q == NULL)
    return -1;
  *p = q;
  *cap = n;
  return 0;
}

static int
is_essential (uint16_t type)
{
  return type == PP_TRACE_FRAME_DESCRIPTION || type == PP_TRACE_FRAME_PLAN
         || type == PP_TRACE_FRAME_CLOCK_OFFSET || type == PP_TRACE_FRAME_STRING
         || type == PP_TRACE_FRAME_RANK;
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

/* Frees the oldest chunks while the history is over its cap. */
static void
evict (PpLiveServer *s)
{
  size_t drop = 0;
  while (s->n_chunks - drop > 1 && s->window_bytes > s->history_max)
    {
      Chunk *c = &s->chunks[drop];
      Chunk *next = &s->chunks[drop + 1];
      uint64_t n = next->first_seq - c->first_seq;
      s->head += n;
      s->first_seq = next->first_seq;
      s->base_cum = s->frames[s->head].cum;
      s->window_bytes -= c->len;
      free (c->data);
      drop++;
    }
  if (drop > 0)
    {
      memmove (s->chunks, s->chunks + drop, (s->n_chunks - drop) * sizeof *s->chunks);
      s->n_chunks -= drop;
    }
  if (s->head > 0 && s->head >= s->n_frames / 2)
    {
      memmove (s->frames, s->frames + s->head, (s->n_frames - s->head) * sizeof *s->frames);
      s->n_frames -= s->head;
      s->head = 0;
    }
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
  int ess = is_essential (type);
  if (ess)
    {
      if (grow ((void **) &s->ess_store, &s->ess_cap, s->ess_len + size, 1) < 0
          || grow ((void **) &s->ess, &s->ess_arr_cap, s->n_ess + 1, sizeof *s->ess) < 0)
        return -1;
      memcpy (s->ess_store + s->ess_len, data, size);
      s->ess[s->n_ess++] = (EssFrame) { .seq = s->next_seq, .cum = s->cum_end,
                                        .store_off = s->ess_len, .size = size };
      s->ess_len += size;
    }
  uint8_t *dst = c->data + c->len;
  memcpy (dst, data, size);
  c->len += size;
  s->window_bytes += size;
  Frame *f = &s->frames[s->n_frames++];
  f->off = s->end_off;
  f->cum = s->cum_end;
  f->events = ess ? 0 : frame_events (s, dst, size, type);
  f->data = dst;
  f->size = size;
  f->type = type;
  f->essential = (uint8_t) ess;
  s->next_seq++;
  s->cum_end += f->events;
  s->end_off += size;
  evict (s);
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
static int
append_locked (PpLiveServer *s, const uint8_t *p, size_t n)
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

static void
wake (PpLiveServer *s)
{
  if (!atomic_exchange (&s->wake_pending, 1))
    {
      char c = 1;
      ssize_t r = write (s->wake_w, &c, 1);
      (void) r;
    }
}

int
pp_live_server_write (void *server, const void *data, size_t size)
{
  PpLiveServer *s = server;
  if (s == NULL)
    return -1;
  pthread_mutex_lock (&s->lock);
  int r = -1;
  if (!s->broken)
    {
      r = append_locked (s, data, size);
      if (r < 0)
        s->broken = 1;
    }
  pthread_mutex_unlock (&s->lock);
  if (r == 0)
    wake (s);
  return r == 0 ? 0 : -1;
}

/* -- staging -- */

static int
stage (Viewer *v, const void *data, size_t n)
{
  if (v->off > 0 && v->off == v->len)
    v->off = v->len = 0;
  if (v->len + n > v->cap && v->off > 0)
    {
      memmove (v->buf, v->buf + v->off, v->len - v->off);
      v->len -= v->off;
      v->off = 0;
    }
  if (grow ((void **) &v->buf, &v->cap, v->len + n, 1) < 0)
    return -1;
  memcpy (v->buf + v->len, data, n);
  v->len += n;
  return 0;
}

static void
put16 (PpLiveServer *s, uint8_t *p, uint16_t v) { v = s16 (s, v); memcpy (p, &v, 2); }
static void
put32 (PpLiveServer *s, uint8_t *p, uint32_t v) { v = s32 (s, v); memcpy (p, &v, 4); }
static void
put64 (PpLiveServer *s, uint8_t *p, uint64_t v) { v = s64 (s, v); memcpy (p, &v, 8); }

static int
stage_dropped (PpLiveServer *s, Viewer *v)
{
  uint8_t f[sizeof (PpTraceFrameDropped)] = { 0 };
  put32 (s, f, sizeof f);
  put16 (s, f + 4, PP_TRACE_FRAME_DROPPED);
  put32 (s, f + 8, (uint32_t) -1);
  put64 (s, f + 16, v->pend_drop);
  if (stage (v, f, sizeof f) < 0)
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

static size_t
pending (const Viewer *v)
{
  return v->len - v->off;
}

/* Copies whole frames from the history to the viewer's staging buffer, lock
 * held.  Returns -1 when out of memory (the viewer is then dropped). */
static int
viewer_fill (PpLiveServer *s, Viewer *v)
{
  if (!v->header_sent)
    {
      if (!s->hdr_done)
        return 0;
      if (stage (v, s->hdr, s->hdr_size) < 0)
        return -1;
      v->header_sent = 1;
    }
  for (;;)
    {
      if (v->seq < s->first_seq)
        {
          /* the history has lost what comes next: essential frames only */
          while (v->ess_idx < s->n_ess && s->ess[v->ess_idx].seq < v->seq)
            v->ess_idx++;
          if (v->ess_idx < s->n_ess && s->ess[v->ess_idx].seq < s->first_seq)
            {
              EssFrame *e = &s->ess[v->ess_idx];
              count_drop (s, v, e->cum - v->cum);
              if (stage (v, s->ess_store + e->store_off, e->size) < 0)
                return -1;
              v->cum = e->cum;
              v->seq = e->seq + 1;
              v->ess_idx++;
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
          if (pending (v) > 0 && pending (v) + f->size > STAGE_MAX)
            return 0;
          if (v->pend_drop > 0 && stage_dropped (s, v) < 0)
            return -1;
          if (stage (v, f->data, f->size) < 0)
            return -1;
          v->cum += f->events;
          v->seq++;
        }
      else
        {
          if (!lagging && pending (v) > 0 && pending (v) + f->size > STAGE_MAX)
            return 0;
          if (stage (v, f->data, f->size) < 0)
            return -1;
          v->seq++;
        }
    }
}

/* Sends what the viewer has, refilling from the history; never blocks.
 * Returns 1 if some bytes went out. */
static int
viewer_pump (PpLiveServer *s, Viewer *v)
{
  int progress = 0;
  pthread_mutex_lock (&s->lock);
  int r = viewer_fill (s, v);
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
          v->off = v->len = 0;
          pthread_mutex_lock (&s->lock);
          r = viewer_fill (s, v);
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

static int
viewer_caught_up (PpLiveServer *s, Viewer *v)
{
  pthread_mutex_lock (&s->lock);
  int r = pending (v) == 0 && v->pend_drop == 0
          && (!s->hdr_done || (v->header_sent && v->seq >= s->next_seq));
  pthread_mutex_unlock (&s->lock);
  return r;
}

/* -- the push's clock: the rank's side -- */

static void
put_le64 (uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t
get_le64 (const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

static uint32_t
get_le32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* A session is over: its best round (the least round trip: the one least
 * delayed on either way, whose midpoint is surest) becomes the offset. */
static void
clock_session_end (PpLiveServer *s, int64_t t)
{
  s->clk_in_session = 0;
  s->clk_waiting = 0;
  s->clk_next = t + CLOCK_EVERY_MS;
  if (s->clk_best_rtt != INT64_MAX)
    {
      s->clk_last_rtt = s->clk_best_rtt;
      s->clk_report = 1;
      atomic_store (&s->clk_offset, s->clk_best_off);
      atomic_store (&s->clk_rtt, s->clk_best_rtt);
      atomic_fetch_add (&s->clk_gen, 1);
    }
  else if (!s->clk_answered_ever)
    {
      s->clk_off = 1;
      fprintf (stderr, "pipescope: %s: the collector at %s does not answer clock pings (an older "
               "pipescope?); this rank's times stay on its host's clock\n", s->push_label, s->push_spec);
    }
}

/* A ping, staged and sent at once: its sequence number, this process's
 * time, the round trip of the last session that measured. */
static int
clock_ping (PpLiveServer *s, Viewer *v)
{
  uint8_t f[CLOCK_PING_SIZE] = { 0 };
  put32 (s, f, sizeof f);
  put16 (s, f + 4, PP_TRACE_FRAME_PUSH_CLOCK_PING);
  put32 (s, f + 8, ++s->clk_seq);
  put64 (s, f + 24, (uint64_t) s->clk_last_rtt);
  s->clk_sent = pp_probe_now_ns ();
  put64 (s, f + 16, (uint64_t) s->clk_sent);
  if (stage (v, f, sizeof f) < 0)
    return -1;
  s->clk_outstanding++;
  viewer_pump (s, v);
  return 0;
}

/* Sends the next ping when one is due and the push's staging is empty (so
 * that it leaves at once, not behind the stream), ends the session when
 * its rounds or its time are up.  Server thread. */
static void
clock_tick (PpLiveServer *s)
{
  Viewer *v = s->push_v;
  if (s->push_state != PUSH_LIVE || v == NULL || v->dead || v->connecting || s->clk_off)
    return;
  int64_t t = now_ms ();
  if (s->clk_waiting)
    {
      if (t < s->clk_deadline)
        return;
      s->clk_waiting = 0;   /* lost: the next round */
    }
  if (!s->clk_in_session && s->clk_report && v->header_sent && pending (v) == 0)
    {
      /* one more, not a round: it tells the collector the session's round
       * trip (its reply is not waited for) */
      s->clk_report = 0;
      clock_ping (s, v);
    }
  if (!s->clk_in_session)
    {
      if (t < s->clk_next)
        return;
      s->clk_in_session = 1;
      s->clk_rounds = 0;
      s->clk_best_rtt = INT64_MAX;
      s->clk_session_end = t + CLOCK_SESSION_MS;
    }
  if (s->clk_rounds >= CLOCK_ROUNDS || t >= s->clk_session_end)
    {
      clock_session_end (s, t);
      if (s->clk_report && v->header_sent && pending (v) == 0)
        {
          s->clk_report = 0;
          clock_ping (s, v);
        }
      return;
    }
  if (!v->header_sent || pending (v) > 0)
    return;   /* the next pass, once the socket has taken it */
  if (clock_ping (s, v) < 0)
    return;
  s->clk_waiting = 1;
  s->clk_rounds++;
  s->clk_deadline = t + CLOCK_REPLY_MS;
}

/* What the collector sent back on the push, read at t_recv: replies of
 * CLOCK_REPLY_SIZE bytes.  Anything else ends the measuring (never the
 * push). */
static void
clock_reply (PpLiveServer *s, const uint8_t *p, size_t n, int64_t t_recv)
{
  while (n > 0 && !s->clk_off)
    {
      size_t k = CLOCK_REPLY_SIZE - s->clk_in_len;
      if (k > n)
        k = n;
      memcpy (s->clk_in + s->clk_in_len, p, k);
      s->clk_in_len += k;
      p += k;
      n -= k;
      if (s->clk_in_len < CLOCK_REPLY_SIZE)
        return;
      s->clk_in_len = 0;
      if (memcmp (s->clk_in, clock_reply_magic, 8) != 0)
        {
          s->clk_off = 1;
          return;
        }
      if (s->clk_outstanding > 0)
        s->clk_outstanding--;
      uint32_t seq = get_le32 (s->clk_in + 8);
      int64_t sent = (int64_t) get_le64 (s->clk_in + 16);
      int64_t there = (int64_t) get_le64 (s->clk_in + 24);
      if (!s->clk_waiting || seq != s->clk_seq || sent != s->clk_sent || t_recv < sent)
        continue;   /* a reply that came after its round was given up */
      s->clk_waiting = 0;
      s->clk_answered_ever = 1;
      int64_t rtt = t_recv - sent;
      if (rtt < s->clk_best_rtt)
        {
          s->clk_best_rtt = rtt;
          /* the collector read its clock halfway through, as NTP assumes */
          s->clk_best_off = there - (sent + rtt / 2);
        }
    }
}

static int
token_ok (PpLiveServer *s, const char *line, size_t len)
{
  /* constant time in the expected line's length */
  unsigned diff = len != s->auth_line_len;
  for (size_t i = 0; i < s->auth_line_len; i++)
    diff |= (unsigned) (uint8_t) s->auth_line[i] ^ (unsigned) (uint8_t) (i < len ? line[i] : 0);
  return diff == 0;
}

/* "PIPESCOPE 1 <token> push": a rank pushing its stream to us. */
static int
push_line_ok (PpLiveServer *s, const char *line, size_t len)
{
  return len == s->auth_line_len + 5 && memcmp (line + s->auth_line_len, " push", 5) == 0
         && token_ok (s, line, s->auth_line_len);
}

static void
peer_name (const Viewer *v, char *buf, size_t size)
{
  char host[INET6_ADDRSTRLEN + 8], port[8];
  if (v->peer_len == 0
      || getnameinfo ((const struct sockaddr *) &v->peer, v->peer_len, host, sizeof host, port,
                      sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    snprintf (buf, size, "?");
  else if (strchr (host, ':'))
    snprintf (buf, size, "[%s]:%s", host, port);
  else
    snprintf (buf, size, "%s:%s", host, port);
}

/* Reads what a viewer sends: the token line for TCP, then nothing (read and
 * thrown away; EOF means it left).  On our push: the collector's clock
 * replies. */
static void
viewer_read (PpLiveServer *s, Viewer *v)
{
  for (;;)
    {
      char buf[512];
      ssize_t n = recv (v->fd, buf, sizeof buf, MSG_DONTWAIT);
      int64_t t_recv = v->outbound ? pp_probe_now_ns () : 0;   /* a clock reply's arrival */
      if (n == 0)
        {
          v->dead = 1;
          return;
        }
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK)
            {
              v->err_no = errno;
              v->dead = 1;
            }
          return;
        }
      if (v->outbound)
        {
          clock_reply (s, (const uint8_t *) buf, (size_t) n, t_recv);
          continue;
        }
      if (v->authed)
        continue;
      for (ssize_t i = 0; i < n; i++)
        {
          if (buf[i] == '\n')
            {
              if (token_ok (s, v->line, v->line_len))
                {
                  v->authed = 1;
                  atomic_fetch_add (&s->n_viewers, 1);
                }
              else if (s->on_push != NULL && push_line_ok (s, v->line, v->line_len))
                {
                  /* a rank's stream follows the line: the collector takes
                   * the connection and what came with the line */
                  char peer[96];
                  peer_name (v, peer, sizeof peer);
                  if (s->on_push (s->push_user, v->fd, buf + i + 1, (size_t) (n - i - 1), peer) == 0)
                    v->fd = -1;
                  else
                    atomic_fetch_add (&s->refused, 1);
                  v->dead = 1;
                }
              else
                {
                  atomic_fetch_add (&s->refused, 1);
                  v->dead = 1;
                }
              return;   /* anything after the line is ignored */
            }
          if (v->line_len >= sizeof v->line)
            {
              atomic_fetch_add (&s->refused, 1);
              v->dead = 1;
              return;
            }
          v->line[v->line_len++] = buf[i];
        }
    }
}

static void
viewer_free (PpLiveServer *s, Viewer *v)
{
  if (v->authed && !v->outbound)
    atomic_fetch_sub (&s->n_viewers, 1);
  if (v->fd >= 0)
    close (v->fd);
  if (v == s->push_v)
    s->push_v = NULL;
  free (v->buf);
  free (v);
}

/* Our push is gone: another try if it never connected and tries are
 * left, else one line (none when we end it ourselves). */
static void
push_ended (PpLiveServer *s, Viewer *v)
{
  int stopping = atomic_load (&s->stop);
  if (v->connecting)
    {
      s->push_errno = v->err_no;
      if (++s->push_tries < PUSH_TRIES && !stopping)
        {
          s->push_state = PUSH_WANTED;
          s->push_next = now_ms () + PUSH_RETRY_MS;
          return;
        }
      fprintf (stderr, "pipescope: %s: cannot push to the collector at %s (%s); recording goes on "
               "here only\n", s->push_label, s->push_spec,
               stopping ? "the job ended first" : strerror (v->err_no ? v->err_no : ECONNREFUSED));
    }
  else if (!stopping)
    fprintf (stderr, "pipescope: %s: the collector at %s ended the push (%s); recording goes on "
             "here only\n", s->push_label, s->push_spec,
             v->err_no ? strerror (v->err_no) : "it closed the connection");
  s->push_state = PUSH_OVER;
}

static void
reap (PpLiveServer *s)
{
  size_t j = 0;
  for (size_t i = 0; i < s->n_viewers_arr; i++)
    {
      Viewer *v = s->viewers[i];
      if (v->dead && v == s->push_v)
        push_ended (s, v);
      if (v->dead)
        viewer_free (s, v);
      else
        s->viewers[j++] = v;
    }
  s->n_viewers_arr = j;
}

/* The same address (not port): the unit a flooder cannot multiply locally. */
static int
same_peer (const Viewer *a, const Viewer *b)
{
  if (a->peer.ss_family != b->peer.ss_family)
    return 0;
  if (a->peer.ss_family == AF_INET)
    return memcmp (&((const struct sockaddr_in *) &a->peer)->sin_addr,
                   &((const struct sockaddr_in *) &b->peer)->sin_addr, sizeof (struct in_addr)) == 0;
  if (a->peer.ss_family == AF_INET6)
    return memcmp (&((const struct sockaddr_in6 *) &a->peer)->sin6_addr,
                   &((const struct sockaddr_in6 *) &b->peer)->sin6_addr, sizeof (struct in6_addr)) == 0;
  return 1;
}

/* Drops the oldest pending TCP viewer (of like's address when like is not
 * NULL) if there are at least bound of them; a last read first, so that
 * one whose line has arrived is authenticated instead.  1 if one went. */
static int
drop_oldest_pending (PpLiveServer *s, const Viewer *like, size_t bound)
{
  for (;;)
    {
      Viewer *oldest = NULL;
      size_t n = 0;
      for (size_t i = 0; i < s->n_viewers_arr; i++)
        {
          Viewer *v = s->viewers[i];
          if (v == like || v->authed || v->dead || !v->is_tcp || v->outbound
              || (like != NULL && !same_peer (v, like)))
            continue;
          n++;
          if (oldest == NULL || v->accept_seq < oldest->accept_seq)
            oldest = v;
        }
      if (n < bound || oldest == NULL)
        return 0;
      viewer_read (s, oldest);
      if (oldest->authed)
        continue;   /* its line was there: it stays, look again */
      oldest->dead = 1;   /* reaped by the caller's loop */
      atomic_fetch_add (&s->refused, 1);
      return 1;
    }
}

static void
accept_all (PpLiveServer *s, int lfd, int is_tcp)
{
  for (;;)
    {
      struct sockaddr_storage peer;
      socklen_t peer_len = sizeof peer;
      int fd = accept (lfd, (struct sockaddr *) &peer, &peer_len);
      if (fd < 0)
        {
          if (errno == EINTR)
            continue;
          if ((errno == EMFILE || errno == ENFILE) && drop_oldest_pending (s, NULL, 1))
            {
              reap (s);   /* closes it: one descriptor back */
              continue;
            }
          if (errno == EMFILE || errno == ENFILE)
            s->accept_pause_until = now_ms () + 50;   /* the listener would poll ready at once */
          return;   /* EAGAIN, or out of descriptors: try again later */
        }
      if (set_nonblock_cloexec (fd) < 0)
        {
          close (fd);
          continue;
        }
      no_sigpipe (fd);
      if (is_tcp)
        {
          int one = 1;
          setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
      Viewer *v = calloc (1, sizeof *v);
      if (v == NULL
          || grow ((void **) &s->viewers, &s->viewers_cap, s->n_viewers_arr + 1,
                   sizeof *s->viewers) < 0)
        {
          free (v);
          close (fd);
          continue;
        }
      v->fd = fd;
      v->is_tcp = is_tcp;
      v->authed = !is_tcp;
      v->auth_deadline = now_ms () + AUTH_TIMEOUT_MS;
      v->accept_seq = ++s->accept_seq;
      if (peer_len <= sizeof v->peer)
        {
          memcpy (&v->peer, &peer, peer_len);
          v->peer_len = peer_len;
        }
      if (v->authed)
        atomic_fetch_add (&s->n_viewers, 1);
      s->viewers[s->n_viewers_arr++] = v;
      if (is_tcp)
        {
          /* a real viewer's line is usually here already */
          viewer_read (s, v);
          if (!v->authed && !v->dead)
            {
              drop_oldest_pending (s, v, PENDING_PER_PEER_MAX + 1);
              drop_oldest_pending (s, NULL, PENDING_MAX + 1);
            }
          reap (s);
        }
    }
}

/* Empties the pipe first, then lets writers wake us again: the other order
 * loses a wake-up when a writer sets the flag and writes its byte between
 * the two, and the byte is read here; the flag then stays set over an empty
 * pipe and no later write wakes the thread (the viewers got nothing more
 * until the job ended).  Whatever a writer appended before this point is
 * sent by the pumps that follow. */
static void
drain_wake (PpLiveServer *s)
{
  char buf[64];
  while (read (s->wake_r, buf, sizeof buf) > 0)
    ;
  atomic_store (&s->wake_pending, 0);
}

/* At the end: give viewers what is left, for a bounded time. */
static void
final_drain (PpLiveServer *s)
{
  int64_t start = now_ms (), last_progress = start;
  struct pollfd *pfds = NULL;
  size_t pcap = 0;
  for (;;)
    {
      int all_done = 1;
      for (size_t i = 0; i < s->n_viewers_arr; i++)
        {
          Viewer *v = s->viewers[i];
          if (!v->authed)
            {
              v->dead = 1;
              continue;
            }
          if (viewer_pump (s, v))
            last_progress = now_ms ();
          if (!v->dead && !viewer_caught_up (s, v))
            all_done = 0;
        }
      reap (s);
      int64_t t = now_ms ();
      if (all_done || t - start >= DRAIN_TOTAL_MS || t - last_progress >= DRAIN_IDLE_MS)
        break;
      if (grow ((void **) &pfds, &pcap, s->n_viewers_arr + 1, sizeof *pfds) < 0)
        break;
      for (size_t i = 0; i < s->n_viewers_arr; i++)
        pfds[i] = (struct pollfd) { .fd = s->viewers[i]->fd,
                                    .events = pending (s->viewers[i]) ? POLLOUT : 0 };
      poll (pfds, s->n_viewers_arr, 20);
    }
  free (pfds);
  /* A clock reply still on its way would reach a closed socket, whose
   * reset can cost the collector the end of the stream it has not read
   * yet: our side of the push is shut, and the replies waited for, a
   * moment at most. */
  Viewer *v = s->push_v;
  if (v != NULL && !v->dead && !v->connecting && !s->clk_off && s->clk_outstanding > 0
      && shutdown (v->fd, SHUT_WR) == 0)
    {
      int64_t end = now_ms () + CLOCK_CLOSE_WAIT_MS;
      while (s->clk_outstanding > 0 && !v->dead && !s->clk_off)
        {
          int64_t left = end - now_ms ();
          struct pollfd p = { .fd = v->fd, .events = POLLIN };
          if (left <= 0 || poll (&p, 1, (int) left) <= 0)
            break;
          viewer_read (s, v);
        }
    }
}

static int split_host_port (const char *spec, char *host, size_t hsize, char *port, size_t psize);

/* Starts a connect to the collector, on the server thread: never on a
 * thread of the job's.  The name lookup is the one step that may wait
 * (profile hands the ranks a numeric address). */
static void
push_start (PpLiveServer *s)
{
  char host[256], port[16];
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
  struct addrinfo *res = NULL;
  Viewer *v = NULL;
  int fd = -1, e = 0;

  s->push_state = PUSH_CONNECTING;
  if (split_host_port (s->push_spec, host, sizeof host, port, sizeof port) < 0 || host[0] == '\0')
    e = EINVAL;
  else if (getaddrinfo (host, port, &hints, &res) != 0 || res == NULL)
    e = EHOSTUNREACH;
  else if ((fd = socket (res->ai_family, SOCK_STREAM, 0)) < 0 || set_nonblock_cloexec (fd) < 0)
    e = errno;
  else if (connect (fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS && errno != EINTR)
    e = errno;
  if (res)
    freeaddrinfo (res);
  if (e == 0 && ((v = calloc (1, sizeof *v)) == NULL
                 || grow ((void **) &s->viewers, &s->viewers_cap, s->n_viewers_arr + 1,
                          sizeof *s->viewers) < 0))
    e = ENOMEM;
  if (e != 0)
    {
      if (fd >= 0)
        close (fd);
      free (v);
      /* as a connect that failed: a try counted, one line at the last */
      Viewer tmp = { .fd = -1, .outbound = 1, .connecting = 1, .err_no = e };
      s->push_v = &tmp;
      push_ended (s, &tmp);
      s->push_v = NULL;
      return;
    }
  no_sigpipe (fd);
  v->fd = fd;
  v->is_tcp = 1;
  v->outbound = 1;
  v->connecting = 1;
  v->auth_deadline = now_ms () + PUSH_CONNECT_MS;   /* the connect's */
  v->accept_seq = ++s->accept_seq;
  s->viewers[s->n_viewers_arr++] = v;
  s->push_v = v;
}

/* The connect finished (or failed): on success the line goes first, the
 * stream from its header after it, as to any viewer. */
static void
push_connected (PpLiveServer *s, Viewer *v)
{
  int e = 0;
  socklen_t len = sizeof e;
  if (getsockopt (v->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
    e = errno;
  if (e != 0)
    {
      v->err_no = e;
      v->dead = 1;
      return;
    }
  int one = 1;
  setsockopt (v->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (stage (v, s->push_line, s->push_line_len) < 0)
    {
      v->err_no = ENOMEM;
      v->dead = 1;
      return;
    }
  v->connecting = 0;
  v->authed = 1;
  s->push_state = PUSH_LIVE;
}

static void *
server_thread (void *data)
{
  PpLiveServer *s = data;
  struct pollfd *pfds = NULL;
  size_t pcap = 0;

  /* never take signals meant for the job's threads */
  sigset_t all;
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, NULL);
  /* named, so that a job's own tools (top -H, bench-torch) can tell it */
  pthread_setname_np (pthread_self (), "pp-live");

  while (!atomic_load (&s->stop))
    {
      if (s->push_state == PUSH_WANTED && now_ms () >= s->push_next)
        push_start (s);
      clock_tick (s);
      size_t nv = s->n_viewers_arr;
      if (grow ((void **) &pfds, &pcap, nv + 3, sizeof *pfds) < 0)
        {
          poll (NULL, 0, 10);
          continue;
        }
      size_t np = 0;
      pfds[np++] = (struct pollfd) { .fd = s->wake_r, .events = POLLIN };
      pfds[np++] = (struct pollfd) { .fd = s->unix_fd, .events = POLLIN };
      int64_t t = now_ms ();
      int paused = t < s->accept_pause_until;
      pfds[np++] = (struct pollfd) { .fd = paused ? -1 : s->tcp_fd, .events = POLLIN };  /* -1 is ignored */
      int timeout = paused ? (int) (s->accept_pause_until - t) : -1;
      if (s->push_state == PUSH_WANTED)
        {
          int l = s->push_next > t ? (int) (s->push_next - t) : 0;
          if (timeout < 0 || l < timeout)
            timeout = l;
        }
      if (s->push_state == PUSH_LIVE && !s->clk_off)
        {
          /* the clock's next step: a reply's deadline, the session's end,
           * the next session (a ping waiting for an empty staging is woken
           * by the socket's POLLOUT) */
          int64_t when = s->clk_waiting ? s->clk_deadline
                         : s->clk_in_session ? s->clk_session_end : s->clk_next;
          int l = when > t ? (int) (when - t) : 0;
          if (timeout < 0 || l < timeout)
            timeout = l;
        }
      for (size_t i = 0; i < nv; i++)
        {
          Viewer *v = s->viewers[i];
          short ev = v->connecting ? POLLOUT : POLLIN;
          if (v->authed && pending (v) > 0)
            ev |= POLLOUT;
          if (!v->authed)
            {
              int64_t left = v->auth_deadline - t;
              int l = left < 0 ? 0 : (int) left;
              if (timeout < 0 || l < timeout)
                timeout = l;
            }
          pfds[np++] = (struct pollfd) { .fd = v->fd, .events = ev };
        }
      int r = poll (pfds, np, timeout);
      if (r < 0 && errno != EINTR)
        poll (NULL, 0, 10);
      if (atomic_load (&s->stop))
        break;
      if (r > 0 && (pfds[0].revents & POLLIN))
        drain_wake (s);
      t = now_ms ();
      for (size_t i = 0; i < nv; i++)
        {
          Viewer *v = s->viewers[i];
          short re = r > 0 ? pfds[3 + i].revents : 0;
          if (v->connecting)
            {
              if (re & (POLLOUT | POLLHUP | POLLERR))
                push_connected (s, v);
            }
          else
            {
              if (re & (POLLIN | POLLHUP | POLLERR))
                viewer_read (s, v);
              if (re & POLLERR)
                v->dead = 1;
            }
          if (!v->authed && !v->dead && t >= v->auth_deadline)
            {
              v->dead = 1;
              if (v->outbound)
                v->err_no = ETIMEDOUT;
              else
                atomic_fetch_add (&s->refused, 1);   /* no line in its second */
            }
          if (v->authed && !v->dead)
            viewer_pump (s, v);
        }
      reap (s);
      size_t before = s->n_viewers_arr;
      if (r > 0 && (pfds[1].revents & POLLIN))
        accept_all (s, s->unix_fd, 0);
      if (r > 0 && s->tcp_fd >= 0 && (pfds[2].revents & POLLIN))
        accept_all (s, s->tcp_fd, 1);
      /* new viewers start at once */
      for (size_t i = before; i < s->n_viewers_arr; i++)
        {
          Viewer *v = s->viewers[i];
          if (v->authed)
            viewer_pump (s, v);
        }
      reap (s);
    }
  free (pfds);
  if (s->push_state == PUSH_WANTED && s->push_tries > 0)
    fprintf (stderr, "pipescope: %s: cannot push to the collector at %s (%s, and the job ended before "
             "another try); recording went on here only\n", s->push_label, s->push_spec,
             strerror (s->push_errno ? s->push_errno : ECONNREFUSED));
  final_drain (s);
  for (size_t i = 0; i < s->n_viewers_arr; i++)
    viewer_free (s, s->viewers[i]);
  s->n_viewers_arr = 0;
  return NULL;
}

static PpStatus
make_token (char *out, PpError *err)
{
  uint8_t b[TOKEN_HEX / 2];
  int fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "live: cannot open /dev/urandom for a token: %s",
                         strerror (errno));
  size_t got = 0;
  while (got < sizeof b)
    {
      ssize_t n = read (fd, b + got, sizeof b - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          close (fd);
          return pp_error_set (err, PP_EIO, "live: cannot read /dev/urandom for a token");
        }
      got += (size_t) n;
    }
  close (fd);
  for (size_t i = 0; i < sizeof b; i++)
    snprintf (out + 2 * i, 3, "%02x", b[i]);
  return PP_OK;
}

/* Splits "HOST:PORT" (HOST may be "[v6]" or empty). */
static int
split_host_port (const char *spec, char *host, size_t hsize, char *port, size_t psize)
{
  const char *colon = strrchr (spec, ':');
  if (colon == NULL || colon[1] == '\0' || strlen (colon + 1) >= psize)
    return -1;
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9')
      return -1;
  size_t hl = (size_t) (colon - spec);
  const char *h = spec;
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
    {
      h++;
      hl -= 2;
    }
  if (hl >= hsize)
    return -1;
  memcpy (host, h, hl);
  host[hl] = '\0';
  strcpy (port, colon + 1);
  return 0;
}

static PpStatus
listen_tcp (PpLiveServer *s, const char *spec, PpError *err)
{
  char host[256], port[16];
  if (split_host_port (spec, host, sizeof host, port, sizeof port) < 0)
    return pp_error_set (err, PP_EINVAL, "live: bad listen address '%s' (want HOST:PORT)", spec);
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_PASSIVE };
  struct addrinfo *res = NULL;
  int gai = getaddrinfo (host[0] ? host : NULL, port, &hints, &res);
  if (gai != 0)
    return pp_error_set (err, PP_EINVAL, "live: cannot resolve listen address '%s': %s", spec,
                         gai_strerror (gai));
  int saved = 0;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
    {
      int fd = socket (ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0)
        {
          saved = errno;
          continue;
        }
      int one = 1;
      setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      /* a deep queue: connections are accepted at once and sorted out by
       * the pending bounds above; a shallow one lets a flood's SYNs crowd
       * the real viewer out before the server even sees it */
      if (bind (fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen (fd, 128) < 0
          || set_nonblock_cloexec (fd) < 0)
        {
          saved = errno;
          close (fd);
          continue;
        }
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      if (getsockname (fd, (struct sockaddr *) &ss, &sl) == 0)
        {
          if (ss.ss_family == AF_INET)
            s->tcp_port = ntohs (((struct sockaddr_in *) &ss)->sin_port);
          else if (ss.ss_family == AF_INET6)
            s->tcp_port = ntohs (((struct sockaddr_in6 *) &ss)->sin6_port);
        }
      s->tcp_fd = fd;
      break;
    }
  freeaddrinfo (res);
  if (s->tcp_fd < 0)
    return pp_error_set (err, PP_EIO, "live: cannot listen on %s: %s", spec,
                         strerror (saved ? saved : EADDRNOTAVAIL));
  return PP_OK;
}

static PpStatus
listen_unix (PpLiveServer *s, PpError *err)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  if (strlen (s->sock_path) >= sizeof sa.sun_path)
    return pp_error_set (err, PP_EINVAL, "live: socket path too long: %s", s->sock_path);
  strcpy (sa.sun_path, s->sock_path);
  int fd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "live: socket: %s", strerror (errno));
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    {
      if (errno != EADDRINUSE)
        goto bind_failed;
      /* a stale socket of a dead process with our pid, unless someone answers */
      int probe = socket (AF_UNIX, SOCK_STREAM, 0);
      int alive = probe >= 0 && connect (probe, (struct sockaddr *) &sa, sizeof sa) == 0;
      if (probe >= 0)
        close (probe);
      if (alive)
        {
          close (fd);
          return pp_error_set (err, PP_EIO, "live: %s is already served (another live server in this process?)",
                               s->sock_path);
        }
      unlink (s->sock_path);
      if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
        goto bind_failed;
    }
  /* the directory is 0700 already; the socket itself is 0600 too */
  if (chmod (s->sock_path, 0600) < 0 || listen (fd, 64) < 0 || set_nonblock_cloexec (fd) < 0)
    {
      int e = errno;
      close (fd);
      unlink (s->sock_path);
      return pp_error_set (err, PP_EIO, "live: cannot serve %s: %s", s->sock_path, strerror (e));
    }
  s->unix_fd = fd;
  return PP_OK;

bind_failed:
  {
    int e = errno;
    close (fd);
    return pp_error_set (err, PP_EIO, "live: cannot bind %s: %s", s->sock_path, strerror (e));
  }
}

PpLiveServer *
pp_live_server_new (const PpLiveConfig *cfg, PpError *err)
{
  PpLiveConfig dflt = { 0 };
  if (cfg == NULL)
    cfg = &dflt;
  PpLiveServer *s = calloc (1, sizeof *s);
  if (s == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "live: out of memory");
      return NULL;
    }
  pthread_mutex_init (&s->lock, NULL);
  s->unix_fd = s->tcp_fd = s->wake_r = s->wake_w = -1;
  s->pid = (int32_t) getpid ();
  s->lag_bytes = cfg->viewer_lag_bytes ? cfg->viewer_lag_bytes : DEFAULT_LAG_BYTES;
  s->history_max = cfg->history_max_bytes ? cfg->history_max_bytes : (size_t) DEFAULT_HISTORY_MAX;
  s->chunk_size = s->history_max / 8;
  if (s->chunk_size < 64 * 1024)
    s->chunk_size = 64 * 1024;
  if (s->chunk_size > 4 * 1024 * 1024)
    s->chunk_size = 4 * 1024 * 1024;
  s->on_push = cfg->on_push;
  s->push_user = cfg->push_user;
  if (cfg->push != NULL && cfg->push[0])
    {
      char host[256], port[16];
      PpError why = { 0 };
      if (strlen (cfg->push) >= sizeof s->push_spec
          || split_host_port (cfg->push, host, sizeof host, port, sizeof port) < 0 || host[0] == '\0')
        {
          pp_error_set (err, PP_EINVAL, "live: the collector's address '%.100s' is not HOST:PORT",
                        cfg->push);
          goto fail;
        }
      if (pp_live_token_check (cfg->push_token, &why) != PP_OK)
        {
          pp_error_set (err, PP_EINVAL, "live: the collector's token: %s", why.msg);
          goto fail;
        }
      snprintf (s->push_spec, sizeof s->push_spec, "%s", cfg->push);
      s->push_line_len = (size_t) snprintf (s->push_line, sizeof s->push_line, "PIPESCOPE 1 %s push\n",
                                            cfg->push_token);
      snprintf (s->push_label, sizeof s->push_label, "%s",
                cfg->push_label ? cfg->push_label : cfg->name ? cfg->name : "rank");
      s->push_state = PUSH_WANTED;
    }

  int p[2];
  if (pipe (p) < 0)
    {
      pp_error_set (err, PP_EIO, "live: pipe: %s", strerror (errno));
      goto fail;
    }
  s->wake_r = p[0];
  s->wake_w = p[1];
  if (set_nonblock_cloexec (p[0]) < 0 || set_nonblock_cloexec (p[1]) < 0)
    {
      pp_error_set (err, PP_EIO, "live: pipe: %s", strerror (errno));
      goto fail;
    }

  PpJobInfo job;
  memset (&job, 0, sizeof job);
  if (cfg->no_register)
    {
      const char *tmp = getenv ("TMPDIR");
      if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
      snprintf (s->priv_dir, sizeof s->priv_dir, "%s/pipescope-live-XXXXXX", tmp);
      if (mkdtemp (s->priv_dir) == NULL)
        {
          pp_error_set (err, PP_EIO, "live: cannot create a private directory in %s: %s", tmp,
                        strerror (errno));
          s->priv_dir[0] = '\0';
          goto fail;
        }
      if ((size_t) snprintf (s->sock_path, sizeof s->sock_path, "%s/%d.sock", s->priv_dir,
                             (int) s->pid) >= sizeof s->sock_path)
        {
          pp_error_set (err, PP_EINVAL, "live: socket path too long under %s", s->priv_dir);
          goto fail;
        }
    }
  else
    {
      char *dir = s->reg_dir;
      if (pp_registry_dir_for_job (dir, sizeof s->reg_dir, s->notice, sizeof s->notice, err) != PP_OK)
        goto fail;
      if ((size_t) snprintf (s->sock_path, sizeof s->sock_path, "%s/%d.sock", dir, (int) s->pid)
          >= sizeof s->sock_path)
        {
          pp_error_set (err, PP_EINVAL, "live: socket path too long under %s", dir);
          goto fail;
        }
    }
  if (listen_unix (s, err) != PP_OK)
    {
      s->sock_path[0] = '\0';
      goto fail;
    }

  if (cfg->listen != NULL)
    {
      if (cfg->token != NULL)
        {
          if (cfg->token[0] == '\0' || strlen (cfg->token) > TOKEN_HEX
              || strpbrk (cfg->token, " \t\r\n") != NULL)
            {
              pp_error_set (err, PP_EINVAL, "live: the token must be 1 to %d characters without spaces",
                            TOKEN_HEX);
              goto fail;
            }
          strcpy (s->token, cfg->token);
        }
      else if (make_token (s->token, err) != PP_OK)
        goto fail;
      s->auth_line_len = (size_t) snprintf (s->auth_line, sizeof s->auth_line, "PIPESCOPE 1 %s",
                                            s->token);
      if (listen_tcp (s, cfg->listen, err) != PP_OK)
        goto fail;
    }

  if (!cfg->no_register)
    {
      if (pp_registry_self (&job, err) != PP_OK)
        goto fail;
      struct timespec ts;
      clock_gettime (CLOCK_REALTIME, &ts);
      job.start_unix_ns = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
      const char *sched = cfg->schedule ? cfg->schedule : "job";
      if (cfg->name != NULL)
        snprintf (job.name, sizeof job.name, "%s", cfg->name);
      else
        snprintf (job.name, sizeof job.name, "%s-%d", sched, (int) job.pid);
      snprintf (job.schedule, sizeof job.schedule, "%s", cfg->schedule ? cfg->schedule : "");
      snprintf (job.cmdline, sizeof job.cmdline, "%s", cfg->cmdline ? cfg->cmdline : "");
      snprintf (job.endpoint, sizeof job.endpoint, "unix:%s", s->sock_path);
      if (cfg->job != NULL && cfg->job[0])
        {
          snprintf (job.job, sizeof job.job, "%s", cfg->job);
          job.rank = cfg->rank;
          job.n_ranks = cfg->n_ranks;
        }
      if (s->tcp_fd >= 0)
        {
          char host[256], port[16];
          split_host_port (cfg->listen, host, sizeof host, port, sizeof port);
          if (strchr (host, ':'))
            snprintf (job.tcp, sizeof job.tcp, "[%.100s]:%d", host, s->tcp_port);
          else
            snprintf (job.tcp, sizeof job.tcp, "%.100s:%d", host[0] ? host : "0.0.0.0", s->tcp_port);
        }
      if (pp_registry_add_in (s->reg_dir, &job, err) != PP_OK)
        goto fail;
      s->registered = 1;
    }

  if (pthread_create (&s->thread, NULL, server_thread, s) != 0)
    {
      pp_error_set (err, PP_EIO, "live: cannot start the server thread");
      goto fail;
    }
  s->thread_started = 1;
  return s;

fail:
  pp_live_server_free (s);
  return NULL;
}

const char *
pp_live_server_socket_path (PpLiveServer *s)
{
  return s ? s->sock_path : NULL;
}

const char *
pp_live_server_token (PpLiveServer *s)
{
  return s && s->tcp_fd >= 0 ? s->token : NULL;
}

int
pp_live_server_tcp_port (PpLiveServer *s)
{
  return s && s->tcp_fd >= 0 ? s->tcp_port : 0;
}

const char *
pp_live_server_notice (PpLiveServer *s)
{
  return s && s->notice[0] ? s->notice : NULL;
}

unsigned
pp_live_server_n_viewers (PpLiveServer *s)
{
  return s ? atomic_load (&s->n_viewers) : 0;
}

uint64_t
pp_live_server_refused (PpLiveServer *s)
{
  return s ? atomic_load (&s->refused) : 0;
}

unsigned
pp_live_server_clock (PpLiveServer *s, int64_t *offset_ns, int64_t *rtt_ns)
{
  if (s == NULL)
    return 0;
  unsigned gen = atomic_load (&s->clk_gen);
  if (offset_ns)
    *offset_ns = atomic_load (&s->clk_offset);
  if (rtt_ns)
    *rtt_ns = atomic_load (&s->clk_rtt);
  return gen;
}

uint64_t
pp_live_server_dropped (PpLiveServer *s)
{
  if (s == NULL)
    return 0;
  pthread_mutex_lock (&s->lock);
  uint64_t d = s->dropped;
  pthread_mutex_unlock (&s->lock);
  return d;
}

void
pp_live_server_free (PpLiveServer *s)
{
  if (s == NULL)
    return;
  if (s->thread_started)
    {
      atomic_store (&s->stop, 1);
      char c = 1;
      ssize_t r = write (s->wake_w, &c, 1);
      (void) r;
      pthread_join (s->thread, NULL);
    }
  if (s->unix_fd >= 0)
    close (s->unix_fd);
  if (s->tcp_fd >= 0)
    close (s->tcp_fd);
  if (s->sock_path[0])
    unlink (s->sock_path);
  if (s->priv_dir[0])
    rmdir (s->priv_dir);
  if (s->registered)
    pp_registry_remove (s->pid, NULL);
  if (s->wake_r >= 0)
    close (s->wake_r);
  if (s->wake_w >= 0)
    close (s->wake_w);
  for (size_t i = 0; i < s->n_chunks; i++)
    free (s->chunks[i].data);
  free (s->chunks);
  free (s->frames);
  free (s->ess_store);
  free (s->ess);
  free (s->tail);
  free (s->viewers);
  pthread_mutex_destroy (&s->lock);
  free (s);
}

/* ---- client ---- */

struct _PpLiveClient {
  int            fd;
  int            is_tcp;
  int            eof;
  uint64_t       received;
  PpTraceReader *reader;
  char           job[256];
  /* a pushed stream (pp_live_client_new_fd): its clock pings are answered
   * as they arrive.  The scan follows the stream's frames by their sizes:
   * pos is where the bytes fed so far end, next where the next frame
   * starts (0 until the file header is in), part gathers a header */
  int            pings;
  int            scan_off;          /* lost the frames' thread: answer no more */
  int            swap;
  uint64_t       pos, next;
  uint8_t        part[CLOCK_PING_SIZE];
  size_t         part_len;
  uint64_t       answered;
  int64_t        rank_rtt;          /* the rank's last round trip, as its pings say */
  uint8_t        buf[64 * 1024];
};

static uint32_t
scan32 (const PpLiveClient *c, const uint8_t *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return c->swap ? __builtin_bswap32 (v) : v;
}

static uint64_t
scan64 (const PpLiveClient *c, const uint8_t *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return c->swap ? __builtin_bswap64 (v) : v;
}

/* A clock ping of the pushed stream: answered at once with the time its
 * bytes were read (t), on the same connection.  A reply the socket has no
 * room for is not sent: the rank counts that round lost. */
static void
answer_ping (PpLiveClient *c, const uint8_t *f, int64_t t)
{
  uint8_t r[CLOCK_REPLY_SIZE] = { 0 };
  uint32_t seq = scan32 (c, f + 8);
  memcpy (r, clock_reply_magic, 8);
  for (int i = 0; i < 4; i++)
    r[8 + i] = (uint8_t) (seq >> (8 * i));
  put_le64 (r + 16, scan64 (c, f + 16));
  put_le64 (r + 24, (uint64_t) t);
  c->rank_rtt = (int64_t) scan64 (c, f + 24);
  if (send (c->fd, r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t) sizeof r)
    c->answered++;
}

/* Follows the frames of n bytes just read (at t) and answers the pings
 * among them.  The reader checks the stream itself; where a size is
 * malformed (the reader refuses the stream then) the scan just stops. */
static void
scan_pings (PpLiveClient *c, const uint8_t *p, size_t n, int64_t t)
{
  while (n > 0 && !c->scan_off)
    {
      if (c->next == 0)
        {
          /* the file header: its byte order and size, bytes 8 and 16..19 */
          size_t k = 20 - c->part_len;
          if (k > n)
            k = n;
          memcpy (c->part + c->part_len, p, k);
          c->part_len += k;
          c->pos += k;
          p += k;
          n -= k;
          if (c->part_len < 20)
            return;
          int little = 1;
          {
            uint16_t one = 1;
            uint8_t b;
            memcpy (&b, &one, 1);
            little = b == 1;
          }
          if (c->part[8] == PP_TRACE_ORDER_LITTLE_CODE)
            c->swap = !little;
          else if (c->part[8] == PP_TRACE_ORDER_BIG_CODE)
            c->swap = little;
          else
            c->scan_off = 1;
          uint32_t hs = scan32 (c, c->part + 16);
          if (hs < 32 || hs % 8 != 0)
            c->scan_off = 1;
          c->next = hs;
          c->part_len = 0;
          continue;
        }
      if (c->pos < c->next)
        {
          uint64_t skip = c->next - c->pos;
          size_t k = skip < n ? (size_t) skip : n;
          c->pos += k;
          p += k;
          n -= k;
          continue;
        }
      /* at a frame: its header, and the whole of a ping */
      size_t want = 8;
      if (c->part_len >= 8)
        want = CLOCK_PING_SIZE;
      size_t k = want - c->part_len;
      if (k > n)
        k = n;
      memcpy (c->part + c->part_len, p, k);
      c->part_len += k;
      p += k;
      n -= k;
      if (c->part_len < want)
        {
          c->pos += k;
          return;
        }
      uint32_t size = scan32 (c, c->part);
      uint16_t type;
      memcpy (&type, c->part + 4, 2);
      if (c->swap)
        type = __builtin_bswap16 (type);
      if (size < 8 || size % 8 != 0 || size > PP_TRACE_FRAME_MAX)
        {
          c->scan_off = 1;
          return;
        }
      if (type == PP_TRACE_FRAME_PUSH_CLOCK_PING && size >= CLOCK_PING_SIZE && want == 8)
        {
          c->pos += k;
          continue;   /* gather the ping's body */
        }
      /* Only a ping nothing of the stream came after: one with more
       * behind it has waited in our buffer (a round trip the rank would
       * discard), and its rank may be gone since, its socket closed: a
       * reply would reset the connection, and the kernel would throw
       * away what of the stream we have not read yet. */
      if (type == PP_TRACE_FRAME_PUSH_CLOCK_PING && size >= CLOCK_PING_SIZE
          && n <= size - CLOCK_PING_SIZE)
        answer_ping (c, c->part, t);
      /* the frame starts where part began */
      c->pos += k;
      c->next = c->pos - c->part_len + size;
      c->part_len = 0;
    }
}

static int
connect_unix (const char *path, int *err_no)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof sa.sun_path)
    {
      *err_no = ENAMETOOLONG;
      return -1;
    }
  strcpy (sa.sun_path, path);
  int fd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0)
    {
      *err_no = errno;
      return -1;
    }
  while (connect (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    {
      if (errno == EINTR)
        continue;
      *err_no = errno;
      close (fd);
      return -1;
    }
  return fd;
}

static int
connect_tcp (const char *spec, int *err_no, int *gai_err)
{
  char host[256], port[16];
  if (split_host_port (spec, host, sizeof host, port, sizeof port) < 0 || host[0] == '\0')
    {
      *err_no = EINVAL;
      return -1;
    }
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
  struct addrinfo *res = NULL;
  int g = getaddrinfo (host, port, &hints, &res);
  if (g != 0)
    {
      *gai_err = g;
      return -1;
    }
  int fd = -1;
  *err_no = ECONNREFUSED;
  for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
    {
      fd = socket (ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0)
        {
          *err_no = errno;
          continue;
        }
      if (connect (fd, ai->ai_addr, ai->ai_addrlen) < 0)
        {
          *err_no = errno;
          close (fd);
          fd = -1;
        }
    }
  freeaddrinfo (res);
  if (fd >= 0)
    {
      int one = 1;
      setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  return fd;
}

PpLiveClient *
pp_live_client_connect (const char *job, const char *token, PpError *err)
{
  if (job == NULL || job[0] == '\0')
    {
      pp_error_set (err, PP_EINVAL, "attach: no job given");
      return NULL;
    }
  /* the endpoints as 'jobs' prints them */
  if (strncmp (job, "unix:", 5) == 0 && job[5] != '\0')
    job += 5;
  else if (strncmp (job, "tcp:", 4) == 0 && job[4] != '\0')
    job += 4;
  int fd = -1, e = 0, gai = 0, is_tcp = 0;
  if (strchr (job, ':') != NULL && strchr (job, '/') == NULL)
    {
      if (token == NULL || token[0] == '\0')
        {
          pp_error_set (err, PP_EINVAL, "attach %s: HOST:PORT needs --token", job);
          return NULL;
        }
      if (strlen (token) > TOKEN_HEX || strpbrk (token, " \t\r\n") != NULL)
        {
          pp_error_set (err, PP_EINVAL, "attach %s: malformed token", job);
          return NULL;
        }
      is_tcp = 1;
      fd = connect_tcp (job, &e, &gai);
      if (fd < 0)
        {
          if (gai != 0)
            pp_error_set (err, PP_EIO, "attach %s: %s", job, gai_strerror (gai));
          else if (e == EINVAL)
            pp_error_set (err, PP_EINVAL, "attach %s: want HOST:PORT", job);
          else
            pp_error_set (err, PP_EIO, "attach %s: %s", job, strerror (e));
          return NULL;
        }
      char line[AUTH_LINE_MAX];
      int n = snprintf (line, sizeof line, "PIPESCOPE 1 %s\n", token);
      size_t sent = 0;
      while (sent < (size_t) n)
        {
          ssize_t k = send (fd, line + sent, (size_t) n - sent, MSG_NOSIGNAL);
          if (k < 0 && errno == EINTR)
            continue;
          if (k <= 0)
            {
              e = errno;
              close (fd);
              pp_error_set (err, PP_EIO, "attach %s: %s", job, strerror (e));
              return NULL;
            }
          sent += (size_t) k;
        }
    }
  else
    {
      const char *path = job;
      PpJobInfo info;
      if (strchr (job, '/') == NULL)
        {
          if (pp_registry_find (job, &info, err) != PP_OK)
            return NULL;
          if (strncmp (info.endpoint, "unix:", 5) != 0)
            {
              pp_error_set (err, PP_EUNSUPPORTED, "attach %s: unknown endpoint '%s'", job,
                            info.endpoint);
              return NULL;
            }
          path = info.endpoint + 5;
        }
      fd = connect_unix (path, &e);
      if (fd < 0)
        {
          if (e == ENOENT || e == ECONNREFUSED)
            pp_error_set (err, PP_EIO, "attach %s: no job is serving %s (%s)", job, path,
                          e == ENOENT ? "no such socket" : "connection refused");
          else
            pp_error_set (err, PP_EIO, "attach %s: %s: %s", job, path, strerror (e));
          return NULL;
        }
    }
  no_sigpipe (fd);
  int fl = fcntl (fd, F_GETFD);
  if (fl >= 0)
    fcntl (fd, F_SETFD, fl | FD_CLOEXEC);

  PpLiveClient *c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      close (fd);
      pp_error_set (err, PP_ENOMEM, "attach %s: out of memory", job);
      return NULL;
    }
  c->fd = fd;
  c->is_tcp = is_tcp;
  snprintf (c->job, sizeof c->job, "%s", job);
  c->reader = pp_trace_reader_new_stream (err);
  if (c->reader == NULL)
    {
      close (fd);
      free (c);
      return NULL;
    }
  return c;
}

PpStatus
pp_live_client_next (PpLiveClient *c, PpTraceItem *item, int timeout_ms, PpError *err)
{
  if (c == NULL || item == NULL)
    return pp_error_set (err, PP_EINVAL, "attach: no client");
  int64_t deadline = timeout_ms >= 0 ? now_ms () + timeout_ms : 0;
  for (;;)
    {
      PpStatus st = pp_trace_reader_next (c->reader, item, err);
      if (st != PP_OK)
        return st;
      if (item->type != PP_TRACE_ITEM_END || !item->need_more)
        {
          if (item->type == PP_TRACE_ITEM_END && c->is_tcp && c->received == 0)
            return pp_error_set (err, PP_EIO, "attach %s: the job closed the connection "
                                 "(wrong token?)", c->job);
          return PP_OK;
        }
      if (c->eof)
        return PP_OK;   /* the reader should not ask for more after the end */
      int wait = -1;
      if (timeout_ms >= 0)
        {
          int64_t left = deadline - now_ms ();
          wait = left < 0 ? 0 : (int) left;
        }
      struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
      int r = poll (&pfd, 1, wait);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return pp_error_set (err, PP_EIO, "attach %s: poll: %s", c->job, strerror (errno));
        }
      if (r == 0)
        return PP_OK;   /* item is END with need_more = 1 */
      ssize_t n = recv (c->fd, c->buf, sizeof c->buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        continue;
      if (n < 0 && errno != ECONNRESET)
        return pp_error_set (err, PP_EIO, "attach %s: %s", c->job, strerror (errno));
      if (n <= 0)
        {
          c->eof = 1;
          pp_trace_reader_feed_end (c->reader);
          continue;
        }
      c->received += (uint64_t) n;
      if (c->pings)
        scan_pings (c, c->buf, (size_t) n, pp_probe_now_ns ());
      st = pp_trace_reader_feed (c->reader, c->buf, (size_t) n, err);
      if (st != PP_OK)
        return st;
    }
}

PpLiveClient *
pp_live_client_new_fd (int fd, const void *data, size_t n, const char *label, PpError *err)
{
  PpLiveClient *c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      close (fd);
      pp_error_set (err, PP_ENOMEM, "%s: out of memory", label ? label : "stream");
      return NULL;
    }
  c->fd = fd;
  c->pings = 1;
  snprintf (c->job, sizeof c->job, "%s", label ? label : "stream");
  no_sigpipe (fd);
  c->reader = pp_trace_reader_new_stream (err);
  if (c->reader != NULL && n > 0)
    scan_pings (c, data, n, pp_probe_now_ns ());
  if (c->reader == NULL
      || (n > 0 && pp_trace_reader_feed (c->reader, data, n, err) != PP_OK))
    {
      pp_live_client_free (c);
      return NULL;
    }
  c->received = n;
  return c;
}

uint64_t
pp_live_client_clock (const PpLiveClient *c, int64_t *rank_rtt_ns)
{
  if (rank_rtt_ns)
    *rank_rtt_ns = c ? c->rank_rtt : 0;
  return c ? c->answered : 0;
}

void
pp_live_client_free (PpLiveClient *c)
{
  if (c == NULL)
    return;
  close (c->fd);
  pp_trace_reader_free (c->reader);
  free (c);
}

/* ---- tokens kept out of command lines ---- */

PpStatus
pp_live_token_check (const char *token, PpError *err)
{
  size_t n = token ? strlen (token) : 0;
  if (n == 0 || n > TOKEN_HEX)
    return pp_error_set (err, PP_EINVAL, "the token must be 1 to %d characters", TOKEN_HEX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char) token[i] <= ' ' || token[i] == 0x7f)
      return pp_error_set (err, PP_EINVAL, "the token must be 1 to %d characters without spaces",
                           TOKEN_HEX);
  return PP_OK;
}

PpStatus
pp_live_token_from_file (const char *path, char *buf, size_t size, PpError *err)
{
  if (path == NULL || buf == NULL || size < TOKEN_HEX + 1)
    return pp_error_set (err, PP_EINVAL, "token file: no path or buffer");
  buf[0] = '\0';
  /* O_NONBLOCK: a FIFO put there opens at once and is refused below */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "cannot open token file %s: %s", path, strerror (errno));
  struct stat st;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s is not a regular file", path);
    }
  if (st.st_uid != geteuid ())
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s belongs to uid %u, not to you (uid %u); "
                           "refusing it", path, (unsigned) st.st_uid, (unsigned) geteuid ());
    }
  if ((st.st_mode & 077) != 0)
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s is open to other users (mode %03o); "
                           "chmod 600 it", path, (unsigned) (st.st_mode & 0777));
    }
  char text[256];
  size_t len = 0;
  while (len < sizeof text - 1)
    {
      ssize_t n = read (fd, text + len, sizeof text - 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t) n;
    }
  close (fd);
  text[len] = '\0';
  /* the first line, without its line ending or trailing blanks */
  len = strcspn (text, "\r\n");
  while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
    len--;
  text[len] = '\0';
  PpError why = { 0 };
  if (pp_live_token_check (text, &why) != PP_OK)
    return pp_error_set (err, PP_EINVAL, "token file %s: %s", path, why.msg);
  memcpy (buf, text, len + 1);
  return PP_OK;
}
