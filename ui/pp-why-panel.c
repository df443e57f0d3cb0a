/* pp-why-panel.c — why the bubble is there (runtime/pp-why.h), for a run.
 *
 * Per rank a stacked bar of its idle time a step by cause (schedule,
 * imbalance, transfers, runtime; Okabe-Ito colors, the numbers on hover):
 * the parts are never negative and add up to the measured idle, so the
 * bar's length is the measured idle.  Under it what runtime is made of
 * per rank (pp-why-runtime.h: each part named with its share; the bar's
 * tooltip lists them under runtime), each stage's share of the critical
 * path and the "what to change" line.
 *
 * The analysis counts the steps every view counts (pp-analysis.h: whole
 * steps after the first, the last PP_ANALYSIS_STEPS); it is handed the
 * spans of twice as many last steps, enough for the rule to find them
 * (a step still running is not whole), and runs only again when the model
 * has new spans: a trace of a million spans costs one pass to pick the
 * steps' spans out.  compute (the analysis and the texts, no GTK: the app
 * runs it on a worker over a snapshot of the model) is apart from apply
 * (the labels and bars, on the main loop).
 */
#include "pp-panels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-timeline-fold.h"
#include "pp-why.h"
#include "pp-why-runtime.h"


#define ROW_H   22.0
#define LABEL_W 96.0   /* "CPU rank 12", "nodeB:rank 3" */

struct _PpWhyPanel
{
  GtkWidget   parent_instance;

  GtkWidget  *box;
  GtkWidget  *title;       /* GtkLabel */
  GtkWidget  *bars;        /* GtkDrawingArea */
  GtkWidget  *legend;      /* GtkDrawingArea */
  GtkWidget  *runtime;     /* GtkLabel: runtime's parts, a line per rank */
  GtkWidget  *path;        /* GtkLabel */
  GtkWidget  *change;      /* GtkLabel */

  size_t      seen_spans;  /* the model's span count at the last analysis */
  size_t      seen_plans;  /* and its PLAN items (the schedule comes from them) */
  const PpTimelineModel *seen_model;
  int         ranks;
  PpWhyIdle  *idle;        /* [ranks] */
  int         n_replicas;  /* the replicas analysed (1: one pipeline) */
  char      (*labels)[48]; /* [ranks]: what the trace calls each rank */
  PpTimelinePathBlock *crit;
  size_t      n_crit;
  PpWhyChange last_change; /* of the last analysis */
  gboolean    have_change;
};

G_DEFINE_FINAL_TYPE (PpWhyPanel, pp_why_panel, GTK_TYPE_WIDGET)

static const double part_rgb[PP_WHY_N_PARTS][3] = {
  { 0.337, 0.706, 0.914 },   /* schedule: sky blue */
  { 0.835, 0.369, 0.000 },   /* imbalance: vermillion */
  { 0.000, 0.620, 0.451 },   /* transfers: bluish green */
  { 0.800, 0.475, 0.655 },   /* runtime: reddish purple */
};

/* A part's name where a user reads it.  (dp_comm is no part: data-parallel
 * communication is work of the step, told apart in the tooltip.) */
static const char *
part_label (int k)
{
  return pp_why_part_name (k);
}

static double
max_bar (const PpWhyPanel *self)
{
  double m = 0;
  for (int r = 0; r < self->ranks; r++)
    {
      double pos = 0;
      for (int k = 0; k < PP_WHY_N_PARTS; k++)
        pos += fmax (0, pp_why_idle_part (&self->idle[r], k));
      m = fmax (m, pos);
    }
  return m;
}

static void
fg_color (GtkWidget *w, double rgb[3])
{
  GdkRGBA c;
  gtk_style_context_get_color (gtk_widget_get_style_context (w), &c);
  rgb[0] = c.red;
  rgb[1] = c.green;
  rgb[2] = c.blue;
}

