/* pp-recording.c — a run: its model, and the thread that reads a live job into it. */
#include "pp-recording.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "pp-live.h"
#include "pp-trace.h"

#define PP_RUN_ATTACH_TIMEOUT_US  (3 * G_USEC_PER_SEC)
/* mpirun starts its processes and MPI before rank 0 registers */
#define PP_RUN_ATTACH_MPI_TIMEOUT_US (30 * G_USEC_PER_SEC)
#define PP_RUN_BATCH_US           (33 * 1000)
#define PP_RUN_FLUSH_US           (250 * 1000)

/* ---- what the reader thread hands to the main loop ------------------------ */

typedef enum {
  BATCH_DATA,
  BATCH_CONNECTED,
  BATCH_ENDED,
  BATCH_FAILED,
} BatchKind;

typedef struct {
  PpTraceItem item;
  gpointer    owned;      /* what item's pointers point into */
} QueuedItem;

typedef struct {
  BatchKind  kind;
  GPtrArray *items;       /* QueuedItem, DATA only */
  char      *message;
  int        pid;         /* CONNECTED: the job's pid, 0 if not in the registry */
  int        how;         /* ENDED: 1 the job ended, 0 it died, -1 unknown (pp_registry_job_ended) */
} Batch;

static void
queued_item_free (gpointer p)
{
  QueuedItem *q = p;
  g_free (q->owned);
  g_free (q);
}

static Batch *
batch_new (BatchKind kind, const char *message)
{
  Batch *b = g_new0 (Batch, 1);
  b->kind = kind;
  if (kind == BATCH_DATA)
    b->items = g_ptr_array_new_with_free_func (queued_item_free);
  b->message = g_strdup (message);
  return b;
}

static void
batch_free (gpointer p)
{
  Batch *b = p;
  if (b->items)
    g_ptr_array_unref (b->items);
  g_free (b->message);
  g_free (b);
}

/* Items' pointers live until the next call on the client: copy them. */
static QueuedItem *
queued_item_copy (const PpTraceItem *item)
{
  QueuedItem *q = g_new0 (QueuedItem, 1);
  q->item = *item;
  switch (item->type)
    {
    case PP_TRACE_ITEM_DESCRIPTION:
      q->owned = g_memdup2 (item->description, sizeof *item->description);
      q->item.description = q->owned;
      break;
    case PP_TRACE_ITEM_PLAN:
      q->owned = g_memdup2 (item->plan.actions, item->plan.n_actions * sizeof (PpTracePlanAction));
      q->item.plan.actions = q->owned;
      break;
    case PP_TRACE_ITEM_STRING:
      q->owned = g_strndup (item->string.name, item->string.length);
      q->item.string.name = q->owned;
      break;
    default:
      break;
    }
  return q;
}

/* Shared by the run (main thread) and its reader thread; the thread never
 * touches the GObject. */
typedef struct {
  char         *job;
  char         *token;
  char         *copy_path;
  GAsyncQueue  *queue;      /* Batch */
  gint          stop;       /* atomic */
  gint64        timeout_us; /* to wait for the job to register */
} Live;

static void
live_clear (gpointer p)
{
  Live *l = p;
  g_free (l->job);
  g_free (l->token);
  g_free (l->copy_path);
  g_async_queue_unref (l->queue);
}

