/* pipescope-cli profile — runs a command (a PyTorch job: `torchrun ...
 * train.py`, `python train.py`, `mpirun ... python train.py`) with
 * pipescope's Python hook loaded into every Python process it starts,
 * through the environment the command inherits, as `nsys profile` does.
 *
 * The environment: PYTHONPATH gets the hook's sitecustomize folder first
 * (it loads pipescope.torch once a process imports
 * torch.distributed.pipelining), PIPESCOPE_JOB the job's name (every rank
 * process registers as NAME.rR under it), PIPESCOPE_LIB the probe library,
 * PIPESCOPE_TRACE and PIPESCOPE_JOB_ID where the ranks' files go and whose
 * they are (each rank writes PATH.ID.rankR, ID in its header too; merged
 * into PATH when the command ends: "the run's rank files" below).  The
 * command ends with profile (a parent-death signal), killed or not.
 *
 * This process is the job's collector: it registers as NAME, finds the
 * ranks in the registry as they open, reads each rank's live stream and
 * serves them all as one stream (one address for a viewer; TCP too with
 * --listen).  A slow collector never slows a rank: each rank's server drops
 * and counts for it as for any viewer.  The command's exit status, output
 * and results are the command's own.
 *
 * Ranks on other hosts are not in this host's registry: with a --listen
 * address they can reach, PIPESCOPE_COLLECT and PIPESCOPE_COLLECT_TOKEN
 * tell every rank where the collector is, and a rank that finds no
 * collector in its own registry pushes its stream to that endpoint (the
 * viewers' one, "PIPESCOPE 1 <token> push" first), where it is read as a
 * local rank's is.  mpirun forwards no such variable to other hosts by
 * itself: the names go into its mca_base_env_list (docs/jobs.md). */
#include "cli-commands.h"
#include "cli-common.h"
#include "pp-timeline-model.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli-plan.h"
#include "pp-analysis.h"
#include "pp-live.h"
#include "pp-registry.h"
#include "pp-simulate.h"
#include "pp-trace.h"
#include "pp-why.h"

/* The job's processes (streams, and rank files TRACE.ID.rank<G>), G below
 * it; a pipeline rank's plan, rank below it too. */
#define PROFILE_MAX_RANKS 4096
/* A stream's span names move into a range of their own: its index + 1
 * above this many bits (4096 streams x 2^19 names fit 32 bits). */
#define PROFILE_NAME_BITS 19
#define PROFILE_SCAN_MS   100
#define PROFILE_DRAIN_S   10     /* after the command ends, how long ranks' streams may take to end */
#define PROFILE_PLAN_MS   5000   /* how often the live stream's plan is timed again */
#define PROFILE_SPANS_MAX 65536  /* blocks and transfers kept for it (the newest) */
#define PROFILE_PUSH_QUEUE 64    /* pushed streams taken, not yet read (the next scan reads them) */

static void
profile_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli profile [OPTION...] -- COMMAND [ARG...]\n"
         "\n"
         "Runs COMMAND with pipescope's hook in every Python process it starts\n"
         "(torchrun, python, mpirun ... python): each rank of a\n"
         "torch.distributed.pipelining, megatron-core or DeepSpeed pipe engine\n"
         "job records its blocks, transfers, waits, steps, losses and plan, with\n"
         "nothing changed in the job's code.  The\n"
         "ranks form one job that 'jobs', 'record', 'info' and the app see as one\n"
         "run, served by this process while the command runs.  The exit status\n"
         "is the command's, or 1 when it is 0 but the trace promised could not be\n"
         "written (one line says why, with the command's status).\n"
         "\n"
         "  --trace FILE          write the job's trace (each process writes\n"
         "                        FILE.ID.rankG, G its global rank, ID this run's;\n"
         "                        merged into FILE\n"
         "                        at the end); default NAME.pptrace in the\n"
         "                        current folder\n"
         "  --no-trace            keep no trace: watch it live only\n"
         "  --name NAME           the job's name (default pytorch-PID)\n"
         "  --listen HOST:PORT    serve the job on TCP too (port 0: any; a token\n"
         "                        is printed, or read from --token-file)\n"
         "  --token-file FILE     the TCP token, from a file only you can read\n"
         "\n"
         "Example:\n"
         "  pipescope-cli profile --trace job.pptrace -- torchrun --nproc-per-node 2 train.py\n", out);
}

/* ---- where the hook is ------------------------------------------------------ */

static bool
is_file (const char *p)
{
  struct stat st;
  return stat (p, &st) == 0 && S_ISREG (st.st_mode);
}

static bool
is_dir (const char *p)
{
  struct stat st;
  return stat (p, &st) == 0 && S_ISDIR (st.st_mode);
}

/* The probe library and the Python package: the environment's, else the
 * build tree's (this binary in BUILD/app/cli), else the installed ones. */
static int
find_hook (char *lib, size_t lib_size, char *py, size_t py_size)
{
  char exe[PATH_MAX - 64];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 64);
  const char *env_lib = getenv ("PIPESCOPE_LIB"), *env_py = getenv ("PIPESCOPE_PYTHON");

  lib[0] = py[0] = '\0';
  if (n > 0)
    {
      exe[n] = '\0';
      char *slash = strrchr (exe, '/');
      if (slash)
        *slash = '\0';
      snprintf (lib, lib_size, "%s/../../probe/libpipescope-probe.so", exe);
      if (!is_file (lib))
        snprintf (lib, lib_size, "%s/libpipescope-probe.so.1", PP_INSTALL_LIBDIR);
    }
  if (env_lib && env_lib[0])
    snprintf (lib, lib_size, "%s", env_lib);
  snprintf (py, py_size, "%s", PP_SOURCE_PYTHON_DIR);
  if (!is_dir (py))
    snprintf (py, py_size, "%s", PP_INSTALL_PYTHON_DIR);
  if (env_py && env_py[0])
    snprintf (py, py_size, "%s", env_py);
  if (!is_file (lib))
    {
      if (env_lib && env_lib[0])
        fprintf (stderr, "pipescope-cli: error: PIPESCOPE_LIB=%s: no such file\n", lib);
      else
        fprintf (stderr, "pipescope-cli: error: the probe library is not at %s (set PIPESCOPE_LIB)\n", lib);
      return 2;
    }
  char probe[PATH_MAX];
  snprintf (probe, sizeof probe, "%s/pipescope/_autoload/sitecustomize.py", py);
  if (!is_file (probe))
    {
      fprintf (stderr, "pipescope-cli: error: the Python hook is not at %s (set PIPESCOPE_PYTHON)\n", py);
      return 1;
    }
  char *real = realpath (lib, NULL);
  if (real)
    {
      snprintf (lib, lib_size, "%s", real);
      free (real);
    }
  return 0;
}

/* ---- the collector ------------------------------------------------------------ */

typedef struct Collector Collector;

typedef struct {
  Collector    *c;
  PpLiveClient *client;
  pthread_t     thread;
  int           index;
  int32_t       pid;          /* 0: pushed from another host */
  volatile int  done;
  volatile int  stop;         /* the command ended long ago: stop waiting for more */
  char          name[96];
  /* a pushed stream's clock, as its rank measured it against ours over
   * the push (its last CLOCK_OFFSET), for the closing lines */
  bool          have_clock;
  int32_t       clock_rank;
  int64_t       clock_offset;
  /* its process's place on the job's mesh (trace format 1.4), for the
   * closing line's count */
  bool          have_place;
  PpTraceProcess place;
} RankStream;

struct Collector {
  PpLiveServer   *server;
  PpTraceWriter  *w;
  pthread_mutex_t lock;
  bool            described;
  RankStream     *ranks[PROFILE_MAX_RANKS];
  int             n_ranks;
  char            job[64];
  uint64_t        spans;       /* served, for the closing line */
  /* for the live plan: the description and the newest blocks and transfers */
  PpTraceDescription desc;
  bool            have_desc, dirty;
  PpSpan         *kept;
  size_t          n_kept;
  /* and each rank's plan, the last it sent (what it will run: a schedule
   * loaded from CSV has no name pipescope could rebuild it from) */
  PpTracePlanAction *plan[PROFILE_MAX_RANKS];
  size_t          n_plan[PROFILE_MAX_RANKS];
  /* the timed plan served last (for the closing line), served_ranks of them */
  PpTracePlanAction **served;
  size_t         *n_served;
  int             served_ranks;
  /* streams pushed by ranks of other hosts, taken on the server's thread,
   * read from the next scan on (under lock) */
  struct { PpLiveClient *client; char peer[96]; } pushed[PROFILE_PUSH_QUEUE];
  int             n_pushed, n_pushed_total;
};

/* The collector registers before any rank has said which schedule it
 * runs ("pytorch"): once the first rank's description comes, its entry is
 * written again (whole, atomically, as pp_registry_add_in writes every
 * entry) with that schedule, which 'jobs' and the app's attach list show. */
