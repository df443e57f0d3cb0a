/* pp-backend-cpu.c — the CPU compute backend of the schedule walker
 * (pp-run-private.h): a stage's part is a PpChunk (pp-model.h), computed
 * on its rank's thread as the walker reaches it and timed on the host.
 *
 * Buffers.  Stage s owns two arrays of per-micro-batch buffers, allocated
 * once and reused every step:
 *   out[k]  the forward output of micro-batch mb_lo + k (what stage_next reads),
 *   din[k]  its input gradient (what stage_prev's backward reads).
 * A buffer is written by exactly one work per step and handed to the
 * transport, which gives the consumer that buffer itself (local: no copy)
 * or its received copy (MPI); a chunk keeps its input pointer until that
 * micro-batch's backward, which is fine because nothing overwrites a buffer
 * before the next step.
 */
#include "pp-run-private.h"

#include <stdlib.h>
#include <string.h>

#include "pp-transport.h"

typedef struct {
  PpChunk *chunk;
  float   *out;           /* [n_mb][rows * out_dim], NULL on a tail */
  float   *din;           /* [n_mb][rows * in_dim], NULL on a head */
} CpuStage;

typedef struct {
  int64_t t0, mark;       /* the action's start, the last work's end */
} CpuRank;

static CpuStage *
cpu_stage (PpRun *run, int stage)
{
  return run->stages[stage].bk;
}

static PpStatus
cpu_open (PpRun *run, PpError *err)
{
  return PP_OK;
}

