/* pp-timeline-model-replicas.c — which replica a rank's row shows (the
 * lowest place of its rank), the items of the others left out, and the
 * note that says what is shown. */
#include "pp-timeline-model-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether an item of rank r written by process (-1: not said) is the
 * shown replica's: untagged items and those of a rank no process has
 * placed yet are. */
int
is_shown (PpTimelineModel *m, int r, int32_t process)
{
  if (process < 0 || r < 0 || r >= m->n_ranks)
    return 1;
  int32_t shown = m->ranks[r].shown_process;
  return shown < 0 || shown == process;
}

/* Whether place a (coordinates, global rank) comes before place b on
 * their rank: dp, then tp, cp, ep, then the global rank. */
static int
place_before (const int32_t *a, int32_t pa, const int32_t *b, int32_t pb)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (a[d] != b[d])
      return a[d] < b[d];
  return pa < pb;
}

/* Rank r's row shows process p from now on: the spans of another replica
 * it showed go, and p's, kept in its list whatever was shown, come back
 * (a live stream may bring a lower place after others' spans).  Returns 1
 * if what is drawn changed. */
static int
show_process (PpTimelineModel *m, int r, Proc *p)
{
  Rank *rk = &m->ranks[r];
  int same = rk->shown_process == p->place.process;
  memcpy (rk->shown_coord, p->place.coord, sizeof rk->shown_coord);
  rk->shown_flags = p->place.flags;
  if (same)
    return 0;
  int had = rk->shown_process >= 0;
  rk->shown_process = p->place.process;
  if (!had)
    return 1;   /* the row held the rank's items so far, all of them: they stay */
  m->hidden_spans += rk->n_spans;
  m->n_spans_total -= rk->n_spans;
  rk->n_spans = rk->n_sorted = 0;
  rk->max_span_ns = 0;
  rk->max_end_ns = INT64_MIN;
  rk->n_mem = 0;
  rk->peak_activation = -1;
  rk->peak_inflight = -1;
  m->extent_stale = 1;
  rk->offset_ns = p->r.offset_ns;
  settle_rank (&p->r);
  for (size_t i = 0; i < p->r.n_spans; i++)
    add_span (m, &p->r.spans[i], 0);   /* on its clock already */
  m->hidden_spans -= p->r.n_spans < m->hidden_spans ? p->r.n_spans : m->hidden_spans;
  return 1;
}

/* A PROCESS frame (its place already kept: proc_place): counted; the row
 * of its rank shows it when it is the first placed there or a lower place
 * than the one shown.  Returns 1 if what is drawn changed. */
int
add_process (PpTimelineModel *m, const PpTraceProcess *in)
{
  if (in->process < 0 || in->process >= PP_TRACE_MAX_PROCESSES || ensure_rank (m, in->rank) != 0)
    return 0;
  if (m->process_bits == NULL && (m->process_bits = calloc (PP_TRACE_MAX_PROCESSES / 8 + 1, 1)) == NULL)
    return 0;
  if (!(m->process_bits[in->process / 8] & (1u << (in->process % 8))))
    {
      m->process_bits[in->process / 8] |= (uint8_t) (1u << (in->process % 8));
      m->n_processes++;
    }
  Proc *pr = m->proc_at != NULL && m->proc_at[in->process] >= 0 ? &m->procs[m->proc_at[in->process]] : NULL;
  if (pr == NULL || !pr->placed)
    return 0;
  /* as numbered where its place was not read (proc_place) */
  const PpTraceProcess *p = &pr->place;
  /* tensor, context and expert ranks are replicas of a row too: the row
   * shows one process of them all */
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (p->size[d] > m->mesh_size[d])
      m->mesh_size[d] = p->size[d];
  /* saturated: places that disagree may make more than 64 bits hold */
  int64_t n = pp_trace_mesh_count (m->mesh_size, PP_TRACE_MESH_DP);
  if (n > m->n_replicas)
    m->n_replicas = (int32_t) (n < INT32_MAX ? n : INT32_MAX);
  Rank *rk = &m->ranks[p->rank];
  Proc *low = pr;
  if (m->n_unplaced > 0)
    {
      /* a number given may have moved every place of the rank */
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed && m->procs[i].place.rank == p->rank
            && place_before (m->procs[i].place.coord, m->procs[i].place.process, low->place.coord,
                             low->place.process))
          low = &m->procs[i];
    }
  else if (rk->shown_process >= 0 && rk->shown_process != p->process
           && !place_before (p->coord, p->process, rk->shown_coord, rk->shown_process))
    return 0;
  return show_process (m, p->rank, low);
}

