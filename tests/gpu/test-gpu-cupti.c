/* The CUPTI collector (probe/pp-cupti.h).
 *
 * Two tests from one program:
 *   test-gpu-cupti --unavailable  (suite unit, runs everywhere): without a GPU
 *     pp_cupti_start fails soft (NULL, PP_EUNSUPPORTED, one line) and every
 *     call takes NULL; with a GPU it starts.
 *   test-gpu-cupti                (suite gpu, exits 77 without a GPU): copies,
 *     memsets and a kernel (PTX, JIT-loaded through the driver entry points of
 *     libcudart: no nvcc, no -lcuda) inside pushed blocks arrive as spans
 *     tagged with their stage / micro-batch / step, on pp_probe_now_ns's
 *     clock, within a flush period, with per-block GPU times.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include "pp-cupti.h"
#include "pp-probe.h"

/* ---- a sink that keeps every span (drain thread writes, test reads) ---- */

typedef struct {
  GMutex  lock;
  GArray *spans;        /* PpSpan */
} Sink;

static Sink sink;

static void
sink_spans (void *user, const PpSpan *s, size_t n)
{
  Sink *k = user;
  g_mutex_lock (&k->lock);
  g_array_append_vals (k->spans, s, (guint) n);
  g_mutex_unlock (&k->lock);
}

static PpProbe *
new_probe (void)
{
  PpProbeConfig cfg = { 0 };
  PpError err = { 0 };
  g_mutex_init (&sink.lock);
  sink.spans = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  cfg.sink.user = &sink;
  cfg.sink.spans = sink_spans;
  PpProbe *p = pp_probe_new (&cfg, &err);
  g_assert_nonnull (p);
  return p;
}

/* Copies of the spans matching (kind, stage); kind -1 = any. */
static GArray *
find_spans (int kind, int stage)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  g_mutex_lock (&sink.lock);
  for (guint i = 0; i < sink.spans->len; i++)
    {
      PpSpan *s = &g_array_index (sink.spans, PpSpan, i);
      if ((kind < 0 || s->kind == kind) && s->stage == stage)
        g_array_append_val (out, *s);
    }
  g_mutex_unlock (&sink.lock);
  return out;
}

static void
clear_spans (void)
{
  g_mutex_lock (&sink.lock);
  g_array_set_size (sink.spans, 0);
  g_mutex_unlock (&sink.lock);
}

static gboolean
have_gpu (char **why)
{
  int n = 0;
  cudaError_t e = cudaGetDeviceCount (&n);
  if (e != cudaSuccess || n <= 0)
    {
      if (why)
        *why = g_strdup_printf ("no CUDA device (cudaGetDeviceCount: %s)",
                                e != cudaSuccess ? cudaGetErrorString (e) : "0 devices");
      return FALSE;
    }
  return TRUE;
}

/* ======================= suite unit: --unavailable ======================= */

static void
assert_one_line_unsupported (PpCupti *c, const PpError *err)
{
  g_assert_null (c);
  g_assert_cmpint (err->status, ==, PP_EUNSUPPORTED);
  g_assert_cmpstr (err->msg, !=, "");
  g_assert_null (strchr (err->msg, '\n'));
  g_assert_true (g_str_has_prefix (err->msg, "GPU tracing unavailable: "));
}

static void
test_start_or_unavailable (void)
{
  PpProbe *probe = new_probe ();
  PpError err = { 0 };

  /* Before any CUDA call, as a job would. */
  PpCupti *c = pp_cupti_start (probe, 0, &err);
  char *why = NULL;
  gboolean gpu = have_gpu (&why);
  g_test_message ("GPU: %s; pp_cupti_start: %s", gpu ? "yes" : why,
                  c ? "started" : err.msg);

  if (gpu)
    {
      if (!c)
        g_error ("pp_cupti_start failed on a GPU machine: %s", err.msg);
      PpError st = { 0 };
      g_assert_cmpint (pp_cupti_status (c, &st), ==, PP_OK);
      pp_cupti_free (c);
    }
  else
    {
      assert_one_line_unsupported (c, &err);
      /* Again: nothing was left half-enabled. */
      PpError err2 = { 0 };
      c = pp_cupti_start (probe, 0, &err2);
      assert_one_line_unsupported (c, &err2);
      g_assert_cmpstr (err2.msg, ==, err.msg);
    }
  g_free (why);
  pp_probe_free (probe);
}

