/* pp-synth-hostile-mesh.c — the crafted traces of issue 40's mesh findings,
 * each a small valid GPipe run (M 2, 2 steps) with one thing a hostile
 * file may hold, for test-hostile-mesh.py and the fuzz seeds.
 *
 * Usage: pp-synth-hostile-mesh KIND PATH
 *   strings     P 2, one process a rank: the description's host, model and
 *               command, each RANK and PROCESS frame's host hold bytes that
 *               are not UTF-8, ESC sequences, newlines, quotes, '<', '&'
 *               (finding 9)
 *   same-place  P 1, processes 0 and 1 both at pp 0 dp 0 of dp 2, each
 *               with its own spans (finding 11)
 *   wide        P 1, five processes, each place sound alone (one size of
 *               65,535 in dp, tp, cp or ep), whose largest sizes together
 *               make a mesh of 65,535^4 processes (finding 6)
 *   huge        P 1, one process whose own place says dp, tp, cp and ep of
 *               65,535 (the writer refuses it: its frame is patched after)
 *               (finding 6)
 *   sparse      P 2, the processes of replicas dp 4 and 5 of 8 only (what
 *               one node of a multi-node job holds) (finding 7)
 *   counter-max P 1, one process, and a counter (loss, rank 0) at
 *               INT64_MAX ns and one at INT64_MIN (finding 8)
 *   names       P 1, one process: the schedule's name and each span's
 *               recorded name hold the bytes of strings (finding 9, the
 *               names info and the analysis's messages print)
 *   many [N]    InterleavedZeroBubble P 2, M 8192, V 4 (a plan of
 *               65,536 actions a rank to build), N (11,000) replicas of
 *               one process each: process d at pp 0 dp d of N, one step of
 *               a forward and a backward each (finding 2)
 *   new-kind    P 1, one process, each step with a span of kind 29 and a
 *               counter of kind 14 (kinds newer than this reader)
 *               (finding 8)
 * A test tool, not installed. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace.h"
#include "pp-trace-format.h"

static int many_n = 11000;

#define HOSTILE "\x1b[2J\x1b]0;owned\x07\xff\xfe\xc3\x28 \"q\" <b>&amp;\n\rline2\t\xe2\x82"

static int
die (const char *path, const PpError *err)
{
  fprintf (stderr, "pp-synth-hostile-mesh: %s: %s\n", path, err->msg);
  return 1;
}

/* Process g (rank r, at place) writes its RANK and PROCESS frames, its
 * plan and 2 steps of GPipe (M 2), shifted by g x 10 us. */
static int
write_process (PpTraceWriter *w, const PpTraceProcess *place, PpError *err)
{
  int r = place->rank, g = place->process;
  PpTracePlanAction plan[4];
  for (int i = 0; i < 4; i++)
    plan[i] = (PpTracePlanAction) { .kind = i < 2 ? PP_TRACE_ACT_F : PP_TRACE_ACT_B, .stage = r,
                                    .microbatch = i % 2, .sub_kind = -1, .sub_stage = -1,
                                    .sub_microbatch = -1 };
  if (pp_trace_writer_set_process (w, g, err) != PP_OK
      || pp_trace_write_rank (w, r, place->pid, place->host, err) != PP_OK
      || pp_trace_write_process (w, place, err) != PP_OK
      || pp_trace_write_rank_plan (w, r, plan, 4, 0, err) != PP_OK)
    return -1;
  for (int s = 0; s < 2; s++)
    {
      int64_t t0 = 1000000000 + (int64_t) s * 20000000 + (int64_t) g * 10000 + (int64_t) r * 1000000;
      PpSpan spans[4];
      for (int i = 0; i < 4; i++)
        spans[i] = (PpSpan) { .start_ns = t0 + i * 1000000, .end_ns = t0 + i * 1000000 + 900000, .rank = r,
                              .stage = r, .microbatch = i % 2, .step = s,
                              .kind = (uint16_t) (i < 2 ? PP_SPAN_F : PP_SPAN_B), .device = 0xffff,
                              .peer_rank = -1 };
      if (pp_trace_write_step_marker (w, r, s, PP_TRACE_STEP_BEGIN, t0, err) != PP_OK
          || pp_trace_write_spans (w, spans, 4, err) != PP_OK
          || pp_trace_write_step_marker (w, r, s, PP_TRACE_STEP_END, t0 + 4000000, err) != PP_OK)
        return -1;
    }
  return 0;
}

/* The PROCESS frame of the file at path gets dp, tp, cp and ep sizes of
 * 65,535: found by walking the frames from the header. */
