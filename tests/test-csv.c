/* PyTorch's compute_only CSV: written and read back unchanged; bad files get
 * one-line errors that say where. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "pp-schedule.h"

static PpStatus
read_text (const char *text, PpSchedule **out, PpError *err)
{
  FILE *f = fmemopen ((void *) text, strlen (text), "r");
  g_assert_nonnull (f);
  PpStatus st = pp_schedule_read_csv (f, "custom", out, err);
  fclose (f);
  return st;
}

static void
test_round_trip (void)
{
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    {
      PpSchedule *s = NULL, *t = NULL;
      PpError err = { 0 };
      char *buf = NULL;
      size_t len = 0;
      if (pp_schedule_generate (i->name, 4, 8, i->default_v, &s, &err) != PP_OK)
        g_error ("%s: %s", i->name, err.msg);
      FILE *f = open_memstream (&buf, &len);
      if (g_strcmp0 (i->name, "DualPipe") == 0)
        {
          /* two chains in opposite directions: not expressible, and said so */
          g_assert_cmpint (pp_schedule_write_csv (s, f, &err), ==, PP_EUNSUPPORTED);
          g_assert_nonnull (strstr (err.msg, "cannot express"));
          fclose (f);
          free (buf);
          pp_schedule_free (s);
          continue;
        }
      g_assert_cmpint (pp_schedule_write_csv (s, f, &err), ==, PP_OK);
      fclose (f);
      g_assert_cmpint (len, >, 0);
      if (read_text (buf, &t, &err) != PP_OK)
        g_error ("%s: reading back its own CSV: %s", i->name, err.msg);
      g_assert_cmpint (t->ranks, ==, s->ranks);
      g_assert_cmpint (t->n_stages, ==, s->n_stages);
      g_assert_cmpint (t->stages_per_rank, ==, s->stages_per_rank);
      g_assert_cmpint (t->microbatches, ==, s->microbatches);
      for (int st = 0; st < s->n_stages; st++)
        g_assert_cmpint (t->stage_rank[st], ==, s->stage_rank[st]);
      for (int r = 0; r < s->ranks; r++)
        {
          g_assert_cmpint (t->rank[r].n_actions, ==, s->rank[r].n_actions);
          for (int k = 0; k < s->rank[r].n_actions; k++)
            g_assert_true (pp_action_equal (&t->rank[r].actions[k], &s->rank[r].actions[k]));
        }
      free (buf);
      pp_schedule_free (s);
      pp_schedule_free (t);
    }
}

/* What PyTorch's _dump_csv writes for a pipeline_order with idle steps (None
 * becomes an empty cell), and a V layout inferred from where stages appear. */
static void
test_pytorch_style (void)
{
  const char *text =
    "0F0,,1F0,1I0,1W0,0I0,0W0\r\n"
    ",0F0_placeholder\r\n";
  PpSchedule *s = NULL;
  PpError err = { 0 };
  /* the second row is malformed: the error names line and column */
  g_assert_cmpint (read_text (text, &s, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "line 2, column 2"));
  g_assert_null (strchr (err.msg, '\n'));

  const char *v =
    "0F0,,3F0,3I0,3W0,0I0,0W0\r\n"
    ",1F0,2F0,2I0,1I0,2W0,1W0\r\n";
  g_assert_cmpint (read_text (v, &s, &err), ==, PP_OK);
  g_assert_cmpint (s->ranks, ==, 2);
  g_assert_cmpint (s->n_stages, ==, 4);
  g_assert_cmpint (s->stage_rank[0], ==, 0);
  g_assert_cmpint (s->stage_rank[1], ==, 1);
  g_assert_cmpint (s->stage_rank[2], ==, 1);
  g_assert_cmpint (s->stage_rank[3], ==, 0);
  g_assert_cmpint (s->rank[0].n_actions, ==, 6);
  pp_schedule_free (s);
}

static void
test_errors (void)
{
  static const struct { const char *text, *needle; } bad[] = {
    { "0F0,0SEND_F0,0B0\n1F0,1B0\n", "not a compute action" },
    { "0F0,0B0\n0F0,0B0\n", "also runs" },
    { "0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n", "deadlock" },
    { "0F0,0I0\n1F0,1B0\n", "W" },
    { "", "no actions" },
    { "0F0,0B0\n", "2 ranks" },
    { "0F0,0B0\n2F0,2B0\n", "stage 1 never appears" },
    { "0F0,0B0\n1F0,1B0,1F9999999\n", "" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      PpSchedule *s = NULL;
      PpError err = { 0 };
      PpStatus st = read_text (bad[i].text, &s, &err);
      if (st == PP_OK)
        g_error ("CSV %zu accepted", i);
      g_assert_null (s);
      g_assert_cmpstr (err.msg, !=, "");
      g_assert_null (strchr (err.msg, '\n'));
      if (strstr (err.msg, bad[i].needle) == NULL)
        g_error ("CSV %zu: '%s' does not mention '%s'", i, err.msg, bad[i].needle);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/csv/round-trip", test_round_trip);
  g_test_add_func ("/csv/pytorch-style", test_pytorch_style);
  g_test_add_func ("/csv/errors", test_errors);
  return g_test_run ();
}
