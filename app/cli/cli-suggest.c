/* pipescope-cli suggest — what if: rank schedules and micro-batch counts by
 * the step time the simulator predicts from the costs measured in a trace. */
#include "cli-commands.h"
#include "cli-common.h"
#include "cli-plan.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp-analysis.h"
#include "pp-suggest.h"
#include "pp-timeline-model.h"
#include "pp-trace.h"


static void
suggest_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli suggest FILE [--memory-budget MICROBATCHES] [--top N]\n"
         "\n"
         "Reads the costs measured in a trace (per rank, the mean forward, full\n"
         "backward and weight-gradient time of one micro-batch through all the\n"
         "rank's layers) and ranks every schedule the job's framework can run\n"
         "(a PyTorch job: torch.distributed.pipelining's; a megatron-core job: 1F1B\n"
         "and Megatron-Interleaved, V 2 and 4, groups P, 2P and M'; pipescope's own\n"
         "runtime: all), with P = the measured ranks, V = 2 where V is free, and\n"
         "M' in {P, 2P, 4P, 8P, measured M}, by the step time the simulator\n"
         "predicts.  The batch stays the same: with M' micro-batches each costs\n"
         "M/M' of a measured one.\n"
         "\n"
         "  -b, --memory-budget MB   keep only candidates whose peak activation\n"
         "                           memory, in measured micro-batches held by one\n"
         "                           rank, is at most MB (0: no limit, default)\n"
         "  -n, --top N              print only the best N (default: all)\n", out);
}

/* err's line naming the trace the user gave: a job of replicas is read
 * from an in-memory copy of one (/proc/self/fd/N), whose name means
 * nothing to them. */
static void
say_error (const char *path, const char *copy, const char *raw)
{
  char msg[1024];
  pp_cli_text (raw, msg, sizeof msg);   /* it may quote the trace's schedule name */
  size_t lc = strlen (copy), lp = strlen (path);
  if (lc > 0 && strncmp (msg, copy, lc) == 0)
    fprintf (stderr, "pipescope-cli: error: %s%s\n", path, msg + lc);
  else if (strncmp (msg, path, lp) == 0)
    fprintf (stderr, "pipescope-cli: error: %s\n", msg);
  else
    fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, msg);
}

/* The description of the trace, if any, and the one analysis of its
 * steps (the measured row's numbers); 0, or 1 with one line printed. */
static int
read_description (const char *path, const char *shown, PpTraceDescription *desc, bool *has, int n_ranks,
                  PpAnalysisSteps *an)
{
  PpSpan *spans = NULL;
  size_t n_spans = 0, cap = 0;
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem item;

  *has = false;
  if (r == NULL)
    {
      say_error (shown, "", err.msg[0] ? err.msg : strerror (errno));
      return 1;
    }
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, &err) != PP_OK)
        {
          say_error (shown, "", err.msg);
          pp_trace_reader_free (r);
          return 1;
        }
      if (item.type == PP_TRACE_ITEM_END)
        break;
      if (item.type == PP_TRACE_ITEM_SPAN
          && pp_analysis_span_counts (item.span.kind))
        {
          if (n_spans == cap)
            {
              size_t nc = cap ? 2 * cap : 4096;
              PpSpan *ns = realloc (spans, nc * sizeof *ns);
              if (ns == NULL)
                {
                  fprintf (stderr, "pipescope-cli: error: out of memory\n");
                  free (spans);
                  pp_trace_reader_free (r);
                  return 1;
                }
              spans = ns;
              cap = nc;
            }
          spans[n_spans++] = item.span;
        }
      if (item.type == PP_TRACE_ITEM_DESCRIPTION)
        {
          *desc = *item.description;   /* the last one wins, as in info */
          *has = true;
        }
    }
  pp_trace_reader_free (r);
  const PpSpan *rows[1] = { spans };
  PpStatus st = pp_analysis_steps (rows, &n_spans, NULL, 1, n_ranks, 0, an, &err);
  free (spans);
  if (st != PP_OK)
    {
      say_error (shown, "", err.msg);
      return 1;
    }
  return 0;
}

