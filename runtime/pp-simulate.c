/* pp-simulate.c — the planned timeline: list scheduling in each rank's order. */
#include "pp-simulate.h"
#include "pp-schedule-private.h"
#include "pp-schedule-rules.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

PpCostModel *
pp_cost_model_new_uniform (int n_stages, double f, double b, double w, double c)
{
  PpCostModel *cm;

  if (n_stages <= 0)
    return NULL;
  cm = calloc (1, sizeof *cm);
  if (cm == NULL)
    return NULL;
  cm->n_stages = n_stages;
  cm->f = calloc ((size_t) n_stages * (4 + PP_COST_N_DP), sizeof (double));
  if (cm->f == NULL)
    {
      free (cm);
      return NULL;
    }
  cm->b = cm->f + n_stages;
  cm->w = cm->b + n_stages;
  cm->comm = cm->w + n_stages;
  cm->dp = cm->comm + n_stages;
  for (int s = 0; s < n_stages; s++)
    {
      cm->f[s] = f;
      cm->b[s] = b;
      cm->w[s] = w;
      cm->comm[s] = c;
    }
  return cm;
}

double
pp_cost_model_dp (const PpCostModel *c, int kind, int stage)
{
  int k = kind - PP_ACT_UNSHARD;
  if (c == NULL || c->dp == NULL || k < 0 || k >= PP_COST_N_DP || stage < 0 || stage >= c->n_stages)
    return 0;
  return c->dp[(size_t) k * (size_t) c->n_stages + (size_t) stage];
}

void
pp_cost_model_free (PpCostModel *c)
{
  if (c == NULL)
    return;
  free (c->f);
  free (c);
}

PpStatus
pp_cost_parse (const char *text, double out[4], PpError *err)
{
  const char *p = text;
  int n = 0;

  if (text == NULL || *text == '\0')
    return pp_error_set (err, PP_EINVAL, "empty cost: expected F,B,W[,C], e.g. 1,2,1,0");
  while (n < 4)
    {
      char *end;
      errno = 0;
      double v = strtod (p, &end);
      if (end == p || errno != 0 || !isfinite (v))
        return pp_error_set (err, PP_EINVAL,
                             "malformed cost '%s': expected F,B,W[,C] as numbers, e.g. 1,2,1,0", text);
      out[n++] = v;
      p = end;
      if (*p == '\0')
        break;
      if (*p != ',')
        return pp_error_set (err, PP_EINVAL,
                             "malformed cost '%s': expected F,B,W[,C] separated by commas", text);
      p++;
    }
  if (*p != '\0' || n < 3)
    return pp_error_set (err, PP_EINVAL,
                         "malformed cost '%s': expected three or four numbers F,B,W[,C]", text);
  if (n == 3)
    out[3] = 0;
  if (!(out[0] > 0) || !(out[1] > 0))
    return pp_error_set (err, PP_EINVAL, "cost '%s': F and B must be positive", text);
  if (!(out[2] >= 0) || !(out[2] < out[1]))
    return pp_error_set (err, PP_EINVAL,
                         "cost '%s': W is the weight-gradient part of B, so 0 <= W < B", text);
  if (!(out[3] >= 0))
    return pp_error_set (err, PP_EINVAL, "cost '%s': the transfer time C must be >= 0", text);
  return PP_OK;
}

void
pp_simulation_free (PpSimulation *sim)
{
  if (sim == NULL)
    return;
  if (sim->timeline != NULL)
    free (sim->timeline[0]);
  free (sim->timeline);
  free (sim->rank);
  free (sim);
}

/* Per (stage, micro-batch) completion times; NAN until the action has run. */
typedef struct {
  const PpSchedule  *s;
  const PpCostModel *c;
  double *f_end;    /* forward done */
  double *g_end;    /* input gradient done (end of B or I; W may start) */
} SimState;

static inline size_t
cell (const SimState *st, int stage, int mb)
{
  return (size_t) stage * (size_t) st->s->microbatches + (size_t) mb;
}

/* When may the (kind, stage, mb) part start?  NAN if a dependency has not run;
 * then wait_kind and wait_stage name it. */
static double
ready_time (const SimState *st, int kind, int stage, int mb, int *wait_kind, int *wait_stage)
{
  PpDependency dep[2];
  int n = pp_schedule_dependencies (st->s, kind, stage, dep);
  double t = 0;

  for (int i = 0; i < n; i++)
    {
      const double *done = dep[i].kind == PP_ACT_F ? st->f_end : st->g_end;
      double e = done[cell (st, dep[i].stage, mb)];
      if (isnan (e))
        {
          *wait_kind = dep[i].kind;
          *wait_stage = dep[i].stage;
          return NAN;
        }
      if (dep[i].boundary >= 0)
        e += st->c->comm[dep[i].boundary];
      if (e > t)
        t = e;
    }
  return t;
}

