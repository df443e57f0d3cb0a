/* san-trace-cli.c — the trace commands of pipescope-cli (info, export,
 * render, suggest) in one program that run-fuzz.sh builds under ASan and
 * UBSan and runs over every file of the corpus: the consumers' own code
 * (app/cli/cli-trace-*.c, cli-render.c, cli-suggest.c) under the sanitizers,
 * as test-trace-asan does for the reader.  Usage: san-trace-cli COMMAND ARGS. */
#include <stdio.h>
#include <string.h>

#include "cli-commands.h"

int
main (int argc, char **argv)
{
  if (argc < 2)
    return 2;
  if (strcmp (argv[1], "info") == 0)
    return pp_cli_info (argc - 1, argv + 1);
  if (strcmp (argv[1], "export") == 0)
    return pp_cli_export (argc - 1, argv + 1);
  if (strcmp (argv[1], "render") == 0)
    return pp_cli_render (argc - 1, argv + 1);
  if (strcmp (argv[1], "suggest") == 0)
    return pp_cli_suggest (argc - 1, argv + 1);
  fprintf (stderr, "san-trace-cli: unknown command '%s'\n", argv[1]);
  return 2;
}
