/* pipescope-cli live viewers: jobs (the running jobs) and record (attach to
 * one and keep what it streams in a trace file). */
#include "cli-commands.h"

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

#include "cli-common.h"
#include "cli-job.h"
#include "pp-live.h"
#include "pp-probe.h"
#include "pp-registry.h"
#include "pp-stuck.h"
#include "pp-trace-sink.h"


#define stop_signal pp_cli_stopping ()
#define now_ns pp_cli_now_ns

/* ---- jobs ---------------------------------------------------------------------- */

static void
jobs_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli jobs\n"
         "\n"
         "Lists the pipescope jobs running on this machine for this user, one line\n"
         "each: PID, name, schedule, when it started (local time) and where to\n"
         "attach ('pipescope-cli record PID|NAME').  A job of several processes\n"
         "(mpirun) is one line: its rank 0's pid and name, whose stream carries\n"
         "every rank, and the ranks seen here of the job's, with their hosts; the\n"
         "pid of any of its ranks attaches to the job, NAME.rR to rank R alone.\n"
         "A job under 'profile' on which no action has ended for 10 median steps\n"
         "and at least 30 s is marked STUCK, with the process everyone waits for\n"
         "(its root) or the processes of its deadlock (docs/stuck.md).\n", out);
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
  /* the columns named once, above the jobs (none: the line above says so);
   * ranks and hosts only where a job of several processes has them */
  bool mesh = false;
  for (size_t i = 0; i < n; i++)
    mesh |= jobs[i].job[0] != '\0';
  if (n > 0)
    printf ("%-7s  %-*s  %-*s  %-19s  %s\n", "PID", wname, "NAME", wsched, "SCHEDULE", "STARTED",
            mesh ? "ENDPOINT (RANKS, HOSTS)" : "ENDPOINT");
  for (size_t i = 0; i < n; i++)
    {
      const PpJobInfo *j = &jobs[i];
      time_t secs = (time_t) (j->start_unix_ns / 1000000000);
      struct tm tm;
      char when[32] = "unknown";
      bool first = true;

      if (j->job[0])
        {
          /* one line a job: at its rank 0 (or the first rank seen here) */
          size_t lead = i;
          for (size_t k = 0; k < n; k++)
            if (strcmp (jobs[k].job, j->job) == 0
                && (jobs[k].rank < jobs[lead].rank || (jobs[k].rank == jobs[lead].rank && k < lead)))
              lead = k;
          first = lead == i;
        }
      if (!first)
        continue;
      if (j->start_unix_ns > 0 && localtime_r (&secs, &tm) != NULL)
        strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
      printf ("%-7ld  %-*s  %-*s  %s  %s", (long) j->pid, wname, j->job[0] ? j->job : j->name, wsched,
              j->schedule[0] ? j->schedule : "-", when, j->endpoint);
      if (j->tcp[0])
        printf (" tcp:%s", j->tcp);
      if (j->job[0])
        {
          int seen = 0, procs = 0, expected = j->n_ranks;
          char hosts[256] = "";
          size_t len = 0;
          for (size_t k = 0; k < n; k++)
            if (strcmp (jobs[k].job, j->job) == 0)
              {
                /* a collector (profile) is the job's entry, not a rank */
                if (jobs[k].n_ranks == 0 && strcmp (jobs[k].name, j->job) == 0)
                  continue;
                if (jobs[k].n_ranks > expected)
                  expected = jobs[k].n_ranks;
                bool known = false, rank_known = false;
                procs++;
                /* a rank's replicas (processes placed on a mesh) are one rank */
                for (size_t q = 0; q < k && !rank_known; q++)
                  rank_known = strcmp (jobs[q].job, j->job) == 0 && jobs[q].rank == jobs[k].rank
                               && !(jobs[q].n_ranks == 0 && strcmp (jobs[q].name, j->job) == 0);
                seen += !rank_known;
                for (size_t q = 0; q < k; q++)
                  known |= strcmp (jobs[q].job, j->job) == 0 && strcmp (jobs[q].host, jobs[k].host) == 0
                           && !(jobs[q].n_ranks == 0 && strcmp (jobs[q].name, j->job) == 0);
                if (!known && len < sizeof hosts)
                  len += (size_t) snprintf (hosts + len, sizeof hosts - len, "%s%s", len ? "," : "",
                                            jobs[k].host);
              }
          printf ("  ranks %d/%d", seen, expected);
          if (procs > seen)
            printf (" (%d processes)", procs);
          printf (" here on %s%s", hosts[0] ? hosts : "-", j->rank == 0 ? "" : " (rank 0 is elsewhere)");
        }
      putchar ('\n');
      /* issue 37: a job its collector found stuck (docs/stuck.md) */
      for (size_t k = 0; k < n; k++)
        if ((k == i || (j->job[0] && strcmp (jobs[k].job, j->job) == 0)) && jobs[k].stuck[0])
          {
            printf ("         STUCK: %s\n", jobs[k].stuck);
            break;
          }
    }
  free (jobs);
  return fflush (stdout) == 0 ? 0 : 1;
}

/* ---- record ---------------------------------------------------------------------- */

