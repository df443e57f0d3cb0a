/* pipescope-cli schedule --trace, info, export and merge as a user runs them. */
#include <glib.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "pp-test-util.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"
#include "pp-simulate.h"

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
  g_assert_null (strstr (out, "(truncated"));
  g_free (out); g_free (err);

  /* Chrome JSON: 48 blocks, each rank's step and the plan's 48 actions as
   * complete events; rank 3's F0 starts at 3 units = 3 ms. */
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", j, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_get_contents (j, &data, &len, NULL));
  g_assert_true (g_str_has_prefix (data, "{\"traceEvents\":["));
  g_assert_nonnull (strstr (data, "\"displayTimeUnit\":\"ms\",\"pipescope\":{\"format\":1,"));
  g_assert_cmpint (pp_test_count (data, "\"ph\":\"X\""), ==, 48 + 4 + 48);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"F\",\"ph\":\"X\""), ==, 24);
  g_assert_cmpint (pp_test_count (data, "\"cat\":\"B\",\"ph\":\"X\""), ==, 24);
  g_assert_nonnull (strstr (data, "{\"name\":\"F0\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":3,\"tid\":0,"
                                  "\"ts\":3000.000,\"dur\":1000.000,"
                                  "\"args\":{\"stage\":3,\"microbatch\":0,\"step\":0,\"kind\":\"F\",\"rank\":3}}"));
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
  g_assert_true (g_str_has_prefix (data, "rank,stage,microbatch,kind,step,start_ns,end_ns,device,stream,bytes,name,sub,process,dp,tp\n"));
  /* a CPU span has no device: empty device and stream, never 65535 (issue 30) */
  g_assert_nonnull (strstr (data, "\n0,0,0,F,0,0,1000000,,,0,"));
  g_assert_null (strstr (data, "65535"));
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
    /* and says so first (issue 30) */
    {
      char *first = g_strdup_printf ("trace: %s (truncated: ", cut);
      g_assert_true (g_str_has_prefix (out, first));
      g_free (first);
    }
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
/* An FSDP job's trace (issue 27): 1F1B, P 2, M 2, three steps as the
 * simulator plans them, each rank unsharding its stage before its first
 * block and rank 1 reducing its gradients (1 ms) right after its last
 * backward, while rank 0 still computes; plans from
 * pipeline_order_with_comms, untimed.  The CSV and Chrome exports name the
 * blocks as PyTorch does, info counts them, Why has a dp_comm part, and
 * merge's timed plan places rank 1's REDUCE_GRAD after its last backward. */