static gpointer
live_thread (gpointer data)
{
  Live *l = data;
  PpError err = { 0 };
  PpLiveClient *client = NULL;
  gint64 deadline = g_get_monotonic_time () + l->timeout_us;

  while (!g_atomic_int_get (&l->stop))
    {
      client = pp_live_client_connect (l->job, l->token, &err);
      if (client || g_get_monotonic_time () > deadline)
        break;
      g_usleep (100 * 1000);
    }
  if (!client)
    {
      g_async_queue_push (l->queue, batch_new (BATCH_FAILED,
                                               g_atomic_int_get (&l->stop) ? "stopped" : err.msg));
      g_atomic_rc_box_release_full (l, live_clear);
      return NULL;
    }
  /* The job's pid, for the list (a HOST:PORT job has none here). */
  Batch *connected = batch_new (BATCH_CONNECTED, NULL);
  PpJobInfo info;
  gboolean have_info = pp_registry_find (l->job, &info, NULL) == PP_OK;
  if (have_info)
    connected->pid = info.pid;
  g_async_queue_push (l->queue, connected);

  PpTraceWriter *copy = NULL;
  if (l->copy_path)
    {
      PpError werr = { 0 };
      copy = pp_trace_writer_new_path (l->copy_path, PP_TRACE_NATIVE, &werr);
      if (!copy)
        {
          g_autofree char *msg = g_strdup_printf ("No copy of this run for export: %s", werr.msg);
          g_async_queue_push (l->queue, batch_new (BATCH_DATA, msg));
        }
    }

  Batch *batch = batch_new (BATCH_DATA, NULL);
  gint64 last_push = g_get_monotonic_time (), last_flush = last_push;
  const char *end_message = NULL;
  char end_buf[PP_ERROR_MSG_MAX + 64];

  for (;;)
    {
      PpTraceItem item;
      if (g_atomic_int_get (&l->stop))
        {
          end_message = "detached";
          break;
        }
      PpStatus st = pp_live_client_next (client, &item, 50, &err);
      if (st != PP_OK)
        {
          g_snprintf (end_buf, sizeof end_buf, "stream error: %s", err.msg);
          end_message = end_buf;
          break;
        }
      if (item.type == PP_TRACE_ITEM_END && !item.need_more)
        {
          end_message = item.truncated ? "job ended mid-frame (killed?)" : "job ended";
          break;
        }
      if (item.type != PP_TRACE_ITEM_END)
        {
          g_ptr_array_add (batch->items, queued_item_copy (&item));
          if (copy && pp_trace_write_item (copy, &item, NULL) != PP_OK)
            {
              pp_trace_writer_close (copy, NULL);
              copy = NULL;
            }
        }
      gint64 now = g_get_monotonic_time ();
      if (batch->items->len > 0 && (now - last_push >= PP_RUN_BATCH_US || batch->items->len >= 8192))
        {
          g_async_queue_push (l->queue, batch);
          batch = batch_new (BATCH_DATA, NULL);
          last_push = now;
        }
      if (copy && now - last_flush >= PP_RUN_FLUSH_US)
        {
          pp_trace_writer_flush (copy, NULL);
          last_flush = now;
        }
    }

  if (batch->items->len > 0)
    g_async_queue_push (l->queue, batch);
  else
    batch_free (batch);
  pp_trace_writer_close (copy, NULL);
  pp_live_client_free (client);
  Batch *ended = batch_new (BATCH_ENDED, end_message);
  /* how the job went, where the registry can tell (on this thread: it may
   * wait a second for the process to go) */
  ended->how = !g_atomic_int_get (&l->stop) && have_info ? pp_registry_job_ended (&info, 1000) : -1;
  g_async_queue_push (l->queue, ended);
  g_atomic_rc_box_release_full (l, live_clear);
  return NULL;
}

/* ---- the run ----------------------------------------------------------------- */

struct _PpRecording
{
  GObject          parent_instance;

  PpTimelineModel *model;
  PpRecordingState       state;
  char            *title;
  char            *status;
  char            *trace_path;
  char            *report_path;   /* a profiled command's own trace (profile --trace) */
  char            *source;        /* where it comes from, in a few words (its file, its job) */
  char            *what;          /* "child", "attach", "file" */
  gint64           attach_timeout_us; /* 0: the default */

  /* live */
  Live            *live;
  GThread         *thread;
  guint            drain_id;
  int              pid;

  /* child */
  GSubprocess     *child;
  GCancellable    *cancellable;
  gboolean         child_exited;
  int              child_status;  /* exit status, or 128 + signal */
  int              end_how;       /* an attached job's end: 1 ended, 0 died, -1 unknown */
  gboolean         end_told;      /* the one toast of the end went out */
  char            *child_last_line;
  gboolean         desc_seen;
  gboolean         stop_asked;    /* pp_recording_stop: a child told to stop, or detached */
};

G_DEFINE_FINAL_TYPE (PpRecording, pp_recording, G_TYPE_OBJECT)

