/* pp-batch-pool.c — see pp-batch-pool.h. */
#include "pp-batch-pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define ROWS_PER_CLAIM 32

struct _PpBatchPool {
  const PpModel  *model;
  int             n_threads;
  pthread_t      *threads;
  int             started;       /* threads created */

  pthread_mutex_t mu;
  pthread_cond_t  work, done;
  unsigned long   gen;           /* bumped by start */
  int             quit;
  int             busy;          /* workers still on the current batch */

  /* the current batch (set under mu before gen is bumped) */
  uint64_t        seed;
  int             step, batch;
  float          *x;
  int32_t        *labels;
  atomic_int      next_row;
};

static void *
worker_main (void *data)
{
  PpBatchPool *p = data;
  unsigned long seen = 0;

  for (;;)
    {
      pthread_mutex_lock (&p->mu);
      while (p->gen == seen && !p->quit)
        pthread_cond_wait (&p->work, &p->mu);
      if (p->quit)
        {
          pthread_mutex_unlock (&p->mu);
          return NULL;
        }
      seen = p->gen;
      uint64_t seed = p->seed;
      int step = p->step, batch = p->batch;
      float *x = p->x;
      int32_t *labels = p->labels;
      pthread_mutex_unlock (&p->mu);

      for (;;)
        {
          int r0 = atomic_fetch_add (&p->next_row, ROWS_PER_CLAIM);
          if (r0 >= batch)
            break;
          int r1 = r0 + ROWS_PER_CLAIM < batch ? r0 + ROWS_PER_CLAIM : batch;
          pp_model_batch_rows (p->model, seed, step, r0, r1, x, labels);
        }

      pthread_mutex_lock (&p->mu);
      if (--p->busy == 0)
        pthread_cond_broadcast (&p->done);
      pthread_mutex_unlock (&p->mu);
    }
}

PpBatchPool *
pp_batch_pool_new (const PpModel *m, int n_threads, PpError *err)
{
  PpBatchPool *p;

  if (m == NULL || n_threads < 1)
    {
      pp_error_set (err, PP_EINVAL, "a batch pool needs a model and at least one thread");
      return NULL;
    }
  p = calloc (1, sizeof *p);
  if (p == NULL || (p->threads = calloc ((size_t) n_threads, sizeof (pthread_t))) == NULL)
    {
      free (p);
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  p->model = m;
  p->n_threads = n_threads;
  pthread_mutex_init (&p->mu, NULL);
  pthread_cond_init (&p->work, NULL);
  pthread_cond_init (&p->done, NULL);
  atomic_init (&p->next_row, 0);
  for (int i = 0; i < n_threads; i++)
    {
      if (pthread_create (&p->threads[i], NULL, worker_main, p) != 0)
        {
          if (p->started == 0)
            {
              pp_batch_pool_free (p);
              pp_error_set (err, PP_EIO, "cannot start the batch workers");
              return NULL;
            }
          break;   /* fewer workers than asked: still correct */
        }
      p->started++;
    }
  return p;
}

void
pp_batch_pool_start (PpBatchPool *p, uint64_t data_seed, int step, int batch, float *x,
                     int32_t *labels)
{
  pthread_mutex_lock (&p->mu);
  while (p->busy > 0)   /* a caller that did not wait: finish that one first */
    pthread_cond_wait (&p->done, &p->mu);
  p->seed = data_seed;
  p->step = step;
  p->batch = batch;
  p->x = x;
  p->labels = labels;
  atomic_store (&p->next_row, 0);
  p->busy = p->started;
  p->gen++;
  pthread_cond_broadcast (&p->work);
  pthread_mutex_unlock (&p->mu);
}

void
pp_batch_pool_wait (PpBatchPool *p)
{
  pthread_mutex_lock (&p->mu);
  while (p->busy > 0)
    pthread_cond_wait (&p->done, &p->mu);
  pthread_mutex_unlock (&p->mu);
}

int
pp_batch_pool_threads (const PpBatchPool *p)
{
  return p ? p->started : 0;
}

void
pp_batch_pool_free (PpBatchPool *p)
{
  if (p == NULL)
    return;
  pp_batch_pool_wait (p);
  pthread_mutex_lock (&p->mu);
  p->quit = 1;
  pthread_cond_broadcast (&p->work);
  pthread_mutex_unlock (&p->mu);
  for (int i = 0; i < p->started; i++)
    pthread_join (p->threads[i], NULL);
  pthread_mutex_destroy (&p->mu);
  pthread_cond_destroy (&p->work);
  pthread_cond_destroy (&p->done);
  free (p->threads);
  free (p);
}
