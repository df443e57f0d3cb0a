/* pipescope-cli trace commands: summarise a trace (info) and export it
 * (export). */
#include "cli-commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-output.h"
#include "cli-plan.h"
#include "cli-processes.h"
#include "cli-select.h"
#include "cli-clock.h"
#include "cli-replicas.h"
#include "pp-analysis-loss.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"
#include "pp-trace.h"
#include "pp-trace-text.h"
#include "pp-schedule-rules.h"
#include "pp-why.h"
#include "pp-why-runtime.h"

/* ---- reading a whole trace ------------------------------------------------ */

typedef struct {
  uint32_t id;
  char    *name;
} NamedString;

/* The last plan of a rank (a later PLAN for a rank replaces the earlier). */
typedef struct {
  bool   seen;
  bool   has_timeline;
  size_t n_actions;
  double start, end, busy;   /* seconds: first start, last end, compute time */
  /* its compute actions in order: the why analysis builds the schedule
   * from them, and of a plan without times the Chrome export's plan track
   * names them (a timed plan it reads from the model) */
  PpTracePlanAction *order;
  size_t             n_order;
} PlanSummary;

/* A STEP_MARKER frame as it came (its time on the common clock once the
 * offsets are applied). */
typedef struct {
  int64_t t;
  int32_t rank, step;
  int     phase;
  int32_t process;   /* format 1.4: the process that wrote it; -1 not said */
} StepMarker;

typedef struct {
  bool               has_desc;
  PpTraceDescription desc;
  /* every span; in a trace with places (format 1.4) those of the shown
   * replica first, spans[0, n_spans), which every analysis reads (the
   * timeline model shows them alone), and then the other replicas' up
   * to n_all_spans, which the exports write too */
  PpSpan            *spans;
  size_t             n_spans, cap_spans, n_all_spans;
  int                max_rank;       /* -1: none seen */
  int                n_plans;
  PlanSummary       *plans;          /* [cap_plans] by rank */
  int                cap_plans;
  uint64_t           dropped;
  int                truncated;
  NamedString       *strings;
  size_t             n_strings, cap_strings;
  /* RANK and CLOCK_OFFSET items as they came (the last one for a rank holds) */
  PpTraceItem       *rank_items;
  size_t             n_rank_items, cap_rank_items;
  /* counters (loss, activation memory, ...): the Chrome export's counter tracks */
  PpCounter         *counters;
  int32_t           *counter_process;  /* [cap_counters] who wrote each (1.4); -1 not said */
  size_t             n_counters, cap_counters;
  StepMarker        *markers;
  size_t             n_markers, cap_markers;
  /* the plans' compute orders as the why analysis takes them (build_why_plans) */
  PpWhyPlans                why_plans;
  const PpTracePlanAction **why_actions;
  size_t                   *why_n;
  /* format 1.4: the process that wrote each span (-1: not said) and the
   * PROCESS frames, one a process (its last), sorted by process; for the
   * Chrome export, each pipeline rank's track (its shown replica's) */
  int32_t           *span_process;     /* [cap_spans] */
  PpTraceProcess    *procs;
  size_t             n_procs, cap_procs;
  int32_t           *proc_at;          /* [PP_TRACE_MAX_PROCESSES]: index in procs, -1 none; NULL without */
  int               *rank_pid;         /* [n_rank_pid], NULL without places */
  int                n_rank_pid;
  /* [n_procs]: the pipeline a process belongs to, its (dp, tp, cp, ep)
   * numbered densely in that order: the replica of the pipeline */
  int32_t           *proc_replica;
  int32_t            n_replicas;       /* 1 without places */
  size_t             n_unplaced;       /* processes whose place was not read */
  /* export only: what it keeps (--steps, --ranks, --replicas; NULL:
   * everything), and with --clock realtime each Chrome track's real pid,
   * [n_out_pids] by pipescope's track number (NULL: those numbers) */
  const PpCliSelection *keep;
  int32_t              *out_pids;
  size_t                n_out_pids;
} Trace;

/* What the app reads off a trace (its timeline model): the run's time
 * zero (pp_timeline_model_start_ns), which info and every export count
 * from, its step boundaries, and its plan as the plan lane places it (one
 * copy under every step).  Taken from the model and the model freed before
 * the trace is read for the rest: a command never holds two copies of the
 * spans. */
typedef struct {
  int64_t             origin;
  size_t              n_steps;
  int64_t            *step_starts;   /* [n_steps] */
  int32_t            *step_numbers;  /* [n_steps] */
  size_t              n_copies;      /* of the plan */
  int64_t            *shift, *limit; /* [n_copies] pp_timeline_plan_copy */
  int                 n_ranks;
  PpTimelinePlanned **plan;          /* [n_ranks] placed entries, NULL for none */
  size_t             *n_plan;
} AppView;

static void
app_view_clear (AppView *v)
{
  for (int r = 0; r < v->n_ranks; r++)
    free (v->plan[r]);
  free (v->plan);
  free (v->n_plan);
  free (v->step_starts);
  free (v->step_numbers);
  free (v->shift);
  free (v->limit);
  memset (v, 0, sizeof *v);
}

/* Reads path as the app does; with_plan: the steps and the plan too.
 * Returns 0, or prints one line and returns 1. */
static int
app_view_read (const char *path, bool with_plan, AppView *v)
{
  PpError err = { 0 };
  PpTimelineModel *m;

  memset (v, 0, sizeof *v);
  errno = 0;
  if ((m = pp_timeline_model_new_from_file (path, &err)) == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : strerror (errno));
      return 1;
    }
  v->origin = pp_timeline_model_start_ns (m);
  if (with_plan)
    {
      size_t n = pp_timeline_model_n_steps (m), nc = pp_timeline_plan_copies (m);
      int nr = pp_timeline_model_n_ranks (m);
      bool ok = (v->step_starts = malloc ((n + 1) * sizeof *v->step_starts)) != NULL
                && (v->step_numbers = malloc ((n + 1) * sizeof *v->step_numbers)) != NULL
                && (v->shift = malloc ((nc + 1) * sizeof *v->shift)) != NULL
                && (v->limit = malloc ((nc + 1) * sizeof *v->limit)) != NULL
                && (v->plan = calloc ((size_t) nr + 1, sizeof *v->plan)) != NULL
                && (v->n_plan = calloc ((size_t) nr + 1, sizeof *v->n_plan)) != NULL;
      if (ok)
        {
          v->n_ranks = nr;
          v->n_steps = n;
          if (n > 0)   /* the model's arrays are NULL without steps */
            {
              memcpy (v->step_starts, pp_timeline_model_step_starts (m), n * sizeof *v->step_starts);
              memcpy (v->step_numbers, pp_timeline_model_step_numbers (m), n * sizeof *v->step_numbers);
            }
          v->n_copies = nc;
          for (size_t k = 0; k < nc; k++)
            pp_timeline_plan_copy (m, k, &v->shift[k], &v->limit[k]);
          for (int r = 0; ok && r < nr && nc > 0; r++)
            {
              size_t np = pp_timeline_model_n_planned (m, r);
              if (np == 0)
                continue;
              if ((v->plan[r] = malloc (np * sizeof *v->plan[r])) == NULL)
                ok = false;
              else
                {
                  memcpy (v->plan[r], pp_timeline_model_planned (m, r), np * sizeof *v->plan[r]);
                  v->n_plan[r] = np;
                }
            }
        }
      if (!ok)
        {
          pp_timeline_model_free (m);
          app_view_clear (v);
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          return 1;
        }
    }
  pp_timeline_model_free (m);
  return 0;
}

static void
trace_clear (Trace *t)
{
  free (t->spans);
  free (t->span_process);
  free (t->procs);
  free (t->proc_at);
  free (t->rank_pid);
  free (t->proc_replica);
  for (size_t i = 0; i < t->n_strings; i++)
    free (t->strings[i].name);
  free (t->strings);
  for (int r = 0; r < t->cap_plans; r++)
    free (t->plans[r].order);
  free (t->plans);
  free (t->rank_items);
  free (t->counters);
  free (t->counter_process);
  free (t->markers);
  free (t->why_actions);
  free (t->why_n);
  free (t->out_pids);
}

/* Keeps a RANK or CLOCK_OFFSET item; false when out of memory. */
static bool
keep_rank_item (Trace *t, const PpTraceItem *item)
{
  if (t->n_rank_items == t->cap_rank_items)
    {
      size_t cap = t->cap_rank_items ? 2 * t->cap_rank_items : 16;
      PpTraceItem *n = realloc (t->rank_items, cap * sizeof *n);
      if (n == NULL)
        return false;
      t->rank_items = n;
      t->cap_rank_items = cap;
    }
  t->rank_items[t->n_rank_items++] = *item;
  return true;
}

/* A PROCESS item, the last one for a process replacing the earlier;
 * false when out of memory. */
static bool
keep_process (Trace *t, const PpTraceProcess *p)
{
  if (t->proc_at == NULL)
    {
      if ((t->proc_at = malloc (PP_TRACE_MAX_PROCESSES * sizeof *t->proc_at)) == NULL)
        return false;
      memset (t->proc_at, 0xff, PP_TRACE_MAX_PROCESSES * sizeof *t->proc_at);
    }
  if (t->proc_at[p->process] >= 0)
    {
      t->procs[t->proc_at[p->process]] = *p;
      return true;
    }
  if (t->n_procs == t->cap_procs)
    {
      size_t cap = t->cap_procs ? 2 * t->cap_procs : 16;
      PpTraceProcess *n = realloc (t->procs, cap * sizeof *n);
      if (n == NULL)
        return false;
      t->procs = n;
      t->cap_procs = cap;
    }
  t->proc_at[p->process] = (int32_t) t->n_procs;
  t->procs[t->n_procs++] = *p;
  return true;
}

static int
cmp_process (const void *a, const void *b)
{
  const PpTraceProcess *x = a, *y = b;
  return (x->process > y->process) - (x->process < y->process);
}

/* The replica a pipeline rank shows (the timeline model's choice): the
 * lowest place, dp first, then tp, cp, ep. */
static bool
shown_before (const PpTraceProcess *x, const PpTraceProcess *y)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d];
  return x->process < y->process;
}

/* After reading: the processes sorted, and each pipeline rank's Chrome
 * track: its shown process's, or 65536 + rank for a rank no process
 * placed.  false when out of memory. */
static int
cmp_replica_coords (const PpTraceProcess *x, const PpTraceProcess *y)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return 0;
}

static const PpTraceProcess *sort_replicas_of;   /* qsort has no user data */

static int
cmp_replica_index (const void *a, const void *b)
{
  return cmp_replica_coords (&sort_replicas_of[*(const size_t *) a], &sort_replicas_of[*(const size_t *) b]);
}

/* Each process's replica: the pipelines of the job are the processes that
 * share (dp, tp, cp, ep), numbered in that order.  false when out of
 * memory. */
static bool
index_replicas (Trace *t)
{
  size_t *idx = malloc ((t->n_procs + 1) * sizeof *idx);
  if (idx == NULL || (t->proc_replica = malloc ((t->n_procs + 1) * sizeof *t->proc_replica)) == NULL)
    {
      free (idx);
      return false;
    }
  for (size_t i = 0; i < t->n_procs; i++)
    idx[i] = i;
  sort_replicas_of = t->procs;
  qsort (idx, t->n_procs, sizeof *idx, cmp_replica_index);
  int32_t k = -1;
  for (size_t i = 0; i < t->n_procs; i++)
    {
      if (i == 0 || cmp_replica_coords (&t->procs[idx[i - 1]], &t->procs[idx[i]]) != 0)
        k++;
      t->proc_replica[idx[i]] = k;
    }
  t->n_replicas = k + 1;
  free (idx);
  return true;
}

static bool
index_processes (Trace *t)
{
  t->n_replicas = 1;
  if (t->n_procs == 0)
    return true;
  qsort (t->procs, t->n_procs, sizeof *t->procs, cmp_process);
  for (size_t i = 0; i < t->n_procs; i++)
    {
      t->proc_at[t->procs[i].process] = (int32_t) i;
      t->n_unplaced += (t->procs[i].flags & PP_TRACE_PROCESS_UNPLACED) != 0;
    }
  /* a process the hook could not place: a replica of its pipeline rank,
   * numbered in order of global rank (merge numbers them the same way;
   * a process's own file says dp 0) */
  if (t->n_unplaced > 0 && pp_trace_number_unplaced (t->procs, t->n_procs, NULL) != PP_OK)
    return false;
  if (!index_replicas (t))
    return false;
  int n = t->max_rank + 1 > t->desc.n_ranks ? t->max_rank + 1 : t->desc.n_ranks;
  if ((t->rank_pid = malloc (((size_t) n + 1) * sizeof *t->rank_pid)) == NULL)
    return false;
  t->n_rank_pid = n;
  int32_t *shown = malloc (((size_t) n + 1) * sizeof *shown);
  if (shown == NULL)
    return false;
  for (int r = 0; r < n; r++)
    shown[r] = -1;
  for (size_t i = 0; i < t->n_procs; i++)
    {
      const PpTraceProcess *p = &t->procs[i];
      if (p->rank < n && (shown[p->rank] < 0 || shown_before (p, &t->procs[shown[p->rank]])))
        shown[p->rank] = (int32_t) i;
    }
  for (int r = 0; r < n; r++)
    t->rank_pid[r] = shown[r] >= 0 ? t->procs[shown[r]].process : PP_TRACE_MAX_RANKS + r;
  free (shown);
  /* the shown replica's spans first, in order; the others after them */
  PpSpan *tmp = malloc ((t->n_spans + 1) * sizeof *tmp);
  int32_t *tmp_p = malloc ((t->n_spans + 1) * sizeof *tmp_p);
  if (tmp == NULL || tmp_p == NULL)
    {
      free (tmp);
      free (tmp_p);
      return false;
    }
  size_t k = 0, n_shown = 0;
  for (int pass = 0; pass < 2; pass++)
    {
      for (size_t i = 0; i < t->n_spans; i++)
        {
          int32_t g = t->span_process[i];
          int r = t->spans[i].rank;
          bool hidden = g >= 0 && t->proc_at[g] >= 0 && r < n && t->rank_pid[r] != g;
          if (hidden == (pass == 1))
            {
              tmp[k] = t->spans[i];
              tmp_p[k++] = g;
            }
        }
      if (pass == 0)
        n_shown = k;
    }
  memcpy (t->spans, tmp, t->n_spans * sizeof *tmp);
  memcpy (t->span_process, tmp_p, t->n_spans * sizeof *tmp_p);
  free (tmp);
  free (tmp_p);
  t->n_spans = n_shown;
  return true;
}