enum { PROP_0, PROP_STATE, PROP_TITLE, PROP_STATUS, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum { SIGNAL_CHANGED, SIGNAL_MESSAGE, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
pp_recording_set_status (PpRecording *self, const char *status)
{
  if (g_strcmp0 (self->status, status) == 0)
    return;
  g_free (self->status);
  self->status = g_strdup (status);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATUS]);
}

static void
pp_recording_set_title (PpRecording *self, const char *title)
{
  if (g_strcmp0 (self->title, title) == 0)
    return;
  g_free (self->title);
  self->title = g_strdup (title);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TITLE]);
}

static void
pp_recording_set_state (PpRecording *self, PpRecordingState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

/* How an ended run ended, in a word: the user stopped it (or detached), a
 * signal not ours killed our job, or it ran to its end. */
static const char *
pp_recording_end_word (PpRecording *self)
{
  if (self->stop_asked)
    return self->child ? "stopped" : "detached";
  if (self->child)
    return self->child_exited && self->child_status > 128 ? "killed" : "ended";
  /* a job started elsewhere: what the registry saw, or nothing known */
  return self->end_how == 1 ? "ended" : self->end_how == 0 ? "killed" : "connection lost";
}

/* A job killed, or a stream cut off (an error, a frame half sent): every
 * rank's row is marked lost from the last event received of it on, and
 * everything received stays.  A rank already marked (a connection of its
 * own ended earlier) keeps its mark.  Not for a run the user stopped. */
static void
pp_recording_mark_lost (PpRecording *self)
{
  gboolean changed = FALSE;
  if (self->stop_asked || self->model == NULL)
    return;
  for (int r = 0; r < pp_timeline_model_n_ranks (self->model); r++)
    if (pp_timeline_model_rank_lost (self->model, r) == INT64_MAX
        && pp_timeline_model_set_rank_lost (self->model, r, PP_TIMELINE_LOST_AT_LAST_EVENT))
      changed = TRUE;
  if (changed)
    g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

/* The number of the run's newest step, as the trace and every output
 * number steps (from 0); -1 before any. */
static int
last_step (const PpTimelineModel *m)
{
  size_t n = m ? pp_timeline_model_n_steps (m) : 0;
  const int32_t *num = n ? pp_timeline_model_step_numbers (m) : NULL;
  int last = -1;
  for (size_t i = 0; i < n; i++)
    last = MAX (last, num[i]);
  return last;
}

/* One toast for the end of a run, once its cause is known: for a child,
 * when both its stream has ended and it has exited (in either order). */
static void
pp_recording_tell_end (PpRecording *self)
{
  if (self->end_told || self->state != PP_RECORDING_ENDED || (self->child && !self->child_exited))
    return;
  self->end_told = TRUE;
  size_t n = self->model ? pp_timeline_model_n_steps (self->model) : 0;
  g_autofree char *msg = NULL;
  if (self->child && self->child_exited && self->child_status > 128 && !self->stop_asked)
    msg = g_strdup_printf ("%s: killed by signal %d after %zu steps", self->title,
                           self->child_status - 128, n);
  else if (!self->child && !self->stop_asked && self->end_how < 0)
    msg = g_strdup_printf ("%s: connection lost at step %d (the job may still run)", self->title,
                           MAX (last_step (self->model), 0));
  else
    msg = g_strdup_printf ("%s: %s after %zu steps", self->title, pp_recording_end_word (self), n);
  /* a profiled command's report, where profile wrote it */
  if (self->report_path && g_file_test (self->report_path, G_FILE_TEST_IS_REGULAR))
    {
      char *more = g_strdup_printf ("%s; trace in %s", msg, self->report_path);
      g_free (msg);
      msg = more;
    }
  g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, msg);
}

static void
pp_recording_update_status (PpRecording *self)
{
  g_autofree char *s = NULL;
  size_t n = self->model ? pp_timeline_model_n_steps (self->model) : 0;
  int last = last_step (self->model);
  switch (self->state)
    {
    case PP_RECORDING_STARTING: s = g_strdup (self->child ? "starting…" : "attaching…"); break;
    case PP_RECORDING_LIVE:
      /* a job attached over TCP has no pid here: its address instead */
      if (self->pid > 0)
        s = g_strdup_printf ("live · pid %d · step %d", self->pid, MAX (last, 0));
      else
        s = g_strdup_printf ("live · %s · step %d", self->live ? self->live->job : "?", MAX (last, 0));
      break;
    case PP_RECORDING_ENDED:
      if (!self->child && !self->stop_asked && self->end_how < 0)
        s = g_strdup_printf ("connection lost at step %d", MAX (last, 0));
      else
        s = g_strdup_printf ("%s · %zu steps", pp_recording_end_word (self), n);
      break;
    case PP_RECORDING_FAILED:   s = g_strdup ("failed"); break;
    case PP_RECORDING_FILE:     s = g_path_get_basename (self->trace_path ? self->trace_path : "trace"); break;
    default: break;
    }
  pp_recording_set_status (self, s);
}

/* "1F1B · P=4 · M=8 (V=2)": short enough for the sidebar. */
static char *
pp_recording_format_title (const char *schedule, int ranks, int microbatches, int stages_per_rank)
{
  if (stages_per_rank > 1)
    return g_strdup_printf ("%s · P=%d · M=%d · V=%d", schedule, ranks, microbatches, stages_per_rank);
  return g_strdup_printf ("%s · P=%d · M=%d", schedule, ranks, microbatches);
}

static void
pp_recording_title_from_description (PpRecording *self)
{
  const PpTraceDescription *d = pp_timeline_model_description (self->model);
  if (!d)
    return;
  g_autofree char *t = NULL;
  t = pp_recording_format_title (d->schedule, d->n_ranks, d->n_microbatches, d->n_virtual);
  pp_recording_set_title (self, t);
  self->desc_seen = TRUE;
}

static void
pp_recording_dispose (GObject *object)
{
  PpRecording *self = PP_RECORDING (object);

  if (self->live)
    g_atomic_int_set (&self->live->stop, 1);
  /* Let the reader go, do not wait for it: it may be stuck in a connect()
   * to an unreachable host for minutes, and it holds its own reference to
   * what it uses (the queue, the copy's path). */
  if (self->thread)
    {
      g_thread_unref (self->thread);
      self->thread = NULL;
    }
  g_clear_handle_id (&self->drain_id, g_source_remove);
  if (self->live)
    {
      Batch *b;
      while ((b = g_async_queue_try_pop (self->live->queue)))
        batch_free (b);
      g_atomic_rc_box_release_full (self->live, live_clear);
      self->live = NULL;
    }
  if (self->child && !self->child_exited)
    g_subprocess_send_signal (self->child, SIGTERM);
  if (self->cancellable)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->child);

  G_OBJECT_CLASS (pp_recording_parent_class)->dispose (object);
}

