/* pp-transport-mpi.c — one rank per process, started by mpirun: stage
 * boundaries as non-blocking MPI point-to-point messages.
 *
 * At a step's start every receive this process will need is posted, each
 * into its own buffer (stage, direction, micro-batch), so a message is
 * matched the moment it arrives whatever order the schedule consumes them
 * in.  Tags are (producer stage, direction, micro-batch), unique within a
 * step: any schedule's order of sends and receives matches, interleaved,
 * V-shaped and DualPipe's included.  A send is MPI_Isend from the
 * producer's own buffer, which nothing overwrites before step_end waits
 * for it.  Boundaries between two stages of one rank (the turn of a V)
 * stay in the process: a pointer, as in the local transport.
 *
 * Stage traffic has its own communicator; sums and DualPipe's gradient
 * copies another, so their tags never meet.  One rank thread calls the
 * stage functions while the main thread waits for it, and the main thread
 * calls the rest between steps: MPI_THREAD_SERIALIZED is enough. */
#include "pp-transport.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PP_HAVE_MPI
#include <mpi.h>
#endif

bool
pp_transport_launched_by_mpi (void)
{
  /* OpenMPI's and the PMI/PMIx launchers' (MPICH, Slurm) rank variables */
  static const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE" };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv (vars[i]) != NULL)
      return true;
  return false;
}

#ifndef PP_HAVE_MPI

bool
pp_transport_have_mpi (void)
{
  return false;
}

PpTransport *
pp_transport_new_mpi (PpError *err)
{
  pp_error_set (err, PP_EUNSUPPORTED,
                "this pipescope-cli was built without MPI (install libopenmpi-dev and rebuild)");
  return NULL;
}

#else

typedef struct {
  int          n_mb, mb_lo;
  size_t       floats;         /* of one micro-batch */
  float       *buf;            /* [n_mb][floats]: what arrives */
  MPI_Request *req;            /* [n_mb]: its receives */
  uint8_t     *done;           /* [n_mb] */
} Inbox;

typedef struct {
  PpTransport          base;
  MPI_Comm             stages, control;
  const PpSchedule    *s;
  int                  n_stages;     /* of s, kept for free (s may be gone by then) */
  int                  tag_ub;
  Inbox               *in[2];        /* [n_stages], by consumer stage and direction */
  const float        **mine[2];      /* same-rank hand-offs: [n_stages * M], by producer */
  MPI_Request         *sends;
  int                  n_sends, cap_sends;
  PpTransportAbandoned abandoned;
  void                *user;
} Mpi;

static PpStatus
mpi_fail (PpError *err, const char *what, int code)
{
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string (code, msg, &len);
  return pp_error_set (err, PP_EIO, "MPI: %s: %s", what, msg);
}

static int
tag_of (const Mpi *m, int stage, int grad, int mb)
{
  return (stage * 2 + grad) * m->s->microbatches + mb;
}

