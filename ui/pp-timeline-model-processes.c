/* pp-timeline-model-processes.c — each process of a job of processes
 * (PROCESS frames, trace format 1.4): its entry, place and spans, its
 * clock (CLOCK_OFFSET frames of a process or of a rank's untagged items),
 * the places in mesh order, and the spans no process tagged. */
#include "pp-timeline-model-internal.h"

#include <stdlib.h>
#include <string.h>

static void    adopt_untagged (const PpTimelineModel *cm);

/* Moves rank r's row (its spans and memory) to offset. */
static int
add_clock_offset (PpTimelineModel *m, int r, int64_t offset)
{
  Rank *rk;
  int64_t delta;

  if (ensure_rank (m, r) != 0)
    return 0;
  rk = &m->ranks[r];
  offset = clamp_ns (offset);
  delta = offset - rk->offset_ns;   /* both clamped: fits */
  if (delta == 0)
    return 0;
  rk->offset_ns = offset;
  /* Moving every span by the same amount keeps them sorted (clamping at
   * the ends keeps the order too). */
  rk->max_end_ns = INT64_MIN;
  rk->max_span_ns = 0;
  for (size_t i = 0; i < rk->n_mem; i++)
    rk->mem[i].t = add_ns (rk->mem[i].t, delta);
  for (size_t i = 0; i < rk->n_spans; i++)
    {
      PpSpan *sp = &rk->spans[i];
      sp->start_ns = add_ns (sp->start_ns, delta);
      sp->end_ns = add_ns (sp->end_ns, delta);
      if (sp->end_ns > rk->max_end_ns)
        rk->max_end_ns = sp->end_ns;
      if (sp->end_ns - sp->start_ns > rk->max_span_ns)
        rk->max_span_ns = sp->end_ns - sp->start_ns;
    }
  m->extent_stale = 1;
  return rk->n_spans > 0;
}

/* The entry of process g, made on first sight (its spans may come before
 * its PROCESS frame); NULL out of memory. */
static Proc *
proc_of (PpTimelineModel *m, int32_t g)
{
  if (g < 0 || g >= PP_TRACE_MAX_PROCESSES)
    return NULL;
  if (m->proc_at == NULL)
    {
      if ((m->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *m->proc_at)) == NULL)
        return NULL;
      memset (m->proc_at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *m->proc_at);   /* -1 */
    }
  if (m->proc_at[g] >= 0)
    return &m->procs[m->proc_at[g]];
  if (m->n_procs == m->cap_procs)
    {
      int cap = m->cap_procs ? 2 * m->cap_procs : 16;
      Proc *np = realloc (m->procs, (size_t) cap * sizeof *np);
      if (np == NULL)
        return NULL;
      m->procs = np;
      m->cap_procs = cap;
    }
  Proc *p = &m->procs[m->n_procs];
  memset (p, 0, sizeof *p);
  p->place.process = g;
  p->place.rank = -1;
  p->rank = -1;
  p->r.max_end_ns = INT64_MIN;
  m->proc_at[g] = m->n_procs++;
  return p;
}

/* The clock of process p's items: its own CLOCK_OFFSET, else its rank's
 * untagged one. */
static int64_t
proc_offset (const PpTimelineModel *m, const Proc *p)
{
  if (p->has_own_offset)
    return p->own_offset_ns;
  return p->rank >= 0 && p->rank < m->n_ranks ? m->ranks[p->rank].untagged_offset_ns : 0;
}

/* The offset an item of rank r written by process (-1: none said) is
 * moved by: its process's own, else the rank's untagged one. */
int64_t
offset_for (const PpTimelineModel *m, int r, int32_t process)
{
  if (process >= 0 && process < PP_TRACE_MAX_PROCESSES && m->proc_at != NULL && m->proc_at[process] >= 0
      && m->procs[m->proc_at[process]].has_own_offset)
    return m->procs[m->proc_at[process]].own_offset_ns;
  return r >= 0 && r < m->n_ranks ? m->ranks[r].untagged_offset_ns : 0;
}

/* Moves process p's spans onto its clock as it now stands (an offset
 * came, or its rank became known). */
static void
proc_move (PpTimelineModel *m, Proc *p)
{
  int64_t offset = proc_offset (m, p);
  int64_t delta = offset - p->r.offset_ns;   /* both clamped: fits */
  p->r.offset_ns = offset;
  for (size_t i = 0; delta != 0 && i < p->r.n_spans; i++)
    {
      p->r.spans[i].start_ns = add_ns (p->r.spans[i].start_ns, delta);
      p->r.spans[i].end_ns = add_ns (p->r.spans[i].end_ns, delta);
    }
}

