/* cli-commands.h — the subcommands of pipescope-cli, called by main
 * (pipescope-cli.c) only.  Each returns the process exit status: 0 success,
 * 1 failure, 2 usage error. */
#pragma once

int pp_cli_schedule (int argc, char **argv);   /* cli-schedule.c */
int pp_cli_run (int argc, char **argv);        /* cli-run.c */
int pp_cli_jobs (int argc, char **argv);       /* cli-live.c */
int pp_cli_record (int argc, char **argv);     /* cli-live.c */
int pp_cli_info (int argc, char **argv);       /* cli-trace-info.c */
int pp_cli_export (int argc, char **argv);     /* cli-trace-export.c */
int pp_cli_render (int argc, char **argv);     /* cli-render.c */
int pp_cli_suggest (int argc, char **argv);    /* cli-suggest.c */
int pp_cli_merge (int argc, char **argv);      /* cli-merge.c */
int pp_cli_profile (int argc, char **argv);    /* cli-profile.c */
int pp_cli_import (int argc, char **argv);     /* cli-import.c */
