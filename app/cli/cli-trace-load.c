/* cli-trace-load.c — reading a whole trace for info and export (Trace,
 * cli-trace-private.h): its frames kept, the clock offsets applied, the
 * processes indexed by place and replica; what the export keeps of it
 * (--steps, --ranks, --replicas); and the app's view of it (AppView). */
#include "cli-trace-private.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-processes.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

void
app_view_clear (AppView *v)
{
  for (int r = 0; r < v->n_ranks; r++)
    free (v->plan[r]);
  free (v->plan);
  free (v->n_plan);
  free (v->step_starts);
  free (v->step_numbers);
  free (v->shift);
  free (v->limit);
  memset (v, 0, sizeof *v);
}

/* Reads path as the app does; with_plan: the steps and the plan too.
 * Returns 0, or prints one line and returns 1. */
int
app_view_read (const char *path, bool with_plan, AppView *v)
{
  PpError err = { 0 };
  PpTimelineModel *m;

  memset (v, 0, sizeof *v);
  errno = 0;
  if ((m = pp_timeline_model_new_from_file (path, &err)) == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : strerror (errno));
      return 1;
    }
  v->origin = pp_timeline_model_start_ns (m);
  if (with_plan)
    {
      size_t n = pp_timeline_model_n_steps (m), nc = pp_timeline_plan_copies (m);
      int nr = pp_timeline_model_n_ranks (m);
      bool ok = (v->step_starts = malloc ((n + 1) * sizeof *v->step_starts)) != NULL
                && (v->step_numbers = malloc ((n + 1) * sizeof *v->step_numbers)) != NULL
                && (v->shift = malloc ((nc + 1) * sizeof *v->shift)) != NULL
                && (v->limit = malloc ((nc + 1) * sizeof *v->limit)) != NULL
                && (v->plan = calloc ((size_t) nr + 1, sizeof *v->plan)) != NULL
                && (v->n_plan = calloc ((size_t) nr + 1, sizeof *v->n_plan)) != NULL;
      if (ok)
        {
          v->n_ranks = nr;
          v->n_steps = n;
          if (n > 0)   /* the model's arrays are NULL without steps */
            {
              memcpy (v->step_starts, pp_timeline_model_step_starts (m), n * sizeof *v->step_starts);
              memcpy (v->step_numbers, pp_timeline_model_step_numbers (m), n * sizeof *v->step_numbers);
            }
          v->n_copies = nc;
          for (size_t k = 0; k < nc; k++)
            pp_timeline_plan_copy (m, k, &v->shift[k], &v->limit[k]);
          for (int r = 0; ok && r < nr && nc > 0; r++)
            {
              size_t np = pp_timeline_model_n_planned (m, r);
              if (np == 0)
                continue;
              if ((v->plan[r] = malloc (np * sizeof *v->plan[r])) == NULL)
                ok = false;
              else
                {
                  memcpy (v->plan[r], pp_timeline_model_planned (m, r), np * sizeof *v->plan[r]);
                  v->n_plan[r] = np;
                }
            }
        }
      if (!ok)
        {
          pp_timeline_model_free (m);
          app_view_clear (v);
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          return 1;
        }
    }
  pp_timeline_model_free (m);
  return 0;
}

void
trace_clear (Trace *t)
{
  free (t->spans);
  free (t->span_process);
  free (t->procs);
  free (t->proc_at);
  free (t->rank_pid);
  free (t->proc_replica);
  for (size_t i = 0; i < t->n_strings; i++)
    free (t->strings[i].name);
  free (t->strings);
  for (int r = 0; r < t->cap_plans; r++)
    free (t->plans[r].order);
  free (t->plans);
  free (t->rank_items);
  free (t->counters);
  free (t->counter_process);
  free (t->markers);
  free (t->why_actions);
  free (t->why_n);
  free (t->out_pids);
  free (t->opens);
}

/* Keeps a RANK or CLOCK_OFFSET item; false when out of memory. */
static bool
keep_rank_item (Trace *t, const PpTraceItem *item)
{
  if (t->n_rank_items == t->cap_rank_items)
    {
      size_t cap = t->cap_rank_items ? 2 * t->cap_rank_items : 16;
      PpTraceItem *n = realloc (t->rank_items, cap * sizeof *n);
      if (n == NULL)
        return false;
      t->rank_items = n;
      t->cap_rank_items = cap;
    }
  t->rank_items[t->n_rank_items++] = *item;
  return true;
}

