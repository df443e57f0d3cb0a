/* pp-nccl-plugin.c — libnccl-profiler-pipescope.so: NCCL's profiler plugin
 * (pp-nccl-abi.h) recording each NCCL operation into the process's
 * pipescope rank (pipescope.h, "Spans from a library the job loaded").
 *
 * What it records (docs/nccl-plugin.md): each p2p and collective as a
 * KERNEL span named "nccl:<func>" (its peer, bytes, communicator, sequence
 * number), each channel's kernel ("nccl:kernel", with kernel-channel
 * events on), each proxy step state ("nccl:SendWait", ...), and the
 * operation's wait split into WAIT spans "nccl:peer_late",
 * "nccl:transfer", "nccl:local" (pp-nccl-split.h).
 *
 * It never links the probe library: it finds the one the job has loaded
 * (the Python hook's: $PIPESCOPE_LIB, else libpipescope-probe.so.1, opened
 * with RTLD_NOLOAD) and does nothing where there is none.  Nothing it does
 * returns an error to NCCL or blocks on anything but its own short
 * per-communicator lock; events it has no room for are dropped and
 * counted.
 *
 * Lifetimes: NCCL stops a p2p or collective event right after enqueueing
 * it and hands its handle to the proxy and kernel events that follow, so
 * an operation lives in a per-communicator pool until its last child has
 * stopped; every handle points into the communicator's pools, never at
 * freed memory, and a parent pointer is used only when it lies in them.
 * finalize (a communicator torn down, events open or not) frees
 * everything of that communicator. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pipescope.h"
#include "pp-event.h"
#include "pp-nccl-abi.h"
#include "pp-nccl-split.h"

#define EXPORT __attribute__ ((visibility ("default")))

#define N_OPS      1024    /* operations in flight or waiting for children, per communicator */
#define N_PROXIES  512
#define N_STEPS    2048
#define N_KCH      512
#define N_FUNCS    32      /* operation names a communicator caches */
#define MAX_IV     16384   /* step state intervals an operation keeps for its split */
#define SEQ_MASK   0x7fff  /* the sequence number in a span's micro-batch field */

/* ---- the probe library the job loaded ------------------------------------ */

typedef struct {
  int      (*step) (void);
  uint32_t (*name) (const char *name);
  int      (*span) (int kind, uint32_t name_id, int stage, int microbatch, int step, int peer,
                    uint64_t bytes, int device, uint32_t stream, int64_t start_ns, int64_t end_ns);
  int64_t  (*now) (void);
} Probe;

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static Probe           probe;
static _Atomic int     probe_found;
static int64_t       (*test_clock) (void);

/* Names every communicator uses, interned once. */
static uint32_t part_name[PP_NCCL_N_PARTS], kernel_name, state_name[32];

static const char *
state_label (int state)
{
  switch (state)
    {
    case PP_NCCL_STEP_SEND_GPU_WAIT: return "nccl:SendGPUWait";
    case PP_NCCL_STEP_SEND_PEER_WAIT: return "nccl:SendPeerWait";
    case PP_NCCL_STEP_SEND_WAIT: return "nccl:SendWait";
    case PP_NCCL_STEP_RECV_WAIT: return "nccl:RecvWait";
    case PP_NCCL_STEP_RECV_FLUSH_WAIT: return "nccl:RecvFlushWait";
    case PP_NCCL_STEP_RECV_GPU_WAIT: return "nccl:RecvGPUWait";
    default: return NULL;
    }
}

static void *
opened (const char *path)
{
  return path != NULL && path[0] ? dlopen (path, RTLD_NOW | RTLD_NOLOAD) : NULL;
}

/* The probe library, where the job has loaded it: 1, else 0 (tried again
 * at the next communicator). */
