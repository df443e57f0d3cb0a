/* pp-schedstat.h — how long a thread waited for a CPU, from the kernel.
 *
 * /proc/thread-self/schedstat holds three numbers for the calling thread:
 * nanoseconds run on a CPU, nanoseconds spent runnable on a run queue but
 * not running (the run-queue delay), and timeslices run.  The delay is
 * cumulative, so its difference across a gap between two blocks is the
 * time the rank's thread could have run and did not: the machine ran
 * something else.  A file descriptor opened once names the thread that
 * opened it (thread-self resolves at open), and a pread at offset 0
 * rereads fresh values: one system call a sample, a few microseconds.
 *
 * Kernels without schedstats (CONFIG_SCHEDSTATS off, or a sandbox
 * without /proc) give no file: open fails and the caller records none.
 * No GLib.
 */
#pragma once

#include <stdint.h>

typedef struct {
  int fd;   /* -1: closed, or the kernel has no schedstat */
} PpSchedstat;

/* Opens the calling thread's schedstat.  0, or -1 (s->fd -1) when the
 * kernel offers none. */
int     pp_schedstat_open (PpSchedstat *s);
/* The thread's cumulative run-queue delay in nanoseconds, -1 when closed
 * or unreadable. */
int64_t pp_schedstat_run_delay_ns (const PpSchedstat *s);
/* Both cumulative times of one read (one pread: a sample of both costs
 * what a sample of the delay does): *on_cpu_ns the time run on a CPU,
 * *delay_ns the run-queue delay.  0, or -1 (both -1) when closed or
 * unreadable. */
int     pp_schedstat_read (const PpSchedstat *s, int64_t *on_cpu_ns, int64_t *delay_ns);
void    pp_schedstat_close (PpSchedstat *s);
