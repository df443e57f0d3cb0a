/* pp-timeline-model.c — a run's trace in memory, for drawing and stats.
 *
 * Spans live per rank in one array sorted by start.  Live traces deliver
 * spans nearly in order, so an add is an append in the common case and a
 * binary search plus memmove of the short tail otherwise: queries stay
 * const and never sort.
 *
 * A job whose pipeline ranks each run in several processes (replicas:
 * PROCESS frames, trace format 1.4): a rank's row holds one process, the
 * lowest place of its rank (dp first, then tp, cp, ep), and every number
 * computed over the ranks is that replica's; a lower place that comes
 * after another was shown replaces it (its spans and memory go; a step
 * marker it gave stays).  Every placed process's spans are kept besides,
 * in its own list (procs), for the views that fold or unfold the replicas
 * (pp-timeline-fold.c builds them as models whose ranks are rows).
 */
#include "pp-analysis-loss.h"
#include "pp-timeline-model-private.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  PpSpan            *spans;          /* by start once settled (settle) */
  size_t             n_spans, cap_spans;
  size_t             n_sorted;       /* spans[0, n_sorted) are by start; the rest came after */
  int64_t            max_span_ns;
  int64_t            max_end_ns;
  int64_t            offset_ns;      /* the offset its spans are moved by (its shown process's) */
  int64_t            untagged_offset_ns;   /* the rank's CLOCK_OFFSET of no process */
  PpTimelinePlanned *plan;
  size_t             n_plan;
  double             peak_activation;
  int                peak_inflight;
  char               host[64];       /* RANK: where the rank ran; "" unknown */
  int64_t            lost_ns;        /* its stream ended abnormally here; INT64_MAX: not lost */
  /* the process whose items the row shows (-1: none placed yet) and its place */
  int32_t            shown_process;
  int32_t            shown_coord[PP_TRACE_MESH_DIMS];
  uint32_t           shown_flags;    /* PP_TRACE_PROCESS_*: its place was not read */
  /* A job of processes: the rank's spans no process tagged, on its
   * untagged clock, and how many of them its single process took in */
  PpSpan            *untagged;
  size_t             n_untagged, cap_untagged, n_adopted;
  /* activation bytes over time: every stride-th counter, at most
   * PP_TIMELINE_MEMORY_MAX (halved, stride doubled, when full) */
  PpTimelineMemorySample *mem;
  size_t             n_mem;
  unsigned           mem_stride, mem_skip;
} Rank;

typedef struct {
  uint32_t id;
  char    *name;
} String;

/* One process of a job of replicas: its place and its spans, by start once
 * settled, on the clock of its own CLOCK_OFFSET frames, or where it has
 * none, of its rank's untagged one (as cli-trace.c and pp-why-trace.c
 * read them). */
typedef struct {
  PpTraceProcess place;            /* numbered where its place was not read */
  PpTraceProcess read;             /* as its PROCESS frame said */
  int            placed;           /* its PROCESS frame came */
  int32_t        rank;             /* the pipeline rank of its spans, -1 not known */
  int            has_own_offset;
  int64_t        own_offset_ns;    /* its own CLOCK_OFFSET, when has_own_offset */
  Rank           r;                /* spans, n_spans, n_sorted, offset_ns used */
} Proc;

/* One replica's losses by step (NaN where unknown). */
typedef struct {
  int32_t dp;
  double *v;
  size_t  n;
} LossSeries;

/* A view's row: the pipeline rank it belongs to, the process it shows (-1:
 * folded), its label, and for a folded row one PpTimelineFold a span. */
typedef struct {
  int             rank, process, n_folded;
  char            label[40];
  PpTimelineFold *fold;
} Row;

typedef struct {
  int64_t t;
  int32_t step;
} StepMark;

struct _PpTimelineModel {
  int                has_desc;
  int                truncated;     /* read from a file that ends inside a frame */
  PpTraceDescription desc;
  Rank              *ranks;
  int                n_ranks, cap_ranks;
  size_t             n_spans_total;
  int64_t            start_ns, end_ns;   /* INT64_MAX / INT64_MIN until something is seen */
  int64_t            span_start_ns, span_end_ns;   /* the same, spans only */
  /* Plans arrive before any span in a file; they are kept as read (seconds)
   * and placed again when the origin moves (description seen later). */
  int64_t            plan_origin_ns;     /* INT64_MIN: not known yet */
  struct { PpTracePlanAction *a; size_t n; int timed; } *raw_plans;   /* [cap_ranks] */
  size_t             n_plan_items;       /* PLAN items taken */
  /* Step begin markers as they came (at most one per step after a
   * rebuild); step_starts/numbers are rebuilt from them, sorted, on the
   * first query after a change: a marker costs O(1) when added, and a
   * query O(S log S) once, whatever order the markers come in. */
  StepMark          *marks;
  size_t             n_marks, cap_marks;
  int                steps_dirty;
  int64_t           *step_starts;        /* ascending, steps with a marker */
  int32_t           *step_numbers;
  size_t             n_steps;
  double            *losses;           /* the job's loss a step: pp_analysis_loss_at of loss_acc */
  PpAnalysisLoss    *loss_acc;
  size_t             n_losses;
  size_t             n_loss_counters;    /* loss counters kept (bounds n_losses) */
  /* a job of replicas: each replica's losses by step, apart (never mixed) */
  LossSeries        *loss_series;
  size_t             n_loss_series;
  /* the block-edge counters (run delay, probe self, on CPU; 1.6, 1.7),
   * for the Why panel's runtime parts: every one (the arrays grow by
   * doubling, no cap: a long job's first steps are as much its run as its
   * last), who wrote each, and its time as read (edge_raw_ns).  edge's
   * times are edge_raw_ns on the clock of its process or rank as it now
   * stands: a CLOCK_OFFSET frame that comes later moves them as it moves
   * the spans (edge_retime, done at the next query: one pass, however
   * many frames came) */
  PpCounter         *edge;
  int32_t           *edge_process;
  int64_t           *edge_raw_ns;
  size_t             n_edge, cap_edge;
  int                edge_retime;
  int64_t            plan_ps, plan_pe;   /* compute extent of all plans; ps > pe: none */
  /* The extents are a cache: what only widens them (a span, a first plan)
   * widens them as it comes; what may shrink them (a plan replaced, a clock
   * offset, the plan's origin moved) marks them stale, and the next query
   * recomputes them once.  A file of 65,536 such frames then costs one
   * pass over the ranks, not one per frame. */
  int                extent_stale, plan_extent_stale;
  String            *strings;            /* sorted by id */
  size_t             n_strings, cap_strings;
  uint64_t           dropped;
  uint32_t           kinds_seen;         /* bit per PpSpanKind */
  char               first_host[64];     /* the first RANK frame's host */
  /* A live run marks a step once it is over: the step after the last
   * marked one begins, provisionally, at its first block */
  int32_t            max_marked_step;    /* -1: no marker yet */
  int32_t            provisional_step;   /* the step given a boundary from a block */
  int                several_hosts;      /* RANK frames name more than one host */
  /* format 1.4: the processes placed (a bit each), their count, and the
   * largest dp size a place says */
  uint8_t           *process_bits;
  int                n_processes;
  int32_t            n_replicas;         /* processes a pipeline rank has: dp x tp x cp x ep */
  int32_t            mesh_size[PP_TRACE_MESH_DIMS];   /* the largest size each place says */
  uint64_t           hidden_spans;       /* other replicas' spans left out */
  /* Every placed process's spans, for the views that fold or unfold the
   * replicas (pp-timeline-fold.c): procs by arrival, proc_at by process id
   * (-1: none), places the placed ones in mesh order, rebuilt on query. */
  Proc              *procs;
  int                n_procs, cap_procs;
  int32_t           *proc_at;            /* [PP_TRACE_MAX_PROCESSES] */
  int               *places;
  int                n_places, places_dirty;
  /* A view (pp_timeline_model_new_like): what each row is and says */
  int                is_view;
  Row               *rows;               /* [cap_ranks] */
  double            *row_bubbles;        /* [n_ranks]: step_bubbles' answer, when set */
  int                row_bubble_steps;
  char               note[256];
  int                n_unplaced;         /* processes whose place was not read */
  int                untagged_pending;   /* spans in a rank's untagged not yet adopted */
  /* Bumped by whatever changes what the model holds: a cache of a
   * whole-run figure is good while it stands (step_bubbles' answer,
   * asked by every frame's header, costs a pass and a sort over every
   * span: a million spans redrawn at any zoom paid it each time). */
  uint64_t           generation;
  struct { double *bubble; int n_ranks, n_steps; uint64_t generation; } step_cache;
  /* the edge counters per row, in time order (row_edge_counters): row r's
   * are c[at[r] .. at[r + 1]), RUN_DELAY_NS first; valid for generation */
  struct { PpCounter *c; size_t *at; int n_ranks, built; uint64_t generation; } row_edge;
};

static void settle (const PpTimelineModel *cm, int r);
static int  push_mark (PpTimelineModel *m, int64_t t, int step);
static int64_t offset_for (const PpTimelineModel *m, int r, int32_t process);
static void    adopt_untagged (const PpTimelineModel *cm);
static void    keep_untagged (PpTimelineModel *m, const PpSpan *in);



static int
plan_kind_is_compute (int kind)
{
  return kind == PP_TRACE_ACT_F || kind == PP_TRACE_ACT_B || kind == PP_TRACE_ACT_I
         || kind == PP_TRACE_ACT_W || kind == PP_TRACE_ACT_OVERLAP_F_B || kind == PP_TRACE_ACT_OPT;
}

/* A planned action that keeps its rank busy: compute, or data-parallel
 * communication (a plan from pipeline_order_with_comms), never bubble. */
int
pp_timeline_plan_action_is_work (int kind)
{
  return plan_kind_is_compute (kind) || kind == PP_TRACE_ACT_UNSHARD || kind == PP_TRACE_ACT_RESHARD
         || kind == PP_TRACE_ACT_REDUCE_GRAD || kind == PP_TRACE_ACT_WAIT_REDUCE_GRAD;
}

static int
plan_kind_is_busy (int kind)
{
  return pp_timeline_plan_action_is_work (kind);
}

/* Times from a file are clamped to [-PP_TIMELINE_MAX_ABS_NS,
 * PP_TIMELINE_MAX_ABS_NS] (about 73 years either side of the clock's zero):
 * the difference of any two, and a time plus such a difference, then fit in
 * an int64, so no consumer's arithmetic on them overflows. */
static int64_t
clamp_ns (int64_t t)
{
  return t > PP_TIMELINE_MAX_ABS_NS ? PP_TIMELINE_MAX_ABS_NS
         : t < -PP_TIMELINE_MAX_ABS_NS ? -PP_TIMELINE_MAX_ABS_NS : t;
}

/* a + b, both clamped first, clamped again (cannot overflow: |a + b| <= 2^62). */
static int64_t
add_ns (int64_t a, int64_t b)
{
  return clamp_ns (clamp_ns (a) + clamp_ns (b));
}

