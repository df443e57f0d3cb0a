/* cli-trace-info.c — pipescope-cli info: a trace summarised (its
 * description, ranks, steps, spans, bubbles, loss, collectives, idle and
 * idle by cause). */
#include "cli-commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli-common.h"
#include "cli-processes.h"
#include "cli-replicas.h"
#include "cli-trace-private.h"
#include "pp-analysis-loss.h"
#include "pp-schedule-rules.h"
#include "pp-timeline-fold.h"
#include "pp-why-runtime.h"

/* The RANK and CLOCK_OFFSET items by rank, in file order within a rank:
 * the last of a rank is the one that counts. */
static int
rank_item_rank (const PpTraceItem *it)
{
  return it->type == PP_TRACE_ITEM_RANK ? it->rank_info.rank : it->clock_offset.rank;
}

static int
cmp_rank_item (const void *a, const void *b)
{
  const PpTraceItem *x = *(const PpTraceItem *const *) a, *y = *(const PpTraceItem *const *) b;
  int rx = rank_item_rank (x), ry = rank_item_rank (y);
  if (rx != ry)
    return rx < ry ? -1 : 1;
  if (x->type != y->type)
    return x->type < y->type ? -1 : 1;
  return x < y ? -1 : x > y;   /* file order: the items are one array */
}

/* "rank R: host H pid N" for every rank whose RANK frame the trace holds,
 * with its clock offset where it has one; nothing for an older trace.
 * One sort, not a pass over the items per rank: a trace may hold tens of
 * thousands of ranks' frames. */
static void
print_ranks (const Trace *t)
{
  size_t n = 0;
  const PpTraceItem **by_rank = malloc ((t->n_rank_items ? t->n_rank_items : 1) * sizeof *by_rank);
  if (by_rank == NULL)
    return;
  for (size_t i = 0; i < t->n_rank_items; i++)
    if (t->rank_items[i].type == PP_TRACE_ITEM_RANK || t->rank_items[i].type == PP_TRACE_ITEM_CLOCK_OFFSET)
      by_rank[n++] = &t->rank_items[i];
  qsort (by_rank, n, sizeof *by_rank, cmp_rank_item);
  for (size_t i = 0; i < n;)
    {
      int r = rank_item_rank (by_rank[i]);
      const PpTraceItem *last = NULL;
      int64_t off = 0;
      for (; i < n && rank_item_rank (by_rank[i]) == r; i++)
        if (by_rank[i]->type == PP_TRACE_ITEM_RANK)
          last = by_rank[i];
        else
          off = by_rank[i]->clock_offset.offset_ns;
      if (last == NULL || r < 0)
        continue;
      char host[4 * sizeof last->rank_info.host];
      printf ("rank %d: host %s pid %d", r,
              last->rank_info.host[0] ? pp_cli_text (last->rank_info.host, host, sizeof host) : "?",
              last->rank_info.pid);
      if (off != 0)
        printf (", clock %+.3f ms to rank 0's", (double) off / 1e6);
      printf ("\n");
    }
  free (by_rank);
}

/* "replica dp 0 of 2 shown" (and what that means for the numbers after
 * it) in a trace where pipeline ranks have several processes: the
 * analysis is the timeline's, one replica's. */
static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

