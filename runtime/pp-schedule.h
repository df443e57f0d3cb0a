/* pp-schedule.h — a pipeline schedule: per rank, the ordered actions it runs.
 *
 * Stages form chains: a forward goes from a stage to stage_next[s], gradients
 * come back from it.  Every schedule but DualPipe has one chain
 * 0 → 1 → … → n_stages-1; DualPipe has two (one per direction, each holding a
 * copy of the model).  Stage s handles micro-batches [stage_mb_lo[s],
 * stage_mb_hi[s]); for one chain that is [0, M).
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "pp-action.h"
#include "pp-status.h"

typedef struct {
  PpAction *actions;
  int       n_actions;
  int       capacity;
} PpRankActions;

typedef struct {
  char           name[48];       /* canonical: "GPipe", "1F1B", "Megatron-Interleaved:group=4", ... */
  int            ranks;          /* P */
  int            microbatches;   /* M */
  int            stages_per_rank;/* V */
  int            n_stages;
  int           *stage_rank;     /* [n_stages] rank holding the stage */
  int           *stage_prev;     /* [n_stages] previous stage in its chain, -1 at a head */
  int           *stage_next;     /* [n_stages] next stage in its chain, -1 at a tail */
  int           *stage_mb_lo;    /* [n_stages] first micro-batch the stage sees */
  int           *stage_mb_hi;    /* [n_stages] one past the last */
  PpRankActions *rank;           /* [ranks] */
} PpSchedule;

/* Stage placements for pp_schedule_new. */
typedef enum {
  PP_PLACE_LOOP,  /* stage s on rank s % P (GPipe, 1F1B, interleaved) */
  PP_PLACE_V,     /* rank r holds stages r and 2P-1-r (ZBV, DualPipeV) */
  PP_PLACE_CUSTOM /* caller fills stage_rank (and chains) itself */
} PpPlacement;

/* A schedule with P ranks, V stages per rank (n_stages = P*V), one chain over
 * all stages, every stage seeing micro-batches [0, M), and no actions yet. */
PpSchedule *pp_schedule_new (const char *name, int ranks, int microbatches,
                             int stages_per_rank, PpPlacement placement);
void        pp_schedule_free (PpSchedule *s);

/* Appends an action to a rank; returns PP_ENOMEM on allocation failure. */
PpStatus    pp_schedule_push (PpSchedule *s, int rank, PpAction a);

/* Total number of actions on all ranks. */
long        pp_schedule_total_actions (const PpSchedule *s);

/* ---- generators ---------------------------------------------------------
 * Each builds the compute order of one schedule for P ranks, M micro-batches
 * and V stages per rank (ignored where a schedule fixes it).  A (P, M, V) the
 * schedule cannot be built for is PP_EINVAL with a one-line reason.  */
typedef PpStatus (*PpScheduleGenerator) (int ranks, int microbatches, int stages_per_rank,
                                         PpSchedule **out, PpError *err);

