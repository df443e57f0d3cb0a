/* bench-nccl-plugin — what libnccl-profiler-pipescope.so costs NCCL's
 * threads per operation, without a GPU: a network receive as NCCL reports
 * it (the operation, one proxy operation, STEPS steps of three states
 * each: 32 calls), replayed OPS times on the real clock into an open rank;
 * then the same with PIPESCOPE_NCCL_STEP_SPANS=0 (the split only), and
 * with no rank open.  Prints the median of RUNS runs, ns per operation and
 * per call.  Usage: bench-nccl-plugin PLUGIN */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipescope.h"
#include "pp-nccl-abi.h"

static int OPS = 20000;   /* $PP_BENCH_OPS */
#define STEPS 8
#define RUNS  5
#define CALLS (4 + STEPS * 5)   /* op start/stop, proxy start/stop, each step start, 3 states, stop */

static PpNcclProfilerV5 *v6;

static int64_t
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double
one_run (void)
{
  void *ctx = NULL, *op, *px, *st;
  int mask = 0;
  const int states[3] = { PP_NCCL_STEP_RECV_WAIT, PP_NCCL_STEP_RECV_FLUSH_WAIT, PP_NCCL_STEP_RECV_GPU_WAIT };
  PpNcclStateArgsV5 a = { .proxyStep = { 1 << 19 } };
  v6->init (&ctx, 7, &mask, "bench", 2, 2, 1, NULL);
  int64_t t0 = now ();
  for (int k = 0; k < OPS; k++)
    {
      PpNcclDescrV5 d = { .type = PP_NCCL_P2P };
      d.p2p.func = "Recv";
      d.p2p.datatype = "ncclFloat32";
      d.p2p.count = 1 << 20;
      d.p2p.peer = 0;
      v6->startEvent (ctx, &op, &d);
      v6->stopEvent (op);
      PpNcclDescrV5 p = { .type = PP_NCCL_PROXY_OP, .parentObj = op };
      p.proxyOp.pid = getpid ();
      p.proxyOp.peer = 0;
      v6->startEvent (ctx, &px, &p);
      for (int s = 0; s < STEPS; s++)
        {
          PpNcclDescrV5 q = { .type = PP_NCCL_PROXY_STEP, .parentObj = px };
          v6->startEvent (ctx, &st, &q);
          for (int j = 0; j < 3; j++)
            v6->recordEventState (st, states[j], &a);
          v6->stopEvent (st);
        }
      v6->stopEvent (px);
    }
  double ns = (double) (now () - t0) / OPS;
  v6->finalize (ctx);
  return ns;
}

static int
cmp_d (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
median_run (void)
{
  double r[RUNS];
  for (int k = 0; k < RUNS; k++)
    r[k] = one_run ();
  qsort (r, RUNS, sizeof r[0], cmp_d);
  return r[RUNS / 2];
}

int
main (int argc, char **argv)
{
  char dir[] = "/tmp/pp-bench-nccl-XXXXXX", path[256], err[256];
  if (argc != 2 || (v6 = dlsym (dlopen (argv[1], RTLD_NOW), "ncclProfiler_v6")) == NULL)
    {
      fprintf (stderr, "usage: %s PLUGIN (a library with ncclProfiler_v6)\n", argv[0]);
      return 2;
    }
  if (getenv ("PP_BENCH_OPS") != NULL && atoi (getenv ("PP_BENCH_OPS")) > 0)
    OPS = atoi (getenv ("PP_BENCH_OPS"));
  if (mkdtemp (dir) == NULL)
    return 2;
  setenv ("XDG_RUNTIME_DIR", dir, 1);
  snprintf (path, sizeof path, "%s/rank.pptrace", dir);
  const char *label[3] = { "rank open, step spans on", "rank open, split only (PIPESCOPE_NCCL_STEP_SPANS=0)",
                           "no rank open" };
  for (int mode = 0; mode < 3; mode++)
    {
      pipescope_rank *r = NULL;
      if (mode < 2 && (r = pipescope_rank_open (NULL, 0, 1, "bench", path, NULL, err, sizeof err)) == NULL)
        {
          fprintf (stderr, "bench-nccl-plugin: %s\n", err);
          return 1;
        }
      setenv ("PIPESCOPE_NCCL_STEP_SPANS", mode == 1 ? "0" : "1", 1);
      double ns = median_run ();
      printf ("%-52s median of %d: %7.0f ns per receive of %d steps, %5.1f ns per NCCL call\n", label[mode],
              RUNS, ns, STEPS, ns / CALLS);
      if (r != NULL)
        {
          printf ("%-52s dropped %llu\n", "", (unsigned long long) pipescope_dropped (r));
          pipescope_rank_close (r, err, sizeof err);
        }
      unlink (path);
    }
  snprintf (path, sizeof path, "%s/pipescope", dir);   /* the job registry's folder */
  rmdir (path);
  rmdir (dir);
  return 0;
}
