/* pipescope-cli schedule --trace, info and export as a user runs them. */
#include <glib.h>
#include <glib/gstdio.h>
#include <sys/wait.h>
#include <string.h>

#include "pp-test-util.h"
#include "pp-timeline-model.h"

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)

static int
spawn (char **argv, char **out, char **err)
{
  int status = -1;
  GError *error = NULL;
  if (!g_spawn_sync (NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out, err, &status, &error))
    g_error ("spawn: %s", error->message);
  if (!WIFEXITED (status))
    g_error ("%s did not exit normally", argv[0]);
  return WEXITSTATUS (status);
}

static void
test_trace_roundtrip (void)
{
  char *dir = g_dir_make_tmp ("pp-cli-trace-XXXXXX", NULL);
  char *t = g_build_filename (dir, "t.pptrace", NULL);
  char *j = g_build_filename (dir, "t.json", NULL);
  char *c = g_build_filename (dir, "t.csv", NULL);
  char *tmp = g_strconcat (j, ".tmp", NULL);
  char *out, *err, *data;
  gsize len;

  g_assert_nonnull (dir);
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "GPipe", "-p", "4", "-m", "6", "--trace", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "bubble: 33.3%"));
  g_free (out); g_free (err);

  g_assert_cmpint (run (&out, &err, "info", t, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, "schedule: GPipe (P=4, M=6, V=1)\n"));
  g_assert_nonnull (strstr (out, "backend: simulated\n"));
  g_assert_nonnull (strstr (out, "model: none\n"));
  g_assert_nonnull (strstr (out, "ranks: 4\n"));
  g_assert_nonnull (strstr (out, "steps: 1\n"));
  g_assert_nonnull (strstr (out, "spans: 48 (F 24, B 24)\n"));
  for (int r = 0; r < 4; r++)
    {
      char *want = g_strdup_printf ("rank %d bubble: 33.3%%", r);
      g_assert_nonnull (strstr (out, want));
      g_free (want);
    }
  /* one step: its bubble and the whole trace's idle are GPipe's closed form */
  g_assert_nonnull (strstr (out, "mean bubble a step: 33.3%\n"));
  g_assert_nonnull (strstr (out, "mean idle: 33.3%\n"));
  g_assert_nonnull (strstr (out, "dropped events: 0\n"));
  g_assert_nonnull (strstr (out, "truncated: no\n"));
  g_free (out); g_free (err);

  /* Chrome JSON: 48 blocks, each rank's step and the plan's 48 actions as
   * complete events; rank 3's F0 starts at 3 units = 3 ms. */
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", j, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_get_contents (j, &data, &len, NULL));
  g_assert_true (g_str_has_prefix (data, "{\"traceEvents\":["));
  g_assert_nonnull (strstr (data, "\"displayTimeUnit\":\"ms\"}"));
  g_assert_cmpint (pp_test_count (data, "\"ph\":\"X\""), ==, 48 + 4 + 48);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"F\",\"ph\":\"X\""), ==, 24);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"B\",\"ph\":\"X\""), ==, 24);
  g_assert_nonnull (strstr (data, "{\"name\":\"F0\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":3,\"tid\":0,"
                                  "\"ts\":3000.000,\"dur\":1000.000,"
                                  "\"args\":{\"stage\":3,\"microbatch\":0,\"step\":0,\"kind\":\"F\"}}"));
  g_assert_nonnull (strstr (data, "{\"name\":\"B5\",\"cat\":\"B\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                                  "\"ts\":25000.000,\"dur\":2000.000,"));
  g_assert_nonnull (strstr (data, "\"args\":{\"name\":\"rank 2\"}"));
  /* a track of blocks, one of steps and one of the plan a rank */
  g_assert_cmpint (pp_test_count (data, "\"name\":\"thread_name\""), ==, 3 * 4);
  g_assert_cmpint (pp_test_count (data, "\"name\":\"thread_sort_index\""), ==, 3 * 4);
  /* the steps: rank 1's runs from its first block (1 ms) to its last end (25 ms) */
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"step 0\",\"cat\":\"step\",\"ph\":\"X\""), ==, 4);
  g_assert_nonnull (strstr (data, "{\"name\":\"step 0\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":3,"
                                  "\"ts\":1000.000,\"dur\":24000.000,\"args\":{\"step\":0}}"));
  g_assert_nonnull (strstr (data, "\"pid\":1,\"tid\":3,\"args\":{\"name\":\"steps\"}}"));
  /* the plan beside it, on its own track: this trace is its plan, so
   * rank 3's planned F0 is where its block is */
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"plan\",\"ph\":\"X\""), ==, 48);
  g_assert_nonnull (strstr (data, "\"pid\":2,\"tid\":4,\"args\":{\"name\":\"plan rank 2\"}}"));
  g_assert_nonnull (strstr (data, "{\"name\":\"F0\",\"cat\":\"plan\",\"ph\":\"X\",\"pid\":3,\"tid\":4,"
                                  "\"ts\":3000.000,\"dur\":1000.000,"
                                  "\"args\":{\"stage\":3,\"microbatch\":0,\"kind\":\"F\",\"step\":0}}"));
  /* dependencies as flow events (issue 17): per micro-batch F 0->1->2->3,
   * each B after its F, B 3->2->1->0: 10, for 6 micro-batches */
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"dependency\",\"ph\":\"s\""), ==, 60);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\""), ==, 60);
  /* GPU 1's F0 waited for GPU 0's F0: from its last ns to the start at 1 ms */
  g_assert_nonnull (strstr (data, "\"pid\":0,\"tid\":0,\"ts\":999.999}"));
  g_assert_nonnull (strstr (data, "\"pid\":1,\"tid\":0,\"ts\":1000.000}"));
  g_assert_cmpint (pp_test_count (data, "\"ph\":\"C\""), ==, 0);   /* a plan has no counters */
  g_free (data);
  {
    char *py[] = { "python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", j, NULL };
    g_assert_cmpint (spawn (py, &out, &err), ==, 0);
    g_free (out); g_free (err);
  }

  g_assert_cmpint (run (&out, &err, "export", t, "--format", "csv", "-o", c, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (c, &data, &len, NULL));
  g_assert_cmpint (pp_test_count (data, "\n"), ==, 49);
  g_assert_true (g_str_has_prefix (data, "rank,stage,microbatch,kind,step,start_ns,end_ns,device,stream,bytes,name,sub\n"));
  /* -o -: the same bytes on standard output, and no file named "-" */
  {
    char *here = g_get_current_dir ();
    g_assert_cmpint (g_chdir (dir), ==, 0);
    g_assert_cmpint (run (&out, &err, "export", t, "--format", "csv", "-o", "-", NULL), ==, 0);
    g_assert_cmpstr (out, ==, data);
    g_assert_false (g_file_test ("-", G_FILE_TEST_EXISTS));
    g_assert_cmpint (g_chdir (here), ==, 0);
    g_free (here);
    g_free (out); g_free (err);
  }
  g_free (data);

  /* A copy cut mid-file still reads, and says so. */
  {
    char *cut = g_build_filename (dir, "cut.pptrace", NULL);
    g_assert_true (g_file_get_contents (t, &data, &len, NULL));
    g_assert_cmpuint (len, >, 64);
    g_assert_true (g_file_set_contents (cut, data, (gssize) (len - 7), NULL));
    g_free (data);
    g_assert_cmpint (run (&out, &err, "info", cut, NULL), ==, 0);
    g_assert_nonnull (strstr (out, "truncated: yes"));
    g_free (out); g_free (err);
    g_unlink (cut);
    g_free (cut);
  }

  /* Unknown export format: a usage error. */
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "svg", "-o", j, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  g_unlink (t); g_unlink (j); g_unlink (c);
  g_rmdir (dir);
  g_free (t); g_free (j); g_free (c); g_free (tmp); g_free (dir);
}

