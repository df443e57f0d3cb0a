/* pp-timeline-model-counters.c — what COUNTER frames hold: the job's loss
 * a step and each replica's own series, a rank's activation memory over
 * time and its peaks, and the block-edge counters (run delay, probe self,
 * on CPU) in the order each row reads them. */
#include "pp-timeline-model-internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
void
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

int
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

const PpTimelineMemorySample *
pp_timeline_model_memory (const PpTimelineModel *m, int r, size_t *n)
{
  *n = m != NULL && r >= 0 && r < m->n_ranks ? m->ranks[r].n_mem : 0;
  return *n ? m->ranks[r].mem : NULL;
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
