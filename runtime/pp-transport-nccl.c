/* pp-transport-nccl.c — GPU ranks that are processes (mpirun), one GPU
 * each: stage boundaries as ncclSend/ncclRecv between the ranks' GPUs,
 * everything else (sums, DualPipe's gradient copies, clocks, the
 * collector) over the MPI transport it wraps (pp-transport.h, "nccl").
 *
 * GPUs.  Rank r runs on GPU (its index among the job's ranks on its host);
 * NCCL refuses two ranks on one GPU, so a host with more ranks than GPUs
 * is refused in one line, on every rank at once (an agreement over MPI
 * before anything else, so no rank waits for one that gave up).
 *
 * Links.  Each direction between two ranks that exchange stage data has a
 * communicator of its own (two members; its NCCL unique id made by the
 * sender and sent over MPI) and a stream on this GPU.  A link carries
 * only sends one way, so NCCL's in-order matching within a communicator
 * is all the matching needed: the receiver posts its receives in the
 * order the sender will send, which is static (the sender's actions of the
 * schedule, in order: a work publishes its output as it finishes).  As the
 * mpi transport does, every receive of a step is posted at step_begin,
 * each into its own buffer and followed by an event, so a consumer's
 * stream waits for exactly the message it needs; the sends go out as the
 * producer's works are launched, after their events.  The links are
 * connected at setup by one grouped exchange of every rank, so no later
 * call blocks on a peer's connection.  Boundaries between two stages of
 * one rank (the turn of a V) stay on the GPU: a device-to-device copy.
 *
 * Failure.  A watchdog thread polls every link's asynchronous error and
 * the run's abandoned flag: a lost peer (or a step abandoned with receives
 * posted) aborts every communicator, which ends the kernels that waited,
 * and the error comes back from the next call as one line.  A run whose
 * step was abandoned cannot step again (its receives were posted).
 *
 * Built with MPI, CUDA and NCCL's header (PP_HAVE_NCCL_TRANSPORT); NCCL
 * itself is opened at run time (pp-nccl.h).
 */
#include "pp-transport.h"

#ifdef PP_HAVE_NCCL_TRANSPORT
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "pp-nccl.h"

#define WATCH_NS 50000000L   /* the watchdog's period */

typedef struct {
  int          stage, grad, mb;   /* a message, by its producer */
} Msg;

/* One direction between this rank and a peer. */
typedef struct {
  int          used;
  ncclComm_t   comm;
  cudaStream_t stream;
  Msg         *order;             /* receiving: what the peer sends, in its order */
  int          n_order;
} Link;

/* What a consumer stage here receives from another rank, by direction. */
typedef struct {
  int          mb_lo, n_mb;
  size_t       floats;            /* of one micro-batch */
  float       *d_buf;             /* [n_mb][floats] on this GPU */
  cudaEvent_t *ev;                /* [n_mb]: recorded after each receive */
} Inbox;

typedef struct {
  PpTransport          base;
  PpTransport         *mpi;       /* borrowed: all but stage data */
  const PpNccl        *nccl;
  const PpSchedule    *s;
  int                  n_stages;
  int                  me, P;
  Link                *to, *from; /* [P]: sends to, receives from each rank */
  Inbox               *in[2];     /* [n_stages], by consumer stage */
  /* same-rank hand-offs, [n_stages * M] by producer */
  const float        **mine[2];
  cudaEvent_t         *mine_ready[2];
  uint8_t             *mine_set[2];
  PpTransportAbandoned abandoned;
  void                *user;

  pthread_mutex_t      mu;        /* NCCL calls against the watchdog's abort */
  pthread_t            watchdog;
  int                  watching, quit;
  int                  posted;    /* a step's receives are posted, not all consumed */
  int                  aborted;
  char                 failure[PP_ERROR_MSG_MAX];
} Nccl;

static PpStatus
nccl_fail (Nccl *n, PpError *err, const char *what, ncclResult_t r)
{
  return pp_error_set (err, PP_EIO, "rank %d: NCCL %s: %s", n->me, what,
                       n->nccl->GetErrorString (r));
}

