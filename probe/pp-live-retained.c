/* pp-live-retained.c — the essential frames a live server keeps past its
 * history, so that a viewer that attaches late can still draw the job
 * (pp-live.h, retained_max_bytes).
 *
 * Every DESCRIPTION, PLAN, CLOCK_OFFSET, RANK and STRING frame is copied
 * here as the history takes it, under a key that says what a newer frame
 * replaces, as docs/trace-format.md has a reader take them: the plan, the
 * clock offset and the RANK frame of a rank, the name of a string id.  The
 * first DESCRIPTION has a key of its own and stays (a late viewer gets it
 * first, where a writer puts it); later ones replace each other.  A PLAN
 * every few seconds for every rank (profile's timed plan) thus costs one
 * frame per rank, not one per plan.
 *
 * String ids are not bounded (a u32), and a name is needed as long as an
 * event of the history names it: each STRING remembers the last SPANS
 * frame that named it (last_ref; its own place at first: a name still in
 * the history has its spans yet to come, and a span sent before its name
 * leaves the history before it).  Past the bound, names no event of the
 * history uses go, oldest first.  If that is not enough and dropping
 * names could be, the oldest chunks of the history go (their events are
 * counted as dropped for the viewers that reach them, as any evicted
 * event), and the names only they used after them.  Past all that (keyed
 * frames alone over the bound: a stream no real job writes), the oldest
 * frames go, the first description never.  A frame that goes leaves a
 * tombstone at its place in the stream: a viewer that walks past it counts
 * it in its DROPPED frame.
 *
 * Entries stay in stream order, so that a late viewer walks them by
 * sequence number.  One that a newer frame of its key replaced is marked
 * dead and removed by a compaction once the entries have doubled; the
 * compaction merges neighbouring tombstones before the history's start (a
 * viewer that stood between two of them is told of both) and rebuilds the
 * key index, an open-addressing hash of key -> newest entry.
 */
#include "pp-live-private.h"

/* What a live entry costs besides its frame: the entry, the allocation's
 * header, its share of the hash and of the dead entries awaiting
 * compaction (as many as were kept at the last one).  max bounds bytes +
 * this for each. */
#define ENTRY_COST   (2 * sizeof (Kept) + 32)
#define KEY_STRING   ((uint64_t) PP_TRACE_FRAME_STRING << 32)

int
pp_live_kept_is_essential (uint16_t type)
{
  return type == PP_TRACE_FRAME_DESCRIPTION || type == PP_TRACE_FRAME_PLAN
         || type == PP_TRACE_FRAME_CLOCK_OFFSET || type == PP_TRACE_FRAME_STRING
         || type == PP_TRACE_FRAME_RANK || type == PP_TRACE_FRAME_PROCESS;
}

static int
is_string (const Kept *e)
{
  return (e->key >> 32) == PP_TRACE_FRAME_STRING;
}

static uint64_t
cost (const KeptSet *k)
{
  return k->bytes + (uint64_t) k->n_live * ENTRY_COST;
}

static uint64_t
string_cost (const KeptSet *k)
{
  return k->string_bytes + (uint64_t) k->n_strings * ENTRY_COST;
}

/* The rank of PLAN, CLOCK_OFFSET and RANK frames, the process of a
 * PROCESS frame and the id of a STRING are the same 4 bytes after the
 * frame header.  A frame too short to hold them is malformed (a viewer's
 * reader refuses it): they share one key.  The header's process (1.4)
 * keeps two processes of one pipeline rank apart (a collector's stream
 * holds both); a STRING's id is the stream's alone, whoever wrote it. */
static uint64_t
key_of (PpLiveServer *s, uint16_t type, const uint8_t *f, uint32_t size)
{
  uint32_t sub = UINT32_MAX;
  if (type == PP_TRACE_FRAME_DESCRIPTION)
    sub = s->kept.have_desc ? 1 : 0;
  else if (size >= 12)
    {
      memcpy (&sub, f + 8, 4);
      sub = s32 (s, sub);
    }
  uint64_t who = 0;
  if (type != PP_TRACE_FRAME_STRING && type != PP_TRACE_FRAME_DESCRIPTION)
    {
      uint16_t tag;
      memcpy (&tag, f + offsetof (PpTraceFrameHeader, process), 2);
      who = s->swap ? __builtin_bswap16 (tag) : tag;
    }
  return who << 48 | (uint64_t) type << 32 | sub;
}

