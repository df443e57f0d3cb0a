/* pp-why-report.c — a Why report printed (the idle table, what to
 * change, the critical path) and written as JSON (pp-why.h). */
#include "pp-why.h"
#include "pp-why-runtime.h"

#include <stdio.h>

void
pp_why_print_idle (FILE *f, const PpWhyIdle *idle, int ranks, double scale, const char *unit)
{
  /* the data-parallel column only for a job that has such communication:
   * work of the step, after the idle and its parts (not one of them) */
  int dp = 0;
  for (int r = 0; r < ranks; r++)
    dp |= idle[r].dp_comm > 0;
  fprintf (f, "rank  %10s  %10s  %10s  %10s  %10s  %s%s\n", "idle", "schedule", "imbalance", "transfers",
           "runtime", dp ? "most       " : "most", dp ? "| work: dp_comm" : "");
  for (int r = 0; r < ranks; r++)
    {
      const PpWhyIdle *w = &idle[r];
      int most = 0;
      char dpc[40] = "";
      for (int k = 1; k < PP_WHY_N_PARTS; k++)
        if (pp_why_idle_part (w, k) > pp_why_idle_part (w, most))
          most = k;
      if (dp)
        snprintf (dpc, sizeof dpc, "|  %7.2f %s", w->dp_comm * scale, unit);
      fprintf (f, "%4d  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %7.2f %-2s  %-*s%s\n", r,
               w->measured * scale, unit, w->schedule * scale, unit, w->imbalance * scale, unit,
               w->transfers * scale, unit, w->runtime * scale, unit, dp ? 11 : 0,
               w->measured > 0 ? pp_why_part_name (most) : "-", dpc);
    }
}

void
pp_why_print_change (FILE *f, const PpWhyChange *c, double scale, const char *unit)
{
  fprintf (f, "slowest stage: %d, F+B %.2f %s a micro-batch, %.0f%% above the mean stage (%.2f %s)\n",
           c->slowest_stage, c->slowest_cost * scale, unit, 100.0 * c->excess, c->mean_cost * scale, unit);
  if (!c->has_partition)
    return;
  char shared[64] = "";
  if (c->cores > 0)
    snprintf (shared, sizeof shared, "; the ranks sharing %d core%s", c->cores, c->cores == 1 ? "" : "s");
  if (c->changed)
    fprintf (f, "what to change: --partition %s (now %s): predicted step %.2f %s (the plan now %.2f %s; "
             "a step from its first block to its last%s)\n",
             c->partition, c->current, c->predicted_step * scale, unit, c->current_step * scale, unit,
             shared);
  else
    fprintf (f, "what to change: the partition %s is already the balanced one (predicted step %.2f %s, "
             "first block to last%s)\n",
             c->current, c->predicted_step * scale, unit, shared);
}

void
pp_why_print_path (FILE *f, const PpWhyReport *r)
{
  fprintf (f, "critical path (share of the step, mean over %d step%s):", r->n_steps,
           r->n_steps == 1 ? "" : "s");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s stage %d %.1f%%", q ? "," : "", q, 100.0 * r->path_share[q]);
  fprintf (f, ", transfers %.1f%%, gaps %.1f%%\n", 100.0 * r->path_transfer_share,
           100.0 * r->path_slack_share);
}

static void
json_idle (FILE *f, const PpWhyIdle *w)
{
  fprintf (f, "{\"idle\": %.9g, \"schedule\": %.9g, \"imbalance\": %.9g, \"transfers\": %.9g, "
              "\"runtime\": %.9g, \"dp_comm\": %.9g", w->measured, w->schedule, w->imbalance,
           w->transfers, w->runtime, w->dp_comm);
  pp_why_runtime_write_json (f, w);
  fputc ('}', f);
}

