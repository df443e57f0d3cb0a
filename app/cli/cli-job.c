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

/* ---- a job's outputs: live server, trace file, probe (a recorder) ---------------- */

static void
job_error (PpCliJob *job, int which, const PpError *err)
{
  const char *what = which >= 0 && which < PP_RECORDER_MAX_WRITERS ? job->what[which] : NULL;
  fprintf (stderr, "pipescope-cli: error: %s: %s\n", what ? what : "trace",
           err->msg[0] ? err->msg : "cannot write trace");
}

int
pp_cli_job_open (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                 const char *listen, const char *trace)
{
  return pp_cli_job_open_rank (job, schedule, cmdline, live, listen, trace, NULL, 0, 0);
}

static int open_rank (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                      const char *listen, const char *trace, const char *job_name, int rank,
                      int n_ranks, bool member);

int
pp_cli_job_open_rank (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                      const char *listen, const char *trace, const char *job_name, int rank,
                      int n_ranks)
{
  return open_rank (job, schedule, cmdline, live, listen, trace, job_name, rank, n_ranks, false);
}

static PpStatus
write_job_id (PpTraceWriter *w, void *user, PpError *err)
{
  return pp_trace_writer_set_job_id (w, *(const uint64_t *) user, err);
}

int
pp_cli_job_open_member (PpCliJob *job, const char *schedule, const char *cmdline, const char *listen,
                        const char *job_name, int rank, int n_ranks)
{
  char path[4096];
  const char *trace = getenv ("PIPESCOPE_TRACE");
  if (trace != NULL && trace[0] != '\0')
    {
      /* by global rank, as the Python hook names it */
      if (snprintf (path, sizeof path, "%s.rank%d", trace, rank) >= (int) sizeof path)
        {
          fprintf (stderr, "pipescope-cli: error: PIPESCOPE_TRACE is too long\n");
          return 1;
        }
      trace = path;
    }
  else
    trace = NULL;
  if (open_rank (job, schedule, cmdline, true, listen, trace, job_name, rank, n_ranks, true) != 0)
    return 1;
  /* the run's id in the file's header: profile merges its own run's files */
  const char *v = getenv ("PIPESCOPE_JOB_ID");
  char *end = NULL;
  uint64_t id = v != NULL && v[0] != '\0' ? strtoull (v, &end, 16) : 0;
  PpError err = { 0 };
  if (trace != NULL && id != 0 && end != NULL && *end == '\0'
      && pp_recorder_write_one (job->rec, pp_recorder_n_writers (job->rec) - 1, write_job_id, &id, &err)
         != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", trace, err.msg);
      pp_cli_job_abort (job);
      return 1;
    }
  return 0;
}

static int
open_rank (PpCliJob *job, const char *schedule, const char *cmdline, bool live, const char *listen,
           const char *trace, const char *job_name, int rank, int n_ranks, bool member)
{
  PpError err = { 0 };
  PpLiveConfig cfg;
  PpLiveServer *server = NULL;

  memset (job, 0, sizeof *job);
  job->live_index = -1;
  if (job_name != NULL && (rank > 0 || member))
    snprintf (job->name, sizeof job->name, "%.50s.r%d", job_name, rank);
  else if (job_name != NULL)
    snprintf (job->name, sizeof job->name, "%s", job_name);
  else
    snprintf (job->name, sizeof job->name, "%s-%ld", schedule, (long) getpid ());
  if ((job->rec = pp_recorder_new (&err)) == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return 1;
    }
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
      server = pp_live_server_new (&cfg, &err);
      if (server == NULL && listen == NULL && trace != NULL)
        {
          /* Live is the default, the trace is what was asked for: a job
           * that cannot serve (no private folder for its socket, say) still
           * runs and writes its trace. */
          fprintf (stderr, "pipescope-cli: not serving live (%s); running without a live endpoint\n",
                   err.msg[0] ? err.msg : "cannot serve");
          live = false;
        }
      else if (server == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot serve");
          pp_cli_job_abort (job);
          return 1;
        }
      else if (pp_live_server_notice (server) != NULL)
        fprintf (stderr, "pipescope-cli: %s\n", pp_live_server_notice (server));
    }
  if (live)
    {
      int i = pp_recorder_n_writers (job->rec);
      job->what[i] = "live stream";
      if (pp_recorder_add_live (job->rec, server, &err) < 0)
        {
          job_error (job, i, &err);
          pp_cli_job_abort (job);
          return 1;
        }
      job->live_index = i;
    }
  if (trace != NULL)
    {
      int i = pp_recorder_n_writers (job->rec);
      job->what[i] = trace;
      if (pp_recorder_add_file (job->rec, trace, &err) < 0)
        {
          job_error (job, i, &err);
          pp_cli_job_abort (job);
          return 1;
        }
    }
  return 0;
}

