/* test-import-names.c — the import's name table against names a file
 * chose to collide (issue 40, finding 3).
 *
 * A torch.profiler trace of one rank (GPipe labels, so that it imports)
 * holds 2^15 kernels, each its own name, built so that all of them share
 * the low 22 bits of their 64-bit FNV-1a hash (the unkeyed hash the table
 * used: a minute of probing for 200,000 such names in 1.8 MB).  The names
 * are made by construction, not searched: FNV-1a's low k bits depend only
 * on the low k bits of its state, so two 4-character blocks that leave the
 * state's low 22 bits equal (colliding_pair: a birthday search over 15 of
 * them, the last character evening the low 7) can be swapped for each
 * other; 15 such blocks in a row give 2^15 names.
 *
 * Asserted: the names do collide under FNV-1a (the input is what it says);
 * the import takes every kernel (device spans counted); and the probes its
 * name tables made (pp_import_hash_probes) stay within 8 a name looked
 * up, a count, not a time (unkeyed, they were about n^2 / 2: 5 x 10^8). */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-import.h"
#include "pp-import-hash.h"

#define BLOCKS 15
#define N_NAMES (1 << BLOCKS)
#define LOW_BITS 22
#define LOW_MASK ((1u << LOW_BITS) - 1)

static uint64_t
fnv1a (uint64_t h, const char *s)
{
  for (; *s; s++)
    h = (h ^ (unsigned char) *s) * 1099511628211ull;
  return h;
}

/* Whether c may stand in a name written into the JSON as it is. */
static int
plain (int c)
{
  return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != ',';
}

static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* Two different 4-character blocks a[5], b[5] after which state h has the
 * same low LOW_BITS bits; returns the state after a.  The last character
 * is XORed into the state's low 7 bits before the (invertible) multiply:
 * two 3-character prefixes whose states agree in bits 7 .. LOW_BITS - 1
 * (a birthday search over 15 bits: some 200 tries) are made equal in the
 * low 7 by last characters whose XOR is the difference there. */
static uint64_t
colliding_pair (uint64_t h, char a[5], char b[5])
{
  enum { SLOTS = 1 << 16 };
  static uint32_t key[SLOTS], cand[SLOTS];   /* cand: index + 1 of the prefix, 0 empty */
  memset (cand, 0, sizeof cand);
  int n = (int) strlen (alnum);
  for (uint32_t i = 0; i < 40000; i++)
    {
      char s[4] = { alnum[i % n], alnum[i / n % n], alnum[i / n / n], 0 };
      uint64_t sx = fnv1a (h, s);
      uint32_t kx = (uint32_t) (sx >> 7) & (LOW_MASK >> 7);
      uint32_t k = kx & (SLOTS - 1);
      for (; cand[k] != 0; k = (k + 1) & (SLOTS - 1))
        {
          if (key[k] != kx)
            continue;
          uint32_t j = cand[k] - 1;
          char t[4] = { alnum[j % n], alnum[j / n % n], alnum[j / n / n], 0 };
          int d = (int) ((fnv1a (h, t) ^ sx) & 0x7f);
          for (int c = 0x21; c < 0x7f; c++)
            if (plain (c) && plain (c ^ d))
              {
                snprintf (a, 5, "%s%c", t, c);
                snprintf (b, 5, "%s%c", s, c ^ d);
                g_assert_cmpuint (fnv1a (h, a) & LOW_MASK, ==, fnv1a (h, b) & LOW_MASK);
                return fnv1a (h, a);
              }
        }
      key[k] = kx;
      cand[k] = i + 1;
    }
  g_assert_not_reached ();
}

/* A one-rank torch.profiler trace of 2^blocks kernels whose names all
 * share the low LOW_BITS bits of their FNV-1a hash (and 2 labels). */
