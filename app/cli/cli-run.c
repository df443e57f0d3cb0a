/* pipescope-cli run — trains the bundled network under a schedule with the
 * runtime (runtime/pp-run.h), live by default, and compares the
 * measured bubble with the simulator's prediction from the measured costs. */
#include "cli-commands.h"
#include "cli-common.h"
#include "cli-job.h"
#include "cli-plan.h"

#ifdef PP_HAVE_CUDA
#include "pp-kernels-cuda.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pp-run.h"
#include "pp-model.h"
#include "pp-analysis.h"
#include "pp-why.h"
#include "pp-why-runtime.h"
#include "pp-schedule.h"
#include "pp-simulate.h"

/* pp_run_measured_costs gives nanoseconds. */
#define RUN_SECONDS_PER_COST_UNIT 1e-9
/* The last steps run, per rank busy and per step its window: the one
 * analysis (pp-analysis.h) counts at most PP_ANALYSIS_STEPS of them, and
 * needs one more to tell whether the run's first step is among them. */
#define RUN_WINDOW_MAX (PP_ANALYSIS_STEPS + 1)

static void
run_usage (FILE *out)
{

  fputs ("Usage: pipescope-cli run --schedule NAME --ranks P --microbatches M\n"
         "                         [--stages-per-rank V] [--layers L] [--width D]\n"
         "                         [--batch B] [--steps N] [--lr X] [--seed S]\n"
         "                         [--partition auto|LIST] [--recompute]\n"
         "                         [--backend auto|cpu|cuda] [--trace FILE]\n"
         "                         [--gpu-partition green|streams] [--compute tf32|bf16|fp32]\n"
         "                         [--gpu-transport auto|nccl|copy] [--no-cupti]\n"
         "                         [--no-live] [--listen HOST:PORT] [--pin] [--exact-grads]\n"
         "                         [--save-params FILE] [--name NAME] [--slow RANK:FACTOR]\n"
         "       pipescope-cli run --csv FILE [same options but -s, -p, -m, -v]\n"
         "       mpirun -np P pipescope-cli run --schedule NAME --microbatches M ...\n"
         "\n"
         "Trains the bundled network (a residual MLP on a synthetic, learnable task)\n"
         "with P ranks, one thread each in this process (or, started by mpirun, one\n"
         "process each: P is the MPI world's size, and stage boundaries are MPI\n"
         "messages; --trace FILE then writes FILE.rankR per rank), under the schedule, and\n"
         "records every forward, backward and wait.  While it runs it is a job:\n"
         "registered ('pipescope-cli jobs') and attachable ('pipescope-cli record').\n"
         "It prints the loss, step time and throughput as it goes, then per rank\n"
         "the measured bubble, the simulator's prediction from the measured costs\n"
         "and the closed form (GPipe, 1F1B, Interleaved1F1B).\n"
         "\n"
         "  -s, --schedule NAME        schedule (names are case-insensitive)\n"         "      --name NAME            the job's name for jobs, record and the app (default\n"
         "                             SCHEDULE-PID; under mpirun rank R is NAME.rR)\n"
         "  -p, --ranks P              pipeline ranks\n"
         "  -m, --microbatches M       micro-batches per step\n"
         "  -v, --stages-per-rank V    model chunks per rank (interleaved schedules)\n"
         "      --layers L             residual blocks (default 8), split over the stages\n"
         "      --width D              model width (default 64); hidden width 4D\n"
         "      --batch B              rows per step, a multiple of M (default 4M)\n"
         "      --steps N              training steps (default 100)\n"
         "      --lr X                 AdamW learning rate (default 1e-3)\n"
         "      --seed S               weights, teacher and data seed (default 1)\n"
         "      --partition auto|LIST  blocks per part: auto (balance the estimated cost,\n"
         "                             default) or a comma list summing to L (\"3,2,3\")\n"
         "      --recompute            keep only each part's input; recompute the\n"
         "                             forward in the backward\n"
         "      --backend auto|cpu|cuda\n"
         "                             where to compute; auto uses the GPUs when this\n"
         "                             build has CUDA and the machine a GPU, else the\n"
         "                             CPU (saying why in one line); cuda insists\n"
         "      --gpu-partition green|streams|auto\n"
         "                             with fewer GPUs than ranks: green gives each rank\n"
         "                             its own SMs (CUDA green contexts), streams lets\n"
         "                             the ranks share every SM; auto (default): green\n"
         "                             where the driver offers it, else streams\n"
         "      --compute tf32|bf16|fp32\n"
         "                             GEMM compute type on the GPU (default tf32;\n"
         "                             bf16 rounds both operands to bf16 and sums in\n"
         "                             fp32); weights, gradients and Adam stay fp32\n"
         "      --gpu-transport auto|nccl|copy\n"
         "                             stage boundaries: auto (default) sends through\n"
         "                             NCCL between GPUs and copies within one GPU\n"
         "                             (ordered by events); nccl also within one GPU;\n"
         "                             copy never uses NCCL (peer copies)\n"
         "      --no-cupti             on the GPU, time blocks with CUDA events only\n"
         "                             (no kernel spans)\n"
         "      --trace FILE           also write the trace to FILE\n"
         "      --no-live              do not register or serve the job\n"
         "      --listen HOST:PORT     also serve on TCP (port 0: any); a viewer needs\n"
         "                             the token printed at start\n"
         "      --csv FILE             run a custom order: PyTorch's compute_only CSV\n"
         "                             (as 'pipescope-cli schedule -f csv' writes it);\n"
         "                             it sets P, M and V\n"
         "      --exact-grads          sum micro-batch gradients in double, so every\n"
         "                             schedule takes bit for bit the same step (slower)\n"
         "      --slow RANK:FACTOR     make a straggler on purpose: pipeline rank RANK's\n"
         "                             compute takes FACTOR (1 to 100) times as long\n"
         "                             (CPU backend; threads and MPI): see\n"
         "                             docs/stragglers.md\n"
         "      --hang RANK[:STEP]     make a stuck rank on purpose: pipeline rank RANK\n"
         "                             sleeps inside its first forward of step STEP\n"
         "                             (from 0; default 1) until the run is stopped\n"
         "                             (threads and MPI; under mpirun, `pipescope-cli\n"
         "                             profile --hang-after S` says where): see\n"
         "                             docs/stuck.md\n"
         "      --pin                  pin rank r's thread to CPU r mod the number of\n"
         "                             CPUs (steadier timings on an otherwise idle\n"
         "                             machine with at least P cores; off by default)\n"
         "\n"
         "A step line: every step for N <= 20, else step 1, every N/20 steps and the\n"
         "last.  The trace gets the description, the plan (after steps 1 and 3, and\n"
         "again at the end, with the simulator's timeline under the measured costs),\n"
         "every span and counter, and step markers per rank.\n"
         "\n"
         "Ctrl-C (SIGINT) or SIGTERM stops cleanly: the current step is abandoned,\n"
         "'stopped after N steps' is printed with the summary of the steps done, the\n"
         "trace file is closed (readable), the job leaves the registry, and the exit\n"
         "status is 0.  A request that cannot run (a schedule that rejects P, M or\n"
         "V, fewer layers than stages, a batch the micro-batches do not divide, a bad\n"
         "partition, more memory than the machine has free) exits 2 before any work.\n"
         "\n"
         "Schedules:\n", out);
  pp_cli_print_schedules (out);
}

static int
memory_refusal (double need, double avail)
{
  return pp_cli_usage_error ("needs about %.1f GiB, the machine has %.1f GiB free; lower --width, "
                             "--layers, --batch or --microbatches",
                             need / (1024.0 * 1024.0 * 1024.0), avail / (1024.0 * 1024.0 * 1024.0));
}

