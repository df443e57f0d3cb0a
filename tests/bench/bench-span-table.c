/* bench-span-table: the Spans tab's window on 1,000,000 blocks.
 *
 * The table and a timeline in a window (GTK, under Xvfb), the same
 * synthetic run as bench-span-rows; each action is timed from the call to
 * the window's next painted frame, the freeze a person sees: a click on
 * each header (sorted, longest or latest first) and a Find ("B", then
 * none), the median of 5 each.  Prints the times and the row widgets the
 * view holds after them (GTK 4.8 destroyed and built them all again on
 * every relist).  Never part of the pass/fail suite.
 */
#include <gtk/gtk.h>
#include <stdio.h>

#include "pp-span-table.h"
#include "pp-timeline-widget.h"
#include "bench-util.h"

#define N_SPANS 1000000
#define N_RANKS 64
#define N_RUNS  5

static gboolean painted;

static void
on_after_paint (GdkFrameClock *clock, gpointer data)
{
  painted = TRUE;
}

/* Runs the main loop until the window paints a frame; FALSE after 60 s
 * (no display that paints: the bench says so rather than hang). */
static gboolean
wait_for_frame (void)
{
  painted = FALSE;
  double until = bench_now_ms () + 60000;
  while (!painted && bench_now_ms () < until)
    g_main_context_iteration (NULL, TRUE);
  return painted;
}

static guint
n_widgets (GtkWidget *w)
{
  guint n = 1;
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    n += n_widgets (c);
  return n;
}

static PpTimelineModel *
make_run (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  const int per_rank = N_SPANS / N_RANKS;
  for (int r = 0; r < N_RANKS; r++)
    {
      int64_t t = 1000000;
      for (int i = 0; i < per_rank; i++)
        {
          PpTraceItem it = { .type = PP_TRACE_ITEM_SPAN };
          rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
          it.span.rank = r;
          it.span.stage = r;
          it.span.kind = (uint16_t) (i % 2 ? PP_SPAN_B : PP_SPAN_F);
          it.span.microbatch = (i / 2) % 64;
          it.span.step = i / 128;
          it.span.start_ns = t + (int64_t) (rng % 2000);
          it.span.end_ns = it.span.start_ns + 20000 + (int64_t) (rng % 30000);
          it.span.device = 0xffff;
          it.span.peer_rank = -1;
          t = it.span.end_ns;
          pp_timeline_model_add (m, &it);
        }
    }
  return m;
}

int
main (int argc, char **argv)
{
  if (!gtk_init_check ())
    {
      printf ("bench-span-table: no display: skipped\n");
      return 77;
    }
  PpTimelineModel *m = make_run ();
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 1200, 900);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *timeline = pp_timeline_widget_new ();
  gtk_widget_set_size_request (timeline, -1, 200);
  pp_timeline_widget_set_model (PP_TIMELINE_WIDGET (timeline), m);
  GtkWidget *table = pp_span_table_new ();
  gtk_widget_set_vexpand (table, TRUE);
  gtk_box_append (GTK_BOX (box), timeline);
  gtk_box_append (GTK_BOX (box), table);
  gtk_window_set_child (GTK_WINDOW (window), box);
  pp_span_table_set_timeline (PP_SPAN_TABLE (table), PP_TIMELINE_WIDGET (timeline));
  gtk_window_present (GTK_WINDOW (window));
  while (gtk_widget_get_frame_clock (window) == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_signal_connect (gtk_widget_get_frame_clock (window), "after-paint", G_CALLBACK (on_after_paint), NULL);
  if (!wait_for_frame () || !wait_for_frame ())
    {
      printf ("bench-span-table: the window paints no frame: skipped\n");
      return 77;
    }
  guint listed = pp_span_table_n_rows (PP_SPAN_TABLE (table));

  static const char *names[PP_SPAN_N_COLS] = { "kind", "rank", "stage", "mb", "step", "start", "duration", "idle" };
  double sorted[PP_SPAN_N_COLS];
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    {
      double t[N_RUNS];
      for (int i = 0; i < N_RUNS; i++)
        {
          /* from another order each time */
          pp_span_table_sort (PP_SPAN_TABLE (table), c == PP_SPAN_COL_START ? PP_SPAN_COL_STEP : PP_SPAN_COL_START,
                              FALSE);
          wait_for_frame ();
          double a = bench_now_ms ();
          pp_span_table_sort (PP_SPAN_TABLE (table), (PpSpanColumn) c, TRUE);
          wait_for_frame ();
          t[i] = bench_now_ms () - a;
        }
      sorted[c] = bench_median (t, N_RUNS);
    }
  double t[N_RUNS];
  guint found = 0;
  for (int i = 0; i < N_RUNS; i++)
    {
      double a = bench_now_ms ();
      pp_span_table_set_filter_text (PP_SPAN_TABLE (table), "B");
      found = pp_span_table_n_rows (PP_SPAN_TABLE (table));
      wait_for_frame ();
      t[i] = bench_now_ms () - a;
      pp_span_table_set_filter_text (PP_SPAN_TABLE (table), "");
      wait_for_frame ();
    }
  double find = bench_median (t, N_RUNS);

  printf ("bench-span-table: %u lines over %d ranks; from the call to the next painted frame (median of %d)\n",
          listed, N_RANKS, N_RUNS);
  printf ("  a click on a header (longest or latest first):");
  for (int c = 0; c < PP_SPAN_N_COLS; c++)
    printf (" %s %.0f ms%s", names[c], sorted[c], c + 1 < PP_SPAN_N_COLS ? "," : "\n");
  printf ("  Find \"B\" (%u lines) %.0f ms; the table's widgets now %u\n", found, find, n_widgets (table));
  gtk_window_destroy (GTK_WINDOW (window));
  return 0;
}
