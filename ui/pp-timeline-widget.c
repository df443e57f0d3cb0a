/* pp-timeline-widget.c — the Gantt chart as a GTK widget.
 *
 * All drawing is pp_timeline_render (the same function as the exports); this
 * file only keeps a PpTimelineView and turns input into changes of it.  Time
 * is kept as int64 ns on the spans' clock; zoom and pan compute in double and
 * round once.  Nothing here does I/O or walks all spans: hover and tooltips
 * go through pp_timeline_hit, live following reads only the model's extent.
 */
#include "pp-timeline-widget.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-details.h"
#include "pp-timeline-host-tip.h"
#include "pp-timeline-tip.h"
#include "pp-why.h"

#include <adwaita.h>
#include <math.h>
#include <string.h>

/* The narrowest range one can zoom to, and how wide a live view may grow
 * (fitting everything) before it starts scrolling with a fixed width. */
#define PP_MIN_RANGE_NS   1000              /* 1 µs */
#define PP_LIVE_GROW_NS   G_GINT64_CONSTANT (10000000000)   /* 10 s */
#define PP_KEY_ZOOM       1.5

struct _PpTimelineWidget
{
  GtkWidget        parent_instance;

  PpTimelineModel *model;             /* what is drawn: source, or view for a job of replicas */
  PpTimelineModel *source;            /* borrowed: the caller's */
  PpTimelineModel *view_model;        /* owned: source's rows folded or unfolded */
  int              replica;           /* -1 fold, -2 all, N replica dp N */
  GByteArray      *unfolded;          /* fold: a byte a rank, 1 unfolded */
  PpTimelineView   view;              /* t0/t1, show_plan, hover, selection */
  gboolean         range_valid;       /* t0/t1 were set from data or by a caller */
  gboolean         live;
  gboolean         follow;            /* live: track the newest events */
  gboolean         model_dirty;       /* new data since the last frame */

  /* pointer */
  gboolean         pointer_inside;
  double           pointer_x, pointer_y;
  char            *tip_text;          /* what the tooltip says under the pointer */

  /* drag and pinch start from the range they began with */
  gint64           gesture_t0, gesture_t1;
  double           pinch_anchor_x;
  gboolean         measuring;         /* the drag began on the ruler: a range */
  gint64           measure_from;

  /* issue 17: the schedule the trace names (dependencies), the selected
   * micro-batch's arrows, find and filter */
  PpSchedule      *schedule;
  gboolean         schedule_tried;
  size_t           schedule_plans;   /* the model's PLAN items when it was built */
  PpTimelineArrow *arrows;
  size_t           n_arrows;
  PpTimelineFilter filter;

  AdwStyleManager *style_manager;

  /* the arrow keys from anywhere in the window (on_root_key_pressed) */
  GtkWidget          *key_root;
  GtkEventController *root_keys;
};

G_DEFINE_FINAL_TYPE (PpTimelineWidget, pp_timeline_widget, GTK_TYPE_WIDGET)

enum {
  PROP_0,
  PROP_SHOW_PLAN,
  PROP_LIVE,
  N_PROPS
};

