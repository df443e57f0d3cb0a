/* libpipescope-probe.so's device calls (pipescope.h: pipescope_device_*) on a
 * machine without a GPU: the library opens the CUPTI collector as a module,
 * here libpipescope-cupti-fake.so (pp-cupti.c over fake-cupti.c, named by
 * PIPESCOPE_CUPTI_LIB), and this program plays CUDA through the same
 * module's fake_cupti_* calls.  What a PyTorch job's hook does: push a
 * block's id, launch, pop; give the block once its work has passed; the
 * trace then holds the block timed by its device records, and the kernels
 * and copies as its children (its rank, stage, micro-batch and step, inside
 * its span), their names before them.
 *
 *   test-foreign-cupti           with the fake module (PP_CUPTI_FAKE)
 *   test-foreign-cupti --absent  with none (PIPESCOPE_CUPTI_LIB names no
 *                                file): every device call a harmless no-op
 */
#include <dlfcn.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-cupti.h"
#include "pipescope.h"
#include "pp-event.h"
#include "pp-trace.h"

#define LAUNCH_RT CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
#define COPY_DRV  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2

/* the fake's calls, from the module the library opens */
static __typeof__ (fake_cupti_reset)        *fk_reset;
static __typeof__ (fake_cupti_fail)         *fk_fail;
static __typeof__ (fake_cupti_api_call)     *fk_api_call;
static __typeof__ (fake_cupti_kernel)       *fk_kernel;
static __typeof__ (fake_cupti_memcpy)       *fk_memcpy;
static __typeof__ (fake_cupti_kind_enabled) *fk_kind_enabled;

static char *tmp_dir;

/* ---- the trace a rank wrote ---- */

typedef struct {
  GArray     *spans;    /* PpSpan */
  GArray     *offsets;  /* guint64: each span's frame offset */
  GHashTable *names;    /* id -> name */
  GHashTable *name_at;  /* id -> offset of its STRING frame */
} Trace;

static Trace *
trace_read (const char *path)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  Trace *t = g_new0 (Trace, 1);
  PpTraceItem it;

  if (r == NULL)
    g_error ("%s: %s", path, err.msg);
  t->spans = g_array_new (FALSE, FALSE, sizeof (PpSpan));
  t->offsets = g_array_new (FALSE, FALSE, sizeof (guint64));
  t->names = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  t->name_at = g_hash_table_new (NULL, NULL);
  for (;;)
    {
      if (pp_trace_reader_next (r, &it, &err) != PP_OK)
        g_error ("%s: %s", path, err.msg);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (it.type == PP_TRACE_ITEM_SPAN)
        {
          g_array_append_val (t->spans, it.span);
          g_array_append_val (t->offsets, it.offset);
        }
      else if (it.type == PP_TRACE_ITEM_STRING)
        {
          g_hash_table_insert (t->names, GUINT_TO_POINTER (it.string.id), g_strdup (it.string.name));
          g_hash_table_insert (t->name_at, GUINT_TO_POINTER (it.string.id),
                               GSIZE_TO_POINTER ((gsize) it.offset));
        }
    }
  g_assert_false (it.truncated);
  pp_trace_reader_free (r);
  return t;
}

static void
trace_free (Trace *t)
{
  g_array_free (t->spans, TRUE);
  g_array_free (t->offsets, TRUE);
  g_hash_table_destroy (t->names);
  g_hash_table_destroy (t->name_at);
  g_free (t);
}

static const PpSpan *
span_at (Trace *t, guint i)
{
  return &g_array_index (t->spans, PpSpan, i);
}

static gboolean
is_device (const PpSpan *s)
{
  return s->kind == PP_SPAN_KERNEL || s->kind == PP_SPAN_MEMCPY || s->kind == PP_SPAN_MEMSET;
}

/* The one span of kind with that stage and micro-batch (fails otherwise). */
static const PpSpan *
the_block (Trace *t, int kind, int stage, int mb)
{
  const PpSpan *found = NULL;
  for (guint i = 0; i < t->spans->len; i++)
    {
      const PpSpan *s = span_at (t, i);
      if (s->kind == kind && s->stage == stage && s->microbatch == mb)
        {
          g_assert_null (found);
          found = s;
        }
    }
  g_assert_nonnull (found);
  return found;
}

/* Device spans that are b's children: its rank, stage, micro-batch and
 * step, inside its span. */
static int
children (Trace *t, const PpSpan *b)
{
  int n = 0;
  for (guint i = 0; i < t->spans->len; i++)
    {
      const PpSpan *d = span_at (t, i);
      n += is_device (d) && d->rank == b->rank && d->stage == b->stage
           && d->microbatch == b->microbatch && d->step == b->step && d->start_ns >= b->start_ns
           && d->end_ns <= b->end_ns;
    }
  return n;
}

