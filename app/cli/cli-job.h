/* cli-job.h — a pipescope-cli command acting as a job (`run`, `schedule
 * --serve`): the stop signals, and where its events go (a live server,
 * registered and attachable, and/or trace files, fed by one probe). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "pp-live.h"
#include "pp-probe.h"
#include "pp-recorder.h"
#include "pp-trace.h"

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
 * record) and/or a trace file, both fed by one probe (pp-recorder.h). */
typedef struct {
  PpRecorder    *rec;
  const char    *what[PP_RECORDER_MAX_WRITERS];   /* for messages, by writer: "live stream",
                                                   * the file's path, "collector" */
  int            live_index;   /* which writer is the live stream's, -1: none */
  /* pp_cli_job_collect: what this rank recorded since it was last taken,
   * whole frames (the first time, the file header first) */
  unsigned char *collected;
  size_t         n_collected, cap_collected;
  uint64_t       collect_dropped;   /* bytes dropped past the bound */
  uint64_t       collect_dropped_records, collect_reported; /* spans and counters; in DROPPED frames */
  size_t         collect_max;       /* the bound (PIPESCOPE_TEST_COLLECT_MAX in tests) */
  int            collect_rank;      /* whose records these are */
  PpProbe       *probe;        /* the recorder's, once started */
  char           name[64];     /* "<schedule>-<pid>" */
} PpCliJob;

/* Creates the live server (when live; TCP too with listen) registered as
 * "<schedule>-<pid>", and the trace file (when trace).  0, or 1 with one
 * line on stderr (and nothing left open). */
int  pp_cli_job_open (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                      const char *listen, const char *trace);
/* The same for rank `rank` of a job of n_ranks processes named job_name
 * (rank 0's name, "<schedule>-<rank 0's pid>"): rank 0 registers as the job,
 * the others as "<job_name>.r<rank>", each entry naming the job. */
int  pp_cli_job_open_rank (PpCliJob *job, const char *schedule, const char *cmdline, bool live,
                           const char *listen, const char *trace, const char *job_name, int rank,
                           int n_ranks);
/* The same for a process of a job that `pipescope-cli profile` collects
 * (job_name its PIPESCOPE_JOB): every rank, 0 too, registers as
 * "<job_name>.r<rank>" and writes $PIPESCOPE_TRACE.rank<rank> (none without
 * it) with $PIPESCOPE_JOB_ID in its header, as the Python hook does. */
int  pp_cli_job_open_member (PpCliJob *job, const char *schedule, const char *cmdline,
                             const char *listen, const char *job_name, int rank, int n_ranks);
/* Calls fn on every writer, then flushes it, under the lock the probe's
 * drain takes to deliver; any time, from any thread but the drain's.  What
 * a step recorded precedes what is written after it only once
 * pp_probe_flush has returned.  0, or 1 with one line. */
typedef PpStatus (*PpCliWriteFunc) (PpTraceWriter *w, void *user, PpError *err);
int  pp_cli_job_write (PpCliJob *job, PpCliWriteFunc fn, void *user);
/* Under MPI, ranks other than 0 (this one is `rank`): everything this
 * rank's writers get is also kept (at most PP_CLI_COLLECT_MAX bytes between
 * two takes; past that the spans and counters are dropped and counted, the
 * rank is never slowed) for rank 0 to serve on its live stream.  Before
 * pp_cli_job_start_probe.  0, or 1 with one line. */
#define PP_CLI_COLLECT_MAX (64u << 20)
int  pp_cli_job_collect (PpCliJob *job, int rank);
/* Hands over what was kept (the caller frees *data); *n 0 when nothing.
 * Records dropped since the last take close it as a DROPPED frame of the
 * rank, so a viewer of rank 0's stream counts them. */
void pp_cli_job_take_collected (PpCliJob *job, unsigned char **data, size_t *n);
/* pp_cli_job_write on the live stream's writer only (nothing without one). */
int  pp_cli_job_write_live (PpCliJob *job, PpCliWriteFunc fn, void *user);
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

/* How many threads a job may start for its ranks (a CPU rank is a thread),
 * with the reason that bounds it in why ("ulimit -u is 512", ...): checked
 * before any is started, so a run too big for the machine is refused in one
 * line instead of failing at its 1571st thread after all its setup. */
int  pp_cli_threads_max (char *why, size_t size);
