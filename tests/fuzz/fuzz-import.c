/* fuzz-import.c — libFuzzer target: the torch.profiler importer over any
 * bytes (import/pp-import.h).
 *
 * The input is one trace or many: split at every SEP, four bytes never in
 * JSON text and as good as never in a gzip (a single 0xff, as it was, is
 * in most gzips and cut them all), so that ranks are put together and one
 * rank's files merged, as import does with a job's files, under one
 * budget for them all (up to PP_IMPORT_MAX_FILES + 1 of them, the one past
 * it refused); gzip'd inputs are gunzipped as the importer would.  The JSON
 * reader sees it first on its own (every node touched), then the whole
 * importer writes into a memory trace, which the trace reader must read
 * back without error: what import writes is always a valid trace. */
#define _GNU_SOURCE   /* memmem */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp-import.h"
#include "pp-json.h"
#include "pp-trace.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define SEP "\xff\xfe\xfd\xfc"

typedef struct {
  unsigned char *buf;
  size_t         len, cap;
} Sink;

static int
sink_write (void *user, const void *data, size_t size)
{
  Sink *s = user;
  if (s->len + size > s->cap)
    {
      size_t nc = (s->len + size) * 2;
      unsigned char *g = realloc (s->buf, nc);
      if (g == NULL)
        return -1;
      s->buf = g;
      s->cap = nc;
    }
  memcpy (s->buf + s->len, data, size);
  s->len += size;
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  PpError err = { 0 };
  PpJsonDoc doc;
  if (pp_json_parse ((const char *) data, size, PP_IMPORT_BYTES_PER_VALUE, PP_IMPORT_MAX_MEMORY, &doc, &err) == PP_OK)
    {
      char buf[64];
      int64_t v;
      for (uint32_t i = 0; i < doc.n_nodes; i++)
        {
          (void) pp_json_string (&doc, i, buf, sizeof buf);
          (void) pp_json_scaled (&doc, i, 3, &v);
          (void) pp_json_get (&doc, i, "traceEvents");
        }
      pp_json_doc_clear (&doc);
    }
  /* the same text read as the import reads it: traceEvents an event at a time */
  size_t at;
  if (pp_json_parse_outer ((const char *) data, size, PP_IMPORT_BYTES_PER_VALUE, PP_IMPORT_MAX_MEMORY,
                           "traceEvents", &doc, &at, &err) == PP_OK)
    {
      pp_json_doc_clear (&doc);
      PpJsonElements it;
      PpJsonDoc e = { 0 };
      bool got;
      pp_json_elements_init (&it, (const char *) data, size, at);
      while (at != SIZE_MAX && pp_json_elements_next (&it, PP_IMPORT_MAX_EVENT, &e, &got, &err) == PP_OK && got)
        for (uint32_t i = 0; i < e.n_nodes; i++)
          (void) pp_json_get (&e, i, "ph");
      pp_json_doc_clear (&e);
    }

  static PpImportInput in[PP_IMPORT_MAX_FILES + 1];
  static const char *const names[] = { "rank-a.json", "rank-b.json", "rank-c.json", "rank-d.json" };
  size_t n = 0;
  for (const uint8_t *p = data, *end = data + size; n <= PP_IMPORT_MAX_FILES; n++)
    {
      const uint8_t *cut = memmem (p, (size_t) (end - p), SEP, 4);
      in[n] = (PpImportInput) { names[n % 4], p, cut ? (size_t) (cut - p) : (size_t) (end - p) };
      if (cut == NULL)
        {
          n++;
          break;
        }
      p = cut + 4;
    }
  Sink sink = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_callback (sink_write, &sink, PP_TRACE_NATIVE, &err);
  if (w == NULL)
    return 0;
  PpImportSummary sum;
  PpStatus st = pp_import_kineto (in, n, w, &sum, &err);
  if (st != PP_OK && (err.msg[0] == '\0' || strchr (err.msg, '\n') != NULL))
    abort ();   /* a refusal is one line that says why */
  if (pp_trace_writer_close (w, &err) != PP_OK)
    st = PP_EIO;
  if (st == PP_OK)
    {
      PpTraceReader *r = pp_trace_reader_new_memory (sink.buf, sink.len, &err);
      PpTraceItem it;
      if (r == NULL)
        abort ();
      for (;;)
        {
          if (pp_trace_reader_next (r, &it, &err) != PP_OK)
            abort ();   /* import wrote a trace its own reader refuses */
          if (it.type == PP_TRACE_ITEM_END)
            break;
        }
      pp_trace_reader_free (r);
    }
  free (sink.buf);
  return 0;
}
