/* pp-import-kineto.c — torch.profiler (Kineto) traces as one pipescope run
 * (pp-import.h says what becomes what).
 *
 * Each file is parsed (pp-json.c), reduced to the few events that matter
 * (labels, transfers, steps, device work, launches), and freed before the
 * next is read: memory is the largest file plus those events, and all the
 * files' text together is held to one budget (pp_import_budget).  Then the
 * ranks are put together, the plan rebuilt, and everything goes out through
 * the trace writer; nothing of the format is written here. */
#include "pp-import.h"
#include "pp-import-chrome.h"
#include "pp-import-hash.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pp-action.h"
#include "pp-json.h"
#include "pp-schedule.h"
#include "pp-simulate.h"
#include "pp-suggest.h"

/* What an event is for us. */
enum {
  EV_BLOCK,     /* F, B, I, W, OVERLAP_F_B (a PP: label, or GPipe's Forward/Backward) */
  EV_LABEL_XFER,/* PP:<s>SEND_F<m> ... : which transfer the operations inside it are */
  EV_XFER,      /* a point-to-point operation */
  EV_STEP,      /* ProfilerStep#N */
  EV_OPT,       /* Optimizer.step#... */
  EV_DEVICE,    /* kernel, copy, memset */
  EV_DP,        /* FSDP's PP:<s>UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD */
};

typedef struct {
  int64_t  start, end;      /* ns, base + ts */
  int64_t  tid;
  int64_t  corr;            /* EV_DEVICE: correlation id, -1 none */
  uint64_t bytes;
  uint32_t name_id;
  uint32_t stream;
  int32_t  what;            /* EV_* */
  int32_t  kind;            /* BLOCK, LABEL_XFER: PpActionKind; XFER: 0 send, 1 recv;
                             * DEVICE: PpSpanKind; STEP: N */
  int32_t  stage, mb;
  int32_t  sub_kind, sub_stage, sub_mb;
  int32_t  level;           /* XFER: 2 gloo:/nccl:, 1 record_param_comms, 0 c10d:: */
  int32_t  step;
  int32_t  peer;
  uint16_t device;
  uint8_t  gpipe;           /* BLOCK: from 'Forward i' / 'Backward i' */
} Ev;

typedef struct {
  int64_t corr, ts, tid;
} Launch;

/* A CPU operation, to tell a block's compute from its waits: the
 * operators (cat cpu_op) and the communication calls (c10d::, gloo:,
 * nccl:, record_param_comms), comm set. */
typedef struct {
  int64_t start, end, tid;
  int32_t comm;
} Op;

typedef struct {
  const char *name;
  int     rank, world;      /* -1: not given; rank: the pipeline rank once placed */
  /* a job of many pipelines (data-parallel replicas): the file's process
   * (distributedInfo.rank, its global rank) and its place, read from the
   * process groups a DeviceMesh names (pg_config: mesh_pp, mesh_dp, ...) */
  int     process;
  int32_t coord[PP_TRACE_MESH_DIMS], size[PP_TRACE_MESH_DIMS];
  bool    placed;           /* coord[PP] read from a mesh_pp group */
  int32_t pid;
  char    host[64];
  char    backend[32];
  Ev     *ev;
  size_t  n_ev, cap_ev;
  Launch *launch;
  size_t  n_launch, cap_launch;
  Op     *op;               /* sorted by start once all are read */
  size_t  n_op, cap_op;
  int     n_pp, n_gpipe;    /* labelled blocks of each flavour */
  int     min_step;         /* least ProfilerStep N, INT32_MAX none */
  int     n_steps;
  /* without ProfilerStep: where the rank's steps began (the step numbers
   * the rank counted, the start of the block that began each), to line
   * the ranks' counts up */
  int     mark_step;        /* -1: no step began with its first block */
  int64_t mark_time;        /* the end of that block */
  int64_t ext_lo, ext_hi;   /* the time its events cover (ev_extent) */
} RankData;

/* interned names */
typedef struct {
  char    **names;          /* [id - 1] */
  uint32_t  n, cap;
  uint32_t *table;          /* open addressing over ids, 0 empty */
  size_t    tcap;
} Names;

typedef struct {
  RankData *ranks;          /* [n] in input order */
  size_t    n;
  const int *rank_of;       /* [P]: the file (index) of each pipeline rank that
                             * gives its order (its first replica), -1 none */
  Names     names;
  size_t    skipped;
} Import;

/* ---- names ---------------------------------------------------------------- */

/* The id of name (interned on first sight), 0 when out of memory. */
static uint32_t
intern (Names *nm, const char *name)
{
  if ((size_t) nm->n * 2 + 2 > nm->tcap)
    {
      size_t nc = nm->tcap ? nm->tcap * 2 : 256;
      uint32_t *t = calloc (nc, sizeof *t);
      if (t == NULL)
        return 0;
      for (uint32_t id = 1; id <= nm->n; id++)
        {
          /* keyed (pp-import-hash.h): a file cannot choose colliding names */
          size_t i = pp_import_hash (nm->names[id - 1]) & (nc - 1), k = 1;
          for (; t[i] != 0; k++)
            i = (i + 1) & (nc - 1);
          t[i] = id;
          pp_import_hash_probed (k);
        }
      free (nm->table);
      nm->table = t;
      nm->tcap = nc;
    }
  size_t i = pp_import_hash (name) & (nm->tcap - 1), k = 1;
  for (; nm->table[i] != 0; k++)
    {
      if (strcmp (nm->names[nm->table[i] - 1], name) == 0)
        {
          pp_import_hash_probed (k);
          return nm->table[i];
        }
      i = (i + 1) & (nm->tcap - 1);
    }
  pp_import_hash_probed (k);
  if (nm->n == nm->cap)
    {
      uint32_t nc = nm->cap ? nm->cap * 2 : 64;
      char **g = realloc (nm->names, nc * sizeof *g);
      if (g == NULL)
        return 0;
      nm->names = g;
      nm->cap = nc;
    }
  char *copy = strdup (name);
  if (copy == NULL)
    return 0;
  nm->names[nm->n++] = copy;
  nm->table[i] = nm->n;
  return nm->n;
}

static void
names_clear (Names *nm)
{
  for (uint32_t i = 0; i < nm->n; i++)
    free (nm->names[i]);
  free (nm->names);
  free (nm->table);
  memset (nm, 0, sizeof *nm);
}

/* ---- one file's events ---------------------------------------------------- */

static bool
push_ev (RankData *rd, const Ev *e)
{
  if (rd->n_ev == rd->cap_ev)
    {
      size_t nc = rd->cap_ev ? rd->cap_ev * 2 : 256;
      Ev *g = realloc (rd->ev, nc * sizeof *g);
      if (g == NULL)
        return false;
      rd->ev = g;
      rd->cap_ev = nc;
    }
  rd->ev[rd->n_ev++] = *e;
  return true;
}

static bool
push_launch (RankData *rd, int64_t corr, int64_t ts, int64_t tid)
{
  if (rd->n_launch == rd->cap_launch)
    {
      size_t nc = rd->cap_launch ? rd->cap_launch * 2 : 256;
      Launch *g = realloc (rd->launch, nc * sizeof *g);
      if (g == NULL)
        return false;
      rd->launch = g;
      rd->cap_launch = nc;
    }
  rd->launch[rd->n_launch++] = (Launch) { corr, ts, tid };
  return true;
}

static bool
push_op (RankData *rd, int64_t start, int64_t end, int64_t tid, bool comm)
{
  if (rd->n_op == rd->cap_op)
    {
      size_t nc = rd->cap_op ? rd->cap_op * 2 : 1024;
      Op *g = realloc (rd->op, nc * sizeof *g);
      if (g == NULL)
        return false;
      rd->op = g;
      rd->cap_op = nc;
    }
  rd->op[rd->n_op++] = (Op) { start, end, tid, comm };
  return true;
}

/* A process group's call or the backend's range: waiting for or moving
 * data, not computing. */
static bool
is_comm_name (const char *name)
{
  return strncmp (name, "c10d::", 6) == 0 || strncmp (name, "gloo:", 5) == 0
         || strncmp (name, "nccl:", 5) == 0 || strcmp (name, "record_param_comms") == 0
         || strncmp (name, "ProcessGroup", 12) == 0;
}

/* base + ts microseconds in ns, false when it makes no sense. */
static bool
time_ns (const PpJsonDoc *d, uint32_t node, int64_t base, int64_t *out)
{
  int64_t us;
  if (!pp_json_scaled (d, node, 3, &us))
    return false;
  if (us > ((int64_t) 1 << 61) || us < -((int64_t) 1 << 61)
      || base > ((int64_t) 1 << 61) || base < -((int64_t) 1 << 61))
    return false;
  *out = base + us;
  return true;
}

static int64_t
int_or (const PpJsonDoc *d, uint32_t node, int64_t dflt)
{
  int64_t v;
  return node != 0 && pp_json_int (d, node, &v) ? v : dflt;
}

/* "Forward 12" / "Backward 3": the kind and micro-batch. */
static bool
gpipe_label (const char *s, int *kind, int *mb)
{
  const char *rest;
  if (strncmp (s, "Forward ", 8) == 0)
    {
      *kind = PP_ACT_F;
      rest = s + 8;
    }
  else if (strncmp (s, "Backward ", 9) == 0)
    {
      *kind = PP_ACT_B;
      rest = s + 9;
    }
  else
    return false;
  long v = 0;
  if (*rest < '0' || *rest > '9')
    return false;
  for (; *rest >= '0' && *rest <= '9'; rest++)
    {
      v = v * 10 + (*rest - '0');
      if (v >= PP_IMPORT_MAX_MICROBATCHES)
        return false;
    }
  if (*rest != '\0')
    return false;
  *mb = (int) v;
  return true;
}

static bool
action_in_bounds (const PpAction *a)
{
  bool ok = a->stage >= 0 && a->stage < PP_IMPORT_MAX_STAGES
            && a->microbatch >= 0 && a->microbatch < PP_IMPORT_MAX_MICROBATCHES;
  if (a->kind == PP_ACT_OVERLAP_F_B)
    ok = ok && a->sub_stage >= 0 && a->sub_stage < PP_IMPORT_MAX_STAGES
         && a->sub_microbatch >= 0 && a->sub_microbatch < PP_IMPORT_MAX_MICROBATCHES;
  return ok;
}

/* The direction of a point-to-point operation's name: 0 send, 1 recv, -1
 * neither; *level says how close to the wire it is. */
static int
xfer_of_name (const char *name, const PpJsonDoc *d, uint32_t args, int *level)
{
  if (strncmp (name, "gloo:", 5) == 0 || strncmp (name, "nccl:", 5) == 0)
    {
      *level = 2;
      const char *op = name + 5;
      if (*op == '_')
        op++;
      if (strcmp (op, "send") == 0)
        return 0;
      if (strncmp (op, "recv", 4) == 0)
        return 1;
      return -1;
    }
  if (strcmp (name, "record_param_comms") == 0)
    {
      *level = 1;
      uint32_t c = pp_json_get (d, args, "Collective name");
      if (pp_json_string_is (d, c, "send") || pp_json_string_is (d, c, "_send"))
        return 0;
      if (pp_json_string_is (d, c, "recv") || pp_json_string_is (d, c, "_recv")
          || pp_json_string_is (d, c, "recvAnysource") || pp_json_string_is (d, c, "recv_any_source"))
        return 1;
      return -1;
    }
  *level = 0;
  if (strcmp (name, "c10d::send") == 0)
    return 0;
  if (strcmp (name, "c10d::recv_") == 0 || strcmp (name, "c10d::recv_any_source_") == 0)
    return 1;
  return -1;
}

