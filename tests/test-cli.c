/* pipescope-cli schedule as a user runs it: output, exit codes, errors. */
#include <glib.h>
#include <glib/gstdio.h>
#include <sys/wait.h>
#include <string.h>

#include "pp-test-util.h"

#define run(out, err, ...) pp_test_cli_run (NULL, out, err, __VA_ARGS__)

/* The seed's staircase: GPU 0 runs F0..F5 in the first six of nine forward
 * steps, GPU 3 waits three; a backward takes two columns. */
static void
test_gpipe_ascii_pinned (void)
{
  char *out, *err;
  const char *want =
    "GPU 0: F0 F1 F2 F3 F4 F5  .  .  .  .  .  .  .  .  . B0 B0 B1 B1 B2 B2 B3 B3 B4 B4 B5 B5\n"
    "GPU 1:  . F0 F1 F2 F3 F4 F5  .  .  .  .  .  . B0 B0 B1 B1 B2 B2 B3 B3 B4 B4 B5 B5  .  .\n"
    "GPU 2:  .  . F0 F1 F2 F3 F4 F5  .  .  . B0 B0 B1 B1 B2 B2 B3 B3 B4 B4 B5 B5  .  .  .  .\n"
    "GPU 3:  .  .  . F0 F1 F2 F3 F4 F5 B0 B0 B1 B1 B2 B2 B3 B3 B4 B4 B5 B5  .  .  .  .  .  .\n"
    "bubble: 33.3%\n"
    "peak in-flight micro-batches: GPU 0: 6, GPU 1: 6, GPU 2: 6, GPU 3: 6\n"
    "one column = 1 time unit (F=1, B=2 of which W=1, transfer=0)\n";
  g_assert_cmpint (run (&out, &err, "schedule", "--schedule", "GPipe", "--ranks", "4",
                        "--microbatches", "6", NULL), ==, 0);
  g_assert_cmpstr (out, ==, want);
  g_assert_cmpstr (err, ==, "");
  g_free (out);
  g_free (err);

  g_assert_cmpint (run (&out, &err, "schedule", "-s", "gpipe", "-p", "4", "-m", "24", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\nbubble: 11.1%\n"));
  g_free (out);
  g_free (err);
}

static void
test_actions_format (void)
{
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "1F1B", "-p", "4", "-m", "6",
                        "--format", "actions", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "rank 0: 0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5\n"));
  g_assert_nonnull (strstr (out, "rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5\n"));
  g_free (out);
  g_free (err);
}

static void
test_json_format (void)
{
  char *out, *err;
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "GPipe", "-p", "4", "-m", "6",
                        "-f", "json", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"bubble\": 0.333333333"));
  g_assert_nonnull (strstr (out, "\"makespan\": 27"));
  /* 4 ranks x 6 micro-batches x (F + B) actions */
  int n = 0;
  for (const char *p = out; (p = strstr (p, "\"kind\"")); p++)
    n++;
  g_assert_cmpint (n, ==, 48);
  g_assert_nonnull (strstr (out, "{\"rank\": 3, \"stage\": 3, \"microbatch\": 0, \"kind\": \"F\", \"start\": 3, \"end\": 4}"));
  g_free (out);
  g_free (err);
}

static void
test_csv_round_trip (void)
{
  char *out, *err, *out2, *err2, *dir, *path;
  GError *error = NULL;
  g_assert_cmpint (run (&out, &err, "schedule", "-s", "ZBV", "-p", "4", "-m", "8", "-f", "csv", NULL), ==, 0);
  dir = g_dir_make_tmp ("pipescope-cli-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (dir, "zbv.csv", NULL);
  g_assert_true (g_file_set_contents (path, out, -1, NULL));
  g_assert_cmpint (run (&out2, &err2, "schedule", "--csv", path, "-f", "csv", NULL), ==, 0);
  g_assert_cmpstr (out2, ==, out);
  g_free (out2);
  g_free (err2);
  g_assert_cmpint (run (&out2, &err2, "schedule", "--csv", path, NULL), ==, 0);
  g_assert_nonnull (strstr (out2, "bubble: "));
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (dir);
  g_free (out);
  g_free (err);
  g_free (out2);
  g_free (err2);
}

/* A mistake exits 2 with one line naming the problem and what is accepted. */
static void
test_errors (void)
{
  static const struct { const char *args[8]; const char *needle; } cases[] = {
    { { "schedule", "-s", "nosuch", "-p", "4", "-m", "8" }, "GPipe" },
    { { "schedule", "-s", "GPipe", "-p", "x", "-m", "8" }, "--ranks" },
    { { "schedule", "-s", "GPipe", "-p", "1", "-m", "8" }, "at least 2 ranks" },
    { { "schedule", "-s", "GPipe", "-p", "4", "-m", "0" }, "--microbatches" },
    { { "schedule", "-s", "DualPipeV", "-p", "4", "-m", "7" }, "micro-batches" },
    { { "schedule", "-s", "ZBV", "-p", "4", "-m", "8", "-v" }, "needs a value" },
    { { "schedule", "-s", "GPipe", "-p", "4", "-m", "8", "--cost" }, "needs a value" },
    { { "schedule", "-s", "GPipe", "-p", "4", "-m", "8", "--cost=1,2" }, "F,B,W" },
    { { "schedule", "-s", "GPipe", "-p", "4", "-m", "8", "--format=xml" }, "ascii" },
    { { "schedule", "--csv", "/nonexistent/x.csv" }, "cannot open" },
    { { "schedule", "-p", "4", "-m", "8" }, "--schedule" },
    { { "frobnicate" }, "unknown command" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *const *a = cases[i].args;
      char *out, *err;
      int rc = run (&out, &err, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
      if (rc != 2)
        g_error ("case %zu: exit %d, want 2 (stderr: %s)", i, rc, err);
      g_assert_cmpstr (out, ==, "");
      g_assert_true (g_str_has_prefix (err, "pipescope-cli: error: "));
      /* exactly one line */
      g_assert_cmpint ((int) (strchr (err, '\n') - err), ==, (int) strlen (err) - 1);
      if (strstr (err, cases[i].needle) == NULL)
        g_error ("case %zu: '%s' does not mention '%s'", i, err, cases[i].needle);
      g_free (out);
      g_free (err);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/gpipe-ascii-pinned", test_gpipe_ascii_pinned);
  g_test_add_func ("/cli/actions", test_actions_format);
  g_test_add_func ("/cli/json", test_json_format);
  g_test_add_func ("/cli/csv-round-trip", test_csv_round_trip);
  g_test_add_func ("/cli/errors", test_errors);
  return g_test_run ();
}
