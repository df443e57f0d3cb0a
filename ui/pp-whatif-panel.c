/* pp-whatif-panel.c — "what if": the simulator's ranking of schedules and
 * micro-batch counts under the costs measured in this run.
 *
 * update() turns the model's spans into PpMeasuredCosts (per rank, the mean
 * F, full backward and W of one micro-batch, summed over the rank's stages,
 * by suggest's rule: pp_measured_costs_from_spans)
 * and, when they changed, asks pp_suggest again, at most once a second: the
 * costs are kept, so a late change is not lost, only delayed.  The costs
 * are compute's (no GTK: the app reads them on a worker from a snapshot of
 * the model), the rest apply's (on the main loop).  Choosing a
 * row emits "apply" (schedule, ranks, micro-batches, stages per rank).
 */
#include "pp-panels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-suggest.h"

#define PP_WHATIF_MIN_INTERVAL_US G_USEC_PER_SEC
/* Ranking costs this many stage visits or fewer (a few milliseconds): on
 * the main loop, the rows there at once; more goes to a worker thread, so a
 * trace that names a large P or M never freezes the window. */
#define PP_WHATIF_INLINE_WORK (1 << 14)

struct _PpWhatifPanel
{
  GtkWidget        parent_instance;

  GtkWidget       *box;
  GtkWidget       *budget;         /* GtkSpinButton */
  GtkWidget       *status;         /* GtkLabel */
  GtkWidget       *balance;        /* GtkButton: the partition that balances the stages */
  char             partition[64];  /* what it applies; "" hidden */
  GtkWidget       *list;           /* GtkListBox */

  PpMeasuredCosts  costs;          /* f, b, w: g_new'd [ranks] */
  gboolean         have_costs;
  PpSuggestion    *suggestions;    /* malloc'd by pp_suggest */
  size_t           n_suggestions;
  gint64           last_compute_us;
  guint            pending_id;     /* timeout for a throttled recompute */
  gboolean         held_pointer, held_focus;   /* in the list: its rows stay put */
  gboolean         deferred;       /* a recompute waits for the list to be let go */
  const PpTimelineModel *model;   /* the run the rows are for (compared, never read) */
  const char      *rank_word;      /* what its ranks are called ("GPU") */
  PpFramework      framework;      /* who ran the job: each row says how it runs there */
  PpWhatifMeasured measured;       /* the measured configuration's row and its numbers */
  gboolean         have_measured;
  guint            generation;     /* bumped by every recompute: a late worker's result is dropped */
  gboolean         working;        /* a worker is ranking */
};

G_DEFINE_FINAL_TYPE (PpWhatifPanel, pp_whatif_panel, GTK_TYPE_WIDGET)

