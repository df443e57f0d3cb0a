/* pipescope-cli merge — the traces of one job's ranks, written by each rank
 * process (mpirun ... run --trace FILE gives FILE.rankR), as one trace that
 * info, export, render, suggest and the app read as one run.
 *
 * The description and the plan come from the trace that ran rank 0 (it
 * plans every rank, from costs shared by all); every rank's spans,
 * counters, markers, clock offsets and rank frames come from its own file.
 * Span names are interned per process, so their ids are renumbered.  Items
 * stream through: memory is the string map, not the traces.
 *
 * Ranks that planned without times (a PyTorch job's, each rank its own
 * plan: profile, or pipescope.torch.instrument() in the script) get the
 * job's plan timed with the costs it measured, as profile's trace has it;
 * a bundled run's rank 0 wrote a timed plan already, which stays as it is.
 *
 * Nothing is ever lost to a merge: the output is written beside itself and
 * renamed over only when whole (cli-output.h), never when it is an input;
 * an input given twice, or a rank held by two inputs, is refused (its spans
 * would count twice).
 *
 * Format 1.4: a job whose pipeline ranks each run in several processes
 * (data-parallel replicas) writes a file per process, each with a PROCESS
 * frame (its global rank and place on the mesh) and its frames tagged
 * with it.  Those inputs are told apart by process, not pipeline rank: two
 * processes of one rank merge, each keeping its frames tagged (the frames
 * a process wrote before its PROCESS frame, its RANK frame, get its tag
 * too); one process in two inputs, or two processes claiming one place,
 * is refused as a rank twice is.  Inputs are read one after another, so
 * thousands of them need one descriptor at a time.
 *
 * A process whose place the hook could not read (its PROCESS frame flagged
 * PP_TRACE_PROCESS_UNPLACED, dp 0 in its file) is still a process: before
 * copying, such inputs are numbered as replicas of their pipeline rank in
 * order of global rank (pp_trace_number_unplaced), and their PROCESS
 * frames are written so, the flag kept. */
#include "cli-merge.h"
#include "cli-merge-nccl.h"

#include "cli-commands.h"
#include "cli-common.h"
#include "cli-output.h"
#include "cli-plan.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pp-trace.h"

static void
merge_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli merge -o OUT FILE...\n"
         "\n"
         "Joins the traces of one job's ranks into one trace: under mpirun,\n"
         "'pipescope-cli run --trace job.pptrace' writes job.rank0.pptrace,\n"
         "job.rank1.pptrace, ... one per rank process, and\n"
         "  pipescope-cli merge -o job.pptrace job.rank*.pptrace\n"
         "gives the whole job, each rank's clock aligned to rank 0's by the\n"
         "clock offsets the ranks measured.  The inputs must describe the same\n"
         "run (schedule, ranks, micro-batches, stages per rank), each rank in one\n"
         "of them only.  Ranks that planned without times (a PyTorch job's) get the\n"
         "job's plan timed with the costs they measured, as 'pipescope-cli profile'\n"
         "gives it.  A job whose ranks run in several processes (data-parallel\n"
         "replicas) writes a trace per process (FILE.rankG, G the global rank, each\n"
         "with its place on the job's mesh): those merge by process, each process\n"
         "once and each place held by one process.\n"
         "\n"
         "  -o, --output OUT   the merged trace, written beside OUT and renamed over it\n"
         "                     only when whole (refused if it is one of the inputs)\n", out);
}

/* old name id -> new, open addressing (ids are never 0) */
typedef struct {
  uint32_t *keys, *vals;
  size_t    cap, n;
} IdMap;

