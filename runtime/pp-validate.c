/* pp-validate.c — is a schedule something a pipeline can run? */
#include "pp-schedule-private.h"
#include "pp-schedule-rules.h"
#include "pp-simulate.h"

#include <stdint.h>
#include <stdlib.h>

PpStatus
pp_schedule_validate (const PpSchedule *s, PpError *err)
{
  PpStatus st;
  uint8_t *seen;
  PpCostModel *unit;
  PpSimulation *sim = NULL;

  if ((st = pp_schedule_check_structure (s, &seen, err)) != PP_OK)
    return st;
  for (int stage = 0; stage < s->n_stages; stage++)
    for (int mb = s->stage_mb_lo[stage]; mb < s->stage_mb_hi[stage]; mb++)
      {
        uint8_t c = seen[(size_t) stage * (size_t) s->microbatches + (size_t) mb];
        const char *missing = NULL;
        if (!(c & PP_SEEN_F))
          missing = "F";
        else if (!(c & (PP_SEEN_B | PP_SEEN_I | PP_SEEN_W)))
          missing = "backward (B, or I and W)";
        else if ((c & PP_SEEN_I) && !(c & PP_SEEN_W))
          missing = "W (it has I)";
        else if ((c & PP_SEEN_W) && !(c & PP_SEEN_I))
          missing = "I (it has W)";
        if (missing)
          {
            free (seen);
            return pp_error_set (err, PP_EFORMAT, "stage %d (rank %d), micro-batch %d has no %s",
                                 stage, s->stage_rank[stage], mb, missing);
          }
      }
  free (seen);

  /* Dependencies across ranks: simulate with unit costs; a stall is a deadlock. */
  if ((unit = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while checking the schedule");
  st = pp_simulate_checked (s, unit, &sim, err);
  pp_simulation_free (sim);
  pp_cost_model_free (unit);
  return st;
}
