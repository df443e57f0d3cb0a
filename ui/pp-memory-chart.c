/* pp-memory-chart.c — activation memory over time per rank, drawn with
 * cairo, beside what the schedule says each rank holds.
 *
 * update() copies the model's samples (at most PP_TIMELINE_MEMORY_MAX a
 * rank, for the first PP_MEMORY_CHART_MAX_RANKS ranks), each rank's peak,
 * and the schedule's planned peak of micro-batches in flight per rank (a
 * simulation under uniform costs, only where the schedule is small enough
 * to simulate at once), so drawing never touches the model.  A rank's
 * bytes per micro-batch are its measured peak over its measured peak in
 * flight; the schedule's hold is that times the planned peak, and What
 * if's budget that times the budget.  compute (the copies and the
 * simulation, no GTK: the app runs it on a worker over a snapshot) is
 * apart from apply (on the main loop).
 */
#include "pp-panels.h"
#include "pp-chart.h"

#include <adwaita.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-simulate.h"

#define MAX_RANKS PP_MEMORY_CHART_MAX_RANKS
/* ranks x micro-batches x stages a rank simulated (on the app's worker) */
#define PLAN_MAX_WORK 65536

typedef struct {
  GArray *samples;        /* PpTimelineMemorySample */
  double  peak;           /* bytes, -1 unknown */
  int     inflight;       /* measured peak of micro-batches held, -1 unknown */
  int     planned;        /* the schedule's peak, -1 not simulated */
  char    label[48];
} Series;

struct _PpMemoryChart
{
  GtkWidget        parent_instance;

  Series           series[MAX_RANKS];
  int              n_ranks, n_more;
  int64_t          t0, t1;
  char             schedule[64];
  char             empty[160];     /* what an empty chart says (why it is empty) */
  double           budget;         /* What if's, in micro-batches; 0 none */
  /* the planned peaks depend on the description and the plans only:
   * simulated once for them, not at every refresh of a live run */
  char             plan_key[128];
  int              plan_peak[MAX_RANKS];
  AdwStyleManager *style_manager;
};

G_DEFINE_FINAL_TYPE (PpMemoryChart, pp_memory_chart, GTK_TYPE_WIDGET)

GtkWidget *
pp_memory_chart_new (void)
{
  return g_object_new (PP_TYPE_MEMORY_CHART, NULL);
}

/* The planned peak in flight per rank of the trace's schedule (its plans,
 * else the one its description names; -1 where not simulated), into
 * peak[MAX_RANKS]: a simulation under uniform costs, where it is small
 * enough. */
static void
simulate_plan (const PpTimelineModel *model, const PpTraceDescription *d, int *peak)
{
  PpSchedule *s = NULL;
  PpSimulation *sim = NULL;
  PpCostModel *c = NULL;
  PpError err = { 0 };
  long work = (long) d->n_ranks * MAX (d->n_microbatches, 1) * MAX (d->n_virtual, 1);

  const PpTracePlanAction **pa = NULL;
  size_t *pn = NULL;
  int np;

  for (int r = 0; r < MAX_RANKS; r++)
    peak[r] = -1;
  if (work <= 0 || work > PLAN_MAX_WORK)
    return;
  np = pp_timeline_model_plans (model, &pa, &pn);
  PpWhyPlans plans = { MAX (np, 0), pa, pn };
  PpStatus st = pp_why_schedule_of_trace (d, np > 0 ? &plans : NULL, &s, &err);
  free (pa);
  free (pn);
  if (st != PP_OK)
    return;
  if ((c = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0)) != NULL
      && pp_simulate (s, c, &sim, &err) == PP_OK)
    for (int r = 0; r < MAX_RANKS && r < s->ranks; r++)
      peak[r] = sim->rank[r].peak_inflight;
  pp_simulation_free (sim);
  pp_cost_model_free (c);
  pp_schedule_free (s);
}

/* What the planned peaks depend on: the description and the plans. */
static void
plan_key (const PpTimelineModel *model, const PpTraceDescription *d, char *key, size_t size)
{
  g_snprintf (key, size, "%.63s P=%d M=%d V=%d plans=%zu", d->schedule, d->n_ranks,
              d->n_microbatches, d->n_virtual, pp_timeline_model_n_plan_items (model));
}

