/* cli-heatmap.h — render --heatmap (cli-heatmap.c). */
#pragma once

/* Draws the stragglers' heatmap of the trace at path into out (its type by
 * extension) over steps step_a..step_b (-1: every analysed step); height
 * <= 0 fits the stages.  0, or 1 (2 for a bad range) with one line said. */
int pp_cli_render_heatmap (const char *path, const char *out, double width, double height, long step_a,
                           long step_b, int dark);
