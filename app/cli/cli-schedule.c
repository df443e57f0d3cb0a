/* pipescope-cli schedule — a schedule, its simulated timeline and its bubble. */
#include "cli-commands.h"
#include "cli-common.h"
#include "cli-plan.h"
#include "cli-serve.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pp-schedule-deepspeed.h"
#include "pp-schedule.h"
#include "pp-simulate.h"

typedef enum { FMT_ASCII, FMT_ACTIONS, FMT_CSV, FMT_JSON, FMT_INSTRUCTIONS } Format;

static void
schedule_usage (FILE *out)
{

  fputs ("Usage: pipescope-cli schedule --schedule NAME --ranks P --microbatches M\n"
         "                              [--stages-per-rank V] [--group N] [--cost F,B,W,C]\n"
         "                              [--format ascii|actions|csv|json|instructions]\n"
         "                              [--trace FILE]\n"
         "                              [--serve [--listen HOST:PORT] [--steps N]\n"
         "                                       [--speed X]]\n"
         "       pipescope-cli schedule --csv FILE [--cost F,B,W,C] [--format ...]\n"
         "\n"
         "Prints a pipeline schedule: the compute order of every rank and the timeline\n"
         "the simulator plans for it under a cost model.\n"
         "\n"
         "  -s, --schedule NAME        schedule (names are case-insensitive)\n"
         "  -p, --ranks P              pipeline ranks (GPUs), at least 2\n"
         "  -m, --microbatches M       micro-batches per step\n"
         "  -v, --stages-per-rank V    model chunks per rank (interleaved schedules)\n"
         "  -g, --group N              Megatron-Interleaved: megatron-core's\n"
         "                             microbatch_group_size_per_vp_stage (default P;\n"
         "                             also written -s Megatron-Interleaved:group=N);\n"
         "                             the output says whether the order equals\n"
         "                             PyTorch's Interleaved1F1B, and shows both where not\n"
         "  -c, --cost F,B,W[,C]       time of a forward, a full backward (B = I + W),\n"
         "                             its weight-gradient part W, and a transfer C;\n"
         "                             default 1,2,1,0\n"
         "      --csv FILE             read a custom order in PyTorch's compute_only CSV\n"
         "  -f, --format FORMAT        ascii (Gantt on a unit grid, default), actions\n"
         "                             (one line per rank), csv (PyTorch compute_only),\n"
         "                             json (the simulated timeline), instructions\n"
         "                             (DeepSpeed-1F1B only: DeepSpeed's TrainSchedule\n"
         "                             instructions, rank by rank and slot by slot, as\n"
         "                             its pipe engine executes them)\n"
         "      --trace FILE           also write the simulated plan as a pipescope trace\n"
         "                             (description, plan, one span per compute action\n"
         "                             and step markers); 1 time unit = 1 ms\n"
         "                             (1,000,000 ns) in the trace\n"
         "      --serve                then act as a running job: register, serve the\n"
         "                             simulated timeline live (replayed in real time,\n"
         "                             1 unit = 1 ms, step after step) to 'pipescope-cli\n"
         "                             record' and viewers, until Ctrl-C; with --trace,\n"
         "                             the file gets every replayed step\n"
         "      --listen HOST:PORT     with --serve, also serve on TCP (port 0: any); a\n"
         "                             viewer needs the token printed at start\n"
         "      --steps N              with --serve, stop after N steps\n"
         "      --speed X              with --serve, replay X time units per millisecond\n"
         "                             (X > 0, default 1; 10 replays ten times faster);\n"
         "                             the served spans and plan use the replay's clock\n"
         "\n"
         "Schedules:\n", out);
  pp_cli_print_schedules (out);
}

/* Cell label of an action on the ascii grid: "F3" with one stage per rank,
 * "2F3" with several (the stage tells the chunks apart). */
