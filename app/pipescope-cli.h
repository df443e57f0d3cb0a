/* pipescope-cli.h — subcommands of pipescope-cli. */
#pragma once

#include <stdio.h>

/* Each returns the process exit status: 0 success, 1 failure, 2 usage error. */
int pp_cli_schedule (int argc, char **argv);

/* Prints "pipescope-cli: error: <msg>" on stderr and returns 2. */
int pp_cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
