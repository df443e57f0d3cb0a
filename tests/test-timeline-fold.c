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
#include <math.h>
#include <string.h>

#include "pp-live.h"
#include "pp-test-util.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-timeline-model-private.h"
#include "pp-timeline-render.h"
#include "pp-trace.h"

#define P 2
#define D 3
#define M 4
#define STEPS 3
#define MS_NS INT64_C (1000000)

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

/* Every process of job base into one model, the last global rank first
 * (only_dp >= 0: that replica's). */
static PpTimelineModel *
load_base (PpTestCtx *c, const char *base, int only_dp)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = P * D - 1; g >= 0; g--)
    if (only_dp < 0 || g % D == only_dp)
      {
        char name[64];
        g_snprintf (name, sizeof name, "%s.rank%d", base, g);
        char *path = pp_test_ctx_path (c, name);
        feed (m, path);
        g_free (path);
      }
  return m;
}

static PpTimelineModel *
load_job (PpTestCtx *c, int only_dp)
{
  return load_base (c, "job", only_dp);
}

/* pp-synth-mesh's job base (dp 2 the straggler), option: one more or NULL */
static void
write_base (PpTestCtx *c, const char *base, const char *option)
{
  char *path = pp_test_ctx_path (c, base);
  const char *argv[] = { synth, path, G_STRINGIFY (P), G_STRINGIFY (D), G_STRINGIFY (M), G_STRINGIFY (STEPS),
                         "1f1b", "--straggler", "2", option, NULL };
  int status = -1;
  GError *error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_free (path);
}

static void
write_job (PpTestCtx *c)
{
  write_base (c, "job", NULL);
}

static void
assert_same_spans (const PpSpan *a, size_t na, const PpSpan *b, size_t nb)
{
  g_assert_cmpuint (na, ==, nb);
  for (size_t i = 0; i < na; i++)   /* field by field: PpSpan has padding */
    {
      g_assert_cmpint (a[i].start_ns, ==, b[i].start_ns);
      g_assert_cmpint (a[i].end_ns, ==, b[i].end_ns);
      g_assert_cmpint (a[i].kind, ==, b[i].kind);
      g_assert_cmpint (a[i].microbatch, ==, b[i].microbatch);
    }
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
      /* dp 2 runs 1.5 ms late, its forwards 1 ms long: out of step */
      g_snprintf (want, sizeof want, "CPU rank %d \u00d73 out of step", r);
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
          g_assert_cmpint (f->median_dp, ==, 1);
          g_assert_cmpint (f->earliest_start_ns, ==, process_spans (src, r * D, &n2)[i].start_ns);
          g_assert_cmpint (f->latest_start_ns, ==, s2[i].start_ns);
        }
    }
  /* the header's bubble is the analysis' (dp 0's), whatever the rows */
  double bs[P + 1], bv[P * D + 1];
  /* the steps that count: all but the first (pp-analysis.h) */
  g_assert_cmpint (pp_timeline_model_step_bubbles (one, bs), ==, STEPS - 1);
  g_assert_cmpint (pp_timeline_model_step_bubbles (v, bv), ==, STEPS - 1);
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
  g_assert_cmpint (pp_timeline_model_step_bubbles (v, bv), ==, STEPS - 1);
  g_assert_cmpfloat (bv[5], ==, bs[1]);

  /* rows of processes carry no plan: no lane is kept for it (the source,
   * rows of pipeline ranks, keeps it) */
  PpTimelineView pv;
  PpTimelineLayout pl;
  pp_timeline_view_init (&pv, v, 1200, 600);
  pv.show_plan = 1;
  pp_timeline_layout (v, &pv, &pl);
  g_assert_cmpfloat (pl.plan_h, ==, 0);
  pp_timeline_view_init (&pv, src, 1200, 600);
  pv.show_plan = 1;
  pp_timeline_layout (src, &pv, &pl);
  g_assert_cmpfloat (pl.plan_h, >, 0);
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
  g_assert_cmpint (pp_timeline_model_step_bubbles (one, bs), ==, STEPS - 1);
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

