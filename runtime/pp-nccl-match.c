/* pp-nccl-match.c — receives met with their sends (pp-nccl-match.h). */
#include "pp-nccl-match.h"

#include <stdlib.h>
#include <string.h>

#include "pp-nccl-split.h"

typedef struct {
  uint32_t comm;
  int32_t  sender, receiver, seq;
  int      is_send;
  const PpSpan *s;
} Side;

static int
cmp_side (const void *a, const void *b)
{
  const Side *x = a, *y = b;
  if (x->comm != y->comm)
    return x->comm < y->comm ? -1 : 1;
  if (x->sender != y->sender)
    return x->sender < y->sender ? -1 : 1;
  if (x->receiver != y->receiver)
    return x->receiver < y->receiver ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  if (x->is_send != y->is_send)
    return x->is_send - y->is_send;
  return (x->s->start_ns > y->s->start_ns) - (x->s->start_ns < y->s->start_ns);
}

static int
same_pair (const Side *a, const Side *b)
{
  return a->comm == b->comm && a->sender == b->sender && a->receiver == b->receiver && a->seq == b->seq;
}

static int
is_part_name (const char *n)
{
  return n != NULL && (strcmp (n, "nccl:peer_late") == 0 || strcmp (n, "nccl:transfer") == 0
                       || strcmp (n, "nccl:local") == 0);
}

static int
key_cmp (const PpSpan *a, int32_t rank, uint32_t stream, int32_t peer, int64_t t)
{
  if (a->rank != rank)
    return a->rank < rank ? -1 : 1;
  if (a->stream != stream)
    return a->stream < stream ? -1 : 1;
  if (a->peer_rank != peer)
    return a->peer_rank < peer ? -1 : 1;
  return (a->start_ns > t) - (a->start_ns < t);
}

static int
cmp_part (const void *a, const void *b)
{
  const PpSpan *x = *(const PpSpan *const *) a, *y = *(const PpSpan *const *) b;
  return key_cmp (x, y->rank, y->stream, y->peer_rank, y->start_ns);
}

/* Whether the plugin split r itself: a part of its (same rank,
 * communicator and peer) starting inside it; its parts lie within the
 * operation, whose span starts at its first proxy step's operation.
 * parts sorted by cmp_part. */
static int
already_split (const PpSpan *r, const PpSpan *const *parts, size_t n_parts)
{
  size_t lo = 0, hi = n_parts;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (key_cmp (parts[mid], r->rank, r->stream, r->peer_rank, r->start_ns) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo < n_parts && key_cmp (parts[lo], r->rank, r->stream, r->peer_rank, r->start_ns) >= 0
         && parts[lo]->rank == r->rank && parts[lo]->stream == r->stream
         && parts[lo]->peer_rank == r->peer_rank && parts[lo]->start_ns < r->end_ns;
}

PpStatus
pp_nccl_match (const PpSpan *spans, size_t n, PpNcclNameFunc name, void *user,
               PpNcclMatchedWait **out, size_t *n_out, PpError *err)
{
  size_t n_sides = 0, n_parts = 0, n_res = 0;
  Side *sides = malloc ((n + 1) * sizeof *sides);
  const PpSpan **parts = malloc ((n + 1) * sizeof *parts);
  PpNcclMatchedWait *res = NULL;

  *out = NULL;
  *n_out = 0;
  if (sides == NULL || parts == NULL)
    goto oom;
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *s = &spans[i];
      const char *nm = s->name_id ? name (user, s->name_id) : NULL;
      if (nm == NULL)
        continue;
      if (s->kind == PP_SPAN_WAIT && is_part_name (nm))
        parts[n_parts++] = s;
      else if (s->kind == PP_SPAN_KERNEL && (strcmp (nm, "nccl:Send") == 0 || strcmp (nm, "nccl:Recv") == 0)
               && s->stage >= 0 && s->peer_rank >= 0 && s->microbatch >= 0)
        {
          int send = nm[5] == 'S';
          sides[n_sides++] = (Side) { s->stream, send ? s->stage : s->peer_rank,
                                      send ? s->peer_rank : s->stage, s->microbatch, send, s };
        }
    }
  qsort (sides, n_sides, sizeof *sides, cmp_side);
  qsort (parts, n_parts, sizeof *parts, cmp_part);
  if ((res = malloc ((2 * n_sides + 1) * sizeof *res)) == NULL)
    goto oom;
  /* each group of one pair and sequence number: its receives, then its
   * sends, each in time order; the k-th receive meets the k-th send */
  for (size_t g = 0; g < n_sides;)
    {
      size_t end = g, first_send;
      while (end < n_sides && same_pair (&sides[g], &sides[end]))
        end++;
      for (first_send = g; first_send < end && !sides[first_send].is_send; first_send++)
        ;
      for (size_t k = 0; g + k < first_send && first_send + k < end; k++)
        {
          const PpSpan *r = sides[g + k].s, *s = sides[first_send + k].s;
          PpNcclInterval iv[2];
          if (already_split (r, parts, n_parts))
            continue;
          size_t m = pp_nccl_split_kernels (r->start_ns, r->end_ns, s->start_ns, s->end_ns, iv);
          for (size_t j = 0; j < m; j++)
            {
              PpSpan w;
              memset (&w, 0, sizeof w);
              w.start_ns = iv[j].start_ns;
              w.end_ns = iv[j].end_ns;
              w.rank = r->rank;
              w.stage = -1;
              w.microbatch = -1;
              w.step = r->step;
              w.kind = PP_SPAN_WAIT;
              w.device = 0xffff;
              w.stream = r->stream;
              w.peer_rank = r->peer_rank;
              res[n_res++] = (PpNcclMatchedWait) { w, iv[j].part, (size_t) (r - spans) };
            }
        }
      g = end;
    }
  free (sides);
  free (parts);
  if (n_res == 0)
    free (res);
  else
    {
      *out = res;
      *n_out = n_res;
    }
  return PP_OK;

oom:
  free (sides);
  free (parts);
  free (res);
  return pp_error_set (err, PP_ENOMEM, "out of memory matching NCCL's sends and receives");
}
