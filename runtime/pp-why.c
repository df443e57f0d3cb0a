/* pp-why.c — idle time by cause, the critical path, what to change (pp-why.h). */
#include "pp-why.h"
#include "pp-why-private.h"
#include "pp-analysis.h"
#include "pp-why-runtime.h"
#include "pp-schedule-rules.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- idle time split by cause -------------------------------------------- */

static const char *const part_names[PP_WHY_N_PARTS] = { "schedule", "imbalance", "transfers", "runtime",
                                                         "dp_comm" };

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
    case 4: return idle->dp_comm;
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
  w->measured = measured;
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

static PpStatus split_with_dp (const PpSchedule *s, const PpCostModel *costs,
                               const double *measured_idle, const double *dp, PpWhyIdle *out,
                               PpError *err);

PpStatus
pp_why_split (const PpSchedule *s, const PpCostModel *costs, const double *measured_idle,
              PpWhyIdle *out, PpError *err)
{
  return split_with_dp (s, costs, measured_idle, NULL, out, err);
}

/* pp_why_split, with dp[r] (may be NULL) each rank's data-parallel
 * communication in the step: its own part (pp_why_split_dp). */
static PpStatus
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

/* ---- the critical path ---------------------------------------------------- */

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

/* ---- a measured run ------------------------------------------------------- */

void
pp_why_report_free (PpWhyReport *r)
{
  if (r == NULL)
    return;
  for (int i = 0; i < r->n_steps; i++)
    {
      free (r->steps[i].idle);
      pp_why_path_clear (&r->steps[i].path);
    }
  free (r->steps);
  free (r->idle);
  free (r->path_share);
  pp_cost_model_free (r->costs);
  free (r->idle_replica);
  free (r->idle_min);
  free (r->idle_max);
  free (r->idle_max_replica);
  free (r);
}

static int
action_kind_of_span (int span_kind)
{
  switch (span_kind)
    {
    case PP_SPAN_F: return PP_ACT_F;
    case PP_SPAN_B: return PP_ACT_B;
    case PP_SPAN_I: return PP_ACT_I;
    case PP_SPAN_W: return PP_ACT_W;
    case PP_SPAN_OVERLAP_F_B: return PP_ACT_OVERLAP_F_B;
    default: return -1;
    }
}

/* The boundary a transfer span crosses (an index into comm), -1 if none. */
static int
boundary_of_transfer (const PpSchedule *s, int kind, int stage)
{
  PpDependency dep[2];
  int n, other;

  if (stage < 0 || stage >= s->n_stages)
    return -1;
  switch (kind)
    {
    case PP_SPAN_RECV_F:   /* into stage, from its previous */
      n = pp_schedule_dependencies (s, PP_ACT_F, stage, dep);
      return n > 0 ? dep[0].boundary : -1;
    case PP_SPAN_SEND_F:   /* from stage to its next */
      other = s->stage_next[stage];
      if (other < 0)
        return -1;
      n = pp_schedule_dependencies (s, PP_ACT_F, other, dep);
      return n > 0 ? dep[0].boundary : -1;
    case PP_SPAN_RECV_B:   /* into stage, from its next */
      n = pp_schedule_dependencies (s, PP_ACT_B, stage, dep);
      return n > 1 ? dep[1].boundary : -1;
    case PP_SPAN_SEND_B:   /* from stage to its previous */
      other = s->stage_prev[stage];
      if (other < 0)
        return -1;
      n = pp_schedule_dependencies (s, PP_ACT_B, other, dep);
      return n > 1 ? dep[1].boundary : -1;
    default:
      return -1;
    }
}

typedef struct {
  int32_t step;
  size_t  first, n;     /* into the step-sorted span index */
} StepRange;

static const PpSpan *sort_spans;