static void
print_shown_replica (const Trace *t)
{
  int32_t size[PP_TRACE_MESH_DIMS];
  if (t->rank_pid == NULL || t->n_all_spans == t->n_spans)
    return;
  mesh_sizes (t, size);
  int32_t shown[PP_TRACE_MESH_DIMS];
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    shown[d] = INT32_MAX;
  for (int r = 0; r < t->n_rank_pid; r++)
    if (t->rank_pid[r] < PP_TRACE_MAX_PROCESSES && t->proc_at[t->rank_pid[r]] >= 0)
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        {
          int c = t->procs[t->proc_at[t->rank_pid[r]]].coord[d];
          shown[d] = c < shown[d] ? c : shown[d];
        }
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (shown[d] == INT32_MAX)
      shown[d] = 0;
  /* the timeline folds the replicas; the bubble below is one replica's,
   * idle by cause the median replica's */
  int64_t per = pp_trace_mesh_count (size, PP_TRACE_MESH_DP);
  /* a trace of some of the job's replicas (one node's: dp 4 and 5 of 8)
   * says which it holds */
  int32_t *dps = malloc ((t->n_procs + 1) * sizeof *dps);
  int n_dps = 0;
  for (size_t i = 0; dps != NULL && i < t->n_procs; i++)
    dps[n_dps++] = t->procs[i].coord[PP_TRACE_MESH_DP];
  if (dps != NULL && n_dps > 0)
    {
      qsort (dps, (size_t) n_dps, sizeof *dps, cmp_i32);
      int k = 0;
      for (int i = 0; i < n_dps; i++)
        if (k == 0 || dps[k - 1] != dps[i])
          dps[k++] = dps[i];
      n_dps = k;
    }
  if (per == size[PP_TRACE_MESH_DP] && n_dps > 0 && n_dps < per)
    {
      char words[96];
      pp_timeline_dps_words (dps, n_dps, words, sizeof words);
      printf ("replicas held: %d of %lld (%s; a trace of part of the job, as one node's)\n", n_dps,
              (long long) per, words);
    }
  free (dps);
  char count[64];
  if (per == size[PP_TRACE_MESH_DP] && n_dps > 0 && n_dps < per)
    snprintf (count, sizeof count, "%d of %lld", n_dps, (long long) per);
  else
    snprintf (count, sizeof count, "%lld", (long long) per);
  printf ("%s %s a pipeline rank, folded in the timeline (median, mark to the latest end)%s; "
          "the steps, step times and bubble below are the median copy's (by step length, as the critical "
          "path's), the idle over the whole trace one replica's (dp %d, each pipeline rank's "
          "lowest place), idle by cause is over the %d copies of the pipeline, the spread over replicas after "
          "them; %zu of the %zu spans, every process's in the exports\n",
          count, per == size[PP_TRACE_MESH_DP] ? "replicas" : "processes",
          t->n_unplaced > 0 ? " (place not read from the job: replicas numbered by global rank)" : "",
          shown[PP_TRACE_MESH_DP], t->n_replicas, t->n_spans, t->n_all_spans);
}

static int
cmp_interval (const void *a, const void *b)
{
  const int64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The job's loss, first to last (pp-analysis-loss.h: over the replicas
 * as the framework reduces it; the median step is print_step_bubbles',
 * the one analysis's). */
static void
print_loss (const Trace *t)
{
  PpAnalysisLoss *a = pp_analysis_loss_new ();
  char line[256];
  if (a == NULL)
    return;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      int32_t g = t->counter_process != NULL ? t->counter_process[i] : -1;
      const PpTraceProcess *p = g >= 0 && t->proc_at != NULL && t->proc_at[g] >= 0 ? &t->procs[t->proc_at[g]] : NULL;
      pp_analysis_loss_add (a, &t->counters[i], p != NULL ? p->coord[PP_TRACE_MESH_DP] : -1);
    }
  if (pp_analysis_loss_describe (a, line, sizeof line)[0])
    printf ("%s\n", line);
  pp_analysis_loss_free (a);
}

/* One process's (or, without places, one rank's) collective counters. */
typedef struct {
  int32_t process, rank;
  double  calls, bytes;
  int32_t n_calls, n_bytes;
} Collectives;

