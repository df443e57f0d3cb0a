/* Writes 20M realistic spans through pp_trace_write_spans (chunks of 4096)
 * and reads them back with pp_trace_reader_next; prints spans/s each way
 * (median of 5 runs) and bytes per span on disk.  Targets: >= 20M spans/s
 * each way on a 2-core developer machine, <= 48 bytes/span.
 *
 * The file goes to /tmp (page cache; no fsync), or to the path given as the
 * argument, or with --memfd to a memory-backed fd (tmpfs pages: page
 * allocation makes writing there slower than to a disk's page cache). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pp-trace.h"
#include "bench-util.h"

#define N_SPANS (20 * 1000 * 1000)
#define CHUNK   4096
#define RUNS    5

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A pipeline's worth of spans: 8 ranks, F/B/SEND/RECV and kernels, times a
 * few microseconds apart, transfers with bytes. */
static void
fill_chunk (PpSpan *s, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    {
      size_t k = base + i;
      uint16_t kind = (uint16_t) (k % PP_N_SPAN_KINDS);
      s[i] = (PpSpan) {
        .start_ns = 1000000000000LL + (int64_t) k * 997,
        .end_ns = 1000000000000LL + (int64_t) k * 997 + 500 + (int64_t) (k % 100000),
        .bytes = (kind >= PP_SPAN_SEND_F && kind <= PP_SPAN_RECV_B) || kind == PP_SPAN_MEMCPY
                 ? 4u << 20 : 0,
        .rank = (int32_t) (k % 8),
        .stage = (int32_t) (k % 16),
        .microbatch = (int32_t) (k / 8 % 64),
        .step = (int32_t) (k / 100000),
        .name_id = (uint32_t) (k % 50),
        .kind = kind,
        .device = kind >= PP_SPAN_KERNEL ? (uint16_t) (k % 8) : 0xffff,
        .stream = (uint32_t) (k % 4),
        .peer_rank = (kind >= PP_SPAN_SEND_F && kind <= PP_SPAN_RECV_B) ? (int32_t) ((k + 1) % 8) : -1,
      };
    }
}

int
main (int argc, char **argv)
{
  char tmp_path[64];
  snprintf (tmp_path, sizeof tmp_path, "/tmp/pp-bench-trace-%d.pptrace", (int) getpid ());
  const char *path = argc > 1 ? argv[1] : tmp_path;
  if (strcmp (path, "--memfd") == 0)
    path = NULL;
  PpSpan *chunk = malloc (CHUNK * sizeof *chunk);
  if (chunk == NULL)
    return 1;
  double wtimes[RUNS], rtimes[RUNS];
  off_t file_size = 0;
  long long checksum = 0;

  for (int run = 0; run < RUNS; run++)
    {
      int fd = path ? open (path, O_RDWR | O_CREAT | O_TRUNC, 0600)
                    : memfd_create ("bench-trace", 0);
      if (fd < 0)
        {
          perror ("bench-trace: open");
          return 1;
        }
      PpError err = { 0 };
      PpTraceWriter *w = pp_trace_writer_new_fd (fd, PP_TRACE_NATIVE, &err);
      if (w == NULL)
        {
          fprintf (stderr, "bench-trace: %s\n", err.msg);
          return 1;
        }
      /* Generating spans is the caller's cost, not the writer's: time only
       * the write calls. */
      double wt = 0;
      for (size_t base = 0; base < N_SPANS; base += CHUNK)
        {
          size_t n = N_SPANS - base < CHUNK ? N_SPANS - base : CHUNK;
          fill_chunk (chunk, n, base);
          double t0 = now_s ();
          if (pp_trace_write_spans (w, chunk, n, &err) != PP_OK)
            {
              fprintf (stderr, "bench-trace: %s\n", err.msg);
              return 1;
            }
          wt += now_s () - t0;
        }
      double t0 = now_s ();
      if (pp_trace_writer_close (w, &err) != PP_OK)
        {
          fprintf (stderr, "bench-trace: %s\n", err.msg);
          return 1;
        }
      wt += now_s () - t0;
      wtimes[run] = wt;

      struct stat st;
      fstat (fd, &st);
      file_size = st.st_size;
      lseek (fd, 0, SEEK_SET);

      t0 = now_s ();
      PpTraceReader *r = pp_trace_reader_new_fd (fd, &err);
      PpTraceItem it;
      size_t n_read = 0;
      for (;;)
        {
          if (pp_trace_reader_next (r, &it, &err) != PP_OK)
            {
              fprintf (stderr, "bench-trace: %s\n", err.msg);
              return 1;
            }
          if (it.type == PP_TRACE_ITEM_END)
            break;
          checksum += it.span.end_ns - it.span.start_ns + it.span.rank;
          n_read++;
        }
      pp_trace_reader_free (r);
      rtimes[run] = now_s () - t0;
      close (fd);
      if (n_read != N_SPANS)
        {
          fprintf (stderr, "bench-trace: read %zu spans, wrote %d\n", n_read, N_SPANS);
          return 1;
        }
    }
  if (path)
    unlink (path);

  qsort (wtimes, RUNS, sizeof (double), bench_cmp_double);
  qsort (rtimes, RUNS, sizeof (double), bench_cmp_double);
  double wrate = N_SPANS / wtimes[RUNS / 2], rrate = N_SPANS / rtimes[RUNS / 2];
  double bps = (double) file_size / N_SPANS;
  printf ("spans: %d, file %.1f MB (%s)\n", N_SPANS, file_size / 1e6, path ? path : "memfd");
  printf ("write: %.1f M spans/s (median of %d; %.3f s)\n", wrate / 1e6, RUNS, wtimes[RUNS / 2]);
  printf ("read:  %.1f M spans/s (median of %d; %.3f s)\n", rrate / 1e6, RUNS, rtimes[RUNS / 2]);
  printf ("bytes/span on disk: %.3f (header included)\n", bps);
  printf ("(checksum %lld)\n", checksum);
  free (chunk);
  int ok = wrate >= 20e6 && rrate >= 20e6 && bps <= 48.0;
  printf ("%s\n", ok ? "targets met" : "TARGETS MISSED");
  return 0;
}
