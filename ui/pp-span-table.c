/* pp-span-table.c — the Spans tab (pp-span-table.h). */
#include "pp-span-table.h"

#include <adwaita.h>
#include <string.h>

#define HISTOGRAM_BINS 24

/* ---- a line: made when the view shows it ----------------------------------------- */

/* A line is the object of one position, alive while the view holds it.
 * A relist rewrites the live lines in place ("changed") rather than
 * replacing every line: GTK 4.8's list view destroys the widgets of
 * replaced lines and builds new ones (about 400 rows of 8 cells, 0.1–0.2 s
 * each way), where a changed line only sets its cells' text again. */
#define PP_TYPE_SPAN_LINE (pp_span_line_get_type ())
G_DECLARE_FINAL_TYPE (PpSpanLine, pp_span_line, PP, SPAN_LINE, GObject)

#define PP_TYPE_SPAN_LIST (pp_span_list_get_type ())
G_DECLARE_FINAL_TYPE (PpSpanList, pp_span_list, PP, SPAN_LIST, GObject)

struct _PpSpanLine
{
  GObject     parent_instance;
  PpSpanList *list;                   /* whose live lines it is in; NULL once the list goes */
  guint       position;
  char        text[PP_SPAN_N_COLS][48];   /* each column's text */
};

G_DEFINE_FINAL_TYPE (PpSpanLine, pp_span_line, G_TYPE_OBJECT)

enum { LINE_CHANGED, N_LINE_SIGNALS };
static guint line_signals[N_LINE_SIGNALS];

static void pp_span_list_forget (PpSpanList *list, PpSpanLine *line);

static void
pp_span_line_finalize (GObject *object)
{
  PpSpanLine *self = PP_SPAN_LINE (object);
  if (self->list != NULL)
    pp_span_list_forget (self->list, self);
  G_OBJECT_CLASS (pp_span_line_parent_class)->finalize (object);
}

static void
pp_span_line_class_init (PpSpanLineClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = pp_span_line_finalize;
  /* its text was rewritten: another span is at its position now */
  line_signals[LINE_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                             NULL, NULL, G_TYPE_NONE, 0);
}

static void pp_span_line_init (PpSpanLine *self) {}

/* Times in ms to the µs, or, for a run of blocks under a millisecond,
 * in µs to a tenth: a column of one unit, its digits aligned. */
static void
format_time (char *buf, size_t size, int64_t ns, gboolean us)
{
  g_snprintf (buf, size, us ? "%.1f" : "%.3f", (double) ns / (us ? 1e3 : 1e6));
}

/* The line's text for ref (NULL: blank). */
static void
span_line_fill (PpSpanLine *l, const PpTimelineModel *m, const PpSpanRef *ref, gboolean us)
{
  memset (l->text, 0, sizeof l->text);
  if (m == NULL || ref == NULL || ref->row >= pp_timeline_model_n_ranks (m)
      || ref->index >= pp_timeline_model_n_spans (m, ref->row))
    return;   /* the model moved on: blank until listed again */
  const PpSpan *s = &pp_timeline_model_spans (m, ref->row)[ref->index];
  int64_t t0 = pp_timeline_model_start_ns (m);
  if (s->kind == PP_SPAN_OVERLAP_F_B)
    g_strlcpy (l->text[PP_SPAN_COL_KIND], "F+B", sizeof l->text[0]);
  else
    g_strlcpy (l->text[PP_SPAN_COL_KIND], pp_span_kind_name ((PpSpanKind) s->kind), sizeof l->text[0]);
  /* a rank's number; a process of a job of replicas by its row's name
   * ("rank 1 dp 0", "rank 1 ×2" folded) */
  if (pp_timeline_model_is_view (m))
    pp_timeline_model_rank_label (m, ref->row, l->text[PP_SPAN_COL_RANK], sizeof l->text[0]);
  else
    g_snprintf (l->text[PP_SPAN_COL_RANK], sizeof l->text[0], "%d", ref->row);
  if (s->stage >= 0)
    g_snprintf (l->text[PP_SPAN_COL_STAGE], sizeof l->text[0], "%d", s->stage);
  if (s->microbatch >= 0)
    g_snprintf (l->text[PP_SPAN_COL_MICROBATCH], sizeof l->text[0], "%d", s->microbatch);
  g_snprintf (l->text[PP_SPAN_COL_STEP], sizeof l->text[0], "%d", s->step);
  format_time (l->text[PP_SPAN_COL_START], sizeof l->text[0], s->start_ns - t0, us);
  format_time (l->text[PP_SPAN_COL_DURATION], sizeof l->text[0], s->end_ns - s->start_ns, us);
  if (ref->wait_ns >= 0)
    format_time (l->text[PP_SPAN_COL_WAIT], sizeof l->text[0], ref->wait_ns, us);
  else
    g_strlcpy (l->text[PP_SPAN_COL_WAIT], "—", sizeof l->text[0]);
}

/* ---- the list: the rows' references as a GListModel --------------------------------- */

