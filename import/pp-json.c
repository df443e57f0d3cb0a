/* pp-json.c — a small JSON reader for untrusted files (pp-json.h).
 *
 * One loop over the text with an explicit stack of open containers (at most
 * PP_JSON_MAX_DEPTH): no recursion, so no input can exhaust the C stack.
 * It runs twice: once to check the text and count its values, which the
 * caller's budget is held against before anything is allocated, then to
 * fill exactly that many nodes (no array grown by doubling, no slack).
 * One small value (an element of a large array, pp_json_parse_value) is
 * read once, into nodes grown as they come, up to the bound given. */
#include "pp-json.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  uint32_t node;     /* the open array or object */
  uint32_t last;     /* its last child so far, 0 when none */
  uint8_t  type;     /* PP_JSON_ARRAY or PP_JSON_OBJECT */
} Level;

typedef struct {
  PpJsonNode *nodes;   /* NULL: only count them */
  size_t      n;                 /* nodes (counting: those that will be) */
  size_t      seen;              /* values read, those without nodes too */
  size_t      bytes_per_value;   /* counting: the budget (0 none) */
  size_t      max_values;        /* counting: what the memory given holds (0 no bound) */
  bool        over_memory;       /* counting stopped at max_values */
  /* pp_json_parse_outer: the arrays whose elements get no nodes */
  const char *lazy_key;          /* NULL: none */
  int         lazy_depth;        /* inside one (its depth + 1), 0 not */
  bool        key_lazy;          /* the top-level key just read is lazy_key */
  size_t      lazy_at;           /* where the first began, SIZE_MAX none */
  /* pp_json_parse_value: one value, then stop */
  bool        one_value;
  size_t      end;               /* where it ended */
  PpJsonDoc  *grow;              /* one pass: its nodes grown as they come (to max_values) */
  bool        out_of_memory;
} Builder;

static bool key_is (const char *t, uint32_t off, uint32_t len, uint8_t escaped, const char *key);