static void
cell_label (const PpSchedule *s, const PpAction *a, char *buf, size_t size)
{
  bool one = s->stages_per_rank == 1;
  if (a->kind == PP_ACT_OVERLAP_F_B)
    {
      if (one)
        snprintf (buf, size, "F%d+%s%d", a->microbatch, pp_action_kind_name (a->sub_kind), a->sub_microbatch);
      else
        snprintf (buf, size, "%dF%d+%d%s%d", a->stage, a->microbatch, a->sub_stage,
                  pp_action_kind_name (a->sub_kind), a->sub_microbatch);
    }
  else if (one)
    snprintf (buf, size, "%s%d", pp_action_kind_name (a->kind), a->microbatch);
  else
    pp_action_to_string (a, buf, size);
}

static void
print_ascii (const PpSchedule *s, const PpSimulation *sim, const double cost[4])
{
  int cols = (int) ceil (sim->makespan - 1e-9);
  int width = 1;
  char label[PP_ACTION_STR_MAX];

  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        cell_label (s, &s->rank[r].actions[k], label, sizeof label);
        int n = (int) strlen (label);
        if (n > width)
          width = n;
      }
  for (int r = 0; r < s->ranks; r++)
    {
      int k = 0;
      printf ("GPU %d:", r);
      for (int t = 0; t < cols; t++)
        {
          double mid = t + 0.5;
          while (k < s->rank[r].n_actions && sim->timeline[r][k].end <= mid)
            k++;
          if (k < s->rank[r].n_actions && sim->timeline[r][k].start <= mid)
            cell_label (s, &s->rank[r].actions[k], label, sizeof label);
          else
            strcpy (label, ".");
          printf (" %*s", width, label);
        }
      putchar ('\n');
    }
  printf ("bubble: %.1f%%\n", 100.0 * sim->bubble);
  if (fabs (sim->steady_bubble - sim->bubble) >= 0.0005)
    printf ("steady-state bubble, steps back to back without a barrier: %.1f%%\n",
            100.0 * sim->steady_bubble);
  printf ("peak in-flight micro-batches:");
  for (int r = 0; r < s->ranks; r++)
    printf ("%s GPU %d: %d", r ? "," : "", r, sim->rank[r].peak_inflight);
  putchar ('\n');
  printf ("one column = 1 time unit (F=%g, B=%g of which W=%g, transfer=%g)\n",
          cost[0], cost[1], cost[2], cost[3]);
}

static void
print_actions (const PpSchedule *s)
{
  char buf[PP_ACTION_STR_MAX];
  for (int r = 0; r < s->ranks; r++)
    {
      printf ("rank %d:", r);
      for (int k = 0; k < s->rank[r].n_actions; k++)
        if (pp_action_is_compute (&s->rank[r].actions[k]))
          printf (" %s", pp_action_to_string (&s->rank[r].actions[k], buf, sizeof buf));
      putchar ('\n');
    }
}

static void
json_action (const PpSimAction *sa, int kind, int stage, int mb, bool overlap, bool *first)
{
  printf ("%s\n    {\"rank\": %d, \"stage\": %d, \"microbatch\": %d, \"kind\": \"%s\", "
          "\"start\": %.9g, \"end\": %.9g%s}",
          *first ? "" : ",", sa->rank, stage, mb, pp_action_kind_name (kind), sa->start, sa->end,
          overlap ? ", \"overlap\": true" : "");
  *first = false;
}

