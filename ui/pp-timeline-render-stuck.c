/* pp-timeline-render-stuck.c — where a stuck job is stuck, on the
 * timeline (issue 37, docs/stuck.md): the stuck process's row marked from
 * the moment it stopped (a red hatched, outlined band from its open
 * action's start to now, with what it is in), every other process's open
 * wait drawn up to now (a box of the wait's kind), and an arrow from each
 * waiting row to the row it waits for.  The graph is runtime/pp-stuck.c's
 * (through the model): nothing here decides who waits for whom.  "Now" is
 * the latest time the model knows (pp_timeline_model_now_ns). */
#include "pp-timeline-render-private.h"

#define STUCK_MAX_EDGES 512

static const Rgb stuck_red = HEX (0xd62728);

/* What process i is in, drawn on its row from its start to now: the
 * root's band (marked) or a wait's box. */
static void
draw_open (Ctx *c, cairo_t *cr, const PpTimelineOpen *o, int marked, int64_t now, const char *whom)
{
  const PpTimelineView *v = c->v;
  const PpTimelineLayout *l = &c->l;
  int64_t t0 = o->open.start_ns > 0 ? o->open.start_ns : o->open.time_ns;
  if (o->open.kind < 0)
    {
      /* in no recorded action: stopped when its row's last span ended
       * (the hook's "last ended" can be an earlier action of its own) */
      size_t n = pp_timeline_model_n_spans (c->m, o->row);
      const PpSpan *sp = pp_timeline_model_spans (c->m, o->row);
      for (size_t i = 0; i < n; i++)
        if (sp[i].end_ns > t0 && sp[i].end_ns <= now)
          t0 = sp[i].end_ns;
    }
  if (t0 > v->t1_ns || now < v->t0_ns)
    return;
  double xa = fmax (l->x0, pp_timeline_x_of (v, l, t0));
  double xb = fmin (l->x1, pp_timeline_x_of (v, l, now));
  if (xb - xa < 2)
    xb = xa + 2;
  double top = l->rows_y + o->row * l->row_h, h = l->block_h;
  char words[256];
  char act[96];
  pp_stuck_action_words (&o->open, true, act, sizeof act);
  snprintf (words, sizeof words, "%s%s", act, whom);
  cairo_save (cr);
  if (marked)
    {
      h = l->block_h + l->thin_h;
      set_rgba (cr, stuck_red, 0.16);
      cairo_rectangle (cr, xa, top, xb - xa, h);
      cairo_fill_preserve (cr);
      cairo_save (cr);
      cairo_clip (cr);
      set_rgba (cr, stuck_red, 0.45);
      cairo_set_line_width (cr, 1);
      for (double x = xa - h; x < xb; x += 7)
        {
          cairo_move_to (cr, x, top + h);
          cairo_line_to (cr, x + h, top);
        }
      cairo_stroke (cr);
      cairo_restore (cr);
      set_rgb (cr, stuck_red);
      cairo_set_line_width (cr, 2);
      cairo_rectangle (cr, xa + 1, top + 1, xb - xa - 2, h - 2);
      cairo_stroke (cr);
      snprintf (words, sizeof words, "stuck: %s%s%s", act, o->open.where[0] ? ", in " : "", o->open.where);
      if (c->v->drawn != NULL)
        c->v->drawn->stuck_rows++;
    }
  else
    {
      int kind = o->open.kind;
      set_rgba (cr, kind_rgb (kind, v->dark), 0.55);
      cairo_rectangle (cr, xa, top + h * 0.2, xb - xa, h * 0.6);
      cairo_fill_preserve (cr);
      set_rgb (cr, kind_rgb (kind, v->dark));
      cairo_set_line_width (cr, 1.5);
      cairo_stroke (cr);
      if (c->v->drawn != NULL)
        c->v->drawn->open_waits++;
    }
  double fs = fmin (12, l->block_h * 0.4);
  if (l->block_h >= 12)
    {
      font (cr, fs, marked);
      if (text_w (cr, words) + 8 <= xb - xa)
        {
          set_rgb (cr, marked ? stuck_red : c->th.fg);
          text_at (cr, words, xa + 4, top + fmin (l->block_h * 0.5 + fs * 0.35, l->block_h - 2), 0);
        }
    }
  cairo_restore (cr);
}

/* An arrow from the waiting row to the row it waits for, near the end of
 * the wait (at now), so every wait's arrow reads where the rows stop. */