PpTimelineModel *
pp_timeline_model_new (void)
{
  PpTimelineModel *m = calloc (1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->start_ns = INT64_MAX;
  m->end_ns = INT64_MIN;
  m->span_start_ns = INT64_MAX;
  m->span_end_ns = INT64_MIN;
  m->plan_origin_ns = INT64_MIN;
  m->plan_ps = INT64_MAX;
  m->plan_pe = INT64_MIN;
  m->max_marked_step = -1;
  m->provisional_step = -1;
  m->n_replicas = 1;
  return m;
}

void
pp_timeline_model_free (PpTimelineModel *m)
{
  if (m == NULL)
    return;
  for (int r = 0; r < m->cap_ranks; r++)
    {
      free (m->ranks[r].spans);
      free (m->ranks[r].mem);
      free (m->ranks[r].untagged);
      free (m->ranks[r].plan);
      free (m->raw_plans[r].a);
    }
  for (int i = 0; i < m->n_procs; i++)
    free (m->procs[i].r.spans);
  free (m->procs);
  free (m->proc_at);
  free (m->places);
  if (m->rows != NULL)
    for (int r = 0; r < m->cap_ranks; r++)
      free (m->rows[r].fold);
  free (m->rows);
  free (m->row_bubbles);
  free (m->step_cache.bubble);
  free (m->row_edge.c);
  free (m->row_edge.at);
  free (m->ranks);
  free (m->process_bits);
  free (m->raw_plans);
  free (m->marks);
  free (m->step_starts);
  free (m->step_numbers);
  free (m->losses);
  for (size_t i = 0; i < m->n_loss_series; i++)
    free (m->loss_series[i].v);
  free (m->loss_series);
  pp_analysis_loss_free (m->loss_acc);
  free (m->edge);
  free (m->edge_process);
  free (m->edge_raw_ns);
  for (size_t i = 0; i < m->n_strings; i++)
    free (m->strings[i].name);
  free (m->strings);
  free (m);
}

/* Makes rank r exist (and every rank below it); 0, or -1 out of memory. */
static int
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

static void
see_time (PpTimelineModel *m, int64_t a, int64_t b)
{
  if (a < m->start_ns)
    m->start_ns = a;
  if (b > m->end_ns)
    m->end_ns = b;
}

/* Recomputes the extent from scratch (after a clock offset moved a rank). */
static void
recompute_extent (PpTimelineModel *m)
{
  m->start_ns = INT64_MAX;
  m->end_ns = INT64_MIN;
  m->span_start_ns = INT64_MAX;
  m->span_end_ns = INT64_MIN;
  for (int r = 0; r < m->n_ranks; r++)
    {
      const Rank *rk = &m->ranks[r];
      settle (m, r);
      if (rk->n_spans > 0)
        {
          see_time (m, rk->spans[0].start_ns, rk->max_end_ns);
          if (rk->spans[0].start_ns < m->span_start_ns)
            m->span_start_ns = rk->spans[0].start_ns;
          if (rk->max_end_ns > m->span_end_ns)
            m->span_end_ns = rk->max_end_ns;
        }
      for (size_t k = 0; k < rk->n_plan; k++)
        see_time (m, rk->plan[k].start_ns, rk->plan[k].end_ns);
    }
  for (size_t k = 0; k < m->n_marks; k++)
    see_time (m, m->marks[k].t, m->marks[k].t);
}

static int64_t
seconds_to_ns (double s)
{
  if (!isfinite (s))
    return 0;
  double ns = s * 1e9;
  if (ns > (double) PP_TIMELINE_MAX_ABS_NS)
    return PP_TIMELINE_MAX_ABS_NS;
  if (ns < -(double) PP_TIMELINE_MAX_ABS_NS)
    return -PP_TIMELINE_MAX_ABS_NS;
  return (int64_t) llround (ns);
}

/* The work extent of all plans (what planned_bubble measures over: the
 * plan's step, its data-parallel actions included), kept so that a query
 * is one rank's plan, not every rank's. */
static void
recompute_plan_extent (PpTimelineModel *m)
{
  m->plan_ps = INT64_MAX;
  m->plan_pe = INT64_MIN;
  for (int r = 0; r < m->n_ranks; r++)
    for (size_t k = 0; k < m->ranks[r].n_plan; k++)
      if (plan_kind_is_busy (m->ranks[r].plan[k].kind))
        {
          if (m->ranks[r].plan[k].start_ns < m->plan_ps)
            m->plan_ps = m->ranks[r].plan[k].start_ns;
          if (m->ranks[r].plan[k].end_ns > m->plan_pe)
            m->plan_pe = m->ranks[r].plan[k].end_ns;
        }
}

/* The plan extent widened by rank r's placed plan (its first: nothing shrinks). */
static void
widen_plan_extent (PpTimelineModel *m, int r)
{
  const Rank *rk = &m->ranks[r];
  for (size_t k = 0; k < rk->n_plan; k++)
    if (plan_kind_is_busy (rk->plan[k].kind))
      {
        if (rk->plan[k].start_ns < m->plan_ps)
          m->plan_ps = rk->plan[k].start_ns;
        if (rk->plan[k].end_ns > m->plan_pe)
          m->plan_pe = rk->plan[k].end_ns;
      }
}

/* Recomputes the stale extents before a query reads them: a cache, like
 * settle's sorting, so queries keep a const model. */
static void
fresh_extents (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (m->extent_stale)
    {
      recompute_extent (m);
      m->extent_stale = 0;
    }
  if (m->plan_extent_stale)
    {
      recompute_plan_extent (m);
      m->plan_extent_stale = 0;
    }
}

/* Places rank r's stored plan on the spans' clock. */
static int
place_plan (PpTimelineModel *m, int r)
{
  Rank *rk = &m->ranks[r];
  /* A plan without times is the order only: nothing to place in time. */
  size_t n = m->raw_plans[r].timed ? m->raw_plans[r].n : 0;
  PpTimelinePlanned *p;

  free (rk->plan);
  rk->plan = NULL;
  rk->n_plan = 0;
  if (n == 0 || m->plan_origin_ns == INT64_MIN)
    return 0;
  p = malloc (n * sizeof *p);
  if (p == NULL)
    return -1;
  for (size_t k = 0; k < n; k++)
    {
      const PpTracePlanAction *a = &m->raw_plans[r].a[k];
      p[k].kind = a->kind;
      p[k].stage = a->stage;
      p[k].microbatch = a->microbatch;
      p[k].sub_kind = a->sub_kind;
      p[k].sub_stage = a->sub_stage;
      p[k].sub_microbatch = a->sub_microbatch;
      p[k].start_ns = add_ns (m->plan_origin_ns, seconds_to_ns (a->planned_start));
      p[k].end_ns = add_ns (m->plan_origin_ns, seconds_to_ns (a->planned_end));
      if (p[k].end_ns < p[k].start_ns)
        p[k].end_ns = p[k].start_ns;
      see_time (m, p[k].start_ns, p[k].end_ns);
    }
  rk->plan = p;
  rk->n_plan = n;
  return 0;
}

static int
set_plan_origin (PpTimelineModel *m, int64_t origin)
{
  if (origin == m->plan_origin_ns)
    return 0;
  m->plan_origin_ns = clamp_ns (origin);
  for (int r = 0; r < m->n_ranks; r++)
    if (place_plan (m, r) != 0)
      return -1;
  m->extent_stale = 1;
  m->plan_extent_stale = 1;
  return 0;
}

static int
add_plan (PpTimelineModel *m, const PpTraceItem *item)
{
  int r = item->plan.rank;
  size_t n = item->plan.n_actions;

  if (ensure_rank (m, r) != 0)
    return 0;
  m->n_plan_items++;
  /* a replaced plan may have held either extent */
  if (m->ranks[r].n_plan > 0)
    m->extent_stale = m->plan_extent_stale = 1;
  free (m->raw_plans[r].a);
  m->raw_plans[r].a = NULL;
  m->raw_plans[r].n = 0;
  m->raw_plans[r].timed = item->plan.has_timeline != 0;
  /* kept timed or not: an untimed plan is the order the why analysis
   * builds the schedule from */
  if (n > 0)
    {
      m->raw_plans[r].a = malloc (n * sizeof *m->raw_plans[r].a);
      if (m->raw_plans[r].a == NULL)
        return 0;
      memcpy (m->raw_plans[r].a, item->plan.actions, n * sizeof *m->raw_plans[r].a);
      m->raw_plans[r].n = n;
    }
  if (place_plan (m, r) != 0)
    return 0;
  widen_plan_extent (m, r);
  return 1;
}

/* Sorts a rank's spans by start once more have come out of order: the
 * tail sorted (stable, by merging), then merged with the sorted prefix,
 * which came first (so equal starts keep their arrival order).  O(n) a
 * query plus O(k log k) for the k that came since: queries take a const
 * model, and sort it in place as a cache (the model is one thread's). */
static void
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

static void
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
static void
append_span (Rank *rk, const PpSpan *in, int64_t offset)
{
  PpSpan s = *in;
  s.start_ns = add_ns (s.start_ns, offset);
  s.end_ns = add_ns (s.end_ns, offset);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  if (rk->n_spans == rk->cap_spans)
    {
      size_t cap = rk->cap_spans ? 2 * rk->cap_spans : 256;
      PpSpan *n = realloc (rk->spans, cap * sizeof *n);
      if (n == NULL)
        return;
      rk->spans = n;
      rk->cap_spans = cap;
    }
  if (rk->n_sorted == rk->n_spans
      && (rk->n_spans == 0 || rk->spans[rk->n_spans - 1].start_ns <= s.start_ns))
    rk->n_sorted++;
  rk->spans[rk->n_spans++] = s;
}

/* A span onto its rank's row, moved by offset (its clock's: offset_for). */
static void
add_span (PpTimelineModel *m, const PpSpan *in, int64_t offset)
{
  PpSpan s = *in;
  Rank *rk;

  if (ensure_rank (m, s.rank) != 0)
    return;
  rk = &m->ranks[s.rank];
  s.start_ns = add_ns (s.start_ns, offset);
  s.end_ns = add_ns (s.end_ns, offset);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  append_span (rk, &s, 0);   /* moved above: the rest reads its times */
  if (m->max_marked_step >= 0 && s.step == m->max_marked_step + 1 && s.step != m->provisional_step
      && pp_span_kind_is_block (s.kind))
    {
      m->provisional_step = s.step;
      push_mark (m, s.start_ns, s.step);
    }
  m->n_spans_total++;
  if (s.kind < 32)
    m->kinds_seen |= 1u << s.kind;
  if (s.end_ns - s.start_ns > rk->max_span_ns)
    rk->max_span_ns = s.end_ns - s.start_ns;
  if (s.end_ns > rk->max_end_ns)
    rk->max_end_ns = s.end_ns;
  see_time (m, s.start_ns, s.end_ns);
  if (s.start_ns < m->span_start_ns)
    m->span_start_ns = s.start_ns;
  if (s.end_ns > m->span_end_ns)
    m->span_end_ns = s.end_ns;
  /* No description: the plan's origin is the first span's start. */
  if (!m->has_desc && m->plan_origin_ns == INT64_MIN)
    set_plan_origin (m, s.start_ns);
}

static int
cmp_mark_step (const void *a, const void *b)
{
  const StepMark *x = a, *y = b;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

static int
cmp_mark_time (const void *a, const void *b)
{
  const StepMark *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

/* Sorts the markers: one per step (its earliest begin), and the steps in
 * time order (a later step that begins before an earlier one, clock skew,
 * is kept in time order).  O(S log S) for S markers, once per change. */
static int
rebuild_steps (PpTimelineModel *m)
{
  size_t n = 0;

  m->steps_dirty = 0;
  if (m->n_marks > 1)
    qsort (m->marks, m->n_marks, sizeof *m->marks, cmp_mark_step);
  for (size_t i = 0; i < m->n_marks; i++)
    if (n == 0 || m->marks[n - 1].step != m->marks[i].step)
      m->marks[n++] = m->marks[i];
  m->n_marks = n;
  int64_t *st = realloc (m->step_starts, (n + 1) * sizeof *st);
  if (st == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  m->step_starts = st;
  int32_t *nums = realloc (m->step_numbers, (n + 1) * sizeof *nums);
  if (nums == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  m->step_numbers = nums;
  StepMark *byt = malloc ((n + 1) * sizeof *byt);
  if (byt == NULL)
    {
      m->n_steps = 0;
      return -1;
    }
  memcpy (byt, m->marks, n * sizeof *byt);
  if (n > 1)
    qsort (byt, n, sizeof *byt, cmp_mark_time);
  for (size_t i = 0; i < n; i++)
    {
      st[i] = byt[i].t;
      nums[i] = byt[i].step;
    }
  free (byt);
  m->n_steps = n;
  return 0;
}

/* Queries are const for their callers; the sorted steps are a cache. */
static void
ensure_steps (const PpTimelineModel *m)
{
  if (m != NULL && m->steps_dirty)
    rebuild_steps ((PpTimelineModel *) m);
}

static int
add_step_marker (PpTimelineModel *m, const PpTraceItem *item)
{
  int step = item->step_marker.step;
  int64_t t = item->step_marker.time_ns;

  if (ensure_rank (m, item->step_marker.rank) != 0)
    return 0;
  t = add_ns (t, offset_for (m, item->step_marker.rank, item->process));
  if (item->step_marker.phase != PP_TRACE_STEP_BEGIN || step < 0)
    return 0;
  if (step > m->max_marked_step)
    m->max_marked_step = step;
  /* a step may begin before its first block (a step() call, an imported
   * ProfilerStep): the run's extent holds it, so no time before zero */
  see_time (m, t, t);
  return push_mark (m, t, step);
}

/* A step begins at t (the earliest a step is given wins at the rebuild). */
static int
push_mark (PpTimelineModel *m, int64_t t, int step)
{
  /* Every rank marks every step: after a rebuild there is one entry a
   * step again, so the array stays within twice what a rebuild leaves
   * plus the markers since. */
  if (m->n_marks == m->cap_marks)
    {
      if (m->steps_dirty && m->n_marks >= 1024)
        rebuild_steps (m);
      /* Grow unless the rebuild freed half: the next rebuild is then at
       * least cap/2 markers away (amortized O(log S) a marker). */
      if (m->cap_marks == 0 || m->n_marks > m->cap_marks / 2)
        {
          size_t cap = m->cap_marks ? 2 * m->cap_marks : 64;
          StepMark *n = realloc (m->marks, cap * sizeof *n);
          if (n == NULL)
            return 0;
          m->marks = n;
          m->cap_marks = cap;
        }
    }
  m->marks[m->n_marks].t = t;
  m->marks[m->n_marks].step = step;
  m->n_marks++;
  m->steps_dirty = 1;
  return 1;
}

/* A rank's activation bytes at a counter's time (on the common clock);
 * memory bounded whatever the number of counters: past the bound, every
 * other sample goes and only every stride-th is kept from then on (the
 * peak is kept exactly apart). */
static void
add_memory_sample (Rank *rk, const PpCounter *c, int64_t offset)
{
  if (rk->mem_stride == 0)
    rk->mem_stride = 1;
  if (rk->mem_skip++ % rk->mem_stride != 0 || !isfinite (c->value))
    return;
  if (rk->mem == NULL && (rk->mem = malloc (PP_TIMELINE_MEMORY_MAX * sizeof *rk->mem)) == NULL)
    return;
  if (rk->n_mem == PP_TIMELINE_MEMORY_MAX)
    {
      for (size_t i = 0; i < PP_TIMELINE_MEMORY_MAX / 2; i++)
        rk->mem[i] = rk->mem[2 * i];
      rk->n_mem = PP_TIMELINE_MEMORY_MAX / 2;
      rk->mem_stride *= 2;
    }
  rk->mem[rk->n_mem++] = (PpTimelineMemorySample) { add_ns (c->time_ns, offset), c->value };
}

/* Keeps a block-edge counter, on its clock as it now stands.  Out of
 * memory the counter is not kept (the arrays as they were). */
static int
add_edge_counter (PpTimelineModel *m, const PpCounter *c, int32_t process)
{
  if (c->rank < 0 || c->rank >= PP_TRACE_MAX_RANKS)
    return 0;
  if (m->n_edge == m->cap_edge)
    {
      size_t cap = m->cap_edge ? 2 * m->cap_edge : 256;
      PpCounter *e = realloc (m->edge, cap * sizeof *e);
      if (e == NULL)
        return 0;
      m->edge = e;
      int32_t *p = realloc (m->edge_process, cap * sizeof *p);
      if (p == NULL)
        return 0;
      m->edge_process = p;
      int64_t *raw = realloc (m->edge_raw_ns, cap * sizeof *raw);
      if (raw == NULL)
        return 0;
      m->edge_raw_ns = raw;
      m->cap_edge = cap;
    }
  m->edge[m->n_edge] = *c;
  m->edge[m->n_edge].time_ns = add_ns (c->time_ns, offset_for (m, c->rank, process));
  m->edge_raw_ns[m->n_edge] = c->time_ns;
  m->edge_process[m->n_edge++] = process;
  return 1;
}

/* Puts every edge counter on its clock as it now stands, after a
 * CLOCK_OFFSET frame (the offset an item gets is offset_for's, as for a
 * span of the same rank and process). */
static void
retime_edges (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (!m->edge_retime)
    return;
  for (size_t i = 0; i < m->n_edge; i++)
    m->edge[i].time_ns = add_ns (m->edge_raw_ns[i], offset_for (m, m->edge[i].rank, m->edge_process[i]));
  m->edge_retime = 0;
}

size_t
pp_timeline_model_edge_counters (const PpTimelineModel *m, const PpCounter **counters,
                                 const int32_t **process)
{
  if (m != NULL)
    retime_edges (m);
  *counters = m != NULL ? m->edge : NULL;
  if (process != NULL)
    *process = m != NULL ? m->edge_process : NULL;
  return m != NULL ? m->n_edge : 0;
}

/* The row edge counter i belongs to: its rank's, when it is the process
 * the row shows (a view's folded row shows no one process: none); -1. */
static int
edge_row (const PpTimelineModel *m, size_t i)
{
  const PpCounter *c = &m->edge[i];
  int32_t p = m->edge_process[i];
  if (m->is_view)
    {
      for (int r = 0; r < m->n_ranks; r++)
        if (m->rows[r].process >= 0 && c->rank == m->rows[r].rank && p == m->rows[r].process)
          return r;
      return -1;
    }
  if (c->rank < 0 || c->rank >= m->n_ranks)
    return -1;
  int32_t shown = m->ranks[c->rank].shown_process;
  return shown < 0 || p < 0 || p == shown ? c->rank : -1;
}

static int
cmp_edge (const void *x, const void *y)
{
  const PpCounter *a = x, *b = y;
  /* RUN_DELAY_NS first (the host lane's), then each kind in time order */
  if (a->kind != b->kind)
    return a->kind == PP_COUNTER_RUN_DELAY_NS ? -1 : b->kind == PP_COUNTER_RUN_DELAY_NS ? 1
           : a->kind < b->kind ? -1 : 1;
  return a->time_ns < b->time_ns ? -1 : a->time_ns > b->time_ns;
}

/* Sorts the edge counters into rows: a counting pass, a filling pass,
 * a sort per row. */
static int
build_row_edges (PpTimelineModel *m)
{
  int nr = m->n_ranks;
  size_t *at = calloc ((size_t) nr + 2, sizeof *at);
  PpCounter *c = NULL;

  if (at == NULL)
    return -1;
  for (size_t i = 0; i < m->n_edge; i++)
    {
      int r = edge_row (m, i);
      if (r >= 0)
        at[r + 1]++;
    }
  for (int r = 0; r < nr; r++)
    at[r + 1] += at[r];
  if (at[nr] > 0 && (c = malloc (at[nr] * sizeof *c)) == NULL)
    {
      free (at);
      return -1;
    }
  /* at shifted up one: fill[r] (= at[r + 1]) is where row r's next goes
   * while filling, and its end once filled */
  size_t *fill = at + 1;
  for (int r = nr; r > 0; r--)
    at[r] = at[r - 1];
  for (size_t i = 0; i < m->n_edge; i++)
    {
      int r = edge_row (m, i);
      if (r < 0)
        continue;
      c[fill[r]] = m->edge[i];
      c[fill[r]++].rank = r;   /* the row's: its spans carry the row too */
    }
  for (int r = 0; r < nr; r++)
    qsort (c + at[r], at[r + 1] - at[r], sizeof *c, cmp_edge);
  free (m->row_edge.c);
  free (m->row_edge.at);
  m->row_edge.c = c;
  m->row_edge.at = at;
  m->row_edge.n_ranks = nr;
  return 0;
}

/* Kept until the model changes (generation): the host lane asks every
 * frame, for every row. */
const PpCounter *
pp_timeline_model_row_edge_counters (const PpTimelineModel *m, int r, size_t *n_delay, size_t *n)
{
  PpTimelineModel *mm = (PpTimelineModel *) m;

  *n = *n_delay = 0;
  if (m == NULL || r < 0 || r >= m->n_ranks || m->n_edge == 0)
    return NULL;
  if (!m->row_edge.built || m->row_edge.generation != m->generation || m->row_edge.n_ranks != m->n_ranks)
    {
      retime_edges (m);
      if (build_row_edges (mm) != 0)
        return NULL;
      mm->row_edge.built = 1;
      mm->row_edge.generation = m->generation;
    }
  const PpCounter *c = m->row_edge.c + m->row_edge.at[r];
  *n = m->row_edge.at[r + 1] - m->row_edge.at[r];
  while (*n_delay < *n && c[*n_delay].kind == PP_COUNTER_RUN_DELAY_NS)
    ++*n_delay;
  return *n ? c : NULL;
}

/* c's value at its step of the step-indexed v[*n] (grown, NaN between):
 * 1, or 0 out of memory. */
static int
store_loss (double **v, size_t *n, const PpCounter *c)
{
  if ((size_t) c->step >= *n)
    {
      size_t want = (size_t) c->step + 1;
      double *l = realloc (*v, want * sizeof *l);
      if (l == NULL)
        return 0;
      for (size_t i = *n; i < want; i++)
        l[i] = NAN;
      *v = l;
      *n = want;
    }
  (*v)[c->step] = c->value;
  return 1;
}

/* Replica dp's loss series, added in dp order; NULL out of memory or past
 * PP_TRACE_MAX_PROCESSES series. */
static LossSeries *
loss_series_of (PpTimelineModel *m, int32_t dp)
{
  size_t i = 0;
  while (i < m->n_loss_series && m->loss_series[i].dp < dp)
    i++;
  if (i < m->n_loss_series && m->loss_series[i].dp == dp)
    return &m->loss_series[i];
  if (m->n_loss_series >= PP_TRACE_MAX_PROCESSES)
    return NULL;
  LossSeries *ls = realloc (m->loss_series, (m->n_loss_series + 1) * sizeof *ls);
  if (ls == NULL)
    return NULL;
  m->loss_series = ls;
  memmove (&ls[i + 1], &ls[i], (m->n_loss_series - i) * sizeof *ls);
  ls[i] = (LossSeries) { dp, NULL, 0 };
  m->n_loss_series++;
  return &ls[i];
}

static int
add_counter (PpTimelineModel *m, const PpCounter *c, int32_t process)
{
  switch (c->kind)
    {
    case PP_COUNTER_RUN_DELAY_NS:
    case PP_COUNTER_PROBE_SELF_NS:
    case PP_COUNTER_ON_CPU_NS:
      /* the Why panel's and the host lane's (one store: pp-why-gaps.c reads it) */
      return add_edge_counter (m, c, process);
    case PP_COUNTER_LOSS:
    case PP_COUNTER_LOSS_PART:
      /* Losses are indexed by step; the array may run ahead of the loss
       * counters seen by a bounded factor only, so one counter with a huge
       * step cannot cost megabytes (a loss that far out is not kept). */
      if (c->step < 0 || !isfinite (c->value)
          || (size_t) c->step >= PP_TIMELINE_LOSS_SLACK + 16 * (m->n_loss_counters + 1))
        return 0;
      if (m->loss_acc == NULL && (m->loss_acc = pp_analysis_loss_new ()) == NULL)
        return 0;
      {
        /* the job's loss over its replicas (pp-analysis-loss.h): a
         * replica is the process's dp index */
        const Proc *pr = process >= 0 && m->proc_at != NULL && process < PP_TRACE_MAX_PROCESSES
                         && m->proc_at[process] >= 0 ? &m->procs[m->proc_at[process]] : NULL;
        int kind = pp_analysis_loss_kind (m->loss_acc), n_rep = pp_analysis_loss_n_replicas (m->loss_acc);
        if (pp_analysis_loss_add (m->loss_acc, c, pr != NULL && pr->placed ? pr->place.coord[PP_TRACE_MESH_DP] : -1) < 0)
          return 0;
        if (pp_analysis_loss_kind (m->loss_acc) != kind || pp_analysis_loss_n_replicas (m->loss_acc) != n_rep)
          for (size_t i = 0; i < m->n_losses; i++)   /* the headline's kind or replicas changed */
            m->losses[i] = pp_analysis_loss_at (m->loss_acc, (int32_t) i);
      }
      if ((size_t) c->step >= m->n_losses)
        {
          size_t n = (size_t) c->step + 1;
          double *l = realloc (m->losses, n * sizeof *l);
          if (l == NULL)
            return 0;
          for (size_t i = m->n_losses; i < n; i++)
            l[i] = NAN;
          m->losses = l;
          m->n_losses = n;
        }
      m->losses[c->step] = pp_analysis_loss_at (m->loss_acc, c->step);
      {
        /* and each replica's own series apart (the chart's line a
         * replica): never two replicas' values on one line */
        const PpTraceProcess *p = pp_timeline_model_process_place (m, process);
        LossSeries *ls = p != NULL ? loss_series_of (m, p->coord[PP_TRACE_MESH_DP]) : NULL;
        if (ls != NULL)
          store_loss (&ls->v, &ls->n, c);
      }
      m->n_loss_counters++;
      return 1;
    case PP_COUNTER_ACTIVATION_BYTES:
      if (ensure_rank (m, c->rank) != 0)
        return 0;
      if (c->value > m->ranks[c->rank].peak_activation)
        m->ranks[c->rank].peak_activation = c->value;
      add_memory_sample (&m->ranks[c->rank], c, offset_for (m, c->rank, process));
      return 1;
    case PP_COUNTER_INFLIGHT:
      if (ensure_rank (m, c->rank) != 0)
        return 0;
      /* a count: a hostile value past an int is held at INT_MAX, not cast */
      if (c->value > m->ranks[c->rank].peak_inflight)
        m->ranks[c->rank].peak_inflight = c->value < (double) INT_MAX ? (int) c->value : INT_MAX;
      return 1;
    default:
      return 0;
    }
}

/* Moves rank r's row (its spans and memory) to offset. */
static int
add_clock_offset (PpTimelineModel *m, int r, int64_t offset)
{
  Rank *rk;
  int64_t delta;

  if (ensure_rank (m, r) != 0)
    return 0;
  rk = &m->ranks[r];
  offset = clamp_ns (offset);
  delta = offset - rk->offset_ns;   /* both clamped: fits */
  if (delta == 0)
    return 0;
  rk->offset_ns = offset;
  /* Moving every span by the same amount keeps them sorted (clamping at
   * the ends keeps the order too). */
  rk->max_end_ns = INT64_MIN;
  rk->max_span_ns = 0;
  for (size_t i = 0; i < rk->n_mem; i++)
    rk->mem[i].t = add_ns (rk->mem[i].t, delta);
  for (size_t i = 0; i < rk->n_spans; i++)
    {
      PpSpan *sp = &rk->spans[i];
      sp->start_ns = add_ns (sp->start_ns, delta);
      sp->end_ns = add_ns (sp->end_ns, delta);
      if (sp->end_ns > rk->max_end_ns)
        rk->max_end_ns = sp->end_ns;
      if (sp->end_ns - sp->start_ns > rk->max_span_ns)
        rk->max_span_ns = sp->end_ns - sp->start_ns;
    }
  m->extent_stale = 1;
  return rk->n_spans > 0;
}

static int
add_string (PpTimelineModel *m, uint32_t id, const char *name)
{
  size_t lo = 0, hi = m->n_strings;
  char *copy;

  if (id == 0)
    return 0;
  copy = strdup (name);
  if (copy == NULL)
    return 0;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (m->strings[mid].id < id)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < m->n_strings && m->strings[lo].id == id)
    {
      free (m->strings[lo].name);   /* the last one for an id wins */
      m->strings[lo].name = copy;
      return 1;
    }
  if (m->n_strings == m->cap_strings)
    {
      size_t cap = m->cap_strings ? 2 * m->cap_strings : 64;
      String *n = realloc (m->strings, cap * sizeof *n);
      if (n == NULL)
        {
          free (copy);
          return 0;
        }
      m->strings = n;
      m->cap_strings = cap;
    }
  memmove (m->strings + lo + 1, m->strings + lo, (m->n_strings - lo) * sizeof *m->strings);
  m->strings[lo].id = id;
  m->strings[lo].name = copy;
  m->n_strings++;
  return 1;
}

/* Whether an item of rank r written by process (-1: not said) is the
 * shown replica's: untagged items and those of a rank no process has
 * placed yet are. */
static int
is_shown (PpTimelineModel *m, int r, int32_t process)
{
  if (process < 0 || r < 0 || r >= m->n_ranks)
    return 1;
  int32_t shown = m->ranks[r].shown_process;
  return shown < 0 || shown == process;
}

/* Whether place a (coordinates, global rank) comes before place b on
 * their rank: dp, then tp, cp, ep, then the global rank. */
static int
place_before (const int32_t *a, int32_t pa, const int32_t *b, int32_t pb)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (a[d] != b[d])
      return a[d] < b[d];
  return pa < pb;
}

/* Rank r's row shows process p from now on: the spans of another replica
 * it showed go, and p's, kept in its list whatever was shown, come back
 * (a live stream may bring a lower place after others' spans).  Returns 1
 * if what is drawn changed. */
static int
show_process (PpTimelineModel *m, int r, Proc *p)
{
  Rank *rk = &m->ranks[r];
  int same = rk->shown_process == p->place.process;
  memcpy (rk->shown_coord, p->place.coord, sizeof rk->shown_coord);
  rk->shown_flags = p->place.flags;
  if (same)
    return 0;
  int had = rk->shown_process >= 0;
  rk->shown_process = p->place.process;
  if (!had)
    return 1;   /* the row held the rank's items so far, all of them: they stay */
  m->hidden_spans += rk->n_spans;
  m->n_spans_total -= rk->n_spans;
  rk->n_spans = rk->n_sorted = 0;
  rk->max_span_ns = 0;
  rk->max_end_ns = INT64_MIN;
  rk->n_mem = 0;
  rk->peak_activation = -1;
  rk->peak_inflight = -1;
  m->extent_stale = 1;
  rk->offset_ns = p->r.offset_ns;
  settle_rank (&p->r);
  for (size_t i = 0; i < p->r.n_spans; i++)
    add_span (m, &p->r.spans[i], 0);   /* on its clock already */
  m->hidden_spans -= p->r.n_spans < m->hidden_spans ? p->r.n_spans : m->hidden_spans;
  return 1;
}

/* A PROCESS frame (its place already kept: proc_place): counted; the row
 * of its rank shows it when it is the first placed there or a lower place
 * than the one shown.  Returns 1 if what is drawn changed. */
static int
add_process (PpTimelineModel *m, const PpTraceProcess *in)
{
  if (in->process < 0 || in->process >= PP_TRACE_MAX_PROCESSES || ensure_rank (m, in->rank) != 0)
    return 0;
  if (m->process_bits == NULL && (m->process_bits = calloc (PP_TRACE_MAX_PROCESSES / 8 + 1, 1)) == NULL)
    return 0;
  if (!(m->process_bits[in->process / 8] & (1u << (in->process % 8))))
    {
      m->process_bits[in->process / 8] |= (uint8_t) (1u << (in->process % 8));
      m->n_processes++;
    }
  Proc *pr = m->proc_at != NULL && m->proc_at[in->process] >= 0 ? &m->procs[m->proc_at[in->process]] : NULL;
  if (pr == NULL || !pr->placed)
    return 0;
  /* as numbered where its place was not read (proc_place) */
  const PpTraceProcess *p = &pr->place;
  /* tensor, context and expert ranks are replicas of a row too: the row
   * shows one process of them all */
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (p->size[d] > m->mesh_size[d])
      m->mesh_size[d] = p->size[d];
  /* saturated: places that disagree may make more than 64 bits hold */
  int64_t n = pp_trace_mesh_count (m->mesh_size, PP_TRACE_MESH_DP);
  if (n > m->n_replicas)
    m->n_replicas = (int32_t) (n < INT32_MAX ? n : INT32_MAX);
  Rank *rk = &m->ranks[p->rank];
  Proc *low = pr;
  if (m->n_unplaced > 0)
    {
      /* a number given may have moved every place of the rank */
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed && m->procs[i].place.rank == p->rank
            && place_before (m->procs[i].place.coord, m->procs[i].place.process, low->place.coord,
                             low->place.process))
          low = &m->procs[i];
    }
  else if (rk->shown_process >= 0 && rk->shown_process != p->process
           && !place_before (p->coord, p->process, rk->shown_coord, rk->shown_process))
    return 0;
  return show_process (m, p->rank, low);
}

/* The entry of process g, made on first sight (its spans may come before
 * its PROCESS frame); NULL out of memory. */
static Proc *
proc_of (PpTimelineModel *m, int32_t g)
{
  if (g < 0 || g >= PP_TRACE_MAX_PROCESSES)
    return NULL;
  if (m->proc_at == NULL)
    {
      if ((m->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *m->proc_at)) == NULL)
        return NULL;
      memset (m->proc_at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *m->proc_at);   /* -1 */
    }
  if (m->proc_at[g] >= 0)
    return &m->procs[m->proc_at[g]];
  if (m->n_procs == m->cap_procs)
    {
      int cap = m->cap_procs ? 2 * m->cap_procs : 16;
      Proc *np = realloc (m->procs, (size_t) cap * sizeof *np);
      if (np == NULL)
        return NULL;
      m->procs = np;
      m->cap_procs = cap;
    }
  Proc *p = &m->procs[m->n_procs];
  memset (p, 0, sizeof *p);
  p->place.process = g;
  p->place.rank = -1;
  p->rank = -1;
  p->r.max_end_ns = INT64_MIN;
  m->proc_at[g] = m->n_procs++;
  return p;
}

/* The clock of process p's items: its own CLOCK_OFFSET, else its rank's
 * untagged one. */
static int64_t
proc_offset (const PpTimelineModel *m, const Proc *p)
{
  if (p->has_own_offset)
    return p->own_offset_ns;
  return p->rank >= 0 && p->rank < m->n_ranks ? m->ranks[p->rank].untagged_offset_ns : 0;
}

/* The offset an item of rank r written by process (-1: none said) is
 * moved by: its process's own, else the rank's untagged one. */
static int64_t
offset_for (const PpTimelineModel *m, int r, int32_t process)
{
  if (process >= 0 && process < PP_TRACE_MAX_PROCESSES && m->proc_at != NULL && m->proc_at[process] >= 0
      && m->procs[m->proc_at[process]].has_own_offset)
    return m->procs[m->proc_at[process]].own_offset_ns;
  return r >= 0 && r < m->n_ranks ? m->ranks[r].untagged_offset_ns : 0;
}

/* Moves process p's spans onto its clock as it now stands (an offset
 * came, or its rank became known). */
static void
proc_move (PpTimelineModel *m, Proc *p)
{
  int64_t offset = proc_offset (m, p);
  int64_t delta = offset - p->r.offset_ns;   /* both clamped: fits */
  p->r.offset_ns = offset;
  for (size_t i = 0; delta != 0 && i < p->r.n_spans; i++)
    {
      p->r.spans[i].start_ns = add_ns (p->r.spans[i].start_ns, delta);
      p->r.spans[i].end_ns = add_ns (p->r.spans[i].end_ns, delta);
    }
}

/* A span of a placed job kept in its process's list too (appended; sorted
 * at the first query, as a rank's are). */
static void
proc_add_span (PpTimelineModel *m, const PpSpan *in, int32_t process)
{
  Proc *p = proc_of (m, process);
  if (p == NULL)
    return;
  if (p->rank < 0 && in->rank >= 0 && in->rank < PP_TRACE_MAX_RANKS && ensure_rank (m, in->rank) == 0)
    {
      p->rank = in->rank;   /* its spans came before its place: its rank's clock */
      proc_move (m, p);
    }
  append_span (&p->r, in, p->r.offset_ns);
}

/* A CLOCK_OFFSET frame: a process's own (process >= 0), or its rank's for
 * the items of no process and the processes without one of their own.
 * What came before moves; rank r's row goes by the process it shows (by
 * what came last while it shows none).  Returns 1 if what is drawn
 * changed. */
static int
take_clock_offset (PpTimelineModel *m, int r, int32_t process, int64_t offset)
{
  if (ensure_rank (m, r) != 0)
    return 0;
  offset = clamp_ns (offset);
  int32_t shown = m->ranks[r].shown_process;
  int64_t before = shown >= 0 ? offset_for (m, r, shown) : m->ranks[r].offset_ns;
  if (process >= 0)
    {
      Proc *p = proc_of (m, process);
      if (p == NULL)
        return 0;
      p->has_own_offset = 1;
      p->own_offset_ns = offset;
      if (p->rank < 0)
        p->rank = r;
      proc_move (m, p);
    }
  else
    {
      Rank *rk = &m->ranks[r];
      int64_t d = offset - rk->untagged_offset_ns;   /* both clamped: fits */
      for (size_t i = rk->n_adopted; i < rk->n_untagged; i++)
        {
          rk->untagged[i].start_ns = add_ns (rk->untagged[i].start_ns, d);
          rk->untagged[i].end_ns = add_ns (rk->untagged[i].end_ns, d);
        }
      m->ranks[r].untagged_offset_ns = offset;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].rank == r && !m->procs[i].has_own_offset)
          proc_move (m, &m->procs[i]);
    }
  /* the edge counters move as the spans do (at the next query; a view's
   * came on their clocks already) */
  m->edge_retime |= !m->is_view && m->n_edge > 0;
  /* the row moves by what its shown process's clock moved (all clamped:
   * the sum fits) */
  int64_t after = shown >= 0 ? offset_for (m, r, shown) : offset;
  return add_clock_offset (m, r, m->ranks[r].offset_ns + (after - before));
}