static int
dtype_size (const PpJsonDoc *d, uint32_t node)
{
  static const struct { const char *name; int size; } types[] = {
    { "Float", 4 }, { "float", 4 }, { "Half", 2 }, { "BFloat16", 2 }, { "Double", 8 },
    { "Long", 8 }, { "Int", 4 }, { "Short", 2 }, { "Char", 1 }, { "Byte", 1 }, { "Bool", 1 },
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (pp_json_string_is (d, node, types[i].name))
      return types[i].size;
  return 0;
}

/* The process's place from the groups a DeviceMesh made (their pg_desc
 * "mesh_<dim>", torch names them so; pg_config lists the groups the
 * process is in): its coordinate on dim is its index in the group's
 * ranks, the dim's size the group's.  Dims other than pp, dp, tp, cp, ep
 * are not read.  rd->placed when the pp dim was found.  false: a group
 * larger than the world (ws, when said), which no job has. */
static bool
read_mesh_place (const PpJsonDoc *d, uint32_t pgs, int64_t g, int64_t ws, RankData *rd)
{
  static const char *const dims[PP_TRACE_MESH_DIMS] = { "mesh_pp", "mesh_dp", "mesh_tp", "mesh_cp", "mesh_ep" };
  for (int k = 0; k < PP_TRACE_MESH_DIMS; k++)
    {
      rd->coord[k] = 0;
      rd->size[k] = 1;
    }
  if (pgs == 0 || d->nodes[pgs].type != PP_JSON_ARRAY || g < 0)
    return true;
  for (uint32_t pg = d->nodes[pgs].off; pg != 0; pg = d->nodes[pg].next)
    {
      if (d->nodes[pg].type != PP_JSON_OBJECT)
        continue;
      uint32_t desc = pp_json_get (d, pg, "pg_desc"), ranks = pp_json_get (d, pg, "ranks");
      int k = 0;
      while (k < PP_TRACE_MESH_DIMS && !pp_json_string_is (d, desc, dims[k]))
        k++;
      if (k == PP_TRACE_MESH_DIMS || ranks == 0 || d->nodes[ranks].type != PP_JSON_ARRAY)
        continue;
      int32_t idx = -1, cnt = 0;
      for (uint32_t e = d->nodes[ranks].off; e != 0 && cnt < PP_TRACE_MAX_PROCESSES; e = d->nodes[e].next, cnt++)
        {
          int64_t v;
          if (pp_json_int (d, e, &v) && v == g && idx < 0)
            idx = cnt;
        }
      if (idx < 0)
        continue;   /* a group it is not in: not its place */
      if (ws > 0 && cnt > ws)
        return false;
      rd->coord[k] = idx;
      rd->size[k] = cnt;
      if (k == PP_TRACE_MESH_PP)
        rd->placed = true;
    }
  return true;
}

/* Reads one file's document into rd.  PP_EFORMAT with one line for what
 * is not a trace. */
static PpStatus
extract (Import *im, RankData *rd, const PpJsonDoc *d, PpError *err)
{
  uint32_t root = 0, events;
  int64_t base = 0;
  char name[PP_TRACE_STRING_MAX + 1];

  rd->rank = rd->world = -1;
  rd->pid = 0;
  rd->min_step = INT32_MAX;
  if (d->nodes[0].type == PP_JSON_ARRAY)
    events = 0;     /* the bare array form of the Chrome trace format */
  else if (d->nodes[0].type == PP_JSON_OBJECT)
    {
      events = pp_json_get (d, root, "traceEvents");
      if (events == 0 || d->nodes[events].type != PP_JSON_ARRAY)
        return pp_error_set (err, PP_EFORMAT,
                             "%s: not a torch.profiler trace (no traceEvents array)", rd->name);
      uint32_t di = pp_json_get (d, root, "distributedInfo");
      if (di != 0 && d->nodes[di].type == PP_JSON_OBJECT)
        {
          int64_t r = int_or (d, pp_json_get (d, di, "rank"), -1);
          int64_t ws = int_or (d, pp_json_get (d, di, "world_size"), -1);
          if (r < -1 || r >= PP_TRACE_MAX_RANKS || ws < -1 || ws == 0 || ws > PP_TRACE_MAX_RANKS
              || (ws > 0 && r >= ws))
            return pp_error_set (err, PP_EFORMAT,
                                 "%s: distributedInfo says rank %lld of world size %lld: not possible",
                                 rd->name, (long long) r, (long long) ws);
          rd->rank = (int) r;
          rd->world = (int) ws;
          if (!read_mesh_place (d, pp_json_get (d, di, "pg_config"), r, ws, rd))
            return pp_error_set (err, PP_EFORMAT,
                                 "%s: distributedInfo.pg_config has a mesh group larger than its world "
                                 "size %lld: not possible", rd->name, (long long) ws);
          pp_json_string (d, pp_json_get (d, di, "backend"), rd->backend, sizeof rd->backend);
        }
      pp_json_string (d, pp_json_get (d, root, "host_name"), rd->host, sizeof rd->host);
      uint32_t b = pp_json_get (d, root, "baseTimeNanoseconds");
      if (b != 0 && (!pp_json_int (d, b, &base) || base < 0 || base > ((int64_t) 1 << 62)))
        return pp_error_set (err, PP_EFORMAT, "%s: baseTimeNanoseconds is not a time", rd->name);
    }
  else
    return pp_error_set (err, PP_EFORMAT, "%s: not a torch.profiler trace (a JSON %s)", rd->name,
                         d->nodes[0].type == PP_JSON_STRING ? "string" : "scalar");

  for (uint32_t e = d->nodes[events].off; e != 0; e = d->nodes[e].next)
    {
      if (d->nodes[e].type != PP_JSON_OBJECT)
        {
          im->skipped++;
          continue;
        }
      uint32_t ph = pp_json_get (d, e, "ph");
      uint32_t nm = pp_json_get (d, e, "name");
      uint32_t cat = pp_json_get (d, e, "cat");
      uint32_t args = pp_json_get (d, e, "args");
      int64_t ts, dur = 0;

      /* the launch end of a flow from a CPU call to its kernel */
      if ((pp_json_string_is (d, ph, "s")) && pp_json_string_is (d, cat, "ac2g"))
        {
          int64_t id;
          if (pp_json_int (d, pp_json_get (d, e, "id"), &id)
              && time_ns (d, pp_json_get (d, e, "ts"), base, &ts))
            if (!push_launch (rd, id, ts, int_or (d, pp_json_get (d, e, "tid"), -1)))
              goto nomem;
          continue;
        }
      if (!pp_json_string_is (d, ph, "X"))
        continue;
      if (pp_json_string (d, nm, name, sizeof name) < 0)
        continue;
      if (!time_ns (d, pp_json_get (d, e, "ts"), base, &ts))
        {
          im->skipped++;
          continue;
        }
      uint32_t dn = pp_json_get (d, e, "dur");
      if (dn != 0 && (!pp_json_scaled (d, dn, 3, &dur) || dur < 0 || dur > ((int64_t) 1 << 50)))
        {
          im->skipped++;
          continue;
        }

      Ev ev;
      memset (&ev, 0, sizeof ev);
      ev.start = ts;
      ev.end = ts + dur;
      ev.tid = int_or (d, pp_json_get (d, e, "tid"), -1);
      ev.corr = -1;
      ev.stage = ev.mb = ev.sub_kind = ev.sub_stage = ev.sub_mb = -1;
      ev.step = -1;
      ev.peer = -1;
      ev.device = 0xffff;

      bool gpu = pp_json_string_is (d, cat, "kernel") || pp_json_string_is (d, cat, "gpu_memcpy")
                 || pp_json_string_is (d, cat, "gpu_memset");
      if (gpu)
        {
          ev.what = EV_DEVICE;
          ev.kind = pp_json_string_is (d, cat, "kernel") ? PP_SPAN_KERNEL
                    : pp_json_string_is (d, cat, "gpu_memcpy") ? PP_SPAN_MEMCPY : PP_SPAN_MEMSET;
          ev.corr = int_or (d, pp_json_get (d, args, "correlation"), -1);
          int64_t dev = int_or (d, pp_json_get (d, args, "device"), int_or (d, pp_json_get (d, e, "pid"), 0));
          int64_t stream = int_or (d, pp_json_get (d, args, "stream"), ev.tid);
          ev.device = dev >= 0 && dev < 0xffff ? (uint16_t) dev : 0;
          ev.stream = stream > 0 && stream < UINT32_MAX ? (uint32_t) stream : 0;
          int64_t bytes = int_or (d, pp_json_get (d, args, "bytes"), 0);
          ev.bytes = bytes > 0 ? (uint64_t) bytes : 0;
          ev.name_id = intern (&im->names, name);
          if (ev.name_id == 0 || !push_ev (rd, &ev))
            goto nomem;
          continue;
        }

      /* a CPU call that launched device work */
      uint32_t corr = pp_json_get (d, args, "correlation");
      if (corr != 0 && (pp_json_string_is (d, cat, "cuda_runtime") || pp_json_string_is (d, cat, "cuda_driver")
                        || pp_json_string_is (d, cat, "runtime")))
        {
          int64_t c;
          if (pp_json_int (d, corr, &c) && !push_launch (rd, c, ts, ev.tid))
            goto nomem;
          continue;
        }

      if (rd->pid == 0)
        {
          int64_t pid = int_or (d, pp_json_get (d, e, "pid"), 0);
          if (pid > 0 && pid < INT32_MAX)
            rd->pid = (int32_t) pid;
        }

      /* the GPU side of a record_function range (CUDA): the CPU side is
       * the block, its kernels come under it by correlation */
      if (pp_json_string_is (d, cat, "gpu_user_annotation"))
        continue;
      /* the label, cut at its first comma (an NVTX suffix: ", seq = 5") */
      char *comma = strchr (name, ',');
      if (comma)
        *comma = '\0';

      int level, dir;
      if (strncmp (name, "PP:", 3) == 0)
        {
          PpAction a;
          if (pp_action_parse (name + 3, &a, NULL) != PP_OK)
            continue;   /* WAIT_SEND_F0, ... */
          if (a.kind == PP_ACT_UNSHARD || a.kind == PP_ACT_RESHARD || a.kind == PP_ACT_REDUCE_GRAD
              || a.kind == PP_ACT_WAIT_REDUCE_GRAD)
            {
              /* data-parallel communication: a block of its own, not the
               * pipeline's (it names a stage, no micro-batch) */
              if (a.stage < 0 || a.stage >= PP_IMPORT_MAX_STAGES)
                {
                  im->skipped++;
                  continue;
                }
              ev.what = EV_DP;
              a.microbatch = -1;
            }
          else if (pp_action_is_compute (&a))
            {
              if (!action_in_bounds (&a))
                {
                  im->skipped++;
                  continue;
                }
              ev.what = EV_BLOCK;
              rd->n_pp++;
            }
          else if (a.kind == PP_ACT_SEND_F || a.kind == PP_ACT_RECV_F
                   || a.kind == PP_ACT_SEND_B || a.kind == PP_ACT_RECV_B)
            {
              if (!action_in_bounds (&a))
                {
                  im->skipped++;
                  continue;
                }
              ev.what = EV_LABEL_XFER;
            }
          else
            continue;
          ev.kind = a.kind;
          ev.stage = a.stage;
          ev.mb = a.microbatch;
          ev.sub_kind = a.sub_kind;
          ev.sub_stage = a.sub_stage;
          ev.sub_mb = a.sub_microbatch;
        }
      else if (gpipe_label (name, &ev.kind, &ev.mb))
        {
          ev.what = EV_BLOCK;
          ev.gpipe = 1;
          rd->n_gpipe++;
        }
      else if (strncmp (name, "ProfilerStep#", 13) == 0)
        {
          /* digits only; a number no training loop reaches (the steps
           * are sized by those present, but int32 arithmetic on them is
           * not) makes no sense: left out and counted */
          const char *p = name + 13;
          long n = 0;
          if (*p == '\0')
            continue;
          for (; *p >= '0' && *p <= '9' && n <= PP_IMPORT_MAX_STEP; p++)
            n = n * 10 + (*p - '0');
          if (*p != '\0' && (*p < '0' || *p > '9'))
            continue;   /* not a step's name */
          if (n > PP_IMPORT_MAX_STEP)
            {
              im->skipped++;
              continue;
            }
          ev.what = EV_STEP;
          ev.kind = (int32_t) n;
          if (n < rd->min_step)
            rd->min_step = (int) n;
          rd->n_steps++;
        }
      else if (strncmp (name, "Optimizer.step#", 15) == 0)
        ev.what = EV_OPT;
      else if ((dir = xfer_of_name (name, d, args, &level)) >= 0)
        {
          if (!push_op (rd, ev.start, ev.end, ev.tid, true))
            goto nomem;
          ev.what = EV_XFER;
          ev.kind = dir;
          ev.level = level;
          if (level == 1)
            {
              int64_t ne = int_or (d, pp_json_get (d, args, "In msg nelems"), 0);
              int sz = dtype_size (d, pp_json_get (d, args, "dtype"));
              if (ne > 0 && ne < ((int64_t) 1 << 40))
                ev.bytes = (uint64_t) ne * (uint64_t) sz;
            }
        }
      else
        {
          /* the operators between a block's waits: its compute */
          bool comm = is_comm_name (name);
          if ((comm || pp_json_string_is (d, cat, "cpu_op") || pp_json_string_is (d, cat, "Operator"))
              && !push_op (rd, ev.start, ev.end, ev.tid, comm))
            goto nomem;
          continue;
        }
      ev.name_id = intern (&im->names, name);
      if (ev.name_id == 0 || !push_ev (rd, &ev))
        goto nomem;
    }
  return PP_OK;
nomem:
  return pp_error_set (err, PP_ENOMEM, "%s: out of memory", rd->name);
}

/* ---- putting the ranks together ------------------------------------------ */

/* The time the file's events cover, into rd->ext_lo, ext_hi (lo > hi when
 * it has none): once a file, as a rank's many files are merged. */
static void
ev_extent (RankData *rd)
{
  rd->ext_lo = INT64_MAX;
  rd->ext_hi = INT64_MIN;
  for (size_t k = 0; k < rd->n_ev; k++)
    {
      if (rd->ev[k].start < rd->ext_lo) rd->ext_lo = rd->ev[k].start;
      if (rd->ev[k].end > rd->ext_hi) rd->ext_hi = rd->ev[k].end;
    }
}

/* from's events and launches join to's (another time window of its rank);
 * from is emptied. */
static PpStatus
merge_rank (RankData *to, RankData *from, PpError *err)
{
  for (size_t k = 0; k < from->n_ev; k++)
    if (!push_ev (to, &from->ev[k]))
      return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t k = 0; k < from->n_launch; k++)
    if (!push_launch (to, from->launch[k].corr, from->launch[k].ts, from->launch[k].tid))
      return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t k = 0; k < from->n_op; k++)
    if (!push_op (to, from->op[k].start, from->op[k].end, from->op[k].tid, from->op[k].comm))
      return pp_error_set (err, PP_ENOMEM, "out of memory");
  if (from->ext_lo < to->ext_lo) to->ext_lo = from->ext_lo;
  if (from->ext_hi > to->ext_hi) to->ext_hi = from->ext_hi;
  to->n_pp += from->n_pp;
  to->n_gpipe += from->n_gpipe;
  to->n_steps += from->n_steps;
  if (from->min_step < to->min_step)
    to->min_step = from->min_step;
  if (to->pid == 0)
    to->pid = from->pid;
  free (from->ev);
  free (from->launch);
  free (from->op);
  from->ev = NULL;
  from->launch = NULL;
  from->op = NULL;
  from->n_ev = from->n_launch = from->n_op = 0;
  return PP_OK;
}

