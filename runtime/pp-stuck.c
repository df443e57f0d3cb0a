/* pp-stuck.c — the wait-for graph of a stuck job's open actions, its root
 * or cycle, and the diagnosis line (pp-stuck.h). */
#include "pp-stuck.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-event.h"

static int32_t
number (const PpStuckProcess *p)
{
  return p->process >= 0 ? p->process : p->open.rank;
}

static bool
is_transfer (int kind)
{
  return kind == PP_SPAN_SEND_F || kind == PP_SPAN_RECV_F || kind == PP_SPAN_SEND_B
         || kind == PP_SPAN_RECV_B || kind == PP_SPAN_WAIT;
}

/* One collective a data-parallel kind belongs to: 1 the all-gather, 2 the
 * gradient reduction (its wait included), 0 none. */
static int
dp_collective (int kind)
{
  if (kind == PP_SPAN_UNSHARD)
    return 1;
  if (kind == PP_SPAN_REDUCE_GRAD || kind == PP_SPAN_WAIT_REDUCE_GRAD)
    return 2;
  return 0;
}

static bool
open_now (const PpStuckProcess *p)
{
  return p->has_open && !p->gone && !(p->open.flags & PP_TRACE_OPEN_CLOSED) && p->open.kind >= 0;
}

static bool
same_replica (const PpStuckProcess *p, const PpStuckProcess *q)
{
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS; d++)
    if (q->coord[d] != p->coord[d])
      return false;
  return true;
}

/* The process a's transfer is with (an index), or n: its peer in a's own
 * pipeline (same dp, tp, cp, ep), by global rank first (PyTorch's P2P
 * ops name the peer so) and else by pipeline rank (the bundled runtime,
 * a job of one pipeline). */
static size_t
peer_of (const PpStuckProcess *ps, size_t n, size_t a)
{
  const PpStuckProcess *p = &ps[a];
  int32_t peer = p->open.peer_rank;
  if (peer < 0)
    return n;
  for (size_t b = 0; b < n; b++)
    if (b != a && ps[b].process == peer && same_replica (p, &ps[b]))
      return b;
  for (size_t b = 0; b < n; b++)
    if (b != a && ps[b].coord[PP_TRACE_MESH_PP] == peer && same_replica (p, &ps[b]))
      return b;
  return n;
}

/* Whether a waits for b (indices into ps[n]). */
static bool
waits_for (const PpStuckProcess *ps, size_t n, size_t a, size_t b)
{
  const PpStuckProcess *p = &ps[a], *q = &ps[b];
  if (a == b || !open_now (p))
    return false;
  const PpTraceOpen *o = &p->open;
  if (is_transfer (o->kind))
    return peer_of (ps, n, a) == b;
  int coll = dp_collective (o->kind);
  if (coll == 0)
    return false;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (d != PP_TRACE_MESH_DP && q->coord[d] != p->coord[d])
      return false;
  /* a member of the group: arrived when in the same collective */
  return !(open_now (q) && dp_collective (q->open.kind) == coll && q->open.stage == o->stage
           && q->open.step == o->step);
}

const char *
pp_stuck_action_words (const PpTraceOpen *o, bool with_step, char *buf, size_t size)
{
  size_t len = 0;
#define PUT(...) do { if (len < size) len += (size_t) snprintf (buf + len, size - len, __VA_ARGS__); } while (0)
  if (size == 0)
    return buf;
  buf[0] = '\0';
  if (o->kind < 0)
    {
      PUT ("no recorded action");
      return buf;
    }
  int coll = dp_collective (o->kind);
  if (coll)
    PUT ("the dp %s of stage %d", coll == 1 ? "all-gather" : "all-reduce", o->stage);
  else if (o->kind == PP_SPAN_OPT)
    PUT ("the optimizer");
  else
    {
      PUT ("%s", pp_span_kind_name ((PpSpanKind) o->kind));
      if (o->microbatch >= 0)
        PUT (" mb %d", o->microbatch);
    }
  if (with_step && o->step >= 0)
    PUT (" of step %d", o->step);
#undef PUT
  return buf;
}

