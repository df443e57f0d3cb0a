/* pp-why-gaps.c — rule 1 of pp-why-runtime.h: a rank's idle gaps and
 * their measured parts.  Its own file, in the analysis library: the
 * timeline's host lane reads the same gaps (pp_why_runtime_gaps) and
 * needs nothing else of the runtime. */
#include "pp-why-gaps-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_iv (const void *x, const void *y)
{
  const Iv *a = x, *b = y;
  return a->a < b->a ? -1 : a->a > b->a ? 1 : (a->b < b->b ? -1 : a->b > b->b);
}

/* by end: a rank's LAUNCH spans, searched by the gap they end in */
static int
cmp_iv_end (const void *x, const void *y)
{
  const Iv *a = x, *b = y;
  return a->b < b->b ? -1 : a->b > b->b ? 1 : (a->a < b->a ? -1 : a->a > b->a);
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
  if (n == 0)
    return 0;   /* v may be NULL: qsort must not see it */
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
  return kind == PP_COUNTER_RUN_DELAY_NS ? 0 : kind == PP_COUNTER_PROBE_SELF_NS ? 1
         : kind == PP_COUNTER_ON_CPU_NS ? 2 : -1;
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
      free (x->launch);
      free (x->other_gc);
      free (x->wait);
      free (x->arrive);
      free (x->local);
      for (int k = 0; k < N_HOST; k++)
        free (x->host[k]);
      for (int k = 0; k < N_SAMPLED; k++)
        free (x->smp[k]);
    }
  free (ix->r);
  free (ix->scratch);
  free (ix);
}

int
pp_why_wait_is_local (const char *name)
{
  return name != NULL
         && (strcmp (name, "nccl:local") == 0 || strcmp (name, "nccl:RecvGPUWait") == 0
             || strcmp (name, "nccl:SendGPUWait") == 0);
}

/* The names of the WAITs seen so far: a trace has a few (NCCL's parts and
 * states), its WAITs many, and the lookup is the caller's (a search). */
#define N_SEEN 16
typedef struct {
  PpWhyNameFunc name;
  void         *user;
  uint32_t      id[N_SEEN];
  unsigned char local[N_SEEN];
  int           n;
} WaitNames;

static int
wait_local (WaitNames *wn, uint32_t id)
{
  if (wn->name == NULL || id == 0)
    return 0;   /* unnamed: a wait for a peer, as every WAIT always was */
  for (int i = 0; i < wn->n; i++)
    if (wn->id[i] == id)
      return wn->local[i];
  int local = pp_why_wait_is_local (wn->name (wn->user, id));
  if (wn->n < N_SEEN)
    {
      wn->id[wn->n] = id;
      wn->local[wn->n++] = (unsigned char) local;
    }
  return local;
}

/* Counts, allocates, fills: two passes over the records; only rank only
 * when only >= 0 (the others' lists stay empty). */
