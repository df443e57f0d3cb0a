/* pipescope-cli profile — runs a command (a PyTorch job: `torchrun ...
 * train.py`, `python train.py`, `mpirun ... python train.py`) with
 * pipescope's Python hook loaded into every Python process it starts,
 * through the environment the command inherits, as `nsys profile` does.
 *
 * The environment: PYTHONPATH gets the hook's sitecustomize folder first
 * (it loads pipescope.torch once a process imports
 * torch.distributed.pipelining), PIPESCOPE_JOB the job's name (every rank
 * process registers as NAME.rR under it), PIPESCOPE_LIB the probe library,
 * PIPESCOPE_TRACE the trace's path (each rank writes PATH.rankR, merged into
 * PATH when the command ends).
 *
 * This process is the job's collector: it registers as NAME, finds the
 * ranks in the registry as they open, reads each rank's live stream and
 * serves them all as one stream (one address for a viewer; TCP too with
 * --listen).  A slow collector never slows a rank: each rank's server drops
 * and counts for it as for any viewer.  The command's exit status, output
 * and results are the command's own. */
#include "cli-commands.h"
#include "cli-common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli-plan.h"
#include "pp-live.h"
#include "pp-registry.h"
#include "pp-simulate.h"
#include "pp-trace.h"
#include "pp-why.h"

#define PROFILE_MAX_RANKS 1024
#define PROFILE_SCAN_MS   100
#define PROFILE_DRAIN_S   10     /* after the command ends, how long ranks' streams may take to end */
#define PROFILE_PLAN_MS   5000   /* how often the live stream's plan is timed again */
#define PROFILE_PLAN_STEPS 4     /* over the newest whole steps */
#define PROFILE_SPANS_MAX 65536  /* blocks and transfers kept for it (the newest) */

static void
profile_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli profile [OPTION...] -- COMMAND [ARG...]\n"
         "\n"
         "Runs COMMAND with pipescope's hook in every Python process it starts\n"
         "(torchrun, python, mpirun ... python): each rank of a\n"
         "torch.distributed.pipelining job records its blocks, transfers, waits,\n"
         "steps, losses and plan, with nothing changed in the job's code.  The\n"
         "ranks form one job that 'jobs', 'record', 'info' and the app see as one\n"
         "run, served by this process while the command runs.  The exit status\n"
         "is the command's.\n"
         "\n"
         "  --trace FILE          write the job's trace (each rank writes\n"
         "                        FILE.rankR; merged into FILE at the end);\n"
         "                        default NAME.pptrace in the current folder\n"
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
      fprintf (stderr, "pipescope-cli: error: the probe library is not at %s (set PIPESCOPE_LIB)\n", lib);
      return 1;
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
  int32_t       pid;
  volatile int  done;
  char          name[64];
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
  uint32_t base = (uint32_t) (rs->index + 1) << 20;

  if (it->type == PP_TRACE_ITEM_STRING)
    {
      if (it->string.id >= (1u << 20))
        return;
      it->string.id += base;
    }
  else if (it->type == PP_TRACE_ITEM_SPAN)
    it->span.name_id = it->span.name_id && it->span.name_id < (1u << 20) ? it->span.name_id + base : 0;
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
  if (it->type == PP_TRACE_ITEM_SPAN && c->kept != NULL
      && (pp_span_kind_is_block (it->span.kind) || (it->span.kind >= PP_SPAN_SEND_F && it->span.kind <= PP_SPAN_RECV_B)))
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
      PpStatus st = pp_live_client_next (rs->client, &it, 50, &err);
      if (st != PP_OK)
        break;
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

/* The live stream's plan, timed by what the ranks measured so far (as
 * write_timed_plan does for the file): quietly nothing until a whole step
 * of every rank has come. */
static void
live_plan (Collector *c)
{
  PpTraceDescription desc;
  PpSpan *copy = NULL;
  size_t n = 0;
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL;
  PpSimulation *sim = NULL;

  pthread_mutex_lock (&c->lock);
  if (c->dirty && c->have_desc && (copy = malloc (c->n_kept * sizeof *copy + 1)) != NULL)
    {
      memcpy (copy, c->kept, c->n_kept * sizeof *copy);
      n = c->n_kept;
      desc = c->desc;
      c->dirty = false;
    }
  pthread_mutex_unlock (&c->lock);
  if (copy == NULL)
    return;
  /* the last few steps: the machine's cores are the job's */
  if (pp_why_analyse_run (&desc, NULL, copy, n, PROFILE_PLAN_STEPS, &rep, NULL, &s, NULL) == PP_OK
      && pp_simulate (s, rep->costs, &sim, NULL) == PP_OK)
    {
      pthread_mutex_lock (&c->lock);
      if (pp_cli_write_plan (c->w, s, sim, 1.0, NULL) == PP_OK)
        pp_trace_writer_flush (c->w, NULL);
      pthread_mutex_unlock (&c->lock);
    }
  pp_simulation_free (sim);
  pp_schedule_free (s);
  pp_why_report_free (rep);
  free (copy);
}

