/* pp-schedule-megatron.c — megatron-core's interleaved schedule
 * (forward_backward_pipelining_with_interleaving), built so that every rank
 * runs the compute actions megatron-core 0.16 runs, in its order.  That makes
 * the plan of a Megatron job match what the job runs; test-megatron-match
 * pins it against orders recorded from megatron-core's own schedule loop.
 *
 * Megatron walks a table of "virtual micro-batches": micro-batches in groups
 * of G = microbatch_group_size_per_vp_stage, each group through chunk 0, then
 * chunk 1, ...; the last group takes what is left (at most G).  Rank r runs
 * 2(P-1-r) + (V-1)G forwards first, then forward/backward pairs, then the
 * remaining backwards; the k-th backward runs chunk V-1-c where the k-th table
 * entry has chunk c, on the oldest micro-batch that chunk holds.  Stage
 * numbering is Megatron's: chunk x P + pp rank.
 *
 * With G = P and M a multiple of P this is PyTorch's Interleaved1F1B; other
 * G (or M) give other orders, which is why it is a schedule of its own.
 * Megatron's non-interleaved schedule is exactly 1F1B (an alias there).
 */
#include "pp-schedule.h"

#include <stdlib.h>

/* Chunk of the k-th entry of the virtual micro-batch table, and its
 * micro-batch. */
static void
table_entry (int M, int V, int G, int k, int *chunk, int *mb)
{
  int group_start = (k / (G * V)) * G;
  int size = group_start + G >= M ? M - group_start : G;
  int within = k - group_start * V;   /* entries before this group: group_start x V */
  *chunk = within / size;
  *mb = group_start + within % size;
}

static PpStatus
megatron_rank (PpSchedule *s, int r, int G)
{
  const int P = s->ranks, M = s->microbatches, V = s->stages_per_rank;
  const int total = M * V;
  int warmup = 2 * (P - 1 - r) + (V - 1) * G;
  int *bwd_mb = calloc ((size_t) V, sizeof *bwd_mb);
  int chunk, mb;

  if (bwd_mb == NULL)
    return PP_ENOMEM;
  if (warmup > total)
    warmup = total;
  for (int k = 0; k < total + warmup; k++)
    {
      if (k < total)
        {
          table_entry (M, V, G, k, &chunk, &mb);
          if (pp_schedule_push (s, r, pp_action (PP_ACT_F, chunk * P + r, mb)) != PP_OK)
            goto oom;
        }
      if (k >= warmup)
        {
          table_entry (M, V, G, k - warmup, &chunk, &mb);
          chunk = V - 1 - chunk;
          if (pp_schedule_push (s, r, pp_action (PP_ACT_B, chunk * P + r, bwd_mb[chunk]++)) != PP_OK)
            goto oom;
        }
    }
  free (bwd_mb);
  return PP_OK;
oom:
  free (bwd_mb);
  return PP_ENOMEM;
}

PpStatus
pp_megatron_check_group (int P, int M, int G, PpError *err)
{
  if (G < P || G > M)
    return pp_error_set (err, PP_EINVAL,
                         "Megatron-Interleaved: microbatch_group_size_per_vp_stage (--group) must "
                         "lie in [P=%d, M=%d], as megatron-core requires (got %d)%s",
                         P, M, G, M < P ? "; use at least P micro-batches" : "");
  int last = M % G;
  if (last > 0 && last < P)
    return pp_error_set (err, PP_EINVAL,
                         "Megatron-Interleaved: M=%d leaves a last group of %d micro-batches "
                         "(M %% group %d), fewer than P=%d, which megatron-core refuses; "
                         "use M=%d or M=%d, or another --group",
                         M, last, G, P, M - last, M + (P - last));
  return PP_OK;
}

PpStatus
pp_schedule_new_megatron_interleaved_group (int P, int M, int V, int G,
                                            PpSchedule **out, PpError *err)
{
  PpStatus st;
  PpSchedule *s;

  *out = NULL;
  if (G <= 0)
    G = P;
  if (V < 1)
    return pp_error_set (err, PP_EINVAL, "Megatron-Interleaved needs at least 1 model chunk per rank (got %d)", V);
  if ((st = pp_megatron_check_group (P, M, G, err)) != PP_OK)
    return st;
  if ((s = pp_schedule_new ("Megatron-Interleaved", P, M, V, PP_PLACE_LOOP)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule");
  /* The group is part of the order: the name says it, so a plan, a
   * suggestion or a trace's description rebuilds the same order. */
  snprintf (s->name, sizeof s->name, "Megatron-Interleaved:group=%d", G);
  for (int r = 0; r < P; r++)
    if (megatron_rank (s, r, G) != PP_OK)
      {
        pp_schedule_free (s);
        return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule");
      }
  *out = s;
  return PP_OK;
}

PpStatus
pp_schedule_new_megatron_interleaved (int P, int M, int V, PpSchedule **out, PpError *err)
{
  return pp_schedule_new_megatron_interleaved_group (P, M, V, P, out, err);
}