/* A PROCESS item, the last one for a process replacing the earlier;
 * false when out of memory. */
static bool
keep_process (Trace *t, const PpTraceProcess *p)
{
  if (t->proc_at == NULL)
    {
      if ((t->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *t->proc_at)) == NULL)
        return false;
      memset (t->proc_at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *t->proc_at);
    }
  if (t->proc_at[p->process] >= 0)
    {
      t->procs[t->proc_at[p->process]] = *p;
      return true;
    }
  if (t->n_procs == t->cap_procs)
    {
      size_t cap = t->cap_procs ? 2 * t->cap_procs : 16;
      PpTraceProcess *n = realloc (t->procs, cap * sizeof *n);
      if (n == NULL)
        return false;
      t->procs = n;
      t->cap_procs = cap;
    }
  t->proc_at[p->process] = (int32_t) t->n_procs;
  t->procs[t->n_procs++] = *p;
  return true;
}

static int
cmp_process (const void *a, const void *b)
{
  const PpTraceProcess *x = a, *y = b;
  return (x->process > y->process) - (x->process < y->process);
}

/* The replica a pipeline rank shows (the timeline model's choice): the
 * lowest place, dp first, then tp, cp, ep. */
static bool
shown_before (const PpTraceProcess *x, const PpTraceProcess *y)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d];
  return x->process < y->process;
}

/* After reading: the processes sorted, and each pipeline rank's Chrome
 * track: its shown process's, or 65536 + rank for a rank no process
 * placed.  false when out of memory. */
static int
cmp_replica_coords (const PpTraceProcess *x, const PpTraceProcess *y)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return 0;
}

static const PpTraceProcess *sort_replicas_of;   /* qsort has no user data */

static int
cmp_replica_index (const void *a, const void *b)
{
  return cmp_replica_coords (&sort_replicas_of[*(const size_t *) a], &sort_replicas_of[*(const size_t *) b]);
}

/* Each process's replica: the pipelines of the job are the processes that
 * share (dp, tp, cp, ep), numbered in that order.  false when out of
 * memory. */
static bool
index_replicas (Trace *t)
{
  size_t *idx = malloc ((t->n_procs + 1) * sizeof *idx);
  if (idx == NULL || (t->proc_replica = malloc ((t->n_procs + 1) * sizeof *t->proc_replica)) == NULL)
    {
      free (idx);
      return false;
    }
  for (size_t i = 0; i < t->n_procs; i++)
    idx[i] = i;
  sort_replicas_of = t->procs;
  qsort (idx, t->n_procs, sizeof *idx, cmp_replica_index);
  int32_t k = -1;
  for (size_t i = 0; i < t->n_procs; i++)
    {
      if (i == 0 || cmp_replica_coords (&t->procs[idx[i - 1]], &t->procs[idx[i]]) != 0)
        k++;
      t->proc_replica[idx[i]] = k;
    }
  t->n_replicas = k + 1;
  free (idx);
  return true;
}