/* "pp 1 dp 1, host H, pid N": the dimensions the job has beyond pp. */
static void
place_words (const PpStuckProcess *p, char *buf, size_t size)
{
  static const char *const dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };
  size_t len = (size_t) snprintf (buf, size, "pp %d", p->coord[PP_TRACE_MESH_PP]);
  for (int d = PP_TRACE_MESH_DP; d < PP_TRACE_MESH_DIMS && len < size; d++)
    if (p->size[d] > 1)
      len += (size_t) snprintf (buf + len, size - len, " %s %d", dim[d], p->coord[d]);
  if (p->host[0] && len < size)
    len += (size_t) snprintf (buf + len, size - len, ", host %s", p->host);
  if (p->pid > 0 && len < size)
    snprintf (buf + len, size - len, ", pid %d", p->pid);
}

typedef struct {
  char  *buf;
  size_t size, len;
} Line;

static void
put (Line *l, const char *fmt, ...)
{
  if (l->len >= l->size)
    return;
  va_list ap;
  va_start (ap, fmt);
  int n = vsnprintf (l->buf + l->len, l->size - l->len, fmt, ap);
  va_end (ap);
  if (n > 0)
    l->len += (size_t) n;
  if (l->len >= l->size)
    l->len = l->size - 1;
}

/* "1, 2 and 3" of the processes idx[0..n). */
static void
put_numbers (Line *l, const PpStuckProcess *ps, const size_t *idx, size_t n, const char *last_sep)
{
  for (size_t k = 0; k < n; k++)
    put (l, "%s%d", k == 0 ? "" : k + 1 == n ? last_sep : ", ", number (&ps[idx[k]]));
}

/* What waiter w waits in, for the list after a root: "RECV_B mb 1 from
 * 3" (the process it waits for), "the dp all-reduce of stage 0". */
static void
waiter_words (const PpStuckProcess *ps, size_t n, size_t w, char *buf, size_t size)
{
  char act[96];
  pp_stuck_action_words (&ps[w].open, false, act, sizeof act);
  if (!is_transfer (ps[w].open.kind))
    {
      snprintf (buf, size, "%s", act);
      return;
    }
  bool recv = ps[w].open.kind != PP_SPAN_SEND_F && ps[w].open.kind != PP_SPAN_SEND_B;
  for (size_t j = 0; j < n; j++)
    if (waits_for (ps, n, w, j))
      {
        snprintf (buf, size, "%s %s %d", act, recv ? "from" : "to", number (&ps[j]));
        return;
      }
  snprintf (buf, size, "%s %s pp %d (not in the trace)", act, recv ? "from" : "to", ps[w].open.peer_rank);
}

/* The root's own words: its place, its action and for how long, where. */
static void
put_process (Line *l, const PpStuckProcess *p)
{
  char place[192], act[96];
  place_words (p, place, sizeof place);
  put (l, "process %d (%s) ", number (p), place);
  if (p->gone)
    put (l, "stopped sending its heartbeat");
  else if (p->has_open && (p->open.flags & PP_TRACE_OPEN_CLOSED))
    put (l, "has closed (it ended)");
  else if (!p->has_open)
    put (l, "says nothing of what it does");
  else
    {
      put (l, "in %s", pp_stuck_action_words (&p->open, true, act, sizeof act));
      if (p->open.start_ns > 0 && p->open.time_ns >= p->open.start_ns)
        put (l, " for %.0f s", (double) (p->open.time_ns - p->open.start_ns) / 1e9);
    }
  if (p->has_open && p->open.where[0])
    put (l, ", in %s", p->open.where);
}

