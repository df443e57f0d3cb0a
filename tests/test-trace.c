/* The trace file: every frame type round-trips in both byte orders, any prefix
 * reads up to its last whole frame, corrupted input is an error and never a
 * crash, and extreme span values survive. */
#include <glib.h>
#include <glib/gstdio.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "pp-action.h"
#include "pp-trace.h"
#include "pp-trace-format.h"

#include "test-trace-private.h"

_Static_assert ((int) PP_TRACE_ACT_F == (int) PP_ACT_F && (int) PP_TRACE_ACT_B == (int) PP_ACT_B
                && (int) PP_TRACE_ACT_I == (int) PP_ACT_I && (int) PP_TRACE_ACT_W == (int) PP_ACT_W
                && (int) PP_TRACE_ACT_SEND_F == (int) PP_ACT_SEND_F && (int) PP_TRACE_ACT_RECV_F == (int) PP_ACT_RECV_F
                && (int) PP_TRACE_ACT_SEND_B == (int) PP_ACT_SEND_B && (int) PP_TRACE_ACT_RECV_B == (int) PP_ACT_RECV_B
                && (int) PP_TRACE_ACT_OVERLAP_F_B == (int) PP_ACT_OVERLAP_F_B && (int) PP_TRACE_ACT_OPT == (int) PP_ACT_OPT
                && (int) PP_TRACE_ACT_UNSHARD == (int) PP_ACT_UNSHARD && (int) PP_TRACE_ACT_RESHARD == (int) PP_ACT_RESHARD
                && (int) PP_TRACE_ACT_REDUCE_GRAD == (int) PP_ACT_REDUCE_GRAD
                && (int) PP_TRACE_ACT_WAIT_REDUCE_GRAD == (int) PP_ACT_WAIT_REDUCE_GRAD,
                "trace action kinds are PpActionKind's numbers");

/* ---- a fresh directory per test ---- */


void
fixture_setup (Fixture *fx, gconstpointer data)
{
  (void) data;
  GError *error = NULL;
  fx->dir = g_dir_make_tmp ("pp-trace-XXXXXX", &error);
  g_assert_no_error (error);
}

void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  (void) data;
  GDir *d = g_dir_open (fx->dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      char *p = g_build_filename (fx->dir, name, NULL);
      g_unlink (p);
      g_free (p);
    }
  if (d != NULL)
    g_dir_close (d);
  g_rmdir (fx->dir);
  g_free (fx->dir);
}

char *
fx_path (Fixture *fx, const char *name)
{
  return g_build_filename (fx->dir, name, NULL);
}

/* ---- the sample trace ---- */



PpSpan
extreme_span (int i)
{
  PpSpan s = { 0 };
  s.rank = 1;
  s.stage = -1;
  s.microbatch = -1;
  s.peer_rank = -1;
  s.device = 0xffff;
  switch (i)
    {
    case 0: s.start_ns = INT64_MIN; s.end_ns = INT64_MAX; break;
    case 1: s.start_ns = INT64_MAX; s.end_ns = INT64_MIN; break;
    case 2: s.start_ns = 1000; s.end_ns = 1000 + (int64_t) UINT32_MAX; break;      /* compact limit */
    case 3: s.start_ns = 1000; s.end_ns = 1000 + (int64_t) UINT32_MAX + 1; break;  /* just past it */
    case 4: s.start_ns = 5; s.end_ns = 4; break;                                   /* negative duration */
    case 5: s.bytes = UINT64_MAX; s.kind = PP_SPAN_MEMCPY; break;
    case 6: s.bytes = UINT32_MAX; s.rank = 32767; s.stage = -32768; s.microbatch = 32767; break;
    case 7: s.rank = 32768; s.stage = -32769; s.microbatch = INT32_MAX; s.peer_rank = INT32_MIN; break;
    case 8: s.rank = PP_TRACE_MAX_RANKS - 1; s.step = INT32_MIN; s.name_id = UINT32_MAX;
            s.stream = UINT32_MAX; s.kind = 0xffff; break;
    case 9: s.kind = 255; s.step = INT32_MAX; s.microbatch = INT32_MIN; s.device = 0; break;
    case 10: s.kind = 256; s.stage = INT32_MAX; s.peer_rank = 32767; break;
    default: s.rank = 0; s.start_ns = -1; s.end_ns = 0; s.peer_rank = -32768; break;
    }
  return s;
}