static bool
index_processes (Trace *t)
{
  t->n_replicas = 1;
  if (t->n_procs == 0)
    return true;
  qsort (t->procs, t->n_procs, sizeof *t->procs, cmp_process);
  for (size_t i = 0; i < t->n_procs; i++)
    {
      t->proc_at[t->procs[i].process] = (int32_t) i;
      t->n_unplaced += (t->procs[i].flags & PP_TRACE_PROCESS_UNPLACED) != 0;
    }
  /* a process the hook could not place: a replica of its pipeline rank,
   * numbered in order of global rank (merge numbers them the same way;
   * a process's own file says dp 0) */
  if (t->n_unplaced > 0 && pp_trace_number_unplaced (t->procs, t->n_procs, NULL) != PP_OK)
    return false;
  if (!index_replicas (t))
    return false;
  int n = t->max_rank + 1 > t->desc.n_ranks ? t->max_rank + 1 : t->desc.n_ranks;
  if ((t->rank_pid = malloc (((size_t) n + 1) * sizeof *t->rank_pid)) == NULL)
    return false;
  t->n_rank_pid = n;
  int32_t *shown = malloc (((size_t) n + 1) * sizeof *shown);
  if (shown == NULL)
    return false;
  for (int r = 0; r < n; r++)
    shown[r] = -1;
  for (size_t i = 0; i < t->n_procs; i++)
    {
      const PpTraceProcess *p = &t->procs[i];
      if (p->rank < n && (shown[p->rank] < 0 || shown_before (p, &t->procs[shown[p->rank]])))
        shown[p->rank] = (int32_t) i;
    }
  for (int r = 0; r < n; r++)
    t->rank_pid[r] = shown[r] >= 0 ? t->procs[shown[r]].process : PP_TRACE_MAX_RANKS + r;
  free (shown);
  /* the shown replica's spans first, in order; the others after them */
  PpSpan *tmp = malloc ((t->n_spans + 1) * sizeof *tmp);
  int32_t *tmp_p = malloc ((t->n_spans + 1) * sizeof *tmp_p);
  if (tmp == NULL || tmp_p == NULL)
    {
      free (tmp);
      free (tmp_p);
      return false;
    }
  size_t k = 0, n_shown = 0;
  for (int pass = 0; pass < 2; pass++)
    {
      for (size_t i = 0; i < t->n_spans; i++)
        {
          int32_t g = t->span_process[i];
          int r = t->spans[i].rank;
          bool hidden = g >= 0 && t->proc_at[g] >= 0 && r < n && t->rank_pid[r] != g;
          if (hidden == (pass == 1))
            {
              tmp[k] = t->spans[i];
              tmp_p[k++] = g;
            }
        }
      if (pass == 0)
        n_shown = k;
    }
  memcpy (t->spans, tmp, t->n_spans * sizeof *tmp);
  memcpy (t->span_process, tmp_p, t->n_spans * sizeof *tmp_p);
  free (tmp);
  free (tmp_p);
  t->n_spans = n_shown;
  return true;
}

/* The place of the process that wrote span i, or NULL. */
const PpTraceProcess *
span_place (const Trace *t, size_t i)
{
  int32_t g = t->span_process != NULL ? t->span_process[i] : -1;
  if (g < 0 || t->proc_at == NULL || t->proc_at[g] < 0)
    return NULL;
  return &t->procs[t->proc_at[g]];
}

/* The replica (pipeline) span i belongs to: its process's (index_replicas),
 * -1 for a span no placed process wrote. */
int32_t
span_replica (const Trace *t, size_t i)
{
  int32_t g = t->span_process != NULL ? t->span_process[i] : -1;
  if (g < 0 || t->proc_at == NULL || t->proc_at[g] < 0)
    return -1;
  return t->proc_replica[t->proc_at[g]];
}

/* A time as the timeline model keeps it: within +-2^61 ns. */
int64_t
clamp_time (int64_t t)
{
  return t > PP_TIMELINE_MAX_ABS_NS ? PP_TIMELINE_MAX_ABS_NS
         : t < -PP_TIMELINE_MAX_ABS_NS ? -PP_TIMELINE_MAX_ABS_NS : t;
}

/* Every span on the common clock (rank 0's, for a job of several hosts):
 * the item's time + its clock offset, clamped like the timeline model's
 * times so no later arithmetic overflows.  A CLOCK_OFFSET frame a process
 * wrote (format 1.4: tagged) holds for that process's items alone (two
 * replicas of one pipeline rank on two hosts have two clocks); an untagged
 * one for its rank's items that have no offset of their process, as
 * before 1.4. */
typedef struct {
  int64_t *by_rank;      /* [n ranks] */
  int64_t *by_process;   /* [PP_TRACE_MAX_PROCESSES], NULL when no process said one */
  uint8_t *has_process;  /* the same: 1 where process g said one */
  int      n;
} Offsets;

static int64_t
offset_of (const Offsets *o, int32_t rank, int32_t process)
{
  if (process >= 0 && process < PP_TRACE_MAX_PROCESSES && o->by_process != NULL && o->has_process[process])
    return o->by_process[process];
  /* else its rank's untagged one (a process's own file: what it wrote
   * before its PROCESS frame is untagged) */
  return rank >= 0 && rank < o->n ? o->by_rank[rank] : 0;
}

