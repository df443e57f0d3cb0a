/* pp-span-histogram.h — how long the blocks of each kind take, rank by rank.
 *
 * Beside the span table: for every kind of compute block (F, B, I, W and
 * the overlapped F+B) and every row of the drawn model (a rank, or a
 * process of a job of replicas), how many blocks fall in each of n_bins
 * duration bins.  A kind's bins are the same on every row (from its
 * shortest block to its longest, log-spaced, so that a slow warm-up does
 * not squash the steady state into one bar): rows side by side say which
 * rank runs slower.  Only the blocks Find names are counted, as the table
 * lists them.  The numbers in plain C; the drawing with cairo, a free
 * function as the timeline's is.
 */
#pragma once

#include <cairo.h>
#include <stdint.h>

#include "pp-timeline-filter.h"
#include "pp-timeline-model.h"

#define PP_SPAN_HISTOGRAM_MAX_KINDS 5

typedef struct {
  int       n_rows, n_bins;
  int       n_kinds;                               /* the kinds present, in kinds[] */
  int       kinds[PP_SPAN_HISTOGRAM_MAX_KINDS];    /* PpSpanKind, in F, B, I, W, F+B order */
  int64_t   lo_ns[PP_SPAN_HISTOGRAM_MAX_KINDS];    /* the shortest block of that kind, any row */
  int64_t   hi_ns[PP_SPAN_HISTOGRAM_MAX_KINDS];    /* the longest */
  uint32_t *counts;   /* [(k * n_rows + row) * n_bins + bin] */
  uint32_t *blocks;   /* [k * n_rows + row]: the blocks counted there */
} PpSpanHistogram;

/* Fills out (cleared first) from m's blocks that f names (NULL: all).
 * 0, or -1 out of memory (out is then empty). */
int    pp_span_histogram_compute (PpSpanHistogram *out, const PpTimelineModel *m,
                                  const PpTimelineFilter *f, int n_bins);
void   pp_span_histogram_clear (PpSpanHistogram *h);
/* The bin of a block of kind slot k lasting dur_ns. */
int    pp_span_histogram_bin (const PpSpanHistogram *h, int k, int64_t dur_ns);
/* Where bin edge e (0..n_bins) of kind slot k lies, ns. */
double pp_span_histogram_edge_ns (const PpSpanHistogram *h, int k, int e);

/* Draws it in width x height (a column a kind, a line a row, an axis
 * under each column); m names the rows (NULL: "row N").  min_height: the
 * height under which the lines get too thin to read. */
void   pp_span_histogram_draw (cairo_t *cr, const PpSpanHistogram *h, const PpTimelineModel *m,
                               double width, double height, int dark);
double pp_span_histogram_min_height (const PpSpanHistogram *h);
/* name into out (size bytes), cut at a character's start and ended with
 * "…" where it is wider than max_w in cr's font ("…" alone where nothing
 * else fits): a row's name beside the bars, never over them. */
void   pp_span_histogram_fit_label (cairo_t *cr, const char *name, double max_w, char *out, size_t size);
