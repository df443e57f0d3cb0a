/* pp-synth-mesh.c — writes the per-process trace files of a synthetic
 * P × D job (P pipeline ranks, D data-parallel replicas), as the Python
 * hook's ranks write them: BASE.rank<G> per process, G = pp · D + dp
 * (torchtitan's layout, pp outermost), each with its description, its
 * RANK frame, its PROCESS frame (trace format 1.4) and every later frame
 * tagged, its own untimed plan, and STEPS steps of M micro-batches in
 * GPipe or 1F1B order, timed by a small simulation (F 1 ms, B 2 ms; a
 * replica dp runs dp × 10 µs later, so that replicas differ).
 *
 * Usage: pp-synth-mesh BASE P D M STEPS gpipe|1f1b [--job-id HEX] [--collide]
 *                      [--comm] [--offsets] [--unplaced] [--collectives] [--straggler DP]
 *                      [--slow-stage DP] [--early DP] [--wall UNIX_NS]
 *   --collide:  the last process claims the place of the one before it
 *               (a job whose mesh was read wrong), for merge's refusal.
 *   --comm:     each block's hand-off too: SEND_F/RECV_F after a forward,
 *               SEND_B/RECV_B after a backward (100 µs, peer_rank set,
 *               within the replica), and the last rank's loss a step
 *               (1 / (step + 1) + dp / 100: each replica its own).
 *   --offsets:  replicas on two hosts: an odd dp's clock runs 5 s ahead
 *               (+ 1 ms a pipeline rank) and its process writes the
 *               CLOCK_OFFSET that brings it back; aligned, its times are
 *               those written without the option.
 *   --unplaced: the hook could not read the places: PROCESS frames
 *               flagged "place not read" (dp 0 in every file), and the
 *               global ranks laid out G = (D - 1 - dp) · P + pp, so that
 *               numbering by global rank reverses the job's dp.
 *   --collectives: every process counts its collectives (format 1.5), at
 *               each step's end: COLLECTIVE_CALLS 10 + G + step, and
 *               COLLECTIVE_BYTES 1 MiB x (G + 1), G its global rank.
 *   --slow-stage: replica DP's last pipeline rank runs its blocks twice as
 *               long (a slow device): the replicas then idle differently,
 *               for the analyses over replicas (each rank's median one).
 *   --early:    every replica but DP runs 1.5 ms late, and the job
 *               describes itself 1 ms in (start_monotonic_ns): replica DP,
 *               which the timeline does not show where DP > 0, began
 *               before the description, as a process may start before the
 *               one that describes the job (the exports' zero).
 *   --wall:     the description's wall clock: start_unix_ns UNIX_NS at
 *               its start_monotonic_ns, for export --clock realtime;
 *               without, the description has none.
 *   --straggler: replica DP runs every step 1.5 ms late (a slow host), for
 *               the folded view's mark and info's slowest replica.
 *   --loss-blocks: the last rank's forwards end in the loss computation:
 *               the last 40% of each is a LOSS block (format 1.9) of its
 *               micro-batch, the forward the first 60% (times unchanged).
 *
 * One step is simulated once (every replica runs the same one, shifted),
 * so 16 x 128 at M = 32 takes a second or so.
 *
 * A test tool (tests/), not installed: the tests of merge, info, the
 * exports and the timeline model use it at small sizes (2 × 2, 4 × 8), and
 * it measures them at 16 × 128. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace.h"

#define F_NS 1000000
#define B_NS 2000000

typedef struct {
  int kind;   /* PP_SPAN_F or PP_SPAN_B */
  int mb;
} Act;

/* Rank r's order of one step: GPipe all forwards then all backwards;
 * 1F1B P - 1 - r forwards first, then one forward one backward, then the
 * backwards left. */
static int
order (int one_f_one_b, int P, int M, int r, Act *a)
{
  int n = 0;
  if (!one_f_one_b)
    {
      for (int m = 0; m < M; m++)
        a[n++] = (Act) { PP_SPAN_F, m };
      for (int m = 0; m < M; m++)
        a[n++] = (Act) { PP_SPAN_B, m };
      return n;
    }
  int warm = P - 1 - r < M ? P - 1 - r : M;
  int f = 0, b = 0;
  for (; f < warm; f++)
    a[n++] = (Act) { PP_SPAN_F, f };
  while (b < M)
    {
      if (f < M)
        a[n++] = (Act) { PP_SPAN_F, f++ };
      a[n++] = (Act) { PP_SPAN_B, b++ };
    }
  return n;
}

/* How long a block of kind takes on rank r (slow_rank: twice as long). */
static int64_t
block_ns (int kind, int r, int slow_rank)
{
  return (kind == PP_SPAN_F ? F_NS : B_NS) * (r == slow_rank ? 2 : 1);
}

