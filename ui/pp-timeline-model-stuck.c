/* pp-timeline-model-stuck.c — what each process of the model's job is
 * doing now (trace format 1.10's OPEN frames, issue 37) and the stuck
 * diagnosis the window's banner shows: runtime/pp-stuck.c's watch of the
 * stream (places, last open actions, progress), as info prints it. */
#include "pp-timeline-model-internal.h"

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
  pp_stuck_watch_take (&m->stuck, item, mono_ns ());
}

PpStuckKind
pp_timeline_model_stuck (const PpTimelineModel *m, double quiet_s, char *line, size_t size)
{
  if (m == NULL)
    {
      if (line != NULL && size > 0)
        line[0] = '\0';
      return PP_STUCK_NONE;
    }
  return pp_stuck_watch_diagnose (&m->stuck, quiet_s, mono_ns (), NULL, line, size);
}
