/* cli-job.c — a pipescope-cli command acting as a job: stop signals, and
 * its live server, trace files and probe (cli-job.h). */
#include "cli-job.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pp-registry.h"
#include "pp-trace-format.h"

/* ---- signals ----------------------------------------------------------------- */

volatile sig_atomic_t pp_cli_stop_signal;
volatile sig_atomic_t pp_cli_stop_flag;

/* Lock-free atomic stores: safe in a handler, and other threads (the
 * ranks, whichever thread the signal did not land on) read the flag. */
static void
on_stop_signal (int sig)
{
  __atomic_store_n (&pp_cli_stop_signal, sig, __ATOMIC_RELAXED);
  __atomic_store_n (&pp_cli_stop_flag, 1, __ATOMIC_RELAXED);
}

bool
pp_cli_stopping (void)
{
  return __atomic_load_n (&pp_cli_stop_flag, __ATOMIC_RELAXED) != 0;
}

void
pp_cli_catch_stop_signals (void)
{
  struct sigaction sa;

  __atomic_store_n (&pp_cli_stop_signal, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&pp_cli_stop_flag, 0, __ATOMIC_RELAXED);
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset (&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
}

void
pp_cli_mask_stop_signals (int how)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  pthread_sigmask (how, &set, NULL);
}

int64_t
pp_cli_now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- a job's outputs: live server, trace file, probe ------------------------------ */

static void
job_error (PpCliJob *job, int which, const PpError *err)
{
  const char *what = which >= 0 && which < 2 ? job->what[which] : NULL;
  fprintf (stderr, "pipescope-cli: error: %s: %s\n", what ? what : "trace",
           err->msg[0] ? err->msg : "cannot write trace");
}

int
pp_cli_job_open (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                 const char *listen, const char *trace)
{
  return pp_cli_job_open_rank (job, schedule, cmdline, live, listen, trace, NULL, 0, 0);
}

int
pp_cli_job_open_rank (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                      const char *listen, const char *trace, const char *job_name, int rank,
                      int n_ranks)
{
  PpError err = { 0 };
  PpLiveConfig cfg;

  memset (job, 0, sizeof *job);
  job->live_index = -1;
  if (job_name != NULL && rank > 0)
    snprintf (job->name, sizeof job->name, "%.50s.r%d", job_name, rank);
  else if (job_name != NULL)
    snprintf (job->name, sizeof job->name, "%s", job_name);
  else
    snprintf (job->name, sizeof job->name, "%s-%ld", schedule, (long) getpid ());
  if (live)
    {
      memset (&cfg, 0, sizeof cfg);
      cfg.name = job->name;
      cfg.schedule = schedule;
      cfg.cmdline = cmdline;
      cfg.listen = listen;
      cfg.job = n_ranks > 0 ? job_name : NULL;   /* a job of one process: just a name */
      cfg.rank = rank;
      cfg.n_ranks = n_ranks;
      job->server = pp_live_server_new (&cfg, &err);
      if (job->server == NULL && listen == NULL && trace != NULL)
        {
          /* Live is the default, the trace is what was asked for: a job
           * that cannot serve (no private folder for its socket, say) still
           * runs and writes its trace. */
          fprintf (stderr, "pipescope-cli: not serving live (%s); running without a live endpoint\n",
                   err.msg[0] ? err.msg : "cannot serve");
          live = false;
        }
      else if (job->server == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot serve");
          return 1;
        }
      else if (pp_live_server_notice (job->server) != NULL)
        fprintf (stderr, "pipescope-cli: %s\n", pp_live_server_notice (job->server));
    }
  if (live)
    {
      job->what[job->n] = "live stream";
      job->live_index = job->n;
      job->w[job->n] = pp_trace_writer_new_callback (pp_live_server_write, job->server,
                                                     PP_TRACE_NATIVE, &err);
      if (job->w[job->n] == NULL)
        {
          job_error (job, job->n, &err);
          pp_cli_job_abort (job);
          return 1;
        }
      job->n++;
    }
  if (trace != NULL)
    {
      job->what[job->n] = trace;
      job->w[job->n] = pp_trace_writer_new_path (trace, PP_TRACE_NATIVE, &err);
      if (job->w[job->n] == NULL)
        {
          job_error (job, job->n, &err);
          pp_cli_job_abort (job);
          return 1;
        }
      job->n++;
    }
  return 0;
}

