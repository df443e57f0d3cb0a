/* pp-timeline-host-lane.c — the host lane of each rank (see the header). */
#include "pp-timeline-host-lane.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-event.h"
#include "pp-timeline-model-private.h"
#include "pp-why-runtime.h"

/* Descheduled is not a span kind: its own ground, chosen with the kinds'
 * colors of the renderer's palette (tests/test-render.c keeps every two
 * parts of the lane apart for the four visions, in both themes). */
static const double desched_light[3] = { 0, 0, 0 }, desched_dark[3] = { 0xAA / 255.0, 0xAA / 255.0, 0xAA / 255.0 };

static const struct { int kind; const char *name; } parts[PP_HOST_N_PARTS] = {
  [PP_HOST_PART_GC]          = { PP_SPAN_GC, "GC pause" },
  [PP_HOST_PART_SCHEDULE]    = { PP_SPAN_HOST_SCHEDULE, "host: schedule code" },
  [PP_HOST_PART_LOSS]        = { PP_SPAN_HOST_LOSS, "host: loss" },
  [PP_HOST_PART_DATA]        = { PP_SPAN_HOST_DATA, "host: data" },
  [PP_HOST_PART_ZERO_GRAD]   = { PP_SPAN_HOST_ZERO_GRAD, "host: zero_grad" },
  [PP_HOST_PART_WAIT]        = { PP_SPAN_WAIT, "waiting" },
  [PP_HOST_PART_DESCHEDULED] = { -1, "descheduled" },
};

const char *
pp_timeline_host_lane_part_name (int part)
{
  return part >= 0 && part < PP_HOST_N_PARTS ? parts[part].name : "";
}

int
pp_timeline_host_lane_part_kind (int part)
{
  return part >= 0 && part < PP_HOST_N_PARTS ? parts[part].kind : -1;
}

void
pp_timeline_host_lane_descheduled_rgb (int dark, double rgb[3])
{
  memcpy (rgb, dark ? desched_dark : desched_light, 3 * sizeof (double));
}

/* The part a span of this kind is drawn as; -1 for none. */
static int
part_of (int kind)
{
  if (kind == PP_SPAN_RECV_F || kind == PP_SPAN_RECV_B)
    return PP_HOST_PART_WAIT;
  for (int p = 0; p < PP_HOST_PART_DESCHEDULED; p++)
    if (parts[p].kind == kind)
      return p;
  return -1;
}

static int
has_delay (const PpTimelineModel *m)
{
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      size_t nd, n;
      pp_timeline_model_row_edge_counters (m, r, &nd, &n);
      if (nd > 1)
        return 1;
    }
  return 0;
}

unsigned
pp_timeline_host_lane_parts_seen (const PpTimelineModel *m)
{
  uint32_t seen = pp_timeline_model_kinds_seen (m);
  unsigned out = 0;

  for (int p = 0; p < PP_HOST_PART_DESCHEDULED; p++)
    if (parts[p].kind >= 0 && parts[p].kind < 32 && (seen & (1u << parts[p].kind)))
      out |= 1u << p;
  if (seen & ((1u << PP_SPAN_RECV_F) | (1u << PP_SPAN_RECV_B)))
    out |= 1u << PP_HOST_PART_WAIT;
  if (has_delay (m))
    out |= 1u << PP_HOST_PART_DESCHEDULED;
  return out;
}

int
pp_timeline_host_lane_present (const PpTimelineModel *m)
{
  uint32_t host = 0;
  for (int k = PP_SPAN_GC; k <= PP_SPAN_HOST_ZERO_GRAD; k++)
    host |= 1u << k;
  return m != NULL && ((pp_timeline_model_kinds_seen (m) & host) || has_delay (m));
}

