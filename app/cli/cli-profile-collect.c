/* cli-profile-collect.c — profile as the job's collector: it finds the
 * ranks' streams (in the registry, or pushed from other hosts), reads each
 * on a thread of its own and serves them as one job, with the live plan
 * timed at measured costs and the closing summary. */
#include "cli-profile-private.h"
#include "pp-timeline-model.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli-plan.h"
#include "pp-analysis.h"
#include "pp-live.h"
#include "pp-registry.h"
#include "pp-simulate.h"
#include "pp-trace.h"
#include "pp-why.h"

/* The collector registers before any rank has said which schedule it
 * runs ("pytorch"): once the first rank's description comes, its entry is
 * written again (whole, atomically, as pp_registry_add_in writes every
 * entry) with that schedule, which 'jobs' and the app's attach list show;
 * and so with why the job is stuck (issue 37), which 'jobs' shows.  NULL:
 * that field as it is. */
void
profile_register (Collector *c, const char *schedule, const char *stuck)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;
  const char *sock = c->server ? pp_live_server_socket_path (c->server) : NULL;
  char dir[PATH_MAX];

  if (sock == NULL || (schedule != NULL && schedule[0] == '\0')
      || (size_t) snprintf (dir, sizeof dir, "%s", sock) >= sizeof dir || strrchr (dir, '/') == NULL)
    return;
  *strrchr (dir, '/') = '\0';   /* the entry lies beside the socket */
  if (pp_registry_list (&jobs, &n, NULL) != PP_OK)
    return;
  for (size_t i = 0; i < n; i++)
    if (jobs[i].pid == (int32_t) getpid () && strcmp (jobs[i].name, c->job) == 0)
      {
        if (schedule != NULL)
          snprintf (jobs[i].schedule, sizeof jobs[i].schedule, "%s", schedule);
        if (stuck != NULL)
          snprintf (jobs[i].stuck, sizeof jobs[i].stuck, "%s", stuck);
        pp_registry_add_in (dir, &jobs[i], NULL);
        break;
      }
  free (jobs);
}

/* One rank's stream into the job's: its description only if none came yet,
 * its span names moved into a range of their own (ids are per process). */
static void
collect_item (RankStream *rs, PpTraceItem *it)
{
  Collector *c = rs->c;
  PpError err = { 0 };
  uint32_t base = (uint32_t) (rs->index + 1) << PROFILE_NAME_BITS;

  if (it->type == PP_TRACE_ITEM_STRING)
    {
      if (it->string.id >= (1u << PROFILE_NAME_BITS))
        return;
      it->string.id += base;
    }
  else if (it->type == PP_TRACE_ITEM_SPAN)
    it->span.name_id = it->span.name_id && it->span.name_id < (1u << PROFILE_NAME_BITS)
                       ? it->span.name_id + base : 0;
  if (it->type == PP_TRACE_ITEM_PROCESS)
    {
      rs->have_place = true;
      rs->place = it->process_info;
    }
  if (it->type == PP_TRACE_ITEM_CLOCK_OFFSET && rs->pid == 0)
    {
      rs->have_clock = true;
      rs->clock_rank = it->clock_offset.rank;
      rs->clock_offset = it->clock_offset.offset_ns;
    }
  pthread_mutex_lock (&c->lock);
  profile_note_progress (rs, it);
  if (it->type != PP_TRACE_ITEM_DESCRIPTION || !c->described)
    {
      if (it->type == PP_TRACE_ITEM_DESCRIPTION)
        c->described = true;
      if (pp_trace_write_item (c->w, it, &err) == PP_OK)
        c->spans += it->type == PP_TRACE_ITEM_SPAN;
      if (it->type == PP_TRACE_ITEM_DESCRIPTION)
        {
          c->desc = *it->description;
          c->have_desc = true;
          profile_register (c, c->desc.schedule, NULL);
        }
    }
  if (it->type == PP_TRACE_ITEM_PLAN && c->kept != NULL && !it->plan.has_timeline
      && it->plan.rank >= 0 && it->plan.rank < PROFILE_MAX_RANKS)
    {
      int r = it->plan.rank;
      PpTracePlanAction *a = malloc ((it->plan.n_actions + 1) * sizeof *a);
      if (a != NULL)
        {
          memcpy (a, it->plan.actions, it->plan.n_actions * sizeof *a);
          free (c->plan[r]);
          c->plan[r] = a;
          c->n_plan[r] = it->plan.n_actions;
          c->dirty = true;
        }
    }
  /* the live plan is timed with one replica's blocks, as the timeline
   * shows one (its first place: dp 0, tp 0, ...); other replicas' would
   * count every block twice */
  bool first_replica = true;
  for (int d = PP_TRACE_MESH_DP; rs->have_place && d < PP_TRACE_MESH_DIMS; d++)
    first_replica &= rs->place.coord[d] == 0;
  if (it->type == PP_TRACE_ITEM_SPAN && c->kept != NULL && first_replica
      && (pp_span_kind_is_block (it->span.kind) || (it->span.kind >= PP_SPAN_SEND_F && it->span.kind <= PP_SPAN_RECV_B)
          || pp_analysis_span_counts (it->span.kind)))
    {
      if (c->n_kept == PROFILE_SPANS_MAX)
        {
          /* the older half goes: the plan is timed by the newest steps */
          memmove (c->kept, c->kept + PROFILE_SPANS_MAX / 2, (PROFILE_SPANS_MAX / 2) * sizeof *c->kept);
          c->n_kept = PROFILE_SPANS_MAX / 2;
        }
      c->kept[c->n_kept++] = it->span;
      c->dirty = true;
    }
  pthread_mutex_unlock (&c->lock);
}

