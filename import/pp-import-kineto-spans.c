/* pp-import-kineto-spans.c — what turns a rank's events into spans: their
 * orders, a launch's and the running block's lookup, a block's compute told
 * from the waits its label holds, the receives' arrivals, the steps'
 * extents, an action's span kind. */
#include "pp-import-kineto-private.h"

#include <stdlib.h>

int
cmp_ev_start (const void *a, const void *b)
{
  const Ev *x = a, *y = b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  /* the longer (outer) range first */
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1;
  return x->what - y->what;
}

int
cmp_op_start (const void *a, const void *b)
{
  const Op *x = a, *y = b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end;
}

int
cmp_launch (const void *a, const void *b)
{
  const Launch *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

const Launch *
find_launch (const RankData *rd, int64_t corr)
{
  size_t lo = 0, hi = rd->n_launch;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rd->launch[mid].corr < corr)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo < rd->n_launch && rd->launch[lo].corr == corr ? &rd->launch[lo] : NULL;
}

/* The rank's block (an index into blocks, sorted by start) running at t,
 * -1 when none. */
long
block_at (const Ev *const *blocks, size_t n, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (blocks[mid]->start <= t)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo == 0)
    return -1;
  /* blocks do not overlap, but a bad file may make them: look back a little */
  for (size_t k = lo, tries = 0; k > 0 && tries < 4; k--, tries++)
    if (blocks[k - 1]->start <= t && t <= blocks[k - 1]->end)
      return (long) (k - 1);
  return -1;
}

/* The compute of block e, a label's range, into [*start, *end).  PyTorch's
 * label holds more than the stage's call: the wait for its input, until
 * ready (when the receive it waited for was done) or the end of the
 * communication calls of its thread it opens with (*waited then), and
 * GPipe's the sends it closes with.  So the block starts when its waits
 * are over and, where communication calls of its thread close it, ends
 * with its last operator (cpu_op, any thread: a backward's may run on
 * autograd's), else with the label: what pipescope's own runs time, the
 * stage's call, with its Python around the operators. */
void
compute_extent (const RankData *rd, const Ev *e, int64_t ready, OpWalk *walk, int64_t *start,
                int64_t *end, bool *waited)
{
  int64_t cur = ready > e->start && ready < e->end ? ready : e->start;
  int64_t last = INT64_MIN, last_comm = INT64_MIN;
  bool computed = false;
  size_t lo = 0, hi = rd->n_op, k;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rd->op[mid].start < e->start)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < walk->floor)
    lo = walk->floor;
  for (k = lo; k < rd->n_op && rd->op[k].start <= e->end; k++)
    {
      const Op *o = &rd->op[k];
      if (o->comm)
        {
          if (o->tid != e->tid)
            continue;
          if (!computed)
            {
              /* a leading wait: the work starts after it */
              if (o->end > cur && o->end < e->end)
                cur = o->end;
            }
          else if (o->start > last_comm)
            last_comm = o->start;
          continue;
        }
      /* an operator of the work (not those before its input was there:
       * GPipe's receive buffers) */
      if (o->end > e->end || (!computed && o->start < cur))
        continue;
      computed = true;
      if (o->end > last)
        last = o->end;
    }
  if (walk->prev_end > walk->floor)
    walk->floor = walk->prev_end;
  walk->prev_end = k;
  *waited = cur > e->start;
  *start = cur;
  *end = computed && last_comm >= last ? last : e->end;
  if (*start >= *end)
    {
      *start = e->start;
      *end = e->end;
      *waited = false;
    }
}

bool
is_block_of (const Ev *e, bool use_pp)
{
  return e->what == EV_BLOCK && (e->gpipe != 0) != use_pp;
}

int
span_kind_of (int act)
{
  switch (act)
    {
    case PP_ACT_F: return PP_SPAN_F;
    case PP_ACT_B: return PP_SPAN_B;
    case PP_ACT_I: return PP_SPAN_I;
    case PP_ACT_W: return PP_SPAN_W;
    case PP_ACT_OVERLAP_F_B: return PP_SPAN_OVERLAP_F_B;
    case PP_ACT_SEND_F: return PP_SPAN_SEND_F;
    case PP_ACT_RECV_F: return PP_SPAN_RECV_F;
    case PP_ACT_SEND_B: return PP_SPAN_SEND_B;
    case PP_ACT_RECV_B: return PP_SPAN_RECV_B;
    case PP_ACT_UNSHARD: return PP_SPAN_UNSHARD;
    case PP_ACT_RESHARD: return PP_SPAN_RESHARD;
    case PP_ACT_REDUCE_GRAD: return PP_SPAN_REDUCE_GRAD;
    case PP_ACT_WAIT_REDUCE_GRAD: return PP_SPAN_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

bool
push_span (PpSpan **spans, size_t *n, size_t *cap, const PpSpan *sp)
{
  if (*n == *cap)
    {
      size_t nc = *cap ? *cap * 2 : 4096;
      PpSpan *g = realloc (*spans, nc * sizeof *g);
      if (g == NULL)
        return false;
      *spans = g;
      *cap = nc;
    }
  (*spans)[(*n)++] = *sp;
  return true;
}

int
cmp_arrival (const void *a, const void *b)
{
  const Arrival *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->posted < y->posted ? -1 : x->posted > y->posted;
}

/* stage < 4096, micro-batch < 2^20 (the import's bounds) */
uint64_t
recv_key (int kind, int stage, int mb)
{
  return ((uint64_t) (kind + 1) << 40) | ((uint64_t) (stage & 0xfff) << 20) | (uint64_t) (mb & 0xfffff);
}

/* The arrival of the receive of key posted last at or before t (the one a
 * block starting at t waited for: not by step, which a label before a
 * step's first block may not have yet), INT64_MIN when none. */
int64_t
arrival_for (const Arrival *arr, size_t n, uint64_t key, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (arr[mid].key < key || (arr[mid].key == key && arr[mid].posted <= t))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo > 0 && arr[lo - 1].key == key ? arr[lo - 1].arrival : INT64_MIN;
}

static int
cmp_step_extent (const void *a, const void *b)
{
  const StepExtent *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* ext[n], one entry a block, folded in place into one a step (ascending,
 * from its first block's start to its last one's end); their count. */
size_t
step_extents (StepExtent *ext, size_t n)
{
  size_t m = 0;
  if (n > 1)
    qsort (ext, n, sizeof *ext, cmp_step_extent);
  for (size_t k = 0; k < n; k++)
    {
      if (m > 0 && ext[m - 1].step == ext[k].step)
        {
          if (ext[k].start < ext[m - 1].start) ext[m - 1].start = ext[k].start;
          if (ext[k].end > ext[m - 1].end) ext[m - 1].end = ext[k].end;
          continue;
        }
      ext[m++] = ext[k];
    }
  return m;
}
