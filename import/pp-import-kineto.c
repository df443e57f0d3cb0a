/* pp-import-kineto.c — torch.profiler (Kineto) traces as one pipescope run
 * (pp-import.h says what becomes what).
 *
 * Each file is parsed (pp-json.c), reduced to the few events that matter
 * (labels, transfers, steps, device work, launches), and freed before the
 * next is read: memory is the largest file plus those events, and all the
 * files' text together is held to one budget (pp_import_budget).  What is
 * held at once, the file being read and the events kept, is counted as it
 * is allocated (im.budget, PP_IMPORT_MAX_MEMORY): the file's text and its
 * bytes as the file is read, the nodes of what is outside its traceEvents
 * before they are allocated, each array of events as it grows.  The
 * traceEvents are read one event at a time (extract), each event's nodes
 * bounded by PP_IMPORT_MAX_EVENT and reused for the next.  Then the
 * ranks are put together, the plan rebuilt, and everything goes out through
 * the trace writer; nothing of the format is written here.
 *
 * This file runs the import (import_run) and holds its entry points; the
 * steps it takes are in the files pp-import-kineto-private.h lists. */
#include "pp-import-kineto-private.h"
#include "pp-import-chrome.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An import's inputs: what input i adds to the budget (pp_import_cost),
 * and its JSON text, at most limit bytes, holding at most mem bytes. */
typedef PpStatus (*CostFunc) (void *user, size_t i, size_t *cost, PpError *err);
typedef PpStatus (*LoadFunc) (void *user, size_t i, size_t limit, size_t mem, const char **name, char **text,
                              size_t *size, PpError *err);

