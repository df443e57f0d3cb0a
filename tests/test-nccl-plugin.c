/* libnccl-profiler-pipescope.so without a GPU: loaded as NCCL loads it
 * (dlopen, dlsym of the versioned symbol), fed the event sequences NCCL
 * makes, on a clock the test sets, into a rank opened through
 * libpipescope-probe.so; the rank's trace file read back.  The wait split
 * of a send whose receiver is late, a slow transfer, a busy GPU; kernel
 * channels through the v4 interface and the offline split they allow
 * within a node; a communicator torn down mid-operation (finalize with
 * events open: no crash, nothing recorded of the cut operation, nothing
 * leaked under the ASan build of this test); no rank, and the plugin
 * switched off.  The plugin's path: $PP_NCCL_PLUGIN (meson). */
#include <glib.h>
#include <glib/gstdio.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipescope.h"
#include "pp-event.h"
#include "pp-nccl-abi.h"
#include "pp-nccl-match.h"
#include "pp-nccl-split.h"
#include "pp-trace.h"

#define COMM_HASH 0x1234567890abcdefULL
#define COMM_TAG  ((uint32_t) (COMM_HASH ^ (COMM_HASH >> 32)))

static void *plugin;
static PpNcclProfilerV4 *v4;
static PpNcclProfilerV5 *v5, *v6;
static int64_t clock_now;

static int64_t
fake_clock (void)
{
  return clock_now;
}

static void
load_plugin (void)
{
  const char *path = g_getenv ("PP_NCCL_PLUGIN");
  void (*set_clock) (int64_t (*) (void));
  if (plugin != NULL)
    return;
  g_assert_nonnull (path);
  plugin = dlopen (path, RTLD_NOW | RTLD_LOCAL);   /* as NCCL opens it */
  g_assert_nonnull (plugin);
  v4 = dlsym (plugin, "ncclProfiler_v4");
  v5 = dlsym (plugin, "ncclProfiler_v5");
  v6 = dlsym (plugin, "ncclProfiler_v6");
  *(void **) &set_clock = dlsym (plugin, "pp_nccl_plugin_test_clock");
  g_assert_nonnull (set_clock);
  set_clock (fake_clock);
}

/* ---- a rank and its trace ---- */

typedef struct {
  char           *dir, *path;
  pipescope_rank *rank;
  GArray         *spans;     /* PpSpan, read back */
  GHashTable     *names;     /* id -> name */
} Fx;

static void
fx_open (Fx *fx)
{
  char err[256];
  fx->dir = g_dir_make_tmp ("pp-nccl-XXXXXX", NULL);
  g_assert_nonnull (fx->dir);
  g_setenv ("XDG_RUNTIME_DIR", fx->dir, TRUE);   /* the job registry: ours */
  fx->path = g_build_filename (fx->dir, "rank.pptrace", NULL);
  fx->rank = pipescope_rank_open (NULL, 0, 1, "nccl-test", fx->path, NULL, err, sizeof err);
  g_assert_nonnull (fx->rank);
  g_assert_cmpint (pipescope_step (fx->rank, 3, 0, 1), ==, 0);   /* the spans' step */
}

