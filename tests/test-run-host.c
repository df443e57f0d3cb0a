/* The bundled runtime's host recording (issue 29): RUN_DELAY_NS counters at
 * block edges, and the descheduled time they give inside each rank's idle
 * gaps.
 *
 * Oversubscribed: 4 rank threads pinned to one core (this process's
 * affinity, which the CLI inherits), so whenever a rank's input arrives
 * its core is busy with another rank's block: every rank's gaps hold
 * run-queue delay.  A core per rank: 2 ranks pinned to 2 cores (--pin), so
 * a rank woken in a gap finds its own core free and runs at once; what
 * delay is left is the machine's other load.  The test asserts counts,
 * never a time or a share: every oversubscribed rank has descheduled time
 * (three ranks always wait for the one running), and the core-per-rank run
 * records its samples.  How the two runs' shares compare depends on the
 * machine's other load (a CI run with parallel tests gave the core-per-rank
 * run 0.31), so that comparison is a benchmark: tests/bench/bench-desched.py.
 *
 * Where `export --format why` has idle[r].runtime_parts (engineer a's
 * analysis), descheduled must be positive on every rank of the
 * oversubscribed run; where it has not, that check is skipped, said so.
 */
#define _GNU_SOURCE
#include <glib.h>
#include <glib/gstdio.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-event.h"
#include "pp-test-util.h"
#include "pp-trace.h"

#define MAX_RANKS 8

typedef struct { int64_t t; double v; } Sample;

typedef struct {
  GArray *work;     /* PpSpan: the rank's works */
  GArray *delay;    /* Sample: RUN_DELAY_NS */
} RankData;

typedef struct {
  int     n_ranks;
  int     n_delay[MAX_RANKS], n_self[MAX_RANKS], n_cpu[MAX_RANKS];
  double  last_self[MAX_RANKS], last_cpu[MAX_RANKS];
  double  gap_ns[MAX_RANKS], desched_ns[MAX_RANKS];
  int     n_host_schedule;
} Measured;

