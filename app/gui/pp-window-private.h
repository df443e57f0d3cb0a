/* pp-window-private.h — what the window's other files (dialogs, self-test)
 * reach inside it. */
#pragma once

#include "pp-compare.h"
#include "pp-panels.h"
#include "pp-heatmap-view.h"
#include "pp-recording.h"
#include "pp-span-table.h"
#include "pp-timeline-widget.h"
#include "pp-window.h"

struct _PpWindow
{
  AdwApplicationWindow parent_instance;

  /* header */
  AdwWindowTitle   *title;
  GtkWidget        *run_button;
  GtkWidget        *stop_button;

  /* controls */
  GtkDropDown      *schedule;
  GtkSpinButton    *ranks;
  GtkSpinButton    *microbatches;
  GtkSpinButton    *stages_per_rank;
  GtkDropDown      *backend;
  GtkWidget        *processes_row;  /* shown where mpirun is found */
  GtkSwitch        *processes;
  char             *mpirun_path;
  GtkLabel         *verdict;
  GtkImage         *verdict_icon;
  gboolean          controls_ok;
  PpRecording      *controls_from;  /* the run the controls were last set from (borrowed) */

  /* main area */
  AdwToastOverlay  *toasts;
  GtkListBox       *run_list;
  GtkStack         *main_stack;     /* "empty" / "timeline" */
  AdwStatusPage    *empty_page;     /* what "empty" says: how to start, or why an open failed */
  char             *empty_default;  /* its description as the template has it */
  gboolean          waiting;        /* it says the run on screen has no block yet */
  GtkPaned         *vpaned;         /* timelines above, panels below */
  int               single_position;/* the divider before comparing */
  PpTimelineWidget *timeline[2];
  GtkWidget        *timeline_box[2];
  GtkLabel         *timeline_label[2];
  GtkLabel         *stuck_banner;   /* issue 37: where the shown job is stuck */
  GtkToggleButton  *plan_toggle;
  PpStatsPanel     *stats;
  PpLossChart      *loss;
  PpMemoryChart    *memory;
  PpWhatifPanel    *whatif;
  PpWhyPanel       *why;
  PpHeatmapView    *stragglers;     /* the Stragglers tab (issue 38) */
  AdwViewStack     *panels;
  AdwViewStackPage *compare_page;   /* shown while two runs are compared */
  PpCompareTable   *compare;
  GtkDropDown      *replicas_switch; /* a job of replicas: Fold, All, Replica 0.. */
  int               replicas_dp;     /* the replicas it lists (0: hidden) */
  int32_t          *replica_dps;     /* their dp values, ascending (dp 4 and 5 of 8) */
  GtkToggleButton  *path_toggle;    /* the critical path over the upper timeline */
  GtkWidget        *path_overlay;
  /* find and filter; the details of the selected block or measured range */
  GtkSearchEntry   *find_entry;
  GtkLabel         *find_count;     /* "3 of 41" */
  PpSpanTable      *span_table;     /* the Spans tab */
  GtkWidget        *details_pane;
  GtkLabel         *details_title;
  GtkLabel         *details_label;
  GtkWidget        *details_close;
  GtkWidget        *zoom_range_button;

  /* the session */
  GListStore       *runs;           /* PpRecording */
  PpRecording            *shown[2];       /* what the timelines show (borrowed from runs) */
  gboolean          syncing_range;
  gboolean          syncing_selection;
  guint             pick_seq;       /* runs get a pick number as they join the selection */
  guint             open_seq;       /* files opened get a number, 1 up: the list keeps their order */
  GtkLabel         *panels_label;   /* comparing: which run the panels describe */
  PpModelShape        whatif_model;   /* the model What if ranked for; zeros: defaults */
  gboolean          applying_whatif;
  gboolean          panels_dirty;
  guint             panels_id;
  /* the panels' analysis on a worker (pp-window-analysis.c) */
  guint             analysis_generation;  /* bumped as the run shown changes: an older result is dropped */
  gboolean          analysis_running;     /* one in flight at most */
  gboolean          analysis_pending;     /* asked again meanwhile: once more when it ends */
  GCancellable     *analysis_cancel;      /* cancelled as the window goes */
  guint             analyses_shown;       /* results shown, counted for the self-test */
  guint             compare_generation;   /* bumped as the pair compared changes */
  guint             compares_shown;       /* Compare tables filled from a result, counted */
  guint             compares_dropped;     /* results whose pair was no longer shown, counted */
  guint             closing_id;
  gint64            closing_since;
  gboolean          closing;
  char             *cli_path;

  /* the attach dialog while open; its jobs' pids (GArray of int) */
  GtkWidget        *attach_dialog;
  GArray           *attach_pids;

  /* self-test */
  struct PpSelfTest *self_test;
};

/* pp-dialogs.c */
void pp_window_show_attach_dialog     (PpWindow *self);
void pp_window_show_profile_dialog    (PpWindow *self);
void pp_window_show_screenshot_dialog (PpWindow *self);
void pp_window_export_chrome          (PpWindow *self);
void pp_window_show_open_dialog       (PpWindow *self);
/* What the dialogs do once a file is chosen (also used by the self-test).
 * The export runs `pipescope-cli export` as a child and toasts the result. */
