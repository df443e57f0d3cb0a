/* pp-live-private.h — what the live endpoint's files share; pp-live.h is
 * its API.  The endpoint is seven files, one idea each:
 *
 *   pp-live-history.c  the stream a server keeps in memory (its frames,
 *                      indexed; the oldest evicted past history_max) and
 *                      what of it each viewer is sent next
 *   pp-live-retained.c the essential frames kept past the history: the
 *                      newest of each rank (or string id), bounded
 *   pp-live-server.c   the sockets: listening, viewers, the server thread
 *   pp-live-push.c     a rank's push of its stream to a collector
 *   pp-live-clock.c    the push's clock: pings on the rank's side, their
 *                      answers on the collector's
 *   pp-live-client.c   the viewer side (pp_live_client_*)
 *   pp-live-token.c    TCP tokens: made, checked, compared, read from a file
 *
 * Nothing here is exported from libpipescope-probe.so. */
#pragma once

#include "pp-live.h"
#include "pp-trace-format.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

#define AUTH_LINE_MAX         256
#define TOKEN_HEX             32
#define CLOCK_PING_SIZE       32
#define CLOCK_REPLY_SIZE      32

/* ---- small helpers ---- */

static inline int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int
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

static inline void
no_sigpipe (int fd)
{
#ifdef SO_NOSIGPIPE
  int one = 1;
  setsockopt (fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#else
  (void) fd;
#endif
}

static inline int
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

/* Splits "HOST:PORT" (HOST may be "[v6]" or empty). */
static inline int
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

/* ---- the server ---- */

typedef struct {
  uint64_t off;        /* logical byte offset in the stream */
  uint64_t cum;        /* events in non-essential frames before this one */
  uint64_t events;     /* events this frame holds (0 for essential frames) */
  uint8_t *data;       /* in a chunk */
  uint32_t size;
  uint16_t type;
  uint8_t  essential;
  uint8_t  superseded; /* a newer frame of its rank (or id) came: not sent to a viewer that lags */
} Frame;

/* One frame of the retained set (pp-live-retained.c), or what is left of
 * one: data NULL and gone 0 once a newer frame of its key replaced it,
 * data NULL and gone > 0 where gone frames were dropped past the bound. */
typedef struct {
  uint64_t key;        /* the frame's type << 32 | its rank or string id */
  uint64_t seq;        /* its sequence number in the stream */
  uint64_t cum;        /* events in non-essential frames before it */
  uint64_t last_ref;   /* STRING: the last SPANS frame that names it (its own seq at first) */
  uint64_t gone;
  uint8_t *data;
  uint32_t size;
} Kept;

typedef struct {
  Kept     *e;           /* in stream order */
  size_t    n, cap;
  uint32_t *hash;        /* key -> index in e + 1, the newest entry of each key; 0: empty */
  size_t    hash_cap, hash_used;
  size_t    n_live;
  size_t    n_compacted;  /* n after the last compaction */
  uint64_t  bytes;       /* the live frames' bytes */
  size_t    n_strings;   /* of the live, STRING frames, and their bytes */
  uint64_t  string_bytes;
  uint64_t  max;         /* bound on bytes and the entries' bookkeeping */
  int       bounding;    /* between pp_live_kept_bound_begin and _end */
  uint64_t  superseded, dropped;
  int       have_desc;   /* the first DESCRIPTION came (it is kept apart: key 0) */
} KeptSet;

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
  uint64_t pend_drop;  /* events skipped, not yet reported */
  int      skipping;
  uint8_t *buf;        /* staging: whole frames */
  size_t   off, len, cap;
  size_t   mark;       /* a frame boundary in buf, at or after off: the frames from
                        * it are unsent (not kept for the push: its line and pings
                        * are not frames) */
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
  PpJobInfo entry;                /* what it says, for pp_live_server_rename */
  char  notice[PP_ERROR_MSG_MAX]; /* why the usual registry was not used, or "" */
  int32_t pid;
  char  token[TOKEN_HEX + 1];
  char  auth_line[AUTH_LINE_MAX];
  size_t auth_line_len;
  int   tcp_port;

  size_t lag_bytes;
  int    end_grace_ms;               /* PpLiveConfig.end_grace_ms, or 1 s */
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

  KeptSet  kept;             /* the newest essential frames, for viewers past first_seq */

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

static inline void
put16 (PpLiveServer *s, uint8_t *p, uint16_t v) { v = s16 (s, v); memcpy (p, &v, 2); }
static inline void
put32 (PpLiveServer *s, uint8_t *p, uint32_t v) { v = s32 (s, v); memcpy (p, &v, 4); }
static inline void
put64 (PpLiveServer *s, uint8_t *p, uint64_t v) { v = s64 (s, v); memcpy (p, &v, 8); }

static inline size_t
pending (const Viewer *v)
{
  return v->len - v->off;
}

/* Appends n bytes to what the viewer has to send: 0, or -1 out of memory.
 * Inline: every side of the endpoint stages, none calls another for it. */
static inline int
pp_live_stage (Viewer *v, const void *data, size_t n)
{
  if (v->off > 0 && v->off == v->len)
    v->off = v->len = v->mark = 0;
  if (v->len + n > v->cap && v->off > 0)
    {
      memmove (v->buf, v->buf + v->off, v->len - v->off);
      v->len -= v->off;
      if (v->mark != SIZE_MAX)
        v->mark -= v->off;
      v->off = 0;
    }
  if (grow ((void **) &v->buf, &v->cap, v->len + n, 1) < 0)
    return -1;
  memcpy (v->buf + v->len, data, n);
  v->len += n;
  return 0;
}

/* pp-live-history.c, lock held: appends bytes of frames (possibly partial)
 * to the history (0; -1 malformed; -2 out of memory); copies whole frames
 * from it to a viewer's staging buffer (-1 when out of memory). */
int      pp_live_history_append (PpLiveServer *s, const uint8_t *p, size_t n);
int      pp_live_viewer_fill (PpLiveServer *s, Viewer *v);
/* At the job's end, a viewer the final drain could not bring up to date:
 * what it lacks is counted in DROPPED frames by rank, the small frames
 * staged (-1 when out of memory). */
int      pp_live_viewer_cut (PpLiveServer *s, Viewer *v);
int      pp_live_history_evict_oldest (PpLiveServer *s);
void     pp_live_history_free (PpLiveServer *s);

/* pp-live-retained.c, lock held: the essential frames kept for viewers
 * that reach the evicted part of the history (pp_live_kept_add: 0, or -1
 * out of memory; *replaced is the seq of the frame it replaced, or
 * UINT64_MAX), the names spans use, the bound, and the walk. */
int      pp_live_kept_is_essential (uint16_t type);
int      pp_live_kept_add (PpLiveServer *s, uint16_t type, const uint8_t *f, uint32_t size,
                           uint64_t seq, uint64_t cum, uint64_t *replaced);
void     pp_live_kept_refs (PpLiveServer *s, const uint8_t *f, uint32_t size, uint64_t seq);
/* Over its bound, the retained set drops what it can alone (names no
 * event uses); returns the history sequence number below which the oldest
 * events must go for the names they use to go too (UINT64_MAX: none).
 * The history evicts them, then calls pp_live_kept_bound_end. */
uint64_t pp_live_kept_bound_begin (PpLiveServer *s);
void     pp_live_kept_bound_end (PpLiveServer *s);
uint64_t pp_live_kept_cost (const PpLiveServer *s);
const Kept *pp_live_kept_next (PpLiveServer *s, uint64_t from_seq, uint64_t below_seq);
void     pp_live_kept_free (PpLiveServer *s);

/* pp-live-server.c: a viewer's staging buffer and its socket */
int      pp_live_viewer_pump (PpLiveServer *s, Viewer *v);
void     pp_live_viewer_read (PpLiveServer *s, Viewer *v);

/* pp-live-push.c, on the server thread (init: in pp_live_server_new) */
PpStatus pp_live_push_init (PpLiveServer *s, const PpLiveConfig *cfg, PpError *err);
void     pp_live_push_start (PpLiveServer *s);
void     pp_live_push_connected (PpLiveServer *s, Viewer *v);
void     pp_live_push_ended (PpLiveServer *s, Viewer *v);
int      pp_live_push_timeout (PpLiveServer *s, int64_t t, int timeout);
void     pp_live_push_at_end (PpLiveServer *s);

/* pp-live-clock.c: the rank's side, on the server thread */
void     pp_live_clock_tick (PpLiveServer *s);
void     pp_live_clock_reply (PpLiveServer *s, const uint8_t *p, size_t n, int64_t t_recv);
int      pp_live_clock_timeout (PpLiveServer *s, int64_t t, int timeout);

/* pp-live-token.c */
PpStatus pp_live_token_make (char *out, PpError *err);
int      pp_live_token_equal (const char *want, size_t want_len, const char *line, size_t len);

/* ---- the client ---- */

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

/* pp-live-clock.c: the collector's side, on the thread that reads */
void     pp_live_clock_scan (PpLiveClient *c, const uint8_t *p, size_t n, int64_t t);
