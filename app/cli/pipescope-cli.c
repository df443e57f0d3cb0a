/* pipescope-cli — everything headless, one binary with subcommands (as nsys). */
#include "pipescope-cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <getopt.h>

#include "pp-schedule.h"

#ifndef PIPESCOPE_VERSION
#define PIPESCOPE_VERSION "0.1.0"
#endif


int
pp_cli_usage_error (const char *fmt, ...)
{
  va_list ap;
  fputs ("pipescope-cli: error: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  return 2;
}

int
pp_cli_one_trace_file (int argc, char **argv, const char *command, const char **path)
{
  if (optind >= argc)
    return pp_cli_usage_error ("%s needs a trace FILE; see 'pipescope-cli %s --help'", command,
                               command);
  if (optind + 1 < argc)
    return pp_cli_usage_error ("unexpected argument '%s'", argv[optind + 1]);
  *path = argv[optind];
  return 0;
}

static void
usage (FILE *out)
{
  fputs ("Usage: pipescope-cli COMMAND [OPTIONS]\n"
         "\n"
         "Commands:\n"
         "  schedule   print a pipeline schedule and its simulated timeline\n"
         "             (--serve: run it as a live job)\n"
         "  run        train the bundled network under a schedule, live and\n"
         "             measured (--trace: also into a file)\n"
         "  jobs       list the running pipescope jobs on this machine\n"
         "  record     attach to a running job and record its trace to a file\n"
         "  info       summarise a trace file: run, spans, measured bubble\n"
         "  export     convert a trace file to Chrome trace JSON or CSV\n"
         "  render     draw a trace's timeline as PNG, SVG or PDF\n"
         "  suggest    rank schedules and micro-batch counts by the step time\n"
         "             predicted from the costs measured in a trace\n"
         "\n"
         "Run 'pipescope-cli COMMAND --help' for a command's options.\n", out);
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    {
      usage (stderr);
      return 2;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      printf ("pipescope-cli %s\n", PIPESCOPE_VERSION);
      return 0;
    }
  if (strcmp (argv[1], "schedule") == 0)
    return pp_cli_schedule (argc - 1, argv + 1);
  if (strcmp (argv[1], "run") == 0)
    return pp_cli_run (argc - 1, argv + 1);
  if (strcmp (argv[1], "jobs") == 0)
    return pp_cli_jobs (argc - 1, argv + 1);
  if (strcmp (argv[1], "record") == 0)
    return pp_cli_record (argc - 1, argv + 1);
  if (strcmp (argv[1], "info") == 0)
    return pp_cli_info (argc - 1, argv + 1);
  if (strcmp (argv[1], "export") == 0)
    return pp_cli_export (argc - 1, argv + 1);
  if (strcmp (argv[1], "render") == 0)
    return pp_cli_render (argc - 1, argv + 1);
  if (strcmp (argv[1], "suggest") == 0)
    return pp_cli_suggest (argc - 1, argv + 1);
  return pp_cli_usage_error ("unknown command '%s'; known commands: schedule, info, export, render, suggest, jobs, record, run", argv[1]);
}

bool
pp_cli_parse_int (const char *text, int lo, int hi, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    return false;
  *out = (int) v;
  return true;
}

void
pp_cli_print_schedules (FILE *out)
{
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    fprintf (out, "  %-22s %s%s\n", i->name, i->summary, i->takes_v ? " [V]" : "");
}

bool
pp_cli_shape_option (int opt, const char *arg, int *ranks, int *microbatches,
                     int *stages_per_rank)
{
  switch (opt)
    {
    case 'p':
      /* 1 parses: the schedule then says why it needs at least 2 */
      if (pp_cli_parse_int (arg, 1, 4096, ranks))
        return true;
      pp_cli_usage_error ("--ranks takes a whole number up to 4096 (got '%s')", arg);
      return false;
    case 'm':
      if (pp_cli_parse_int (arg, 1, 1 << 20, microbatches))
        return true;
      pp_cli_usage_error ("--microbatches takes a whole number from 1 to %d (got '%s')", 1 << 20, arg);
      return false;
    case 'v':
      if (pp_cli_parse_int (arg, 1, 64, stages_per_rank))
        return true;
      pp_cli_usage_error ("--stages-per-rank takes a whole number from 1 to 64 (got '%s')", arg);
      return false;
    default:
      return false;
    }
}