static PpWhyRuntimeIndex *
index_build (const PpSpan *spans, size_t n_spans, const PpCounter *counters, size_t n_counters,
             int ranks, int only, PpWhyNameFunc name, void *user, PpError *err)
{
  WaitNames wn = { .name = name, .user = user };
  PpWhyRuntimeIndex *ix = calloc (1, sizeof *ix);
  if (ix == NULL || ranks < 0 || (ix->r = calloc ((size_t) ranks + 1, sizeof *ix->r)) == NULL)
    goto oom;
  ix->ranks = ranks;
  for (int pass = 0; pass < 2; pass++)
    {
      for (size_t i = 0; spans != NULL && i < n_spans; i++)
        {
          const PpSpan *sp = &spans[i];
          if (sp->rank < 0 || sp->rank >= ranks || sp->end_ns < sp->start_ns
              || (only >= 0 && sp->rank != only))
            continue;
          RankIx *x = &ix->r[sp->rank];
          Iv iv = { sp->start_ns, sp->end_ns };
          int h = host_slot (sp->kind);
          Iv *list = NULL;
          size_t *n = NULL;
          if (pp_span_kind_is_work (sp->kind))
            list = x->work, n = &x->n_work;
          else if (pp_span_gc_other_thread (sp))
            list = x->other_gc, n = &x->n_other_gc, ix->host_seen[0] = 1;
          else if (sp->kind == PP_SPAN_WAIT)
            {
              /* every WAIT (other_gc's holes), and as what it waits for */
              int local = wait_local (&wn, sp->name_id);
              Iv *as = local ? x->local : x->arrive;
              size_t *n_as = local ? &x->n_local : &x->n_arrive;
              if (pass == 1)
                as[*n_as] = iv;
              ++*n_as;
              list = x->wait, n = &x->n_wait;
            }
          else if (h >= 0)
            list = x->host[h], n = &x->n_host[h], ix->host_seen[h] = 1;
          else if (sp->kind == PP_SPAN_KERNEL)
            list = x->kern, n = &x->n_kern;
          else if (sp->kind == PP_SPAN_LAUNCH)
            list = x->launch, n = &x->n_launch;
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
          if (k < 0 || c->rank < 0 || c->rank >= ranks || (only >= 0 && c->rank != only))
            continue;
          RankIx *x = &ix->r[c->rank];
          if (pass == 1)
            x->smp[k][x->n_smp[k]] = (Sample) { c->time_ns, c->value };
          x->n_smp[k]++;
        }
      if (pass == 1)
        break;
      /* allocate what pass 0 counted, then count again while filling */
      for (int r = only >= 0 ? only : 0; r < ranks; r++)
        {
          RankIx *x = &ix->r[r];
          if ((x->work = malloc ((x->n_work + 1) * sizeof *x->work)) == NULL
              || (x->kern = malloc ((x->n_kern + 1) * sizeof *x->kern)) == NULL
              || (x->launch = malloc ((x->n_launch + 1) * sizeof *x->launch)) == NULL
              || (x->other_gc = malloc ((x->n_other_gc + 1) * sizeof *x->other_gc)) == NULL
              || (x->wait = malloc ((x->n_wait + 1) * sizeof *x->wait)) == NULL
              || (x->arrive = malloc ((x->n_arrive + 1) * sizeof *x->arrive)) == NULL
              || (x->local = malloc ((x->n_local + 1) * sizeof *x->local)) == NULL)
            goto oom;
          for (int k = 0; k < N_HOST; k++)
            if ((x->host[k] = malloc ((x->n_host[k] + 1) * sizeof *x->host[k])) == NULL)
              goto oom;
          for (int k = 0; k < N_SAMPLED; k++)
            if ((x->smp[k] = malloc ((x->n_smp[k] + 1) * sizeof *x->smp[k])) == NULL)
              goto oom;
          x->n_work = x->n_kern = x->n_launch = x->n_other_gc = x->n_wait = x->n_arrive = x->n_local = 0;
          memset (x->n_host, 0, sizeof x->n_host);
          memset (x->n_smp, 0, sizeof x->n_smp);
        }
    }
  for (int r = only >= 0 ? only : 0; r < ranks; r++)
    {
      RankIx *x = &ix->r[r];
      x->n_work = merge (x->work, x->n_work);
      x->n_kern = merge (x->kern, x->n_kern);
      if (x->n_launch > 0)
        qsort (x->launch, x->n_launch, sizeof *x->launch, cmp_iv_end);
      x->n_other_gc = merge (x->other_gc, x->n_other_gc);
      x->n_wait = merge (x->wait, x->n_wait);
      x->n_arrive = merge (x->arrive, x->n_arrive);
      x->n_local = merge (x->local, x->n_local);
      for (int k = 0; k < N_HOST; k++)
        x->n_host[k] = merge (x->host[k], x->n_host[k]);
      for (int k = 0; k < N_SAMPLED; k++)
        if (x->n_smp[k] > 0)
          qsort (x->smp[k], x->n_smp[k], sizeof *x->smp[k], cmp_sample);
    }
  return ix;

oom:
  pp_why_runtime_index_free (ix);
  pp_error_set (err, PP_ENOMEM, "out of memory");
  return NULL;
}

PpWhyRuntimeIndex *
pp_why_runtime_index_new (const PpSpan *spans, size_t n_spans, const PpCounter *counters,
                          size_t n_counters, int ranks, PpWhyNameFunc name, void *user, PpError *err)
{
  return index_build (spans, n_spans, counters, n_counters, ranks, -1, name, user, err);
}

/* The first interval of v[n] (disjoint, sorted) ending after t. */
size_t
pp_why_first_ending_after (const Iv *v, size_t n, int64_t t)
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

/* Whether growth can measure the counter across the gap [a, b]. */
static int
measurable (const Sample *s, size_t n, int64_t a, int64_t b)
{
  return a != INT64_MIN && b != INT64_MAX && last_at (s, n, a) != NULL;
}

double
pp_why_capped (double v, double left)
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
  for (size_t i = pp_why_first_ending_after (v, nv, a); i < nv && v[i].a < b; i++)
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

/* Appends to ix->scratch (*n used) rank x's launches of the device work
 * in or ending the gap [a, b], clipped to [ca, cb]: LAUNCH spans that
 * started before b and ended after a, and no later than the work starting
 * at b ends (a launch may return after its kernel started; one returning
 * later still launched work of a later gap). */
