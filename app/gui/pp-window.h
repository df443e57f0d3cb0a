/* pp-window.h — the pipescope window: controls, runs, timeline, panels. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define PP_TYPE_WINDOW (pp_window_get_type ())
G_DECLARE_FINAL_TYPE (PpWindow, pp_window, PP, WINDOW, AdwApplicationWindow)

PpWindow *pp_window_new        (GtkApplication *app);

/* Starts a run of what the controls say (as the Run button does). */
void      pp_window_run        (PpWindow *self);
/* Attaches to a job (pid, name, socket or HOST:PORT); a new run in the list. */
void      pp_window_attach     (PpWindow *self, const char *job, const char *token);
gboolean  pp_window_profile    (PpWindow *self, const char *command_line, GError **error);
/* Reads a trace file (in a thread); a new run in the list. */
void      pp_window_open_file  (PpWindow *self, GFile *file);
/* Drives the window from inside for the tests: "run" or "attach".  The
 * result goes to pp_window_self_test_result () once the window is gone. */
void      pp_window_start_self_test (PpWindow *self, const char *mode);
int       pp_window_self_test_result (void);

G_END_DECLS
