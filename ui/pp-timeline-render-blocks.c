/* pp-timeline-render-blocks.c — a lane's blocks: collected, drawn as
 * rectangles batched by color, labelled; and the bubble's hatch.
 */
#include "pp-timeline-render-private.h"

int
push_box (Ctx *c, const Box *b)
{
  if (c->n_boxes == c->cap_boxes)
    {
      size_t cap = c->cap_boxes ? 2 * c->cap_boxes : 1024;
      Box *n = realloc (c->boxes, cap * sizeof *n);
      if (n == NULL)
        return -1;
      c->boxes = n;
      c->cap_boxes = cap;
    }
  c->boxes[c->n_boxes++] = *b;
  return 0;
}

/* The label inside a block: "3", or "2F3" for a chunked schedule; a
 * data-parallel one by its action's name, "0UNSHARD" ("U" where narrow). */
static void
block_label (Ctx *c, const Box *b, char *buf, size_t n, int wide)
{
  if (pp_span_kind_is_dp_comm (b->kind))
    {
      static const char *const narrow[] = { "U", "R", "RG", "WRG" };
      const char *name = pp_span_kind_name ((PpSpanKind) b->kind);
      if (wide && b->stage >= 0)
        snprintf (buf, n, "%d%s", b->stage, name);
      else
        snprintf (buf, n, "%s", narrow[b->kind - PP_SPAN_UNSHARD]);
    }
  else if (b->mb < 0)
    snprintf (buf, n, "%s", b->kind == PP_SPAN_OPT ? "opt" : "");
  else if (b->kind == PP_SPAN_LOSS)
    snprintf (buf, n, wide ? "L%d" : "L", b->mb);   /* never read as the micro-batch's F */
  else if (b->kind == PP_SPAN_OVERLAP_F_B && b->sub_kind != 0)
    {
      /* both halves: "2F2+1B0", or "2+0" where narrow */
      if (wide && b->stage >= 0)
        snprintf (buf, n, "%dF%d+%d%s%d", b->stage, b->mb, b->sub_stage, kind_letter (b->sub_kind), b->sub_mb);
      else
        snprintf (buf, n, "%d+%d", b->mb, b->sub_mb);
    }
  else if (c->V > 1 && wide && b->stage >= 0)
    snprintf (buf, n, "%d%s%d", b->stage, kind_letter (b->kind), b->mb);
  else
    snprintf (buf, n, "%d", b->mb);
}

/* The longest of b's labels (block_label, wide then narrow, then an
 * overlapped pair's forward half) that fits b at font size fs, into buf:
 * 1, or 0 with the shortest in buf ("" for a block without one). */
static int
fit_label (Ctx *c, const Box *b, double fs, char *buf, size_t n)
{
  int wide = b->w >= fs * 2.4 + 4;
  block_label (c, b, buf, n, wide);
  if (!buf[0] || fs * LABEL_EM * strlen (buf) + 3 <= b->w)
    return buf[0] != 0;
  if (wide)
    block_label (c, b, buf, n, 0);
  if (fs * LABEL_EM * strlen (buf) + 3 > b->w && b->kind == PP_SPAN_OVERLAP_F_B && b->mb >= 0)
    snprintf (buf, n, "%d", b->mb);   /* an overlapped pair's forward half */
  return fs * LABEL_EM * strlen (buf) + 3 <= b->w;
}

/* Whether box i of the plan lane, past its step's end, lies over a block
 * of the next copy: its label would run into that one's. */
static int
plan_box_covered (const Ctx *c, const Box *b)
{
  for (size_t i = 0; i < c->n_boxes; i++)
    {
      const Box *o = &c->boxes[i];
      if (o->lane == LANE_BLOCK && o->x < b->x + b->w && b->x < o->x + o->w)
        return 1;
    }
  return 0;
}

/* qsort's context: the boxes being sorted (the renderer runs on one
 * thread at a time per Ctx; the widget and the exports never share one) */
static _Thread_local const Ctx *sort_ctx;

static int
cmp_box_x (const void *a, const void *b)
{
  float xa = sort_ctx->boxes[*(const size_t *) a].x, xb = sort_ctx->boxes[*(const size_t *) b].x;
  return xa < xb ? -1 : xa > xb;
}

/* [*x0, *x1) (b's part on the plot) narrowed to its widest stretch that
 * no smaller box starting inside b covers: such a box is drawn over b (a
 * data-parallel collective nested in a block).  0 where nothing is left. */
