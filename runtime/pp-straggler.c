/* pp-straggler.c — stragglers across the mesh, and what each costs (see
 * pp-straggler.h for the rule).  No GLib. */
#include "pp-straggler.h"
#include "pp-schedule-private.h"
#include "pp-schedule-rules.h"
#include "pp-why-private.h"
#include "pp-why-runtime.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const cause_names[PP_STRAGGLER_N_CAUSES] = {
  "none", "slower compute", "descheduled", "gc", "host work", "dp comm",
};

const char *
pp_straggler_cause_name (int cause)
{
  return cause >= 0 && cause < PP_STRAGGLER_N_CAUSES ? cause_names[cause] : NULL;
}

void
pp_straggler_report_free (PpStragglerReport *r)
{
  if (r == NULL)
    return;
  free (r->procs);
  free (r->steps);
  free (r->step_time);
  free (r->step_median);
  free (r->items);
  free (r);
}

/* ---- places ------------------------------------------------------------------ */

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = a, *y = b;
  static const int order[] = { PP_TRACE_MESH_PP, PP_TRACE_MESH_DP, PP_TRACE_MESH_TP, PP_TRACE_MESH_CP,
                               PP_TRACE_MESH_EP };
  for (int i = 0; i < PP_TRACE_MESH_DIMS; i++)
    if (x->coord[order[i]] != y->coord[order[i]])
      return x->coord[order[i]] < y->coord[order[i]] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* Copies share pp, tp, cp and ep: the same place in other replicas. */
static bool
same_copy_place (const PpTraceProcess *x, const PpTraceProcess *y)
{
  return x->coord[PP_TRACE_MESH_PP] == y->coord[PP_TRACE_MESH_PP]
         && x->coord[PP_TRACE_MESH_TP] == y->coord[PP_TRACE_MESH_TP]
         && x->coord[PP_TRACE_MESH_CP] == y->coord[PP_TRACE_MESH_CP]
         && x->coord[PP_TRACE_MESH_EP] == y->coord[PP_TRACE_MESH_EP];
}

static _Thread_local const PpTraceProcess *sort_kept;   /* qsort has no user data; a thread each */

static int
cmp_copy_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_kept[*(const int32_t *) a], *y = &sort_kept[*(const int32_t *) b];
  static const int order[] = { PP_TRACE_MESH_PP, PP_TRACE_MESH_TP, PP_TRACE_MESH_CP, PP_TRACE_MESH_EP,
                               PP_TRACE_MESH_DP };
  for (int i = 0; i < PP_TRACE_MESH_DIMS; i++)
    if (x->coord[order[i]] != y->coord[order[i]])
      return x->coord[order[i]] < y->coord[order[i]] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* ---- the replay ---------------------------------------------------------------- */

typedef struct {
  int           n_rep, ranks_max;
  PpWhyReport **rep;      /* [n_rep], NULL where not analysed */
  PpSchedule  **sched;    /* [n_rep]: shared, or NULL where not analysed */
  PpSchedule   *shared;   /* the job's schedule, built once for every replica */
  int           shared_ok;   /* 1: its structure checked, 0 not yet, -1 refused */
  PpCostModel **base;     /* [n_rep] measured costs, host time spread in */
  double       *span;     /* [n_rep] replayed step of each replica */
  int32_t      *slot;     /* [n_rep * ranks_max]: the process (index) at (replica, rank), -1 */
} Replay;

static double
simulate (const PpSchedule *s, const PpCostModel *c)
{
  PpSimulation *sim = NULL;
  PpError e = { 0 };
  /* the schedule's structure was checked once (pp_straggler_analyse) */
  if (pp_simulate_checked (s, c, &sim, &e) != PP_OK)
    return NAN;
  double m = sim->makespan;
  pp_simulation_free (sim);
  return m;
}

static PpCostModel *
cost_copy (const PpCostModel *c)
{
  PpCostModel *o = pp_cost_model_new_uniform (c->n_stages, 0, 0, 0, 0);
  if (o == NULL)
    return NULL;
  size_t n = (size_t) c->n_stages;
  memcpy (o->f, c->f, n * sizeof *o->f);
  memcpy (o->b, c->b, n * sizeof *o->b);
  memcpy (o->w, c->w, n * sizeof *o->w);
  memcpy (o->comm, c->comm, n * sizeof *o->comm);
  if (c->dp != NULL)
    memcpy (o->dp, c->dp, n * PP_COST_N_DP * sizeof *o->dp);
  return o;
}