static void
draw_bars (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  PpWhyPanel *self = data;
  double fg[3], scale, plot = width - LABEL_W - 8;
  double m = max_bar (self);
  (void) height;

  if (self->ranks == 0 || m <= 0 || plot < 10)
    return;
  fg_color (GTK_WIDGET (area), fg);
  scale = plot / m;
  cairo_select_font_face (cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 12);
  for (int r = 0; r < self->ranks; r++)
    {
      const PpWhyIdle *w = &self->idle[r];
      double y = r * ROW_H + 3, h = ROW_H - 6, x = LABEL_W;
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, 0, y + h - 4);
      cairo_show_text (cr, self->labels[r]);
      for (int k = 0; k < PP_WHY_N_PARTS; k++)
        {
          double v = pp_why_idle_part (w, k);
          if (v <= 0)
            continue;
          cairo_set_source_rgb (cr, part_rgb[k][0], part_rgb[k][1], part_rgb[k][2]);
          cairo_rectangle (cr, x, y, v * scale, h);
          cairo_fill (cr);
          x += v * scale;
        }
    }
}

static void
draw_legend (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  double fg[3], x = LABEL_W;
  (void) width;
  (void) height;
  (void) data;
  fg_color (GTK_WIDGET (area), fg);
  cairo_select_font_face (cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 12);
  for (int k = 0; k < PP_WHY_N_PARTS; k++)
    {
      cairo_text_extents_t e;
      const char *name = part_label (k);
      cairo_set_source_rgb (cr, part_rgb[k][0], part_rgb[k][1], part_rgb[k][2]);
      cairo_rectangle (cr, x, 4, 12, 12);
      cairo_fill (cr);
      cairo_set_source_rgb (cr, fg[0], fg[1], fg[2]);
      cairo_move_to (cr, x + 16, 14);
      cairo_show_text (cr, name);
      cairo_text_extents (cr, name, &e);
      x += 16 + e.x_advance + 18;
    }
}

static gboolean
query_tooltip (GtkWidget *w, int x, int y, gboolean keyboard, GtkTooltip *tip, gpointer data)
{
  PpWhyPanel *self = data;
  int r = (int) (y / ROW_H);
  (void) keyboard;
  if (r < 0 || r >= self->ranks || x < 0)
    return FALSE;
  const PpWhyIdle *i = &self->idle[r];
  double plot = gtk_widget_get_width (w) - LABEL_W - 8, m = max_bar (self);
  /* the part under the pointer, bold */
  int under = -1;
  if (m > 0 && plot > 10 && x >= LABEL_W)
    {
      double at = (x - LABEL_W) / plot * m, acc = 0;
      for (int k = 0; k < PP_WHY_N_PARTS; k++)
        {
          double v = pp_why_idle_part (i, k);
          if (v <= 0)
            continue;
          if (at >= acc && at < acc + v)
            under = k;
          acc += v;
        }
    }
  GString *s = g_string_new (NULL);
  g_autofree char *who = g_markup_escape_text (self->labels != NULL ? self->labels[r] : "", -1);
  g_string_append_printf (s, "<b>%s</b>: idle %.2f ms a step", who, i->measured * 1e3);
  for (int k = 0; k < PP_WHY_N_PARTS; k++)
    {
      double v = pp_why_idle_part (i, k);
      g_string_append_printf (s, "\n%s%s %.2f ms (%.0f%%)%s", k == under ? "<b>" : "", part_label (k),
                              v * 1e3, i->measured > 0 ? 100.0 * v / i->measured : 0.0,
                              k == under ? "</b>" : "");
      /* runtime's own parts under it, the ones that hold some of it */
      for (int q = 0; k == 3 && v > 0 && q < PP_WHY_N_RUNTIME_PARTS; q++)
        if (i->runtime_parts[q] > 0)
          g_string_append_printf (s, "\n    %s %.2f ms (%.0f%% of runtime)", pp_why_runtime_part_name (q),
                                  i->runtime_parts[q] * 1e3, 100.0 * i->runtime_parts[q] / v);
    }
  if (i->dp_comm > 0)
    g_string_append_printf (s, "\nwork, not idle: data-parallel comm. %.2f ms", i->dp_comm * 1e3);
  gtk_tooltip_set_markup (tip, s->str);
  g_string_free (s, TRUE);
  return TRUE;
}

