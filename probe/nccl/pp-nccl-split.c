/* pp-nccl-split.c — the split of an NCCL operation's wait (pp-nccl-split.h). */
#include "pp-nccl-split.h"

#include <stdlib.h>
#include <string.h>

#include "pp-nccl-abi.h"

int
pp_nccl_state_part (int state)
{
  switch (state)
    {
    case PP_NCCL_STEP_SEND_PEER_WAIT: return PP_NCCL_PART_PEER_LATE;
    case PP_NCCL_STEP_SEND_WAIT:
    case PP_NCCL_STEP_RECV_FLUSH_WAIT: return PP_NCCL_PART_TRANSFER;
    case PP_NCCL_STEP_RECV_WAIT: return PP_NCCL_PART_RECV_WAIT;
    case PP_NCCL_STEP_SEND_GPU_WAIT:
    case PP_NCCL_STEP_RECV_GPU_WAIT: return PP_NCCL_PART_LOCAL;
    default: return -1;
    }
}

const char *
pp_nccl_part_name (int part)
{
  static const char *const names[PP_NCCL_N_PARTS] = { "peer_late", "transfer", "local" };
  return part >= 0 && part < PP_NCCL_N_PARTS ? names[part] : "?";
}

/* An edge of the sweep: +1 at a start, -1 at an end, of one part. */
static int
cmp_edge (const void *a, const void *b)
{
  const PpNcclInterval *x = a, *y = b;
  if (x->start_ns != y->start_ns)
    return x->start_ns < y->start_ns ? -1 : 1;
  return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);   /* ends (-1) before starts */
}

/* The part that holds an instant where count[] intervals of each part are open. */
static int
winner (const int count[PP_NCCL_N_PARTS])
{
  if (count[PP_NCCL_PART_TRANSFER] > 0)
    return PP_NCCL_PART_TRANSFER;
  if (count[PP_NCCL_PART_PEER_LATE] > 0)
    return PP_NCCL_PART_PEER_LATE;
  if (count[PP_NCCL_PART_LOCAL] > 0)
    return PP_NCCL_PART_LOCAL;
  return -1;
}

static size_t
put_run (PpNcclInterval *out, size_t cap, size_t n_out, int64_t a, int64_t b, int part,
         int64_t *totals)
{
  if (b <= a || part < 0)
    return n_out;
  if (totals != NULL)
    totals[part] += b - a;
  if (n_out > 0 && n_out <= cap && out[n_out - 1].part == part && out[n_out - 1].end_ns == a)
    {
      out[n_out - 1].end_ns = b;
      return n_out;
    }
  if (n_out < cap)
    out[n_out] = (PpNcclInterval) { a, b, part };
  return n_out + 1;
}

