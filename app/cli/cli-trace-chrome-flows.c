/* cli-trace-chrome-flows.c — the Chrome export's arrows: each transfer
 * from its send to its receive, and each block from the blocks it waited
 * for by the schedule's rules (issue 17), within one replica. */
#include "cli-trace-private.h"

#include <stdio.h>
#include <stdlib.h>

#include "pp-schedule-rules.h"

static const Trace *sort_trace;

/* By replica first: a transfer pairs within its own pipeline (the send of
 * replica dp d is received by replica d), and so does a dependency. */
static int
cmp_comm (const void *a, const void *b)
{
  size_t i = *(const size_t *) a, j = *(const size_t *) b;
  const PpSpan *x = &sort_trace->spans[i], *y = &sort_trace->spans[j];
  int32_t ri = span_replica (sort_trace, i), rj = span_replica (sort_trace, j);
  if (ri != rj) return ri < rj ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->microbatch != y->microbatch) return x->microbatch < y->microbatch ? -1 : 1;
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
  return 0;
}

static bool
pairs (const PpSpan *send, const PpSpan *recv)
{
  int want = send->kind == PP_SPAN_SEND_F ? PP_SPAN_RECV_F : PP_SPAN_RECV_B;
  if (recv->kind != want || recv->microbatch != send->microbatch || recv->step != send->step)
    return false;
  if (send->peer_rank >= 0 && recv->rank != send->peer_rank)
    return false;
  if (recv->peer_rank >= 0 && send->rank != recv->peer_rank)
    return false;
  /* The send names its stage and the receive its own: neighbours in a
   * chain, or the same number where both name the transfer's stage. */
  return abs (recv->stage - send->stage) <= 1;
}

int
write_flows (FILE *f, const Trace *t, int64_t base)
{
  size_t n_send = 0, n_recv = 0, id = 0;
  size_t *send = malloc ((t->n_all_spans + 1) * sizeof *send);
  size_t *recv = malloc ((t->n_all_spans + 1) * sizeof *recv);
  bool *used = calloc (t->n_all_spans + 1, sizeof *used);
  if (send == NULL || recv == NULL || used == NULL)
    {
      free (send); free (recv); free (used);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      int k = t->spans[i].kind;
      if (!keep_span (t, i))
        continue;   /* a transfer is drawn where the export keeps both ends */
      if (k == PP_SPAN_SEND_F || k == PP_SPAN_SEND_B)
        send[n_send++] = i;
      else if (k == PP_SPAN_RECV_F || k == PP_SPAN_RECV_B)
        recv[n_recv++] = i;
    }
  sort_trace = t;
  qsort (recv, n_recv, sizeof *recv, cmp_comm);
  for (size_t i = 0; i < n_send; i++)
    {
      const PpSpan *s = &t->spans[send[i]];
      int32_t rs = span_replica (t, send[i]);
      /* Binary search the first receive of the same (replica, step, microbatch). */
      size_t lo = 0, hi = n_recv;
      while (lo < hi)
        {
          size_t mid = (lo + hi) / 2;
          const PpSpan *m = &t->spans[recv[mid]];
          int32_t rm = span_replica (t, recv[mid]);
          if (rm < rs || (rm == rs && (m->step < s->step || (m->step == s->step && m->microbatch < s->microbatch))))
            lo = mid + 1;
          else
            hi = mid;
        }
      for (size_t j = lo; j < n_recv; j++)
        {
          const PpSpan *rc = &t->spans[recv[j]];
          if (span_replica (t, recv[j]) != rs || rc->step != s->step || rc->microbatch != s->microbatch)
            break;
          if (used[recv[j]] || !pairs (s, rc))
            continue;
          used[recv[j]] = true;
          id++;
          fprintf (f, ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%zu,\"pid\":%d,\"tid\":1,\"ts\":",
                   s->kind == PP_SPAN_SEND_F ? "activation" : "gradient", id, out_pid (t, span_pid (t, s)));
          print_us_since (f, s->start_ns, base);
          fprintf (f, "}");
          fprintf (f, ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%zu,\"pid\":%d,\"tid\":1,\"ts\":",
                   s->kind == PP_SPAN_SEND_F ? "activation" : "gradient", id, out_pid (t, span_pid (t, rc)));
          /* the data is there when the receive ends, and not before the
           * send has ended: a receive posted early (PyTorch's irecv, its
           * span the posting) ends before the send starts */
          int64_t arrive = rc->end_ns > rc->start_ns ? rc->end_ns : rc->start_ns;
          if (arrive < s->end_ns)
            arrive = s->end_ns > s->start_ns ? s->end_ns : s->start_ns;
          print_us_since (f, arrive, base);
          fprintf (f, "}");
          break;
        }
    }
  free (send); free (recv); free (used);
  return 0;
}

/* A block's place for the dependency search: step, stage, micro-batch and
 * what it gives (0: a forward's output, 1: an input gradient, B or I). */