static void
register_schedule (Collector *c, const char *schedule)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  const char *sock = c->server ? pp_live_server_socket_path (c->server) : NULL;
  char dir[PATH_MAX];

  if (sock == NULL || schedule[0] == '\0' || (size_t) snprintf (dir, sizeof dir, "%s", sock) >= sizeof dir
      || strrchr (dir, '/') == NULL)
    return;
  *strrchr (dir, '/') = '\0';   /* the entry lies beside the socket */
  if (pp_registry_list (&jobs, &n, NULL) != PP_OK)
    return;
  for (size_t i = 0; i < n; i++)
    if (jobs[i].pid == (int32_t) getpid () && strcmp (jobs[i].name, c->job) == 0)
      {
        snprintf (jobs[i].schedule, sizeof jobs[i].schedule, "%s", schedule);
        pp_registry_add_in (dir, &jobs[i], NULL);
        break;
      }
  free (jobs);
}

/* One rank's stream into the job's: its description only if none came yet,
 * its span names moved into a range of their own (ids are per process). */
static void
collect_item (RankStream *rs, PpTraceItem *it)
{
  Collector *c = rs->c;
  PpError err = { 0 };
  uint32_t base = (uint32_t) (rs->index + 1) << PROFILE_NAME_BITS;

  if (it->type == PP_TRACE_ITEM_STRING)
    {
      if (it->string.id >= (1u << PROFILE_NAME_BITS))
        return;
      it->string.id += base;
    }
  else if (it->type == PP_TRACE_ITEM_SPAN)
    it->span.name_id = it->span.name_id && it->span.name_id < (1u << PROFILE_NAME_BITS)
                       ? it->span.name_id + base : 0;
  if (it->type == PP_TRACE_ITEM_PROCESS)
    {
      rs->have_place = true;
      rs->place = it->process_info;
    }
  if (it->type == PP_TRACE_ITEM_CLOCK_OFFSET && rs->pid == 0)
    {
      rs->have_clock = true;
      rs->clock_rank = it->clock_offset.rank;
      rs->clock_offset = it->clock_offset.offset_ns;
    }
  pthread_mutex_lock (&c->lock);
  if (it->type != PP_TRACE_ITEM_DESCRIPTION || !c->described)
    {
      if (it->type == PP_TRACE_ITEM_DESCRIPTION)
        c->described = true;
      if (pp_trace_write_item (c->w, it, &err) == PP_OK)
        c->spans += it->type == PP_TRACE_ITEM_SPAN;
      if (it->type == PP_TRACE_ITEM_DESCRIPTION)
        {
          c->desc = *it->description;
          c->have_desc = true;
          register_schedule (c, c->desc.schedule);
        }
    }
  if (it->type == PP_TRACE_ITEM_PLAN && c->kept != NULL && !it->plan.has_timeline
      && it->plan.rank >= 0 && it->plan.rank < PROFILE_MAX_RANKS)
    {
      int r = it->plan.rank;
      PpTracePlanAction *a = malloc ((it->plan.n_actions + 1) * sizeof *a);
      if (a != NULL)
        {
          memcpy (a, it->plan.actions, it->plan.n_actions * sizeof *a);
          free (c->plan[r]);
          c->plan[r] = a;
          c->n_plan[r] = it->plan.n_actions;
          c->dirty = true;
        }
    }
  /* the live plan is timed with one replica's blocks, as the timeline
   * shows one (its first place: dp 0, tp 0, ...); other replicas' would
   * count every block twice */
  bool first_replica = true;
  for (int d = PP_TRACE_MESH_DP; rs->have_place && d < PP_TRACE_MESH_DIMS; d++)
    first_replica &= rs->place.coord[d] == 0;
  if (it->type == PP_TRACE_ITEM_SPAN && c->kept != NULL && first_replica
      && (pp_span_kind_is_block (it->span.kind) || (it->span.kind >= PP_SPAN_SEND_F && it->span.kind <= PP_SPAN_RECV_B)
          || pp_analysis_span_counts (it->span.kind)))
    {
      if (c->n_kept == PROFILE_SPANS_MAX)
        {
          /* the older half goes: the plan is timed by the newest steps */
          memmove (c->kept, c->kept + PROFILE_SPANS_MAX / 2, (PROFILE_SPANS_MAX / 2) * sizeof *c->kept);
          c->n_kept = PROFILE_SPANS_MAX / 2;
        }
      c->kept[c->n_kept++] = it->span;
      c->dirty = true;
    }
  pthread_mutex_unlock (&c->lock);
}

static void *
rank_thread (void *arg)
{
  RankStream *rs = arg;
  PpTraceItem it;
  PpError err = { 0 };
  unsigned since_flush = 0;

  for (;;)
    {
      PpStatus st = rs->stop ? PP_EIO : pp_live_client_next (rs->client, &it, 50, &err);
      if (st != PP_OK)
        {
          /* a local rank's stream is its own process's; a pushed one came
           * over the network and may be anything: say why it went */
          if (rs->pid == 0 && !rs->stop)
            fprintf (stderr, "pipescope-cli: profile: %s refused: %s (what it sent before is kept)\n",
                     rs->name, err.msg);
          break;
        }
      if (it.type == PP_TRACE_ITEM_END)
        {
          if (!it.need_more)
            break;
          if (since_flush)
            {
              pthread_mutex_lock (&rs->c->lock);
              pp_trace_writer_flush (rs->c->w, NULL);
              pthread_mutex_unlock (&rs->c->lock);
              since_flush = 0;
            }
          continue;
        }
      collect_item (rs, &it);
      if (++since_flush >= 256 || it.type == PP_TRACE_ITEM_STEP_MARKER)
        {
          pthread_mutex_lock (&rs->c->lock);
          pp_trace_writer_flush (rs->c->w, NULL);
          pthread_mutex_unlock (&rs->c->lock);
          since_flush = 0;
        }
    }
  pthread_mutex_lock (&rs->c->lock);
  pp_trace_writer_flush (rs->c->w, NULL);
  pthread_mutex_unlock (&rs->c->lock);
  rs->done = 1;
  return NULL;
}

/* Serves plan (the collector's thread only; the lock not held) and keeps
 * it for the closing line. */
static void
serve_plan (Collector *c, PpTracePlanAction **plan, size_t *n_plan, int n_ranks)
{
  pthread_mutex_lock (&c->lock);
  if (pp_trace_write_plan (c->w, n_ranks, (const PpTracePlanAction *const *) plan, n_plan, 1, NULL) == PP_OK)
    pp_trace_writer_flush (c->w, NULL);
  pthread_mutex_unlock (&c->lock);
  pp_cli_plan_actions_free (c->served, c->n_served, c->served_ranks);
  c->served = plan;
  c->n_served = n_plan;
  c->served_ranks = n_ranks;
}

/* The live stream's plan, timed by what the ranks measured so far, by the
 * rule the saved trace's is timed by (merge: pp_cli_write_timed_plan):
 * the steps pp-analysis.h counts, their measured costs, the plans'
 * data-parallel actions placed (pp_cli_simulate_measured_plan).  Quietly
 * nothing until a whole step of every rank has come, or when nothing
 * came since the last one. */
static void
live_plan (Collector *c)
{
  PpTraceDescription desc;
  PpSpan *copy = NULL;
  size_t n = 0;
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL, *with_comms = NULL;
  PpSimulation *sim = NULL;
  static PpTracePlanAction *plan[PROFILE_MAX_RANKS];   /* the collector's thread only */
  static size_t n_plan[PROFILE_MAX_RANKS];
  int n_ranks = 0;

  pthread_mutex_lock (&c->lock);
  if (c->dirty && c->have_desc && (copy = malloc (c->n_kept * sizeof *copy + 1)) != NULL)
    {
      memcpy (copy, c->kept, c->n_kept * sizeof *copy);
      n = c->n_kept;
      desc = c->desc;
      c->dirty = false;
      /* the plans as they are now (the lock is not held while analysing) */
      n_ranks = desc.n_ranks > 0 && desc.n_ranks <= PROFILE_MAX_RANKS ? desc.n_ranks : 0;
      for (int r = 0; r < n_ranks; r++)
        {
          free (plan[r]);
          plan[r] = NULL;
          n_plan[r] = 0;
          if (c->plan[r] != NULL && (plan[r] = malloc ((c->n_plan[r] + 1) * sizeof **plan)) != NULL)
            {
              memcpy (plan[r], c->plan[r], c->n_plan[r] * sizeof **plan);
              n_plan[r] = c->n_plan[r];
            }
        }
    }
  pthread_mutex_unlock (&c->lock);
  if (copy == NULL)
    return;
  PpWhyPlans plans = { n_ranks, (const PpTracePlanAction *const *) plan, n_plan };
  PpTracePlanAction **timed = NULL;
  size_t *n_timed = NULL;
  /* max_steps 0: the steps every view counts */
  if (pp_why_analyse_run (&desc, n_ranks > 0 ? &plans : NULL, copy, n, 0, &rep, NULL, &s, NULL) == PP_OK
      && pp_cli_simulate_measured_plan (s, n_ranks > 0 ? &plans : NULL, rep, &with_comms, &sim, NULL, NULL) == PP_OK
      && pp_cli_plan_actions (with_comms ? with_comms : s, sim, 1.0, &timed, &n_timed, NULL) == PP_OK)
    serve_plan (c, timed, n_timed, s->ranks);
  pp_simulation_free (sim);
  pp_schedule_free (with_comms);
  pp_schedule_free (s);
  pp_why_report_free (rep);
  free (copy);
}

