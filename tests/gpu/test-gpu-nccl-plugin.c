/* test-gpu-nccl-plugin (suite gpu) — libnccl-profiler-pipescope.so under a
 * real NCCL: one process, one GPU, a communicator of one rank sending to
 * itself (NCCL refuses two ranks on one GPU), ROUNDS grouped send/receive
 * pairs, kernel-channel events on.  The rank's trace read back: every
 * operation recorded once with its bytes and communicator, channel kernels
 * on the host clock inside the run, and the offline split (pp_nccl_match)
 * of each receive against its send, whose totals it prints.
 *
 * Usage: test-gpu-nccl-plugin PLUGIN   (meson passes the built plugin).
 * Exits 77 (SKIP) without a GPU or without libnccl.so.2 (NCCL 2.26 or
 * newer: older ones know no interface the plugin exports). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipescope.h"
#include "pp-event.h"
#include "pp-nccl-match.h"
#include "pp-nccl-split.h"
#include "pp-trace.h"

#define ROUNDS 10
#define COUNT  (1 << 20)   /* floats a message: 4 MiB */

static int (*nccl_version) (int *);
static int (*comm_init_all) (void **, int, const int *);
static int (*comm_destroy) (void *);
static int (*group_start) (void);
static int (*group_end) (void);
static int (*send_) (const void *, size_t, int, int, void *, cudaStream_t);
static int (*recv_) (void *, size_t, int, int, void *, cudaStream_t);

#define NCCL_FLOAT 7   /* ncclFloat32 */

static int failures;
#define EXPECT(cond, ...) \
  do { if (!(cond)) { failures++; printf ("FAIL: " __VA_ARGS__); printf ("\n"); } } while (0)

static char *names[1u << 20];

static const char *
name_of (void *user, uint32_t id)
{
  (void) user;
  return id < (1u << 20) ? names[id] : NULL;
}