static int
cmp_span (gconstpointer a, gconstpointer b)
{
  const PpSpan *x = a, *y = b;
  return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int
cmp_sample (gconstpointer a, gconstpointer b)
{
  const Sample *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

/* The latest sample at or before t; -1 before the first. */
static double
delay_at (GArray *d, int64_t t)
{
  double v = -1;
  for (guint i = 0; i < d->len && g_array_index (d, Sample, i).t <= t; i++)
    v = g_array_index (d, Sample, i).v;
  return v;
}

/* Per rank: the gaps between two consecutive works of one step, and in
 * each the run delay's difference across it, capped at the gap (the rule
 * of pp-why.h's runtime parts). */
static void
measure (const char *path, Measured *out)
{
  PpError err = { 0 };
  PpTraceReader *r = pp_trace_reader_new_path (path, &err);
  RankData rd[MAX_RANKS];
  PpTraceItem it;

  g_assert_nonnull (r);
  memset (out, 0, sizeof *out);
  for (int k = 0; k < MAX_RANKS; k++)
    {
      rd[k].work = g_array_new (FALSE, FALSE, sizeof (PpSpan));
      rd[k].delay = g_array_new (FALSE, FALSE, sizeof (Sample));
    }
  while (pp_trace_reader_next (r, &it, &err) == PP_OK && it.type != PP_TRACE_ITEM_END)
    {
      if (it.type == PP_TRACE_ITEM_SPAN && it.span.rank >= 0 && it.span.rank < MAX_RANKS)
        {
          if (it.span.rank >= out->n_ranks)
            out->n_ranks = it.span.rank + 1;
          if (pp_span_kind_is_work (it.span.kind))
            g_array_append_val (rd[it.span.rank].work, it.span);
          if (it.span.kind == PP_SPAN_HOST_SCHEDULE)
            out->n_host_schedule++;
        }
      if (it.type == PP_TRACE_ITEM_COUNTER && it.counter.kind == PP_COUNTER_PROBE_SELF_NS
          && it.counter.rank >= 0 && it.counter.rank < MAX_RANKS)
        {
          /* cumulative: never less than the rank's last sample */
          g_assert_cmpfloat (it.counter.value, >=, out->last_self[it.counter.rank]);
          out->last_self[it.counter.rank] = it.counter.value;
          out->n_self[it.counter.rank]++;
        }
      if (it.type == PP_TRACE_ITEM_COUNTER && it.counter.kind == PP_COUNTER_ON_CPU_NS
          && it.counter.rank >= 0 && it.counter.rank < MAX_RANKS)
        {
          /* cumulative too (format 1.7), read with the run delay */
          g_assert_cmpfloat (it.counter.value, >=, out->last_cpu[it.counter.rank]);
          out->last_cpu[it.counter.rank] = it.counter.value;
          out->n_cpu[it.counter.rank]++;
        }
      if (it.type == PP_TRACE_ITEM_COUNTER && it.counter.kind == PP_COUNTER_RUN_DELAY_NS
          && it.counter.rank >= 0 && it.counter.rank < MAX_RANKS)
        {
          Sample s = { it.counter.time_ns, it.counter.value };
          g_array_append_val (rd[it.counter.rank].delay, s);
          out->n_delay[it.counter.rank]++;
        }
    }
  g_assert_cmpstr (err.msg, ==, "");
  pp_trace_reader_free (r);
  for (int k = 0; k < MAX_RANKS; k++)
    {
      GArray *w = rd[k].work;
      g_array_sort (w, cmp_span);
      g_array_sort (rd[k].delay, cmp_sample);
      for (guint i = 1; i < rd[k].delay->len; i++)   /* cumulative */
        g_assert_cmpfloat (g_array_index (rd[k].delay, Sample, i).v, >=,
                           g_array_index (rd[k].delay, Sample, i - 1).v);
      for (guint i = 1; i < w->len; i++)
        {
          const PpSpan *a = &g_array_index (w, PpSpan, i - 1), *b = &g_array_index (w, PpSpan, i);
          if (a->step != b->step || b->start_ns <= a->end_ns)
            continue;
          double gap = (double) (b->start_ns - a->end_ns);
          double d0 = delay_at (rd[k].delay, a->end_ns), d1 = delay_at (rd[k].delay, b->start_ns);
          out->gap_ns[k] += gap;
          if (d0 >= 0 && d1 > d0)
            out->desched_ns[k] += MIN (d1 - d0, gap);
        }
      g_array_free (rd[k].work, TRUE);
      g_array_free (rd[k].delay, TRUE);
    }
}

static double
share (const Measured *m)
{
  double g = 0, d = 0;
  for (int k = 0; k < m->n_ranks; k++)
    {
      g += m->gap_ns[k];
      d += m->desched_ns[k];
    }
  return g > 0 ? d / g : 0;
}

/* Runs the CLI pinned to the first n_cores cores this process may use. */
static void
run_pinned (PpTestCtx *ctx, const char *trace, int n_cores, const char *ranks, gboolean pin)
{
  cpu_set_t old, set;
  char *out = NULL, *err = NULL;
  int rc, got = 0;

  g_assert_cmpint (sched_getaffinity (0, sizeof old, &old), ==, 0);
  CPU_ZERO (&set);
  for (int c = 0; c < CPU_SETSIZE && got < n_cores; c++)
    if (CPU_ISSET (c, &old))
      {
        CPU_SET (c, &set);
        got++;
      }
  if (got < n_cores)
    {
      g_test_skip ("fewer usable cores than the run needs");
      return;
    }
  g_assert_cmpint (sched_setaffinity (0, sizeof set, &set), ==, 0);
  if (pin)
    rc = pp_test_cli_run (ctx->envp, &out, &err, "run", "-s", "1f1b", "-p", ranks, "-m", "8",
                          "--steps", "12", "--no-live", "--trace", trace, "--pin", NULL);
  else
    rc = pp_test_cli_run (ctx->envp, &out, &err, "run", "-s", "1f1b", "-p", ranks, "-m", "8",
                          "--steps", "12", "--no-live", "--trace", trace, NULL);
  g_assert_cmpint (sched_setaffinity (0, sizeof old, &old), ==, 0);
  if (rc != 0)
    g_error ("run failed: %s", err);
  g_free (out);
  g_free (err);
}

static int
schedstat_available (void)
{
  return g_file_test ("/proc/thread-self/schedstat", G_FILE_TEST_EXISTS);
}

/* Where the analysis gives runtime_parts: descheduled > 0 on every rank,
 * in its mean over the steps analysed (idle[r], the export's first
 * n_ranks runtime_parts; one step of a rank may have none, as the load
 * goes). */
static void
check_why_parts (PpTestCtx *ctx, const char *trace, int n_ranks)
{
  char *out = NULL, *err = NULL;
  int rc = pp_test_cli_run (ctx->envp, &out, &err, "export", trace, "--format", "why", "-o", "-", NULL);
  g_assert_cmpint (rc, ==, 0);
  if (strstr (out, "\"runtime_parts\"") == NULL)
    g_test_message ("export --format why has no runtime_parts yet: its check is skipped");
  else
    {
      /* each rank's runtime_parts holds "descheduled": a positive number */
      int seen = 0;
      for (const char *p = strstr (out, "\"runtime_parts\""); p != NULL && seen < n_ranks;
           p = strstr (p + 1, "\"runtime_parts\""))
        {
          const char *d = strstr (p, "\"descheduled\""), *next = strstr (p + 1, "\"runtime_parts\"");
          g_assert_nonnull (d);
          g_assert_true (next == NULL || d < next);
          const char *colon = strchr (d, ':');
          g_assert_nonnull (colon);
          double v = g_ascii_strtod (colon + 1, NULL);
          g_test_message ("why: descheduled %.6f s", v);
          g_assert_cmpfloat (v, >, 0);
          seen++;
        }
      g_assert_cmpint (seen, ==, n_ranks);
    }
  g_free (out);
  g_free (err);
}

static void
test_oversubscribed (void)
{
  PpTestCtx ctx;
  Measured over, own;

  if (!schedstat_available ())
    {
      g_test_skip ("this kernel gives no /proc/thread-self/schedstat");
      return;
    }
  pp_test_ctx_init (&ctx, "pp-run-host");
  char *t_over = pp_test_ctx_path (&ctx, "over.pptrace");
  char *t_own = pp_test_ctx_path (&ctx, "own.pptrace");

  run_pinned (&ctx, t_over, 1, "4", FALSE);
  measure (t_over, &over);
  g_assert_cmpint (over.n_ranks, ==, 4);
  for (int k = 0; k < 4; k++)
    {
      g_test_message ("4 ranks on 1 core, rank %d: %d run-delay samples, gaps %.3f ms, "
                      "descheduled %.3f ms", k, over.n_delay[k], over.gap_ns[k] / 1e6,
                      over.desched_ns[k] / 1e6);
      g_assert_cmpint (over.n_delay[k], >, 0);
      g_assert_cmpint (over.n_cpu[k], ==, over.n_delay[k]);   /* one read gives both */
      g_assert_cmpfloat (over.last_cpu[k], >, 0);
      g_assert_cmpint (over.n_self[k], >, 0);
      g_assert_cmpfloat (over.last_self[k], >, 0);
      g_assert_cmpfloat (over.gap_ns[k], >, 0);
      g_assert_cmpfloat (over.desched_ns[k], >, 0);
    }
  check_why_parts (&ctx, t_over, 4);

  run_pinned (&ctx, t_own, 2, "2", TRUE);
  if (!g_test_failed () && g_file_test (t_own, G_FILE_TEST_EXISTS))
    {
      measure (t_own, &own);
      g_assert_cmpint (own.n_ranks, ==, 2);
      for (int k = 0; k < 2; k++)
        g_assert_cmpint (own.n_delay[k], >, 0);
      g_test_message ("descheduled share of the gaps: %.4f oversubscribed, %.4f a core per rank "
                      "(compared in bench-desched: it depends on the machine's other load)",
                      share (&over), share (&own));
      g_assert_cmpfloat (share (&over), >, 0);
    }
  g_free (t_over);
  g_free (t_own);
  pp_test_ctx_clear (&ctx);
}

/* The host's own work between blocks is recorded (HOST_SCHEDULE spans
 * come where a rank's loop ran long enough), and nothing changes a trace
 * without a probe (a run without --trace is the same run). */
static void
test_host_kinds (void)
{
  PpTestCtx ctx;
  char *out = NULL, *err = NULL;

  pp_test_ctx_init (&ctx, "pp-run-host");
  char *t = pp_test_ctx_path (&ctx, "k.pptrace");
  int rc = pp_test_cli_run (ctx.envp, &out, &err, "run", "-s", "gpipe", "-p", "2", "-m", "4",
                            "--steps", "3", "--no-live", "--trace", t, NULL);
  g_assert_cmpint (rc, ==, 0);
  g_free (out);
  g_free (err);
  rc = pp_test_cli_run (ctx.envp, &out, &err, "info", t, NULL);
  g_assert_cmpint (rc, ==, 0);
  /* the batch made on the main thread, a step; zeroing the gradients, a rank and step */
  g_assert_nonnull (strstr (out, "HOST_DATA 4"));   /* the first batch, then one made in each step */
  g_assert_nonnull (strstr (out, "HOST_ZERO_GRAD 6"));
  g_free (out);
  g_free (err);
  g_free (t);
  pp_test_ctx_clear (&ctx);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/run-host/oversubscribed", test_oversubscribed);
  g_test_add_func ("/run-host/host-kinds", test_host_kinds);
  return g_test_run ();
}
