/* test-trace-stream.c — the trace file streamed: the callback writer, the stream reader (whole, chunked, malformed, large), write_item, and the frames added since (overlap halves, job id, PROCESS, OPEN). */
#include "test-trace-private.h"

/* ---- streaming: callback writer, stream reader, write_item ---- */

/* Every field of an item, as text, so two readers' items compare with one
 * string comparison. */
static gboolean repr_offsets = TRUE;   /* include item offsets */

static void
item_repr (GString *out, const PpTraceItem *it)
{
  g_string_append_printf (out, "type=%d", (int) it->type);
  if (repr_offsets)
    g_string_append_printf (out, " off=%" G_GUINT64_FORMAT, it->offset);
  if (it->type != PP_TRACE_ITEM_END)
    g_string_append_printf (out, " process=%d", it->process);
  switch (it->type)
    {
    case PP_TRACE_ITEM_END:
      g_string_append_printf (out, " truncated=%d need_more=%d", it->truncated, it->need_more);
      break;
    case PP_TRACE_ITEM_DESCRIPTION:
      {
        const PpTraceDescription *d = it->description;
        g_string_append_printf (out, " %s|%s|%s|%s|%s P=%d M=%d V=%d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
                                d->schedule, d->backend, d->host, d->model, d->cmdline, d->n_ranks,
                                d->n_microbatches, d->n_virtual, d->start_unix_ns, d->start_monotonic_ns);
        break;
      }
    case PP_TRACE_ITEM_PLAN:
      g_string_append_printf (out, " rank=%d tl=%d n=%zu", it->plan.rank, it->plan.has_timeline,
                              it->plan.n_actions);
      for (size_t i = 0; i < it->plan.n_actions; i++)
        {
          const PpTracePlanAction *a = &it->plan.actions[i];
          g_string_append_printf (out, " [%d %d %d %d %d %d %a %a]", a->kind, a->stage, a->microbatch,
                                  a->sub_kind, a->sub_stage, a->sub_microbatch, a->planned_start,
                                  a->planned_end);
        }
      break;
    case PP_TRACE_ITEM_SPAN:
      {
        const PpSpan *x = &it->span;
        g_string_append_printf (out, " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GUINT64_FORMAT
                                " %d %d %d %d %u %u %u %u %d",
                                x->start_ns, x->end_ns, x->bytes, x->rank, x->stage, x->microbatch,
                                x->step, x->name_id, x->kind, x->device, x->stream, x->peer_rank);
        break;
      }
    case PP_TRACE_ITEM_COUNTER:
      g_string_append_printf (out, " %" G_GINT64_FORMAT " %a %d %d %u", it->counter.time_ns,
                              it->counter.value, it->counter.rank, it->counter.step, it->counter.kind);
      break;
    case PP_TRACE_ITEM_STEP_MARKER:
      g_string_append_printf (out, " %" G_GINT64_FORMAT " %d %d %d", it->step_marker.time_ns,
                              it->step_marker.rank, it->step_marker.step, (int) it->step_marker.phase);
      break;
    case PP_TRACE_ITEM_CLOCK_OFFSET:
      g_string_append_printf (out, " %d %" G_GINT64_FORMAT, it->clock_offset.rank,
                              it->clock_offset.offset_ns);
      break;
    case PP_TRACE_ITEM_STRING:
      g_string_append_printf (out, " %u %zu '%s'", it->string.id, it->string.length, it->string.name);
      break;
    case PP_TRACE_ITEM_DROPPED:
      g_string_append_printf (out, " %d %" G_GUINT64_FORMAT, it->dropped.rank, it->dropped.count);
      break;
    case PP_TRACE_ITEM_RANK:
      g_string_append_printf (out, " %d %d '%s'", it->rank_info.rank, it->rank_info.pid,
                              it->rank_info.host);
      break;
    case PP_TRACE_ITEM_PROCESS:
      {
        const PpTraceProcess *p = &it->process_info;
        g_string_append_printf (out, " %d %d", p->process, p->rank);
        for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
          g_string_append_printf (out, " %d/%d", p->coord[d], p->size[d]);
        g_string_append_printf (out, " %d '%s'", p->pid, p->host);
        break;
      }
    case PP_TRACE_ITEM_OPEN:
      {
        const PpTraceOpen *o = &it->open;
        g_string_append_printf (out, " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %d %d %d %d %d %u '%s'",
                                o->time_ns, o->start_ns, o->rank, o->step, o->stage, o->microbatch,
                                o->peer_rank, o->kind, o->flags, o->where);
        break;
      }
    }
  g_string_append_c (out, '\n');
}

/* Equal texts; on a difference, the first differing line (not megabytes). */
static void
assert_same_text (const char *got, const char *want)
{
  if (strcmp (got, want) == 0)
    return;
  size_t line = 1;
  const char *g = got, *w = want;
  while (*g && *g == *w)
    {
      line += *g == '\n';
      g++, w++;
    }
  while (g > got && g[-1] != '\n')
    g--, w--;
  g_error ("line %zu differs:\n got: %.300s\nwant: %.300s", line, g, w);
}

/* All items of a non-stream reader up to and including END. */
static char *
reader_repr (PpTraceReader *r)
{
  GString *out = g_string_new (NULL);
  PpTraceItem it;
  do
    {
      next_item (r, &it);
      item_repr (out, &it);
    }
  while (it.type != PP_TRACE_ITEM_END);
  return g_string_free (out, FALSE);
}