static int
visible_part (const Ctx *c, const size_t *by_x, size_t n, const Box *b, double *x0, double *x1)
{
  /* the first box starting at or after b */
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (c->boxes[by_x[mid]].x < b->x)
        lo = mid + 1;
      else
        hi = mid;
    }
  double best0 = 0, best1 = 0, at = *x0;
  for (size_t k = lo; k < n; k++)
    {
      const Box *o = &c->boxes[by_x[k]];
      if (o->x >= b->x + b->w || o->x >= *x1)
        break;
      if (o == b || o->w >= b->w)
        continue;
      if (o->x > at && o->x - at > best1 - best0)
        best0 = at, best1 = o->x;
      at = fmax (at, (double) o->x + o->w);
    }
  if (*x1 > at && *x1 - at > best1 - best0)
    best0 = at, best1 = *x1;
  if (best1 <= best0)
    return 0;
  *x0 = best0;
  *x1 = best1;
  return 1;
}

/* Fills the boxes of one lane, batched by color; outlines wide ones.
 * plan: 0 measured, 1 the plan, 2 the plan past its step's end (paler,
 * dashed, labelled where no other block lies under it). */
void
draw_boxes (Ctx *c, cairo_t *cr, int r, int lane, int plan)
{
  double y, h;
  int dark = c->v->dark;
  /* A color is (kind, chunk); at most 32 x 8 of them. */
  uint64_t used[4] = { 0, 0, 0, 0 };

  lane_y (&c->l, r, plan ? 3 : lane, &y, &h);
  y = round (y);
  h = round (y + h) - y;
  if (h < 1)
    h = 1;
  for (size_t i = 0; i < c->n_boxes; i++)
    if (c->boxes[i].lane == lane)
      {
        int key = (c->boxes[i].kind & 31) * 8 + (c->boxes[i].chunk & 7);
        used[key >> 6] |= 1ull << (key & 63);
      }
  for (int key = 0; key < 256; key++)
    {
      if (!(used[key >> 6] >> (key & 63) & 1))
        continue;
      int kind = key / 8, chunk = key % 8, any_wide = 0;
      Rgb col = shade (kind_rgb (kind, dark), chunk);
      for (size_t i = 0; i < c->n_boxes; i++)
        {
          const Box *b = &c->boxes[i];
          if (b->lane != lane || b->kind != kind || b->chunk != chunk)
            continue;
          double xa = round (b->x), xb = round (b->x + b->w);
          if (xb <= xa)
            xb = xa + 1;
          cairo_rectangle (cr, xa, y, xb - xa, h);
          any_wide |= b->w >= (plan ? 2 : 5);
        }
      if (plan)
        {
          /* see-through, but not so pale that a printed page loses it */
          set_rgba (cr, col, plan == 2 ? 0.18 : 0.4);
          cairo_fill (cr);
        }
      else
        {
          set_rgb (cr, col);
          cairo_fill (cr);
        }
      if (!any_wide || h < 4)
        continue;
      /* Outlines tell adjacent blocks of one kind apart. */
      for (size_t i = 0; i < c->n_boxes; i++)
        {
          const Box *b = &c->boxes[i];
          if (b->lane != lane || b->kind != kind || b->chunk != chunk || b->w < (plan ? 2 : 5))
            continue;
          double xa = round (b->x), xb = round (b->x + b->w);
          cairo_rectangle (cr, xa + 0.5, y + 0.5, xb - xa - 1, h - 1);
        }
      if (plan)
        set_rgb (cr, col);
      else
        set_rgb (cr, shade (col, 2));
      cairo_set_line_width (cr, 1);
      if (plan == 2)
        {
          static const double dash[] = { 3, 2 };
          cairo_set_dash (cr, dash, 2, 0);
        }
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }

  /* Micro-batch numbers where they fit. */
  if ((lane != LANE_BLOCK && lane != LANE_PLAN_OVER) || h < 9)
    return;
  /* The lane's size, and smaller (to LABEL_MIN_FS) in a block too narrow
   * for it: a tall lane (an A4 page of few ranks) would otherwise ask 12
   * px of text of blocks that hold 8 px well. */
  double fs = fmin (12, fmax (LABEL_MIN_FS, h * (plan ? 0.7 : 0.45))), cur = fs;
  font (cr, fs, !plan);
  char buf[48];
  /* the lane's boxes by start: a block's label goes where no smaller box
   * drawn over it (an FSDP reduce-scatter or all-gather nested in a B or
   * F) hides it, never half over that box's own label ("2REDUCE_GRAD") */
  size_t n_lane = 0, *by_x = NULL;
  if (!plan)
    {
      by_x = malloc ((c->n_boxes ? c->n_boxes : 1) * sizeof *by_x);
      for (size_t i = 0; by_x != NULL && i < c->n_boxes; i++)
        if (c->boxes[i].lane == lane)
          by_x[n_lane++] = i;
      if (by_x != NULL)
        {
          sort_ctx = c;
          qsort (by_x, n_lane, sizeof *by_x, cmp_box_x);
        }
    }
  for (size_t i = 0; i < c->n_boxes; i++)
    {
      const Box *b0 = &c->boxes[i];
      if (b0->lane != lane || b0->w < LABEL_MIN_FS * LABEL_EM + 3)
        continue;
      Box vis = *b0;
      const Box *b = &vis;
      double x0 = fmax (b0->x, c->l.x0), x1 = fmin (b0->x + b0->w, c->l.x1);
      if (x1 <= x0)
        continue;
      if (by_x != NULL && !visible_part (c, by_x, n_lane, b0, &x0, &x1))
        continue;
      vis.x = (float) x0;
      vis.w = (float) (x1 - x0);
      if (b->w < LABEL_MIN_FS * LABEL_EM + 3)
        continue;
      double f = fs;
      if (!fit_label (c, b, f, buf, sizeof buf))
        {
          if (!buf[0])
            continue;
          f = fmin (fs, (b->w - 3) / (LABEL_EM * strlen (buf)));
          if (f < LABEL_MIN_FS || !fit_label (c, b, f, buf, sizeof buf))
            continue;
        }
      if (f != cur)
        cairo_set_font_size (cr, cur = f);
      if (plan == 2 && plan_box_covered (c, b0))
        continue;
      if (plan && c->v->drawn != NULL)
        c->v->drawn->plan_labels++;
      Rgb col = shade (kind_rgb (b->kind, dark), b->chunk);
      if (plan)
        set_rgb (cr, c->th.fg);
      else
        set_rgb (cr, luminance (col) < 0.5 ? (Rgb) { 1, 1, 1 } : (Rgb) { 0.08, 0.08, 0.08 });
      text_at (cr, buf, (x0 + x1) / 2, y + h / 2 + f * 0.36, 0.5);
    }
  free (by_x);
}