static int
apply_clock_offsets (Trace *t)
{
  Offsets o = { NULL, NULL, NULL, t->max_rank + 1 };
  bool any = false;

  if (o.n <= 0)
    return 0;
  if ((o.by_rank = calloc ((size_t) o.n, sizeof *o.by_rank)) == NULL)
    return 1;
  for (size_t i = 0; i < t->n_rank_items; i++)
    {
      const PpTraceItem *it = &t->rank_items[i];
      if (it->type != PP_TRACE_ITEM_CLOCK_OFFSET || it->clock_offset.rank >= o.n)
        continue;
      int64_t off = clamp_time (it->clock_offset.offset_ns);
      any = true;
      if (it->process < 0)
        {
          o.by_rank[it->clock_offset.rank] = off;
          continue;
        }
      if (o.by_process == NULL
          && ((o.by_process = calloc (PP_TRACE_MAX_PROCESSES, sizeof *o.by_process)) == NULL
              || (o.has_process = calloc (PP_TRACE_MAX_PROCESSES, 1)) == NULL))
        {
          free (o.by_rank);
          free (o.by_process);
          return 1;
        }
      o.by_process[it->process] = off;
      o.has_process[it->process] = 1;
    }
  for (size_t i = 0; any && i < t->n_spans; i++)
    {
      PpSpan *sp = &t->spans[i];
      int64_t d = offset_of (&o, sp->rank, t->span_process[i]);
      /* |time|, |d| <= 2^61: the sums cannot overflow */
      sp->start_ns = clamp_time (sp->start_ns) + d;
      sp->end_ns = clamp_time (sp->end_ns) + d;
    }
  for (size_t i = 0; any && i < t->n_counters; i++)
    {
      PpCounter *c = &t->counters[i];
      c->time_ns = clamp_time (c->time_ns) + offset_of (&o, c->rank, t->counter_process[i]);
    }
  for (size_t i = 0; any && i < t->n_markers; i++)
    {
      StepMarker *mk = &t->markers[i];
      mk->t = clamp_time (mk->t) + offset_of (&o, mk->rank, mk->process);
    }
  free (o.by_rank);
  free (o.by_process);
  free (o.has_process);
  return 0;
}

static bool
is_compute_plan_action (int kind)
{
  return kind == PP_TRACE_ACT_F || kind == PP_TRACE_ACT_B || kind == PP_TRACE_ACT_I
         || kind == PP_TRACE_ACT_W || kind == PP_TRACE_ACT_OVERLAP_F_B;
}

/* Keeps the summary of a rank's plan, replacing an earlier one; false when
 * out of memory. */
static bool
see_plan (Trace *t, const PpTraceItem *item)
{
  int r = item->plan.rank;
  PlanSummary *ps;

  if (r < 0)
    return true;
  if (r >= t->cap_plans)
    {
      int cap = t->cap_plans ? t->cap_plans : 8;
      while (cap <= r)
        cap *= 2;
      PlanSummary *n = realloc (t->plans, (size_t) cap * sizeof *n);
      if (n == NULL)
        return false;
      memset (n + t->cap_plans, 0, (size_t) (cap - t->cap_plans) * sizeof *n);
      t->plans = n;
      t->cap_plans = cap;
    }
  ps = &t->plans[r];
  free (ps->order);
  memset (ps, 0, sizeof *ps);
  ps->seen = true;
  ps->has_timeline = item->plan.has_timeline != 0;
  ps->n_actions = item->plan.n_actions;
  if (item->plan.n_actions > 0)
    {
      ps->order = malloc (item->plan.n_actions * sizeof *ps->order);
      if (ps->order == NULL)
        return false;
      for (size_t k = 0; k < item->plan.n_actions; k++)
        if (is_compute_plan_action (item->plan.actions[k].kind))
          ps->order[ps->n_order++] = item->plan.actions[k];
    }
  bool any = false;
  for (size_t k = 0; k < item->plan.n_actions; k++)
    {
      const PpTracePlanAction *a = &item->plan.actions[k];
      if (!pp_timeline_plan_action_is_work (a->kind))
        continue;
      if (!any || a->planned_start < ps->start)
        ps->start = a->planned_start;
      any = true;
      if (a->planned_end > ps->end)
        ps->end = a->planned_end;
      ps->busy += a->planned_end - a->planned_start;
    }
  return true;
}

