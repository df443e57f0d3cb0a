/* cli-select.c — export's lists of steps, ranks and replicas (cli-select.h). */
#include "cli-select.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"

/* A whole number in [0, INT32_MAX] at *p, *p moved past it; false for none. */
static bool
number (const char **p, int32_t *out)
{
  if (!isdigit ((unsigned char) **p))
    return false;
  char *end;
  errno = 0;
  long long v = strtoll (*p, &end, 10);
  if (errno != 0 || v > INT32_MAX)
    return false;
  *p = end;
  *out = (int32_t) v;
  return true;
}

int
pp_cli_list_parse (const char *option, const char *arg, PpCliList *out)
{
  size_t n = 1;
  for (const char *c = arg; *c; c++)
    n += *c == ',';
  int32_t (*range)[2] = malloc (n * sizeof *range);
  if (range == NULL)
    return pp_cli_usage_error ("out of memory");
  const char *p = arg;
  for (size_t k = 0; k < n; k++)
    {
      int32_t lo, hi;
      if (!number (&p, &lo))
        goto bad;
      hi = lo;
      if (*p == '-')
        {
          p++;
          if (!number (&p, &hi))
            goto bad;
          if (hi < lo)
            {
              free (range);
              return pp_cli_usage_error ("%s %s: the range %d-%d runs backwards", option, arg, lo, hi);
            }
        }
      if (*p != (k + 1 < n ? ',' : '\0'))
        goto bad;
      p++;
      range[k][0] = lo;
      range[k][1] = hi;
    }
  pp_cli_list_clear (out);
  out->range = range;
  out->n = n;
  return 0;
bad:
  free (range);
  return pp_cli_usage_error ("%s takes whole numbers and ranges, such as 2, 2-4 or 0,3, not '%s'", option, arg);
}

bool
pp_cli_list_has (const PpCliList *l, int64_t v)
{
  if (l->n == 0)
    return true;
  for (size_t k = 0; k < l->n; k++)
    if (v >= l->range[k][0] && v <= l->range[k][1])
      return true;
  return false;
}

void
pp_cli_list_clear (PpCliList *l)
{
  free (l->range);
  l->range = NULL;
  l->n = 0;
}

bool
pp_cli_selection_given (const PpCliSelection *s)
{
  return s->steps.n > 0 || s->ranks.n > 0 || s->replicas.n > 0;
}

void
pp_cli_selection_clear (PpCliSelection *s)
{
  pp_cli_list_clear (&s->steps);
  pp_cli_list_clear (&s->ranks);
  pp_cli_list_clear (&s->replicas);
}