static uint32_t
idmap_get (const IdMap *m, uint32_t key)
{
  if (m->cap == 0)
    return 0;
  for (size_t i = (key * 2654435761u) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
    {
      if (m->keys[i] == key)
        return m->vals[i];
      if (m->keys[i] == 0)
        return 0;
    }
}

static bool
idmap_put (IdMap *m, uint32_t key, uint32_t val)
{
  if ((m->n + 1) * 2 > m->cap)
    {
      IdMap big = { NULL, NULL, m->cap ? m->cap * 2 : 64, 0 };
      big.keys = calloc (big.cap, sizeof (uint32_t));
      big.vals = calloc (big.cap, sizeof (uint32_t));
      if (big.keys == NULL || big.vals == NULL)
        {
          free (big.keys);
          free (big.vals);
          return false;
        }
      for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != 0)
          (void) idmap_put (&big, m->keys[i], m->vals[i]);
      free (m->keys);
      free (m->vals);
      *m = big;
    }
  size_t i = (key * 2654435761u) & (m->cap - 1);
  while (m->keys[i] != 0 && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  if (m->keys[i] == 0)
    m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
  return true;
}

/* The description at the head of path, and whether it ran rank 0 (a RANK
 * frame for rank 0 among its first items, or none at all: a trace from
 * before format 1.1 or from threads, which ran every rank).  0, or 1 with
 * one line. */
/* A reader's line about input path, the input named where the line does
 * not name it (the reader's own lines begin "trace: "): among thousands of
 * inputs, the user must find the one that is not a trace. */
static void
say_input_error (const char *path, const char *msg)
{
  size_t n = strlen (path);
  if (strncmp (msg, path, n) == 0 && msg[n] == ':')
    fprintf (stderr, "pipescope-cli: error: %s\n", msg);
  else
    fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, msg);
}

static int
peek (const char *path, PpTraceDescription *desc, bool *has_rank0, int32_t *process,
      PpTraceProcess *place)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem it;
  bool have = false, any_rank = false;
  int status = 0;

  *has_rank0 = false;
  *process = -1;
  if (r == NULL)
    {
      say_input_error (path, err.msg);
      return 1;
    }
  /* a writer puts the description first and the rank frames right after;
   * a process's file has its PROCESS frame among them (-2: several, a
   * merged trace's) */
  for (int i = 0; i < 64; i++)
    {
      if (pp_trace_reader_next (r, &it, &err) != PP_OK)
        {
          say_input_error (path, err.msg);
          status = 1;
          break;
        }
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (it.type == PP_TRACE_ITEM_DESCRIPTION && !have)
        {
          *desc = *it.description;
          have = true;
        }
      else if (it.type == PP_TRACE_ITEM_RANK)
        {
          any_rank = true;
          *has_rank0 |= it.rank_info.rank == 0;
        }
      else if (it.type == PP_TRACE_ITEM_PROCESS)
        {
          *process = *process == -1 ? it.process_info.process : -2;
          *place = it.process_info;
        }
    }
  pp_trace_reader_free (r);
  if (status == 0 && !have)
    {
      fprintf (stderr, "pipescope-cli: error: %s: no run description at its start; "
               "merge takes traces written by pipescope-cli run\n", path);
      return 1;
    }
  if (!any_rank)
    *has_rank0 = true;
  return status;
}

/* What the PLAN frames copied so far hold (Merge.plans). */
enum {
  PLAN_UNTIMED = 1 << 0,   /* a rank's actions without times */
  PLAN_TIMED   = 1 << 1,   /* a rank's actions with the simulator's times */
};

/* copy_items' answer when the output could not be written (not said yet:
 * the caller says it once, naming the inputs kept) */
#define WRITE_FAILED 3

typedef struct {
  const char *const *inputs;
  PpTraceWriter     *w;
  PpError            werr;        /* why w failed, where the output's errno does not say */
  int               *planned;     /* [PP_TRACE_MAX_RANKS]: 1 + the input that planned the rank, 0 if none */
  int               *holder;      /* [PP_TRACE_MAX_RANKS]: 1 + the input holding the rank; 0 */
  int               *by_process;  /* [PP_TRACE_MAX_RANKS]: 1 + an input holding the rank by process */
  /* format 1.4: the PROCESS frames copied, by process; a hash of their
   * places (1 + process, 0 empty) */
  PpTraceProcess    *places;      /* [PP_TRACE_MAX_PROCESSES] */
  int               *place_input; /* [PP_TRACE_MAX_PROCESSES]: 1 + its input, 0 none */
  int32_t           *place_hash;
  size_t             place_cap;   /* a power of two, twice the processes at most */
  PpCliNccl          nccl;        /* NCCL's spans, for the receives' waits within a node */
  int                n_processes;
  int                plans;       /* PLAN_* of the plans copied */
  /* [n inputs]: the place an input's one process is given where the hook
   * could not read it (flag PP_TRACE_PROCESS_UNPLACED), else NULL */
  const PpTraceProcess *const *numbered;
  int                n_unplaced;
  uint32_t           next_name;   /* the next span name id of the merged trace */
} Merge;

