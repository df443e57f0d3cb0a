/* pp-timeline-filter.c — the search entry's grammar (pp-timeline-filter.h). */
#include "pp-timeline-filter.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct { const char *word; int kind; } kind_words[] = {
  { "f", PP_SPAN_F }, { "fwd", PP_SPAN_F }, { "forward", PP_SPAN_F },
  { "b", PP_SPAN_B }, { "bwd", PP_SPAN_B }, { "backward", PP_SPAN_B },
  { "i", PP_SPAN_I }, { "w", PP_SPAN_W },
  { "fb", PP_SPAN_OVERLAP_F_B }, { "f+b", PP_SPAN_OVERLAP_F_B },
  { "opt", PP_SPAN_OPT }, { "optimizer", PP_SPAN_OPT }, { "loss", PP_SPAN_LOSS },
  { "wait", PP_SPAN_WAIT },
  { "unshard", PP_SPAN_UNSHARD }, { "reshard", PP_SPAN_RESHARD },
  { "reduce_grad", PP_SPAN_REDUCE_GRAD }, { "wait_reduce_grad", PP_SPAN_WAIT_REDUCE_GRAD },
};

static const struct { const char *word; size_t field; } number_words[] = {
  { "mb", offsetof (PpTimelineFilter, microbatch) },
  { "m", offsetof (PpTimelineFilter, microbatch) },
  { "micro-batch", offsetof (PpTimelineFilter, microbatch) },
  { "microbatch", offsetof (PpTimelineFilter, microbatch) },
  { "stage", offsetof (PpTimelineFilter, stage) },
  { "s", offsetof (PpTimelineFilter, stage) },
  { "step", offsetof (PpTimelineFilter, step) },
  { "rank", offsetof (PpTimelineFilter, rank) },
  { "r", offsetof (PpTimelineFilter, rank) },
};

/* "3" or "2-4" at *p (p advanced); 0 on success. */
static int
parse_range (const char **p, PpTimelineFilterRange *out)
{
  char *end;
  long lo = strtol (*p, &end, 10), hi;
  if (end == *p || lo < 0 || lo > 1000000000L)
    return -1;
  hi = lo;
  if (*end == '-')
    {
      const char *q = end + 1;
      hi = strtol (q, &end, 10);
      if (end == q || hi < lo || hi > 1000000000L)
        return -1;
    }
  if (*end && !isspace ((unsigned char) *end) && *end != ',')
    return -1;
  out->lo = (int) lo;
  out->hi = (int) hi;
  *p = end;
  return 0;
}

int
pp_timeline_filter_parse (const char *text, PpTimelineFilter *out, char *err, size_t err_size)
{
  static const PpTimelineFilterRange any = { 1, 0 };
  const char *p = text ? text : "";
  memset (out, 0, sizeof *out);
  out->microbatch = out->stage = out->step = out->rank = any;
  if (err_size > 0)
    err[0] = 0;

  for (;;)
    {
      char word[32];
      size_t n = 0;
      while (*p && (isspace ((unsigned char) *p) || *p == ','))
        p++;
      if (!*p)
        break;
      /* a word: letters, '+', '-' between letters; digits end it (mb3) */
      while (p[n] && !isspace ((unsigned char) p[n]) && p[n] != ','
             && !isdigit ((unsigned char) p[n]) && n + 1 < sizeof word)
        {
          word[n] = (char) tolower ((unsigned char) p[n]);
          n++;
        }
      word[n] = 0;
      if (n == 0)
        {
          snprintf (err, err_size, "a number needs a word before it: mb %.12s, stage %.12s, step %.12s", p, p, p);
          return -1;
        }
      p += n;
      if (strcmp (word, "all") == 0)
        continue;
      int done = 0;
      for (size_t k = 0; k < sizeof kind_words / sizeof kind_words[0] && !done; k++)
        if (strcmp (word, kind_words[k].word) == 0 && !isdigit ((unsigned char) *p))
          {
            out->kinds |= 1u << kind_words[k].kind;
            done = 1;
          }
      for (size_t k = 0; k < sizeof number_words / sizeof number_words[0] && !done; k++)
        if (strcmp (word, number_words[k].word) == 0)
          {
            while (*p && isspace ((unsigned char) *p))
              p++;
            PpTimelineFilterRange *r = (PpTimelineFilterRange *) ((char *) out + number_words[k].field);
            if (parse_range (&p, r) != 0)
              {
                snprintf (err, err_size, "'%s' needs a number or a range after it: %s 3, %s 2-4",
                          word, word, word);
                return -1;
              }
            done = 1;
          }
      if (!done)
        {
          snprintf (err, err_size, "unknown word '%s': try F, B, I, W, FB, OPT, mb 3, stage 2, step 5, rank 1",
                    word);
          return -1;
        }
    }
  out->active = out->kinds != 0 || out->microbatch.lo <= out->microbatch.hi
                || out->stage.lo <= out->stage.hi || out->step.lo <= out->step.hi
                || out->rank.lo <= out->rank.hi;
  return 0;
}

static int
in_range (const PpTimelineFilterRange *r, int v)
{
  return r->lo > r->hi || (v >= r->lo && v <= r->hi);
}

int
pp_timeline_filter_match (const PpTimelineFilter *f, int rank, const PpSpan *s)
{
  if (f == NULL || !f->active)
    return 1;
  if (f->kinds != 0 && (s->kind >= 32 || !(f->kinds >> s->kind & 1)))
    return 0;
  return in_range (&f->microbatch, s->microbatch) && in_range (&f->stage, s->stage)
         && in_range (&f->step, s->step) && in_range (&f->rank, rank);
}
