/* pp-timeline-render-palette.c — the timeline's colors: a color a span
 * kind for light and dark themes (colorblind-safe), the themes, the shades
 * of a chunk.
 */
#include "pp-timeline-render-private.h"

/* ---- palette ----------------------------------------------------------------- */

/* Okabe & Ito's colorblind-safe set, chosen so that every two colors of the
 * block lane, the bubble and a wait stay apart (CIELAB distance 15 or
 * more) for normal vision and simulated protanopia, deuteranopia and
 * tritanopia (tests/test-render.c holds it there).  Vermillion is kept for
 * what is lost (waits, the bubble's hatch), so the eye finds it first; I is
 * yellow, not the orange that read as a second vermillion beside it; the
 * bubble's ground is neutral, so that it never passes for an I block. */
static const Rgb light_kind[PP_N_SPAN_KINDS] = {
  [PP_SPAN_F]           = HEX (0x0072B2),   /* blue */
  [PP_SPAN_B]           = HEX (0x009E73),   /* bluish green */
  [PP_SPAN_I]           = HEX (0xF0E442),   /* yellow */
  [PP_SPAN_W]           = HEX (0xCC79A7),   /* reddish purple */
  [PP_SPAN_SEND_F]      = HEX (0x56B4E9),   /* sky blue */
  [PP_SPAN_RECV_F]      = HEX (0x56B4E9),
  [PP_SPAN_SEND_B]      = HEX (0x6FCFAE),   /* light green */
  [PP_SPAN_RECV_B]      = HEX (0x6FCFAE),
  [PP_SPAN_OPT]         = HEX (0x4D4D4D),   /* near black */
  [PP_SPAN_WAIT]        = HEX (0xD55E00),   /* vermillion */
  [PP_SPAN_KERNEL]      = HEX (0x333333),
  [PP_SPAN_MEMCPY]      = HEX (0x882255),   /* wine (Tol) */
  [PP_SPAN_MEMSET]      = HEX (0x999999),
  [PP_SPAN_OVERLAP_F_B] = HEX (0x56B4E9),   /* sky blue */
  /* data-parallel communication: violet, the one hue left clear of every
   * kind above for all four visions; deep for the parameters (FSDP's
   * unshard and reshard), light for the gradients' reduction */
  [PP_SPAN_UNSHARD]          = HEX (0x5E00BB),
  [PP_SPAN_RESHARD]          = HEX (0x5E00BB),
  [PP_SPAN_REDUCE_GRAD]      = HEX (0x9933FF),
  [PP_SPAN_WAIT_REDUCE_GRAD] = HEX (0x9933FF),
  /* the host lane's (pp-timeline-host-lane.c; apart from each other, a
   * wait and the lane's descheduled hatch for the four visions) */
  [PP_SPAN_GC]             = HEX (0x332288),   /* indigo (Tol) */
  [PP_SPAN_HOST_SCHEDULE]  = HEX (0x77AADD),   /* light blue (Tol) */
  [PP_SPAN_HOST_LOSS]      = HEX (0x663333),   /* brown */
  [PP_SPAN_HOST_DATA]      = HEX (0xEECC66),   /* sand (Tol) */
  [PP_SPAN_HOST_ZERO_GRAD] = HEX (0xAAAAAA),   /* grey */
  /* the last stage's loss computation: work of its own, saddle brown
   * (the host lane's loss is a darker brown), apart from every block-lane
   * kind, the bubble and a wait */
  [PP_SPAN_LOSS]           = HEX (0x8B4513),
};
static const Rgb dark_kind[PP_N_SPAN_KINDS] = {
  [PP_SPAN_F]           = HEX (0x2E8FD0),
  [PP_SPAN_B]           = HEX (0x14B889),
  [PP_SPAN_I]           = HEX (0xF0E442),
  [PP_SPAN_W]           = HEX (0xDA8CB8),
  [PP_SPAN_SEND_F]      = HEX (0x6CC2F0),
  [PP_SPAN_RECV_F]      = HEX (0x6CC2F0),
  [PP_SPAN_SEND_B]      = HEX (0x7DDBB9),
  [PP_SPAN_RECV_B]      = HEX (0x7DDBB9),
  [PP_SPAN_OPT]         = HEX (0x707070),
  [PP_SPAN_WAIT]        = HEX (0xD55E00),
  [PP_SPAN_KERNEL]      = HEX (0xE0E0E0),
  [PP_SPAN_MEMCPY]      = HEX (0xC0608F),
  [PP_SPAN_MEMSET]      = HEX (0x8C8C8C),
  [PP_SPAN_OVERLAP_F_B] = HEX (0xA6DCF7),
  [PP_SPAN_UNSHARD]          = HEX (0x5A1AE0),
  [PP_SPAN_RESHARD]          = HEX (0x5A1AE0),
  [PP_SPAN_REDUCE_GRAD]      = HEX (0xA050FF),
  [PP_SPAN_WAIT_REDUCE_GRAD] = HEX (0xA050FF),
  [PP_SPAN_GC]             = HEX (0xEECC66),   /* sand: the lane's brightest on dark */
  [PP_SPAN_HOST_SCHEDULE]  = HEX (0x33BBEE),
  [PP_SPAN_HOST_LOSS]      = HEX (0x994455),
  [PP_SPAN_HOST_DATA]      = HEX (0x0077BB),
  [PP_SPAN_HOST_ZERO_GRAD] = HEX (0x332288),
  [PP_SPAN_LOSS]           = HEX (0xA0522D),   /* sienna */
};
static const Rgb light_bubble = HEX (0xCCCCCC), dark_bubble = HEX (0x454545);

