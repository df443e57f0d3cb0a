/* pp-registry.c — one small key=value file per running job in a private
 * per-user directory (pp-registry.h). */
#include "pp-registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define JOB_FILE_MAX  16384   /* a job file is well under this; larger is not ours */
#define LINE_MAX_LEN  4096    /* longer lines are ignored */

/* The registry's usual place: parent (XDG_RUNTIME_DIR, else $TMPDIR or
 * /tmp) and base name ("pipescope", or "pipescope-<uid>" in a shared
 * temporary folder). */
static PpStatus
primary_place (char *parent, size_t psize, char *base, size_t bsize, PpError *err)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  int n, k;
  if (xdg != NULL && xdg[0] != '\0')
    {
      n = snprintf (parent, psize, "%s", xdg);
      k = snprintf (base, bsize, "pipescope");
    }
  else
    {
      const char *tmp = getenv ("TMPDIR");
      if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
      n = snprintf (parent, psize, "%s", tmp);
      k = snprintf (base, bsize, "pipescope-%u", (unsigned) geteuid ());
    }
  if (n < 0 || (size_t) n >= psize || k < 0 || (size_t) k >= bsize)
    return pp_error_set (err, PP_EINVAL, "registry: directory path is too long");
  return PP_OK;
}

/* A directory we may trust: a real directory (not a link), ours, closed to
 * everyone else.  Another user who made it first could otherwise plant
 * entries or sockets in it. */
static PpStatus
check_dir (const char *path, PpError *err)
{
  struct stat st;
  if (lstat (path, &st) != 0)
    return pp_error_set (err, PP_EIO, "registry: cannot stat %s: %s", path, strerror (errno));
  if (!S_ISDIR (st.st_mode))
    return pp_error_set (err, PP_EIO, "registry: %s is not a directory; remove it", path);
  if (st.st_uid != geteuid ())
    return pp_error_set (err, PP_EIO, "registry: %s belongs to uid %u, not to you (uid %u); refusing to use it",
                         path, (unsigned) st.st_uid, (unsigned) geteuid ());
  if ((st.st_mode & 077) != 0)
    return pp_error_set (err, PP_EIO, "registry: %s is open to other users (mode %03o); "
                         "refusing to use it (chmod 700 it)", path, (unsigned) (st.st_mode & 0777));
  return PP_OK;
}

PpStatus
pp_registry_dir (char *buf, size_t size, PpError *err)
{
  if (buf == NULL || size == 0)
    return pp_error_set (err, PP_EINVAL, "registry: no buffer");
  char parent[PATH_MAX], base[64];
  PpStatus st = primary_place (parent, sizeof parent, base, sizeof base, err);
  if (st != PP_OK)
    return st;
  int n = snprintf (buf, size, "%s/%s", parent, base);
  if (n < 0 || (size_t) n >= size)
    return pp_error_set (err, PP_EINVAL, "registry: directory path is too long");
  if (mkdir (buf, 0700) != 0 && errno != EEXIST)
    return pp_error_set (err, PP_EIO, "registry: cannot create %s: %s", buf, strerror (errno));
  return check_dir (buf, err);
}

/* The fallback folders: "<parent>/<base>.XXXXXX" made by mkdtemp (a random
 * name, created 0700 with O_EXCL semantics, so it cannot be squatted in
 * advance), found again by listing parent and keeping only those that pass
 * check_dir.  Calls fn on each (sorted by name, so that every job and
 * viewer prefers the same one); stops when fn returns non-zero. */