static PpStatus
import_run (size_t n, CostFunc cost, LoadFunc load, void *user, PpTraceWriter *w,
            PpImportSummary *sum, PpError *err)
{
  Import im;
  Shape sh;
  PpStatus st = PP_OK;
  PpSpan *spans = NULL;
  size_t n_spans = 0, cap_spans = 0;
  const Ev **blocks = NULL;
  int *rank_of = NULL;     /* [world] -> input index, -1 */
  size_t *span_from = NULL;
  PpSimulation *sim = NULL;
  PpCostModel *cm = NULL;
  PpImportSummary s0;
  bool mesh_job = false;

  memset (&im, 0, sizeof im);
  memset (&sh, 0, sizeof sh);
  memset (&s0, 0, sizeof s0);
  if (sum == NULL)
    sum = &s0;
  memset (sum, 0, sizeof *sum);
  if (n == 0)
    return pp_error_set (err, PP_EINVAL, "no trace to import");
  if (n > PP_IMPORT_MAX_FILES)
    return pp_error_set (err, PP_EINVAL, "more than %d files to import", PP_IMPORT_MAX_FILES);
  im.ranks = calloc (n, sizeof *im.ranks);
  if (im.ranks == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  im.n = n;
  im.names.budget = &im.budget;

  /* one budget of JSON text for all the inputs together */
  size_t budget = 0;
  for (size_t i = 0; i < n; i++)
    {
      size_t c;
      if ((st = cost (user, i, &c, err)) != PP_OK)
        goto out;
      budget = budget > SIZE_MAX - c ? SIZE_MAX : budget + c;
    }
  budget = pp_import_budget (budget);

  /* each file: parse, extract, free */
  for (size_t i = 0; i < n; i++)
    {
      char *text = NULL;
      size_t size = 0;
      const char *name = NULL;
      PpJsonDoc doc;
      /* what the events kept so far leave of the memory, for the file */
      if ((st = load (user, i, budget, PP_IMPORT_MAX_MEMORY - im.budget.held, &name, &text, &size, err)) != PP_OK)
        goto out;
      budget -= size;
      im.ranks[i].name = name;
      im.ranks[i].budget = &im.budget;
      budget_take (&im.budget, size, false);   /* it fit what was left */
      size_t file_held = size;
      /* the nodes of all but the events, in what the text leaves (at
       * least one byte: 0 is no bound); the events' are each event's */
      size_t nodes_max = PP_IMPORT_MAX_MEMORY - im.budget.held, events_at;
      st = pp_json_parse_outer (text, size, PP_IMPORT_BYTES_PER_VALUE, nodes_max > 0 ? nodes_max : 1,
                                "traceEvents", &doc, &events_at, err);
      if (st == PP_OK && n == 1 && pp_import_chrome_is_pipescope (&doc))
        {
          /* pipescope's own export, read whole: nodes for all its values */
          pp_json_doc_clear (&doc);
          nodes_max = PP_IMPORT_MAX_MEMORY - im.budget.held;
          st = pp_json_parse (text, size, PP_IMPORT_BYTES_PER_VALUE, nodes_max > 0 ? nodes_max : 1, &doc, err);
        }
      if (st == PP_OK)
        {
          budget_take (&im.budget, doc.n_nodes * sizeof *doc.nodes, false);
          file_held += doc.n_nodes * sizeof *doc.nodes;
        }
      if (st != PP_OK)
        {
          char msg[PP_ERROR_MSG_MAX];
          snprintf (msg, sizeof msg, "%s", err ? err->msg : "");
          pp_error_set (err, st, "%s: %s", name, msg);
          pp_json_doc_clear (&doc);
          free (text);
          goto out;
        }
      if (pp_import_chrome_is_pipescope (&doc))
        {
          /* pipescope's own export: the run it came from, whole */
          if (n == 1)
            st = pp_import_chrome (&doc, name, PP_IMPORT_MAX_MEMORY - im.budget.held, w, sum, err);
          else
            st = pp_error_set (err, PP_EINVAL, "%s is pipescope's Chrome export of a whole run: "
                               "import it alone, not with other traces", name);
          pp_json_doc_clear (&doc);
          free (text);
          goto out;
        }
      st = extract (&im, &im.ranks[i], &doc, text, size, events_at, err);
      pp_json_doc_clear (&doc);
      free (text);
      budget_give (&im.budget, file_held, false);
      if (st != PP_OK)
        goto out;
      rank_trim (&im.ranks[i]);
      ev_extent (&im.ranks[i]);
    }

  /* ranks: distributedInfo, else the order given */
  {
    size_t with = 0;
    int world = 0;
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].rank >= 0)
        with++;
    if (with != 0 && with != n)
      {
        for (size_t i = 0; i < n; i++)
          if (im.ranks[i].rank < 0)
            {
              st = pp_error_set (err, PP_EFORMAT,
                                 "%s: no distributedInfo.rank, which the other traces have: "
                                 "not from the same job?", im.ranks[i].name);
              goto out;
            }
      }
    for (size_t i = 0; i < n; i++)
      {
        RankData *rd = &im.ranks[i];
        if (with == 0)
          {
            rd->rank = (int) i;
            rd->world = -1;
          }
        if (rd->rank + 1 > world)
          world = rd->rank + 1;
        if (rd->world > world)
          world = rd->world;
      }
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].world > 0 && im.ranks[i].world != world)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: world size %d where another trace says %d: "
                             "not from the same job?", im.ranks[i].name, im.ranks[i].world, world);
          goto out;
        }
    /* a job of many pipelines: each file a process, its rank the
     * pipeline rank of its place; files are then told apart by process */
    if ((st = place_processes (&im, with > 0, &mesh_job, err)) != PP_OK)
      goto out;
    int keys = world;
    if (mesh_job)
      for (size_t i = 0; i < n; i++)
        if (im.ranks[i].process + 1 > keys)
          keys = im.ranks[i].process + 1;
    rank_of = malloc ((size_t) keys * sizeof *rank_of);
    if (rank_of == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    for (int r = 0; r < keys; r++)
      rank_of[r] = -1;
    /* one rank's (process's) files of different times
     * (tensorboard_trace_handler writes one per profiling cycle) are one
     * rank; of the same time, the same trace twice */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
      {
        RankData *rd = &im.ranks[i];
        int r = mesh_job ? rd->process : rd->rank;
        if (rank_of[r] >= 0)
          {
            RankData *to = &im.ranks[rank_of[r]];
            if (to->ext_lo <= to->ext_hi && rd->ext_lo <= rd->ext_hi
                && to->ext_lo <= rd->ext_hi && rd->ext_lo <= to->ext_hi)
              {
                st = pp_error_set (err, PP_EFORMAT, "%s and %s both hold %s %d at the same time: "
                                   "give each %s's trace once", to->name, rd->name,
                                   mesh_job ? "process" : "rank", r, mesh_job ? "process" : "rank");
                goto out;
              }
            if ((st = merge_rank (to, rd, err)) != PP_OK)
              goto out;
            continue;
          }
        rank_of[r] = (int) kept;
        if (kept != i)
          {
            im.ranks[kept] = *rd;
            memset (rd, 0, sizeof *rd);
          }
        kept++;
      }
    sum->files = (int) n;
    n = kept;
    im.n = kept;
    if (mesh_job)
      {
        /* by pipeline rank from here on: the first replica (least dp,
         * then process) gives the rank's order and description */
        if ((st = number_processes (&im, sum, err)) != PP_OK)
          goto out;
        world = 0;
        for (size_t i = 0; i < n; i++)
          if (im.ranks[i].rank + 1 > world)
            world = im.ranks[i].rank + 1;
        if (world > keys)
          {
            /* a mesh_pp group wider than the world the files said */
            int *g = realloc (rank_of, (size_t) world * sizeof *rank_of);
            if (g == NULL)
              {
                st = pp_error_set (err, PP_ENOMEM, "out of memory");
                goto out;
              }
            rank_of = g;
            keys = world;
          }
        for (int r = 0; r < keys; r++)
          rank_of[r] = -1;
        for (size_t i = 0; i < n; i++)
          {
            int r = im.ranks[i].rank;
            const RankData *o = rank_of[r] >= 0 ? &im.ranks[rank_of[r]] : NULL;
            if (o == NULL || im.ranks[i].coord[PP_TRACE_MESH_DP] < o->coord[PP_TRACE_MESH_DP]
                || (im.ranks[i].coord[PP_TRACE_MESH_DP] == o->coord[PP_TRACE_MESH_DP]
                    && im.ranks[i].process < o->process))
              rank_of[r] = (int) i;
          }
      }
    im.rank_of = rank_of;
    sh.P = world;   /* what the traces say, until their stages are known */
  }

  /* labels: PP: where a trace has any, else GPipe's */
  bool use_pp = false;
  {
    size_t n_pp = 0, n_gp = 0;
    for (size_t i = 0; i < n; i++)
      {
        n_pp += (size_t) im.ranks[i].n_pp;
        n_gp += (size_t) im.ranks[i].n_gpipe;
      }
    if (n_pp == 0 && n_gp == 0)
      {
        st = pp_error_set (err, PP_EUNSUPPORTED,
                           "%s%s: no pipeline actions are labelled in %s (no 'PP:<action>' and no "
                           "'Forward i'/'Backward i' ranges; Schedule1F1B labels none): record the "
                           "job with 'pipescope-cli profile -- torchrun ...' instead",
                           im.ranks[0].name, n > 1 ? " ..." : "", n > 1 ? "these traces" : "this trace");
        goto out;
      }
    use_pp = n_pp > 0;
  }

  /* per rank: sort, the GPipe stage, steps, stage placement, M */
  int max_stage = -1, max_mb = -1, max_steps = 0;
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      if (rd->n_ev > 1)
        qsort (rd->ev, rd->n_ev, sizeof *rd->ev, cmp_ev_start);
      if (rd->n_launch > 1)
        qsort (rd->launch, rd->n_launch, sizeof *rd->launch, cmp_launch);
      if (rd->n_op > 1)
        qsort (rd->op, rd->n_op, sizeof *rd->op, cmp_op_start);
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          Ev *e = &rd->ev[k];
          if (e->what == EV_BLOCK && e->gpipe)
            e->stage = rd->rank;   /* single-stage schedules: stage r on rank r */
        }
    }
  int named = 0;   /* stages the labels name, as runners or as peers */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < im.ranks[i].n_ev; k++)
      {
        const Ev *e = &im.ranks[i].ev[k];
        if (e->what == EV_LABEL_XFER && use_pp)
          {
            /* PP:<s>SEND_F<m> sends to stage s + 1, RECV_B receives from it */
            int peer = e->kind == PP_ACT_SEND_F || e->kind == PP_ACT_RECV_B ? e->stage + 1 : e->stage;
            if (peer + 1 > named)
              named = peer + 1;
          }
        if (!is_block_of (e, use_pp))
          continue;
        if (e->stage > max_stage) max_stage = e->stage;
        if (e->mb > max_mb) max_mb = e->mb;
        if (e->kind == PP_ACT_OVERLAP_F_B)
          {
            if (e->sub_stage > max_stage) max_stage = e->sub_stage;
            if (e->sub_mb > max_mb) max_mb = e->sub_mb;
          }
      }
  sh.n_stages = max_stage + 1;
  sh.M = max_mb + 1;
  /* the world: as large as the traces' ranks and stages make it (each
   * pipeline rank runs a stage at least), no larger, whatever
   * distributedInfo.world_size says (the job's whole world, data-parallel
   * replicas too, or a lie): a row a rank costs, a small file cannot ask
   * for 65536 */
  {
    int top = 0;
    for (size_t i = 0; i < n; i++)
      if (im.ranks[i].rank + 1 > top)
        top = im.ranks[i].rank + 1;
    if (sh.n_stages > named)
      named = sh.n_stages;
    int justified = named > top ? named : top;
    if (sh.P > justified)
      {
        sum->world_claimed = sh.P;
        sh.P = justified;
      }
    sum->ranks = sh.P;
    size_t ml = 0;
    for (int r = 0; r < sh.P && ml + 12 < sizeof sum->missing; r++)
      if (rank_of[r] < 0)
        ml += (size_t) snprintf (sum->missing + ml, sizeof sum->missing - ml, "%s%d", ml ? "," : "", r);
  }
  sh.V = sh.P > 0 && sh.n_stages % sh.P == 0 ? sh.n_stages / sh.P : (sh.n_stages + sh.P - 1) / sh.P;
  if (sh.V < 1)
    sh.V = 1;
  sh.stage_rank = malloc ((size_t) sh.n_stages * sizeof *sh.stage_rank);
  sh.order = calloc ((size_t) sh.P, sizeof *sh.order);
  sh.n_order = calloc ((size_t) sh.P, sizeof *sh.n_order);
  if (sh.stage_rank == NULL || sh.order == NULL || sh.n_order == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (int s = 0; s < sh.n_stages; s++)
    sh.stage_rank[s] = -1;

  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      /* steps: ProfilerStep#N ranges, else a new step when an action repeats */
      const Ev **steps = NULL;
      size_t n_st = 0;
      if (rd->n_steps > 0)
        {
          steps = malloc ((size_t) rd->n_steps * sizeof *steps);
          if (steps == NULL)
            {
              st = pp_error_set (err, PP_ENOMEM, "out of memory");
              goto out;
            }
          for (size_t k = 0; k < rd->n_ev; k++)
            if (rd->ev[k].what == EV_STEP)
              steps[n_st++] = &rd->ev[k];
        }
      int global_min = INT32_MAX;
      for (size_t j = 0; j < n; j++)
        if (im.ranks[j].min_step < global_min)
          global_min = im.ranks[j].min_step;

      /* without step ranges: a new step where the rank's first stage
       * runs the forward of micro-batch 0 (what every schedule's step on
       * a rank begins with: all else waits for it), or where the rank
       * runs an action it ran before in this step (a table of action ->
       * last step); a profile begun mid-step has a partial step first */
      int min_stage = INT32_MAX;
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp) && rd->ev[k].stage < min_stage)
          min_stage = rd->ev[k].stage;
      size_t in_cur = 0;
      rd->mark_step = -1;
      uint64_t *keys = NULL;
      int32_t *gen = NULL;
      size_t cap_keys = 0, n_keys = 0;
      int cur = 0;
      size_t si = 0;
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          Ev *e = &rd->ev[k];
          if (e->what == EV_STEP)
            continue;
          if (n_st > 0)
            {
              /* the last step range that started at or before e */
              while (si + 1 < n_st && steps[si + 1]->start <= e->start)
                si++;
              e->step = steps[si]->kind - global_min;
            }
          else if (is_block_of (e, use_pp))
            {
              if ((n_keys + 1) * 2 > cap_keys)
                {
                  size_t nc = cap_keys ? cap_keys * 2 : 256;
                  uint64_t *nk = calloc (nc, sizeof *nk);
                  int32_t *ng = calloc (nc, sizeof *ng);
                  if (nk == NULL || ng == NULL)
                    {
                      free (nk);
                      free (ng);
                      free (keys);
                      free (gen);
                      free (steps);
                      st = pp_error_set (err, PP_ENOMEM, "out of memory");
                      goto out;
                    }
                  for (size_t q = 0; q < cap_keys; q++)
                    if (keys[q] != 0)
                      {
                        size_t h = (size_t) (keys[q] * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
                        while (nk[h] != 0)
                          h = (h + 1) & (nc - 1);
                        nk[h] = keys[q];
                        ng[h] = gen[q];
                      }
                  free (keys);
                  free (gen);
                  keys = nk;
                  gen = ng;
                  cap_keys = nc;
                }
              /* (kind, stage, micro-batch) names a block within a step (an
               * OVERLAP_F_B by its forward half); never 0 */
              uint64_t key = ((uint64_t) (e->kind + 1) << 48) | ((uint64_t) e->stage << 24) | (uint64_t) e->mb;
              size_t h = (size_t) (key * 0x9e3779b97f4a7c15ull >> 20) & (cap_keys - 1);
              while (keys[h] != 0 && keys[h] != key)
                h = (h + 1) & (cap_keys - 1);
              bool begins = (e->kind == PP_ACT_F || e->kind == PP_ACT_OVERLAP_F_B)
                            && e->stage == min_stage && e->mb == 0;
              if (in_cur > 0 && (begins || (keys[h] == key && gen[h] == cur)))
                {
                  cur++;
                  in_cur = 0;
                }
              if (begins && rd->mark_step < 0)
                {
                  rd->mark_step = cur;
                  rd->mark_time = e->end;
                }
              in_cur++;
              if (keys[h] == 0)
                n_keys++;
              keys[h] = key;
              gen[h] = cur;
              e->step = cur;
            }
          else
            e->step = cur;
          if (is_block_of (e, use_pp))
            {
              int stages[2] = { e->stage, e->kind == PP_ACT_OVERLAP_F_B ? e->sub_stage : -1 };
              for (int q = 0; q < 2; q++)
                if (stages[q] >= 0 && stages[q] < sh.n_stages)
                  sh.stage_rank[stages[q]] = rd->rank;
            }
        }
      free (keys);
      free (gen);
      free (steps);
    }
  /* the ranks' own step counts lined up: the block that begins a step
   * on a rank ends after the one that began it on the rank of stage 0
   * (it needs its output) and before that rank's next step begins (which
   * waits for this one's backward); ends, because a label's range holds
   * the wait for its input.  So each rank's first counted step is the
   * reference's last one whose first block ended before it */
  {
    int ref = sh.n_stages > 0 && sh.stage_rank[0] >= 0 ? rank_of[sh.stage_rank[0]] : -1;
    int *offset = calloc (n, sizeof *offset);
    if (offset == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    if (ref >= 0 && im.ranks[ref].n_steps == 0 && im.ranks[ref].mark_step >= 0)
      {
        const RankData *R = &im.ranks[ref];
        /* the reference's step starts, in its count */
        int64_t *starts = malloc ((R->n_ev + 1) * sizeof *starts);
        int n_starts = 0;
        if (starts == NULL)
          {
            free (offset);
            st = pp_error_set (err, PP_ENOMEM, "out of memory");
            goto out;
          }
        for (size_t k = 0; k < R->n_ev; k++)
          if (is_block_of (&R->ev[k], use_pp) && R->ev[k].step >= 0 && R->ev[k].step < (int) R->n_ev)
            while (n_starts <= R->ev[k].step)
              starts[n_starts++] = R->ev[k].end;
        /* the last step whose start is at or before a time, by halving:
         * over each start's least with those after it (which grows with
         * the step), the last at or before the time is the same step,
         * and many ranks' files against a long reference stay n log n */
        for (int q = n_starts - 1; q > 0; q--)
          if (starts[q] < starts[q - 1])
            starts[q - 1] = starts[q];
        for (size_t i = 0; i < n; i++)
          {
            const RankData *rd = &im.ranks[i];
            if ((int) i == ref || rd->n_steps > 0 || rd->mark_step < 0)
              continue;
            int lo = 0, hi = n_starts;
            while (lo < hi)
              {
                int mid = lo + (hi - lo) / 2;
                if (starts[mid] <= rd->mark_time)
                  lo = mid + 1;
                else
                  hi = mid;
              }
            if (lo > 0)
              offset[i] = (lo - 1) - rd->mark_step;
          }
        free (starts);
      }
    int least = INT32_MAX;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        if (im.ranks[i].n_steps == 0 && im.ranks[i].ev[k].step >= 0)
          {
            im.ranks[i].ev[k].step += offset[i];
            if (im.ranks[i].ev[k].step < least)
              least = im.ranks[i].ev[k].step;
          }
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        {
          Ev *e = &im.ranks[i].ev[k];
          if (im.ranks[i].n_steps == 0 && least != INT32_MAX && least != 0)
            e->step -= least;
          if (is_block_of (e, use_pp) && e->step + 1 > max_steps)
            max_steps = e->step + 1;
        }
    free (offset);
  }
  /* the steps that hold blocks, counted (their numbers may have gaps) */
  {
    size_t nb = 0, k = 0;
    for (size_t i = 0; i < n; i++)
      nb += im.ranks[i].n_ev;
    int32_t *nums = malloc ((nb + 1) * sizeof *nums);
    if (nums == NULL)
      {
        st = pp_error_set (err, PP_ENOMEM, "out of memory");
        goto out;
      }
    for (size_t i = 0; i < n; i++)
      for (size_t q = 0; q < im.ranks[i].n_ev; q++)
        if (is_block_of (&im.ranks[i].ev[q], use_pp) && im.ranks[i].ev[q].step >= 0)
          nums[k++] = im.ranks[i].ev[q].step;
    if (k > 1)
      qsort (nums, k, sizeof *nums, cmp_int32);
    sum->steps = 0;
    for (size_t q = 0; q < k; q++)
      sum->steps += q == 0 || nums[q] != nums[q - 1];
    free (nums);
  }
  sum->microbatches = sh.M;
  sum->stages_per_rank = sh.V;

  /* the plan: the order of the first step that is a known schedule's
   * (a profile that began mid-step has a partial first step), else the
   * fullest of the first few steps, as run */
  if (sum->missing[0] == '\0')
    {
      int best = -1;
      size_t best_n = 0;
      for (int step = 0; step < max_steps && step < 16 && sh.sched == NULL; step++)
        {
          size_t total;
          if ((st = build_order (&im, &sh, use_pp, step, &total, err)) != PP_OK)
            goto out;
          if (total > best_n)
            {
              best = step;
              best_n = total;
            }
          match_known (&sh);
        }
      if (sh.sched == NULL && best >= 0)
        {
          size_t total;
          if ((st = build_order (&im, &sh, use_pp, best, &total, err)) != PP_OK)
            goto out;
          observed_schedule (&sh);
        }
    }
  sum->matched = sh.matched;
  snprintf (sum->schedule, sizeof sum->schedule, "%s",
            sh.sched && sh.matched ? sh.sched->name : "observed");
  snprintf (sum->backend, sizeof sum->backend, "%s", im.ranks[0].backend);

  /* spans, file after file (span_from[i]: file i's first) */
  span_from = malloc ((n + 1) * sizeof *span_from);
  if (span_from == NULL)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < n; i++)
    {
      RankData *rd = &im.ranks[i];
      size_t nb = 0;
      span_from[i] = n_spans;
      free (blocks);
      blocks = malloc ((rd->n_ev + 1) * sizeof *blocks);
      if (blocks == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        if (is_block_of (&rd->ev[k], use_pp))
          blocks[nb++] = &rd->ev[k];
      /* transfers: one layer of operations, the calls the rank made
       * (c10d::send, c10d::recv_) where it has them.  gloo:send/recv and
       * nccl: ranges run asynchronously until the peer is done, on after
       * the block that posted them: as transfer times they would count
       * the peer's lateness, which is the bubble's, not the wire's. */
      int level = 3;
      for (size_t k = 0; k < rd->n_ev; k++)
        if (rd->ev[k].what == EV_XFER && rd->ev[k].level < level)
          level = rd->ev[k].level;
      /* PP: transfer labels, to name the operations inside them */
      const Ev **labels = malloc ((rd->n_ev + 1) * sizeof *labels);
      size_t nl = 0;
      if (labels == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        if (rd->ev[k].what == EV_LABEL_XFER)
          labels[nl++] = &rd->ev[k];
      unsigned char *label_used = calloc (nl + 1, 1);
      if (label_used == NULL)
        {
          free (labels);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }

      /* a block that launched device work runs, as pipescope's CUDA runs
       * measure it, from its first kernel's start to its last one's end
       * (its host range is when it was launched, not when it ran) */
      int64_t *gpu = malloc ((2 * nb + 2) * sizeof *gpu);
      if (gpu == NULL)
        {
          free (labels);
          free (label_used);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t b = 0; b < nb; b++)
        {
          gpu[2 * b] = INT64_MAX;
          gpu[2 * b + 1] = INT64_MIN;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          const Launch *l = e->what == EV_DEVICE && e->corr >= 0 ? find_launch (rd, e->corr) : NULL;
          long b = l != NULL ? block_at (blocks, nb, l->ts) : -1;
          /* NCCL's kernels wait for the peer: a transfer, not the block's work */
          if (b < 0 || (e->name_id != 0 && strncasecmp (im.names.names[e->name_id - 1], "nccl", 4) == 0))
            continue;
          if (e->start < gpu[2 * b]) gpu[2 * b] = e->start;
          if (e->end > gpu[2 * b + 1]) gpu[2 * b + 1] = e->end;
        }
      /* A label's range holds the wait for its input: PyTorch waits for a
       * receive inside the action that needs it.  The receive (gloo:recv,
       * nccl:recv: running until the data is there) says when that was;
       * the block starts then, and before it the rank waits (a WAIT span).
       * Which receive: the one under the last PP:<s>RECV_F<m> label
       * before an F of (s, m) (RECV_B for B and I), or GPipe's inside the
       * block. */
      int64_t *ready = malloc ((nb + 1) * sizeof *ready);
      Arrival *arr = malloc ((rd->n_ev + 1) * sizeof *arr);
      size_t n_arr = 0;
      if (ready == NULL || arr == NULL)
        {
          free (ready);
          free (arr);
          free (gpu);
          free (labels);
          free (label_used);
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t b = 0; b < nb; b++)
        ready[b] = INT64_MIN;
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          if (e->what != EV_XFER || e->level != 2 || e->kind != 1)
            continue;
          long lb = block_at (labels, nl, e->start);
          if (lb >= 0 && (labels[lb]->kind == PP_ACT_RECV_F || labels[lb]->kind == PP_ACT_RECV_B))
            arr[n_arr++] = (Arrival) { recv_key (labels[lb]->kind, labels[lb]->stage, labels[lb]->mb),
                                       labels[lb]->start, e->end };
          else
            {
              long b = block_at (blocks, nb, e->start);
              if (b >= 0 && e->end > ready[b])
                ready[b] = e->end;
            }
        }
      if (n_arr > 1)
        qsort (arr, n_arr, sizeof *arr, cmp_arrival);
      for (size_t b = 0; b < nb && n_arr > 0; b++)
        {
          const Ev *e = blocks[b];
          int rk = e->kind == PP_ACT_F ? PP_ACT_RECV_F
                   : e->kind == PP_ACT_B || e->kind == PP_ACT_I ? PP_ACT_RECV_B : -1;
          if (rk < 0)
            continue;
          int64_t a = arrival_for (arr, n_arr, recv_key (rk, e->stage, e->mb), e->start);
          if (a > ready[b])
            ready[b] = a;
        }
      free (arr);
      size_t bi = 0;
      OpWalk walk = { 0, 0 };
      /* The rank's first pipeline action: a transfer before it is set-up,
       * not the schedule's (PyTorch's _initialize_stages sends and
       * receives the shapes before the first step's first action), and is
       * left out, as profile, which records the actions, never sees it. */
      int64_t first_action = INT64_MAX;
      if (nb > 0)
        first_action = blocks[0]->start;
      if (nl > 0 && labels[0]->start < first_action)
        first_action = labels[0]->start;

      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          PpSpan sp;
          memset (&sp, 0, sizeof sp);
          sp.start_ns = e->start;
          sp.end_ns = e->end;
          sp.rank = rd->rank;
          sp.stage = -1;
          sp.microbatch = -1;
          sp.step = e->step >= 0 ? e->step : 0;
          sp.name_id = e->name_id;
          sp.device = 0xffff;
          sp.peer_rank = -1;
          if (is_block_of (e, use_pp))
            {
              sp.kind = (uint16_t) span_kind_of (e->kind);
              sp.stage = e->stage;
              sp.microbatch = e->mb;
              if (e->kind == PP_ACT_OVERLAP_F_B && (e->sub_kind == PP_ACT_B || e->sub_kind == PP_ACT_I))
                {
                  /* the backward half run with the forward one (format 1.2) */
                  sp.sub_kind = (uint16_t) span_kind_of (e->sub_kind);
                  sp.sub_stage = e->sub_stage;
                  sp.sub_microbatch = e->sub_mb;
                }
              if (gpu[2 * bi] <= gpu[2 * bi + 1])
                {
                  sp.start_ns = gpu[2 * bi];
                  sp.end_ns = gpu[2 * bi + 1];
                }
              else
                {
                  /* the compute, the waits before it a WAIT span of its
                   * stage and micro-batch (as pipescope's hook records
                   * them: charged to the block that comes next) */
                  bool waited;
                  compute_extent (rd, e, ready[bi], &walk, &sp.start_ns, &sp.end_ns, &waited);
                  PpSpan wait = sp;
                  int from = e->kind == PP_ACT_F ? e->stage - 1 : e->stage + 1;
                  wait.kind = PP_SPAN_WAIT;
                  wait.start_ns = e->start;
                  wait.end_ns = sp.start_ns;
                  wait.peer_rank = from >= 0 && from < sh.n_stages ? sh.stage_rank[from] : -1;
                  wait.sub_kind = 0;
                  wait.sub_stage = wait.sub_microbatch = 0;
                  if (waited && !push_span (&spans, &n_spans, &cap_spans, &wait))
                    {
                      free (ready);
                      free (labels);
                      free (label_used);
                      free (gpu);
                      st = pp_error_set (err, PP_ENOMEM, "out of memory");
                      goto out;
                    }
                  sum->waits += waited;
                }
              bi++;
              sum->blocks++;
            }
          else if (e->what == EV_OPT)
            sp.kind = PP_SPAN_OPT;
          else if (e->what == EV_DP)
            {
              sp.kind = (uint16_t) span_kind_of (e->kind);
              sp.stage = e->stage;
              sum->dp_actions++;
            }
          else if (e->what == EV_XFER && e->level == level && e->start < first_action)
            {
              sum->setup_transfers++;
              continue;
            }
          else if (e->what == EV_XFER && e->level == level)
            {
              int kind = -1, stage = -1, mb = -1;
              long lb = block_at (labels, nl, e->start);
              if (lb >= 0)
                {
                  const Ev *l = labels[lb];
                  bool send = l->kind == PP_ACT_SEND_F || l->kind == PP_ACT_SEND_B;
                  if (send == (e->kind == 0))
                    {
                      kind = l->kind;
                      stage = l->stage;
                      mb = l->mb;
                      label_used[lb] = 1;
                    }
                }
              if (kind < 0)
                {
                  long b = block_at (blocks, nb, e->start);
                  bool fwd = b < 0 || blocks[b]->kind == PP_ACT_F || blocks[b]->kind == PP_ACT_OVERLAP_F_B;
                  kind = e->kind == 0 ? (fwd ? PP_ACT_SEND_F : PP_ACT_SEND_B)
                                      : (fwd ? PP_ACT_RECV_F : PP_ACT_RECV_B);
                  if (b >= 0)
                    {
                      stage = blocks[b]->stage;
                      mb = blocks[b]->mb;
                    }
                }
              sp.kind = (uint16_t) span_kind_of (kind);
              sp.stage = stage;
              sp.microbatch = mb;
              sp.bytes = e->bytes;
              sum->transfers++;
            }
          else if (e->what == EV_DEVICE)
            {
              const Launch *l = e->corr >= 0 ? find_launch (rd, e->corr) : NULL;
              long b = l != NULL ? block_at (blocks, nb, l->ts) : -1;
              sp.kind = (uint16_t) e->kind;
              sp.device = e->device;
              sp.stream = e->stream;
              sp.bytes = e->bytes;
              if (b >= 0)
                {
                  sp.stage = blocks[b]->stage;
                  sp.microbatch = blocks[b]->mb;
                  sp.step = blocks[b]->step >= 0 ? blocks[b]->step : 0;
                }
              sum->device_spans++;
            }
          else
            continue;
          /* peers along the one chain of stages */
          if (sp.kind >= PP_SPAN_SEND_F && sp.kind <= PP_SPAN_RECV_B && sp.stage >= 0)
            {
              int other = sp.kind == PP_SPAN_SEND_F || sp.kind == PP_SPAN_RECV_B ? sp.stage + 1 : sp.stage - 1;
              if (other >= 0 && other < sh.n_stages)
                sp.peer_rank = sh.stage_rank[other];
            }
          if (n_spans == cap_spans)
            {
              size_t nc = cap_spans ? cap_spans * 2 : 4096;
              PpSpan *g = realloc (spans, nc * sizeof *g);
              if (g == NULL)
                {
                  free (labels);
                  free (label_used);
                  free (gpu);
                  free (ready);
                  st = pp_error_set (err, PP_ENOMEM, "out of memory");
                  goto out;
                }
              spans = g;
              cap_spans = nc;
            }
          spans[n_spans++] = sp;
        }
      /* a transfer label with no operation inside: the label is the transfer */
      for (size_t q = 0; q < nl; q++)
        {
          if (label_used[q])
            continue;
          const Ev *l = labels[q];
          PpSpan sp;
          memset (&sp, 0, sizeof sp);
          sp.start_ns = l->start;
          sp.end_ns = l->end;
          sp.rank = rd->rank;
          sp.stage = l->stage;
          sp.microbatch = l->mb;
          sp.step = l->step >= 0 ? l->step : 0;
          sp.name_id = l->name_id;
          sp.kind = (uint16_t) span_kind_of (l->kind);
          sp.device = 0xffff;
          int other = sp.kind == PP_SPAN_SEND_F || sp.kind == PP_SPAN_RECV_B ? sp.stage + 1 : sp.stage - 1;
          sp.peer_rank = other >= 0 && other < sh.n_stages ? sh.stage_rank[other] : -1;
          if (n_spans == cap_spans)
            {
              size_t nc = cap_spans ? cap_spans * 2 : 4096;
              PpSpan *g = realloc (spans, nc * sizeof *g);
              if (g == NULL)
                {
                  free (labels);
                  free (label_used);
                  free (gpu);
                  free (ready);
                  st = pp_error_set (err, PP_ENOMEM, "out of memory");
                  goto out;
                }
              spans = g;
              cap_spans = nc;
            }
          spans[n_spans++] = sp;
          sum->transfers++;
        }
      free (labels);
      free (label_used);
      free (gpu);
      free (ready);
    }
  span_from[n] = n_spans;

  /* the description */
  PpTraceDescription desc;
  memset (&desc, 0, sizeof desc);
  {
    /* the run's start: its first span or step marker (ProfilerStep#0's
     * start, else the first block's), where the app's ruler begins */
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < n_spans; i++)
      if (spans[i].start_ns < t0)
        t0 = spans[i].start_ns;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < im.ranks[i].n_ev; k++)
        {
          const Ev *e = &im.ranks[i].ev[k];
          bool marks = im.ranks[i].n_steps > 0 ? e->what == EV_STEP : is_block_of (e, use_pp) && e->step >= 0;
          if (marks && e->start < t0)
            t0 = e->start;
        }
    if (t0 == INT64_MAX)
      t0 = 0;
    const RankData *r0 = &im.ranks[rank_of[0] >= 0 ? rank_of[0] : 0];
    bool device = sum->device_spans > 0;
    snprintf (desc.schedule, sizeof desc.schedule, "%s", sum->schedule);
    snprintf (desc.backend, sizeof desc.backend, "%s", device ? "cuda" : "cpu");
    snprintf (desc.host, sizeof desc.host, "%s", r0->host[0] ? r0->host : "unknown");
    snprintf (desc.model, sizeof desc.model, "PyTorch job (torch.profiler trace%s%s%s)",
              r0->backend[0] ? ", " : "", r0->backend, use_pp ? "" : ", ScheduleGPipe labels");
    /* what the run is: no command line of its own is known, its files are */
    size_t len = (size_t) snprintf (desc.cmdline, sizeof desc.cmdline, "import of");
    for (size_t i = 0; i < n && len < sizeof desc.cmdline; i++)
      len += (size_t) snprintf (desc.cmdline + len, sizeof desc.cmdline - len, " %s", im.ranks[i].name);
    desc.n_ranks = sh.P;
    desc.n_microbatches = sh.M;
    desc.n_virtual = sh.V;
    /* one clock for all ranks: the wall clock the profiler used */
    desc.start_unix_ns = t0;
    desc.start_monotonic_ns = t0;
  }

  if ((st = pp_trace_write_description (w, &desc, err)) != PP_OK)
    goto out;
  for (int r = 0; r < sh.P && !mesh_job; r++)
    if (rank_of[r] >= 0)
      {
        const RankData *rd = &im.ranks[rank_of[r]];
        if ((st = pp_trace_write_rank (w, r, rd->pid, rd->host[0] ? rd->host : desc.host, err)) != PP_OK)
          goto out;
      }
  /* the plan: the rebuilt schedule with the measured costs, else the order only */
  {
    PpTracePlanAction **plan = calloc ((size_t) sh.P, sizeof *plan);
    size_t *n_plan = calloc ((size_t) sh.P, sizeof *n_plan);
    bool ok = plan != NULL && n_plan != NULL;
    if (ok && sh.sched != NULL)
      {
        cm = measured_costs (spans, n_spans, &sh);
        if (cm == NULL || pp_simulate (sh.sched, cm, &sim, NULL) != PP_OK)
          sim = NULL;
      }
    for (int r = 0; ok && r < sh.P; r++)
      {
        size_t cnt = sh.sched ? (size_t) sh.sched->rank[r].n_actions : sh.n_order[r];
        plan[r] = calloc (cnt + 1, sizeof **plan);
        if (plan[r] == NULL)
          {
            ok = false;
            break;
          }
        n_plan[r] = cnt;
        for (size_t k = 0; k < cnt; k++)
          {
            const PpAction *a = sh.sched ? &sh.sched->rank[r].actions[k] : &sh.order[r][k];
            PpTracePlanAction *p = &plan[r][k];
            p->kind = a->kind;
            p->stage = a->stage;
            p->microbatch = a->microbatch;
            p->sub_kind = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_kind : -1;
            p->sub_stage = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_stage : -1;
            p->sub_microbatch = a->kind == PP_ACT_OVERLAP_F_B ? a->sub_microbatch : -1;
            if (sim != NULL)
              {
                p->planned_start = sim->timeline[r][k].start;
                p->planned_end = sim->timeline[r][k].end;
              }
          }
      }
    if (ok)
      st = pp_trace_write_plan (w, sh.P, (const PpTracePlanAction *const *) plan, n_plan, sim != NULL, err);
    else
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
    if (plan)
      for (int r = 0; r < sh.P; r++)
        free (plan[r]);
    free (plan);
    free (n_plan);
    if (st != PP_OK)
      goto out;
  }
  for (uint32_t id = 1; id <= im.names.n; id++)
    if ((st = pp_trace_write_string (w, id, im.names.names[id - 1], err)) != PP_OK)
      goto out;
  /* step markers: each rank's ProfilerStep ranges, else its blocks' extent;
   * a job of many pipelines: each process's frames tagged with it, its
   * PROCESS and RANK frames first, then its markers and spans */
  for (size_t i = 0; i < n; i++)
    {
      const RankData *rd = &im.ranks[i];
      if (mesh_job)
        {
          PpTraceProcess p = process_of (rd);
          if (p.host[0] == '\0')
            snprintf (p.host, sizeof p.host, "%s", desc.host);
          if ((st = pp_trace_writer_set_process (w, rd->process, err)) != PP_OK
              || (st = pp_trace_write_process (w, &p, err)) != PP_OK
              || (st = pp_trace_write_rank (w, rd->rank, rd->pid, p.host, err)) != PP_OK
              || (st = pp_trace_write_spans (w, spans + span_from[i], span_from[i + 1] - span_from[i],
                                             err)) != PP_OK)
            goto out;
        }
      int global_min = INT32_MAX;
      for (size_t j = 0; j < n; j++)
        if (im.ranks[j].min_step < global_min)
          global_min = im.ranks[j].min_step;
      if (rd->n_steps > 0)
        {
          for (size_t k = 0; k < rd->n_ev; k++)
            if (rd->ev[k].what == EV_STEP)
              {
                int step = rd->ev[k].kind - global_min;
                if ((st = pp_trace_write_step_marker (w, rd->rank, step, PP_TRACE_STEP_BEGIN,
                                                      rd->ev[k].start, err)) != PP_OK
                    || (st = pp_trace_write_step_marker (w, rd->rank, step, PP_TRACE_STEP_END,
                                                         rd->ev[k].end, err)) != PP_OK)
                  goto out;
              }
          continue;
        }
      /* each step's blocks' extent, sized by the steps present (a step
       * number may be far past their count) */
      StepExtent *ext = malloc ((rd->n_ev + 1) * sizeof *ext);
      size_t n_ext = 0;
      if (ext == NULL)
        {
          st = pp_error_set (err, PP_ENOMEM, "out of memory");
          goto out;
        }
      for (size_t k = 0; k < rd->n_ev; k++)
        {
          const Ev *e = &rd->ev[k];
          if (is_block_of (e, use_pp) && e->step >= 0)
            ext[n_ext++] = (StepExtent) { e->step, e->start, e->end };
        }
      n_ext = step_extents (ext, n_ext);
      for (size_t q = 0; q < n_ext; q++)
        if ((st = pp_trace_write_step_marker (w, rd->rank, ext[q].step, PP_TRACE_STEP_BEGIN, ext[q].start, err)) != PP_OK
            || (st = pp_trace_write_step_marker (w, rd->rank, ext[q].step, PP_TRACE_STEP_END, ext[q].end, err)) != PP_OK)
          {
            free (ext);
            goto out;
          }
      free (ext);
    }
  if (mesh_job)
    st = pp_trace_writer_set_process (w, -1, err);
  else
    st = pp_trace_write_spans (w, spans, n_spans, err);
  if (st != PP_OK)
    goto out;
  sum->skipped = im.skipped;

