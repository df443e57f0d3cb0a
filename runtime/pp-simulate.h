/* pp-simulate.h — the planned timeline of a schedule under a cost model.
 *
 * Each rank runs its actions in order, one at a time; an action starts when
 * its rank is free and its inputs are there:
 *   F(s,m)   after F(prev(s),m) + transfer (nothing at a chain head),
 *   B/I(s,m) after B/I(next(s),m) + transfer (nothing at a chain tail) and F(s,m),
 *   W(s,m)   after I(s,m).
 * A transfer costs nothing between two stages on the same rank.  An
 * OVERLAP_F_B starts when both halves may start and lasts F + B.  FSDP's
 * actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD, in a plan from
 * PyTorch's pipeline_order_with_comms) wait for nothing but their rank and
 * last the cost model's dp time of their kind and stage: busy, not idle.
 */
#pragma once

#include "pp-schedule.h"

typedef struct {
  int     n_stages;
  double *f;      /* [n_stages] forward time */
  double *b;      /* [n_stages] full backward time; I = b - w */
  double *w;      /* [n_stages] weight-gradient time */
  double *comm;   /* [n_stages] transfer time from stage s to its next (and back) */
  /* [PP_COST_N_DP * n_stages] data-parallel action time, dp[k * n_stages + s]
   * for k = kind - PP_ACT_UNSHARD (UNSHARD, RESHARD, REDUCE_GRAD,
   * WAIT_REDUCE_GRAD); 0 in a new model */
  double *dp;
} PpCostModel;

#define PP_COST_N_DP 4

/* The time of data-parallel action kind (PP_ACT_UNSHARD ...) on stage; 0
 * for any other kind or a stage outside the model. */
double       pp_cost_model_dp (const PpCostModel *c, int kind, int stage);

/* Uniform costs for every stage: F, B (= I + W), W, transfer C. */
PpCostModel *pp_cost_model_new_uniform (int n_stages, double f, double b, double w, double c);
void         pp_cost_model_free (PpCostModel *c);

/* Parses "F,B,W,C" (C optional, default 0); requires F > 0, B > 0, 0 <= W < B, C >= 0. */
PpStatus     pp_cost_parse (const char *text, double out[4], PpError *err);

typedef struct {
  int    rank;
  int    index;      /* position in the rank's action list */
  double start, end;
} PpSimAction;

typedef struct {
  double first_start;   /* the rank's first action starts */
  double last_end;      /* its last action ends */
  double busy;          /* time spent computing, data-parallel actions included (never idle) */
  double idle;          /* makespan - busy */
  double bubble;        /* idle / makespan */
  int    peak_inflight; /* most (stage, micro-batch) pairs whose activations are held at once */
} PpSimRank;

typedef struct {
  const PpSchedule *schedule;  /* borrowed */
  double            makespan;
  double            bubble;    /* sum idle / (P * makespan): one step between barriers */
  /* Steps run back to back with no barrier between them (the next step's
   * work on a rank may start when the rank finishes this one, as Zero
   * Bubble's optimizer post-validation allows): the period is the longest
   * first-start-to-last-end of any rank, and this is the idle share of it. */
  double            period;
  double            steady_bubble;
  PpSimRank        *rank;      /* [P] */
  PpSimAction     **timeline;  /* [P][n_actions of the rank] */
} PpSimulation;

/* Simulates; PP_EDEADLOCK (with the rank, step and action that stall) if the
 * order cannot complete.  The schedule must outlive the result. */
PpStatus pp_simulate (const PpSchedule *s, const PpCostModel *cost,
                      PpSimulation **out, PpError *err);
void     pp_simulation_free (PpSimulation *sim);

/* The makespan when the ranks share `cores` cores (the CPU backend on a
 * machine with fewer cores than ranks): the actions running at a time
 * share them evenly, each at min(1, cores / running) of a core; a waiting
 * rank takes none.  With cores >= ranks it equals pp_simulate's. */
PpStatus pp_simulate_shared (const PpSchedule *s, const PpCostModel *cost, int cores,
                             double *makespan, PpError *err);

/* (P-1)/(M+P-1): the bubble of GPipe and 1F1B under uniform costs. */
double   pp_bubble_closed_form_gpipe (int ranks, int microbatches);
/* (P-1)/(VM+P-1): Interleaved1F1B's bubble under uniform costs per stage
 * (the fill and drain shrink V-fold); holds for M >= P, -1 below that. */
double   pp_bubble_closed_form_interleaved (int ranks, int microbatches, int stages_per_rank);
/* The closed form of schedule (any name pp_schedule_lookup takes) when it
 * has one: GPipe and 1F1B (V 1), Interleaved1F1B (M >= P); -1 otherwise. */
double   pp_bubble_closed_form (const char *schedule, int ranks, int microbatches,
                                int stages_per_rank);
