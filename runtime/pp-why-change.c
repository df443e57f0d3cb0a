/* pp-why-change.c — what to change (pp-why.h): the slowest stage, and
 * for a run of the bundled model the partition of its blocks that
 * balances the stages, fitted to the measured costs, with its predicted
 * step. */
#include "pp-why.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
format_blocks (char *buf, size_t size, const int *blocks, int n)
{
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len + 1 < size; i++)
    len += (size_t) snprintf (buf + len, size - len, "%s%d", i ? "," : "", blocks[i]);
}

/* Solves the 3x3 system a x = y (Cramer); 0 when singular. */
static int
solve3 (const double a[3][3], const double y[3], double x[3])
{
  double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
             - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
             + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
  double scale = fabs (a[0][0]) + fabs (a[1][1]) + fabs (a[2][2]);
  if (!(fabs (det) > 1e-9 * scale * scale * scale))
    return 0;
  for (int c = 0; c < 3; c++)
    {
      double m[3][3];
      memcpy (m, a, sizeof m);
      for (int r = 0; r < 3; r++)
        m[r][c] = y[r];
      x[c] = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
              - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
              + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])) / det;
    }
  return 1;
}

/* Per kind (f, b, w): the time of one block, of the input projection and of
 * the head, fitted to the stages' measured costs. */
static void
fit_unit_costs (const PpCostModel *c, const int *blocks, int S, const double flops[3],
                double unit[3][3])
{
  const double *meas[3] = { c->f, c->b, c->w };
  for (int k = 0; k < 3; k++)
    {
      double a[3][3] = { { 0 } }, y[3] = { 0 }, x[3];
      double sum_m = 0, sum_c = 0;
      for (int s = 0; s < S; s++)
        {
          double feat[3] = { blocks[s], s == 0, s == S - 1 };
          for (int i = 0; i < 3; i++)
            {
              for (int j = 0; j < 3; j++)
                a[i][j] += feat[i] * feat[j];
              y[i] += feat[i] * meas[k][s];
            }
          sum_m += meas[k][s];
          sum_c += feat[0] * flops[0] + feat[1] * flops[1] + feat[2] * flops[2];
        }
      if (S >= 3 && solve3 (a, y, x) && x[0] > 0 && x[1] >= 0 && x[2] >= 0)
        memcpy (unit[k], x, sizeof x);
      else
        for (int i = 0; i < 3; i++)
          unit[k][i] = sum_c > 0 ? flops[i] * sum_m / sum_c : 0;
    }
}

static double
part_cost (const double unit[3][3], int k, int n_blocks, int first, int last)
{
  return unit[k][0] * n_blocks + (first ? unit[k][1] : 0) + (last ? unit[k][2] : 0);
}

/* The partition of L blocks over S stages whose slowest stage (F + B) is
 * fastest: the first and last stages carry the extras; the middle ones
 * share the rest evenly (any split of it costs the same at its max). */
static void
balance (const double unit[3][3], int L, int S, int *out)
{
  double best = INFINITY;
  if (S == 1)
    {
      out[0] = L;
      return;
    }
  for (int n0 = 1; n0 <= L - (S - 1); n0++)
    for (int nl = 1; n0 + nl <= L - (S - 2); nl++)
      {
        int rest = L - n0 - nl, mid = S - 2;
        if (mid == 0 && rest != 0)
          continue;
        if (mid > 0 && rest < mid)
          continue;
        double c0 = part_cost (unit, 0, n0, 1, 0) + part_cost (unit, 1, n0, 1, 0);
        double cl = part_cost (unit, 0, nl, 0, 1) + part_cost (unit, 1, nl, 0, 1);
        double cm = mid > 0 ? (unit[0][0] + unit[1][0]) * ((rest + mid - 1) / mid) : 0;
        double worst = fmax (c0, fmax (cl, cm));
        if (worst < best * (1 - 1e-12))
          {
            best = worst;
            out[0] = n0;
            out[S - 1] = nl;
            for (int i = 0; i < mid; i++)
              out[1 + i] = rest / mid + (i >= mid - rest % mid ? 1 : 0);
          }
      }
}

