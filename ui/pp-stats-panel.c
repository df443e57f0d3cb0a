/* pp-stats-panel.c — per-rank statistics of a run as a grid of labels.
 *
 * A summary line (the median step over the steps the one analysis counts,
 * samples/s when the batch is known, dropped events) over one row per rank:
 * the measured bubble a step, the bubble of the trace's plan (named by
 * which plan it is), the closed form (P-1)/(M+P-1) for GPipe and 1F1B,
 * peak in-flight micro-batches and peak activation memory; for a job of
 * replicas, each rank's bubble a step over them (median, least to largest,
 * the replica that idles most), as info prints it.  The numbers come from
 * pp_stats_numbers (no widget: a test reads the same); labels are reused
 * while the number of ranks stays the same.  compute (the numbers and the
 * texts, no GTK: the app runs it on a worker over a snapshot of the
 * model) is apart from apply (the labels, on the main loop).
 */
#include "pp-panels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-timeline-fold.h"

#define N_COLUMNS 7
#define PLAN_COLUMN 2
#define SPREAD_COLUMN 6   /* shown for a job of replicas only */

struct _PpStatsPanel
{
  GtkWidget  parent_instance;

  GtkWidget *box;
  GtkWidget *summary;        /* GtkLabel */
  GtkWidget *grid;
  GtkWidget *more;           /* GtkLabel: the ranks past the rows */
  GtkWidget *spread_title;   /* the header of SPREAD_COLUMN */
  GtkWidget *plan_title;     /* the header of PLAN_COLUMN: which plan it is */
  GPtrArray *cells;          /* [n_rows * N_COLUMNS] labels, row-major (not owned) */
  int        n_rows;         /* ranks shown */
  PpStatsResult *shown;      /* what they show (the last applied) */
};

G_DEFINE_FINAL_TYPE (PpStatsPanel, pp_stats_panel, GTK_TYPE_WIDGET)

/* Every bubble says which it is (pp-analysis.h's names); the plan's
 * column is named by the trace's plan when one comes (update). */
static const char *const column_titles[N_COLUMNS] = {
  "Rank", "Measured bubble a step", "Bubble, plan at measured costs", "Bubble, closed form (F=1, B=2)",
  "Peak in-flight", "Peak activation (MiB)", "Bubble over replicas",
};

static GtkWidget *
cell_label (const char *text, gboolean header)
{
  GtkWidget *l = gtk_label_new (text);
  gtk_label_set_xalign (GTK_LABEL (l), header ? 0.0 : 1.0);
  if (header)
    {
      gtk_widget_add_css_class (l, "heading");
      /* the bubbles' full names, on two lines: the table stays narrow */
      gtk_label_set_wrap (GTK_LABEL (l), TRUE);
      gtk_label_set_max_width_chars (GTK_LABEL (l), 16);
    }
  else
    gtk_widget_add_css_class (l, "numeric");
  return l;
}

/* The labels are kept in an array: gtk_grid_get_child_at walks every
 * child, rows x columns a lookup. */
static void
set_cell (PpStatsPanel *self, int column, int row, const char *text)
{
  guint i = (guint) (row - 1) * N_COLUMNS + (guint) column;
  GtkWidget *l = row >= 1 && i < self->cells->len ? g_ptr_array_index (self->cells, i) : NULL;
  if (l != NULL && g_strcmp0 (gtk_label_get_text (GTK_LABEL (l)), text) != 0)
    gtk_label_set_text (GTK_LABEL (l), text);
}

/* Rows 1..n_ranks exist, the header is row 0. */
static void
ensure_rows (PpStatsPanel *self, int n_ranks)
{
  GtkGrid *grid = GTK_GRID (self->grid);

  while (self->n_rows > n_ranks)
    {
      gtk_grid_remove_row (grid, self->n_rows);
      self->n_rows--;
      g_ptr_array_set_size (self->cells, (guint) self->n_rows * N_COLUMNS);
    }
  while (self->n_rows < n_ranks)
    {
      int row = ++self->n_rows;
      char rank[32];
      g_snprintf (rank, sizeof rank, "rank %d", row - 1);   /* named in update */
      GtkWidget *l = cell_label (rank, FALSE);
      gtk_label_set_xalign (GTK_LABEL (l), 0.0);
      gtk_grid_attach (grid, l, 0, row, 1, 1);
      g_ptr_array_add (self->cells, l);
      for (int c = 1; c < N_COLUMNS; c++)
        {
          GtkWidget *cl = cell_label ("–", FALSE);
          gtk_grid_attach (grid, cl, c, row, 1, 1);
          g_ptr_array_add (self->cells, cl);
        }
    }
}

