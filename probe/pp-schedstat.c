/* pp-schedstat.c — the calling thread's run-queue delay and time on a CPU
 * (pp-schedstat.h). */
#define _GNU_SOURCE
#include "pp-schedstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int
pp_schedstat_open (PpSchedstat *s)
{
  s->fd = open ("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (s->fd < 0)
    return -1;
  if (pp_schedstat_run_delay_ns (s) < 0)
    {
      pp_schedstat_close (s);
      return -1;
    }
  return 0;
}

int
pp_schedstat_read (const PpSchedstat *s, int64_t *on_cpu_ns, int64_t *delay_ns)
{
  char buf[96];
  ssize_t n;
  *on_cpu_ns = *delay_ns = -1;
  if (s->fd < 0)
    return -1;
  do
    n = pread (s->fd, buf, sizeof buf - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  /* "<run ns> <delay ns> <slices>\n" */
  char *end;
  errno = 0;
  unsigned long long run = strtoull (buf, &end, 10);
  if (end == buf || *end != ' ' || errno != 0 || run > (unsigned long long) INT64_MAX)
    return -1;
  char *p = end;
  unsigned long long delay = strtoull (p, &end, 10);
  if (end == p || errno != 0 || delay > (unsigned long long) INT64_MAX)
    return -1;
  *on_cpu_ns = (int64_t) run;
  *delay_ns = (int64_t) delay;
  return 0;
}

int64_t
pp_schedstat_run_delay_ns (const PpSchedstat *s)
{
  int64_t on_cpu, delay;
  return pp_schedstat_read (s, &on_cpu, &delay) == 0 ? delay : -1;
}

void
pp_schedstat_close (PpSchedstat *s)
{
  if (s->fd >= 0)
    close (s->fd);
  s->fd = -1;
}
