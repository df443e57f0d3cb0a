/* The wait-for graph of a stuck job (issue 37, runtime/pp-stuck.c), on
 * processes built by hand: a root others wait for (through a receive and
 * through dp collectives), a deadlock of two receives, a collective with
 * one member missing, and a job where nobody waits.  The line is asserted
 * whole: it is what every view prints. */
#include <glib.h>
#include <string.h>

#include "pp-event.h"
#include "pp-stuck.h"

#define S 1000000000LL

/* Process g of a pp x dp mesh, global rank g = dp * pp_size + pp, with
 * an open action of kind (-1: none). */
static PpStuckProcess
proc (int pp, int dp, int pp_size, int dp_size, int kind, int stage, int mb, int step, int peer)
{
  PpStuckProcess p;
  memset (&p, 0, sizeof p);
  p.process = dp * pp_size + pp;
  p.coord[PP_TRACE_MESH_PP] = pp;
  p.coord[PP_TRACE_MESH_DP] = dp;
  for (int d = 0; d < PP_TRACE_MESH_DIMS; d++)
    p.size[d] = 1;
  p.size[PP_TRACE_MESH_PP] = pp_size;
  p.size[PP_TRACE_MESH_DP] = dp_size;
  p.pid = 100 + p.process;
  g_strlcpy (p.host, "H", sizeof p.host);
  p.has_open = TRUE;
  p.open.rank = pp;
  p.open.kind = kind;
  p.open.stage = stage;
  p.open.microbatch = mb;
  p.open.step = step;
  p.open.peer_rank = peer;
  p.open.start_ns = 10 * S;
  p.open.time_ns = 51 * S;
  return p;
}

/* PP 2 x DP 2: process 3 (pp 1, dp 1) sleeps inside a forward; its pp
 * peer 2 (pp 0 dp 1) waits to receive from it, its replica 1 in the dp
 * all-reduce of stage 1, and 0 in the all-reduce of stage 0 that 2 never
 * joins. */
