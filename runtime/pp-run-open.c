/* pp-run-open.c — what each rank of the bundled runtime is doing now
 * (issue 37; trace format 1.10's OPEN frames; docs/stuck.md).
 *
 * A rank's thread stores its open action (a block, a wait for a peer, the
 * optimizer) in its PpRunRank: a few relaxed stores between two bumps of
 * a sequence count, nothing that blocks.  A thread of the run's own (the
 * heartbeat) looks four times a second and hands each rank of this process
 * to PpRunConfig.open_sink when its action changed, and at least once a
 * second, as the Python hook's heartbeat thread does (heartbeat.py).  Once
 * the run is stopped (a signal: a stuck job being ended) it writes nothing
 * more, so what the trace keeps is what each rank was in; a run that ends
 * otherwise says last that each rank closed.
 *
 * PpRunConfig.hang (a stuck rank on purpose): the rank sleeps inside its
 * forward until the run is stopped. */
#include "pp-run-private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOOK_NS 250000000LL
#define BEAT_NS 1000000000LL

struct _PpRunHeart {
  PpRun          *run;
  pthread_t       thread;
  pthread_mutex_t mu;
  pthread_cond_t  cond;
  bool            stop, dead;
  PpRunOpen      *prev;    /* [P]: what was last written of each rank */
  bool           *have;    /* [P] */
  int64_t        *wrote;   /* [P]: when */
};

/* pp_run_stop_requested's question, asked here: pp-run-common.c calls
 * this file (its waits), so this file does not call it back. */
static bool
stopped (const PpRun *run)
{
  return run->cfg.stop != NULL && __atomic_load_n (run->cfg.stop, __ATOMIC_RELAXED) != 0;
}

void
pp_run_open_set (PpRunRank *rk, int kind, int stage, int mb, int step, int peer, int64_t t0)
{
  atomic_fetch_add_explicit (&rk->open_seq, 1, memory_order_relaxed);
  atomic_thread_fence (memory_order_release);
  atomic_store_explicit (&rk->open_kind, kind, memory_order_relaxed);
  atomic_store_explicit (&rk->open_stage, stage, memory_order_relaxed);
  atomic_store_explicit (&rk->open_mb, mb, memory_order_relaxed);
  atomic_store_explicit (&rk->open_step, step, memory_order_relaxed);
  atomic_store_explicit (&rk->open_peer, peer, memory_order_relaxed);
  atomic_store_explicit (&rk->open_t0, t0, memory_order_relaxed);
  atomic_fetch_add_explicit (&rk->open_seq, 1, memory_order_release);
}

void
pp_run_open_clear (PpRunRank *rk, int64_t t)
{
  pp_run_open_set (rk, -1, -1, -1, -1, -1, t);
}

void
pp_run_open_get (PpRunRank *rk, PpRunOpen *o)
{
  for (;;)
    {
      unsigned s0 = atomic_load_explicit (&rk->open_seq, memory_order_acquire);
      o->kind = atomic_load_explicit (&rk->open_kind, memory_order_relaxed);
      o->stage = atomic_load_explicit (&rk->open_stage, memory_order_relaxed);
      o->mb = atomic_load_explicit (&rk->open_mb, memory_order_relaxed);
      o->step = atomic_load_explicit (&rk->open_step, memory_order_relaxed);
      o->peer = atomic_load_explicit (&rk->open_peer, memory_order_relaxed);
      o->t0 = atomic_load_explicit (&rk->open_t0, memory_order_relaxed);
      atomic_thread_fence (memory_order_acquire);
      if ((s0 & 1u) == 0 && atomic_load_explicit (&rk->open_seq, memory_order_relaxed) == s0)
        return;
      sched_yield ();
    }
}

/* Hands rank r's open action o to the sink; false once the sink refused. */
static bool
heart_write (struct _PpRunHeart *h, int r, const PpRunOpen *o, bool closed)
{
  PpRun *run = h->run;
  PpTraceOpen t;
  memset (&t, 0, sizeof t);
  t.time_ns = pp_probe_now_ns ();
  t.rank = r;
  t.kind = o->kind;
  t.step = o->kind < 0 ? -1 : o->step;
  t.stage = o->kind < 0 ? -1 : o->stage;
  t.microbatch = o->kind < 0 ? -1 : o->mb;
  t.peer_rank = o->kind < 0 ? -1 : o->peer;
  t.start_ns = o->t0;
  t.flags = closed ? PP_TRACE_OPEN_CLOSED : 0;
  if (!closed && atomic_load (&run->ranks[r].hanging))
    snprintf (t.where, sizeof t.where, "run --hang");
  if (run->cfg.open_sink (run->cfg.open_user, &t) != 0)
    h->dead = true;
  h->prev[r] = *o;
  h->have[r] = true;
  h->wrote[r] = t.time_ns;
  return !h->dead;
}

