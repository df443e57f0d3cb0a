/* bench-util.h — what every C benchmark times with: a monotonic clock in
 * milliseconds and the median of a set of runs (the figure a benchmark
 * quotes: one slow run on a shared machine moves it least). */
#pragma once

#include <stdlib.h>
#include <time.h>

static inline double
bench_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int
bench_cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* The median of t[n] (sorted in place; the mean of the two middles for an
 * even n). */
static inline double
bench_median (double *t, int n)
{
  qsort (t, (size_t) n, sizeof *t, bench_cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
