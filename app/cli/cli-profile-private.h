/* cli-profile-private.h — what the files of `pipescope-cli profile`
 * (cli-profile.c: the command; -env.c: the hook and the command's
 * environment; -collect.c: the collector; -hosts.c: ranks on other hosts;
 * -files.c: the run's rank files) take from one another, inside app/cli/. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "pp-live.h"
#include "pp-stuck.h"
#include "pp-trace.h"

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
  /* issue 37: its last OPEN frame (what it is doing now) and when it came
   * (the collector's monotonic clock), under the collector's lock */
  bool          have_open;
  PpTraceOpen   open;
  int64_t       open_at_ns;
  int64_t       last_step_end_ns;   /* its last STEP_MARKER end (its clock); 0 none */
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
  /* the job's processes past PROFILE_MAX_RANKS streams, said (the most
   * said so far): the live view leaves them out, the merge does not */
  int             n_left_out_said;
  /* issue 37: when the job last made progress (an action ended: a span
   * came, or a process's open action changed), the collector's monotonic
   * clock; 0 before the first */
  int64_t         progress_ns;
  /* the last steps' lengths (any process's, its own clock), for 'stuck':
   * runtime/pp-stuck.c's rule, pp_stuck_after_s */
  PpStuckSteps    steps;
  char            stuck_said[256];   /* what the registry entry says now */
};

/* ---- cli-profile-collect.c ---- */

/* Writes the collector's registry entry again with schedule and why the
 * job is stuck ("": not), NULL leaving a field as it is. */
void profile_register (Collector *c, const char *schedule, const char *stuck);

/* ---- cli-profile-stuck.c ---- */

/* profile's own exit status when --hang-after ended a stuck job. */
#define PROFILE_EXIT_STUCK 3
/* A process whose OPEN frames stopped this long ago has no heartbeat. */
#define PROFILE_HEARTBEAT_GONE_S 5

/* Notes what item says of the job's progress and of rs's open action
 * (under the lock). */
void profile_note_progress (RankStream *rs, const PpTraceItem *it);
/* When the job has made no progress for hang_after_s seconds (and made
 * some before): true, with the diagnosis (lines) in line. */
bool profile_stuck (Collector *c, double hang_after_s, char *line, size_t size);
/* What the registry entry must say of whether the job is stuck ('jobs'
 * shows it): no action ended for as long as pp_stuck_after_s says (10
 * median steps and at least 30 s), and its root or cycle; "" when it
 * goes on.
 * True, with the text in out, when that changed (profile_register it). */
bool profile_mark_stuck (Collector *c, char *out, size_t out_size);
/* Ends the command pid (its process group, and each local rank process):
 * SIGTERM, then SIGKILL after grace_s.  Returns the command's wait status. */
int  profile_end_job (Collector *c, pid_t pid, int grace_s);

/* ---- cli-profile-env.c ---- */

/* A regular file at p. */
bool is_file (const char *p);
/* The probe library and the Python package; 0, else an exit status and
 * one line said. */
int find_hook (char *lib, size_t lib_size, char *py, size_t py_size);
/* The command's environment; 0, else 1 and one line said. */
int set_env (const char *job, const char *lib, const char *py, const char *run, const char *job_id);

/* ---- cli-profile-collect.c ---- */

/* The live stream's plan, timed again at the ranks' measured costs. */
void live_plan (Collector *c);
/* The saved trace's timed plan served live too; false when it has none. */
bool serve_saved_plan (Collector *c, const char *trace);
/* The closing lines of what the job was served. */
void print_live_summary (Collector *c, const char *saved);
/* The server's on_push: a stream a rank of another host pushes. */
int take_pushed (void *user, int fd, const void *data, size_t n, const char *peer);
/* Reads the ranks that have opened (in the registry, or pushed) since the
 * last scan. */
void scan_ranks (Collector *c);

/* ---- cli-profile-hosts.c ---- */

/* "HOST:PORT" (HOST may be "[v6]" or empty) into its host. */
void listen_host (const char *spec, char *host, size_t size);
/* Where ranks on other hosts push to; "" when on loopback only. */
void collect_address (const char *listen, int port, char *out, size_t size);
/* A command that may start ranks on other hosts. */
bool spans_hosts (int argc, char **argv);
/* The command's argv with what mpirun must forward; NULL out of memory. */
char **forward_env (int argc, char **argv, char **extra_value);

/* ---- cli-profile-files.c ---- */

/* A run's id: random, never 0. */
uint64_t new_job_id (void);
/* path made absolute against this process's folder; -1 when too long. */
int absolute_path (const char *path, char *out, size_t size);
/* Whether the trace can be written: 0, else 2 and one line said. */
int check_writable (const char *given, const char *trace);
/* One line for each other run's rank files in the trace's folder. */
void report_leftovers (const char *trace);
/* This run's rank files merged into trace (removed once merged); the
 * exit status. */
int merge_traces (const char *trace, const char *run, uint64_t id, int cmd_status);
