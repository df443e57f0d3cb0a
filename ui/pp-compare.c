/* pp-compare.c — what differs between two runs: the numbers from the
 * timeline models (the same ones the statistics show), and the table that
 * shows them under the stacked timelines. */
#include "pp-compare.h"

#include <math.h>
#include <string.h>

#include "pp-analysis.h"

#define MAX_ROWS 64

/* ---- the rows ------------------------------------------------------------------- */

/* The one analysis's median step (pp-analysis.h), the figure the
 * Statistics tab shows: not a mean over every step, warm-up included. */
static double
median_step_ns (const PpTimelineModel *m)
{
  PpAnalysisSteps a;
  double ns = pp_timeline_model_step_analysis (m, &a) > 0 ? a.median_step : -1;
  pp_analysis_steps_clear (&a);
  return ns;
}

static PpCompareRow *
add_row (PpCompareRow *rows, size_t max, size_t *n, const char *what)
{
  if (*n >= max)
    return NULL;
  PpCompareRow *r = &rows[(*n)++];
  memset (r, 0, sizeof *r);
  g_strlcpy (r->what, what, sizeof r->what);
  return r;
}

static void
text_row (PpCompareRow *rows, size_t max, size_t *n, const char *what, const char *a, const char *b)
{
  PpCompareRow *r = add_row (rows, max, n, what);
  if (r == NULL)
    return;
  g_strlcpy (r->a, a, sizeof r->a);
  g_strlcpy (r->b, b, sizeof r->b);
  r->differs = strcmp (a, b) != 0;
  g_strlcpy (r->ratio, r->differs ? "differs" : "same", sizeof r->ratio);
}

/* A number each (negative: not known), shown with fmt and scale; the ratio
 * lower over upper where both are known and the upper is not zero. */
static void
number_row (PpCompareRow *rows, size_t max, size_t *n, const char *what, double a, double b,
            const char *fmt, double scale)
{
  PpCompareRow *r = add_row (rows, max, n, what);
  if (r == NULL)
    return;
  if (a >= 0)
    g_snprintf (r->a, sizeof r->a, fmt, a * scale);
  else
    g_strlcpy (r->a, "–", sizeof r->a);
  if (b >= 0)
    g_snprintf (r->b, sizeof r->b, fmt, b * scale);
  else
    g_strlcpy (r->b, "–", sizeof r->b);
  r->differs = strcmp (r->a, r->b) != 0;
  if (a > 0 && b >= 0)
    g_snprintf (r->ratio, sizeof r->ratio, "×%.2f", b / a);
  else
    g_strlcpy (r->ratio, a == 0 && b == 0 ? "same" : "–", sizeof r->ratio);
}

static void
int_text (char *buf, size_t size, int v)
{
  if (v > 0)
    g_snprintf (buf, size, "%d", v);
  else
    g_strlcpy (buf, "–", size);
}

size_t
pp_compare_runs (const PpTimelineModel *a, const PpTimelineModel *b, PpCompareRow *rows, size_t max)
{
  size_t n = 0;
  char x[32], y[32];
  g_return_val_if_fail (a != NULL && b != NULL && (rows != NULL || max == 0), 0);
  const PpTraceDescription *da = pp_timeline_model_description (a), *db = pp_timeline_model_description (b);

  text_row (rows, max, &n, "Schedule", da ? da->schedule : "unknown", db ? db->schedule : "unknown");
  int_text (x, sizeof x, da ? da->n_ranks : pp_timeline_model_n_ranks (a));
  int_text (y, sizeof y, db ? db->n_ranks : pp_timeline_model_n_ranks (b));
  text_row (rows, max, &n, "Ranks (P)", x, y);
  int_text (x, sizeof x, da ? da->n_microbatches : 0);
  int_text (y, sizeof y, db ? db->n_microbatches : 0);
  text_row (rows, max, &n, "Micro-batches (M)", x, y);
  int_text (x, sizeof x, da ? MAX (da->n_virtual, 1) : 0);
  int_text (y, sizeof y, db ? MAX (db->n_virtual, 1) : 0);
  text_row (rows, max, &n, "Stages per rank (V)", x, y);
  number_row (rows, max, &n, "Steps", (double) pp_timeline_model_n_steps (a),
              (double) pp_timeline_model_n_steps (b), "%.0f", 1);
  number_row (rows, max, &n, "Median step", median_step_ns (a), median_step_ns (b), "%.3f ms", 1e-6);

  /* each rank's bubble a step, then their mean; a rank one run lacks is "–" */
  int pa = pp_timeline_model_n_ranks (a), pb = pp_timeline_model_n_ranks (b);
  double *ba = g_new (double, MAX (pa, 1)), *bb = g_new (double, MAX (pb, 1));
  int sa = pp_timeline_model_step_bubbles (a, ba), sb = pp_timeline_model_step_bubbles (b, bb);
  double suma = 0, sumb = 0;
  int na = 0, nb = 0;
  for (int r = 0; r < MAX (pa, pb); r++)
    {
      double va = sa > 0 && r < pa ? ba[r] : -1, vb = sb > 0 && r < pb ? bb[r] : -1;
      char what[48];
      g_snprintf (what, sizeof what, "Bubble a step, rank %d", r);
      number_row (rows, max, &n, what, va, vb, "%.1f %%", 100);
      if (va >= 0)
        {
          suma += va;
          na++;
        }
      if (vb >= 0)
        {
          sumb += vb;
          nb++;
        }
    }
  number_row (rows, max, &n, "Bubble a step, mean", na ? suma / na : -1, nb ? sumb / nb : -1, "%.1f %%", 100);
  g_free (ba);
  g_free (bb);
  return n;
}

/* ---- the table ------------------------------------------------------------------- */