static void
test_bad_files (void)
{
  char *dir = g_dir_make_tmp ("pp-cli-trace-XXXXXX", NULL);
  char *g = g_build_filename (dir, "garbage", NULL);
  char *m = g_build_filename (dir, "missing", NULL);
  char *o = g_build_filename (dir, "out.json", NULL);
  char *out, *err;
  char junk[4096];

  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (char) (i * 131 + 7);
  g_assert_true (g_file_set_contents (g, junk, sizeof junk, NULL));

  g_assert_cmpint (run (&out, &err, "info", g, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, g));
  g_free (out); g_free (err);

  g_assert_cmpint (run (&out, &err, "export", g, "-o", o, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_false (g_file_test (o, G_FILE_TEST_EXISTS));
  g_free (out); g_free (err);

  g_assert_cmpint (run (&out, &err, "info", m, NULL), !=, 0);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  g_assert_cmpint (run (&out, &err, "export", m, "--format", "csv", "-o", o, NULL), !=, 0);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  /* Usage errors. */
  g_assert_cmpint (run (&out, &err, "info", NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  /* An unwritable trace path: one line, exit 1. */
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "2",
                        "--trace", "/nonexistent-dir/x.pptrace", NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);

  g_unlink (g);
  g_rmdir (dir);
  g_free (g); g_free (m); g_free (o); g_free (dir);
}

static void
test_unknown_command (void)
{
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "frobnicate", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "known commands: schedule, info, export"));
  g_free (out); g_free (err);
}

/* A 0-byte file is no trace: info, export, render and suggest refuse it in
 * one line with status 2 (as the app does), not read it as a run of no
 * ranks; an image that cannot be written names the path and the reason. */
/* A trained run's Chrome export has counter tracks (issue 17): the loss
 * on the rank that computes it, activation memory on every rank. */
static void
test_chrome_counters (void)
{
  char *dir = g_dir_make_tmp ("pp-cli-trace-XXXXXX", NULL);
  char *t = g_build_filename (dir, "r.pptrace", NULL);
  char *j = g_build_filename (dir, "r.json", NULL);
  char *out, *err, *data;

  g_assert_cmpint (run (&out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "2", "--layers", "2", "--width", "16",
                        "--batch", "8", "--steps", "3", "--no-live", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", j, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (j, &data, NULL, NULL));
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"loss\",\"ph\":\"C\",\"pid\":1,"), ==, 3);
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"activation memory (MiB)\",\"ph\":\"C\",\"pid\":0,"), >, 0);
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"activation memory (MiB)\",\"ph\":\"C\",\"pid\":1,"), >, 0);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"dependency\",\"ph\":\"s\""), >=, 3 * 2 * 3);
  g_free (data);
  {
    char *py[] = { "python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", j, NULL };
    g_assert_cmpint (spawn (py, &out, &err), ==, 0);
    g_free (out); g_free (err);
  }
  pp_test_rm_rf (dir);
  g_free (dir); g_free (t); g_free (j);
}

