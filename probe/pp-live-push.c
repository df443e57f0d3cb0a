/* pp-live-push.c — a rank's push of its stream to a collector on another
 * host (pp-live.h, push; docs/jobs.md, "Ranks on other hosts").
 *
 * The server thread connects out (non-blocking, a few tries), sends
 * "PIPESCOPE 1 <token> push\n" and then serves the collector as a viewer
 * that dialled in.  Everything here runs on the server thread, except
 * pp_live_push_init (pp_live_server_new).
 */
#include "pp-live-private.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <unistd.h>

/* A rank's push to a collector on another host (pp-live.h, push): a
 * connect may take PUSH_CONNECT_MS, and PUSH_TRIES of them are made,
 * PUSH_RETRY_MS apart (a collector that is a moment late), then one line
 * says it and the rank records on without.  A push that was connected and
 * ends is not made again: the collector would get the stream twice. */
#define PUSH_CONNECT_MS       3000
#define PUSH_TRIES            5
#define PUSH_RETRY_MS         1000

PpStatus
pp_live_push_init (PpLiveServer *s, const PpLiveConfig *cfg, PpError *err)
{
  if (cfg->push != NULL && cfg->push[0])
    {
      char host[256], port[16];
      PpError why = { 0 };
      if (strlen (cfg->push) >= sizeof s->push_spec
          || split_host_port (cfg->push, host, sizeof host, port, sizeof port) < 0 || host[0] == '\0')
        return pp_error_set (err, PP_EINVAL, "live: the collector's address '%.100s' is not HOST:PORT",
                             cfg->push);
      if (pp_live_token_check (cfg->push_token, &why) != PP_OK)
        return pp_error_set (err, PP_EINVAL, "live: the collector's token: %s", why.msg);
      snprintf (s->push_spec, sizeof s->push_spec, "%s", cfg->push);
      s->push_line_len = (size_t) snprintf (s->push_line, sizeof s->push_line, "PIPESCOPE 1 %s push\n",
                                            cfg->push_token);
      snprintf (s->push_label, sizeof s->push_label, "%s",
                cfg->push_label ? cfg->push_label : cfg->name ? cfg->name : "rank");
      s->push_state = PUSH_WANTED;
    }
  return PP_OK;
}

/* Our push is gone: another try if it never connected and tries are
 * left, else one line (none when we end it ourselves). */
void
pp_live_push_ended (PpLiveServer *s, Viewer *v)
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

/* Starts a connect to the collector, on the server thread: never on a
 * thread of the job's.  The name lookup is the one step that may wait
 * (profile hands the ranks a numeric address). */
void
pp_live_push_start (PpLiveServer *s)
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
      pp_live_push_ended (s, &tmp);
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
void
pp_live_push_connected (PpLiveServer *s, Viewer *v)
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
  if (pp_live_stage (v, s->push_line, s->push_line_len) < 0)
    {
      v->err_no = ENOMEM;
      v->dead = 1;
      return;
    }
  v->connecting = 0;
  v->authed = 1;
  s->push_state = PUSH_LIVE;
}

/* The poll timeout (ms, -1: none) shortened to the next try's time. */
int
pp_live_push_timeout (PpLiveServer *s, int64_t t, int timeout)
{
  if (s->push_state == PUSH_WANTED)
    {
      int l = s->push_next > t ? (int) (s->push_next - t) : 0;
      if (timeout < 0 || l < timeout)
        timeout = l;
    }
  return timeout;
}

/* The server thread ends while a try is still due: one line says so. */
void
pp_live_push_at_end (PpLiveServer *s)
{
  if (s->push_state == PUSH_WANTED && s->push_tries > 0)
    fprintf (stderr, "pipescope: %s: cannot push to the collector at %s (%s, and the job ended before "
             "another try); recording went on here only\n", s->push_label, s->push_spec,
             strerror (s->push_errno ? s->push_errno : ECONNREFUSED));
}