/* A folded send in the thin lane gets the mark too: past its median end,
 * up to where dp 2's send ended, the thin lane holds the mark's color. */
static void
test_thin_mark_drawn (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_base (&c, "comm", "--comm");
  PpTimelineModel *src = load_base (&c, "comm", -1);
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (src, &fold);
  const PpSpan *s = pp_timeline_model_spans (v, 0);
  size_t n = pp_timeline_model_n_spans (v, 0), pick = n;
  for (size_t i = 0; i < n && pick == n; i++)
    if (s[i].step == 1 && s[i].kind == PP_SPAN_SEND_F)
      pick = i;
  g_assert_cmpuint (pick, <, n);
  const PpTimelineFold *f = pp_timeline_model_fold (v, 0, (long) pick);
  g_assert_nonnull (f);
  g_assert_cmpint (f->slowest_dp, ==, 2);
  g_assert_cmpint (f->latest_end_ns - s[pick].end_ns, ==, 1510000);

  PpTimelineView view;
  pp_timeline_view_init (&view, v, 1200, 300);
  view.t0_ns = s[pick].start_ns - 500000;
  view.t1_ns = f->latest_end_ns + 500000;
  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 1200, 300);
  cairo_t *cr = cairo_create (img);
  pp_timeline_render (cr, v, &view);
  cairo_destroy (cr);
  cairo_surface_flush (img);
  PpTimelineLayout l;
  pp_timeline_layout (v, &view, &l);
  /* the middle of the mark, where no replica's send is (they end 100 µs in) */
  int x = (int) pp_timeline_x_of (&view, &l, s[pick].end_ns + 755000);
  int dark = 0;
  const unsigned char *px = cairo_image_surface_get_data (img);
  int stride = cairo_image_surface_get_stride (img);
  for (int y = (int) (l.rows_y + l.block_h); y < (int) (l.rows_y + l.block_h + l.thin_h); y++)
    {
      const unsigned char *p = px + y * stride + x * 4;
      dark += p[0] + p[1] + p[2] < 3 * 110;
    }
  g_assert_cmpint (dark, >=, 1);
  cairo_surface_destroy (img);
  pp_timeline_model_free (v);
  pp_timeline_model_free (src);
  pp_test_ctx_clear (&c);
}

/* Replicas on two hosts (--offsets: an odd dp's clock 5 s ahead, and its
 * own CLOCK_OFFSET): every process's spans, every row and the folded view
 * on the reference clock, as those of the job written without.  The
 * processes come last global rank first, so that a row changes the
 * process it shows after another one's offset came. */
static void
test_offsets (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_job (&c);
  write_base (&c, "skew", "--offsets");
  PpTimelineModel *want = load_job (&c, -1), *got = load_base (&c, "skew", -1);
  g_assert_cmpint (pp_timeline_model_n_places (got), ==, P * D);
  for (int i = 0; i < P * D; i++)
    {
      size_t na, nb;
      const PpSpan *a = pp_timeline_model_place_spans (got, i, &na), *b = pp_timeline_model_place_spans (want, i, &nb);
      assert_same_spans (a, na, b, nb);
    }
  for (int r = 0; r < P; r++)
    assert_same_spans (pp_timeline_model_spans (got, r), pp_timeline_model_n_spans (got, r),
                       pp_timeline_model_spans (want, r), pp_timeline_model_n_spans (want, r));
  g_assert_cmpuint (pp_timeline_model_n_steps (got), ==, STEPS);
  for (size_t i = 0; i < STEPS; i++)
    g_assert_cmpint (pp_timeline_model_step_starts (got)[i], ==, pp_timeline_model_step_starts (want)[i]);
  g_assert_cmpint (pp_timeline_model_start_ns (got), ==, pp_timeline_model_start_ns (want));
  g_assert_cmpint (pp_timeline_model_end_ns (got), ==, pp_timeline_model_end_ns (want));
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *vg = pp_timeline_view_new (got, &fold), *vw = pp_timeline_view_new (want, &fold);
  for (int r = 0; r < P; r++)
    {
      assert_same_spans (pp_timeline_model_spans (vg, r), pp_timeline_model_n_spans (vg, r),
                         pp_timeline_model_spans (vw, r), pp_timeline_model_n_spans (vw, r));
      g_assert_cmpint (pp_timeline_model_fold (vg, r, 0)->latest_end_ns, ==,
                       pp_timeline_model_fold (vw, r, 0)->latest_end_ns);
    }
  pp_timeline_model_free (vg);
  pp_timeline_model_free (vw);
  pp_timeline_model_free (got);
  pp_timeline_model_free (want);
  pp_test_ctx_clear (&c);
}