static int
add_launches (PpWhyRuntimeIndex *ix, size_t *n, const RankIx *x, int64_t a, int64_t b, int64_t ca,
              int64_t cb)
{
  int64_t upto = INT64_MAX;
  if (b != INT64_MAX)
    {
      size_t w = pp_why_first_ending_after (x->work, x->n_work, b);
      if (w < x->n_work)
        upto = x->work[w].b;
    }
  for (size_t i = pp_why_first_ending_after (x->launch, x->n_launch, a);
       i < x->n_launch && x->launch[i].b <= upto; i++)
    if (x->launch[i].a < b && add_clipped (ix, n, &x->launch[i], 1, ca, cb) != 0)
      return -1;
  return 0;
}

/* Appends to ix->scratch (*n used) the intervals of v[nv] clipped to
 * [a, b] less the holes h[nh] (disjoint, sorted). */
static int
add_clipped_outside (PpWhyRuntimeIndex *ix, size_t *n, const Iv *v, size_t nv, int64_t a, int64_t b,
                     const Iv *h, size_t nh)
{
  for (size_t i = pp_why_first_ending_after (v, nv, a); i < nv && v[i].a < b; i++)
    {
      int64_t from = v[i].a > a ? v[i].a : a, to = v[i].b < b ? v[i].b : b;
      for (size_t j = pp_why_first_ending_after (h, nh, from); from < to; j++)
        {
          /* the piece before hole j (or the rest, past the last hole) */
          int64_t end = j < nh && h[j].a < to ? h[j].a : to;
          if (end > from)
            {
              Iv piece = { from, end };
              if (add_clipped (ix, n, &piece, 1, from, end) != 0)
                return -1;
            }
          if (j >= nh || h[j].a >= to)
            break;
          from = h[j].b;
        }
    }
  return 0;
}

/* Another thread's collections in the gap (seconds, what they add to the
 * n intervals of ix->scratch already counted, which they join): their time
 * outside the rank's waits, capped to the time the training thread was
 * blocked in the gap where the counters say it (neither on a CPU nor
 * runnable: gap - ON_CPU - RUN_DELAY growth).  The rule's why is in
 * pp-why-runtime.h. */
static double
other_gc (PpWhyRuntimeIndex *ix, const RankIx *x, size_t *n, int64_t a, int64_t b, int64_t ca, int64_t cb,
          double share, double len)
{
  double before = measure (ix->scratch, *n);
  if (x->n_other_gc == 0)
    return 0;
  if (add_clipped_outside (ix, n, x->other_gc, x->n_other_gc, ca, cb, x->wait, x->n_wait) != 0)
    return -1;
  *n = merge (ix->scratch, *n);
  double g = (measure (ix->scratch, *n) - before) * 1e-9;
  if (measurable (x->smp[0], x->n_smp[0], a, b) && measurable (x->smp[2], x->n_smp[2], a, b))
    {
      double blocked = len - growth (x->smp[0], x->n_smp[0], a, b, share)
                       - growth (x->smp[2], x->n_smp[2], a, b, share);
      g = pp_why_capped (g, blocked);
    }
  return g;
}

/* Rule 1 over the gap [a, b] of rank x (its edges; INT64_MIN/MAX none),
 * clipped to [lo, hi] (non-empty): parts in seconds. */
