/* bench-fold: a job of replicas at the size users outgrow one machine at
 * (issue 27): 16 pipeline ranks x 128 replicas, 2,048 processes, 3 steps
 * of M = 32, written by pp-synth-mesh (replica 77 a straggler).
 *
 * - panning: the frame the timeline widget draws (pp_timeline_render at
 *   1920x1080), the view a tenth of the run shifted by a hundredth each
 *   frame, folded (16 rows) against unfolded (2,048 rows): the median
 *   frame time and frames a second;
 * - building each view from the model (what a click on "fold" costs);
 * - `pipescope-cli render` of the merged trace, --replicas fold against
 *   all: the median of 3 wall times.
 *
 * Usage: bench-fold PP_SYNTH_MESH PIPESCOPE_CLI */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"
#include "bench-mesh.h"
#include "bench-util.h"

#define P 16
#define D 128
#define N_FRAMES 60
#define N_RENDERS 3

/* The median frame while panning over the run, in ms. */
static double
pan (const PpTimelineModel *m)
{
  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1920, 1080);
  cairo_t *cr = cairo_create (img);
  PpTimelineView v;
  double t[N_FRAMES];
  pp_timeline_view_init (&v, m, 1920, 1080);
  int64_t s = pp_timeline_model_start_ns (m), len = pp_timeline_model_end_ns (m) - s;
  for (int i = 0; i < N_FRAMES; i++)
    {
      v.t0_ns = s + len * i / 100;
      v.t1_ns = v.t0_ns + len / 10;
      double a = bench_now_ms ();
      pp_timeline_render (cr, m, &v);
      cairo_surface_flush (img);
      t[i] = bench_now_ms () - a;
    }
  cairo_destroy (cr);
  cairo_surface_destroy (img);
  return bench_median (t, N_FRAMES);
}

int
main (int argc, char **argv)
{
  if (argc < 3)
    {
      fprintf (stderr, "usage: bench-fold PP_SYNTH_MESH PIPESCOPE_CLI\n");
      return 2;
    }
  char *dir = NULL;
  char *trace = bench_mesh_job (argv[1], argv[2], P, D, 32, 3, "--straggler", "77", &dir);

  PpError err = { 0 };
  double a = bench_now_ms ();
  PpTimelineModel *src = pp_timeline_model_new_from_file (trace, &err);
  if (src == NULL)
    {
      fprintf (stderr, "bench-fold: %s\n", err.msg);
      return 1;
    }
  double t_load = bench_now_ms () - a;
  PpTimelineReplicas fold = { .replica = -1 }, all = { .replica = -1, .all = 1 };
  a = bench_now_ms ();
  PpTimelineModel *vf = pp_timeline_view_new (src, &fold);
  double t_fold = bench_now_ms () - a;
  a = bench_now_ms ();
  PpTimelineModel *va = pp_timeline_view_new (src, &all);
  double t_all = bench_now_ms () - a;
  printf ("bench-fold: %d x %d = %d processes, %zu spans a process x %d; load %.0f ms; building the view: "
          "folded %.1f ms (%d rows), unfolded %.1f ms (%d rows)\n", P, D, P * D,
          pp_timeline_model_n_spans (va, 0), P * D, t_load, t_fold, pp_timeline_model_n_ranks (vf), t_all,
          pp_timeline_model_n_ranks (va));
  double ff = pan (vf), fa = pan (va);
  printf ("bench-fold: panning at 1920x1080 (a tenth of the run, %d frames): folded median %.2f ms a frame "
          "(%.0f frames/s), unfolded %.2f ms (%.0f frames/s): unfolded/folded %.2fx\n", N_FRAMES, ff, 1e3 / ff,
          fa, 1e3 / fa, fa / ff);

  double rf[N_RENDERS], ra[N_RENDERS];
  char *png = g_build_filename (dir, "out.png", NULL);
  for (int i = 0; i < N_RENDERS; i++)
    {
      const char *f[] = { argv[2], "render", trace, "-o", png, "-W", "1920", "-H", "1080", "--replicas", "fold", NULL };
      const char *u[] = { argv[2], "render", trace, "-o", png, "-W", "1920", "-H", "1080", "--replicas", "all", NULL };
      a = bench_now_ms ();
      bench_run (f);
      rf[i] = bench_now_ms () - a;
      a = bench_now_ms ();
      bench_run (u);
      ra[i] = bench_now_ms () - a;
    }
  double mf = bench_median (rf, N_RENDERS), ma = bench_median (ra, N_RENDERS);
  printf ("bench-fold: pipescope-cli render 1920x1080 (median of %d): --replicas fold %.0f ms, all %.0f ms: "
          "all/fold %.2fx\n", N_RENDERS, mf, ma, ma / mf);

  pp_timeline_model_free (vf);
  pp_timeline_model_free (va);
  pp_timeline_model_free (src);
  g_remove (png);
  g_free (png);
  bench_mesh_clear (dir, trace);
  return 0;
}
