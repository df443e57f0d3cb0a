/* pp-panels.h — the widgets around the timeline: stats per rank, the loss
 * chart, and "what if" (the simulator's ranking of schedules and
 * micro-batch counts under the costs measured in this run). */
#pragma once

#include <gtk/gtk.h>

#include "pp-timeline-model.h"
#include "pp-timeline-render.h"
#include "pp-suggest.h"
#include "pp-why.h"
#include "pp-straggler.h"

G_BEGIN_DECLS

/* Per rank: measured bubble beside the plan's and the closed form, step time,
 * samples/s, peak in-flight micro-batches and activation memory, dropped
 * events.  update() re-reads the model (call it at most a few times a second). */
#define PP_TYPE_STATS_PANEL (pp_stats_panel_get_type ())
G_DECLARE_FINAL_TYPE (PpStatsPanel, pp_stats_panel, PP, STATS_PANEL, GtkWidget)
GtkWidget *pp_stats_panel_new (void);
void       pp_stats_panel_update (PpStatsPanel *self, const PpTimelineModel *model);
/* At most this many rank rows; the ranks past them are one line ("12 more
 * ranks: pipescope-cli info FILE lists them all"), so a trace that names
 * rank 65535 costs the panel what 256 ranks cost. */
#define PP_STATS_PANEL_MAX_ROWS 256
/* Rank rows shown now (for the tests). */
int        pp_stats_panel_get_n_rows (PpStatsPanel *self);
/* The numbers the Stats tab shows, computed without a widget (a test reads
 * them as the tab does): the one analysis of the model's steps
 * (pp-analysis.h), each rank's measured column, the bubble of the trace's
 * last plan and which plan that is, and the closed form.  Clear with
 * pp_stats_numbers_clear. */
typedef struct {
  PpAnalysisSteps steps;            /* which steps count, the median step, the bubble a step */
  int             n_ranks;          /* min (the model's, max_ranks) */
  double         *measured;         /* [n_ranks] steps.bubble; with no step counted the whole
                                     * run's idle share (measured_is_idle); -1 none */
  gboolean        measured_is_idle;
  double         *planned;          /* [n_ranks] the trace's plan's bubble, -1 none */
  PpAnalysisPlan  plan;             /* which plan that is (its description's backend) */
  double          closed;           /* the closed form (F=1, B=2), -1 where none */
  PpTimelineRankStats *rank;        /* [n_ranks] over the whole run (peaks) */
} PpStatsNumbers;
/* Of the first max_ranks ranks (the rows a tab shows). */
void       pp_stats_numbers (const PpTimelineModel *model, int max_ranks, PpStatsNumbers *out);
void       pp_stats_numbers_clear (PpStatsNumbers *n);
/* update() in two halves, for the app's worker thread (docs: the window
 * never blocks).  compute: what the tab shows of model, its numbers
 * (pp_stats_numbers) and texts; no GTK, any thread, on a model no other
 * thread touches meanwhile (pp_timeline_model_snapshot); model may be
 * NULL (no run).  apply: shows it, on the main loop, and keeps it
 * (takes res).  update (self, m) is apply (self, compute (m)). */
typedef struct _PpStatsResult PpStatsResult;
PpStatsResult *pp_stats_panel_compute (const PpTimelineModel *model);
void       pp_stats_result_free (PpStatsResult *res);
void       pp_stats_panel_apply (PpStatsPanel *self, PpStatsResult *res);
/* The numbers the tab shows (the last applied; NULL: no run), for the tests. */
const PpStatsNumbers *pp_stats_panel_get_numbers (PpStatsPanel *self);
/* Another run shown, its analysis under way: "Analysing the run…", no
 * rows (not the last run's numbers under another run's timeline). */
void       pp_stats_panel_show_pending (PpStatsPanel *self);

/* Loss over steps. */
/* Activation memory over time per rank (ACTIVATION_BYTES counters), each
 * rank's peak against what the schedule says it holds (its planned peak of
 * micro-batches in flight), and What if's memory budget; the first
 * PP_MEMORY_CHART_MAX_RANKS ranks. */
