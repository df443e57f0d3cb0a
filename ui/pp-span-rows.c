/* pp-span-rows.c — the span table's rows (pp-span-rows.h). */
#include "pp-span-rows.h"

#include <stdlib.h>
#include <string.h>

struct _PpSpanRows
{
  PpSpanRef   *refs, *tmp;    /* tmp: the radix sort's other half */
  PpSpanRef   *base;          /* the rows as build listed them, (row, start) order: a sort starts there */
  size_t       n, cap;
  size_t       n_blocks;      /* the blocks looked at, listed or not */
  PpSpanColumn column;
  int          descending;
  const PpTimelineModel *model;   /* built from (compared, never read, by sort) */
};

PpSpanRows *
pp_span_rows_new (void)
{
  PpSpanRows *t = calloc (1, sizeof *t);
  if (t != NULL)
    t->column = PP_SPAN_COL_START;
  return t;
}

void
pp_span_rows_free (PpSpanRows *t)
{
  if (t == NULL)
    return;
  free (t->refs);
  free (t->tmp);
  free (t->base);
  free (t);
}

int
pp_span_rows_match (const PpTimelineFilter *f, int row, const PpSpan *s)
{
  return pp_span_kind_is_work (s->kind) && pp_timeline_filter_match (f, row, s);
}

int64_t
pp_span_rows_idle_before (const PpTimelineModel *m, int row, size_t index)
{
  const PpSpan *sp = pp_timeline_model_spans (m, row);
  int64_t start = sp[index].start_ns, prev_end = INT64_MIN;
  int64_t longest = pp_timeline_model_max_span_ns (m, row);
  for (size_t i = index; i-- > 0;)
    {
      if (pp_span_kind_is_work (sp[i].kind) && sp[i].end_ns <= start && sp[i].end_ns > prev_end)
        prev_end = sp[i].end_ns;
      /* sorted by start: one that starts before the best end found, less
       * the longest span, cannot end later */
      if (prev_end != INT64_MIN && sp[i].start_ns < prev_end - longest)
        break;
    }
  return prev_end == INT64_MIN ? -1 : start - prev_end;
}

static int64_t
key_of (const PpTimelineModel *m, const PpSpanRef *r, PpSpanColumn column)
{
  const PpSpan *s = &pp_timeline_model_spans (m, r->row)[r->index];
  switch (column)
    {
    case PP_SPAN_COL_KIND:       return s->kind == PP_SPAN_OVERLAP_F_B ? PP_SPAN_B * 2 + 1 : s->kind * 2;
    case PP_SPAN_COL_RANK:       return r->row;
    case PP_SPAN_COL_STAGE:      return s->stage;
    case PP_SPAN_COL_MICROBATCH: return s->microbatch;
    case PP_SPAN_COL_STEP:       return s->step;
    case PP_SPAN_COL_DURATION:   return s->end_ns - s->start_ns;
    case PP_SPAN_COL_WAIT:       return r->wait_ns;
    case PP_SPAN_COL_START:
    default:                     return s->start_ns;
    }
}

/* Least significant digit first, 8 bits a pass: stable, so equal keys
 * keep the (row, start) order build lists them in, whichever way the
 * keys go.  One read counts every digit; a digit all keys share (the high
 * bytes of times, most of a small number) costs no pass.  A million rows
 * sort in a few passes over 24 MB, not 20 million compare calls. */
static void
radix_sort (PpSpanRows *t, int descending)
{
  size_t count[8][256];   /* 16 KB */
  PpSpanRef *a = t->refs, *b = t->tmp;
  memset (count, 0, sizeof count);
  for (size_t i = 0; i < t->n; i++)
    {
      uint64_t k = (uint64_t) a[i].key ^ (UINT64_C (1) << 63);
      if (descending)
        k = ~k;
      for (int d = 0; d < 8; d++)
        count[d][(k >> (8 * d)) & 0xff]++;
    }
  for (int d = 0; d < 8; d++)
    {
      size_t at = 0, *c = count[d];
      int trivial = 0;
      for (int v = 0; v < 256 && !trivial; v++)
        trivial = c[v] == t->n;
      if (trivial)
        continue;
      for (int v = 0; v < 256; v++)
        {
          size_t n = c[v];
          c[v] = at;
          at += n;
        }
      for (size_t i = 0; i < t->n; i++)
        {
          uint64_t k = (uint64_t) a[i].key ^ (UINT64_C (1) << 63);
          if (descending)
            k = ~k;
          b[c[(k >> (8 * d)) & 0xff]++] = a[i];
        }
      PpSpanRef *x = a;
      a = b;
      b = x;
    }
  if (a != t->refs)
    memcpy (t->refs, a, t->n * sizeof *a);
}

/* The usual case in fewer and narrower passes: each row's key, less the
 * least (or the greatest less it, down), above its place in the listed
 * order, one 64-bit word a row; the words sort by their key bits only
 * (stable: the place bits stay in order, so equal keys keep it), then the
 * rows are gathered in that order.  A million rows move 8 bytes a pass,
 * not 24, in the rows' other half (16 of its 24 MB).  -1 where key and
 * place do not fit in 64 bits (for a million rows, keys over 2^44 ns —
 * about 5 hours — apart): the rows' own radix sort does it. */
