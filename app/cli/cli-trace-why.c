/* cli-trace-why.c — the analyses of a loaded trace that info prints and
 * export --format why writes: the why report over the replicas, the one
 * analysis's steps, and the why JSON that puts the two together. */
#include "cli-trace-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-timeline-model.h"

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

/* A span's name for the analysis (its WAITs' NCCL parts: pp-why.h's
 * PpWhyNames). */
static const char *
why_name (void *user, uint32_t id)
{
  return trace_string (user, id);
}

/* The why analysis of a trace: per pipeline rank over the replicas, each
 * replica's pipeline on its own (pp_why_analyse_replicas); a trace of one
 * pipeline as it always was. */
PpStatus
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
  PpWhyNames names = { why_name, (void *) t };
  PpStatus st = pp_why_analyse_replicas_named (&t->desc, &t->why_plans, t->spans, rep,
                                               rep != NULL ? t->n_all_spans : t->n_spans, t->counters,
                                               crep, t->n_counters, &names, 0, why, ch, s, e);
  free (rep);
  free (crep);
  return st;
}

/* Stragglers across the mesh (pp-straggler.h): every process of a job of
 * replicas against its copies, and what each costs.  *out NULL for a trace
 * of one pipeline. */
PpStatus
analyse_stragglers (const Trace *t, PpStragglerReport **out, PpError *e)
{
  *out = NULL;
  if (t->n_replicas <= 1 || t->span_process == NULL || !t->has_desc)
    return PP_OK;
  PpWhyNames names = { why_name, (void *) t };
  return pp_straggler_analyse_named (&t->desc, &t->why_plans, t->spans, t->span_process, t->n_all_spans,
                                     t->counters, t->counter_process, t->n_counters, t->procs, t->n_procs,
                                     &names, out, e);
}

/* The one analysis's steps of the spans info has read (not the file
 * again): blocks and data-parallel communication, busy and not bubble
 * (as the app's statistics); a job of replicas: every process's at its
 * place, so that the steps are its median copy's, as the app's
 * (pp_timeline_model_step_analysis).  n_steps 0 when none counts. */
void
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

/* export --format why: the why report with the one analysis's steps,
 * median step and bubbles as its first member. */
int
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
  /* pp_why_write_json's object past its "{\n" and before its "\n}\n",
   * then the stragglers (issue 38) */
  if (len >= 4 && strcmp (buf + len - 3, "\n}\n") == 0)
    {
      PpStragglerReport *sr = NULL;
      PpError e = { 0 };
      buf[len - 3] = '\0';
      fputs (buf + 2, f);
      fputs (",\n  ", f);
      if (analyse_stragglers (t, &sr, &e) != PP_OK)
        sr = NULL;
      pp_straggler_write_json (f, sr);
      pp_straggler_report_free (sr);
      fputs ("\n}\n", f);
    }
  else
    fputs (buf + 2, f);
  pp_analysis_steps_clear (&a);
  free (buf);
  return 0;
}