#define PP_MEMORY_CHART_MAX_RANKS 16
#define PP_TYPE_MEMORY_CHART (pp_memory_chart_get_type ())
G_DECLARE_FINAL_TYPE (PpMemoryChart, pp_memory_chart, PP, MEMORY_CHART, GtkWidget)
GtkWidget  *pp_memory_chart_new (void);
void        pp_memory_chart_update (PpMemoryChart *self, const PpTimelineModel *model);
/* update() in two halves, as the Stats tab's: compute (the samples, peaks
 * and, when the schedule or its plans are not those of known_key, the
 * planned peaks simulated again) on any thread, no GTK, over a model no
 * other thread touches; apply on the main loop (takes res).  plan_key:
 * what the chart's planned peaks are for (read on the main loop, handed to
 * compute). */
typedef struct _PpMemoryResult PpMemoryResult;
const char *pp_memory_chart_plan_key (PpMemoryChart *self);
PpMemoryResult *pp_memory_chart_compute (const PpTimelineModel *model, const char *known_key);
void        pp_memory_result_free (PpMemoryResult *res);
void        pp_memory_chart_apply (PpMemoryChart *self, PpMemoryResult *res);
void        pp_memory_chart_set_budget (PpMemoryChart *self, double microbatches);
/* Rank r's line of the legend ("CPU rank 0: peak 0.62 MiB · 2 in flight
 * (1F1B: 2)", the last the schedule's planned peak of micro-batches held)
 * into buf; NULL past the ranks shown. */
const char *pp_memory_chart_summary (PpMemoryChart *self, int r, char *buf, size_t size);
/* What the chart says instead of a chart (why it is empty: nothing yet,
 * or a PyTorch or megatron-core job, whose hook records no activation
 * memory); NULL while it draws one. */
const char *pp_memory_chart_empty_reason (PpMemoryChart *self);

#define PP_TYPE_LOSS_CHART (pp_loss_chart_get_type ())
G_DECLARE_FINAL_TYPE (PpLossChart, pp_loss_chart, PP, LOSS_CHART, GtkWidget)
GtkWidget *pp_loss_chart_new (void);
void       pp_loss_chart_update (PpLossChart *self, const PpTimelineModel *model);
/* Two runs compared: both lines (model2 in a second color) and a legend
 * naming them. */
void       pp_loss_chart_update_compare (PpLossChart *self, const PpTimelineModel *model,
                                         const char *title, const PpTimelineModel *model2,
                                         const char *title2);

/* What if: a memory budget spin button and a list of (schedule, M, V,
 * predicted step time, bubble, peak activation) best first.  Choosing a row
 * emits "apply" (const char *schedule, int ranks, int microbatches,
 * int stages_per_rank) so the window can set its controls. */
#define PP_TYPE_WHATIF_PANEL (pp_whatif_panel_get_type ())
G_DECLARE_FINAL_TYPE (PpWhatifPanel, pp_whatif_panel, PP, WHATIF_PANEL, GtkWidget)
GtkWidget *pp_whatif_panel_new (void);
/* Small rankings (a few ms) are done at once; larger ones on a worker
 * thread, their rows delivered to the main loop when done (the previous
 * rows and "Ranking schedules…" meanwhile). */
void       pp_whatif_panel_update (PpWhatifPanel *self, const PpTimelineModel *model);
/* update() in two halves, as the Stats tab's: compute (the measured costs,
 * pp_whatif_measured_costs, and row, pp_whatif_measured), any thread, no
 * GTK, over a model no other thread touches; apply on the main loop (takes
 * res; source compared, never read). */
typedef struct _PpWhatifResult PpWhatifResult;
PpWhatifResult *pp_whatif_panel_compute (const PpTimelineModel *model);
void       pp_whatif_result_free (PpWhatifResult *res);
void       pp_whatif_panel_apply (PpWhatifPanel *self, const PpTimelineModel *source, PpWhatifResult *res);
/* Whether a worker thread is ranking now. */
gboolean   pp_whatif_panel_is_working (PpWhatifPanel *self);
/* The partition that would balance the measured stages (the Why tab's
 * suggestion), offered beside the rows: choosing it emits
 * "apply-partition" (the partition, "2,2,2,2").  NULL hides it.  Times in
 * seconds. */
/* The row of the measured configuration shows what the run measured, as
 * suggest's "← measured" row does: the one analysis's median step and
 * mean measured bubble a step (pp-analysis.h), never a prediction; every
 * other row is the simulator's prediction, and says so. */