/* Numbers the processes whose place was not read as merge does
 * (pp_trace_number_unplaced over every process placed so far: a process
 * of a single file or a live stream says dp 0).  Out of memory, they keep
 * what they said. */
static void
number_unplaced (PpTimelineModel *m)
{
  PpTraceProcess *work = malloc ((size_t) (m->n_procs + 1) * sizeof *work);
  size_t k = 0;
  if (work == NULL)
    return;
  for (int i = 0; i < m->n_procs; i++)
    if (m->procs[i].placed)
      work[k++] = m->procs[i].read;
  if (pp_trace_number_unplaced (work, k, NULL) == PP_OK)
    {
      k = 0;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed)
          m->procs[i].place = work[k++];
    }
  free (work);
}

static void
proc_place (PpTimelineModel *m, const PpTraceProcess *pl)
{
  Proc *p = pl->rank >= 0 && pl->rank < PP_TRACE_MAX_RANKS && ensure_rank (m, pl->rank) == 0
            ? proc_of (m, pl->process) : NULL;
  if (p == NULL)
    return;
  int was_unplaced = p->placed && (p->read.flags & PP_TRACE_PROCESS_UNPLACED);
  int unplaced = (pl->flags & PP_TRACE_PROCESS_UNPLACED) != 0;
  m->n_unplaced += unplaced - was_unplaced;
  p->read = p->place = *pl;
  p->placed = 1;
  p->rank = pl->rank;
  proc_move (m, p);
  m->places_dirty = 1;
  if (m->n_unplaced > 0)
    number_unplaced (m);
}