/* The writers take frames from two threads: the caller's (headers,
 * markers, plans, names) and the probe's drain (spans, counters).  A stop
 * in mid-step leaves spans in the probe's buffers that the drain delivers
 * while the main thread writes the plan; with CUPTI, device spans arrive at
 * any time.  The recorder's lock keeps their frames apart; never held
 * across pp_probe_flush (which waits for the drain). */
int
pp_cli_job_write (PpCliJob *job, PpCliWriteFunc fn, void *user)
{
  PpError err = { 0 };
  int failed = -1;

  if (pp_recorder_write (job->rec, fn, user, &failed, &err) != PP_OK)
    {
      job_error (job, failed, &err);
      return 1;
    }
  return 0;
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
  int i = pp_recorder_n_writers (job->rec);
  if (i >= PP_RECORDER_MAX_WRITERS)
    return 1;
  job->collect_rank = rank;
  job->collect_max = max != NULL && atol (max) > 0 ? (size_t) atol (max) : PP_CLI_COLLECT_MAX;
  job->what[i] = "collector";
  if (pp_recorder_add_callback (job->rec, collect_bytes, job, &err) < 0)
    {
      job_error (job, i, &err);
      return 1;
    }
  return 0;
}

void
pp_cli_job_take_collected (PpCliJob *job, unsigned char **data, size_t *n)
{
  pp_recorder_lock (job->rec);
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
  pp_recorder_unlock (job->rec);
}

int
pp_cli_job_write_live (PpCliJob *job, PpCliWriteFunc fn, void *user)
{
  PpError err = { 0 };

  if (job->live_index < 0)
    return 0;
  if (pp_recorder_write_one (job->rec, job->live_index, fn, user, &err) != PP_OK)
    {
      job_error (job, job->live_index, &err);
      return 1;
    }
  return 0;
}

int
pp_cli_job_start_probe (PpCliJob *job, const PpProbeSink *tap)
{
  PpError err = { 0 };
  PpRecorderHooks hooks;

  memset (&hooks, 0, sizeof hooks);
  if (tap != NULL)
    hooks.tap = *tap;
  if (pp_recorder_start (job->rec, &hooks, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot start the probe");
      return 1;
    }
  job->probe = pp_recorder_probe (job->rec);
  return 0;
}

void
pp_cli_job_announce (PpCliJob *job, const char *listen)
{
  PpLiveServer *server = pp_recorder_server (job->rec);

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
  int status = 0, failed = -1;

  /* A final drain pass: everything recorded reaches the writers. */
  job->probe = NULL;
  if (pp_recorder_close (job->rec, &failed, &err) != PP_OK)
    {
      if (failed < 0)
        fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      else
        job_error (job, failed, &err);
      status = 1;
    }
  job->rec = NULL;
  pp_cli_job_abort (job);
  return status;
}

void
pp_cli_job_abort (PpCliJob *job)
{
  pp_recorder_free (job->rec);   /* its writers first: the collector's writes into collected */
  job->rec = NULL;
  job->probe = NULL;
  job->live_index = -1;
  free (job->collected);
  job->collected = NULL;
  job->n_collected = job->cap_collected = 0;
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
