/* mpi-probe-rank — one rank of a job that is not ours, as a foreign
 * runtime records it through libpipescope-probe.so (probe/pipescope.h),
 * for tests that launch it with mpirun under `pipescope-cli profile`.
 *
 * The rank and the job's size come from mpirun (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE), the job's name and trace from profile
 * (PIPESCOPE_JOB, PIPESCOPE_TRACE: this rank writes PIPESCOPE_TRACE.rankR),
 * as the Python hook takes them.  It records STEPS steps of M forwards and
 * M backwards of its stage, each block MS milliseconds, and prints
 * "rank R on HOST: N blocks" (what it wrote to its own file) on stdout.
 *
 * Usage: mpi-probe-rank [STEPS [M [MS]]]   (default 10 4 5) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipescope.h"

static int
env_int (const char *name, int dflt)
{
  const char *v = getenv (name);
  return v && v[0] ? atoi (v) : dflt;
}

static void
sleep_ms (int ms)
{
  struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
  nanosleep (&ts, NULL);
}

int
main (int argc, char **argv)
{
  int steps = argc > 1 ? atoi (argv[1]) : 10;
  int m = argc > 2 ? atoi (argv[2]) : 4;
  int ms = argc > 3 ? atoi (argv[3]) : 5;
  int rank = env_int ("OMPI_COMM_WORLD_RANK", 0), n_ranks = env_int ("OMPI_COMM_WORLD_SIZE", 1);
  const char *job = getenv ("PIPESCOPE_JOB"), *trace = getenv ("PIPESCOPE_TRACE");
  char path[4096] = "", err[256], host[256] = "?";
  int blocks = 0;

  if (trace && trace[0])
    snprintf (path, sizeof path, "%s.rank%d", trace, rank);
  gethostname (host, sizeof host - 1);
  pipescope_rank *r = pipescope_rank_open (job, rank, n_ranks, "probe-test", path[0] ? path : NULL,
                                           NULL, err, sizeof err);
  if (r == NULL)
    {
      fprintf (stderr, "mpi-probe-rank: %s\n", err);
      return 1;
    }
  pipescope_rank_info (r, host);
  pipescope_describe (r, "1F1B", "cpu", n_ranks, m, 1, "probe-test", "mpi-probe-rank");
  for (int s = 0; s < steps; s++)
    {
      pipescope_step (r, s, 0, pipescope_now_ns ());
      for (int k = 0; k < 2 * m; k++)
        {
          int64_t t0 = pipescope_now_ns ();
          sleep_ms (ms);
          if (pipescope_block (r, k < m ? PIPESCOPE_F : PIPESCOPE_B, rank, k % m, s, t0,
                               pipescope_now_ns ()) == 0)
            blocks++;
        }
      pipescope_step (r, s, 1, pipescope_now_ns ());
    }
  unsigned long long dropped = (unsigned long long) pipescope_dropped (r);
  if (pipescope_rank_close (r, err, sizeof err) != 0)
    {
      fprintf (stderr, "mpi-probe-rank: %s\n", err);
      return 1;
    }
  printf ("rank %d on %s: %d blocks, %llu dropped\n", rank, host, blocks, dropped);
  return 0;
}
