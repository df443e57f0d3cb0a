/* test-render-private.h — what test-render.c (the model, pixels, the
 * palette) and test-render-find.c (find, arrows, ranges, exports, the CLI)
 * share: one test program's fixture and helpers. */
#pragma once

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-timeline-model-private.h"
#include "pp-timeline-render.h"
#include "pp-timeline-host-lane.h"
#include "pp-timeline-host-tip.h"
#include "pp-timeline-summary.h"

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)

#define MS 1000000

typedef struct {
  char            *dir, *trace;
  PpTimelineModel *m;
} Fixture;


guint32 pixel (cairo_surface_t *s, int x, int y);
double dist (guint32 px, const double rgb[3]);
double patch_share (cairo_surface_t *s, double x, double y, const double rgb[3], double tol);

void fixture_setup (Fixture *f, gconstpointer data);
void fixture_teardown (Fixture *f, gconstpointer data);

void test_render_find_register (void);   /* test-render-find.c's tests */
