/* pp-timeline-model-stats.c — the numbers the model gives over its spans:
 * a rank's busy, wait and bubble over a window, the planned bubble, and
 * the counted steps and bubbles by the one analysis (pp-analysis.h), over
 * the median copy in a job of replicas. */
#include "pp-timeline-model-internal.h"
#include "pp-why.h"

#include <stdlib.h>
#include <string.h>

/* Length of the union of [a, b) intervals fed in order of start, clipped
 * to [t0, t1). */
typedef struct {
  int64_t t0, t1, cs, ce;
  double  sum;
  int     open;
} Union;

static void
union_add (Union *u, int64_t a, int64_t b)
{
  if (a < u->t0)
    a = u->t0;
  if (b > u->t1)
    b = u->t1;
  if (b <= a)
    return;
  if (u->open && a <= u->ce)
    {
      if (b > u->ce)
        u->ce = b;
      return;
    }
  if (u->open)
    u->sum += (double) (u->ce - u->cs);
  u->cs = a;
  u->ce = b;
  u->open = 1;
}

static double
union_total (Union *u)
{
  return u->sum + (u->open ? (double) (u->ce - u->cs) : 0.0);
}

void
pp_timeline_model_rank_stats (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1,
                              PpTimelineRankStats *out)
{
  Union busy = { t0, t1, 0, 0, 0, 0 }, wait = { t0, t1, 0, 0, 0, 0 };
  const Rank *rk;
  double len = t1 > t0 ? (double) (t1 - t0) : 0;

  if (out == NULL)
    return;
  memset (out, 0, sizeof *out);
  out->bubble = len > 0 ? 1 : 0;
  out->planned_bubble = -1;
  out->peak_activation_bytes = -1;
  out->peak_inflight = -1;
  if (m == NULL || rank < 0 || rank >= m->n_ranks)
    return;
  rk = &m->ranks[rank];
  out->peak_activation_bytes = rk->peak_activation;
  out->peak_inflight = rk->peak_inflight;

  for (size_t i = pp_timeline_model_first_overlapping (m, rank, t0);
       i < rk->n_spans && rk->spans[i].start_ns < t1; i++)
    {
      const PpSpan *s = &rk->spans[i];
      if (pp_span_kind_is_work (s->kind))
        union_add (&busy, s->start_ns, s->end_ns);
      else if (s->kind == PP_SPAN_WAIT)
        union_add (&wait, s->start_ns, s->end_ns);
    }
  out->busy_ns = union_total (&busy);
  out->wait_ns = union_total (&wait);
  if (len > 0)
    out->bubble = 1.0 - out->busy_ns / len;

  out->planned_bubble = pp_timeline_model_planned_bubble (m, rank, t0, t1);
}

/* A copy of the pipeline in a job of replicas: the processes sharing
 * (dp, tp, cp, ep), one a pipeline rank, numbered as the analysis numbers
 * them (pp_why_replicas_of_spans: densely, in that order). */
typedef struct {
  int32_t         key[PP_TRACE_MESH_DIMS - 1];
  int             replica;
  PpAnalysisSteps a;
} Copy;

static int
cmp_place_key (const void *x, const void *y)
{
  const int32_t *a = x, *b = y;
  for (int d = 0; d < PP_TRACE_MESH_DIMS - 1; d++)
    if (a[d] != b[d])
      return a[d] < b[d] ? -1 : 1;
  return 0;
}

static int
cmp_int32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

/* A place by its copy's key, then rank, then place order: a copy's
 * processes together (one pass over them all, not one a copy: 11,000
 * replicas). */
typedef struct {
  int32_t key[PP_TRACE_MESH_DIMS - 1];
  int32_t rank;
  int     i;
} KeyedPlace;

