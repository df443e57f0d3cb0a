/* pp-why-runtime.c — runtime's parts (pp-why-runtime.h has the rule). */
#include "pp-why-runtime.h"
#include "pp-schedule-rules.h"
#include "pp-why-gaps-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const part_names[] = {
  "descheduled", "gc", "host_schedule", "host_loss", "host_data", "host_zero_grad",
  "probe", "user_kernels", "launch_gap", "host_other", "peer_late", "replica_late", "unattributed",
};

/* docs/why.md's "Inside runtime" says the same: change both together */
static const char *const part_meanings[] = {
  "the rank's thread runnable but not running (the kernel's run-queue delay)",
  "Python's garbage collector pausing the thread (another thread's collection outside its waits)",
  "the schedule's own code between actions",
  "the loss function run outside a block",
  "data loading, batch splitting",
  "zero_grad and gradient bookkeeping",
  "pipescope's own recording (shown, never hidden)",
  "the rank's device kernels between blocks, and its GPU busy inside a receive (NCCL's nccl:local)",
  "the device idle while the host was still launching its next work",
  "the thread on a CPU in the gap beyond the named host parts and the probe: host work the probe did not name",
  "waiting for a peer's output longer than the plan's transfer time",
  "waiting in a data-parallel collective for a slower replica to arrive (not the collective's own transfer)",
  "the rest (what no measured part explains)",
};

_Static_assert (sizeof part_names / sizeof part_names[0] == PP_WHY_N_RUNTIME_PARTS,
                "a name for each runtime part");
_Static_assert (sizeof part_meanings / sizeof part_meanings[0] == PP_WHY_N_RUNTIME_PARTS,
                "a meaning for each runtime part");

const char *
pp_why_runtime_part_meaning (int part)
{
  return part >= 0 && part < PP_WHY_N_RUNTIME_PARTS ? part_meanings[part] : NULL;
}

const char *
pp_why_runtime_part_name (int part)
{
  return part >= 0 && part < PP_WHY_N_RUNTIME_PARTS ? part_names[part] : NULL;
}

/* ---- one step --------------------------------------------------------------- */

typedef struct {
  double sum[PP_WHY_N_RUNTIME_PARTS];
} GapSum;

static PpStatus
sum_gap (void *user, int64_t a, int64_t b, int64_t ca, int64_t cb, const double *parts, PpError *err)
{
  GapSum *s = user;
  (void) a, (void) b, (void) ca, (void) cb, (void) err;
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    s->sum[k] += parts[k];
  return PP_OK;
}

/* The parts of rank x's gap [a, b] (none when empty), added to causes. */
static PpStatus
add_gap (PpWhyRuntimeIndex *ix, const RankIx *x, int64_t a, int64_t b, double *causes, PpError *err)
{
  if (b <= a)
    return PP_OK;
  double parts[PP_WHY_N_RUNTIME_PARTS];
  PpStatus st = pp_why_gap_parts (ix, x, a, b, a, b, parts, err);
  for (int k = 0; st == PP_OK && k < PP_WHY_N_RUNTIME_PARTS; k++)
    causes[k] += parts[k];
  return st;
}

/* The parts of rank q's gap that ends where its work starting nearest t
 * starts (the gap before a block), added to causes. */
static PpStatus
add_gap_before (PpWhyRuntimeIndex *ix, int q, int64_t t, double *causes, PpError *err)
{
  const RankIx *x = &ix->r[q];
  if (x->n_work == 0)
    return PP_OK;
  size_t g = pp_why_first_ending_after (x->work, x->n_work, t);
  if (g == x->n_work)
    g--;
  if (g == 0)
    return PP_OK;   /* its first work: no gap before it on record */
  return add_gap (ix, x, x->work[g - 1].b, x->work[g].a, causes, err);
}

/* The parts of rank q's gap that starts where its work ending at t ends
 * (the gap after a block: what the peer did between a block and handing
 * its output over), added to causes. */