static void
test_dp_kinds (void)
{
  char *dir = g_dir_make_tmp ("pp-cli-dp-XXXXXX", NULL);
  char *t = g_build_filename (dir, "dp.pptrace", NULL), *m = g_build_filename (dir, "m.pptrace", NULL);
  char *c = g_build_filename (dir, "dp.csv", NULL), *j = g_build_filename (dir, "dp.json", NULL);
  char *w = g_build_filename (dir, "why.json", NULL);
  char *out, *err, *data;
  PpError e = { 0 };
  PpSchedule *s = NULL;
  g_assert_cmpint (pp_schedule_new_1f1b (2, 2, 1, &s, &e), ==, PP_OK);
  PpCostModel *cm = pp_cost_model_new_uniform (2, 2e-3, 4e-3, 0, 0);
  PpSimulation *sim = NULL;
  g_assert_cmpint (pp_simulate (s, cm, &sim, &e), ==, PP_OK);

  PpTraceWriter *tw = pp_trace_writer_new_path (t, PP_TRACE_NATIVE, &e);
  g_assert_nonnull (tw);
  PpTraceDescription d = { .n_ranks = 2, .n_microbatches = 2, .n_virtual = 1 };
  strcpy (d.schedule, "1F1B");
  strcpy (d.backend, "cpu");
  g_assert_cmpint (pp_trace_write_description (tw, &d, &e), ==, PP_OK);
  for (int r = 0; r < 2; r++)
    {
      PpTracePlanAction p[16];
      int n = 0;
      p[n++] = (PpTracePlanAction) { PP_TRACE_ACT_UNSHARD, r, -1, -1, -1, -1, 0, 0 };
      for (int k = 0; k < s->rank[r].n_actions; k++)
        p[n++] = (PpTracePlanAction) { s->rank[r].actions[k].kind, r, s->rank[r].actions[k].microbatch,
                                       -1, -1, -1, 0, 0 };
      p[n++] = (PpTracePlanAction) { PP_TRACE_ACT_REDUCE_GRAD, r, -1, -1, -1, -1, 0, 0 };
      g_assert_cmpint (pp_trace_write_rank_plan (tw, r, p, (size_t) n, 0, &e), ==, PP_OK);
    }
  for (int step = 0; step < 3; step++)
    {
      int64_t base = 1000000000 + (int64_t) step * 100000000;
      for (int r = 0; r < 2; r++)
        {
          int last = s->rank[r].n_actions - 1;
          PpSpan u = { .rank = r, .stage = r, .microbatch = -1, .step = step, .kind = PP_SPAN_UNSHARD,
                       .device = 0xffff, .peer_rank = -1, .bytes = 4096 };
          u.start_ns = base - 500000;
          u.end_ns = base;
          g_assert_cmpint (pp_trace_write_spans (tw, &u, 1, &e), ==, PP_OK);
          for (int k = 0; k <= last; k++)
            {
              const PpAction *a = &s->rank[r].actions[k];
              PpSpan b = { .rank = r, .stage = a->stage, .microbatch = a->microbatch, .step = step,
                           .kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B, .device = 0xffff,
                           .peer_rank = -1 };
              b.start_ns = base + (int64_t) llround (sim->timeline[r][k].start * 1e9);
              b.end_ns = base + (int64_t) llround (sim->timeline[r][k].end * 1e9);
              g_assert_cmpint (pp_trace_write_spans (tw, &b, 1, &e), ==, PP_OK);
            }
          if (r == 1)
            {
              PpSpan g = { .rank = 1, .stage = 1, .microbatch = -1, .step = step,
                           .kind = PP_SPAN_REDUCE_GRAD, .device = 0xffff, .peer_rank = -1 };
              g.start_ns = base + (int64_t) llround (sim->timeline[1][last].end * 1e9);
              g.end_ns = g.start_ns + 1000000;
              g_assert_cmpint (pp_trace_write_spans (tw, &g, 1, &e), ==, PP_OK);
            }
        }
    }
  g_assert_cmpint (pp_trace_writer_close (tw, &e), ==, PP_OK);

  g_assert_cmpint (run (&out, &err, "export", t, "--format", "csv", "-o", c, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (c, &data, NULL, NULL));
  g_assert_cmpint (pp_test_count (data, ",UNSHARD,"), ==, 6);
  g_assert_cmpint (pp_test_count (data, ",REDUCE_GRAD,"), ==, 3);
  g_free (data);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "chrome", "-o", j, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (j, &data, NULL, NULL));
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"1REDUCE_GRAD\",\"cat\":\"REDUCE_GRAD\""), ==, 3);
  g_assert_cmpint (pp_test_count (data, "{\"name\":\"0UNSHARD\",\"cat\":\"UNSHARD\""), ==, 3);
  g_free (data);
  g_assert_cmpint (run (&out, &err, "info", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "UNSHARD 6"));
  g_assert_nonnull (strstr (out, "REDUCE_GRAD 3"));
  g_assert_nonnull (strstr (out, "dp_comm"));
  /* the whole step runs from the UNSHARDs (0.5 ms before the first
   * block) to rank 0's last B: 18.5 ms.  The REDUCE_GRAD (14 to 15 ms of
   * the blocks' 18) is busy, not bubble: rank 1 computes 12 ms, unshards
   * 0.5 and reduces 1 ms, 5 ms idle (27.0%); rank 0 works 12.5 ms, 6 idle
   * (32.4%) */
  g_assert_nonnull (strstr (out, "rank 0 bubble: 32.4%"));
  g_assert_nonnull (strstr (out, "rank 1 bubble: 27.0%"));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", t, "--format", "why", "-o", w, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_true (g_file_get_contents (w, &data, NULL, NULL));
  g_assert_nonnull (strstr (data, "\"dp_comm\": 0.001"));
  g_free (data);

  /* merge times the plan: its data-parallel actions placed too */
  g_assert_cmpint (run (&out, &err, "merge", "-o", m, t, NULL), ==, 0);
  g_assert_nonnull (strstr (err, "its data-parallel actions included"));
  g_free (out); g_free (err);
  PpTraceReader *rd = pp_trace_reader_new_path (m, &e);
  PpTraceItem it;
  int timed_rg = 0;
  g_assert_nonnull (rd);
  while (pp_trace_reader_next (rd, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_PLAN && it.plan.has_timeline && it.plan.rank == 1)
      {
        const PpTracePlanAction *p = it.plan.actions;
        size_t n = it.plan.n_actions;
        g_assert_cmpint (n, ==, (size_t) s->rank[1].n_actions + 2);
        g_assert_cmpint (p[0].kind, ==, PP_TRACE_ACT_UNSHARD);
        g_assert_cmpint (p[n - 1].kind, ==, PP_TRACE_ACT_REDUCE_GRAD);
        /* right after the last backward, as long as measured */
        g_assert_cmpfloat_with_epsilon (p[n - 1].planned_start, p[n - 2].planned_end, 1e-9);
        g_assert_cmpfloat_with_epsilon (p[n - 1].planned_end - p[n - 1].planned_start, 1e-3, 1e-6);
        timed_rg++;
      }
  g_assert_cmpint (timed_rg, ==, 1);
  pp_trace_reader_free (rd);

  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
  pp_test_rm_rf (dir);
  g_free (dir); g_free (t); g_free (m); g_free (c); g_free (j); g_free (w);
}

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
  /* rank 1's 2F2+1B0, its sub field the backward half (then process, dp,
   * tp: empty, the trace has no places) */
  g_assert_nonnull (strstr (data, "\n1,2,2,OVERLAP_F_B,0,"));
  g_assert_cmpint (pp_test_count (data, "B0,,,\n") + pp_test_count (data, "B1,,,\n")
                   + pp_test_count (data, "B2,,,\n") + pp_test_count (data, "B3,,,\n"), ==, 18);
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

