/* cli-stuck.h — the stuck diagnosis (runtime/pp-stuck.c) from what the
 * CLI holds: a trace's PROCESS frames and each process's last OPEN frame
 * (info), or the live streams' (profile's collector, jobs). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-stuck.h"
#include "pp-trace.h"

/* One process's last OPEN frame, by process (its global rank; -1: a trace
 * without PROCESS frames, then by the frame's rank). */
typedef struct {
  int32_t     process;
  PpTraceOpen open;
} PpCliOpen;

/* Keeps o as process's last in *opens (grown as needed); false on no memory. */
bool        pp_cli_open_keep (PpCliOpen **opens, size_t *n, size_t *cap, int32_t process,
                              const PpTraceOpen *o);

/* The verdict and its line for processes procs[n_procs] (may be 0: then
 * every process is its pipeline rank, dp 0) with their last open actions
 * opens[n_opens].  gone (may be NULL): [n_opens], true where that
 * process's heartbeat stopped. */
PpStuckKind pp_cli_stuck (const PpTraceProcess *procs, size_t n_procs, const PpCliOpen *opens,
                          size_t n_opens, const bool *gone, PpStuckVerdict *v, char *line, size_t size);