enum {
  SIGNAL_APPLY,
  SIGNAL_APPLY_PARTITION,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* ---- measured costs ---------------------------------------------------------- */

static void
measured_costs_clear (PpMeasuredCosts *c)
{
  pp_measured_costs_clear (c);   /* malloc'd: by pp-suggest, or copied by copy_doubles */
}

/* Fills out from the model's spans (its rows: one replica, as suggest
 * takes one) by suggest's rule, pp_measured_costs_from_spans: per rank,
 * per stage the mean F, full backward and W, summed over the rank's
 * stages, DualPipe's stages weighed by the micro-batches they see.  FALSE
 * until every rank has a forward and a backward.  Exposed for the tests. */
gboolean pp_whatif_measured_costs (const PpTimelineModel *m, PpMeasuredCosts *out);

gboolean
pp_whatif_measured_costs (const PpTimelineModel *m, PpMeasuredCosts *out)
{
  int P = pp_timeline_model_n_ranks (m);

  memset (out, 0, sizeof *out);
  if (P < 1)
    return FALSE;
  const PpSpan **rows = g_new (const PpSpan *, P);
  size_t *n = g_new (size_t, P);
  /* a job of replicas: its median copy's, as suggest's costs */
  pp_timeline_model_analysis_rows (m, rows, n);
  /* one rule for every view: candidates are what the job's framework runs */
  gboolean ok = pp_measured_costs_from_spans (pp_timeline_model_description (m), rows, n, P, NULL, out, NULL)
                == PP_OK;
  g_free (rows);
  g_free (n);
  return ok;
}

static gboolean
measured_costs_equal (const PpMeasuredCosts *a, const PpMeasuredCosts *b)
{
  if (a->ranks != b->ranks || a->microbatches != b->microbatches || a->comm != b->comm
      || a->framework != b->framework)
    return FALSE;
  size_t n = (size_t) a->ranks * sizeof (double);
  return memcmp (a->f, b->f, n) == 0 && memcmp (a->b, b->b, n) == 0 && memcmp (a->w, b->w, n) == 0;
}

/* ---- the measured row ---------------------------------------------------------- */

gboolean
pp_whatif_measured (const PpTimelineModel *m, PpWhatifMeasured *out)
{
  const PpTraceDescription *d = m != NULL ? pp_timeline_model_description (m) : NULL;
  PpAnalysisSteps a;

  memset (out, 0, sizeof *out);
  if (d == NULL)
    return FALSE;
  /* M as the costs take it (pp_whatif_measured_costs), the name as the
   * candidates are named */
  out->microbatches = d->n_microbatches > 0 ? d->n_microbatches : 1;
  pp_suggest_measured_name (d->schedule, d->n_virtual, pp_timeline_model_n_ranks (m), out->schedule,
                            sizeof out->schedule, &out->stages_per_rank);
  pp_timeline_model_step_analysis (m, &a);
  out->n_steps = a.n_steps;
  out->step = a.median_step * 1e-9;
  out->bubble = a.bubble_mean;
  pp_analysis_describe_steps (&a, out->steps_text, sizeof out->steps_text);
  pp_analysis_steps_clear (&a);
  return TRUE;
}

gboolean
pp_whatif_row_text (const PpSuggestion *s, const PpWhatifMeasured *measured, char *step, char *bubble,
                    size_t size)
{
  gboolean m = measured != NULL && measured->n_steps > 0
               && pp_suggestion_is (s, measured->schedule, measured->microbatches, measured->stages_per_rank);
  char pc[32];
  g_snprintf (step, size, "%.3f ms", (m ? measured->step : s->step_time) * 1e3);
  g_snprintf (bubble, size, "bubble %s", pp_analysis_format_percent (pc, sizeof pc, m ? measured->bubble : s->bubble, 1));
  return m;
}

/* ---- the list ------------------------------------------------------------------ */

static GtkWidget *
row_label (const char *text, int width_chars, float xalign)
{
  GtkWidget *l = gtk_label_new (text);
  gtk_label_set_width_chars (GTK_LABEL (l), width_chars);
  gtk_label_set_xalign (GTK_LABEL (l), xalign);
  return l;
}

static GtkWidget *
suggestion_row (const PpSuggestion *s, PpFramework framework, const PpWhatifMeasured *measured)
{
  char buf[64], bub[64];
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 12);

  gtk_widget_set_margin_start (box, 6);
  gtk_widget_set_margin_end (box, 6);
  gtk_widget_set_margin_top (box, 4);
  gtk_widget_set_margin_bottom (box, 4);