static void
clear_results (PpWhyPanel *self)
{
  g_clear_pointer (&self->idle, g_free);
  g_clear_pointer (&self->labels, g_free);
  self->have_change = FALSE;
  g_clear_pointer (&self->crit, g_free);
  self->n_crit = 0;
  self->ranks = 0;
}

static void
pp_why_panel_dispose (GObject *object)
{
  PpWhyPanel *self = PP_WHY_PANEL (object);
  clear_results (self);
  g_clear_pointer (&self->box, gtk_widget_unparent);
  G_OBJECT_CLASS (pp_why_panel_parent_class)->dispose (object);
}

static void
pp_why_panel_class_init (PpWhyPanelClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = pp_why_panel_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "ppwhypanel");
}

static GtkWidget *
wrapped_label (const char *css)
{
  GtkWidget *l = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (l), 0);
  gtk_label_set_wrap (GTK_LABEL (l), TRUE);
  gtk_label_set_selectable (GTK_LABEL (l), TRUE);
  if (css != NULL)
    gtk_widget_add_css_class (l, css);
  return l;
}

static void
pp_why_panel_init (PpWhyPanel *self)
{
  self->box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_parent (self->box, GTK_WIDGET (self));
  gtk_widget_set_margin_top (self->box, 6);
  self->title = wrapped_label ("heading");
  gtk_label_set_text (GTK_LABEL (self->title), "Idle time by cause: no whole step yet");
  self->bars = gtk_drawing_area_new ();
  gtk_drawing_area_set_draw_func (GTK_DRAWING_AREA (self->bars), draw_bars, self, NULL);
  gtk_widget_set_has_tooltip (self->bars, TRUE);
  g_signal_connect (self->bars, "query-tooltip", G_CALLBACK (query_tooltip), self);
  self->legend = gtk_drawing_area_new ();
  gtk_drawing_area_set_content_height (GTK_DRAWING_AREA (self->legend), 20);
  gtk_drawing_area_set_draw_func (GTK_DRAWING_AREA (self->legend), draw_legend, self, NULL);
  self->runtime = wrapped_label (NULL);
  self->path = wrapped_label (NULL);
  self->change = wrapped_label (NULL);
  gtk_box_append (GTK_BOX (self->box), self->title);
  gtk_box_append (GTK_BOX (self->box), self->bars);
  gtk_box_append (GTK_BOX (self->box), self->legend);
  gtk_box_append (GTK_BOX (self->box), self->runtime);
  gtk_box_append (GTK_BOX (self->box), self->path);
  gtk_box_append (GTK_BOX (self->box), self->change);
}

GtkWidget *
pp_why_panel_new (void)
{
  return g_object_new (PP_TYPE_WHY_PANEL, NULL);
}

/* Blocks and transfers; the optimizer, host spans, kernels and launches for
 * runtime's parts (the optimizer is work there: without it, its time
 * would count as a gap and the panel's parts would not be info's). */
static gboolean
analysed_kind (int kind)
{
  return pp_why_span_kind_analysed (kind);
}

static void
append_steps (GArray *a, GArray *who, const PpSpan *sp, size_t n, int32_t from, int32_t process)
{
  /* a host span of no step (a GC between steps) is kept: a few a step */
  for (size_t i = 0; i < n; i++)
    if ((sp[i].step >= from || (sp[i].step < 0 && pp_span_kind_is_host (sp[i].kind)))
        && analysed_kind (sp[i].kind))
      {
        g_array_append_val (a, sp[i]);
        g_array_append_val (who, process);
      }
}

/* The spans of the model's last steps (block and transfer kinds only),
 * and in who the process that wrote each (-1: none said).  A job of
 * replicas gives every placed process's spans (the model keeps them all;
 * its rows hold one replica's), and the rows' of a rank no process placed. */