static void
test_turned_off (void)
{
  PpProbe *probe = new_probe ();
  PpError err = { 0 };
  g_setenv ("PIPESCOPE_CUPTI", "0", TRUE);
  PpCupti *c = pp_cupti_start (probe, 0, &err);
  g_unsetenv ("PIPESCOPE_CUPTI");
  assert_one_line_unsupported (c, &err);
  g_assert_nonnull (strstr (err.msg, "PIPESCOPE_CUPTI=0"));

  PpError err2 = { 0 };
  g_assert_null (pp_cupti_start (NULL, 0, &err2));
  g_assert_cmpint (err2.status, ==, PP_EINVAL);
  pp_probe_free (probe);
}

static void
test_null_is_safe (void)
{
  PpError err = { 0 };
  PpCuptiStats st;
  int64_t a = 7, b = 8;

  g_assert_cmpuint (pp_cupti_push_block (NULL, 1, 2, PP_SPAN_F, 3), ==, 0);
  pp_cupti_pop_block (NULL);
  g_assert_false (pp_cupti_block_gpu_time (NULL, 1, &a, &b, NULL));
  g_assert_cmpint (a, ==, 7);
  g_assert_cmpint (b, ==, 8);
  g_assert_cmpint (pp_cupti_flush (NULL, &err), ==, PP_OK);
  g_assert_null (pp_cupti_name (NULL, 1));
  g_assert_cmpuint (pp_cupti_dropped (NULL), ==, 0);
  pp_cupti_get_stats (NULL, &st);
  g_assert_cmpuint (st.flushes, ==, 0);
  g_assert_cmpint (pp_cupti_status (NULL, &err), ==, PP_OK);
  pp_cupti_stop (NULL);
  pp_cupti_free (NULL);
  g_assert_cmpuint (pp_cupti_request_flush (NULL), ==, 0);
  g_assert_true (pp_cupti_wait_flush (NULL, 3, 0));
}

/* The API calls that get records: those that make device records (so their
 * kernels, copies and memsets find their blocks), and few others.  Read from
 * the names of this CUPTI's calls, as pp_cupti_start does. */