  GtkWidget *name = row_label (s->schedule, 14, 0.0);
  gtk_widget_add_css_class (name, "heading");
  gtk_box_append (GTK_BOX (box), name);
  if (framework == PP_FRAMEWORK_PYTORCH)
    {
      /* how the job runs it: its class, or pipescope's CSV */
      const char *cls = pp_schedule_pytorch_class (s->schedule);
      GtkWidget *how = gtk_label_new (cls && *cls ? cls : "CSV, loaded with _load_csv");
      gtk_label_set_xalign (GTK_LABEL (how), 0.0);
      gtk_widget_add_css_class (how, "dim-label");
      gtk_box_append (GTK_BOX (box), how);
    }
  else if (framework == PP_FRAMEWORK_MEGATRON)
    {
      /* megatron-core's config for it; the whole line in the tooltip */
      char line[256];
      int g = pp_schedule_name_group (s->schedule);
      g_autofree char *text = g > 0 ? g_strdup_printf ("group %d", g) : g_strdup ("not interleaved");
      GtkWidget *how = gtk_label_new (text);
      gtk_label_set_xalign (GTK_LABEL (how), 0.0);
      gtk_widget_add_css_class (how, "dim-label");
      gtk_widget_set_tooltip_text (how, pp_suggestion_how (s, framework, line, sizeof line));
      gtk_box_append (GTK_BOX (box), how);
    }
  GtkWidget *fill = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 0);
  gtk_widget_set_hexpand (fill, TRUE);
  gtk_box_append (GTK_BOX (box), fill);
  g_snprintf (buf, sizeof buf, "M = %d", s->microbatches);
  gtk_box_append (GTK_BOX (box), row_label (buf, 8, 0.0));
  g_snprintf (buf, sizeof buf, "V = %d", s->stages_per_rank);
  gtk_box_append (GTK_BOX (box), row_label (buf, 6, 0.0));
  gboolean is_measured = pp_whatif_row_text (s, measured, buf, bub, sizeof buf);
  gtk_box_append (GTK_BOX (box), row_label (buf, 11, 1.0));
  gtk_box_append (GTK_BOX (box), row_label (bub, 13, 1.0));
  /* what the two numbers are: this run's measurement, or a prediction */
  GtkWidget *what = row_label (is_measured ? "measured" : "predicted", 9, 0.0);
  gtk_widget_add_css_class (what, is_measured ? "accent" : "dim-label");
  g_autofree char *tip = is_measured
    ? g_strdup_printf ("The configuration this run measured: its median step and mean measured bubble a step over %s "
                       "(the simulator predicts %.3f ms, bubble %.1f%%)", measured->steps_text, s->step_time * 1e3,
                       100 * s->bubble)
    : g_strdup ("The simulator's prediction from the costs measured in this run");
  gtk_widget_set_tooltip_text (what, tip);
  gtk_box_append (GTK_BOX (box), what);
  g_snprintf (buf, sizeof buf, "act. %.2f", s->peak_activation);
  GtkWidget *act = row_label (buf, 10, 1.0);
  gtk_widget_set_tooltip_text (act, "Peak activation memory, in measured micro-batches");
  gtk_box_append (GTK_BOX (box), act);

  GtkWidget *row = gtk_list_box_row_new ();
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
  return row;
}

static void
clear_list (PpWhatifPanel *self)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (self->list)) != NULL)
    gtk_list_box_remove (GTK_LIST_BOX (self->list), child);
}

/* Shows what pp_suggest answered (out is taken). */
static void
show_results (PpWhatifPanel *self, PpStatus st, const PpError *err, PpSuggestion *out, size_t n)
{
  clear_list (self);
  g_clear_pointer (&self->suggestions, free);
  self->n_suggestions = 0;
  if (st != PP_OK)
    {
      gtk_label_set_text (GTK_LABEL (self->status), err->msg[0] ? err->msg : "Cannot rank schedules");
      free (out);
      return;
    }
  /* only what the job's framework runs: pp_suggest's rule (costs.framework) */
  self->suggestions = out;
  self->n_suggestions = n;

  char *msg;
  if (n == 0)
    msg = g_strdup ("No schedule fits this memory budget");
  else
    /* each row says whether it is predicted or, for the measured
     * configuration, measured */
    msg = g_strdup_printf ("Predicted from the costs measured on %d %s%s with %d micro-batches",
                           self->costs.ranks, self->rank_word != NULL ? self->rank_word : "rank",
                           self->costs.ranks == 1 ? "" : "s", self->costs.microbatches);
  gtk_label_set_text (GTK_LABEL (self->status), msg);
  g_free (msg);
  for (size_t i = 0; i < n; i++)
    gtk_list_box_append (GTK_LIST_BOX (self->list),
                         suggestion_row (&out[i], self->framework, self->have_measured ? &self->measured : NULL));
}

/* ---- ranking on a worker thread ------------------------------------------------ */

typedef struct {
  PpMeasuredCosts costs;       /* a copy: the panel's may change meanwhile */
  double          budget;
  guint           generation;
  PpStatus        st;
  PpError         err;
  PpSuggestion   *out;
  size_t          n;
} RankJob;

