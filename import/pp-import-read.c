/* pp-import-read.c — an input's bytes as JSON text: a file read whole,
 * gunzipped when it starts with the gzip magic, within the bounds of
 * pp-import.h (a gzip bomb stops at its budget, not at the disk's end, and
 * at the memory the import has left). */
#include "pp-import.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int
is_gzip (const void *in, size_t n)
{
  const unsigned char *p = in;
  return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

size_t
pp_import_cost (const void *head, size_t head_len, size_t n)
{
  if (!is_gzip (head, head_len))
    return n;
  return n > PP_IMPORT_MAX_BYTES / PP_IMPORT_MAX_RATIO ? PP_IMPORT_MAX_BYTES : n * PP_IMPORT_MAX_RATIO;
}

size_t
pp_import_budget (size_t costs)
{
  return costs < PP_IMPORT_MIN_BUDGET ? PP_IMPORT_MIN_BUDGET : costs;
}

/* The one line of an input over what is left of the budget. */
static PpStatus
over_budget (PpError *err, const char *name, size_t limit, bool gz)
{
  if (limit >= PP_IMPORT_MAX_BYTES)
    return pp_error_set (err, PP_EFORMAT, "%s: more than %zu MiB of JSON: refused", name,
                         PP_IMPORT_MAX_BYTES >> 20);
  return pp_error_set (err, PP_EFORMAT,
                       "%s: %s more than the %zu MiB left of the import's budget (JSON of "
                       "%d times the inputs' gzip'd size, at least %zu MiB in all): refused",
                       name, gz ? "gunzips to" : "holds", limit >> 20, PP_IMPORT_MAX_RATIO,
                       PP_IMPORT_MIN_BUDGET >> 20);
}

/* The one line of an input over the memory the import has left (mem
 * bytes: the text, and a file's bytes while they are gunzipped). */
static PpStatus
over_memory (PpError *err, const char *name, size_t mem, const char *what)
{
  return pp_error_set (err, PP_EFORMAT,
                       "%s: %s more than the %zu MiB of memory the import has left for it (an import "
                       "holds at most %zu MiB at once: a file, its JSON and the events kept): refused",
                       name, what, mem >> 20, PP_IMPORT_MAX_MEMORY >> 20);
}

PpStatus
pp_import_decode (const char *name, const void *in, size_t n, size_t limit, size_t mem, char **data,
                  size_t *size, PpError *err)
{
  *data = NULL;
  *size = 0;
  if (limit > PP_IMPORT_MAX_BYTES)
    limit = PP_IMPORT_MAX_BYTES;
  /* the tighter bound names itself */
  bool by_memory = mem < limit;
  if (by_memory)
    limit = mem;
  if (!is_gzip (in, n))
    {
      if (n > limit)
        return by_memory ? over_memory (err, name, mem, "holds") : over_budget (err, name, limit, false);
      char *t = malloc (n + 1);
      if (t == NULL)
        return pp_error_set (err, PP_ENOMEM, "%s: out of memory", name);
      memcpy (t, in, n);
      t[n] = '\0';
      *data = t;
      *size = n;
      return PP_OK;
    }

  size_t cap = n < limit / 4 ? n * 4 + 4096 : limit, len = 0;
  if (cap > limit)
    cap = limit;
  char *out = malloc (cap + 1);
  z_stream z;
  PpStatus st = PP_OK;

  if (out == NULL)
    return pp_error_set (err, PP_ENOMEM, "%s: out of memory", name);
  memset (&z, 0, sizeof z);
  if (inflateInit2 (&z, 16 + MAX_WBITS) != Z_OK)
    {
      free (out);
      return pp_error_set (err, PP_ENOMEM, "%s: cannot start gunzip", name);
    }
  const unsigned char *src = in;
  size_t left = n;
  for (;;)
    {
      if (len == cap)
        {
          if (cap >= limit)
            {
              st = by_memory ? over_memory (err, name, mem, "gunzips to") : over_budget (err, name, limit, true);
              break;
            }
          size_t nc = cap * 2 > limit ? limit : cap * 2;
          char *g = realloc (out, nc + 1);
          if (g == NULL)
            {
              st = pp_error_set (err, PP_ENOMEM, "%s: out of memory", name);
              break;
            }
          out = g;
          cap = nc;
        }
      if (z.avail_in == 0 && left > 0)
        {
          uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt) left;
          z.next_in = (Bytef *) src;
          z.avail_in = chunk;
          src += chunk;
          left -= chunk;
        }
      size_t room = cap - len;
      z.next_out = (Bytef *) out + len;
      z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt) room;
      uInt before = z.avail_out;
      int rc = inflate (&z, Z_NO_FLUSH);
      len += before - z.avail_out;
      if (rc == Z_STREAM_END)
        {
          /* another gzip member may follow (concatenated files) */
          if (z.avail_in == 0 && left == 0)
            break;
          if (!is_gzip (z.next_in, z.avail_in))
            break;   /* trailing garbage after a whole member: what gzip -d ignores too */
          if (inflateReset (&z) != Z_OK)
            {
              st = pp_error_set (err, PP_EFORMAT, "%s: bad gzip data", name);
              break;
            }
          continue;
        }
      if (rc == Z_BUF_ERROR && z.avail_in == 0 && left == 0)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: the gzip data ends early (cut short?)", name);
          break;
        }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        {
          st = pp_error_set (err, PP_EFORMAT, "%s: bad gzip data (%s)", name,
                             z.msg ? z.msg : "corrupt");
          break;
        }
    }
  inflateEnd (&z);
  if (st != PP_OK)
    {
      free (out);
      return st;
    }
  out[len] = '\0';
  *data = out;
  *size = len;
  return PP_OK;
}

