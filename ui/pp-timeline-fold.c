/* pp-timeline-fold.c — views of a job of replicas: folded, unfolded, one
 * replica (see pp-timeline-fold.h); the statistics over replicas.
 *
 * A view is built in one pass over the source's per-process spans: O(S log
 * D) for S spans and D processes a rank, its memory the spans it shows (a
 * folded view holds 1/D of them).
 */
#include "pp-timeline-fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-analysis.h"
#include "pp-timeline-model-private.h"

int
pp_timeline_model_has_replicas (const PpTimelineModel *m)
{
  int n = pp_timeline_model_n_places (m);
  for (int i = 1; i < n; i++)
    if (pp_timeline_model_place (m, i)->rank == pp_timeline_model_place (m, i - 1)->rank)
      return 1;
  return 0;
}

int
pp_timeline_model_dp_size (const PpTimelineModel *m)
{
  int n = pp_timeline_model_n_places (m), d = pp_timeline_model_dp_size_said (m);
  /* a file may say any size: what is iterated or listed by replica stays
   * within the processes there are */
  return d < n ? d : n > 0 ? n : 1;
}

int
pp_timeline_model_dp_size_said (const PpTimelineModel *m)
{
  int n = pp_timeline_model_n_places (m), d = 1;
  for (int i = 0; i < n; i++)
    if (pp_timeline_model_place (m, i)->size[PP_TRACE_MESH_DP] > d)
      d = pp_timeline_model_place (m, i)->size[PP_TRACE_MESH_DP];
  return d;
}