static void
record_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli record JOB -o FILE [--duration S] [--token-file FILE]\n"
         "\n"
         "Attaches to a running job and writes what it streams to FILE as a trace:\n"
         "the run's description and plan, everything recorded so far, then live\n"
         "events as they come (FILE is written as it goes, so it is readable at any\n"
         "moment).  Stops after --duration, on Ctrl-C, or when the job ends (exit\n"
         "0).  A job that dies or a connection that is lost exits 1; the file\n"
         "keeps everything received.  When no action has ended on any process\n"
         "for 10 median steps and at least 30 s, it says where the job is stuck\n"
         "(docs/stuck.md) and goes on.\n"
         "\n"
         "  JOB                   a pid or a job name from 'pipescope-cli jobs', a\n"
         "                        socket path, or HOST:PORT of a job serving on TCP\n"
         "  -o, --output FILE     trace file to write\n"
         "  -d, --duration S      stop after S seconds (default: until Ctrl-C)\n"
         "      --token-file FILE the job's token (HOST:PORT only), the first line of\n"
         "                        FILE; FILE must be yours and not readable by group\n"
         "                        or others (chmod 600)\n"
         "  -t, --token T         the same on the command line, where other local\n"
         "                        users can read it (/proc/PID/cmdline): prefer\n"
         "                        --token-file, or PIPESCOPE_TOKEN\n"
         "\n"
         "Environment:\n"
         "  PIPESCOPE_TOKEN       the token when neither --token-file nor --token is given\n", out);
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
    { "token-file", required_argument, NULL, 'T' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *job, *path = NULL, *token = NULL, *token_file = NULL;
  char token_buf[256];
  double duration = -1;
  int opt, status = 1;
  PpJobInfo info;
  bool known = false;
  PpError err = { 0 };
  PpLiveClient *c = NULL;
  PpTraceWriter *w = NULL;
  uint64_t n_events = 0;
  int64_t deadline = INT64_MAX, last_flush;
  bool dirty = false;
  PpStuckWatch watch = { 0 };
  PpStuckVerdict said = { 0 };

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":o:d:t:T:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'o': path = optarg; break;
        case 't': token = optarg; break;
        case 'T': token_file = optarg; break;
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
  /* The token: from a private file, else the environment, else (warned)
   * the command line, which every local user can read. */
  if (token != NULL && token_file != NULL)
    return pp_cli_usage_error ("give the token once: --token-file or --token, not both");
  if (token_file != NULL)
    {
      if (pp_live_token_from_file (token_file, token_buf, sizeof token_buf, &err) != PP_OK)
        return pp_cli_usage_error ("%s", err.msg);
      token = token_buf;
    }
  else if (token != NULL)
    fprintf (stderr, "pipescope-cli: warning: --token on the command line can be read by other local "
             "users (/proc/%ld/cmdline); use --token-file FILE or PIPESCOPE_TOKEN\n", (long) getpid ());
  else if (getenv ("PIPESCOPE_TOKEN") != NULL && getenv ("PIPESCOPE_TOKEN")[0] != '\0')
    token = getenv ("PIPESCOPE_TOKEN");
  if (token != NULL && is_tcp_spec (job) && pp_live_token_check (token, &err) != PP_OK)
    return pp_cli_usage_error ("%s", err.msg);
  if (is_tcp_spec (job) && token == NULL)
    return pp_cli_usage_error ("attaching to %s over TCP needs its token (printed by the job when it "
                               "started): --token-file FILE or PIPESCOPE_TOKEN", job);

  pp_cli_catch_stop_signals ();

  /* which process it is, to tell at the end whether it ended or died */
  known = !is_tcp_spec (job) && pp_registry_find (job, &info, NULL) == PP_OK;
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
          /* The stream ended: the job ended (a normal end: exit 0), or it
           * died, or the connection went (exit 1: what was kept is kept). */
          if (finish_writer (&w, path, &err) != PP_OK)
            goto write_fail;
          int how = known ? pp_registry_job_ended (&info, 2000) : -1;
          if (how == 0)
            fprintf (stderr, "pipescope-cli: error: job %s died without ending its stream (killed?); "
                     "kept %" PRIu64 " events in %s\n", job, n_events, path);
          else if (how < 0 && known)
            fprintf (stderr, "pipescope-cli: error: connection to job %s lost; kept %" PRIu64
                     " events in %s\n", job, n_events, path);
          else
            {
              printf ("job %s %s; recorded %" PRIu64 " events in %s\n", job,
                      how == 1 ? "ended" : "closed its stream", n_events, path);
              status = fflush (stdout) == 0 ? 0 : 1;
            }
          goto out;
        }
      if (ensure_writer (&w, path, &err) != PP_OK || pp_trace_write_item (w, &item, &err) != PP_OK)
        goto write_fail;
      if (item.type == PP_TRACE_ITEM_SPAN || item.type == PP_TRACE_ITEM_COUNTER)
        n_events++;
      /* issue 37: where the job is stuck, said once a verdict, when no
       * action has ended for as long as runtime/pp-stuck.c's rule says
       * (10 median steps, at least 30 s: docs/stuck.md) */
      pp_stuck_watch_take (&watch, &item, now_ns ());
      PpStuckVerdict verdict;
      char stuck[4096];
      double after = pp_stuck_watch_after_s (&watch);
      if (pp_stuck_watch_diagnose (&watch, after, now_ns (), &verdict, stuck, sizeof stuck) != PP_STUCK_NONE
          && (verdict.kind != said.kind || verdict.n != said.n
              || memcmp (verdict.who, said.who, (size_t) verdict.n * sizeof *verdict.who) != 0))
        {
          fprintf (stderr, "pipescope-cli: record: no action ended on any process for %.0f s\n%s",
                   after, stuck);
          said = verdict;
        }
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
  pp_stuck_watch_clear (&watch);
  return status;
}