/* Opens path, a regular file, for reading into *fd; one line when it is not. */
static PpStatus
open_regular (const char *path, int *fd, struct stat *sb, PpError *err)
{
  *fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd < 0)
    return pp_error_set (err, PP_EIO, "%s: %s", path, strerror (errno));
  if (fstat (*fd, sb) != 0 || !S_ISREG (sb->st_mode))
    {
      close (*fd);
      *fd = -1;
      return pp_error_set (err, PP_EINVAL, "%s: not a regular file", path);
    }
  return PP_OK;
}

PpStatus
pp_import_file_cost (const char *path, size_t *cost, PpError *err)
{
  struct stat sb;
  unsigned char head[2];
  int fd;
  PpStatus st = open_regular (path, &fd, &sb, err);
  *cost = 0;
  if (st != PP_OK)
    return st;
  ssize_t r;
  do
    r = read (fd, head, sizeof head);
  while (r < 0 && errno == EINTR);
  int e = errno;
  close (fd);
  if (r < 0)
    return pp_error_set (err, PP_EIO, "%s: %s", path, strerror (e));
  *cost = pp_import_cost (head, (size_t) r, (uint64_t) sb.st_size > SIZE_MAX / 2 ? SIZE_MAX / 2
                                                                                 : (size_t) sb.st_size);
  return PP_OK;
}

PpStatus
pp_import_read_file (const char *path, size_t limit, size_t mem, char **data, size_t *size, PpError *err)
{
  struct stat sb;
  int fd;
  char *raw = NULL;
  size_t n = 0;
  PpStatus st;

  *data = NULL;
  *size = 0;
  if ((st = open_regular (path, &fd, &sb, err)) != PP_OK)
    return st;
  /* a gzip'd file is at most the JSON budget over the least ratio we take */
  if ((uint64_t) sb.st_size > PP_IMPORT_MAX_BYTES)
    {
      close (fd);
      return pp_error_set (err, PP_EFORMAT, "%s: larger than %zu MiB: refused", path,
                           PP_IMPORT_MAX_BYTES >> 20);
    }
  /* its bytes are held while they are gunzipped: said before they are read */
  if ((uint64_t) sb.st_size > mem)
    {
      close (fd);
      return over_memory (err, path, mem, "is");
    }
  raw = malloc ((size_t) sb.st_size + 1);
  if (raw == NULL)
    {
      close (fd);
      return pp_error_set (err, PP_ENOMEM, "%s: out of memory", path);
    }
  while (n < (size_t) sb.st_size)
    {
      ssize_t r = read (fd, raw + n, (size_t) sb.st_size - n);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        {
          int e = errno;
          free (raw);
          close (fd);
          return pp_error_set (err, PP_EIO, "%s: %s", path, strerror (e));
        }
      if (r == 0)
        break;   /* it shrank while we read: take what is there */
      n += (size_t) r;
    }
  close (fd);
  if (is_gzip (raw, n))
    {
      st = pp_import_decode (path, raw, n, limit, mem - n, data, size, err);
      free (raw);
      return st;
    }
  if (n > limit)
    {
      free (raw);
      return over_budget (err, path, limit, false);
    }
  raw[n] = '\0';
  *data = raw;
  *size = n;
  return PP_OK;
}

int
pp_import_is_json_file (const char *path)
{
  unsigned char buf[64];
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return 0;
  ssize_t r = read (fd, buf, sizeof buf);
  close (fd);
  if (r < 2)
    return 0;
  if (is_gzip (buf, (size_t) r))
    return 1;
  for (ssize_t i = r >= 3 && memcmp (buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0; i < r; i++)
    {
      if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')
        continue;
      return buf[i] == '{' || buf[i] == '[';
    }
  return 0;
}