enum {
  SIGNAL_SPAN_SELECTED,
  SIGNAL_RANGE_CHANGED,
  SIGNAL_RANGE_MEASURED,
  SIGNAL_ROWS_CHANGED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

/* ---- view and geometry --------------------------------------------------- */

/* The view at the widget's current size: what the next frame will draw. */
static void
current_view (PpTimelineWidget *self, PpTimelineView *v, PpTimelineLayout *l)
{
  *v = self->view;
  v->width = MAX (1, gtk_widget_get_width (GTK_WIDGET (self)));
  v->height = MAX (1, gtk_widget_get_height (GTK_WIDGET (self)));
  v->dark = self->style_manager != NULL && adw_style_manager_get_dark (self->style_manager);
  /* the window says what its colors mean, as the exports do */
  v->show_legend = v->height >= 160;
  v->arrows = self->arrows;
  v->n_arrows = self->n_arrows;
  v->filter = self->filter.active ? &self->filter : NULL;
  if (l != NULL)
    {
      if (self->model != NULL)
        pp_timeline_layout (self->model, v, l);
      else
        {
          memset (l, 0, sizeof *l);
          l->x1 = v->width;
        }
    }
}

static double
ns_per_px (PpTimelineWidget *self)
{
  PpTimelineView v;
  PpTimelineLayout l;

  current_view (self, &v, &l);
  double plot = l.x1 - l.x0;
  if (plot < 1)
    plot = v.width;
  return (double) (self->view.t1_ns - self->view.t0_ns) / plot;
}

/* The time under widget x (x clamped to the plot area). */
static double
time_at_x (PpTimelineWidget *self, double x)
{
  PpTimelineView v;
  PpTimelineLayout l;

  current_view (self, &v, &l);
  if (l.x1 - l.x0 < 1)
    return 0.5 * (double) (v.t0_ns + v.t1_ns);
  x = CLAMP (x, l.x0, l.x1);
  return (double) v.t0_ns + (x - l.x0) / (l.x1 - l.x0) * (double) (v.t1_ns - v.t0_ns);
}

/* The model's extent, from its first step on where steps are known (a GPU
 * run's seconds of set-up stay a scroll away, as in the exports); FALSE
 * when it holds nothing to draw yet. */
static gboolean
model_extent (PpTimelineWidget *self, gint64 *start, gint64 *end)
{
  if (self->model == NULL)
    return FALSE;
  *start = pp_timeline_model_start_ns (self->model);
  *end = pp_timeline_model_now_ns (self->model);   /* a stuck job's waits run up to now */
  if (pp_timeline_model_n_steps (self->model) > 0)
    {
      gint64 first = pp_timeline_model_step_starts (self->model)[0];
      if (first > *start && first < *end)
        *start = first;
    }
  return *end > *start;
}

static void refresh_pointer (PpTimelineWidget *self);

/* Every change of the range goes through here; so does re-reading what is
 * under a still pointer (live following moves the view under it). */
static void
set_range_internal (PpTimelineWidget *self, gint64 t0, gint64 t1)
{
  if (t1 - t0 < PP_MIN_RANGE_NS)
    {
      gint64 mid = t0 + (t1 - t0) / 2;
      t0 = mid - PP_MIN_RANGE_NS / 2;
      t1 = t0 + PP_MIN_RANGE_NS;
    }
  self->range_valid = TRUE;
  if (t0 == self->view.t0_ns && t1 == self->view.t1_ns)
    return;
  self->view.t0_ns = t0;
  self->view.t1_ns = t1;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  refresh_pointer (self);
  g_signal_emit (self, signals[SIGNAL_RANGE_CHANGED], 0);
}

/* Zoom by factor (> 1: in) keeping time `anchor` at the same x. */
static void
zoom_around (PpTimelineWidget *self, double anchor, double factor)
{
  if (!self->range_valid || !(factor > 0) || !isfinite (factor))
    return;
  double t0 = (double) self->view.t0_ns, t1 = (double) self->view.t1_ns;
  double width = (t1 - t0) / factor;
  if (width < PP_MIN_RANGE_NS)
    width = PP_MIN_RANGE_NS;
  if (width > 1e18)
    width = 1e18;
  double frac = (t1 > t0) ? (anchor - t0) / (t1 - t0) : 0.5;
  double n0 = anchor - frac * width;
  set_range_internal (self, (gint64) llround (n0), (gint64) llround (n0 + width));
}

static void
pan_by (PpTimelineWidget *self, double dt)
{
  if (!self->range_valid || dt == 0)
    return;
  gint64 d = (gint64) llround (dt);
  set_range_internal (self, self->view.t0_ns + d, self->view.t1_ns + d);
}

/* The arrow keys pan by a tenth of the view at a time and stop at the
 * run's ends (its whole extent, set-up included): a held key must not
 * leave the user looking at nothing.  A view already past an end (the
 * mouse pans freely) only comes back toward the run. */
static void
key_pan (PpTimelineWidget *self, double fraction)
{
  if (self->model == NULL || !self->range_valid)
    return;
  gint64 start = pp_timeline_model_start_ns (self->model);
  gint64 end = pp_timeline_model_now_ns (self->model);
  double dt = fraction * (double) (self->view.t1_ns - self->view.t0_ns);
  if (dt > 0)
    dt = MIN (dt, (double) MAX (0, end - self->view.t1_ns));
  else
    dt = MAX (dt, (double) MIN (0, start - self->view.t0_ns));
  pan_by (self, dt);
}

/* The user moved the view: stop following the live edge. */
static void
user_moved (PpTimelineWidget *self)
{
  self->follow = FALSE;
}

/* While live, show the last PP_LIVE_STEPS steps (the one running and the
 * ones before it), so blocks stay readable however long the run has been
 * going; before there are that many steps, or in a trace without step
 * markers, fit the whole run while it is shorter than PP_LIVE_GROW_NS, then
 * keep the visible width and end at the newest event. */
#define PP_LIVE_STEPS 3

static void
follow_live_edge (PpTimelineWidget *self)
{
  gint64 start, end;

  if (!model_extent (self, &start, &end))
    return;
  size_t n_steps = self->model ? pp_timeline_model_n_steps (self->model) : 0;
  if (n_steps > PP_LIVE_STEPS)
    {
      const int64_t *steps = pp_timeline_model_step_starts (self->model);
      gint64 from = steps[n_steps - PP_LIVE_STEPS];
      if (from > start && from < end)
        {
          set_range_internal (self, from, end);
          return;
        }
    }
  if (!self->range_valid)
    {
      set_range_internal (self, start, end);
      return;
    }
  gint64 width = self->view.t1_ns - self->view.t0_ns;
  gint64 length = end - start;
  if (length <= width)
    set_range_internal (self, start, start + width);
  else if (length <= PP_LIVE_GROW_NS)
    set_range_internal (self, start, end);
  else
    set_range_internal (self, end - width, end);
}

/* ---- public API ------------------------------------------------------------ */

GtkWidget *
pp_timeline_widget_new (void)
{
  return g_object_new (PP_TYPE_TIMELINE_WIDGET, NULL);
}

static void
clear_hover_and_selection (PpTimelineWidget *self)
{
  self->view.hover_rank = -1;
  self->view.hover_index = -1;
  self->view.selected_rank = -1;
  self->view.selected_index = -1;
  g_clear_pointer (&self->arrows, g_free);
  self->n_arrows = 0;
  self->view.has_range = FALSE;
}

/* The schedule the trace runs (its plans, else the name its description
 * gives: pp_why_schedule_of_trace), built once a model and again when a
 * plan came (for the dependencies of a selected block); NULL where it is
 * none we know. */
static const PpSchedule *
widget_schedule (PpTimelineWidget *self)
{
  size_t n_plans = pp_timeline_model_n_plan_items (self->model);
  if ((!self->schedule_tried || n_plans != self->schedule_plans) && self->model != NULL)
    {
      const PpTraceDescription *d = pp_timeline_model_description (self->model);
      if (d != NULL)
        {
          PpError err = { 0 };
          const PpTracePlanAction **pa = NULL;
          size_t *pn = NULL;
          int np = pp_timeline_model_plans (self->model, &pa, &pn);
          PpWhyPlans plans = { MAX (np, 0), pa, pn };
          self->schedule_tried = TRUE;
          self->schedule_plans = n_plans;
          g_clear_pointer (&self->schedule, pp_schedule_free);
          if (pp_why_schedule_of_trace (d, np > 0 ? &plans : NULL, &self->schedule, &err) != PP_OK)
            self->schedule = NULL;
          free (pa);
          free (pn);
        }
    }
  return self->schedule;
}

/* Selects span index of rank (-1: none), with its micro-batch's arrows. */
static void
select_span (PpTimelineWidget *self, int rank, long index)
{
  self->view.selected_rank = rank;
  self->view.selected_index = index;
  g_clear_pointer (&self->arrows, g_free);
  self->n_arrows = 0;
  if (rank >= 0 && index >= 0 && self->model != NULL)
    {
      size_t max = 4096;
      self->arrows = g_new (PpTimelineArrow, max);
      self->n_arrows = pp_timeline_microbatch_arrows (self->model, widget_schedule (self), rank, index,
                                                      self->arrows, max);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[SIGNAL_SPAN_SELECTED], 0, rank, (glong) index);
}

/* What is drawn: the source itself, or for a job of replicas a view of it
 * (pp-timeline-fold.h) as the user chose. */
static void
rebuild_view (PpTimelineWidget *self)
{
  g_clear_pointer (&self->view_model, pp_timeline_model_free);
  if (self->source != NULL && pp_timeline_model_has_replicas (self->source))
    {
      PpTimelineReplicas how = { .replica = self->replica >= 0 ? self->replica : -1,
                                 .all = self->replica == -2,
                                 .unfolded = self->unfolded ? self->unfolded->data : NULL,
                                 .n_unfolded = self->unfolded ? (int) self->unfolded->len : 0 };
      /* a replica the trace holds (dp 4 and 5 of 8: not 0 .. 7) */
      int32_t *dps = NULL;
      int n_dps = how.replica >= 0 ? pp_timeline_model_replica_dps (self->source, &dps) : 0;
      if (how.replica >= 0 && !pp_timeline_dps_holds (dps, n_dps, how.replica))
        how.replica = -1;
      free (dps);
      self->view_model = pp_timeline_view_new (self->source, &how);
    }
  self->model = self->view_model != NULL ? self->view_model : self->source;
}

/* The rows changed under the selection: it and the hover go. */
static void
rows_changed (PpTimelineWidget *self)
{
  rebuild_view (self);
  g_clear_pointer (&self->schedule, pp_schedule_free);
  self->schedule_tried = FALSE;
  clear_hover_and_selection (self);
  self->model_dirty = TRUE;
  gtk_widget_queue_resize (GTK_WIDGET (self));
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[SIGNAL_ROWS_CHANGED], 0);
}

