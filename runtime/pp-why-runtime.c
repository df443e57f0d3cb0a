/* pp-why-runtime.c — runtime's parts (pp-why-runtime.h has the rule). */
#include "pp-why-runtime.h"
#include "pp-schedule-rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_HOST (PP_SPAN_HOST_ZERO_GRAD - PP_SPAN_GC + 1)
#define N_SAMPLED 2   /* RUN_DELAY_NS, PROBE_SELF_NS */

static const char *const part_names[PP_WHY_N_RUNTIME_PARTS] = {
  "descheduled", "gc", "host_schedule", "host_loss", "host_data", "host_zero_grad",
  "probe", "user_kernels", "peer_late", "unattributed",
};

const char *
pp_why_runtime_part_name (int part)
{
  return part >= 0 && part < PP_WHY_N_RUNTIME_PARTS ? part_names[part] : NULL;
}

typedef struct {
  int64_t a, b;
} Iv;

typedef struct {
  int64_t t;
  double  v;
} Sample;

/* One rank's records, each list sorted; the interval lists merged (disjoint). */
typedef struct {
  Iv     *work, *host[N_HOST], *kern;
  size_t  n_work, n_host[N_HOST], n_kern;
  Sample *smp[N_SAMPLED];
  size_t  n_smp[N_SAMPLED];
} RankIx;

struct PpWhyRuntimeIndex {
  int           ranks;
  RankIx       *r;
  unsigned char host_seen[N_HOST];
  Iv           *scratch;   /* per gap: the host intervals covered so far */
  size_t        cap_scratch;
};

static int
cmp_iv (const void *x, const void *y)
{
  const Iv *a = x, *b = y;
  return a->a < b->a ? -1 : a->a > b->a ? 1 : (a->b < b->b ? -1 : a->b > b->b);
}

static int
cmp_sample (const void *x, const void *y)
{
  const Sample *a = x, *b = y;
  return a->t < b->t ? -1 : a->t > b->t;
}

/* Sorts and merges v[n] in place into disjoint intervals; their count. */
static size_t
merge (Iv *v, size_t n)
{
  size_t k = 0;
  qsort (v, n, sizeof *v, cmp_iv);
  for (size_t i = 0; i < n; i++)
    {
      if (k > 0 && v[i].a <= v[k - 1].b)
        {
          if (v[i].b > v[k - 1].b)
            v[k - 1].b = v[i].b;
        }
      else
        v[k++] = v[i];
    }
  return k;
}

static int
sampled_slot (int kind)
{
  return kind == PP_COUNTER_RUN_DELAY_NS ? 0 : kind == PP_COUNTER_PROBE_SELF_NS ? 1 : -1;
}

static int
host_slot (int kind)
{
  return pp_span_kind_is_host (kind) ? kind - PP_SPAN_GC : -1;
}

void
pp_why_runtime_index_free (PpWhyRuntimeIndex *ix)
{
  if (ix == NULL)
    return;
  for (int r = 0; ix->r != NULL && r < ix->ranks; r++)
    {
      RankIx *x = &ix->r[r];
      free (x->work);
      free (x->kern);
      for (int k = 0; k < N_HOST; k++)
        free (x->host[k]);
      for (int k = 0; k < N_SAMPLED; k++)
        free (x->smp[k]);
    }
  free (ix->r);
  free (ix->scratch);
  free (ix);
}

