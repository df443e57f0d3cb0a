/* test-timeline-fold.c — the views of a job of replicas (issue 27,
 * pp-timeline-fold.h): folded, unfolded, one replica; the statistics over
 * replicas and the slowest replica of each step.
 *
 * pp-synth-mesh (its path the first argument) writes a 2 x 3 job whose
 * replica dp 1 runs 10 µs after dp 0 and dp 2 (--straggler) 1.5 ms late:
 * a folded block is then exactly dp 1's (the median of three), its mark
 * ends where dp 2's block ends, and dp 2 is the slowest of every step. */
#include <cairo.h>
#include <glib.h>
#include <string.h>

#include "pp-test-util.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"
#include "pp-trace.h"

#define P 2
#define D 3
#define M 4
#define STEPS 3

static const char *synth;

static void
feed (PpTimelineModel *m, const char *path)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem it;
  g_assert_nonnull (r);
  for (;;)
    {
      g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_OK);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      pp_timeline_model_add (m, &it);
    }
  pp_trace_reader_free (r);
}

/* Every process of the job into one model (only_dp >= 0: that replica's). */
static PpTimelineModel *
load_job (PpTestCtx *c, int only_dp)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = P * D - 1; g >= 0; g--)
    if (only_dp < 0 || g % D == only_dp)
      {
        char name[64];
        g_snprintf (name, sizeof name, "job.rank%d", g);
        char *path = pp_test_ctx_path (c, name);
        feed (m, path);
        g_free (path);
      }
  return m;
}

static void
write_job (PpTestCtx *c)
{
  char *path = pp_test_ctx_path (c, "job");
  const char *argv[] = { synth, path, G_STRINGIFY (P), G_STRINGIFY (D), G_STRINGIFY (M), G_STRINGIFY (STEPS),
                         "1f1b", "--straggler", "2", NULL };
  int status = -1;
  GError *error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_free (path);
}

/* The spans of process g (its place index in mesh order: rank · D + dp). */
static const PpSpan *
process_spans (const PpTimelineModel *m, int g, size_t *n)
{
  g_assert_cmpint (pp_timeline_model_place (m, g)->process, ==, g);
  return pp_timeline_model_place_spans (m, g, n);
}

