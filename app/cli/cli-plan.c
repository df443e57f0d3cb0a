/* cli-plan.c — a schedule's simulated plan as trace frames (cli-plan.h). */
#define _GNU_SOURCE   /* memfd_create */
#include "cli-plan.h"
#include "pp-timeline-model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sys/mman.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pp-why.h"

int
pp_cli_span_kind_of_action (int kind)
{
  switch (kind)
    {
    case PP_ACT_F: return PP_SPAN_F;
    case PP_ACT_B: return PP_SPAN_B;
    case PP_ACT_I: return PP_SPAN_I;
    case PP_ACT_W: return PP_SPAN_W;
    case PP_ACT_OVERLAP_F_B: return PP_SPAN_OVERLAP_F_B;
    default: return -1;
    }
}

void
pp_cli_span_set_sub (PpSpan *sp, const PpAction *a)
{
  if (a->kind != PP_ACT_OVERLAP_F_B || (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I))
    return;
  sp->sub_kind = (uint16_t) pp_cli_span_kind_of_action (a->sub_kind);
  sp->sub_stage = a->sub_stage;
  sp->sub_microbatch = a->sub_microbatch;
}

static int64_t
units_to_ns (double t)
{
  return (int64_t) llround (t * PP_CLI_TRACE_NS_PER_UNIT);
}

void
pp_cli_sim_description (PpTraceDescription *desc, const PpSchedule *s, int argc, char **argv)
{
  struct timespec rt, mono;
  size_t len = 0;

  memset (desc, 0, sizeof *desc);
  snprintf (desc->schedule, sizeof desc->schedule, "%s", s->name);
  snprintf (desc->backend, sizeof desc->backend, "simulated");
  if (gethostname (desc->host, sizeof desc->host - 1) != 0)
    snprintf (desc->host, sizeof desc->host, "unknown");
  snprintf (desc->model, sizeof desc->model, "none");
  len += snprintf (desc->cmdline, sizeof desc->cmdline, "pipescope-cli");
  for (int i = 0; i < argc && len < sizeof desc->cmdline; i++)
    len += snprintf (desc->cmdline + len, sizeof desc->cmdline - len, " %s", argv[i]);
  desc->n_ranks = s->ranks;
  desc->n_microbatches = s->microbatches;
  desc->n_virtual = s->stages_per_rank;
  clock_gettime (CLOCK_REALTIME, &rt);
  clock_gettime (CLOCK_MONOTONIC, &mono);
  desc->start_unix_ns = (int64_t) rt.tv_sec * 1000000000 + rt.tv_nsec;
  desc->start_monotonic_ns = (int64_t) mono.tv_sec * 1000000000 + mono.tv_nsec;
}

void
pp_cli_plan_actions_free (PpTracePlanAction **plan, size_t *n_plan, int n_ranks)
{
  for (int r = 0; plan != NULL && r < n_ranks; r++)
    free (plan[r]);
  free (plan);
  free (n_plan);
}

PpStatus
pp_cli_plan_actions (const PpSchedule *s, const PpSimulation *sim, double seconds_per_unit,
                     PpTracePlanAction ***plan_out, size_t **n_out, PpError *err)
{
  PpTracePlanAction **plan = calloc ((size_t) s->ranks, sizeof *plan);
  size_t *n_plan = calloc ((size_t) s->ranks, sizeof *n_plan);

  *plan_out = NULL;
  *n_out = NULL;
  if (plan == NULL || n_plan == NULL)
    goto oom;
  for (int r = 0; r < s->ranks; r++)
    {
      int n = s->rank[r].n_actions;
      plan[r] = calloc ((size_t) n + 1, sizeof **plan);
      if (plan[r] == NULL)
        goto oom;
      n_plan[r] = (size_t) n;
      for (int k = 0; k < n; k++)
        {
          const PpAction *a = &s->rank[r].actions[k];
          PpTracePlanAction *p = &plan[r][k];
          p->kind = a->kind;
          p->stage = a->stage;
          p->microbatch = a->microbatch;
          p->sub_kind = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_kind : -1;
          p->sub_stage = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_stage : -1;
          p->sub_microbatch = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_microbatch : -1;
          if (sim != NULL)
            {
              /* Plan times are seconds. */
              p->planned_start = sim->timeline[r][k].start * seconds_per_unit;
              p->planned_end = sim->timeline[r][k].end * seconds_per_unit;
            }
        }
    }
  *plan_out = plan;
  *n_out = n_plan;
  return PP_OK;
oom:
  pp_cli_plan_actions_free (plan, n_plan, s->ranks);
  return pp_error_set (err, PP_ENOMEM, "out of memory");
}