static const PpTimelineModel *places_sort_model;   /* qsort has no closure; one thread draws */

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &places_sort_model->procs[*(const int *) a].place;
  const PpTraceProcess *y = &places_sort_model->procs[*(const int *) b].place;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* The placed processes in mesh order (pipeline rank, then dp, tp, cp, ep):
 * a cache rebuilt on the first query after a PROCESS frame. */
static void
ensure_places (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (!m->places_dirty)
    return;
  m->places_dirty = 0;
  free (m->places);
  m->n_places = 0;
  if ((m->places = malloc ((size_t) (m->n_procs + 1) * sizeof *m->places)) == NULL)
    return;
  for (int i = 0; i < m->n_procs; i++)
    if (m->procs[i].placed)
      m->places[m->n_places++] = i;
  places_sort_model = m;
  qsort (m->places, (size_t) m->n_places, sizeof *m->places, cmp_place);
}

int
pp_timeline_model_n_places (const PpTimelineModel *m)
{
  if (m == NULL)
    return 0;
  ensure_places (m);
  return m->n_places;
}

const PpTraceProcess *
pp_timeline_model_place (const PpTimelineModel *m, int i)
{
  if (i < 0 || i >= pp_timeline_model_n_places (m))
    return NULL;
  return &m->procs[m->places[i]].place;
}