static void
print_json (const PpSchedule *s, const PpSimulation *sim, const double cost[4], int same)
{
  bool first = true;
  static const char *const words[] = { NULL, "equal", "differs", "refused" };

  printf ("{\n  \"schedule\": \"%s\",\n  \"ranks\": %d,\n  \"microbatches\": %d,\n"
          "  \"stages_per_rank\": %d,\n  \"stages\": %d,\n",
          s->name, s->ranks, s->microbatches, s->stages_per_rank, s->n_stages);
  if (same > 0 && same < 4)
    printf ("  \"pytorch_interleaved1f1b\": \"%s\",\n", words[same]);
  printf ("  \"cost\": {\"F\": %.9g, \"B\": %.9g, \"W\": %.9g, \"I\": %.9g, \"transfer\": %.9g},\n",
          cost[0], cost[1], cost[2], cost[1] - cost[2], cost[3]);
  printf ("  \"makespan\": %.9g,\n  \"bubble\": %.9g,\n  \"period\": %.9g,\n  \"steady_bubble\": %.9g,\n",
          sim->makespan, sim->bubble, sim->period, sim->steady_bubble);
  printf ("  \"stage_rank\": [");
  for (int i = 0; i < s->n_stages; i++)
    printf ("%s%d", i ? ", " : "", s->stage_rank[i]);
  printf ("],\n  \"per_rank\": [");
  for (int r = 0; r < s->ranks; r++)
    printf ("%s\n    {\"rank\": %d, \"busy\": %.9g, \"idle\": %.9g, \"bubble\": %.9g, \"peak_inflight\": %d}",
            r ? "," : "", r, sim->rank[r].busy, sim->rank[r].idle, sim->rank[r].bubble,
            sim->rank[r].peak_inflight);
  printf ("\n  ],\n  \"actions\": [");
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        const PpSimAction *sa = &sim->timeline[r][k];
        if (a->kind == PP_ACT_OVERLAP_F_B)
          {
            /* Both halves share the slot; "overlap" marks them. */
            json_action (sa, PP_ACT_F, a->stage, a->microbatch, true, &first);
            json_action (sa, a->sub_kind, a->sub_stage, a->sub_microbatch, true, &first);
          }
        else
          json_action (sa, a->kind, a->stage, a->microbatch, false, &first);
      }
  printf ("\n  ]\n}\n");
}

/* ---- Megatron's orders beside PyTorch's ---- */

typedef enum { SAME_NOT_ASKED, SAME_EQUAL, SAME_DIFFERS, SAME_REFUSED } Sameness;

static void
print_rank_order (const char *who, const PpSchedule *s, int r, int mark)
{
  char buf[PP_ACTION_STR_MAX];
  int k = 0;
  printf ("  rank %d %-9s", r, who);
  for (int i = 0; i < s->rank[r].n_actions; i++)
    if (pp_action_is_compute (&s->rank[r].actions[i]))
      {
        pp_action_to_string (&s->rank[r].actions[i], buf, sizeof buf);
        printf (k == mark ? " [%s]" : " %s", buf);
        k++;
      }
  putchar ('\n');
}

/* Megatron-Interleaved against PyTorch's Interleaved1F1B for the same P, V,
 * M: one line saying which, and where they differ both orders of every rank
 * that differs (its first difference in brackets).  quiet: only the verdict. */
static Sameness
compare_with_pytorch (const PpSchedule *s, bool quiet)
{
  PpSchedule *py = NULL;
  PpError err = { 0 };
  int rank, index;
  const char *group = strchr (s->name, '=');
  char shape[96];

  snprintf (shape, sizeof shape, "P=%d, V=%d, M=%d, group=%s", s->ranks, s->stages_per_rank,
            s->microbatches, group ? group + 1 : "?");
  if (pp_schedule_generate ("Interleaved1F1B", s->ranks, s->microbatches, s->stages_per_rank,
                            &py, &err) != PP_OK)
    {
      if (!quiet)
        printf ("PyTorch's Interleaved1F1B cannot run %s (%s): megatron-core's order has no "
                "PyTorch equal here\n", shape, err.msg);
      return SAME_REFUSED;
    }
  if (pp_schedule_same_order (s, py, &rank, &index))
    {
      if (!quiet)
        printf ("megatron-core's order for %s equals PyTorch's Interleaved1F1B\n", shape);
      pp_schedule_free (py);
      return SAME_EQUAL;
    }
  if (!quiet)
    {
      int n_diff = 0;
      for (int r = 0; r < s->ranks; r++)
        n_diff += pp_schedule_rank_difference (s, py, r) >= 0;
      printf ("megatron-core's order for %s differs from PyTorch's Interleaved1F1B on %d of %d "
              "ranks (first: rank %d, action %d, in brackets); both orders:\n",
              shape, n_diff, s->ranks, rank, index);
      for (int r = 0; r < s->ranks; r++)
        {
          int at = pp_schedule_rank_difference (s, py, r);
          if (at < 0)
            continue;
          print_rank_order ("Megatron:", s, r, at);
          print_rank_order ("PyTorch:", py, r, at);
        }
    }
  pp_schedule_free (py);
  return SAME_DIFFERS;
}