void
sample_init (Sample *s)
{
  memset (s, 0, sizeof *s);
  g_strlcpy (s->desc.schedule, "ZBV", sizeof s->desc.schedule);
  g_strlcpy (s->desc.backend, "cuda", sizeof s->desc.backend);
  g_strlcpy (s->desc.host, "node-7.example", sizeof s->desc.host);
  g_strlcpy (s->desc.model, "GPT 24 layers d=1024, 350M params", sizeof s->desc.model);
  /* exactly the longest cmdline that fits */
  memset (s->desc.cmdline, 'x', sizeof s->desc.cmdline - 1);
  s->desc.n_ranks = 3;
  s->desc.n_microbatches = 8;
  s->desc.n_virtual = 2;
  s->desc.start_unix_ns = 1700000000123456789LL;
  s->desc.start_monotonic_ns = 987654321012LL;

  for (int r = 0; r < N_PLAN_RANKS; r++)
    {
      s->plan_n[r] = (size_t) (r == 2 ? 0 : 6 - r);  /* rank 2: empty plan */
      for (size_t i = 0; i < s->plan_n[r]; i++)
        {
          PpTracePlanAction *a = &s->plan[r][i];
          a->kind = (int32_t) ((i * 4 + (size_t) r) % 10);   /* covers OVERLAP_F_B and OPT */
          a->stage = r + 3 * (int) i;
          a->microbatch = a->kind == PP_TRACE_ACT_OPT ? -1 : (int) i;
          a->sub_kind = a->kind == PP_TRACE_ACT_OVERLAP_F_B ? PP_TRACE_ACT_I : -1;
          a->sub_stage = a->kind == PP_TRACE_ACT_OVERLAP_F_B ? 4 : -1;
          a->sub_microbatch = a->kind == PP_TRACE_ACT_OVERLAP_F_B ? 9 : -1;
          a->planned_start = 0.25 * (double) i + r;
          a->planned_end = a->planned_start + 1.0 / 3.0;
        }
    }

  GRand *rng = g_rand_new_with_seed (7);
  for (size_t i = 0; i < G_N_ELEMENTS (s->spans_a); i++)
    {
      PpSpan *p = &s->spans_a[i];
      p->start_ns = 1000000000LL + (int64_t) i * 12345;
      p->end_ns = p->start_ns + g_rand_int_range (rng, 0, 5000000);
      p->rank = g_rand_int_range (rng, 0, 3);
      p->stage = g_rand_int_range (rng, -1, 6);
      p->microbatch = g_rand_int_range (rng, -1, 64);
      p->step = g_rand_int_range (rng, 0, 100);
      p->name_id = (uint32_t) g_rand_int_range (rng, 0, 3);
      p->kind = (uint16_t) g_rand_int_range (rng, 0, PP_N_SPAN_KINDS);
      p->device = (uint16_t) g_rand_int_range (rng, 0, 8);
      p->stream = (uint32_t) g_rand_int_range (rng, 0, 16);
      p->peer_rank = g_rand_int_range (rng, -1, 3);
      p->bytes = (uint64_t) g_rand_int (rng) * (i % 3);
    }
  g_rand_free (rng);
  for (size_t i = 0; i < G_N_ELEMENTS (s->spans_b); i++)
    s->spans_b[i] = extreme_span ((int) i);

  s->counter.time_ns = -77;
  s->counter.value = 2.718281828459045;
  s->counter.rank = 2;
  s->counter.step = 41;
  s->counter.kind = PP_COUNTER_LOSS;
}


