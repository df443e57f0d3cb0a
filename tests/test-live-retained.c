/* What a live server keeps past its history for late viewers (the retained
 * frames, pp-live.h retained_max_bytes), under a pusher with the token
 * that floods every kind of them.  A collector as profile is one (its TCP
 * endpoint takes the push, a thread reads the pushed stream and writes it
 * into the collector's own served stream) takes, over ROUNDS rounds, a
 * DESCRIPTION, a PLAN, a CLOCK_OFFSET and a RANK frame for each of RANKS
 * ranks, NAMES new names that spans use and NAMES that none uses, and the
 * spans.  Before the fix every one of those frames was kept forever (a
 * pushing rank grew profile by gigabytes); now:
 *
 *   - the retained set stays within its bound all along (counted through
 *     pp_live_server_retained, not measured), and what it replaced or
 *     dropped is counted: exactly the older plans, offsets, RANK frames
 *     and descriptions replaced;
 *   - a late viewer gets the first and the newest description, exactly one
 *     plan, one clock offset and one RANK frame per rank, each the newest,
 *     and a name for every span it gets;
 *   - what it lost is in its DROPPED count: the spans it did not get and
 *     the names dropped past the bound, exactly. */
#include <glib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pp-live.h"
#include "pp-trace.h"

#define RANKS         8
#define ROUNDS        300
#define NAMES         48          /* used names a round, and as many unused */
#define RETAINED_MAX  (256 * 1024)
#define HISTORY_MAX   (2 * 1024 * 1024)
#define END_STEP      1000000     /* the pusher's last frame: a step marker */

/* ---- the collector: profile's collect loop in small ---- */

typedef struct {
  GMutex          lock;
  GCond           cond;
  PpLiveClient   *pushed;     /* taken on the server thread */
  PpLiveServer   *server;
  PpTraceWriter  *w;
  PpLiveRetained  most;       /* the largest frames and bytes seen while it ran */
  uint64_t        items;
  int             done;
  char            err[PP_ERROR_MSG_MAX];
} Collector;

static int
take_push (void *user, int fd, const void *data, size_t n, const char *peer)
{
  Collector *c = user;
  PpError err = { 0 };
  PpLiveClient *client = pp_live_client_new_fd (fd, data, n, peer, &err);
  g_mutex_lock (&c->lock);
  if (client == NULL)
    g_strlcpy (c->err, err.msg, sizeof c->err);
  c->pushed = client;
  g_cond_signal (&c->cond);
  g_mutex_unlock (&c->lock);
  return 0;   /* the client took fd, also when it failed */
}

static void
sample (Collector *c)
{
  PpLiveRetained r;
  pp_trace_writer_flush (c->w, NULL);
  pp_live_server_retained (c->server, &r);
  c->most.frames = MAX (c->most.frames, r.frames);
  c->most.bytes = MAX (c->most.bytes, r.bytes);
}

static gpointer
collect_run (gpointer data)
{
  Collector *c = data;
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;   /* a hang guard */
  g_mutex_lock (&c->lock);
  while (c->pushed == NULL && c->err[0] == '\0')
    if (!g_cond_wait_until (&c->cond, &c->lock, deadline))
      break;
  PpLiveClient *client = c->pushed;
  g_mutex_unlock (&c->lock);
  if (client == NULL)
    {
      c->done = -1;
      return NULL;
    }
  PpError err = { 0 };
  deadline = g_get_monotonic_time () + 100 * G_USEC_PER_SEC;
  while (g_get_monotonic_time () < deadline)
    {
      PpTraceItem it;
      if (pp_live_client_next (client, &it, 100, &err) != PP_OK)
        {
          g_strlcpy (c->err, err.msg, sizeof c->err);
          break;
        }
      if (it.type == PP_TRACE_ITEM_END && it.need_more)
        continue;
      if (it.type == PP_TRACE_ITEM_END)
        {
          c->done = 1;
          break;
        }
      if (pp_trace_write_item (c->w, &it, &err) != PP_OK)
        {
          g_strlcpy (c->err, err.msg, sizeof c->err);
          break;
        }
      if (++c->items % 256 == 0)
        sample (c);
    }
  sample (c);
  pp_live_client_free (client);
  return NULL;
}

