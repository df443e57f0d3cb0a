/* test-chrome-roundtrip.c — the Chrome JSON handed to Perfetto comes back
 * into pipescope as the same run (issue 30): `export --format chrome`, then
 * `import` of that file, gives a trace whose CSV (every span, its rank,
 * stage, micro-batch, step, times, device, name, process and place), why
 * (the analysis: idle by cause, critical path, costs) and info (all but
 * the file's name and the count of PLAN frames: one a rank, the plan each
 * rank ended with) are the original's, byte for byte, and whose Chrome
 * export is the first one again.  For a run of ours (ZBV: chunks, counters,
 * markers, a plan with times, ranks' hosts), a merged job of replicas
 * (processes with places) and a trace of host work and run delay
 * (pp-synth-host: GC and HOST_* spans, RUN_DELAY_NS counters), which the
 * export shows on a "host" row of each rank and as a counter track. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "pp-test-util.h"

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)

static char *tmp_dir;

static char *
slurp (const char *path)
{
  char *data = NULL;
  g_assert_true (g_file_get_contents (path, &data, NULL, NULL));
  return data;
}

/* info's text without the lines that name the file or count PLAN frames */
static char *
info_of (const char *trace)
{
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "info", trace, NULL), ==, 0);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  GString *kept = g_string_new (NULL);
  for (char **l = lines; *l; l++)
    if (!g_str_has_prefix (*l, "trace: ") && !g_str_has_prefix (*l, "plans: "))
      g_string_append_printf (kept, "%s\n", *l);
  g_free (out);
  g_free (err);
  return g_string_free (kept, FALSE);
}

static void
assert_same_export (const char *a, const char *b, const char *format)
{
  g_autofree char *fa = g_strdup_printf ("%s.%s", a, format), *fb = g_strdup_printf ("%s.%s", b, format);
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "export", a, "--format", format, "-o", fa, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", b, "--format", format, "-o", fb, NULL), ==, 0);
  g_free (out); g_free (err);
  g_autofree char *da = slurp (fa), *db = slurp (fb);
  g_assert_cmpuint (strlen (da), >, 100);
  g_assert_cmpstr (da, ==, db);
}

/* trace -> Chrome JSON -> import -> the same run */
static void
roundtrip (const char *trace, const char *schedule, int blocks)
{
  g_autofree char *json = g_strconcat (trace, ".json", NULL);
  g_autofree char *back = g_strconcat (trace, ".back.pptrace", NULL);
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "export", trace, "--format", "chrome", "-o", json, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "import", json, "-o", back, NULL), ==, 0);
  g_autofree char *first = g_strdup_printf ("imported pipescope's Chrome export: %s, ", schedule);
  g_assert_true (g_str_has_prefix (out, first));
  g_autofree char *count = g_strdup_printf ("  %d blocks, ", blocks);
  g_assert_nonnull (strstr (out, count));
  g_free (out); g_free (err);

  assert_same_export (trace, back, "csv");
  assert_same_export (trace, back, "why");
  g_autofree char *ia = info_of (trace), *ib = info_of (back);
  g_assert_nonnull (strstr (ia, "spans: "));
  g_assert_cmpstr (ia, ==, ib);
  /* exported again, the same file Perfetto was given */
  g_autofree char *json2 = g_strconcat (back, ".json", NULL);
  g_assert_cmpint (run (&out, &err, "export", back, "--format", "chrome", "-o", json2, NULL), ==, 0);
  g_free (out); g_free (err);
  g_autofree char *j1 = slurp (json), *j2 = slurp (json2);
  g_assert_cmpstr (j1, ==, j2);
}

static void
test_run_of_ours (void)
{
  g_autofree char *trace = g_build_filename (tmp_dir, "zbv.pptrace", NULL);
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "run", "-s", "ZBV", "-p", "2", "-m", "4", "--layers", "4", "--width", "32",
                        "--batch", "8", "--steps", "6", "--trace", trace, NULL), ==, 0);
  g_free (out); g_free (err);
  /* 6 steps x 2 ranks x 2 chunks x 4 micro-batches x F, I, W */
  roundtrip (trace, "ZBV", 6 * 2 * 2 * 4 * 3);
}

