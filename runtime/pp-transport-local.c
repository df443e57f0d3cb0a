/* pp-transport-local.c — every rank a thread of this process: a consumer
 * reads the producer's buffer in place once it is published.  Readiness is
 * a flag per (stage, direction, micro-batch) under the producer stage's
 * mutex, with a condvar the consumers wait on; waits are timed so that an
 * abandoned step (a stop flag set from a signal handler cannot signal a
 * condvar) is noticed. */
#include "pp-transport.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_NS 10000000LL

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t  cv;
  int             mb_lo, n_mb;
  uint8_t        *ready[2];      /* [n_mb], by direction */
  const float   **data[2];       /* [n_mb] */
} Edge;

typedef struct {
  PpTransport          base;
  const PpSchedule    *s;
  Edge                *edges;    /* [n_stages], by producer stage */
  int                  n_edges;  /* initialised so far */
  PpTransportAbandoned abandoned;
  void                *user;
} Local;

static PpStatus
local_setup (PpTransport *t, const PpSchedule *s, const size_t *in_floats,
             const size_t *out_floats, PpTransportAbandoned abandoned, void *user, PpError *err)
{
  Local *l = (Local *) t;

  l->s = s;
  l->abandoned = abandoned;
  l->user = user;
  l->edges = calloc ((size_t) s->n_stages, sizeof (Edge));
  if (l->edges == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int i = 0; i < s->n_stages; i++)
    {
      Edge *e = &l->edges[i];
      pthread_condattr_t ca;
      pthread_mutex_init (&e->mu, NULL);
      pthread_condattr_init (&ca);
      pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
      pthread_cond_init (&e->cv, &ca);
      pthread_condattr_destroy (&ca);
      l->n_edges = i + 1;
      e->mb_lo = s->stage_mb_lo[i];
      e->n_mb = s->stage_mb_hi[i] - s->stage_mb_lo[i];
      for (int g = 0; g < 2; g++)
        {
          e->ready[g] = calloc ((size_t) e->n_mb + 1, 1);
          e->data[g] = calloc ((size_t) e->n_mb + 1, sizeof (float *));
          if (e->ready[g] == NULL || e->data[g] == NULL)
            return pp_error_set (err, PP_ENOMEM, "out of memory");
        }
    }
  return PP_OK;
}

static PpStatus
local_step_begin (PpTransport *t, PpError *err)
{
  Local *l = (Local *) t;
  for (int i = 0; i < l->n_edges; i++)
    {
      Edge *e = &l->edges[i];
      pthread_mutex_lock (&e->mu);
      for (int g = 0; g < 2; g++)
        {
          memset (e->ready[g], 0, (size_t) e->n_mb);
          memset (e->data[g], 0, (size_t) e->n_mb * sizeof (float *));
        }
      pthread_mutex_unlock (&e->mu);
    }
  return PP_OK;
}

static void
local_publish (PpTransport *t, int stage, int grad, int mb, const float *data, size_t n)
{
  Edge *e = &((Local *) t)->edges[stage];
  pthread_mutex_lock (&e->mu);
  e->data[grad][mb - e->mb_lo] = data;
  e->ready[grad][mb - e->mb_lo] = 1;
  pthread_cond_broadcast (&e->cv);
  pthread_mutex_unlock (&e->mu);
}

