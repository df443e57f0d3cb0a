/* pp-timeline-model-ranks.c — a rank's row, the bottom of the model: made
 * on first sight, its spans stored and sorted (appended, settled at the
 * first query), times clamped so no sum overflows, and what a rank says
 * (label, host, lost). */
#include "pp-timeline-model-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Times from a file are clamped to [-PP_TIMELINE_MAX_ABS_NS,
 * PP_TIMELINE_MAX_ABS_NS] (about 73 years either side of the clock's zero):
 * the difference of any two, and a time plus such a difference, then fit in
 * an int64, so no consumer's arithmetic on them overflows. */
int64_t
clamp_ns (int64_t t)
{
  return t > PP_TIMELINE_MAX_ABS_NS ? PP_TIMELINE_MAX_ABS_NS
         : t < -PP_TIMELINE_MAX_ABS_NS ? -PP_TIMELINE_MAX_ABS_NS : t;
}

/* a + b, both clamped first, clamped again (cannot overflow: |a + b| <= 2^62). */
int64_t
add_ns (int64_t a, int64_t b)
{
  return clamp_ns (clamp_ns (a) + clamp_ns (b));
}

/* Makes rank r exist (and every rank below it); 0, or -1 out of memory. */
int
ensure_rank (PpTimelineModel *m, int r)
{
  if (r < 0 || r >= PP_TRACE_MAX_RANKS)
    return -1;
  if (r >= m->cap_ranks)
    {
      int cap = m->cap_ranks ? m->cap_ranks : 8;
      while (cap <= r)
        cap *= 2;
      Rank *nr = realloc (m->ranks, (size_t) cap * sizeof *nr);
      if (nr == NULL)
        return -1;
      m->ranks = nr;
      void *np = realloc (m->raw_plans, (size_t) cap * sizeof *m->raw_plans);
      if (np == NULL)
        return -1;
      m->raw_plans = np;
      if (m->is_view)
        {
          Row *rw = realloc (m->rows, (size_t) cap * sizeof *rw);
          if (rw == NULL)
            return -1;
          m->rows = rw;
          memset (m->rows + m->cap_ranks, 0, (size_t) (cap - m->cap_ranks) * sizeof *rw);
        }
      memset (m->ranks + m->cap_ranks, 0, (size_t) (cap - m->cap_ranks) * sizeof *nr);
      memset (m->raw_plans + m->cap_ranks, 0, (size_t) (cap - m->cap_ranks) * sizeof *m->raw_plans);
      for (int i = m->cap_ranks; i < cap; i++)
        {
          m->ranks[i].max_end_ns = INT64_MIN;
          m->ranks[i].peak_activation = -1;
          m->ranks[i].peak_inflight = -1;
          m->ranks[i].lost_ns = INT64_MAX;
          m->ranks[i].shown_process = -1;
        }
      m->cap_ranks = cap;
    }
  if (r >= m->n_ranks)
    m->n_ranks = r + 1;
  return 0;
}

void
see_time (PpTimelineModel *m, int64_t a, int64_t b)
{
  if (a < m->start_ns)
    m->start_ns = a;
  if (b > m->end_ns)
    m->end_ns = b;
}

/* Sorts a rank's spans by start once more have come out of order: the
 * tail sorted (stable, by merging), then merged with the sorted prefix,
 * which came first (so equal starts keep their arrival order).  O(n) a
 * query plus O(k log k) for the k that came since: queries take a const
 * model, and sort it in place as a cache (the model is one thread's). */
void
settle_rank (Rank *rk)
{
  size_t n = rk->n_spans, k0 = rk->n_sorted;
  if (k0 >= n)
    return;
  PpSpan *tmp = malloc (n * sizeof *tmp);
  if (tmp == NULL)
    return;   /* queries then see them as they came; nothing is lost */
  /* bottom-up merge sort of spans[k0, n) */
  PpSpan *a = rk->spans + k0, *b = tmp + k0;
  size_t len = n - k0;
  for (size_t w = 1; w < len; w *= 2)
    {
      for (size_t lo = 0; lo < len; lo += 2 * w)
        {
          size_t mid = lo + w < len ? lo + w : len, hi = lo + 2 * w < len ? lo + 2 * w : len;
          size_t i = lo, j = mid, o = lo;
          while (i < mid && j < hi)
            b[o++] = a[j].start_ns < a[i].start_ns ? a[j++] : a[i++];
          while (i < mid)
            b[o++] = a[i++];
          while (j < hi)
            b[o++] = a[j++];
        }
      PpSpan *t = a; a = b; b = t;
    }
  if (a != rk->spans + k0)
    memcpy (rk->spans + k0, a, len * sizeof *a);
  /* merge the prefix and the sorted tail */
  size_t i = 0, j = k0, o = 0;
  while (i < k0 && j < n)
    tmp[o++] = rk->spans[j].start_ns < rk->spans[i].start_ns ? rk->spans[j++] : rk->spans[i++];
  while (i < k0)
    tmp[o++] = rk->spans[i++];
  while (j < n)
    tmp[o++] = rk->spans[j++];
  memcpy (rk->spans, tmp, n * sizeof *tmp);
  free (tmp);
  rk->n_sorted = n;
}

void
settle (const PpTimelineModel *cm, int r)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (m != NULL && r >= 0 && r < m->n_ranks)
    settle_rank (&m->ranks[r]);
}

