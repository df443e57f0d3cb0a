/* pp-application.c — command line (FILE, --attach JOB, --self-test), the
 * app-wide actions and keyboard shortcuts. */
#include "pp-application.h"

#include "pp-window.h"
#include "pp-import-open.h"
#include "pp-live.h"

#include <string.h>

struct _PpApplication
{
  AdwApplication parent_instance;
};

G_DEFINE_FINAL_TYPE (PpApplication, pp_application, ADW_TYPE_APPLICATION)

static const GOptionEntry options[] = {
  { "attach", 'a', 0, G_OPTION_ARG_STRING, NULL,
    "Attach to a running job (pid, name, socket or HOST:PORT)", "JOB" },
  { "token-file", 0, 0, G_OPTION_ARG_FILENAME, NULL,
    "Read the token of a job served on TCP from FILE (yours, not readable by others)", "FILE" },
  { "token", 't', 0, G_OPTION_ARG_STRING, NULL,
    "Token of a job served on TCP (other local users can read it here: prefer --token-file "
    "or PIPESCOPE_TOKEN)", "TOKEN" },
  { "no-run", 0, 0, G_OPTION_ARG_NONE, NULL, "Do not start the default run", NULL },
  { "self-test", 0, 0, G_OPTION_ARG_STRING, NULL,
    "Drive the window from inside, for the tests and the manual's pictures (--self-test=help "
    "lists the modes; demo-screenshot opens Save screenshot, whose PNG, SVG or PDF is the "
    "picture for a report)", "MODE" },
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, NULL, NULL, "[FILE…]" },
  { NULL }
};

/* The modes of --self-test (pp-self-test.c): one list for the check, the
 * error and --self-test=help. */
static const char *const self_test_modes[] = {
  "run", "attach", "bench-stream", "open", "open-error", "second-instance", "save", "profile", "replicas",
  "spans", "host-lane", "demo", "demo-compare", "demo-attach", "demo-screenshot", "demo-why", "stragglers",
  "demo-stragglers", "analysis", "compare", NULL
};

char *
pp_application_find_cli (void)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  if (self)
    {
      g_autofree char *dir = g_path_get_dirname (self);
      g_autofree char *beside = g_build_filename (dir, "pipescope-cli", NULL);
      if (g_file_test (beside, G_FILE_TEST_IS_EXECUTABLE))
        return g_steal_pointer (&beside);
      /* Run from the build tree, the command line is built in its own
       * folder (app/cli/ beside app/gui/). */
      if (strcmp (dir, PP_BUILD_GUI_DIR) == 0 && g_file_test (PP_BUILD_CLI, G_FILE_TEST_IS_EXECUTABLE))
        return g_strdup (PP_BUILD_CLI);
    }
  return g_find_program_in_path ("pipescope-cli");
}

