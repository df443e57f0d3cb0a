/* pp-why-plan.c — the schedule a trace ran (pp-why.h): the one its
 * description names, or the one its recorded plans spell out, and the
 * plans' data-parallel actions placed in it. */
#include "pp-why.h"

#include <stdlib.h>
#include <string.h>

PpStatus
pp_why_schedule_of_description (const PpTraceDescription *d, PpSchedule **out, PpError *err)
{
  char name[sizeof d->schedule];

  *out = NULL;
  if (d == NULL || d->n_ranks < 1 || d->n_microbatches < 1)
    return pp_error_set (err, PP_EINVAL, "the trace does not describe its schedule (no P and M)");
  long work = (long) d->n_ranks * d->n_microbatches * (d->n_virtual > 0 ? d->n_virtual : 1);
  if (work > PP_SUGGEST_MAX_WORK)
    return pp_error_set (err, PP_EINVAL,
                         "P=%d x M=%d x V=%d is too large to analyse (more than %ld stage visits a step)",
                         d->n_ranks, d->n_microbatches, d->n_virtual, (long) PP_SUGGEST_MAX_WORK);
  memcpy (name, d->schedule, sizeof name);
  name[sizeof name - 1] = '\0';
  return pp_schedule_generate (name, d->n_ranks, d->n_microbatches,
                               d->n_virtual > 0 ? d->n_virtual : 0, out, err);
}

/* The plan's compute actions of every rank as PpAction arrays (transfers,
 * optimizer steps and data-parallel actions left out; an unknown kind kept, for the inference to
 * name); PP_EINVAL with one line where the plan is too large. */
static PpStatus
plan_actions (const PpWhyPlans *plans, int P, PpAction ***acts_out, int **n_out, PpError *err)
{
  long total = 0;
  PpAction **acts = calloc ((size_t) P, sizeof *acts);
  int *n = calloc ((size_t) P, sizeof *n);

  *acts_out = NULL;
  *n_out = NULL;
  if (acts == NULL || n == NULL)
    goto oom;
  for (int r = 0; r < P; r++)
    {
      if (plans->n_actions[r] > (size_t) PP_WHY_PLAN_MAX_ACTIONS
          || (total += (long) plans->n_actions[r]) > PP_WHY_PLAN_MAX_ACTIONS)
        {
          free (acts);
          free (n);
          return pp_error_set (err, PP_EINVAL, "the plan holds more than %ld actions, too many to analyse",
                               (long) PP_WHY_PLAN_MAX_ACTIONS);
        }
    }
  for (int r = 0; r < P; r++)
    {
      const PpTracePlanAction *pa = plans->actions[r];
      if ((acts[r] = malloc ((plans->n_actions[r] + 1) * sizeof **acts)) == NULL)
        goto oom;
      for (size_t k = 0; k < plans->n_actions[r]; k++)
        {
          int kind = pa[k].kind;
          if ((kind >= PP_ACT_SEND_F && kind <= PP_ACT_RECV_B) || kind == PP_ACT_OPT
              || (kind >= PP_ACT_UNSHARD && kind <= PP_ACT_WAIT_REDUCE_GRAD))
            continue;
          acts[r][n[r]++] = (PpAction) { kind, pa[k].stage, pa[k].microbatch,
                                         pa[k].sub_kind, pa[k].sub_stage, pa[k].sub_microbatch };
        }
    }
  *acts_out = acts;
  *n_out = n;
  return PP_OK;
oom:
  if (acts != NULL)
    for (int r = 0; r < P; r++)
      free (acts[r]);
  free (acts);
  free (n);
  return pp_error_set (err, PP_ENOMEM, "out of memory");
}

static void
free_plan_actions (PpAction **acts, int *n, int P)
{
  if (acts != NULL)
    for (int r = 0; r < P; r++)
      free (acts[r]);
  free (acts);
  free (n);
}

/* Does s run exactly these actions, in this order, on every rank? */
static int
runs_plan (const PpSchedule *s, PpAction *const *acts, const int *n)
{
  for (int r = 0; r < s->ranks; r++)
    {
      if (s->rank[r].n_actions != n[r])
        return 0;
      for (int k = 0; k < n[r]; k++)
        if (!pp_action_equal (&s->rank[r].actions[k], &acts[r][k]))
          return 0;
    }
  return 1;
}

/* Whether plans hold a plan with a compute action for every rank of d and
 * none for a rank past them. */
static int
plans_cover (const PpTraceDescription *d, const PpWhyPlans *plans)
{
  if (plans == NULL || plans->actions == NULL || plans->n_actions == NULL || d->n_ranks < 1
      || d->n_ranks > PP_TRACE_MAX_RANKS || plans->n_ranks < d->n_ranks)
    return 0;
  for (int r = 0; r < plans->n_ranks; r++)
    {
      int compute = 0;
      for (size_t k = 0; k < plans->n_actions[r] && !compute; k++)
        {
          int kind = plans->actions[r][k].kind;
          compute = kind == PP_ACT_F || kind == PP_ACT_B || kind == PP_ACT_I || kind == PP_ACT_W
                    || kind == PP_ACT_OVERLAP_F_B;
        }
      if (compute != (r < d->n_ranks))
        return 0;
    }
  return 1;
}

static size_t n_built;

size_t
pp_why_schedules_built (void)
{
  return __atomic_load_n (&n_built, __ATOMIC_RELAXED);
}

