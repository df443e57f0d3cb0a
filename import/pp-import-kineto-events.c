/* pp-import-kineto-events.c — one torch.profiler file's JSON reduced to the
 * few events the import keeps (labels, transfers, steps, device work,
 * launches, operators), each named (interned once) and classified, with
 * the file's rank, world and place in a mesh. */
#include "pp-import-kineto-private.h"
#include "pp-import-hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what the import holds ------------------------------------------------ */

bool
budget_take (Budget *b, size_t bytes, bool kept)
{
  if (b == NULL)
    return true;
  if (bytes > PP_IMPORT_MAX_MEMORY - b->held || (kept && bytes > PP_IMPORT_MAX_KEPT - b->kept))
    {
      b->over = true;
      return false;
    }
  b->held += bytes;
  if (kept)
    b->kept += bytes;
  return true;
}

void
budget_give (Budget *b, size_t bytes, bool kept)
{
  if (b == NULL)
    return;
  b->held -= bytes < b->held ? bytes : b->held;
  if (kept)
    b->kept -= bytes < b->kept ? bytes : b->kept;
}

/* Room for one more item in *p, an array of *cap items of size bytes
 * kept: twice as many, or half as many more as the budget b leaves (a
 * file keeps three arrays: the one that doubled last would take what the
 * others need, and refuse a file whose events fit); false past it
 * (b->over) or out of memory. */
static bool
grow (Budget *b, void **p, size_t *cap, size_t first, size_t size)
{
  size_t more = *cap ? *cap : first;
  if (b != NULL)
    {
      size_t left_held = PP_IMPORT_MAX_MEMORY - b->held, left_kept = PP_IMPORT_MAX_KEPT - b->kept;
      size_t room = (left_held < left_kept ? left_held : left_kept) / size;
      if (more > room / 2)
        more = room / 2 > 0 ? room / 2 : room;
      if (more == 0)
        {
          b->over = true;
          return false;
        }
    }
  size_t nc = *cap + more;
  void *g = realloc (*p, nc * size);
  if (g == NULL)
    return false;
  budget_take (b, (nc - *cap) * size, true);
  *p = g;
  *cap = nc;
  return true;
}

/* *p, an array of *cap items of size bytes of which n are used, cut to
 * n (a failed realloc keeps it whole); the bytes given back to b. */
static void
trim (Budget *b, void **p, size_t *cap, size_t n, size_t size)
{
  if (n == *cap)
    return;
  void *g = n > 0 ? realloc (*p, n * size) : NULL;
  if (n > 0 && g == NULL)
    return;
  if (n == 0)
    free (*p);
  budget_give (b, (*cap - n) * size, true);
  *p = g;
  *cap = n;
}

void
rank_trim (RankData *rd)
{
  trim (rd->budget, (void **) &rd->ev, &rd->cap_ev, rd->n_ev, sizeof *rd->ev);
  trim (rd->budget, (void **) &rd->launch, &rd->cap_launch, rd->n_launch, sizeof *rd->launch);
  trim (rd->budget, (void **) &rd->op, &rd->cap_op, rd->n_op, sizeof *rd->op);
}

/* ---- names ---------------------------------------------------------------- */

/* The id of name (interned on first sight), 0 when out of memory. */
static uint32_t
intern (Names *nm, const char *name)
{
  if ((size_t) nm->n * 2 + 2 > nm->tcap)
    {
      size_t nc = nm->tcap ? nm->tcap * 2 : 256;
      if (!budget_take (nm->budget, nc * sizeof (uint32_t), true))
        return 0;
      uint32_t *t = calloc (nc, sizeof *t);
      if (t == NULL)
        return 0;
      budget_give (nm->budget, nm->tcap * sizeof (uint32_t), true);
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
      size_t cap = nm->cap;
      if (cap >= UINT32_MAX / 2 || !grow (nm->budget, (void **) &nm->names, &cap, 64, sizeof *nm->names))
        return 0;
      nm->cap = (uint32_t) cap;
    }
  /* the copy and malloc's header */
  if (!budget_take (nm->budget, strlen (name) + 1 + 16, true))
    return 0;
  char *copy = strdup (name);
  if (copy == NULL)
    return 0;
  nm->names[nm->n++] = copy;
  nm->table[i] = nm->n;
  return nm->n;
}

void
names_clear (Names *nm)
{
  for (uint32_t i = 0; i < nm->n; i++)
    free (nm->names[i]);
  free (nm->names);
  free (nm->table);
  memset (nm, 0, sizeof *nm);
}

/* ---- one file's events ---------------------------------------------------- */

bool
push_ev (RankData *rd, const Ev *e)
{
  if (rd->n_ev == rd->cap_ev && !grow (rd->budget, (void **) &rd->ev, &rd->cap_ev, 256, sizeof *rd->ev))
    return false;
  rd->ev[rd->n_ev++] = *e;
  return true;
}

bool
push_launch (RankData *rd, int64_t corr, int64_t ts, int64_t tid)
{
  if (rd->n_launch == rd->cap_launch
      && !grow (rd->budget, (void **) &rd->launch, &rd->cap_launch, 256, sizeof *rd->launch))
    return false;
  rd->launch[rd->n_launch++] = (Launch) { corr, ts, tid };
  return true;
}

