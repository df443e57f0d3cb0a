/* pp-why-trace.c — a trace file read for the Why analysis: its description,
 * each rank's last plan, its blocks and transfers, its host spans, kernels
 * and block-edge counters (runtime's parts) with every process's clock
 * offset applied, handed to the analysis over replicas (pp-why-replicas.c).
 * Apart from pp-why.c so that the analysis of one run never depends on
 * reading files (pp-why-replicas.c calls pp-why.c, this calls both). */
#include "pp-why.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Room for one more record in *items (elem bytes each) and its writing
 * process in *process, both holding n of *cap: doubled when full (from
 * 4096).  0, or -1 out of memory (the arrays as they were, still owned). */
static int
grow_with_process (void **items, size_t elem, int32_t **process, size_t n, size_t *cap)
{
  if (n < *cap)
    return 0;
  size_t nc = *cap ? 2 * *cap : 4096;
  void *g = realloc (*items, nc * elem);
  if (g == NULL)
    return -1;
  *items = g;
  int32_t *gp = realloc (*process, nc * sizeof *gp);
  if (gp == NULL)
    return -1;
  *process = gp;
  *cap = nc;
  return 0;
}

/* The trace's span names the analysis reads: NCCL's ("nccl:..."; its
 * WAITs' parts, pp_why_wait_is_local), the last one for an id winning as
 * in a trace.  A few in a trace: a linear search. */
typedef struct {
  uint32_t *id;
  char    **text;
  size_t    n, cap;
} Names;

static const char *
name_of (void *user, uint32_t id)
{
  const Names *nm = user;
  for (size_t i = 0; i < nm->n; i++)
    if (nm->id[i] == id)
      return nm->text[i];
  return NULL;
}

static int
names_add (Names *nm, uint32_t id, const char *text)
{
  if (text == NULL || strncmp (text, "nccl:", 5) != 0)
    return 0;
  char *t = strdup (text);
  if (t == NULL)
    return -1;
  for (size_t i = 0; i < nm->n; i++)
    if (nm->id[i] == id)
      {
        free (nm->text[i]);
        nm->text[i] = t;
        return 0;
      }
  if (nm->n == nm->cap)
    {
      size_t nc = nm->cap ? 2 * nm->cap : 16;
      uint32_t *gi = realloc (nm->id, nc * sizeof *gi);
      if (gi != NULL)
        nm->id = gi;
      char **gt = gi != NULL ? realloc (nm->text, nc * sizeof *gt) : NULL;
      if (gt == NULL)
        {
          free (t);
          return -1;
        }
      nm->text = gt;
      nm->cap = nc;
    }
  nm->id[nm->n] = id;
  nm->text[nm->n++] = t;
  return 0;
}

static void
names_clear (Names *nm)
{
  for (size_t i = 0; i < nm->n; i++)
    free (nm->text[i]);
  free (nm->id);
  free (nm->text);
}

