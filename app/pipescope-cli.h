/* pipescope-cli.h — subcommands of pipescope-cli. */
#pragma once

#include <stdio.h>

/* Each returns the process exit status: 0 success, 1 failure, 2 usage error. */
int pp_cli_schedule (int argc, char **argv);
int pp_cli_info (int argc, char **argv);
int pp_cli_export (int argc, char **argv);
int pp_cli_jobs (int argc, char **argv);
int pp_cli_record (int argc, char **argv);

/* schedule --trace: one simulated time unit is this many nanoseconds (1 ms). */
#define PP_CLI_TRACE_NS_PER_UNIT 1000000.0

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-trace.h"
/* Writes the simulated plan of s as a trace at path (argv: the schedule
 * command's arguments, for the description's command line).  0, or 1 with
 * one line on stderr. */
int pp_cli_write_sim_trace (const char *path, const PpSchedule *s, const PpSimulation *sim,
                            int argc, char **argv);

/* The PpSpanKind of a compute action kind (F, B, I, W, OVERLAP_F_B), else -1. */
int pp_cli_span_kind_of_action (int kind);
/* The description of a simulated run of s: backend "simulated", model
 * "none", this host, the command line from argv, both clocks read now. */
void pp_cli_sim_description (PpTraceDescription *desc, const PpSchedule *s, int argc, char **argv);
/* Writes desc and the plan of s with sim's timeline (seconds, one time unit
 * = PP_CLI_TRACE_NS_PER_UNIT ns) into w. */
PpStatus pp_cli_write_sim_header (PpTraceWriter *w, const PpTraceDescription *desc,
                                  const PpSchedule *s, const PpSimulation *sim, PpError *err);

/* schedule --serve: acts as a job would, serving the simulated timeline live,
 * replayed in real time for steps steps (0: until SIGINT/SIGTERM); with trace,
 * also into that file.  0, or 1 with one line on stderr. */
int pp_cli_serve (const PpSchedule *s, const PpSimulation *sim, const char *listen,
                  int steps, const char *trace, int argc, char **argv);

/* Prints "pipescope-cli: error: <msg>" on stderr and returns 2. */
int pp_cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
