#include "pp-schedule.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

PpSchedule *
pp_schedule_new (const char *name, int ranks, int microbatches, int stages_per_rank,
                 PpPlacement placement)
{
  PpSchedule *s;
  int n;

  if (ranks <= 0 || microbatches <= 0 || stages_per_rank <= 0)
    return NULL;
  n = ranks * stages_per_rank;

  s = calloc (1, sizeof *s);
  if (s == NULL)
    return NULL;
  snprintf (s->name, sizeof s->name, "%s", name ? name : "custom");
  s->ranks = ranks;
  s->microbatches = microbatches;
  s->stages_per_rank = stages_per_rank;
  s->n_stages = n;
  s->stage_rank = calloc ((size_t) n, sizeof (int));
  s->stage_prev = calloc ((size_t) n, sizeof (int));
  s->stage_next = calloc ((size_t) n, sizeof (int));
  s->stage_mb_lo = calloc ((size_t) n, sizeof (int));
  s->stage_mb_hi = calloc ((size_t) n, sizeof (int));
  s->rank = calloc ((size_t) ranks, sizeof (PpRankActions));
  if (!s->stage_rank || !s->stage_prev || !s->stage_next || !s->stage_mb_lo
      || !s->stage_mb_hi || !s->rank)
    {
      pp_schedule_free (s);
      return NULL;
    }

  for (int st = 0; st < n; st++)
    {
      switch (placement)
        {
        case PP_PLACE_V:
          {
            /* rank r: stages r and 2P-1-r (only meaningful for V == 2) */
            int lap = st / ranks, pos = st % ranks;
            s->stage_rank[st] = (lap % 2 == 0) ? pos : ranks - 1 - pos;
          }
          break;
        case PP_PLACE_LOOP:
        case PP_PLACE_CUSTOM:
        default:
          s->stage_rank[st] = st % ranks;
          break;
        }
      s->stage_prev[st] = st - 1;
      s->stage_next[st] = st + 1 < n ? st + 1 : -1;
      s->stage_mb_lo[st] = 0;
      s->stage_mb_hi[st] = microbatches;
    }
  return s;
}

void
pp_schedule_free (PpSchedule *s)
{
  if (s == NULL)
    return;
  if (s->rank != NULL)
    for (int r = 0; r < s->ranks; r++)
      free (s->rank[r].actions);
  free (s->rank);
  free (s->stage_rank);
  free (s->stage_prev);
  free (s->stage_next);
  free (s->stage_mb_lo);
  free (s->stage_mb_hi);
  free (s);
}

PpStatus
pp_schedule_push (PpSchedule *s, int rank, PpAction a)
{
  PpRankActions *ra;

  if (rank < 0 || rank >= s->ranks)
    return PP_EINVAL;
  ra = &s->rank[rank];
  if (ra->n_actions == ra->capacity)
    {
      int cap = ra->capacity ? ra->capacity * 2 : 64;
      PpAction *n = realloc (ra->actions, (size_t) cap * sizeof *n);
      if (n == NULL)
        return PP_ENOMEM;
      ra->actions = n;
      ra->capacity = cap;
    }
  ra->actions[ra->n_actions++] = a;
  return PP_OK;
}

long
pp_schedule_total_actions (const PpSchedule *s)
{
  long n = 0;
  for (int r = 0; r < s->ranks; r++)
    n += s->rank[r].n_actions;
  return n;
}