static int
compute_actions (const PpSchedule *s, int r)
{
  int n = 0;
  for (int i = 0; i < s->rank[r].n_actions; i++)
    {
      int k = s->rank[r].actions[i].kind;
      n += k == PP_ACT_F || k == PP_ACT_B || k == PP_ACT_I || k == PP_ACT_W || k == PP_ACT_OVERLAP_F_B;
    }
  return n;
}

/* The stages of rank r in replica k take replica km's costs. */
static void
take_stages (PpCostModel *dst, const PpSchedule *s, int r, const PpCostModel *src)
{
  for (int st = 0; st < s->n_stages && st < src->n_stages; st++)
    if (s->stage_rank[st] == r)
      {
        dst->f[st] = src->f[st];
        dst->b[st] = src->b[st];
        dst->w[st] = src->w[st];
        for (int k = 0; k < PP_COST_N_DP; k++)
          dst->dp[k * dst->n_stages + st] = src->dp[k * src->n_stages + st];
      }
}

/* The job's replayed step with the processes in mask[] running like their
 * median copies: the longest replica. */
static double
replay (const Replay *rp, const PpStragglerProcess *procs, size_t n_procs, const bool *mask)
{
  double job = 0;
  for (int k = 0; k < rp->n_rep; k++)
    {
      if (rp->rep[k] == NULL)
        continue;
      double m = rp->span[k];
      bool touched = false;
      for (int r = 0; r < rp->ranks_max && !touched; r++)
        {
          int32_t p = rp->slot[k * rp->ranks_max + r];
          touched = p >= 0 && mask[p] && procs[p].median_copy != p;
        }
      if (touched)
        {
          PpCostModel *c = cost_copy (rp->base[k]);
          if (c != NULL)
            {
              for (int r = 0; r < rp->ranks_max; r++)
                {
                  int32_t p = rp->slot[k * rp->ranks_max + r];
                  if (p < 0 || !mask[p] || procs[p].median_copy == p)
                    continue;
                  int km = procs[procs[p].median_copy].replica;
                  if (km >= 0 && km < rp->n_rep && rp->base[km] != NULL
                      && rp->base[km]->n_stages == c->n_stages)
                    take_stages (c, rp->sched[k], r, rp->base[km]);
                }
              double v = simulate (rp->sched[k], c);
              if (!isnan (v))
                m = v;
              pp_cost_model_free (c);
            }
        }
      (void) n_procs;
      if (m > job)
        job = m;
    }
  return job;
}

/* ---- the analysis ---------------------------------------------------------------- */

static const PpWhyStep *
step_of (const PpWhyReport *rep, int32_t step)
{
  for (int i = 0; rep != NULL && i < rep->n_steps; i++)
    if (rep->steps[i].step == step)
      return &rep->steps[i];
  return NULL;
}

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

/* A process's time in one step by kind, and by cause's measure. */
static void
times_of (const PpWhyStep *st, int r, double kind[PP_STRAGGLER_N_KINDS], double cause[PP_STRAGGLER_N_CAUSES])
{
  const PpWhyIdle *w = &st->idle[r];
  const double *p = w->runtime_parts;
  double host_work = p[PP_WHY_RT_HOST_SCHEDULE] + p[PP_WHY_RT_HOST_LOSS] + p[PP_WHY_RT_HOST_DATA]
                     + p[PP_WHY_RT_HOST_ZERO_GRAD] + p[PP_WHY_RT_HOST_OTHER];
  double compute = st->length - w->measured;
  if (compute < 0)
    compute = 0;
  kind[PP_STRAGGLER_COMPUTE] = compute;
  kind[PP_STRAGGLER_DP_COMM] = w->dp_comm;
  kind[PP_STRAGGLER_TP_COMM] = 0;
  kind[PP_STRAGGLER_HOST] = p[PP_WHY_RT_DESCHEDULED] + p[PP_WHY_RT_GC] + host_work;
  cause[PP_STRAGGLER_CAUSE_NONE] = 0;
  cause[PP_STRAGGLER_CAUSE_COMPUTE] = compute;
  cause[PP_STRAGGLER_CAUSE_DESCHEDULED] = p[PP_WHY_RT_DESCHEDULED];
  cause[PP_STRAGGLER_CAUSE_GC] = p[PP_WHY_RT_GC];
  cause[PP_STRAGGLER_CAUSE_HOST] = host_work;
  cause[PP_STRAGGLER_CAUSE_DP_COMM] = w->dp_comm;
}

static double
total_time (const double kind[PP_STRAGGLER_N_KINDS])
{
  double t = 0;
  for (int k = 0; k < PP_STRAGGLER_N_KINDS; k++)
    t += kind[k];
  return t;
}

static int
cmp_item (const void *a, const void *b)
{
  const PpStragglerItem *x = a, *y = b;
  if (x->saving_s != y->saving_s)
    return x->saving_s > y->saving_s ? -1 : 1;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  return (x->proc > y->proc) - (x->proc < y->proc);
}

