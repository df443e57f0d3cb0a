/* pp-import-chrome.h — pipescope's own Chrome JSON export (`export
 * --format chrome`) read back as the run it came from; what import/ and
 * its tests reach, not a public API.  No GLib. */
#pragma once

#include <stdbool.h>

#include "pp-import.h"
#include "pp-json.h"

/* Is doc pipescope's Chrome export (a top-level "pipescope" object)? */
bool     pp_import_chrome_is_pipescope (const PpJsonDoc *doc);
/* Writes the run doc holds into w: description, ranks, processes, plans,
 * spans, step markers, counters, dropped.  name is the file's, for
 * messages; mem what the import has left of its memory (pp-import.h), for
 * the spans held as they are sorted (more: PP_EFORMAT, one line); sum says
 * what was read (from_export set). */
PpStatus pp_import_chrome (const PpJsonDoc *doc, const char *name, size_t mem, PpTraceWriter *w,
                           PpImportSummary *sum, PpError *err);