static int
cmp_collectives (const void *a, const void *b)
{
  const Collectives *x = a, *y = b;
  if (x->process != y->process)
    return x->process < y->process ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* "collectives inside the blocks (per step mean, total):" and a line a
 * process (format 1.5: one COLLECTIVE_CALLS and one COLLECTIVE_BYTES value
 * a step a process, that step's total); nothing when the trace has none.
 * Counters are grouped by their own process, so replicas stay apart.  Past
 * PP_CLI_PROCESSES_LISTED processes, unless list, one line of their least
 * and largest instead. */
static void
print_collectives (const Trace *t, bool list)
{
  size_t n = 0;
  for (size_t i = 0; i < t->n_counters; i++)
    n += (t->counters[i].kind == PP_COUNTER_COLLECTIVE_CALLS || t->counters[i].kind == PP_COUNTER_COLLECTIVE_BYTES)
         && isfinite (t->counters[i].value);
  if (n == 0)
    return;
  Collectives *c = calloc (n, sizeof *c);
  if (c == NULL)
    return;
  size_t k = 0;
  for (size_t i = 0; i < t->n_counters; i++)
    {
      const PpCounter *x = &t->counters[i];
      bool calls = x->kind == PP_COUNTER_COLLECTIVE_CALLS;
      if ((!calls && x->kind != PP_COUNTER_COLLECTIVE_BYTES) || !isfinite (x->value))
        continue;
      c[k] = (Collectives) { t->counter_process[i], x->rank, calls ? x->value : 0, calls ? 0 : x->value,
                             calls, !calls };
      k++;
    }
  qsort (c, n, sizeof *c, cmp_collectives);
  printf ("collectives inside the blocks (tensor-parallel calls the hook counted; a step's mean, and in all):\n");
  /* each process's sums, in place */
  size_t n_groups = 0;
  for (size_t i = 0; i < n;)
    {
      Collectives s = c[i];
      size_t j = i + 1;
      for (; j < n && c[j].process == s.process && c[j].rank == s.rank; j++)
        {
          s.calls += c[j].calls;
          s.bytes += c[j].bytes;
          s.n_calls += c[j].n_calls;
          s.n_bytes += c[j].n_bytes;
        }
      c[n_groups++] = s;
      i = j;
    }
  if (!list && n_groups > PP_CLI_PROCESSES_LISTED)
    {
      /* the least and the largest a step, and whose */
      const Collectives *lo[2] = { NULL, NULL }, *hi[2] = { NULL, NULL };
      for (size_t i = 0; i < n_groups; i++)
        for (int b = 0; b < 2; b++)
          {
            const Collectives *x = &c[i];
            if ((b ? x->n_bytes : x->n_calls) == 0)
              continue;
            double v = b ? x->bytes / x->n_bytes : x->calls / x->n_calls;
            if (lo[b] == NULL || v < (b ? lo[b]->bytes / lo[b]->n_bytes : lo[b]->calls / lo[b]->n_calls))
              lo[b] = x;
            if (hi[b] == NULL || v > (b ? hi[b]->bytes / hi[b]->n_bytes : hi[b]->calls / hi[b]->n_calls))
              hi[b] = x;
          }
      printf ("  %zu processes (info --processes lists each):", n_groups);
      if (lo[0] != NULL)
        printf (" calls a step %.1f (process %d) to %.1f (process %d);", lo[0]->calls / lo[0]->n_calls,
                lo[0]->process, hi[0]->calls / hi[0]->n_calls, hi[0]->process);
      if (lo[1] != NULL)
        printf (" bytes a step %.3f MiB (process %d) to %.3f MiB (process %d)",
                lo[1]->bytes / lo[1]->n_bytes / 1048576.0, lo[1]->process,
                hi[1]->bytes / hi[1]->n_bytes / 1048576.0, hi[1]->process);
      printf ("\n");
      free (c);
      return;
    }
  for (size_t i = 0; i < n_groups; i++)
    {
      Collectives s = c[i];
      const PpTraceProcess *p = s.process >= 0 && t->proc_at != NULL && t->proc_at[s.process] >= 0
                                ? &t->procs[t->proc_at[s.process]] : NULL;
      if (p != NULL)
        printf ("  process %d (pp %d dp %d tp %d):", p->process, p->coord[PP_TRACE_MESH_PP],
                p->coord[PP_TRACE_MESH_DP], p->coord[PP_TRACE_MESH_TP]);
      else
        printf ("  rank %d:", s.rank);
      if (s.n_calls > 0)
        printf (" calls %.1f a step, %.0f in all (%d step%s);", s.calls / s.n_calls, s.calls, s.n_calls,
                s.n_calls == 1 ? "" : "s");
      if (s.n_bytes > 0)
        printf (" bytes %.3f MiB a step, %.3f MiB in all (%d step%s)", s.bytes / s.n_bytes / 1048576.0,
                s.bytes / 1048576.0, s.n_bytes, s.n_bytes == 1 ? "" : "s");
      printf ("\n");
    }
  free (c);
}

/* The steps analysed, the median step and each rank's bubble inside the
 * steps' compute windows (what `run` prints and what compares with a
 * plan's bubble a step); nothing when the trace has no step. */
static void
print_step_bubbles (const Trace *t, int n_ranks)
{
  PpAnalysisSteps a;
  step_analysis_of (t, &a);
  if (a.n_ranks < n_ranks)
    n_ranks = a.n_ranks;
  if (a.n_steps > 0)
    {
      char what[160], pc[32];
      printf ("steps analysed: %s\n", pp_analysis_describe_steps (&a, what, sizeof what));
      printf ("median step: %.3f ms (the whole step: first work start to last end, every rank)\n", a.median_step / 1e6);
      printf (PP_ANALYSIS_MEASURED_LABEL " (the median over the steps analysed of the share of the step a rank "
              "runs no work):\n");
      for (int r = 0; r < n_ranks; r++)
        printf ("  rank %d bubble: %s\n", r, pp_analysis_format_percent (pc, sizeof pc, a.bubble[r], 1));
      printf ("mean bubble a step: %s\n", pp_analysis_format_percent (pc, sizeof pc, a.bubble_mean, 1));
    }
  pp_analysis_steps_clear (&a);
}

/* The step numbers of t's spans (one a run of equal ones: the spans come
 * step after step) and markers, into v when not NULL; returns how many. */
static size_t
step_numbers (const Trace *t, int32_t *v)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (t->spans[i].step >= 0 && (i == 0 || t->spans[i].step != t->spans[i - 1].step))
      {
        if (v)
          v[k] = t->spans[i].step;
        k++;
      }
  for (size_t i = 0; i < t->n_markers; i++)
    if (t->markers[i].step >= 0)
      {
        if (v)
          v[k] = t->markers[i].step;
        k++;
      }
  return k;
}

/* The steps the trace holds: how many step numbers its spans and markers
 * carry, and the first and last.  A record that attached late holds steps
 * 3 to 9, seven of them, not ten; a step skipped is not counted.  Returns
 * -1 out of memory. */
static int64_t
count_steps (const Trace *t, int32_t *first, int32_t *last)
{
  size_t n = step_numbers (t, NULL);
  int32_t *v = malloc ((n + 1) * sizeof *v);
  if (v == NULL)
    return -1;
  step_numbers (t, v);
  qsort (v, n, sizeof *v, cmp_i32);
  int64_t count = 0;
  for (size_t i = 0; i < n; i++)
    count += i == 0 || v[i] != v[i - 1];
  *first = n ? v[0] : 0;
  *last = n ? v[n - 1] : 0;
  free (v);
  return count;
}

static void
info_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli info FILE [--processes]\n"
         "\n"
         "Summarises a trace: the run's description, ranks, steps, span counts per\n"
         "kind, each rank's bubble a step (the median over the steps of the share of\n"
         "the whole step, from its first work start to its last end (its data-parallel\n"
         "work and optimizer step included), in which the rank works not at all: the number run, the app and render give, and what compares\n"
         "with the plan's bubble), its idle share over the whole trace (set-up and\n"
         "the time between steps included), dropped events and\n"
         "whether the file was cut short.  For a run whose schedule it can rebuild:\n"
         "each rank's idle time a step split by cause (schedule, imbalance,\n"
         "transfers, runtime), each stage's share of the critical path, the slowest\n"
         "stage and, for the bundled model, the partition that balances it with its\n"
         "predicted step time ('export --format why' writes all of it as JSON).\n"
         "\n"
         "  --processes   a line for every process of a job of several (its place,\n"
         "                host and pid, and its collectives); past 16 processes\n"
         "                info otherwise says them in one line: 'processes: 2048\n"
         "                (pp 16 \u00d7 dp 128 \u00d7 tp 1) on 256 hosts', and their\n"
         "                collectives in one line of the least and the largest\n", out);
}