static uint64_t
mix (uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

/* The slot of key: the one holding its newest entry, or the empty one
 * where it goes. */
static uint32_t *
slot_of (KeptSet *k, uint64_t key)
{
  size_t mask = k->hash_cap - 1;
  for (size_t i = mix (key) & mask;; i = (i + 1) & mask)
    if (k->hash[i] == 0 || k->e[k->hash[i] - 1].key == key)
      return &k->hash[i];
}

/* A new index of the live entries, of at least twice their number. */
static int
rehash (KeptSet *k)
{
  size_t cap = 64;
  while (cap < 4 * (k->n_live + 1))
    cap *= 2;
  uint32_t *h = calloc (cap, sizeof *h);
  if (h == NULL)
    return -1;
  free (k->hash);
  k->hash = h;
  k->hash_cap = cap;
  k->hash_used = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->e[i].data != NULL)
      {
        *slot_of (k, k->e[i].key) = (uint32_t) (i + 1);
        k->hash_used++;
      }
  return 0;
}

/* Frees an entry's frame: replaced by a newer one of its key (gone 0), or
 * dropped (gone 1: a tombstone that viewers count). */
static void
unlink_entry (KeptSet *k, Kept *e, uint64_t gone)
{
  free (e->data);
  e->data = NULL;
  e->gone = gone;
  k->bytes -= e->size;
  k->n_live--;
  if (is_string (e))
    {
      k->string_bytes -= e->size;
      k->n_strings--;
    }
  if (gone)
    k->dropped++;
  else
    k->superseded++;
}

/* Removes the replaced entries and merges neighbouring tombstones once
 * the entries have doubled since the last time: each compaction follows
 * at least as many additions as it keeps.  Only tombstones past the
 * history's start merge: one of a frame still in the history must stay
 * where it is, as the frame is sent from there until the history loses
 * it. */
static void
compact (PpLiveServer *s)
{
  KeptSet *k = &s->kept;
  if (k->n < 2 * k->n_compacted + 64)
    return;
  size_t j = 0;
  for (size_t i = 0; i < k->n; i++)
    {
      Kept *e = &k->e[i];
      if (e->data == NULL && e->gone == 0)
        continue;
      if (e->data == NULL && e->seq < s->first_seq && j > 0 && k->e[j - 1].data == NULL)
        {
          k->e[j - 1].gone += e->gone;
          k->e[j - 1].seq = e->seq;
          continue;
        }
      k->e[j++] = *e;
    }
  k->n = k->n_compacted = j;
  if (rehash (k) < 0)
    {
      /* the old index points at moved entries: rebuilt on the next add */
      free (k->hash);
      k->hash = NULL;
      k->hash_cap = k->hash_used = 0;
    }
}

int
pp_live_kept_add (PpLiveServer *s, uint16_t type, const uint8_t *f, uint32_t size, uint64_t seq,
                  uint64_t cum, uint64_t *replaced)
{
  KeptSet *k = &s->kept;
  *replaced = UINT64_MAX;
  uint64_t key = key_of (s, type, f, size);
  if ((k->hash_used + 1) * 2 > k->hash_cap && rehash (k) < 0)
    return -1;
  if (grow ((void **) &k->e, &k->cap, k->n + 1, sizeof *k->e) < 0)
    return -1;
  uint8_t *copy = malloc (size);
  if (copy == NULL)
    return -1;
  memcpy (copy, f, size);
  uint32_t *slot = slot_of (k, key);
  if (*slot != 0 && k->e[*slot - 1].data != NULL)
    {
      *replaced = k->e[*slot - 1].seq;
      unlink_entry (k, &k->e[*slot - 1], 0);
    }
  else if (*slot == 0)
    k->hash_used++;
  k->e[k->n] = (Kept) { .key = key, .seq = seq, .cum = cum, .last_ref = seq, .data = copy,
                        .size = size };
  *slot = (uint32_t) ++k->n;
  k->n_live++;
  k->bytes += size;
  if (type == PP_TRACE_FRAME_STRING)
    {
      k->string_bytes += size;
      k->n_strings++;
    }
  if (type == PP_TRACE_FRAME_DESCRIPTION)
    k->have_desc = 1;
  compact (s);
  return 0;
}

/* A SPANS frame at seq: the names its spans use are needed as long as it
 * is in the history. */
