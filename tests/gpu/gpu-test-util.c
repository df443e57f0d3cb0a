/* gpu-test-util.c — see gpu-test-util.h. */
#include "gpu-test-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-kernels.h"

PpCublasLt  *lt;
cudaStream_t stream;

void
gpu_test_init (int *argc, char ***argv, const char *name)
{
  int ndev = 0;
  PpError err = { 0 };
  if (pp_cuda_device_count (&ndev, &err) != PP_OK)
    {
      int tap = 0;
      for (int i = 1; i < *argc; i++)
        tap |= strcmp ((*argv)[i], "--tap") == 0;
      if (tap)
        {
          printf ("1..0 # SKIP %s\n", err.msg);
          exit (0);
        }
      printf ("%s: SKIP: %s\n", name, err.msg);
      exit (77);
    }

  g_test_init (argc, argv, NULL);
  pp_kernels_init ();

  lt = pp_cublaslt_new (&err);
  if (lt == NULL)
    {
      fprintf (stderr, "%s: %s\n", name, err.msg);
      exit (1);
    }
  CHECK_CUDA (cudaStreamCreateWithFlags (&stream, cudaStreamNonBlocking));
}

void
gpu_test_finish (void)
{
  cudaStreamDestroy (stream);
  pp_cublaslt_free (lt);
}

void *
dev_alloc (size_t bytes)
{
  void *p = NULL;
  CHECK_CUDA (cudaMalloc (&p, bytes > 0 ? bytes : 1));
  return p;
}

void *
upload (const void *host, size_t bytes)
{
  void *d = dev_alloc (bytes);
  CHECK_CUDA (cudaMemcpyAsync (d, host, bytes, cudaMemcpyHostToDevice, stream));
  CHECK_CUDA (cudaStreamSynchronize (stream));
  return d;
}

float *
download_f (const float *dev, size_t n)
{
  float *h = g_new (float, n > 0 ? n : 1);
  CHECK_CUDA (cudaStreamSynchronize (stream));
  CHECK_CUDA (cudaMemcpyAsync (h, dev, n * sizeof (float), cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA (cudaStreamSynchronize (stream));
  return h;
}

double
max_abs (const float *v, size_t n)
{
  double m = 0.0;
  for (size_t i = 0; i < n; i++)
    m = fmax (m, fabs ((double) v[i]));
  return m;
}
