/* pipescope — the desktop app.  Everything is in PpApplication. */
#include "pp-application.h"
#include "pp-window.h"

int
main (int argc, char **argv)
{
  g_autoptr (PpApplication) app = pp_application_new (pp_application_args_unique (argc, argv));
  int status = g_application_run (G_APPLICATION (app), argc, argv);
  if (status == 0)
    status = pp_window_self_test_result ();
  return status;
}
