/* pp-live.h — the live endpoint of a job, and the viewer side of it.
 *
 * A job serves its trace as it grows: the stream a viewer reads is exactly
 * the trace file format (docs/trace-format.md), header first, whole frames
 * after.  A viewer that attaches gets the run description and every event so
 * far (the job keeps its trace in memory, within history_max_bytes), then
 * the live stream.  Serving never slows the job: pp_live_server_write only
 * appends to memory; a server thread writes to viewers with non-blocking
 * sockets.  A viewer that falls more than viewer_lag_bytes behind loses
 * span, counter and step frames (never the description, plan, strings or
 * clock offsets, though only the newest of a rank's plans and offsets, or
 * of a string id, once a newer one came), and is told how many events it
 * lost with a DROPPED frame (rank -1) when it catches up.
 *
 * Local viewers connect to <registry dir>/<pid>.sock (mode 0600).  TCP only
 * when asked (listen = "HOST:PORT"); a TCP viewer first sends the line
 * "PIPESCOPE 1 <token>\n" and is disconnected if the token is wrong.  A rank
 * on another host than its collector's pushes its stream instead: it
 * connects out and sends "PIPESCOPE 1 <token> push\n", then the stream
 * (push, on_push below; docs/jobs.md), with clock pings between its frames
 * that the collector answers on the same connection (pp_live_server_clock;
 * docs/transport.md, "Clocks").
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-registry.h"
#include "pp-status.h"
#include "pp-trace.h"

typedef struct _PpLiveServer PpLiveServer;
typedef struct _PpLiveClient PpLiveClient;

typedef struct {
  const char *name;              /* registry name; NULL: "<schedule>-<pid>" */
  const char *schedule;          /* for the registry entry */
  const char *cmdline;           /* for the registry entry */
  const char *listen;            /* NULL, or "HOST:PORT" to serve on TCP too (port 0: any) */
  const char *token;             /* TCP token; NULL: a random one (pp_live_server_token) */
  size_t      viewer_lag_bytes;  /* 0: 64 MiB */
  /* 0: 1 GiB: the history's frames, their index and the essential frames
   * below together; past it, new viewers get only what is essential + live */
  size_t      history_max_bytes;
  /* What is essential, kept past the history for late viewers: the first
   * and the newest description, the newest plan, clock offset and RANK
   * frame of each rank, and the names (STRING, the newest of each id) that
   * the events still in the history use.  It counts against
   * history_max_bytes; past this bound (0: a quarter of history_max_bytes,
   * at least 1 MiB) names no event in the history uses go first, then the
   * oldest events (so that their names may go), then the oldest frames;
   * what goes is counted (pp_live_server_retained) and a late viewer is
   * told of it in its DROPPED count. */
  size_t      retained_max_bytes;
  int         no_register;       /* 1: serve without a registry entry (tests) */
  /* At the job's end, how long a viewer still behind gets for what is left
   * after its lack was counted (final_drain's cut); 0: 1 s.  A test sets a
   * hang guard here, so that what it checks cannot depend on how soon a
   * loaded machine runs its reader. */
  int         end_grace_ms;
  /* one rank of a job of several processes: the job's name, this rank, the
   * job's ranks (the registry entry's job, rank, n_ranks); NULL, 0, 0: no */
  const char *job;
  int         rank, n_ranks;
  /* A rank whose host has no collector (docs/jobs.md, "Ranks on other
   * hosts"): push is the collector's "HOST:PORT", push_token its token.
   * The server thread connects out (non-blocking, a few tries), sends
   * "PIPESCOPE 1 <token> push\n" and then serves the collector as a
   * viewer that dialled in: the whole stream from its header, dropped and
   * counted past viewer_lag_bytes like any viewer's.  A push that cannot
   * connect, or ends, says so in one line on stderr (push_label names the
   * rank); recording goes on. */
  const char *push;
  const char *push_token;
  const char *push_label;
  /* A collector: on_push takes the connections on the TCP endpoint whose
   * line is "PIPESCOPE 1 <token> push" (without it they are refused).
   * Called on the server thread with the connection (non-blocking), the
   * bytes that came after the line, and the peer's address; returns 0 when
   * it took fd (it closes it), else -1 (the server closes it). */
  int       (*on_push) (void *user, int fd, const void *data, size_t n, const char *peer);
  void       *push_user;
} PpLiveConfig;

/* Creates the socket, registers the job, starts the server thread. */
PpLiveServer *pp_live_server_new (const PpLiveConfig *cfg, PpError *err);