void
pp_why_write_replicas_json (FILE *f, const PpWhyReport *r)
{
  if (r == NULL || r->n_replicas <= 1 || r->idle_min == NULL)
    return;
  fprintf (f, ",\n  \"replicas\": {\"count\": %d, \"statistic\": \"the median copy by step length, every rank\", "
              "\"steps_of_replica\": %d, \"per_rank\": [", r->n_replicas, r->median_replica);
  for (int q = 0; q < r->ranks; q++)
    fprintf (f, "%s\n    {\"rank\": %d, \"replica\": %d, \"idle_min\": %.9g, \"idle_max\": %.9g, "
                "\"idle_max_replica\": %d}", q ? "," : "", q, r->idle_replica[q], r->idle_min[q],
             r->idle_max[q], r->idle_max_replica[q]);
  fprintf (f, "\n  ]}");
}


void
pp_why_write_json (FILE *f, const PpSchedule *s, const PpWhyReport *r, const PpWhyChange *c)
{
  fprintf (f, "{\n  \"schedule\": \"%s\", \"ranks\": %d, \"microbatches\": %d, \"stages\": %d,\n",
           s->name, s->ranks, s->microbatches, s->n_stages);
  fprintf (f, "  \"unit\": \"s\", \"steps_analysed\": %d, \"step_length\": %.9g,\n", r->n_steps,
           r->length);
  fprintf (f, "  \"idle\": [");
  for (int i = 0; i < r->ranks; i++)
    {
      fprintf (f, "%s\n    ", i ? "," : "");
      json_idle (f, &r->idle[i]);
    }
  fprintf (f, "\n  ],\n  \"critical_path\": {\"stage_share\": [");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s%.6g", q ? ", " : "", r->path_share[q]);
  fprintf (f, "], \"transfer_share\": %.6g, \"gap_share\": %.6g},\n", r->path_transfer_share,
           r->path_slack_share);
  fprintf (f, "  \"costs\": [");
  for (int q = 0; q < r->n_stages; q++)
    fprintf (f, "%s\n    {\"stage\": %d, \"f\": %.9g, \"b\": %.9g, \"w\": %.9g, \"comm\": %.9g}",
             q ? "," : "", q, r->costs->f[q], r->costs->b[q], r->costs->w[q], r->costs->comm[q]);
  fprintf (f, "\n  ],\n  \"steps\": [");
  for (int i = 0; i < r->n_steps; i++)
    {
      const PpWhyStep *ws = &r->steps[i];
      fprintf (f, "%s\n    {\"step\": %d, \"length\": %.9g, \"idle\": [", i ? "," : "", ws->step,
               ws->length);
      for (int k = 0; k < r->ranks; k++)
        {
          fprintf (f, "%s", k ? ", " : "");
          json_idle (f, &ws->idle[k]);
        }
      fprintf (f, "], \"critical_path\": [");
      for (size_t k = 0; k < ws->path.n; k++)
        {
          const PpWhyPathStep *p = &ws->path.steps[k];
          char buf[PP_ACTION_STR_MAX];
          PpAction a = pp_action (p->block.kind, p->block.stage, p->block.microbatch);
          if (p->block.kind == PP_ACT_OVERLAP_F_B)
            a = pp_action_overlap (p->block.stage, p->block.microbatch, p->block.sub_kind,
                                   p->block.sub_stage, p->block.sub_microbatch);
          /* the name every export gives the block: "0F3+3B1" for a pair */
          fprintf (f, "%s\"%s\"", k ? ", " : "", pp_action_to_label (&a, buf, sizeof buf));
        }
      fprintf (f, "]}");
    }
  fprintf (f, "\n  ]");
  if (c != NULL)
    {
      fprintf (f, ",\n  \"what_to_change\": {\"slowest_stage\": %d, \"slowest_cost\": %.9g, "
                  "\"mean_cost\": %.9g, \"excess\": %.6g, \"planned_step\": %.9g",
               c->slowest_stage, c->slowest_cost, c->mean_cost, c->excess, c->current_step);
      if (c->has_partition)
        fprintf (f, ", \"partition_now\": \"%s\", \"partition\": \"%s\", \"predicted_step\": %.9g",
                 c->current, c->partition, c->predicted_step);
      if (c->cores > 0)
        fprintf (f, ", \"shared_cores\": %d", c->cores);
      fprintf (f, "}");
    }
  pp_why_write_replicas_json (f, r);
  fprintf (f, "\n}\n");
}