/* Each analysed replica's Why report and schedule, from its own spans
 * (with their waits for slower replicas) and counters. */
static PpStatus
analyse_each (const PpTraceDescription *desc, const PpWhyPlans *plans, const PpSpan *spans,
              const int32_t *replica, size_t n, const PpCounter *counters, const int32_t *crep,
              size_t n_counters, const PpWhyNames *names, Replay *rp, PpError *err)
{
  int64_t *wait = malloc ((n + 1) * sizeof *wait);
  int32_t *of = malloc ((n + 1) * sizeof *of);
  PpSpan *bs = malloc ((n + 1) * sizeof *bs);
  int64_t *bw = malloc ((n + 1) * sizeof *bw);
  int32_t *bo = malloc ((n + 1) * sizeof *bo);
  PpCounter *bc = malloc ((n_counters + 1) * sizeof *bc);
  PpStatus st = PP_OK;
  PpError first_err = { 0 };
  int got = 0;

  if (wait == NULL || of == NULL || bs == NULL || bw == NULL || bo == NULL || bc == NULL
      || pp_why_replica_waits (spans, replica, n, wait, of) != 0)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  /* the spans and counters bucketed by replica once (a counting sort) */
  size_t *first = calloc ((size_t) rp->n_rep + 2, sizeof *first), *cfirst = calloc ((size_t) rp->n_rep + 2,
                                                                                       sizeof *cfirst);
  if (first == NULL || cfirst == NULL)
    {
      free (first);
      free (cfirst);
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    if (replica[i] >= 0 && replica[i] < rp->n_rep)
      first[replica[i] + 1]++;
  for (size_t i = 0; crep != NULL && i < n_counters; i++)
    if (crep[i] >= 0 && crep[i] < rp->n_rep)
      cfirst[crep[i] + 1]++;
  for (int k = 0; k < rp->n_rep; k++)
    {
      first[k + 1] += first[k];
      cfirst[k + 1] += cfirst[k];
    }
  for (size_t i = 0; i < n; i++)
    if (replica[i] >= 0 && replica[i] < rp->n_rep)
      {
        size_t j = first[replica[i]]++;
        bs[j] = spans[i];
        bw[j] = wait[i];
        bo[j] = of[i];
      }
  for (size_t i = 0; crep != NULL && i < n_counters; i++)
    if (crep[i] >= 0 && crep[i] < rp->n_rep)
      bc[cfirst[crep[i]]++] = counters[i];
  /* the schedule once for every replica (as pp_why_analyse_replicas: a
   * plan of 65,536 actions a rank built 11,000 times took a minute), and a
   * replica without the blocks of a whole step told so from its own spans */
  if (pp_why_schedule_of_trace (desc, plans, &rp->shared, &first_err) != PP_OK)
    rp->shared = NULL;
  long n_compute = rp->shared != NULL ? pp_why_n_compute (rp->shared) : 0;
  /* each first[k] now ends bucket k: bucket k is [first[k - 1], first[k]) */
  for (int k = 0; rp->shared != NULL && k < rp->n_rep; k++)
    {
      size_t lo = k > 0 ? first[k - 1] : 0, m = first[k] - lo;
      size_t clo = k > 0 ? cfirst[k - 1] : 0, mc = cfirst[k] - clo;
      if (m == 0)
        continue;
      PpWhyReplicaWaits wt = { bw + lo, bo + lo };
      PpError e = { 0 };
      if (pp_why_check_blocks (rp->shared, n_compute, bs + lo, m, &e) != PP_OK
          || pp_why_analyse_spans_waits (rp->shared, bs + lo, m, &wt, bc + clo, mc, names, 0, &rp->rep[k], &e) != PP_OK)
        {
          rp->rep[k] = NULL;
          rp->sched[k] = NULL;
          if (first_err.status == PP_OK)
            first_err = e;
          continue;
        }
      rp->sched[k] = rp->shared;
      got++;
    }
  free (first);
  free (cfirst);
  if (got == 0)
    st = pp_error_set (err, first_err.status != PP_OK ? first_err.status : PP_EINVAL, "%s",
                       first_err.msg[0] ? first_err.msg : "no whole step in any replica");
out:
  free (wait);
  free (of);
  free (bs);
  free (bw);
  free (bo);
  free (bc);
  return st;
}

PpStatus
pp_straggler_analyse (const PpTraceDescription *desc, const PpWhyPlans *plans, const PpSpan *spans,
                      const int32_t *span_process, size_t n, const PpCounter *counters,
                      const int32_t *counter_process, size_t n_counters, const PpTraceProcess *procs_in,
                      size_t n_procs_in, PpStragglerReport **out, PpError *err)
{
  return pp_straggler_analyse_named (desc, plans, spans, span_process, n, counters, counter_process, n_counters,
                                     procs_in, n_procs_in, NULL, out, err);
}

PpStatus
pp_straggler_analyse_named (const PpTraceDescription *desc, const PpWhyPlans *plans, const PpSpan *spans,
                            const int32_t *span_process, size_t n, const PpCounter *counters,
                            const int32_t *counter_process, size_t n_counters,
                            const PpTraceProcess *procs_in, size_t n_procs_in, const PpWhyNames *names,
                            PpStragglerReport **out, PpError *err)
{
  *out = NULL;
  if (span_process == NULL || n_procs_in < 2)
    return PP_OK;

  PpStatus st = PP_OK;
  PpTraceProcess *pl = malloc ((n_procs_in + 1) * sizeof *pl);
  int32_t *ids = malloc ((n_procs_in + 1) * sizeof *ids);
  int32_t *at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *at);
  int32_t *replica = NULL, *crep = NULL, *prep = NULL;
  Replay rp = { 0 };
  PpStragglerReport *r = NULL;
  double *vals = NULL;
  int32_t *grp = NULL;
  bool *mask = NULL;
  size_t m = 0;

  if (pl == NULL || ids == NULL || at == NULL)
    goto oom;
  /* one frame a process (its last), numbered where unplaced, by place */
  memset (at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *at);
  for (size_t i = 0; i < n_procs_in; i++)
    {
      int32_t g = procs_in[i].process;
      if (g < 0 || g >= PP_TRACE_MAX_PROCESSES)
        continue;
      if (at[g] < 0)
        at[g] = (int32_t) m++;
      pl[at[g]] = procs_in[i];
    }
  if ((st = pp_trace_number_unplaced (pl, m, err)) != PP_OK)
    goto done;
  qsort (pl, m, sizeof *pl, cmp_place);
  for (size_t i = 0; i < m; i++)
    ids[i] = pl[i].process;
  replica = pp_why_replicas_of_spans (procs_in, n_procs_in, span_process, n, err);
  prep = pp_why_replicas_of_spans (procs_in, n_procs_in, ids, m, err);
  if (replica == NULL || prep == NULL)
    goto oom;
  if (counters != NULL && counter_process != NULL && n_counters > 0
      && (crep = pp_why_replicas_of_spans (procs_in, n_procs_in, counter_process, n_counters, err)) == NULL)
    goto oom;
  for (size_t i = 0; i < m; i++)
    if (prep[i] + 1 > rp.n_rep)
      rp.n_rep = prep[i] + 1;
  if (rp.n_rep < 2)
    goto done;   /* one pipeline: no copies */

  rp.rep = calloc ((size_t) rp.n_rep, sizeof *rp.rep);
  rp.sched = calloc ((size_t) rp.n_rep, sizeof *rp.sched);
  rp.base = calloc ((size_t) rp.n_rep, sizeof *rp.base);
  rp.span = calloc ((size_t) rp.n_rep, sizeof *rp.span);
  if (rp.rep == NULL || rp.sched == NULL || rp.base == NULL || rp.span == NULL)
    goto oom;
  if ((st = analyse_each (desc, plans, spans, replica, n, counters, crep, crep != NULL ? n_counters : 0, names,
                          &rp, err)) != PP_OK)
    goto done;
  for (int k = 0; k < rp.n_rep; k++)
    if (rp.rep[k] != NULL && rp.rep[k]->ranks > rp.ranks_max)
      rp.ranks_max = rp.rep[k]->ranks;

  /* the steps every analysed replica has */
  r = calloc (1, sizeof *r);
  if (r == NULL)
    goto oom;
  int k0 = -1;
  for (int k = 0; k < rp.n_rep; k++)
    if (rp.rep[k] != NULL && (k0 < 0 || rp.rep[k]->n_steps < rp.rep[k0]->n_steps))
      k0 = k;
  r->steps = malloc (((size_t) rp.rep[k0]->n_steps + 1) * sizeof *r->steps);
  if (r->steps == NULL)
    goto oom;
  for (int i = 0; i < rp.rep[k0]->n_steps; i++)
    {
      int32_t s = rp.rep[k0]->steps[i].step;
      bool all = true;
      for (int k = 0; k < rp.n_rep && all; k++)
        all = rp.rep[k] == NULL || step_of (rp.rep[k], s) != NULL;
      if (all)
        r->steps[r->n_steps++] = s;
    }
  qsort (r->steps, (size_t) r->n_steps, sizeof *r->steps, cmp_i32);
  int S = r->n_steps;

  /* the processes of analysed replicas, their times a step */
  r->procs = calloc (m + 1, sizeof *r->procs);
  size_t np = 0;
  PpTraceProcess *kept = malloc ((m + 1) * sizeof *kept);
  rp.slot = malloc (((size_t) rp.n_rep * (size_t) (rp.ranks_max > 0 ? rp.ranks_max : 1) + 1) * sizeof *rp.slot);
  if (r->procs == NULL || kept == NULL || rp.slot == NULL)
    {
      free (kept);
      goto oom;
    }
  memset (rp.slot, 0xff, ((size_t) rp.n_rep * (size_t) (rp.ranks_max > 0 ? rp.ranks_max : 1)) * sizeof *rp.slot);
  for (size_t i = 0; i < m; i++)
    {
      int k = prep[i], rk = pl[i].coord[PP_TRACE_MESH_PP];
      if (k < 0 || k >= rp.n_rep || rp.rep[k] == NULL || rk < 0 || rk >= rp.rep[k]->ranks
          || rp.slot[k * rp.ranks_max + rk] >= 0)
        continue;
      PpStragglerProcess *p = &r->procs[np];
      p->process = pl[i].process;
      p->pp = rk;
      p->dp = pl[i].coord[PP_TRACE_MESH_DP];
      p->tp = pl[i].coord[PP_TRACE_MESH_TP];
      p->replica = k;
      memcpy (p->host, pl[i].host, sizeof p->host);
      p->host[sizeof p->host - 1] = '\0';
      rp.slot[k * rp.ranks_max + rk] = (int32_t) np;
      kept[np++] = pl[i];
    }
  r->n_procs = np;
  r->step_time = malloc ((np * (size_t) S + 1) * sizeof *r->step_time);
  r->step_median = malloc ((np * (size_t) S + 1) * sizeof *r->step_median);
  vals = malloc ((np + 1) * sizeof *vals);
  grp = malloc ((np + 1) * sizeof *grp);
  mask = calloc (np + 1, sizeof *mask);
  if (r->step_time == NULL || r->step_median == NULL || vals == NULL
      || grp == NULL || mask == NULL)
    {
      free (kept);
      goto oom;
    }
  for (size_t p = 0; p < np; p++)
    {
      PpStragglerProcess *q = &r->procs[p];
      int counted = 0;
      for (int s = 0; s < S; s++)
        {
          const PpWhyStep *ws = step_of (rp.rep[q->replica], r->steps[s]);
          double kind[PP_STRAGGLER_N_KINDS], cause[PP_STRAGGLER_N_CAUSES];
          if (ws == NULL)
            {
              r->step_time[p * S + s] = NAN;
              continue;
            }
          times_of (ws, q->pp, kind, cause);
          r->step_time[p * S + s] = total_time (kind);
          for (int k = 0; k < PP_STRAGGLER_N_KINDS; k++)
            q->time[k] += kind[k];
          for (int c = 0; c < PP_STRAGGLER_N_CAUSES; c++)
            q->parts[c] += cause[c];
          counted++;
        }
      for (int k = 0; counted > 0 && k < PP_STRAGGLER_N_KINDS; k++)
        q->time[k] /= counted;
      for (int c = 0; counted > 0 && c < PP_STRAGGLER_N_CAUSES; c++)
        q->parts[c] /= counted;
    }

  /* copies: the same pp, tp, cp, ep place; the median copy by time a step */
  /* the processes in order of copy place (pp, tp, cp, ep), then dp: each
   * run of one place is a group of copies */
  for (size_t i = 0; i < np; i++)
    grp[i] = (int32_t) i;
  sort_kept = kept;
  qsort (grp, np, sizeof *grp, cmp_copy_place);
  int32_t *tie = malloc ((np + 1) * sizeof *tie);
  if (tie == NULL)
    {
      free (kept);
      goto oom;
    }
  for (size_t a = 0; a < np;)
    {
      size_t e = a + 1;
      while (e < np && same_copy_place (&kept[grp[a]], &kept[grp[e]]))
        e++;
      const int32_t *g = grp + a;
      int n_g = (int) (e - a);
      for (int i = 0; i < n_g; i++)
        {
          vals[i] = total_time (r->procs[g[i]].time);
          tie[i] = r->procs[g[i]].replica;
        }
      int med = g[pp_why_median_index (vals, tie, n_g)];
      for (int i = 0; i < n_g; i++)
        {
          r->procs[g[i]].median_copy = med;
          r->procs[g[i]].n_copies = n_g;
        }
      /* each step's median of the copies' times */
      for (int k = 0; k < S; k++)
        {
          int c = 0;
          for (int i = 0; i < n_g; i++)
            if (!isnan (r->step_time[(size_t) g[i] * S + k]))
              {
                vals[c] = r->step_time[(size_t) g[i] * S + k];
                tie[c++] = r->procs[g[i]].replica;
              }
          double v = c > 0 ? vals[pp_why_median_index (vals, tie, c)] : NAN;
          for (int i = 0; i < n_g; i++)
            r->step_median[(size_t) g[i] * S + k] = v;
        }
      a = e;
    }
  free (tie);
  free (kept);

  /* slowdown and cause */
  for (size_t p = 0; p < np; p++)
    {
      PpStragglerProcess *q = &r->procs[p];
      double own = 0, med = 0;
      for (int s = 0; s < S; s++)
        if (!isnan (r->step_time[p * S + s]) && !isnan (r->step_median[p * S + s]))
          {
            own += r->step_time[p * S + s];
            med += r->step_median[p * S + s];
          }
      q->slowdown = med > 0 ? own / med - 1 : 0;
      const PpStragglerProcess *c = &r->procs[q->median_copy];
      double best = 0;
      q->cause = PP_STRAGGLER_CAUSE_NONE;
      for (int k = PP_STRAGGLER_CAUSE_COMPUTE; k < PP_STRAGGLER_N_CAUSES; k++)
        if (q->parts[k] - c->parts[k] > best)
          {
            best = q->parts[k] - c->parts[k];
            q->cause = k;
          }
    }

  /* the replay: each replica under its measured costs, host time spread */
  for (int k = 0; k < rp.n_rep; k++)
    {
      if (rp.rep[k] == NULL)
        continue;
      /* the shared schedule's structure, checked once */
      if (rp.sched[k] != NULL && rp.shared_ok == 0)
        rp.shared_ok = pp_schedule_check_structure (rp.sched[k], NULL, NULL) == PP_OK ? 1 : -1;
      if (rp.rep[k]->costs == NULL || rp.sched[k] == NULL || rp.shared_ok < 0
          || (rp.base[k] = cost_copy (rp.rep[k]->costs)) == NULL)
        {
          pp_why_report_free (rp.rep[k]);
          rp.rep[k] = NULL;
          continue;
        }
      for (int rk = 0; rk < rp.ranks_max && rk < rp.sched[k]->ranks; rk++)
        {
          int32_t p = rp.slot[k * rp.ranks_max + rk];
          int na = compute_actions (rp.sched[k], rk);
          if (p < 0 || na == 0)
            continue;
          double h = r->procs[p].time[PP_STRAGGLER_HOST] / na;
          for (int s = 0; s < rp.base[k]->n_stages; s++)
            if (rp.sched[k]->stage_rank[s] == rk)
              {
                rp.base[k]->f[s] += h;
                rp.base[k]->b[s] += h;
              }
        }
      rp.span[k] = simulate (rp.sched[k], rp.base[k]);
      if (isnan (rp.span[k]))
        rp.span[k] = 0;
    }
  r->replayed_step = replay (&rp, r->procs, np, mask);
  for (int s = 0; s < S; s++)
    {
      double longest = 0;
      for (int k = 0; k < rp.n_rep; k++)
        {
          const PpWhyStep *ws = step_of (rp.rep[k], r->steps[s]);
          if (ws != NULL && ws->length > longest)
            longest = ws->length;
        }
      r->measured_step += longest / S;
    }

  /* the items: every process, every stage of several processes, every host
   * of several (where there is more than one host) */
  r->items = malloc ((3 * np + 1) * sizeof *r->items);
  if (r->items == NULL)
    goto oom;
  /* each process's host and stage, numbered; a group is a number shared */
  int32_t *host_of = malloc ((np + 1) * sizeof *host_of), *stage_of = malloc ((np + 1) * sizeof *stage_of);
  int32_t *members = malloc ((np + 1) * sizeof *members);
  if (host_of == NULL || stage_of == NULL || members == NULL)
    {
      free (host_of);
      free (stage_of);
      free (members);
      goto oom;
    }
  int n_hosts = 0, n_dp = 0;
  for (size_t p = 0; p < np; p++)
    if (r->procs[p].dp + 1 > n_dp)
      n_dp = r->procs[p].dp + 1;
  /* members[h]: the first process of host h (the hosts are few) */
  for (size_t p = 0; p < np; p++)
    {
      host_of[p] = -1;
      for (int h = 0; h < n_hosts && host_of[p] < 0; h++)
        if (strcmp (r->procs[members[h]].host, r->procs[p].host) == 0)
          host_of[p] = h;
      if (host_of[p] < 0)
        {
          members[n_hosts] = (int32_t) p;
          host_of[p] = n_hosts++;
        }
      stage_of[p] = r->procs[p].pp * n_dp + r->procs[p].dp;
    }
  for (size_t p = 0; p < np; p++)
    {
      mask[p] = true;
      double saving = r->replayed_step - replay (&rp, r->procs, np, mask);
      mask[p] = false;
      r->procs[p].saving_s = saving;
      r->items[r->n_items++] = (PpStragglerItem) { PP_STRAGGLER_GROUP_PROCESS, (int32_t) p, 1, saving };
    }
  for (int group = PP_STRAGGLER_GROUP_STAGE; group <= PP_STRAGGLER_GROUP_HOST; group++)
    {
      const int32_t *id = group == PP_STRAGGLER_GROUP_STAGE ? stage_of : host_of;
      if (group == PP_STRAGGLER_GROUP_HOST && n_hosts < 2)
        continue;
      for (size_t p = 0; p < np; p++)
        {
          bool first_of = true;
          int n_m = 0;
          for (size_t o = 0; o < np && first_of; o++)
            if (id[o] == id[p])
              {
                first_of = o >= p;
                members[n_m++] = (int32_t) o;
              }
          if (!first_of || n_m < 2)
            continue;
          int32_t best = members[0];
          for (int i = 0; i < n_m; i++)
            {
              mask[members[i]] = true;
              if (r->procs[members[i]].saving_s > r->procs[best].saving_s)
                best = members[i];
            }
          double v = replay (&rp, r->procs, np, mask);
          for (int i = 0; i < n_m; i++)
            mask[members[i]] = false;
          r->items[r->n_items++] = (PpStragglerItem) { group, best, n_m, r->replayed_step - v };
        }
    }
  free (host_of);
  free (stage_of);
  free (members);
  memset (mask, 0, np * sizeof *mask);
  qsort (r->items, r->n_items, sizeof *r->items, cmp_item);

  /* the heatmap's size */
  for (size_t p = 0; p < np; p++)
    {
      if (r->procs[p].pp + 1 > r->n_pp)
        r->n_pp = r->procs[p].pp + 1;
      if (r->procs[p].dp + 1 > r->n_dp)
        r->n_dp = r->procs[p].dp + 1;
    }
  *out = r;
  r = NULL;
  goto done;
oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory");
done:
  pp_straggler_report_free (r);
  for (int k = 0; k < rp.n_rep; k++)
    {
      if (rp.rep != NULL)
        pp_why_report_free (rp.rep[k]);
      if (rp.base != NULL)
        pp_cost_model_free (rp.base[k]);
    }
  pp_schedule_free (rp.shared);   /* every sched[k] is it */
  free (rp.rep);
  free (rp.sched);
  free (rp.base);
  free (rp.span);
  free (rp.slot);
  free (pl);
  free (ids);
  free (at);
  free (replica);
  free (crep);
  free (prep);
  free (vals);
  free (grp);
  free (mask);
  return st;
}