PpStuckKind
pp_stuck_diagnose (const PpStuckProcess *ps, size_t n, PpStuckVerdict *v, char *line, size_t size)
{
  PpStuckVerdict own;
  char none[1];
  if (v == NULL)
    v = &own;
  if (line == NULL || size == 0)
    {
      line = none;
      size = sizeof none;
    }
  memset (v, 0, sizeof *v);
  line[0] = '\0';
  if (ps == NULL || n == 0)
    return PP_STUCK_NONE;

  /* out-degree, and who waits (directly) */
  int *out = calloc (n, sizeof *out);
  bool *reach = calloc (n, sizeof *reach);
  size_t *idx = calloc (n, sizeof *idx);
  if (out == NULL || reach == NULL || idx == NULL)
    {
      free (out);
      free (reach);
      free (idx);
      return PP_STUCK_NONE;
    }
  for (size_t a = 0; a < n; a++)
    for (size_t b = 0; b < n; b++)
      out[a] += waits_for (ps, n, a, b);
  for (size_t a = 0; a < n; a++)
    v->n_waiting += out[a] > 0;
  Line l = { line, size, 0 };
  if (v->n_waiting == 0)
    goto done;

  /* roots: wait for nobody, and somebody waits for them */
  for (size_t r = 0; r < n && v->n < PP_STUCK_MAX; r++)
    {
      if (out[r] > 0)
        continue;
      bool waited = false;
      for (size_t a = 0; a < n && !waited; a++)
        waited = waits_for (ps, n, a, r);
      if (!waited)
        continue;
      v->kind = PP_STUCK_ROOT;
      v->who[v->n++] = number (&ps[r]);
      /* everyone who reaches r, directly or through others */
      memset (reach, 0, n * sizeof *reach);
      reach[r] = true;
      for (bool grew = true; grew;)
        {
          grew = false;
          for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < n && !reach[a]; b++)
              if (reach[b] && waits_for (ps, n, a, b))
                reach[a] = grew = true;
        }
      size_t nw = 0;
      for (size_t a = 0; a < n; a++)
        if (a != r && reach[a])
          idx[nw++] = a;
      for (size_t i = 1; i < nw; i++)   /* in order of process number */
        for (size_t j = i; j > 0 && number (&ps[idx[j - 1]]) > number (&ps[idx[j]]); j--)
          {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
          }
      put (&l, "stuck: ");
      put_process (&l, &ps[r]);
      put (&l, "; process%s ", nw == 1 ? "" : "es");
      put_numbers (&l, ps, idx, nw, ", ");
      put (&l, " wait%s for it:", nw == 1 ? "s" : "");
      /* grouped by what they wait in, in order of first appearance */
      bool *said = calloc (nw, sizeof *said);
      size_t *group = calloc (nw, sizeof *group);
      for (size_t k = 0; said != NULL && group != NULL && k < nw; k++)
        {
          if (said[k])
            continue;
          char words[160], other[160];
          waiter_words (ps, n, idx[k], words, sizeof words);
          size_t ng = 0;
          for (size_t m = k; m < nw; m++)
            {
              if (said[m])
                continue;
              waiter_words (ps, n, idx[m], other, sizeof other);
              if (strcmp (words, other) == 0)
                {
                  said[m] = true;
                  group[ng++] = idx[m];
                }
            }
          put (&l, "%s ", k == 0 ? "" : ";");
          put_numbers (&l, ps, group, ng, " and ");
          put (&l, " in %s", words);
        }
      free (said);
      free (group);
      put (&l, "\n");
    }
  if (v->kind == PP_STUCK_ROOT)
    goto done;

  /* no root: a cycle.  From a waiting process, follow its first edge
   * until a process comes again. */
  for (size_t s = 0; s < n; s++)
    {
      if (out[s] == 0)
        continue;
      int *seen = calloc (n, sizeof *seen);   /* position in the walk + 1 */
      size_t *walk = calloc (n + 1, sizeof *walk);
      if (seen == NULL || walk == NULL)
        {
          free (seen);
          free (walk);
          break;
        }
      size_t at = s, len = 0;
      while (seen[at] == 0)
        {
          seen[at] = (int) ++len;
          walk[len - 1] = at;
          size_t next = n;
          for (size_t b = 0; b < n && next == n; b++)
            if (waits_for (ps, n, at, b))
              next = b;
          if (next == n)
            break;
          at = next;
        }
      if (seen[at] != 0 && out[at] > 0 && (size_t) seen[at] <= len)
        {
          size_t from = (size_t) seen[at] - 1, first = from, m = len - from;
          for (size_t k = from; k < len; k++)   /* said from its lowest process number on */
            if (number (&ps[walk[k]]) < number (&ps[walk[first]]))
              first = k;
          v->kind = PP_STUCK_CYCLE;
          put (&l, "stuck: deadlock: ");
          for (size_t j = 0; j < m && v->n < PP_STUCK_MAX; j++)
            {
              size_t k = from + (first - from + j) % m;
              const PpStuckProcess *p = &ps[walk[k]];
              char place[192], words[160];
              place_words (p, place, sizeof place);
              waiter_words (ps, n, walk[k], words, sizeof words);
              v->who[v->n++] = number (p);
              put (&l, "%sprocess %d (%s) in %s of step %d", j == 0 ? "" : ", ", number (p), place, words,
                   p->open.step);
              if (p->open.start_ns > 0 && p->open.time_ns >= p->open.start_ns)
                put (&l, " for %.0f s", (double) (p->open.time_ns - p->open.start_ns) / 1e9);
              if (p->open.where[0])
                put (&l, ", in %s", p->open.where);
            }
          put (&l, "; each waits for the next, none can go on\n");
        }
      free (seen);
      free (walk);
      if (v->kind == PP_STUCK_CYCLE)
        break;
    }