static double
duration (const SimState *st, int kind, int stage)
{
  switch (kind)
    {
    case PP_ACT_F: return st->c->f[stage];
    case PP_ACT_B: return st->c->b[stage];
    case PP_ACT_I: return st->c->b[stage] - st->c->w[stage];
    case PP_ACT_W: return st->c->w[stage];
    default: return pp_cost_model_dp (st->c, kind, stage);   /* 0 for transfers and OPT */
    }
}

static void
finish (SimState *st, int kind, int stage, int mb, double end)
{
  switch (kind)
    {
    case PP_ACT_F: st->f_end[cell (st, stage, mb)] = end; break;
    case PP_ACT_B:
    case PP_ACT_I: st->g_end[cell (st, stage, mb)] = end; break;
    default: break;
    }
}

static PpStatus
report_deadlock (const PpSchedule *s, const int *pos, const SimState *st, PpError *err)
{
  for (int r = 0; r < s->ranks; r++)
    {
      if (pos[r] >= s->rank[r].n_actions)
        continue;
      const PpAction *a = &s->rank[r].actions[pos[r]];
      int wk = -1, ws = -1, mb = a->microbatch;
      char abuf[PP_ACTION_STR_MAX], wbuf[PP_ACTION_STR_MAX], wbuf2[PP_ACTION_STR_MAX];

      if (a->kind == PP_ACT_OVERLAP_F_B)
        {
          if (isnan (ready_time (st, PP_ACT_F, a->stage, a->microbatch, &wk, &ws)))
            mb = a->microbatch;
          else
            {
              ready_time (st, a->sub_kind, a->sub_stage, a->sub_microbatch, &wk, &ws);
              mb = a->sub_microbatch;
            }
        }
      else
        ready_time (st, a->kind, a->stage, a->microbatch, &wk, &ws);
      if (ws < 0)
        continue;
      PpAction w = pp_action (wk, ws, mb);
      pp_action_to_string (&w, wbuf, sizeof wbuf);
      if (wk == PP_ACT_I && ws != (a->kind == PP_ACT_W ? a->stage : -1))
        snprintf (wbuf, sizeof wbuf, "%dB%d or %dI%d", ws, mb, ws, mb);
      int wr = s->stage_rank[ws];
      if (pos[wr] >= s->rank[wr].n_actions)
        return pp_error_set (err, PP_EDEADLOCK,
                             "deadlock: rank %d stalls at step %d on %s, which waits for %s, "
                             "but rank %d never runs it",
                             r, pos[r], pp_action_to_string (a, abuf, sizeof abuf), wbuf, wr);
      return pp_error_set (err, PP_EDEADLOCK,
                           "deadlock: rank %d stalls at step %d on %s, which waits for %s "
                           "(rank %d, itself stalled at step %d on %s)",
                           r, pos[r], pp_action_to_string (a, abuf, sizeof abuf), wbuf, wr,
                           pos[wr], pp_action_to_string (&s->rank[wr].actions[pos[wr]], wbuf2, sizeof wbuf2));
    }
  return pp_error_set (err, PP_EDEADLOCK, "deadlock: no rank can make progress");
}

PpStatus
pp_simulate (const PpSchedule *s, const PpCostModel *c, PpSimulation **out, PpError *err)
{
  PpStatus st;

  *out = NULL;
  if ((st = pp_schedule_check_structure (s, NULL, err)) != PP_OK)
    return st;
  return pp_simulate_checked (s, c, out, err);
}