/* ---- the heatmap ------------------------------------------------------------ */

int
pp_straggler_heatmap (const PpStragglerReport *r, int32_t from_step, int32_t to_step, double *cell, int32_t *proc)
{
  if (r == NULL)
    return 0;
  size_t nc = (size_t) r->n_pp * (size_t) r->n_dp;
  for (size_t i = 0; i < nc; i++)
    {
      cell[i] = NAN;
      if (proc != NULL)
        proc[i] = -1;
    }
  int counted = 0;
  for (int s = 0; s < r->n_steps; s++)
    counted += r->steps[s] >= from_step && r->steps[s] <= to_step;
  for (size_t p = 0; p < r->n_procs; p++)
    {
      const PpStragglerProcess *q = &r->procs[p];
      double own = 0, med = 0;
      for (int s = 0; s < r->n_steps; s++)
        {
          double a = r->step_time[p * r->n_steps + s], b = r->step_median[p * r->n_steps + s];
          if (r->steps[s] < from_step || r->steps[s] > to_step || isnan (a) || isnan (b))
            continue;
          own += a;
          med += b;
        }
      if (med <= 0)
        continue;
      size_t i = (size_t) q->pp * r->n_dp + q->dp;
      double v = own / med - 1;
      if (isnan (cell[i]) || v > cell[i])
        {
          cell[i] = v;
          if (proc != NULL)
            proc[i] = (int32_t) p;
        }
    }
  return counted;
}

