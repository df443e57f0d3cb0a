/* hostile-traces.c — see hostile-traces.h. */
#include "hostile-traces.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pp-trace.h"

const PpHostileTrace pp_hostile_traces[] = {
  { "step-max", 1, 0 },        /* one span with step 2^31 - 1 */
  { "step-3e8", 1, 0 },        /* one span with step 3e8 */
  { "rank-65535", 1, 0 },      /* DROPPED and COUNTER frames of rank 65535 */
  { "m-2e24", 1, 0 },          /* a DESCRIPTION with M = 2^24 */
  { "span-9e18", 1, 0 },       /* a span from -9e18 to 9e18 ns */
  { "plan-far", 1, 0 },        /* a plan action at -9.3e9 s */
  { "loss-far", 1, 0 },        /* a loss counter at step 2^31 - 1 and step markers there */
  { "markers-5000", 0, 0 },    /* 5,000 step markers in decreasing time order */
  { "ranks-4096", 0, 0 },      /* P = M = 4096, an F and a B on every rank */
  { "ranks-65536", 0, 0 },     /* P = 65,536 with 100,000 spans */
  { "strings-50k", 0, 0 },     /* 50,000 STRING frames, a span naming each */
  /* issue "Never destroy a trace": what a 1.7 KB torch.profiler trace
   * claiming world_size 65536 imports to (1.5 MB), 65,536 PLAN frames, each
   * of which cost a pass over every rank */
  { "plans-65536", 0, 1 },     /* P = 65,536: rank 0's order and 4 blocks, 65,535 empty plans */
  { "plans-replaced", 0, 0 },  /* P = 65,536: rank 0's timed plan replaced 65,536 times */
  { "offsets-65536", 0, 0 },   /* P = 65,536: a RANK and a CLOCK_OFFSET frame for every rank */
  { NULL, 0, 0 },
};

#define T0 1000000000LL   /* the run's clock at its start */

static PpSpan
span (int rank, int kind, int mb, int step, int64_t start, int64_t end)
{
  PpSpan s;
  memset (&s, 0, sizeof s);
  s.rank = rank;
  s.stage = rank;
  s.kind = (uint16_t) kind;
  s.microbatch = mb;
  s.step = step;
  s.start_ns = start;
  s.end_ns = end;
  s.device = 0xffff;
  s.peer_rank = -1;
  return s;
}

static int
description (PpTraceWriter *w, int P, int M)
{
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  snprintf (d.schedule, sizeof d.schedule, "GPipe");
  snprintf (d.backend, sizeof d.backend, "cpu");
  snprintf (d.host, sizeof d.host, "hostile");
  snprintf (d.model, sizeof d.model, "residual MLP: 2 blocks, width 8, hidden 16, batch 4");
  snprintf (d.cmdline, sizeof d.cmdline, "crafted for issue 18");
  d.n_ranks = P;
  d.n_microbatches = M;
  d.n_virtual = 1;
  d.start_unix_ns = 1700000000000000000LL;
  d.start_monotonic_ns = T0;
  return pp_trace_write_description (w, &d, NULL) == PP_OK ? 0 : -1;
}

/* A GPipe run of 2 ranks, 2 micro-batches, 2 steps: F 1 us, B 2 us; with
 * step markers or without (then the view spans every span, as the app
 * opens a trace without steps). */
static int
base_markers (PpTraceWriter *w, int M_desc, int markers)
{
  PpSpan s[64];
  size_t n = 0;
  if (description (w, 2, M_desc) != 0)
    return -1;
  for (int step = 0; step < 2; step++)
    {
      int64_t t = T0 + step * 20000;
      for (int r = 0; r < 2 && markers; r++)
        if (pp_trace_write_step_marker (w, r, step, PP_TRACE_STEP_BEGIN, t, NULL) != PP_OK)
          return -1;
      for (int r = 0; r < 2; r++)
        for (int mb = 0; mb < 2; mb++)
          {
            int64_t f = t + (r + mb) * 1000;
            s[n++] = span (r, PP_SPAN_F, mb, step, f, f + 1000);
            int64_t b = t + 6000 + (1 - r + mb) * 2000;
            s[n++] = span (r, PP_SPAN_B, mb, step, b, b + 2000);
          }
    }
  return pp_trace_write_spans (w, s, n, NULL) == PP_OK ? 0 : -1;
}