/* ---- what the probe delivers, per rank and step (drain thread) ------------------- */

typedef struct {
  int32_t step;                 /* the step these are for; -1: none */
  int64_t first, last;          /* any span: first start, last end */
  int64_t cfirst, clast;        /* compute spans */
  int64_t busy;                 /* compute time */
  bool    any, cany;
} RankStep;

typedef struct {
  pthread_mutex_t lock;
  int             ranks;
  RankStep       *r;            /* [ranks] */
} Tap;

static void
tap_spans (void *user, const PpSpan *spans, size_t n)
{
  Tap *t = user;

  pthread_mutex_lock (&t->lock);
  for (size_t i = 0; i < n; i++)
    {
      const PpSpan *sp = &spans[i];
      RankStep *rs;

      if (sp->rank < 0 || sp->rank >= t->ranks || sp->kind == PP_SPAN_KERNEL
          || sp->kind == PP_SPAN_MEMCPY || sp->kind == PP_SPAN_MEMSET || sp->kind == PP_SPAN_LAUNCH)
        continue;
      rs = &t->r[sp->rank];
      if (rs->step != sp->step)
        {
          memset (rs, 0, sizeof *rs);
          rs->step = sp->step;
        }
      if (!rs->any || sp->start_ns < rs->first) rs->first = sp->start_ns;
      if (!rs->any || sp->end_ns > rs->last) rs->last = sp->end_ns;
      rs->any = true;
      /* the whole step's work (pp-analysis.h): its blocks and its
       * optimizer step, as every view measures it */
      if (pp_analysis_span_counts (sp->kind))
        {
          if (!rs->cany || sp->start_ns < rs->cfirst) rs->cfirst = sp->start_ns;
          if (!rs->cany || sp->end_ns > rs->clast) rs->clast = sp->end_ns;
          rs->cany = true;
          rs->busy += sp->end_ns - sp->start_ns;
        }
    }
  pthread_mutex_unlock (&t->lock);
}

/* ---- the Why split ---------------------------------------------------------------- */

/* The Why split of the trace this run wrote, closed, as `info` prints it:
 * the one analysis over its spans and block-edge counters
 * (pp_why_analyse_trace), so runtime's parts are measured and equal
 * info's on the same file. */
static void
print_why_of_trace (const char *path)
{
  PpWhyReport *rep = NULL;
  PpWhyChange ch;
  PpError e = { 0 };

  if (pp_why_analyse_trace (path, 0, &rep, &ch, NULL, &e) != PP_OK)
    {
      printf ("\nidle by cause: n/a (%s)\n", e.msg);
      return;
    }
  printf ("\nidle by cause (a step, the mean over the %d step%s analysed; read back from %s as `info` reads it):\n",
          rep->n_steps, rep->n_steps == 1 ? "" : "s", path);
  pp_why_print_idle (stdout, rep->idle, rep->ranks, 1e3, "ms");
  pp_why_print_runtime_parts (stdout, rep->idle, rep->ranks, 1e3, "ms");
  pp_why_print_change (stdout, &ch, 1e3, "ms");
  pp_why_report_free (rep);
}

/* ---- trace items written from the main thread ---------------------------------- */

typedef struct {
  const PpTraceDescription *desc;
  const PpSchedule         *s;
  const PpTransport        *transport;   /* NULL: every rank here */
} Header;

static PpStatus
write_header (PpTraceWriter *w, void *user, PpError *err)
{
  const Header *h = user;
  if (pp_trace_write_description (w, h->desc, err) != PP_OK)
    return err->status;
  /* where this process's ranks run: all of them, or its one under MPI */
  for (int r = 0; r < h->s->ranks; r++)
    if ((h->transport == NULL || h->transport->process_rank == r)
        && pp_trace_write_rank (w, r, (int32_t) getpid (), h->desc->host, err) != PP_OK)
      return err->status;
  /* The order only: the times come after the first step, measured. */
  return pp_cli_write_plan (w, h->s, NULL, 0, err);
}

typedef struct {
  const PpSchedule   *s;
  const PpSimulation *sim;
} Plan;

static PpStatus
write_plan (PpTraceWriter *w, void *user, PpError *err)
{
  const Plan *p = user;
  return pp_cli_write_plan (w, p->s, p->sim, RUN_SECONDS_PER_COST_UNIT, err);
}

typedef struct {
  int            ranks, step;
  const int64_t *begin, *end;   /* [ranks] */
} Markers;

static PpStatus
write_markers (PpTraceWriter *w, void *user, PpError *err)
{
  const Markers *m = user;
  for (int r = 0; r < m->ranks; r++)
    if (m->begin[r] >= 0   /* -1: another process's rank */
        && (pp_trace_write_step_marker (w, r, m->step, PP_TRACE_STEP_BEGIN, m->begin[r], err) != PP_OK
            || pp_trace_write_step_marker (w, r, m->step, PP_TRACE_STEP_END, m->end[r], err) != PP_OK))
      return err->status;
  return PP_OK;
}

/* This process's rank's clock against rank 0's (MPI: ranks on other hosts). */
typedef struct {
  int32_t rank;
  int64_t offset_ns;
} Clock;

static PpStatus
write_clock (PpTraceWriter *w, void *user, PpError *err)
{
  const Clock *c = user;
  return pp_trace_write_clock_offset (w, c->rank, c->offset_ns, err);
}

/* A CLOCK_OFFSET frame each time the run measured the clocks again. */
static int
write_new_clock (PpCliJob *job, const PpRun *run, const PpTransport *transport, int *generation)
{
  int64_t off = 0;
  int g = pp_run_clock_offset (run, &off, NULL);
  if (transport == NULL || g == *generation)
    return 0;
  *generation = g;
  Clock c = { transport->process_rank, off };
  return pp_cli_job_write (job, write_clock, &c);
}

/* The names of span name_ids [from, to) (CUPTI's kernel names). */
typedef struct {
  const PpRun *run;
  uint32_t     from, to;
} Names;

static PpStatus
write_names (PpTraceWriter *w, void *user, PpError *err)
{
  const Names *n = user;
  for (uint32_t id = n->from; id < n->to; id++)
    {
      const char *name = pp_run_span_name (n->run, id);
      if (name == NULL)
        continue;
      if (pp_trace_write_string_cut (w, id, name, err) != PP_OK)
        return err->status;
    }
  return PP_OK;
}

/* Writes the names the run interned since the last call (kernel names of
 * a GPU run's spans), so that readers can show them. */
static int
write_new_names (PpCliJob *job, const PpRun *run, uint32_t *next)
{
  Names n = { run, *next, *next };
  while (pp_run_span_name (run, n.to) != NULL)
    n.to++;
  if (n.to == n.from)
    return 0;
  *next = n.to;
  return pp_cli_job_write (job, write_names, &n);
}

/* The simulator's timeline under the run's measured costs (NULL if it
 * cannot). */
static PpSimulation *
simulate_measured (const PpRun *run, const PpSchedule *s)
{
  PpCostModel *cm = pp_run_measured_costs (run);
  PpSimulation *sim = NULL;
  PpError err = { 0 };

  if (cm == NULL)
    return NULL;
  if (pp_simulate (s, cm, &sim, &err) != PP_OK)
    sim = NULL;
  pp_cost_model_free (cm);
  return sim;
}

/* ---- the command ------------------------------------------------------------------ */

enum {
  OPT_LAYERS = 256, OPT_WIDTH, OPT_BATCH, OPT_STEPS, OPT_LR, OPT_SEED, OPT_PARTITION,
  OPT_RECOMPUTE, OPT_BACKEND, OPT_TRACE, OPT_NO_LIVE, OPT_LISTEN, OPT_PIN, OPT_CSV,
  OPT_EXACT_GRADS,
  OPT_GPU_PARTITION,
  OPT_COMPUTE,
  OPT_NO_CUPTI,
  OPT_GPU_TRANSPORT,
  OPT_SAVE_PARAMS,
  OPT_NAME,
  OPT_SLOW,
  OPT_HANG,
};

