/* pp-why-replicas.c — the Why of a job of several replicas: each replica's
 * pipeline on its own, aggregated per pipeline rank.
 *
 * A data-parallel job runs the pipeline D times (× T tensor ranks, ...).
 * Analysing every replica's spans as if they were one pipeline counts each
 * block D times and mixes one replica's hand-offs with another's.  Here
 * the spans are bucketed by replica, each bucket is a run of its own
 * (pp_why_analyse_run), and the reports are folded per pipeline rank:
 * every rank's row is the median copy's, the replica whose step length is
 * the median (pp_analysis_median_copy: the copy the measured bubble, the
 * steps, the critical path and the costs are read from too, so that Why's
 * idle and the bubble are of one copy), with the least and the most idle
 * of any replica beside it.  One replica reads exactly
 * as pp_why_analyse_run.  No GLib. */
#include "pp-analysis.h"
#include "pp-why.h"
#include "pp-why-private.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  PpWhyReport *rep;
  int          replica;
} Analysed;

static _Thread_local const Analysed *sort_analysed;   /* qsort has no user data; a thread each */
static _Thread_local int sort_rank;

/* By the rank's measured idle, then by replica: the order a median takes. */
static int
cmp_idle (const void *a, const void *b)
{
  const Analysed *x = &sort_analysed[*(const int *) a], *y = &sort_analysed[*(const int *) b];
  double ix = x->rep->idle[sort_rank].measured, iy = y->rep->idle[sort_rank].measured;
  if (ix != iy)
    return ix < iy ? -1 : 1;
  return (x->replica > y->replica) - (x->replica < y->replica);
}

/* The replicas' spans (or counters: items of size bytes), bucketed by
 * replica (-1 last): first[k] .. first[k + 1] in *out of bucket k, k =
 * replica, n_buckets - 1 for -1; an item of a replica past the buckets is
 * left out.  NULL when out of memory. */
static void *
bucket (const void *items, size_t size, const int32_t *replica, size_t n, int n_buckets, size_t *first)
{
  char *out = malloc ((n + 1) * size);
  size_t *fill = malloc (((size_t) n_buckets + 1) * sizeof *fill);
  if (out == NULL || fill == NULL)
    {
      free (out);
      free (fill);
      return NULL;
    }
  memset (first, 0, ((size_t) n_buckets + 1) * sizeof *first);
  for (size_t i = 0; i < n; i++)
    if (replica[i] < n_buckets)
      first[(replica[i] >= 0 ? replica[i] : n_buckets - 1) + 1]++;
  for (int k = 0; k < n_buckets; k++)
    first[k + 1] += first[k];
  memcpy (fill, first, ((size_t) n_buckets + 1) * sizeof *fill);
  for (size_t i = 0; i < n; i++)
    if (replica[i] < n_buckets)
      memcpy (out + size * fill[replica[i] >= 0 ? replica[i] : n_buckets - 1]++,
              (const char *) items + size * i, size);
  free (fill);
  return out;
}

PpStatus
pp_why_analyse_replicas (const PpTraceDescription *desc, const PpWhyPlans *plans, const PpSpan *spans,
                         const int32_t *replica, size_t n, int max_steps, PpWhyReport **out,
                         PpWhyChange *change, PpSchedule **sched_out, PpError *err)
{
  return pp_why_analyse_replicas_counters (desc, plans, spans, replica, n, NULL, NULL, 0, max_steps,
                                           out, change, sched_out, err);
}

PpStatus
pp_why_analyse_replicas_counters (const PpTraceDescription *desc, const PpWhyPlans *plans,
                                  const PpSpan *spans, const int32_t *replica, size_t n,
                                  const PpCounter *counters, const int32_t *counter_replica,
                                  size_t n_counters, int max_steps, PpWhyReport **out,
                                  PpWhyChange *change, PpSchedule **sched_out, PpError *err)
{
  return pp_why_analyse_replicas_named (desc, plans, spans, replica, n, counters, counter_replica, n_counters,
                                        NULL, max_steps, out, change, sched_out, err);
}