static int
find_probe (void)
{
  if (atomic_load (&probe_found))
    return 1;
  pthread_mutex_lock (&probe_lock);
  if (!atomic_load (&probe_found))
    {
      void *h = opened (getenv ("PIPESCOPE_LIB"));
      if (h == NULL)
        h = opened ("libpipescope-probe.so.1");
      Probe p = { 0 };
      if (h != NULL)
        {
          *(void **) &p.step = dlsym (h, "pipescope_process_step");
          *(void **) &p.name = dlsym (h, "pipescope_process_name");
          *(void **) &p.span = dlsym (h, "pipescope_process_span");
          *(void **) &p.now = dlsym (h, "pipescope_now_ns");
        }
      if (p.step && p.name && p.span && p.now)
        {
          probe = p;
          for (int k = 0; k < PP_NCCL_N_PARTS; k++)
            {
              char n[32];
              snprintf (n, sizeof n, "nccl:%s", pp_nccl_part_name (k));
              part_name[k] = p.name (n);
            }
          kernel_name = p.name ("nccl:kernel");
          for (int s = 0; s < 32; s++)
            state_name[s] = state_label (s) ? p.name (state_label (s)) : 0;
          atomic_store (&probe_found, 1);
        }
      /* a handle found stays open: the job holds the library anyway */
    }
  pthread_mutex_unlock (&probe_lock);
  return atomic_load (&probe_found);
}

/* Whether the probe library is there for an event of type.  A job under
 * `profile` (PIPESCOPE_LIB set) may create a communicator before its hook
 * loads the library: then every 64th operation looks again, until found. */
static int
probe_ready (uint64_t type)
{
  static _Atomic unsigned looks;
  if (atomic_load (&probe_found))
    return 1;
  if ((type != PP_NCCL_P2P && type != PP_NCCL_COLL) || atomic_fetch_add (&looks, 1) % 64 != 0)
    return 0;
  return find_probe ();
}

static int64_t
now_ns (void)
{
  return test_clock ? test_clock () : probe.now ();
}

/* Tests drive the plugin on a clock of their own (NULL: the probe's). */
EXPORT void pp_nccl_plugin_test_clock (int64_t (*clock) (void));
EXPORT void
pp_nccl_plugin_test_clock (int64_t (*clock) (void))
{
  test_clock = clock;
}

/* ---- the GPU's clock ----------------------------------------------------- */

/* Kernel times come as the GPU's globaltimer.  The plugin sees each stamp
 * some time after the GPU wrote it, so the smallest (host now - stamp)
 * seen is the offset from the GPU's clock to ours, late by at most the
 * quickest sighting. */
static _Atomic int64_t gpu_offset = INT64_MAX;

static void
gpu_seen (uint64_t stamp, int64_t host_ns)
{
  if (stamp == 0 || stamp > (uint64_t) INT64_MAX)
    return;
  int64_t off = host_ns - (int64_t) stamp, cur = atomic_load (&gpu_offset);
  while (off < cur && !atomic_compare_exchange_weak (&gpu_offset, &cur, off))
    ;
}

static int64_t
gpu_to_host (uint64_t stamp)
{
  return (int64_t) stamp + atomic_load (&gpu_offset);
}

/* ---- a communicator's pools ------------------------------------------------ */

enum { OBJ_NONE, OBJ_OP, OBJ_PROXY, OBJ_STEP, OBJ_KCH };

typedef struct Ctx Ctx;

typedef struct {
  uint8_t what;        /* OBJ_*; OBJ_NONE while the slot is free */
  Ctx    *ctx;
} Head;

typedef struct {
  Head            h;
  uint32_t        name;           /* "nccl:<func>" */
  int             peer;           /* p2p: the peer; a collective: its root, or -1 */
  int             wait_peer;      /* its waits' peer: a p2p's; -1 for a collective (many) */
  int             step;
  uint32_t        seq;
  uint64_t        bytes;
  int             host_stopped;   /* NCCL stopped the event (it enqueued the operation) */
  int             active;         /* children started, not stopped */
  int             children;
  int             kch_expected, kch_done;
  int64_t         t0, t1;         /* the children's times, on our clock */
  PpNcclIntervals iv;             /* its steps' states, for the split (iv.iv NULL: none yet) */
} Op;

