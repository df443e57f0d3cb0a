/* pp-why-waits.c — each collective's wait for the slowest replica of a
 * job of replicas (pp_why_replica_waits): Why's replica_late, and the
 * measured bubble's idle inside a collective (pp_analysis_steps' waits).
 * Its own file, in the analysis library: the timeline's model reads the
 * same waits for the bubble and needs nothing else of the runtime. */
#include "pp-why.h"

#include <stdlib.h>

typedef struct {
  size_t  i;
  int32_t step, rank, kind, stage, replica;
  int32_t ord;      /* the k-th such span of its replica's rank in the step */
  int64_t start;
} Coll;

static int
cmp_coll_replica (const void *a, const void *b)
{
  const Coll *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->replica != y->replica) return x->replica < y->replica ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

static int
same_collective (const Coll *x, const Coll *y)
{
  return x->step == y->step && x->rank == y->rank && x->kind == y->kind && x->stage == y->stage
         && x->ord == y->ord;
}

static int
cmp_coll_ord (const void *a, const void *b)
{
  const Coll *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->ord != y->ord) return x->ord < y->ord ? -1 : 1;
  return (x->replica > y->replica) - (x->replica < y->replica);
}

/* A collective the replicas of a pipeline rank meet in: the gradients'
 * reduction and the parameters' all-gather (RESHARD frees memory, and
 * WAIT_REDUCE_GRAD waits for a reduction begun before: neither is where
 * the replicas meet). */
static int
is_collective (int kind)
{
  return kind == PP_SPAN_UNSHARD || kind == PP_SPAN_REDUCE_GRAD;
}

int
pp_why_replica_waits (const PpSpan *spans, const int32_t *replica, size_t n, int64_t *wait_ns, int32_t *of)
{
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    {
      wait_ns[i] = 0;
      of[i] = -1;
      m += is_collective (spans[i].kind) && replica[i] >= 0 && spans[i].step >= 0
           && spans[i].end_ns >= spans[i].start_ns;
    }
  Coll *c = malloc ((m ? m : 1) * sizeof *c);
  if (c == NULL)
    return -1;
  m = 0;
  for (size_t i = 0; i < n; i++)
    if (is_collective (spans[i].kind) && replica[i] >= 0 && spans[i].step >= 0
        && spans[i].end_ns >= spans[i].start_ns)
      c[m++] = (Coll) { i, spans[i].step, spans[i].rank, spans[i].kind, spans[i].stage, replica[i], 0,
                        spans[i].start_ns };
  qsort (c, m, sizeof *c, cmp_coll_replica);
  for (size_t j = 1; j < m; j++)
    if (c[j].step == c[j - 1].step && c[j].rank == c[j - 1].rank && c[j].kind == c[j - 1].kind
        && c[j].stage == c[j - 1].stage && c[j].replica == c[j - 1].replica)
      c[j].ord = c[j - 1].ord + 1;
  qsort (c, m, sizeof *c, cmp_coll_ord);
  for (size_t j = 0; j < m;)
    {
      size_t e = j + 1, late = j;
      for (; e < m && same_collective (&c[e], &c[j]); e++)
        if (c[e].start > c[late].start)
          late = e;
      for (size_t k = j; e - j > 1 && k < e; k++)
        {
          const PpSpan *sp = &spans[c[k].i];
          int64_t w;
          if (__builtin_sub_overflow (c[late].start, c[k].start, &w) || w <= 0)
            continue;
          int64_t len = sp->end_ns - sp->start_ns;
          wait_ns[c[k].i] = w < len ? w : len;
          of[c[k].i] = c[late].replica;
        }
      j = e;
    }
  free (c);
  return 0;
}
