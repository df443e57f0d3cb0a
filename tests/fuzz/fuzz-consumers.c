/* fuzz-consumers.c — libFuzzer target: what the app and the CLI do with a
 * trace, fed from the reader: the timeline model, its statistics and step
 * bubbles, the renderer (whole run and the widest view), and suggest (the
 * measured costs from the file, then the ranking where it is one the app
 * runs on its main loop; larger rankings are bounded by
 * PP_SUGGEST_MAX_WORK and covered by test-hostile).  -rss_limit_mb and
 * -timeout make a blow-up or a hang a finding. */
#include <cairo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp-suggest.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char path[64];

static void
suggest_from_file (const uint8_t *data, size_t size)
{
  if (path[0] == '\0')
    snprintf (path, sizeof path, "/tmp/pp-fuzz-%d.pptrace", (int) getpid ());
  FILE *f = fopen (path, "wb");
  if (f == NULL)
    return;
  fwrite (data, 1, size, f);
  fclose (f);

  PpMeasuredCosts c = { 0 };
  PpError err = { 0 };
  if (pp_measured_costs_from_trace (path, &c, &err) == PP_OK)
    {
      if (pp_suggest_work (&c) <= (1 << 14))
        {
          PpSuggestion *out = NULL;
          size_t n = 0;
          if (pp_suggest (&c, 0, &out, &n, &err) == PP_OK)
            free (out);
        }
      (void) pp_suggest_n_too_large (&c);
      pp_measured_costs_clear (&c);
    }
  unlink (path);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_memory (data, size, &err);
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceItem item;

  if (r == NULL || m == NULL)
    {
      pp_trace_reader_free (r);
      pp_timeline_model_free (m);
      return 0;
    }
  while (pp_trace_reader_next (r, &item, &err) == PP_OK && item.type != PP_TRACE_ITEM_END)
    pp_timeline_model_add (m, &item);
  pp_trace_reader_free (r);

  int P = pp_timeline_model_n_ranks (m);
  double *b = calloc ((size_t) (P > 0 ? P : 1), sizeof *b);
  if (b != NULL)
    pp_timeline_model_step_bubbles (m, b);
  free (b);
  for (int k = 0; k < P && k < 64; k++)
    {
      PpTimelineRankStats st;
      pp_timeline_model_rank_stats (m, k, pp_timeline_model_start_ns (m),
                                    pp_timeline_model_end_ns (m), &st);
    }
  (void) pp_timeline_model_n_steps (m);
  (void) pp_timeline_model_losses (m);

  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 240, 120);
  cairo_t *cr = cairo_create (s);
  PpTimelineView v;
  pp_timeline_view_init (&v, m, 240, 120);
  v.show_header = v.show_legend = v.show_plan = 1;
  pp_timeline_render (cr, m, &v);
  PpTimelineHit hit;
  pp_timeline_hit (m, &v, 120, 60, &hit);
  v.t0_ns = INT64_MIN;
  v.t1_ns = INT64_MAX;
  pp_timeline_render (cr, m, &v);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  pp_timeline_model_free (m);

  suggest_from_file (data, size);
  return 0;
}