static int
cmp_ev_start (const void *a, const void *b)
{
  const Ev *x = a, *y = b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  /* the longer (outer) range first */
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1;
  return x->what - y->what;
}

static int
cmp_op_start (const void *a, const void *b)
{
  const Op *x = a, *y = b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end;
}

static int
cmp_launch (const void *a, const void *b)
{
  const Launch *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static const Launch *
find_launch (const RankData *rd, int64_t corr)
{
  size_t lo = 0, hi = rd->n_launch;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rd->launch[mid].corr < corr)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo < rd->n_launch && rd->launch[lo].corr == corr ? &rd->launch[lo] : NULL;
}

/* The rank's block (an index into blocks, sorted by start) running at t,
 * -1 when none. */
static long
block_at (const Ev *const *blocks, size_t n, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (blocks[mid]->start <= t)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo == 0)
    return -1;
  /* blocks do not overlap, but a bad file may make them: look back a little */
  for (size_t k = lo, tries = 0; k > 0 && tries < 4; k--, tries++)
    if (blocks[k - 1]->start <= t && t <= blocks[k - 1]->end)
      return (long) (k - 1);
  return -1;
}

/* Where the walks of compute_extent over a rank's operators (sorted by
 * start) may begin.  A block looks at the operators that start inside its
 * range; a rank's blocks follow one another, so an operator is inside one
 * block, or two that touch at its start.  Blocks that overlap (only a file
 * that lies has them: a thousand nested labels over a thousand operators)
 * would make that a walk per block per operator; so a walk never goes
 * back over what the blocks before the previous one walked, and each
 * operator is looked at twice at most. */
typedef struct {
  size_t floor;      /* past the walks of all blocks but the last */
  size_t prev_end;   /* past the last block's walk */
} OpWalk;

/* The compute of block e, a label's range, into [*start, *end).  PyTorch's
 * label holds more than the stage's call: the wait for its input, until
 * ready (when the receive it waited for was done) or the end of the
 * communication calls of its thread it opens with (*waited then), and
 * GPipe's the sends it closes with.  So the block starts when its waits
 * are over and, where communication calls of its thread close it, ends
 * with its last operator (cpu_op, any thread: a backward's may run on
 * autograd's), else with the label: what pipescope's own runs time, the
 * stage's call, with its Python around the operators. */
static void
compute_extent (const RankData *rd, const Ev *e, int64_t ready, OpWalk *walk, int64_t *start,
                int64_t *end, bool *waited)
{
  int64_t cur = ready > e->start && ready < e->end ? ready : e->start;
  int64_t last = INT64_MIN, last_comm = INT64_MIN;
  bool computed = false;
  size_t lo = 0, hi = rd->n_op, k;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (rd->op[mid].start < e->start)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < walk->floor)
    lo = walk->floor;
  for (k = lo; k < rd->n_op && rd->op[k].start <= e->end; k++)
    {
      const Op *o = &rd->op[k];
      if (o->comm)
        {
          if (o->tid != e->tid)
            continue;
          if (!computed)
            {
              /* a leading wait: the work starts after it */
              if (o->end > cur && o->end < e->end)
                cur = o->end;
            }
          else if (o->start > last_comm)
            last_comm = o->start;
          continue;
        }
      /* an operator of the work (not those before its input was there:
       * GPipe's receive buffers) */
      if (o->end > e->end || (!computed && o->start < cur))
        continue;
      computed = true;
      if (o->end > last)
        last = o->end;
    }
  if (walk->prev_end > walk->floor)
    walk->floor = walk->prev_end;
  walk->prev_end = k;
  *waited = cur > e->start;
  *start = cur;
  *end = computed && last_comm >= last ? last : e->end;
  if (*start >= *end)
    {
      *start = e->start;
      *end = e->end;
      *waited = false;
    }
}

static bool
is_block_of (const Ev *e, bool use_pp)
{
  return e->what == EV_BLOCK && (e->gpipe != 0) != use_pp;
}