/* Places the hook could not read (--unplaced: every file says dp 0, the
 * global ranks laid out G = (D - 1 - dp) · P + pp): numbered within a
 * pipeline rank by global rank, as merge and info number them, and said. */
static void
test_unplaced (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_base (&c, "job", "--unplaced");
  PpTimelineModel *m = load_job (&c, -1);
  g_assert_cmpint (pp_timeline_model_n_places (m), ==, P * D);
  g_assert_cmpint (pp_timeline_model_dp_size (m), ==, D);
  for (int i = 0; i < P * D; i++)
    {
      const PpTraceProcess *p = pp_timeline_model_place (m, i);
      /* place i is rank i / D, dp i % D: the (i % D)-th lowest global rank of the rank */
      g_assert_cmpint (p->rank, ==, i / D);
      g_assert_cmpint (p->coord[PP_TRACE_MESH_DP], ==, i % D);
      g_assert_cmpint (p->process, ==, (i % D) * P + i / D);
      g_assert_cmpint (p->size[PP_TRACE_MESH_DP], ==, D);
      g_assert_true (p->flags & PP_TRACE_PROCESS_UNPLACED);
    }
  /* each row shows its rank's dp 0 (global rank r), whatever came first */
  for (int r = 0; r < P; r++)
    {
      size_t n;
      const PpSpan *s = pp_timeline_model_place_spans (m, r * D, &n);
      assert_same_spans (pp_timeline_model_spans (m, r), pp_timeline_model_n_spans (m, r), s, n);
    }
  char buf[160];
  pp_timeline_model_replica_note (m, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "replica dp 0 of 3 shown (place not read: dp by global rank)");
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &fold);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, P);
  g_assert_cmpint (pp_timeline_model_row_folded (v, 1), ==, D);
  pp_timeline_model_replica_note (v, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "3 replicas folded (median, mark to the latest end); place not read: dp by global rank");
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
  pp_test_ctx_clear (&c);
}

static void
add_item_span (PpTimelineModel *m, int32_t process, int rank, int mb, int64_t t)
{
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN, .process = process };
  it.span = (PpSpan) { .start_ns = t, .end_ns = t + 1000, .rank = rank, .stage = rank, .microbatch = mb,
                       .kind = PP_SPAN_F, .peer_rank = -1 };
  pp_timeline_model_add (m, &it);
}

/* Spans no process tagged, of a placed job: rank 1 runs in one process
 * (2), which takes them; rank 0 runs in two, so they are nobody's and the
 * view says it leaves them out. */
static void
test_untagged (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = 0; g < 3; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info = (PpTraceProcess) { .process = g, .rank = g / 2, .coord = { g / 2, g % 2, 0, 0, 0 },
                                           .size = { 2, 2, 1, 1, 1 }, .pid = 10 + g };
      pp_timeline_model_add (m, &it);
      add_item_span (m, g, g / 2, 0, 1000000);
    }
  add_item_span (m, -1, 1, 1, 2000000);
  add_item_span (m, -1, 0, 1, 2000000);
  g_assert_cmpuint (pp_timeline_model_n_unassigned_spans (m), ==, 1);
  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &all);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 3);
  g_assert_cmpint (pp_timeline_model_row_process (v, 2), ==, 2);
  g_assert_cmpuint (pp_timeline_model_n_spans (v, 2), ==, 2);   /* its own and the untagged one */
  g_assert_cmpint (pp_timeline_model_spans (v, 2)[1].microbatch, ==, 1);
  g_assert_cmpuint (pp_timeline_model_n_spans (v, 0), ==, 1);
  char buf[256];
  pp_timeline_model_replica_note (v, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "2 replicas unfolded: a row a process; 1 span of no process not shown");
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
}

