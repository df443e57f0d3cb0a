/* pp-trace-sink.c — a PpProbeSink that encodes drained records into trace
 * writers (pp-trace-sink.h). */
#include "pp-trace-sink.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t  rank;
  uint64_t reported;   /* the probe's running total at the last report */
} DropTotal;

struct _PpTraceSink {
  PpTraceWriter *writers[PP_TRACE_SINK_MAX];
  int            failed[PP_TRACE_SINK_MAX];
  int            n_writers;

  /* drain thread only */
  DropTotal     *drops;
  size_t         n_drops, cap_drops;

  pthread_mutex_t lock;   /* guards status and msg: read from other threads */
  PpStatus        status;
  char            msg[PP_ERROR_MSG_MAX];
};

PpTraceSink *
pp_trace_sink_new (PpTraceWriter *const *writers, int n_writers, PpError *err)
{
  if (n_writers < 1 || n_writers > PP_TRACE_SINK_MAX || writers == NULL)
    {
      pp_error_set (err, PP_EINVAL, "trace sink: %d writers, expected 1 to %d",
                    n_writers, PP_TRACE_SINK_MAX);
      return NULL;
    }
  for (int i = 0; i < n_writers; i++)
    if (writers[i] == NULL)
      {
        pp_error_set (err, PP_EINVAL, "trace sink: writer %d is NULL", i);
        return NULL;
      }
  PpTraceSink *s = calloc (1, sizeof *s);
  if (s == NULL)
    {
      pp_error_set (err, PP_ENOMEM, "trace sink: out of memory");
      return NULL;
    }
  memcpy (s->writers, writers, (size_t) n_writers * sizeof *writers);
  s->n_writers = n_writers;
  pthread_mutex_init (&s->lock, NULL);
  s->status = PP_OK;
  return s;
}

void
pp_trace_sink_free (PpTraceSink *s)
{
  if (s == NULL)
    return;
  pthread_mutex_destroy (&s->lock);
  free (s->drops);
  free (s);
}

PpStatus
pp_trace_sink_status (PpTraceSink *s, PpError *err)
{
  if (s == NULL)
    return pp_error_set (err, PP_EINVAL, "trace sink: no sink");
  pthread_mutex_lock (&s->lock);
  PpStatus st = s->status;
  if (st != PP_OK)
    pp_error_set (err, st, "%s", s->msg);
  pthread_mutex_unlock (&s->lock);
  return st;
}

/* Writer i failed: remember the first error; the writer is skipped from now on. */
static void
writer_failed (PpTraceSink *s, int i, const PpError *e)
{
  s->failed[i] = 1;
  pthread_mutex_lock (&s->lock);
  if (s->status == PP_OK)
    {
      s->status = e->status != PP_OK ? e->status : PP_EIO;
      snprintf (s->msg, sizeof s->msg, "trace sink: writer %d: %.480s", i, e->msg);
    }
  pthread_mutex_unlock (&s->lock);
}

static void
flush_all (PpTraceSink *s)
{
  for (int i = 0; i < s->n_writers; i++)
    if (!s->failed[i])
      {
        PpError e = { 0 };
        if (pp_trace_writer_flush (s->writers[i], &e) != PP_OK)
          writer_failed (s, i, &e);
      }
}

static void
write_dropped_all (PpTraceSink *s, int32_t rank, uint64_t count)
{
  for (int i = 0; i < s->n_writers; i++)
    if (!s->failed[i])
      {
        PpError e = { 0 };
        if (pp_trace_write_dropped (s->writers[i], rank, count, &e) != PP_OK)
          writer_failed (s, i, &e);
      }
}

static int
rank_ok (int32_t rank)
{
  return rank >= 0 && rank < PP_TRACE_MAX_RANKS;
}

static void
sink_spans (void *user, const PpSpan *spans, size_t n)
{
  PpTraceSink *s = user;
  uint64_t invalid = 0;
  /* Runs of spans the format can hold; a span with an impossible rank is
   * counted as dropped (rank unknown) rather than failing the batch. */
  size_t i = 0;
  while (i < n)
    {
      size_t j = i;
      while (j < n && rank_ok (spans[j].rank))
        j++;
      if (j > i)
        for (int w = 0; w < s->n_writers; w++)
          if (!s->failed[w])
            {
              PpError e = { 0 };
              if (pp_trace_write_spans (s->writers[w], spans + i, j - i, &e) != PP_OK)
                writer_failed (s, w, &e);
            }
      while (j < n && !rank_ok (spans[j].rank))
        {
          invalid++;
          j++;
        }
      i = j;
    }
  if (invalid > 0)
    write_dropped_all (s, -1, invalid);
  flush_all (s);
}

static void
sink_counters (void *user, const PpCounter *counters, size_t n)
{
  PpTraceSink *s = user;
  uint64_t invalid = 0;
  for (size_t k = 0; k < n; k++)
    {
      if (!rank_ok (counters[k].rank))
        {
          invalid++;
          continue;
        }
      for (int w = 0; w < s->n_writers; w++)
        if (!s->failed[w])
          {
            PpError e = { 0 };
            if (pp_trace_write_counter (s->writers[w], &counters[k], &e) != PP_OK)
              writer_failed (s, w, &e);
          }
    }
  if (invalid > 0)
    write_dropped_all (s, -1, invalid);
  flush_all (s);
}

/* The probe reports running totals per rank; the format sums DROPPED frames,
 * so each frame carries what grew since the last report for that rank. */
static void
sink_dropped (void *user, int32_t rank, uint64_t total)
{
  PpTraceSink *s = user;
  if (rank != -1 && !rank_ok (rank))
    rank = -1;   /* cannot happen with the probe's ranks; keep the count anyway */
  DropTotal *d = NULL;
  for (size_t i = 0; i < s->n_drops; i++)
    if (s->drops[i].rank == rank)
      {
        d = &s->drops[i];
        break;
      }
  if (d == NULL)
    {
      if (s->n_drops == s->cap_drops)
        {
          size_t ncap = s->cap_drops ? s->cap_drops * 2 : 16;
          DropTotal *nd = realloc (s->drops, ncap * sizeof *nd);
          if (nd == NULL)
            {
              /* No memory to remember this rank: report the total as is
               * (may count twice later; better than losing it). */
              write_dropped_all (s, rank, total);
              flush_all (s);
              return;
            }
          s->drops = nd;
          s->cap_drops = ncap;
        }
      d = &s->drops[s->n_drops++];
      d->rank = rank;
      d->reported = 0;
    }
  if (total <= d->reported)
    return;
  uint64_t delta = total - d->reported;
  d->reported = total;
  write_dropped_all (s, rank, delta);
  flush_all (s);
}

PpProbeSink
pp_trace_sink_probe_sink (PpTraceSink *s)
{
  PpProbeSink ps = { 0 };
  if (s == NULL)
    return ps;
  ps.user = s;
  ps.spans = sink_spans;
  ps.counters = sink_counters;
  ps.dropped = sink_dropped;
  return ps;
}