/* The device span named name, its name written before it. */
static const PpSpan *
named (Trace *t, const char *name)
{
  const PpSpan *found = NULL;
  for (guint i = 0; i < t->spans->len; i++)
    {
      const PpSpan *s = span_at (t, i);
      const char *n = g_hash_table_lookup (t->names, GUINT_TO_POINTER (s->name_id));
      if (!is_device (s) || g_strcmp0 (n, name) != 0)
        continue;
      g_assert_null (found);
      found = s;
      g_assert_cmpuint (GPOINTER_TO_SIZE (g_hash_table_lookup (t->name_at, GUINT_TO_POINTER (s->name_id))),
                        <, g_array_index (t->offsets, guint64, i));
    }
  g_assert_nonnull (found);
  return found;
}

static pipescope_rank *
open_rank (const char *trace)
{
  char err[256];
  pipescope_rank *r = pipescope_rank_open ("fake-gpu", 0, 1, "test", trace, NULL, err, sizeof err);
  if (r == NULL)
    g_error ("pipescope_rank_open: %s", err);
  return r;
}

static void
close_rank (pipescope_rank *r)
{
  char err[256];
  if (pipescope_rank_close (r, err, sizeof err) != 0)
    g_error ("pipescope_rank_close: %s", err);
}

/* ---- tests ---- */

/* Kernels and a copy launched inside a pushed block come out as that
 * block's children, the block timed by them; a block that launched nothing
 * has no children and its caller's times; work outside any block stays
 * untagged. */
static void
test_children (void)
{
  char err[256] = "x";
  char *path = g_build_filename (tmp_dir, "children.pptrace", NULL);
  fk_reset ();
  pipescope_rank *r = open_rank (path);

  g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_true (fk_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  pipescope_step (r, 0, 0, pipescope_now_ns ());
  int64_t T = pipescope_now_ns ();

  uint64_t f = pipescope_device_push (r, PIPESCOPE_F, 1, 2, 0);
  g_assert_cmpuint (f, >, 0);
  uint32_t launch = fk_api_call (false, LAUNCH_RT);
  uint32_t copy = fk_api_call (true, COPY_DRV);
  g_assert_cmpint (pipescope_device_pop (r), ==, 0);
  uint64_t b = pipescope_device_push (r, PIPESCOPE_B, 1, 2, 0);
  g_assert_cmpuint (b, >, f);
  g_assert_cmpint (pipescope_device_pop (r), ==, 0);
  g_assert_cmpint (pipescope_device_pop (r), ==, -1);   /* nothing pushed */
  uint32_t stray = fk_api_call (false, LAUNCH_RT);

  fk_kernel (launch, "gemm_forward", (uint64_t) T + 1000, (uint64_t) T + 5000);
  fk_memcpy (copy, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 4096, (uint64_t) T + 6000, (uint64_t) T + 7000);
  fk_kernel (stray, "stray", (uint64_t) T + 40000, (uint64_t) T + 41000);

  /* the caller's own times (CUDA events) span more than the device work */
  g_assert_cmpint (pipescope_device_block (r, f, PIPESCOPE_F, 1, 2, 0, T, T + 10000), ==, 0);
  g_assert_cmpint (pipescope_device_block (r, b, PIPESCOPE_B, 1, 2, 0, T + 20000, T + 30000), ==, 0);
  g_assert_cmpint (pipescope_device_block (r, f, 99, 1, 2, 0, T, T + 1), ==, -1);   /* no such kind */
  pipescope_step (r, 0, 1, pipescope_now_ns ());
  close_rank (r);

  Trace *t = trace_read (path);
  const PpSpan *fs = the_block (t, PP_SPAN_F, 1, 2);
  g_assert_cmpint (fs->start_ns, ==, T + 1000);   /* its first device record's start */
  g_assert_cmpint (fs->end_ns, ==, T + 7000);     /* its last one's end */
  g_assert_cmpint (fs->step, ==, 0);
  g_assert_cmpint (children (t, fs), ==, 2);
  const PpSpan *bs = the_block (t, PP_SPAN_B, 1, 2);
  g_assert_cmpint (bs->start_ns, ==, T + 20000);
  g_assert_cmpint (bs->end_ns, ==, T + 30000);
  g_assert_cmpint (children (t, bs), ==, 0);

  const PpSpan *k = named (t, "gemm_forward");
  g_assert_cmpint (k->kind, ==, PP_SPAN_KERNEL);
  g_assert_cmpint (k->rank, ==, 0);
  g_assert_cmpint (k->stage, ==, 1);
  g_assert_cmpint (k->microbatch, ==, 2);
  g_assert_cmpint (k->start_ns, ==, T + 1000);
  g_assert_cmpint (k->end_ns, ==, T + 5000);
  const PpSpan *m = named (t, "memcpy DtoD");
  g_assert_cmpint (m->kind, ==, PP_SPAN_MEMCPY);
  g_assert_cmpuint (m->bytes, ==, 4096);
  g_assert_cmpint (m->stage, ==, 1);
  const PpSpan *s = named (t, "stray");
  g_assert_cmpint (s->stage, ==, -1);
  g_assert_cmpint (s->microbatch, ==, -1);
  trace_free (t);
  g_free (path);
}

/* An overlapped F+B of two pushed blocks spans both halves' device work. */
static void
test_overlap (void)
{
  char err[256];
  char *path = g_build_filename (tmp_dir, "overlap.pptrace", NULL);
  fk_reset ();
  pipescope_rank *r = open_rank (path);

  g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 0);
  int64_t T = pipescope_now_ns ();
  uint64_t f = pipescope_device_push (r, PIPESCOPE_F, 2, 3, 4);
  uint32_t kf = fk_api_call (false, LAUNCH_RT);
  pipescope_device_pop (r);
  uint64_t b = pipescope_device_push (r, PIPESCOPE_B, 1, 0, 4);
  uint32_t kb = fk_api_call (false, LAUNCH_RT);
  pipescope_device_pop (r);
  fk_kernel (kf, "f_half", (uint64_t) T + 2000, (uint64_t) T + 3000);
  fk_kernel (kb, "b_half", (uint64_t) T + 2500, (uint64_t) T + 9000);
  g_assert_cmpint (pipescope_device_overlap (r, f, b, 2, 3, PIPESCOPE_B, 1, 0, 4, T, T + 20000), ==, 0);
  close_rank (r);

  Trace *t = trace_read (path);
  const PpSpan *o = the_block (t, PP_SPAN_OVERLAP_F_B, 2, 3);
  g_assert_cmpint (o->start_ns, ==, T + 2000);
  g_assert_cmpint (o->end_ns, ==, T + 9000);
  g_assert_cmpint (o->sub_kind, ==, PP_SPAN_B);
  g_assert_cmpint (o->sub_stage, ==, 1);
  g_assert_cmpint (o->sub_microbatch, ==, 0);
  g_assert_cmpint (named (t, "f_half")->stage, ==, 2);
  g_assert_cmpint (named (t, "b_half")->stage, ==, 1);
  g_assert_cmpint (named (t, "b_half")->step, ==, 4);
  trace_free (t);
  g_free (path);
}