void
pp_timeline_widget_set_replicas (PpTimelineWidget *self, int replica)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (self->unfolded != NULL)
    g_byte_array_set_size (self->unfolded, 0);
  self->replica = replica < -2 ? -1 : replica;
  rows_changed (self);
}

int
pp_timeline_widget_get_replicas (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), -1);
  return self->replica;
}

gboolean
pp_timeline_widget_has_replicas (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), FALSE);
  return self->view_model != NULL;
}

void
pp_timeline_widget_toggle_rank (PpTimelineWidget *self, int rank)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (self->view_model == NULL || rank < 0 || rank >= pp_timeline_model_n_ranks (self->source))
    return;
  /* from all or one replica, a click folds every other rank back */
  if (self->replica != -1)
    {
      int was_all = self->replica == -2;
      pp_timeline_widget_set_replicas (self, -1);
      if (was_all)
        {
          g_byte_array_set_size (self->unfolded, (guint) pp_timeline_model_n_ranks (self->source));
          memset (self->unfolded->data, 1, self->unfolded->len);
        }
    }
  if (self->unfolded->len <= (guint) rank)
    {
      guint old = self->unfolded->len;
      g_byte_array_set_size (self->unfolded, (guint) rank + 1);
      memset (self->unfolded->data + old, 0, (guint) rank + 1 - old);
    }
  self->unfolded->data[rank] = !self->unfolded->data[rank];
  rows_changed (self);
}

int
pp_timeline_widget_n_rows (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), 0);
  return self->model != NULL ? pp_timeline_model_n_ranks (self->model) : 0;
}

void
pp_timeline_widget_set_model (PpTimelineWidget *self, PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));

  if (self->source == model)
    return;
  self->source = model;
  if (self->unfolded != NULL)
    g_byte_array_set_size (self->unfolded, 0);
  rebuild_view (self);
  clear_hover_and_selection (self);
  g_clear_pointer (&self->schedule, pp_schedule_free);
  self->schedule_tried = FALSE;
  self->range_valid = FALSE;
  self->follow = TRUE;
  self->model_dirty = TRUE;
  gint64 start, end;
  if (model_extent (self, &start, &end))
    set_range_internal (self, start, end);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

PpTimelineModel *
pp_timeline_widget_get_model (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), NULL);
  return self->source;
}

PpTimelineModel *
pp_timeline_widget_get_drawn_model (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), NULL);
  return self->model;
}