static PpStatus
mpi_setup (PpTransport *t, const PpSchedule *s, const size_t *in_floats,
           const size_t *out_floats, PpTransportAbandoned abandoned, void *user, PpError *err)
{
  Mpi *m = (Mpi *) t;
  long max_tag = ((long) s->n_stages * 2) * s->microbatches;

  m->s = s;
  m->abandoned = abandoned;
  m->user = user;
  if (s->ranks != m->base.n_processes)
    return pp_error_set (err, PP_EINVAL, "the schedule has %d ranks, the MPI job %d processes",
                         s->ranks, m->base.n_processes);
  if (max_tag > m->tag_ub)
    return pp_error_set (err, PP_EINVAL,
                         "%d stages x %d micro-batches need %ld MPI tags; this MPI has %d",
                         s->n_stages, s->microbatches, max_tag, m->tag_ub);
  for (int g = 0; g < 2; g++)
    {
      m->in[g] = calloc ((size_t) s->n_stages, sizeof (Inbox));
      m->mine[g] = calloc ((size_t) s->n_stages * (size_t) s->microbatches, sizeof (float *));
      if (m->in[g] == NULL || m->mine[g] == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory");
    }
  m->n_stages = s->n_stages;
  for (int i = 0; i < s->n_stages; i++)
    {
      if (s->stage_rank[i] != m->base.process_rank)
        continue;
      for (int g = 0; g < 2; g++)
        {
          /* a forward input comes from prev, a gradient from next */
          int from = g ? s->stage_next[i] : s->stage_prev[i];
          Inbox *b = &m->in[g][i];
          if (from < 0 || s->stage_rank[from] == m->base.process_rank)
            continue;
          b->mb_lo = s->stage_mb_lo[i];
          b->n_mb = s->stage_mb_hi[i] - s->stage_mb_lo[i];
          b->floats = g ? out_floats[i] : in_floats[i];
          b->buf = calloc ((size_t) b->n_mb * b->floats + 1, sizeof (float));
          b->req = calloc ((size_t) b->n_mb + 1, sizeof (MPI_Request));
          b->done = calloc ((size_t) b->n_mb + 1, 1);
          if (b->buf == NULL || b->req == NULL || b->done == NULL)
            return pp_error_set (err, PP_ENOMEM, "out of memory for the receive buffers of stage %d", i);
          for (int k = 0; k < b->n_mb; k++)
            b->req[k] = MPI_REQUEST_NULL;
        }
    }
  return PP_OK;
}

/* Cancels what is still posted (an abandoned step's receives). */
static void
cancel_receives (Mpi *m)
{
  for (int g = 0; g < 2; g++)
    for (int i = 0; m->in[g] != NULL && i < m->n_stages; i++)
      {
        Inbox *b = &m->in[g][i];
        for (int k = 0; k < b->n_mb; k++)
          if (b->req[k] != MPI_REQUEST_NULL)
            {
              MPI_Cancel (&b->req[k]);
              MPI_Request_free (&b->req[k]);
              b->req[k] = MPI_REQUEST_NULL;
            }
      }
}

static PpStatus
mpi_step_begin (PpTransport *t, PpError *err)
{
  Mpi *m = (Mpi *) t;
  const PpSchedule *s = m->s;

  cancel_receives (m);
  for (int g = 0; g < 2; g++)
    memset (m->mine[g], 0, (size_t) s->n_stages * (size_t) s->microbatches * sizeof (float *));
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < s->n_stages; i++)
      {
        Inbox *b = &m->in[g][i];
        int from = g ? s->stage_next[i] : s->stage_prev[i];
        for (int k = 0; k < b->n_mb; k++)
          {
            int rc = MPI_Irecv (b->buf + (size_t) k * b->floats, (int) b->floats, MPI_FLOAT,
                                s->stage_rank[from], tag_of (m, from, g, b->mb_lo + k), m->stages,
                                &b->req[k]);
            if (rc != MPI_SUCCESS)
              return mpi_fail (err, "posting a receive", rc);
            b->done[k] = 0;
          }
      }
  return PP_OK;
}

static void
mpi_publish (PpTransport *t, int stage, int grad, int mb, const float *data, size_t n)
{
  Mpi *m = (Mpi *) t;
  const PpSchedule *s = m->s;
  int to = grad ? s->stage_prev[stage] : s->stage_next[stage];

  if (to < 0)
    return;
  if (s->stage_rank[to] == m->base.process_rank)
    {
      m->mine[grad][(size_t) stage * (size_t) s->microbatches + (size_t) mb] = data;
      return;
    }
  if (m->n_sends == m->cap_sends)
    {
      int cap = m->cap_sends ? 2 * m->cap_sends : 64;
      MPI_Request *r = realloc (m->sends, (size_t) cap * sizeof *r);
      if (r == NULL)
        {
          /* no room to keep the request: send it blocking instead */
          MPI_Send (data, (int) n, MPI_FLOAT, s->stage_rank[to], tag_of (m, stage, grad, mb), m->stages);
          return;
        }
      m->sends = r;
      m->cap_sends = cap;
    }
  MPI_Isend (data, (int) n, MPI_FLOAT, s->stage_rank[to], tag_of (m, stage, grad, mb), m->stages,
             &m->sends[m->n_sends++]);
}

/* MPI_Test until done or abandoned: a few spins, then short sleeps (a
 * rank may share its core with another process). */