static void
pp_recording_finalize (GObject *object)
{
  PpRecording *self = PP_RECORDING (object);
  pp_timeline_model_free (self->model);
  g_free (self->title);
  g_free (self->status);
  g_free (self->trace_path);
  g_free (self->report_path);
  g_free (self->source);
  g_free (self->what);
  g_free (self->child_last_line);
  G_OBJECT_CLASS (pp_recording_parent_class)->finalize (object);
}

static void
pp_recording_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  PpRecording *self = PP_RECORDING (object);
  switch (prop_id)
    {
    case PROP_STATE:  g_value_set_int (value, self->state); break;
    case PROP_TITLE:  g_value_set_string (value, self->title); break;
    case PROP_STATUS: g_value_set_string (value, self->status); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
pp_recording_class_init (PpRecordingClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->dispose = pp_recording_dispose;
  object_class->finalize = pp_recording_finalize;
  object_class->get_property = pp_recording_get_property;

  properties[PROP_STATE] = g_param_spec_int ("state", NULL, NULL, 0, PP_RECORDING_FILE, 0,
                                             G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_TITLE] = g_param_spec_string ("title", NULL, NULL, NULL,
                                                G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_STATUS] = g_param_spec_string ("status", NULL, NULL, NULL,
                                                 G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_MESSAGE] = g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
pp_recording_init (PpRecording *self)
{
  self->model = pp_timeline_model_new ();
}

/* Tells the views about the items added since the last call, if any. */
static void
pp_recording_emit_changed (PpRecording *self, gboolean *changed)
{
  if (!*changed)
    return;
  if (!self->desc_seen)
    pp_recording_title_from_description (self);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
  *changed = FALSE;
}

/* The main-loop side of the reader thread: ~30 times a second. */
static gboolean
pp_recording_drain (gpointer data)
{
  PpRecording *self = data;
  Batch *b;
  gboolean changed = FALSE, finished = FALSE;

  while (!finished && (b = g_async_queue_try_pop (self->live->queue)))
    {
      switch (b->kind)
        {
        case BATCH_DATA:
          if (b->message)
            g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, b->message);
          for (guint i = 0; i < b->items->len; i++)
            {
              QueuedItem *q = g_ptr_array_index (b->items, i);
              if (pp_timeline_model_add (self->model, &q->item))
                changed = TRUE;
            }
          break;
        case BATCH_CONNECTED:
          if (self->pid == 0)
            self->pid = b->pid;
          pp_recording_set_state (self, PP_RECORDING_LIVE);
          break;
        case BATCH_ENDED:
        case BATCH_FAILED:
          {
            g_autofree char *msg = NULL;
            const char *why = b->message;
            if (b->kind == BATCH_FAILED && self->child_exited && self->child_last_line)
              why = self->child_last_line;
            /* the last items while still live: a view following the live
             * edge ends on the run's last steps */
            pp_recording_emit_changed (self, &changed);
            if (b->kind == BATCH_ENDED)
              self->end_how = b->how;
            /* the stream broke off, or the registry saw the job die */
            if (b->kind == BATCH_ENDED && !self->stop_asked
                && (b->how == 0 || (b->message && (g_str_has_prefix (b->message, "stream error")
                                                   || strstr (b->message, "mid-frame")))))
              pp_recording_mark_lost (self);
            pp_recording_set_state (self, b->kind == BATCH_ENDED ? PP_RECORDING_ENDED : PP_RECORDING_FAILED);
            if (b->kind == BATCH_ENDED)
              pp_recording_tell_end (self);
            else
              {
                msg = g_strdup_printf ("%s: %s", self->title, why ? why : "failed");
                g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, msg);
              }
            finished = TRUE;
          }
          break;
        default:
          break;
        }
      batch_free (b);
    }

  pp_recording_update_status (self);
  pp_recording_emit_changed (self, &changed);

  if (finished)
    {
      g_thread_join (self->thread);
      self->thread = NULL;
      self->drain_id = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static char *
pp_recording_copy_path (const char *label)
{
  g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "pipescope", "runs", NULL);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      g_free (dir);
      dir = g_build_filename (g_get_tmp_dir (), "pipescope-runs", NULL);
      if (g_mkdir_with_parents (dir, 0700) != 0)
        return NULL;
    }
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y%m%d-%H%M%S");
  g_autofree char *safe = g_strdup (label);
  g_strcanon (safe, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", '_');
  static guint counter;
  g_autofree char *name = g_strdup_printf ("%s-%d-%u-%s.pptrace", stamp, (int) getpid (), ++counter, safe);
  return g_build_filename (dir, name, NULL);
}

static void
pp_recording_start_live (PpRecording *self, const char *job, const char *token)
{
  Live *l = g_atomic_rc_box_new0 (Live);
  l->job = g_strdup (job);
  l->token = g_strdup (token);
  l->copy_path = pp_recording_copy_path (job);
  l->queue = g_async_queue_new_full (batch_free);
  l->timeout_us = self->attach_timeout_us > 0 ? self->attach_timeout_us : PP_RUN_ATTACH_TIMEOUT_US;
  self->live = l;
  self->trace_path = g_strdup (l->copy_path);
  self->thread = g_thread_new ("pp-live", live_thread, g_atomic_rc_box_acquire (l));
  self->drain_id = g_timeout_add (33, pp_recording_drain, self);
  pp_recording_update_status (self);
}

static void
pp_recording_stderr_line_cb (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (PpRecording) self = data;
  g_autofree char *line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (source),
                                                                      result, NULL, NULL);
  if (!line)
    return;
  if (g_getenv ("PIPESCOPE_DEBUG"))
    g_printerr ("child: %s\n", line);
  g_strstrip (line);
  if (*line)
    {
      g_free (self->child_last_line);
      self->child_last_line = g_strdup (line);
    }
  g_data_input_stream_read_line_async (G_DATA_INPUT_STREAM (source), G_PRIORITY_DEFAULT,
                                       self->cancellable, pp_recording_stderr_line_cb, g_object_ref (self));
}

