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
 * into PATH when the command ends: cli-profile-files.c).  The
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
#include "cli-profile-private.h"
#include "cli-commands.h"
#include "cli-common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli-plan.h"
#include "pp-live.h"

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
         "  --hang-after S        when no action has ended on any process for S\n"
         "                        seconds, print where each process is stuck (the\n"
         "                        root everyone waits for, or the deadlock), keep\n"
         "                        the trace with what each was in, end the job\n"
         "                        (SIGTERM to its process group, SIGKILL 10 s\n"
         "                        later) and exit 3 (docs/stuck.md)\n"
         "\n"
         "Example:\n"
         "  pipescope-cli profile --trace job.pptrace -- torchrun --nproc-per-node 2 train.py\n", out);
}

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
    { "hang-after", required_argument, NULL, 'H' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *trace = NULL, *name = NULL, *listen = NULL, *token_file = NULL;
  double hang_after = 0;
  bool hung = false;
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
      case 'H':
        {
          char *end = NULL;
          hang_after = strtod (optarg, &end);
          if (end == optarg || *end != '\0' || !(hang_after > 0) || hang_after > 1e7)
            return pp_cli_usage_error ("--hang-after '%s': seconds, a number above 0", optarg);
          break;
        }
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
      if (hang_after > 0)
        setpgid (0, 0);   /* a group of its own, which --hang-after ends whole */
      if (getppid () != parent)
        _exit (128 + SIGTERM);
      execvp (cmd[0], cmd);
      fprintf (stderr, "pipescope-cli: error: cannot run %s: %s\n", argv[optind], strerror (errno));
      _exit (127);
    }
  child_pid = pid;
  if (hang_after > 0)
    setpgid (pid, pid);   /* as the child does: whichever runs first */

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
      char said[256];
      if (c.w && profile_mark_stuck (&c, said, sizeof said))
        profile_register (&c, NULL, said);
      char stuck_lines[8192];
      if (hang_after > 0 && c.w && profile_stuck (&c, hang_after, stuck_lines, sizeof stuck_lines))
        {
          fputs (stuck_lines, stderr);
          fprintf (stderr, "pipescope-cli: profile: ending the job (SIGTERM, SIGKILL 10 s later)\n");
          fflush (stderr);
          wstatus = profile_end_job (&c, pid, 10);
          hung = true;
          break;
        }
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
  if (hung)
    status = PROFILE_EXIT_STUCK;   /* profile ended it: its own code, whatever the command said */
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
