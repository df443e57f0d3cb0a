/* pp-import-open.h — opening torch.profiler traces (JSON, JSON.gz) in the
 * window: imported in a thread into a .pptrace, then opened as any trace. */
#pragma once

#include "pp-window.h"

G_BEGIN_DECLS

/* Does file look like JSON (or gzip) rather than a pipescope trace? */
gboolean pp_gui_is_json_trace (GFile *file);

/* Opens files: the JSON ones together as one run (one file per rank of a
 * job), each other one as a trace of its own.  Errors are toasts. */
void     pp_gui_open_files    (PpWindow *self, GFile **files, guint n);

G_END_DECLS
