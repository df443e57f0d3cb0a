/* pp-schedule-deepspeed.h — DeepSpeed's TrainSchedule as its pipe engine
 * executes it: per pipeline rank, the lock-step slots of instructions.
 *
 * Its forwards and backwards run, stage by stage, in 1F1B's order (the
 * schedule "DeepSpeed-1F1B" is 1F1B's compute order); its slots are its own:
 * sends and receives are instructions of their own, both the first and the
 * last stage load micro-batches, and the tied and data-parallel reductions
 * and the optimizer sit in the last slot.  This is the order `pipescope-cli
 * schedule -s DeepSpeed-1F1B --format instructions` prints, checked against
 * DeepSpeed's own TrainSchedule by tests/pytorch/test-deepspeed.py. */
#pragma once

#include <stdio.h>

#include "pp-status.h"

typedef enum {
  PP_DS_LOAD_MICRO_BATCH = 0,
  PP_DS_FORWARD_PASS,
  PP_DS_BACKWARD_PASS,
  PP_DS_SEND_ACTIVATION,
  PP_DS_RECV_ACTIVATION,
  PP_DS_SEND_GRAD,
  PP_DS_RECV_GRAD,
  PP_DS_REDUCE_TIED_GRADS,
  PP_DS_REDUCE_GRADS,
  PP_DS_OPTIMIZER_STEP,
} PpDsKind;

typedef struct {
  int      slot;        /* the schedule's step: 0 .. 2 (M + P - 1) - 1 */
  PpDsKind kind;
  int      buffer;      /* the pipe buffer it works on; -1 where none */
  int      microbatch;  /* the micro-batch in that buffer; -1 where none */
} PpDsInstr;

/* DeepSpeed's name of the instruction ("ForwardPass"). */
const char *pp_ds_kind_name (PpDsKind kind);

/* The instructions of pipeline rank `stage` of P for M micro-batches, in
 * the order the engine executes them; *out is malloc'd (*n entries).
 * PP_EINVAL where P, M or stage is out of range. */
PpStatus pp_ds_train_instructions (int P, int M, int stage, PpDsInstr **out, int *n, PpError *err);

/* Every rank's slots as DeepSpeed writes its instructions
 * ("rank 0 slot 3: RecvGrad(buffer_id=0) SendActivation(buffer_id=1)"). */
PpStatus pp_ds_print_train_instructions (FILE *f, int P, int M, PpError *err);