PpStatus
pp_why_analyse_replicas_named (const PpTraceDescription *desc, const PpWhyPlans *plans,
                               const PpSpan *spans, const int32_t *replica, size_t n,
                               const PpCounter *counters, const int32_t *counter_replica,
                               size_t n_counters, const PpWhyNames *names, int max_steps,
                               PpWhyReport **out, PpWhyChange *change, PpSchedule **sched_out,
                               PpError *err)
{
  int n_buckets = 0;
  bool any_unplaced = false;
  for (size_t i = 0; replica != NULL && i < n; i++)
    {
      if (replica[i] >= n_buckets)
        n_buckets = replica[i] + 1;
      any_unplaced |= replica[i] < 0;
    }
  n_buckets += any_unplaced;
  if (n_buckets <= 1)
    return pp_why_analyse_run_waits (desc, plans, spans, n, NULL, counters, n_counters, names, max_steps, out,
                                     change, sched_out, err);

  *out = NULL;
  if (sched_out != NULL)
    *sched_out = NULL;
  size_t *first = malloc (((size_t) n_buckets + 1) * sizeof *first);
  Analysed *got = calloc ((size_t) n_buckets, sizeof *got);
  int *order = malloc (((size_t) n_buckets + 1) * sizeof *order);
  PpSpan *by = first != NULL ? bucket (spans, sizeof *spans, replica, n, n_buckets, first) : NULL;
  /* counters of no known replica cannot be told apart: none */
  size_t *cfirst = calloc ((size_t) n_buckets + 1, sizeof *cfirst);
  PpCounter *cby = cfirst != NULL && counter_replica != NULL && n_counters > 0
    ? bucket (counters, sizeof *counters, counter_replica, n_counters, n_buckets, cfirst) : NULL;
  /* each collective's wait for the latest replica, bucketed alike */
  int64_t *wait = malloc ((n + 1) * sizeof *wait);
  int32_t *wait_of = malloc ((n + 1) * sizeof *wait_of);
  int64_t *wby = NULL;
  int32_t *oby = NULL;
  if (wait != NULL && wait_of != NULL && first != NULL && pp_why_replica_waits (spans, replica, n, wait, wait_of) == 0)
    {
      size_t *tmp = malloc (((size_t) n_buckets + 1) * sizeof *tmp);
      if (tmp != NULL)
        {
          wby = bucket (wait, sizeof *wait, replica, n, n_buckets, tmp);
          oby = bucket (wait_of, sizeof *wait_of, replica, n, n_buckets, tmp);
        }
      free (tmp);
    }
  PpError first_err = { 0 };
  PpStatus st = PP_OK;
  int k = 0;
  PpSchedule *s = NULL;
  if (first == NULL || got == NULL || order == NULL || by == NULL || cfirst == NULL || wby == NULL
      || oby == NULL || (counter_replica != NULL && n_counters > 0 && cby == NULL))
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  /* the schedule once for every replica (a plan of 65,536 actions a rank
   * built 11,000 times took a minute), and a replica without the blocks
   * of a whole step told so in its own spans' time */
  if ((st = pp_why_schedule_of_trace (desc, plans, &s, err)) != PP_OK)
    goto out;
  long n_compute = pp_why_n_compute (s);
  for (int b = 0; b < n_buckets; b++)
    {
      PpError e = { 0 };
      PpWhyReport *rep = NULL;
      int id = b == n_buckets - 1 && any_unplaced ? -1 : b;
      if (first[b + 1] == first[b])
        continue;
      PpWhyReplicaWaits wt = { wby + first[b], oby + first[b] };
      if (pp_why_check_blocks (s, n_compute, by + first[b], first[b + 1] - first[b], &e) != PP_OK
          || pp_why_analyse_spans_waits (s, by + first[b], first[b + 1] - first[b], &wt,
                                         cby != NULL ? cby + cfirst[b] : NULL, cfirst[b + 1] - cfirst[b],
                                         names, max_steps, &rep, &e) != PP_OK)
        {
          if (first_err.status == PP_OK)
            first_err = e;
          continue;
        }
      got[k++] = (Analysed) { rep, id };
    }
  if (k == 0)
    {
      st = pp_error_set (err, first_err.status != PP_OK ? first_err.status : PP_EINVAL, "%s",
                         first_err.msg[0] ? first_err.msg : "no whole step in any replica");
      goto out;
    }

  /* the median replica by step length (pp_analysis_median_copy): its
   * steps, path and costs, and what to change, analysed again with the
   * change asked for */
  double *lens = malloc ((size_t) k * sizeof *lens);
  int32_t *keys = malloc ((size_t) k * sizeof *keys);
  int med = -1;
  if (lens != NULL && keys != NULL)
    {
      for (int i = 0; i < k; i++)
        lens[i] = got[i].rep->length, keys[i] = got[i].replica;
      med = pp_analysis_median_copy (lens, keys, k);
    }
  free (lens);
  free (keys);
  if (med < 0)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  int mb = got[med].replica >= 0 ? got[med].replica : n_buckets - 1;
  PpWhyReport *rep = NULL;
  PpWhyReplicaWaits mwt = { wby + first[mb], oby + first[mb] };
  PpSchedule *taken = s;
  s = NULL;
  if ((st = pp_why_analyse_schedule_waits (desc, taken, by + first[mb], first[mb + 1] - first[mb], &mwt,
                                           cby != NULL ? cby + cfirst[mb] : NULL, cfirst[mb + 1] - cfirst[mb],
                                           names, max_steps, &rep, change, sched_out, err)) != PP_OK)
    goto out;
  int R = rep->ranks;
  rep->n_replicas = k;
  rep->median_replica = got[med].replica;
  rep->idle_replica = malloc (((size_t) R + 1) * sizeof *rep->idle_replica);
  rep->idle_min = malloc (((size_t) R + 1) * sizeof *rep->idle_min);
  rep->idle_max = malloc (((size_t) R + 1) * sizeof *rep->idle_max);
  rep->idle_max_replica = malloc (((size_t) R + 1) * sizeof *rep->idle_max_replica);
  if (rep->idle_replica == NULL || rep->idle_min == NULL || rep->idle_max == NULL || rep->idle_max_replica == NULL)
    {
      pp_why_report_free (rep);
      if (sched_out != NULL)
        {
          pp_schedule_free (*sched_out);
          *sched_out = NULL;
        }
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  /* per pipeline rank: the median copy's row (rep's own), and the spread
   * of the idle over every replica */
  for (int r = 0; r < R; r++)
    {
      int m = 0;
      for (int i = 0; i < k; i++)
        if (got[i].rep->ranks > r)
          order[m++] = i;
      if (m == 0)
        continue;
      sort_analysed = got;
      sort_rank = r;
      qsort (order, (size_t) m, sizeof *order, cmp_idle);
      const Analysed *hi = &got[order[m - 1]];
      rep->idle_replica[r] = got[med].replica;
      rep->idle_min[r] = got[order[0]].rep->idle[r].measured;
      rep->idle_max[r] = hi->rep->idle[r].measured;
      rep->idle_max_replica[r] = hi->replica;
    }
  *out = rep;
out:
  pp_schedule_free (s);
  for (int i = 0; got != NULL && i < k; i++)
    pp_why_report_free (got[i].rep);
  free (got);
  free (order);
  free (first);
  free (by);
  free (cfirst);
  free (cby);
  free (wait);
  free (wait_of);
  free (wby);
  free (oby);
  return st;
}

static _Thread_local const PpTraceProcess *sort_procs;

static int
cmp_pipeline (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_procs[*(const size_t *) a], *y = &sort_procs[*(const size_t *) b];
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return 0;
}

int32_t *
pp_why_replicas_of_spans (const PpTraceProcess *procs, size_t n_procs, const int32_t *span_process, size_t n,
                          PpError *err)
{
  int32_t *at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *at);   /* process -> index in uniq */
  PpTraceProcess *uniq = malloc ((n_procs + 1) * sizeof *uniq);
  size_t *idx = malloc ((n_procs + 1) * sizeof *idx);
  int32_t *rep_of = malloc ((n_procs + 1) * sizeof *rep_of);
  int32_t *out = malloc ((n + 1) * sizeof *out);
  size_t m = 0;
  if (at == NULL || uniq == NULL || idx == NULL || rep_of == NULL || out == NULL)
    {
      free (out);
      out = NULL;
      pp_error_set (err, PP_ENOMEM, "out of memory");
      goto done;
    }
  memset (at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *at);
  for (size_t i = 0; i < n_procs; i++)
    {
      int32_t g = procs[i].process;
      if (at[g] < 0)
        at[g] = (int32_t) m++;
      uniq[at[g]] = procs[i];   /* the last frame of a process holds */
    }
  if (pp_trace_number_unplaced (uniq, m, err) != PP_OK)
    {
      free (out);
      out = NULL;
      goto done;
    }
  for (size_t i = 0; i < m; i++)
    idx[i] = i;
  sort_procs = uniq;
  qsort (idx, m, sizeof *idx, cmp_pipeline);
  int32_t k = -1;
  for (size_t i = 0; i < m; i++)
    {
      if (i == 0 || cmp_pipeline (&idx[i - 1], &idx[i]) != 0)
        k++;
      rep_of[idx[i]] = k;
    }
  for (size_t i = 0; i < n; i++)
    {
      int32_t g = span_process[i];
      out[i] = g >= 0 && g < PP_TRACE_MAX_PROCESSES && at[g] >= 0 ? rep_of[at[g]] : -1;
    }
done:
  free (at);
  free (uniq);
  free (idx);
  free (rep_of);
  return out;
}

