#include "pp-action.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[PP_N_ACT_KINDS] = {
  [PP_ACT_F] = "F",
  [PP_ACT_B] = "B",
  [PP_ACT_I] = "I",
  [PP_ACT_W] = "W",
  [PP_ACT_SEND_F] = "SEND_F",
  [PP_ACT_RECV_F] = "RECV_F",
  [PP_ACT_SEND_B] = "SEND_B",
  [PP_ACT_RECV_B] = "RECV_B",
  [PP_ACT_OVERLAP_F_B] = "OVERLAP_F_B",
  [PP_ACT_OPT] = "OPT",
  [PP_ACT_UNSHARD] = "UNSHARD",
  [PP_ACT_RESHARD] = "RESHARD",
  [PP_ACT_REDUCE_GRAD] = "REDUCE_GRAD",
  [PP_ACT_WAIT_REDUCE_GRAD] = "WAIT_REDUCE_GRAD",
};

const char *
pp_action_kind_name (PpActionKind kind)
{
  if ((int) kind < 0 || kind >= PP_N_ACT_KINDS)
    return "?";
  return kind_names[kind];
}

bool
pp_action_is_compute (const PpAction *a)
{
  switch (a->kind)
    {
    case PP_ACT_F:
    case PP_ACT_B:
    case PP_ACT_I:
    case PP_ACT_W:
    case PP_ACT_OVERLAP_F_B:
      return true;
    default:
      return false;
    }
}

bool
pp_action_is_dp_comm (const PpAction *a)
{
  return a->kind == PP_ACT_UNSHARD || a->kind == PP_ACT_RESHARD || a->kind == PP_ACT_REDUCE_GRAD
         || a->kind == PP_ACT_WAIT_REDUCE_GRAD;
}

bool
pp_action_equal (const PpAction *a, const PpAction *b)
{
  if (a->kind != b->kind || a->stage != b->stage || a->microbatch != b->microbatch)
    return false;
  if (a->kind != PP_ACT_OVERLAP_F_B)
    return true;
  return a->sub_kind == b->sub_kind && a->sub_stage == b->sub_stage
         && a->sub_microbatch == b->sub_microbatch;
}

static int
format_simple (char *buf, size_t size, int kind, int stage, int mb)
{
  if (mb >= 0)
    return snprintf (buf, size, "%d%s%d", stage, pp_action_kind_name (kind), mb);
  return snprintf (buf, size, "%d%s", stage, pp_action_kind_name (kind));
}

/* An action as text; an overlapped pair's two halves through pair_fmt
 * (two %s), where the backward half is a B or an I or any is allowed. */
static char *
format_action (const PpAction *a, char *buf, size_t size, const char *pair_fmt, int any_half)
{
  if (size == 0)
    return buf;
  if (a->kind == PP_ACT_OVERLAP_F_B
      && (any_half || a->sub_kind == PP_ACT_B || a->sub_kind == PP_ACT_I))
    {
      char f[PP_ACTION_STR_MAX], b[PP_ACTION_STR_MAX];
      format_simple (f, sizeof f, PP_ACT_F, a->stage, a->microbatch);
      format_simple (b, sizeof b, a->sub_kind, a->sub_stage, a->sub_microbatch);
      snprintf (buf, size, pair_fmt, f, b);
    }
  else
    format_simple (buf, size, a->kind, a->stage, a->microbatch);
  return buf;
}

char *
pp_action_to_string (const PpAction *a, char *buf, size_t size)
{
  return format_action (a, buf, size, "(%s;%s)OVERLAP_F_B", 1);
}

char *
pp_action_to_label (const PpAction *a, char *buf, size_t size)
{
  return format_action (a, buf, size, "%s+%s", 0);
}

