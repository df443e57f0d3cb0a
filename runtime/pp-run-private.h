/* pp-run-private.h — what the schedule walker (pp-run.c) shares with its
 * compute backends (pp-backend-cpu.c, pp-backend-cuda.c): the run's state,
 * a stage's and a rank's, the backend interface, and the few helpers both
 * sides call (pp-run-common.c).  Not for callers of pp-run.h.
 *
 * Who does what
 * -------------
 *  - The walker: ranks and their threads, the step's phases (actions, the
 *    copies' gradient sum, the optimizer, the reports), the order of every
 *    action's halves (its inputs, its works, what it publishes), stop and
 *    failure, recovery's bookkeeping (which micro-batch got how far).
 *  - A backend (a struct of functions chosen at pp_run_new, as libdex picks
 *    its backends): where a part and its buffers live, how a work is
 *    computed and timed, how a stage boundary's data reaches its buffers
 *    through the transport.
 *  - The transport (pp-transport.h): how data crosses a stage boundary.
 *
 * Files call downward only: the walker calls the backends' constructors
 * and the helpers; the backends call the helpers (tests/test-layers.py).
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pp-batch-pool.h"
#include "pp-run.h"
#include "pp-schedstat.h"

#define PP_RUN_WAIT_RECORD_NS 1000LL   /* shorter waits are not worth a span */
#define PP_RUN_EDGE_SKIP_NS   10000LL  /* shorter gaps: no schedstat read at the next start */

/* What a micro-batch of a stage has been through in this step (what
 * recovery must undo after an abandoned one). */
enum { PP_MB_FWD = 1, PP_MB_INPUT = 2, PP_MB_DONE = 4 };

typedef struct {
  int      rank, part, chain, prev, next;
  int      mb_lo, mb_hi, n_mb;
  int      in_dim, out_dim;     /* set by the backend's setup_stage */
  uint8_t *mb_state;            /* [n_mb] PP_MB_*, touched by the owning rank only */

  /* measured: sums of ns and counts over all steps (owning rank only) */
  double   sum_f, sum_b, sum_i, sum_w, sum_x;
  long     n_f, n_b, n_i, n_w, n_x;

  void    *bk;                  /* the backend's: the part, its buffers (NULL elsewhere) */
} PpRunStage;

typedef struct {
  struct _PpRun *run;
  int            rank;
  pthread_t      thread;
  int            started;
  int            completed;  /* ran every action of the step */
  int64_t        busy_ns, wait_ns, first_ns, last_ns;
  /* of the last finished step, for pp_run_rank_times */
  int64_t        last_busy, last_wait, last_first, last_last;
  int           *stages;     /* stages this rank holds */
  int            n_stages;
  void          *bk;         /* the backend's (NULL where none) */
  /* the host between blocks (pp-run-host.c), the rank thread's own */
  bool           host_on;
  PpSchedstat    sched;
  int64_t        host_from, end_edge_ns;
  /* What the rank's thread is in now (pp-run-open.c): the thread stores
   * it, the run's heartbeat thread reads it; a sequence count, odd while
   * the thread writes, keeps the reader from taking half of one. */
  atomic_uint    open_seq;
  atomic_int     open_kind, open_stage, open_mb, open_step, open_peer;
  _Atomic int64_t open_t0;
  atomic_bool    hanging;    /* in the sleep of PpRunConfig.hang */
} PpRunRank;

/* One work of an action (an OVERLAP_F_B has two): its identity and, once
 * its inputs are ready, where they are (the backend's memory). */
typedef struct {
  int            kind;     /* PP_ACT_F, B, I, W */
  int            stage, mb, k;   /* k = mb - the stage's mb_lo */
  const float   *input;    /* F: input rows; B/I: dout (NULL on a tail) */
  const int32_t *labels;   /* F on a tail */
} PpRunWork;

typedef struct _PpRun PpRun;