/* The end times of one step of every rank, by list scheduling: an action
 * starts when its rank is free and what it needs (the forward of the rank
 * before, the backward of the rank after, its own forward) has ended;
 * rank slow_rank's blocks twice as long (-1: none). */
static void
simulate (int one_f_one_b, int P, int M, int64_t t0, int slow_rank, int64_t *f_end, int64_t *b_end)
{
  Act *a = malloc (sizeof *a * (size_t) (2 * M));
  int *next = calloc ((size_t) P, sizeof *next);
  int64_t *free_at = malloc (sizeof *free_at * (size_t) P);
  for (int r = 0; r < P; r++)
    free_at[r] = t0;
  for (int i = 0; i < P * M; i++)
    f_end[i] = b_end[i] = -1;
  int left = 2 * P * M;
  while (left > 0)
    for (int r = 0; r < P; r++)
      {
        int n = order (one_f_one_b, P, M, r, a);
        while (next[r] < n)
          {
            Act x = a[next[r]];
            int64_t need = free_at[r];
            if (x.kind == PP_SPAN_F && r > 0)
              {
                if (f_end[(r - 1) * M + x.mb] < 0)
                  break;
                need = need > f_end[(r - 1) * M + x.mb] ? need : f_end[(r - 1) * M + x.mb];
              }
            if (x.kind == PP_SPAN_B && r < P - 1)
              {
                if (b_end[(r + 1) * M + x.mb] < 0)
                  break;
                need = need > b_end[(r + 1) * M + x.mb] ? need : b_end[(r + 1) * M + x.mb];
              }
            int64_t end = need + block_ns (x.kind, r, slow_rank);
            (x.kind == PP_SPAN_F ? f_end : b_end)[r * M + x.mb] = end;
            free_at[r] = end;
            next[r]++;
            left--;
          }
      }
  free (a);
  free (next);
  free (free_at);
}

static int
die (const char *what, const PpError *err)
{
  fprintf (stderr, "pp-synth-mesh: %s: %s\n", what, err->msg);
  return 1;
}