static char *
colliding_trace (int blocks)
{
  /* each name starts "k_" (the kernels' names) */
  uint64_t h = fnv1a (1469598103934665603ull, "k_");
  char pair[BLOCKS][2][5];
  for (int b = 0; b < blocks; b++)
    h = colliding_pair (h, pair[b][0], pair[b][1]);

  GString *ev = g_string_new (NULL);
  /* the labels that make it a pipeline rank's trace: stage 0's F and B */
  for (int m = 0; m < 2; m++)
    g_string_append_printf (ev, "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"PP:0%c0\", "
                            "\"pid\": 1, \"tid\": 1, \"ts\": %d.0, \"dur\": 10.0, \"args\": {}},\n",
                            m ? 'B' : 'F', 100 + 20 * m);
  uint32_t low = 0;
  int n = 1 << blocks;
  for (int i = 0; i < n; i++)
    {
      char name[3 + 4 * BLOCKS] = "k_";
      for (int b = 0; b < blocks; b++)
        strcat (name, pair[b][(i >> b) & 1]);
      uint32_t l = (uint32_t) fnv1a (1469598103934665603ull, name) & LOW_MASK;
      if (i == 0)
        low = l;
      g_assert_cmpuint (l, ==, low);   /* they collide under the old hash */
      g_string_append_printf (ev, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, "
                              "\"tid\": 7, \"ts\": %d.0, \"dur\": 0.5, \"args\": {\"device\": 0, "
                              "\"stream\": 7}}%s\n", name, 200 + i, i + 1 < n ? "," : "");
    }
  char *text = g_strdup_printf ("{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", "
                                "\"rank\": 0, \"world_size\": 1}, \"host_name\": \"node0\", "
                                "\"baseTimeNanoseconds\": 1700000000000000000, \"traceEvents\": [%s], "
                                "\"traceName\": \"x\"}", ev->str);
  g_string_free (ev, TRUE);
  return text;
}

static void
test_colliding_names (void)
{
  char *text = colliding_trace (BLOCKS);
  char *dir = g_dir_make_tmp ("pp-import-names-XXXXXX", NULL);
  char *out = g_build_filename (dir, "names.pptrace", NULL);
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (out, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpImportInput in = { "colliding-names.json", text, strlen (text) };
  PpImportSummary sum;
  size_t before = pp_import_hash_probes ();
  PpStatus st = pp_import_kineto (&in, 1, w, &sum, &err);
  size_t probes = pp_import_hash_probes () - before;
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  if (st != PP_OK)
    g_error ("import: %s", err.msg);
  g_assert_cmpuint (sum.device_spans, ==, N_NAMES);
  g_assert_cmpuint (sum.blocks, ==, 2);
  /* each kernel's name interned once (and the labels'); a keyed hash at
   * a table at most half full: about 1.5 probes a lookup, each insert
   * into a grown table 1 to 2 more */
  g_test_message ("%zu probes for %d names", probes, N_NAMES + 2);
  g_assert_cmpuint (probes, >=, (size_t) N_NAMES);
  g_assert_cmpuint (probes, <=, (size_t) 8 * (N_NAMES + 2));

  g_unlink (out);
  g_rmdir (dir);
  g_free (out);
  g_free (dir);
  g_free (text);
}

int
main (int argc, char **argv)
{
  /* --write FILE [BLOCKS]: the fuzz seed (tests/fuzz/corpus-json/), 2^10
   * names; or 2^BLOCKS (at most 2^15), for measuring */
  if ((argc == 3 || argc == 4) && strcmp (argv[1], "--write") == 0)
    {
      int blocks = argc == 4 ? atoi (argv[3]) : 10;
      char *text = colliding_trace (blocks >= 1 && blocks <= BLOCKS ? blocks : 10);
      gboolean ok = g_file_set_contents (argv[2], text, -1, NULL);
      g_free (text);
      return ok ? 0 : 1;
    }
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/import/names/colliding", test_colliding_names);
  return g_test_run ();
}
