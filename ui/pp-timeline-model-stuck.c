/* pp-timeline-model-stuck.c — what each process of the model's job is
 * doing now (trace format 1.10's OPEN frames, issue 37) and the stuck
 * diagnosis the window's banner shows: runtime/pp-stuck.c's, from the
 * processes' places and last open actions, as info prints it. */
#include "pp-timeline-model-internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t
mono_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void
stuck_take (PpTimelineModel *m, const PpTraceItem *item)
{
  if (item->type == PP_TRACE_ITEM_SPAN)
    {
      m->progress_ns = mono_ns ();
      return;
    }
  if (item->type != PP_TRACE_ITEM_OPEN)
    return;
  int32_t who = item->process >= 0 ? item->process : -1 - item->open.rank;
  for (size_t i = 0; i < m->n_opens; i++)
    if (m->opens[i].process == who)
      {
        const PpTraceOpen *was = &m->opens[i].open, *o = &item->open;
        if (o->kind != was->kind || o->step != was->step || o->stage != was->stage
            || o->microbatch != was->microbatch || o->start_ns != was->start_ns)
          m->progress_ns = mono_ns ();
        break;
      }
  pp_stuck_keep_open (&m->opens, &m->n_opens, &m->cap_opens, item->process, &item->open);
}

PpStuckKind
pp_timeline_model_stuck (const PpTimelineModel *m, double quiet_s, char *line, size_t size)
{
  if (line != NULL && size > 0)
    line[0] = '\0';
  if (m == NULL || m->n_opens == 0
      || (quiet_s > 0 && (m->progress_ns == 0 || (double) (mono_ns () - m->progress_ns) < quiet_s * 1e9)))
    return PP_STUCK_NONE;
  PpTraceProcess *places = calloc ((size_t) m->n_procs + 1, sizeof *places);
  if (places == NULL)
    return PP_STUCK_NONE;
  size_t n = 0;
  for (int i = 0; i < m->n_procs; i++)
    if (m->procs[i].placed)
      places[n++] = m->procs[i].place;
  PpStuckKind k = pp_stuck_from_places (places, n, m->opens, m->n_opens, NULL, NULL, line, size);
  free (places);
  return k;
}