static int
cmp_dp (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

int
pp_timeline_model_replica_dps (const PpTimelineModel *m, int32_t **out)
{
  int n = pp_timeline_model_n_places (m), k = 0;
  *out = NULL;
  if (n <= 0)
    return 0;
  int32_t *d = malloc ((size_t) n * sizeof *d);
  if (d == NULL)
    return -1;
  for (int i = 0; i < n; i++)
    d[i] = pp_timeline_model_place (m, i)->coord[PP_TRACE_MESH_DP];
  qsort (d, (size_t) n, sizeof *d, cmp_dp);
  for (int i = 0; i < n; i++)
    if (k == 0 || d[k - 1] != d[i])
      d[k++] = d[i];
  *out = d;
  return k;
}

int
pp_timeline_dps_holds (const int32_t *dps, int n, int32_t dp)
{
  return n > 0 && bsearch (&dp, dps, (size_t) n, sizeof *dps, cmp_dp) != NULL;
}

void
pp_timeline_dps_words (const int32_t *dps, int n, char *buf, size_t size)
{
  enum { MAX_RUNS = 4 };
  int32_t lo[MAX_RUNS + 1], hi[MAX_RUNS + 1];
  int runs = 0, more = 0;
  if (size == 0)
    return;
  for (int i = 0; i < n; i++)
    if (runs > 0 && dps[i] == hi[runs - 1] + 1)
      hi[runs - 1] = dps[i];
    else if (runs < MAX_RUNS + 1)
      {
        lo[runs] = hi[runs] = dps[i];
        runs++;
      }
    else
      more = 1;
  if (runs > MAX_RUNS)
    {
      more = 1;
      runs = MAX_RUNS - 1;
    }
  size_t l = (size_t) snprintf (buf, size, "dp");
  for (int r = 0; r < runs && l < size; r++)
    {
      const char *sep = r == 0 ? " " : r == runs - 1 && !more ? " and " : ", ";
      if (lo[r] == hi[r])
        l += (size_t) snprintf (buf + l, size - l, "%s%d", sep, lo[r]);
      else if (hi[r] == lo[r] + 1 && runs == 1)
        l += (size_t) snprintf (buf + l, size - l, "%s%d and %d", sep, lo[r], hi[r]);
      else
        l += (size_t) snprintf (buf + l, size - l, "%s%d to %d", sep, lo[r], hi[r]);
    }
  if (more && l < size)
    snprintf (buf + l, size - l, ", ... (%d replicas)", n);
}

PpStatus
pp_timeline_replicas_parse (const char *text, PpTimelineReplicas *out, PpError *err)
{
  memset (out, 0, sizeof *out);
  out->replica = -1;
  if (text != NULL && strcmp (text, "fold") == 0)
    return PP_OK;
  if (text != NULL && strcmp (text, "all") == 0)
    {
      out->all = 1;
      return PP_OK;
    }
  char *end = NULL;
  long n = text != NULL ? strtol (text, &end, 10) : -1;
  if (text == NULL || end == text || *end != '\0' || n < 0 || n >= PP_TRACE_MAX_PROCESSES)
    {
      pp_error_set (err, PP_EINVAL, "--replicas takes fold, all or a replica's dp number (got '%s')",
                    text ? text : "");
      return PP_EINVAL;
    }
  out->replica = (int) n;
  return PP_OK;
}

/* ---- folding ---- */

/* A block of one process, keyed by what matches it across replicas:
 * (kind, step) and (stage, micro-batch) packed into two words, so that
 * the one sort a fold costs compares integers. */
typedef struct {
  uint64_t      hi, lo;
  int64_t       start;
  const PpSpan *s;
  int32_t       process, dp;
} Member;

static void
member_key (Member *m, const PpSpan *s)
{
  m->hi = (uint64_t) s->kind << 32 | (uint32_t) s->step;
  m->lo = (uint64_t) (uint32_t) s->stage << 32 | (uint32_t) s->microbatch;
}

static int
cmp_key (const PpSpan *x, const PpSpan *y)
{
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  if (x->stage != y->stage)
    return x->stage < y->stage ? -1 : 1;
  if (x->microbatch != y->microbatch)
    return x->microbatch < y->microbatch ? -1 : 1;
  return 0;
}

static int
same_key (const Member *x, const Member *y)
{
  return x->hi == y->hi && x->lo == y->lo;
}

/* by key, then process, then start: a process's n-th block of a key is
 * the n-th of its run */
static int
cmp_member (const void *a, const void *b)
{
  const Member *x = a, *y = b;
  if (x->hi != y->hi)
    return x->hi < y->hi ? -1 : 1;
  if (x->lo != y->lo)
    return x->lo < y->lo ? -1 : 1;
  if (x->process != y->process)
    return x->process < y->process ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

static int
cmp_i64 (const void *a, const void *b)
{
  int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
  return (x > y) - (x < y);
}

static int64_t
median_i64 (int64_t *v, size_t n)
{
  qsort (v, n, sizeof *v, cmp_i64);
  return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

typedef struct {
  PpSpan         s;
  PpTimelineFold f;
} Folded;

static int
cmp_folded (const void *a, const void *b)
{
  const Folded *x = a, *y = b;
  if (x->s.start_ns != y->s.start_ns)
    return x->s.start_ns < y->s.start_ns ? -1 : 1;
  return cmp_key (&x->s, &y->s);
}

/* One folded block from the members g[0, n) (one a process): the copy of
 * the replica whose start is the median (the lower of two middles), as
 * that replica ran it, never a mean of two copies (two replicas out of
 * step would make a block where neither ran); the spread beside it. */
static void
fold_group (Folded *f, Member *const *g, size_t n, int64_t *starts, int64_t *ends)
{
  (void) ends;
  f->f.latest_end_ns = INT64_MIN;
  f->f.earliest_start_ns = INT64_MAX;
  f->f.latest_start_ns = INT64_MIN;
  f->f.n = (int32_t) n;
  for (size_t j = 0; j < n; j++)
    {
      starts[j] = g[j]->s->start_ns;
      if (g[j]->s->end_ns > f->f.latest_end_ns)
        {
          f->f.latest_end_ns = g[j]->s->end_ns;
          f->f.slowest_process = g[j]->process;
          f->f.slowest_dp = g[j]->dp;
        }
      if (g[j]->s->start_ns < f->f.earliest_start_ns)
        f->f.earliest_start_ns = g[j]->s->start_ns;
      if (g[j]->s->start_ns > f->f.latest_start_ns)
        f->f.latest_start_ns = g[j]->s->start_ns;
    }
  qsort (starts, n, sizeof *starts, cmp_i64);
  int64_t med = starts[(n - 1) / 2];
  size_t pick = 0;
  for (size_t j = 0; j < n; j++)
    if (g[j]->s->start_ns == med)
      {
        pick = j;
        break;
      }
  f->s = *g[pick]->s;
  f->f.median_dp = g[pick]->dp;
  if (f->s.end_ns < f->s.start_ns)
    f->s.end_ns = f->s.start_ns;
}

int
pp_timeline_fold_apart (const PpTimelineFold *f, const PpSpan *span)
{
  return f != NULL && span != NULL && f->n > 1
         && f->latest_start_ns - f->earliest_start_ns > span->end_ns - span->start_ns;
}

/* Rank's places [i0, i1) folded into row: -1 out of memory.  One sort
 * by (key, process, start); a key's run holds each process's blocks of
 * that key in order, and the n-th of each is one folded block.  *apart:
 * how many of the row's blocks its replicas ran out of step
 * (pp_timeline_fold_apart). */
static int
fold_row (PpTimelineModel *v, int row, const PpTimelineModel *src, int i0, int i1, size_t *apart)
{
  *apart = 0;
  size_t n = 0, k = 0, n_out = 0, np = (size_t) (i1 - i0);
  for (int i = i0; i < i1; i++)
    {
      size_t ni;
      pp_timeline_model_place_spans (src, i, &ni);
      n += ni;
    }
  if (n == 0)
    return 0;
  Member *mem = malloc (n * sizeof *mem);
  Member **grp = malloc (np * sizeof *grp);
  size_t *run_at = malloc ((np + 1) * sizeof *run_at);
  int64_t *starts = malloc (np * sizeof *starts);
  int64_t *ends = malloc (np * sizeof *ends);
  Folded *out = malloc (n * sizeof *out);
  PpSpan *spans = malloc (n * sizeof *spans);
  PpTimelineFold *folds = malloc (n * sizeof *folds);
  int rc = -1;
  if (mem == NULL || grp == NULL || run_at == NULL || starts == NULL || ends == NULL || out == NULL
      || spans == NULL || folds == NULL)
    goto done;
  for (int i = i0; i < i1; i++)
    {
      size_t ni;
      const PpSpan *s = pp_timeline_model_place_spans (src, i, &ni);
      const PpTraceProcess *p = pp_timeline_model_place (src, i);
      for (size_t j = 0; j < ni; j++, k++)
        {
          mem[k].s = &s[j];
          mem[k].start = s[j].start_ns;
          mem[k].process = p->process;
          mem[k].dp = p->coord[PP_TRACE_MESH_DP];
          member_key (&mem[k], &s[j]);
        }
    }
  qsort (mem, n, sizeof *mem, cmp_member);
  for (size_t a = 0, b; a < n; a = b)
    {
      /* the key's run [a, b), and where each process's part of it starts */
      size_t nr = 0, longest = 0;
      for (b = a; b < n && same_key (&mem[b], &mem[a]); b++)
        if (b == a || mem[b].process != mem[b - 1].process)
          run_at[nr++] = b;
      run_at[nr] = b;
      for (size_t r = 0; r < nr; r++)
        if (run_at[r + 1] - run_at[r] > longest)
          longest = run_at[r + 1] - run_at[r];
      for (size_t occ = 0; occ < longest; occ++)
        {
          size_t ng = 0;
          for (size_t r = 0; r < nr; r++)
            if (run_at[r] + occ < run_at[r + 1])
              grp[ng++] = &mem[run_at[r] + occ];
          fold_group (&out[n_out++], grp, ng, starts, ends);
        }
    }
  qsort (out, n_out, sizeof *out, cmp_folded);
  for (size_t j = 0; j < n_out; j++)
    {
      spans[j] = out[j].s;
      folds[j] = out[j].f;
      *apart += pp_timeline_span_kind_folds_apart (spans[j].kind) && pp_timeline_fold_apart (&folds[j], &spans[j]);
    }
  rc = pp_timeline_model_view_add_spans (v, row, spans, n_out, folds);
done:
  free (mem);
  free (grp);
  free (run_at);
  free (starts);
  free (ends);
  free (out);
  free (spans);
  free (folds);
  return rc;
}

/* "dp 3" (" tp 1", " cp 0", " ep 2" where the mesh has them) */
static void
place_words (const PpTraceProcess *p, const int32_t size[PP_TRACE_MESH_DIMS], char *buf, size_t n)
{
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  size_t l = 0;
  buf[0] = '\0';
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS && l < n; d++)
    if (d == PP_TRACE_MESH_DP || size[d] > 1)
      l += (size_t) snprintf (buf + l, n - l, "%s%s %d", l ? " " : "", dim[d], p->coord[d]);
}

static void
mesh_size (const PpTimelineModel *src, int32_t size[PP_TRACE_MESH_DIMS])
{
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    size[d] = 1;
  for (int i = 0; i < pp_timeline_model_n_places (src); i++)
    for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
      if (pp_timeline_model_place (src, i)->size[d] > size[d])
        size[d] = pp_timeline_model_place (src, i)->size[d];
}

/* What the view shows, for the header and the statistics. */
static void
view_note (const PpTimelineReplicas *how, const int32_t size[PP_TRACE_MESH_DIMS], int n_ranks,
           const int32_t *dps, int n_dps, char *buf, size_t n)
{
  int64_t per = pp_trace_mesh_count (size, PP_TRACE_MESH_DP);
  const char *what = per == size[PP_TRACE_MESH_DP] ? "replicas" : "processes a rank";
  /* a trace of some of the job's replicas (one node's): which */
  char held[160] = "";
  if (per == size[PP_TRACE_MESH_DP] && n_dps > 0 && n_dps < per)
    {
      char words[80];
      pp_timeline_dps_words (dps, n_dps, words, sizeof words);
      snprintf (held, sizeof held, "%d of ", n_dps);
      if (how->replica < 0)
        {
          size_t l = strlen (held);
          snprintf (held + l, sizeof held - l, "%lld %s (%s)", (long long) per, what, words);
        }
    }
  if (how->replica >= 0)
    {
      snprintf (buf, n, "replica dp %d of %d shown", how->replica, size[PP_TRACE_MESH_DP]);
      return;
    }
  if (how->all)
    {
      if (held[0])
        snprintf (buf, n, "%s unfolded: a row a process", held);
      else
        snprintf (buf, n, "%lld %s unfolded: a row a process", (long long) per, what);
      return;
    }
  size_t l = held[0] ? (size_t) snprintf (buf, n, "%s folded (median, mark to the latest end)", held)
                     : (size_t) snprintf (buf, n, "%lld %s folded (median, mark to the latest end)",
                                          (long long) per, what);
  int first = 1;
  for (int r = 0; r < how->n_unfolded && r < n_ranks && l < n; r++)
    if (how->unfolded[r])
      {
        l += (size_t) snprintf (buf + l, n - l, "%s%d", first ? "; unfolded: rank " : ", ", r);
        first = 0;
      }
}

static size_t n_views_built;

size_t
pp_timeline_views_built (void)
{
  return __atomic_load_n (&n_views_built, __ATOMIC_RELAXED);
}

PpTimelineModel *
pp_timeline_view_new (const PpTimelineModel *src, const PpTimelineReplicas *how)
{
  __atomic_fetch_add (&n_views_built, 1, __ATOMIC_RELAXED);
  PpTimelineModel *v = pp_timeline_model_new_like (src);
  int n_places = pp_timeline_model_n_places (src), n_ranks = pp_timeline_model_n_ranks (src);
  const char *word = pp_timeline_model_rank_word (src);
  int32_t size[PP_TRACE_MESH_DIMS];
  int any_unfolded = how->all;
  char note[256], label[40], where[40];

  if (v == NULL)
    return NULL;
  mesh_size (src, size);
  for (int r = 0; r < how->n_unfolded && how->unfolded != NULL; r++)
    any_unfolded |= how->unfolded[r] != 0;
  int32_t *dps = NULL;
  int n_dps = how->replica < 0 ? pp_timeline_model_replica_dps (src, &dps) : 0;
  view_note (how, size, n_ranks, dps, n_dps, note, sizeof note);
  free (dps);
  /* a place the hook could not read is pipescope's numbering: said */
  for (int i = 0; i < n_places; i++)
    if (pp_timeline_model_place (src, i)->flags & PP_TRACE_PROCESS_UNPLACED)
      {
        size_t l = strlen (note);
        snprintf (note + l, sizeof note - l, "; place not read: dp by global rank");
        break;
      }
  /* spans no process wrote, of a rank of several processes: whose they
   * are is not known, so no process's row shows them; said */
  uint64_t lost = pp_timeline_model_n_unassigned_spans (src);
  if (lost > 0)
    {
      size_t l = strlen (note);
      snprintf (note + l, sizeof note - l, "; %llu span%s of no process not shown", (unsigned long long) lost,
                lost == 1 ? "" : "s");
    }
  pp_timeline_model_view_set_note (v, note);
  /* rows are pipeline ranks unless one is unfolded: then the plan lane,
   * which is a pipeline rank's, is left out */
  int with_plan = how->replica >= 0 || !any_unfolded;
  for (int r = 0, i = 0; r < n_ranks; r++)
    {
      while (i < n_places && pp_timeline_model_place (src, i)->rank < r)
        i++;
      int i0 = i, i1 = i;
      while (i1 < n_places && pp_timeline_model_place (src, i1)->rank == r)
        i1++;
      int row, rc = 0;
      if (i1 == i0)
        {
          /* a rank no process placed: its spans as the model holds them */
          if ((row = pp_timeline_model_view_add_row (v, src, r, -1, 0, NULL, with_plan)) < 0
              || pp_timeline_model_view_add_spans (v, row, pp_timeline_model_spans (src, r),
                                                   pp_timeline_model_n_spans (src, r), NULL) != 0)
            goto fail;
          continue;
        }
      if (how->replica >= 0)
        {
          int pick = -1;
          for (int j = i0; j < i1 && pick < 0; j++)
            if (pp_timeline_model_place (src, j)->coord[PP_TRACE_MESH_DP] == how->replica)
              pick = j;
          snprintf (label, sizeof label, "%s %d dp %d", word, r, how->replica);
          if ((row = pp_timeline_model_view_add_row (v, src, r, pick >= 0 ? pp_timeline_model_place (src, pick)->process : -1,
                                                     0, label, with_plan)) < 0)
            goto fail;
          if (pick >= 0)
            {
              size_t ns;
              const PpSpan *s = pp_timeline_model_place_spans (src, pick, &ns);
              rc = pp_timeline_model_view_add_spans (v, row, s, ns, NULL);
            }
        }
      else if (how->all || (r < how->n_unfolded && how->unfolded != NULL && how->unfolded[r]))
        for (int j = i0; j < i1 && rc == 0; j++)
          {
            const PpTraceProcess *p = pp_timeline_model_place (src, j);
            size_t ns;
            const PpSpan *s = pp_timeline_model_place_spans (src, j, &ns);
            place_words (p, size, where, sizeof where);
            snprintf (label, sizeof label, "%s %d %s", word, r, where);
            if ((row = pp_timeline_model_view_add_row (v, src, r, p->process, 0, label, with_plan)) < 0)
              goto fail;
            rc = pp_timeline_model_view_add_spans (v, row, s, ns, NULL);
          }
      else
        {
          snprintf (label, sizeof label, "%s %d \u00d7%d", word, r, i1 - i0);
          if ((row = pp_timeline_model_view_add_row (v, src, r, -1, i1 - i0, label, with_plan)) < 0)
            goto fail;
          size_t apart;
          rc = fold_row (v, row, src, i0, i1, &apart);
          if (rc == 0 && apart > 0)
            {
              /* the median block is one replica's: the row says the others
               * ran elsewhere (the band shows where) */
              snprintf (label, sizeof label, "%s %d \u00d7%d out of step", word, r, i1 - i0);
              pp_timeline_model_view_set_row_label (v, row, label);
            }
        }
      if (rc != 0)
        goto fail;
    }
  if (how->replica < 0 && n_ranks > 0)
    {
      double *b = malloc ((size_t) n_ranks * sizeof *b);
      if (b == NULL)
        goto fail;
      int n_steps = pp_timeline_model_step_bubbles (src, b);
      pp_timeline_model_view_set_bubbles (v, b, n_steps);
      free (b);
    }
  else if (how->replica >= 0 && n_ranks > 0)
    {
      /* the replica's bubbles from the job, its waits for a slower one
       * counted idle (they need the other replicas' spans) */
      int32_t *held = NULL;
      int D = pp_timeline_model_replica_dps (src, &held);
      double *b = malloc (((size_t) (D > 0 ? D : 0) * (size_t) n_ranks + 1) * sizeof *b);
      int *ns = malloc (((size_t) (D > 0 ? D : 0) + 1) * sizeof *ns);
      if (D < 0 || b == NULL || ns == NULL)
        {
          free (held);
          free (b);
          free (ns);
          goto fail;
        }
      const int32_t *at = D > 0 ? bsearch (&how->replica, held, (size_t) D, sizeof *held, cmp_dp) : NULL;
      int k = at != NULL ? (int) (at - held) : -1;
      if (k >= 0 && pp_timeline_model_replica_step_bubbles (src, n_ranks, held, D, b, ns) > 0 && ns[k] > 0)
        pp_timeline_model_view_set_bubbles (v, b + (size_t) k * (size_t) n_ranks, ns[k]);
      free (held);
      free (b);
      free (ns);
    }
  return v;
fail:
  pp_timeline_model_free (v);
  return NULL;
}

int
pp_timeline_span_kind_folds_apart (int kind)
{
  return pp_span_kind_is_work (kind) && kind != PP_SPAN_KERNEL;
}

size_t
pp_timeline_row_apart (const PpTimelineModel *m, int row, int64_t *max_apart_ns, int32_t *step)
{
  size_t n = 0;
  const PpSpan *sp = pp_timeline_model_spans (m, row);
  size_t ns = pp_timeline_model_n_spans (m, row);
  *max_apart_ns = 0;
  *step = -1;
  if (pp_timeline_model_row_folded (m, row) < 2)
    return 0;
  for (size_t i = 0; i < ns; i++)
    {
      const PpTimelineFold *f = pp_timeline_model_fold (m, row, (long) i);
      if (!pp_timeline_span_kind_folds_apart (sp[i].kind) || !pp_timeline_fold_apart (f, &sp[i]))
        continue;
      n++;
      if (f->latest_start_ns - f->earliest_start_ns > *max_apart_ns)
        {
          *max_apart_ns = f->latest_start_ns - f->earliest_start_ns;
          *step = sp[i].step;
        }
    }
  return n;
}

/* ---- statistics over replicas ---- */

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

int
pp_timeline_replica_bubbles (const PpTimelineModel *src, int n_ranks, PpTimelineSpread *out)
{
  /* the replicas are the dp values held (one node's dp 4 and 5 of 8) */
  int32_t *dps = NULL;
  int D = pp_timeline_model_replica_dps (src, &dps), n_rep = 0;
  if (D < 0)
    D = 0;
  double *val = calloc ((size_t) D * (size_t) (n_ranks > 0 ? n_ranks : 1) + 1, sizeof *val);
  double *b = calloc ((size_t) D * (size_t) (n_ranks > 0 ? n_ranks : 1) + 1, sizeof *b);
  int *ns = calloc ((size_t) D + 1, sizeof *ns);
  double *tmp = calloc ((size_t) D + 1, sizeof *tmp);
  int32_t *dp_of = calloc ((size_t) D + 1, sizeof *dp_of);
  if (D == 0 || val == NULL || b == NULL || ns == NULL || tmp == NULL || dp_of == NULL || n_ranks <= 0)
    goto done;
  /* each replica's, as its view reads it (its waits for a slower one idle) */
  pp_timeline_model_replica_step_bubbles (src, n_ranks, dps, D, b, ns);
  for (int k = 0; k < D; k++)
    if (ns[k] > 0)
      {
        memcpy (val + (size_t) n_rep * (size_t) n_ranks, b + (size_t) k * (size_t) n_ranks,
                (size_t) n_ranks * sizeof *val);
        dp_of[n_rep++] = dps[k];
      }
  for (int r = 0; r < n_ranks && n_rep > 0; r++)
    {
      /* the replicas that hold rank r (a bubble of -1: a replica without
       * that pipeline rank's process, as one node of a job holds): n of
       * them, 0 where none does */
      PpTimelineSpread *s = &out[r];
      int n = 0;
      for (int k = 0; k < n_rep; k++)
        {
          double x = val[(size_t) k * (size_t) n_ranks + (size_t) r];
          if (x < 0)
            continue;
          if (n == 0 || x < s->min)
            s->min = x;
          if (n == 0 || x > s->max)
            {
              s->max = x;
              s->max_dp = dp_of[k];
            }
          tmp[n++] = x;
        }
      s->n = n;
      if (n == 0)
        continue;
      qsort (tmp, (size_t) n, sizeof *tmp, cmp_double);
      s->median = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    }
done:
  free (dps);
  free (val);
  free (b);
  free (ns);
  free (tmp);
  free (dp_of);
  return n_rep;
}

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

static size_t
step_at (const int32_t *steps, size_t n, int32_t step)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (steps[mid] < step)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* How far largest (one of v[0, n)) lies after their median; v is reordered. */
static int64_t
lag_of (int64_t *v, size_t n, int64_t largest)
{
  return largest - median_i64 (v, n);
}

size_t
pp_timeline_slowest_replicas (const PpTimelineModel *src, PpTimelineSlowest **out)
{
  int n_places = pp_timeline_model_n_places (src), n_ranks = pp_timeline_model_n_ranks (src);
  size_t n_blocks = 0, n_steps = 0, n_out = 0;
  int32_t *steps = NULL, *dps = NULL;
  int64_t *end = NULL, *rep = NULL, *tmp = NULL;
  *out = NULL;
  if (n_places < 2 || !pp_timeline_model_has_replicas (src))
    return 0;
  /* replicas by the dp values held (dp 4 and 5 of 8), rep[] by position */
  int D = pp_timeline_model_replica_dps (src, &dps);
  if (D < 0)
    return SIZE_MAX;
  if (D < 2)
    {
      free (dps);
      return 0;
    }
  for (int i = 0; i < n_places; i++)
    {
      size_t ns;
      pp_timeline_model_place_spans (src, i, &ns);
      n_blocks += ns;
    }
  if ((steps = malloc ((n_blocks + 1) * sizeof *steps)) == NULL)
    {
      free (dps);
      return SIZE_MAX;
    }
  for (int i = 0; i < n_places; i++)
    {
      size_t ns;
      const PpSpan *s = pp_timeline_model_place_spans (src, i, &ns);
      for (size_t j = 0; j < ns; j++)
        if (pp_span_kind_is_block (s[j].kind) && s[j].step >= 0)
          steps[n_steps++] = s[j].step;
    }
  qsort (steps, n_steps, sizeof *steps, cmp_i32);
  {
    size_t k = 0;
    for (size_t j = 0; j < n_steps; j++)
      if (k == 0 || steps[k - 1] != steps[j])
        steps[k++] = steps[j];
    n_steps = k;
  }
  /* end[place][step]: its last block's end; rep[dp][step]: the replica's */
  end = malloc ((size_t) n_places * (n_steps + 1) * sizeof *end);
  rep = malloc ((size_t) D * (n_steps + 1) * sizeof *rep);
  tmp = malloc ((size_t) (n_places > D ? n_places : D) * sizeof *tmp);
  *out = malloc ((n_steps + 1) * ((size_t) n_ranks + 1) * sizeof **out);
  if (n_steps == 0 || end == NULL || rep == NULL || tmp == NULL || *out == NULL)
    {
      free (*out);
      *out = NULL;
      n_out = n_steps == 0 ? 0 : SIZE_MAX;
      goto done;
    }
  for (size_t j = 0; j < (size_t) n_places * n_steps; j++)
    end[j] = INT64_MIN;
  for (size_t j = 0; j < (size_t) D * n_steps; j++)
    rep[j] = INT64_MIN;
  for (int i = 0; i < n_places; i++)
    {
      size_t ns;
      const PpSpan *s = pp_timeline_model_place_spans (src, i, &ns);
      int32_t dp = pp_timeline_model_place (src, i)->coord[PP_TRACE_MESH_DP];
      const int32_t *at = bsearch (&dp, dps, (size_t) D, sizeof *dps, cmp_dp);
      size_t di = (size_t) (at - dps);
      for (size_t j = 0; j < ns; j++)
        if (pp_span_kind_is_block (s[j].kind) && s[j].step >= 0)
          {
            size_t k = step_at (steps, n_steps, s[j].step);
            int64_t *e = &end[(size_t) i * n_steps + k];
            if (s[j].end_ns > *e)
              *e = s[j].end_ns;
            if (s[j].end_ns > rep[di * n_steps + k])
              rep[di * n_steps + k] = s[j].end_ns;
          }
    }
  for (size_t k = 0; k < n_steps; k++)
    {
      /* the whole step: the replica that ended last */
      size_t n = 0;
      int64_t best = INT64_MIN;
      int best_dp = -1;
      for (int di = 0; di < D; di++)
        if (rep[(size_t) di * n_steps + k] != INT64_MIN)
          {
            tmp[n++] = rep[(size_t) di * n_steps + k];
            if (tmp[n - 1] > best)
              {
                best = tmp[n - 1];
                best_dp = dps[di];
              }
          }
      if (n < 2)
        continue;
      int32_t who = -1;
      for (int i = 0; i < n_places && who < 0; i++)
        if (pp_timeline_model_place (src, i)->coord[PP_TRACE_MESH_DP] == best_dp
            && end[(size_t) i * n_steps + k] == best)
          who = pp_timeline_model_place (src, i)->process;
      (*out)[n_out++] = (PpTimelineSlowest) { steps[k], -1, who, best_dp, best, lag_of (tmp, n, best) };
      /* each pipeline rank: its process whose last block ended last */
      for (int i = 0; i < n_places;)
        {
          int r = pp_timeline_model_place (src, i)->rank, j = i;
          size_t m = 0;
          int64_t b = INT64_MIN;
          int bi = -1;
          for (; j < n_places && pp_timeline_model_place (src, j)->rank == r; j++)
            if (end[(size_t) j * n_steps + k] != INT64_MIN)
              {
                tmp[m++] = end[(size_t) j * n_steps + k];
                if (tmp[m - 1] > b)
                  {
                    b = tmp[m - 1];
                    bi = j;
                  }
              }
          if (m >= 2)
            {
              const PpTraceProcess *p = pp_timeline_model_place (src, bi);
              (*out)[n_out++] = (PpTimelineSlowest) { steps[k], r, p->process, p->coord[PP_TRACE_MESH_DP],
                                                      b, lag_of (tmp, m, b) };
            }
          i = j;
        }
    }
done:
  free (dps);
  free (steps);
  free (end);
  free (rep);
  free (tmp);
  return n_out;
}
