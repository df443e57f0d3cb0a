/* pp-compare.h — two runs side by side: what differs between them (the
 * table under the stacked timelines when two runs are compared). */
#pragma once

#include <gtk/gtk.h>

#include "pp-timeline-model.h"

G_BEGIN_DECLS

/* One line of the comparison: what, each run's value as shown, and the
 * lower run's over the upper's ("×1.42") for numbers, "same" or "differs"
 * for words; differs says whether the two values differ. */
typedef struct {
  char     what[48];
  char     a[96], b[96];
  char     ratio[24];
  gboolean differs;
} PpCompareRow;

/* The rows for runs a (upper) and b (lower), named name_a and name_b (their
 * file or source): schedule, ranks, micro-batches, stages per rank, steps,
 * mean step time (from step to step), each rank's bubble a step (the median
 * over the steps, pp_timeline_model_step_bubbles) and the mean over the
 * ranks.  At most max rows into rows (a rank past the last row is left
 * out); returns how many. */
size_t     pp_compare_runs (const PpTimelineModel *a, const PpTimelineModel *b, PpCompareRow *rows,
                            size_t max);

/* The table: a header row with the two names, then the rows, those that
 * differ in bold. */
#define PP_TYPE_COMPARE_TABLE (pp_compare_table_get_type ())
G_DECLARE_FINAL_TYPE (PpCompareTable, pp_compare_table, PP, COMPARE_TABLE, GtkWidget)
GtkWidget *pp_compare_table_new (void);
/* a NULL model: no comparison (the table says how to make one) */
void       pp_compare_table_update (PpCompareTable *self, const PpTimelineModel *a, const char *name_a,
                                    const PpTimelineModel *b, const char *name_b);
/* update() in two halves, as the Statistics tab's (pp_stats_panel_compute),
 * for the app's worker thread (docs: the window never blocks).  compute:
 * the rows of a against b (pp_compare_runs), no GTK, any thread, over
 * models no other thread touches meanwhile (pp_timeline_model_snapshot);
 * NULL when either is NULL.  apply: shows them under name_a and name_b, on
 * the main loop, and keeps them (takes res; NULL: no comparison).
 * update (self, a, na, b, nb) is apply (self, compute (a, b), na, nb). */
typedef struct _PpCompareResult PpCompareResult;
PpCompareResult *pp_compare_table_compute (const PpTimelineModel *a, const PpTimelineModel *b);
void       pp_compare_result_free (PpCompareResult *res);
void       pp_compare_table_apply (PpCompareTable *self, PpCompareResult *res, const char *name_a,
                                   const char *name_b);
/* Other runs compared, their rows under way: "Comparing the runs…", no
 * rows (not the last pair's numbers under another pair's timelines). */
void       pp_compare_table_show_pending (PpCompareTable *self);
/* The rows shown (*rows; NULL with 0 when none: pending or no
 * comparison), for the tests. */
size_t     pp_compare_table_get_rows (PpCompareTable *self, const PpCompareRow **rows);

G_END_DECLS
