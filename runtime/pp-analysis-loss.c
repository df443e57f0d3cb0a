/* pp-analysis-loss.c — the job's loss (pp-analysis-loss.h has the rule). */
#include "pp-analysis-loss.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One replica's values of one step and kind. */
typedef struct {
  int32_t step;
  int32_t replica;
  double  sum;
  long    n;
} Entry;

typedef struct {
  Entry  *e;        /* sorted by (step, replica) */
  size_t  n, cap;
  int32_t *replicas;   /* sorted, distinct */
  size_t  n_replicas, cap_replicas;
} Series;

struct PpAnalysisLoss {
  Series s[2];   /* 0: LOSS, 1: LOSS_PART */
};

/* Unplaced processes' own numbers sit below every dp index. */
#define UNPLACED_BASE (-1000000)

PpAnalysisLoss *
pp_analysis_loss_new (void)
{
  return calloc (1, sizeof (PpAnalysisLoss));
}

void
pp_analysis_loss_free (PpAnalysisLoss *a)
{
  if (a == NULL)
    return;
  for (int k = 0; k < 2; k++)
    {
      free (a->s[k].e);
      free (a->s[k].replicas);
    }
  free (a);
}

static const Series *
headline (const PpAnalysisLoss *a)
{
  return a->s[1].n > 0 ? &a->s[1] : &a->s[0];
}

/* The first entry at or after (step, replica). */
static size_t
lower (const Series *s, int32_t step, int32_t replica)
{
  size_t lo = 0, hi = s->n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      const Entry *e = &s->e[mid];
      if (e->step < step || (e->step == step && e->replica < replica))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static int
add_replica (Series *s, int32_t replica)
{
  size_t lo = 0, hi = s->n_replicas;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (s->replicas[mid] < replica)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < s->n_replicas && s->replicas[lo] == replica)
    return 0;
  if (s->n_replicas == s->cap_replicas)
    {
      size_t nc = s->cap_replicas ? 2 * s->cap_replicas : 8;
      int32_t *r = realloc (s->replicas, nc * sizeof *r);
      if (r == NULL)
        return -1;
      s->replicas = r;
      s->cap_replicas = nc;
    }
  memmove (s->replicas + lo + 1, s->replicas + lo, (s->n_replicas - lo) * sizeof *s->replicas);
  s->replicas[lo] = replica;
  s->n_replicas++;
  return 0;
}

int
pp_analysis_loss_add (PpAnalysisLoss *a, const PpCounter *c, int32_t replica)
{
  if (a == NULL || c == NULL || (c->kind != PP_COUNTER_LOSS && c->kind != PP_COUNTER_LOSS_PART) || c->step < 0
      || !isfinite (c->value))
    return 0;
  Series *s = &a->s[c->kind == PP_COUNTER_LOSS_PART];
  if (replica < 0)
    replica = UNPLACED_BASE;   /* one replica of its own */
  size_t at = lower (s, c->step, replica);
  if (at < s->n && s->e[at].step == c->step && s->e[at].replica == replica)
    {
      s->e[at].sum += c->value;
      s->e[at].n++;
      return 1;
    }
  if (add_replica (s, replica) != 0)
    return -1;
  if (s->n == s->cap)
    {
      size_t nc = s->cap ? 2 * s->cap : 64;
      Entry *e = realloc (s->e, nc * sizeof *e);
      if (e == NULL)
        return -1;
      s->e = e;
      s->cap = nc;
    }
  memmove (s->e + at + 1, s->e + at, (s->n - at) * sizeof *s->e);
  s->e[at] = (Entry) { c->step, replica, c->value, 1 };
  s->n++;
  return 1;
}

int
pp_analysis_loss_kind (const PpAnalysisLoss *a)
{
  return a != NULL && a->s[1].n > 0 ? PP_COUNTER_LOSS_PART : PP_COUNTER_LOSS;
}

int
pp_analysis_loss_n_replicas (const PpAnalysisLoss *a)
{
  return a != NULL ? (int) headline (a)->n_replicas : 0;
}

/* The headline of the step whose entries start at e[at]; *next past them. */
static double
step_value (const Series *s, int part, size_t at, size_t *next)
{
  size_t j = at;
  double sum = 0;
  for (; j < s->n && s->e[j].step == s->e[at].step; j++)
    sum += s->e[j].sum / (double) s->e[j].n;
  *next = j;
  if (j - at != s->n_replicas)
    return NAN;
  return part ? sum : sum / (double) s->n_replicas;
}

double
pp_analysis_loss_at (const PpAnalysisLoss *a, int32_t step)
{
  if (a == NULL)
    return NAN;
  const Series *s = headline (a);
  size_t at = lower (s, step, INT32_MIN), next;
  if (at >= s->n || s->e[at].step != step)
    return NAN;
  return step_value (s, s == &a->s[1], at, &next);
}

size_t
pp_analysis_loss_series (const PpAnalysisLoss *a, int32_t *step, double *value, size_t max)
{
  size_t k = 0;
  if (a == NULL)
    return 0;
  const Series *s = headline (a);
  for (size_t at = 0, next; at < s->n && k < max; at = next)
    {
      double v = step_value (s, s == &a->s[1], at, &next);
      if (isnan (v))
        continue;
      if (step != NULL)
        step[k] = s->e[at].step;
      if (value != NULL)
        value[k] = v;
      k++;
    }
  return k;
}

size_t
pp_analysis_loss_replica_series (const PpAnalysisLoss *a, int k, int32_t *replica, int32_t *step, double *value,
                                 size_t max)
{
  size_t m = 0;
  if (a == NULL)
    return 0;
  const Series *s = headline (a);
  if (k < 0 || (size_t) k >= s->n_replicas)
    return 0;
  int32_t id = s->replicas[k];
  if (replica != NULL)
    *replica = id < 0 ? -1 : id;
  for (size_t i = 0; i < s->n && m < max; i++)
    if (s->e[i].replica == id)
      {
        if (step != NULL)
          step[m] = s->e[i].step;
        if (value != NULL)
          value[m] = s->e[i].sum / (double) s->e[i].n;
        m++;
      }
  return m;
}

char *
pp_analysis_loss_describe (const PpAnalysisLoss *a, char *buf, size_t size)
{
  double first = NAN, last = NAN;
  size_t n = 0;
  buf[0] = '\0';
  if (a == NULL)
    return buf;
  const Series *s = headline (a);
  for (size_t at = 0, next; at < s->n; at = next)
    {
      double v = step_value (s, s == &a->s[1], at, &next);
      if (isnan (v))
        continue;
      if (n++ == 0)
        first = v;
      last = v;
    }
  if (n == 0)
    return buf;
  int R = (int) s->n_replicas;
  if (R <= 1)
    snprintf (buf, size, "loss: %.6g -> %.6g (%zu value%s, as the job computed it)", first, last, n,
              n == 1 ? "" : "s");
  else
    snprintf (buf, size, "loss: %.6g -> %.6g (%zu value%s, a step's the %s over %d replicas, as the job reduces it)", first,
              last, n, n == 1 ? "" : "s", s == &a->s[1] ? "sum" : "mean", R);
  return buf;
}
