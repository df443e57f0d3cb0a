/* pp-application.h — the pipescope application: command line, actions. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define PP_TYPE_APPLICATION (pp_application_get_type ())
G_DECLARE_FINAL_TYPE (PpApplication, pp_application, PP, APPLICATION, AdwApplication)

PpApplication *pp_application_new (gboolean unique);
gboolean       pp_application_args_unique (int argc, char **argv);   /* decided before it registers */

/* pipescope-cli: beside our own binary, else on PATH; NULL if neither. */
char          *pp_application_find_cli (void);
/* The manual's front page (README.md, sources or installed), or NULL. */
char          *pp_application_find_manual (void);

G_END_DECLS
