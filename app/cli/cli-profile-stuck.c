/* cli-profile-stuck.c — profile --hang-after (issue 37): the job's
 * progress as the collector sees it, the diagnosis of a job that made none
 * for S seconds (runtime/pp-stuck.c through cli-stuck.c), and ending it. */
#include "cli-profile-private.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pp-stuck.h"

static bool profile_stuck_verdict (Collector *c, double hang_after_s, PpStuckVerdict *v, char *line,
                                   size_t size);

static int64_t
mono_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void
profile_note_progress (RankStream *rs, const PpTraceItem *it)
{
  Collector *c = rs->c;
  if (it->type == PP_TRACE_ITEM_SPAN)
    c->progress_ns = mono_ns ();
  else if (it->type == PP_TRACE_ITEM_STEP_MARKER && it->step_marker.phase == PP_TRACE_STEP_END)
    {
      if (rs->last_step_end_ns > 0 && it->step_marker.time_ns > rs->last_step_end_ns)
        pp_stuck_steps_add (&c->steps, it->step_marker.time_ns - rs->last_step_end_ns);
      rs->last_step_end_ns = it->step_marker.time_ns;
    }
  else if (it->type == PP_TRACE_ITEM_OPEN)
    {
      const PpTraceOpen *o = &it->open, *was = &rs->open;
      if (!rs->have_open || o->kind != was->kind || o->step != was->step || o->stage != was->stage
          || o->microbatch != was->microbatch || o->start_ns != was->start_ns)
        c->progress_ns = mono_ns ();
      rs->open = *o;
      rs->have_open = true;
      rs->open_at_ns = mono_ns ();
    }
}

bool
profile_mark_stuck (Collector *c, char *out, size_t out_size)
{
  int64_t now = mono_ns ();
  pthread_mutex_lock (&c->lock);
  double after = pp_stuck_after_s (&c->steps);   /* the one rule: 'jobs', record, the app */
  int64_t quiet = c->progress_ns > 0 ? now - c->progress_ns : 0;
  pthread_mutex_unlock (&c->lock);
  char lines[8192], said[256] = "";
  PpStuckVerdict v;
  if ((double) quiet >= after * 1e9 && profile_stuck_verdict (c, after, &v, lines, sizeof lines))
    {
      size_t len = (size_t) snprintf (said, sizeof said, "no action ended for %.0f s; ", (double) quiet / 1e9);
      if (v.kind == PP_STUCK_NONE)
        snprintf (said + len, sizeof said - len, "nobody waits for another");
      for (int k = 0; k < v.n && len < sizeof said; k++)
        len += (size_t) snprintf (said + len, sizeof said - len, "%s%d",
                                  k == 0 ? (v.kind == PP_STUCK_ROOT ? (v.n == 1 ? "root process " : "root processes ")
                                                                    : "deadlock of processes ") : ", ",
                                  v.who[k]);
      /* said again only when the root or cycle changes, or every 10 s */
      if (strcmp (strchr (said, ';'), c->stuck_said[0] ? strchr (c->stuck_said, ';') : "") == 0
          && quiet / 1000000000LL % 10 != 0)
        return false;
    }
  if (strcmp (said, c->stuck_said) == 0)
    return false;
  snprintf (c->stuck_said, sizeof c->stuck_said, "%s", said);
  snprintf (out, out_size, "%s", said);
  return true;
}

bool
profile_stuck (Collector *c, double hang_after_s, char *line, size_t size)
{
  return profile_stuck_verdict (c, hang_after_s, NULL, line, size);
}

/* profile_stuck with the verdict (may be NULL). */
static bool
profile_stuck_verdict (Collector *c, double hang_after_s, PpStuckVerdict *v, char *line, size_t size)
{
  int64_t now = mono_ns ();
  bool open = false;
  line[0] = '\0';
  if (v)
    memset (v, 0, sizeof *v);
  pthread_mutex_lock (&c->lock);
  if (c->progress_ns == 0 || (double) (now - c->progress_ns) < hang_after_s * 1e9)
    {
      pthread_mutex_unlock (&c->lock);
      return false;
    }
  PpTraceProcess *procs = calloc ((size_t) c->n_ranks + 1, sizeof *procs);
  PpStuckOpen *opens = calloc ((size_t) c->n_ranks + 1, sizeof *opens);
  bool *gone = calloc ((size_t) c->n_ranks + 1, sizeof *gone);
  size_t n_procs = 0, n_opens = 0;
  for (int k = 0; procs && opens && gone && k < c->n_ranks; k++)
    {
      RankStream *rs = c->ranks[k];
      if (rs->have_place)
        procs[n_procs++] = rs->place;
      if (!rs->have_open)
        continue;
      opens[n_opens].process = rs->have_place ? rs->place.process : -1 - rs->open.rank;
      opens[n_opens].open = rs->open;
      gone[n_opens] = rs->done || now - rs->open_at_ns > PROFILE_HEARTBEAT_GONE_S * 1000000000LL;
      open |= !(rs->open.flags & PP_TRACE_OPEN_CLOSED);
      n_opens++;
    }
  pthread_mutex_unlock (&c->lock);
  if (open)
    {
      size_t len = (size_t) snprintf (line, size, "pipescope-cli: profile: no action ended on any process for "
                                      "%.0f s (--hang-after)\n", hang_after_s);
      if (len < size
          && pp_stuck_from_places (procs, n_procs, opens, n_opens, gone, v, line + len, size - len) == PP_STUCK_NONE)
        {
          /* nobody waits for another: each process's own action */
          for (size_t i = 0; i < n_opens && len < size; i++)
            {
              char act[96];
              len += (size_t) snprintf (line + len, size - len, "stuck: process %d in %s\n",
                                        opens[i].process >= 0 ? opens[i].process : opens[i].open.rank,
                                        pp_stuck_action_words (&opens[i].open, true, act, sizeof act));
            }
        }
    }
  free (procs);
  free (opens);
  free (gone);
  return open;
}

/* Whether pid has exited (reaped into *wstatus). */
static bool
reaped (pid_t pid, int *wstatus)
{
  pid_t w = waitpid (pid, wstatus, WNOHANG);
  return w == pid || (w < 0 && errno == ECHILD);
}

static void
signal_all (Collector *c, pid_t pid, int sig)
{
  kill (-pid, sig);   /* the command's process group (profile made it its own) */
  kill (pid, sig);
  for (int k = 0; k < c->n_ranks; k++)
    if (c->ranks[k]->pid > 0)
      kill ((pid_t) c->ranks[k]->pid, sig);   /* a rank a launcher put in a session of its own */
}

int
profile_end_job (Collector *c, pid_t pid, int grace_s)
{
  int wstatus = 0;
  signal_all (c, pid, SIGTERM);
  for (int t = 0; t < grace_s * 10; t++)
    {
      if (reaped (pid, &wstatus))
        {
          /* the command is gone; a rank it left behind is not spared */
          struct timespec ts = { 0, 200000000L };
          nanosleep (&ts, NULL);
          for (int k = 0; k < c->n_ranks; k++)
            if (c->ranks[k]->pid > 0 && !c->ranks[k]->done)
              kill ((pid_t) c->ranks[k]->pid, SIGKILL);
          return wstatus;
        }
      struct timespec ts = { 0, 100000000L };
      nanosleep (&ts, NULL);
    }
  signal_all (c, pid, SIGKILL);
  while (!reaped (pid, &wstatus))
    {
      struct timespec ts = { 0, 50000000L };
      nanosleep (&ts, NULL);
    }
  return wstatus;
}