/* The writers take frames from two threads: the caller's (headers,
 * markers, plans, names) and the probe's drain (spans, counters).  A stop
 * in mid-step leaves spans in the probe's buffers that the drain delivers
 * while the main thread writes the plan; with CUPTI, device spans arrive at
 * any time.  One job per process, so one lock; never held across
 * pp_probe_flush (which waits for the drain). */
static pthread_mutex_t job_writers_lock = PTHREAD_MUTEX_INITIALIZER;

int
pp_cli_job_write (PpCliJob *job, PpCliWriteFunc fn, void *user)
{
  PpError err = { 0 };
  int rc = 0;

  pthread_mutex_lock (&job_writers_lock);
  for (int i = 0; i < job->n; i++)
    if (fn (job->w[i], user, &err) != PP_OK || pp_trace_writer_flush (job->w[i], &err) != PP_OK)
      {
        job_error (job, i, &err);
        rc = 1;
        break;
      }
  pthread_mutex_unlock (&job_writers_lock);
  return rc;
}

/* Records (spans, counters) in whole frames of the writer's native order. */
static uint64_t
frame_records (const unsigned char *f, uint32_t size, uint16_t type)
{
  uint64_t n = 0;
  if (type == PP_TRACE_FRAME_COUNTER)
    return 1;
  if (type != PP_TRACE_FRAME_SPANS)
    return 0;
  for (uint32_t off = sizeof (PpTraceFrameHeader); off + sizeof (PpTraceDiskSpan) <= size;
       off += sizeof (PpTraceDiskSpan))
    n += !(f[off + offsetof (PpTraceDiskSpan, flags)] & PP_TRACE_SPAN_IS_EXT);
  return n;
}

/* Appends to what rank 0 takes next; false when there is no room. */
static bool
collect_append (PpCliJob *job, const void *data, size_t size)
{
  if (job->n_collected + size > job->cap_collected)
    {
      size_t cap = job->cap_collected ? job->cap_collected : 65536;
      while (cap < job->n_collected + size)
        cap *= 2;
      unsigned char *p = realloc (job->collected, cap);
      if (p == NULL)
        return false;
      job->collected = p;
      job->cap_collected = cap;
    }
  memcpy (job->collected + job->n_collected, data, size);
  job->n_collected += size;
  return true;
}

/* The collector writer's function (under the writers' lock).  Past the
 * bound (rank 0 has not taken for a long while) a flush's spans and
 * counters are dropped and counted, its other frames (the file header,
 * names, clock offsets, markers: a few bytes a step) kept, so what is
 * kept stays a valid stream and this rank never waits; the count reaches
 * rank 0 as a DROPPED frame at the next take. */
static int
collect_bytes (void *user, const void *data, size_t size)
{
  PpCliJob *job = user;
  const unsigned char *d = data;
  size_t off = 0;

  if (job->n_collected + size <= job->collect_max && collect_append (job, data, size))
    return 0;
  if (size >= sizeof (PpTraceFileHeader) && memcmp (d, PP_TRACE_MAGIC, 8) == 0)
    {
      /* the stream's start: its header goes whatever the bound */
      PpTraceFileHeader h;
      memcpy (&h, d, sizeof h);
      off = h.header_size >= sizeof h && h.header_size <= size ? h.header_size : size;
      if (!collect_append (job, d, off))
        {
          job->collect_dropped += size;
          return 0;
        }
    }
  while (off + sizeof (PpTraceFrameHeader) <= size)
    {
      PpTraceFrameHeader h;
      memcpy (&h, d + off, sizeof h);
      if (h.size < sizeof h || h.size > size - off)
        break;
      uint64_t n = frame_records (d + off, h.size, h.type);
      if (n > 0 || !collect_append (job, d + off, h.size))
        {
          job->collect_dropped += h.size;
          job->collect_dropped_records += n;
        }
      off += h.size;
    }
  job->collect_dropped += size - off;
  return 0;
}