#define FALLBACK_MAX 16
static int
each_fallback (int (*fn) (const char *dir, void *user), void *user)
{
  char parent[PATH_MAX], base[64];
  if (primary_place (parent, sizeof parent, base, sizeof base, NULL) != PP_OK)
    return 0;
  DIR *d = opendir (parent);
  if (d == NULL)
    return 0;
  size_t blen = strlen (base);
  char names[FALLBACK_MAX][72];
  int n = 0;
  struct dirent *e;
  while ((e = readdir (d)) != NULL && n < FALLBACK_MAX)
    if (strncmp (e->d_name, base, blen) == 0 && e->d_name[blen] == '.'
        && strlen (e->d_name + blen + 1) == 6)
      {
        char path[PATH_MAX + 80];
        snprintf (path, sizeof path, "%s/%.71s", parent, e->d_name);
        if (check_dir (path, NULL) == PP_OK)
          snprintf (names[n++], sizeof names[0], "%.71s", e->d_name);
      }
  closedir (d);
  for (int i = 1; i < n; i++)   /* insertion sort: a handful at most */
    for (int j = i; j > 0 && strcmp (names[j - 1], names[j]) > 0; j--)
      {
        char t[72];
        memcpy (t, names[j], sizeof t);
        memcpy (names[j], names[j - 1], sizeof t);
        memcpy (names[j - 1], t, sizeof t);
      }
  for (int i = 0; i < n; i++)
    {
      char path[PATH_MAX + 80];
      snprintf (path, sizeof path, "%s/%.71s", parent, names[i]);
      int rc = fn (path, user);
      if (rc != 0)
        return rc;
    }
  return 0;
}

typedef struct { char *buf; size_t size; } FirstDir;

static int
take_first (const char *dir, void *user)
{
  FirstDir *f = user;
  int n = snprintf (f->buf, f->size, "%s", dir);
  return n >= 0 && (size_t) n < f->size ? 1 : 0;
}

PpStatus
pp_registry_dir_for_job (char *buf, size_t size, char *note, size_t note_size, PpError *err)
{
  if (note != NULL && note_size > 0)
    note[0] = '\0';
  PpError why = { 0 };
  PpStatus st = pp_registry_dir (buf, size, &why);
  if (st == PP_OK || st == PP_EINVAL)
    {
      if (st != PP_OK)
        pp_error_set (err, st, "%s", why.msg);
      return st;
    }
  FirstDir f = { buf, size };
  if (each_fallback (take_first, &f) == 0)
    {
      char parent[PATH_MAX], base[64];
      if (primary_place (parent, sizeof parent, base, sizeof base, err) != PP_OK)
        return PP_EINVAL;
      int n = snprintf (buf, size, "%s/%s.XXXXXX", parent, base);
      if (n < 0 || (size_t) n >= size)
        return pp_error_set (err, PP_EINVAL, "registry: directory path is too long");
      if (mkdtemp (buf) == NULL)
        return pp_error_set (err, PP_EIO, "%s; no private fallback either: %s", why.msg, strerror (errno));
      if (check_dir (buf, err) != PP_OK)
        return PP_EIO;
    }
  if (note != NULL && note_size > 0)
    snprintf (note, note_size, "%s; using %s instead", why.msg, buf);
  return PP_OK;
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or
 * -1; with state, field 3 too (R, S, Z for a zombie...; '?' if unread). */
static int64_t
proc_stat (int32_t pid, char *state)
{
  if (state)
    *state = '?';
  char path[64], text[1024];
  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n;
  do
    n = read (fd, text, sizeof text - 1);
  while (n < 0 && errno == EINTR);
  close (fd);
  if (n <= 0)
    return -1;
  text[n] = '\0';
  /* comm (field 2) may hold spaces and parentheses: start after the last ')'. */
  char *p = strrchr (text, ')');
  if (p == NULL)
    return -1;
  p++;
  if (state && p[0] == ' ' && p[1] != '\0')
    *state = p[1];
  for (int field = 3; field < 22; field++)
    {
      while (*p == ' ')
        p++;
      while (*p != ' ' && *p != '\0')
        p++;
      if (*p == '\0')
        return -1;
    }
  while (*p == ' ')
    p++;
  char *end;
  errno = 0;
  unsigned long long v = strtoull (p, &end, 10);
  if (end == p || errno != 0 || v > INT64_MAX)
    return -1;
  return (int64_t) v;
}

PpStatus
pp_registry_self (PpJobInfo *job, PpError *err)
{
  if (job == NULL)
    return pp_error_set (err, PP_EINVAL, "registry: no job");
  job->pid = (int32_t) getpid ();
  job->proc_start_ticks = proc_stat (job->pid, NULL);
  if (job->proc_start_ticks < 0)
    job->proc_start_ticks = 0;   /* no /proc: liveness falls back to kill(pid, 0) */
  if (gethostname (job->host, sizeof job->host) != 0)
    snprintf (job->host, sizeof job->host, "unknown");
  job->host[sizeof job->host - 1] = '\0';
  return PP_OK;
}

/* 1: the process is running and is the one that wrote the entry; 0: it
 * ended or its pid was reused (a stale entry, removed); -1: the entry
 * cannot be ours (no start time although /proc tells it, or a process of
 * another user): skipped and left alone. */
static int
job_alive (const PpJobInfo *job)
{
  if (job->pid <= 0)
    return 0;
  if (kill ((pid_t) job->pid, 0) != 0 && errno != EPERM)
    return 0;
  char state;
  int64_t t = proc_stat (job->pid, &state);
  /* a zombie answers kill(pid, 0) but serves nothing: it exited, and its
   * parent (the app that started it, say) has not reaped it yet */
  if (state == 'Z' || state == 'X' || state == 'x')
    return 0;
  if (t < 0)
    return 1;   /* no /proc: kill(pid, 0) is all there is */
  if (job->proc_start_ticks <= 0)
    return -1;  /* every job of ours records it where /proc is readable */
  if (t != job->proc_start_ticks)
    return 0;   /* the pid was reused */
  char path[64];
  struct stat st;
  snprintf (path, sizeof path, "/proc/%d", (int) job->pid);
  if (stat (path, &st) == 0 && st.st_uid != geteuid ())
    return -1;  /* a process of another user is no job of ours */
  return 1;
}

/* ---- the job file ---- */

/* Appends "key=value\n" with \\, \n and \r escaped; 0, or -1 if it does not fit. */
static int
put_line (char *buf, size_t size, size_t *len, const char *key, const char *value, size_t value_max)
{
  size_t n = *len;
  int k = snprintf (buf + n, size - n, "%s=", key);
  if (k < 0 || (size_t) k >= size - n)
    return -1;
  n += (size_t) k;
  for (size_t i = 0; i < value_max && value[i] != '\0'; i++)
    {
      char c = value[i];
      const char *esc = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : NULL;
      size_t need = esc ? 2 : 1;
      if (size - n < need + 2)
        return -1;
      if (esc)
        memcpy (buf + n, esc, 2);
      else
        buf[n] = c;
      n += need;
    }
  if (size - n < 2)
    return -1;
  buf[n++] = '\n';
  buf[n] = '\0';
  *len = n;
  return 0;
}

static void
unescape_into (char *dst, size_t size, const char *src, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < len && o + 1 < size; i++)
    {
      char c = src[i];
      if (c == '\\' && i + 1 < len)
        {
          char e = src[++i];
          c = e == 'n' ? '\n' : e == 'r' ? '\r' : e;
        }
      dst[o++] = c;
    }
  dst[o] = '\0';
}

