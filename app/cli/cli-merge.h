/* cli-merge.h — merging one job's rank traces into one trace, for the
 * commands that do it: `merge` and `profile` (its ranks' PATH.rankR). */
#pragma once

/* Merges the traces inputs[0..n) into out as `pipescope-cli merge -o out
 * INPUTS...` does, and prints what `merge` prints ("merged ..." on stdout).
 * out is replaced only once the whole merged trace is written and on the
 * disk: on any failure (a full disk too) out is left as it was, nothing is
 * left beside it, and one line on stderr says why and that the inputs are
 * kept.  The inputs are never written.  Returns 0; 1 on failure; 2 for the
 * user's mistake (one line, nothing written): out is one of the inputs, an
 * input is given twice, or two inputs hold the same rank. */
int pp_cli_merge_files (const char *out, const char *const *inputs, int n);