/* Counts, allocates, fills: two passes over the records. */
PpWhyRuntimeIndex *
pp_why_runtime_index_new (const PpSpan *spans, size_t n_spans, const PpCounter *counters,
                          size_t n_counters, int ranks, PpError *err)
{
  PpWhyRuntimeIndex *ix = calloc (1, sizeof *ix);
  if (ix == NULL || ranks < 0 || (ix->r = calloc ((size_t) ranks + 1, sizeof *ix->r)) == NULL)
    goto oom;
  ix->ranks = ranks;
  for (int pass = 0; pass < 2; pass++)
    {
      for (size_t i = 0; spans != NULL && i < n_spans; i++)
        {
          const PpSpan *sp = &spans[i];
          if (sp->rank < 0 || sp->rank >= ranks || sp->end_ns < sp->start_ns)
            continue;
          RankIx *x = &ix->r[sp->rank];
          Iv iv = { sp->start_ns, sp->end_ns };
          int h = host_slot (sp->kind);
          Iv *list = NULL;
          size_t *n = NULL;
          if (pp_span_kind_is_work (sp->kind))
            list = x->work, n = &x->n_work;
          else if (h >= 0)
            list = x->host[h], n = &x->n_host[h], ix->host_seen[h] = 1;
          else if (sp->kind == PP_SPAN_KERNEL)
            list = x->kern, n = &x->n_kern;
          else
            continue;
          if (pass == 1)
            list[*n] = iv;
          ++*n;
        }
      for (size_t i = 0; counters != NULL && i < n_counters; i++)
        {
          const PpCounter *c = &counters[i];
          int k = sampled_slot (c->kind);
          if (k < 0 || c->rank < 0 || c->rank >= ranks)
            continue;
          RankIx *x = &ix->r[c->rank];
          if (pass == 1)
            x->smp[k][x->n_smp[k]] = (Sample) { c->time_ns, c->value };
          x->n_smp[k]++;
        }
      if (pass == 1)
        break;
      /* allocate what pass 0 counted, then count again while filling */
      for (int r = 0; r < ranks; r++)
        {
          RankIx *x = &ix->r[r];
          if ((x->work = malloc ((x->n_work + 1) * sizeof *x->work)) == NULL
              || (x->kern = malloc ((x->n_kern + 1) * sizeof *x->kern)) == NULL)
            goto oom;
          for (int k = 0; k < N_HOST; k++)
            if ((x->host[k] = malloc ((x->n_host[k] + 1) * sizeof *x->host[k])) == NULL)
              goto oom;
          for (int k = 0; k < N_SAMPLED; k++)
            if ((x->smp[k] = malloc ((x->n_smp[k] + 1) * sizeof *x->smp[k])) == NULL)
              goto oom;
          x->n_work = x->n_kern = 0;
          memset (x->n_host, 0, sizeof x->n_host);
          memset (x->n_smp, 0, sizeof x->n_smp);
        }
    }
  for (int r = 0; r < ranks; r++)
    {
      RankIx *x = &ix->r[r];
      x->n_work = merge (x->work, x->n_work);
      x->n_kern = merge (x->kern, x->n_kern);
      for (int k = 0; k < N_HOST; k++)
        x->n_host[k] = merge (x->host[k], x->n_host[k]);
      for (int k = 0; k < N_SAMPLED; k++)
        qsort (x->smp[k], x->n_smp[k], sizeof *x->smp[k], cmp_sample);
    }
  return ix;

oom:
  pp_why_runtime_index_free (ix);
  pp_error_set (err, PP_ENOMEM, "out of memory");
  return NULL;
}

/* The first interval of v[n] (disjoint, sorted) ending after t. */
static size_t
first_ending_after (const Iv *v, size_t n, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t m = lo + (hi - lo) / 2;
      if (v[m].b > t)
        hi = m;
      else
        lo = m + 1;
    }
  return lo;
}

/* The counter's value at t: its last sample at or before t (NULL when
 * none).  A recorder may write a sample only when the value changed
 * (the hook does), so a missing sample means "as the one before"; a
 * sample after t is the value after something t does not include (a
 * block's run delay), never the value at t. */
static const Sample *
last_at (const Sample *s, size_t n, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t m = lo + (hi - lo) / 2;
      if (s[m].t <= t)
        lo = m + 1;
      else
        hi = m;
    }
  return lo > 0 ? &s[lo - 1] : NULL;
}

