/* pp-import-kineto-ranks.c — the files as ranks and processes: a rank's
 * files of different times merged into one, and a job of many pipelines
 * (data-parallel replicas) told from their stages or meshes, each file a
 * process placed, numbered and checked as merge does. */
#include "pp-import-kineto-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- putting the ranks together ------------------------------------------ */


/* The time the file's events cover, into rd->ext_lo, ext_hi (lo > hi when
 * it has none): once a file, as a rank's many files are merged. */
void
ev_extent (RankData *rd)
{
  rd->ext_lo = INT64_MAX;
  rd->ext_hi = INT64_MIN;
  for (size_t k = 0; k < rd->n_ev; k++)
    {
      if (rd->ev[k].start < rd->ext_lo) rd->ext_lo = rd->ev[k].start;
      if (rd->ev[k].end > rd->ext_hi) rd->ext_hi = rd->ev[k].end;
    }
}

/* from's events and launches join to's (another time window of its rank);
 * from is emptied. */
static PpStatus
merge_failed (const RankData *to, const RankData *from, PpError *err)
{
  if (to->budget != NULL && to->budget->over)
    return pp_error_set (err, PP_EFORMAT,
                         "%s: its events and those of %s, traces of one rank, are more than an import "
                         "holds (%zu MiB of events): refused", from->name, to->name, PP_IMPORT_MAX_KEPT >> 20);
  return pp_error_set (err, PP_ENOMEM, "out of memory");
}

PpStatus
merge_rank (RankData *to, RankData *from, PpError *err)
{
  for (size_t k = 0; k < from->n_ev; k++)
    if (!push_ev (to, &from->ev[k]))
      return merge_failed (to, from, err);
  for (size_t k = 0; k < from->n_launch; k++)
    if (!push_launch (to, from->launch[k].corr, from->launch[k].ts, from->launch[k].tid))
      return merge_failed (to, from, err);
  for (size_t k = 0; k < from->n_op; k++)
    if (!push_op (to, from->op[k].start, from->op[k].end, from->op[k].tid, from->op[k].comm))
      return merge_failed (to, from, err);
  if (from->ext_lo < to->ext_lo) to->ext_lo = from->ext_lo;
  if (from->ext_hi > to->ext_hi) to->ext_hi = from->ext_hi;
  to->n_pp += from->n_pp;
  to->n_gpipe += from->n_gpipe;
  to->n_steps += from->n_steps;
  if (from->min_step < to->min_step)
    to->min_step = from->min_step;
  if (to->pid == 0)
    to->pid = from->pid;
  budget_give (from->budget, from->cap_ev * sizeof *from->ev + from->cap_launch * sizeof *from->launch
                                + from->cap_op * sizeof *from->op, true);
  free (from->ev);
  free (from->launch);
  free (from->op);
  from->cap_ev = from->cap_launch = from->cap_op = 0;
  from->ev = NULL;
  from->launch = NULL;
  from->op = NULL;
  from->n_ev = from->n_launch = from->n_op = 0;
  return PP_OK;
}

int
cmp_int32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return x < y ? -1 : x > y;
}

/* ---- processes: a job of many pipelines ------------------------------------ */

/* The least stage the file's PP: blocks run, INT32_MAX none: with the
 * schedule's placement (stage s on pipeline rank s mod P, V-shaped ones
 * too) the pipeline rank's least stage is its rank. */
static int
least_stage (const RankData *rd)
{
  int m = INT32_MAX;
  for (size_t k = 0; k < rd->n_ev; k++)
    if (rd->ev[k].what == EV_BLOCK && !rd->ev[k].gpipe && rd->ev[k].stage < m)
      m = rd->ev[k].stage;
  return m;
}

/* Is this a job of many pipelines, and where is each file?  It is when a
 * file's place was read from its mesh, or two processes (files that say
 * their global rank: said) run the same stages (replicas).  Then each file's process is its global rank (rank
 * as read so far) and rank becomes its pipeline rank: the mesh's pp
 * coordinate, else (place not read) the place of its least stage among
 * the files' least stages.  *mesh false: files are ranks, as before. */