static void
heart_look (struct _PpRunHeart *h)
{
  PpRun *run = h->run;
  for (int r = 0; r < run->P && !h->dead; r++)
    {
      if (!run->ranks[r].started)
        continue;
      if (stopped (run))
        return;   /* asked again per rank: nothing of the ending run goes out */
      PpRunOpen o;
      pp_run_open_get (&run->ranks[r], &o);
      bool changed = !h->have[r] || memcmp (&o, &h->prev[r], sizeof o) != 0;
      if (changed || pp_probe_now_ns () - h->wrote[r] >= BEAT_NS)
        heart_write (h, r, &o, false);
    }
}

static void *
heart_main (void *data)
{
  struct _PpRunHeart *h = data;
  pthread_mutex_lock (&h->mu);
  while (!h->stop && !h->dead)
    {
      struct timespec ts;
      clock_gettime (CLOCK_MONOTONIC, &ts);
      int64_t at = (int64_t) ts.tv_nsec + LOOK_NS;
      ts.tv_sec += (time_t) (at / 1000000000LL);
      ts.tv_nsec = (long) (at % 1000000000LL);
      while (!h->stop && pthread_cond_timedwait (&h->cond, &h->mu, &ts) != ETIMEDOUT)
        ;
      /* a stopped run (a stuck job being ended) keeps what it was in */
      if (h->stop || stopped (h->run))
        continue;
      pthread_mutex_unlock (&h->mu);
      heart_look (h);
      pthread_mutex_lock (&h->mu);
    }
  pthread_mutex_unlock (&h->mu);
  return NULL;
}

static void
heart_free (struct _PpRunHeart *h)
{
  pthread_mutex_destroy (&h->mu);
  pthread_cond_destroy (&h->cond);
  free (h->prev);
  free (h->have);
  free (h->wrote);
  free (h);
}

PpStatus
pp_run_open_start (PpRun *run, PpError *err)
{
  int64_t now = pp_probe_now_ns ();
  for (int r = 0; r < run->P; r++)
    pp_run_open_clear (&run->ranks[r], now);
  if (run->cfg.open_sink == NULL)
    return PP_OK;
  struct _PpRunHeart *h = calloc (1, sizeof *h);
  if (h == NULL || (h->prev = calloc ((size_t) run->P, sizeof *h->prev)) == NULL
      || (h->have = calloc ((size_t) run->P, sizeof *h->have)) == NULL
      || (h->wrote = calloc ((size_t) run->P, sizeof *h->wrote)) == NULL)
    {
      if (h != NULL)
        {
          free (h->prev);
          free (h->have);
          free (h);
        }
      return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  h->run = run;
  pthread_mutex_init (&h->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&h->cond, &ca);
  pthread_condattr_destroy (&ca);
  int e = pthread_create (&h->thread, NULL, heart_main, h);
  if (e != 0)
    {
      heart_free (h);
      return pp_error_set (err, PP_EIO, "cannot start the heartbeat thread: %s", strerror (e));
    }
  run->heart = h;
  return PP_OK;
}

void
pp_run_open_stop (PpRun *run)
{
  struct _PpRunHeart *h = run->heart;
  if (h == NULL)
    return;
  pthread_mutex_lock (&h->mu);
  h->stop = true;
  pthread_cond_broadcast (&h->cond);
  pthread_mutex_unlock (&h->mu);
  pthread_join (h->thread, NULL);
  if (!stopped (run))
    for (int r = 0; r < run->P && !h->dead; r++)
      if (run->ranks[r].started)
        {
          PpRunOpen o;
          pp_run_open_get (&run->ranks[r], &o);
          o.kind = -1;
          heart_write (h, r, &o, true);
        }
  heart_free (h);
  run->heart = NULL;
}

bool
pp_run_open_hang (PpRun *run, PpRunRank *rk, const PpAction *a)
{
  if (!run->cfg.hang || rk->rank != run->cfg.hang_rank || run->step != run->cfg.hang_step
      || (a->kind != PP_ACT_F && a->kind != PP_ACT_OVERLAP_F_B) || atomic_load (&rk->hanging))
    return false;
  atomic_store (&rk->hanging, true);
  while (!stopped (run) && !atomic_load (&run->abort))
    {
      struct timespec ts = { 0, 50000000L };
      nanosleep (&ts, NULL);
    }
  return true;
}