static void
draw_wait_arrow (Ctx *c, cairo_t *cr, int from_row, int to_row, double x)
{
  const PpTimelineLayout *l = &c->l;
  double y0 = l->rows_y + from_row * l->row_h + l->block_h * 0.5;
  double y1 = l->rows_y + to_row * l->row_h + l->block_h * (to_row > from_row ? 0.1 : 0.9);
  for (int pass = 0; pass < 2; pass++)
    {
      if (pass == 0)
        {
          set_rgb (cr, c->v->dark ? (Rgb) { 0, 0, 0 } : (Rgb) { 1, 1, 1 });
          cairo_set_line_width (cr, 4);
        }
      else
        {
          set_rgb (cr, stuck_red);
          cairo_set_line_width (cr, 1.8);
        }
      cairo_move_to (cr, x, y0);
      cairo_curve_to (cr, x + 14, y0, x + 14, y1, x, y1);
      cairo_stroke (cr);
      double d = y1 > y0 ? -1 : 1;   /* the head points at the row waited for */
      cairo_move_to (cr, x, y1);
      cairo_line_to (cr, x + 8, y1 + d * 2);
      cairo_line_to (cr, x + 3, y1 + d * 8);
      cairo_close_path (cr);
      if (pass == 0)
        cairo_stroke (cr);
      else
        cairo_fill (cr);
    }
  if (c->v->drawn != NULL)
    c->v->drawn->wait_arrows++;
}

void
draw_stuck (Ctx *c, cairo_t *cr)
{
  const PpTimelineModel *m = c->m;
  const PpTimelineView *v = c->v;
  double quiet = v->stuck_live ? pp_timeline_model_stuck_after_s (m) : 0;
  PpStuckVerdict verdict;
  PpStuckEdge *edges = calloc (STUCK_MAX_EDGES, sizeof *edges);
  size_t n_edges = 0, n_opens = pp_timeline_model_opens (m, NULL, 0);
  PpTimelineOpen *opens = calloc (n_opens ? n_opens : 1, sizeof *opens);
  if (edges == NULL || opens == NULL
      || pp_timeline_model_stuck_graph (m, quiet, &verdict, edges, STUCK_MAX_EDGES, &n_edges) == PP_STUCK_NONE)
    goto out;
  if (n_edges > STUCK_MAX_EDGES)
    n_edges = STUCK_MAX_EDGES;
  pp_timeline_model_opens (m, opens, n_opens);
  int64_t now = pp_timeline_model_now_ns (m);
  cairo_save (cr);
  cairo_rectangle (cr, c->l.x0, c->l.rows_y - 2, c->l.x1 - c->l.x0, c->n_ranks * c->l.row_h + 4);
  cairo_clip (cr);
  /* each process's open action: the verdict's (root or cycle) marked,
   * a waiting one's box; a process that neither waits nor is waited for
   * (at work) is left as its blocks show it.  One a row: a folded row
   * holds its replicas, the marked one first, else the first that waits. */
  uint8_t *taken = calloc ((size_t) c->n_ranks + 1, 1);
  for (int pass = 0; pass < 2 && taken != NULL; pass++)
    for (size_t i = 0; i < n_opens; i++)
      {
        const PpTimelineOpen *o = &opens[i];
        if (o->row < 0 || o->row >= c->n_ranks || taken[o->row] || (o->open.flags & PP_TRACE_OPEN_CLOSED))
          continue;
        int named = 0, waits = 0;
        char whom[64] = "";   /* " waits for 2", " waits for 1, 3" */
        for (int k = 0; k < verdict.n; k++)
          named |= verdict.who[k] == o->number;
        for (size_t e = 0, len = 0; e < n_edges; e++)
          if (edges[e].from == o->number && len < sizeof whom)
            len += (size_t) snprintf (whom + len, sizeof whom - len, "%s%d", waits++ ? ", " : " waits for ",
                                      edges[e].to);
        if (pass == 0 ? named : waits)
          {
            draw_open (c, cr, o, named, now, named ? "" : whom);   /* named: a root, or a process of the cycle */
            taken[o->row] = 1;
          }
      }
  free (taken);
  /* the arrows, once a pair of rows (folded replicas share a row) */
  double x = fmin (c->l.x1 - 20, pp_timeline_x_of (v, &c->l, now) - 20);
  for (size_t e = 0; e < n_edges; e++)
    {
      int rf = pp_timeline_model_process_row (m, edges[e].from), rt = pp_timeline_model_process_row (m, edges[e].to);
      if (rf < 0 || rt < 0 || rf == rt || rf >= c->n_ranks || rt >= c->n_ranks)
        continue;
      int again = 0;
      for (size_t k = 0; k < e && !again; k++)
        again = pp_timeline_model_process_row (m, edges[k].from) == rf
                && pp_timeline_model_process_row (m, edges[k].to) == rt;
      if (!again)   /* upwards a little left: a cycle's two arrows apart */
        draw_wait_arrow (c, cr, rf, rt, rt < rf ? x - 18 : x);
    }
  cairo_restore (cr);
out:
  free (edges);
  free (opens);
}
