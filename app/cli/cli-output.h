/* cli-output.h — an output file replaced whole or not at all.  What a
 * command writes goes to a file of no name in the output's folder (a
 * named temporary beside the output where the file system cannot make one
 * without a name), which takes the output's name only once everything was
 * written and is on the disk.  A full disk, an error or a killed command
 * leaves an existing output as it was and, but for a killed command on such
 * a file system, nothing beside it.  An output that is a link keeps its
 * link: the file it leads to is replaced.  An output that is no regular
 * file (a device, a FIFO, a terminal, /dev/stdout on a pipe) is written in
 * place, never replaced.  A trace a running job still writes (its lock,
 * pp_trace_file_in_use) is refused: EBUSY. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
  const char *path;            /* the output; the caller keeps it alive */
  char        target[PATH_MAX]; /* the file replaced: path, or where its link leads */
  char        tmp[PATH_MAX];   /* the content while written: /proc/self/fd/N, a name beside
                                  target, or path itself when direct */
  int         fd;
  bool        unnamed;         /* no name on the disk yet: nothing to remove */
  bool        direct;          /* no regular file: written in place */
  int         error;           /* errno of the first failed write; 0 */
} PpCliOutput;

/* Starts o for path with the given mode: 0, or an errno (nothing made;
 * pp_cli_output_strerror says it). */
int pp_cli_output_open (PpCliOutput *o, const char *path, int mode);

/* An errno of pp_cli_output_open or _commit in words, EBUSY as the trace
 * of a running job. */
const char *pp_cli_output_strerror (int e);

/* A PpTraceWriteFunc (pp_trace_writer_new_callback, user = o): writes all
 * of data; 0, or -1 with o->error set (and every later call fails). */
int pp_cli_output_write (void *o, const void *data, size_t size);

/* Puts o's content on the disk (fsync) and renames it over o->path: 0, or
 * an errno (o->error first), o->path then untouched.  Closes o either way. */
int pp_cli_output_commit (PpCliOutput *o);

/* Closes o and removes its temporary; o->path untouched.  Safe twice. */
void pp_cli_output_discard (PpCliOutput *o);

/* e says the disk (or the file-size limit) had no room: ENOSPC, EDQUOT, EFBIG. */
bool pp_cli_no_room (int e);