static char *
memory_repr (const guint8 *data, gsize len)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_memory (data, len, &err);
  g_assert_nonnull (r);
  char *s = reader_repr (r);
  pp_trace_reader_free (r);
  return s;
}

/* Drains a stream reader into out until need_more or END; 1 at the end. */
static int
stream_drain (PpTraceReader *r, GString *out)
{
  PpTraceItem it;
  for (;;)
    {
      memset (&it, 0x5a, sizeof it);
      next_item (r, &it);
      if (it.type == PP_TRACE_ITEM_END && it.need_more)
        {
          g_assert_cmpint (it.truncated, ==, 0);
          return 0;
        }
      g_assert_cmpint (it.need_more, ==, 0);
      item_repr (out, &it);
      if (it.type == PP_TRACE_ITEM_END)
        return 1;
    }
}

/* Feeds data in pieces of chunk bytes (0: random sizes), then the end. */
static char *
stream_repr (const guint8 *data, gsize len, gsize chunk, GRand *rng)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_stream (&err);
  g_assert_nonnull (r);
  GString *out = g_string_new (NULL);
  gsize off = 0;
  g_assert_cmpint (stream_drain (r, out), ==, 0);
  while (off < len)
    {
      gsize n = chunk ? chunk : (gsize) g_rand_int_range (rng, 1, 300);
      n = MIN (n, len - off);
      g_assert_cmpint (pp_trace_reader_feed (r, data + off, n, &err), ==, PP_OK);
      off += n;
      g_assert_cmpint (stream_drain (r, out), ==, 0);
    }
  pp_trace_reader_feed_end (r);
  g_assert_cmpint (stream_drain (r, out), ==, 1);
  /* END stays END */
  PpTraceItem it;
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  g_assert_cmpint (it.need_more, ==, 0);
  g_assert_cmpint (pp_trace_reader_feed (r, data, 1, &err), ==, PP_EINVAL);
  pp_trace_reader_free (r);
  return g_string_free (out, FALSE);
}

typedef struct {
  GByteArray *bytes;
  GArray     *chunk_ends;
  int         fail_at;     /* this call (1-based) fails; 0: never */
  int         calls;
} Collect;

static int
collect_write (void *user, const void *data, size_t size)
{
  Collect *c = user;
  c->calls++;
  g_assert_cmpuint (size, >, 0);
  if (c->fail_at != 0 && c->calls >= c->fail_at)
    return -1;
  g_byte_array_append (c->bytes, data, (guint) size);
  gsize end = c->bytes->len;
  g_array_append_val (c->chunk_ends, end);
  return 0;
}

static void
collect_init (Collect *c)
{
  memset (c, 0, sizeof *c);
  c->bytes = g_byte_array_new ();
  c->chunk_ends = g_array_new (FALSE, FALSE, sizeof (gsize));
}

static void
collect_clear (Collect *c)
{
  g_byte_array_unref (c->bytes);
  g_array_free (c->chunk_ends, TRUE);
}

/* The sample, then enough spans to overflow the writer's buffer, with a
 * flush in between. */
static void
streaming_content (PpTraceWriter *w, const Sample *s, const PpSpan *many, size_t n_many)
{
  PpError err = { 0 };
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);   /* header only */
  sample_write (s, w);
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);   /* nothing: no call */
  for (size_t i = 0; i < n_many; i += 5000)
    g_assert_cmpint (pp_trace_write_spans (w, many + i, MIN (5000, n_many - i), &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_dropped (w, 1, 2, &err), ==, PP_OK);
}

static PpSpan *
many_spans (size_t n)
{
  PpSpan *spans = g_new0 (PpSpan, n);
  for (size_t i = 0; i < n; i++)
    {
      spans[i] = extreme_span ((int) (i % 40));
      spans[i].start_ns = (int64_t) ((uint64_t) spans[i].start_ns + i);
      spans[i].step = (int32_t) i;
    }
  return spans;
}

