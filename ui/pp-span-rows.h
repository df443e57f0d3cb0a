/* pp-span-rows.h — the span table's rows: every block Find names, sorted.
 *
 * The table under the timeline lists a run's blocks (the work the block
 * lane draws: F, B, I, W, F+B, OPT and data-parallel communication), one
 * row a span, filtered by Find's words with the very test the timeline
 * dims with (pp_span_rows_match), in the order of one column.  A row is a
 * reference into the model (row of the drawn model, index into its spans)
 * plus the two numbers the model does not hold: the idle gap before it and
 * the current sort key; a million spans are 72 MB of rows (as listed,
 * sorted, and the sort's other half), never objects.
 * Plain C, no GLib: a test builds and sorts them without a display.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-timeline-filter.h"
#include "pp-timeline-model.h"

typedef enum {
  PP_SPAN_COL_KIND,
  PP_SPAN_COL_RANK,         /* the drawn model's row: a rank, or a process of a job of replicas */
  PP_SPAN_COL_STAGE,
  PP_SPAN_COL_MICROBATCH,
  PP_SPAN_COL_STEP,
  PP_SPAN_COL_START,
  PP_SPAN_COL_DURATION,
  PP_SPAN_COL_WAIT,         /* idle before it on its row */
  PP_SPAN_N_COLS
} PpSpanColumn;

typedef struct {
  int64_t  key;             /* of the sort column */
  int64_t  wait_ns;         /* pp_span_rows_idle_before; -1: no block before it */
  int32_t  row;
  uint32_t index;           /* into pp_timeline_model_spans (m, row) */
} PpSpanRef;

typedef struct _PpSpanRows PpSpanRows;

PpSpanRows *pp_span_rows_new (void);
void        pp_span_rows_free (PpSpanRows *t);

/* Whether Find names span s of row: a block (pp_span_kind_is_work) the
 * filter matches (NULL or inactive: every block).  The timeline's dimming
 * and Find's count are both this. */
int         pp_span_rows_match (const PpTimelineFilter *f, int row, const PpSpan *s);

/* The idle gap before span index of row: from the end of the row's
 * latest-ending earlier block that ended by its start (the details pane's
 * "idle before"), -1 when no block came before. */
int64_t     pp_span_rows_idle_before (const PpTimelineModel *m, int row, size_t index);

/* The order build sorts in: by column, up or down, ties in (row, start)
 * order either way (start, up, at first). */
void        pp_span_rows_set_order (PpSpanRows *t, PpSpanColumn column, int descending);
/* Lists the spans of m that f names, in that order.  0, or -1 out of
 * memory (the rows are then empty).  The rows hold indices into m: build
 * again after m changes or to sort again (a sort costs what a build does:
 * a few passes over the rows). */
int         pp_span_rows_build (PpSpanRows *t, const PpTimelineModel *m, const PpTimelineFilter *f);
/* Sorts the rows listed from m again, in the order set since: what a
 * click on a header costs, without listing (the filter's pass over every
 * span) again.  m must be unchanged since the build; -1 if it is another
 * model (build then). */
int         pp_span_rows_sort (PpSpanRows *t, const PpTimelineModel *m);
PpSpanColumn pp_span_rows_sort_column (const PpSpanRows *t);
int         pp_span_rows_sort_descending (const PpSpanRows *t);

size_t           pp_span_rows_n (const PpSpanRows *t);          /* listed */
size_t           pp_span_rows_n_blocks (const PpSpanRows *t);   /* every block of the model */
const PpSpanRef *pp_span_rows_get (const PpSpanRows *t, size_t i);   /* NULL past the end */
/* The position of span index of row in the current order, -1 if not listed. */
long             pp_span_rows_position (const PpSpanRows *t, int row, long index);
