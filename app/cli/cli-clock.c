/* cli-clock.c — export's --clock (cli-clock.h). */
#include "cli-clock.h"

#include <stdio.h>
#include <string.h>

#include "cli-common.h"

int
pp_cli_clock_parse (const char *arg, PpCliClock *out)
{
  if (strcmp (arg, "run") == 0)
    *out = PP_CLI_CLOCK_RUN;
  else if (strcmp (arg, "realtime") == 0)
    *out = PP_CLI_CLOCK_REALTIME;
  else
    return pp_cli_usage_error ("--clock takes run or realtime, not '%s'", arg);
  return 0;
}

bool
pp_cli_clock_base (PpCliClock clock, const PpTraceDescription *desc, int64_t run_start, int64_t *base,
                   char *why, size_t why_size)
{
  if (clock == PP_CLI_CLOCK_RUN)
    {
      *base = run_start;
      return true;
    }
  if (desc == NULL)
    {
      snprintf (why, why_size, "--clock realtime: the trace has no description, which holds its wall clock");
      return false;
    }
  /* a hook always writes both (pipescope_describe); a trace of the app's
   * own runs or of import may lack the wall clock */
  if (desc->start_unix_ns <= 0)
    {
      snprintf (why, why_size, "--clock realtime: the trace's description has no wall-clock time "
                "(start_unix_ns), so its clock cannot be mapped to the job's");
      return false;
    }
  /* within +-2^62 each: the difference fits */
  *base = desc->start_monotonic_ns - desc->start_unix_ns;
  return true;
}
