/* pp-live-server.c — a job's live endpoint: its sockets, its viewers and
 * the one thread that serves them (pp-live.h; the stream it serves is kept
 * by pp-live-history.c).
 *
 * One server thread polls the listeners, the viewers and a wake pipe.
 * Under the lock, whole frames are copied from the history into a viewer's
 * staging buffer (pp_live_viewer_fill); out of the lock, the staging buffer
 * goes to the socket with non-blocking sends.  The same thread runs a
 * rank's push to its collector (pp-live-push.c) and the push's clock
 * (pp-live-clock.c).
 */
#define _GNU_SOURCE   /* pthread_setname_np */
#include "pp-live-private.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "pp-probe.h"

#define DEFAULT_LAG_BYTES     (64u * 1024u * 1024u)
#define DEFAULT_HISTORY_MAX   (1024ull * 1024u * 1024u)
#define RETAINED_MIN          (1024u * 1024u)   /* a default bound on the retained frames no smaller */
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
#define DRAIN_TOTAL_MS        1000
#define DRAIN_IDLE_MS         200

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
      r = pp_live_history_append (s, data, size);
      if (r < 0)
        s->broken = 1;
    }
  pthread_mutex_unlock (&s->lock);
  if (r == 0)
    wake (s);
  return r == 0 ? 0 : -1;
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

static int
token_ok (PpLiveServer *s, const char *line, size_t len)
{
  return pp_live_token_equal (s->auth_line, s->auth_line_len, line, len);
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
void
pp_live_viewer_read (PpLiveServer *s, Viewer *v)
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
          pp_live_clock_reply (s, (const uint8_t *) buf, (size_t) n, t_recv);
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
static void
reap (PpLiveServer *s)
{
  size_t j = 0;
  for (size_t i = 0; i < s->n_viewers_arr; i++)
    {
      Viewer *v = s->viewers[i];
      if (v->dead && v == s->push_v)
        pp_live_push_ended (s, v);
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
      pp_live_viewer_read (s, oldest);
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
          pp_live_viewer_read (s, v);
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

#define CLOCK_CLOSE_WAIT_MS   200

/* The server stops (here, not in pp-live-clock.c, which calls the
 * server: the files call one way).  A clock reply still on its way would reach a closed
 * socket, whose reset can cost the collector the end of the stream it has
 * not read yet: our side of the push is shut, and the replies waited for,
 * a moment at most. */
static void
clock_finish (PpLiveServer *s)
{
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
          pp_live_viewer_read (s, v);
        }
    }
}

/* At the end: give viewers what is left, for a bounded time (a slow viewer
 * never holds a job).  A viewer still behind when that time is up is not
 * cut off unsaid (test-mpi-run once lost 25,819 records of a rank so, on a
 * loaded machine): the spans and counters it lacks, staged and not begun
 * too, are counted in DROPPED frames of their ranks (pp_live_viewer_cut),
 * and what is left to send, small now, gets as long again.  Only a viewer
 * that reads nothing at all for both is left without its count: nothing
 * reaches it. */
static void
final_drain (PpLiveServer *s)
{
  int64_t start = now_ms (), last_progress = start;
  struct pollfd *pfds = NULL;
  size_t pcap = 0;
  int cut = 0;
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
          if (pp_live_viewer_pump (s, v))
            last_progress = now_ms ();
          if (!v->dead && !viewer_caught_up (s, v))
            all_done = 0;
        }
      reap (s);
      int64_t t = now_ms ();
      if (!all_done && !cut && (t - start >= DRAIN_TOTAL_MS || t - last_progress >= DRAIN_IDLE_MS))
        {
          for (size_t i = 0; i < s->n_viewers_arr; i++)
            {
              Viewer *v = s->viewers[i];
              if (v->dead || viewer_caught_up (s, v))
                continue;
              pthread_mutex_lock (&s->lock);
              if (pp_live_viewer_cut (s, v) < 0)
                v->dead = 1;
              pthread_mutex_unlock (&s->lock);
            }
          cut = 1;
          start = last_progress = t;
          continue;
        }
      /* after the cut, what is left is small: the whole time for it (a
       * viewer on a loaded machine may be starved a moment) */
      if (all_done || t - start >= (cut ? s->end_grace_ms : DRAIN_TOTAL_MS)
          || (!cut && t - last_progress >= DRAIN_IDLE_MS))
        break;
      if (grow ((void **) &pfds, &pcap, s->n_viewers_arr + 1, sizeof *pfds) < 0)
        break;
      for (size_t i = 0; i < s->n_viewers_arr; i++)
        pfds[i] = (struct pollfd) { .fd = s->viewers[i]->fd,
                                    .events = pending (s->viewers[i]) ? POLLOUT : 0 };
      poll (pfds, s->n_viewers_arr, 20);
    }
  free (pfds);
  clock_finish (s);
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
        pp_live_push_start (s);
      pp_live_clock_tick (s);
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
      timeout = pp_live_push_timeout (s, t, timeout);
      timeout = pp_live_clock_timeout (s, t, timeout);
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
                pp_live_push_connected (s, v);
            }
          else
            {
              if (re & (POLLIN | POLLHUP | POLLERR))
                pp_live_viewer_read (s, v);
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
            pp_live_viewer_pump (s, v);
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
            pp_live_viewer_pump (s, v);
        }
      reap (s);
    }
  free (pfds);
  pp_live_push_at_end (s);
  final_drain (s);
  for (size_t i = 0; i < s->n_viewers_arr; i++)
    viewer_free (s, s->viewers[i]);
  s->n_viewers_arr = 0;
  return NULL;
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
  s->end_grace_ms = cfg->end_grace_ms > 0 ? cfg->end_grace_ms : DRAIN_TOTAL_MS;
  s->history_max = cfg->history_max_bytes ? cfg->history_max_bytes : (size_t) DEFAULT_HISTORY_MAX;
  s->kept.max = cfg->retained_max_bytes ? cfg->retained_max_bytes : s->history_max / 4;
  if (!cfg->retained_max_bytes && s->kept.max < RETAINED_MIN)
    s->kept.max = RETAINED_MIN;
  s->chunk_size = s->history_max / 8;
  if (s->chunk_size < 64 * 1024)
    s->chunk_size = 64 * 1024;
  if (s->chunk_size > 4 * 1024 * 1024)
    s->chunk_size = 4 * 1024 * 1024;
  s->on_push = cfg->on_push;
  s->push_user = cfg->push_user;
  if (pp_live_push_init (s, cfg, err) != PP_OK)
    goto fail;

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
      else if (pp_live_token_make (s->token, err) != PP_OK)
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
      s->entry = job;
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

PpStatus
pp_live_server_rename (PpLiveServer *s, const char *name, PpError *err)
{
  if (s == NULL || name == NULL || name[0] == '\0')
    return pp_error_set (err, PP_EINVAL, "live: no server or name");
  if (!s->registered)
    return PP_OK;
  snprintf (s->entry.name, sizeof s->entry.name, "%s", name);
  return pp_registry_add_in (s->reg_dir, &s->entry, err);
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
  pp_live_history_free (s);
  free (s->viewers);
  pthread_mutex_destroy (&s->lock);
  free (s);
}
