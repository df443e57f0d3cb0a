/* pp-loss-chart.c — loss over training steps, drawn with cairo.
 *
 * update() copies the model's per-step losses (a few doubles per step), so
 * drawing never touches the model.  Axes with "nice" ticks, the line, and
 * the last value written at its end; colors follow libadwaita's dark mode.
 */
#include "pp-panels.h"
#include "pp-chart.h"

#include <adwaita.h>
#include <math.h>
#include <string.h>

struct _PpLossChart
{
  GtkWidget        parent_instance;

  GArray          *losses;         /* double, NaN where unknown */
  GPtrArray       *replicas;       /* a job of replicas: GArray of double a replica, apart */
  GArray          *replica_dp;     /* int32_t, the dp of each */
  GArray          *losses2;        /* a second run's, compared (empty: none) */
  char            *title, *title2; /* the legend when comparing */
  AdwStyleManager *style_manager;
};

G_DEFINE_FINAL_TYPE (PpLossChart, pp_loss_chart, GTK_TYPE_WIDGET)

GtkWidget *
pp_loss_chart_new (void)
{
  return g_object_new (PP_TYPE_LOSS_CHART, NULL);
}

/* Copies model's losses into to; TRUE if they changed. */
static gboolean
take_losses (GArray *to, const PpTimelineModel *model)
{
  size_t n = model ? pp_timeline_model_n_losses (model) : 0;
  const double *v = n ? pp_timeline_model_losses (model) : NULL;

  if (n == to->len && (n == 0 || memcmp (v, to->data, n * sizeof (double)) == 0))
    return FALSE;
  g_array_set_size (to, 0);
  if (n)
    g_array_append_vals (to, v, (guint) n);
  return TRUE;
}

/* Copies model's losses by replica; TRUE if they changed. */
static gboolean
take_replicas (PpLossChart *self, const PpTimelineModel *model)
{
  size_t n = model ? pp_timeline_model_n_loss_series (model) : 0;
  gboolean changed = n != self->replicas->len;
  if (changed)
    {
      g_ptr_array_set_size (self->replicas, 0);
      g_array_set_size (self->replica_dp, 0);
    }
  for (size_t i = 0; i < n; i++)
    {
      int32_t dp;
      size_t len;
      const double *v = pp_timeline_model_loss_series (model, i, &dp, &len);
      if (i >= self->replicas->len)
        {
          g_ptr_array_add (self->replicas, g_array_new (FALSE, FALSE, sizeof (double)));
          g_array_append_val (self->replica_dp, dp);
        }
      GArray *to = g_ptr_array_index (self->replicas, i);
      if (g_array_index (self->replica_dp, int32_t, i) != dp)
        {
          g_array_index (self->replica_dp, int32_t, i) = dp;
          changed = TRUE;
        }
      if (len == to->len && (len == 0 || memcmp (v, to->data, len * sizeof (double)) == 0))
        continue;
      g_array_set_size (to, 0);
      if (len)
        g_array_append_vals (to, v, (guint) len);
      changed = TRUE;
    }
  return changed;
}

void
pp_loss_chart_update (PpLossChart *self, const PpTimelineModel *model)
{
  pp_loss_chart_update_compare (self, model, NULL, NULL, NULL);
}

