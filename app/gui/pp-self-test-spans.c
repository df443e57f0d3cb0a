/* pp-self-test-spans.c — `pipescope --self-test=spans FILE`: the Spans tab
 * and Find, driven as a person would (tests/test-app.c runs it).
 *
 * The trace opens; the Spans tab lists every block of the timeline; a
 * click on the Duration header sorts them longest first; Find "W" counts
 * the W blocks ("N matches"), Enter goes to the first and the next
 * ("1 of N", "2 of N"), Shift+Enter back and around ("N of N"), each
 * selected on the timeline and in view; a click on a line selects its
 * block; the histogram's bins hold every block it counts.  With
 * PIPESCOPE_SELF_TEST_SHOTS=DIR the window, table and histogram in view,
 * is saved as DIR/spans.png.  One "self-test: ..." line a check.
 */
#include "pp-window-private.h"

#include <stdio.h>
#include <string.h>

static void
say (const char *fmt, ...) G_GNUC_PRINTF (1, 2);
static void
say (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *s = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  printf ("self-test: %s\n", s);
  fflush (stdout);
}

/* The window as it is on screen, to a PNG (what a person would see). */
gboolean
pp_self_test_save_window_png (GtkWidget *w, const char *path)
{
  int width = gtk_widget_get_width (w), height = gtk_widget_get_height (w);
  GskRenderer *r = gtk_native_get_renderer (GTK_NATIVE (w));
  if (width <= 0 || height <= 0 || r == NULL)
    return FALSE;   /* not laid out or not realized yet */
  GdkPaintable *p = gtk_widget_paintable_new (w);
  GtkSnapshot *s = gtk_snapshot_new ();
  gdk_paintable_snapshot (p, s, width, height);
  GskRenderNode *node = gtk_snapshot_free_to_node (s);
  gboolean ok = FALSE;
  if (node != NULL)
    {
      GdkTexture *t = gsk_renderer_render_texture (r, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
      if (t != NULL)
        {
          ok = gdk_texture_save_to_png (t, path);
          g_object_unref (t);
        }
      gsk_render_node_unref (node);
    }
  g_object_unref (p);
  return ok;
}

/* The blocks the words name, counted from the model itself. */
static guint
count_named (PpTimelineModel *m, const char *text)
{
  PpTimelineFilter f;
  char err[160];
  guint n = 0;
  if (pp_timeline_filter_parse (text, &f, err, sizeof err) != 0)
    return 0;
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    for (size_t i = 0; i < pp_timeline_model_n_spans (m, r); i++)
      n += pp_span_rows_match (&f, r, &pp_timeline_model_spans (m, r)[i]) != 0;
  return n;
}

static const PpSpan *
line_span (PpWindow *w, guint position, int *row, long *index)
{
  PpTimelineModel *m = pp_timeline_widget_get_drawn_model (w->timeline[0]);
  if (!pp_span_table_get_row (w->span_table, position, row, index) || m == NULL)
    return NULL;
  return &pp_timeline_model_spans (m, *row)[*index];
}

/* The line the timeline's selected block is; -1 if none. */
static long
selected_line (PpWindow *w)
{
  PpTimelineView v;
  pp_timeline_widget_get_view (w->timeline[0], &v);
  return v.selected_rank < 0 ? -1 : pp_span_table_position (w->span_table, v.selected_rank, v.selected_index);
}

/* Whether line position is the block selected on the timeline, in view. */
static gboolean
shown_on_timeline (PpWindow *w, guint position)
{
  int row;
  long index;
  const PpSpan *s = line_span (w, position, &row, &index);
  PpTimelineView v;
  pp_timeline_widget_get_view (w->timeline[0], &v);
  return s != NULL && v.selected_rank == row && v.selected_index == index && s->start_ns >= v.t0_ns
         && s->end_ns <= v.t1_ns;
}

static gboolean
count_says (PpWindow *w, const char *want, char **why)
{
  const char *got = gtk_label_get_text (w->find_count);
  say ("find count: \"%s\"", got);
  if (!gtk_widget_get_visible (GTK_WIDGET (w->find_count)) || strcmp (got, want) != 0)
    {
      *why = g_strdup_printf ("Find's count reads \"%s\", not \"%s\"", got, want);
      return FALSE;
    }
  return TRUE;
}

/* 0: again later; 1: the next step; 2: done; -1: failed (*why). */
int
pp_self_test_spans (PpWindow *w, int step, char **why)
{
  PpRecording *run = w->shown[0];
  PpTimelineModel *m = run ? pp_timeline_widget_get_drawn_model (w->timeline[0]) : NULL;
  switch (step)
    {
    case 0:   /* opened: the tab lists every block */
      {
        if (m == NULL || pp_timeline_model_n_spans_total (m) == 0)
          return 0;
        AdwViewStack *panels = ADW_VIEW_STACK (gtk_widget_get_ancestor (GTK_WIDGET (w->span_table),
                                                                        ADW_TYPE_VIEW_STACK));
        adw_view_stack_set_visible_child_name (panels, "spans");
        gint64 t0 = g_get_monotonic_time ();
        guint lines = pp_span_table_n_rows (w->span_table), blocks = count_named (m, "");
        say ("spans tab: %u lines, %u blocks on the timeline", lines, blocks);
        /* for a person reading the log; no test reads it */
        printf ("self-test: (listed in %.0f ms)\n", (g_get_monotonic_time () - t0) / 1e3);
        if (lines != blocks || lines == 0)
          {
            *why = g_strdup ("the Spans tab does not list every block of the timeline");
            return -1;
          }
        /* the order of the timeline: by start */
        int row;
        long index;
        for (guint i = 1; i < lines; i++)
          {
            gint64 a = line_span (w, i - 1, &row, &index)->start_ns;
            if (line_span (w, i, &row, &index)->start_ns < a)
              {
                *why = g_strdup_printf ("line %u starts before line %u", i + 1, i);
                return -1;
              }
          }
        /* a click on Duration's header, twice: longest first */
        t0 = g_get_monotonic_time ();
        pp_span_table_sort (w->span_table, PP_SPAN_COL_DURATION, TRUE);
        pp_span_table_n_rows (w->span_table);
        printf ("self-test: (sorted in %.0f ms)\n", (g_get_monotonic_time () - t0) / 1e3);
        gint64 longest = 0;
        for (guint i = 0; i < lines; i++)
          {
            const PpSpan *s = line_span (w, i, &row, &index);
            if (i > 0 && s->end_ns - s->start_ns > longest)
              {
                *why = g_strdup_printf ("sorted by duration, line %u is longer than line %u", i + 1, i);
                return -1;
              }
            longest = s->end_ns - s->start_ns;
          }
        say ("sorted by duration: %u lines, the longest first (%.3f ms)", lines,
             (double) (line_span (w, 0, &row, &index)->end_ns - line_span (w, 0, &row, &index)->start_ns) / 1e6);
        pp_span_table_sort (w->span_table, PP_SPAN_COL_START, FALSE);
        gtk_editable_set_text (GTK_EDITABLE (w->find_entry), "W");
        return 1;
      }

    case 1:   /* Find "W": its count, Enter, Shift+Enter */
      {
        guint want = count_named (m, "W");
        if (!gtk_widget_get_visible (GTK_WIDGET (w->find_count)))
          return 0;   /* the entry's search-changed comes after a pause */
        g_autofree char *matches = g_strdup_printf ("%u matches", want);
        if (want < 3 || !count_says (w, matches, why))
          {
            if (*why == NULL)
              *why = g_strdup ("the trace has fewer than 3 W blocks");
            return -1;
          }
        g_autofree char *first = g_strdup_printf ("1 of %u", want), *second = g_strdup_printf ("2 of %u", want);
        g_autofree char *last = g_strdup_printf ("%u of %u", want, want);
        g_signal_emit_by_name (w->find_entry, "activate");          /* Enter */
        if (!count_says (w, first, why))
          return -1;
        g_signal_emit_by_name (w->find_entry, "activate");
        if (!count_says (w, second, why) || !shown_on_timeline (w, 1))
          {
            if (*why == NULL)
              *why = g_strdup ("Enter did not select and show the second match on the timeline");
            return -1;
          }
        pp_window_find_step (w, -1);                                /* Shift+Enter */
        if (!count_says (w, first, why))
          return -1;
        pp_window_find_step (w, -1);                                /* around, to the last */
        if (!count_says (w, last, why) || !shown_on_timeline (w, want - 1))
          {
            if (*why == NULL)
              *why = g_strdup ("Shift+Enter from the first match did not go to the last");
            return -1;
          }
        /* every line a W, and the histogram holds each once */
        const PpSpanHistogram *h = pp_span_table_get_histogram (w->span_table);
        guint64 binned = 0;
        for (int k = 0; k < h->n_kinds; k++)
          for (int r = 0; r < h->n_rows; r++)
            {
              guint64 sum = 0;
              for (int b = 0; b < h->n_bins; b++)
                sum += h->counts[((size_t) k * h->n_rows + r) * h->n_bins + b];
              if (sum != h->blocks[(size_t) k * h->n_rows + r])
                {
                  *why = g_strdup ("a histogram's bins do not sum to its blocks");
                  return -1;
                }
              binned += sum;
            }
        say ("histogram of W: %d kind(s) x %d rank(s), %" G_GUINT64_FORMAT " blocks in its bins", h->n_kinds,
             h->n_rows, binned);
        if (binned != want || h->n_kinds != 1)
          {
            *why = g_strdup ("the histogram does not count the blocks Find names");
            return -1;
          }
        /* a click on a line */
        pp_span_table_activate (w->span_table, 2);
        g_autofree char *third = g_strdup_printf ("3 of %u", want);
        if (!shown_on_timeline (w, 2) || selected_line (w) != 2)
          {
            *why = g_strdup ("a click on a line did not select its block on the timeline");
            return -1;
          }
        if (!count_says (w, third, why))
          return -1;
        say ("a click on line 3 selects its block on the timeline, in view");
        /* for the picture: the steady state, one block selected */
        gtk_editable_set_text (GTK_EDITABLE (w->find_entry), "step 2-5");
        return 1;
      }

    case 2:   /* the picture */
      {
        guint want = count_named (m, "step 2-5");
        g_autofree char *matches = g_strdup_printf ("%u matches", want);
        if (strcmp (gtk_label_get_text (w->find_count), matches) != 0)
          return 0;
        g_signal_emit_by_name (w->find_entry, "activate");
        g_signal_emit_by_name (w->find_entry, "activate");
        g_signal_emit_by_name (w->find_entry, "activate");
        /* report size (a window without a window manager may outgrow the
         * virtual screen; the picture is the window's own drawing) */
        gtk_window_set_default_size (GTK_WINDOW (w), 1600, 1000);
        gtk_paned_set_position (w->vpaned, 430);
        return 1;
      }

    case 3:
      {
        const char *dir = g_getenv ("PIPESCOPE_SELF_TEST_SHOTS");
        if (dir != NULL && *dir)
          {
            g_autofree char *path = g_build_filename (dir, "spans.png", NULL);
            /* the window takes its new size and renders some ticks after
             * it is asked to (later on a loaded machine): until then the
             * picture cannot be taken, so it is tried again, a few hundred
             * ticks at most, never a clock */
            static int tries;
            if (!pp_self_test_save_window_png (GTK_WIDGET (w), path))
              {
                if (++tries < 300)
                  return 0;
                *why = g_strdup_printf ("could not save %s (%d tries)", path, tries);
                return -1;
              }
            say ("saved %s", path);
          }
        return 2;
      }
    }
  return 2;
}