static GArray *
last_steps_spans (const PpTimelineModel *m, int keep_steps, GArray *who)
{
  int n_ranks = pp_timeline_model_n_ranks (m);
  int n_places = pp_timeline_model_has_replicas (m) ? pp_timeline_model_n_places (m) : 0;
  int32_t last = -1;
  GArray *a = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  for (int r = 0; r < n_ranks; r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      for (size_t i = 0, n = pp_timeline_model_n_spans (m, r); i < n; i++)
        if (pp_span_kind_is_block (sp[i].kind) && sp[i].step > last)
          last = sp[i].step;
    }
  if (last < 0)
    return a;
  /* one more than kept: the last may still be running */
  int32_t from = last - keep_steps;
  gboolean *placed = g_new0 (gboolean, MAX (n_ranks, 1));
  for (int i = 0; i < n_places; i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      size_t n;
      const PpSpan *sp = pp_timeline_model_place_spans (m, i, &n);
      append_steps (a, who, sp, n, from, p->process);
      if (p->rank >= 0 && p->rank < n_ranks)
        placed[p->rank] = TRUE;
    }
  for (int r = 0; r < n_ranks; r++)
    if (!placed[r])
      append_steps (a, who, pp_timeline_model_spans (m, r), pp_timeline_model_n_spans (m, r), from, -1);
  g_free (placed);
  return a;
}

/* What the analyses over a model read: the spans of its last steps with
 * the process of each, its plans, its block-edge counters with theirs and
 * its places (a job of replicas).  Clear with inputs_clear. */
typedef struct {
  GArray                    *spans, *who;
  const PpTracePlanAction  **pa;
  size_t                    *pn;
  int                        np;
  const PpCounter           *ctr;
  const int32_t             *ctr_who;
  size_t                     n_ctr;
  PpTraceProcess            *procs;
  int                        n_places;
} Inputs;

static void
inputs_of (const PpTimelineModel *model, Inputs *in)
{
  memset (in, 0, sizeof *in);
  in->who = g_array_new (FALSE, FALSE, sizeof (int32_t));
  in->spans = last_steps_spans (model, 2 * PP_ANALYSIS_STEPS, in->who);
  in->np = pp_timeline_model_plans (model, &in->pa, &in->pn);
  in->n_places = pp_timeline_model_has_replicas (model) ? pp_timeline_model_n_places (model) : 0;
  in->n_ctr = pp_timeline_model_edge_counters (model, &in->ctr, &in->ctr_who);
  in->procs = g_new (PpTraceProcess, MAX (in->n_places, 1));
  for (int i = 0; i < in->n_places; i++)
    in->procs[i] = *pp_timeline_model_place (model, i);
}

static void
inputs_clear (Inputs *in)
{
  free (in->pa);
  free (in->pn);
  g_array_free (in->spans, TRUE);
  g_array_free (in->who, TRUE);
  g_free (in->procs);
}

/* A span's name for the analysis (its WAITs' NCCL parts: pp-why.h's
 * PpWhyNames). */
static const char *
model_name (void *user, uint32_t id)
{
  return pp_timeline_model_string (user, id);
}

gboolean
pp_why_panel_analyse (const PpTimelineModel *model, PpWhyReport **rep_out, PpWhyChange *ch_out,
                      PpSchedule **s_out, PpError *err)
{
  const PpTraceDescription *d = model != NULL ? pp_timeline_model_description (model) : NULL;
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL;
  Inputs in;

  *rep_out = NULL;
  if (d == NULL)
    {
      g_snprintf (err->msg, sizeof err->msg, "the trace does not describe its schedule");
      return FALSE;
    }
  inputs_of (model, &in);
  PpWhyPlans plans = { MAX (in.np, 0), in.pa, in.pn };
  /* over the replicas as info analyses them: each replica's pipeline
   * on its own, a rank's median replica shown */
  int32_t *replica = NULL, *ctr_replica = NULL;
  if (in.n_places > 0)
    {
      replica = pp_why_replicas_of_spans (in.procs, (size_t) in.n_places, (const int32_t *) in.who->data,
                                          in.spans->len, err);
      if (in.n_ctr > 0)
        ctr_replica = pp_why_replicas_of_spans (in.procs, (size_t) in.n_places, in.ctr_who, in.n_ctr, err);
    }
  PpWhyNames names = { model_name, (void *) model };
  if (in.n_places == 0 || replica != NULL)
    pp_why_analyse_replicas_named (d, in.np > 0 ? &plans : NULL, (const PpSpan *) in.spans->data, replica,
                                   in.spans->len, in.ctr, ctr_replica, in.n_ctr, &names, 0, &rep, ch_out, &s,
                                   err);
  free (replica);
  free (ctr_replica);
  inputs_clear (&in);
  *rep_out = rep;
  if (s_out != NULL)
    *s_out = s;
  else
    pp_schedule_free (s);
  return rep != NULL;
}

