/* runtime's parts (runtime/pp-why-runtime.h): spans and counters built by
 * hand on a GPipe plan of 2 ranks and 2 micro-batches (F 1 ms, B 2 ms), so
 * that every part's value is known by construction.  Nothing timed on this
 * machine is asserted. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "pp-simulate.h"
#include "pp-test-util.h"
#include "pp-trace.h"
#include "pp-why-runtime.h"
#include "pp-why.h"

#define MS 1000000   /* ns */
#define EPS 1e-12

typedef struct {
  GArray *spans;     /* PpSpan */
  GArray *counters;  /* PpCounter */
} Run;

static PpSchedule *
plan (void)
{
  return pp_test_generate ("GPipe", 2, 2, 1);
}

/* The plan's blocks as spans of step 0, every block starting at or after
 * shift_at (ns) moved by shift (ns). */
static Run
blocks (const PpSchedule *s, int64_t shift_at, int64_t shift)
{
  PpSimulation *sim = pp_test_simulate (s, 1e-3, 2e-3, 0, 0);
  Run run = { g_array_new (FALSE, TRUE, sizeof (PpSpan)), g_array_new (FALSE, TRUE, sizeof (PpCounter)) };
  for (int r = 0; r < s->ranks; r++)
    for (int k = 0; k < s->rank[r].n_actions; k++)
      {
        const PpAction *a = &s->rank[r].actions[k];
        PpSpan sp = { 0 };
        sp.rank = r;
        sp.stage = a->stage;
        sp.microbatch = a->microbatch;
        sp.kind = a->kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_B;
        sp.peer_rank = -1;
        sp.start_ns = llround (sim->timeline[r][k].start * 1e9);
        sp.end_ns = llround (sim->timeline[r][k].end * 1e9);
        if (sp.start_ns >= shift_at)
          {
            sp.start_ns += shift;
            sp.end_ns += shift;
          }
        g_array_append_val (run.spans, sp);
      }
  pp_simulation_free (sim);
  return run;
}

static void
host (Run *run, int rank, int kind, double from_ms, double to_ms)
{
  PpSpan sp = { 0 };
  sp.rank = rank;
  sp.kind = (uint16_t) kind;
  sp.stage = sp.microbatch = sp.peer_rank = -1;
  sp.start_ns = llround (from_ms * MS);
  sp.end_ns = llround (to_ms * MS);
  g_array_append_val (run->spans, sp);
}

/* A counter sample of rank at every edge of its blocks: value(t) is
 * base before cut_ms and base + grow_ns from it on. */
static void
samples (Run *run, int rank, int kind, double cut_ms, double grow_ns)
{
  guint n = run->spans->len;
  for (guint i = 0; i < n; i++)
    {
      const PpSpan *sp = &g_array_index (run->spans, PpSpan, i);
      if (sp->rank != rank || !pp_span_kind_is_block (sp->kind))
        continue;
      for (int e = 0; e < 2; e++)
        {
          PpCounter c = { 0 };
          c.rank = rank;
          c.kind = (uint16_t) kind;
          c.time_ns = e == 0 ? sp->start_ns : sp->end_ns;
          c.value = 5e6 + (c.time_ns >= llround (cut_ms * MS) ? grow_ns : 0);
          g_array_append_val (run->counters, c);
        }
    }
}

static void
run_free (Run *run)
{
  g_array_free (run->spans, TRUE);
  g_array_free (run->counters, TRUE);
}

static PpWhyReport *
analyse (const PpSchedule *s, const Run *run)
{
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  if (pp_why_analyse_spans_counters (s, (const PpSpan *) run->spans->data, run->spans->len,
                                     (const PpCounter *) run->counters->data, run->counters->len, 0,
                                     &rep, &err) != PP_OK)
    g_error ("analyse: %s", err.msg);
  g_assert_cmpint (rep->n_steps, ==, 1);
  return rep;
}

/* Every part in [0, runtime], their sum runtime exactly (to rounding). */
static void
assert_parts_sum (const PpWhyIdle *w)
{
  double sum = 0;
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    {
      g_assert_cmpfloat (w->runtime_parts[k], >=, 0);
      g_assert_cmpfloat (w->runtime_parts[k], <=, w->runtime + EPS);
      sum += w->runtime_parts[k];
    }
  g_assert_cmpfloat_with_epsilon (sum, w->runtime, EPS);
}

#define PART(w, k) ((w)->runtime_parts[PP_WHY_RT_##k])

/* The plan's layout this file builds on: rank 0 F F [0, 2], waits for
 * rank 1's first B [3, 5], B B [5, 9]; rank 1 F F [1, 3], B B [3, 7]. */