/* ---- reports ------------------------------------------------------------------ */

static void
write_json_string (FILE *f, const char *s)
{
  fputc ('"', f);
  for (; *s; s++)
    {
      unsigned char c = (unsigned char) *s;
      if (c == '"' || c == '\\')
        fprintf (f, "\\%c", c);
      else if (c < 0x20)
        fprintf (f, "\\u%04x", c);
      else
        fputc (c, f);
    }
  fputc ('"', f);
}

void
pp_straggler_print (FILE *f, const PpStragglerReport *r, size_t max_rows, double scale, const char *unit)
{
  if (r == NULL)
    return;
  fprintf (f, "stragglers (each process against its copies in the other replicas; saving: the step\n"
              "replayed with it running like its median copy, %.3f %s a step replayed, %.3f measured):\n",
           r->replayed_step * scale, unit, r->measured_step * scale);
  size_t shown = 0;
  for (size_t i = 0; i < r->n_items && shown < max_rows; i++)
    {
      const PpStragglerItem *it = &r->items[i];
      if (!(it->saving_s > 0))
        break;
      if (shown == 0)
        fprintf (f, "  %-16s %-18s %-16s %8s %14s  %s\n", "process", "place", "host", "slower", "saving/step",
                 "cause");
      const PpStragglerProcess *q = &r->procs[it->proc];
      char who[32], place[48];
      if (it->group == PP_STRAGGLER_GROUP_PROCESS)
        {
          snprintf (who, sizeof who, "%d", (int) q->process);
          snprintf (place, sizeof place, "pp %d dp %d tp %d", q->pp, q->dp, q->tp);
        }
      else if (it->group == PP_STRAGGLER_GROUP_STAGE)
        {
          snprintf (who, sizeof who, "stage (%d procs)", (int) it->n_members);
          snprintf (place, sizeof place, "pp %d dp %d", q->pp, q->dp);
        }
      else
        {
          snprintf (who, sizeof who, "host (%d procs)", (int) it->n_members);
          snprintf (place, sizeof place, "-");
        }
      fprintf (f, "  %-16s %-18s %-16.16s %+7.1f%% %11.3f %s  %s\n", who, place, q->host[0] ? q->host : "?",
               100 * q->slowdown, it->saving_s * scale, unit, pp_straggler_cause_name (q->cause));
      shown++;
    }
  if (shown == 0)
    fprintf (f, "  none: no process's replay with its median copy's costs shortens the step\n");
}