/* Once the job's trace is written: its timed plan (the last of each rank)
 * served live too, so that a viewer still attached ends with the plan the
 * saved trace holds; false when it has none. */
static bool
serve_saved_plan (Collector *c, const char *trace)
{
  PpError err = { 0 };
  PpTraceReader *rd = pp_trace_reader_new_path (trace, &err);
  PpTraceItem it;
  int n_ranks = c->have_desc && c->desc.n_ranks > 0 && c->desc.n_ranks <= PROFILE_MAX_RANKS ? c->desc.n_ranks : 0;
  PpTracePlanAction **plan = n_ranks ? calloc ((size_t) n_ranks, sizeof *plan) : NULL;
  size_t *n_plan = n_ranks ? calloc ((size_t) n_ranks, sizeof *n_plan) : NULL;
  bool ok = rd != NULL && plan != NULL && n_plan != NULL;

  while (ok && pp_trace_reader_next (rd, &it, &err) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_PLAN && it.plan.has_timeline && it.plan.rank >= 0 && it.plan.rank < n_ranks)
      {
        int r = it.plan.rank;
        free (plan[r]);
        n_plan[r] = 0;
        if ((plan[r] = malloc ((it.plan.n_actions + 1) * sizeof **plan)) == NULL)
          ok = false;
        else
          {
            memcpy (plan[r], it.plan.actions, it.plan.n_actions * sizeof **plan);
            n_plan[r] = it.plan.n_actions;
          }
      }
  pp_trace_reader_free (rd);
  for (int r = 0; ok && r < n_ranks; r++)
    ok = plan[r] != NULL;
  if (!ok)
    {
      pp_cli_plan_actions_free (plan, n_plan, n_ranks);
      return false;
    }
  serve_plan (c, plan, n_plan, n_ranks);
  return true;
}

/* Whether a process of the job ran in a replica past the first (dp, tp,
 * cp or ep not 0): a job of replicas. */
static bool
has_replicas (Collector *c)
{
  for (int k = 0; k < c->n_ranks; k++)
    for (int d = PP_TRACE_MESH_DP; c->ranks[k]->have_place && d < PP_TRACE_MESH_DIMS; d++)
      if (c->ranks[k]->place.coord[d] != 0)
        return true;
  return false;
}

/* The closing line of what was served live, by pp-analysis.h's rule:
 * the steps analysed, the median step, each rank's measured bubble a step
 * and its bubble of the plan at measured costs, as `info` prints them for
 * the saved trace.  A job of replicas, its trace saved: that trace's
 * steps (pp_timeline_model_step_analysis: its median copy's, as info's and
 * the app's), not the first replica's the live plan was timed with. */
static void
print_live_summary (Collector *c, const char *saved)
{
  PpAnalysisSteps a;
  char what[160], pc[32];
  int n_ranks = c->have_desc && c->desc.n_ranks > 0 ? c->desc.n_ranks : 0;
  const PpSpan *rows[1] = { c->kept };
  size_t n[1] = { c->n_kept };

  if (c->kept == NULL || n_ranks == 0)
    return;
  if (saved != NULL && has_replicas (c))
    {
      PpTimelineModel *m = pp_timeline_model_new_from_file (saved, NULL);
      if (m == NULL)
        return;
      pp_timeline_model_step_analysis (m, &a);
      pp_timeline_model_free (m);
    }
  else if (pp_analysis_steps (rows, n, 1, n_ranks, 0, &a, NULL) != PP_OK)
    return;
  if (a.n_steps > 0)
    {
      fprintf (stderr, "pipescope-cli: profile: live: %s; median step %.3f ms; " PP_ANALYSIS_MEASURED_LABEL ":",
               pp_analysis_describe_steps (&a, what, sizeof what), a.median_step / 1e6);
      for (int r = 0; r < a.n_ranks; r++)
        fprintf (stderr, "%s rank %d %s", r ? "," : "", r, pp_analysis_format_percent (pc, sizeof pc, a.bubble[r], 1));
      double *pb = c->served_ranks > 0 ? calloc ((size_t) c->served_ranks, sizeof *pb) : NULL;
      if (pb != NULL && pp_cli_plan_bubbles ((const PpTracePlanAction *const *) c->served, c->n_served,
                                             c->served_ranks, pb) > 0)
        {
          fprintf (stderr, "; bubble, %s:", pp_analysis_plan_label (PP_ANALYSIS_PLAN_MEASURED_COSTS));
          for (int r = 0; r < c->served_ranks; r++)
            fprintf (stderr, "%s rank %d %s", r ? "," : "", r, pp_analysis_format_percent (pc, sizeof pc, pb[r], 1));
        }
      free (pb);
      fputc ('\n', stderr);
    }
  pp_analysis_steps_clear (&a);
}

static bool
start_rank (Collector *c, PpLiveClient *client, int32_t pid, const char *name)
{
  RankStream *rs = calloc (1, sizeof *rs);
  if (rs == NULL)
    return false;
  rs->c = c;
  rs->client = client;
  rs->index = c->n_ranks;
  rs->pid = pid;
  snprintf (rs->name, sizeof rs->name, "%s", name);
  if (pthread_create (&rs->thread, NULL, rank_thread, rs) != 0)
    {
      free (rs);
      return false;
    }
  c->ranks[c->n_ranks++] = rs;
  return true;
}

/* The server's on_push, on its thread: a rank of another host pushes its
 * stream.  Kept for the next scan, which reads it as a local rank's; past
 * the bound of streams, refused in one line. */
static int
take_pushed (void *user, int fd, const void *data, size_t n, const char *peer)
{
  Collector *c = user;
  PpError err = { 0 };
  char label[128];
  bool full;

  pthread_mutex_lock (&c->lock);
  full = c->n_pushed == PROFILE_PUSH_QUEUE || c->n_pushed_total >= PROFILE_MAX_RANKS / 2;
  pthread_mutex_unlock (&c->lock);
  if (full)
    {
      fprintf (stderr, "pipescope-cli: profile: a stream pushed from %s refused: %d streams already\n",
               peer, c->n_pushed_total);
      return -1;
    }
  snprintf (label, sizeof label, "the stream pushed from %s", peer);
  PpLiveClient *client = pp_live_client_new_fd (fd, data, n, label, &err);
  if (client == NULL)
    {
      fprintf (stderr, "pipescope-cli: profile: %s refused: %s\n", label, err.msg);
      return 0;   /* the client closed it */
    }
  pthread_mutex_lock (&c->lock);
  c->pushed[c->n_pushed].client = client;
  snprintf (c->pushed[c->n_pushed].peer, sizeof c->pushed[c->n_pushed].peer, "%s", peer);
  c->n_pushed++;
  c->n_pushed_total++;
  pthread_mutex_unlock (&c->lock);
  return 0;
}

/* Connects to the job's ranks that registered since the last scan, and
 * reads the streams pushed since. */
/* Whether a process's registry entry named entry is the stream named
 * name already read: the same name, or the name with the ".p<G>" a rank
 * takes once placed on the job's mesh (pipescope_rank_place registers it
 * again under it). */
static bool
same_stream (const char *name, const char *entry)
{
  size_t n = strlen (name);
  if (strcmp (name, entry) == 0)
    return true;
  if (strncmp (name, entry, n) != 0 || entry[n] != '.' || entry[n + 1] != 'p' || entry[n + 2] == '\0')
    return false;
  return strspn (entry + n + 2, "0123456789") == strlen (entry + n + 2);
}

