/* cli-processes.c — info's processes of a job (cli-processes.h). */
#include "cli-processes.h"
#include "cli-common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pp_cli_mesh_dim[PP_TRACE_MESH_DIMS] = { "pp", "dp", "tp", "cp", "ep" };

void
pp_cli_mesh_sizes (const PpTraceProcess *procs, size_t n, int32_t size[PP_TRACE_MESH_DIMS])
{
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    size[d] = 1;
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
      if (procs[i].size[d] > size[d])
        size[d] = procs[i].size[d];
}

static int
cmp_host (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The distinct host names of procs; 0 when out of memory. */
static size_t
count_hosts (const PpTraceProcess *procs, size_t n)
{
  const char **h = malloc ((n + 1) * sizeof *h);
  size_t k = 0;
  if (h == NULL)
    return 0;
  for (size_t i = 0; i < n; i++)
    h[i] = procs[i].host;
  qsort (h, n, sizeof *h, cmp_host);
  for (size_t i = 0; i < n; i++)
    k += i == 0 || strcmp (h[i], h[i - 1]) != 0;
  free (h);
  return k;
}

void
pp_cli_print_processes (const PpTraceProcess *procs, size_t n, size_t n_unplaced, bool list)
{
  int32_t size[PP_TRACE_MESH_DIMS];
  if (n == 0)
    return;
  bool summary = !list && n > PP_CLI_PROCESSES_LISTED;
  pp_cli_mesh_sizes (procs, n, size);
  printf ("processes: %zu (", n);
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    if (d <= PP_TRACE_MESH_TP || size[d] > 1)
      printf ("%s%s %d", d ? " \u00d7 " : "", pp_cli_mesh_dim[d], size[d]);
  /* never a place guessed silently: the hook could not read these */
  if (n_unplaced > 0)
    printf ("; the place of %zu not read from the job: replicas of their pipeline rank numbered by "
            "global rank", n_unplaced);
  printf (")");
  if (summary)
    {
      size_t hosts = count_hosts (procs, n);
      if (hosts > 0)
        printf (" on %zu host%s", hosts, hosts == 1 ? "" : "s");
      putchar ('\n');
      return;
    }
  putchar ('\n');
  for (size_t i = 0; i < n; i++)
    {
      const PpTraceProcess *p = &procs[i];
      printf ("process %d:", p->process);
      for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
        if (d <= PP_TRACE_MESH_TP || size[d] > 1)
          printf (" %s %d", pp_cli_mesh_dim[d], p->coord[d]);
      char host[4 * sizeof p->host];
      printf (" host %s pid %d%s\n", p->host[0] ? pp_cli_text (p->host, host, sizeof host) : "?", p->pid,
              p->flags & PP_TRACE_PROCESS_UNPLACED ? " (place not read: dp by global rank)" : "");
    }
}
