/* libcublasLt opened on first use, not linked (kernels/pp-cublaslt-api.h):
 * a program that holds the CUDA backend has not loaded it at start (each
 * CLI command and test program paid 80 ms of CPU for it), and the first
 * pp_cublaslt_api opens it with every function the GEMMs call, so that a
 * misspelt name fails here, on a machine without a GPU, rather than on the
 * GPU machine.  Built where CUDA and cuBLASLt are.
 */
#include <glib.h>
#include <string.h>

#include "pp-cublaslt-api.h"

static gboolean
mapped (const char *lib)
{
  g_autofree char *maps = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL));
  return strstr (maps, lib) != NULL;
}

static void
test_opened_on_first_use (void)
{
  g_assert_false (mapped ("libcublasLt.so"));
  PpError err = { 0 };
  const PpCublasLtApi *api = pp_cublaslt_api (&err);
  g_assert_nonnull (api);
  g_assert_true (api == &pp_cublaslt_fns);
  g_assert_true (mapped ("libcublasLt.so"));
  void *const *fns = (void *const *) api;
  for (size_t i = 0; i < sizeof *api / sizeof (void *); i++)
    g_assert_nonnull (fns[i]);
  /* once for the process: the same table, no second open */
  g_assert_true (pp_cublaslt_api (NULL) == api);
  /* and callable: the library names its own status */
  g_assert_cmpstr (api->GetStatusName (CUBLAS_STATUS_SUCCESS), ==, "CUBLAS_STATUS_SUCCESS");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cublaslt-api/opened-on-first-use", test_opened_on_first_use);
  return g_test_run ();
}
