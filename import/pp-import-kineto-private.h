/* pp-import-kineto-private.h — what the Kineto importer's files share;
 * pp-import.h is its API.  The importer is five files, one idea each:
 *
 *   pp-import-kineto-events.c  one file's JSON reduced to the events that
 *                              matter: names interned, each event classified
 *   pp-import-kineto-ranks.c   ranks and processes: a rank's files merged,
 *                              a job of many pipelines placed and numbered
 *   pp-import-kineto-spans.c   from events to spans: orders and lookups, a
 *                              block's compute told from its waits, the
 *                              receives' arrivals, the steps' extents
 *   pp-import-kineto-plan.c    the plan: the observed order, matched to a
 *                              known schedule or read as one; measured costs
 *   pp-import-kineto.c         the import itself (import_run: the files read
 *                              one at a time, then put together and written
 *                              through the trace writer) and its entry points
 */
#pragma once

#include "pp-import.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-action.h"
#include "pp-json.h"
#include "pp-schedule.h"
#include "pp-simulate.h"

/* What an event is for us. */
enum {
  EV_BLOCK,     /* F, B, I, W, OVERLAP_F_B (a PP: label, or GPipe's Forward/Backward) */
  EV_LABEL_XFER,/* PP:<s>SEND_F<m> ... : which transfer the operations inside it are */
  EV_XFER,      /* a point-to-point operation */
  EV_STEP,      /* ProfilerStep#N */
  EV_OPT,       /* Optimizer.step#... */
  EV_DEVICE,    /* kernel, copy, memset */
  EV_DP,        /* FSDP's PP:<s>UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD */
};

typedef struct {
  int64_t  start, end;      /* ns, base + ts */
  int64_t  tid;
  int64_t  corr;            /* EV_DEVICE: correlation id, -1 none */
  uint64_t bytes;
  uint32_t name_id;
  uint32_t stream;
  int32_t  what;            /* EV_* */
  int32_t  kind;            /* BLOCK, LABEL_XFER: PpActionKind; XFER: 0 send, 1 recv;
                             * DEVICE: PpSpanKind; STEP: N */
  int32_t  stage, mb;
  int32_t  sub_kind, sub_stage, sub_mb;
  int32_t  level;           /* XFER: 2 gloo:/nccl:, 1 record_param_comms, 0 c10d:: */
  int32_t  step;
  int32_t  peer;
  uint16_t device;
  uint8_t  gpipe;           /* BLOCK: from 'Forward i' / 'Backward i' */
} Ev;

typedef struct {
  int64_t corr, ts, tid;
} Launch;

/* A CPU operation, to tell a block's compute from its waits: the
 * operators (cat cpu_op) and the communication calls (c10d::, gloo:,
 * nccl:, record_param_comms), comm set. */
typedef struct {
  int64_t start, end, tid;
  int32_t comm;
} Op;

/* What the import holds while it reads (pp-import.h: PP_IMPORT_MAX_MEMORY,
 * PP_IMPORT_MAX_KEPT), counted before each allocation: the file being read
 * (its text and nodes) and the events kept (arrays at their capacity, the
 * names).  An allocation past it is refused and over set, so that the
 * import says which bound it met, not "out of memory". */
typedef struct {
  size_t held;              /* bytes held now */
  size_t kept;              /* of them, the events kept */
  bool   over;
} Budget;

/* Takes bytes (kept: of the events kept) from b; false, with b->over
 * set, past a bound.  b may be NULL: nothing counted. */
bool budget_take (Budget *b, size_t bytes, bool kept);
void budget_give (Budget *b, size_t bytes, bool kept);

typedef struct {
  const char *name;
  int     rank, world;      /* -1: not given; rank: the pipeline rank once placed */
  /* a job of many pipelines (data-parallel replicas): the file's process
   * (distributedInfo.rank, its global rank) and its place, read from the
   * process groups a DeviceMesh names (pg_config: mesh_pp, mesh_dp, ...) */
  int     process;
  int32_t coord[PP_TRACE_MESH_DIMS], size[PP_TRACE_MESH_DIMS];
  bool    placed;           /* coord[PP] read from a mesh_pp group */
  int32_t pid;
  char    host[64];
  char    backend[32];
  Ev     *ev;
  size_t  n_ev, cap_ev;
  Launch *launch;
  size_t  n_launch, cap_launch;
  Op     *op;               /* sorted by start once all are read */
  size_t  n_op, cap_op;
  int     n_pp, n_gpipe;    /* labelled blocks of each flavour */
  int     min_step;         /* least ProfilerStep N, INT32_MAX none */
  int     n_steps;
  /* without ProfilerStep: where the rank's steps began (the step numbers
   * the rank counted, the start of the block that began each), to line
   * the ranks' counts up */
  int     mark_step;        /* -1: no step began with its first block */
  int64_t mark_time;        /* the end of that block */
  int64_t ext_lo, ext_hi;   /* the time its events cover (ev_extent) */
  Budget *budget;           /* the import's: what its arrays take */
} RankData;