done:
  free (out);
  free (reach);
  free (idx);
  return v->kind;
}

/* ---- from a trace's or the live streams' places and open actions ---- */

bool
pp_stuck_keep_open (PpStuckOpen **opens, size_t *n, size_t *cap, int32_t process, const PpTraceOpen *o)
{
  int32_t who = process >= 0 ? process : -1 - o->rank;   /* without places: by rank */
  for (size_t i = 0; i < *n; i++)
    if ((*opens)[i].process == who)
      {
        (*opens)[i].open = *o;
        return true;
      }
  if (*n == *cap)
    {
      size_t c = *cap ? 2 * *cap : 16;
      PpStuckOpen *g = realloc (*opens, c * sizeof *g);
      if (g == NULL)
        return false;
      *opens = g;
      *cap = c;
    }
  (*opens)[*n].process = who;
  (*opens)[*n].open = *o;
  (*n)++;
  return true;
}

/* The processes of procs' places and opens' actions, ps[n_opens]
 * (calloc'd), NULL on no memory. */
static PpStuckProcess *
processes_of (const PpTraceProcess *procs, size_t n_procs, const PpStuckOpen *opens, size_t n_opens,
              const bool *gone)
{
  PpStuckProcess *ps = calloc (n_opens ? n_opens : 1, sizeof *ps);
  if (ps == NULL)
    return NULL;
  for (size_t i = 0; i < n_opens; i++)
    {
      PpStuckProcess *p = &ps[i];
      const PpTraceProcess *place = NULL;
      for (size_t k = 0; k < n_procs && place == NULL; k++)
        if (procs[k].process == opens[i].process)
          place = &procs[k];
      p->has_open = true;
      p->open = opens[i].open;
      p->gone = gone != NULL && gone[i] && !(p->open.flags & PP_TRACE_OPEN_CLOSED);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        p->size[d] = 1;
      if (place != NULL)
        {
          p->process = place->process;
          memcpy (p->coord, place->coord, sizeof p->coord);
          memcpy (p->size, place->size, sizeof p->size);
          p->pid = place->pid;
          memcpy (p->host, place->host, sizeof p->host);
        }
      else
        {
          p->process = opens[i].process >= 0 ? opens[i].process : -1;
          p->coord[PP_TRACE_MESH_PP] = p->open.rank;
        }
    }
  return ps;
}