static void
scan_ranks (Collector *c)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;

  pthread_mutex_lock (&c->lock);
  int n_pushed = c->n_pushed;
  PpLiveClient *clients[PROFILE_PUSH_QUEUE];
  char peers[PROFILE_PUSH_QUEUE][96];
  for (int i = 0; i < n_pushed; i++)
    {
      clients[i] = c->pushed[i].client;
      memcpy (peers[i], c->pushed[i].peer, sizeof peers[i]);
    }
  c->n_pushed = 0;
  pthread_mutex_unlock (&c->lock);
  for (int i = 0; i < n_pushed; i++)
    {
      char name[96];
      snprintf (name, sizeof name, "the stream pushed from %.70s", peers[i]);
      if (c->n_ranks >= PROFILE_MAX_RANKS || !start_rank (c, clients[i], 0, name))
        pp_live_client_free (clients[i]);
    }
  if (pp_registry_list (&jobs, &n, NULL) != PP_OK)
    return;
  for (size_t i = 0; i < n && c->n_ranks < PROFILE_MAX_RANKS; i++)
    {
      const PpJobInfo *j = &jobs[i];
      bool known = false;
      if (strcmp (j->job, c->job) != 0 || strcmp (j->name, c->job) == 0
          || strncmp (j->endpoint, "unix:", 5) != 0)
        continue;
      for (int k = 0; k < c->n_ranks; k++)
        known |= c->ranks[k]->pid == j->pid && same_stream (c->ranks[k]->name, j->name);
      if (known)
        continue;
      PpLiveClient *client = pp_live_client_connect (j->endpoint + 5, NULL, NULL);
      if (client == NULL)
        continue;   /* not serving yet: the next scan */
      if (!start_rank (c, client, j->pid, j->name))
        pp_live_client_free (client);
    }
  free (jobs);
}

/* ---- the command ---------------------------------------------------------------- */

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t got_signal;

static void
forward_signal (int sig)
{
  got_signal = sig;
  /* Ctrl-C reaches the command from the terminal itself (one process
   * group): the main loop passes it on only if the command is still there
   * a moment later (a SIGINT sent to profile alone).  A kill aimed at
   * profile is passed on at once. */
  if (child_pid > 0 && sig != SIGINT)
    kill ((pid_t) child_pid, sig);
}

/* NCCL_PROFILER_PLUGIN: the NCCL profiler plugin beside the probe library
 * (the build tree's nccl/, or the same folder installed), so that a job's
 * NCCL records its operations and waits into the job's ranks
 * (docs/nccl-plugin.md); a job that names its own plugin keeps it. */
static void
set_nccl_plugin (const char *lib)
{
  char path[PATH_MAX];
  const char *slash = strrchr (lib, '/');
  int dir = slash ? (int) (slash - lib) : 0;
  if (getenv ("NCCL_PROFILER_PLUGIN") != NULL)
    return;
  snprintf (path, sizeof path, "%.*s/nccl/libnccl-profiler-pipescope.so", dir, lib);
  if (!is_file (path))
    snprintf (path, sizeof path, "%.*s/libnccl-profiler-pipescope.so", dir, lib);
  if (slash != NULL && is_file (path))
    setenv ("NCCL_PROFILER_PLUGIN", path, 1);
}

/* The command's environment; PIPESCOPE_TRACE is where the ranks' files go
 * (run: TRACE.ID, each rank writing run.rankR), PIPESCOPE_JOB_ID the id
 * the probe writes into their headers. */
static int
set_env (const char *job, const char *lib, const char *py, const char *run, const char *job_id)
{
  char path[PATH_MAX * 2 + 64];
  const char *old = getenv ("PYTHONPATH");

  snprintf (path, sizeof path, "%s/pipescope/_autoload%s%s", py, old && old[0] ? ":" : "",
            old ? old : "");
  if (setenv ("PYTHONPATH", path, 1) != 0 || setenv ("PIPESCOPE_JOB", job, 1) != 0
      || setenv ("PIPESCOPE_LIB", lib, 1) != 0 || setenv ("PIPESCOPE_PYTHON", py, 1) != 0
      || (run ? setenv ("PIPESCOPE_TRACE", run, 1) : unsetenv ("PIPESCOPE_TRACE")) != 0
      || (run ? setenv ("PIPESCOPE_JOB_ID", job_id, 1) : unsetenv ("PIPESCOPE_JOB_ID")) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot set the command's environment: %s\n", strerror (errno));
      return 1;
    }
  set_nccl_plugin (lib);
  return 0;
}

/* ---- ranks on other hosts ------------------------------------------------------ */

/* "HOST:PORT" (HOST may be "[v6]" or empty) into its host. */
static void
listen_host (const char *spec, char *host, size_t size)
{
  const char *colon = strrchr (spec, ':');
  size_t n = colon ? (size_t) (colon - spec) : strlen (spec);
  if (n >= 2 && spec[0] == '[' && spec[n - 1] == ']')
    {
      spec++;
      n -= 2;
    }
  snprintf (host, size, "%.*s", (int) n, spec);
}

static bool
is_loopback (const struct sockaddr *sa)
{
  if (sa->sa_family == AF_INET)
    return (ntohl (((const struct sockaddr_in *) sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK (&((const struct sockaddr_in6 *) sa)->sin6_addr);
  return true;
}

/* Whether host names an address of another host's reach: some address it
 * resolves to is not loopback (a name that does not resolve: no). */
static bool
reachable_name (const char *host)
{
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
  struct addrinfo *res = NULL;
  bool ok = false;
  if (getaddrinfo (host, NULL, &hints, &res) != 0)
    return false;
  for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next)
    ok = !is_loopback (ai->ai_addr);
  freeaddrinfo (res);
  return ok;
}

/* Where ranks on other hosts push to: --listen's host with the port it
 * got; for a wildcard (0.0.0.0, ::, none) this host's name where it
 * resolves to an address that is not loopback (Debian maps it to
 * 127.0.1.1), else the first such address of an interface.  "" when the
 * collector listens on loopback only. */
static void
collect_address (const char *listen, int port, char *out, size_t size)
{
  char host[256] = "", name[256] = "";

  out[0] = '\0';
  if (listen == NULL || port <= 0)
    return;
  listen_host (listen, host, sizeof host);
  if (host[0] && strcmp (host, "0.0.0.0") != 0 && strcmp (host, "::") != 0)
    {
      if (reachable_name (host))
        snprintf (out, size, strchr (host, ':') ? "[%s]:%d" : "%s:%d", host, port);
      return;
    }
  if (gethostname (name, sizeof name - 1) == 0 && reachable_name (name))
    {
      snprintf (out, size, "%s:%d", name, port);
      return;
    }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs (&ifs) != 0)
    return;
  for (struct ifaddrs *i = ifs; i && !out[0]; i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || (i->ifa_addr->sa_family == AF_INET6 && strcmp (host, "::") == 0))
        && !is_loopback (i->ifa_addr)
        && getnameinfo (i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof (struct sockaddr_in)
                                                                        : sizeof (struct sockaddr_in6),
                        name, sizeof name, NULL, 0, NI_NUMERICHOST) == 0
        && !(i->ifa_addr->sa_family == AF_INET6 && strchr (name, '%')))
      snprintf (out, size, strchr (name, ':') ? "[%s]:%d" : "%s:%d", name, port);
  freeifaddrs (ifs);
}

static bool
is_mpirun (const char *arg0)
{
  const char *base = strrchr (arg0, '/');
  base = base ? base + 1 : arg0;
  return strcmp (base, "mpirun") == 0 || strcmp (base, "mpiexec") == 0 || strcmp (base, "orterun") == 0;
}

/* A command that may start ranks on other hosts: mpirun, srun, or a
 * launcher told of several nodes. */
static bool
spans_hosts (int argc, char **argv)
{
  const char *base = strrchr (argv[0], '/');
  base = base ? base + 1 : argv[0];
  if (is_mpirun (argv[0]) || strcmp (base, "srun") == 0)
    return true;
  for (int i = 1; i < argc; i++)
    if (strncmp (argv[i], "--nnodes", 8) == 0)
      return true;
  return false;
}

/* The variables a rank on another host needs, those that are set. */
static const char *const forwarded[] = {
  "PYTHONPATH", "PIPESCOPE_JOB", "PIPESCOPE_LIB", "PIPESCOPE_PYTHON", "PIPESCOPE_TRACE",
  "PIPESCOPE_JOB_ID", "PIPESCOPE_COLLECT", "PIPESCOPE_COLLECT_TOKEN", "NCCL_PROFILER_PLUGIN",
};

static void
forwarded_list (char *out, size_t size)
{
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    if (getenv (forwarded[i]) != NULL && len < size)
      len += (size_t) snprintf (out + len, size - len, "%s%s", len ? ";" : "", forwarded[i]);
}

/* mpirun starts the ranks of other hosts through their own daemon, which
 * gets none of our environment but what it is told to forward: the names
 * go into mca_base_env_list (values are taken from here, sent with the
 * launch, never on a command line; checked on OpenMPI 4.1).  OpenMPI
 * refuses a job that gives both -x and that list, so with -x they go as -x
 * NAME; with the list on the command line (--mca mca_base_env_list V),
 * which wins over the variable, into V; else into the variable, after
 * what the user had.  Returns the command's argv (new, or argv itself);
 * NULL when out of memory. */
