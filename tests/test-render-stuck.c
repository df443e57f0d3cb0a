/* Issue 37 on the timeline: a stuck job's kept trace drawn by the one
 * drawing function (the widget's, the exports', these tests'): the stuck
 * process's row marked up to now, every wait drawn up to now, an arrow
 * from each waiting row to the row it waits for, as runtime/pp-stuck.c's
 * graph says; and the rule of when a job is stuck (pp_stuck_after_s).
 * Synthetic models fed item by item: no CLI, no display. */
#include <glib.h>
#include <string.h>

#include "pp-stuck.h"
#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

#define MS 1000000LL
#define S  1000000000LL

static void
add_span (PpTimelineModel *m, int32_t process, int rank, int kind, int mb, int64_t t0, int64_t t1)
{
  PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN, .process = process };
  it.span = (PpSpan) { .start_ns = t0, .end_ns = t1, .rank = rank, .stage = rank, .microbatch = mb,
                       .kind = (uint16_t) kind, .device = 0xffff, .peer_rank = -1 };
  /* dp 1 (odd processes here) is another replica: kept, not on its rank's row (0) */
  g_assert_cmpint (pp_timeline_model_add (m, &it), ==, process < 0 || process % 2 == 0 ? 1 : 0);
}

static void
add_open (PpTimelineModel *m, int32_t process, int rank, int kind, int peer, int64_t start, int64_t now,
          uint32_t flags)
{
  PpTraceItem it = { .type = PP_TRACE_ITEM_OPEN, .process = process };
  it.open = (PpTraceOpen) { .time_ns = now, .start_ns = start, .rank = rank, .step = 2, .stage = rank,
                            .microbatch = 1, .peer_rank = peer, .kind = kind, .flags = flags };
  g_assert_cmpint (pp_timeline_model_add (m, &it), ==, 1);
}

static void
add_place (PpTimelineModel *m, int32_t process, int pp, int dp)
{
  PpTraceItem it = { .type = PP_TRACE_ITEM_PROCESS, .process = process };
  it.process_info = (PpTraceProcess) { .process = process, .rank = pp, .coord = { pp, dp, 0, 0, 0 },
                                       .size = { 2, 2, 1, 1, 1 }, .pid = 100 + process };
  pp_timeline_model_add (m, &it);   /* a place draws nothing itself */
  g_assert_nonnull (pp_timeline_model_process_place (m, process));
}

/* Two ranks, two steps of F then B each; no places (a rank a process). */
static PpTimelineModel *
two_ranks (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < 2; r++)
      {
        int64_t t = s * 100 * MS + r * 10 * MS;
        add_span (m, -1, r, PP_SPAN_F, 0, t, t + 20 * MS);
        add_span (m, -1, r, PP_SPAN_B, 0, t + 40 * MS, t + 80 * MS);
      }
  return m;
}

static PpTimelineDrawn
draw (const PpTimelineModel *m, int live, PpTimelineView *out)
{
  PpTimelineDrawn drawn = { 0 };
  PpTimelineView v;
  pp_timeline_view_init (&v, m, 1200, 300);
  v.stuck_live = live;
  v.drawn = &drawn;
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1200, 300);
  cairo_t *cr = cairo_create (s);
  pp_timeline_render (cr, m, &v);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  if (out != NULL)
    *out = v;
  return drawn;
}

/* Rank 1 stopped inside a forward; rank 0 waits to receive from it. */
static void
test_root (void)
{
  PpTimelineModel *m = two_ranks ();
  int64_t now = 40 * S;
  add_open (m, -1, 1, PP_SPAN_F, -1, 200 * MS, now, 0);
  add_open (m, -1, 0, PP_SPAN_RECV_B, 1, 190 * MS, now, 0);
  PpTimelineView v;
  PpTimelineDrawn d = draw (m, 0, &v);
  g_assert_cmpint (d.stuck_rows, ==, 1);
  g_assert_cmpint (d.open_waits, ==, 1);
  g_assert_cmpint (d.wait_arrows, ==, 1);
  /* up to now: the whole view reaches the latest OPEN frame */
  g_assert_cmpint (pp_timeline_model_now_ns (m), ==, now);
  g_assert_cmpint (v.t1_ns, ==, now);
  /* the arrow is the graph's edge: 0 waits for 1, on rows 0 and 1 */
  PpStuckVerdict verdict;
  PpStuckEdge e[4];
  size_t n = 0;
  g_assert_cmpint (pp_timeline_model_stuck_graph (m, 0, &verdict, e, 4, &n), ==, PP_STUCK_ROOT);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpint (e[0].from, ==, 0);
  g_assert_cmpint (e[0].to, ==, 1);
  g_assert_cmpint (verdict.who[0], ==, 1);
  g_assert_cmpint (pp_timeline_model_process_row (m, 0), ==, 0);
  g_assert_cmpint (pp_timeline_model_process_row (m, 1), ==, 1);
  pp_timeline_model_free (m);
}