void
theme_of (int dark, Theme *t)
{
  static const Theme light = { HEX (0xFFFFFF), HEX (0x1A1A1A), HEX (0x666666), HEX (0xF2F2F2),
                               HEX (0x8A8A8A), HEX (0xCCCCCC), HEX (0xD55E00) };
  static const Theme darkt = { HEX (0x1E1E1E), HEX (0xE8E8E8), HEX (0xA0A0A0), HEX (0x2A2A2A),
                               HEX (0x9A9A9A), HEX (0x454545), HEX (0xF07A2A) };
  *t = dark ? darkt : light;
}

void
pp_timeline_color (int kind, int dark, double rgb[3])
{
  Rgb c;
  if (kind < 0)
    c = dark ? dark_bubble : light_bubble;
  else if (kind < PP_N_SPAN_KINDS)
    c = dark ? dark_kind[kind] : light_kind[kind];
  else
    c = (Rgb) { 0.5, 0.5, 0.5 };
  rgb[0] = c.r;
  rgb[1] = c.g;
  rgb[2] = c.b;
}

void
pp_timeline_host_color (int part, int dark, double rgb[3])
{
  int kind = pp_timeline_host_lane_part_kind (part);
  if (kind < 0)
    pp_timeline_host_lane_descheduled_rgb (dark, rgb);
  else
    pp_timeline_color (kind, dark, rgb);
}

Rgb
kind_rgb (int kind, int dark)
{
  double c[3];
  pp_timeline_color (kind, dark, c);
  return (Rgb) { c[0], c[1], c[2] };
}

/* The local chunk (0, 1, ...) of an interleaved or V schedule: lighter or
 * darker shades of the kind's color. */
Rgb
shade (Rgb c, int chunk)
{
  static const double f[] = { 0, 0.42, -0.32, 0.66, -0.52 };
  double k = f[chunk % (int) (sizeof f / sizeof f[0])];
  if (k > 0)
    return (Rgb) { c.r + (1 - c.r) * k, c.g + (1 - c.g) * k, c.b + (1 - c.b) * k };
  return (Rgb) { c.r * (1 + k), c.g * (1 + k), c.b * (1 + k) };
}

double
luminance (Rgb c)
{
  return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
}

void
set_rgb (cairo_t *cr, Rgb c)
{
  cairo_set_source_rgb (cr, c.r, c.g, c.b);
}

void
set_rgba (cairo_t *cr, Rgb c, double a)
{
  cairo_set_source_rgba (cr, c.r, c.g, c.b, a);
}