typedef struct {
  char   schedule[64];       /* named as the candidates are (pp_suggest_measured_name) */
  int    microbatches, stages_per_rank;
  int    n_steps;            /* steps counted; 0: no whole step yet (no row is marked) */
  double step;               /* seconds: the median step */
  double bubble;             /* the mean over the ranks of the measured bubble a step */
  char   steps_text[160];    /* which steps (pp_analysis_describe_steps) */
} PpWhatifMeasured;
/* FALSE where the model has no description (nothing to mark). */
gboolean   pp_whatif_measured (const PpTimelineModel *model, PpWhatifMeasured *out);
/* Row s's numbers as the tab shows them, into step ("286.700 ms") and
 * bubble ("bubble 43.0%"), size bytes each; TRUE when s is the measured
 * configuration (measured may be NULL: none) and the numbers are measured. */
gboolean   pp_whatif_row_text (const PpSuggestion *s, const PpWhatifMeasured *measured, char *step,
                               char *bubble, size_t size);
/* The memory budget the rows are ranked for (micro-batches; 0: none). */
double     pp_whatif_panel_get_budget (PpWhatifPanel *self);
void       pp_whatif_panel_set_partition (PpWhatifPanel *self, const char *partition,
                                          const char *current, double predicted_step,
                                          double current_step);

/* Why the bubble is there (runtime/pp-why.h): per rank a stacked bar of the
 * idle time a step by cause (schedule, imbalance, transfers, runtime; the
 * numbers on hover), each stage's share of the critical path and what to
 * change (the slowest stage; for the bundled model the balanced
 * partition and its predicted step time).  update() analyses the last
 * steps only (bounded work), and only when the model has new spans. */
#define PP_TYPE_WHY_PANEL (pp_why_panel_get_type ())
G_DECLARE_FINAL_TYPE (PpWhyPanel, pp_why_panel, PP, WHY_PANEL, GtkWidget)
GtkWidget *pp_why_panel_new (void);
void       pp_why_panel_update (PpWhyPanel *self, const PpTimelineModel *model);
/* update() in two halves, as the Stats tab's (pp_stats_panel_compute):
 * wants: whether model is another run, or has new spans or plans, since
 * the last apply (update analyses only then); compute: the analysis
 * (pp_why_panel_analyse) and what the tab shows of it, any thread, no
 * GTK; apply: shows it (takes res), on the main loop; source is the model
 * computed over (the one a snapshot was made of), compared, never read. */
typedef struct _PpWhyResult PpWhyResult;
gboolean     pp_why_panel_wants (PpWhyPanel *self, const PpTimelineModel *model);
PpWhyResult *pp_why_panel_compute (const PpTimelineModel *model);
void         pp_why_result_free (PpWhyResult *res);
void         pp_why_panel_apply (PpWhyPanel *self, const PpTimelineModel *source, PpWhyResult *res);
/* Another run shown, its analysis under way: says so (wants is then TRUE). */
void         pp_why_panel_show_pending (PpWhyPanel *self);
/* The analysed steps' critical paths on the model's clock, for the
 * timeline's overlay (valid until the next update). */
const PpTimelinePathBlock *pp_why_panel_get_critical_path (PpWhyPanel *self, size_t *n);
/* Whether what the tab shows was analysed over model (its last apply's
 * source): a run just shown has the previous one's until its own comes. */
gboolean   pp_why_panel_is_for (PpWhyPanel *self, const PpTimelineModel *model);
/* Rank rows shown (for the tests). */
int        pp_why_panel_get_n_rows (PpWhyPanel *self);
/* The analysis the tab shows, without a widget (a test reads the same):
 * the spans of the model's last steps, its plans and replicas, through
 * pp_why_analyse_replicas.  TRUE with *rep (pp_why_report_free), *change
 * and, where s is not NULL, the schedule (pp_schedule_free); FALSE with
 * err's message. */
gboolean   pp_why_panel_analyse (const PpTimelineModel *model, PpWhyReport **rep, PpWhyChange *change,
                                 PpSchedule **s, PpError *err);
/* Stragglers across the mesh (pp-straggler.h) over the same spans, plans,
 * counters and places the Why tab analyses; FALSE (*out NULL) for a model
 * without replicas or an error (err). */
gboolean   pp_why_panel_stragglers (const PpTimelineModel *model, PpStragglerReport **out, PpError *err);
/* The last analysis' "what to change", FALSE before one. */
gboolean   pp_why_panel_get_change (PpWhyPanel *self, PpWhyChange *out);
/* Rank r's idle split shown (a job of replicas: its median replica's, and
 * *n_replicas the replicas analysed; may be NULL); FALSE without one. */
gboolean   pp_why_panel_get_idle (PpWhyPanel *self, int r, PpWhyIdle *out, int *n_replicas);

G_END_DECLS