static void *
rank_thread (void *arg)
{
  RankStream *rs = arg;
  PpTraceItem it;
  PpError err = { 0 };
  unsigned since_flush = 0;

  for (;;)
    {
      PpStatus st = rs->stop ? PP_EIO : pp_live_client_next (rs->client, &it, 50, &err);
      if (st != PP_OK)
        {
          /* a local rank's stream is its own process's; a pushed one came
           * over the network and may be anything: say why it went */
          if (rs->pid == 0 && !rs->stop)
            fprintf (stderr, "pipescope-cli: profile: %s refused: %s (what it sent before is kept)\n",
                     rs->name, err.msg);
          break;
        }
      if (it.type == PP_TRACE_ITEM_END)
        {
          if (!it.need_more)
            break;
          if (since_flush)
            {
              pthread_mutex_lock (&rs->c->lock);
              pp_trace_writer_flush (rs->c->w, NULL);
              pthread_mutex_unlock (&rs->c->lock);
              since_flush = 0;
            }
          continue;
        }
      collect_item (rs, &it);
      if (++since_flush >= 256 || it.type == PP_TRACE_ITEM_STEP_MARKER)
        {
          pthread_mutex_lock (&rs->c->lock);
          pp_trace_writer_flush (rs->c->w, NULL);
          pthread_mutex_unlock (&rs->c->lock);
          since_flush = 0;
        }
    }
  pthread_mutex_lock (&rs->c->lock);
  pp_trace_writer_flush (rs->c->w, NULL);
  pthread_mutex_unlock (&rs->c->lock);
  rs->done = 1;
  return NULL;
}

/* Serves plan (the collector's thread only; the lock not held) and keeps
 * it for the closing line. */
static void
serve_plan (Collector *c, PpTracePlanAction **plan, size_t *n_plan, int n_ranks)
{
  pthread_mutex_lock (&c->lock);
  if (pp_trace_write_plan (c->w, n_ranks, (const PpTracePlanAction *const *) plan, n_plan, 1, NULL) == PP_OK)
    pp_trace_writer_flush (c->w, NULL);
  pthread_mutex_unlock (&c->lock);
  pp_cli_plan_actions_free (c->served, c->n_served, c->served_ranks);
  c->served = plan;
  c->n_served = n_plan;
  c->served_ranks = n_ranks;
}

/* The live stream's plan, timed by what the ranks measured so far, by the
 * rule the saved trace's is timed by (merge: pp_cli_write_timed_plan):
 * the steps pp-analysis.h counts, their measured costs, the plans'
 * data-parallel actions placed (pp_cli_simulate_measured_plan).  Quietly
 * nothing until a whole step of every rank has come, or when nothing
 * came since the last one. */