PpStuckKind
pp_stuck_from_places (const PpTraceProcess *procs, size_t n_procs, const PpStuckOpen *opens, size_t n_opens,
              const bool *gone, PpStuckVerdict *v, char *line, size_t size)
{
  if (n_opens == 0)
    {
      if (v)
        memset (v, 0, sizeof *v);
      if (line && size)
        line[0] = '\0';
      return PP_STUCK_NONE;
    }
  PpStuckProcess *ps = processes_of (procs, n_procs, opens, n_opens, gone);
  if (ps == NULL)
    return PP_STUCK_NONE;
  PpStuckKind k = pp_stuck_diagnose (ps, n_opens, v, line, size);
  free (ps);
  return k;
}

size_t
pp_stuck_edges (const PpStuckProcess *ps, size_t n, PpStuckEdge *edges, size_t max)
{
  size_t count = 0;
  for (size_t a = 0; ps != NULL && a < n; a++)
    for (size_t b = 0; b < n; b++)
      if (waits_for (ps, n, a, b))
        {
          if (count < max && edges != NULL)
            edges[count] = (PpStuckEdge) { number (&ps[a]), number (&ps[b]) };
          count++;
        }
  return count;
}

size_t
pp_stuck_edges_from_places (const PpTraceProcess *procs, size_t n_procs, const PpStuckOpen *opens, size_t n_opens,
                            const bool *gone, PpStuckEdge *edges, size_t max)
{
  if (n_opens == 0)
    return 0;
  PpStuckProcess *ps = processes_of (procs, n_procs, opens, n_opens, gone);
  if (ps == NULL)
    return 0;
  size_t count = pp_stuck_edges (ps, n_opens, edges, max);
  free (ps);
  return count;
}

/* ---- when a job is stuck ---- */

void
pp_stuck_steps_add (PpStuckSteps *s, int64_t step_ns)
{
  if (step_ns > 0)
    s->ns[s->n++ % PP_STUCK_STEPS_KEPT] = step_ns;
}

double
pp_stuck_after_s (const PpStuckSteps *s)
{
  int64_t kept[PP_STUCK_STEPS_KEPT];
  size_t n = s == NULL ? 0 : s->n < PP_STUCK_STEPS_KEPT ? s->n : PP_STUCK_STEPS_KEPT;
  if (n == 0)
    return PP_STUCK_AFTER_MIN_S;
  memcpy (kept, s->ns, n * sizeof *kept);
  for (size_t i = 1; i < n; i++)   /* at most 32: an insertion sort */
    for (size_t j = i; j > 0 && kept[j - 1] > kept[j]; j--)
      {
        int64_t t = kept[j];
        kept[j] = kept[j - 1];
        kept[j - 1] = t;
      }
  double steps = PP_STUCK_AFTER_STEPS * (double) kept[(n - 1) / 2] / 1e9;
  return steps > PP_STUCK_AFTER_MIN_S ? steps : PP_STUCK_AFTER_MIN_S;
}

/* ---- a viewer's watch ---- */

