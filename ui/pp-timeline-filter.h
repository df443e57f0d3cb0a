/* pp-timeline-filter.h — find and filter: which blocks a search names.
 *
 * A tiny grammar of terms separated by spaces or commas: a kind (`F`, `B`,
 * `I`, `W`, `FB`, `OPT`), `mb 3` or `micro-batch 3` (also `mb3`, `m3`),
 * `stage 2` (`s2`), `step 5`, `rank 1` (`r1`), `all`; a number may be a
 * range (`mb 2-4`).  Terms combine: kinds are alternatives of each other
 * (`I W`: the backward halves), every other term must hold as well
 * (`W mb 3 step 5`).  Plain C, no GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-event.h"

typedef struct {
  int lo, hi;          /* inclusive; lo > hi: any */
} PpTimelineFilterRange;

typedef struct _PpTimelineFilter {
  int                   active;       /* 0: matches everything */
  uint32_t              kinds;        /* bits of PpSpanKind; 0: any */
  PpTimelineFilterRange microbatch, stage, step, rank;
} PpTimelineFilter;

/* Parses text into out; 0 on success, else -1 with a one-line reason in
 * err ("unknown word 'foo': try F, B, I, W, mb 3, stage 2, step 5").  An
 * empty text is an inactive filter. */
int pp_timeline_filter_parse (const char *text, PpTimelineFilter *out, char *err, size_t err_size);

/* Whether span s of rank matches (a filter that is NULL or inactive
 * matches everything). */
int pp_timeline_filter_match (const PpTimelineFilter *f, int rank, const PpSpan *s);