out:
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  free (blocks);
  free (spans);
  free (rank_of);
  free (span_from);
  shape_clear (&sh);
  for (size_t i = 0; i < im.n; i++)
    {
      free (im.ranks[i].ev);
      free (im.ranks[i].launch);
      free (im.ranks[i].op);
    }
  free (im.ranks);
  names_clear (&im.names);
  return st;
}

/* ---- entry points ---------------------------------------------------------- */

typedef struct {
  const PpImportInput *in;
} MemoryLoad;

static PpStatus
cost_memory (void *user, size_t i, size_t *cost, PpError *err)
{
  const MemoryLoad *ml = user;
  (void) err;
  *cost = pp_import_cost (ml->in[i].data, ml->in[i].size, ml->in[i].size);
  return PP_OK;
}

static PpStatus
load_memory (void *user, size_t i, size_t limit, size_t mem, const char **name, char **text, size_t *size,
             PpError *err)
{
  const MemoryLoad *ml = user;
  *name = ml->in[i].name ? ml->in[i].name : "(input)";
  return pp_import_decode (*name, ml->in[i].data, ml->in[i].size, limit, mem, text, size, err);
}

PpStatus
pp_import_kineto (const PpImportInput *inputs, size_t n, PpTraceWriter *w, PpImportSummary *sum,
                  PpError *err)
{
  MemoryLoad ml = { inputs };
  return import_run (n, cost_memory, load_memory, &ml, w, sum, err);
}