struct _PpSpanList
{
  GObject      parent_instance;
  PpSpanTable *table;   /* borrowed; NULL once the table goes */
  gboolean     empty;   /* between the removal of the old lines and the new */
  GHashTable  *live;    /* position -> its PpSpanLine, not held: the lines alive */
};

static GType
pp_span_list_item_type (GListModel *model)
{
  return PP_TYPE_SPAN_LINE;
}

static guint pp_span_list_n_items (GListModel *model);
static gpointer pp_span_list_item (GListModel *model, guint position);

static void
pp_span_list_model_init (GListModelInterface *iface)
{
  iface->get_item_type = pp_span_list_item_type;
  iface->get_n_items = pp_span_list_n_items;
  iface->get_item = pp_span_list_item;
}

G_DEFINE_FINAL_TYPE_WITH_CODE (PpSpanList, pp_span_list, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (G_TYPE_LIST_MODEL, pp_span_list_model_init))

static void
pp_span_list_forget (PpSpanList *list, PpSpanLine *line)
{
  if (g_hash_table_lookup (list->live, GUINT_TO_POINTER (line->position)) == line)
    g_hash_table_remove (list->live, GUINT_TO_POINTER (line->position));
}

static void
pp_span_list_dispose (GObject *object)
{
  PpSpanList *self = PP_SPAN_LIST (object);
  if (self->live != NULL)
    {
      GHashTableIter it;
      gpointer line;
      g_hash_table_iter_init (&it, self->live);
      while (g_hash_table_iter_next (&it, NULL, &line))
        PP_SPAN_LINE (line)->list = NULL;
      g_clear_pointer (&self->live, g_hash_table_unref);
    }
  G_OBJECT_CLASS (pp_span_list_parent_class)->dispose (object);
}

static void
pp_span_list_class_init (PpSpanListClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = pp_span_list_dispose;
}

static void
pp_span_list_init (PpSpanList *self)
{
  self->live = g_hash_table_new (g_direct_hash, g_direct_equal);
}

/* ---- the table ------------------------------------------------------------------- */

typedef struct {
  PpSpanTable *self;
  PpSpanColumn column;
} Probe;

struct _PpSpanTable
{
  GtkWidget         parent_instance;

  PpTimelineWidget *timeline;          /* a reference */
  PpSpanRows       *rows;
  PpSpanHistogram   histogram;
  PpTimelineFilter  filter;
  gboolean          stale;             /* listed from another model than the drawn one */
  gboolean          order_changed;     /* a header was clicked since: sort again */
  gboolean          reveal;            /* a header or Find asked since: scroll to the selected line */
  /* what the rows were listed from */
  const PpTimelineModel *listed_model, *listed_source;
  size_t            listed_spans;
  int               listed_rows;
  gboolean          syncing;           /* selecting a line from the timeline, or listing */
  gboolean          in_us;             /* times in µs (blocks under a millisecond) */

  PpSpanList       *list;
  GtkSingleSelection *selection;
  GtkColumnView    *view;
  GtkColumnViewColumn *columns[PP_SPAN_N_COLS];
  Probe             probes[PP_SPAN_N_COLS];
  int               probed;            /* the column whose sorter the view asked first */
  GtkLabel         *summary;
  GtkDrawingArea   *histogram_area;
};

G_DEFINE_FINAL_TYPE (PpSpanTable, pp_span_table, GTK_TYPE_WIDGET)

enum { SIGNAL_ROWS_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static PpTimelineModel *
drawn_model (PpSpanTable *self)
{
  return self->timeline ? pp_timeline_widget_get_drawn_model (self->timeline) : NULL;
}

static guint
pp_span_list_n_items (GListModel *model)
{
  PpSpanList *l = PP_SPAN_LIST (model);
  return l->table && !l->empty ? (guint) pp_span_rows_n (l->table->rows) : 0;
}

static gpointer
pp_span_list_item (GListModel *model, guint position)
{
  PpSpanList *l = PP_SPAN_LIST (model);
  const PpSpanRef *ref = l->table && !l->empty ? pp_span_rows_get (l->table->rows, position) : NULL;
  if (ref == NULL || l->live == NULL)
    return NULL;
  PpSpanLine *line = g_hash_table_lookup (l->live, GUINT_TO_POINTER (position));
  if (line != NULL)
    return g_object_ref (line);
  line = g_object_new (PP_TYPE_SPAN_LINE, NULL);
  line->list = l;
  line->position = position;
  span_line_fill (line, drawn_model (l->table), ref, l->table->in_us);
  g_hash_table_insert (l->live, GUINT_TO_POINTER (position), line);
  return line;
}

static int
compare_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return x < y ? -1 : x > y;
}

/* Tells the view that the lines went from old_n to the rows' number.
 * The live lines below the new end are rewritten in place; every other
 * position is told as replaced, in runs between them, and the end as
 * removed or added.  No change removes a line the view holds while adding
 * many (GTK 4.8 then looks for it among every added line, asking for each
 * one's object), and the view keeps its row widgets.  The end is told
 * first, so that the view's count is the model's in every change after. */