static void
rank_job_free (gpointer data)
{
  RankJob *j = data;
  measured_costs_clear (&j->costs);
  free (j->out);
  g_free (j);
}

static void
rank_in_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
  RankJob *j = data;
  j->st = pp_suggest (&j->costs, j->budget, &j->out, &j->n, &j->err);
  g_task_return_boolean (task, TRUE);
}

static void
on_ranked (GObject *source, GAsyncResult *res, gpointer user_data)
{
  PpWhatifPanel *self = PP_WHATIF_PANEL (source);
  RankJob *j = g_task_get_task_data (G_TASK (res));

  if (j->generation != self->generation || self->box == NULL)
    return;                        /* a newer recompute, or the panel went */
  self->working = FALSE;
  show_results (self, j->st, &j->err, j->out, j->n);
  j->out = NULL;                   /* taken */
}

/* A copy pp_measured_costs_clear can free (malloc'd, as pp-suggest's). */
static double *
copy_doubles (const double *v, size_t size)
{
  double *c = malloc (size ? size : 1);
  if (c == NULL)
    g_error ("out of memory");
  memcpy (c, v, size);
  return c;
}

static void
recompute (PpWhatifPanel *self)
{
  PpError err = { 0 };
  PpSuggestion *out = NULL;
  size_t n = 0;

  self->last_compute_us = g_get_monotonic_time ();
  self->generation++;
  self->working = FALSE;

  if (!self->have_costs)
    {
      clear_list (self);
      g_clear_pointer (&self->suggestions, free);
      self->n_suggestions = 0;
      gtk_label_set_text (GTK_LABEL (self->status),
                          "Waiting for a forward and a backward on every rank");
      return;
    }

  double budget = gtk_spin_button_get_value (GTK_SPIN_BUTTON (self->budget));
  if (pp_suggest_work (&self->costs) <= PP_WHATIF_INLINE_WORK)
    {
      PpStatus st = pp_suggest (&self->costs, budget, &out, &n, &err);
      show_results (self, st, &err, out, n);
      return;
    }

  /* The old rows stay until the new ones come. */
  RankJob *j = g_new0 (RankJob, 1);
  size_t sz = (size_t) self->costs.ranks * sizeof (double);
  j->costs = self->costs;
  j->costs.f = copy_doubles (self->costs.f, sz);
  j->costs.b = copy_doubles (self->costs.b, sz);
  j->costs.w = copy_doubles (self->costs.w, sz);
  j->budget = budget;
  j->generation = self->generation;
  self->working = TRUE;
  gtk_label_set_text (GTK_LABEL (self->status), "Ranking schedules…");
  GTask *task = g_task_new (self, NULL, on_ranked, NULL);
  g_task_set_task_data (task, j, rank_job_free);
  g_task_run_in_thread (task, rank_in_thread);
  g_object_unref (task);
}

gboolean
pp_whatif_panel_is_working (PpWhatifPanel *self)
{
  g_return_val_if_fail (PP_IS_WHATIF_PANEL (self), FALSE);
  return self->working;
}

static void schedule_recompute (PpWhatifPanel *self);

static gboolean
is_held (const PpWhatifPanel *self)
{
  return self->held_pointer || self->held_focus;
}

static gboolean
on_pending_timeout (gpointer data)
{
  PpWhatifPanel *self = data;

  self->pending_id = 0;
  if (is_held (self))
    self->deferred = TRUE;
  else
    recompute (self);
  return G_SOURCE_REMOVE;
}

static void
set_held (PpWhatifPanel *self)
{
  /* Not from here: the list's rows must not go while GTK delivers the
   * crossing to them (that crashed GTK) — a moment later instead. */
  if (!is_held (self) && self->deferred && self->pending_id == 0)
    {
      self->deferred = FALSE;
      self->pending_id = g_timeout_add (50, on_pending_timeout, self);
    }
}

static void
on_list_enter (GtkEventControllerMotion *c, double x, double y, PpWhatifPanel *self)
{
  self->held_pointer = TRUE;
  set_held (self);
}

