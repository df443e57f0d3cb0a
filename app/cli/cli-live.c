/* pipescope-cli live commands: schedule --serve (a simulated job serving its
 * trace live), jobs (the running jobs) and record (attach to one and keep
 * what it streams in a trace file). */
#include "pipescope-cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pp-live.h"
#include "pp-probe.h"
#include "pp-registry.h"
#include "pp-trace-sink.h"

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

#define stop_signal pp_cli_stopping ()
#define now_ns pp_cli_now_ns

/* Sleeps until CLOCK_MONOTONIC reaches t (ns) or a stop signal arrives;
 * returns false in the latter case. */
static bool
sleep_until (int64_t t)
{
  /* Already due (most spans of a fast replay): no syscall.  clock_gettime
   * is a vDSO call, clock_nanosleep a real one (tens of µs each, which
   * capped schedule --serve near 60,000 spans/s whatever its --speed). */
  if (now_ns () >= t)
    return !stop_signal;
  while (!stop_signal)
    {
      /* 50 ms at most at a time: the signal may land on a thread we did
       * not start and could not mask (OpenBLAS starts its pool when it is
       * loaded), and then it does not cut this sleep short. */
      int64_t until = now_ns () + 50 * 1000000LL;
      if (until > t)
        until = t;
      struct timespec ts = { .tv_sec = (time_t) (until / 1000000000),
                             .tv_nsec = (long) (until % 1000000000) };
      int rc = clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
      if ((rc != 0 && rc != EINTR) || now_ns () >= t)
        return !stop_signal;
    }
  return false;
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
  PpError err = { 0 };
  PpLiveConfig cfg;

  memset (job, 0, sizeof *job);
  snprintf (job->name, sizeof job->name, "%s-%ld", schedule, (long) getpid ());
  if (live)
    {
      memset (&cfg, 0, sizeof cfg);
      cfg.name = job->name;
      cfg.schedule = schedule;
      cfg.cmdline = cmdline;
      cfg.listen = listen;
      job->server = pp_live_server_new (&cfg, &err);
      if (job->server == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot serve");
          return 1;
        }
      job->what[job->n] = "live stream";
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
  for (int i = 0; i < 2; i++)
    if (job->w[i])
      {
        pp_trace_writer_close (job->w[i], NULL);
        job->w[i] = NULL;
      }
  job->n = 0;
  pp_live_server_free (job->server);
  job->server = NULL;
}

/* ---- schedule --serve ----------------------------------------------------------- */

typedef struct {
  double start, end;          /* time units, from the step's start */
  int    rank, stage, microbatch, kind;
} ReplayAction;

static int
cmp_replay (const void *a, const void *b)
{
  const ReplayAction *x = a, *y = b;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* t time units in ns on the replay's clock (ns_per_unit = 1 ms / speed). */
static int64_t
units_ns (double t, double ns_per_unit)
{
  return (int64_t) llround (t * ns_per_unit);
}

typedef struct {
  const PpSchedule   *s;
  const PpSimulation *sim;
  int                 step;
  PpTraceStepPhase    phase;
  int64_t             base;
  double              ns_per_unit;
} Markers;

/* Every rank's step marker of one phase, into one writer.  Only called while
 * the probe's drain has nothing to deliver (right after pp_probe_flush,
 * before the next record), so the drain thread never touches a writer at the
 * same time. */
static PpStatus
write_markers (PpTraceWriter *w, void *user, PpError *err)
{
  const Markers *m = user;
  for (int r = 0; r < m->s->ranks; r++)
    {
      int n = m->s->rank[r].n_actions;
      double t = n == 0 ? 0 : m->phase == PP_TRACE_STEP_BEGIN ? m->sim->timeline[r][0].start
                                                              : m->sim->timeline[r][n - 1].end;
      if (pp_trace_write_step_marker (w, r, m->step, m->phase, m->base + units_ns (t, m->ns_per_unit), err) != PP_OK)
        return err->status;
    }
  return PP_OK;
}

typedef struct {
  const PpTraceDescription *desc;
  const PpSchedule         *s;
  const PpSimulation       *sim;
  double                    ns_per_unit;
} SimHeader;

/* The description and the plan, one unit = h->ns_per_unit ns (the replay's
 * clock, so the plan lines up with the spans at any --speed). */
static PpStatus
write_sim_header (PpTraceWriter *w, void *user, PpError *err)
{
  const SimHeader *h = user;
  if (h->ns_per_unit == PP_CLI_TRACE_NS_PER_UNIT)
    return pp_cli_write_sim_header (w, h->desc, h->s, h->sim, err);
  PpStatus st = pp_trace_write_description (w, h->desc, err);
  if (st == PP_OK)
    st = pp_cli_write_plan (w, h->s, h->sim, h->ns_per_unit * 1e-9, err);
  return st;
}

int
pp_cli_serve (const PpSchedule *s, const PpSimulation *sim, const char *listen,
              int steps, double speed, const char *trace, int argc, char **argv)
{
  const double ns_per_unit = PP_CLI_TRACE_NS_PER_UNIT / (speed > 0 ? speed : 1.0);
  PpError err = { 0 };
  PpTraceDescription desc;
  PpCliJob job;
  ReplayAction *acts = NULL;
  size_t n_acts = 0;
  int status = 1;
  int64_t base, step_ns;

  memset (&job, 0, sizeof job);
  /* The probe's drain thread and the server's thread inherit this mask, so
   * a Ctrl-C lands on the main thread and cuts its sleep short (or on a
   * thread OpenBLAS started before main; sleep_until wakes every 50 ms). */
  pp_cli_catch_stop_signals ();
  pp_cli_mask_stop_signals (SIG_BLOCK);

  acts = calloc ((size_t) pp_schedule_total_actions (s) + 1, sizeof *acts);
  if (acts == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        int sk = pp_cli_span_kind_of_action (a->kind);
        if (sk < 0)
          continue;
        acts[n_acts].start = sim->timeline[r][k].start;
        acts[n_acts].end = sim->timeline[r][k].end;
        acts[n_acts].rank = r;
        acts[n_acts].stage = a->stage;
        acts[n_acts].microbatch = a->microbatch;
        acts[n_acts].kind = sk;
        n_acts++;
      }
  qsort (acts, n_acts, sizeof *acts, cmp_replay);

  pp_cli_sim_description (&desc, s, argc, argv);
  if (pp_cli_job_open (&job, s->name, desc.cmdline, true, listen, trace) != 0)
    goto out;
  {
    SimHeader h = { &desc, s, sim, ns_per_unit };
    if (pp_cli_job_write (&job, write_sim_header, &h) != 0)
      goto out;
  }
  if (pp_cli_job_start_probe (&job, NULL) != 0)
    goto out;
  pp_cli_job_announce (&job, listen);

  pp_cli_mask_stop_signals (SIG_UNBLOCK);

  step_ns = units_ns (sim->makespan, ns_per_unit);
  if (step_ns <= 0)
    step_ns = 1;
  base = desc.start_monotonic_ns;
  for (int step = 0; (steps == 0 || step < steps) && !stop_signal; step++)
    {
      bool whole = true;
      Markers m = { s, sim, step, PP_TRACE_STEP_BEGIN, base, ns_per_unit };

      if (pp_cli_job_write (&job, write_markers, &m) != 0)
        goto out;
      for (size_t i = 0; i < n_acts; i++)
        {
          const ReplayAction *a = &acts[i];
          PpSpan sp;

          if (!sleep_until (base + units_ns (a->end, ns_per_unit)))
            {
              whole = false;
              break;
            }
          memset (&sp, 0, sizeof sp);
          sp.start_ns = base + units_ns (a->start, ns_per_unit);
          sp.end_ns = base + units_ns (a->end, ns_per_unit);
          sp.rank = a->rank;
          sp.stage = a->stage;
          sp.microbatch = a->microbatch;
          sp.step = step;
          sp.kind = (uint16_t) a->kind;
          sp.device = 0xffff;
          sp.peer_rank = -1;
          pp_probe_record_span (job.probe, &sp);
        }
      if (pp_probe_flush (job.probe, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          goto out;
        }
      if (!whole)
        break;
      m.phase = PP_TRACE_STEP_END;
      if (pp_cli_job_write (&job, write_markers, &m) != 0)
        goto out;
      /* The next step starts when this one's plan ends, or now if the
       * flush made us late. */
      base += step_ns;
      if (base < now_ns ())
        base = now_ns ();
      if (!sleep_until (base))
        break;
    }

  status = pp_cli_job_close (&job);

out:
  pp_cli_job_abort (&job);
  free (acts);
  pp_cli_mask_stop_signals (SIG_UNBLOCK);
  return status;
}

/* ---- jobs ---------------------------------------------------------------------- */

static void
jobs_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli jobs\n"
         "\n"
         "Lists the pipescope jobs running on this machine for this user, one line\n"
         "each: PID, name, schedule, when it started (local time) and where to\n"
         "attach ('pipescope-cli record PID|NAME').\n", out);
}

int
pp_cli_jobs (int argc, char **argv)
{
  static const struct option options[] = {
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  PpError err = { 0 };
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  int opt, wname = 4, wsched = 8;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":h", options, NULL)) != -1)
    {
      if (opt == 'h')
        {
          jobs_usage (stdout);
          return 0;
        }
      return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli jobs --help'", argv[optind - 1]);
    }
  if (optind < argc)
    return pp_cli_usage_error ("unexpected argument '%s'; see 'pipescope-cli jobs --help'", argv[optind]);

  if (pp_registry_list (&jobs, &n, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return 1;
    }
  if (n == 0)
    printf ("no running pipescope jobs\n");
  for (size_t i = 0; i < n; i++)
    {
      int a = (int) strlen (jobs[i].name), b = (int) strlen (jobs[i].schedule);
      if (a > wname) wname = a;
      if (b > wsched) wsched = b;
    }
  for (size_t i = 0; i < n; i++)
    {
      const PpJobInfo *j = &jobs[i];
      time_t secs = (time_t) (j->start_unix_ns / 1000000000);
      struct tm tm;
      char when[32] = "unknown";

      if (j->start_unix_ns > 0 && localtime_r (&secs, &tm) != NULL)
        strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
      printf ("%-7ld  %-*s  %-*s  %s  %s", (long) j->pid, wname, j->name, wsched,
              j->schedule[0] ? j->schedule : "-", when, j->endpoint);
      if (j->tcp[0])
        printf (" tcp:%s", j->tcp);
      putchar ('\n');
    }
  free (jobs);
  return fflush (stdout) == 0 ? 0 : 1;
}