typedef struct {
  Head    h;
  Op     *op;
} Proxy;

typedef struct {
  Head    h;
  Proxy  *px;
  int     state;                  /* the current state, 0 before the first */
  int64_t since;
  uint64_t trans;
} Step;

typedef struct {
  Head     h;
  Op      *op;
  uint64_t start, stop;           /* GPU stamps */
} Kch;

struct Ctx {
  pthread_mutex_t lock;
  uint32_t        tag;            /* the communicator: its hash folded to 32 bits, never 0 */
  int             rank, nranks, device, mask, step_spans;
  uint32_t       *seq;            /* 2 * nranks: sends to, receives from each peer */
  Op              ops[N_OPS];
  Proxy           proxies[N_PROXIES];
  Step            steps[N_STEPS];
  Kch             kch[N_KCH];
  size_t          next_op, next_proxy, next_step, next_kch;
  struct { const char *func; uint32_t id; } funcs[N_FUNCS];
  int             n_funcs;
  uint64_t        dropped, untimed, torn;
  PpNcclLogger    log;
};

/* A free slot of a pool (scanning on from the last one given), or NULL. */
#define TAKE(ctx, pool, n, next, kind)                                \
  ({                                                                   \
    __typeof__ (&(ctx)->pool[0]) got_ = NULL;                          \
    for (size_t k_ = 0; k_ < (n) && got_ == NULL; k_++)                \
      {                                                                \
        size_t i_ = ((ctx)->next + k_) % (n);                          \
        if ((ctx)->pool[i_].h.what == OBJ_NONE)                        \
          {                                                            \
            got_ = &(ctx)->pool[i_];                                   \
            (ctx)->next = (i_ + 1) % (n);                              \
          }                                                            \
      }                                                                \
    if (got_ != NULL)                                                  \
      {                                                                \
        memset (got_, 0, sizeof *got_);                                \
        got_->h.what = (kind);                                         \
        got_->h.ctx = (ctx);                                           \
      }                                                                \
    else                                                               \
      (ctx)->dropped++;                                                \
    got_;                                                              \
  })

/* Whether p is the start of a live slot of kind in ctx's pool. */
static int
in_pool (const Ctx *ctx, const void *p, const void *pool, size_t size, size_t n, int kind)
{
  uintptr_t c = (uintptr_t) p, base = (uintptr_t) pool;
  if (c < base || c >= base + size * n || (c - base) % size != 0)
    return 0;
  const Head *h = p;
  return h->what == kind && h->ctx == ctx;
}

static Op *
op_of (Ctx *ctx, void *parent)
{
  return in_pool (ctx, parent, ctx->ops, sizeof ctx->ops[0], N_OPS, OBJ_OP) ? parent : NULL;
}

static void
span (Ctx *ctx, int kind, uint32_t name, int mb, int step, int peer, uint64_t bytes, int device,
      int64_t a, int64_t b)
{
  /* the own rank in the communicator as the stage of an operation or a
   * kernel (the offline matcher pairs a send with its receive by it); a
   * wait's stage is none */
  if (b >= a)
    (void) probe.span (kind, name, kind == PP_SPAN_WAIT ? -1 : ctx->rank, mb, step, peer, bytes,
                       device, ctx->tag, a, b);
}

static void
op_free (Op *op)
{
  free (op->iv.iv);
  memset (op, 0, sizeof *op);
}

