/* pp-suggest.c — what if: candidates simulated under measured costs, and the
 * measured costs read from a trace. */
#include "pp-suggest.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace.h"

/* ---- candidates ------------------------------------------------------------ */

/* How many of rank r's stages one micro-batch passes through: V for a single
 * chain, 1 for DualPipe (whose two stages per rank serve different halves of
 * the micro-batches).  The rank's measured cost of one micro-batch is spread
 * over that many stage visits. */
static void
visits_per_microbatch (const PpSchedule *s, double *k)
{
  for (int r = 0; r < s->ranks; r++)
    k[r] = 0;
  for (int st = 0; st < s->n_stages; st++)
    k[s->stage_rank[st]] += (double) (s->stage_mb_hi[st] - s->stage_mb_lo[st])
                            / (double) s->microbatches;
}

static int
cmp_suggestion (const void *pa, const void *pb)
{
  const PpSuggestion *a = pa, *b = pb;
  double ta = a->step_time, tb = b->step_time;
  double tol = 1e-9 * fmax (fabs (ta), fabs (tb));
  int c;

  if (fabs (ta - tb) > tol)
    return ta < tb ? -1 : 1;
  tol = 1e-9 * fmax (fabs (a->peak_activation), fabs (b->peak_activation));
  if (fabs (a->peak_activation - b->peak_activation) > tol)
    return a->peak_activation < b->peak_activation ? -1 : 1;
  c = strcmp (a->schedule, b->schedule);
  if (c != 0)
    return c;
  if (a->microbatches != b->microbatches)
    return a->microbatches < b->microbatches ? -1 : 1;
  return (a->stages_per_rank > b->stages_per_rank) - (a->stages_per_rank < b->stages_per_rank);
}

static PpStatus
check_costs (const PpMeasuredCosts *c, PpError *err)
{
  if (c == NULL || c->f == NULL || c->b == NULL || c->w == NULL)
    return pp_error_set (err, PP_EINVAL, "no measured costs");
  if (c->ranks < 1 || c->ranks > PP_TRACE_MAX_RANKS)
    return pp_error_set (err, PP_EINVAL, "measured ranks must be 1..%d, not %d",
                         PP_TRACE_MAX_RANKS, c->ranks);
  if (c->microbatches < 1 || c->microbatches > PP_TRACE_MAX_MICROBATCHES)
    return pp_error_set (err, PP_EINVAL, "measured micro-batches must be 1..%d, not %d",
                         PP_TRACE_MAX_MICROBATCHES, c->microbatches);
  if (!isfinite (c->comm) || c->comm < 0)
    return pp_error_set (err, PP_EINVAL, "measured transfer time must be finite and >= 0");
  for (int r = 0; r < c->ranks; r++)
    {
      if (!isfinite (c->f[r]) || c->f[r] <= 0)
        return pp_error_set (err, PP_EINVAL, "rank %d: measured F must be > 0", r);
      if (!isfinite (c->b[r]) || c->b[r] <= 0)
        return pp_error_set (err, PP_EINVAL, "rank %d: measured B must be > 0", r);
      if (!isfinite (c->w[r]) || c->w[r] < 0 || c->w[r] > c->b[r])
        return pp_error_set (err, PP_EINVAL, "rank %d: measured W must lie in [0, B]", r);
    }
  return PP_OK;
}

/* Simulates one candidate; PP_OK with *keep = 0 when the schedule does not
 * accept (P, M', V). */
