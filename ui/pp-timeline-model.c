/* pp-timeline-model.c — a run's trace in memory, for drawing and stats.
 *
 * Spans live per rank in one array sorted by start.  Live traces deliver
 * spans nearly in order, so an add is an append in the common case and a
 * binary search plus memmove of the short tail otherwise: queries stay
 * const and never sort.
 *
 * A job whose pipeline ranks each run in several processes (replicas:
 * PROCESS frames, trace format 1.4): a rank's row holds one process, the
 * lowest place of its rank (dp first, then tp, cp, ep), and every number
 * computed over the ranks is that replica's; a lower place that comes
 * after another was shown replaces it (its spans and memory go; a step
 * marker it gave stays).  Every placed process's spans are kept besides,
 * in its own list (procs), for the views that fold or unfold the replicas
 * (pp-timeline-fold.c builds them as models whose ranks are rows).
 *
 * This file: the model's life, each frame taken in (pp_timeline_model_add
 * hands it to the file of its idea), a trace read from a file, and what
 * the run says of itself (description, strings, drops).  The files beside
 * it, pp-timeline-model-internal.h between them, from the bottom up, each
 * calling only the ones before it (test-layers: no circle): -ranks.c (a
 * rank's row and its stored spans), -plan.c, -processes.c (each process,
 * its place and clock), -steps.c, -counters.c (losses, memory, block-edge
 * counters), -spans.c (a span onto its row, the extents), -replicas.c
 * (which replica a row shows), -stats.c; -view.c calls this file too.
 */
#include "pp-timeline-model-internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PpTimelineModel *
pp_timeline_model_new (void)
{
  PpTimelineModel *m = calloc (1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->start_ns = INT64_MAX;
  m->end_ns = INT64_MIN;
  m->span_start_ns = INT64_MAX;
  m->span_end_ns = INT64_MIN;
  m->plan_origin_ns = INT64_MIN;
  m->plan_ps = INT64_MAX;
  m->plan_pe = INT64_MIN;
  m->max_marked_step = -1;
  m->provisional_step = -1;
  m->n_replicas = 1;
  return m;
}

void
pp_timeline_model_free (PpTimelineModel *m)
{
  if (m == NULL)
    return;
  for (int r = 0; r < m->cap_ranks; r++)
    {
      free (m->ranks[r].spans);
      free (m->ranks[r].mem);
      free (m->ranks[r].untagged);
      free (m->ranks[r].plan);
      free (m->raw_plans[r].a);
    }
  for (int i = 0; i < m->n_procs; i++)
    free (m->procs[i].r.spans);
  free (m->procs);
  free (m->proc_at);
  free (m->places);
  if (m->rows != NULL)
    for (int r = 0; r < m->cap_ranks; r++)
      free (m->rows[r].fold);
  free (m->rows);
  free (m->row_bubbles);
  free (m->step_cache.bubble);
  free (m->row_edge.c);
  free (m->row_edge.at);
  pp_stuck_watch_clear (&m->stuck);
  free (m->ranks);
  free (m->process_bits);
  free (m->raw_plans);
  free (m->marks);
  free (m->step_starts);
  free (m->step_numbers);
  free (m->losses);
  for (size_t i = 0; i < m->n_loss_series; i++)
    free (m->loss_series[i].v);
  free (m->loss_series);
  pp_analysis_loss_free (m->loss_acc);
  free (m->edge);
  free (m->edge_process);
  free (m->edge_raw_ns);
  for (size_t i = 0; i < m->n_strings; i++)
    free (m->strings[i].name);
  free (m->strings);
  free (m);
}

int
add_string (PpTimelineModel *m, uint32_t id, const char *name)
{
  size_t lo = 0, hi = m->n_strings;
  char *copy;

  if (id == 0)
    return 0;
  copy = strdup (name);
  if (copy == NULL)
    return 0;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (m->strings[mid].id < id)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < m->n_strings && m->strings[lo].id == id)
    {
      free (m->strings[lo].name);   /* the last one for an id wins */
      m->strings[lo].name = copy;
      return 1;
    }
  if (m->n_strings == m->cap_strings)
    {
      size_t cap = m->cap_strings ? 2 * m->cap_strings : 64;
      String *n = realloc (m->strings, cap * sizeof *n);
      if (n == NULL)
        {
          free (copy);
          return 0;
        }
      m->strings = n;
      m->cap_strings = cap;
    }
  memmove (m->strings + lo + 1, m->strings + lo, (m->n_strings - lo) * sizeof *m->strings);
  m->strings[lo].id = id;
  m->strings[lo].name = copy;
  m->n_strings++;
  return 1;
}