PpStatus
pp_cli_write_plan (PpTraceWriter *w, const PpSchedule *s, const PpSimulation *sim,
                   double seconds_per_unit, PpError *err)
{
  PpTracePlanAction **plan;
  size_t *n_plan;
  PpStatus st = pp_cli_plan_actions (s, sim, seconds_per_unit, &plan, &n_plan, err);

  if (st != PP_OK)
    return st;
  st = pp_trace_write_plan (w, s->ranks, (const PpTracePlanAction *const *) plan, n_plan, sim != NULL, err);
  pp_cli_plan_actions_free (plan, n_plan, s->ranks);
  return st;
}

PpStatus
pp_cli_write_sim_header (PpTraceWriter *w, const PpTraceDescription *desc, const PpSchedule *s,
                         const PpSimulation *sim, PpError *err)
{
  PpStatus st = pp_trace_write_description (w, desc, err);
  if (st == PP_OK)
    /* One time unit is PP_CLI_TRACE_NS_PER_UNIT ns. */
    st = pp_cli_write_plan (w, s, sim, PP_CLI_TRACE_NS_PER_UNIT * 1e-9, err);
  return st;
}

int
pp_cli_write_sim_trace (const char *path, const PpSchedule *s, const PpSimulation *sim,
                        int argc, char **argv)
{
  PpError err = { 0 };
  PpTraceDescription desc;
  PpSpan *spans = NULL;
  size_t n_spans = 0;
  PpTraceWriter *w = NULL;
  int status = 1;

  pp_cli_sim_description (&desc, s, argc, argv);
  spans = calloc ((size_t) pp_schedule_total_actions (s) + 1, sizeof *spans);
  if (spans == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        const PpSimAction *sa = &sim->timeline[r][k];
        int sk = pp_cli_span_kind_of_action (a->kind);
        if (sk >= 0)
          {
            PpSpan *sp = &spans[n_spans++];
            memset (sp, 0, sizeof *sp);
            sp->start_ns = desc.start_monotonic_ns + units_to_ns (sa->start);
            sp->end_ns = desc.start_monotonic_ns + units_to_ns (sa->end);
            sp->rank = r;
            sp->stage = a->stage;
            sp->microbatch = a->microbatch;
            sp->step = 0;
            sp->kind = (uint16_t) sk;
            sp->device = 0xffff;
            sp->peer_rank = -1;
            pp_cli_span_set_sub (sp, a);
          }
      }

  w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  if (w == NULL)
    goto fail;
  if (pp_cli_write_sim_header (w, &desc, s, sim, &err) != PP_OK)
    goto fail;
  for (int r = 0; r < s->ranks; r++)
    {
      int n = s->rank[r].n_actions;
      double t0 = n > 0 ? sim->timeline[r][0].start : 0;
      if (pp_trace_write_step_marker (w, r, 0, PP_TRACE_STEP_BEGIN,
                                      desc.start_monotonic_ns + units_to_ns (t0), &err) != PP_OK)
        goto fail;
    }
  if (pp_trace_write_spans (w, spans, n_spans, &err) != PP_OK)
    goto fail;
  for (int r = 0; r < s->ranks; r++)
    {
      int n = s->rank[r].n_actions;
      double t1 = n > 0 ? sim->timeline[r][n - 1].end : 0;
      if (pp_trace_write_step_marker (w, r, 0, PP_TRACE_STEP_END,
                                      desc.start_monotonic_ns + units_to_ns (t1), &err) != PP_OK)
        goto fail;
    }
  {
    PpTraceWriter *tmp = w;
    w = NULL;
    if (pp_trace_writer_close (tmp, &err) != PP_OK)
      goto fail;
  }
  status = 0;
  goto out;

fail:
  fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : "cannot write trace");
  status = 1;
out:
  if (w)
    pp_trace_writer_close (w, NULL);
  free (spans);
  return status;
}