/* The place of the process that wrote span i, or NULL. */
static const PpTraceProcess *
span_place (const Trace *t, size_t i)
{
  int32_t g = t->span_process != NULL ? t->span_process[i] : -1;
  if (g < 0 || t->proc_at == NULL || t->proc_at[g] < 0)
    return NULL;
  return &t->procs[t->proc_at[g]];
}

/* The replica (pipeline) span i belongs to: its process's (index_replicas),
 * -1 for a span no placed process wrote. */
static int32_t
span_replica (const Trace *t, size_t i)
{
  int32_t g = t->span_process != NULL ? t->span_process[i] : -1;
  if (g < 0 || t->proc_at == NULL || t->proc_at[g] < 0)
    return -1;
  return t->proc_replica[t->proc_at[g]];
}

/* Every span's replica (span_replica) for pp_why_analyse_replicas; NULL
 * for a trace of one pipeline, or out of memory (*oom set). */
static int32_t *
replicas_of (const Trace *t, bool *oom)
{
  *oom = false;
  if (t->n_replicas <= 1)
    return NULL;
  int32_t *r = malloc ((t->n_all_spans + 1) * sizeof *r);
  if (r == NULL)
    {
      *oom = true;
      return NULL;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    r[i] = span_replica (t, i);
  return r;
}

/* The why analysis of a trace: per pipeline rank over the replicas, each
 * replica's pipeline on its own (pp_why_analyse_replicas); a trace of one
 * pipeline as it always was. */
static PpStatus
analyse_why (const Trace *t, PpWhyReport **why, PpWhyChange *ch, PpSchedule **s, PpError *e)
{
  bool oom;
  int32_t *rep = replicas_of (t, &oom);
  if (oom)
    return pp_error_set (e, PP_ENOMEM, "out of memory");
  /* the counters' replicas, as the spans' (runtime's block-edge counters) */
  int32_t *crep = rep != NULL ? malloc ((t->n_counters + 1) * sizeof *crep) : NULL;
  if (rep != NULL && crep == NULL)
    {
      free (rep);
      return pp_error_set (e, PP_ENOMEM, "out of memory");
    }
  for (size_t i = 0; crep != NULL && i < t->n_counters; i++)
    {
      int32_t g = t->counter_process[i];
      crep[i] = g >= 0 && t->proc_at != NULL && t->proc_at[g] >= 0 ? t->proc_replica[t->proc_at[g]] : -1;
    }
  PpStatus st = pp_why_analyse_replicas_counters (&t->desc, &t->why_plans, t->spans, rep,
                                                  rep != NULL ? t->n_all_spans : t->n_spans, t->counters,
                                                  crep, t->n_counters, 0, why, ch, s, e);
  free (rep);
  free (crep);
  return st;
}

/* The Chrome export's track (pid) of a pipeline rank's rows: the rank
 * itself, or in a trace with places its shown process's. */
static int
rank_pid (const Trace *t, int r)
{
  return t->rank_pid != NULL && r >= 0 && r < t->n_rank_pid ? t->rank_pid[r] : r;
}

/* The track of span s (in t->spans): its process's in a trace with places. */
static int
span_pid (const Trace *t, const PpSpan *s)
{
  const PpTraceProcess *p = t->rank_pid != NULL ? span_place (t, (size_t) (s - t->spans)) : NULL;
  return p != NULL ? p->process : rank_pid (t, s->rank);
}

/* The track of an item process wrote for pipeline rank r (a counter, a
 * step marker): the process's own where it is placed, else the rank's. */
static int
item_pid (const Trace *t, int32_t process, int r)
{
  if (t->rank_pid != NULL && process >= 0 && t->proc_at != NULL && t->proc_at[process] >= 0)
    return process;
  return rank_pid (t, r);
}

/* The track of pipeline rank r's plan: in a trace with places one of its
 * own, the pipeline's (every replica runs it), past the process and rank
 * tracks; else the rank's. */
#define PLAN_PID_BASE (2 * PP_TRACE_MAX_RANKS)
static int
plan_pid (const Trace *t, int r)
{
  return t->rank_pid != NULL ? PLAN_PID_BASE + r : r;
}

/* The pid the Chrome export writes for track pid: its process's real pid
 * with --clock realtime, else pid itself. */
static int
out_pid (const Trace *t, int pid)
{
  return t->out_pids != NULL && pid >= 0 && (size_t) pid < t->n_out_pids ? t->out_pids[pid] : pid;
}

/* The replica (dp) of what process wrote: 0 for a process without a place. */
static int32_t
process_dp (const Trace *t, int32_t process)
{
  if (t->proc_at == NULL || process < 0 || process >= PP_TRACE_MAX_PROCESSES || t->proc_at[process] < 0)
    return 0;
  return t->procs[t->proc_at[process]].coord[PP_TRACE_MESH_DP];
}

/* Whether the export keeps an item of step, pipeline rank and process
 * (export's --steps, --ranks, --replicas). */
static bool
keep_item (const Trace *t, int32_t process, int32_t rank, int32_t step)
{
  const PpCliSelection *k = t->keep;
  return k == NULL
         || (pp_cli_list_has (&k->steps, step) && pp_cli_list_has (&k->ranks, rank)
             && pp_cli_list_has (&k->replicas, process_dp (t, process)));
}

/* Whether the export keeps span i. */
static bool
keep_span (const Trace *t, size_t i)
{
  return t->keep == NULL
         || keep_item (t, t->span_process != NULL ? t->span_process[i] : -1, t->spans[i].rank, t->spans[i].step);
}

/* A time as the timeline model keeps it: within +-2^61 ns. */
static int64_t
clamp_time (int64_t t)
{
  return t > PP_TIMELINE_MAX_ABS_NS ? PP_TIMELINE_MAX_ABS_NS
         : t < -PP_TIMELINE_MAX_ABS_NS ? -PP_TIMELINE_MAX_ABS_NS : t;
}

/* Every span on the common clock (rank 0's, for a job of several hosts):
 * the item's time + its clock offset, clamped like the timeline model's
 * times so no later arithmetic overflows.  A CLOCK_OFFSET frame a process
 * wrote (format 1.4: tagged) holds for that process's items alone (two
 * replicas of one pipeline rank on two hosts have two clocks); an untagged
 * one for its rank's items that have no offset of their process, as
 * before 1.4. */
typedef struct {
  int64_t *by_rank;      /* [n ranks] */
  int64_t *by_process;   /* [PP_TRACE_MAX_PROCESSES], NULL when no process said one */
  uint8_t *has_process;  /* the same: 1 where process g said one */
  int      n;
} Offsets;

static int64_t
offset_of (const Offsets *o, int32_t rank, int32_t process)
{
  if (process >= 0 && process < PP_TRACE_MAX_PROCESSES && o->by_process != NULL && o->has_process[process])
    return o->by_process[process];
  /* else its rank's untagged one (a process's own file: what it wrote
   * before its PROCESS frame is untagged) */
  return rank >= 0 && rank < o->n ? o->by_rank[rank] : 0;
}

static int
apply_clock_offsets (Trace *t)
{
  Offsets o = { NULL, NULL, NULL, t->max_rank + 1 };
  bool any = false;

  if (o.n <= 0)
    return 0;
  if ((o.by_rank = calloc ((size_t) o.n, sizeof *o.by_rank)) == NULL)
    return 1;
  for (size_t i = 0; i < t->n_rank_items; i++)
    {
      const PpTraceItem *it = &t->rank_items[i];
      if (it->type != PP_TRACE_ITEM_CLOCK_OFFSET || it->clock_offset.rank >= o.n)
        continue;
      int64_t off = clamp_time (it->clock_offset.offset_ns);
      any = true;
      if (it->process < 0)
        {
          o.by_rank[it->clock_offset.rank] = off;
          continue;
        }
      if (o.by_process == NULL
          && ((o.by_process = calloc (PP_TRACE_MAX_PROCESSES, sizeof *o.by_process)) == NULL
              || (o.has_process = calloc (PP_TRACE_MAX_PROCESSES, 1)) == NULL))
        {
          free (o.by_rank);
          free (o.by_process);
          return 1;
        }
      o.by_process[it->process] = off;
      o.has_process[it->process] = 1;
    }
  for (size_t i = 0; any && i < t->n_spans; i++)
    {
      PpSpan *sp = &t->spans[i];
      int64_t d = offset_of (&o, sp->rank, t->span_process[i]);
      /* |time|, |d| <= 2^61: the sums cannot overflow */
      sp->start_ns = clamp_time (sp->start_ns) + d;
      sp->end_ns = clamp_time (sp->end_ns) + d;
    }
  for (size_t i = 0; any && i < t->n_counters; i++)
    {
      PpCounter *c = &t->counters[i];
      c->time_ns = clamp_time (c->time_ns) + offset_of (&o, c->rank, t->counter_process[i]);
    }
  for (size_t i = 0; any && i < t->n_markers; i++)
    {
      StepMarker *mk = &t->markers[i];
      mk->t = clamp_time (mk->t) + offset_of (&o, mk->rank, mk->process);
    }
  free (o.by_rank);
  free (o.by_process);
  free (o.has_process);
  return 0;
}

static bool
is_compute_plan_action (int kind)
{
  return kind == PP_TRACE_ACT_F || kind == PP_TRACE_ACT_B || kind == PP_TRACE_ACT_I
         || kind == PP_TRACE_ACT_W || kind == PP_TRACE_ACT_OVERLAP_F_B;
}

/* Keeps the summary of a rank's plan, replacing an earlier one; false when
 * out of memory. */
static bool
see_plan (Trace *t, const PpTraceItem *item)
{
  int r = item->plan.rank;
  PlanSummary *ps;

  if (r < 0)
    return true;
  if (r >= t->cap_plans)
    {
      int cap = t->cap_plans ? t->cap_plans : 8;
      while (cap <= r)
        cap *= 2;
      PlanSummary *n = realloc (t->plans, (size_t) cap * sizeof *n);
      if (n == NULL)
        return false;
      memset (n + t->cap_plans, 0, (size_t) (cap - t->cap_plans) * sizeof *n);
      t->plans = n;
      t->cap_plans = cap;
    }
  ps = &t->plans[r];
  free (ps->order);
  memset (ps, 0, sizeof *ps);
  ps->seen = true;
  ps->has_timeline = item->plan.has_timeline != 0;
  ps->n_actions = item->plan.n_actions;
  if (item->plan.n_actions > 0)
    {
      ps->order = malloc (item->plan.n_actions * sizeof *ps->order);
      if (ps->order == NULL)
        return false;
      for (size_t k = 0; k < item->plan.n_actions; k++)
        if (is_compute_plan_action (item->plan.actions[k].kind))
          ps->order[ps->n_order++] = item->plan.actions[k];
    }
  bool any = false;
  for (size_t k = 0; k < item->plan.n_actions; k++)
    {
      const PpTracePlanAction *a = &item->plan.actions[k];
      if (!pp_timeline_plan_action_is_work (a->kind))
        continue;
      if (!any || a->planned_start < ps->start)
        ps->start = a->planned_start;
      any = true;
      if (a->planned_end > ps->end)
        ps->end = a->planned_end;
      ps->busy += a->planned_end - a->planned_start;
    }
  return true;
}

/* The plans' compute orders by rank as t->why_plans, for
 * pp_why_analyse_run and pp_why_schedule_of_trace; false when out of
 * memory. */
static bool
build_why_plans (Trace *t)
{
  int n = 0;

  for (int r = 0; r < t->cap_plans; r++)
    if (t->plans[r].seen)
      n = r + 1;
  if ((t->why_actions = calloc ((size_t) n + 1, sizeof *t->why_actions)) == NULL
      || (t->why_n = calloc ((size_t) n + 1, sizeof *t->why_n)) == NULL)
    return false;
  for (int r = 0; r < n; r++)
    {
      t->why_actions[r] = t->plans[r].order;
      t->why_n[r] = t->plans[r].n_order;
    }
  t->why_plans = (PpWhyPlans) { n, t->why_actions, t->why_n };
  return true;
}

static void
see_rank (Trace *t, int r)
{
  if (r > t->max_rank)
    t->max_rank = r;
}

/* After loading, strings are sorted by id with one entry an id (the last
 * one for an id wins), so a span's name is a binary search. */
static const char *
trace_string (const Trace *t, uint32_t id)
{
  size_t lo = 0, hi = t->n_strings;
  if (id == 0)
    return NULL;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (t->strings[mid].id < id)
        lo = mid + 1;
      else if (t->strings[mid].id > id)
        hi = mid;
      else
        return t->strings[mid].name;
    }
  return NULL;
}