/* Nothing to draw: no samples over time, or none above zero. */
static gboolean
chart_is_empty (PpMemoryChart *self)
{
  double hi = 0;
  for (int r = 0; r < self->n_ranks; r++)
    hi = MAX (hi, self->series[r].peak);
  return self->t1 <= self->t0 || !(hi > 0);
}

/* Why the chart would be empty: a framework's job records no activation
 * memory (its hook sees blocks, not tensors), and saying "not yet" there
 * would promise what never comes. */
static void
empty_reason (const Series *series, int n_ranks, const PpTraceDescription *d, char *empty, size_t size)
{
  PpFramework fw = d ? pp_framework_of_description (d->schedule, d->model) : PP_FRAMEWORK_PIPESCOPE;
  /* point to Statistics' in-flight column only when it holds a count (an
   * imported torch.profiler trace has none: the column reads "–") */
  gboolean inflight = FALSE;
  for (int r = 0; r < n_ranks; r++)
    inflight |= series[r].inflight >= 0;
  if (fw != PP_FRAMEWORK_PIPESCOPE)
    g_snprintf (empty, size, "No activation memory: the hook records none for %s jobs%s",
                fw == PP_FRAMEWORK_PYTORCH ? "PyTorch" : "megatron-core",
                inflight ? " (micro-batches in flight are in Statistics)" : "");
  else
    g_strlcpy (empty, "No activation memory reported yet", size);
}

const char *
pp_memory_chart_empty_reason (PpMemoryChart *self)
{
  g_return_val_if_fail (PP_IS_MEMORY_CHART (self), NULL);
  return chart_is_empty (self) ? self->empty : NULL;
}

/* What the chart draws of a model: its samples and peaks, and the planned
 * peaks where they were simulated again. */
struct _PpMemoryResult
{
  Series  series[MAX_RANKS];   /* samples: g_array'd, taken by apply */
  int     n_ranks, n_more;
  int64_t t0, t1;
  char    schedule[64];
  char    empty[160];
  char    plan_key[128];       /* "" without a description */
  gboolean have_plan;          /* simulated for plan_key (else the chart's are for it) */
  int     plan_peak[MAX_RANKS];
};

void
pp_memory_result_free (PpMemoryResult *res)
{
  if (res == NULL)
    return;
  for (int r = 0; r < MAX_RANKS; r++)
    if (res->series[r].samples != NULL)
      g_array_unref (res->series[r].samples);
  g_free (res);
}

const char *
pp_memory_chart_plan_key (PpMemoryChart *self)
{
  g_return_val_if_fail (PP_IS_MEMORY_CHART (self), "");
  return self->plan_key;
}

PpMemoryResult *
pp_memory_chart_compute (const PpTimelineModel *model, const char *known_key)
{
  PpMemoryResult *res = g_new0 (PpMemoryResult, 1);
  for (int r = 0; r < MAX_RANKS; r++)
    {
      res->series[r].samples = g_array_new (FALSE, FALSE, sizeof (PpTimelineMemorySample));
      res->series[r].peak = -1;
      res->series[r].inflight = -1;
      res->series[r].planned = -1;
      res->plan_peak[r] = -1;
    }
  res->t0 = INT64_MAX;
  res->t1 = INT64_MIN;
  if (model == NULL)
    {
      g_strlcpy (res->empty, "No run", sizeof res->empty);
      return res;
    }
  int n = pp_timeline_model_n_ranks (model);
  res->n_ranks = MIN (n, MAX_RANKS);
  res->n_more = n - res->n_ranks;
  for (int r = 0; r < res->n_ranks; r++)
    {
      Series *sr = &res->series[r];
      size_t k = 0;
      const PpTimelineMemorySample *v = pp_timeline_model_memory (model, r, &k);
      PpTimelineRankStats st;
      if (k > 0)
        {
          g_array_append_vals (sr->samples, v, (guint) k);
          res->t0 = MIN (res->t0, v[0].t);
          res->t1 = MAX (res->t1, v[k - 1].t);
        }
      pp_timeline_model_rank_stats (model, r, 0, 0, &st);
      sr->peak = st.peak_activation_bytes;
      sr->inflight = st.peak_inflight;
      pp_timeline_model_rank_label (model, r, sr->label, sizeof sr->label);
    }
  const PpTraceDescription *d = pp_timeline_model_description (model);
  if (d != NULL)
    {
      g_strlcpy (res->schedule, d->schedule, sizeof res->schedule);
      /* simulated once for a schedule and its plans, not at every
       * refresh of a live run */
      plan_key (model, d, res->plan_key, sizeof res->plan_key);
      if (known_key == NULL || strcmp (known_key, res->plan_key) != 0)
        {
          simulate_plan (model, d, res->plan_peak);
          res->have_plan = TRUE;
        }
    }
  empty_reason (res->series, res->n_ranks, d, res->empty, sizeof res->empty);
  return res;
}