static void
test_layout (void)
{
  PpSchedule *s = plan ();
  Run run = blocks (s, INT64_MAX, 0);
  PpWhyReport *rep = analyse (s, &run);
  for (int r = 0; r < 2; r++)
    {
      g_assert_cmpfloat_with_epsilon (rep->idle[r].measured, 3e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (rep->idle[r].runtime, 0, 1e-9);
      assert_parts_sum (&rep->idle[r]);
      g_assert_cmpint (rep->idle[r].late_peer, ==, -1);
    }
  pp_why_report_free (rep);
  run_free (&run);
  pp_schedule_free (s);
}

/* Everything after 3 ms is 4 ms late: each rank's runtime is 4 ms.
 * Rank 0's gap [2, 9]: run delay +1.5 ms across it, GC [3, 4], a loss
 * [3.5, 5] (1 ms beyond the GC), probe +0.2 ms: 3.7 ms; it then waited
 * for rank 1's block 4 ms beyond its plan: peer_late is what runtime has
 * left, 0.3 ms.  Rank 1: a GC in the planned fill [0.2, 0.8], one inside
 * its F [1.2, 1.5] (not idle: not counted), one of 3.8 ms in its gap [3,
 * 7]: 4.4 ms of GC in its idle, capped to runtime's 4 ms. */
static void
test_parts (void)
{
  PpSchedule *s = plan ();
  Run run = blocks (s, 3 * MS, 4 * MS);
  samples (&run, 0, PP_COUNTER_RUN_DELAY_NS, 9, 1.5e6);
  samples (&run, 0, PP_COUNTER_PROBE_SELF_NS, 9, 0.2e6);
  samples (&run, 1, PP_COUNTER_RUN_DELAY_NS, 0, 0);
  host (&run, 0, PP_SPAN_GC, 3, 4);
  host (&run, 0, PP_SPAN_HOST_LOSS, 3.5, 5);
  host (&run, 1, PP_SPAN_GC, 0.2, 0.8);
  host (&run, 1, PP_SPAN_GC, 1.2, 1.5);
  host (&run, 1, PP_SPAN_GC, 3, 6.8);
  PpWhyReport *rep = analyse (s, &run);
  const PpWhyIdle *w0 = &rep->idle[0], *w1 = &rep->idle[1];

  g_assert_cmpfloat_with_epsilon (w0->runtime, 4e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, DESCHEDULED), 1.5e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, GC), 1e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, HOST_LOSS), 1e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, PROBE), 0.2e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, PEER_LATE), 0.3e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w0, UNATTRIBUTED), 0, 1e-9);
  g_assert_cmpint (w0->late_peer, ==, 1);
  /* rank 1's gap before its late block: the 3.8 ms GC and 0.2 ms more */
  g_assert_cmpfloat_with_epsilon (w0->late_causes[PP_WHY_RT_GC], 3.8e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (w0->late_causes[PP_WHY_RT_UNATTRIBUTED], 0.2e-3, 1e-9);
  g_assert_true (w0->runtime_measured[PP_WHY_RT_DESCHEDULED] && w0->runtime_measured[PP_WHY_RT_PROBE]);
  g_assert_false (w0->runtime_measured[PP_WHY_RT_USER_KERNELS]);

  g_assert_cmpfloat_with_epsilon (w1->runtime, 4e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w1, GC), 4e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w1, DESCHEDULED), 0, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w1, UNATTRIBUTED), 0, 1e-9);
  g_assert_true (w1->runtime_measured[PP_WHY_RT_DESCHEDULED]);
  g_assert_false (w1->runtime_measured[PP_WHY_RT_PROBE]);
  for (int r = 0; r < 2; r++)
    {
      assert_parts_sum (&rep->idle[r]);
      assert_parts_sum (&rep->steps[0].idle[r]);
    }

  /* the per-gap reading: rank 0's one gap in the step, its parts in
   * seconds summing to its 7 ms; rank 1's two, the fill's GC in the first */
  PpWhyGap *g = NULL;
  size_t ng = 0;
  PpError err = { 0 };
  g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len,
                                        (const PpCounter *) run.counters->data, run.counters->len, 0, 0,
                                        13 * MS, &g, &ng, &err), ==, PP_OK);
  g_assert_cmpuint (ng, ==, 1);
  g_assert_cmpint (g[0].start_ns, ==, 2 * MS);
  g_assert_cmpint (g[0].end_ns, ==, 9 * MS);
  double sum = 0;
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    sum += g[0].parts[k];
  g_assert_cmpfloat_with_epsilon (sum, 7e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_DESCHEDULED], 1.5e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_UNATTRIBUTED], 3.3e-3, 1e-9);
  free (g);
  g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len, NULL, 0, 1, 0,
                                        13 * MS, &g, &ng, &err), ==, PP_OK);
  g_assert_cmpuint (ng, ==, 3);   /* the fill [0, 1], [3, 7], the drain [11, 13] */
  g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_GC], 0.6e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (g[1].parts[PP_WHY_RT_GC], 3.8e-3, 1e-9);
  free (g);
  g_assert_cmpint (pp_why_runtime_gaps (NULL, 0, NULL, 0, -1, 0, 1, &g, &ng, &err), ==, PP_EINVAL);

  pp_why_report_free (rep);
  run_free (&run);
  pp_schedule_free (s);
}

/* A GC only in the planned fill, with runtime 0: capped away, nothing charged. */
static void
test_fill_capped (void)
{
  PpSchedule *s = plan ();
  Run run = blocks (s, INT64_MAX, 0);
  host (&run, 1, PP_SPAN_GC, 0.1, 0.9);
  PpWhyReport *rep = analyse (s, &run);
  g_assert_cmpfloat_with_epsilon (rep->idle[1].runtime, 0, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (&rep->idle[1], GC), 0, 1e-12);
  g_assert_true (rep->idle[1].runtime_measured[PP_WHY_RT_GC]);
  assert_parts_sum (&rep->idle[1]);
  pp_why_report_free (rep);
  run_free (&run);
  pp_schedule_free (s);
}

/* Counters that decrease, jump past the gap or are not numbers never
 * make a part negative or larger than the gap or runtime. */