/* ---- record ---------------------------------------------------------------------- */

static void
record_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli record JOB -o FILE [--duration S] [--token T]\n"
         "\n"
         "Attaches to a running job and writes what it streams to FILE as a trace:\n"
         "the run's description and plan, everything recorded so far, then live\n"
         "events as they come (FILE is written as it goes, so it is readable at any\n"
         "moment).  Stops after --duration, on Ctrl-C, or when the job ends (an\n"
         "error: the file keeps everything received).\n"
         "\n"
         "  JOB                   a pid or a job name from 'pipescope-cli jobs', a\n"
         "                        socket path, or HOST:PORT of a job serving on TCP\n"
         "  -o, --output FILE     trace file to write\n"
         "  -d, --duration S      stop after S seconds (default: until Ctrl-C)\n"
         "  -t, --token T         the job's token (HOST:PORT only)\n", out);
}

/* HOST:PORT rather than a pid, a name or a socket path (the rule
 * pp_live_client_connect applies). */
static bool
is_tcp_spec (const char *job)
{
  return strchr (job, ':') != NULL && strchr (job, '/') == NULL;
}

/* The output file is created when the first item arrives, so a refused
 * attach leaves none. */
static PpStatus
ensure_writer (PpTraceWriter **w, const char *path, PpError *err)
{
  if (*w == NULL)
    *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, err);
  return *w ? PP_OK : err->status != PP_OK ? err->status : PP_EIO;
}