static void
on_list_leave (GtkEventControllerMotion *c, PpWhatifPanel *self)
{
  self->held_pointer = FALSE;
  set_held (self);
}

static void
on_list_focus_enter (GtkEventControllerFocus *c, PpWhatifPanel *self)
{
  self->held_focus = TRUE;
  set_held (self);
}

static void
on_list_focus_leave (GtkEventControllerFocus *c, PpWhatifPanel *self)
{
  self->held_focus = FALSE;
  set_held (self);
}

/* Now if the last computation is a second old, else once it is; not while
 * the list is under the pointer or has the focus (a live run's new costs
 * reordered the rows about once a second, under a click). */
static void
schedule_recompute (PpWhatifPanel *self)
{
  gint64 since = g_get_monotonic_time () - self->last_compute_us;

  if (is_held (self) && self->last_compute_us != 0)
    {
      self->deferred = TRUE;
      return;
    }

  if (self->last_compute_us == 0 || since >= PP_WHATIF_MIN_INTERVAL_US)
    {
      g_clear_handle_id (&self->pending_id, g_source_remove);
      recompute (self);
    }
  else if (self->pending_id == 0)
    self->pending_id = g_timeout_add ((guint) ((PP_WHATIF_MIN_INTERVAL_US - since) / 1000) + 1,
                                      on_pending_timeout, self);
}

/* What the tab ranks for a model: its measured costs and its measured
 * configuration's row. */
struct _PpWhatifResult
{
  gboolean         have_costs, have_measured;
  PpMeasuredCosts  costs;
  PpWhatifMeasured measured;
  const char      *rank_word;   /* static: "GPU", "CPU rank", "rank" */
};

void
pp_whatif_result_free (PpWhatifResult *res)
{
  if (res == NULL)
    return;
  measured_costs_clear (&res->costs);
  g_free (res);
}

PpWhatifResult *
pp_whatif_panel_compute (const PpTimelineModel *model)
{
  PpWhatifResult *res = g_new0 (PpWhatifResult, 1);
  res->have_costs = model != NULL && pp_whatif_measured_costs (model, &res->costs);
  res->have_measured = model != NULL && pp_whatif_measured (model, &res->measured);
  res->rank_word = pp_timeline_model_rank_word (model);
  return res;
}

void
pp_whatif_panel_apply (PpWhatifPanel *self, const PpTimelineModel *source, PpWhatifResult *res)
{
  g_return_if_fail (PP_IS_WHATIF_PANEL (self));
  g_return_if_fail (res != NULL);

  PpMeasuredCosts c = res->costs;
  gboolean have = res->have_costs;
  memset (&res->costs, 0, sizeof res->costs);   /* taken */
  self->rank_word = res->rank_word;
  /* another run: its rows now, whatever holds the list */
  if (source != self->model)
    {
      self->model = source;
      self->last_compute_us = 0;
    }
  self->framework = have ? c.framework : PP_FRAMEWORK_PIPESCOPE;
  /* the measured row's numbers: new ones redraw the rows, as new costs do */
  gboolean have_mr = res->have_measured;
  gboolean mr_changed = have_mr != self->have_measured
                        || (have_mr && memcmp (&res->measured, &self->measured, sizeof res->measured) != 0);
  self->have_measured = have_mr;
  if (have_mr)
    self->measured = res->measured;
  pp_whatif_result_free (res);

  if (!mr_changed && have == self->have_costs && (!have || measured_costs_equal (&c, &self->costs)))
    {
      measured_costs_clear (&c);
      if (self->last_compute_us == 0)
        schedule_recompute (self);     /* first call: say what we wait for */
      return;
    }
  measured_costs_clear (&self->costs);
  self->costs = c;
  self->have_costs = have;
  schedule_recompute (self);
}

void
pp_whatif_panel_update (PpWhatifPanel *self, const PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_WHATIF_PANEL (self));
  pp_whatif_panel_apply (self, model, pp_whatif_panel_compute (model));
}

static void
on_budget_changed (GtkSpinButton *spin, PpWhatifPanel *self)
{
  /* The user asked: answer now. */
  g_clear_handle_id (&self->pending_id, g_source_remove);
  recompute (self);
}

