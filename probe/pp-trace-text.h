/* pp-trace-text.h — strings from a trace file (hosts, commands, models,
 * span names) as an output may show them.
 *
 * A trace is untrusted: its strings may hold bytes that are not UTF-8,
 * terminal escape sequences, newlines, quotes.  Each output escapes them
 * in its own way (JSON: \uXXXX; a terminal: \xNN, \n; SVG and the drawn
 * picture: U+FFFD), all reading the string one character at a time here,
 * so that they agree on what a character is.  No GLib. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The character s begins with (s[0] != '\0'): returns its length in bytes
 * (1 to 4) and sets *cp to its code point, or to -1 where s does not begin
 * with a valid UTF-8 sequence (overlong, a surrogate, past U+10FFFF, cut
 * short): then the length is 1, that byte alone. */
int  pp_trace_text_next (const char *s, int32_t *cp);

/* Whether cp is a control character (C0, DEL or C1), which no output
 * shows as it is: a terminal obeys it. */
bool pp_trace_text_is_control (int32_t cp);

/* s as valid UTF-8 without control characters, into buf[size] (size >
 * 0): each byte that is not UTF-8 and each control character becomes
 * U+FFFD; cut at a character's end where buf is too small.  For text
 * drawn (cairo refuses a string that is not UTF-8) and XML. */
void pp_trace_text_printable (const char *s, char *buf, size_t size);