/* Input i holds rank r (a RANK frame or a span of it): 0, or 2 with one
 * line when another input held it first. */
static int
hold_rank (Merge *mg, int i, int r)
{
  if (mg->holder[r] == 0)
    mg->holder[r] = i + 1;
  else if (mg->holder[r] != i + 1)
    {
      /* the same rank twice, or two replicas of it whose place on the
       * job's mesh is not in their files (the hook could not read it):
       * either way one of them is too many for one pipeline */
      fprintf (stderr, "pipescope-cli: error: %s and %s both hold pipeline rank %d and neither says "
               "its place on the job's mesh: give one trace of each pipeline rank\n",
               mg->inputs[mg->holder[r] - 1], mg->inputs[i], r);
      return 2;
    }
  return 0;
}

static const char *const dim_name[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };

/* "pp 1 dp 0 tp 0", cp and ep only where the mesh has them. */
static void
place_text (const PpTraceProcess *p, char *buf, size_t size)
{
  size_t n = 0;
  buf[0] = '\0';
  for (int d = 0; d < PP_TRACE_MESH_DIMS && n < size; d++)
    if (d <= PP_TRACE_MESH_TP || p->size[d] > 1)
      n += (size_t) snprintf (buf + n, size - n, "%s%s %d", n ? " " : "", dim_name[d], p->coord[d]);
}

static size_t
place_slot (const Merge *mg, const PpTraceProcess *p)
{
  uint64_t h = 1469598103934665603ull;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    h = (h ^ (uint32_t) p->coord[d]) * 1099511628211ull;
  size_t mask = mg->place_cap - 1;
  size_t i = (size_t) h & mask;
  while (mg->place_hash[i] != 0
         && memcmp (mg->places[mg->place_hash[i] - 1].coord, p->coord, sizeof p->coord) != 0)
    i = (i + 1) & mask;
  return i;
}

/* Input i's PROCESS frame p: 0, or 2 with one line naming both inputs when
 * another input held the process, or another process claims its place. */
static int
hold_process (Merge *mg, int i, const PpTraceProcess *p)
{
  int g = p->process;
  if (mg->place_input[g] != 0)
    {
      if (mg->place_input[g] == i + 1
          && memcmp (mg->places[g].coord, p->coord, sizeof p->coord) == 0)
        return 0;   /* its place said again */
      return pp_cli_usage_error ("%s and %s both hold process %d: give each process's trace once",
                                 mg->inputs[mg->place_input[g] - 1], mg->inputs[i], g);
    }
  size_t k = place_slot (mg, p);
  if (mg->place_hash[k] != 0)
    {
      int other = mg->place_hash[k] - 1;
      char where[96];
      place_text (p, where, sizeof where);
      return pp_cli_usage_error ("%s (process %d) and %s (process %d) both claim the place %s: "
                                 "the job's mesh was read wrong, or a trace is from another run",
                                 mg->inputs[mg->place_input[other] - 1], other, mg->inputs[i], g, where);
    }
  mg->places[g] = *p;
  mg->place_input[g] = i + 1;
  mg->place_hash[k] = g + 1;
  mg->n_processes++;
  return 0;
}

/* Input i holds pipeline rank r by process (its items are tagged) or as a
 * whole (an input without PROCESS frames): the two never mix. */
static int
hold_rank_by_process (Merge *mg, int i, int r)
{
  if (mg->holder[r] != 0)
    return pp_cli_usage_error ("%s holds rank %d as one process and %s holds processes of it: "
                               "give the traces of one run", mg->inputs[mg->holder[r] - 1], r,
                               mg->inputs[i]);
  mg->by_process[r] = i + 1;
  return 0;
}

/* The inputs whose one process was not placed by the hook, numbered as
 * replicas of their pipeline rank (pp_trace_number_unplaced, with the
 * placed processes of the other inputs beside them): numbered[i] points
 * to input i's new place, NULL for an input placed or of several
 * processes.  0, or 1 with one line. */