static int
parse_int64 (const char *s, size_t len, int64_t *out)
{
  char tmp[32];
  if (len == 0 || len >= sizeof tmp)
    return -1;
  memcpy (tmp, s, len);
  tmp[len] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll (tmp, &end, 10);
  if (*end != '\0' || errno != 0)
    return -1;
  *out = v;
  return 0;
}

/* Parses a job file's text; 0 if it names a pid. */
static int
parse_job (const char *text, size_t size, PpJobInfo *job)
{
  memset (job, 0, sizeof *job);
  int have_pid = 0;
  size_t i = 0;
  while (i < size)
    {
      const char *line = text + i;
      const char *nl = memchr (line, '\n', size - i);
      size_t len = nl ? (size_t) (nl - line) : size - i;
      i += len + 1;
      if (len > LINE_MAX_LEN)
        continue;
      const char *eq = memchr (line, '=', len);
      if (eq == NULL)
        continue;
      size_t klen = (size_t) (eq - line);
      const char *v = eq + 1;
      size_t vlen = len - klen - 1;
#define KEY(name) (klen == sizeof (name) - 1 && memcmp (line, name, klen) == 0)
      int64_t num;
      if (KEY ("pid"))
        {
          if (parse_int64 (v, vlen, &num) == 0 && num > 0 && num <= INT32_MAX)
            {
              job->pid = (int32_t) num;
              have_pid = 1;
            }
        }
      else if (KEY ("start_unix_ns"))
        {
          if (parse_int64 (v, vlen, &num) == 0)
            job->start_unix_ns = num;
        }
      else if (KEY ("proc_start_ticks"))
        {
          if (parse_int64 (v, vlen, &num) == 0)
            job->proc_start_ticks = num;
        }
      else if (KEY ("host"))
        unescape_into (job->host, sizeof job->host, v, vlen);
      else if (KEY ("name"))
        unescape_into (job->name, sizeof job->name, v, vlen);
      else if (KEY ("schedule"))
        unescape_into (job->schedule, sizeof job->schedule, v, vlen);
      else if (KEY ("cmdline"))
        unescape_into (job->cmdline, sizeof job->cmdline, v, vlen);
      else if (KEY ("endpoint"))
        unescape_into (job->endpoint, sizeof job->endpoint, v, vlen);
      else if (KEY ("tcp"))
        unescape_into (job->tcp, sizeof job->tcp, v, vlen);
      else if (KEY ("job"))
        unescape_into (job->job, sizeof job->job, v, vlen);
      else if (KEY ("stuck"))
        unescape_into (job->stuck, sizeof job->stuck, v, vlen);
      else if (KEY ("rank") || KEY ("n_ranks"))
        {
          if (parse_int64 (v, vlen, &num) == 0 && num >= 0 && num <= 65536)
            *(KEY ("rank") ? &job->rank : &job->n_ranks) = (int32_t) num;
        }
#undef KEY
      /* unknown keys: a newer writer; ignored */
    }
  return have_pid ? 0 : -1;
}