/* The plans' compute orders by rank as t->why_plans, for
 * pp_why_analyse_run and pp_why_schedule_of_trace; false when out of
 * memory. */
static bool
build_why_plans (Trace *t)
{
  int n = 0;

  for (int r = 0; r < t->cap_plans; r++)
    if (t->plans[r].seen)
      n = r + 1;
  if ((t->why_actions = calloc ((size_t) n + 1, sizeof *t->why_actions)) == NULL
      || (t->why_n = calloc ((size_t) n + 1, sizeof *t->why_n)) == NULL)
    return false;
  for (int r = 0; r < n; r++)
    {
      t->why_actions[r] = t->plans[r].order;
      t->why_n[r] = t->plans[r].n_order;
    }
  t->why_plans = (PpWhyPlans) { n, t->why_actions, t->why_n };
  return true;
}

static void
see_rank (Trace *t, int r)
{
  if (r > t->max_rank)
    t->max_rank = r;
}

/* After loading, strings are sorted by id with one entry an id (the last
 * one for an id wins), so a span's name is a binary search. */
const char *
trace_string (const Trace *t, uint32_t id)
{
  size_t lo = 0, hi = t->n_strings;
  if (id == 0)
    return NULL;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (t->strings[mid].id < id)
        lo = mid + 1;
      else if (t->strings[mid].id > id)
        hi = mid;
      else
        return t->strings[mid].name;
    }
  return NULL;
}