static int
span_kind_of (int act)
{
  switch (act)
    {
    case PP_ACT_F: return PP_SPAN_F;
    case PP_ACT_B: return PP_SPAN_B;
    case PP_ACT_I: return PP_SPAN_I;
    case PP_ACT_W: return PP_SPAN_W;
    case PP_ACT_OVERLAP_F_B: return PP_SPAN_OVERLAP_F_B;
    case PP_ACT_SEND_F: return PP_SPAN_SEND_F;
    case PP_ACT_RECV_F: return PP_SPAN_RECV_F;
    case PP_ACT_SEND_B: return PP_SPAN_SEND_B;
    case PP_ACT_RECV_B: return PP_SPAN_RECV_B;
    case PP_ACT_UNSHARD: return PP_SPAN_UNSHARD;
    case PP_ACT_RESHARD: return PP_SPAN_RESHARD;
    case PP_ACT_REDUCE_GRAD: return PP_SPAN_REDUCE_GRAD;
    case PP_ACT_WAIT_REDUCE_GRAD: return PP_SPAN_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

static PpAction
action_of (const Ev *e)
{
  PpAction a = { e->kind, e->stage, e->mb, e->sub_kind, e->sub_stage, e->sub_mb };
  return a;
}

typedef struct {
  int        P, M, V, n_stages;
  int       *stage_rank;     /* [n_stages], -1 unknown */
  PpAction **order;          /* [P] the first step's compute order */
  size_t    *n_order;
  PpSchedule *sched;         /* known or observed; NULL when none */
  int        matched;
} Shape;

static void
shape_clear (Shape *s)
{
  if (s->order)
    for (int r = 0; r < s->P; r++)
      free (s->order[r]);
  free (s->order);
  free (s->n_order);
  free (s->stage_rank);
  pp_schedule_free (s->sched);
  memset (s, 0, sizeof *s);
}

static bool
orders_equal (const PpSchedule *s, const Shape *sh)
{
  if (s->ranks != sh->P || s->n_stages != sh->n_stages)
    return false;
  for (int r = 0; r < sh->P; r++)
    {
      size_t k = 0;
      for (int i = 0; i < s->rank[r].n_actions; i++)
        {
          const PpAction *a = &s->rank[r].actions[i];
          if (!pp_action_is_compute (a))
            continue;
          if (k >= sh->n_order[r] || !pp_action_equal (a, &sh->order[r][k]))
            return false;
          k++;
        }
      if (k != sh->n_order[r])
        return false;
    }
  return true;
}

static bool
small_enough (const Shape *sh)
{
  long work = (long) sh->P * sh->M * (sh->V > 0 ? sh->V : 1);
  return sh->P >= 1 && sh->M >= 1 && work <= PP_SUGGEST_MAX_WORK;
}

/* A known schedule whose order the observed one is, into sh->sched. */
static void
match_known (Shape *sh)
{
  if (!small_enough (sh))
    return;
  for (const PpScheduleInfo *info = pp_schedule_list (); info->name != NULL; info++)
    {
      PpSchedule *s = NULL;
      if (pp_schedule_generate (info->name, sh->P, sh->M, info->takes_v ? sh->V : 0, &s, NULL) != PP_OK)
        continue;
      if (orders_equal (s, sh))
        {
          sh->sched = s;
          sh->matched = 1;
          return;
        }
      pp_schedule_free (s);
    }
}

/* The observed order itself as a schedule, read as PyTorch's CSV through
 * the one CSV reader (which validates it); none when it is not one. */
static void
observed_schedule (Shape *sh)
{
  if (!small_enough (sh))
    return;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  if (f == NULL)
    return;
  for (int r = 0; r < sh->P; r++)
    {
      for (size_t k = 0; k < sh->n_order[r]; k++)
        {
          char a[PP_ACTION_STR_MAX];
          pp_action_to_string (&sh->order[r][k], a, sizeof a);
          fprintf (f, "%s%s", k ? "," : "", a);
        }
      fputc ('\n', f);
    }
  fclose (f);
  f = fmemopen (buf, len, "r");
  if (f != NULL)
    {
      PpSchedule *s = NULL;
      if (pp_schedule_read_csv (f, "observed", &s, NULL) == PP_OK)
        {
          if (s->ranks == sh->P && s->n_stages == sh->n_stages)
            sh->sched = s;
          else
            pp_schedule_free (s);
        }
      fclose (f);
    }
  free (buf);
}

/* Per-stage mean costs (seconds) of the blocks as imported (their compute,
 * not the waits their labels held), for the plan's timeline. */
static PpCostModel *
measured_costs (const PpSpan *spans, size_t n_spans, const Shape *sh)
{
  int S = sh->n_stages;
  double *sum = calloc ((size_t) S * 4, sizeof *sum);
  long *cnt = calloc ((size_t) S * 4, sizeof *cnt);
  PpCostModel *cm = NULL;
  if (sum == NULL || cnt == NULL)
    goto out;
  for (size_t i = 0; i < n_spans; i++)
    {
      const PpSpan *sp = &spans[i];
      int slot = sp->kind == PP_SPAN_F ? 0 : sp->kind == PP_SPAN_B ? 1 : sp->kind == PP_SPAN_I ? 2
                 : sp->kind == PP_SPAN_W ? 3 : -1;
      if (slot < 0 || sp->stage < 0 || sp->stage >= S)
        continue;
      sum[sp->stage * 4 + slot] += (double) (sp->end_ns - sp->start_ns) * 1e-9;
      cnt[sp->stage * 4 + slot]++;
    }
  cm = pp_cost_model_new_uniform (S, 1e-3, 2e-3, 1e-3, 0);
  if (cm == NULL)
    goto out;
  for (int s = 0; s < S; s++)
    {
      double mean[4];
      for (int k = 0; k < 4; k++)
        mean[k] = cnt[s * 4 + k] > 0 ? sum[s * 4 + k] / (double) cnt[s * 4 + k] : -1;
      double f = mean[0] > 0 ? mean[0] : 1e-6;
      double w = mean[3] > 0 ? mean[3] : 0;
      double b = mean[1] > 0 ? mean[1] : mean[2] > 0 ? mean[2] + w : 2 * f;
      if (w >= b)
        w = b / 2;
      cm->f[s] = f;
      cm->b[s] = b;
      cm->w[s] = w;
      cm->comm[s] = 0;   /* the plan takes transfers as free */
    }
out:
  free (sum);
  free (cnt);
  return cm;
}

static bool
push_span (PpSpan **spans, size_t *n, size_t *cap, const PpSpan *sp)
{
  if (*n == *cap)
    {
      size_t nc = *cap ? *cap * 2 : 4096;
      PpSpan *g = realloc (*spans, nc * sizeof *g);
      if (g == NULL)
        return false;
      *spans = g;
      *cap = nc;
    }
  (*spans)[(*n)++] = *sp;
  return true;
}

typedef struct {
  uint64_t key;        /* (RECV kind, stage, micro-batch) */
  int64_t  posted;     /* its label's start */
  int64_t  arrival;    /* when its data was there */
} Arrival;

static int
cmp_arrival (const void *a, const void *b)
{
  const Arrival *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->posted < y->posted ? -1 : x->posted > y->posted;
}

/* stage < 4096, micro-batch < 2^20 (the import's bounds) */
static uint64_t
recv_key (int kind, int stage, int mb)
{
  return ((uint64_t) (kind + 1) << 40) | ((uint64_t) (stage & 0xfff) << 20) | (uint64_t) (mb & 0xfffff);
}

/* The arrival of the receive of key posted last at or before t (the one a
 * block starting at t waited for: not by step, which a label before a
 * step's first block may not have yet), INT64_MIN when none. */
static int64_t
arrival_for (const Arrival *arr, size_t n, uint64_t key, int64_t t)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (arr[mid].key < key || (arr[mid].key == key && arr[mid].posted <= t))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo > 0 && arr[lo - 1].key == key ? arr[lo - 1].arrival : INT64_MIN;
}

/* sh->order: each rank's blocks of one step, in the order run. */
static PpStatus
build_order (const Import *im, Shape *sh, bool use_pp, int step, size_t *total, PpError *err)
{
  *total = 0;
  for (size_t i = 0; i < im->n; i++)
    {
      const RankData *rd = &im->ranks[i];
      int r = rd->rank;
      size_t cnt = 0;
      if (im->rank_of != NULL && im->rank_of[r] != (int) i)
        continue;   /* a replica: its pipeline rank's order is the first replica's */
      for (size_t k = 0; k < rd->n_ev; k++)
        cnt += is_block_of (&rd->ev[k], use_pp) && rd->ev[k].step == step;
      free (sh->order[r]);
      sh->order[r] = malloc ((cnt + 1) * sizeof *sh->order[r]);
      sh->n_order[r] = 0;
      if (sh->order[r] == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp) && rd->ev[k].step == step)
          sh->order[r][sh->n_order[r]++] = action_of (&rd->ev[k]);
      *total += cnt;
    }
  return PP_OK;
}

typedef struct {
  int32_t step;
  int64_t start, end;
} StepExtent;

static int
cmp_step_extent (const void *a, const void *b)
{
  const StepExtent *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* ext[n], one entry a block, folded in place into one a step (ascending,
 * from its first block's start to its last one's end); their count. */
static size_t
step_extents (StepExtent *ext, size_t n)
{
  size_t m = 0;
  if (n > 1)
    qsort (ext, n, sizeof *ext, cmp_step_extent);
  for (size_t k = 0; k < n; k++)
    {
      if (m > 0 && ext[m - 1].step == ext[k].step)
        {
          if (ext[k].start < ext[m - 1].start) ext[m - 1].start = ext[k].start;
          if (ext[k].end > ext[m - 1].end) ext[m - 1].end = ext[k].end;
          continue;
        }
      ext[m++] = ext[k];
    }
  return m;
}

static int
cmp_int32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return x < y ? -1 : x > y;
}

/* An import's inputs: what input i adds to the budget (pp_import_cost),
 * and its JSON text, at most limit bytes. */
/* ---- processes: a job of many pipelines ------------------------------------ */

/* The least stage the file's PP: blocks run, INT32_MAX none: with the
 * schedule's placement (stage s on pipeline rank s mod P, V-shaped ones
 * too) the pipeline rank's least stage is its rank. */
static int
least_stage (const RankData *rd)
{
  int m = INT32_MAX;
  for (size_t k = 0; k < rd->n_ev; k++)
    if (rd->ev[k].what == EV_BLOCK && !rd->ev[k].gpipe && rd->ev[k].stage < m)
      m = rd->ev[k].stage;
  return m;
}

/* Is this a job of many pipelines, and where is each file?  It is when a
 * file's place was read from its mesh, or two processes (files that say
 * their global rank: said) run the same stages (replicas).  Then each file's process is its global rank (rank
 * as read so far) and rank becomes its pipeline rank: the mesh's pp
 * coordinate, else (place not read) the place of its least stage among
 * the files' least stages.  *mesh false: files are ranks, as before. */
static PpStatus
place_processes (Import *im, bool said, bool *mesh, PpError *err)
{
  size_t n = im->n;
  int *least = malloc ((n + 1) * sizeof *least), *sorted = malloc ((n + 1) * sizeof *sorted);
  int *least_rank = malloc ((n + 1) * sizeof *least_rank);
  size_t n_least = 0;
  bool placed = false, twice = false;
  PpStatus st = PP_OK;

  *mesh = false;
  if (least == NULL || sorted == NULL || least_rank == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    {
      least[i] = least_stage (&im->ranks[i]);
      placed |= im->ranks[i].placed;
      if (least[i] != INT32_MAX)
        sorted[n_least++] = least[i];
    }
  if (n_least > 1)
    qsort (sorted, n_least, sizeof *sorted, cmp_int32);
  size_t u = 0;
  for (size_t q = 0; q < n_least; q++)
    if (u == 0 || sorted[q] != sorted[u - 1])
      sorted[u++] = sorted[q];
  /* fewer stage sets than processes running them: replicas (one
   * process's files of two profiling cycles are one process) */
  size_t n_proc = 0, p = 0;
  for (size_t i = 0; i < n; i++)
    if (least[i] != INT32_MAX)
      least_rank[n_proc++] = im->ranks[i].rank;
  if (n_proc > 1)
    qsort (least_rank, n_proc, sizeof *least_rank, cmp_int32);
  for (size_t q = 0; q < n_proc; q++)
    p += q == 0 || least_rank[q] != least_rank[q - 1];
  twice = said && u < p;
  if (!placed && !twice)
    goto out;
  *mesh = true;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im->ranks[i];
      rd->process = rd->rank;
      rd->world = -1;
      if (rd->process >= PP_TRACE_MAX_PROCESSES)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: process %d: a trace holds processes 0 to %d",
                             rd->name, rd->process, PP_TRACE_MAX_PROCESSES - 1);
          goto out;
        }
      if (rd->placed)
        {
          rd->rank = rd->coord[PP_TRACE_MESH_PP];
          continue;
        }
      if (least[i] == INT32_MAX)
        {
          st = pp_error_set (err, PP_EFORMAT,
                             "%s: process %d runs no labelled pipeline action and its trace has no "
                             "mesh_pp process group: its pipeline rank cannot be told; leave its "
                             "file out or profile the job with 'pipescope-cli profile'",
                             rd->name, rd->process);
          goto out;
        }
      size_t lo = 0, hi = u;
      while (lo < hi)
        {
          size_t mid = lo + (hi - lo) / 2;
          if (sorted[mid] < least[i])
            lo = mid + 1;
          else
            hi = mid;
        }
      rd->rank = (int) lo;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        {
          rd->coord[d] = 0;
          rd->size[d] = 1;
        }
      rd->coord[PP_TRACE_MESH_PP] = rd->rank;
    }
out:
  free (least);
  free (sorted);
  free (least_rank);
  return st;
}

static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = a, *y = b;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* The place of im->ranks[i] as a PROCESS frame says it. */
static PpTraceProcess
process_of (const RankData *rd)
{
  PpTraceProcess p;
  memset (&p, 0, sizeof p);
  p.process = rd->process;
  p.rank = rd->rank;
  memcpy (p.coord, rd->coord, sizeof p.coord);
  memcpy (p.size, rd->size, sizeof p.size);
  p.pid = rd->pid;
  p.flags = rd->placed ? 0 : PP_TRACE_PROCESS_UNPLACED;
  snprintf (p.host, sizeof p.host, "%s", rd->host);
  return p;
}