void
pp_memory_chart_apply (PpMemoryChart *self, PpMemoryResult *res)
{
  g_return_if_fail (PP_IS_MEMORY_CHART (self));
  g_return_if_fail (res != NULL);

  if (res->have_plan)
    {
      g_strlcpy (self->plan_key, res->plan_key, sizeof self->plan_key);
      memcpy (self->plan_peak, res->plan_peak, sizeof self->plan_peak);
    }
  /* planned peaks of another schedule than the one computed for: none */
  gboolean plan_ok = res->plan_key[0] != '\0' && strcmp (self->plan_key, res->plan_key) == 0;
  for (int r = 0; r < MAX_RANKS; r++)
    {
      GArray *old = self->series[r].samples;
      self->series[r] = res->series[r];   /* its samples taken, ours given back to be freed */
      res->series[r].samples = old;
      self->series[r].planned = plan_ok && r < res->n_ranks ? self->plan_peak[r] : -1;
    }
  self->n_ranks = res->n_ranks;
  self->n_more = res->n_more;
  self->t0 = res->t0;
  self->t1 = res->t1;
  g_strlcpy (self->schedule, res->schedule, sizeof self->schedule);
  g_strlcpy (self->empty, res->empty, sizeof self->empty);
  pp_memory_result_free (res);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
pp_memory_chart_update (PpMemoryChart *self, const PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_MEMORY_CHART (self));
  pp_memory_chart_apply (self, pp_memory_chart_compute (model, self->plan_key));
}