static PpStatus
cpu_setup_stage (PpRun *run, int i, int first_block, PpError *err)
{
  PpRunStage *st = &run->stages[i];
  CpuStage *c = calloc (1, sizeof *c);
  size_t rows = (size_t) run->rows, n = (size_t) st->n_mb;

  if (c == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  st->bk = c;
  c->chunk = pp_chunk_new (run->model, st->part, run->n_parts, first_block,
                           run->blocks[st->part], run->rows, st->n_mb, run->cfg.recompute, err);
  if (c->chunk == NULL)
    return err != NULL && err->status != PP_OK ? err->status : PP_ENOMEM;
  if (run->cfg.exact_grads && pp_chunk_set_exact_grads (c->chunk, 1) != PP_OK)
    return pp_error_set (err, PP_ENOMEM, "out of memory for the gradients of stage %d", i);
  st->in_dim = pp_chunk_in_dim (c->chunk);
  st->out_dim = pp_chunk_out_dim (c->chunk);
  if (st->next >= 0 && (c->out = calloc (n * rows * (size_t) st->out_dim, sizeof (float))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  if (st->prev >= 0 && (c->din = calloc (n * rows * (size_t) st->in_dim, sizeof (float))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  return PP_OK;
}

static size_t
cpu_stage_params (PpRun *run, int stage)
{
  return pp_chunk_n_params (cpu_stage (run, stage)->chunk);
}

static PpStatus
cpu_setup_rank (PpRun *run, PpRunRank *rk, size_t maxdim, PpError *err)
{
  if ((rk->bk = calloc (1, sizeof (CpuRank))) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  return PP_OK;
}

static void
cpu_batch_rows (PpRun *run, PpRunWork *w)
{
  const PpRunStage *st = &run->stages[w->stage];
  if (st->prev < 0)
    w->input = run->x + (size_t) w->mb * (size_t) run->rows * (size_t) st->in_dim;
  if (st->next < 0)
    w->labels = run->labels + (size_t) w->mb * (size_t) run->rows;
}

/* The producer's buffer (local) or its received copy (MPI), read in place. */
static PpStatus
cpu_receive (PpRun *run, PpRunRank *rk, PpRunWork *w, int ps, int grad, PpError *err)
{
  return pp_run_wait_ready (run, rk, ps, grad, w->stage, w->mb, &w->input, true, err);
}

static PpStatus
cpu_action_begin (PpRun *run, PpRunRank *rk, const PpAction *a, const PpRunWork *w, int n,
                  PpError *err)
{
  CpuRank *cr = rk->bk;
  cr->t0 = cr->mark = pp_probe_now_ns ();
  return PP_OK;
}

static PpStatus
cpu_compute (PpRun *run, PpRunRank *rk, const PpRunWork *w, PpError *err)
{
  PpRunStage *st = &run->stages[w->stage];
  CpuStage *c = st->bk;
  size_t rows = (size_t) run->rows;
  float loss_scale = 1.0f / (float) run->cfg.batch;

  switch (w->kind)
    {
    case PP_ACT_F:
      return pp_chunk_forward (c->chunk, w->mb, w->input, w->labels,
                               c->out ? c->out + (size_t) w->k * rows * (size_t) st->out_dim : NULL,
                               st->next < 0 ? &run->loss_mb[w->mb] : NULL, err);
    case PP_ACT_B:
    case PP_ACT_I:
      {
        float *din = c->din ? c->din + (size_t) w->k * rows * (size_t) st->in_dim : NULL;
        if (w->kind == PP_ACT_B)
          return pp_chunk_backward (c->chunk, w->mb, w->input, din, loss_scale, err);
        return pp_chunk_backward_input (c->chunk, w->mb, w->input, din, loss_scale, err);
      }
    case PP_ACT_W:
      return pp_chunk_backward_weight (c->chunk, w->mb, err);
    default:
      return pp_error_set (err, PP_EINVAL, "cannot run action kind %d", w->kind);
    }
}

/* The work's time goes to its stage's cost sums; its output to the
 * transport. */
static PpStatus
cpu_work_end (PpRun *run, PpRunRank *rk, const PpRunWork *w, int i, PpError *err)
{
  CpuRank *cr = rk->bk;
  PpRunStage *st = &run->stages[w->stage];
  CpuStage *c = st->bk;
  PpTransport *t = run->transport;
  size_t n_out = (size_t) run->rows * (size_t) st->out_dim;
  size_t n_in = (size_t) run->rows * (size_t) st->in_dim;
  int64_t now = pp_probe_now_ns ();
  double ns = (double) (now - cr->mark);

  cr->mark = now;
  switch (w->kind)
    {
    case PP_ACT_F:
      st->sum_f += ns; st->n_f++;
      if (st->next >= 0)
        t->ops->publish (t, w->stage, 0, w->mb, c->out + (size_t) w->k * n_out, n_out);
      break;
    case PP_ACT_B:
      st->sum_b += ns; st->n_b++;
      if (st->prev >= 0)
        t->ops->publish (t, w->stage, 1, w->mb, c->din + (size_t) w->k * n_in, n_in);
      break;
    case PP_ACT_I:
      st->sum_i += ns; st->n_i++;
      if (st->prev >= 0)
        t->ops->publish (t, w->stage, 1, w->mb, c->din + (size_t) w->k * n_in, n_in);
      break;
    case PP_ACT_W:
      st->sum_w += ns; st->n_w++;
      break;
    }
  return PP_OK;
}

static void
cpu_action_end (PpRun *run, PpRunRank *rk, const PpAction *a, PpStatus rc, int64_t *t_end)
{
  CpuRank *cr = rk->bk;

  if (rc != PP_OK)
    return;
  pp_run_record_action_span (run, rk->rank, a, cr->t0, cr->mark);
  rk->busy_ns += cr->mark - cr->t0;
  if (rk->first_ns < 0)
    rk->first_ns = cr->t0;
  rk->last_ns = cr->mark;
  *t_end = cr->mark;
}

static void
cpu_memory (PpRun *run, int stage, size_t *bytes, int *inflight)
{
  const CpuStage *c = cpu_stage (run, stage);
  *bytes = pp_chunk_activation_bytes (c->chunk);
  *inflight = pp_chunk_inflight (c->chunk);
}

/* DualPipe: every copy of a part gets the sum of the copies' gradients,
 * copy 0 + copy 1 + ... in that order whichever process holds them, so a
 * run over MPI updates exactly as one over threads (summed in double with
 * --exact-grads, like the micro-batches).  Both ends of a pair walk the
 * parts in the same order: no two processes ever wait on each other. */
static PpStatus
cpu_sum_copies (PpRun *run, PpError *err)
{
  PpTransport *t = run->transport;
  PpStatus rc = PP_OK;
  void *tmp = NULL;

  for (int p = 0; p < run->n_parts && run->n_chains > 1 && rc == PP_OK; p++)
    {
      PpRunStage *s0 = &run->stages[run->chain_stage[p]];
      CpuStage *c0 = s0->bk;
      bool here0 = pp_transport_runs_rank (t, s0->rank);
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          PpRunStage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          CpuStage *cc = sc->bk;
          bool herec = pp_transport_runs_rank (t, sc->rank);
          size_t bytes = 0;
          if (here0 && herec)
            rc = pp_chunk_add_grads (c0->chunk, cc->chunk);
          else if (here0)
            {
              pp_chunk_grad_storage (c0->chunk, &bytes);
              if (tmp == NULL && (tmp = malloc (bytes ? bytes : 1)) == NULL)
                return pp_error_set (err, PP_ENOMEM, "out of memory");
              if ((rc = t->ops->recv_bytes (t, sc->rank, tmp, bytes, err)) == PP_OK)
                rc = pp_chunk_add_grad_storage (c0->chunk, tmp, bytes);
            }
          else if (herec)
            {
              const void *g = pp_chunk_grad_storage (cc->chunk, &bytes);
              rc = t->ops->send_bytes (t, s0->rank, g, bytes, err);
            }
        }
      for (int c = 1; c < run->n_chains && rc == PP_OK; c++)
        {
          PpRunStage *sc = &run->stages[run->chain_stage[c * run->n_parts + p]];
          CpuStage *cc = sc->bk;
          bool herec = pp_transport_runs_rank (t, sc->rank);
          size_t bytes = 0;
          if (here0 && herec)
            rc = pp_chunk_copy_grads (cc->chunk, c0->chunk);
          else if (here0)
            {
              const void *g = pp_chunk_grad_storage (c0->chunk, &bytes);
              rc = t->ops->send_bytes (t, sc->rank, g, bytes, err);
            }
          else if (herec)
            {
              void *g = pp_chunk_grad_storage (cc->chunk, &bytes);
              rc = t->ops->recv_bytes (t, s0->rank, g, bytes, err);
            }
        }
      free (tmp);
      tmp = NULL;
    }
  if (rc != PP_OK && err != NULL && err->msg[0] == '\0')
    pp_error_set (err, rc, "summing the gradients of DualPipe's two copies failed");
  return rc;
}

/* The optimizer step of the rank's own parts, on the rank's thread, so the
 * ranks update in parallel. */
static void
cpu_optimizer (PpRun *run, PpRunRank *rk)
{
  int64_t t0 = pp_probe_now_ns (), z0;
  for (int i = 0; i < rk->n_stages; i++)
    pp_chunk_adamw (cpu_stage (run, rk->stages[i])->chunk, run->cfg.lr, 0.9f, 0.999f, 1e-8f,
                    run->cfg.weight_decay, run->step + 1);
  /* zeroing the gradients, inside the optimizer's block (trace format 1.6) */
  z0 = pp_probe_now_ns ();
  for (int i = 0; i < rk->n_stages; i++)
    pp_chunk_zero_grads (cpu_stage (run, rk->stages[i])->chunk);
  int64_t t1 = pp_probe_now_ns ();
  if (rk->n_stages > 0)
    pp_run_record_span (run, rk->rank, -1, -1, PP_SPAN_HOST_ZERO_GRAD, z0, t1, -1);
  pp_run_end_rank_step (run, rk, t0, t1);
}

/* The micro-batches still held are released by running their backward
 * with a zero gradient, and all gradients are zeroed. */
static void
cpu_recover (PpRun *run)
{
  for (int i = 0; i < run->sched->n_stages; i++)
    {
      PpRunStage *st = &run->stages[i];
      CpuStage *c = st->bk;
      if (c == NULL)
        continue;   /* another process's */
      for (int k = 0; k < st->n_mb; k++)
        {
          uint8_t m = st->mb_state[k];
          PpStatus rc = PP_OK;
          if (!(m & PP_MB_FWD) || (m & PP_MB_DONE))
            continue;
          if (m & PP_MB_INPUT)
            rc = pp_chunk_backward_weight (c->chunk, st->mb_lo + k, NULL);
          else
            rc = pp_chunk_backward (c->chunk, st->mb_lo + k, st->next >= 0 ? run->zeros : NULL,
                                    c->din ? c->din + (size_t) k * (size_t) run->rows * (size_t) st->in_dim : NULL,
                                    1.0f, NULL);
          if (rc != PP_OK)
            run->broken = 1;
        }
      pp_chunk_zero_grads (c->chunk);
    }
}

static void
cpu_copy_params (PpRun *run, int stage, float *out, size_t n)
{
  const CpuStage *c = cpu_stage (run, stage);
  if (c != NULL)
    memcpy (out, pp_chunk_params (c->chunk), n * sizeof (float));
  else
    memset (out, 0, n * sizeof (float));
}

static void
cpu_free_rank (PpRun *run, PpRunRank *rk)
{
  free (rk->bk);
}

static void
cpu_free_stage (PpRun *run, PpRunStage *st)
{
  CpuStage *c = st->bk;
  if (c == NULL)
    return;
  if (c->chunk != NULL)
    pp_chunk_free (c->chunk);
  free (c->out);
  free (c->din);
  free (c);
}

static void
cpu_close (PpRun *run)
{
}

static const PpRunBackend cpu_backend = {
  .name = "cpu",
  .open = cpu_open,
  .setup_stage = cpu_setup_stage,
  .stage_params = cpu_stage_params,
  .setup_rank = cpu_setup_rank,
  .batch_rows = cpu_batch_rows,
  .receive = cpu_receive,
  .action_begin = cpu_action_begin,
  .compute = cpu_compute,
  .work_end = cpu_work_end,
  .action_end = cpu_action_end,
  .memory = cpu_memory,
  .sum_copies = cpu_sum_copies,
  .optimizer = cpu_optimizer,
  .recover = cpu_recover,
  .copy_params = cpu_copy_params,
  .free_rank = cpu_free_rank,
  .free_stage = cpu_free_stage,
  .close = cpu_close,
};

const PpRunBackend *
pp_run_backend_cpu (void)
{
  return &cpu_backend;
}