/* The operation's spans: its split, then itself. */
static void
op_emit (Ctx *ctx, Op *op)
{
  int mb = (int) (op->seq & SEQ_MASK);
  size_t n_iv = op->iv.iv != NULL ? op->iv.n : 0;
  if (n_iv > 0)
    {
      /* on the stack for the usual few intervals */
      PpNcclInterval s_scratch[2 * 32 + 2], s_runs[2 * 32 + 1];
      PpNcclInterval *scratch = n_iv <= 32 ? s_scratch : malloc ((2 * n_iv + 2) * sizeof *scratch);
      PpNcclInterval *runs = n_iv <= 32 ? s_runs : malloc ((2 * n_iv + 1) * sizeof *runs);
      if (scratch != NULL && runs != NULL)
        {
          size_t n = pp_nccl_split (op->iv.iv, n_iv, op->iv.first_data, runs, 2 * n_iv + 1, NULL, scratch);
          for (size_t k = 0; k < n; k++)
            span (ctx, PP_SPAN_WAIT, part_name[runs[k].part], -1, op->step, op->wait_peer, 0, 0xffff,
                  runs[k].start_ns, runs[k].end_ns);
        }
      else
        ctx->dropped++;
      if (scratch != s_scratch)
        free (scratch);
      if (runs != s_runs)
        free (runs);
    }
  span (ctx, PP_SPAN_KERNEL, op->name, mb, op->step, op->peer, op->bytes, ctx->device,
        op->t0, op->t1);
}

/* Emits and frees op once NCCL has stopped it and its children have all
 * stopped (at least one came: until then more may). */
static void
op_maybe_done (Ctx *ctx, Op *op)
{
  if (op == NULL || !op->host_stopped || op->active > 0 || op->children == 0
      || op->kch_done < op->kch_expected)
    return;
  op_emit (ctx, op);
  op_free (op);
}

static void
op_child (Op *op, int64_t a, int64_t b)
{
  if (op == NULL || b < a)
    return;
  if (op->t1 == 0 || a < op->t0)
    op->t0 = a;
  if (b > op->t1)
    op->t1 = b;
}

static void
op_interval (Ctx *ctx, Op *op, int64_t a, int64_t b, int part)
{
  if (op == NULL || part < 0 || b <= a)
    return;
  if (op->iv.max == 0)
    pp_nccl_intervals_init (&op->iv, MAX_IV);
  if (pp_nccl_intervals_add (&op->iv, a, b, part) != 0)
    ctx->dropped++;
}

/* A new operation's slot: a free one, else the oldest whose children have
 * all stopped (an operation no child came for: no times, counted). */
static Op *
op_take (Ctx *ctx)
{
  Op *op = NULL;
  for (size_t k = 0; k < N_OPS && op == NULL; k++)
    {
      Op *o = &ctx->ops[(ctx->next_op + k) % N_OPS];
      if (o->h.what == OBJ_NONE || (o->host_stopped && o->active == 0))
        op = o;
    }
  if (op == NULL)
    {
      ctx->dropped++;
      return NULL;
    }
  if (op->h.what == OBJ_OP)
    {
      if (op->children > 0)
        op_emit (ctx, op);
      else
        ctx->untimed++;
      op_free (op);
    }
  ctx->next_op = (size_t) (op - ctx->ops + 1) % N_OPS;
  op->h.what = OBJ_OP;
  op->h.ctx = ctx;
  return op;
}

static uint32_t
func_name (Ctx *ctx, const char *func)
{
  char n[64];
  if (func == NULL)
    func = "?";
  for (int k = 0; k < ctx->n_funcs; k++)
    if (ctx->funcs[k].func == func)   /* NCCL's names are constant strings */
      return ctx->funcs[k].id;
  snprintf (n, sizeof n, "nccl:%s", func);
  uint32_t id = probe.name (n);
  if (ctx->n_funcs < N_FUNCS)
    ctx->funcs[ctx->n_funcs++] = (__typeof__ (ctx->funcs[0])) { func, id };
  return id;
}

/* Bytes of one element of an NCCL datatype by its name ("ncclFloat32",
 * "ncclBfloat16", "ncclFloat8e4m3", ...); 1 where the name says none. */
static uint64_t
type_size (const char *t)
{
  if (t == NULL)
    return 1;
  if (strstr (t, "64"))
    return 8;
  if (strstr (t, "32"))
    return 4;
  if (strstr (t, "16"))
    return 2;
  return 1;
}

/* ---- events, in one form for every version ------------------------------- */