void
pp_straggler_write_json (FILE *f, const PpStragglerReport *r)
{
  fputs ("\"stragglers\": [", f);
  size_t k = 0;
  for (size_t i = 0; r != NULL && i < r->n_items; i++)
    {
      const PpStragglerItem *it = &r->items[i];
      if (it->group != PP_STRAGGLER_GROUP_PROCESS)
        continue;
      const PpStragglerProcess *q = &r->procs[it->proc];
      fprintf (f, "%s\n    {\"process\": %d, \"pp\": %d, \"dp\": %d, \"tp\": %d, \"host\": ", k++ ? "," : "",
               (int) q->process, (int) q->pp, (int) q->dp, (int) q->tp);
      write_json_string (f, q->host);
      fprintf (f, ", \"saving_s\": %.9g, \"cause\": \"%s\", \"slowdown\": %.6g, \"time_s\": {"
                  "\"compute\": %.9g, \"dp_comm\": %.9g, \"tp_comm\": %.9g, \"host\": %.9g}}",
               it->saving_s, pp_straggler_cause_name (q->cause), q->slowdown, q->time[PP_STRAGGLER_COMPUTE],
               q->time[PP_STRAGGLER_DP_COMM], q->time[PP_STRAGGLER_TP_COMM], q->time[PP_STRAGGLER_HOST]);
    }
  fputs (k ? "\n  ]" : "]", f);
  if (r == NULL)
    return;
  fputs (",\n  \"straggler_groups\": [", f);
  k = 0;
  for (size_t i = 0; i < r->n_items; i++)
    {
      const PpStragglerItem *it = &r->items[i];
      if (it->group == PP_STRAGGLER_GROUP_PROCESS)
        continue;
      const PpStragglerProcess *q = &r->procs[it->proc];
      fprintf (f, "%s\n    {\"group\": \"%s\", \"pp\": %d, \"dp\": %d, \"host\": ", k++ ? "," : "",
               it->group == PP_STRAGGLER_GROUP_STAGE ? "stage" : "host", (int) q->pp, (int) q->dp);
      write_json_string (f, q->host);
      fprintf (f, ", \"processes\": %d, \"saving_s\": %.9g}", (int) it->n_members, it->saving_s);
    }
  fputs (k ? "\n  ]" : "]", f);
  fprintf (f, ",\n  \"straggler_step\": {\"measured_s\": %.9g, \"replayed_s\": %.9g}", r->measured_step,
           r->replayed_step);
}