size_t
pp_nccl_split (const PpNcclInterval *iv, size_t n, int64_t first_data, PpNcclInterval *out, size_t cap,
               int64_t totals[PP_NCCL_N_PARTS], PpNcclInterval *scratch)
{
  size_t n_edges = 0, n_out = 0;
  int count[PP_NCCL_N_PARTS] = { 0 };

  if (totals != NULL)
    for (int p = 0; p < PP_NCCL_N_PARTS; p++)
      totals[p] = 0;
  if (first_data == INT64_MAX)
    for (size_t i = 0; i < n; i++)
      if (iv[i].part == PP_NCCL_PART_RECV_WAIT && iv[i].end_ns < first_data)
        first_data = iv[i].end_ns;
  /* edges: start_ns the time, end_ns +1 / -1, part the part; a RecvWait
   * becomes peer_late up to the first data and transfer after it */
  for (size_t i = 0; i < n; i++)
    {
      int64_t a = iv[i].start_ns, b = iv[i].end_ns;
      int part = iv[i].part;
      if (b <= a || part < 0 || part > PP_NCCL_PART_RECV_WAIT)
        continue;
      if (part == PP_NCCL_PART_RECV_WAIT)
        {
          int64_t cut = first_data < a ? a : (first_data > b ? b : first_data);
          if (cut > a)
            {
              scratch[n_edges++] = (PpNcclInterval) { a, +1, PP_NCCL_PART_PEER_LATE };
              scratch[n_edges++] = (PpNcclInterval) { cut, -1, PP_NCCL_PART_PEER_LATE };
            }
          if (b > cut)
            {
              scratch[n_edges++] = (PpNcclInterval) { cut, +1, PP_NCCL_PART_TRANSFER };
              scratch[n_edges++] = (PpNcclInterval) { b, -1, PP_NCCL_PART_TRANSFER };
            }
          continue;
        }
      scratch[n_edges++] = (PpNcclInterval) { a, +1, part };
      scratch[n_edges++] = (PpNcclInterval) { b, -1, part };
    }
  /* appended in time order, the edges are nearly sorted: insertion sort,
   * linear then, where few (qsort past a few dozen) */
  if (n_edges > 64)
    qsort (scratch, n_edges, sizeof *scratch, cmp_edge);
  else
    for (size_t i = 1; i < n_edges; i++)
      for (size_t j = i; j > 0 && cmp_edge (&scratch[j - 1], &scratch[j]) > 0; j--)
        {
          PpNcclInterval t = scratch[j];
          scratch[j] = scratch[j - 1];
          scratch[j - 1] = t;
        }
  for (size_t e = 0; e < n_edges;)
    {
      int64_t t = scratch[e].start_ns;
      while (e < n_edges && scratch[e].start_ns == t)
        {
          count[scratch[e].part] += (int) scratch[e].end_ns;
          e++;
        }
      if (e < n_edges)
        n_out = put_run (out, cap, n_out, t, scratch[e].start_ns, winner (count), totals);
    }
  return n_out < cap ? n_out : cap;
}

void
pp_nccl_intervals_init (PpNcclIntervals *s, size_t max)
{
  memset (s, 0, sizeof *s);
  s->max = max;
  s->first_data = INT64_MAX;
  for (int p = 0; p <= PP_NCCL_N_PARTS; p++)
    s->last[p] = -1;
}

int
pp_nccl_intervals_add (PpNcclIntervals *s, int64_t a, int64_t b, int part)
{
  if (part < 0 || part > PP_NCCL_PART_RECV_WAIT || b <= a)
    return 0;
  if (part == PP_NCCL_PART_RECV_WAIT && b < s->first_data)
    s->first_data = b;
  long l = s->last[part];
  if (l >= 0 && a <= s->iv[l].end_ns && b >= s->iv[l].start_ns)
    {
      if (a < s->iv[l].start_ns)
        s->iv[l].start_ns = a;
      if (b > s->iv[l].end_ns)
        s->iv[l].end_ns = b;
      return 0;
    }
  if (s->n == s->cap)
    {
      size_t cap = s->cap ? 2 * s->cap : 16;
      if (cap > s->max)
        cap = s->max;
      PpNcclInterval *iv = cap > s->n ? realloc (s->iv, cap * sizeof *iv) : NULL;
      if (iv == NULL)
        return -1;
      s->iv = iv;
      s->cap = cap;
    }
  s->iv[s->n] = (PpNcclInterval) { a, b, part };
  s->last[part] = (long) s->n++;
  return 0;
}

void
pp_nccl_intervals_clear (PpNcclIntervals *s)
{
  free (s->iv);
  pp_nccl_intervals_init (s, s->max);
}

size_t
pp_nccl_split_kernels (int64_t recv_start, int64_t recv_end, int64_t send_start, int64_t send_end,
                       PpNcclInterval out[2])
{
  size_t n = 0;
  (void) send_end;
  if (recv_end <= recv_start)
    return 0;
  int64_t cut = send_start < recv_start ? recv_start : (send_start > recv_end ? recv_end : send_start);
  if (cut > recv_start)
    out[n++] = (PpNcclInterval) { recv_start, cut, PP_NCCL_PART_PEER_LATE };
  if (recv_end > cut)
    out[n++] = (PpNcclInterval) { cut, recv_end, PP_NCCL_PART_TRANSFER };
  return n;
}