const PpSpan *
pp_timeline_model_place_spans (const PpTimelineModel *m, int i, size_t *n)
{
  *n = 0;
  if (i < 0 || i >= pp_timeline_model_n_places (m))
    return NULL;
  adopt_untagged (m);
  Rank *rk = &((PpTimelineModel *) m)->procs[m->places[i]].r;
  settle_rank (rk);   /* a cache, as settle's */
  *n = rk->n_spans;
  return rk->spans;
}

/* The rank an item is of, for is_shown; -1 for items of the run. */
static int
item_rank (const PpTraceItem *item)
{
  switch (item->type)
    {
    case PP_TRACE_ITEM_SPAN:         return item->span.rank;
    case PP_TRACE_ITEM_COUNTER:      return item->counter.rank;
    case PP_TRACE_ITEM_STEP_MARKER:  return item->step_marker.rank;
    case PP_TRACE_ITEM_CLOCK_OFFSET: return item->clock_offset.rank;
    case PP_TRACE_ITEM_RANK:         return item->rank_info.rank;
    default:                         return -1;
    }
}

/* A span of a job of processes that no process tagged: kept apart, so
 * that a view can give it to its rank's process when the rank has one
 * (adopt_untagged), or say it is not shown. */
static void
keep_untagged (PpTimelineModel *m, const PpSpan *in)
{
  if (in->rank < 0 || in->rank >= m->n_ranks)
    return;
  Rank *rk = &m->ranks[in->rank];
  if (rk->n_untagged == rk->cap_untagged)
    {
      size_t cap = rk->cap_untagged ? 2 * rk->cap_untagged : 64;
      PpSpan *n = realloc (rk->untagged, cap * sizeof *n);
      if (n == NULL)
        return;
      rk->untagged = n;
      rk->cap_untagged = cap;
    }
  PpSpan s = *in;
  s.start_ns = add_ns (s.start_ns, rk->untagged_offset_ns);
  s.end_ns = add_ns (s.end_ns, rk->untagged_offset_ns);
  if (s.end_ns < s.start_ns)
    s.end_ns = s.start_ns;
  rk->untagged[rk->n_untagged++] = s;
  m->untagged_pending = 1;
}

/* A rank of one placed process: its untagged spans are that process's
 * (appended to its list, sorted at the next query).  A rank of several
 * keeps them apart: pp_timeline_model_n_unassigned_spans says so. */
static void
adopt_untagged (const PpTimelineModel *cm)
{
  PpTimelineModel *m = (PpTimelineModel *) cm;
  if (!m->untagged_pending)
    return;
  m->untagged_pending = 0;
  for (int r = 0; r < m->n_ranks; r++)
    {
      Rank *rk = &m->ranks[r];
      if (rk->n_adopted == rk->n_untagged)
        continue;
      Proc *only = NULL;
      int n = 0;
      for (int i = 0; i < m->n_procs; i++)
        if (m->procs[i].placed && m->procs[i].place.rank == r && n++ == 0)
          only = &m->procs[i];
      if (n != 1)
        continue;
      Rank *pr = &only->r;
      size_t add = rk->n_untagged - rk->n_adopted;
      if (pr->n_spans + add > pr->cap_spans)
        {
          size_t cap = pr->n_spans + add;
          PpSpan *ns = realloc (pr->spans, cap * sizeof *ns);
          if (ns == NULL)
            {
              m->untagged_pending = 1;
              continue;
            }
          pr->spans = ns;
          pr->cap_spans = cap;
        }
      memcpy (pr->spans + pr->n_spans, rk->untagged + rk->n_adopted, add * sizeof *pr->spans);
      pr->n_spans += add;   /* n_sorted stays: settle_rank sorts them in */
      rk->n_adopted = rk->n_untagged;
    }
}

uint64_t
pp_timeline_model_n_unassigned_spans (const PpTimelineModel *m)
{
  uint64_t n = 0;
  if (m == NULL || m->is_view)
    return 0;
  adopt_untagged (m);
  for (int r = 0; r < m->n_ranks; r++)
    {
      int places = 0;
      for (int i = 0; i < m->n_procs && places < 2; i++)
        places += m->procs[i].placed && m->procs[i].place.rank == r;
      if (places >= 2)
        n += m->ranks[r].n_untagged - m->ranks[r].n_adopted;
    }
  return n;
}

