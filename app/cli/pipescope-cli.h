/* pipescope-cli.h — subcommands of pipescope-cli. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

/* Each returns the process exit status: 0 success, 1 failure, 2 usage error. */
int pp_cli_schedule (int argc, char **argv);
int pp_cli_render (int argc, char **argv);     /* cli-render.c */
int pp_cli_suggest (int argc, char **argv);    /* cli-suggest.c */
int pp_cli_info (int argc, char **argv);
int pp_cli_export (int argc, char **argv);
int pp_cli_jobs (int argc, char **argv);
int pp_cli_record (int argc, char **argv);
int pp_cli_run (int argc, char **argv);

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

/* The plan of s into w: one PLAN frame per rank, with sim's timeline (one
 * time unit = seconds_per_unit s) unless sim is NULL. */
PpStatus pp_cli_write_plan (PpTraceWriter *w, const PpSchedule *s, const PpSimulation *sim,
                            double seconds_per_unit, PpError *err);

/* schedule --serve: acts as a job would, serving the simulated timeline live,
 * replayed in real time for steps steps (0: until SIGINT/SIGTERM); with trace,
 * also into that file.  speed (> 0): time units replayed per millisecond; the
 * spans, step markers and plan are stamped on the replay's clock (one unit =
 * 1 ms / speed).  0, or 1 with one line on stderr. */
int pp_cli_serve (const PpSchedule *s, const PpSimulation *sim, const char *listen,
                  int steps, double speed, const char *trace, int argc, char **argv);

/* ---- shared by the commands that act as a job (cli-live.c) ---------------- */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "pp-live.h"
#include "pp-probe.h"
#include "pp-trace-sink.h"

/* The signal (SIGINT, SIGTERM) that asked to stop, 0 if none; and a flag that
 * is 1 once one did (a PpRunConfig.stop). */
extern volatile sig_atomic_t pp_cli_stop_signal;
extern volatile sig_atomic_t pp_cli_stop_flag;
/* Whether a stop signal came (an atomic load: any thread may ask). */
bool    pp_cli_stopping (void);
/* Clears both, then SIGINT and SIGTERM set them.  No SA_RESTART: a sleep or
 * poll in the main thread returns early with EINTR. */
void    pp_cli_catch_stop_signals (void);
/* SIG_BLOCK / SIG_UNBLOCK SIGINT and SIGTERM in the calling thread (threads
 * started while blocked inherit it, so a Ctrl-C lands on the main thread,
 * or on a thread a library started before main: poll pp_cli_stopping). */
void    pp_cli_mask_stop_signals (int how);
int64_t pp_cli_now_ns (void);

/* Where a job's events go: a live server (registered, attachable with
 * record) and/or a trace file, both fed by one probe through a trace sink. */
typedef struct {
  PpLiveServer  *server;
  PpTraceWriter *w[2];
  const char    *what[2];      /* for messages: "live stream", the file's path */
  int            n;
  PpTraceSink   *sink;
  PpProbe       *probe;
  PpProbeSink    trace_sink;   /* the trace sink's callbacks (none without writers) */
  PpProbeSink    tap;          /* the caller's, called after them on the drain thread */
  char           name[64];     /* "<schedule>-<pid>" */
} PpCliJob;

/* Creates the live server (when live; TCP too with listen) registered as
 * "<schedule>-<pid>", and the trace file (when trace).  0, or 1 with one
 * line on stderr (and nothing left open). */
int  pp_cli_job_open (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                      const char *listen, const char *trace);
/* Calls fn on every writer, then flushes it, under the lock the probe's
 * drain takes to deliver; any time, from any thread but the drain's.  What
 * a step recorded precedes what is written after it only once
 * pp_probe_flush has returned.  0, or 1 with one line. */
typedef PpStatus (*PpCliWriteFunc) (PpTraceWriter *w, void *user, PpError *err);
int  pp_cli_job_write (PpCliJob *job, PpCliWriteFunc fn, void *user);
/* Starts the probe, its records going to the writers and to tap (may be
 * NULL).  0, or 1 with one line. */
int  pp_cli_job_start_probe (PpCliJob *job, const PpProbeSink *tap);
/* Prints "serving NAME (pid N) on SOCKET[ and HOST:PORT, token T]; Ctrl-C
 * stops" on stderr (nothing without a live server). */
void pp_cli_job_announce (PpCliJob *job, const char *listen);
/* Stops the probe (a final drain), closes the writers and the server (its
 * registry entry goes).  0, or 1 with one line if a writer failed. */
int  pp_cli_job_close (PpCliJob *job);
/* The same without messages, for error paths; idempotent. */
void pp_cli_job_abort (PpCliJob *job);

/* Prints "pipescope-cli: error: <msg>" on stderr and returns 2. */
int pp_cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* The one trace FILE operand left after getopt (argv[optind]) into *path;
 * otherwise the usage error (exit status 2) that `command` would give. */
int pp_cli_one_trace_file (int argc, char **argv, const char *command, const char **path);

/* Parses a whole decimal number in [lo, hi]; false for anything else. */
bool pp_cli_parse_int (const char *text, int lo, int hi, int *out);

/* The schedules, one line each, for --help texts. */
void pp_cli_print_schedules (FILE *out);

/* -p/--ranks, -m/--microbatches, -v/--stages-per-rank, the same in every
 * subcommand: stores the value, or prints the one-line error (the caller
 * then exits 2). */
bool pp_cli_shape_option (int opt, const char *arg, int *ranks, int *microbatches,
                          int *stages_per_rank);
