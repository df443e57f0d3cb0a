/* pp-timeline-tip.c — what the timeline's tooltip says about what is under
 * the pointer: a block, a planned block, a folded row's label, each time in
 * the ruler's unit (pp-timeline-tip.h).  Text only: the widget asks, GTK
 * shows it. */
#include "pp-timeline-tip.h"
#include "pp-timeline-fold.h"
#include "pp-why.h"

#include <glib.h>
#include <math.h>
#include <string.h>

/* The ruler's unit at the view the tooltip is for: its times read as the
 * ruler above them does (a ruler in ms, a tooltip in ms). */
typedef struct {
  const char *name;
  double      scale;      /* ns a unit */
  int         decimals;   /* the ruler's, plus one: a block's start between two ticks */
} TipUnit;

static void
tip_unit (const PpTimelineModel *m, const PpTimelineView *v, TipUnit *u)
{
  int dec = 0;
  u->name = pp_timeline_ruler_unit (m, v, &u->scale, &dec);
  u->decimals = MAX (3, dec + 1);
  if (u->scale == 1)
    u->decimals = 0;   /* nothing below a ns */
}

/* ns in the ruler's unit: its decimals, and more (to a ns) where a short
 * time would read 0.000: three significant digits. */
static void
append_time (GString *s, double ns, const TipUnit *u)
{
  double v = ns / u->scale;
  int dec = u->decimals;
  if (v != 0 && fabs (v) < 1)
    dec = MAX (dec, 2 - (int) floor (log10 (fabs (v))));
  dec = MIN (dec, (int) lround (log10 (u->scale)));
  g_string_append_printf (s, "%.*f %s", dec, v, u->name);
}

/* The WAIT right before span `index` of `rank`: the latest one that ended by
 * its start with no other work in between.  NULL if none. */
static const PpSpan *
wait_before (const PpTimelineModel *m, int rank, long index)
{
  const PpSpan *spans = pp_timeline_model_spans (m, rank);
  const PpSpan *target = &spans[index];

  /* Spans are sorted by start; a few dozen back is enough (sends, receives
   * and kernels sit between a wait and the block it held up). */
  for (long i = index - 1; i >= 0 && i >= index - 64; i--)
    {
      const PpSpan *s = &spans[i];
      if (s->kind == PP_SPAN_WAIT && s->end_ns <= target->start_ns + 1000)
        return s;
      if (pp_span_kind_is_work (s->kind) && s->kind != PP_SPAN_KERNEL)
        return NULL;
    }
  return NULL;
}

/* The tooltip of a span; NULL for none.  Public to the tests through
 * pp_timeline_widget_tooltip_text () below. */
static char *
span_tooltip (const PpTimelineModel *m, int rank, long index, const TipUnit *u)
{
  if (rank < 0 || rank >= pp_timeline_model_n_ranks (m) || index < 0
      || (size_t) index >= pp_timeline_model_n_spans (m, rank))
    return NULL;

  const PpSpan *s = &pp_timeline_model_spans (m, rank)[index];
  GString *t = g_string_new (NULL);
  gint64 origin = pp_timeline_model_start_ns (m);
  char who[96], peer[96];
  const char *host = pp_timeline_model_rank_host (m, rank);

  pp_timeline_model_rank_label (m, rank, who, sizeof who);
  pp_timeline_model_rank_label (m, s->peer_rank, peer, sizeof peer);
  g_string_append (t, who);
  if (host[0] && !strchr (who, ':'))
    g_string_append_printf (t, " on %s", host);
  if (pp_span_has_sub (s))
    /* an overlapped pair: both halves */
    g_string_append_printf (t, " · %dF%d + %d%s%d overlapped (forward: stage %d, micro-batch %d; "
                            "backward %s: stage %d, micro-batch %d)",
                            s->stage, s->microbatch, s->sub_stage,
                            pp_span_kind_name ((PpSpanKind) s->sub_kind), s->sub_microbatch, s->stage,
                            s->microbatch, pp_span_kind_name ((PpSpanKind) s->sub_kind), s->sub_stage,
                            s->sub_microbatch);
  else
    {
      if (s->stage >= 0)
        g_string_append_printf (t, " · stage %d", s->stage);
      if (s->microbatch >= 0)
        g_string_append_printf (t, " · micro-batch %d", s->microbatch);
      g_string_append_printf (t, " · %s", pp_span_kind_name ((PpSpanKind) s->kind));
      if (s->kind == PP_SPAN_LOSS)
        g_string_append (t, " (the loss computation inside the schedule's loss call: work, not bubble)");
    }
  if (s->peer_rank >= 0)
    {
      switch (s->kind)
        {
        case PP_SPAN_SEND_F: case PP_SPAN_SEND_B:
          g_string_append_printf (t, " to %s", peer);
          break;
        case PP_SPAN_WAIT:
          g_string_append_printf (t, " for %s", peer);
          break;
        default:
          g_string_append_printf (t, " from %s", peer);
          break;
        }
    }
  const char *name = s->name_id ? pp_timeline_model_string (m, s->name_id) : NULL;
  if (name != NULL && *name)
    g_string_append_printf (t, " · %s", name);
  g_string_append (t, " · start ");
  append_time (t, (double) (s->start_ns - origin), u);
  g_string_append (t, " · ");
  append_time (t, (double) (s->end_ns - s->start_ns), u);
  if (s->bytes > 0)
    {
      char *b = g_format_size (s->bytes);
      g_string_append_printf (t, " · %s", b);
      g_free (b);
    }

  if (pp_span_kind_is_work (s->kind))
    {
      const PpSpan *w = wait_before (m, rank, index);
      if (w != NULL)
        {
          g_string_append (t, "\nwaited ");
          append_time (t, (double) (w->end_ns - w->start_ns), u);
          if (w->peer_rank >= 0)
            {
              pp_timeline_model_rank_label (m, w->peer_rank, peer, sizeof peer);
              g_string_append_printf (t, " for %s", peer);
            }
        }
    }
  /* a folded block: the replicas' median; who ended last, where, how late */
  const PpTimelineFold *f = pp_timeline_model_fold (m, rank, index);
  if (f != NULL && f->n > 1)
    {
      const PpTraceProcess *p = pp_timeline_model_process_place (m, f->slowest_process);
      g_string_append_printf (t, "\nthe median of %d replicas; the slowest, dp %d (process %d%s%s), ends ",
                              f->n, f->slowest_dp, f->slowest_process, p && p->host[0] ? " on " : "",
                              p && p->host[0] ? p->host : "");
      append_time (t, (double) (f->latest_end_ns - s->end_ns), u);
      g_string_append_printf (t, " after the median end; the copy drawn is dp %d's; the band: the replicas' copies, ",
                              f->median_dp);
      append_time (t, (double) (f->earliest_start_ns - origin), u);
      g_string_append (t, " to ");
      append_time (t, (double) (f->latest_end_ns - origin), u);
      if (pp_timeline_fold_apart (f, s))
        {
          g_string_append (t, "\nthe replicas ran it out of step: their starts ");
          append_time (t, (double) (f->latest_start_ns - f->earliest_start_ns), u);
          g_string_append (t, " apart, more than the block's length (unfold the rank to see each)");
        }
    }
  return g_string_free (t, FALSE);
}

