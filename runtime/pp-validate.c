/* pp-validate.c — is a schedule something a pipeline can run? */
#include "pp-schedule-private.h"
#include "pp-simulate.h"

#include <stdint.h>
#include <stdlib.h>

enum { SEEN_F = 1, SEEN_B = 2, SEEN_I = 4, SEEN_W = 8 };

static PpStatus
check_stage_mb (const PpSchedule *s, int rank, int step, int kind, int stage, int mb,
                const PpAction *a, PpError *err)
{
  char buf[PP_ACTION_STR_MAX];

  if (stage < 0 || stage >= s->n_stages)
    return pp_error_set (err, PP_EFORMAT,
                         "rank %d, step %d: %s names stage %d, but the schedule has stages 0..%d",
                         rank, step, pp_action_to_string (a, buf, sizeof buf), stage, s->n_stages - 1);
  if (s->stage_rank[stage] != rank)
    return pp_error_set (err, PP_EFORMAT,
                         "rank %d, step %d: %s runs stage %d, which belongs to rank %d",
                         rank, step, pp_action_to_string (a, buf, sizeof buf), stage,
                         s->stage_rank[stage]);
  if (kind == PP_ACT_OPT)
    return PP_OK;
  if (mb < s->stage_mb_lo[stage] || mb >= s->stage_mb_hi[stage])
    return pp_error_set (err, PP_EFORMAT,
                         "rank %d, step %d: %s names micro-batch %d, but stage %d sees %d..%d",
                         rank, step, pp_action_to_string (a, buf, sizeof buf), mb, stage,
                         s->stage_mb_lo[stage], s->stage_mb_hi[stage] - 1);
  return PP_OK;
}

static PpStatus
mark (const PpSchedule *s, uint8_t *seen, int rank, int step, int kind, int stage, int mb,
      const PpAction *a, PpError *err)
{
  char buf[PP_ACTION_STR_MAX];
  int bit;

  switch (kind)
    {
    case PP_ACT_F: bit = SEEN_F; break;
    case PP_ACT_B: bit = SEEN_B; break;
    case PP_ACT_I: bit = SEEN_I; break;
    case PP_ACT_W: bit = SEEN_W; break;
    default: return PP_OK;
    }
  uint8_t *cell = &seen[(size_t) stage * (size_t) s->microbatches + (size_t) mb];
  if (*cell & bit)
    return pp_error_set (err, PP_EFORMAT, "rank %d, step %d: %s runs a second time",
                         rank, step, pp_action_to_string (a, buf, sizeof buf));
  if ((bit == SEEN_B && (*cell & (SEEN_I | SEEN_W))) || ((bit & (SEEN_I | SEEN_W)) && (*cell & SEEN_B)))
    return pp_error_set (err, PP_EFORMAT,
                         "rank %d, step %d: %s mixes a full backward B with split I/W for stage %d, micro-batch %d",
                         rank, step, pp_action_to_string (a, buf, sizeof buf), stage, mb);
  *cell |= (uint8_t) bit;
  return PP_OK;
}

static PpStatus
walk (const PpSchedule *s, uint8_t *seen, PpError *err)
{
  PpStatus st;

  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        if (a->kind < 0 || a->kind >= PP_N_ACT_KINDS)
          return pp_error_set (err, PP_EFORMAT, "rank %d, step %d: unknown action kind %d", r, k, a->kind);
        if (a->kind == PP_ACT_OVERLAP_F_B)
          {
            if (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I)
              return pp_error_set (err, PP_EFORMAT,
                                   "rank %d, step %d: OVERLAP_F_B must pair a forward with B or I", r, k);
            if ((st = check_stage_mb (s, r, k, PP_ACT_F, a->stage, a->microbatch, a, err)) != PP_OK
                || (st = check_stage_mb (s, r, k, a->sub_kind, a->sub_stage, a->sub_microbatch, a, err)) != PP_OK)
              return st;
            if (seen && ((st = mark (s, seen, r, k, PP_ACT_F, a->stage, a->microbatch, a, err)) != PP_OK
                         || (st = mark (s, seen, r, k, a->sub_kind, a->sub_stage, a->sub_microbatch, a, err)) != PP_OK))
              return st;
          }
        else
          {
            if ((st = check_stage_mb (s, r, k, a->kind, a->stage, a->microbatch, a, err)) != PP_OK)
              return st;
            if (seen && (st = mark (s, seen, r, k, a->kind, a->stage, a->microbatch, a, err)) != PP_OK)
              return st;
          }
      }
  return PP_OK;
}