static void
fx_close_and_read (Fx *fx)
{
  char err[256];
  PpError e = { 0 };
  PpTraceItem it;
  g_assert_cmpint (pipescope_rank_close (fx->rank, err, sizeof err), ==, 0);
  fx->rank = NULL;
  fx->spans = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  fx->names = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  PpTraceReader *r = pp_trace_reader_new_path (fx->path, &e);
  g_assert_nonnull (r);
  while (pp_trace_reader_next (r, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_SPAN)
      {
        /* a name precedes its first span */
        if (it.span.name_id != 0)
          g_assert_true (g_hash_table_contains (fx->names, GUINT_TO_POINTER (it.span.name_id)));
        g_array_append_val (fx->spans, it.span);
      }
    else if (it.type == PP_TRACE_ITEM_STRING)
      g_hash_table_insert (fx->names, GUINT_TO_POINTER (it.string.id), g_strdup (it.string.name));
  g_assert_cmpstr (e.msg, ==, "");
  pp_trace_reader_free (r);
}

static void
fx_free (Fx *fx)
{
  if (fx->spans)
    g_array_unref (fx->spans);
  if (fx->names)
    g_hash_table_unref (fx->names);
  char *reg = g_build_filename (fx->dir, "pipescope", NULL);   /* the job registry's folder */
  g_unlink (fx->path);
  g_rmdir (reg);
  g_rmdir (fx->dir);
  g_free (reg);
  g_free (fx->path);
  g_free (fx->dir);
}

static const char *
name_of (Fx *fx, const PpSpan *s)
{
  const char *n = g_hash_table_lookup (fx->names, GUINT_TO_POINTER (s->name_id));
  return n ? n : "";
}

/* The spans named name, in time order (the file's order is the drain's). */
static GArray *
named (Fx *fx, const char *name)
{
  GArray *a = g_array_new (FALSE, TRUE, sizeof (PpSpan));
  for (guint i = 0; i < fx->spans->len; i++)
    {
      PpSpan *s = &g_array_index (fx->spans, PpSpan, i);
      if (strcmp (name_of (fx, s), name) == 0)
        g_array_append_val (a, *s);
    }
  for (guint i = 1; i < a->len; i++)
    for (guint j = i; j > 0 && g_array_index (a, PpSpan, j).start_ns < g_array_index (a, PpSpan, j - 1).start_ns; j--)
      {
        PpSpan t = g_array_index (a, PpSpan, j);
        g_array_index (a, PpSpan, j) = g_array_index (a, PpSpan, j - 1);
        g_array_index (a, PpSpan, j - 1) = t;
      }
  return a;
}

/* Exactly one span named name, [a, b], of kind, with peer. */
static void
assert_one (Fx *fx, const char *name, int kind, int64_t a, int64_t b, int peer)
{
  GArray *s = named (fx, name);
  if (s->len != 1)
    g_error ("%u spans named %s, 1 expected", s->len, name);
  PpSpan *x = &g_array_index (s, PpSpan, 0);
  g_assert_cmpint (x->kind, ==, kind);
  g_assert_cmpint (x->start_ns, ==, a);
  g_assert_cmpint (x->end_ns, ==, b);
  g_assert_cmpint (x->peer_rank, ==, peer);
  g_assert_cmpint (x->step, ==, 3);
  g_assert_cmpuint (x->stream, ==, COMM_TAG);
  g_array_unref (s);
}

static void
assert_none (Fx *fx, const char *name)
{
  GArray *s = named (fx, name);
  g_assert_cmpuint (s->len, ==, 0);
  g_array_unref (s);
}

#define FORGED_SEND 0xfffff0u   /* a name id no trace here has: "nccl:Send" */

static const char *
span_name (void *user, uint32_t id)
{
  if (id == FORGED_SEND)
    return "nccl:Send";
  return g_hash_table_lookup (((Fx *) user)->names, GUINT_TO_POINTER (id));
}

static guint
count_named (Fx *fx, const char *name)
{
  GArray *s = named (fx, name);
  guint n = s->len;
  g_array_unref (s);
  return n;
}

/* ---- NCCL's side, through v6 (v5's layout) ---- */

static void *
at (int64_t t, void *ctx, PpNcclDescrV5 *d)
{
  void *h = (void *) 1;
  clock_now = t;
  g_assert_cmpint (v6->startEvent (ctx, &h, d), ==, PP_NCCL_SUCCESS);
  return h;
}

static void
stop_at (int64_t t, void *h)
{
  clock_now = t;
  g_assert_cmpint (v6->stopEvent (h), ==, PP_NCCL_SUCCESS);
}

static void
state_at (int64_t t, void *h, int state)
{
  PpNcclStateArgsV5 a = { .proxyStep = { 65536 } };
  clock_now = t;
  g_assert_cmpint (v6->recordEventState (h, state, &a), ==, PP_NCCL_SUCCESS);
}

static void *
init_v6 (int rank, int *mask)
{
  void *ctx = NULL;
  g_assert_cmpint (v6->init (&ctx, COMM_HASH, mask, "pp", 2, 2, rank, NULL), ==, PP_NCCL_SUCCESS);
  return ctx;
}

static void *
p2p_at (int64_t t, void *ctx, const char *func, int peer, size_t count)
{
  PpNcclDescrV5 d = { .type = PP_NCCL_P2P, .rank = 0 };
  d.p2p.func = func;
  d.p2p.datatype = "ncclFloat32";
  d.p2p.count = count;
  d.p2p.peer = peer;
  d.p2p.nChannels = 1;
  return at (t, ctx, &d);
}

static void *
proxy_at (int64_t t, void *ctx, void *op, int peer, int is_send)
{
  PpNcclDescrV5 d = { .type = PP_NCCL_PROXY_OP, .parentObj = op };
  d.proxyOp.pid = getpid ();
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = 2;
  d.proxyOp.isSend = is_send;
  return at (t, ctx, &d);
}

/* A proxy step: start at times[0], state k at times[k] (states[k - 1]),
 * stop at stop. */
static void
step_run (void *ctx, void *px, int n, const int *states, const int64_t *times, int64_t stop)
{
  PpNcclDescrV5 d = { .type = PP_NCCL_PROXY_STEP, .parentObj = px };
  void *h = at (times[0], ctx, &d);
  g_assert_nonnull (h);
  for (int k = 0; k < n; k++)
    state_at (times[k + 1], h, states[k]);
  stop_at (stop, h);
}

/* A send whose receiver is late: the chunks wait for its clear-to-send. */
static void
test_receiver_late (void)
{
  Fx fx = { 0 };
  int mask = 0;
  load_plugin ();
  fx_open (&fx);
  void *ctx = init_v6 (0, &mask);
  g_assert_nonnull (ctx);
  g_assert_cmpint (mask & (PP_NCCL_P2P | PP_NCCL_PROXY_OP | PP_NCCL_PROXY_STEP), ==,
                   PP_NCCL_P2P | PP_NCCL_PROXY_OP | PP_NCCL_PROXY_STEP);
  g_assert_cmpint (mask & PP_NCCL_KERNEL_CH, ==, 0);   /* off unless asked: their cost */

  void *op = p2p_at (100, ctx, "Send", 1, 1024);
  g_assert_nonnull (op);
  stop_at (101, op);   /* NCCL stops it once enqueued */
  void *px = proxy_at (110, ctx, op, 1, 1);
  const int st[] = { PP_NCCL_STEP_SEND_GPU_WAIT, PP_NCCL_STEP_SEND_PEER_WAIT, PP_NCCL_STEP_SEND_WAIT };
  step_run (ctx, px, 3, st, (int64_t[]) { 110, 110, 120, 500 }, 520);
  step_run (ctx, px, 3, st, (int64_t[]) { 111, 111, 125, 520 }, 540);
  stop_at (545, px);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);
  fx_close_and_read (&fx);

  assert_one (&fx, "nccl:local", PP_SPAN_WAIT, 110, 120, 1);
  assert_one (&fx, "nccl:peer_late", PP_SPAN_WAIT, 120, 500, 1);
  assert_one (&fx, "nccl:transfer", PP_SPAN_WAIT, 500, 540, 1);
  assert_one (&fx, "nccl:Send", PP_SPAN_KERNEL, 110, 545, 1);
  GArray *s = named (&fx, "nccl:Send");
  PpSpan *x = &g_array_index (s, PpSpan, 0);
  g_assert_cmpuint (x->bytes, ==, 4096);   /* 1024 float32 */
  g_assert_cmpint (x->microbatch, ==, 0);  /* the first send to peer 1 */
  g_assert_cmpint (x->stage, ==, 0);       /* the sender's rank in the communicator */
  g_array_unref (s);
  /* each step's states as spans of their own */
  g_assert_cmpuint (count_named (&fx, "nccl:SendGPUWait"), ==, 2);
  g_assert_cmpuint (count_named (&fx, "nccl:SendPeerWait"), ==, 2);
  g_assert_cmpuint (count_named (&fx, "nccl:SendWait"), ==, 2);
  fx_free (&fx);
}