/* s moved by offset, appended to rk's spans: a span out of order is sorted
 * in at the next query (settle), O(1) here whatever order spans come in,
 * rather than a move of the spans after it each time (quadratic for spans
 * that come reversed). */
void
append_span (Rank *rk, const PpSpan *in, int64_t offset)
{
  PpSpan s = *in;
  s.start_ns = add_ns (s.start_ns, offset);
  s.end_ns = add_ns (s.end_ns, offset);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  if (rk->n_spans == rk->cap_spans)
    {
      /* from 8: a job of 65,535 processes of a few spans each held 256 a
       * process (1.3 GB), doubling keeps an append O(1) */
      size_t cap = rk->cap_spans ? 2 * rk->cap_spans : 8;
      PpSpan *n = realloc (rk->spans, cap * sizeof *n);
      if (n == NULL)
        return;
      /* zeroed: a span's padding bytes are then the same in every model
       * (rows are compared whole) */
      memset (n + rk->cap_spans, 0, (cap - rk->cap_spans) * sizeof *n);
      rk->spans = n;
      rk->cap_spans = cap;
    }
  if (rk->n_sorted == rk->n_spans
      && (rk->n_spans == 0 || rk->spans[rk->n_spans - 1].start_ns <= s.start_ns))
    rk->n_sorted++;
  rk->spans[rk->n_spans++] = s;
}

void
pp_timeline_model_rank_label (const PpTimelineModel *m, int r, char *buf, size_t size)
{
  const char *host = m != NULL && m->several_hosts && r >= 0 && r < m->n_ranks ? m->ranks[r].host : "";

  if (m != NULL && m->is_view && r >= 0 && r < m->n_ranks && m->rows[r].label[0])
    {
      snprintf (buf, size, "%s", m->rows[r].label);
      return;
    }
  if (host[0])
    snprintf (buf, size, "%.8s:rank %d", host, r);   /* the label area is narrow; tooltips say more */
  else
    snprintf (buf, size, "%s %d", pp_timeline_model_rank_word (m), r);
}

int64_t
pp_timeline_model_rank_lost (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].lost_ns : INT64_MAX;
}

const char *
pp_timeline_model_rank_host (const PpTimelineModel *m, int r)
{
  return m != NULL && r >= 0 && r < m->n_ranks ? m->ranks[r].host : "";
}

const char *
pp_timeline_model_rank_word (const PpTimelineModel *m)
{
  const char *backend = m != NULL && m->has_desc ? m->desc.backend : "";
  return strcmp (backend, "cuda") == 0 ? "GPU" : strcmp (backend, "cpu") == 0 ? "CPU rank" : "rank";
}

int
pp_timeline_model_n_ranks (const PpTimelineModel *m)
{
  return m ? m->n_ranks : 0;
}