static void
test_hostile_counters (void)
{
  PpSchedule *s = plan ();
  double grow[] = { -3e6, 1e12, NAN, INFINITY, -INFINITY };
  for (size_t i = 0; i < G_N_ELEMENTS (grow); i++)
    {
      Run run = blocks (s, 3 * MS, 4 * MS);
      samples (&run, 0, PP_COUNTER_RUN_DELAY_NS, 9, grow[i]);
      samples (&run, 0, PP_COUNTER_PROBE_SELF_NS, 9, grow[i]);
      samples (&run, 0, PP_COUNTER_ON_CPU_NS, 9, grow[i]);
      samples (&run, 1, PP_COUNTER_ON_CPU_NS, 7, grow[i]);
      PpWhyReport *rep = analyse (s, &run);
      const PpWhyIdle *w = &rep->idle[0];
      assert_parts_sum (w);
      assert_parts_sum (&rep->idle[1]);
      if (!(grow[i] > 0))   /* nothing on a CPU: nothing of it charged */
        g_assert_cmpfloat (PART (&rep->idle[1], HOST_OTHER), ==, 0);
      if (grow[i] > 1e9)   /* capped to what runtime has */
        g_assert_cmpfloat_with_epsilon (PART (w, DESCHEDULED), 4e-3, 1e-9);
      else
        g_assert_cmpfloat (PART (w, DESCHEDULED), ==, 0);
      PpWhyGap *g = NULL;
      size_t ng = 0;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len,
                                            (const PpCounter *) run.counters->data, run.counters->len, 0,
                                            0, 13 * MS, &g, &ng, &err), ==, PP_OK);
      g_assert_cmpuint (ng, ==, 1);
      for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
        {
          g_assert_cmpfloat (g[0].parts[k], >=, 0);
          g_assert_cmpfloat (g[0].parts[k], <=, 7e-3 + EPS);
        }
      free (g);
      pp_why_report_free (rep);
      run_free (&run);
    }
  pp_schedule_free (s);
}

/* Three copies of the pipeline (replicas 0, 1: the late run with rank 1's
 * GC; 2: the plan), only replica 1 with run-delay counters: rank 0's
 * median copy (idle 3, 7, 7 ms: replica 0 on the tie) has its own
 * counters, none, and so no descheduled; rank 1's its GC. */
static void
test_replicas (void)
{
  PpSchedule *s = plan ();
  Run all = { g_array_new (FALSE, TRUE, sizeof (PpSpan)), g_array_new (FALSE, TRUE, sizeof (PpCounter)) };
  GArray *span_rep = g_array_new (FALSE, FALSE, sizeof (int32_t));
  GArray *ctr_rep = g_array_new (FALSE, FALSE, sizeof (int32_t));
  for (int32_t k = 0; k < 3; k++)
    {
      Run run = blocks (s, k < 2 ? 3 * MS : INT64_MAX, 4 * MS);
      if (k < 2)
        host (&run, 1, PP_SPAN_GC, 3, 6.8);
      if (k == 1)
        samples (&run, 0, PP_COUNTER_RUN_DELAY_NS, 9, 1.5e6);
      g_array_append_vals (all.spans, run.spans->data, run.spans->len);
      g_array_append_vals (all.counters, run.counters->data, run.counters->len);
      for (guint i = 0; i < run.spans->len; i++)
        g_array_append_val (span_rep, k);
      for (guint i = 0; i < run.counters->len; i++)
        g_array_append_val (ctr_rep, k);
      run_free (&run);
    }
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  PpWhyReport *rep = NULL;
  PpError err = { 0 };
  g_assert_cmpint (pp_why_analyse_replicas_counters (&d, NULL, (const PpSpan *) all.spans->data,
                                                     (const int32_t *) span_rep->data, all.spans->len,
                                                     (const PpCounter *) all.counters->data,
                                                     (const int32_t *) ctr_rep->data, all.counters->len, 0,
                                                     &rep, NULL, NULL, &err), ==, PP_OK);
  g_assert_cmpint (rep->n_replicas, ==, 3);
  g_assert_cmpint (rep->idle_replica[0], ==, 0);
  g_assert_cmpfloat_with_epsilon (rep->idle[0].runtime, 4e-3, 1e-9);
  g_assert_false (rep->idle[0].runtime_measured[PP_WHY_RT_DESCHEDULED]);
  g_assert_cmpfloat (PART (&rep->idle[0], DESCHEDULED), ==, 0);
  g_assert_cmpfloat_with_epsilon (PART (&rep->idle[1], GC), 3.8e-3, 1e-9);
  for (int r = 0; r < 2; r++)
    assert_parts_sum (&rep->idle[r]);
  pp_why_report_free (rep);
  run_free (&all);
  g_array_free (span_rep, TRUE);
  g_array_free (ctr_rep, TRUE);
  pp_schedule_free (s);
}

/* host_other by construction.  Rank 1's gap [3, 7] (runtime 4 ms, no
 * peer late: its B waits for its own F): a GC [3, 4], the probe +0.5 ms
 * and the thread on a CPU +3 ms across the gap: host_other is the 1.5 ms
 * on a CPU beyond the GC and the probe, and unattributed shrinks by
 * exactly that (2.5 ms without the counter, 1 ms with it).  Rank 0's gap
 * [2, 9]: a GC [3, 4] and +0.5 ms on a CPU, less than the GC: host_other
 * 0, never negative. */