static int
cmp_string_id (const void *a, const void *b)
{
  const NamedString *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

/* Sorts the strings by id keeping the last of each id (qsort is not
 * stable: each entry carries its arrival, and the latest of an id wins). */
static void
strings_index (Trace *t)
{
  size_t n = 0;
  if (t->n_strings < 2)
    return;
  typedef struct { uint32_t id; size_t order; char *name; } Tagged;
  Tagged *tg = malloc (t->n_strings * sizeof *tg);
  if (tg == NULL)
    return;   /* left unsorted; lookups then miss, names print empty */
  for (size_t i = 0; i < t->n_strings; i++)
    {
      tg[i].id = t->strings[i].id;
      tg[i].order = i;
      tg[i].name = t->strings[i].name;
    }
  qsort (tg, t->n_strings, sizeof *tg, cmp_string_id);
  for (size_t i = 0; i < t->n_strings;)
    {
      size_t j = i, best = i;
      for (; j < t->n_strings && tg[j].id == tg[i].id; j++)
        if (tg[j].order > tg[best].order)
          best = j;
      for (size_t k = i; k < j; k++)
        if (k != best)
          free (tg[k].name);
      t->strings[n].id = tg[best].id;
      t->strings[n].name = tg[best].name;
      n++;
      i = j;
    }
  t->n_strings = n;
  free (tg);
}

/* Returns 0, or prints one line and returns 1. */
static int
trace_load (const char *path, Trace *t)
{
  PpError err = { 0 };
  PpTraceReader *r;
  PpTraceItem item;

  memset (t, 0, sizeof *t);
  t->max_rank = -1;
  r = pp_trace_reader_new_path (path, &err);
  if (r == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : strerror (errno));
      return 1;
    }
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg);
          pp_trace_reader_free (r);
          trace_clear (t);
          memset (t, 0, sizeof *t);
          return 1;
        }
      switch (item.type)
        {
        case PP_TRACE_ITEM_END:
          t->truncated = item.truncated;
          pp_trace_reader_free (r);
          strings_index (t);
          t->n_all_spans = t->n_spans;
          if (apply_clock_offsets (t) != 0 || !build_why_plans (t) || !index_processes (t))
            {
              fprintf (stderr, "pipescope-cli: error: out of memory\n");
              trace_clear (t);
              memset (t, 0, sizeof *t);
              return 1;
            }
          /* two processes at one place, or places no job has: refused,
           * as merge refuses them, not one of them dropped unsaid */
          if (pp_trace_places_check (t->procs, t->n_procs, &err) != PP_OK)
            {
              fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg);
              trace_clear (t);
              memset (t, 0, sizeof *t);
              return 1;
            }
          return 0;
        case PP_TRACE_ITEM_DESCRIPTION:
          t->has_desc = true;
          t->desc = *item.description;
          break;
        case PP_TRACE_ITEM_PLAN:
          t->n_plans++;
          see_rank (t, item.plan.rank);
          if (!see_plan (t, &item))
            goto oom;
          break;
        case PP_TRACE_ITEM_SPAN:
          if (t->n_spans == t->cap_spans)
            {
              size_t cap = t->cap_spans ? 2 * t->cap_spans : 1024;
              PpSpan *n = realloc (t->spans, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->spans = n;
              int32_t *np = realloc (t->span_process, cap * sizeof *np);
              if (np == NULL)
                goto oom;
              t->span_process = np;
              t->cap_spans = cap;
            }
          t->span_process[t->n_spans] = item.process;
          t->spans[t->n_spans++] = item.span;
          see_rank (t, item.span.rank);
          break;
        case PP_TRACE_ITEM_COUNTER:
          if (item.counter.rank < 0 || item.counter.rank >= PP_TRACE_MAX_RANKS)
            break;
          if (t->n_counters == t->cap_counters)
            {
              size_t cap = t->cap_counters ? 2 * t->cap_counters : 256;
              PpCounter *n = realloc (t->counters, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->counters = n;
              int32_t *np = realloc (t->counter_process, cap * sizeof *np);
              if (np == NULL)
                goto oom;
              t->counter_process = np;
              t->cap_counters = cap;
            }
          t->counter_process[t->n_counters] = item.process;
          t->counters[t->n_counters++] = item.counter;
          break;
        case PP_TRACE_ITEM_STEP_MARKER:
          see_rank (t, item.step_marker.rank);
          if (t->n_markers == t->cap_markers)
            {
              size_t cap = t->cap_markers ? 2 * t->cap_markers : 64;
              StepMarker *n = realloc (t->markers, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->markers = n;
              t->cap_markers = cap;
            }
          t->markers[t->n_markers++] = (StepMarker) { item.step_marker.time_ns, item.step_marker.rank,
                                                      item.step_marker.step, (int) item.step_marker.phase,
                                                      item.process };
          break;
        case PP_TRACE_ITEM_STRING:
          if (t->n_strings == t->cap_strings)
            {
              size_t cap = t->cap_strings ? 2 * t->cap_strings : 64;
              NamedString *n = realloc (t->strings, cap * sizeof *n);
              if (n == NULL)
                goto oom;
              t->strings = n;
              t->cap_strings = cap;
            }
          t->strings[t->n_strings].id = item.string.id;
          t->strings[t->n_strings].name = strdup (item.string.name);
          if (t->strings[t->n_strings].name == NULL)
            goto oom;
          t->n_strings++;
          break;
        case PP_TRACE_ITEM_RANK:
        case PP_TRACE_ITEM_CLOCK_OFFSET:
          if (!keep_rank_item (t, &item))
            goto oom;
          break;
        case PP_TRACE_ITEM_PROCESS:
          if (!keep_process (t, &item.process_info))
            goto oom;
          see_rank (t, item.process_info.rank);
          break;
        case PP_TRACE_ITEM_DROPPED:
          /* saturating: a file's counts cannot wrap the sum */
          t->dropped = item.dropped.count > UINT64_MAX - t->dropped ? UINT64_MAX
                       : t->dropped + item.dropped.count;
          if (item.dropped.rank >= 0)
            see_rank (t, item.dropped.rank);
          break;
        default:
          break;
        }
    }
oom:
  fprintf (stderr, "pipescope-cli: error: out of memory\n");
  pp_trace_reader_free (r);
  trace_clear (t);
  memset (t, 0, sizeof *t);
  return 1;
}


/* The RANK and CLOCK_OFFSET items by rank, in file order within a rank:
 * the last of a rank is the one that counts. */
static int
rank_item_rank (const PpTraceItem *it)
{
  return it->type == PP_TRACE_ITEM_RANK ? it->rank_info.rank : it->clock_offset.rank;
}

static int
cmp_rank_item (const void *a, const void *b)
{
  const PpTraceItem *x = *(const PpTraceItem *const *) a, *y = *(const PpTraceItem *const *) b;
  int rx = rank_item_rank (x), ry = rank_item_rank (y);
  if (rx != ry)
    return rx < ry ? -1 : 1;
  if (x->type != y->type)
    return x->type < y->type ? -1 : 1;
  return x < y ? -1 : x > y;   /* file order: the items are one array */
}

/* "rank R: host H pid N" for every rank whose RANK frame the trace holds,
 * with its clock offset where it has one; nothing for an older trace.
 * One sort, not a pass over the items per rank: a trace may hold tens of
 * thousands of ranks' frames. */
static void
print_ranks (const Trace *t)
{
  size_t n = 0;
  const PpTraceItem **by_rank = malloc ((t->n_rank_items ? t->n_rank_items : 1) * sizeof *by_rank);
  if (by_rank == NULL)
    return;
  for (size_t i = 0; i < t->n_rank_items; i++)
    if (t->rank_items[i].type == PP_TRACE_ITEM_RANK || t->rank_items[i].type == PP_TRACE_ITEM_CLOCK_OFFSET)
      by_rank[n++] = &t->rank_items[i];
  qsort (by_rank, n, sizeof *by_rank, cmp_rank_item);
  for (size_t i = 0; i < n;)
    {
      int r = rank_item_rank (by_rank[i]);
      const PpTraceItem *last = NULL;
      int64_t off = 0;
      for (; i < n && rank_item_rank (by_rank[i]) == r; i++)
        if (by_rank[i]->type == PP_TRACE_ITEM_RANK)
          last = by_rank[i];
        else
          off = by_rank[i]->clock_offset.offset_ns;
      if (last == NULL || r < 0)
        continue;
      char host[4 * sizeof last->rank_info.host];
      printf ("rank %d: host %s pid %d", r,
              last->rank_info.host[0] ? pp_cli_text (last->rank_info.host, host, sizeof host) : "?",
              last->rank_info.pid);
      if (off != 0)
        printf (", clock %+.3f ms to rank 0's", (double) off / 1e6);
      printf ("\n");
    }
  free (by_rank);
}

/* The mesh's sizes (pp_cli_mesh_sizes). */
static void
mesh_sizes (const Trace *t, int32_t size[PP_TRACE_MESH_DIMS])
{
  pp_cli_mesh_sizes (t->procs, t->n_procs, size);
}

/* "replica dp 0 of 2 shown" (and what that means for the numbers after
 * it) in a trace where pipeline ranks have several processes: the
 * analysis is the timeline's, one replica's. */
static void
print_shown_replica (const Trace *t)
{
  int32_t size[PP_TRACE_MESH_DIMS];
  if (t->rank_pid == NULL || t->n_all_spans == t->n_spans)
    return;
  mesh_sizes (t, size);
  int32_t shown[PP_TRACE_MESH_DIMS];
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    shown[d] = INT32_MAX;
  for (int r = 0; r < t->n_rank_pid; r++)
    if (t->rank_pid[r] < PP_TRACE_MAX_PROCESSES && t->proc_at[t->rank_pid[r]] >= 0)
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        {
          int c = t->procs[t->proc_at[t->rank_pid[r]]].coord[d];
          shown[d] = c < shown[d] ? c : shown[d];
        }
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (shown[d] == INT32_MAX)
      shown[d] = 0;
  /* the timeline folds the replicas; the bubble below is one replica's,
   * idle by cause the median replica's */
  int64_t per = pp_trace_mesh_count (size, PP_TRACE_MESH_DP);
  printf ("%lld %s a pipeline rank, folded in the timeline (median, mark to the latest end)%s; "
          "the steps, step times and bubble below are the median copy's (by step length, as the critical "
          "path's), the idle over the whole trace one replica's (dp %d, each pipeline rank's "
          "lowest place), idle by cause is over the %d copies of the pipeline, the spread over replicas after "
          "them; %zu of the %zu spans, every process's in the exports\n",
          (long long) per, per == size[PP_TRACE_MESH_DP] ? "replicas" : "processes",
          t->n_unplaced > 0 ? " (place not read from the job: replicas numbered by global rank)" : "",
          shown[PP_TRACE_MESH_DP], t->n_replicas, t->n_spans, t->n_all_spans);
}

static int
n_ranks_of (const Trace *t)
{
  int n = t->max_rank + 1;
  if (t->has_desc && t->desc.n_ranks > n)
    n = t->desc.n_ranks;
  return n;
}

static const char *
kind_name (int kind)
{
  const char *n = kind < PP_N_SPAN_KINDS ? pp_span_kind_name ((PpSpanKind) kind) : NULL;
  return n ? n : "UNKNOWN";
}

static int
cmp_interval (const void *a, const void *b)
{
  const int64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The run's start, the zero every export and info's times count from: the timeline's zero
 * (its shown spans' and its plan's start: the job describes itself before
 * its first block), or the earliest thing any process recorded before it,
 * a span, a step's marker or a counter (every replica's, not only those
 * the timeline shows: a process may start before the one that described
 * the job), so that no exported time is negative. */
static int64_t
run_start (const Trace *t, const AppView *v)
{
  int64_t z = v->origin;
  for (size_t i = 0; i < t->n_all_spans; i++)
    z = clamp_time (t->spans[i].start_ns) < z ? clamp_time (t->spans[i].start_ns) : z;
  for (size_t i = 0; i < t->n_markers; i++)
    if (t->markers[i].rank >= 0)
      z = clamp_time (t->markers[i].t) < z ? clamp_time (t->markers[i].t) : z;
  for (size_t i = 0; t->n_all_spans > 0 && i < t->n_counters; i++)
    if (isfinite (t->counters[i].value))
      z = clamp_time (t->counters[i].time_ns) < z ? clamp_time (t->counters[i].time_ns) : z;
  return z;
}

/* ---- info ------------------------------------------------------------------ */


/* The job's loss, first to last (pp-analysis-loss.h: over the replicas
 * as the framework reduces it; the median step is print_step_bubbles',
 * the one analysis's). */
static void
print_loss (const Trace *t)
{
  PpAnalysisLoss *a = pp_analysis_loss_new ();
  char line[256];
  if (a == NULL)
    return;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      int32_t g = t->counter_process != NULL ? t->counter_process[i] : -1;
      const PpTraceProcess *p = g >= 0 && t->proc_at != NULL && t->proc_at[g] >= 0 ? &t->procs[t->proc_at[g]] : NULL;
      pp_analysis_loss_add (a, &t->counters[i], p != NULL ? p->coord[PP_TRACE_MESH_DP] : -1);
    }
  if (pp_analysis_loss_describe (a, line, sizeof line)[0])
    printf ("%s\n", line);
  pp_analysis_loss_free (a);
}

/* One process's (or, without places, one rank's) collective counters. */
typedef struct {
  int32_t process, rank;
  double  calls, bytes;
  int32_t n_calls, n_bytes;
} Collectives;

static int
cmp_collectives (const void *a, const void *b)
{
  const Collectives *x = a, *y = b;
  if (x->process != y->process)
    return x->process < y->process ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* "collectives inside the blocks (per step mean, total):" and a line a
 * process (format 1.5: one COLLECTIVE_CALLS and one COLLECTIVE_BYTES value
 * a step a process, that step's total); nothing when the trace has none.
 * Counters are grouped by their own process, so replicas stay apart.  Past
 * PP_CLI_PROCESSES_LISTED processes, unless list, one line of their least
 * and largest instead. */
static void
print_collectives (const Trace *t, bool list)
{
  size_t n = 0;
  for (size_t i = 0; i < t->n_counters; i++)
    n += (t->counters[i].kind == PP_COUNTER_COLLECTIVE_CALLS || t->counters[i].kind == PP_COUNTER_COLLECTIVE_BYTES)
         && isfinite (t->counters[i].value);
  if (n == 0)
    return;
  Collectives *c = calloc (n, sizeof *c);
  if (c == NULL)
    return;
  size_t k = 0;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *x = &t->counters[i];
      bool calls = x->kind == PP_COUNTER_COLLECTIVE_CALLS;
      if ((!calls && x->kind != PP_COUNTER_COLLECTIVE_BYTES) || !isfinite (x->value))
        continue;
      c[k] = (Collectives) { t->counter_process[i], x->rank, calls ? x->value : 0, calls ? 0 : x->value,
                             calls, !calls };
      k++;
    }
  qsort (c, n, sizeof *c, cmp_collectives);
  printf ("collectives inside the blocks (tensor-parallel calls the hook counted; a step's mean, and in all):\n");
  /* each process's sums, in place */
  size_t n_groups = 0;
  for (size_t i = 0; i < n;)
    {
      Collectives s = c[i];
      size_t j = i + 1;
      for (; j < n && c[j].process == s.process && c[j].rank == s.rank; j++)
        {
          s.calls += c[j].calls;
          s.bytes += c[j].bytes;
          s.n_calls += c[j].n_calls;
          s.n_bytes += c[j].n_bytes;
        }
      c[n_groups++] = s;
      i = j;
    }
  if (!list && n_groups > PP_CLI_PROCESSES_LISTED)
    {
      /* the least and the largest a step, and whose */
      const Collectives *lo[2] = { NULL, NULL }, *hi[2] = { NULL, NULL };
      for (size_t i = 0; i < n_groups; i++)
        for (int b = 0; b < 2; b++)
          {
            const Collectives *x = &c[i];
            if ((b ? x->n_bytes : x->n_calls) == 0)
              continue;
            double v = b ? x->bytes / x->n_bytes : x->calls / x->n_calls;
            if (lo[b] == NULL || v < (b ? lo[b]->bytes / lo[b]->n_bytes : lo[b]->calls / lo[b]->n_calls))
              lo[b] = x;
            if (hi[b] == NULL || v > (b ? hi[b]->bytes / hi[b]->n_bytes : hi[b]->calls / hi[b]->n_calls))
              hi[b] = x;
          }
      printf ("  %zu processes (info --processes lists each):", n_groups);
      if (lo[0] != NULL)
        printf (" calls a step %.1f (process %d) to %.1f (process %d);", lo[0]->calls / lo[0]->n_calls,
                lo[0]->process, hi[0]->calls / hi[0]->n_calls, hi[0]->process);
      if (lo[1] != NULL)
        printf (" bytes a step %.3f MiB (process %d) to %.3f MiB (process %d)",
                lo[1]->bytes / lo[1]->n_bytes / 1048576.0, lo[1]->process,
                hi[1]->bytes / hi[1]->n_bytes / 1048576.0, hi[1]->process);
      printf ("\n");
      free (c);
      return;
    }
  for (size_t i = 0; i < n_groups; i++)
    {
      Collectives s = c[i];
      const PpTraceProcess *p = s.process >= 0 && t->proc_at != NULL && t->proc_at[s.process] >= 0
                                ? &t->procs[t->proc_at[s.process]] : NULL;
      if (p != NULL)
        printf ("  process %d (pp %d dp %d tp %d):", p->process, p->coord[PP_TRACE_MESH_PP],
                p->coord[PP_TRACE_MESH_DP], p->coord[PP_TRACE_MESH_TP]);
      else
        printf ("  rank %d:", s.rank);
      if (s.n_calls > 0)
        printf (" calls %.1f a step, %.0f in all (%d step%s);", s.calls / s.n_calls, s.calls, s.n_calls,
                s.n_calls == 1 ? "" : "s");
      if (s.n_bytes > 0)
        printf (" bytes %.3f MiB a step, %.3f MiB in all (%d step%s)", s.bytes / s.n_bytes / 1048576.0,
                s.bytes / 1048576.0, s.n_bytes, s.n_bytes == 1 ? "" : "s");
      printf ("\n");
    }
  free (c);
}

/* The one analysis's steps of the spans info has read (not the file
 * again): blocks and data-parallel communication, busy and not bubble
 * (as the app's statistics); a job of replicas: every process's at its
 * place, so that the steps are its median copy's, as the app's
 * (pp_timeline_model_step_analysis).  n_steps 0 when none counts. */
static void
step_analysis_of (const Trace *t, PpAnalysisSteps *a)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem it;
  bool placed = t->n_procs > 0 && t->span_process != NULL;
  size_t n_spans = placed ? t->n_all_spans : t->n_spans;
  const PpSpan *spans = t->spans;

  memset (a, 0, sizeof *a);
  if (m == NULL)
    return;
  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_PROCESS;
  for (size_t i = 0; placed && i < t->n_procs; i++)
    {
      it.process = t->procs[i].process;
      it.process_info = t->procs[i];
      pp_timeline_model_add (m, &it);
    }
  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_SPAN;
  it.process = -1;
  for (size_t i = 0; i < n_spans; i++)
    if (pp_analysis_span_counts (spans[i].kind))
      {
        it.span = spans[i];
        it.process = placed ? t->span_process[i] : -1;
        pp_timeline_model_add (m, &it);
      }
  pp_timeline_model_step_analysis (m, a);
  pp_timeline_model_free (m);
}