/* Issue 36, item 7: two replicas of a pipeline rank out of step, as on a
 * megatron step where dp 0 ran a block at 1664-1810 ms and dp 1 at
 * 1817-2287: the fold draws dp 0's copy (the median start's, never a mean
 * of the two, which no replica ran), over a band whose pixels cover the
 * union of the copies; the row's label and the tooltips say the replicas
 * are out of step.  A block whose copies overlap is not out of step. */
static PpTimelineModel *
two_replicas (int64_t dp1_start, int64_t dp1_end)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = 0; g < 2; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info = (PpTraceProcess) { .process = g, .rank = 0, .coord = { 0, g, 0, 0, 0 },
                                           .size = { 1, 2, 1, 1, 1 }, .pid = 10 + g };
      pp_timeline_model_add (m, &it);
      PpTraceItem sp = { .type = PP_TRACE_ITEM_SPAN, .process = g };
      sp.span = (PpSpan) { .start_ns = g ? dp1_start : 1664 * MS_NS, .end_ns = g ? dp1_end : 1810 * MS_NS,
                           .rank = 0, .stage = 0, .microbatch = 0, .step = 2, .kind = PP_SPAN_F,
                           .peer_rank = -1 };
      pp_timeline_model_add (m, &sp);
    }
  return m;
}

static void
test_out_of_step (void)
{
  PpTimelineModel *m = two_replicas (1817 * MS_NS, 2287 * MS_NS);
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &fold);
  g_assert_cmpint (pp_timeline_model_row_folded (v, 0), ==, 2);
  g_assert_cmpuint (pp_timeline_model_n_spans (v, 0), ==, 1);
  const PpSpan *s = pp_timeline_model_spans (v, 0);
  const PpTimelineFold *f = pp_timeline_model_fold (v, 0, 0);
  /* the copy drawn is one a replica ran: dp 0's, the lower middle */
  g_assert_cmpint (s->start_ns, ==, 1664 * MS_NS);
  g_assert_cmpint (s->end_ns, ==, 1810 * MS_NS);
  g_assert_cmpint (f->median_dp, ==, 0);
  g_assert_cmpint (f->earliest_start_ns, ==, 1664 * MS_NS);
  g_assert_cmpint (f->latest_start_ns, ==, 1817 * MS_NS);
  g_assert_cmpint (f->latest_end_ns, ==, 2287 * MS_NS);
  g_assert_true (pp_timeline_fold_apart (f, s));
  char buf[96];
  pp_timeline_model_rank_label (v, 0, buf, sizeof buf);
  g_assert_nonnull (strstr (buf, "out of step"));
  int64_t apart;
  int32_t step;
  g_assert_cmpuint (pp_timeline_row_apart (v, 0, &apart, &step), ==, 1);
  g_assert_cmpint (apart, ==, (1817 - 1664) * MS_NS);
  g_assert_cmpint (step, ==, 2);

  /* the band: every pixel column of the union, 1664 to 2287 ms, holds
   * the block's colour (solid over dp 0's copy, faint beyond it), and
   * the columns outside it none */
  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 1200, 300);
  cairo_t *cr = cairo_create (img);
  PpTimelineView view;
  PpTimelineLayout l;
  pp_timeline_view_init (&view, v, 1200, 300);
  view.t0_ns = 1500 * MS_NS;
  view.t1_ns = 2500 * MS_NS;
  view.show_plan = 0;
  pp_timeline_render (cr, v, &view);
  cairo_surface_flush (img);
  pp_timeline_layout (v, &view, &l);
  const unsigned char *px = cairo_image_surface_get_data (img);
  int stride = cairo_image_surface_get_stride (img);
  double fc[3];
  pp_timeline_color (PP_SPAN_F, 0, fc);
  int y = (int) (l.rows_y + l.block_h * 0.2);   /* above the label and the mark */
  int x_a = (int) ceil (pp_timeline_x_of (&view, &l, 1664 * MS_NS)) + 1;
  int x_b = (int) floor (pp_timeline_x_of (&view, &l, 2287 * MS_NS)) - 1;
  int x_m = (int) floor (pp_timeline_x_of (&view, &l, 1810 * MS_NS)) - 1;
  g_assert_cmpint (x_b - x_a, >, 300);
  int tinted = 0, solid = 0;
  for (int x = x_a; x <= x_b; x++)
    {
      uint32_t p = ((const uint32_t *) (px + (size_t) y * (size_t) stride))[x];
      double r = (p >> 16 & 0xff) / 255.0, gr = (p >> 8 & 0xff) / 255.0, b = (p & 0xff) / 255.0;
      /* F is blue: a band pixel is bluer than it is red, the bubble's
       * grey and its vermillion hatch are not */
      tinted += b > r + 0.08;
      solid += x > x_a && x < x_m && fabs (r - fc[0]) < 0.02 && fabs (gr - fc[1]) < 0.02 && fabs (b - fc[2]) < 0.02;
    }
  g_assert_cmpint (tinted, ==, x_b - x_a + 1);
  g_assert_cmpint (solid, ==, x_m - x_a - 1);   /* dp 0's copy, its edges aside */
  for (int x = (int) l.x0 + 2; x < x_a - 3; x++)
    {
      uint32_t p = ((const uint32_t *) (px + (size_t) y * (size_t) stride))[x];
      g_assert_false ((p & 0xff) / 255.0 > (p >> 16 & 0xff) / 255.0 + 0.08);
    }
  cairo_destroy (cr);
  cairo_surface_destroy (img);
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);

  /* copies that overlap (dp 1 10 ms late): in step, the label plain */
  m = two_replicas (1674 * MS_NS, 1820 * MS_NS);
  v = pp_timeline_view_new (m, &fold);
  g_assert_false (pp_timeline_fold_apart (pp_timeline_model_fold (v, 0, 0), pp_timeline_model_spans (v, 0)));
  pp_timeline_model_rank_label (v, 0, buf, sizeof buf);
  g_assert_null (strstr (buf, "out of step"));
  g_assert_cmpuint (pp_timeline_row_apart (v, 0, &apart, &step), ==, 0);
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
}