void
pp_timeline_widget_model_changed (PpTimelineWidget *self)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));

  /* a job of replicas: the rows are built again from what came */
  if (self->view_model != NULL || pp_timeline_model_has_replicas (self->source))
    rebuild_view (self);
  /* Span indices may have shifted (sorted inserts): a stale hover would
   * highlight the wrong block until the pointer moves. */
  self->view.hover_rank = -1;
  self->view.hover_index = -1;
  self->model_dirty = TRUE;
  if (self->live && self->follow)
    follow_live_edge (self);
  else if (!self->range_valid)
    {
      gint64 start, end;
      if (model_extent (self, &start, &end))
        set_range_internal (self, start, end);
    }
  refresh_pointer (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
pp_timeline_widget_set_live (PpTimelineWidget *self, gboolean live)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));

  live = !!live;
  if (self->live == live)
    return;
  self->live = live;
  if (live)
    {
      self->follow = TRUE;
      follow_live_edge (self);
    }
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LIVE]);
}

void
pp_timeline_widget_zoom_to_fit (PpTimelineWidget *self)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));

  gint64 start, end;
  self->follow = TRUE;
  if (model_extent (self, &start, &end))
    set_range_internal (self, start, end);
}

void
pp_timeline_widget_zoom (PpTimelineWidget *self, double factor)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  g_return_if_fail (factor > 0);

  user_moved (self);
  zoom_around (self, 0.5 * ((double) self->view.t0_ns + (double) self->view.t1_ns), factor);
}

void
pp_timeline_widget_get_range (PpTimelineWidget *self, gint64 *t0_ns, gint64 *t1_ns)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (t0_ns)
    *t0_ns = self->view.t0_ns;
  if (t1_ns)
    *t1_ns = self->view.t1_ns;
}

/* A caller setting the range (another widget sharing the time scale) counts
 * as the user moving away from the live edge. */
void
pp_timeline_widget_set_range (PpTimelineWidget *self, gint64 t0_ns, gint64 t1_ns)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  g_return_if_fail (t1_ns > t0_ns);

  user_moved (self);
  set_range_internal (self, t0_ns, t1_ns);
}

void
pp_timeline_widget_get_view (PpTimelineWidget *self, PpTimelineView *out)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  g_return_if_fail (out != NULL);
  current_view (self, out, NULL);
}

void
pp_timeline_widget_set_stuck_live (PpTimelineWidget *self, gboolean live)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (self->view.stuck_live == !!live)
    return;
  self->view.stuck_live = !!live;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
pp_timeline_widget_set_show_plan (PpTimelineWidget *self, gboolean show)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));

  show = !!show;
  if (self->view.show_plan == show)
    return;
  self->view.show_plan = show;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SHOW_PLAN]);
}

gboolean
pp_timeline_widget_get_show_plan (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), FALSE);
  return self->view.show_plan;
}

void
pp_timeline_widget_select (PpTimelineWidget *self, int rank, long index)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (self->model == NULL || rank < 0 || rank >= pp_timeline_model_n_ranks (self->model)
      || index < 0 || (size_t) index >= pp_timeline_model_n_spans (self->model, rank))
    rank = -1, index = -1;
  select_span (self, rank, index);
}

char *
pp_timeline_widget_selection_text (PpTimelineWidget *self)
{
  PpTimelineBlockDetails d;
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), NULL);
  if (self->model == NULL
      || !pp_timeline_block_details (self->model, widget_schedule (self), self->view.selected_rank,
                                     self->view.selected_index, &d))
    return NULL;
  return pp_timeline_block_details_text (self->model, &d);
}

size_t
pp_timeline_widget_get_arrows (PpTimelineWidget *self, const PpTimelineArrow **arrows)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), 0);
  if (arrows)
    *arrows = self->arrows;
  return self->n_arrows;
}

void
pp_timeline_widget_set_measured_range (PpTimelineWidget *self, gint64 t0_ns, gint64 t1_ns)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (t1_ns < t0_ns)
    {
      gint64 x = t0_ns;
      t0_ns = t1_ns;
      t1_ns = x;
    }
  gboolean has = t1_ns > t0_ns;
  if (has == self->view.has_range && (!has || (self->view.range_t0_ns == t0_ns && self->view.range_t1_ns == t1_ns)))
    return;
  self->view.has_range = has;
  self->view.range_t0_ns = t0_ns;
  self->view.range_t1_ns = t1_ns;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[SIGNAL_RANGE_MEASURED], 0);
}

gboolean
pp_timeline_widget_get_measured_range (PpTimelineWidget *self, gint64 *t0_ns, gint64 *t1_ns)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), FALSE);
  if (t0_ns)
    *t0_ns = self->view.range_t0_ns;
  if (t1_ns)
    *t1_ns = self->view.range_t1_ns;
  return self->view.has_range;
}

char *
pp_timeline_widget_range_text (PpTimelineWidget *self)
{
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), NULL);
  if (self->model == NULL || !self->view.has_range)
    return NULL;
  return pp_timeline_range_text (self->model, self->view.range_t0_ns, self->view.range_t1_ns);
}

void
pp_timeline_widget_zoom_to_measured (PpTimelineWidget *self)
{
  g_return_if_fail (PP_IS_TIMELINE_WIDGET (self));
  if (!self->view.has_range)
    return;
  user_moved (self);
  set_range_internal (self, self->view.range_t0_ns, self->view.range_t1_ns);
}

gboolean
pp_timeline_widget_set_filter_text (PpTimelineWidget *self, const char *text, GError **error)
{
  PpTimelineFilter f;
  char msg[160];
  g_return_val_if_fail (PP_IS_TIMELINE_WIDGET (self), FALSE);
  if (pp_timeline_filter_parse (text, &f, msg, sizeof msg) != 0)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, msg);
      return FALSE;
    }
  if (memcmp (&f, &self->filter, sizeof f) != 0)
    {
      self->filter = f;
      gtk_widget_queue_draw (GTK_WIDGET (self));
    }
  return TRUE;
}

