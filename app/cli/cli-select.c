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

int
pp_cli_selection_check (const PpCliSelection *k, size_t n,
                        void (*coords) (const void *user, size_t i, int32_t v[3]), const void *user)
{
  static const char *const opt[3] = { "--steps", "--ranks", "--replicas" };
  static const char *const what[3] = { "steps", "pipeline ranks", "replicas dp" };
  const PpCliList *l[3] = { &k->steps, &k->ranks, &k->replicas };
  int32_t lo[3] = { INT32_MAX, INT32_MAX, INT32_MAX }, hi[3] = { INT32_MIN, INT32_MIN, INT32_MIN };
  bool hit[3] = { k->steps.n == 0, k->ranks.n == 0, k->replicas.n == 0 };
  for (size_t i = 0; i < n; i++)
    {
      int32_t v[3];
      coords (user, i, v);
      for (int d = 0; d < 3; d++)
        {
          if (d == 0 && v[d] < 0)
            continue;   /* outside every step */
          lo[d] = v[d] < lo[d] ? v[d] : lo[d];
          hi[d] = v[d] > hi[d] ? v[d] : hi[d];
          hit[d] |= pp_cli_list_has (l[d], v[d]);
        }
    }
  for (int d = 0; d < 3; d++)
    if (!hit[d])
      {
        if (lo[d] > hi[d])
          return pp_cli_usage_error ("%s: the trace has no spans with %s", opt[d], what[d]);
        return pp_cli_usage_error ("%s selects none of the trace's %s %d to %d", opt[d], what[d], lo[d], hi[d]);
      }
  return 0;
}