typedef struct {
  uint64_t    type;
  void       *parent;
  const char *func, *datatype;
  size_t      count;
  int         peer, root, n_channels;
  uint64_t    seq;
  pid_t       pid;
  int         channel, is_send;
  uint64_t    timer;
} Ev;

static void *
start_op (Ctx *ctx, const Ev *e, int p2p)
{
  Op *op = op_take (ctx);
  if (op == NULL)
    return NULL;
  op->name = func_name (ctx, e->func);
  op->bytes = (uint64_t) e->count * type_size (e->datatype);
  op->step = probe.step ();
  if (op->step < 0)
    op->step = 0;
  if (p2p)
    {
      int send = e->func != NULL && strcmp (e->func, "Send") == 0;
      op->peer = op->wait_peer = e->peer;
      if (e->peer >= 0 && e->peer < ctx->nranks && ctx->seq != NULL)
        op->seq = ctx->seq[2 * e->peer + !send]++;
      /* with kernel-channel events NCCL gives the channels each direction runs */
      op->kch_expected = (ctx->mask & PP_NCCL_KERNEL_CH) && e->n_channels > 0 ? e->n_channels : 0;
    }
  else
    {
      op->peer = e->root;
      op->wait_peer = -1;
      op->seq = (uint32_t) e->seq;
      op->kch_expected = (ctx->mask & PP_NCCL_KERNEL_CH) && e->n_channels > 0 ? e->n_channels : 0;
    }
  return op;
}

static void *
start_proxy (Ctx *ctx, const Ev *e, int64_t now)
{
  Op *op = e->pid == getpid () ? op_of (ctx, e->parent) : NULL;
  if (op == NULL)
    {
      /* its operation is another process's (a proxy serving it) or was
       * not recorded: the proxy's own, named for its direction */
      if ((op = op_take (ctx)) == NULL)
        return NULL;
      op->name = func_name (ctx, e->is_send ? "Send" : "Recv");
      op->peer = op->wait_peer = e->peer;
      op->host_stopped = 1;
      op->step = probe.step () < 0 ? 0 : probe.step ();
    }
  Proxy *px = TAKE (ctx, proxies, N_PROXIES, next_proxy, OBJ_PROXY);
  if (px == NULL)
    {
      op_maybe_done (ctx, op);
      return NULL;
    }
  px->op = op;
  op->active++;
  op->children++;
  op_child (op, now, now);
  return px;
}

static void *
start_step (Ctx *ctx, const Ev *e)
{
  if (!in_pool (ctx, e->parent, ctx->proxies, sizeof ctx->proxies[0], N_PROXIES, OBJ_PROXY))
    return NULL;
  Step *st = TAKE (ctx, steps, N_STEPS, next_step, OBJ_STEP);
  if (st != NULL)
    st->px = e->parent;
  return st;
}

static void *
start_kch (Ctx *ctx, const Ev *e, int64_t now)
{
  Op *op = op_of (ctx, e->parent);
  if (op == NULL)
    return NULL;
  Kch *k = TAKE (ctx, kch, N_KCH, next_kch, OBJ_KCH);
  if (k == NULL)
    return NULL;
  k->op = op;
  k->start = e->timer;
  gpu_seen (e->timer, now);
  op->active++;
  op->children++;
  return k;
}

static PpNcclResult
start_event (void *context, void **handle, const Ev *e)
{
  Ctx *ctx = context;
  void *h = NULL;
  if (handle == NULL)
    return PP_NCCL_SUCCESS;
  *handle = NULL;
  if (ctx == NULL || !probe_ready (e->type))
    return PP_NCCL_SUCCESS;
  int64_t now = now_ns ();
  pthread_mutex_lock (&ctx->lock);
  switch (e->type)
    {
    case PP_NCCL_P2P: h = start_op (ctx, e, 1); break;
    case PP_NCCL_COLL: h = start_op (ctx, e, 0); break;
    case PP_NCCL_PROXY_OP: h = start_proxy (ctx, e, now); break;
    case PP_NCCL_PROXY_STEP: h = start_step (ctx, e); break;
    case PP_NCCL_KERNEL_CH: h = start_kch (ctx, e, now); break;
    default: break;   /* groups, API calls, control: nothing kept */
    }
  if (h != NULL && e->type == PP_NCCL_PROXY_STEP)
    ((Step *) h)->since = now;
  pthread_mutex_unlock (&ctx->lock);
  *handle = h;
  return PP_NCCL_SUCCESS;
}

