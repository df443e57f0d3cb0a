/* pp-span-table.h — the Spans tab: a table of the blocks and their durations.
 *
 * One line a block of the timeline's drawn model (kind, rank — the row, a
 * process of a job of replicas unfolded —, stage, micro-batch, step,
 * start, duration, the idle gap before it), sortable by every column (a
 * click on its header), filtered by Find's words as the timeline dims
 * them; beside it the histogram of block durations by kind and rank
 * (pp-span-histogram.h).  The list is a GListModel over pp-span-rows.h's
 * references: a line's object is made when the view shows it, so a
 * million spans are a million 72-byte rows, not a million objects, and a
 * click on a header or a Find rewrites the few lines the view holds in
 * place (sorting the rows again, no listing, for a header).  A
 * click on a line selects that block on the timeline and brings it into
 * view; a click on a block selects its line.
 */
#pragma once

#include <gtk/gtk.h>

#include "pp-span-histogram.h"
#include "pp-span-rows.h"
#include "pp-timeline-widget.h"

G_BEGIN_DECLS

#define PP_TYPE_SPAN_TABLE (pp_span_table_get_type ())
G_DECLARE_FINAL_TYPE (PpSpanTable, pp_span_table, PP, SPAN_TABLE, GtkWidget)

GtkWidget *pp_span_table_new (void);

/* The timeline it lists and selects on (held; NULL to let go). */
void       pp_span_table_set_timeline (PpSpanTable *self, PpTimelineWidget *timeline);
/* The timeline's model may have changed (new spans, another run): lists
 * again if it did, now when the table is on screen or Find is active,
 * else when it is next shown. */
void       pp_span_table_update (PpSpanTable *self);
/* Find's text (pp-timeline-filter.h); FALSE, the filter kept, for text it
 * cannot read. */
gboolean   pp_span_table_set_filter_text (PpSpanTable *self, const char *text);
/* Whether Find's text names anything (an empty text lists every block). */
gboolean   pp_span_table_filter_active (PpSpanTable *self);

/* The lines as listed now, in their order (built first if stale). */
guint      pp_span_table_n_rows (PpSpanTable *self);
gboolean   pp_span_table_get_row (PpSpanTable *self, guint position, int *row, long *index);
/* The line of span index of row (the drawn model's), -1 if not listed. */
long       pp_span_table_position (PpSpanTable *self, int row, long index);
/* What a click on a column's header does. */
void       pp_span_table_sort (PpSpanTable *self, PpSpanColumn column, gboolean descending);
/* What a click on a line does: selects it, and its block on the timeline,
 * shown (pp_span_table_reveal). */
void       pp_span_table_activate (PpSpanTable *self, guint position);
const PpSpanHistogram *pp_span_table_get_histogram (PpSpanTable *self);

/* Selects span index of row on timeline and brings it into view: the
 * range moves to it, and zooms to it where it would be a sliver or
 * overflow the view. */
void       pp_span_table_reveal (PpTimelineWidget *timeline, int row, long index);

/* Signal "rows-changed": the lines were listed again (their number may
 * have changed). */

G_END_DECLS