/* Closes *w (creating it first if nothing arrived: a valid empty trace). */
static PpStatus
finish_writer (PpTraceWriter **w, const char *path, PpError *err)
{
  PpTraceWriter *tmp;
  if (ensure_writer (w, path, err) != PP_OK)
    return err->status;
  tmp = *w;
  *w = NULL;
  return pp_trace_writer_close (tmp, err);
}

int
pp_cli_record (int argc, char **argv)
{
  static const struct option options[] = {
    { "output", required_argument, NULL, 'o' },
    { "duration", required_argument, NULL, 'd' },
    { "token", required_argument, NULL, 't' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *job, *path = NULL, *token = NULL;
  double duration = -1;
  int opt, status = 1;
  PpError err = { 0 };
  PpLiveClient *c = NULL;
  PpTraceWriter *w = NULL;
  uint64_t n_events = 0;
  int64_t deadline = INT64_MAX, last_flush;
  bool dirty = false;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":o:d:t:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'o': path = optarg; break;
        case 't': token = optarg; break;
        case 'd':
          {
            char *end;
            errno = 0;
            duration = strtod (optarg, &end);
            if (end == optarg || *end != '\0' || errno != 0 || !(duration > 0) || duration > 1e9)
              return pp_cli_usage_error ("--duration takes a number of seconds above 0 (got '%s')", optarg);
          }
          break;
        case 'h':
          record_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli record --help'",
                                     argv[optind - 1]);
        }
    }
  if (optind >= argc)
    return pp_cli_usage_error ("record needs a JOB (see 'pipescope-cli jobs'); see 'pipescope-cli record --help'");
  if (optind + 1 < argc)
    return pp_cli_usage_error ("unexpected argument '%s'", argv[optind + 1]);
  job = argv[optind];
  if (path == NULL)
    return pp_cli_usage_error ("record needs -o FILE");
  if (is_tcp_spec (job) && token == NULL)
    return pp_cli_usage_error ("attaching to %s over TCP needs --token (printed by the job when it started)", job);

  pp_cli_catch_stop_signals ();

  c = pp_live_client_connect (job, token, &err);
  if (c == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : "cannot attach");
      return 1;
    }
  last_flush = now_ns ();
  if (duration > 0)
    deadline = last_flush + (int64_t) (duration * 1e9);

  for (;;)
    {
      PpTraceItem item;
      int64_t now = now_ns ();
      int timeout_ms = 100;

      if (stop_signal || now >= deadline)
        break;
      if (deadline - now < 100 * 1000000LL)
        timeout_ms = (int) ((deadline - now + 999999) / 1000000);
      if (pp_live_client_next (c, &item, timeout_ms, &err) != PP_OK)
        {
          if (stop_signal)
            break;
          if (w != NULL)
            {
              pp_trace_writer_close (w, NULL);
              w = NULL;
              fprintf (stderr, "pipescope-cli: error: %s; kept %" PRIu64 " events in %s\n",
                       err.msg, n_events, path);
            }
          else
            fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          goto out;
        }
      if (item.type == PP_TRACE_ITEM_END)
        {
          if (item.need_more)
            {
              if (dirty && w != NULL)
                {
                  if (pp_trace_writer_flush (w, &err) != PP_OK)
                    goto write_fail;
                  dirty = false;
                  last_flush = now_ns ();
                }
              continue;
            }
          /* The job ended (or went away) while we recorded. */
          if (finish_writer (&w, path, &err) != PP_OK)
            goto write_fail;
          fprintf (stderr, "pipescope-cli: error: job %s ended while recording; kept %" PRIu64
                   " events in %s\n", job, n_events, path);
          goto out;
        }
      if (ensure_writer (&w, path, &err) != PP_OK || pp_trace_write_item (w, &item, &err) != PP_OK)
        goto write_fail;
      if (item.type == PP_TRACE_ITEM_SPAN || item.type == PP_TRACE_ITEM_COUNTER)
        n_events++;
      dirty = true;
      if (now_ns () - last_flush >= 100 * 1000000LL)
        {
          if (pp_trace_writer_flush (w, &err) != PP_OK)
            goto write_fail;
          dirty = false;
          last_flush = now_ns ();
        }
    }

  if (finish_writer (&w, path, &err) != PP_OK)
    goto write_fail;
  printf ("recorded %" PRIu64 " events from %s in %s\n", n_events, job, path);
  status = fflush (stdout) == 0 ? 0 : 1;
  goto out;

write_fail:
  fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : "cannot write trace");
out:
  if (w)
    pp_trace_writer_close (w, NULL);
  pp_live_client_free (c);
  return status;
}