/* Connects to the job's ranks that registered since the last scan. */
static void
scan_ranks (Collector *c)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;

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
        known |= c->ranks[k]->pid == j->pid && strcmp (c->ranks[k]->name, j->name) == 0;
      if (known)
        continue;
      PpLiveClient *client = pp_live_client_connect (j->endpoint + 5, NULL, NULL);
      if (client == NULL)
        continue;   /* not serving yet: the next scan */
      RankStream *rs = calloc (1, sizeof *rs);
      if (rs == NULL)
        {
          pp_live_client_free (client);
          continue;
        }
      rs->c = c;
      rs->client = client;
      rs->index = c->n_ranks;
      rs->pid = j->pid;
      snprintf (rs->name, sizeof rs->name, "%s", j->name);
      if (pthread_create (&rs->thread, NULL, rank_thread, rs) != 0)
        {
          pp_live_client_free (client);
          free (rs);
          continue;
        }
      c->ranks[c->n_ranks++] = rs;
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

static int
set_env (const char *job, const char *lib, const char *py, const char *trace)
{
  char path[PATH_MAX * 2 + 64];
  const char *old = getenv ("PYTHONPATH");

  snprintf (path, sizeof path, "%s/pipescope/_autoload%s%s", py, old && old[0] ? ":" : "",
            old ? old : "");
  if (setenv ("PYTHONPATH", path, 1) != 0 || setenv ("PIPESCOPE_JOB", job, 1) != 0
      || setenv ("PIPESCOPE_LIB", lib, 1) != 0 || setenv ("PIPESCOPE_PYTHON", py, 1) != 0
      || (trace ? setenv ("PIPESCOPE_TRACE", trace, 1) : unsetenv ("PIPESCOPE_TRACE")) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot set the command's environment: %s\n", strerror (errno));
      return 1;
    }
  return 0;
}

/* The job's plan with the costs it measured: the schedule (rebuilt from
 * the description, whose orders are PyTorch's) simulated with the mean
 * measured per-stage costs, appended to the merged trace as timed PLAN
 * frames, which replace the ranks' untimed ones: the app's plan lane, the
 * plan's bubble in Statistics and What if's baseline then work as for a
 * bundled run.  From `part` into `trace` (a new file); 0, or 1 (and the plan left
 * untimed) where the job cannot be analysed (a CSV schedule, no whole step). */