static void
pp_span_list_relisted (PpSpanList *l, guint old_n)
{
  guint n = (guint) pp_span_rows_n (l->table->rows);
  PpTimelineModel *m = drawn_model (l->table);
  g_autoptr (GArray) kept = g_array_new (FALSE, FALSE, sizeof (guint));
  GHashTableIter it;
  gpointer key, line;
  g_hash_table_iter_init (&it, l->live);
  while (g_hash_table_iter_next (&it, &key, &line))
    if (GPOINTER_TO_UINT (key) < MIN (n, old_n))
      g_array_append_val (kept, PP_SPAN_LINE (line)->position);
    else
      {
        /* removed, or replaced below: never handed out again, whoever
         * still holds it */
        PP_SPAN_LINE (line)->list = NULL;
        g_hash_table_iter_remove (&it);
      }
  if (kept->len == 0)
    {
      /* none kept: two changes, not one (a line the view held among a
       * million added ones is looked for by asking for each) */
      l->empty = TRUE;
      g_list_model_items_changed (G_LIST_MODEL (l), 0, old_n, 0);
      l->empty = FALSE;
      g_list_model_items_changed (G_LIST_MODEL (l), 0, 0, n);
      return;
    }
  g_array_sort (kept, compare_guint);
  for (guint i = 0; i < kept->len; i++)
    {
      guint at = g_array_index (kept, guint, i);
      PpSpanLine *pl = g_hash_table_lookup (l->live, GUINT_TO_POINTER (at));
      span_line_fill (pl, m, pp_span_rows_get (l->table->rows, at), l->table->in_us);
      g_signal_emit (pl, line_signals[LINE_CHANGED], 0);
    }
  if (n < old_n)
    g_list_model_items_changed (G_LIST_MODEL (l), n, old_n - n, 0);
  else if (n > old_n)
    g_list_model_items_changed (G_LIST_MODEL (l), old_n, 0, n - old_n);
  guint from = 0;
  for (guint i = 0; i <= kept->len; i++)
    {
      guint to = i < kept->len ? g_array_index (kept, guint, i) : MIN (n, old_n);
      if (to > from)
        g_list_model_items_changed (G_LIST_MODEL (l), from, to - from, to - from);
      from = to + 1;
    }
}

static void
update_summary (PpSpanTable *self)
{
  g_autofree char *text = NULL;
  size_t n = pp_span_rows_n (self->rows), all = pp_span_rows_n_blocks (self->rows);
  if (self->filter.active)
    text = g_strdup_printf ("%zu of %zu blocks match Find · times in %s · a click on a line shows the block",
                            n, all, self->in_us ? "µs" : "ms");
  else
    text = g_strdup_printf ("%zu blocks · times in %s · Find filters them · a click on a line shows the block", n,
                            self->in_us ? "µs" : "ms");
  gtk_label_set_text (self->summary, text);
}

static gboolean model_moved (PpSpanTable *self);
static void scroll_to (PpSpanTable *self, guint position);

static void fit_columns (PpSpanTable *self, const PpTimelineModel *m);

/* Lists the drawn model's blocks again, in the order asked, and counts
 * their durations; only sorts them again where the order alone changed
 * (the same lines: the histogram stands). */
static void
relist (PpSpanTable *self)
{
  PpTimelineModel *m = drawn_model (self);
  guint old_n = (guint) pp_span_rows_n (self->rows);
  const PpTimelineFilter *f = self->filter.active ? &self->filter : NULL;
  gboolean moved = model_moved (self);
  if (!(self->order_changed && !moved && pp_span_rows_sort (self->rows, m) == 0))
    {
      if (pp_span_rows_build (self->rows, m, f) != 0
          || pp_span_histogram_compute (&self->histogram, m, f, HISTOGRAM_BINS) != 0)
        g_warning ("pipescope: out of memory listing the spans");
    }
  self->order_changed = FALSE;
  /* the unit: µs where the median block (of the first thousand) is
   * under a millisecond */
  size_t n = MIN (pp_span_rows_n (self->rows), 1000), shorter = 0;
  for (size_t i = 0; i < n; i++)
    {
      const PpSpanRef *r = pp_span_rows_get (self->rows, i);
      const PpSpan *s = &pp_timeline_model_spans (m, r->row)[r->index];
      shorter += s->end_ns - s->start_ns < 1000000;
    }
  gboolean was_us = self->in_us;
  self->in_us = n > 0 && shorter * 2 > n;
  if (moved || self->in_us != was_us)   /* sorted or found again: the same widths */
    fit_columns (self, m);
  self->listed_model = m;
  self->listed_source = self->timeline ? pp_timeline_widget_get_model (self->timeline) : NULL;
  self->listed_spans = m ? pp_timeline_model_n_spans_total (m) : 0;
  self->listed_rows = m ? pp_timeline_model_n_ranks (m) : 0;
  self->stale = FALSE;

  self->syncing = TRUE;
  /* no line selected while the lines change: GTK 4.8's selection would
   * look for its line among every replaced one */
  gtk_single_selection_set_selected (self->selection, GTK_INVALID_LIST_POSITION);
  pp_span_list_relisted (self->list, old_n);
  /* the timeline's selected block keeps its line */
  long at = -1;
  if (self->timeline != NULL && gtk_widget_get_mapped (GTK_WIDGET (self)))
    {
      PpTimelineView v;
      pp_timeline_widget_get_view (self->timeline, &v);
      if (v.selected_rank >= 0)
        at = pp_span_rows_position (self->rows, v.selected_rank, v.selected_index);
    }
  gtk_single_selection_set_selected (self->selection, at >= 0 ? (guint) at : GTK_INVALID_LIST_POSITION);
  /* after a click on a header or a Find: the selected line in view, else
   * the first; new spans of a live run leave the view where it is */
  if (self->reveal && pp_span_rows_n (self->rows) > 0 && gtk_widget_get_mapped (GTK_WIDGET (self)))
    scroll_to (self, at >= 0 ? (guint) at : 0);
  self->reveal = FALSE;
  self->syncing = FALSE;
  update_summary (self);
  gtk_widget_set_size_request (GTK_WIDGET (self->histogram_area), -1,
                               (int) pp_span_histogram_min_height (&self->histogram));
  gtk_widget_queue_draw (GTK_WIDGET (self->histogram_area));
  g_signal_emit (self, signals[SIGNAL_ROWS_CHANGED], 0);
}