/* The processes (one file each now) numbered where their place was not
 * read, as merge numbers them (pp_trace_number_unplaced), every place
 * checked, and no place held twice: one line naming both files. */
static PpStatus
number_processes (Import *im, PpImportSummary *sum, PpError *err)
{
  size_t n = im->n;
  PpTraceProcess *ps = calloc (n + 1, sizeof *ps);
  PpStatus st = PP_OK;
  int32_t P = 0;
  if (ps == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    {
      ps[i] = process_of (&im->ranks[i]);
      if (ps[i].rank + 1 > P)
        P = ps[i].rank + 1;
      if (ps[i].size[PP_TRACE_MESH_PP] > P)
        P = ps[i].size[PP_TRACE_MESH_PP];
    }
  for (size_t i = 0; i < n; i++)
    if (ps[i].flags & PP_TRACE_PROCESS_UNPLACED)
      ps[i].size[PP_TRACE_MESH_PP] = P;
  if ((st = pp_trace_number_unplaced (ps, n, err)) != PP_OK)
    goto out;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im->ranks[i];
      PpError e2 = { 0 };
      memcpy (rd->coord, ps[i].coord, sizeof rd->coord);
      memcpy (rd->size, ps[i].size, sizeof rd->size);
      if (pp_trace_process_check (&ps[i], &e2) != PP_OK)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: process %d: %s", rd->name, rd->process, e2.msg);
          goto out;
        }
    }
  if (n > 1)
    qsort (ps, n, sizeof *ps, cmp_place);
  for (size_t i = 1; i < n; i++)
    if (memcmp (ps[i].coord, ps[i - 1].coord, sizeof ps[i].coord) == 0)
      {
        const char *a = "?", *b = "?";
        for (size_t j = 0; j < n; j++)
          {
            if (im->ranks[j].process == ps[i - 1].process) a = im->ranks[j].name;
            if (im->ranks[j].process == ps[i].process) b = im->ranks[j].name;
          }
        st = pp_error_set (err, PP_EFORMAT,
                           "%s (process %d) and %s (process %d) both claim the place pp %d dp %d tp %d: "
                           "give the traces of one job",
                           a, ps[i - 1].process, b, ps[i].process, ps[i].coord[PP_TRACE_MESH_PP],
                           ps[i].coord[PP_TRACE_MESH_DP], ps[i].coord[PP_TRACE_MESH_TP]);
        goto out;
      }
  sum->processes = (int) n;
  for (size_t i = 0; i < n; i++)
    {
      sum->unplaced += !im->ranks[i].placed;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (ps[i].size[d] > sum->mesh_size[d])
          sum->mesh_size[d] = ps[i].size[d];
    }
out:
  free (ps);
  return st;
}

typedef PpStatus (*CostFunc) (void *user, size_t i, size_t *cost, PpError *err);
typedef PpStatus (*LoadFunc) (void *user, size_t i, size_t limit, const char **name, char **text,
                              size_t *size, PpError *err);

