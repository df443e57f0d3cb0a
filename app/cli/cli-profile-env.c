/* cli-profile-env.c — where profile finds the hook (the probe library, the
 * Python package, the NCCL profiler plugin) and the environment the
 * command inherits to load it in every rank. */
#include "cli-profile-private.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool
is_file (const char *p)
{
  struct stat st;
  return stat (p, &st) == 0 && S_ISREG (st.st_mode);
}

static bool
is_dir (const char *p)
{
  struct stat st;
  return stat (p, &st) == 0 && S_ISDIR (st.st_mode);
}

/* The probe library and the Python package: the environment's, else the
 * build tree's (this binary in BUILD/app/cli), else the installed ones. */
int
find_hook (char *lib, size_t lib_size, char *py, size_t py_size)
{
  char exe[PATH_MAX - 64];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 64);
  const char *env_lib = getenv ("PIPESCOPE_LIB"), *env_py = getenv ("PIPESCOPE_PYTHON");

  lib[0] = py[0] = '\0';
  if (n > 0)
    {
      exe[n] = '\0';
      char *slash = strrchr (exe, '/');
      if (slash)
        *slash = '\0';
      snprintf (lib, lib_size, "%s/../../probe/libpipescope-probe.so", exe);
      if (!is_file (lib))
        snprintf (lib, lib_size, "%s/libpipescope-probe.so.1", PP_INSTALL_LIBDIR);
    }
  if (env_lib && env_lib[0])
    snprintf (lib, lib_size, "%s", env_lib);
  snprintf (py, py_size, "%s", PP_SOURCE_PYTHON_DIR);
  if (!is_dir (py))
    snprintf (py, py_size, "%s", PP_INSTALL_PYTHON_DIR);
  if (env_py && env_py[0])
    snprintf (py, py_size, "%s", env_py);
  if (!is_file (lib))
    {
      if (env_lib && env_lib[0])
        fprintf (stderr, "pipescope-cli: error: PIPESCOPE_LIB=%s: no such file\n", lib);
      else
        fprintf (stderr, "pipescope-cli: error: the probe library is not at %s (set PIPESCOPE_LIB)\n", lib);
      return 2;
    }
  char probe[PATH_MAX];
  snprintf (probe, sizeof probe, "%s/pipescope/_autoload/sitecustomize.py", py);
  if (!is_file (probe))
    {
      fprintf (stderr, "pipescope-cli: error: the Python hook is not at %s (set PIPESCOPE_PYTHON)\n", py);
      return 1;
    }
  char *real = realpath (lib, NULL);
  if (real)
    {
      snprintf (lib, lib_size, "%s", real);
      free (real);
    }
  return 0;
}

/* NCCL_PROFILER_PLUGIN: the NCCL profiler plugin beside the probe library
 * (the build tree's nccl/, or the same folder installed), so that a job's
 * NCCL records its operations and waits into the job's ranks
 * (docs/nccl-plugin.md); a job that names its own plugin keeps it. */
static void
set_nccl_plugin (const char *lib)
{
  char path[PATH_MAX];
  const char *slash = strrchr (lib, '/');
  int dir = slash ? (int) (slash - lib) : 0;
  if (getenv ("NCCL_PROFILER_PLUGIN") != NULL)
    return;
  snprintf (path, sizeof path, "%.*s/nccl/libnccl-profiler-pipescope.so", dir, lib);
  if (!is_file (path))
    snprintf (path, sizeof path, "%.*s/libnccl-profiler-pipescope.so", dir, lib);
  if (slash != NULL && is_file (path))
    setenv ("NCCL_PROFILER_PLUGIN", path, 1);
}

/* The command's environment; PIPESCOPE_TRACE is where the ranks' files go
 * (run: TRACE.ID, each rank writing run.rankR), PIPESCOPE_JOB_ID the id
 * the probe writes into their headers. */
int
set_env (const char *job, const char *lib, const char *py, const char *run, const char *job_id)
{
  char path[PATH_MAX * 2 + 64];
  const char *old = getenv ("PYTHONPATH");

  snprintf (path, sizeof path, "%s/pipescope/_autoload%s%s", py, old && old[0] ? ":" : "",
            old ? old : "");
  if (setenv ("PYTHONPATH", path, 1) != 0 || setenv ("PIPESCOPE_JOB", job, 1) != 0
      || setenv ("PIPESCOPE_LIB", lib, 1) != 0 || setenv ("PIPESCOPE_PYTHON", py, 1) != 0
      || (run ? setenv ("PIPESCOPE_TRACE", run, 1) : unsetenv ("PIPESCOPE_TRACE")) != 0
      || (run ? setenv ("PIPESCOPE_JOB_ID", job_id, 1) : unsetenv ("PIPESCOPE_JOB_ID")) != 0)
    {
      fprintf (stderr, "pipescope-cli: error: cannot set the command's environment: %s\n", strerror (errno));
      return 1;
    }
  set_nccl_plugin (lib);
  return 0;
}
