/* commands.h - what nvsharectl's command files share: a row of the commands
 * table (main.c), the scheduler they talk to, and the usage-error helpers
 * (usage.c). The layers: usage.c at the bottom, the commands (status.c,
 * top.c, set.c, completion.c) above it, main.c with the table on top.
 *
 * Exit status: 0 done; 1 the scheduler could not be reached, did not answer
 * or refused a setting; 2 bad usage (the message and the synopsis go to
 * stderr). */
#ifndef NVSHARE_CTL_COMMANDS_H
#define NVSHARE_CTL_COMMANDS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define HELP_SHOWN (-1) /* from argument checks: --help was printed, exit 0 */

/* A row of the commands table, constant data. A text made from the
 * settings table (set's, reset's) is the function that makes it, in place
 * of the string; command_synopsis and command_help read either. */
struct command {
    const char *name;
    int (*run)(const struct command *cmd, int argc, char **argv);
    const char *synopsis; /* usage lines, each starting "nvsharectl" */
    const char *help;     /* what follows the synopsis in --help */
    const char *(*make_synopsis)(void); /* where synopsis is NULL */
    const char *(*make_help)(void);     /* where help is NULL */
};

extern struct ctl_target target; /* the scheduler's control socket */

/* The setting 'set' was given, once known: its usage errors show that
 * setting's synopsis line only, not all of them. */
extern const char *set_subject;

/* usage.c: the overview's usage lines. */
extern const char top_usage[];

/* Prints "nvsharectl: <message>", the synopsis and where to read more;
 * returns EXIT_USAGE. cmd NULL: the overview's usage. */
int usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int fail(const char *err); /* "nvsharectl: err"; EXIT_REFUSED */
const char *command_synopsis(const struct command *cmd);
const char *command_help(const struct command *cmd);
int show_help(const struct command *cmd);
bool is_help(const char *arg);

/* Matches "--name VALUE" and "--name=VALUE". Returns 1 and sets *value (and
 * advances *i past a separate value) on a match, 0 if arg is another option,
 * -1 if the value is missing. */
int option_value(const char *name, int argc, char **argv, int *i,
                 const char **value);

/* Accepts "-h" anywhere and nothing else that looks like an option, and
 * insists on exactly want arguments after the command name. Returns 0,
 * HELP_SHOWN, or an exit status after a usage error. */
int plain_args(const struct command *cmd, int argc, char **argv, int want,
               const char *what);

/* --interval of watch and top: a duration of at least 100ms. 0, or the
 * usage error's exit code. */
int parse_interval(const struct command *cmd, const char *text,
                   uint64_t *interval);

/* Set by SIGINT and SIGTERM while watch or top runs. */
extern volatile sig_atomic_t stop_watching;
void on_stop_signal(int sig);

/* The commands, each in its file. */
int run_status(const struct command *cmd, int argc, char **argv); /* status.c */
int run_watch(const struct command *cmd, int argc, char **argv);  /* status.c */
int run_top(const struct command *cmd, int argc, char **argv);    /* top.c */
int run_set(const struct command *cmd, int argc, char **argv);    /* set.c */
int run_reset(const struct command *cmd, int argc, char **argv);  /* set.c */
int run_anti_thrash(const struct command *cmd, int argc, char **argv); /* set.c */
/* group.c: set group NAME --gpu G --pods ... (gpu: --gpu's value, taken
 * out of argv by set); 0 with the scheduler's reply, or an exit status. */
int set_group(const struct command *cmd, int argc, char **argv, const char *gpu,
              struct msg_ctl_reply *reply);
extern const char group_set_synopsis[], group_reset_synopsis[], group_help[];
/* completion.c: completion's command, given the commands table. */
int completion_print(const struct command *cmd, int argc, char **argv,
                     const struct command *list, size_t n);

/* set.c: set's and reset's synopsis and help, made from the settings table
 * (settings.def) at the first call (the table's make_synopsis, make_help),
 * and the overview's lines for them. */
const char *set_synopsis(void);
const char *set_help(void);
const char *reset_synopsis(void);
void set_overview(FILE *out);

#endif