static const PpScheduleInfo schedules[] = {
  { "GPipe", "gpipe fill-drain", pp_schedule_new_gpipe, 0, 1,
    "all forwards, then all backwards (Huang et al. 2018)" },
  { "1F1B", "1f1b pipedream-flush", pp_schedule_new_1f1b, 0, 1,
    "one forward, one backward in steady state (PipeDream-Flush)" },
  { "Interleaved1F1B", "interleaved interleaved-1f1b", pp_schedule_new_interleaved_1f1b, 1, 2,
    "1F1B over V looped stages per rank, depth first (Megatron-LM)" },
  { "LoopedBFS", "looped-bfs bfs", pp_schedule_new_looped_bfs, 1, 2,
    "V looped stages per rank, breadth first (Lamy-Poirier 2022)" },
  { "InterleavedZeroBubble", "izb interleaved-zb zb1p", pp_schedule_new_interleaved_zb, 1, 2,
    "interleaved 1F1B with split backward, W filling bubbles (PyTorch's ZB1P)" },
  { "ZB-H1", "zbh1 zb_h1", pp_schedule_new_zb_h1, 0, 1,
    "Zero Bubble handcrafted H1: 1F1B memory, a third of its bubble" },
  { "ZB-H2", "zbh2 zb_h2", pp_schedule_new_zb_h2, 0, 1,
    "Zero Bubble handcrafted H2: twice 1F1B memory, no bubble between steps" },
  { "ZBV", "ZBVZeroBubble zb-v zb_v", pp_schedule_new_zbv, 0, 2,
    "Zero Bubble V: two stages per rank in a V shape" },
  { "DualPipeV", "dualpipe-v dualpipe_v", pp_schedule_new_dualpipev, 0, 2,
    "DeepSeek's DualPipe folded into a V: overlapped F and B" },
  { "DualPipe", "dualpipe", pp_schedule_new_dualpipe, 0, 2,
    "DeepSeek's bidirectional DualPipe: two model copies, both directions" },
  { NULL, NULL, NULL, 0, 0, NULL },
};

const PpScheduleInfo *
pp_schedule_list (void)
{
  return schedules;
}

static bool
alias_matches (const char *aliases, const char *name)
{
  size_t n = strlen (name);
  const char *p = aliases;
  while (*p)
    {
      while (*p == ' ')
        p++;
      const char *e = p;
      while (*e && *e != ' ')
        e++;
      if ((size_t) (e - p) == n && strncasecmp (p, name, n) == 0)
        return true;
      p = e;
    }
  return false;
}

const PpScheduleInfo *
pp_schedule_lookup (const char *name)
{
  if (name == NULL)
    return NULL;
  for (const PpScheduleInfo *i = schedules; i->name; i++)
    if (strcasecmp (i->name, name) == 0 || alias_matches (i->aliases, name))
      return i;
  return NULL;
}

PpStatus
pp_schedule_generate (const char *name, int ranks, int microbatches, int stages_per_rank,
                      PpSchedule **out, PpError *err)
{
  const PpScheduleInfo *info = pp_schedule_lookup (name);

  *out = NULL;
  if (info == NULL)
    {
      char list[512] = "";
      size_t len = 0;
      for (const PpScheduleInfo *i = schedules; i->name; i++)
        len += (size_t) snprintf (list + len, len < sizeof list ? sizeof list - len : 0,
                                  "%s%s", i == schedules ? "" : ", ", i->name);
      return pp_error_set (err, PP_EINVAL, "unknown schedule '%s'; known schedules: %s",
                           name ? name : "(null)", list);
    }
  if (ranks < 2)
    return pp_error_set (err, PP_EINVAL, "%s needs at least 2 ranks (got %d)", info->name, ranks);
  if (ranks > 4096)
    return pp_error_set (err, PP_EINVAL, "%s: at most 4096 ranks are supported (got %d)", info->name, ranks);
  if (microbatches < 1)
    return pp_error_set (err, PP_EINVAL, "%s needs at least 1 micro-batch (got %d)", info->name, microbatches);
  if (microbatches > 1 << 20)
    return pp_error_set (err, PP_EINVAL, "%s: at most %d micro-batches are supported (got %d)",
                         info->name, 1 << 20, microbatches);
  if (stages_per_rank <= 0)
    stages_per_rank = info->default_v;
  if (stages_per_rank > 64)
    return pp_error_set (err, PP_EINVAL, "%s: at most 64 stages per rank are supported (got %d)",
                         info->name, stages_per_rank);
  return info->generate (ranks, microbatches, stages_per_rank, out, err);
}
