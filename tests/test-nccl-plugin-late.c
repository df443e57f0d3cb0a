/* The NCCL plugin in a process that loads the probe library only after
 * NCCL created a communicator (a job under `profile` whose hook loads it
 * late): the communicator is taken at once (PIPESCOPE_LIB says a library
 * will come), its operations recorded from the first look after the
 * library came.  This program does not link the probe library: it opens
 * it as the Python hook does.  $PP_NCCL_PLUGIN, $PP_PROBE_LIB: meson. */
#include <glib.h>
#include <glib/gstdio.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "pp-event.h"
#include "pp-nccl-abi.h"
#include "pp-trace.h"

int
main (void)
{
  const char *plugin_path = g_getenv ("PP_NCCL_PLUGIN"), *lib_path = g_getenv ("PP_PROBE_LIB");
  char *dir = g_dir_make_tmp ("pp-nccl-late-XXXXXX", NULL);
  char *trace = g_build_filename (dir, "rank.pptrace", NULL), err[256];
  void *ctx = NULL;
  int mask = 0, recorded_handles = 0;

  g_assert_nonnull (plugin_path);
  g_assert_nonnull (lib_path);
  g_setenv ("XDG_RUNTIME_DIR", dir, TRUE);
  g_setenv ("PIPESCOPE_LIB", lib_path, TRUE);
  PpNcclProfilerV5 *v6 = dlsym (dlopen (plugin_path, RTLD_NOW | RTLD_LOCAL), "ncclProfiler_v6");
  g_assert_nonnull (v6);
  g_assert_null (dlopen (lib_path, RTLD_NOW | RTLD_NOLOAD));   /* not loaded yet */
  g_assert_cmpint (v6->init (&ctx, 99, &mask, "late", 1, 2, 0, NULL), ==, 0);
  g_assert_nonnull (ctx);
  g_assert_cmpint (mask & PP_NCCL_P2P, ==, PP_NCCL_P2P);

  PpNcclDescrV5 d = { .type = PP_NCCL_P2P };
  d.p2p.func = "Send";
  d.p2p.datatype = "ncclInt8";
  d.p2p.count = 10;
  d.p2p.peer = 1;
  void *h = (void *) 1;
  g_assert_cmpint (v6->startEvent (ctx, &h, &d), ==, 0);
  g_assert_null (h);   /* no library: nothing kept */

  /* the hook loads the library and opens the rank */
  void *lib = dlopen (lib_path, RTLD_NOW | RTLD_LOCAL);
  g_assert_nonnull (lib);
  void *(*rank_open) (const char *, int, int, const char *, const char *, const char *, char *, size_t);
  int (*rank_close) (void *, char *, size_t);
  *(void **) &rank_open = dlsym (lib, "pipescope_rank_open");
  *(void **) &rank_close = dlsym (lib, "pipescope_rank_close");
  void *rank = rank_open (NULL, 0, 1, "late", trace, NULL, err, sizeof err);
  g_assert_nonnull (rank);
  for (int k = 0; k < 128; k++)
    {
      void *op = NULL, *px = NULL;
      g_assert_cmpint (v6->startEvent (ctx, &op, &d), ==, 0);
      if (op == NULL)
        continue;
      recorded_handles++;
      v6->stopEvent (op);
      PpNcclDescrV5 p = { .type = PP_NCCL_PROXY_OP, .parentObj = op };
      p.proxyOp.pid = getpid ();
      p.proxyOp.peer = 1;
      p.proxyOp.isSend = 1;
      g_assert_cmpint (v6->startEvent (ctx, &px, &p), ==, 0);
      g_assert_nonnull (px);
      v6->stopEvent (px);
    }
  /* found within 64 operations, every one after kept */
  g_assert_cmpint (recorded_handles, >=, 128 - 64);
  g_assert_cmpint (v6->finalize (ctx), ==, 0);
  g_assert_cmpint (rank_close (rank, err, sizeof err), ==, 0);

  PpError e = { 0 };
  PpTraceItem it;
  GHashTable *names = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  int sends = 0;
  PpTraceReader *r = pp_trace_reader_new_path (trace, &e);
  g_assert_nonnull (r);
  while (pp_trace_reader_next (r, &it, &e) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_STRING)
      g_hash_table_insert (names, GUINT_TO_POINTER (it.string.id), g_strdup (it.string.name));
    else if (it.type == PP_TRACE_ITEM_SPAN && it.span.kind == PP_SPAN_KERNEL)
      sends += g_strcmp0 (g_hash_table_lookup (names, GUINT_TO_POINTER (it.span.name_id)), "nccl:Send") == 0;
  pp_trace_reader_free (r);
  g_assert_cmpint (sends, ==, recorded_handles);
  g_hash_table_unref (names);
  char *reg = g_build_filename (dir, "pipescope", NULL);   /* the job registry's folder */
  g_unlink (trace);
  g_rmdir (reg);
  g_rmdir (dir);
  g_free (reg);
  g_free (trace);
  g_free (dir);
  g_print ("ok: %d of 128 operations after the library came recorded\n", sends);
  return 0;
}