gboolean
pp_why_panel_stragglers (const PpTimelineModel *model, PpStragglerReport **out, PpError *err)
{
  const PpTraceDescription *d = model != NULL ? pp_timeline_model_description (model) : NULL;
  Inputs in;

  *out = NULL;
  if (d == NULL || !pp_timeline_model_has_replicas (model))
    return FALSE;
  inputs_of (model, &in);
  PpWhyPlans plans = { MAX (in.np, 0), in.pa, in.pn };
  PpWhyNames names = { model_name, (void *) model };
  pp_straggler_analyse_named (d, in.np > 0 ? &plans : NULL, (const PpSpan *) in.spans->data,
                              (const int32_t *) in.who->data, in.spans->len, in.ctr, in.ctr_who, in.n_ctr,
                              in.procs, (size_t) in.n_places, &names, out, err);
  inputs_clear (&in);
  return *out != NULL;
}

/* What the tab shows of a model: the analysis's split, the texts, the
 * critical path on the model's clock. */
struct _PpWhyResult
{
  size_t               n_spans, n_plans;   /* of the model analysed: update's key */
  gboolean             ok;                  /* an analysis (else title says why not) */
  char                *title, *runtime, *path, *change_text;
  int                  ranks, n_replicas;
  PpWhyIdle           *idle;                /* [ranks] */
  char               (*labels)[48];         /* [ranks] */
  PpTimelinePathBlock *crit;
  size_t               n_crit;
  PpWhyChange          change;
};

void
pp_why_result_free (PpWhyResult *res)
{
  if (res == NULL)
    return;
  g_free (res->title);
  g_free (res->runtime);
  g_free (res->path);
  g_free (res->change_text);
  g_free (res->idle);
  g_free (res->labels);
  g_free (res->crit);
  g_free (res);
}

gboolean
pp_why_panel_wants (PpWhyPanel *self, const PpTimelineModel *model)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), FALSE);
  return model != self->seen_model || pp_timeline_model_n_spans_analysed (model) != self->seen_spans
         || pp_timeline_model_n_plan_items (model) != self->seen_plans;
}

