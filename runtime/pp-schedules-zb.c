/* placeholder: ZB-H1 / ZB-H2 generators are being written */
#include "pp-schedule.h"
PpStatus pp_schedule_new_zb_h1 (int P, int M, int V, PpSchedule **out, PpError *err)
{ (void) P; (void) M; (void) V; *out = NULL; return pp_error_set (err, PP_EUNSUPPORTED, "ZB-H1 is not built yet"); }
PpStatus pp_schedule_new_zb_h2 (int P, int M, int V, PpSchedule **out, PpError *err)
{ (void) P; (void) M; (void) V; *out = NULL; return pp_error_set (err, PP_EUNSUPPORTED, "ZB-H2 is not built yet"); }