static void
test_host_other (void)
{
  PpSchedule *s = plan ();
  for (int with = 0; with < 2; with++)
    {
      Run run = blocks (s, 3 * MS, 4 * MS);
      host (&run, 1, PP_SPAN_GC, 3, 4);
      host (&run, 0, PP_SPAN_GC, 3, 4);
      samples (&run, 1, PP_COUNTER_PROBE_SELF_NS, 7, 0.5e6);
      if (with)
        {
          samples (&run, 1, PP_COUNTER_ON_CPU_NS, 7, 3e6);
          samples (&run, 0, PP_COUNTER_ON_CPU_NS, 9, 0.5e6);
        }
      PpWhyReport *rep = analyse (s, &run);
      const PpWhyIdle *w1 = &rep->idle[1], *w0 = &rep->idle[0];
      g_assert_cmpfloat_with_epsilon (w1->runtime, 4e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, GC), 1e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, PROBE), 0.5e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, PEER_LATE), 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, HOST_OTHER), with ? 1.5e-3 : 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, UNATTRIBUTED), with ? 1e-3 : 2.5e-3, 1e-9);
      g_assert_cmpint (w1->runtime_measured[PP_WHY_RT_HOST_OTHER], ==, with);
      g_assert_cmpfloat (PART (w0, HOST_OTHER), ==, 0);
      g_assert_cmpint (w0->runtime_measured[PP_WHY_RT_HOST_OTHER], ==, with);
      for (int r = 0; r < 2; r++)
        assert_parts_sum (&rep->idle[r]);

      /* the gap's own parts, as the host lane reads them */
      PpWhyGap *g = NULL;
      size_t ng = 0;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len,
                                            (const PpCounter *) run.counters->data, run.counters->len, 1,
                                            3 * MS, 7 * MS, &g, &ng, &err), ==, PP_OK);
      g_assert_cmpuint (ng, ==, 1);
      g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_HOST_OTHER], with ? 1.5e-3 : 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_UNATTRIBUTED], with ? 1e-3 : 2.5e-3, 1e-9);
      free (g);
      pp_why_report_free (rep);
      run_free (&run);
    }
  g_assert_cmpstr (pp_why_runtime_part_name (PP_WHY_RT_HOST_OTHER), ==, "host_other");
  pp_schedule_free (s);
}

/* Another thread's collections (a GC span's stream, format 1.8): charged
 * as gc only outside the rank's waits and, where the counters say it, only
 * up to the time the training thread was blocked in the gap; never taken
 * from host_other (the training thread did not run them).  Rank 1's gap
 * is [3, 7] ms: its own GC [6.5, 6.8], another thread's [3.5, 5] with a
 * WAIT [4, 6] (so 0.5 ms of it outside the wait).  With counters, on a CPU
 * 3 ms and runnable 0.8 ms of the gap: blocked 0.2 ms, the cap. */
static void
test_other_thread_gc (void)
{
  PpSchedule *s = plan ();
  for (int v = 0; v < 3; v++)   /* no counters, counters, counters and no GIL */
    {
      Run run = blocks (s, 3 * MS, 4 * MS);
      host (&run, 1, PP_SPAN_GC, 6.5, 6.8);
      host (&run, 1, PP_SPAN_GC, 3.5, 5);
      g_array_index (run.spans, PpSpan, run.spans->len - 1).stream = 1234u | (v == 2 ? PP_GC_STOPS_WORLD : 0);
      host (&run, 1, PP_SPAN_WAIT, 4, 6);
      if (v > 0)
        {
          samples (&run, 1, PP_COUNTER_ON_CPU_NS, 7, 3e6);
          samples (&run, 1, PP_COUNTER_RUN_DELAY_NS, 7, 0.8e6);
        }
      PpWhyReport *rep = analyse (s, &run);
      const PpWhyIdle *w = &rep->idle[1];
      g_assert_cmpfloat_with_epsilon (w->runtime, 4e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, PEER_LATE), 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, GC), v == 0 ? 0.8e-3 : 0.5e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, DESCHEDULED), v == 0 ? 0 : 0.8e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, HOST_OTHER), v == 0 ? 0 : 2.7e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, UNATTRIBUTED), v == 0 ? 3.2e-3 : 0, 1e-9);
      g_assert_cmpint (w->runtime_measured[PP_WHY_RT_GC], ==, 1);
      assert_parts_sum (w);
      assert_parts_sum (&rep->idle[0]);

      /* the lane's gap says the same */
      PpWhyGap *g = NULL;
      size_t ng = 0;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len,
                                            (const PpCounter *) run.counters->data, run.counters->len, 1,
                                            3 * MS, 7 * MS, &g, &ng, &err), ==, PP_OK);
      g_assert_cmpuint (ng, ==, 1);
      g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_GC], v == 0 ? 0.8e-3 : 0.5e-3, 1e-9);
      free (g);
      pp_why_report_free (rep);
      run_free (&run);
    }
  pp_schedule_free (s);
}

/* launch_gap by construction.  Rank 1's gap [3, 7] (runtime 4 ms, no peer
 * late), with a LAUNCH span (format 1.8) of rank 1:
 *   0: none: launch_gap 0 and not measured, unattributed 4 ms;
 *   1: [2.5, 4], the launch returning 1 ms into the gap: launch_gap 1 ms,
 *      unattributed exactly 1 ms less;
 *   2: [2, 2.8], returned before the gap began: 0;
 *   3: [2.5, 4] with a GC [3, 3.5]: the GC's 0.5 ms counted once, as gc;
 *   4: [6, 12], ending after the work at 7 (B B [7, 11]) ends: not this
 *      gap's (0 in it) but the launch of what follows the drain gap
 *      [11, 13]: 1 ms there;
 *   5: [6, 10], returning after its work began at 7: the call's 1 ms in
 *      the gap, not the 3 ms before it began. */