typedef struct {
  const char *const *paths;
} FileLoad;

static PpStatus
cost_file (void *user, size_t i, size_t *cost, PpError *err)
{
  const FileLoad *fl = user;
  return pp_import_file_cost (fl->paths[i], cost, err);
}

static PpStatus
load_file (void *user, size_t i, size_t limit, size_t mem, const char **name, char **text, size_t *size,
           PpError *err)
{
  const FileLoad *fl = user;
  *name = fl->paths[i];
  return pp_import_read_file (fl->paths[i], limit, mem, text, size, err);
}

PpStatus
pp_import_kineto_files (const char *const *paths, size_t n, const char *out_path,
                        PpImportSummary *sum, PpError *err)
{
  FileLoad fl = { paths };
  size_t len = strlen (out_path);
  char *tmp = malloc (len + 32);
  PpTraceWriter *w;
  PpStatus st;

  if (tmp == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  snprintf (tmp, len + 32, "%s.tmp-%ld", out_path, (long) getpid ());
  w = pp_trace_writer_new_path (tmp, PP_TRACE_NATIVE, err);
  if (w == NULL)
    {
      free (tmp);
      return err ? err->status : PP_EIO;
    }
  st = import_run (n, cost_file, load_file, &fl, w, sum, err);
  if (st == PP_OK)
    st = pp_trace_writer_close (w, err);
  else
    pp_trace_writer_close (w, NULL);
  if (st == PP_OK && rename (tmp, out_path) != 0)
    st = pp_error_set (err, PP_EIO, "cannot write '%s': %s", out_path, strerror (errno));
  if (st != PP_OK)
    unlink (tmp);
  free (tmp);
  return st;
}
