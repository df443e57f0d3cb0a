/* pp-live-client.c — the viewer side of a live endpoint (pp-live.h): a
 * socket and a streaming trace reader.  A stream pushed to a collector is
 * read the same way, its clock pings answered (pp-live-clock.c).
 */
#include "pp-live-private.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#include "pp-probe.h"

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
        pp_live_clock_scan (c, c->buf, (size_t) n, pp_probe_now_ns ());
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
    pp_live_clock_scan (c, data, n, pp_probe_now_ns ());
  if (c->reader == NULL
      || (n > 0 && pp_trace_reader_feed (c->reader, data, n, err) != PP_OK))
    {
      pp_live_client_free (c);
      return NULL;
    }
  c->received = n;
  return c;
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
