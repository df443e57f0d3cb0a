/* cli-processes.h — info's processes of a job (trace format 1.4): the
 * mesh's shape in one line, and a line a process where there are few, or
 * when asked (info --processes). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-trace.h"

/* Past this many processes info summarises them in one line. */
#define PP_CLI_PROCESSES_LISTED 16

/* The mesh's dimensions' names, in PP_TRACE_MESH_* order. */
extern const char *const pp_cli_mesh_dim[PP_TRACE_MESH_DIMS];

/* The mesh's sizes: the largest each process says (in a sound job they
 * all say the same). */
void pp_cli_mesh_sizes (const PpTraceProcess *procs, size_t n, int32_t size[PP_TRACE_MESH_DIMS]);

/* "processes: 4 (pp 2 × dp 2 × tp 1)" and "process G: pp R dp D tp T host
 * H pid N" a process (cp and ep where the mesh has them), sorted by
 * process; past PP_CLI_PROCESSES_LISTED processes, unless list, the one
 * line "processes: 2048 (pp 16 × dp 128 × tp 1) on 256 hosts" instead.
 * n_unplaced: the processes whose place the hook could not read.  Nothing
 * for n 0 (a trace without PROCESS frames). */
void pp_cli_print_processes (const PpTraceProcess *procs, size_t n, size_t n_unplaced, bool list);
