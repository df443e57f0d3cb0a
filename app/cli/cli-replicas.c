/* cli-replicas.c — info on a job of replicas (see cli-replicas.h).  The
 * numbers come from the timeline's views (pp-timeline-fold.h), so that
 * info, render and the app agree on them. */
#include "cli-replicas.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-analysis.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"

#define MAX_STEPS_LISTED 8

/* A step's whole-step row and the row of its rank whose slowest lags most. */
typedef struct {
  const PpTimelineSlowest *whole, *worst;
} Pair;

static int
cmp_lag_desc (const void *a, const void *b)
{
  const Pair *x = a, *y = b;
  if (x->whole->lag_ns != y->whole->lag_ns)
    return x->whole->lag_ns > y->whole->lag_ns ? -1 : 1;
  return (x->whole->step > y->whole->step) - (x->whole->step < y->whole->step);
}

static int
cmp_step (const void *a, const void *b)
{
  const Pair *x = a, *y = b;
  return (x->whole->step > y->whole->step) - (x->whole->step < y->whole->step);
}

static void
print_row (const PpTimelineModel *m, const PpTimelineSlowest *s)
{
  const PpTraceProcess *p = pp_timeline_model_process_place (m, s->process);
  char where[32];
  if (s->rank < 0)
    snprintf (where, sizeof where, "whole step");
  else
    snprintf (where, sizeof where, "rank %d", s->rank);
  printf ("  %-6" PRId32 " %-11s dp %-6" PRId32 " +%-10.3f %s\n", s->step, where, s->dp, (double) s->lag_ns / 1e6,
          p != NULL && p->host[0] ? p->host : "?");
}

void
pp_cli_print_replicas (const PpTraceProcess *procs, size_t n_procs, const PpSpan *spans,
                       const int32_t *span_process, size_t n_spans, int n_ranks)
{
  PpTimelineModel *m;
  PpTraceItem it;

  if (n_procs < 2 || span_process == NULL || n_ranks <= 0 || (m = pp_timeline_model_new ()) == NULL)
    return;
  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_PROCESS;
  for (size_t i = 0; i < n_procs; i++)
    {
      it.process = procs[i].process;
      it.process_info = procs[i];
      pp_timeline_model_add (m, &it);
    }
  /* the work the one analysis counts (pp_analysis_span_counts: blocks,
   * LOSS, data-parallel communication, OPT), as info's headline
   * (step_analysis_of) reads it: the median copy's row here is the
   * headline's bubble */
  it.type = PP_TRACE_ITEM_SPAN;
  for (size_t i = 0; i < n_spans; i++)
    if (span_process[i] >= 0 && pp_analysis_span_counts (spans[i].kind))
      {
        it.process = span_process[i];
        it.span = spans[i];
        pp_timeline_model_add (m, &it);
      }
  if (!pp_timeline_model_has_replicas (m))
    {
      pp_timeline_model_free (m);
      return;
    }

  PpTimelineSpread *sp = calloc ((size_t) n_ranks, sizeof *sp);
  int n_rep = sp != NULL ? pp_timeline_replica_bubbles (m, n_ranks, sp) : 0;
  if (n_rep > 1)
    {
      printf ("bubble a step over %d replicas (each replica's, as above; their median, least and largest):\n", n_rep);
      for (int r = 0; r < n_ranks; r++)
        if (sp[r].n > 0)
          {
            printf ("  rank %d: median %.1f%%, %.1f%% to %.1f%%", r, 100 * sp[r].median, 100 * sp[r].min,
                    100 * sp[r].max);
            /* which replica idles most, where one does */
            if (sp[r].max > sp[r].min)
              printf (" (largest: dp %d)", sp[r].max_dp);
            putchar ('\n');
          }
    }
  free (sp);

  PpTimelineSlowest *sl = NULL;
  size_t n = pp_timeline_slowest_replicas (m, &sl);
  if (n > 0 && n != SIZE_MAX)
    {
      Pair *pairs = malloc (n * sizeof *pairs);
      size_t nw = 0;
      for (size_t i = 0; pairs != NULL && i < n; i++)
        if (sl[i].rank < 0)
          {
            pairs[nw] = (Pair) { &sl[i], NULL };
            for (size_t j = i + 1; j < n && sl[j].rank >= 0; j++)
              if (pairs[nw].worst == NULL || sl[j].lag_ns > pairs[nw].worst->lag_ns)
                pairs[nw].worst = &sl[j];
            nw++;
          }
      size_t shown = nw;
      if (nw > MAX_STEPS_LISTED)
        {
          /* the steps that lag most, listed in step order */
          qsort (pairs, nw, sizeof *pairs, cmp_lag_desc);
          shown = MAX_STEPS_LISTED;
          qsort (pairs, shown, sizeof *pairs, cmp_step);
        }
      if (nw > 0)
        {
          printf ("slowest replica per step (%s; by: its end after the median end, ms):\n",
                  nw > shown ? "the steps that lag most" : "every step");
          printf ("  %-6s %-11s %-9s %-11s %s\n", "step", "where", "replica", "by", "host");
          for (size_t i = 0; i < shown; i++)
            {
              print_row (m, pairs[i].whole);
              if (pairs[i].worst != NULL)
                print_row (m, pairs[i].worst);
            }
          if (nw > shown)
            printf ("  (%zu of %zu steps)\n", shown, nw);
        }
      free (pairs);
    }
  free (sl);
  pp_timeline_model_free (m);
}