/* The process each pipeline rank shows (the timeline model's choice: its
 * lowest place, dp first; want non-NULL: the process at that copy's place,
 * want[dp .. ep], where the rank has one), from the PROCESS frames of
 * path; shown[r] -1 for a rank without.  Returns the processes seen, -1
 * with err. */
static bool
at_copy_coord (const int32_t *coord, const int32_t *want)
{
  return want != NULL && memcmp (&coord[PP_TRACE_MESH_DP], &want[PP_TRACE_MESH_DP],
                                 (PP_TRACE_MESH_DIMS - PP_TRACE_MESH_DP) * sizeof *want) == 0;
}

static bool
at_copy (const PpTraceProcess *p, const int32_t *want)
{
  return want != NULL && memcmp (&p->coord[PP_TRACE_MESH_DP], &want[PP_TRACE_MESH_DP],
                                 (PP_TRACE_MESH_DIMS - PP_TRACE_MESH_DP) * sizeof *want) == 0;
}

static int
shown_processes (const char *path, const int32_t *want, int32_t *shown, int32_t (*coord)[PP_TRACE_MESH_DIMS],
                 PpError *err)
{
  PpTraceReader *rd = pp_trace_reader_new_path (path, err);
  PpTraceItem it;
  int n = 0;
  if (rd == NULL)
    return -1;
  for (;;)
    {
      if (pp_trace_reader_next (rd, &it, err) != PP_OK)
        {
          pp_trace_reader_free (rd);
          return -1;
        }
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (it.type != PP_TRACE_ITEM_PROCESS)
        continue;
      const PpTraceProcess *p = &it.process_info;
      n++;
      int lower = shown[p->rank] < 0 || (at_copy (p, want) && !at_copy_coord (coord[p->rank], want));
      if (!lower && at_copy_coord (coord[p->rank], want) && !at_copy (p, want))
        continue;   /* the wanted copy's process stays */
      for (int d = PP_TRACE_MESH_DP; !lower && d < PP_TRACE_MESH_DIMS; d++)
        if (p->coord[d] != coord[p->rank][d])
          {
            lower = p->coord[d] < coord[p->rank][d];
            break;
          }
      if (lower)
        {
          shown[p->rank] = p->process;
          memcpy (coord[p->rank], p->coord, sizeof coord[0]);
        }
    }
  pp_trace_reader_free (rd);
  return n;
}

/* part as the analysis takes it: where its pipeline ranks ran in several
 * processes (replicas, format 1.4), a copy in memory (*fd, its path in
 * copy) holding one replica's items, as the timeline shows (every
 * replica's would count each block twice); else part itself (copy "",
 * *fd -1). */
static PpStatus
one_copy (const char *part, const int32_t *want, char *copy, size_t size, int *copy_fd, PpError *err);

PpStatus
pp_cli_one_replica (const char *part, char *copy, size_t size, int *copy_fd, PpError *err)
{
  /* a job of replicas: its median copy (the copy every view's steps and
   * bubbles are of: pp_timeline_model_step_analysis) */
  int32_t want[PP_TRACE_MESH_DIMS];
  PpTimelineModel *m = pp_timeline_model_new_from_file (part, NULL);
  bool by_copy = m != NULL && pp_timeline_model_analysis_copy (m, want);
  pp_timeline_model_free (m);
  return one_copy (part, by_copy ? want : NULL, copy, size, copy_fd, err);
}

/* pp_cli_one_replica's copy of the processes at want's place (NULL: each
 * rank's lowest). */
