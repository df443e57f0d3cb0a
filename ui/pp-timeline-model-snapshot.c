/* pp-timeline-model-snapshot.c — a frozen copy of a model, for an analysis
 * on another thread.
 *
 * The model is not thread-safe even for readers: its const queries settle
 * what came since the last one (a rank's late spans sorted into place, the
 * step boundaries sorted, the places ordered, the extents and the edge
 * counters' clocks brought up to date, the step bubbles and each row's
 * edge counters cached), and a live run grows it on the main loop.  So
 * the app's worker never reads the model the window draws: it reads a
 * snapshot made on the main loop, which it owns alone until it frees it.
 * Whatever the worker's queries then settle or cache is its own copy's.
 *
 * Everything a query reads is copied (the arrays at their length, not
 * their capacity); the caches start empty (the worker fills its own); the
 * loss accumulator is left out (it only serves the next add), and the copy
 * takes no add: it says what the source held at the moment it was made.
 * A view (pp-timeline-fold.c) is not copied: the app analyses runs. */
#include "pp-timeline-model-internal.h"

#include <stdlib.h>
#include <string.h>

/* A copy of n items of size bytes (NULL for none); *ok FALSE when out of
 * memory. */
static void *
dup_n (const void *src, size_t n, size_t size, int *ok)
{
  if (src == NULL || n == 0)
    return NULL;
  void *d = malloc (n * size);
  if (d == NULL)
    {
      *ok = 0;
      return NULL;
    }
  memcpy (d, src, n * size);
  return d;
}

/* A rank's (or a process's) arrays, at their length. */
static void
copy_rank (Rank *to, const Rank *from, int *ok)
{
  *to = *from;
  to->spans = dup_n (from->spans, from->n_spans, sizeof *from->spans, ok);
  to->cap_spans = to->spans ? from->n_spans : 0;
  to->untagged = dup_n (from->untagged, from->n_untagged, sizeof *from->untagged, ok);
  to->cap_untagged = to->untagged ? from->n_untagged : 0;
  to->plan = dup_n (from->plan, from->n_plan, sizeof *from->plan, ok);
  to->mem = dup_n (from->mem, from->n_mem, sizeof *from->mem, ok);
}

PpTimelineModel *
pp_timeline_model_snapshot (const PpTimelineModel *src)
{
  if (src == NULL || src->is_view)
    return NULL;
  PpTimelineModel *m = malloc (sizeof *m);
  if (m == NULL)
    return NULL;
  int ok = 1;
  *m = *src;
  m->frozen = 1;
  /* nothing shared: every pointer below is the copy's, or NULL */
  m->ranks = NULL;
  m->raw_plans = NULL;
  m->rows = NULL;
  m->row_bubbles = NULL;
  m->loss_acc = NULL;
  memset (&m->step_cache, 0, sizeof m->step_cache);
  memset (&m->row_edge, 0, sizeof m->row_edge);
  memset (&m->stuck, 0, sizeof m->stuck);
  if (src->cap_ranks > 0)
    {
      m->ranks = calloc ((size_t) src->cap_ranks, sizeof *m->ranks);
      m->raw_plans = calloc ((size_t) src->cap_ranks, sizeof *m->raw_plans);
      if (m->ranks == NULL || m->raw_plans == NULL)
        ok = 0;
      for (int r = 0; ok && r < src->cap_ranks; r++)
        {
          copy_rank (&m->ranks[r], &src->ranks[r], &ok);
          m->raw_plans[r] = src->raw_plans[r];
          m->raw_plans[r].a = dup_n (src->raw_plans[r].a, src->raw_plans[r].n, sizeof *src->raw_plans[r].a, &ok);
        }
      /* out of memory: the ranks not reached are calloc's zeros */
    }
  else
    m->cap_ranks = m->n_ranks = 0;
  m->marks = dup_n (src->marks, src->n_marks, sizeof *src->marks, &ok);
  m->cap_marks = m->marks ? src->n_marks : 0;
  m->step_starts = dup_n (src->step_starts, src->n_steps, sizeof *src->step_starts, &ok);
  m->step_numbers = dup_n (src->step_numbers, src->n_steps, sizeof *src->step_numbers, &ok);
  m->losses = dup_n (src->losses, src->n_losses, sizeof *src->losses, &ok);
  m->loss_series = NULL;
  m->n_loss_series = 0;
  if (src->n_loss_series > 0 && (m->loss_series = calloc (src->n_loss_series, sizeof *m->loss_series)) != NULL)
    for (size_t i = 0; i < src->n_loss_series; i++, m->n_loss_series++)
      {
        m->loss_series[i] = src->loss_series[i];
        m->loss_series[i].v = dup_n (src->loss_series[i].v, src->loss_series[i].n, sizeof *src->loss_series[i].v, &ok);
      }
  else if (src->n_loss_series > 0)
    ok = 0;
  m->edge = dup_n (src->edge, src->n_edge, sizeof *src->edge, &ok);
  m->edge_process = dup_n (src->edge_process, src->n_edge, sizeof *src->edge_process, &ok);
  m->edge_raw_ns = dup_n (src->edge_raw_ns, src->n_edge, sizeof *src->edge_raw_ns, &ok);
  m->cap_edge = m->edge ? src->n_edge : 0;
  m->strings = NULL;
  m->n_strings = m->cap_strings = 0;
  if (src->n_strings > 0 && (m->strings = calloc (src->n_strings, sizeof *m->strings)) != NULL)
    for (size_t i = 0; i < src->n_strings; i++, m->n_strings++)
      {
        m->strings[i].id = src->strings[i].id;
        if (src->strings[i].name != NULL && (m->strings[i].name = strdup (src->strings[i].name)) == NULL)
          ok = 0;
      }
  else if (src->n_strings > 0)
    ok = 0;
  m->cap_strings = m->n_strings;
  m->process_bits = dup_n (src->process_bits, PP_TRACE_MAX_PROCESSES / 8 + 1, 1, &ok);
  m->procs = NULL;
  m->n_procs = m->cap_procs = 0;
  if (src->n_procs > 0 && (m->procs = calloc ((size_t) src->n_procs, sizeof *m->procs)) != NULL)
    for (int i = 0; i < src->n_procs; i++, m->n_procs++)
      {
        /* a process keeps spans only (pp_timeline_model_free frees no more) */
        m->procs[i] = src->procs[i];
        m->procs[i].r.spans = dup_n (src->procs[i].r.spans, src->procs[i].r.n_spans, sizeof *src->procs[i].r.spans, &ok);
        m->procs[i].r.cap_spans = m->procs[i].r.spans ? src->procs[i].r.n_spans : 0;
        m->procs[i].r.untagged = NULL;
        m->procs[i].r.plan = NULL;
        m->procs[i].r.mem = NULL;
      }
  else if (src->n_procs > 0)
    ok = 0;
  m->cap_procs = m->n_procs;
  m->proc_at = dup_n (src->proc_at, PP_TRACE_MAX_PROCESSES, sizeof *src->proc_at, &ok);
  /* the places in mesh order, as far as the source had ordered them */
  m->places = src->places != NULL ? dup_n (src->places, (size_t) src->n_places + 1, sizeof *src->places, &ok)
                                  : NULL;
  if (m->places == NULL)
    {
      m->n_places = 0;
      m->places_dirty = 1;
    }
  if (!pp_stuck_watch_copy (&m->stuck, &src->stuck))
    ok = 0;
  if (!ok)
    {
      pp_timeline_model_free (m);
      return NULL;
    }
  return m;
}