static gboolean
model_moved (PpSpanTable *self)
{
  PpTimelineModel *m = drawn_model (self);
  return self->stale || m != self->listed_model
         || (self->timeline && pp_timeline_widget_get_model (self->timeline) != self->listed_source)
         || (m ? pp_timeline_model_n_spans_total (m) : 0) != self->listed_spans
         || (m ? pp_timeline_model_n_ranks (m) : 0) != self->listed_rows;
}

/* Lists again if the model moved on and someone looks. */
static void
refresh (PpSpanTable *self, gboolean needed)
{
  if ((model_moved (self) || self->order_changed)
      && (needed || gtk_widget_get_mapped (GTK_WIDGET (self)) || self->filter.active))
    relist (self);
}

void
pp_span_table_update (PpSpanTable *self)
{
  g_return_if_fail (PP_IS_SPAN_TABLE (self));
  refresh (self, FALSE);
}

/* ---- the columns ---------------------------------------------------------------- */

/* Each column is as wide as the widest text it shows (fit_columns); Kind,
 * the first, takes what the view has over. */
static const struct {
  const char *title;
  gboolean    number;   /* right-aligned, tabular digits */
} column_info[PP_SPAN_N_COLS] = {
  [PP_SPAN_COL_KIND]       = { "Kind", FALSE },
  [PP_SPAN_COL_RANK]       = { "Rank", TRUE },
  [PP_SPAN_COL_STAGE]      = { "Stage", TRUE },
  [PP_SPAN_COL_MICROBATCH] = { "mb", TRUE },
  [PP_SPAN_COL_STEP]       = { "Step", TRUE },
  [PP_SPAN_COL_START]      = { "Start", TRUE },
  [PP_SPAN_COL_DURATION]   = { "Duration", TRUE },
  [PP_SPAN_COL_WAIT]       = { "Idle before", TRUE },
};

/* A cell's and a header's padding, and the header's sort arrow, over the
 * text (Adwaita's data-table: 6 px a side, a 16 px arrow and its gap) */
#define CELL_PAD   16
#define HEADER_PAD 40

static int
text_width (GtkWidget *w, const char *text, gboolean numeric)
{
  PangoLayout *layout = gtk_widget_create_pango_layout (w, text);
  if (numeric)
    {
      PangoAttrList *attrs = pango_attr_list_new ();
      pango_attr_list_insert (attrs, pango_attr_font_features_new ("tnum=1"));
      pango_layout_set_attributes (layout, attrs);
      pango_attr_list_unref (attrs);
    }
  int width = 0;
  pango_layout_get_pixel_size (layout, &width, NULL);
  g_object_unref (layout);
  return width;
}

/* Sizes each column to the widest text it can show for the model's blocks
 * (their kinds and rows, their largest numbers; whatever Find keeps, the
 * same widths) or its header: the cells are inscriptions, which GTK does
 * not measure by their text. */
