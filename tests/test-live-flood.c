/* The TCP endpoint under a flood of unauthenticated connections (issue 18):
 * a job whose descriptor limit is 64 (`schedule --serve --listen`, started
 * with RLIMIT_NOFILE 64) is hit by FLOOD_N connections from 127.0.0.1 that
 * never send their token and are held open; a viewer with the token that
 * connects in the middle of the flood still receives every span the job
 * writes to its own trace file.  Before the bounds on waiting connections
 * the flood took every descriptor and the viewer was not accepted before
 * the job ended.  Loopback only, FLOOD_N connections at most, all closed. */
#include <glib.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-live.h"
#include "pp-test-util.h"

#define FLOOD_N      200
#define VIEWER_AFTER 100   /* the viewer connects once this many flood connections are open */

typedef struct {
  int             port;
  int             fds[FLOOD_N];
  int             n_open;      /* connections started */
  int             n_tried;
  pthread_mutex_t lock;
  pthread_cond_t  cond;
} Flood;

/* One connection, non-blocking and not waited for (the kernel completes
 * it, or the server's queue drops it): a flood is as fast as it can be, and
 * the test never waits on one.  The fd, or -1. */
static int
flood_connect (int port)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (connect (fd, (struct sockaddr *) &a, sizeof a) != 0 && errno != EINPROGRESS)
    {
      close (fd);
      return -1;
    }
  return fd;
}

static void *
flood_main (void *data)
{
  Flood *f = data;
  for (int i = 0; i < FLOOD_N; i++)
    {
      int fd = flood_connect (f->port);   /* held open, never a byte sent */
      if (i == FLOOD_N / 2)
        g_usleep (1000);   /* let the viewer in among them, not only after */
      pthread_mutex_lock (&f->lock);
      f->fds[i] = fd;
      f->n_tried++;
      if (fd >= 0)
        f->n_open++;
      pthread_cond_broadcast (&f->cond);
      pthread_mutex_unlock (&f->lock);
    }
  return NULL;
}

static void
limit_fds (gpointer unused)
{
  (void) unused;
  struct rlimit rl = { 64, 64 };
  if (setrlimit (RLIMIT_NOFILE, &rl) != 0)
    _exit (126);
}

static void
test_flood (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-live-flood");
  char *trace = pp_test_ctx_path (&c, "job.pptrace");
  /* 90 steps of 33 ms: long enough for the flood and the viewer to start
   * while it runs (it serves its history to a late viewer anyway), and
   * shorter than the 5 s an unauthenticated connection used to be held */
  const char *argv[] = { pp_test_cli_path (), "schedule", "-s", "1F1B", "-p", "4", "-m", "8", "--serve",
                         "--listen", "127.0.0.1:0", "--steps", "90", "--trace", trace, NULL };
  GPid pid;
  int err_fd;
  GError *error = NULL;
  if (!g_spawn_async_with_pipes (NULL, (char **) argv, c.envp,
                                 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, limit_fds, NULL,
                                 &pid, NULL, NULL, &err_fd, &error))
    g_error ("spawn: %s", error->message);

  /* its "serving ... and 127.0.0.1:PORT, token T; Ctrl-C stops" line */
  GString *line = g_string_new (NULL);
  while (strchr (line->str, '\n') == NULL)
    {
      char ch;
      ssize_t n = read (err_fd, &ch, 1);
      if (n <= 0)
        g_error ("the job's stderr ended before its 'serving' line (got '%s')", line->str);
      g_string_append_c (line, ch);
    }
  const char *at = strstr (line->str, " and 127.0.0.1:"), *tok = strstr (line->str, ", token ");
  g_assert_nonnull (at);
  g_assert_nonnull (tok);
  int port = atoi (at + 15);
  char *token = g_strndup (tok + 8, strcspn (tok + 8, ";"));
  char *hostport = g_strdup_printf ("127.0.0.1:%d", port);
  g_assert_cmpint (port, >, 0);

  Flood f = { .port = port };
  pthread_mutex_init (&f.lock, NULL);
  pthread_cond_init (&f.cond, NULL);
  for (int i = 0; i < FLOOD_N; i++)
    f.fds[i] = -1;
  pthread_t th;
  g_assert_cmpint (pthread_create (&th, NULL, flood_main, &f), ==, 0);
  pthread_mutex_lock (&f.lock);
  while (f.n_tried < VIEWER_AFTER)
    pthread_cond_wait (&f.cond, &f.lock);
  int open_before = f.n_open;
  pthread_mutex_unlock (&f.lock);

  /* the viewer, in the middle of the flood */
  PpError err = { 0 };
  PpLiveClient *v = pp_live_client_connect (hostport, token, &err);
  if (v == NULL)
    g_error ("attach: %s", err.msg);
  long spans = 0;
  int ended = 0, failed = 0;
  for (int rounds = 0; rounds < 10000000 && !ended && !failed; rounds++)
    {
      PpTraceItem item;
      if (pp_live_client_next (v, &item, 100, &err) != PP_OK)
        {
          g_test_message ("viewer: %s", err.msg);
          failed = 1;
        }
      else if (item.type == PP_TRACE_ITEM_SPAN)
        spans++;
      else if (item.type == PP_TRACE_ITEM_END && !item.need_more)
        ended = 1;
    }
  pp_live_client_free (v);
  pthread_join (th, NULL);
  for (int i = 0; i < FLOOD_N; i++)
    if (f.fds[i] >= 0)
      close (f.fds[i]);

  int status;
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  close (err_fd);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);

  /* what the job wrote to its own file */
  char *out, *cerr;
  g_assert_cmpint (pp_test_cli_run (c.envp, &out, &cerr, "info", trace, NULL), ==, 0);
  const char *p = strstr (out, "\nspans: ");
  g_assert_nonnull (p);
  long file_spans = strtol (p + 8, NULL, 10);
  g_test_message ("flood: %d of %d connections opened (%d before the viewer); viewer: %ld spans, "
                  "the job's file: %ld", f.n_open, FLOOD_N, open_before, spans, file_spans);
  g_assert_cmpint (open_before, >, 0);   /* there was a flood */
  g_assert_cmpint (file_spans, >, 0);
  g_assert_false (failed);
  g_assert_true (ended);
  g_assert_cmpint (spans, ==, file_spans);

  g_free (out);
  g_free (cerr);
  pthread_mutex_destroy (&f.lock);
  pthread_cond_destroy (&f.cond);
  g_string_free (line, TRUE);
  g_free (token);
  g_free (hostport);
  g_free (trace);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  signal (SIGPIPE, SIG_IGN);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/live-flood/viewer-served", test_flood);
  return g_test_run ();
}
