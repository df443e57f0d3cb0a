/* Generate and simulate P=64, M=1024 (V=2 where a schedule takes it) for every
 * schedule; prints the median of several runs.  Target: under 50 ms each on a
 * 2-core developer machine.  Run with `meson test --benchmark`. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pp-schedule.h"
#include "pp-simulate.h"
#include "bench-util.h"

#define RUNS 9

int
main (void)
{
  const int P = 64, M = 1024;
  int slow = 0;

  printf ("%-22s %3s %9s %10s %10s %10s %8s\n", "schedule", "V", "actions", "gen ms", "sim ms",
          "total ms", "bubble");
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    {
      int V = i->takes_v ? 2 : i->default_v;
      double gen[RUNS], sim_ms[RUNS], tot[RUNS], bubble = 0;
      long actions = 0;
      PpError err = { 0 };

      for (int k = 0; k < RUNS; k++)
        {
          PpSchedule *s = NULL;
          PpSimulation *sim = NULL;
          double t0 = bench_now_ms ();
          if (pp_schedule_generate (i->name, P, M, V, &s, &err) != PP_OK)
            {
              fprintf (stderr, "%s: %s\n", i->name, err.msg);
              return 1;
            }
          double t1 = bench_now_ms ();
          PpCostModel *cm = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0);
          if (pp_simulate (s, cm, &sim, &err) != PP_OK)
            {
              fprintf (stderr, "%s: %s\n", i->name, err.msg);
              return 1;
            }
          double t2 = bench_now_ms ();
          gen[k] = t1 - t0;
          sim_ms[k] = t2 - t1;
          tot[k] = t2 - t0;
          bubble = sim->bubble;
          actions = pp_schedule_total_actions (s);
          pp_simulation_free (sim);
          pp_cost_model_free (cm);
          pp_schedule_free (s);
        }
      qsort (gen, RUNS, sizeof (double), bench_cmp_double);
      qsort (sim_ms, RUNS, sizeof (double), bench_cmp_double);
      qsort (tot, RUNS, sizeof (double), bench_cmp_double);
      printf ("%-22s %3d %9ld %10.2f %10.2f %10.2f %7.2f%%%s\n", i->name, V, actions,
              gen[RUNS / 2], sim_ms[RUNS / 2], tot[RUNS / 2], 100 * bubble,
              tot[RUNS / 2] < 50 ? "" : "  (over the 50 ms target)");
      if (tot[RUNS / 2] >= 50)
        slow++;
    }
  printf ("median of %d runs, P=%d M=%d; %d schedule(s) over 50 ms\n", RUNS, P, M, slow);
  return 0;
}