static void
format_percent (char *buf, size_t size, double fraction)
{
  if (fraction < 0 || !isfinite (fraction))
    g_strlcpy (buf, "–", size);
  else
    pp_analysis_format_percent (buf, size, fraction, 1);
}

void
pp_stats_numbers_clear (PpStatsNumbers *n)
{
  if (n == NULL)
    return;
  pp_analysis_steps_clear (&n->steps);
  g_free (n->measured);
  g_free (n->planned);
  g_free (n->rank);
  memset (n, 0, sizeof *n);
}

void
pp_stats_numbers (const PpTimelineModel *m, int max_ranks, PpStatsNumbers *out)
{
  memset (out, 0, sizeof *out);
  out->closed = -1;
  out->plan = PP_ANALYSIS_PLAN_MEASURED_COSTS;
  if (m == NULL)
    return;
  const PpTraceDescription *d = pp_timeline_model_description (m);
  int n = MIN (pp_timeline_model_n_ranks (m), max_ranks);
  int64_t t0 = pp_timeline_model_start_ns (m), t1 = pp_timeline_model_end_ns (m);

  /* the one analysis: the steps every view counts, their median, the
   * measured bubble a step */
  pp_timeline_model_step_analysis (m, &out->steps);
  out->n_ranks = n;
  out->measured = g_new (double, MAX (n, 1));
  out->planned = g_new (double, MAX (n, 1));
  out->rank = g_new0 (PpTimelineRankStats, MAX (n, 1));
  out->measured_is_idle = out->steps.n_steps == 0;
  for (int r = 0; r < n; r++)
    {
      PpTimelineRankStats *st = &out->rank[r];
      pp_timeline_model_rank_stats (m, r, t0, t1, st);
      /* no step counts yet: the whole run's idle share, said so */
      out->measured[r] = out->steps.n_steps > 0 && r < out->steps.n_ranks ? out->steps.bubble[r]
                         : t1 > t0 ? st->bubble : -1;
      out->planned[r] = st->planned_bubble;
    }
  if (d != NULL)
    {
      out->closed = pp_bubble_closed_form (d->schedule, d->n_ranks, d->n_microbatches, d->n_virtual);
      out->plan = pp_analysis_plan_of_backend (d->backend);
    }
}

/* The summary line over the table. */
static char *
summary_text (const PpTimelineModel *model, const PpStatsNumbers *num)
{
  GString *s = g_string_new (NULL);
  size_t n_steps = pp_timeline_model_n_steps (model);
  const PpAnalysisSteps *a = &num->steps;
  char what[160], pc[32];

  /* the one analysis's statistic over the steps every view counts */
  double step_ns = a->n_steps > 0 ? a->median_step : 0;
  if (step_ns > 0)
    {
      g_string_append_printf (s, "Median step: %.3f ms over %s · " PP_ANALYSIS_MEASURED_LABEL " %s (mean over the ranks)",
                              step_ns / 1e6, pp_analysis_describe_steps (a, what, sizeof what),
                              pp_analysis_format_percent (pc, sizeof pc, a->bubble_mean, 1));
      long batch = pp_timeline_description_number (pp_timeline_model_description (model), "batch", 0);
      if (batch > 0)
        g_string_append_printf (s, " · %.1f samples/s", (double) batch / (step_ns / 1e9));
    }
  else
    g_string_append (s, "Median step: – (no whole step yet; the measured column is the idle share of the whole run)");
  g_string_append_printf (s, " · Steps: %zu", n_steps);
  g_string_append_printf (s, " · Dropped events: %" G_GUINT64_FORMAT,
                          (guint64) pp_timeline_model_dropped (model));
  /* a job of replicas: the timeline folds them; the steps and bubbles
   * are the median copy's (the one analysis's), the last column over the
   * replicas */
  if (pp_timeline_model_n_replicas (model) > 1)
    g_string_append_printf (s, " · %d processes, %d a pipeline rank, folded in the timeline; these figures: "
                            "the median copy's (replica dp %d, by step length), the last column over the replicas",
                            pp_timeline_model_n_processes (model), pp_timeline_model_n_replicas (model),
                            pp_timeline_model_analysis_dp (model));
  return g_string_free (s, FALSE);
}