gboolean pp_window_save_screenshot    (PpWindow *self, const char *path, gboolean as_shown,
                                       int width, int height, GError **error);
void pp_window_export_chrome_to       (PpWindow *self, const char *out);
void pp_window_toast                  (PpWindow *self, const char *message);
/* pp-window-empty.c: the page shown where there is no timeline.  A file
 * that could not be opened: a toast, and while no run is on screen the
 * page says it (title, and message as text, never markup).  A run on
 * screen without a block yet: "Waiting for Ranks" (or why it ended without
 * one) instead of an empty timeline; update_waiting follows the run shown.
 * reset: the page as the template has it. */
void pp_window_show_open_error        (PpWindow *self, const char *message);
void pp_window_update_waiting         (PpWindow *self);
void pp_window_reset_empty_page       (PpWindow *self);
/* The primary run shown (NULL if none). */
PpRecording *pp_window_get_shown_run        (PpWindow *self);
/* A run as a timeline's label and the Compare table name it (g_free it). */
char        *pp_window_run_name             (PpRecording *run);

/* pp-save-trace.c: Save Trace… (Ctrl+Shift+S), and what it does once a
 * file is chosen (also used by the self-test): the shown run's trace
 * copied to path. */
void     pp_window_show_save_trace_dialog (PpWindow *self);
gboolean pp_window_save_trace_to          (PpWindow *self, const char *path, GError **error);

/* pp-window-analysis.c: the Statistics, Why, Stragglers, What if and
 * Memory tabs analyse the upper run, and the Compare table the two runs
 * compared, on a worker thread over snapshots of their models, and show
 * the result on the main loop.  start: now, or once the one in flight
 * ends (at most one; requests meanwhile coalesce); reset: the runs about
 * to be shown (a upper, b compared; NULL none), called before they are:
 * where the upper one changes, a result under way is dropped and the tabs
 * say they analyse next; where the pair changes, its rows are dropped and
 * the Compare table says it compares next; busy: one in flight or asked
 * for; dispose: the window goes (closes), a result that comes is
 * dropped. */
void     pp_window_analysis_start     (PpWindow *self);
void     pp_window_analysis_reset     (PpWindow *self, PpRecording *a, PpRecording *b);
gboolean pp_window_analysis_busy      (PpWindow *self);
void     pp_window_analysis_dispose   (PpWindow *self);
/* In the process: analyses under way, results dropped as their window went. */
void     pp_window_analysis_counts    (guint *in_flight, guint *dropped);

/* pp-window-details.c: the find entry and the details pane, wired to
 * the upper timeline (called once from init). */
void pp_window_details_init           (PpWindow *self);
/* What the pane says now ("" hidden), for the self-test. */
const char *pp_window_details_text    (PpWindow *self);

/* pp-window-find.c: Find's count and Enter / Shift+Enter (the next and
 * previous match, in the Spans tab's order), Ctrl+F, and the Spans tab
 * wired to the upper timeline (called once from init). */
void pp_window_find_init              (PpWindow *self);
/* Goes to the next (dir 1) or previous (-1) match: selected and shown. */
void pp_window_find_step              (PpWindow *self, int dir);

/* pp-self-test-spans.c: step of --self-test=spans; 0 again later, 1 the
 * next step, 2 done, -1 failed (*why, g_free it). */
int  pp_self_test_spans               (PpWindow *self, int step, char **why);
/* pp-self-test-stragglers.c: step of --self-test=stragglers (demo: of
 * demo-stragglers, which stays open) on run; 0 again later, 1 the next
 * step, 2 done, -1 failed (*why). */
int  pp_self_test_stragglers          (PpWindow *self, PpRecording *run, int step, gboolean demo, char **why);

/* The window as it is on screen, to a PNG (pp-self-test-spans.c). */
gboolean pp_self_test_save_window_png (GtkWidget *w, const char *path);
/* The run at row i of the window's list (the list keeps it), NULL past the end. */
PpRecording *pp_self_test_run_at (PpWindow *w, guint i);
/* pp-self-test-analysis.c: --self-test=analysis FILE (the panels analysed
 * off the main loop).  begin: as the mode starts (before the file is
 * shown); step: as the other modes' (0 again later, 1 the next step, 2
 * done, -1 failed, *why); closing: the window is about to be destroyed (an analysis starts,
 * the app waits for the window to be finalized). */
void pp_self_test_analysis_begin      (PpWindow *self);
int  pp_self_test_analysis            (PpWindow *self, int step, char **why);
void pp_self_test_analysis_closing    (PpWindow *self);

/* pp-self-test-compare.c: step of --self-test=compare A B C (the Compare
 * table filled off the main loop), as the other modes' (0 again later, 1
 * the next step, 2 done, -1 failed, *why). */
int  pp_self_test_compare             (PpWindow *self, int step, char **why);

/* pp-self-test.c */
void pp_self_test_free                (struct PpSelfTest *t);
/* The window is gone and its jobs are reaped: final checks. */
void pp_self_test_window_closed       (struct PpSelfTest *t);
