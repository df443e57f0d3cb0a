/* pp-action.h — one step of a pipeline schedule: (stage, kind, microbatch).
 *
 * The text form is PyTorch's `_Action` repr (torch.distributed.pipelining):
 * `2F0`, `1I3`, `0W5`, `3SEND_F1`, `0OPT`, FSDP's `1UNSHARD`, `0REDUCE_GRAD`,
 * and for two actions run together `(0F4;3B1)OVERLAP_F_B`.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pp-status.h"

typedef enum {
  PP_ACT_F,           /* forward */
  PP_ACT_B,           /* full backward (I and W together) */
  PP_ACT_I,           /* backward, input gradient only */
  PP_ACT_W,           /* backward, weight gradient only */
  PP_ACT_SEND_F,
  PP_ACT_RECV_F,
  PP_ACT_SEND_B,
  PP_ACT_RECV_B,
  PP_ACT_OVERLAP_F_B, /* a forward and a backward run together (DualPipe) */
  PP_ACT_OPT,         /* optimizer step */
  /* FSDP's actions, as PyTorch's `pipeline_order_with_comms` holds them:
   * data-parallel communication of a stage, no micro-batch. */
  PP_ACT_UNSHARD,
  PP_ACT_RESHARD,
  PP_ACT_REDUCE_GRAD,
  PP_ACT_WAIT_REDUCE_GRAD,
  PP_N_ACT_KINDS
} PpActionKind;

/* An action.  For PP_ACT_OVERLAP_F_B, (stage, microbatch) is the forward
 * sub-action and (sub_kind, sub_stage, sub_microbatch) the backward one
 * (PP_ACT_B or PP_ACT_I).  microbatch is -1 where an action has none (OPT, FSDP's). */
typedef struct {
  int kind;            /* PpActionKind */
  int stage;
  int microbatch;
  int sub_kind;        /* OVERLAP_F_B only */
  int sub_stage;
  int sub_microbatch;
} PpAction;

#define PP_ACTION_STR_MAX 64

static inline PpAction
pp_action (PpActionKind kind, int stage, int microbatch)
{
  PpAction a = { (int) kind, stage, microbatch, -1, -1, -1 };
  return a;
}

static inline PpAction
pp_action_overlap (int f_stage, int f_mb, PpActionKind b_kind, int b_stage, int b_mb)
{
  PpAction a = { PP_ACT_OVERLAP_F_B, f_stage, f_mb, (int) b_kind, b_stage, b_mb };
  return a;
}

/* "F", "B", "SEND_F", "OVERLAP_F_B", ... */
const char *pp_action_kind_name (PpActionKind kind);

/* Is it work on a device (F, B, I, W, OVERLAP_F_B) rather than comms or OPT? */
bool pp_action_is_compute (const PpAction *a);

/* Is it data-parallel communication (UNSHARD, RESHARD, REDUCE_GRAD,
 * WAIT_REDUCE_GRAD)? */
bool pp_action_is_dp_comm (const PpAction *a);

bool pp_action_equal (const PpAction *a, const PpAction *b);

/* Writes PyTorch's repr into buf (at least PP_ACTION_STR_MAX bytes); returns buf. */
char *pp_action_to_string (const PpAction *a, char *buf, size_t size);

/* The name a user reads for an action, the same in every export and
 * report (the Chrome export, `export --format why`, the timeline's block
 * labels): PyTorch's repr for one action ("2F0", "1I3"), and for an
 * overlapped pair its two halves joined, forward first: "0F3+3B1" (where
 * PyTorch's repr, pp_action_to_string's, is "(0F3;3B1)OVERLAP_F_B": that
 * stays the text of schedules and CSVs that PyTorch reads).  A pair whose
 * backward half is unknown (sub_kind neither B nor I) is "0OVERLAP_F_B3".
 * Returns buf (at least PP_ACTION_STR_MAX bytes). */
char *pp_action_to_label (const PpAction *a, char *buf, size_t size);

/* Parses PyTorch's repr (surrounding blanks allowed).  An empty string is
 * PP_EINVAL with no message; anything malformed is PP_EFORMAT with one. */
PpStatus pp_action_parse (const char *text, PpAction *out, PpError *err);
