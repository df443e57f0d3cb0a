/* pp-timeline-model-steps.c — where each step begins: the step markers as
 * they come (a live run's provisional ones too), sorted into the steps'
 * starts and numbers at the first query after a change. */
#include "pp-timeline-model-internal.h"

#include <stdlib.h>
#include <string.h>

static int
cmp_mark_step (const void *a, const void *b)
{
  const StepMark *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

static int
cmp_mark_time (const void *a, const void *b)
{
  const StepMark *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

/* Sorts the markers: one per step (its earliest begin), and the steps in
 * time order (a later step that begins before an earlier one, clock skew,
 * is kept in time order).  O(S log S) for S markers, once per change. */
static int
rebuild_steps (PpTimelineModel *m)
{
  size_t n = 0;

  m->steps_dirty = 0;
  if (m->n_marks > 1)
    qsort (m->marks, m->n_marks, sizeof *m->marks, cmp_mark_step);
  for (size_t i = 0; i < m->n_marks; i++)
    if (n == 0 || m->marks[n - 1].step != m->marks[i].step)
      m->marks[n++] = m->marks[i];
  m->n_marks = n;
  int64_t *st = realloc (m->step_starts, (n + 1) * sizeof *st);
  if (st == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  m->step_starts = st;
  int32_t *nums = realloc (m->step_numbers, (n + 1) * sizeof *nums);
  if (nums == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  m->step_numbers = nums;
  StepMark *byt = malloc ((n + 1) * sizeof *byt);
  if (byt == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  memcpy (byt, m->marks, n * sizeof *byt);
  if (n > 1)
    qsort (byt, n, sizeof *byt, cmp_mark_time);
  for (size_t i = 0; i < n; i++)
    {
      st[i] = byt[i].t;
      nums[i] = byt[i].step;
    }
  free (byt);
  m->n_steps = n;
  return 0;
}

/* Queries are const for their callers; the sorted steps are a cache. */
static void
ensure_steps (const PpTimelineModel *m)
{
  if (m != NULL && m->steps_dirty)
    rebuild_steps ((PpTimelineModel *) m);
}

int
add_step_marker (PpTimelineModel *m, const PpTraceItem *item)
{
  int step = item->step_marker.step;
  int64_t t = item->step_marker.time_ns;

  if (ensure_rank (m, item->step_marker.rank) != 0)
    return 0;
  t = add_ns (t, offset_for (m, item->step_marker.rank, item->process));
  if (item->step_marker.phase != PP_TRACE_STEP_BEGIN || step < 0)
    return 0;
  if (step > m->max_marked_step)
    m->max_marked_step = step;
  /* a step may begin before its first block (a step() call, an imported
   * ProfilerStep): the run's extent holds it, so no time before zero */
  see_time (m, t, t);
  return push_mark (m, t, step);
}

/* A step begins at t (the earliest a step is given wins at the rebuild). */
int
push_mark (PpTimelineModel *m, int64_t t, int step)
{
  /* Every rank marks every step: after a rebuild there is one entry a
   * step again, so the array stays within twice what a rebuild leaves
   * plus the markers since. */
  if (m->n_marks == m->cap_marks)
    {
      if (m->steps_dirty && m->n_marks >= 1024)
        rebuild_steps (m);
      /* Grow unless the rebuild freed half: the next rebuild is then at
       * least cap/2 markers away (amortized O(log S) a marker). */
      if (m->cap_marks == 0 || m->n_marks > m->cap_marks / 2)
        {
          size_t cap = m->cap_marks ? 2 * m->cap_marks : 64;
          StepMark *n = realloc (m->marks, cap * sizeof *n);
          if (n == NULL)
            return 0;
          m->marks = n;
          m->cap_marks = cap;
        }
    }
  m->marks[m->n_marks].t = t;
  m->marks[m->n_marks].step = step;
  m->n_marks++;
  m->steps_dirty = 1;
  return 1;
}

size_t
pp_timeline_model_n_steps (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->n_steps : 0;
}

const int64_t *
pp_timeline_model_step_starts (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->step_starts : NULL;
}

const int32_t *
pp_timeline_model_step_numbers (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->step_numbers : NULL;
}
