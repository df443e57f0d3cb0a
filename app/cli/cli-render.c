/* pipescope-cli render: a trace's timeline as PNG, SVG or PDF, drawn by the
 * same function as the app's window. */
#include "cli-commands.h"
#include "cli-common.h"
#include "cli-heatmap.h"
#include "cli-output.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pp-timeline-fold.h"
#include "pp-timeline-model.h"
#include "pp-timeline-render.h"

static void
render_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli render FILE -o OUT.png|OUT.svg|OUT.pdf [OPTIONS]\n"
         "\n"
         "Draws a trace's timeline (one row per GPU, the bubble in its own color,\n"
         "steps, a time ruler, the run's description and a legend) into an image.\n"
         "\n"
         "  -o, --output OUT      image to write; the type follows the extension\n"
         "  -W, --width W         width in pixels (default 1600)\n"
         "  -H, --height H        height in pixels (default: fits the ranks)\n"
         "      --from T          start of the time range, from the run's start\n"
         "      --to T            end of the time range (times as 300us, 12ms, 1.5s)\n"
         "      --steps A[-B]     the range from step A's start to step B's end\n"
         "                        (B defaults to A; instead of --from and --to)\n"
         "      --paper a4|letter a landscape page of that paper: the size in pixels\n"
         "                        at 96 dpi (1123x794, 1056x816), and a PDF that size\n"
         "      --plan            draw the plan lane under each rank\n"
         "      --dark            dark palette\n"
         "      --heatmap         instead of the timeline, a job of replicas' stragglers:\n"
         "                        rows its stages, columns its replicas, each cell\n"
         "                        colored by its slowdown against its copies over the\n"
         "                        analysed steps (or --steps A-B); see docs/stragglers.md\n"
         "      --replicas fold|all|N  a job of replicas (data-parallel, tensor ranks):\n"
         "                        fold (default) a row a pipeline rank, its blocks the\n"
         "                        replicas' median with a mark to the latest end; all\n"
         "                        a row a process; N replica dp N alone\n"
         "\n"
         "A PDF page is the image's pixel size at 96 dpi (1600 px wide: 1200 pt);\n"
         "an SVG's text stays text.\n", out);
}

/* "12ms", "1.5s", "300us", "250ns" -> ns; -1 if not a time. */
static int
parse_time (const char *s, double *ns)
{
  char *end;
  double v;
  static const struct { const char *unit; double scale; } units[] = {
    { "ns", 1 }, { "us", 1e3 }, { "µs", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
  };

  errno = 0;
  v = strtod (s, &end);
  if (end == s || errno != 0 || !isfinite (v) || v < 0)
    return -1;
  while (*end == ' ')
    end++;
  if (*end == 0 && v == 0)
    {
      *ns = 0;
      return 0;
    }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcmp (end, units[i].unit) == 0)
      {
        *ns = v * units[i].scale;
        return *ns < 9e18 ? 0 : -1;
      }
  return -1;
}

static int
parse_size (const char *s, const char *what, double *out)
{
  char *end;
  long v;
  errno = 0;
  v = strtol (s, &end, 10);
  if (end == s || *end != 0 || errno != 0 || v < 16 || v > 32767)
    return pp_cli_usage_error ("%s '%s' is not a size in pixels (16 to 32767)", what, s);
  *out = (double) v;
  return 0;
}

/* Declared where main dispatches (pipescope-cli.c). */

