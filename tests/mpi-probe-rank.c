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
 * Built with MPI, the ranks are a pipeline (GPipe): a forward of
 * micro-batch k starts once the previous rank's forward of k has ended and
 * sent it a message, a backward once the next rank's backward of k has; so
 * a viewer can check that, on one clock, no block starts before the block
 * it depends on ends.  Without MPI each rank records alone.
 *
 * Usage: mpi-probe-rank [STEPS [M [MS]]]   (default 10 4 5) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef PP_HAVE_MPI
#include <mpi.h>
#endif

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

/* The pipeline's dependencies: wait for what peer sent for block (step,
 * kind, mb), or tell peer that block has ended.  No peer (-1), or no MPI:
 * nothing. */
static void
dep_wait (int peer, int tag)
{
#ifdef PP_HAVE_MPI
  int x;
  if (peer >= 0)
    MPI_Recv (&x, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
#else
  (void) peer; (void) tag;
#endif
}

static void
dep_done (int peer, int tag)
{
#ifdef PP_HAVE_MPI
  int x = tag;
  if (peer >= 0)
    MPI_Send (&x, 1, MPI_INT, peer, tag, MPI_COMM_WORLD);
#else
  (void) peer; (void) tag;
#endif
}

int
main (int argc, char **argv)
{
  int steps = argc > 1 ? atoi (argv[1]) : 10;
  int m = argc > 2 ? atoi (argv[2]) : 4;
  int ms = argc > 3 ? atoi (argv[3]) : 5;
  int rank = env_int ("OMPI_COMM_WORLD_RANK", 0), n_ranks = env_int ("OMPI_COMM_WORLD_SIZE", 1);
#ifdef PP_HAVE_MPI
  MPI_Init (&argc, &argv);
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &n_ranks);
#endif
  int prev = rank > 0 ? rank - 1 : -1, next = rank + 1 < n_ranks ? rank + 1 : -1;
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
          int fwd = k < m, tag = (k % m) * 2 + !fwd;
          dep_wait (fwd ? prev : next, tag);
          int64_t t0 = pipescope_now_ns ();
          sleep_ms (ms);
          if (pipescope_block (r, fwd ? PIPESCOPE_F : PIPESCOPE_B, rank, k % m, s, t0,
                               pipescope_now_ns ()) == 0)
            blocks++;
          dep_done (fwd ? next : prev, tag);
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
#ifdef PP_HAVE_MPI
  MPI_Finalize ();
#endif
  return 0;
}