/* The steps analysed, the median step and each rank's bubble inside the
 * steps' compute windows (what `run` prints and what compares with a
 * plan's bubble a step); nothing when the trace has no step. */
static void
print_step_bubbles (const Trace *t, int n_ranks)
{
  PpAnalysisSteps a;
  step_analysis_of (t, &a);
  if (a.n_ranks < n_ranks)
    n_ranks = a.n_ranks;
  if (a.n_steps > 0)
    {
      char what[160], pc[32];
      printf ("steps analysed: %s\n", pp_analysis_describe_steps (&a, what, sizeof what));
      printf ("median step: %.3f ms (the whole step: first work start to last end, every rank)\n", a.median_step / 1e6);
      printf (PP_ANALYSIS_MEASURED_LABEL " (the median over the steps analysed of the share of the step a rank "
              "runs no work):\n");
      for (int r = 0; r < n_ranks; r++)
        printf ("  rank %d bubble: %s\n", r, pp_analysis_format_percent (pc, sizeof pc, a.bubble[r], 1));
      printf ("mean bubble a step: %s\n", pp_analysis_format_percent (pc, sizeof pc, a.bubble_mean, 1));
    }
  pp_analysis_steps_clear (&a);
}

/* export --format why: the why report with the one analysis's steps,
 * median step and bubbles as its first member. */
static int
write_why_json (FILE *f, const Trace *t, const PpSchedule *s, const PpWhyReport *why, const PpWhyChange *ch)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream (&buf, &len);
  PpAnalysisSteps a;

  if (m == NULL)
    return -1;
  pp_why_write_json (m, s, why, ch);
  if (fclose (m) != 0 || len < 2)
    {
      free (buf);
      return -1;
    }
  step_analysis_of (t, &a);
  fputs ("{\n  ", f);
  pp_analysis_write_json_member (f, &a);
  fputs (",\n", f);
  fputs (buf + 2, f);   /* pp_why_write_json's object past its "{\n" */
  pp_analysis_steps_clear (&a);
  free (buf);
  return 0;
}

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

/* The step numbers of t's spans (one a run of equal ones: the spans come
 * step after step) and markers, into v when not NULL; returns how many. */
static size_t
step_numbers (const Trace *t, int32_t *v)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (t->spans[i].step >= 0 && (i == 0 || t->spans[i].step != t->spans[i - 1].step))
      {
        if (v)
          v[k] = t->spans[i].step;
        k++;
      }
  for (size_t i = 0; i < t->n_markers; i++)
    if (t->markers[i].step >= 0)
      {
        if (v)
          v[k] = t->markers[i].step;
        k++;
      }
  return k;
}

/* The steps the trace holds: how many step numbers its spans and markers
 * carry, and the first and last.  A record that attached late holds steps
 * 3 to 9, seven of them, not ten; a step skipped is not counted.  Returns
 * -1 out of memory. */
static int64_t
count_steps (const Trace *t, int32_t *first, int32_t *last)
{
  size_t n = step_numbers (t, NULL);
  int32_t *v = malloc ((n + 1) * sizeof *v);
  if (v == NULL)
    return -1;
  step_numbers (t, v);
  qsort (v, n, sizeof *v, cmp_i32);
  int64_t count = 0;
  for (size_t i = 0; i < n; i++)
    count += i == 0 || v[i] != v[i - 1];
  *first = n ? v[0] : 0;
  *last = n ? v[n - 1] : 0;
  free (v);
  return count;
}

static void
info_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli info FILE [--processes]\n"
         "\n"
         "Summarises a trace: the run's description, ranks, steps, span counts per\n"
         "kind, each rank's bubble a step (the median over the steps of the share of\n"
         "the whole step, from its first work start to its last end (its data-parallel\n"
         "work and optimizer step included), in which the rank works not at all: the number run, the app and render give, and what compares\n"
         "with the plan's bubble), its idle share over the whole trace (set-up and\n"
         "the time between steps included), dropped events and\n"
         "whether the file was cut short.  For a run whose schedule it can rebuild:\n"
         "each rank's idle time a step split by cause (schedule, imbalance,\n"
         "transfers, runtime), each stage's share of the critical path, the slowest\n"
         "stage and, for the bundled model, the partition that balances it with its\n"
         "predicted step time ('export --format why' writes all of it as JSON).\n"
         "\n"
         "  --processes   a line for every process of a job of several (its place,\n"
         "                host and pid, and its collectives); past 16 processes\n"
         "                info otherwise says them in one line: 'processes: 2048\n"
         "                (pp 16 \u00d7 dp 128 \u00d7 tp 1) on 256 hosts', and their\n"
         "                collectives in one line of the least and the largest\n", out);
}

int
pp_cli_info (int argc, char **argv)
{
  static const struct option options[] = {
    { "processes", no_argument, NULL, 'P' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *path;
  Trace t;
  int opt, n_ranks;
  bool list_processes = false;
  size_t per_kind[PP_N_SPAN_KINDS + 1] = { 0 };
  int64_t gstart = INT64_MAX, gend = INT64_MIN;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":h", options, NULL)) != -1)
    {
      if (opt == 'h')
        {
          info_usage (stdout);
          return 0;
        }
      if (opt == 'P')
        {
          list_processes = true;
          continue;
        }
      return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli info --help'", argv[optind - 1]);
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "info", &path)) != 0)
    return rc_args;
  AppView av;
  if (app_view_read (path, false, &av) != 0 || trace_load (path, &t) != 0)
    return 1;

  n_ranks = n_ranks_of (&t);
  /* a file cut short is said first: every number below is of what it holds */
  if (t.truncated)
    printf ("trace: %s (truncated: the file ends inside a frame; what follows is what it holds)\n", path);
  else
    printf ("trace: %s\n", path);
  if (t.has_desc)
    {
      /* the trace's strings escaped: a file cannot write to the terminal */
      char text[4][4 * sizeof t.desc.cmdline + 1];
      printf ("schedule: %s (P=%d, M=%d, V=%d)\n", pp_cli_text (t.desc.schedule, text[0], sizeof text[0]),
              t.desc.n_ranks, t.desc.n_microbatches, t.desc.n_virtual);
      printf ("backend: %s\nhost: %s\nmodel: %s\ncommand: %s\n", pp_cli_text (t.desc.backend, text[0], sizeof text[0]),
              pp_cli_text (t.desc.host, text[1], sizeof text[1]), pp_cli_text (t.desc.model, text[2], sizeof text[2]),
              pp_cli_text (t.desc.cmdline, text[3], sizeof text[3]));
      {
        time_t secs = (time_t) (t.desc.start_unix_ns / 1000000000);
        struct tm tm;
        char when[64] = "unknown";
        if (t.desc.start_unix_ns > 0 && gmtime_r (&secs, &tm) != NULL)
          strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        printf ("started: %s\n", when);
      }
      /* a trace of processes names each with its host and pid below; a
       * pipeline rank's RANK frames are its replicas', the last one's only */
      if (t.n_procs == 0)
        print_ranks (&t);
    }
  else
    printf ("description: none\n");
  printf ("ranks: %d\n", n_ranks);
  pp_cli_print_processes (t.procs, t.n_procs, t.n_unplaced, list_processes);
  {
    int32_t first, last;
    int64_t n_steps = count_steps (&t, &first, &last);
    if (n_steps < 0)
      {
        fprintf (stderr, "pipescope-cli: error: out of memory\n");
        trace_clear (&t);
        return 1;
      }
    /* numbered 0 to N-1 it goes without saying; otherwise say which */
    if (n_steps == 0 || (first == 0 && last == n_steps - 1))
      printf ("steps: %" PRId64 "\n", n_steps);
    else
      printf ("steps: %" PRId64 " (%" PRId32 " to %" PRId32 ")\n", n_steps, first, last);
  }
  printf ("plans: %d\n", t.n_plans);
  /* The planned bubble of the last plan of every rank, when they all carry
   * the simulator's timeline (a later plan replaces an earlier one). */
  {
    bool all = n_ranks > 0 && t.cap_plans >= n_ranks;
    double ps = INFINITY, pe = -INFINITY;
    for (int r = 0; all && r < n_ranks; r++)
      {
        if (!t.plans[r].seen || !t.plans[r].has_timeline)
          all = false;
        else
          {
            if (t.plans[r].start < ps) ps = t.plans[r].start;
            if (t.plans[r].end > pe) pe = t.plans[r].end;
          }
      }
    if (all && pe > ps)
      {
        printf ("bubble, %s (the last plan of each rank, one step %.3f ms):",
                pp_analysis_plan_label (pp_analysis_plan_of_backend (t.has_desc ? t.desc.backend : NULL)),
                (pe - ps) * 1e3);
        for (int r = 0; r < n_ranks; r++)
          printf ("%s rank %d %.1f%%", r ? "," : "", r, 100.0 * (1.0 - t.plans[r].busy / (pe - ps)));
        putchar ('\n');
      }
  }
  if (t.has_desc)
    {
      /* the third bubble, named as the app's Stats table names it */
      double cf = pp_bubble_closed_form (t.desc.schedule, t.desc.n_ranks, t.desc.n_microbatches, t.desc.n_virtual);
      if (cf >= 0)
        printf ("bubble, %s: %.1f%%\n", pp_analysis_plan_label (PP_ANALYSIS_PLAN_CLOSED_FORM), 100.0 * cf);
    }

  for (size_t i = 0; i < t.n_all_spans; i++)
    {
      const PpSpan *sp = &t.spans[i];
      per_kind[sp->kind < PP_N_SPAN_KINDS ? sp->kind : PP_N_SPAN_KINDS]++;
      if (i >= t.n_spans)
        continue;   /* another replica's: in the count, not the analysis */
      if (sp->start_ns < gstart)
        gstart = sp->start_ns;
      if (sp->end_ns > gend)
        gend = sp->end_ns;
    }
  printf ("spans: %zu", t.n_all_spans);
  {
    bool first = true;
    for (int k = 0; k <= PP_N_SPAN_KINDS; k++)
      if (per_kind[k])
        {
          printf ("%s%s %zu", first ? " (" : ", ", k < PP_N_SPAN_KINDS ? kind_name (k) : "other",
                  per_kind[k]);
          first = false;
        }
    if (!first)
      putchar (')');
    putchar ('\n');
  }
  print_shown_replica (&t);

  if (t.n_spans > 0 && gend > gstart && n_ranks > 0)
    {
      /* Differences of file times as unsigned: end >= start, so exact. */
      double len = (double) ((uint64_t) gend - (uint64_t) gstart), sum = 0;
      int64_t (*iv)[2] = malloc ((t.n_spans + 1) * sizeof *iv);
      /* The spans bucketed by rank once (counting sort): each rank then
       * reads its own, not every span (ranks x spans). */
      size_t *first = calloc ((size_t) n_ranks + 1, sizeof *first);
      if (iv == NULL || first == NULL)
        {
          free (iv);
          free (first);
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          trace_clear (&t);
          return 1;
        }
      for (size_t i = 0; i < t.n_spans; i++)
        if (t.spans[i].rank < n_ranks && pp_span_kind_is_work (t.spans[i].kind)
            && t.spans[i].end_ns > t.spans[i].start_ns)
          first[t.spans[i].rank + 1]++;
      for (int r = 0; r < n_ranks; r++)
        first[r + 1] += first[r];
      {
        size_t *fill = malloc (((size_t) n_ranks + 1) * sizeof *fill);
        if (fill == NULL)
          {
            free (iv);
            free (first);
            fprintf (stderr, "pipescope-cli: error: out of memory\n");
            trace_clear (&t);
            return 1;
          }
        memcpy (fill, first, ((size_t) n_ranks + 1) * sizeof *fill);
        for (size_t i = 0; i < t.n_spans; i++)
          if (t.spans[i].rank < n_ranks && pp_span_kind_is_work (t.spans[i].kind)
              && t.spans[i].end_ns > t.spans[i].start_ns)
            {
              size_t j = fill[t.spans[i].rank]++;
              iv[j][0] = t.spans[i].start_ns;
              iv[j][1] = t.spans[i].end_ns;
            }
        free (fill);
      }
      /* the bubble a step first: the figure run, the app and render give */
      print_step_bubbles (&t, n_ranks);
      pp_cli_print_replicas (t.procs, t.n_procs, t.spans, t.span_process, t.n_all_spans, n_ranks);
      print_loss (&t);
      print_collectives (&t, list_processes);
      /* where the spans lie, from the run's start as the exports count */
      int64_t zero = run_start (&t, &av);
      printf ("idle over the whole trace (between %.3f ms and %.3f ms, set-up and gaps between steps included):\n",
              (double) (clamp_time (gstart) - zero) / 1e6, (double) (clamp_time (gend) - zero) / 1e6);
      for (int r = 0; r < n_ranks; r++)
        {
          int64_t (*rv)[2] = iv + first[r];
          size_t n = first[r + 1] - first[r];
          int64_t cs = 0, ce = 0;
          double busy = 0;
          qsort (rv, n, sizeof *rv, cmp_interval);
          for (size_t i = 0; i < n; i++)
            {
              if (i == 0 || rv[i][0] > ce)
                {
                  if (i > 0)
                    busy += (double) ((uint64_t) ce - (uint64_t) cs);
                  cs = rv[i][0];
                  ce = rv[i][1];
                }
              else if (rv[i][1] > ce)
                ce = rv[i][1];
            }
          if (n > 0)
            busy += (double) ((uint64_t) ce - (uint64_t) cs);
          double bubble = (len - busy) / len;
          sum += bubble;
          printf ("  rank %d idle: %.1f%% (busy %.3f ms)\n", r, 100.0 * bubble, busy / 1e6);
        }
      free (iv);
      free (first);
      printf ("mean idle: %.1f%%\n", 100.0 * sum / n_ranks);
    }
  else
    printf ("bubble: n/a (no spans)\n");
  /* issue 16: why the bubble is there */
  {
    PpWhyReport *why = NULL;
    PpWhyChange ch;
    PpError e = { 0 };
    if (t.has_desc && analyse_why (&t, &why, &ch, NULL, &e) == PP_OK)
      {
        printf ("idle by cause (a step, the mean over the %d step%s analysed; 'export --format why' has it all):\n",
                why->n_steps, why->n_steps == 1 ? "" : "s");
        pp_why_print_idle (stdout, why->idle, why->ranks, 1e3, "ms");
        pp_why_print_replicas (stdout, why, 1e3, "ms");
        pp_why_print_runtime_parts (stdout, why->idle, why->ranks, 1e3, "ms");
        pp_why_print_path (stdout, why);
        pp_why_print_change (stdout, &ch, 1e3, "ms");
      }
    else
      printf ("idle by cause: n/a (%s)\n", t.has_desc ? e.msg : "no description");
    pp_why_report_free (why);
  }
  printf ("dropped events: %" PRIu64 "\n", t.dropped);
  printf ("truncated: %s\n", t.truncated ? "yes (the file ends inside a frame)" : "no");
  trace_clear (&t);
  return fflush (stdout) == 0 ? 0 : 1;
}