static char **
forward_env (int argc, char **argv, char **extra_value)
{
  char names[512], value[4096];
  int xi = -1, li = -1;

  *extra_value = NULL;
  if (!is_mpirun (argv[0]))
    return argv;
  forwarded_list (names, sizeof names);
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "-x") == 0 && xi < 0)
        xi = i;
      if ((strcmp (argv[i], "--mca") == 0 || strcmp (argv[i], "-mca") == 0 || strcmp (argv[i], "--gmca") == 0
           || strcmp (argv[i], "-gmca") == 0)
          && i + 2 < argc && strcmp (argv[i + 1], "mca_base_env_list") == 0)
        li = i + 2;
    }
  if (xi < 0 && li < 0)
    {
      const char *old = getenv ("OMPI_MCA_mca_base_env_list");
      snprintf (value, sizeof value, "%s%s%s", old && old[0] ? old : "", old && old[0] ? ";" : "", names);
      setenv ("OMPI_MCA_mca_base_env_list", value, 1);
      return argv;
    }
  size_t n_names = 0;
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    n_names += getenv (forwarded[i]) != NULL;
  char **nv = calloc ((size_t) argc + 2 * n_names + 1, sizeof *nv);
  if (nv == NULL)
    return NULL;
  int k = 0;
  nv[k++] = argv[0];
  if (xi >= 0)
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
      if (getenv (forwarded[i]) != NULL)
        {
          nv[k++] = "-x";
          nv[k++] = (char *) forwarded[i];
        }
  for (int i = 1; i < argc; i++)
    nv[k++] = argv[i];
  if (xi < 0)
    {
      snprintf (value, sizeof value, "%s;%s", argv[li], names);
      *extra_value = strdup (value);
      if (*extra_value == NULL)
        {
          free (nv);
          return NULL;
        }
      nv[li] = *extra_value;
    }
  return nv;
}

/* An executable file, or one in PATH (a name without '/'), as execvp finds it. */
static bool
command_exists (const char *name)
{
  if (strchr (name, '/') != NULL)
    return access (name, X_OK) == 0;
  const char *path = getenv ("PATH");
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;)
    {
      const char *e = strchr (p, ':');
      size_t n = e ? (size_t) (e - p) : strlen (p);
      char full[PATH_MAX];
      if (snprintf (full, sizeof full, "%.*s/%s", (int) n, n ? p : ".", name) < (int) sizeof full
          && access (full, X_OK) == 0 && is_file (full))
        return true;
      p += n + (e != NULL);
      if (e == NULL)
        break;
    }
  return false;
}

/* ---- the run's rank files --------------------------------------------------------
 *
 * Each rank writes TRACE.ID.rankR, ID being this run's job id (16 hex
 * digits, also in each file's header): a run's files never take the names
 * of another's (an earlier run killed before its merge, a run beside this
 * one with the same --trace), and profile merges and removes only files
 * whose header names its own run.  Files other runs left are never
 * touched; profile says where they are and how to merge them. */

#define PROFILE_LEFTOVERS_MAX 4096   /* rank files looked at in the trace's folder */

/* A run's id: random, never 0 (0 is "no run" in a file's header). */
static uint64_t
new_job_id (void)
{
  uint64_t id = 0;
  if (getrandom (&id, sizeof id, 0) != (ssize_t) sizeof id)
    {
      struct timespec ts;
      clock_gettime (CLOCK_REALTIME, &ts);
      id = ((uint64_t) getpid () << 40) ^ (uint64_t) ts.tv_sec * 1000000007u ^ (uint64_t) ts.tv_nsec;
    }
  return id ? id : 1;
}

/* path, relative to this process's folder when it is not absolute: the
 * command may change folder before its ranks open their files. */
static int
absolute_path (const char *path, char *out, size_t size)
{
  char cwd[PATH_MAX];
  if (path[0] == '/')
    return snprintf (out, size, "%s", path) < (int) size ? 0 : -1;
  if (getcwd (cwd, sizeof cwd) == NULL)
    return -1;
  while (path[0] == '.' && path[1] == '/')
    path += 2;
  return snprintf (out, size, "%s%s%s", cwd, strcmp (cwd, "/") ? "/" : "", path) < (int) size ? 0 : -1;
}

/* Whether the trace can be written, before the command runs, not after:
 * not a folder, not a file a running job writes, not a rank file of some
 * run (which the merge would replace), and a folder that takes new files,
 * tried with a name of our own (O_EXCL), never with a name a run's files
 * may have.  2 and one line if not. */
static int
check_writable (const char *given, const char *trace)
{
  struct stat st;
  uint64_t id = 0;
  if (stat (trace, &st) == 0)
    {
      if (S_ISDIR (st.st_mode))
        return pp_cli_usage_error ("--trace %s is a folder: name the trace file (e.g. %s/job.pptrace)",
                                   given, given);
      if (S_ISREG (st.st_mode) && pp_trace_file_in_use (trace))
        return pp_cli_usage_error ("--trace %s: a running job is writing it: give another name", given);
      if (S_ISREG (st.st_mode) && pp_trace_file_job_id (trace, &id, NULL) == PP_OK && id != 0)
        return pp_cli_usage_error ("--trace %s is a rank file of run %016llx, not a merged trace: give "
                                   "the trace another name", given, (unsigned long long) id);
    }
  char probe[PATH_MAX];
  const char *slash = strrchr (trace, '/');
  int dir_len = slash == trace ? 1 : (int) (slash - trace);
  if (snprintf (probe, sizeof probe, "%.*s/.pipescope-probe-XXXXXX", dir_len, trace) >= (int) sizeof probe)
    return pp_cli_usage_error ("--trace %s: the path is too long", given);
  int fd = mkstemp (probe);
  if (fd < 0)
    return pp_cli_usage_error ("--trace %s: cannot write in %.*s: %s", given, dir_len, trace, strerror (errno));
  close (fd);
  unlink (probe);
  return 0;
}