void
pp_loss_chart_update_compare (PpLossChart *self, const PpTimelineModel *model, const char *title,
                              const PpTimelineModel *model2, const char *title2)
{
  g_return_if_fail (PP_IS_LOSS_CHART (self));

  gboolean changed = take_losses (self->losses, model);
  changed |= take_replicas (self, model);
  changed |= take_losses (self->losses2, model2);
  if (g_strcmp0 (title, self->title) != 0 || g_strcmp0 (title2, self->title2) != 0)
    {
      g_free (self->title);
      g_free (self->title2);
      self->title = g_strdup (title);
      self->title2 = g_strdup (title2);
      changed = TRUE;
    }
  if (changed)
    gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
draw_chart (PpLossChart *self, cairo_t *cr, double w, double h)
{
  gboolean dark = self->style_manager && adw_style_manager_get_dark (self->style_manager);
  double fg[3] = { 0.14, 0.14, 0.16 }, grid[3] = { 0.85, 0.85, 0.87 };
  double line[3] = { 0.0, 0.447, 0.698 };         /* Okabe–Ito blue */
  if (dark)
    {
      fg[0] = fg[1] = fg[2] = 0.92;
      grid[0] = grid[1] = grid[2] = 0.30;
      line[0] = 0.34; line[1] = 0.71; line[2] = 0.91; /* sky blue */
    }

  cairo_select_font_face (cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 11);

  /* the run, and the one compared with it (vermillion, drawn under); a
   * job of replicas not compared: a line a replica (dp), never mixed */
  enum { MAX_LINES = 8 };
  static const double okabe_ito[MAX_LINES][3] = {
    { 0.0, 0.447, 0.698 }, { 0.835, 0.369, 0.0 }, { 0.0, 0.620, 0.451 }, { 0.800, 0.475, 0.655 },
    { 0.902, 0.624, 0.0 }, { 0.337, 0.706, 0.914 }, { 0.941, 0.894, 0.259 }, { 0.5, 0.5, 0.5 },
  };
  struct { const double *v; guint n; double rgb[3]; const char *title; int last; } sr[MAX_LINES] = {
    { (const double *) (void *) self->losses->data, self->losses->len,
      { line[0], line[1], line[2] }, self->title, -1 },
    { (const double *) (void *) self->losses2->data, self->losses2->len,
      { dark ? 0.95 : 0.835, dark ? 0.55 : 0.369, dark ? 0.25 : 0.0 }, self->title2, -1 },
  };
  int n_lines = 2;
  char dp_title[MAX_LINES][32];
  guint n_rep = self->replicas->len;
  gboolean by_replica = n_rep >= 2 && self->losses2->len == 0;
  if (by_replica)
    {
      n_lines = (int) MIN (n_rep, (guint) MAX_LINES);
      for (int k = 0; k < n_lines; k++)
        {
          GArray *a = g_ptr_array_index (self->replicas, k);
          g_snprintf (dp_title[k], sizeof dp_title[k], "dp %d", g_array_index (self->replica_dp, int32_t, k));
          sr[k].v = (const double *) (void *) a->data;
          sr[k].n = a->len;
          sr[k].title = dp_title[k];
          sr[k].last = -1;
          for (int c = 0; c < 3; c++)
            sr[k].rgb[c] = k == 0 ? line[c] : okabe_ito[k][c];
        }
    }
  double lo = INFINITY, hi = -INFINITY;
  guint xn = 0;
  for (int k = 0; k < n_lines; k++)
    {
      xn = MAX (xn, sr[k].n);
      for (guint i = 0; i < sr[k].n; i++)
        if (isfinite (sr[k].v[i]))
          {
            lo = MIN (lo, sr[k].v[i]);
            hi = MAX (hi, sr[k].v[i]);
            sr[k].last = (int) i;
          }
    }
  /* the line whose last value is written: the run's (the first
   * replica's), else the other's */
  int main_k = sr[0].last >= 0 ? 0 : 1;
  const double *v = sr[main_k].v;
  guint n = sr[main_k].n;
  int last = sr[main_k].last;

  if (last < 0)
    {
      cairo_text_extents_t ext;
      const char *msg = "No loss reported yet";
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_text_extents (cr, msg, &ext);
      cairo_move_to (cr, (w - ext.width) / 2 - ext.x_bearing, h / 2);
      cairo_show_text (cr, msg);
      return;
    }
  if (hi - lo < 1e-12)
    {
      double pad = fabs (hi) > 0 ? fabs (hi) * 0.05 : 0.5;
      lo -= pad;
      hi += pad;
    }

  /* room for the axis titles: the y title turned along the left edge, the
   * x title under the step numbers */
  double left = 64, right = w - 56, top = 10, bottom = h - 38;
  if (right - left < 20 || bottom - top < 20)
    return;

  double ystep = pp_chart_nice_step (hi - lo, 4);
  double ylo = floor (lo / ystep) * ystep, yhi = ceil (hi / ystep) * ystep;
  double xmax = MAX (1, (double) xn - 1);
  double xstep = pp_chart_nice_step (xmax, 5);
  if (xstep < 1)
    xstep = 1;

#define X(i) (left + (double) (i) / xmax * (right - left))
#define Y(val) (bottom - ((val) - ylo) / (yhi - ylo) * (bottom - top))

  /* grid and y ticks */
  cairo_set_line_width (cr, 1);
  for (double y = ylo; y <= yhi + ystep * 0.5; y += ystep)
    {
      char label[32];
      cairo_text_extents_t ext;
      double py = round (Y (y)) + 0.5;
      cairo_set_source_rgb (cr, grid[0], grid[1], grid[2]);
      cairo_move_to (cr, left, py);
      cairo_line_to (cr, right, py);
      cairo_stroke (cr);
      g_snprintf (label, sizeof label, "%g", fabs (y) < ystep * 1e-6 ? 0.0 : y);
      cairo_text_extents (cr, label, &ext);
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, left - 6 - ext.width - ext.x_bearing, py + ext.height / 2);
      cairo_show_text (cr, label);
    }

  /* x ticks (steps) */
  for (double s = 0; s <= xmax + 0.5; s += xstep)
    {
      char label[32];
      cairo_text_extents_t ext;
      double px = round (X (s)) + 0.5;
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, px, bottom);
      cairo_line_to (cr, px, bottom + 4);
      cairo_stroke (cr);
      g_snprintf (label, sizeof label, "%.0f", s);
      cairo_text_extents (cr, label, &ext);
      cairo_move_to (cr, px - ext.width / 2 - ext.x_bearing, bottom + 16);
      cairo_show_text (cr, label);
    }

  /* axis titles, with their units */
  pp_chart_axis_titles (cr, h, left, right, top, bottom, "training step", "loss");

  /* axes */
  cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
  cairo_move_to (cr, left + 0.5, top);
  cairo_line_to (cr, left + 0.5, bottom + 0.5);
  cairo_line_to (cr, right, bottom + 0.5);
  cairo_stroke (cr);

  /* the lines, the compared run's under the run's; unknown steps break them */
  int points = 0;
  cairo_set_line_width (cr, 2);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
  for (int k = n_lines - 1; k >= 0; k--)
    {
      if (sr[k].last < 0)
        continue;
      cairo_set_source_rgb (cr, sr[k].rgb[0], sr[k].rgb[1], sr[k].rgb[2]);
      gboolean pen_down = FALSE;
      for (guint i = 0; i < sr[k].n; i++)
        {
          double y = sr[k].v[i];
          if (!isfinite (y))
            {
              pen_down = FALSE;
              continue;
            }
          if (pen_down)
            cairo_line_to (cr, X (i), Y (y));
          else
            cairo_move_to (cr, X (i), Y (y));
          pen_down = TRUE;
          points += k == main_k;
        }
      cairo_stroke (cr);
    }
  cairo_set_source_rgb (cr, sr[main_k].rgb[0], sr[main_k].rgb[1], sr[main_k].rgb[2]);
  if (points == 1 || n == 1)
    {
      cairo_arc (cr, X (last), Y (v[last]), 3, 0, 2 * G_PI);
      cairo_fill (cr);
    }

  /* the last value */
  char label[32];
  cairo_text_extents_t ext;
  g_snprintf (label, sizeof label, "%.4g", v[last]);
  cairo_text_extents (cr, label, &ext);
  double lx = X (last) + 6, ly = Y (v[last]) + ext.height / 2;
  if (lx + ext.width > w - 2)
    lx = w - 2 - ext.width;
  cairo_move_to (cr, lx - ext.x_bearing, CLAMP (ly, top + ext.height, bottom));
  cairo_show_text (cr, label);

  /* comparing, or replicas: which line is which, top right */
  if (by_replica || (sr[1].n > 0 && sr[0].title && sr[1].title))
    {
      double y = top + 12;
      if (by_replica)
        {
          /* what the lines are: each replica's own loss, not the job's */
          char what[96];
          cairo_text_extents_t e;
          g_snprintf (what, sizeof what, "a line a replica%s", n_rep > MAX_LINES ? " (the first 8)" : "");
          cairo_text_extents (cr, what, &e);
          cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
          cairo_move_to (cr, right - e.x_advance, y);
          cairo_show_text (cr, what);
          y += 16;
        }
      for (int k = 0; k < n_lines; k++, y += 16)
        {
          cairo_text_extents_t e;
          cairo_text_extents (cr, sr[k].title, &e);
          double x = right - e.x_advance;
          cairo_set_source_rgb (cr, sr[k].rgb[0], sr[k].rgb[1], sr[k].rgb[2]);
          cairo_rectangle (cr, x - 20, y - 6, 14, 3);
          cairo_fill (cr);
          cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
          cairo_move_to (cr, x, y);
          cairo_show_text (cr, sr[k].title);
        }
    }