static PpStatus
import_run (size_t n, CostFunc cost, LoadFunc load, void *user, PpTraceWriter *w,
            PpImportSummary *sum, PpError *err)
{
  Import im;
  Shape sh;
  PpStatus st = PP_OK;
  PpSpan *spans = NULL;
  size_t n_spans = 0, cap_spans = 0;
  const Ev **blocks = NULL;
  int *rank_of = NULL;     /* [world] -> input index, -1 */
  size_t *span_from = NULL;
  PpSimulation *sim = NULL;
  PpCostModel *cm = NULL;
  PpImportSummary s0;
  bool mesh_job = false;

  memset (&im, 0, sizeof im);
  memset (&sh, 0, sizeof sh);
  memset (&s0, 0, sizeof s0);
  if (sum == NULL)
    sum = &s0;
  memset (sum, 0, sizeof *sum);
  if (n == 0)
    return pp_error_set (err, PP_EINVAL, "no trace to import");
  if (n > PP_IMPORT_MAX_FILES)
    return pp_error_set (err, PP_EINVAL, "more than %d files to import", PP_IMPORT_MAX_FILES);
  im.ranks = calloc (n, sizeof *im.ranks);
  if (im.ranks == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  im.n = n;

  /* one budget of JSON text for all the inputs together */
  size_t budget = 0;
  for (size_t i = 0; i < n; i++)
    {
      size_t c;
      if ((st = cost (user, i, &c, err)) != PP_OK)
        goto out;
      budget = budget > SIZE_MAX - c ? SIZE_MAX : budget + c;
    }
  budget = pp_import_budget (budget);

  /* each file: parse, extract, free */
  for (size_t i = 0; i < n; i++)
    {
      char *text = NULL;
      size_t size = 0;
      const char *name = NULL;
      PpJsonDoc doc;
      if ((st = load (user, i, budget, &name, &text, &size, err)) != PP_OK)
        goto out;
      budget -= size;
      im.ranks[i].name = name;
      st = pp_json_parse (text, size, PP_IMPORT_BYTES_PER_VALUE, &doc, err);
      if (st != PP_OK)
        {
          char msg[PP_ERROR_MSG_MAX];
          snprintf (msg, sizeof msg, "%s", err ? err->msg : "");
          pp_error_set (err, st, "%s: %s", name, msg);
          free (text);
          goto out;
        }
      if (pp_import_chrome_is_pipescope (&doc))
        {
          /* pipescope's own export: the run it came from, whole */
          if (n == 1)
            st = pp_import_chrome (&doc, name, w, sum, err);
          else
            st = pp_error_set (err, PP_EINVAL, "%s is pipescope's Chrome export of a whole run: "
                               "import it alone, not with other traces", name);
          pp_json_doc_clear (&doc);
          free (text);
          goto out;
        }
      st = extract (&im, &im.ranks[i], &doc, err);
      pp_json_doc_clear (&doc);
      free (text);
      if (st != PP_OK)
        goto out;
      ev_extent (&im.ranks[i]);
    }

  /* ranks: distributedInfo, else the order given */
  {
    size_t with = 0;
    int world = 0;
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].rank >= 0)
        with++;
    if (with != 0 && with != n)
      {
        for (size_t i = 0; i < n; i++)
          if (im.ranks[i].rank < 0)
            {
              st = pp_error_set (err, PP_EFORMAT,
                                 "%s: no distributedInfo.rank, which the other traces have: "
                                 "not from the same job?", im.ranks[i].name);
              goto out;
            }
      }
    for (size_t i = 0; i < n; i++)
      {
        RankData *rd = &im.ranks[i];
        if (with == 0)
          {
            rd->rank = (int) i;
            rd->world = -1;
          }
        if (rd->rank + 1 > world)
          world = rd->rank + 1;
        if (rd->world > world)
          world = rd->world;
      }
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].world > 0 && im.ranks[i].world != world)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: world size %d where another trace says %d: "
                             "not from the same job?", im.ranks[i].name, im.ranks[i].world, world);
          goto out;
        }
    /* a job of many pipelines: each file a process, its rank the
     * pipeline rank of its place; files are then told apart by process */
    if ((st = place_processes (&im, with > 0, &mesh_job, err)) != PP_OK)
      goto out;
    int keys = world;
    if (mesh_job)
      for (size_t i = 0; i < n; i++)
        if (im.ranks[i].process + 1 > keys)
          keys = im.ranks[i].process + 1;
    rank_of = malloc ((size_t) keys * sizeof *rank_of);
    if (rank_of == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    for (int r = 0; r < keys; r++)
      rank_of[r] = -1;
    /* one rank's (process's) files of different times
     * (tensorboard_trace_handler writes one per profiling cycle) are one
     * rank; of the same time, the same trace twice */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
      {
        RankData *rd = &im.ranks[i];
        int r = mesh_job ? rd->process : rd->rank;
        if (rank_of[r] >= 0)
          {
            RankData *to = &im.ranks[rank_of[r]];
            if (to->ext_lo <= to->ext_hi && rd->ext_lo <= rd->ext_hi
                && to->ext_lo <= rd->ext_hi && rd->ext_lo <= to->ext_hi)
              {
                st = pp_error_set (err, PP_EFORMAT, "%s and %s both hold %s %d at the same time: "
                                   "give each %s's trace once", to->name, rd->name,
                                   mesh_job ? "process" : "rank", r, mesh_job ? "process" : "rank");
                goto out;
              }
            if ((st = merge_rank (to, rd, err)) != PP_OK)
              goto out;
            continue;
          }
        rank_of[r] = (int) kept;
        if (kept != i)
          {
            im.ranks[kept] = *rd;
            memset (rd, 0, sizeof *rd);
          }
        kept++;
      }
    sum->files = (int) n;
    n = kept;
    im.n = kept;
    if (mesh_job)
      {
        /* by pipeline rank from here on: the first replica (least dp,
         * then process) gives the rank's order and description */
        if ((st = number_processes (&im, sum, err)) != PP_OK)
          goto out;
        world = 0;
        for (size_t i = 0; i < n; i++)
          if (im.ranks[i].rank + 1 > world)
            world = im.ranks[i].rank + 1;
        if (world > keys)
          {
            /* a mesh_pp group wider than the world the files said */
            int *g = realloc (rank_of, (size_t) world * sizeof *rank_of);
            if (g == NULL)
              {
                st = pp_error_set (err, PP_ENOMEM, "out of memory");
                goto out;
              }
            rank_of = g;
            keys = world;
          }
        for (int r = 0; r < keys; r++)
          rank_of[r] = -1;
        for (size_t i = 0; i < n; i++)
          {
            int r = im.ranks[i].rank;
            const RankData *o = rank_of[r] >= 0 ? &im.ranks[rank_of[r]] : NULL;
            if (o == NULL || im.ranks[i].coord[PP_TRACE_MESH_DP] < o->coord[PP_TRACE_MESH_DP]
                || (im.ranks[i].coord[PP_TRACE_MESH_DP] == o->coord[PP_TRACE_MESH_DP]
                    && im.ranks[i].process < o->process))
              rank_of[r] = (int) i;
          }
      }
    im.rank_of = rank_of;
    sh.P = world;   /* what the traces say, until their stages are known */
  }

  /* labels: PP: where a trace has any, else GPipe's */
  bool use_pp = false;
  {
    size_t n_pp = 0, n_gp = 0;
    for (size_t i = 0; i < n; i++)
      {
        n_pp += (size_t) im.ranks[i].n_pp;
        n_gp += (size_t) im.ranks[i].n_gpipe;
      }
    if (n_pp == 0 && n_gp == 0)
      {
        st = pp_error_set (err, PP_EUNSUPPORTED,
                           "%s%s: no pipeline actions are labelled in %s (no 'PP:<action>' and no "
                           "'Forward i'/'Backward i' ranges; Schedule1F1B labels none): record the "
                           "job with 'pipescope-cli profile -- torchrun ...' instead",
                           im.ranks[0].name, n > 1 ? " ..." : "", n > 1 ? "these traces" : "this trace");
        goto out;
      }
    use_pp = n_pp > 0;
  }

  /* per rank: sort, the GPipe stage, steps, stage placement, M */
  int max_stage = -1, max_mb = -1, max_steps = 0;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      if (rd->n_ev > 1)
        qsort (rd->ev, rd->n_ev, sizeof *rd->ev, cmp_ev_start);
      if (rd->n_launch > 1)
        qsort (rd->launch, rd->n_launch, sizeof *rd->launch, cmp_launch);
      if (rd->n_op > 1)
        qsort (rd->op, rd->n_op, sizeof *rd->op, cmp_op_start);
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          Ev *e = &rd->ev[k];
          if (e->what == EV_BLOCK && e->gpipe)
            e->stage = rd->rank;   /* single-stage schedules: stage r on rank r */
        }
    }
  int named = 0;   /* stages the labels name, as runners or as peers */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < im.ranks[i].n_ev; k++)
      {
        const Ev *e = &im.ranks[i].ev[k];
        if (e->what == EV_LABEL_XFER && use_pp)
          {
            /* PP:<s>SEND_F<m> sends to stage s + 1, RECV_B receives from it */
            int peer = e->kind == PP_ACT_SEND_F || e->kind == PP_ACT_RECV_B ? e->stage + 1 : e->stage;
            if (peer + 1 > named)
              named = peer + 1;
          }
        if (!is_block_of (e, use_pp))
          continue;
        if (e->stage > max_stage) max_stage = e->stage;
        if (e->mb > max_mb) max_mb = e->mb;
        if (e->kind == PP_ACT_OVERLAP_F_B)
          {
            if (e->sub_stage > max_stage) max_stage = e->sub_stage;
            if (e->sub_mb > max_mb) max_mb = e->sub_mb;
          }
      }
  sh.n_stages = max_stage + 1;
  sh.M = max_mb + 1;
  /* the world: as large as the traces' ranks and stages make it (each
   * pipeline rank runs a stage at least), no larger, whatever
   * distributedInfo.world_size says (the job's whole world, data-parallel
   * replicas too, or a lie): a row a rank costs, a small file cannot ask
   * for 65536 */
  {
    int top = 0;
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].rank + 1 > top)
        top = im.ranks[i].rank + 1;
    if (sh.n_stages > named)
      named = sh.n_stages;
    int justified = named > top ? named : top;
    if (sh.P > justified)
      {
        sum->world_claimed = sh.P;
        sh.P = justified;
      }
    sum->ranks = sh.P;
    size_t ml = 0;
    for (int r = 0; r < sh.P && ml + 12 < sizeof sum->missing; r++)
      if (rank_of[r] < 0)
        ml += (size_t) snprintf (sum->missing + ml, sizeof sum->missing - ml, "%s%d", ml ? "," : "", r);
  }
  sh.V = sh.P > 0 && sh.n_stages % sh.P == 0 ? sh.n_stages / sh.P : (sh.n_stages + sh.P - 1) / sh.P;
  if (sh.V < 1)
    sh.V = 1;
  sh.stage_rank = malloc ((size_t) sh.n_stages * sizeof *sh.stage_rank);
  sh.order = calloc ((size_t) sh.P, sizeof *sh.order);
  sh.n_order = calloc ((size_t) sh.P, sizeof *sh.n_order);
  if (sh.stage_rank == NULL || sh.order == NULL || sh.n_order == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (int s = 0; s < sh.n_stages; s++)
    sh.stage_rank[s] = -1;

  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      /* steps: ProfilerStep#N ranges, else a new step when an action repeats */
      const Ev **steps = NULL;
      size_t n_st = 0;
      if (rd->n_steps > 0)
        {
          steps = malloc ((size_t) rd->n_steps * sizeof *steps);
          if (steps == NULL)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          for (size_t k = 0; k < rd->n_ev; k++)
            if (rd->ev[k].what == EV_STEP)
              steps[n_st++] = &rd->ev[k];
        }
      int global_min = INT32_MAX;
      for (size_t j = 0; j < n; j++)
        if (im.ranks[j].min_step < global_min)
          global_min = im.ranks[j].min_step;

      /* without step ranges: a new step where the rank's first stage
       * runs the forward of micro-batch 0 (what every schedule's step on
       * a rank begins with: all else waits for it), or where the rank
       * runs an action it ran before in this step (a table of action ->
       * last step); a profile begun mid-step has a partial step first */
      int min_stage = INT32_MAX;
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp) && rd->ev[k].stage < min_stage)
          min_stage = rd->ev[k].stage;
      size_t in_cur = 0;
      rd->mark_step = -1;
      uint64_t *keys = NULL;
      int32_t *gen = NULL;
      size_t cap_keys = 0, n_keys = 0;
      int cur = 0;
      size_t si = 0;
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          Ev *e = &rd->ev[k];
          if (e->what == EV_STEP)
            continue;
          if (n_st > 0)
            {
              /* the last step range that started at or before e */
              while (si + 1 < n_st && steps[si + 1]->start <= e->start)
                si++;
              e->step = steps[si]->kind - global_min;
            }
          else if (is_block_of (e, use_pp))
            {
              if ((n_keys + 1) * 2 > cap_keys)
                {
                  size_t nc = cap_keys ? cap_keys * 2 : 256;
                  uint64_t *nk = calloc (nc, sizeof *nk);
                  int32_t *ng = calloc (nc, sizeof *ng);
                  if (nk == NULL || ng == NULL)
                    {
                      free (nk);
                      free (ng);
                      free (keys);
                      free (gen);
                      free (steps);
                      st = pp_error_set (err, PP_ENOMEM, "out of memory");
                      goto out;
                    }
                  for (size_t q = 0; q < cap_keys; q++)
                    if (keys[q] != 0)
                      {
                        size_t h = (size_t) (keys[q] * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
                        while (nk[h] != 0)
                          h = (h + 1) & (nc - 1);
                        nk[h] = keys[q];
                        ng[h] = gen[q];
                      }
                  free (keys);
                  free (gen);
                  keys = nk;
                  gen = ng;
                  cap_keys = nc;
                }
              /* (kind, stage, micro-batch) names a block within a step (an
               * OVERLAP_F_B by its forward half); never 0 */
              uint64_t key = ((uint64_t) (e->kind + 1) << 48) | ((uint64_t) e->stage << 24) | (uint64_t) e->mb;
              size_t h = (size_t) (key * 0x9e3779b97f4a7c15ull >> 20) & (cap_keys - 1);
              while (keys[h] != 0 && keys[h] != key)
                h = (h + 1) & (cap_keys - 1);
              bool begins = (e->kind == PP_ACT_F || e->kind == PP_ACT_OVERLAP_F_B)
                            && e->stage == min_stage && e->mb == 0;
              if (in_cur > 0 && (begins || (keys[h] == key && gen[h] == cur)))
                {
                  cur++;
                  in_cur = 0;
                }
              if (begins && rd->mark_step < 0)
                {
                  rd->mark_step = cur;
                  rd->mark_time = e->end;
                }
              in_cur++;
              if (keys[h] == 0)
                n_keys++;
              keys[h] = key;
              gen[h] = cur;
              e->step = cur;
            }
          else
            e->step = cur;
          if (is_block_of (e, use_pp))
            {
              int stages[2] = { e->stage, e->kind == PP_ACT_OVERLAP_F_B ? e->sub_stage : -1 };
              for (int q = 0; q < 2; q++)
                if (stages[q] >= 0 && stages[q] < sh.n_stages)
                  sh.stage_rank[stages[q]] = rd->rank;
            }
        }
      free (keys);
      free (gen);
      free (steps);
    }
  /* the ranks' own step counts lined up: the block that begins a step
   * on a rank ends after the one that began it on the rank of stage 0
   * (it needs its output) and before that rank's next step begins (which
   * waits for this one's backward); ends, because a label's range holds
   * the wait for its input.  So each rank's first counted step is the
   * reference's last one whose first block ended before it */
  {
    int ref = sh.n_stages > 0 && sh.stage_rank[0] >= 0 ? rank_of[sh.stage_rank[0]] : -1;
    int *offset = calloc (n, sizeof *offset);
    if (offset == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    if (ref >= 0 && im.ranks[ref].n_steps == 0 && im.ranks[ref].mark_step >= 0)
      {
        const RankData *R = &im.ranks[ref];
        /* the reference's step starts, in its count */
        int64_t *starts = malloc ((R->n_ev + 1) * sizeof *starts);
        int n_starts = 0;
        if (starts == NULL)
          {
            free (offset);
            st = pp_error_set (err, PP_ENOMEM, "out of memory");
            goto out;
          }
        for (size_t k = 0; k < R->n_ev; k++)
          if (is_block_of (&R->ev[k], use_pp) && R->ev[k].step >= 0 && R->ev[k].step < (int) R->n_ev)
            while (n_starts <= R->ev[k].step)
              starts[n_starts++] = R->ev[k].end;
        /* the last step whose start is at or before a time, by halving:
         * over each start's least with those after it (which grows with
         * the step), the last at or before the time is the same step,
         * and many ranks' files against a long reference stay n log n */
        for (int q = n_starts - 1; q > 0; q--)
          if (starts[q] < starts[q - 1])
            starts[q - 1] = starts[q];
        for (size_t i = 0; i < n; i++)
          {
            const RankData *rd = &im.ranks[i];
            if ((int) i == ref || rd->n_steps > 0 || rd->mark_step < 0)
              continue;
            int lo = 0, hi = n_starts;
            while (lo < hi)
              {
                int mid = lo + (hi - lo) / 2;
                if (starts[mid] <= rd->mark_time)
                  lo = mid + 1;
                else
                  hi = mid;
              }
            if (lo > 0)
              offset[i] = (lo - 1) - rd->mark_step;
          }
        free (starts);
      }
    int least = INT32_MAX;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        if (im.ranks[i].n_steps == 0 && im.ranks[i].ev[k].step >= 0)
          {
            im.ranks[i].ev[k].step += offset[i];
            if (im.ranks[i].ev[k].step < least)
              least = im.ranks[i].ev[k].step;
          }
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        {
          Ev *e = &im.ranks[i].ev[k];
          if (im.ranks[i].n_steps == 0 && least != INT32_MAX && least != 0)
            e->step -= least;
          if (is_block_of (e, use_pp) && e->step + 1 > max_steps)
            max_steps = e->step + 1;
        }
    free (offset);
  }
  /* the steps that hold blocks, counted (their numbers may have gaps) */
  {
    size_t nb = 0, k = 0;
    for (size_t i = 0; i < n; i++)
      nb += im.ranks[i].n_ev;
    int32_t *nums = malloc ((nb + 1) * sizeof *nums);
    if (nums == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    for (size_t i = 0; i < n; i++)
      for (size_t q = 0; q < im.ranks[i].n_ev; q++)
        if (is_block_of (&im.ranks[i].ev[q], use_pp) && im.ranks[i].ev[q].step >= 0)
          nums[k++] = im.ranks[i].ev[q].step;
    if (k > 1)
      qsort (nums, k, sizeof *nums, cmp_int32);
    sum->steps = 0;
    for (size_t q = 0; q < k; q++)
      sum->steps += q == 0 || nums[q] != nums[q - 1];
    free (nums);
  }
  sum->microbatches = sh.M;
  sum->stages_per_rank = sh.V;

  /* the plan: the order of the first step that is a known schedule's
   * (a profile that began mid-step has a partial first step), else the
   * fullest of the first few steps, as run */
  if (sum->missing[0] == '\0')
    {
      int best = -1;
      size_t best_n = 0;
      for (int step = 0; step < max_steps && step < 16 && sh.sched == NULL; step++)
        {
          size_t total;
          if ((st = build_order (&im, &sh, use_pp, step, &total, err)) != PP_OK)
            goto out;
          if (total > best_n)
            {
              best = step;
              best_n = total;
            }
          match_known (&sh);
        }
      if (sh.sched == NULL && best >= 0)
        {
          size_t total;
          if ((st = build_order (&im, &sh, use_pp, best, &total, err)) != PP_OK)
            goto out;
          observed_schedule (&sh);
        }
    }
  sum->matched = sh.matched;
  snprintf (sum->schedule, sizeof sum->schedule, "%s",
            sh.sched && sh.matched ? sh.sched->name : "observed");
  snprintf (sum->backend, sizeof sum->backend, "%s", im.ranks[0].backend);

  /* spans, file after file (span_from[i]: file i's first) */
  span_from = malloc ((n + 1) * sizeof *span_from);
  if (span_from == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      size_t nb = 0;
      span_from[i] = n_spans;
      free (blocks);
      blocks = malloc ((rd->n_ev + 1) * sizeof *blocks);
      if (blocks == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp))
          blocks[nb++] = &rd->ev[k];
      /* transfers: one layer of operations, the calls the rank made
       * (c10d::send, c10d::recv_) where it has them.  gloo:send/recv and
       * nccl: ranges run asynchronously until the peer is done, on after
       * the block that posted them: as transfer times they would count
       * the peer's lateness, which is the bubble's, not the wire's. */
      int level = 3;
      for (size_t k = 0; k < rd->n_ev; k++)
        if (rd->ev[k].what == EV_XFER && rd->ev[k].level < level)
          level = rd->ev[k].level;
      /* PP: transfer labels, to name the operations inside them */
      const Ev **labels = malloc ((rd->n_ev + 1) * sizeof *labels);
      size_t nl = 0;
      if (labels == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        if (rd->ev[k].what == EV_LABEL_XFER)
          labels[nl++] = &rd->ev[k];
      unsigned char *label_used = calloc (nl + 1, 1);
      if (label_used == NULL)
        {
          free (labels);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }

      /* a block that launched device work runs, as pipescope's CUDA runs
       * measure it, from its first kernel's start to its last one's end
       * (its host range is when it was launched, not when it ran) */
      int64_t *gpu = malloc ((2 * nb + 2) * sizeof *gpu);
      if (gpu == NULL)
        {
          free (labels);
          free (label_used);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t b = 0; b < nb; b++)
        {
          gpu[2 * b] = INT64_MAX;
          gpu[2 * b + 1] = INT64_MIN;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          const Launch *l = e->what == EV_DEVICE && e->corr >= 0 ? find_launch (rd, e->corr) : NULL;
          long b = l != NULL ? block_at (blocks, nb, l->ts) : -1;
          /* NCCL's kernels wait for the peer: a transfer, not the block's work */
          if (b < 0 || (e->name_id != 0 && strncasecmp (im.names.names[e->name_id - 1], "nccl", 4) == 0))
            continue;
          if (e->start < gpu[2 * b]) gpu[2 * b] = e->start;
          if (e->end > gpu[2 * b + 1]) gpu[2 * b + 1] = e->end;
        }
      /* A label's range holds the wait for its input: PyTorch waits for a
       * receive inside the action that needs it.  The receive (gloo:recv,
       * nccl:recv: running until the data is there) says when that was;
       * the block starts then, and before it the rank waits (a WAIT span).
       * Which receive: the one under the last PP:<s>RECV_F<m> label
       * before an F of (s, m) (RECV_B for B and I), or GPipe's inside the
       * block. */
      int64_t *ready = malloc ((nb + 1) * sizeof *ready);
      Arrival *arr = malloc ((rd->n_ev + 1) * sizeof *arr);
      size_t n_arr = 0;
      if (ready == NULL || arr == NULL)
        {
          free (ready);
          free (arr);
          free (gpu);
          free (labels);
          free (label_used);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t b = 0; b < nb; b++)
        ready[b] = INT64_MIN;
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          if (e->what != EV_XFER || e->level != 2 || e->kind != 1)
            continue;
          long lb = block_at (labels, nl, e->start);
          if (lb >= 0 && (labels[lb]->kind == PP_ACT_RECV_F || labels[lb]->kind == PP_ACT_RECV_B))
            arr[n_arr++] = (Arrival) { recv_key (labels[lb]->kind, labels[lb]->stage, labels[lb]->mb),
                                       labels[lb]->start, e->end };
          else
            {
              long b = block_at (blocks, nb, e->start);
              if (b >= 0 && e->end > ready[b])
                ready[b] = e->end;
            }
        }
      if (n_arr > 1)
        qsort (arr, n_arr, sizeof *arr, cmp_arrival);
      for (size_t b = 0; b < nb && n_arr > 0; b++)
        {
          const Ev *e = blocks[b];
          int rk = e->kind == PP_ACT_F ? PP_ACT_RECV_F
                   : e->kind == PP_ACT_B || e->kind == PP_ACT_I ? PP_ACT_RECV_B : -1;
          if (rk < 0)
            continue;
          int64_t a = arrival_for (arr, n_arr, recv_key (rk, e->stage, e->mb), e->start);
          if (a > ready[b])
            ready[b] = a;
        }
      free (arr);
      size_t bi = 0;
      OpWalk walk = { 0, 0 };
      /* The rank's first pipeline action: a transfer before it is set-up,
       * not the schedule's (PyTorch's _initialize_stages sends and
       * receives the shapes before the first step's first action), and is
       * left out, as profile, which records the actions, never sees it. */
      int64_t first_action = INT64_MAX;
      if (nb > 0)
        first_action = blocks[0]->start;
      if (nl > 0 && labels[0]->start < first_action)
        first_action = labels[0]->start;

      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          PpSpan sp;
          memset (&sp, 0, sizeof sp);
          sp.start_ns = e->start;
          sp.end_ns = e->end;
          sp.rank = rd->rank;
          sp.stage = -1;
          sp.microbatch = -1;
          sp.step = e->step >= 0 ? e->step : 0;
          sp.name_id = e->name_id;
          sp.device = 0xffff;
          sp.peer_rank = -1;
          if (is_block_of (e, use_pp))
            {
              sp.kind = (uint16_t) span_kind_of (e->kind);
              sp.stage = e->stage;
              sp.microbatch = e->mb;
              if (e->kind == PP_ACT_OVERLAP_F_B && (e->sub_kind == PP_ACT_B || e->sub_kind == PP_ACT_I))
                {
                  /* the backward half run with the forward one (format 1.2) */
                  sp.sub_kind = (uint16_t) span_kind_of (e->sub_kind);
                  sp.sub_stage = e->sub_stage;
                  sp.sub_microbatch = e->sub_mb;
                }
              if (gpu[2 * bi] <= gpu[2 * bi + 1])
                {
                  sp.start_ns = gpu[2 * bi];
                  sp.end_ns = gpu[2 * bi + 1];
                }
              else
                {
                  /* the compute, the waits before it a WAIT span of its
                   * stage and micro-batch (as pipescope's hook records
                   * them: charged to the block that comes next) */
                  bool waited;
                  compute_extent (rd, e, ready[bi], &walk, &sp.start_ns, &sp.end_ns, &waited);
                  PpSpan wait = sp;
                  int from = e->kind == PP_ACT_F ? e->stage - 1 : e->stage + 1;
                  wait.kind = PP_SPAN_WAIT;
                  wait.start_ns = e->start;
                  wait.end_ns = sp.start_ns;
                  wait.peer_rank = from >= 0 && from < sh.n_stages ? sh.stage_rank[from] : -1;
                  wait.sub_kind = 0;
                  wait.sub_stage = wait.sub_microbatch = 0;
                  if (waited && !push_span (&spans, &n_spans, &cap_spans, &wait))
                    {
                      free (ready);
                      free (labels);
                      free (label_used);
                      free (gpu);
                      st = pp_error_set (err, PP_ENOMEM, "out of memory");
                      goto out;
                    }
                  sum->waits += waited;
                }
              bi++;
              sum->blocks++;
            }
          else if (e->what == EV_OPT)
            sp.kind = PP_SPAN_OPT;
          else if (e->what == EV_DP)
            {
              sp.kind = (uint16_t) span_kind_of (e->kind);
              sp.stage = e->stage;
              sum->dp_actions++;
            }
          else if (e->what == EV_XFER && e->level == level && e->start < first_action)
            {
              sum->setup_transfers++;
              continue;
            }
          else if (e->what == EV_XFER && e->level == level)
            {
              int kind = -1, stage = -1, mb = -1;
              long lb = block_at (labels, nl, e->start);
              if (lb >= 0)
                {
                  const Ev *l = labels[lb];
                  bool send = l->kind == PP_ACT_SEND_F || l->kind == PP_ACT_SEND_B;
                  if (send == (e->kind == 0))
                    {
                      kind = l->kind;
                      stage = l->stage;
                      mb = l->mb;
                      label_used[lb] = 1;
                    }
                }
              if (kind < 0)
                {
                  long b = block_at (blocks, nb, e->start);
                  bool fwd = b < 0 || blocks[b]->kind == PP_ACT_F || blocks[b]->kind == PP_ACT_OVERLAP_F_B;
                  kind = e->kind == 0 ? (fwd ? PP_ACT_SEND_F : PP_ACT_SEND_B)
                                      : (fwd ? PP_ACT_RECV_F : PP_ACT_RECV_B);
                  if (b >= 0)
                    {
                      stage = blocks[b]->stage;
                      mb = blocks[b]->mb;
                    }
                }
              sp.kind = (uint16_t) span_kind_of (kind);
              sp.stage = stage;
              sp.microbatch = mb;
              sp.bytes = e->bytes;
              sum->transfers++;
            }
          else if (e->what == EV_DEVICE)
            {
              const Launch *l = e->corr >= 0 ? find_launch (rd, e->corr) : NULL;
              long b = l != NULL ? block_at (blocks, nb, l->ts) : -1;
              sp.kind = (uint16_t) e->kind;
              sp.device = e->device;
              sp.stream = e->stream;
              sp.bytes = e->bytes;
              if (b >= 0)
                {
                  sp.stage = blocks[b]->stage;
                  sp.microbatch = blocks[b]->mb;
                  sp.step = blocks[b]->step >= 0 ? blocks[b]->step : 0;
                }
              sum->device_spans++;
            }
          else
            continue;
          /* peers along the one chain of stages */
          if (sp.kind >= PP_SPAN_SEND_F && sp.kind <= PP_SPAN_RECV_B && sp.stage >= 0)
            {
              int other = sp.kind == PP_SPAN_SEND_F || sp.kind == PP_SPAN_RECV_B ? sp.stage + 1 : sp.stage - 1;
              if (other >= 0 && other < sh.n_stages)
                sp.peer_rank = sh.stage_rank[other];
            }
          if (n_spans == cap_spans)
            {
              size_t nc = cap_spans ? cap_spans * 2 : 4096;
              PpSpan *g = realloc (spans, nc * sizeof *g);
              if (g == NULL)
                {
                  free (labels);
                  free (label_used);
                  free (gpu);
                  free (ready);
                  st = pp_error_set (err, PP_ENOMEM, "out of memory");
                  goto out;
                }
              spans = g;
              cap_spans = nc;
            }
          spans[n_spans++] = sp;
        }
      /* a transfer label with no operation inside: the label is the transfer */
      for (size_t q = 0; q < nl; q++)
        {
          if (label_used[q])
            continue;
          const Ev *l = labels[q];
          PpSpan sp;
          memset (&sp, 0, sizeof sp);
          sp.start_ns = l->start;
          sp.end_ns = l->end;
          sp.rank = rd->rank;
          sp.stage = l->stage;
          sp.microbatch = l->mb;
          sp.step = l->step >= 0 ? l->step : 0;
          sp.name_id = l->name_id;
          sp.kind = (uint16_t) span_kind_of (l->kind);
          sp.device = 0xffff;
          int other = sp.kind == PP_SPAN_SEND_F || sp.kind == PP_SPAN_RECV_B ? sp.stage + 1 : sp.stage - 1;
          sp.peer_rank = other >= 0 && other < sh.n_stages ? sh.stage_rank[other] : -1;
          if (n_spans == cap_spans)
            {
              size_t nc = cap_spans ? cap_spans * 2 : 4096;
              PpSpan *g = realloc (spans, nc * sizeof *g);
              if (g == NULL)
                {
                  free (labels);
                  free (label_used);
                  free (gpu);
                  free (ready);
                  st = pp_error_set (err, PP_ENOMEM, "out of memory");
                  goto out;
                }
              spans = g;
              cap_spans = nc;
            }
          spans[n_spans++] = sp;
          sum->transfers++;
        }
      free (labels);
      free (label_used);
      free (gpu);
      free (ready);
    }
  span_from[n] = n_spans;

  /* the description */
  PpTraceDescription desc;
  memset (&desc, 0, sizeof desc);
  {
    /* the run's start: its first span or step marker (ProfilerStep#0's
     * start, else the first block's), where the app's ruler begins */
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < n_spans; i++)
      if (spans[i].start_ns < t0)
        t0 = spans[i].start_ns;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        {
          const Ev *e = &im.ranks[i].ev[k];
          bool marks = im.ranks[i].n_steps > 0 ? e->what == EV_STEP : is_block_of (e, use_pp) && e->step >= 0;
          if (marks && e->start < t0)
            t0 = e->start;
        }
    if (t0 == INT64_MAX)
      t0 = 0;
    const RankData *r0 = &im.ranks[rank_of[0] >= 0 ? rank_of[0] : 0];
    bool device = sum->device_spans > 0;
    snprintf (desc.schedule, sizeof desc.schedule, "%s", sum->schedule);
    snprintf (desc.backend, sizeof desc.backend, "%s", device ? "cuda" : "cpu");
    snprintf (desc.host, sizeof desc.host, "%s", r0->host[0] ? r0->host : "unknown");
    snprintf (desc.model, sizeof desc.model, "PyTorch job (torch.profiler trace%s%s%s)",
              r0->backend[0] ? ", " : "", r0->backend, use_pp ? "" : ", ScheduleGPipe labels");
    /* what the run is: no command line of its own is known, its files are */
    size_t len = (size_t) snprintf (desc.cmdline, sizeof desc.cmdline, "import of");
    for (size_t i = 0; i < n && len < sizeof desc.cmdline; i++)
      len += (size_t) snprintf (desc.cmdline + len, sizeof desc.cmdline - len, " %s", im.ranks[i].name);
    desc.n_ranks = sh.P;
    desc.n_microbatches = sh.M;
    desc.n_virtual = sh.V;
    /* one clock for all ranks: the wall clock the profiler used */
    desc.start_unix_ns = t0;
    desc.start_monotonic_ns = t0;
  }

  if ((st = pp_trace_write_description (w, &desc, err)) != PP_OK)
    goto out;
  for (int r = 0; r < sh.P && !mesh_job; r++)
    if (rank_of[r] >= 0)
      {
        const RankData *rd = &im.ranks[rank_of[r]];
        if ((st = pp_trace_write_rank (w, r, rd->pid, rd->host[0] ? rd->host : desc.host, err)) != PP_OK)
          goto out;
      }
  /* the plan: the rebuilt schedule with the measured costs, else the order only */
  {
    PpTracePlanAction **plan = calloc ((size_t) sh.P, sizeof *plan);
    size_t *n_plan = calloc ((size_t) sh.P, sizeof *n_plan);
    bool ok = plan != NULL && n_plan != NULL;
    if (ok && sh.sched != NULL)
      {
        cm = measured_costs (spans, n_spans, &sh);
        if (cm == NULL || pp_simulate (sh.sched, cm, &sim, NULL) != PP_OK)
          sim = NULL;
      }
    for (int r = 0; ok && r < sh.P; r++)
      {
        size_t cnt = sh.sched ? (size_t) sh.sched->rank[r].n_actions : sh.n_order[r];
        plan[r] = calloc (cnt + 1, sizeof **plan);
        if (plan[r] == NULL)
          {
            ok = false;
            break;
          }
        n_plan[r] = cnt;
        for (size_t k = 0; k < cnt; k++)
          {
            const PpAction *a = sh.sched ? &sh.sched->rank[r].actions[k] : &sh.order[r][k];
            PpTracePlanAction *p = &plan[r][k];
            p->kind = a->kind;
            p->stage = a->stage;
            p->microbatch = a->microbatch;
            p->sub_kind = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_kind : -1;
            p->sub_stage = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_stage : -1;
            p->sub_microbatch = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_microbatch : -1;
            if (sim != NULL)
              {
                p->planned_start = sim->timeline[r][k].start;
                p->planned_end = sim->timeline[r][k].end;
              }
          }
      }
    if (ok)
      st = pp_trace_write_plan (w, sh.P, (const PpTracePlanAction *const *) plan, n_plan, sim != NULL, err);
    else
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
    if (plan)
      for (int r = 0; r < sh.P; r++)
        free (plan[r]);
    free (plan);
    free (n_plan);
    if (st != PP_OK)
      goto out;
  }
  for (uint32_t id = 1; id <= im.names.n; id++)
    if ((st = pp_trace_write_string (w, id, im.names.names[id - 1], err)) != PP_OK)
      goto out;
  /* step markers: each rank's ProfilerStep ranges, else its blocks' extent;
   * a job of many pipelines: each process's frames tagged with it, its
   * PROCESS and RANK frames first, then its markers and spans */
  for (size_t i = 0; i < n; i++)
    {
      const RankData *rd = &im.ranks[i];
      if (mesh_job)
        {
          PpTraceProcess p = process_of (rd);
          if (p.host[0] == '\0')
            snprintf (p.host, sizeof p.host, "%s", desc.host);
          if ((st = pp_trace_writer_set_process (w, rd->process, err)) != PP_OK
              || (st = pp_trace_write_process (w, &p, err)) != PP_OK
              || (st = pp_trace_write_rank (w, rd->rank, rd->pid, p.host, err)) != PP_OK
              || (st = pp_trace_write_spans (w, spans + span_from[i], span_from[i + 1] - span_from[i],
                                             err)) != PP_OK)
            goto out;
        }
      int global_min = INT32_MAX;
      for (size_t j = 0; j < n; j++)
        if (im.ranks[j].min_step < global_min)
          global_min = im.ranks[j].min_step;
      if (rd->n_steps > 0)
        {
          for (size_t k = 0; k < rd->n_ev; k++)
            if (rd->ev[k].what == EV_STEP)
              {
                int step = rd->ev[k].kind - global_min;
                if ((st = pp_trace_write_step_marker (w, rd->rank, step, PP_TRACE_STEP_BEGIN,
                                                      rd->ev[k].start, err)) != PP_OK
                    || (st = pp_trace_write_step_marker (w, rd->rank, step, PP_TRACE_STEP_END,
                                                         rd->ev[k].end, err)) != PP_OK)
                  goto out;
              }
          continue;
        }
      /* each step's blocks' extent, sized by the steps present (a step
       * number may be far past their count) */
      StepExtent *ext = malloc ((rd->n_ev + 1) * sizeof *ext);
      size_t n_ext = 0;
      if (ext == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          if (is_block_of (e, use_pp) && e->step >= 0)
            ext[n_ext++] = (StepExtent) { e->step, e->start, e->end };
        }
      n_ext = step_extents (ext, n_ext);
      for (size_t q = 0; q < n_ext; q++)
        if ((st = pp_trace_write_step_marker (w, rd->rank, ext[q].step, PP_TRACE_STEP_BEGIN, ext[q].start, err)) != PP_OK
            || (st = pp_trace_write_step_marker (w, rd->rank, ext[q].step, PP_TRACE_STEP_END, ext[q].end, err)) != PP_OK)
          {
            free (ext);
            goto out;
          }
      free (ext);
    }
  if (mesh_job)
    st = pp_trace_writer_set_process (w, -1, err);
  else
    st = pp_trace_write_spans (w, spans, n_spans, err);
  if (st != PP_OK)
    goto out;
  sum->skipped = im.skipped;

