/* cli-clock.h — export's --clock: the zero the exported times count from.
 *
 * run (the default): the run's start, its earliest span of any process,
 * so that no exported time is negative.  realtime: the job's own wall
 * clock, times in µs (Chrome) or ns (CSV) since the Unix epoch, and the
 * processes' real pids as the Chrome tracks' ids, so that Perfetto shows
 * the export beside a Kineto or nsys trace of the same run (the Chrome
 * file says its zero as torch >= 2.4's traces do: baseTimeNanoseconds 0,
 * the epoch).  The trace
 * maps its clock to the wall clock by its description's pair
 * (start_unix_ns, start_monotonic_ns), read together by the process that
 * ran rank 0 (merge keeps that process's description); the other
 * processes' times are on that process's clock once their clock offsets
 * are applied. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-trace.h"

typedef enum {
  PP_CLI_CLOCK_RUN = 0,
  PP_CLI_CLOCK_REALTIME,
} PpCliClock;

/* --clock's value into *out: 0, or the one-line usage error (exit 2). */
int pp_cli_clock_parse (const char *arg, PpCliClock *out);

/* The base to subtract from a time on the trace's clock: run_start for
 * PP_CLI_CLOCK_RUN; for PP_CLI_CLOCK_REALTIME the trace clock's reading at
 * the epoch, so that t - base is ns since the epoch.  False, with why
 * filled (one line), when the trace cannot say (no description, or one
 * without the wall clock's pair). */
bool pp_cli_clock_base (PpCliClock clock, const PpTraceDescription *desc, int64_t run_start, int64_t *base,
                        char *why, size_t why_size);

/* The first pid past every real one (Linux's pid_max is at most 2^22):
 * realtime's tracks that are no process (a plan, a rank no process
 * placed) are numbered from here. */
#define PP_CLI_CLOCK_SYNTHETIC_PID (1 << 22)

/* Resolves the Chrome tracks' pids for realtime, real[n] by pipescope's
 * track number, each a process's real pid or <= 0 for none: a track
 * without a pid (a plan, a rank no process placed) and one whose pid
 * another track shares (two hosts) get PP_CLI_CLOCK_SYNTHETIC_PID + its
 * number instead.  Returns the tracks whose pid was shared, -1 when out of
 * memory (real unchanged). */
int pp_cli_clock_real_pids (int32_t *real, size_t n);