/* A cumulative counter's growth across the gap [a, b] (its edges, ns;
 * INT64_MIN/MAX where the rank has no work on that side), share the part
 * of it inside the window; 0 where it cannot be measured. */
static double
growth (const Sample *s, size_t n, int64_t a, int64_t b, double share)
{
  if (a == INT64_MIN || b == INT64_MAX)
    return 0;
  const Sample *x = last_at (s, n, a), *y = last_at (s, n, b);
  if (x == NULL || y == NULL || !(x->t <= y->t))
    return 0;
  double d = (y->v - x->v) * 1e-9 * share;
  return d > 0 ? d : 0;   /* NaN and decreasing counters: nothing */
}

static double
capped (double v, double left)
{
  if (!(v > 0) || !(left > 0))
    return 0;
  return v < left ? v : left;
}

static double
measure (const Iv *v, size_t n)
{
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m += (double) v[i].b - (double) v[i].a;   /* in double: hostile times never overflow */
  return m;
}

/* Appends to ix->scratch (*n used) the intervals of v[nv] clipped to [a, b]. */
static int
add_clipped (PpWhyRuntimeIndex *ix, size_t *n, const Iv *v, size_t nv, int64_t a, int64_t b)
{
  for (size_t i = first_ending_after (v, nv, a); i < nv && v[i].a < b; i++)
    {
      if (*n == ix->cap_scratch)
        {
          size_t cap = ix->cap_scratch ? 2 * ix->cap_scratch : 64;
          Iv *g = realloc (ix->scratch, cap * sizeof *g);
          if (g == NULL)
            return -1;
          ix->scratch = g;
          ix->cap_scratch = cap;
        }
      ix->scratch[(*n)++] = (Iv) { v[i].a > a ? v[i].a : a, v[i].b < b ? v[i].b : b };
    }
  return 0;
}

/* Rule 1 over the gap [a, b] of rank x (its edges; INT64_MIN/MAX none),
 * clipped to [lo, hi] (non-empty): parts in seconds. */
static PpStatus
gap_parts (PpWhyRuntimeIndex *ix, const RankIx *x, int64_t a, int64_t b, int64_t lo, int64_t hi,
           double *parts, PpError *err)
{
  int64_t ca = a > lo ? a : lo, cb = b < hi ? b : hi;
  double len = ((double) cb - (double) ca) * 1e-9;
  double share = a != INT64_MIN && b != INT64_MAX && b > a
                 ? ((double) cb - (double) ca) / ((double) b - (double) a) : 0;
  double left = len;
  size_t n = 0;

  memset (parts, 0, PP_WHY_N_RUNTIME_PARTS * sizeof *parts);
  parts[PP_WHY_RT_DESCHEDULED] = capped (growth (x->smp[0], x->n_smp[0], a, b, share), left);
  left -= parts[PP_WHY_RT_DESCHEDULED];
  /* GC, then each host kind: what it adds to the union of those before */
  for (int k = 0; k < N_HOST; k++)
    {
      double before = measure (ix->scratch, n);
      if (add_clipped (ix, &n, x->host[k], x->n_host[k], ca, cb) != 0)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      n = merge (ix->scratch, n);
      double p = capped ((measure (ix->scratch, n) - before) * 1e-9, left);
      parts[PP_WHY_RT_GC + k] = p;
      left -= p;
    }
  parts[PP_WHY_RT_PROBE] = capped (growth (x->smp[1], x->n_smp[1], a, b, share), left);
  left -= parts[PP_WHY_RT_PROBE];
  n = 0;
  if (add_clipped (ix, &n, x->kern, x->n_kern, ca, cb) != 0)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  parts[PP_WHY_RT_USER_KERNELS] = capped (measure (ix->scratch, n) * 1e-9, left);
  left -= parts[PP_WHY_RT_USER_KERNELS];
  parts[PP_WHY_RT_UNATTRIBUTED] = left > 0 ? left : 0;
  return PP_OK;
}