void
pp_live_kept_refs (PpLiveServer *s, const uint8_t *f, uint32_t size, uint64_t seq)
{
  KeptSet *k = &s->kept;
  uint32_t last = 0;
  if (k->n_strings == 0 || k->hash_cap == 0)
    return;
  for (uint32_t o = 8; o + 40 <= size; o += 40)
    {
      uint32_t id;
      if (f[o + 39] & PP_TRACE_SPAN_IS_EXT)
        continue;
      memcpy (&id, f + o + 20, 4);
      id = s32 (s, id);
      if (id == 0 || id == last)
        continue;
      last = id;
      uint32_t *slot = slot_of (k, KEY_STRING | id);
      if (*slot != 0 && k->e[*slot - 1].data != NULL)
        k->e[*slot - 1].last_ref = seq;
    }
}

/* Drops the names no event of the history uses, oldest first, until the
 * set costs at most low. */
static void
drop_unused_names (PpLiveServer *s, uint64_t low)
{
  KeptSet *k = &s->kept;
  for (size_t i = 0; i < k->n && cost (k) > low && k->n_strings > 0; i++)
    if (k->e[i].data != NULL && is_string (&k->e[i]) && k->e[i].last_ref < s->first_seq)
      unlink_entry (k, &k->e[i], 1);
}

static int
by_last_ref (const void *a, const void *b)
{
  uint64_t x = ((const uint64_t *) a)[0], y = ((const uint64_t *) b)[0];
  return x < y ? -1 : x > y;
}

/* Where the history must start for the names to fit in low: the least
 * recently used go first.  UINT64_MAX when out of memory. */
static uint64_t
names_horizon (PpLiveServer *s, uint64_t low)
{
  KeptSet *k = &s->kept;
  uint64_t (*refs)[2] = malloc (k->n_strings * sizeof *refs + 1);
  if (refs == NULL)
    return UINT64_MAX;
  size_t n = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->e[i].data != NULL && is_string (&k->e[i]))
      {
        refs[n][0] = k->e[i].last_ref;
        refs[n][1] = k->e[i].size + ENTRY_COST;
        n++;
      }
  qsort (refs, n, sizeof *refs, by_last_ref);
  uint64_t c = cost (k), horizon = s->first_seq;
  for (size_t i = 0; i < n && c > low; i++)
    {
      c -= refs[i][1];
      horizon = refs[i][0] + 1;
    }
  free (refs);
  return horizon;
}

/* Brings the set within its bound (lock held, after each frame).  From
 * over max down to three quarters of it, so that a flood pays for this
 * once per quarter of the bound, not once per frame. */
void
pp_live_kept_bound (PpLiveServer *s)
{
  KeptSet *k = &s->kept;
  if (cost (k) <= k->max)
    return;
  uint64_t low = k->max - k->max / 4;
  drop_unused_names (s, low);
  if (cost (k) > low && cost (k) - string_cost (k) <= low)
    {
      /* the names the history's events use: the oldest events go first */
      uint64_t horizon = names_horizon (s, low);
      while (horizon != UINT64_MAX && s->first_seq < horizon
             && pp_live_history_evict_oldest (s) == 0)
        ;
      drop_unused_names (s, low);
    }
  for (size_t i = 0; i < k->n && cost (k) > low; i++)
    if (k->e[i].data != NULL && k->e[i].key != (uint64_t) PP_TRACE_FRAME_DESCRIPTION << 32)
      unlink_entry (k, &k->e[i], 1);
  compact (s);
}

uint64_t
pp_live_kept_cost (const PpLiveServer *s)
{
  return cost (&s->kept);
}

/* The first live entry or tombstone at from_seq or after, if before
 * below_seq. */
const Kept *
pp_live_kept_next (PpLiveServer *s, uint64_t from_seq, uint64_t below_seq)
{
  KeptSet *k = &s->kept;
  size_t lo = 0, hi = k->n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (k->e[mid].seq < from_seq)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (; lo < k->n && k->e[lo].seq < below_seq; lo++)
    if (k->e[lo].data != NULL || k->e[lo].gone > 0)
      return &k->e[lo];
  return NULL;
}

void
pp_live_kept_free (PpLiveServer *s)
{
  KeptSet *k = &s->kept;
  for (size_t i = 0; i < k->n; i++)
    free (k->e[i].data);
  free (k->e);
  free (k->hash);
  memset (k, 0, sizeof *k);
}

void
pp_live_server_retained (PpLiveServer *s, PpLiveRetained *out)
{
  memset (out, 0, sizeof *out);
  if (s == NULL)
    return;
  pthread_mutex_lock (&s->lock);
  out->frames = s->kept.n_live;
  out->bytes = s->kept.bytes;
  out->superseded = s->kept.superseded;
  out->dropped = s->kept.dropped;
  pthread_mutex_unlock (&s->lock);
}