#undef X
#undef Y
}

static void
pp_loss_chart_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  PpLossChart *self = PP_LOSS_CHART (widget);
  int w = gtk_widget_get_width (widget), h = gtk_widget_get_height (widget);

  if (w <= 0 || h <= 0)
    return;
  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, w, h));
  draw_chart (self, cr, w, h);
  cairo_destroy (cr);
}

static void
pp_loss_chart_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                       int *minimum, int *natural, int *min_baseline, int *nat_baseline)
{
  *minimum = orientation == GTK_ORIENTATION_HORIZONTAL ? 160 : 100;
  *natural = orientation == GTK_ORIENTATION_HORIZONTAL ? 320 : 160;
}

static void
pp_loss_chart_dispose (GObject *object)
{
  PpLossChart *self = PP_LOSS_CHART (object);

  if (self->style_manager != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->style_manager, self);
      self->style_manager = NULL;
    }
  G_OBJECT_CLASS (pp_loss_chart_parent_class)->dispose (object);
}

static void
pp_loss_chart_finalize (GObject *object)
{
  PpLossChart *self = PP_LOSS_CHART (object);

  g_array_unref (self->losses);
  g_array_unref (self->losses2);
  g_ptr_array_unref (self->replicas);
  g_array_unref (self->replica_dp);
  g_free (self->title);
  g_free (self->title2);
  G_OBJECT_CLASS (pp_loss_chart_parent_class)->finalize (object);
}

static void
pp_loss_chart_class_init (PpLossChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = pp_loss_chart_dispose;
  object_class->finalize = pp_loss_chart_finalize;
  widget_class->snapshot = pp_loss_chart_snapshot;
  widget_class->measure = pp_loss_chart_measure;
  gtk_widget_class_set_css_name (widget_class, "pp-loss-chart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
pp_loss_chart_init (PpLossChart *self)
{
  self->losses = g_array_new (FALSE, FALSE, sizeof (double));
  self->losses2 = g_array_new (FALSE, FALSE, sizeof (double));
  self->replicas = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  self->replica_dp = g_array_new (FALSE, FALSE, sizeof (int32_t));
  self->style_manager = adw_style_manager_get_default ();
  g_signal_connect_swapped (self->style_manager, "notify::dark",
                            G_CALLBACK (gtk_widget_queue_draw), self);
}
