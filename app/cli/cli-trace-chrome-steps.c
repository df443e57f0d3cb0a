/* cli-trace-chrome-steps.c — the Chrome export's step and plan tracks:
 * each track's steps from its own markers, and the plan beside the
 * measurement where the app's plan lane places it. */
#include "cli-trace-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

static int
cmp_marker (const void *a, const void *b)
{
  const StepMarker *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

static int
cmp_slice_step (const void *a, const void *b)
{
  const StepSlice *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

static int
cmp_slice_begin (const void *a, const void *b)
{
  const StepSlice *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Each rank's steps from its own markers, as the app's step boundaries
 * come from them: a step runs from the rank's BEGIN marker to its END
 * marker; without an END, to the end of the rank's last span of that step,
 * else to its next step's begin.  Sorted by rank and begin, never
 * overlapping (a step that runs past the next one's begin is cut there,
 * as Perfetto needs slices of one track nested).  NULL with *n 0 when
 * there is none; -1 when out of memory. */
int
step_slices (const Trace *t, StepSlice **out, size_t *n_out)
{
  StepMarker *mk;
  StepSlice *sl;
  size_t n = 0;

  *out = NULL;
  *n_out = 0;
  if (t->n_markers == 0)
    return 0;
  mk = malloc (t->n_markers * sizeof *mk);
  sl = malloc (t->n_markers * sizeof *sl);
  if (mk == NULL || sl == NULL)
    {
      free (mk);
      free (sl);
      return -1;
    }
  memcpy (mk, t->markers, t->n_markers * sizeof *mk);
  /* by track: every process's steps, not only its rank's shown replica's */
  for (size_t i = 0; i < t->n_markers; i++)
    if (mk[i].rank >= 0)
      mk[i].rank = keep_item (t, mk[i].process, mk[i].rank, mk[i].step) ? item_pid (t, mk[i].process, mk[i].rank)
                   : -1;
  qsort (mk, t->n_markers, sizeof *mk, cmp_marker);
  for (size_t i = 0; i < t->n_markers;)
    {
      size_t j = i;
      int64_t begin = INT64_MAX, end = INT64_MIN;
      for (; j < t->n_markers && mk[j].rank == mk[i].rank && mk[j].step == mk[i].step; j++)
        if (mk[j].phase == PP_TRACE_STEP_BEGIN && mk[j].t < begin)
          begin = mk[j].t;
        else if (mk[j].phase != PP_TRACE_STEP_BEGIN && mk[j].t > end)
          end = mk[j].t;
      if (begin != INT64_MAX && mk[i].rank >= 0 && mk[i].step >= 0)
        sl[n++] = (StepSlice) { mk[i].rank, mk[i].step, clamp_time (begin),
                                end == INT64_MIN ? INT64_MIN : clamp_time (end) };
      i = j;
    }
  free (mk);
  /* without an END marker: the rank's last span of the step */
  bool open = false;
  for (size_t i = 0; i < n; i++)
    open |= sl[i].end == INT64_MIN;
  if (open)
    {
      int64_t *last = malloc ((n + 1) * sizeof *last);
      if (last == NULL)
        {
          free (sl);
          return -1;
        }
      for (size_t i = 0; i < n; i++)
        last[i] = INT64_MIN;
      for (size_t i = 0; i < t->n_all_spans; i++)
        {
          const PpSpan *sp = &t->spans[i];
          StepSlice key = { .rank = span_pid (t, sp), .step = sp->step };
          const StepSlice *hit = bsearch (&key, sl, n, sizeof *sl, cmp_slice_step);
          if (hit != NULL && hit->end == INT64_MIN && clamp_time (sp->end_ns) > last[hit - sl])
            last[hit - sl] = clamp_time (sp->end_ns);
        }
      for (size_t i = 0; i < n; i++)
        if (sl[i].end == INT64_MIN)
          sl[i].end = last[i];
      free (last);
    }
  qsort (sl, n, sizeof *sl, cmp_slice_begin);
  for (size_t i = 0; i < n; i++)
    {
      bool next = i + 1 < n && sl[i + 1].rank == sl[i].rank;
      if (sl[i].end == INT64_MIN)
        sl[i].end = next ? sl[i + 1].begin : sl[i].begin;
      if (next && sl[i].end > sl[i + 1].begin)
        sl[i].end = sl[i + 1].begin;
      if (sl[i].end < sl[i].begin)
        sl[i].end = sl[i].begin;
    }
  *out = sl;
  *n_out = n;
  return 0;
}

/* The plan beside the measurement, in the plan lane's place: every timed
 * plan action of rank r as a slice on the rank's plan track, one copy under
 * every step (pp_timeline_plan_copy: as the app draws it), named as the
 * blocks are.  A plan with no times (its order only) is one instant at the
 * first step's start (the run's start without steps) that lists the order.
 * f NULL: nothing written, *first_t lowered to the earliest time it would
 * write.  Returns the events (written or not): a track without any has
 * no name either. */
size_t
write_plan_track (FILE *f, const Trace *t, const AppView *v, int r, int V, int64_t base, int64_t *first_t)
{
  const PpTimelinePlanned *p = r < v->n_ranks ? v->plan[r] : NULL;
  size_t np = p ? v->n_plan[r] : 0, n = 0;
  char name[PP_ACTION_STR_MAX];

  if (t->keep != NULL && !pp_cli_list_has (&t->keep->ranks, r))
    return 0;
  for (size_t c = 0; np > 0 && c < v->n_copies; c++)
    {
      int64_t shift = v->shift[c], limit = v->limit[c];
      if (t->keep != NULL && v->n_steps > 0 && c < v->n_steps
          && !pp_cli_list_has (&t->keep->steps, v->step_numbers[c]))
        continue;
      for (size_t k = 0; k < np; k++)
        {
          int kind = pp_timeline_plan_span_kind (p[k].kind);
          /* model times within +-2^61, shifts within +-2^62: no overflow */
          int64_t ps = p[k].start_ns + shift, pe = p[k].end_ns + shift;
          if (kind < 0 || ps >= limit)
            continue;
          if (pe > limit)
            pe = limit;
          n++;
          if (f == NULL)
            {
              *first_t = ps < *first_t ? ps : *first_t;
              continue;
            }
          PpAction a = pp_action (p[k].kind, p[k].stage, p[k].microbatch);
          if (p[k].kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (p[k].stage, p[k].microbatch, p[k].sub_kind, p[k].sub_stage,
                                   p[k].sub_microbatch);
          action_name (&a, V, name, sizeof name);
          fprintf (f, ",\n{\"name\":");
          json_string (f, name);
          fprintf (f, ",\"cat\":\"plan\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", out_pid (t, plan_pid (t, r)),
                   ROW_PLAN);
          print_us_since (f, ps, base);
          fputs (",\"dur\":", f);
          print_us_since (f, pe, ps);
          fprintf (f, ",\"args\":{\"stage\":%d,\"microbatch\":%d,\"kind\":\"%s\"", p[k].stage, p[k].microbatch,
                   kind_name (kind));
          if (v->n_steps > 0)
            fprintf (f, ",\"step\":%d", v->step_numbers[c]);
          fputs ("}}", f);
        }
    }
  if (np == 0 && r < t->cap_plans && t->plans[r].seen && !t->plans[r].has_timeline && t->plans[r].n_order > 0)
    {
      const PlanSummary *ps = &t->plans[r];
      int64_t at = v->n_steps > 0 ? v->step_starts[0] : v->origin;
      n++;
      if (f == NULL)
        {
          *first_t = at < *first_t ? at : *first_t;
          return n;
        }
      fprintf (f, ",\n{\"name\":\"plan (order only)\",\"cat\":\"plan\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,"
                  "\"tid\":%d,\"ts\":", out_pid (t, plan_pid (t, r)), ROW_PLAN);
      print_us_since (f, at, base);
      fputs (",\"args\":{\"order\":\"", f);
      for (size_t k = 0; k < ps->n_order; k++)
        {
          const PpTracePlanAction *o = &ps->order[k];
          PpAction a = pp_action (o->kind, o->stage, o->microbatch);
          if (o->kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (o->stage, o->microbatch, o->sub_kind, o->sub_stage, o->sub_microbatch);
          action_name (&a, V, name, sizeof name);
          fprintf (f, "%s%s", k ? " " : "", name);   /* digits, letters, '+': nothing to escape */
        }
      fputs ("\"}}", f);
    }
  return n;
}
