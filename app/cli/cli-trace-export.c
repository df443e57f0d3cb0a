/* cli-trace-export.c — pipescope-cli export: its options, what it keeps
 * (--steps, --ranks, --replicas), its clock, and the file it writes. */
#include "cli-commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-clock.h"
#include "cli-common.h"
#include "cli-output.h"
#include "cli-trace-private.h"

/* What the JSON could not hold as the trace has it, said (json_string). */
static void
say_replaced (const char *path)
{
  size_t n = json_strings_replaced ();
  if (n > 0)
    fprintf (stderr, "pipescope-cli: note: %s: %zu string%s (hosts, model, command, names) hold bytes that are "
             "not UTF-8, which JSON cannot: written with U+FFFD in their place\n", path, n, n == 1 ? "" : "s");
}

static void
export_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli export FILE [--format chrome|csv|why] -o OUT\n"
         "                            [--steps LIST] [--ranks LIST] [--replicas LIST]\n"
         "                            [--clock run|realtime]\n"
         "\n"
         "Converts a trace.\n"
         "\n"
         "  -f, --format FORMAT   chrome (Chrome trace JSON for chrome://tracing and\n"
         "                        Perfetto, default: blocks, transfers, dependencies,\n"
         "                        counters, each rank's steps and its plan), csv (one\n"
         "                        line per span) or why\n"
         "                        (JSON: each rank's idle split into schedule, imbalance,\n"
         "                        transfers and runtime, the critical path, the measured\n"
         "                        costs and what to change; seconds)\n"
         "  -o, --output OUT      file to write (written beside it, renamed over it when\n"
         "                        whole; not FILE itself); -: standard output\n"
         "      --steps LIST      chrome and csv: only these steps (LIST: numbers and\n"
         "                        ranges, such as 2, 2-4 or 0,3,5-7)\n"
         "      --ranks LIST      chrome and csv: only these pipeline ranks\n"
         "      --replicas LIST   chrome and csv: only these replicas (dp); with the\n"
         "                        three, a 2,048-process job exports one step of a few\n"
         "                        processes, not all of it\n"
         "      --clock CLOCK     run (default): times from the run's start (the\n"
         "                        app's zero, or the first record of a process that\n"
         "                        began before it), never negative;\n"
         "                        realtime: the job's own wall clock (chrome: µs, csv:\n"
         "                        ns since the Unix epoch) and chrome's tracks named\n"
         "                        by the processes' real pids, to open beside a Kineto\n"
         "                        or nsys trace of the same run in Perfetto\n"
         "\n"
         "chrome and csv count time from the run's start (--clock).\n"
         "A trace of a job whose ranks run in several processes (data-parallel\n"
         "replicas: trace format 1.4) keeps every process's spans: csv's columns\n"
         "process (the global rank), dp and tp say whose (empty where the trace does\n"
         "not say), and chrome has a track per process named by its place (its steps,\n"
         "losses and transfers within its replica) and the plan once per pipeline rank;\n"
         "why is each replica's pipeline analysed on its own, per rank the median replica.\n", out);
}

/* --clock realtime's track numbers (t->out_pids, pp_cli_clock_real_pids):
 * each process's track its real pid (a rank's, from its RANK frame, in a
 * trace without places).  Returns the processes whose pid another host's
 * shares, -1 when out of memory. */