static void
fit_columns (PpSpanTable *self, const PpTimelineModel *m)
{
  GtkWidget *w = GTK_WIDGET (self->view);
  gboolean kinds[PP_N_SPAN_KINDS] = { FALSE };
  int n_rows = m ? pp_timeline_model_n_ranks (m) : 0;
  int32_t max_stage = 0, max_mb = 0, max_step = 0;
  int64_t max_dur = 0;
  /* a start, or the idle before a block, is within the run */
  int64_t max_start = m ? pp_timeline_model_end_ns (m) - pp_timeline_model_start_ns (m) : 0, max_wait = max_start;
  for (int r = 0; r < n_rows; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      for (size_t i = 0, n = pp_timeline_model_n_spans (m, r); i < n; i++)
        {
          const PpSpan *s = &sp[i];
          if (!pp_span_kind_is_work (s->kind))
            continue;
          if (s->kind < PP_N_SPAN_KINDS)
            kinds[s->kind] = TRUE;
          max_stage = MAX (max_stage, s->stage);
          max_mb = MAX (max_mb, s->microbatch);
          max_step = MAX (max_step, s->step);
          max_dur = MAX (max_dur, s->end_ns - s->start_ns);
        }
    }

  int widest[PP_SPAN_N_COLS] = { 0 };
  char buf[48];
  for (int k = 0; k < PP_N_SPAN_KINDS; k++)
    if (kinds[k])
      widest[PP_SPAN_COL_KIND] = MAX (widest[PP_SPAN_COL_KIND],
                                      text_width (w, k == PP_SPAN_OVERLAP_F_B ? "F+B" : pp_span_kind_name ((PpSpanKind) k),
                                                  FALSE));
  /* the rows' names: only the longest few laid out (thousands of rows) */
  size_t longest = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < n_rows; r++)
      {
        if (pp_timeline_model_is_view (m))
          pp_timeline_model_rank_label (m, r, buf, sizeof buf);
        else
          g_snprintf (buf, sizeof buf, "%d", r);
        size_t len = g_utf8_strlen (buf, -1);
        if (pass == 0)
          longest = MAX (longest, len);
        else if (len + 3 >= longest)
          widest[PP_SPAN_COL_RANK] = MAX (widest[PP_SPAN_COL_RANK], text_width (w, buf, TRUE));
      }
  const struct { PpSpanColumn c; int64_t v; gboolean time; } numbers[] = {
    { PP_SPAN_COL_STAGE, max_stage, FALSE }, { PP_SPAN_COL_MICROBATCH, max_mb, FALSE },
    { PP_SPAN_COL_STEP, max_step, FALSE },   { PP_SPAN_COL_START, max_start, TRUE },
    { PP_SPAN_COL_DURATION, max_dur, TRUE }, { PP_SPAN_COL_WAIT, max_wait, TRUE },
  };
  for (guint i = 0; i < G_N_ELEMENTS (numbers); i++)
    {
      if (numbers[i].time)
        format_time (buf, sizeof buf, numbers[i].v, self->in_us);
      else
        g_snprintf (buf, sizeof buf, "%" G_GINT64_FORMAT, numbers[i].v);
      widest[numbers[i].c] = text_width (w, buf, TRUE);
    }
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    gtk_column_view_column_set_fixed_width (self->columns[c],
                                            MAX (widest[c] + CELL_PAD,
                                                 text_width (w, column_info[c].title, FALSE) + HEADER_PAD));
}

/* A cell is an inscription, not a label: its size is its lines and
 * characters, never its text, so the view measures a few hundred rows of
 * new text after a sort without laying any out (GTK 4.8 measures every
 * row it holds, not only those on screen). */
static void
setup_cell (GtkSignalListItemFactory *f, GtkListItem *item, gpointer data)
{
  PpSpanColumn c = GPOINTER_TO_INT (data);
  GtkWidget *cell = gtk_inscription_new (NULL);
  gtk_inscription_set_xalign (GTK_INSCRIPTION (cell), column_info[c].number ? 1.0f : 0.0f);
  gtk_inscription_set_text_overflow (GTK_INSCRIPTION (cell), GTK_INSCRIPTION_OVERFLOW_ELLIPSIZE_END);
  if (column_info[c].number)
    gtk_widget_add_css_class (cell, "numeric");
  gtk_list_item_set_child (item, cell);
}

static void
on_line_changed (PpSpanLine *line, GtkListItem *item)
{
  PpSpanColumn c = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (item), "pp-span-column"));
  gtk_inscription_set_text (GTK_INSCRIPTION (gtk_list_item_get_child (item)), line->text[c]);
}

static void
bind_cell (GtkSignalListItemFactory *f, GtkListItem *item, gpointer data)
{
  PpSpanLine *line = gtk_list_item_get_item (item);
  g_object_set_data (G_OBJECT (item), "pp-span-column", data);
  if (line == NULL)
    {
      gtk_inscription_set_text (GTK_INSCRIPTION (gtk_list_item_get_child (item)), "");
      return;
    }
  g_signal_connect (line, "changed", G_CALLBACK (on_line_changed), item);
  on_line_changed (line, item);
}

static void
unbind_cell (GtkSignalListItemFactory *f, GtkListItem *item, gpointer data)
{
  PpSpanLine *line = gtk_list_item_get_item (item);
  if (line != NULL)
    g_signal_handlers_disconnect_by_func (line, on_line_changed, item);
}

/* GTK 4.8 does not say which column the view sorts by (4.10's
 * gtk_column_view_sorter_get_primary_sort_column does): its sorter asks
 * the columns' sorters in their order, so each column's sorter notes that
 * it was asked and answers "smaller"; the view's answer says up or down.
 * The sorting itself is ours (pp-span-rows.h): a million rows in a few
 * passes, never a million compare calls on objects. */
static int
probe_compare (gconstpointer a, gconstpointer b, gpointer data)
{
  Probe *p = data;
  if (p->self->probed < 0)
    p->self->probed = (int) p->column;
  return GTK_ORDERING_SMALLER;
}