/* ---- export ---------------------------------------------------------------- */

static void
export_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli export FILE [--format chrome|csv|why] -o OUT\n"
         "                            [--steps LIST] [--ranks LIST] [--replicas LIST]\n"
         "                            [--clock run|realtime]\n"
         "\n"
         "Converts a trace.\n"
         "\n"
         "  -f, --format FORMAT   chrome (Chrome trace JSON for chrome://tracing and\n"
         "                        Perfetto, default: blocks, transfers, dependencies,\n"
         "                        counters, each rank's steps and its plan), csv (one\n"
         "                        line per span) or why\n"
         "                        (JSON: each rank's idle split into schedule, imbalance,\n"
         "                        transfers and runtime, the critical path, the measured\n"
         "                        costs and what to change; seconds)\n"
         "  -o, --output OUT      file to write (written beside it, renamed over it when\n"
         "                        whole; not FILE itself); -: standard output\n"
         "      --steps LIST      chrome and csv: only these steps (LIST: numbers and\n"
         "                        ranges, such as 2, 2-4 or 0,3,5-7)\n"
         "      --ranks LIST      chrome and csv: only these pipeline ranks\n"
         "      --replicas LIST   chrome and csv: only these replicas (dp); with the\n"
         "                        three, a 2,048-process job exports one step of a few\n"
         "                        processes, not all of it\n"
         "      --clock CLOCK     run (default): times from the run's start (the\n"
         "                        app's zero, or the first record of a process that\n"
         "                        began before it), never negative;\n"
         "                        realtime: the job's own wall clock (chrome: µs, csv:\n"
         "                        ns since the Unix epoch) and chrome's tracks named\n"
         "                        by the processes' real pids, to open beside a Kineto\n"
         "                        or nsys trace of the same run in Perfetto\n"
         "\n"
         "chrome and csv count time from the run's start (--clock).\n"
         "A trace of a job whose ranks run in several processes (data-parallel\n"
         "replicas: trace format 1.4) keeps every process's spans: csv's columns\n"
         "process (the global rank), dp and tp say whose (empty where the trace does\n"
         "not say), and chrome has a track per process named by its place (its steps,\n"
         "losses and transfers within its replica) and the plan once per pipeline rank;\n"
         "why is each replica's pipeline analysed on its own, per rank the median replica.\n", out);
}

static void
json_string (FILE *f, const char *s)
{
  fputc ('"', f);
  /* valid UTF-8 out, whatever the trace holds (JSON readers refuse
   * anything else): a byte that is not UTF-8 is U+FFFD, a control
   * character (C1 and DEL too) escaped */
  while (*s)
    {
      int32_t cp;
      int n = pp_trace_text_next (s, &cp);
      if (cp == '"' || cp == '\\')
        fprintf (f, "\\%c", cp);
      else if (cp < 0)
        fputs ("\\ufffd", f);
      else if (pp_trace_text_is_control (cp))
        fprintf (f, "\\u%04x", (unsigned) cp);
      else
        fwrite (s, 1, (size_t) n, f);
      s += n;
    }
  fputc ('"', f);
}

static void
csv_field (FILE *f, const char *s)
{
  if (strpbrk (s, ",\"\n\r") == NULL)
    {
      fputs (s, f);
      return;
    }
  fputc ('"', f);
  for (; *s; s++)
    {
      if (*s == '"')
        fputc ('"', f);
      fputc (*s, f);
    }
  fputc ('"', f);
}

/* t - base in µs, where t >= base (base is the smallest start): the
 * difference as unsigned is exact whatever the two. */
static void
print_us_since (FILE *f, int64_t t, int64_t base)
{
  uint64_t ns = (uint64_t) t - (uint64_t) base;
  if (t < base)
    {
      fputc ('-', f);
      ns = (uint64_t) base - (uint64_t) t;
    }
  fprintf (f, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

/* t - base in nanoseconds, signed (the pipescope member's times) */
static void
print_ns_since (FILE *f, int64_t t, int64_t base)
{
  if (t < base)
    fprintf (f, "-%" PRIu64, (uint64_t) base - (uint64_t) t);
  else
    fprintf (f, "%" PRIu64, (uint64_t) t - (uint64_t) base);
}

/* The Chrome export's tracks a rank: tid and what Perfetto calls it, in
 * the order it shows them (steps above the blocks, their host work and
 * the plan under them). */
enum { ROW_COMPUTE, ROW_COMM, ROW_DEVICE, ROW_STEPS, ROW_PLAN, ROW_HOST, N_ROWS };
static const int row_order[N_ROWS] = { [ROW_STEPS] = 0, [ROW_COMPUTE] = 1, [ROW_HOST] = 2, [ROW_PLAN] = 3,
                                       [ROW_COMM] = 4, [ROW_DEVICE] = 5 };

static int
row_of (int kind)
{
  switch (kind)
    {
    case PP_SPAN_SEND_F: case PP_SPAN_RECV_F: case PP_SPAN_SEND_B: case PP_SPAN_RECV_B:
    case PP_SPAN_WAIT:
      return ROW_COMM;
    case PP_SPAN_KERNEL: case PP_SPAN_MEMCPY: case PP_SPAN_MEMSET:
      return ROW_DEVICE;
    default:
      /* host work (GC, HOST_*) on a row of its own: a GC inside a block
       * would overlap the block, and a thread's slices must nest; a
       * LAUNCH is a host call, made inside the host's code */
      return pp_span_kind_is_host (kind) || kind == PP_SPAN_LAUNCH ? ROW_HOST : ROW_COMPUTE;
    }
}

static const Trace *sort_trace;

/* By replica first: a transfer pairs within its own pipeline (the send of
 * replica dp d is received by replica d), and so does a dependency. */
static int
cmp_comm (const void *a, const void *b)
{
  size_t i = *(const size_t *) a, j = *(const size_t *) b;
  const PpSpan *x = &sort_trace->spans[i], *y = &sort_trace->spans[j];
  int32_t ri = span_replica (sort_trace, i), rj = span_replica (sort_trace, j);
  if (ri != rj) return ri < rj ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->microbatch != y->microbatch) return x->microbatch < y->microbatch ? -1 : 1;
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
  return 0;
}

static bool
pairs (const PpSpan *send, const PpSpan *recv)
{
  int want = send->kind == PP_SPAN_SEND_F ? PP_SPAN_RECV_F : PP_SPAN_RECV_B;
  if (recv->kind != want || recv->microbatch != send->microbatch || recv->step != send->step)
    return false;
  if (send->peer_rank >= 0 && recv->rank != send->peer_rank)
    return false;
  if (recv->peer_rank >= 0 && send->rank != recv->peer_rank)
    return false;
  /* The send names its stage and the receive its own: neighbours in a
   * chain, or the same number where both name the transfer's stage. */
  return abs (recv->stage - send->stage) <= 1;
}

static int
write_flows (FILE *f, const Trace *t, int64_t base)
{
  size_t n_send = 0, n_recv = 0, id = 0;
  size_t *send = malloc ((t->n_all_spans + 1) * sizeof *send);
  size_t *recv = malloc ((t->n_all_spans + 1) * sizeof *recv);
  bool *used = calloc (t->n_all_spans + 1, sizeof *used);
  if (send == NULL || recv == NULL || used == NULL)
    {
      free (send); free (recv); free (used);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      int k = t->spans[i].kind;
      if (!keep_span (t, i))
        continue;   /* a transfer is drawn where the export keeps both ends */
      if (k == PP_SPAN_SEND_F || k == PP_SPAN_SEND_B)
        send[n_send++] = i;
      else if (k == PP_SPAN_RECV_F || k == PP_SPAN_RECV_B)
        recv[n_recv++] = i;
    }
  sort_trace = t;
  qsort (recv, n_recv, sizeof *recv, cmp_comm);
  for (size_t i = 0; i < n_send; i++)
    {
      const PpSpan *s = &t->spans[send[i]];
      int32_t rs = span_replica (t, send[i]);
      /* Binary search the first receive of the same (replica, step, microbatch). */
      size_t lo = 0, hi = n_recv;
      while (lo < hi)
        {
          size_t mid = (lo + hi) / 2;
          const PpSpan *m = &t->spans[recv[mid]];
          int32_t rm = span_replica (t, recv[mid]);
          if (rm < rs || (rm == rs && (m->step < s->step || (m->step == s->step && m->microbatch < s->microbatch))))
            lo = mid + 1;
          else
            hi = mid;
        }
      for (size_t j = lo; j < n_recv; j++)
        {
          const PpSpan *rc = &t->spans[recv[j]];
          if (span_replica (t, recv[j]) != rs || rc->step != s->step || rc->microbatch != s->microbatch)
            break;
          if (used[recv[j]] || !pairs (s, rc))
            continue;
          used[recv[j]] = true;
          id++;
          fprintf (f, ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%zu,\"pid\":%d,\"tid\":1,\"ts\":",
                   s->kind == PP_SPAN_SEND_F ? "activation" : "gradient", id, out_pid (t, span_pid (t, s)));
          print_us_since (f, s->start_ns, base);
          fprintf (f, "}");
          fprintf (f, ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%zu,\"pid\":%d,\"tid\":1,\"ts\":",
                   s->kind == PP_SPAN_SEND_F ? "activation" : "gradient", id, out_pid (t, span_pid (t, rc)));
          /* the data is there when the receive ends, and not before the
           * send has ended: a receive posted early (PyTorch's irecv, its
           * span the posting) ends before the send starts */
          int64_t arrive = rc->end_ns > rc->start_ns ? rc->end_ns : rc->start_ns;
          if (arrive < s->end_ns)
            arrive = s->end_ns > s->start_ns ? s->end_ns : s->start_ns;
          print_us_since (f, arrive, base);
          fprintf (f, "}");
          break;
        }
    }
  free (send); free (recv); free (used);
  return 0;
}

/* ---- the Chrome export's dependencies and counters (issue 17) ---------------- */

/* A block's place for the dependency search: step, stage, micro-batch and
 * what it gives (0: a forward's output, 1: an input gradient, B or I). */
static int
dep_class (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: case PP_SPAN_OVERLAP_F_B: return 0;
    case PP_SPAN_B: case PP_SPAN_I: return 1;
    default: return -1;
    }
}

static int
cmp_block (const void *a, const void *b)
{
  size_t i = *(const size_t *) a, j = *(const size_t *) b;
  const PpSpan *x = &sort_trace->spans[i], *y = &sort_trace->spans[j];
  int32_t ri = span_replica (sort_trace, i), rj = span_replica (sort_trace, j);
  if (ri != rj) return ri < rj ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->microbatch != y->microbatch) return x->microbatch < y->microbatch ? -1 : 1;
  int cx = dep_class (x->kind), cy = dep_class (y->kind);
  return cx < cy ? -1 : cx > cy;
}

/* Flow events from each block to the blocks that waited for it, by the
 * schedule's rules (pp_schedule_dependencies: F(s,m) -> F(s+1,m), B back
 * down the stages, I -> W): Perfetto draws them as arrows.  Ids start past
 * the transfers' (at most one a span). */
