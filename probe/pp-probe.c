/* pp-probe.c — per-thread SPSC rings, a drain thread, a sink.
 *
 * Ownership, in one place:
 *   - A ring is shared by two owners, its recording thread and the probe,
 *     counted in ring->refs (2 while both hold it).  The thread drops its
 *     reference from a pthread key destructor when it exits; the probe drops
 *     its reference when the drain frees a dead ring or in pp_probe_free.
 *     Whoever drops the last reference frees the ring header.  refs == 1 seen
 *     by the drain means "the thread is gone"; seen by the thread it means
 *     "the probe is gone" (the probe frees the slots, the header stays until
 *     the thread sweeps it or exits).
 *   - ring->spans/counters: head is written by the thread only (release),
 *     tail by the drain only (release).  Classic Lamport ring with a cached
 *     tail on the producer side so a push touches no shared line while there
 *     is room.
 *   - Drop counters live in the ring and are written by the thread only
 *     (plain load + release store, no RMW), so dropping costs no contention.
 *   - p->rings (the registry) is changed under p->lock: pushes by
 *     registering threads, unlinks by the drain.  The drain walks it without
 *     the lock, from a head read under the lock: only the drain unlinks, and
 *     a push only writes the new node and the head.
 *   - The sink is called from the drain thread only, with no lock held, so a
 *     slow sink never holds up a thread registering its ring.
 */
#define _GNU_SOURCE
#include "pp-probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PP_CACHELINE 64
#define PP_LIKELY(x)   __builtin_expect (!!(x), 1)
#define PP_UNLIKELY(x) __builtin_expect (!!(x), 0)

typedef struct {
  /* read-only after creation, read by both sides */
  _Alignas (PP_CACHELINE) uint64_t mask;
  void *slots;
  /* producer's line */
  _Alignas (PP_CACHELINE) _Atomic uint64_t head;
  uint64_t tail_cache;                   /* producer's last view of tail */
  /* consumer's line */
  _Alignas (PP_CACHELINE) _Atomic uint64_t tail;
} PpSpsc;

typedef struct _PpRing PpRing;
struct _PpRing {
  PpSpsc spans;
  PpSpsc counters;

  /* Drops, per rank.  Written by the recording thread only.  drop_rank[i] is
   * written before the first release store to drop_count[i], so a reader
   * that loads drop_count[i] != 0 with acquire may read drop_rank[i].  The
   * last counter collects ranks past PP_PROBE_DROP_RANKS (reported as -1). */
  _Alignas (PP_CACHELINE) _Atomic uint64_t drop_count[PP_PROBE_DROP_RANKS + 1];
  int32_t  drop_rank[PP_PROBE_DROP_RANKS];
  uint32_t n_drop_ranks;                 /* thread-owned */
  PpRing  *thread_next;                  /* thread-owned: the thread's rings */

  /* drain-owned */
  _Alignas (PP_CACHELINE) uint64_t drop_seen[PP_PROBE_DROP_RANKS + 1];
  PpRing *next;                          /* registry link, see above */

  uint64_t    probe_id;                  /* immutable */
  _Atomic int refs;
};

typedef struct {
  int32_t  rank;
  bool     changed;
  uint64_t total;
} PpDropTotal;

struct _PpProbe {
  uint64_t        id;                    /* unique per probe, never reused */
  PpProbeConfig   cfg;

  pthread_mutex_t lock;
  pthread_cond_t  wake;                  /* drain waits here */
  pthread_cond_t  done;                  /* flushers wait here */
  PpRing         *rings;                 /* under lock */
  uint64_t        retired_dropped;       /* drops of freed rings, under lock */
  uint64_t        flush_req;             /* under lock */
  uint64_t        flush_done;            /* under lock */
  bool            stop;                  /* under lock */

  pthread_t       drain_thread;
  bool            drain_started;
  pid_t           pid;                   /* of the process that owns the drain */

  /* records lost because a thread's ring could not be allocated */
  _Atomic uint64_t unregistered_dropped;