static void
on_sorter_changed (GtkSorter *sorter, GtkSorterChange change, PpSpanTable *self)
{
  self->probed = -1;
  /* two items (the same one twice is equal without asking) */
  GtkOrdering o = gtk_sorter_compare (sorter, self, self->list);
  PpSpanColumn c = self->probed >= 0 ? (PpSpanColumn) self->probed : PP_SPAN_COL_START;
  pp_span_rows_set_order (self->rows, c, self->probed >= 0 && o == GTK_ORDERING_LARGER);
  self->order_changed = TRUE;
  self->reveal = TRUE;
  refresh (self, FALSE);
}

/* ---- selection, both ways ---------------------------------------------------------- */

/* The step around t: [*t0, *t1) from the step markers; FALSE without. */
static gboolean
step_around (const PpTimelineModel *m, gint64 t, gint64 *t0, gint64 *t1)
{
  size_t n = pp_timeline_model_n_steps (m), lo = 0, hi = n;
  const int64_t *starts = pp_timeline_model_step_starts (m);
  if (n == 0 || t < starts[0])
    return FALSE;
  while (hi - lo > 1)   /* the last start at or before t */
    {
      size_t mid = (lo + hi) / 2;
      if (starts[mid] <= t)
        lo = mid;
      else
        hi = mid;
    }
  *t0 = starts[lo];
  *t1 = lo + 1 < n ? starts[lo + 1] : pp_timeline_model_end_ns (m);
  return *t1 > *t0;
}

void
pp_span_table_reveal (PpTimelineWidget *tl, int row, long index)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (tl));
  PpTimelineModel *m = pp_timeline_widget_get_drawn_model (tl);
  if (m == NULL || row < 0 || row >= pp_timeline_model_n_ranks (m) || index < 0
      || (size_t) index >= pp_timeline_model_n_spans (m, row))
    return;
  const PpSpan *s = &pp_timeline_model_spans (m, row)[index];
  gint64 t0, t1, s0, s1, dur = MAX (s->end_ns - s->start_ns, 1000);
  pp_timeline_widget_get_range (tl, &t0, &t1);
  /* A sliver is under about 3 px of 1000.  In view and readable: the
   * range stays (stepping through matches at a zoom the user chose).
   * Else its step, where it is readable there (the ranks' blocks around
   * it), or twelve times its length around it. */
  gboolean readable = dur * 330 >= t1 - t0 && dur <= (t1 - t0) * 4 / 5;
  if (!(readable && s->start_ns >= t0 && s->end_ns <= t1))
    {
      if (step_around (m, s->start_ns, &s0, &s1) && dur * 330 >= s1 - s0 && s->end_ns <= s1)
        {
          gint64 pad = (s1 - s0) / 50;
          pp_timeline_widget_set_range (tl, s0 - pad, s1 + pad);
        }
      else
        {
          gint64 mid = s->start_ns + (s->end_ns - s->start_ns) / 2;
          pp_timeline_widget_set_range (tl, mid - dur * 6, mid + dur * 6);
        }
    }
  pp_timeline_widget_select (tl, row, index);
}

/* The view scrolls to line position (GTK 4.8 has no
 * gtk_column_view_scroll_to: its list view's action does it). */
static void
scroll_to (PpSpanTable *self, guint position)
{
  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->view)); c; c = gtk_widget_get_next_sibling (c))
    if (GTK_IS_LIST_VIEW (c))
      gtk_widget_activate_action (c, "list.scroll-to-item", "u", position);
}

static void
on_selection_changed (GtkSelectionModel *model, guint position, guint n, PpSpanTable *self)
{
  if (self->syncing || self->timeline == NULL)
    return;
  guint at = gtk_single_selection_get_selected (self->selection);
  const PpSpanRef *ref = pp_span_rows_get (self->rows, at);
  if (ref == NULL)
    return;
  self->syncing = TRUE;
  pp_span_table_reveal (self->timeline, ref->row, ref->index);
  self->syncing = FALSE;
}

/* A block clicked on the timeline: its line, if listed (not while the
 * table is off screen: finding it is a walk over the rows). */
static void
on_span_selected (PpTimelineWidget *tl, int row, glong index, PpSpanTable *self)
{
  if (self->syncing || !gtk_widget_get_mapped (GTK_WIDGET (self)) || model_moved (self))
    return;
  long at = row >= 0 ? pp_span_rows_position (self->rows, row, index) : -1;
  self->syncing = TRUE;
  gtk_single_selection_set_selected (self->selection, at >= 0 ? (guint) at : GTK_INVALID_LIST_POSITION);
  if (at >= 0)
    scroll_to (self, (guint) at);
  self->syncing = FALSE;
}

static void
on_rows_changed (PpTimelineWidget *tl, PpSpanTable *self)
{
  self->stale = TRUE;
  refresh (self, FALSE);
}