PpStatus
pp_simulate_checked (const PpSchedule *s, const PpCostModel *c, PpSimulation **out, PpError *err)
{
  PpStatus st;
  PpSimulation *sim = NULL;
  SimState ss = { s, c, NULL, NULL };
  int *pos = NULL;
  double *free_at = NULL;
  size_t cells;
  long total;

  *out = NULL;
  if (c == NULL || c->n_stages != s->n_stages)
    return pp_error_set (err, PP_EINVAL, "the cost model has %d stages, the schedule %d",
                         c ? c->n_stages : 0, s->n_stages);

  cells = (size_t) s->n_stages * (size_t) s->microbatches;
  total = pp_schedule_total_actions (s);
  sim = calloc (1, sizeof *sim);
  ss.f_end = malloc (cells * 2 * sizeof (double));
  pos = calloc ((size_t) s->ranks, sizeof (int));
  free_at = calloc ((size_t) s->ranks, sizeof (double));
  if (sim == NULL || ss.f_end == NULL || pos == NULL || free_at == NULL)
    goto oom;
  sim->schedule = s;
  sim->rank = calloc ((size_t) s->ranks, sizeof (PpSimRank));
  sim->timeline = calloc ((size_t) s->ranks, sizeof (PpSimAction *));
  if (sim->rank == NULL || sim->timeline == NULL)
    goto oom;
  sim->timeline[0] = malloc ((size_t) (total > 0 ? total : 1) * sizeof (PpSimAction));
  if (sim->timeline[0] == NULL)
    goto oom;
  for (int r = 1; r < s->ranks; r++)
    sim->timeline[r] = sim->timeline[r - 1] + s->rank[r - 1].n_actions;
  ss.g_end = ss.f_end + cells;
  for (size_t i = 0; i < cells * 2; i++)
    ss.f_end[i] = NAN;

  /* Advance every rank as far as its dependencies allow, until all are done or
   * none can move.  Times do not depend on the visiting order: an action's
   * start is fixed by its rank's previous action and by finished inputs. */
  long done = 0;
  for (;;)
    {
      long before = done;
      for (int r = 0; r < s->ranks; r++)
        {
          const PpRankActions *ra = &s->rank[r];
          while (pos[r] < ra->n_actions)
            {
              const PpAction *a = &ra->actions[pos[r]];
              int wk, ws;
              double ready, dur;
              if (a->kind == PP_ACT_OVERLAP_F_B)
                {
                  double t1 = ready_time (&ss, PP_ACT_F, a->stage, a->microbatch, &wk, &ws);
                  double t2 = ready_time (&ss, a->sub_kind, a->sub_stage, a->sub_microbatch, &wk, &ws);
                  if (isnan (t1) || isnan (t2))
                    break;
                  ready = t1 > t2 ? t1 : t2;
                  dur = duration (&ss, PP_ACT_F, a->stage) + duration (&ss, a->sub_kind, a->sub_stage);
                }
              else
                {
                  ready = ready_time (&ss, a->kind, a->stage, a->microbatch, &wk, &ws);
                  if (isnan (ready))
                    break;
                  dur = duration (&ss, a->kind, a->stage);
                }
              double start = ready > free_at[r] ? ready : free_at[r];
              double end = start + dur;
              PpSimAction *sa = &sim->timeline[r][pos[r]];
              sa->rank = r;
              sa->index = pos[r];
              sa->start = start;
              sa->end = end;
              if (a->kind == PP_ACT_OVERLAP_F_B)
                {
                  finish (&ss, PP_ACT_F, a->stage, a->microbatch, end);
                  finish (&ss, a->sub_kind, a->sub_stage, a->sub_microbatch, end);
                }
              else
                finish (&ss, a->kind, a->stage, a->microbatch, end);
              free_at[r] = end;
              if (pos[r] == 0)
                sim->rank[r].first_start = start;
              sim->rank[r].last_end = end;
              sim->rank[r].busy += dur;
              pos[r]++;
              done++;
            }
        }
      if (done == total)
        break;
      if (done == before)
        {
          st = report_deadlock (s, pos, &ss, err);
          goto fail;
        }
    }

  /* Makespan, idle time and activation memory per rank. */
  sim->makespan = 0;
  for (int r = 0; r < s->ranks; r++)
    if (free_at[r] > sim->makespan)
      sim->makespan = free_at[r];
  double idle_sum = 0;
  for (int r = 0; r < s->ranks; r++)
    {
      PpSimRank *sr = &sim->rank[r];
      int cur = 0, peak = 0;
      sr->idle = sim->makespan - sr->busy;
      if (sr->idle < 0)
        sr->idle = 0;
      sr->bubble = sim->makespan > 0 ? sr->idle / sim->makespan : 0;
      idle_sum += sr->idle;
      /* A micro-batch's activations are held on a stage from its forward until
       * its backward is complete: B, or W when the backward is split. */
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          if (a->kind == PP_ACT_F || a->kind == PP_ACT_OVERLAP_F_B)
            if (++cur > peak)
              peak = cur;
          if (a->kind == PP_ACT_B || a->kind == PP_ACT_W
              || (a->kind == PP_ACT_OVERLAP_F_B && a->sub_kind == PP_ACT_B))
            cur--;
        }
      sr->peak_inflight = peak;
    }
  sim->bubble = sim->makespan > 0 ? idle_sum / ((double) s->ranks * sim->makespan) : 0;

  double busy_sum = 0;
  sim->period = 0;
  for (int r = 0; r < s->ranks; r++)
    {
      busy_sum += sim->rank[r].busy;
      if (sim->rank[r].last_end - sim->rank[r].first_start > sim->period)
        sim->period = sim->rank[r].last_end - sim->rank[r].first_start;
    }
  sim->steady_bubble = sim->period > 0
    ? fmax (0, 1 - busy_sum / ((double) s->ranks * sim->period)) : 0;

  free (ss.f_end);
  free (pos);
  free (free_at);
  *out = sim;
  return PP_OK;

oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory while simulating the schedule");
fail:
  free (ss.f_end);
  free (pos);
  free (free_at);
  pp_simulation_free (sim);
  return st;
}

/* ---- ranks sharing fewer cores than they are ---------------------------------- */

PpStatus
pp_simulate_shared (const PpSchedule *s, const PpCostModel *c, int cores, double *makespan,
                    PpError *err)
{
  SimState ss = { s, c, NULL, NULL };
  int *pos = NULL, *running = NULL;
  double *left = NULL, *free_at = NULL;
  PpStatus st = PP_OK;
  size_t cells;
  long total, done = 0;
  double t = 0;

  *makespan = 0;
  if (c == NULL || c->n_stages != s->n_stages)
    return pp_error_set (err, PP_EINVAL, "the cost model has %d stages, the schedule %d",
                         c ? c->n_stages : 0, s->n_stages);
  if (cores < 1)
    return pp_error_set (err, PP_EINVAL, "%d cores: at least one is needed", cores);
  cells = (size_t) s->n_stages * (size_t) s->microbatches;
  total = pp_schedule_total_actions (s);
  ss.f_end = malloc (cells * 2 * sizeof (double));
  pos = calloc ((size_t) s->ranks, sizeof *pos);
  running = calloc ((size_t) s->ranks, sizeof *running);
  left = calloc ((size_t) s->ranks, sizeof *left);
  free_at = calloc ((size_t) s->ranks, sizeof *free_at);
  if (ss.f_end == NULL || pos == NULL || running == NULL || left == NULL || free_at == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory while simulating the schedule");
      goto out;
    }
  ss.g_end = ss.f_end + cells;
  for (size_t i = 0; i < cells * 2; i++)
    ss.f_end[i] = NAN;

  /* Events: an action starts (its rank free, its inputs there) or ends.
   * Between two, the k actions running share the cores evenly, each at
   * min(1, cores / k) of a core: the work it has left shrinks at that
   * rate.  Each pass ends at least one action or starts one, so at most
   * 2 x total passes of P ranks. */
  while (done < total)
    {
      int k = 0;
      double next_start = INFINITY;
      for (int r = 0; r < s->ranks; r++)
        {
          if (running[r] || pos[r] >= s->rank[r].n_actions)
            {
              k += running[r];
              continue;
            }
          const PpAction *a = &s->rank[r].actions[pos[r]];
          int wk, ws;
          double ready, dur;
          if (a->kind == PP_ACT_OVERLAP_F_B)
            {
              double t1 = ready_time (&ss, PP_ACT_F, a->stage, a->microbatch, &wk, &ws);
              double t2 = ready_time (&ss, a->sub_kind, a->sub_stage, a->sub_microbatch, &wk, &ws);
              ready = isnan (t1) || isnan (t2) ? NAN : fmax (t1, t2);
              dur = duration (&ss, PP_ACT_F, a->stage) + duration (&ss, a->sub_kind, a->sub_stage);
            }
          else
            {
              ready = ready_time (&ss, a->kind, a->stage, a->microbatch, &wk, &ws);
              dur = duration (&ss, a->kind, a->stage);
            }
          if (isnan (ready))
            continue;
          double start = fmax (ready, free_at[r]);
          if (start <= t)
            {
              running[r] = 1;
              left[r] = dur > 0 ? dur : 0;
              k++;
            }
          else if (start < next_start)
            next_start = start;
        }
      if (k == 0 && !isfinite (next_start))
        {
          st = report_deadlock (s, pos, &ss, err);
          goto out;
        }
      double rate = k > cores ? (double) cores / k : 1.0;
      double next_end = INFINITY;
      for (int r = 0; r < s->ranks; r++)
        if (running[r] && t + left[r] / rate < next_end)
          next_end = t + left[r] / rate;
      double tn = fmin (next_start, next_end);
      for (int r = 0; r < s->ranks; r++)
        {
          if (!running[r])
            continue;
          double end = t + left[r] / rate;   /* as next_end was found: the first ends at tn */
          left[r] -= (tn - t) * rate;
          if (end <= tn || left[r] <= 0)
            {
              const PpAction *a = &s->rank[r].actions[pos[r]];
              if (a->kind == PP_ACT_OVERLAP_F_B)
                {
                  finish (&ss, PP_ACT_F, a->stage, a->microbatch, tn);
                  finish (&ss, a->sub_kind, a->sub_stage, a->sub_microbatch, tn);
                }
              else
                finish (&ss, a->kind, a->stage, a->microbatch, tn);
              running[r] = 0;
              free_at[r] = tn;
              pos[r]++;
              done++;
            }
        }
      t = tn;
    }
  *makespan = t;
out:
  free (ss.f_end);
  free (pos);
  free (running);
  free (left);
  free (free_at);
  return st;
}
