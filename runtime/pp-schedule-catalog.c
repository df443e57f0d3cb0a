/* pp-schedule-catalog.c — the schedules by name: their list, aliases and
 * generators, and the limits every request is checked against. */
#include "pp-schedule.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const PpScheduleInfo schedules[] = {
  { "GPipe", "gpipe fill-drain", pp_schedule_new_gpipe, 0, 1,
    "all forwards, then all backwards (Huang et al. 2018)" },
  /* megatron-core's forward_backward_pipelining_without_interleaving runs
   * exactly this order (warm-up P-1-r forwards, then F,B pairs), and so
   * does DeepSpeed's TrainSchedule, stage by stage: aliases. */
  { "1F1B", "1f1b pipedream-flush megatron-1f1b deepspeed-1f1b", pp_schedule_new_1f1b, 0, 1,
    "one forward, one backward in steady state (PipeDream-Flush; Megatron-1F1B)" },
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
  { "Megatron-Interleaved", "megatron-interleaved megatron-vpp", pp_schedule_new_megatron_interleaved, 1, 2,
    "megatron-core's interleaved 1F1B, micro-batches in groups of --group (default P)", 1 },
  { NULL, NULL, NULL, 0, 0, NULL, 0 },
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

/* Where a name's parameters start (":group=3"), or its end. */
static size_t
base_length (const char *name)
{
  const char *colon = strchr (name, ':');
  return colon ? (size_t) (colon - name) : strlen (name);
}

const PpScheduleInfo *
pp_schedule_lookup (const char *name)
{
  char base[64];
  size_t n;

  if (name == NULL)
    return NULL;
  n = base_length (name);
  if (n >= sizeof base)
    return NULL;
  memcpy (base, name, n);
  base[n] = '\0';
  for (const PpScheduleInfo *i = schedules; i->name; i++)
    if (strcasecmp (i->name, base) == 0 || alias_matches (i->aliases, base))
      return name[n] == '\0' || i->takes_group ? i : NULL;
  return NULL;
}

int
pp_schedule_name_group (const char *name)
{
  const char *p = name ? strchr (name, ':') : NULL;
  long g = 0;
  char *end;

  if (p == NULL)
    return 0;
  if (strncasecmp (p + 1, "group=", 6) != 0)
    return -1;
  p += 7;
  if (*p < '0' || *p > '9')
    return -1;
  g = strtol (p, &end, 10);
  return *end != '\0' || g < 1 || g > 1 << 20 ? -1 : (int) g;
}

PpStatus
pp_schedule_generate (const char *name, int ranks, int microbatches, int stages_per_rank,
                      PpSchedule **out, PpError *err)
{
  return pp_schedule_generate_group (name, ranks, microbatches, stages_per_rank, 0, out, err);
}

PpStatus
pp_schedule_generate_group (const char *name, int ranks, int microbatches, int stages_per_rank,
                            int group, PpSchedule **out, PpError *err)
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
  if (info->takes_group)
    {
      int named = pp_schedule_name_group (name);
      if (named < 0)
        return pp_error_set (err, PP_EINVAL, "'%s': write the group as %s:group=N, N a whole number >= 1",
                             name, info->name);
      if (group > 0 && named > 0 && group != named)
        return pp_error_set (err, PP_EINVAL, "'%s' says group %d but --group is %d; give one of them",
                             name, named, group);
      return pp_schedule_new_megatron_interleaved_group (ranks, microbatches, stages_per_rank,
                                                         group > 0 ? group : named, out, err);
    }
  if (group > 0)
    return pp_error_set (err, PP_EINVAL,
                         "%s takes no group (--group is megatron-core's microbatch_group_size_per_vp_stage: "
                         "use -s Megatron-Interleaved)", info->name);
  return info->generate (ranks, microbatches, stages_per_rank, out, err);
}

/* ---- what a request costs ---- */

static int
effective_v (const PpScheduleInfo *info, int stages_per_rank)
{
  if (!info->takes_v || stages_per_rank <= 0)
    return info->default_v;
  return stages_per_rank;
}

double
pp_schedule_estimate_actions (const char *name, int ranks, int microbatches, int stages_per_rank)
{
  const PpScheduleInfo *info = pp_schedule_lookup (name);
  if (info == NULL || ranks < 0 || microbatches < 0)
    return -1;
  /* in double: 4096 x 64 x 2^20 x 3 is past any integer type's comfort */
  return (double) ranks * effective_v (info, stages_per_rank) * (double) microbatches * 3.0;
}