/* ---- drawing ----------------------------------------------------------------- */

static void
pp_timeline_widget_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (widget);
  int w = gtk_widget_get_width (widget);
  int h = gtk_widget_get_height (widget);

  self->model_dirty = FALSE;
  if (w <= 0 || h <= 0 || self->model == NULL)
    return;

  PpTimelineView v;
  current_view (self, &v, NULL);
  if (v.t1_ns <= v.t0_ns)
    return;                       /* nothing recorded yet */

  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, w, h));
  pp_timeline_render (cr, self->model, &v);
  cairo_destroy (cr);
}

/* ---- tooltip ------------------------------------------------------------------ */

/* What the tooltip says at widget (x, y); NULL where nothing is.  Exposed
 * for the tests (declared there; not part of the header). */
char *pp_timeline_widget_tooltip_text (PpTimelineWidget *self, double x, double y);

char *
pp_timeline_widget_tooltip_text (PpTimelineWidget *self, double x, double y)
{
  PpTimelineView v;
  PpTimelineHit hit;

  if (self->model == NULL || !self->range_valid)
    return NULL;
  PpTimelineLayout l;
  current_view (self, &v, &l);
  if (x < l.x0 && y >= l.rows_y && l.row_h > 0)
    return pp_timeline_row_label_tooltip (self->model, (int) ((y - l.rows_y) / l.row_h), &v);
  if (!pp_timeline_hit (self->model, &v, x, y, &hit))
    return pp_timeline_host_lane_tooltip (self->model, &v, x, y);
  return pp_timeline_hit_tooltip (self->model, &v, &hit);
}

static gboolean
on_query_tooltip (GtkWidget  *widget,
                  int         x,
                  int         y,
                  gboolean    keyboard_mode,
                  GtkTooltip *tooltip,
                  gpointer    user_data)
{
  if (keyboard_mode)
    return FALSE;
  char *text = pp_timeline_widget_tooltip_text (PP_TIMELINE_WIDGET (widget), x, y);
  if (text == NULL)
    return FALSE;
  gtk_tooltip_set_text (tooltip, text);
  g_free (text);
  return TRUE;
}

/* ---- input --------------------------------------------------------------------- */

static void
update_hover_at (PpTimelineWidget *self, gboolean inside, double x, double y)
{
  int rank = -1;
  long index = -1;
  char *text = NULL;

  /* one hit test: the hover outline and the tooltip's text */
  if (inside && self->model != NULL && self->range_valid)
    {
      PpTimelineView v;
      PpTimelineHit hit;
      current_view (self, &v, NULL);
      if (pp_timeline_hit (self->model, &v, x, y, &hit))
        {
          if (!hit.planned && hit.index >= 0)
            {
              rank = hit.rank;
              index = hit.index;
            }
          text = pp_timeline_hit_tooltip (self->model, &v, &hit);
        }
      else
        text = pp_timeline_host_lane_tooltip (self->model, &v, x, y);
    }
  if (rank != self->view.hover_rank || index != self->view.hover_index)
    {
      self->view.hover_rank = rank;
      self->view.hover_index = index;
      gtk_widget_queue_draw (GTK_WIDGET (self));
    }
  /* Ask GTK again only when the tooltip would say something else: every
   * query restarts its delay, and one per model change (30 a second while
   * live) kept the tooltip from ever showing. */
  if (g_strcmp0 (text, self->tip_text) != 0)
    {
      g_free (self->tip_text);
      self->tip_text = text;
      gtk_widget_trigger_tooltip_query (GTK_WIDGET (self));
    }
  else
    g_free (text);
}

static void
update_hover (PpTimelineWidget *self)
{
  update_hover_at (self, self->pointer_inside, self->pointer_x, self->pointer_y);
}

/* Where the pointer is over the widget, in its coordinates, asked of GDK. */
static gboolean
pointer_over_widget (PpTimelineWidget *self, double *x, double *y)
{
  GtkWidget *w = GTK_WIDGET (self);
  GtkNative *native = gtk_widget_get_native (w);
  if (native == NULL || !gtk_widget_get_mapped (w))
    return FALSE;
  GdkSurface *surface = gtk_native_get_surface (native);
  GdkSeat *seat = gdk_display_get_default_seat (gtk_widget_get_display (w));
  GdkDevice *pointer = seat ? gdk_seat_get_pointer (seat) : NULL;
  double sx, sy, nx, ny;
  if (surface == NULL || pointer == NULL
      || !gdk_surface_get_device_position (surface, pointer, &sx, &sy, NULL))
    return FALSE;
  gtk_native_get_surface_transform (native, &nx, &ny);
  graphene_point_t p = GRAPHENE_POINT_INIT ((float) (sx - nx), (float) (sy - ny)), q;
  if (!gtk_widget_compute_point (GTK_WIDGET (native), w, &p, &q) || !gtk_widget_contains (w, q.x, q.y))
    return FALSE;
  *x = q.x;
  *y = q.y;
  return TRUE;
}

/* What lies under a pointer that did not move has changed (the view moved,
 * or the model): hover and tooltip again, or a stale tooltip stays up.
 * GTK sends no enter to a widget that appears under a still pointer (the
 * app's timeline, when the window opens over it), yet it shows that
 * widget's tooltips: without a crossing of our own, GDK says where the
 * pointer is. */
static void
refresh_pointer (PpTimelineWidget *self)
{
  gboolean inside = self->pointer_inside;
  double x = self->pointer_x, y = self->pointer_y;
  if (!inside)
    inside = pointer_over_widget (self, &x, &y);
  update_hover_at (self, inside, x, y);
}

