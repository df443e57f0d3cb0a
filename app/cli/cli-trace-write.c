/* cli-trace-write.c — the text every export writes: a string as JSON
 * (valid UTF-8, whatever the trace holds), a time since the zero in µs
 * or in ns. */
#include "cli-trace-private.h"

#include <inttypes.h>
#include <stdio.h>

#include "pp-trace-text.h"

/* strings json_string wrote with a byte that is not UTF-8 replaced */
static size_t n_replaced;

size_t
json_strings_replaced (void)
{
  return n_replaced;
}

void
json_string (FILE *f, const char *s)
{
  bool replaced = false;
  fputc ('"', f);
  /* valid UTF-8 out, whatever the trace holds (JSON readers refuse
   * anything else): a byte that is not UTF-8 is U+FFFD (written as the
   * character, as one read back is written again), a control character
   * (C1 and DEL too) escaped */
  while (*s)
    {
      int32_t cp;
      int n = pp_trace_text_next (s, &cp);
      if (cp == '"' || cp == '\\')
        fprintf (f, "\\%c", cp);
      else if (cp < 0)
        {
          fputs ("\xef\xbf\xbd", f);
          replaced = true;
        }
      else if (pp_trace_text_is_control (cp))
        fprintf (f, "\\u%04x", (unsigned) cp);
      else
        fwrite (s, 1, (size_t) n, f);
      s += n;
    }
  fputc ('"', f);
  n_replaced += replaced;
}

/* t - base in µs, where t >= base (base is the smallest start): the
 * difference as unsigned is exact whatever the two. */
void
print_us_since (FILE *f, int64_t t, int64_t base)
{
  uint64_t ns = (uint64_t) t - (uint64_t) base;
  if (t < base)
    {
      fputc ('-', f);
      ns = (uint64_t) base - (uint64_t) t;
    }
  fprintf (f, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

/* t - base in nanoseconds, signed (the pipescope member's times) */
void
print_ns_since (FILE *f, int64_t t, int64_t base)
{
  if (t < base)
    fprintf (f, "-%" PRIu64, (uint64_t) base - (uint64_t) t);
  else
    fprintf (f, "%" PRIu64, (uint64_t) t - (uint64_t) base);
}