/* The bubble's ground and hatch over a rectangle: on image surfaces (the
 * PNG, the widget's, the pixel tests) an 8 px tile repeated; on SVG and
 * PDF, whose viewers would scale that tile as a bitmap (blurred, seamed
 * where tiles meet), the same diagonals as paths clipped to the rectangle. */
void
fill_hatched (Ctx *c, cairo_t *cr, double x, double y, double w, double h)
{
  if (!(w > 0) || !(h > 0))
    return;
  if (!c->vector)
    {
      cairo_rectangle (cr, x, y, w, h);
      cairo_set_source (cr, c->hatch);
      cairo_fill (cr);
      return;
    }
  cairo_save (cr);
  cairo_rectangle (cr, x, y, w, h);
  cairo_clip_preserve (cr);
  set_rgb (cr, c->th.bubble);
  cairo_fill (cr);
  set_rgba (cr, c->th.hatch, 0.8);
  cairo_set_line_width (cr, 1.2);
  /* the tile's lines are x + y = 8k in user space: the same here, so a
   * vector export lines up with the PNG of the same view */
  for (double k = floor ((x + y) / 8); k <= ceil ((x + w + y + h) / 8); k++)
    {
      cairo_move_to (cr, 8 * k - (y + h), y + h);
      cairo_line_to (cr, 8 * k - y, y);
    }
  cairo_stroke (cr);
  cairo_restore (cr);
}

cairo_pattern_t *
hatch_pattern (const Theme *th)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 8, 8);
  cairo_t *cr = cairo_create (s);
  set_rgb (cr, th->bubble);
  cairo_paint (cr);
  /* strong enough to read as "lost" beside the palest block (I, yellow) */
  set_rgba (cr, th->hatch, 0.8);
  cairo_set_line_width (cr, 1.2);
  cairo_move_to (cr, -1, 9);
  cairo_line_to (cr, 9, -1);
  cairo_move_to (cr, -1, 1);
  cairo_line_to (cr, 1, -1);
  cairo_move_to (cr, 7, 9);
  cairo_line_to (cr, 9, 7);
  cairo_stroke (cr);
  cairo_destroy (cr);
  cairo_pattern_t *p = cairo_pattern_create_for_surface (s);
  cairo_surface_destroy (s);
  cairo_pattern_set_extend (p, CAIRO_EXTEND_REPEAT);
  return p;
}
