/* pp-trace-places.c — processes whose place on the job's mesh the hook
 * could not read (PP_TRACE_PROCESS_UNPLACED), numbered as replicas of
 * their pipeline rank.
 *
 * Such a process knows its global rank and its pipeline rank, nothing
 * else: its file says dp 0.  Two of one pipeline rank would claim one
 * place, so the merge numbers them, the same way every time: within a
 * pipeline rank, in order of global rank, after the placed processes of
 * that rank.  The flag stays on, so that every view says the place was
 * not read from the job and the numbering is pipescope's, not the job's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace.h"

static const PpTraceProcess *sort_ps;   /* qsort has no user data */

static int
cmp_rank_process (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_ps[*(const size_t *) a], *y = &sort_ps[*(const size_t *) b];
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

PpStatus
pp_trace_number_unplaced (PpTraceProcess *ps, size_t n, PpError *err)
{
  size_t *idx = malloc ((n + 1) * sizeof *idx);
  if (idx == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    idx[i] = i;
  sort_ps = ps;
  qsort (idx, n, sizeof *idx, cmp_rank_process);
  int32_t most = 0;   /* the largest dp size a rank's numbering reaches */
  for (size_t i = 0; i < n;)
    {
      size_t j = i;
      int32_t base = 0, k = 0;
      for (; j < n && ps[idx[j]].rank == ps[idx[i]].rank; j++)
        if (!(ps[idx[j]].flags & PP_TRACE_PROCESS_UNPLACED) && ps[idx[j]].coord[PP_TRACE_MESH_DP] + 1 > base)
          base = ps[idx[j]].coord[PP_TRACE_MESH_DP] + 1;
      for (size_t q = i; q < j; q++)
        {
          PpTraceProcess *p = &ps[idx[q]];
          if (!(p->flags & PP_TRACE_PROCESS_UNPLACED))
            continue;
          for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
            p->coord[d] = 0;
          p->coord[PP_TRACE_MESH_DP] = base + k++;
          /* the placed processes' sizes stay theirs; the pp size too */
          for (int d = PP_TRACE_MESH_TP; d < PP_TRACE_MESH_DIMS; d++)
            p->size[d] = 1;
        }
      if (base + k > most)
        most = base + k;
      i = j;
    }
  for (size_t i = 0; i < n; i++)
    if (ps[i].flags & PP_TRACE_PROCESS_UNPLACED)
      ps[i].size[PP_TRACE_MESH_DP] = most > 0 ? most : 1;
  free (idx);
  return PP_OK;
}

int64_t
pp_trace_mesh_count (const int32_t size[PP_TRACE_MESH_DIMS], int from)
{
  int64_t n = 1;
  for (int d = from < 0 ? 0 : from; d < PP_TRACE_MESH_DIMS; d++)
    {
      int64_t k = size[d] > 1 ? size[d] : 1;
      n = n > INT64_MAX / k ? INT64_MAX : n * k;
    }
  return n;
}

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_ps[*(const size_t *) a], *y = &sort_ps[*(const size_t *) b];
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

PpStatus
pp_trace_places_check (const PpTraceProcess *ps, size_t n, PpError *err)
{
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  int32_t size[PP_TRACE_MESH_DIMS] = { 1, 1, 1, 1, 1 };
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
      if (ps[i].size[d] > size[d])
        size[d] = ps[i].size[d];
  if (pp_trace_mesh_count (size, PP_TRACE_MESH_PP) > PP_TRACE_MAX_PROCESSES)
    return pp_error_set (err, PP_EFORMAT, "trace: the places of its %zu processes disagree: their largest "
                         "sizes make a mesh (pp %d x dp %d x tp %d x cp %d x ep %d) of more than %d "
                         "processes", n, size[0], size[1], size[2], size[3], size[4],
                         PP_TRACE_MAX_PROCESSES);
  size_t *idx = malloc ((n + 1) * sizeof *idx), k = 0;
  if (idx == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    if (!(ps[i].flags & PP_TRACE_PROCESS_UNPLACED))
      idx[k++] = i;
  sort_ps = ps;
  qsort (idx, k, sizeof *idx, cmp_place);
  for (size_t j = 1; j < k; j++)
    {
      const PpTraceProcess *a = &ps[idx[j - 1]], *b = &ps[idx[j]];
      if (memcmp (a->coord, b->coord, sizeof a->coord) != 0)
        continue;
      char where[96];
      size_t l = 0;
      for (int d = 0; d < PP_TRACE_MESH_DIMS && l < sizeof where; d++)
        if (d <= PP_TRACE_MESH_TP || size[d] > 1)
          l += (size_t) snprintf (where + l, sizeof where - l, "%s%s %d", l ? " " : "", dim[d], a->coord[d]);
      free (idx);
      return pp_error_set (err, PP_EFORMAT, "trace: processes %d and %d both claim the place %s: the job's "
                           "mesh was read wrong, or a trace is from another run", a->process, b->process,
                           where);
    }
  free (idx);
  return PP_OK;
}
