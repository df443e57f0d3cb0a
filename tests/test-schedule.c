/* Every schedule over the grid P 2..8, M 1..4P, V 1..3 (where it takes V):
 * valid and deadlock-free in simulation, or rejected with a one-line reason. */
#include <glib.h>
#include <string.h>

#include "pp-schedule.h"
#include "pp-simulate.h"

static int
count_kind (const PpSchedule *s, int stage, int mb, int kind)
{
  int n = 0;
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        if (a->kind == kind && a->stage == stage && a->microbatch == mb)
          n++;
        if (a->kind == PP_ACT_OVERLAP_F_B)
          {
            if (kind == PP_ACT_F && a->stage == stage && a->microbatch == mb)
              n++;
            if (a->sub_kind == kind && a->sub_stage == stage && a->sub_microbatch == mb)
              n++;
          }
      }
  return n;
}

static void
check_one (const PpScheduleInfo *info, int P, int M, int V, int *accepted, int *rejected)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_generate (info->name, P, M, V, &s, &err);

  if (st != PP_OK)
    {
      /* Even P and M a multiple of 2P suit every schedule; refusing them is a bug. */
      if (P % 2 == 0 && M % (2 * P) == 0)
        g_error ("%s P=%d M=%d V=%d rejected: %s", info->name, P, M, V, err.msg);
      g_assert_null (s);
      if (st != PP_EINVAL)
        g_error ("%s P=%d M=%d V=%d: status %s (%s), want OK or EINVAL",
                 info->name, P, M, V, pp_status_name (st), err.msg);
      g_assert_cmpstr (err.msg, !=, "");
      g_assert_null (strchr (err.msg, '\n'));
      (*rejected)++;
      return;
    }
  (*accepted)++;
  g_assert_cmpint (s->ranks, ==, P);
  g_assert_cmpint (s->microbatches, ==, M);
  if (pp_schedule_validate (s, &err) != PP_OK)
    g_error ("%s P=%d M=%d V=%d invalid: %s", info->name, P, M, V, err.msg);

  /* Independent of the validator: each (stage, mb) has one F and one B or one I + W. */
  for (int stage = 0; stage < s->n_stages; stage++)
    for (int mb = s->stage_mb_lo[stage]; mb < s->stage_mb_hi[stage]; mb++)
      {
        int f = count_kind (s, stage, mb, PP_ACT_F), b = count_kind (s, stage, mb, PP_ACT_B);
        int i = count_kind (s, stage, mb, PP_ACT_I), w = count_kind (s, stage, mb, PP_ACT_W);
        if (f != 1 || !((b == 1 && i == 0 && w == 0) || (b == 0 && i == 1 && w == 1)))
          g_error ("%s P=%d M=%d V=%d: stage %d mb %d has F=%d B=%d I=%d W=%d",
                   info->name, P, M, V, stage, mb, f, b, i, w);
      }

  PpCostModel *cm = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0);
  PpSimulation *sim = NULL;
  if (pp_simulate (s, cm, &sim, &err) != PP_OK)
    g_error ("%s P=%d M=%d V=%d does not simulate: %s", info->name, P, M, V, err.msg);
  g_assert_cmpfloat (sim->bubble, >=, 0.0);
  g_assert_cmpfloat (sim->bubble, <, 1.0);
  g_assert_cmpfloat (sim->makespan, >, 0.0);
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
}

static void
test_grid (gconstpointer data)
{
  const PpScheduleInfo *info = data;
  int accepted = 0, rejected = 0;

  for (int P = 2; P <= 8; P++)
    for (int M = 1; M <= 4 * P; M++)
      {
        if (info->takes_v)
          for (int V = 1; V <= 3; V++)
            check_one (info, P, M, V, &accepted, &rejected);
        else
          check_one (info, P, M, info->default_v, &accepted, &rejected);
      }
  g_test_message ("%s: %d accepted, %d rejected", info->name, accepted, rejected);
  g_assert_cmpint (accepted, >, 0);
}