static int
patch_huge (const char *path)
{
  FILE *f = fopen (path, "r+b");
  PpTraceFileHeader h;
  if (f == NULL || fread (&h, sizeof h, 1, f) != 1)
    return -1;
  long off = (long) h.header_size;
  PpTraceFrameHeader fh;
  while (fseek (f, off, SEEK_SET) == 0 && fread (&fh, sizeof fh, 1, f) == 1 && fh.size >= sizeof fh)
    {
      if (fh.type == PP_TRACE_FRAME_PROCESS)
        {
          int32_t size[5] = { 1, 65535, 65535, 65535, 65535 };
          if (fseek (f, off + (long) offsetof (PpTraceFrameProcess, size), SEEK_SET) != 0
              || fwrite (size, sizeof size, 1, f) != 1)
            break;
          return fclose (f) == 0 ? 0 : -1;
        }
      off += (long) fh.size;
    }
  fclose (f);
  return -1;
}

/* N processes, each a replica of one process at pp 0: one step of F and
 * B of micro-batch 0 (stage 0), 10 us later a replica. */
static int
write_many (PpTraceWriter *w, int n, PpError *err)
{
  for (int d = 0; d < n; d++)
    {
      /* pp 2 x dp N where the format holds it (65,535 processes at most) */
      PpTraceProcess p = { .process = d, .rank = 0, .coord = { 0, d, 0, 0, 0 },
                           .size = { 2 * n <= 65535 ? 2 : 1, n, 1, 1, 1 }, .pid = 1000 + d };
      snprintf (p.host, sizeof p.host, "node%d", d / 8);
      int64_t t0 = 1000000000 + (int64_t) d * 10000;
      PpSpan sp[2] = { { .start_ns = t0, .end_ns = t0 + 1000000, .rank = 0, .stage = 0, .microbatch = 0,
                         .step = 0, .kind = PP_SPAN_F, .device = 0xffff, .peer_rank = -1 },
                       { .start_ns = t0 + 1000000, .end_ns = t0 + 3000000, .rank = 0, .stage = 0,
                         .microbatch = 0, .step = 0, .kind = PP_SPAN_B, .device = 0xffff, .peer_rank = -1 } };
      if (pp_trace_writer_set_process (w, d, err) != PP_OK || pp_trace_write_process (w, &p, err) != PP_OK
          || pp_trace_write_step_marker (w, 0, 0, PP_TRACE_STEP_BEGIN, t0, err) != PP_OK
          || pp_trace_write_spans (w, sp, 2, err) != PP_OK
          || pp_trace_write_step_marker (w, 0, 0, PP_TRACE_STEP_END, t0 + 3000000, err) != PP_OK)
        return -1;
    }
  return pp_trace_writer_set_process (w, -1, err) == PP_OK ? 0 : -1;
}