int
pp_cli_suggest (int argc, char **argv)
{
  static const struct option options[] = {
    { "memory-budget", required_argument, NULL, 'b' },
    { "top", required_argument, NULL, 'n' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  PpMeasuredCosts costs = { 0 };
  PpAnalysisSteps an = { 0 };
  PpSuggestion *all = NULL, *kept = NULL;
  char measured_name[64], measured_text[256];
  size_t n_all = 0, n_kept = 0;
  PpTraceDescription desc;
  PpError err = { 0 };
  const char *path, *measured = NULL;
  double budget = 0;
  int top = 0;
  int opt, status = 1, mV = 0;
  bool has_desc, any_w = false;
  char *end;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":b:n:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'b':
          errno = 0;
          budget = strtod (optarg, &end);
          if (end == optarg || *end != '\0' || errno != 0 || !isfinite (budget) || budget < 0)
            return pp_cli_usage_error ("--memory-budget needs a number of micro-batches >= 0, not '%s'",
                                       optarg);
          break;
        case 'n':
          if (!pp_cli_parse_int (optarg, 1, 1000000, &top))
            return pp_cli_usage_error ("--top needs a count of at least 1, not '%s'", optarg);
          break;
        case 'h':
          suggest_usage (stdout);
          return 0;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli suggest --help'",
                                     argv[optind - 1]);
        }
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "suggest", &path)) != 0)
    return rc_args;

  /* a job of replicas: its median copy's costs, as every other view takes them */
  char copy[64];
  int copy_fd = -1;
  if (pp_cli_one_replica (path, copy, sizeof copy, &copy_fd, &err) != PP_OK
      || pp_measured_costs_from_trace (copy[0] ? copy : path, &costs, &err) != PP_OK)
    {
      if (copy_fd >= 0)
        close (copy_fd);
      say_error (path, copy, err.msg);
      return 1;
    }
  /* the copy lives as long as its descriptor: read it whole before closing */
  int rc_desc = read_description (copy[0] ? copy : path, path, &desc, &has_desc, costs.ranks, &an);
  if (copy_fd >= 0)
    close (copy_fd);
  if (rc_desc != 0)
    goto out;
  if (copy[0])
    {
      /* the measured row's step and bubble over the whole job, as info's:
       * a copy's wait for a slower replica is idle, and needs the others */
      PpTimelineModel *m = pp_timeline_model_new_from_file (path, NULL);
      if (m != NULL)
        {
          pp_analysis_steps_clear (&an);
          pp_timeline_model_step_analysis (m, &an);
          pp_timeline_model_free (m);
        }
    }
  if (has_desc)
    {
      /* named as the candidates are (the app's What if names it so too) */
      pp_suggest_measured_name (desc.schedule, desc.n_virtual, costs.ranks, measured_name, sizeof measured_name,
                                &mV);
      /* the trace's name for it, shown as the terminal cannot be told to
       * do anything (a known schedule's name is as it was) */
      pp_cli_text (measured_name, measured_text, sizeof measured_text);
      measured = measured_text;
    }

  /* All candidates (to find the measured one), then those within the budget. */
  if (pp_suggest (&costs, 0, &all, &n_all, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg);
      goto out;
    }
  /* Those within the budget, in the same order: the simulations once. */
  kept = malloc ((n_all + 1) * sizeof *kept);
  if (kept == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: out of memory\n");
      goto out;
    }
  for (size_t i = 0; i < n_all; i++)
    if (budget <= 0 || all[i].peak_activation <= budget * (1 + 1e-9))
      kept[n_kept++] = all[i];

  if (has_desc)
    printf ("measured: %s, P=%d, M=%d, V=%d (%s)\n", measured, costs.ranks, costs.microbatches, mV,
            desc.backend[0] ? desc.backend : "unknown backend");
  else
    printf ("measured: P=%d, M=%d (no description)\n", costs.ranks, costs.microbatches);
  if (costs.framework != PP_FRAMEWORK_PIPESCOPE)
    printf ("candidates: what a %s job can run\n", pp_framework_name (costs.framework));
  printf ("measured per micro-batch, all of a rank's layers:\n");
  for (int r = 0; r < costs.ranks; r++)
    {
      printf ("  rank %d: F %.3f ms, B %.3f ms, W %.3f ms\n", r, costs.f[r] * 1e3, costs.b[r] * 1e3,
              costs.w[r] * 1e3);
      any_w = any_w || costs.w[r] > 0;
    }
  printf ("  transfer: %.3f ms\n", costs.comm * 1e3);
  if (!any_w)
    printf ("note: the run never split a backward (no W spans), so W = 0: zero-bubble\n"
            "      schedules are predicted without deferred weight gradients\n");
  if (budget > 0)
    printf ("memory budget: %g micro-batches per rank (%zu of %zu candidates fit)\n", budget, n_kept, n_all);
  {
    size_t big = pp_suggest_n_too_large (&costs);
    if (big > 0)
      printf ("left out: %zu candidate%s over %ld ranks x micro-batches x stages per rank "
              "(too large to simulate)\n", big, big == 1 ? "" : "s", (long) PP_SUGGEST_MAX_WORK);
  }
  putchar ('\n');

  if (n_kept == 0)
    printf ("no candidate fits the memory budget\n");
  else
    {
      size_t shown = top > 0 && (size_t) top < n_kept ? (size_t) top : n_kept;
      bool measured_shown = false;
      int width = 22;
      for (size_t i = 0; i < shown; i++)
        if ((int) strlen (kept[i].schedule) > width)
          width = (int) strlen (kept[i].schedule);
      char what[160];
      printf ("predicted: the simulator's step and bubble from the measured costs; the row of the "
              "measured configuration shows what the run measured instead\n(the median step and the mean bubble a step "
              "over %s)\n", pp_analysis_describe_steps (&an, what, sizeof what));
      printf ("%4s  %-*s %6s %3s %11s %10s %32s\n", "#", width, "schedule", "M", "V",
              "step (ms)", "bubble", "peak activations (micro-batches)");
      for (size_t i = 0; i < shown; i++)
        {
          const PpSuggestion *s = &kept[i];
          bool m = pp_suggestion_is (s, measured, costs.microbatches, mV) && an.n_steps > 0;
          char pc[32];
          measured_shown = measured_shown || m;
          double step = m ? an.median_step * 1e-9 : s->step_time;
          pp_analysis_format_percent (pc, sizeof pc, m ? an.bubble_mean : s->bubble, 1);
          printf ("%4zu  %-*s %6d %3d %11.3f %10s %32.2f%s\n", i + 1, width, s->schedule, s->microbatches,
                  s->stages_per_rank, step * 1e3, pc, s->peak_activation,
                  m ? "  ← measured" : "");
        }
      if (shown < n_kept)
        printf ("(%zu more; --top to see them)\n", n_kept - shown);
      if (costs.framework != PP_FRAMEWORK_PIPESCOPE)
        {
          char how[256];
          printf ("to run #1 in your job: %s\n", pp_suggestion_how (&kept[0], costs.framework, how, sizeof how));
        }
      if (!measured_shown && measured != NULL)
        {
          size_t i;
          for (i = 0; i < n_kept && !pp_suggestion_is (&kept[i], measured, costs.microbatches, mV); i++)
            ;
          if (i < n_kept)
            printf ("measured configuration: #%zu, %s M %d V %d, predicted %.3f ms\n", i + 1, measured,
                    costs.microbatches, mV, kept[i].step_time * 1e3);
          else
            {
              for (i = 0; i < n_all && !pp_suggestion_is (&all[i], measured, costs.microbatches, mV); i++)
                ;
              if (i < n_all)
                printf ("measured configuration: %s M %d V %d, predicted %.3f ms, peak activation %.2f: "
                        "over the memory budget\n", measured, costs.microbatches, mV,
                        all[i].step_time * 1e3, all[i].peak_activation);
            }
        }
    }
  status = fflush (stdout) == 0 ? 0 : 1;
out:
  free (all);
  free (kept);
  pp_measured_costs_clear (&costs);
  pp_analysis_steps_clear (&an);
  return status;
}