static int
number_unplaced (const PpTraceProcess *peeked, const int32_t *process, int n, PpTraceProcess *work,
                 const PpTraceProcess **numbered, int *n_unplaced)
{
  size_t k = 0;
  int *of = calloc ((size_t) n + 1, sizeof *of);
  PpError err = { 0 };
  if (of == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      return 1;
    }
  for (int i = 0; i < n; i++)
    if (process[i] >= 0)
      {
        of[k] = i;
        work[k++] = peeked[i];
      }
  if (pp_trace_number_unplaced (work, k, &err) != PP_OK)
    {
      free (of);
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return 1;
    }
  *n_unplaced = 0;
  for (size_t j = 0; j < k; j++)
    if (work[j].flags & PP_TRACE_PROCESS_UNPLACED)
      {
        numbered[of[j]] = &work[j];
        ++*n_unplaced;
      }
  free (of);
  return 0;
}

/* Copies the items of input i into mg->w (not its description; its plans
 * only if take_plan, else only those of ranks no earlier input planned:
 * a PyTorch rank's trace plans its own rank alone, and may plan it again,
 * every plan kept so that the last counts, as in any trace), renumbering
 * span names.  0; 1 or 2 with one line; WRITE_FAILED. */
static int
copy_items (Merge *mg, int i, bool take_plan, int32_t process)
{
  const char *path = mg->inputs[i];
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  IdMap names = { 0 };
  PpTraceItem it;
  int status = 0;

  if (r == NULL)
    {
      say_input_error (path, err.msg);
      return 1;
    }
  while (status == 0)
    {
      if (pp_trace_reader_next (r, &it, &err) != PP_OK)
        {
          say_input_error (path, err.msg);
          status = 1;
          break;
        }
      if (it.type == PP_TRACE_ITEM_END)
        {
          if (it.truncated)
            fprintf (stderr, "pipescope-cli: warning: %s ends inside a frame (a job that was "
                     "killed?); merged what it holds\n", path);
          break;
        }
      if (it.type == PP_TRACE_ITEM_DESCRIPTION)
        continue;
      /* a process's own file: what it wrote before its PROCESS frame is
       * its too */
      if (it.process < 0 && process >= 0)
        it.process = process;
      if (it.type == PP_TRACE_ITEM_PROCESS && mg->numbered != NULL && mg->numbered[i] != NULL
          && it.process_info.process == mg->numbered[i]->process
          && (it.process_info.flags & PP_TRACE_PROCESS_UNPLACED))
        it.process_info = *mg->numbered[i];
      if (it.type == PP_TRACE_ITEM_PROCESS)
        status = hold_process (mg, i, &it.process_info);
      else if (it.type == PP_TRACE_ITEM_RANK || it.type == PP_TRACE_ITEM_SPAN)
        {
          int rank = it.type == PP_TRACE_ITEM_RANK ? it.rank_info.rank : it.span.rank;
          if (it.process >= 0)
            status = hold_rank_by_process (mg, i, rank);
          else if (mg->by_process[rank] != 0)
            status = pp_cli_usage_error ("%s holds processes of rank %d and %s holds it as one "
                                         "process: give the traces of one run",
                                         mg->inputs[mg->by_process[rank] - 1], rank, mg->inputs[i]);
          else
            status = hold_rank (mg, i, rank);
        }
      else if (it.type == PP_TRACE_ITEM_PLAN)
        {
          int pr = it.plan.rank;
          if (!take_plan && ((mg->planned[pr] != 0 && mg->planned[pr] != i + 1) || it.plan.n_actions == 0))
            continue;
          if (it.plan.n_actions > 0 && mg->planned[pr] == 0)
            mg->planned[pr] = i + 1;
          if (it.plan.n_actions > 0)
            mg->plans |= it.plan.has_timeline ? PLAN_TIMED : PLAN_UNTIMED;
        }
      if (status != 0)
        break;
      if (it.type == PP_TRACE_ITEM_STRING)
        {
          uint32_t id = idmap_get (&names, it.string.id);
          if (id == 0)
            {
              if (mg->next_name == UINT32_MAX || !idmap_put (&names, it.string.id, mg->next_name))
                {
                  fprintf (stderr, "pipescope-cli: error: %s: too many span names\n", path);
                  status = 1;
                  break;
                }
              id = mg->next_name++;
            }
          it.string.id = id;
          if (pp_cli_nccl_name (&mg->nccl, id, it.string.name) != 0)
            status = 1;
        }
      else if (it.type == PP_TRACE_ITEM_SPAN && it.span.name_id != 0)
        {
          it.span.name_id = idmap_get (&names, it.span.name_id);
          if (pp_cli_nccl_span (&mg->nccl, &it.span, it.process) != 0)
            status = 1;
        }
      if (status != 0)
        {
          fprintf (stderr, "pipescope-cli: error: out of memory merging %s\n", path);
          break;
        }
      if (pp_trace_write_item (mg->w, &it, &mg->werr) != PP_OK)
        status = WRITE_FAILED;
    }
  free (names.keys);
  free (names.vals);
  pp_trace_reader_free (r);
  return status;
}