static void
test_callback_writer (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  const size_t n_many = 100000;   /* ~2.6 MB: several buffer-full writes */
  PpSpan *many = many_spans (n_many);
  for (int order = PP_TRACE_NATIVE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "cb.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      streaming_content (w, &s, many, n_many);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      guint8 *file = NULL;
      gsize file_len = 0;
      g_assert_true (g_file_get_contents (path, (char **) &file, &file_len, NULL));

      Collect c;
      collect_init (&c);
      w = pp_trace_writer_new_callback (collect_write, &c, order, &err);
      g_assert_nonnull (w);
      g_assert_cmpint (c.calls, ==, 0);   /* nothing before the first flush */
      streaming_content (w, &s, many, n_many);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

      /* the same bytes as the file */
      g_assert_cmpuint (c.bytes->len, ==, file_len);
      g_assert_true (memcmp (c.bytes->data, file, file_len) == 0);
      /* the header alone first, then whole frames only */
      g_assert_cmpuint (c.chunk_ends->len, >=, 5);
      g_assert_cmpuint (g_array_index (c.chunk_ends, gsize, 0), ==, sizeof (PpTraceFileHeader));
      if (order != PP_TRACE_BIG || G_BYTE_ORDER == G_BIG_ENDIAN)
        {
          GArray *ends = frame_ends (file, file_len);
          for (guint i = 1; i < c.chunk_ends->len; i++)
            {
              gsize e = g_array_index (c.chunk_ends, gsize, i);
              gboolean found = FALSE;
              for (guint k = 0; k < ends->len && !found; k++)
                found = g_array_index (ends, gsize, k) == e;
              g_assert_true (found);
            }
          g_array_free (ends, TRUE);
        }
      /* and whatever was received so far reads without error */
      for (guint i = 0; i < c.chunk_ends->len; i++)
        {
          gsize e = g_array_index (c.chunk_ends, gsize, i);
          PpTraceReader *r = pp_trace_reader_new_memory (c.bytes->data, e, &err);
          PpTraceItem it;
          do
            next_item (r, &it);
          while (it.type != PP_TRACE_ITEM_END);
          g_assert_cmpint (it.truncated, ==, 0);
          pp_trace_reader_free (r);
        }
      collect_clear (&c);

      /* the callback fails: EIO, and it stays failed */
      collect_init (&c);
      c.fail_at = 2;
      w = pp_trace_writer_new_callback (collect_write, &c, order, &err);
      g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_dropped (w, 0, 1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_EIO);
      g_assert_nonnull (strstr (err.msg, "callback"));
      g_assert_cmpint (pp_trace_write_dropped (w, 0, 1, &err), ==, PP_EIO);
      g_assert_cmpint (pp_trace_writer_close (w, NULL), ==, PP_EIO);
      g_assert_cmpuint (c.bytes->len, ==, sizeof (PpTraceFileHeader));
      collect_clear (&c);

      g_free (file);
      g_free (path);
    }
  PpError err = { 0 };
  g_assert_null (pp_trace_writer_new_callback (NULL, NULL, PP_TRACE_NATIVE, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_assert_null (pp_trace_writer_new_callback (collect_write, NULL, 9, &err));
  g_assert_cmpint (err.status, ==, PP_EINVAL);
  g_free (many);
}

static void
test_stream_reader (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  GRand *rng = g_rand_new_with_seed (11);
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      gsize len;
      guint8 *data = sample_bytes (&s, order, fx, &len);
      char *want = memory_repr (data, len);

      /* byte by byte, in random pieces, all at once: the file reader's items */
      static const gsize chunks[] = { 1, 0, 7, 4096 };
      for (guint k = 0; k < G_N_ELEMENTS (chunks); k++)
        {
          char *got = stream_repr (data, len, chunks[k], rng);
          assert_same_text (got, want);
          g_free (got);
        }
      /* every prefix, then the end: what the file reader says of that prefix */
      for (gsize cut = 0; cut <= len; cut++)
        {
          guint8 *prefix = g_memdup2 (data, cut > 0 ? cut : 1);
          char *w = memory_repr (prefix, cut);
          char *got = stream_repr (prefix, cut, cut % 3 == 0 ? 1 : 0, rng);
          assert_same_text (got, w);
          g_free (got);
          g_free (w);
          g_free (prefix);
        }
      g_free (want);
      g_free (data);
    }
  g_rand_free (rng);

  /* misuse */
  PpError err = { 0 };
  g_assert_cmpint (pp_trace_reader_feed (NULL, "x", 1, &err), ==, PP_EINVAL);
  guint8 byte = 0;
  PpTraceReader *m = pp_trace_reader_new_memory (&byte, 1, &err);
  g_assert_cmpint (pp_trace_reader_feed (m, "x", 1, &err), ==, PP_EINVAL);
  pp_trace_reader_feed_end (m);   /* no effect on a memory reader */
  pp_trace_reader_free (m);
}

static void
test_stream_malformed (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  gsize len;
  guint8 *data = sample_bytes (&s, PP_TRACE_NATIVE, fx, &len);
  GArray *ends = frame_ends (data, len);
  /* the fifth frame's size is not a multiple of 8 */
  gsize bad_off = g_array_index (ends, gsize, 3);
  guint32 size;
  memcpy (&size, data + bad_off, 4);
  size += 4;
  memcpy (data + bad_off, &size, 4);

  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_stream (&err);
  PpTraceItem it;
  gsize items = 0;
  PpStatus st = PP_OK;
  for (gsize off = 0; off < len && st == PP_OK; off++)
    {
      g_assert_cmpint (pp_trace_reader_feed (r, data + off, 1, &err), ==, PP_OK);
      while ((st = pp_trace_reader_next (r, &it, &err)) == PP_OK && !(it.type == PP_TRACE_ITEM_END))
        items++;
      if (st == PP_OK)
        g_assert_cmpint (it.need_more, ==, 1);
    }
  g_assert_cmpint (st, ==, PP_EFORMAT);
  g_assert_cmpuint (items, ==, 4);
  char *where = g_strdup_printf ("byte offset %zu ", bad_off);
  g_assert_nonnull (strstr (err.msg, where));
  /* it stays failed, for next and for feed */
  PpError err2 = { 0 };
  g_assert_cmpint (pp_trace_reader_next (r, &it, &err2), ==, PP_EFORMAT);
  g_assert_cmpstr (err2.msg, ==, err.msg);
  g_assert_cmpint (pp_trace_reader_feed (r, data, 8, &err2), ==, PP_EFORMAT);
  pp_trace_reader_free (r);
  g_free (where);

  /* not a trace at all: known at the first byte */
  r = pp_trace_reader_new_stream (&err);
  g_assert_cmpint (pp_trace_reader_feed (r, "X", 1, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "magic"));
  pp_trace_reader_free (r);

  /* a frame claiming more than the maximum size fails at once, without
   * waiting for (and buffering) its bytes */
  r = pp_trace_reader_new_stream (&err);
  g_assert_cmpint (pp_trace_reader_feed (r, data, sizeof (PpTraceFileHeader), &err), ==, PP_OK);
  PpTraceFrameHeader h = { PP_TRACE_FRAME_MAX + 8, PP_TRACE_FRAME_SPANS, 0 };
  g_assert_cmpint (pp_trace_reader_feed (r, &h, sizeof h, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_reader_next (r, &it, &err), ==, PP_EFORMAT);
  g_assert_nonnull (strstr (err.msg, "maximum"));
  pp_trace_reader_free (r);

  /* a feeder that never reads is refused past one frame's worth */
  r = pp_trace_reader_new_stream (&err);
  gsize big = PP_TRACE_FRAME_MAX + 16;
  guint8 *zeros = g_malloc0 (big);
  g_assert_cmpint (pp_trace_reader_feed (r, zeros, big, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_reader_feed (r, zeros, 1, &err), ==, PP_EINVAL);
  g_assert_nonnull (strstr (err.msg, "unread"));
  g_free (zeros);
  pp_trace_reader_free (r);

  g_array_free (ends, TRUE);
  g_free (data);
}

/* A frame as big as the format allows crosses a stream in pieces. */
static void
test_stream_large (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  size_t n_big = PP_TRACE_PLAN_MAX_ACTIONS;
  PpTracePlanAction *plan = g_new0 (PpTracePlanAction, n_big);
  for (size_t i = 0; i < n_big; i++)
    plan[i] = (PpTracePlanAction) { PP_TRACE_ACT_B, 1, (int32_t) i, -1, -1, -1, 0, 0 };
  const PpTracePlanAction *plans[1] = { plan };
  char *path = fx_path (fx, "big.pptrace");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_cmpint (pp_trace_write_plan (w, 1, plans, &n_big, 0, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_dropped (w, 0, 9, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  guint8 *data;
  gsize len;
  g_assert_true (g_file_get_contents (path, (char **) &data, &len, NULL));
  g_assert_cmpuint (len, >, PP_TRACE_FRAME_MAX - 64);

  PpTraceReader *r = pp_trace_reader_new_stream (&err);
  PpTraceItem it;
  int plans_seen = 0, dropped_seen = 0;
  for (gsize off = 0; off < len; off += 1 << 20)
    {
      g_assert_cmpint (pp_trace_reader_feed (r, data + off, MIN ((gsize) 1 << 20, len - off), &err), ==, PP_OK);
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          if (it.type == PP_TRACE_ITEM_PLAN)
            {
              plans_seen++;
              g_assert_cmpuint (it.plan.n_actions, ==, n_big);
              g_assert_cmpint (it.plan.actions[n_big - 1].microbatch, ==, (int) n_big - 1);
            }
          dropped_seen += it.type == PP_TRACE_ITEM_DROPPED;
        }
      g_assert_cmpint (it.need_more, ==, 1);
    }
  pp_trace_reader_feed_end (r);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  g_assert_cmpint (it.truncated, ==, 0);
  g_assert_cmpint (plans_seen, ==, 1);
  g_assert_cmpint (dropped_seen, ==, 1);
  pp_trace_reader_free (r);
  g_free (data);
  g_free (path);
  g_free (plan);
}

/* Copies every item of src into a writer of byte order order; returns the
 * written file's bytes. */
static guint8 *
rewrite (Fixture *fx, const guint8 *src, gsize src_len, int order, gsize *len)
{
  PpError err = { 0 };
  char *path = fx_path (fx, "rewritten.pptrace");
  PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
  PpTraceReader *r = pp_trace_reader_new_memory (src, src_len, &err);
  PpTraceItem it;
  for (;;)
    {
      next_item (r, &it);
      if (it.type == PP_TRACE_ITEM_END)
        break;
      if (pp_trace_write_item (w, &it, &err) != PP_OK)
        g_error ("pp_trace_write_item: %s", err.msg);
    }
  g_assert_cmpint (pp_trace_write_item (w, &it, &err), ==, PP_EINVAL);   /* END */
  pp_trace_reader_free (r);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  guint8 *data;
  g_assert_true (g_file_get_contents (path, (char **) &data, len, NULL));
  g_free (path);
  return data;
}

static void
test_write_item (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  Sample s;
  sample_init (&s);
  const size_t n_many = 100000;
  PpSpan *many = many_spans (n_many);
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "orig.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      streaming_content (w, &s, many, n_many);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      guint8 *orig;
      gsize orig_len;
      g_assert_true (g_file_get_contents (path, (char **) &orig, &orig_len, NULL));
      char *want = memory_repr (orig, orig_len);

      /* identical items; offsets differ only where a buffer filled up at
       * another point, so they are left out */
      repr_offsets = FALSE;
      char *want_items = memory_repr (orig, orig_len);
      for (int to = PP_TRACE_LITTLE; to <= PP_TRACE_BIG; to++)
        {
          gsize len;
          guint8 *copy = rewrite (fx, orig, orig_len, to, &len);
          char *got = memory_repr (copy, len);
          assert_same_text (got, want_items);
          g_free (got);
          g_free (copy);
        }
      repr_offsets = TRUE;
      g_free (want_items);

      /* the sample alone (no buffer fills up) is copied byte for byte, its
       * span batches kept */
      gsize sample_len;
      guint8 *sample = sample_bytes (&s, order, fx, &sample_len);
      gsize len;
      guint8 *copy = rewrite (fx, sample, sample_len, order, &len);
      g_assert_cmpuint (len, ==, sample_len);
      g_assert_true (memcmp (copy, sample, len) == 0);
      g_free (copy);
      g_free (sample);
      g_free (want);
      g_free (orig);
      g_free (path);
    }
  g_free (many);

  /* one rank's plan keeps its rank; bad items are refused */
  PpError err = { 0 };
  char *path = fx_path (fx, "plan.pptrace");
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  PpTraceItem it = { .type = PP_TRACE_ITEM_PLAN };
  it.plan.rank = 5;
  it.plan.has_timeline = 1;
  it.plan.n_actions = s.plan_n[0];
  it.plan.actions = s.plan[0];
  g_assert_cmpint (pp_trace_write_item (w, &it, &err), ==, PP_OK);
  it.plan.rank = PP_TRACE_MAX_RANKS;
  g_assert_cmpint (pp_trace_write_item (w, &it, &err), ==, PP_EINVAL);
  it.plan.rank = 1;
  it.plan.actions = NULL;
  g_assert_cmpint (pp_trace_write_item (w, &it, &err), ==, PP_EINVAL);
  PpTraceItem bad = { .type = (PpTraceItemType) 99 };
  g_assert_cmpint (pp_trace_write_item (w, &bad, &err), ==, PP_EINVAL);
  bad = (PpTraceItem) { .type = PP_TRACE_ITEM_SPAN };
  bad.span.rank = -3;
  g_assert_cmpint (pp_trace_write_item (w, &bad, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_trace_write_item (NULL, &bad, &err), ==, PP_EINVAL);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_PLAN);
  g_assert_cmpint (it.plan.rank, ==, 5);
  g_assert_cmpint (it.plan.has_timeline, ==, 1);
  g_assert_cmpuint (it.plan.n_actions, ==, s.plan_n[0]);
  g_assert_true (it.plan.actions[1].planned_end == s.plan[0][1].planned_end);
  next_item (r, &it);
  g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
  pp_trace_reader_free (r);
  g_free (path);
}

/* Format 1.2: an overlapped F+B span keeps both halves, in either byte
 * order; a span of another kind, or a half that is not a backward one,
 * carries none; a 1.1 reader's view (the SUB bit ignored) is the span
 * without its half, since the compact slot of an EXT span is unused. */
static void
test_overlap_halves (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpSpan in[5];
  memset (in, 0, sizeof in);
  for (int i = 0; i < 5; i++)
    {
      in[i].start_ns = 1000 * (i + 1);
      in[i].end_ns = 1000 * (i + 1) + 500;
      in[i].rank = 1;
      in[i].stage = 2;
      in[i].microbatch = 7 + i;
      in[i].step = 3;
      in[i].kind = PP_SPAN_OVERLAP_F_B;
      in[i].device = 0xffff;
      in[i].peer_rank = -1;
    }
  in[0].sub_kind = PP_SPAN_B; in[0].sub_stage = 1; in[0].sub_microbatch = 4;
  in[1].sub_kind = PP_SPAN_I; in[1].sub_stage = 3; in[1].sub_microbatch = 0;
  /* in[2]: no half known */
  in[3].sub_kind = PP_SPAN_W; in[3].sub_stage = 1; in[3].sub_microbatch = 1;  /* not a backward half */
  in[4].kind = PP_SPAN_F; in[4].sub_kind = PP_SPAN_B; in[4].sub_stage = 1;    /* not an overlap */
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "overlap.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      g_assert_cmpint (pp_trace_write_spans (w, in, 5, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      int major = 0, minor = 0;
      PpTraceItem it;
      for (int i = 0; i < 5; i++)
        {
          next_item (r, &it);
          g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
          assert_span_equal (&it.span, &in[i]);
          g_assert_cmpint (pp_span_has_sub (&it.span), ==, i < 2);
          if (i < 2)
            {
              g_assert_cmpuint (it.span.sub_kind, ==, in[i].sub_kind);
              g_assert_cmpint (it.span.sub_stage, ==, in[i].sub_stage);
              g_assert_cmpint (it.span.sub_microbatch, ==, in[i].sub_microbatch);
            }
        }
      pp_trace_reader_get_version (r, &major, &minor);
      g_assert_cmpint (major, ==, 1);
      g_assert_cmpint (minor, >=, 2);
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_END);
      pp_trace_reader_free (r);

      /* As a 1.1 reader sees it: the bit cleared, the same span, no half. */
      gchar *data = NULL;
      gsize len = 0;
      g_assert_true (g_file_get_contents (path, &data, &len, NULL));
      guint8 *slot0 = (guint8 *) data + sizeof (PpTraceFileHeader) + sizeof (PpTraceFrameSpans);
      g_assert_cmpuint (slot0[39] & PP_TRACE_SPAN_SUB, !=, 0);
      slot0[39] &= (guint8) ~PP_TRACE_SPAN_SUB;
      r = pp_trace_reader_new_memory (data, len, &err);
      next_item (r, &it);
      assert_span_equal (&it.span, &in[0]);
      g_assert_false (pp_span_has_sub (&it.span));
      pp_trace_reader_free (r);
      g_free (data);
      g_free (path);
    }
}

/* 1.3: the header's job id, in either byte order, fixed once the header is
 * out; a file before 1.3 has none, whatever its reserved bytes hold; the
 * writer's lock says a file is being written, and goes with the writer. */
static void
test_job_id (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  const uint64_t id = 0x0123456789abcdefull;
  PpTraceDescription d = { .schedule = "1F1B", .n_ranks = 2, .n_microbatches = 4, .n_virtual = 1 };
  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "job.pptrace");
      PpError err = { 0 };
      uint64_t got = 1;
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      g_assert_nonnull (w);
      g_assert_cmpint (pp_trace_file_in_use (path), ==, 1);
      g_assert_cmpint (pp_trace_writer_set_job_id (w, id, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_set_job_id (w, 7, &err), ==, PP_EINVAL);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_file_in_use (path), ==, 0);
      g_assert_cmpint (pp_trace_file_job_id (path, &got, &err), ==, PP_OK);
      g_assert_cmphex (got, ==, id);

      /* the same bytes as a 1.2 file: the field was reserved then */
      gchar *data = NULL;
      gsize len = 0;
      g_assert_true (g_file_get_contents (path, &data, &len, NULL));
      uint16_t minor = order == PP_TRACE_LITTLE ? GUINT16_TO_LE (2) : GUINT16_TO_BE (2);
      memcpy (data + offsetof (PpTraceFileHeader, version_minor), &minor, 2);
      g_assert_true (g_file_set_contents (path, data, (gssize) len, NULL));
      g_assert_cmpint (pp_trace_file_job_id (path, &got, &err), ==, PP_OK);
      g_assert_cmphex (got, ==, 0);
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      PpTraceItem it;
      next_item (r, &it);
      g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_DESCRIPTION);
      g_assert_cmphex (pp_trace_reader_get_job_id (r), ==, 0);
      pp_trace_reader_free (r);
      g_free (data);

      /* no header, no id: one line naming the file */
      g_assert_true (g_file_set_contents (path, "", 0, NULL));
      g_assert_cmpint (pp_trace_file_job_id (path, &got, &err), ==, PP_EFORMAT);
      g_assert_nonnull (strstr (err.msg, path));
      g_assert_null (strchr (err.msg, '\n'));
      g_free (path);
    }
}


