/* cli-trace-chrome-tracks.c — the Chrome export's tracks and names: the
 * track (pid) of a span, an item and a plan and the pid written for it,
 * each track's name and rows, and a block's name as every report gives it. */
#include "cli-trace-private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli-processes.h"

/* The Chrome export's track (pid) of a pipeline rank's rows: the rank
 * itself, or in a trace with places its shown process's. */
static int
rank_pid (const Trace *t, int r)
{
  return t->rank_pid != NULL && r >= 0 && r < t->n_rank_pid ? t->rank_pid[r] : r;
}

/* The track of span s (in t->spans): its process's in a trace with places. */
int
span_pid (const Trace *t, const PpSpan *s)
{
  const PpTraceProcess *p = t->rank_pid != NULL ? span_place (t, (size_t) (s - t->spans)) : NULL;
  return p != NULL ? p->process : rank_pid (t, s->rank);
}

/* The track of an item process wrote for pipeline rank r (a counter, a
 * step marker): the process's own where it is placed, else the rank's. */
int
item_pid (const Trace *t, int32_t process, int r)
{
  if (t->rank_pid != NULL && process >= 0 && t->proc_at != NULL && t->proc_at[process] >= 0)
    return process;
  return rank_pid (t, r);
}

/* The track of pipeline rank r's plan: in a trace with places one of its
 * own, the pipeline's (every replica runs it), past the process and rank
 * tracks; else the rank's. */
int
plan_pid (const Trace *t, int r)
{
  return t->rank_pid != NULL ? PLAN_PID_BASE + r : r;
}

/* The pid the Chrome export writes for track pid: its process's real pid
 * with --clock realtime, else pid itself. */
int
out_pid (const Trace *t, int pid)
{
  return t->out_pids != NULL && pid >= 0 && (size_t) pid < t->n_out_pids ? t->out_pids[pid] : pid;
}

/* A span's action kind (PpActionKind), for the spans the exports name as
 * actions: the blocks (F, B, I, W, OVERLAP_F_B), the optimizer, and FSDP's
 * data-parallel actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD,
 * named with their stage as PyTorch names them: "0UNSHARD"); -1 for the
 * rest (transfers, waits, device work), which keep their kind's name. */
int
action_kind_of_span (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: return PP_ACT_F;
    case PP_SPAN_B: return PP_ACT_B;
    case PP_SPAN_I: return PP_ACT_I;
    case PP_SPAN_W: return PP_ACT_W;
    case PP_SPAN_OVERLAP_F_B: return PP_ACT_OVERLAP_F_B;
    case PP_SPAN_OPT: return PP_ACT_OPT;
    case PP_SPAN_UNSHARD: return PP_ACT_UNSHARD;
    case PP_SPAN_RESHARD: return PP_ACT_RESHARD;
    case PP_SPAN_REDUCE_GRAD: return PP_ACT_REDUCE_GRAD;
    case PP_SPAN_WAIT_REDUCE_GRAD: return PP_ACT_WAIT_REDUCE_GRAD;
    default: return -1;
    }
}

/* What the export calls a block or a planned action: the label every
 * report gives it (pp_action_to_label: "2F3", "0F3+3B1"), the stage left
 * out where each rank runs one stage ("F3"); the kind alone without a
 * micro-batch ("OPT"), but a data-parallel action with its stage
 * ("0UNSHARD"). */
void
action_name (const PpAction *a, int V, char *buf, size_t size)
{
  if (pp_action_is_dp_comm (a) && a->stage >= 0)
    pp_action_to_string (a, buf, size);   /* PyTorch's repr, "0UNSHARD", as the timeline labels it */
  else if (a->microbatch < 0)
    snprintf (buf, size, "%s", pp_action_kind_name (a->kind));
  else if (V <= 1 && a->kind != PP_ACT_OVERLAP_F_B)
    snprintf (buf, size, "%s%d", pp_action_kind_name (a->kind), a->microbatch);
  else
    pp_action_to_label (a, buf, size);
}

static const int row_order[N_ROWS] = { [ROW_STEPS] = 0, [ROW_COMPUTE] = 1, [ROW_HOST] = 2, [ROW_PLAN] = 3,
                                       [ROW_COMM] = 4, [ROW_DEVICE] = 5 };