/* Issue 36: every process's block-edge counters (run delay, probe self,
 * on CPU) are the model's, each with its process, not only the shown
 * replica's: the Why tab analyses every copy, and a rank whose median
 * copy was dp 1 read no run delay (descheduled 0 where info said 58%).
 * A row still takes its shown process's alone. */
static void
test_edge_counters_every_copy (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = 0; g < 2; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info = (PpTraceProcess) { .process = g, .rank = 0, .coord = { 0, g, 0, 0, 0 },
                                           .size = { 1, 2, 1, 1, 1 }, .pid = 10 + g };
      pp_timeline_model_add (m, &it);
      add_item_span (m, g, 0, 0, 1000000);
    }
  for (int g = 0; g < 2; g++)
    for (int k = 0; k < 3; k++)
      {
        PpTraceItem it = { .type = PP_TRACE_ITEM_COUNTER, .process = g };
        it.counter = (PpCounter) { .time_ns = 1000000 + k * 500, .value = 1000.0 * (k + 1) * (g + 1), .rank = 0,
                                   .step = 0, .kind = PP_COUNTER_RUN_DELAY_NS };
        pp_timeline_model_add (m, &it);
      }
  const PpCounter *c = NULL;
  const int32_t *who = NULL;
  g_assert_cmpuint (pp_timeline_model_edge_counters (m, &c, &who), ==, 6);
  int of[2] = { 0, 0 };
  for (int i = 0; i < 6; i++)
    {
      g_assert_true (who[i] == 0 || who[i] == 1);
      of[who[i]]++;
    }
  g_assert_cmpint (of[0], ==, 3);
  g_assert_cmpint (of[1], ==, 3);
  size_t n_delay, n;
  const PpCounter *row = pp_timeline_model_row_edge_counters (m, 0, &n_delay, &n);
  g_assert_nonnull (row);
  g_assert_cmpuint (n, ==, 3);   /* the shown process's (dp 0) */
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat (row[i].value, ==, 1000.0 * (double) (i + 1));
  pp_timeline_model_free (m);
}

