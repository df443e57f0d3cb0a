/* cli-select.h — export's --steps, --ranks and --replicas: which steps,
 * pipeline ranks and replicas (dp) a filtered export keeps, each a list of
 * whole numbers and ranges ("2", "2-4", "0,3", "0-7,12"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A set of whole numbers; n 0 (never given): every number. */
typedef struct {
  size_t   n;
  int32_t (*range)[2];   /* [n] inclusive, first <= last */
} PpCliList;

/* What an export keeps: a span when its step, its pipeline rank and its
 * replica (its process's dp; 0 without places) are each listed. */
typedef struct {
  PpCliList steps, ranks, replicas;
} PpCliSelection;

/* Parses arg, the value of option (named in the error), into *out,
 * replacing what it held: 0, or the one-line usage error (exit 2). */
int  pp_cli_list_parse (const char *option, const char *arg, PpCliList *out);
bool pp_cli_list_has (const PpCliList *l, int64_t v);
void pp_cli_list_clear (PpCliList *l);

/* Whether any of the three was given. */
bool pp_cli_selection_given (const PpCliSelection *s);
void pp_cli_selection_clear (PpCliSelection *s);

/* Each of k's lists must select something the trace has: n spans, whose
 * step, pipeline rank and replica (dp) coords (user, i, v) gives (a step
 * below 0 is outside every step).  0, or the one-line usage error naming
 * what the trace has (exit 2). */
int pp_cli_selection_check (const PpCliSelection *k, size_t n,
                            void (*coords) (const void *user, size_t i, int32_t v[3]), const void *user);
