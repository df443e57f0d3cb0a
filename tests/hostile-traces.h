/* hostile-traces.h — the crafted traces of issue 18, written with the
 * trace writer: each is a valid small trace with one field set to what a
 * hostile file may hold.  Shared by test-hostile (the regression tests), the
 * fuzz targets' corpus and `test-hostile --write DIR` (`--write-corpus
 * DIR`), which writes the small ones to tests/data/hostile/ (the fuzz
 * seeds to tests/fuzz/corpus/).  No GLib: the fuzz targets use it too. */
#pragma once

#include <stddef.h>

typedef struct {
  const char *name;      /* file name without .pptrace */
  int         small;     /* committed under tests/data/hostile/ */
  int         corpus;    /* committed under tests/fuzz/corpus/ (a seed too large for data/hostile) */
} PpHostileTrace;

/* The traces, ending with { NULL, 0, 0 }. */
extern const PpHostileTrace pp_hostile_traces[];

/* Writes trace name to path; 0, or -1 with a message on stderr. */
int pp_hostile_write (const char *name, const char *path);