/* Reads dir/name into job; 0 on success.  Only a regular file of ours that
 * no one else may read or write is an entry: anything else (a FIFO, which
 * would block a plain open forever; a device; a link; a file another user
 * or a careless mode let others write) is skipped.  O_NONBLOCK makes the
 * open itself return at once whatever the name is; fstat then decides. */
static int
read_job (int dfd, const char *name, PpJobInfo *job)
{
  int fd = openat (dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size > JOB_FILE_MAX
      || st.st_uid != geteuid () || (st.st_mode & 077) != 0)
    {
      close (fd);
      return -1;
    }
  char text[JOB_FILE_MAX];
  size_t len = 0;
  for (;;)
    {
      ssize_t n = read (fd, text + len, sizeof text - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t) n;
      if (len == sizeof text)
        break;
    }
  close (fd);
  return parse_job (text, len, job);
}

/* The endpoint an entry may name: our own socket beside it, or none. */
static int
endpoint_ours (const char *dir, const PpJobInfo *job)
{
  if (job->endpoint[0] == '\0')
    return 1;
  char want[PATH_MAX + 48];
  snprintf (want, sizeof want, "unix:%s/%d.sock", dir, (int) job->pid);
  return strcmp (job->endpoint, want) == 0;
}

/* Whether the entry's socket is there: a socket of ours.  What tells the
 * job that serves from a file that merely names a live process. */
static int
socket_ours (const PpJobInfo *job)
{
  struct stat st;
  if (strncmp (job->endpoint, "unix:", 5) != 0 || lstat (job->endpoint + 5, &st) != 0)
    return 0;
  return S_ISSOCK (st.st_mode) && st.st_uid == geteuid ();
}

PpStatus
pp_registry_add (const PpJobInfo *job, PpError *err)
{
  if (job == NULL || job->pid <= 0)
    return pp_error_set (err, PP_EINVAL, "registry: no job or invalid pid");
  char dir[PATH_MAX];
  PpStatus st = pp_registry_dir (dir, sizeof dir, err);
  if (st != PP_OK)
    return st;
  return pp_registry_add_in (dir, job, err);
}