/* A span of a placed job kept in its process's list too (appended; sorted
 * at the first query, as a rank's are). */
void
proc_add_span (PpTimelineModel *m, const PpSpan *in, int32_t process)
{
  Proc *p = proc_of (m, process);
  if (p == NULL)
    return;
  if (p->rank < 0 && in->rank >= 0 && in->rank < PP_TRACE_MAX_RANKS && ensure_rank (m, in->rank) == 0)
    {
      p->rank = in->rank;   /* its spans came before its place: its rank's clock */
      proc_move (m, p);
    }
  append_span (&p->r, in, p->r.offset_ns);
}

/* A CLOCK_OFFSET frame: a process's own (process >= 0), or its rank's for
 * the items of no process and the processes without one of their own.
 * What came before moves; rank r's row goes by the process it shows (by
 * what came last while it shows none).  Returns 1 if what is drawn
 * changed. */
int
take_clock_offset (PpTimelineModel *m, int r, int32_t process, int64_t offset)
{
  if (ensure_rank (m, r) != 0)
    return 0;
  offset = clamp_ns (offset);
  int32_t shown = m->ranks[r].shown_process;
  int64_t before = shown >= 0 ? offset_for (m, r, shown) : m->ranks[r].offset_ns;
  if (process >= 0)
    {
      Proc *p = proc_of (m, process);
      if (p == NULL)
        return 0;
      p->has_own_offset = 1;
      p->own_offset_ns = offset;
      if (p->rank < 0)
        p->rank = r;
      proc_move (m, p);
    }
  else
    {
      Rank *rk = &m->ranks[r];
      int64_t d = offset - rk->untagged_offset_ns;   /* both clamped: fits */
      for (size_t i = rk->n_adopted; i < rk->n_untagged; i++)
        {
          rk->untagged[i].start_ns = add_ns (rk->untagged[i].start_ns, d);
          rk->untagged[i].end_ns = add_ns (rk->untagged[i].end_ns, d);
        }
      m->ranks[r].untagged_offset_ns = offset;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].rank == r && !m->procs[i].has_own_offset)
          proc_move (m, &m->procs[i]);
    }
  /* the edge counters move as the spans do (at the next query; a view's
   * came on their clocks already) */
  m->edge_retime |= !m->is_view && m->n_edge > 0;
  /* the row moves by what its shown process's clock moved (all clamped:
   * the sum fits) */
  int64_t after = shown >= 0 ? offset_for (m, r, shown) : offset;
  return add_clock_offset (m, r, m->ranks[r].offset_ns + (after - before));
}

/* Numbers the processes whose place was not read as merge does
 * (pp_trace_number_unplaced over every process placed so far: a process
 * of a single file or a live stream says dp 0).  Out of memory, they keep
 * what they said. */
static void
number_unplaced (PpTimelineModel *m)
{
  PpTraceProcess *work = malloc ((size_t) (m->n_procs + 1) * sizeof *work);
  size_t k = 0;
  if (work == NULL)
    return;
  for (int i = 0; i < m->n_procs; i++)
    if (m->procs[i].placed)
      work[k++] = m->procs[i].read;
  if (pp_trace_number_unplaced (work, k, NULL) == PP_OK)
    {
      k = 0;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed)
          m->procs[i].place = work[k++];
    }
  free (work);
}

void
proc_place (PpTimelineModel *m, const PpTraceProcess *pl)
{
  Proc *p = pl->rank >= 0 && pl->rank < PP_TRACE_MAX_RANKS && ensure_rank (m, pl->rank) == 0
            ? proc_of (m, pl->process) : NULL;
  if (p == NULL)
    return;
  int was_unplaced = p->placed && (p->read.flags & PP_TRACE_PROCESS_UNPLACED);
  int unplaced = (pl->flags & PP_TRACE_PROCESS_UNPLACED) != 0;
  m->n_unplaced += unplaced - was_unplaced;
  p->read = p->place = *pl;
  p->placed = 1;
  p->rank = pl->rank;
  proc_move (m, p);
  m->places_dirty = 1;
  if (m->n_unplaced > 0)
    number_unplaced (m);
}

static _Thread_local const PpTimelineModel *places_sort_model;   /* qsort has no closure; a thread each (the app analyses a snapshot on a worker) */

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &places_sort_model->procs[*(const int *) a].place;
  const PpTraceProcess *y = &places_sort_model->procs[*(const int *) b].place;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* The placed processes in mesh order (pipeline rank, then dp, tp, cp, ep):
 * a cache rebuilt on the first query after a PROCESS frame. */