static int
write_dependency_flows (FILE *f, const Trace *t, int64_t base)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  size_t n = 0, id = t->n_all_spans + 1;
  if (!t->has_desc || pp_why_schedule_of_trace (&t->desc, &t->why_plans, &s, &err) != PP_OK)
    return 0;   /* no schedule we know: no dependencies to draw */
  size_t *idx = malloc ((t->n_all_spans + 1) * sizeof *idx);
  if (idx == NULL)
    {
      pp_schedule_free (s);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (dep_class (t->spans[i].kind) >= 0 && t->spans[i].microbatch >= 0 && keep_span (t, i))
      idx[n++] = i;
  sort_trace = t;
  qsort (idx, n, sizeof *idx, cmp_block);
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      const PpSpan *b = &t->spans[i];
      int32_t rb = span_replica (t, i);
      int act;
      if (!keep_span (t, i))
        continue;
      switch (b->kind)
        {
        case PP_SPAN_F: case PP_SPAN_OVERLAP_F_B: act = PP_ACT_F; break;
        case PP_SPAN_B: act = PP_ACT_B; break;
        case PP_SPAN_I: act = PP_ACT_I; break;
        case PP_SPAN_W: act = PP_ACT_W; break;
        default: continue;
        }
      if (b->stage < 0 || b->stage >= s->n_stages || b->microbatch < 0)
        continue;
      PpDependency d[2];
      int nd = pp_schedule_dependencies (s, act, b->stage, d);
      for (int k = 0; k < nd; k++)
        {
          PpSpan key = { .step = b->step, .stage = d[k].stage, .microbatch = b->microbatch,
                         .kind = d[k].kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_I };
          size_t lo = 0, hi = n;
          while (lo < hi)
            {
              size_t mid = (lo + hi) / 2;
              const PpSpan *m = &t->spans[idx[mid]];
              int32_t rm = span_replica (t, idx[mid]);
              int c = rm != rb ? (rm < rb ? -1 : 1)
                      : m->step != key.step ? (m->step < key.step ? -1 : 1)
                      : m->stage != key.stage ? (m->stage < key.stage ? -1 : 1)
                      : m->microbatch != key.microbatch ? (m->microbatch < key.microbatch ? -1 : 1)
                      : dep_class (m->kind) < dep_class (key.kind) ? -1
                      : dep_class (m->kind) > dep_class (key.kind) ? 1 : 0;
              if (c < 0)
                lo = mid + 1;
              else
                hi = mid;
            }
          if (lo >= n)
            continue;
          const PpSpan *dep = &t->spans[idx[lo]];
          if (span_replica (t, idx[lo]) != rb || dep->step != key.step || dep->stage != key.stage || dep->microbatch != key.microbatch
              || dep_class (dep->kind) != dep_class (key.kind))
            continue;
          id++;
          /* "s" inside the dependency's slice (its last nanosecond), "f"
           * bound to the enclosing slice at the block's start */
          fprintf (f, ",\n{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":%zu,\"pid\":%d,\"tid\":0,\"ts\":",
                   id, out_pid (t, span_pid (t, dep)));
          print_us_since (f, dep->end_ns > dep->start_ns ? dep->end_ns - 1 : dep->start_ns, base);
          fprintf (f, "}");
          fprintf (f, ",\n{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%zu,\"pid\":%d,\"tid\":0,\"ts\":",
                   id, out_pid (t, span_pid (t, b)));
          print_us_since (f, b->start_ns, base);
          fprintf (f, "}");
        }
    }
  free (idx);
  pp_schedule_free (s);
  return 0;
}

/* A span's action kind (PpActionKind), for the spans the exports name as
 * actions: the blocks (F, B, I, W, OVERLAP_F_B), the optimizer, and FSDP's
 * data-parallel actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD,
 * named with their stage as PyTorch names them: "0UNSHARD"); -1 for the
 * rest (transfers, waits, device work), which keep their kind's name. */