/* CUPTI refuses (no driver, another profiler): start says so in err and
 * returns 1, prints nothing, leaves nothing enabled; push gives 0, pop
 * does nothing, a block keeps its caller's times.  A later start works. */
static void
test_refused (void)
{
  if (g_test_subprocess ())
    {
      char err[256];
      char *path = g_build_filename (tmp_dir, "refused.pptrace", NULL);
      fk_reset ();
      fk_fail ("cuptiActivityEnable", CUPTI_ERROR_NOT_INITIALIZED);
      pipescope_rank *r = open_rank (path);
      g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 1);
      g_assert_nonnull (strstr (err, "GPU tracing unavailable"));
      g_assert_nonnull (strstr (err, "CUPTI_ERROR_NOT_INITIALIZED"));
      g_assert_null (strchr (err, '\n'));
      g_assert_false (fk_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      g_assert_cmpuint (pipescope_device_push (r, PIPESCOPE_F, 0, 0, 0), ==, 0);
      g_assert_cmpint (pipescope_device_pop (r), ==, -1);
      int64_t T = pipescope_now_ns ();
      g_assert_cmpint (pipescope_device_block (r, 0, PIPESCOPE_F, 0, 0, 0, T, T + 100), ==, 0);
      close_rank (r);
      Trace *t = trace_read (path);
      const PpSpan *fs = the_block (t, PP_SPAN_F, 0, 0);
      g_assert_cmpint (fs->start_ns, ==, T);
      g_assert_cmpint (fs->end_ns, ==, T + 100);
      trace_free (t);

      /* nothing was left running: with CUPTI willing, the next start works */
      fk_reset ();
      r = open_rank (path);
      g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 0);
      close_rank (r);
      g_free (path);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("");
}