PpStatus
pp_registry_add_in (const char *dir, const PpJobInfo *job, PpError *err)
{
  if (job == NULL || job->pid <= 0 || dir == NULL)
    return pp_error_set (err, PP_EINVAL, "registry: no job or invalid pid");

  char name[64];
  if (job->name[0] != '\0')
    snprintf (name, sizeof name, "%.*s", (int) sizeof job->name - 1, job->name);
  else
    snprintf (name, sizeof name, "%.40s-%d", job->schedule[0] ? job->schedule : "job", (int) job->pid);

  char num[5][32];
  snprintf (num[0], sizeof num[0], "%d", (int) job->pid);
  snprintf (num[1], sizeof num[1], "%" PRId64, job->start_unix_ns);
  snprintf (num[2], sizeof num[2], "%" PRId64, job->proc_start_ticks);
  snprintf (num[3], sizeof num[3], "%d", (int) job->rank);
  snprintf (num[4], sizeof num[4], "%d", (int) job->n_ranks);
  char *buf = malloc (JOB_FILE_MAX);
  if (buf == NULL)
    return pp_error_set (err, PP_ENOMEM, "registry: out of memory");
  size_t len = 0;
  buf[0] = '\0';
  int bad = put_line (buf, JOB_FILE_MAX, &len, "pid", num[0], sizeof num[0])
            | put_line (buf, JOB_FILE_MAX, &len, "start_unix_ns", num[1], sizeof num[1])
            | put_line (buf, JOB_FILE_MAX, &len, "proc_start_ticks", num[2], sizeof num[2])
            | put_line (buf, JOB_FILE_MAX, &len, "host", job->host, sizeof job->host)
            | put_line (buf, JOB_FILE_MAX, &len, "name", name, sizeof name)
            | put_line (buf, JOB_FILE_MAX, &len, "schedule", job->schedule, sizeof job->schedule)
            | put_line (buf, JOB_FILE_MAX, &len, "cmdline", job->cmdline, sizeof job->cmdline)
            | put_line (buf, JOB_FILE_MAX, &len, "endpoint", job->endpoint, sizeof job->endpoint)
            | put_line (buf, JOB_FILE_MAX, &len, "tcp", job->tcp, sizeof job->tcp);
  if (job->job[0])
    bad |= put_line (buf, JOB_FILE_MAX, &len, "job", job->job, sizeof job->job)
           | put_line (buf, JOB_FILE_MAX, &len, "rank", num[3], sizeof num[3])
           | put_line (buf, JOB_FILE_MAX, &len, "n_ranks", num[4], sizeof num[4]);
  if (job->stuck[0])
    bad |= put_line (buf, JOB_FILE_MAX, &len, "stuck", job->stuck, sizeof job->stuck);
  if (bad)
    {
      free (buf);
      return pp_error_set (err, PP_EINVAL, "registry: job entry does not fit in %d bytes", JOB_FILE_MAX);
    }

  char tmp_path[PATH_MAX + 32], path[PATH_MAX + 32];
  snprintf (tmp_path, sizeof tmp_path, "%s/.%d.job.tmp", dir, (int) job->pid);
  snprintf (path, sizeof path, "%s/%d.job", dir, (int) job->pid);
  int fd = open (tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    {
      free (buf);
      return pp_error_set (err, PP_EIO, "registry: cannot create %s: %s", tmp_path, strerror (errno));
    }
  size_t off = 0;
  while (off < len)
    {
      ssize_t n = write (fd, buf + off, len - off);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int e = errno;
          close (fd);
          unlink (tmp_path);
          free (buf);
          return pp_error_set (err, PP_EIO, "registry: cannot write %s: %s", tmp_path, strerror (e));
        }
      off += (size_t) n;
    }
  free (buf);
  if (close (fd) != 0 || rename (tmp_path, path) != 0)
    {
      int e = errno;
      unlink (tmp_path);
      return pp_error_set (err, PP_EIO, "registry: cannot write %s: %s", path, strerror (e));
    }
  return PP_OK;
}

/* Removes pid's entry and socket from dir; ENOENT is fine. */
static int
remove_in (const char *dir, int32_t pid)
{
  char path[PATH_MAX + 32];
  int rc = 0;
  snprintf (path, sizeof path, "%s/%d.job", dir, (int) pid);
  if (unlink (path) != 0 && errno != ENOENT)
    rc = -1;
  snprintf (path, sizeof path, "%s/%d.sock", dir, (int) pid);
  if (unlink (path) != 0 && errno != ENOENT)
    rc = -1;
  return rc;
}

/* Removes pid's entry from every folder we use (the usual one and the
 * fallbacks); ENOENT is fine. */
static int
remove_cb (const char *dir, void *user)
{
  remove_in (dir, *(int32_t *) user);
  return 0;
}

