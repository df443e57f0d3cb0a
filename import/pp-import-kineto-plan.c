/* pp-import-kineto-plan.c — the plan rebuilt from the traces: each rank's
 * blocks of one step in the order run, matched to a known schedule or read
 * as a schedule of its own, and the stages' measured costs for its
 * timeline. */
#include "pp-import-kineto-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-suggest.h"

static PpAction
action_of (const Ev *e)
{
  PpAction a = { e->kind, e->stage, e->mb, e->sub_kind, e->sub_stage, e->sub_mb };
  return a;
}

void
shape_clear (Shape *s)
{
  if (s->order)
    for (int r = 0; r < s->P; r++)
      free (s->order[r]);
  free (s->order);
  free (s->n_order);
  free (s->stage_rank);
  pp_schedule_free (s->sched);
  memset (s, 0, sizeof *s);
}

static bool
orders_equal (const PpSchedule *s, const Shape *sh)
{
  if (s->ranks != sh->P || s->n_stages != sh->n_stages)
    return false;
  for (int r = 0; r < sh->P; r++)
    {
      size_t k = 0;
      for (int i = 0; i < s->rank[r].n_actions; i++)
        {
          const PpAction *a = &s->rank[r].actions[i];
          if (!pp_action_is_compute (a))
            continue;
          if (k >= sh->n_order[r] || !pp_action_equal (a, &sh->order[r][k]))
            return false;
          k++;
        }
      if (k != sh->n_order[r])
        return false;
    }
  return true;
}

static bool
small_enough (const Shape *sh)
{
  long work = (long) sh->P * sh->M * (sh->V > 0 ? sh->V : 1);
  return sh->P >= 1 && sh->M >= 1 && work <= PP_SUGGEST_MAX_WORK;
}

/* A known schedule whose order the observed one is, into sh->sched. */
void
match_known (Shape *sh)
{
  if (!small_enough (sh))
    return;
  for (const PpScheduleInfo *info = pp_schedule_list (); info->name != NULL; info++)
    {
      PpSchedule *s = NULL;
      if (pp_schedule_generate (info->name, sh->P, sh->M, info->takes_v ? sh->V : 0, &s, NULL) != PP_OK)
        continue;
      if (orders_equal (s, sh))
        {
          sh->sched = s;
          sh->matched = 1;
          return;
        }
      pp_schedule_free (s);
    }
}

/* The observed order itself as a schedule, read as PyTorch's CSV through
 * the one CSV reader (which validates it); none when it is not one. */
void
observed_schedule (Shape *sh)
{
  if (!small_enough (sh))
    return;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  if (f == NULL)
    return;
  for (int r = 0; r < sh->P; r++)
    {
      for (size_t k = 0; k < sh->n_order[r]; k++)
        {
          char a[PP_ACTION_STR_MAX];
          pp_action_to_string (&sh->order[r][k], a, sizeof a);
          fprintf (f, "%s%s", k ? "," : "", a);
        }
      fputc ('\n', f);
    }
  fclose (f);
  f = fmemopen (buf, len, "r");
  if (f != NULL)
    {
      PpSchedule *s = NULL;
      if (pp_schedule_read_csv (f, "observed", &s, NULL) == PP_OK)
        {
          if (s->ranks == sh->P && s->n_stages == sh->n_stages)
            sh->sched = s;
          else
            pp_schedule_free (s);
        }
      fclose (f);
    }
  free (buf);
}

/* Per-stage mean costs (seconds) of the blocks as imported (their compute,
 * not the waits their labels held), for the plan's timeline. */
PpCostModel *
measured_costs (const PpSpan *spans, size_t n_spans, const Shape *sh)
{
  int S = sh->n_stages;
  double *sum = calloc ((size_t) S * 4, sizeof *sum);
  long *cnt = calloc ((size_t) S * 4, sizeof *cnt);
  PpCostModel *cm = NULL;
  if (sum == NULL || cnt == NULL)
    goto out;
  for (size_t i = 0; i < n_spans; i++)
    {
      const PpSpan *sp = &spans[i];
      int slot = sp->kind == PP_SPAN_F ? 0 : sp->kind == PP_SPAN_B ? 1 : sp->kind == PP_SPAN_I ? 2
                 : sp->kind == PP_SPAN_W ? 3 : -1;
      if (slot < 0 || sp->stage < 0 || sp->stage >= S)
        continue;
      sum[sp->stage * 4 + slot] += (double) (sp->end_ns - sp->start_ns) * 1e-9;
      cnt[sp->stage * 4 + slot]++;
    }
  cm = pp_cost_model_new_uniform (S, 1e-3, 2e-3, 1e-3, 0);
  if (cm == NULL)
    goto out;
  for (int s = 0; s < S; s++)
    {
      double mean[4];
      for (int k = 0; k < 4; k++)
        mean[k] = cnt[s * 4 + k] > 0 ? sum[s * 4 + k] / (double) cnt[s * 4 + k] : -1;
      double f = mean[0] > 0 ? mean[0] : 1e-6;
      double w = mean[3] > 0 ? mean[3] : 0;
      double b = mean[1] > 0 ? mean[1] : mean[2] > 0 ? mean[2] + w : 2 * f;
      if (w >= b)
        w = b / 2;
      cm->f[s] = f;
      cm->b[s] = b;
      cm->w[s] = w;
      cm->comm[s] = 0;   /* the plan takes transfers as free */
    }
out:
  free (sum);
  free (cnt);
  return cm;
}

/* sh->order: each rank's blocks of one step, in the order run. */
PpStatus
build_order (const Import *im, Shape *sh, bool use_pp, int step, size_t *total, PpError *err)
{
  *total = 0;
  for (size_t i = 0; i < im->n; i++)
    {
      const RankData *rd = &im->ranks[i];
      int r = rd->rank;
      size_t cnt = 0;
      if (im->rank_of != NULL && im->rank_of[r] != (int) i)
        continue;   /* a replica: its pipeline rank's order is the first replica's */
      for (size_t k = 0; k < rd->n_ev; k++)
        cnt += is_block_of (&rd->ev[k], use_pp) && rd->ev[k].step == step;
      free (sh->order[r]);
      sh->order[r] = malloc ((cnt + 1) * sizeof *sh->order[r]);
      sh->n_order[r] = 0;
      if (sh->order[r] == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp) && rd->ev[k].step == step)
          sh->order[r][sh->n_order[r]++] = action_of (&rd->ev[k]);
      *total += cnt;
    }
  return PP_OK;
}