void
pp_span_table_set_timeline (PpSpanTable *self, PpTimelineWidget *timeline)
{
  g_return_if_fail (PP_IS_SPAN_TABLE (self));
  if (self->timeline == timeline)
    return;
  if (self->timeline)
    {
      g_signal_handlers_disconnect_by_data (self->timeline, self);
      g_object_unref (self->timeline);
    }
  /* held: the window's template may dispose the timeline first */
  self->timeline = timeline ? g_object_ref (timeline) : NULL;
  if (timeline)
    {
      g_signal_connect (timeline, "span-selected", G_CALLBACK (on_span_selected), self);
      g_signal_connect (timeline, "rows-changed", G_CALLBACK (on_rows_changed), self);
    }
  self->stale = TRUE;
  refresh (self, FALSE);
}

/* ---- what the window asks ----------------------------------------------------------- */

gboolean
pp_span_table_set_filter_text (PpSpanTable *self, const char *text)
{
  PpTimelineFilter f;
  char msg[160];
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), FALSE);
  if (pp_timeline_filter_parse (text, &f, msg, sizeof msg) != 0)
    return FALSE;
  if (memcmp (&f, &self->filter, sizeof f) != 0)
    {
      self->filter = f;
      self->stale = TRUE;
      self->reveal = TRUE;
      refresh (self, FALSE);
    }
  return TRUE;
}

gboolean
pp_span_table_filter_active (PpSpanTable *self)
{
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), FALSE);
  return self->filter.active;
}

guint
pp_span_table_n_rows (PpSpanTable *self)
{
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), 0);
  refresh (self, TRUE);
  return (guint) pp_span_rows_n (self->rows);
}

gboolean
pp_span_table_get_row (PpSpanTable *self, guint position, int *row, long *index)
{
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), FALSE);
  refresh (self, TRUE);
  const PpSpanRef *ref = pp_span_rows_get (self->rows, position);
  if (ref == NULL)
    return FALSE;
  if (row)
    *row = ref->row;
  if (index)
    *index = (long) ref->index;
  return TRUE;
}

long
pp_span_table_position (PpSpanTable *self, int row, long index)
{
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), -1);
  refresh (self, TRUE);
  return pp_span_rows_position (self->rows, row, index);
}

void
pp_span_table_sort (PpSpanTable *self, PpSpanColumn column, gboolean descending)
{
  g_return_if_fail (PP_IS_SPAN_TABLE (self));
  g_return_if_fail (column < PP_SPAN_N_COLS);
  gtk_column_view_sort_by_column (self->view, self->columns[column],
                                  descending ? GTK_SORT_DESCENDING : GTK_SORT_ASCENDING);
}

void
pp_span_table_activate (PpSpanTable *self, guint position)
{
  g_return_if_fail (PP_IS_SPAN_TABLE (self));
  refresh (self, TRUE);
  const PpSpanRef *ref = pp_span_rows_get (self->rows, position);
  if (ref == NULL)
    return;
  self->syncing = TRUE;
  gtk_single_selection_set_selected (self->selection, position);
  scroll_to (self, position);
  self->syncing = FALSE;
  if (self->timeline)
    {
      self->syncing = TRUE;
      pp_span_table_reveal (self->timeline, ref->row, ref->index);
      self->syncing = FALSE;
    }
}

const PpSpanHistogram *
pp_span_table_get_histogram (PpSpanTable *self)
{
  g_return_val_if_fail (PP_IS_SPAN_TABLE (self), NULL);
  refresh (self, TRUE);
  return &self->histogram;
}

/* ---- the widget ------------------------------------------------------------------- */

static void
draw_histogram (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  PpSpanTable *self = data;
  gboolean dark = adw_style_manager_get_dark (adw_style_manager_get_default ());
  pp_span_histogram_draw (cr, &self->histogram, drawn_model (self), width, height, dark);
}

static void
pp_span_table_map (GtkWidget *widget)
{
  GTK_WIDGET_CLASS (pp_span_table_parent_class)->map (widget);
  refresh (PP_SPAN_TABLE (widget), TRUE);
}

static void
pp_span_table_dispose (GObject *object)
{
  PpSpanTable *self = PP_SPAN_TABLE (object);
  /* let go without listing again: what would hear of it is going too */
  if (self->timeline)
    {
      g_signal_handlers_disconnect_by_data (self->timeline, self);
      g_clear_object (&self->timeline);
    }
  /* the view's columns go one by one, each a change of its sorter */
  if (self->view)
    g_signal_handlers_disconnect_by_data (gtk_column_view_get_sorter (self->view), self);
  self->view = NULL;
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);
  /* the list stays whole while the view that shows it goes */
  if (self->list)
    self->list->table = NULL;
  g_clear_object (&self->list);
  G_OBJECT_CLASS (pp_span_table_parent_class)->dispose (object);
}

static void
pp_span_table_finalize (GObject *object)
{
  PpSpanTable *self = PP_SPAN_TABLE (object);
  pp_span_rows_free (self->rows);
  pp_span_histogram_clear (&self->histogram);
  G_OBJECT_CLASS (pp_span_table_parent_class)->finalize (object);
}

