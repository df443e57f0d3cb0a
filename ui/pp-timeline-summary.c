/* pp-timeline-summary.c — a rank's work in a window by kind (pp-timeline-summary.h). */
#include "pp-timeline-summary.h"
#include "pp-timeline-model-private.h"

#include <string.h>

void
pp_timeline_summarize (const PpTimelineModel *m, int rank, int64_t t0, int64_t t1,
                       PpTimelineStepSummary *out)
{
  memset (out, 0, sizeof *out);
  if (m == NULL || rank < 0 || rank >= pp_timeline_model_n_ranks (m) || t1 <= t0)
    return;
  out->len_ns = (double) t1 - (double) t0;
  const PpSpan *sp = pp_timeline_model_spans (m, rank);
  size_t n = pp_timeline_model_n_spans (m, rank);
  for (size_t i = pp_timeline_model_first_overlapping (m, rank, t0); i < n && sp[i].start_ns < t1; i++)
    {
      const PpSpan *s = &sp[i];
      if (s->kind >= PP_N_SPAN_KINDS || !pp_span_kind_is_work (s->kind) || s->end_ns <= t0)
        continue;
      if (s->kind == PP_SPAN_KERNEL || s->kind == PP_SPAN_MEMCPY || s->kind == PP_SPAN_MEMSET)
        continue;
      int64_t a = s->start_ns > t0 ? s->start_ns : t0, b = s->end_ns < t1 ? s->end_ns : t1;
      out->busy_ns[s->kind] += (double) (b - a);
      out->busy_total_ns += (double) (b - a);
    }
  if (out->busy_total_ns > out->len_ns)
    {
      /* overlapping spans (a rank's threads): scale down to the window */
      double k = out->len_ns / out->busy_total_ns;
      for (int i = 0; i < PP_N_SPAN_KINDS; i++)
        out->busy_ns[i] *= k;
      out->busy_total_ns = out->len_ns;
    }
}