  /* drain-owned */
  uint64_t        unregistered_seen;
  PpDropTotal    *drops;                 /* drops[0] is rank -1 */
  size_t          n_drops, drops_cap;
};

static _Atomic uint64_t pp_next_probe_id = 1;

/* The rings this thread records into, most recently used first. */
static __thread PpRing *pp_tls_rings;
static pthread_key_t    pp_thread_key;
static pthread_once_t   pp_thread_once = PTHREAD_ONCE_INIT;
static bool             pp_thread_key_ok;

static int64_t
monotonic_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* PIPESCOPE_TEST_CLOCK_SKEW_NS (tests only): nanoseconds added to this
 * process's record clock, as if it ran on a host whose clock is off; read
 * once.  Bounded to +-1000 s, and ignored unless a whole number. */
static int64_t        pp_clock_skew;
static pthread_once_t pp_clock_skew_once = PTHREAD_ONCE_INIT;

static void
read_clock_skew (void)
{
  const char *v = getenv ("PIPESCOPE_TEST_CLOCK_SKEW_NS");
  char *end;
  long long x;
  if (v == NULL || *v == '\0')
    return;
  errno = 0;
  x = strtoll (v, &end, 10);
  if (*end == '\0' && errno == 0 && x >= -1000000000000LL && x <= 1000000000000LL)
    pp_clock_skew = x;
}

int64_t
pp_probe_now_ns (void)
{
  pthread_once (&pp_clock_skew_once, read_clock_skew);
  return monotonic_ns () + pp_clock_skew;
}