static int
pp_application_command_line (GApplication *app, GApplicationCommandLine *cmdline)
{
  GVariantDict *opts = g_application_command_line_get_options_dict (cmdline);
  const char *attach = NULL, *token = NULL, *self_test = NULL, *token_file = NULL;
  char token_buf[256];
  g_autofree const char **files = NULL;
  gboolean no_run = FALSE;

  g_variant_dict_lookup (opts, "attach", "&s", &attach);
  g_variant_dict_lookup (opts, "token", "&s", &token);
  g_variant_dict_lookup (opts, "token-file", "^&ay", &token_file);
  g_variant_dict_lookup (opts, "self-test", "&s", &self_test);
  g_variant_dict_lookup (opts, "no-run", "b", &no_run);
  g_variant_dict_lookup (opts, G_OPTION_REMAINING, "^a&ay", &files);

  if (self_test && (strcmp (self_test, "help") == 0 || !g_strv_contains (self_test_modes, self_test)))
    {
      g_autofree char *modes = g_strjoinv (", ", (char **) self_test_modes);
      if (strcmp (self_test, "help") == 0)
        {
          g_application_command_line_print (cmdline, "pipescope --self-test=MODE, MODE one of: %s\n"
                                            "(app/gui/pp-self-test.c says what each does)\n", modes);
          return 0;
        }
      g_application_command_line_printerr (cmdline, "pipescope: --self-test takes %s\n", modes);
      return 2;
    }

  if (self_test && strcmp (self_test, "bench-stream") == 0 && (!attach || (files && files[0])))
    {
      g_application_command_line_printerr (cmdline, "pipescope: --self-test=bench-stream needs --attach JOB\n");
      return 2;
    }

  /* The token: from a private file, else the environment, else (warned)
   * the command line, which every local user can read. */
  if (token != NULL && token_file != NULL)
    {
      g_application_command_line_printerr (cmdline, "pipescope: give the token once: --token-file or --token, not both\n");
      return 2;
    }
  if (token_file != NULL)
    {
      PpError err = { 0 };
      /* relative to the directory it was given in (another pipescope's) */
      g_autoptr (GFile) tf = g_application_command_line_create_file_for_arg (cmdline, token_file);
      g_autofree char *tf_path = g_file_get_path (tf);
      if (tf_path != NULL)
        token_file = tf_path;
      if (pp_live_token_from_file (token_file, token_buf, sizeof token_buf, &err) != PP_OK)
        {
          g_application_command_line_printerr (cmdline, "pipescope: %s\n", err.msg);
          return 2;
        }
      token = token_buf;
    }
  else if (token != NULL)
    g_application_command_line_printerr (cmdline,
                                         "pipescope: warning: --token on the command line can be read by "
                                         "other local users (/proc/PID/cmdline); use --token-file FILE or "
                                         "PIPESCOPE_TOKEN\n");
  else if (g_application_command_line_getenv (cmdline, "PIPESCOPE_TOKEN") != NULL
           && *g_application_command_line_getenv (cmdline, "PIPESCOPE_TOKEN"))
    token = g_application_command_line_getenv (cmdline, "PIPESCOPE_TOKEN");

  /* `pipescope FILE` while one runs: the running one opens it as a new run
   * of the window in front; anything else gets a window of its own */
  PpWindow *win = NULL;
  if (g_application_command_line_get_is_remote (cmdline) && files && files[0] && !self_test)
    {
      GtkWindow *front = gtk_application_get_active_window (GTK_APPLICATION (app));
      win = PP_IS_WINDOW (front) ? PP_WINDOW (front) : NULL;
    }
  if (win == NULL)
    win = pp_window_new (GTK_APPLICATION (app));
  gtk_window_present (GTK_WINDOW (win));

  if (files && files[0])
    {
      /* torch.profiler traces given together are one job's ranks: one run */
      guint n = g_strv_length ((char **) files);
      GFile **gf = g_new0 (GFile *, n);
      for (guint i = 0; i < n; i++)
        gf[i] = g_application_command_line_create_file_for_arg (cmdline, files[i]);
      pp_gui_open_files (win, gf, n);
      for (guint i = 0; i < n; i++)
        g_object_unref (gf[i]);
      g_free (gf);
    }
  else if (attach)
    pp_window_attach (win, attach, token);
  else if (!no_run)
    pp_window_run (win);

  if (self_test)
    pp_window_start_self_test (win, self_test);
  return 0;
}

static void
pp_application_activate (GApplication *app)
{
  PpWindow *win = pp_window_new (GTK_APPLICATION (app));
  gtk_window_present (GTK_WINDOW (win));
  pp_window_run (win);
}

static void
quit_activated (GSimpleAction *action, GVariant *param, gpointer data)
{
  /* Each window stops its jobs as it closes; the app ends with the last. */
  GList *windows = g_list_copy (gtk_application_get_windows (GTK_APPLICATION (data)));
  for (GList *l = windows; l; l = l->next)
    gtk_window_close (GTK_WINDOW (l->data));
  g_list_free (windows);
}

/* The manual's front page: the sources' README.md when the app runs from
 * the build tree (the manual of the code that runs), else the installed
 * copy; NULL where neither is there. */
char *
pp_application_find_manual (void)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self ? g_path_get_dirname (self) : NULL;
  g_autofree char *source = g_build_filename (PP_SOURCE_ROOT, "README.md", NULL);
  g_autofree char *installed = g_build_filename (PP_DOC_DIR, "README.md", NULL);

  if (dir && strcmp (dir, PP_BUILD_GUI_DIR) == 0 && g_file_test (source, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&source);
  if (g_file_test (installed, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&installed);
  return NULL;
}

static void
manual_activated (GSimpleAction *action, GVariant *param, gpointer data)
{
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (data));
  g_autofree char *path = pp_application_find_manual ();
  if (path == NULL)
    {
      g_warning ("pipescope: the manual is not installed (%s/README.md)", PP_DOC_DIR);
      return;
    }
  g_autofree char *uri = g_filename_to_uri (path, NULL, NULL);
  gtk_show_uri (parent, uri, GDK_CURRENT_TIME);
}