PpWhyResult *
pp_why_panel_compute (const PpTimelineModel *model)
{
  PpWhyResult *res = g_new0 (PpWhyResult, 1);
  res->n_spans = pp_timeline_model_n_spans_analysed (model);
  res->n_plans = pp_timeline_model_n_plan_items (model);

  PpWhyReport *rep = NULL;
  PpWhyChange ch;
  PpSchedule *s = NULL;
  PpError err = { 0 };
  pp_why_panel_analyse (model, &rep, &ch, &s, &err);
  pp_schedule_free (s);
  if (rep == NULL)
    {
      res->title = g_strdup_printf ("Idle time by cause: %s", err.msg[0] ? err.msg : "no whole step yet");
      return res;
    }

  res->ok = TRUE;
  res->change = ch;
  res->ranks = MIN (rep->ranks, PP_STATS_PANEL_MAX_ROWS);
  res->idle = g_memdup2 (rep->idle, (gsize) MAX (res->ranks, 1) * sizeof *res->idle);
  res->n_replicas = rep->n_replicas;
  res->labels = g_malloc0 ((gsize) MAX (res->ranks, 1) * sizeof *res->labels);
  for (int r = 0; r < res->ranks; r++)
    pp_timeline_model_rank_label (model, r, res->labels[r], sizeof res->labels[r]);
  double sum[PP_WHY_N_PARTS] = { 0 }, total = 0;
  for (int r = 0; r < rep->ranks; r++)
    {
      total += rep->idle[r].measured;
      for (int k = 0; k < PP_WHY_N_PARTS; k++)
        sum[k] += pp_why_idle_part (&rep->idle[r], k);
    }
  int most = 0;
  for (int k = 1; k < PP_WHY_N_PARTS; k++)
    if (sum[k] > sum[most])
      most = k;
  char over[96] = "";
  if (rep->n_replicas > 1)
    g_snprintf (over, sizeof over, ", each rank's median copy of the pipeline of %d", rep->n_replicas);
  res->title = g_strdup_printf ("Idle time by cause, a step (the mean over steps %d\u2013%d, %d step%s: "
                                PP_ANALYSIS_STEP_RULE "%s): %.0f%% of it is %s",
                                rep->steps[0].step, rep->steps[rep->n_steps - 1].step,
                                rep->n_steps, rep->n_steps == 1 ? "" : "s", over,
                                total > 0 ? 100.0 * sum[most] / total : 0.0, part_label (most));

  /* what runtime is made of: a line per rank that has some */
  GString *rt = g_string_new ("Inside runtime (docs/why.md, \"Inside runtime\"):");
  gboolean any_rt = FALSE;
  for (int r = 0; r < res->ranks; r++)
    {
      const PpWhyIdle *w = &res->idle[r];
      if (!(w->runtime > 0))
        continue;
      any_rt = TRUE;
      g_string_append_printf (rt, "\n%s: %.2f ms", res->labels[r], w->runtime * 1e3);
      const char *sep = " = ";
      for (int q = 0; q < PP_WHY_N_RUNTIME_PARTS; q++)
        if (w->runtime_parts[q] > 0 || q == PP_WHY_RT_GC || q == PP_WHY_RT_DESCHEDULED
            || q == PP_WHY_RT_UNATTRIBUTED)
          {
            g_string_append_printf (rt, "%s%s %.0f%%", sep, pp_why_runtime_part_name (q),
                                    100.0 * w->runtime_parts[q] / w->runtime);
            sep = ", ";
          }
      if (w->late_peer >= 0 && w->runtime_parts[PP_WHY_RT_PEER_LATE] > 0)
        g_string_append_printf (rt, " (late: rank %d)", w->late_peer);
    }
  res->runtime = g_string_free (rt, !any_rt);   /* NULL: none */

  /* the critical path's share per stage, the largest first named */
  GString *p = g_string_new ("Critical path: ");
  int top = 0;
  for (int q = 1; q < rep->n_stages; q++)
    if (rep->path_share[q] > rep->path_share[top])
      top = q;
  g_string_append_printf (p, "stage %d holds %.0f%% of the step", top, 100.0 * rep->path_share[top]);
  for (int q = 0; q < rep->n_stages && q < 64; q++)
    if (q != top)
      g_string_append_printf (p, ", stage %d %.0f%%", q, 100.0 * rep->path_share[q]);
  g_string_append_printf (p, ", transfers %.0f%%, gaps %.0f%%", 100.0 * rep->path_transfer_share,
                          100.0 * rep->path_slack_share);
  res->path = g_string_free (p, FALSE);

  GString *c = g_string_new (NULL);
  g_string_append_printf (c, "What to change: stage %d is the slowest (F+B %.2f ms a micro-batch, %.0f%% above the mean stage)",
                          ch.slowest_stage, ch.slowest_cost * 1e3, 100.0 * ch.excess);
  if (ch.has_partition && ch.changed)
    g_string_append_printf (c, "; --partition %s instead of %s predicts a step of %.1f ms, first block to last (the plan now %.1f ms)",
                            ch.partition, ch.current, ch.predicted_step * 1e3, ch.current_step * 1e3);
  if (ch.has_partition && ch.cores > 0)
    g_string_append_printf (c, "; simulated with the ranks sharing this machine's %d core%s", ch.cores, ch.cores == 1 ? "" : "s");
  else if (ch.has_partition)
    g_string_append_printf (c, "; the partition %s already balances it", ch.current);
  res->change_text = g_string_free (c, FALSE);

  /* every analysed step's path, on the spans' clock, for the timeline */
  size_t n = 0;
  for (int i = 0; i < rep->n_steps; i++)
    n += rep->steps[i].path.n;
  res->crit = g_new (PpTimelinePathBlock, MAX (n, 1));
  for (int i = 0; i < rep->n_steps; i++)
    {
      const PpWhyStep *ws = &rep->steps[i];
      for (size_t k = 0; k < ws->path.n; k++)
        {
          const PpWhyBlock *b = &ws->path.steps[k].block;
          res->crit[res->n_crit++] = (PpTimelinePathBlock) {
            b->rank, ws->start_ns + (int64_t) llround (b->start * 1e9),
            ws->start_ns + (int64_t) llround (b->end * 1e9), k > 0 };
        }
    }
  pp_why_report_free (rep);
  return res;
}