static void
on_motion (GtkEventControllerMotion *c, double x, double y, PpTimelineWidget *self)
{
  self->pointer_inside = TRUE;
  self->pointer_x = x;
  self->pointer_y = y;
  update_hover (self);
}

static void
on_leave (GtkEventControllerMotion *c, PpTimelineWidget *self)
{
  self->pointer_inside = FALSE;
  update_hover (self);
}

static gboolean
on_scroll (GtkEventControllerScroll *c, double dx, double dy, PpTimelineWidget *self)
{
  GdkModifierType mods = gtk_event_controller_get_current_event_state (GTK_EVENT_CONTROLLER (c));
  gboolean wheel = gtk_event_controller_scroll_get_unit (c) == GDK_SCROLL_UNIT_WHEEL;

  if (!self->range_valid)
    return FALSE;
  user_moved (self);
  if (mods & GDK_CONTROL_MASK)
    {
      double x = self->pointer_inside ? self->pointer_x : 0.5 * gtk_widget_get_width (GTK_WIDGET (self));
      double factor = pow (wheel ? 1.25 : 1.01, -dy);
      zoom_around (self, time_at_x (self, x), factor);
      return TRUE;
    }

  /* Both axes pan time (rows shrink to fit the height, so vertical
   * scrolling has nothing else to do).  Shift swaps as usual. */
  double d = dx + dy;
  if (wheel)
    pan_by (self, d * 0.1 * (double) (self->view.t1_ns - self->view.t0_ns));
  else
    pan_by (self, d * ns_per_px (self));
  return TRUE;
}

static void
on_drag_begin (GtkGestureDrag *g, double x, double y, PpTimelineWidget *self)
{
  PpTimelineView v;
  PpTimelineLayout l;
  self->gesture_t0 = self->view.t0_ns;
  self->gesture_t1 = self->view.t1_ns;
  current_view (self, &v, &l);
  /* on the ruler a drag measures a range; on the rows it pans */
  self->measuring = self->model != NULL && y >= l.ruler_y && y < l.ruler_y + l.ruler_h
                    && x >= l.x0 && x <= l.x1;
  if (self->measuring)
    self->measure_from = (gint64) llround (time_at_x (self, x));
}

static void
on_drag_update (GtkGestureDrag *g, double ox, double oy, PpTimelineWidget *self)
{
  if (!self->range_valid)
    return;
  /* Below the threshold it may still be a click (selection). */
  if (gtk_gesture_get_sequence_state (GTK_GESTURE (g), gtk_gesture_single_get_current_sequence (GTK_GESTURE_SINGLE (g)))
      != GTK_EVENT_SEQUENCE_CLAIMED)
    {
      if (fabs (ox) < 4 && fabs (oy) < 4)
        return;
    }
  gtk_gesture_set_state (GTK_GESTURE (g), GTK_EVENT_SEQUENCE_CLAIMED);
  if (self->measuring)
    {
      double sx, sy;
      gtk_gesture_drag_get_start_point (g, &sx, &sy);
      pp_timeline_widget_set_measured_range (self, self->measure_from,
                                             (gint64) llround (time_at_x (self, sx + ox)));
      return;
    }
  user_moved (self);
  PpTimelineView v;
  PpTimelineLayout l;
  current_view (self, &v, &l);
  double plot = MAX (1, l.x1 - l.x0);
  double dt = -ox * (double) (self->gesture_t1 - self->gesture_t0) / plot;
  gint64 d = (gint64) llround (dt);
  set_range_internal (self, self->gesture_t0 + d, self->gesture_t1 + d);
}

static void
on_zoom_begin (GtkGesture *g, GdkEventSequence *seq, PpTimelineWidget *self)
{
  double x, y;
  self->gesture_t0 = self->view.t0_ns;
  self->gesture_t1 = self->view.t1_ns;
  if (!gtk_gesture_get_bounding_box_center (g, &x, &y))
    x = 0.5 * gtk_widget_get_width (GTK_WIDGET (self));
  self->pinch_anchor_x = x;
}

static void
on_zoom_scale_changed (GtkGestureZoom *g, double scale, PpTimelineWidget *self)
{
  if (!self->range_valid || !(scale > 0))
    return;
  user_moved (self);
  /* Scale from the range the pinch began with, so it does not compound. */
  self->view.t0_ns = self->gesture_t0;
  self->view.t1_ns = self->gesture_t1;
  zoom_around (self, time_at_x (self, self->pinch_anchor_x), scale);
}

static void
on_click_pressed (GtkGestureClick *g, int n_press, double x, double y, PpTimelineWidget *self)
{
  gtk_widget_grab_focus (GTK_WIDGET (self));
}

static void
on_click_released (GtkGestureClick *g, int n_press, double x, double y, PpTimelineWidget *self)
{
  PpTimelineView v;
  PpTimelineHit hit;
  int rank = -1;
  long index = -1;

  if (self->model == NULL || !self->range_valid)
    return;
  if (self->measuring)
    {
      /* a click on the ruler (no drag) clears the measured range */
      if (gtk_gesture_get_sequence_state (GTK_GESTURE (g), gtk_gesture_single_get_current_sequence (GTK_GESTURE_SINGLE (g)))
          != GTK_EVENT_SEQUENCE_CLAIMED)
        pp_timeline_widget_set_measured_range (self, 0, 0);
      self->measuring = FALSE;
      return;
    }
  {
    /* a click on a row's label folds or unfolds its pipeline rank */
    PpTimelineLayout l;
    current_view (self, &v, &l);
    if (self->view_model != NULL && x < l.x0 && y >= l.rows_y && l.row_h > 0)
      {
        int row = (int) ((y - l.rows_y) / l.row_h);
        if (row < pp_timeline_model_n_ranks (self->model))
          {
            pp_timeline_widget_toggle_rank (self, pp_timeline_model_row_rank (self->model, row));
            return;
          }
      }
  }
  if (pp_timeline_hit (self->model, &v, x, y, &hit) && !hit.planned && hit.index >= 0)
    {
      rank = hit.rank;
      index = hit.index;
    }
  if (rank == self->view.selected_rank && index == self->view.selected_index)
    return;
  select_span (self, rank, index);
}