void
pp_memory_chart_set_budget (PpMemoryChart *self, double microbatches)
{
  g_return_if_fail (PP_IS_MEMORY_CHART (self));
  if (self->budget == microbatches)
    return;
  self->budget = microbatches;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

const char *
pp_memory_chart_summary (PpMemoryChart *self, int r, char *buf, size_t size)
{
  g_return_val_if_fail (PP_IS_MEMORY_CHART (self), NULL);
  if (r < 0 || r >= self->n_ranks)
    return NULL;
  const Series *sr = &self->series[r];
  int n = g_snprintf (buf, size, "%s: peak %.2f MiB", sr->label, sr->peak >= 0 ? sr->peak / 1048576.0 : 0.0);
  if (sr->inflight >= 0 && (size_t) n < size)
    n += g_snprintf (buf + n, size - n, " · %d in flight", sr->inflight);
  if (sr->planned >= 0 && (size_t) n < size)
    g_snprintf (buf + n, size - n, " (%s: %d)", self->schedule, sr->planned);
  return buf;
}

/* Okabe-Ito, then again darker */
static void
rank_rgb (int r, gboolean dark, double rgb[3])
{
  static const double pal[8][3] = {
    { 0.000, 0.447, 0.698 }, { 0.835, 0.369, 0.000 }, { 0.000, 0.620, 0.451 }, { 0.800, 0.475, 0.655 },
    { 0.337, 0.706, 0.914 }, { 0.902, 0.624, 0.000 }, { 0.941, 0.894, 0.259 }, { 0.35, 0.35, 0.35 },
  };
  double k = r >= 8 ? 0.7 : 1.0;
  for (int i = 0; i < 3; i++)
    rgb[i] = dark && r % 8 == 7 ? 0.8 : pal[r % 8][i] * k;
}

static void
draw_chart (PpMemoryChart *self, cairo_t *cr, double w, double h)
{
  gboolean dark = self->style_manager && adw_style_manager_get_dark (self->style_manager);
  double fg[3] = { 0.14, 0.14, 0.16 }, grid[3] = { 0.85, 0.85, 0.87 };
  if (dark)
    {
      fg[0] = fg[1] = fg[2] = 0.92;
      grid[0] = grid[1] = grid[2] = 0.30;
    }
  cairo_select_font_face (cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 11);

  double hi = 0, per_mb = 0;
  for (int r = 0; r < self->n_ranks; r++)
    {
      const Series *sr = &self->series[r];
      hi = MAX (hi, sr->peak);
      if (sr->peak > 0 && sr->inflight > 0)
        {
          double b = sr->peak / sr->inflight;
          per_mb = MAX (per_mb, b);
          if (sr->planned > 0)
            hi = MAX (hi, b * sr->planned);
        }
    }
  if (self->budget > 0 && per_mb > 0)
    hi = MAX (hi, self->budget * per_mb);
  if (chart_is_empty (self))
    {
      cairo_text_extents_t ext;
      const char *msg = self->empty;
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_text_extents (cr, msg, &ext);
      cairo_move_to (cr, (w - ext.width) / 2 - ext.x_bearing, h / 2);
      cairo_show_text (cr, msg);
      return;
    }

  /* the legend takes the right side: a line a rank */
  double legend_w = MIN (330, w * 0.45);
  double left = 64, right = w - legend_w - 16, top = 10, bottom = h - 38;
  if (right - left < 40 || bottom - top < 20)
    return;
  double mib = hi / 1048576.0;
  double ystep = pp_chart_nice_step (mib, 4), yhi = ceil (mib * 1.05 / ystep) * ystep;
  double span_ms = (double) (self->t1 - self->t0) / 1e6;
  double xstep = pp_chart_nice_step (span_ms, 5);
#define X(t) (left + ((double) ((t) - self->t0) / 1e6) / span_ms * (right - left))
#define Y(b) (bottom - ((b) / 1048576.0) / yhi * (bottom - top))

  cairo_set_line_width (cr, 1);
  for (double y = 0; y <= yhi + ystep * 0.5; y += ystep)
    {
      char label[32];
      cairo_text_extents_t ext;
      double py = round (bottom - y / yhi * (bottom - top)) + 0.5;
      cairo_set_source_rgb (cr, grid[0], grid[1], grid[2]);
      cairo_move_to (cr, left, py);
      cairo_line_to (cr, right, py);
      cairo_stroke (cr);
      g_snprintf (label, sizeof label, "%g", y);
      cairo_text_extents (cr, label, &ext);
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, left - 6 - ext.width - ext.x_bearing, py + ext.height / 2);
      cairo_show_text (cr, label);
    }
  for (double s = 0; s <= span_ms + xstep * 0.01; s += xstep)
    {
      char label[32];
      cairo_text_extents_t ext;
      double px = round (left + s / span_ms * (right - left)) + 0.5;
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, px, bottom);
      cairo_line_to (cr, px, bottom + 4);
      cairo_stroke (cr);
      g_snprintf (label, sizeof label, "%g", s);
      cairo_text_extents (cr, label, &ext);
      cairo_move_to (cr, px - ext.width / 2 - ext.x_bearing, bottom + 16);
      cairo_show_text (cr, label);
    }
  pp_chart_axis_titles (cr, h, left, right, top, bottom, "time (ms from the first sample)",
                        "activations (MiB)");
  cairo_move_to (cr, left + 0.5, top);
  cairo_line_to (cr, left + 0.5, bottom + 0.5);
  cairo_line_to (cr, right, bottom + 0.5);
  cairo_stroke (cr);

  /* What if's budget, dashed grey; each rank's schedule hold, dashed in its colour */
  double dash[] = { 5, 4 };
  cairo_set_dash (cr, dash, 2, 0);
  if (self->budget > 0 && per_mb > 0)
    {
      cairo_set_source_rgb (cr, grid[0] * 0.6, grid[1] * 0.6, grid[2] * 0.6);
      cairo_move_to (cr, left, round (Y (self->budget * per_mb)) + 0.5);
      cairo_line_to (cr, right, round (Y (self->budget * per_mb)) + 0.5);
      cairo_stroke (cr);
    }
  for (int r = 0; r < self->n_ranks; r++)
    {
      const Series *sr = &self->series[r];
      if (sr->planned <= 0 || sr->inflight <= 0 || !(sr->peak > 0))
        continue;
      double rgb[3], y = round (Y (sr->peak / sr->inflight * sr->planned)) + 0.5;
      rank_rgb (r, dark, rgb);
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
      cairo_move_to (cr, left, y);
      cairo_line_to (cr, right, y);
      cairo_stroke (cr);
    }
  cairo_set_dash (cr, NULL, 0, 0);

  /* the samples: a step line a rank (memory holds until the next sample) */
  cairo_set_line_width (cr, 1.5);
  for (int r = 0; r < self->n_ranks; r++)
    {
      const Series *sr = &self->series[r];
      const PpTimelineMemorySample *v = (const PpTimelineMemorySample *) (void *) sr->samples->data;
      double rgb[3];
      if (sr->samples->len == 0)
        continue;
      rank_rgb (r, dark, rgb);
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
      cairo_move_to (cr, X (v[0].t), Y (v[0].bytes));
      for (guint i = 1; i < sr->samples->len; i++)
        {
          cairo_line_to (cr, X (v[i].t), Y (v[i - 1].bytes));
          cairo_line_to (cr, X (v[i].t), Y (v[i].bytes));
        }
      cairo_stroke (cr);
    }

  /* the legend: a rank a line, its peak against the schedule's hold */
  double y = top + 10;
  for (int r = 0; r < self->n_ranks && y < bottom + 20; r++, y += 16)
    {
      char buf[160];
      double rgb[3];
      rank_rgb (r, dark, rgb);
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle (cr, right + 16, y - 6, 14, 3);
      cairo_fill (cr);
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, right + 36, y);
      cairo_show_text (cr, pp_memory_chart_summary (self, r, buf, sizeof buf));
    }
  if (self->n_more > 0 && y < bottom + 20)
    {
      char buf[64];
      g_snprintf (buf, sizeof buf, "%d more ranks: pipescope-cli info lists them", self->n_more);
      cairo_move_to (cr, right + 36, y);
      cairo_show_text (cr, buf);
      y += 16;
    }
  if (self->budget > 0 && per_mb > 0 && y < bottom + 20)
    {
      char buf[96];
      g_snprintf (buf, sizeof buf, "- - What if's budget: %g micro-batches", self->budget);
      cairo_move_to (cr, right + 16, y);
      cairo_show_text (cr, buf);
    }