static PpStatus
wait_request (Mpi *m, MPI_Request *req, PpError *err)
{
  for (long i = 0;; i++)
    {
      int flag = 0;
      int rc = MPI_Test (req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        return mpi_fail (err, "waiting for a message", rc);
      if (flag)
        return PP_OK;
      if ((i & 63) == 63 && m->abandoned (m->user))
        return PP_EIO;
      if (i > 256)
        {
          struct timespec ts = { 0, 20000 };
          nanosleep (&ts, NULL);
        }
    }
}

static PpStatus
mpi_acquire (PpTransport *t, int stage, int grad, int mb, const float **data, PpError *err)
{
  Mpi *m = (Mpi *) t;
  const PpSchedule *s = m->s;
  int consumer = grad ? s->stage_prev[stage] : s->stage_next[stage];
  PpStatus rc;

  if (consumer < 0)
    return pp_error_set (err, PP_EINVAL, "stage %d does not send micro-batch %d %s", stage, mb,
                         grad ? "backward" : "forward");
  if (s->stage_rank[stage] == m->base.process_rank)
    {
      *data = m->mine[grad][(size_t) stage * (size_t) s->microbatches + (size_t) mb];
      if (*data == NULL)
        return pp_error_set (err, PP_EINVAL,
                             "rank %d: stage %d, micro-batch %d needs the %s of stage %d, "
                             "which the same rank has not run yet",
                             m->base.process_rank, consumer, mb,
                             grad ? "input gradient" : "forward", stage);
      return PP_OK;
    }
  Inbox *b = &m->in[grad][consumer];
  int k = mb - b->mb_lo;
  if (k < 0 || k >= b->n_mb)
    return pp_error_set (err, PP_EINVAL, "stage %d does not see micro-batch %d", consumer, mb);
  if (!b->done[k])
    {
      if ((rc = wait_request (m, &b->req[k], err)) != PP_OK)
        return rc;
      b->done[k] = 1;
    }
  *data = b->buf + (size_t) k * b->floats;
  return PP_OK;
}

static void
mpi_interrupt (PpTransport *t)
{
  /* acquire polls the abandoned flag itself */
}

static PpStatus
mpi_step_end (PpTransport *t, PpError *err)
{
  Mpi *m = (Mpi *) t;
  PpStatus rc = PP_OK;

  for (int i = 0; i < m->n_sends && rc == PP_OK; i++)
    rc = wait_request (m, &m->sends[i], err);
  if (rc != PP_OK)
    for (int i = 0; i < m->n_sends; i++)
      if (m->sends[i] != MPI_REQUEST_NULL)
        {
          MPI_Cancel (&m->sends[i]);
          MPI_Request_free (&m->sends[i]);
        }
  m->n_sends = 0;
  return rc;
}

static PpStatus
mpi_sum (PpTransport *t, double *values, size_t n, PpError *err)
{
  Mpi *m = (Mpi *) t;
  int rc = MPI_Allreduce (MPI_IN_PLACE, values, (int) n, MPI_DOUBLE, MPI_SUM, m->control);
  return rc == MPI_SUCCESS ? PP_OK : mpi_fail (err, "summing over the ranks", rc);
}

/* Bytes go in pieces of at most 1 GiB: MPI counts are ints. */
#define PIECE ((size_t) 1 << 30)

static PpStatus
mpi_send_bytes (PpTransport *t, int rank, const void *buf, size_t n, PpError *err)
{
  Mpi *m = (Mpi *) t;
  for (size_t off = 0; off < n; off += PIECE)
    {
      size_t len = n - off < PIECE ? n - off : PIECE;
      int rc = MPI_Send ((const char *) buf + off, (int) len, MPI_BYTE, rank, 1, m->control);
      if (rc != MPI_SUCCESS)
        return mpi_fail (err, "sending to a rank", rc);
    }
  return PP_OK;
}

static PpStatus
mpi_recv_bytes (PpTransport *t, int rank, void *buf, size_t n, PpError *err)
{
  Mpi *m = (Mpi *) t;
  for (size_t off = 0; off < n; off += PIECE)
    {
      size_t len = n - off < PIECE ? n - off : PIECE;
      int rc = MPI_Recv ((char *) buf + off, (int) len, MPI_BYTE, rank, 1, m->control,
                         MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        return mpi_fail (err, "receiving from a rank", rc);
    }
  return PP_OK;
}

/* Rounds of ping-pong per rank: the least round trip of 32 is a tight
 * bound on one host and on a quiet network alike. */
#define CLOCK_ROUNDS 32

/* One message of the ping-pong, sent (send) or received, waited for by
 * polling: 20 us of spinning (a message between processes of one host is
 * there by then), then short sleeps.  Not MPI_Send/MPI_Recv, which spin
 * without end: with every core taken by spinning processes, a message
 * over TCP (to another host, or to another network namespace of this one)
 * came a scheduler tick late; on a 2-core machine the least round trip of
 * 32 was 4 ms and the offset 2 ms off (polling so: 0.1 ms, and within
 * 0.03 ms).  Never abandoned: the other end is in the same exchange. */
static int
clock_message (Mpi *m, int64_t *v, int peer, bool send)
{
  MPI_Request req;
  int rc = send ? MPI_Isend (v, 1, MPI_INT64_T, peer, 2, m->control, &req)
                : MPI_Irecv (v, 1, MPI_INT64_T, peer, 2, m->control, &req);
  struct timespec t0, t;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (int flag = 0; rc == MPI_SUCCESS;)
    {
      if ((rc = MPI_Test (&req, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS || flag)
        break;
      clock_gettime (CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 20000)
        {
          struct timespec ts = { 0, 20000 };
          nanosleep (&ts, NULL);
        }
    }
  return rc;
}

static PpStatus
mpi_clock_offset (PpTransport *t, int64_t (*now) (void), int64_t *offset_ns, int64_t *rtt_ns,
                  PpError *err)
{
  Mpi *m = (Mpi *) t;
  int me = m->base.process_rank, rc;
  int64_t best_rtt = INT64_MAX, best_off = 0;

  *offset_ns = 0;
  *rtt_ns = 0;
  if (me == 0)
    {
      /* the reference: answer every rank in turn with the time now */
      for (int r = 1; r < m->base.n_processes; r++)
        for (int i = 0; i < CLOCK_ROUNDS; i++)
          {
            int64_t t1, t0;
            if ((rc = clock_message (m, &t1, r, false)) != MPI_SUCCESS)
              return mpi_fail (err, "measuring the clocks", rc);
            t0 = now ();
            if ((rc = clock_message (m, &t0, r, true)) != MPI_SUCCESS)
              return mpi_fail (err, "measuring the clocks", rc);
          }
      return PP_OK;
    }
  for (int i = 0; i < CLOCK_ROUNDS; i++)
    {
      int64_t t1 = now (), t0 = 0, t2;
      if ((rc = clock_message (m, &t1, 0, true)) != MPI_SUCCESS
          || (rc = clock_message (m, &t0, 0, false)) != MPI_SUCCESS)
        return mpi_fail (err, "measuring the clocks", rc);
      t2 = now ();
      /* rank 0 read its clock about halfway through the round trip */
      if (t2 - t1 < best_rtt)
        {
          best_rtt = t2 - t1;
          best_off = t0 - (t1 + (t2 - t1) / 2);
        }
    }
  *offset_ns = best_off;
  *rtt_ns = best_rtt;
  return PP_OK;
}

static PpStatus
mpi_gather_bytes (PpTransport *t, const void *buf, size_t n, void **all, size_t *sizes,
                  PpError *err)
{
  Mpi *m = (Mpi *) t;
  int P = m->base.n_processes, me = m->base.process_rank, rc;
  uint64_t mine = n, *lens = NULL;

  if (n > (size_t) INT32_MAX)
    return pp_error_set (err, PP_EINVAL, "%zu bytes are more than one gather carries", n);
  if (me == 0 && (lens = calloc ((size_t) P, sizeof *lens)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  rc = MPI_Gather (&mine, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, 0, m->control);
  if (rc != MPI_SUCCESS)
    {
      free (lens);
      return mpi_fail (err, "gathering sizes", rc);
    }
  if (me != 0)
    {
      if (n > 0 && (rc = MPI_Send (buf, (int) n, MPI_BYTE, 0, 3, m->control)) != MPI_SUCCESS)
        return mpi_fail (err, "sending to rank 0", rc);
      return PP_OK;
    }
  PpStatus st = PP_OK;
  for (int r = 0; r < P; r++)
    {
      all[r] = NULL;
      sizes[r] = (size_t) lens[r];
    }
  for (int r = 0; r < P && st == PP_OK; r++)
    {
      if (lens[r] == 0)
        continue;
      if ((all[r] = malloc ((size_t) lens[r])) == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory for rank %d's %zu bytes", r,
                             (size_t) lens[r]);
          break;
        }
      if (r == 0)
        memcpy (all[0], buf, n);
      else if ((rc = MPI_Recv (all[r], (int) lens[r], MPI_BYTE, r, 3, m->control,
                               MPI_STATUS_IGNORE)) != MPI_SUCCESS)
        st = mpi_fail (err, "receiving from a rank", rc);
    }
  /* a rank whose bytes could not be taken still sent them: drain */
  for (int r = 1; r < P && st != PP_OK; r++)
    if (lens[r] > 0 && all[r] == NULL)
      {
        void *sink = malloc ((size_t) lens[r]);
        if (sink != NULL)
          MPI_Recv (sink, (int) lens[r], MPI_BYTE, r, 3, m->control, MPI_STATUS_IGNORE);
        free (sink);
      }
  free (lens);
  return st;
}

static void
mpi_free (PpTransport *t)
{
  Mpi *m = (Mpi *) t;
  int fin = 0;

  cancel_receives (m);
  for (int g = 0; g < 2; g++)
    {
      for (int i = 0; m->in[g] != NULL && i < m->n_stages; i++)
        {
          free (m->in[g][i].buf);
          free (m->in[g][i].req);
          free (m->in[g][i].done);
        }
      free (m->in[g]);
      free (m->mine[g]);
    }
  free (m->sends);
  MPI_Finalized (&fin);
  if (!fin)
    {
      MPI_Comm_free (&m->stages);
      MPI_Comm_free (&m->control);
      MPI_Finalize ();
    }
  free (m);
}

/* GPU ranks: their stage data goes through NCCL (pp-transport-nccl.c). */
static PpTransport *
mpi_for_device (PpTransport *t, PpError *err)
{
  return pp_transport_new_nccl (t, err);
}

static const PpTransportOps mpi_ops = {
  .name = "mpi",
  .setup = mpi_setup,
  .step_begin = mpi_step_begin,
  .publish = mpi_publish,
  .acquire = mpi_acquire,
  .interrupt = mpi_interrupt,
  .step_end = mpi_step_end,
  .sum = mpi_sum,
  .send_bytes = mpi_send_bytes,
  .recv_bytes = mpi_recv_bytes,
  .clock_offset = mpi_clock_offset,
  .gather_bytes = mpi_gather_bytes,
  .for_device = mpi_for_device,
  .free = mpi_free,
};

bool
pp_transport_have_mpi (void)
{
  return true;
}

PpTransport *
pp_transport_new_mpi (PpError *err)
{
  int provided = 0, inited = 0, rank = 0, size = 0, flag = 0, *ub = NULL;
  Mpi *m;

  MPI_Initialized (&inited);
  if (!inited && MPI_Init_thread (NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    {
      pp_error_set (err, PP_EIO, "MPI_Init_thread failed");
      return NULL;
    }
  if (!inited && provided < MPI_THREAD_SERIALIZED)
    {
      pp_error_set (err, PP_EUNSUPPORTED,
                    "this MPI cannot be called from more than one thread (MPI_THREAD_SERIALIZED)");
      MPI_Finalize ();
      return NULL;
    }
  m = calloc (1, sizeof *m);
  if (m == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "out of memory");
      MPI_Finalize ();
      return NULL;
    }
  /* errors come back as codes, to become one line; never MPI's abort */
  MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &size);
  MPI_Comm_dup (MPI_COMM_WORLD, &m->stages);
  MPI_Comm_dup (MPI_COMM_WORLD, &m->control);
  MPI_Comm_set_errhandler (m->stages, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler (m->control, MPI_ERRORS_RETURN);
  MPI_Comm_get_attr (MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  m->tag_ub = flag && ub != NULL ? *ub : 32767;
  m->base.ops = &mpi_ops;
  m->base.process_rank = rank;
  m->base.n_processes = size;
  m->base.device = -1;
  return &m->base;
}

#endif /* PP_HAVE_MPI */
