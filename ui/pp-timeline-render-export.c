/* pp-timeline-render-export.c — the timeline to a file: PNG, SVG (its
 * text kept as text), PDF or PostScript, by the path's extension.
 */
#include "pp-timeline-render-private.h"

/* ---- export ---------------------------------------------------------------------------- */

#define PDF_PT_PER_PX (72.0 / 96.0)

static void
sink_clear (TextSink *k)
{
  for (size_t i = 0; i < k->n; i++)
    free (k->t[i].s);
  free (k->t);
  memset (k, 0, sizeof *k);
}

static void
xml_escaped (FILE *f, const char *s)
{
  for (; *s; s++)
    switch (*s)
      {
      case '<': fputs ("&lt;", f); break;
      case '>': fputs ("&gt;", f); break;
      case '&': fputs ("&amp;", f); break;
      case '"': fputs ("&quot;", f); break;
      default: fputc (*s, f); break;
      }
}

/* Writes the sink's text into the finished SVG at path, before its
 * closing tag: <text> a label, in the renderer's font, size and color. */
static PpStatus
svg_add_text (const char *path, const TextSink *k, PpError *err)
{
  FILE *f = fopen (path, "rb");
  char *data = NULL;
  long len;
  if (f == NULL || fseek (f, 0, SEEK_END) != 0 || (len = ftell (f)) < 0 || fseek (f, 0, SEEK_SET) != 0
      || (data = malloc ((size_t) len + 1)) == NULL || fread (data, 1, (size_t) len, f) != (size_t) len)
    {
      if (f)
        fclose (f);
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cannot read back: %s", path, strerror (errno));
    }
  fclose (f);
  data[len] = 0;
  char *end = NULL;
  for (char *p = strstr (data, "</svg>"); p; p = strstr (p + 1, "</svg>"))
    end = p;
  if (end == NULL)
    {
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cairo wrote no closing </svg>", path);
    }
  f = fopen (path, "wb");
  if (f == NULL)
    {
      free (data);
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", path, strerror (errno));
    }
  fwrite (data, 1, (size_t) (end - data), f);
  fputs ("<g font-family=\"DejaVu Sans, Verdana, sans-serif\">\n", f);
  for (size_t i = 0; i < k->n; i++)
    {
      const SinkText *t = &k->t[i];
      fprintf (f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.2f\"%s fill=\"#%02x%02x%02x\"",
               t->x, t->y, t->size, t->bold ? " font-weight=\"bold\"" : "",
               (int) lround (fmin (1, fmax (0, t->rgba[0])) * 255),
               (int) lround (fmin (1, fmax (0, t->rgba[1])) * 255),
               (int) lround (fmin (1, fmax (0, t->rgba[2])) * 255));
      if (t->rgba[3] < 1)
        fprintf (f, " fill-opacity=\"%.2f\"", t->rgba[3]);
      fputs (" xml:space=\"preserve\">", f);
      xml_escaped (f, t->s);
      fputs ("</text>\n", f);
    }
  fputs ("</g>\n", f);
  fputs (end, f);
  free (data);
  if (fclose (f) != 0)
    return pp_error_set (err, PP_EIO, "%s: cannot write: %s", path, strerror (errno));
  return PP_OK;
}

/* cairo's file output does not see a failed flush at its close (a full
 * disk under a small PDF): the image goes through this stream, whose every
 * write and whose close are checked. */
