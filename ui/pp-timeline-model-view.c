/* pp-timeline-model-view.c — views: models whose ranks are rows that
 * pp-timeline-fold.c builds over the replicas (folded or unfolded), with
 * their source's description, steps, losses and counters, and what each
 * row is and says. */
#include "pp-timeline-model-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- views (pp-timeline-fold.c builds them) ---- */

PpTimelineModel *
pp_timeline_model_new_like (const PpTimelineModel *src)
{
  PpTimelineModel *v = pp_timeline_model_new ();
  if (v == NULL)
    return NULL;
  v->is_view = 1;
  if (src == NULL)
    return v;
  v->truncated = src->truncated;
  if (src->has_desc)
    {
      v->has_desc = 1;
      v->desc = src->desc;
    }
  if (src->plan_origin_ns != INT64_MIN)
    v->plan_origin_ns = src->plan_origin_ns;
  for (size_t i = 0; i < src->n_marks; i++)
    {
      see_time (v, src->marks[i].t, src->marks[i].t);
      push_mark (v, src->marks[i].t, src->marks[i].step);
    }
  v->max_marked_step = src->max_marked_step;
  stuck_copy (v, src);   /* no memory: the view draws no open action */
  v->provisional_step = src->provisional_step;
  for (size_t i = 0; i < src->n_strings; i++)
    add_string (v, src->strings[i].id, src->strings[i].name);
  if (src->n_losses > 0 && (v->losses = malloc (src->n_losses * sizeof *v->losses)) != NULL)
    {
      memcpy (v->losses, src->losses, src->n_losses * sizeof *v->losses);
      v->n_losses = src->n_losses;
      v->n_loss_counters = src->n_loss_counters;
    }
  if (src->n_loss_series > 0 && (v->loss_series = calloc (src->n_loss_series, sizeof *v->loss_series)) != NULL)
    for (size_t i = 0; i < src->n_loss_series; i++)
      {
        const LossSeries *from = &src->loss_series[i];
        LossSeries *to = &v->loss_series[v->n_loss_series];
        to->dp = from->dp;
        if (from->n > 0 && (to->v = malloc (from->n * sizeof *to->v)) == NULL)
          break;
        if (from->n > 0)
          memcpy (to->v, from->v, from->n * sizeof *to->v);
        to->n = from->n;
        v->n_loss_series++;
      }
  retime_edges (src);
  if (src->n_edge > 0 && (v->edge = malloc (src->n_edge * sizeof *v->edge)) != NULL
      && (v->edge_process = malloc (src->n_edge * sizeof *v->edge_process)) != NULL
      && (v->edge_raw_ns = malloc (src->n_edge * sizeof *v->edge_raw_ns)) != NULL)
    {
      memcpy (v->edge, src->edge, src->n_edge * sizeof *v->edge);
      memcpy (v->edge_process, src->edge_process, src->n_edge * sizeof *v->edge_process);
      memcpy (v->edge_raw_ns, src->edge_raw_ns, src->n_edge * sizeof *v->edge_raw_ns);
      v->n_edge = v->cap_edge = src->n_edge;
    }
  v->dropped = src->dropped;
  /* the places, without their spans: who a fold's slowest replica is */
  if (src->n_procs > 0 && src->proc_at != NULL
      && (v->procs = calloc ((size_t) src->n_procs, sizeof *v->procs)) != NULL
      && (v->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *v->proc_at)) != NULL)
    {
      memcpy (v->proc_at, src->proc_at, PP_TRACE_MAX_PROCESSES * sizeof *v->proc_at);
      for (int i = 0; i < src->n_procs; i++)
        {
          v->procs[i].place = src->procs[i].place;
          v->procs[i].placed = src->procs[i].placed;
          v->procs[i].r.max_end_ns = INT64_MIN;
        }
      v->n_procs = v->cap_procs = src->n_procs;
      v->places_dirty = 1;
    }
  v->n_processes = src->n_processes;
  v->n_replicas = src->n_replicas;
  memcpy (v->mesh_size, src->mesh_size, sizeof v->mesh_size);
  return v;
}