int
pp_timeline_model_add (PpTimelineModel *m, const PpTraceItem *item)
{
  if (m == NULL || item == NULL)
    return 0;
  m->generation++;
  /* every process's spans are kept for the views over the replicas */
  if (item->process >= 0 && !m->is_view && item->type == PP_TRACE_ITEM_SPAN)
    proc_add_span (m, &item->span, item->process);
  if (item->type == PP_TRACE_ITEM_PROCESS && !m->is_view)
    proc_place (m, &item->process_info);
  /* any process's: its clock, and its row's when it shows that process */
  if (item->type == PP_TRACE_ITEM_CLOCK_OFFSET)
    return take_clock_offset (m, item->clock_offset.rank, m->is_view ? -1 : item->process,
                              item->clock_offset.offset_ns);
  /* a loss: every replica's (the job's, pp-analysis-loss.h, and each
   * replica's own series); the block-edge counters: every process's, each
   * with its process (a row takes its shown process's, edge_row; the Why
   * tab every copy's: a rank whose median copy is not the shown one read
   * no run delay, descheduled 0) */
  if (item->type == PP_TRACE_ITEM_COUNTER
      && (item->counter.kind == PP_COUNTER_LOSS || item->counter.kind == PP_COUNTER_LOSS_PART
          || item->counter.kind == PP_COUNTER_RUN_DELAY_NS || item->counter.kind == PP_COUNTER_PROBE_SELF_NS
          || item->counter.kind == PP_COUNTER_ON_CPU_NS))
    return add_counter (m, &item->counter, item->process);
  /* another replica's: in the trace, not on its row (see the top) */
  if (!is_shown (m, item_rank (item), item->process))
    {
      m->hidden_spans += item->type == PP_TRACE_ITEM_SPAN;
      return 0;
    }
  switch (item->type)
    {
    case PP_TRACE_ITEM_DESCRIPTION:
      m->has_desc = 1;
      m->desc = *item->description;
      if (m->desc.n_ranks > 0 && m->desc.n_ranks <= PP_TRACE_MAX_RANKS)
        ensure_rank (m, m->desc.n_ranks - 1);
      set_plan_origin (m, m->desc.start_monotonic_ns);
      return 1;
    case PP_TRACE_ITEM_PLAN:
      return add_plan (m, item);
    case PP_TRACE_ITEM_SPAN:
      add_span (m, &item->span, offset_for (m, item->span.rank, item->process));
      if (item->process < 0 && m->n_procs > 0 && !m->is_view)
        keep_untagged (m, &item->span);
      return 1;
    case PP_TRACE_ITEM_COUNTER:
      return add_counter (m, &item->counter, item->process);
    case PP_TRACE_ITEM_STEP_MARKER:
      return add_step_marker (m, item);
    case PP_TRACE_ITEM_STRING:
      return add_string (m, item->string.id, item->string.name);
    case PP_TRACE_ITEM_RANK:
      if (ensure_rank (m, item->rank_info.rank) != 0)
        return 0;
      snprintf (m->ranks[item->rank_info.rank].host, sizeof m->ranks[0].host, "%s", item->rank_info.host);
      if (m->first_host[0] == '\0')
        snprintf (m->first_host, sizeof m->first_host, "%s", item->rank_info.host);
      else if (strcmp (m->first_host, item->rank_info.host) != 0)
        m->several_hosts = 1;
      return 1;
    case PP_TRACE_ITEM_PROCESS:
      return add_process (m, &item->process_info);
    case PP_TRACE_ITEM_DROPPED:
      /* Saturating: the sum of a file's counts cannot wrap. */
      m->dropped = item->dropped.count > UINT64_MAX - m->dropped ? UINT64_MAX
                   : m->dropped + item->dropped.count;
      if (item->dropped.rank >= 0)
        ensure_rank (m, item->dropped.rank);
      return 1;
    case PP_TRACE_ITEM_END:
    default:
      return 0;
    }
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

const PpTimelineMemorySample *
pp_timeline_model_memory (const PpTimelineModel *m, int r, size_t *n)
{
  *n = m != NULL && r >= 0 && r < m->n_ranks ? m->ranks[r].n_mem : 0;
  return *n ? m->ranks[r].mem : NULL;
}

int
pp_timeline_model_set_rank_lost (PpTimelineModel *m, int rank, int64_t t_ns)
{
  if (m == NULL || rank < 0 || rank >= PP_TRACE_MAX_RANKS || ensure_rank (m, rank) != 0)
    return 0;
  Rank *r = &m->ranks[rank];
  m->generation++;
  fresh_extents (m);
  if (t_ns == PP_TIMELINE_LOST_AT_LAST_EVENT)
    t_ns = r->max_end_ns != INT64_MIN ? r->max_end_ns
           : m->span_end_ns != INT64_MIN ? m->span_end_ns : m->end_ns;
  if (t_ns == INT64_MIN || t_ns == INT64_MAX)
    return 0;   /* nothing received at all: no time to mark from */
  if (t_ns > PP_TIMELINE_MAX_ABS_NS)
    t_ns = PP_TIMELINE_MAX_ABS_NS;
  if (t_ns < -PP_TIMELINE_MAX_ABS_NS)
    t_ns = -PP_TIMELINE_MAX_ABS_NS;
  /* the first loss stands: a later report of the same end moves nothing */
  if (r->lost_ns <= t_ns)
    return 0;
  r->lost_ns = t_ns;
  return 1;
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

PpTimelineModel *
pp_timeline_model_new_from_file (const char *path, PpError *err)
{
  PpTraceReader *r;
  PpTraceItem item;
  PpTimelineModel *m;

  r = pp_trace_reader_new_path (path, err);
  if (r == NULL)
    return NULL;
  m = pp_timeline_model_new ();
  if (m == NULL)
    {
      pp_trace_reader_free (r);
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, err) != PP_OK)
        {
          pp_trace_reader_free (r);
          pp_timeline_model_free (m);
          return NULL;
        }
      if (item.type == PP_TRACE_ITEM_END)
        {
          m->truncated = item.truncated;
          break;
        }
      pp_timeline_model_add (m, &item);
    }
  pp_trace_reader_free (r);
  /* two processes at one place, or places no job has: refused, as merge
   * and info refuse them, not a row that shows one of them unsaid */
  PpTraceProcess *places = malloc ((size_t) (m->n_procs + 1) * sizeof *places);
  size_t n = 0;
  for (int i = 0; places != NULL && i < m->n_procs; i++)
    if (m->procs[i].placed)
      places[n++] = m->procs[i].place;
  if (places == NULL || pp_trace_places_check (places, n, err) != PP_OK)
    {
      if (places == NULL)
        pp_error_set (err, PP_ENOMEM, "out of memory");
      free (places);
      pp_timeline_model_free (m);
      return NULL;
    }
  free (places);
  return m;
}

int
pp_timeline_model_truncated (const PpTimelineModel *m)
{
  return m != NULL && m->truncated;
}

int
pp_timeline_description_is_pytorch (const PpTraceDescription *d)
{
  return d != NULL && strncmp (d->model, "PyTorch ", 8) == 0;
}

long
pp_timeline_description_number (const PpTraceDescription *d, const char *word, int before)
{
  if (d == NULL || word == NULL || *word == '\0')
    return 0;
  const char *model = d->model;
  size_t len = strlen (word);
  for (const char *p = strstr (model, word); p != NULL; p = strstr (p + len, word))
    {
      if (p > model && (isalnum ((unsigned char) p[-1]) || p[-1] == '-' || p[-1] == '_'))
        continue;
      if (before)
        {
          const char *q = p;
          while (q > model && q[-1] == ' ')
            q--;
          const char *e = q;
          while (q > model && isdigit ((unsigned char) q[-1]))
            q--;
          if (q < e)
            return strtol (q, NULL, 10);
        }
      else
        {
          const char *q = p + len;
          while (*q == ' ' || *q == '=' || *q == ':')
            q++;
          if (isdigit ((unsigned char) *q))
            return strtol (q, NULL, 10);
        }
    }
  return 0;
}

const PpTraceDescription *
pp_timeline_model_description (const PpTimelineModel *m)
{
  return m != NULL && m->has_desc ? &m->desc : NULL;
}

int
pp_timeline_model_n_processes (const PpTimelineModel *m)
{
  return m != NULL ? m->n_processes : 0;
}

int
pp_timeline_model_n_replicas (const PpTimelineModel *m)
{
  return m != NULL ? m->n_replicas : 1;
}

int
pp_timeline_model_shown_dp (const PpTimelineModel *m)
{
  int dp = -1;
  for (int r = 0; m != NULL && r < m->n_ranks; r++)
    if (m->ranks[r].shown_process >= 0 && (dp < 0 || m->ranks[r].shown_coord[PP_TRACE_MESH_DP] < dp))
      dp = m->ranks[r].shown_coord[PP_TRACE_MESH_DP];
  return dp < 0 ? 0 : dp;
}

uint64_t
pp_timeline_model_n_hidden_spans (const PpTimelineModel *m)
{
  return m != NULL ? m->hidden_spans : 0;
}

void
pp_timeline_replica_note_format (const int32_t shown[PP_TRACE_MESH_DIMS],
                                 const int32_t size[PP_TRACE_MESH_DIMS], uint32_t flags, char *buf,
                                 size_t bufsize)
{
  /* numbered by pipescope, not read from the job: said, as info says it */
  const char *unread = flags & PP_TRACE_PROCESS_UNPLACED ? " (place not read: dp by global rank)" : "";
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  int64_t n = pp_trace_mesh_count (size, PP_TRACE_MESH_DP);
  int only_dp = 1;
  if (bufsize == 0)
    return;
  buf[0] = '\0';
  for (int d = PP_TRACE_MESH_DP + 1; d < PP_TRACE_MESH_DIMS; d++)
    if (size[d] > 1)
      only_dp = 0;
  if (n <= 1)
    return;
  if (only_dp)
    {
      snprintf (buf, bufsize, "replica dp %d of %d shown%s", shown[PP_TRACE_MESH_DP], size[PP_TRACE_MESH_DP],
                unread);
      return;
    }
  /* tensor (context, expert) ranks too: which process, of which mesh */
  char place[96] = "", mesh[96] = "";
  size_t lp = 0, lm = 0;
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (size[d] > 1 && lp < sizeof place && lm < sizeof mesh)
      {
        lp += (size_t) snprintf (place + lp, sizeof place - lp, "%s%s %d", lp ? " " : "", dim[d], shown[d]);
        lm += (size_t) snprintf (mesh + lm, sizeof mesh - lm, "%s%s %d", lm ? " \u00d7 " : "", dim[d], size[d]);
      }
  snprintf (buf, bufsize, "1 of %lld processes a rank shown (%s of %s)%s", (long long) n, place, mesh, unread);
}

void
pp_timeline_model_replica_note (const PpTimelineModel *m, char *buf, size_t size)
{
  int32_t shown[PP_TRACE_MESH_DIMS] = { 0 }, sizes[PP_TRACE_MESH_DIMS] = { 1, 1, 1, 1, 1 };
  uint32_t flags = 0;
  if (size == 0)
    return;
  buf[0] = '\0';
  if (m != NULL && m->is_view)
    {
      snprintf (buf, size, "%s", m->note);
      return;
    }
  if (m == NULL || m->n_replicas <= 1)
    return;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    {
      int lo = -1;
      for (int r = 0; r < m->n_ranks; r++)
        if (m->ranks[r].shown_process >= 0 && (lo < 0 || m->ranks[r].shown_coord[d] < lo))
          lo = m->ranks[r].shown_coord[d];
      shown[d] = lo < 0 ? 0 : lo;
      sizes[d] = m->mesh_size[d] > 0 ? m->mesh_size[d] : 1;
    }
  for (int r = 0; r < m->n_ranks; r++)
    if (m->ranks[r].shown_process >= 0)
      flags |= m->ranks[r].shown_flags;
  pp_timeline_replica_note_format (shown, sizes, flags, buf, size);
}

int
pp_timeline_model_n_ranks (const PpTimelineModel *m)
{
  return m ? m->n_ranks : 0;
}

int64_t
pp_timeline_model_start_ns (const PpTimelineModel *m)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->start_ns == INT64_MAX)
    return m != NULL && m->has_desc ? m->desc.start_monotonic_ns : 0;
  return m->start_ns;
}

int64_t
pp_timeline_model_end_ns (const PpTimelineModel *m)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->end_ns == INT64_MIN)
    return pp_timeline_model_start_ns (m);
  return m->end_ns;
}

size_t
pp_timeline_model_n_spans_total (const PpTimelineModel *m)
{
  return m ? m->n_spans_total : 0;
}

size_t
pp_timeline_model_n_spans (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].n_spans : 0;
}

const PpSpan *
pp_timeline_model_spans (const PpTimelineModel *m, int rank)
{
  settle (m, rank);
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].spans : NULL;
}

int64_t
pp_timeline_model_max_span_ns (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].max_span_ns : 0;
}

size_t
pp_timeline_model_first_overlapping (const PpTimelineModel *m, int rank, int64_t t)
{
  const Rank *rk;
  size_t lo = 0, hi;
  int64_t from;

  if (m == NULL || rank < 0 || rank >= m->n_ranks)
    return 0;
  settle (m, rank);
  rk = &m->ranks[rank];
  hi = rk->n_spans;
  /* No span is longer than max_span_ns: one that starts before
   * t - max_span_ns ends before t. */
  if (__builtin_sub_overflow (t, rk->max_span_ns, &from))
    from = INT64_MIN;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rk->spans[mid].start_ns < from)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

size_t
pp_timeline_model_n_planned (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].n_plan : 0;
}

int
pp_timeline_model_plans (const PpTimelineModel *m, const PpTracePlanAction ***actions,
                         size_t **n_actions)
{
  int n = 0;

  *actions = NULL;
  *n_actions = NULL;
  if (m == NULL)
    return 0;
  for (int r = 0; r < m->n_ranks; r++)
    if (m->raw_plans[r].n > 0)
      n = r + 1;
  if ((*actions = calloc ((size_t) n + 1, sizeof **actions)) == NULL
      || (*n_actions = calloc ((size_t) n + 1, sizeof **n_actions)) == NULL)
    {
      free (*actions);
      *actions = NULL;
      return -1;
    }
  for (int r = 0; r < n; r++)
    {
      (*actions)[r] = m->raw_plans[r].a;
      (*n_actions)[r] = m->raw_plans[r].n;
    }
  return n;
}

size_t
pp_timeline_model_n_plan_items (const PpTimelineModel *m)
{
  return m != NULL ? m->n_plan_items : 0;
}