PpStatus
place_processes (Import *im, bool said, bool *mesh, PpError *err)
{
  size_t n = im->n;
  int *least = malloc ((n + 1) * sizeof *least), *sorted = malloc ((n + 1) * sizeof *sorted);
  int *least_rank = malloc ((n + 1) * sizeof *least_rank);
  size_t n_least = 0;
  bool placed = false, twice = false;
  PpStatus st = PP_OK;

  *mesh = false;
  if (least == NULL || sorted == NULL || least_rank == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    {
      least[i] = least_stage (&im->ranks[i]);
      placed |= im->ranks[i].placed;
      if (least[i] != INT32_MAX)
        sorted[n_least++] = least[i];
    }
  if (n_least > 1)
    qsort (sorted, n_least, sizeof *sorted, cmp_int32);
  size_t u = 0;
  for (size_t q = 0; q < n_least; q++)
    if (u == 0 || sorted[q] != sorted[u - 1])
      sorted[u++] = sorted[q];
  /* fewer stage sets than processes running them: replicas (one
   * process's files of two profiling cycles are one process) */
  size_t n_proc = 0, p = 0;
  for (size_t i = 0; i < n; i++)
    if (least[i] != INT32_MAX)
      least_rank[n_proc++] = im->ranks[i].rank;
  if (n_proc > 1)
    qsort (least_rank, n_proc, sizeof *least_rank, cmp_int32);
  for (size_t q = 0; q < n_proc; q++)
    p += q == 0 || least_rank[q] != least_rank[q - 1];
  twice = said && u < p;
  if (!placed && !twice)
    goto out;
  *mesh = true;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im->ranks[i];
      rd->process = rd->rank;
      rd->world = -1;
      if (rd->process >= PP_TRACE_MAX_PROCESSES)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: process %d: a trace holds processes 0 to %d",
                             rd->name, rd->process, PP_TRACE_MAX_PROCESSES - 1);
          goto out;
        }
      if (rd->placed)
        {
          rd->rank = rd->coord[PP_TRACE_MESH_PP];
          continue;
        }
      if (least[i] == INT32_MAX)
        {
          st = pp_error_set (err, PP_EFORMAT,
                             "%s: process %d runs no labelled pipeline action and its trace has no "
                             "mesh_pp process group: its pipeline rank cannot be told; leave its "
                             "file out or profile the job with 'pipescope-cli profile'",
                             rd->name, rd->process);
          goto out;
        }
      size_t lo = 0, hi = u;
      while (lo < hi)
        {
          size_t mid = lo + (hi - lo) / 2;
          if (sorted[mid] < least[i])
            lo = mid + 1;
          else
            hi = mid;
        }
      rd->rank = (int) lo;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        {
          rd->coord[d] = 0;
          rd->size[d] = 1;
        }
      rd->coord[PP_TRACE_MESH_PP] = rd->rank;
    }
out:
  free (least);
  free (sorted);
  free (least_rank);
  return st;
}

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = a, *y = b;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* The place of im->ranks[i] as a PROCESS frame says it. */
PpTraceProcess
process_of (const RankData *rd)
{
  PpTraceProcess p;
  memset (&p, 0, sizeof p);
  p.process = rd->process;
  p.rank = rd->rank;
  memcpy (p.coord, rd->coord, sizeof p.coord);
  memcpy (p.size, rd->size, sizeof p.size);
  p.pid = rd->pid;
  p.flags = rd->placed ? 0 : PP_TRACE_PROCESS_UNPLACED;
  snprintf (p.host, sizeof p.host, "%s", rd->host);
  return p;
}

/* The processes (one file each now) numbered where their place was not
 * read, as merge numbers them (pp_trace_number_unplaced), every place
 * checked, and no place held twice: one line naming both files. */
PpStatus
number_processes (Import *im, PpImportSummary *sum, PpError *err)
{
  size_t n = im->n;
  PpTraceProcess *ps = calloc (n + 1, sizeof *ps);
  PpStatus st = PP_OK;
  int32_t P = 0;
  if (ps == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    {
      ps[i] = process_of (&im->ranks[i]);
      if (ps[i].rank + 1 > P)
        P = ps[i].rank + 1;
      if (ps[i].size[PP_TRACE_MESH_PP] > P)
        P = ps[i].size[PP_TRACE_MESH_PP];
    }
  for (size_t i = 0; i < n; i++)
    if (ps[i].flags & PP_TRACE_PROCESS_UNPLACED)
      ps[i].size[PP_TRACE_MESH_PP] = P;
  if ((st = pp_trace_number_unplaced (ps, n, err)) != PP_OK)
    goto out;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im->ranks[i];
      PpError e2 = { 0 };
      memcpy (rd->coord, ps[i].coord, sizeof rd->coord);
      memcpy (rd->size, ps[i].size, sizeof rd->size);
      if (pp_trace_process_check (&ps[i], &e2) != PP_OK)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: process %d: %s", rd->name, rd->process, e2.msg);
          goto out;
        }
    }
  if (n > 1)
    qsort (ps, n, sizeof *ps, cmp_place);
  for (size_t i = 1; i < n; i++)
    if (memcmp (ps[i].coord, ps[i - 1].coord, sizeof ps[i].coord) == 0)
      {
        const char *a = "?", *b = "?";
        for (size_t j = 0; j < n; j++)
          {
            if (im->ranks[j].process == ps[i - 1].process) a = im->ranks[j].name;
            if (im->ranks[j].process == ps[i].process) b = im->ranks[j].name;
          }
        st = pp_error_set (err, PP_EFORMAT,
                           "%s (process %d) and %s (process %d) both claim the place pp %d dp %d tp %d: "
                           "give the traces of one job",
                           a, ps[i - 1].process, b, ps[i].process, ps[i].coord[PP_TRACE_MESH_PP],
                           ps[i].coord[PP_TRACE_MESH_DP], ps[i].coord[PP_TRACE_MESH_TP]);
        goto out;
      }
  sum->processes = (int) n;
  for (size_t i = 0; i < n; i++)
    {
      sum->unplaced += !im->ranks[i].placed;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (ps[i].size[d] > sum->mesh_size[d])
          sum->mesh_size[d] = ps[i].size[d];
    }
out:
  free (ps);
  return st;
}