static bool
is_blank (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

static int
hex_value (char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

#define OVER_BUDGET UINT32_MAX

/* Appends a node (or counts it), linked under the innermost open
 * container, for a value that begins at byte at; its index, or
 * OVER_BUDGET when counting finds more values than the text so far may
 * hold (a bomb stops at its first few hundred KiB, not at its end).  A
 * value inside a lazy array is counted against the text, but gets no
 * node (0). */
static uint32_t
add_node (Builder *b, Level *stack, int depth, uint8_t type, uint32_t off, uint32_t len,
          uint8_t escaped, size_t at)
{
  bool lazy = b->lazy_depth > 0 && depth >= b->lazy_depth;
  if (b->nodes == NULL && b->bytes_per_value > 0
      && b->seen >= PP_JSON_FREE_VALUES + at / b->bytes_per_value)
    return OVER_BUDGET;
  b->seen++;
  if (lazy)
    return 0;
  if (b->nodes == NULL && b->grow == NULL)
    {
      if (b->max_values > 0 && b->n >= b->max_values)
        {
          b->over_memory = true;
          return OVER_BUDGET;
        }
      return (uint32_t) b->n++;
    }
  if (b->grow != NULL && b->n == b->grow->cap_nodes)
    {
      if ((b->max_values > 0 && b->n >= b->max_values) || b->n >= OVER_BUDGET - 1)
        {
          b->over_memory = true;
          return OVER_BUDGET;
        }
      size_t cap = b->n < 32 ? 64 : b->n * 2;
      if (b->max_values > 0 && cap > b->max_values)
        cap = b->max_values;
      PpJsonNode *g = realloc (b->grow->nodes, cap * sizeof *g);
      if (g == NULL)
        {
          b->out_of_memory = true;
          return OVER_BUDGET;
        }
      b->grow->nodes = b->nodes = g;
      b->grow->cap_nodes = cap;
    }
  uint32_t i = (uint32_t) b->n++;
  PpJsonNode *n = &b->nodes[i];
  memset (n, 0, sizeof *n);
  n->type = type;
  n->escaped = escaped;
  n->off = off;
  n->len = len;
  if (depth > 0)
    {
      Level *l = &stack[depth - 1];
      PpJsonNode *parent = &b->nodes[l->node];
      if (l->last == 0)
        parent->off = i;
      else
        b->nodes[l->last].next = i;
      l->last = i;
      parent->len++;
    }
  return i;
}

/* Scans a string whose opening quote is at text[*pos]; leaves *pos after
 * the closing quote.  NULL, or what was wrong. */
static const char *
scan_string (const char *t, size_t size, size_t *pos, uint32_t *off, uint32_t *len, uint8_t *escaped)
{
  size_t i = *pos + 1;
  *escaped = 0;
  *off = (uint32_t) i;
  for (;;)
    {
      if (i >= size)
        return "a string is not closed";
      unsigned char c = (unsigned char) t[i];
      if (c == '"')
        break;
      if (c < 0x20)
        return "a control character inside a string";
      if (c == '\\')
        {
          *escaped = 1;
          if (i + 1 >= size)
            return "a string is not closed";
          char e = t[i + 1];
          if (e == 'u')
            {
              if (i + 5 >= size)
                return "a string is not closed";
              for (int k = 2; k < 6; k++)
                if (hex_value (t[i + k]) < 0)
                  return "a bad \\u escape";
              i += 6;
              continue;
            }
          if (strchr ("\"\\/bfnrt", e) == NULL || e == '\0')
            return "a bad escape in a string";
          i += 2;
          continue;
        }
      i++;
    }
  *len = (uint32_t) (i - *off);
  *pos = i + 1;
  return NULL;
}

static const char *
scan_number (const char *t, size_t size, size_t *pos)
{
  size_t i = *pos;
  if (i < size && t[i] == '-')
    i++;
  if (i >= size || !is_digit (t[i]))
    return "a bad number";
  if (t[i] == '0')
    i++;
  else
    while (i < size && is_digit (t[i]))
      i++;
  if (i < size && t[i] == '.')
    {
      i++;
      if (i >= size || !is_digit (t[i]))
        return "a bad number (no digit after '.')";
      while (i < size && is_digit (t[i]))
        i++;
    }
  if (i < size && (t[i] == 'e' || t[i] == 'E'))
    {
      i++;
      if (i < size && (t[i] == '+' || t[i] == '-'))
        i++;
      if (i >= size || !is_digit (t[i]))
        return "a bad number (no digit in the exponent)";
      while (i < size && is_digit (t[i]))
        i++;
    }
  *pos = i;
  return NULL;
}

/* One pass over the text into b (or counting into b->n). */
static PpStatus
parse (const char *text, size_t size, Builder *b, PpError *err)
{
  Level stack[PP_JSON_MAX_DEPTH];
  int depth = 0;
  size_t pos = 0;
  const char *why = NULL;
  /* what the next token may be */
  enum { WANT_VALUE, WANT_VALUE_OR_CLOSE, WANT_KEY, WANT_KEY_OR_CLOSE, WANT_COLON,
         WANT_COMMA_OR_CLOSE, WANT_END } want = WANT_VALUE;

  /* a UTF-8 byte order mark, which some editors and Windows tools write */
  if (!b->one_value && size >= 3 && memcmp (text, "\xef\xbb\xbf", 3) == 0)
    pos = 3;

  for (;;)
    {
      if (want == WANT_END && b->one_value)
        {
          b->end = pos;
          return PP_OK;
        }
      while (pos < size && is_blank (text[pos]))
        pos++;
      if (pos >= size)
        {
          if (want == WANT_END)
            return PP_OK;
          why = b->seen == 0 ? "no JSON value (empty)" : "the JSON ends early (cut short?)";
          goto fail;
        }
      char c = text[pos];
      size_t at = pos;

      if (want == WANT_END)
        {
          why = "data after the JSON value";
          goto fail;
        }
      if (want == WANT_COLON)
        {
          if (c != ':')
            {
              why = "expected ':' after a key";
              goto fail;
            }
          pos++;
          want = WANT_VALUE;
          continue;
        }
      if (want == WANT_COMMA_OR_CLOSE || want == WANT_VALUE_OR_CLOSE || want == WANT_KEY_OR_CLOSE)
        {
          bool object = stack[depth - 1].type == PP_JSON_OBJECT;
          char close = object ? '}' : ']';
          if (c == close)
            {
              pos++;
              depth--;
              if (depth < b->lazy_depth)
                b->lazy_depth = 0;
              want = depth == 0 ? WANT_END : WANT_COMMA_OR_CLOSE;
              continue;
            }
          if (want == WANT_COMMA_OR_CLOSE)
            {
              if (c != ',')
                {
                  why = object ? "expected ',' or '}'" : "expected ',' or ']'";
                  goto fail;
                }
              pos++;
              want = object ? WANT_KEY : WANT_VALUE;
              continue;
            }
          want = want == WANT_KEY_OR_CLOSE ? WANT_KEY : WANT_VALUE;
        }
      if (want == WANT_KEY)
        {
          uint32_t off, len;
          uint8_t esc;
          if (c != '"')
            {
              why = "expected a key (a string)";
              goto fail;
            }
          if ((why = scan_string (text, size, &pos, &off, &len, &esc)) != NULL)
            goto fail;
          if (add_node (b, stack, depth, PP_JSON_STRING, off, len, esc, at) == OVER_BUDGET)
            goto over;
          if (depth == 1 && b->lazy_key != NULL)
            b->key_lazy = key_is (text, off, len, esc, b->lazy_key);
          want = WANT_COLON;
          continue;
        }

      /* a value */
      if (c == '{' || c == '[')
        {
          if (depth == PP_JSON_MAX_DEPTH)
            {
              why = "nested deeper than 64 levels";
              goto fail;
            }
          uint8_t type = c == '{' ? PP_JSON_OBJECT : PP_JSON_ARRAY;
          /* the document, or the top-level member lazy_key, an array */
          bool lazy = b->lazy_key != NULL && b->lazy_depth == 0 && type == PP_JSON_ARRAY
                      && (depth == 0 || (depth == 1 && b->key_lazy));
          if ((stack[depth].node = add_node (b, stack, depth, type, 0, 0, 0, at)) == OVER_BUDGET)
            goto over;
          stack[depth].last = 0;
          stack[depth].type = type;
          depth++;
          if (lazy)
            {
              b->lazy_depth = depth;
              if (b->lazy_at == SIZE_MAX)
                b->lazy_at = at;
            }
          pos++;
          want = c == '{' ? WANT_KEY_OR_CLOSE : WANT_VALUE_OR_CLOSE;
          continue;
        }
      if (c == '"')
        {
          uint32_t off, len;
          uint8_t esc;
          if ((why = scan_string (text, size, &pos, &off, &len, &esc)) != NULL)
            goto fail;
          if (add_node (b, stack, depth, PP_JSON_STRING, off, len, esc, at) == OVER_BUDGET)
            goto over;
        }
      else if (c == '-' || is_digit (c))
        {
          if ((why = scan_number (text, size, &pos)) != NULL)
            goto fail;
          if (add_node (b, stack, depth, PP_JSON_NUMBER, (uint32_t) at, (uint32_t) (pos - at), 0, at)
              == OVER_BUDGET)
            goto over;
        }
      else
        {
          static const struct { const char *word; uint8_t type; } words[] = {
            { "true", PP_JSON_TRUE }, { "false", PP_JSON_FALSE }, { "null", PP_JSON_NULL },
          };
          int k;
          for (k = 0; k < 3; k++)
            {
              size_t n = strlen (words[k].word);
              if (size - pos >= n && memcmp (text + pos, words[k].word, n) == 0)
                break;
            }
          if (k == 3)
            {
              why = "not JSON here (expected a value)";
              goto fail;
            }
          pos += strlen (words[k].word);
          if (add_node (b, stack, depth, words[k].type, 0, 0, 0, at) == OVER_BUDGET)
            goto over;
        }
      want = depth == 0 ? WANT_END : WANT_COMMA_OR_CLOSE;
    }

fail:
  {
    /* the line of the offset, for a person with an editor */
    size_t line = 1;
    size_t end = pos < size ? pos : size;
    for (size_t i = 0; i < end; i++)
      line += text[i] == '\n';
    return pp_error_set (err, PP_EFORMAT, "bad JSON at byte %zu (line %zu): %s", pos, line, why);
  }
over:
  if (b->out_of_memory)
    return pp_error_set (err, PP_ENOMEM, "out of memory reading JSON (%zu values)", b->n);
  if (b->over_memory)
    return pp_error_set (err, PP_EFORMAT,
                         "reading its JSON values takes more than the %zu MiB of memory left for them "
                         "(%zu values in its first %zu bytes, %zu bytes each): refused",
                         (b->max_values * sizeof (PpJsonNode)) >> 20, b->n + 1, pos, sizeof (PpJsonNode));
  return pp_error_set (err, PP_EFORMAT,
                       "too many JSON values: %zu in the first %zu bytes (a text may hold one per "
                       "%zu bytes and %d more): refused", b->seen + 1, pos, b->bytes_per_value,
                       PP_JSON_FREE_VALUES);
}

/* Counts the values of text into count, then fills that many nodes into
 * doc (its nodes reused when they are enough), with fill set as count
 * was but for the nodes. */
static PpStatus
parse_into (const char *text, size_t size, Builder *count, size_t max_bytes, PpJsonDoc *doc, PpError *err)
{
  PpStatus st;

  if (max_bytes > 0)
    count->max_values = max_bytes / sizeof (PpJsonNode) > 0 ? max_bytes / sizeof (PpJsonNode) : 1;
  doc->text = text;
  doc->size = size;
  doc->n_nodes = 0;
  if (size > PP_JSON_MAX_BYTES)
    return pp_error_set (err, PP_EFORMAT, "more than %zu bytes of JSON", PP_JSON_MAX_BYTES);
  if ((st = parse (text, size, count, err)) != PP_OK)
    return st;
  /* a node index is a uint32 (no text under PP_JSON_MAX_BYTES reaches it) */
  if (count->n >= OVER_BUDGET)
    return pp_error_set (err, PP_EFORMAT, "%zu JSON values: refused", count->n);
  if (count->n > doc->cap_nodes || doc->nodes == NULL)
    {
      size_t cap = count->n > 0 ? count->n : 1;
      PpJsonNode *nodes = realloc (doc->nodes, cap * sizeof *nodes);
      if (nodes == NULL)
        return pp_error_set (err, PP_ENOMEM, "out of memory reading JSON (%zu values)", count->n);
      doc->nodes = nodes;
      doc->cap_nodes = cap;
    }
  Builder fill = *count;
  fill.nodes = doc->nodes;
  fill.n = fill.seen = 0;
  fill.bytes_per_value = fill.max_values = 0;
  fill.lazy_depth = 0;
  fill.key_lazy = false;
  fill.lazy_at = SIZE_MAX;
  parse (text, size, &fill, NULL);   /* the same text: it passes again */
  doc->n_nodes = fill.n;
  doc->size = size;
  return PP_OK;
}

PpStatus
pp_json_parse (const char *text, size_t size, size_t bytes_per_value, size_t max_bytes, PpJsonDoc *doc,
               PpError *err)
{
  Builder count = { .bytes_per_value = bytes_per_value, .lazy_at = SIZE_MAX };
  memset (doc, 0, sizeof *doc);
  return parse_into (text, size, &count, max_bytes, doc, err);
}

PpStatus
pp_json_parse_outer (const char *text, size_t size, size_t bytes_per_value, size_t max_bytes,
                     const char *key, PpJsonDoc *doc, size_t *array_at, PpError *err)
{
  Builder count = { .bytes_per_value = bytes_per_value, .lazy_key = key, .lazy_at = SIZE_MAX };
  memset (doc, 0, sizeof *doc);
  PpStatus st = parse_into (text, size, &count, max_bytes, doc, err);
  *array_at = count.lazy_at;
  return st;
}

PpStatus
pp_json_parse_value (const char *text, size_t size, size_t max_bytes, PpJsonDoc *doc, PpError *err)
{
  Builder b = { .nodes = doc->nodes, .lazy_at = SIZE_MAX, .one_value = true, .grow = doc };
  PpStatus st;

  if (max_bytes > 0)
    b.max_values = max_bytes / sizeof (PpJsonNode) > 0 ? max_bytes / sizeof (PpJsonNode) : 1;
  doc->text = text;
  doc->size = 0;
  doc->n_nodes = 0;
  if (size > PP_JSON_MAX_BYTES)
    return pp_error_set (err, PP_EFORMAT, "more than %zu bytes of JSON", PP_JSON_MAX_BYTES);
  if ((st = parse (text, size, &b, err)) != PP_OK)
    return st;
  doc->n_nodes = b.n;
  doc->size = b.end;
  return PP_OK;
}

void
pp_json_elements_init (PpJsonElements *it, const char *text, size_t size, size_t array_at)
{
  it->text = text;
  it->size = size;
  it->pos = array_at + 1;
  it->index = 0;
  it->done = array_at >= size || text[array_at] != '[';
}

PpStatus
pp_json_elements_next (PpJsonElements *it, size_t max_bytes, PpJsonDoc *elem, bool *got, PpError *err)
{
  const char *t = it->text;
  *got = false;
  while (!it->done && it->pos < it->size && is_blank (t[it->pos]))
    it->pos++;
  if (it->done || it->pos >= it->size || t[it->pos] == ']')
    {
      it->done = true;
      return PP_OK;
    }
  PpStatus st = pp_json_parse_value (t + it->pos, it->size - it->pos, max_bytes, elem, err);
  if (st != PP_OK)
    return st;
  it->pos += elem->size;
  while (it->pos < it->size && is_blank (t[it->pos]))
    it->pos++;
  if (it->pos < it->size && t[it->pos] == ',')
    it->pos++;
  else
    it->done = true;   /* ']': the text was checked whole */
  it->index++;
  *got = true;
  return PP_OK;
}

void
pp_json_doc_clear (PpJsonDoc *doc)
{
  if (doc == NULL)
    return;
  free (doc->nodes);
  memset (doc, 0, sizeof *doc);
}

/* Decodes the next character of an escaped string at t[*i] into out
 * (1..4 bytes of UTF-8); returns how many. */
static int
decode_one (const char *t, size_t end, size_t *i, char out[4])
{
  char c = t[*i];
  if (c != '\\')
    {
      out[0] = c;
      (*i)++;
      return 1;
    }
  char e = t[*i + 1];
  *i += 2;
  switch (e)
    {
    case 'b': out[0] = '\b'; return 1;
    case 'f': out[0] = '\f'; return 1;
    case 'n': out[0] = '\n'; return 1;
    case 'r': out[0] = '\r'; return 1;
    case 't': out[0] = '\t'; return 1;
    case 'u': break;
    default: out[0] = e; return 1;
    }
  /* \uXXXX, validated by the parser */
  uint32_t cp = 0;
  for (int k = 0; k < 4; k++)
    cp = cp << 4 | (uint32_t) hex_value (t[*i + k]);
  *i += 4;
  if (cp >= 0xd800 && cp < 0xdc00 && *i + 6 <= end && t[*i] == '\\' && t[*i + 1] == 'u')
    {
      uint32_t lo = 0;
      bool ok = true;
      for (int k = 0; k < 4; k++)
        {
          int h = hex_value (t[*i + 2 + k]);
          ok = ok && h >= 0;
          lo = lo << 4 | (uint32_t) (h < 0 ? 0 : h);
        }
      if (ok && lo >= 0xdc00 && lo < 0xe000)
        {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          *i += 6;
        }
    }
  if (cp >= 0xd800 && cp < 0xe000)
    cp = 0xfffd;   /* a lone surrogate */
  if (cp < 0x80)
    {
      out[0] = (char) cp;
      return 1;
    }
  if (cp < 0x800)
    {
      out[0] = (char) (0xc0 | cp >> 6);
      out[1] = (char) (0x80 | (cp & 0x3f));
      return 2;
    }
  if (cp < 0x10000)
    {
      out[0] = (char) (0xe0 | cp >> 12);
      out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
      out[2] = (char) (0x80 | (cp & 0x3f));
      return 3;
    }
  out[0] = (char) (0xf0 | cp >> 18);
  out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char) (0x80 | (cp & 0x3f));
  return 4;
}

/* Is the key at t[off..off+len) key (escapes decoded)? */
static bool
key_is (const char *t, uint32_t off, uint32_t len, uint8_t escaped, const char *key)
{
  size_t kl = strlen (key);
  if (!escaped)
    return len == kl && memcmp (t + off, key, kl) == 0;
  size_t i = off, end = (size_t) off + len, w = 0;
  while (i < end)
    {
      char ch[4];
      int k = decode_one (t, end, &i, ch);
      if (w + (size_t) k > kl || memcmp (key + w, ch, (size_t) k) != 0)
        return false;
      w += (size_t) k;
    }
  return w == kl;
}

long
pp_json_string (const PpJsonDoc *doc, uint32_t node, char *buf, size_t size)
{
  if (node >= doc->n_nodes || doc->nodes[node].type != PP_JSON_STRING)
    {
      if (size > 0)
        buf[0] = '\0';
      return -1;
    }
  const PpJsonNode *n = &doc->nodes[node];
  const char *t = doc->text;
  size_t i = n->off, end = (size_t) n->off + n->len, w = 0;
  long total = 0;
  while (i < end)
    {
      char ch[4];
      int k = n->escaped ? decode_one (t, end, &i, ch) : (ch[0] = t[i++], 1);
      for (int j = 0; j < k; j++)
        if (w + 1 < size)
          buf[w++] = ch[j];
      total += k;
    }
  if (size > 0)
    buf[w] = '\0';
  return total;
}

bool
pp_json_string_has_prefix (const PpJsonDoc *doc, uint32_t node, const char *prefix)
{
  if (node >= doc->n_nodes || doc->nodes[node].type != PP_JSON_STRING)
    return false;
  const PpJsonNode *n = &doc->nodes[node];
  size_t pl = strlen (prefix);
  if (!n->escaped)
    return n->len >= pl && memcmp (doc->text + n->off, prefix, pl) == 0;
  char buf[256];
  if (pl >= sizeof buf)
    return false;
  long l = pp_json_string (doc, node, buf, sizeof buf);
  return l >= (long) pl && memcmp (buf, prefix, pl) == 0;
}

bool
pp_json_string_is (const PpJsonDoc *doc, uint32_t node, const char *s)
{
  if (node >= doc->n_nodes || doc->nodes[node].type != PP_JSON_STRING)
    return false;
  const PpJsonNode *n = &doc->nodes[node];
  size_t sl = strlen (s);
  if (!n->escaped)
    return n->len == sl && memcmp (doc->text + n->off, s, sl) == 0;
  char buf[256];
  if (sl >= sizeof buf - 1)
    return false;
  long l = pp_json_string (doc, node, buf, sizeof buf);
  return l == (long) sl && memcmp (buf, s, sl) == 0;
}

uint32_t
pp_json_get (const PpJsonDoc *doc, uint32_t obj, const char *key)
{
  if (obj >= doc->n_nodes || doc->nodes[obj].type != PP_JSON_OBJECT)
    return 0;
  uint32_t k = doc->nodes[obj].off;
  for (uint32_t m = 0; m < doc->nodes[obj].len && k != 0; m++)
    {
      uint32_t v = doc->nodes[k].next;
      if (pp_json_string_is (doc, k, key))
        return v;
      k = v != 0 ? doc->nodes[v].next : 0;
    }
  return 0;
}

bool
pp_json_scaled (const PpJsonDoc *doc, uint32_t node, int scale, int64_t *out)
{
  if (node >= doc->n_nodes || doc->nodes[node].type != PP_JSON_NUMBER || scale < 0 || scale > 18)
    return false;
  const PpJsonNode *n = &doc->nodes[node];
  const char *t = doc->text + n->off;
  size_t len = n->len, i = 0;
  bool neg = false;
  uint64_t mant = 0;
  long exp10 = 0;       /* value = mant x 10^exp10 */
  int digits = 0;
  bool dropped_nonzero = false;

  if (t[i] == '-')
    {
      neg = true;
      i++;
    }
  for (; i < len && is_digit (t[i]); i++)
    {
      if (digits < 19)
        {
          mant = mant * 10 + (uint64_t) (t[i] - '0');
          if (mant != 0)
            digits++;
        }
      else
        {
          exp10++;
          dropped_nonzero |= t[i] != '0';
        }
    }
  if (i < len && t[i] == '.')
    for (i++; i < len && is_digit (t[i]); i++)
      if (digits < 19)
        {
          mant = mant * 10 + (uint64_t) (t[i] - '0');
          if (mant != 0)
            digits++;
          exp10--;
        }
  if (i < len && (t[i] == 'e' || t[i] == 'E'))
    {
      bool eneg = false;
      long e = 0;
      i++;
      if (t[i] == '+' || t[i] == '-')
        eneg = t[i++] == '-';
      for (; i < len && is_digit (t[i]); i++)
        if (e < 100000)
          e = e * 10 + (t[i] - '0');
      exp10 += eneg ? -e : e;
    }
  (void) dropped_nonzero;
  exp10 += scale;
  if (mant == 0)
    {
      *out = 0;
      return true;
    }
  if (exp10 >= 0)
    {
      for (long k = 0; k < exp10; k++)
        {
          if (mant > UINT64_MAX / 10)
            return false;
          mant *= 10;
        }
    }
  else if (exp10 < -19)
    mant = 0;
  else
    {
      uint64_t div = 1;
      for (long k = 0; k < -exp10; k++)
        div *= 10;
      uint64_t q = mant / div, r = mant % div;
      if (r >= div - r)   /* half away from zero */
        q++;
      mant = q;
    }
  if (mant > (uint64_t) INT64_MAX)
    return false;
  *out = neg ? -(int64_t) mant : (int64_t) mant;
  return true;
}

bool
pp_json_int (const PpJsonDoc *doc, uint32_t node, int64_t *out)
{
  return pp_json_scaled (doc, node, 0, out);
}
