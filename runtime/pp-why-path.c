/* pp-why-path.c — the critical path of a step (pp-why.h): walked back
 * from its last block through what each block waited for, and a
 * simulation's blocks to walk. */
#include "pp-why.h"
#include "pp-schedule-rules.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void
pp_why_path_clear (PpWhyPath *p)
{
  if (p == NULL)
    return;
  free (p->steps);
  free (p->stage_time);
  memset (p, 0, sizeof *p);
}

static int
is_grad (int kind)
{
  return kind == PP_ACT_B || kind == PP_ACT_I;
}

/* qsort has no context argument in C11; the blocks being sorted, per thread. */
static _Thread_local const PpWhyBlock *sort_blocks;

static int
cmp_index (const void *a, const void *b)
{
  const PpWhyBlock *x = &sort_blocks[*(const size_t *) a];
  const PpWhyBlock *y = &sort_blocks[*(const size_t *) b];
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int
near (double a, double b)
{
  double m = fmax (1.0, fmax (fabs (a), fabs (b)));
  return fabs (a - b) <= 1e-9 * m;
}

PpStatus
pp_why_critical_path (const PpSchedule *s, const PpWhyBlock *blocks, size_t n,
                      const double *comm, PpWhyPath *out, PpError *err)
{
  size_t cells, *order = NULL, *prev = NULL;
  long *f_at = NULL, *g_at = NULL;
  PpStatus st = PP_OK;
  int M;

  if (out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_critical_path: out is required");
  memset (out, 0, sizeof *out);
  if (s == NULL || (n > 0 && blocks == NULL))
    return pp_error_set (err, PP_EINVAL, "pp_why_critical_path: a schedule is required");
  M = s->microbatches;
  cells = (size_t) s->n_stages * (size_t) M;
  out->n_stages = s->n_stages;
  out->stage_time = calloc ((size_t) s->n_stages, sizeof *out->stage_time);
  f_at = malloc ((cells ? cells : 1) * sizeof *f_at);
  g_at = malloc ((cells ? cells : 1) * sizeof *g_at);
  order = malloc ((n ? n : 1) * sizeof *order);
  prev = malloc ((n ? n : 1) * sizeof *prev);
  if (out->stage_time == NULL || f_at == NULL || g_at == NULL || order == NULL || prev == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t c = 0; c < cells; c++)
    f_at[c] = g_at[c] = -1;

  /* where each (stage, micro-batch)'s forward and input gradient ran */
  size_t last = SIZE_MAX;
  out->start = INFINITY;
  out->end = -INFINITY;
  for (size_t i = 0; i < n; i++)
    {
      const PpWhyBlock *b = &blocks[i];
      if (b->stage < 0 || b->stage >= s->n_stages || b->microbatch < 0 || b->microbatch >= M)
        {
          st = pp_error_set (err, PP_EINVAL, "block %zu names stage %d, micro-batch %d, outside the schedule",
                             i, b->stage, b->microbatch);
          goto out;
        }
      size_t c = (size_t) b->stage * M + b->microbatch;
      if (b->kind == PP_ACT_F || b->kind == PP_ACT_OVERLAP_F_B)
        f_at[c] = (long) i;
      if (is_grad (b->kind))
        g_at[c] = (long) i;
      if (b->kind == PP_ACT_OVERLAP_F_B && is_grad (b->sub_kind) && b->sub_stage >= 0
          && b->sub_stage < s->n_stages && b->sub_microbatch >= 0 && b->sub_microbatch < M)
        g_at[(size_t) b->sub_stage * M + b->sub_microbatch] = (long) i;
      if (b->start < out->start)
        out->start = b->start;
      if (last == SIZE_MAX || b->end > blocks[last].end)
        last = i;
    }
  if (n == 0)
    {
      out->start = out->end = 0;
      goto out;
    }
  out->end = blocks[last].end;

  /* each block's previous block on its rank */
  for (size_t i = 0; i < n; i++)
    order[i] = i;
  sort_blocks = blocks;
  qsort (order, n, sizeof *order, cmp_index);
  for (size_t k = 0; k < n; k++)
    prev[order[k]] = k > 0 && blocks[order[k - 1]].rank == blocks[order[k]].rank ? order[k - 1] : SIZE_MAX;

  /* walk back from the last block; at most n steps (each goes to an earlier block) */
  out->steps = malloc (n * sizeof *out->steps);
  if (out->steps == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  size_t cur = last, len = 0;
  while (cur != SIZE_MAX && len < n)
    {
      const PpWhyBlock *b = &blocks[cur];
      size_t best = SIZE_MAX;
      double best_t = -INFINITY, best_x = 0;
      int best_via = PP_WHY_VIA_START;

      if (prev[cur] != SIZE_MAX)
        {
          best = prev[cur];
          best_t = blocks[best].end;
          best_via = PP_WHY_VIA_RANK;
        }
      /* the halves' dependencies (both for an OVERLAP_F_B) */
      for (int half = 0; half < 2; half++)
        {
          int kind = half == 0 ? (b->kind == PP_ACT_OVERLAP_F_B ? PP_ACT_F : b->kind) : b->sub_kind;
          int stage = half == 0 ? b->stage : b->sub_stage;
          int mb = half == 0 ? b->microbatch : b->sub_microbatch;
          PpDependency dep[2];
          if (half == 1 && b->kind != PP_ACT_OVERLAP_F_B)
            break;
          if (stage < 0 || stage >= s->n_stages || mb < 0 || mb >= M)
            continue;
          int nd = pp_schedule_dependencies (s, kind, stage, dep);
          for (int d = 0; d < nd; d++)
            {
              long j = (dep[d].kind == PP_ACT_F ? f_at : g_at)[(size_t) dep[d].stage * M + mb];
              /* one that started after this block did cannot have held it */
              if (j < 0 || (size_t) j == cur || blocks[j].start >= b->start)
                continue;
              double x = dep[d].boundary >= 0 && comm != NULL ? comm[dep[d].boundary] : 0;
              double t = blocks[j].end + x;
              /* the later wins; on a tie a dependency beats the rank's
               * previous block (the hand-off), and the first of two tied
               * dependencies stays */
              int tie = best != SIZE_MAX && near (t, best_t);
              if (best == SIZE_MAX || (t > best_t && !tie)
                  || (tie && best_via != PP_WHY_VIA_DEPENDENCY))
                {
                  best = (size_t) j;
                  best_t = t;
                  best_x = x;
                  best_via = PP_WHY_VIA_DEPENDENCY;
                }
            }
        }
      out->steps[len].block = *b;
      out->steps[len].via = best != SIZE_MAX ? best_via : PP_WHY_VIA_START;
      out->steps[len].transfer = best != SIZE_MAX && best_via == PP_WHY_VIA_DEPENDENCY ? best_x : 0;
      len++;
      cur = best;
    }
  /* into first-to-last order */
  for (size_t i = 0; i < len / 2; i++)
    {
      PpWhyPathStep t = out->steps[i];
      out->steps[i] = out->steps[len - 1 - i];
      out->steps[len - 1 - i] = t;
    }
  out->n = len;
  double busy = 0;
  for (size_t i = 0; i < len; i++)
    {
      const PpWhyBlock *b = &out->steps[i].block;
      double d = b->end - b->start;
      if (b->kind == PP_ACT_OVERLAP_F_B && b->sub_stage >= 0 && b->sub_stage < s->n_stages)
        {
          /* F : B = 1 : 2, as the measured costs split them */
          out->stage_time[b->stage] += d / 3;
          out->stage_time[b->sub_stage] += 2 * d / 3;
        }
      else
        out->stage_time[b->stage] += d;
      busy += d;
      out->transfer_time += out->steps[i].transfer;
    }
  out->slack_time = (out->end - out->start) - busy - out->transfer_time;

out:
  free (f_at);
  free (g_at);
  free (order);
  free (prev);
  if (st != PP_OK)
    pp_why_path_clear (out);
  return st;
}

PpStatus
pp_why_blocks_of_simulation (const PpSimulation *sim, PpWhyBlock **out, size_t *n_out, PpError *err)
{
  const PpSchedule *s;
  size_t n = 0;

  *out = NULL;
  *n_out = 0;
  if (sim == NULL || (s = sim->schedule) == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_blocks_of_simulation: a simulation is required");
  PpWhyBlock *b = malloc ((size_t) (pp_schedule_total_actions (s) + 1) * sizeof *b);
  if (b == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        if (!pp_action_is_compute (a))
          continue;
        b[n] = (PpWhyBlock) { r, a->kind, a->stage, a->microbatch, a->sub_kind, a->sub_stage,
                              a->sub_microbatch, sim->timeline[r][k].start, sim->timeline[r][k].end };
        n++;
      }
  *out = b;
  *n_out = n;
  return PP_OK;
}