static PpStatus
add_gap_after (PpWhyRuntimeIndex *ix, int q, int64_t t, double *causes, PpError *err)
{
  const RankIx *x = &ix->r[q];
  size_t g = t > INT64_MIN ? pp_why_first_ending_after (x->work, x->n_work, t - 1) : 0;
  if (g + 1 >= x->n_work)
    return PP_OK;   /* its last work: no gap after it on record */
  return add_gap (ix, x, x->work[g].b, x->work[g + 1].a, causes, err);
}

/* When the input of a block starting at start_s (seconds from lo_ns)
 * really came: the end of the rank's last recorded WAIT for a peer that
 * ends in (ready_s, start_s] (a receive returns when the data is there);
 * -INFINITY where the rank recorded none.  A local WAIT after it (an NCCL
 * receive's "nccl:local": its own GPU had not taken the data yet) is not
 * read: the data was there, and that time is user_kernels (rule 1). */
static double
measured_arrival (const RankIx *x, int64_t lo_ns, double ready_s, double start_s)
{
  if (x->n_arrive == 0)
    return -INFINITY;
  int64_t upto = lo_ns + (int64_t) llround (start_s * 1e9);
  size_t k = pp_why_first_ending_after (x->arrive, x->n_arrive, upto);
  if (k == 0)
    return -INFINITY;
  double end = (double) (x->arrive[k - 1].b - lo_ns) * 1e-9;
  return end > ready_s ? end : -INFINITY;
}

void
pp_why_runtime_reset (PpWhyIdle *w)
{
  memset (w->runtime_parts, 0, sizeof w->runtime_parts);
  memset (w->runtime_measured, 0, sizeof w->runtime_measured);
  memset (w->late_causes, 0, sizeof w->late_causes);
  w->runtime_parts[PP_WHY_RT_UNATTRIBUTED] = w->runtime > 0 ? w->runtime : 0;
  w->runtime_measured[PP_WHY_RT_UNATTRIBUTED] = 1;
  w->late_peer = -1;
  w->late_wait = 0;
  w->late_replica = -1;
  w->replica_wait = 0;
}

static int
cmp_block_rank_start (const void *x, const void *y)
{
  const PpWhyBlock *a = *(const PpWhyBlock *const *) x, *b = *(const PpWhyBlock *const *) y;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  return a->start < b->start ? -1 : a->start > b->start;
}

/* Where each (stage, micro-batch)'s forward and input gradient ran
 * (indices into the step's blocks, -1 none), as the critical path finds
 * them: cell stage * M + micro-batch. */
typedef struct {
  long *f_at, *g_at;
  int   S, M;
} BlockAt;

static int
block_at_init (BlockAt *at, const PpSchedule *s, const PpWhyBlock *bl, size_t nb)
{
  size_t cells = (size_t) s->n_stages * (size_t) s->microbatches;
  at->S = s->n_stages;
  at->M = s->microbatches;
  at->f_at = malloc ((cells + 1) * sizeof *at->f_at);
  at->g_at = malloc ((cells + 1) * sizeof *at->g_at);
  if (at->f_at == NULL || at->g_at == NULL)
    return -1;
  for (size_t c = 0; c < cells; c++)
    at->f_at[c] = at->g_at[c] = -1;
  for (size_t i = 0; i < nb; i++)
    {
      const PpWhyBlock *b = &bl[i];
      if (b->stage < 0 || b->stage >= at->S || b->microbatch < 0 || b->microbatch >= at->M)
        continue;
      size_t c = (size_t) b->stage * at->M + b->microbatch;
      if (b->kind == PP_ACT_F || b->kind == PP_ACT_OVERLAP_F_B)
        at->f_at[c] = (long) i;
      if (b->kind == PP_ACT_B || b->kind == PP_ACT_I)
        at->g_at[c] = (long) i;
      if (b->kind == PP_ACT_OVERLAP_F_B && (b->sub_kind == PP_ACT_B || b->sub_kind == PP_ACT_I)
          && b->sub_stage >= 0 && b->sub_stage < at->S && b->sub_microbatch >= 0 && b->sub_microbatch < at->M)
        at->g_at[(size_t) b->sub_stage * at->M + b->sub_microbatch] = (long) i;
    }
  return 0;
}