int
pp_cli_info (int argc, char **argv)
{
  static const struct option options[] = {
    { "processes", no_argument, NULL, 'P' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *path;
  Trace t;
  int opt, n_ranks;
  bool list_processes = false;
  size_t per_kind[PP_N_SPAN_KINDS + 1] = { 0 };
  int64_t gstart = INT64_MAX, gend = INT64_MIN;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":h", options, NULL)) != -1)
    {
      if (opt == 'h')
        {
          info_usage (stdout);
          return 0;
        }
      if (opt == 'P')
        {
          list_processes = true;
          continue;
        }
      return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli info --help'", argv[optind - 1]);
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "info", &path)) != 0)
    return rc_args;
  AppView av;
  if (app_view_read (path, false, &av) != 0 || trace_load (path, &t) != 0)
    return 1;

  n_ranks = n_ranks_of (&t);
  /* a file cut short is said first: every number below is of what it holds */
  if (t.truncated)
    printf ("trace: %s (truncated: the file ends inside a frame; what follows is what it holds)\n", path);
  else
    printf ("trace: %s\n", path);
  if (t.has_desc)
    {
      /* the trace's strings escaped: a file cannot write to the terminal */
      char text[4][4 * sizeof t.desc.cmdline + 1];
      printf ("schedule: %s (P=%d, M=%d, V=%d)\n", pp_cli_text (t.desc.schedule, text[0], sizeof text[0]),
              t.desc.n_ranks, t.desc.n_microbatches, t.desc.n_virtual);
      printf ("backend: %s\nhost: %s\nmodel: %s\ncommand: %s\n", pp_cli_text (t.desc.backend, text[0], sizeof text[0]),
              pp_cli_text (t.desc.host, text[1], sizeof text[1]), pp_cli_text (t.desc.model, text[2], sizeof text[2]),
              pp_cli_text (t.desc.cmdline, text[3], sizeof text[3]));
      {
        time_t secs = (time_t) (t.desc.start_unix_ns / 1000000000);
        struct tm tm;
        char when[64] = "unknown";
        if (t.desc.start_unix_ns > 0 && gmtime_r (&secs, &tm) != NULL)
          strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        printf ("started: %s\n", when);
      }
      /* a trace of processes names each with its host and pid below; a
       * pipeline rank's RANK frames are its replicas', the last one's only */
      if (t.n_procs == 0)
        print_ranks (&t);
    }
  else
    printf ("description: none\n");
  printf ("ranks: %d\n", n_ranks);
  pp_cli_print_processes (t.procs, t.n_procs, t.n_unplaced, list_processes);
  {
    int32_t first, last;
    int64_t n_steps = count_steps (&t, &first, &last);
    if (n_steps < 0)
      {
        fprintf (stderr, "pipescope-cli: error: out of memory\n");
        trace_clear (&t);
        return 1;
      }
    /* numbered 0 to N-1 it goes without saying; otherwise say which */
    if (n_steps == 0 || (first == 0 && last == n_steps - 1))
      printf ("steps: %" PRId64 "\n", n_steps);
    else
      printf ("steps: %" PRId64 " (%" PRId32 " to %" PRId32 ")\n", n_steps, first, last);
  }
  printf ("plans: %d\n", t.n_plans);
  /* The planned bubble of the last plan of every rank, when they all carry
   * the simulator's timeline (a later plan replaces an earlier one). */
  {
    bool all = n_ranks > 0 && t.cap_plans >= n_ranks;
    double ps = INFINITY, pe = -INFINITY;
    for (int r = 0; all && r < n_ranks; r++)
      {
        if (!t.plans[r].seen || !t.plans[r].has_timeline)
          all = false;
        else
          {
            if (t.plans[r].start < ps) ps = t.plans[r].start;
            if (t.plans[r].end > pe) pe = t.plans[r].end;
          }
      }
    if (all && pe > ps)
      {
        printf ("bubble, %s (the last plan of each rank, one step %.3f ms):",
                pp_analysis_plan_label (pp_analysis_plan_of_backend (t.has_desc ? t.desc.backend : NULL)),
                (pe - ps) * 1e3);
        for (int r = 0; r < n_ranks; r++)
          printf ("%s rank %d %.1f%%", r ? "," : "", r, 100.0 * (1.0 - t.plans[r].busy / (pe - ps)));
        putchar ('\n');
      }
  }
  if (t.has_desc)
    {
      /* the third bubble, named as the app's Stats table names it */
      double cf = pp_bubble_closed_form (t.desc.schedule, t.desc.n_ranks, t.desc.n_microbatches, t.desc.n_virtual);
      if (cf >= 0)
        printf ("bubble, %s: %.1f%%\n", pp_analysis_plan_label (PP_ANALYSIS_PLAN_CLOSED_FORM), 100.0 * cf);
    }

  for (size_t i = 0; i < t.n_all_spans; i++)
    {
      const PpSpan *sp = &t.spans[i];
      per_kind[sp->kind < PP_N_SPAN_KINDS ? sp->kind : PP_N_SPAN_KINDS]++;
      if (i >= t.n_spans)
        continue;   /* another replica's: in the count, not the analysis */
      if (sp->start_ns < gstart)
        gstart = sp->start_ns;
      if (sp->end_ns > gend)
        gend = sp->end_ns;
    }
  printf ("spans: %zu", t.n_all_spans);
  {
    bool first = true;
    for (int k = 0; k <= PP_N_SPAN_KINDS; k++)
      if (per_kind[k])
        {
          printf ("%s%s %zu", first ? " (" : ", ", k < PP_N_SPAN_KINDS ? kind_name (k) : "other",
                  per_kind[k]);
          first = false;
        }
    if (!first)
      putchar (')');
    putchar ('\n');
  }
  print_shown_replica (&t);

  if (t.n_spans > 0 && gend > gstart && n_ranks > 0)
    {
      /* Differences of file times as unsigned: end >= start, so exact. */
      double len = (double) ((uint64_t) gend - (uint64_t) gstart), sum = 0;
      int with = 0;   /* ranks with spans */
      int64_t (*iv)[2] = malloc ((t.n_spans + 1) * sizeof *iv);
      /* The spans bucketed by rank once (counting sort): each rank then
       * reads its own, not every span (ranks x spans). */
      size_t *first = calloc ((size_t) n_ranks + 1, sizeof *first);
      if (iv == NULL || first == NULL)
        {
          free (iv);
          free (first);
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          trace_clear (&t);
          return 1;
        }
      for (size_t i = 0; i < t.n_spans; i++)
        if (t.spans[i].rank < n_ranks && pp_span_kind_is_work (t.spans[i].kind)
            && t.spans[i].end_ns > t.spans[i].start_ns)
          first[t.spans[i].rank + 1]++;
      for (int r = 0; r < n_ranks; r++)
        first[r + 1] += first[r];
      {
        size_t *fill = malloc (((size_t) n_ranks + 1) * sizeof *fill);
        if (fill == NULL)
          {
            free (iv);
            free (first);
            fprintf (stderr, "pipescope-cli: error: out of memory\n");
            trace_clear (&t);
            return 1;
          }
        memcpy (fill, first, ((size_t) n_ranks + 1) * sizeof *fill);
        for (size_t i = 0; i < t.n_spans; i++)
          if (t.spans[i].rank < n_ranks && pp_span_kind_is_work (t.spans[i].kind)
              && t.spans[i].end_ns > t.spans[i].start_ns)
            {
              size_t j = fill[t.spans[i].rank]++;
              iv[j][0] = t.spans[i].start_ns;
              iv[j][1] = t.spans[i].end_ns;
            }
        free (fill);
      }
      /* the bubble a step first: the figure run, the app and render give */
      print_step_bubbles (&t, n_ranks);
      pp_cli_print_replicas (t.procs, t.n_procs, t.spans, t.span_process, t.n_all_spans, n_ranks);
      print_loss (&t);
      print_collectives (&t, list_processes);
      /* where the spans lie, from the run's start as the exports count */
      int64_t zero = run_start (&t, &av);
      printf ("idle over the whole trace (between %.3f ms and %.3f ms, set-up and gaps between steps included):\n",
              (double) (clamp_time (gstart) - zero) / 1e6, (double) (clamp_time (gend) - zero) / 1e6);
      for (int r = 0; r < n_ranks; r++)
        {
          int64_t (*rv)[2] = iv + first[r];
          size_t n = first[r + 1] - first[r];
          int64_t cs = 0, ce = 0;
          double busy = 0;
          qsort (rv, n, sizeof *rv, cmp_interval);
          for (size_t i = 0; i < n; i++)
            {
              if (i == 0 || rv[i][0] > ce)
                {
                  if (i > 0)
                    busy += (double) ((uint64_t) ce - (uint64_t) cs);
                  cs = rv[i][0];
                  ce = rv[i][1];
                }
              else if (rv[i][1] > ce)
                ce = rv[i][1];
            }
          if (n == 0)
            {
              /* not measured: the trace holds nothing of it (one node's
               * files, a process that recorded nothing) */
              printf ("  rank %d idle: \u2013 (no spans of it in the trace)\n", r);
              continue;
            }
          busy += (double) ((uint64_t) ce - (uint64_t) cs);
          double bubble = (len - busy) / len;
          sum += bubble;
          with++;
          printf ("  rank %d idle: %.1f%% (busy %.3f ms)\n", r, 100.0 * bubble, busy / 1e6);
        }
      free (iv);
      free (first);
      printf ("mean idle: %.1f%%%s\n", with > 0 ? 100.0 * sum / with : 0.0,
              with < n_ranks ? " (of the ranks with spans)" : "");
    }
  else
    printf ("bubble: n/a (no spans)\n");
  /* issue 16: why the bubble is there */
  {
    PpWhyReport *why = NULL;
    PpWhyChange ch;
    PpError e = { 0 };
    if (t.has_desc && analyse_why (&t, &why, &ch, NULL, &e) == PP_OK)
      {
        printf ("idle by cause (a step, the mean over the %d step%s analysed; 'export --format why' has it all):\n",
                why->n_steps, why->n_steps == 1 ? "" : "s");
        pp_why_print_idle (stdout, why->idle, why->ranks, 1e3, "ms");
        pp_why_print_replicas (stdout, why, 1e3, "ms");
        pp_why_print_runtime_parts (stdout, why->idle, why->ranks, 1e3, "ms");
        pp_why_print_path (stdout, why);
        pp_why_print_change (stdout, &ch, 1e3, "ms");
      }
    else
      {
        char msg[1024];   /* the analysis's message may quote the trace's schedule name */
        printf ("idle by cause: n/a (%s)\n", t.has_desc ? pp_cli_text (e.msg, msg, sizeof msg) : "no description");
      }
    pp_why_report_free (why);
  }
  /* issue 38: stragglers across the mesh (a job of replicas only) */
  {
    PpStragglerReport *sr = NULL;
    PpError e = { 0 };
    if (analyse_stragglers (&t, &sr, &e) != PP_OK)
      printf ("stragglers: n/a (%s)\n", e.msg);
    pp_straggler_print (stdout, sr, 10, 1e3, "ms");
    pp_straggler_report_free (sr);
  }
  printf ("dropped events: %" PRIu64 "\n", t.dropped);
  printf ("truncated: %s\n", t.truncated ? "yes (the file ends inside a frame)" : "no");
  /* format 1.10: what each process was in when the trace ended, and
   * whom it waited for (docs/stuck.md) */
  char stuck[4096];
  if (pp_stuck_from_places (t.procs, t.n_procs, t.opens, t.n_opens, NULL, NULL, stuck, sizeof stuck) != PP_STUCK_NONE)
    fputs (stuck, stdout);
  trace_clear (&t);
  return fflush (stdout) == 0 ? 0 : 1;
}