int
pp_timeline_model_view_add_row (PpTimelineModel *v, const PpTimelineModel *src, int rank,
                                int process, int n_folded, const char *label, int with_plan)
{
  int row = v->n_ranks;
  if (!v->is_view || ensure_rank (v, row) != 0)
    return -1;
  v->generation++;
  Row *rw = &v->rows[row];
  rw->rank = rank;
  rw->process = process;
  rw->n_folded = n_folded;
  snprintf (rw->label, sizeof rw->label, "%s", label ? label : "");
  Rank *rk = &v->ranks[row];
  if (process >= 0 && src->proc_at != NULL && src->proc_at[process] >= 0)
    snprintf (rk->host, sizeof rk->host, "%s", src->procs[src->proc_at[process]].place.host);
  else if (rank >= 0 && rank < src->n_ranks)
    snprintf (rk->host, sizeof rk->host, "%s", src->ranks[rank].host);
  if (rank >= 0 && rank < src->n_ranks)
    {
      rk->lost_ns = src->ranks[rank].lost_ns;
      rk->peak_activation = src->ranks[rank].peak_activation;
      rk->peak_inflight = src->ranks[rank].peak_inflight;
      if (with_plan && src->raw_plans[rank].n > 0
          && (v->raw_plans[row].a = malloc (src->raw_plans[rank].n * sizeof *v->raw_plans[row].a)) != NULL)
        {
          memcpy (v->raw_plans[row].a, src->raw_plans[rank].a,
                  src->raw_plans[rank].n * sizeof *v->raw_plans[row].a);
          v->raw_plans[row].n = src->raw_plans[rank].n;
          v->raw_plans[row].timed = src->raw_plans[rank].timed;
          v->n_plan_items++;
          if (place_plan (v, row) == 0)
            widen_plan_extent (v, row);
        }
    }
  return row;
}

int
pp_timeline_model_view_add_spans (PpTimelineModel *v, int row, const PpSpan *spans, size_t n,
                                  const PpTimelineFold *fold)
{
  if (!v->is_view || row < 0 || row >= v->n_ranks)
    return -1;
  v->generation++;
  Rank *rk = &v->ranks[row];
  size_t before = rk->n_spans;
  for (size_t i = 0; i < n; i++)
    {
      PpSpan s = spans[i];
      s.rank = row;
      add_span (v, &s, 0);   /* on the source's clock already */
    }
  if (rk->n_spans != before + n)
    return -1;
  if (fold != NULL && n > 0)
    {
      Row *rw = &v->rows[row];
      PpTimelineFold *f = realloc (rw->fold, (before + n) * sizeof *f);
      if (f == NULL)
        return -1;
      memcpy (f + before, fold, n * sizeof *f);
      rw->fold = f;
    }
  return 0;
}

void
pp_timeline_model_view_set_note (PpTimelineModel *v, const char *note)
{
  if (v != NULL && v->is_view)
    snprintf (v->note, sizeof v->note, "%s", note);
}

int
pp_timeline_model_is_view (const PpTimelineModel *m)
{
  return m != NULL && m->is_view;
}

int
pp_timeline_model_row_rank (const PpTimelineModel *m, int row)
{
  if (m == NULL || row < 0 || row >= m->n_ranks)
    return -1;
  return m->is_view ? m->rows[row].rank : row;
}

int
pp_timeline_model_row_process (const PpTimelineModel *m, int row)
{
  return m != NULL && m->is_view && row >= 0 && row < m->n_ranks ? m->rows[row].process : -1;
}

int
pp_timeline_model_row_folded (const PpTimelineModel *m, int row)
{
  return m != NULL && m->is_view && row >= 0 && row < m->n_ranks ? m->rows[row].n_folded : 0;
}

void
pp_timeline_model_view_set_row_label (PpTimelineModel *v, int row, const char *label)
{
  if (v == NULL || !v->is_view || row < 0 || row >= v->n_ranks)
    return;
  snprintf (v->rows[row].label, sizeof v->rows[row].label, "%s", label ? label : "");
  v->generation++;
}

const PpTimelineFold *
pp_timeline_model_fold (const PpTimelineModel *m, int row, long index)
{
  if (m == NULL || !m->is_view || row < 0 || row >= m->n_ranks || m->rows[row].fold == NULL
      || index < 0 || (size_t) index >= m->ranks[row].n_spans)
    return NULL;
  settle (m, row);   /* spans came sorted: nothing moves, the folds stay beside them */
  return &m->rows[row].fold[index];
}

void
pp_timeline_model_view_set_bubbles (PpTimelineModel *v, const double *by_rank, int n_steps)
{
  if (v == NULL || !v->is_view || v->n_ranks == 0)
    return;
  v->generation++;
  free (v->row_bubbles);
  if ((v->row_bubbles = malloc ((size_t) v->n_ranks * sizeof *v->row_bubbles)) == NULL)
    return;
  for (int r = 0; r < v->n_ranks; r++)
    v->row_bubbles[r] = by_rank[v->rows[r].rank];
  v->row_bubble_steps = n_steps;
}