/* A word as a shell reads it back: as is when plain, else in single quotes. */
static void
shell_word (FILE *out, const char *w)
{
  if (w[0] != '\0' && strspn (w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-+=:,@%")
                          == strlen (w))
    {
      fputs (w, out);
      return;
    }
  fputc ('\'', out);
  for (const char *p = w; *p; p++)
    if (*p == '\'')
      fputs ("'\\''", out);
    else
      fputc (*p, out);
  fputc ('\'', out);
}

/* base ends with ".ID", ID being id in hex: the files' names are the run's
 * own, so BASE.rank* names them and them only. */
static bool
base_is_runs (const char *base, uint64_t id)
{
  char tail[20];
  size_t n = strlen (base), t = (size_t) snprintf (tail, sizeof tail, ".%016llx", (unsigned long long) id);
  return id != 0 && n > t && strcmp (base + n - t, tail) == 0;
}

/* How to merge the rank files files[0..n) of base, into merged, or where
 * merged is NULL into a trace of their own beside them (TRACE-ID.pptrace,
 * never this run's trace): the command, for a line of profile's. */
static void
print_merge_command (FILE *out, const char *merged, const char *base, uint64_t id, char *const *files, int n)
{
  char stem[PATH_MAX], own[PATH_MAX + 32];
  size_t len = strlen (base);
  bool runs = base_is_runs (base, id);
  if (merged == NULL)
    {
      snprintf (stem, sizeof stem, "%s", base);
      if (runs)
        stem[len - 17] = '\0';
      len = strlen (stem);
      if (len > 8 && strcmp (stem + len - 8, ".pptrace") == 0)
        stem[len - 8] = '\0';
      if (id != 0)
        snprintf (own, sizeof own, "%s-%016llx.pptrace", stem, (unsigned long long) id);
      else
        snprintf (own, sizeof own, "%s-earlier.pptrace", stem);
      merged = own;
    }
  fputs ("pipescope-cli merge -o ", out);
  shell_word (out, merged);
  if (runs)
    {
      fputc (' ', out);
      shell_word (out, base);
      fputs (".rank*", out);
      return;
    }
  for (int i = 0; i < n; i++)
    {
      fputc (' ', out);
      shell_word (out, files[i]);
    }
}

typedef struct {
  char    *path;
  size_t   base_len;    /* path[0..base_len) is the base, ".rankR" after it */
  long     rank;
  uint64_t id;
  bool     busy;        /* still open for writing by a live process */
} RankFile;

static int
rank_file_cmp (const void *a, const void *b)
{
  const RankFile *x = a, *y = b;
  int c = strncmp (x->path, y->path, x->base_len < y->base_len ? x->base_len : y->base_len);
  if (c == 0 && x->base_len != y->base_len)
    c = x->base_len < y->base_len ? -1 : 1;
  if (c == 0 && x->id != y->id)
    c = x->id < y->id ? -1 : 1;
  return c != 0 ? c : x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* NAME.rankR, R digits: R, else -1. */
static long
rank_of_name (const char *name, size_t *base_len)
{
  const char *dot = strrchr (name, '.');
  if (dot == NULL || dot == name || strncmp (dot, ".rank", 5) != 0 || dot[5] == '\0'
      || strspn (dot + 5, "0123456789") != strlen (dot + 5) || strlen (dot + 5) > 6)
    return -1;
  *base_len = (size_t) (dot - name);
  return atol (dot + 5);
}

/* Says, one line each, which rank files of other runs lie in the trace's
 * folder: a run's (a job id in their headers) and any at the trace's own
 * name.  They are left as they are; the line gives the merge command. */
static void
report_leftovers (const char *trace)
{
  char dir[PATH_MAX];
  const char *slash = strrchr (trace, '/');
  snprintf (dir, sizeof dir, "%.*s", slash == trace ? 1 : (int) (slash - trace), trace);
  DIR *d = opendir (dir);
  if (d == NULL)
    return;
  RankFile *found = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir (d)) != NULL && n < PROFILE_LEFTOVERS_MAX)
    {
      size_t base_len;
      long rank = rank_of_name (e->d_name, &base_len);
      char path[PATH_MAX];
      uint64_t id = 0;
      if (rank < 0 || snprintf (path, sizeof path, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "", e->d_name)
                      >= (int) sizeof path
          || !is_file (path) || pp_trace_file_job_id (path, &id, NULL) != PP_OK)
        continue;
      base_len += strlen (path) - strlen (e->d_name);
      if (id == 0 && !(strlen (trace) == base_len && strncmp (path, trace, base_len) == 0))
        continue;   /* no run's, and not at this trace's name: someone's own files */
      if (n == cap)
        {
          RankFile *more = realloc (found, (size_t) (cap = cap ? 2 * cap : 16) * sizeof *found);
          if (more == NULL)
            break;
          found = more;
        }
      found[n] = (RankFile) { strdup (path), base_len, rank, id, pp_trace_file_in_use (path) != 0 };
      if (found[n].path != NULL)
        n++;
    }
  closedir (d);
  if (n > 0)
    qsort (found, (size_t) n, sizeof *found, rank_file_cmp);
  char **paths = calloc ((size_t) n + 1, sizeof *paths);
  for (int i = 0, j = 0; paths != NULL && i < n; i = j)
    {
      /* one run's files: the same base and the same id */
      bool busy = false;
      for (j = i; j < n && found[j].id == found[i].id && found[j].base_len == found[i].base_len
                  && strncmp (found[j].path, found[i].path, found[i].base_len) == 0; j++)
        {
          paths[j - i] = found[j].path;
          busy |= found[j].busy;
        }
      char base[PATH_MAX], run[40];
      snprintf (base, sizeof base, "%.*s", (int) found[i].base_len, found[i].path);
      if (found[i].id != 0)
        snprintf (run, sizeof run, "run %016llx", (unsigned long long) found[i].id);
      else
        snprintf (run, sizeof run, "run (no job id)");
      if (busy)
        fprintf (stderr, "pipescope-cli: profile: another %s, still running, is writing %d rank file%s in %s "
                 "(not part of this run, left alone); once it ends, merge them with: ", run, j - i,
                 j - i == 1 ? "" : "s", dir);
      else
        fprintf (stderr, "pipescope-cli: profile: an earlier %s left %d rank file%s in %s (not part of this "
                 "run, kept as they are); merge them with: ", run, j - i, j - i == 1 ? "" : "s", dir);
      print_merge_command (stderr, NULL, base, found[i].id, paths, j - i);
      fputc ('\n', stderr);
    }
  for (int i = 0; i < n; i++)
    free (found[i].path);
  free (paths);
  free (found);
}

/* Merges this run's rank files RUN.rankR (RUN = TRACE.ID) into TRACE, its
 * plan timed with the measured costs where it can be, and removes them
 * once merged; when the merge fails they stay, and one line says how to
 * merge them.  What merging prints goes to stderr: the command's stdout is
 * the command's own. */
static int merge_traces_here (const char *trace, const char *run, uint64_t id, int cmd_status);

static int
merge_traces (const char *trace, const char *run, uint64_t id, int cmd_status)
{
  fflush (stdout);
  int saved = dup (STDOUT_FILENO);
  if (saved >= 0)
    dup2 (STDERR_FILENO, STDOUT_FILENO);
  int status = merge_traces_here (trace, run, id, cmd_status);
  fflush (stdout);
  if (saved >= 0)
    {
      dup2 (saved, STDOUT_FILENO);
      close (saved);
    }
  return status;
}

/* The start of profile's line when the trace it promised is not there:
 * the command's own status first, which profile's exit no longer is. */
static void
say_no_trace (int cmd_status)
{
  if (cmd_status > 128)
    fprintf (stderr, "pipescope-cli: profile: the command was killed (signal %d), and no trace was "
             "written: ", cmd_status - 128);
  else
    fprintf (stderr, "pipescope-cli: profile: the command exited %d, but no trace was written: ",
             cmd_status);
}

static int
cmp_rank_file (const void *a, const void *b)
{
  const RankFile *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* This run's rank files RUN.rankG, every G a process may have (global
 * ranks past 4095 too: issue 40), by G, from one listing of the folder
 * (not a stat per possible G); this run's only, by its header too.  Files
 * of the run that merge cannot take (G past PP_TRACE_MAX_PROCESSES) go to
 * *left, said by the caller.  -1 when out of memory or the folder cannot
 * be read (said). */
static int
find_rank_files (const char *run, uint64_t id, RankFile **files, int *n, RankFile **left, int *n_left)
{
  char dir[PATH_MAX];
  const char *slash = strrchr (run, '/'), *base = slash ? slash + 1 : run;
  snprintf (dir, sizeof dir, "%.*s", slash == NULL ? 1 : slash == run ? 1 : (int) (slash - run),
            slash == NULL ? "." : run);
  int cap = 0, cap_left = 0;
  *files = *left = NULL;
  *n = *n_left = 0;
  DIR *d = opendir (dir);
  if (d == NULL)
    {
      fprintf (stderr, "pipescope-cli: profile: cannot read %s for the ranks' files: %s\n", dir, strerror (errno));
      return -1;
    }
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    {
      size_t base_len, len = strlen (base);
      long g = strncmp (e->d_name, base, len) == 0 ? rank_of_name (e->d_name, &base_len) : -1;
      char path[PATH_MAX + 40];
      uint64_t file_id = 0;
      if (g < 0 || base_len != len
          || snprintf (path, sizeof path, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "", e->d_name) >= (int) sizeof path
          || !is_file (path) || pp_trace_file_job_id (path, &file_id, NULL) != PP_OK || file_id != id)
        continue;
      bool ok = g < PP_TRACE_MAX_PROCESSES;
      RankFile **to = ok ? files : left;
      int *k = ok ? n : n_left, *c = ok ? &cap : &cap_left;
      if (*k == *c)
        {
          RankFile *more = realloc (*to, (size_t) (*c = *c ? 2 * *c : 64) * sizeof *more);
          if (more == NULL)
            break;
          *to = more;
        }
      (*to)[*k] = (RankFile) { strdup (path), strlen (path) - strlen (e->d_name) + len, g, id, false };
      if ((*to)[*k].path == NULL)
        break;
      ++*k;
    }
  bool oom = e != NULL;
  closedir (d);
  if (oom)
    fprintf (stderr, "pipescope-cli: profile: out of memory listing the ranks' files in %s\n", dir);
  qsort (*files, (size_t) *n, sizeof **files, cmp_rank_file);
  qsort (*left, (size_t) *n_left, sizeof **left, cmp_rank_file);
  return oom ? -1 : 0;
}

