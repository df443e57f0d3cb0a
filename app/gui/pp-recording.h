/* pp-recording.h — PpRecording: one entry of the window's run list, a
 * timeline model and where its data comes from (a child `pipescope-cli run`,
 * a job attached to, or a file).  Not the runtime's PpRun (a training run,
 * runtime/pp-run.h): the app never trains in its own process.
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
  PP_RECORDING_STARTING,   /* child started / attaching */
  PP_RECORDING_LIVE,       /* attached, data arriving */
  PP_RECORDING_ENDED,      /* the stream ended (job exited, killed or detached); data kept */
  PP_RECORDING_FAILED,     /* never attached (the job refused, or exited first) */
  PP_RECORDING_FILE,       /* read from a trace file */
} PpRecordingState;

#define PP_TYPE_RECORDING (pp_recording_get_type ())
G_DECLARE_FINAL_TYPE (PpRecording, pp_recording, PP, RECORDING, GObject)

/* Starts `cli run -s schedule -p P -m M [-v V] --backend B ...` and attaches
 * to it by pid; with mpirun, `mpirun -np P cli run ... --name NAME` (one
 * process a rank) and attaches to the job by its name.  NULL with error if
 * the child cannot be started. */
/* model: blocks, width and rows per step; 0 for the app's defaults (8 or
 * two a stage, 256, and 8 rows a micro-batch). */
typedef struct { int layers, width, batch; char partition[64]; } PpModelShape;   /* "": auto */
PpRecording           *pp_recording_new_child  (const char *cli_path, const char *schedule, int ranks,
                                    int microbatches, int stages_per_rank, const char *backend,
                                    const PpModelShape *model, const char *mpirun, GError **error);
/* Attaches to a running job: pid, name, socket path or HOST:PORT (+ token). */
PpRecording           *pp_recording_new_attach (const char *job, const char *token);
/* `pipescope-cli profile --name NAME -- COMMAND...` as a child, attached by
 * its job's name: a PyTorch job, one row per rank. */
PpRecording           *pp_recording_new_profile (const char *cli_path, const char *const *command,
                                                 GError **error);
/* A run of a trace file already read into model (taken). */
PpRecording           *pp_recording_new_file   (PpTimelineModel *model, const char *path);

PpTimelineModel *pp_recording_get_model      (PpRecording *self);
PpRecordingState       pp_recording_get_state      (PpRecording *self);
const char      *pp_recording_get_title      (PpRecording *self);   /* "1F1B · 4 ranks · 8 micro-batches" */
const char      *pp_recording_get_status     (PpRecording *self);   /* "live · pid 4242", "ended", ... */
/* Where it comes from, in a few words: its file's name ("zbv.pptrace"),
 * "run, pid 4242", "job NAME", "profile: COMMAND" (what tells two runs
 * of one schedule apart). */
const char      *pp_recording_get_source     (PpRecording *self);
const char      *pp_recording_get_trace_path (PpRecording *self);   /* the copy (or the file); NULL if none */
/* A profiled command's own trace, which `profile --trace` writes (every
 * process's records merged) when the command ends:
 * $XDG_DATA_HOME/pipescope/profiles/NAME-TIME.pptrace; NULL for other runs. */
const char      *pp_recording_get_report_path (PpRecording *self);
int              pp_recording_get_pid        (PpRecording *self);   /* the job's pid; 0 if unknown */
gboolean         pp_recording_is_child       (PpRecording *self);
/* TRUE while a child of ours is still running (not yet reaped). */
gboolean         pp_recording_child_running  (PpRecording *self);
/* The run's spans per rank: TRUE when every rank of the description has some. */
gboolean         pp_recording_has_spans_on_every_rank (PpRecording *self);

/* Stops the source: SIGTERM to a child (it ends cleanly, the stream ends);
 * detaches from an attached job.  The data stays. */
void             pp_recording_stop           (PpRecording *self);
/* SIGKILL to a child that ignored stop. */
void             pp_recording_kill           (PpRecording *self);

/* Signals: "changed" (new data in the model), "message" (const char *: one
 * line for a toast).  Properties "state", "title", "status" notify. */

G_END_DECLS