static void
test_launch_gap (void)
{
  PpSchedule *s = plan ();
  static const double from[] = { 0, 2.5, 2, 2.5, 6, 6 }, to[] = { 0, 4, 2.8, 4, 12, 10 };
  static const double want[] = { 0, 1e-3, 0, 0.5e-3, 1e-3, 1e-3 };
  static const double in_gap[] = { 0, 1e-3, 0, 0.5e-3, 0, 1e-3 };
  static const double unattr[] = { 4e-3, 3e-3, 4e-3, 3e-3, 3e-3, 3e-3 };
  for (int v = 0; v < 6; v++)
    {
      Run run = blocks (s, 3 * MS, 4 * MS);
      if (v > 0)
        host (&run, 1, PP_SPAN_LAUNCH, from[v], to[v]);
      if (v == 3)
        host (&run, 1, PP_SPAN_GC, 3, 3.5);
      PpWhyReport *rep = analyse (s, &run);
      const PpWhyIdle *w1 = &rep->idle[1];
      g_assert_cmpfloat_with_epsilon (w1->runtime, 4e-3, 1e-9);
      g_test_message ("variant %d", v);
      g_assert_cmpfloat_with_epsilon (PART (w1, LAUNCH_GAP), want[v], 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, GC), v == 3 ? 0.5e-3 : 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, PEER_LATE), 0, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w1, UNATTRIBUTED), unattr[v], 1e-9);
      g_assert_cmpint (w1->runtime_measured[PP_WHY_RT_LAUNCH_GAP], ==, v > 0);
      g_assert_cmpint (rep->idle[0].runtime_measured[PP_WHY_RT_LAUNCH_GAP], ==, 0);
      g_assert_cmpfloat (PART (&rep->idle[0], LAUNCH_GAP), ==, 0);
      for (int r = 0; r < 2; r++)
        assert_parts_sum (&rep->idle[r]);

      /* the gap's own parts, as the host lane reads them: they sum to it */
      PpWhyGap *g = NULL;
      size_t ng = 0;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len, NULL, 0, 1,
                                            3 * MS, 7 * MS, &g, &ng, &err), ==, PP_OK);
      g_assert_cmpuint (ng, ==, 1);
      g_assert_cmpfloat_with_epsilon (g[0].parts[PP_WHY_RT_LAUNCH_GAP], in_gap[v], 1e-9);
      double sum = 0;
      for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
        sum += g[0].parts[k];
      g_assert_cmpfloat_with_epsilon (sum, 4e-3, 1e-9);
      free (g);
      pp_why_report_free (rep);
      run_free (&run);
    }
  g_assert_cmpstr (pp_why_runtime_part_name (PP_WHY_RT_LAUNCH_GAP), ==, "launch_gap");
  g_assert_nonnull (pp_why_runtime_part_meaning (PP_WHY_RT_LAUNCH_GAP));
  pp_schedule_free (s);
}

/* LAUNCH spans with absurd times (the whole clock, backwards, at its
 * ends, on every rank) never make a part negative or larger than the gap
 * or runtime, and the parts still sum to runtime. */
static void
test_hostile_launches (void)
{
  PpSchedule *s = plan ();
  static const int64_t t[][2] = {
    { INT64_MIN, INT64_MAX }, { 0, INT64_MAX }, { INT64_MAX - 1, INT64_MAX },
    { 5 * MS, 4 * MS }, { INT64_MIN, INT64_MIN + 1 }, { 2 * MS, 2 * MS },
  };
  for (size_t i = 0; i <= G_N_ELEMENTS (t); i++)
    {
      Run run = blocks (s, 3 * MS, 4 * MS);
      for (size_t j = 0; j < G_N_ELEMENTS (t); j++)
        if (i == G_N_ELEMENTS (t) || i == j)   /* each alone, then all at once */
          for (int r = 0; r < 2; r++)
            {
              PpSpan sp = { 0 };
              sp.rank = r;
              sp.kind = PP_SPAN_LAUNCH;
              sp.stage = sp.microbatch = sp.peer_rank = -1;
              sp.start_ns = t[j][0];
              sp.end_ns = t[j][1];
              g_array_append_val (run.spans, sp);
            }
      PpWhyReport *rep = analyse (s, &run);
      for (int r = 0; r < 2; r++)
        {
          assert_parts_sum (&rep->idle[r]);
          assert_parts_sum (&rep->steps[0].idle[r]);
        }
      PpWhyGap *g = NULL;
      size_t ng = 0;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_runtime_gaps ((const PpSpan *) run.spans->data, run.spans->len, NULL, 0, 0,
                                            INT64_MIN, INT64_MAX, &g, &ng, &err), ==, PP_OK);
      for (size_t k = 0; k < ng; k++)
        {
          double len = ((double) g[k].end_ns - (double) g[k].start_ns) * 1e-9, sum = 0;
          for (int q = 0; q < PP_WHY_N_RUNTIME_PARTS; q++)
            {
              g_assert_cmpfloat (g[k].parts[q], >=, 0);
              g_assert_cmpfloat (g[k].parts[q], <=, len * (1 + 1e-12));
              sum += g[k].parts[q];
            }
          g_assert_cmpfloat_with_epsilon (sum, len, len * 1e-9);
        }
      free (g);
      pp_why_report_free (rep);
      run_free (&run);
    }
  pp_schedule_free (s);
}