/* A compute backend.  Members marked "optional" may be NULL. */
typedef struct {
  const char *name;
  /* pp_run_new, before any stage: what the backend needs for the whole
   * run (devices, a batch pool); refuses a transport it cannot run over. */
  PpStatus (*open)         (PpRun *run, PpError *err);
  /* A stage this process runs: its part (blocks [first_block, ...) of its
   * part) and buffers in stage->bk; sets in_dim and out_dim. */
  PpStatus (*setup_stage)  (PpRun *run, int stage, int first_block, PpError *err);
  size_t   (*stage_params) (PpRun *run, int stage);
  /* A rank this process runs, once every stage is set up (optional). */
  PpStatus (*setup_rank)   (PpRun *run, PpRunRank *rk, size_t maxdim, PpError *err);
  /* Once the transport is set up (optional): device links. */
  PpStatus (*setup_links)  (PpRun *run, PpError *err);

  /* A rank's step, on its thread: begin (optional), its actions, end
   * (optional: every queued work has run). */
  PpStatus (*rank_step_begin) (PpRun *run, PpRunRank *rk, PpError *err);
  PpStatus (*rank_step_end)   (PpRun *run, PpRunRank *rk, PpError *err);
  /* w (an F): a head's input rows and a tail's labels from the step's batch. */
  void     (*batch_rows)   (PpRun *run, PpRunWork *w);
  /* w's input from producer stage ps (grad 0: its forward output, 1: its
   * input gradient) through the transport, into w->input.  PP_EIO with no
   * message if the step was abandoned meanwhile. */
  PpStatus (*receive)      (PpRun *run, PpRunRank *rk, PpRunWork *w, int ps, int grad,
                            PpError *err);
  /* An action's n works: begin (its timing starts; no end if it fails),
   * then for each work compute and work_end (its output is published),
   * then end, with the status so far; *t_end: when the action ended, as
   * far as the host knows. */
  PpStatus (*action_begin) (PpRun *run, PpRunRank *rk, const PpAction *a, const PpRunWork *w,
                            int n, PpError *err);
  PpStatus (*compute)      (PpRun *run, PpRunRank *rk, const PpRunWork *w, PpError *err);
  PpStatus (*work_end)     (PpRun *run, PpRunRank *rk, const PpRunWork *w, int i, PpError *err);
  void     (*action_end)   (PpRun *run, PpRunRank *rk, const PpAction *a, PpStatus rc,
                            int64_t *t_end);
  /* Activation bytes and micro-batches in flight of a stage here. */
  void     (*memory)       (PpRun *run, int stage, size_t *bytes, int *inflight);

  /* Main thread, ranks parked: every copy of a part (DualPipe) gets the
   * sum of the copies' gradients. */
  PpStatus (*sum_copies)   (PpRun *run, PpError *err);
  /* A rank's optimizer step, on its thread; ends with pp_run_end_rank_step
   * or pp_run_fail. */
  void     (*optimizer)    (PpRun *run, PpRunRank *rk);
  /* After an abandoned step: release what the parts hold (the stages'
   * mb_state says how far each micro-batch got), zero the gradients. */
  void     (*recover)      (PpRun *run);
  /* A part's parameters (stage here) into out (n floats). */
  void     (*copy_params)  (PpRun *run, int stage, float *out, size_t n);

  /* Reports (optional; the CPU backend has none of them). */
  const char *(*device_note)  (const PpRun *run);
  const char *(*timing_note)  (const PpRun *run);
  void        (*flush_records)(PpRun *run);
  const char *(*span_name)    (const PpRun *run, uint32_t id);
  uint64_t    (*dropped)      (const PpRun *run);
  int         (*rank_sms)     (const PpRun *run, int rank);

  /* pp_run_free, rank threads joined (optional): hand what the devices
   * still hold to the probe. */
  void     (*ranks_joined) (PpRun *run);
  /* pp_run_free: a rank's, a stage's, the run's. */
  void     (*free_rank)    (PpRun *run, PpRunRank *rk);
  void     (*free_stage)   (PpRun *run, PpRunStage *st);
  void     (*close)        (PpRun *run);
} PpRunBackend;

const PpRunBackend *pp_run_backend_cpu (void);
/* NULL in a build without CUDA. */
const PpRunBackend *pp_run_backend_cuda (void);

struct _PpRun {
  PpRunConfig  cfg;
  const PpSchedule *sched;
  const PpRunBackend *backend;
  void        *bk;           /* the backend's */
  PpModel     *model;
  int          P, M, rows, n_parts, n_chains;
  int         *blocks;       /* [n_parts] */
  int         *chain_stage;  /* [n_chains * n_parts]: stage at (chain, position) */
  PpRunStage  *stages;       /* [n_stages] */
  PpRunRank   *ranks;        /* [P] */
  float       *x;            /* [batch * in_dim] */
  int32_t     *labels;       /* [batch] */
  /* The next step's batch, made by the main thread while the ranks take
   * their optimizer step, so no rank waits for data at the next step's start. */
  float       *x_next;
  int32_t     *labels_next;
  int          next_step;    /* the step x_next holds, -1 if none */
  float       *zeros;        /* [rows * max dim] for releasing abandoned micro-batches */
  double      *loss_mb;      /* [M] loss sum per micro-batch */
  int          step;         /* steps completed */
  int          broken;

  pthread_mutex_t mu;
  pthread_cond_t  start, done;
  unsigned long   gen;
  int             remaining;
  int             quit;
  int             task;      /* what a wake-up asks of the ranks */
  atomic_int      abort;
  int             failed;
  PpError         first_err;
  PpTransport    *transport;  /* stage boundaries (cfg.transport, or our local one) */
  int             own_transport;
  int             n_local;    /* ranks this process runs */
  size_t         *part_params;/* [n_parts]: parameters of each part (all processes') */
  /* What the reports give, for every rank and stage of the job: this
   * process's values, summed over the processes at each step's end. */
  double         *shared_rank;/* [P * 4]: busy, wait, first + 1, last + 1 of the last step */
  double         *shared_cost;/* [n_stages * 10]: sum_f,b,i,w,x then n_f,b,i,w,x */
  /* This process's clock against rank 0's (pp_transport clock_offset),
   * measured at the start and again every 2 s of rank 0's. */
  int64_t         clock_offset, clock_rtt, clock_measured_at;
  int             clock_generation;
  PpBatchPool    *pool;       /* made by a backend: the next batch while devices run */
  struct _PpRunHeart *heart;  /* the heartbeat thread (pp-run-open.c), NULL: none */
};