/* ---- what each rank is doing now (issue 37): the run's heartbeat thread --------- */

static PpStatus
write_open (PpTraceWriter *w, void *user, PpError *err)
{
  return pp_trace_write_open (w, user, err);
}

/* PpRunConfig.open_sink: each rank's OPEN frame to the job's writers;
 * says once where --hang made a rank stop. */
static int
open_to_job (void *user, const PpTraceOpen *o)
{
  static atomic_bool said;
  if (o->where[0] && o->kind >= 0 && !atomic_exchange (&said, true))
    fprintf (stderr, "pipescope-cli: --hang: pipeline rank %d sleeps in its forward of micro-batch %d of "
             "step %d until the run is stopped\n", o->rank, o->microbatch, o->step);
  return pp_cli_job_write (user, write_open, (void *) o);
}

/* ---- MPI: rank 0's live stream serves every rank (the collector) ---------- */

/* Rank 0: a stream reader per other rank over what it hands over at each
 * step's end. */
typedef struct {
  PpTraceReader **readers;   /* [n] */
  int             n;
  uint64_t        spans, bytes;
  int64_t         ns;        /* rank 0's time spent collecting */
} Collector;

static void
collector_clear (Collector *c)
{
  for (int r = 0; r < c->n; r++)
    pp_trace_reader_free (c->readers[r]);
  free (c->readers);
  memset (c, 0, sizeof *c);
}

typedef struct {
  Collector     *c;
  PpTraceReader *reader;
  int            rank;
} Forward;

/* Writes what a rank's reader holds into rank 0's live stream: not its
 * description or plans (rank 0's describe the job and plan every rank);
 * its span names under ids of its own (rank << 24 | id). */
static PpStatus
forward_items (PpTraceWriter *w, void *user, PpError *err)
{
  Forward *f = user;
  PpTraceItem it;
  for (;;)
    {
      if (pp_trace_reader_next (f->reader, &it, err) != PP_OK)
        return err->status;
      if (it.type == PP_TRACE_ITEM_END)
        return PP_OK;
      if (it.type == PP_TRACE_ITEM_DESCRIPTION || it.type == PP_TRACE_ITEM_PLAN)
        continue;
      if (it.type == PP_TRACE_ITEM_STRING)
        {
          if (it.string.id >= (1u << 24))
            continue;
          it.string.id |= (uint32_t) f->rank << 24;
        }
      else if (it.type == PP_TRACE_ITEM_SPAN)
        {
          it.span.name_id = it.span.name_id < (1u << 24) && it.span.name_id != 0
                            ? it.span.name_id | (uint32_t) f->rank << 24 : 0;
          f->c->spans++;
        }
      if (pp_trace_write_item (w, &it, err) != PP_OK)
        return err->status;
    }
}

/* Every step's end, every process: the ranks hand rank 0 what they
 * recorded; rank 0 serves it on its live stream.  0, or 1 with one line. */
static int
collect_step (Collector *c, PpCliJob *job, PpTransport *t)
{
  PpError err = { 0 };
  int P = t->n_processes, status = 0;
  void **all;
  size_t *sizes;

  if (t->process_rank != 0)
    {
      unsigned char *mine = NULL;
      size_t n = 0;
      pp_cli_job_take_collected (job, &mine, &n);
      PpStatus rc = t->ops->gather_bytes (t, mine, n, NULL, NULL, &err);
      free (mine);
      if (rc != PP_OK)
        fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return rc == PP_OK ? 0 : 1;
    }
  int64_t t0 = pp_cli_now_ns ();
  if (c->readers == NULL)
    {
      if ((c->readers = calloc ((size_t) P, sizeof *c->readers)) == NULL)
        return 1;
      c->n = P;
    }
  all = calloc ((size_t) P, sizeof *all);
  sizes = calloc ((size_t) P, sizeof *sizes);
  if (all == NULL || sizes == NULL || t->ops->gather_bytes (t, NULL, 0, all, sizes, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: collecting the ranks' records: %s\n",
               err.msg[0] ? err.msg : "out of memory");
      status = 1;
    }
  for (int r = 1; r < P && status == 0; r++)
    {
      Forward f = { c, NULL, r };
      if (sizes[r] == 0)
        continue;
      if (c->readers[r] == NULL && (c->readers[r] = pp_trace_reader_new_stream (&err)) == NULL)
        {
          status = 1;
          break;
        }
      f.reader = c->readers[r];
      c->bytes += sizes[r];
      /* in pieces: a stream reader takes one frame's worth at a time */
      for (size_t off = 0; off < sizes[r] && status == 0; off += 1u << 20)
        {
          size_t piece = sizes[r] - off < (1u << 20) ? sizes[r] - off : (1u << 20);
          if (pp_trace_reader_feed (f.reader, (unsigned char *) all[r] + off, piece, &err) != PP_OK
              || pp_cli_job_write_live (job, forward_items, &f) != 0)
            {
              fprintf (stderr, "pipescope-cli: error: rank %d's records: %s\n", r, err.msg);
              status = 1;
            }
        }
    }
  for (int r = 0; all != NULL && r < P; r++)
    free (all[r]);
  free (all);
  free (sizes);
  c->ns += pp_cli_now_ns () - t0;
  return status;
}

/* --save-params: the weights as raw floats (native order), in the whole
 * model's order; under MPI gathered from every process, written by rank 0.
 * For checking that two runs trained to the same bits (cmp). */
static int
save_run_params (PpRun *run, const char *path, const PpTransport *transport)
{
  size_t n = pp_run_n_params (run);
  float *w = malloc ((n ? n : 1) * sizeof (float));
  PpError err = { 0 };
  FILE *f;
  int status = 1;

  if (w == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      return 1;
    }
  if (pp_run_copy_params (run, w, &err) != PP_OK)
    fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
  else if (transport != NULL && transport->process_rank > 0)
    status = 0;
  else if ((f = fopen (path, "wb")) == NULL)
    fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, strerror (errno));
  else
    {
      status = fwrite (w, sizeof (float), n, f) == n ? 0 : 1;
      if (fclose (f) != 0)
        status = 1;
      if (status != 0)
        fprintf (stderr, "pipescope-cli: error: %s: cannot write the parameters\n", path);
    }
  free (w);
  return status;
}