static void
test_fold (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_job (&c);
  PpTimelineModel *src = load_job (&c, -1), *one = load_job (&c, 0);
  g_assert_cmpint (pp_timeline_model_n_places (src), ==, P * D);
  g_assert_true (pp_timeline_model_has_replicas (src));
  g_assert_false (pp_timeline_model_has_replicas (one));   /* one process a rank: drawn as it is */
  g_assert_cmpint (pp_timeline_model_dp_size (src), ==, D);

  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (src, &fold);
  g_assert_nonnull (v);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, P);
  char buf[160];
  pp_timeline_model_replica_note (v, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "3 replicas folded (median, mark to the latest end)");
  for (int r = 0; r < P; r++)
    {
      char want[64];
      g_snprintf (want, sizeof want, "CPU rank %d \u00d73", r);
      pp_timeline_model_rank_label (v, r, buf, sizeof buf);
      g_assert_cmpstr (buf, ==, want);
      g_assert_cmpint (pp_timeline_model_row_rank (v, r), ==, r);
      g_assert_cmpint (pp_timeline_model_row_folded (v, r), ==, D);
      /* the median of three is dp 1's block, the mark dp 2's end */
      size_t n, n1, n2;
      const PpSpan *s = pp_timeline_model_spans (v, r);
      const PpSpan *s1 = process_spans (src, r * D + 1, &n1), *s2 = process_spans (src, r * D + 2, &n2);
      n = pp_timeline_model_n_spans (v, r);
      g_assert_cmpuint (n, ==, (gsize) (STEPS * 2 * M));
      g_assert_cmpuint (n1, ==, n);
      g_assert_cmpuint (n2, ==, n);
      for (size_t i = 0; i < n; i++)
        {
          const PpTimelineFold *f = pp_timeline_model_fold (v, r, (long) i);
          g_assert_nonnull (f);
          g_assert_cmpint (s[i].start_ns, ==, s1[i].start_ns);
          g_assert_cmpint (s[i].end_ns, ==, s1[i].end_ns);
          g_assert_cmpint (s[i].kind, ==, s1[i].kind);
          g_assert_cmpint (s[i].microbatch, ==, s1[i].microbatch);
          g_assert_cmpint (f->latest_end_ns, ==, s2[i].end_ns);
          g_assert_cmpint (f->n, ==, D);
          g_assert_cmpint (f->slowest_dp, ==, 2);
          g_assert_cmpint (f->slowest_process, ==, r * D + 2);
        }
    }
  /* the header's bubble is the analysis' (dp 0's), whatever the rows */
  double bs[P + 1], bv[P * D + 1];
  g_assert_cmpint (pp_timeline_model_step_bubbles (one, bs), ==, STEPS);
  g_assert_cmpint (pp_timeline_model_step_bubbles (v, bv), ==, STEPS);
  for (int r = 0; r < P; r++)
    g_assert_cmpfloat (bv[r], ==, bs[r]);
  pp_timeline_model_free (v);

  /* all: a row a process, its spans its own */
  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  v = pp_timeline_view_new (src, &all);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, P * D);
  pp_timeline_model_rank_label (v, 5, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "CPU rank 1 dp 2");
  for (int g = 0; g < P * D; g++)
    {
      size_t n;
      const PpSpan *s = process_spans (src, g, &n);
      g_assert_cmpint (pp_timeline_model_row_rank (v, g), ==, g / D);
      g_assert_cmpint (pp_timeline_model_row_process (v, g), ==, g);
      g_assert_null (pp_timeline_model_fold (v, g, 0));
      g_assert_cmpuint (pp_timeline_model_n_spans (v, g), ==, n);
      for (size_t i = 0; i < n; i++)
        g_assert_cmpint (pp_timeline_model_spans (v, g)[i].start_ns, ==, s[i].start_ns);
    }
  g_assert_cmpint (pp_timeline_model_step_bubbles (v, bv), ==, STEPS);
  g_assert_cmpfloat (bv[5], ==, bs[1]);
  pp_timeline_model_free (v);

  /* rank 1 unfolded: rank 0 folded, then rank 1's three processes */
  uint8_t unfold[P] = { 0, 1 };
  PpTimelineReplicas some = { .replica = -1, .unfolded = unfold, .n_unfolded = P };
  v = pp_timeline_view_new (src, &some);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 1 + D);
  g_assert_cmpint (pp_timeline_model_row_folded (v, 0), ==, D);
  g_assert_cmpint (pp_timeline_model_row_rank (v, 3), ==, 1);
  g_assert_cmpint (pp_timeline_model_row_process (v, 3), ==, D + 2);
  pp_timeline_model_replica_note (v, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "3 replicas folded (median, mark to the latest end); unfolded: rank 1");
  pp_timeline_model_free (v);

  /* one replica: its spans, a row a rank */
  PpTimelineReplicas r2 = { .replica = 2 };
  v = pp_timeline_view_new (src, &r2);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, P);
  pp_timeline_model_replica_note (v, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "replica dp 2 of 3 shown");
  for (int r = 0; r < P; r++)
    {
      size_t n;
      const PpSpan *s = process_spans (src, r * D + 2, &n);
      g_assert_cmpuint (pp_timeline_model_n_spans (v, r), ==, n);
      for (size_t i = 0; i < n; i++)   /* field by field: PpSpan has padding */
        {
          const PpSpan *a = &pp_timeline_model_spans (v, r)[i];
          g_assert_cmpint (a->start_ns, ==, s[i].start_ns);
          g_assert_cmpint (a->end_ns, ==, s[i].end_ns);
          g_assert_cmpint (a->kind, ==, s[i].kind);
          g_assert_cmpint (a->microbatch, ==, s[i].microbatch);
          g_assert_cmpint (a->step, ==, s[i].step);
        }
    }
  pp_timeline_model_free (v);

  pp_timeline_model_free (src);
  pp_timeline_model_free (one);
  pp_test_ctx_clear (&c);
}