int
pp_cli_schedule (int argc, char **argv)
{
  static const struct option options[] = {
    { "schedule", required_argument, NULL, 's' },
    { "ranks", required_argument, NULL, 'p' },
    { "microbatches", required_argument, NULL, 'm' },
    { "stages-per-rank", required_argument, NULL, 'v' },
    { "group", required_argument, NULL, 'g' },
    { "cost", required_argument, NULL, 'c' },
    { "format", required_argument, NULL, 'f' },
    { "csv", required_argument, NULL, 'C' },
    { "trace", required_argument, NULL, 'T' },
    { "serve", no_argument, NULL, 'S' },
    { "listen", required_argument, NULL, 'L' },
    { "steps", required_argument, NULL, 'N' },
    { "speed", required_argument, NULL, 'X' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *name = NULL, *csv = NULL, *trace = NULL, *listen = NULL;
  int P = 0, M = 0, V = 0, G = 0, opt, steps = 0;
  bool serve = false, speed_set = false;
  double speed = 1.0;
  double cost[4] = { 1, 2, 1, 0 };
  Format format = FMT_ASCII;
  PpError err = { 0 };
  PpSchedule *s = NULL;
  PpCostModel *cm = NULL;
  PpSimulation *sim = NULL;
  int status = 0;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":s:p:m:v:g:c:f:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 's': name = optarg; break;
        case 'C': csv = optarg; break;
        case 'T': trace = optarg; break;
        case 'S': serve = true; break;
        case 'L': listen = optarg; break;
        case 'N':
          if (!pp_cli_parse_int (optarg, 1, INT_MAX, &steps))
            return pp_cli_usage_error ("--steps takes a whole number from 1 to %d (got '%s')", INT_MAX, optarg);
          break;
        case 'X':
          {
            char *end;
            errno = 0;
            speed = strtod (optarg, &end);
            if (end == optarg || *end != '\0' || errno != 0 || !isfinite (speed) || !(speed > 0))
              return pp_cli_usage_error ("--speed takes a number above 0 (got '%s')", optarg);
            speed_set = true;
          }
          break;
        case 'g':
          if (!pp_cli_parse_int (optarg, 1, 1 << 20, &G))
            return pp_cli_usage_error ("--group takes a whole number from 1 to %d (got '%s')", 1 << 20, optarg);
          break;
        case 'p':
        case 'm':
        case 'v':
          if (!pp_cli_shape_option (opt, optarg, &P, &M, &V))
            return 2;
          break;
        case 'c':
          if (pp_cost_parse (optarg, cost, &err) != PP_OK)
            return pp_cli_usage_error ("%s", err.msg);
          break;
        case 'f':
          if (strcmp (optarg, "ascii") == 0) format = FMT_ASCII;
          else if (strcmp (optarg, "actions") == 0) format = FMT_ACTIONS;
          else if (strcmp (optarg, "csv") == 0) format = FMT_CSV;
          else if (strcmp (optarg, "json") == 0) format = FMT_JSON;
          else if (strcmp (optarg, "instructions") == 0) format = FMT_INSTRUCTIONS;
          else
            return pp_cli_usage_error ("unknown format '%s'; use ascii, actions, csv, json or instructions", optarg);
          break;
        case 'h':
          schedule_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli schedule --help'",
                                     argv[optind - 1]);
        }
    }
  if (optind < argc)
    return pp_cli_usage_error ("unexpected argument '%s'; see 'pipescope-cli schedule --help'", argv[optind]);
  if (!serve && listen != NULL)
    return pp_cli_usage_error ("--listen needs --serve");
  if (!serve && steps != 0)
    return pp_cli_usage_error ("--steps needs --serve");
  if (!serve && speed_set)
    return pp_cli_usage_error ("--speed needs --serve");

  if (csv != NULL)
    {
      if (name || P || M || V || G)
        return pp_cli_usage_error ("--csv takes the ranks, stages and micro-batches from the file; "
                                   "drop --schedule, --ranks, --microbatches, --stages-per-rank and --group");
      FILE *in = fopen (csv, "r");
      if (in == NULL)
        return pp_cli_usage_error ("cannot open '%s': %s", csv, strerror (errno));
      PpStatus st = pp_schedule_read_csv (in, "custom", &s, &err);
      fclose (in);
      if (st != PP_OK)
        return pp_cli_usage_error ("%s: %s", csv, err.msg);
    }
  else
    {
      if (name == NULL)
        return pp_cli_usage_error ("--schedule is required (or --csv FILE); see 'pipescope-cli schedule --help'");
      if (P == 0)
        return pp_cli_usage_error ("--ranks is required");
      if (M == 0)
        return pp_cli_usage_error ("--microbatches is required");
      /* What cannot fit is refused before it is built (the output formats
       * stream: they add nothing per action). */
      if (pp_schedule_check_size (name, P, M, V, PP_SCHEDULE_BYTES_PER_ACTION, &err) != PP_OK
          || pp_schedule_generate_group (name, P, M, V, G, &s, &err) != PP_OK)
        return pp_cli_usage_error ("%s", err.msg);
    }

  if (format == FMT_INSTRUCTIONS && (name == NULL || strcasecmp (name, "DeepSpeed-1F1B") != 0))
    {
      pp_schedule_free (s);
      return pp_cli_usage_error ("--format instructions is DeepSpeed's: use it with -s DeepSpeed-1F1B");
    }
  cm = pp_cost_model_new_uniform (s->n_stages, cost[0], cost[1], cost[2], cost[3]);
  if (cm == NULL)
    {
      pp_schedule_free (s);
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      return 1;
    }
  if (pp_simulate (s, cm, &sim, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      status = 1;
      goto out;
    }

  /* A Megatron order says how it stands to PyTorch's (csv stays pure data). */
  const PpScheduleInfo *info = name ? pp_schedule_lookup (name) : NULL;
  Sameness same = SAME_NOT_ASKED;
  if (info != NULL && info->takes_group && (format == FMT_JSON))
    same = compare_with_pytorch (s, true);

  switch (format)
    {
    case FMT_ASCII: print_ascii (s, sim, cost); break;
    case FMT_ACTIONS: print_actions (s); break;
    case FMT_CSV:
      if (pp_schedule_write_csv (s, stdout, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          status = 1;
        }
      break;
    case FMT_JSON: print_json (s, sim, cost, same); break;
    case FMT_INSTRUCTIONS:
      if (pp_ds_print_train_instructions (stdout, s->ranks, s->microbatches, &err) != PP_OK)
        {
          fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
          status = 1;
        }
      break;
    }
  if (info != NULL && (format == FMT_ASCII || format == FMT_ACTIONS))
    {
      if (info->takes_group)
        compare_with_pytorch (s, false);
      else if (strncasecmp (name, "Megatron-", 9) == 0)
        printf ("%s: megatron-core's forward_backward_pipelining_without_interleaving runs exactly "
                "this %s order (PyTorch's Schedule1F1B too)\n", name, info->name);
      else if (strncasecmp (name, "DeepSpeed-", 10) == 0)
        printf ("%s: DeepSpeed's PipelineEngine (TrainSchedule) runs its forwards and backwards in "
                "this %s order, stage by stage; its slots are its own (sends and receives "
                "instructions of their own, loads on the first and last stage, the reductions and "
                "the optimizer in the last slot): --format instructions lists them\n", name, info->name);
    }
  if (fflush (stdout) != 0)
    status = 1;
  if (status == 0 && serve)
    status = pp_cli_serve (s, sim, listen, steps, speed, trace, argc, argv);
  else if (status == 0 && trace != NULL)
    status = pp_cli_write_sim_trace (trace, s, sim, argc, argv);
out:
  pp_simulation_free (sim);
  pp_cost_model_free (cm);
  pp_schedule_free (s);
  return status;
}