/* peer_late from the rank's own WAIT (a peer that collected garbage between
 * a block and its send).  GPipe P=2 M=2 at F=1, B=2 ms with every block
 * from 5 ms on 3 ms later: rank 1's B0 ends at 5, and rank 0's B0 (which
 * needs it) starts at 8.  Rank 1 ran a GC [5, 8] after its B0, and rank 0
 * recorded its receive as a WAIT [2, 8].  By block ends alone the input
 * was there at 5: rank 0 waited only the plan's 3 ms, and the rest of its
 * gap is unattributed.  With the WAIT: it waited for rank 1 until 8,
 * peer_late 3 ms more, and the cause named is rank 1's GC after that
 * block (3 ms). */
static void
test_peer_late_wait (void)
{
  PpSchedule *s = plan ();
  for (int with = 0; with < 2; with++)
    {
      Run run = blocks (s, 5 * MS, 3 * MS);
      host (&run, 1, PP_SPAN_GC, 5, 8);
      if (with)
        host (&run, 0, PP_SPAN_WAIT, 2, 8);
      PpWhyReport *rep = analyse (s, &run);
      const PpWhyIdle *w0 = &rep->idle[0];
      g_test_message ("with WAIT %d: rank 0 runtime %.6f, peer_late %.6f, unattributed %.6f", with,
                      w0->runtime, PART (w0, PEER_LATE), PART (w0, UNATTRIBUTED));
      g_assert_cmpfloat (w0->runtime, >=, 3e-3 - 1e-9);
      if (with)
        {
          g_assert_cmpfloat_with_epsilon (PART (w0, PEER_LATE), 3e-3, 1e-9);
          g_assert_cmpfloat_with_epsilon (PART (w0, UNATTRIBUTED), w0->runtime - 3e-3, 1e-9);
          g_assert_cmpint (w0->late_peer, ==, 1);
          g_assert_cmpfloat_with_epsilon (w0->late_causes[PP_WHY_RT_GC], 3e-3, 1e-9);
        }
      else
        {
          g_assert_cmpfloat_with_epsilon (PART (w0, PEER_LATE), 0, 1e-9);
          g_assert_cmpfloat_with_epsilon (PART (w0, UNATTRIBUTED), w0->runtime, 1e-9);
        }
      for (int r = 0; r < 2; r++)
        assert_parts_sum (&rep->idle[r]);
      pp_why_report_free (rep);
      run_free (&run);
    }
  pp_schedule_free (s);
}

/* NCCL's profiler plugin splits a receive's wait into named WAITs
 * (docs/nccl-plugin.md).  The names these tests give their ids. */
static const char *const nccl_names[] = { NULL, "nccl:peer_late", "nccl:local", "nccl:RecvWait",
                                          "nccl:RecvGPUWait" };

static const char *
nccl_name (void *user, uint32_t id)
{
  (void) user;
  return id < G_N_ELEMENTS (nccl_names) ? nccl_names[id] : NULL;
}

/* test_peer_late_wait's run (rank 1's B of micro-batch 1 and everything
 * after 5 ms late by 3 ms; rank 0 idle [2, 8], 3 ms of it planned) with
 * rank 0's wait for it split as NCCL splits a receive: "nccl:peer_late"
 * [2, 6] (rank 1 had not sent), then "nccl:local" [6, 8] (rank 0's own
 * GPU had not taken the data); states: the plugin's proxy step spans
 * beside the split, "nccl:RecvWait" and "nccl:RecvGPUWait" over the same
 * times. */
static Run
nccl_run (const PpSchedule *s, int states)
{
  Run run = blocks (s, 5 * MS, 3 * MS);
  for (int k = 0; k < (states ? 2 : 1); k++)
    {
      host (&run, 0, PP_SPAN_WAIT, 2, 6);
      g_array_index (run.spans, PpSpan, run.spans->len - 1).name_id = k == 0 ? 1 : 3;
      host (&run, 0, PP_SPAN_WAIT, 6, 8);
      g_array_index (run.spans, PpSpan, run.spans->len - 1).name_id = k == 0 ? 2 : 4;
    }
  return run;
}

/* The data came at 6 ms, when the peer_late part ended: rank 0's wait for
 * rank 1 is [2, 6], 1 ms beyond its plan's 3 ms of idle (peer_late, rank 1
 * named), and the 2 ms of nccl:local its own GPU's (user_kernels), not
 * rank 1's.  Read without names, every WAIT is a wait for the peer as it
 * always was: the whole runtime, 3 ms, is peer_late. */
static void
assert_nccl_split (const PpWhyIdle *w, int named)
{
  g_assert_cmpfloat_with_epsilon (w->runtime, 3e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w, PEER_LATE), named ? 1e-3 : 3e-3, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w, USER_KERNELS), named ? 2e-3 : 0, 1e-9);
  g_assert_cmpfloat_with_epsilon (PART (w, UNATTRIBUTED), 0, 1e-9);
  g_assert_cmpint (w->runtime_measured[PP_WHY_RT_USER_KERNELS], ==, named);
  g_assert_cmpint (w->late_peer, ==, 1);
  assert_parts_sum (w);
}

