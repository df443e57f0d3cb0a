/* cli-output.c — an output file replaced whole or not at all (cli-output.h). */
#define _GNU_SOURCE   /* O_TMPFILE */
#include "cli-output.h"
#include "pp-trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool
pp_cli_no_room (int e)
{
  return e == ENOSPC || e == EDQUOT || e == EFBIG;
}

const char *
pp_cli_output_strerror (int e)
{
  return e == EBUSY ? "a running job is writing it (its trace file): give another name" : strerror (e);
}

/* A name beside o->target, "PATH.tmp-XXXXXX" (mkstemp's pattern) into buf. */
static int
name_beside (const PpCliOutput *o, char *buf, size_t size)
{
  if ((size_t) snprintf (buf, size, "%s.tmp-XXXXXX", o->target) >= size)
    return ENAMETOOLONG;
  return 0;
}

int
pp_cli_output_open (PpCliOutput *o, const char *path, int mode)
{
  char dir[PATH_MAX];
  struct stat st, lst;
  int e;

  memset (o, 0, sizeof *o);
  o->path = path;
  o->fd = -1;
  if ((size_t) snprintf (o->target, sizeof o->target, "%s", path) >= sizeof o->target)
    return ENAMETOOLONG;
  if (stat (path, &st) == 0)
    {
      if (S_ISDIR (st.st_mode))
        return EISDIR;
      if (!S_ISREG (st.st_mode))
        {
          /* a device, FIFO or terminal: renaming over it would put a file
           * where it was (/dev/null, /dev/stdout); write into it */
          if ((o->fd = open (path, O_WRONLY | O_CLOEXEC)) < 0)
            return errno;
          o->direct = true;
          snprintf (o->tmp, sizeof o->tmp, "%s", path);
          return 0;
        }
      if (pp_trace_file_in_use (path))
        return EBUSY;
      /* a link stays a link: what it leads to is replaced */
      if (lstat (path, &lst) == 0 && S_ISLNK (lst.st_mode) && realpath (path, o->target) == NULL)
        return errno;
    }
  const char *target = o->target, *slash = strrchr (target, '/');
  if (slash == NULL)
    snprintf (dir, sizeof dir, ".");
  else if ((size_t) snprintf (dir, sizeof dir, "%.*s", slash == target ? 1 : (int) (slash - target),
                              target) >= sizeof dir)
    return ENAMETOOLONG;
#ifdef O_TMPFILE
  /* a file of no name: if the command dies, the file system drops it */
  o->fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (o->fd >= 0)
    {
      /* named later through /proc (linkat): without /proc, a name now */
      snprintf (o->tmp, sizeof o->tmp, "/proc/self/fd/%d", o->fd);
      o->unnamed = access (o->tmp, F_OK) == 0;
      if (!o->unnamed)
        {
          close (o->fd);
          o->fd = -1;
        }
    }
#endif
  if (o->fd < 0)
    {
      /* no O_TMPFILE here (a file system without it): a name beside */
      if ((e = name_beside (o, o->tmp, sizeof o->tmp)) != 0)
        return e;
      if ((o->fd = mkostemp (o->tmp, O_CLOEXEC)) < 0)
        {
          e = errno;
          o->tmp[0] = '\0';
          return e;
        }
    }
  /* the mode asked for, whatever the umask (mkstemp makes 0600) */
  if (fchmod (o->fd, (mode_t) mode) != 0)
    {
      e = errno;
      pp_cli_output_discard (o);
      return e;
    }
  return 0;
}

int
pp_cli_output_write (void *user, const void *data, size_t size)
{
  PpCliOutput *o = user;
  const char *p = data;

  if (o->error != 0)
    return -1;
  while (size > 0)
    {
      ssize_t n = write (o->fd, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          o->error = n < 0 ? errno : ENOSPC;
          return -1;
        }
      p += n;
      size -= (size_t) n;
    }
  return 0;
}

/* Gives the unnamed file a name beside o->path (to rename from): 0 or an errno. */
static int
link_beside (PpCliOutput *o)
{
  char name[PATH_MAX];
  int e;

  if ((e = name_beside (o, name, sizeof name)) != 0)
    return e;
  /* mkstemp's pattern, filled by hand: linkat cannot take an existing name */
  char *x = name + strlen (name) - 6;
  for (unsigned tries = 0; tries < 100; tries++)
    {
      snprintf (x, 7, "%06u", (unsigned) (getpid () * 31u + tries) % 1000000u);
      if (linkat (AT_FDCWD, o->tmp, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
        {
          snprintf (o->tmp, sizeof o->tmp, "%s", name);
          o->unnamed = false;
          return 0;
        }
      if (errno != EEXIST)
        return errno;
    }
  return EEXIST;
}

int
pp_cli_output_commit (PpCliOutput *o)
{
  int e = o->error;

  if (o->direct)
    {
      if (close (o->fd) != 0 && e == 0)
        e = errno;
      o->fd = -1;
      return e;
    }
  if (e == 0 && fsync (o->fd) != 0)
    e = errno;
  if (e == 0 && o->unnamed)
    e = link_beside (o);
  if (e == 0 && close (o->fd) != 0)
    e = errno;
  o->fd = -1;
  if (e == 0 && rename (o->tmp, o->target) != 0)
    e = errno;
  if (e == 0)
    o->tmp[0] = '\0';   /* it is the output now */
  pp_cli_output_discard (o);
  return e;
}

void
pp_cli_output_discard (PpCliOutput *o)
{
  if (o->fd >= 0)
    close (o->fd);
  o->fd = -1;
  if (!o->unnamed && !o->direct && o->tmp[0] != '\0')
    unlink (o->tmp);
  o->tmp[0] = '\0';
}