/* The one line of a merged trace that could not be written: e (an errno;
 * 0: msg says why), and that out and the inputs are as they were. */
static void
say_not_written (const char *out, int e, const char *msg, const char *const *inputs, int n)
{
  if (pp_cli_no_room (e))
    fprintf (stderr, "pipescope-cli: error: the disk is full: merging into %s failed (%s); "
             "nothing written, the inputs are kept: ", out, strerror (e));
  else
    fprintf (stderr, "pipescope-cli: error: merging into %s failed (%s); nothing written, the "
             "inputs are kept: ", out, e != 0 ? pp_cli_output_strerror (e) : msg);
  for (int i = 0; i < n && i < 8; i++)
    fprintf (stderr, "%s%s", i ? ", " : "", inputs[i]);
  if (n > 8)
    fprintf (stderr, " and %d more", n - 8);
  fputc ('\n', stderr);
}

typedef struct {
  dev_t dev;
  ino_t ino;
  int   i;
} FileId;

static int
cmp_file_id (const void *a, const void *b)
{
  const FileId *x = a, *y = b;
  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return x->i - y->i;
}

/* The user's mistakes that would lose or double a rank's spans, refused
 * before anything is written: out is an input (writing it would truncate
 * that input), or an input is given twice (by two names or links).  0, or
 * 2 with one line. */
static int
check_files (const char *out, const char *const *inputs, int n)
{
  int same = pp_cli_find_same_file (out, inputs, (size_t) n);
  if (same >= 0)
    {
      if (strcmp (inputs[same], out) == 0)
        return pp_cli_usage_error ("-o %s is one of the inputs; write the merged trace elsewhere", out);
      return pp_cli_usage_error ("-o %s is the input %s; write the merged trace elsewhere", out,
                                 inputs[same]);
    }
  /* sorted by file, each input once: a file given twice lies next to itself */
  FileId *ids = calloc ((size_t) n, sizeof *ids);
  int k = 0, status = 0;
  if (ids == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      return 1;
    }
  for (int i = 0; i < n; i++)
    {
      struct stat sb;
      if (stat (inputs[i], &sb) == 0)   /* else reading it says why */
        ids[k++] = (FileId) { sb.st_dev, sb.st_ino, i };
    }
  qsort (ids, (size_t) k, sizeof *ids, cmp_file_id);
  for (int j = 1; j < k && status == 0; j++)
    if (ids[j].dev == ids[j - 1].dev && ids[j].ino == ids[j - 1].ino)
      status = pp_cli_usage_error ("%s and %s are the same file: give each rank's trace once",
                                   inputs[ids[j - 1].i], inputs[ids[j].i]);
  free (ids);
  return status;
}

/* The merged trace at o (a whole file, its writer closed) with the job's
 * plan timed by the costs it measured, where the ranks planned without
 * times: *o becomes the timed copy; or, where the plan cannot be timed
 * (said in one line by pp_cli_write_timed_plan), stays the merged trace as
 * it is.  0; or 1 when the timed copy could not be written (a full disk:
 * the merge fails, why says why). */
static int
time_plan (PpCliOutput *o, char *why, size_t why_size)
{
  PpCliOutput timed;
  if (o->direct)
    return 0;   /* a device or a FIFO takes the merge once: it stays untimed */
  int e = pp_cli_output_open (&timed, o->path, 0600);
  if (e != 0)
    {
      snprintf (why, why_size, "%s", pp_cli_output_strerror (e));
      return 1;
    }
  int st = pp_cli_write_timed_plan (o->tmp, timed.tmp, "merge", why, why_size);
  if (st != 0)
    {
      pp_cli_output_discard (&timed);
      return st == 2;
    }
  pp_cli_output_discard (o);
  *o = timed;
  return 0;
}