/* PIPESCOPE_CUPTI=0: unavailable, said why, nothing enabled. */
static void
test_off (void)
{
  char err[256];
  char *path = g_build_filename (tmp_dir, "off.pptrace", NULL);
  fk_reset ();
  g_setenv ("PIPESCOPE_CUPTI", "0", TRUE);
  pipescope_rank *r = open_rank (path);
  g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 1);
  g_assert_nonnull (strstr (err, "PIPESCOPE_CUPTI=0"));
  g_assert_false (fk_kind_enabled (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  g_assert_cmpuint (pipescope_device_push (r, PIPESCOPE_F, 0, 0, 0), ==, 0);
  close_rank (r);
  g_unsetenv ("PIPESCOPE_CUPTI");
  g_free (path);
}

/* No module at all (a library built without CUDA and CUPTI, or one whose
 * module is missing): the same no-ops. */
static void
test_absent (void)
{
  char err[256];
  char *path = g_build_filename (tmp_dir, "absent.pptrace", NULL);
  pipescope_rank *r = open_rank (path);
  g_assert_cmpint (pipescope_device_start (r, err, sizeof err), ==, 1);
  g_assert_nonnull (strstr (err, "unavailable"));
  g_assert_cmpint (pipescope_device_start (NULL, err, sizeof err), ==, -1);
  g_assert_cmpuint (pipescope_device_push (r, PIPESCOPE_F, 0, 0, 0), ==, 0);
  g_assert_cmpint (pipescope_device_pop (r), ==, -1);
  int64_t T = pipescope_now_ns ();
  g_assert_cmpint (pipescope_device_block (r, 0, PIPESCOPE_W, 0, 1, 0, T, T + 50), ==, 0);
  g_assert_cmpint (pipescope_device_overlap (r, 0, 0, 0, 2, PIPESCOPE_I, 1, 3, 0, T + 60, T + 90), ==, 0);
  g_assert_cmpint (pipescope_device_block (NULL, 0, PIPESCOPE_W, 0, 1, 0, T, T + 50), ==, -1);
  close_rank (r);
  Trace *t = trace_read (path);
  const PpSpan *w = the_block (t, PP_SPAN_W, 0, 1);
  g_assert_cmpint (w->start_ns, ==, T);
  g_assert_cmpint (w->end_ns, ==, T + 50);
  const PpSpan *o = the_block (t, PP_SPAN_OVERLAP_F_B, 0, 2);
  g_assert_cmpint (o->start_ns, ==, T + 60);
  g_assert_cmpint (o->sub_kind, ==, PP_SPAN_I);
  trace_free (t);
  g_free (path);
}

static void
rm_tree (const char *path)
{
  GDir *d = g_dir_open (path, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      char *p = g_build_filename (path, name, NULL);
      if (g_file_test (p, G_FILE_TEST_IS_DIR) && !g_file_test (p, G_FILE_TEST_IS_SYMLINK))
        rm_tree (p);
      else
        g_remove (p);
      g_free (p);
    }
  if (d != NULL)
    g_dir_close (d);
  g_rmdir (path);
}

static void *
find (void *h, const char *name)
{
  void *p = dlsym (h, name);
  if (p == NULL)
    g_error ("the fake CUPTI module lacks %s", name);
  return p;
}

int
main (int argc, char **argv)
{
  gboolean absent = argc > 1 && strcmp (argv[1], "--absent") == 0;
  int rc;

  if (absent)
    {
      argv[1] = argv[0];
      argv++;
      argc--;
    }
  g_test_init (&argc, &argv, NULL);
  tmp_dir = g_dir_make_tmp ("pp-foreign-cupti-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  g_setenv ("XDG_RUNTIME_DIR", tmp_dir, TRUE);   /* the ranks' registry: this test's own */
  if (absent)
    {
      g_setenv ("PIPESCOPE_CUPTI_LIB", "/nonexistent/libpipescope-cupti.so", TRUE);
      g_test_add_func ("/foreign-cupti/absent", test_absent);
    }
  else
    {
      const char *fake = g_getenv ("PP_CUPTI_FAKE");
      void *h;
      g_assert_nonnull (fake);
      g_setenv ("PIPESCOPE_CUPTI_LIB", fake, TRUE);
      /* the library opens this same file: one module, one fake */
      h = dlopen (fake, RTLD_NOW | RTLD_LOCAL);
      if (h == NULL)
        g_error ("%s", dlerror ());
      *(void **) &fk_reset = find (h, "fake_cupti_reset");
      *(void **) &fk_fail = find (h, "fake_cupti_fail");
      *(void **) &fk_api_call = find (h, "fake_cupti_api_call");
      *(void **) &fk_kernel = find (h, "fake_cupti_kernel");
      *(void **) &fk_memcpy = find (h, "fake_cupti_memcpy");
      *(void **) &fk_kind_enabled = find (h, "fake_cupti_kind_enabled");
      g_test_add_func ("/foreign-cupti/children", test_children);
      g_test_add_func ("/foreign-cupti/overlap", test_overlap);
      g_test_add_func ("/foreign-cupti/refused", test_refused);
      g_test_add_func ("/foreign-cupti/off", test_off);
    }
  rc = g_test_run ();
  rm_tree (tmp_dir);
  g_free (tmp_dir);
  return rc;
}