/* A copy of src without its steps before `from`: what a record that
 * attached while the job ran holds (its spans, markers and counters). */
static void
copy_from_step (const char *src, const char *dst, int from)
{
  PpError e = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (src, &e);
  PpTraceWriter *w = pp_trace_writer_new_path (dst, PP_TRACE_NATIVE, &e);
  PpTraceItem it;
  g_assert_nonnull (r);
  g_assert_nonnull (w);
  for (;;)
    {
      g_assert_cmpint (pp_trace_reader_next (r, &it, &e), ==, PP_OK);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if ((it.type == PP_TRACE_ITEM_SPAN && it.span.step < from)
          || (it.type == PP_TRACE_ITEM_STEP_MARKER && it.step_marker.step < from)
          || (it.type == PP_TRACE_ITEM_COUNTER && it.counter.step < from))
        continue;
      g_assert_cmpint (pp_trace_write_item (w, &it, &e), ==, PP_OK);
    }
  pp_trace_reader_free (r);
  g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);
}

/* info counts the steps a trace holds, not its last step's number plus
 * one: a record from step 3 of a 10-step run holds 7, and says which. */
static void
test_info_late_steps (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-late");
  g_autofree char *t = pp_test_ctx_path (&c, "r.pptrace");
  g_autofree char *late = pp_test_ctx_path (&c, "late.pptrace");
  char *out, *err;

  g_assert_cmpint (run (&out, &err, "run", "-s", "1F1B", "-p", "2", "-m", "2", "--layers", "2", "--width", "16",
                        "--batch", "8", "--steps", "10", "--no-live", "--trace", t, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "info", t, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\nsteps: 10\n"));
  g_free (out); g_free (err);

  copy_from_step (t, late, 3);
  g_assert_cmpint (run (&out, &err, "info", late, NULL), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_nonnull (strstr (out, "\nsteps: 7 (3 to 9)\n"));
  /* F and B of 2 micro-batches on 2 ranks, 7 steps */
  g_assert_nonnull (strstr (out, " (F 28, B 28, "));
  g_free (out); g_free (err);
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

/* ---- merge and export never destroy a trace ------------------------------ */

/* The trace rank r of a 2-rank GPipe job writes under mpirun: its
 * description, its RANK frame, and its F0 F1 B0 B1 (rank 0: with the plan
 * of both ranks, timed, as a bundled run's rank 0 writes it). */
static void
write_rank_trace (const char *path, int r)
{
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_LITTLE, &err);
  PpTraceDescription d;
  g_assert_nonnull (w);
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  g_strlcpy (d.host, "merge-test", sizeof d.host);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  d.start_monotonic_ns = 1000000000;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_rank (w, r, 100 + r, "merge-test", &err), ==, PP_OK);
  if (r == 0)
    {
      PpTracePlanAction a[2][4];
      const PpTracePlanAction *acts[2] = { a[0], a[1] };
      size_t n[2] = { 4, 4 };
      for (int pr = 0; pr < 2; pr++)
        for (int k = 0; k < 4; k++)
          a[pr][k] = (PpTracePlanAction) { k < 2 ? PP_TRACE_ACT_F : PP_TRACE_ACT_B, pr, k % 2, -1, -1, -1,
                                           1e-6 * (k + pr), 1e-6 * (k + pr + 1) };
      g_assert_cmpint (pp_trace_write_plan (w, 2, acts, n, 1, &err), ==, PP_OK);
    }
  for (int k = 0; k < 4; k++)
    {
      PpSpan s;
      memset (&s, 0, sizeof s);
      s.rank = s.stage = r;
      s.kind = k < 2 ? PP_SPAN_F : PP_SPAN_B;
      s.microbatch = k % 2;
      s.start_ns = 1000000000 + 1000 * (k + r);
      s.end_ns = s.start_ns + 1000;
      s.device = 0xffff;
      s.peer_rank = -1;
      g_assert_cmpint (pp_trace_write_spans (w, &s, 1, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
}

static char *
contents (const char *path)
{
  char *text = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  return text;
}

static gint
cmp_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The names in dir, sorted, one a line: what a command left behind. */
static char *
listing (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  const char *n;
  g_assert_nonnull (d);
  while ((n = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (n));
  g_dir_close (d);
  g_ptr_array_sort (names, cmp_name);
  g_ptr_array_add (names, NULL);
  char *s = g_strjoinv ("\n", (char **) names->pdata);
  g_ptr_array_free (names, TRUE);
  return s;
}

static void
full_disk (gpointer data)
{
  /* a write past the limit fails with EFBIG, as one to a full disk fails */
  struct rlimit rl = { 1024, 1024 };
  signal (SIGXFSZ, SIG_IGN);
  setrlimit (RLIMIT_FSIZE, &rl);
}

/* Runs pipescope-cli with files limited to 1 KiB; returns its exit status. */
static int
run_on_full_disk (char **out, char **err, ...)
{
  GPtrArray *argv = g_ptr_array_new ();
  GError *error = NULL;
  const char *a;
  va_list ap;
  int status = -1;

  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  va_start (ap, err);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, full_disk, NULL, out, err,
                     &status, &error))
    g_error ("spawn: %s", error->message);
  g_ptr_array_free (argv, TRUE);
  g_assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

/* Issue "Never destroy a trace": -o naming an input (another spelling, a
 * link) and the same rank twice are refused in one line before anything is
 * written; the inputs stay as they were and nothing is left behind. */
static void
test_merge_refuses (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-merge");
  g_autofree char *r0 = pp_test_ctx_path (&c, "r0.pptrace");
  g_autofree char *r1 = pp_test_ctx_path (&c, "r1.pptrace");
  g_autofree char *r0_dot = pp_test_ctx_path (&c, "./r0.pptrace");
  g_autofree char *r1_dot = pp_test_ctx_path (&c, "./r1.pptrace");
  g_autofree char *r1_copy = pp_test_ctx_path (&c, "r1-copy.pptrace");
  g_autofree char *link = pp_test_ctx_path (&c, "link.pptrace");
  g_autofree char *merged = pp_test_ctx_path (&c, "merged.pptrace");
  char *out, *err;

  write_rank_trace (r0, 0);
  write_rank_trace (r1, 1);
  write_rank_trace (r1_copy, 1);
  g_assert_cmpint (symlink ("r0.pptrace", link), ==, 0);
  g_autofree char *before = contents (r0);
  g_autofree char *files = listing (c.dir);

  const char *const cases[][5] = {
    /* -o, inputs..., what the one line says */
    { r0_dot, r0, r1, NULL, "is the input" },
    { link, r0, r1, NULL, "is the input" },
    { r0, r0, r1, NULL, "is one of the inputs" },
    { merged, r0, r1, r1_dot, "are the same file: give each rank's trace once" },
    { merged, r0, r1, r1_copy, "both hold pipeline rank 1 and neither says its place on the job's mesh: give one trace of each pipeline rank" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_assert_cmpint (run (&out, &err, "merge", "-o", cases[i][0], cases[i][1], cases[i][2], cases[i][3],
                            NULL), ==, 2);
      pp_test_assert_one_line_error (err);
      g_assert_nonnull (strstr (err, cases[i][4]));
      g_free (out); g_free (err);
      g_autofree char *after = contents (r0);
      g_assert_cmpstr (after, ==, before);
      g_autofree char *now = listing (c.dir);
      g_assert_cmpstr (now, ==, files);
    }

  /* each rank once: one trace of both ranks' 8 blocks */
  g_assert_cmpint (run (&out, &err, "merge", "-o", merged, r0, r1, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "info", merged, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "spans: 8 (F 4, B 4)\n"));
  g_assert_nonnull (strstr (out, "plans: 2\n"));
  g_free (out); g_free (err);

  /* export over its own trace, by any name */
  g_autofree char *kept = contents (merged);
  g_autofree char *merged_dot = pp_test_ctx_path (&c, "./merged.pptrace");
  for (int i = 0; i < 2; i++)
    {
      g_assert_cmpint (run (&out, &err, "export", merged, "--format", i ? "csv" : "chrome", "-o",
                            i ? merged_dot : merged, NULL), ==, 2);
      pp_test_assert_one_line_error (err);
      g_assert_nonnull (strstr (err, "is the trace to export"));
      g_free (out); g_free (err);
      g_autofree char *after = contents (merged);
      g_assert_cmpstr (after, ==, kept);
    }
  pp_test_ctx_clear (&c);
}

/* A full disk (files limited to 1 KiB) while merging or exporting: one line
 * that says so and that the inputs are kept; an existing output as it was,
 * nothing new in the folder. */
static void
test_merge_full_disk (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-merge-full");
  g_autofree char *r0 = pp_test_ctx_path (&c, "r0.pptrace");
  g_autofree char *r1 = pp_test_ctx_path (&c, "r1.pptrace");
  g_autofree char *merged = pp_test_ctx_path (&c, "merged.pptrace");
  g_autofree char *json = pp_test_ctx_path (&c, "merged.json");
  char *out, *err;

  write_rank_trace (r0, 0);
  write_rank_trace (r1, 1);
  g_assert_true (g_file_set_contents (merged, "an older merge", -1, NULL));
  g_autofree char *files = listing (c.dir);

  g_assert_cmpint (run_on_full_disk (&out, &err, "merge", "-o", merged, r0, r1, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "the disk is full"));
  g_autofree char *kept = g_strdup_printf ("the inputs are kept: %s, %s\n", r0, r1);
  g_assert_nonnull (strstr (err, kept));
  g_free (out); g_free (err);
  g_autofree char *after = contents (merged);
  g_assert_cmpstr (after, ==, "an older merge");
  g_autofree char *now = listing (c.dir);
  g_assert_cmpstr (now, ==, files);

  /* room enough: the merge stands; its export cannot be written */
  g_assert_cmpint (run (&out, &err, "merge", "-o", merged, r0, r1, NULL), ==, 0);
  g_free (out); g_free (err);
  g_free (files);
  files = listing (c.dir);
  g_assert_cmpint (run_on_full_disk (&out, &err, "export", merged, "-o", json, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "the disk is full"));
  g_free (out); g_free (err);
  g_free (now);
  now = listing (c.dir);
  g_assert_cmpstr (now, ==, files);
  pp_test_ctx_clear (&c);
}

/* From a hostile re-test of the above: an output that is no regular file
 * (here /dev/null through a link) is written into, never renamed over; a
 * link stays a link; standard output that is the trace, an image over its
 * trace, and a trace a running job holds open are refused; an image that
 * cannot be written whole leaves the old one. */
static void
test_outputs_kept (void)
{
  PpTestCtx c;
  pp_test_ctx_init (&c, "pp-cli-outputs-kept");
  g_autofree char *r0 = pp_test_ctx_path (&c, "r0.pptrace");
  g_autofree char *r1 = pp_test_ctx_path (&c, "r1.pptrace");
  g_autofree char *to_null = pp_test_ctx_path (&c, "to-null");
  g_autofree char *to_r0 = pp_test_ctx_path (&c, "to-r0.png");
  g_autofree char *png = pp_test_ctx_path (&c, "keep.png");
  g_autofree char *held = pp_test_ctx_path (&c, "held.pptrace");
  char *out, *err;
  struct stat sb;

  write_rank_trace (r0, 0);
  write_rank_trace (r1, 1);
  g_autofree char *before = contents (r0);

  /* a device through a link: written into, the link and the device kept */
  g_assert_cmpint (symlink ("/dev/null", to_null), ==, 0);
  g_assert_cmpint (run (&out, &err, "export", r0, "-o", to_null, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "merge", "-o", to_null, r0, r1, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (lstat (to_null, &sb), ==, 0);
  g_assert_true (S_ISLNK (sb.st_mode));
  g_assert_cmpint (stat ("/dev/null", &sb), ==, 0);
  g_assert_true (S_ISCHR (sb.st_mode));

  /* export X -o - >> X */
  g_autofree char *cmd = g_strdup_printf ("'%s' export '%s' -o - >> '%s'", pp_test_cli_path (), r0, r0);
  g_autofree char *sh_err = NULL;
  int status = -1;
  char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  g_assert_true (g_spawn_sync (NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &sh_err,
                               &status, NULL));
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 2);
  pp_test_assert_one_line_error (sh_err);
  g_autofree char *after = contents (r0);
  g_assert_cmpstr (after, ==, before);

  /* an image over its own trace, through a link */
  g_assert_cmpint (symlink (r0, to_r0), ==, 0);
  g_assert_cmpint (run (&out, &err, "render", r0, "-o", to_r0, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_free (after);
  after = contents (r0);
  g_assert_cmpstr (after, ==, before);

  /* an image that cannot be written whole: the old one stays */
  g_assert_true (g_file_set_contents (png, "an older image", -1, NULL));
  g_autofree char *files = listing (c.dir);
  g_assert_cmpint (run_on_full_disk (&out, &err, "render", r0, "-o", png, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  g_autofree char *old_png = contents (png);
  g_assert_cmpstr (old_png, ==, "an older image");
  g_autofree char *now = listing (c.dir);
  g_assert_cmpstr (now, ==, files);

  /* a trace a running job writes: its shared lock, held here */
  g_assert_true (g_file_set_contents (held, "a rank's trace, being written", -1, NULL));
  int fd = open (held, O_RDONLY);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_SH), ==, 0);
  g_assert_cmpint (run (&out, &err, "merge", "-o", held, r0, r1, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "running job"));
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", r0, "-o", held, NULL), ==, 1);
  pp_test_assert_one_line_error (err);
  g_free (out); g_free (err);
  /* and any trace writer (record -o, run --trace) */
  PpError e = { 0 };
  g_assert_null (pp_trace_writer_new_path (held, PP_TRACE_LITTLE, &e));
  g_assert_nonnull (strstr (e.msg, "running job"));
  g_autofree char *kept = contents (held);
  g_assert_cmpstr (kept, ==, "a rank's trace, being written");
  close (fd);
  pp_test_ctx_clear (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-trace/roundtrip", test_trace_roundtrip);
  g_test_add_func ("/cli-trace/chrome-counters", test_chrome_counters);
  g_test_add_func ("/cli-trace/overlap-halves", test_overlap_halves);
  g_test_add_func ("/cli-trace/dp-kinds", test_dp_kinds);
  g_test_add_func ("/cli-trace/one-origin", test_one_origin);
  g_test_add_func ("/cli-trace/info-late-steps", test_info_late_steps);
  g_test_add_func ("/cli-trace/bad-files", test_bad_files);
  g_test_add_func ("/cli-trace/unknown-command", test_unknown_command);
  g_test_add_func ("/cli-trace/empty-and-unwritable", test_trace_empty_and_unwritable);
  g_test_add_func ("/cli-trace/merge-refuses", test_merge_refuses);
  g_test_add_func ("/cli-trace/merge-full-disk", test_merge_full_disk);
  g_test_add_func ("/cli-trace/outputs-kept", test_outputs_kept);
  return g_test_run ();
}