/* A slow transfer: the first chunk comes at once, the rest trickles in. */
static void
test_slow_transfer (void)
{
  Fx fx = { 0 };
  int mask = 0;
  load_plugin ();
  fx_open (&fx);
  void *ctx = init_v6 (1, &mask);
  void *op = p2p_at (190, ctx, "Recv", 0, 256);
  stop_at (191, op);
  void *px = proxy_at (200, ctx, op, 0, 0);
  const int st[] = { PP_NCCL_STEP_RECV_WAIT, PP_NCCL_STEP_RECV_GPU_WAIT };
  step_run (ctx, px, 2, st, (int64_t[]) { 200, 200, 210 }, 212);
  step_run (ctx, px, 2, st, (int64_t[]) { 200, 200, 400 }, 402);
  step_run (ctx, px, 2, st, (int64_t[]) { 212, 212, 600 }, 601);
  stop_at (602, px);
  /* a second receive from the same peer: the next sequence number */
  void *op2 = p2p_at (700, ctx, "Recv", 0, 256);
  stop_at (701, op2);
  void *px2 = proxy_at (702, ctx, op2, 0, 0);
  step_run (ctx, px2, 2, st, (int64_t[]) { 702, 702, 705 }, 706);
  stop_at (707, px2);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);
  fx_close_and_read (&fx);

  GArray *late = named (&fx, "nccl:peer_late"), *xfer = named (&fx, "nccl:transfer"),
         *local = named (&fx, "nccl:local"), *recv = named (&fx, "nccl:Recv");
  g_assert_cmpuint (late->len, ==, 2);
  g_assert_cmpuint (xfer->len, ==, 1);   /* the second's data came with its first chunk */
  g_assert_cmpuint (local->len, ==, 2);
  g_assert_cmpint (g_array_index (late, PpSpan, 0).start_ns, ==, 200);
  g_assert_cmpint (g_array_index (late, PpSpan, 0).end_ns, ==, 210);
  g_assert_cmpint (g_array_index (xfer, PpSpan, 0).start_ns, ==, 210);
  g_assert_cmpint (g_array_index (xfer, PpSpan, 0).end_ns, ==, 600);
  g_assert_cmpint (g_array_index (local, PpSpan, 0).start_ns, ==, 600);
  g_assert_cmpint (g_array_index (local, PpSpan, 0).end_ns, ==, 601);
  g_assert_cmpuint (recv->len, ==, 2);
  g_assert_cmpint (g_array_index (recv, PpSpan, 0).microbatch, ==, 0);
  g_assert_cmpint (g_array_index (recv, PpSpan, 1).microbatch, ==, 1);
  g_assert_cmpint (g_array_index (recv, PpSpan, 0).stage, ==, 1);
  /* split by the plugin already: the offline matcher leaves them, also
   * given the send of the first (the other side's span, forged here) */
  PpSpan send = g_array_index (recv, PpSpan, 0);
  send.name_id = FORGED_SEND;
  send.stage = 0;
  send.peer_rank = 1;
  send.start_ns = 205;
  g_array_append_val (fx.spans, send);
  PpNcclMatchedWait *w = NULL;
  size_t n = 1;
  g_assert_cmpint (pp_nccl_match ((PpSpan *) fx.spans->data, fx.spans->len, span_name, &fx, &w, &n, NULL),
                   ==, PP_OK);
  g_assert_cmpuint (n, ==, 0);
  g_assert_null (w);
  g_array_unref (late);
  g_array_unref (xfer);
  g_array_unref (local);
  g_array_unref (recv);
  fx_free (&fx);
}

