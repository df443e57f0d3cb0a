/* pp-test-util.h — helpers the schedule tests share. */
#pragma once

#include "pp-schedule.h"
#include "pp-simulate.h"

/* Generates a schedule by name; fails the test with the reason if it cannot. */
PpSchedule   *pp_test_generate (const char *name, int P, int M, int V);

/* Simulates under uniform costs F, B (= I + W), W and transfer C; fails the
 * test if the schedule does not complete. */
PpSimulation *pp_test_simulate (const PpSchedule *s, double f, double b, double w, double c);
