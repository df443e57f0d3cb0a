/* The action model's text form is PyTorch's _Action repr, both ways. */
#include <glib.h>
#include <string.h>

#include "pp-action.h"

static void
test_to_string (void)
{
  char buf[PP_ACTION_STR_MAX];
  PpAction a = pp_action (PP_ACT_F, 2, 0);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "2F0");
  a = pp_action (PP_ACT_I, 1, 3);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "1I3");
  a = pp_action (PP_ACT_W, 0, 5);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "0W5");
  a = pp_action (PP_ACT_SEND_F, 3, 1);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "3SEND_F1");
  a = pp_action (PP_ACT_OPT, 0, -1);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "0OPT");
  a = pp_action_overlap (0, 4, PP_ACT_B, 3, 1);
  g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, "(0F4;3B1)OVERLAP_F_B");
}

/* The label every export and report gives an action: PyTorch's repr for
 * one action, "0F4+3B1" for an overlapped pair (never PyTorch's
 * "(0F4;3B1)OVERLAP_F_B", which stays the schedule text). */
static void
test_to_label (void)
{
  char buf[PP_ACTION_STR_MAX];
  PpAction a = pp_action (PP_ACT_F, 2, 0);
  g_assert_cmpstr (pp_action_to_label (&a, buf, sizeof buf), ==, "2F0");
  a = pp_action (PP_ACT_W, 0, 5);
  g_assert_cmpstr (pp_action_to_label (&a, buf, sizeof buf), ==, "0W5");
  a = pp_action_overlap (0, 4, PP_ACT_B, 3, 1);
  g_assert_cmpstr (pp_action_to_label (&a, buf, sizeof buf), ==, "0F4+3B1");
  a = pp_action_overlap (5, 0, PP_ACT_I, 2, 9);
  g_assert_cmpstr (pp_action_to_label (&a, buf, sizeof buf), ==, "5F0+2I9");
  /* a pair whose backward half is not known */
  a = pp_action_overlap (1, 2, PP_ACT_F, -1, -1);
  g_assert_cmpstr (pp_action_to_label (&a, buf, sizeof buf), ==, "1OVERLAP_F_B2");
  /* cut to the buffer, still a string */
  a = pp_action_overlap (10, 400, PP_ACT_B, 30, 100);
  g_assert_cmpstr (pp_action_to_label (&a, buf, 6), ==, "10F40");
}

static void
test_round_trip (void)
{
  static const char *const texts[] = {
    "0F0", "12B345", "7I0", "7W9", "0SEND_F1", "1RECV_F1", "2SEND_B0", "3RECV_B7",
    "(0F4;3B1)OVERLAP_F_B", "(5F0;2I9)OVERLAP_F_B", "0OPT",
    "1UNSHARD", "0RESHARD", "3REDUCE_GRAD", "0WAIT_REDUCE_GRAD",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      PpAction a, b;
      PpError err = { 0 };
      char buf[PP_ACTION_STR_MAX];
      g_assert_cmpint (pp_action_parse (texts[i], &a, &err), ==, PP_OK);
      g_assert_cmpstr (pp_action_to_string (&a, buf, sizeof buf), ==, texts[i]);
      g_assert_cmpint (pp_action_parse (buf, &b, &err), ==, PP_OK);
      g_assert_true (pp_action_equal (&a, &b));
    }
}

static void
test_parse_details (void)
{
  PpAction a;
  PpError err = { 0 };

  g_assert_cmpint (pp_action_parse ("  1SEND_B2 ", &a, &err), ==, PP_OK);
  g_assert_cmpint (a.kind, ==, PP_ACT_SEND_B);
  g_assert_cmpint (a.stage, ==, 1);
  g_assert_cmpint (a.microbatch, ==, 2);
  g_assert_cmpint (pp_action_parse ("( 0F4 ; 3I1 )OVERLAP_F_B", &a, &err), ==, PP_OK);
  g_assert_cmpint (a.sub_kind, ==, PP_ACT_I);
  g_assert_cmpint (a.sub_stage, ==, 3);
  g_assert_true (pp_action_is_compute (&a));
  a = pp_action (PP_ACT_RECV_F, 0, 0);
  g_assert_false (pp_action_is_compute (&a));
}

/* FSDP's actions as PyTorch's pipeline_order_with_comms holds them: no
 * micro-batch, and WAIT_REDUCE_GRAD is not a W (longest name wins). */
static void
test_parse_fsdp (void)
{
  static const struct { const char *text; int kind; int stage; } cases[] = {
    { "1UNSHARD", PP_ACT_UNSHARD, 1 },
    { "0RESHARD", PP_ACT_RESHARD, 0 },
    { "12REDUCE_GRAD", PP_ACT_REDUCE_GRAD, 12 },
    { "3WAIT_REDUCE_GRAD", PP_ACT_WAIT_REDUCE_GRAD, 3 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PpAction a;
      PpError err = { 0 };
      g_assert_cmpint (pp_action_parse (cases[i].text, &a, &err), ==, PP_OK);
      g_assert_cmpint (a.kind, ==, cases[i].kind);
      g_assert_cmpint (a.stage, ==, cases[i].stage);
      g_assert_cmpint (a.microbatch, ==, -1);
      g_assert_true (pp_action_is_dp_comm (&a));
      g_assert_false (pp_action_is_compute (&a));
    }
  g_assert_cmpstr (pp_action_kind_name (PP_ACT_WAIT_REDUCE_GRAD), ==, "WAIT_REDUCE_GRAD");
  /* PyTorch's regex takes a micro-batch on any kind: kept */
  PpAction a;
  PpError err = { 0 };
  g_assert_cmpint (pp_action_parse ("0REDUCE_GRAD2", &a, &err), ==, PP_OK);
  g_assert_cmpint (a.kind, ==, PP_ACT_REDUCE_GRAD);
  g_assert_cmpint (a.microbatch, ==, 2);
  a = pp_action (PP_ACT_W, 0, 1);
  g_assert_false (pp_action_is_dp_comm (&a));
  g_assert_cmpint (pp_action_parse ("0WAIT_REDUCE", &a, &err), ==, PP_EFORMAT);
}

static void
test_parse_errors (void)
{
  static const char *const bad[] = {
    "F0", "0X1", "0F", "0F1x", "(0F1;1B0)", "(0F1)OVERLAP_F_B", "(0B1;1F0)OVERLAP_F_B",
    "0F99999999999", "-1F0", "(0F1;1B0", "0B",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      PpAction a;
      PpError err = { 0 };
      g_assert_cmpint (pp_action_parse (bad[i], &a, &err), ==, PP_EFORMAT);
      g_assert_cmpstr (err.msg, !=, "");
      g_assert_null (strchr (err.msg, '\n'));
    }
  PpAction a;
  PpError err = { 0 };
  g_assert_cmpint (pp_action_parse ("   ", &a, &err), ==, PP_EINVAL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/action/to-string", test_to_string);
  g_test_add_func ("/action/to-label", test_to_label);
  g_test_add_func ("/action/round-trip", test_round_trip);
  g_test_add_func ("/action/parse-details", test_parse_details);
  g_test_add_func ("/action/parse-errors", test_parse_errors);
  g_test_add_func ("/action/parse-fsdp", test_parse_fsdp);
  return g_test_run ();
}
