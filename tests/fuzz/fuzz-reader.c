/* fuzz-reader.c — libFuzzer target: the trace readers over any bytes.
 *
 * The memory reader reads the input whole; the stream reader gets it in
 * pieces whose sizes come from the input's first byte, as a socket would
 * deliver them.  Both must end (END or an error), never read outside the
 * input, and never allocate more than a frame's worth. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pp-trace.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
drain (PpTraceReader *r)
{
  PpTraceItem item;
  PpError err = { 0 };
  for (;;)
    {
      if (pp_trace_reader_next (r, &item, &err) != PP_OK)
        return;
      if (item.type == PP_TRACE_ITEM_END)
        return;
      if (item.type == PP_TRACE_ITEM_PLAN && item.plan.n_actions > 0)
        {
          /* touch what the item points at: out of bounds is a finding */
          volatile int32_t k = item.plan.actions[item.plan.n_actions - 1].kind;
          (void) k;
        }
      else if (item.type == PP_TRACE_ITEM_STRING)
        {
          volatile size_t n = strlen (item.string.name);
          (void) n;
        }
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_memory (data, size, &err);
  if (r != NULL)
    {
      drain (r);
      pp_trace_reader_free (r);
    }

  r = pp_trace_reader_new_stream (&err);
  if (r != NULL)
    {
      size_t piece = size > 0 ? (size_t) data[0] % 97 + 1 : 1;
      PpTraceItem item;
      int failed = 0;
      for (size_t off = 0; off < size && !failed; off += piece)
        {
          size_t n = size - off < piece ? size - off : piece;
          if (pp_trace_reader_feed (r, data + off, n, &err) != PP_OK)
            break;
          for (;;)
            {
              if (pp_trace_reader_next (r, &item, &err) != PP_OK)
                {
                  failed = 1;
                  break;
                }
              if (item.type == PP_TRACE_ITEM_END)
                break;
            }
        }
      pp_trace_reader_feed_end (r);
      if (!failed)
        drain (r);
      pp_trace_reader_free (r);
    }
  return 0;
}