static int
action_kind_of_span (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: return PP_ACT_F;
    case PP_SPAN_B: return PP_ACT_B;
    case PP_SPAN_I: return PP_ACT_I;
    case PP_SPAN_W: return PP_ACT_W;
    case PP_SPAN_OVERLAP_F_B: return PP_ACT_OVERLAP_F_B;
    case PP_SPAN_OPT: return PP_ACT_OPT;
    case PP_SPAN_UNSHARD: return PP_ACT_UNSHARD;
    case PP_SPAN_RESHARD: return PP_ACT_RESHARD;
    case PP_SPAN_REDUCE_GRAD: return PP_ACT_REDUCE_GRAD;
    case PP_SPAN_WAIT_REDUCE_GRAD: return PP_ACT_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

/* What the export calls a block or a planned action: the label every
 * report gives it (pp_action_to_label: "2F3", "0F3+3B1"), the stage left
 * out where each rank runs one stage ("F3"); the kind alone without a
 * micro-batch ("OPT"), but a data-parallel action with its stage
 * ("0UNSHARD"). */
static void
action_name (const PpAction *a, int V, char *buf, size_t size)
{
  if (pp_action_is_dp_comm (a) && a->stage >= 0)
    pp_action_to_string (a, buf, size);   /* PyTorch's repr, "0UNSHARD", as the timeline labels it */
  else if (a->microbatch < 0)
    snprintf (buf, size, "%s", pp_action_kind_name (a->kind));
  else if (V <= 1 && a->kind != PP_ACT_OVERLAP_F_B)
    snprintf (buf, size, "%s%d", pp_action_kind_name (a->kind), a->microbatch);
  else
    pp_action_to_label (a, buf, size);
}


/* A step of one track: in a trace with places each process's own steps
 * (rank holds the track's pid, item_pid), else each rank's. */
typedef struct {
  int32_t rank, step;
  int64_t begin, end;   /* end INT64_MIN: no END marker */
} StepSlice;

static int
cmp_marker (const void *a, const void *b)
{
  const StepMarker *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

static int
cmp_slice_step (const void *a, const void *b)
{
  const StepSlice *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

static int
cmp_slice_begin (const void *a, const void *b)
{
  const StepSlice *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Each rank's steps from its own markers, as the app's step boundaries
 * come from them: a step runs from the rank's BEGIN marker to its END
 * marker; without an END, to the end of the rank's last span of that step,
 * else to its next step's begin.  Sorted by rank and begin, never
 * overlapping (a step that runs past the next one's begin is cut there,
 * as Perfetto needs slices of one track nested).  NULL with *n 0 when
 * there is none; -1 when out of memory. */
static int
step_slices (const Trace *t, StepSlice **out, size_t *n_out)
{
  StepMarker *mk;
  StepSlice *sl;
  size_t n = 0;

  *out = NULL;
  *n_out = 0;
  if (t->n_markers == 0)
    return 0;
  mk = malloc (t->n_markers * sizeof *mk);
  sl = malloc (t->n_markers * sizeof *sl);
  if (mk == NULL || sl == NULL)
    {
      free (mk);
      free (sl);
      return -1;
    }
  memcpy (mk, t->markers, t->n_markers * sizeof *mk);
  /* by track: every process's steps, not only its rank's shown replica's */
  for (size_t i = 0; i < t->n_markers; i++)
    if (mk[i].rank >= 0)
      mk[i].rank = keep_item (t, mk[i].process, mk[i].rank, mk[i].step) ? item_pid (t, mk[i].process, mk[i].rank)
                   : -1;
  qsort (mk, t->n_markers, sizeof *mk, cmp_marker);
  for (size_t i = 0; i < t->n_markers;)
    {
      size_t j = i;
      int64_t begin = INT64_MAX, end = INT64_MIN;
      for (; j < t->n_markers && mk[j].rank == mk[i].rank && mk[j].step == mk[i].step; j++)
        if (mk[j].phase == PP_TRACE_STEP_BEGIN && mk[j].t < begin)
          begin = mk[j].t;
        else if (mk[j].phase != PP_TRACE_STEP_BEGIN && mk[j].t > end)
          end = mk[j].t;
      if (begin != INT64_MAX && mk[i].rank >= 0 && mk[i].step >= 0)
        sl[n++] = (StepSlice) { mk[i].rank, mk[i].step, clamp_time (begin),
                                end == INT64_MIN ? INT64_MIN : clamp_time (end) };
      i = j;
    }
  free (mk);
  /* without an END marker: the rank's last span of the step */
  bool open = false;
  for (size_t i = 0; i < n; i++)
    open |= sl[i].end == INT64_MIN;
  if (open)
    {
      int64_t *last = malloc ((n + 1) * sizeof *last);
      if (last == NULL)
        {
          free (sl);
          return -1;
        }
      for (size_t i = 0; i < n; i++)
        last[i] = INT64_MIN;
      for (size_t i = 0; i < t->n_all_spans; i++)
        {
          const PpSpan *sp = &t->spans[i];
          StepSlice key = { .rank = span_pid (t, sp), .step = sp->step };
          const StepSlice *hit = bsearch (&key, sl, n, sizeof *sl, cmp_slice_step);
          if (hit != NULL && hit->end == INT64_MIN && clamp_time (sp->end_ns) > last[hit - sl])
            last[hit - sl] = clamp_time (sp->end_ns);
        }
      for (size_t i = 0; i < n; i++)
        if (sl[i].end == INT64_MIN)
          sl[i].end = last[i];
      free (last);
    }
  qsort (sl, n, sizeof *sl, cmp_slice_begin);
  for (size_t i = 0; i < n; i++)
    {
      bool next = i + 1 < n && sl[i + 1].rank == sl[i].rank;
      if (sl[i].end == INT64_MIN)
        sl[i].end = next ? sl[i + 1].begin : sl[i].begin;
      if (next && sl[i].end > sl[i + 1].begin)
        sl[i].end = sl[i + 1].begin;
      if (sl[i].end < sl[i].begin)
        sl[i].end = sl[i].begin;
    }
  *out = sl;
  *n_out = n;
  return 0;
}

/* The plan beside the measurement, in the plan lane's place: every timed
 * plan action of rank r as a slice on the rank's plan track, one copy under
 * every step (pp_timeline_plan_copy: as the app draws it), named as the
 * blocks are.  A plan with no times (its order only) is one instant at the
 * first step's start (the run's start without steps) that lists the order.
 * f NULL: nothing written, *first_t lowered to the earliest time it would
 * write.  Returns the events (written or not): a track without any has
 * no name either. */
static size_t
write_plan_track (FILE *f, const Trace *t, const AppView *v, int r, int V, int64_t base, int64_t *first_t)
{
  const PpTimelinePlanned *p = r < v->n_ranks ? v->plan[r] : NULL;
  size_t np = p ? v->n_plan[r] : 0, n = 0;
  char name[PP_ACTION_STR_MAX];

  if (t->keep != NULL && !pp_cli_list_has (&t->keep->ranks, r))
    return 0;
  for (size_t c = 0; np > 0 && c < v->n_copies; c++)
    {
      int64_t shift = v->shift[c], limit = v->limit[c];
      if (t->keep != NULL && v->n_steps > 0 && c < v->n_steps
          && !pp_cli_list_has (&t->keep->steps, v->step_numbers[c]))
        continue;
      for (size_t k = 0; k < np; k++)
        {
          int kind = pp_timeline_plan_span_kind (p[k].kind);
          /* model times within +-2^61, shifts within +-2^62: no overflow */
          int64_t ps = p[k].start_ns + shift, pe = p[k].end_ns + shift;
          if (kind < 0 || ps >= limit)
            continue;
          if (pe > limit)
            pe = limit;
          n++;
          if (f == NULL)
            {
              *first_t = ps < *first_t ? ps : *first_t;
              continue;
            }
          PpAction a = pp_action (p[k].kind, p[k].stage, p[k].microbatch);
          if (p[k].kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (p[k].stage, p[k].microbatch, p[k].sub_kind, p[k].sub_stage,
                                   p[k].sub_microbatch);
          action_name (&a, V, name, sizeof name);
          fprintf (f, ",\n{\"name\":");
          json_string (f, name);
          fprintf (f, ",\"cat\":\"plan\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", out_pid (t, plan_pid (t, r)),
                   ROW_PLAN);
          print_us_since (f, ps, base);
          fputs (",\"dur\":", f);
          print_us_since (f, pe, ps);
          fprintf (f, ",\"args\":{\"stage\":%d,\"microbatch\":%d,\"kind\":\"%s\"", p[k].stage, p[k].microbatch,
                   kind_name (kind));
          if (v->n_steps > 0)
            fprintf (f, ",\"step\":%d", v->step_numbers[c]);
          fputs ("}}", f);
        }
    }
  if (np == 0 && r < t->cap_plans && t->plans[r].seen && !t->plans[r].has_timeline && t->plans[r].n_order > 0)
    {
      const PlanSummary *ps = &t->plans[r];
      int64_t at = v->n_steps > 0 ? v->step_starts[0] : v->origin;
      n++;
      if (f == NULL)
        {
          *first_t = at < *first_t ? at : *first_t;
          return n;
        }
      fprintf (f, ",\n{\"name\":\"plan (order only)\",\"cat\":\"plan\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,"
                  "\"tid\":%d,\"ts\":", out_pid (t, plan_pid (t, r)), ROW_PLAN);
      print_us_since (f, at, base);
      fputs (",\"args\":{\"order\":\"", f);
      for (size_t k = 0; k < ps->n_order; k++)
        {
          const PpTracePlanAction *o = &ps->order[k];
          PpAction a = pp_action (o->kind, o->stage, o->microbatch);
          if (o->kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (o->stage, o->microbatch, o->sub_kind, o->sub_stage, o->sub_microbatch);
          action_name (&a, V, name, sizeof name);
          fprintf (f, "%s%s", k ? " " : "", name);   /* digits, letters, '+': nothing to escape */
        }
      fputs ("\"}}", f);
    }
  return n;
}

/* One track's names: the process (pid) and its used rows. */
static void
write_track (FILE *f, bool *first, int pid, const char *name, int64_t sort, unsigned rows, int rank, int out)
{
  static const char *row_names[N_ROWS] = { "compute", "communication", "device", "steps", "plan", "host" };
  int plan_of_pipeline = pid >= PLAN_PID_BASE;
  pid = out;   /* the number written (out_pid) */
  fprintf (f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
           *first ? "" : ",", pid);
  json_string (f, name);
  fprintf (f, "}}");
  *first = false;
  fprintf (f, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%" PRId64 "}}",
           pid, sort);
  for (int row = 0; row < N_ROWS; row++)
    if (rows & (1u << row))
      {
        fprintf (f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                 pid, row);
        if (row == ROW_PLAN)
          fprintf (f, "\"plan rank %d%s\"}}", rank, plan_of_pipeline ? " (the pipeline's, every replica)" : "");
        else
          fprintf (f, "\"%s\"}}", row_names[row]);
        fprintf (f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"sort_index\":%d}}", pid, row, row_order[row]);
      }
}

static const PpTraceProcess *sort_places_of;   /* cmp_place's trace (qsort has no user data) */

/* Processes in the order of their places: pp, then dp, tp, cp, ep. */
static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_places_of[*(const size_t *) a], *y = &sort_places_of[*(const size_t *) b];
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* Bits of Chrome.rows past the rows: the track holds counters. */
#define TRACK_COUNTERS (1u << N_ROWS)

/* The tracks' names: a rank each ("rank R"); in a trace with places
 * (format 1.4) a process each, named by its place ("pp 1 · dp 0 · tp 0
 * (process 2)", "place not read" where the hook could not read it), the
 * plan of each pipeline rank on a track of its own after its processes
 * ("plan · pp 1"), and "rank R" for a rank no process placed.  A track
 * with no event gets no name (rows[pid] 0). */
static int
write_tracks (FILE *f, const Trace *t, const unsigned char *rows, int n_ranks, bool *first)
{
  char name[200];
  if (t->rank_pid == NULL)
    {
      for (int r = 0; r < n_ranks; r++)
        if (rows[r] != 0)
          {
            snprintf (name, sizeof name, "rank %d", r);
            write_track (f, first, r, name, r, rows[r], r, out_pid (t, r));
          }
      return 0;
    }
  int32_t size[PP_TRACE_MESH_DIMS];
  size_t *order = malloc ((t->n_procs + 1) * sizeof *order);
  if (order == NULL)
    return -1;
  mesh_sizes (t, size);
  for (size_t i = 0; i < t->n_procs; i++)
    order[i] = i;
  sort_places_of = t->procs;
  qsort (order, t->n_procs, sizeof *order, cmp_place);
  int64_t sort = 0;
  for (size_t k = 0; k <= t->n_procs; k++)
    {
      /* after the last process of a pipeline rank: its plan */
      int prev = k > 0 ? t->procs[order[k - 1]].rank : -1;
      if (k > 0 && (k == t->n_procs || t->procs[order[k]].rank != prev) && prev < n_ranks
          && rows[plan_pid (t, prev)] != 0)
        {
          snprintf (name, sizeof name, "plan \u00b7 pp %d (pipeline rank %d, every replica)", prev, prev);
          write_track (f, first, plan_pid (t, prev), name, sort++, rows[plan_pid (t, prev)], prev,
                       out_pid (t, plan_pid (t, prev)));
        }
      if (k == t->n_procs)
        break;
      const PpTraceProcess *p = &t->procs[order[k]];
      if (rows[p->process] == 0)
        continue;
      size_t n = 0;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (d <= PP_TRACE_MESH_TP || size[d] > 1)
          n += (size_t) snprintf (name + n, sizeof name - n, "%s%s %d", d ? " \u00b7 " : "", pp_cli_mesh_dim[d],
                                  p->coord[d]);
      snprintf (name + n, sizeof name - n, " (process %d%s)", p->process,
                p->flags & PP_TRACE_PROCESS_UNPLACED ? ", place not read: dp by global rank" : "");
      write_track (f, first, p->process, name, sort++, rows[p->process], p->rank, out_pid (t, p->process));
    }
  free (order);
  for (int r = 0; r < n_ranks; r++)
    {
      if (rank_pid (t, r) >= PP_TRACE_MAX_RANKS && rows[rank_pid (t, r)] != 0)
        {
          snprintf (name, sizeof name, "rank %d", r);
          write_track (f, first, rank_pid (t, r), name, sort++, rows[rank_pid (t, r)], r, out_pid (t, rank_pid (t, r)));
        }
      /* a rank no process placed: its plan after it */
      if (rank_pid (t, r) >= PP_TRACE_MAX_RANKS && rows[plan_pid (t, r)] != 0)
        {
          snprintf (name, sizeof name, "plan \u00b7 rank %d", r);
          write_track (f, first, plan_pid (t, r), name, sort++, rows[plan_pid (t, r)], r, out_pid (t, plan_pid (t, r)));
        }
    }
  return 0;
}

/* Counter tracks a process (a rank without places; Perfetto draws "C"
 * events as a track under the process): the loss per step, activation memory in MiB, micro-batches in
 * flight, device memory, the collectives a step (calls, MiB) the hook counted (format 1.5), and the
 * block-edge counters (1.6) as what each sample added since the track's one before, in ms: the time
 * the thread was descheduled, on a CPU (1.7), and the probe's own recording cost (cumulative, they would only climb).
 * -1 out of memory. */
static int
write_counters (FILE *f, const Trace *t, int64_t base, const unsigned char *rows, size_t n_pids)
{
  /* per track, the last value of each block-edge counter (NaN: none yet) */
  double *last = malloc (3 * n_pids * sizeof *last);
  if (last == NULL)
    return -1;
  for (size_t i = 0; i < 3 * n_pids; i++)
    last[i] = NAN;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *c = &t->counters[i];
      /* a counter of a rank with no track (past the trace's ranks): none */
      size_t pid = (size_t) item_pid (t, t->counter_process[i], c->rank);
      if (pid >= n_pids || !(rows[pid] & TRACK_COUNTERS) || !keep_item (t, t->counter_process[i], c->rank, c->step))
        continue;
      const char *name, *unit;
      double v = c->value;
      switch (c->kind)
        {
        case PP_COUNTER_LOSS: name = "loss"; unit = "loss"; break;
        case PP_COUNTER_ACTIVATION_BYTES: name = "activation memory (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_DEVICE_BYTES: name = "device memory (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_INFLIGHT: name = "micro-batches in flight"; unit = "micro-batches"; break;
        case PP_COUNTER_COLLECTIVE_CALLS: name = "collective calls a step"; unit = "calls"; break;
        case PP_COUNTER_COLLECTIVE_BYTES: name = "collective bytes a step (MiB)"; unit = "MiB"; v /= 1048576.0; break;
        case PP_COUNTER_RUN_DELAY_NS: name = "descheduled (ms since the last sample)"; unit = "ms"; break;
        case PP_COUNTER_PROBE_SELF_NS: name = "probe's own cost (ms since the last sample)"; unit = "ms"; break;
        case PP_COUNTER_ON_CPU_NS: name = "on a CPU (ms since the last sample)"; unit = "ms"; break;
        default: continue;
        }
      if (!isfinite (v))
        continue;
      if (c->kind == PP_COUNTER_RUN_DELAY_NS || c->kind == PP_COUNTER_PROBE_SELF_NS
          || c->kind == PP_COUNTER_ON_CPU_NS)
        {
          double *prev = &last[3 * pid + (c->kind == PP_COUNTER_PROBE_SELF_NS ? 1
                                          : c->kind == PP_COUNTER_ON_CPU_NS ? 2 : 0)];
          double rise = isnan (*prev) ? 0 : (v - *prev) / 1e6;
          *prev = v;
          v = rise;
        }
      /* each process's own: two replicas' losses are two series */
      fprintf (f, ",\n{\"name\":\"%s\",\"ph\":\"C\",\"pid\":%d,\"ts\":", name,
               out_pid (t, item_pid (t, t->counter_process[i], c->rank)));
      print_us_since (f, c->time_ns, base);
      fprintf (f, ",\"args\":{\"%s\":%.9g}}", unit, v);
    }
  free (last);
  return 0;
}

/* A double as the 16 hex digits of its bits, in a string: exact, and read
 * back without a locale's decimal point (the app runs under the user's). */
static void
print_double_bits (FILE *f, double x)
{
  uint64_t bits;
  memcpy (&bits, &x, sizeof bits);
  fprintf (f, "\"%016" PRIx64 "\"", bits);
}

/* What `import` needs to give the same run back from this export, which
 * Chrome's events cannot say exactly (issue 30): the description, each
 * rank's host and pid, the processes' places, each rank's plan (its
 * compute actions, with their planned times where it has them), the step
 * markers and counters as recorded (time from origin_ns, the events' zero),
 * and the dropped count.  Spans come from the events themselves (their
 * args: rank, kind, stage, micro-batch, step, ...).  Times are on the
 * common clock (clock offsets applied), so no offset is written.  Perfetto
 * and chrome://tracing ignore a top-level member they do not know. */
static void
write_pipescope_meta (FILE *f, const Trace *t, int64_t base)
{
  fprintf (f, ",\"pipescope\":{\"format\":1,\"origin_ns\":%" PRId64 ",\"dropped\":%" PRIu64, base,
           t->dropped);
  if (t->has_desc)
    {
      const PpTraceDescription *d = &t->desc;
      fputs (",\n\"description\":{\"schedule\":", f);
      json_string (f, d->schedule);
      fputs (",\"backend\":", f);
      json_string (f, d->backend);
      fputs (",\"host\":", f);
      json_string (f, d->host);
      fputs (",\"model\":", f);
      json_string (f, d->model);
      fputs (",\"cmdline\":", f);
      json_string (f, d->cmdline);
      fprintf (f, ",\"n_ranks\":%d,\"n_microbatches\":%d,\"n_virtual\":%d,\"start_unix_ns\":%" PRId64
                  ",\"start_monotonic_ns\":%" PRId64 "}", d->n_ranks, d->n_microbatches, d->n_virtual,
               d->start_unix_ns, d->start_monotonic_ns);
    }
  /* [rank, pid, host]: the last RANK frame of each */
  fputs (",\n\"ranks\":[", f);
  bool first = true;
  for (size_t i = 0; i < t->n_rank_items; i++)
    {
      const PpTraceItem *it = &t->rank_items[i];
      if (it->type != PP_TRACE_ITEM_RANK)
        continue;
      fprintf (f, "%s[%d,%d,", first ? "" : ",", it->rank_info.rank, it->rank_info.pid);
      json_string (f, it->rank_info.host);
      fputc (']', f);
      first = false;
    }
  /* [process, rank, flags, pid, host, coord..., size...] */
  fputs ("],\n\"processes\":[", f);
  for (size_t i = 0; i < t->n_procs; i++)
    {
      const PpTraceProcess *p = &t->procs[i];
      fprintf (f, "%s[%d,%d,%u,%d,", i ? "," : "", p->process, p->rank, p->flags, p->pid);
      json_string (f, p->host);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        fprintf (f, ",%d", p->coord[d]);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        fprintf (f, ",%d", p->size[d]);
      fputc (']', f);
    }
  /* {rank, has_timeline, actions: [kind, stage, mb, sub_kind, sub_stage, sub_mb, start, end]},
   * the times (seconds) as their bits */
  fputs ("],\n\"plans\":[", f);
  first = true;
  for (int r = 0; r < t->cap_plans; r++)
    {
      const PlanSummary *ps = &t->plans[r];
      if (!ps->seen)
        continue;
      fprintf (f, "%s{\"rank\":%d,\"has_timeline\":%d,\"actions\":[", first ? "" : ",\n", r,
               ps->has_timeline ? 1 : 0);
      for (size_t k = 0; k < ps->n_order; k++)
        {
          const PpTracePlanAction *a = &ps->order[k];
          fprintf (f, "%s[%d,%d,%d,%d,%d,%d,", k ? "," : "", a->kind, a->stage, a->microbatch,
                   a->sub_kind, a->sub_stage, a->sub_microbatch);
          print_double_bits (f, a->planned_start);
          fputc (',', f);
          print_double_bits (f, a->planned_end);
          fputc (']', f);
        }
      fputs ("]}", f);
      first = false;
    }
  /* [rank, step, phase, ns from origin, process] */
  fputs ("],\n\"markers\":[", f);
  first = true;
  for (size_t i = 0; i < t->n_markers; i++)
    {
      const StepMarker *m = &t->markers[i];
      if (!keep_item (t, m->process, m->rank, m->step))
        continue;
      fprintf (f, "%s[%d,%d,%d,", first ? "" : ",", m->rank, m->step, m->phase);
      print_ns_since (f, clamp_time (m->t), base);
      fprintf (f, ",%d]", m->process);
      first = false;
    }
  /* [rank, step, kind, ns from origin, value's bits, process] */
  fputs ("],\n\"counters\":[", f);
  first = true;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *c = &t->counters[i];
      if (!isfinite (c->value) || !keep_item (t, t->counter_process[i], c->rank, c->step))
        continue;
      fprintf (f, "%s[%d,%d,%u,", first ? "" : ",", c->rank, c->step, (unsigned) c->kind);
      print_ns_since (f, clamp_time (c->time_ns), base);
      fputc (',', f);
      print_double_bits (f, c->value);
      fprintf (f, ",%d]", t->counter_process[i]);
      first = false;
    }
  fputs ("]}", f);
}

/* base: the zero times count from (export_base); run_clock: that zero is
 * the run's start, lowered to anything of the export before it (the plan)
 * so that no ts is negative. */
static int
write_chrome (FILE *f, const Trace *t, const AppView *v, int64_t base, bool run_clock)
{
  int n_ranks = n_ranks_of (t);
  int V = t->has_desc && t->desc.n_virtual > 1 ? t->desc.n_virtual : 1;
  /* bit per used row, by track: a rank's, or with places a process's
   * (pids below 65535), a rank's no process placed (65536 + rank) and a
   * pipeline rank's plan (131072 + rank) */
  size_t n_pids = t->rank_pid != NULL ? (size_t) PLAN_PID_BASE + (size_t) n_ranks : (size_t) n_ranks;
  unsigned char *rows = calloc (n_pids + 1, 1);
  StepSlice *sl = NULL;
  size_t n_sl = 0;
  bool first = true;

  if (rows == NULL || step_slices (t, &sl, &n_sl) != 0)
    {
      free (rows);
      return -1;
    }
  /* the tracks the export uses: those of the spans, steps, plans and
   * counters it keeps */
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (keep_span (t, i))
      rows[span_pid (t, &t->spans[i])] |= (unsigned char) (1u << row_of (t->spans[i].kind));
  for (size_t i = 0; i < n_sl; i++)
    if (sl[i].rank >= 0 && (size_t) sl[i].rank < n_pids)
      rows[sl[i].rank] |= 1u << ROW_STEPS;
  int64_t first_plan = INT64_MAX;
  for (int r = 0; r < n_ranks; r++)
    if (write_plan_track (NULL, t, v, r, V, 0, &first_plan) > 0)
      rows[plan_pid (t, r)] |= 1u << ROW_PLAN;
  if (run_clock && first_plan < base)
    base = first_plan;
  bool any_span = t->n_all_spans > 0;
  for (size_t i = 0; any_span && i < t->n_counters; i++)
    if (t->counters[i].kind < PP_N_COUNTER_KINDS && isfinite (t->counters[i].value)
        && (size_t) item_pid (t, t->counter_process[i], t->counters[i].rank) < n_pids
        && keep_item (t, t->counter_process[i], t->counters[i].rank, t->counters[i].step))
      rows[item_pid (t, t->counter_process[i], t->counters[i].rank)] |= TRACK_COUNTERS;

  fputs ("{\"traceEvents\":[", f);
  if (write_tracks (f, t, rows, n_ranks, &first) != 0)
    {
      free (rows);
      free (sl);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      const PpSpan *s = &t->spans[i];
      const char *kn = kind_name (s->kind);
      const char *str = trace_string (t, s->name_id);
      int act = action_kind_of_span (s->kind);
      char name[PP_ACTION_STR_MAX];

      if (!keep_span (t, i))
        continue;
      if (act >= 0)
        {
          /* a block is named as everywhere else, whatever its source called it */
          PpAction a = pp_action (act, s->stage, s->microbatch);
          if (pp_span_has_sub (s))
            a = pp_action_overlap (s->stage, s->microbatch, action_kind_of_span (s->sub_kind), s->sub_stage,
                                   s->sub_microbatch);
          action_name (&a, V, name, sizeof name);
        }
      else if (pp_span_gc_other_thread (s))
        snprintf (name, sizeof name, "%s (thread %u)", kn, (unsigned) (s->stream & PP_GC_THREAD_MASK));
      else if (s->microbatch < 0)
        snprintf (name, sizeof name, "%s", kn);
      else if (V > 1 && s->stage >= 0)
        snprintf (name, sizeof name, "%d%s%d", s->stage, kn, s->microbatch);
      else
        snprintf (name, sizeof name, "%s%d", kn, s->microbatch);
      fprintf (f, ",\n{\"name\":");
      json_string (f, act < 0 && str ? str : name);
      fprintf (f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", kn, out_pid (t, span_pid (t, s)),
               row_of (s->kind));
      /* times as the model holds them: within +-2^61 ns */
      int64_t t0 = clamp_time (s->start_ns), t1 = clamp_time (s->end_ns);
      print_us_since (f, t0, base);
      fputs (",\"dur\":", f);
      print_us_since (f, t1 > t0 ? t1 : t0, t0);
      fprintf (f, ",\"args\":{\"stage\":%d,\"microbatch\":%d,\"step\":%d,\"kind\":\"%s\",\"rank\":%d",
               s->stage, s->microbatch, s->step, kn, s->rank);
      if (t->span_process != NULL && t->span_process[i] >= 0)
        fprintf (f, ",\"process\":%d", t->span_process[i]);
      /* its recorded name (a kernel's, a block's label), for import */
      if (str)
        {
          fputs (",\"source_name\":", f);
          json_string (f, str);
        }
      if (s->peer_rank >= 0)
        fprintf (f, ",\"peer_rank\":%d", s->peer_rank);
      if (pp_span_has_sub (s))
        fprintf (f, ",\"backward_kind\":\"%s\",\"backward_stage\":%d,\"backward_microbatch\":%d",
                 kind_name (s->sub_kind), s->sub_stage, s->sub_microbatch);
      if (s->bytes)
        fprintf (f, ",\"bytes\":%" PRIu64, s->bytes);
      if (s->device != 0xffff)
        fprintf (f, ",\"device\":%u,\"stream\":%u", (unsigned) s->device, (unsigned) s->stream);
      /* another thread's collection (format 1.8): which, and whether it stopped every thread */
      if (pp_span_gc_other_thread (s))
        fprintf (f, ",\"gc_thread\":%u,\"gc_stops_world\":%s", (unsigned) (s->stream & PP_GC_THREAD_MASK),
                 s->stream & PP_GC_STOPS_WORLD ? "true" : "false");
      fputs ("}}", f);
    }
  /* each track's steps, as its own markers mark them */
  for (size_t i = 0; i < n_sl; i++)
    {
      if (sl[i].rank < 0 || (size_t) sl[i].rank >= n_pids)
        continue;
      fprintf (f, ",\n{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
               sl[i].step, out_pid (t, sl[i].rank), ROW_STEPS);
      print_us_since (f, sl[i].begin, base);
      fputs (",\"dur\":", f);
      print_us_since (f, sl[i].end, sl[i].begin);
      fprintf (f, ",\"args\":{\"step\":%d}}", sl[i].step);
    }
  free (sl);
  for (int r = 0; r < n_ranks; r++)
    if (rows[plan_pid (t, r)] & (1u << ROW_PLAN))
      write_plan_track (f, t, v, r, V, base, NULL);
  if (any_span && (write_flows (f, t, base) != 0 || write_dependency_flows (f, t, base) != 0))
    {
      free (rows);
      return -1;
    }
  if (any_span && write_counters (f, t, base, rows, n_pids) != 0)
    {
      free (rows);
      return -1;
    }
  free (rows);
  fputs ("\n],\"displayTimeUnit\":\"ms\"", f);
  /* the wall clock's ts are from the epoch: said as torch's own traces say
   * their zero (torch >= 2.4), for the tools that line traces up by it */
  if (!run_clock)
    fputs (",\"baseTimeNanoseconds\":0", f);
  write_pipescope_meta (f, t, base);
  fputs ("}\n", f);
  return 0;
}

/* One line a span; start_ns and end_ns count from base (export_base: the
 * run's start, as the Chrome export does, or the epoch). */
static int
write_csv (FILE *f, const Trace *t, int64_t base)
{
  fputs ("rank,stage,microbatch,kind,step,start_ns,end_ns,device,stream,bytes,name,sub,process,dp,tp\n", f);
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      const PpSpan *s = &t->spans[i];
      const char *str = trace_string (t, s->name_id);
      if (!keep_span (t, i))
        continue;
      fprintf (f, "%d,%d,%d,%s,%d,", s->rank, s->stage, s->microbatch, kind_name (s->kind), s->step);
      print_ns_since (f, clamp_time (s->start_ns), base);
      fputc (',', f);
      print_ns_since (f, clamp_time (s->end_ns), base);
      fputc (',', f);
      /* a host span has no device and no stream: empty fields, not the
       * file's 0xffff ("device 65535" reads as a GPU) */
      if (s->device != 0xffff)
        fprintf (f, "%u,%u,", (unsigned) s->device, (unsigned) s->stream);
      else
        fputs (",,", f);
      fprintf (f, "%" PRIu64 ",", s->bytes);
      csv_field (f, str ? str : "");
      /* an overlapped pair's backward half (format 1.2): "3B2" */
      if (pp_span_has_sub (s))
        fprintf (f, ",%d%s%d", s->sub_stage, kind_name (s->sub_kind), s->sub_microbatch);
      else
        fputs (",", f);
      /* format 1.4: the process that wrote it and its place; empty where
       * the trace does not say (a trace without PROCESS frames) */
      const PpTraceProcess *p = span_place (t, i);
      if (p != NULL)
        fprintf (f, ",%d,%d,%d\n", p->process, p->coord[PP_TRACE_MESH_DP], p->coord[PP_TRACE_MESH_TP]);
      else if (t->span_process != NULL && t->span_process[i] >= 0)
        fprintf (f, ",%d,,\n", t->span_process[i]);
      else
        fputs (",,,\n", f);
    }
  return 0;
}

/* --clock realtime's track numbers (t->out_pids, pp_cli_clock_real_pids):
 * each process's track its real pid (a rank's, from its RANK frame, in a
 * trace without places).  Returns the processes whose pid another host's
 * shares, -1 when out of memory. */
static int
real_pids (Trace *t, int n_ranks)
{
  size_t n = t->rank_pid != NULL ? (size_t) PLAN_PID_BASE + (size_t) n_ranks : (size_t) n_ranks;
  int32_t *real = malloc ((n + 1) * sizeof *real);
  if (real == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    real[i] = -1;
  if (t->rank_pid != NULL)
    for (size_t i = 0; i < t->n_procs; i++)
      real[t->procs[i].process] = t->procs[i].pid;
  else
    for (size_t i = 0; i < t->n_rank_items; i++)
      {
        const PpTraceItem *it = &t->rank_items[i];
        if (it->type == PP_TRACE_ITEM_RANK && it->rank_info.rank >= 0 && (size_t) it->rank_info.rank < n)
          real[it->rank_info.rank] = it->rank_info.pid;
      }
  int shared = pp_cli_clock_real_pids (real, n);
  if (shared < 0)
    {
      free (real);
      return -1;
    }
  t->out_pids = real;
  t->n_out_pids = n;
  return shared;
}

/* Span i's step, pipeline rank and replica (dp), for pp_cli_selection_check. */
static void
span_coords (const void *trace, size_t i, int32_t v[3])
{
  const Trace *t = trace;
  v[0] = t->spans[i].step;
  v[1] = t->spans[i].rank;
  v[2] = process_dp (t, t->span_process != NULL ? t->span_process[i] : -1);
}

/* export, its lists in *keep (the caller frees them) */
static int
export_command (int argc, char **argv, PpCliSelection *keep)
{
  static const struct option options[] = {
    { "format", required_argument, NULL, 'f' },
    { "output", required_argument, NULL, 'o' },
    { "steps", required_argument, NULL, 'S' },
    { "ranks", required_argument, NULL, 'R' },
    { "replicas", required_argument, NULL, 'D' },
    { "clock", required_argument, NULL, 'C' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *path, *out = NULL;
  int format = 0;   /* chrome, csv, why */
  PpCliClock clock = PP_CLI_CLOCK_RUN;
  int rc_opt;
  int opt, status = 1;
  Trace t;
  PpCliOutput o = { .fd = -1 };
  FILE *f = NULL;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":f:o:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'f':
          if (strcmp (optarg, "chrome") == 0) format = 0;
          else if (strcmp (optarg, "csv") == 0) format = 1;
          else if (strcmp (optarg, "why") == 0) format = 2;
          else
            return pp_cli_usage_error ("unknown format '%s'; use chrome, csv or why", optarg);
          break;
        case 'o': out = optarg; break;
        case 'S': case 'R': case 'D':
          if ((rc_opt = pp_cli_list_parse (opt == 'S' ? "--steps" : opt == 'R' ? "--ranks" : "--replicas", optarg,
                                           opt == 'S' ? &keep->steps : opt == 'R' ? &keep->ranks : &keep->replicas))
              != 0)
            return rc_opt;
          break;
        case 'C':
          if ((rc_opt = pp_cli_clock_parse (optarg, &clock)) != 0)
            return rc_opt;
          break;
        case 'h':
          export_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli export --help'",
                                     argv[optind - 1]);
        }
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "export", &path)) != 0)
    return rc_args;
  if (out == NULL)
    return pp_cli_usage_error ("export needs -o OUT");
  /* renaming the export over its own trace would lose the trace */
  if (strcmp (out, "-") != 0 && pp_cli_find_same_file (out, &path, 1) >= 0)
    return pp_cli_usage_error ("-o %s is the trace to export; write the export elsewhere", out);
  {
    /* -o - into the trace itself (export X -o - >> X) */
    struct stat so, si;
    if (strcmp (out, "-") == 0 && fstat (STDOUT_FILENO, &so) == 0 && stat (path, &si) == 0
        && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
      return pp_cli_usage_error ("standard output is the trace to export (%s); write the export "
                                 "elsewhere", path);
  }
  /* why is the whole run's analysis, in durations */
  if (format == 2 && pp_cli_selection_given (keep))
    return pp_cli_usage_error ("--steps, --ranks and --replicas choose what chrome and csv write; why "
                               "analyses the whole trace");
  if (format == 2 && clock != PP_CLI_CLOCK_RUN)
    return pp_cli_usage_error ("--clock is for chrome and csv; why holds durations, no times");
  /* times from the app's zero (why's are the steps' own) */
  AppView av = { 0 };
  if ((format != 2 && app_view_read (path, format == 0, &av) != 0) || trace_load (path, &t) != 0)
    {
      app_view_clear (&av);
      return 1;
    }
  PpWhyReport *why = NULL;
  PpWhyChange why_ch;
  PpSchedule *why_s = NULL;
  int64_t base = 0;
  if (format != 2)
    {
      char msg[256];
      if (pp_cli_selection_given (keep)
          && (status = pp_cli_selection_check (keep, t.n_all_spans, span_coords, &t)) != 0)
        goto done;
      status = 1;
      t.keep = pp_cli_selection_given (keep) ? keep : NULL;
      if (!pp_cli_clock_base (clock, t.has_desc ? &t.desc : NULL, run_start (&t, &av), &base, msg, sizeof msg))
        {
          fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, msg);
          goto done;
        }
      int shared = clock == PP_CLI_CLOCK_REALTIME && format == 0 ? real_pids (&t, n_ranks_of (&t)) : 0;
      if (shared < 0)
        {
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          goto done;
        }
      if (shared > 0)
        fprintf (stderr, "pipescope-cli: note: %d tracks share a pid (ranks run as threads of one process, "
                 "or processes on different hosts); they keep pipescope's numbers, from %d\n", shared,
                 PP_CLI_CLOCK_SYNTHETIC_PID);
    }
  if (format == 2)
    {
      PpError e = { 0 };
      if (!t.has_desc)
        snprintf (e.msg, sizeof e.msg, "%s has no description: its schedule is unknown", path);
      if (!t.has_desc || analyse_why (&t, &why, &why_ch, &why_s, &e) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", e.msg);
          goto done;
        }
    }

  if (strcmp (out, "-") == 0)
    {
      /* -o -: standard output, for a pipe (jq, a file of the caller's) */
      int wrc = 0;
      if (format == 2)
        wrc = write_why_json (stdout, &t, why_s, why, &why_ch);
      else
        wrc = format == 0 ? write_chrome (stdout, &t, &av, base, clock == PP_CLI_CLOCK_RUN)
              : write_csv (stdout, &t, base);
      if (wrc != 0)
        fprintf (stderr, "pipescope-cli: error: out of memory\n");
      else if (ferror (stdout) | (fflush (stdout) != 0))
        fprintf (stderr, "pipescope-cli: error: cannot write to standard output: %s\n", strerror (errno));
      else
        status = 0;
      goto done;
    }
  int e = pp_cli_output_open (&o, out, 0644), fd = -1;
  if (e == 0 && ((fd = dup (o.fd)) < 0 || (f = fdopen (fd, "w")) == NULL))
    e = errno;
  if (e != 0)
    {
      if (fd >= 0)
        close (fd);
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s\n", out, pp_cli_output_strerror (e));
      goto done;
    }
  if ((format == 2 ? write_why_json (f, &t, why_s, why, &why_ch)
       : format == 0 ? write_chrome (f, &t, &av, base, clock == PP_CLI_CLOCK_RUN) : write_csv (f, &t, base)) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto done;
    }
  e = ferror (f) ? (errno ? errno : EIO) : 0;
  if (fclose (f) != 0 && e == 0)
    e = errno;
  f = NULL;
  if (e == 0)
    e = pp_cli_output_commit (&o);
  if (e != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s%s\n", out, strerror (e),
               pp_cli_no_room (e) ? " (the disk is full); nothing written" : "");
      goto done;
    }
  status = 0;
done:
  if (f != NULL)
    fclose (f);
  pp_cli_output_discard (&o);   /* nothing of a failed export left behind */
  app_view_clear (&av);
  pp_why_report_free (why);
  pp_schedule_free (why_s);
  trace_clear (&t);
  return status;
}

int
pp_cli_export (int argc, char **argv)
{
  PpCliSelection keep = { 0 };
  int rc = export_command (argc, argv, &keep);
  pp_cli_selection_clear (&keep);
  return rc;
}