/* The traces of 65,536 PLAN or CLOCK_OFFSET frames: P = 65,536, M = 2,
 * those frames, and rank 0's F0 F1 B0 B1, 10 us each, in 70 us. */
static int
many_frames (PpTraceWriter *w, const char *name)
{
  const int P = 65536;
  PpTracePlanAction order[4] = {
    { PP_TRACE_ACT_F, 0, 0, -1, -1, -1, 0, 0 }, { PP_TRACE_ACT_F, 0, 1, -1, -1, -1, 0, 0 },
    { PP_TRACE_ACT_B, 0, 0, -1, -1, -1, 0, 0 }, { PP_TRACE_ACT_B, 0, 1, -1, -1, -1, 0, 0 },
  };
  if (description (w, P, 2) != 0)
    return -1;
  if (strcmp (name, "plans-65536") == 0)
    /* the importer's plan: rank 0's order, no times, every other rank empty */
    for (int r = 0; r < P; r++)
      {
        if (pp_trace_write_rank_plan (w, r, order, r == 0 ? 4 : 0, 0, NULL) != PP_OK)
          return -1;
      }
  else if (strcmp (name, "plans-replaced") == 0)
    /* each a timed plan of rank 0 ending earlier than the one it
     * replaces: the last ends 1 us after the origin */
    for (int k = 0; k < P; k++)
      {
        PpTracePlanAction a = { PP_TRACE_ACT_F, 0, 0, -1, -1, -1, 0, 1e-6 * (P - k) };
        if (pp_trace_write_rank_plan (w, 0, &a, 1, 1, NULL) != PP_OK)
          return -1;
      }
  else
    for (int r = 0; r < P; r++)
      {
        char host[32];
        snprintf (host, sizeof host, "h%d", r);
        if (pp_trace_write_rank (w, r, 100 + r, host, NULL) != PP_OK
            || pp_trace_write_clock_offset (w, r, 1000 + r, NULL) != PP_OK)
          return -1;
      }
  for (int i = 0; i < 4; i++)
    {
      PpSpan s = span (0, order[i].kind == PP_TRACE_ACT_F ? PP_SPAN_F : PP_SPAN_B, order[i].microbatch,
                       0, T0 + 20000LL * i, T0 + 20000LL * i + 10000);
      s.stage = 0;
      if (pp_trace_write_spans (w, &s, 1, NULL) != PP_OK)
        return -1;
    }
  return 0;
}

static int
base (PpTraceWriter *w, int M_desc)
{
  return base_markers (w, M_desc, 1);
}

