/* cli-profile-files.c — the run's rank files: this run's id and trace
 * path, checked writable before the command runs, merged into the trace
 * when it ends (or said how to merge), and other runs' files left alone
 * and named. */
#include "cli-profile-private.h"
#include "cli-commands.h"
#include "cli-common.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pp-trace.h"

/* ---- the run's rank files --------------------------------------------------------
 *
 * Each rank writes TRACE.ID.rankR, ID being this run's job id (16 hex
 * digits, also in each file's header): a run's files never take the names
 * of another's (an earlier run killed before its merge, a run beside this
 * one with the same --trace), and profile merges and removes only files
 * whose header names its own run.  Files other runs left are never
 * touched; profile says where they are and how to merge them. */

/* A run's id: random, never 0 (0 is "no run" in a file's header). */
uint64_t
new_job_id (void)
{
  uint64_t id = 0;
  if (getrandom (&id, sizeof id, 0) != (ssize_t) sizeof id)
    {
      struct timespec ts;
      clock_gettime (CLOCK_REALTIME, &ts);
      id = ((uint64_t) getpid () << 40) ^ (uint64_t) ts.tv_sec * 1000000007u ^ (uint64_t) ts.tv_nsec;
    }
  return id ? id : 1;
}

/* path, relative to this process's folder when it is not absolute: the
 * command may change folder before its ranks open their files. */
int
absolute_path (const char *path, char *out, size_t size)
{
  char cwd[PATH_MAX];
  if (path[0] == '/')
    return snprintf (out, size, "%s", path) < (int) size ? 0 : -1;
  if (getcwd (cwd, sizeof cwd) == NULL)
    return -1;
  while (path[0] == '.' && path[1] == '/')
    path += 2;
  return snprintf (out, size, "%s%s%s", cwd, strcmp (cwd, "/") ? "/" : "", path) < (int) size ? 0 : -1;
}

/* Whether the trace can be written, before the command runs, not after:
 * not a folder, not a file a running job writes, not a rank file of some
 * run (which the merge would replace), and a folder that takes new files,
 * tried with a name of our own (O_EXCL), never with a name a run's files
 * may have.  2 and one line if not. */
int
check_writable (const char *given, const char *trace)
{
  struct stat st;
  uint64_t id = 0;
  if (stat (trace, &st) == 0)
    {
      if (S_ISDIR (st.st_mode))
        return pp_cli_usage_error ("--trace %s is a folder: name the trace file (e.g. %s/job.pptrace)",
                                   given, given);
      if (S_ISREG (st.st_mode) && pp_trace_file_in_use (trace))
        return pp_cli_usage_error ("--trace %s: a running job is writing it: give another name", given);
      if (S_ISREG (st.st_mode) && pp_trace_file_job_id (trace, &id, NULL) == PP_OK && id != 0)
        return pp_cli_usage_error ("--trace %s is a rank file of run %016llx, not a merged trace: give "
                                   "the trace another name", given, (unsigned long long) id);
    }
  char probe[PATH_MAX];
  const char *slash = strrchr (trace, '/');
  int dir_len = slash == trace ? 1 : (int) (slash - trace);
  if (snprintf (probe, sizeof probe, "%.*s/.pipescope-probe-XXXXXX", dir_len, trace) >= (int) sizeof probe)
    return pp_cli_usage_error ("--trace %s: the path is too long", given);
  int fd = mkstemp (probe);
  if (fd < 0)
    return pp_cli_usage_error ("--trace %s: cannot write in %.*s: %s", given, dir_len, trace, strerror (errno));
  close (fd);
  unlink (probe);
  return 0;
}