out:
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  free (blocks);
  free (spans);
  free (rank_of);
  free (span_from);
  shape_clear (&sh);
  for (size_t i = 0; i < im.n; i++)
    {
      free (im.ranks[i].ev);
      free (im.ranks[i].launch);
      free (im.ranks[i].op);
    }
  free (im.ranks);
  names_clear (&im.names);
  return st;
}

/* ---- entry points ---------------------------------------------------------- */

typedef struct {
  const PpImportInput *in;
} MemoryLoad;

static PpStatus
cost_memory (void *user, size_t i, size_t *cost, PpError *err)
{
  const MemoryLoad *ml = user;
  (void) err;
  *cost = pp_import_cost (ml->in[i].data, ml->in[i].size, ml->in[i].size);
  return PP_OK;
}

static PpStatus
load_memory (void *user, size_t i, size_t limit, const char **name, char **text, size_t *size,
             PpError *err)
{
  const MemoryLoad *ml = user;
  *name = ml->in[i].name ? ml->in[i].name : "(input)";
  return pp_import_decode (*name, ml->in[i].data, ml->in[i].size, limit, text, size, err);
}

PpStatus
pp_import_kineto (const PpImportInput *inputs, size_t n, PpTraceWriter *w, PpImportSummary *sum,
                  PpError *err)
{
  MemoryLoad ml = { inputs };
  return import_run (n, cost_memory, load_memory, &ml, w, sum, err);
}