static int
merge_traces_here (const char *trace, const char *run, uint64_t id, int cmd_status)
{
  RankFile *files = NULL, *left = NULL;
  int n_files = 0, n_left = 0, argc = 0, found = 0, status = 1;
  char **argv = NULL;
  if (find_rank_files (run, id, &files, &n_files, &left, &n_left) != 0
      || (argv = calloc ((size_t) n_files + 4, sizeof *argv)) == NULL)
    {
      for (int i = 0; i < n_files; i++)
        free (files[i].path);
      for (int i = 0; i < n_left; i++)
        free (left[i].path);
      free (files);
      free (left);
      say_no_trace (cmd_status);
      fprintf (stderr, "the ranks' files were not merged (said above); they are kept in their folder\n");
      return 1;
    }
  argv[argc++] = "merge";
  argv[argc++] = "-o";
  argv[argc++] = (char *) trace;
  for (int i = 0; i < n_files; i++)
    {
      argv[argc++] = files[i].path;
      found++;
    }
  free (files);
  if (found == 0)
    {
      say_no_trace (cmd_status);
      fprintf (stderr, "no rank wrote a trace (%s.rankG): did the command run a "
               "torch.distributed.pipelining schedule, megatron-core's with "
               "pipeline_model_parallel_size above 1, or a DeepSpeed pipe engine's train_batch?\n", run);
    }
  else
    {
      /* A file size limit (ulimit -f) must fail the write, as a full disk
       * does, not kill profile with its rank files half merged. */
      signal (SIGXFSZ, SIG_IGN);
      bool existed = access (trace, F_OK) == 0;
      fflush (stdout);
      /* merge times the plan with the costs the ranks measured */
      status = pp_cli_merge (argc, argv);
      if (status == 0)
        for (int i = 3; i < argc; i++)
          unlink (argv[i]);
      else
        {
          /* what a failed merge may have begun is no trace: the ranks'
           * files are the run's record */
          if (!existed)
            unlink (trace);
          say_no_trace (cmd_status);
          fprintf (stderr, "the merge failed (said above); the ranks' files are kept: merge them with: ");
          print_merge_command (stderr, trace, run, id, argv + 3, argc - 3);
          fputc ('\n', stderr);
        }
    }
  /* a limit that remains is said, with the files it left out */
  if (n_left > 0)
    {
      fprintf (stderr, "pipescope-cli: profile: %d rank file%s of this run %s a global rank past %d, "
               "which no trace can hold, and %s not merged (kept as %s):", n_left, n_left == 1 ? "" : "s",
               n_left == 1 ? "has" : "have", PP_TRACE_MAX_PROCESSES - 1, n_left == 1 ? "was" : "were",
               n_left == 1 ? "it is" : "they are");
      for (int i = 0; i < n_left; i++)
        {
          fputc (' ', stderr);
          shell_word (stderr, left[i].path);
          free (left[i].path);
        }
      fputc ('\n', stderr);
      status = 1;
    }
  free (left);
  for (int i = 3; i < argc; i++)
    free (argv[i]);
  free (argv);
  return status;
}

static char *
join_args (int argc, char **argv)
{
  size_t len = 1;
  for (int i = 0; i < argc; i++)
    len += strlen (argv[i]) + 1;
  char *s = malloc (len), *p = s;
  if (s == NULL)
    return NULL;
  for (int i = 0; i < argc; i++)
    p += sprintf (p, "%s%s", i ? " " : "", argv[i]);
  *p = '\0';
  return s;
}

