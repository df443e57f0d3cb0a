/* pipescope-cli import — torch.profiler (Kineto) traces, one per rank, as
 * one pipescope trace (import/pp-import.h does the work). */
#include "cli-commands.h"
#include "cli-common.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp-import.h"

static void
import_usage (FILE *out)
{
  fputs ("Usage: pipescope-cli import FILE... -o OUT.pptrace\n"
         "\n"
         "Reads torch.profiler traces of a torch.distributed.pipelining job, one\n"
         "per rank, as prof.export_chrome_trace(path) and\n"
         "torch.profiler.tensorboard_trace_handler write them (JSON, gzip'd or\n"
         "not; a folder stands for the *.json and *.json.gz files in it), and\n"
         "writes them as one run that info, export, render, suggest and the app\n"
         "read: a row per rank (distributedInfo.rank), the PP:<action> ranges of\n"
         "PyTorch's multi-stage schedules and ScheduleGPipe's 'Forward i' /\n"
         "'Backward i' as blocks, gloo and NCCL send/recv as transfers, GPU\n"
         "kernels under the block that launched them, ProfilerStep#N as steps,\n"
         "FSDP's PP:0UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD as\n"
         "data-parallel blocks, and the plan rebuilt from the order each rank ran.\n"
         "\n"
         "A job of several pipelines (data-parallel replicas), a file per global\n"
         "rank, is one trace of processes, as merge makes it: each file's place\n"
         "from its DeviceMesh groups (distributedInfo.pg_config: mesh_pp,\n"
         "mesh_dp, mesh_tp, ...), else its pipeline rank from the stages it runs\n"
         "and its place marked 'place not read'.\n"
         "\n"
         "Schedule1F1B labels none of its actions for the profiler: trace such a\n"
         "job with 'pipescope-cli profile -- torchrun ...' instead.\n"
         "\n"
         "pipescope's own Chrome export ('export --format chrome', the file handed\n"
         "to Perfetto) imports alone as the run it was exported from: the same\n"
         "ranks, spans, steps, plan, counters and description.\n", out);
  fprintf (out, "\n"
           "At most %d traces at once (a folder's count one each).  The traces may\n"
           "gunzip to %d times their size, at least %zu MiB of JSON in all.  An\n"
           "import holds at most %zu MiB at once (a file's JSON and the events\n"
           "kept, %zu MiB of them; the values of one event at most %zu MiB): a\n"
           "real trace of up to some 450 MiB of JSON a file imports, more is\n"
           "refused in one line.\n",
           PP_IMPORT_MAX_FILES, PP_IMPORT_MAX_RATIO, PP_IMPORT_MIN_BUDGET >> 20, PP_IMPORT_MAX_MEMORY >> 20,
           PP_IMPORT_MAX_KEPT >> 20, PP_IMPORT_MAX_EVENT >> 20);
  fputs ("\n"
         "  -o, --output OUT   the trace to write (refused if it is one of the inputs)\n", out);
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static int
ends_with (const char *s, const char *suffix)
{
  size_t a = strlen (s), b = strlen (suffix);
  return a >= b && strcmp (s + a - b, suffix) == 0;
}

/* Appends path to *list; 1 when out of memory. */
static int
append (char ***list, size_t *n, size_t *cap, char *path)
{
  if (path == NULL)
    return 1;
  if (*n == *cap)
    {
      size_t nc = *cap ? *cap * 2 : 16;
      char **g = realloc (*list, nc * sizeof *g);
      if (g == NULL)
        {
          free (path);
          return 1;
        }
      *list = g;
      *cap = nc;
    }
  (*list)[(*n)++] = path;
  return 0;
}

/* Appends path, or a folder's *.json / *.json.gz files (sorted), to *list,
 * and counts them in *total.  One rule for both: past PP_IMPORT_MAX_FILES
 * traces in all the import is refused (pp_cli_import says so), so a
 * folder's names are kept only while they could still be imported, and
 * counted on. */
static int
add_input (const char *path, char ***list, size_t *n, size_t *cap, size_t *total)
{
  struct stat sb;
  if (stat (path, &sb) != 0)
    return pp_cli_usage_error ("%s: %s", path, strerror (errno));
  if (!S_ISDIR (sb.st_mode))
    {
      if (access (path, R_OK) != 0)
        return pp_cli_usage_error ("%s: %s", path, strerror (errno));
      ++*total;
      return *total > PP_IMPORT_MAX_FILES ? 0 : append (list, n, cap, strdup (path));
    }
  DIR *d = opendir (path);
  if (d == NULL)
    return pp_cli_usage_error ("%s: %s", path, strerror (errno));
  size_t first = *n, found = 0;
  struct dirent *de;
  while ((de = readdir (d)) != NULL)
    {
      if (de->d_name[0] == '.' || !(ends_with (de->d_name, ".json") || ends_with (de->d_name, ".json.gz")))
        continue;
      found++;
      if (++*total > PP_IMPORT_MAX_FILES)
        continue;
      size_t len = strlen (path) + strlen (de->d_name) + 2;
      char *full = malloc (len);
      if (full != NULL)
        snprintf (full, len, "%s/%s", path, de->d_name);
      if (append (list, n, cap, full) != 0)
        {
          closedir (d);
          return 1;
        }
    }
  closedir (d);
  if (found == 0)
    return pp_cli_usage_error ("%s: no *.json or *.json.gz traces in this folder", path);
  qsort (*list + first, *n - first, sizeof **list, cmp_str);
  return 0;
}

int
pp_cli_import (int argc, char **argv)
{
  static const struct option options[] = {
    { "output", required_argument, NULL, 'o' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *out = NULL;
  char **inputs = NULL;
  size_t n = 0, cap = 0, total = 0;
  int opt, status = 1;

  opterr = 0;
  optind = 1;
  while ((opt = getopt_long (argc, argv, ":o:h", options, NULL)) != -1)
    switch (opt)
      {
      case 'o': out = optarg; break;
      case 'h': import_usage (stdout); return 0;
      case ':': return pp_cli_usage_error ("option '%s' needs a value", argv[optind - 1]);
      default:
        return pp_cli_usage_error ("unknown option '%s'; see 'pipescope-cli import --help'", argv[optind - 1]);
      }
  if (optind >= argc)
    return pp_cli_usage_error ("import needs the torch.profiler traces to read; see 'pipescope-cli import --help'");
  if (out == NULL)
    return pp_cli_usage_error ("import needs -o OUT.pptrace; see 'pipescope-cli import --help'");
  for (int i = optind; i < argc; i++)
    {
      int rc = add_input (argv[i], &inputs, &n, &cap, &total);
      if (rc != 0)
        {
          if (rc == 1)
            fprintf (stderr, "pipescope-cli: error: out of memory\n");
          status = rc;
          goto done;
        }
    }
  if (total > PP_IMPORT_MAX_FILES)
    {
      status = pp_cli_usage_error ("%zu traces to import (a folder's *.json and *.json.gz counted), "
                                   "more than %d: import at most %d at once",
                                   total, PP_IMPORT_MAX_FILES, PP_IMPORT_MAX_FILES);
      goto done;
    }
  if (pp_cli_find_same_file (out, (const char *const *) inputs, n) >= 0)
    {
      status = pp_cli_usage_error ("-o %s is one of the inputs; write the trace elsewhere", out);
      goto done;
    }

  PpImportSummary sum;
  PpError err = { 0 };
  PpStatus st = pp_import_kineto_files ((const char *const *) inputs, n, out, &sum, &err);
  if (st != PP_OK)
    {
      fprintf (stderr, "pipescope-cli: error: %s\n", err.msg[0] ? err.msg : pp_status_message (st));
      /* the inputs' fault (bad, foreign or unlabelled traces): a usage error */
      status = st == PP_ENOMEM || st == PP_EIO ? 1 : 2;
      goto done;
    }
  if (sum.from_export)
    {
      printf ("imported pipescope's Chrome export: %s, P=%d M=%d V=%d, %d step%s\n", sum.schedule,
              sum.ranks, sum.microbatches, sum.stages_per_rank, sum.steps, sum.steps == 1 ? "" : "s");
      printf ("  %zu blocks, %zu transfers, %zu device spans -> %s\n", sum.blocks, sum.transfers,
              sum.device_spans, out);
      status = 0;
      goto done;
    }
  printf ("imported %d rank%s from %d trace%s: %s%s, P=%d M=%d V=%d, %d step%s\n",
          sum.ranks, sum.ranks == 1 ? "" : "s", sum.files, sum.files == 1 ? "" : "s",
          sum.schedule, sum.matched ? " (the order each rank ran is its order)"
                                    : " (an order pipescope does not know: planned as run)",
          sum.ranks, sum.microbatches, sum.stages_per_rank, sum.steps, sum.steps == 1 ? "" : "s");
  printf ("  %zu blocks (%zu waited inside their label for their input), %zu transfers, "
          "%zu device spans -> %s\n", sum.blocks, sum.waits, sum.transfers, sum.device_spans, out);
  if (sum.processes)
    printf ("  %d processes (pp %d × dp %d × tp %d)%s, %zu data-parallel actions (UNSHARD, RESHARD, "
            "REDUCE_GRAD, WAIT_REDUCE_GRAD)\n", sum.processes, sum.mesh_size[0], sum.mesh_size[1],
            sum.mesh_size[2], sum.unplaced ? ", some whose place is not in their trace (place not read)" : "",
            sum.dp_actions);
  else if (sum.dp_actions)
    printf ("  %zu data-parallel actions (UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD)\n", sum.dp_actions);
  if (sum.world_claimed)
    printf ("  distributedInfo says world size %d, but these traces' ranks and stages make %d: "
            "imported as %d rank%s\n", sum.world_claimed, sum.ranks, sum.ranks, sum.ranks == 1 ? "" : "s");
  if (sum.missing[0])
    printf ("  no trace for rank%s %s: those rows stay empty\n",
            strchr (sum.missing, ',') ? "s" : "", sum.missing);
  if (sum.setup_transfers)
    printf ("  %zu set-up transfer%s before the first action left out (PyTorch's shape inference)\n",
            sum.setup_transfers, sum.setup_transfers == 1 ? "" : "s");
  if (sum.skipped)
    printf ("  %zu events left out (no time, or one that makes no sense)\n", sum.skipped);
  status = 0;
done:
  for (size_t i = 0; i < n; i++)
    free (inputs[i]);
  free (inputs);
  return status;
}