const PpTimelinePlanned *
pp_timeline_model_planned (const PpTimelineModel *m, int rank)
{
  return m != NULL && rank >= 0 && rank < m->n_ranks ? m->ranks[rank].plan : NULL;
}

size_t
pp_timeline_model_n_steps (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->n_steps : 0;
}

const int64_t *
pp_timeline_model_step_starts (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->step_starts : NULL;
}

const int32_t *
pp_timeline_model_step_numbers (const PpTimelineModel *m)
{
  ensure_steps (m);
  return m ? m->step_numbers : NULL;
}

size_t
pp_timeline_model_n_losses (const PpTimelineModel *m)
{
  return m ? m->n_losses : 0;
}

size_t
pp_timeline_model_n_loss_series (const PpTimelineModel *m)
{
  return m ? m->n_loss_series : 0;
}

const double *
pp_timeline_model_loss_series (const PpTimelineModel *m, size_t i, int32_t *dp, size_t *n)
{
  if (m == NULL || i >= m->n_loss_series)
    {
      *n = 0;
      *dp = -1;
      return NULL;
    }
  *dp = m->loss_series[i].dp;
  *n = m->loss_series[i].n;
  return m->loss_series[i].v;
}

const double *
pp_timeline_model_losses (const PpTimelineModel *m)
{
  return m ? m->losses : NULL;
}

const char *
pp_timeline_model_string (const PpTimelineModel *m, uint32_t id)
{
  size_t lo = 0, hi;
  if (m == NULL || id == 0)
    return NULL;
  hi = m->n_strings;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (m->strings[mid].id < id)
        lo = mid + 1;
      else if (m->strings[mid].id > id)
        hi = mid;
      else
        return m->strings[mid].name;
    }
  return NULL;
}

uint32_t
pp_timeline_model_kinds_seen (const PpTimelineModel *m)
{
  return m ? m->kinds_seen : 0;
}

uint64_t
pp_timeline_model_dropped (const PpTimelineModel *m)
{
  return m ? m->dropped : 0;
}

/* Length of the union of [a, b) intervals fed in order of start, clipped
 * to [t0, t1). */
typedef struct {
  int64_t t0, t1, cs, ce;
  double  sum;
  int     open;
} Union;

static void
union_add (Union *u, int64_t a, int64_t b)
{
  if (a < u->t0)
    a = u->t0;
  if (b > u->t1)
    b = u->t1;
  if (b <= a)
    return;
  if (u->open && a <= u->ce)
    {
      if (b > u->ce)
        u->ce = b;
      return;
    }
  if (u->open)
    u->sum += (double) (u->ce - u->cs);
  u->cs = a;
  u->ce = b;
  u->open = 1;
}

static double
union_total (Union *u)
{
  return u->sum + (u->open ? (double) (u->ce - u->cs) : 0.0);
}

void
pp_timeline_model_rank_stats (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1,
                              PpTimelineRankStats *out)
{
  Union busy = { t0, t1, 0, 0, 0, 0 }, wait = { t0, t1, 0, 0, 0, 0 };
  const Rank *rk;
  double len = t1 > t0 ? (double) (t1 - t0) : 0;

  if (out == NULL)
    return;
  memset (out, 0, sizeof *out);
  out->bubble = len > 0 ? 1 : 0;
  out->planned_bubble = -1;
  out->peak_activation_bytes = -1;
  out->peak_inflight = -1;
  if (m == NULL || rank < 0 || rank >= m->n_ranks)
    return;
  rk = &m->ranks[rank];
  out->peak_activation_bytes = rk->peak_activation;
  out->peak_inflight = rk->peak_inflight;

  for (size_t i = pp_timeline_model_first_overlapping (m, rank, t0);
       i < rk->n_spans && rk->spans[i].start_ns < t1; i++)
    {
      const PpSpan *s = &rk->spans[i];
      if (pp_span_kind_is_work (s->kind))
        union_add (&busy, s->start_ns, s->end_ns);
      else if (s->kind == PP_SPAN_WAIT)
        union_add (&wait, s->start_ns, s->end_ns);
    }
  out->busy_ns = union_total (&busy);
  out->wait_ns = union_total (&wait);
  if (len > 0)
    out->bubble = 1.0 - out->busy_ns / len;

  out->planned_bubble = pp_timeline_model_planned_bubble (m, rank, t0, t1);
}

/* A copy of the pipeline in a job of replicas: the processes sharing
 * (dp, tp, cp, ep), one a pipeline rank, numbered as the analysis numbers
 * them (pp_why_replicas_of_spans: densely, in that order). */
typedef struct {
  int32_t         key[PP_TRACE_MESH_DIMS - 1];
  int             replica;
  PpAnalysisSteps a;
} Copy;

static int
cmp_place_key (const void *x, const void *y)
{
  const int32_t *a = x, *b = y;
  for (int d = 0; d < PP_TRACE_MESH_DIMS - 1; d++)
    if (a[d] != b[d])
      return a[d] < b[d] ? -1 : 1;
  return 0;
}

static const Copy *sort_copies;   /* qsort has no user data */

/* by median step, then replica: pp-why-replicas.c's order */
static int
cmp_copy_length (const void *x, const void *y)
{
  const Copy *a = &sort_copies[*(const int *) x], *b = &sort_copies[*(const int *) y];
  if (a->a.median_step != b->a.median_step)
    return a->a.median_step < b->a.median_step ? -1 : 1;
  return (a->replica > b->replica) - (a->replica < b->replica);
}

/* The counted steps of the median copy of a job of replicas (the one the
 * why analysis reads its steps, path and costs from: pp_why_analyse_replicas,
 * by step length, the lower of two middles), into out; its replica's
 * place (dp ...) into *which.  0 when m has no replicas or no copy has a
 * whole step (out cleared), else its counted steps. */
static int
median_copy_steps (const PpTimelineModel *m, PpAnalysisSteps *out, int32_t which[PP_TRACE_MESH_DIMS - 1])
{
  int np = pp_timeline_model_n_places (m), n_copies = 0, ok = 0;
  memset (out, 0, sizeof *out);
  if (m->is_view || np < 2 || m->n_ranks <= 0)
    return 0;
  Copy *c = calloc ((size_t) np, sizeof *c);
  int *order = malloc ((size_t) np * sizeof *order);
  const PpSpan **rows = calloc ((size_t) m->n_ranks, sizeof *rows);
  size_t *n = calloc ((size_t) m->n_ranks, sizeof *n);
  if (c == NULL || order == NULL || rows == NULL || n == NULL)
    goto out;
  /* the copies' keys, sorted and distinct */
  for (int i = 0; i < np; i++)
    memcpy (c[i].key, &pp_timeline_model_place (m, i)->coord[PP_TRACE_MESH_DP], sizeof c[i].key);
  qsort (c, (size_t) np, sizeof *c, cmp_place_key);
  for (int i = 0; i < np; i++)
    if (n_copies == 0 || cmp_place_key (c[i].key, c[n_copies - 1].key) != 0)
      c[n_copies++] = c[i];
  if (n_copies < 2)
    goto out;
  int k = 0;
  for (int j = 0; j < n_copies; j++)
    {
      memset (rows, 0, (size_t) m->n_ranks * sizeof *rows);
      memset (n, 0, (size_t) m->n_ranks * sizeof *n);
      for (int i = 0; i < np; i++)
        {
          const PpTraceProcess *p = pp_timeline_model_place (m, i);
          if (p->rank >= 0 && p->rank < m->n_ranks
              && cmp_place_key (&p->coord[PP_TRACE_MESH_DP], c[j].key) == 0)
            rows[p->rank] = pp_timeline_model_place_spans (m, i, &n[p->rank]);
        }
      c[j].replica = j;
      if (pp_analysis_steps (rows, n, m->n_ranks, m->n_ranks, 0, &c[j].a, NULL) == PP_OK && c[j].a.n_steps > 0)
        order[k++] = j;
    }
  if (k > 0)
    {
      sort_copies = c;
      qsort (order, (size_t) k, sizeof *order, cmp_copy_length);
      int med = order[(k - 1) / 2];
      *out = c[med].a;
      memset (&c[med].a, 0, sizeof c[med].a);
      memcpy (which, c[med].key, sizeof c[med].key);
      ok = out->n_steps;
    }
out:
  for (int j = 0; c != NULL && j < n_copies; j++)
    pp_analysis_steps_clear (&c[j].a);
  free (c);
  free (order);
  free (rows);
  free (n);
  return ok;
}

int
pp_timeline_model_analysis_copy (const PpTimelineModel *m, int32_t coord[PP_TRACE_MESH_DIMS])
{
  PpAnalysisSteps a;
  int32_t key[PP_TRACE_MESH_DIMS - 1];
  if (m == NULL || median_copy_steps (m, &a, key) == 0)
    return 0;
  pp_analysis_steps_clear (&a);
  coord[PP_TRACE_MESH_PP] = -1;
  memcpy (&coord[PP_TRACE_MESH_DP], key, sizeof key);
  return 1;
}

void
pp_timeline_model_analysis_rows (const PpTimelineModel *m, const PpSpan **rows, size_t *n)
{
  int32_t coord[PP_TRACE_MESH_DIMS];
  int by_copy = pp_timeline_model_analysis_copy (m, coord);
  for (int r = 0; r < m->n_ranks; r++)
    {
      rows[r] = m->ranks[r].spans;
      n[r] = m->ranks[r].n_spans;
    }
  for (int i = 0; by_copy && i < pp_timeline_model_n_places (m); i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      if (p->rank >= 0 && p->rank < m->n_ranks
          && memcmp (&p->coord[PP_TRACE_MESH_DP], &coord[PP_TRACE_MESH_DP],
                     (PP_TRACE_MESH_DIMS - PP_TRACE_MESH_DP) * sizeof *coord) == 0)
        rows[p->rank] = pp_timeline_model_place_spans (m, i, &n[p->rank]);
    }
}

int
pp_timeline_model_analysis_dp (const PpTimelineModel *m)
{
  int32_t coord[PP_TRACE_MESH_DIMS];
  return pp_timeline_model_analysis_copy (m, coord) ? coord[PP_TRACE_MESH_DP] : pp_timeline_model_shown_dp (m);
}

/* The counted steps (pp-analysis.h's rule, the schedule not known here:
 * a whole step holds as many blocks as the fullest) over the ranks' rows;
 * a job of replicas: over its median copy's (median_copy_steps). */
int
pp_timeline_model_step_analysis (const PpTimelineModel *m, PpAnalysisSteps *out)
{
  memset (out, 0, sizeof *out);
  if (m == NULL || m->n_ranks <= 0)
    return 0;
  int32_t key[PP_TRACE_MESH_DIMS - 1];
  if (median_copy_steps (m, out, key) > 0)
    return out->n_steps;
  const PpSpan **rows = malloc ((size_t) m->n_ranks * sizeof *rows);
  size_t *n = malloc ((size_t) m->n_ranks * sizeof *n);
  int ok = 0;
  if (rows != NULL && n != NULL)
    {
      for (int r = 0; r < m->n_ranks; r++)
        {
          rows[r] = m->ranks[r].spans;
          n[r] = m->ranks[r].n_spans;
        }
      ok = pp_analysis_steps (rows, n, m->n_ranks, m->n_ranks, 0, out, NULL) == PP_OK;
    }
  free (rows);
  free (n);
  return ok ? out->n_steps : 0;
}

/* Each rank's bubble a step by the one analysis (pp-analysis.h). */
static int
compute_step_bubbles (const PpTimelineModel *m, double *bubble)
{
  PpAnalysisSteps a;

  if (m == NULL)
    return 0;
  if (m->row_bubbles != NULL)
    {
      memcpy (bubble, m->row_bubbles, (size_t) m->n_ranks * sizeof *bubble);
      return m->row_bubble_steps;
    }
  for (int r = 0; r < m->n_ranks; r++)
    bubble[r] = -1;
  int n_steps = pp_timeline_model_step_analysis (m, &a);
  for (int r = 0; r < m->n_ranks && n_steps > 0; r++)
    bubble[r] = a.bubble[r];
  pp_analysis_steps_clear (&a);
  return n_steps;
}