static void
test_api_selection (void)
{
  static const struct { bool driver; const char *name; bool traced; } want[] = {
    { false, "cudaLaunchKernel_v7000", true },        /* <<< >>> before CUDA 13 */
    { false, "cudaLaunchKernelExC_v11060", true },    /* NCCL, cuBLASLt */
    { false, "cudaMemcpyAsync_v3020", true },
    { false, "cudaMemcpyPeerAsync_v4000", true },
    { false, "cudaMemsetAsync_v3020", true },
    { false, "cudaMemcpy_v3020", true },
    { false, "cudaEventRecord_v3020", false },
    { false, "cudaStreamWaitEvent_v3020", false },
    { false, "cudaGetLastError_v3020", false },
    { false, "cudaMalloc_v3020", false },
    { false, "cudaStreamSynchronize_v3020", false },
    { true, "cuLaunchKernel", true },
    { true, "cuLaunchKernelEx", true },
    { true, "cuMemcpyDtoDAsync_v2", true },
    { true, "cuMemsetD32Async", true },
    { true, "cuCtxSetCurrent", false },
    { true, "cuEventRecord", false },
    { true, "cuStreamWaitEvent", false },
    { true, "cuMemAlloc_v2", false },
  };
  static const uint32_t size[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
  static const CUpti_CallbackDomain domain[2] = { CUPTI_CB_DOMAIN_RUNTIME_API,
                                                  CUPTI_CB_DOMAIN_DRIVER_API };
  int seen[G_N_ELEMENTS (want)] = { 0 };
  uint32_t named[2] = { 0, 0 }, traced[2] = { 0, 0 };

  /* the same names from the other layer are not that layer's */
  g_assert_false (pp_cupti_traces_api (true, "cudaMemcpyAsync_v3020"));
  g_assert_false (pp_cupti_traces_api (false, "cuMemcpyDtoDAsync_v2"));
  g_assert_false (pp_cupti_traces_api (false, NULL));

  for (int layer = 0; layer < 2; layer++)
    for (uint32_t cbid = 1; cbid < size[layer]; cbid++)
      {
        const char *name = NULL;
        if (cuptiGetCallbackName (domain[layer], cbid, &name) != CUPTI_SUCCESS || name == NULL)
          continue;
        named[layer]++;
        bool t = pp_cupti_traces_api (layer == 1, name);
        traced[layer] += t;
        for (size_t i = 0; i < G_N_ELEMENTS (want); i++)
          if (want[i].driver == (layer == 1) && strcmp (want[i].name, name) == 0)
            {
              seen[i] = 1;
              if (t != want[i].traced)
                g_error ("%s: traced %d, want %d", name, t, want[i].traced);
            }
      }
  g_test_message ("runtime: %u of %u calls traced; driver: %u of %u", traced[0], named[0],
                  traced[1], named[1]);
  for (size_t i = 0; i < G_N_ELEMENTS (want); i++)
    if (!seen[i])
      g_error ("this CUPTI does not name %s", want[i].name);
  /* launches and copies are a small share of either API */
  for (int layer = 0; layer < 2; layer++)
    {
      g_assert_cmpuint (traced[layer], >, 10);
      g_assert_cmpuint (traced[layer] * 4, <, named[layer]);
    }
}

/* ============================ suite gpu ============================ */

/* A kernel that spins for ns nanoseconds on %globaltimer. */
static const char spin_ptx[] =
  ".version 8.0\n"
  ".target sm_75\n"
  ".address_size 64\n"
  ".visible .entry pp_test_spin(.param .u64 pp_test_spin_ns)\n"
  "{\n"
  "  .reg .pred %p<2>;\n"
  "  .reg .b64 %rd<6>;\n"
  "  ld.param.u64 %rd1, [pp_test_spin_ns];\n"
  "  mov.u64 %rd2, %globaltimer;\n"
  "$L_spin:\n"
  "  mov.u64 %rd3, %globaltimer;\n"
  "  sub.s64 %rd4, %rd3, %rd2;\n"
  "  setp.lt.s64 %p1, %rd4, %rd1;\n"
  "  @%p1 bra $L_spin;\n"
  "  ret;\n"
  "}\n";

typedef CUresult (*ModuleLoadDataFn) (CUmodule *, const void *);
typedef CUresult (*ModuleGetFunctionFn) (CUfunction *, CUmodule, const char *);
typedef CUresult (*LaunchKernelFn) (CUfunction, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, unsigned, CUstream, void **, void **);

#define MB32 (32u << 20)

static struct {
  PpProbe     *probe;
  PpCupti     *c;
  cudaStream_t stream;
  void        *dev;
  void        *host;
  CUfunction   spin;
  LaunchKernelFn launch;
} G;

#define CUDA_OK(call)                                                         \
  G_STMT_START {                                                              \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess)                                                    \
      g_error ("%s: %s", #call, cudaGetErrorString (e_));                     \
  } G_STMT_END

static void *
driver_fn (const char *name)
{
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CUDA_OK (cudaGetDriverEntryPointByVersion (name, &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !fn)
    g_error ("driver entry point %s not found (%d)", name, (int) q);
  return fn;
}

static void
setup_cuda (void)
{
  CUDA_OK (cudaSetDevice (0));
  CUDA_OK (cudaFree (NULL));          /* the primary context, current */
  CUDA_OK (cudaStreamCreateWithFlags (&G.stream, cudaStreamNonBlocking));
  CUDA_OK (cudaMalloc (&G.dev, 2 * (size_t) MB32));
  CUDA_OK (cudaMallocHost (&G.host, MB32));

  ModuleLoadDataFn load = driver_fn ("cuModuleLoadData");
  ModuleGetFunctionFn get = driver_fn ("cuModuleGetFunction");
  G.launch = driver_fn ("cuLaunchKernel");
  CUmodule mod;
  CUresult r = load (&mod, spin_ptx);
  if (r != CUDA_SUCCESS)
    g_error ("cuModuleLoadData (PTX JIT): CUresult %d", (int) r);
  r = get (&G.spin, mod, "pp_test_spin");
  if (r != CUDA_SUCCESS)
    g_error ("cuModuleGetFunction: CUresult %d", (int) r);
}

static void
launch_spin (uint64_t ns)
{
  void *args[] = { &ns };
  CUresult r = G.launch (G.spin, 1, 1, 1, 32, 1, 1, 0, (CUstream) G.stream, args, NULL);
  if (r != CUDA_SUCCESS)
    g_error ("cuLaunchKernel: CUresult %d", (int) r);
}

static void
test_gpu_start (void)
{
  PpError err = { 0 };
  G.probe = new_probe ();
  G.c = pp_cupti_start (G.probe, 3, &err);
  if (!G.c)
    g_error ("pp_cupti_start on a GPU machine: %s", err.msg);
  setup_cuda ();

  /* One collector per process. */
  PpError err2 = { 0 };
  g_assert_null (pp_cupti_start (G.probe, 3, &err2));
  g_assert_cmpint (err2.status, ==, PP_EUNSUPPORTED);
  g_test_message ("second start: %s", err2.msg);
}

static void
check_span (const PpSpan *s, int64_t t0, int64_t t1, int stage, int mb, int step)
{
  const int64_t slack = 2000000;   /* 2 ms: CUPTI's GPU->CPU clock interpolation */
  g_assert_cmpint (s->rank, ==, 3);
  g_assert_cmpint (s->stage, ==, stage);
  g_assert_cmpint (s->microbatch, ==, mb);
  g_assert_cmpint (s->step, ==, step);
  g_assert_cmpint (s->device, ==, 0);
  g_assert_cmpint (s->peer_rank, ==, -1);
  g_assert_cmpint (s->start_ns, <=, s->end_ns);
  g_assert_cmpint (s->start_ns, >=, t0 - slack);
  g_assert_cmpint (s->end_ns, <=, t1 + slack);
  g_assert_cmpuint (s->name_id, !=, 0);
}

/* The only span of kind in (kind, stage), checked. */
static PpSpan
one_span (int kind, int stage)
{
  GArray *a = find_spans (kind, stage);
  if (a->len != 1)
    g_error ("expected 1 span of kind %d stage %d, got %u", kind, stage, a->len);
  PpSpan s = g_array_index (a, PpSpan, 0);
  g_array_free (a, TRUE);
  return s;
}

static void
test_gpu_tagged_live (void)
{
  clear_spans ();
  int64_t t0 = pp_probe_now_ns ();

  uint64_t a = pp_cupti_push_block (G.c, 1, 2, PP_SPAN_F, 5);
  CUDA_OK (cudaMemsetAsync (G.dev, 1, MB32, G.stream));
  CUDA_OK (cudaMemcpyAsync (G.host, G.dev, MB32, cudaMemcpyDeviceToHost, G.stream));
  launch_spin (200000);
  pp_cupti_pop_block (G.c);

  uint64_t b = pp_cupti_push_block (G.c, 2, 7, PP_SPAN_B, 5);
  CUDA_OK (cudaMemcpyAsync ((char *) G.dev + MB32, G.host, MB32, cudaMemcpyHostToDevice, G.stream));
  launch_spin (100000);
  pp_cupti_pop_block (G.c);

  CUDA_OK (cudaMemsetAsync ((char *) G.dev + MB32, 0, 4096, G.stream));   /* untagged */
  CUDA_OK (cudaStreamSynchronize (G.stream));
  int64_t t1 = pp_probe_now_ns ();
  g_assert_cmpuint (a, !=, 0);
  g_assert_cmpuint (b, >, a);

  /* Live: no explicit flush; the flush thread and the probe's drain bring
   * them within a flush period (100 ms) plus a drain period (10 ms). */
  int64_t arrived = 0;
  while (pp_probe_now_ns () - t1 < 2000000000LL)
    {
      GArray *x = find_spans (-1, 1), *y = find_spans (-1, 2);
      gboolean all = x->len == 3 && y->len == 2;
      g_array_free (x, TRUE);
      g_array_free (y, TRUE);
      if (all)
        {
          arrived = pp_probe_now_ns ();
          break;
        }
      g_usleep (1000);
    }
  if (!arrived)
    {
      PpCuptiStats st;
      pp_cupti_get_stats (G.c, &st);
      g_error ("spans did not arrive within 2 s: %u spans so far; flushes %" G_GUINT64_FORMAT
               " buffers %" G_GUINT64_FORMAT " records %" G_GUINT64_FORMAT " spans %"
               G_GUINT64_FORMAT " tagged %" G_GUINT64_FORMAT " dropped %" G_GUINT64_FORMAT,
               sink.spans->len, st.flushes, st.buffers, st.records, st.spans, st.tagged, st.dropped);
    }
  double latency_ms = (arrived - t1) / 1e6;
  g_test_message ("live latency (stream synchronized -> spans at the sink): %.1f ms", latency_ms);
  printf ("# cupti live latency: %.1f ms\n", latency_ms);
  g_assert_cmpfloat (latency_ms, <, 250.0);

  /* Untagged work waits up to two more flushes for tags that never come. */
  for (int i = 0; i < 1000; i++)
    {
      GArray *u = find_spans (PP_SPAN_MEMSET, -1);
      guint n = u->len;
      g_array_free (u, TRUE);
      if (n >= 1)
        break;
      g_usleep (1000);
    }
  g_test_message ("untagged span after %.1f ms", (pp_probe_now_ns () - t1) / 1e6);

  /* Block A: memset, copy to host, kernel. */
  PpSpan ms = one_span (PP_SPAN_MEMSET, 1);
  check_span (&ms, t0, t1, 1, 2, 5);
  g_assert_cmpuint (ms.bytes, ==, MB32);
  g_assert_cmpstr (pp_cupti_name (G.c, ms.name_id), ==, "memset");

  PpSpan cp = one_span (PP_SPAN_MEMCPY, 1);
  check_span (&cp, t0, t1, 1, 2, 5);
  g_assert_cmpuint (cp.bytes, ==, MB32);
  g_assert_cmpstr (pp_cupti_name (G.c, cp.name_id), ==, "memcpy DtoH");
  g_assert_cmpint (cp.start_ns, >=, ms.end_ns - 1000);        /* same stream: in order */

  PpSpan k = one_span (PP_SPAN_KERNEL, 1);
  check_span (&k, t0, t1, 1, 2, 5);
  g_assert_cmpstr (pp_cupti_name (G.c, k.name_id), ==, "pp_test_spin");
  g_assert_cmpint (k.end_ns - k.start_ns, >=, 150000);
  g_assert_cmpint (k.end_ns - k.start_ns, <, 50000000);
  g_assert_cmpint (k.start_ns, >=, cp.end_ns - 1000);
  g_assert_cmpuint (k.stream, ==, ms.stream);

  /* Block B. */
  PpSpan cp2 = one_span (PP_SPAN_MEMCPY, 2);
  check_span (&cp2, t0, t1, 2, 7, 5);
  g_assert_cmpstr (pp_cupti_name (G.c, cp2.name_id), ==, "memcpy HtoD");
  PpSpan k2 = one_span (PP_SPAN_KERNEL, 2);
  check_span (&k2, t0, t1, 2, 7, 5);
  g_assert_cmpuint (k2.name_id, ==, k.name_id);             /* interned once */

  /* Untagged. */
  PpSpan u = one_span (PP_SPAN_MEMSET, -1);
  g_assert_cmpint (u.microbatch, ==, -1);
  g_assert_cmpuint (u.bytes, ==, 4096);

  /* GPU time of each block: min start / max end of its records. */
  int64_t s0, e0;
  uint32_t n;
  g_assert_true (pp_cupti_block_gpu_time (G.c, a, &s0, &e0, &n));
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpint (s0, ==, ms.start_ns);
  g_assert_cmpint (e0, ==, k.end_ns);
  g_assert_true (pp_cupti_block_gpu_time (G.c, b, &s0, &e0, &n));
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpint (s0, ==, cp2.start_ns);
  g_assert_cmpint (e0, ==, k2.end_ns);
  g_assert_false (pp_cupti_block_gpu_time (G.c, b + 1000, &s0, &e0, &n));

  g_assert_cmpuint (pp_cupti_dropped (G.c), ==, 0);
  PpError err = { 0 };
  g_assert_cmpint (pp_cupti_status (G.c, &err), ==, PP_OK);
}

/* A flush asked for after the work completed delivers that work's records,
 * at once, without the caller waiting: how the executor gets its kernel
 * times a step late.  And only the launch and copy calls had API records. */
static void
test_gpu_request_flush (void)
{
  PpCuptiStats st;
  int64_t s = 0, e = 0;
  uint32_t n = 0;

  uint64_t id = pp_cupti_push_block (G.c, 3, 1, PP_SPAN_W, 6);
  launch_spin (50000);
  pp_cupti_pop_block (G.c);
  CUDA_OK (cudaStreamSynchronize (G.stream));
  int64_t t0 = pp_probe_now_ns ();
  uint64_t ticket = pp_cupti_request_flush (G.c);
  int64_t asked = pp_probe_now_ns () - t0;
  g_assert_cmpuint (ticket, >, 0);
  g_assert_true (pp_cupti_wait_flush (G.c, ticket, 2000000000LL));
  int64_t served = pp_probe_now_ns () - t0;
  g_assert_true (pp_cupti_block_gpu_time (G.c, id, &s, &e, &n));
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpint (e - s, >=, 50000);
  /* a later ticket, and one already served answers at once */
  g_assert_cmpuint (pp_cupti_request_flush (G.c), >, ticket);
  g_assert_true (pp_cupti_wait_flush (G.c, ticket, 0));
  pp_cupti_get_stats (G.c, &st);
  g_test_message ("request took %.3f ms, served after %.1f ms; API calls with records: %u",
                  asked / 1e6, served / 1e6, st.api_calls);
  printf ("# cupti requested flush: asked %.3f ms, served %.1f ms; %u API calls traced\n",
          asked / 1e6, served / 1e6, st.api_calls);
  g_assert_cmpint (asked, <, 5000000);
  g_assert_cmpint (served, <, PP_CUPTI_FLUSH_PERIOD_NS * 9 / 10);   /* not the periodic one */
  if (g_strcmp0 (g_getenv ("PIPESCOPE_CUPTI_API"), "all") != 0)
    g_assert_cmpuint (st.api_calls, >, 20);
}

static void
test_gpu_flush_period (void)
{
  PpCuptiStats st0, st1;
  pp_cupti_get_stats (G.c, &st0);
  g_usleep (350000);
  pp_cupti_get_stats (G.c, &st1);
  int64_t since_last = pp_probe_now_ns () - st1.last_flush_ns;
  g_test_message ("flushes in 350 ms: %" G_GUINT64_FORMAT "; last one %.1f ms ago",
                  st1.flushes - st0.flushes, since_last / 1e6);
  g_assert_cmpuint (st1.flushes - st0.flushes, >=, 2);
  g_assert_cmpuint (st1.flushes - st0.flushes, <=, 5);
  g_assert_cmpint (since_last, <, 150000000);
}

/* Many short blocks from two threads: every record arrives, tagged right. */
#define N_BLOCKS 400
#define PER_BLOCK 5

typedef struct {
  int          stage;
  cudaStream_t stream;
} Worker;

static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  CUDA_OK (cudaSetDevice (0));
  CUDA_OK (cudaFree (NULL));          /* the primary context, current here too */
  for (int i = 0; i < N_BLOCKS; i++)
    {
      pp_cupti_push_block (G.c, w->stage, i, PP_SPAN_F, 9);
      for (int j = 0; j < PER_BLOCK; j++)
        {
          uint64_t ns = 0;
          void *args[] = { &ns };
          CUresult r = G.launch (G.spin, 1, 1, 1, 32, 1, 1, 0, (CUstream) w->stream, args, NULL);
          if (r != CUDA_SUCCESS)
            g_error ("cuLaunchKernel: CUresult %d", (int) r);
        }
      pp_cupti_pop_block (G.c);
    }
  CUDA_OK (cudaStreamSynchronize (w->stream));
  return NULL;
}

static void
test_gpu_many_blocks (void)
{
  clear_spans ();
  Worker w[2] = { { .stage = 10 }, { .stage = 11 } };
  GThread *t[2];
  int64_t t0 = pp_probe_now_ns ();
  for (int i = 0; i < 2; i++)
    {
      CUDA_OK (cudaStreamCreateWithFlags (&w[i].stream, cudaStreamNonBlocking));
      t[i] = g_thread_new ("worker", worker_main, &w[i]);
    }
  for (int i = 0; i < 2; i++)
    g_thread_join (t[i]);
  PpError err = { 0 };
  g_assert_cmpint (pp_cupti_flush (G.c, &err), ==, PP_OK);
  g_assert_cmpint (pp_probe_flush (G.probe, &err), ==, PP_OK);
  g_test_message ("%d kernels from 2 threads in %.1f ms", 2 * N_BLOCKS * PER_BLOCK,
                  (pp_probe_now_ns () - t0) / 1e6);

  for (int i = 0; i < 2; i++)
    {
      GArray *a = find_spans (PP_SPAN_KERNEL, w[i].stage);
      int per_mb[N_BLOCKS] = { 0 };
      for (guint j = 0; j < a->len; j++)
        {
          PpSpan *s = &g_array_index (a, PpSpan, j);
          g_assert_cmpint (s->microbatch, >=, 0);
          g_assert_cmpint (s->microbatch, <, N_BLOCKS);
          g_assert_cmpint (s->step, ==, 9);
          per_mb[s->microbatch]++;
        }
      if (a->len != N_BLOCKS * PER_BLOCK)
        g_error ("stage %d: %u kernel spans, want %d (untagged: %u)", w[i].stage, a->len,
                 N_BLOCKS * PER_BLOCK, find_spans (PP_SPAN_KERNEL, -1)->len);
      for (int m = 0; m < N_BLOCKS; m++)
        g_assert_cmpint (per_mb[m], ==, PER_BLOCK);
      g_array_free (a, TRUE);
      CUDA_OK (cudaStreamDestroy (w[i].stream));
    }
  g_assert_cmpuint (pp_cupti_dropped (G.c), ==, 0);
}

static void
test_gpu_stop_restart (void)
{
  PpError err = { 0 };
  pp_cupti_stop (G.c);
  pp_cupti_stop (G.c);                       /* idempotent */
  g_assert_cmpint (pp_cupti_status (G.c, &err), ==, PP_OK);
  g_assert_nonnull (pp_cupti_name (G.c, 1));  /* names outlive stop */

  /* Not collected while stopped. */
  clear_spans ();
  CUDA_OK (cudaMemsetAsync (G.dev, 2, 4096, G.stream));
  CUDA_OK (cudaStreamSynchronize (G.stream));

  PpCupti *c2 = pp_cupti_start (G.probe, 4, &err);
  if (!c2)
    g_error ("restart after stop: %s", err.msg);
  uint64_t id = pp_cupti_push_block (c2, 6, 1, PP_SPAN_W, 11);
  CUDA_OK (cudaMemsetAsync (G.dev, 3, 8192, G.stream));
  pp_cupti_pop_block (c2);
  CUDA_OK (cudaStreamSynchronize (G.stream));
  g_assert_cmpint (pp_cupti_flush (c2, &err), ==, PP_OK);
  g_assert_cmpint (pp_probe_flush (G.probe, &err), ==, PP_OK);

  GArray *before = find_spans (PP_SPAN_MEMSET, -1);
  GArray *after = find_spans (PP_SPAN_MEMSET, 6);
  g_assert_cmpuint (before->len, ==, 0);
  g_assert_cmpuint (after->len, ==, 1);
  PpSpan s = g_array_index (after, PpSpan, 0);
  g_assert_cmpint (s.rank, ==, 4);
  g_assert_cmpint (s.step, ==, 11);
  g_assert_cmpuint (s.bytes, ==, 8192);
  g_assert_true (pp_cupti_block_gpu_time (c2, id, NULL, NULL, NULL));
  g_array_free (before, TRUE);
  g_array_free (after, TRUE);

  pp_cupti_free (c2);
  pp_cupti_free (G.c);
  G.c = NULL;
  pp_probe_free (G.probe);
}

int
main (int argc, char **argv)
{
  gboolean unavailable = FALSE;
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--unavailable") == 0)
      {
        unavailable = TRUE;
        memmove (&argv[i], &argv[i + 1], (size_t) (argc - i) * sizeof *argv);
        argc--;
        break;
      }

  g_test_init (&argc, &argv, NULL);

  if (unavailable)
    {
      g_test_add_func ("/cupti/start-or-unavailable", test_start_or_unavailable);
      g_test_add_func ("/cupti/turned-off", test_turned_off);
      g_test_add_func ("/cupti/null-is-safe", test_null_is_safe);
      g_test_add_func ("/cupti/api-selection", test_api_selection);
      return g_test_run ();
    }

  char *why = NULL;
  if (!have_gpu (&why))
    {
      printf ("SKIP: %s\n", why);
      g_free (why);
      return 77;
    }

  /* In order: they share one collector. */
  g_test_add_func ("/cupti/gpu/start", test_gpu_start);
  g_test_add_func ("/cupti/gpu/tagged-live", test_gpu_tagged_live);
  g_test_add_func ("/cupti/gpu/request-flush", test_gpu_request_flush);
  g_test_add_func ("/cupti/gpu/flush-period", test_gpu_flush_period);
  g_test_add_func ("/cupti/gpu/many-blocks", test_gpu_many_blocks);
  g_test_add_func ("/cupti/gpu/stop-restart", test_gpu_stop_restart);
  return g_test_run ();
}