int
pp_cli_render (int argc, char **argv)
{
  enum { OPT_FROM = 256, OPT_TO, OPT_STEPS, OPT_PLAN, OPT_DARK, OPT_PAPER, OPT_REPLICAS, OPT_HEATMAP };
  static const struct option options[] = {
    { "output", required_argument, NULL, 'o' },
    { "width", required_argument, NULL, 'W' },
    { "height", required_argument, NULL, 'H' },
    { "from", required_argument, NULL, OPT_FROM },
    { "to", required_argument, NULL, OPT_TO },
    { "steps", required_argument, NULL, OPT_STEPS },
    { "plan", no_argument, NULL, OPT_PLAN },
    { "dark", no_argument, NULL, OPT_DARK },
    { "paper", required_argument, NULL, OPT_PAPER },
    { "replicas", required_argument, NULL, OPT_REPLICAS },
    { "heatmap", no_argument, NULL, OPT_HEATMAP },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *out = NULL, *path;
  double width = 1600, height = 0, from = -1, to = -1;
  long step_a = -1, step_b = -1;
  int plan = 0, dark = 0, heatmap = 0, opt;
  PpError err = { 0 };
  PpTimelineModel *m;
  PpTimelineView v;
  PpTimelineReplicas replicas = { .replica = -1 };

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":o:W:H:h", options, NULL)) != -1)
    {
      switch (opt)
        {
        case 'h':
          render_usage (stdout);
          return 0;
        case 'o':
          out = optarg;
          break;
        case OPT_REPLICAS:
          if (pp_timeline_replicas_parse (optarg, &replicas, &err) != PP_OK)
            return pp_cli_usage_error ("%s", err.msg);
          break;
        case 'W':
          if (parse_size (optarg, "width", &width) != 0)
            return 2;
          break;
        case OPT_PAPER:
          /* landscape, at CSS's 96 px an inch */
          if (strcasecmp (optarg, "a4") == 0)
            width = 1123, height = 794;
          else if (strcasecmp (optarg, "letter") == 0)
            width = 1056, height = 816;
          else
            return pp_cli_usage_error ("unknown paper '%s'; use a4 or letter", optarg);
          break;
        case 'H':
          if (parse_size (optarg, "height", &height) != 0)
            return 2;
          break;
        case OPT_FROM:
        case OPT_TO:
          if (parse_time (optarg, opt == OPT_FROM ? &from : &to) != 0)
            return pp_cli_usage_error ("'%s' is not a time; write it as 300us, 12ms or 1.5s", optarg);
          break;
        case OPT_STEPS:
          {
            char *end;
            errno = 0;
            step_a = strtol (optarg, &end, 10);
            step_b = step_a;
            if (end != optarg && *end == '-')
              {
                const char *b = end + 1;
                step_b = strtol (b, &end, 10);
                if (end == b)
                  step_b = -1;
              }
            if (errno != 0 || end == optarg || *end != '\0' || step_a < 0 || step_b < step_a)
              return pp_cli_usage_error ("--steps takes A or A-B, step numbers with A <= B (got '%s')",
                                         optarg);
          }
          break;
        case OPT_PLAN:
          plan = 1;
          break;
        case OPT_DARK:
          dark = 1;
          break;
        case OPT_HEATMAP:
          heatmap = 1;
          break;
        case ':':
          return pp_cli_usage_error ("option '%s' needs a value; see 'pipescope-cli render --help'",
                                     argv[optind - 1]);
        default:
          return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli render --help'",
                                     argv[optind - 1]);
        }
    }
  int rc_args;
  if ((rc_args = pp_cli_one_trace_file (argc, argv, "render", &path)) != 0)
    return rc_args;
  if (out == NULL)
    return pp_cli_usage_error ("render needs an image to write: -o OUT.png, OUT.svg or OUT.pdf");
  {
    const char *dot = strrchr (out, '.');
    if (dot == NULL || (strcasecmp (dot, ".png") != 0 && strcasecmp (dot, ".svg") != 0
                        && strcasecmp (dot, ".pdf") != 0))
      return pp_cli_usage_error ("'%s': name the image .png, .svg or .pdf", out);
  }
  /* writing the image over its own trace would lose the trace */
  if (pp_cli_find_same_file (out, &path, 1) >= 0)
    return pp_cli_usage_error ("-o %s is the trace to render; write the image elsewhere", out);
  if (from >= 0 && to >= 0 && to <= from)
    return pp_cli_usage_error ("--to must be later than --from");
  if (step_a >= 0 && (from >= 0 || to >= 0))
    return pp_cli_usage_error ("give --steps or --from/--to, not both");

  if (heatmap)
    {
      if (from >= 0 || to >= 0 || plan || replicas.replica != -1 || replicas.all)
        return pp_cli_usage_error ("--heatmap draws stages x replicas over steps: give --steps, not --from, "
                                   "--to, --plan or --replicas");
      return pp_cli_render_heatmap (path, out, width, height, step_a, step_b, dark);
    }
  m = pp_timeline_model_new_from_file (path, &err);
  if (m == NULL)
    {
      fprintf (stderr, "pipescope-cli: error: %s: %s\n", path, err.msg[0] ? err.msg : "cannot read trace");
      return 1;
    }
  if (replicas.replica >= 0)
    {
      /* a replica the trace holds, by its dp: one node's trace may hold
       * dp 4 and 5 of 8, and dp 0 is then none of them */
      int32_t *dps = NULL;
      int n_dps = pp_timeline_model_replica_dps (m, &dps);
      int held = n_dps > 0 ? pp_timeline_dps_holds (dps, n_dps, replicas.replica) : replicas.replica == 0;
      char words[96];
      pp_timeline_dps_words (dps, n_dps, words, sizeof words);
      free (dps);
      if (!held)
        {
          int32_t size = pp_timeline_model_dp_size_said (m);
          pp_timeline_model_free (m);
          if (n_dps <= 0)
            return pp_cli_usage_error ("--replicas %d: %s has one process a pipeline rank (replica dp 0)",
                                       replicas.replica, path);
          return pp_cli_usage_error ("--replicas %d: %s holds replica%s %s of %d, not dp %d", replicas.replica,
                                     path, n_dps == 1 ? "" : "s", words, size, replicas.replica);
        }
    }
  if (pp_timeline_model_has_replicas (m))
    {
      /* the rows: folded, unfolded or one replica (pp-timeline-fold.h) */
      PpTimelineModel *view = pp_timeline_view_new (m, &replicas);
      pp_timeline_model_free (m);
      if ((m = view) == NULL)
        {
          fprintf (stderr, "pipescope-cli: error: out of memory\n");
          return 1;
        }
      char note[256];
      pp_timeline_model_replica_note (m, note, sizeof note);
      fprintf (stderr, "pipescope-cli: render: %s; --replicas fold|all|N chooses the rows\n", note);
    }
  if (height <= 0)
    {
      int n = pp_timeline_model_n_ranks (m);
      height = 48 + 34 + 30 + 8 + (n > 0 ? n : 1) * (plan ? 84 : 62);
      if (height > 4000)
        height = 4000;
    }
  pp_timeline_view_init (&v, m, width, height);
  {
    int64_t s = pp_timeline_model_start_ns (m), e = pp_timeline_model_end_ns (m);
    /* the model's times lie within +-PP_TIMELINE_MAX_ABS_NS: so do these,
     * whatever was asked, and the sums cannot overflow */
    if (from >= 0)
      v.t0_ns = s + (int64_t) llround (fmin (from, (double) PP_TIMELINE_MAX_ABS_NS));
    if (to >= 0)
      v.t1_ns = s + (int64_t) llround (fmin (to, (double) PP_TIMELINE_MAX_ABS_NS));
    if (step_a >= 0)
      {
        /* from step A's first begin to step B+1's (or the end) */
        size_t n = pp_timeline_model_n_steps (m);
        const int64_t *st = pp_timeline_model_step_starts (m);
        const int32_t *num = pp_timeline_model_step_numbers (m);
        int64_t t0 = -1, t1 = e;
        for (size_t i = 0; i < n; i++)
          {
            if (num[i] == step_a && t0 < 0)
              t0 = st[i];
            /* B ends where the first later step begins (markers may skip) */
            if (num[i] > step_b && st[i] < t1)
              t1 = st[i];
          }
        if (t0 < 0)
          {
            int first = n > 0 ? (int) num[0] : 0, last = n > 0 ? (int) num[n - 1] : 0;
            pp_timeline_model_free (m);
            if (n == 0)
              return pp_cli_usage_error ("--steps: %s has no step markers", path);
            return pp_cli_usage_error ("--steps: no step %ld; the trace has steps %d to %d", step_a,
                                       first, last);
          }
        v.t0_ns = t0;
        v.t1_ns = t1 > t0 ? t1 : e;
      }
    if (v.t1_ns <= v.t0_ns)
      {
        pp_timeline_model_free (m);
        return pp_cli_usage_error ("the range is empty: the run lasts %.3f ms", (double) (e - s) / 1e6);
      }
    /* a range with nothing recorded in it is a mistake, not a picture */
    int64_t f0, f1;
    if (pp_timeline_model_span_extent (m, &f0, &f1) && (v.t1_ns <= f0 || v.t0_ns >= f1))
      {
        pp_timeline_model_free (m);
        return pp_cli_usage_error ("nothing was recorded between %.3f and %.3f ms; the spans run "
                                   "from %.3f to %.3f ms of the run", (double) (v.t0_ns - s) / 1e6,
                                   (double) (v.t1_ns - s) / 1e6, (double) (f0 - s) / 1e6,
                                   (double) (f1 - s) / 1e6);
      }
  }
  v.show_plan = plan;
  v.dark = dark;
  v.show_header = 1;
  v.show_legend = 1;
  /* the image replaces OUT whole or not at all (cli-output.h) */
  PpCliOutput o;
  int e = pp_cli_output_open (&o, out, 0644);
  if (e != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s\n", out, pp_cli_output_strerror (e));
      pp_timeline_model_free (m);
      return 1;
    }
  if (pp_timeline_export_as (m, &v, o.tmp, out, &err) != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s; nothing written\n", err.msg);
      pp_cli_output_discard (&o);
      pp_timeline_model_free (m);
      return 1;
    }
  pp_timeline_model_free (m);
  if ((e = pp_cli_output_commit (&o)) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot write '%s': %s%s\n", out, pp_cli_output_strerror (e),
               pp_cli_no_room (e) ? " (the disk is full); nothing written" : "");
      return 1;
    }
  return 0;
}
