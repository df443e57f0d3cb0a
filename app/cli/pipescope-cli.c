/* pipescope-cli — everything headless, one binary with subcommands (as nsys). */
#include "cli-commands.h"
#include "cli-common.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#ifndef PIPESCOPE_VERSION
#define PIPESCOPE_VERSION "0.1.0"
#endif


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
         "  merge      join the per-rank traces of a job run under mpirun\n"
         "  profile    run a PyTorch, Megatron-LM or DeepSpeed pipeline job (torchrun,\n"
         "             python, mpirun) with pipescope's hook in every process, as one\n"
         "             live job and one trace\n"
         "  import     read torch.profiler traces of a PyTorch pipeline job (one\n"
         "             per rank, JSON or JSON.gz) as one pipescope trace\n"
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
  /* A file size limit (ulimit -f) is a full disk to us: the write fails
   * with EFBIG and the command says so in one line, instead of dying of
   * SIGXFSZ with an output half written.  Not for profile: an ignored
   * signal outlives exec, and the user's command keeps its own. */
  if (strcmp (argv[1], "profile") != 0)
    signal (SIGXFSZ, SIG_IGN);
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
  if (strcmp (argv[1], "merge") == 0)
    return pp_cli_merge (argc - 1, argv + 1);
  if (strcmp (argv[1], "profile") == 0)
    return pp_cli_profile (argc - 1, argv + 1);
  if (strcmp (argv[1], "import") == 0)
    return pp_cli_import (argc - 1, argv + 1);
  return pp_cli_usage_error ("unknown command '%s'; known commands: schedule, info, export, render, suggest, merge, profile, import, jobs, record, run", argv[1]);
}
