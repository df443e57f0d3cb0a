/* pp-schedule-rules.h — the rules every schedule obeys, in one place: which
 * stages and micro-batches its actions may name, and what each part of the
 * work waits for.  The validator and the simulator both follow them (and
 * the critical path walks them back); neither asks the other. */
#pragma once

#include <stdint.h>

#include "pp-schedule.h"

/* What has run of one (stage, micro-batch), as bits. */
enum { PP_SEEN_F = 1, PP_SEEN_B = 2, PP_SEEN_I = 4, PP_SEEN_W = 8 };

/* Every action names a stage that exists and lives on the rank that runs it,
 * and a micro-batch that stage sees; no (stage, micro-batch, kind) twice, and
 * never a full B beside split I/W.  Checked before anything indexes arrays
 * by stage and micro-batch.  With seen non-NULL, *seen gets what ran of each
 * (stage, micro-batch), PP_SEEN_* bits at stage * microbatches + mb, for the
 * caller to free. */
PpStatus pp_schedule_check_structure (const PpSchedule *s, uint8_t **seen, PpError *err);

/* One thing a part of the work on a micro-batch waits for, besides its
 * rank's previous action: the same micro-batch's forward (kind PP_ACT_F) or
 * input gradient (kind PP_ACT_I: the end of B or of I) on stage.  boundary:
 * the stage boundary the result crosses to reach the waiting stage (an index
 * into PpCostModel.comm, the lower stage of the pair), -1 when both stages
 * are on one rank and nothing is sent. */
typedef struct {
  int kind;
  int stage;
  int boundary;
} PpDependency;

/* What the kind (F, B, I or W) of stage waits for, into out; their count
 * (0 to 2).  F: the previous stage's F.  B and I: this stage's F, then the
 * next stage's input gradient.  W: this stage's I. */
int pp_schedule_dependencies (const PpSchedule *s, int kind, int stage, PpDependency out[2]);