typedef char StatsRow[N_COLUMNS][64];   /* a row's texts */

/* What the tab shows of a model: the numbers and every text. */
struct _PpStatsResult
{
  gboolean        have_model;
  PpStatsNumbers  num;
  int             n_all, n_ranks, n_rep;
  char           *plan_title, *summary, *more;
  StatsRow       *cells;                    /* [n_ranks] */
};

void
pp_stats_result_free (PpStatsResult *r)
{
  if (r == NULL)
    return;
  pp_stats_numbers_clear (&r->num);
  g_free (r->plan_title);
  g_free (r->summary);
  g_free (r->more);
  g_free (r->cells);
  g_free (r);
}

PpStatsResult *
pp_stats_panel_compute (const PpTimelineModel *model)
{
  PpStatsResult *res = g_new0 (PpStatsResult, 1);
  if (model == NULL)
    return res;
  res->have_model = TRUE;

  int n_all = pp_timeline_model_n_ranks (model);
  int n_ranks = n_all < PP_STATS_PANEL_MAX_ROWS ? n_all : PP_STATS_PANEL_MAX_ROWS;
  res->n_all = n_all;
  res->n_ranks = n_ranks;

  /* Measured inside the steps (their compute windows), as the plan's bubble
   * is per step: a GPU run's set-up and the time between steps would
   * otherwise swamp it.  The whole run's idle share where no step is known. */
  PpStatsNumbers *num = &res->num;
  pp_stats_numbers (model, n_ranks, num);
  res->plan_title = g_strdup_printf ("Bubble, %s", pp_analysis_plan_label (num->plan));
  PpTimelineSpread *spread = g_new0 (PpTimelineSpread, n_all > 0 ? n_all : 1);
  int n_rep = pp_timeline_model_has_replicas (model) ? pp_timeline_replica_bubbles (model, n_all, spread) : 0;
  res->n_rep = n_rep;
  res->summary = summary_text (model, num);
  if (n_all > n_ranks)
    res->more = g_strdup_printf ("%d more ranks: pipescope-cli info lists them all", n_all - n_ranks);
  res->cells = g_new0 (StatsRow, MAX (n_ranks, 1));
  for (int r = 0; r < n_ranks; r++)
    {
      const PpTimelineRankStats *st = &num->rank[r];
      char (*cell)[64] = res->cells[r];
      size_t size = sizeof cell[0];

      pp_timeline_model_rank_label (model, r, cell[0], size);
      format_percent (cell[1], size, num->measured[r]);
      if (num->measured_is_idle && num->measured[r] >= 0)
        {
          /* not a bubble a step: named what it is */
          g_autofree char *idle = g_strdup_printf ("idle %s", cell[1]);
          g_strlcpy (cell[1], idle, size);
        }
      format_percent (cell[PLAN_COLUMN], size, num->planned[r]);
      format_percent (cell[3], size, num->closed);
      if (st->peak_inflight >= 0)
        g_snprintf (cell[4], size, "%d", st->peak_inflight);
      else
        g_strlcpy (cell[4], "–", size);
      if (st->peak_activation_bytes >= 0)
        g_snprintf (cell[5], size, "%.1f", st->peak_activation_bytes / (1024.0 * 1024.0));
      else
        g_strlcpy (cell[5], "–", size);
      /* "33.3% (32.1–35.0%, dp 1 most)": the median replica's, the spread,
       * and which replica idles most where they differ */
      if (n_rep > 1 && spread[r].n > 0 && spread[r].max > spread[r].min)
        g_snprintf (cell[SPREAD_COLUMN], size, "%.1f%% (%.1f\u2013%.1f%%, dp %d most)", 100 * spread[r].median,
                    100 * spread[r].min, 100 * spread[r].max, spread[r].max_dp);
      else if (n_rep > 1 && spread[r].n > 0)
        g_snprintf (cell[SPREAD_COLUMN], size, "%.1f%% (every replica)", 100 * spread[r].median);
      else
        g_strlcpy (cell[SPREAD_COLUMN], "\u2013", size);
    }
  g_free (spread);
  return res;
}

static void
set_text (GtkWidget *label, const char *text)
{
  if (g_strcmp0 (gtk_label_get_text (GTK_LABEL (label)), text) != 0)
    gtk_label_set_text (GTK_LABEL (label), text);
}