/* The rank an item is of, for is_shown; -1 for items of the run. */
int
item_rank (const PpTraceItem *item)
{
  switch (item->type)
    {
    case PP_TRACE_ITEM_SPAN:         return item->span.rank;
    case PP_TRACE_ITEM_COUNTER:      return item->counter.rank;
    case PP_TRACE_ITEM_STEP_MARKER:  return item->step_marker.rank;
    case PP_TRACE_ITEM_CLOCK_OFFSET: return item->clock_offset.rank;
    case PP_TRACE_ITEM_RANK:         return item->rank_info.rank;
    default:                         return -1;
    }
}

int
pp_timeline_model_n_processes (const PpTimelineModel *m)
{
  return m != NULL ? m->n_processes : 0;
}

int
pp_timeline_model_n_replicas (const PpTimelineModel *m)
{
  return m != NULL ? m->n_replicas : 1;
}

int
pp_timeline_model_shown_dp (const PpTimelineModel *m)
{
  int dp = -1;
  for (int r = 0; m != NULL && r < m->n_ranks; r++)
    if (m->ranks[r].shown_process >= 0 && (dp < 0 || m->ranks[r].shown_coord[PP_TRACE_MESH_DP] < dp))
      dp = m->ranks[r].shown_coord[PP_TRACE_MESH_DP];
  return dp < 0 ? 0 : dp;
}

size_t
pp_timeline_model_n_spans_analysed (const PpTimelineModel *m)
{
  return m != NULL ? pp_timeline_model_n_spans_total (m) + (size_t) pp_timeline_model_n_hidden_spans (m) : 0;
}

uint64_t
pp_timeline_model_n_hidden_spans (const PpTimelineModel *m)
{
  return m != NULL ? m->hidden_spans : 0;
}

void
pp_timeline_replica_note_format (const int32_t shown[PP_TRACE_MESH_DIMS],
                                 const int32_t size[PP_TRACE_MESH_DIMS], uint32_t flags, char *buf,
                                 size_t bufsize)
{
  /* numbered by pipescope, not read from the job: said, as info says it */
  const char *unread = flags & PP_TRACE_PROCESS_UNPLACED ? " (place not read: dp by global rank)" : "";
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  int64_t n = pp_trace_mesh_count (size, PP_TRACE_MESH_DP);
  int only_dp = 1;
  if (bufsize == 0)
    return;
  buf[0] = '\0';
  for (int d = PP_TRACE_MESH_DP + 1; d < PP_TRACE_MESH_DIMS; d++)
    if (size[d] > 1)
      only_dp = 0;
  if (n <= 1)
    return;
  if (only_dp)
    {
      snprintf (buf, bufsize, "replica dp %d of %d shown%s", shown[PP_TRACE_MESH_DP], size[PP_TRACE_MESH_DP],
                unread);
      return;
    }
  /* tensor (context, expert) ranks too: which process, of which mesh */
  char place[96] = "", mesh[96] = "";
  size_t lp = 0, lm = 0;
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (size[d] > 1 && lp < sizeof place && lm < sizeof mesh)
      {
        lp += (size_t) snprintf (place + lp, sizeof place - lp, "%s%s %d", lp ? " " : "", dim[d], shown[d]);
        lm += (size_t) snprintf (mesh + lm, sizeof mesh - lm, "%s%s %d", lm ? " \u00d7 " : "", dim[d], size[d]);
      }
  snprintf (buf, bufsize, "1 of %lld processes a rank shown (%s of %s)%s", (long long) n, place, mesh, unread);
}

void
pp_timeline_model_replica_note (const PpTimelineModel *m, char *buf, size_t size)
{
  int32_t shown[PP_TRACE_MESH_DIMS] = { 0 }, sizes[PP_TRACE_MESH_DIMS] = { 1, 1, 1, 1, 1 };
  uint32_t flags = 0;
  if (size == 0)
    return;
  buf[0] = '\0';
  if (m != NULL && m->is_view)
    {
      snprintf (buf, size, "%s", m->note);
      return;
    }
  if (m == NULL || m->n_replicas <= 1)
    return;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    {
      int lo = -1;
      for (int r = 0; r < m->n_ranks; r++)
        if (m->ranks[r].shown_process >= 0 && (lo < 0 || m->ranks[r].shown_coord[d] < lo))
          lo = m->ranks[r].shown_coord[d];
      shown[d] = lo < 0 ? 0 : lo;
      sizes[d] = m->mesh_size[d] > 0 ? m->mesh_size[d] : 1;
    }
  for (int r = 0; r < m->n_ranks; r++)
    if (m->ranks[r].shown_process >= 0)
      flags |= m->ranks[r].shown_flags;
  pp_timeline_replica_note_format (shown, sizes, flags, buf, size);
}
