/* pp-batch-pool.h — worker threads that make the synthetic task's batches.
 *
 * pp_model_batch costs O(rows * (in_dim + 128^2)) on one core: at width 1024
 * and 2048 rows about 60 ms, three times what a step of the same model takes
 * on four 32-SM partitions of an H200.  The GPU backend has the next step's
 * batch made by this pool while the GPUs run the current one, spread over
 * the cores its rank threads leave free.
 *
 * The rows are exactly pp_model_batch's (each row depends only on the seed,
 * the step and its index), whatever the number of threads.  Workers claim
 * blocks of rows from a shared counter, so a slow core does not hold the
 * batch up.  One batch at a time: start, then wait, then start again.  No
 * GLib.
 */
#pragma once

#include <stdint.h>

#include "pp-model.h"
#include "pp-status.h"

typedef struct _PpBatchPool PpBatchPool;

/* n_threads >= 1 workers for model m (borrowed: it must outlive the pool). */
PpBatchPool *pp_batch_pool_new (const PpModel *m, int n_threads, PpError *err);

/* Starts making rows [0, batch) of `step` into x[batch * in_dim] and
 * labels[batch]; returns at once.  The previous batch must have been waited
 * for.  x and labels must stay valid until pp_batch_pool_wait returns. */
void         pp_batch_pool_start (PpBatchPool *p, uint64_t data_seed, int step, int batch,
                                  float *x, int32_t *labels);

/* Waits until the batch last started is complete (at once if none is). */
void         pp_batch_pool_wait (PpBatchPool *p);

int          pp_batch_pool_threads (const PpBatchPool *p);

/* Waits for a batch in progress, stops the workers, frees.  NULL is fine. */
void         pp_batch_pool_free (PpBatchPool *p);
