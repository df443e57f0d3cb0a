/* cli-common.c — what every subcommand uses (cli-common.h). */
#include "cli-common.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pp-schedule.h"
#include "pp-trace-text.h"

int
pp_cli_usage_error (const char *fmt, ...)
{
  va_list ap;
  fputs ("pipescope-cli: error: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  return 2;
}

int
pp_cli_one_trace_file (int argc, char **argv, const char *command, const char **path)
{
  if (optind >= argc)
    return pp_cli_usage_error ("%s needs a trace FILE; see 'pipescope-cli %s --help'", command,
                               command);
  if (optind + 1 < argc)
    return pp_cli_usage_error ("unexpected argument '%s'", argv[optind + 1]);
  /* an empty file is no trace (not even its header): refused as the app
   * refuses it, rather than read as a run of no ranks */
  struct stat sb;
  if (stat (argv[optind], &sb) == 0 && S_ISREG (sb.st_mode) && sb.st_size == 0)
    return pp_cli_usage_error ("%s is empty (0 bytes): not a pipescope trace", argv[optind]);
  *path = argv[optind];
  return 0;
}

int
pp_cli_find_same_file (const char *path, const char *const *paths, size_t n)
{
  struct stat so, si;
  if (stat (path, &so) != 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (stat (paths[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
      return (int) i;
  return -1;
}

bool
pp_cli_parse_int (const char *text, int lo, int hi, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    return false;
  *out = (int) v;
  return true;
}

void
pp_cli_print_schedules (FILE *out)
{
  for (const PpScheduleInfo *i = pp_schedule_list (); i->name; i++)
    fprintf (out, "  %-22s %s%s%s\n", i->name, i->summary, i->takes_v ? " [V]" : "",
             i->takes_group ? " [group]" : "");
}

bool
pp_cli_shape_option (int opt, const char *arg, int *ranks, int *microbatches,
                     int *stages_per_rank)
{
  switch (opt)
    {
    case 'p':
      /* 1 parses: the schedule then says why it needs at least 2 */
      if (pp_cli_parse_int (arg, 1, 4096, ranks))
        return true;
      pp_cli_usage_error ("--ranks takes a whole number up to 4096 (got '%s')", arg);
      return false;
    case 'm':
      if (pp_cli_parse_int (arg, 1, 1 << 20, microbatches))
        return true;
      pp_cli_usage_error ("--microbatches takes a whole number from 1 to %d (got '%s')", 1 << 20, arg);
      return false;
    case 'v':
      if (pp_cli_parse_int (arg, 1, 64, stages_per_rank))
        return true;
      pp_cli_usage_error ("--stages-per-rank takes a whole number from 1 to 64 (got '%s')", arg);
      return false;
    default:
      return false;
    }
}

const char *
pp_cli_text (const char *s, char *buf, size_t size)
{
  size_t o = 0;
  if (size == 0)
    return buf;
  while (*s)
    {
      char esc[12];
      int32_t cp;
      int n = pp_trace_text_next (s, &cp);
      const char *out = s;
      size_t len = (size_t) n;
      if (cp == '\n' || cp == '\t' || cp == '\r')
        snprintf (esc, sizeof esc, "\\%c", cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r');
      else if (cp < 0 || (cp < 0x80 && pp_trace_text_is_control (cp)))
        snprintf (esc, sizeof esc, "\\x%02x", (unsigned char) *s);
      else if (pp_trace_text_is_control (cp))
        snprintf (esc, sizeof esc, "\\u%04x", (unsigned) cp);
      else
        esc[0] = '\0';
      if (esc[0] != '\0')
        out = esc, len = strlen (esc);
      if (o + len >= size)
        break;
      memcpy (buf + o, out, len);
      o += len;
      s += n;
    }
  buf[o] = '\0';
  return buf;
}