int
pp_cli_run (int argc, char **argv)
{
  static const struct option options[] = {
    { "schedule", required_argument, NULL, 's' },
    { "ranks", required_argument, NULL, 'p' },
    { "microbatches", required_argument, NULL, 'm' },
    { "stages-per-rank", required_argument, NULL, 'v' },
    { "layers", required_argument, NULL, OPT_LAYERS },
    { "width", required_argument, NULL, OPT_WIDTH },
    { "batch", required_argument, NULL, OPT_BATCH },
    { "steps", required_argument, NULL, OPT_STEPS },
    { "lr", required_argument, NULL, OPT_LR },
    { "seed", required_argument, NULL, OPT_SEED },
    { "partition", required_argument, NULL, OPT_PARTITION },
    { "recompute", no_argument, NULL, OPT_RECOMPUTE },
    { "backend", required_argument, NULL, OPT_BACKEND },
    { "trace", required_argument, NULL, OPT_TRACE },
    { "no-live", no_argument, NULL, OPT_NO_LIVE },
    { "listen", required_argument, NULL, OPT_LISTEN },
    { "pin", no_argument, NULL, OPT_PIN },
    { "csv", required_argument, NULL, OPT_CSV },
    { "exact-grads", no_argument, NULL, OPT_EXACT_GRADS },
    { "gpu-partition", required_argument, NULL, OPT_GPU_PARTITION },
    { "compute", required_argument, NULL, OPT_COMPUTE },
    { "no-cupti", no_argument, NULL, OPT_NO_CUPTI },
    { "gpu-transport", required_argument, NULL, OPT_GPU_TRANSPORT },
    { "save-params", required_argument, NULL, OPT_SAVE_PARAMS },
    { "name", required_argument, NULL, OPT_NAME },
    { "slow", required_argument, NULL, OPT_SLOW },
    { "hang", required_argument, NULL, OPT_HANG },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *name = NULL, *csv = NULL, *partition = NULL, *backend = "auto", *trace = NULL, *listen = NULL;
  const char *save_params = NULL, *name_arg = NULL;
  PpTransport *transport = NULL;   /* MPI: this process is one rank of the job */
  char rank_trace[4096];
  int P = 0, M = 0, V = 0, L = 8, D = 64, B = 0, N = 100, opt;
  bool recompute = false, live = true, pin = false, exact_grads = false, no_cupti = false;
  int slow_rank = -1;
  int hang_rank = -1, hang_step = 1;
  double slow_factor = 0;
  int gpu_partition = PP_RUN_GPU_AUTO, compute = PP_RUN_COMPUTE_TF32, use_cuda = 0;
  int shared_cores = 0;   /* > 0: the rank threads share this many cores */
  int gpu_transport = PP_RUN_TRANSPORT_AUTO;
  uint32_t next_name = 1;   /* the first span name not yet written */
  int clock_generation = 0; /* the last clock measurement written */
  bool collect = false;     /* MPI: rank 0 serves every rank's records live */
  bool why_from_trace = false; /* the Why split is read back from the trace written */
  Collector col;
  double lr = 1e-3;
  uint64_t seed = 1;
  PpError err = { 0 };
  PpSchedule *s = NULL;
  PpCostModel *ucm = NULL;
  PpSimulation *usim = NULL, *msim = NULL;
  PpModel *model = NULL;
  PpRun *run = NULL;
  PpCliJob job;
  Tap tap;
  PpTraceDescription desc;
  int *blocks = NULL, *part_of_stage = NULL;
  int n_parts = 0, n_chains = 0, status = 1, done = 0, every;
  bool stopped = false, tap_init = false;
  /* The last RUN_WINDOW_MAX steps: per rank busy and per step makespan and seconds. */
  int64_t (*win_busy)[RUN_WINDOW_MAX] = NULL;
  int64_t win_span[RUN_WINDOW_MAX];
  int64_t *mbegin = NULL, *mend = NULL;
  double first_loss = NAN, last_loss = NAN;
  int32_t win_step[RUN_WINDOW_MAX];   /* each slot's step number */

  memset (&job, 0, sizeof job);
  memset (&col, 0, sizeof col);
  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":s:p:m:v:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 's': name = optarg; break;
        case 'p':
        case 'm':
        case 'v':
          if (!pp_cli_shape_option (opt, optarg, &P, &M, &V))
            return 2;
          break;
        case OPT_LAYERS:
          if (!pp_cli_parse_int (optarg, 1, 1 << 20, &L))
            return pp_cli_usage_error ("--layers takes a whole number from 1 to %d (got '%s')", 1 << 20, optarg);
          break;
        case OPT_WIDTH:
          if (!pp_cli_parse_int (optarg, 1, 1 << 24, &D))
            return pp_cli_usage_error ("--width takes a whole number from 1 to %d (got '%s')", 1 << 24, optarg);
          break;
        case OPT_BATCH:
          if (!pp_cli_parse_int (optarg, 1, 1 << 24, &B))
            return pp_cli_usage_error ("--batch takes a whole number from 1 to %d (got '%s')", 1 << 24, optarg);
          break;
        case OPT_STEPS:
          if (!pp_cli_parse_int (optarg, 1, INT_MAX, &N))
            return pp_cli_usage_error ("--steps takes a whole number from 1 to %d (got '%s')", INT_MAX, optarg);
          break;
        case OPT_LR:
          {
            char *end;
            errno = 0;
            lr = strtod (optarg, &end);
            if (end == optarg || *end != '\0' || errno != 0 || !(lr > 0) || lr > 1e3)
              return pp_cli_usage_error ("--lr takes a number above 0 (got '%s')", optarg);
          }
          break;
        case OPT_SEED:
          {
            char *end;
            errno = 0;
            unsigned long long v = strtoull (optarg, &end, 10);
            if (end == optarg || *end != '\0' || errno != 0 || optarg[0] == '-')
              return pp_cli_usage_error ("--seed takes a whole number from 0 to %llu (got '%s')",
                                         (unsigned long long) UINT64_MAX, optarg);
            seed = v;
          }
          break;
        case OPT_PARTITION: partition = optarg; break;
        case OPT_RECOMPUTE: recompute = true; break;
        case OPT_BACKEND:
          if (strcmp (optarg, "auto") != 0 && strcmp (optarg, "cpu") != 0 && strcmp (optarg, "cuda") != 0)
            return pp_cli_usage_error ("unknown backend '%s'; use auto, cpu or cuda", optarg);
          backend = optarg;
          break;
        case OPT_TRACE: trace = optarg; break;
        case OPT_NO_LIVE: live = false; break;
        case OPT_LISTEN: listen = optarg; break;
        case OPT_PIN: pin = true; break;
        case OPT_CSV: csv = optarg; break;
        case OPT_EXACT_GRADS: exact_grads = true; break;
        case OPT_SLOW:
          {
            char *end;
            errno = 0;
            long r = strtol (optarg, &end, 10);
            double f = 0;
            if (end != optarg && *end == ':')
              {
                const char *fs = end + 1;
                f = strtod (fs, &end);
                if (end == fs)
                  f = 0;
              }
            if (errno != 0 || *end != '\0' || r < 0 || r > INT_MAX || !(f >= 1 && f <= 100))
              return pp_cli_usage_error ("--slow takes RANK:FACTOR, a pipeline rank and a factor from 1 to 100 "
                                         "(got '%s')", optarg);
            slow_rank = (int) r;
            slow_factor = f;
          }
          break;
        case OPT_HANG:
          {
            char *end;
            errno = 0;
            long r = strtol (optarg, &end, 10), st = 1;
            if (end != optarg && *end == ':')
              {
                const char *ss = end + 1;
                st = strtol (ss, &end, 10);
                if (end == ss)
                  st = -1;
              }
            if (errno != 0 || end == optarg || *end != '\0' || r < 0 || r > INT_MAX || st < 0 || st > INT_MAX)
              return pp_cli_usage_error ("--hang takes RANK[:STEP], a pipeline rank and a step from 0 "
                                         "(got '%s')", optarg);
            hang_rank = (int) r;
            hang_step = (int) st;
          }
          break;
        case OPT_GPU_PARTITION:
          if (strcmp (optarg, "green") == 0) gpu_partition = PP_RUN_GPU_GREEN;
          else if (strcmp (optarg, "streams") == 0) gpu_partition = PP_RUN_GPU_STREAMS;
          else if (strcmp (optarg, "auto") == 0) gpu_partition = PP_RUN_GPU_AUTO;
          else
            return pp_cli_usage_error ("unknown --gpu-partition '%s'; use green, streams or auto", optarg);
          break;
        case OPT_COMPUTE:
          if (strcmp (optarg, "tf32") == 0) compute = PP_RUN_COMPUTE_TF32;
          else if (strcmp (optarg, "fp32") == 0) compute = PP_RUN_COMPUTE_FP32;
          else if (strcmp (optarg, "bf16") == 0) compute = PP_RUN_COMPUTE_BF16;
          else
            return pp_cli_usage_error ("unknown --compute '%s'; use tf32, bf16 or fp32", optarg);
          break;
        case OPT_NO_CUPTI: no_cupti = true; break;
        case OPT_SAVE_PARAMS: save_params = optarg; break;
        case OPT_NAME:
          if (strlen (optarg) < 1 || strlen (optarg) > 48 || strspn (optarg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen (optarg) || optarg[0] == '.')
            return pp_cli_usage_error ("--name takes 1 to 48 letters, digits, '.', '_' or '-' (got '%s')",
                                       optarg);
          name_arg = optarg;
          break;
        case OPT_GPU_TRANSPORT:
          if (strcmp (optarg, "auto") == 0) gpu_transport = PP_RUN_TRANSPORT_AUTO;
          else if (strcmp (optarg, "copy") == 0) gpu_transport = PP_RUN_TRANSPORT_COPY;
          else if (strcmp (optarg, "nccl") == 0) gpu_transport = PP_RUN_TRANSPORT_NCCL;
          else
            return pp_cli_usage_error ("unknown --gpu-transport '%s'; use auto, nccl or copy", optarg);
          break;
        case 'h':
          run_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli run --help'", argv[optind - 1]);
        }
    }
  if (optind < argc)
    return pp_cli_usage_error ("unexpected argument '%s'; see 'pipescope-cli run --help'", argv[optind]);
  if (csv != NULL)
    {
      /* A custom order (PyTorch's compute_only CSV) brings its own P, M, V. */
      FILE *in;
      if (name != NULL || P != 0 || M != 0 || V != 0)
        return pp_cli_usage_error ("--csv takes the ranks, stages and micro-batches from the file; "
                                   "drop --schedule, --ranks, --microbatches and --stages-per-rank");
      if ((in = fopen (csv, "r")) == NULL)
        return pp_cli_usage_error ("cannot open '%s': %s", csv, strerror (errno));
      PpStatus rs = pp_schedule_read_csv (in, "custom", &s, &err);
      fclose (in);
      if (rs != PP_OK)
        return pp_cli_usage_error ("%s: %s", csv, err.msg);
      name = "custom";
      P = s->ranks;
      M = s->microbatches;
      V = s->stages_per_rank;
    }
  if (name == NULL)
    return pp_cli_usage_error ("--schedule is required (or --csv FILE); see 'pipescope-cli run --help'");
  if (pp_transport_launched_by_mpi ())
    {
      /* Started by mpirun: the world is the ranks, one per process. */
      if ((transport = pp_transport_new_mpi (&err)) == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          return 1;
        }
      if (transport->n_processes < 2)
        {
          pp_transport_free (transport);   /* one process: its ranks are threads */
          transport = NULL;
        }
      else if (P != 0 && P != transport->n_processes)
        {
          status = pp_cli_usage_error ("--ranks %d disagrees with the %d processes mpirun started; "
                                       "drop --ranks (under mpirun the ranks are the processes)",
                                       P, transport->n_processes);
          pp_transport_free (transport);
          return status;
        }
      else
        {
          P = transport->n_processes;
          if (transport->process_rank > 0 && freopen ("/dev/null", "w", stdout) == NULL)
            return 1;   /* rank 0 reports; the others' errors still reach stderr */
          if (transport->process_rank > 0)
            listen = NULL;   /* rank 0's address serves the whole job */
          if (trace != NULL)
            {
              /* one file per rank: run.pptrace -> run.rank1.pptrace */
              const char *dot = strrchr (trace, '.'), *slash = strrchr (trace, '/');
              int stem = dot != NULL && (slash == NULL || dot > slash) ? (int) (dot - trace)
                                                                       : (int) strlen (trace);
              snprintf (rank_trace, sizeof rank_trace, "%.*s.rank%d%s", stem, trace,
                        transport->process_rank, trace + stem);
              trace = rank_trace;
            }
        }
    }
  /* under `pipescope-cli profile` (it names its job in PIPESCOPE_JOB): each
   * MPI process is a rank of profile's job, its trace profile's to merge */
  const char *profiled = transport != NULL ? getenv ("PIPESCOPE_JOB") : NULL;
  if (profiled != NULL && profiled[0] == '\0')
    profiled = NULL;
  if (P == 0)
    return pp_cli_usage_error ("--ranks is required");
  if (M == 0)
    return pp_cli_usage_error ("--microbatches is required");
  if (!live && listen != NULL)
    return pp_cli_usage_error ("--listen serves the job live; drop --no-live or --listen");
  /* Where to compute: cuda needs a GPU (one line and exit 2 without one);
   * auto trains on the GPUs when there are any, else on the CPU, and a CUDA
   * build says once why it did not use a GPU. */
  char backend_note[PP_ERROR_MSG_MAX] = "";
  {
    char why[PP_ERROR_MSG_MAX] = "";
#ifdef PP_HAVE_CUDA
    int n_gpus = 0;
    PpError gerr = { 0 };
    if (strcmp (backend, "cpu") != 0)
      {
        if (pp_cuda_device_count (&n_gpus, &gerr) == PP_OK && n_gpus > 0)
          use_cuda = 1;
        else
          snprintf (why, sizeof why, "%s", gerr.msg[0] ? gerr.msg : "no CUDA device");
      }
#else
    snprintf (why, sizeof why, "this build has no CUDA support");
#endif
    if (strcmp (backend, "cuda") == 0 && !use_cuda)
      return pp_cli_usage_error ("--backend cuda: %s; use --backend cpu", why);
#ifdef PP_HAVE_CUDA
    if (strcmp (backend, "auto") == 0 && !use_cuda)   /* said once the request is accepted */
      snprintf (backend_note, sizeof backend_note, "pipescope-cli: %s; using the CPU backend", why);
#endif
  }
  if (use_cuda && exact_grads)
    {
      /* exact (double) gradient sums are a CPU-backend feature */
      if (strcmp (backend, "cuda") == 0)
        return pp_cli_usage_error ("--exact-grads is for the CPU backend (the GPU sums in float); "
                                   "use --backend cpu or drop --exact-grads");
      use_cuda = 0;
      snprintf (backend_note, sizeof backend_note,
                "pipescope-cli: --exact-grads sums in double on the CPU; using the CPU backend");
    }
  if (hang_rank >= P)
    return pp_cli_usage_error ("--hang %d: the job has pipeline ranks 0 to %d", hang_rank, P - 1);
  if (slow_rank >= P)
    return pp_cli_usage_error ("--slow %d: the job has pipeline ranks 0 to %d", slow_rank, P - 1);
  if (use_cuda && slow_rank >= 0)
    {
      /* the slow rank sleeps inside its blocks: the CPU backend's compute */
      if (strcmp (backend, "cuda") == 0)
        return pp_cli_usage_error ("--slow is for the CPU backend (a GPU computes asynchronously); "
                                   "use --backend cpu or drop --slow");
      use_cuda = 0;
      snprintf (backend_note, sizeof backend_note,
                "pipescope-cli: --slow stretches the CPU backend's compute; using the CPU backend");
    }
  if (partition != NULL && strcmp (partition, "auto") == 0)
    partition = NULL;
  if (B == 0)
    B = 4 * M;   /* a multiple of M */
  if (B % M != 0)
    {
      int lo = B / M * M, hi = lo + M;
      if (lo > 0)
        return pp_cli_usage_error ("--batch %d is not a multiple of --microbatches %d; use --batch %d or %d",
                                   B, M, lo, hi);
      return pp_cli_usage_error ("--batch %d is not a multiple of --microbatches %d; use --batch %d",
                                 B, M, hi);
    }

  /* Refused before anything is built or started: a schedule that cannot fit
   * (it, two simulations of it and the run's share per action), and more
   * rank threads than this process may start. */
  if (s == NULL && pp_schedule_check_size (name, P, M, V, 2 * PP_SCHEDULE_BYTES_PER_ACTION, &err) != PP_OK)
    return pp_cli_usage_error ("%s", err.msg);
  {
    char why[128];
    int threads = transport != NULL ? 1 : P, most = pp_cli_threads_max (why, sizeof why);
    if (threads > most)
      return pp_cli_usage_error ("%d ranks need %d threads; this process may start %d (%s); lower --ranks",
                                 P, threads, most, why);
  }
  if (s == NULL && pp_schedule_generate (name, P, M, V, &s, &err) != PP_OK)
    return pp_cli_usage_error ("%s", err.msg);

  /* Parts: the stages of one chain (DualPipe's second chain holds a copy). */
  part_of_stage = calloc ((size_t) s->n_stages, sizeof *part_of_stage);
  if (part_of_stage == NULL)
    goto oom;
  for (int st = 0; st < s->n_stages; st++)
    if (s->stage_prev[st] < 0)
      {
        int k = 0;
        n_chains++;
        for (int x = st; x >= 0 && k < s->n_stages; x = s->stage_next[x])
          part_of_stage[x] = k++;
        if (k > n_parts)
          n_parts = k;
      }
  if (L < n_parts)
    {
      status = pp_cli_usage_error ("--layers %d cannot be split over %d stages; use --layers %d or more",
                                   L, n_parts, n_parts);
      goto out;
    }

  /* A first, rough memory check before anything is allocated: the
   * parameters alone (weights, gradients, two Adam moments). */
  {
    double avail = pp_mem_available_bytes ();
    double H = 4.0 * D;
    double params = (double) D * D + D + (double) L * (2.0 * D * H + H + 3.0 * D) + 16.0 * D + 16.0;
    double need = params * 4.0 * 4.0 * (n_chains > 1 ? n_chains : 1);
    if (avail > 0 && need > avail)
      {
        status = memory_refusal (need, avail);
        goto out;
      }
  }

  {
    PpModelConfig mc = { .layers = L, .width = D, .hidden_mult = 4, .seed = seed };
    model = pp_model_new (&mc, &err);
    if (model == NULL)
      {
        status = pp_cli_usage_error ("%s", err.msg[0] ? err.msg : "cannot build the model");
        goto out;
      }
  }
  blocks = calloc ((size_t) n_parts, sizeof *blocks);
  if (blocks == NULL)
    goto oom;
  if (pp_model_partition (model, n_parts, partition, blocks, &err) != PP_OK)
    {
      status = pp_cli_usage_error ("%s", err.msg);
      goto out;
    }

  /* The memory a run needs: parameters x 4 (weights, gradients, two Adam
   * moments) per copy, and per rank the activations of as many micro-batches
   * as the schedule holds at once (the simulator's peak under uniform costs). */
  ucm = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0);
  if (ucm == NULL)
    goto oom;
  if (pp_simulate (s, ucm, &usim, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      goto out;
    }
  {
    double avail = pp_mem_available_bytes ();
    double rows = (double) B / M;
    double need = (double) pp_model_n_params (model) * 4.0 * 4.0 * (n_chains > 1 ? n_chains : 1);
    for (int r = 0; r < s->ranks; r++)
      {
        double per_row = 0, in_row = 0;
        for (int st = 0; st < s->n_stages; st++)
          if (s->stage_rank[st] == r)
            {
              int part = part_of_stage[st];
              double b = (double) pp_model_activation_bytes_per_row (model, blocks[part], part == 0,
                                                                      part == n_parts - 1);
              double in = 4.0 * D;
              if (b > per_row) per_row = b;
              if (in > in_row) in_row = in;
            }
        if (recompute)
          need += rows * (per_row + in_row * usim->rank[r].peak_inflight);
        else
          need += rows * per_row * usim->rank[r].peak_inflight;
      }
    if (avail > 0 && need > avail && !use_cuda)
      {
        status = memory_refusal (need, avail);
        goto out;
      }
  }

  /* ---- the run ---- */
  pp_cli_sim_description (&desc, s, argc, argv);
  snprintf (desc.backend, sizeof desc.backend, "%s", use_cuda ? "cuda" : "cpu");
  snprintf (desc.model, sizeof desc.model, "residual MLP: %d blocks, width %d, hidden %d, batch %d",
            L, D, 4 * D, B);
  /* the CPU backend's rank threads on fewer cores than they are: said in
   * the model line, so that what `info` and the app propose is simulated
   * with the ranks sharing them (pp_why_cores_of_description) */
  shared_cores = 0;
  if (!use_cuda && (transport == NULL || transport->n_processes < 2))
    {
      long cores = pp_run_usable_cores ();
      if (cores > 0 && cores < s->ranks)
        {
          shared_cores = (int) cores;
          size_t len = strlen (desc.model);
          snprintf (desc.model + len, sizeof desc.model - len, "; %d rank threads on %d cores", s->ranks,
                    shared_cores);
        }
    }
  /* the host's block-edge samples sample less often than every edge
   * (runtime/pp-run-host.c, PP_RUN_EDGE_SKIP_NS): said here, as trace
   * format 1.6 asks, after the cores (pp_why_cores_of_description) */
  if (!use_cuda)
    {
      size_t len = strlen (desc.model);
      snprintf (desc.model + len, sizeof desc.model - len, "; no edge samples in gaps under 10 us");
    }

  win_busy = calloc ((size_t) s->ranks, sizeof *win_busy);
  mbegin = calloc ((size_t) s->ranks, sizeof *mbegin);
  mend = calloc ((size_t) s->ranks, sizeof *mend);
  tap.r = calloc ((size_t) s->ranks, sizeof *tap.r);
  if (win_busy == NULL || mbegin == NULL || mend == NULL || tap.r == NULL)
    {
      free (tap.r);
      goto oom;
    }
  pthread_mutex_init (&tap.lock, NULL);
  tap.ranks = s->ranks;
  for (int r = 0; r < s->ranks; r++)
    tap.r[r].step = -1;
  tap_init = true;

  /* The server's, the drain's and the ranks' threads inherit this mask, so
   * a Ctrl-C lands on the main thread (or on OpenBLAS's, started before
   * main), whose handler sets the run's stop flag; everyone polls it. */
  pp_cli_catch_stop_signals ();
  pp_cli_mask_stop_signals (SIG_BLOCK);

  if (transport != NULL)
    {
      /* one job: every rank registers under rank 0's name */
      double pid0 = transport->process_rank == 0 ? (double) getpid () : 0;
      char shared_name[64];
      if (transport->ops->sum (transport, &pid0, 1, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          goto out;
        }
      if (name_arg != NULL)
        snprintf (shared_name, sizeof shared_name, "%s", name_arg);
      else
        snprintf (shared_name, sizeof shared_name, "%.40s-%ld", s->name, (long) pid0);
      if (profiled != NULL)
        {
          /* a process of profile's job: profile collects and merges */
          if (pp_cli_job_open_member (&job, s->name, desc.cmdline, listen, profiled, transport->process_rank,
                                      transport->n_processes) != 0)
            goto out;
        }
      else if (pp_cli_job_open_rank (&job, s->name, desc.cmdline, live, listen, trace, shared_name,
                                     transport->process_rank, transport->n_processes) != 0)
        goto out;
    }
  else if (pp_cli_job_open_rank (&job, s->name, desc.cmdline, live, listen, trace, name_arg, 0, 0)
           != 0)
    goto out;
  /* MPI: rank 0's live stream serves the whole job; the others hand it
   * what they record at every step's end */
  collect = transport != NULL && job.live_index >= 0 && profiled == NULL;
  if (collect && transport->process_rank > 0 && pp_cli_job_collect (&job, transport->process_rank) != 0)
    goto out;
  {
    Header h = { &desc, s, transport };
    if (pp_cli_job_write (&job, write_header, &h) != 0)
      goto out;
  }
  {
    PpProbeSink ts = { .user = &tap, .spans = tap_spans };
    if (pp_cli_job_start_probe (&job, &ts) != 0)
      goto out;
  }
  {
    PpRunConfig rc;
    memset (&rc, 0, sizeof rc);
    rc.schedule = s;
    rc.model = *pp_model_config (model);
    rc.partition = partition;
    rc.batch = B;
    rc.lr = (float) lr;
    rc.data_seed = seed;
    rc.recompute = recompute;
    rc.exact_grads = exact_grads;
    rc.slow_rank = slow_rank;
    rc.slow_factor = slow_factor;
    rc.hang = hang_rank >= 0;
    rc.hang_rank = hang_rank;
    rc.hang_step = hang_step;
    const char *beat = getenv ("PIPESCOPE_HEARTBEAT");
    if (beat == NULL || strcmp (beat, "0") != 0)
      {
        rc.open_sink = open_to_job;
        rc.open_user = &job;
      }
    rc.pin_threads = pin;
    rc.probe = job.probe;
    rc.stop = &pp_cli_stop_flag;
    rc.backend = use_cuda ? PP_BACKEND_CUDA : PP_BACKEND_CPU;
    rc.gpu_partition = gpu_partition;
    rc.compute = compute;
    rc.no_cupti = no_cupti;
    rc.gpu_transport = gpu_transport;
    rc.transport = transport;
    run = pp_run_new (&rc, &err);
    if (run == NULL && use_cuda && strcmp (backend, "auto") == 0 && err.status == PP_EUNSUPPORTED)
      {
        /* the GPU is there but cannot take the run: train on the CPU */
        snprintf (backend_note, sizeof backend_note, "pipescope-cli: %.300s; using the CPU backend", err.msg);
        use_cuda = 0;
        rc.backend = PP_BACKEND_CPU;
        snprintf (desc.backend, sizeof desc.backend, "cpu");
        memset (&err, 0, sizeof err);
        run = pp_run_new (&rc, &err);
      }
    if (run == NULL)
      {
        status = err.status == PP_EINVAL ? pp_cli_usage_error ("%s", err.msg)
                                         : (fprintf (stderr, "pipescope-cli: error: %s\n", err.msg), 1);
        goto out;
      }
  }
  pp_model_free (model);
  model = NULL;
  if (backend_note[0] && (transport == NULL || transport->process_rank == 0))
    fprintf (stderr, "%s\n", backend_note);   /* once for the job */

  {
    int np = 0;
    const int *bp = pp_run_blocks_per_part (run, &np);
    char parts[256] = "";
    size_t len = 0;
    for (int i = 0; i < np && len < sizeof parts; i++)
      len += (size_t) snprintf (parts + len, sizeof parts - len, "%s%d", i ? "," : "", bp[i]);
    static const char *const computes[] = { "tf32", "fp32", "bf16" };
    printf ("run %s: P=%d, M=%d, V=%d; %s (blocks per part %s); %d steps, lr %g, seed %" PRIu64
            "%s%s; backend: %s",
            s->name, s->ranks, s->microbatches, s->stages_per_rank, desc.model, parts, N, lr, seed,
            recompute ? ", recompute" : "", pin ? ", pinned" : "", use_cuda ? "cuda" : "cpu");
    if (use_cuda)
      printf (" (%s; %s GEMMs; %s)", pp_run_device_note (run), computes[compute],
              pp_run_timing_note (run));
    printf ("\n");
    fflush (stdout);
  }
  if (write_new_clock (&job, run, transport, &clock_generation) != 0)
    goto out;
  pp_cli_job_announce (&job, listen);
  if (collect && transport->process_rank == 0)
    printf ("serving the whole job (%d ranks) live as %s\n", transport->n_processes, job.name);
  pp_cli_mask_stop_signals (SIG_UNBLOCK);

  every = N <= 20 ? 1 : N / 20;
  for (int step = 0; step < N; step++)
    {
      PpStepStats st;
      int slot = done % RUN_WINDOW_MAX;
      int64_t lo = INT64_MAX, hi = INT64_MIN;

      if (pp_cli_stopping ())
        {
          stopped = true;
          break;
        }
      memset (&st, 0, sizeof st);
      if (pp_run_step (run, &st, &err) != PP_OK)
        {
          if (pp_cli_stopping ())
            {
              stopped = true;
              break;
            }
          fprintf (stderr, "pipescope-cli: error: step %d: %s\n", step + 1, err.msg);
          goto out;
        }
      done++;
      if (isnan (first_loss))
        first_loss = st.loss;
      last_loss = st.loss;

      /* Everything the step recorded reaches the writers and the tap; the
       * ranks are idle until the next step, so the writers are ours. */
      if (pp_probe_flush (job.probe, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          goto out;
        }
      pthread_mutex_lock (&tap.lock);
      for (int r = 0; r < s->ranks; r++)
        {
          const RankStep *rs = &tap.r[r];
          if (transport != NULL && r != transport->process_rank)
            {
              /* another process's rank: its markers are in its own trace;
               * its busy time comes from the run's shared reports */
              int64_t busy = 0;
              pp_run_rank_times (run, r, &busy, NULL, NULL);
              win_busy[r][slot] = busy;
              mbegin[r] = mend[r] = -1;
              continue;
            }
          bool ok = rs->step == st.step;
          mbegin[r] = ok && rs->any ? rs->first : st.start_ns;
          mend[r] = ok && rs->any ? rs->last : st.end_ns;
          if (ok && rs->cany)
            {
              if (rs->cfirst < lo) lo = rs->cfirst;
              if (rs->clast > hi) hi = rs->clast;
              win_busy[r][slot] = rs->busy;
            }
          else
            {
              /* The blocks' spans are not in yet: with CUPTI the GPU
               * backend writes a step's spans at the next step's end.  The
               * run's own numbers (CUDA events) stand in, and the step
               * marker covers the rank's blocks too. */
              int64_t busy = 0, wait = 0, span = 0, f = -1, l = -1;
              pp_run_rank_times (run, r, &busy, &wait, &span);
              win_busy[r][slot] = busy;
              pp_run_rank_window (run, r, &f, &l);
              if (f >= 0 && l >= f)
                {
                  if (f < lo) lo = f;
                  if (l > hi) hi = l;
                  if (!(ok && rs->any) || f < mbegin[r]) mbegin[r] = f;
                  if (!(ok && rs->any) || l > mend[r]) mend[r] = l;
                }
            }
        }
      pthread_mutex_unlock (&tap.lock);
      win_span[slot] = hi > lo ? hi - lo : st.end_ns - st.start_ns;
      win_step[slot] = st.step;
      {
        Markers mk = { s->ranks, st.step, mbegin, mend };
        if (pp_cli_job_write (&job, write_markers, &mk) != 0
            || write_new_names (&job, run, &next_name) != 0
            || write_new_clock (&job, run, transport, &clock_generation) != 0
            || (collect && collect_step (&col, &job, transport) != 0))
          goto out;
      }
      if (done == 1 || done == 3 || done % 20 == 0)
        {
          /* Costs are measured now: the plan with its timeline.  Again after
           * step 3, once the first (warm-up) step no longer counts, and every
           * 20 steps, so a viewer's plan follows the costs as the run goes
           * (from steps 1-3 alone it could be off by 2x for a whole run). */
          pp_simulation_free (msim);
          msim = simulate_measured (run, s);
          if (msim != NULL)
            {
              Plan p = { s, msim };
              if (pp_cli_job_write (&job, write_plan, &p) != 0)
                goto out;
            }
        }
      if (every == 1 || done == 1 || done % every == 0 || done == N)
        {
          /* numbered from 0, as the trace and every other output */
          printf ("step %d  loss %.4f  time %.1f ms  samples/s %.0f\n", st.step, st.loss,
                  st.seconds * 1e3, st.samples_per_s);
          fflush (stdout);
        }
    }

  if (stopped)
    printf ("stopped after %d step%s\n", done, done == 1 ? "" : "s");

  /* Names interned since the last step (CUPTI delivers late records). */
  pp_run_flush_device_records (run);
  if (write_new_names (&job, run, &next_name) != 0)
    goto out;

  /* The plan again, under the costs measured over the whole run. */
  pp_simulation_free (msim);
  msim = done > 0 ? simulate_measured (run, s) : NULL;
  if (msim != NULL)
    {
      Plan p = { s, msim };
      if (pp_cli_job_write (&job, write_plan, &p) != 0)
        goto out;
    }

  why_from_trace = trace != NULL && transport == NULL;
  if (done > 0)
    {
      double closed = pp_bubble_closed_form (s->name, s->ranks, s->microbatches, s->stages_per_rank);
      int64_t span = 0;
      /* the one analysis over the last windows, oldest first */
      int n_win = done < RUN_WINDOW_MAX ? done : RUN_WINDOW_MAX;
      int32_t tab_step[RUN_WINDOW_MAX];
      double tab_len[RUN_WINDOW_MAX];
      double *tab_bub = malloc ((size_t) n_win * (size_t) s->ranks * sizeof *tab_bub);
      PpAnalysisSteps an;
      if (tab_bub == NULL)
        goto oom;
      for (int i = 0; i < n_win; i++)
        {
          int slot = (done - n_win + i) % RUN_WINDOW_MAX;
          tab_step[i] = win_step[slot];
          tab_len[i] = (double) win_span[slot];
          for (int r = 0; r < s->ranks; r++)
            {
              double b = win_span[slot] > 0 ? 1.0 - (double) win_busy[r][slot] / (double) win_span[slot] : 1;
              tab_bub[(size_t) i * (size_t) s->ranks + (size_t) r] = b < 0 ? 0 : b;
            }
        }
      PpStatus ast = pp_analysis_steps_of_table (tab_step, tab_len, tab_bub, (size_t) n_win, s->ranks, &an, NULL);
      free (tab_bub);
      if (ast != PP_OK)
        goto oom;
      int k = an.n_steps;
      for (int i = 0; i < k; i++)
        {
          int slot = (done - 1 - i) % RUN_WINDOW_MAX;
          span += win_span[slot];
        }
      char what[160];
      printf ("\n%s\n", pp_analysis_describe_steps (&an, what, sizeof what));
      printf ("rank  %s  %s  %s\n", PP_ANALYSIS_MEASURED_LABEL, pp_analysis_plan_label (PP_ANALYSIS_PLAN_MEASURED_COSTS),
              pp_analysis_plan_label (PP_ANALYSIS_PLAN_CLOSED_FORM));
      for (int r = 0; r < s->ranks; r++)
        {
          char meas[32], pred[32], cf[32];
          pp_analysis_format_percent (meas, sizeof meas, k > 0 ? an.bubble[r] : -1, 1);
          pp_analysis_format_percent (pred, sizeof pred, msim != NULL ? msim->rank[r].bubble : -1, 1);
          pp_analysis_format_percent (cf, sizeof cf, closed, 1);
          printf ("%4d  %22s  %22s  %22s\n", r, meas, pred, cf);
        }
      double med_s = an.median_step * 1e-9;
      printf ("median step %.3f ms, %.0f samples/s; loss %.4f -> %.4f\n", 1e3 * med_s,
              med_s > 0 ? (double) B / med_s : 0.0, first_loss, last_loss);
      pp_analysis_steps_clear (&an);
      /* issue 16: why the bubble is there, from the same windows and costs */
      PpCostModel *why_c = span > 0 ? pp_run_measured_costs (run) : NULL;
      PpWhyIdle *why = why_c ? calloc ((size_t) s->ranks, sizeof *why) : NULL;
      double *why_m = why ? calloc ((size_t) s->ranks, sizeof *why_m) : NULL;
      for (int r = 0; why_m != NULL && r < s->ranks; r++)
        {
          int64_t busy = 0;
          for (int i = 0; i < k; i++)
            busy += win_busy[r][(done - 1 - i) % RUN_WINDOW_MAX];
          why_m[r] = (double) (span - busy) / k;
        }
      PpWhyChange why_ch;
      PpModelConfig why_mc = { .layers = L, .width = D, .hidden_mult = 4 };
      /* with a trace of its own, the split is read back from it once it
       * is closed (print_why_of_trace, below): runtime's parts need the
       * spans and counters only the recording holds */
      if (why_m != NULL && !why_from_trace && pp_why_split (s, why_c, why_m, why, NULL) == PP_OK)
        {
          printf ("\nidle by cause, a step (the mean over the %d steps analysed; schedule: the plan at the mean action; imbalance: "
                  "what the stages' costs add; transfers: what the transfer times add; runtime: the rest):\n", k);
          pp_why_print_idle (stdout, why, s->ranks, 1e-6, "ms");
          if (pp_why_suggest_partition (s, why_c, &why_mc, n_parts == s->n_stages ? blocks : NULL,
                                        shared_cores, &why_ch, NULL) == PP_OK)
            pp_why_print_change (stdout, &why_ch, 1e-6, "ms");
          if (transport != NULL && trace != NULL)
            printf ("runtime by part: not printed: each rank wrote its own trace (%s); `pipescope-cli merge` "
                    "them and `info` the merged trace for runtime's parts\n", trace);
          else
            printf ("runtime by part: not printed: they are measured from a recording and this run wrote none; "
                    "add --trace FILE%s\n", live ? " (the live viewer's Why panel shows them now)" : "");
        }
      free (why_m);
      free (why);
      pp_cost_model_free (why_c);
    }
  if (save_params != NULL && done > 0 && save_run_params (run, save_params, transport) != 0)
    goto out;
  if (collect && transport->process_rank == 0)
    printf ("collector: %" PRIu64 " spans of %d other ranks (%.1f MiB) served live, %.1f ms on rank 0\n",
            col.spans, transport->n_processes - 1, (double) col.bytes / 1048576.0, (double) col.ns / 1e6);
  if (pp_run_cupti_dropped (run) > 0)
    printf ("CUPTI dropped %" PRIu64 " device records (its buffers were full): kernel spans are missing\n",
            pp_run_cupti_dropped (run));
  fflush (stdout);

  pp_run_free (run);
  run = NULL;
  pp_run_end_heartbeat (run);
  status = pp_cli_job_close (&job);
  if (status == 0 && why_from_trace && done > 0)
    print_why_of_trace (trace);
  if (fflush (stdout) != 0)
    status = 1;
  goto out;

oom:
  fprintf (stderr, "pipescope-cli: error: out of memory\n");
  status = 1;
out:
  if (run != NULL)
    pp_run_free (run);
  pp_cli_job_abort (&job);
  pp_cli_mask_stop_signals (SIG_UNBLOCK);
  if (tap_init)
    {
      pthread_mutex_destroy (&tap.lock);
      free (tap.r);
    }
  free (win_busy);
  free (mbegin);
  free (mend);
  free (blocks);
  free (part_of_stage);
  if (model != NULL)
    pp_model_free (model);
  pp_simulation_free (msim);
  pp_simulation_free (usim);
  pp_cost_model_free (ucm);
  collector_clear (&col);
  pp_transport_free (transport);   /* it borrows the schedule */
  pp_schedule_free (s);
  return status;
}