static gboolean
on_key_pressed (GtkEventControllerKey *c, guint keyval, guint keycode,
                GdkModifierType state, PpTimelineWidget *self)
{
  switch (keyval)
    {
    case GDK_KEY_plus: case GDK_KEY_equal: case GDK_KEY_KP_Add:
      pp_timeline_widget_zoom (self, PP_KEY_ZOOM);
      return TRUE;
    case GDK_KEY_minus: case GDK_KEY_KP_Subtract:
      pp_timeline_widget_zoom (self, 1.0 / PP_KEY_ZOOM);
      return TRUE;
    case GDK_KEY_0: case GDK_KEY_KP_0: case GDK_KEY_Home: case GDK_KEY_KP_Home:
      pp_timeline_widget_zoom_to_fit (self);
      return TRUE;
    case GDK_KEY_Left: case GDK_KEY_KP_Left:
      user_moved (self);
      key_pan (self, -0.1);
      return TRUE;
    case GDK_KEY_Right: case GDK_KEY_KP_Right:
      user_moved (self);
      key_pan (self, 0.1);
      return TRUE;
    case GDK_KEY_z: case GDK_KEY_Return: case GDK_KEY_KP_Enter:
      if (!self->view.has_range)
        return FALSE;
      pp_timeline_widget_zoom_to_measured (self);
      return TRUE;
    case GDK_KEY_Escape:
      if (self->view.selected_rank >= 0)
        {
          select_span (self, -1, -1);
          return TRUE;
        }
      if (self->view.has_range)
        {
          pp_timeline_widget_set_measured_range (self, 0, 0);
          return TRUE;
        }
      return FALSE;
    default:
      return FALSE;
    }
}

/* The arrow keys pan the timeline wherever the focus is, without a click
 * into it first: a controller on the window, in the capture phase, hands
 * them to the timeline unless the focus is where arrows mean something
 * else (a text entry such as Find, a list, a slider, a popover) or the
 * timeline has the focus itself (its own controller then runs). */
static gboolean
arrows_belong_to (GtkWidget *focus)
{
  const GType list_types[] = { GTK_TYPE_LIST_VIEW, GTK_TYPE_COLUMN_VIEW, GTK_TYPE_GRID_VIEW,
                               GTK_TYPE_LIST_BOX, GTK_TYPE_POPOVER, GTK_TYPE_TEXT_VIEW };
  if (GTK_IS_EDITABLE (focus) || GTK_IS_RANGE (focus))
    return TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (list_types); i++)
    if (gtk_widget_get_ancestor (focus, list_types[i]) != NULL)
      return TRUE;
  return FALSE;
}

static gboolean
on_root_key_pressed (GtkEventControllerKey *c, guint keyval, guint keycode,
                     GdkModifierType state, PpTimelineWidget *self)
{
  GtkWidget *w = GTK_WIDGET (self);
  gboolean arrow = keyval == GDK_KEY_Left || keyval == GDK_KEY_Right || keyval == GDK_KEY_KP_Left
                   || keyval == GDK_KEY_KP_Right;
  /* the zoom keys the shortcuts window lists, likewise; "+" is Shift+= on
   * most layouts, so Shift alone does not make it a shortcut */
  gboolean zoom = keyval == GDK_KEY_plus || keyval == GDK_KEY_equal || keyval == GDK_KEY_KP_Add
                  || keyval == GDK_KEY_minus || keyval == GDK_KEY_KP_Subtract;
  GdkModifierType mods = state & gtk_accelerator_get_default_mod_mask () & ~(zoom ? GDK_SHIFT_MASK : 0);
  if ((!arrow && !zoom) || mods != 0 || self->model == NULL || !gtk_widget_is_drawable (w)
      || self->key_root == NULL)
    return FALSE;
  GtkWidget *focus = gtk_root_get_focus (GTK_ROOT (self->key_root));
  /* in a list "+" and "-" mean nothing: only a text entry or a slider keeps them */
  if (focus == w
      || (focus != NULL && (arrow ? arrows_belong_to (focus) : GTK_IS_EDITABLE (focus) || GTK_IS_RANGE (focus))))
    return FALSE;
  return on_key_pressed (NULL, keyval, keycode, state, self);
}

static void
pp_timeline_widget_root (GtkWidget *widget)
{
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (widget);
  GTK_WIDGET_CLASS (pp_timeline_widget_parent_class)->root (widget);
  self->key_root = GTK_WIDGET (gtk_widget_get_root (widget));
  self->root_keys = gtk_event_controller_key_new ();
  gtk_event_controller_set_propagation_phase (self->root_keys, GTK_PHASE_CAPTURE);
  g_signal_connect (self->root_keys, "key-pressed", G_CALLBACK (on_root_key_pressed), self);
  gtk_widget_add_controller (self->key_root, self->root_keys);
}

static void
pp_timeline_widget_unroot (GtkWidget *widget)
{
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (widget);
  if (self->key_root != NULL && self->root_keys != NULL)
    gtk_widget_remove_controller (self->key_root, self->root_keys);
  self->key_root = NULL;
  self->root_keys = NULL;
  GTK_WIDGET_CLASS (pp_timeline_widget_parent_class)->unroot (widget);
}

