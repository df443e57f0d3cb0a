/* pp-analysis.c — which steps count, the median step and the measured
 * bubble: the rule every view reads (pp-analysis.h says it). */
#include "pp-analysis.h"

#include <limits.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *
pp_analysis_plan_label (PpAnalysisPlan plan)
{
  switch (plan)
    {
    case PP_ANALYSIS_PLAN_CLOSED_FORM:
      return "closed form (F=1, B=2)";
    case PP_ANALYSIS_PLAN_UNIT_COSTS:
      return "plan at unit costs";
    case PP_ANALYSIS_PLAN_MEASURED_COSTS:
    default:
      return "plan at measured costs";
    }
}

PpAnalysisPlan
pp_analysis_plan_of_backend (const char *backend)
{
  /* `schedule --trace` and `schedule --serve` describe their runs so: the
   * simulator at F=1, B=2; every other writer times its plan by what it measured */
  return backend != NULL && strcmp (backend, "simulated") == 0 ? PP_ANALYSIS_PLAN_UNIT_COSTS
                                                              : PP_ANALYSIS_PLAN_MEASURED_COSTS;
}

size_t
pp_analysis_pick_steps (const int32_t *steps, size_t n, int32_t lowest, size_t *first)
{
  size_t f = 0;
  if (lowest == INT32_MIN && n > 0)
    lowest = steps[0];
  /* the run's first step warms up: left out unless it is all there is */
  if (n > 1 && steps[0] == lowest)
    f = 1;
  if (n - f > PP_ANALYSIS_STEPS)
    f = n - PP_ANALYSIS_STEPS;
  *first = f;
  return n - f;
}


/* b - a in ns as a double: exact where the difference fits an int64 (a
 * difference of two large times, such as wall-clock ns, loses nothing),
 * and no signed overflow on hostile times (9e18 - -9e18). */