/* A busy GPU: the data is in, the receiving kernel has not started. */
static void
test_busy_gpu (void)
{
  Fx fx = { 0 };
  int mask = 0;
  load_plugin ();
  fx_open (&fx);
  void *ctx = init_v6 (1, &mask);
  void *op = p2p_at (290, ctx, "Recv", 0, 1 << 20);
  stop_at (291, op);
  void *px = proxy_at (300, ctx, op, 0, 0);
  const int st[] = { PP_NCCL_STEP_RECV_WAIT, PP_NCCL_STEP_RECV_FLUSH_WAIT, PP_NCCL_STEP_RECV_GPU_WAIT };
  step_run (ctx, px, 3, st, (int64_t[]) { 300, 300, 301, 301 }, 900);
  step_run (ctx, px, 3, st, (int64_t[]) { 300, 300, 302, 303 }, 905);
  stop_at (906, px);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);
  fx_close_and_read (&fx);

  assert_one (&fx, "nccl:peer_late", PP_SPAN_WAIT, 300, 301, 0);
  assert_one (&fx, "nccl:transfer", PP_SPAN_WAIT, 301, 303, 0);   /* the second chunk's wire and flush */
  assert_one (&fx, "nccl:local", PP_SPAN_WAIT, 303, 905, 0);
  assert_one (&fx, "nccl:Recv", PP_SPAN_KERNEL, 300, 906, 0);
  fx_free (&fx);
}

/* A collective: its sequence number NCCL's, its waits of no one peer (its
 * proxy operations talk to several). */
static void
test_collective (void)
{
  Fx fx = { 0 };
  int mask = 0;
  load_plugin ();
  fx_open (&fx);
  void *ctx = init_v6 (0, &mask);
  PpNcclDescrV5 c = { .type = PP_NCCL_COLL };
  c.coll.func = "AllReduce";
  c.coll.datatype = "ncclFloat16";
  c.coll.count = 100;
  c.coll.root = 0;
  c.coll.seqNumber = 41;
  void *op = at (10, ctx, &c);
  stop_at (11, op);
  void *px = proxy_at (20, ctx, op, 1, 1), *px2 = proxy_at (20, ctx, op, 1, 0);
  step_run (ctx, px, 1, (int[]) { PP_NCCL_STEP_SEND_WAIT }, (int64_t[]) { 20, 20 }, 30);
  step_run (ctx, px2, 1, (int[]) { PP_NCCL_STEP_RECV_WAIT }, (int64_t[]) { 20, 20 }, 25);
  stop_at (31, px);
  stop_at (32, px2);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);
  fx_close_and_read (&fx);
  assert_one (&fx, "nccl:transfer", PP_SPAN_WAIT, 20, 30, -1);
  assert_none (&fx, "nccl:peer_late");   /* the sending chunk moved all along */
  assert_one (&fx, "nccl:AllReduce", PP_SPAN_KERNEL, 20, 32, 0);
  GArray *a = named (&fx, "nccl:AllReduce");
  g_assert_cmpint (g_array_index (a, PpSpan, 0).microbatch, ==, 41);
  g_assert_cmpuint (g_array_index (a, PpSpan, 0).bytes, ==, 200);
  g_array_unref (a);
  fx_free (&fx);
}

/* v4, kernel channels on: a send and its receive within a node (no proxy
 * steps), each side a communicator of its own in this process; their
 * kernels' GPU stamps come back on the host clock, and the receive's wait
 * splits offline by the two kernels matched on the sequence number. */
static void merged_split (Fx *fx, int64_t a, int64_t b, int64_t c);

