/* pp-schedule-private.h — shared between the schedule files, not a public API. */
#pragma once

#include "pp-schedule.h"

/* Every action names a stage that exists and lives on the rank that runs it,
 * and a micro-batch that stage sees; no (stage, micro-batch, kind) twice.
 * Checked before anything indexes arrays by stage and micro-batch. */
PpStatus pp_schedule_check_structure (const PpSchedule *s, PpError *err);

#include "pp-simulate.h"

/* pp_simulate for a schedule that already passed pp_schedule_check_structure. */
PpStatus pp_simulate_checked (const PpSchedule *s, const PpCostModel *cost,
                              PpSimulation **out, PpError *err);