/* Calls fn for each gap of rank r inside [lo, hi]: its edges and parts. */
typedef PpStatus (*GapFn) (void *user, int64_t a, int64_t b, int64_t ca, int64_t cb,
                           const double *parts, PpError *err);

static PpStatus
each_gap (PpWhyRuntimeIndex *ix, int r, int64_t lo, int64_t hi, GapFn fn, void *user, PpError *err)
{
  const RankIx *x = &ix->r[r];
  double parts[PP_WHY_N_RUNTIME_PARTS];
  PpStatus st;
  /* gap g lies between work g - 1 and work g; the first that ends after lo */
  size_t g = first_ending_after (x->work, x->n_work, lo);
  for (; g <= x->n_work; g++)
    {
      int64_t a = g > 0 ? x->work[g - 1].b : INT64_MIN;
      int64_t b = g < x->n_work ? x->work[g].a : INT64_MAX;
      if (a >= hi)
        break;
      int64_t ca = a > lo ? a : lo, cb = b < hi ? b : hi;
      if (cb <= ca)
        continue;
      if ((st = gap_parts (ix, x, a, b, lo, hi, parts, err)) != PP_OK
          || (st = fn (user, a, b, ca, cb, parts, err)) != PP_OK)
        return st;
    }
  return PP_OK;
}

typedef struct {
  PpWhyGap *v;
  size_t    n, cap;
} GapList;