static void
test_kernel_channels_v4 (void)
{
  Fx fx = { 0 };
  int mask = 0;
  void *c0 = NULL, *c1 = NULL;
  const int64_t lag = 1000;   /* the plugin sees each GPU stamp this much later */
  load_plugin ();
  g_assert_nonnull (v4);
  g_assert_cmpstr (v4->name, ==, "pipescope");
  fx_open (&fx);
  g_setenv ("PIPESCOPE_NCCL_KERNEL", "1", TRUE);
  g_assert_cmpint (v4->init (&c0, &mask, "pp", COMM_HASH, 1, 2, 0, NULL), ==, PP_NCCL_SUCCESS);
  g_assert_cmpint (mask & PP_NCCL_KERNEL_CH, ==, PP_NCCL_KERNEL_CH);
  g_assert_cmpint (v4->init (&c1, &mask, "pp", COMM_HASH, 1, 2, 1, NULL), ==, PP_NCCL_SUCCESS);
  g_unsetenv ("PIPESCOPE_NCCL_KERNEL");

  void *ops[2], *k[2];
  for (int side = 0; side < 2; side++)
    {
      PpNcclDescrV4 d = { .type = PP_NCCL_P2P };
      d.p2p.func = side == 0 ? "Send" : "Recv";
      d.p2p.datatype = "ncclBfloat16";
      d.p2p.count = 512;
      d.p2p.peer = 1 - side;
      d.p2p.nChannels = 1;
      clock_now = 10;
      g_assert_cmpint (v4->startEvent (side == 0 ? c0 : c1, &ops[side], &d), ==, 0);
      g_assert_nonnull (ops[side]);
      g_assert_cmpint (v4->stopEvent (ops[side]), ==, 0);
    }
  /* the receiver's kernel starts at GPU time 5000, the sender's at 8000;
   * both end at 9000 */
  const uint64_t start[2] = { 8000, 5000 }, stop[2] = { 9000, 9000 };
  for (int side = 1; side >= 0; side--)
    {
      PpNcclDescrV4 d = { .type = PP_NCCL_KERNEL_CH, .parentObj = ops[side] };
      d.kernelCh.pTimer = start[side];
      clock_now = (int64_t) start[side] + lag;
      g_assert_cmpint (v4->startEvent (side == 0 ? c0 : c1, &k[side], &d), ==, 0);
      g_assert_nonnull (k[side]);
    }
  for (int side = 0; side < 2; side++)
    {
      PpNcclStateArgsV4 a = { .kernelCh = { stop[side] } };
      clock_now = (int64_t) stop[side] + lag + 5 * side;
      g_assert_cmpint (v4->recordEventState (k[side], PP_NCCL_KERNEL_CH_STOP, &a), ==, 0);
      g_assert_cmpint (v4->stopEvent (k[side]), ==, 0);
    }
  g_assert_cmpint (v4->finalize (c0), ==, 0);
  g_assert_cmpint (v4->finalize (c1), ==, 0);
  fx_close_and_read (&fx);

  GArray *send = named (&fx, "nccl:Send"), *recv = named (&fx, "nccl:Recv");
  g_assert_cmpuint (send->len, ==, 1);
  g_assert_cmpuint (recv->len, ==, 1);
  PpSpan *s = &g_array_index (send, PpSpan, 0), *r = &g_array_index (recv, PpSpan, 0);
  g_assert_cmpint (s->start_ns, ==, 8000 + lag);
  g_assert_cmpint (r->start_ns, ==, 5000 + lag);
  g_assert_cmpint (r->end_ns, ==, 9000 + lag);
  g_assert_cmpuint (s->bytes, ==, 1024);   /* 512 bfloat16 */
  /* the pair: the same communicator and sequence number, each the other's peer */
  g_assert_cmpuint (s->stream, ==, r->stream);
  g_assert_cmpint (s->microbatch, ==, r->microbatch);
  g_assert_cmpint (s->stage, ==, r->peer_rank);
  g_assert_cmpint (r->stage, ==, s->peer_rank);
  g_assert_cmpuint (count_named (&fx, "nccl:kernel"), ==, 2);
  /* no proxy steps: nothing split in the plugin; offline, from the pair */
  assert_none (&fx, "nccl:peer_late");
  PpNcclMatchedWait *w = NULL;
  size_t n = 0;
  PpError e = { 0 };
  g_assert_cmpint (pp_nccl_match ((PpSpan *) fx.spans->data, fx.spans->len, span_name, &fx, &w, &n, &e),
                   ==, PP_OK);
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpint (w[0].part, ==, PP_NCCL_PART_PEER_LATE);   /* until the sender's kernel started */
  g_assert_cmpint (w[0].wait.start_ns, ==, 5000 + lag);
  g_assert_cmpint (w[0].wait.end_ns, ==, 8000 + lag);
  g_assert_cmpint (w[1].part, ==, PP_NCCL_PART_TRANSFER);
  g_assert_cmpint (w[1].wait.end_ns, ==, 9000 + lag);
  g_assert_cmpint (w[0].wait.kind, ==, PP_SPAN_WAIT);
  g_assert_cmpint (w[0].wait.peer_rank, ==, 0);
  g_assert_cmpuint (w[0].wait.stream, ==, COMM_TAG);
  g_assert_cmpint (w[0].wait.step, ==, 3);
  free (w);
  merged_split (&fx, 5000 + lag, 8000 + lag, 9000 + lag);
  g_array_unref (send);
  g_array_unref (recv);
  fx_free (&fx);
}

/* `merge` of the two sides' files (each NCCL rank a process of its own, as
 * within a node) writes the receive's split: the plugin's spans of fx,
 * those of communicator rank 0 into one rank file and of rank 1 into
 * another, merged by the CLI; the merged trace holds, on the receiving
 * rank, peer_late [a, b) and transfer [b, c). */