PpStatus
pp_why_suggest_partition (const PpSchedule *s, const PpCostModel *costs,
                          const PpModelConfig *model, const int *blocks, int cores,
                          PpWhyChange *out, PpError *err)
{
  PpSimulation *sim = NULL;
  PpStatus st;
  int S;

  if (out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_suggest_partition: out is required");
  memset (out, 0, sizeof *out);
  if (s == NULL || costs == NULL || costs->n_stages != s->n_stages || s->n_stages < 1)
    return pp_error_set (err, PP_EINVAL, "pp_why_suggest_partition: a schedule and its stages' costs are required");
  S = s->n_stages;
  out->slowest_stage = 0;
  for (int i = 0; i < S; i++)
    {
      double c = costs->f[i] + costs->b[i];
      out->mean_cost += c / S;
      if (c > out->slowest_cost)
        {
          out->slowest_cost = c;
          out->slowest_stage = i;
        }
    }
  /* the slowest is never below the mean, but the mean summed as c / S can
   * round above equal costs (16 stages of 3 ms printed "-0% above") */
  out->excess = out->mean_cost > 0 ? fmax (0, out->slowest_cost / out->mean_cost - 1) : 0;
  if ((st = pp_simulate (s, costs, &sim, err)) != PP_OK)
    return st;
  out->current_step = sim->makespan;
  pp_simulation_free (sim);
  sim = NULL;
  if (cores > 0 && cores < s->ranks)
    {
      out->cores = cores;
      if ((st = pp_simulate_shared (s, costs, cores, &out->current_step, err)) != PP_OK)
        return st;
    }

  /* the bundled model's parts follow one chain: stage i runs part i */
  int one_chain = 1;
  for (int i = 0; i < S; i++)
    if (s->stage_next[i] != (i + 1 < S ? i + 1 : -1))
      one_chain = 0;
  if (model == NULL || blocks == NULL || !one_chain)
    return PP_OK;

  PpError merr = { 0 };
  PpModel *m = pp_model_new (model, &merr);
  if (m == NULL)
    return pp_error_set (err, PP_EINVAL, "%s", merr.msg);
  double flops[3] = { pp_model_cost_block (m), pp_model_cost_input (m), pp_model_cost_head (m) };
  int L = pp_model_config (m)->layers;
  pp_model_free (m);
  int sum = 0;
  for (int i = 0; i < S; i++)
    {
      if (blocks[i] < 1)
        return pp_error_set (err, PP_EINVAL, "stage %d has %d blocks; every stage needs one", i, blocks[i]);
      sum += blocks[i];
    }
  if (sum != L || L < S)
    return pp_error_set (err, PP_EINVAL, "the partition has %d blocks, the model %d", sum, L);

  double unit[3][3];
  int *nb = malloc ((size_t) S * sizeof *nb);
  PpCostModel *pred = pp_cost_model_new_uniform (S, 0, 0, 0, 0);
  if (nb == NULL || pred == NULL)
    {
      free (nb);
      pp_cost_model_free (pred);
      return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  fit_unit_costs (costs, blocks, S, flops, unit);
  balance (unit, L, S, nb);
  for (int i = 0; i < S; i++)
    {
      pred->f[i] = part_cost (unit, 0, nb[i], i == 0, i == S - 1);
      pred->b[i] = part_cost (unit, 1, nb[i], i == 0, i == S - 1);
      pred->w[i] = fmin (part_cost (unit, 2, nb[i], i == 0, i == S - 1), pred->b[i]);
      pred->comm[i] = costs->comm[i];
    }
  st = pp_simulate (s, pred, &sim, err);
  if (st == PP_OK && out->cores > 0)
    st = pp_simulate_shared (s, pred, out->cores, &out->predicted_step, err);
  else if (st == PP_OK)
    out->predicted_step = sim->makespan;
  if (st == PP_OK)
    {
      out->has_partition = 1;
      format_blocks (out->current, sizeof out->current, blocks, S);
      format_blocks (out->partition, sizeof out->partition, nb, S);
      out->changed = memcmp (nb, blocks, (size_t) S * sizeof *nb) != 0;
    }
  pp_simulation_free (sim);
  pp_cost_model_free (pred);
  free (nb);
  return st;
}

PpStatus
pp_why_model_of_description (const PpTraceDescription *d, int n_parts, PpModelConfig *model,
                             int *blocks, PpError *err)
{
  int L = 0, D = 0;
  char spec[PP_WHY_PARTITION_MAX] = "auto";
  const char *p;
  PpModel *m;
  PpStatus st;

  memset (model, 0, sizeof *model);
  if (d == NULL || sscanf (d->model, "residual MLP: %d blocks, width %d", &L, &D) != 2)
    return pp_error_set (err, PP_EINVAL, "not a run of the bundled model (no \"residual MLP\" line)");
  /* --partition X or --partition=X in the command line */
  if ((p = strstr (d->cmdline, "--partition")) != NULL)
    {
      p += strlen ("--partition");
      if (*p == '=' || *p == ' ')
        {
          p++;
          size_t k = 0;
          while (p[k] != '\0' && p[k] != ' ' && k + 1 < sizeof spec)
            {
              spec[k] = p[k];
              k++;
            }
          spec[k] = '\0';
        }
    }
  model->layers = L;
  model->width = D;
  if ((m = pp_model_new (model, err)) == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_EINVAL;
  st = pp_model_partition (m, n_parts, spec, blocks, err);
  pp_model_free (m);
  return st;
}

int
pp_why_cores_of_description (const PpTraceDescription *d)
{
  int ranks = 0, cores = 0;
  const char *p = d != NULL ? strstr (d->model, "; ") : NULL;
  if (p == NULL || sscanf (p, "; %d rank threads on %d cores", &ranks, &cores) != 2)
    return 0;
  return cores > 0 && ranks > cores ? cores : 0;
}