static void
pp_recording_child_exited_cb (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (PpRecording) self = data;
  GSubprocess *child = G_SUBPROCESS (source);
  if (!g_subprocess_wait_finish (child, result, NULL))
    return;
  self->child_exited = TRUE;
  if (g_subprocess_get_if_signaled (child))
    self->child_status = 128 + g_subprocess_get_term_sig (child);
  else
    self->child_status = g_subprocess_get_exit_status (child);
  /* Exited before it served anything: the reader need not wait its 3 s. */
  if (self->state == PP_RECORDING_STARTING && self->live)
    g_atomic_int_set (&self->live->stop, 1);
  /* The stream may have ended first: "killed" is known only now. */
  if (self->child_status > 128 && !self->stop_asked)
    pp_recording_mark_lost (self);
  pp_recording_update_status (self);
  pp_recording_tell_end (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

/* A recording of a child we started: its stderr read line by line (the
 * last line says why it failed), its end awaited. */
static PpRecording *
pp_recording_adopt_child (GSubprocess *child)
{
  PpRecording *self = g_object_new (PP_TYPE_RECORDING, NULL);
  self->what = g_strdup ("child");
  self->child = child;
  self->cancellable = g_cancellable_new ();
  self->pid = atoi (g_subprocess_get_identifier (child));

  GDataInputStream *err_stream = g_data_input_stream_new (g_subprocess_get_stderr_pipe (child));
  g_data_input_stream_read_line_async (err_stream, G_PRIORITY_DEFAULT, self->cancellable,
                                       pp_recording_stderr_line_cb, g_object_ref (self));
  g_object_unref (err_stream);
  g_subprocess_wait_async (child, self->cancellable, pp_recording_child_exited_cb, g_object_ref (self));
  return self;
}

/* Where Profile a Command keeps a command's trace, as nsys keeps a report:
 * $XDG_DATA_HOME/pipescope/profiles/<script or program>-<time>.pptrace
 * (~/.local/share/...): data the user meant to make, not a cache. */
static char *
profile_report_path (const char *const *command)
{
  g_autofree char *dir = g_build_filename (g_get_user_data_dir (), "pipescope", "profiles", NULL);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    return NULL;
  /* the script a launcher runs names the job better than "torchrun" */
  const char *what = command[0];
  for (int i = 1; command[i]; i++)
    if (g_str_has_suffix (command[i], ".py"))
      {
        what = command[i];
        break;
      }
  g_autofree char *base = g_path_get_basename (what);
  if (g_str_has_suffix (base, ".py"))
    base[strlen (base) - 3] = '\0';
  g_strcanon (base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", '_');
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y%m%d-%H%M%S");
  static guint counter;
  g_autofree char *name = g_strdup_printf ("%s-%s-%u.pptrace", base, stamp, ++counter);
  return g_build_filename (dir, name, NULL);
}

PpRecording *
pp_recording_new_profile (const char *cli_path, const char *const *command, GError **error)
{
  static int n_started;
  g_return_val_if_fail (cli_path && command && command[0], NULL);

  char job_name[64];
  g_snprintf (job_name, sizeof job_name, "pytorch-app%d-%d", (int) getpid (), ++n_started);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  /* the job's own trace, kept as profile keeps it on the command line (every
   * process's records merged), not only the window's copy of the stream */
  g_autofree char *report = profile_report_path (command);
  const char *head[] = { cli_path, "profile", "--name", job_name };
  for (guint i = 0; i < G_N_ELEMENTS (head); i++)
    g_ptr_array_add (argv, (gpointer) head[i]);
  g_ptr_array_add (argv, report ? "--trace" : "--no-trace");
  if (report)
    g_ptr_array_add (argv, report);
  g_ptr_array_add (argv, "--");
  for (int i = 0; command[i]; i++)
    g_ptr_array_add (argv, (gpointer) command[i]);
  g_ptr_array_add (argv, NULL);
  /* the job's own output is its own: only profile's lines are read */
  g_autoptr (GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  GSubprocess *child = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, error);
  if (!child)
    return NULL;
  PpRecording *self = pp_recording_adopt_child (child);
  self->report_path = g_steal_pointer (&report);
  g_autofree char *cmd = g_strjoinv (" ", (char **) command);
  self->title = g_strdup_printf ("profile: %.60s", cmd);
  self->source = g_strdup (self->title);   /* the title becomes the schedule's */
  /* profile serves the job under its name at once; its ranks come when
   * the job has imported PyTorch and built its schedule */
  self->attach_timeout_us = PP_RUN_ATTACH_MPI_TIMEOUT_US;
  pp_recording_start_live (self, job_name, NULL);
  return self;
}

PpRecording *
pp_recording_new_child (const char *cli_path, const char *schedule, int ranks, int microbatches,
                  int stages_per_rank, const char *backend, const PpModelShape *model,
                  const char *mpirun, GError **error)
{
  static int n_started;
  g_return_val_if_fail (cli_path && schedule, NULL);

  char p[16], m[16], v[16], layers[16];
  g_snprintf (p, sizeof p, "%d", ranks);
  g_snprintf (m, sizeof m, "%d", microbatches);
  g_snprintf (v, sizeof v, "%d", stages_per_rank);
  /* Every stage needs a block of its own. */
  int n_stages = ranks * MAX (stages_per_rank, 1);
  g_snprintf (layers, sizeof layers, "%d", model && model->layers >= n_stages ? model->layers
                                           : MAX (8, n_stages * 2));
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  char job_name[64];
  g_snprintf (job_name, sizeof job_name, "%s-app%d-%d", schedule, (int) getpid (), ++n_started);
  if (mpirun != NULL)
    {
      /* more processes than cores is fine for a view of the schedule */
      const char *launch[] = { mpirun, "--oversubscribe", "-np", p, cli_path, "run", "-s", schedule,
                               "-m", m, "--name", job_name };
      for (guint i = 0; i < G_N_ELEMENTS (launch); i++)
        g_ptr_array_add (argv, (gpointer) launch[i]);
    }
  else
    {
      const char *fixed[] = { cli_path, "run", "-s", schedule, "-p", p, "-m", m };
      for (guint i = 0; i < G_N_ELEMENTS (fixed); i++)
        g_ptr_array_add (argv, (gpointer) fixed[i]);
    }
  if (stages_per_rank > 0)
    {
      g_ptr_array_add (argv, "-v");
      g_ptr_array_add (argv, v);
    }
  /* Big enough that one action takes about a millisecond on a CPU: with
   * microsecond actions, handing work between threads is all one measures. */
  char batch[16], width[16];
  /* a given batch, to the nearest multiple of M (the rows split evenly) */
  g_snprintf (batch, sizeof batch, "%d", model && model->batch > 0
                                         ? MAX (microbatches, (model->batch + microbatches / 2)
                                                              / microbatches * microbatches)
                                         : 8 * microbatches);
  g_snprintf (width, sizeof width, "%d", model && model->width > 0 ? model->width : 256);
  const char *tail[] = { "--steps", "300", "--layers", layers, "--width", width,
                         "--batch", batch, "--backend", backend ? backend : "auto" };
  for (guint i = 0; i < G_N_ELEMENTS (tail); i++)
    g_ptr_array_add (argv, (gpointer) tail[i]);
  if (model != NULL && model->partition[0])
    {
      g_ptr_array_add (argv, "--partition");
      g_ptr_array_add (argv, (gpointer) model->partition);
    }
  g_ptr_array_add (argv, NULL);

  g_autoptr (GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  if (mpirun != NULL && geteuid () == 0)
    {
      /* OpenMPI refuses root unless told; the user already runs as root */
      g_subprocess_launcher_setenv (launcher, "OMPI_ALLOW_RUN_AS_ROOT", "1", TRUE);
      g_subprocess_launcher_setenv (launcher, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", TRUE);
    }
  GSubprocess *child = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, error);
  if (!child)
    return NULL;

  PpRecording *self = pp_recording_adopt_child (child);
  self->title = pp_recording_format_title (schedule, ranks, microbatches, stages_per_rank);
  self->source = g_strdup_printf ("run, pid %d", self->pid);

  /* The same path as attaching to a job started elsewhere: by pid, or
   * under mpirun (whose pid is no rank's) by the job's name. */
  char pid[16];
  g_snprintf (pid, sizeof pid, "%d", self->pid);
  if (mpirun != NULL)
    self->attach_timeout_us = PP_RUN_ATTACH_MPI_TIMEOUT_US;
  pp_recording_start_live (self, mpirun != NULL ? job_name : pid, NULL);
  return self;
}

PpRecording *
pp_recording_new_attach (const char *job, const char *token)
{
  g_return_val_if_fail (job != NULL, NULL);
  PpRecording *self = g_object_new (PP_TYPE_RECORDING, NULL);
  self->what = g_strdup ("attach");
  self->title = g_strdup_printf ("job %s", job);
  self->source = g_strdup (self->title);
  pp_recording_start_live (self, job, token && *token ? token : NULL);
  return self;
}

PpRecording *
pp_recording_new_file (PpTimelineModel *model, const char *path)
{
  g_return_val_if_fail (model && path, NULL);
  PpRecording *self = g_object_new (PP_TYPE_RECORDING, NULL);
  pp_timeline_model_free (self->model);
  self->model = model;
  self->what = g_strdup ("file");
  self->trace_path = g_strdup (path);
  self->title = g_path_get_basename (path);
  self->source = g_strdup (self->title);
  self->state = PP_RECORDING_FILE;
  pp_recording_title_from_description (self);
  pp_recording_update_status (self);
  return self;
}

PpTimelineModel *pp_recording_get_model (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->model; }
PpRecordingState pp_recording_get_state (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), 0); return self->state; }
const char *pp_recording_get_title (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->title; }
const char *pp_recording_get_status (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->status; }
const char *pp_recording_get_trace_path (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->trace_path; }
const char *pp_recording_get_source (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->source ? self->source : self->title; }
const char *pp_recording_get_report_path (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), NULL); return self->report_path; }
int pp_recording_get_pid (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), 0); return self->pid; }
gboolean pp_recording_is_child (PpRecording *self) { g_return_val_if_fail (PP_IS_RECORDING (self), FALSE); return self->child != NULL; }

