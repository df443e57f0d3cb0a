/* pp-timeline-render-text.c — text on the timeline: fonts, widths, text
 * shown safely (or into an SVG's text sink), ellipsized lines, times
 * written in a unit.
 */
#include "pp-timeline-render-private.h"

/* ---- text helpers ------------------------------------------------------------------ */

void
font (cairo_t *cr, double size, int bold)
{
  cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL,
                          bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, size);
}

/* Text from a trace (a model, a span's name) may be anything: cairo
 * refuses what is not UTF-8 (and stops drawing), and no picture shows a
 * control character; both become U+FFFD (pp-trace-text.h). */
#define SHOWN_MAX 2048

double
text_w (cairo_t *cr, const char *s)
{
  cairo_text_extents_t e;
  char shown[SHOWN_MAX];
  pp_trace_text_printable (s, shown, sizeof shown);
  cairo_text_extents (cr, shown, &e);
  return e.x_advance;
}

const cairo_user_data_key_t text_sink_key;

/* Shows s at the current point: on the surface, or into the sink. */
void
show_text (cairo_t *cr, const char *s)
{
  TextSink *k = cairo_get_user_data (cr, &text_sink_key);
  double x, y;
  char shown[SHOWN_MAX];
  pp_trace_text_printable (s, shown, sizeof shown);
  s = shown;
  if (k == NULL)
    {
      cairo_show_text (cr, s);
      return;
    }
  if (!cairo_has_current_point (cr))
    return;
  cairo_get_current_point (cr, &x, &y);
  cairo_new_path (cr);
  if (!cairo_in_clip (cr, x, y) || *s == 0)
    return;
  if (k->n == k->cap)
    {
      size_t cap = k->cap ? 2 * k->cap : 256;
      SinkText *n = realloc (k->t, cap * sizeof *n);
      if (n == NULL)
        return;
      k->t = n;
      k->cap = cap;
    }
  SinkText *t = &k->t[k->n];
  cairo_matrix_t fm;
  double dx = 0, dy;
  cairo_get_font_matrix (cr, &fm);
  dy = fm.yy;
  cairo_user_to_device_distance (cr, &dx, &dy);
  cairo_user_to_device (cr, &x, &y);
  t->x = x;
  t->y = y;
  t->size = fabs (dy);
  t->bold = cairo_toy_font_face_get_weight (cairo_get_font_face (cr)) == CAIRO_FONT_WEIGHT_BOLD;
  t->rgba[0] = t->rgba[1] = t->rgba[2] = 0;
  t->rgba[3] = 1;
  cairo_pattern_get_rgba (cairo_get_source (cr), &t->rgba[0], &t->rgba[1], &t->rgba[2], &t->rgba[3]);
  t->s = strdup (s);
  if (t->s != NULL)
    k->n++;
}

/* Text at x (align 0 left, 0.5 center, 1 right), baseline y. */
void
text_at (cairo_t *cr, const char *s, double x, double y, double align)
{
  cairo_move_to (cr, x - align * text_w (cr, s), y);
  show_text (cr, s);
}

const char *
kind_letter (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: return "F";
    case PP_SPAN_B: return "B";
    case PP_SPAN_I: return "I";
    case PP_SPAN_W: return "W";
    case PP_SPAN_OVERLAP_F_B: return "FB";
    case PP_SPAN_OPT: return "OPT";
    case PP_SPAN_LOSS: return "L";
    default: return "";
    }
}

TimeUnit
time_unit (double step_ns, double max_abs_ns)
{
  if (step_ns >= 1e8 || max_abs_ns >= 1e10)
    return (TimeUnit) { "s", 1e9 };
  if (step_ns >= 1e5)
    return (TimeUnit) { "ms", 1e6 };
  if (step_ns >= 1e2)
    return (TimeUnit) { "µs", 1e3 };
  return (TimeUnit) { "ns", 1 };
}

/* The decimals that tell times step_ns apart in unit u. */
int
time_decimals (double step_ns, TimeUnit u)
{
  int dec = (int) ceil (-log10 (step_ns / u.scale) - 1e-9);
  return dec < 0 ? 0 : dec > 6 ? 6 : dec;
}

void
format_time_in (char *buf, size_t n, double ns, double step_ns, TimeUnit u)
{
  snprintf (buf, n, "%.*f %s", time_decimals (step_ns, u), ns / u.scale, u.name);
}

/* "1.5 ms" style: value in ns with a unit chosen for a step of step_ns. */
void
format_time (char *buf, size_t n, double ns, double step_ns)
{
  format_time_in (buf, n, ns, step_ns, time_unit (step_ns, fabs (ns)));
}

/* A 1-2-5 step near raw. */
double
nice_step (double raw)
{
  double p = pow (10, floor (log10 (raw)));
  double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* The longest prefix of s (at most n bytes, cut on a UTF-8 character's
 * start) with "…" after it that is at most max_w wide in cr's font, into
 * buf; "…" alone when nothing fits beside it.  Binary search on the cut. */
static void
ellipsize (cairo_t *cr, const char *s, size_t n, const char *after, double max_w, char *buf, size_t size)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo + 1) / 2, cut = mid;
      while (cut > 0 && ((unsigned char) s[cut] & 0xC0) == 0x80)
        cut--;
      snprintf (buf, size, "%.*s…%s", (int) cut, s, after);
      if (text_w (cr, buf) <= max_w)
        lo = mid;
      else
        hi = mid - 1;
    }
  while (lo > 0 && ((unsigned char) s[lo] & 0xC0) == 0x80)
    lo--;
  snprintf (buf, size, "%.*s…%s", (int) lo, s, after);
}

/* A header line fitted into max_w: as it is when it fits, else with the
 * middle part (the model line, which runs long: a PyTorch job's names its
 * stages) cut short, so that the figures after it stay; else with the
 * middle left out and the rest cut at its end. */
void
fit_line (cairo_t *cr, const char *head, const char *middle, const char *tail, double max_w,
          char *buf, size_t size)
{
  char whole[1280], trial[1280];
  snprintf (buf, size, "%s%s%s", head, middle, tail);
  if (text_w (cr, buf) <= max_w)
    return;
  snprintf (trial, sizeof trial, "%s…%s", head, tail);
  if (middle[0] != '\0' && text_w (cr, trial) <= max_w)
    {
      /* head + "…" + tail fits: the longest cut falls inside middle */
      snprintf (whole, sizeof whole, "%s%s", head, middle);
      ellipsize (cr, whole, strlen (whole), tail, max_w, buf, size);
    }
  else
    {
      /* too narrow even so: the middle gone, the rest cut at its end */
      snprintf (whole, sizeof whole, "%s%s%s", head, middle[0] ? "…" : "", tail);
      ellipsize (cr, whole, strlen (whole), "", max_w, buf, size);
    }
}