/* A step's state from since to now: a span of its own, and an interval
 * of its operation's split. */
static void
step_close (Ctx *ctx, Step *st, int64_t now)
{
  int part = pp_nccl_state_part (st->state);
  if (st->state == 0 || part < 0 || st->px->h.what != OBJ_PROXY)
    return;   /* no state yet, or its proxy operation already stopped */
  Op *op = st->px->op;
  op_interval (ctx, op, st->since, now, part);
  if (ctx->step_spans && st->state < 32)
    span (ctx, PP_SPAN_WAIT, state_name[st->state], -1, op->step, op->wait_peer, st->trans, 0xffff,
          st->since, now);
}

static PpNcclResult
stop_event (void *handle)
{
  Head *h = handle;
  if (h == NULL || h->ctx == NULL)
    return PP_NCCL_SUCCESS;
  Ctx *ctx = h->ctx;
  int64_t now = now_ns ();
  pthread_mutex_lock (&ctx->lock);
  switch (h->what)
    {
    case OBJ_OP:
      {
        Op *op = handle;
        op->host_stopped = 1;
        op_maybe_done (ctx, op);
        break;
      }
    case OBJ_PROXY:
      {
        Proxy *px = handle;
        Op *op = px->op;
        memset (px, 0, sizeof *px);
        op_child (op, now, now);
        op->active--;
        op_maybe_done (ctx, op);
        break;
      }
    case OBJ_STEP:
      {
        Step *st = handle;
        step_close (ctx, st, now);
        memset (st, 0, sizeof *st);
        break;
      }
    case OBJ_KCH:
      {
        Kch *k = handle;
        Op *op = k->op;
        if (k->start != 0 && k->stop >= k->start)
          {
            int64_t a = gpu_to_host (k->start), b = gpu_to_host (k->stop);
            span (ctx, PP_SPAN_KERNEL, kernel_name, (int) (op->seq & SEQ_MASK), op->step, op->peer,
                  0, ctx->device, a, b);
            op_child (op, a, b);
          }
        memset (k, 0, sizeof *k);
        op->kch_done++;
        op->active--;
        op_maybe_done (ctx, op);
        break;
      }
    default:
      break;
    }
  pthread_mutex_unlock (&ctx->lock);
  return PP_NCCL_SUCCESS;
}

/* trans: the step's bytes (proxy steps), timer: the kernel's end (kernel
 * channels): the two state arguments read, the same in every version. */
static PpNcclResult
record_state (void *handle, int state, const size_t *trans, const uint64_t *timer)
{
  Head *h = handle;
  if (h == NULL || h->ctx == NULL)
    return PP_NCCL_SUCCESS;
  Ctx *ctx = h->ctx;
  int64_t now = now_ns ();
  pthread_mutex_lock (&ctx->lock);
  if (h->what == OBJ_STEP && pp_nccl_state_part (state) >= 0)
    {
      Step *st = handle;
      step_close (ctx, st, now);
      st->state = state;
      st->since = now;
      if (trans != NULL)
        st->trans = *trans;
    }
  else if (h->what == OBJ_KCH && state == PP_NCCL_KERNEL_CH_STOP && timer != NULL)
    {
      Kch *k = handle;
      k->stop = *timer;
      gpu_seen (*timer, now);
    }
  pthread_mutex_unlock (&ctx->lock);
  return PP_NCCL_SUCCESS;
}

/* ---- init and finalize ------------------------------------------------------ */

static int
env_flag (const char *name, int dflt)
{
  const char *v = getenv (name);
  if (v == NULL || v[0] == '\0')
    return dflt;
  return !(strcmp (v, "0") == 0 || strcasecmp (v, "off") == 0 || strcasecmp (v, "no") == 0
           || strcasecmp (v, "false") == 0);
}

