/* pp-schedule.c — a schedule as data: per rank, its ordered actions. */
#include "pp-schedule.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

PpSchedule *
pp_schedule_new (const char *name, int ranks, int microbatches, int stages_per_rank,
                 PpPlacement placement)
{
  PpSchedule *s;
  int n;

  if (ranks <= 0 || microbatches <= 0 || stages_per_rank <= 0)
    return NULL;
  n = ranks * stages_per_rank;

  s = calloc (1, sizeof *s);
  if (s == NULL)
    return NULL;
  snprintf (s->name, sizeof s->name, "%s", name ? name : "custom");
  s->ranks = ranks;
  s->microbatches = microbatches;
  s->stages_per_rank = stages_per_rank;
  s->n_stages = n;
  s->stage_rank = calloc ((size_t) n, sizeof (int));
  s->stage_prev = calloc ((size_t) n, sizeof (int));
  s->stage_next = calloc ((size_t) n, sizeof (int));
  s->stage_mb_lo = calloc ((size_t) n, sizeof (int));
  s->stage_mb_hi = calloc ((size_t) n, sizeof (int));
  s->rank = calloc ((size_t) ranks, sizeof (PpRankActions));
  if (!s->stage_rank || !s->stage_prev || !s->stage_next || !s->stage_mb_lo
      || !s->stage_mb_hi || !s->rank)
    {
      pp_schedule_free (s);
      return NULL;
    }

  for (int st = 0; st < n; st++)
    {
      switch (placement)
        {
        case PP_PLACE_V:
          {
            /* rank r: stages r and 2P-1-r (only meaningful for V == 2) */
            int lap = st / ranks, pos = st % ranks;
            s->stage_rank[st] = (lap % 2 == 0) ? pos : ranks - 1 - pos;
          }
          break;
        case PP_PLACE_LOOP:
        case PP_PLACE_CUSTOM:
        default:
          s->stage_rank[st] = st % ranks;
          break;
        }
      s->stage_prev[st] = st - 1;
      s->stage_next[st] = st + 1 < n ? st + 1 : -1;
      s->stage_mb_lo[st] = 0;
      s->stage_mb_hi[st] = microbatches;
    }
  return s;
}

void
pp_schedule_free (PpSchedule *s)
{
  if (s == NULL)
    return;
  if (s->rank != NULL)
    for (int r = 0; r < s->ranks; r++)
      free (s->rank[r].actions);
  free (s->rank);
  free (s->stage_rank);
  free (s->stage_prev);
  free (s->stage_next);
  free (s->stage_mb_lo);
  free (s->stage_mb_hi);
  free (s);
}

PpStatus
pp_schedule_push (PpSchedule *s, int rank, PpAction a)
{
  PpRankActions *ra;

  if (rank < 0 || rank >= s->ranks)
    return PP_EINVAL;
  ra = &s->rank[rank];
  if (ra->n_actions == ra->capacity)
    {
      int cap = ra->capacity ? ra->capacity * 2 : 64;
      PpAction *n = realloc (ra->actions, (size_t) cap * sizeof *n);
      if (n == NULL)
        return PP_ENOMEM;
      ra->actions = n;
      ra->capacity = cap;
    }
  ra->actions[ra->n_actions++] = a;
  return PP_OK;
}

long
pp_schedule_total_actions (const PpSchedule *s)
{
  long n = 0;
  for (int r = 0; r < s->ranks; r++)
    n += s->rank[r].n_actions;
  return n;
}

int
pp_schedule_rank_difference (const PpSchedule *a, const PpSchedule *b, int r)
{
  const PpRankActions *x = &a->rank[r], *y = &b->rank[r];
  int i = 0, j = 0;

  /* compute actions only: transfers and optimizer steps do not order work */
  for (int k = 0;; k++, i++, j++)
    {
      while (i < x->n_actions && !pp_action_is_compute (&x->actions[i]))
        i++;
      while (j < y->n_actions && !pp_action_is_compute (&y->actions[j]))
        j++;
      if (i == x->n_actions && j == y->n_actions)
        return -1;
      if (i == x->n_actions || j == y->n_actions || !pp_action_equal (&x->actions[i], &y->actions[j]))
        return k;
    }
}

bool
pp_schedule_same_order (const PpSchedule *a, const PpSchedule *b, int *rank, int *index)
{
  if (rank)
    *rank = -1;
  if (index)
    *index = -1;
  if (a->ranks != b->ranks)
    return false;
  for (int r = 0; r < a->ranks; r++)
    {
      int k = pp_schedule_rank_difference (a, b, r);
      if (k >= 0)
        {
          if (rank)
            *rank = r;
          if (index)
            *index = k;
          return false;
        }
    }
  return true;
}