/* Format 1.10's OPEN frame: what a process is doing now.  Every field
 * round-trips in both byte orders and through write_item; the same bytes
 * said to be 1.9 read as a 1.9 reader reads them (the frame skipped, what
 * is around it kept); a bad kind or rank is refused by the writer. */
static void
test_open (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpTraceOpen open = { .time_ns = 5000000000LL, .start_ns = 1000000000LL, .rank = 1, .step = 2,
                       .stage = 1, .microbatch = 3, .peer_rank = 0, .kind = PP_SPAN_RECV_F,
                       .flags = 0, .where = "train.py:88 forward" };
  PpTraceOpen none = { .time_ns = 6000000000LL, .rank = 1, .step = -1, .stage = -1,
                       .microbatch = -1, .peer_rank = -1, .kind = -1, .flags = PP_TRACE_OPEN_CLOSED };
  PpSpan span = { .start_ns = 100, .end_ns = 200, .rank = 1, .stage = 1, .kind = PP_SPAN_F, .peer_rank = -1 };

  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "open.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      g_assert_nonnull (w);
      PpTraceOpen bad = open;
      bad.kind = -2;
      g_assert_cmpint (pp_trace_write_open (w, &bad, &err), ==, PP_EINVAL);
      bad = open;
      bad.rank = -1;
      g_assert_cmpint (pp_trace_write_open (w, &bad, &err), ==, PP_EINVAL);
      g_assert_cmpint (pp_trace_write_spans (w, &span, 1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_open (w, &open, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_open (w, &none, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_spans (w, &span, 1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      PpTraceItem it;
      int n_open = 0, n_span = 0;
      GString *orig = g_string_new (NULL), *again = g_string_new (NULL);
      char *copy = fx_path (fx, "open-copy.pptrace");
      PpTraceWriter *cw = pp_trace_writer_new_path (copy, PP_TRACE_NATIVE, &err);
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          if (it.type == PP_TRACE_ITEM_OPEN)
            {
              const PpTraceOpen *o = &it.open, *want = n_open == 0 ? &open : &none;
              g_assert_cmpint (o->time_ns, ==, want->time_ns);
              g_assert_cmpint (o->start_ns, ==, want->start_ns);
              g_assert_cmpint (o->rank, ==, want->rank);
              g_assert_cmpint (o->step, ==, want->step);
              g_assert_cmpint (o->stage, ==, want->stage);
              g_assert_cmpint (o->microbatch, ==, want->microbatch);
              g_assert_cmpint (o->peer_rank, ==, want->peer_rank);
              g_assert_cmpint (o->kind, ==, want->kind);
              g_assert_cmpuint (o->flags, ==, want->flags);
              g_assert_cmpstr (o->where, ==, want->where);
              n_open++;
            }
          n_span += it.type == PP_TRACE_ITEM_SPAN;
          repr_offsets = FALSE;
          item_repr (orig, &it);
          repr_offsets = TRUE;
          g_assert_cmpint (pp_trace_write_item (cw, &it, &err), ==, PP_OK);
        }
      g_assert_cmpint (n_open, ==, 2);
      g_assert_cmpint (n_span, ==, 2);
      pp_trace_reader_free (r);
      g_assert_cmpint (pp_trace_writer_close (cw, &err), ==, PP_OK);
      r = pp_trace_reader_new_path (copy, &err);
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          repr_offsets = FALSE;
          item_repr (again, &it);
          repr_offsets = TRUE;
        }
      pp_trace_reader_free (r);
      assert_same_text (again->str, orig->str);
      g_string_free (again, TRUE);
      g_string_free (orig, TRUE);

      /* a 1.9 reader's view: the OPEN frames skipped, both spans kept */
      gchar *data = NULL;
      gsize len = 0;
      g_assert_true (g_file_get_contents (path, &data, &len, NULL));
      uint16_t v = order == PP_TRACE_LITTLE ? GUINT16_TO_LE (9) : GUINT16_TO_BE (9);
      memcpy (data + offsetof (PpTraceFileHeader, version_minor), &v, 2);
      r = pp_trace_reader_new_memory (data, len, &err);
      n_span = 0;
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          g_assert_cmpint (it.type, ==, PP_TRACE_ITEM_SPAN);
          n_span++;
        }
      g_assert_cmpint (n_span, ==, 2);
      g_assert_false (it.truncated);
      pp_trace_reader_free (r);
      g_free (data);
      g_free (copy);
      g_free (path);
    }
}

/* 1.4: a PROCESS frame and the process in every frame header after it,
 * in either byte order; a copy through write_item keeps who wrote what;
 * the same bytes said to be 1.3 read as a 1.3 reader reads them (the
 * PROCESS frame skipped as unknown, every process -1); a place outside
 * its mesh is refused by the writer and by the reader. */
static void
test_process (Fixture *fx, gconstpointer unused)
{
  (void) unused;
  PpTraceDescription d = { .schedule = "1F1B", .n_ranks = 2, .n_microbatches = 4, .n_virtual = 1 };
  PpTraceProcess place = { .process = 3, .rank = 1, .coord = { 1, 1, 0, 0, 0 },
                           .size = { 2, 2, 1, 1, 1 }, .pid = 4242, .host = "node-7" };
  PpSpan span = { .start_ns = 100, .end_ns = 200, .rank = 1, .stage = 1, .microbatch = 0,
                  .kind = PP_SPAN_F, .peer_rank = -1 };
  PpCounter counter = { .time_ns = 150, .value = 2.5, .rank = 1, .kind = PP_COUNTER_LOSS };
  /* type and process of each item, in order */
  const int want_type[] = { PP_TRACE_ITEM_DESCRIPTION, PP_TRACE_ITEM_RANK, PP_TRACE_ITEM_PROCESS,
                            PP_TRACE_ITEM_SPAN, PP_TRACE_ITEM_SPAN, PP_TRACE_ITEM_STEP_MARKER,
                            PP_TRACE_ITEM_COUNTER, PP_TRACE_ITEM_SPAN };
  const int want_process[] = { -1, -1, 3, 3, 3, 3, 3, -1 };
  const int n_want = G_N_ELEMENTS (want_type);

  for (int order = PP_TRACE_LITTLE; order <= PP_TRACE_BIG; order++)
    {
      char *path = fx_path (fx, "process.pptrace");
      char *copy = fx_path (fx, "copy.pptrace");
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, order, &err);
      g_assert_nonnull (w);
      g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_rank (w, 1, 4242, "node-7", &err), ==, PP_OK);
      /* refused: a coordinate outside its size, pp not the rank, a process
       * the header cannot carry */
      PpTraceProcess bad = place;
      bad.coord[PP_TRACE_MESH_DP] = 2;
      g_assert_cmpint (pp_trace_write_process (w, &bad, &err), ==, PP_EINVAL);
      g_assert_nonnull (strstr (err.msg, "dp 2 of size 2"));
      g_assert_null (strchr (err.msg, '\n'));
      bad = place;
      bad.coord[PP_TRACE_MESH_PP] = 0;
      g_assert_cmpint (pp_trace_write_process (w, &bad, &err), ==, PP_EINVAL);
      bad = place;
      bad.process = PP_TRACE_MAX_PROCESSES;
      g_assert_cmpint (pp_trace_write_process (w, &bad, &err), ==, PP_EINVAL);
      g_assert_cmpint (pp_trace_writer_set_process (w, PP_TRACE_MAX_PROCESSES, &err), ==, PP_EINVAL);
      g_assert_cmpint (pp_trace_writer_set_process (w, -2, &err), ==, PP_EINVAL);

      g_assert_cmpint (pp_trace_writer_set_process (w, place.process, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_process (w, &place, &err), ==, PP_OK);
      PpSpan two[2] = { span, span };
      two[1].kind = PP_SPAN_B;
      two[1].rank = 40000;     /* the extension slot: tagged all the same */
      g_assert_cmpint (pp_trace_write_spans (w, two, 2, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_step_marker (w, 1, 0, PP_TRACE_STEP_END, 300, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_counter (w, &counter, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_set_process (w, -1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_write_spans (w, &span, 1, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

      /* read: every item says its process; the place is whole */
      PpTraceReader *r = pp_trace_reader_new_path (path, &err);
      PpTraceWriter *cw = pp_trace_writer_new_path (copy, PP_TRACE_NATIVE, &err);
      g_assert_nonnull (r);
      g_assert_nonnull (cw);
      GString *orig = g_string_new (NULL);
      PpTraceItem it;
      int n = 0;
      for (;; n++)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          g_assert_cmpint (n, <, n_want);
          g_assert_cmpint (it.type, ==, want_type[n]);
          g_assert_cmpint (it.process, ==, want_process[n]);
          if (it.type == PP_TRACE_ITEM_PROCESS)
            {
              const PpTraceProcess *p = &it.process_info;
              g_assert_cmpint (p->process, ==, 3);
              g_assert_cmpint (p->rank, ==, 1);
              for (int k = 0; k < PP_TRACE_MESH_DIMS; k++)
                {
                  g_assert_cmpint (p->coord[k], ==, place.coord[k]);
                  g_assert_cmpint (p->size[k], ==, place.size[k]);
                }
              g_assert_cmpint (p->pid, ==, 4242);
              g_assert_cmpstr (p->host, ==, "node-7");
            }
          repr_offsets = FALSE;
          item_repr (orig, &it);
          repr_offsets = TRUE;
          g_assert_cmpint (pp_trace_write_item (cw, &it, &err), ==, PP_OK);
        }
      g_assert_cmpint (n, ==, n_want);
      int major = 0, minor = 0;
      pp_trace_reader_get_version (r, &major, &minor);
      g_assert_cmpint (minor, >=, 4);
      pp_trace_reader_free (r);
      g_assert_cmpint (pp_trace_writer_close (cw, &err), ==, PP_OK);

      /* the copy says the same, processes included */
      GString *again = g_string_new (NULL);
      r = pp_trace_reader_new_path (copy, &err);
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          repr_offsets = FALSE;
          item_repr (again, &it);
          repr_offsets = TRUE;
        }
      pp_trace_reader_free (r);
      assert_same_text (again->str, orig->str);
      g_string_free (again, TRUE);
      g_string_free (orig, TRUE);

      /* a 1.3 reader's view: the same bytes said to be 1.3 */
      gchar *data = NULL;
      gsize len = 0;
      g_assert_true (g_file_get_contents (path, &data, &len, NULL));
      uint16_t v = order == PP_TRACE_LITTLE ? GUINT16_TO_LE (3) : GUINT16_TO_BE (3);
      memcpy (data + offsetof (PpTraceFileHeader, version_minor), &v, 2);
      r = pp_trace_reader_new_memory (data, len, &err);
      int spans = 0, others = 0;
      for (;;)
        {
          next_item (r, &it);
          if (it.type == PP_TRACE_ITEM_END)
            break;
          g_assert_cmpint (it.type, !=, PP_TRACE_ITEM_PROCESS);
          g_assert_cmpint (it.process, ==, -1);
          if (it.type == PP_TRACE_ITEM_SPAN)
            spans++;
          else
            others++;
        }
      g_assert_cmpint (spans, ==, 3);
      g_assert_cmpint (others, ==, 4);   /* description, rank, marker, counter */
      g_assert_false (it.truncated);
      pp_trace_reader_free (r);

      /* a PROCESS frame whose place is outside its mesh is malformed */
      v = order == PP_TRACE_LITTLE ? GUINT16_TO_LE (4) : GUINT16_TO_BE (4);
      memcpy (data + offsetof (PpTraceFileHeader, version_minor), &v, 2);
      size_t at = sizeof (PpTraceFileHeader) + sizeof (PpTraceFrameDescription) + sizeof (PpTraceFrameRank);
      g_assert_cmpuint (data[at + 4] | data[at + 5], ==, PP_TRACE_FRAME_PROCESS);
      int32_t big = order == PP_TRACE_LITTLE ? (int32_t) GUINT32_TO_LE (9) : (int32_t) GUINT32_TO_BE (9);
      memcpy (data + at + offsetof (PpTraceFrameProcess, coord) + 4 * PP_TRACE_MESH_TP, &big, 4);
      r = pp_trace_reader_new_memory (data, len, &err);
      PpStatus st = PP_OK;
      while ((st = pp_trace_reader_next (r, &it, &err)) == PP_OK && it.type != PP_TRACE_ITEM_END)
        ;
      g_assert_cmpint (st, ==, PP_EFORMAT);
      g_assert_nonnull (strstr (err.msg, "PROCESS"));
      g_assert_nonnull (strstr (err.msg, "tp 9 of size 1"));
      pp_trace_reader_free (r);
      g_free (data);
      g_free (copy);
      g_free (path);
    }
}

void
test_trace_stream_register (void)
{
#define ADD(name, fn) g_test_add ("/trace/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("overlap-halves", test_overlap_halves);
  ADD ("callback-writer", test_callback_writer);
  ADD ("stream-reader", test_stream_reader);
  ADD ("stream-malformed", test_stream_malformed);
  ADD ("stream-large", test_stream_large);
  ADD ("write-item", test_write_item);
  ADD ("job-id", test_job_id);
  ADD ("process", test_process);
  ADD ("open", test_open);
#undef ADD
}