static uint8_t *
new_seen (const PpSchedule *s)
{
  return calloc ((size_t) s->n_stages * (size_t) s->microbatches, 1);
}

/* Structure checks; fills seen (stage x micro-batch bits) for the caller. */
static PpStatus
check_structure_seen (const PpSchedule *s, uint8_t **seen_out, PpError *err)
{
  PpStatus st;
  uint8_t *seen;

  if (s == NULL || s->ranks <= 0 || s->n_stages <= 0 || s->microbatches <= 0)
    return pp_error_set (err, PP_EINVAL, "empty schedule");
  for (int st_i = 0; st_i < s->n_stages; st_i++)
    if (s->stage_rank[st_i] < 0 || s->stage_rank[st_i] >= s->ranks
        || s->stage_mb_lo[st_i] < 0 || s->stage_mb_hi[st_i] > s->microbatches
        || s->stage_mb_lo[st_i] > s->stage_mb_hi[st_i]
        || s->stage_prev[st_i] < -1 || s->stage_prev[st_i] >= s->n_stages
        || s->stage_next[st_i] < -1 || s->stage_next[st_i] >= s->n_stages)
      return pp_error_set (err, PP_EFORMAT, "stage %d is described inconsistently", st_i);
  if ((seen = new_seen (s)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while checking the schedule");
  if ((st = walk (s, seen, err)) != PP_OK)
    {
      free (seen);
      return st;
    }
  *seen_out = seen;
  return PP_OK;
}

PpStatus
pp_schedule_check_structure (const PpSchedule *s, PpError *err)
{
  uint8_t *seen = NULL;
  PpStatus st = check_structure_seen (s, &seen, err);
  free (seen);
  return st;
}

PpStatus
pp_schedule_validate (const PpSchedule *s, PpError *err)
{
  PpStatus st;
  uint8_t *seen;
  PpCostModel *unit;
  PpSimulation *sim = NULL;

  if ((st = check_structure_seen (s, &seen, err)) != PP_OK)
    return st;
  for (int stage = 0; stage < s->n_stages; stage++)
    for (int mb = s->stage_mb_lo[stage]; mb < s->stage_mb_hi[stage]; mb++)
      {
        uint8_t c = seen[(size_t) stage * (size_t) s->microbatches + (size_t) mb];
        const char *missing = NULL;
        if (!(c & SEEN_F))
          missing = "F";
        else if (!(c & (SEEN_B | SEEN_I | SEEN_W)))
          missing = "backward (B, or I and W)";
        else if ((c & SEEN_I) && !(c & SEEN_W))
          missing = "W (it has I)";
        else if ((c & SEEN_W) && !(c & SEEN_I))
          missing = "I (it has W)";
        if (missing)
          {
            free (seen);
            return pp_error_set (err, PP_EFORMAT, "stage %d (rank %d), micro-batch %d has no %s",
                                 stage, s->stage_rank[stage], mb, missing);
          }
      }
  free (seen);

  /* Dependencies across ranks: simulate with unit costs; a stall is a deadlock. */
  if ((unit = pp_cost_model_new_uniform (s->n_stages, 1, 2, 1, 0)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while checking the schedule");
  st = pp_simulate_checked (s, unit, &sim, err);
  pp_simulation_free (sim);
  pp_cost_model_free (unit);
  return st;
}