bool
push_op (RankData *rd, int64_t start, int64_t end, int64_t tid, bool comm)
{
  if (rd->n_op == rd->cap_op && !grow (rd->budget, (void **) &rd->op, &rd->cap_op, 1024, sizeof *rd->op))
    return false;
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

/* One event (node e of d, an element of traceEvents) into rd: false when
 * it is past the budget or out of memory. */
static bool
event_of (Import *im, RankData *rd, const PpJsonDoc *d, uint32_t e, int64_t base)
{
  char name[PP_TRACE_STRING_MAX + 1];

  if (d->nodes[e].type != PP_JSON_OBJECT)
    {
      im->skipped++;
      return true;
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
          return false;
      return true;
    }
  if (!pp_json_string_is (d, ph, "X"))
    return true;
  if (pp_json_string (d, nm, name, sizeof name) < 0)
    return true;
  if (!time_ns (d, pp_json_get (d, e, "ts"), base, &ts))
    {
      im->skipped++;
      return true;
    }
  uint32_t dn = pp_json_get (d, e, "dur");
  if (dn != 0 && (!pp_json_scaled (d, dn, 3, &dur) || dur < 0 || dur > ((int64_t) 1 << 50)))
    {
      im->skipped++;
      return true;
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
        return false;
      return true;
    }

  /* a CPU call that launched device work */
  uint32_t corr = pp_json_get (d, args, "correlation");
  if (corr != 0 && (pp_json_string_is (d, cat, "cuda_runtime") || pp_json_string_is (d, cat, "cuda_driver")
                    || pp_json_string_is (d, cat, "runtime")))
    {
      int64_t c;
      if (pp_json_int (d, corr, &c) && !push_launch (rd, c, ts, ev.tid))
        return false;
      return true;
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
    return true;
  /* the label, cut at its first comma (an NVTX suffix: ", seq = 5") */
  char *comma = strchr (name, ',');
  if (comma)
    *comma = '\0';

  int level, dir;
  if (strncmp (name, "PP:", 3) == 0)
    {
      PpAction a;
      if (pp_action_parse (name + 3, &a, NULL) != PP_OK)
        return true;   /* WAIT_SEND_F0, ... */
      if (a.kind == PP_ACT_UNSHARD || a.kind == PP_ACT_RESHARD || a.kind == PP_ACT_REDUCE_GRAD
          || a.kind == PP_ACT_WAIT_REDUCE_GRAD)
        {
          /* data-parallel communication: a block of its own, not the
           * pipeline's (it names a stage, no micro-batch) */
          if (a.stage < 0 || a.stage >= PP_IMPORT_MAX_STAGES)
            {
              im->skipped++;
              return true;
            }
          ev.what = EV_DP;
          a.microbatch = -1;
        }
      else if (pp_action_is_compute (&a))
        {
          if (!action_in_bounds (&a))
            {
              im->skipped++;
              return true;
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
              return true;
            }
          ev.what = EV_LABEL_XFER;
        }
      else
        return true;
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
        return true;
      for (; *p >= '0' && *p <= '9' && n <= PP_IMPORT_MAX_STEP; p++)
        n = n * 10 + (*p - '0');
      if (*p != '\0' && (*p < '0' || *p > '9'))
        return true;   /* not a step's name */
      if (n > PP_IMPORT_MAX_STEP)
        {
          im->skipped++;
          return true;
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
        return false;
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
        return false;
      return true;
    }
  ev.name_id = intern (&im->names, name);
  if (ev.name_id == 0 || !push_ev (rd, &ev))
    return false;
  return true;
}

/* Reads one file into rd: its document d as pp_json_parse_outer read
 * text (size bytes), the traceEvents array at events_at without nodes.
 * PP_EFORMAT with one line for what is not a trace. */
PpStatus
extract (Import *im, RankData *rd, const PpJsonDoc *d, const char *text, size_t size, size_t events_at,
         PpError *err)
{
  uint32_t root = 0;
  int64_t base = 0;

  rd->rank = rd->world = -1;
  rd->pid = 0;
  rd->min_step = INT32_MAX;
  if (d->nodes[0].type == PP_JSON_ARRAY)
    ;               /* the bare array form of the Chrome trace format */
  else if (d->nodes[0].type == PP_JSON_OBJECT)
    {
      uint32_t events = pp_json_get (d, root, "traceEvents");
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

  /* the events, one at a time: only the largest one's nodes at once */
  PpJsonElements it;
  PpJsonDoc ed = { 0 };
  PpStatus st = PP_OK;
  pp_json_elements_init (&it, text, size, events_at);
  for (;;)
    {
      bool got;
      if ((st = pp_json_elements_next (&it, PP_IMPORT_MAX_EVENT, &ed, &got, err)) != PP_OK)
        {
          char msg[PP_ERROR_MSG_MAX];
          snprintf (msg, sizeof msg, "%s", err ? err->msg : "");
          st = pp_error_set (err, st, "%s: event %zu of its traceEvents is too large to read: %s", rd->name,
                             it.index, msg);
          break;
        }
      if (!got)
        break;
      if (!event_of (im, rd, &ed, 0, base))
        {
          st = PP_ENOMEM;
          break;
        }
    }
  pp_json_doc_clear (&ed);
  if (st != PP_ENOMEM)
    return st;
  if (rd->budget != NULL && rd->budget->over)
    return pp_error_set (err, PP_EFORMAT,
                         "%s: more events to keep than an import holds (%zu MiB of events from all the "
                         "files, %zu MiB at once with a file's JSON): refused",
                         rd->name, PP_IMPORT_MAX_KEPT >> 20, PP_IMPORT_MAX_MEMORY >> 20);
  return pp_error_set (err, PP_ENOMEM, "%s: out of memory", rd->name);
}