/* The block of (F or a gradient, stage, micro-batch) among bl; NULL none. */
static const PpWhyBlock *
find_block (const BlockAt *at, const PpWhyBlock *bl, int kind, int stage, int mb)
{
  if (stage < 0 || stage >= at->S || mb < 0 || mb >= at->M)
    return NULL;
  long i = (kind == PP_ACT_F ? at->f_at : at->g_at)[(size_t) stage * at->M + mb];
  return i >= 0 ? &bl[i] : NULL;
}

/* Rule 3 for rank r: its dependency waits in the step (seconds), by peer
 * into by_peer[ranks], and the late blocks' peers' gaps into causes[ranks][parts]. */
static PpStatus
dependency_wait (PpWhyRuntimeIndex *ix, const PpSchedule *s, int64_t lo_ns, const PpWhyBlock *const *mine,
                 size_t n_mine, const PpWhyBlock *bl, const BlockAt *at, const double *comm, double *by_peer,
                 double *causes, PpError *err)
{
  double ready = 0;   /* the window's start, then the rank's previous block end */
  for (size_t i = 0; i < n_mine; i++)
    {
      const PpWhyBlock *b = mine[i];
      double arrive = -INFINITY;
      const PpWhyBlock *late = NULL;
      for (int half = 0; half < 2; half++)
        {
          int kind = half == 0 ? (b->kind == PP_ACT_OVERLAP_F_B ? PP_ACT_F : b->kind) : b->sub_kind;
          int stage = half == 0 ? b->stage : b->sub_stage;
          int mb = half == 0 ? b->microbatch : b->sub_microbatch;
          PpDependency dep[2];
          if (half == 1 && b->kind != PP_ACT_OVERLAP_F_B)
            break;
          if (stage < 0 || stage >= s->n_stages || mb < 0 || mb >= s->microbatches)
            continue;
          int nd = pp_schedule_dependencies (s, kind, stage, dep);
          for (int d = 0; d < nd; d++)
            {
              const PpWhyBlock *j = find_block (at, bl, dep[d].kind, dep[d].stage, mb);
              if (j == NULL || j == b || j->rank == b->rank || j->start >= b->start)
                continue;
              double t = j->end + (dep[d].boundary >= 0 && comm != NULL ? comm[dep[d].boundary] : 0);
              if (t > arrive)
                arrive = t, late = j;
            }
        }
      /* the input may come later than its block's end and the plan's
       * transfer: a peer that ran host work (a GC) between its block and
       * its send.  The rank's own WAIT says when it came; the cause is
       * then in the peer's gap after that block */
      int after = 0;
      if (late != NULL && b->rank >= 0 && b->rank < ix->ranks)
        {
          double got = measured_arrival (&ix->r[b->rank], lo_ns, ready, b->start);
          if (got > arrive)
            arrive = got, after = 1;
        }
      if (late != NULL && arrive > ready)
        {
          double w = (arrive < b->start ? arrive : b->start) - ready;
          if (w > 0 && late->rank >= 0 && late->rank < ix->ranks)
            {
              by_peer[late->rank] += w;
              double *c = causes + (size_t) late->rank * PP_WHY_N_RUNTIME_PARTS;
              PpStatus st = add_gap_before (ix, late->rank, lo_ns + (int64_t) llround (late->start * 1e9), c, err);
              if (st == PP_OK && after)
                st = add_gap_after (ix, late->rank, lo_ns + (int64_t) llround (late->end * 1e9), c, err);
              if (st != PP_OK)
                return st;
            }
        }
      if (b->end > ready)
        ready = b->end;
    }
  return PP_OK;
}

