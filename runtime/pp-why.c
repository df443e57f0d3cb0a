/* pp-why.c — a measured run analysed (pp-why.h): its spans into whole
 * steps, each step's idle split by cause (pp-why-split.c), its critical
 * path (pp-why-path.c) and its stages' costs, their means over the steps;
 * a run from its trace's schedule (pp-why-plan.c) to what to change
 * (pp-why-change.c). */
#include "pp-why.h"
#include "pp-why-private.h"
#include "pp-analysis.h"
#include "pp-why-runtime.h"
#include "pp-schedule-rules.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

static _Thread_local const PpSpan *sort_spans;   /* a thread each: the app analyses on a worker */

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
  return pp_why_analyse_spans_waits (s, spans, n, NULL, counters, n_counters, NULL, max_steps, out, err);
}

PpStatus
pp_why_analyse_spans_named (const PpSchedule *s, const PpSpan *spans, size_t n,
                            const PpCounter *counters, size_t n_counters, const PpWhyNames *names,
                            int max_steps, PpWhyReport **out, PpError *err)
{
  return pp_why_analyse_spans_waits (s, spans, n, NULL, counters, n_counters, names, max_steps, out, err);
}

PpStatus
pp_why_analyse_spans_waits (const PpSchedule *s, const PpSpan *spans, size_t n,
                            const PpWhyReplicaWaits *waits, const PpCounter *counters,
                            size_t n_counters, const PpWhyNames *names, int max_steps,
                            PpWhyReport **out, PpError *err)
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
  if ((rix = pp_why_runtime_index_new (spans, n, counters, n_counters, P, names != NULL ? names->name : NULL,
                                       names != NULL ? names->user : NULL, err)) == NULL)
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
          /* the whole step: every work span bounds it, as in the one
           * analysis (pp_analysis_span_counts; a transfer, such as a
           * receive posted before the copy's first block, does not); the
           * run's first step starts at its first block (pp-analysis.h:
           * set-up before it is not a step's) */
          if (pp_analysis_span_counts (sp->kind))
            {
              if (sp->start_ns < lo && (rg->step != lowest || ak >= 0)) lo = sp->start_ns;
              if (sp->end_ns > hi) hi = sp->end_ns;
            }
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
      /* the wait and the transfer both leave the idle the plan's levels
       * split (a wait in the plan's bubble is not its schedule idle: the
       * levels would hold it, and replica_late, capped to runtime, lose
       * it); then the wait is idle again, runtime's, a cause of its own
       * (replica_late), and the transfer alone dp_comm, work */
      if ((st = split_with_dp (s, cm, idle, dp, ws->idle, err)) != PP_OK)
        goto out;
      for (int r = 0; r < P; r++)
        {
          PpWhyIdle *w = &ws->idle[r];
          double rw = rw_total[r] < w->dp_comm ? rw_total[r] : w->dp_comm;
          w->dp_comm -= rw;
          w->runtime += rw;
          w->measured += rw;
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
  return pp_why_analyse_run_waits (desc, plans, spans, n, NULL, counters, n_counters, NULL, max_steps, out,
                                   change, sched_out, err);
}

PpStatus
pp_why_analyse_run_waits (const PpTraceDescription *desc, const PpWhyPlans *plans,
                          const PpSpan *spans, size_t n, const PpWhyReplicaWaits *waits,
                          const PpCounter *counters, size_t n_counters, const PpWhyNames *names,
                          int max_steps, PpWhyReport **out, PpWhyChange *change,
                          PpSchedule **sched_out, PpError *err)
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
  return pp_why_analyse_schedule_waits (desc, s, spans, n, waits, counters, n_counters, names, max_steps, out,
                                        change, sched_out, err);
}

PpStatus
pp_why_analyse_schedule_waits (const PpTraceDescription *desc, PpSchedule *s, const PpSpan *spans, size_t n,
                               const PpWhyReplicaWaits *waits, const PpCounter *counters, size_t n_counters,
                               const PpWhyNames *names, int max_steps, PpWhyReport **out, PpWhyChange *change,
                               PpSchedule **sched_out, PpError *err)
{
  PpStatus st;

  *out = NULL;
  if (sched_out != NULL)
    *sched_out = NULL;
  if (change != NULL)
    memset (change, 0, sizeof *change);
  if ((st = pp_why_analyse_spans_waits (s, spans, n, waits, counters, n_counters, names, max_steps, out,
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

long
pp_why_n_compute (const PpSchedule *s)
{
  long n = 0;
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      n += pp_action_is_compute (&s->rank[r].actions[k]);
  return n;
}

PpStatus
pp_why_check_blocks (const PpSchedule *s, long n_compute, const PpSpan *spans, size_t n, PpError *err)
{
  long nb = 0;
  for (size_t i = 0; i < n && nb < n_compute; i++)
    nb += action_kind_of_span (spans[i].kind) >= 0 && spans[i].step >= 0;
  if (nb >= n_compute)
    return PP_OK;
  return pp_error_set (err, PP_EINVAL,
                       "no whole step to analyse: no step has a block for every action of the %s plan", s->name);
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