static void
test_nccl_local (void)
{
  PpSchedule *s = plan ();
  PpWhyNames names = { nccl_name, NULL };
  for (int states = 0; states < 2; states++)
    for (int named = 0; named < 2; named++)
      {
        Run run = nccl_run (s, states);
        PpWhyReport *rep = NULL;
        PpError err = { 0 };
        g_assert_cmpint (pp_why_analyse_spans_named (s, (const PpSpan *) run.spans->data, run.spans->len, NULL, 0,
                                                     named ? &names : NULL, 0, &rep, &err), ==, PP_OK);
        g_test_message ("states %d, named %d: peer_late %.6f, user_kernels %.6f", states, named,
                        PART (&rep->idle[0], PEER_LATE), PART (&rep->idle[0], USER_KERNELS));
        assert_nccl_split (&rep->idle[0], named);
        assert_nccl_split (&rep->steps[0].idle[0], named);
        pp_why_report_free (rep);
        run_free (&run);
      }
  pp_schedule_free (s);
}

/* The same read from a file, its names in its string table: the trace's
 * analysis, info and export --format why read them. */
static void
test_nccl_local_trace (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "why-runtime-nccl");
  PpSchedule *s = plan ();
  Run run = nccl_run (s, 1);
  char *path = pp_test_ctx_path (&ctx, "run.pptrace"), *j = pp_test_ctx_path (&ctx, "why.json");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  for (uint32_t id = 1; id < G_N_ELEMENTS (nccl_names); id++)
    g_assert_cmpint (pp_trace_write_string (w, id, nccl_names[id], &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_spans (w, (const PpSpan *) run.spans->data, run.spans->len, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

  PpWhyReport *rep = NULL;
  g_assert_cmpint (pp_why_analyse_trace (path, 0, &rep, NULL, NULL, &err), ==, PP_OK);
  assert_nccl_split (&rep->idle[0], 1);
  pp_why_report_free (rep);

  char *out = NULL, *e = NULL, *json = NULL;
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "info", path, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "user_kernels 2.00 (67%), peer_late 1.00 (33%)"));
  g_assert_nonnull (strstr (out, "\n  user_kernels: the rank's device kernels between blocks, and its GPU busy "
                                 "inside a receive (NCCL's nccl:local)\n"));
  g_free (out);
  g_free (e);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "export", path, "--format", "why", "-o", j, NULL), ==, 0);
  g_assert_true (g_file_get_contents (j, &json, NULL, NULL));
  /* rank 0's, in the mean and the step */
  g_assert_cmpint (pp_test_count (json, "\"user_kernels\": 0.002,"), ==, 2);
  g_assert_cmpint (pp_test_count (json, "\"peer_late\": 0.001,"), ==, 2);
  g_free (json);
  g_free (out);
  g_free (e);
  g_free (path);
  g_free (j);
  run_free (&run);
  pp_schedule_free (s);
  pp_test_ctx_clear (&ctx);
}

/* run written to path: a description, then the spans and counters with
 * rank 1's at shift ns from their times, then (shift != 0) rank 1's
 * CLOCK_OFFSET of -shift, after all of them: the reader must move them
 * back, counters as spans. */
static void
write_shifted (const char *path, const Run *run, int64_t shift)
{
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  for (guint i = 0; i < run->spans->len; i++)
    {
      PpSpan sp = g_array_index (run->spans, PpSpan, i);
      if (sp.rank == 1)
        sp.start_ns += shift, sp.end_ns += shift;
      g_assert_cmpint (pp_trace_write_spans (w, &sp, 1, &err), ==, PP_OK);
    }
  for (guint i = 0; i < run->counters->len; i++)
    {
      PpCounter c = g_array_index (run->counters, PpCounter, i);
      if (c.rank == 1)
        c.time_ns += shift;
      g_assert_cmpint (pp_trace_write_counter (w, &c, &err), ==, PP_OK);
    }
  if (shift != 0)
    g_assert_cmpint (pp_trace_write_clock_offset (w, 1, -shift, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
}

/* A CLOCK_OFFSET frame after the counters moves them with the spans: the
 * file with rank 1's clock 50 ms off and its offset last reads as the
 * file without, rank 1's descheduled and host_other measured across its
 * gap [3, 7] (no peer late there: its B waits for its own F) (unmoved counters would be 50 ms before it and measure nothing). */
static void
test_clock_offset_after (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "why-runtime-clock");
  PpSchedule *s = plan ();
  Run run = blocks (s, 3 * MS, 4 * MS);
  samples (&run, 1, PP_COUNTER_RUN_DELAY_NS, 7, 1.5e6);
  samples (&run, 1, PP_COUNTER_ON_CPU_NS, 7, 2e6);
  char *path = pp_test_ctx_path (&ctx, "run.pptrace");
  for (int k = 0; k < 2; k++)
    {
      write_shifted (path, &run, k == 0 ? 0 : -50 * MS);
      PpWhyReport *rep = NULL;
      PpError err = { 0 };
      g_assert_cmpint (pp_why_analyse_trace (path, 0, &rep, NULL, NULL, &err), ==, PP_OK);
      g_assert_cmpint (rep->n_steps, ==, 1);
      const PpWhyIdle *w = &rep->idle[1];
      g_assert_cmpfloat_with_epsilon (w->runtime, 4e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, DESCHEDULED), 1.5e-3, 1e-9);
      g_assert_cmpfloat_with_epsilon (PART (w, HOST_OTHER), 2e-3, 1e-9);
      assert_parts_sum (w);
      pp_why_report_free (rep);
    }
  /* info and export --format why name it (the file with the offset last) */
  char *out = NULL, *e = NULL, *j = pp_test_ctx_path (&ctx, "why.json"), *json = NULL;
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "info", path, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "host_other 2.00 (50%)"));
  g_free (out);
  g_free (e);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "export", path, "--format", "why", "-o", j, NULL), ==, 0);
  g_assert_true (g_file_get_contents (j, &json, NULL, NULL));
  /* rank 1's parts, and rank 0's late peer's causes (rank 1's gap before
   * the block it handed over late): each in the mean and the step */
  g_assert_cmpint (pp_test_count (json, "\"host_other\": 0.002,"), ==, 4);
  g_free (json);
  g_free (out);
  g_free (e);
  g_free (j);
  g_free (path);
  run_free (&run);
  pp_schedule_free (s);
  pp_test_ctx_clear (&ctx);
}