gboolean
pp_recording_child_running (PpRecording *self)
{
  g_return_val_if_fail (PP_IS_RECORDING (self), FALSE);
  return self->child && !self->child_exited;
}

gboolean
pp_recording_has_spans_on_every_rank (PpRecording *self)
{
  g_return_val_if_fail (PP_IS_RECORDING (self), FALSE);
  const PpTraceDescription *d = pp_timeline_model_description (self->model);
  int n = d ? d->n_ranks : pp_timeline_model_n_ranks (self->model);
  if (n <= 0)
    return FALSE;
  for (int r = 0; r < n; r++)
    if (pp_timeline_model_n_spans (self->model, r) == 0)
      return FALSE;
  return TRUE;
}

void
pp_recording_stop (PpRecording *self)
{
  g_return_if_fail (PP_IS_RECORDING (self));
  if (self->child)
    {
      /* The job ends cleanly on SIGTERM and closes the stream itself. */
      if (!self->child_exited)
        {
          self->stop_asked = TRUE;
          g_subprocess_send_signal (self->child, SIGTERM);
        }
    }
  else if (self->live && self->state <= PP_RECORDING_LIVE)
    {
      self->stop_asked = TRUE;
      g_atomic_int_set (&self->live->stop, 1);
    }
}

void
pp_recording_kill (PpRecording *self)
{
  g_return_if_fail (PP_IS_RECORDING (self));
  if (self->child && !self->child_exited)
    g_subprocess_force_exit (self->child);
}