/* ---- helpers (pp-run-common.c) ------------------------------------------ */

/* What a micro-batch has been through once a work of this kind ran on it. */
uint8_t  pp_run_work_done_bits (int kind);
bool     pp_run_stop_requested (const PpRun *run);
/* Abandons the step: every wait wakes. */
void     pp_run_abort_step (PpRun *run);
/* The step's first failure wins; abandons the step. */
void     pp_run_fail (PpRun *run, const PpError *e);
void     pp_run_record_step_span (PpRun *run, int step, int rank, int stage, int mb, int kind,
                                  int64_t t0, int64_t t1, int peer);
void     pp_run_record_span (PpRun *run, int rank, int stage, int mb, int kind, int64_t t0,
                             int64_t t1, int peer);
void     pp_run_record_counter (PpRun *run, int rank, int kind, double value, int64_t t);
/* The probe's span kind of an action kind (OVERLAP_F_B for a pair). */
int      pp_run_span_kind (int act);
/* A compute action's span on the CPU: both halves of an OVERLAP_F_B. */
void     pp_run_record_action_span (PpRun *run, int rank, const PpAction *a, int64_t t0, int64_t t1);
/* Waits until producer stage ps has published mb (grad as in
 * pp-transport.h) through the transport; *data then points at it; the
 * wait counts in rk->wait_ns and, when record, becomes a WAIT span.
 * PP_EINVAL with err for a wait that can never end; PP_EIO without a
 * message when the step was abandoned meanwhile. */
PpStatus pp_run_wait_ready (PpRun *run, PpRunRank *rk, int ps, int grad, int stage, int mb,
                            const float **data, bool record, PpError *err);
/* The end of a rank's step: its optimizer span [t0, t1] and the times the
 * reports give until the next one. */
void     pp_run_end_rank_step (PpRun *run, PpRunRank *rk, int64_t t0, int64_t t1);

/* ---- what each rank is in now (pp-run-open.c) -------------------------- */

/* On the rank's thread: it began kind (a span kind) at t0; a few stores. */
void     pp_run_open_set (PpRunRank *rk, int kind, int stage, int mb, int step, int peer,
                          int64_t t0);
/* On the rank's thread: nothing open since t (when the last action ended). */
void     pp_run_open_clear (PpRunRank *rk, int64_t t);
/* The rank's open action (any thread): kind -1 for none. */
typedef struct { int kind, stage, mb, step, peer; int64_t t0; } PpRunOpen;
void     pp_run_open_get (PpRunRank *rk, PpRunOpen *o);
/* Starts the heartbeat thread (cfg.open_sink set) once the ranks are; stops
 * it, the last frame of each rank saying it closed unless the run was
 * stopped (a stuck run keeps what it was in). */
PpStatus pp_run_open_start (PpRun *run, PpError *err);
void     pp_run_open_stop (PpRun *run);
/* PpRunConfig.hang: rk sleeps here, inside its forward, until the run is
 * stopped; true when it did (the step is then abandoned). */
bool     pp_run_open_hang (PpRun *run, PpRunRank *rk, const PpAction *a);

/* ---- the host between blocks (pp-run-host.c), on the rank's thread ---- */

/* Opens and closes the thread's schedstat; on: record the host's side
 * (a backend that times its blocks on the host: the CPU one). */
void     pp_run_host_open (PpRun *run, PpRunRank *rk, bool on);
void     pp_run_host_close (PpRunRank *rk);
/* What recording took on the calling thread so far, and more of it
 * (pp-run-common.c, whose record helpers time themselves). */
int64_t  pp_run_host_self (void);
void     pp_run_host_add_self (int64_t ns);
/* The step's actions begin; a block's start (just before it); its end
 * (t_end; self_at_end: pp_run_host_self just before the block's own span
 * was recorded). */
void     pp_run_host_step_begin (PpRun *run, PpRunRank *rk);
void     pp_run_host_block_start (PpRun *run, PpRunRank *rk);
void     pp_run_host_block_end (PpRun *run, PpRunRank *rk, int64_t t_end, int64_t self_at_end);
/* A HOST_SCHEDULE span of rk's (t0, t1), where it records the host's side
 * and the span is long enough (pp-run-common.c; pp_run_wait_ready cuts the
 * schedule's pieces at its waits). */
void     pp_run_record_host_schedule (PpRun *run, PpRunRank *rk, int64_t t0, int64_t t1);
