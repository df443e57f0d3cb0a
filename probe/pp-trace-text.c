/* pp-trace-text.c — see pp-trace-text.h. */
#include "pp-trace-text.h"

#include <string.h>

int
pp_trace_text_next (const char *s, int32_t *cp)
{
  const unsigned char *u = (const unsigned char *) s;
  int n;
  int32_t c, min;
  if (u[0] < 0x80)
    {
      *cp = u[0];
      return 1;
    }
  if (u[0] >= 0xc2 && u[0] <= 0xdf)
    n = 2, c = u[0] & 0x1f, min = 0x80;
  else if (u[0] >= 0xe0 && u[0] <= 0xef)
    n = 3, c = u[0] & 0x0f, min = 0x800;
  else if (u[0] >= 0xf0 && u[0] <= 0xf4)
    n = 4, c = u[0] & 0x07, min = 0x10000;
  else
    {
      *cp = -1;
      return 1;
    }
  for (int i = 1; i < n; i++)
    {
      /* a NUL ends the string: a sequence cut by it is not one */
      if ((u[i] & 0xc0) != 0x80)
        {
          *cp = -1;
          return 1;
        }
      c = (c << 6) | (u[i] & 0x3f);
    }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    {
      *cp = -1;
      return 1;
    }
  *cp = c;
  return n;
}

bool
pp_trace_text_is_control (int32_t cp)
{
  return (cp >= 0 && cp < 0x20) || (cp >= 0x7f && cp < 0xa0);
}

void
pp_trace_text_printable (const char *s, char *buf, size_t size)
{
  static const char replacement[] = "\xef\xbf\xbd";   /* U+FFFD */
  size_t o = 0;
  while (*s)
    {
      int32_t cp;
      int n = pp_trace_text_next (s, &cp);
      const char *bytes = s;
      size_t len = (size_t) n;
      if (cp < 0 || pp_trace_text_is_control (cp))
        bytes = replacement, len = 3;
      if (o + len >= size)
        break;
      memcpy (buf + o, bytes, len);
      o += len;
      s += n;
    }
  buf[o] = '\0';
}