static void
on_row_activated (GtkListBox *list, GtkListBoxRow *row, PpWhatifPanel *self)
{
  int i = gtk_list_box_row_get_index (row);

  if (i < 0 || (size_t) i >= self->n_suggestions)
    return;
  const PpSuggestion *s = &self->suggestions[i];
  /* chosen: the focus a click left in the list holds the rows no longer */
  self->held_focus = FALSE;
  g_signal_emit (self, signals[SIGNAL_APPLY], 0,
                 s->schedule, s->ranks, s->microbatches, s->stages_per_rank);
}

GtkWidget *
pp_whatif_panel_new (void)
{
  return g_object_new (PP_TYPE_WHATIF_PANEL, NULL);
}

static void
pp_whatif_panel_dispose (GObject *object)
{
  PpWhatifPanel *self = PP_WHATIF_PANEL (object);

  g_clear_handle_id (&self->pending_id, g_source_remove);
  g_clear_pointer (&self->box, gtk_widget_unparent);
  G_OBJECT_CLASS (pp_whatif_panel_parent_class)->dispose (object);
}

static void
pp_whatif_panel_finalize (GObject *object)
{
  PpWhatifPanel *self = PP_WHATIF_PANEL (object);

  measured_costs_clear (&self->costs);
  g_clear_pointer (&self->suggestions, free);
  G_OBJECT_CLASS (pp_whatif_panel_parent_class)->finalize (object);
}

static void
pp_whatif_panel_class_init (PpWhatifPanelClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = pp_whatif_panel_dispose;
  object_class->finalize = pp_whatif_panel_finalize;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "pp-whatif-panel");

  signals[SIGNAL_APPLY] =
    g_signal_new ("apply", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 4,
                  G_TYPE_STRING, G_TYPE_INT, G_TYPE_INT, G_TYPE_INT);
  /* the balanced partition chosen: the same schedule, blocks per stage */
  signals[SIGNAL_APPLY_PARTITION] =
    g_signal_new ("apply-partition", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

double
pp_whatif_panel_get_budget (PpWhatifPanel *self)
{
  g_return_val_if_fail (PP_IS_WHATIF_PANEL (self), 0);
  return gtk_spin_button_get_value (GTK_SPIN_BUTTON (self->budget));
}

static void
on_balance_clicked (GtkButton *button, PpWhatifPanel *self)
{
  if (self->partition[0])
    g_signal_emit (self, signals[SIGNAL_APPLY_PARTITION], 0, self->partition);
}

void
pp_whatif_panel_set_partition (PpWhatifPanel *self, const char *partition, const char *current,
                               double predicted_step, double current_step)
{
  g_return_if_fail (PP_IS_WHATIF_PANEL (self));
  if (partition == NULL || !*partition)
    {
      self->partition[0] = '\0';
      gtk_widget_set_visible (self->balance, FALSE);
      return;
    }
  g_strlcpy (self->partition, partition, sizeof self->partition);
  g_autofree char *text = g_strdup_printf ("Balance the stages: --partition %s (now %s) · "
                                           "predicted %.1f ms a step (now %.1f ms)",
                                           partition, current ? current : "?", predicted_step * 1e3,
                                           current_step * 1e3);
  gtk_button_set_label (GTK_BUTTON (self->balance), text);
  gtk_widget_set_visible (self->balance, TRUE);
}

/* 0 is no budget at all: it reads "no limit", not "0.0" (no room for
 * anything), and typing "no limit" back gives 0. */
static gboolean
on_budget_output (GtkSpinButton *spin, gpointer data)
{
  double v = gtk_adjustment_get_value (gtk_spin_button_get_adjustment (spin));
  char buf[32];
  if (v <= 0)
    g_strlcpy (buf, "no limit", sizeof buf);
  else
    g_snprintf (buf, sizeof buf, "%.1f", v);
  if (g_strcmp0 (gtk_editable_get_text (GTK_EDITABLE (spin)), buf) != 0)
    gtk_editable_set_text (GTK_EDITABLE (spin), buf);
  return TRUE;
}

static int
on_budget_input (GtkSpinButton *spin, double *value, gpointer data)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (spin));
  if (g_ascii_strncasecmp (text, "no", 2) == 0)
    {
      *value = 0;
      return TRUE;
    }
  return FALSE;   /* a number: GTK's own parsing */
}