static PpStatus
cuda_fail (Nccl *n, PpError *err, const char *what, cudaError_t e)
{
  (void) cudaGetLastError ();
  return pp_error_set (err, e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_EIO, "rank %d: %s: %s",
                       n->me, what, cudaGetErrorString (e));
}

/* Under n->mu. */
static void
abort_links (Nccl *n, const char *why)
{
  if (n->aborted)
    return;
  n->aborted = 1;
  if (n->failure[0] == '\0')
    snprintf (n->failure, sizeof n->failure, "%s", why);
  for (int r = 0; r < n->P; r++)
    {
      if (n->to[r].comm != NULL)
        n->nccl->CommAbort (n->to[r].comm);
      if (n->from[r].comm != NULL)
        n->nccl->CommAbort (n->from[r].comm);
      n->to[r].comm = n->from[r].comm = NULL;
    }
}

/* Ends what waits on a link that will never deliver. */
static void *
watch (void *data)
{
  Nccl *n = data;
  for (;;)
    {
      struct timespec ts = { 0, WATCH_NS };
      nanosleep (&ts, NULL);
      pthread_mutex_lock (&n->mu);
      if (n->quit)
        {
          pthread_mutex_unlock (&n->mu);
          return NULL;
        }
      for (int r = 0; r < n->P && !n->aborted; r++)
        for (int d = 0; d < 2 && !n->aborted; d++)
          {
            Link *l = d ? &n->from[r] : &n->to[r];
            ncclResult_t st = ncclSuccess;
            if (l->comm == NULL || n->nccl->CommGetAsyncError (l->comm, &st) != ncclSuccess
                || st == ncclSuccess || st == ncclInProgress)
              continue;
            char why[PP_ERROR_MSG_MAX];
            snprintf (why, sizeof why, "rank %d: NCCL link %s rank %d failed (%s): rank %d lost?",
                      n->me, d ? "from" : "to", r, n->nccl->GetErrorString (st), r);
            abort_links (n, why);
          }
      if (!n->aborted && n->posted && n->abandoned != NULL && n->abandoned (n->user))
        abort_links (n, "");   /* the step is over: nothing more will arrive */
      pthread_mutex_unlock (&n->mu);
    }
}

/* PP_OK, or the failure that ended the links. */
static PpStatus
check_links (Nccl *n, PpError *err)
{
  PpStatus rc = PP_OK;
  pthread_mutex_lock (&n->mu);
  if (n->aborted)
    rc = n->failure[0] ? pp_error_set (err, PP_EIO, "%s", n->failure) : PP_EIO;
  pthread_mutex_unlock (&n->mu);
  return rc;
}

static void
set_device (Nccl *n)
{
  (void) cudaSetDevice (n->base.device);
}

/* ---- setup ---------------------------------------------------------------- */

/* The message a work publishes to another stage's rank, if any. */
static int
work_message (const PpSchedule *s, int kind, int stage, int mb, Msg *m, int *to)
{
  int c;
  if (kind == PP_ACT_F && (c = s->stage_next[stage]) >= 0)
    m->grad = 0;
  else if ((kind == PP_ACT_B || kind == PP_ACT_I) && (c = s->stage_prev[stage]) >= 0)
    m->grad = 1;
  else
    return 0;
  m->stage = stage;
  m->mb = mb;
  *to = s->stage_rank[c];
  return 1;
}

/* What rank `peer` sends to this rank, in the order it sends it. */
static PpStatus
plan_receives (Nccl *n, int peer, PpError *err)
{
  const PpSchedule *s = n->s;
  const PpRankActions *ra = &s->rank[peer];
  Link *l = &n->from[peer];

  l->order = calloc ((size_t) 2 * (size_t) ra->n_actions + 1, sizeof (Msg));
  if (l->order == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int i = 0; i < ra->n_actions; i++)
    {
      const PpAction *a = &ra->actions[i];
      Msg m;
      int to;
      if (a->kind == PP_ACT_OVERLAP_F_B)
        {
          if (work_message (s, PP_ACT_F, a->stage, a->microbatch, &m, &to) && to == n->me)
            l->order[l->n_order++] = m;
          if (work_message (s, a->sub_kind, a->sub_stage, a->sub_microbatch, &m, &to) && to == n->me)
            l->order[l->n_order++] = m;
        }
      else if (work_message (s, a->kind, a->stage, a->microbatch, &m, &to) && to == n->me)
        l->order[l->n_order++] = m;
    }
  return PP_OK;
}