/* Parses "<digits><KIND>[<digits>]" from [p, end). */
static PpStatus
parse_simple (const char *p, const char *end, const char *whole, int *kind,
              int *stage, int *mb, PpError *err)
{
  const char *q = p;
  long v;

  if (q == end || !isdigit ((unsigned char) *q))
    return pp_error_set (err, PP_EFORMAT,
                         "invalid action '%s': expected [stage][kind][microbatch], e.g. 2F0",
                         whole);
  v = 0;
  while (q < end && isdigit ((unsigned char) *q))
    {
      v = v * 10 + (*q - '0');
      if (v > INT_MAX / 2)
        return pp_error_set (err, PP_EFORMAT, "invalid action '%s': stage index too large", whole);
      q++;
    }
  *stage = (int) v;

  /* Longest kind name that matches (SEND_F before S..., WAIT_REDUCE_GRAD
   * before W; OVERLAP_F_B is not a leaf). */
  int best = -1;
  size_t best_len = 0;
  for (int k = 0; k < PP_N_ACT_KINDS; k++)
    {
      if (k == PP_ACT_OVERLAP_F_B)
        continue;
      size_t n = strlen (kind_names[k]);
      if ((size_t) (end - q) >= n && strncmp (q, kind_names[k], n) == 0 && n > best_len)
        {
          best = k;
          best_len = n;
        }
    }
  if (best < 0)
    return pp_error_set (err, PP_EFORMAT,
                         "invalid action '%s': unknown kind (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, OPT, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)",
                         whole);
  q += best_len;
  *kind = best;

  if (q == end)
    *mb = -1;
  else
    {
      v = 0;
      while (q < end && isdigit ((unsigned char) *q))
        {
          v = v * 10 + (*q - '0');
          if (v > INT_MAX / 2)
            return pp_error_set (err, PP_EFORMAT, "invalid action '%s': microbatch index too large", whole);
          q++;
        }
      if (q != end)
        return pp_error_set (err, PP_EFORMAT, "invalid action '%s': unexpected text after the microbatch", whole);
      *mb = (int) v;
    }
  /* OPT and FSDP's actions have no micro-batch; PyTorch's regex takes one
   * on any kind, so a given one is kept. */
  if (*mb < 0 && *kind != PP_ACT_OPT && !pp_action_is_dp_comm (&(PpAction) { .kind = *kind }))
    return pp_error_set (err, PP_EFORMAT, "invalid action '%s': %s needs a microbatch index",
                         whole, kind_names[*kind]);
  return PP_OK;
}

PpStatus
pp_action_parse (const char *text, PpAction *out, PpError *err)
{
  const char *p = text, *end;
  PpStatus st;

  while (*p && isspace ((unsigned char) *p))
    p++;
  end = p + strlen (p);
  while (end > p && isspace ((unsigned char) end[-1]))
    end--;
  if (p == end)
    return pp_error_set (err, PP_EINVAL, "%s", "");

  if (*p == '(')
    {
      const char *close = memchr (p, ')', (size_t) (end - p));
      const char *semi;
      int k1, s1, m1, k2, s2, m2;
      if (close == NULL)
        return pp_error_set (err, PP_EFORMAT, "invalid action '%.*s': missing ')'", (int) (end - p), p);
      if ((size_t) (end - close - 1) != strlen ("OVERLAP_F_B")
          || strncmp (close + 1, "OVERLAP_F_B", strlen ("OVERLAP_F_B")) != 0)
        return pp_error_set (err, PP_EFORMAT,
                             "invalid action '%.*s': only (F;B)OVERLAP_F_B groups are supported",
                             (int) (end - p), p);
      semi = memchr (p, ';', (size_t) (close - p));
      if (semi == NULL)
        return pp_error_set (err, PP_EFORMAT, "invalid action '%.*s': expected two sub-actions separated by ';'",
                             (int) (end - p), p);
      char whole[256];
      snprintf (whole, sizeof whole, "%.*s", (int) (end - p), p);
      const char *a = p + 1, *ae = semi, *b = semi + 1, *be = close;
      while (a < ae && isspace ((unsigned char) *a)) a++;
      while (ae > a && isspace ((unsigned char) ae[-1])) ae--;
      while (b < be && isspace ((unsigned char) *b)) b++;
      while (be > b && isspace ((unsigned char) be[-1])) be--;
      if ((st = parse_simple (a, ae, whole, &k1, &s1, &m1, err)) != PP_OK)
        return st;
      if ((st = parse_simple (b, be, whole, &k2, &s2, &m2, err)) != PP_OK)
        return st;
      if (k1 != PP_ACT_F || (k2 != PP_ACT_B && k2 != PP_ACT_I))
        return pp_error_set (err, PP_EFORMAT,
                             "invalid action '%s': OVERLAP_F_B pairs a forward with a backward (F;B or F;I)",
                             whole);
      *out = pp_action_overlap (s1, m1, k2, s2, m2);
      return PP_OK;
    }

  {
    char whole[256];
    int k, s, m;
    snprintf (whole, sizeof whole, "%.*s", (int) (end - p), p);
    if ((st = parse_simple (p, end, whole, &k, &s, &m, err)) != PP_OK)
      return st;
    *out = pp_action (k, s, m);
  }
  return PP_OK;
}