static void
pp_whatif_panel_init (PpWhatifPanel *self)
{
  self->box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_parent (self->box, GTK_WIDGET (self));

  GtkWidget *line = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *label = gtk_label_new_with_mnemonic ("_Memory budget (micro-batches)");
  gtk_box_append (GTK_BOX (line), label);
  self->budget = gtk_spin_button_new_with_range (0, 1024, 1);
  gtk_spin_button_set_digits (GTK_SPIN_BUTTON (self->budget), 1);
  gtk_spin_button_set_increments (GTK_SPIN_BUTTON (self->budget), 0.5, 4);
  gtk_widget_set_tooltip_text (self->budget,
                               "The most activation memory a GPU may hold, in micro-batches "
                               "of the measured run; 0 = no limit");
  gtk_label_set_mnemonic_widget (GTK_LABEL (label), self->budget);
  /* new_with_range makes it numeric, which refuses the letters of "no limit" */
  gtk_spin_button_set_numeric (GTK_SPIN_BUTTON (self->budget), FALSE);
  g_signal_connect (self->budget, "output", G_CALLBACK (on_budget_output), NULL);
  g_signal_connect (self->budget, "input", G_CALLBACK (on_budget_input), NULL);
  gtk_editable_set_width_chars (GTK_EDITABLE (self->budget), 8);
  on_budget_output (GTK_SPIN_BUTTON (self->budget), NULL);   /* its 0 was shown before the handler */
  g_signal_connect (self->budget, "value-changed", G_CALLBACK (on_budget_changed), self);
  gtk_box_append (GTK_BOX (line), self->budget);
  gtk_box_append (GTK_BOX (self->box), line);

  self->status = gtk_label_new ("No run");
  gtk_label_set_xalign (GTK_LABEL (self->status), 0.0);
  gtk_label_set_wrap (GTK_LABEL (self->status), TRUE);
  gtk_widget_add_css_class (self->status, "dim-label");
  gtk_box_append (GTK_BOX (self->box), self->status);

  self->balance = gtk_button_new_with_label ("");
  gtk_widget_set_halign (self->balance, GTK_ALIGN_START);
  gtk_widget_set_tooltip_text (self->balance, "Set the controls to train the same run with these "
                                              "blocks per stage (the Why tab says where they come from)");
  gtk_widget_set_visible (self->balance, FALSE);
  g_signal_connect (self->balance, "clicked", G_CALLBACK (on_balance_clicked), self);
  gtk_box_append (GTK_BOX (self->box), self->balance);

  self->list = gtk_list_box_new ();
  gtk_list_box_set_selection_mode (GTK_LIST_BOX (self->list), GTK_SELECTION_NONE);
  gtk_list_box_set_activate_on_single_click (GTK_LIST_BOX (self->list), TRUE);
  gtk_widget_add_css_class (self->list, "boxed-list");
  g_signal_connect (self->list, "row-activated", G_CALLBACK (on_row_activated), self);
  GtkEventController *motion = gtk_event_controller_motion_new ();
  g_signal_connect (motion, "enter", G_CALLBACK (on_list_enter), self);
  g_signal_connect (motion, "leave", G_CALLBACK (on_list_leave), self);
  gtk_widget_add_controller (self->list, motion);
  GtkEventController *focus = gtk_event_controller_focus_new ();
  g_signal_connect (focus, "enter", G_CALLBACK (on_list_focus_enter), self);
  g_signal_connect (focus, "leave", G_CALLBACK (on_list_focus_leave), self);
  gtk_widget_add_controller (self->list, focus);

  GtkWidget *scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller),
                                  GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_propagate_natural_height (GTK_SCROLLED_WINDOW (scroller), TRUE);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), self->list);
  gtk_widget_set_vexpand (scroller, TRUE);
  gtk_box_append (GTK_BOX (self->box), scroller);
}
