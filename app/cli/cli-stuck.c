/* cli-stuck.c — the stuck diagnosis from a trace's or the live streams'
 * processes and open actions (cli-stuck.h); the graph and the words are
 * runtime/pp-stuck.c's. */
#include "cli-stuck.h"

#include <stdlib.h>
#include <string.h>

bool
pp_cli_open_keep (PpCliOpen **opens, size_t *n, size_t *cap, int32_t process, const PpTraceOpen *o)
{
  int32_t who = process >= 0 ? process : -1 - o->rank;   /* without places: by rank */
  for (size_t i = 0; i < *n; i++)
    if ((*opens)[i].process == who)
      {
        (*opens)[i].open = *o;
        return true;
      }
  if (*n == *cap)
    {
      size_t c = *cap ? 2 * *cap : 16;
      PpCliOpen *g = realloc (*opens, c * sizeof *g);
      if (g == NULL)
        return false;
      *opens = g;
      *cap = c;
    }
  (*opens)[*n].process = who;
  (*opens)[*n].open = *o;
  (*n)++;
  return true;
}

PpStuckKind
pp_cli_stuck (const PpTraceProcess *procs, size_t n_procs, const PpCliOpen *opens, size_t n_opens,
              const bool *gone, PpStuckVerdict *v, char *line, size_t size)
{
  if (n_opens == 0)
    {
      if (v)
        memset (v, 0, sizeof *v);
      if (line && size)
        line[0] = '\0';
      return PP_STUCK_NONE;
    }
  PpStuckProcess *ps = calloc (n_opens, sizeof *ps);
  if (ps == NULL)
    return PP_STUCK_NONE;
  for (size_t i = 0; i < n_opens; i++)
    {
      PpStuckProcess *p = &ps[i];
      const PpTraceProcess *place = NULL;
      for (size_t k = 0; k < n_procs && place == NULL; k++)
        if (procs[k].process == opens[i].process)
          place = &procs[k];
      p->has_open = true;
      p->open = opens[i].open;
      p->gone = gone != NULL && gone[i] && !(p->open.flags & PP_TRACE_OPEN_CLOSED);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        p->size[d] = 1;
      if (place != NULL)
        {
          p->process = place->process;
          memcpy (p->coord, place->coord, sizeof p->coord);
          memcpy (p->size, place->size, sizeof p->size);
          p->pid = place->pid;
          memcpy (p->host, place->host, sizeof p->host);
        }
      else
        {
          p->process = opens[i].process >= 0 ? opens[i].process : -1;
          p->coord[PP_TRACE_MESH_PP] = p->open.rank;
        }
    }
  PpStuckKind k = pp_stuck_diagnose (ps, n_opens, v, line, size);
  free (ps);
  return k;
}