/* ---- the live view of a mesh job ---- */

#define LIVE_N 4   /* blocks a process */

/* Process g (dp g of pipeline rank 0, of 1 × 2) served live: its blocks
 * LIVE_N forwards 1 ms apart, dp 1's 100 µs later, on a clock 5 s ahead
 * that its CLOCK_OFFSET brings back. */
static PpLiveServer *
serve_process (int g)
{
  PpError err = { 0 };
  PpLiveConfig cfg = { .no_register = 1 };
  PpLiveServer *s = pp_live_server_new (&cfg, &err);
  g_assert_true (s != NULL || (g_printerr ("%s\n", err.msg), 0));
  PpTraceWriter *w = pp_trace_writer_new_callback (pp_live_server_write, s, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  strcpy (d.schedule, "GPipe");
  strcpy (d.backend, "cpu");
  d.n_ranks = 1;
  d.n_microbatches = LIVE_N;
  d.n_virtual = 1;
  PpTraceProcess place = { .process = g, .rank = 0, .coord = { 0, g, 0, 0, 0 }, .size = { 1, 2, 1, 1, 1 },
                           .pid = 100 + g };
  int64_t skew = g == 1 ? 5000000000 : 0;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_set_process (w, g, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_process (w, &place, &err), ==, PP_OK);
  if (skew != 0)
    g_assert_cmpint (pp_trace_write_clock_offset (w, 0, -skew, &err), ==, PP_OK);
  for (int i = 0; i < LIVE_N; i++)
    {
      int64_t t = 1000000000 + (int64_t) i * 1000000 + g * 100000 + skew;
      PpSpan sp = { .start_ns = t, .end_ns = t + 500000, .rank = 0, .stage = 0, .microbatch = i,
                    .step = 0, .kind = PP_SPAN_F, .peer_rank = -1 };
      g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  return s;
}

/* Everything process g's server has, as the app's recording reads it. */
static void
follow (PpTimelineModel *m, PpLiveServer *s)
{
  PpError err = { 0 };
  PpLiveClient *c = pp_live_client_connect (pp_live_server_socket_path (s), NULL, &err);
  g_assert_true (c != NULL || (g_printerr ("%s\n", err.msg), 0));
  int spans = 0;
  while (spans < LIVE_N)
    {
      PpTraceItem it;
      g_assert_cmpint (pp_live_client_next (c, &it, 1000, &err), ==, PP_OK);
      g_assert_true (it.type != PP_TRACE_ITEM_END || it.need_more);   /* a retry when nothing came yet */
      spans += it.type == PP_TRACE_ITEM_SPAN;
      pp_timeline_model_add (m, &it);
    }
  pp_live_client_free (c);
}

/* Two replicas of a pipeline rank followed live, dp 1 first (issue 27:
 * "the live view mixes two replicas' blocks on one row"): the row shows
 * dp 0 alone, and the view folds them as a file's model does, on one
 * clock. */
static void
test_live (void)
{
  PpLiveServer *s1 = serve_process (1), *s0 = serve_process (0);
  PpTimelineModel *m = pp_timeline_model_new ();
  follow (m, s1);
  follow (m, s0);
  g_assert_cmpint (pp_timeline_model_n_processes (m), ==, 2);
  g_assert_cmpint (pp_timeline_model_n_replicas (m), ==, 2);
  g_assert_cmpuint (pp_timeline_model_n_spans (m, 0), ==, LIVE_N);
  g_assert_cmpuint (pp_timeline_model_n_hidden_spans (m), ==, LIVE_N);
  for (int i = 0; i < LIVE_N; i++)
    g_assert_cmpint (pp_timeline_model_spans (m, 0)[i].start_ns, ==, 1000000000 + (int64_t) i * 1000000);
  PpTimelineReplicas fold = { .replica = -1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &fold);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 1);
  g_assert_cmpint (pp_timeline_model_row_folded (v, 0), ==, 2);
  g_assert_cmpuint (pp_timeline_model_n_spans (v, 0), ==, LIVE_N);
  for (int i = 0; i < LIVE_N; i++)
    {
      const PpTimelineFold *f = pp_timeline_model_fold (v, 0, i);
      g_assert_cmpint (f->n, ==, 2);
      g_assert_cmpint (f->slowest_dp, ==, 1);
      g_assert_cmpint (f->latest_end_ns, ==, 1000000000 + (int64_t) i * 1000000 + 100000 + 500000);
    }
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
  pp_live_server_free (s0);
  pp_live_server_free (s1);
}

/* Rows shorter than a line of text (2 × 64 processes unfolded in 300 px,
 * about 1.5 px a row, as 16 × 128 in 4,000): the labels drawn do not
 * overlap.  The label column's ink comes in separate bands, one a label
 * drawn, with blank pixel rows between them; labels stacked a row apart
 * (each row's own) ran into one black band. */
static void
test_labels_legible (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  char *base = pp_test_ctx_path (&c, "big");
  const char *argv[] = { synth, base, "2", "64", "2", "1", "1f1b", NULL };
  int status = -1;
  GError *error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  PpTimelineModel *src = pp_timeline_model_new ();
  for (int g = 0; g < 128; g++)
    {
      char *path = g_strdup_printf ("%s.rank%d", base, g);
      feed (src, path);
      g_free (path);
    }
  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  PpTimelineModel *v = pp_timeline_view_new (src, &all);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 128);

  PpTimelineView view;
  pp_timeline_view_init (&view, v, 900, 300);
  cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 900, 300);
  cairo_t *cr = cairo_create (img);
  pp_timeline_render (cr, v, &view);
  cairo_destroy (cr);
  cairo_surface_flush (img);
  PpTimelineLayout l;
  pp_timeline_layout (v, &view, &l);
  g_assert_cmpfloat (l.row_h, <, 3);
  const unsigned char *px = cairo_image_surface_get_data (img);
  int stride = cairo_image_surface_get_stride (img);
  int bands = 0, in_band = 0;
  for (int y = (int) l.rows_y; y < (int) (l.rows_y + 128 * l.row_h) && y < 300; y++)
    {
      int ink = 0;
      for (int x = 0; x < (int) l.x0 - 6; x++)
        {
          const unsigned char *p = px + y * stride + x * 4;
          ink |= p[0] + p[1] + p[2] < 3 * 128;
        }
      bands += ink && !in_band;
      in_band = ink;
    }
  /* about 190 px of rows, a label every 9 px or more: 10 or more bands */
  g_assert_cmpint (bands, >=, 10);
  cairo_surface_destroy (img);
  pp_timeline_model_free (v);
  pp_timeline_model_free (src);
  g_free (base);
  pp_test_ctx_clear (&c);
}