static char *
planned_tooltip (const PpTimelineModel *m, int rank, long index, const TipUnit *u)
{
  static const char *const kinds[] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OVERLAP_F_B", "OPT",
  };

  if (rank < 0 || rank >= pp_timeline_model_n_ranks (m) || index < 0
      || (size_t) index >= pp_timeline_model_n_planned (m, rank))
    return NULL;
  const PpTimelinePlanned *p = &pp_timeline_model_planned (m, rank)[index];
  GString *t = g_string_new (NULL);
  char who[96];
  pp_timeline_model_rank_label (m, rank, who, sizeof who);
  g_string_append_printf (t, "%s · plan · stage %d", who, p->stage);
  if (p->microbatch >= 0)
    g_string_append_printf (t, " · micro-batch %d", p->microbatch);
  if (p->kind >= 0 && p->kind < (int) G_N_ELEMENTS (kinds))
    g_string_append_printf (t, " · %s", kinds[p->kind]);
  /* The plan is one step, drawn under every step: its time is an offset
   * into the step (from the plan's first block on any rank), not a time on
   * the axis. */
  int64_t origin = pp_timeline_plan_origin (m);
  g_string_append (t, " · at ");
  append_time (t, (double) (p->start_ns - origin), u);
  g_string_append (t, " into the step · ");
  append_time (t, (double) (p->end_ns - p->start_ns), u);
  return g_string_free (t, FALSE);
}

/* The tooltip of a folded row's label: what the row shows, and where its
 * replicas ran out of step; NULL for other rows. */
char *
pp_timeline_row_label_tooltip (const PpTimelineModel *m, int row, const PpTimelineView *v)
{
  int n = pp_timeline_model_row_folded (m, row);
  if (row < 0 || row >= pp_timeline_model_n_ranks (m) || n < 2)
    return NULL;
  TipUnit u;
  int64_t apart;
  int32_t step;
  char who[96];
  tip_unit (m, v, &u);
  pp_timeline_model_rank_label (m, row, who, sizeof who);
  GString *t = g_string_new (NULL);
  g_string_append_printf (t, "%s: %d replicas folded; each block is the copy of the replica with the median start, "
                          "over a band from the earliest start to the latest end of the replicas' copies",
                          who, n);
  size_t k = pp_timeline_row_apart (m, row, &apart, &step);
  if (k > 0)
    {
      g_string_append_printf (t, "\nout of step: the replicas ran %zu block%s more than its length apart, "
                              "the widest ", k, k == 1 ? "" : "s");
      append_time (t, (double) apart, &u);
      g_string_append_printf (t, " (step %d)", step);
    }
  g_string_append (t, "\nclick to unfold: a row a process");
  return g_string_free (t, FALSE);
}

/* The tooltip of what a hit found; NULL for nothing. */
char *
pp_timeline_hit_tooltip (const PpTimelineModel *m, const PpTimelineView *v, const PpTimelineHit *hit)
{
  TipUnit u;
  if (hit->index < 0)
    return NULL;
  tip_unit (m, v, &u);
  return hit->planned ? planned_tooltip (m, hit->rank, hit->index, &u)
                      : span_tooltip (m, hit->rank, hit->index, &u);
}
