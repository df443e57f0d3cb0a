/* pp-timeline-model-stats.c — the numbers the model gives over its spans:
 * a rank's busy, wait and bubble over a window, the planned bubble, and
 * the counted steps and bubbles by the one analysis (pp-analysis.h), over
 * the median copy in a job of replicas. */
#include "pp-timeline-model-internal.h"

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

/* A place by its copy's key, then rank, then place order: a copy's
 * processes together (one pass over them all, not one a copy). */
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

/* The counted steps of the median copy of a job of replicas (the one the
 * why analysis reads its steps, path and costs from: pp_why_analyse_replicas,
 * by step length, the lower of two middles), into out; its replica's
 * place (dp ...) into *which.  0 when m has no replicas or no copy has a
 * whole step (out cleared), else its counted steps. */
static int
median_copy_steps (const PpTimelineModel *m, PpAnalysisSteps *out, int32_t which[PP_TRACE_MESH_DIMS - 1])
{
  int np = pp_timeline_model_n_places (m), n_copies = 0, ok = 0;
  memset (out, 0, sizeof *out);
  if (m->is_view || np < 2 || m->n_ranks <= 0)
    return 0;
  Copy *c = calloc ((size_t) np, sizeof *c);
  int *order = malloc ((size_t) np * sizeof *order);
  const PpSpan **rows = calloc ((size_t) m->n_ranks, sizeof *rows);
  size_t *n = calloc ((size_t) m->n_ranks, sizeof *n);
  KeyedPlace *kp = malloc ((size_t) np * sizeof *kp);
  int k = 0;
  if (c == NULL || order == NULL || rows == NULL || n == NULL || kp == NULL)
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
      memcpy (c[n_copies++].key, kp[i].key, sizeof c[0].key);
  if (n_copies < 2)
    goto out;
  for (int j = 0, a = 0, b; j < n_copies; j++, a = b)
    {
      for (b = a; b < np && cmp_place_key (kp[b].key, kp[a].key) == 0; b++)
        ;
      memset (rows, 0, (size_t) m->n_ranks * sizeof *rows);
      memset (n, 0, (size_t) m->n_ranks * sizeof *n);
      for (int x = a; x < b; x++)
        if (kp[x].rank >= 0 && kp[x].rank < m->n_ranks)
          rows[kp[x].rank] = pp_timeline_model_place_spans (m, kp[x].i, &n[kp[x].rank]);
      c[j].replica = j;
      if (pp_analysis_steps (rows, n, m->n_ranks, m->n_ranks, 0, &c[j].a, NULL) == PP_OK && c[j].a.n_steps > 0)
        order[k++] = j;
    }
  double *lens = k > 0 ? malloc ((size_t) k * sizeof *lens) : NULL;
  int32_t *keys = k > 0 ? malloc ((size_t) k * sizeof *keys) : NULL;
  int pick = -1;
  if (lens != NULL && keys != NULL)
    {
      for (int i = 0; i < k; i++)
        lens[i] = c[order[i]].a.median_step, keys[i] = c[order[i]].replica;
      pick = pp_analysis_median_copy (lens, keys, k);   /* the rule Why picks by */
    }
  free (lens);
  free (keys);
  if (pick >= 0)
    {
      int med = order[pick];
      *out = c[med].a;
      memset (&c[med].a, 0, sizeof c[med].a);
      memcpy (which, c[med].key, sizeof c[med].key);
      ok = out->n_steps;
    }
out:
  for (int j = 0; c != NULL && j < n_copies; j++)
    pp_analysis_steps_clear (&c[j].a);
  free (kp);
  free (c);
  free (order);
  free (rows);
  free (n);
  return ok;
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
      ok = pp_analysis_steps (rows, n, m->n_ranks, m->n_ranks, 0, out, NULL) == PP_OK;
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