/* Schedules with a fixed V refuse any other V with a reason. */
static void
test_fixed_v_rejects_other_v (gconstpointer data)
{
  const PpScheduleInfo *info = data;
  PpSchedule *s = NULL;
  PpError err = { 0 };
  int other = info->default_v == 1 ? 2 : 3;

  g_assert_cmpint (pp_schedule_generate (info->name, 4, 16, other, &s, &err), ==, PP_EINVAL);
  g_assert_null (s);
  g_assert_nonnull (strstr (err.msg, "stage"));
}

static void
test_names (void)
{
  static const struct { const char *alias, *name; } names[] = {
    { "gpipe", "GPipe" }, { "GPIPE", "GPipe" }, { "1f1b", "1F1B" },
    { "interleaved1f1b", "Interleaved1F1B" }, { "LoopedBFS", "LoopedBFS" },
    { "InterleavedZeroBubble", "InterleavedZeroBubble" }, { "zbvzerobubble", "ZBV" },
    { "ZBVZeroBubble", "ZBV" }, { "DualPipeV", "DualPipeV" }, { "dualpipe", "DualPipe" },
    { "zb-h1", "ZB-H1" }, { "ZB-H2", "ZB-H2" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      const PpScheduleInfo *info = pp_schedule_lookup (names[i].alias);
      g_assert_nonnull (info);
      g_assert_cmpstr (info->name, ==, names[i].name);
    }
  g_assert_null (pp_schedule_lookup ("zero"));
  g_assert_null (pp_schedule_lookup (""));

  PpSchedule *s = NULL;
  PpError err = { 0 };
  g_assert_cmpint (pp_schedule_generate ("nope", 4, 8, 0, &s, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "nope"));
  g_assert_nonnull (strstr (err.msg, "GPipe"));
  g_assert_cmpint (pp_schedule_generate ("GPipe", 1, 8, 0, &s, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_schedule_generate ("GPipe", 4, 0, 0, &s, &err), ==, PP_EINVAL);
}

/* GPipe and 1F1B accept fewer micro-batches than ranks (PyTorch's 1F1B does
 * not): M = 1 is plain model parallelism. */
static void
test_single_microbatch (void)
{
  const char *names[] = { "GPipe", "1F1B" };
  for (int i = 0; i < 2; i++)
    {
      PpSchedule *s = NULL;
      PpError err = { 0 };
      g_assert_cmpint (pp_schedule_generate (names[i], 4, 1, 0, &s, &err), ==, PP_OK);
      for (int r = 0; r < 4; r++)
        {
          g_assert_cmpint (s->rank[r].n_actions, ==, 2);
          g_assert_cmpint (s->rank[r].actions[0].kind, ==, PP_ACT_F);
          g_assert_cmpint (s->rank[r].actions[1].kind, ==, PP_ACT_B);
        }
      pp_schedule_free (s);
    }
}

/* DualPipeV needs M >= 2P, like PyTorch's. */
static void
test_dualpipev_limits (void)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  g_assert_cmpint (pp_schedule_generate ("DualPipeV", 4, 7, 0, &s, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "micro-batches"));
  g_assert_cmpint (pp_schedule_generate ("DualPipeV", 4, 8, 0, &s, &err), ==, PP_OK);
  pp_schedule_free (s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    {
      char *path = g_strdup_printf ("/schedule/grid/%s", i->name);
      g_test_add_data_func (path, i, test_grid);
      g_free (path);
      if (!i->takes_v)
        {
          path = g_strdup_printf ("/schedule/fixed-v/%s", i->name);
          g_test_add_data_func (path, i, test_fixed_v_rejects_other_v);
          g_free (path);
        }
    }
  g_test_add_func ("/schedule/names", test_names);
  g_test_add_func ("/schedule/single-microbatch", test_single_microbatch);
  g_test_add_func ("/schedule/dualpipev-limits", test_dualpipev_limits);
  return g_test_run ();
}
