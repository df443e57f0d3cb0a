/* test-megatron-match.c — Megatron-Interleaved against megatron-core, and
 * beside PyTorch's Interleaved1F1B, without either installed.
 *
 * tests/data/megatron-schedules.txt holds, for a grid of (P, V, M,
 * microbatch_group_size_per_vp_stage G), the compute order each rank of
 * megatron-core 0.16's own schedule loop ran, or the error it raised
 * (tools/gen-megatron-golden.py records them); "Megatron-1F1B" records are
 * its non-interleaved schedule.  tests/data/pytorch-schedules.txt holds
 * PyTorch's orders (tools/gen-pytorch-golden.py).  We require:
 *
 *   - every record megatron-core runs: we build it (Megatron-1F1B through
 *     its alias, 1F1B), each rank's order is megatron-core's, it validates
 *     and simulates;
 *   - every record megatron-core refuses: we refuse it (PP_EINVAL), with a
 *     line naming megatron-core;
 *   - where the PyTorch golden has Interleaved1F1B at the same (P, M, V):
 *     pp_schedule_same_order says equal exactly where the two goldens are
 *     equal (some are, some are not: both are checked); Megatron-1F1B equals
 *     PyTorch's 1F1B golden wherever both have it.
 */
#include <glib.h>
#include <string.h>

#include "pp-action.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-test-util.h"

typedef struct {
  char   *name;
  int     P, M, V, G;
  char   *reject;    /* the error, or NULL */
  char  **ranks;     /* [P] the rank's actions, one string "0F0 0F1 ..." */
} Record;

static GPtrArray *megatron, *pytorch;   /* of Record* */

static void
record_free (gpointer data)
{
  Record *r = data;
  g_free (r->name);
  g_free (r->reject);
  g_strfreev (r->ranks);
  g_free (r);
}

/* Reads a golden: "schedule NAME P p M m V v [G g]", then "reject ..." or
 * P lines "rank r: actions", then "end". */