static int
dep_class (int kind)
{
  switch (kind)
    {
    case PP_SPAN_F: case PP_SPAN_OVERLAP_F_B: return 0;
    case PP_SPAN_B: case PP_SPAN_I: return 1;
    default: return -1;
    }
}

static int
cmp_block (const void *a, const void *b)
{
  size_t i = *(const size_t *) a, j = *(const size_t *) b;
  const PpSpan *x = &sort_trace->spans[i], *y = &sort_trace->spans[j];
  int32_t ri = span_replica (sort_trace, i), rj = span_replica (sort_trace, j);
  if (ri != rj) return ri < rj ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->microbatch != y->microbatch) return x->microbatch < y->microbatch ? -1 : 1;
  int cx = dep_class (x->kind), cy = dep_class (y->kind);
  return cx < cy ? -1 : cx > cy;
}

/* Flow events from each block to the blocks that waited for it, by the
 * schedule's rules (pp_schedule_dependencies: F(s,m) -> F(s+1,m), B back
 * down the stages, I -> W): Perfetto draws them as arrows.  Ids start past
 * the transfers' (at most one a span). */
int
write_dependency_flows (FILE *f, const Trace *t, int64_t base)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  size_t n = 0, id = t->n_all_spans + 1;
  if (!t->has_desc || pp_why_schedule_of_trace (&t->desc, &t->why_plans, &s, &err) != PP_OK)
    return 0;   /* no schedule we know: no dependencies to draw */
  size_t *idx = malloc ((t->n_all_spans + 1) * sizeof *idx);
  if (idx == NULL)
    {
      pp_schedule_free (s);
      return -1;
    }
  for (size_t i = 0; i < t->n_all_spans; i++)
    if (dep_class (t->spans[i].kind) >= 0 && t->spans[i].microbatch >= 0 && keep_span (t, i))
      idx[n++] = i;
  sort_trace = t;
  qsort (idx, n, sizeof *idx, cmp_block);
  for (size_t i = 0; i < t->n_all_spans; i++)
    {
      const PpSpan *b = &t->spans[i];
      int32_t rb = span_replica (t, i);
      int act;
      if (!keep_span (t, i))
        continue;
      switch (b->kind)
        {
        case PP_SPAN_F: case PP_SPAN_OVERLAP_F_B: act = PP_ACT_F; break;
        case PP_SPAN_B: act = PP_ACT_B; break;
        case PP_SPAN_I: act = PP_ACT_I; break;
        case PP_SPAN_W: act = PP_ACT_W; break;
        default: continue;
        }
      if (b->stage < 0 || b->stage >= s->n_stages || b->microbatch < 0)
        continue;
      PpDependency d[2];
      int nd = pp_schedule_dependencies (s, act, b->stage, d);
      for (int k = 0; k < nd; k++)
        {
          PpSpan key = { .step = b->step, .stage = d[k].stage, .microbatch = b->microbatch,
                         .kind = d[k].kind == PP_ACT_F ? PP_SPAN_F : PP_SPAN_I };
          size_t lo = 0, hi = n;
          while (lo < hi)
            {
              size_t mid = (lo + hi) / 2;
              const PpSpan *m = &t->spans[idx[mid]];
              int32_t rm = span_replica (t, idx[mid]);
              int c = rm != rb ? (rm < rb ? -1 : 1)
                      : m->step != key.step ? (m->step < key.step ? -1 : 1)
                      : m->stage != key.stage ? (m->stage < key.stage ? -1 : 1)
                      : m->microbatch != key.microbatch ? (m->microbatch < key.microbatch ? -1 : 1)
                      : dep_class (m->kind) < dep_class (key.kind) ? -1
                      : dep_class (m->kind) > dep_class (key.kind) ? 1 : 0;
              if (c < 0)
                lo = mid + 1;
              else
                hi = mid;
            }
          if (lo >= n)
            continue;
          const PpSpan *dep = &t->spans[idx[lo]];
          if (span_replica (t, idx[lo]) != rb || dep->step != key.step || dep->stage != key.stage || dep->microbatch != key.microbatch
              || dep_class (dep->kind) != dep_class (key.kind))
            continue;
          id++;
          /* "s" inside the dependency's slice (its last nanosecond), "f"
           * bound to the enclosing slice at the block's start */
          fprintf (f, ",\n{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":%zu,\"pid\":%d,\"tid\":0,\"ts\":",
                   id, out_pid (t, span_pid (t, dep)));
          print_us_since (f, dep->end_ns > dep->start_ns ? dep->end_ns - 1 : dep->start_ns, base);
          fprintf (f, "}");
          fprintf (f, ",\n{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%zu,\"pid\":%d,\"tid\":0,\"ts\":",
                   id, out_pid (t, span_pid (t, b)));
          print_us_since (f, b->start_ns, base);
          fprintf (f, "}");
        }
    }
  free (idx);
  pp_schedule_free (s);
  return 0;
}