void
pp_why_panel_apply (PpWhyPanel *self, const PpTimelineModel *source, PpWhyResult *res)
{
  g_return_if_fail (PP_IS_WHY_PANEL (self));
  g_return_if_fail (res != NULL);

  self->seen_model = source;
  self->seen_spans = res->n_spans;
  self->seen_plans = res->n_plans;
  clear_results (self);
  gtk_label_set_text (GTK_LABEL (self->title), res->title);
  gtk_label_set_text (GTK_LABEL (self->runtime), res->runtime != NULL ? res->runtime : "");
  gtk_label_set_text (GTK_LABEL (self->path), res->path != NULL ? res->path : "");
  gtk_label_set_text (GTK_LABEL (self->change), res->change_text != NULL ? res->change_text : "");
  if (res->ok)
    {
      /* the result's arrays become the panel's */
      self->last_change = res->change;
      self->have_change = TRUE;
      self->ranks = res->ranks;
      self->n_replicas = res->n_replicas;
      self->idle = g_steal_pointer (&res->idle);
      self->labels = g_steal_pointer (&res->labels);
      self->crit = g_steal_pointer (&res->crit);
      self->n_crit = res->n_crit;
    }
  gtk_drawing_area_set_content_height (GTK_DRAWING_AREA (self->bars), (int) (self->ranks * ROW_H));
  gtk_widget_queue_draw (self->bars);
  gtk_widget_queue_draw (self->legend);
  pp_why_result_free (res);
}

void
pp_why_panel_update (PpWhyPanel *self, const PpTimelineModel *model)
{
  g_return_if_fail (PP_IS_WHY_PANEL (self));
  if (pp_why_panel_wants (self, model))
    pp_why_panel_apply (self, model, pp_why_panel_compute (model));
}

void
pp_why_panel_show_pending (PpWhyPanel *self)
{
  g_return_if_fail (PP_IS_WHY_PANEL (self));
  PpWhyResult *res = g_new0 (PpWhyResult, 1);
  res->title = g_strdup ("Idle time by cause: analysing the run\u2026");
  pp_why_panel_apply (self, NULL, res);
}

gboolean
pp_why_panel_is_for (PpWhyPanel *self, const PpTimelineModel *model)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), FALSE);
  return model != NULL && self->seen_model == model;
}

const PpTimelinePathBlock *
pp_why_panel_get_critical_path (PpWhyPanel *self, size_t *n)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), NULL);
  *n = self->n_crit;
  return self->crit;
}

int
pp_why_panel_get_n_rows (PpWhyPanel *self)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), 0);
  return self->ranks;
}

gboolean
pp_why_panel_get_change (PpWhyPanel *self, PpWhyChange *out)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), FALSE);
  if (self->have_change && out != NULL)
    *out = self->last_change;
  return self->have_change;
}

/* Rank r's idle split as the panel shows it (over replicas: its median
 * replica's); FALSE without a result or past the rows. */
gboolean
pp_why_panel_get_idle (PpWhyPanel *self, int r, PpWhyIdle *out, int *n_replicas)
{
  g_return_val_if_fail (PP_IS_WHY_PANEL (self), FALSE);
  if (self->idle == NULL || r < 0 || r >= self->ranks)
    return FALSE;
  *out = self->idle[r];
  if (n_replicas != NULL)
    *n_replicas = self->n_replicas;
  return TRUE;
}