static PpStatus
simulate_candidate (const PpMeasuredCosts *c, const PpScheduleInfo *info, int M2, int V, int G,
                    PpSuggestion *out, int *keep, PpError *err)
{
  PpSchedule *s = NULL;
  PpCostModel *cm = NULL;
  PpSimulation *sim = NULL;
  double *k = NULL, scale = (double) c->microbatches / (double) M2, peak = 0;
  PpError gerr = { 0 };
  PpStatus st;

  *keep = 0;
  st = info->takes_group
       ? pp_schedule_new_megatron_interleaved_group (c->ranks, M2, V, G, &s, &gerr)
       : info->generate (c->ranks, M2, V, &s, &gerr);
  if (st == PP_EINVAL || st == PP_EUNSUPPORTED)
    return PP_OK;                     /* this schedule cannot take (P, M', V) */
  if (st != PP_OK)
    return pp_error_set (err, st, "%s", gerr.msg[0] ? gerr.msg : pp_status_message (st));

  k = calloc ((size_t) s->ranks, sizeof *k);
  cm = pp_cost_model_new_uniform (s->n_stages, 1, 1, 0, c->comm);
  if (k == NULL || cm == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  visits_per_microbatch (s, k);
  for (int st_i = 0; st_i < s->n_stages; st_i++)
    {
      int r = s->stage_rank[st_i];
      double share = k[r] > 0 ? scale / k[r] : 0;
      cm->f[st_i] = c->f[r] * share;
      cm->b[st_i] = c->b[r] * share;
      cm->w[st_i] = c->w[r] * share;
    }
  st = pp_simulate (s, cm, &sim, &gerr);
  if (st == PP_EDEADLOCK)
    {
      st = PP_OK;                     /* a generated order never should; skip it */
      goto out;
    }
  if (st != PP_OK)
    {
      pp_error_set (err, st, "%s", gerr.msg[0] ? gerr.msg : pp_status_message (st));
      goto out;
    }
  for (int r = 0; r < s->ranks; r++)
    if (k[r] > 0)
      peak = fmax (peak, sim->rank[r].peak_inflight / k[r] * scale);

  memset (out, 0, sizeof *out);
  snprintf (out->schedule, sizeof out->schedule, "%s", s->name);
  out->ranks = s->ranks;
  out->microbatches = s->microbatches;
  out->stages_per_rank = s->stages_per_rank;
  out->step_time = sim->makespan;
  out->bubble = sim->bubble;
  out->peak_activation = peak;
  *keep = 1;
out:
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
  free (k);
  return st;
}

/* The distinct M' of the candidates for P measured ranks and M micro-batches. */
static int
candidate_ms (int P, int M, int Ms[5])
{
  long want[5] = { P, 2L * P, 4L * P, 8L * P, M };
  int n_ms = 0;
  for (int i = 0; i < 5; i++)
    {
      bool dup = false;
      if (want[i] > PP_TRACE_MAX_MICROBATCHES)
        continue;
      for (int j = 0; j < n_ms; j++)
        dup = dup || Ms[j] == want[i];
      if (!dup)
        Ms[n_ms++] = (int) want[i];
    }
  return n_ms;
}

static bool
too_large (int P, int M, int V)
{
  return (int64_t) P * M * (V > 0 ? V : 1) > PP_SUGGEST_MAX_WORK;
}

/* ---- the candidates of a job ----------------------------------------------
 * One rule for every view: a job is offered only what its framework runs
 * (pp_schedule_runs_on).  Each schedule at every M' of candidate_ms, with
 * V = 2 where V is free; megatron-core's interleaved schedule also at V = 4
 * and with its group of micro-batches G = P (its default), 2P and M' (all
 * of a step's micro-batches through a chunk before the next: the most
 * memory, the fewest chunk switches). */

typedef struct {
  const PpScheduleInfo *info;
  int M, V, G;
} Candidate;

#define MAX_CANDIDATES 256

static size_t
list_candidates (const PpMeasuredCosts *c, Candidate out[MAX_CANDIDATES])
{
  int Ms[5], n_ms = candidate_ms (c->ranks, c->microbatches, Ms);
  const int P = c->ranks;
  size_t n = 0;

  for (const PpScheduleInfo *info = pp_schedule_list (); info->name; info++)
    {
      if (!pp_schedule_runs_on (info->name, c->framework))
        continue;
      for (int i = 0; i < n_ms; i++)
        {
          if (!info->takes_group)
            {
              out[n++] = (Candidate) { info, Ms[i], info->takes_v ? 2 : info->default_v, 0 };
              continue;
            }
          const int Vs[2] = { 2, 4 };
          const int Gs[3] = { P, 2 * P, Ms[i] };
          for (int v = 0; v < 2; v++)
            for (int g = 0; g < 3; g++)
              {
                bool dup = false;
                for (int h = 0; h < g; h++)
                  dup = dup || Gs[h] == Gs[g];
                if (!dup && pp_megatron_check_group (P, Ms[i], Gs[g], NULL) == PP_OK)
                  out[n++] = (Candidate) { info, Ms[i], Vs[v], Gs[g] };
              }
        }
    }
  return n;
}

void
pp_suggest_measured_name (const char *schedule, int n_virtual, int ranks, char *name, size_t size, int *V)
{
  const PpScheduleInfo *info = pp_schedule_lookup (schedule);
  *V = n_virtual > 0 ? n_virtual : (info ? info->default_v : 1);
  if (info != NULL && info->takes_group)
    {
      /* as the candidates are named: with the group, P by default */
      int g = pp_schedule_name_group (schedule);
      snprintf (name, size, "%s:group=%d", info->name, g > 0 ? g : ranks);
    }
  else
    snprintf (name, size, "%s", info ? info->name : schedule);
}

int
pp_suggestion_is (const PpSuggestion *s, const char *name, int microbatches, int V)
{
  return name != NULL && strcmp (s->schedule, name) == 0 && s->microbatches == microbatches
         && s->stages_per_rank == V;
}

size_t
pp_suggest_n_too_large (const PpMeasuredCosts *costs)
{
  Candidate cand[MAX_CANDIDATES];
  size_t n = 0, n_cand;
  if (costs == NULL || costs->ranks < 1 || costs->microbatches < 1)
    return 0;
  n_cand = list_candidates (costs, cand);
  for (size_t i = 0; i < n_cand; i++)
    n += too_large (costs->ranks, cand[i].M, cand[i].V);
  return n;
}

int64_t
pp_suggest_work (const PpMeasuredCosts *costs)
{
  Candidate cand[MAX_CANDIDATES];
  int64_t w = 0;
  size_t n_cand;
  if (costs == NULL || costs->ranks < 1 || costs->microbatches < 1)
    return 0;
  n_cand = list_candidates (costs, cand);
  for (size_t i = 0; i < n_cand; i++)
    if (!too_large (costs->ranks, cand[i].M, cand[i].V))
      w += (int64_t) costs->ranks * cand[i].M * (cand[i].V > 0 ? cand[i].V : 1);
  return w;
}

PpStatus
pp_suggest (const PpMeasuredCosts *costs, double memory_budget,
            PpSuggestion **out, size_t *n_out, PpError *err)
{
  Candidate cands[MAX_CANDIDATES];
  PpSuggestion *res = NULL;
  size_t n = 0, cap = 0, n_cands;
  PpStatus st;
  int P;

  if (out == NULL || n_out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_suggest: out and n_out are required");
  *out = NULL;
  *n_out = 0;
  if ((st = check_costs (costs, err)) != PP_OK)
    return st;
  if (isnan (memory_budget))
    return pp_error_set (err, PP_EINVAL, "memory budget is not a number");

  P = costs->ranks;
  n_cands = list_candidates (costs, cands);

  size_t n_small = 0;
  for (size_t i = 0; i < n_cands; i++)
    {
      PpSuggestion cand;
      int keep;
      const Candidate *c = &cands[i];

      if (too_large (P, c->M, c->V))
        continue;
      n_small++;

      st = simulate_candidate (costs, c->info, c->M, c->V, c->G, &cand, &keep, err);
      if (st != PP_OK)
        {
          free (res);
          return st;
        }
      if (!keep)
        continue;
      if (memory_budget > 0 && cand.peak_activation > memory_budget * (1 + 1e-9))
        continue;
      if (n == cap)
        {
          size_t nc = cap ? 2 * cap : 32;
          PpSuggestion *g = realloc (res, nc * sizeof *g);
          if (g == NULL)
            {
              free (res);
              return pp_error_set (err, PP_ENOMEM, "out of memory");
            }
          res = g;
          cap = nc;
        }
      res[n++] = cand;
    }
  if (n_small == 0)
    return pp_error_set (err, PP_EINVAL,
                         "P=%d is too large to simulate: every candidate exceeds %ld ranks x "
                         "micro-batches x stages per rank", P, (long) PP_SUGGEST_MAX_WORK);
  if (n > 1)
    qsort (res, n, sizeof *res, cmp_suggestion);
  if (n == 0)
    {
      /* malloc(0) may be NULL; hand out a real (empty) block all the same. */
      free (res);
      res = malloc (sizeof *res);
      if (res == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  *out = res;
  *n_out = n;
  return PP_OK;
}

char *
pp_suggestion_how (const PpSuggestion *s, PpFramework framework, char *buf, size_t size)
{
  const PpScheduleInfo *info = pp_schedule_lookup (s->schedule);
  const char *cls;

  if (size == 0)
    return buf;
  buf[0] = '\0';
  if (info == NULL)
    return buf;
  switch (framework)
    {
    case PP_FRAMEWORK_PYTORCH:
      cls = pp_schedule_pytorch_class (info->name);
      if (cls != NULL && *cls)
        snprintf (buf, size, "%s with n_microbatches=%d and %d stage%s a rank", cls, s->microbatches,
                  s->stages_per_rank, s->stages_per_rank == 1 ? "" : "s");
      else if (cls != NULL)
        snprintf (buf, size, "pipescope-cli schedule -s %s -p %d -m %d --format csv > %s.csv, then "
                  "the schedule's _load_csv(\"%s.csv\")", info->name, s->ranks, s->microbatches,
                  info->name, info->name);
      break;
    case PP_FRAMEWORK_MEGATRON:
      if (info->takes_group)
        {
          int g = pp_schedule_name_group (s->schedule);
          snprintf (buf, size, "virtual_pipeline_model_parallel_size=%d, "
                    "microbatch_group_size_per_vp_stage=%d, num_microbatches=%d",
                    s->stages_per_rank, g > 0 ? g : s->ranks, s->microbatches);
        }
      else
        snprintf (buf, size, "virtual_pipeline_model_parallel_size=None, num_microbatches=%d",
                  s->microbatches);
      break;
    case PP_FRAMEWORK_DEEPSPEED:
      snprintf (buf, size, "PipelineEngine (TrainSchedule) with gradient_accumulation_steps=%d",
                s->microbatches);
      break;
    case PP_FRAMEWORK_PIPESCOPE:
    default:
      break;
    }
  return buf;
}

/* ---- measured costs from a trace ------------------------------------------- */

/* K_LOSS: the loss computation (LOSS spans), the last stage's work */
enum { K_F, K_B, K_I, K_W, K_OVF, K_LOSS, K_N };

/* Sums of one (rank, stage) over all steps. */
typedef struct {
  int32_t rank, stage;
  int     used;
  double  sum[K_N];
  long    n[K_N];
} StageAcc;

typedef struct {
  StageAcc *slots;
  size_t    cap, used;
} StageMap;

static size_t
stage_hash (int32_t rank, int32_t stage)
{
  uint64_t x = ((uint64_t) (uint32_t) rank << 32) | (uint32_t) stage;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t) x;
}

static StageAcc *
stage_get (StageMap *m, int32_t rank, int32_t stage)
{
  if (2 * (m->used + 1) > m->cap)
    {
      size_t nc = m->cap ? 2 * m->cap : 64;
      StageAcc *ns = calloc (nc, sizeof *ns);
      if (ns == NULL)
        return NULL;
      for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].used)
          {
            size_t j = stage_hash (m->slots[i].rank, m->slots[i].stage) & (nc - 1);
            while (ns[j].used)
              j = (j + 1) & (nc - 1);
            ns[j] = m->slots[i];
          }
      free (m->slots);
      m->slots = ns;
      m->cap = nc;
    }
  size_t j = stage_hash (rank, stage) & (m->cap - 1);
  while (m->slots[j].used)
    {
      if (m->slots[j].rank == rank && m->slots[j].stage == stage)
        return &m->slots[j];
      j = (j + 1) & (m->cap - 1);
    }
  memset (&m->slots[j], 0, sizeof m->slots[j]);
  m->slots[j].used = 1;
  m->slots[j].rank = rank;
  m->slots[j].stage = stage;
  m->used++;
  return &m->slots[j];
}

static int
acc_kind (int span_kind)
{
  switch (span_kind)
    {
    case PP_SPAN_F: return K_F;
    case PP_SPAN_B: return K_B;
    case PP_SPAN_I: return K_I;
    case PP_SPAN_W: return K_W;
    case PP_SPAN_OVERLAP_F_B: return K_OVF;
    case PP_SPAN_LOSS: return K_LOSS;
    default: return -1;
    }
}

static double
mean (const StageAcc *a, int k)
{
  return a->n[k] > 0 ? a->sum[k] / (double) a->n[k] : 0;
}

void
pp_measured_costs_clear (PpMeasuredCosts *c)
{
  if (c == NULL)
    return;
  free (c->f);
  free (c->b);
  free (c->w);
  memset (c, 0, sizeof *c);
}

/* A span of one process's rank, for what nests in the blocks: k its
 * StageAcc kind (-1 for a data-parallel span). */
typedef struct {
  int32_t key, rank, stage;
  int     k;
  int64_t start, end;
} Timed;

/* What the spans add up to, before the costs are made of it. */
typedef struct {
  StageMap map;
  double   sum_send;
  long     n_send;
  int      max_rank, max_mb;
  Timed   *blocks, *dp;   /* the blocks (and LOSS) and the dp spans, for their nesting */
  size_t   n_blocks, cap_blocks, n_dp, cap_dp;
} CostSums;

static int
keep_timed (Timed **v, size_t *n, size_t *cap, Timed t)
{
  if (*n == *cap)
    {
      size_t nc = *cap ? 2 * *cap : 256;
      Timed *nv = realloc (*v, nc * sizeof *nv);
      if (nv == NULL)
        return -1;
      *v = nv;
      *cap = nc;
    }
  (*v)[(*n)++] = t;
  return 0;
}

static int
cmp_timed (const void *a, const void *b)
{
  const Timed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

/* A block's compute is its length less the data-parallel spans nested in
 * it (FSDP's all-gathers in its pre-forward hook, reduce-scatters in the
 * loss call), as the one analysis counts it (pp-why.h): their time comes
 * off the sums of the blocks' (rank, stage).  The dp spans of one
 * process's rank are made a union first.  A LOSS inside a block is the
 * block's time already: it comes off the loss sum. */
static void
take_nested_dp (CostSums *cs)
{
  size_t m = 0;
  int64_t block_end = INT64_MIN;   /* the latest end of a block (not LOSS) of this process's rank */
  if (cs->n_blocks == 0)
    return;
  if (cs->n_dp > 1)   /* dp is NULL when there are none: no qsort of it */
    qsort (cs->dp, cs->n_dp, sizeof *cs->dp, cmp_timed);
  qsort (cs->blocks, cs->n_blocks, sizeof *cs->blocks, cmp_timed);
  for (size_t i = 0; i < cs->n_dp; i++)
    if (m > 0 && cs->dp[m - 1].key == cs->dp[i].key && cs->dp[m - 1].rank == cs->dp[i].rank
        && cs->dp[i].start <= cs->dp[m - 1].end)
      {
        if (cs->dp[i].end > cs->dp[m - 1].end)
          cs->dp[m - 1].end = cs->dp[i].end;
      }
    else
      cs->dp[m++] = cs->dp[i];
  for (size_t b = 0; b < cs->n_blocks; b++)
    {
      const Timed *x = &cs->blocks[b];
      if (b == 0 || x->key != cs->blocks[b - 1].key || x->rank != cs->blocks[b - 1].rank)
        block_end = INT64_MIN;
      if (x->k == K_LOSS && x->end <= block_end)
        {
          /* a LOSS inside a block: the block's time holds it already */
          StageAcc *acc = stage_get (&cs->map, x->rank, x->stage);
          if (acc != NULL)
            acc->sum[K_LOSS] -= (double) (x->end - x->start) * 1e-9;
          continue;
        }
      if (x->k != K_LOSS && x->end > block_end)
        block_end = x->end;
      size_t lo = 0, hi = m;
      while (lo < hi)   /* the first union interval of x's process and rank ending after x starts */
        {
          size_t mid = lo + (hi - lo) / 2;
          const Timed *d = &cs->dp[mid];
          if (d->key < x->key || (d->key == x->key && (d->rank < x->rank || (d->rank == x->rank && d->end <= x->start))))
            lo = mid + 1;
          else
            hi = mid;
        }
      int64_t in = 0;
      for (size_t j = lo; j < m && cs->dp[j].key == x->key && cs->dp[j].rank == x->rank && cs->dp[j].start < x->end; j++)
        {
          int64_t a = cs->dp[j].start > x->start ? cs->dp[j].start : x->start;
          int64_t e = cs->dp[j].end < x->end ? cs->dp[j].end : x->end;
          if (e > a)
            in += e - a;
        }
      StageAcc *acc = in > 0 ? stage_get (&cs->map, x->rank, x->stage) : NULL;
      if (acc != NULL)
        acc->sum[x->k] -= (double) in * 1e-9;
    }
}

static PpStatus
costs_add_span (CostSums *cs, const PpSpan *sp, int32_t key, PpError *err)
{
  int k = acc_kind (sp->kind);

  if (sp->end_ns < sp->start_ns || sp->rank < 0)
    return PP_OK;
  Timed t = { key, sp->rank, sp->stage, k, sp->start_ns, sp->end_ns };
  if ((pp_span_kind_is_dp_comm (sp->kind) && keep_timed (&cs->dp, &cs->n_dp, &cs->cap_dp, t) != 0)
      || (k >= 0 && keep_timed (&cs->blocks, &cs->n_blocks, &cs->cap_blocks, t) != 0))
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  /* end >= start: the difference as unsigned is exact */
  double d = (double) ((uint64_t) sp->end_ns - (uint64_t) sp->start_ns) * 1e-9;
  if (sp->kind == PP_SPAN_SEND_F || sp->kind == PP_SPAN_SEND_B)
    {
      cs->sum_send += d;
      cs->n_send++;
      return PP_OK;
    }
  if (k < 0)
    return PP_OK;
  StageAcc *a = stage_get (&cs->map, sp->rank, sp->stage);
  if (a == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  a->sum[k] += d;
  a->n[k]++;
  if (sp->rank > cs->max_rank)
    cs->max_rank = sp->rank;
  if (sp->microbatch > cs->max_mb)
    cs->max_mb = sp->microbatch;
  return PP_OK;
}

/* The costs of what cs holds (desc NULL: none; what names the run in
 * errors).  Frees cs's map. */
static PpStatus
costs_finish (CostSums *cs, const PpTraceDescription *desc, const char *what, PpMeasuredCosts *out,
              PpError *err)
{
  PpSchedule *sched = NULL;
  PpStatus st = PP_OK;
  int P, M;

  take_nested_dp (cs);
  if (cs->map.used == 0)
    {
      st = pp_error_set (err, PP_EINVAL, "%s has no measured F/B spans; record a run first", what);
      goto out;
    }
  P = desc != NULL && desc->n_ranks > cs->max_rank ? desc->n_ranks : cs->max_rank + 1;
  M = desc != NULL && desc->n_microbatches > 0 ? desc->n_microbatches : cs->max_mb + 1;
  if (M < 1)
    M = 1;

  /* Where the run's schedule can be rebuilt, its stages tell which share of
   * the micro-batches each one sees (all for one chain, half for DualPipe);
   * otherwise every stage is taken to see them all. */
  if (desc != NULL && desc->n_ranks == P && desc->n_microbatches == M
      && !too_large (P, M, desc->n_virtual))
    {
      char name[sizeof desc->schedule];
      snprintf (name, sizeof name, "%s", desc->schedule);
      if (pp_schedule_generate (name, P, M, desc->n_virtual > 0 ? desc->n_virtual : 0,
                                &sched, NULL) != PP_OK)
        sched = NULL;
    }

  out->ranks = P;
  out->microbatches = M;
  out->framework = desc != NULL ? pp_framework_of_description (desc->schedule, desc->model) : PP_FRAMEWORK_PIPESCOPE;
  out->comm = cs->n_send > 0 ? cs->sum_send / (double) cs->n_send : 0;
  out->f = calloc ((size_t) P, sizeof *out->f);
  out->b = calloc ((size_t) P, sizeof *out->b);
  out->w = calloc ((size_t) P, sizeof *out->w);
  if (out->f == NULL || out->b == NULL || out->w == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < cs->map.cap; i++)
    {
      const StageAcc *a = &cs->map.slots[i];
      double share = 1, f, b, w, ov;

      if (!a->used || a->rank >= P)
        continue;
      if (sched != NULL && a->stage >= 0 && a->stage < sched->n_stages)
        share = (double) (sched->stage_mb_hi[a->stage] - sched->stage_mb_lo[a->stage]) / (double) M;

      /* Overlapped F&B spans (DualPipe) count only where the stage has no
       * plain span of that kind, split F : B = 1 : 2. */
      ov = mean (a, K_OVF);
      f = a->n[K_F] > 0 ? mean (a, K_F) : ov / 3;
      /* the loss computation, a micro-batch's share, counts in the
       * stage's forward as the one analysis counts it (pp-why.h) */
      if (a->n[K_LOSS] > 0 && a->n[K_F] + a->n[K_OVF] > 0)
        f += a->sum[K_LOSS] / (double) (a->n[K_F] > 0 ? a->n[K_F] : a->n[K_OVF]);
      w = mean (a, K_W);
      if (a->n[K_B] + a->n[K_I] > 0)
        /* B spans are whole backwards; I spans are completed by a mean W. */
        b = (a->sum[K_B] + a->sum[K_I] + (double) a->n[K_I] * w)
            / (double) (a->n[K_B] + a->n[K_I]);
      else
        b = ov * 2 / 3;
      out->f[a->rank] += f * share;
      out->b[a->rank] += b * share;
      out->w[a->rank] += w * share;
    }
  for (int r = 0; r < P; r++)
    if (out->f[r] <= 0 || out->b[r] <= 0)
      {
        st = pp_error_set (err, PP_EINVAL,
                           "%s: rank %d has no measured %s spans; record a whole step",
                           what, r, out->f[r] <= 0 ? "F" : "B");
        goto out;
      }
    else if (out->w[r] > out->b[r])
      out->w[r] = out->b[r];

out:
  if (st != PP_OK)
    pp_measured_costs_clear (out);
  pp_schedule_free (sched);
  free (cs->map.slots);
  cs->map.slots = NULL;
  free (cs->blocks);
  free (cs->dp);
  cs->blocks = cs->dp = NULL;
  return st;
}

PpStatus
pp_measured_costs_from_trace (const char *path, PpMeasuredCosts *out, PpError *err)
{
  PpTraceReader *rd = NULL;
  PpTraceItem item;
  PpTraceDescription desc;
  bool has_desc = false;
  CostSums cs = { .max_rank = -1, .max_mb = -1 };
  PpError rerr = { 0 };
  PpStatus st = PP_OK;

  if (out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_measured_costs_from_trace: out is required");
  memset (out, 0, sizeof *out);
  if (path == NULL)
    return pp_error_set (err, PP_EINVAL, "no trace path");

  rd = pp_trace_reader_new_path (path, &rerr);
  if (rd == NULL)
    return pp_error_set (err, rerr.status != PP_OK ? rerr.status : PP_EIO, "%s: %s", path,
                         rerr.msg[0] ? rerr.msg : strerror (errno));
  for (;;)
    {
      if ((st = pp_trace_reader_next (rd, &item, &rerr)) != PP_OK)
        {
          pp_error_set (err, st, "%s: %s", path, rerr.msg);
          goto out;
        }
      if (item.type == PP_TRACE_ITEM_END)
        break;
      if (item.type == PP_TRACE_ITEM_DESCRIPTION)
        {
          desc = *item.description;
          has_desc = true;
        }
      else if (item.type == PP_TRACE_ITEM_SPAN && (st = costs_add_span (&cs, &item.span, item.process, err)) != PP_OK)
        goto out;
    }
  pp_trace_reader_free (rd);
  return costs_finish (&cs, has_desc ? &desc : NULL, path, out, err);
out:
  free (cs.map.slots);
  free (cs.blocks);
  free (cs.dp);
  pp_trace_reader_free (rd);
  return st;
}

PpStatus
pp_measured_costs_from_spans (const PpTraceDescription *desc, const PpSpan *const *rows, const size_t *n,
                              int n_rows, const char *what, PpMeasuredCosts *out, PpError *err)
{
  CostSums cs = { .max_rank = -1, .max_mb = -1 };
  PpStatus st;

  if (out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_measured_costs_from_spans: out is required");
  memset (out, 0, sizeof *out);
  for (int r = 0; r < n_rows; r++)
    for (size_t i = 0; i < n[r]; i++)
      if ((st = costs_add_span (&cs, &rows[r][i], -1, err)) != PP_OK)
        {
          free (cs.map.slots);
          free (cs.blocks);
          free (cs.dp);
          return st;
        }
  return costs_finish (&cs, desc, what != NULL ? what : "the run", out, err);
}