#undef X
#undef Y
}

static void
pp_memory_chart_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  PpMemoryChart *self = PP_MEMORY_CHART (widget);
  int w = gtk_widget_get_width (widget), h = gtk_widget_get_height (widget);

  if (w <= 0 || h <= 0)
    return;
  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, w, h));
  draw_chart (self, cr, w, h);
  cairo_destroy (cr);
}

static void
pp_memory_chart_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                         int *minimum, int *natural, int *min_baseline, int *nat_baseline)
{
  *minimum = orientation == GTK_ORIENTATION_HORIZONTAL ? 240 : 100;
  *natural = orientation == GTK_ORIENTATION_HORIZONTAL ? 480 : 160;
}

static void
on_dark_changed (AdwStyleManager *sm, GParamSpec *pspec, PpMemoryChart *self)
{
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
pp_memory_chart_dispose (GObject *object)
{
  PpMemoryChart *self = PP_MEMORY_CHART (object);

  if (self->style_manager != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->style_manager, self);
      self->style_manager = NULL;
    }
  G_OBJECT_CLASS (pp_memory_chart_parent_class)->dispose (object);
}

static void
pp_memory_chart_finalize (GObject *object)
{
  PpMemoryChart *self = PP_MEMORY_CHART (object);

  for (int r = 0; r < MAX_RANKS; r++)
    g_array_unref (self->series[r].samples);
  G_OBJECT_CLASS (pp_memory_chart_parent_class)->finalize (object);
}

static void
pp_memory_chart_class_init (PpMemoryChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = pp_memory_chart_dispose;
  object_class->finalize = pp_memory_chart_finalize;
  widget_class->snapshot = pp_memory_chart_snapshot;
  widget_class->measure = pp_memory_chart_measure;
  gtk_widget_class_set_css_name (widget_class, "pp-memory-chart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
pp_memory_chart_init (PpMemoryChart *self)
{
  g_strlcpy (self->empty, "No run", sizeof self->empty);
  for (int r = 0; r < MAX_RANKS; r++)
    {
      self->series[r].samples = g_array_new (FALSE, FALSE, sizeof (PpTimelineMemorySample));
      self->series[r].peak = -1;
      self->series[r].inflight = -1;
      self->series[r].planned = -1;
    }
  self->t0 = INT64_MAX;
  self->t1 = INT64_MIN;
  self->style_manager = adw_style_manager_get_default ();
  g_signal_connect (self->style_manager, "notify::dark", G_CALLBACK (on_dark_changed), self);
}