/* ---- GObject ------------------------------------------------------------------- */

static void
pp_timeline_widget_measure (GtkWidget      *widget,
                            GtkOrientation  orientation,
                            int             for_size,
                            int            *minimum,
                            int            *natural,
                            int            *minimum_baseline,
                            int            *natural_baseline)
{
  /* Small minimum so the window can shrink; a useful natural size. */
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      *minimum = 200;
      *natural = 600;
    }
  else
    {
      *minimum = 100;
      *natural = 300;
    }
}

static void
pp_timeline_widget_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (object);

  switch (prop_id)
    {
    case PROP_SHOW_PLAN:
      g_value_set_boolean (value, self->view.show_plan);
      break;
    case PROP_LIVE:
      g_value_set_boolean (value, self->live);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
pp_timeline_widget_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (object);

  switch (prop_id)
    {
    case PROP_SHOW_PLAN:
      pp_timeline_widget_set_show_plan (self, g_value_get_boolean (value));
      break;
    case PROP_LIVE:
      pp_timeline_widget_set_live (self, g_value_get_boolean (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
pp_timeline_widget_dispose (GObject *object)
{
  g_clear_pointer (&PP_TIMELINE_WIDGET (object)->view_model, pp_timeline_model_free);
  g_clear_pointer (&PP_TIMELINE_WIDGET (object)->unfolded, g_byte_array_unref);
  PP_TIMELINE_WIDGET (object)->source = NULL;
  PpTimelineWidget *self = PP_TIMELINE_WIDGET (object);

  self->model = NULL;
  g_clear_pointer (&self->tip_text, g_free);
  g_clear_pointer (&self->arrows, g_free);
  g_clear_pointer (&self->schedule, pp_schedule_free);
  if (self->style_manager != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->style_manager, self);
      self->style_manager = NULL;
    }
  G_OBJECT_CLASS (pp_timeline_widget_parent_class)->dispose (object);
}

static void
pp_timeline_widget_class_init (PpTimelineWidgetClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->get_property = pp_timeline_widget_get_property;
  object_class->set_property = pp_timeline_widget_set_property;
  object_class->dispose = pp_timeline_widget_dispose;
  widget_class->snapshot = pp_timeline_widget_snapshot;
  widget_class->measure = pp_timeline_widget_measure;
  widget_class->root = pp_timeline_widget_root;
  widget_class->unroot = pp_timeline_widget_unroot;

  properties[PROP_SHOW_PLAN] =
    g_param_spec_boolean ("show-plan", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_LIVE] =
    g_param_spec_boolean ("live", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_SPAN_SELECTED] =
    g_signal_new ("span-selected", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_LONG);
  signals[SIGNAL_RANGE_MEASURED] =
    g_signal_new ("range-measured", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_ROWS_CHANGED] = g_signal_new ("rows-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                               0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_RANGE_CHANGED] =
    g_signal_new ("range-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_widget_class_set_css_name (widget_class, "pp-timeline");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
pp_timeline_widget_init (PpTimelineWidget *self)
{
  self->replica = -1;
  self->unfolded = g_byte_array_new ();
  GtkWidget *widget = GTK_WIDGET (self);
  GtkEventController *c;
  GtkGesture *g;

  clear_hover_and_selection (self);
  self->follow = TRUE;

  gtk_widget_set_focusable (widget, TRUE);
  gtk_widget_set_overflow (widget, GTK_OVERFLOW_HIDDEN);
  gtk_widget_set_size_request (widget, 600, 300);
  gtk_widget_set_has_tooltip (widget, TRUE);
  g_signal_connect (widget, "query-tooltip", G_CALLBACK (on_query_tooltip), NULL);

  c = gtk_event_controller_motion_new ();
  g_signal_connect (c, "enter", G_CALLBACK (on_motion), self);
  g_signal_connect (c, "motion", G_CALLBACK (on_motion), self);
  g_signal_connect (c, "leave", G_CALLBACK (on_leave), self);
  gtk_widget_add_controller (widget, c);

  c = gtk_event_controller_scroll_new (GTK_EVENT_CONTROLLER_SCROLL_BOTH_AXES);
  g_signal_connect (c, "scroll", G_CALLBACK (on_scroll), self);
  gtk_widget_add_controller (widget, c);

  c = gtk_event_controller_key_new ();
  g_signal_connect (c, "key-pressed", G_CALLBACK (on_key_pressed), self);
  gtk_widget_add_controller (widget, c);

  g = gtk_gesture_drag_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (g), GDK_BUTTON_PRIMARY);
  g_signal_connect (g, "drag-begin", G_CALLBACK (on_drag_begin), self);
  g_signal_connect (g, "drag-update", G_CALLBACK (on_drag_update), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (g));

  g = gtk_gesture_zoom_new ();
  g_signal_connect (g, "begin", G_CALLBACK (on_zoom_begin), self);
  g_signal_connect (g, "scale-changed", G_CALLBACK (on_zoom_scale_changed), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (g));

  g = gtk_gesture_click_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (g), GDK_BUTTON_PRIMARY);
  g_signal_connect (g, "pressed", G_CALLBACK (on_click_pressed), self);
  g_signal_connect (g, "released", G_CALLBACK (on_click_released), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (g));

  /* Dark mode follows libadwaita; redraw when it flips. */
  self->style_manager = adw_style_manager_get_default ();
  g_signal_connect_swapped (self->style_manager, "notify::dark",
                            G_CALLBACK (gtk_widget_queue_draw), self);
}
