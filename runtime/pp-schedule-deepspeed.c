/* pp-schedule-deepspeed.c — DeepSpeed's TrainSchedule, slot by slot
 * (pp-schedule-deepspeed.h). */
#include "pp-schedule-deepspeed.h"

#include <stdlib.h>

const char *
pp_ds_kind_name (PpDsKind kind)
{
  static const char *const names[] = {
    "LoadMicroBatch", "ForwardPass", "BackwardPass", "SendActivation", "RecvActivation",
    "SendGrad", "RecvGrad", "ReduceTiedGrads", "ReduceGrads", "OptimizerStep",
  };
  return (unsigned) kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* The micro-batch a slot works on, and whether it is a forward: ranks of
 * even index run forwards in even slots, odd ones in odd slots; a stage
 * pair (2k, 2k+1) shares its forward micro-batch, and backwards trail by
 * the distance to the last stage. */
static int
slot_microbatch (int P, int stage, int slot, int *forward)
{
  int even_slot = slot % 2 == 0, even_stage = stage % 2 == 0;
  *forward = even_slot == even_stage;
  if (*forward)
    return (even_slot ? slot / 2 : (slot - 1) / 2) - stage / 2;
  if (even_slot)
    return slot / 2 - P + (stage + 1) / 2;
  return (slot - 1) / 2 - P + 1 + stage / 2;
}

PpStatus
pp_ds_train_instructions (int P, int M, int stage, PpDsInstr **out, int *n, PpError *err)
{
  if (P < 1 || M < 1 || stage < 0 || stage >= P || P > 4096 || M > 1 << 20)
    return pp_error_set (err, PP_EINVAL, "DeepSpeed's TrainSchedule: P %d, M %d, stage %d out of range",
                         P, M, stage);
  int slots = 2 * (M + P - 1);
  /* at most 5 instructions a slot, 3 more in the last */
  PpDsInstr *v = malloc (sizeof *v * ((size_t) slots * 5 + 3));
  if (v == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  int buffers = P - stage < M ? P - stage : M;
  if (buffers < 2)
    buffers = 2;
  int k = 0, prev = -1;
#define VALID(mb) ((mb) >= 0 && (mb) < M)
#define PUSH(kd, mb) (v[k++] = (PpDsInstr) { slot, (kd), (mb) >= 0 ? (mb) % buffers : -1, (mb) })
  for (int slot = 0; slot < slots; slot++)
    {
      int forward;
      int mb = slot_microbatch (P, stage, slot, &forward);
      int has_prev = stage > 0, has_next = stage < P - 1;
      if (forward)
        {
          if (VALID (prev) && has_prev)
            PUSH (PP_DS_SEND_GRAD, prev);
          if (VALID (mb) && has_prev)
            PUSH (PP_DS_RECV_ACTIVATION, mb);
        }
      else
        {
          if (VALID (mb) && has_next)
            PUSH (PP_DS_RECV_GRAD, mb);
          if (VALID (prev) && has_next)
            PUSH (PP_DS_SEND_ACTIVATION, prev);
        }
      if ((stage == 0 || stage == P - 1) && forward && VALID (mb))
        PUSH (PP_DS_LOAD_MICRO_BATCH, mb);
      if (VALID (mb))
        PUSH (forward ? PP_DS_FORWARD_PASS : PP_DS_BACKWARD_PASS, mb);
      if (slot == slots - 1)
        {
          PUSH (PP_DS_REDUCE_TIED_GRADS, -1);
          PUSH (PP_DS_REDUCE_GRADS, -1);
          PUSH (PP_DS_OPTIMIZER_STEP, -1);
        }
      prev = mb;
    }
#undef PUSH
#undef VALID
  *out = v;
  *n = k;
  return PP_OK;
}

PpStatus
pp_ds_print_train_instructions (FILE *f, int P, int M, PpError *err)
{
  for (int r = 0; r < P; r++)
    {
      PpDsInstr *v;
      int n;
      PpStatus st = pp_ds_train_instructions (P, M, r, &v, &n, err);
      if (st != PP_OK)
        return st;
      for (int i = 0; i < n; i++)
        {
          if (i == 0 || v[i].slot != v[i - 1].slot)
            fprintf (f, "%srank %d slot %d:", i ? "\n" : "", r, v[i].slot);
          if (v[i].buffer >= 0)
            fprintf (f, " %s(buffer_id=%d)", pp_ds_kind_name (v[i].kind), v[i].buffer);
          else
            fprintf (f, " %s()", pp_ds_kind_name (v[i].kind));
        }
      fputc ('\n', f);
      free (v);
    }
  return PP_OK;
}