/* Each rank receives from the other before it sends: a cycle, both rows
 * marked, an arrow each way. */
static void
test_cycle (void)
{
  PpTimelineModel *m = two_ranks ();
  add_open (m, -1, 0, PP_SPAN_RECV_F, 1, 200 * MS, 30 * S, 0);
  add_open (m, -1, 1, PP_SPAN_RECV_B, 0, 210 * MS, 30 * S, 0);
  PpTimelineDrawn d = draw (m, 0, NULL);
  g_assert_cmpint (d.stuck_rows, ==, 2);
  g_assert_cmpint (d.wait_arrows, ==, 2);
  pp_timeline_model_free (m);
}

/* Deadlocked before any action ended (no span at all): the view runs
 * from the first open action to now, both rows marked. */
static void
test_cycle_no_spans (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  add_open (m, -1, 0, PP_SPAN_WAIT, 1, 7 * S, 11 * S, 0);
  add_open (m, -1, 1, PP_SPAN_WAIT, 0, 8 * S, 11 * S, 0);
  PpTimelineView v;
  PpTimelineDrawn d = draw (m, 0, &v);
  g_assert_cmpint (v.t0_ns, ==, 7 * S);
  g_assert_cmpint (v.t1_ns, ==, 11 * S);
  g_assert_cmpint (d.stuck_rows, ==, 2);
  g_assert_cmpint (d.wait_arrows, ==, 2);
  pp_timeline_model_free (m);
}

/* A job that ended: every process closed, nothing drawn; a live job that
 * made progress just now: nothing drawn until it is stuck by the rule. */
static void
test_nothing (void)
{
  PpTimelineModel *m = two_ranks ();
  add_open (m, -1, 0, -1, -1, 0, 200 * MS, PP_TRACE_OPEN_CLOSED);
  add_open (m, -1, 1, -1, -1, 0, 200 * MS, PP_TRACE_OPEN_CLOSED);
  PpTimelineDrawn d = draw (m, 0, NULL);
  g_assert_cmpint (d.stuck_rows + d.open_waits + d.wait_arrows, ==, 0);
  pp_timeline_model_free (m);

  m = two_ranks ();
  add_open (m, -1, 1, PP_SPAN_F, -1, 200 * MS, 40 * S, 0);
  add_open (m, -1, 0, PP_SPAN_RECV_B, 1, 190 * MS, 40 * S, 0);
  d = draw (m, 1, NULL);   /* live: its last progress came now, under 30 s ago */
  g_assert_cmpint (d.stuck_rows + d.open_waits + d.wait_arrows, ==, 0);
  d = draw (m, 0, NULL);   /* the same as a kept trace */
  g_assert_cmpint (d.stuck_rows, ==, 1);
  pp_timeline_model_free (m);
}

/* A PP 2 x DP 2 job: process 3 (pp 1 dp 1) stuck in a forward, 1 (pp 0
 * dp 1) waits to receive from it, 2 (pp 1 dp 0) in the dp all-reduce of
 * stage 1 that 3 never joins.  A row a process: 3's row marked, arrows
 * 1 -> 3 and 2 -> 3; folded (a row a pipeline rank): one arrow, rank 0's
 * row to rank 1's, and 2's wait, on 3's marked row, is not drawn over it. */