double
pp_mem_available_bytes (void)
{
  FILE *f = fopen ("/proc/meminfo", "r");
  char line[256];
  double kb = -1;

  if (f == NULL)
    return -1;
  while (fgets (line, sizeof line, f) != NULL)
    if (sscanf (line, "MemAvailable: %lf kB", &kb) == 1)
      break;
  fclose (f);
  return kb < 0 ? -1 : kb * 1024.0;
}

PpStatus
pp_schedule_check_size (const char *name, int ranks, int microbatches, int stages_per_rank,
                        double bytes_per_action, PpError *err)
{
  double actions = pp_schedule_estimate_actions (name, ranks, microbatches, stages_per_rank);
  if (actions < 0)
    return PP_OK;   /* an unknown name: pp_schedule_generate says which exist */
  double need = actions * bytes_per_action, avail = pp_mem_available_bytes ();
  if (avail < 0 || need <= avail)
    return PP_OK;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const PpScheduleInfo *info = pp_schedule_lookup (name);
  return pp_error_set (err, PP_ENOMEM,
                       "%s at P=%d, V=%d, M=%d is about %.3g actions, needing about %.1f GiB; the "
                       "machine has %.1f GiB available; lower --ranks, --microbatches or --stages-per-rank",
                       info->name, ranks, effective_v (info, stages_per_rank), microbatches, actions,
                       need / gib, avail / gib);
}

/* PyTorch's class for each of the schedules it has (pp-schedules-pytorch.c
 * builds them as PyTorch runs them). */
const char *
pp_schedule_pytorch_class (const char *name)
{
  static const struct { const char *ours, *theirs; } classes[] = {
    { "GPipe", "ScheduleGPipe" }, { "1F1B", "Schedule1F1B" },
    { "Interleaved1F1B", "ScheduleInterleaved1F1B" }, { "LoopedBFS", "ScheduleLoopedBFS" },
    { "InterleavedZeroBubble", "ScheduleInterleavedZeroBubble" }, { "ZBV", "ScheduleZBVZeroBubble" },
    { "DualPipeV", "ScheduleDualPipeV" }, { "ZB-H1", "" }, { "ZB-H2", "" },
  };
  const PpScheduleInfo *info = name != NULL ? pp_schedule_lookup (name) : NULL;
  if (info == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
    if (strcmp (classes[i].ours, info->name) == 0)
      return classes[i].theirs;
  return NULL;
}

/* ---- frameworks ---- */

PpFramework
pp_framework_of_description (const char *schedule, const char *model)
{
  if (schedule != NULL && strncasecmp (schedule, "Megatron-", 9) == 0)
    return PP_FRAMEWORK_MEGATRON;
  if (schedule != NULL && strncasecmp (schedule, "DeepSpeed-", 10) == 0)
    return PP_FRAMEWORK_DEEPSPEED;
  if (model != NULL && strncmp (model, "PyTorch ", 8) == 0)
    return PP_FRAMEWORK_PYTORCH;
  return PP_FRAMEWORK_PIPESCOPE;
}

bool
pp_schedule_runs_on (const char *name, PpFramework framework)
{
  const PpScheduleInfo *info = pp_schedule_lookup (name);
  if (info == NULL)
    return false;
  switch (framework)
    {
    case PP_FRAMEWORK_PYTORCH:
      return pp_schedule_pytorch_class (info->name) != NULL;
    case PP_FRAMEWORK_MEGATRON:
      return strcmp (info->name, "1F1B") == 0 || info->takes_group;
    case PP_FRAMEWORK_DEEPSPEED:
      /* PipelineEngine's TrainSchedule; its DualPipeVEngine runs F and B
       * one after the other and W inside B, which DualPipeV here does not
       * model: not offered */
      return strcmp (info->name, "1F1B") == 0;
    case PP_FRAMEWORK_PIPESCOPE:
    default:
      return !info->takes_group;
    }
}

const char *
pp_framework_name (PpFramework framework)
{
  switch (framework)
    {
    case PP_FRAMEWORK_PYTORCH: return "PyTorch";
    case PP_FRAMEWORK_MEGATRON: return "megatron-core";
    case PP_FRAMEWORK_DEEPSPEED: return "DeepSpeed";
    case PP_FRAMEWORK_PIPESCOPE:
    default: return "pipescope";
    }
}
