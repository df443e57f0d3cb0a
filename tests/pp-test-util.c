#include "pp-test-util.h"

#include <glib.h>

PpSchedule *
pp_test_generate (const char *name, int P, int M, int V)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_generate (name, P, M, V, &s, &err);
  if (st != PP_OK)
    g_error ("generate %s P=%d M=%d V=%d: %s: %s", name, P, M, V, pp_status_name (st), err.msg);
  g_assert_nonnull (s);
  return s;
}

PpSimulation *
pp_test_simulate (const PpSchedule *s, double f, double b, double w, double c)
{
  PpCostModel *cost = pp_cost_model_new_uniform (s->n_stages, f, b, w, c);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  PpStatus st;

  g_assert_nonnull (cost);
  st = pp_simulate (s, cost, &sim, &err);
  if (st != PP_OK)
    g_error ("simulating %s P=%d M=%d: %s: %s", s->name, s->ranks, s->microbatches,
             pp_status_name (st), err.msg);
  pp_cost_model_free (cost);
  g_assert_nonnull (sim);
  return sim;
}
