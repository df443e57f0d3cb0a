/* pp-schedule-private.h — shared between the schedule files, not a public API. */
#pragma once

#include "pp-schedule.h"

#include "pp-simulate.h"

/* pp_simulate for a schedule that already passed pp_schedule_check_structure
 * (pp-schedule-rules.h). */
PpStatus pp_simulate_checked (const PpSchedule *s, const PpCostModel *cost,
                              PpSimulation **out, PpError *err);