int
main (int argc, char **argv)
{
  if (argc == 4 && strcmp (argv[1], "many") == 0)
    {
      int n = atoi (argv[3]);
      if (n < 1 || n > 65535)
        {
          fprintf (stderr, "pp-synth-hostile-mesh: many: N from 1 to 65535\n");
          return 2;
        }
      argc = 3;
      many_n = n;
    }
  if (argc != 3)
    {
      fprintf (stderr, "usage: pp-synth-hostile-mesh strings|same-place|wide|huge|sparse|counter-max|new-kind PATH | many PATH [N]\n");
      return 2;
    }
  const char *kind = argv[1], *path = argv[2];
  int strings = strcmp (kind, "strings") == 0, same = strcmp (kind, "same-place") == 0;
  int wide = strcmp (kind, "wide") == 0, huge = strcmp (kind, "huge") == 0;
  int sparse = strcmp (kind, "sparse") == 0, cmax = strcmp (kind, "counter-max") == 0;
  int newer = strcmp (kind, "new-kind") == 0, many = strcmp (kind, "many") == 0;
  int names = strcmp (kind, "names") == 0;
  if (!strings && !same && !wide && !huge && !sparse && !cmax && !newer && !many && !names)
    {
      fprintf (stderr, "pp-synth-hostile-mesh: unknown kind '%s'\n", kind);
      return 2;
    }
  int P = strings || sparse || many ? 2 : 1;
  PpTraceDescription desc = { .n_ranks = P, .n_microbatches = many ? 8192 : 2, .n_virtual = many ? 4 : 1,
                              .start_unix_ns = 1700000000000000000LL, .start_monotonic_ns = 1000000000 };
  snprintf (desc.schedule, sizeof desc.schedule, "%s", many ? "InterleavedZeroBubble" : names ? "GPipe" HOSTILE : "GPipe");
  snprintf (desc.backend, sizeof desc.backend, "cpu");
  snprintf (desc.host, sizeof desc.host, "%s", strings ? "host" HOSTILE : "synth");
  snprintf (desc.model, sizeof desc.model, "%s", strings ? "model" HOSTILE : "issue 40");
  snprintf (desc.cmdline, sizeof desc.cmdline, "%s", strings ? "python train.py" HOSTILE : "pp-synth-hostile-mesh");

  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  if (w == NULL || pp_trace_write_description (w, &desc, &err) != PP_OK)
    return die (path, &err);
  PpTraceProcess places[5];
  int n = 0;
  if (many)
    {
      if (write_many (w, many_n, &err) != 0 || pp_trace_writer_close (w, &err) != PP_OK)
        return die (path, &err);
      return 0;
    }
  if (strings)
    for (int r = 0; r < 2; r++)
      places[n++] = (PpTraceProcess) { .process = r, .rank = r, .coord = { r, 0, 0, 0, 0 },
                                       .size = { 2, 1, 1, 1, 1 }, .pid = 100 + r };
  else if (sparse)
    for (int d = 4; d < 6; d++)
      for (int r = 0; r < 2; r++)
        {
          /* global rank G = pp x 8 + dp (torchtitan's layout) */
          int g = r * 8 + d;
          places[n++] = (PpTraceProcess) { .process = g, .rank = r, .coord = { r, d, 0, 0, 0 },
                                           .size = { 2, 8, 1, 1, 1 }, .pid = 100 + g };
        }
  else if (same)
    for (int g = 0; g < 2; g++)
      places[n++] = (PpTraceProcess) { .process = g, .rank = 0, .coord = { 0, 0, 0, 0, 0 },
                                       .size = { 1, 2, 1, 1, 1 }, .pid = 100 + g };
  else if (wide)
    for (int d = 0; d < 5; d++)
      {
        /* process d: coordinate 1 of a size of 65,535 in dimension d (dp
         * again for the fifth), the others 0 of 1 */
        int dim = d < 4 ? d + 1 : 1;
        places[n] = (PpTraceProcess) { .process = d, .rank = 0, .coord = { 0, 0, 0, 0, 0 },
                                       .size = { 1, 1, 1, 1, 1 }, .pid = 100 + d };
        places[n].size[dim] = 65535;
        places[n].coord[dim] = d < 4 ? 1 : 2;
        n++;
      }
  else
    places[n++] = (PpTraceProcess) { .process = 0, .rank = 0, .coord = { 0, 0, 0, 0, 0 },
                                     .size = { 1, 2, 1, 1, 1 }, .pid = 100 };
  for (int i = 0; i < n; i++)
    {
      snprintf (places[i].host, sizeof places[i].host, "%s", strings ? "node" HOSTILE : "node0");
      if (write_process (w, &places[i], &err) != 0)
        return die (path, &err);
    }
  if (cmax)
    {
      PpCounter c[2] = { { .time_ns = INT64_MAX, .value = 1.5, .rank = 0, .step = 1, .kind = PP_COUNTER_LOSS },
                         { .time_ns = INT64_MIN, .value = 2.5, .rank = 0, .step = 0, .kind = PP_COUNTER_LOSS } };
      if (pp_trace_write_counter (w, &c[0], &err) != PP_OK || pp_trace_write_counter (w, &c[1], &err) != PP_OK)
        return die (path, &err);
    }
  if (names)
    {
      PpSpan sp = { .start_ns = 1000000000 + 2000000, .end_ns = 1000000000 + 2500000, .rank = 0, .stage = 0,
                    .microbatch = 0, .step = 0, .kind = PP_SPAN_KERNEL, .device = 0, .peer_rank = -1,
                    .name_id = 1 };
      if (pp_trace_write_string (w, 1, "kernel" HOSTILE, &err) != PP_OK
          || pp_trace_writer_set_process (w, 0, &err) != PP_OK || pp_trace_write_spans (w, &sp, 1, &err) != PP_OK)
        return die (path, &err);
    }
  for (int s = 0; newer && s < 2; s++)
    {
      int64_t t0 = 1000000000 + (int64_t) s * 20000000 + 5000000;
      PpSpan sp = { .start_ns = t0, .end_ns = t0 + 100000, .rank = 0, .stage = 0, .microbatch = -1,
                    .step = s, .kind = 29, .device = 0xffff, .peer_rank = -1 };
      PpCounter c = { .time_ns = t0, .value = 7.0 + s, .rank = 0, .step = s, .kind = 14 };
      if (pp_trace_writer_set_process (w, 0, &err) != PP_OK || pp_trace_write_spans (w, &sp, 1, &err) != PP_OK
          || pp_trace_write_counter (w, &c, &err) != PP_OK)
        return die (path, &err);
    }
  if (pp_trace_writer_close (w, &err) != PP_OK)
    return die (path, &err);
  if (huge && patch_huge (path) != 0)
    {
      fprintf (stderr, "pp-synth-hostile-mesh: %s: no PROCESS frame to patch\n", path);
      return 1;
    }
  return 0;
}