int
pp_cli_merge_files (const char *out, const char *const *inputs, int n)
{
  PpTraceDescription *descs = NULL;
  bool *rank0 = NULL;
  int32_t *process = NULL;
  PpTraceProcess *peeked = NULL, *unplaced = NULL;
  const PpTraceProcess **numbered = NULL;
  PpCliOutput o = { .fd = -1 };
  Merge mg = { .inputs = inputs, .next_name = 1 };
  int ref = -1, status, e;

  if ((status = check_files (out, inputs, n)) != 0)
    return status;
  status = 1;
  descs = calloc ((size_t) n, sizeof *descs);
  rank0 = calloc ((size_t) n, sizeof *rank0);
  process = calloc ((size_t) n, sizeof *process);
  peeked = calloc ((size_t) n, sizeof *peeked);
  unplaced = calloc ((size_t) n, sizeof *unplaced);
  numbered = calloc ((size_t) n, sizeof *numbered);
  mg.planned = calloc (PP_TRACE_MAX_RANKS, sizeof *mg.planned);
  mg.holder = calloc (PP_TRACE_MAX_RANKS, sizeof *mg.holder);
  mg.by_process = calloc (PP_TRACE_MAX_RANKS, sizeof *mg.by_process);
  mg.places = calloc (PP_TRACE_MAX_PROCESSES, sizeof *mg.places);
  mg.place_input = calloc (PP_TRACE_MAX_PROCESSES, sizeof *mg.place_input);
  mg.place_cap = 1u << 17;   /* over twice PP_TRACE_MAX_PROCESSES: never full */
  mg.place_hash = calloc (mg.place_cap, sizeof *mg.place_hash);
  if (descs == NULL || rank0 == NULL || process == NULL || peeked == NULL || unplaced == NULL
      || numbered == NULL || mg.planned == NULL || mg.holder == NULL
      || mg.by_process == NULL || mg.places == NULL || mg.place_input == NULL || mg.place_hash == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto done;
    }
  for (int i = 0; i < n; i++)
    {
      const PpTraceDescription *a = &descs[0], *b = &descs[i];
      if (peek (inputs[i], &descs[i], &rank0[i], &process[i], &peeked[i]) != 0)
        goto done;
      /* issue 37: ranks of one run (one job id) that disagree on the
       * number of micro-batches are one job all the same, a broken one
       * (it hangs): merged, said, so that its trace is kept */
      uint64_t id_a = 0, id_b = 0;
      if (i > 0 && a->n_microbatches != b->n_microbatches && strcmp (a->schedule, b->schedule) == 0
          && a->n_ranks == b->n_ranks && a->n_virtual == b->n_virtual
          && pp_trace_file_job_id (inputs[0], &id_a, NULL) == PP_OK
          && pp_trace_file_job_id (inputs[i], &id_b, NULL) == PP_OK && id_a != 0 && id_a == id_b)
        fprintf (stderr, "pipescope-cli: merge: warning: the ranks of one run disagree on the number of "
                 "micro-batches: %s ran M=%d, %s M=%d; merged, the job described as M=%d\n", inputs[i],
                 b->n_microbatches, inputs[0], a->n_microbatches, a->n_microbatches);
      else if (i > 0 && (strcmp (a->schedule, b->schedule) != 0 || a->n_ranks != b->n_ranks
                    || a->n_microbatches != b->n_microbatches || a->n_virtual != b->n_virtual))
        {
          fprintf (stderr, "pipescope-cli: error: %s ran %s P=%d M=%d V=%d, %s ran %s P=%d M=%d V=%d: "
                   "not one job\n", inputs[i], b->schedule, b->n_ranks, b->n_microbatches,
                   b->n_virtual, inputs[0], a->schedule, a->n_ranks, a->n_microbatches, a->n_virtual);
          goto done;
        }
      if (ref < 0 && rank0[i])
        ref = i;
    }
  if (ref < 0)
    ref = 0;
  if (number_unplaced (peeked, process, n, unplaced, numbered, &mg.n_unplaced) != 0)
    goto done;
  mg.numbered = numbered;

  if ((e = pp_cli_output_open (&o, out, 0600)) != 0)
    {
      say_not_written (out, e, NULL, inputs, n);
      goto done;
    }
  if ((mg.w = pp_trace_writer_new_callback (pp_cli_output_write, &o, PP_TRACE_NATIVE, &mg.werr)) == NULL
      || pp_trace_write_description (mg.w, &descs[ref], &mg.werr) != PP_OK)
    status = WRITE_FAILED;
  /* rank 0's trace first: its plans win */
  else if ((status = copy_items (&mg, ref, true, process[ref])) == 0)
    for (int i = 0; i < n && status == 0; i++)
      if (i != ref)
        status = copy_items (&mg, i, false, process[i]);
  /* NCCL's receives within a node: their waits, from the senders' kernels */
  size_t n_nccl = 0;
  if (status == 0 && pp_cli_nccl_write_split (&mg.nccl, mg.w, &mg.next_name, &n_nccl, &mg.werr) != PP_OK)
    status = WRITE_FAILED;
  if (mg.w != NULL && pp_trace_writer_close (mg.w, &mg.werr) != PP_OK && status == 0)
    status = WRITE_FAILED;
  mg.w = NULL;
  if (status == WRITE_FAILED)
    {
      say_not_written (out, o.error, mg.werr.msg, inputs, n);
      status = 1;
    }
  if (status != 0)
    goto done;

  if (mg.plans != 0 && !(mg.plans & PLAN_TIMED) && time_plan (&o, mg.werr.msg, sizeof mg.werr.msg) != 0)
    {
      say_not_written (out, 0, mg.werr.msg, inputs, n);
      status = 1;
      goto done;
    }
  if ((e = pp_cli_output_commit (&o)) != 0)
    {
      say_not_written (out, e, NULL, inputs, n);
      status = 1;
      goto done;
    }
  if (mg.n_processes > 0)
    printf ("merged %d trace%s of %s (P=%d, %d process%s) into %s\n", n, n == 1 ? "" : "s",
            descs[ref].schedule, descs[ref].n_ranks, mg.n_processes, mg.n_processes == 1 ? "" : "es", out);
  else
    printf ("merged %d trace%s of %s (P=%d) into %s\n", n, n == 1 ? "" : "s", descs[ref].schedule,
            descs[ref].n_ranks, out);
  if (n_nccl > 0)
    printf ("NCCL receives within a node: %zu wait span%s (peer_late, transfer) from their senders' "
            "kernels\n", n_nccl, n_nccl == 1 ? "" : "s");
  if (mg.n_unplaced > 0)
    printf ("%d process%s whose place on the job's mesh the hook could not read: shown as replicas "
            "of their pipeline rank in order of global rank (place not read)\n", mg.n_unplaced,
            mg.n_unplaced == 1 ? "" : "es");
  fflush (stdout);
  if (mg.plans == 0)
    fprintf (stderr, "pipescope-cli: merge: the plan stays untimed: no trace holds a plan "
             "(its ranks never wrote one: pipescope_plan)\n");

done:
  pp_trace_writer_close (mg.w, NULL);
  pp_cli_output_discard (&o);   /* no half-merged trace left behind */
  free (descs);
  free (rank0);
  free (process);
  free (peeked);
  free (unplaced);
  free (numbered);
  free (mg.planned);
  free (mg.holder);
  free (mg.by_process);
  free (mg.places);
  free (mg.place_input);
  free (mg.place_hash);
  pp_cli_nccl_clear (&mg.nccl);
  return status;
}

int
pp_cli_merge (int argc, char **argv)
{
  static const struct option options[] = {
    { "output", required_argument, NULL, 'o' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *out = NULL;
  int opt;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":o:h", options, NULL)) != -1)
    switch (opt)
      {
      case 'o': out = optarg; break;
      case 'h': merge_usage (stdout); return 0;
      case ':': return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
      default:
        return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli merge --help'", argv[optind - 1]);
      }
  if (out == NULL)
    return pp_cli_usage_error ("merge needs -o OUT; see 'pipescope-cli merge --help'");
  if (argc - optind < 1)
    return pp_cli_usage_error ("merge needs the traces to join; see 'pipescope-cli merge --help'");
  return pp_cli_merge_files (out, (const char *const *) argv + optind, argc - optind);
}