static void
merged_split (Fx *fx, int64_t a, int64_t b, int64_t c)
{
  char *in[2], *out = g_build_filename (fx->dir, "merged.pptrace", NULL);
  for (int side = 0; side < 2; side++)
    {
      PpError e = { 0 };
      in[side] = g_strdup_printf ("%s/side%d.pptrace", fx->dir, side);
      PpTraceWriter *w = pp_trace_writer_new_path (in[side], PP_TRACE_NATIVE, &e);
      g_assert_nonnull (w);
      PpTraceDescription d = { .schedule = "1F1B", .backend = "cuda", .n_ranks = 2, .n_microbatches = 1,
                               .n_virtual = 1 };
      g_assert_cmpint (pp_trace_write_description (w, &d, &e), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_rank (w, side, 100 + side, "node", &e), ==, PP_OK);
      GHashTableIter it;
      gpointer id, name;
      g_hash_table_iter_init (&it, fx->names);
      while (g_hash_table_iter_next (&it, &id, &name))
        g_assert_cmpint (pp_trace_write_string (w, GPOINTER_TO_UINT (id), name, &e), ==, PP_OK);
      for (guint i = 0; i < fx->spans->len; i++)
        {
          PpSpan sp = g_array_index (fx->spans, PpSpan, i);
          if (sp.stage != side)
            continue;
          sp.rank = side;
          g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &e), ==, PP_OK);
        }
      g_assert_cmpint (pp_trace_writer_close (w, &e), ==, PP_OK);
    }
  const char *argv[] = { g_getenv ("PIPESCOPE_CLI"), "merge", "-o", out, in[0], in[1], NULL };
  char *so = NULL;
  int st = -1;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &so, NULL,
                               &st, NULL));
  g_assert_true (g_spawn_check_wait_status (st, NULL));
  g_assert_nonnull (strstr (so, "NCCL receives within a node: 2 wait spans"));

  PpError e = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (out, &e);
  g_assert_nonnull (r);
  GHashTable *names = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  PpTraceItem item;
  int late = 0, xfer = 0;
  while (pp_trace_reader_next (r, &item, &e) == PP_OK && item.type != PP_TRACE_ITEM_END)
    if (item.type == PP_TRACE_ITEM_STRING)
      g_hash_table_insert (names, GUINT_TO_POINTER (item.string.id), g_strdup (item.string.name));
    else if (item.type == PP_TRACE_ITEM_SPAN && item.span.kind == PP_SPAN_WAIT)
      {
        const char *n = g_hash_table_lookup (names, GUINT_TO_POINTER (item.span.name_id));
        g_assert_nonnull (n);
        g_assert_cmpint (item.span.rank, ==, 1);   /* the receiving side */
        g_assert_cmpint (item.span.peer_rank, ==, 0);
        if (strcmp (n, "nccl:peer_late") == 0)
          {
            late++;
            g_assert_cmpint (item.span.start_ns, ==, a);
            g_assert_cmpint (item.span.end_ns, ==, b);
          }
        else if (strcmp (n, "nccl:transfer") == 0)
          {
            xfer++;
            g_assert_cmpint (item.span.start_ns, ==, b);
            g_assert_cmpint (item.span.end_ns, ==, c);
          }
      }
  g_assert_cmpstr (e.msg, ==, "");
  g_assert_cmpint (late, ==, 1);
  g_assert_cmpint (xfer, ==, 1);
  pp_trace_reader_free (r);
  g_hash_table_unref (names);
  for (int side = 0; side < 2; side++)
    {
      g_unlink (in[side]);
      g_free (in[side]);
    }
  g_unlink (out);
  g_free (out);
  g_free (so);
}

/* A communicator torn down mid-operation: finalize with an operation, its
 * proxy, a step in a state and a kernel channel all open. */
static void
test_teardown (void)
{
  Fx fx = { 0 };
  int mask = 0;
  load_plugin ();
  fx_open (&fx);
  g_setenv ("PIPESCOPE_NCCL_KERNEL", "1", TRUE);
  void *ctx = init_v6 (0, &mask);
  g_unsetenv ("PIPESCOPE_NCCL_KERNEL");
  /* one whole operation first: it is recorded */
  void *done = p2p_at (10, ctx, "Send", 1, 8);
  stop_at (11, done);
  void *pd = proxy_at (12, ctx, done, 1, 1);
  step_run (ctx, pd, 1, (int[]) { PP_NCCL_STEP_SEND_WAIT }, (int64_t[]) { 12, 12 }, 20);
  stop_at (21, pd);
  /* its kernel channel never came: recorded at the end all the same */
  /* then the cut one */
  void *op = p2p_at (100, ctx, "Recv", 1, 8);
  stop_at (101, op);
  void *px = proxy_at (110, ctx, op, 1, 0);
  PpNcclDescrV5 d = { .type = PP_NCCL_PROXY_STEP, .parentObj = px };
  void *st = at (110, ctx, &d);
  state_at (111, st, PP_NCCL_STEP_RECV_WAIT);
  PpNcclDescrV5 k = { .type = PP_NCCL_KERNEL_CH, .parentObj = op };
  k.kernelCh.pTimer = 50;
  void *kh = at (120, ctx, &k);
  g_assert_nonnull (kh);
  /* a collective enqueued, nothing of it started */
  PpNcclDescrV5 c = { .type = PP_NCCL_COLL };
  c.coll.func = "AllReduce";
  c.coll.datatype = "ncclFloat32";
  c.coll.count = 4;
  c.coll.seqNumber = 7;
  void *coll = at (130, ctx, &c);
  g_assert_nonnull (coll);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);   /* frees it all */
  /* a new communicator after it works as the first did */
  void *again = init_v6 (0, &mask);
  void *op2 = p2p_at (200, again, "Send", 1, 8);
  stop_at (201, op2);
  void *p2 = proxy_at (202, again, op2, 1, 1);
  stop_at (203, p2);
  g_assert_cmpint (v6->finalize (again), ==, PP_NCCL_SUCCESS);
  fx_close_and_read (&fx);

  assert_none (&fx, "nccl:Recv");          /* the cut operation: not recorded */
  assert_none (&fx, "nccl:AllReduce");     /* never started: no times */
  assert_none (&fx, "nccl:RecvWait");      /* its open step's state: not closed, not recorded */
  assert_none (&fx, "nccl:kernel");        /* its kernel never ended */
  g_assert_cmpuint (count_named (&fx, "nccl:Send"), ==, 2);
  assert_one (&fx, "nccl:transfer", PP_SPAN_WAIT, 12, 20, 1);
  fx_free (&fx);
}

