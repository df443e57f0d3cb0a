/* pp-closed-form.c — the bubble a schedule has by formula, where one is
 * known (declared in pp-simulate.h beside the simulation they check). */
#include "pp-simulate.h"

#include <string.h>

double
pp_bubble_closed_form_gpipe (int ranks, int microbatches)
{
  return (double) (ranks - 1) / (double) (microbatches + ranks - 1);
}

double
pp_bubble_closed_form_interleaved (int ranks, int microbatches, int stages_per_rank)
{
  if (microbatches < ranks || stages_per_rank < 1)
    return -1;
  return (double) (ranks - 1) / ((double) stages_per_rank * microbatches + ranks - 1);
}

double
pp_bubble_closed_form (const char *schedule, int ranks, int microbatches, int stages_per_rank)
{
  const PpScheduleInfo *info = schedule ? pp_schedule_lookup (schedule) : NULL;
  if (info == NULL || ranks < 1 || microbatches < 1)
    return -1;
  int V = stages_per_rank > 1 ? stages_per_rank : 1;
  if (strcmp (info->name, "Interleaved1F1B") == 0)
    return pp_bubble_closed_form_interleaved (ranks, microbatches, V);
  if ((strcmp (info->name, "GPipe") == 0 || strcmp (info->name, "1F1B") == 0) && V == 1)
    return pp_bubble_closed_form_gpipe (ranks, microbatches);
  return -1;
}
