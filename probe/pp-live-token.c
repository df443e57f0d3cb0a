/* pp-live-token.c — the TCP endpoint's tokens (pp-live.h): a random one
 * made for a server, a line compared with it in constant time, and one
 * kept out of command lines in a file only its owner can read.
 */
#include "pp-live-private.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

PpStatus
pp_live_token_make (char *out, PpError *err)
{
  uint8_t b[TOKEN_HEX / 2];
  int fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "live: cannot open /dev/urandom for a token: %s",
                         strerror (errno));
  size_t got = 0;
  while (got < sizeof b)
    {
      ssize_t n = read (fd, b + got, sizeof b - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          close (fd);
          return pp_error_set (err, PP_EIO, "live: cannot read /dev/urandom for a token");
        }
      got += (size_t) n;
    }
  close (fd);
  for (size_t i = 0; i < sizeof b; i++)
    snprintf (out + 2 * i, 3, "%02x", b[i]);
  return PP_OK;
}

/* Whether line is want, in constant time in want's length. */
int
pp_live_token_equal (const char *want, size_t want_len, const char *line, size_t len)
{
  unsigned diff = len != want_len;
  for (size_t i = 0; i < want_len; i++)
    diff |= (unsigned) (uint8_t) want[i] ^ (unsigned) (uint8_t) (i < len ? line[i] : 0);
  return diff == 0;
}

/* ---- tokens kept out of command lines ---- */

PpStatus
pp_live_token_check (const char *token, PpError *err)
{
  size_t n = token ? strlen (token) : 0;
  if (n == 0 || n > TOKEN_HEX)
    return pp_error_set (err, PP_EINVAL, "the token must be 1 to %d characters", TOKEN_HEX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char) token[i] <= ' ' || token[i] == 0x7f)
      return pp_error_set (err, PP_EINVAL, "the token must be 1 to %d characters without spaces",
                           TOKEN_HEX);
  return PP_OK;
}

PpStatus
pp_live_token_from_file (const char *path, char *buf, size_t size, PpError *err)
{
  if (path == NULL || buf == NULL || size < TOKEN_HEX + 1)
    return pp_error_set (err, PP_EINVAL, "token file: no path or buffer");
  buf[0] = '\0';
  /* O_NONBLOCK: a FIFO put there opens at once and is refused below */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return pp_error_set (err, PP_EIO, "cannot open token file %s: %s", path, strerror (errno));
  struct stat st;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s is not a regular file", path);
    }
  if (st.st_uid != geteuid ())
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s belongs to uid %u, not to you (uid %u); "
                           "refusing it", path, (unsigned) st.st_uid, (unsigned) geteuid ());
    }
  if ((st.st_mode & 077) != 0)
    {
      close (fd);
      return pp_error_set (err, PP_EINVAL, "token file %s is open to other users (mode %03o); "
                           "chmod 600 it", path, (unsigned) (st.st_mode & 0777));
    }
  char text[256];
  size_t len = 0;
  while (len < sizeof text - 1)
    {
      ssize_t n = read (fd, text + len, sizeof text - 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t) n;
    }
  close (fd);
  text[len] = '\0';
  /* the first line, without its line ending or trailing blanks */
  len = strcspn (text, "\r\n");
  while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
    len--;
  text[len] = '\0';
  PpError why = { 0 };
  if (pp_live_token_check (text, &why) != PP_OK)
    return pp_error_set (err, PP_EINVAL, "token file %s: %s", path, why.msg);
  memcpy (buf, text, len + 1);
  return PP_OK;
}