static int
cmp_keyed_place (const void *x, const void *y)
{
  const KeyedPlace *a = x, *b = y;
  int c = cmp_place_key (a->key, b->key);
  if (c != 0)
    return c;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* The waits for slower copies (pp_why_replica_waits, as Why measures
 * them) of every place's spans, the copies c[n_copies] (sorted keys) the
 * replicas: place i's from (*wait)[off[i]].  0, or -1 out of memory. */
static int
copy_waits (const PpTimelineModel *m, const Copy *c, int n_copies, size_t *off, int64_t **wait)
{
  int np = pp_timeline_model_n_places (m), rc = -1;
  size_t total = 0, got;
  for (int i = 0; i < np; i++)
    {
      off[i] = total;
      pp_timeline_model_place_spans (m, i, &got);
      total += got;
    }
  PpSpan *all = malloc ((total + 1) * sizeof *all);
  int32_t *copy = malloc ((total + 1) * sizeof *copy), *of = malloc ((total + 1) * sizeof *of);
  *wait = malloc ((total + 1) * sizeof **wait);
  if (all == NULL || copy == NULL || of == NULL || *wait == NULL)
    goto out;
  for (int i = 0; i < np; i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      const Copy *at = bsearch (&p->coord[PP_TRACE_MESH_DP], c, (size_t) n_copies, sizeof *c, cmp_place_key);
      const PpSpan *sp = pp_timeline_model_place_spans (m, i, &got);
      if (got > 0)
        memcpy (all + off[i], sp, got * sizeof *sp);
      for (size_t k = 0; k < got; k++)
        copy[off[i] + k] = at != NULL ? (int32_t) (at - c) : -1;
    }
  rc = pp_why_replica_waits (all, copy, total, *wait, of);
out:
  free (all);
  free (copy);
  free (of);
  return rc;
}

/* Every copy of a job of replicas (its distinct places off the pipeline
 * axis, sorted) with its counted steps by the one analysis, its waits for
 * slower copies in its collectives (Why's replica_late) idle as in Why:
 * *out[*n_copies] (a copy without a whole step: n_steps 0), free with
 * copies_free.  0, or -1 for no replicas or out of memory. */
static int
copies_steps (const PpTimelineModel *m, Copy **out, int *n_copies)
{
  int np = pp_timeline_model_n_places (m), nc = 0, rc = -1;
  *out = NULL;
  *n_copies = 0;
  if (m->is_view || np < 2 || m->n_ranks <= 0)
    return -1;
  Copy *c = calloc ((size_t) np, sizeof *c);
  const PpSpan **rows = calloc ((size_t) m->n_ranks, sizeof *rows);
  size_t *n = calloc ((size_t) m->n_ranks, sizeof *n), *off = malloc (((size_t) np + 1) * sizeof *off);
  const int64_t **wrows = calloc ((size_t) m->n_ranks, sizeof *wrows);
  int64_t *wait = NULL;
  KeyedPlace *kp = malloc ((size_t) np * sizeof *kp);
  if (c == NULL || rows == NULL || n == NULL || off == NULL || wrows == NULL || kp == NULL)
    goto out;
  /* the copies' keys, sorted and distinct, each with its places */
  for (int i = 0; i < np; i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      memcpy (kp[i].key, &p->coord[PP_TRACE_MESH_DP], sizeof kp[i].key);
      kp[i].rank = p->rank;
      kp[i].i = i;
    }
  qsort (kp, (size_t) np, sizeof *kp, cmp_keyed_place);
  for (int i = 0; i < np; i++)
    if (i == 0 || cmp_place_key (kp[i].key, kp[i - 1].key) != 0)
      memcpy (c[nc++].key, kp[i].key, sizeof c[0].key);
  if (nc < 2 || copy_waits (m, c, nc, off, &wait) != 0)
    goto out;
  for (int j = 0, a = 0, b; j < nc; j++, a = b)
    {
      for (b = a; b < np && cmp_place_key (kp[b].key, kp[a].key) == 0; b++)
        ;
      memset (rows, 0, (size_t) m->n_ranks * sizeof *rows);
      memset (n, 0, (size_t) m->n_ranks * sizeof *n);
      memset (wrows, 0, (size_t) m->n_ranks * sizeof *wrows);
      /* each rank's lowest place of the copy (the first in kp's order) */
      for (int x = b - 1; x >= a; x--)
        if (kp[x].rank >= 0 && kp[x].rank < m->n_ranks)
          {
            rows[kp[x].rank] = pp_timeline_model_place_spans (m, kp[x].i, &n[kp[x].rank]);
            wrows[kp[x].rank] = wait + off[kp[x].i];
          }
      c[j].replica = j;
      if (pp_analysis_steps (rows, n, wrows, m->n_ranks, m->n_ranks, 0, &c[j].a, NULL) != PP_OK)
        memset (&c[j].a, 0, sizeof c[j].a);
    }
  *out = c;
  *n_copies = nc;
  c = NULL;
  rc = 0;
out:
  free (kp);
  free (c);
  free (rows);
  free (n);
  free (wrows);
  free (off);
  free (wait);
  return rc;
}

static void
copies_free (Copy *c, int n_copies)
{
  for (int j = 0; c != NULL && j < n_copies; j++)
    pp_analysis_steps_clear (&c[j].a);
  free (c);
}

/* The counted steps of the median copy of a job of replicas (the one the
 * why analysis reads its steps, path and costs from: pp_why_analyse_replicas,
 * by step length, the lower of two middles), into out; its replica's
 * place (dp ...) into *which.  0 when m has no replicas or no copy has a
 * whole step (out cleared), else its counted steps. */
static int
median_copy_steps (const PpTimelineModel *m, PpAnalysisSteps *out, int32_t which[PP_TRACE_MESH_DIMS - 1])
{
  Copy *c = NULL;
  int n_copies = 0, k = 0, ok = 0, pick = -1;
  memset (out, 0, sizeof *out);
  if (copies_steps (m, &c, &n_copies) != 0)
    return 0;
  int *order = malloc ((size_t) n_copies * sizeof *order);
  double *lens = malloc ((size_t) n_copies * sizeof *lens);
  int32_t *keys = malloc ((size_t) n_copies * sizeof *keys);
  if (order != NULL && lens != NULL && keys != NULL)
    {
      for (int j = 0; j < n_copies; j++)
        if (c[j].a.n_steps > 0)
          order[k++] = j;
      for (int i = 0; i < k; i++)
        lens[i] = c[order[i]].a.median_step, keys[i] = c[order[i]].replica;
      pick = pp_analysis_median_copy (lens, keys, k);   /* the rule Why picks by */
    }
  if (pick >= 0)
    {
      int med = order[pick];
      *out = c[med].a;
      memset (&c[med].a, 0, sizeof c[med].a);
      memcpy (which, c[med].key, sizeof c[med].key);
      ok = out->n_steps;
    }
  free (order);
  free (lens);
  free (keys);
  copies_free (c, n_copies);
  return ok;
}

int
pp_timeline_model_replica_step_bubbles (const PpTimelineModel *m, int n_ranks, const int32_t *dps, int n_dps,
                                        double *bubble, int *n_steps)
{
  Copy *c = NULL;
  int n_copies = 0, got = 0;
  for (int d = 0; d < n_dps; d++)
    n_steps[d] = 0;
  if (m == NULL || n_dps <= 0 || copies_steps (m, &c, &n_copies) != 0)
    return 0;
  for (int j = 0; j < n_copies; j++)
    {
      const PpAnalysisSteps *a = &c[j].a;
      const int32_t *at = bsearch (&c[j].key[0], dps, (size_t) n_dps, sizeof *dps, cmp_int32);
      int lowest = 1;
      for (int d = 1; d < PP_TRACE_MESH_DIMS - 1; d++)
        lowest &= c[j].key[d] == 0;
      if (!lowest || at == NULL || a->n_steps == 0)
        continue;
      int dp = (int) (at - dps);
      n_steps[dp] = a->n_steps;
      got++;
      for (int r = 0; r < n_ranks; r++)
        bubble[(size_t) dp * (size_t) n_ranks + (size_t) r] = r < a->n_ranks ? a->bubble[r] : -1;
    }
  copies_free (c, n_copies);
  return got;
}

int
pp_timeline_model_analysis_copy (const PpTimelineModel *m, int32_t coord[PP_TRACE_MESH_DIMS])
{
  PpAnalysisSteps a;
  int32_t key[PP_TRACE_MESH_DIMS - 1];
  if (m == NULL || median_copy_steps (m, &a, key) == 0)
    return 0;
  pp_analysis_steps_clear (&a);
  coord[PP_TRACE_MESH_PP] = -1;
  memcpy (&coord[PP_TRACE_MESH_DP], key, sizeof key);
  return 1;
}

void
pp_timeline_model_analysis_rows (const PpTimelineModel *m, const PpSpan **rows, size_t *n)
{
  int32_t coord[PP_TRACE_MESH_DIMS];
  int by_copy = pp_timeline_model_analysis_copy (m, coord);
  for (int r = 0; r < m->n_ranks; r++)
    {
      rows[r] = m->ranks[r].spans;
      n[r] = m->ranks[r].n_spans;
    }
  for (int i = 0; by_copy && i < pp_timeline_model_n_places (m); i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      if (p->rank >= 0 && p->rank < m->n_ranks
          && memcmp (&p->coord[PP_TRACE_MESH_DP], &coord[PP_TRACE_MESH_DP],
                     (PP_TRACE_MESH_DIMS - PP_TRACE_MESH_DP) * sizeof *coord) == 0)
        rows[p->rank] = pp_timeline_model_place_spans (m, i, &n[p->rank]);
    }
}

int
pp_timeline_model_analysis_dp (const PpTimelineModel *m)
{
  int32_t coord[PP_TRACE_MESH_DIMS];
  return pp_timeline_model_analysis_copy (m, coord) ? coord[PP_TRACE_MESH_DP] : pp_timeline_model_shown_dp (m);
}

/* The counted steps (pp-analysis.h's rule, the schedule not known here:
 * a whole step holds as many blocks as the fullest) over the ranks' rows;
 * a job of replicas: over its median copy's (median_copy_steps). */
int
pp_timeline_model_step_analysis (const PpTimelineModel *m, PpAnalysisSteps *out)
{
  memset (out, 0, sizeof *out);
  if (m == NULL || m->n_ranks <= 0)
    return 0;
  int32_t key[PP_TRACE_MESH_DIMS - 1];
  if (median_copy_steps (m, out, key) > 0)
    return out->n_steps;
  const PpSpan **rows = malloc ((size_t) m->n_ranks * sizeof *rows);
  size_t *n = malloc ((size_t) m->n_ranks * sizeof *n);
  int ok = 0;
  if (rows != NULL && n != NULL)
    {
      for (int r = 0; r < m->n_ranks; r++)
        {
          rows[r] = m->ranks[r].spans;
          n[r] = m->ranks[r].n_spans;
        }
      ok = pp_analysis_steps (rows, n, NULL, m->n_ranks, m->n_ranks, 0, out, NULL) == PP_OK;
    }
  free (rows);
  free (n);
  return ok ? out->n_steps : 0;
}

/* Each rank's bubble a step by the one analysis (pp-analysis.h). */
static int
compute_step_bubbles (const PpTimelineModel *m, double *bubble)
{
  PpAnalysisSteps a;

  if (m == NULL)
    return 0;
  if (m->row_bubbles != NULL)
    {
      memcpy (bubble, m->row_bubbles, (size_t) m->n_ranks * sizeof *bubble);
      return m->row_bubble_steps;
    }
  for (int r = 0; r < m->n_ranks; r++)
    bubble[r] = -1;
  int n_steps = pp_timeline_model_step_analysis (m, &a);
  for (int r = 0; r < m->n_ranks && n_steps > 0; r++)
    bubble[r] = a.bubble[r];
  pp_analysis_steps_clear (&a);
  return n_steps;
}

/* The answer is kept until the model changes (generation): every frame
 * asks it for the header, at any zoom. */
int
pp_timeline_model_step_bubbles (const PpTimelineModel *m, double *bubble)
{
  PpTimelineModel *mm = (PpTimelineModel *) m;
  int n_steps;

  if (m == NULL)
    return 0;
  if (m->step_cache.bubble != NULL && m->step_cache.generation == m->generation
      && m->step_cache.n_ranks == m->n_ranks)
    {
      memcpy (bubble, m->step_cache.bubble, (size_t) m->n_ranks * sizeof *bubble);
      return m->step_cache.n_steps;
    }
  n_steps = compute_step_bubbles (m, bubble);
  free (mm->step_cache.bubble);
  mm->step_cache.bubble = m->n_ranks > 0 ? malloc ((size_t) m->n_ranks * sizeof *bubble) : NULL;
  if (mm->step_cache.bubble != NULL)
    {
      memcpy (mm->step_cache.bubble, bubble, (size_t) m->n_ranks * sizeof *bubble);
      mm->step_cache.n_ranks = m->n_ranks;
      mm->step_cache.n_steps = n_steps;
      mm->step_cache.generation = m->generation;
    }
  return n_steps;
}

double
pp_timeline_model_planned_bubble (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1)
{
  Union pbusy = { 0 };
  const Rank *rk;
  int64_t ps = INT64_MAX, pe = INT64_MIN;

  if (m == NULL || rank < 0 || rank >= m->n_ranks || m->ranks[rank].n_plan == 0)
    return -1;
  rk = &m->ranks[rank];
  fresh_extents (m);
  /* The plan covers one step: its bubble is taken over the part of the
   * window the plans of all ranks span, so a whole-run window gives the
   * planned bubble of a step (as `info` prints it). */
  ps = m->plan_ps;
  pe = m->plan_pe;
  if (ps < t0)
    ps = t0;
  if (pe > t1)
    pe = t1;
  if (pe <= ps)
    return -1;
  pbusy.t0 = ps;
  pbusy.t1 = pe;
  /* Plan entries of a rank follow each other in time. */
  for (size_t k = 0; k < rk->n_plan; k++)
    if (plan_kind_is_busy (rk->plan[k].kind))
      union_add (&pbusy, rk->plan[k].start_ns, rk->plan[k].end_ns);
  double b = 1.0 - union_total (&pbusy) / (double) (pe - ps);
  return b < 0 ? 0 : b;
}
