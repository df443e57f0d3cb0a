/* pp-import-hash.h — the hash of names read from files, for the import's
 * name tables (pp-import-kineto.c, pp-import-chrome.c).
 *
 * A file chooses its names: with a fixed hash (FNV-1a, as before issue
 * 40) 200,000 names made to share the bits a table indexes by cost a
 * minute of probing in 1.8 MB.  So the hash is keyed (SipHash-1-3) with a
 * key drawn once per process (getrandom): a file cannot know which names
 * collide.  No GLib. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* s's hash under this process's key. */
uint64_t pp_import_hash (const char *s);

/* The slots the name tables' lookups visited: each lookup adds its count
 * (pp_import_hash_probed), and tests read the total in this process
 * (pp_import_hash_probes): an import's work on names bounded by a count,
 * not a time. */
void     pp_import_hash_probed (size_t n);
size_t   pp_import_hash_probes (void);
