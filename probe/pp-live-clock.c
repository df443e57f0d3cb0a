/* pp-live-clock.c — a pushing rank's clock against its collector's
 * (pp-live.h, pp_live_server_clock; docs/transport.md, "Clocks").
 *
 * The rank's side, on its server thread: sessions of ping-pongs over the
 * push, the round with the least round trip kept.  The collector's side,
 * on the thread that reads the pushed stream (pp_live_client_next): the
 * pings are found among the stream's frames and answered at once.
 */
#include "pp-live-private.h"

#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "pp-probe.h"

/* The push's clock (pp-live.h; docs/transport.md, "Clocks"): a session of
 * up to CLOCK_ROUNDS ping-pongs, one at a time, each answered within
 * CLOCK_REPLY_MS or lost, the whole session within CLOCK_SESSION_MS; one
 * at the start and every CLOCK_EVERY_MS after, to follow drift.  A
 * collector that never answers (one older than the pings) is not asked
 * again. */
#define CLOCK_ROUNDS          32
#define CLOCK_REPLY_MS        500
#define CLOCK_SESSION_MS      2000
#define CLOCK_EVERY_MS        10000
static const char clock_reply_magic[8] = { 'P', 'P', 'C', 'L', 'O', 'C', 'K', '1' };

static void
put_le64 (uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t
get_le64 (const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

static uint32_t
get_le32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* A session is over: its best round (the least round trip: the one least
 * delayed on either way, whose midpoint is surest) becomes the offset. */
static void
clock_session_end (PpLiveServer *s, int64_t t)
{
  s->clk_in_session = 0;
  s->clk_waiting = 0;
  s->clk_next = t + CLOCK_EVERY_MS;
  if (s->clk_best_rtt != INT64_MAX)
    {
      s->clk_last_rtt = s->clk_best_rtt;
      s->clk_report = 1;
      atomic_store (&s->clk_offset, s->clk_best_off);
      atomic_store (&s->clk_rtt, s->clk_best_rtt);
      atomic_fetch_add (&s->clk_gen, 1);
    }
  else if (!s->clk_answered_ever)
    {
      s->clk_off = 1;
      fprintf (stderr, "pipescope: %s: the collector at %s does not answer clock pings (an older "
               "pipescope?); this rank's times stay on its host's clock\n", s->push_label, s->push_spec);
    }
}

/* A ping, staged and sent at once: its sequence number, this process's
 * time, the round trip of the last session that measured. */
static int
clock_ping (PpLiveServer *s, Viewer *v)
{
  uint8_t f[CLOCK_PING_SIZE] = { 0 };
  put32 (s, f, sizeof f);
  put16 (s, f + 4, PP_TRACE_FRAME_PUSH_CLOCK_PING);
  put32 (s, f + 8, ++s->clk_seq);
  put64 (s, f + 24, (uint64_t) s->clk_last_rtt);
  s->clk_sent = pp_probe_now_ns ();
  put64 (s, f + 16, (uint64_t) s->clk_sent);
  if (pp_live_stage (v, f, sizeof f) < 0)
    return -1;
  s->clk_outstanding++;
  pp_live_viewer_pump (s, v);
  return 0;
}

/* Sends the next ping when one is due and the push's staging is empty (so
 * that it leaves at once, not behind the stream), ends the session when
 * its rounds or its time are up.  Server thread. */
void
pp_live_clock_tick (PpLiveServer *s)
{
  Viewer *v = s->push_v;
  if (s->push_state != PUSH_LIVE || v == NULL || v->dead || v->connecting || s->clk_off)
    return;
  int64_t t = now_ms ();
  if (s->clk_waiting)
    {
      if (t < s->clk_deadline)
        return;
      s->clk_waiting = 0;   /* lost: the next round */
    }
  if (!s->clk_in_session && s->clk_report && v->header_sent && pending (v) == 0)
    {
      /* one more, not a round: it tells the collector the session's round
       * trip (its reply is not waited for) */
      s->clk_report = 0;
      clock_ping (s, v);
    }
  if (!s->clk_in_session)
    {
      if (t < s->clk_next)
        return;
      s->clk_in_session = 1;
      s->clk_rounds = 0;
      s->clk_best_rtt = INT64_MAX;
      s->clk_session_end = t + CLOCK_SESSION_MS;
    }
  if (s->clk_rounds >= CLOCK_ROUNDS || t >= s->clk_session_end)
    {
      clock_session_end (s, t);
      if (s->clk_report && v->header_sent && pending (v) == 0)
        {
          s->clk_report = 0;
          clock_ping (s, v);
        }
      return;
    }
  if (!v->header_sent || pending (v) > 0)
    return;   /* the next pass, once the socket has taken it */
  if (clock_ping (s, v) < 0)
    return;
  s->clk_waiting = 1;
  s->clk_rounds++;
  s->clk_deadline = t + CLOCK_REPLY_MS;
}

/* What the collector sent back on the push, read at t_recv: replies of
 * CLOCK_REPLY_SIZE bytes.  Anything else ends the measuring (never the
 * push). */
void
pp_live_clock_reply (PpLiveServer *s, const uint8_t *p, size_t n, int64_t t_recv)
{
  while (n > 0 && !s->clk_off)
    {
      size_t k = CLOCK_REPLY_SIZE - s->clk_in_len;
      if (k > n)
        k = n;
      memcpy (s->clk_in + s->clk_in_len, p, k);
      s->clk_in_len += k;
      p += k;
      n -= k;
      if (s->clk_in_len < CLOCK_REPLY_SIZE)
        return;
      s->clk_in_len = 0;
      if (memcmp (s->clk_in, clock_reply_magic, 8) != 0)
        {
          s->clk_off = 1;
          return;
        }
      if (s->clk_outstanding > 0)
        s->clk_outstanding--;
      uint32_t seq = get_le32 (s->clk_in + 8);
      int64_t sent = (int64_t) get_le64 (s->clk_in + 16);
      int64_t there = (int64_t) get_le64 (s->clk_in + 24);
      if (!s->clk_waiting || seq != s->clk_seq || sent != s->clk_sent || t_recv < sent)
        continue;   /* a reply that came after its round was given up */
      s->clk_waiting = 0;
      s->clk_answered_ever = 1;
      int64_t rtt = t_recv - sent;
      if (rtt < s->clk_best_rtt)
        {
          s->clk_best_rtt = rtt;
          /* the collector read its clock halfway through, as NTP assumes */
          s->clk_best_off = there - (sent + rtt / 2);
        }
    }
}

/* The poll timeout (ms, -1: none) shortened to the clock's next step: a
 * reply's deadline, the session's end, the next session (a ping waiting
 * for an empty staging is woken by the socket's POLLOUT). */
int
pp_live_clock_timeout (PpLiveServer *s, int64_t t, int timeout)
{
  if (s->push_state == PUSH_LIVE && !s->clk_off)
    {
      int64_t when = s->clk_waiting ? s->clk_deadline
                     : s->clk_in_session ? s->clk_session_end : s->clk_next;
      int l = when > t ? (int) (when - t) : 0;
      if (timeout < 0 || l < timeout)
        timeout = l;
    }
  return timeout;
}

unsigned
pp_live_server_clock (PpLiveServer *s, int64_t *offset_ns, int64_t *rtt_ns)
{
  if (s == NULL)
    return 0;
  unsigned gen = atomic_load (&s->clk_gen);
  if (offset_ns)
    *offset_ns = atomic_load (&s->clk_offset);
  if (rtt_ns)
    *rtt_ns = atomic_load (&s->clk_rtt);
  return gen;
}

/* ---- the collector's side ---- */

static uint32_t
scan32 (const PpLiveClient *c, const uint8_t *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return c->swap ? __builtin_bswap32 (v) : v;
}

static uint64_t
scan64 (const PpLiveClient *c, const uint8_t *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return c->swap ? __builtin_bswap64 (v) : v;
}

/* A clock ping of the pushed stream: answered at once with the time its
 * bytes were read (t), on the same connection.  A reply the socket has no
 * room for is not sent: the rank counts that round lost. */
static void
answer_ping (PpLiveClient *c, const uint8_t *f, int64_t t)
{
  uint8_t r[CLOCK_REPLY_SIZE] = { 0 };
  uint32_t seq = scan32 (c, f + 8);
  memcpy (r, clock_reply_magic, 8);
  for (int i = 0; i < 4; i++)
    r[8 + i] = (uint8_t) (seq >> (8 * i));
  put_le64 (r + 16, scan64 (c, f + 16));
  put_le64 (r + 24, (uint64_t) t);
  c->rank_rtt = (int64_t) scan64 (c, f + 24);
  if (send (c->fd, r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t) sizeof r)
    c->answered++;
}

/* Follows the frames of n bytes just read (at t) and answers the pings
 * among them.  The reader checks the stream itself; where a size is
 * malformed (the reader refuses the stream then) the scan just stops. */
void
pp_live_clock_scan (PpLiveClient *c, const uint8_t *p, size_t n, int64_t t)
{
  while (n > 0 && !c->scan_off)
    {
      if (c->next == 0)
        {
          /* the file header: its byte order and size, bytes 8 and 16..19 */
          size_t k = 20 - c->part_len;
          if (k > n)
            k = n;
          memcpy (c->part + c->part_len, p, k);
          c->part_len += k;
          c->pos += k;
          p += k;
          n -= k;
          if (c->part_len < 20)
            return;
          int little = 1;
          {
            uint16_t one = 1;
            uint8_t b;
            memcpy (&b, &one, 1);
            little = b == 1;
          }
          if (c->part[8] == PP_TRACE_ORDER_LITTLE_CODE)
            c->swap = !little;
          else if (c->part[8] == PP_TRACE_ORDER_BIG_CODE)
            c->swap = little;
          else
            c->scan_off = 1;
          uint32_t hs = scan32 (c, c->part + 16);
          if (hs < 32 || hs % 8 != 0)
            c->scan_off = 1;
          c->next = hs;
          c->part_len = 0;
          continue;
        }
      if (c->pos < c->next)
        {
          uint64_t skip = c->next - c->pos;
          size_t k = skip < n ? (size_t) skip : n;
          c->pos += k;
          p += k;
          n -= k;
          continue;
        }
      /* at a frame: its header, and the whole of a ping */
      size_t want = 8;
      if (c->part_len >= 8)
        want = CLOCK_PING_SIZE;
      size_t k = want - c->part_len;
      if (k > n)
        k = n;
      memcpy (c->part + c->part_len, p, k);
      c->part_len += k;
      p += k;
      n -= k;
      if (c->part_len < want)
        {
          c->pos += k;
          return;
        }
      uint32_t size = scan32 (c, c->part);
      uint16_t type;
      memcpy (&type, c->part + 4, 2);
      if (c->swap)
        type = __builtin_bswap16 (type);
      if (size < 8 || size % 8 != 0 || size > PP_TRACE_FRAME_MAX)
        {
          c->scan_off = 1;
          return;
        }
      if (type == PP_TRACE_FRAME_PUSH_CLOCK_PING && size >= CLOCK_PING_SIZE && want == 8)
        {
          c->pos += k;
          continue;   /* gather the ping's body */
        }
      /* Only a ping nothing of the stream came after: one with more
       * behind it has waited in our buffer (a round trip the rank would
       * discard), and its rank may be gone since, its socket closed: a
       * reply would reset the connection, and the kernel would throw
       * away what of the stream we have not read yet. */
      if (type == PP_TRACE_FRAME_PUSH_CLOCK_PING && size >= CLOCK_PING_SIZE
          && n <= size - CLOCK_PING_SIZE)
        answer_ping (c, c->part, t);
      /* the frame starts where part began */
      c->pos += k;
      c->next = c->pos - c->part_len + size;
      c->part_len = 0;
    }
}

uint64_t
pp_live_client_clock (const PpLiveClient *c, int64_t *rank_rtt_ns)
{
  if (rank_rtt_ns)
    *rank_rtt_ns = c ? c->rank_rtt : 0;
  return c ? c->answered : 0;
}
