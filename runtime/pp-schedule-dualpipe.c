/* placeholder: the DualPipe generator is being written */
#include "pp-schedule.h"
PpStatus pp_schedule_new_dualpipe (int P, int M, int V, PpSchedule **out, PpError *err)
{ (void) P; (void) M; (void) V; *out = NULL; return pp_error_set (err, PP_EUNSUPPORTED, "DualPipe is not built yet"); }
