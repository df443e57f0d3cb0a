/* pp-test-util.h — helpers the schedule tests share. */
#pragma once

#include <glib.h>

#include "pp-schedule.h"
#include "pp-simulate.h"

/* Generates a schedule by name; fails the test with the reason if it cannot. */
PpSchedule   *pp_test_generate (const char *name, int P, int M, int V);

/* Simulates under uniform costs F, B (= I + W), W and transfer C; fails the
 * test if the schedule does not complete. */
PpSimulation *pp_test_simulate (const PpSchedule *s, double f, double b, double w, double c);

/* ---- running pipescope-cli (path from $PIPESCOPE_CLI, set by meson) ---- */

/* Runs the CLI with a NULL-terminated argument list, in environment envp
 * (NULL: this process's); collects stdout and stderr; returns the exit status. */
int  pp_test_cli_run (char **envp, char **out, char **err, ...) G_GNUC_NULL_TERMINATED;

/* The path of the CLI under test. */
const char *pp_test_cli_path (void);

/* err is exactly one line "pipescope-cli: error: ...\n". */
void pp_test_assert_one_line_error (const char *err);

/* How many times needle occurs in hay. */
int  pp_test_count (const char *hay, const char *needle);

/* Removes a file or a directory tree; for test temporary folders. */
void pp_test_rm_rf (const char *path);

/* A fresh temporary folder that is also the XDG_RUNTIME_DIR of the children
 * a test spawns with envp (jobs register there, not in the user's). */
typedef struct {
  char  *dir;
  char **envp;
} PpTestCtx;

void  pp_test_ctx_init (PpTestCtx *c, const char *prefix);
void  pp_test_ctx_clear (PpTestCtx *c);   /* removes the folder */
char *pp_test_ctx_path (PpTestCtx *c, const char *name);   /* g_free */