static struct timespec
deadline_after (int64_t ns)
{
  int64_t t = monotonic_ns () + ns;   /* a condvar's CLOCK_MONOTONIC, never skewed */
  return (struct timespec) { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
}

/* ---- per-thread ownership ---------------------------------------------- */

static void
ring_free (PpRing *r)
{
  free (r);
}

/* Thread exit: drop this thread's reference on each of its rings.  The drain
 * sees refs == 1, empties the ring and frees it. */
static void
thread_exit_cb (void *unused)
{
  (void) unused;
  PpRing *r = pp_tls_rings;
  pp_tls_rings = NULL;
  while (r != NULL)
    {
      PpRing *next = r->thread_next;
      if (atomic_fetch_sub_explicit (&r->refs, 1, memory_order_acq_rel) == 1)
        ring_free (r);   /* the probe is already gone */
      r = next;
    }
}

static void
thread_key_init (void)
{
  pp_thread_key_ok = pthread_key_create (&pp_thread_key, thread_exit_cb) == 0;
}

static bool
spsc_init (PpSpsc *q, uint32_t capacity, size_t elem)
{
  q->mask = capacity - 1;
  q->slots = malloc ((size_t) capacity * elem);
  if (q->slots == NULL)
    return false;
  /* Fault the pages in now, so the hot path never takes a page fault. */
  memset (q->slots, 0, (size_t) capacity * elem);
  atomic_init (&q->head, 0);
  atomic_init (&q->tail, 0);
  q->tail_cache = 0;
  return true;
}

/* Slow path: first record of this thread into p. */
static PpRing *
ring_for_thread (PpProbe *p)
{
  PpRing **link, *r;

  /* Already registered, just not the most recent probe: move to front. */
  for (link = &pp_tls_rings; (r = *link) != NULL; link = &r->thread_next)
    if (r->probe_id == p->id)
      {
        *link = r->thread_next;
        r->thread_next = pp_tls_rings;
        pp_tls_rings = r;
        return r;
      }

  /* Forget rings whose probe was freed (only our reference is left). */
  for (link = &pp_tls_rings; (r = *link) != NULL;)
    if (atomic_load_explicit (&r->refs, memory_order_acquire) == 1)
      {
        *link = r->thread_next;
        ring_free (r);
      }
    else
      link = &r->thread_next;

  size_t size = (sizeof (PpRing) + PP_CACHELINE - 1) / PP_CACHELINE * PP_CACHELINE;
  r = aligned_alloc (PP_CACHELINE, size);
  if (r == NULL)
    return NULL;
  memset (r, 0, size);
  if (!spsc_init (&r->spans, p->cfg.ring_capacity, sizeof (PpSpan)))
    goto fail;
  if (!spsc_init (&r->counters, p->cfg.counter_ring_capacity, sizeof (PpCounter)))
    goto fail;
  for (int i = 0; i <= PP_PROBE_DROP_RANKS; i++)
    atomic_init (&r->drop_count[i], 0);
  r->probe_id = p->id;
  /* Two owners.  Without a key we cannot learn of the thread's exit, so the
   * ring then lives until pp_probe_free (and its header leaks): rare, safe. */
  atomic_init (&r->refs, 2);

  pthread_once (&pp_thread_once, thread_key_init);
  if (pp_thread_key_ok)
    pthread_setspecific (pp_thread_key, (void *) 1);  /* non-NULL: run the destructor */

  pthread_mutex_lock (&p->lock);
  r->next = p->rings;
  p->rings = r;
  pthread_mutex_unlock (&p->lock);

  r->thread_next = pp_tls_rings;
  pp_tls_rings = r;
  return r;

fail:
  free (r->spans.slots);
  free (r->counters.slots);
  free (r);
  return NULL;
}

/* ---- hot path ---------------------------------------------------------- */

static inline PpRing *
ring_get (PpProbe *p)
{
  PpRing *r = pp_tls_rings;
  if (PP_LIKELY (r != NULL && r->probe_id == p->id))
    return r;
  return ring_for_thread (p);
}

/* Finds the slot to write, or returns false when the ring is full. */
static inline bool
spsc_reserve (PpSpsc *q, uint64_t *head)
{
  uint64_t h = atomic_load_explicit (&q->head, memory_order_relaxed);
  if (PP_UNLIKELY (h - q->tail_cache > q->mask))
    {
      q->tail_cache = atomic_load_explicit (&q->tail, memory_order_acquire);
      if (h - q->tail_cache > q->mask)
        return false;
    }
  *head = h;
  return true;
}

__attribute__ ((noinline)) static void
count_drop (PpRing *r, int32_t rank)
{
  uint32_t i, n = r->n_drop_ranks;
  for (i = 0; i < n; i++)
    if (r->drop_rank[i] == rank)
      break;
  if (i == n)
    {
      if (n < PP_PROBE_DROP_RANKS)
        {
          r->drop_rank[n] = rank;
          r->n_drop_ranks = n + 1;
        }
      else
        i = PP_PROBE_DROP_RANKS;
    }
  uint64_t c = atomic_load_explicit (&r->drop_count[i], memory_order_relaxed);
  atomic_store_explicit (&r->drop_count[i], c + 1, memory_order_release);
}

/* The hot path, shared by spans and counters: reserve a slot in this thread's
 * ring, copy the record in, publish it with a release store. */
static inline bool
record (PpProbe *p, bool is_span, const void *rec, size_t size, int32_t rank)
{
  if (PP_UNLIKELY (p == NULL || rec == NULL))
    return false;
  PpRing *r = ring_get (p);
  if (PP_UNLIKELY (r == NULL))
    {
      atomic_fetch_add_explicit (&p->unregistered_dropped, 1, memory_order_relaxed);
      return false;
    }
  PpSpsc *q = is_span ? &r->spans : &r->counters;
  uint64_t h;
  if (PP_UNLIKELY (!spsc_reserve (q, &h)))
    {
      count_drop (r, rank);
      return false;
    }
  memcpy ((char *) q->slots + (h & q->mask) * size, rec, size);
  atomic_store_explicit (&q->head, h + 1, memory_order_release);
  return true;
}

bool
pp_probe_record_span (PpProbe *p, const PpSpan *span)
{
  return record (p, true, span, sizeof *span, span ? span->rank : -1);
}

bool
pp_probe_record_counter (PpProbe *p, const PpCounter *counter)
{
  return record (p, false, counter, sizeof *counter, counter ? counter->rank : -1);
}

/* ---- drain ------------------------------------------------------------- */

static void
drop_add (PpProbe *p, int32_t rank, uint64_t delta)
{
  size_t i;
  for (i = 0; i < p->n_drops; i++)
    if (p->drops[i].rank == rank)
      break;
  if (i == p->n_drops)
    {
      if (p->n_drops == p->drops_cap)
        {
          size_t cap = p->drops_cap * 2;
          PpDropTotal *d = realloc (p->drops, cap * sizeof *d);
          if (d == NULL)
            i = 0;   /* out of memory: still counted, under rank -1 */
          else
            {
              p->drops = d;
              p->drops_cap = cap;
            }
        }
      if (i != 0)
        p->drops[p->n_drops++] = (PpDropTotal) { .rank = rank };
    }
  p->drops[i].total += delta;
  p->drops[i].changed = true;
}

static void
drain_drops (PpProbe *p, PpRing *r)
{
  for (int i = 0; i <= PP_PROBE_DROP_RANKS; i++)
    {
      uint64_t c = atomic_load_explicit (&r->drop_count[i], memory_order_acquire);
      if (c != r->drop_seen[i])
        {
          drop_add (p, i < PP_PROBE_DROP_RANKS ? r->drop_rank[i] : -1, c - r->drop_seen[i]);
          r->drop_seen[i] = c;
        }
    }
}

/* Hands everything published up to now to the sink.  One snapshot of head:
 * a producer that never stops cannot keep the drain on one ring forever. */
static void
drain_spsc (PpSpsc *q, size_t elem, const PpProbeSink *s, bool spans)
{
  uint64_t t = atomic_load_explicit (&q->tail, memory_order_relaxed);
  uint64_t h = atomic_load_explicit (&q->head, memory_order_acquire);
  while (t != h)
    {
      uint64_t idx = t & q->mask;
      uint64_t n = q->mask + 1 - idx;
      if (n > h - t)
        n = h - t;
      const void *first = (const char *) q->slots + idx * elem;
      if (spans && s->spans != NULL)
        s->spans (s->user, first, n);
      else if (!spans && s->counters != NULL)
        s->counters (s->user, first, n);
      t += n;
      /* After the sink is done with the slots: the producer may reuse them. */
      atomic_store_explicit (&q->tail, t, memory_order_release);
    }
}

static uint64_t
ring_dropped (PpRing *r)
{
  uint64_t sum = 0;
  for (int i = 0; i <= PP_PROBE_DROP_RANKS; i++)
    sum += atomic_load_explicit (&r->drop_count[i], memory_order_relaxed);
  return sum;
}

static void
drain_pass (PpProbe *p)
{
  PpProbeSink *s = &p->cfg.sink;
  PpRing *r, *next;

  pthread_mutex_lock (&p->lock);
  r = p->rings;
  pthread_mutex_unlock (&p->lock);

  for (; r != NULL; r = next)
    {
      next = r->next;
      /* Read before draining: if the thread is gone, everything it recorded
       * is published, and this pass empties the ring for good. */
      bool dead = atomic_load_explicit (&r->refs, memory_order_acquire) == 1;

      drain_spsc (&r->spans, sizeof (PpSpan), s, true);
      drain_spsc (&r->counters, sizeof (PpCounter), s, false);
      drain_drops (p, r);

      if (dead)
        {
          pthread_mutex_lock (&p->lock);
          PpRing **link = &p->rings;
          while (*link != r)
            link = &(*link)->next;
          *link = r->next;
          p->retired_dropped += ring_dropped (r);
          pthread_mutex_unlock (&p->lock);
          free (r->spans.slots);
          free (r->counters.slots);
          ring_free (r);
        }
    }

  uint64_t u = atomic_load_explicit (&p->unregistered_dropped, memory_order_relaxed);
  if (u != p->unregistered_seen)
    {
      drop_add (p, -1, u - p->unregistered_seen);
      p->unregistered_seen = u;
    }

  for (size_t i = 0; i < p->n_drops; i++)
    if (p->drops[i].changed)
      {
        p->drops[i].changed = false;
        if (s->dropped != NULL)
          s->dropped (s->user, p->drops[i].rank, p->drops[i].total);
      }
}

static void *
drain_main (void *data)
{
  PpProbe *p = data;

  pthread_setname_np (pthread_self (), "pp-drain");
  pthread_mutex_lock (&p->lock);
  for (;;)
    {
      if (!p->stop && p->flush_req == p->flush_done)
        {
          struct timespec dl = deadline_after (p->cfg.drain_period_ns);
          while (!p->stop && p->flush_req == p->flush_done)
            if (pthread_cond_timedwait (&p->wake, &p->lock, &dl) == ETIMEDOUT)
              break;
        }
      uint64_t target = p->flush_req;
      bool stop = p->stop;
      pthread_mutex_unlock (&p->lock);

      drain_pass (p);

      pthread_mutex_lock (&p->lock);
      p->flush_done = target;
      pthread_cond_broadcast (&p->done);
      if (stop)
        break;
    }
  pthread_mutex_unlock (&p->lock);
  return NULL;
}

/* ---- lifetime ---------------------------------------------------------- */

/* In a child forked from the job (a data-loader worker, say) the drain
 * thread does not exist and the lock may have been held at the fork: the
 * child may keep recording (its rings fill and count drops) but must not
 * wait for, join or lock anything. */
static bool
in_forked_child (PpProbe *p)
{
  return getpid () != p->pid;
}

static bool
is_pow2 (uint32_t x)
{
  return x >= 2 && (x & (x - 1)) == 0;
}

PpProbe *
pp_probe_new (const PpProbeConfig *cfg, PpError *err)
{
  PpProbeConfig c = { 0 };
  if (cfg != NULL)
    c = *cfg;
  if (c.ring_capacity == 0)
    c.ring_capacity = PP_PROBE_DEFAULT_RING_CAPACITY;
  if (c.counter_ring_capacity == 0)
    c.counter_ring_capacity = PP_PROBE_DEFAULT_COUNTER_RING_CAPACITY;
  if (c.drain_period_ns == 0)
    c.drain_period_ns = PP_PROBE_DEFAULT_DRAIN_PERIOD_NS;
  if (c.flush_timeout_ns == 0)
    c.flush_timeout_ns = PP_PROBE_DEFAULT_FLUSH_TIMEOUT_NS;

  if (!is_pow2 (c.ring_capacity) || c.ring_capacity > PP_PROBE_MAX_RING_CAPACITY)
    {
      pp_error_set (err, PP_EINVAL, "probe ring capacity %u: use a power of two from 2 to %u",
                    c.ring_capacity, PP_PROBE_MAX_RING_CAPACITY);
      return NULL;
    }
  if (!is_pow2 (c.counter_ring_capacity) || c.counter_ring_capacity > PP_PROBE_MAX_RING_CAPACITY)
    {
      pp_error_set (err, PP_EINVAL,
                    "probe counter ring capacity %u: use a power of two from 2 to %u",
                    c.counter_ring_capacity, PP_PROBE_MAX_RING_CAPACITY);
      return NULL;
    }
  if (c.drain_period_ns < 0 || c.drain_period_ns > 86400 * 1000000000LL)
    {
      pp_error_set (err, PP_EINVAL, "probe drain period %lld ns: use 1 ns to 1 day",
                    (long long) c.drain_period_ns);
      return NULL;
    }
  if (c.flush_timeout_ns < 0)
    {
      pp_error_set (err, PP_EINVAL, "probe flush timeout %lld ns: must not be negative",
                    (long long) c.flush_timeout_ns);
      return NULL;
    }

  PpProbe *p = calloc (1, sizeof *p);
  PpDropTotal *drops = calloc (8, sizeof *drops);
  if (p == NULL || drops == NULL)
    {
      free (p);
      free (drops);
      pp_error_set (err, PP_ENOMEM, "probe: out of memory");
      return NULL;
    }
  p->id = atomic_fetch_add (&pp_next_probe_id, 1);
  p->pid = getpid ();
  p->cfg = c;
  p->drops = drops;
  p->drops_cap = 8;
  p->drops[0].rank = -1;
  p->n_drops = 1;

  pthread_condattr_t ca;
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_mutex_init (&p->lock, NULL);
  pthread_cond_init (&p->wake, &ca);
  pthread_cond_init (&p->done, &ca);
  pthread_condattr_destroy (&ca);

  /* The drain thread takes no signals: they belong to the job's threads. */
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  int rc = pthread_create (&p->drain_thread, NULL, drain_main, p);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (rc != 0)
    {
      pp_error_set (err, PP_EIO, "probe: cannot start the drain thread: %s", strerror (rc));
      pthread_cond_destroy (&p->wake);
      pthread_cond_destroy (&p->done);
      pthread_mutex_destroy (&p->lock);
      free (p->drops);
      free (p);
      return NULL;
    }
  p->drain_started = true;
  return p;
}

void
pp_probe_free (PpProbe *p)
{
  if (p == NULL || in_forked_child (p))
    return;   /* a forked child leaks its copy rather than touch the parent's lock */
  if (p->drain_started)
    {
      /* From a sink callback we would join ourselves: leak rather than hang. */
      if (pthread_equal (pthread_self (), p->drain_thread))
        return;
      pthread_mutex_lock (&p->lock);
      p->stop = true;
      pthread_cond_signal (&p->wake);
      pthread_mutex_unlock (&p->lock);
      pthread_join (p->drain_thread, NULL);
    }

  PpRing *r = p->rings, *next;
  for (; r != NULL; r = next)
    {
      next = r->next;
      free (r->spans.slots);
      free (r->counters.slots);
      if (atomic_fetch_sub_explicit (&r->refs, 1, memory_order_acq_rel) == 1)
        ring_free (r);  /* the thread is gone too */
    }
  pthread_cond_destroy (&p->wake);
  pthread_cond_destroy (&p->done);
  pthread_mutex_destroy (&p->lock);
  free (p->drops);
  free (p);
}

PpStatus
pp_probe_flush (PpProbe *p, PpError *err)
{
  if (p == NULL)
    return PP_OK;
  if (pthread_equal (pthread_self (), p->drain_thread))
    return pp_error_set (err, PP_EINVAL, "pp_probe_flush called from a probe sink: not allowed");
  if (in_forked_child (p))
    return pp_error_set (err, PP_EUNSUPPORTED,
                         "pp_probe_flush in a forked child: the probe drains in its parent only");

  struct timespec dl = deadline_after (p->cfg.flush_timeout_ns);
  PpStatus status = PP_OK;
  pthread_mutex_lock (&p->lock);
  uint64_t ticket = ++p->flush_req;
  pthread_cond_signal (&p->wake);
  while (p->flush_done < ticket)
    if (pthread_cond_timedwait (&p->done, &p->lock, &dl) == ETIMEDOUT && p->flush_done < ticket)
      {
        status = pp_error_set (err, PP_EIO,
                               "probe flush timed out after %lld ms: the sink is stuck or too slow",
                               (long long) (p->cfg.flush_timeout_ns / 1000000));
        break;
      }
  pthread_mutex_unlock (&p->lock);
  return status;
}

uint64_t
pp_probe_dropped (PpProbe *p)
{
  if (p == NULL)
    return 0;
  if (in_forked_child (p))
    return 0;
  pthread_mutex_lock (&p->lock);
  uint64_t sum = p->retired_dropped;
  for (PpRing *r = p->rings; r != NULL; r = r->next)
    sum += ring_dropped (r);
  pthread_mutex_unlock (&p->lock);
  return sum + atomic_load_explicit (&p->unregistered_dropped, memory_order_relaxed);
}

void
pp_probe_get_config (PpProbe *p, PpProbeConfig *out)
{
  if (p != NULL && out != NULL)
    *out = p->cfg;
}
