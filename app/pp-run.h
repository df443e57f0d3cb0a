/* pp-run.h — one run of the session: a timeline model and where its data
 * comes from (a child `pipescope-cli run`, a job attached to, or a file).
 *
 * A child and an attached job are read the same way: a thread attaches with
 * pp_live_client_connect (retrying for a few seconds while a child
 * registers), reads items with pp_live_client_next, writes a copy of each
 * into the run's trace file and hands them in batches to the main loop,
 * which feeds the model ~30 times a second and emits "changed".  The main
 * loop never waits on the job.
 */
#pragma once

#include <gio/gio.h>

#include "pp-timeline-model.h"

G_BEGIN_DECLS

typedef enum {
  PP_RUN_STARTING,   /* child started / attaching */
  PP_RUN_LIVE,       /* attached, data arriving */
  PP_RUN_ENDED,      /* the stream ended (job exited, killed or detached); data kept */
  PP_RUN_FAILED,     /* never attached (the job refused, or exited first) */
  PP_RUN_FILE,       /* read from a trace file */
} PpRunState;

#define PP_TYPE_RUN (pp_run_get_type ())
G_DECLARE_FINAL_TYPE (PpRun, pp_run, PP, RUN, GObject)

/* Starts `cli run -s schedule -p P -m M [-v V] --backend B ...` and attaches
 * to it by pid.  NULL with error if the child cannot be started. */
/* model: blocks, width and rows per step; 0 for the app's defaults (8 or
 * two a stage, 256, and 8 rows a micro-batch). */
typedef struct { int layers, width, batch; } PpRunModel;
PpRun           *pp_run_new_child  (const char *cli_path, const char *schedule, int ranks,
                                    int microbatches, int stages_per_rank, const char *backend,
                                    const PpRunModel *model, GError **error);
/* Attaches to a running job: pid, name, socket path or HOST:PORT (+ token). */
PpRun           *pp_run_new_attach (const char *job, const char *token);
/* A run of a trace file already read into model (taken). */
PpRun           *pp_run_new_file   (PpTimelineModel *model, const char *path);

PpTimelineModel *pp_run_get_model      (PpRun *self);
PpRunState       pp_run_get_state      (PpRun *self);
const char      *pp_run_get_title      (PpRun *self);   /* "1F1B · 4 ranks · 8 micro-batches" */
const char      *pp_run_get_status     (PpRun *self);   /* "live · pid 4242", "ended", ... */
const char      *pp_run_get_trace_path (PpRun *self);   /* the copy (or the file); NULL if none */
int              pp_run_get_pid        (PpRun *self);   /* the job's pid; 0 if unknown */
gboolean         pp_run_is_child       (PpRun *self);
/* TRUE while a child of ours is still running (not yet reaped). */
gboolean         pp_run_child_running  (PpRun *self);
/* The run's spans per rank: TRUE when every rank of the description has some. */
gboolean         pp_run_has_spans_on_every_rank (PpRun *self);

/* Stops the source: SIGTERM to a child (it ends cleanly, the stream ends);
 * detaches from an attached job.  The data stays. */
void             pp_run_stop           (PpRun *self);
/* SIGKILL to a child that ignored stop. */
void             pp_run_kill           (PpRun *self);

/* Signals: "changed" (new data in the model), "message" (const char *: one
 * line for a toast).  Properties "state", "title", "status" notify. */

G_END_DECLS