typedef struct {
  const char *const *paths;
} FileLoad;

static PpStatus
cost_file (void *user, size_t i, size_t *cost, PpError *err)
{
  const FileLoad *fl = user;
  return pp_import_file_cost (fl->paths[i], cost, err);
}

static PpStatus
load_file (void *user, size_t i, size_t limit, const char **name, char **text, size_t *size,
           PpError *err)
{
  const FileLoad *fl = user;
  *name = fl->paths[i];
  return pp_import_read_file (fl->paths[i], limit, text, size, err);
}

PpStatus
pp_import_kineto_files (const char *const *paths, size_t n, const char *out_path,
                        PpImportSummary *sum, PpError *err)
{
  FileLoad fl = { paths };
  size_t len = strlen (out_path);
  char *tmp = malloc (len + 32);
  PpTraceWriter *w;
  PpStatus st;

  if (tmp == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  snprintf (tmp, len + 32, "%s.tmp-%ld", out_path, (long) getpid ());
  w = pp_trace_writer_new_path (tmp, PP_TRACE_NATIVE, err);
  if (w == NULL)
    {
      free (tmp);
      return err ? err->status : PP_EIO;
    }
  st = import_run (n, cost_file, load_file, &fl, w, sum, err);
  if (st == PP_OK)
    st = pp_trace_writer_close (w, err);
  else
    pp_trace_writer_close (w, NULL);
  if (st == PP_OK && rename (tmp, out_path) != 0)
    st = pp_error_set (err, PP_EIO, "cannot write '%s': %s", out_path, strerror (errno));
  if (st != PP_OK)
    unlink (tmp);
  free (tmp);
  return st;
}