/* ---- the pusher: a rank with the token, flooding ---- */

static int
send_all (void *user, const void *data, size_t size)
{
  int fd = *(int *) user;
  const char *p = data;
  while (size > 0)
    {
      ssize_t n = send (fd, p, size, MSG_NOSIGNAL);
      if (n <= 0)
        return -1;
      p += n;
      size -= (size_t) n;
    }
  return 0;
}

static uint32_t
used_id (int round, int j)
{
  return 1 + (uint32_t) (round * 2 * NAMES + j);
}

static uint32_t
unused_id (int round, int j)
{
  return used_id (round, j) + NAMES;
}

static void
describe (PpTraceDescription *d, int round)
{
  memset (d, 0, sizeof *d);
  strcpy (d->schedule, "1F1B");
  strcpy (d->backend, "cpu");
  snprintf (d->model, sizeof d->model, "round %d", round);
  d->n_ranks = RANKS;
  d->n_microbatches = 4;
  d->n_virtual = 1;
}

static uint64_t
push_flood (int port, const char *token)
{
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  char *line = g_strdup_printf ("PIPESCOPE 1 %s push\n", token);
  g_assert_cmpint (send_all (&fd, line, strlen (line)), ==, 0);
  g_free (line);

  PpError err = { 0 };
  PpTraceWriter *w = pp_trace_writer_new_callback (send_all, &fd, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  uint64_t spans = 0;
  for (int round = 0; round < ROUNDS; round++)
    {
      PpTraceDescription d;
      describe (&d, round);
      g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
      for (int r = 0; r < RANKS; r++)
        {
          /* the round is in the plan's first action, the offset, the pid */
          PpTracePlanAction a[3] = { { .kind = 0, .stage = r, .microbatch = round, .sub_kind = -1,
                                       .sub_stage = -1, .sub_microbatch = -1 },
                                     { .kind = 1, .stage = r, .microbatch = 0, .sub_kind = -1,
                                       .sub_stage = -1, .sub_microbatch = -1 },
                                     { .kind = 9, .stage = r, .microbatch = -1, .sub_kind = -1,
                                       .sub_stage = -1, .sub_microbatch = -1 } };
          g_assert_cmpint (pp_trace_write_rank_plan (w, r, a, 3, 0, &err), ==, PP_OK);
          g_assert_cmpint (pp_trace_write_clock_offset (w, r, (int64_t) round * 1000 + r, &err), ==, PP_OK);
          g_assert_cmpint (pp_trace_write_rank (w, r, round, "pusher", &err), ==, PP_OK);
        }
      PpSpan s[NAMES];
      for (int j = 0; j < NAMES; j++)
        {
          char name[64];
          snprintf (name, sizeof name, "kernel-%u-used", used_id (round, j));
          g_assert_cmpint (pp_trace_write_string (w, used_id (round, j), name, &err), ==, PP_OK);
          snprintf (name, sizeof name, "kernel-%u-never-used", unused_id (round, j));
          g_assert_cmpint (pp_trace_write_string (w, unused_id (round, j), name, &err), ==, PP_OK);
          memset (&s[j], 0, sizeof s[j]);
          s[j].start_ns = 1000000 + ((int64_t) round * NAMES + j) * 1000;
          s[j].end_ns = s[j].start_ns + 500;
          s[j].rank = j % RANKS;
          s[j].stage = j % RANKS;
          s[j].microbatch = -1;
          s[j].peer_rank = -1;
          s[j].step = round;
          s[j].device = 0xffff;
          s[j].kind = 0;
          s[j].name_id = used_id (round, j);
        }
      g_assert_cmpint (pp_trace_write_spans (w, s, NAMES, &err), ==, PP_OK);
      spans += NAMES;
      g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_write_step_marker (w, 0, END_STEP, PP_TRACE_STEP_END, 0, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_close (w, &err), ==, PP_OK);
  close (fd);
  return spans;
}

/* ---- the late viewer ---- */

typedef struct {
  int      n_desc;
  char     first_model[256], last_model[256];
  int      n_plan[RANKS], plan_round[RANKS];
  int      n_clock[RANKS];
  int64_t  clock[RANKS];
  int      n_rank[RANKS], rank_pid[RANKS];
  GHashTable *names;          /* id -> name */
  GArray     *span_names;     /* the name_id of every span */
  uint64_t dropped;
  int      other;             /* an item outside the ranks */
} Late;

static void
late_read (const char *socket, Late *l)
{
  PpError err = { 0 };
  PpLiveClient *c = pp_live_client_connect (socket, NULL, &err);
  g_assert_true (c != NULL || (g_printerr ("%s\n", err.msg), 0));
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  for (;;)
    {
      PpTraceItem it;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      if (pp_live_client_next (c, &it, 100, &err) != PP_OK)
        g_error ("late viewer: %s", err.msg);
      g_assert_false (it.type == PP_TRACE_ITEM_END && !it.need_more);   /* the end marker comes first */
      if (it.type == PP_TRACE_ITEM_STEP_MARKER && it.step_marker.step == END_STEP)
        break;
      int r = -1;
      switch (it.type)
        {
        case PP_TRACE_ITEM_DESCRIPTION:
          g_strlcpy (l->n_desc++ ? l->last_model : l->first_model, it.description->model,
                     sizeof l->first_model);
          break;
        case PP_TRACE_ITEM_PLAN:
          r = it.plan.rank;
          if (r >= 0 && r < RANKS && it.plan.n_actions == 3)
            {
              l->n_plan[r]++;
              l->plan_round[r] = it.plan.actions[0].microbatch;
            }
          else
            l->other++;
          break;
        case PP_TRACE_ITEM_CLOCK_OFFSET:
          r = it.clock_offset.rank;
          if (r >= 0 && r < RANKS)
            {
              l->n_clock[r]++;
              l->clock[r] = it.clock_offset.offset_ns;
            }
          else
            l->other++;
          break;
        case PP_TRACE_ITEM_RANK:
          r = it.rank_info.rank;
          if (r >= 0 && r < RANKS)
            {
              l->n_rank[r]++;
              l->rank_pid[r] = it.rank_info.pid;
            }
          else
            l->other++;
          break;
        case PP_TRACE_ITEM_STRING:
          g_hash_table_insert (l->names, GUINT_TO_POINTER (it.string.id), g_strdup (it.string.name));
          break;
        case PP_TRACE_ITEM_SPAN:
          g_array_append_val (l->span_names, it.span.name_id);
          break;
        case PP_TRACE_ITEM_DROPPED:
          l->dropped += it.dropped.count;
          break;
        default:
          break;
        }
    }
  pp_live_client_free (c);
}

static void
test_retained_flood (void)
{
  Collector c = { 0 };
  g_mutex_init (&c.lock);
  g_cond_init (&c.cond);
  PpLiveConfig cfg = { .no_register = 1, .listen = "127.0.0.1:0", .on_push = take_push, .push_user = &c,
                       .history_max_bytes = HISTORY_MAX, .retained_max_bytes = RETAINED_MAX };
  PpError err = { 0 };
  c.server = pp_live_server_new (&cfg, &err);
  g_assert_true (c.server != NULL || (g_printerr ("%s\n", err.msg), 0));
  c.w = pp_trace_writer_new_callback (pp_live_server_write, c.server, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (c.w);

  GThread *t = g_thread_new ("collector", collect_run, &c);
  uint64_t spans = push_flood (pp_live_server_tcp_port (c.server), pp_live_server_token (c.server));
  g_thread_join (t);
  if (c.done != 1)
    g_error ("collector: %s", c.err[0] ? c.err : "no push came");

  /* bounded all along, and what went is counted */
  PpLiveRetained r;
  pp_live_server_retained (c.server, &r);
  uint64_t essential = (uint64_t) ROUNDS * (1 + 3 * RANKS + 2 * NAMES);
  g_test_message ("retained: %" G_GUINT64_FORMAT " frames, %" G_GUINT64_FORMAT " bytes (at most %"
                  G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT " while it ran) of %" G_GUINT64_FORMAT
                  " essential frames pushed; %" G_GUINT64_FORMAT " replaced, %" G_GUINT64_FORMAT " dropped",
                  r.frames, r.bytes, c.most.frames, c.most.bytes, essential, r.superseded, r.dropped);
  g_assert_cmpuint (c.most.bytes, <=, RETAINED_MAX);
  /* a name's frame is 32 bytes or more: the rest is the ranks' and the descriptions' */
  g_assert_cmpuint (c.most.frames, <=, 2 + 3 * RANKS + RETAINED_MAX / 32);
  g_assert_cmpuint (c.most.frames, <, essential / 10);
  g_assert_cmpuint (r.superseded, ==, (uint64_t) (ROUNDS - 1) * 3 * RANKS + (ROUNDS - 2));
  g_assert_cmpuint (r.dropped, >, 0);

  /* a late viewer draws the job */
  Late l = { .names = g_hash_table_new_full (NULL, NULL, NULL, g_free),
             .span_names = g_array_new (FALSE, FALSE, sizeof (uint32_t)) };
  late_read (pp_live_server_socket_path (c.server), &l);
  g_test_message ("late viewer: %u of %" G_GUINT64_FORMAT " spans, %u names, %" G_GUINT64_FORMAT " dropped",
                  l.span_names->len, spans, g_hash_table_size (l.names), l.dropped);
  g_assert_cmpint (l.n_desc, ==, 2);
  g_assert_cmpstr (l.first_model, ==, "round 0");
  {
    char *want = g_strdup_printf ("round %d", ROUNDS - 1);
    g_assert_cmpstr (l.last_model, ==, want);
    g_free (want);
  }
  g_assert_cmpint (l.other, ==, 0);
  for (int k = 0; k < RANKS; k++)
    {
      g_assert_cmpint (l.n_plan[k], ==, 1);
      g_assert_cmpint (l.plan_round[k], ==, ROUNDS - 1);
      g_assert_cmpint (l.n_clock[k], ==, 1);
      g_assert_cmpint (l.clock[k], ==, (int64_t) (ROUNDS - 1) * 1000 + k);
      g_assert_cmpint (l.n_rank[k], ==, 1);
      g_assert_cmpint (l.rank_pid[k], ==, ROUNDS - 1);
    }
  /* every span it got has its name; the spans it did not get and the
   * names that went are its DROPPED count */
  g_assert_cmpuint (l.span_names->len, >, 0);
  g_assert_cmpuint (l.span_names->len, <, spans);
  for (guint i = 0; i < l.span_names->len; i++)
    {
      uint32_t id = g_array_index (l.span_names, uint32_t, i);
      const char *name = g_hash_table_lookup (l.names, GUINT_TO_POINTER (id));
      char *want = g_strdup_printf ("kernel-%u-used", id);
      if (g_strcmp0 (name, want) != 0)
        g_error ("span %u of the late viewer: name %u is '%s', not '%s'", i, id, name ? name : "(none)", want);
      g_free (want);
    }
  g_assert_cmpuint (l.dropped, ==, (spans - l.span_names->len) + r.dropped);

  g_hash_table_destroy (l.names);
  g_array_free (l.span_names, TRUE);
  pp_trace_writer_close (c.w, NULL);
  pp_live_server_free (c.server);
  g_mutex_clear (&c.lock);
  g_cond_clear (&c.cond);
}

/* Plans alone past the bound (a stream no real job writes: 256 ranks of
 * 4 KB plans against 64 KiB): the oldest go, counted, the first
 * description never; a late viewer gets each rank's plan or a count for
 * it, the newest ranks' plans. */
static void
test_retained_plans_over (void)
{
  enum { N = 256, ACTIONS = 100 };
  PpLiveConfig cfg = { .no_register = 1, .history_max_bytes = 256 * 1024, .retained_max_bytes = 64 * 1024 };
  PpError err = { 0 };
  PpLiveServer *s = pp_live_server_new (&cfg, &err);
  g_assert_true (s != NULL || (g_printerr ("%s\n", err.msg), 0));
  PpTraceWriter *w = pp_trace_writer_new_callback (pp_live_server_write, s, PP_TRACE_NATIVE, &err);
  g_assert_nonnull (w);
  PpTraceDescription d;
  describe (&d, 0);
  g_assert_cmpint (pp_trace_write_description (w, &d, &err), ==, PP_OK);
  PpTracePlanAction a[ACTIONS];
  for (int k = 0; k < ACTIONS; k++)
    a[k] = (PpTracePlanAction) { .kind = k % 2, .microbatch = k / 2, .sub_kind = -1, .sub_stage = -1,
                                 .sub_microbatch = -1 };
  for (int r = 0; r < N; r++)
    {
      g_assert_cmpint (pp_trace_write_rank_plan (w, r, a, ACTIONS, 0, &err), ==, PP_OK);
      g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);
    }
  g_assert_cmpint (pp_trace_write_step_marker (w, 0, END_STEP, PP_TRACE_STEP_END, 0, &err), ==, PP_OK);
  g_assert_cmpint (pp_trace_writer_flush (w, &err), ==, PP_OK);

  PpLiveRetained r;
  pp_live_server_retained (s, &r);
  g_assert_cmpuint (r.bytes, <=, 64 * 1024);
  g_assert_cmpuint (r.dropped, >, 0);
  g_assert_cmpuint (r.superseded, ==, 0);

  Late l = { .names = g_hash_table_new_full (NULL, NULL, NULL, g_free),
             .span_names = g_array_new (FALSE, FALSE, sizeof (uint32_t)) };
  PpLiveClient *c = pp_live_client_connect (pp_live_server_socket_path (s), NULL, &err);
  g_assert_nonnull (c);
  int got[N] = { 0 }, n_got = 0;
  for (;;)
    {
      PpTraceItem it;
      /* idle ticks (a loaded machine may starve the server) are skipped;
       * a minute is a hang guard */
      gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
      do
        g_assert_cmpint (pp_live_client_next (c, &it, 100, &err), ==, PP_OK);
      while (it.type == PP_TRACE_ITEM_END && it.need_more && g_get_monotonic_time () < deadline);
      g_assert_false (it.type == PP_TRACE_ITEM_END);
      if (it.type == PP_TRACE_ITEM_STEP_MARKER)
        break;
      if (it.type == PP_TRACE_ITEM_DESCRIPTION)
        l.n_desc++;
      else if (it.type == PP_TRACE_ITEM_PLAN && it.plan.rank >= 0 && it.plan.rank < N)
        n_got += !got[it.plan.rank]++;
      else if (it.type == PP_TRACE_ITEM_DROPPED)
        l.dropped += it.dropped.count;
    }
  pp_live_client_free (c);
  g_test_message ("%d of %d plans, %" G_GUINT64_FORMAT " dropped (%" G_GUINT64_FORMAT " at the server)",
                  n_got, N, l.dropped, r.dropped);
  g_assert_cmpint (l.n_desc, ==, 1);
  g_assert_cmpuint (n_got + l.dropped, ==, N);
  g_assert_cmpint (n_got, >, 0);
  g_assert_cmpint (got[N - 1], ==, 1);
  for (int k = 1; k < N; k++)
    g_assert_cmpint (got[k], >=, got[k - 1]);   /* the oldest went */
  g_hash_table_destroy (l.names);
  g_array_free (l.span_names, TRUE);
  pp_trace_writer_close (w, NULL);
  pp_live_server_free (s);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/live-retained/pushed-flood", test_retained_flood);
  g_test_add_func ("/live-retained/plans-over-bound", test_retained_plans_over);
  return g_test_run ();
}