int
main (int argc, char **argv)
{
  if (argc < 7)
    {
      fprintf (stderr, "usage: pp-synth-mesh BASE P D M STEPS gpipe|1f1b [--job-id HEX] [--collide] [--stuck G]\n");
      return 2;
    }
  const char *base = argv[1];
  int P = atoi (argv[2]), D = atoi (argv[3]), M = atoi (argv[4]), steps = atoi (argv[5]);
  int one_f_one_b = strcmp (argv[6], "1f1b") == 0;
  uint64_t job_id = 0;
  int collide = 0, comm = 0, offsets = 0, unplaced = 0, collectives = 0, straggler = -1, slow_dp = -1, early = -1;
  int stuck = -1;   /* --stuck G: the job ended while process G was stuck (issue 37) */
  int64_t wall = 0;
  int loss_blocks = 0;
  for (int i = 7; i < argc; i++)
    if (strcmp (argv[i], "--job-id") == 0 && i + 1 < argc)
      job_id = strtoull (argv[++i], NULL, 16);
    else if (strcmp (argv[i], "--collide") == 0)
      collide = 1;
    else if (strcmp (argv[i], "--comm") == 0)
      comm = 1;
    else if (strcmp (argv[i], "--offsets") == 0)
      offsets = 1;
    else if (strcmp (argv[i], "--unplaced") == 0)
      unplaced = 1;
    else if (strcmp (argv[i], "--collectives") == 0)
      collectives = 1;
    else if (strcmp (argv[i], "--stuck") == 0 && i + 1 < argc)
      stuck = atoi (argv[++i]);
    else if (strcmp (argv[i], "--straggler") == 0 && i + 1 < argc)
      straggler = atoi (argv[++i]);
    else if (strcmp (argv[i], "--loss-blocks") == 0)
      loss_blocks = 1;
    else if (strcmp (argv[i], "--slow-stage") == 0 && i + 1 < argc)
      slow_dp = atoi (argv[++i]);
    else if (strcmp (argv[i], "--early") == 0 && i + 1 < argc)
      early = atoi (argv[++i]);
    else if (strcmp (argv[i], "--wall") == 0 && i + 1 < argc)
      wall = strtoll (argv[++i], NULL, 10);
    else
      {
        fprintf (stderr, "pp-synth-mesh: unknown option '%s'\n", argv[i]);
        return 2;
      }
  if (P < 1 || D < 1 || M < 1 || steps < 1 || P * D > PP_TRACE_MAX_PROCESSES)
    {
      fprintf (stderr, "pp-synth-mesh: P, D, M, STEPS must be >= 1 and P x D < %d\n",
               PP_TRACE_MAX_PROCESSES);
      return 2;
    }

  int64_t *f_end = malloc (sizeof *f_end * (size_t) (P * M));
  int64_t *b_end = malloc (sizeof *b_end * (size_t) (P * M));
  int64_t *f_slow = malloc (sizeof *f_slow * (size_t) (P * M));
  int64_t *b_slow = malloc (sizeof *b_slow * (size_t) (P * M));
  Act *a = malloc (sizeof *a * (size_t) (2 * M));
  PpTracePlanAction *plan = calloc ((size_t) (2 * M), sizeof *plan);
  PpSpan *spans = malloc (sizeof *spans * (size_t) (7 * M));
  const int64_t step_ns = (int64_t) (M + P) * 3 * (F_NS + B_NS);
  PpTraceDescription desc = { .n_ranks = P, .n_microbatches = M, .n_virtual = 1 };
  snprintf (desc.schedule, sizeof desc.schedule, "%s", one_f_one_b ? "1F1B" : "GPipe");
  snprintf (desc.backend, sizeof desc.backend, "cpu");
  snprintf (desc.host, sizeof desc.host, "synth");
  snprintf (desc.model, sizeof desc.model, "synthetic %d x %d mesh", P, D);
  snprintf (desc.cmdline, sizeof desc.cmdline, "pp-synth-mesh");
  desc.start_unix_ns = wall;
  desc.start_monotonic_ns = early >= 0 ? 1000000 : 0;

  /* one step from time 0; each replica's steps are this one, shifted */
  simulate (one_f_one_b, P, M, 0, -1, f_end, b_end);
  simulate (one_f_one_b, P, M, 0, P - 1, f_slow, b_slow);   /* --slow-stage's replica */
  for (int g = 0; g < P * D; g++)
    {
      int r = g / D, dp = g % D;
      if (unplaced)
        {
          r = g % P;
          dp = D - 1 - g / P;
        }
      /* --slow-stage: this replica's step, its last rank slow */
      int slow = dp == slow_dp ? P - 1 : -1;
      const int64_t *fe = slow >= 0 ? f_slow : f_end, *be = slow >= 0 ? b_slow : b_end;
      /* --offsets: this process's clock against the reference */
      int64_t skew = offsets && dp % 2 ? 5000000000 + (int64_t) r * 1000000 : 0;
      PpTraceProcess place = { .process = g, .rank = r, .coord = { r, dp, 0, 0, 0 },
                               .size = { P, D, 1, 1, 1 }, .pid = 1000 + g };
      if (unplaced)
        {
          /* what the hook knows: its pipeline rank, nothing more */
          place.coord[1] = 0;
          place.size[1] = 1;
          place.flags = PP_TRACE_PROCESS_UNPLACED;
        }
      snprintf (place.host, sizeof place.host, "node%d", g / 8);
      if (collide && g == P * D - 1 && D > 1)
        place.coord[1] = dp - 1;
      char path[4096];
      snprintf (path, sizeof path, "%s.rank%d", base, g);
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_path (path, PP_TRACE_NATIVE, &err);
      if (w == NULL)
        return die (path, &err);
      if (job_id != 0)
        pp_trace_writer_set_job_id (w, job_id, &err);
      /* as the hook: description and RANK at open, then the place, then
       * everything tagged */
      if (pp_trace_write_description (w, &desc, &err) != PP_OK
          || pp_trace_write_rank (w, r, place.pid, place.host, &err) != PP_OK
          || pp_trace_writer_set_process (w, g, &err) != PP_OK
          || pp_trace_write_process (w, &place, &err) != PP_OK
          || (offsets && skew != 0 && pp_trace_write_clock_offset (w, r, -skew, &err) != PP_OK))
        return die (path, &err);
      int n = order (one_f_one_b, P, M, r, a);
      for (int i = 0; i < n; i++)
        plan[i] = (PpTracePlanAction) { .kind = a[i].kind == PP_SPAN_F ? PP_TRACE_ACT_F : PP_TRACE_ACT_B,
                                        .stage = r, .microbatch = a[i].mb, .sub_kind = -1,
                                        .sub_stage = -1, .sub_microbatch = -1 };
      if (pp_trace_write_rank_plan (w, r, plan, (size_t) n, 0, &err) != PP_OK)
        return die (path, &err);
      for (int s = 0; s < steps; s++)
        {
          int64_t t0 = (int64_t) s * step_ns + (int64_t) dp * 10000
                       + (dp == straggler ? 1500000 : 0) + (early >= 0 && dp != early ? 1500000 : 0);
          if (pp_trace_write_step_marker (w, r, s, PP_TRACE_STEP_BEGIN, t0 + skew, &err) != PP_OK)
            return die (path, &err);
          int k = 0;
          int64_t last = t0;
          for (int i = 0; i < n; i++)
            {
              int64_t end = t0 + (a[i].kind == PP_SPAN_F ? fe : be)[r * M + a[i].mb];
              spans[k++] = (PpSpan) { .start_ns = end - block_ns (a[i].kind, r, slow) + skew,
                                      .end_ns = end + skew, .rank = r, .stage = r, .microbatch = a[i].mb,
                                      .step = s, .kind = (uint16_t) a[i].kind, .device = 0xffff,
                                      .peer_rank = -1 };
              last = end > last ? end : last;
              if (loss_blocks && r == P - 1 && a[i].kind == PP_SPAN_F)
                {
                  /* the forward's last 40%: the loss computation */
                  PpSpan *fwd = &spans[k - 1];
                  int64_t cut = fwd->end_ns - (fwd->end_ns - fwd->start_ns) * 2 / 5;
                  spans[k] = *fwd;
                  spans[k].kind = PP_SPAN_LOSS;
                  spans[k].start_ns = cut;
                  fwd->end_ns = cut;
                  k++;
                }
              if (!comm)
                continue;
              /* the hand-off out of this block, and the one into it */
              int fwd = a[i].kind == PP_SPAN_F, to = fwd ? r + 1 : r - 1;
              if (to >= 0 && to < P)
                spans[k++] = (PpSpan) { .start_ns = end + skew, .end_ns = end + 100000 + skew, .rank = r,
                                        .stage = r, .microbatch = a[i].mb, .step = s,
                                        .kind = fwd ? PP_SPAN_SEND_F : PP_SPAN_SEND_B, .device = 0xffff,
                                        .peer_rank = to, .bytes = 4096 };
              int from = fwd ? r - 1 : r + 1;
              if (from >= 0 && from < P)
                {
                  int64_t sent = t0 + (fwd ? fe : be)[from * M + a[i].mb];
                  spans[k++] = (PpSpan) { .start_ns = sent + skew, .end_ns = sent + 100000 + skew, .rank = r,
                                          .stage = r, .microbatch = a[i].mb, .step = s,
                                          .kind = fwd ? PP_SPAN_RECV_F : PP_SPAN_RECV_B, .device = 0xffff,
                                          .peer_rank = from, .bytes = 4096 };
                }
            }
          if (pp_trace_write_spans (w, spans, (size_t) k, &err) != PP_OK
              || pp_trace_write_step_marker (w, r, s, PP_TRACE_STEP_END, last + skew, &err) != PP_OK)
            return die (path, &err);
          PpCounter loss = { .time_ns = last + skew, .value = 1.0 / (s + 1) + dp / 100.0, .rank = r, .step = s,
                             .kind = PP_COUNTER_LOSS };
          if (comm && r == P - 1 && pp_trace_write_counter (w, &loss, &err) != PP_OK)
            return die (path, &err);
          PpCounter calls = { .time_ns = last + skew, .value = 10 + g + s, .rank = r, .step = s,
                              .kind = PP_COUNTER_COLLECTIVE_CALLS };
          PpCounter bytes = { .time_ns = last + skew, .value = 1048576.0 * (g + 1), .rank = r, .step = s,
                              .kind = PP_COUNTER_COLLECTIVE_BYTES };
          if (collectives && (pp_trace_write_counter (w, &calls, &err) != PP_OK
                              || pp_trace_write_counter (w, &bytes, &err) != PP_OK))
            return die (path, &err);
        }
      /* --stuck G (issue 37): the job ended while process G was in a
       * forward (mb 1 of the step after the last, begun 40 s before the
       * end), its pipeline peer before it waiting to receive its gradient:
       * each one's last OPEN frame (format 1.10) */
      int gp = stuck >= 0 ? stuck / D : -1, gd = stuck >= 0 ? stuck % D : -1;
      if (stuck >= 0 && (g == stuck || (dp == gd && r == gp - 1)))
        {
          int64_t end = (int64_t) steps * step_ns + skew;
          PpTraceOpen o = { .time_ns = end + 41000000000LL, .start_ns = end + 1000000000LL, .rank = r,
                            .step = steps, .stage = r, .microbatch = 1, .peer_rank = g == stuck ? -1 : gp,
                            .kind = g == stuck ? PP_SPAN_F : PP_SPAN_RECV_B };
          if (g == stuck)
            snprintf (o.where, sizeof o.where, "train.py:88 forward");
          if (pp_trace_write_open (w, &o, &err) != PP_OK)
            return die (path, &err);
        }
      if (pp_trace_writer_close (w, &err) != PP_OK)
        return die (path, &err);
    }
  free (f_end);
  free (b_end);
  free (f_slow);
  free (b_slow);
  free (a);
  free (plan);
  free (spans);
  return 0;
}
