/* cli-common.h — what every pipescope-cli subcommand uses: the one-line
 * usage error, whole numbers from the command line, the trace FILE operand,
 * an output that is one of the inputs, the schedule shape options.
 * Includes none of the subcommands' files. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Prints "pipescope-cli: error: <msg>" on stderr and returns 2. */
int pp_cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* The one trace FILE operand left after getopt (argv[optind]) into *path;
 * otherwise the usage error (exit status 2) that `command` would give. */
int pp_cli_one_trace_file (int argc, char **argv, const char *command, const char **path);

/* The index of the first of paths[0..n) that is the same file as path
 * (device and inode: "./x", a symbolic or a hard link to it), else -1 (and
 * -1 when path does not exist yet).  Asked before an output is opened, so
 * that writing it can never truncate or replace an input. */
int pp_cli_find_same_file (const char *path, const char *const *paths, size_t n);

/* Parses a whole decimal number in [lo, hi]; false for anything else. */
bool pp_cli_parse_int (const char *text, int lo, int hi, int *out);

/* The schedules, one line each, for --help texts. */
void pp_cli_print_schedules (FILE *out);

/* -p/--ranks, -m/--microbatches, -v/--stages-per-rank, the same in every
 * subcommand: stores the value, or prints the one-line error (the caller
 * then exits 2). */
bool pp_cli_shape_option (int opt, const char *arg, int *ranks, int *microbatches,
                          int *stages_per_rank);

/* s, a string from a trace (a host, a command, a model), as a terminal may
 * show it, into buf[size]; returns buf.  Valid UTF-8 stays as it is; a
 * newline, tab or carriage return shows as \n, \t, \r, any other control
 * character as \xNN (C1 as \u0080..\u009f) and a byte that is not UTF-8 as
 * \xNN: a file cannot move the cursor, clear the screen or add a line. */
const char *pp_cli_text (const char *s, char *buf, size_t size);