PpStatus
pp_why_gap_parts (PpWhyRuntimeIndex *ix, const RankIx *x, int64_t a, int64_t b, int64_t lo, int64_t hi,
           double *parts, PpError *err)
{
  int64_t ca = a > lo ? a : lo, cb = b < hi ? b : hi;
  double len = ((double) cb - (double) ca) * 1e-9;
  double share = a != INT64_MIN && b != INT64_MAX && b > a
                 ? ((double) cb - (double) ca) / ((double) b - (double) a) : 0;
  double left = len, other = 0;
  size_t n = 0;

  memset (parts, 0, PP_WHY_N_RUNTIME_PARTS * sizeof *parts);
  /* GC first (a pause placed in time), then the run delay's growth (an
   * amount without a place: a thread descheduled inside a GC pause counts
   * once, as the pause), then each host kind: what it adds to the union of
   * those before it */
  for (int k = 0; k < N_HOST; k++)
    {
      if (k == 1)
        {
          parts[PP_WHY_RT_DESCHEDULED] = pp_why_capped (growth (x->smp[0], x->n_smp[0], a, b, share), left);
          left -= parts[PP_WHY_RT_DESCHEDULED];
        }
      double before = measure (ix->scratch, n);
      if (add_clipped (ix, &n, x->host[k], x->n_host[k], ca, cb) != 0)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      n = merge (ix->scratch, n);
      double p = pp_why_capped ((measure (ix->scratch, n) - before) * 1e-9, left);
      parts[PP_WHY_RT_GC + k] = p;
      left -= p;
      if (k == 0)
        {
          /* then the other threads' collections: gc too, but never the
           * training thread's time on a CPU (host_other below) */
          double o = other_gc (ix, x, &n, a, b, ca, cb, share, len);
          if (o < 0)
            return pp_error_set (err, PP_ENOMEM, "out of memory");
          other = pp_why_capped (o, left);
          parts[PP_WHY_RT_GC] += other;
          left -= other;
        }
    }
  parts[PP_WHY_RT_PROBE] = pp_why_capped (growth (x->smp[1], x->n_smp[1], a, b, share), left);
  left -= parts[PP_WHY_RT_PROBE];
  /* the kernels after the host union in the scratch (both disjoint lists) */
  size_t nh = n;
  if (add_clipped (ix, &n, x->kern, x->n_kern, ca, cb) != 0)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  /* and the local waits (the rank's own device busy in a receive:
   * pp_why_wait_is_local), the union of the two (an NCCL receive's
   * kernel covers its local wait) */
  if (x->n_local > 0)
    {
      if (add_clipped (ix, &n, x->local, x->n_local, ca, cb) != 0)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      if (n > nh)
        n = nh + merge (ix->scratch + nh, n - nh);
    }
  /* (no pointer arithmetic on a scratch never grown: NULL + 0 is undefined) */
  double kern = n > nh ? measure (ix->scratch + nh, n - nh) : 0;
  parts[PP_WHY_RT_USER_KERNELS] = pp_why_capped (kern * 1e-9, left);
  left -= parts[PP_WHY_RT_USER_KERNELS];
  /* the device idle while the host was in the calls that launched its
   * next work, less what a host part or a kernel already holds */
  n = merge (ix->scratch, n);
  double covered = measure (ix->scratch, n);
  size_t nc = n;
  if (add_launches (ix, &n, x, a, b, ca, cb) != 0)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  if (n > nc)
    {
      n = merge (ix->scratch, n);
      parts[PP_WHY_RT_LAUNCH_GAP] = pp_why_capped ((measure (ix->scratch, n) - covered) * 1e-9, left);
      left -= parts[PP_WHY_RT_LAUNCH_GAP];
    }
  /* the thread's time on a CPU across the gap beyond what the named host
   * parts, the probe and the launch already hold (each of those ran on
   * it, or was a pause of it: counted once; another thread's collection
   * did not run on it); measured time only, so unattributed shrinks by
   * nothing guessed */
  double named = parts[PP_WHY_RT_PROBE] + parts[PP_WHY_RT_LAUNCH_GAP] - other;
  for (int k = 0; k < N_HOST; k++)
    named += parts[PP_WHY_RT_GC + k];
  parts[PP_WHY_RT_HOST_OTHER] = pp_why_capped (growth (x->smp[2], x->n_smp[2], a, b, share) - named, left);
  left -= parts[PP_WHY_RT_HOST_OTHER];
  parts[PP_WHY_RT_UNATTRIBUTED] = left > 0 ? left : 0;
  return PP_OK;
}

PpStatus
pp_why_each_gap (PpWhyRuntimeIndex *ix, int r, int64_t lo, int64_t hi, PpWhyGapFn fn, void *user,
                 PpError *err)
{
  const RankIx *x = &ix->r[r];
  double parts[PP_WHY_N_RUNTIME_PARTS];
  PpStatus st;
  /* gap g lies between work g - 1 and work g; the first that ends after lo */
  size_t g = pp_why_first_ending_after (x->work, x->n_work, lo);
  for (; g <= x->n_work; g++)
    {
      int64_t a = g > 0 ? x->work[g - 1].b : INT64_MIN;
      int64_t b = g < x->n_work ? x->work[g].a : INT64_MAX;
      if (a >= hi)
        break;
      int64_t ca = a > lo ? a : lo, cb = b < hi ? b : hi;
      if (cb <= ca)
        continue;
      if ((st = pp_why_gap_parts (ix, x, a, b, lo, hi, parts, err)) != PP_OK
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
  /* the one rank only: the host lane asks per row, every frame */
  PpWhyRuntimeIndex *ix = index_build (spans, n_spans, counters, n_counters, rank + 1, rank, NULL, NULL, err);
  if (ix == NULL)
    return PP_ENOMEM;
  GapList l = { 0 };
  PpStatus st = pp_why_each_gap (ix, rank, from_ns, to_ns, collect_gap, &l, err);
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