/* Writes the sample; returns the number of items a reader should see. */
size_t
sample_write (const Sample *s, PpTraceWriter *w)
{
  PpError err = { 0 };
  const PpTracePlanAction *plans[N_PLAN_RANKS] = { s->plan[0], s->plan[1], s->plan[2] };
  g_assert_cmpint (pp_trace_write_description (w, &s->desc, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_plan (w, N_PLAN_RANKS, plans, s->plan_n, 1, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_string (w, 1, "gemm_fwd", &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_string (w, 2, "", &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_string (w, UINT32_MAX, "ncclKernel_SendRecv_with_a_long_name", &err), ==, PP_OK);
  for (int r = 0; r < 3; r++)
    g_assert_cmpint (pp_trace_write_clock_offset (w, r, (int64_t) (r - 1) * 1000003, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_step_marker (w, 0, 0, PP_TRACE_STEP_BEGIN, 999, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_spans (w, s->spans_a, G_N_ELEMENTS (s->spans_a), &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_counter (w, &s->counter, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_spans (w, s->spans_b, G_N_ELEMENTS (s->spans_b), &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_step_marker (w, 2, 7, PP_TRACE_STEP_END, INT64_MAX, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_dropped (w, 0, 5, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_dropped (w, 0, UINT64_MAX - 5, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_dropped (w, -1, 3, &err), ==, PP_OK);
  /* where each rank ran; the third host name is longer than the field */
  g_assert_cmpint (pp_trace_write_rank (w, 0, 4242, "gpu-node-01", &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_rank (w, 1, INT32_MAX, "", &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_rank (w, 2, 7, RANK_HOST_LONG, &err), ==, PP_OK);
  return 1 + N_PLAN_RANKS + 3 + 3 + 1 + G_N_ELEMENTS (s->spans_a) + 1
         + G_N_ELEMENTS (s->spans_b) + 1 + 3 + 3;
}

void
assert_span_equal (const PpSpan *a, const PpSpan *b)
{
  g_assert_cmpint (a->start_ns, ==, b->start_ns);
  g_assert_cmpint (a->end_ns, ==, b->end_ns);
  g_assert_cmpuint (a->bytes, ==, b->bytes);
  g_assert_cmpint (a->rank, ==, b->rank);
  g_assert_cmpint (a->stage, ==, b->stage);
  g_assert_cmpint (a->microbatch, ==, b->microbatch);
  g_assert_cmpint (a->step, ==, b->step);
  g_assert_cmpuint (a->name_id, ==, b->name_id);
  g_assert_cmpuint (a->kind, ==, b->kind);
  g_assert_cmpuint (a->device, ==, b->device);
  g_assert_cmpuint (a->stream, ==, b->stream);
  g_assert_cmpint (a->peer_rank, ==, b->peer_rank);
}

PpStatus
next_item (PpTraceReader *r, PpTraceItem *item)
{
  PpError err = { 0 };
  PpStatus st = pp_trace_reader_next (r, item, &err);
  if (st != PP_OK)
    g_error ("pp_trace_reader_next: %s: %s", pp_status_name (st), err.msg);
  return st;
}

/* Reads the whole sample back and compares every field of every item. */
static void
sample_check (const Sample *s, PpTraceReader *r)
{
  PpTraceItem it;

  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_DESCRIPTION);
  const PpTraceDescription *d = it.description;
  g_assert_cmpstr (d->schedule, ==, s->desc.schedule);
  g_assert_cmpstr (d->backend, ==, s->desc.backend);
  g_assert_cmpstr (d->host, ==, s->desc.host);
  g_assert_cmpstr (d->model, ==, s->desc.model);
  g_assert_cmpstr (d->cmdline, ==, s->desc.cmdline);
  g_assert_cmpint (d->n_ranks, ==, s->desc.n_ranks);
  g_assert_cmpint (d->n_microbatches, ==, s->desc.n_microbatches);
  g_assert_cmpint (d->n_virtual, ==, s->desc.n_virtual);
  g_assert_cmpint (d->start_unix_ns, ==, s->desc.start_unix_ns);
  g_assert_cmpint (d->start_monotonic_ns, ==, s->desc.start_monotonic_ns);
  g_assert_cmpuint (it.offset, ==, sizeof (PpTraceFileHeader));

  for (int rank = 0; rank < N_PLAN_RANKS; rank++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_PLAN);
      g_assert_cmpint (it.plan.rank, ==, rank);
      g_assert_cmpint (it.plan.has_timeline, ==, 1);
      g_assert_cmpuint (it.plan.n_actions, ==, s->plan_n[rank]);
      for (size_t i = 0; i < s->plan_n[rank]; i++)
        {
          const PpTracePlanAction *a = &it.plan.actions[i], *b = &s->plan[rank][i];
          g_assert_cmpint (a->kind, ==, b->kind);
          g_assert_cmpint (a->stage, ==, b->stage);
          g_assert_cmpint (a->microbatch, ==, b->microbatch);
          g_assert_cmpint (a->sub_kind, ==, b->sub_kind);
          g_assert_cmpint (a->sub_stage, ==, b->sub_stage);
          g_assert_cmpint (a->sub_microbatch, ==, b->sub_microbatch);
          g_assert_true (a->planned_start == b->planned_start);
          g_assert_true (a->planned_end == b->planned_end);
        }
    }

  static const struct { uint32_t id; const char *name; } strings[] = {
    { 1, "gemm_fwd" }, { 2, "" }, { UINT32_MAX, "ncclKernel_SendRecv_with_a_long_name" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (strings); i++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_STRING);
      g_assert_cmpuint (it.string.id, ==, strings[i].id);
      g_assert_cmpstr (it.string.name, ==, strings[i].name);
      g_assert_cmpuint (it.string.length, ==, strlen (strings[i].name));
    }

  for (int rank = 0; rank < 3; rank++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_CLOCK_OFFSET);
      g_assert_cmpint (it.clock_offset.rank, ==, rank);
      g_assert_cmpint (it.clock_offset.offset_ns, ==, (int64_t) (rank - 1) * 1000003);
    }

  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_STEP_MARKER);
  g_assert_cmpint (it.step_marker.rank, ==, 0);
  g_assert_cmpint (it.step_marker.step, ==, 0);
  g_assert_cmpint (it.step_marker.phase, ==, PP_TRACE_STEP_BEGIN);
  g_assert_cmpint (it.step_marker.time_ns, ==, 999);

  for (size_t i = 0; i < G_N_ELEMENTS (s->spans_a); i++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
      assert_span_equal (&it.span, &s->spans_a[i]);
    }

  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_COUNTER);
  g_assert_cmpint (it.counter.time_ns, ==, s->counter.time_ns);
  g_assert_true (it.counter.value == s->counter.value);
  g_assert_cmpint (it.counter.rank, ==, s->counter.rank);
  g_assert_cmpint (it.counter.step, ==, s->counter.step);
  g_assert_cmpuint (it.counter.kind, ==, s->counter.kind);

  for (size_t i = 0; i < G_N_ELEMENTS (s->spans_b); i++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
      assert_span_equal (&it.span, &s->spans_b[i]);
    }

  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_STEP_MARKER);
  g_assert_cmpint (it.step_marker.rank, ==, 2);
  g_assert_cmpint (it.step_marker.step, ==, 7);
  g_assert_cmpint (it.step_marker.phase, ==, PP_TRACE_STEP_END);
  g_assert_cmpint (it.step_marker.time_ns, ==, INT64_MAX);

  static const struct { int32_t rank; uint64_t count; } dropped[] = {
    { 0, 5 }, { 0, UINT64_MAX - 5 }, { -1, 3 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (dropped); i++)
    {
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_DROPPED);
      g_assert_cmpint (it.dropped.rank, ==, dropped[i].rank);
      g_assert_cmpuint (it.dropped.count, ==, dropped[i].count);
    }
  {
    static const int32_t pids[3] = { 4242, INT32_MAX, 7 };
    for (int rank = 0; rank < 3; rank++)
      {
        next_item (r, &it);
        g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_RANK);
        g_assert_cmpint (it.rank_info.rank, ==, rank);
        g_assert_cmpint (it.rank_info.pid, ==, pids[rank]);
      }
    /* the last one's host, cut to the field (63 bytes and its NUL) */
    g_assert_cmpuint (strlen (it.rank_info.host), ==, 63);
    g_assert_true (strncmp (it.rank_info.host, RANK_HOST_LONG, 63) == 0);
  }

  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  g_assert_cmpint (it.truncated, ==, 0);
  /* END stays END */
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
}

static void
write_sample_file (const Sample *s, const char *path, int order)
{
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
  g_assert_nonnull (w);
  sample_write (s, w);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
}

guint8 *
sample_bytes (const Sample *s, int order, Fixture *fx, gsize *len)
{
  char *path = fx_path (fx, "sample.pptrace");
  write_sample_file (s, path, order);
  guint8 *data = NULL;
  GError *error = NULL;
  g_assert_true (g_file_get_contents (path, (char **) &data, len, &error));
  g_assert_no_error (error);
  g_free (path);
  return data;
}

/* ---- tests ---- */

static void
test_round_trip (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  static const int orders[] = { PP_TRACE_LITTLE, PP_TRACE_BIG, PP_TRACE_NATIVE };
  gsize lens[3];
  guint8 *bytes[3];
  for (int o = 0; o < 3; o++)
    {
      char *path = fx_path (fx, o == 0 ? "le.pptrace" : o == 1 ? "be.pptrace" : "native.pptrace");
      write_sample_file (&s, path, orders[o]);

      PpError err = { 0 };
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      g_assert_nonnull (r);
      sample_check (&s, r);
      int major, minor;
      pp_trace_reader_get_version (r, &major, &minor);
      g_assert_cmpint (major, ==, PP_TRACE_VERSION_MAJOR);
      g_assert_cmpint (minor, ==, PP_TRACE_VERSION_MINOR);
      pp_trace_reader_free (r);

      g_assert_true (g_file_get_contents (path, (char **) &bytes[o], &lens[o], NULL));
      r = pp_trace_reader_new_memory (bytes[o], lens[o], &err);
      sample_check (&s, r);
      pp_trace_reader_free (r);

      /* an fd not at offset 0 of its file is read from where it stands */
      int fd = g_open (path, O_RDONLY, 0);
      g_assert_cmpint (fd, >=, 0);
      r = pp_trace_reader_new_fd (fd, &err);
      sample_check (&s, r);
      pp_trace_reader_free (r);
      close (fd);
      g_free (path);
    }
  g_assert_cmpuint (lens[0], ==, lens[1]);
  g_assert_cmpint (bytes[0][8], ==, PP_TRACE_ORDER_LITTLE_CODE);
  g_assert_cmpint (bytes[1][8], ==, PP_TRACE_ORDER_BIG_CODE);
  /* the two orders really differ: one of them was swapped */
  g_assert_true (memcmp (bytes[0], bytes[1], lens[0]) != 0);
  g_assert_true (memcmp (bytes[2], G_BYTE_ORDER == G_LITTLE_ENDIAN ? bytes[0] : bytes[1], lens[0]) == 0);
  for (int o = 0; o < 3; o++)
    g_free (bytes[o]);
}

/* Extreme values in both orders, and the size of an ordinary span on disk. */
static void
test_extreme_spans (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpSpan spans[12];
  for (int i = 0; i < 12; i++)
    spans[i] = extreme_span (i);
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "extreme.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      g_assert_cmpint (pp_trace_write_spans (w, spans, 12, &err), ==, PP_OK);
      /* one at a time too: every span its own frame */
      for (int i = 0; i < 12; i++)
        g_assert_cmpint (pp_trace_write_spans (w, &spans[i], 1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      PpTraceItem it;
      for (int i = 0; i < 24; i++)
        {
          next_item (r, &it);
          g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
          assert_span_equal (&it.span, &spans[i % 12]);
        }
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
      pp_trace_reader_free (r);
      g_free (path);
    }

  /* An ordinary span alone in its frame takes 48 bytes with the header. */
  char *path = fx_path (fx, "one.pptrace");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  PpSpan s = { .start_ns = 123456789, .end_ns = 123999999, .bytes = 1 << 20, .rank = 3,
               .stage = 5, .microbatch = 17, .step = 2, .name_id = 4, .kind = PP_SPAN_SEND_F,
               .device = 3, .stream = 7, .peer_rank = 4 };
  g_assert_cmpint (pp_trace_write_spans (w, &s, 1, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_size - (goffset) sizeof (PpTraceFileHeader), ==, 48);
  g_free (path);
}

/* Frame ends of a native-order trace, walked by hand. */
GArray *
frame_ends (const guint8 *data, gsize len)
{
  GArray *ends = g_array_new (FALSE, FALSE, sizeof (gsize));
  gsize off = sizeof (PpTraceFileHeader);
  while (off + 8 <= len)
    {
      guint32 size;
      memcpy (&size, data + off, 4);
      g_assert_cmpuint (size, >=, 8);
      off += size;
      g_array_append_val (ends, off);
    }
  g_assert_cmpuint (off, ==, len);
  return ends;
}

static void
test_every_prefix (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  gsize len;
  guint8 *data = sample_bytes (&s, PP_TRACE_NATIVE, fx, &len);
  GArray *ends = frame_ends (data, len);

  /* Which frame each item comes from: read the whole file once. */
  GArray *item_end = g_array_new (FALSE, FALSE, sizeof (gsize));
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_memory (data, len, &err);
  PpTraceItem it;
  for (;;)
    {
      next_item (r, &it);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      gsize e = 0;
      for (guint k = 0; k < ends->len; k++)
        if (g_array_index (ends, gsize, k) > it.offset)
          {
            e = g_array_index (ends, gsize, k);
            break;
          }
      g_assert_cmpuint (e, >, 0);
      g_array_append_val (item_end, e);
    }
  pp_trace_reader_free (r);
  g_assert_cmpuint (item_end->len, ==, 1 + N_PLAN_RANKS + 3 + 3 + 1 + G_N_ELEMENTS (s.spans_a) + 1
                                       + G_N_ELEMENTS (s.spans_b) + 1 + 3 + 3);

  char *cut_path = fx_path (fx, "cut.pptrace");
  for (gsize cut = 0; cut <= len; cut++)
    {
      gsize expect = 0;
      for (guint k = 0; k < item_end->len; k++)
        expect += g_array_index (item_end, gsize, k) <= cut;
      int at_boundary = cut == sizeof (PpTraceFileHeader);
      for (guint k = 0; k < ends->len; k++)
        at_boundary |= g_array_index (ends, gsize, k) == cut;

      /* an exact-size copy, so reading past the cut is an ASan error */
      guint8 *prefix = g_memdup2 (data, cut > 0 ? cut : 1);
      int use_fd = cut % 7 == 0;
      int fd = -1;
      if (use_fd)
        {
          g_assert_true (g_file_set_contents (cut_path, (const char *) data, (gssize) cut, NULL));
          fd = g_open (cut_path, O_RDONLY, 0);
          r = pp_trace_reader_new_fd (fd, &err);
        }
      else
        r = pp_trace_reader_new_memory (prefix, cut, &err);
      g_assert_nonnull (r);
      gsize got = 0;
      for (;;)
        {
          PpError e = { 0 };
          PpStatus st = pp_trace_reader_next (r, &it, &e);
          if (st != PP_OK)
            g_error ("cut at %zu: %s: %s", cut, pp_status_name (st), e.msg);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          got++;
        }
      g_assert_cmpuint (got, ==, expect);
      g_assert_cmpint (it.truncated, ==, !at_boundary);
      pp_trace_reader_free (r);
      if (fd >= 0)
        close (fd);
      g_free (prefix);
    }
  g_free (cut_path);
  g_array_free (item_end, TRUE);
  g_array_free (ends, TRUE);
  g_free (data);
}

static guint32
frame_offset_at (GArray *ends, guint k)
{
  return k == 0 ? (guint32) sizeof (PpTraceFileHeader) : (guint32) g_array_index (ends, gsize, k - 1);
}

static void
test_corruption (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      gsize len;
      guint8 *good = sample_bytes (&s, order, fx, &len);
      guint8 *native = sample_bytes (&s, PP_TRACE_NATIVE, fx, &len);
      GArray *ends = frame_ends (native, len);   /* same layout in both orders */
      g_free (native);
      int swap = (order == PP_TRACE_BIG) == (G_BYTE_ORDER == G_LITTLE_ENDIAN);
      GRand *rng = g_rand_new_with_seed (20240611 + (guint32) order);
      int n_ok = 0, n_bad = 0;
      char *path = fx_path (fx, "corrupt.pptrace");

      for (int iter = 0; iter < 500; iter++)
        {
          guint8 *buf = g_memdup2 (good, len);
          int n_mut = g_rand_int_range (rng, 1, 5);
          for (int m = 0; m < n_mut; m++)
            {
              guint k = (guint) g_rand_int_range (rng, 0, (gint32) ends->len);
              guint32 fo = frame_offset_at (ends, k);
              guint32 v;
              switch (g_rand_int_range (rng, 0, 6))
                {
                case 0: /* flip a bit anywhere */
                  buf[g_rand_int_range (rng, 0, (gint32) len)] ^= (guint8) (1u << g_rand_int_range (rng, 0, 8));
                  break;
                case 1: /* random byte anywhere */
                  buf[g_rand_int_range (rng, 0, (gint32) len)] = (guint8) g_rand_int (rng);
                  break;
                case 2: /* a frame's size: anything */
                  v = g_rand_int (rng);
                  v = swap ? GUINT32_SWAP_LE_BE (v) : v;
                  memcpy (buf + fo, &v, 4);
                  break;
                case 3: /* a frame's size: plausible, multiple of 8 */
                  v = (guint32) g_rand_int_range (rng, 0, 400) * 8;
                  v = swap ? GUINT32_SWAP_LE_BE (v) : v;
                  memcpy (buf + fo, &v, 4);
                  break;
                case 4: /* a frame's type */
                  {
                    guint16 t = (guint16) g_rand_int_range (rng, 0, 12);
                    t = swap ? GUINT16_SWAP_LE_BE (t) : t;
                    memcpy (buf + fo + 4, &t, 2);
                  }
                  break;
                default: /* the first fields after a frame header (counts, ranks, ids) */
                  v = g_rand_boolean (rng) ? g_rand_int (rng) : (guint32) g_rand_int_range (rng, -2, 100000);
                  if (fo + 8 + 8 <= len)
                    memcpy (buf + fo + 8 + 4 * (guint) g_rand_int_range (rng, 0, 2), &v, 4);
                  break;
                }
            }

          PpError err = { 0 };
          PpTraceReader *r;
          int fd = -1;
          if (iter % 10 == 0)
            {
              g_assert_true (g_file_set_contents (path, (const char *) buf, (gssize) len, NULL));
              fd = g_open (path, O_RDONLY, 0);
              r = pp_trace_reader_new_fd (fd, &err);
            }
          else
            r = pp_trace_reader_new_memory (buf, len, &err);
          PpTraceItem it;
          PpStatus st = PP_OK;
          for (int n = 0; n < 100000; n++)
            {
              memset (&err, 0, sizeof err);
              st = pp_trace_reader_next (r, &it, &err);
              if (st != PP_OK || it.type == PP_TRACE_ITEM_END)
                break;
              /* touch what the item points to: ASan checks it is in bounds */
              if (it.type == PP_TRACE_ITEM_STRING)
                g_assert_cmpuint (strlen (it.string.name), ==, it.string.length);
              else if (it.type == PP_TRACE_ITEM_PLAN && it.plan.n_actions > 0)
                g_assert_true (it.plan.actions[it.plan.n_actions - 1].kind != INT32_MIN + 12345
                               || TRUE);
              else if (it.type == PP_TRACE_ITEM_DESCRIPTION)
                g_assert_cmpuint (strlen (it.description->cmdline), <, sizeof it.description->cmdline);
            }
          g_assert_true (st == PP_OK || st == PP_EFORMAT);
          if (st == PP_OK)
            {
              g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
              n_ok++;
            }
          else
            {
              g_assert_cmpint (err.status, ==, PP_EFORMAT);
              if (strstr (err.msg, "byte offset") == NULL)
                g_error ("message does not say where: %s", err.msg);
              /* the error sticks */
              PpError again = { 0 };
              g_assert_cmpint (pp_trace_reader_next (r, &it, &again), ==, PP_EFORMAT);
              g_assert_cmpstr (again.msg, ==, err.msg);
              n_bad++;
            }
          pp_trace_reader_free (r);
          if (fd >= 0)
            close (fd);
          g_free (buf);
        }
      /* both outcomes happen: corruption is noticed, and harmless changes pass */
      g_assert_cmpint (n_bad, >, 100);
      g_assert_cmpint (n_ok, >, 10);
      g_test_message ("order %d: %d read to the end, %d rejected", order, n_ok, n_bad);
      g_rand_free (rng);
      g_array_free (ends, TRUE);
      g_free (path);
      g_free (good);
    }
}

/* Reads data; expects EFORMAT whose message holds each of the needles. */
static void
expect_format_error (const guint8 *data, gsize len, const char *needle1, const char *needle2)
{
  guint8 *copy = g_memdup2 (data, len);
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_memory (copy, len, &err);
  PpTraceItem it;
  PpStatus st;
  int n = 0;
  while ((st = pp_trace_reader_next (r, &it, &err)) == PP_OK && it.type != PP_TRACE_ITEM_END)
    n++;
  g_assert_cmpint (st, ==, PP_EFORMAT);
  g_assert_cmpint (err.status, ==, PP_EFORMAT);
  if (needle1 && strstr (err.msg, needle1) == NULL)
    g_error ("message \"%s\" lacks \"%s\"", err.msg, needle1);
  if (needle2 && strstr (err.msg, needle2) == NULL)
    g_error ("message \"%s\" lacks \"%s\"", err.msg, needle2);
  pp_trace_reader_free (r);
  g_free (copy);
}

static void
put32 (guint8 *p, guint32 v)
{
  memcpy (p, &v, 4);
}

static void
test_malformed (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  gsize len;
  guint8 *good = sample_bytes (&s, PP_TRACE_NATIVE, fx, &len);
  GArray *ends = frame_ends (good, len);
  guint8 *b = g_malloc (len);
  const gsize desc_at = 32;                                   /* frame 0 */
  const gsize plan_at = frame_offset_at (ends, 1);            /* frame 1: rank 0's plan */
  const gsize str_at = frame_offset_at (ends, 4);             /* frame 4: string "gemm_fwd" */
  const gsize counter_at = frame_offset_at (ends, 12);        /* after 3 offsets, a marker, a batch */
  const gsize spans_at = frame_offset_at (ends, 11);
  guint16 t;
  memcpy (&t, good + counter_at + 4, 2);
  g_assert_cmpint (t, ==, PP_TRACE_FRAME_COUNTER);
  memcpy (&t, good + spans_at + 4, 2);
  g_assert_cmpint (t, ==, PP_TRACE_FRAME_SPANS);

  /* size not a multiple of 8 */
  memcpy (b, good, len);
  put32 (b + desc_at, 1484);
  expect_format_error (b, len, "byte offset 32", "multiple of 8");
  /* size below the type's minimum */
  memcpy (b, good, len);
  put32 (b + counter_at, 16);
  expect_format_error (b, len, "COUNTER", "below the minimum");
  /* size 0 */
  memcpy (b, good, len);
  put32 (b + counter_at, 0);
  expect_format_error (b, len, "byte offset", "below the minimum");
  /* size absurd */
  memcpy (b, good, len);
  put32 (b + counter_at, 0xfffffff8u);
  expect_format_error (b, len, "COUNTER", "above the maximum");
  /* plan count overflows the frame */
  memcpy (b, good, len);
  put32 (b + plan_at + 12, 7);
  expect_format_error (b, len, "PLAN", "do not fit");
  memcpy (b, good, len);
  put32 (b + plan_at + 12, 0xffffffffu);
  expect_format_error (b, len, "PLAN", "do not fit");
  /* absurd rank */
  memcpy (b, good, len);
  put32 (b + plan_at + 8, 1u << 30);
  expect_format_error (b, len, "PLAN", "rank");
  memcpy (b, good, len);
  put32 (b + counter_at + 24, (guint32) -3);
  expect_format_error (b, len, "COUNTER", "rank");
  memcpy (b, good, len);
  {
    gint16 bad = -5;   /* first span's compact rank */
    memcpy (b + spans_at + 8 + offsetof (PpTraceDiskSpan, rank), &bad, 2);
  }
  expect_format_error (b, len, "SPANS", "rank -5");
  /* an extension slot with no span before it */
  memcpy (b, good, len);
  b[spans_at + 8 + offsetof (PpTraceDiskSpan, flags)] = PP_TRACE_SPAN_IS_EXT;
  expect_format_error (b, len, "SPANS", "extension");
  /* a span that needs an extension in the last slot */
  memcpy (b, good, len);
  {
    guint32 size;
    memcpy (&size, b + spans_at, 4);
    b[spans_at + size - 40 + offsetof (PpTraceDiskSpan, flags)] = PP_TRACE_SPAN_EXT;
  }
  expect_format_error (b, len, "SPANS", "after the frame's end");
  /* batch size not 8 + 40k */
  memcpy (b, good, len);
  {
    guint32 size;
    memcpy (&size, b + spans_at, 4);
    gsize after = spans_at + size;
    /* shrink the batch by 8 and make the freed 8 bytes an empty unknown frame */
    put32 (b + spans_at, size - 8);
    put32 (b + after - 8, 8);
    guint16 ut = 999;
    memcpy (b + after - 4, &ut, 2);
  }
  expect_format_error (b, len, "SPANS", "multiple of 40");
  /* unterminated strings */
  memcpy (b, good, len);
  memset (b + desc_at + offsetof (PpTraceFrameDescription, host), 'h', 64);
  expect_format_error (b, len, "DESCRIPTION", "host");
  memcpy (b, good, len);
  b[str_at + 16 + 8] = 'X';      /* "gemm_fwd" then its NUL */
  expect_format_error (b, len, "STRING", "NUL");
  memcpy (b, good, len);
  put32 (b + str_at + 12, 4000); /* length past the frame */
  expect_format_error (b, len, "STRING", "does not fit");
  memcpy (b, good, len);
  put32 (b + str_at + 8, 0);
  expect_format_error (b, len, "STRING", "id 0");
  /* header: magic, byte order, newer major version, header size */
  memcpy (b, good, len);
  b[0] = 'X';
  expect_format_error (b, len, "not a pipescope trace", NULL);
  expect_format_error ((const guint8 *) "hello", 5, "not a pipescope trace", NULL);
  memcpy (b, good, len);
  b[8] = 3;
  expect_format_error (b, len, "byte order", NULL);
  memcpy (b, good, len);
  {
    guint16 major = 2, minor = 0;
    memcpy (b + 12, &major, 2);
    memcpy (b + 14, &minor, 2);
  }
  expect_format_error (b, len, "version 2.0 (byte offset 12) is newer", "newer pipescope");
  memcpy (b, good, len);
  put32 (b + 16, 12);
  expect_format_error (b, len, "header size", NULL);

  g_free (b);
  g_array_free (ends, TRUE);
  g_free (good);
}

/* Frames of a type this reader does not know are skipped by their size, and
 * a longer header or frame from a newer minor version is read. */
static void
test_forward_compatible (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  char *path = fx_path (fx, "fc.pptrace");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  PpCounter c = { .time_ns = 5, .value = 1.5, .rank = 1, .step = 2, .kind = PP_COUNTER_INFLIGHT };
  g_assert_cmpint (pp_trace_write_counter (w, &c, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  gsize len;
  guint8 *old;
  g_assert_true (g_file_get_contents (path, (char **) &old, &len, NULL));
  g_assert_cmpuint (len, ==, 32 + 40);

  /* header grown to 48 bytes, minor 7; an unknown frame; the counter frame
   * grown by 16 bytes; another unknown frame at the end */
  GByteArray *nb = g_byte_array_new ();
  g_byte_array_append (nb, old, 32);
  guint8 zeros[64] = { 0 };
  g_byte_array_append (nb, zeros, 16);
  put32 (nb->data + 16, 48);
  guint16 minor = 7;
  memcpy (nb->data + 14, &minor, 2);
  guint8 unknown[24];
  memset (unknown, 0xab, sizeof unknown);
  put32 (unknown, 24);
  guint16 ut = 4242;
  memcpy (unknown + 4, &ut, 2);
  g_byte_array_append (nb, unknown, 24);
  gsize counter_at = nb->len;
  g_byte_array_append (nb, old + 32, 40);
  g_byte_array_append (nb, zeros, 16);
  put32 (nb->data + counter_at, 56);
  g_byte_array_append (nb, unknown, 24);

  PpTraceReader *r = pp_trace_reader_new_memory (nb->data, nb->len, &err);
  PpTraceItem it;
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_COUNTER);
  g_assert_cmpuint (it.offset, ==, counter_at);
  g_assert_cmpint (it.counter.time_ns, ==, 5);
  g_assert_true (it.counter.value == 1.5);
  g_assert_cmpint (it.counter.rank, ==, 1);
  g_assert_cmpint (it.counter.step, ==, 2);
  g_assert_cmpuint (it.counter.kind, ==, PP_COUNTER_INFLIGHT);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  g_assert_cmpint (it.truncated, ==, 0);
  int major, mi;
  pp_trace_reader_get_version (r, &major, &mi);
  g_assert_cmpint (major, ==, 1);
  g_assert_cmpint (mi, ==, 7);
  pp_trace_reader_free (r);
  g_byte_array_unref (nb);
  g_free (old);
  g_free (path);
}

static void
test_writer_errors (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpError err = { 0 };
  g_assert_null (pp_trace_writer_new_fd (-1, PP_TRACE_NATIVE, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_assert_null (pp_trace_writer_new_fd (1, 7, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  char *missing = g_build_filename (fx->dir, "no", "such", "dir", NULL);
  g_assert_null (pp_trace_writer_new_path (missing, PP_TRACE_NATIVE, &err));
  g_assert_cmpint (err.status, ==, PP_EIO);
  g_assert_nonnull (strstr (err.msg, missing));
  g_free (missing);
  g_assert_null (pp_trace_reader_new_path ("/nonexistent/x.pptrace", &err));
  g_assert_cmpint (err.status, ==, PP_EIO);

  char *path = fx_path (fx, "w.pptrace");
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_cmpint (pp_trace_write_string (w, 0, "x", &err), ==, PP_EINVAL);
  char *longname = g_strnfill (PP_TRACE_STRING_MAX + 1, 'k');
  g_assert_cmpint (pp_trace_write_string (w, 3, longname, &err), ==, PP_EINVAL);
  /* the cutting variant takes it, as its first PP_TRACE_STRING_MAX bytes */
  char *longer = g_strnfill (2 * PP_TRACE_STRING_MAX, 'k');
  g_assert_cmpint (pp_trace_write_string_cut (w, 4, longer, &err), ==, PP_OK);
  g_free (longer);
  g_assert_cmpint (pp_trace_write_string_cut (w, 0, "x", &err), ==, PP_EINVAL);
  longname[PP_TRACE_STRING_MAX] = '\0';
  g_assert_cmpint (pp_trace_write_string (w, 3, longname, &err), ==, PP_OK);
  PpSpan bad = { .rank = -1 };
  g_assert_cmpint (pp_trace_write_spans (w, &bad, 1, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_trace_write_clock_offset (w, PP_TRACE_MAX_RANKS, 0, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_trace_write_step_marker (w, 0, 0, (PpTraceStepPhase) 2, 0, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_trace_write_dropped (w, -2, 1, &err), ==, PP_EINVAL);
  PpTraceDescription d = { .n_ranks = -1 };
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_EINVAL);
  /* an unterminated description string is cut, not overrun */
  memset (&d, 'z', sizeof d);
  d.n_ranks = 1; d.n_microbatches = 1; d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  PpTraceItem it;
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_STRING);
  g_assert_cmpuint (it.string.id, ==, 4);
  g_assert_cmpstr (it.string.name, ==, longname);   /* cut to the same bytes */
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_STRING);
  g_assert_cmpuint (it.string.id, ==, 3);
  g_assert_cmpstr (it.string.name, ==, longname);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_DESCRIPTION);
  g_assert_cmpuint (strlen (it.description->host), ==, sizeof d.host - 1);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  pp_trace_reader_free (r);
  g_free (longname);

  /* write(2) fails: EIO, and it stays failed */
  int fd = g_open (path, O_RDONLY, 0);
  w = pp_trace_writer_new_fd (fd, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_EIO);
  g_assert_nonnull (strstr (err.msg, "cannot write"));
  PpError err2 = { 0 };
  g_assert_cmpint (pp_trace_write_dropped (w, 0, 1, &err2), ==, PP_EIO);
  g_assert_cmpint (pp_trace_writer_close (w, NULL), ==, PP_EIO);
  close (fd);
  g_free (path);
}

/* Many spans cross the writer's buffer and frame limits and the reader's
 * refills; a plan bigger than the writer's buffer grows it. */
static void
test_large (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  const size_t n = 100000;
  PpSpan *spans = g_new0 (PpSpan, n);
  for (size_t i = 0; i < n; i++)
    {
      spans[i] = extreme_span ((int) (i % 40));     /* mostly ordinary, some extensions */
      spans[i].start_ns = (int64_t) ((uint64_t) spans[i].start_ns + i);   /* wraps, no UB */
      spans[i].step = (int32_t) i;
    }
  size_t n_big = 30000;   /* 1.2 MB of plan: bigger than the writer's buffer */
  PpTracePlanAction *plan = g_new0 (PpTracePlanAction, n_big);
  for (size_t i = 0; i < n_big; i++)
    plan[i] = (PpTracePlanAction) { PP_TRACE_ACT_F, 0, (int32_t) i, -1, -1, -1, 0, 0 };
  const PpTracePlanAction *plans[1] = { plan };
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "large.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      for (size_t i = 0; i < n; i += 777)
        g_assert_cmpint (pp_trace_write_spans (w, spans + i, MIN (777, n - i), &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_plan (w, 1, plans, &n_big, 0, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      PpTraceItem it;
      for (size_t i = 0; i < n; i++)
        {
          next_item (r, &it);
          g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
          assert_span_equal (&it.span, &spans[i]);
        }
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_PLAN);
      g_assert_cmpuint (it.plan.n_actions, ==, n_big);
      g_assert_cmpint (it.plan.has_timeline, ==, 0);
      g_assert_cmpint (it.plan.actions[n_big - 1].microbatch, ==, (int) n_big - 1);
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
      pp_trace_reader_free (r);
      g_free (path);
    }
  g_free (plan);
  g_free (spans);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/trace/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("round-trip", test_round_trip);
  ADD ("extreme-spans", test_extreme_spans);
  ADD ("every-prefix", test_every_prefix);
  ADD ("corruption", test_corruption);
  ADD ("malformed", test_malformed);
  ADD ("forward-compatible", test_forward_compatible);
  ADD ("writer-errors", test_writer_errors);
  ADD ("large", test_large);
  test_trace_stream_register ();
  return g_test_run ();
}
