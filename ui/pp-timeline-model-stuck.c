/* pp-timeline-model-stuck.c — what each process of the model's job is
 * doing now (trace format 1.10's OPEN frames, issue 37) and the stuck
 * diagnosis the window's banner shows: runtime/pp-stuck.c's watch of the
 * stream (places, last open actions, progress), as info prints it. */
#include "pp-timeline-model-internal.h"

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
  pp_stuck_watch_take (&m->stuck, item, mono_ns ());
  /* a process in an action has its rank's row, spans or none (a job
   * deadlocked before any action ended) */
  if (item->type == PP_TRACE_ITEM_OPEN && item->open.rank >= 0 && item->open.rank < PP_TRACE_MAX_RANKS)
    ensure_rank (m, item->open.rank);
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

double
pp_timeline_model_stuck_after_s (const PpTimelineModel *m)
{
  return pp_stuck_watch_after_s (m != NULL ? &m->stuck : NULL);
}

PpStuckKind
pp_timeline_model_stuck_graph (const PpTimelineModel *m, double quiet_s, PpStuckVerdict *v, PpStuckEdge *edges,
                               size_t max, size_t *n_edges)
{
  PpStuckVerdict own;
  if (v == NULL)
    v = &own;
  *n_edges = 0;
  if (m == NULL)
    {
      memset (v, 0, sizeof *v);
      return PP_STUCK_NONE;
    }
  PpStuckKind k = pp_stuck_watch_diagnose (&m->stuck, quiet_s, mono_ns (), v, NULL, 0);
  if (k != PP_STUCK_NONE)
    *n_edges = pp_stuck_watch_edges (&m->stuck, edges, max);
  return k;
}

/* The offset the model moves process's (or rank's) spans by: a view's
 * copy of the watch was moved when it was made. */
static int64_t
open_offset (const PpTimelineModel *m, const PpStuckOpen *o)
{
  return m->is_view ? 0 : offset_for (m, o->open.rank, o->process);
}

size_t
pp_timeline_model_opens (const PpTimelineModel *m, PpTimelineOpen *out, size_t max)
{
  if (m == NULL)
    return 0;
  for (size_t i = 0; i < m->stuck.n_opens && i < max; i++)
    {
      const PpStuckOpen *o = &m->stuck.opens[i];
      int64_t off = open_offset (m, o);
      out[i].number = o->process >= 0 ? o->process : o->open.rank;
      out[i].open = o->open;
      out[i].open.time_ns = add_ns (o->open.time_ns, off);
      if (o->open.start_ns > 0)
        out[i].open.start_ns = add_ns (o->open.start_ns, off);
      out[i].row = pp_timeline_model_process_row (m, out[i].number);
    }
  return m->stuck.n_opens;
}

/* A row's process and pipeline rank (pp-timeline-model-view.c's
 * row_process and row_rank, read here: that file calls this one). */
static int
row_process (const PpTimelineModel *m, int r)
{
  return m->is_view ? m->rows[r].process : -1;
}

static int
row_rank (const PpTimelineModel *m, int r)
{
  return m->is_view ? m->rows[r].rank : r;
}

int
pp_timeline_model_process_row (const PpTimelineModel *m, int32_t number)
{
  if (m == NULL)
    return -1;
  bool placed = false;   /* numbers are global ranks (else pipeline ranks) */
  for (size_t i = 0; i < m->stuck.n_opens && !placed; i++)
    placed = m->stuck.opens[i].process >= 0;
  int32_t rank = number;
  if (placed)
    {
      for (int r = 0; r < m->n_ranks; r++)
        if (row_process (m, r) == number)
          return r;   /* the process's own row */
      rank = -1;
      for (size_t i = 0; i < m->stuck.n_places && rank < 0; i++)
        if (m->stuck.places[i].process == number)
          rank = m->stuck.places[i].rank;
      for (size_t i = 0; i < m->stuck.n_opens && rank < 0; i++)
        if (m->stuck.opens[i].process == number)
          rank = m->stuck.opens[i].open.rank;
    }
  /* its pipeline rank's row (folded over its replicas, or the rank's) */
  for (int r = 0; r < m->n_ranks && rank >= 0; r++)
    if (row_process (m, r) < 0 && row_rank (m, r) == rank)
      return r;
  return -1;
}

bool
stuck_copy (PpTimelineModel *v, const PpTimelineModel *src)
{
  if (!pp_stuck_watch_copy (&v->stuck, &src->stuck))
    return false;
  for (size_t i = 0; i < v->stuck.n_opens; i++)
    {
      PpStuckOpen *o = &v->stuck.opens[i];
      int64_t off = open_offset (src, o);
      o->open.time_ns = add_ns (o->open.time_ns, off);
      if (o->open.start_ns > 0)
        o->open.start_ns = add_ns (o->open.start_ns, off);
    }
  return true;
}

int64_t
pp_timeline_model_now_ns (const PpTimelineModel *m)
{
  int64_t now = pp_timeline_model_end_ns (m);
  for (size_t i = 0; m != NULL && i < m->stuck.n_opens; i++)
    {
      const PpStuckOpen *o = &m->stuck.opens[i];
      if (o->open.flags & PP_TRACE_OPEN_CLOSED)
        continue;
      int64_t t = add_ns (o->open.time_ns, open_offset (m, o));
      if (t > now)
        now = t;
    }
  return now;
}