PpStatus
pp_registry_remove (int32_t pid, PpError *err)
{
  if (pid <= 0)
    return pp_error_set (err, PP_EINVAL, "registry: invalid pid %d", (int) pid);
  char dir[PATH_MAX];
  PpError why = { 0 };
  PpStatus st = pp_registry_dir (dir, sizeof dir, &why);
  each_fallback (remove_cb, &pid);
  if (st != PP_OK)
    return PP_OK;   /* nothing of ours can be in a folder we refuse */
  if (remove_in (dir, pid) != 0)
    return pp_error_set (err, PP_EIO, "registry: cannot remove the entry of pid %d: %s",
                         (int) pid, strerror (errno));
  return PP_OK;
}

/* "<digits>.job" -> pid, else 0. */
static int32_t
job_file_pid (const char *name)
{
  int64_t v = 0;
  const char *p = name;
  while (*p >= '0' && *p <= '9')
    {
      v = v * 10 + (*p - '0');
      if (v > INT32_MAX)
        return 0;
      p++;
    }
  if (p == name || strcmp (p, ".job") != 0)
    return 0;
  return (int32_t) v;
}

static int
job_cmp (const void *a, const void *b)
{
  const PpJobInfo *x = a, *y = b;
  if (x->start_unix_ns != y->start_unix_ns)
    return x->start_unix_ns < y->start_unix_ns ? -1 : 1;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

typedef struct {
  PpJobInfo *jobs;
  size_t     n, cap;
  int        oom;
} JobList;

/* Appends the trusted, live entries of dir; removes the stale ones. */
static int
list_in (const char *dir, void *user)
{
  JobList *l = user;
  DIR *d = opendir (dir);
  if (d == NULL)
    return 0;
  int dfd = dirfd (d);
  struct dirent *e;
  PpJobInfo job;
  while ((e = readdir (d)) != NULL)
    {
      int32_t pid = job_file_pid (e->d_name);
      if (pid <= 0)
        continue;
      if (read_job (dfd, e->d_name, &job) != 0 || job.pid != pid || !endpoint_ours (dir, &job))
        continue;   /* not a job entry we understand or trust: leave it alone */
      int alive = job_alive (&job);
      if (alive == 0)
        {
          remove_in (dir, pid);   /* stale: its job died */
          continue;
        }
      if (alive < 0)
        continue;
      if (l->n == l->cap)
        {
          size_t ncap = l->cap ? l->cap * 2 : 8;
          PpJobInfo *no = realloc (l->jobs, ncap * sizeof *no);
          if (no == NULL)
            {
              l->oom = 1;
              closedir (d);
              return 1;
            }
          l->jobs = no;
          l->cap = ncap;
        }
      l->jobs[l->n++] = job;
    }
  closedir (d);
  return 0;
}

static int
count_cb (const char *dir, void *user)
{
  (void) dir;
  (*(int *) user)++;
  return 0;
}

PpStatus
pp_registry_list (PpJobInfo **jobs, size_t *n_jobs, PpError *err)
{
  if (jobs == NULL || n_jobs == NULL)
    return pp_error_set (err, PP_EINVAL, "registry: no output");
  *jobs = NULL;
  *n_jobs = 0;
  char dir[PATH_MAX];
  PpError why = { 0 };
  PpStatus st = pp_registry_dir (dir, sizeof dir, &why);
  JobList l = { 0 };
  /* Jobs that found the usual folder refused serve from a fallback: look
   * there too.  Refused and no fallback: say why the usual one is refused. */
  if (st == PP_OK)
    {
      if (access (dir, R_OK | X_OK) != 0)
        return pp_error_set (err, PP_EIO, "registry: cannot open %s: %s", dir, strerror (errno));
      list_in (dir, &l);
    }
  int n_fallbacks = 0;
  each_fallback (count_cb, &n_fallbacks);
  if (!l.oom && n_fallbacks > 0)
    each_fallback (list_in, &l);
  if (l.oom)
    {
      free (l.jobs);
      return pp_error_set (err, PP_ENOMEM, "registry: out of memory listing jobs");
    }
  if (st != PP_OK && n_fallbacks == 0)
    {
      free (l.jobs);
      return pp_error_set (err, why.status, "%s", why.msg);
    }
  if (l.n > 1)
    qsort (l.jobs, l.n, sizeof *l.jobs, job_cmp);
  *jobs = l.jobs;
  *n_jobs = l.n;
  return PP_OK;
}

PpStatus
pp_registry_find (const char *spec, PpJobInfo *out, PpError *err)
{
  if (spec == NULL || spec[0] == '\0' || out == NULL)
    return pp_error_set (err, PP_EINVAL, "registry: no job given");
  PpJobInfo *jobs;
  size_t n;
  PpStatus st = pp_registry_list (&jobs, &n, err);
  if (st != PP_OK)
    return st;

  size_t digits = strspn (spec, "0123456789");
  int by_pid = spec[digits] == '\0';
  int by_path = strchr (spec, '/') != NULL;
  int64_t pid = 0;
  if (by_pid && (digits > 10 || parse_int64 (spec, digits, &pid) != 0))
    pid = -1;
  /* A name is not unique: anyone may pick any.  Of the entries that match,
   * one whose socket is there (a job that serves) wins over one that merely
   * names a live process; the earliest start only breaks ties. */
  const PpJobInfo *best = NULL;
  int best_serving = -1;
  for (size_t i = 0; i < n; i++)
    {
      const PpJobInfo *j = &jobs[i];
      int match;
      if (by_pid)
        match = j->pid == pid;
      else if (by_path)
        match = strncmp (j->endpoint, "unix:", 5) == 0 && strcmp (j->endpoint + 5, spec) == 0;
      else
        match = strcasecmp (j->name, spec) == 0;  /* names as users type them */
      if (match)
        {
          int serving = socket_ours (j);
          if (serving > best_serving)
            {
              best = j;
              best_serving = serving;
            }
        }
    }
  if (best != NULL && by_pid && best->job[0] && strcasecmp (best->job, best->name) != 0)
    {
      /* a rank of a job of several processes: the job is its rank 0's
       * entry, whose stream carries every rank (when it runs here) */
      for (size_t i = 0; i < n; i++)
        if (strcasecmp (jobs[i].name, best->job) == 0 && socket_ours (&jobs[i]) > 0)
          {
            best = &jobs[i];
            break;
          }
    }
  if (best != NULL)
    {
      *out = *best;
      free (jobs);
      return PP_OK;
    }

  char msg[PP_ERROR_MSG_MAX];
  if (n == 0)
    {
      free (jobs);
      return pp_error_set (err, PP_EINVAL, "no running pipescope jobs");
    }
  else
    {
      size_t len = (size_t) snprintf (msg, sizeof msg, "running: ");
      for (size_t i = 0; i < n && len < sizeof msg; i++)
        {
          char one[160];
          int k = snprintf (one, sizeof one, "%s%s (pid %d)", i ? ", " : "", jobs[i].name, (int) jobs[i].pid);
          if (k < 0 || len + (size_t) k + 8 >= sizeof msg - 128)
            {
              snprintf (msg + len, sizeof msg - len, ", ... (%zu in all)", n);
              break;
            }
          memcpy (msg + len, one, (size_t) k + 1);
          len += (size_t) k;
        }
    }
  free (jobs);
  return pp_error_set (err, PP_EINVAL, "no running job '%.100s'; %s", spec, msg);
}

/* ---- how a job ended ---- */

int
pp_registry_job_ended (const PpJobInfo *info, int wait_ms)
{
  char entry[sizeof info->endpoint];
  size_t n;
  struct stat sb;

  if (info == NULL || strncmp (info->endpoint, "unix:", 5) != 0)
    return -1;
  snprintf (entry, sizeof entry, "%s", info->endpoint + 5);
  n = strlen (entry);
  if (n < 5 || strcmp (entry + n - 5, ".sock") != 0)
    return -1;
  memcpy (entry + n - 5, ".job", 5);
  for (int i = 0; i <= wait_ms / 20; i++)
    {
      if (stat (entry, &sb) != 0)
        return 1;
      if (job_alive (info) == 0)   /* gone, a zombie, or its pid reused */
        /* a job that removed its entry and exited between the two looks
         * ended, not dead: look again */
        return stat (entry, &sb) != 0 ? 1 : 0;
      if (i < wait_ms / 20)
        {
          struct timespec ts = { 0, 20 * 1000000 };
          nanosleep (&ts, NULL);
        }
    }
  return -1;
}