static double
span_ns (int64_t a, int64_t b)
{
  int64_t d;
  if (!__builtin_sub_overflow (b, a, &d))
    return (double) d;
  return (double) b - (double) a;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

double
pp_analysis_median (double *v, size_t n)
{
  if (n == 0)
    return 0;
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static _Thread_local const double *copy_len;   /* qsort has no user data (a thread each: the app analyses on a worker while it draws) */
static _Thread_local const int32_t *copy_key;

static int
cmp_copy (const void *a, const void *b)
{
  int x = *(const int *) a, y = *(const int *) b;
  if (copy_len[x] != copy_len[y])
    return copy_len[x] < copy_len[y] ? -1 : 1;
  return (copy_key[x] > copy_key[y]) - (copy_key[x] < copy_key[y]);
}

int
pp_analysis_median_copy (const double *len, const int32_t *key, int n)
{
  int *order = n > 0 ? malloc ((size_t) n * sizeof *order) : NULL;
  if (order == NULL)
    return -1;
  for (int i = 0; i < n; i++)
    order[i] = i;
  copy_len = len;
  copy_key = key;
  qsort (order, (size_t) n, sizeof *order, cmp_copy);
  int med = order[(n - 1) / 2];
  free (order);
  return med;
}

char *
pp_analysis_format_percent (char *buf, size_t size, double fraction, int decimals)
{
  if (!isfinite (fraction) || fraction < -0.5)
    {
      snprintf (buf, size, "\u2013");
      return buf;
    }
  double v = 100.0 * fraction;
  /* what rounds to zero prints as 0, never -0 */
  if (v < 0 && v > -0.5 * pow (10, -decimals))
    v = 0;
  snprintf (buf, size, "%.*f%%", decimals, v + 0.0);
  return buf;
}

void
pp_analysis_steps_clear (PpAnalysisSteps *a)
{
  if (a == NULL)
    return;
  free (a->steps);
  free (a->length);
  free (a->bubble);
  memset (a, 0, sizeof *a);
}

/* Fills out's steps, lengths, median and bubbles from a table. */
static PpStatus
finish (const int32_t *steps, const double *length, const double *bubble, size_t n, int n_ranks,
        PpAnalysisSteps *out, PpError *err)
{
  double *tmp = NULL;
  memset (out, 0, sizeof *out);
  out->n_ranks = n_ranks;
  out->steps = malloc ((n ? n : 1) * sizeof *out->steps);
  out->length = malloc ((n ? n : 1) * sizeof *out->length);
  out->bubble = malloc ((size_t) (n_ranks > 0 ? n_ranks : 1) * sizeof *out->bubble);
  tmp = malloc ((n ? n : 1) * sizeof *tmp);
  if (out->steps == NULL || out->length == NULL || out->bubble == NULL || tmp == NULL)
    {
      free (tmp);
      pp_analysis_steps_clear (out);
      return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  out->n_steps = (int) n;
  if (n > 0)
    {
      memcpy (out->steps, steps, n * sizeof *steps);
      memcpy (out->length, length, n * sizeof *length);
      memcpy (tmp, length, n * sizeof *tmp);
      out->median_step = pp_analysis_median (tmp, n);
    }
  /* the mean over the ranks with a bubble (a rank of which the trace
   * holds no work has none: -1, "–") */
  int with = 0;
  for (int r = 0; r < n_ranks; r++)
    {
      for (size_t i = 0; i < n; i++)
        tmp[i] = bubble[i * (size_t) n_ranks + (size_t) r];
      out->bubble[r] = n > 0 && tmp[0] >= 0 ? pp_analysis_median (tmp, n) : -1;
      if (out->bubble[r] >= 0)
        out->bubble_mean += out->bubble[r], with++;
    }
  out->bubble_mean = with > 0 ? out->bubble_mean / with : -1;
  free (tmp);
  return PP_OK;
}

PpStatus
pp_analysis_steps_of_table (const int32_t *steps, const double *length, const double *bubble, size_t n,
                            int n_ranks, PpAnalysisSteps *out, PpError *err)
{
  size_t first;
  size_t k = pp_analysis_pick_steps (steps, n, INT32_MIN, &first);
  return finish (steps + first, length + first, bubble + first * (size_t) n_ranks, k, n_ranks, out, err);
}

/* ---- from spans ----------------------------------------------------------- */

typedef struct {
  int32_t step;
  long    n;        /* blocks */
  int64_t lo, hi;   /* first block start, last block end */
} StepAcc;

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

static long
find_step (const StepAcc *s, size_t n, int32_t step)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (s[mid].step < step)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo < n && s[lo].step == step ? (long) lo : -1;
}

typedef struct {
  const PpSpan *s;
  long          k;      /* the counted step's index */
  int64_t       wait;   /* its wait for a slower replica (waits[][]), ns */
} Picked;

static int
cmp_picked (const void *a, const void *b)
{
  const Picked *x = a, *y = b;
  if (x->k != y->k)
    return x->k < y->k ? -1 : 1;
  if (x->s->rank != y->s->rank)
    return x->s->rank < y->s->rank ? -1 : 1;
  return (x->s->start_ns > y->s->start_ns) - (x->s->start_ns < y->s->start_ns);
}

#define FOR_SPANS(sp)                                              \
  for (int row_ = 0; row_ < n_rows; row_++)                        \
    for (size_t i_ = 0; i_ < n_in[row_]; i_++)                     \
      for (const PpSpan *sp = &rows[row_][i_]; sp != NULL; sp = NULL)

/* FOR_SPANS' span's wait for a slower replica: 0 without waits */
#define SPAN_WAIT() (waits != NULL && waits[row_] != NULL && waits[row_][i_] > 0 ? waits[row_][i_] : 0)

/* The union of [s0, s1) added to a running union of intervals that come
 * by start: *open, [*a, *b) the interval being joined, *total the rest. */
static void
union_step (int64_t s0, int64_t s1, int *open, int64_t *a, int64_t *b, double *total)
{
  if (*open && s0 <= *b)
    {
      if (s1 > *b) *b = s1;
      return;
    }
  if (*open)
    *total += span_ns (*a, *b);
  *a = s0;
  *b = s1;
  *open = 1;
}

static int
is_block (const PpSpan *sp, int n_ranks)
{
  return pp_span_kind_is_block (sp->kind) && sp->step >= 0 && sp->rank >= 0 && sp->rank < n_ranks
         && sp->end_ns >= sp->start_ns;
}

/* A span that bounds its step and is busy in it: any work (pp-analysis.h,
 * the whole step). */
static int
is_step_work (const PpSpan *sp, int n_ranks)
{
  return pp_analysis_span_counts (sp->kind) && sp->step >= 0 && sp->rank >= 0 && sp->rank < n_ranks
         && sp->end_ns >= sp->start_ns;
}

int
pp_analysis_span_counts (int kind)
{
  return pp_span_kind_is_work (kind);
}

PpStatus
pp_analysis_steps (const PpSpan *const *rows, const size_t *n_in, const int64_t *const *waits, int n_rows,
                   int n_ranks, long n_compute, PpAnalysisSteps *out, PpError *err)
{
  int32_t *nums = NULL, *whole = NULL;
  StepAcc *acc = NULL;
  Picked *pk = NULL;
  double *len = NULL, *bub = NULL;
  bool *held = NULL;
  size_t n_blocks = 0, n_acc = 0, n_whole = 0, first = 0, n_pk = 0, k;
  long fullest = 0;
  PpStatus st = PP_OK;

  memset (out, 0, sizeof *out);
  if (n_ranks <= 0)
    return finish (NULL, NULL, NULL, 0, 0, out, err);
  FOR_SPANS (sp)
    n_blocks += is_block (sp, n_ranks);
  nums = malloc ((n_blocks ? n_blocks : 1) * sizeof *nums);
  if (nums == NULL)
    goto oom;
  n_blocks = 0;
  FOR_SPANS (sp)
    if (is_block (sp, n_ranks))
      nums[n_blocks++] = sp->step;
  qsort (nums, n_blocks, sizeof *nums, cmp_i32);
  acc = malloc ((n_blocks ? n_blocks : 1) * sizeof *acc);
  if (acc == NULL)
    goto oom;
  for (size_t i = 0; i < n_blocks; i++)
    {
      if (n_acc == 0 || acc[n_acc - 1].step != nums[i])
        acc[n_acc++] = (StepAcc) { nums[i], 0, INT64_MAX, INT64_MIN };
      acc[n_acc - 1].n++;
    }
  /* the whole step: every work span of a step that has blocks bounds it
   * (its data-parallel work and optimizer step after the last block too);
   * the run's first step starts at its first block (set-up before it is
   * not a step's) */
  FOR_SPANS (sp)
    if (is_step_work (sp, n_ranks) && find_step (acc, n_acc, sp->step) >= 0)
      {
        StepAcc *a = &acc[find_step (acc, n_acc, sp->step)];
        if (sp->start_ns < a->lo && (a != acc || pp_span_kind_is_block (sp->kind))) a->lo = sp->start_ns;
        if (sp->end_ns > a->hi) a->hi = sp->end_ns;
      }
  for (size_t i = 0; i < n_acc; i++)
    if (acc[i].n > fullest)
      fullest = acc[i].n;
  if (n_compute <= 0)
    n_compute = fullest;
  /* the whole steps, numbers reused: nums is at least n_acc long */
  int32_t lowest = n_acc > 0 ? acc[0].step : INT32_MIN;
  whole = nums;
  for (size_t i = 0; i < n_acc; i++)
    if (acc[i].n == n_compute && acc[i].hi > acc[i].lo)
      acc[n_whole] = acc[i], whole[n_whole++] = acc[i].step;
  k = pp_analysis_pick_steps (whole, n_whole, lowest, &first);
  len = calloc (k ? k : 1, sizeof *len);
  bub = malloc ((k ? k : 1) * (size_t) n_ranks * sizeof *bub);
  if (len == NULL || bub == NULL)
    goto oom;
  /* a rank with no block in a step idles all of it; one with no work in
   * the trace at all (one node's files of a job, a process that recorded
   * nothing) is not measured: -1 */
  held = calloc ((size_t) n_ranks, sizeof *held);
  if (held == NULL)
    goto oom;
  FOR_SPANS (sp)
    if (is_step_work (sp, n_ranks))
      held[sp->rank] = true;
  for (size_t i = 0; i < k * (size_t) n_ranks; i++)
    bub[i] = held[i % (size_t) n_ranks] ? 1.0 : -1.0;
  /* the counted steps' work spans, by step, rank, start */
  const StepAcc *cs = acc + first;
  FOR_SPANS (sp)
    if (is_step_work (sp, n_ranks) && find_step (cs, k, sp->step) >= 0)
      n_pk++;
  pk = malloc ((n_pk ? n_pk : 1) * sizeof *pk);
  if (pk == NULL)
    goto oom;
  n_pk = 0;
  FOR_SPANS (sp)
    if (is_step_work (sp, n_ranks))
      {
        long j = find_step (cs, k, sp->step);
        if (j >= 0)
          pk[n_pk++] = (Picked) { sp, j, SPAN_WAIT () };
      }
  qsort (pk, n_pk, sizeof *pk, cmp_picked);
  for (size_t j = 0; j < k; j++)
    {
      len[j] = span_ns (cs[j].lo, cs[j].hi);
      whole[j] = cs[j].step;
    }
  /* per step and rank: the union of its spans inside the step's window,
   * less its waits for slower replicas inside its data-parallel
   * collectives (at most their union: the transfer stays busy), as Why
   * counts them (replica_late, idle) */
  for (size_t i = 0; i < n_pk;)
    {
      long j = pk[i].k;
      int r = pk[i].s->rank;
      int64_t lo = cs[j].lo, hi = cs[j].hi, a = 0, b = 0, da = 0, db = 0;
      double busy = 0, dp = 0, waited = 0;
      int open = 0, dopen = 0;
      for (; i < n_pk && pk[i].k == j && pk[i].s->rank == r; i++)
        {
          int64_t s0 = pk[i].s->start_ns < lo ? lo : pk[i].s->start_ns;
          int64_t s1 = pk[i].s->end_ns > hi ? hi : pk[i].s->end_ns;
          waited += (double) pk[i].wait;
          if (s1 <= s0)
            continue;
          union_step (s0, s1, &open, &a, &b, &busy);
          if (pp_span_kind_is_dp_comm (pk[i].s->kind))
            union_step (s0, s1, &dopen, &da, &db, &dp);
        }
      if (open)
        busy += span_ns (a, b);
      if (dopen)
        dp += span_ns (da, db);
      busy -= waited < dp ? waited : dp;
      double v = 1.0 - busy / len[j];
      bub[(size_t) j * (size_t) n_ranks + (size_t) r] = v < 0 ? 0 : v;
    }
  st = finish (whole, len, bub, k, n_ranks, out, err);
  goto done;
oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory");
done:
  free (held);
  free (nums);
  free (acc);
  free (pk);
  free (len);
  free (bub);
  return st;
}

char *
pp_analysis_describe_steps (const PpAnalysisSteps *a, char *buf, size_t size)
{
  if (a == NULL || a->n_steps == 0)
    snprintf (buf, size, "no whole step (%s)", PP_ANALYSIS_STEP_RULE);
  else if (a->n_steps == 1)
    snprintf (buf, size, "step %d (1 step: %s)", a->steps[0], PP_ANALYSIS_STEP_RULE);
  else
    snprintf (buf, size, "steps %d\u2013%d (%d steps: %s)", a->steps[0], a->steps[a->n_steps - 1], a->n_steps,
              PP_ANALYSIS_STEP_RULE);
  return buf;
}

void
pp_analysis_write_json_member (FILE *f, const PpAnalysisSteps *a)
{
  fprintf (f, "\"analysis\": {\"step_rule\": \"%s\", \"step_statistic\": \"%s\", \"steps\": [",
           PP_ANALYSIS_STEP_RULE, PP_ANALYSIS_STEP_STATISTIC);
  for (int i = 0; i < a->n_steps; i++)
    fprintf (f, "%s%d", i ? ", " : "", a->steps[i]);
  fprintf (f, "], \"median_step\": %.9g, \"bubble\": [", a->median_step * 1e-9);
  for (int r = 0; r < a->n_ranks; r++)
    fprintf (f, "%s%.6g", r ? ", " : "", a->bubble[r]);
  fprintf (f, "], \"bubble_mean\": %.6g}", a->bubble_mean);
}
