/* bench-mesh.h — what the benchmarks of a job of replicas share: a
 * command run to its end (or the benchmark stops), and a P x D job written
 * by pp-synth-mesh and merged by pipescope-cli into DIR/job.pptrace. */
#pragma once

#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

static inline void
bench_run (const char *const *argv)
{
  int status = -1;
  GError *error = NULL;
  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                     NULL, NULL, NULL, &status, &error)
      || !g_spawn_check_wait_status (status, &error))
    {
      fprintf (stderr, "bench: %s: %s\n", argv[0], error ? error->message : "failed");
      exit (1);
    }
}

/* pp-synth-mesh DIR/job P D M STEPS 1f1b OPTION ARG (OPTION NULL: none),
 * merged: the merged trace's path (g_free), *dir the folder
 * (bench_mesh_clear removes both). */
static inline char *
bench_mesh_job (const char *synth, const char *cli, int P, int D, int M, int steps, const char *option,
                const char *arg, char **dir)
{
  *dir = g_dir_make_tmp ("bench-mesh-XXXXXX", NULL);
  char *base = g_build_filename (*dir, "job", NULL), *trace = g_build_filename (*dir, "job.pptrace", NULL);
  char p[16], d[16], m[16], s[16];
  snprintf (p, sizeof p, "%d", P);
  snprintf (d, sizeof d, "%d", D);
  snprintf (m, sizeof m, "%d", M);
  snprintf (s, sizeof s, "%d", steps);
  const char *make[] = { synth, base, p, d, m, s, "1f1b", option, arg, NULL };
  bench_run (make);
  GPtrArray *merge = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (merge, g_strdup (cli));
  g_ptr_array_add (merge, g_strdup ("merge"));
  g_ptr_array_add (merge, g_strdup ("-o"));
  g_ptr_array_add (merge, g_strdup (trace));
  for (int g = 0; g < P * D; g++)
    g_ptr_array_add (merge, g_strdup_printf ("%s.rank%d", base, g));
  g_ptr_array_add (merge, NULL);
  bench_run ((const char *const *) merge->pdata);
  for (int g = 0; g < P * D; g++)
    g_remove (g_ptr_array_index (merge, 4 + g));
  g_ptr_array_unref (merge);
  g_free (base);
  return trace;
}

static inline void
bench_mesh_clear (char *dir, char *trace)
{
  g_remove (trace);
  g_rmdir (dir);
  g_free (trace);
  g_free (dir);
}
