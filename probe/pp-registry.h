/* pp-registry.h — running jobs find each other: one small file per job.
 *
 * The directory is $XDG_RUNTIME_DIR/pipescope, or, when that is unset, a
 * private directory pipescope-<uid> in the system's temporary folder
 * ($TMPDIR or /tmp).  It is created with mode 0700; one that exists but is
 * not owned by the user or is open to others is refused (another user could
 * otherwise plant entries or sockets).  A job writes <pid>.job there
 * (atomically: a temporary file, then rename) and serves <pid>.sock beside
 * it; it removes both when it ends.  A job that died leaves a stale entry:
 * readers recognise it (no such process, or a process with another start
 * time, i.e. a reused pid) and skip and remove it.
 *
 * When that directory is refused (another user made it first, or it is open
 * to others), a job registers in a fallback instead: <parent>/<base>.XXXXXX
 * beside it (mkdtemp: a fresh random name, mode 0700), and every reader
 * looks in each such folder that passes the same checks.
 *
 * An entry is trusted only if it is a regular file of ours with no access
 * for group or others, names a live process of ours whose start time
 * (/proc/<pid>/stat) is the one recorded, and names as its socket
 * <dir>/<pid>.sock or none.  Anything else (a FIFO, a link, a forged file)
 * is skipped without blocking.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-status.h"

typedef struct {
  int32_t pid;
  int64_t start_unix_ns;      /* when the job started (wall clock) */
  int64_t proc_start_ticks;   /* the process's start time from /proc/<pid>/stat, to tell a reused pid */
  char    host[64];
  char    name[64];           /* job name: "<schedule>-<pid>" unless given */
  char    schedule[64];
  char    cmdline[1024];
  char    endpoint[512];      /* "unix:/run/user/1000/pipescope/4242.sock" */
  char    tcp[128];           /* "HOST:PORT" when it also listens on TCP, else "" */
  /* One rank of a job of several processes (mpirun): the job's name (its
   * rank 0's, whose stream serves every rank), this entry's rank and the
   * job's ranks; job "" and n_ranks 0 for a job of one process. */
  char    job[64];
  int32_t rank, n_ranks;
  /* issue 37: "" or, in a collector's entry (profile's), why the job is
   * stuck: no action ended on any process for 10 median steps and 30 s,
   * and its root or cycle ("process 3 (pp 1 dp 1) in F mb 2 of step 2"
   * ...); written by the collector as it sees it, read by 'jobs' */
  char    stuck[256];
} PpJobInfo;

/* The registry directory (created if needed) into buf. */
PpStatus pp_registry_dir (char *buf, size_t size, PpError *err);

/* Fills pid, proc_start_ticks and host of the calling process. */
PpStatus pp_registry_self (PpJobInfo *job, PpError *err);

/* Where a job registers: the directory of pp_registry_dir, or when that is
 * refused a private fallback (found or created).  note gets "" or one line
 * saying why the usual directory was refused and which one is used. */
PpStatus pp_registry_dir_for_job (char *buf, size_t size, char *note, size_t note_size,
                                  PpError *err);

/* Writes the entry into pp_registry_dir / into dir (from pp_registry_dir_for_job). */
PpStatus pp_registry_add (const PpJobInfo *job, PpError *err);
PpStatus pp_registry_add_in (const char *dir, const PpJobInfo *job, PpError *err);
/* Removes pid's entry and socket from the directory and every fallback. */
PpStatus pp_registry_remove (int32_t pid, PpError *err);

/* The live jobs, sorted by start time; *jobs is malloc'd (free with free()). */
PpStatus pp_registry_list (PpJobInfo **jobs, size_t *n_jobs, PpError *err);

/* Finds a job by pid ("4242"), by name ("1F1B-4242") or by socket path.
 * Of several entries with one name, one that serves (its socket is there)
 * wins; then the earliest.  The pid of any rank of a job of several
 * processes gives the job (its rank 0's entry, when on this host); a rank
 * alone is its own name ("1F1B-4242.r1") or socket path.
 * PP_EINVAL with a one-line message listing the running jobs if none matches. */
PpStatus pp_registry_find (const char *spec, PpJobInfo *out, PpError *err);

/* How a job whose stream just ended went (info from pp_registry_find):
 * 1 it ended (a job that closes removes its entry on the way out), 0 it
 * died (its process is gone, or a zombie, and its entry is left: killed),
 * -1 unknown (a job over TCP, or still running after wait_ms). */
int      pp_registry_job_ended (const PpJobInfo *info, int wait_ms);