/* DualPipeV's overlapped F+B keeps both halves (format 1.2) in the Chrome
 * export and the CSV: every OVERLAP_F_B span names its backward half. */
static void
test_overlap_halves (void)
{
  char *dir = g_dir_make_tmp ("pp-cli-trace-XXXXXX", NULL);
  char *t = g_build_filename (dir, "d.pptrace", NULL);
  char *j = g_build_filename (dir, "d.json", NULL), *c = g_build_filename (dir, "d.csv", NULL);
  char *out, *err, *data;

  g_assert_cmpint (run (&out, &err, "run", "-s", "DualPipeV", "-p", "2", "-m", "4", "--layers", "4",
                        "--width", "16", "--batch", "8", "--steps", "3", "--no-live", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", j, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (j, &data, NULL, NULL));
  /* 3 pairs a rank a step at P=2, M=4 */
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"OVERLAP_F_B\""), ==, 18);
  g_assert_cmpint (pp_test_count (data, "\"backward_kind\":\"B\",\"backward_stage\":"), ==, 18);
  g_assert_nonnull (strstr (data, "{\"name\":\"2F2+1B0\",\"cat\":\"OVERLAP_F_B\""));
  /* the plan's pairs by the same name, one plan a step */
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"2F2+1B0\",\"cat\":\"plan\""), ==, 3);
  g_assert_null (strstr (data, "OVERLAP_F_B)"));
  g_free (data);
  /* why's critical path names the pairs as the exports do, never as
   * PyTorch's repr "(2F2;1B0)OVERLAP_F_B" */
  {
    char *w = g_build_filename (dir, "why.json", NULL);
    g_assert_cmpint (run (&out, &err, "export", t, "--format", "why", "-o", w, NULL), ==, 0);
    g_free (out); g_free (err);
    g_assert_true (g_file_get_contents (w, &data, NULL, NULL));
    g_assert_null (strstr (data, "OVERLAP_F_B"));
    GRegex *pair = g_regex_new ("\"\\d+F\\d+\\+\\d+[BI]\\d+\"", 0, 0, NULL);
    GMatchInfo *mi = NULL;
    int pairs = 0;
    g_regex_match (pair, data, 0, &mi);
    for (; g_match_info_matches (mi); g_match_info_next (mi, NULL))
      pairs++;
    g_match_info_free (mi);
    g_regex_unref (pair);
    g_assert_cmpint (pairs, >, 0);
    g_free (data);
    g_free (w);
  }
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "csv", "-o", c, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (c, &data, NULL, NULL));
  g_assert_cmpint (pp_test_count (data, ",OVERLAP_F_B,"), ==, 18);
  /* rank 1's 2F2+1B0, its last field the backward half */
  g_assert_nonnull (strstr (data, "\n1,2,2,OVERLAP_F_B,0,"));
  g_assert_cmpint (pp_test_count (data, "B0\n") + pp_test_count (data, "B1\n") + pp_test_count (data, "B2\n")
                   + pp_test_count (data, "B3\n"), ==, 18);
  g_free (data);
  pp_test_rm_rf (dir);
  g_free (dir); g_free (t); g_free (j); g_free (c);
}

