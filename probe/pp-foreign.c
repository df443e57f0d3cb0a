/* pp-foreign.c — pipescope.h, the probe's stable C API for foreign runtimes,
 * over a recorder (pp-recorder.h: the probe, the trace sink, the live
 * server and the trace writers), as pipescope-cli's jobs record.
 *
 * Nothing here may hurt the process it is loaded into: every failure is a
 * return code and one line in the caller's buffer; recording goes through
 * pp_probe_record_*, which never blocks; frames the caller's thread writes
 * (description, plan, step markers) only append to memory (the live
 * server's history) or go to the trace file's buffer.
 *
 * Device activity (pipescope_device_*): the CUPTI collector, opened as a
 * module (pp-cupti-module.h) so that this library never links libcupti.
 * A block given with its push's id waits until the collector has served a
 * flush asked for when it was given (its records are all in by then: its
 * work had completed), then goes out timed by those records. */
#define PIPESCOPE_BUILDING 1
#include "pipescope.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pp-cupti-module.h"
#include "pp-live.h"
#include "pp-probe.h"
#include "pp-recorder.h"
#include "pp-registry.h"
#include "pp-trace.h"

_Static_assert ((int) PIPESCOPE_F == (int) PP_SPAN_F && (int) PIPESCOPE_B == (int) PP_SPAN_B && (int) PIPESCOPE_I == (int) PP_SPAN_I
                  && (int) PIPESCOPE_W == (int) PP_SPAN_W && (int) PIPESCOPE_SEND_F == (int) PP_SPAN_SEND_F
                  && (int) PIPESCOPE_RECV_F == (int) PP_SPAN_RECV_F && (int) PIPESCOPE_SEND_B == (int) PP_SPAN_SEND_B
                  && (int) PIPESCOPE_RECV_B == (int) PP_SPAN_RECV_B && (int) PIPESCOPE_OPT == (int) PP_SPAN_OPT
                  && (int) PIPESCOPE_WAIT == (int) PP_SPAN_WAIT && (int) PIPESCOPE_OVERLAP_F_B == (int) PP_SPAN_OVERLAP_F_B
                  && (int) PIPESCOPE_UNSHARD == (int) PP_SPAN_UNSHARD && (int) PIPESCOPE_RESHARD == (int) PP_SPAN_RESHARD
                  && (int) PIPESCOPE_REDUCE_GRAD == (int) PP_SPAN_REDUCE_GRAD
                  && (int) PIPESCOPE_WAIT_REDUCE_GRAD == (int) PP_SPAN_WAIT_REDUCE_GRAD
                  && (int) PIPESCOPE_GC == (int) PP_SPAN_GC
                  && (int) PIPESCOPE_HOST_SCHEDULE == (int) PP_SPAN_HOST_SCHEDULE
                  && (int) PIPESCOPE_HOST_LOSS == (int) PP_SPAN_HOST_LOSS
                  && (int) PIPESCOPE_HOST_DATA == (int) PP_SPAN_HOST_DATA
                  && (int) PIPESCOPE_HOST_ZERO_GRAD == (int) PP_SPAN_HOST_ZERO_GRAD
                  && (int) PIPESCOPE_LAUNCH == (int) PP_SPAN_LAUNCH
                  && (int) PIPESCOPE_LOSS_BLOCK == (int) PP_SPAN_LOSS,
                "the API's kinds are the trace format's span kinds");
_Static_assert ((int) PIPESCOPE_LOSS == (int) PP_COUNTER_LOSS
                  && (int) PIPESCOPE_ACTIVATION_BYTES == (int) PP_COUNTER_ACTIVATION_BYTES
                  && (int) PIPESCOPE_DEVICE_BYTES == (int) PP_COUNTER_DEVICE_BYTES
                  && (int) PIPESCOPE_INFLIGHT == (int) PP_COUNTER_INFLIGHT
                  && (int) PIPESCOPE_COLLECTIVE_CALLS == (int) PP_COUNTER_COLLECTIVE_CALLS
                  && (int) PIPESCOPE_COLLECTIVE_BYTES == (int) PP_COUNTER_COLLECTIVE_BYTES
                  && (int) PIPESCOPE_RUN_DELAY_NS == (int) PP_COUNTER_RUN_DELAY_NS
                  && (int) PIPESCOPE_PROBE_SELF_NS == (int) PP_COUNTER_PROBE_SELF_NS
                  && (int) PIPESCOPE_ON_CPU_NS == (int) PP_COUNTER_ON_CPU_NS
                  && (int) PIPESCOPE_LOSS_PART == (int) PP_COUNTER_LOSS_PART,
                "the API's counters are the trace format's");

#define FOREIGN_NEST_MAX    16
#define FOREIGN_MARKERS     256          /* step markers waiting for the drain */
#define FOREIGN_DEVICE_WAIT 65536        /* blocks waiting for their device records */
/* pipescope_process_name's ids: the top of the 19 bits of name a process
 * has in profile's merged stream (cli-profile.c, PROFILE_NAME_BITS), far
 * above the CUPTI collector's, which count up from 1. */
#define FOREIGN_PROCESS_NAME_BASE ((1u << 19) - PIPESCOPE_PROCESS_NAMES)

/* A block given before its device records have surely all arrived. */
typedef struct {
  uint64_t id, id2;        /* pushes; id2: an overlapped pair's backward half, else 0 */
  uint64_t ticket;         /* the collector's flush that hands them over */
  int      kind, stage, microbatch, step, sub_kind, sub_stage, sub_microbatch;
  int64_t  start_ns, end_ns;
} DeviceBlock;

typedef struct { int32_t step; int phase; int64_t t; } Marker;

struct pipescope_rank {
  int32_t         rank, n_ranks;
  PpRecorder     *rec;
  PpProbe        *probe;                 /* the recorder's */
  /* Step markers go out on the drain thread, after the spans recorded
   * before them (the caller's thread never writes a file): queued here
   * under marker_lock, which nothing holds across a write (the recorder's
   * lock is held while the drain writes, which a slow disk makes long),
   * and written after each batch the drain delivers. */
  pthread_mutex_t marker_lock;
  Marker          markers[FOREIGN_MARKERS];
  int             n_markers;
  uint64_t        markers_dropped;
  char            name[96];
  int32_t         process;               /* pipescope_rank_place's, -1 before */
  /* device activity: set once by pipescope_device_start (cu before
   * cupti), cleared at close after the last drain */
  const PpCuptiModule *cu;
  _Atomic (PpCupti *)  cupti;
  uint32_t        names_written;         /* kernel names in the writers (drain, under the lock) */
  uint32_t        process_names_written; /* pipescope_process_name's names in the writers (likewise) */
  pthread_mutex_t device_lock;           /* the waiting blocks */
  DeviceBlock    *device;
  size_t          n_device, cap_device;
  /* the push's clock measurements written so far (after_batch, under the
   * recorder's lock) */
  unsigned        clock_written;
};