static PpStatus
local_acquire (PpTransport *t, int stage, int grad, int mb, const float **data, PpError *err)
{
  Local *l = (Local *) t;
  const PpSchedule *s = l->s;
  Edge *e = &l->edges[stage];
  int k = mb - e->mb_lo;
  int consumer = grad ? s->stage_prev[stage] : s->stage_next[stage];
  bool ready;

  if (k < 0 || k >= e->n_mb || consumer < 0)
    return pp_error_set (err, PP_EINVAL, "stage %d does not send micro-batch %d %s", stage, mb,
                         grad ? "backward" : "forward");
  pthread_mutex_lock (&e->mu);
  if (!e->ready[grad][k] && s->stage_rank[stage] == s->stage_rank[consumer])
    {
      pthread_mutex_unlock (&e->mu);
      return pp_error_set (err, PP_EINVAL,
                           "rank %d: stage %d, micro-batch %d needs the %s of stage %d, "
                           "which the same rank has not run yet",
                           s->stage_rank[consumer], consumer, mb,
                           grad ? "input gradient" : "forward", stage);
    }
  while (!e->ready[grad][k] && !l->abandoned (l->user))
    {
      struct timespec ts;
      clock_gettime (CLOCK_MONOTONIC, &ts);
      int64_t ns = (int64_t) ts.tv_nsec + POLL_NS;
      ts.tv_sec += (time_t) (ns / 1000000000);
      ts.tv_nsec = (long) (ns % 1000000000);
      pthread_cond_timedwait (&e->cv, &e->mu, &ts);
    }
  ready = e->ready[grad][k] != 0;
  *data = e->data[grad][k];
  pthread_mutex_unlock (&e->mu);
  return ready ? PP_OK : PP_EIO;
}

static void
local_interrupt (PpTransport *t)
{
  Local *l = (Local *) t;
  for (int i = 0; i < l->n_edges; i++)
    {
      pthread_mutex_lock (&l->edges[i].mu);
      pthread_cond_broadcast (&l->edges[i].cv);
      pthread_mutex_unlock (&l->edges[i].mu);
    }
}

static PpStatus
local_step_end (PpTransport *t, PpError *err)
{
  return PP_OK;
}

static PpStatus
local_sum (PpTransport *t, double *values, size_t n, PpError *err)
{
  return PP_OK;   /* one process: the sum is the values */
}

static PpStatus
local_send_bytes (PpTransport *t, int rank, const void *buf, size_t n, PpError *err)
{
  return pp_error_set (err, PP_EINVAL, "every rank is in this process: nothing to send");
}

static PpStatus
local_recv_bytes (PpTransport *t, int rank, void *buf, size_t n, PpError *err)
{
  return local_send_bytes (t, rank, buf, n, err);
}

static PpStatus
local_clock_offset (PpTransport *t, int64_t (*now) (void), int64_t *offset_ns, int64_t *rtt_ns,
                    PpError *err)
{
  *offset_ns = 0;   /* one process, one clock */
  *rtt_ns = 0;
  return PP_OK;
}

static PpStatus
local_gather_bytes (PpTransport *t, const void *buf, size_t n, void **all, size_t *sizes,
                    PpError *err)
{
  return pp_error_set (err, PP_EINVAL, "every rank is in this process: nothing to gather");
}

static void
local_free (PpTransport *t)
{
  Local *l = (Local *) t;
  for (int i = 0; i < l->n_edges; i++)
    {
      Edge *e = &l->edges[i];
      pthread_mutex_destroy (&e->mu);
      pthread_cond_destroy (&e->cv);
      for (int g = 0; g < 2; g++)
        {
          free (e->ready[g]);
          free (e->data[g]);
        }
    }
  free (l->edges);
  free (l);
}

static const PpTransportOps local_ops = {
  .name = "local",
  .setup = local_setup,
  .step_begin = local_step_begin,
  .publish = local_publish,
  .acquire = local_acquire,
  .interrupt = local_interrupt,
  .step_end = local_step_end,
  .sum = local_sum,
  .send_bytes = local_send_bytes,
  .recv_bytes = local_recv_bytes,
  .clock_offset = local_clock_offset,
  .gather_bytes = local_gather_bytes,
  .free = local_free,
};

PpTransport *
pp_transport_new_local (PpError *err)
{
  Local *l = calloc (1, sizeof *l);
  if (l == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  l->base.ops = &local_ops;
  l->base.process_rank = -1;
  l->base.n_processes = 1;
  l->base.device = -1;
  return &l->base;
}