static GPtrArray *
load (const char *file)
{
  const char *dir = g_getenv ("PP_TEST_DATA_DIR");
  g_autofree char *path = g_build_filename (dir ? dir : "tests/data", file, NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func (record_free);
  Record *cur = NULL;
  GPtrArray *ranks = NULL;

  if (!g_file_get_contents (path, &text, NULL, &error))
    g_error ("cannot read %s: %s", path, error->message);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    {
      char *line = g_strstrip (*l);
      if (*line == '\0' || *line == '#')
        continue;
      if (g_str_has_prefix (line, "schedule "))
        {
          g_auto (GStrv) w = g_strsplit (line, " ", -1);
          g_assert_null (cur);
          cur = g_new0 (Record, 1);
          cur->name = g_strdup (w[1]);
          for (int i = 2; w[i] && w[i + 1]; i += 2)
            {
              int v = atoi (w[i + 1]);
              if (strcmp (w[i], "P") == 0) cur->P = v;
              else if (strcmp (w[i], "M") == 0) cur->M = v;
              else if (strcmp (w[i], "V") == 0) cur->V = v;
              else if (strcmp (w[i], "G") == 0) cur->G = v;
            }
          ranks = g_ptr_array_new ();
        }
      else if (g_str_has_prefix (line, "reject "))
        cur->reject = g_strdup (line + 7);
      else if (g_str_has_prefix (line, "rank "))
        g_ptr_array_add (ranks, g_strdup (strchr (line, ':') + 2));
      else if (strcmp (line, "end") == 0)
        {
          g_ptr_array_add (ranks, NULL);
          cur->ranks = (char **) g_ptr_array_free (ranks, FALSE);
          g_assert_true (cur->reject != NULL || (int) g_strv_length (cur->ranks) == cur->P);
          g_ptr_array_add (out, cur);
          cur = NULL;
        }
    }
  g_assert_null (cur);
  return out;
}

static const Record *
find (GPtrArray *in, const char *name, int P, int M, int V)
{
  for (guint i = 0; i < in->len; i++)
    {
      const Record *r = in->pdata[i];
      if (strcmp (r->name, name) == 0 && r->P == P && r->M == M && r->V == V)
        return r;
    }
  return NULL;
}

/* Rank r's compute actions in PyTorch's repr, space separated. */
static char *
rank_text (const PpSchedule *s, int r)
{
  GString *str = g_string_new (NULL);
  char buf[PP_ACTION_STR_MAX];
  for (int k = 0; k < s->rank[r].n_actions; k++)
    if (pp_action_is_compute (&s->rank[r].actions[k]))
      g_string_append_printf (str, "%s%s", str->len ? " " : "",
                              pp_action_to_string (&s->rank[r].actions[k], buf, sizeof buf));
  return g_string_free (str, FALSE);
}

static PpStatus
build (const Record *rec, PpSchedule **s, PpError *err)
{
  return pp_schedule_generate_group (rec->name, rec->P, rec->M, rec->V, rec->G, s, err);
}

static void
test_orders (void)
{
  int n_run = 0, n_refused = 0;

  g_assert_cmpuint (megatron->len, >, 500);
  for (guint i = 0; i < megatron->len; i++)
    {
      const Record *rec = megatron->pdata[i];
      PpSchedule *s = NULL;
      PpError err = { 0 };
      PpStatus st = build (rec, &s, &err);

      if (rec->reject)
        {
          if (st != PP_EINVAL)
            g_error ("%s P=%d M=%d V=%d G=%d: megatron-core refuses it (%s); we give %d",
                     rec->name, rec->P, rec->M, rec->V, rec->G, rec->reject, st);
          g_assert_nonnull (strstr (err.msg, "megatron-core"));
          g_assert_null (strchr (err.msg, '\n'));
          n_refused++;
          continue;
        }
      if (st != PP_OK)
        g_error ("%s P=%d M=%d V=%d G=%d: megatron-core runs it; we refuse: %s",
                 rec->name, rec->P, rec->M, rec->V, rec->G, err.msg);
      g_assert_cmpint (s->ranks, ==, rec->P);
      for (int r = 0; r < rec->P; r++)
        {
          g_autofree char *ours = rank_text (s, r);
          if (strcmp (ours, rec->ranks[r]) != 0)
            g_error ("%s P=%d M=%d V=%d G=%d rank %d:\n  ours:     %s\n  megatron: %s",
                     rec->name, rec->P, rec->M, rec->V, rec->G, r, ours, rec->ranks[r]);
        }
      /* the validator and the simulator take it */
      g_assert_cmpint (pp_schedule_validate (s, &err), ==, PP_OK);
      PpCostModel *cm = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0);
      PpSimulation *sim = NULL;
      g_assert_cmpint (pp_simulate (s, cm, &sim, &err), ==, PP_OK);
      g_assert_cmpfloat (sim->makespan, >, 0);
      pp_simulation_free (sim);
      pp_cost_model_free (cm);
      pp_schedule_free (s);
      n_run++;
    }
  g_test_message ("%d orders as megatron-core's, %d refusals as its", n_run, n_refused);
  g_assert_cmpint (n_run, >, 200);
  g_assert_cmpint (n_refused, >, 200);
}

/* Whether two goldens' records have the same per-rank orders. */
static gboolean
goldens_equal (const Record *a, const Record *b)
{
  if (a->reject || b->reject || a->P != b->P)
    return FALSE;
  for (int r = 0; r < a->P; r++)
    if (strcmp (a->ranks[r], b->ranks[r]) != 0)
      return FALSE;
  return TRUE;
}