/* A trace written to a file: info prints the split and export --format
 * why carries idle[r].runtime_parts and the late peer. */
static void
test_cli (void)
{
  PpTestCtx ctx;
  pp_test_ctx_init (&ctx, "why-runtime");
  PpSchedule *s = plan ();
  Run run = blocks (s, 3 * MS, 4 * MS);
  samples (&run, 0, PP_COUNTER_RUN_DELAY_NS, 9, 1.5e6);
  host (&run, 0, PP_SPAN_GC, 3, 4);
  host (&run, 1, PP_SPAN_GC, 3, 6.8);
  char *path = pp_test_ctx_path (&ctx, "run.pptrace"), *j = pp_test_ctx_path (&ctx, "why.json");
  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d;
  memset (&d, 0, sizeof d);
  g_strlcpy (d.schedule, "GPipe", sizeof d.schedule);
  g_strlcpy (d.backend, "cpu", sizeof d.backend);
  d.n_ranks = 2;
  d.n_microbatches = 2;
  d.n_virtual = 1;
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_write_spans (w, (const PpSpan *) run.spans->data, run.spans->len, &err), ==, PP_OK);
  for (guint i = 0; i < run.counters->len; i++)
    g_assert_cmpint (pp_trace_write_counter (w, &g_array_index (run.counters, PpCounter, i), &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);

  char *out = NULL, *e = NULL;
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "info", path, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "runtime by part"));
  g_assert_nonnull (strstr (out, "rank 0: 4.00 ms = descheduled 1.50 (38%), gc 1.00 (25%)"));
  g_assert_nonnull (strstr (out, "rank 1: 4.00 ms = descheduled 0.00 (0%), gc 3.80 (95%)"));
  /* under the ranks, what each part named there is, not a pointer to the
   * README; a part no rank names (no kernel recorded) gets no line */
  g_assert_null (strstr (out, "README"));
  g_assert_nonnull (strstr (out, "\n  gc: Python's garbage collector pausing the thread (another thread's collection outside its waits)\n"));
  g_assert_nonnull (strstr (out, "\n  descheduled: the rank's thread runnable but not running"));
  g_assert_nonnull (strstr (out, "\n  unattributed: the rest"));
  g_assert_null (strstr (out, "\n  user_kernels:"));
  g_assert_cmpint (pp_test_count (out, "\n  gc: "), ==, 1);
  g_free (out);
  g_free (e);
  g_assert_cmpint (pp_test_cli_run (ctx.envp, &out, &e, "export", path, "--format", "why", "-o", j, NULL), ==, 0);
  char *json = NULL;
  g_assert_true (g_file_get_contents (j, &json, NULL, NULL));
  /* the mean and the one step, per rank */
  g_assert_cmpint (pp_test_count (json, "\"runtime_parts\": {"), ==, 2 * 2);
  g_assert_cmpint (pp_test_count (json, "\"unattributed\": "), >=, 2 * 2);
  g_assert_cmpint (pp_test_count (json, "\"descheduled\": 0.0015,"), ==, 2);
  g_assert_cmpint (pp_test_count (json, "\"runtime_peer_late\": {\"peer\": 1, "), ==, 2);
  g_free (json);
  g_free (out);
  g_free (e);
  g_free (path);
  g_free (j);
  run_free (&run);
  pp_schedule_free (s);
  pp_test_ctx_clear (&ctx);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/why-runtime/layout", test_layout);
  g_test_add_func ("/why-runtime/parts", test_parts);
  g_test_add_func ("/why-runtime/fill-capped", test_fill_capped);
  g_test_add_func ("/why-runtime/hostile-counters", test_hostile_counters);
  g_test_add_func ("/why-runtime/replicas", test_replicas);
  g_test_add_func ("/why-runtime/host-other", test_host_other);
  g_test_add_func ("/why-runtime/peer-late-wait", test_peer_late_wait);
  g_test_add_func ("/why-runtime/other-thread-gc", test_other_thread_gc);
  g_test_add_func ("/why-runtime/launch-gap", test_launch_gap);
  g_test_add_func ("/why-runtime/hostile-launches", test_hostile_launches);
  g_test_add_func ("/why-runtime/clock-offset-after", test_clock_offset_after);
  g_test_add_func ("/why-runtime/cli", test_cli);
  g_test_add_func ("/why-runtime/nccl-local", test_nccl_local);
  g_test_add_func ("/why-runtime/nccl-local-trace", test_nccl_local_trace);
  return g_test_run ();
}
