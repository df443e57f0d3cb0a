/* bench-straggler: stragglers across the mesh at 16 pipeline ranks x 128
 * replicas (issue 38), 2,048 processes, 4 steps of M = 32, written by
 * pp-synth-mesh (replica 77's last rank twice as slow).
 *
 * - the analysis the Stragglers tab runs (pp_why_panel_stragglers: every
 *   process's slowdown, cause and replayed saving, the table's numbers)
 *   and the heatmap's cells from it: median of 5, wall and CPU time (on a
 *   shared machine the wall time is mostly other work's);
 * - drawing the heatmap (pp_heatmap_draw, what the tab and render
 *   --heatmap draw) at 1200x600: the median frame and frames a second;
 * - `pipescope-cli info` of the merged trace (its straggler table among
 *   the rest): median of 3 wall times.
 * Target (issue 38): computed in at most 1 s, drawn at 30 frames/s or more.
 *
 * Usage: bench-straggler PP_SYNTH_MESH PIPESCOPE_CLI */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pp-heatmap.h"
#include "pp-panels.h"
#include "pp-straggler.h"
#include "pp-timeline-model.h"
#include "bench-mesh.h"
#include "bench-util.h"

#define P 16
#define D 128
#define N_ANALYSES 5
#define N_FRAMES 60
#define N_INFO 3

/* This process's CPU time (ms): what the analysis costs, whatever else
 * the machine runs. */
static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int
main (int argc, char **argv)
{
  if (argc < 3)
    {
      fprintf (stderr, "usage: bench-straggler PP_SYNTH_MESH PIPESCOPE_CLI\n");
      return 2;
    }
  char *dir = NULL;
  char *trace = bench_mesh_job (argv[1], argv[2], P, D, 32, 4, "--slow-stage", "77", &dir);

  PpError err = { 0 };
  PpTimelineModel *m = pp_timeline_model_new_from_file (trace, &err);
  if (m == NULL)
    {
      fprintf (stderr, "bench-straggler: %s\n", err.msg);
      return 1;
    }
  double t[N_ANALYSES > N_FRAMES ? N_ANALYSES : N_FRAMES], cpu[N_ANALYSES];
  PpStragglerReport *rep = NULL;
  double *cell = g_new (double, P * D);
  int counted = 0;
  for (int i = 0; i < N_ANALYSES; i++)
    {
      pp_straggler_report_free (rep);
      rep = NULL;
      double a = bench_now_ms (), ca = cpu_ms ();
      if (!pp_why_panel_stragglers (m, &rep, &err) || rep->n_pp != P || rep->n_dp != D)
        {
          fprintf (stderr, "bench-straggler: no %d x %d analysis: %s\n", P, D, err.msg);
          return 1;
        }
      counted = pp_straggler_heatmap (rep, rep->steps[0], rep->steps[rep->n_steps - 1], cell, NULL);
      t[i] = bench_now_ms () - a;
      cpu[i] = cpu_ms () - ca;
    }
  const PpStragglerProcess *q = &rep->procs[rep->items[0].proc];
  double ta = bench_median (t, N_ANALYSES);
  printf ("bench-straggler: %d x %d = %zu processes, %d steps analysed of M = 32: the analysis and the heatmap's "
          "cells, median of %d: %.0f ms (target <= 1000 ms; its CPU time %.0f ms); first: process %d (pp %d dp %d), "
          "saving %.1f ms a step, %zu replays\n", P, D, rep->n_procs, counted, N_ANALYSES, ta,
          bench_median (cpu, N_ANALYSES), (int) q->process, q->pp, q->dp,
          rep->items[0].saving_s * 1e3, rep->n_items);

  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 600);
  cairo_t *cr = cairo_create (img);
  PpHeatmap h = { .n_rows = P, .n_cols = D, .cell = cell, .step_from = rep->steps[0],
                  .step_to = rep->steps[rep->n_steps - 1], .n_steps = counted, .title = "bench",
                  .selected_row = -1, .selected_col = -1 };
  for (int i = 0; i < N_FRAMES; i++)
    {
      double a = bench_now_ms ();
      pp_heatmap_draw (cr, &h, 1200, 600);
      cairo_surface_flush (img);
      t[i] = bench_now_ms () - a;
    }
  double tf = bench_median (t, N_FRAMES);
  printf ("bench-straggler: drawing the heatmap at 1200x600 (%d frames): median %.2f ms a frame (%.0f frames/s; "
          "target >= 30)\n", N_FRAMES, tf, 1e3 / tf);
  cairo_destroy (cr);
  cairo_surface_destroy (img);

  double ti[N_INFO];
  for (int i = 0; i < N_INFO; i++)
    {
      const char *info[] = { argv[2], "info", trace, NULL };
      double a = bench_now_ms ();
      bench_run (info);
      ti[i] = bench_now_ms () - a;
    }
  printf ("bench-straggler: pipescope-cli info (its straggler table among the rest), median of %d: %.0f ms\n",
          N_INFO, bench_median (ti, N_INFO));

  pp_straggler_report_free (rep);
  g_free (cell);
  pp_timeline_model_free (m);
  bench_mesh_clear (dir, trace);
  return 0;
}