struct _PpCompareResult
{
  size_t       n;
  PpCompareRow rows[MAX_ROWS];
};

PpCompareResult *
pp_compare_table_compute (const PpTimelineModel *a, const PpTimelineModel *b)
{
  if (a == NULL || b == NULL)
    return NULL;
  PpCompareResult *res = g_new (PpCompareResult, 1);
  res->n = pp_compare_runs (a, b, res->rows, MAX_ROWS);
  return res;
}

void
pp_compare_result_free (PpCompareResult *res)
{
  g_free (res);
}

struct _PpCompareTable
{
  GtkWidget        parent_instance;
  GtkWidget       *scroll;
  GtkWidget       *grid;
  PpCompareResult *shown;   /* the rows shown; NULL: none */
};

G_DEFINE_FINAL_TYPE (PpCompareTable, pp_compare_table, GTK_TYPE_WIDGET)

GtkWidget *
pp_compare_table_new (void)
{
  return g_object_new (PP_TYPE_COMPARE_TABLE, NULL);
}

static GtkWidget *
cell (const char *text, gboolean bold, gboolean dim, float xalign)
{
  GtkWidget *l = gtk_label_new (text);   /* text, not markup: names are file names */
  gtk_label_set_xalign (GTK_LABEL (l), xalign);
  gtk_label_set_ellipsize (GTK_LABEL (l), PANGO_ELLIPSIZE_MIDDLE);
  gtk_label_set_max_width_chars (GTK_LABEL (l), 40);
  if (bold)
    gtk_widget_add_css_class (l, "heading");
  if (dim)
    gtk_widget_add_css_class (l, "dim-label");
  return l;
}

/* The grid emptied, and one dim line in it. */
static void
show_line (PpCompareTable *self, const char *text)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (self->grid)))
    gtk_grid_remove (GTK_GRID (self->grid), child);
  g_clear_pointer (&self->shown, pp_compare_result_free);
  if (text != NULL)
    gtk_grid_attach (GTK_GRID (self->grid), cell (text, FALSE, TRUE, 0), 0, 0, 1, 1);
}

void
pp_compare_table_apply (PpCompareTable *self, PpCompareResult *res, const char *name_a, const char *name_b)
{
  g_return_if_fail (PP_IS_COMPARE_TABLE (self));
  if (res == NULL)
    {
      show_line (self, "Select two runs (Ctrl-click) to compare them");
      return;
    }
  show_line (self, NULL);
  self->shown = res;
  gtk_grid_attach (GTK_GRID (self->grid), cell ("", TRUE, FALSE, 0), 0, 0, 1, 1);
  gtk_grid_attach (GTK_GRID (self->grid), cell (name_a ? name_a : "", TRUE, FALSE, 1), 1, 0, 1, 1);
  gtk_grid_attach (GTK_GRID (self->grid), cell (name_b ? name_b : "", TRUE, FALSE, 1), 2, 0, 1, 1);
  gtk_grid_attach (GTK_GRID (self->grid), cell ("lower / upper", TRUE, FALSE, 1), 3, 0, 1, 1);
  for (size_t i = 0; i < res->n; i++)
    {
      const PpCompareRow *r = &res->rows[i];
      int y = (int) i + 1;
      gtk_grid_attach (GTK_GRID (self->grid), cell (r->what, FALSE, !r->differs, 0), 0, y, 1, 1);
      gtk_grid_attach (GTK_GRID (self->grid), cell (r->a, r->differs, !r->differs, 1), 1, y, 1, 1);
      gtk_grid_attach (GTK_GRID (self->grid), cell (r->b, r->differs, !r->differs, 1), 2, y, 1, 1);
      gtk_grid_attach (GTK_GRID (self->grid), cell (r->ratio, r->differs, !r->differs, 1), 3, y, 1, 1);
    }
}

void
pp_compare_table_update (PpCompareTable *self, const PpTimelineModel *a, const char *name_a,
                         const PpTimelineModel *b, const char *name_b)
{
  g_return_if_fail (PP_IS_COMPARE_TABLE (self));
  pp_compare_table_apply (self, pp_compare_table_compute (a, b), name_a, name_b);
}

void
pp_compare_table_show_pending (PpCompareTable *self)
{
  g_return_if_fail (PP_IS_COMPARE_TABLE (self));
  show_line (self, "Comparing the runs…");
}

size_t
pp_compare_table_get_rows (PpCompareTable *self, const PpCompareRow **rows)
{
  g_return_val_if_fail (PP_IS_COMPARE_TABLE (self), 0);
  *rows = self->shown != NULL ? self->shown->rows : NULL;
  return self->shown != NULL ? self->shown->n : 0;
}

static void
pp_compare_table_dispose (GObject *object)
{
  PpCompareTable *self = PP_COMPARE_TABLE (object);
  g_clear_pointer (&self->scroll, gtk_widget_unparent);
  g_clear_pointer (&self->shown, pp_compare_result_free);
  G_OBJECT_CLASS (pp_compare_table_parent_class)->dispose (object);
}

static void
pp_compare_table_class_init (PpCompareTableClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = pp_compare_table_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "pp-compare-table");
}

static void
pp_compare_table_init (PpCompareTable *self)
{
  self->grid = gtk_grid_new ();
  gtk_grid_set_column_spacing (GTK_GRID (self->grid), 24);
  gtk_grid_set_row_spacing (GTK_GRID (self->grid), 4);
  gtk_widget_set_margin_top (self->grid, 6);
  self->scroll = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (self->scroll), self->grid);
  gtk_widget_set_parent (self->scroll, GTK_WIDGET (self));
  pp_compare_table_update (self, NULL, NULL, NULL, NULL);
}