int
pp_timeline_model_add (PpTimelineModel *m, const PpTraceItem *item)
{
  if (m == NULL || item == NULL || m->frozen)
    return 0;
  m->generation++;
  /* what every process is doing now (issue 37), whichever replica shows */
  if (!m->is_view && (item->type == PP_TRACE_ITEM_OPEN || item->type == PP_TRACE_ITEM_SPAN
                      || item->type == PP_TRACE_ITEM_PROCESS || item->type == PP_TRACE_ITEM_STEP_MARKER))
    stuck_take (m, item);
  if (item->type == PP_TRACE_ITEM_OPEN)
    return 1;
  /* every process's spans are kept for the views over the replicas */
  if (item->process >= 0 && !m->is_view && item->type == PP_TRACE_ITEM_SPAN)
    proc_add_span (m, &item->span, item->process);
  if (item->type == PP_TRACE_ITEM_PROCESS && !m->is_view)
    proc_place (m, &item->process_info);
  /* any process's: its clock, and its row's when it shows that process */
  if (item->type == PP_TRACE_ITEM_CLOCK_OFFSET)
    return take_clock_offset (m, item->clock_offset.rank, m->is_view ? -1 : item->process,
                              item->clock_offset.offset_ns);
  /* a loss: every replica's (the job's, pp-analysis-loss.h, and each
   * replica's own series); the block-edge counters: every process's, each
   * with its process (a row takes its shown process's, edge_row; the Why
   * tab every copy's: a rank whose median copy is not the shown one read
   * no run delay, descheduled 0) */
  if (item->type == PP_TRACE_ITEM_COUNTER
      && (item->counter.kind == PP_COUNTER_LOSS || item->counter.kind == PP_COUNTER_LOSS_PART
          || item->counter.kind == PP_COUNTER_RUN_DELAY_NS || item->counter.kind == PP_COUNTER_PROBE_SELF_NS
          || item->counter.kind == PP_COUNTER_ON_CPU_NS))
    return add_counter (m, &item->counter, item->process);
  /* another replica's: in the trace, not on its row (see the top) */
  if (!is_shown (m, item_rank (item), item->process))
    {
      m->hidden_spans += item->type == PP_TRACE_ITEM_SPAN;
      return 0;
    }
  switch (item->type)
    {
    case PP_TRACE_ITEM_DESCRIPTION:
      m->has_desc = 1;
      m->desc = *item->description;
      if (m->desc.n_ranks > 0 && m->desc.n_ranks <= PP_TRACE_MAX_RANKS)
        ensure_rank (m, m->desc.n_ranks - 1);
      set_plan_origin (m, m->desc.start_monotonic_ns);
      return 1;
    case PP_TRACE_ITEM_PLAN:
      return add_plan (m, item);
    case PP_TRACE_ITEM_SPAN:
      add_span (m, &item->span, offset_for (m, item->span.rank, item->process));
      if (item->process < 0 && m->n_procs > 0 && !m->is_view)
        keep_untagged (m, &item->span);
      return 1;
    case PP_TRACE_ITEM_COUNTER:
      return add_counter (m, &item->counter, item->process);
    case PP_TRACE_ITEM_STEP_MARKER:
      return add_step_marker (m, item);
    case PP_TRACE_ITEM_STRING:
      return add_string (m, item->string.id, item->string.name);
    case PP_TRACE_ITEM_RANK:
      if (ensure_rank (m, item->rank_info.rank) != 0)
        return 0;
      snprintf (m->ranks[item->rank_info.rank].host, sizeof m->ranks[0].host, "%s", item->rank_info.host);
      if (m->first_host[0] == '\0')
        snprintf (m->first_host, sizeof m->first_host, "%s", item->rank_info.host);
      else if (strcmp (m->first_host, item->rank_info.host) != 0)
        m->several_hosts = 1;
      return 1;
    case PP_TRACE_ITEM_PROCESS:
      return add_process (m, &item->process_info);
    case PP_TRACE_ITEM_DROPPED:
      /* Saturating: the sum of a file's counts cannot wrap. */
      m->dropped = item->dropped.count > UINT64_MAX - m->dropped ? UINT64_MAX
                   : m->dropped + item->dropped.count;
      if (item->dropped.rank >= 0)
        ensure_rank (m, item->dropped.rank);
      return 1;
    case PP_TRACE_ITEM_END:
    default:
      return 0;
    }
}