/* Index past the last of c[n] (one kind, in time order) at or before t. */
static size_t
past_needed (const PpCounter *c, size_t n, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (c[mid].time_ns <= t)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* Index of the first of c[n] that the gaps from t on need: the last at or
 * before t (the counter's value at an edge is its last sample at or
 * before it), or the first when none is. */
static size_t
first_needed (const PpCounter *c, size_t n, int64_t t)
{
  size_t k = past_needed (c, n, t);
  return k > 0 ? k - 1 : 0;
}

/* The gaps of rank r between two of its works, from the first work
 * overlapping t0 on, each with its descheduled time (0 where the trace has
 * no run delay); calls fn until it returns non-zero. */
typedef int (*GapFn) (void *user, int64_t g0, int64_t g1, int64_t desched);

/* t - back, held inside the model's time range (a hostile view's times). */
static int64_t
back_from (int64_t t, int64_t back)
{
  const int64_t lim = (int64_t) 1 << 61;
  if (back < 0)
    back = 0;
  if (back > lim)
    back = lim;
  if (t < -lim)
    t = -lim;
  if (t > lim)
    t = lim;
  return t - back;
}

/* The gaps and their descheduled time are the analysis' (pp_why_runtime_gaps:
 * one reading of the counter), asked for the works the window touches only,
 * with the row's samples those gaps' edges need: the lane is drawn every
 * frame.  Out of memory, no gap is drawn. */
static void
each_gap (const PpTimelineModel *m, int r, int64_t t0, int64_t t1, GapFn fn, void *user)
{
  const PpSpan *sp = pp_timeline_model_spans (m, r);
  size_t n = pp_timeline_model_n_spans (m, r), i0 = pp_timeline_model_first_overlapping (m, r, t0), i1;
  int64_t from = INT64_MAX, to = INT64_MIN;

  /* the works from the first overlapping t0 to the first starting after t1 */
  for (i1 = i0; i1 < n; i1++)
    {
      if (!pp_span_kind_is_work (sp[i1].kind))
        continue;
      if (sp[i1].start_ns < from)
        from = sp[i1].start_ns;
      if (sp[i1].end_ns > to)
        to = sp[i1].end_ns;
      if (sp[i1].start_ns > t1)
        {
          i1++;
          break;
        }
    }
  if (to <= from)
    return;

  size_t nd, nc;
  const PpCounter *c = pp_timeline_model_row_edge_counters (m, r, &nd, &nc);
  static const PpCounter none[1];
  if (c == NULL)
    c = none;   /* nd = nc = 0: no sample, no pointer arithmetic on NULL */
  /* the run delay's samples alone: descheduled, the one counter part the
   * lane draws, comes before every counter part but GC's (a span) */
  (void) nc;
  size_t d0 = first_needed (c, nd, from), d1 = past_needed (c, nd, to);
  size_t nw = d1 - d0;
  PpCounter *w = nw > 0 ? malloc (nw * sizeof *w) : NULL;
  if (nw > 0 && w == NULL)
    return;
  if (nw > 0)
    memcpy (w, c + d0, nw * sizeof *w);

  PpWhyGap *g = NULL;
  size_t ng = 0;
  PpError err;
  if (pp_why_runtime_gaps (sp + i0, i1 - i0, w, nw, r, from, to, &g, &ng, &err) == PP_OK)
    for (size_t k = 0; k < ng; k++)
      {
        int64_t des = (int64_t) llround (g[k].parts[PP_WHY_RT_DESCHEDULED] * 1e9);
        if (fn (user, g[k].start_ns, g[k].end_ns, des))
          break;
      }
  free (g);
  free (w);
}

static void
hatch (cairo_t *cr, const double c[3], int dark, double x, double y, double w, double h)
{
  cairo_save (cr);
  cairo_rectangle (cr, x, y, w, h);
  cairo_clip_preserve (cr);
  cairo_set_source_rgb (cr, c[0], c[1], c[2]);
  cairo_fill (cr);
  /* thin light (dark) diagonals: a shade no span kind has */
  cairo_set_source_rgba (cr, dark ? 0 : 1, dark ? 0 : 1, dark ? 0 : 1, 0.45);
  cairo_set_line_width (cr, 1);
  for (double k = floor (x / 4) * 4 - h; k < x + w; k += 4)
    {
      cairo_move_to (cr, k, y + h);
      cairo_line_to (cr, k + h, y);
    }
  cairo_stroke (cr);
  cairo_restore (cr);
}

void
pp_timeline_host_lane_swatch (cairo_t *cr, int part, const double rgb[3], int dark, double x, double y,
                              double w, double h)
{
  if (part == PP_HOST_PART_DESCHEDULED)
    {
      hatch (cr, rgb, dark, x, y, w, h);
      return;
    }
  cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
  cairo_rectangle (cr, x, y, w, h);
  cairo_fill (cr);
}

static double
x_of (const PpHostLaneScale *sc, int64_t t)
{
  double span = (double) sc->t1_ns - (double) sc->t0_ns;
  return sc->x0 + ((double) t - (double) sc->t0_ns) * (sc->x1 - sc->x0) / (span > 0 ? span : 1);
}

typedef struct {
  cairo_t *cr;
  const PpHostLaneScale *sc;
  double y, h;
} DrawGap;

static int
draw_gap (void *user, int64_t g0, int64_t g1, int64_t des)
{
  DrawGap *g = user;
  if (des <= 0)
    return 0;
  double xa = fmax (x_of (g->sc, g0), g->sc->x0), xb = fmin (x_of (g->sc, g0 + des), g->sc->x1);
  if (xb > xa - 1)
    hatch (g->cr, g->sc->rgb[PP_HOST_PART_DESCHEDULED], g->sc->dark, xa, g->y + g->h * 0.5,
           fmax (1, xb - xa), g->h * 0.5);
  return 0;
}

void
pp_timeline_host_lane_draw (cairo_t *cr, const PpTimelineModel *m, int r, const PpHostLaneScale *sc,
                            double y, double h)
{
  const PpSpan *sp = pp_timeline_model_spans (m, r);
  size_t n = pp_timeline_model_n_spans (m, r);
  /* per part, the right edge drawn so far: a pixel column once */
  double drawn[PP_HOST_N_PARTS];

  if (h < 1)
    return;
  cairo_save (cr);
  cairo_rectangle (cr, sc->x0, y, sc->x1 - sc->x0, h);
  cairo_clip (cr);
  /* waits under host work, GC over both: the order of the passes */
  static const int order[] = { PP_HOST_PART_WAIT, PP_HOST_PART_SCHEDULE, PP_HOST_PART_LOSS,
                               PP_HOST_PART_DATA, PP_HOST_PART_ZERO_GRAD, PP_HOST_PART_GC };
  for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
    {
      int part = order[o];
      cairo_set_source_rgb (cr, sc->rgb[part][0], sc->rgb[part][1], sc->rgb[part][2]);
      drawn[part] = -1e300;
      for (size_t i = pp_timeline_model_first_overlapping (m, r, sc->t0_ns);
           i < n && sp[i].start_ns <= sc->t1_ns; i++)
        {
          if (sp[i].end_ns < sc->t0_ns || part_of (sp[i].kind) != part)
            continue;
          double xa = fmax (x_of (sc, sp[i].start_ns), sc->x0 - 2);
          double xb = fmin (x_of (sc, sp[i].end_ns), sc->x1 + 2);
          if (xb - xa < 1)
            xb = xa + 1;   /* a short pause still shows */
          if (xb <= drawn[part])
            continue;
          xa = fmax (xa, drawn[part]);
          /* another thread's collection: the upper half (it held this
           * thread only where it wanted the interpreter; the tooltip says) */
          cairo_rectangle (cr, xa, y, xb - xa, pp_span_gc_other_thread (&sp[i]) ? h * 0.5 : h);
          drawn[part] = xb;
        }
      cairo_fill (cr);
    }
  DrawGap g = { cr, sc, y, h };
  /* from a view's width back: a gap open at the view's start has its
   * segment at its own start, which may lie before it */
  each_gap (m, r, back_from (sc->t0_ns, sc->t1_ns - sc->t0_ns), sc->t1_ns, draw_gap, &g);
  cairo_restore (cr);
}

/* ---- tooltip ------------------------------------------------------------ */

static void
format_ns (char *buf, size_t n, double ns)
{
  if (ns < 1e3)
    snprintf (buf, n, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf (buf, n, "%.1f µs", ns / 1e3);
  else if (ns < 1e9)
    snprintf (buf, n, "%.1f ms", ns / 1e6);
  else
    snprintf (buf, n, "%.2f s", ns / 1e9);
}

typedef struct {
  int64_t t, tol;
  int64_t g0, g1, des;
  int found;
} FindGap;

static int
find_gap (void *user, int64_t g0, int64_t g1, int64_t des)
{
  FindGap *f = user;
  if (g0 > f->t + f->tol)
    return 1;
  if (des > 0 && f->t >= g0 - f->tol && f->t <= g0 + des + f->tol)
    {
      f->g0 = g0;
      f->g1 = g1;
      f->des = des;
      f->found = 1;
      return 1;
    }
  return 0;
}

char *
pp_timeline_host_lane_describe (const PpTimelineModel *m, int r, int64_t t, int64_t tol, int64_t back_ns,
                                int lower)
{
  char a[32], b[32], buf[256];

  if (m == NULL || r < 0 || r >= pp_timeline_model_n_ranks (m))
    return NULL;
  /* inside the model's time range, so that t ± tol fits (hostile views) */
  t = back_from (t, 0);
  if (tol < 0 || tol > ((int64_t) 1 << 60))
    tol = (int64_t) 1 << 60;
  FindGap fg = { t, tol, 0, 0, 0, 0 };
  each_gap (m, r, back_from (t, back_ns), t + tol, find_gap, &fg);
  if (fg.found && lower)
    {
      format_ns (a, sizeof a, (double) fg.des);
      format_ns (b, sizeof b, (double) (fg.g1 - fg.g0));
      snprintf (buf, sizeof buf,
                "descheduled %s of this %s gap (the run queue's delay across the gap; "
                "where in the gap it fell is not known)", a, b);
      return strdup (buf);
    }

  /* the span under the pointer, the topmost part first (GC over host work
   * over waiting, as drawn) */
  const PpSpan *sp = pp_timeline_model_spans (m, r);
  size_t ns = pp_timeline_model_n_spans (m, r);
  long best = -1;
  int best_rank = 99;
  for (size_t i = pp_timeline_model_first_overlapping (m, r, t - tol); i < ns && sp[i].start_ns <= t + tol; i++)
    {
      int part = part_of (sp[i].kind);
      if (part < 0 || sp[i].end_ns + tol < t)
        continue;
      int rank = part == PP_HOST_PART_GC ? 0 : part == PP_HOST_PART_WAIT ? 2 : 1;
      if (rank < best_rank)
        {
          best = (long) i;
          best_rank = rank;
        }
    }
  if (best >= 0)
    {
      const PpSpan *s = &sp[best];
      int part = part_of (s->kind);
      format_ns (a, sizeof a, (double) (s->end_ns - s->start_ns));
      if (part == PP_HOST_PART_WAIT && s->peer_rank >= 0)
        snprintf (buf, sizeof buf, "waiting %s (for rank %d)", a, s->peer_rank);
      else if (pp_span_gc_other_thread (s))
        snprintf (buf, sizeof buf, "GC pause on thread %u, %s (%s)", (unsigned) (s->stream & PP_GC_THREAD_MASK), a,
                  s->stream & PP_GC_STOPS_WORLD
                    ? "another thread's collection; no GIL: it stopped every thread where it wanted the interpreter"
                    : "another thread's collection: it held this one only where it wanted the interpreter");
      else
        snprintf (buf, sizeof buf, "%s %s", pp_timeline_host_lane_part_name (part), a);
      return strdup (buf);
    }
  if (fg.found)
    {
      format_ns (a, sizeof a, (double) fg.des);
      format_ns (b, sizeof b, (double) (fg.g1 - fg.g0));
      snprintf (buf, sizeof buf, "descheduled %s of this %s gap (where in the gap it fell is not known)",
                a, b);
      return strdup (buf);
    }
  return NULL;
}