static __thread int device_depth;        /* this thread's pushes still to pop */

/* pipescope_begin's per-thread stack. */
typedef struct {
  const pipescope_rank *r;
  int     kind, stage, microbatch, step;
  int64_t start_ns;
} Open;
static __thread Open open_blocks[FOREIGN_NEST_MAX];
static __thread int  n_open;

static void
put_err (char *err, size_t size, const char *fmt, ...)
{
  va_list ap;
  if (err == NULL || size == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (err, size, fmt, ap);
  va_end (ap);
}

static void process_rank_opened (pipescope_rank *r);
static void process_rank_closing (pipescope_rank *r);
static void process_step_begun (pipescope_rank *r, int step);

int
pipescope_api_version (void)
{
  return PIPESCOPE_API_VERSION;
}

int64_t
pipescope_now_ns (void)
{
  return pp_probe_now_ns ();
}

/* ---- the drain's side: step markers after each batch -------------------------- */

typedef struct {
  int32_t       rank;
  int           n;
  const Marker *m;
} MarkerBatch;

static PpStatus
write_queued_markers (PpTraceWriter *w, void *user, PpError *err)
{
  const MarkerBatch *b = user;
  (void) err;
  for (int k = 0; k < b->n; k++)
    pp_trace_write_step_marker (w, b->rank, b->m[k].step, (PpTraceStepPhase) b->m[k].phase,
                                b->m[k].t, NULL);
  return PP_OK;   /* a writer that failed keeps its error */
}

/* The queued step markers into every writer (the recorder's after_batch:
 * under its lock, after the spans recorded before them).  They are taken
 * from the queue first, so a caller queueing one never waits for a write. */
static void
write_markers (void *user)
{
  pipescope_rank *r = user;
  Marker m[FOREIGN_MARKERS];
  MarkerBatch b = { r->rank, 0, m };
  pthread_mutex_lock (&r->marker_lock);
  b.n = r->n_markers;
  memcpy (m, r->markers, (size_t) b.n * sizeof m[0]);
  r->n_markers = 0;
  pthread_mutex_unlock (&r->marker_lock);
  if (b.n > 0)
    (void) pp_recorder_write_locked (r->rec, write_queued_markers, &b, NULL, NULL);
}

/* Queues a step marker for the drain; -1 (dropped, counted) when the drain
 * has been stuck for FOREIGN_MARKERS of them. */
static int
queue_marker (pipescope_rank *r, int step, int phase, int64_t time_ns)
{
  int rc = 0;
  pthread_mutex_lock (&r->marker_lock);
  if (r->n_markers < FOREIGN_MARKERS)
    r->markers[r->n_markers++] = (Marker) { step, phase, time_ns };
  else
    {
      r->markers_dropped++;
      rc = -1;
    }
  pthread_mutex_unlock (&r->marker_lock);
  return rc;
}

/* ---- the drain's side: kernel names before the spans that use them ------------- */

typedef struct {
  const pipescope_rank *r;
  PpCupti              *c;
  uint32_t              from, to;   /* ids, both included */
} NameRange;

static PpStatus
write_name_range (PpTraceWriter *w, void *user, PpError *err)
{
  const NameRange *n = user;
  for (uint32_t id = n->from; id <= n->to; id++)
    {
      const char *name = n->r->cu->name (n->c, id);
      if (name == NULL)
        continue;
      PpStatus st = pp_trace_write_string_cut (w, id, name, err);
      if (st != PP_OK)
        return st;
    }
  return PP_OK;
}

/* The recorder's before_spans: names the collector interned since the
 * last batch (ids come 1, 2, 3, ... in order of first use), so that a
 * reader (merge, a viewer) knows each name before its first span. */
static void write_process_names (pipescope_rank *r);

static void
write_names (void *user, const PpSpan *spans, size_t n)
{
  pipescope_rank *r = user;
  PpCupti *c = atomic_load (&r->cupti);
  uint32_t top = r->names_written;
  write_process_names (r);
  if (c == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    if ((spans[i].kind == PP_SPAN_KERNEL || spans[i].kind == PP_SPAN_MEMCPY
         || spans[i].kind == PP_SPAN_MEMSET) && spans[i].name_id > top
        && spans[i].name_id < FOREIGN_PROCESS_NAME_BASE)
      top = spans[i].name_id;
  if (top == r->names_written)
    return;
  NameRange range = { r, c, r->names_written + 1, top };
  (void) pp_recorder_write_locked (r->rec, write_name_range, &range, NULL, NULL);
  r->names_written = top;
}

/* ---- the drain's side: the clock measured over the push ------------------------- */

typedef struct { int32_t rank; int64_t offset_ns; } ClockOffset;

static PpStatus
write_clock (PpTraceWriter *w, void *user, PpError *err)
{
  const ClockOffset *o = user;
  return pp_trace_write_clock_offset (w, o->rank, o->offset_ns, err);
}

/* A rank that pushes to a collector on another host has its clock measured
 * against the collector's on the live server's thread (pp-live.h): each
 * new measurement becomes a CLOCK_OFFSET frame in every writer, so that the
 * collector's stream and this rank's own file (merged by the collector)
 * both put its times on the collector's clock.  Ranks that do not push
 * have no measurement and write none. */
static void
write_push_clock (pipescope_rank *r)
{
  int64_t off = 0;
  unsigned gen = pp_live_server_clock (pp_recorder_server (r->rec), &off, NULL);
  if (gen == r->clock_written)
    return;
  ClockOffset o = { r->rank, off };
  (void) pp_recorder_write_locked (r->rec, write_clock, &o, NULL, NULL);
  r->clock_written = gen;
}

/* The recorder's after_batch: the queued markers, a new clock offset. */
static void
after_batch (void *user)
{
  write_markers (user);
  write_push_clock (user);
}

/* Whether job's collector (pipescope-cli profile, registered under the
 * job's own name) is in this host's registry: then it finds this rank there
 * and reads its socket, and the rank pushes nothing.  Where it is not (the
 * rank runs on another host), PIPESCOPE_COLLECT names where to push. */
static bool
collector_here (const char *job)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  bool here = false;
  if (pp_registry_list (&jobs, &n, NULL) != PP_OK)
    return false;
  for (size_t i = 0; i < n && !here; i++)
    here = strcmp (jobs[i].name, job) == 0 && strcmp (jobs[i].job, job) == 0;
  free (jobs);
  return here;
}

/* The run this rank belongs to, from pipescope-cli profile
 * (PIPESCOPE_JOB_ID, 16 hex digits): written into the rank file's header
 * so that profile merges its own run's files only, never an earlier run's
 * left beside them.  0: none (the rank was started by something else). */
static uint64_t
job_id_from_env (const char *name)
{
  const char *v = getenv ("PIPESCOPE_JOB_ID");
  char *end = NULL;
  if (v == NULL || v[0] == '\0')
    return 0;
  errno = 0;
  unsigned long long id = strtoull (v, &end, 16);
  if (errno != 0 || *end != '\0' || strlen (v) > 16 || v[0] == '-' || v[0] == '+' || id == 0)
    {
      fprintf (stderr, "pipescope: %s: PIPESCOPE_JOB_ID=%.40s is not 1 to 16 hex digits; its trace file "
               "says no run\n", name, v);
      return 0;
    }
  return (uint64_t) id;
}

static PpStatus
write_job_id (PpTraceWriter *w, void *user, PpError *err)
{
  return pp_trace_writer_set_job_id (w, *(const uint64_t *) user, err);
}

static void
foreign_free (pipescope_rank *r)
{
  pp_recorder_free (r->rec);
  pthread_mutex_destroy (&r->device_lock);
  pthread_mutex_destroy (&r->marker_lock);
  free (r->device);
  free (r);
}

pipescope_rank *
pipescope_rank_open (const char *job, int rank, int n_ranks, const char *runtime,
                     const char *trace_path, const char *listen, char *err, size_t err_size)
{
  PpError e = { 0 };
  pipescope_rank *r;
  char own[80];

  put_err (err, err_size, "%s", "");
  if (rank < 0 || n_ranks < 0 || rank >= PP_TRACE_MAX_RANKS || n_ranks > PP_TRACE_MAX_RANKS
      || (n_ranks > 0 && rank >= n_ranks))
    {
      put_err (err, err_size, "pipescope: rank %d of %d ranks is not a rank", rank, n_ranks);
      return NULL;
    }
  if (runtime == NULL || runtime[0] == '\0')
    runtime = "foreign";
  r = calloc (1, sizeof *r);
  if (r == NULL)
    {
      put_err (err, err_size, "pipescope: out of memory");
      return NULL;
    }
  r->rank = rank;
  r->process = -1;
  pthread_mutex_init (&r->device_lock, NULL);
  pthread_mutex_init (&r->marker_lock, NULL);
  r->n_ranks = n_ranks;
  if (job == NULL || job[0] == '\0')
    {
      snprintf (own, sizeof own, "%.40s-%ld", runtime, (long) getpid ());
      job = own;
      snprintf (r->name, sizeof r->name, "%s", job);
    }
  else
    snprintf (r->name, sizeof r->name, "%.60s.r%d", job, rank);

  if ((r->rec = pp_recorder_new (&e)) == NULL)
    goto fail;
  PpLiveConfig cfg;
  memset (&cfg, 0, sizeof cfg);
  cfg.name = r->name;
  cfg.schedule = runtime;
  cfg.cmdline = runtime;
  cfg.listen = listen && listen[0] ? listen : NULL;
  cfg.job = job == own ? NULL : job;
  cfg.rank = rank;
  cfg.n_ranks = job == own ? 0 : (n_ranks > 0 ? n_ranks : rank + 1);
  const char *collect = getenv ("PIPESCOPE_COLLECT");
  if (job != own && collect != NULL && collect[0] && !collector_here (job))
    {
      cfg.push = collect;
      cfg.push_token = getenv ("PIPESCOPE_COLLECT_TOKEN");
      cfg.push_label = r->name;
    }
  PpLiveServer *server = pp_live_server_new (&cfg, &e);
  if (server == NULL && cfg.push != NULL)
    {
      /* a malformed PIPESCOPE_COLLECT costs the push, not the rank */
      fprintf (stderr, "pipescope: %s: %s; recording goes on here only\n", r->name, e.msg);
      cfg.push = NULL;
      memset (&e, 0, sizeof e);
      server = pp_live_server_new (&cfg, &e);
    }
  int file = trace_path != NULL && trace_path[0];
  if (server == NULL && (cfg.listen != NULL || !file))
    {
      put_err (err, err_size, "pipescope: cannot serve %s live: %s", r->name,
               e.msg[0] ? e.msg : "unknown reason");
      foreign_free (r);
      return NULL;
    }
  /* Without a live endpoint (no private folder for the socket) the trace
   * file that was asked for is still written. */
  if (server != NULL && pp_recorder_add_live (r->rec, server, &e) < 0)
    goto fail;
  int file_index = file ? pp_recorder_add_file (r->rec, trace_path, &e) : -1;
  if (file && file_index < 0)
    goto fail;
  uint64_t job_id = file ? job_id_from_env (r->name) : 0;
  /* the header goes out now, with the id: a rank killed before its first
   * record still leaves a file that says whose it is */
  if (job_id != 0 && pp_recorder_write_one (r->rec, file_index, write_job_id, &job_id, &e) != PP_OK)
    goto fail;
  PpRecorderHooks hooks;
  memset (&hooks, 0, sizeof hooks);
  hooks.user = r;
  hooks.after_batch = after_batch;
  hooks.before_spans = write_names;
  if (pp_recorder_start (r->rec, &hooks, &e) != PP_OK)
    goto fail;
  r->probe = pp_recorder_probe (r->rec);
  process_rank_opened (r);
  return r;

fail:
  put_err (err, err_size, "pipescope: %s", e.msg[0] ? e.msg : "cannot start recording");
  foreign_free (r);
  return NULL;
}

/* fn on every writer, each flushed after, under the lock; a writer that
 * fails keeps its error, which the close reports. */
static int
write_all (pipescope_rank *r, PpRecorderWriteFunc fn, void *arg)
{
  if (r == NULL)
    return -1;
  return pp_recorder_write (r->rec, fn, arg, NULL, NULL) == PP_OK ? 0 : -1;
}

static PpCupti *device_stop (pipescope_rank *r);
static void     device_emit_waiting (pipescope_rank *r);

int
pipescope_rank_close (pipescope_rank *r, char *err, size_t err_size)
{
  PpError e = { 0 };
  int rc = 0;

  put_err (err, err_size, "%s", "");
  if (r == NULL)
    return 0;
  process_rank_closing (r);
  /* the blocks still waiting and the collector's last records, then the
   * final drain (which still asks the collector for names), the markers
   * no span came after, the files closed */
  PpCupti *c = device_stop (r);
  r->probe = NULL;
  if (pp_recorder_close (r->rec, NULL, &e) != PP_OK)
    {
      put_err (err, err_size, "pipescope: %s", e.msg);
      rc = -1;
    }
  r->rec = NULL;
  if (c != NULL)
    {
      atomic_store (&r->cupti, NULL);
      r->cu->free (c);
    }
  foreign_free (r);
  return rc;
}

static void
copy_str (char *dst, size_t size, const char *src)
{
  snprintf (dst, size, "%s", src ? src : "");
}

static PpStatus
write_desc (PpTraceWriter *w, void *arg, PpError *err)
{
  return pp_trace_write_description (w, arg, err);
}

int
pipescope_describe (pipescope_rank *r, const char *schedule, const char *backend, int n_ranks,
                    int n_microbatches, int n_virtual, const char *model, const char *cmdline)
{
  PpTraceDescription d;
  struct timespec ts;

  if (r == NULL || n_ranks < 1 || n_ranks > PP_TRACE_MAX_RANKS || n_microbatches < 0
      || n_microbatches > PP_TRACE_MAX_MICROBATCHES || n_virtual < 1 || n_virtual > PP_TRACE_MAX_VIRTUAL)
    return -1;
  memset (&d, 0, sizeof d);
  copy_str (d.schedule, sizeof d.schedule, schedule);
  copy_str (d.backend, sizeof d.backend, backend);
  copy_str (d.model, sizeof d.model, model);
  copy_str (d.cmdline, sizeof d.cmdline, cmdline);
  if (gethostname (d.host, sizeof d.host - 1) != 0)
    d.host[0] = '\0';
  d.n_ranks = n_ranks;
  d.n_microbatches = n_microbatches;
  d.n_virtual = n_virtual;
  clock_gettime (CLOCK_REALTIME, &ts);
  d.start_monotonic_ns = pp_probe_now_ns ();
  d.start_unix_ns = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
  return write_all (r, write_desc, &d);
}

typedef struct {
  int                      rank;
  const PpTracePlanAction *actions;
  size_t                   n;
} PlanArg;

static PpStatus
write_plan (PpTraceWriter *w, void *arg, PpError *err)
{
  const PlanArg *p = arg;
  return pp_trace_write_rank_plan (w, p->rank, p->actions, p->n, 0, err);
}

static int
is_block_kind (int k)
{
  return k == PP_TRACE_ACT_F || k == PP_TRACE_ACT_B || k == PP_TRACE_ACT_I || k == PP_TRACE_ACT_W
         || k == PP_TRACE_ACT_OVERLAP_F_B;
}

/* A plan's kind in the API's numbers (span kinds) as the trace's action
 * kind; -1 for one a plan cannot hold. */
static int
plan_action_kind (int k)
{
  switch (k)
    {
    case PIPESCOPE_F: case PIPESCOPE_B: case PIPESCOPE_I: case PIPESCOPE_W:
      return k;   /* the same numbers in both */
    case PIPESCOPE_OVERLAP_F_B: return PP_TRACE_ACT_OVERLAP_F_B;
    case PIPESCOPE_UNSHARD: return PP_TRACE_ACT_UNSHARD;
    case PIPESCOPE_RESHARD: return PP_TRACE_ACT_RESHARD;
    case PIPESCOPE_REDUCE_GRAD: return PP_TRACE_ACT_REDUCE_GRAD;
    case PIPESCOPE_WAIT_REDUCE_GRAD: return PP_TRACE_ACT_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

static int
is_dp_kind (int k)
{
  return k == PIPESCOPE_UNSHARD || k == PIPESCOPE_RESHARD || k == PIPESCOPE_REDUCE_GRAD
         || k == PIPESCOPE_WAIT_REDUCE_GRAD;
}

static int
is_block_api_kind (int k)
{
  return k == PIPESCOPE_F || k == PIPESCOPE_B || k == PIPESCOPE_I || k == PIPESCOPE_W
         || k == PIPESCOPE_OPT || is_dp_kind (k) || pp_span_kind_is_host (k) || k == PIPESCOPE_LOSS_BLOCK;
}

int
pipescope_plan (pipescope_rank *r, int rank, size_t n, const int32_t *actions)
{
  if (r == NULL || rank < 0 || rank >= PP_TRACE_MAX_RANKS || (n > 0 && actions == NULL)
      || n > PP_TRACE_PLAN_MAX_ACTIONS)
    return -1;
  PpTracePlanAction *a = calloc (n ? n : 1, sizeof *a);
  int rc = -1;
  if (a == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    {
      const int32_t *x = actions + 6 * i;
      /* the API's kinds are span kinds; a plan's are action kinds */
      int kind = plan_action_kind (x[0]);
      if (kind < 0 || (kind == PP_TRACE_ACT_OVERLAP_F_B && !is_block_kind (x[3])))
        goto out;
      a[i].kind = kind;
      a[i].stage = x[1];
      a[i].microbatch = is_dp_kind (x[0]) ? -1 : x[2];
      a[i].sub_kind = kind == PP_TRACE_ACT_OVERLAP_F_B ? x[3] : -1;
      a[i].sub_stage = kind == PP_TRACE_ACT_OVERLAP_F_B ? x[4] : -1;
      a[i].sub_microbatch = kind == PP_TRACE_ACT_OVERLAP_F_B ? x[5] : -1;
    }
  PlanArg p = { rank, a, n };
  rc = write_all (r, write_plan, &p);
out:
  free (a);
  return rc;
}

/* ---- recording: the hot path, through the probe's rings ------------------------ */

/* A span; stream: a GC span's collecting thread (pp-event.h), 0 otherwise. */
static int
record_on (pipescope_rank *r, int kind, int stage, int microbatch, int step, int64_t start_ns,
           int64_t end_ns, int peer, uint64_t bytes, uint32_t stream)
{
  PpSpan s;
  if (r == NULL || end_ns < start_ns)
    return -1;
  memset (&s, 0, sizeof s);
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.bytes = bytes;
  s.rank = r->rank;
  s.stage = stage < 0 ? -1 : stage;
  s.microbatch = microbatch < 0 ? -1 : microbatch;
  s.step = step < 0 ? 0 : step;
  s.kind = (uint16_t) kind;
  s.device = 0xffff;
  s.peer_rank = peer < 0 ? -1 : peer;
  s.stream = stream;
  return pp_probe_record_span (r->probe, &s) ? 0 : -1;
}

static int
record (pipescope_rank *r, int kind, int stage, int microbatch, int step, int64_t start_ns,
        int64_t end_ns, int peer, uint64_t bytes)
{
  return record_on (r, kind, stage, microbatch, step, start_ns, end_ns, peer, bytes, 0);
}

int
pipescope_block (pipescope_rank *r, int kind, int stage, int microbatch, int step,
                 int64_t start_ns, int64_t end_ns)
{
  if (!is_block_api_kind (kind))
    return -1;
  return record (r, kind, stage, microbatch, step, start_ns, end_ns, -1, 0);
}

int
pipescope_overlap (pipescope_rank *r, int f_stage, int f_microbatch, int b_kind, int b_stage,
                   int b_microbatch, int step, int64_t start_ns, int64_t end_ns)
{
  PpSpan s;
  if (r == NULL || end_ns < start_ns || (b_kind != PIPESCOPE_B && b_kind != PIPESCOPE_I))
    return -1;
  memset (&s, 0, sizeof s);
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.rank = r->rank;
  s.stage = f_stage < 0 ? -1 : f_stage;
  s.microbatch = f_microbatch < 0 ? -1 : f_microbatch;
  s.step = step < 0 ? 0 : step;
  s.kind = PP_SPAN_OVERLAP_F_B;
  s.device = 0xffff;
  s.peer_rank = -1;
  s.sub_kind = (uint16_t) b_kind;   /* the format's B and I (1.2) */
  s.sub_stage = b_stage;
  s.sub_microbatch = b_microbatch;
  return pp_probe_record_span (r->probe, &s) ? 0 : -1;
}

int
pipescope_begin (pipescope_rank *r, int kind, int stage, int microbatch, int step)
{
  if (r == NULL || n_open >= FOREIGN_NEST_MAX)
    return -1;
  open_blocks[n_open++] = (Open) { r, kind, stage, microbatch, step, pp_probe_now_ns () };
  return 0;
}

int
pipescope_end (pipescope_rank *r)
{
  if (r == NULL || n_open == 0 || open_blocks[n_open - 1].r != r)
    return -1;
  Open o = open_blocks[--n_open];
  return pipescope_block (r, o.kind, o.stage, o.microbatch, o.step, o.start_ns, pp_probe_now_ns ());
}

int
pipescope_transfer (pipescope_rank *r, int kind, int stage, int microbatch, int peer,
                    uint64_t bytes, int step, int64_t start_ns, int64_t end_ns)
{
  if (!(kind == PIPESCOPE_SEND_F || kind == PIPESCOPE_RECV_F || kind == PIPESCOPE_SEND_B
        || kind == PIPESCOPE_RECV_B))
    return -1;
  return record (r, kind, stage, microbatch, step, start_ns, end_ns, peer, bytes);
}

int
pipescope_wait (pipescope_rank *r, int stage, int microbatch, int peer, int step, int64_t start_ns,
                int64_t end_ns)
{
  return record (r, PIPESCOPE_WAIT, stage, microbatch, step, start_ns, end_ns, peer, 0);
}

size_t
pipescope_records (pipescope_rank *r, size_t n, const int64_t *records)
{
  size_t refused = 0;
  if (r == NULL || records == NULL)
    return n;
  for (size_t i = 0; i < n; i++)
    {
      const int64_t *f = records + i * PIPESCOPE_RECORD_FIELDS;
      int64_t kind = f[0];
      /* stage, micro-batch, step and peer are ints in every other call */
      int fits = f[1] >= INT32_MIN && f[1] <= INT32_MAX && f[2] >= INT32_MIN && f[2] <= INT32_MAX
                 && f[3] >= INT32_MIN && f[3] <= INT32_MAX && f[6] >= INT32_MIN && f[6] <= INT32_MAX
                 && f[7] >= 0;
      int rc = -1;
      if (!fits)
        rc = -1;
      else if (kind == PIPESCOPE_GC)   /* bytes: the collecting thread, 0 the rank's own */
        rc = f[7] > (int64_t) UINT32_MAX ? -1
             : record_on (r, PIPESCOPE_GC, (int) f[1], (int) f[2], (int) f[3], f[4], f[5], -1, 0,
                          (uint32_t) f[7]);
      else if (kind == PIPESCOPE_F || kind == PIPESCOPE_B || kind == PIPESCOPE_I || kind == PIPESCOPE_W
               || kind == PIPESCOPE_OPT || pp_span_kind_is_host ((int) kind) || kind == PIPESCOPE_LOSS_BLOCK)
        rc = record (r, (int) kind, (int) f[1], (int) f[2], (int) f[3], f[4], f[5], -1, 0);
      else if (is_dp_kind ((int) kind))
        rc = record (r, (int) kind, (int) f[1], -1, (int) f[3], f[4], f[5], -1, (uint64_t) f[7]);
      else if (kind == PIPESCOPE_SEND_F || kind == PIPESCOPE_RECV_F || kind == PIPESCOPE_SEND_B
               || kind == PIPESCOPE_RECV_B)
        rc = record (r, (int) kind, (int) f[1], (int) f[2], (int) f[3], f[4], f[5], (int) f[6],
                     (uint64_t) f[7]);
      else if (kind == PIPESCOPE_WAIT)
        rc = record (r, PIPESCOPE_WAIT, (int) f[1], (int) f[2], (int) f[3], f[4], f[5], (int) f[6], 0);
      else if (kind == PIPESCOPE_COUNTER_RECORD)
        rc = pipescope_counter (r, (int) f[1], (double) f[7], (int) f[3], f[4]);
      else if ((kind == PIPESCOPE_STEP_BEGIN || kind == PIPESCOPE_STEP_END) && f[3] >= 0)
        {
          device_emit_waiting (r);   /* as pipescope_step does */
          if (kind == PIPESCOPE_STEP_BEGIN)
            process_step_begun (r, (int) f[3]);
          rc = queue_marker (r, (int) f[3], kind == PIPESCOPE_STEP_END, f[4]);
        }
      if (rc != 0)
        refused++;
    }
  return refused;
}

int
pipescope_step (pipescope_rank *r, int step, int phase, int64_t time_ns)
{
  if (r == NULL || step < 0 || (phase != 0 && phase != 1))
    return -1;
  device_emit_waiting (r);
  if (phase == 0)
    process_step_begun (r, step);
  /* Queued for the drain, which writes it after the spans recorded before
   * it; never a file write on the caller's thread. */
  return queue_marker (r, step, phase, time_ns);
}

int
pipescope_counter (pipescope_rank *r, int kind, double value, int step, int64_t time_ns)
{
  PpCounter c;
  if (r == NULL || kind < 0 || kind >= PP_N_COUNTER_KINDS)
    return -1;
  memset (&c, 0, sizeof c);
  c.time_ns = time_ns;
  c.value = value;
  c.rank = r->rank;
  c.step = step < 0 ? 0 : step;
  c.kind = (uint16_t) kind;
  return pp_probe_record_counter (r->probe, &c) ? 0 : -1;
}

typedef struct {
  int32_t     rank;
  const char *host;
} RankArg;

static PpStatus
write_rank (PpTraceWriter *w, void *arg, PpError *err)
{
  const RankArg *a = arg;
  return pp_trace_write_rank (w, a->rank, (int32_t) getpid (), a->host, err);
}

int
pipescope_rank_info (pipescope_rank *r, const char *host)
{
  char own[64] = "";
  if (r == NULL)
    return -1;
  if (host == NULL || host[0] == '\0')
    {
      if (gethostname (own, sizeof own - 1) != 0)
        own[0] = '\0';
      host = own;
    }
  RankArg a = { r->rank, host };
  return write_all (r, write_rank, &a);
}

static PpStatus
write_place (PpTraceWriter *w, void *arg, PpError *err)
{
  const PpTraceProcess *p = arg;
  PpStatus st = pp_trace_writer_set_process (w, p->process, err);
  return st == PP_OK ? pp_trace_write_process (w, p, err) : st;
}

/* pipescope_rank_place and pipescope_rank_unplaced: the PROCESS frame
 * with flags (PP_TRACE_PROCESS_*). */
static int
place_rank (pipescope_rank *r, int process, const int32_t coord[5], const int32_t size[5], uint32_t flags)
{
  PpTraceProcess p;
  if (r == NULL || coord == NULL || size == NULL || r->process >= 0)
    return -1;
  memset (&p, 0, sizeof p);
  p.process = process;
  p.rank = r->rank;
  p.flags = flags;
  memcpy (p.coord, coord, sizeof p.coord);
  memcpy (p.size, size, sizeof p.size);
  p.pid = (int32_t) getpid ();
  if (gethostname (p.host, sizeof p.host - 1) != 0)
    p.host[0] = '\0';
  if (pp_trace_process_check (&p, NULL) != PP_OK)
    return -1;
  r->process = process;
  /* the frame and the tag together, under the writers' lock: no frame of
   * the drain's falls between them */
  int rc = write_all (r, write_place, &p);
  /* two processes of one pipeline rank are two entries of the job; a
   * failed rewrite leaves the entry as opened (still this process's own
   * file, found by its pid) */
  char name[sizeof r->name + 16];
  snprintf (name, sizeof name, "%.72s.p%d", r->name, process);
  PpError e = { 0 };
  if (pp_live_server_rename (pp_recorder_server (r->rec), name, &e) == PP_OK)
    snprintf (r->name, sizeof r->name, "%.80s", name);
  return rc;
}

int
pipescope_rank_place (pipescope_rank *r, int process, const int32_t coord[5], const int32_t size[5])
{
  return place_rank (r, process, coord, size, 0);
}

int
pipescope_rank_unplaced (pipescope_rank *r, int process)
{
  if (r == NULL)
    return -1;
  /* its pipeline rank and nothing else: the merge numbers the replicas */
  const int32_t coord[5] = { r->rank, 0, 0, 0, 0 };
  const int32_t size[5] = { r->n_ranks > r->rank ? r->n_ranks : r->rank + 1, 1, 1, 1, 1 };
  return place_rank (r, process, coord, size, PP_TRACE_PROCESS_UNPLACED);
}

static PpStatus
write_open (PpTraceWriter *w, void *arg, PpError *err)
{
  return pp_trace_write_open (w, arg, err);
}

int
pipescope_open_action (pipescope_rank *r, int kind, int stage, int microbatch, int step, int peer,
                       int64_t start_ns, const char *where, int closed)
{
  if (r == NULL || kind < -1 || kind > PP_SPAN_LOSS)
    return -1;
  PpTraceOpen o;
  memset (&o, 0, sizeof o);
  o.time_ns = pp_probe_now_ns ();
  o.rank = r->rank;
  o.kind = kind;
  o.step = kind < 0 ? -1 : step;
  o.stage = kind < 0 ? -1 : stage;
  o.microbatch = kind < 0 ? -1 : microbatch;
  o.peer_rank = kind < 0 ? -1 : peer;
  o.start_ns = start_ns;   /* kind -1: when the last action ended, as the caller saw it */
  o.flags = closed ? PP_TRACE_OPEN_CLOSED : 0;
  copy_str (o.where, sizeof o.where, where);
  return write_all (r, write_open, &o);
}

uint64_t
pipescope_dropped (pipescope_rank *r)
{
  if (r == NULL)
    return 0;
  pthread_mutex_lock (&r->marker_lock);
  uint64_t markers = r->markers_dropped;
  pthread_mutex_unlock (&r->marker_lock);
  return pp_probe_dropped (r->probe) + markers;
}

/* ---- device activity: the CUPTI collector, opened as a module -------------------- */

int
pipescope_device_start (pipescope_rank *r, char *err, size_t err_size)
{
  put_err (err, err_size, "%s", "");
  if (r == NULL)
    return -1;
  if (atomic_load (&r->cupti) != NULL)
    return 0;
#ifdef PP_HAVE_CUPTI_MODULE
  const char *env = getenv ("PIPESCOPE_CUPTI");
  char why[PP_ERROR_MSG_MAX];
  PpError e = { 0 };
  if (env != NULL && strcmp (env, "0") == 0)
    {
      /* not even opened: off costs nothing */
      put_err (err, err_size, "pipescope: GPU tracing unavailable: turned off (PIPESCOPE_CUPTI=0)");
      return 1;
    }
  const PpCuptiModule *cu = pp_cupti_module_load (why, sizeof why);
  if (cu == NULL)
    {
      put_err (err, err_size, "pipescope: GPU tracing unavailable: %s", why);
      return 1;
    }
  PpCupti *c = cu->start (r->probe, r->rank, &e);
  if (c == NULL)
    {
      put_err (err, err_size, "pipescope: %s", e.msg[0] ? e.msg : "GPU tracing unavailable");
      return 1;
    }
  r->cu = cu;
  atomic_store (&r->cupti, c);
  return 0;
#else
  put_err (err, err_size,
           "pipescope: GPU tracing unavailable: this libpipescope-probe.so was built without CUDA and CUPTI");
  return 1;
#endif
}

static int
is_tagged_kind (int kind)
{
  return is_block_api_kind (kind);   /* a data-parallel block's NCCL kernels are its children too */
}

uint64_t
pipescope_device_push (pipescope_rank *r, int kind, int stage, int microbatch, int step)
{
  PpCupti *c = r != NULL ? atomic_load (&r->cupti) : NULL;
  if (c == NULL || device_depth >= FOREIGN_NEST_MAX || !is_tagged_kind (kind))
    return 0;
  uint64_t id = r->cu->push_block_rank (c, r->rank, stage < 0 ? -1 : stage,
                                        microbatch < 0 ? -1 : microbatch, kind, step < 0 ? 0 : step);
  device_depth += id != 0;   /* a refused push pushed nothing: nothing to pop */
  return id;
}

int
pipescope_device_pop (pipescope_rank *r)
{
  PpCupti *c = r != NULL ? atomic_load (&r->cupti) : NULL;
  if (c == NULL || device_depth == 0)
    return -1;
  device_depth--;
  r->cu->pop_block (c);
  return 0;
}

/* The block's span: from its device records' first start to their last
 * end, or the caller's times where it had none. */
static void
device_emit (pipescope_rank *r, PpCupti *c, const DeviceBlock *d)
{
  int64_t s = INT64_MAX, e = INT64_MIN;
  for (int k = 0; k < 2; k++)
    {
      uint64_t id = k == 0 ? d->id : d->id2;
      int64_t bs, be;
      if (id != 0 && c != NULL && r->cu->block_gpu_time (c, id, &bs, &be, NULL))
        {
          s = bs < s ? bs : s;
          e = be > e ? be : e;
        }
    }
  if (s == INT64_MAX)
    {
      s = d->start_ns;
      e = d->end_ns;
    }
  if (d->kind == PIPESCOPE_OVERLAP_F_B)
    pipescope_overlap (r, d->stage, d->microbatch, d->sub_kind, d->sub_stage, d->sub_microbatch,
                       d->step, s, e);
  else
    record (r, d->kind, d->stage, d->microbatch, d->step, s, e, -1, 0);
}

/* The waiting blocks whose flush has been served, in the order given; all
 * of them with all (after a forced flush of our own).  device_lock held. */
static void
emit_served (pipescope_rank *r, PpCupti *c, bool all)
{
  size_t done = 0;
  while (done < r->n_device && (all || r->cu->wait_flush (c, r->device[done].ticket, 0)))
    {
      device_emit (r, c, &r->device[done]);
      done++;
    }
  memmove (r->device, r->device + done, (r->n_device - done) * sizeof *r->device);
  r->n_device -= done;
}

static void
device_emit_waiting (pipescope_rank *r)
{
  PpCupti *c = atomic_load (&r->cupti);
  if (c == NULL)
    return;
  pthread_mutex_lock (&r->device_lock);
  if (r->n_device > 0)
    emit_served (r, c, false);
  pthread_mutex_unlock (&r->device_lock);
}

/* d waits for the flush asked for now (or, with no room to wait, goes out
 * at once with the caller's times). */
static int
device_defer (pipescope_rank *r, PpCupti *c, DeviceBlock *d)
{
  pthread_mutex_lock (&r->device_lock);
  if (r->n_device == r->cap_device)
    {
      size_t cap = r->cap_device ? 2 * r->cap_device : 256;
      DeviceBlock *p = cap <= FOREIGN_DEVICE_WAIT ? realloc (r->device, cap * sizeof *p) : NULL;
      if (p == NULL)
        {
          d->id = d->id2 = 0;
          device_emit (r, c, d);
          pthread_mutex_unlock (&r->device_lock);
          return 0;
        }
      r->device = p;
      r->cap_device = cap;
    }
  d->ticket = r->cu->request_flush (c);
  r->device[r->n_device++] = *d;
  emit_served (r, c, false);
  pthread_mutex_unlock (&r->device_lock);
  return 0;
}

int
pipescope_device_block (pipescope_rank *r, uint64_t id, int kind, int stage, int microbatch, int step,
                        int64_t start_ns, int64_t end_ns)
{
  PpCupti *c = r != NULL ? atomic_load (&r->cupti) : NULL;
  if (r == NULL || end_ns < start_ns || !is_tagged_kind (kind))
    return -1;
  if (id == 0 || c == NULL)
    return pipescope_block (r, kind, stage, microbatch, step, start_ns, end_ns);
  DeviceBlock d = {
    .id = id, .kind = kind, .stage = stage < 0 ? -1 : stage,
    .microbatch = microbatch < 0 ? -1 : microbatch, .step = step < 0 ? 0 : step,
    .start_ns = start_ns, .end_ns = end_ns,
  };
  return device_defer (r, c, &d);
}

int
pipescope_device_overlap (pipescope_rank *r, uint64_t f_id, uint64_t b_id, int f_stage,
                          int f_microbatch, int b_kind, int b_stage, int b_microbatch, int step,
                          int64_t start_ns, int64_t end_ns)
{
  PpCupti *c = r != NULL ? atomic_load (&r->cupti) : NULL;
  if (r == NULL || end_ns < start_ns || (b_kind != PIPESCOPE_B && b_kind != PIPESCOPE_I))
    return -1;
  if ((f_id == 0 && b_id == 0) || c == NULL)
    return pipescope_overlap (r, f_stage, f_microbatch, b_kind, b_stage, b_microbatch, step,
                              start_ns, end_ns);
  DeviceBlock d = {
    .id = f_id, .id2 = b_id, .kind = PIPESCOPE_OVERLAP_F_B, .stage = f_stage,
    .microbatch = f_microbatch, .sub_kind = b_kind, .sub_stage = b_stage,
    .sub_microbatch = b_microbatch, .step = step < 0 ? 0 : step,
    .start_ns = start_ns, .end_ns = end_ns,
  };
  return device_defer (r, c, &d);
}

/* At close: every waiting block out (a forced flush first: their work has
 * completed, so their records are all in after it), then the collector
 * stopped, its last records in the probe.  Returns it, to free once the
 * final drain no longer needs its names. */
static PpCupti *
device_stop (pipescope_rank *r)
{
  PpCupti *c = atomic_load (&r->cupti);
  if (c == NULL)
    return NULL;
  pthread_mutex_lock (&r->device_lock);
  if (r->n_device > 0)
    {
      (void) r->cu->flush (c, NULL);
      emit_served (r, c, true);
    }
  pthread_mutex_unlock (&r->device_lock);
  r->cu->stop (c);
  return c;
}

/* ---- the process's rank, for a library the job loaded (pipescope.h) ----------- */

/* The first rank opened and still open; process_lock held for reading
 * while a span goes into it, for writing while it changes (close takes it
 * before anything of the rank is freed). */
static pthread_rwlock_t  process_lock = PTHREAD_RWLOCK_INITIALIZER;
static pipescope_rank   *process_rank;
static _Atomic int       process_step;

/* The names: appended under names_lock, published by n_process_names
 * (release) after the text is in place; never removed. */
static pthread_mutex_t   names_lock = PTHREAD_MUTEX_INITIALIZER;
static char              process_names[PIPESCOPE_PROCESS_NAMES][64];
static _Atomic uint32_t  n_process_names;

static void
process_rank_opened (pipescope_rank *r)
{
  pthread_rwlock_wrlock (&process_lock);
  if (process_rank == NULL)
    {
      process_rank = r;
      atomic_store (&process_step, 0);
    }
  pthread_rwlock_unlock (&process_lock);
}

static void
process_rank_closing (pipescope_rank *r)
{
  pthread_rwlock_wrlock (&process_lock);
  if (process_rank == r)
    process_rank = NULL;
  pthread_rwlock_unlock (&process_lock);
}

static void
process_step_begun (pipescope_rank *r, int step)
{
  if (r == process_rank && step >= 0)   /* a stale read only misses a step of a rank closing */
    atomic_store_explicit (&process_step, step, memory_order_relaxed);
}

typedef struct { uint32_t from, to; } ProcessNames;

static PpStatus
write_process_name_range (PpTraceWriter *w, void *user, PpError *err)
{
  const ProcessNames *p = user;
  for (uint32_t k = p->from; k < p->to; k++)
    {
      PpStatus st = pp_trace_write_string (w, FOREIGN_PROCESS_NAME_BASE + k, process_names[k], err);
      if (st != PP_OK)
        return st;
    }
  return PP_OK;
}

/* Before a batch of spans (the drain, under the recorder's lock): the
 * names interned since the last, so that each precedes its first span. */
static void
write_process_names (pipescope_rank *r)
{
  uint32_t n = atomic_load_explicit (&n_process_names, memory_order_acquire);
  if (n == r->process_names_written)
    return;
  ProcessNames p = { r->process_names_written, n };
  (void) pp_recorder_write_locked (r->rec, write_process_name_range, &p, NULL, NULL);
  r->process_names_written = n;
}

int
pipescope_process_step (void)
{
  pthread_rwlock_rdlock (&process_lock);
  int step = process_rank != NULL ? atomic_load_explicit (&process_step, memory_order_relaxed) : -1;
  pthread_rwlock_unlock (&process_lock);
  return step;
}

uint32_t
pipescope_process_name (const char *name)
{
  char cut[64];
  uint32_t id = 0;
  if (name == NULL || name[0] == '\0')
    return 0;
  snprintf (cut, sizeof cut, "%s", name);
  pthread_mutex_lock (&names_lock);
  uint32_t n = atomic_load_explicit (&n_process_names, memory_order_relaxed);
  for (uint32_t k = 0; k < n && id == 0; k++)
    if (strcmp (process_names[k], cut) == 0)
      id = FOREIGN_PROCESS_NAME_BASE + k;
  if (id == 0 && n < PIPESCOPE_PROCESS_NAMES)
    {
      memcpy (process_names[n], cut, sizeof cut);
      atomic_store_explicit (&n_process_names, n + 1, memory_order_release);
      id = FOREIGN_PROCESS_NAME_BASE + n;
    }
  pthread_mutex_unlock (&names_lock);
  return id;
}

int
pipescope_process_span (int kind, uint32_t name_id, int stage, int microbatch, int step, int peer,
                        uint64_t bytes, int device, uint32_t stream, int64_t start_ns, int64_t end_ns)
{
  PpSpan s;
  int rc = -1;
  if (kind < 0 || kind >= PP_N_SPAN_KINDS || kind == PP_SPAN_OVERLAP_F_B || end_ns < start_ns
      || (name_id != 0 && (name_id < FOREIGN_PROCESS_NAME_BASE
                           || name_id >= FOREIGN_PROCESS_NAME_BASE + atomic_load (&n_process_names))))
    return -1;
  memset (&s, 0, sizeof s);
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.bytes = bytes;
  s.stage = stage < 0 ? -1 : stage;
  s.microbatch = microbatch < 0 ? -1 : microbatch;
  s.step = step < 0 ? 0 : step;
  s.name_id = name_id;
  s.kind = (uint16_t) kind;
  s.device = device < 0 || device > 0xffff ? 0xffff : (uint16_t) device;
  s.stream = stream;
  s.peer_rank = peer < 0 ? -1 : peer;
  pthread_rwlock_rdlock (&process_lock);
  if (process_rank != NULL)
    {
      s.rank = process_rank->rank;
      rc = pp_probe_record_span (process_rank->probe, &s) ? 0 : -1;
    }
  pthread_rwlock_unlock (&process_lock);
  return rc;
}
