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
/* a NULL model: no comparison (the table empties) */
void       pp_compare_table_update (PpCompareTable *self, const PpTimelineModel *a, const char *name_a,
                                    const PpTimelineModel *b, const char *name_b);

G_END_DECLS