static PpStatus
collect_gap (void *user, int64_t a, int64_t b, int64_t ca, int64_t cb, const double *parts, PpError *err)
{
  GapList *l = user;
  (void) a;
  (void) b;
  if (l->n == l->cap)
    {
      size_t cap = l->cap ? 2 * l->cap : 64;
      PpWhyGap *g = realloc (l->v, cap * sizeof *g);
      if (g == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      l->v = g;
      l->cap = cap;
    }
  PpWhyGap *o = &l->v[l->n++];
  o->start_ns = ca;
  o->end_ns = cb;
  memcpy (o->parts, parts, sizeof o->parts);
  return PP_OK;
}

PpStatus
pp_why_runtime_gaps (const PpSpan *spans, size_t n_spans, const PpCounter *counters,
                     size_t n_counters, int rank, int64_t from_ns, int64_t to_ns,
                     PpWhyGap **out, size_t *n_out, PpError *err)
{
  if (out == NULL || n_out == NULL)
    return pp_error_set (err, PP_EINVAL, "pp_why_runtime_gaps: out and n_out are required");
  *out = NULL;
  *n_out = 0;
  if (rank < 0 || rank >= PP_TRACE_MAX_RANKS)
    return pp_error_set (err, PP_EINVAL, "pp_why_runtime_gaps: rank %d is out of range", rank);
  if (to_ns <= from_ns)
    return PP_OK;
  PpWhyRuntimeIndex *ix = pp_why_runtime_index_new (spans, n_spans, counters, n_counters, rank + 1, err);
  if (ix == NULL)
    return PP_ENOMEM;
  GapList l = { 0 };
  PpStatus st = each_gap (ix, rank, from_ns, to_ns, collect_gap, &l, err);
  pp_why_runtime_index_free (ix);
  if (st != PP_OK)
    {
      free (l.v);
      return st;
    }
  *out = l.v;
  *n_out = l.n;
  return PP_OK;
}

/* ---- one step --------------------------------------------------------------- */

typedef struct {
  double sum[PP_WHY_N_RUNTIME_PARTS];
} GapSum;

static PpStatus
sum_gap (void *user, int64_t a, int64_t b, int64_t ca, int64_t cb, const double *parts, PpError *err)
{
  GapSum *s = user;
  (void) a, (void) b, (void) ca, (void) cb, (void) err;
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    s->sum[k] += parts[k];
  return PP_OK;
}

/* The parts of rank q's gap that ends where its work starting nearest t
 * starts (the gap before a block), added to causes. */
static PpStatus
add_gap_before (PpWhyRuntimeIndex *ix, int q, int64_t t, double *causes, PpError *err)
{
  const RankIx *x = &ix->r[q];
  if (x->n_work == 0)
    return PP_OK;
  size_t g = first_ending_after (x->work, x->n_work, t);
  if (g == x->n_work)
    g--;
  if (g == 0)
    return PP_OK;   /* its first work: no gap before it on record */
  int64_t a = x->work[g - 1].b, b = x->work[g].a;
  if (b <= a)
    return PP_OK;
  double parts[PP_WHY_N_RUNTIME_PARTS];
  PpStatus st = gap_parts (ix, x, a, b, a, b, parts, err);
  for (int k = 0; st == PP_OK && k < PP_WHY_N_RUNTIME_PARTS; k++)
    causes[k] += parts[k];
  return st;
}

void
pp_why_runtime_reset (PpWhyIdle *w)
{
  memset (w->runtime_parts, 0, sizeof w->runtime_parts);
  memset (w->runtime_measured, 0, sizeof w->runtime_measured);
  memset (w->late_causes, 0, sizeof w->late_causes);
  w->runtime_parts[PP_WHY_RT_UNATTRIBUTED] = w->runtime > 0 ? w->runtime : 0;
  w->runtime_measured[PP_WHY_RT_UNATTRIBUTED] = 1;
  w->late_peer = -1;
  w->late_wait = 0;
}

static int
cmp_block_rank_start (const void *x, const void *y)
{
  const PpWhyBlock *a = *(const PpWhyBlock *const *) x, *b = *(const PpWhyBlock *const *) y;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  return a->start < b->start ? -1 : a->start > b->start;
}

/* Where each (stage, micro-batch)'s forward and input gradient ran
 * (indices into the step's blocks, -1 none), as the critical path finds
 * them: cell stage * M + micro-batch. */
typedef struct {
  long *f_at, *g_at;
  int   S, M;
} BlockAt;

static int
block_at_init (BlockAt *at, const PpSchedule *s, const PpWhyBlock *bl, size_t nb)
{
  size_t cells = (size_t) s->n_stages * (size_t) s->microbatches;
  at->S = s->n_stages;
  at->M = s->microbatches;
  at->f_at = malloc ((cells + 1) * sizeof *at->f_at);
  at->g_at = malloc ((cells + 1) * sizeof *at->g_at);
  if (at->f_at == NULL || at->g_at == NULL)
    return -1;
  for (size_t c = 0; c < cells; c++)
    at->f_at[c] = at->g_at[c] = -1;
  for (size_t i = 0; i < nb; i++)
    {
      const PpWhyBlock *b = &bl[i];
      if (b->stage < 0 || b->stage >= at->S || b->microbatch < 0 || b->microbatch >= at->M)
        continue;
      size_t c = (size_t) b->stage * at->M + b->microbatch;
      if (b->kind == PP_ACT_F || b->kind == PP_ACT_OVERLAP_F_B)
        at->f_at[c] = (long) i;
      if (b->kind == PP_ACT_B || b->kind == PP_ACT_I)
        at->g_at[c] = (long) i;
      if (b->kind == PP_ACT_OVERLAP_F_B && (b->sub_kind == PP_ACT_B || b->sub_kind == PP_ACT_I)
          && b->sub_stage >= 0 && b->sub_stage < at->S && b->sub_microbatch >= 0 && b->sub_microbatch < at->M)
        at->g_at[(size_t) b->sub_stage * at->M + b->sub_microbatch] = (long) i;
    }
  return 0;
}

/* The block of (F or a gradient, stage, micro-batch) among bl; NULL none. */
static const PpWhyBlock *
find_block (const BlockAt *at, const PpWhyBlock *bl, int kind, int stage, int mb)
{
  if (stage < 0 || stage >= at->S || mb < 0 || mb >= at->M)
    return NULL;
  long i = (kind == PP_ACT_F ? at->f_at : at->g_at)[(size_t) stage * at->M + mb];
  return i >= 0 ? &bl[i] : NULL;
}

/* Rule 3 for rank r: its dependency waits in the step (seconds), by peer
 * into by_peer[ranks], and the late blocks' peers' gaps into causes[ranks][parts]. */
static PpStatus
dependency_wait (PpWhyRuntimeIndex *ix, const PpSchedule *s, int64_t lo_ns, const PpWhyBlock *const *mine,
                 size_t n_mine, const PpWhyBlock *bl, const BlockAt *at, const double *comm, double *by_peer,
                 double *causes, PpError *err)
{
  double ready = 0;   /* the window's start, then the rank's previous block end */
  for (size_t i = 0; i < n_mine; i++)
    {
      const PpWhyBlock *b = mine[i];
      double arrive = -INFINITY;
      const PpWhyBlock *late = NULL;
      for (int half = 0; half < 2; half++)
        {
          int kind = half == 0 ? (b->kind == PP_ACT_OVERLAP_F_B ? PP_ACT_F : b->kind) : b->sub_kind;
          int stage = half == 0 ? b->stage : b->sub_stage;
          int mb = half == 0 ? b->microbatch : b->sub_microbatch;
          PpDependency dep[2];
          if (half == 1 && b->kind != PP_ACT_OVERLAP_F_B)
            break;
          if (stage < 0 || stage >= s->n_stages || mb < 0 || mb >= s->microbatches)
            continue;
          int nd = pp_schedule_dependencies (s, kind, stage, dep);
          for (int d = 0; d < nd; d++)
            {
              const PpWhyBlock *j = find_block (at, bl, dep[d].kind, dep[d].stage, mb);
              if (j == NULL || j == b || j->rank == b->rank || j->start >= b->start)
                continue;
              double t = j->end + (dep[d].boundary >= 0 && comm != NULL ? comm[dep[d].boundary] : 0);
              if (t > arrive)
                arrive = t, late = j;
            }
        }
      if (late != NULL && arrive > ready)
        {
          double w = (arrive < b->start ? arrive : b->start) - ready;
          if (w > 0 && late->rank >= 0 && late->rank < ix->ranks)
            {
              by_peer[late->rank] += w;
              PpStatus st = add_gap_before (ix, late->rank, lo_ns + (int64_t) llround (late->start * 1e9),
                                            causes + (size_t) late->rank * PP_WHY_N_RUNTIME_PARTS, err);
              if (st != PP_OK)
                return st;
            }
        }
      if (b->end > ready)
        ready = b->end;
    }
  return PP_OK;
}

PpStatus
pp_why_runtime_step (const PpWhyRuntimeIndex *cix, const PpSchedule *s, int64_t lo_ns, int64_t hi_ns,
                     const PpWhyBlock *blocks, size_t nb, const double *comm, PpWhyIdle *idle,
                     PpError *err)
{
  /* the scratch buffer is the index's only mutable state */
  PpWhyRuntimeIndex *ix = (PpWhyRuntimeIndex *) cix;
  int P = s->ranks < ix->ranks ? s->ranks : ix->ranks;
  const PpWhyBlock **order = malloc ((nb + 1) * sizeof *order);
  double *by_peer = calloc ((size_t) ix->ranks + 1, sizeof *by_peer);
  double *causes = calloc (((size_t) ix->ranks + 1) * PP_WHY_N_RUNTIME_PARTS, sizeof *causes);
  BlockAt at = { 0 };
  PpStatus st = PP_OK;
  if (order == NULL || by_peer == NULL || causes == NULL || block_at_init (&at, s, blocks, nb) != 0)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < nb; i++)
    order[i] = &blocks[i];
  qsort (order, nb, sizeof *order, cmp_block_rank_start);

  size_t first = 0;
  for (int r = 0; r < P; r++)
    {
      PpWhyIdle *w = &idle[r];
      const RankIx *x = &ix->r[r];
      GapSum g = { { 0 } };
      size_t n_mine = 0;
      pp_why_runtime_reset (w);
      while (first < nb && order[first]->rank < r)
        first++;
      while (first + n_mine < nb && order[first + n_mine]->rank == r)
        n_mine++;
      if ((st = each_gap (ix, r, lo_ns, hi_ns, sum_gap, &g, err)) != PP_OK)
        goto out;
      memset (by_peer, 0, (size_t) ix->ranks * sizeof *by_peer);
      memset (causes, 0, (size_t) ix->ranks * PP_WHY_N_RUNTIME_PARTS * sizeof *causes);
      if ((st = dependency_wait (ix, s, lo_ns, order + first, n_mine, blocks, &at, comm, by_peer,
                                 causes, err)) != PP_OK)
        goto out;

      /* rule 2: charge in order, each capped to what runtime has left */
      double runtime = w->runtime > 0 ? w->runtime : 0, left = runtime, charged = 0;
      for (int k = 0; k < PP_WHY_RT_PEER_LATE; k++)
        {
          double p = capped (g.sum[k], left);
          w->runtime_parts[k] = p;
          left = runtime - (charged += p);
        }
      double wait = 0;
      int peer = -1;
      for (int q = 0; q < ix->ranks; q++)
        {
          wait += by_peer[q];
          if (by_peer[q] > 0 && (peer < 0 || by_peer[q] > by_peer[peer]))
            peer = q;
        }
      double plan = w->schedule + w->imbalance + w->transfers;
      double late = capped (wait - plan, left);
      w->runtime_parts[PP_WHY_RT_PEER_LATE] = late;
      charged += late;
      w->runtime_parts[PP_WHY_RT_UNATTRIBUTED] = runtime - charged > 0 ? runtime - charged : 0;

      w->runtime_measured[PP_WHY_RT_DESCHEDULED] = x->n_smp[0] > 1;
      for (int k = 0; k < N_HOST; k++)
        w->runtime_measured[PP_WHY_RT_GC + k] = ix->host_seen[k];
      w->runtime_measured[PP_WHY_RT_PROBE] = x->n_smp[1] > 1;
      w->runtime_measured[PP_WHY_RT_USER_KERNELS] = x->n_kern > 0;
      w->runtime_measured[PP_WHY_RT_PEER_LATE] = 1;
      if (late > 0 && peer >= 0)
        {
          w->late_peer = peer;
          w->late_wait = late * by_peer[peer] / wait;
          memcpy (w->late_causes, causes + (size_t) peer * PP_WHY_N_RUNTIME_PARTS, sizeof w->late_causes);
          w->late_causes[PP_WHY_RT_PEER_LATE] = 0;
        }
    }
out:
  free (order);
  free (by_peer);
  free (causes);
  free (at.f_at);
  free (at.g_at);
  return st;
}