int
pp_cli_job_collect (PpCliJob *job, int rank)
{
  PpError err = { 0 };
  const char *max = getenv ("PIPESCOPE_TEST_COLLECT_MAX");   /* tests: a tiny bound */
  if (job->n >= 3)
    return 1;
  job->collect_rank = rank;
  job->collect_max = max != NULL && atol (max) > 0 ? (size_t) atol (max) : PP_CLI_COLLECT_MAX;
  job->what[job->n] = "collector";
  job->w[job->n] = pp_trace_writer_new_callback (collect_bytes, job, PP_TRACE_NATIVE, &err);
  if (job->w[job->n] == NULL)
    {
      job_error (job, job->n, &err);
      return 1;
    }
  job->n++;
  return 0;
}

void
pp_cli_job_take_collected (PpCliJob *job, unsigned char **data, size_t *n)
{
  pthread_mutex_lock (&job_writers_lock);
  if (job->collect_dropped_records > job->collect_reported)
    {
      /* what was dropped since the last take, for viewers to show */
      PpTraceFrameDropped f;
      memset (&f, 0, sizeof f);
      f.h.size = sizeof f;
      f.h.type = PP_TRACE_FRAME_DROPPED;
      f.rank = job->collect_rank;
      f.count = job->collect_dropped_records - job->collect_reported;
      if (collect_append (job, &f, sizeof f))
        job->collect_reported = job->collect_dropped_records;
    }
  *data = job->collected;
  *n = job->n_collected;
  job->collected = NULL;
  job->n_collected = job->cap_collected = 0;
  pthread_mutex_unlock (&job_writers_lock);
}

int
pp_cli_job_write_live (PpCliJob *job, PpCliWriteFunc fn, void *user)
{
  PpError err = { 0 };
  int rc = 0, i = job->live_index;

  if (i < 0)
    return 0;
  pthread_mutex_lock (&job_writers_lock);
  if (fn (job->w[i], user, &err) != PP_OK || pp_trace_writer_flush (job->w[i], &err) != PP_OK)
    {
      job_error (job, i, &err);
      rc = 1;
    }
  pthread_mutex_unlock (&job_writers_lock);
  return rc;
}

/* The probe's sink: the trace sink's callbacks (under the writers' lock),
 * then the tap's. */
static void
job_spans (void *user, const PpSpan *spans, size_t n)
{
  PpCliJob *job = user;
  if (job->trace_sink.spans)
    {
      pthread_mutex_lock (&job_writers_lock);
      job->trace_sink.spans (job->trace_sink.user, spans, n);
      pthread_mutex_unlock (&job_writers_lock);
    }
  if (job->tap.spans)
    job->tap.spans (job->tap.user, spans, n);
}

static void
job_counters (void *user, const PpCounter *counters, size_t n)
{
  PpCliJob *job = user;
  if (job->trace_sink.counters)
    {
      pthread_mutex_lock (&job_writers_lock);
      job->trace_sink.counters (job->trace_sink.user, counters, n);
      pthread_mutex_unlock (&job_writers_lock);
    }
  if (job->tap.counters)
    job->tap.counters (job->tap.user, counters, n);
}

static void
job_dropped (void *user, int32_t rank, uint64_t total)
{
  PpCliJob *job = user;
  if (job->trace_sink.dropped)
    {
      pthread_mutex_lock (&job_writers_lock);
      job->trace_sink.dropped (job->trace_sink.user, rank, total);
      pthread_mutex_unlock (&job_writers_lock);
    }
  if (job->tap.dropped)
    job->tap.dropped (job->tap.user, rank, total);
}

int
pp_cli_job_start_probe (PpCliJob *job, const PpProbeSink *tap)
{
  PpError err = { 0 };
  PpProbeConfig pcfg;

  if (job->n > 0)
    {
      job->sink = pp_trace_sink_new (job->w, job->n, &err);
      if (job->sink == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot create the trace sink");
          return 1;
        }
      job->trace_sink = pp_trace_sink_probe_sink (job->sink);
    }
  if (tap != NULL)
    job->tap = *tap;
  memset (&pcfg, 0, sizeof pcfg);
  pcfg.sink.user = job;
  pcfg.sink.spans = job_spans;
  pcfg.sink.counters = job_counters;
  pcfg.sink.dropped = job_dropped;
  job->probe = pp_probe_new (&pcfg, &err);
  if (job->probe == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot start the probe");
      return 1;
    }
  return 0;
}