static void
test_mesh (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  for (int g = 0; g < 4; g++)
    add_place (m, g, g / 2, g % 2);
  for (int g = 0; g < 4; g++)
    add_span (m, g, g / 2, PP_SPAN_F, 0, (g / 2) * 10 * MS, (g / 2) * 10 * MS + 20 * MS);
  add_open (m, 3, 1, PP_SPAN_F, -1, 50 * MS, 20 * S, 0);
  add_open (m, 1, 0, PP_SPAN_RECV_B, 3, 40 * MS, 20 * S, 0);
  add_open (m, 2, 1, PP_SPAN_REDUCE_GRAD, -1, 45 * MS, 20 * S, 0);
  add_open (m, 0, 0, -1, -1, 30 * MS, 20 * S, 0);   /* at work in its own code */

  PpTimelineReplicas all = { .replica = -1, .all = 1 };
  PpTimelineModel *v = pp_timeline_view_new (m, &all);
  g_assert_nonnull (v);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 4);
  int row3 = pp_timeline_model_process_row (v, 3);
  g_assert_cmpint (pp_timeline_model_row_process (v, row3), ==, 3);
  PpTimelineDrawn d = draw (v, 0, NULL);
  g_assert_cmpint (d.stuck_rows, ==, 1);
  g_assert_cmpint (d.open_waits, ==, 2);
  g_assert_cmpint (d.wait_arrows, ==, 2);
  pp_timeline_model_free (v);

  PpTimelineReplicas fold = { .replica = -1 };
  v = pp_timeline_view_new (m, &fold);
  g_assert_nonnull (v);
  g_assert_cmpint (pp_timeline_model_n_ranks (v), ==, 2);
  g_assert_cmpint (pp_timeline_model_process_row (v, 3), ==, 1);
  g_assert_cmpint (pp_timeline_model_process_row (v, 1), ==, 0);
  d = draw (v, 0, NULL);
  g_assert_cmpint (d.stuck_rows, ==, 1);
  g_assert_cmpint (d.open_waits, ==, 1);   /* 2's wait is on 3's row, which is marked: one a row */
  g_assert_cmpint (d.wait_arrows, ==, 1);
  pp_timeline_model_free (v);
  pp_timeline_model_free (m);
}

/* The rule: 10 median steps, at least 30 s. */
static void
test_after (void)
{
  g_assert_cmpfloat (pp_stuck_after_s (NULL), ==, PP_STUCK_AFTER_MIN_S);
  PpStuckSteps s = { 0 };
  g_assert_cmpfloat (pp_stuck_after_s (&s), ==, 30.0);
  pp_stuck_steps_add (&s, 1 * S);
  pp_stuck_steps_add (&s, 2 * S);
  pp_stuck_steps_add (&s, 0);   /* ignored */
  g_assert_cmpuint (s.n, ==, 2);
  g_assert_cmpfloat (pp_stuck_after_s (&s), ==, 30.0);   /* 10 x 1 s: the floor */
  PpStuckSteps t = { 0 };
  int64_t lengths[] = { 6 * S, 4 * S, 100 * S, 5 * S, 7 * S };
  for (size_t i = 0; i < G_N_ELEMENTS (lengths); i++)
    pp_stuck_steps_add (&t, lengths[i]);
  g_assert_cmpfloat (pp_stuck_after_s (&t), ==, 60.0);   /* median 6 s, one slow step aside */
  /* only the last PP_STUCK_STEPS_KEPT count: 40 steps of 8 s push out the 100 s */
  for (int i = 0; i < 40; i++)
    pp_stuck_steps_add (&t, 8 * S);
  g_assert_cmpfloat (pp_stuck_after_s (&t), ==, 80.0);

  /* a watch learns its steps from each process's step ends */
  PpStuckWatch w = { 0 };
  for (int k = 0; k < 4; k++)
    for (int r = 0; r < 2; r++)
      {
        PpTraceItem it = { .type = PP_TRACE_ITEM_STEP_MARKER, .process = -1 };
        it.step_marker.rank = r;
        it.step_marker.step = k;
        it.step_marker.phase = PP_TRACE_STEP_END;
        it.step_marker.time_ns = k * 5 * S + r * MS;
        g_assert_true (pp_stuck_watch_take (&w, &it, 1));
      }
  g_assert_cmpuint (w.steps.n, ==, 6);   /* 3 lengths a rank */
  g_assert_cmpfloat (pp_stuck_watch_after_s (&w), ==, 50.0);
  pp_stuck_watch_clear (&w);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/render-stuck/root", test_root);
  g_test_add_func ("/render-stuck/cycle", test_cycle);
  g_test_add_func ("/render-stuck/cycle-no-spans", test_cycle_no_spans);
  g_test_add_func ("/render-stuck/nothing", test_nothing);
  g_test_add_func ("/render-stuck/mesh", test_mesh);
  g_test_add_func ("/render-stuck/after", test_after);
  return g_test_run ();
}