int
main (int argc, char **argv)
{
  int n_dev = 0, version = 0;
  char dir[] = "/tmp/pp-gpu-nccl-XXXXXX", path[256], err[256];

  if (argc != 2)
    {
      fprintf (stderr, "usage: %s PLUGIN\n", argv[0]);
      return 2;
    }
  if (cudaGetDeviceCount (&n_dev) != cudaSuccess || n_dev < 1)
    {
      printf ("no GPU here: skipped\n");
      return 77;
    }
  void *nccl = dlopen ("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (nccl == NULL)
    {
      printf ("no libnccl.so.2 here (%s): skipped\n", dlerror ());
      return 77;
    }
  *(void **) &nccl_version = dlsym (nccl, "ncclGetVersion");
  *(void **) &comm_init_all = dlsym (nccl, "ncclCommInitAll");
  *(void **) &comm_destroy = dlsym (nccl, "ncclCommDestroy");
  *(void **) &group_start = dlsym (nccl, "ncclGroupStart");
  *(void **) &group_end = dlsym (nccl, "ncclGroupEnd");
  *(void **) &send_ = dlsym (nccl, "ncclSend");
  *(void **) &recv_ = dlsym (nccl, "ncclRecv");
  if (!nccl_version || !comm_init_all || !comm_destroy || !group_start || !group_end || !send_ || !recv_
      || nccl_version (&version) != 0 || version < 22600)
    {
      printf ("NCCL %d here: the plugin needs 2.26 or newer: skipped\n", version);
      return 77;
    }
  printf ("NCCL %d, plugin %s\n", version, argv[1]);
  setenv ("NCCL_PROFILER_PLUGIN", argv[1], 1);
  setenv ("PIPESCOPE_NCCL_KERNEL", "1", 1);
  if (mkdtemp (dir) == NULL)
    return 2;
  setenv ("XDG_RUNTIME_DIR", dir, 1);
  snprintf (path, sizeof path, "%s/rank.pptrace", dir);
  pipescope_rank *r = pipescope_rank_open (NULL, 0, 1, "nccl-gpu", path, NULL, err, sizeof err);
  if (r == NULL)
    {
      printf ("FAIL: cannot open a rank: %s\n", err);
      return 1;
    }
  pipescope_step (r, 0, 0, pipescope_now_ns ());

  void *comm = NULL, *a = NULL, *b = NULL;
  cudaStream_t stream;
  int dev0 = 0;
  int64_t t0 = pipescope_now_ns ();
  if (cudaSetDevice (0) != cudaSuccess || cudaMalloc (&a, COUNT * 4) != cudaSuccess
      || cudaMalloc (&b, COUNT * 4) != cudaSuccess || cudaStreamCreate (&stream) != cudaSuccess
      || comm_init_all (&comm, 1, &dev0) != 0)
    {
      printf ("FAIL: CUDA or NCCL set-up failed\n");
      return 1;
    }
  for (int k = 0; k < ROUNDS; k++)
    {
      EXPECT (group_start () == 0 && send_ (a, COUNT, NCCL_FLOAT, 0, comm, stream) == 0
              && recv_ (b, COUNT, NCCL_FLOAT, 0, comm, stream) == 0 && group_end () == 0,
              "round %d: send/recv failed", k);
      EXPECT (cudaStreamSynchronize (stream) == cudaSuccess, "round %d: the stream failed", k);
    }
  comm_destroy (comm);   /* the plugin's finalize */
  int64_t t1 = pipescope_now_ns ();
  pipescope_step (r, 0, 1, t1);
  EXPECT (pipescope_rank_close (r, err, sizeof err) == 0, "close: %s", err);

  /* the trace */
  PpError e = { 0 };
  PpTraceItem it;
  PpTraceReader *rd = pp_trace_reader_new_path (path, &e);
  if (rd == NULL)
    {
      printf ("FAIL: %s\n", e.msg);
      return 1;
    }
  size_t n = 0, cap = 1024;
  PpSpan *spans = malloc (cap * sizeof *spans);
  while (pp_trace_reader_next (rd, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_STRING && it.string.id < (1u << 20))
      names[it.string.id] = strdup (it.string.name);
    else if (it.type == PP_TRACE_ITEM_SPAN)
      {
        if (n == cap)
          spans = realloc (spans, (cap *= 2) * sizeof *spans);
        spans[n++] = it.span;
      }
  pp_trace_reader_free (rd);

  int sends = 0, recvs = 0, kernels = 0, kernels_inside = 0, steps = 0;
  uint32_t comm_tag = 0;
  for (size_t i = 0; i < n; i++)
    {
      const char *nm = name_of (NULL, spans[i].name_id);
      if (nm == NULL)
        continue;
      if (strcmp (nm, "nccl:Send") == 0 || strcmp (nm, "nccl:Recv") == 0)
        {
          nm[5] == 'S' ? sends++ : recvs++;
          EXPECT (spans[i].bytes == (uint64_t) COUNT * 4, "%s of %llu bytes", nm,
                  (unsigned long long) spans[i].bytes);
          EXPECT (comm_tag == 0 || spans[i].stream == comm_tag, "two communicators");
          comm_tag = spans[i].stream;
        }
      else if (strcmp (nm, "nccl:kernel") == 0)
        {
          kernels++;
          kernels_inside += spans[i].start_ns >= t0 && spans[i].end_ns <= t1;
        }
      else if (strncmp (nm, "nccl:Send", 9) == 0 || strncmp (nm, "nccl:Recv", 9) == 0)
        steps++;
    }
  printf ("recorded: %d sends, %d receives, %d channel kernels (%d inside the run), %d proxy step states\n",
          sends, recvs, kernels, kernels_inside, steps);
  EXPECT (sends == ROUNDS && recvs == ROUNDS, "%d sends and %d receives recorded, %d each expected", sends,
          recvs, ROUNDS);
  EXPECT (kernels > 0 && kernels_inside == kernels,
          "channel kernels: %d, %d of them inside the run on the host clock", kernels, kernels_inside);

  PpNcclMatchedWait *w = NULL;
  size_t n_w = 0;
  int64_t tot[PP_NCCL_N_PARTS] = { 0 };
  EXPECT (pp_nccl_match (spans, n, name_of, NULL, &w, &n_w, &e) == PP_OK, "match: %s", e.msg);
  for (size_t k = 0; k < n_w; k++)
    tot[w[k].part] += w[k].wait.end_ns - w[k].wait.start_ns;
  printf ("offline split of the receives: %zu parts, peer_late %.1f us, transfer %.1f us\n", n_w,
          tot[PP_NCCL_PART_PEER_LATE] / 1e3, tot[PP_NCCL_PART_TRANSFER] / 1e3);
  EXPECT (n_w > 0, "no receive met its send");
  free (w);
  free (spans);
  unlink (path);
  snprintf (path, sizeof path, "%s/pipescope", dir);   /* the job registry's folder */
  rmdir (path);
  rmdir (dir);
  printf ("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
