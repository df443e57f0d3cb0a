/* The stragglers' heatmap drawing (issue 38, ui/pp-heatmap.c), the one
 * function the app's view and render --heatmap call: each cell's center
 * pixel is its value's color, the hit test finds the cell under a point,
 * a missing cell (NAN) is drawn grey, and the selected cell is outlined. */
#include <cairo.h>
#include <glib.h>
#include <math.h>

#include "pp-heatmap.h"

#define W 640.0
#define H 300.0

static void
pixel (cairo_surface_t *s, int x, int y, double rgb[3])
{
  cairo_surface_flush (s);
  const unsigned char *d = cairo_image_surface_get_data (s);
  int stride = cairo_image_surface_get_stride (s);
  uint32_t v = *(const uint32_t *) (d + y * stride + x * 4);
  rgb[0] = ((v >> 16) & 0xff) / 255.0;
  rgb[1] = ((v >> 8) & 0xff) / 255.0;
  rgb[2] = (v & 0xff) / 255.0;
}

/* The center of cell (r, c): found by the hit test over the drawing. */
static gboolean
center (const PpHeatmap *h, int r, int c, int *cx, int *cy)
{
  int x0 = -1, x1 = -1, y0 = -1, y1 = -1, rr, cc;
  for (int x = 0; x < (int) W; x++)
    if (pp_heatmap_hit (h, W, H, x + 0.5, H / 2, &rr, &cc) && cc == c)
      {
        if (x0 < 0)
          x0 = x;
        x1 = x;
      }
  for (int y = 0; y < (int) H; y++)
    if (pp_heatmap_hit (h, W, H, x0 + 0.5, y + 0.5, &rr, &cc) && rr == r)
      {
        if (y0 < 0)
          y0 = y;
        y1 = y;
      }
  *cx = (x0 + x1) / 2;
  *cy = (y0 + y1) / 2;
  return x0 >= 0 && y0 >= 0;
}

static void
test_cells (void)
{
  double cell[3 * 4] = { 0, 0, 0, 0, 0, 0.1, 0, -0.4, 0, 1.0, 0, NAN };
  PpHeatmap h = { .n_rows = 3, .n_cols = 4, .cell = cell, .step_from = 1, .step_to = 3, .n_steps = 3,
                  .title = "test", .selected_row = -1, .selected_col = -1 };
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_RGB24, (int) W, (int) H);
  cairo_t *cr = cairo_create (s);
  pp_heatmap_draw (cr, &h, W, H);
  int rr, cc;
  g_assert_false (pp_heatmap_hit (&h, W, H, 2, 2, &rr, &cc));
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 4; c++)
      {
        int x, y;
        double got[3], want[3];
        g_assert_true (center (&h, r, c, &x, &y));
        g_assert_true (pp_heatmap_hit (&h, W, H, x, y, &rr, &cc));
        g_assert_cmpint (rr, ==, r);
        g_assert_cmpint (cc, ==, c);
        /* a pixel off the label's glyphs: a little above the center */
        pixel (s, x - 12, y - 6, got);
        pp_heatmap_color (cell[r * 4 + c], 0, want);
        for (int k = 0; k < 3; k++)
          g_assert_cmpfloat_with_epsilon (got[k], want[k], 1.5 / 255);
      }
  /* red for slower, blue for faster, and the slowest the reddest */
  double slow[3], fast[3], even[3];
  pp_heatmap_color (1.0, 0, slow);
  pp_heatmap_color (-0.4, 0, fast);
  pp_heatmap_color (0, 0, even);
  g_assert_cmpfloat (slow[0] - slow[2], >, 0.5);
  g_assert_cmpfloat (fast[2] - fast[0], >, 0.3);
  g_assert_cmpfloat_with_epsilon (even[0], even[2], 1e-9);
  /* the selected cell is outlined in the foreground */
  int x, y;
  g_assert_true (center (&h, 2, 1, &x, &y));
  h.selected_row = 2;
  h.selected_col = 1;
  pp_heatmap_draw (cr, &h, W, H);
  double edge[3] = { 1, 1, 1 };
  int found = 0;
  for (int dx = 0; dx < (int) W / 4 && !found; dx++)
    {
      pixel (s, x + dx, y - 6, edge);
      found = edge[0] < 0.3 && edge[1] < 0.3 && edge[2] < 0.3;
    }
  g_assert_true (found);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/heatmap/cells", test_cells);
  return g_test_run ();
}