/* No rank in the process: every event is taken and nothing recorded;
 * PIPESCOPE_NCCL=0: NCCL is asked for no event at all. */
static void
test_no_rank_and_off (void)
{
  int mask = -1;
  load_plugin ();
  void *ctx = init_v6 (0, &mask);
  g_assert_nonnull (ctx);   /* the probe library is loaded: the rank may open later */
  void *op = p2p_at (1, ctx, "Send", 1, 8);
  stop_at (2, op);
  void *px = proxy_at (3, ctx, op, 1, 1);
  step_run (ctx, px, 1, (int[]) { PP_NCCL_STEP_SEND_WAIT }, (int64_t[]) { 3, 4 }, 5);
  stop_at (6, px);
  g_assert_cmpint (v6->finalize (ctx), ==, PP_NCCL_SUCCESS);

  g_setenv ("PIPESCOPE_NCCL", "0", TRUE);
  ctx = (void *) 1;
  g_assert_cmpint (v5->init (&ctx, COMM_HASH, &mask, "pp", 1, 2, 0, NULL), ==, PP_NCCL_SUCCESS);
  g_unsetenv ("PIPESCOPE_NCCL");
  g_assert_cmpint (mask, ==, 0);
  g_assert_null (ctx);
  void *h = (void *) 1;
  PpNcclDescrV5 d = { .type = PP_NCCL_P2P };
  g_assert_cmpint (v5->startEvent (ctx, &h, &d), ==, PP_NCCL_SUCCESS);
  g_assert_null (h);
  g_assert_cmpint (v5->stopEvent (NULL), ==, PP_NCCL_SUCCESS);
  g_assert_cmpint (v5->finalize (NULL), ==, PP_NCCL_SUCCESS);
}

/* The versions NCCL 2.26 to 2.30 look for, each named. */
static void
test_symbols (void)
{
  load_plugin ();
  g_assert_nonnull (v4);
  g_assert_nonnull (v5);
  g_assert_nonnull (v6);
  g_assert_cmpstr (v5->name, ==, "pipescope");
  g_assert_cmpstr (v6->name, ==, "pipescope");
  g_assert_null (dlsym (plugin, "pp_nccl_split"));   /* nothing else leaks out */
}

/* The split alone: runs in time order, merged, summing to the union. */
static void
test_split_edges (void)
{
  PpNcclInterval iv[] = {
    { 0, 10, PP_NCCL_PART_LOCAL }, { 5, 20, PP_NCCL_PART_PEER_LATE }, { 15, 30, PP_NCCL_PART_TRANSFER },
    { 30, 40, PP_NCCL_PART_TRANSFER }, { 50, 60, PP_NCCL_PART_LOCAL }, { 55, 55, PP_NCCL_PART_TRANSFER },
  };
  PpNcclInterval out[8], scratch[2 * 6 + 2];
  int64_t totals[PP_NCCL_N_PARTS];
  size_t n = pp_nccl_split (iv, 6, INT64_MAX, out, 8, totals, scratch);
  g_assert_cmpuint (n, ==, 4);
  g_assert_cmpint (out[0].part, ==, PP_NCCL_PART_LOCAL);
  g_assert_cmpint (out[0].end_ns, ==, 5);
  g_assert_cmpint (out[1].part, ==, PP_NCCL_PART_PEER_LATE);
  g_assert_cmpint (out[1].end_ns, ==, 15);
  g_assert_cmpint (out[2].part, ==, PP_NCCL_PART_TRANSFER);
  g_assert_cmpint (out[2].start_ns, ==, 15);
  g_assert_cmpint (out[2].end_ns, ==, 40);   /* two transfers that touch: one run */
  g_assert_cmpint (out[3].start_ns, ==, 50);
  g_assert_cmpint (totals[PP_NCCL_PART_LOCAL] + totals[PP_NCCL_PART_PEER_LATE]
                   + totals[PP_NCCL_PART_TRANSFER], ==, 50);   /* the union: [0, 40] and [50, 60] */
  /* a run past cap is counted, not written */
  n = pp_nccl_split (iv, 6, INT64_MAX, out, 2, totals, scratch);
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpint (totals[PP_NCCL_PART_LOCAL], ==, 15);

  /* kept few: chunks in flight waiting in one state join, the first data's
   * time kept apart, so the split is the one of the intervals unjoined */
  PpNcclIntervals set;
  PpNcclInterval rw[] = { { 200, 210, PP_NCCL_PART_RECV_WAIT }, { 200, 400, PP_NCCL_PART_RECV_WAIT },
                          { 212, 600, PP_NCCL_PART_RECV_WAIT }, { 600, 601, PP_NCCL_PART_LOCAL },
                          { 700, 710, PP_NCCL_PART_RECV_WAIT } };
  int64_t joined[PP_NCCL_N_PARTS], apart[PP_NCCL_N_PARTS];
  pp_nccl_intervals_init (&set, 3);
  for (int k = 0; k < 5; k++)
    g_assert_cmpint (pp_nccl_intervals_add (&set, rw[k].start_ns, rw[k].end_ns, rw[k].part), ==, 0);
  g_assert_cmpuint (set.n, ==, 3);   /* [200, 600], [600, 601], [700, 710] */
  g_assert_cmpint (set.first_data, ==, 210);
  g_assert_cmpint (pp_nccl_intervals_add (&set, 800, 900, PP_NCCL_PART_LOCAL), ==, -1);   /* past max */
  pp_nccl_split (set.iv, set.n, set.first_data, out, 8, joined, scratch);
  pp_nccl_split (rw, 5, INT64_MAX, out, 8, apart, scratch);
  for (int p = 0; p < PP_NCCL_N_PARTS; p++)
    g_assert_cmpint (joined[p], ==, apart[p]);
  g_assert_cmpint (joined[PP_NCCL_PART_PEER_LATE], ==, 10);
  pp_nccl_intervals_clear (&set);
}