static int
cmp_string_id (const void *a, const void *b)
{
  const NamedString *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

/* Sorts the strings by id keeping the last of each id (qsort is not
 * stable: each entry carries its arrival, and the latest of an id wins). */
static void
strings_index (Trace *t)
{
  size_t n = 0;
  if (t->n_strings < 2)
    return;
  typedef struct { uint32_t id; size_t order; char *name; } Tagged;
  Tagged *tg = malloc (t->n_strings * sizeof *tg);
  if (tg == NULL)
    return;   /* left unsorted; lookups then miss, names print empty */
  for (size_t i = 0; i < t->n_strings; i++)
    {
      tg[i].id = t->strings[i].id;
      tg[i].order = i;
      tg[i].name = t->strings[i].name;
    }
  qsort (tg, t->n_strings, sizeof *tg, cmp_string_id);
  for (size_t i = 0; i < t->n_strings;)
    {
      size_t j = i, best = i;
      for (; j < t->n_strings && tg[j].id == tg[i].id; j++)
        if (tg[j].order > tg[best].order)
          best = j;
      for (size_t k = i; k < j; k++)
        if (k != best)
          free (tg[k].name);
      t->strings[n].id = tg[best].id;
      t->strings[n].name = tg[best].name;
      n++;
      i = j;
    }
  t->n_strings = n;
  free (tg);
}

/* Returns 0, or prints one line and returns 1. */
int
trace_load (const char *path, Trace *t)
{
  PpError err = { 0 };
  PpTraceReader *r;
  PpTraceItem item;

  memset (t, 0, sizeof *t);
  t->max_rank = -1;
  r = pp_trace_reader_new_path (path, &err);
  if (r == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : strerror (errno));
      return 1;
    }
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg);
          pp_trace_reader_free (r);
          trace_clear (t);
          memset (t, 0, sizeof *t);
          return 1;
        }
      switch (item.type)
        {
        case PP_TRACE_ITEM_END:
          t->truncated = item.truncated;
          pp_trace_reader_free (r);
          strings_index (t);
          t->n_all_spans = t->n_spans;
          if (apply_clock_offsets (t) != 0 || !build_why_plans (t) || !index_processes (t))
            {
              fprintf (stderr, "pipescope-cli: error: out of memory\n");
              trace_clear (t);
              memset (t, 0, sizeof *t);
              return 1;
            }
          /* two processes at one place, or places no job has: refused,
           * as merge refuses them, not one of them dropped unsaid */
          if (pp_trace_places_check (t->procs, t->n_procs, &err) != PP_OK)
            {
              fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg);
              trace_clear (t);
              memset (t, 0, sizeof *t);
              return 1;
            }
          return 0;
        case PP_TRACE_ITEM_DESCRIPTION:
          t->has_desc = true;
          t->desc = *item.description;
          break;
        case PP_TRACE_ITEM_PLAN:
          t->n_plans++;
          see_rank (t, item.plan.rank);
          if (!see_plan (t, &item))
            goto oom;
          break;
        case PP_TRACE_ITEM_SPAN:
          if (t->n_spans == t->cap_spans)
            {
              size_t cap = t->cap_spans ? 2 * t->cap_spans : 1024;
              PpSpan *n = realloc (t->spans, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->spans = n;
              int32_t *np = realloc (t->span_process, cap * sizeof *np);
              if (np == NULL)
                goto oom;
              t->span_process = np;
              t->cap_spans = cap;
            }
          t->span_process[t->n_spans] = item.process;
          t->spans[t->n_spans++] = item.span;
          see_rank (t, item.span.rank);
          break;
        case PP_TRACE_ITEM_COUNTER:
          if (item.counter.rank < 0 || item.counter.rank >= PP_TRACE_MAX_RANKS)
            break;
          if (t->n_counters == t->cap_counters)
            {
              size_t cap = t->cap_counters ? 2 * t->cap_counters : 256;
              PpCounter *n = realloc (t->counters, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->counters = n;
              int32_t *np = realloc (t->counter_process, cap * sizeof *np);
              if (np == NULL)
                goto oom;
              t->counter_process = np;
              t->cap_counters = cap;
            }
          t->counter_process[t->n_counters] = item.process;
          t->counters[t->n_counters++] = item.counter;
          break;
        case PP_TRACE_ITEM_STEP_MARKER:
          see_rank (t, item.step_marker.rank);
          if (t->n_markers == t->cap_markers)
            {
              size_t cap = t->cap_markers ? 2 * t->cap_markers : 64;
              StepMarker *n = realloc (t->markers, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->markers = n;
              t->cap_markers = cap;
            }
          t->markers[t->n_markers++] = (StepMarker) { item.step_marker.time_ns, item.step_marker.rank,
                                                      item.step_marker.step, (int) item.step_marker.phase,
                                                      item.process };
          break;
        case PP_TRACE_ITEM_STRING:
          if (t->n_strings == t->cap_strings)
            {
              size_t cap = t->cap_strings ? 2 * t->cap_strings : 64;
              NamedString *n = realloc (t->strings, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->strings = n;
              t->cap_strings = cap;
            }
          t->strings[t->n_strings].id = item.string.id;
          t->strings[t->n_strings].name = strdup (item.string.name);
          if (t->strings[t->n_strings].name == NULL)
            goto oom;
          t->n_strings++;
          break;
        case PP_TRACE_ITEM_RANK:
        case PP_TRACE_ITEM_CLOCK_OFFSET:
          if (!keep_rank_item (t, &item))
            goto oom;
          break;
        case PP_TRACE_ITEM_PROCESS:
          if (!keep_process (t, &item.process_info))
            goto oom;
          see_rank (t, item.process_info.rank);
          break;
        case PP_TRACE_ITEM_OPEN:
          if (!pp_stuck_keep_open (&t->opens, &t->n_opens, &t->cap_opens, item.process, &item.open))
            goto oom;
          break;
        case PP_TRACE_ITEM_DROPPED:
          /* saturating: a file's counts cannot wrap the sum */
          t->dropped = item.dropped.count > UINT64_MAX - t->dropped ? UINT64_MAX
                       : t->dropped + item.dropped.count;
          if (item.dropped.rank >= 0)
            see_rank (t, item.dropped.rank);
          break;
        default:
          break;
        }
    }
oom:
  fprintf (stderr, "pipescope-cli: error: out of memory\n");
  pp_trace_reader_free (r);
  trace_clear (t);
  memset (t, 0, sizeof *t);
  return 1;
}

/* The mesh's sizes (pp_cli_mesh_sizes). */
void
mesh_sizes (const Trace *t, int32_t size[PP_TRACE_MESH_DIMS])
{
  pp_cli_mesh_sizes (t->procs, t->n_procs, size);
}

int
n_ranks_of (const Trace *t)
{
  int n = t->max_rank + 1;
  if (t->has_desc && t->desc.n_ranks > n)
    n = t->desc.n_ranks;
  return n;
}

const char *
kind_name (int kind)
{
  const char *n = kind < PP_N_SPAN_KINDS ? pp_span_kind_name ((PpSpanKind) kind) : NULL;
  return n ? n : "UNKNOWN";
}

/* The run's start, the zero every export and info's times count from: the timeline's zero
 * (its shown spans' and its plan's start: the job describes itself before
 * its first block), or the earliest thing any process recorded before it,
 * a span, a step's marker or a counter (every replica's, not only those
 * the timeline shows: a process may start before the one that described
 * the job), so that no exported time is negative. */
int64_t
run_start (const Trace *t, const AppView *v)
{
  /* a time at the model's limit (a counter at INT64_MIN) says nothing of
   * when the run began: the zero is the run's, and such a time is written
   * at the limit (time_unrepresentable) */
  int64_t z = v->origin;
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (!time_unrepresentable (t->spans[i].start_ns))
      z = t->spans[i].start_ns < z ? t->spans[i].start_ns : z;
  for (size_t i = 0; i < t->n_markers; i++)
    if (t->markers[i].rank >= 0 && !time_unrepresentable (t->markers[i].t))
      z = t->markers[i].t < z ? t->markers[i].t : z;
  for (size_t i = 0; t->n_all_spans > 0 && i < t->n_counters; i++)
    if (isfinite (t->counters[i].value) && !time_unrepresentable (t->counters[i].time_ns))
      z = t->counters[i].time_ns < z ? t->counters[i].time_ns : z;
  return z;
}

/* Whether a time lies at or past the model's limit of +-2^61 ns (the
 * exports write it at that limit). */
bool
time_unrepresentable (int64_t t)
{
  return t >= PP_TIMELINE_MAX_ABS_NS || t <= -PP_TIMELINE_MAX_ABS_NS;
}

/* How many kept spans, markers and counters have a time at or past the
 * limit (time_unrepresentable): the exports say so. */
size_t
times_unrepresentable (const Trace *t, size_t *spans, size_t *markers, size_t *counters)
{
  *spans = *markers = *counters = 0;
  for (size_t i = 0; i < t->n_all_spans; i++)
    *spans += (time_unrepresentable (t->spans[i].start_ns) || time_unrepresentable (t->spans[i].end_ns))
              && keep_item (t, t->span_process != NULL ? t->span_process[i] : -1, t->spans[i].rank,
                            t->spans[i].step);
  for (size_t i = 0; i < t->n_markers; i++)
    *markers += time_unrepresentable (t->markers[i].t)
                && keep_item (t, t->markers[i].process, t->markers[i].rank, t->markers[i].step);
  for (size_t i = 0; i < t->n_counters; i++)
    *counters += time_unrepresentable (t->counters[i].time_ns) && isfinite (t->counters[i].value)
                 && keep_item (t, t->counter_process[i], t->counters[i].rank, t->counters[i].step);
  return *spans + *markers + *counters;
}

/* The replica (dp) of what process wrote: 0 for a process without a place. */
int32_t
process_dp (const Trace *t, int32_t process)
{
  if (t->proc_at == NULL || process < 0 || process >= PP_TRACE_MAX_PROCESSES || t->proc_at[process] < 0)
    return 0;
  return t->procs[t->proc_at[process]].coord[PP_TRACE_MESH_DP];
}

/* Whether the export keeps an item of step, pipeline rank and process
 * (export's --steps, --ranks, --replicas). */
bool
keep_item (const Trace *t, int32_t process, int32_t rank, int32_t step)
{
  const PpCliSelection *k = t->keep;
  return k == NULL
         || (pp_cli_list_has (&k->steps, step) && pp_cli_list_has (&k->ranks, rank)
             && pp_cli_list_has (&k->replicas, process_dp (t, process)));
}

/* Whether the export keeps span i. */
bool
keep_span (const Trace *t, size_t i)
{
  return t->keep == NULL
         || keep_item (t, t->span_process != NULL ? t->span_process[i] : -1, t->spans[i].rank, t->spans[i].step);
}