static void
test_root (void)
{
  PpStuckProcess ps[4] = {
    proc (0, 0, 2, 2, PP_SPAN_REDUCE_GRAD, 0, -1, 2, -1),
    proc (0, 1, 2, 2, PP_SPAN_RECV_B, 0, 1, 2, 1),
    proc (1, 0, 2, 2, PP_SPAN_WAIT_REDUCE_GRAD, 1, -1, 2, -1),
    proc (1, 1, 2, 2, PP_SPAN_F, 1, 2, 2, -1),
  };
  g_strlcpy (ps[3].open.where, "train.py:88 forward", sizeof ps[3].open.where);
  PpStuckVerdict v;
  char line[1024];
  g_assert_cmpint (pp_stuck_diagnose (ps, 4, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpint (v.n, ==, 1);
  g_assert_cmpint (v.who[0], ==, 3);
  g_assert_cmpint (v.n_waiting, ==, 3);
  g_assert_cmpstr (line, ==,
                   "stuck: process 3 (pp 1 dp 1, host H, pid 103) in F mb 2 of step 2 for 41 s, in "
                   "train.py:88 forward; processes 0, 1, 2 wait for it: 0 in the dp all-reduce of stage 0; "
                   "1 in the dp all-reduce of stage 1; 2 in RECV_B mb 1 from 3\n");

  /* process 1 in a receive from its own pp rank (itself: no edge) waits
   * for nobody and nobody for it: not a waiter, not a root */
  ps[2] = proc (1, 0, 2, 2, PP_SPAN_RECV_B, 1, 1, 2, 1);
  g_assert_cmpint (pp_stuck_diagnose (ps, 4, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpint (v.n, ==, 1);
  g_assert_cmpint (v.who[0], ==, 3);
  g_assert_cmpint (v.n_waiting, ==, 2);
  g_assert_nonnull (strstr (line, "; processes 0, 2 wait for it: 0 in the dp all-reduce of stage 0; 2 in RECV_B mb 1 from 3\n"));

  /* a line too short is cut, never overrun */
  char small[16];
  memset (small, 'x', sizeof small);
  g_assert_cmpint (pp_stuck_diagnose (ps, 4, &v, small, sizeof small), ==, PP_STUCK_ROOT);
  g_assert_cmpuint (strlen (small), ==, sizeof small - 1);
}

/* PyTorch #172668's deadlock: rank 0 receives a backward from 1 before it
 * sends its forward, rank 1 receives that forward first. */
static void
test_cycle (void)
{
  PpStuckProcess ps[2] = {
    proc (0, 0, 2, 1, PP_SPAN_RECV_B, 0, 0, 0, 1),
    proc (1, 0, 2, 1, PP_SPAN_RECV_F, 1, 0, 0, 0),
  };
  PpStuckVerdict v;
  char line[1024];
  g_assert_cmpint (pp_stuck_diagnose (ps, 2, &v, line, sizeof line), ==, PP_STUCK_CYCLE);
  g_assert_cmpint (v.n, ==, 2);
  g_assert_cmpint (v.who[0], ==, 0);
  g_assert_cmpint (v.who[1], ==, 1);
  g_assert_cmpstr (line, ==,
                   "stuck: deadlock: process 0 (pp 0, host H, pid 100) in RECV_B mb 0 from 1 of step 0 for 41 s, "
                   "process 1 (pp 1, host H, pid 101) in RECV_F mb 0 from 0 of step 0 for 41 s; "
                   "each waits for the next, none can go on\n");

  /* the same cycle given the other way round is said the same way */
  PpStuckProcess swapped[2] = { ps[1], ps[0] };
  char again[1024];
  g_assert_cmpint (pp_stuck_diagnose (swapped, 2, &v, again, sizeof again), ==, PP_STUCK_CYCLE);
  g_assert_cmpstr (again, ==, line);
  g_assert_cmpint (v.who[0], ==, 0);

  /* a third process waiting on the cycle does not make a root */
  PpStuckProcess three[3] = {
    proc (0, 0, 3, 1, PP_SPAN_RECV_B, 0, 0, 0, 1),
    proc (1, 0, 3, 1, PP_SPAN_SEND_F, 1, 0, 0, 0),
    proc (2, 0, 3, 1, PP_SPAN_RECV_F, 2, 0, 0, 1),
  };
  g_assert_cmpint (pp_stuck_diagnose (three, 3, &v, line, sizeof line), ==, PP_STUCK_CYCLE);
  g_assert_cmpint (v.n, ==, 2);
  g_assert_nonnull (strstr (line, "SEND_F mb 0 to 0"));
}

/* A dp all-reduce of three replicas that one never joins: it is outside
 * any action (in the job's own code), the other two wait for it; one that
 * closed (ended) is a root as well; a heartbeat that stopped says so. */
static void
test_collective_missing (void)
{
  PpStuckProcess ps[3] = {
    proc (0, 0, 1, 3, PP_SPAN_REDUCE_GRAD, 0, -1, 4, -1),
    proc (0, 1, 1, 3, PP_SPAN_REDUCE_GRAD, 0, -1, 4, -1),
    proc (0, 2, 1, 3, -1, -1, -1, -1, -1),
  };
  ps[2].open.start_ns = 30 * S;
  PpStuckVerdict v;
  char line[1024];
  g_assert_cmpint (pp_stuck_diagnose (ps, 3, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpint (v.who[0], ==, 2);
  g_assert_cmpstr (line, ==,
                   "stuck: process 2 (pp 0 dp 2, host H, pid 102) in no recorded action for 21 s; processes 0, 1 "
                   "wait for it: 0 and 1 in the dp all-reduce of stage 0\n");

  ps[2].open.flags = PP_TRACE_OPEN_CLOSED;
  g_assert_cmpint (pp_stuck_diagnose (ps, 3, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_nonnull (strstr (line, "process 2 (pp 0 dp 2, host H, pid 102) has closed (it ended);"));
  ps[2].open.flags = 0;
  ps[2].gone = TRUE;
  ps[2].open.kind = PP_SPAN_F;
  g_assert_cmpint (pp_stuck_diagnose (ps, 3, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_nonnull (strstr (line, "stopped sending its heartbeat"));

  /* a member in another step's all-reduce has not arrived in this one */
  ps[2] = proc (0, 2, 1, 3, PP_SPAN_REDUCE_GRAD, 0, -1, 3, -1);
  ps[2].gone = FALSE;
  g_assert_cmpint (pp_stuck_diagnose (ps, 3, &v, line, sizeof line), !=, PP_STUCK_NONE);
  g_assert_cmpint (v.n_waiting, ==, 3);
}

/* Everyone in work, or in a collective all joined: nobody waits. */
static void
test_none (void)
{
  PpStuckProcess ps[3] = {
    proc (0, 0, 1, 2, PP_SPAN_REDUCE_GRAD, 0, -1, 4, -1),
    proc (0, 1, 1, 2, PP_SPAN_WAIT_REDUCE_GRAD, 0, -1, 4, -1),
    proc (0, 0, 1, 1, PP_SPAN_F, 0, 0, 0, -1),
  };
  ps[2].process = 7;
  ps[2].coord[PP_TRACE_MESH_TP] = 1;   /* another group */
  PpStuckVerdict v;
  char line[64] = "x";
  g_assert_cmpint (pp_stuck_diagnose (ps, 3, &v, line, sizeof line), ==, PP_STUCK_NONE);
  g_assert_cmpstr (line, ==, "");
  g_assert_cmpint (v.n_waiting, ==, 0);
  g_assert_cmpint (pp_stuck_diagnose (NULL, 0, NULL, NULL, 0), ==, PP_STUCK_NONE);
}

/* A trace's frames as info and profile take them: each process's last
 * OPEN frame kept (one a process, the last wins), its place from its
 * PROCESS frame; a trace without places: processes by pipeline rank. */
static void
test_from_places (void)
{
  PpTraceProcess procs[2] = {
    { .process = 0, .rank = 0, .coord = { 0, 0, 0, 0, 0 }, .size = { 2, 1, 1, 1, 1 }, .pid = 7, .host = "a" },
    { .process = 1, .rank = 1, .coord = { 1, 0, 0, 0, 0 }, .size = { 2, 1, 1, 1, 1 }, .pid = 8, .host = "b" },
  };
  PpTraceOpen recv = { .time_ns = 9 * S, .start_ns = 2 * S, .rank = 0, .step = 0, .stage = 0, .microbatch = 0,
                       .peer_rank = 1, .kind = PP_SPAN_RECV_B };
  PpTraceOpen f = { .time_ns = 9 * S, .start_ns = 1 * S, .rank = 1, .step = 0, .stage = 1, .microbatch = 3,
                    .peer_rank = -1, .kind = PP_SPAN_F };
  PpStuckOpen *opens = NULL;
  size_t n = 0, cap = 0;
  PpTraceOpen early = f;
  early.kind = PP_SPAN_B;
  g_assert_true (pp_stuck_keep_open (&opens, &n, &cap, 1, &early));
  g_assert_true (pp_stuck_keep_open (&opens, &n, &cap, 0, &recv));
  g_assert_true (pp_stuck_keep_open (&opens, &n, &cap, 1, &f));   /* the last wins */
  g_assert_cmpuint (n, ==, 2);
  PpStuckVerdict v;
  char line[512];
  g_assert_cmpint (pp_stuck_from_places (procs, 2, opens, n, NULL, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpstr (line, ==, "stuck: process 1 (pp 1, host b, pid 8) in F mb 3 of step 0 for 8 s; process 0 "
                             "waits for it: 0 in RECV_B mb 0 from 1\n");
  /* its heartbeat stopped: said so (gone is by index of opens: process 1 came first) */
  g_assert_cmpint (opens[0].process, ==, 1);
  const bool gone[2] = { true, false };
  g_assert_cmpint (pp_stuck_from_places (procs, 2, opens, n, gone, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_nonnull (strstr (line, "process 1 (pp 1, host b, pid 8) stopped sending its heartbeat"));
  /* no PROCESS frames: by pipeline rank */
  g_assert_cmpint (pp_stuck_from_places (NULL, 0, opens, n, NULL, &v, line, sizeof line), ==, PP_STUCK_ROOT);
  g_assert_cmpint (v.who[0], ==, 1);
  g_assert_nonnull (strstr (line, "stuck: process 1 (pp 1) in F mb 3"));
  g_free (opens);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/stuck/root", test_root);
  g_test_add_func ("/stuck/cycle", test_cycle);
  g_test_add_func ("/stuck/collective-missing", test_collective_missing);
  g_test_add_func ("/stuck/none", test_none);
  g_test_add_func ("/stuck/from-places", test_from_places);
  return g_test_run ();
}