/* A process's label wider than the label column (a narrow image, where
 * the column is a fifth of it, or "CPU rank 0 dp 0 tp 0") is drawn
 * smaller, not cut at the image's left edge: at six widths, the first
 * pixel columns hold no ink (a cut label put some of its letters there). */
static void
test_labels_fit (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-fold-");
  write_job (&c);
  PpTimelineModel *src = load_job (&c, -1);
  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  PpTimelineModel *v = pp_timeline_view_new (src, &all);
  int ink = 0, label_ink = 0;
  for (int w = 300; w < 318; w += 3)
    {
      PpTimelineView view;
      pp_timeline_view_init (&view, v, w, 400);
      cairo_surface_t *img = cairo_image_surface_create (CAIRO_FORMAT_RGB24, w, 400);
      cairo_t *cr = cairo_create (img);
      pp_timeline_render (cr, v, &view);
      cairo_destroy (cr);
      cairo_surface_flush (img);
      PpTimelineLayout l;
      pp_timeline_layout (v, &view, &l);
      const unsigned char *px = cairo_image_surface_get_data (img);
      int stride = cairo_image_surface_get_stride (img);
      for (int y = (int) l.rows_y; y < (int) (l.rows_y + P * D * l.row_h) && y < 400; y++)
        for (int x = 0; x < (int) l.x0 - 6; x++)
          {
            const unsigned char *p = px + y * stride + x * 4;
            int dark = p[0] + p[1] + p[2] < 3 * 128;
            label_ink += dark;
            ink += dark && x < 2;
          }
      cairo_surface_destroy (img);
    }
  g_assert_cmpint (label_ink, >, 0);   /* the labels are drawn */
  g_assert_cmpint (ink, ==, 0);
  pp_timeline_model_free (v);
  pp_timeline_model_free (src);
  pp_test_ctx_clear (&c);
}