int
pp_cli_profile (int argc, char **argv)
{
  static const struct option options[] = {
    { "trace", required_argument, NULL, 't' },
    { "name", required_argument, NULL, 'n' },
    { "listen", required_argument, NULL, 'l' },
    { "token-file", required_argument, NULL, 'T' },
    { "no-trace", no_argument, NULL, 'N' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *trace = NULL, *name = NULL, *listen = NULL, *token_file = NULL;
  char lib[PATH_MAX], py[PATH_MAX], job[64], token[64] = "";
  Collector c;
  PpError err = { 0 };
  int opt, status = 1;
  bool stuck = false, no_trace = false;
  char default_trace[96], trace_abs[PATH_MAX], run_base[PATH_MAX + 20], job_id_hex[20] = "";
  uint64_t job_id = 0;
  char collect[300] = "";
  char **cmd = NULL, **user_cmd = NULL, *cmd_value = NULL;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, "+:h", options, NULL)) != -1)
    switch (opt)
      {
      case 't': trace = optarg; break;
      case 'n': name = optarg; break;
      case 'l': listen = optarg; break;
      case 'T': token_file = optarg; break;
      case 'N': no_trace = true; break;
      case 'h': profile_usage (stdout); return 0;
      case ':': return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
      default:
        return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli profile --help'", argv[optind - 1]);
      }
  if (optind < argc && strcmp (argv[optind], "--") == 0)
    optind++;
  if (optind >= argc)
    return pp_cli_usage_error ("profile needs a command: pipescope-cli profile -- torchrun ... train.py");
  if (name != NULL && (name[0] == '\0' || strlen (name) > 50 || strchr (name, '/') || strchr (name, '\n')))
    return pp_cli_usage_error ("--name '%s': 1 to 50 characters, no '/'", name);
  if (no_trace && trace)
    return pp_cli_usage_error ("--trace and --no-trace: choose one");
  if (token_file && !listen)
    return pp_cli_usage_error ("--token-file goes with --listen");
  if (!command_exists (argv[optind]))
    {
      /* said before anything registers or serves, as a shell says it */
      fprintf (stderr, "pipescope-cli: profile: %s: command not found\n", argv[optind]);
      return 127;
    }
  if (token_file && pp_live_token_from_file (token_file, token, sizeof token, &err) != PP_OK)
    return pp_cli_usage_error ("%s", err.msg);
  if (trace == NULL && !no_trace)
    {
      /* as nsys writes a report: the job's name in the current folder */
      if (name != NULL)
        snprintf (default_trace, sizeof default_trace, "%s.pptrace", name);
      else
        snprintf (default_trace, sizeof default_trace, "pytorch-%ld.pptrace", (long) getpid ());
      trace = default_trace;
    }
  if (trace != NULL)
    {
      /* where the ranks write, whatever folder the command goes to */
      errno = 0;
      if (absolute_path (trace, trace_abs, sizeof trace_abs) != 0)
        return pp_cli_usage_error ("--trace %s: cannot make it an absolute path: %s", trace,
                                   errno ? strerror (errno) : "too long");
      /* fail now, not after the whole job: the folder must take files */
      int st = check_writable (trace, trace_abs);
      if (st != 0)
        return st;
      trace = trace_abs;
      job_id = new_job_id ();
      snprintf (job_id_hex, sizeof job_id_hex, "%016llx", (unsigned long long) job_id);
      snprintf (run_base, sizeof run_base, "%s.%s", trace, job_id_hex);
    }
  if (find_hook (lib, sizeof lib, py, sizeof py) != 0)
    return 2;
  if (trace != NULL)
    report_leftovers (trace);
  if (name)
    snprintf (job, sizeof job, "%s", name);
  else
    snprintf (job, sizeof job, "pytorch-%ld", (long) getpid ());

  memset (&c, 0, sizeof c);
  pthread_mutex_init (&c.lock, NULL);
  c.kept = malloc (PROFILE_SPANS_MAX * sizeof *c.kept);   /* NULL: no live plan */
  snprintf (c.job, sizeof c.job, "%s", job);
  char *cmdline = join_args (argc - optind, argv + optind);
  PpLiveConfig cfg;
  memset (&cfg, 0, sizeof cfg);
  cfg.name = job;
  cfg.schedule = "pytorch";
  cfg.cmdline = cmdline ? cmdline : "";
  cfg.listen = listen;
  cfg.token = token[0] ? token : NULL;
  cfg.job = job;        /* the job's own entry: its ranks are job.rR */
  cfg.rank = 0;
  cfg.n_ranks = 0;
  cfg.on_push = take_pushed;   /* ranks of other hosts, on the viewers' endpoint */
  cfg.push_user = &c;
  c.server = pp_live_server_new (&cfg, &err);
  if (c.server == NULL)
    fprintf (stderr, "pipescope-cli: profile: not serving the job live (%s); the command runs%s\n",
             err.msg[0] ? err.msg : "cannot serve", trace ? " and its trace is written" : "");
  else
    {
      c.w = pp_trace_writer_new_callback (pp_live_server_write, c.server, PP_TRACE_NATIVE, &err);
      if (pp_live_server_token (c.server))
        {
          char host[256];
          listen_host (listen, host, sizeof host);
          fprintf (stderr, "pipescope-cli: profile: serving %s on %s and %s%s%s:%d (token %s)\n", job,
                   pp_live_server_socket_path (c.server), strchr (host, ':') ? "[" : "",
                   host[0] ? host : "0.0.0.0", strchr (host, ':') ? "]" : "",
                   pp_live_server_tcp_port (c.server), pp_live_server_token (c.server));
          collect_address (listen, pp_live_server_tcp_port (c.server), collect, sizeof collect);
        }
      else
        fprintf (stderr, "pipescope-cli: profile: serving %s on %s\n", job,
                 pp_live_server_socket_path (c.server));
    }
  if (set_env (job, lib, py, trace ? run_base : NULL, job_id_hex) != 0)
    goto out;
  if (collect[0] && c.w)
    {
      setenv ("PIPESCOPE_COLLECT", collect, 1);
      setenv ("PIPESCOPE_COLLECT_TOKEN", pp_live_server_token (c.server), 1);
      if (spans_hosts (argc - optind, argv + optind))
        fprintf (stderr, "pipescope-cli: profile: ranks on other hosts push their streams to %s\n", collect);
    }
  else
    {
      unsetenv ("PIPESCOPE_COLLECT");
      unsetenv ("PIPESCOPE_COLLECT_TOKEN");
      if (c.w && spans_hosts (argc - optind, argv + optind))
        fprintf (stderr, "pipescope-cli: profile: ranks on other hosts are recorded to their own files only "
                 "(live, they need --listen on an address they reach)\n");
    }
  user_cmd = argv + optind;   /* merge's getopt moves optind later */
  cmd = forward_env (argc - optind, user_cmd, &cmd_value);
  if (cmd == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }

  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGHUP, &sa, NULL);

  fflush (stdout);
  fflush (stderr);
  pid_t parent = getpid ();
  pid_t pid = fork ();
  if (pid < 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot start %s: %s\n", argv[optind], strerror (errno));
      goto out;
    }
  if (pid == 0)
    {
      signal (SIGINT, SIG_DFL);
      signal (SIGTERM, SIG_DFL);
      signal (SIGHUP, SIG_DFL);
      /* The job ends with profile, also when profile is killed (SIGKILL
       * leaves it no time to pass anything on): SIGTERM, which torchrun
       * and mpirun pass on to their workers.  A profile gone before the
       * prctl cannot send it: then the command does not start. */
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      if (getppid () != parent)
        _exit (128 + SIGTERM);
      execvp (cmd[0], cmd);
      fprintf (stderr, "pipescope-cli: error: cannot run %s: %s\n", argv[optind], strerror (errno));
      _exit (127);
    }
  child_pid = pid;

  int wstatus = 0, sigint_ticks = 0, ticks = 0;
  for (;;)
    {
      pid_t w = waitpid (pid, &wstatus, WNOHANG);
      if (w == pid)
        break;
      if (w < 0 && errno != EINTR)
        {
          wstatus = 1 << 8;
          break;
        }
      if (c.w)
        scan_ranks (&c);
      if (c.w && ++ticks % (PROFILE_PLAN_MS / PROFILE_SCAN_MS) == 0)
        live_plan (&c);
      if (got_signal == SIGINT)
        {
          got_signal = 0;
          sigint_ticks = 1;
        }
      else if (sigint_ticks > 0 && ++sigint_ticks == 2000 / PROFILE_SCAN_MS)
        kill (pid, SIGINT);   /* 2 s on: the command did not get the terminal's */
      struct timespec ts = { 0, PROFILE_SCAN_MS * 1000000L };
      nanosleep (&ts, NULL);
    }
  child_pid = 0;
  status = WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : WIFSIGNALED (wstatus) ? 128 + WTERMSIG (wstatus) : 1;
  if (c.w)
    scan_ranks (&c);   /* streams pushed in the last moments */

  /* The ranks' streams end when their processes do. */
  for (int waited = 0; waited < PROFILE_DRAIN_S * 10; waited++)
    {
      bool all = true;
      for (int k = 0; k < c.n_ranks; k++)
        all &= c.ranks[k]->done != 0;
      if (all)
        break;
      struct timespec ts = { 0, 100000000L };
      nanosleep (&ts, NULL);
    }
  /* a stream that did not end (a rank still there, a pusher that holds
   * its connection): its thread stops waiting within its next 50 ms */
  for (int k = 0; k < c.n_ranks; k++)
    if (!c.ranks[k]->done)
      {
        fprintf (stderr, "pipescope-cli: profile: %s's stream did not end %d s after the command\n",
                 c.ranks[k]->name, PROFILE_DRAIN_S);
        c.ranks[k]->stop = 1;
      }
  for (int waited = 0; waited < 20; waited++)
    {
      bool all = true;
      for (int k = 0; k < c.n_ranks; k++)
        all &= c.ranks[k]->done != 0;
      if (all)
        break;
      struct timespec ts = { 0, 100000000L };
      nanosleep (&ts, NULL);
    }
  /* what it really got: processes, and the mesh their places say */
  int n_placed = 0, n_unread = 0;
  int32_t mesh[PP_TRACE_MESH_DIMS] = { 1, 1, 1, 1, 1 };
  PpTraceProcess *got = calloc ((size_t) c.n_ranks + 1, sizeof *got);
  for (int k = 0; got != NULL && k < c.n_ranks; k++)
    if (c.ranks[k]->have_place)
      {
        got[n_placed++] = c.ranks[k]->place;
        n_unread += (c.ranks[k]->place.flags & PP_TRACE_PROCESS_UNPLACED) != 0;
      }
  /* places the hook could not read: numbered as the merge numbers them */
  if (got != NULL && n_unread > 0)
    pp_trace_number_unplaced (got, (size_t) n_placed, NULL);
  for (int k = 0; got != NULL && k < n_placed; k++)
    for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
      if (got[k].size[d] > mesh[d])
        mesh[d] = got[k].size[d];
  free (got);
  char mesh_note[192] = "";
  if (n_placed > 0)
    {
      static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
      size_t len = (size_t) snprintf (mesh_note, sizeof mesh_note, " (");
      for (int d = 0; d < PP_TRACE_MESH_DIMS && len < sizeof mesh_note; d++)
        if (d <= PP_TRACE_MESH_TP || mesh[d] > 1)
          len += (size_t) snprintf (mesh_note + len, sizeof mesh_note - len, "%s%s %d",
                                    d ? " \u00d7 " : "", dim[d], mesh[d]);
      if (len < sizeof mesh_note && n_unread > 0)
        len += (size_t) snprintf (mesh_note + len, sizeof mesh_note - len, "; the place of %d not read "
                                  "from the job", n_unread);
      if (len < sizeof mesh_note)
        snprintf (mesh_note + len, sizeof mesh_note - len, ")");
    }
  int n_pushed = 0;
  for (int k = 0; k < c.n_ranks; k++)
    {
      n_pushed += c.ranks[k]->pid == 0;
      if (c.ranks[k]->done)
        {
          pthread_join (c.ranks[k]->thread, NULL);
          /* what the pushed rank measured over its push, each offset
           * already in the stream served and in the rank's own file */
          RankStream *rs = c.ranks[k];
          int64_t rtt = 0;
          uint64_t answered = pp_live_client_clock (rs->client, &rtt);
          if (rs->pid == 0 && rs->have_clock)
            fprintf (stderr, "pipescope-cli: profile: rank %d (%s): clock %+.3f ms to this host's, "
                     "measured over the push (least round trip %.3f ms, %llu pings answered)\n",
                     rs->clock_rank, rs->name, (double) rs->clock_offset / 1e6, (double) rtt / 1e6,
                     (unsigned long long) answered);
          else if (rs->pid == 0)
            fprintf (stderr, "pipescope-cli: profile: %s: its clock was not measured (%llu pings "
                     "answered); its times stay on its own host's clock\n", rs->name,
                     (unsigned long long) answered);
          pp_live_client_free (c.ranks[k]->client);
          free (c.ranks[k]);
        }
      else
        stuck = true;   /* its thread still uses the writer, left to the process's exit */
    }
  /* pushed streams the scan never took */
  pthread_mutex_lock (&c.lock);
  for (int i = 0; i < c.n_pushed; i++)
    pp_live_client_free (c.pushed[i].client);
  c.n_pushed = 0;
  pthread_mutex_unlock (&c.lock);
  char pushed_note[64] = "";
  if (n_pushed > 0)
    snprintf (pushed_note, sizeof pushed_note, " (%d pushed from other hosts)", n_pushed);
  fprintf (stderr, "pipescope-cli: profile: %s: %d process%s recorded%s%s, %llu spans served\n", job,
           c.n_ranks, c.n_ranks == 1 ? "" : "es", mesh_note, pushed_note, (unsigned long long) c.spans);
  if (pp_live_server_refused (c.server) > 0)
    fprintf (stderr, "pipescope-cli: profile: %llu TCP connection%s refused (a wrong token, or no token "
             "line within a second)\n", (unsigned long long) pp_live_server_refused (c.server),
             pp_live_server_refused (c.server) == 1 ? "" : "s");
  /* the exit status is the command's, unless the trace profile promised
   * is not there: then not 0 (merge_traces has said why, with the
   * command's status) */
  bool saved = false;
  if (trace != NULL)
    {
      if (merge_traces (trace, run_base, job_id, status) == 0 && is_file (trace))
        {
          fprintf (stderr, "pipescope-cli: profile: trace: %s (open it with: pipescope %s)\n", trace, trace);
          saved = true;
        }
      else if (status == 0)
        status = 1;
    }
  /* live ends as saved: the saved trace's plan, or the last steps' */
  if (c.w && !stuck)
    {
      if (!saved || !serve_saved_plan (&c, trace))
        {
          c.dirty = true;
          live_plan (&c);
        }
      print_live_summary (&c, saved ? trace : NULL);
    }

out:
  if (c.w && !stuck)
    {
      pthread_mutex_lock (&c.lock);
      pp_trace_writer_close (c.w, NULL);
      c.w = NULL;
      pthread_mutex_unlock (&c.lock);
    }
  pp_live_server_free (c.server);
  if (!stuck)
    {
      free (c.kept);
      for (int r = 0; r < PROFILE_MAX_RANKS; r++)
        free (c.plan[r]);
      pp_cli_plan_actions_free (c.served, c.n_served, c.served_ranks);
    }
  free (cmdline);
  if (cmd != NULL && cmd != user_cmd)
    free (cmd);
  free (cmd_value);
  return status;
}