PpStatus
pp_why_schedule_of_trace (const PpTraceDescription *d, const PpWhyPlans *plans, PpSchedule **out,
                          PpError *err)
{
  PpSchedule *named = NULL, *built = NULL;
  PpError nerr = { 0 }, perr = { 0 };
  PpStatus nst, pst;
  PpAction **acts = NULL;
  int *n = NULL;

  *out = NULL;
  __atomic_fetch_add (&n_built, 1, __ATOMIC_RELAXED);
  if (d == NULL || !plans_cover (d, plans))
    return pp_why_schedule_of_description (d, out, err);
  int P = d->n_ranks;
  nst = pp_why_schedule_of_description (d, &named, &nerr);
  if ((pst = plan_actions (plans, P, &acts, &n, &perr)) == PP_OK)
    {
      if (nst == PP_OK && runs_plan (named, acts, n))
        {
          free_plan_actions (acts, n, P);
          *out = named;
          return PP_OK;
        }
      char name[sizeof d->schedule];
      memcpy (name, d->schedule, sizeof name);
      name[sizeof name - 1] = '\0';
      pst = pp_schedule_from_actions (P, (const PpAction *const *) acts, n, name[0] ? name : "plan",
                                      PP_SUGGEST_MAX_WORK, &built, &perr);
      if (pst == PP_OK && built->microbatches != d->n_microbatches)
        {
          pst = pp_error_set (&perr, PP_EFORMAT, "it runs %d micro-batches, the description says %d",
                              built->microbatches, d->n_microbatches);
          pp_schedule_free (built);
          built = NULL;
        }
    }
  free_plan_actions (acts, n, P);
  if (pst == PP_OK)
    {
      pp_schedule_free (named);
      *out = built;
      return PP_OK;
    }
  if (nst == PP_OK)
    {
      *out = named;   /* the plan contradicts itself: the name's */
      return PP_OK;
    }
  return pp_error_set (err, pst == PP_ENOMEM ? PP_ENOMEM : PP_EINVAL, "the trace's plan: %.200s; by its name: %.250s",
                       perr.msg, nerr.msg);
}

PpStatus
pp_why_schedule_with_comms (const PpSchedule *s, const PpWhyPlans *plans, PpSchedule **out,
                            PpError *err)
{
  PpSchedule *o = NULL;
  PpStatus st = PP_OK;
  int any = 0;

  *out = NULL;
  if (s == NULL || plans == NULL || plans->actions == NULL || plans->n_actions == NULL)
    return PP_OK;
  for (int r = 0; r < s->ranks && r < plans->n_ranks && !any; r++)
    for (size_t k = 0; k < plans->n_actions[r] && !any; k++)
      any = plans->actions[r][k].kind >= PP_ACT_UNSHARD && plans->actions[r][k].kind <= PP_ACT_WAIT_REDUCE_GRAD;
  if (!any)
    return PP_OK;
  o = pp_schedule_new (s->name, s->ranks, s->microbatches, s->stages_per_rank, PP_PLACE_CUSTOM);
  if (o == NULL)
    goto oom;
  if (o->n_stages != s->n_stages)
    {
      st = pp_error_set (err, PP_EINVAL, "%s's stages cannot hold data-parallel actions", s->name);
      goto out;
    }
  memcpy (o->stage_rank, s->stage_rank, (size_t) s->n_stages * sizeof *s->stage_rank);
  memcpy (o->stage_prev, s->stage_prev, (size_t) s->n_stages * sizeof *s->stage_prev);
  memcpy (o->stage_next, s->stage_next, (size_t) s->n_stages * sizeof *s->stage_next);
  memcpy (o->stage_mb_lo, s->stage_mb_lo, (size_t) s->n_stages * sizeof *s->stage_mb_lo);
  memcpy (o->stage_mb_hi, s->stage_mb_hi, (size_t) s->n_stages * sizeof *s->stage_mb_hi);
  for (int r = 0; r < s->ranks; r++)
    {
      const PpRankActions *ra = &s->rank[r];
      size_t np = r < plans->n_ranks ? plans->n_actions[r] : 0;
      int next = 0;   /* s's next compute action on r */
      for (size_t k = 0; k < np; k++)
        {
          const PpTracePlanAction *pa = &plans->actions[r][k];
          PpAction a = { pa->kind, pa->stage, pa->microbatch, pa->sub_kind, pa->sub_stage, pa->sub_microbatch };
          char buf[PP_ACTION_STR_MAX];
          if (pp_action_is_dp_comm (&a))
            {
              if (a.stage < 0 || a.stage >= s->n_stages || s->stage_rank[a.stage] != r)
                {
                  st = pp_error_set (err, PP_EINVAL, "rank %d's plan runs %s, of a stage it does not hold",
                                     r, pp_action_to_string (&a, buf, sizeof buf));
                  goto out;
                }
              a.microbatch = -1;
            }
          else if (!pp_action_is_compute (&a))
            continue;   /* transfers and the optimizer: not planned here */
          else if (next >= ra->n_actions || !pp_action_equal (&a, &ra->actions[next]))
            {
              st = pp_error_set (err, PP_EINVAL,
                                 "rank %d's plan runs %s where the schedule runs %s: its data-parallel "
                                 "actions cannot be placed", r, pp_action_to_string (&a, buf, sizeof buf),
                                 next < ra->n_actions ? "another action" : "nothing more");
              goto out;
            }
          else
            a = ra->actions[next++];
          if (pp_schedule_push (o, r, a) != PP_OK)
            goto oom;
        }
      /* a rank without a plan (or with a short one) keeps s's order */
      for (; next < ra->n_actions; next++)
        if (pp_schedule_push (o, r, ra->actions[next]) != PP_OK)
          goto oom;
    }
  *out = o;
  return PP_OK;
oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory");
out:
  pp_schedule_free (o);
  return st;
}