/* interned names */
typedef struct {
  char    **names;          /* [id - 1] */
  uint32_t  n, cap;
  uint32_t *table;          /* open addressing over ids, 0 empty */
  size_t    tcap;
  Budget   *budget;         /* the import's: what the names take */
} Names;

typedef struct {
  RankData *ranks;          /* [n] in input order */
  size_t    n;
  const int *rank_of;       /* [P]: the file (index) of each pipeline rank that
                             * gives its order (its first replica), -1 none */
  Names     names;
  size_t    skipped;
  Budget    budget;
} Import;

/* Where the walks of compute_extent over a rank's operators (sorted by
 * start) may begin.  A block looks at the operators that start inside its
 * range; a rank's blocks follow one another, so an operator is inside one
 * block, or two that touch at its start.  Blocks that overlap (only a file
 * that lies has them: a thousand nested labels over a thousand operators)
 * would make that a walk per block per operator; so a walk never goes
 * back over what the blocks before the previous one walked, and each
 * operator is looked at twice at most. */
typedef struct {
  size_t floor;      /* past the walks of all blocks but the last */
  size_t prev_end;   /* past the last block's walk */
} OpWalk;

typedef struct {
  int        P, M, V, n_stages;
  int       *stage_rank;     /* [n_stages], -1 unknown */
  PpAction **order;          /* [P] the first step's compute order */
  size_t    *n_order;
  PpSchedule *sched;         /* known or observed; NULL when none */
  int        matched;
} Shape;

typedef struct {
  uint64_t key;        /* (RECV kind, stage, micro-batch) */
  int64_t  posted;     /* its label's start */
  int64_t  arrival;    /* when its data was there */
} Arrival;

typedef struct {
  int32_t step;
  int64_t start, end;
} StepExtent;

/* pp-import-kineto-events.c */
void names_clear (Names *nm);
bool push_ev (RankData *rd, const Ev *e);
bool push_launch (RankData *rd, int64_t corr, int64_t ts, int64_t tid);
bool push_op (RankData *rd, int64_t start, int64_t end, int64_t tid, bool comm);
/* The arrays cut to what they hold once the file is read (their doubling
 * is no event kept), given back to the budget. */
void rank_trim (RankData *rd);
PpStatus extract (Import *im, RankData *rd, const PpJsonDoc *d, const char *text, size_t size,
                  size_t events_at, PpError *err);

/* pp-import-kineto-ranks.c */
void ev_extent (RankData *rd);
PpStatus merge_rank (RankData *to, RankData *from, PpError *err);
int cmp_int32 (const void *a, const void *b);
PpStatus place_processes (Import *im, bool said, bool *mesh, PpError *err);
PpTraceProcess process_of (const RankData *rd);
PpStatus number_processes (Import *im, PpImportSummary *sum, PpError *err);

/* pp-import-kineto-spans.c */
int cmp_ev_start (const void *a, const void *b);
int cmp_op_start (const void *a, const void *b);
int cmp_launch (const void *a, const void *b);
const Launch *find_launch (const RankData *rd, int64_t corr);
long block_at (const Ev *const *blocks, size_t n, int64_t t);
void compute_extent (const RankData *rd, const Ev *e, int64_t ready, OpWalk *walk, int64_t *start,
                     int64_t *end, bool *waited);
bool is_block_of (const Ev *e, bool use_pp);
int span_kind_of (int act);
bool push_span (PpSpan **spans, size_t *n, size_t *cap, const PpSpan *sp);
int cmp_arrival (const void *a, const void *b);
uint64_t recv_key (int kind, int stage, int mb);
int64_t arrival_for (const Arrival *arr, size_t n, uint64_t key, int64_t t);
size_t step_extents (StepExtent *ext, size_t n);

/* pp-import-kineto-plan.c */
void shape_clear (Shape *s);
void match_known (Shape *sh);
void observed_schedule (Shape *sh);
PpCostModel *measured_costs (const PpSpan *spans, size_t n_spans, const Shape *sh);
PpStatus build_order (const Import *im, Shape *sh, bool use_pp, int step, size_t *total,
                      PpError *err);