/* A word as a shell reads it back: as is when plain, else in single quotes. */
static void
shell_word (FILE *out, const char *w)
{
  if (w[0] != '\0' && strspn (w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-+=:,@%")
                          == strlen (w))
    {
      fputs (w, out);
      return;
    }
  fputc ('\'', out);
  for (const char *p = w; *p; p++)
    if (*p == '\'')
      fputs ("'\\''", out);
    else
      fputc (*p, out);
  fputc ('\'', out);
}

/* base ends with ".ID", ID being id in hex: the files' names are the run's
 * own, so BASE.rank* names them and them only. */
static bool
base_is_runs (const char *base, uint64_t id)
{
  char tail[20];
  size_t n = strlen (base), t = (size_t) snprintf (tail, sizeof tail, ".%016llx", (unsigned long long) id);
  return id != 0 && n > t && strcmp (base + n - t, tail) == 0;
}

/* How to merge the rank files files[0..n) of base, into merged, or where
 * merged is NULL into a trace of their own beside them (TRACE-ID.pptrace,
 * never this run's trace): the command, for a line of profile's. */
static void
print_merge_command (FILE *out, const char *merged, const char *base, uint64_t id, char *const *files, int n)
{
  char stem[PATH_MAX], own[PATH_MAX + 32];
  size_t len = strlen (base);
  bool runs = base_is_runs (base, id);
  if (merged == NULL)
    {
      snprintf (stem, sizeof stem, "%s", base);
      if (runs)
        stem[len - 17] = '\0';
      len = strlen (stem);
      if (len > 8 && strcmp (stem + len - 8, ".pptrace") == 0)
        stem[len - 8] = '\0';
      if (id != 0)
        snprintf (own, sizeof own, "%s-%016llx.pptrace", stem, (unsigned long long) id);
      else
        snprintf (own, sizeof own, "%s-earlier.pptrace", stem);
      merged = own;
    }
  fputs ("pipescope-cli merge -o ", out);
  shell_word (out, merged);
  if (runs)
    {
      fputc (' ', out);
      shell_word (out, base);
      fputs (".rank*", out);
      return;
    }
  for (int i = 0; i < n; i++)
    {
      fputc (' ', out);
      shell_word (out, files[i]);
    }
}

typedef struct {
  char    *path;
  size_t   base_len;    /* path[0..base_len) is the base, ".rankR" after it */
  long     rank;
  uint64_t id;
  bool     busy;        /* still open for writing by a live process */
} RankFile;

static int
rank_file_cmp (const void *a, const void *b)
{
  const RankFile *x = a, *y = b;
  int c = strncmp (x->path, y->path, x->base_len < y->base_len ? x->base_len : y->base_len);
  if (c == 0 && x->base_len != y->base_len)
    c = x->base_len < y->base_len ? -1 : 1;
  if (c == 0 && x->id != y->id)
    c = x->id < y->id ? -1 : 1;
  return c != 0 ? c : x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* NAME.rankR, R digits: R, else -1. */
static long
rank_of_name (const char *name, size_t *base_len)
{
  const char *dot = strrchr (name, '.');
  if (dot == NULL || dot == name || strncmp (dot, ".rank", 5) != 0 || dot[5] == '\0'
      || strspn (dot + 5, "0123456789") != strlen (dot + 5) || strlen (dot + 5) > 6)
    return -1;
  *base_len = (size_t) (dot - name);
  return atol (dot + 5);
}

/* Says, one line each, which rank files of other runs lie in the trace's
 * folder: a run's (a job id in their headers) and any at the trace's own
 * name.  They are left as they are; the line gives the merge command. */
void
report_leftovers (const char *trace)
{
  char dir[PATH_MAX];
  const char *slash = strrchr (trace, '/');
  snprintf (dir, sizeof dir, "%.*s", slash == trace ? 1 : (int) (slash - trace), trace);
  DIR *d = opendir (dir);
  if (d == NULL)
    return;
  RankFile *found = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  /* every one of them: a job of 5,000 processes leaves 5,000 (a bound of
   * 4,096 files looked at left the rest unsaid) */
  while ((e = readdir (d)) != NULL && n < INT32_MAX / 2)
    {
      size_t base_len;
      long rank = rank_of_name (e->d_name, &base_len);
      char path[PATH_MAX];
      uint64_t id = 0;
      if (rank < 0 || snprintf (path, sizeof path, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "", e->d_name)
                      >= (int) sizeof path
          || !is_file (path) || pp_trace_file_job_id (path, &id, NULL) != PP_OK)
        continue;
      base_len += strlen (path) - strlen (e->d_name);
      if (id == 0 && !(strlen (trace) == base_len && strncmp (path, trace, base_len) == 0))
        continue;   /* no run's, and not at this trace's name: someone's own files */
      if (n == cap)
        {
          RankFile *more = realloc (found, (size_t) (cap = cap ? 2 * cap : 16) * sizeof *found);
          if (more == NULL)
            break;
          found = more;
        }
      found[n] = (RankFile) { strdup (path), base_len, rank, id, pp_trace_file_in_use (path) != 0 };
      if (found[n].path != NULL)
        n++;
    }
  closedir (d);
  if (n > 0)
    qsort (found, (size_t) n, sizeof *found, rank_file_cmp);
  char **paths = calloc ((size_t) n + 1, sizeof *paths);
  for (int i = 0, j = 0; paths != NULL && i < n; i = j)
    {
      /* one run's files: the same base and the same id */
      bool busy = false;
      for (j = i; j < n && found[j].id == found[i].id && found[j].base_len == found[i].base_len
                  && strncmp (found[j].path, found[i].path, found[i].base_len) == 0; j++)
        {
          paths[j - i] = found[j].path;
          busy |= found[j].busy;
        }
      char base[PATH_MAX], run[40];
      snprintf (base, sizeof base, "%.*s", (int) found[i].base_len, found[i].path);
      if (found[i].id != 0)
        snprintf (run, sizeof run, "run %016llx", (unsigned long long) found[i].id);
      else
        snprintf (run, sizeof run, "run (no job id)");
      if (busy)
        fprintf (stderr, "pipescope-cli: profile: another %s, still running, is writing %d rank file%s in %s "
                 "(not part of this run, left alone); once it ends, merge them with: ", run, j - i,
                 j - i == 1 ? "" : "s", dir);
      else
        fprintf (stderr, "pipescope-cli: profile: an earlier %s left %d rank file%s in %s (not part of this "
                 "run, kept as they are); merge them with: ", run, j - i, j - i == 1 ? "" : "s", dir);
      print_merge_command (stderr, NULL, base, found[i].id, paths, j - i);
      fputc ('\n', stderr);
    }
  for (int i = 0; i < n; i++)
    free (found[i].path);
  free (paths);
  free (found);
}

/* Merges this run's rank files RUN.rankR (RUN = TRACE.ID) into TRACE, its
 * plan timed with the measured costs where it can be, and removes them
 * once merged; when the merge fails they stay, and one line says how to
 * merge them.  What merging prints goes to stderr: the command's stdout is
 * the command's own. */
static int merge_traces_here (const char *trace, const char *run, uint64_t id, int cmd_status);

int
merge_traces (const char *trace, const char *run, uint64_t id, int cmd_status)
{
  fflush (stdout);
  int saved = dup (STDOUT_FILENO);
  if (saved >= 0)
    dup2 (STDERR_FILENO, STDOUT_FILENO);
  int status = merge_traces_here (trace, run, id, cmd_status);
  fflush (stdout);
  if (saved >= 0)
    {
      dup2 (saved, STDOUT_FILENO);
      close (saved);
    }
  return status;
}

/* The start of profile's line when the trace it promised is not there:
 * the command's own status first, which profile's exit no longer is. */
static void
say_no_trace (int cmd_status)
{
  if (cmd_status > 128)
    fprintf (stderr, "pipescope-cli: profile: the command was killed (signal %d), and no trace was "
             "written: ", cmd_status - 128);
  else
    fprintf (stderr, "pipescope-cli: profile: the command exited %d, but no trace was written: ",
             cmd_status);
}

static int
cmp_rank_file (const void *a, const void *b)
{
  const RankFile *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* This run's rank files RUN.rankG, every G a process may have (global
 * ranks past 4095 too: issue 40), by G, from one listing of the folder
 * (not a stat per possible G); this run's only, by its header too.  Files
 * of the run that merge cannot take (G past PP_TRACE_MAX_PROCESSES) go to
 * *left, said by the caller.  -1 when out of memory or the folder cannot
 * be read (said). */
static int
find_rank_files (const char *run, uint64_t id, RankFile **files, int *n, RankFile **left, int *n_left)
{
  char dir[PATH_MAX];
  const char *slash = strrchr (run, '/'), *base = slash ? slash + 1 : run;
  snprintf (dir, sizeof dir, "%.*s", slash == NULL ? 1 : slash == run ? 1 : (int) (slash - run),
            slash == NULL ? "." : run);
  int cap = 0, cap_left = 0;
  *files = *left = NULL;
  *n = *n_left = 0;
  DIR *d = opendir (dir);
  if (d == NULL)
    {
      fprintf (stderr, "pipescope-cli: profile: cannot read %s for the ranks' files: %s\n", dir, strerror (errno));
      return -1;
    }
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    {
      size_t base_len, len = strlen (base);
      long g = strncmp (e->d_name, base, len) == 0 ? rank_of_name (e->d_name, &base_len) : -1;
      char path[PATH_MAX + 40];
      uint64_t file_id = 0;
      if (g < 0 || base_len != len
          || snprintf (path, sizeof path, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "", e->d_name) >= (int) sizeof path
          || !is_file (path) || pp_trace_file_job_id (path, &file_id, NULL) != PP_OK || file_id != id)
        continue;
      bool ok = g < PP_TRACE_MAX_PROCESSES;
      RankFile **to = ok ? files : left;
      int *k = ok ? n : n_left, *c = ok ? &cap : &cap_left;
      if (*k == *c)
        {
          RankFile *more = realloc (*to, (size_t) (*c = *c ? 2 * *c : 64) * sizeof *more);
          if (more == NULL)
            break;
          *to = more;
        }
      (*to)[*k] = (RankFile) { strdup (path), strlen (path) - strlen (e->d_name) + len, g, id, false };
      if ((*to)[*k].path == NULL)
        break;
      ++*k;
    }
  bool oom = e != NULL;
  closedir (d);
  if (oom)
    fprintf (stderr, "pipescope-cli: profile: out of memory listing the ranks' files in %s\n", dir);
  qsort (*files, (size_t) *n, sizeof **files, cmp_rank_file);
  qsort (*left, (size_t) *n_left, sizeof **left, cmp_rank_file);
  return oom ? -1 : 0;
}

static int
merge_traces_here (const char *trace, const char *run, uint64_t id, int cmd_status)
{
  RankFile *files = NULL, *left = NULL;
  int n_files = 0, n_left = 0, argc = 0, found = 0, status = 1;
  char **argv = NULL;
  if (find_rank_files (run, id, &files, &n_files, &left, &n_left) != 0
      || (argv = calloc ((size_t) n_files + 4, sizeof *argv)) == NULL)
    {
      for (int i = 0; i < n_files; i++)
        free (files[i].path);
      for (int i = 0; i < n_left; i++)
        free (left[i].path);
      free (files);
      free (left);
      say_no_trace (cmd_status);
      fprintf (stderr, "the ranks' files were not merged (said above); they are kept in their folder\n");
      return 1;
    }
  argv[argc++] = "merge";
  argv[argc++] = "-o";
  argv[argc++] = (char *) trace;
  for (int i = 0; i < n_files; i++)
    {
      argv[argc++] = files[i].path;
      found++;
    }
  free (files);
  if (found == 0)
    {
      say_no_trace (cmd_status);
      fprintf (stderr, "no rank wrote a trace (%s.rankG): did the command run a "
               "torch.distributed.pipelining schedule, megatron-core's with "
               "pipeline_model_parallel_size above 1, or a DeepSpeed pipe engine's train_batch?\n", run);
    }
  else
    {
      /* A file size limit (ulimit -f) must fail the write, as a full disk
       * does, not kill profile with its rank files half merged. */
      signal (SIGXFSZ, SIG_IGN);
      bool existed = access (trace, F_OK) == 0;
      fflush (stdout);
      /* merge times the plan with the costs the ranks measured */
      status = pp_cli_merge (argc, argv);
      if (status == 0)
        for (int i = 3; i < argc; i++)
          unlink (argv[i]);
      else
        {
          /* what a failed merge may have begun is no trace: the ranks'
           * files are the run's record */
          if (!existed)
            unlink (trace);
          say_no_trace (cmd_status);
          fprintf (stderr, "the merge failed (said above); the ranks' files are kept: merge them with: ");
          print_merge_command (stderr, trace, run, id, argv + 3, argc - 3);
          fputc ('\n', stderr);
        }
    }
  /* a limit that remains is said, with the files it left out */
  if (n_left > 0)
    {
      fprintf (stderr, "pipescope-cli: profile: %d rank file%s of this run %s a global rank past %d, "
               "which no trace can hold, and %s not merged (kept as %s):", n_left, n_left == 1 ? "" : "s",
               n_left == 1 ? "has" : "have", PP_TRACE_MAX_PROCESSES - 1, n_left == 1 ? "was" : "were",
               n_left == 1 ? "it is" : "they are");
      for (int i = 0; i < n_left; i++)
        {
          fputc (' ', stderr);
          shell_word (stderr, left[i].path);
          free (left[i].path);
        }
      fputc ('\n', stderr);
      status = 1;
    }
  free (left);
  for (int i = 3; i < argc; i++)
    free (argv[i]);
  free (argv);
  return status;
}
