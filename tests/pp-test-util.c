#include "pp-test-util.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

PpSchedule *
pp_test_generate (const char *name, int P, int M, int V)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_generate (name, P, M, V, &s, &err);
  if (st != PP_OK)
    g_error ("generate %s P=%d M=%d V=%d: %s: %s", name, P, M, V, pp_status_name (st), err.msg);
  g_assert_nonnull (s);
  return s;
}

PpSimulation *
pp_test_simulate (const PpSchedule *s, double f, double b, double w, double c)
{
  PpCostModel *cost = pp_cost_model_new_uniform (s->n_stages, f, b, w, c);
  PpSimulation *sim = NULL;
  PpError err = { 0 };
  PpStatus st;

  g_assert_nonnull (cost);
  st = pp_simulate (s, cost, &sim, &err);
  if (st != PP_OK)
    g_error ("simulating %s P=%d M=%d: %s: %s", s->name, s->ranks, s->microbatches,
             pp_status_name (st), err.msg);
  pp_cost_model_free (cost);
  g_assert_nonnull (sim);
  return sim;
}

const char *
pp_test_cli_path (void)
{
  const char *p = g_getenv ("PIPESCOPE_CLI");
  if (p == NULL)
    g_error ("PIPESCOPE_CLI is not set (meson sets it)");
  return p;
}

int
pp_test_cli_run (char **envp, char **out, char **err, ...)
{
  GPtrArray *argv = g_ptr_array_new ();
  GError *error = NULL;
  va_list ap;
  const char *a;
  int status = -1;

  g_ptr_array_add (argv, (char *) pp_test_cli_path ());
  va_start (ap, err);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL,
                     out, err, &status, &error))
    g_error ("spawn %s: %s", pp_test_cli_path (), error->message);
  g_ptr_array_free (argv, TRUE);
  if (!WIFEXITED (status))
    g_error ("pipescope-cli did not exit normally");
  return WEXITSTATUS (status);
}

int
pp_test_count (const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = strstr (hay, needle); p; p = strstr (p + 1, needle))
    n++;
  return n;
}

void
pp_test_assert_one_line_error (const char *err)
{
  /* what came, where it is not one error line: a failure under CI's load
   * says what the command printed */
  if (!g_str_has_prefix (err, "pipescope-cli: error: ") || pp_test_count (err, "\n") != 1
      || !g_str_has_suffix (err, "\n"))
    g_printerr ("stderr was not one error line:\n%s\n(end of stderr)\n", err);
  g_assert_true (g_str_has_prefix (err, "pipescope-cli: error: "));
  g_assert_cmpint (pp_test_count (err, "\n"), ==, 1);
  g_assert_true (g_str_has_suffix (err, "\n"));
}

void
pp_test_rm_rf (const char *path)
{
  GDir *d = g_dir_open (path, 0, NULL);
  if (d != NULL)
    {
      const char *n;
      while ((n = g_dir_read_name (d)) != NULL)
        {
          char *p = g_build_filename (path, n, NULL);
          pp_test_rm_rf (p);
          g_free (p);
        }
      g_dir_close (d);
      g_rmdir (path);
    }
  else
    g_unlink (path);
}

void
pp_test_ctx_init (PpTestCtx *c, const char *prefix)
{
  char *tmpl = g_strdup_printf ("%s-XXXXXX", prefix);
  c->dir = g_dir_make_tmp (tmpl, NULL);
  g_free (tmpl);
  g_assert_nonnull (c->dir);
  c->envp = g_environ_setenv (g_get_environ (), "XDG_RUNTIME_DIR", c->dir, TRUE);
}

void
pp_test_ctx_clear (PpTestCtx *c)
{
  pp_test_rm_rf (c->dir);
  g_free (c->dir);
  g_strfreev (c->envp);
}

char *
pp_test_ctx_path (PpTestCtx *c, const char *name)
{
  return g_build_filename (c->dir, name, NULL);
}