static void
ensure_places (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (!m->places_dirty)
    return;
  m->places_dirty = 0;
  free (m->places);
  m->n_places = 0;
  if ((m->places = malloc ((size_t) (m->n_procs + 1) * sizeof *m->places)) == NULL)
    return;
  for (int i = 0; i < m->n_procs; i++)
    if (m->procs[i].placed)
      m->places[m->n_places++] = i;
  places_sort_model = m;
  qsort (m->places, (size_t) m->n_places, sizeof *m->places, cmp_place);
}

int
pp_timeline_model_n_places (const PpTimelineModel *m)
{
  if (m == NULL)
    return 0;
  ensure_places (m);
  return m->n_places;
}

const PpTraceProcess *
pp_timeline_model_place (const PpTimelineModel *m, int i)
{
  if (i < 0 || i >= pp_timeline_model_n_places (m))
    return NULL;
  return &m->procs[m->places[i]].place;
}

const PpSpan *
pp_timeline_model_place_spans (const PpTimelineModel *m, int i, size_t *n)
{
  *n = 0;
  if (i < 0 || i >= pp_timeline_model_n_places (m))
    return NULL;
  adopt_untagged (m);
  Rank *rk = &((PpTimelineModel *) m)->procs[m->places[i]].r;
  settle_rank (rk);   /* a cache, as settle's */
  *n = rk->n_spans;
  return rk->spans;
}

/* A span of a job of processes that no process tagged: kept apart, so
 * that a view can give it to its rank's process when the rank has one
 * (adopt_untagged), or say it is not shown. */
void
keep_untagged (PpTimelineModel *m, const PpSpan *in)
{
  if (in->rank < 0 || in->rank >= m->n_ranks)
    return;
  Rank *rk = &m->ranks[in->rank];
  if (rk->n_untagged == rk->cap_untagged)
    {
      size_t cap = rk->cap_untagged ? 2 * rk->cap_untagged : 64;
      PpSpan *n = realloc (rk->untagged, cap * sizeof *n);
      if (n == NULL)
        return;
      rk->untagged = n;
      rk->cap_untagged = cap;
    }
  PpSpan s = *in;
  s.start_ns = add_ns (s.start_ns, rk->untagged_offset_ns);
  s.end_ns = add_ns (s.end_ns, rk->untagged_offset_ns);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  rk->untagged[rk->n_untagged++] = s;
  m->untagged_pending = 1;
}

/* A rank of one placed process: its untagged spans are that process's
 * (appended to its list, sorted at the next query).  A rank of several
 * keeps them apart: pp_timeline_model_n_unassigned_spans says so. */
static void
adopt_untagged (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (!m->untagged_pending)
    return;
  m->untagged_pending = 0;
  for (int r = 0; r < m->n_ranks; r++)
    {
      Rank *rk = &m->ranks[r];
      if (rk->n_adopted == rk->n_untagged)
        continue;
      Proc *only = NULL;
      int n = 0;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed && m->procs[i].place.rank == r && n++ == 0)
          only = &m->procs[i];
      if (n != 1)
        continue;
      Rank *pr = &only->r;
      size_t add = rk->n_untagged - rk->n_adopted;
      if (pr->n_spans + add > pr->cap_spans)
        {
          size_t cap = pr->n_spans + add;
          PpSpan *ns = realloc (pr->spans, cap * sizeof *ns);
          if (ns == NULL)
            {
              m->untagged_pending = 1;
              continue;
            }
          pr->spans = ns;
          pr->cap_spans = cap;
        }
      memcpy (pr->spans + pr->n_spans, rk->untagged + rk->n_adopted, add * sizeof *pr->spans);
      pr->n_spans += add;   /* n_sorted stays: settle_rank sorts them in */
      rk->n_adopted = rk->n_untagged;
    }
}

uint64_t
pp_timeline_model_n_unassigned_spans (const PpTimelineModel *m)
{
  uint64_t n = 0;
  if (m == NULL || m->is_view)
    return 0;
  adopt_untagged (m);
  for (int r = 0; r < m->n_ranks; r++)
    {
      int places = 0;
      for (int i = 0; i < m->n_procs && places < 2; i++)
        places += m->procs[i].placed && m->procs[i].place.rank == r;
      if (places >= 2)
        n += m->ranks[r].n_untagged - m->ranks[r].n_adopted;
    }
  return n;
}

const PpTraceProcess *
pp_timeline_model_process_place (const PpTimelineModel *m, int32_t process)
{
  if (m == NULL || m->proc_at == NULL || process < 0 || process >= PP_TRACE_MAX_PROCESSES
      || m->proc_at[process] < 0 || !m->procs[m->proc_at[process]].placed)
    return NULL;
  return &m->procs[m->proc_at[process]].place;
}