void
pp_stats_panel_apply (PpStatsPanel *self, PpStatsResult *res)
{
  g_return_if_fail (PP_IS_STATS_PANEL (self));
  g_return_if_fail (res != NULL);

  pp_stats_result_free (self->shown);
  self->shown = res;
  if (!res->have_model)
    {
      ensure_rows (self, 0);
      gtk_widget_set_visible (self->more, FALSE);
      gtk_label_set_text (GTK_LABEL (self->summary), "No run");
      return;
    }
  set_text (self->plan_title, res->plan_title);
  gtk_widget_set_visible (self->spread_title, res->n_rep > 1);
  set_text (self->summary, res->summary);
  ensure_rows (self, res->n_ranks);
  if (res->more != NULL)
    set_text (self->more, res->more);
  gtk_widget_set_visible (self->more, res->more != NULL);
  for (int r = 0; r < res->n_ranks; r++)
    {
      for (int c = 0; c < N_COLUMNS; c++)
        set_cell (self, c, r + 1, res->cells[r][c]);
      GtkWidget *cell = g_ptr_array_index (self->cells, (guint) r * N_COLUMNS + SPREAD_COLUMN);
      gtk_widget_set_visible (cell, res->n_rep > 1);
    }
}

void
pp_stats_panel_update (PpStatsPanel *self, const PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_STATS_PANEL (self));
  pp_stats_panel_apply (self, pp_stats_panel_compute (model));
}

void
pp_stats_panel_show_pending (PpStatsPanel *self)
{
  g_return_if_fail (PP_IS_STATS_PANEL (self));
  g_clear_pointer (&self->shown, pp_stats_result_free);
  ensure_rows (self, 0);
  gtk_widget_set_visible (self->more, FALSE);
  gtk_label_set_text (GTK_LABEL (self->summary), "Analysing the run\u2026");
}

const PpStatsNumbers *
pp_stats_panel_get_numbers (PpStatsPanel *self)
{
  g_return_val_if_fail (PP_IS_STATS_PANEL (self), NULL);
  return self->shown != NULL && self->shown->have_model ? &self->shown->num : NULL;
}

int
pp_stats_panel_get_n_rows (PpStatsPanel *self)
{
  g_return_val_if_fail (PP_IS_STATS_PANEL (self), 0);
  return self->n_rows;
}

GtkWidget *
pp_stats_panel_new (void)
{
  return g_object_new (PP_TYPE_STATS_PANEL, NULL);
}

static void
pp_stats_panel_dispose (GObject *object)
{
  PpStatsPanel *self = PP_STATS_PANEL (object);

  g_clear_pointer (&self->box, gtk_widget_unparent);
  g_clear_pointer (&self->cells, g_ptr_array_unref);
  g_clear_pointer (&self->shown, pp_stats_result_free);
  G_OBJECT_CLASS (pp_stats_panel_parent_class)->dispose (object);
}

static void
pp_stats_panel_class_init (PpStatsPanelClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = pp_stats_panel_dispose;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "pp-stats-panel");
}

static void
pp_stats_panel_init (PpStatsPanel *self)
{
  self->box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_parent (self->box, GTK_WIDGET (self));

  self->summary = gtk_label_new ("No run");
  gtk_label_set_xalign (GTK_LABEL (self->summary), 0.0);
  gtk_label_set_wrap (GTK_LABEL (self->summary), TRUE);
  gtk_box_append (GTK_BOX (self->box), self->summary);

  self->grid = gtk_grid_new ();
  gtk_grid_set_column_spacing (GTK_GRID (self->grid), 18);
  gtk_grid_set_row_spacing (GTK_GRID (self->grid), 3);
  gtk_box_append (GTK_BOX (self->box), self->grid);
  for (int c = 0; c < N_COLUMNS; c++)
    {
      GtkWidget *l = cell_label (column_titles[c], TRUE);
      gtk_grid_attach (GTK_GRID (self->grid), l, c, 0, 1, 1);
      if (c == PLAN_COLUMN)
        self->plan_title = l;
      if (c == SPREAD_COLUMN)
        {
          self->spread_title = l;
          gtk_widget_set_visible (l, FALSE);
        }
    }
  self->cells = g_ptr_array_new ();

  self->more = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (self->more), 0.0);
  gtk_widget_add_css_class (self->more, "dim-label");
  gtk_widget_set_visible (self->more, FALSE);
  gtk_box_append (GTK_BOX (self->box), self->more);
}