bool
pp_stuck_watch_take (PpStuckWatch *w, const PpTraceItem *item, int64_t now_ns)
{
  if (item->type == PP_TRACE_ITEM_SPAN)
    w->progress_ns = now_ns;
  else if (item->type == PP_TRACE_ITEM_PROCESS)
    {
      for (size_t i = 0; i < w->n_places; i++)
        if (w->places[i].process == item->process_info.process)
          {
            w->places[i] = item->process_info;
            return true;
          }
      if (w->n_places == w->cap_places)
        {
          size_t c = w->cap_places ? 2 * w->cap_places : 16;
          PpTraceProcess *g = realloc (w->places, c * sizeof *g);
          if (g == NULL)
            return false;
          w->places = g;
          w->cap_places = c;
        }
      w->places[w->n_places++] = item->process_info;
    }
  else if (item->type == PP_TRACE_ITEM_STEP_MARKER && item->step_marker.phase == PP_TRACE_STEP_END)
    {
      /* the step's length: from this process's last step end, on its clock */
      PpTraceOpen end = { .time_ns = item->step_marker.time_ns, .rank = item->step_marker.rank, .kind = -1 };
      int32_t who = item->process >= 0 ? item->process : -1 - end.rank;
      for (size_t i = 0; i < w->n_step_ends; i++)
        if (w->step_ends[i].process == who)
          {
            pp_stuck_steps_add (&w->steps, end.time_ns - w->step_ends[i].open.time_ns);
            break;
          }
      return pp_stuck_keep_open (&w->step_ends, &w->n_step_ends, &w->cap_step_ends, item->process, &end);
    }
  else if (item->type == PP_TRACE_ITEM_OPEN)
    {
      int32_t who = item->process >= 0 ? item->process : -1 - item->open.rank;
      bool changed = true;
      for (size_t i = 0; i < w->n_opens; i++)
        if (w->opens[i].process == who)
          {
            const PpTraceOpen *was = &w->opens[i].open, *o = &item->open;
            changed = o->kind != was->kind || o->step != was->step || o->stage != was->stage
                      || o->microbatch != was->microbatch || o->start_ns != was->start_ns;
            break;
          }
      if (changed)
        w->progress_ns = now_ns;
      return pp_stuck_keep_open (&w->opens, &w->n_opens, &w->cap_opens, item->process, &item->open);
    }
  return true;
}

PpStuckKind
pp_stuck_watch_diagnose (const PpStuckWatch *w, double quiet_s, int64_t now_ns, PpStuckVerdict *v, char *line,
                         size_t size)
{
  if (quiet_s > 0 && (w->progress_ns == 0 || (double) (now_ns - w->progress_ns) < quiet_s * 1e9))
    {
      if (v)
        memset (v, 0, sizeof *v);
      if (line && size)
        line[0] = '\0';
      return PP_STUCK_NONE;
    }
  return pp_stuck_from_places (w->places, w->n_places, w->opens, w->n_opens, NULL, v, line, size);
}

double
pp_stuck_watch_after_s (const PpStuckWatch *w)
{
  return pp_stuck_after_s (w != NULL ? &w->steps : NULL);
}

size_t
pp_stuck_watch_edges (const PpStuckWatch *w, PpStuckEdge *edges, size_t max)
{
  return pp_stuck_edges_from_places (w->places, w->n_places, w->opens, w->n_opens, NULL, edges, max);
}

/* A copy of src[n] (NULL for none), *ok false on no memory. */
static void *
dup_array (const void *src, size_t n, size_t size, bool *ok)
{
  if (n == 0 || src == NULL)
    return NULL;
  void *d = malloc (n * size);
  if (d == NULL)
    *ok = false;
  else
    memcpy (d, src, n * size);
  return d;
}

bool
pp_stuck_watch_copy (PpStuckWatch *dst, const PpStuckWatch *src)
{
  bool ok = true;
  pp_stuck_watch_clear (dst);
  *dst = *src;
  dst->opens = dup_array (src->opens, src->n_opens, sizeof *src->opens, &ok);
  dst->places = dup_array (src->places, src->n_places, sizeof *src->places, &ok);
  dst->step_ends = dup_array (src->step_ends, src->n_step_ends, sizeof *src->step_ends, &ok);
  dst->cap_opens = dst->opens ? src->n_opens : 0;
  dst->cap_places = dst->places ? src->n_places : 0;
  dst->cap_step_ends = dst->step_ends ? src->n_step_ends : 0;
  if (!ok)
    pp_stuck_watch_clear (dst);
  return ok;
}

void
pp_stuck_watch_clear (PpStuckWatch *w)
{
  free (w->opens);
  free (w->places);
  free (w->step_ends);
  memset (w, 0, sizeof *w);
}