static PpStatus
one_copy (const char *part, const int32_t *want, char *copy, size_t size, int *copy_fd, PpError *err)
{
  int32_t *shown = malloc (PP_TRACE_MAX_RANKS * sizeof *shown);
  int32_t (*coord)[PP_TRACE_MESH_DIMS] = malloc (PP_TRACE_MAX_RANKS * sizeof *coord);
  PpTraceReader *rd = NULL;
  PpTraceWriter *w = NULL;
  PpTraceItem it;
  PpStatus st = PP_OK;
  int fd = -1;

  copy[0] = '\0';
  *copy_fd = -1;
  if (shown == NULL || coord == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (int r = 0; r < PP_TRACE_MAX_RANKS; r++)
    shown[r] = -1;
  int n = shown_processes (part, want, shown, coord, err);
  if (n < 0)
    {
      st = err->status;
      goto out;
    }
  int n_shown = 0;
  for (int r = 0; r < PP_TRACE_MAX_RANKS; r++)
    n_shown += shown[r] >= 0;
  if (n == n_shown)
    goto out;   /* a process a rank: no replicas, part itself (its own name in errors) */
  if ((fd = memfd_create ("pipescope-replica", MFD_CLOEXEC)) < 0)
    {
      st = pp_error_set (err, PP_EIO, "cannot make a copy of one replica in memory: %s", strerror (errno));
      goto out;
    }
  snprintf (copy, size, "/proc/self/fd/%d", fd);
  if ((rd = pp_trace_reader_new_path (part, err)) == NULL
      || (w = pp_trace_writer_new_fd (fd, PP_TRACE_NATIVE, err)) == NULL)
    {
      st = err->status;
      goto out;
    }
  for (;;)
    {
      if ((st = pp_trace_reader_next (rd, &it, err)) != PP_OK)
        goto out;
      if (it.type == PP_TRACE_ITEM_END)
        break;
      int r = it.type == PP_TRACE_ITEM_SPAN ? it.span.rank
              : it.type == PP_TRACE_ITEM_STEP_MARKER ? it.step_marker.rank
              : it.type == PP_TRACE_ITEM_COUNTER ? it.counter.rank : -1;
      if (r >= 0 && it.process >= 0 && shown[r] >= 0 && it.process != shown[r])
        continue;
      if ((st = pp_trace_write_item (w, &it, err)) != PP_OK)
        goto out;
    }
  st = pp_trace_writer_close (w, err);
  w = NULL;
out:
  pp_trace_writer_close (w, NULL);
  pp_trace_reader_free (rd);
  if (st == PP_OK && fd >= 0)
    *copy_fd = fd;
  else
    {
      if (fd >= 0)
        close (fd);
      copy[0] = '\0';
    }
  free (shown);
  free (coord);
  return st;
}

/* The last PLAN of every rank of part (0 <= rank < n): what each rank wrote,
 * data-parallel actions included, for pp_why_schedule_with_comms. */
typedef struct {
  int                 n;
  PpTracePlanAction **actions;   /* [n] */
  size_t             *n_actions; /* [n] */
} RankPlans;

static void
rank_plans_clear (RankPlans *p)
{
  for (int r = 0; r < p->n; r++)
    free (p->actions[r]);
  free (p->actions);
  free (p->n_actions);
  memset (p, 0, sizeof *p);
}

static PpStatus
rank_plans_take (RankPlans *p, const PpTraceItem *it, PpError *err)
{
  int r = it->plan.rank;
  if (r < 0 || r >= p->n)
    return PP_OK;
  PpTracePlanAction *a = malloc ((it->plan.n_actions + 1) * sizeof *a);
  if (a == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  memcpy (a, it->plan.actions, it->plan.n_actions * sizeof *a);
  free (p->actions[r]);
  p->actions[r] = a;
  p->n_actions[r] = it->plan.n_actions;
  return PP_OK;
}

PpStatus
pp_cli_simulate_measured_plan (const PpSchedule *s, const PpWhyPlans *plans, const PpWhyReport *rep,
                               PpSchedule **with_comms, PpSimulation **sim, PpError *comms_err, PpError *err)
{
  *with_comms = NULL;
  *sim = NULL;
  /* a plan from pipeline_order_with_comms: its data-parallel actions
   * placed too, with the times measured (the costs' dp), so that the
   * plan lane lines up with the measurement; where they cannot be
   * placed, the compute order alone */
  if (plans == NULL || pp_why_schedule_with_comms (s, plans, with_comms, comms_err) != PP_OK)
    *with_comms = NULL;
  return pp_simulate (*with_comms ? *with_comms : s, rep->costs, sim, err);
}


double
pp_cli_plan_bubbles (const PpTracePlanAction *const *actions, const size_t *n_actions, int n_ranks,
                     double *bubble)
{
  double ps = INFINITY, pe = -INFINITY;
  for (int r = 0; r < n_ranks; r++)
    for (size_t k = 0; actions[r] != NULL && k < n_actions[r]; k++)
      if (pp_timeline_plan_action_is_work (actions[r][k].kind))
        {
          ps = fmin (ps, actions[r][k].planned_start);
          pe = fmax (pe, actions[r][k].planned_end);
        }
  for (int r = 0; r < n_ranks; r++)
    {
      double busy = 0;
      bool any = false;
      for (size_t k = 0; actions[r] != NULL && k < n_actions[r]; k++)
        if (pp_timeline_plan_action_is_work (actions[r][k].kind))
          {
            busy += actions[r][k].planned_end - actions[r][k].planned_start;
            any = true;
          }
      bubble[r] = any && pe > ps ? 1.0 - busy / (pe - ps) : -1;
    }
  return pe > ps ? pe - ps : 0;
}

int
pp_cli_write_timed_plan (const char *part, const char *trace, const char *who, char *why,
                         size_t why_size)
{
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL, *with_comms = NULL;
  RankPlans plans = { 0 };
  PpSimulation *sim = NULL;
  PpTraceReader *rd = NULL;
  PpTraceWriter *w = NULL;
  PpError err = { 0 };
  PpTraceItem it;
  int status = 1;
  bool created = false;
  char copy[64] = "";
  int copy_fd = -1;

  /* a job of replicas: its median copy's costs */
  if (pp_cli_one_replica (part, copy, sizeof copy, &copy_fd, &err) != PP_OK
      || pp_why_analyse_trace (copy[0] ? copy : part, 0, &rep, NULL, &s, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: %s: the plan stays untimed: %s\n", who, err.msg);
      goto out;
    }
  plans.n = s->ranks;
  plans.actions = calloc ((size_t) s->ranks, sizeof *plans.actions);
  plans.n_actions = calloc ((size_t) s->ranks, sizeof *plans.n_actions);
  if (plans.actions == NULL || plans.n_actions == NULL)
    {
      fprintf (stderr, "pipescope-cli: %s: the plan stays untimed: out of memory\n", who);
      goto out;
    }
  if ((rd = pp_trace_reader_new_path (part, &err)) == NULL
      || (w = pp_trace_writer_new_path (trace, PP_TRACE_NATIVE, &err)) == NULL)
    goto fail;
  created = true;
  for (;;)
    {
      if (pp_trace_reader_next (rd, &it, &err) != PP_OK)
        goto fail;
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (it.type == PP_TRACE_ITEM_PLAN && rank_plans_take (&plans, &it, &err) != PP_OK)
        goto fail;
      if (pp_trace_write_item (w, &it, &err) != PP_OK)
        goto fail;
    }
  PpWhyPlans wp = { plans.n, (const PpTracePlanAction *const *) plans.actions, plans.n_actions };
  PpError cerr = { 0 };
  PpStatus sst = pp_cli_simulate_measured_plan (s, &wp, rep, &with_comms, &sim, &cerr, &err);
  if (with_comms == NULL && cerr.msg[0])
    fprintf (stderr, "pipescope-cli: %s: the plan is timed without its data-parallel actions: %s\n",
             who, cerr.msg);
  if (sst != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: %s: the plan stays untimed: %s\n", who, err.msg);
      created = true;
      goto untimed;
    }
  /* the simulation's times are seconds, as the report's costs */
  if (pp_cli_write_plan (w, with_comms ? with_comms : s, sim, 1.0, &err) != PP_OK)
    goto fail;
  {
    PpTraceWriter *tmp = w;
    w = NULL;
    if (pp_trace_writer_close (tmp, &err) != PP_OK)
      goto fail;
  }
  fprintf (stderr, "planned %s with the costs it measured: %.3f ms a step%s\n", s->name,
           sim->makespan * 1e3, with_comms ? ", its data-parallel actions included" : "");
  status = 0;
  goto out;
fail:
  if (created)
    {
      /* the writing failed, not the plan */
      snprintf (why, why_size, "%s", err.msg);
      status = 2;
    }
  else
    fprintf (stderr, "pipescope-cli: %s: the timed plan: %s; the plan stays untimed\n", who, err.msg);
  goto out;
untimed:
  status = 1;   /* said above; the half-written copy goes */
out:
  if (copy_fd >= 0)
    close (copy_fd);
  pp_trace_writer_close (w, NULL);
  if (status != 0 && created)
    unlink (trace);   /* no half-timed trace left behind */
  pp_trace_reader_free (rd);
  pp_simulation_free (sim);
  pp_schedule_free (with_comms);
  pp_schedule_free (s);
  pp_why_report_free (rep);
  rank_plans_clear (&plans);
  return status;
}