static void
test_beside_pytorch (void)
{
  int n_equal = 0, n_differ = 0, n_1f1b = 0;

  for (guint i = 0; i < megatron->len; i++)
    {
      const Record *rec = megatron->pdata[i];
      gboolean interleaved = strcmp (rec->name, "Megatron-Interleaved") == 0;
      const Record *py = find (pytorch, interleaved ? "Interleaved1F1B" : "1F1B", rec->P, rec->M, rec->V);
      if (rec->reject || py == NULL)
        continue;
      if (!interleaved)
        {
          /* megatron-core's non-interleaved order is PyTorch's 1F1B: the alias holds */
          g_assert_true (goldens_equal (rec, py));
          n_1f1b++;
          continue;
        }
      if (py->reject)
        continue;
      gboolean want = goldens_equal (rec, py);
      PpSchedule *ours = NULL, *theirs = NULL;
      PpError err = { 0 };
      int rank = -2, index = -2;
      g_assert_cmpint (build (rec, &ours, &err), ==, PP_OK);
      g_assert_cmpint (pp_schedule_generate ("Interleaved1F1B", rec->P, rec->M, rec->V, &theirs, &err), ==, PP_OK);
      gboolean same = pp_schedule_same_order (ours, theirs, &rank, &index);
      if (same != want)
        g_error ("P=%d M=%d V=%d G=%d: the goldens are %s, pp_schedule_same_order says %s",
                 rec->P, rec->M, rec->V, rec->G, want ? "equal" : "different", same ? "equal" : "different");
      if (same)
        {
          g_assert_cmpint (rank, ==, -1);
          n_equal++;
        }
      else
        {
          /* the first difference it names is one */
          g_assert_cmpint (rank, >=, 0);
          g_assert_cmpint (pp_schedule_rank_difference (ours, theirs, rank), ==, index);
          for (int r = 0; r < rank; r++)
            g_assert_cmpint (pp_schedule_rank_difference (ours, theirs, r), ==, -1);
          g_assert_true (strcmp (rec->ranks[rank], py->ranks[rank]) != 0);
          n_differ++;
        }
      pp_schedule_free (ours);
      pp_schedule_free (theirs);
    }
  g_test_message ("beside PyTorch's Interleaved1F1B: %d equal, %d differ; Megatron-1F1B = 1F1B %d times",
                  n_equal, n_differ, n_1f1b);
  g_assert_cmpint (n_equal, >, 20);
  g_assert_cmpint (n_differ, >, 20);
  g_assert_cmpint (n_1f1b, >, 20);
}

