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
 * a bundled run's rank 0 wrote a timed plan already, which stays as it is. */
#include "cli-commands.h"
#include "cli-common.h"
#include "cli-plan.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
         "run (schedule, ranks, micro-batches, stages per rank).  Ranks that\n"
         "planned without times (a PyTorch job's) get the job's plan timed with\n"
         "the costs they measured, as 'pipescope-cli profile' gives it.\n"
         "\n"
         "  -o, --output OUT   the merged trace (refused if it is one of the inputs)\n", out);
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
static int
peek (const char *path, PpTraceDescription *desc, bool *has_rank0)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem it;
  bool have = false, any_rank = false;
  int status = 0;

  *has_rank0 = false;
  if (r == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return 1;
    }
  /* a writer puts the description first and the rank frames right after */
  for (int i = 0; i < 64; i++)
    {
      if (pp_trace_reader_next (r, &it, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
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

/* What the PLAN frames copied so far hold (copy_items' *plans). */
enum {
  PLAN_UNTIMED = 1 << 0,   /* a rank's actions without times */
  PLAN_TIMED   = 1 << 1,   /* a rank's actions with the simulator's times */
};

/* Copies the items of path into w (not its description; its plans only if
 * take_plan, else only those of ranks no trace copied before planned:
 * a PyTorch rank's trace plans its own rank alone), renumbering span names
 * from *next_name.  planned[PP_TRACE_MAX_RANKS] marks the ranks planned so
 * far; *plans gets the PLAN_* of the plans copied.  0, or 1 with one line. */
static int
copy_items (const char *path, PpTraceWriter *w, bool take_plan, bool *planned, int *plans,
            uint32_t *next_name)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  IdMap names = { 0 };
  PpTraceItem it;
  int status = 0;

  if (r == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      return 1;
    }
  for (;;)
    {
      PpStatus rc = pp_trace_reader_next (r, &it, &err);
      if (rc != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
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
      if (it.type == PP_TRACE_ITEM_PLAN)
        {
          int pr = it.plan.rank;
          if (!take_plan && (planned[pr] || it.plan.n_actions == 0))
            continue;
          planned[pr] |= it.plan.n_actions > 0;
          if (it.plan.n_actions > 0)
            *plans |= it.plan.has_timeline ? PLAN_TIMED : PLAN_UNTIMED;
        }
      if (it.type == PP_TRACE_ITEM_STRING)
        {
          uint32_t id = idmap_get (&names, it.string.id);
          if (id == 0)
            {
              if (*next_name == UINT32_MAX || !idmap_put (&names, it.string.id, *next_name))
                {
                  fprintf (stderr, "pipescope-cli: error: %s: too many span names\n", path);
                  status = 1;
                  break;
                }
              id = (*next_name)++;
            }
          it.string.id = id;
        }
      else if (it.type == PP_TRACE_ITEM_SPAN && it.span.name_id != 0)
        it.span.name_id = idmap_get (&names, it.span.name_id);
      if (pp_trace_write_item (w, &it, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: writing the merged trace: %s\n", err.msg);
          status = 1;
          break;
        }
    }
  free (names.keys);
  free (names.vals);
  pp_trace_reader_free (r);
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
  PpTraceDescription *descs = NULL;
  bool *rank0 = NULL, *planned = NULL;
  PpTraceWriter *w = NULL;
  PpError err = { 0 };
  int opt, n, ref = -1, status = 1, plans = 0;
  uint32_t next_name = 1;

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
  n = argc - optind;
  if (n < 1)
    return pp_cli_usage_error ("merge needs the traces to join; see 'pipescope-cli merge --help'");
  for (int i = optind; i < argc; i++)
    if (strcmp (argv[i], out) == 0)
      return pp_cli_usage_error ("-o %s is one of the inputs; write the merged trace elsewhere", out);

  descs = calloc ((size_t) n, sizeof *descs);
  rank0 = calloc ((size_t) n, sizeof *rank0);
  if (descs == NULL || rank0 == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto done;
    }
  for (int i = 0; i < n; i++)
    {
      const PpTraceDescription *a = &descs[0], *b = &descs[i];
      if (peek (argv[optind + i], &descs[i], &rank0[i]) != 0)
        goto done;
      if (i > 0 && (strcmp (a->schedule, b->schedule) != 0 || a->n_ranks != b->n_ranks
                    || a->n_microbatches != b->n_microbatches || a->n_virtual != b->n_virtual))
        {
          fprintf (stderr, "pipescope-cli: error: %s ran %s P=%d M=%d V=%d, %s ran %s P=%d M=%d V=%d: "
                   "not one job\n", argv[optind + i], b->schedule, b->n_ranks, b->n_microbatches,
                   b->n_virtual, argv[optind], a->schedule, a->n_ranks, a->n_microbatches, a->n_virtual);
          goto done;
        }
      if (ref < 0 && rank0[i])
        ref = i;
    }
  if (ref < 0)
    ref = 0;

  if ((w = pp_trace_writer_new_path (out, PP_TRACE_NATIVE, &err)) == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", out, err.msg);
      goto done;
    }
  if (pp_trace_write_description (w, &descs[ref], &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", out, err.msg);
      goto done;
    }
  /* rank 0's trace first: its plans win */
  if ((planned = calloc (PP_TRACE_MAX_RANKS, sizeof *planned)) == NULL
      || copy_items (argv[optind + ref], w, true, planned, &plans, &next_name) != 0)
    goto done;
  for (int i = 0; i < n; i++)
    if (i != ref && copy_items (argv[optind + i], w, false, planned, &plans, &next_name) != 0)
      goto done;
  {
    PpTraceWriter *tmp = w;
    w = NULL;
    if (pp_trace_writer_close (tmp, &err) != PP_OK)
      {
        fprintf (stderr, "pipescope-cli: error: %s: %s\n", out, err.msg);
        goto done;
      }
  }
  printf ("merged %d trace%s of %s (P=%d) into %s\n", n, n == 1 ? "" : "s", descs[ref].schedule,
          descs[ref].n_ranks, out);
  fflush (stdout);
  status = 0;   /* from here on the merged trace stands, timed or not */
  if (plans == 0)
    fprintf (stderr, "pipescope-cli: merge: the plan stays untimed: no trace holds a plan "
             "(its ranks never wrote one: pipescope_plan)\n");
  else if (!(plans & PLAN_TIMED))
    {
      /* the merged trace, then the same with the timed plan in its place */
      char timed[PATH_MAX];
      if (snprintf (timed, sizeof timed, "%s.timing", out) >= (int) sizeof timed)
        fprintf (stderr, "pipescope-cli: merge: %s: path too long; the plan stays untimed\n", out);
      else if (pp_cli_write_timed_plan (out, timed, "merge") == 0 && rename (timed, out) != 0)
        {
          fprintf (stderr, "pipescope-cli: merge: %s: %s; the plan stays untimed\n", out,
                   strerror (errno));
          unlink (timed);
        }
    }

done:
  if (w != NULL)
    {
      pp_trace_writer_close (w, NULL);
      unlink (out);   /* no half-merged trace left behind */
    }
  free (descs);
  free (rank0);
  free (planned);
  return status;
}