PpStatus
pp_why_runtime_step (const PpWhyRuntimeIndex *cix, const PpSchedule *s, int64_t lo_ns, int64_t hi_ns,
                     const PpWhyBlock *blocks, size_t nb, const double *comm, PpWhyIdle *idle,
                     PpError *err)
{
  /* the scratch buffer is the index's only mutable state */
  PpWhyRuntimeIndex *ix = (PpWhyRuntimeIndex *) cix;
  int P = s->ranks < ix->ranks ? s->ranks : ix->ranks;
  const PpWhyBlock **order = malloc ((nb + 1) * sizeof *order);
  double *by_peer = calloc ((size_t) ix->ranks + 1, sizeof *by_peer);
  double *causes = calloc (((size_t) ix->ranks + 1) * PP_WHY_N_RUNTIME_PARTS, sizeof *causes);
  BlockAt at = { 0 };
  PpStatus st = PP_OK;
  if (order == NULL || by_peer == NULL || causes == NULL || block_at_init (&at, s, blocks, nb) != 0)
    {
      st = pp_error_set (err, PP_ENOMEM, "out of memory");
      goto out;
    }
  for (size_t i = 0; i < nb; i++)
    order[i] = &blocks[i];
  qsort (order, nb, sizeof *order, cmp_block_rank_start);

  size_t first = 0;
  for (int r = 0; r < P; r++)
    {
      PpWhyIdle *w = &idle[r];
      const RankIx *x = &ix->r[r];
      GapSum g = { { 0 } };
      size_t n_mine = 0;
      /* the caller's wait for slower replicas (rule 0) stays */
      double replica_wait = w->replica_wait > 0 ? w->replica_wait : 0;
      int late_replica = w->late_replica;
      pp_why_runtime_reset (w);
      w->replica_wait = replica_wait;
      w->late_replica = replica_wait > 0 ? late_replica : -1;
      while (first < nb && order[first]->rank < r)
        first++;
      while (first + n_mine < nb && order[first + n_mine]->rank == r)
        n_mine++;
      if ((st = pp_why_each_gap (ix, r, lo_ns, hi_ns, sum_gap, &g, err)) != PP_OK)
        goto out;
      memset (by_peer, 0, (size_t) ix->ranks * sizeof *by_peer);
      memset (causes, 0, (size_t) ix->ranks * PP_WHY_N_RUNTIME_PARTS * sizeof *causes);
      if ((st = dependency_wait (ix, s, lo_ns, order + first, n_mine, blocks, &at, comm, by_peer,
                                 causes, err)) != PP_OK)
        goto out;

      /* rule 2: charge in order (GC first, as in a gap: a placed pause
       * before an amount without a place), each pp_why_capped to what
       * runtime has left */
      double runtime = w->runtime > 0 ? w->runtime : 0, left = runtime, charged = 0;
      /* rule 0: the wait for a slower replica, placed inside the rank's
       * collectives, first */
      double rl = pp_why_capped (replica_wait, left);
      w->runtime_parts[PP_WHY_RT_REPLICA_LATE] = rl;
      left = runtime - (charged += rl);
      for (int i = 0; i < PP_WHY_RT_PEER_LATE; i++)
        {
          int k = i == 0 ? PP_WHY_RT_GC : i == 1 ? PP_WHY_RT_DESCHEDULED : i;
          if (k == PP_WHY_RT_HOST_OTHER)
            continue;   /* after peer_late: see rule 2 */
          double p = pp_why_capped (g.sum[k], left);
          w->runtime_parts[k] = p;
          left = runtime - (charged += p);
        }
      double wait = 0;
      int peer = -1;
      for (int q = 0; q < ix->ranks; q++)
        {
          wait += by_peer[q];
          if (by_peer[q] > 0 && (peer < 0 || by_peer[q] > by_peer[peer]))
            peer = q;
        }
      double plan = w->schedule + w->imbalance + w->transfers;
      double late = pp_why_capped (wait - plan, left);
      w->runtime_parts[PP_WHY_RT_PEER_LATE] = late;
      charged += late;
      left = runtime - charged;
      double other = pp_why_capped (g.sum[PP_WHY_RT_HOST_OTHER], left);
      w->runtime_parts[PP_WHY_RT_HOST_OTHER] = other;
      charged += other;
      w->runtime_parts[PP_WHY_RT_UNATTRIBUTED] = runtime - charged > 0 ? runtime - charged : 0;

      w->runtime_measured[PP_WHY_RT_DESCHEDULED] = x->n_smp[0] > 1;
      for (int k = 0; k < N_HOST; k++)
        w->runtime_measured[PP_WHY_RT_GC + k] = ix->host_seen[k];
      w->runtime_measured[PP_WHY_RT_PROBE] = x->n_smp[1] > 1;
      w->runtime_measured[PP_WHY_RT_USER_KERNELS] = x->n_kern > 0 || x->n_local > 0;
      w->runtime_measured[PP_WHY_RT_LAUNCH_GAP] = x->n_launch > 0;
      w->runtime_measured[PP_WHY_RT_HOST_OTHER] = x->n_smp[2] > 1;
      w->runtime_measured[PP_WHY_RT_PEER_LATE] = 1;
      if (late > 0 && peer >= 0)
        {
          w->late_peer = peer;
          w->late_wait = late * by_peer[peer] / wait;
          memcpy (w->late_causes, causes + (size_t) peer * PP_WHY_N_RUNTIME_PARTS, sizeof w->late_causes);
          w->late_causes[PP_WHY_RT_PEER_LATE] = 0;
        }
    }
out:
  free (order);
  free (by_peer);
  free (causes);
  free (at.f_at);
  free (at.g_at);
  return st;
}

