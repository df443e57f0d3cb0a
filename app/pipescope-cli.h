/* pipescope-cli.h — subcommands of pipescope-cli. */
#pragma once

#include <stdio.h>

/* Each returns the process exit status: 0 success, 1 failure, 2 usage error. */
int pp_cli_schedule (int argc, char **argv);
int pp_cli_info (int argc, char **argv);
int pp_cli_export (int argc, char **argv);

/* schedule --trace: one simulated time unit is this many nanoseconds (1 ms). */
#define PP_CLI_TRACE_NS_PER_UNIT 1000000.0

#include "pp-schedule.h"
#include "pp-simulate.h"
/* Writes the simulated plan of s as a trace at path (argv: the schedule
 * command's arguments, for the description's command line).  0, or 1 with
 * one line on stderr. */
int pp_cli_write_sim_trace (const char *path, const PpSchedule *s, const PpSimulation *sim,
                            int argc, char **argv);

/* Prints "pipescope-cli: error: <msg>" on stderr and returns 2. */
int pp_cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