static int
sort_packed (PpSpanRows *t)
{
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < t->n; i++)
    {
      lo = t->base[i].key < lo ? t->base[i].key : lo;
      hi = t->base[i].key > hi ? t->base[i].key : hi;
    }
  uint64_t range = (uint64_t) hi - (uint64_t) lo;
  int place_bits = 1, key_bits = 0;
  while (place_bits < 64 && (t->n - 1) >> place_bits)
    place_bits++;
  while (key_bits < 64 && range >> key_bits)
    key_bits++;
  if (place_bits + key_bits > 64)
    return -1;
  uint64_t *a = (uint64_t *) (void *) t->tmp, *b = a + t->n;   /* 2 x 8 of the tmp's 24 bytes a row */
  for (size_t i = 0; i < t->n; i++)
    {
      uint64_t k = t->descending ? (uint64_t) hi - (uint64_t) t->base[i].key : (uint64_t) t->base[i].key - (uint64_t) lo;
      a[i] = k << place_bits | i;
    }
  for (int shift = place_bits; shift < place_bits + key_bits; shift += 8)
    {
      size_t count[256] = { 0 }, at = 0;
      for (size_t i = 0; i < t->n; i++)
        count[(a[i] >> shift) & 0xff]++;
      if (count[(a[0] >> shift) & 0xff] == t->n)
        continue;   /* a digit every key shares */
      for (int v = 0; v < 256; v++)
        {
          size_t c = count[v];
          count[v] = at;
          at += c;
        }
      for (size_t i = 0; i < t->n; i++)
        b[count[(a[i] >> shift) & 0xff]++] = a[i];
      uint64_t *x = a;
      a = b;
      b = x;
    }
  uint64_t mask = place_bits == 64 ? UINT64_MAX : (UINT64_C (1) << place_bits) - 1;
  for (size_t i = 0; i < t->n; i++)
    t->refs[i] = t->base[a[i] & mask];
  return 0;
}

/* Build lists the rows in (row, start) order (the base); the column's key
 * sorts them from there, ties kept in it. */
static void
sort_rows (PpSpanRows *t, const PpTimelineModel *m)
{
  for (size_t i = 0; i < t->n; i++)
    t->base[i].key = key_of (m, &t->base[i], t->column);
  if (t->n == 0 || (t->column == PP_SPAN_COL_RANK && !t->descending))   /* the order they are in */
    {
      if (t->n > 0)
        memcpy (t->refs, t->base, t->n * sizeof *t->refs);
      return;
    }
  if (sort_packed (t) == 0)
    return;
  memcpy (t->refs, t->base, t->n * sizeof *t->refs);
  radix_sort (t, t->descending);
}

int
pp_span_rows_build (PpSpanRows *t, const PpTimelineModel *m, const PpTimelineFilter *f)
{
  size_t total = 0;
  t->n = 0;
  t->n_blocks = 0;
  int n_rows = m != NULL ? pp_timeline_model_n_ranks (m) : 0;
  for (int r = 0; r < n_rows; r++)
    total += pp_timeline_model_n_spans (m, r);
  if (total > t->cap)
    {
      free (t->refs);
      free (t->tmp);
      free (t->base);
      t->refs = malloc (total * sizeof *t->refs);
      t->tmp = malloc (total * sizeof *t->tmp);
      t->base = malloc (total * sizeof *t->base);
      t->cap = total;
      if (t->refs == NULL || t->tmp == NULL || t->base == NULL)
        {
          free (t->refs);
          free (t->tmp);
          free (t->base);
          t->refs = t->tmp = t->base = NULL;
          t->cap = 0;
          return -1;
        }
    }
  for (int r = 0; r < n_rows; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      size_t n = pp_timeline_model_n_spans (m, r);
      int64_t latest_end = INT64_MIN;   /* of the row's blocks so far */
      for (size_t i = 0; i < n; i++)
        {
          if (!pp_span_kind_is_work (sp[i].kind))
            continue;
          t->n_blocks++;
          if (pp_timeline_filter_match (f, r, &sp[i]))
            {
              PpSpanRef *ref = &t->base[t->n++];
              ref->row = r;
              ref->index = (uint32_t) i;
              /* the usual case in one pass: every block before it ended by
               * its start; one still running needs the search */
              if (latest_end == INT64_MIN)
                ref->wait_ns = -1;
              else if (latest_end <= sp[i].start_ns)
                ref->wait_ns = sp[i].start_ns - latest_end;
              else
                ref->wait_ns = pp_span_rows_idle_before (m, r, i);
            }
          if (sp[i].end_ns > latest_end)
            latest_end = sp[i].end_ns;
        }
    }
  t->model = m;
  sort_rows (t, m);
  return 0;
}

int
pp_span_rows_sort (PpSpanRows *t, const PpTimelineModel *m)
{
  if (m != t->model)
    return -1;
  sort_rows (t, m);
  return 0;
}

void
pp_span_rows_set_order (PpSpanRows *t, PpSpanColumn column, int descending)
{
  t->column = column < PP_SPAN_N_COLS ? column : PP_SPAN_COL_START;
  t->descending = descending != 0;
}

PpSpanColumn
pp_span_rows_sort_column (const PpSpanRows *t)
{
  return t->column;
}

int
pp_span_rows_sort_descending (const PpSpanRows *t)
{
  return t->descending;
}

size_t
pp_span_rows_n (const PpSpanRows *t)
{
  return t->n;
}

size_t
pp_span_rows_n_blocks (const PpSpanRows *t)
{
  return t->n_blocks;
}

const PpSpanRef *
pp_span_rows_get (const PpSpanRows *t, size_t i)
{
  return i < t->n ? &t->refs[i] : NULL;
}

long
pp_span_rows_position (const PpSpanRows *t, int row, long index)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->refs[i].row == row && (long) t->refs[i].index == index)
      return (long) i;
  return -1;
}