PpTimelineModel *
pp_timeline_model_new_from_file (const char *path, PpError *err)
{
  PpTraceReader *r;
  PpTraceItem item;
  PpTimelineModel *m;

  r = pp_trace_reader_new_path (path, err);
  if (r == NULL)
    return NULL;
  m = pp_timeline_model_new ();
  if (m == NULL)
    {
      pp_trace_reader_free (r);
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, err) != PP_OK)
        {
          pp_trace_reader_free (r);
          pp_timeline_model_free (m);
          return NULL;
        }
      if (item.type == PP_TRACE_ITEM_END)
        {
          m->truncated = item.truncated;
          break;
        }
      pp_timeline_model_add (m, &item);
    }
  pp_trace_reader_free (r);
  /* two processes at one place, or places no job has: refused, as merge
   * and info refuse them, not a row that shows one of them unsaid */
  PpTraceProcess *places = malloc ((size_t) (m->n_procs + 1) * sizeof *places);
  size_t n = 0;
  for (int i = 0; places != NULL && i < m->n_procs; i++)
    if (m->procs[i].placed)
      places[n++] = m->procs[i].place;
  if (places == NULL || pp_trace_places_check (places, n, err) != PP_OK)
    {
      if (places == NULL)
        pp_error_set (err, PP_ENOMEM, "out of memory");
      free (places);
      pp_timeline_model_free (m);
      return NULL;
    }
  free (places);
  return m;
}

int
pp_timeline_model_truncated (const PpTimelineModel *m)
{
  return m != NULL && m->truncated;
}

int
pp_timeline_description_is_pytorch (const PpTraceDescription *d)
{
  return d != NULL && strncmp (d->model, "PyTorch ", 8) == 0;
}

long
pp_timeline_description_number (const PpTraceDescription *d, const char *word, int before)
{
  if (d == NULL || word == NULL || *word == '\0')
    return 0;
  const char *model = d->model;
  size_t len = strlen (word);
  for (const char *p = strstr (model, word); p != NULL; p = strstr (p + len, word))
    {
      if (p > model && (isalnum ((unsigned char) p[-1]) || p[-1] == '-' || p[-1] == '_'))
        continue;
      if (before)
        {
          const char *q = p;
          while (q > model && q[-1] == ' ')
            q--;
          const char *e = q;
          while (q > model && isdigit ((unsigned char) q[-1]))
            q--;
          if (q < e)
            return strtol (q, NULL, 10);
        }
      else
        {
          const char *q = p + len;
          while (*q == ' ' || *q == '=' || *q == ':')
            q++;
          if (isdigit ((unsigned char) *q))
            return strtol (q, NULL, 10);
        }
    }
  return 0;
}

const PpTraceDescription *
pp_timeline_model_description (const PpTimelineModel *m)
{
  return m != NULL && m->has_desc ? &m->desc : NULL;
}

const char *
pp_timeline_model_string (const PpTimelineModel *m, uint32_t id)
{
  size_t lo = 0, hi;
  if (m == NULL || id == 0)
    return NULL;
  hi = m->n_strings;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (m->strings[mid].id < id)
        lo = mid + 1;
      else if (m->strings[mid].id > id)
        hi = mid;
      else
        return m->strings[mid].name;
    }
  return NULL;
}

uint64_t
pp_timeline_model_dropped (const PpTimelineModel *m)
{
  return m ? m->dropped : 0;
}
