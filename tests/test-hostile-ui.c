/* test-hostile-ui.c — the app's panels on the crafted traces of issue 18
 * ("the window frozen"): the statistics panel builds a bounded number of
 * rows whatever rank a file names, and What-if ranks a large case on a
 * worker thread, its rows delivered to the main loop.  Counts, never times.
 * Needs a display (run under xvfb-run); skips without one. */
#include <gtk/gtk.h>
#include <string.h>

#include "hostile-traces.h"
#include "pp-panels.h"
#include "pp-test-util.h"

static char *tmpdir;

static PpTimelineModel *
model_of (const char *name)
{
  char *file = g_strdup_printf ("%s/%s.pptrace", tmpdir, name);
  PpError err = { 0 };
  if (pp_hostile_write (name, file) != 0)
    g_error ("cannot write %s", file);
  PpTimelineModel *m = pp_timeline_model_new_from_file (file, &err);
  if (m == NULL)
    g_error ("%s: %s", file, err.msg);
  g_free (file);
  return m;
}

static void
collect_labels (GtkWidget *w, GString *out)
{
  if (GTK_IS_LABEL (w) && gtk_widget_get_visible (w))
    {
      g_string_append (out, gtk_label_get_text (GTK_LABEL (w)));
      g_string_append_c (out, '\n');
    }
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    collect_labels (c, out);
}

static GtkWidget *
find_list (GtkWidget *w)
{
  if (GTK_IS_LIST_BOX (w))
    return w;
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *l = find_list (c);
      if (l)
        return l;
    }
  return NULL;
}

static int
n_rows (GtkWidget *list)
{
  int n = 0;
  for (GtkWidget *c = gtk_widget_get_first_child (list); c; c = gtk_widget_get_next_sibling (c))
    n += GTK_IS_LIST_BOX_ROW (c);
  return n;
}

/* rank 65535 in a COUNTER and a DROPPED frame: 65,536 ranks, 256 rows. */
static void
test_stats_rows (void)
{
  PpTimelineModel *m = model_of ("rank-65535");
  g_assert_cmpint (pp_timeline_model_n_ranks (m), ==, 65536);
  GtkWidget *p = g_object_ref_sink (pp_stats_panel_new ());
  pp_stats_panel_update (PP_STATS_PANEL (p), m);
  g_assert_cmpint (pp_stats_panel_get_n_rows (PP_STATS_PANEL (p)), ==, PP_STATS_PANEL_MAX_ROWS);
  GString *text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "65280 more ranks: pipescope-cli info lists them all\n"));
  g_assert_nonnull (strstr (text->str, "Dropped events: 3"));
  g_string_free (text, TRUE);
  /* a run with fewer ranks: the rows go and the line with them */
  PpTimelineModel *small = model_of ("step-max");
  pp_stats_panel_update (PP_STATS_PANEL (p), small);
  g_assert_cmpint (pp_stats_panel_get_n_rows (PP_STATS_PANEL (p)), ==, 2);
  text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_null (strstr (text->str, "more ranks"));
  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (small);
  pp_timeline_model_free (m);
}

/* P = 16 with M = 128: the ranking is more than the main loop should run,
 * so it goes to a worker; the rows come back through the main loop. */
static void
test_whatif_worker (void)
{
  PpTimelineModel *m = pp_timeline_model_new ();
  PpTraceDescription d;
  PpTraceItem it;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  d.n_ranks = 16;
  d.n_microbatches = 128;
  d.n_virtual = 1;
  memset (&it, 0, sizeof it);
  it.type = PP_TRACE_ITEM_DESCRIPTION;
  it.description = &d;
  pp_timeline_model_add (m, &it);
  it.type = PP_TRACE_ITEM_SPAN;
  for (int r = 0; r < 16; r++)
    for (int k = 0; k < 2; k++)
      {
        memset (&it.span, 0, sizeof it.span);
        it.span.rank = r;
        it.span.stage = r;
        it.span.microbatch = 0;
        it.span.kind = k ? PP_SPAN_B : PP_SPAN_F;
        it.span.start_ns = 1000 + k * 5000;
        it.span.end_ns = it.span.start_ns + (k ? 2000 : 1000);
        it.span.device = 0xffff;
        it.span.peer_rank = -1;
        pp_timeline_model_add (m, &it);
      }

  GtkWidget *p = g_object_ref_sink (pp_whatif_panel_new ());
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), m);
  g_assert_true (pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)));
  GString *text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "Ranking schedules…\n"));
  g_string_free (text, TRUE);

  /* Each iteration waits for an event; the worker's result is one. */
  for (int i = 0; i < 100000 && pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)); i++)
    g_main_context_iteration (NULL, TRUE);
  g_assert_false (pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)));
  GtkWidget *list = find_list (p);
  g_assert_nonnull (list);
  g_assert_cmpint (n_rows (list), >, 0);
  text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "Predicted from the costs measured on 16 ranks with 128 micro-batches\n"));
  g_string_free (text, TRUE);

  /* A new run while a worker ranks the old one: the old result is dropped. */
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), NULL);
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), m);
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), NULL);
  g_assert_false (pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)));
  g_assert_cmpint (n_rows (list), ==, 0);
  g_object_unref (p);
  pp_timeline_model_free (m);
}

/* M = 2^24 in the description: What-if answers (on its worker) without
 * simulating the 2^24 candidates. */
static void
test_whatif_m_2e24 (void)
{
  PpTimelineModel *m = model_of ("m-2e24");
  GtkWidget *p = g_object_ref_sink (pp_whatif_panel_new ());
  pp_whatif_panel_update (PP_WHATIF_PANEL (p), m);
  for (int i = 0; i < 100000 && pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)); i++)
    g_main_context_iteration (NULL, TRUE);
  g_assert_false (pp_whatif_panel_is_working (PP_WHATIF_PANEL (p)));
  GtkWidget *list = find_list (p);
  g_assert_cmpint (n_rows (list), >, 0);
  GString *text = g_string_new (NULL);
  collect_labels (p, text);
  g_assert_nonnull (strstr (text->str, "with 16777216 micro-batches\n"));
  g_assert_null (strstr (text->str, "M = 16777216\n"));   /* that candidate left out */
  g_string_free (text, TRUE);
  g_object_unref (p);
  pp_timeline_model_free (m);
}

int
main (int argc, char **argv)
{
  gboolean tap = FALSE;
  for (int i = 1; i < argc; i++)
    tap |= strcmp (argv[i], "--tap") == 0;

  gtk_disable_setlocale ();
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      if (tap)
        {
          g_print ("1..0 # SKIP no display: run under xvfb-run\n");
          return 0;
        }
      g_printerr ("test-hostile-ui: no display, skipped (run under xvfb-run)\n");
      return 77;
    }
  tmpdir = g_dir_make_tmp ("pp-hostile-ui-XXXXXX", NULL);
  g_test_add_func ("/hostile-ui/stats-rows", test_stats_rows);
  g_test_add_func ("/hostile-ui/whatif-worker", test_whatif_worker);
  g_test_add_func ("/hostile-ui/whatif-m-2e24", test_whatif_m_2e24);
  int rc = g_test_run ();
  pp_test_rm_rf (tmpdir);
  g_free (tmpdir);
  return rc;
}