static void
rm_tree (const char *path)
{
  GDir *d = g_file_test (path, G_FILE_TEST_IS_SYMLINK) ? NULL : g_dir_open (path, 0, NULL);
  for (const char *n; d != NULL && (n = g_dir_read_name (d)) != NULL;)
    {
      char *f = g_build_filename (path, n, NULL);
      rm_tree (f);
      g_free (f);
    }
  if (d != NULL)
    {
      g_dir_close (d);
      g_rmdir (path);
    }
  else
    g_unlink (path);
}

/* `profile` names the plugin for a job in NCCL_PROFILER_PLUGIN, and leaves
 * a job's own alone ($PIPESCOPE_CLI, $PP_NCCL_PLUGIN_SHIPPED: meson). */
static char *
profiled_plugin (const char *own)
{
  char *dir = g_dir_make_tmp ("pp-nccl-profile-XXXXXX", NULL), *out = NULL;
  char **env = g_get_environ ();
  env = g_environ_setenv (env, "XDG_RUNTIME_DIR", dir, TRUE);
  env = own ? g_environ_setenv (env, "NCCL_PROFILER_PLUGIN", own, TRUE)
            : g_environ_unsetenv (env, "NCCL_PROFILER_PLUGIN");
  const char *argv[] = { g_getenv ("PIPESCOPE_CLI"), "profile", "--", "sh", "-c",
                         "echo \"plugin=$NCCL_PROFILER_PLUGIN\"", NULL };
  g_assert_nonnull (argv[0]);
  g_assert_true (g_spawn_sync (dir, (char **) argv, env, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                               NULL, NULL, NULL));
  g_strfreev (env);
  char *line = strstr (out, "plugin=");
  g_assert_nonnull (line);
  char *got = g_strndup (line + 7, strcspn (line + 7, "\n"));
  g_free (out);
  rm_tree (dir);   /* profile's run files and the registry's folder */
  g_free (dir);
  return got;
}

static void
test_profile_sets_plugin (void)
{
  char *shipped = realpath (g_getenv ("PP_NCCL_PLUGIN_SHIPPED"), NULL);
  char *got = profiled_plugin (NULL), *real = realpath (got, NULL);
  g_assert_nonnull (shipped);
  g_assert_cmpstr (real, ==, shipped);
  free (real);
  g_free (got);
  got = profiled_plugin ("/opt/their/libnccl-profiler-own.so");
  g_assert_cmpstr (got, ==, "/opt/their/libnccl-profiler-own.so");
  g_free (got);
  free (shipped);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nccl-plugin/symbols", test_symbols);
  g_test_add_func ("/nccl-plugin/split-edges", test_split_edges);
  g_test_add_func ("/nccl-plugin/receiver-late", test_receiver_late);
  g_test_add_func ("/nccl-plugin/slow-transfer", test_slow_transfer);
  g_test_add_func ("/nccl-plugin/busy-gpu", test_busy_gpu);
  g_test_add_func ("/nccl-plugin/collective", test_collective);
  g_test_add_func ("/nccl-plugin/kernel-channels-v4", test_kernel_channels_v4);
  g_test_add_func ("/nccl-plugin/teardown", test_teardown);
  g_test_add_func ("/nccl-plugin/no-rank-and-off", test_no_rank_and_off);
  g_test_add_func ("/nccl-plugin/profile-sets-plugin", test_profile_sets_plugin);
  return g_test_run ();
}
