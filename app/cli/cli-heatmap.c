/* cli-heatmap.c — render --heatmap: the stage x replica heatmap of a job's
 * stragglers (pp-straggler.h's numbers, ui/pp-heatmap.c's drawing, the
 * app's view's), into PNG, SVG or PDF. */
#include "cli-heatmap.h"
#include "cli-common.h"
#include "cli-output.h"
#include "cli-trace-private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pp-heatmap.h"

int
pp_cli_render_heatmap (const char *path, const char *out, double width, double height, long step_a, long step_b,
                       int dark)
{
  Trace t;
  PpStragglerReport *r = NULL;
  PpError e = { 0 };
  int rc = 1;

  if (trace_load (path, &t) != 0)
    return 1;
  if (analyse_stragglers (&t, &r, &e) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, e.msg);
      goto out;
    }
  if (r == NULL || r->n_steps == 0)
    {
      fprintf (stderr, "pipescope-cli: error: %s: one process a pipeline rank (no replicas): no copies to "
                       "compare a process with; --heatmap needs a job of replicas\n", path);
      goto out;
    }
  int32_t from = step_a >= 0 ? (int32_t) step_a : r->steps[0];
  int32_t to = step_a >= 0 ? (int32_t) step_b : r->steps[r->n_steps - 1];
  size_t nc = (size_t) r->n_pp * (size_t) r->n_dp;
  if (nc > (size_t) PP_STRAGGLER_HEATMAP_MAX_CELLS)
    {
      fprintf (stderr, "pipescope-cli: error: %s: its places make %d stages x %d replicas, more cells than a "
                       "heatmap draws (%ld)\n", path, r->n_pp, r->n_dp, PP_STRAGGLER_HEATMAP_MAX_CELLS);
      goto out;
    }
  double *cell = malloc ((nc + 1) * sizeof *cell);
  if (cell == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }
  int counted = pp_straggler_heatmap (r, from, to, cell, NULL);
  if (counted == 0)
    {
      fprintf (stderr, "pipescope-cli: error: --steps %ld-%ld: no step analysed there; the analysed steps are %d "
                       "to %d\n", step_a, step_b, (int) r->steps[0], (int) r->steps[r->n_steps - 1]);
      free (cell);
      rc = 2;
      goto out;
    }
  char title[160];
  snprintf (title, sizeof title, "slowdown against the median copy: %d stages x %d replicas, %s",
            r->n_pp, r->n_dp, t.has_desc ? t.desc.schedule : "?");
  PpHeatmap h = { .n_rows = r->n_pp, .n_cols = r->n_dp, .cell = cell, .step_from = from, .step_to = to,
                  .n_steps = counted, .title = title, .dark = dark, .selected_row = -1, .selected_col = -1 };
  if (height <= 0)
    height = fmin (4000, fmax (220, 84 + r->n_pp * 40.0));
  PpCliOutput o;
  int err_no = pp_cli_output_open (&o, out, 0644);
  if (err_no != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s\n", out, pp_cli_output_strerror (err_no));
      free (cell);
      goto out;
    }
  if (pp_heatmap_export_as (&h, width, height, o.tmp, out, &e) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s; nothing written\n", e.msg);
      pp_cli_output_discard (&o);
      free (cell);
      goto out;
    }
  free (cell);
  if ((err_no = pp_cli_output_commit (&o)) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s\n", out, pp_cli_output_strerror (err_no));
      goto out;
    }
  rc = 0;
out:
  pp_straggler_report_free (r);
  trace_clear (&t);
  return rc;
}