/* Appends trace bytes (header first, then whole frames) to the history and
 * wakes the server thread.  Never blocks on viewers.  The signature is a
 * PpTraceWriteFunc: pass the server as the user data of
 * pp_trace_writer_new_callback.  Returns 0, or -1 when out of memory. */
int           pp_live_server_write (void *server, const void *data, size_t size);

const char   *pp_live_server_socket_path (PpLiveServer *s);
const char   *pp_live_server_token (PpLiveServer *s);     /* NULL without TCP */
int           pp_live_server_tcp_port (PpLiveServer *s);  /* 0 without TCP */
/* NULL, or one line: the usual registry folder was refused and the job
 * registered in the private fallback it names (pp_registry_dir_for_job). */
const char   *pp_live_server_notice (PpLiveServer *s);
unsigned      pp_live_server_n_viewers (PpLiveServer *s);
/* Writes the server's registry entry again under name (a rank that has
 * learnt its place on the job's mesh: "<job>.r<rank>.p<process>").
 * PP_OK also for a server without an entry. */
PpStatus      pp_live_server_rename (PpLiveServer *s, const char *name, PpError *err);
uint64_t      pp_live_server_dropped (PpLiveServer *s);   /* events dropped for slow viewers, all viewers */
/* A pushing rank's clock against its collector's, measured on the server
 * thread over the push: a few ping-pongs at the start and every 10 s, the
 * one with the least round trip kept (collector's time = this process's
 * pp_probe_now_ns + *offset_ns).  Returns how many times it was measured
 * (0: not yet, or never: no push, or a collector that does not answer);
 * *offset_ns and *rtt_ns are the last measurement's.  Any thread. */
unsigned      pp_live_server_clock (PpLiveServer *s, int64_t *offset_ns, int64_t *rtt_ns);
/* The essential frames kept for late viewers (retained_max_bytes above):
 * how many and their bytes now; how many were replaced by a newer one of
 * their rank (or string id), and how many were dropped past the bound,
 * so far.  Any thread. */
typedef struct {
  uint64_t frames, bytes;
  uint64_t superseded, dropped;
} PpLiveRetained;
void          pp_live_server_retained (PpLiveServer *s, PpLiveRetained *out);
/* TCP connections refused so far: a wrong or missing token line (within
 * the second it has), or a push where none is taken. */
uint64_t      pp_live_server_refused (PpLiveServer *s);

/* Stops serving: viewers see the stream end; the registry entry and the
 * socket are removed. */
void          pp_live_server_free (PpLiveServer *s);

/* Attaches to a job: a pid, a job name, a socket path, or HOST:PORT (with a
 * token).  One-line errors: no such job, refused, bad token. */
PpLiveClient *pp_live_client_connect (const char *job, const char *token, PpError *err);

/* The next item of the stream, waiting at most timeout_ms (-1: forever).
 * PP_OK with END and need_more = 1: nothing arrived in time.  PP_OK with END
 * and need_more = 0: the job ended (truncated = 1 if it ended mid-frame).
 * Items stay valid until the next call. */
PpStatus      pp_live_client_next (PpLiveClient *c, PpTraceItem *item, int timeout_ms,
                                   PpError *err);
void          pp_live_client_free (PpLiveClient *c);

/* A client over a connection already open (a stream pushed to a
 * collector): data is what came after the line, label names it in errors.
 * Takes fd, also on failure (NULL, err). */
PpLiveClient *pp_live_client_new_fd (int fd, const void *data, size_t n, const char *label,
                                     PpError *err);
/* Such a client answers the rank's clock pings as their bytes arrive, on
 * the thread that calls pp_live_client_next, with pp_probe_now_ns.  How
 * many it answered, and the round trip of the rank's last measurement as
 * its pings say (0 before the first). */
uint64_t      pp_live_client_clock (const PpLiveClient *c, int64_t *rank_rtt_ns);

/* A TCP token kept where other local users cannot read it (a command line
 * can be read by anyone in /proc/PID/cmdline).  pp_live_token_from_file
 * reads the first line of path, refused unless it is a regular file owned
 * by the caller with no access for group or others; pp_live_token_check
 * tells whether a token is well formed (1 to 32 characters, no spaces or
 * control characters).  One-line errors naming the fix. */
PpStatus      pp_live_token_from_file (const char *path, char *buf, size_t size, PpError *err);
PpStatus      pp_live_token_check (const char *token, PpError *err);
