/* cli-serve.h — `schedule --serve`: a simulated job that serves its plan
 * live, as a training job would. */
#pragma once

#include "pp-schedule.h"
#include "pp-simulate.h"

/* Acts as a job would, serving the simulated timeline live, replayed in
 * real time for steps steps (0: until SIGINT/SIGTERM); with trace, also
 * into that file.  speed (> 0): time units replayed per millisecond; the
 * spans, step markers and plan are stamped on the replay's clock (one unit =
 * 1 ms / speed).  0, or 1 with one line on stderr. */
int pp_cli_serve (const PpSchedule *s, const PpSimulation *sim, const char *listen,
                  int steps, double speed, const char *trace, int argc, char **argv);