static void
test_statistics (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_job (&c);
  PpTimelineModel *src = load_job (&c, -1), *one = load_job (&c, 0);

  PpTimelineSpread sp[P];
  double bs[P + 1];
  memset (sp, 0, sizeof sp);
  g_assert_cmpint (pp_timeline_replica_bubbles (src, P, sp), ==, D);
  g_assert_cmpint (pp_timeline_model_step_bubbles (one, bs), ==, STEPS);
  for (int r = 0; r < P; r++)
    {
      /* every replica runs the same step, shifted: the same bubble */
      g_assert_cmpint (sp[r].n, ==, D);
      g_assert_cmpfloat_with_epsilon (sp[r].median, bs[r], 1e-12);
      g_assert_cmpfloat_with_epsilon (sp[r].max - sp[r].min, 0, 1e-12);
    }

  PpTimelineSlowest *sl = NULL;
  size_t n = pp_timeline_slowest_replicas (src, &sl);
  g_assert_cmpuint (n, ==, (gsize) (STEPS * (1 + P)));
  for (size_t i = 0; i < n; i++)
    {
      g_assert_cmpint (sl[i].step, ==, (int) (i / (1 + P)));
      g_assert_cmpint (sl[i].rank, ==, (int) (i % (1 + P)) - 1);
      g_assert_cmpint (sl[i].dp, ==, 2);
      /* dp 2 runs 1.5 ms + 20 µs late, the median (dp 1) 10 µs */
      g_assert_cmpint (sl[i].lag_ns, ==, 1520000 - 10000);
      const PpTraceProcess *p = pp_timeline_model_process_place (src, sl[i].process);
      g_assert_nonnull (p);
      g_assert_cmpint (p->coord[PP_TRACE_MESH_DP], ==, 2);
    }
  free (sl);
  /* one replica: nothing to compare */
  g_assert_cmpuint (pp_timeline_slowest_replicas (one, &sl), ==, 0);
  g_assert_null (sl);
  pp_timeline_model_free (src);
  pp_timeline_model_free (one);
  pp_test_ctx_clear (&c);
}

/* The mark is drawn: between a folded block's end and the latest end, the
 * row holds the mark's color where the folded view of one replica (no
 * mark) holds the bubble's. */
static void
test_mark_drawn (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_job (&c);
  PpTimelineModel *src = load_job (&c, -1);
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (src, &fold);
  /* rank 1's last block of step 1: its mark runs 1.51 ms past it */
  const PpSpan *s = pp_timeline_model_spans (v, 1);
  size_t n = pp_timeline_model_n_spans (v, 1), last = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i].step == 1)
      last = i;
  const PpTimelineFold *f = pp_timeline_model_fold (v, 1, (long) last);
  g_assert_cmpint (f->latest_end_ns - s[last].end_ns, ==, 1510000);

  PpTimelineView view;
  pp_timeline_view_init (&view, v, 1200, 300);
  view.t0_ns = s[last].start_ns - 2000000;
  view.t1_ns = f->latest_end_ns + 2000000;
  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 1200, 300);
  cairo_t *cr = cairo_create (img);
  pp_timeline_render (cr, v, &view);
  cairo_destroy (cr);
  cairo_surface_flush (img);
  PpTimelineLayout l;
  pp_timeline_layout (v, &view, &l);
  int x = (int) pp_timeline_x_of (&view, &l, s[last].end_ns + 755000);   /* the middle of the mark */
  int dark = 0;
  const unsigned char *px = cairo_image_surface_get_data (img);
  int stride = cairo_image_surface_get_stride (img);
  for (int y = (int) (l.rows_y + l.row_h); y < (int) (l.rows_y + l.row_h + l.block_h); y++)
    {
      const unsigned char *p = px + y * stride + x * 4;
      dark += p[0] + p[1] + p[2] < 3 * 110;   /* the mark: the foreground, 80 % */
    }
  g_assert_cmpint (dark, >=, 1);
  cairo_surface_destroy (img);
  pp_timeline_model_free (v);
  pp_timeline_model_free (src);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_assert_cmpint (argc, >=, 2);
  synth = argv[1];
  g_test_add_func ("/timeline-fold/views", test_fold);
  g_test_add_func ("/timeline-fold/statistics", test_statistics);
  g_test_add_func ("/timeline-fold/mark-drawn", test_mark_drawn);
  return g_test_run ();
}