PpStatus
pp_why_runtime_mean (const PpWhyStep *steps, int n_steps, int ranks, PpWhyIdle *mean, PpError *err)
{
  double *by_peer = calloc ((size_t) ranks + 1, sizeof *by_peer);
  if (by_peer == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int r = 0; r < ranks; r++)
    {
      PpWhyIdle *m = &mean[r];
      memset (m->runtime_parts, 0, sizeof m->runtime_parts);
      memset (m->runtime_measured, 0, sizeof m->runtime_measured);
      memset (m->late_causes, 0, sizeof m->late_causes);
      memset (by_peer, 0, (size_t) ranks * sizeof *by_peer);
      m->late_peer = -1;
      m->late_wait = 0;
      for (int i = 0; i < n_steps; i++)
        {
          const PpWhyIdle *w = &steps[i].idle[r];
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            {
              m->runtime_parts[k] += w->runtime_parts[k] / n_steps;
              m->runtime_measured[k] |= w->runtime_measured[k];
            }
          if (w->late_peer >= 0 && w->late_peer < ranks)
            by_peer[w->late_peer] += w->late_wait;
        }
      for (int q = 0; q < ranks; q++)
        if (by_peer[q] > 0 && (m->late_peer < 0 || by_peer[q] > by_peer[m->late_peer]))
          m->late_peer = q;
      for (int i = 0; m->late_peer >= 0 && i < n_steps; i++)
        {
          const PpWhyIdle *w = &steps[i].idle[r];
          if (w->late_peer != m->late_peer)
            continue;
          m->late_wait += w->late_wait / n_steps;
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            m->late_causes[k] += w->late_causes[k] / n_steps;
        }
    }
  free (by_peer);
  return PP_OK;
}