/* Every export counts from the run's start, as the app's ruler, tooltips
 * and render do (pp_timeline_model_start_ns): each span's start and end in
 * the CSV, and each block's ts in the Chrome export, are its times from
 * there, for a trained run whose first block comes after its start. */
static void
test_one_origin (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-origin");
  g_autofree char *t = pp_test_ctx_path (&c, "r.pptrace");
  g_autofree char *csv = pp_test_ctx_path (&c, "r.csv");
  g_autofree char *json = pp_test_ctx_path (&c, "r.json");
  g_autofree char *png = pp_test_ctx_path (&c, "r.png");
  char *out, *err, *text = NULL, *chrome = NULL;
  PpError e = { 0 };

  g_assert_cmpint (run (&out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "2", "--layers", "2", "--width", "16",
                        "--batch", "8", "--steps", "2", "--no-live", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "csv", "-o", csv, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", json, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (csv, &text, NULL, NULL));
  g_assert_true (g_file_get_contents (json, &chrome, NULL, NULL));

  PpTimelineModel *m = pp_timeline_model_new_from_file (t, &e);
  g_assert_nonnull (m);
  int64_t origin = pp_timeline_model_start_ns (m), f0, f1;
  g_assert_true (pp_timeline_model_span_extent (m, &f0, &f1));
  /* the run describes itself before its first block: not the same zero */
  g_assert_cmpint (f0, >, origin);
  int blocks = 0;
  for (int r = 0; r < pp_timeline_model_n_ranks (m); r++)
    {
      const PpSpan *sp = pp_timeline_model_spans (m, r);
      for (size_t i = 0; i < pp_timeline_model_n_spans (m, r); i++)
        {
          const PpSpan *s = &sp[i];
          char *line = g_strdup_printf ("\n%d,%d,%d,", s->rank, s->stage, s->microbatch);
          char *times = g_strdup_printf (",%d,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",", s->step,
                                         s->start_ns - origin, s->end_ns - origin);
          char *hit = strstr (text, line);
          gboolean found = FALSE;
          for (; hit != NULL && !found; hit = strstr (hit + 1, line))
            {
              const char *eol = strchr (hit + 1, '\n');
              char *row = g_strndup (hit, eol ? (gsize) (eol - hit) : strlen (hit));
              found = strstr (row, times) != NULL;
              g_free (row);
            }
          g_assert_true (found);
          g_free (line);
          g_free (times);
          if (pp_span_kind_is_block (s->kind))
            {
              /* the tooltip's start: (start - origin), here in µs */
              int64_t d = s->start_ns - origin;
              char *ts = g_strdup_printf ("\"pid\":%d,\"tid\":0,\"ts\":%" G_GINT64_FORMAT ".%03d,", s->rank,
                                          d / 1000, (int) (d % 1000));
              g_assert_nonnull (strstr (chrome, ts));
              g_free (ts);
              blocks++;
            }
        }
    }
  g_assert_cmpint (blocks, ==, 2 * 2 * 2 * 2);   /* F and B, 2 micro-batches, 2 ranks, 2 steps */
  pp_timeline_model_free (m);
  /* render says where the spans lie in the same numbers */
  g_assert_cmpint (run (&out, &err, "render", t, "-o", png, "--from", "0", "--to", "1ns", NULL), ==, 2);
  {
    char *want = g_strdup_printf ("the spans run from %.3f to %.3f ms of the run", (double) (f0 - origin) / 1e6,
                                  (double) (f1 - origin) / 1e6);
    g_assert_nonnull (strstr (err, want));
    g_free (want);
  }
  g_free (out); g_free (err);
  g_free (text);
  g_free (chrome);
  pp_test_ctx_clear (&c);
}

static void
test_trace_empty_and_unwritable (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-empty");
  g_autofree char *empty = pp_test_ctx_path (&c, "empty.pptrace");
  g_autofree char *good = pp_test_ctx_path (&c, "good.pptrace");
  g_autofree char *img = pp_test_ctx_path (&c, "x.png");
  g_autofree char *json = pp_test_ctx_path (&c, "x.json");
  char *out, *err;

  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  const char *const cmds[][6] = {
    { "info", empty, NULL },
    { "export", "--format", "chrome", "-o", json, empty },
    { "render", "-o", img, empty, NULL },
    { "suggest", empty, NULL },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      int rc = run (&out, &err, cmds[i][0], cmds[i][1], cmds[i][2], cmds[i][3], cmds[i][4], cmds[i][5], NULL);
      g_assert_cmpint (rc, ==, 2);
      g_assert_nonnull (strstr (err, "is empty (0 bytes): not a pipescope trace"));
      pp_test_assert_one_line_error (err);
      g_free (out); g_free (err);
    }
  g_assert_false (g_file_test (json, G_FILE_TEST_EXISTS));

  g_assert_cmpint (run (&out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "4", "--trace", good, NULL), ==, 0);
  g_free (out); g_free (err);
  g_autofree char *nowhere = pp_test_ctx_path (&c, "no-such-folder/x.png");
  g_assert_cmpint (run (&out, &err, "render", "-o", nowhere, good, NULL), ==, 1);
  g_assert_nonnull (strstr (err, nowhere));
  g_assert_nonnull (strstr (err, "cannot write"));
  g_assert_null (strstr (err, "output stream"));   /* cairo's words: no reason */
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-trace/roundtrip", test_trace_roundtrip);
  g_test_add_func ("/cli-trace/chrome-counters", test_chrome_counters);
  g_test_add_func ("/cli-trace/overlap-halves", test_overlap_halves);
  g_test_add_func ("/cli-trace/one-origin", test_one_origin);
  g_test_add_func ("/cli-trace/bad-files", test_bad_files);
  g_test_add_func ("/cli-trace/unknown-command", test_unknown_command);
  g_test_add_func ("/cli-trace/empty-and-unwritable", test_trace_empty_and_unwritable);
  return g_test_run ();
}