static int
write_body (PpTraceWriter *w, const char *name)
{
  if (strcmp (name, "step-max") == 0 || strcmp (name, "step-3e8") == 0)
    {
      PpSpan s = span (0, PP_SPAN_F, 0, name[5] == 'm' ? INT32_MAX : 300000000, T0 + 50000, T0 + 51000);
      return base (w, 2) || pp_trace_write_spans (w, &s, 1, NULL) != PP_OK ? -1 : 0;
    }
  if (strcmp (name, "rank-65535") == 0)
    {
      PpCounter c = { T0 + 100, 4096.0, 65535, 0, PP_COUNTER_ACTIVATION_BYTES };
      return base (w, 2) || pp_trace_write_dropped (w, 65535, 3, NULL) != PP_OK
             || pp_trace_write_counter (w, &c, NULL) != PP_OK ? -1 : 0;
    }
  if (strcmp (name, "m-2e24") == 0)
    return base (w, 1 << 24);
  if (strcmp (name, "span-9e18") == 0)
    {
      PpSpan s = span (0, PP_SPAN_F, 0, 0, -9000000000000000000LL, 9000000000000000000LL);
      return base_markers (w, 2, 0) || pp_trace_write_spans (w, &s, 1, NULL) != PP_OK ? -1 : 0;
    }
  if (strcmp (name, "plan-far") == 0)
    {
      PpTracePlanAction a[2] = {
        { PP_TRACE_ACT_F, 0, 0, -1, -1, -1, -9.3e9, 1e-6 },
        { PP_TRACE_ACT_B, 0, 0, -1, -1, -1, 1e-6, 9.3e9 },
      };
      const PpTracePlanAction *acts[2] = { a, a };
      size_t n[2] = { 2, 2 };
      /* a plan and no span, as `schedule --trace` writes */
      return description (w, 2, 2) || pp_trace_write_plan (w, 2, acts, n, 1, NULL) != PP_OK ? -1 : 0;
    }
  if (strcmp (name, "loss-far") == 0)
    {
      PpCounter c = { T0 + 100, 2.5, 0, INT32_MAX, PP_COUNTER_LOSS };
      return base (w, 2) || pp_trace_write_counter (w, &c, NULL) != PP_OK
             || pp_trace_write_step_marker (w, 0, INT32_MAX, PP_TRACE_STEP_BEGIN, T0 + 90000, NULL) != PP_OK
             || pp_trace_write_step_marker (w, 0, 1 << 26, PP_TRACE_STEP_BEGIN, T0 + 80000, NULL) != PP_OK
             ? -1 : 0;
    }
  if (strcmp (name, "markers-5000") == 0)
    {
      if (base (w, 2) != 0)
        return -1;
      for (int k = 0; k < 5000; k++)
        if (pp_trace_write_step_marker (w, 0, 2 + k, PP_TRACE_STEP_BEGIN,
                                        T0 + 100000000 - 1000LL * k, NULL) != PP_OK)
          return -1;
      return 0;
    }
  if (strcmp (name, "ranks-4096") == 0 || strcmp (name, "ranks-65536") == 0)
    {
      int P = name[6] == '4' ? 4096 : 65536;
      size_t n_spans = P == 4096 ? 2 * 4096 : 100000;
      if (description (w, P, P == 4096 ? 4096 : 8) != 0)
        return -1;
      for (size_t i = 0; i < n_spans; i++)
        {
          int r = (int) (i % (size_t) P);
          int b = (int) (i / (size_t) P) % 2;
          int64_t t = T0 + (int64_t) (i / (size_t) P) * 3000 + r;
          PpSpan s = span (r, b ? PP_SPAN_B : PP_SPAN_F, 0, 0, t, t + (b ? 2000 : 1000));
          if (pp_trace_write_spans (w, &s, 1, NULL) != PP_OK)
            return -1;
        }
      return 0;
    }
  if (strcmp (name, "strings-50k") == 0)
    {
      if (description (w, 1, 1) != 0)
        return -1;
      for (uint32_t id = 1; id <= 50000; id++)
        {
          char nm[32];
          snprintf (nm, sizeof nm, "kernel_%u", id);
          PpSpan s = span (0, PP_SPAN_KERNEL, -1, 0, T0 + id * 10LL, T0 + id * 10LL + 5);
          s.name_id = id;
          s.device = 0;
          if (pp_trace_write_string (w, id, nm, NULL) != PP_OK
              || pp_trace_write_spans (w, &s, 1, NULL) != PP_OK)
            return -1;
        }
      return 0;
    }
  if (strncmp (name, "plans-", 6) == 0 || strcmp (name, "offsets-65536") == 0)
    return many_frames (w, name);
  fprintf (stderr, "hostile-traces: no trace named '%s'\n", name);
  return -1;
}

int
pp_hostile_write (const char *name, const char *path)
{
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_LITTLE, &err);
  if (w == NULL)
    {
      fprintf (stderr, "hostile-traces: %s: %s\n", path, err.msg);
      return -1;
    }
  int rc = write_body (w, name);
  if (pp_trace_writer_close (w, &err) != PP_OK)
    rc = -1;
  if (rc != 0)
    fprintf (stderr, "hostile-traces: cannot write %s\n", path);
  return rc;
}