/* The answer is kept until the model changes (generation): every frame
 * asks it for the header, at any zoom. */
int
pp_timeline_model_step_bubbles (const PpTimelineModel *m, double *bubble)
{
  PpTimelineModel *mm = (PpTimelineModel *) m;
  int n_steps;

  if (m == NULL)
    return 0;
  if (m->step_cache.bubble != NULL && m->step_cache.generation == m->generation
      && m->step_cache.n_ranks == m->n_ranks)
    {
      memcpy (bubble, m->step_cache.bubble, (size_t) m->n_ranks * sizeof *bubble);
      return m->step_cache.n_steps;
    }
  n_steps = compute_step_bubbles (m, bubble);
  free (mm->step_cache.bubble);
  mm->step_cache.bubble = m->n_ranks > 0 ? malloc ((size_t) m->n_ranks * sizeof *bubble) : NULL;
  if (mm->step_cache.bubble != NULL)
    {
      memcpy (mm->step_cache.bubble, bubble, (size_t) m->n_ranks * sizeof *bubble);
      mm->step_cache.n_ranks = m->n_ranks;
      mm->step_cache.n_steps = n_steps;
      mm->step_cache.generation = m->generation;
    }
  return n_steps;
}

int
pp_timeline_model_span_extent (const PpTimelineModel *m, int64_t *start, int64_t *end)
{
  if (m != NULL)
    fresh_extents (m);
  if (m == NULL || m->span_start_ns == INT64_MAX)
    return 0;
  *start = m->span_start_ns;
  *end = m->span_end_ns;
  return 1;
}

double
pp_timeline_model_planned_bubble (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1)
{
  Union pbusy = { 0 };
  const Rank *rk;
  int64_t ps = INT64_MAX, pe = INT64_MIN;

  if (m == NULL || rank < 0 || rank >= m->n_ranks || m->ranks[rank].n_plan == 0)
    return -1;
  rk = &m->ranks[rank];
  fresh_extents (m);
  /* The plan covers one step: its bubble is taken over the part of the
   * window the plans of all ranks span, so a whole-run window gives the
   * planned bubble of a step (as `info` prints it). */
  ps = m->plan_ps;
  pe = m->plan_pe;
  if (ps < t0)
    ps = t0;
  if (pe > t1)
    pe = t1;
  if (pe <= ps)
    return -1;
  pbusy.t0 = ps;
  pbusy.t1 = pe;
  /* Plan entries of a rank follow each other in time. */
  for (size_t k = 0; k < rk->n_plan; k++)
    if (plan_kind_is_busy (rk->plan[k].kind))
      union_add (&pbusy, rk->plan[k].start_ns, rk->plan[k].end_ns);
  double b = 1.0 - union_total (&pbusy) / (double) (pe - ps);
  return b < 0 ? 0 : b;
}

/* ---- views (pp-timeline-fold.c builds them) ---- */

PpTimelineModel *
pp_timeline_model_new_like (const PpTimelineModel *src)
{
  PpTimelineModel *v = pp_timeline_model_new ();
  if (v == NULL)
    return NULL;
  v->is_view = 1;
  if (src == NULL)
    return v;
  v->truncated = src->truncated;
  if (src->has_desc)
    {
      v->has_desc = 1;
      v->desc = src->desc;
    }
  if (src->plan_origin_ns != INT64_MIN)
    v->plan_origin_ns = src->plan_origin_ns;
  for (size_t i = 0; i < src->n_marks; i++)
    {
      see_time (v, src->marks[i].t, src->marks[i].t);
      push_mark (v, src->marks[i].t, src->marks[i].step);
    }
  v->max_marked_step = src->max_marked_step;
  v->provisional_step = src->provisional_step;
  for (size_t i = 0; i < src->n_strings; i++)
    add_string (v, src->strings[i].id, src->strings[i].name);
  if (src->n_losses > 0 && (v->losses = malloc (src->n_losses * sizeof *v->losses)) != NULL)
    {
      memcpy (v->losses, src->losses, src->n_losses * sizeof *v->losses);
      v->n_losses = src->n_losses;
      v->n_loss_counters = src->n_loss_counters;
    }
  if (src->n_loss_series > 0 && (v->loss_series = calloc (src->n_loss_series, sizeof *v->loss_series)) != NULL)
    for (size_t i = 0; i < src->n_loss_series; i++)
      {
        const LossSeries *from = &src->loss_series[i];
        LossSeries *to = &v->loss_series[v->n_loss_series];
        to->dp = from->dp;
        if (from->n > 0 && (to->v = malloc (from->n * sizeof *to->v)) == NULL)
          break;
        if (from->n > 0)
          memcpy (to->v, from->v, from->n * sizeof *to->v);
        to->n = from->n;
        v->n_loss_series++;
      }
  retime_edges (src);
  if (src->n_edge > 0 && (v->edge = malloc (src->n_edge * sizeof *v->edge)) != NULL
      && (v->edge_process = malloc (src->n_edge * sizeof *v->edge_process)) != NULL
      && (v->edge_raw_ns = malloc (src->n_edge * sizeof *v->edge_raw_ns)) != NULL)
    {
      memcpy (v->edge, src->edge, src->n_edge * sizeof *v->edge);
      memcpy (v->edge_process, src->edge_process, src->n_edge * sizeof *v->edge_process);
      memcpy (v->edge_raw_ns, src->edge_raw_ns, src->n_edge * sizeof *v->edge_raw_ns);
      v->n_edge = v->cap_edge = src->n_edge;
    }
  v->dropped = src->dropped;
  /* the places, without their spans: who a fold's slowest replica is */
  if (src->n_procs > 0 && src->proc_at != NULL
      && (v->procs = calloc ((size_t) src->n_procs, sizeof *v->procs)) != NULL
      && (v->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *v->proc_at)) != NULL)
    {
      memcpy (v->proc_at, src->proc_at, PP_TRACE_MAX_PROCESSES * sizeof *v->proc_at);
      for (int i = 0; i < src->n_procs; i++)
        {
          v->procs[i].place = src->procs[i].place;
          v->procs[i].placed = src->procs[i].placed;
          v->procs[i].r.max_end_ns = INT64_MIN;
        }
      v->n_procs = v->cap_procs = src->n_procs;
      v->places_dirty = 1;
    }
  v->n_processes = src->n_processes;
  v->n_replicas = src->n_replicas;
  memcpy (v->mesh_size, src->mesh_size, sizeof v->mesh_size);
  return v;
}

int
pp_timeline_model_view_add_row (PpTimelineModel *v, const PpTimelineModel *src, int rank,
                                int process, int n_folded, const char *label, int with_plan)
{
  int row = v->n_ranks;
  if (!v->is_view || ensure_rank (v, row) != 0)
    return -1;
  v->generation++;
  Row *rw = &v->rows[row];
  rw->rank = rank;
  rw->process = process;
  rw->n_folded = n_folded;
  snprintf (rw->label, sizeof rw->label, "%s", label ? label : "");
  Rank *rk = &v->ranks[row];
  if (process >= 0 && src->proc_at != NULL && src->proc_at[process] >= 0)
    snprintf (rk->host, sizeof rk->host, "%s", src->procs[src->proc_at[process]].place.host);
  else if (rank >= 0 && rank < src->n_ranks)
    snprintf (rk->host, sizeof rk->host, "%s", src->ranks[rank].host);
  if (rank >= 0 && rank < src->n_ranks)
    {
      rk->lost_ns = src->ranks[rank].lost_ns;
      rk->peak_activation = src->ranks[rank].peak_activation;
      rk->peak_inflight = src->ranks[rank].peak_inflight;
      if (with_plan && src->raw_plans[rank].n > 0
          && (v->raw_plans[row].a = malloc (src->raw_plans[rank].n * sizeof *v->raw_plans[row].a)) != NULL)
        {
          memcpy (v->raw_plans[row].a, src->raw_plans[rank].a,
                  src->raw_plans[rank].n * sizeof *v->raw_plans[row].a);
          v->raw_plans[row].n = src->raw_plans[rank].n;
          v->raw_plans[row].timed = src->raw_plans[rank].timed;
          v->n_plan_items++;
          if (place_plan (v, row) == 0)
            widen_plan_extent (v, row);
        }
    }
  return row;
}

int
pp_timeline_model_view_add_spans (PpTimelineModel *v, int row, const PpSpan *spans, size_t n,
                                  const PpTimelineFold *fold)
{
  if (!v->is_view || row < 0 || row >= v->n_ranks)
    return -1;
  v->generation++;
  Rank *rk = &v->ranks[row];
  size_t before = rk->n_spans;
  for (size_t i = 0; i < n; i++)
    {
      PpSpan s = spans[i];
      s.rank = row;
      add_span (v, &s, 0);   /* on the source's clock already */
    }
  if (rk->n_spans != before + n)
    return -1;
  if (fold != NULL && n > 0)
    {
      Row *rw = &v->rows[row];
      PpTimelineFold *f = realloc (rw->fold, (before + n) * sizeof *f);
      if (f == NULL)
        return -1;
      memcpy (f + before, fold, n * sizeof *f);
      rw->fold = f;
    }
  return 0;
}

void
pp_timeline_model_view_set_note (PpTimelineModel *v, const char *note)
{
  if (v != NULL && v->is_view)
    snprintf (v->note, sizeof v->note, "%s", note);
}

int
pp_timeline_model_is_view (const PpTimelineModel *m)
{
  return m != NULL && m->is_view;
}

int
pp_timeline_model_row_rank (const PpTimelineModel *m, int row)
{
  if (m == NULL || row < 0 || row >= m->n_ranks)
    return -1;
  return m->is_view ? m->rows[row].rank : row;
}

int
pp_timeline_model_row_process (const PpTimelineModel *m, int row)
{
  return m != NULL && m->is_view && row >= 0 && row < m->n_ranks ? m->rows[row].process : -1;
}

int
pp_timeline_model_row_folded (const PpTimelineModel *m, int row)
{
  return m != NULL && m->is_view && row >= 0 && row < m->n_ranks ? m->rows[row].n_folded : 0;
}

void
pp_timeline_model_view_set_row_label (PpTimelineModel *v, int row, const char *label)
{
  if (v == NULL || !v->is_view || row < 0 || row >= v->n_ranks)
    return;
  snprintf (v->rows[row].label, sizeof v->rows[row].label, "%s", label ? label : "");
  v->generation++;
}

const PpTimelineFold *
pp_timeline_model_fold (const PpTimelineModel *m, int row, long index)
{
  if (m == NULL || !m->is_view || row < 0 || row >= m->n_ranks || m->rows[row].fold == NULL
      || index < 0 || (size_t) index >= m->ranks[row].n_spans)
    return NULL;
  settle (m, row);   /* spans came sorted: nothing moves, the folds stay beside them */
  return &m->rows[row].fold[index];
}

const PpTraceProcess *
pp_timeline_model_process_place (const PpTimelineModel *m, int32_t process)
{
  if (m == NULL || m->proc_at == NULL || process < 0 || process >= PP_TRACE_MAX_PROCESSES
      || m->proc_at[process] < 0 || !m->procs[m->proc_at[process]].placed)
    return NULL;
  return &m->procs[m->proc_at[process]].place;
}

void
pp_timeline_model_view_set_bubbles (PpTimelineModel *v, const double *by_rank, int n_steps)
{
  if (v == NULL || !v->is_view || v->n_ranks == 0)
    return;
  v->generation++;
  free (v->row_bubbles);
  if ((v->row_bubbles = malloc ((size_t) v->n_ranks * sizeof *v->row_bubbles)) == NULL)
    return;
  for (int r = 0; r < v->n_ranks; r++)
    v->row_bubbles[r] = by_rank[v->rows[r].rank];
  v->row_bubble_steps = n_steps;
}
