/* pp-json.h — a small JSON reader for untrusted files (torch.profiler traces).
 *
 * pp_json_parse reads a whole document into a flat array of nodes that
 * point into the text (nothing is copied, strings are decoded on request).
 * It never recurses: nesting deeper than PP_JSON_MAX_DEPTH, a text longer
 * than PP_JSON_MAX_BYTES, anything but one RFC 8259 value (blanks around it
 * and a UTF-8 byte order mark before it allowed) is PP_EFORMAT with one line
 * naming the byte offset and what was expected.  Memory is the text plus 16
 * bytes a value, and the caller bounds the values by the text: with
 * bytes_per_value k, a document holds at most PP_JSON_FREE_VALUES plus one
 * value per k bytes, in every prefix of it; more is PP_EFORMAT with one
 * line, said before any node is allocated and as soon as a prefix is too
 * dense (a text of n bytes may hold n / 2 values, 8 times its size in
 * nodes: [0,0,0,...]).  With max_bytes (0: none), the nodes may take at
 * most that much memory: a document of more values is PP_EFORMAT with one
 * line, said as soon as the count passes it and before any node is
 * allocated (the caller's memory budget, the text held apart).  Time is
 * linear (two passes: one counts, one fills).
 *
 * A document too large for nodes of all its values is read in parts:
 * pp_json_parse_outer checks the whole text as pp_json_parse does (the
 * same errors at the same offsets, every value counted against
 * bytes_per_value) but gives no nodes to the elements of one array, the
 * document itself or its top-level member key (torch.profiler's
 * traceEvents); pp_json_elements then reads that array's elements one at
 * a time, each a small document of its own (pp_json_parse_value), its
 * nodes reused for the next.  Memory is then the text, the nodes of what
 * is outside the array and those of its largest element.
 *
 * Numbers are kept as text and converted exactly, with no locale (the app
 * runs under the user's LC_NUMERIC): pp_json_scaled gives value x 10^k
 * rounded to an integer, so "5314361483973.944" microseconds is read as
 * 5314361483973944 nanoseconds without a detour through double.
 *
 * No GLib (it sits below ui/).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pp-status.h"

#define PP_JSON_MAX_DEPTH 64
#define PP_JSON_MAX_BYTES ((size_t) 1 << 31)
#define PP_JSON_FREE_VALUES 65536   /* before the bytes-per-value bound counts */

typedef enum {
  PP_JSON_NULL = 0,
  PP_JSON_FALSE,
  PP_JSON_TRUE,
  PP_JSON_NUMBER,
  PP_JSON_STRING,
  PP_JSON_ARRAY,
  PP_JSON_OBJECT,
} PpJsonType;

/* Node 0 is the document's value.  Index 0 never names a child or a
 * sibling, so 0 doubles as "none" in what the lookups return. */
typedef struct {
  uint8_t  type;      /* PpJsonType */
  uint8_t  escaped;   /* STRING: holds backslash escapes */
  uint16_t reserved;
  uint32_t next;      /* next sibling; in an object keys and values alternate */
  uint32_t off;       /* NUMBER, STRING: byte offset of the text (after the quote);
                       * ARRAY, OBJECT: first child, 0 when empty */
  uint32_t len;       /* NUMBER, STRING: bytes of text; ARRAY: elements; OBJECT: members */
} PpJsonNode;

typedef struct {
  const char *text;   /* borrowed: must outlive the document */
  size_t      size;
  PpJsonNode *nodes;
  size_t      n_nodes;
  size_t      cap_nodes;   /* what nodes holds */
} PpJsonDoc;

PpStatus pp_json_parse (const char *text, size_t size, size_t bytes_per_value, size_t max_bytes,
                        PpJsonDoc *doc, PpError *err);
void     pp_json_doc_clear (PpJsonDoc *doc);

/* pp_json_parse, but the elements of the array that is the document, or
 * of each array that is its top-level member key, get no nodes (that
 * array's node is empty): *array_at is where the first such array
 * begins (its '['), SIZE_MAX when there is none.  Only max_bytes of
 * nodes, those outside it, bound by memory. */
PpStatus pp_json_parse_outer (const char *text, size_t size, size_t bytes_per_value, size_t max_bytes,
                              const char *key, PpJsonDoc *doc, size_t *array_at, PpError *err);
/* The one value text begins with (no blank before it), into doc, whose
 * nodes (none, or those of an earlier value) are reused or grown: doc's
 * text is text and its size the value's bytes; what follows it is not
 * read.  One pass, the nodes grown as they come to at most max_bytes
 * (0: no bound): a value of more is pp_json_parse's PP_EFORMAT line. */
PpStatus pp_json_parse_value (const char *text, size_t size, size_t max_bytes, PpJsonDoc *doc,
                              PpError *err);

/* The elements of an array, in a text pp_json_parse_outer has checked,
 * one at a time. */
typedef struct {
  const char *text;
  size_t      size;
  size_t      pos;      /* where the next element is */
  size_t      index;    /* how many were read */
  bool        done;
} PpJsonElements;

/* array_at: the array's '[' in text (pp_json_parse_outer's array_at). */
void     pp_json_elements_init (PpJsonElements *it, const char *text, size_t size, size_t array_at);
/* The next element into elem (pp_json_parse_value; *got false past the
 * last): elem's nodes are replaced, clear it once done.  An element
 * whose nodes pass max_bytes is pp_json_parse's PP_EFORMAT. */
PpStatus pp_json_elements_next (PpJsonElements *it, size_t max_bytes, PpJsonDoc *elem, bool *got,
                                PpError *err);

static inline const PpJsonNode *
pp_json_node (const PpJsonDoc *doc, uint32_t i)
{
  return &doc->nodes[i];
}

/* The value of member key in object obj; 0 when obj is not an object or
 * has no such member (the first one wins). */
uint32_t pp_json_get (const PpJsonDoc *doc, uint32_t obj, const char *key);
/* Is node a string equal to s (escapes decoded)? */
bool     pp_json_string_is (const PpJsonDoc *doc, uint32_t node, const char *s);
/* Does node, a string, start with prefix (escapes decoded)? */
bool     pp_json_string_has_prefix (const PpJsonDoc *doc, uint32_t node, const char *prefix);
/* Decodes a string into buf (NUL-terminated, cut to size - 1 bytes);
 * returns the decoded length before any cut, or -1 when node is no string. */
long     pp_json_string (const PpJsonDoc *doc, uint32_t node, char *buf, size_t size);
/* value x 10^scale (scale 0..18), rounded half away from zero: false when
 * node is no number or the result does not fit in an int64. */
bool     pp_json_scaled (const PpJsonDoc *doc, uint32_t node, int scale, int64_t *out);
/* A whole number (a number without fraction after scaling by 1) in int64. */
bool     pp_json_int (const PpJsonDoc *doc, uint32_t node, int64_t *out);