/* Issue 37: the model keeps each process's last OPEN frame (whichever
 * replica shows) and says where its job is stuck, the line info prints: a
 * trace that ended so (quiet 0); a live job only once no action has ended
 * for the quiet seconds asked (a span just came: not stuck yet). */
static void
test_stuck (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = 0; g < 4; g++)
    {
      PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = g };
      it.process_info = (PpTraceProcess) { .process = g, .rank = g / 2, .coord = { g / 2, g % 2, 0, 0, 0 },
                                           .size = { 2, 2, 1, 1, 1 }, .pid = 10 + g, .host = "h" };
      pp_timeline_model_add (m, &it);
      add_item_span (m, g, g / 2, 0, 1000000);
    }
  char line[1024];
  g_assert_cmpint (pp_timeline_model_stuck (m, 0, line, sizeof line), ==, PP_STUCK_NONE);
  g_assert_cmpstr (line, ==, "");
  /* process 3 (pp 1 dp 1) in a forward; 1 (pp 0 dp 1) receives from it;
   * 0 and 2 closed */
  PpTraceItem f = { .type = PP_TRACE_ITEM_OPEN, .process = 3 };
  f.open = (PpTraceOpen) { .time_ns = 50000000000LL, .start_ns = 8000000000LL, .rank = 1, .step = 2, .stage = 1,
                           .microbatch = 2, .peer_rank = -1, .kind = PP_SPAN_F, .where = "train.py:88 forward" };
  PpTraceItem r = { .type = PP_TRACE_ITEM_OPEN, .process = 1 };
  r.open = (PpTraceOpen) { .time_ns = 50000000000LL, .start_ns = 9000000000LL, .rank = 0, .step = 2, .stage = 0,
                           .microbatch = 1, .peer_rank = 3, .kind = PP_SPAN_RECV_B };
  g_assert_cmpint (pp_timeline_model_add (m, &f), ==, 1);
  g_assert_cmpint (pp_timeline_model_add (m, &r), ==, 1);
  g_assert_cmpint (pp_timeline_model_stuck (m, 0, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpstr (line, ==, "stuck: process 3 (pp 1 dp 1, host h, pid 13) in F mb 2 of step 2 for 42 s, in "
                             "train.py:88 forward; process 1 waits for it: 1 in RECV_B mb 1 from 3\n");
  /* live: its spans came just now */
  g_assert_cmpint (pp_timeline_model_stuck (m, 3600, line, sizeof line), ==, PP_STUCK_NONE);
  g_assert_cmpstr (line, ==, "");
  pp_timeline_model_free (m);
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
  g_test_add_func ("/timeline-fold/offsets", test_offsets);
  g_test_add_func ("/timeline-fold/unplaced", test_unplaced);
  g_test_add_func ("/timeline-fold/live", test_live);
  g_test_add_func ("/timeline-fold/untagged", test_untagged);
  g_test_add_func ("/timeline-fold/out-of-step", test_out_of_step);
  g_test_add_func ("/timeline-fold/edge-counters-every-copy", test_edge_counters_every_copy);
  g_test_add_func ("/timeline-fold/thin-mark-drawn", test_thin_mark_drawn);
  g_test_add_func ("/timeline-fold/labels-legible", test_labels_legible);
  g_test_add_func ("/timeline-fold/labels-fit", test_labels_fit);
  g_test_add_func ("/timeline-fold/stuck", test_stuck);
  return g_test_run ();
}