/* The CUDA device of the thread that creates the communicator, where the
 * job has the driver loaded; 0xffff (none said) otherwise. */
static int
current_device (void)
{
  void *cuda = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int (*get) (int *) = NULL;
  int dev = -1;
  if (cuda == NULL)
    return 0xffff;
  *(void **) &get = dlsym (cuda, "cuCtxGetDevice");
  if (get == NULL || get (&dev) != 0 || dev < 0)
    dev = 0xffff;
  dlclose (cuda);
  return dev;
}

static PpNcclResult
init_common (void **context, uint64_t comm_hash, int *mask, int nranks, int rank, PpNcclLogger log)
{
  if (context == NULL || mask == NULL)
    return PP_NCCL_INTERNAL_ERROR;
  *context = NULL;
  *mask = 0;
  const char *lib = getenv ("PIPESCOPE_LIB");
  if (!env_flag ("PIPESCOPE_NCCL", 1) || (!find_probe () && (lib == NULL || lib[0] == '\0')))
    return PP_NCCL_SUCCESS;   /* nothing to record into, now or later: NCCL calls nothing */
  Ctx *ctx = calloc (1, sizeof *ctx);
  if (ctx == NULL)
    return PP_NCCL_SUCCESS;
  pthread_mutex_init (&ctx->lock, NULL);
  uint32_t tag = (uint32_t) (comm_hash ^ (comm_hash >> 32));
  ctx->tag = tag ? tag : 1;
  ctx->rank = rank;
  ctx->nranks = nranks > 0 ? nranks : 0;
  ctx->seq = ctx->nranks ? calloc (2 * (size_t) ctx->nranks, sizeof *ctx->seq) : NULL;
  ctx->device = current_device ();
  ctx->log = log;
  ctx->mask = PP_NCCL_P2P | PP_NCCL_COLL;
  if (env_flag ("PIPESCOPE_NCCL_STEPS", 1))
    ctx->mask |= PP_NCCL_PROXY_OP | PP_NCCL_PROXY_STEP;
  if (env_flag ("PIPESCOPE_NCCL_KERNEL", 0))
    ctx->mask |= PP_NCCL_KERNEL_CH;
  ctx->step_spans = env_flag ("PIPESCOPE_NCCL_STEP_SPANS", 1);
  *mask = ctx->mask;
  *context = ctx;
  return PP_NCCL_SUCCESS;
}

static PpNcclResult
finalize (void *context)
{
  Ctx *ctx = context;
  if (ctx == NULL)
    return PP_NCCL_SUCCESS;
  pthread_mutex_lock (&ctx->lock);
  for (size_t k = 0; k < N_OPS; k++)
    if (ctx->ops[k].h.what == OBJ_OP)
      {
        Op *op = &ctx->ops[k];
        if (op->host_stopped && op->active == 0 && op->children > 0)
          op_emit (ctx, op);       /* whole, but still waiting for kernel channels */
        else if (op->active > 0 || !op->host_stopped)
          ctx->torn++;             /* cut by the teardown: not recorded */
        else
          ctx->untimed++;
        op_free (op);
      }
  pthread_mutex_unlock (&ctx->lock);
  if (ctx->log != NULL && (ctx->dropped || ctx->untimed || ctx->torn))
    ctx->log (3 /* INFO */, 1 /* INIT */, __FILE__, __LINE__,
              "pipescope: rank %d: NCCL operations not recorded: %llu without times, %llu cut by "
              "the communicator's end; %llu events dropped", ctx->rank,
              (unsigned long long) ctx->untimed, (unsigned long long) ctx->torn,
              (unsigned long long) ctx->dropped);
  pthread_mutex_destroy (&ctx->lock);
  free (ctx->seq);
  free (ctx);
  return PP_NCCL_SUCCESS;
}

/* e from NCCL's descriptor d: the same member names in every version,
 * at each version's own places. */