static PpStatus
nccl_setup (PpTransport *t, const PpSchedule *s, const size_t *in_floats,
            const size_t *out_floats, PpTransportAbandoned abandoned, void *user, PpError *err)
{
  Nccl *n = (Nccl *) t;
  int P = n->P, me = n->me;
  ncclUniqueId *ids;
  PpStatus rc;
  ncclResult_t r;
  float *d_probe = NULL;
  cudaError_t ce;

  if ((rc = n->mpi->ops->setup (n->mpi, s, in_floats, out_floats, abandoned, user, err)) != PP_OK)
    return rc;
  n->s = s;
  n->n_stages = s->n_stages;
  n->abandoned = abandoned;
  n->user = user;
  set_device (n);

  /* which directions carry stage data */
  for (int i = 0; i < s->n_stages; i++)
    for (int g = 0; g < 2; g++)
      {
        int c = g ? s->stage_prev[i] : s->stage_next[i];
        int a = s->stage_rank[i], b;
        if (c < 0 || (b = s->stage_rank[c]) == a)
          continue;
        if (a == me)
          n->to[b].used = 1;
        if (b == me)
          n->from[a].used = 1;
      }

  /* the ids: made by each link's sender, carried over MPI; every process
   * walks the pairs in one order, so the blocking sends always meet */
  if ((ids = calloc ((size_t) P, sizeof (ncclUniqueId) * 2)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int a = 0; a < P && rc == PP_OK; a++)
    for (int b = 0; b < P && rc == PP_OK; b++)
      {
        int used = 0;
        if (a == b)
          continue;
        for (int i = 0; i < s->n_stages && !used; i++)
          for (int g = 0; g < 2 && !used; g++)
            {
              int c = g ? s->stage_prev[i] : s->stage_next[i];
              used = c >= 0 && s->stage_rank[i] == a && s->stage_rank[c] == b;
            }
        if (!used)
          continue;
        if (a == me)
          {
            if ((r = n->nccl->GetUniqueId (&ids[2 * b])) != ncclSuccess)
              rc = nccl_fail (n, err, "unique id", r);
            else
              rc = n->mpi->ops->send_bytes (n->mpi, b, &ids[2 * b], sizeof (ncclUniqueId), err);
          }
        else if (b == me)
          rc = n->mpi->ops->recv_bytes (n->mpi, a, &ids[2 * a + 1], sizeof (ncclUniqueId), err);
      }
  /* the communicators, all in one group (each init waits for its peer) */
  if (rc == PP_OK && (r = n->nccl->GroupStart ()) != ncclSuccess)
    rc = nccl_fail (n, err, "group start", r);
  if (rc == PP_OK)
    {
      ncclResult_t r1 = ncclSuccess;
      for (int q = 0; q < P; q++)
        {
          if (n->to[q].used && r1 == ncclSuccess)
            r1 = n->nccl->CommInitRank (&n->to[q].comm, 2, ids[2 * q], 0);
          if (n->from[q].used && r1 == ncclSuccess)
            r1 = n->nccl->CommInitRank (&n->from[q].comm, 2, ids[2 * q + 1], 1);
        }
      r = n->nccl->GroupEnd ();
      if (r1 != ncclSuccess || r != ncclSuccess)
        rc = nccl_fail (n, err, "communicators of the stage links", r1 != ncclSuccess ? r1 : r);
    }
  free (ids);
  for (int q = 0; q < P && rc == PP_OK; q++)
    for (int d = 0; d < 2 && rc == PP_OK; d++)
      {
        Link *l = d ? &n->from[q] : &n->to[q];
        if (l->used && (ce = cudaStreamCreateWithFlags (&l->stream, cudaStreamNonBlocking)) != cudaSuccess)
          rc = cuda_fail (n, err, "cudaStreamCreate (NCCL link)", ce);
        if (rc == PP_OK && d == 1 && l->used)
          rc = plan_receives (n, q, err);
      }

  /* receive buffers and same-rank hand-offs */
  for (int g = 0; g < 2 && rc == PP_OK; g++)
    {
      size_t sm = (size_t) s->n_stages * (size_t) s->microbatches;
      n->in[g] = calloc ((size_t) s->n_stages, sizeof (Inbox));
      n->mine[g] = calloc (sm, sizeof (float *));
      n->mine_ready[g] = calloc (sm, sizeof (cudaEvent_t));
      n->mine_set[g] = calloc (sm, 1);
      if (n->in[g] == NULL || n->mine[g] == NULL || n->mine_ready[g] == NULL || n->mine_set[g] == NULL)
        rc = pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  for (int i = 0; i < s->n_stages && rc == PP_OK; i++)
    for (int g = 0; g < 2 && rc == PP_OK; g++)
      {
        int from = g ? s->stage_next[i] : s->stage_prev[i];
        Inbox *b = &n->in[g][i];
        if (s->stage_rank[i] != me || from < 0 || s->stage_rank[from] == me)
          continue;
        b->mb_lo = s->stage_mb_lo[i];
        b->n_mb = s->stage_mb_hi[i] - s->stage_mb_lo[i];
        b->floats = g ? out_floats[i] : in_floats[i];
        if ((ce = cudaMalloc ((void **) &b->d_buf, (size_t) b->n_mb * b->floats * sizeof (float) + 16)) != cudaSuccess)
          rc = cuda_fail (n, err, "GPU memory for the stage links' receives", ce);
        else if ((b->ev = calloc ((size_t) b->n_mb, sizeof (cudaEvent_t))) == NULL)
          rc = pp_error_set (err, PP_ENOMEM, "out of memory");
        for (int k = 0; rc == PP_OK && k < b->n_mb; k++)
          if ((ce = cudaEventCreateWithFlags (&b->ev[k], cudaEventDisableTiming)) != cudaSuccess)
            rc = cuda_fail (n, err, "cudaEventCreate (NCCL receive)", ce);
      }

  /* connect every link now, all ranks in one group, so that no send or
   * receive of a step waits on the host for its peer to connect */
  if (rc == PP_OK && (ce = cudaMalloc ((void **) &d_probe, 2 * P * sizeof (float))) != cudaSuccess)
    rc = cuda_fail (n, err, "GPU memory for connecting the links", ce);
  if (rc == PP_OK)
    {
      ncclResult_t r1 = n->nccl->GroupStart ();
      for (int q = 0; q < P && r1 == ncclSuccess; q++)
        {
          if (n->to[q].used)
            r1 = n->nccl->Send (d_probe + 2 * q, 1, ncclFloat32, 1, n->to[q].comm, n->to[q].stream);
          if (n->from[q].used && r1 == ncclSuccess)
            r1 = n->nccl->Recv (d_probe + 2 * q + 1, 1, ncclFloat32, 0, n->from[q].comm, n->from[q].stream);
        }
      r = n->nccl->GroupEnd ();
      if (r1 != ncclSuccess || r != ncclSuccess)
        rc = nccl_fail (n, err, "connecting the stage links", r1 != ncclSuccess ? r1 : r);
      for (int q = 0; q < P && rc == PP_OK; q++)
        for (int d = 0; d < 2 && rc == PP_OK; d++)
          {
            Link *l = d ? &n->from[q] : &n->to[q];
            if (l->used && (ce = cudaStreamSynchronize (l->stream)) != cudaSuccess)
              rc = cuda_fail (n, err, "connecting the stage links", ce);
          }
    }
  if (d_probe != NULL)
    cudaFree (d_probe);
  if (rc == PP_OK)
    {
      int e = pthread_create (&n->watchdog, NULL, watch, n);
      if (e != 0)
        rc = pp_error_set (err, PP_EIO, "cannot start the NCCL watchdog: %s", strerror (e));
      n->watching = e == 0;
    }
  return rc;
}

/* ---- a step ----------------------------------------------------------------- */

static PpStatus
nccl_step_begin (PpTransport *t, PpError *err)
{
  Nccl *n = (Nccl *) t;
  const PpSchedule *s = n->s;
  size_t sm = (size_t) s->n_stages * (size_t) s->microbatches;
  PpStatus rc = check_links (n, err);

  if (rc != PP_OK && err != NULL && err->msg[0] != '\0')
    return rc;
  if (rc != PP_OK || n->posted)
    return pp_error_set (err, PP_EIO, "rank %d: a step was abandoned with NCCL receives posted; "
                         "the run cannot step again", n->me);
  for (int g = 0; g < 2; g++)
    memset (n->mine_set[g], 0, sm);
  set_device (n);
  pthread_mutex_lock (&n->mu);
  n->posted = 1;
  for (int q = 0; q < n->P && rc == PP_OK; q++)
    {
      Link *l = &n->from[q];
      for (int i = 0; i < l->n_order && rc == PP_OK && !n->aborted; i++)
        {
          const Msg *m = &l->order[i];
          int c = m->grad ? s->stage_prev[m->stage] : s->stage_next[m->stage];
          Inbox *b = &n->in[m->grad][c];
          int k = m->mb - b->mb_lo;
          ncclResult_t r = n->nccl->Recv (b->d_buf + (size_t) k * b->floats, b->floats, ncclFloat32,
                                          0, l->comm, l->stream);
          cudaError_t ce;
          if (r != ncclSuccess)
            rc = nccl_fail (n, err, "posting a receive", r);
          else if ((ce = cudaEventRecord (b->ev[k], l->stream)) != cudaSuccess)
            rc = cuda_fail (n, err, "cudaEventRecord (NCCL receive)", ce);
        }
    }
  if (n->aborted && rc == PP_OK)
    rc = n->failure[0] ? pp_error_set (err, PP_EIO, "%s", n->failure) : PP_EIO;
  pthread_mutex_unlock (&n->mu);
  return rc;
}

/* Host data: only the order counts (the CUDA backend publishes device
 * data); what crosses to another rank goes with publish_device. */
static void
nccl_publish (PpTransport *t, int stage, int grad, int mb, const float *data, size_t count)
{
}

static PpStatus
nccl_acquire (PpTransport *t, int stage, int grad, int mb, const float **data, PpError *err)
{
  Nccl *n = (Nccl *) t;
  const PpSchedule *s = n->s;
  int consumer = grad ? s->stage_prev[stage] : s->stage_next[stage];

  if (consumer < 0)
    return pp_error_set (err, PP_EINVAL, "stage %d does not send micro-batch %d %s", stage, mb,
                         grad ? "backward" : "forward");
  if (data != NULL)
    *data = NULL;
  if (s->stage_rank[stage] == n->me
      && !n->mine_set[grad][(size_t) stage * (size_t) s->microbatches + (size_t) mb])
    return pp_error_set (err, PP_EINVAL,
                         "rank %d: stage %d, micro-batch %d needs the %s of stage %d, "
                         "which the same rank has not run yet",
                         n->me, consumer, mb, grad ? "input gradient" : "forward", stage);
  /* from another rank: its receive is posted; the GPU waits, not the host */
  return check_links (n, err);
}

static void
nccl_publish_device (PpTransport *t, int stage, int grad, int mb, const float *d_data,
                     size_t count, void *ready)
{
  Nccl *n = (Nccl *) t;
  const PpSchedule *s = n->s;
  int consumer = grad ? s->stage_prev[stage] : s->stage_next[stage];
  size_t at = (size_t) stage * (size_t) s->microbatches + (size_t) mb;
  Link *l;

  if (consumer < 0)
    return;
  if (s->stage_rank[consumer] == n->me)
    {
      n->mine[grad][at] = d_data;
      n->mine_ready[grad][at] = (cudaEvent_t) ready;
      n->mine_set[grad][at] = 1;
      return;
    }
  l = &n->to[s->stage_rank[consumer]];
  pthread_mutex_lock (&n->mu);
  if (!n->aborted)
    {
      cudaError_t ce = cudaStreamWaitEvent (l->stream, (cudaEvent_t) ready, 0);
      ncclResult_t r = ce == cudaSuccess
                       ? n->nccl->Send (d_data, count, ncclFloat32, 1, l->comm, l->stream)
                       : ncclSuccess;
      if (ce != cudaSuccess || r != ncclSuccess)
        {
          char why[PP_ERROR_MSG_MAX];
          snprintf (why, sizeof why, "rank %d: sending stage %d's micro-batch %d: %s", n->me, stage,
                    mb, ce != cudaSuccess ? cudaGetErrorString (ce) : n->nccl->GetErrorString (r));
          (void) cudaGetLastError ();
          abort_links (n, why);
        }
    }
  pthread_mutex_unlock (&n->mu);
}

static PpStatus
nccl_acquire_device (PpTransport *t, int stage, int grad, int mb, float *d_dst, size_t count,
                     void *stream, void *start, PpError *err)
{
  Nccl *n = (Nccl *) t;
  const PpSchedule *s = n->s;
  int consumer = grad ? s->stage_prev[stage] : s->stage_next[stage];
  cudaStream_t cs = (cudaStream_t) stream;
  const float *src;
  cudaError_t ce;

  if (s->stage_rank[stage] == n->me)
    {
      size_t at = (size_t) stage * (size_t) s->microbatches + (size_t) mb;
      if ((ce = cudaStreamWaitEvent (cs, n->mine_ready[grad][at], 0)) != cudaSuccess)
        return cuda_fail (n, err, "cudaStreamWaitEvent", ce);
      src = n->mine[grad][at];
      if ((ce = cudaEventRecord ((cudaEvent_t) start, cs)) != cudaSuccess)
        return cuda_fail (n, err, "cudaEventRecord", ce);
    }
  else
    {
      /* the span covers the message's arrival, as an NCCL receive does */
      Inbox *b = &n->in[grad][consumer];
      int k = mb - b->mb_lo;
      if (k < 0 || k >= b->n_mb)
        return pp_error_set (err, PP_EINVAL, "stage %d does not see micro-batch %d", consumer, mb);
      if (count > b->floats)
        return pp_error_set (err, PP_EINVAL, "stage %d: a message of %zu floats, %zu expected",
                             consumer, count, b->floats);
      if ((ce = cudaEventRecord ((cudaEvent_t) start, cs)) != cudaSuccess)
        return cuda_fail (n, err, "cudaEventRecord", ce);
      if ((ce = cudaStreamWaitEvent (cs, b->ev[k], 0)) != cudaSuccess)
        return cuda_fail (n, err, "cudaStreamWaitEvent (NCCL receive)", ce);
      src = b->d_buf + (size_t) k * b->floats;
    }
  if ((ce = cudaMemcpyAsync (d_dst, src, count * sizeof (float), cudaMemcpyDeviceToDevice, cs)) != cudaSuccess)
    return cuda_fail (n, err, "stage transfer (device to device)", ce);
  return check_links (n, err);
}

static void
nccl_interrupt (PpTransport *t)
{
  /* the watchdog sees the abandoned flag and ends what waits on the GPU */
  Nccl *n = (Nccl *) t;
  n->mpi->ops->interrupt (n->mpi);
}

/* Every send has gone out once the send streams are idle; polled, so an
 * abandoned step or a lost peer ends the wait. */
static PpStatus
nccl_step_end (PpTransport *t, PpError *err)
{
  Nccl *n = (Nccl *) t;
  PpStatus rc = PP_OK;

  set_device (n);
  for (int q = 0; q < n->P && rc == PP_OK; q++)
    {
      Link *l = &n->to[q];
      if (!l->used)
        continue;
      for (;;)
        {
          cudaError_t ce = cudaStreamQuery (l->stream);
          if (ce == cudaSuccess)
            break;
          if (ce != cudaErrorNotReady)
            {
              rc = cuda_fail (n, err, "sending a stage's data", ce);
              break;
            }
          if ((rc = check_links (n, err)) != PP_OK)
            break;
          if (n->abandoned (n->user))
            {
              rc = PP_EIO;
              break;
            }
          struct timespec ts = { 0, 20000 };
          nanosleep (&ts, NULL);
        }
    }
  if (rc == PP_OK)
    rc = check_links (n, err);
  if (rc == PP_OK)
    {
      /* the step ran to its end here: every receive was consumed */
      pthread_mutex_lock (&n->mu);
      n->posted = 0;
      pthread_mutex_unlock (&n->mu);
    }
  return rc;
}

static PpStatus
nccl_sum (PpTransport *t, double *values, size_t count, PpError *err)
{
  Nccl *n = (Nccl *) t;
  return n->mpi->ops->sum (n->mpi, values, count, err);
}

static PpStatus
nccl_send_bytes (PpTransport *t, int rank, const void *buf, size_t count, PpError *err)
{
  Nccl *n = (Nccl *) t;
  return n->mpi->ops->send_bytes (n->mpi, rank, buf, count, err);
}

static PpStatus
nccl_recv_bytes (PpTransport *t, int rank, void *buf, size_t count, PpError *err)
{
  Nccl *n = (Nccl *) t;
  return n->mpi->ops->recv_bytes (n->mpi, rank, buf, count, err);
}

static PpStatus
nccl_clock_offset (PpTransport *t, int64_t (*now) (void), int64_t *offset_ns, int64_t *rtt_ns,
                   PpError *err)
{
  Nccl *n = (Nccl *) t;
  return n->mpi->ops->clock_offset (n->mpi, now, offset_ns, rtt_ns, err);
}

static PpStatus
nccl_gather_bytes (PpTransport *t, const void *buf, size_t count, void **all, size_t *sizes,
                   PpError *err)
{
  Nccl *n = (Nccl *) t;
  return n->mpi->ops->gather_bytes (n->mpi, buf, count, all, sizes, err);
}

static void
nccl_free (PpTransport *t)
{
  Nccl *n = (Nccl *) t;

  if (n->watching)
    {
      pthread_mutex_lock (&n->mu);
      n->quit = 1;
      pthread_mutex_unlock (&n->mu);
      pthread_join (n->watchdog, NULL);
    }
  set_device (n);
  pthread_mutex_lock (&n->mu);
  if (n->posted)
    abort_links (n, "");   /* receives that will never be matched */
  pthread_mutex_unlock (&n->mu);
  for (int q = 0; n->to != NULL && n->from != NULL && q < n->P; q++)
    for (int d = 0; d < 2; d++)
      {
        Link *l = d ? &n->from[q] : &n->to[q];
        if (l->stream != NULL && !n->aborted)
          (void) cudaStreamSynchronize (l->stream);
        if (l->comm != NULL)
          n->nccl->CommDestroy (l->comm);
        if (l->stream != NULL)
          cudaStreamDestroy (l->stream);
        free (l->order);
      }
  for (int g = 0; g < 2; g++)
    {
      for (int i = 0; n->in[g] != NULL && i < n->n_stages; i++)
        {
          Inbox *b = &n->in[g][i];
          for (int k = 0; b->ev != NULL && k < b->n_mb; k++)
            if (b->ev[k] != NULL)
              cudaEventDestroy (b->ev[k]);
          free (b->ev);
          if (b->d_buf != NULL)
            cudaFree (b->d_buf);
        }
      free (n->in[g]);
      free (n->mine[g]);
      free (n->mine_ready[g]);
      free (n->mine_set[g]);
    }
  (void) cudaGetLastError ();
  pthread_mutex_destroy (&n->mu);
  free (n->to);
  free (n->from);
  free (n);
}

static const PpTransportOps nccl_ops = {
  .name = "nccl",
  .setup = nccl_setup,
  .step_begin = nccl_step_begin,
  .publish = nccl_publish,
  .acquire = nccl_acquire,
  .interrupt = nccl_interrupt,
  .step_end = nccl_step_end,
  .sum = nccl_sum,
  .send_bytes = nccl_send_bytes,
  .recv_bytes = nccl_recv_bytes,
  .clock_offset = nccl_clock_offset,
  .gather_bytes = nccl_gather_bytes,
  .publish_device = nccl_publish_device,
  .acquire_device = nccl_acquire_device,
  .free = nccl_free,
};

PpTransport *
pp_transport_new_nccl (PpTransport *mpi, PpError *err)
{
  const PpNccl *nccl = pp_nccl ();
  int n_dev = 0, local = 0, n_local = 1, len = 0;
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  MPI_Comm node;
  Nccl *n;
  /* the agreement: every process says whether it can take part */
  double why[3] = { 0, 0, 0 };   /* no NCCL here, too few GPUs here, no GPU at all */
  PpStatus rc;

  if (MPI_Comm_split_type (MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi->process_rank,
                           MPI_INFO_NULL, &node) == MPI_SUCCESS)
    {
      MPI_Comm_rank (node, &local);
      MPI_Comm_size (node, &n_local);
      MPI_Comm_free (&node);
    }
  MPI_Get_processor_name (host, &len);
  if (cudaGetDeviceCount (&n_dev) != cudaSuccess)
    n_dev = 0;
  (void) cudaGetLastError ();
  if (nccl == NULL)
    why[0] = 1;
  else if (n_dev == 0)
    why[2] = 1;
  else if (n_local > n_dev)
    why[1] = 1;
  if ((rc = mpi->ops->sum (mpi, why, 3, err)) != PP_OK)
    return NULL;
  if (why[0] + why[1] + why[2] > 0)
    {
      if (nccl == NULL)
        pp_error_set (err, PP_EUNSUPPORTED,
                      "GPU ranks as processes talk through NCCL, and libnccl.so.2 cannot be loaded "
                      "here; install NCCL, or run the ranks as threads (no mpirun)");
      else if (n_local > n_dev)
        pp_error_set (err, PP_EUNSUPPORTED,
                      "%d ranks of this job run on %s, which has %d GPU%s: NCCL refuses two ranks on "
                      "one GPU; start at most %d rank%s per host, or run the ranks as threads (no "
                      "mpirun) with green-context partitions",
                      n_local, host, n_dev, n_dev == 1 ? "" : "s", n_dev, n_dev == 1 ? "" : "s");
      else
        pp_error_set (err, PP_EUNSUPPORTED,
                      "another host of this job %s: every GPU rank process needs NCCL and a GPU "
                      "of its own",
                      why[0] > 0 ? "cannot load libnccl.so.2"
                      : why[2] > 0 ? "has no GPU" : "has more ranks than GPUs");
      return NULL;
    }
  if ((n = calloc (1, sizeof *n)) == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  n->base.ops = &nccl_ops;
  n->base.process_rank = mpi->process_rank;
  n->base.n_processes = mpi->n_processes;
  n->base.device = local;
  n->mpi = mpi;
  n->nccl = nccl;
  n->me = mpi->process_rank;
  n->P = mpi->n_processes;
  pthread_mutex_init (&n->mu, NULL);
  n->to = calloc ((size_t) n->P, sizeof (Link));
  n->from = calloc ((size_t) n->P, sizeof (Link));
  if (n->to == NULL || n->from == NULL)
    {
      nccl_free (&n->base);
      pp_error_set (err, PP_ENOMEM, "out of memory");
      return NULL;
    }
  return &n->base;
}

bool
pp_transport_have_nccl (void)
{
  return pp_nccl () != NULL;
}

#else /* !PP_HAVE_NCCL_TRANSPORT */

PpTransport *
pp_transport_new_nccl (PpTransport *mpi, PpError *err)
{
  pp_error_set (err, PP_EUNSUPPORTED,
                "GPU ranks as processes talk through NCCL, and this pipescope was built without it "
                "(NCCL, MPI and CUDA are all needed); run the ranks as threads (no mpirun)");
  return NULL;
}

bool
pp_transport_have_nccl (void)
{
  return false;
}

#endif