static int
write_timed_plan (const char *part, const char *trace)
{
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL;
  PpSimulation *sim = NULL;
  PpTraceReader *rd = NULL;
  PpTraceWriter *w = NULL;
  PpError err = { 0 };
  PpTraceItem it;
  int status = 1;

  if (pp_why_analyse_trace (part, 0, &rep, NULL, &s, &err) != PP_OK
      || pp_simulate (s, rep->costs, &sim, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: profile: the plan stays untimed: %s\n", err.msg);
      goto out;
    }
  if ((rd = pp_trace_reader_new_path (part, &err)) == NULL
      || (w = pp_trace_writer_new_path (trace, PP_TRACE_NATIVE, &err)) == NULL)
    goto fail;
  for (;;)
    {
      if (pp_trace_reader_next (rd, &it, &err) != PP_OK)
        goto fail;
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (pp_trace_write_item (w, &it, &err) != PP_OK)
        goto fail;
    }
  /* the simulation's times are seconds, as the report's costs */
  if (pp_cli_write_plan (w, s, sim, 1.0, &err) != PP_OK)
    goto fail;
  {
    PpTraceWriter *tmp = w;
    w = NULL;
    if (pp_trace_writer_close (tmp, &err) != PP_OK)
      goto fail;
  }
  printf ("planned %s with the costs it measured: %.3f ms a step\n", s->name, sim->makespan * 1e3);
  status = 0;
  goto out;
fail:
  fprintf (stderr, "pipescope-cli: profile: the timed plan: %s\n", err.msg);
out:
  if (w != NULL)
    {
      pp_trace_writer_close (w, NULL);
      unlink (trace);
    }
  pp_trace_reader_free (rd);
  pp_simulation_free (sim);
  pp_schedule_free (s);
  pp_why_report_free (rep);
  return status;
}

/* Merges the ranks' trace files PATH.rankR into PATH (and removes them),
 * its plan timed with the measured costs where it can be. */
static int
merge_traces (const char *trace)
{
  char timed[PATH_MAX];
  snprintf (timed, sizeof timed, "%s.timing", trace);
  char **argv = calloc (PROFILE_MAX_RANKS + 4, sizeof *argv);
  int argc = 0, found = 0, status = 1;

  if (argv == NULL)
    return 1;
  argv[argc++] = "merge";
  argv[argc++] = "-o";
  argv[argc++] = (char *) trace;
  for (int r = 0; r < PROFILE_MAX_RANKS; r++)
    {
      char p[PATH_MAX];
      snprintf (p, sizeof p, "%s.rank%d", trace, r);
      if (!is_file (p))
        continue;
      argv[argc++] = strdup (p);
      found++;
    }
  if (found == 0)
    fprintf (stderr, "pipescope-cli: profile: no rank wrote a trace (%s.rankR): did the command run a "
             "torch.distributed.pipelining schedule?\n", trace);
  else
    {
      fflush (stdout);
      status = pp_cli_merge (argc, argv);
      if (status == 0)
        {
          for (int i = 3; i < argc; i++)
            unlink (argv[i]);
          /* the merged trace, then the same with the timed plan in its place */
          if (write_timed_plan (trace, timed) == 0 && rename (timed, trace) != 0)
            {
              fprintf (stderr, "pipescope-cli: profile: %s: %s; the plan stays untimed\n", trace,
                       strerror (errno));
              unlink (timed);
            }
        }
    }
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
  char default_trace[96];

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
      /* fail now, not after the whole job: the folder must take files */
      char probe[PATH_MAX];
      snprintf (probe, sizeof probe, "%s.rank0", trace);
      FILE *f = fopen (probe, "w");
      if (f == NULL)
        {
          char *slash = strrchr (trace, '/');
          return pp_cli_usage_error ("--trace %s: cannot write in %.*s: %s", trace,
                                     slash ? (int) (slash - trace) : 1, slash ? trace : ".", strerror (errno));
        }
      fclose (f);
      unlink (probe);
    }
  if (find_hook (lib, sizeof lib, py, sizeof py) != 0)
    return 1;
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
  c.server = pp_live_server_new (&cfg, &err);
  if (c.server == NULL)
    fprintf (stderr, "pipescope-cli: profile: not serving the job live (%s); the command runs%s\n",
             err.msg[0] ? err.msg : "cannot serve", trace ? " and its trace is written" : "");
  else
    {
      c.w = pp_trace_writer_new_callback (pp_live_server_write, c.server, PP_TRACE_NATIVE, &err);
      if (pp_live_server_token (c.server))
        fprintf (stderr, "pipescope-cli: profile: serving %s on %s and %s (token %s)\n", job,
                 pp_live_server_socket_path (c.server), listen, pp_live_server_token (c.server));
      else
        fprintf (stderr, "pipescope-cli: profile: serving %s on %s\n", job,
                 pp_live_server_socket_path (c.server));
    }
  if (set_env (job, lib, py, trace) != 0)
    goto out;

  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGHUP, &sa, NULL);

  fflush (stdout);
  fflush (stderr);
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
      execvp (argv[optind], argv + optind);
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
  for (int k = 0; k < c.n_ranks; k++)
    {
      if (c.ranks[k]->done)
        {
          pthread_join (c.ranks[k]->thread, NULL);
          pp_live_client_free (c.ranks[k]->client);
          free (c.ranks[k]);
        }
      else
        {
          /* a stream that did not end: its thread still uses the writer,
           * which is then left to the process's exit */
          fprintf (stderr, "pipescope-cli: profile: %s's stream did not end %d s after the command\n",
                   c.ranks[k]->name, PROFILE_DRAIN_S);
          stuck = true;
        }
    }
  fprintf (stderr, "pipescope-cli: profile: %s: %d rank%s recorded, %llu spans served\n", job,
           c.n_ranks, c.n_ranks == 1 ? "" : "s", (unsigned long long) c.spans);
  if (trace != NULL && merge_traces (trace) != 0 && status == 0)
    status = 1;
  else if (trace != NULL && is_file (trace))
    printf ("trace: %s (open it with: pipescope %s)\n", trace, trace);

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
    free (c.kept);
  free (cmdline);
  return status;
}
