/* cli-clock.c — export's --clock (cli-clock.h). */
#include "cli-clock.h"

#include <stdio.h>
#include <stdlib.h>
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

static int
cmp_pid (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

int
pp_cli_clock_real_pids (int32_t *real, size_t n)
{
  int32_t *sorted = malloc ((n + 1) * sizeof *sorted);
  size_t n_real = 0;
  int shared = 0;
  if (sorted == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (real[i] > 0 && real[i] < PP_CLI_CLOCK_SYNTHETIC_PID)
      sorted[n_real++] = real[i];
  qsort (sorted, n_real, sizeof *sorted, cmp_pid);
  for (size_t i = 0; i < n; i++)
    {
      int32_t key = real[i];
      int32_t *hit = key > 0 ? bsearch (&key, sorted, n_real, sizeof *sorted, cmp_pid) : NULL;
      bool twice = hit != NULL && ((hit > sorted && hit[-1] == key) || (hit + 1 < sorted + n_real && hit[1] == key));
      if (hit == NULL || twice)
        {
          shared += twice;
          real[i] = PP_CLI_CLOCK_SYNTHETIC_PID + (int32_t) i;
        }
    }
  free (sorted);
  return shared;
}