/* One track's names: the process (pid) and its used rows. */
static void
write_track (FILE *f, bool *first, int pid, const char *name, int64_t sort, unsigned rows, int rank, int out)
{
  static const char *row_names[N_ROWS] = { "compute", "communication", "device", "steps", "plan", "host" };
  int plan_of_pipeline = pid >= PLAN_PID_BASE;
  pid = out;   /* the number written (out_pid) */
  fprintf (f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
           *first ? "" : ",", pid);
  json_string (f, name);
  fprintf (f, "}}");
  *first = false;
  fprintf (f, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%" PRId64 "}}",
           pid, sort);
  for (int row = 0; row < N_ROWS; row++)
    if (rows & (1u << row))
      {
        fprintf (f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                 pid, row);
        if (row == ROW_PLAN)
          fprintf (f, "\"plan rank %d%s\"}}", rank, plan_of_pipeline ? " (the pipeline's, every replica)" : "");
        else
          fprintf (f, "\"%s\"}}", row_names[row]);
        fprintf (f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"sort_index\":%d}}", pid, row, row_order[row]);
      }
}

static const PpTraceProcess *sort_places_of;   /* cmp_place's trace (qsort has no user data) */

/* Processes in the order of their places: pp, then dp, tp, cp, ep. */
static int
cmp_place (const void *a, const void *b)
{
  const PpTraceProcess *x = &sort_places_of[*(const size_t *) a], *y = &sort_places_of[*(const size_t *) b];
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (x->coord[d] != y->coord[d])
      return x->coord[d] < y->coord[d] ? -1 : 1;
  return (x->process > y->process) - (x->process < y->process);
}

/* The tracks' names: a rank each ("rank R"); in a trace with places
 * (format 1.4) a process each, named by its place ("pp 1 · dp 0 · tp 0
 * (process 2)", "place not read" where the hook could not read it), the
 * plan of each pipeline rank on a track of its own after its processes
 * ("plan · pp 1"), and "rank R" for a rank no process placed.  A track
 * with no event gets no name (rows[pid] 0). */
int
write_tracks (FILE *f, const Trace *t, const unsigned char *rows, int n_ranks, bool *first)
{
  char name[200];
  if (t->rank_pid == NULL)
    {
      for (int r = 0; r < n_ranks; r++)
        if (rows[r] != 0)
          {
            snprintf (name, sizeof name, "rank %d", r);
            write_track (f, first, r, name, r, rows[r], r, out_pid (t, r));
          }
      return 0;
    }
  int32_t size[PP_TRACE_MESH_DIMS];
  size_t *order = malloc ((t->n_procs + 1) * sizeof *order);
  if (order == NULL)
    return -1;
  mesh_sizes (t, size);
  for (size_t i = 0; i < t->n_procs; i++)
    order[i] = i;
  sort_places_of = t->procs;
  qsort (order, t->n_procs, sizeof *order, cmp_place);
  int64_t sort = 0;
  for (size_t k = 0; k <= t->n_procs; k++)
    {
      /* after the last process of a pipeline rank: its plan */
      int prev = k > 0 ? t->procs[order[k - 1]].rank : -1;
      if (k > 0 && (k == t->n_procs || t->procs[order[k]].rank != prev) && prev < n_ranks
          && rows[plan_pid (t, prev)] != 0)
        {
          snprintf (name, sizeof name, "plan \u00b7 pp %d (pipeline rank %d, every replica)", prev, prev);
          write_track (f, first, plan_pid (t, prev), name, sort++, rows[plan_pid (t, prev)], prev,
                       out_pid (t, plan_pid (t, prev)));
        }
      if (k == t->n_procs)
        break;
      const PpTraceProcess *p = &t->procs[order[k]];
      if (rows[p->process] == 0)
        continue;
      size_t n = 0;
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (d <= PP_TRACE_MESH_TP || size[d] > 1)
          n += (size_t) snprintf (name + n, sizeof name - n, "%s%s %d", d ? " \u00b7 " : "", pp_cli_mesh_dim[d],
                                  p->coord[d]);
      snprintf (name + n, sizeof name - n, " (process %d%s)", p->process,
                p->flags & PP_TRACE_PROCESS_UNPLACED ? ", place not read: dp by global rank" : "");
      write_track (f, first, p->process, name, sort++, rows[p->process], p->rank, out_pid (t, p->process));
    }
  free (order);
  for (int r = 0; r < n_ranks; r++)
    {
      if (rank_pid (t, r) >= PP_TRACE_MAX_RANKS && rows[rank_pid (t, r)] != 0)
        {
          snprintf (name, sizeof name, "rank %d", r);
          write_track (f, first, rank_pid (t, r), name, sort++, rows[rank_pid (t, r)], r, out_pid (t, rank_pid (t, r)));
        }
      /* a rank no process placed: its plan after it */
      if (rank_pid (t, r) >= PP_TRACE_MAX_RANKS && rows[plan_pid (t, r)] != 0)
        {
          snprintf (name, sizeof name, "plan \u00b7 rank %d", r);
          write_track (f, first, plan_pid (t, r), name, sort++, rows[plan_pid (t, r)], r, out_pid (t, plan_pid (t, r)));
        }
    }
  return 0;
}