#define EV_FROM_DESCR(e, d)                                                              \
  do {                                                                                   \
    (e).type = (d)->type;                                                                \
    (e).parent = (d)->parentObj;                                                         \
    switch ((d)->type)                                                                   \
      {                                                                                  \
      case PP_NCCL_COLL:                                                                 \
        (e).func = (d)->coll.func, (e).datatype = (d)->coll.datatype;                    \
        (e).count = (d)->coll.count, (e).root = (d)->coll.root;                          \
        (e).seq = (d)->coll.seqNumber, (e).n_channels = (d)->coll.nChannels;             \
        break;                                                                           \
      case PP_NCCL_P2P:                                                                  \
        (e).func = (d)->p2p.func, (e).datatype = (d)->p2p.datatype;                      \
        (e).count = (d)->p2p.count, (e).peer = (d)->p2p.peer;                            \
        (e).n_channels = (d)->p2p.nChannels;                                             \
        break;                                                                           \
      case PP_NCCL_PROXY_OP:                                                             \
        (e).pid = (d)->proxyOp.pid, (e).channel = (d)->proxyOp.channelId;                \
        (e).peer = (d)->proxyOp.peer, (e).is_send = (d)->proxyOp.isSend;                 \
        break;                                                                           \
      case PP_NCCL_KERNEL_CH:                                                            \
        (e).channel = (d)->kernelCh.channelId, (e).timer = (d)->kernelCh.pTimer;         \
        break;                                                                           \
      default:                                                                           \
        break;                                                                           \
      }                                                                                  \
  } while (0)

/* ---- version 4 --------------------------------------------------------------- */

static PpNcclResult
init_v4 (void **context, int *mask, const char *comm_name, uint64_t comm_hash, int n_nodes, int nranks,
         int rank, PpNcclLogger log)
{
  (void) comm_name;
  (void) n_nodes;
  return init_common (context, comm_hash, mask, nranks, rank, log);
}

static PpNcclResult
start_v4 (void *context, void **handle, PpNcclDescrV4 *d)
{
  Ev e = { 0 };
  if (d == NULL)
    return handle ? (*handle = NULL, PP_NCCL_SUCCESS) : PP_NCCL_SUCCESS;
  EV_FROM_DESCR (e, d);
  return start_event (context, handle, &e);
}

static PpNcclResult
record_v4 (void *handle, int state, PpNcclStateArgsV4 *a)
{
  return record_state (handle, state, a ? &a->proxyStep.transSize : NULL, a ? &a->kernelCh.pTimer : NULL);
}

EXPORT PpNcclProfilerV4 ncclProfiler_v4 = {
  "pipescope", init_v4, start_v4, stop_event, record_v4, finalize,
};

/* ---- versions 5 and 6 ---------------------------------------------------------- */

static PpNcclResult
init_v5 (void **context, uint64_t comm_id, int *mask, const char *comm_name, int n_nodes, int nranks,
         int rank, PpNcclLogger log)
{
  (void) comm_name;
  (void) n_nodes;
  return init_common (context, comm_id, mask, nranks, rank, log);
}

static PpNcclResult
start_v5 (void *context, void **handle, PpNcclDescrV5 *d)
{
  Ev e = { 0 };
  if (d == NULL)
    return handle ? (*handle = NULL, PP_NCCL_SUCCESS) : PP_NCCL_SUCCESS;
  EV_FROM_DESCR (e, d);
  return start_event (context, handle, &e);
}

static PpNcclResult
record_v5 (void *handle, int state, PpNcclStateArgsV5 *a)
{
  return record_state (handle, state, a ? &a->proxyStep.transSize : NULL, a ? &a->kernelCh.pTimer : NULL);
}

EXPORT PpNcclProfilerV5 ncclProfiler_v5 = {
  "pipescope", init_v5, start_v5, stop_event, record_v5, finalize,
};

EXPORT PpNcclProfilerV6 ncclProfiler_v6 = {
  "pipescope", init_v5, start_v5, stop_event, record_v5, finalize,
};