void
pp_cli_job_announce (PpCliJob *job, const char *listen)
{
  PpLiveServer *server = job->server;

  if (server == NULL)
    return;
  if (pp_live_server_token (server) != NULL)
    {
      /* The host as asked, the port as bound (port 0 picks one). */
      const char *colon = strrchr (listen, ':');
      int hl = colon ? (int) (colon - listen) : (int) strlen (listen);
      fprintf (stderr, "serving %s (pid %ld) on %s and %.*s:%d, token %s; Ctrl-C stops\n", job->name,
               (long) getpid (), pp_live_server_socket_path (server), hl, listen,
               pp_live_server_tcp_port (server), pp_live_server_token (server));
    }
  else
    fprintf (stderr, "serving %s (pid %ld) on %s; Ctrl-C stops\n", job->name, (long) getpid (),
             pp_live_server_socket_path (server));
  fflush (stderr);
}

int
pp_cli_job_close (PpCliJob *job)
{
  PpError err = { 0 };
  int status = 0;

  /* A final drain pass: everything recorded reaches the writers. */
  pp_probe_free (job->probe);
  job->probe = NULL;
  if (job->sink != NULL && pp_trace_sink_status (job->sink, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      status = 1;
    }
  for (int i = job->n - 1; i >= 0; i--)
    {
      PpTraceWriter *w = job->w[i];
      job->w[i] = NULL;
      if (pp_trace_writer_close (w, &err) != PP_OK && status == 0)
        {
          job_error (job, i, &err);
          status = 1;
        }
    }
  pp_cli_job_abort (job);
  return status;
}

void
pp_cli_job_abort (PpCliJob *job)
{
  pp_probe_free (job->probe);
  job->probe = NULL;
  pp_trace_sink_free (job->sink);
  job->sink = NULL;
  for (int i = 0; i < 3; i++)
    if (job->w[i])
      {
        pp_trace_writer_close (job->w[i], NULL);
        job->w[i] = NULL;
      }
  job->n = 0;
  job->live_index = -1;
  free (job->collected);
  job->collected = NULL;
  job->n_collected = job->cap_collected = 0;
  pp_live_server_free (job->server);
  job->server = NULL;
}

/* ---- limits ------------------------------------------------------------------ */

/* pp_cli_threads_max (cli-job.h).  The user's RLIMIT_NPROC (threads count) and the
 * cgroup's pids.max, less what runs already and a reserve for the probe's,
 * the server's and the BLAS library's threads; never more than
 * RUN_THREADS_MAX (the schedules accept 4096 ranks, but no machine trains
 * that many CPU ranks in one process). */
#define RUN_THREADS_MAX     1024
#define RUN_THREADS_RESERVE 64
int
pp_cli_threads_max (char *why, size_t size)
{
  long most = RUN_THREADS_MAX;
  struct rlimit rl;
  FILE *f;
  long cur = -1, max = -1;

  snprintf (why, size, "pipescope-cli runs at most %d ranks in one process", RUN_THREADS_MAX);
  if (getrlimit (RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
      && (long) rl.rlim_cur - RUN_THREADS_RESERVE < most)
    {
      most = (long) rl.rlim_cur - RUN_THREADS_RESERVE;
      snprintf (why, size, "ulimit -u is %ld", (long) rl.rlim_cur);
    }
  if ((f = fopen ("/sys/fs/cgroup/pids.max", "r")) != NULL)
    {
      if (fscanf (f, "%ld", &max) != 1)
        max = -1;   /* "max": no bound */
      fclose (f);
    }
  if (max > 0 && (f = fopen ("/sys/fs/cgroup/pids.current", "r")) != NULL)
    {
      if (fscanf (f, "%ld", &cur) != 1)
        cur = -1;
      fclose (f);
    }
  if (max > 0 && cur >= 0 && max - cur - RUN_THREADS_RESERVE < most)
    {
      most = max - cur - RUN_THREADS_RESERVE;
      snprintf (why, size, "the cgroup allows %ld tasks, %ld run already", max, cur);
    }
  return most < 0 ? 0 : (int) most;
}