static void
about_activated (GSimpleAction *action, GVariant *param, gpointer data)
{
  const char *developers[] = { "The pipescope authors", NULL };
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (data));
  adw_show_about_window (parent,
                         "application-name", "pipescope",
                         "application-icon", "io.github.pipescope.Pipescope",
                         "developer-name", "The pipescope authors",
                         "version", "0.1.0",
                         "comments", "See your pipeline: a profiler and live schedule visualizer "
                                     "for pipeline-parallel training.",
                         "license-type", GTK_LICENSE_MIT_X11,
                         "developers", developers,
                         NULL);
}

static void
pp_application_startup (GApplication *app)
{
  G_APPLICATION_CLASS (pp_application_parent_class)->startup (app);

  /* Not installed (run from the build tree): the icon is in the sources. */
  {
    GdkDisplay *display = gdk_display_get_default ();
    GtkIconTheme *theme = display ? gtk_icon_theme_get_for_display (display) : NULL;
    if (theme && !gtk_icon_theme_has_icon (theme, "io.github.pipescope.Pipescope")
        && g_file_test (PP_SOURCE_ICONS_DIR, G_FILE_TEST_IS_DIR))
      gtk_icon_theme_add_search_path (theme, PP_SOURCE_ICONS_DIR);
  }

  static const GActionEntry entries[] = {
    { "quit", quit_activated },
    { "about", about_activated },
    { "manual", manual_activated },
  };
  g_action_map_add_action_entries (G_ACTION_MAP (app), entries, G_N_ELEMENTS (entries), app);

  static const struct { const char *action; const char *accels[2]; } accels[] = {
    { "app.quit",               { "<Control>q", NULL } },
    { "app.manual",             { "F1", NULL } },
    { "win.run",                { "<Control>r", NULL } },
    { "win.open",               { "<Control>o", NULL } },
    { "win.stop",               { "<Control>period", NULL } },
    { "win.attach",             { "<Control>j", NULL } },
    { "win.screenshot",         { "<Control>s", NULL } },
    { "win.save-trace",         { "<Control><Shift>s", NULL } },
    { "win.show-help-overlay",  { "<Control>question", NULL } },
    { "win.zoom-fit",           { "<Control>0", NULL } },
    { "win.unfold-replicas",    { "<Control>u", NULL } },
    { "win.find",               { "<Control>f", NULL } },
  };
  for (guint i = 0; i < G_N_ELEMENTS (accels); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app), accels[i].action, accels[i].accels);
}

static void
pp_application_class_init (PpApplicationClass *klass)
{
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);
  app_class->command_line = pp_application_command_line;
  app_class->activate = pp_application_activate;
  app_class->startup = pp_application_startup;
}

static void
pp_application_init (PpApplication *self)
{
  g_application_add_main_option_entries (G_APPLICATION (self), options);
  g_application_set_option_context_summary (G_APPLICATION (self),
    "Without arguments, starts a 1F1B run (one rank per core, 2 to 4; 8 micro-batches) and shows it live.");
}

/* One pipescope a session: a second `pipescope FILE` hands its command
 * line to the running one (over D-Bus, before starting GTK) and exits.
 * A self-test drives a window of its own, and the tests start many at
 * once: each is its own process, but for the mode that checks the hand-over. */
gboolean
pp_application_args_unique (int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
    {
      if (strcmp (argv[i], "--self-test=second-instance") == 0
          || (strcmp (argv[i], "--self-test") == 0 && i + 1 < argc && strcmp (argv[i + 1], "second-instance") == 0))
        return TRUE;
      if (g_str_has_prefix (argv[i], "--self-test"))
        return FALSE;
    }
  return TRUE;
}

PpApplication *
pp_application_new (gboolean unique)
{
  return g_object_new (PP_TYPE_APPLICATION,
                       "application-id", "io.github.pipescope.Pipescope",
                       "flags", G_APPLICATION_HANDLES_COMMAND_LINE | (unique ? 0 : G_APPLICATION_NON_UNIQUE),
                       NULL);
}