static int
real_pids (Trace *t, int n_ranks)
{
  size_t n = t->rank_pid != NULL ? (size_t) PLAN_PID_BASE + (size_t) n_ranks : (size_t) n_ranks;
  int32_t *real = malloc ((n + 1) * sizeof *real);
  if (real == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    real[i] = -1;
  if (t->rank_pid != NULL)
    for (size_t i = 0; i < t->n_procs; i++)
      real[t->procs[i].process] = t->procs[i].pid;
  else
    for (size_t i = 0; i < t->n_rank_items; i++)
      {
        const PpTraceItem *it = &t->rank_items[i];
        if (it->type == PP_TRACE_ITEM_RANK && it->rank_info.rank >= 0 && (size_t) it->rank_info.rank < n)
          real[it->rank_info.rank] = it->rank_info.pid;
      }
  int shared = pp_cli_clock_real_pids (real, n);
  if (shared < 0)
    {
      free (real);
      return -1;
    }
  t->out_pids = real;
  t->n_out_pids = n;
  return shared;
}

/* Span i's step, pipeline rank and replica (dp), for pp_cli_selection_check. */
static void
span_coords (const void *trace, size_t i, int32_t v[3])
{
  const Trace *t = trace;
  v[0] = t->spans[i].step;
  v[1] = t->spans[i].rank;
  v[2] = process_dp (t, t->span_process != NULL ? t->span_process[i] : -1);
}

/* export, its lists in *keep (the caller frees them) */
static int
export_command (int argc, char **argv, PpCliSelection *keep)
{
  static const struct option options[] = {
    { "format", required_argument, NULL, 'f' },
    { "output", required_argument, NULL, 'o' },
    { "steps", required_argument, NULL, 'S' },
    { "ranks", required_argument, NULL, 'R' },
    { "replicas", required_argument, NULL, 'D' },
    { "clock", required_argument, NULL, 'C' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *path, *out = NULL;
  int format = 0;   /* chrome, csv, why */
  PpCliClock clock = PP_CLI_CLOCK_RUN;
  int rc_opt;
  int opt, status = 1;
  Trace t;
  PpCliOutput o = { .fd = -1 };
  FILE *f = NULL;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":f:o:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'f':
          if (strcmp (optarg, "chrome") == 0) format = 0;
          else if (strcmp (optarg, "csv") == 0) format = 1;
          else if (strcmp (optarg, "why") == 0) format = 2;
          else
            return pp_cli_usage_error ("unknown format '%s'; use chrome, csv or why", optarg);
          break;
        case 'o': out = optarg; break;
        case 'S': case 'R': case 'D':
          if ((rc_opt = pp_cli_list_parse (opt == 'S' ? "--steps" : opt == 'R' ? "--ranks" : "--replicas", optarg,
                                           opt == 'S' ? &keep->steps : opt == 'R' ? &keep->ranks : &keep->replicas))
              != 0)
            return rc_opt;
          break;
        case 'C':
          if ((rc_opt = pp_cli_clock_parse (optarg, &clock)) != 0)
            return rc_opt;
          break;
        case 'h':
          export_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli export --help'",
                                     argv[optind - 1]);
        }
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "export", &path)) != 0)
    return rc_args;
  if (out == NULL)
    return pp_cli_usage_error ("export needs -o OUT");
  /* renaming the export over its own trace would lose the trace */
  if (strcmp (out, "-") != 0 && pp_cli_find_same_file (out, &path, 1) >= 0)
    return pp_cli_usage_error ("-o %s is the trace to export; write the export elsewhere", out);
  {
    /* -o - into the trace itself (export X -o - >> X) */
    struct stat so, si;
    if (strcmp (out, "-") == 0 && fstat (STDOUT_FILENO, &so) == 0 && stat (path, &si) == 0
        && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
      return pp_cli_usage_error ("standard output is the trace to export (%s); write the export "
                                 "elsewhere", path);
  }
  /* why is the whole run's analysis, in durations */
  if (format == 2 && pp_cli_selection_given (keep))
    return pp_cli_usage_error ("--steps, --ranks and --replicas choose what chrome and csv write; why "
                               "analyses the whole trace");
  if (format == 2 && clock != PP_CLI_CLOCK_RUN)
    return pp_cli_usage_error ("--clock is for chrome and csv; why holds durations, no times");
  /* times from the app's zero (why's are the steps' own) */
  AppView av = { 0 };
  if ((format != 2 && app_view_read (path, format == 0, &av) != 0) || trace_load (path, &t) != 0)
    {
      app_view_clear (&av);
      return 1;
    }
  PpWhyReport *why = NULL;
  PpWhyChange why_ch;
  PpSchedule *why_s = NULL;
  int64_t base = 0;
  if (format != 2)
    {
      char msg[256];
      if (pp_cli_selection_given (keep)
          && (status = pp_cli_selection_check (keep, t.n_all_spans, span_coords, &t)) != 0)
        goto done;
      status = 1;
      t.keep = pp_cli_selection_given (keep) ? keep : NULL;
      if (!pp_cli_clock_base (clock, t.has_desc ? &t.desc : NULL, run_start (&t, &av), &base, msg, sizeof msg))
        {
          fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, msg);
          goto done;
        }
      /* what the format cannot hold is said, not dropped in silence */
      size_t bad_spans, bad_markers, bad_counters;
      if (times_unrepresentable (&t, &bad_spans, &bad_markers, &bad_counters) > 0)
        {
          char what[160];
          size_t l = 0;
          const size_t n[3] = { bad_spans, bad_markers, bad_counters };
          static const char *const one[3] = { "span", "step marker", "counter" };
          what[0] = '\0';
          for (int k = 0; k < 3; k++)
            if (n[k] > 0 && l < sizeof what)
              l += (size_t) snprintf (what + l, sizeof what - l, "%s%zu %s%s", l ? ", " : "", n[k], one[k],
                                      n[k] == 1 ? "" : "s");
          fprintf (stderr, "pipescope-cli: note: %s: %s at or past +-2^61 ns, the times pipescope draws: "
                   "written at that limit, and left out of the run's zero\n", path, what);
        }
      int shared = clock == PP_CLI_CLOCK_REALTIME && format == 0 ? real_pids (&t, n_ranks_of (&t)) : 0;
      if (shared < 0)
        {
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          goto done;
        }
      if (shared > 0)
        fprintf (stderr, "pipescope-cli: note: %d tracks share a pid (ranks run as threads of one process, "
                 "or processes on different hosts); they keep pipescope's numbers, from %d\n", shared,
                 PP_CLI_CLOCK_SYNTHETIC_PID);
    }
  if (format == 2)
    {
      PpError e = { 0 };
      if (!t.has_desc)
        snprintf (e.msg, sizeof e.msg, "it has no description: its schedule is unknown");
      if (!t.has_desc || analyse_why (&t, &why, &why_ch, &why_s, &e) != PP_OK)
        {
          char msg[1024];   /* it may quote the trace's schedule name */
          fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, pp_cli_text (e.msg, msg, sizeof msg));
          goto done;
        }
    }

  if (strcmp (out, "-") == 0)
    {
      /* -o -: standard output, for a pipe (jq, a file of the caller's) */
      int wrc = 0;
      if (format == 2)
        wrc = write_why_json (stdout, &t, why_s, why, &why_ch);
      else
        wrc = format == 0 ? write_chrome (stdout, &t, &av, base, clock == PP_CLI_CLOCK_RUN)
              : write_csv (stdout, &t, base);
      say_replaced (path);
      if (wrc != 0)
        fprintf (stderr, "pipescope-cli: error: out of memory\n");
      else if (ferror (stdout) | (fflush (stdout) != 0))
        fprintf (stderr, "pipescope-cli: error: cannot write to standard output: %s\n", strerror (errno));
      else
        status = 0;
      goto done;
    }
  int e = pp_cli_output_open (&o, out, 0644), fd = -1;
  if (e == 0 && ((fd = dup (o.fd)) < 0 || (f = fdopen (fd, "w")) == NULL))
    e = errno;
  if (e != 0)
    {
      if (fd >= 0)
        close (fd);
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s\n", out, pp_cli_output_strerror (e));
      goto done;
    }
  if ((format == 2 ? write_why_json (f, &t, why_s, why, &why_ch)
       : format == 0 ? write_chrome (f, &t, &av, base, clock == PP_CLI_CLOCK_RUN) : write_csv (f, &t, base)) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto done;
    }
  say_replaced (path);
  e = ferror (f) ? (errno ? errno : EIO) : 0;
  if (fclose (f) != 0 && e == 0)
    e = errno;
  f = NULL;
  if (e == 0)
    e = pp_cli_output_commit (&o);
  if (e != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s%s\n", out, strerror (e),
               pp_cli_no_room (e) ? " (the disk is full); nothing written" : "");
      goto done;
    }
  status = 0;
done:
  if (f != NULL)
    fclose (f);
  pp_cli_output_discard (&o);   /* nothing of a failed export left behind */
  app_view_clear (&av);
  pp_why_report_free (why);
  pp_schedule_free (why_s);
  trace_clear (&t);
  return status;
}

int
pp_cli_export (int argc, char **argv)
{
  PpCliSelection keep = { 0 };
  int rc = export_command (argc, argv, &keep);
  pp_cli_selection_clear (&keep);
  return rc;
}