PpStatus pp_schedule_new_gpipe             (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_1f1b              (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_interleaved_1f1b  (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_looped_bfs        (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_interleaved_zb    (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_zb_h1             (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_zb_h2             (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_zbv               (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_dualpipev         (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_dualpipe          (int P, int M, int V, PpSchedule **out, PpError *err);
/* megatron-core's forward_backward_pipelining_with_interleaving with
 * microbatch_group_size_per_vp_stage G (<= 0: megatron-core's default, P);
 * named "Megatron-Interleaved:group=G".  PP_EINVAL with megatron-core's
 * refusals (pp_megatron_check_group). */
PpStatus pp_schedule_new_megatron_interleaved (int P, int M, int V, PpSchedule **out, PpError *err);
PpStatus pp_schedule_new_megatron_interleaved_group (int P, int M, int V, int G,
                                                     PpSchedule **out, PpError *err);
/* What megatron-core 0.16 refuses: G outside [P, M], or 0 < M % G < P. */
PpStatus pp_megatron_check_group (int P, int M, int G, PpError *err);

typedef struct {
  const char          *name;          /* canonical name */
  const char          *aliases;       /* other accepted names, space separated */
  PpScheduleGenerator  generate;
  int                  takes_v;       /* 1: V is a free parameter */
  int                  default_v;     /* V used when the user gives none */
  const char          *summary;       /* one line for --help */
  int                  takes_group;   /* 1: takes ":group=N" / --group (Megatron's
                                       * microbatch_group_size_per_vp_stage) */
} PpScheduleInfo;

/* All known schedules, terminated by an entry with name == NULL. */
const PpScheduleInfo *pp_schedule_list (void);

/* Looks a schedule up by canonical name or alias, case-insensitively; NULL if
 * unknown.  A schedule that takes a group may be named with its parameter,
 * "Megatron-Interleaved:group=3": the suffix is ignored here. */
const PpScheduleInfo *pp_schedule_lookup (const char *name);

/* N of a name's ":group=N" suffix; 0 where there is none, -1 where the
 * suffix is there but not a whole number >= 1. */
int pp_schedule_name_group (const char *name);

/* How a PyTorch job runs the schedule `name`: its torch.distributed.pipelining
 * class ("ScheduleZBVZeroBubble"); "" where PyTorch has none but runs it
 * from a CSV (`pipescope-cli schedule --format csv`, loaded with _load_csv:
 * ZB-H1, ZB-H2); NULL where a PyTorch job cannot run it (DualPipe's two
 * model copies) or the name is unknown. */
const char *pp_schedule_pytorch_class (const char *name);

/* Looks up `name` and generates it; V <= 0 means the schedule's default.
 * Unknown names are PP_EINVAL with the accepted names listed. */
PpStatus pp_schedule_generate (const char *name, int ranks, int microbatches,
                               int stages_per_rank, PpSchedule **out, PpError *err);
/* The same with a group (<= 0: the name's ":group=N", else the schedule's
 * default); a group for a schedule that takes none, or one that disagrees
 * with the name's, is PP_EINVAL. */
PpStatus pp_schedule_generate_group (const char *name, int ranks, int microbatches,
                                     int stages_per_rank, int group, PpSchedule **out,
                                     PpError *err);

/* ---- which framework runs a job, and what it can run ---------------------
 * A trace's description says who ran it: a schedule named "Megatron-..." is
 * a megatron-core job, "DeepSpeed-..." a DeepSpeed pipe engine's (which
 * runs 1F1B, its TrainSchedule), a model that opens "PyTorch " a
 * torch.distributed.pipelining job, anything else pipescope's own runtime.
 * What if offers a job only what its framework runs (one rule for every
 * view): PyTorch runs the schedules it has a class for and ZB-H1/ZB-H2 from
 * a CSV (pp_schedule_pytorch_class); megatron-core runs 1F1B and
 * Megatron-Interleaved; pipescope's runtime runs every schedule but the
 * framework-specific Megatron-Interleaved (at its default group it is
 * Interleaved1F1B). */
typedef enum {
  PP_FRAMEWORK_PIPESCOPE = 0,
  PP_FRAMEWORK_PYTORCH,
  PP_FRAMEWORK_MEGATRON,
  PP_FRAMEWORK_DEEPSPEED,
} PpFramework;

PpFramework pp_framework_of_description (const char *schedule, const char *model);
bool        pp_schedule_runs_on (const char *name, PpFramework framework);
const char *pp_framework_name (PpFramework framework);

/* Whether a and b run the same compute actions in the same order on every
 * rank.  Where they do not, *rank and *index (either may be NULL) say the
 * first rank that differs and the first position on it (-1, -1 when the
 * shapes differ: P). */
bool pp_schedule_same_order (const PpSchedule *a, const PpSchedule *b, int *rank, int *index);
/* The first position where rank r's compute actions differ in a and b, or -1
 * where they are the same (r < both schedules' ranks). */
int  pp_schedule_rank_difference (const PpSchedule *a, const PpSchedule *b, int r);

/* ---- what a request costs, before it is built ----------------------------
 * pp_schedule_estimate_actions: about how many actions (all ranks) the
 * generator would build for (name, P, M, V): stages x micro-batches x 3 (a
 * forward, and a backward or its two halves I and W); V <= 0 is the
 * schedule's default, and V is fixed where the schedule fixes it.  -1 for an
 * unknown name.  An upper estimate: schedules without a split backward build
 * two actions per stage and micro-batch, DualPipe about one.
 *
 * PP_SCHEDULE_BYTES_PER_ACTION: what one action takes in a schedule and one
 * simulation of it: the action (24 bytes, twice that while its rank's array
 * grows by doubling), its timeline slot (24) and its share of the
 * simulator's per (stage, micro-batch) cells (16), rounded up.
 *
 * pp_schedule_check_size: PP_OK, or PP_ENOMEM with one line naming the
 * estimate, the bytes it needs at bytes_per_action each and the memory the
 * machine has available (MemAvailable), when it cannot fit; PP_OK when the
 * available memory is unknown.  Call it before pp_schedule_generate. */
#define PP_SCHEDULE_BYTES_PER_ACTION 96.0
double   pp_schedule_estimate_actions (const char *name, int ranks, int microbatches,
                                       int stages_per_rank);
PpStatus pp_schedule_check_size (const char *name, int ranks, int microbatches, int stages_per_rank,
                                 double bytes_per_action, PpError *err);
/* MemAvailable from /proc/meminfo in bytes, or -1 when unknown. */
double   pp_mem_available_bytes (void);

/* ---- PyTorch "compute_only" CSV ---------------------------------------
 * One row per rank, one cell per action in PyTorch's repr; empty cells are
 * idle steps and are skipped on reading.  The reader infers P from the rows,
 * the stages from the actions, the stage-to-rank mapping from where each
 * stage appears and M from the largest micro-batch, then validates. */
PpStatus pp_schedule_write_csv (const PpSchedule *s, FILE *out, PpError *err);
PpStatus pp_schedule_read_csv  (FILE *in, const char *name, PpSchedule **out, PpError *err);

/* The CSV reader's inference over per-rank action lists in memory (a
 * trace's plan): actions[r] holds n_actions[r] compute actions of rank r
 * (copied).  Every action is checked (a compute kind, stages and
 * micro-batches in range, an OVERLAP_F_B's backward half a B or an I),
 * stages x micro-batches is at most max_cells (<= 0: the CSV reader's
 * bound), then P, the stages, their ranks, M and V are inferred as from a
 * CSV and the schedule validated.  PP_EFORMAT (or PP_EDEADLOCK) with one
 * line naming the rank and step otherwise. */
PpStatus pp_schedule_from_actions (int ranks, const PpAction *const *actions, const int *n_actions,
                                   const char *name, long max_cells, PpSchedule **out,
                                   PpError *err);

/* ---- validation -------------------------------------------------------
 * Every (stage, micro-batch) gets exactly one F and either one B or one I and
 * one W, on the rank that holds the stage; the order honours dependencies
 * across ranks.  A schedule that would deadlock is PP_EDEADLOCK with the rank,
 * the step and the action where it stalls and what that action waits for. */
PpStatus pp_schedule_validate (const PpSchedule *s, PpError *err);
