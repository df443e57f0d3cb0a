/* test-trace-private.h — what test-trace.c (files: round trip, prefixes,
 * corruption, limits) and test-trace-stream.c (streaming and the newer
 * frames) share: one test program's fixture, sample trace and helpers. */
#pragma once

#include <glib.h>
#include <glib/gstdio.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "pp-action.h"
#include "pp-trace.h"
#include "pp-trace-format.h"

typedef struct {
  char *dir;
} Fixture;

#define N_PLAN_RANKS 3

typedef struct {
  PpTraceDescription desc;
  PpTracePlanAction  plan[N_PLAN_RANKS][6];
  size_t             plan_n[N_PLAN_RANKS];
  PpSpan             spans_a[37];
  PpSpan             spans_b[12];
  PpCounter          counter;
} Sample;

#define RANK_HOST_LONG "a-host-name-of-seventy-characters-which-is-longer-than-the-field-holds"

char *fx_path (Fixture *fx, const char *name);
PpSpan extreme_span (int i);
void sample_init (Sample *s);
size_t sample_write (const Sample *s, PpTraceWriter *w);
void assert_span_equal (const PpSpan *a, const PpSpan *b);
PpStatus next_item (PpTraceReader *r, PpTraceItem *item);
guint8 *sample_bytes (const Sample *s, int order, Fixture *fx, gsize *len);
GArray *frame_ends (const guint8 *data, gsize len);

void fixture_setup (Fixture *fx, gconstpointer data);
void fixture_teardown (Fixture *fx, gconstpointer data);

void test_trace_stream_register (void);   /* test-trace-stream.c's tests */