void
live_plan (Collector *c)
{
  PpTraceDescription desc;
  PpSpan *copy = NULL;
  size_t n = 0;
  PpWhyReport *rep = NULL;
  PpSchedule *s = NULL, *with_comms = NULL;
  PpSimulation *sim = NULL;
  static PpTracePlanAction *plan[PROFILE_MAX_RANKS];   /* the collector's thread only */
  static size_t n_plan[PROFILE_MAX_RANKS];
  int n_ranks = 0;

  pthread_mutex_lock (&c->lock);
  if (c->dirty && c->have_desc && (copy = malloc (c->n_kept * sizeof *copy + 1)) != NULL)
    {
      memcpy (copy, c->kept, c->n_kept * sizeof *copy);
      n = c->n_kept;
      desc = c->desc;
      c->dirty = false;
      /* the plans as they are now (the lock is not held while analysing) */
      n_ranks = desc.n_ranks > 0 && desc.n_ranks <= PROFILE_MAX_RANKS ? desc.n_ranks : 0;
      for (int r = 0; r < n_ranks; r++)
        {
          free (plan[r]);
          plan[r] = NULL;
          n_plan[r] = 0;
          if (c->plan[r] != NULL && (plan[r] = malloc ((c->n_plan[r] + 1) * sizeof **plan)) != NULL)
            {
              memcpy (plan[r], c->plan[r], c->n_plan[r] * sizeof **plan);
              n_plan[r] = c->n_plan[r];
            }
        }
    }
  pthread_mutex_unlock (&c->lock);
  if (copy == NULL)
    return;
  PpWhyPlans plans = { n_ranks, (const PpTracePlanAction *const *) plan, n_plan };
  PpTracePlanAction **timed = NULL;
  size_t *n_timed = NULL;
  /* max_steps 0: the steps every view counts */
  if (pp_why_analyse_run (&desc, n_ranks > 0 ? &plans : NULL, copy, n, 0, &rep, NULL, &s, NULL) == PP_OK
      && pp_cli_simulate_measured_plan (s, n_ranks > 0 ? &plans : NULL, rep, &with_comms, &sim, NULL, NULL) == PP_OK
      && pp_cli_plan_actions (with_comms ? with_comms : s, sim, 1.0, &timed, &n_timed, NULL) == PP_OK)
    serve_plan (c, timed, n_timed, s->ranks);
  pp_simulation_free (sim);
  pp_schedule_free (with_comms);
  pp_schedule_free (s);
  pp_why_report_free (rep);
  free (copy);
}

/* Once the job's trace is written: its timed plan (the last of each rank)
 * served live too, so that a viewer still attached ends with the plan the
 * saved trace holds; false when it has none. */
bool
serve_saved_plan (Collector *c, const char *trace)
{
  PpError err = { 0 };
  PpTraceReader *rd = pp_trace_reader_new_path (trace, &err);
  PpTraceItem it;
  int n_ranks = c->have_desc && c->desc.n_ranks > 0 && c->desc.n_ranks <= PROFILE_MAX_RANKS ? c->desc.n_ranks : 0;
  PpTracePlanAction **plan = n_ranks ? calloc ((size_t) n_ranks, sizeof *plan) : NULL;
  size_t *n_plan = n_ranks ? calloc ((size_t) n_ranks, sizeof *n_plan) : NULL;
  bool ok = rd != NULL && plan != NULL && n_plan != NULL;

  while (ok && pp_trace_reader_next (rd, &it, &err) == PP_OK && it.type != PP_TRACE_ITEM_END)
    if (it.type == PP_TRACE_ITEM_PLAN && it.plan.has_timeline && it.plan.rank >= 0 && it.plan.rank < n_ranks)
      {
        int r = it.plan.rank;
        free (plan[r]);
        n_plan[r] = 0;
        if ((plan[r] = malloc ((it.plan.n_actions + 1) * sizeof **plan)) == NULL)
          ok = false;
        else
          {
            memcpy (plan[r], it.plan.actions, it.plan.n_actions * sizeof **plan);
            n_plan[r] = it.plan.n_actions;
          }
      }
  pp_trace_reader_free (rd);
  for (int r = 0; ok && r < n_ranks; r++)
    ok = plan[r] != NULL;
  if (!ok)
    {
      pp_cli_plan_actions_free (plan, n_plan, n_ranks);
      return false;
    }
  serve_plan (c, plan, n_plan, n_ranks);
  return true;
}