PpStatus
pp_why_runtime_mean (const PpWhyStep *steps, int n_steps, int ranks, PpWhyIdle *mean, PpError *err)
{
  double *by_peer = calloc ((size_t) ranks + 1, sizeof *by_peer);
  if (by_peer == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory");
  for (int r = 0; r < ranks; r++)
    {
      PpWhyIdle *m = &mean[r];
      memset (m->runtime_parts, 0, sizeof m->runtime_parts);
      memset (m->runtime_measured, 0, sizeof m->runtime_measured);
      memset (m->late_causes, 0, sizeof m->late_causes);
      memset (by_peer, 0, (size_t) ranks * sizeof *by_peer);
      m->late_peer = -1;
      m->late_wait = 0;
      m->late_replica = -1;
      m->replica_wait = 0;
      double most = 0;
      for (int i = 0; i < n_steps; i++)
        {
          const PpWhyIdle *w = &steps[i].idle[r];
          /* the replica of the step it waited most in */
          m->replica_wait += w->replica_wait / n_steps;
          if (w->late_replica >= 0 && w->replica_wait > most)
            most = w->replica_wait, m->late_replica = w->late_replica;
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            {
              m->runtime_parts[k] += w->runtime_parts[k] / n_steps;
              m->runtime_measured[k] |= w->runtime_measured[k];
            }
          if (w->late_peer >= 0 && w->late_peer < ranks)
            by_peer[w->late_peer] += w->late_wait;
        }
      for (int q = 0; q < ranks; q++)
        if (by_peer[q] > 0 && (m->late_peer < 0 || by_peer[q] > by_peer[m->late_peer]))
          m->late_peer = q;
      for (int i = 0; m->late_peer >= 0 && i < n_steps; i++)
        {
          const PpWhyIdle *w = &steps[i].idle[r];
          if (w->late_peer != m->late_peer)
            continue;
          m->late_wait += w->late_wait / n_steps;
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            m->late_causes[k] += w->late_causes[k] / n_steps;
        }
    }
  free (by_peer);
  return PP_OK;
}

/* ---- reports ---------------------------------------------------------------- */

/* Whether part k of w is worth a name: always for gc, descheduled and
 * unattributed, else where the trace measures it or it is not 0. */
static int
shown (const PpWhyIdle *w, int k)
{
  return k == PP_WHY_RT_GC || k == PP_WHY_RT_DESCHEDULED || k == PP_WHY_RT_UNATTRIBUTED
         || w->runtime_measured[k] || w->runtime_parts[k] != 0;
}

void
pp_why_print_runtime_parts (FILE *f, const PpWhyIdle *idle, int ranks, double scale, const char *unit)
{
  int any = 0, named[PP_WHY_N_RUNTIME_PARTS] = { 0 };
  for (int r = 0; r < ranks; r++)
    any |= idle[r].runtime > 0;
  if (!any)
    return;
  fprintf (f, "runtime by part (%s, %% of runtime; what each part is, under the ranks):\n", unit);
  for (int r = 0; r < ranks; r++)
    {
      const PpWhyIdle *w = &idle[r];
      if (!(w->runtime > 0))
        continue;
      fprintf (f, "  rank %d: %.2f %s =", r, w->runtime * scale, unit);
      const char *sep = " ";
      for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
        if (shown (w, k))
          {
            fprintf (f, "%s%s %.2f (%.0f%%)", sep, part_names[k], w->runtime_parts[k] * scale,
                     100.0 * w->runtime_parts[k] / w->runtime);
            sep = ", ";
            named[k] = 1;
          }
      if (w->late_peer >= 0 && w->runtime_parts[PP_WHY_RT_PEER_LATE] > 0)
        {
          fprintf (f, "; late: rank %d (%.2f %s), its host around those blocks:", w->late_peer,
                   w->late_wait * scale, unit);
          sep = " ";
          for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
            if (w->late_causes[k] > 0)
              {
                fprintf (f, "%s%s %.2f", sep, part_names[k], w->late_causes[k] * scale);
                sep = ", ";
              }
          if (sep[0] == ' ')
            fprintf (f, " nothing measured");
        }
      if (w->late_replica >= 0 && w->runtime_parts[PP_WHY_RT_REPLICA_LATE] > 0)
        fprintf (f, "; waited in its data-parallel collectives for copy %d (%.2f %s in all)", w->late_replica,
                 w->replica_wait * scale, unit);
      fputc ('\n', f);
    }
  /* a reader of the split should not need the README to read it */
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    if (named[k])
      fprintf (f, "  %s: %s\n", part_names[k], part_meanings[k]);
}

void
pp_why_runtime_write_json (FILE *f, const PpWhyIdle *w)
{
  const char *sep = "";
  fprintf (f, ", \"runtime_parts\": {");
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    if (shown (w, k))
      {
        fprintf (f, "%s\"%s\": %.9g", sep, part_names[k], w->runtime_parts[k]);
        sep = ", ";
      }
  fputc ('}', f);
  if (w->late_replica >= 0 && w->runtime_parts[PP_WHY_RT_REPLICA_LATE] > 0)
    fprintf (f, ", \"runtime_replica_late\": {\"replica\": %d, \"seconds\": %.9g}", w->late_replica,
             w->replica_wait);
  if (w->late_peer < 0 || !(w->runtime_parts[PP_WHY_RT_PEER_LATE] > 0))
    return;
  fprintf (f, ", \"runtime_peer_late\": {\"peer\": %d, \"seconds\": %.9g, \"causes\": {", w->late_peer,
           w->late_wait);
  sep = "";
  for (int k = 0; k < PP_WHY_N_RUNTIME_PARTS; k++)
    if (k != PP_WHY_RT_PEER_LATE && (w->late_causes[k] > 0 || shown (w, k)))
      {
        fprintf (f, "%s\"%s\": %.9g", sep, part_names[k], w->late_causes[k]);
        sep = ", ";
      }
  fprintf (f, "}}");
}
