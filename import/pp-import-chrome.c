/* pp-import-chrome.c — pipescope's own Chrome JSON export read back as
 * the run it came from (issue 30: hand a trace to Perfetto, and take the
 * same file back into pipescope).
 *
 * `export --format chrome` writes the spans as complete events whose args
 * say rank, kind, stage, micro-batch, step (and process, transfer peer,
 * overlapped half, bytes, device, recorded name), and a top-level
 * "pipescope" member with what events cannot carry exactly: the
 * description, ranks' hosts and pids, processes' places, each rank's plan,
 * step markers, counters and the dropped count, times in nanoseconds from
 * origin_ns (the events' zero) and doubles as the hex of their bits.  The
 * rest of the export (plan copies under each step, step slices, flows,
 * counter tracks) is derived, and is rebuilt by whoever reads the trace.
 *
 * Untrusted input like any other: a value of the wrong type or out of
 * range is PP_EFORMAT with one line naming the file and what is wrong.
 * No GLib. */
#include "pp-import-chrome.h"
#include "pp-import-hash.h"
#include "pp-trace-text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHROME_FORMAT 1

typedef struct {
  const PpJsonDoc *doc;
  const char      *name;
  PpTraceWriter   *w;
  PpError         *err;
  size_t           mem;      /* what the import has left, for the spans (pp-import.h) */
  int64_t          origin;
  /* recorded names, interned: open addressing over ids (0 empty) */
  char           **names;    /* [n_names + 1], names[id] */
  uint32_t         n_names, cap_names;
  uint32_t        *slots;
  uint32_t         n_slots;
} Chrome;

static PpStatus
bad (Chrome *c, const char *what)
{
  return pp_error_set (c->err, PP_EFORMAT, "%s: pipescope Chrome export: %s", c->name, what);
}

/* bad () naming the element: list[index], and its "name" where it has one
 * (shown printable: it comes from the file), so that a user can find it */
static PpStatus
bad_at (Chrome *c, const char *list, size_t index, uint32_t node, const char *what)
{
  char name[80] = "", shown[120] = "";
  uint32_t n = node != 0 && pp_json_node (c->doc, node)->type == PP_JSON_OBJECT ? pp_json_get (c->doc, node, "name") : 0;
  if (n != 0 && pp_json_string (c->doc, n, name, sizeof name) >= 0)
    {
      char printable[100];
      pp_trace_text_printable (name, printable, sizeof printable);
      snprintf (shown, sizeof shown, " ('%s')", printable);
    }
  return pp_error_set (c->err, PP_EFORMAT, "%s: pipescope Chrome export: %s[%zu]%s: %s", c->name, list, index,
                       shown, what);
}

static uint32_t
first_child (const PpJsonDoc *doc, uint32_t node, PpJsonType type)
{
  const PpJsonNode *n = pp_json_node (doc, node);
  return node != 0 && n->type == type ? n->off : 0;
}

static uint32_t
next_of (const PpJsonDoc *doc, uint32_t node)
{
  return pp_json_node (doc, node)->next;
}

/* The k-th element of array node; 0 when it has fewer. */
static uint32_t
element (const PpJsonDoc *doc, uint32_t node, unsigned k)
{
  uint32_t e = first_child (doc, node, PP_JSON_ARRAY);
  while (e != 0 && k-- > 0)
    e = next_of (doc, e);
  return e;
}