static void
test_job_of_replicas (void)
{
  const char *synth = g_getenv ("PP_SYNTH_MESH");
  g_assert_nonnull (synth);
  g_autofree char *base = g_build_filename (tmp_dir, "job", NULL);
  g_autofree char *trace = g_build_filename (tmp_dir, "job.pptrace", NULL);
  g_autofree char *r0 = g_strconcat (base, ".rank0", NULL), *r1 = g_strconcat (base, ".rank1", NULL);
  g_autofree char *r2 = g_strconcat (base, ".rank2", NULL), *r3 = g_strconcat (base, ".rank3", NULL);
  const char *make[] = { synth, base, "2", "2", "4", "3", "1f1b", "--straggler", "1", NULL };
  int status = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "merge", "-o", trace, r0, r1, r2, r3, NULL), ==, 0);
  g_free (out); g_free (err);
  /* 4 processes x 3 steps x 4 micro-batches x F, B */
  roundtrip (trace, "1F1B", 4 * 3 * 4 * 2);
}

/* Occurrences of needle in hay. */
static int
count (const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = strstr (hay, needle); p != NULL; p = strstr (p + 1, needle))
    n++;
  return n;
}

static void
test_host_work (void)
{
  const char *synth = g_getenv ("PP_SYNTH_HOST");
  g_assert_nonnull (synth);
  g_autofree char *trace = g_build_filename (tmp_dir, "host.pptrace", NULL);
  const char *make[] = { synth, trace, NULL };
  int status = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) make, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                               &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  /* 3 steps x 2 ranks x 4 micro-batches x F, B; the host spans and the
   * counters come back too: CSV has every span, info runtime's parts */
  roundtrip (trace, "GPipe", 3 * 2 * 4 * 2);
  g_autofree char *ia = info_of (trace);
  g_assert_nonnull (strstr (ia, "descheduled"));

  g_autofree char *json = g_strconcat (trace, ".json", NULL);
  g_autofree char *j = slurp (json);
  /* rank 0's host work on its own row (tid 5), named, none on the blocks' */
  g_assert_cmpint (count (j, "\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":5,\"args\":{\"name\":\"host\"}"), ==, 1);
  g_assert_cmpint (count (j, "\"cat\":\"GC\",\"ph\":\"X\",\"pid\":0,\"tid\":5,"), ==, 2);
  g_assert_cmpint (count (j, "\"cat\":\"HOST_DATA\",\"ph\":\"X\",\"pid\":0,\"tid\":5,"), ==, 3);
  g_assert_cmpint (count (j, "\"cat\":\"GC\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"), ==, 0);
  /* run delay as a counter track of what each sample added: 1.1 ms across
   * rank 0's gap in each of the 3 steps */
  g_assert_cmpint (count (j, "\"name\":\"descheduled (ms since the last sample)\",\"ph\":\"C\""), >, 3);
  g_assert_cmpint (count (j, ",\"args\":{\"ms\":1.1}}"), ==, 3);
}

/* An export imported with another trace is refused in one line. */
static void
test_alone (void)
{
  g_autofree char *trace = g_build_filename (tmp_dir, "plan.pptrace", NULL);
  g_autofree char *json = g_build_filename (tmp_dir, "plan.json", NULL);
  g_autofree char *back = g_build_filename (tmp_dir, "both.pptrace", NULL);
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "4", "--trace", trace, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "export", trace, "--format", "chrome", "-o", json, NULL), ==, 0);
  g_free (out); g_free (err);
  g_assert_cmpint (run (&out, &err, "import", json, json, "-o", back, NULL), ==, 2);
  pp_test_assert_one_line_error (err);
  g_assert_nonnull (strstr (err, "import it alone"));
  g_free (out); g_free (err);
  g_assert_false (g_file_test (back, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmp_dir = g_dir_make_tmp ("pp-chrome-rt-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  g_test_add_func ("/chrome-roundtrip/run-of-ours", test_run_of_ours);
  g_test_add_func ("/chrome-roundtrip/job-of-replicas", test_job_of_replicas);
  g_test_add_func ("/chrome-roundtrip/alone", test_alone);
  g_test_add_func ("/chrome-roundtrip/host-work", test_host_work);
  int rc = g_test_run ();
  pp_test_rm_rf (tmp_dir);
  g_free (tmp_dir);
  return rc;
}