/* Whether a process of the job ran in a replica past the first (dp, tp,
 * cp or ep not 0): a job of replicas. */
static bool
has_replicas (Collector *c)
{
  for (int k = 0; k < c->n_ranks; k++)
    for (int d = PP_TRACE_MESH_DP; c->ranks[k]->have_place && d < PP_TRACE_MESH_DIMS; d++)
      if (c->ranks[k]->place.coord[d] != 0)
        return true;
  return false;
}

/* The closing line of what was served live, by pp-analysis.h's rule:
 * the steps analysed, the median step, each rank's measured bubble a step
 * and its bubble of the plan at measured costs, as `info` prints them for
 * the saved trace.  A job of replicas, its trace saved: that trace's
 * steps (pp_timeline_model_step_analysis: its median copy's, as info's and
 * the app's), not the first replica's the live plan was timed with. */
void
print_live_summary (Collector *c, const char *saved)
{
  PpAnalysisSteps a;
  char what[160], pc[32];
  int n_ranks = c->have_desc && c->desc.n_ranks > 0 ? c->desc.n_ranks : 0;
  const PpSpan *rows[1] = { c->kept };
  size_t n[1] = { c->n_kept };

  if (c->kept == NULL || n_ranks == 0)
    return;
  if (saved != NULL && has_replicas (c))
    {
      PpTimelineModel *m = pp_timeline_model_new_from_file (saved, NULL);
      if (m == NULL)
        return;
      pp_timeline_model_step_analysis (m, &a);
      pp_timeline_model_free (m);
    }
  else if (pp_analysis_steps (rows, n, NULL, 1, n_ranks, 0, &a, NULL) != PP_OK)
    return;
  if (a.n_steps > 0)
    {
      fprintf (stderr, "pipescope-cli: profile: live: %s; median step %.3f ms; " PP_ANALYSIS_MEASURED_LABEL ":",
               pp_analysis_describe_steps (&a, what, sizeof what), a.median_step / 1e6);
      for (int r = 0; r < a.n_ranks; r++)
        fprintf (stderr, "%s rank %d %s", r ? "," : "", r, pp_analysis_format_percent (pc, sizeof pc, a.bubble[r], 1));
      double *pb = c->served_ranks > 0 ? calloc ((size_t) c->served_ranks, sizeof *pb) : NULL;
      if (pb != NULL && pp_cli_plan_bubbles ((const PpTracePlanAction *const *) c->served, c->n_served,
                                             c->served_ranks, pb) > 0)
        {
          fprintf (stderr, "; bubble, %s:", pp_analysis_plan_label (PP_ANALYSIS_PLAN_MEASURED_COSTS));
          for (int r = 0; r < c->served_ranks; r++)
            fprintf (stderr, "%s rank %d %s", r ? "," : "", r, pp_analysis_format_percent (pc, sizeof pc, pb[r], 1));
        }
      free (pb);
      fputc ('\n', stderr);
    }
  pp_analysis_steps_clear (&a);
}

static bool
start_rank (Collector *c, PpLiveClient *client, int32_t pid, const char *name)
{
  RankStream *rs = calloc (1, sizeof *rs);
  if (rs == NULL)
    return false;
  rs->c = c;
  rs->client = client;
  rs->index = c->n_ranks;
  rs->pid = pid;
  snprintf (rs->name, sizeof rs->name, "%s", name);
  if (pthread_create (&rs->thread, NULL, rank_thread, rs) != 0)
    {
      free (rs);
      return false;
    }
  c->ranks[c->n_ranks++] = rs;
  return true;
}

/* The server's on_push, on its thread: a rank of another host pushes its
 * stream.  Kept for the next scan, which reads it as a local rank's; past
 * the bound of streams, refused in one line. */