static void
pp_span_table_class_init (PpSpanTableClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = pp_span_table_dispose;
  object_class->finalize = pp_span_table_finalize;
  widget_class->map = pp_span_table_map;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  signals[SIGNAL_ROWS_CHANGED] =
    g_signal_new ("rows-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
pp_span_table_init (PpSpanTable *self)
{
  GtkWidget *w = GTK_WIDGET (self);
  gtk_orientable_set_orientation (GTK_ORIENTABLE (gtk_widget_get_layout_manager (w)), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (gtk_widget_get_layout_manager (w)), 6);
  self->rows = pp_span_rows_new ();
  if (self->rows == NULL)
    g_error ("pipescope: out of memory");
  self->list = g_object_new (PP_TYPE_SPAN_LIST, NULL);
  self->list->table = self;
  self->stale = TRUE;

  self->summary = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_xalign (self->summary, 0);
  gtk_widget_add_css_class (GTK_WIDGET (self->summary), "dim-label");
  gtk_widget_set_parent (GTK_WIDGET (self->summary), w);

  GtkWidget *paned = gtk_paned_new (GTK_ORIENTATION_HORIZONTAL);
  gtk_widget_set_vexpand (paned, TRUE);
  gtk_widget_set_parent (paned, w);

  /* the table */
  self->selection = gtk_single_selection_new (G_LIST_MODEL (g_object_ref (self->list)));
  gtk_single_selection_set_autoselect (self->selection, FALSE);
  gtk_single_selection_set_can_unselect (self->selection, TRUE);
  g_signal_connect (self->selection, "selection-changed", G_CALLBACK (on_selection_changed), self);
  self->view = GTK_COLUMN_VIEW (gtk_column_view_new (GTK_SELECTION_MODEL (self->selection)));
  gtk_column_view_set_show_column_separators (self->view, TRUE);
  gtk_widget_add_css_class (GTK_WIDGET (self->view), "data-table");
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    {
      GtkListItemFactory *f = gtk_signal_list_item_factory_new ();
      g_signal_connect (f, "setup", G_CALLBACK (setup_cell), GINT_TO_POINTER (c));
      g_signal_connect (f, "bind", G_CALLBACK (bind_cell), GINT_TO_POINTER (c));
      g_signal_connect (f, "unbind", G_CALLBACK (unbind_cell), GINT_TO_POINTER (c));
      self->columns[c] = gtk_column_view_column_new (column_info[c].title, f);
      gtk_column_view_column_set_resizable (self->columns[c], TRUE);
      gtk_column_view_column_set_expand (self->columns[c], c == PP_SPAN_COL_KIND);
      self->probes[c] = (Probe) { self, (PpSpanColumn) c };
      GtkSorter *s = GTK_SORTER (gtk_custom_sorter_new (probe_compare, &self->probes[c], NULL));
      gtk_column_view_column_set_sorter (self->columns[c], s);
      g_object_unref (s);
      gtk_column_view_append_column (self->view, self->columns[c]);
      g_object_unref (self->columns[c]);   /* the view holds them */
    }
  g_signal_connect (gtk_column_view_get_sorter (self->view), "changed", G_CALLBACK (on_sorter_changed), self);
  GtkWidget *scroll = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroll), GTK_WIDGET (self->view));
  gtk_widget_set_size_request (scroll, 420, 120);
  gtk_paned_set_start_child (GTK_PANED (paned), scroll);
  gtk_paned_set_resize_start_child (GTK_PANED (paned), TRUE);
  gtk_paned_set_shrink_start_child (GTK_PANED (paned), FALSE);

  /* the histogram */
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 4);
  gtk_widget_set_margin_start (box, 8);
  GtkWidget *title = gtk_label_new ("Block durations by kind and rank (log scale; the number of blocks at the right)");
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_wrap (GTK_LABEL (title), TRUE);
  gtk_widget_add_css_class (title, "caption-heading");
  gtk_box_append (GTK_BOX (box), title);
  self->histogram_area = GTK_DRAWING_AREA (gtk_drawing_area_new ());
  gtk_drawing_area_set_draw_func (self->histogram_area, draw_histogram, self, NULL);
  gtk_widget_set_vexpand (GTK_WIDGET (self->histogram_area), TRUE);
  GtkWidget *hscroll = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (hscroll), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (hscroll), GTK_WIDGET (self->histogram_area));
  gtk_widget_set_vexpand (hscroll, TRUE);
  gtk_box_append (GTK_BOX (box), hscroll);
  gtk_widget_set_size_request (box, 300, -1);
  gtk_paned_set_end_child (GTK_PANED (paned), box);
  gtk_paned_set_resize_end_child (GTK_PANED (paned), FALSE);
  gtk_paned_set_shrink_end_child (GTK_PANED (paned), FALSE);

  /* start, up: the order of the timeline */
  gtk_column_view_sort_by_column (self->view, self->columns[PP_SPAN_COL_START], GTK_SORT_ASCENDING);
  fit_columns (self, NULL);
  update_summary (self);
}

GtkWidget *
pp_span_table_new (void)
{
  return g_object_new (PP_TYPE_SPAN_TABLE, NULL);
}