/* ---- reports ---------------------------------------------------------------- */

/* Whether part k of w is worth a name: always for gc, descheduled and
 * unattributed, else where the trace measures it or it is not 0. */
static int
shown (const PpWhyIdle *w, int k)
{
  return k == PP_WHY_RT_GC || k == PP_WHY_RT_DESCHEDULED || k == PP_WHY_RT_UNATTRIBUTED
         || w->runtime_measured[k] || w->runtime_parts[k] != 0;
}

void
pp_why_print_runtime_parts (FILE *f, const PpWhyIdle *idle, int ranks, double scale, const char *unit)
{
  int any = 0;
  for (int r = 0; r < ranks; r++)
    any |= idle[r].runtime > 0;
  if (!any)
    return;
  fprintf (f, "runtime by part (%s, %% of runtime; README 'Why the bubble is there'):\n", unit);
  for (int r = 0; r < ranks; r++)
    {
      const PpWhyIdle *w = &idle[r];
      if (!(w->runtime > 0))
        continue;
      fprintf (f, "  rank %d: %.2f %s =", r, w->runtime * scale, unit);
      const char *sep = " ";
      for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
        if (shown (w, k))
          {
            fprintf (f, "%s%s %.2f (%.0f%%)", sep, part_names[k], w->runtime_parts[k] * scale,
                     100.0 * w->runtime_parts[k] / w->runtime);
            sep = ", ";
          }
      if (w->late_peer >= 0 && w->runtime_parts[PP_WHY_RT_PEER_LATE] > 0)
        {
          fprintf (f, "; late: rank %d (%.2f %s), its host before those blocks:", w->late_peer,
                   w->late_wait * scale, unit);
          sep = " ";
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            if (w->late_causes[k] > 0)
              {
                fprintf (f, "%s%s %.2f", sep, part_names[k], w->late_causes[k] * scale);
                sep = ", ";
              }
          if (sep[0] == ' ')
            fprintf (f, " nothing measured");
        }
      fputc ('\n', f);
    }
}

void
pp_why_runtime_write_json (FILE *f, const PpWhyIdle *w)
{
  const char *sep = "";
  fprintf (f, ", \"runtime_parts\": {");
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    if (shown (w, k))
      {
        fprintf (f, "%s\"%s\": %.9g", sep, part_names[k], w->runtime_parts[k]);
        sep = ", ";
      }
  fputc ('}', f);
  if (w->late_peer < 0 || !(w->runtime_parts[PP_WHY_RT_PEER_LATE] > 0))
    return;
  fprintf (f, ", \"runtime_peer_late\": {\"peer\": %d, \"seconds\": %.9g, \"causes\": {", w->late_peer,
           w->late_wait);
  sep = "";
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    if (k != PP_WHY_RT_PEER_LATE && (w->late_causes[k] > 0 || shown (w, k)))
      {
        fprintf (f, "%s\"%s\": %.9g", sep, part_names[k], w->late_causes[k]);
        sep = ", ";
      }
  fprintf (f, "}}");
}
