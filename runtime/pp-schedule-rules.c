/* pp-schedule-rules.c — the rules every schedule obeys (pp-schedule-rules.h). */
#include "pp-schedule-rules.h"

#include <stdlib.h>

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
  if (kind == PP_ACT_OPT || pp_action_is_dp_comm (a))
    return PP_OK;   /* no micro-batch: the stage's, once a step */
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
    case PP_ACT_F: bit = PP_SEEN_F; break;
    case PP_ACT_B: bit = PP_SEEN_B; break;
    case PP_ACT_I: bit = PP_SEEN_I; break;
    case PP_ACT_W: bit = PP_SEEN_W; break;
    default: return PP_OK;
    }
  uint8_t *cell = &seen[(size_t) stage * (size_t) s->microbatches + (size_t) mb];
  if (*cell & bit)
    return pp_error_set (err, PP_EFORMAT, "rank %d, step %d: %s runs a second time",
                         rank, step, pp_action_to_string (a, buf, sizeof buf));
  if ((bit == PP_SEEN_B && (*cell & (PP_SEEN_I | PP_SEEN_W))) || ((bit & (PP_SEEN_I | PP_SEEN_W)) && (*cell & PP_SEEN_B)))
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

PpStatus
pp_schedule_check_structure (const PpSchedule *s, uint8_t **seen_out, PpError *err)
{
  PpStatus st;
  uint8_t *seen;

  if (seen_out)
    *seen_out = NULL;
  if (s == NULL || s->ranks <= 0 || s->n_stages <= 0 || s->microbatches <= 0)
    return pp_error_set (err, PP_EINVAL, "empty schedule");
  for (int st_i = 0; st_i < s->n_stages; st_i++)
    if (s->stage_rank[st_i] < 0 || s->stage_rank[st_i] >= s->ranks
        || s->stage_mb_lo[st_i] < 0 || s->stage_mb_hi[st_i] > s->microbatches
        || s->stage_mb_lo[st_i] > s->stage_mb_hi[st_i]
        || s->stage_prev[st_i] < -1 || s->stage_prev[st_i] >= s->n_stages
        || s->stage_next[st_i] < -1 || s->stage_next[st_i] >= s->n_stages)
      return pp_error_set (err, PP_EFORMAT, "stage %d is described inconsistently", st_i);
  if ((seen = calloc ((size_t) s->n_stages * (size_t) s->microbatches, 1)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while checking the schedule");
  if ((st = walk (s, seen, err)) != PP_OK)
    {
      free (seen);
      return st;
    }
  if (seen_out)
    *seen_out = seen;
  else
    free (seen);
  return PP_OK;
}

int
pp_schedule_dependencies (const PpSchedule *s, int kind, int stage, PpDependency out[2])
{
  int n = 0, prev = s->stage_prev[stage], next = s->stage_next[stage];

  switch (kind)
    {
    case PP_ACT_F:
      if (prev >= 0)
        out[n++] = (PpDependency) { PP_ACT_F, prev,
                                    s->stage_rank[prev] != s->stage_rank[stage] ? prev : -1 };
      break;
    case PP_ACT_B:
    case PP_ACT_I:
      out[n++] = (PpDependency) { PP_ACT_F, stage, -1 };
      if (next >= 0)
        out[n++] = (PpDependency) { PP_ACT_I, next,
                                    s->stage_rank[next] != s->stage_rank[stage] ? stage : -1 };
      break;
    case PP_ACT_W:
      out[n++] = (PpDependency) { PP_ACT_I, stage, -1 };
      break;
    default:
      break;
    }
  return n;
}
