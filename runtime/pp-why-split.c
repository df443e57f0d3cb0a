/* pp-why-split.c — a rank's idle time split by cause (pp-why.h): the
 * levels of three simulations (balanced, per stage, with the transfers)
 * and the measured idle, their rises the parts. */
#include "pp-why.h"
#include "pp-why-private.h"
#include "pp-why-runtime.h"

#include <stdlib.h>

static const char *const part_names[PP_WHY_N_PARTS] = { "schedule", "imbalance", "transfers", "runtime" };

const char *
pp_why_part_name (int part)
{
  return part >= 0 && part < PP_WHY_N_PARTS ? part_names[part] : "?";
}

double
pp_why_idle_part (const PpWhyIdle *idle, int part)
{
  switch (part)
    {
    case 0: return idle->schedule;
    case 1: return idle->imbalance;
    case 2: return idle->transfers;
    case 3: return idle->runtime;
    default: return 0;
    }
}

void
pp_why_split_levels (double balanced, double per_stage, double full, PpWhyIdle *out)
{
  /* The levels are held to the least of themselves and every level after
   * them, the measured idle last: they then rise from 0 to the measured
   * idle, the parts (the rises) are never negative and telescope to it
   * exactly.  A level above a later one (the slow stage's rank idles less
   * in the per-stage plan than in the balanced one; a run that idles less
   * than its plan) is cut to it: the part that would be negative is 0 and
   * what it would take comes off the parts before it, the latest first.
   * Where nothing is negative, each part is its plain difference. */
  double level[3] = { balanced, per_stage, full }, cum[4];
  cum[3] = out->measured;
  for (int k = 2; k >= 0; k--)
    {
      cum[k] = level[k] < cum[k + 1] ? level[k] : cum[k + 1];   /* NaN: the later level */
      if (!(cum[k] > 0))
        cum[k] = 0;
    }
  out->schedule = cum[0];
  out->imbalance = cum[1] - cum[0];
  out->transfers = cum[2] - cum[1];
  out->runtime = cum[3] - cum[2];
}

void
pp_why_split_dp (PpWhyIdle *w, double balanced, double per_stage, double full, double dp)
{
  double measured = w->measured;
  double d = dp > 0 ? (dp < measured ? dp : measured) : 0;
  if (!(d >= 0))
    d = 0;
  w->measured = measured - d;
  pp_why_split_levels (balanced, per_stage, full, w);
  w->dp_comm = d;
}

static PpCostModel *
cost_model_copy (const PpCostModel *c, int with_comm)
{
  PpCostModel *o = pp_cost_model_new_uniform (c->n_stages, 0, 0, 0, 0);
  if (o == NULL)
    return NULL;
  for (int i = 0; i < c->n_stages; i++)
    {
      o->f[i] = c->f[i];
      o->b[i] = c->b[i];
      o->w[i] = c->w[i];
      o->comm[i] = with_comm ? c->comm[i] : 0;
    }
  return o;
}

PpStatus
pp_why_split (const PpSchedule *s, const PpCostModel *costs, const double *measured_idle,
              PpWhyIdle *out, PpError *err)
{
  return split_with_dp (s, costs, measured_idle, NULL, out, err);
}

/* pp_why_split, with dp[r] (may be NULL) each rank's data-parallel
 * communication in the step: its own part (pp_why_split_dp). */
PpStatus
split_with_dp (const PpSchedule *s, const PpCostModel *costs, const double *measured_idle,
               const double *dp, PpWhyIdle *out, PpError *err)
{
  PpCostModel *cm[3] = { NULL, NULL, NULL };
  PpSimulation *sim[3] = { NULL, NULL, NULL };
  PpStatus st = PP_OK;
  double f = 0, b = 0, w = 0;

  if (s == NULL || costs == NULL || out == NULL || costs->n_stages != s->n_stages
      || s->n_stages <= 0)
    return pp_error_set (err, PP_EINVAL, "pp_why_split: a schedule and costs of its %d stages are required",
                         s ? s->n_stages : 0);
  for (int i = 0; i < costs->n_stages; i++)
    {
      f += costs->f[i];
      b += costs->b[i];
      w += costs->w[i];
    }
  f /= costs->n_stages;
  b /= costs->n_stages;
  w /= costs->n_stages;
  /* balanced (the mean action), then per stage, then with the transfers */
  cm[0] = pp_cost_model_new_uniform (s->n_stages, f, b, w, 0);
  cm[1] = cost_model_copy (costs, 0);
  cm[2] = cost_model_copy (costs, 1);
  if (cm[0] == NULL || cm[1] == NULL || cm[2] == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (int k = 0; k < 3; k++)
    if ((st = pp_simulate (s, cm[k], &sim[k], err)) != PP_OK)
      goto out;
  for (int r = 0; r < s->ranks; r++)
    {
      PpWhyIdle *o = &out[r];
      o->measured = measured_idle != NULL ? measured_idle[r] : sim[2]->rank[r].idle;
      pp_why_split_dp (o, sim[0]->rank[r].idle, sim[1]->rank[r].idle, sim[2]->rank[r].idle,
                       dp != NULL ? dp[r] : 0);
      pp_why_runtime_reset (o);
    }
out:
  for (int k = 0; k < 3; k++)
    {
      pp_simulation_free (sim[k]);
      pp_cost_model_free (cm[k]);
    }
  return st;
}