static bool
int_in (const PpJsonDoc *doc, uint32_t node, int64_t lo, int64_t hi, int64_t *out)
{
  int64_t v;
  if (node == 0 || !pp_json_int (doc, node, &v) || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static bool
int32_of (const PpJsonDoc *doc, uint32_t node, int32_t *out)
{
  int64_t v;
  if (!int_in (doc, node, INT32_MIN, INT32_MAX, &v))
    return false;
  *out = (int32_t) v;
  return true;
}

/* A double written as the 16 hex digits of its bits. */
static bool
double_of (const PpJsonDoc *doc, uint32_t node, double *out)
{
  char buf[24];
  if (node == 0 || pp_json_string (doc, node, buf, sizeof buf) != 16)
    return false;
  uint64_t bits = 0;
  for (int i = 0; i < 16; i++)
    {
      char ch = buf[i];
      int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (d < 0)
        return false;
      bits = bits << 4 | (uint64_t) d;
    }
  memcpy (out, &bits, sizeof *out);
  return true;
}

/* The times pipescope draws lie within +-2^61 ns, and export writes a
 * time past them at that limit: one counts from origin (itself within
 * them) by at most 2^62 either way. */
#define TIME_LIMIT ((int64_t) 1 << 61)

static int64_t
clamp_limit (int64_t t)
{
  return t > TIME_LIMIT ? TIME_LIMIT : t < -TIME_LIMIT ? -TIME_LIMIT : t;
}

/* origin + ns, where ns counts from origin, within the times pipescope
 * draws (+-2^61 ns: a counter export wrote at the limit, as it was). */
static bool
time_of (Chrome *c, uint32_t node, int scale, int64_t *out)
{
  int64_t v;
  if (node == 0 || !pp_json_scaled (c->doc, node, scale, &v) || v > 2 * TIME_LIMIT || v < -2 * TIME_LIMIT)
    return false;
  *out = clamp_limit (c->origin + v);
  return true;
}

static void
copy_string (const PpJsonDoc *doc, uint32_t node, char *buf, size_t size)
{
  buf[0] = '\0';
  if (node != 0)
    pp_json_string (doc, node, buf, size);
}

bool
pp_import_chrome_is_pipescope (const PpJsonDoc *doc)
{
  uint32_t meta = doc->n_nodes > 0 ? pp_json_get (doc, 0, "pipescope") : 0;
  return meta != 0 && pp_json_node (doc, meta)->type == PP_JSON_OBJECT;
}

/* ---- names ------------------------------------------------------------------- */

/* keyed (pp-import-hash.h): a file cannot choose colliding names */
static uint32_t
hash_name (const char *s)
{
  return (uint32_t) pp_import_hash (s);
}

/* The id of name (interned and written once); 0 when out of memory. */
static uint32_t
intern (Chrome *c, const char *name, PpStatus *st)
{
  if (c->n_names + 1 >= c->n_slots / 2)
    {
      uint32_t ns = c->n_slots ? c->n_slots * 2 : 256;
      uint32_t *slots = calloc (ns, sizeof *slots);
      if (slots == NULL)
        return *st = pp_error_set (c->err, PP_ENOMEM, "out of memory"), 0;
      for (uint32_t id = 1; id <= c->n_names; id++)
        {
          uint32_t k = hash_name (c->names[id]) & (ns - 1);
          while (slots[k] != 0)
            k = (k + 1) & (ns - 1);
          slots[k] = id;
        }
      free (c->slots);
      c->slots = slots;
      c->n_slots = ns;
    }
  uint32_t k = hash_name (name) & (c->n_slots - 1);
  size_t probed = 1;
  for (; c->slots[k] != 0; k = (k + 1) & (c->n_slots - 1), probed++)
    if (strcmp (c->names[c->slots[k]], name) == 0)
      {
        pp_import_hash_probed (probed);
        return c->slots[k];
      }
  pp_import_hash_probed (probed);
  if (c->n_names + 2 > c->cap_names)
    {
      uint32_t cap = c->cap_names ? c->cap_names * 2 : 256;
      char **g = realloc (c->names, cap * sizeof *g);
      if (g == NULL)
        return *st = pp_error_set (c->err, PP_ENOMEM, "out of memory"), 0;
      c->names = g;
      c->cap_names = cap;
    }
  char *copy = strdup (name);
  if (copy == NULL)
    return *st = pp_error_set (c->err, PP_ENOMEM, "out of memory"), 0;
  uint32_t id = ++c->n_names;
  c->names[id] = copy;
  c->slots[k] = id;
  if ((*st = pp_trace_write_string_cut (c->w, id, name, c->err)) != PP_OK)
    return 0;
  return id;
}

/* ---- the pipescope member --------------------------------------------------- */

static PpStatus
read_description (Chrome *c, uint32_t d, PpImportSummary *sum)
{
  const PpJsonDoc *doc = c->doc;
  PpTraceDescription desc;
  int64_t v;
  memset (&desc, 0, sizeof desc);
  copy_string (doc, pp_json_get (doc, d, "schedule"), desc.schedule, sizeof desc.schedule);
  copy_string (doc, pp_json_get (doc, d, "backend"), desc.backend, sizeof desc.backend);
  copy_string (doc, pp_json_get (doc, d, "host"), desc.host, sizeof desc.host);
  copy_string (doc, pp_json_get (doc, d, "model"), desc.model, sizeof desc.model);
  copy_string (doc, pp_json_get (doc, d, "cmdline"), desc.cmdline, sizeof desc.cmdline);
  if (!int32_of (doc, pp_json_get (doc, d, "n_ranks"), &desc.n_ranks)
      || !int32_of (doc, pp_json_get (doc, d, "n_microbatches"), &desc.n_microbatches)
      || !int32_of (doc, pp_json_get (doc, d, "n_virtual"), &desc.n_virtual))
    return bad (c, "the description's n_ranks, n_microbatches or n_virtual is not a whole number");
  if (int_in (doc, pp_json_get (doc, d, "start_unix_ns"), INT64_MIN, INT64_MAX, &v))
    desc.start_unix_ns = v;
  if (int_in (doc, pp_json_get (doc, d, "start_monotonic_ns"), INT64_MIN, INT64_MAX, &v))
    desc.start_monotonic_ns = v;
  snprintf (sum->schedule, sizeof sum->schedule, "%s", desc.schedule);
  snprintf (sum->backend, sizeof sum->backend, "%s", desc.backend);
  sum->ranks = desc.n_ranks;
  sum->microbatches = desc.n_microbatches;
  sum->stages_per_rank = desc.n_virtual;
  return pp_trace_write_description (c->w, &desc, c->err);
}

static PpStatus
read_ranks (Chrome *c, uint32_t list)
{
  const PpJsonDoc *doc = c->doc;
  size_t i = 0;
  for (uint32_t e = first_child (doc, list, PP_JSON_ARRAY); e != 0; e = next_of (doc, e), i++)
    {
      int32_t rank, pid;
      char host[64];
      if (!int32_of (doc, element (doc, e, 0), &rank) || !int32_of (doc, element (doc, e, 1), &pid)
          || rank < 0 || rank >= PP_TRACE_MAX_RANKS)
        return bad_at (c, "ranks", i, e, "not [rank, pid, host]");
      copy_string (doc, element (doc, e, 2), host, sizeof host);
      PpStatus st = pp_trace_write_rank (c->w, rank, pid, host, c->err);
      if (st != PP_OK)
        return st;
    }
  return PP_OK;
}

static PpStatus
read_processes (Chrome *c, uint32_t list, PpImportSummary *sum)
{
  const PpJsonDoc *doc = c->doc;
  size_t i = 0;
  for (uint32_t e = first_child (doc, list, PP_JSON_ARRAY); e != 0; e = next_of (doc, e), i++)
    {
      PpTraceProcess p;
      int64_t flags;
      memset (&p, 0, sizeof p);
      bool ok = int32_of (doc, element (doc, e, 0), &p.process) && int32_of (doc, element (doc, e, 1), &p.rank)
                && int_in (doc, element (doc, e, 2), 0, UINT32_MAX, &flags)
                && int32_of (doc, element (doc, e, 3), &p.pid);
      for (int d = 0; ok && d < PP_TRACE_MESH_DIMS; d++)
        ok = int32_of (doc, element (doc, e, 5 + (unsigned) d), &p.coord[d])
             && int32_of (doc, element (doc, e, 5 + PP_TRACE_MESH_DIMS + (unsigned) d), &p.size[d]);
      if (!ok)
        return bad_at (c, "processes", i, e, "not [process, rank, flags, pid, host, coord x5, size x5]");
      p.flags = (uint32_t) flags;
      copy_string (doc, element (doc, e, 4), p.host, sizeof p.host);
      PpStatus st = pp_trace_process_check (&p, c->err);
      if (st == PP_OK)
        st = pp_trace_writer_set_process (c->w, p.process, c->err);
      if (st == PP_OK)
        st = pp_trace_write_process (c->w, &p, c->err);
      if (st != PP_OK)
        return st;
      sum->processes++;
      sum->unplaced += (p.flags & PP_TRACE_PROCESS_UNPLACED) != 0;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (p.size[d] > sum->mesh_size[d])
          sum->mesh_size[d] = p.size[d];
    }
  return pp_trace_writer_set_process (c->w, -1, c->err);
}

static PpStatus
read_plans (Chrome *c, uint32_t list)
{
  const PpJsonDoc *doc = c->doc;
  size_t i = 0;
  for (uint32_t e = first_child (doc, list, PP_JSON_ARRAY); e != 0; e = next_of (doc, e), i++)
    {
      int32_t rank, timeline;
      uint32_t acts = pp_json_get (doc, e, "actions");
      if (!int32_of (doc, pp_json_get (doc, e, "rank"), &rank) || rank < 0 || rank >= PP_TRACE_MAX_RANKS
          || !int32_of (doc, pp_json_get (doc, e, "has_timeline"), &timeline)
          || pp_json_node (doc, acts)->type != PP_JSON_ARRAY || acts == 0)
        return bad_at (c, "plans", i, e, "lacks its rank, has_timeline or actions");
      size_t n = pp_json_node (doc, acts)->len, k = 0;
      PpTracePlanAction *a = calloc (n + 1, sizeof *a);
      if (a == NULL)
        return pp_error_set (c->err, PP_ENOMEM, "out of memory");
      for (uint32_t x = first_child (doc, acts, PP_JSON_ARRAY); x != 0; x = next_of (doc, x), k++)
        {
          PpTracePlanAction *p = &a[k];
          if (!int32_of (doc, element (doc, x, 0), &p->kind) || !int32_of (doc, element (doc, x, 1), &p->stage)
              || !int32_of (doc, element (doc, x, 2), &p->microbatch)
              || !int32_of (doc, element (doc, x, 3), &p->sub_kind)
              || !int32_of (doc, element (doc, x, 4), &p->sub_stage)
              || !int32_of (doc, element (doc, x, 5), &p->sub_microbatch)
              || !double_of (doc, element (doc, x, 6), &p->planned_start)
              || !double_of (doc, element (doc, x, 7), &p->planned_end))
            {
              free (a);
              return bad_at (c, "plans", i, e, "a planned action is not [kind, stage, mb, sub_kind, sub_stage, sub_mb, start, end]");
            }
        }
      PpStatus st = pp_trace_write_rank_plan (c->w, rank, a, n, timeline != 0, c->err);
      free (a);
      if (st != PP_OK)
        return st;
    }
  return PP_OK;
}

static PpStatus
read_markers (Chrome *c, uint32_t list)
{
  const PpJsonDoc *doc = c->doc;
  PpStatus st = PP_OK;
  int32_t current = -1;
  size_t i = 0;
  for (uint32_t e = first_child (doc, list, PP_JSON_ARRAY); e != 0 && st == PP_OK; e = next_of (doc, e), i++)
    {
      int32_t rank, step, phase, process;
      int64_t t;
      if (!int32_of (doc, element (doc, e, 0), &rank) || !int32_of (doc, element (doc, e, 1), &step)
          || !int32_of (doc, element (doc, e, 2), &phase) || !time_of (c, element (doc, e, 3), 0, &t)
          || !int32_of (doc, element (doc, e, 4), &process) || process < -1 || process >= PP_TRACE_MAX_PROCESSES
          || (phase != PP_TRACE_STEP_BEGIN && phase != PP_TRACE_STEP_END))
        return bad_at (c, "markers", i, e, "not a step marker [rank, step, phase, ns, process]");
      if (process != current)
        st = pp_trace_writer_set_process (c->w, current = process, c->err);
      if (st == PP_OK)
        st = pp_trace_write_step_marker (c->w, rank, step, (PpTraceStepPhase) phase, t, c->err);
    }
  return st == PP_OK ? pp_trace_writer_set_process (c->w, -1, c->err) : st;
}

static PpStatus
read_counters (Chrome *c, uint32_t list)
{
  const PpJsonDoc *doc = c->doc;
  PpStatus st = PP_OK;
  int32_t current = -1;
  size_t i = 0;
  for (uint32_t e = first_child (doc, list, PP_JSON_ARRAY); e != 0 && st == PP_OK; e = next_of (doc, e), i++)
    {
      PpCounter k;
      int32_t kind, process;
      memset (&k, 0, sizeof k);
      if (!int32_of (doc, element (doc, e, 0), &k.rank) || !int32_of (doc, element (doc, e, 1), &k.step)
          || !int32_of (doc, element (doc, e, 2), &kind) || kind < 0 || kind > UINT16_MAX
          || !time_of (c, element (doc, e, 3), 0, &k.time_ns) || !double_of (doc, element (doc, e, 4), &k.value)
          || !int32_of (doc, element (doc, e, 5), &process) || process < -1 || process >= PP_TRACE_MAX_PROCESSES)
        return bad_at (c, "counters", i, e, "not a counter [rank, step, kind, ns, value bits, process]");
      k.kind = (uint16_t) kind;
      if (process != current)
        st = pp_trace_writer_set_process (c->w, current = process, c->err);
      if (st == PP_OK)
        st = pp_trace_write_counter (c->w, &k, c->err);
    }
  return st == PP_OK ? pp_trace_writer_set_process (c->w, -1, c->err) : st;
}

/* ---- spans ---------------------------------------------------------------------- */

/* A span kind: its name, or its number where the writer knew no name
 * for it (a kind newer than that pipescope: kept as it was). */
static int
kind_of (const PpJsonDoc *doc, uint32_t node)
{
  char buf[32];
  int64_t num;
  if (node != 0 && pp_json_int (doc, node, &num))
    return num >= 0 && num <= UINT16_MAX ? (int) num : -1;
  if (node == 0 || pp_json_string (doc, node, buf, sizeof buf) < 0)
    return -1;
  for (int k = 0; k < PP_N_SPAN_KINDS; k++)
    {
      const char *n = pp_span_kind_name ((PpSpanKind) k);
      if (n != NULL && strcmp (n, buf) == 0)
        return k;
    }
  return -1;
}

typedef struct {
  PpSpan  span;
  int32_t process;
  size_t  order;     /* in the file: qsort is not stable */
} Tagged;

static int
cmp_tagged (const void *a, const void *b)
{
  const Tagged *x = a, *y = b;
  if (x->process != y->process)
    return x->process < y->process ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* A span event: "X" with args.rank and args.kind a span kind (plan,
 * step and flow events have neither). 1 a span, 0 not one, -1 bad. */
static int
span_of (Chrome *c, uint32_t ev, Tagged *out, PpStatus *st)
{
  const PpJsonDoc *doc = c->doc;
  uint32_t args = pp_json_get (doc, ev, "args");
  if (!pp_json_string_is (doc, pp_json_get (doc, ev, "ph"), "X") || args == 0
      || pp_json_get (doc, args, "rank") == 0 || pp_json_string_is (doc, pp_json_get (doc, ev, "cat"), "plan"))
    return 0;
  PpSpan *s = &out->span;
  int kind = kind_of (doc, pp_json_get (doc, args, "kind"));
  int64_t dur;
  memset (out, 0, sizeof *out);
  s->peer_rank = -1;
  s->device = 0xffff;
  out->process = -1;
  if (kind < 0 || !int32_of (doc, pp_json_get (doc, args, "rank"), &s->rank) || s->rank < 0
      || s->rank >= PP_TRACE_MAX_RANKS || !int32_of (doc, pp_json_get (doc, args, "stage"), &s->stage)
      || !int32_of (doc, pp_json_get (doc, args, "microbatch"), &s->microbatch)
      || !int32_of (doc, pp_json_get (doc, args, "step"), &s->step)
      || !time_of (c, pp_json_get (doc, ev, "ts"), 3, &s->start_ns)
      || !pp_json_scaled (doc, pp_json_get (doc, ev, "dur"), 3, &dur) || dur < 0 || dur > 2 * TIME_LIMIT)
    return -1;
  s->kind = (uint16_t) kind;
  s->end_ns = clamp_limit (s->start_ns + dur);
  uint32_t v;
  int64_t x;
  if ((v = pp_json_get (doc, args, "process")) != 0)
    {
      if (!int_in (doc, v, 0, PP_TRACE_MAX_PROCESSES - 1, &x))
        return -1;
      out->process = (int32_t) x;
    }
  if ((v = pp_json_get (doc, args, "peer_rank")) != 0 && !int32_of (doc, v, &s->peer_rank))
    return -1;
  if ((v = pp_json_get (doc, args, "backward_kind")) != 0)
    {
      int sub = kind_of (doc, v);
      if (sub < 0 || !int32_of (doc, pp_json_get (doc, args, "backward_stage"), &s->sub_stage)
          || !int32_of (doc, pp_json_get (doc, args, "backward_microbatch"), &s->sub_microbatch))
        return -1;
      s->sub_kind = (uint16_t) sub;
    }
  if ((v = pp_json_get (doc, args, "bytes")) != 0)
    {
      if (!int_in (doc, v, 0, INT64_MAX, &x))
        return -1;
      s->bytes = (uint64_t) x;
    }
  if ((v = pp_json_get (doc, args, "device")) != 0)
    {
      if (!int_in (doc, v, 0, 0xfffe, &x))
        return -1;
      s->device = (uint16_t) x;
      if (!int_in (doc, pp_json_get (doc, args, "stream"), 0, UINT32_MAX, &x))
        return -1;
      s->stream = (uint32_t) x;
    }
  /* another thread's collection (export's gc_thread, format 1.8) */
  if (s->kind == PP_SPAN_GC && (v = pp_json_get (doc, args, "gc_thread")) != 0)
    {
      if (!int_in (doc, v, 1, PP_GC_THREAD_MASK, &x))
        return -1;
      s->stream = (uint32_t) x;
      uint32_t w = pp_json_get (doc, args, "gc_stops_world");
      if (w != 0 && pp_json_node (doc, w)->type == PP_JSON_TRUE)
        s->stream |= PP_GC_STOPS_WORLD;
    }
  if ((v = pp_json_get (doc, args, "source_name")) != 0)
    {
      char name[PP_TRACE_STRING_MAX + 1];
      if (pp_json_string (doc, v, name, sizeof name) < 0)
        return -1;
      s->name_id = intern (c, name, st);
      if (*st != PP_OK)
        return -1;
    }
  return 1;
}

static PpStatus
read_spans (Chrome *c, uint32_t events, PpImportSummary *sum, int *max_step)
{
  const PpJsonDoc *doc = c->doc;
  size_t n = 0, cap = 0;
  Tagged *all = NULL;
  PpStatus st = PP_OK;
  size_t at = 0;
  for (uint32_t e = first_child (doc, events, PP_JSON_ARRAY); e != 0; e = next_of (doc, e), at++)
    {
      Tagged t;
      int got = span_of (c, e, &t, &st);
      if (got < 0)
        {
          free (all);
          return st != PP_OK ? st : bad_at (c, "traceEvents", at, e, "a span event whose args (rank, kind, stage, microbatch, step) or times are not what export writes");
        }
      if (got == 0)
        continue;
      if (n == cap)
        {
          /* the spans and their copy in runs below, in what the import has
           * left: as many more as fit, then one line */
          size_t nc = cap ? cap * 2 : 4096, room = c->mem / (sizeof *all + sizeof (PpSpan));
          if (nc > room)
            nc = room;
          if (nc <= cap)
            {
              free (all);
              return pp_error_set (c->err, PP_EFORMAT,
                                   "%s: more spans than an import holds (%zu of them, with its JSON, are "
                                   "%zu MiB): refused", c->name, n, PP_IMPORT_MAX_MEMORY >> 20);
            }
          Tagged *g = realloc (all, nc * sizeof *g);
          if (g == NULL)
            {
              free (all);
              return pp_error_set (c->err, PP_ENOMEM, "out of memory");
            }
          all = g;
          cap = nc;
        }
      t.order = n;
      all[n++] = t;
      if (pp_span_kind_is_block (t.span.kind))
        sum->blocks++;
      else if (t.span.kind == PP_SPAN_KERNEL || t.span.kind == PP_SPAN_MEMCPY || t.span.kind == PP_SPAN_MEMSET)
        sum->device_spans++;
      else if (t.span.kind >= PP_SPAN_SEND_F && t.span.kind <= PP_SPAN_RECV_B)
        sum->transfers++;
      if (t.span.step > *max_step)
        *max_step = t.span.step;
    }
  /* each process's spans under its tag, in the order they came, in as
   * few frames as the writer can make of them */
  if (n > 1)
    qsort (all, n, sizeof *all, cmp_tagged);   /* all is NULL when there are none */
  PpSpan *run = malloc ((n + 1) * sizeof *run);
  if (run == NULL)
    {
      free (all);
      return pp_error_set (c->err, PP_ENOMEM, "out of memory");
    }
  for (size_t i = 0; i < n && st == PP_OK;)
    {
      size_t j = i;
      for (; j < n && all[j].process == all[i].process; j++)
        run[j - i] = all[j].span;
      st = pp_trace_writer_set_process (c->w, all[i].process, c->err);
      if (st == PP_OK)
        st = pp_trace_write_spans (c->w, run, j - i, c->err);
      i = j;
    }
  free (run);
  free (all);
  return st == PP_OK ? pp_trace_writer_set_process (c->w, -1, c->err) : st;
}

PpStatus
pp_import_chrome (const PpJsonDoc *doc, const char *name, size_t mem, PpTraceWriter *w,
                  PpImportSummary *sum, PpError *err)
{
  Chrome c = { .doc = doc, .name = name, .w = w, .err = err, .mem = mem };
  uint32_t meta = pp_json_get (doc, 0, "pipescope"), v;
  int64_t format, dropped = 0;
  PpStatus st = PP_OK;
  int max_step = -1;

  memset (sum, 0, sizeof *sum);
  sum->files = 1;
  sum->matched = 1;
  sum->from_export = 1;
  if (!int_in (doc, pp_json_get (doc, meta, "format"), 0, INT32_MAX, &format))
    return bad (&c, "its 'pipescope' member has no format");
  if (format != CHROME_FORMAT)
    return pp_error_set (err, PP_EUNSUPPORTED, "%s: a pipescope Chrome export of format %" PRId64
                         ", this pipescope reads format %d: import it with the pipescope that wrote it",
                         name, format, CHROME_FORMAT);
  if (!int_in (doc, pp_json_get (doc, meta, "origin_ns"), -TIME_LIMIT, TIME_LIMIT, &c.origin))
    return bad (&c, "its 'pipescope' member has no origin_ns");
  snprintf (sum->schedule, sizeof sum->schedule, "unknown");
  if ((v = pp_json_get (doc, meta, "description")) != 0)
    st = read_description (&c, v, sum);
  if (st == PP_OK)
    st = read_processes (&c, pp_json_get (doc, meta, "processes"), sum);
  if (st == PP_OK)
    st = read_ranks (&c, pp_json_get (doc, meta, "ranks"));
  if (st == PP_OK)
    st = read_plans (&c, pp_json_get (doc, meta, "plans"));
  if (st == PP_OK)
    st = read_spans (&c, pp_json_get (doc, 0, "traceEvents"), sum, &max_step);
  if (st == PP_OK)
    st = read_markers (&c, pp_json_get (doc, meta, "markers"));
  if (st == PP_OK)
    st = read_counters (&c, pp_json_get (doc, meta, "counters"));
  if (st == PP_OK && int_in (doc, pp_json_get (doc, meta, "dropped"), 0, INT64_MAX, &dropped) && dropped > 0)
    st = pp_trace_write_dropped (w, -1, (uint64_t) dropped, err);
  sum->steps = max_step + 1;
  for (uint32_t id = 1; id <= c.n_names; id++)
    free (c.names[id]);
  free (c.names);
  free (c.slots);
  return st;
}