static cairo_status_t
export_write (void *closure, const unsigned char *data, unsigned int length)
{
  FILE *f = closure;
  return fwrite (data, 1, length, f) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

PpStatus
pp_timeline_export (const PpTimelineModel *m, const PpTimelineView *v, const char *path,
                    PpError *err)
{
  return pp_timeline_export_as (m, v, path, path, err);
}

typedef struct {
  const PpTimelineModel *m;
  const PpTimelineView  *v;
} TimelineDraw;

static void
draw_timeline (cairo_t *cr, const void *data)
{
  const TimelineDraw *d = data;
  pp_timeline_render (cr, d->m, d->v);
}

PpStatus
pp_timeline_export_as (const PpTimelineModel *m, const PpTimelineView *v, const char *path,
                       const char *name, PpError *err)
{
  PpTimelineView view;

  if (m == NULL || v == NULL || path == NULL || name == NULL)
    return pp_error_set (err, PP_EINVAL, "nothing to export");
  view = *v;
  view.show_header = 1;
  view.show_legend = 1;
  TimelineDraw d = { m, &view };
  return pp_render_export_as (path, name, view.width, view.height, draw_timeline, &d, err);
}

PpStatus
pp_render_export_as (const char *path, const char *name, double width, double height,
                     PpRenderDrawFn draw, const void *data, PpError *err)
{
  const char *dot;
  cairo_surface_t *s;
  cairo_status_t cs;
  cairo_t *cr;
  int kind;   /* 0 png, 1 svg, 2 pdf */
  TextSink sink = { 0 };
  FILE *f;

  if (path == NULL || name == NULL || draw == NULL)
    return pp_error_set (err, PP_EINVAL, "nothing to export");
  if (width < 1 || height < 1 || width > 32767 || height > 32767)
    return pp_error_set (err, PP_EINVAL, "%s: size %.0fx%.0f is out of range (1 to 32767 px)",
                         name, width, height);
  dot = strrchr (name, '.');
  if (dot != NULL && strcasecmp (dot, ".png") == 0)
    kind = 0;
  else if (dot != NULL && strcasecmp (dot, ".svg") == 0)
    kind = 1;
  else if (dot != NULL && strcasecmp (dot, ".pdf") == 0)
    kind = 2;
  else
    return pp_error_set (err, PP_EINVAL, "%s: unknown image type; name the file .png, .svg or .pdf",
                         name);

  /* opened here, not by cairo, which says only "error while writing to
   * output stream": the system's reason (no such folder, no permission) */
  if ((f = fopen (path, "wb")) == NULL)
    return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, strerror (errno));
  if (kind == 0)
    s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int) ceil (width),
                                    (int) ceil (height));
  else if (kind == 1)
    {
      s = cairo_svg_surface_create_for_stream (export_write, f, width, height);
      /* a 1920-wide export is 1920 px wide, not 1920 pt (2560 px) */
      cairo_svg_surface_set_document_unit (s, CAIRO_SVG_UNIT_PX);
    }
  else
    /* the pixel size at 96 dpi (CSS's px): a 1123 x 794 drawing is an A4
     * page, not 1123 pt wide */
    s = cairo_pdf_surface_create_for_stream (export_write, f, width * PDF_PT_PER_PX,
                                             height * PDF_PT_PER_PX);
  cs = cairo_surface_status (s);
  if (cs != CAIRO_STATUS_SUCCESS)
    {
      cairo_surface_destroy (s);
      fclose (f);
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, cairo_status_to_string (cs));
    }
  cr = cairo_create (s);
  if (kind == 1)
    cairo_set_user_data (cr, &text_sink_key, &sink, NULL);
  if (kind == 2)
    cairo_scale (cr, PDF_PT_PER_PX, PDF_PT_PER_PX);
  draw (cr, data);
  cs = cairo_status (cr);
  cairo_destroy (cr);
  if (cs == CAIRO_STATUS_SUCCESS && kind == 0)
    cs = cairo_surface_write_to_png_stream (s, export_write, f);
  cairo_surface_finish (s);
  if (cs == CAIRO_STATUS_SUCCESS)
    cs = cairo_surface_status (s);
  cairo_surface_destroy (s);
  int e = (fflush (f) != 0 || ferror (f)) ? errno : 0;
  if (fclose (f) != 0 && e == 0)
    e = errno;
  if (cs != CAIRO_STATUS_SUCCESS || e != 0)
    {
      sink_clear (&sink);
      if (cs == CAIRO_STATUS_WRITE_ERROR || cs == CAIRO_STATUS_SUCCESS)
        return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, strerror (e ? e : EIO));
      return pp_error_set (err, PP_EIO, "%s: cannot write: %s", name, cairo_status_to_string (cs));
    }
  if (kind == 1)
    {
      PpStatus st = svg_add_text (path, &sink, err);
      sink_clear (&sink);
      return st;
    }
  return PP_OK;
}