int
take_pushed (void *user, int fd, const void *data, size_t n, const char *peer)
{
  Collector *c = user;
  PpError err = { 0 };
  char label[128];
  bool full;

  pthread_mutex_lock (&c->lock);
  full = c->n_pushed == PROFILE_PUSH_QUEUE || c->n_pushed_total >= PROFILE_MAX_RANKS / 2;
  pthread_mutex_unlock (&c->lock);
  if (full)
    {
      fprintf (stderr, "pipescope-cli: profile: a stream pushed from %s refused: %d streams already\n",
               peer, c->n_pushed_total);
      return -1;
    }
  snprintf (label, sizeof label, "the stream pushed from %s", peer);
  PpLiveClient *client = pp_live_client_new_fd (fd, data, n, label, &err);
  if (client == NULL)
    {
      fprintf (stderr, "pipescope-cli: profile: %s refused: %s\n", label, err.msg);
      return 0;   /* the client closed it */
    }
  pthread_mutex_lock (&c->lock);
  c->pushed[c->n_pushed].client = client;
  snprintf (c->pushed[c->n_pushed].peer, sizeof c->pushed[c->n_pushed].peer, "%s", peer);
  c->n_pushed++;
  c->n_pushed_total++;
  pthread_mutex_unlock (&c->lock);
  return 0;
}

/* Connects to the job's ranks that registered since the last scan, and
 * reads the streams pushed since. */
/* Whether a process's registry entry named entry is the stream named
 * name already read: the same name, or the name with the ".p<G>" a rank
 * takes once placed on the job's mesh (pipescope_rank_place registers it
 * again under it). */
static bool
same_stream (const char *name, const char *entry)
{
  size_t n = strlen (name);
  if (strcmp (name, entry) == 0)
    return true;
  if (strncmp (name, entry, n) != 0 || entry[n] != '.' || entry[n + 1] != 'p' || entry[n + 2] == '\0')
    return false;
  return strspn (entry + n + 2, "0123456789") == strlen (entry + n + 2);
}

void
scan_ranks (Collector *c)
{
  PpJobInfo *jobs = NULL;
  size_t n = 0;

  pthread_mutex_lock (&c->lock);
  int n_pushed = c->n_pushed;
  PpLiveClient *clients[PROFILE_PUSH_QUEUE];
  char peers[PROFILE_PUSH_QUEUE][96];
  for (int i = 0; i < n_pushed; i++)
    {
      clients[i] = c->pushed[i].client;
      memcpy (peers[i], c->pushed[i].peer, sizeof peers[i]);
    }
  c->n_pushed = 0;
  pthread_mutex_unlock (&c->lock);
  for (int i = 0; i < n_pushed; i++)
    {
      char name[96];
      snprintf (name, sizeof name, "the stream pushed from %.70s", peers[i]);
      if (c->n_ranks >= PROFILE_MAX_RANKS || !start_rank (c, clients[i], 0, name))
        pp_live_client_free (clients[i]);
    }
  if (pp_registry_list (&jobs, &n, NULL) != PP_OK)
    return;
  for (size_t i = 0; i < n && c->n_ranks < PROFILE_MAX_RANKS; i++)
    {
      const PpJobInfo *j = &jobs[i];
      bool known = false;
      if (strcmp (j->job, c->job) != 0 || strcmp (j->name, c->job) == 0
          || strncmp (j->endpoint, "unix:", 5) != 0)
        continue;
      for (int k = 0; k < c->n_ranks; k++)
        known |= c->ranks[k]->pid == j->pid && same_stream (c->ranks[k]->name, j->name);
      if (known)
        continue;
      PpLiveClient *client = pp_live_client_connect (j->endpoint + 5, NULL, NULL);
      if (client == NULL)
        continue;   /* not serving yet: the next scan */
      if (!start_rank (c, client, j->pid, j->name))
        pp_live_client_free (client);
    }
  if (c->n_ranks >= PROFILE_MAX_RANKS)
    {
      /* the bound of streams read live: the processes past it said (their
       * rank files are merged all the same) */
      int n_job = 0;
      for (size_t i = 0; i < n; i++)
        n_job += strcmp (jobs[i].job, c->job) == 0 && strcmp (jobs[i].name, c->job) != 0
                 && strncmp (jobs[i].endpoint, "unix:", 5) == 0;
      if (n_job - c->n_ranks > c->n_left_out_said)
        {
          c->n_left_out_said = n_job - c->n_ranks;
          fprintf (stderr, "pipescope-cli: profile: the live view reads %d processes' streams at most; %d more "
                   "of this job are left out of it (their rank files are merged all the same)\n",
                   PROFILE_MAX_RANKS, c->n_left_out_said);
        }
    }
  free (jobs);
}