/* The default group is P, as megatron-core's; the name carries the group. */
static void
test_group_in_name (void)
{
  PpSchedule *a = NULL, *b = NULL;
  PpError err = { 0 };

  g_assert_cmpint (pp_schedule_generate ("Megatron-Interleaved", 4, 8, 2, &a, &err), ==, PP_OK);
  g_assert_cmpstr (a->name, ==, "Megatron-Interleaved:group=4");
  g_assert_cmpint (pp_schedule_generate (a->name, 4, 8, 2, &b, &err), ==, PP_OK);
  g_assert_true (pp_schedule_same_order (a, b, NULL, NULL));
  pp_schedule_free (b);
  g_assert_cmpint (pp_schedule_generate ("megatron-interleaved:group=8", 4, 8, 2, &b, &err), ==, PP_OK);
  g_assert_cmpstr (b->name, ==, "Megatron-Interleaved:group=8");
  g_assert_false (pp_schedule_same_order (a, b, NULL, NULL));
  pp_schedule_free (a);
  pp_schedule_free (b);

  g_assert_cmpint (pp_schedule_name_group ("Megatron-Interleaved:group=3"), ==, 3);
  g_assert_cmpint (pp_schedule_name_group ("Megatron-Interleaved"), ==, 0);
  g_assert_cmpint (pp_schedule_name_group ("Megatron-Interleaved:group=0"), ==, -1);
  g_assert_cmpint (pp_schedule_name_group ("Megatron-Interleaved:grp=3"), ==, -1);
  g_assert_cmpstr (pp_schedule_lookup ("Megatron-1F1B")->name, ==, "1F1B");
  g_assert_null (pp_schedule_lookup ("1F1B:group=2"));
  g_assert_cmpint (pp_schedule_generate_group ("1F1B", 4, 8, 0, 4, &a, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_schedule_generate_group ("Megatron-Interleaved:group=4", 4, 8, 2, 8, &a, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "--group"));
}

static void
test_frameworks (void)
{
  g_assert_cmpint (pp_framework_of_description ("Megatron-Interleaved:group=2", "megatron-core 0.16.1"), ==,
                   PP_FRAMEWORK_MEGATRON);
  g_assert_cmpint (pp_framework_of_description ("Megatron-1F1B", "PyTorch 2.15"), ==, PP_FRAMEWORK_MEGATRON);
  g_assert_cmpint (pp_framework_of_description ("1F1B", "PyTorch 2.15.0 gloo Schedule1F1B"), ==,
                   PP_FRAMEWORK_PYTORCH);
  g_assert_cmpint (pp_framework_of_description ("1F1B", "mlp 4x256"), ==, PP_FRAMEWORK_PIPESCOPE);
  /* what each can run */
  g_assert_true (pp_schedule_runs_on ("1F1B", PP_FRAMEWORK_MEGATRON));
  g_assert_true (pp_schedule_runs_on ("Megatron-Interleaved:group=3", PP_FRAMEWORK_MEGATRON));
  g_assert_false (pp_schedule_runs_on ("Interleaved1F1B", PP_FRAMEWORK_MEGATRON));
  g_assert_false (pp_schedule_runs_on ("DualPipe", PP_FRAMEWORK_MEGATRON));
  g_assert_false (pp_schedule_runs_on ("DualPipe", PP_FRAMEWORK_PYTORCH));
  g_assert_true (pp_schedule_runs_on ("ZB-H1", PP_FRAMEWORK_PYTORCH));
  g_assert_false (pp_schedule_runs_on ("Megatron-Interleaved", PP_FRAMEWORK_PYTORCH));
  g_assert_true (pp_schedule_runs_on ("DualPipe", PP_FRAMEWORK_PIPESCOPE));
}

/* `schedule` says in one line how the order stands to PyTorch's, and shows
 * both where they differ; Megatron-1F1B says it is 1F1B; refusals are one
 * line and exit 2. */
static void
test_cli (void)
{
  char *out = NULL, *err = NULL;

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-Interleaved", "-p", "2",
                                    "-m", "4", "-v", "2", "-f", "actions", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "rank 0: 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3\n"));
  g_assert_nonnull (strstr (out, "\nmegatron-core's order for P=2, V=2, M=4, group=2 equals PyTorch's Interleaved1F1B\n"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-Interleaved", "-p", "2",
                                    "-m", "6", "-v", "2", "--group", "3", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "bubble: "));
  g_assert_nonnull (strstr (out, "differs from PyTorch's Interleaved1F1B on 2 of 2 ranks (first: rank 0, action 2"));
  g_assert_nonnull (strstr (out, "\n  rank 0 Megatron: 0F0 0F1 [0F2] 2F0"));
  g_assert_nonnull (strstr (out, "\n  rank 0 PyTorch:  0F0 0F1 [2F0] 2F1"));
  g_assert_nonnull (strstr (out, "\n  rank 1 PyTorch:  "));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-Interleaved:group=3", "-p", "2",
                                    "-m", "5", "-f", "json", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"schedule\": \"Megatron-Interleaved:group=3\""));
  g_assert_nonnull (strstr (out, "\"pytorch_interleaved1f1b\": \"refused\""));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-1F1B", "-p", "2", "-m", "3",
                                    "-f", "actions", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"));
  g_assert_nonnull (strstr (out, "runs exactly this 1F1B order"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* csv stays pure data */
  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-Interleaved", "-p", "2",
                                    "-m", "4", "-f", "csv", NULL), ==, 0);
  g_assert_null (strstr (out, "PyTorch"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "Megatron-Interleaved", "-p", "4",
                                    "-m", "6", NULL), ==, 2);
  g_assert_cmpstr (out, ==, "");
  g_assert_nonnull (strstr (err, "megatron-core refuses"));
  g_assert_nonnull (strstr (err, "use M=4 or M=8"));
  g_assert_cmpint (pp_test_count (err, "\n"), ==, 1);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (pp_test_cli_run (NULL, &out, &err, "schedule", "-s", "1F1B", "-p", "2", "-m", "4",
                                    "-g", "2", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "1F1B takes no group"));
  g_free (out);
  g_free (err);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  megatron = load ("megatron-schedules.txt");
  pytorch = load ("pytorch-schedules.txt");
  g_test_add_func ("/megatron/orders", test_orders);
  g_test_add_func ("/megatron/beside-pytorch", test_beside_pytorch);
  g_test_add_func ("/megatron/group-in-name", test_group_in_name);
  g_test_add_func ("/megatron/frameworks", test_frameworks);
  g_test_add_func ("/megatron/cli", test_cli);
  int rc = g_test_run ();
  g_ptr_array_unref (megatron);
  g_ptr_array_unref (pytorch);
  return rc;
}