void
pp_why_print_replicas (FILE *f, const PpWhyReport *r, double scale, const char *unit)
{
  if (r == NULL || r->n_replicas <= 1 || r->idle_min == NULL)
    return;
  /* a copy is a place off the pipeline axis (dp, tp, cp, ep): a replica
   * of a job of replicas, a tensor rank of a job of tensor ranks */
  fprintf (f, "over %d copies of the pipeline (its replicas and tensor ranks, numbered by dp, then tp, cp, ep), "
           "each analysed on its own: every rank's row, the path and the steps are copy "
           "%d's (the median step length); idle spread a rank:\n",
           r->n_replicas, r->median_replica);
  for (int q = 0; q < r->ranks; q++)
    fprintf (f, "  rank %d: idle %.2f %s (copy %d), min %.2f %s, max %.2f %s (copy %d)\n", q,
             r->idle[q].measured * scale, unit, r->idle_replica[q], r->idle_min[q] * scale, unit,
             r->idle_max[q] * scale, unit, r->idle_max_replica[q]);
}

/* ---- the median rule, for other analyses ---------------------------------- */

static _Thread_local const double  *median_value;
static _Thread_local const int32_t *median_tie;

static int
cmp_median (const void *a, const void *b)
{
  int i = *(const int *) a, j = *(const int *) b;
  if (median_value[i] != median_value[j])
    return median_value[i] < median_value[j] ? -1 : 1;
  int32_t ti = median_tie != NULL ? median_tie[i] : i, tj = median_tie != NULL ? median_tie[j] : j;
  return (ti > tj) - (ti < tj);
}

int
pp_why_median_index (const double *value, const int32_t *tie, int n)
{
  if (n <= 0)
    return -1;
  int *order = malloc ((size_t) n * sizeof *order);
  if (order == NULL)
    return 0;
  for (int i = 0; i < n; i++)
    order[i] = i;
  median_value = value;
  median_tie = tie;
  qsort (order, (size_t) n, sizeof *order, cmp_median);
  int m = order[(n - 1) / 2];
  free (order);
  return m;
}