PpStatus
pp_why_analyse_trace (const char *path, int max_steps, PpWhyReport **out, PpWhyChange *change,
                      PpSchedule **sched_out, PpError *err)
{
  PpTraceReader *rd;
  PpTraceItem item;
  PpTraceDescription desc;
  int has_desc = 0;
  PpSpan *spans = NULL;
  int32_t *span_process = NULL;   /* who wrote each span (1.4), -1 not said */
  size_t n = 0, cap = 0;
  PpCounter *ctr = NULL;            /* the block-edge counters (1.6) */
  int32_t *ctr_process = NULL, *ctr_replica = NULL;
  size_t n_ctr = 0, cap_ctr = 0;
  int64_t *off = NULL;
  /* 1.4: a process's own clock offset holds for its items alone */
  int64_t *proc_off = NULL;
  uint8_t *has_proc_off = NULL;
  PpTraceProcess *procs = NULL;
  size_t n_procs = 0, cap_procs = 0;
  int32_t *replica = NULL;
  PpTracePlanAction **plan = NULL;   /* [PP_TRACE_MAX_RANKS] each rank's last plan */
  size_t *n_plan = NULL;
  int plan_ranks = 0;
  Names names = { 0 };
  PpError rerr = { 0 };
  PpStatus st = PP_OK;

  *out = NULL;
  if (sched_out != NULL)
    *sched_out = NULL;
  if (change != NULL)
    memset (change, 0, sizeof *change);
  rd = pp_trace_reader_new_path (path, &rerr);
  if (rd == NULL)
    return pp_error_set (err, rerr.status != PP_OK ? rerr.status : PP_EIO, "%s: %s", path,
                         rerr.msg[0] ? rerr.msg : strerror (errno));
  off = calloc (PP_TRACE_MAX_RANKS, sizeof *off);
  plan = calloc (PP_TRACE_MAX_RANKS, sizeof *plan);
  n_plan = calloc (PP_TRACE_MAX_RANKS, sizeof *n_plan);
  if (off == NULL || plan == NULL || n_plan == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (;;)
    {
      if ((st = pp_trace_reader_next (rd, &item, &rerr)) != PP_OK)
        {
          pp_error_set (err, st, "%s: %s", path, rerr.msg);
          goto out;
        }
      if (item.type == PP_TRACE_ITEM_END)
        break;
      if (item.type == PP_TRACE_ITEM_DESCRIPTION)
        {
          desc = *item.description;
          has_desc = 1;
        }
      else if (item.type == PP_TRACE_ITEM_PLAN && item.plan.rank >= 0
               && item.plan.rank < PP_TRACE_MAX_RANKS)
        {
          /* a later plan of a rank replaces the earlier (a timed one the untimed) */
          int r = item.plan.rank;
          free (plan[r]);
          n_plan[r] = 0;
          if ((plan[r] = malloc ((item.plan.n_actions + 1) * sizeof **plan)) == NULL)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          if (item.plan.n_actions > 0)
            memcpy (plan[r], item.plan.actions, item.plan.n_actions * sizeof **plan);
          n_plan[r] = item.plan.n_actions;
          if (r >= plan_ranks)
            plan_ranks = r + 1;
        }
      else if (item.type == PP_TRACE_ITEM_CLOCK_OFFSET && item.clock_offset.rank >= 0
               && item.clock_offset.rank < PP_TRACE_MAX_RANKS && item.process < 0)
        off[item.clock_offset.rank] = item.clock_offset.offset_ns;
      else if (item.type == PP_TRACE_ITEM_CLOCK_OFFSET && item.clock_offset.rank >= 0
               && item.clock_offset.rank < PP_TRACE_MAX_RANKS)
        {
          if (proc_off == NULL
              && ((proc_off = calloc (PP_TRACE_MAX_PROCESSES, sizeof *proc_off)) == NULL
                  || (has_proc_off = calloc (PP_TRACE_MAX_PROCESSES, 1)) == NULL))
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          proc_off[item.process] = item.clock_offset.offset_ns;
          has_proc_off[item.process] = 1;
        }
      else if (item.type == PP_TRACE_ITEM_STRING)
        {
          if (names_add (&names, item.string.id, item.string.name) != 0)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
        }
      else if (item.type == PP_TRACE_ITEM_PROCESS)
        {
          if (n_procs == cap_procs)
            {
              size_t nc = cap_procs ? 2 * cap_procs : 16;
              PpTraceProcess *g = realloc (procs, nc * sizeof *g);
              if (g == NULL)
                {
                  st = pp_error_set (err, PP_ENOMEM, "out of memory");
                  goto out;
                }
              procs = g;
              cap_procs = nc;
            }
          procs[n_procs++] = item.process_info;
        }
      else if (item.type == PP_TRACE_ITEM_SPAN
               && pp_why_span_kind_analysed (item.span.kind))
        {
          if (grow_with_process ((void **) &spans, sizeof *spans, &span_process, n, &cap) != 0)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          span_process[n] = item.process;
          spans[n++] = item.span;
        }
      else if (item.type == PP_TRACE_ITEM_COUNTER
               && (item.counter.kind == PP_COUNTER_RUN_DELAY_NS
                   || item.counter.kind == PP_COUNTER_PROBE_SELF_NS
                   || item.counter.kind == PP_COUNTER_ON_CPU_NS))
        {
          if (grow_with_process ((void **) &ctr, sizeof *ctr, &ctr_process, n_ctr, &cap_ctr) != 0)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          ctr_process[n_ctr] = item.process;
          ctr[n_ctr++] = item.counter;
        }
    }
  if (!has_desc)
    {
      st = pp_error_set (err, PP_EINVAL, "%s has no description: its schedule is unknown", path);
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    {
      int32_t g = span_process[i];
      int64_t o = g >= 0 && proc_off != NULL && has_proc_off[g] ? proc_off[g]
                  : spans[i].rank >= 0 && spans[i].rank < PP_TRACE_MAX_RANKS ? off[spans[i].rank] : 0;
      if (llabs (spans[i].start_ns) < ((int64_t) 1 << 61) && llabs (spans[i].end_ns) < ((int64_t) 1 << 61)
          && llabs (o) < ((int64_t) 1 << 61))
        {
          spans[i].start_ns += o;
          spans[i].end_ns += o;
        }
    }
  for (size_t i = 0; i < n_ctr; i++)
    {
      int32_t g = ctr_process[i];
      int64_t o = g >= 0 && proc_off != NULL && has_proc_off[g] ? proc_off[g]
                  : ctr[i].rank >= 0 && ctr[i].rank < PP_TRACE_MAX_RANKS ? off[ctr[i].rank] : 0;
      if (llabs (ctr[i].time_ns) < ((int64_t) 1 << 61) && llabs (o) < ((int64_t) 1 << 61))
        ctr[i].time_ns += o;
    }
  if (n_procs > 0 && (replica = pp_why_replicas_of_spans (procs, n_procs, span_process, n, err)) == NULL)
    {
      st = err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
      goto out;
    }
  if (n_procs > 0 && n_ctr > 0
      && (ctr_replica = pp_why_replicas_of_spans (procs, n_procs, ctr_process, n_ctr, err)) == NULL)
    {
      st = err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
      goto out;
    }
  {
    PpWhyPlans plans = { plan_ranks, (const PpTracePlanAction *const *) plan, n_plan };
    PpWhyNames nm = { name_of, &names };
    st = pp_why_analyse_replicas_named (&desc, &plans, spans, replica, n, ctr, ctr_replica, n_ctr, &nm,
                                        max_steps, out, change, sched_out, err);
  }
out:
  pp_trace_reader_free (rd);
  names_clear (&names);
  free (spans);
  free (span_process);
  free (ctr);
  free (ctr_process);
  free (ctr_replica);
  free (proc_off);
  free (has_proc_off);
  free (procs);
  free (replica);
  free (off);
  if (plan != NULL)
    for (int r = 0; r < plan_ranks; r++)
      free (plan[r]);
  free (plan);
  free (n_plan);
  return st;
}

int
pp_why_span_kind_analysed (int kind)
{
  return pp_span_kind_is_work (kind) || kind == PP_SPAN_SEND_F || kind == PP_SPAN_SEND_B
         || kind == PP_SPAN_RECV_F || kind == PP_SPAN_RECV_B || pp_span_kind_is_dp_comm (kind)
         || pp_span_kind_is_host (kind) || kind == PP_SPAN_KERNEL || kind == PP_SPAN_LAUNCH
         || kind == PP_SPAN_WAIT;
}