static int
cmp_span_step (const void *a, const void *b)
{
  const PpSpan *x = &sort_spans[*(const size_t *) a], *y = &sort_spans[*(const size_t *) b];
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Sums of one stage's spans in a step (each block's compute: its length
 * less the data-parallel spans nested in it); loss: the LOSS spans run
 * outside a block (inside one, the block's time holds them). */
typedef struct {
  double f, b, i, w, ov, loss;
  long   nf, nb, ni, nw, nov, nloss;
} StageSums;

static void
costs_of_sums (const StageSums *a, int n_stages, const double *xsum, const long *xn,
               PpCostModel *cm)
{
  for (int s = 0; s < n_stages; s++)
    {
      const StageSums *z = &a[s];
      double ov = z->nov ? z->ov / (double) z->nov : 0;
      double w = z->nw ? z->w / (double) z->nw : 0;
      cm->f[s] = z->nf ? z->f / (double) z->nf : ov / 3;
      /* the loss computation, a micro-batch's share, after its forward:
       * the plan runs it as part of the stage's F (the same time on the
       * stage, the same hand-offs) */
      if (z->nloss > 0 && (z->nf > 0 || z->nov > 0))
        cm->f[s] += z->loss / (double) (z->nf > 0 ? z->nf : z->nov);
      cm->w[s] = w;
      if (z->nb + z->ni > 0)
        cm->b[s] = (z->b + z->i + (double) z->ni * w) / (double) (z->nb + z->ni);
      else
        cm->b[s] = ov * 2 / 3;
      if (cm->w[s] > cm->b[s])
        cm->w[s] = cm->b[s];
      cm->comm[s] = xn[s] ? xsum[s] / (double) xn[s] : 0;
    }
}

/* Adds [a, b] clipped to [lo, hi] to a union of intervals sorted by
 * start whose end so far is *end: its new length in *len. */
static void
union_add (int64_t a, int64_t b, int64_t lo, int64_t hi, int64_t *end, int64_t *len)
{
  if (a < lo)
    a = lo;
  if (b > hi)
    b = hi;
  if (a < *end)
    a = *end;
  if (b > a)
    *len += b - a;
  if (b > *end)
    *end = b;
}

/* Each rank's time in a step's window [lo, hi] (seconds): busy[r] its
 * work other than data-parallel communication (the union of its work
 * spans less that of its data-parallel spans), dp[r] its data-parallel
 * communication (the union of those spans, wherever they run: one nested
 * in a block is that block's, its time not the block's compute).  In
 * integer ns, so a rank without such spans has exactly 0 (seconds summed
 * as doubles left 1e-18 of noise in the export).  idx holds the step's
 * spans sorted by rank, then start. */
static void
step_busy_dp (const PpSpan *spans, const size_t *idx, size_t n, int64_t lo, int64_t hi, int P,
              double *busy, double *dp)
{
  int64_t end = INT64_MIN, dp_end = INT64_MIN, all = 0, comm = 0;
  int cur = -1;
  for (int r = 0; r < P; r++)
    busy[r] = dp[r] = 0;
  for (size_t j = 0; j <= n; j++)
    {
      const PpSpan *sp = j < n ? &spans[idx[j]] : NULL;
      if (sp == NULL || sp->rank != cur)
        {
          if (cur >= 0 && cur < P)
            {
              busy[cur] = (double) (all - comm) * 1e-9;
              dp[cur] = (double) comm * 1e-9;
            }
          if (sp == NULL)
            break;
          cur = sp->rank;
          end = dp_end = INT64_MIN;
          all = comm = 0;
        }
      if (!pp_span_kind_is_work (sp->kind))
        continue;
      union_add (sp->start_ns, sp->end_ns, lo, hi, &end, &all);
      if (pp_span_kind_is_dp_comm (sp->kind))
        union_add (sp->start_ns, sp->end_ns, lo, hi, &dp_end, &comm);
    }
}

/* What of span idx[j] other spans of its rank nest: the data-parallel
 * spans' time inside it (ns), and, where it is a block, every LOSS span
 * inside it is marked in nested[] (its time the block's already).  idx
 * holds the step's spans sorted by rank, then start: what nests in j
 * follows it. */
static int64_t
nested_in (const PpSpan *spans, const size_t *idx, size_t n, size_t j, unsigned char *nested)
{
  const PpSpan *o = &spans[idx[j]];
  int64_t got = 0, dp_end = INT64_MIN;
  int block = action_kind_of_span (o->kind) >= 0;
  for (size_t k = j + 1; k < n; k++)
    {
      const PpSpan *sp = &spans[idx[k]];
      if (sp->rank != o->rank || sp->start_ns >= o->end_ns)
        break;
      if (pp_span_kind_is_dp_comm (sp->kind))
        union_add (sp->start_ns, sp->end_ns, o->start_ns, o->end_ns, &dp_end, &got);
      else if (block && sp->kind == PP_SPAN_LOSS && sp->end_ns <= o->end_ns)
        nested[k] = 1;
    }
  return got;
}

PpStatus
pp_why_analyse_spans (const PpSchedule *s, const PpSpan *spans, size_t n, int max_steps,
                      PpWhyReport **out, PpError *err)
{
  return pp_why_analyse_spans_counters (s, spans, n, NULL, 0, max_steps, out, err);
}

PpStatus
pp_why_analyse_spans_counters (const PpSchedule *s, const PpSpan *spans, size_t n,
                               const PpCounter *counters, size_t n_counters, int max_steps,
                               PpWhyReport **out, PpError *err)
{
  return pp_why_analyse_spans_waits (s, spans, n, NULL, counters, n_counters, max_steps, out, err);
}

PpStatus
pp_why_analyse_spans_waits (const PpSchedule *s, const PpSpan *spans, size_t n,
                            const PpWhyReplicaWaits *waits, const PpCounter *counters,
                            size_t n_counters, int max_steps, PpWhyReport **out, PpError *err)
{
  PpWhyRuntimeIndex *rix = NULL;
  PpWhyReport *rep = NULL;
  size_t *idx = NULL, n_idx = 0, n_ranges = 0;
  StepRange *ranges = NULL;
  StageSums *sums = NULL;
  double *xsum = NULL, *idle = NULL, *busy = NULL;
  unsigned char *nested = NULL;   /* [n_idx] a LOSS span inside a block */
  long *xn = NULL, n_compute = 0;
  PpWhyBlock *blk = NULL;
  PpCostModel *cm = NULL;
  StageSums *total = NULL;
  double *txsum = NULL;
  long *txn = NULL;
  double *dp = NULL, *dpsum = NULL;   /* [P] a step's; [PP_COST_N_DP * S] sums over the steps */
  double *rwait = NULL;               /* [P * n_of] a step's wait for each slower replica */
  int n_of = 0;
  long *dpn = NULL;
  PpStatus st = PP_OK;
  int P, S, M;

  if (out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_analyse_spans: out is required");
  *out = NULL;
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_analyse_spans: a schedule is required");
  if (max_steps <= 0 || max_steps > PP_WHY_MAX_STEPS)
    max_steps = PP_WHY_MAX_STEPS;
  P = s->ranks;
  S = s->n_stages;
  M = s->microbatches;
  for (int r = 0; r < P; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        n_compute += pp_action_is_compute (a);
      }

  idx = malloc ((n ? n : 1) * sizeof *idx);
  if (idx == NULL)
    goto oom;
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *sp = &spans[i];
      if (sp->step < 0 || sp->rank < 0 || sp->rank >= P || sp->end_ns < sp->start_ns)
        continue;
      if (action_kind_of_span (sp->kind) >= 0)
        {
          if (sp->stage < 0 || sp->stage >= S || sp->microbatch < 0 || sp->microbatch >= M)
            continue;
        }
      else if (pp_span_kind_is_dp_comm (sp->kind) || sp->kind == PP_SPAN_LOSS)
        {
          if (sp->stage >= S)
            continue;
        }
      else if (sp->kind != PP_SPAN_OPT && boundary_of_transfer (s, sp->kind, sp->stage) < 0)
        continue;
      idx[n_idx++] = i;
    }
  sort_spans = spans;
  qsort (idx, n_idx, sizeof *idx, cmp_span_step);
  ranges = malloc ((n_idx ? n_idx : 1) * sizeof *ranges);
  if (ranges == NULL)
    goto oom;
  for (size_t k = 0; k < n_idx; k++)
    {
      int32_t stp = spans[idx[k]].step;
      if (n_ranges == 0 || ranges[n_ranges - 1].step != stp)
        ranges[n_ranges++] = (StepRange) { stp, k, 0 };
      ranges[n_ranges - 1].n++;
    }
  /* whole steps only: every compute action of the schedule has its block */
  {
    size_t k = 0;
    for (size_t i = 0; i < n_ranges; i++)
      {
        long nb = 0;
        for (size_t j = 0; j < ranges[i].n; j++)
          nb += action_kind_of_span (spans[idx[ranges[i].first + j]].kind) >= 0;
        if (nb == n_compute)
          ranges[k++] = ranges[i];
      }
    n_ranges = k;
  }
  if (n_ranges == 0)
    {
      st = pp_error_set (err, PP_EINVAL,
                         "no whole step to analyse: no step has a block for every action of the %s plan",
                         s->name);
      goto out;
    }
  /* the steps that count: pp-analysis.h's one rule (max_steps may ask
   * for fewer, never more) */
  size_t first_range = 0;
  int32_t lowest = spans[idx[0]].step;   /* the run's first step: its lowest with a block */
  for (size_t k = 0; k < n_idx; k++)
    if (action_kind_of_span (spans[idx[k]].kind) >= 0)
      {
        lowest = spans[idx[k]].step;
        break;
      }
  {
    int32_t *whole = malloc (n_ranges * sizeof *whole);
    if (whole == NULL)
      goto oom;
    for (size_t i = 0; i < n_ranges; i++)
      whole[i] = ranges[i].step;
    pp_analysis_pick_steps (whole, n_ranges, lowest, &first_range);
    free (whole);
  }
  if (n_ranges - first_range > (size_t) max_steps)
    first_range = n_ranges - (size_t) max_steps;

  rep = calloc (1, sizeof *rep);
  if (rep == NULL)
    goto oom;
  rep->ranks = P;
  rep->n_stages = S;
  rep->steps = calloc (n_ranges - first_range, sizeof *rep->steps);
  rep->idle = calloc ((size_t) P, sizeof *rep->idle);
  rep->path_share = calloc ((size_t) S, sizeof *rep->path_share);
  rep->costs = pp_cost_model_new_uniform (S, 0, 0, 0, 0);
  cm = pp_cost_model_new_uniform (S, 0, 0, 0, 0);
  sums = calloc ((size_t) S, sizeof *sums);
  total = calloc ((size_t) S, sizeof *total);
  xsum = calloc ((size_t) S, sizeof *xsum);
  txsum = calloc ((size_t) S, sizeof *txsum);
  xn = calloc ((size_t) S, sizeof *xn);
  txn = calloc ((size_t) S, sizeof *txn);
  idle = calloc ((size_t) P, sizeof *idle);
  busy = calloc ((size_t) P, sizeof *busy);
  nested = calloc (n_idx ? n_idx : 1, 1);
  blk = malloc ((size_t) (n_compute + 1) * sizeof *blk);
  dp = calloc ((size_t) P, sizeof *dp);
  for (size_t i = 0; waits != NULL && i < n; i++)
    if (waits->of[i] >= n_of)
      n_of = waits->of[i] + 1;
  rwait = calloc ((size_t) P * (size_t) (n_of + 1), sizeof *rwait);
  dpsum = calloc ((size_t) PP_COST_N_DP * (size_t) S, sizeof *dpsum);
  dpn = calloc ((size_t) PP_COST_N_DP * (size_t) S, sizeof *dpn);
  if (dp == NULL || dpsum == NULL || dpn == NULL || rwait == NULL)
    goto oom;
  if ((rix = pp_why_runtime_index_new (spans, n, counters, n_counters, P, err)) == NULL)
    {
      st = PP_ENOMEM;
      goto out;
    }
  if (rep->steps == NULL || rep->idle == NULL || rep->path_share == NULL || rep->costs == NULL
      || cm == NULL || sums == NULL || total == NULL || xsum == NULL || txsum == NULL || xn == NULL
      || txn == NULL || idle == NULL || busy == NULL || nested == NULL || blk == NULL)
    goto oom;

  for (size_t ri = first_range; ri < n_ranges; ri++)
    {
      const StepRange *rg = &ranges[ri];
      PpWhyStep *ws = &rep->steps[rep->n_steps];
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      size_t nb = 0;

      memset (sums, 0, (size_t) S * sizeof *sums);
      memset (xsum, 0, (size_t) S * sizeof *xsum);
      memset (xn, 0, (size_t) S * sizeof *xn);
      memset (nested, 0, rg->n);
      for (size_t j = 0; j < rg->n; j++)
        {
          const PpSpan *sp = &spans[idx[rg->first + j]];
          int ak = action_kind_of_span (sp->kind);
          double d = (double) ((uint64_t) sp->end_ns - (uint64_t) sp->start_ns) * 1e-9;
          /* the whole step: every work span bounds it; the run's first
           * step starts at its first block (pp-analysis.h: set-up before
           * it is not a step's) */
          if (sp->start_ns < lo && (rg->step != lowest || ak >= 0)) lo = sp->start_ns;
          if (sp->end_ns > hi) hi = sp->end_ns;
          if (pp_span_kind_is_dp_comm (sp->kind))
            {
              if (sp->stage >= 0)
                {
                  size_t c = (size_t) (sp->kind - PP_SPAN_UNSHARD) * (size_t) S + (size_t) sp->stage;
                  dpsum[c] += d;
                  dpn[c]++;
                }
              continue;
            }
          if (sp->kind == PP_SPAN_OPT)
            continue;
          if (ak >= 0 || sp->kind == PP_SPAN_LOSS)
            /* a block's compute: its length less its nested dp communication */
            d -= (double) nested_in (spans, idx + rg->first, rg->n, j, nested) * 1e-9;
          if (sp->kind == PP_SPAN_LOSS)
            {
              if (sp->stage >= 0 && !nested[j])
                {
                  sums[sp->stage].loss += d;
                  sums[sp->stage].nloss++;
                }
              continue;
            }
          if (ak < 0)
            {
              int bd = boundary_of_transfer (s, sp->kind, sp->stage);
              xsum[bd] += d;
              xn[bd]++;
              continue;
            }
          StageSums *z = &sums[sp->stage];
          switch (ak)
            {
            case PP_ACT_F: z->f += d; z->nf++; break;
            case PP_ACT_B: z->b += d; z->nb++; break;
            case PP_ACT_I: z->i += d; z->ni++; break;
            case PP_ACT_W: z->w += d; z->nw++; break;
            default: z->ov += d; z->nov++; break;
            }
        }
      /* the blocks, on the step's own clock (seconds from its first start);
       * an OVERLAP_F_B span names only its forward half: the plan's action
       * at that (rank, stage, micro-batch) names the rest */
      for (size_t j = 0; j < rg->n; j++)
        {
          const PpSpan *sp = &spans[idx[rg->first + j]];
          int ak = action_kind_of_span (sp->kind);
          if (ak < 0 || nb >= (size_t) n_compute)
            continue;
          PpWhyBlock *b = &blk[nb++];
          *b = (PpWhyBlock) { sp->rank, ak, sp->stage, sp->microbatch, -1, -1, -1,
                              (double) (sp->start_ns - lo) * 1e-9, (double) (sp->end_ns - lo) * 1e-9 };
          /* the loss computation after its forward is the F's, as the plan
           * runs it (costs_of_sums): the path's block ends with it */
          for (size_t k = j + 1; ak == PP_ACT_F && k < rg->n; k++)
            {
              const PpSpan *x = &spans[idx[rg->first + k]];
              if (x->rank != sp->rank || action_kind_of_span (x->kind) >= 0)
                break;
              if (x->kind == PP_SPAN_LOSS && x->stage == sp->stage && x->microbatch == sp->microbatch
                  && !nested[k] && x->end_ns > sp->end_ns)
                {
                  b->end = (double) (x->end_ns - lo) * 1e-9;
                  break;
                }
            }
          if (ak == PP_ACT_OVERLAP_F_B)
            for (int k = 0; k < s->rank[sp->rank].n_actions; k++)
              {
                const PpAction *a = &s->rank[sp->rank].actions[k];
                if (a->kind == PP_ACT_OVERLAP_F_B && a->stage == sp->stage
                    && a->microbatch == sp->microbatch)
                  {
                    b->sub_kind = a->sub_kind;
                    b->sub_stage = a->sub_stage;
                    b->sub_microbatch = a->sub_microbatch;
                    break;
                  }
              }
        }
      /* each rank's busy time: its work less its data-parallel
       * communication, which is a part of its own */
      step_busy_dp (spans, idx + rg->first, rg->n, lo, hi, P, busy, dp);
      /* the wait for slower replicas inside the rank's collectives is
       * idle with a cause (replica_late), not dp_comm's transfer */
      memset (rwait, 0, (size_t) P * (size_t) (n_of + 1) * sizeof *rwait);
      for (size_t j = 0; waits != NULL && j < rg->n; j++)
        {
          size_t i = idx[rg->first + j];
          if (waits->wait_ns[i] > 0 && waits->of[i] >= 0)
            rwait[(size_t) spans[i].rank * (size_t) n_of + (size_t) waits->of[i]] += (double) waits->wait_ns[i] * 1e-9;
        }
      double *rw_total = rwait + (size_t) P * (size_t) n_of;   /* [P] */
      for (int r = 0; r < P; r++)
        {
          double t = 0;
          for (int q = 0; q < n_of; q++)
            t += rwait[(size_t) r * (size_t) n_of + (size_t) q];
          rw_total[r] = t < dp[r] ? t : dp[r];
          dp[r] -= rw_total[r];
        }
      ws->step = rg->step;
      ws->start_ns = lo;
      ws->length = (double) (hi - lo) * 1e-9;
      for (int r = 0; r < P; r++)
        idle[r] = fmax (0, ws->length - busy[r]);
      costs_of_sums (sums, S, xsum, xn, cm);
      ws->idle = calloc ((size_t) P, sizeof *ws->idle);
      if (ws->idle == NULL)
        goto oom;
      rep->n_steps++;
      if ((st = split_with_dp (s, cm, idle, dp, ws->idle, err)) != PP_OK)
        goto out;
      for (int r = 0; r < P; r++)
        {
          PpWhyIdle *w = &ws->idle[r];
          w->replica_wait = rw_total[r];
          for (int q = 0; q < n_of; q++)
            if (rwait[(size_t) r * (size_t) n_of + (size_t) q] > 0
                && (w->late_replica < 0 || rwait[(size_t) r * (size_t) n_of + (size_t) q]
                                           > rwait[(size_t) r * (size_t) n_of + (size_t) w->late_replica]))
              w->late_replica = q;
        }
      if ((st = pp_why_runtime_step (rix, s, lo, hi, blk, nb, cm->comm, ws->idle, err)) != PP_OK)
        goto out;
      for (int r = 0; waits != NULL && r < P; r++)
        ws->idle[r].runtime_measured[PP_WHY_RT_REPLICA_LATE] = 1;
      if ((st = pp_why_critical_path (s, blk, nb, cm->comm, &ws->path, err)) != PP_OK)
        goto out;
      for (int q = 0; q < S; q++)
        {
          total[q].f += sums[q].f; total[q].nf += sums[q].nf;
          total[q].b += sums[q].b; total[q].nb += sums[q].nb;
          total[q].i += sums[q].i; total[q].ni += sums[q].ni;
          total[q].w += sums[q].w; total[q].nw += sums[q].nw;
          total[q].ov += sums[q].ov; total[q].nov += sums[q].nov;
          total[q].loss += sums[q].loss; total[q].nloss += sums[q].nloss;
          txsum[q] += xsum[q];
          txn[q] += xn[q];
        }
    }

  /* means over the analysed steps */
  for (int i = 0; i < rep->n_steps; i++)
    {
      const PpWhyStep *ws = &rep->steps[i];
      rep->length += ws->length;
      for (int r = 0; r < P; r++)
        {
          rep->idle[r].measured += ws->idle[r].measured;
          rep->idle[r].schedule += ws->idle[r].schedule;
          rep->idle[r].imbalance += ws->idle[r].imbalance;
          rep->idle[r].transfers += ws->idle[r].transfers;
          rep->idle[r].runtime += ws->idle[r].runtime;
          rep->idle[r].dp_comm += ws->idle[r].dp_comm;
        }
      double L = ws->path.end - ws->path.start;
      if (L > 0)
        {
          for (int q = 0; q < S; q++)
            rep->path_share[q] += ws->path.stage_time[q] / L;
          rep->path_transfer_share += ws->path.transfer_time / L;
          rep->path_slack_share += ws->path.slack_time / L;
        }
    }
  {
    double k = rep->n_steps;
    /* the step statistic is the median step (pp-analysis.h) */
    double *lens = malloc ((size_t) rep->n_steps * sizeof *lens);
    if (lens == NULL)
      goto oom;
    for (int i = 0; i < rep->n_steps; i++)
      lens[i] = rep->steps[i].length;
    rep->length = pp_analysis_median (lens, (size_t) rep->n_steps);
    free (lens);
    for (int r = 0; r < P; r++)
      {
        rep->idle[r].measured /= k;
        rep->idle[r].schedule /= k;
        rep->idle[r].imbalance /= k;
        rep->idle[r].transfers /= k;
        rep->idle[r].runtime /= k;
        rep->idle[r].dp_comm /= k;
      }
    for (int q = 0; q < S; q++)
      rep->path_share[q] /= k;
    rep->path_transfer_share /= k;
    rep->path_slack_share /= k;
  }
  if ((st = pp_why_runtime_mean (rep->steps, rep->n_steps, P, rep->idle, err)) != PP_OK)
    goto out;
  costs_of_sums (total, S, txsum, txn, rep->costs);
  for (size_t c = 0; c < (size_t) PP_COST_N_DP * (size_t) S; c++)
    rep->costs->dp[c] = dpn[c] ? dpsum[c] / (double) dpn[c] : 0;
  *out = rep;
  rep = NULL;
  goto out;

oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory");
out:
  pp_why_report_free (rep);
  free (idx);
  free (ranges);
  free (sums);
  free (total);
  free (xsum);
  free (txsum);
  free (xn);
  free (txn);
  free (idle);
  free (busy);
  free (nested);
  free (blk);
  free (dp);
  free (dpsum);
  free (dpn);
  free (rwait);
  pp_cost_model_free (cm);
  pp_why_runtime_index_free (rix);
  return st;
}

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

/* ---- what to change --------------------------------------------------------- */

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

PpStatus
pp_why_analyse_run (const PpTraceDescription *desc, const PpWhyPlans *plans, const PpSpan *spans,
                    size_t n, int max_steps, PpWhyReport **out, PpWhyChange *change,
                    PpSchedule **sched_out, PpError *err)
{
  return pp_why_analyse_run_counters (desc, plans, spans, n, NULL, 0, max_steps, out, change,
                                      sched_out, err);
}

PpStatus
pp_why_analyse_run_counters (const PpTraceDescription *desc, const PpWhyPlans *plans,
                             const PpSpan *spans, size_t n, const PpCounter *counters,
                             size_t n_counters, int max_steps, PpWhyReport **out,
                             PpWhyChange *change, PpSchedule **sched_out, PpError *err)
{
  return pp_why_analyse_run_waits (desc, plans, spans, n, NULL, counters, n_counters, max_steps, out,
                                   change, sched_out, err);
}

PpStatus
pp_why_analyse_run_waits (const PpTraceDescription *desc, const PpWhyPlans *plans,
                          const PpSpan *spans, size_t n, const PpWhyReplicaWaits *waits,
                          const PpCounter *counters, size_t n_counters, int max_steps,
                          PpWhyReport **out, PpWhyChange *change, PpSchedule **sched_out,
                          PpError *err)
{
  PpSchedule *s = NULL;
  PpStatus st;

  *out = NULL;
  if (sched_out != NULL)
    *sched_out = NULL;
  if (change != NULL)
    memset (change, 0, sizeof *change);
  if ((st = pp_why_schedule_of_trace (desc, plans, &s, err)) != PP_OK)
    return st;
  if ((st = pp_why_analyse_spans_waits (s, spans, n, waits, counters, n_counters, max_steps, out,
                                        err)) != PP_OK)
    goto out;
  if (change != NULL)
    {
      PpModelConfig mc;
      int *blocks = malloc ((size_t) s->n_stages * sizeof *blocks);
      int bundled = blocks != NULL
        && pp_why_model_of_description (desc, s->n_stages, &mc, blocks, NULL) == PP_OK;
      st = pp_why_suggest_partition (s, (*out)->costs, bundled ? &mc : NULL, bundled ? blocks : NULL,
                                     pp_why_cores_of_description (desc), change, err);
      free (blocks);
      if (st != PP_OK)
        {
          pp_why_report_free (*out);
          *out = NULL;
        }
    }
out:
  if (st == PP_OK && sched_out != NULL)
    *sched_out = s;
  else
    pp_schedule_free (s);
  return st;
}

PpCostModel *
pp_why_cost_model_of_measured (const PpSchedule *s, const PpMeasuredCosts *mc)
{
  PpCostModel *c;

  if (s == NULL || mc == NULL || s->n_stages != s->ranks || mc->ranks != s->ranks)
    return NULL;
  if ((c = pp_cost_model_new_uniform (s->n_stages, 0, 0, 0, mc->comm)) == NULL)
    return NULL;
  for (int i = 0; i < s->n_stages; i++)
    {
      int r = s->stage_rank[i];
      c->f[i] = mc->f[r];
      c->b[i] = mc->b[r];
      c->w[i] = mc->w[r];
    }
  return c;
}

/* ---- reports ------------------------------------------------------------------- */

void
pp_why_print_idle (FILE *f, const PpWhyIdle *idle, int ranks, double scale, const char *unit)
{
  /* the data-parallel column only for a job that has such communication */
  int dp = 0;
  for (int r = 0; r < ranks; r++)
    dp |= idle[r].dp_comm > 0;
  fprintf (f, "rank  %10s  %10s  %10s  %10s  %10s  %s most\n", "idle", "schedule", "imbalance",
           "transfers", "runtime", dp ? "   dp_comm  " : "");
  for (int r = 0; r < ranks; r++)
    {
      const PpWhyIdle *w = &idle[r];
      int most = 0;
      char dpc[32] = "";
      for (int k = 1; k < PP_WHY_N_PARTS; k++)
        if (pp_why_idle_part (w, k) > pp_why_idle_part (w, most))
          most = k;
      if (dp)
        snprintf (dpc, sizeof dpc, "%7.2f %-2s  ", w->dp_comm * scale, unit);
      fprintf (f, "%4d  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %s%s\n", r,
               w->measured * scale, unit, w->schedule * scale, unit, w->imbalance * scale, unit,
               w->transfers * scale, unit, w->runtime * scale, unit, dpc,
               w->measured > 0 ? pp_why_part_name (most) : "-");
    }
}

void
pp_why_print_change (FILE *f, const PpWhyChange *c, double scale, const char *unit)
{
  fprintf (f, "slowest stage: %d, F+B %.2f %s a micro-batch, %.0f%% above the mean stage (%.2f %s)\n",
           c->slowest_stage, c->slowest_cost * scale, unit, 100.0 * c->excess, c->mean_cost * scale, unit);
  if (!c->has_partition)
    return;
  char shared[64] = "";
  if (c->cores > 0)
    snprintf (shared, sizeof shared, "; the ranks sharing %d core%s", c->cores, c->cores == 1 ? "" : "s");
  if (c->changed)
    fprintf (f, "what to change: --partition %s (now %s): predicted step %.2f %s (the plan now %.2f %s; "
             "a step from its first block to its last%s)\n",
             c->partition, c->current, c->predicted_step * scale, unit, c->current_step * scale, unit,
             shared);
  else
    fprintf (f, "what to change: the partition %s is already the balanced one (predicted step %.2f %s, "
             "first block to last%s)\n",
             c->current, c->predicted_step * scale, unit, shared);
}

void
pp_why_print_path (FILE *f, const PpWhyReport *r)
{
  fprintf (f, "critical path (share of the step, mean over %d step%s):", r->n_steps,
           r->n_steps == 1 ? "" : "s");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s stage %d %.1f%%", q ? "," : "", q, 100.0 * r->path_share[q]);
  fprintf (f, ", transfers %.1f%%, gaps %.1f%%\n", 100.0 * r->path_transfer_share,
           100.0 * r->path_slack_share);
}

static void
json_idle (FILE *f, const PpWhyIdle *w)
{
  fprintf (f, "{\"idle\": %.9g, \"schedule\": %.9g, \"imbalance\": %.9g, \"transfers\": %.9g, "
              "\"runtime\": %.9g, \"dp_comm\": %.9g", w->measured, w->schedule, w->imbalance,
           w->transfers, w->runtime, w->dp_comm);
  pp_why_runtime_write_json (f, w);
  fputc ('}', f);
}

void
pp_why_write_replicas_json (FILE *f, const PpWhyReport *r)
{
  if (r == NULL || r->n_replicas <= 1 || r->idle_min == NULL)
    return;
  fprintf (f, ",\n  \"replicas\": {\"count\": %d, \"statistic\": \"median replica per rank by idle\", "
              "\"steps_of_replica\": %d, \"per_rank\": [", r->n_replicas, r->median_replica);
  for (int q = 0; q < r->ranks; q++)
    fprintf (f, "%s\n    {\"rank\": %d, \"replica\": %d, \"idle_min\": %.9g, \"idle_max\": %.9g, "
                "\"idle_max_replica\": %d}", q ? "," : "", q, r->idle_replica[q], r->idle_min[q],
             r->idle_max[q], r->idle_max_replica[q]);
  fprintf (f, "\n  ]}");
}


void
pp_why_write_json (FILE *f, const PpSchedule *s, const PpWhyReport *r, const PpWhyChange *c)
{
  fprintf (f, "{\n  \"schedule\": \"%s\", \"ranks\": %d, \"microbatches\": %d, \"stages\": %d,\n",
           s->name, s->ranks, s->microbatches, s->n_stages);
  fprintf (f, "  \"unit\": \"s\", \"steps_analysed\": %d, \"step_length\": %.9g,\n", r->n_steps,
           r->length);
  fprintf (f, "  \"idle\": [");
  for (int i = 0; i < r->ranks; i++)
    {
      fprintf (f, "%s\n    ", i ? "," : "");
      json_idle (f, &r->idle[i]);
    }
  fprintf (f, "\n  ],\n  \"critical_path\": {\"stage_share\": [");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s%.6g", q ? ", " : "", r->path_share[q]);
  fprintf (f, "], \"transfer_share\": %.6g, \"gap_share\": %.6g},\n", r->path_transfer_share,
           r->path_slack_share);
  fprintf (f, "  \"costs\": [");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s\n    {\"stage\": %d, \"f\": %.9g, \"b\": %.9g, \"w\": %.9g, \"comm\": %.9g}",
             q ? "," : "", q, r->costs->f[q], r->costs->b[q], r->costs->w[q], r->costs->comm[q]);
  fprintf (f, "\n  ],\n  \"steps\": [");
  for (int i = 0; i < r->n_steps; i++)
    {
      const PpWhyStep *ws = &r->steps[i];
      fprintf (f, "%s\n    {\"step\": %d, \"length\": %.9g, \"idle\": [", i ? "," : "", ws->step,
               ws->length);
      for (int k = 0; k < r->ranks; k++)
        {
          fprintf (f, "%s", k ? ", " : "");
          json_idle (f, &ws->idle[k]);
        }
      fprintf (f, "], \"critical_path\": [");
      for (size_t k = 0; k < ws->path.n; k++)
        {
          const PpWhyPathStep *p = &ws->path.steps[k];
          char buf[PP_ACTION_STR_MAX];
          PpAction a = pp_action (p->block.kind, p->block.stage, p->block.microbatch);
          if (p->block.kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (p->block.stage, p->block.microbatch, p->block.sub_kind,
                                   p->block.sub_stage, p->block.sub_microbatch);
          /* the name every export gives the block: "0F3+3B1" for a pair */
          fprintf (f, "%s\"%s\"", k ? ", " : "", pp_action_to_label (&a, buf, sizeof buf));
        }
      fprintf (f, "]}");
    }
  fprintf (f, "\n  ]");
  if (c != NULL)
    {
      fprintf (f, ",\n  \"what_to_change\": {\"slowest_stage\": %d, \"slowest_cost\": %.9g, "
                  "\"mean_cost\": %.9g, \"excess\": %.6g, \"planned_step\": %.9g",
               c->slowest_stage, c->slowest_cost, c->mean_cost, c->excess, c->current_step);
      if (c->has_partition)
        fprintf (f, ", \"partition_now\": \"%s\", \"partition\": \"%s\", \"predicted_step\": %.9g",
                 c->current, c->partition, c->predicted_step);
      if (c->cores > 0)
        fprintf (f, ", \"shared_cores\": %d", c->cores);
      fprintf (f, "}");
    }
  pp_why_write_replicas_json (f, r);
  fprintf (f, "\n}\n");
}
