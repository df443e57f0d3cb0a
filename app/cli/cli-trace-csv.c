/* cli-trace-csv.c — export --format csv: one line a span, with the
 * process that wrote it and its place. */
#include "cli-trace-private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

/* One line a span; start_ns and end_ns count from base (export_base: the
 * run's start, as the Chrome export does, or the epoch). */
int
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
