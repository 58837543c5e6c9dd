/* main.c - nvsharectl: the command line, in the style of git and kubectl.
 *
 *     nvsharectl [global options] <command> [command options and arguments]
 *
 * This file reads the global options (--sock-dir, --timeout, which may also
 * follow the command), dispatches to the command and holds the commands
 * table, the overview and the usage errors. Each command is one row of the
 * table, constant data: its name, its synopsis and help text (set's and
 * reset's made by set.c from the settings table), and the function, in its
 * own file (commands.h), that runs it with its own arguments. Exit status:
 * commands.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "env.h"
#include "parse.h"

static char dir_from[300];

static const char overview_head[] =
    "\n"
    "Operate the nvshare scheduler of this node.\n"
    "\n"
    "Commands:\n"
    "  status [--json|--settings]\n"
    "                           GPUs (mode, memory, swaps, running clients, "
    "wait\n"
    "                           queue) and clients; or every setting, its "
    "value\n"
    "                           and where that comes from\n"
    "  watch [--interval 1s]    redraw the status every interval until Ctrl-C\n"
    "  top [--interval 1s]      live per-GPU view: holders, waiters, share "
    "over\n"
    "                           the last windows and memory against limits\n";

static const char overview_tail[] =
    "  anti-thrash on|off       clients take turns on each GPU (on) or run\n"
    "                           freely (off)\n"
    "  completion bash|zsh      shell completion, for source <(...)\n"
    "  help [<command>]         show the help of a command\n"
    "\n"
    "Global options:\n"
    "  --sock-dir DIR           the scheduler's socket directory (default\n"
    "                           $NVSHARE_SOCK_DIR, else " DEFAULT_SOCK_DIR ")\n"
    "  --timeout DURATION       wait at most this long for each reply (default "
    "5s)\n"
    "  -h, --help               show this help\n"
    "  --version                show the version\n"
    "\n"
    "The control socket serves root and the scheduler's own user only.\n"
    "Exit status: 0 success, 1 scheduler unreachable or setting refused,\n"
    "2 bad usage. Run 'nvsharectl <command> --help' for a command's options.\n";

/* The overview: --help, help. The settings' lines are set.c's. */
static void print_overview(void)
{
    printf("%s%s", top_usage, overview_head);
    set_overview(stdout);
    fputs(overview_tail, stdout);
}

static const struct command *find_command(const char *name);

/* ---- help ---------------------------------------------------------------- */

static int run_help(const struct command *cmd, int argc, char **argv)
{
    const struct command *about;

    if (argc < 2) {
        print_overview();
        return 0;
    }
    if (is_help(argv[1]))
        return show_help(cmd);
    if (argc > 2)
        return usage_error(cmd, "unexpected argument '%s'", argv[2]);
    about = find_command(argv[1]);
    if (!about)
        return usage_error(cmd, "unknown command '%s'", argv[1]);
    return show_help(about);
}

static int run_completion(const struct command *cmd, int argc, char **argv);

static const struct command commands[] = {
    {"status", run_status, "nvsharectl status [--json|--settings]",
     "Shows the scheduler's settings; each GPU: its scheduling mode, memory\n"
     "(capacity, reserve, running footprint, resident), switch time, lock\n"
     "hand-overs, swaps, the clients running on it and the wait queue in\n"
     "order with why each waits (lock, memory, throttled); and each client on\n"
     "each GPU: state, measured load, time held, current wait, grants, last\n"
     "drain time, compute limit and use, memory footprint, oversubscription.\n"
     "\n"
     "  --json     print one JSON document instead of tables (times in ns,\n"
     "             sizes in bytes; schema in docs/nvsharectl.md), every\n"
     "             setting included\n"
     "  --settings print every setting of the scheduler instead: its value\n"
     "             and where it comes from (default, environment, state-file\n"
     "             or runtime: set with nvsharectl since the scheduler "
     "started)\n",
     NULL, NULL},
    {"watch", run_watch, "nvsharectl watch [--interval DURATION] [--count N]",
     "Redraws the status every interval until Ctrl-C. The screen is cleared\n"
     "between frames only when the output is a terminal. If the scheduler "
     "goes\n"
     "away after the first frame, the view says so and keeps retrying.\n"
     "\n"
     "  --interval DURATION  time between frames (default 1s, at least 100ms)\n"
     "  --count N            stop after N frames\n",
     NULL, NULL},
    {"top", run_top, "nvsharectl top [--interval DURATION]",
     "A live view of each GPU, like top: who holds it, who waits and on what\n"
     "(lock, memory, throttled), each client's share of the GPU over the last\n"
     "three accounting windows against its pod's core limit ('|' marks the\n"
     "limit) and its pod's memory against its quota. Fits the terminal's "
     "width\n"
     "(narrower ones drop PID, the bars, PRIO). Redraws every interval and at\n"
     "once on a resize; q quits (Ctrl-C too), space redraws. Needs a "
     "terminal;\n"
     "the terminal is restored on exit.\n"
     "\n"
     "  --interval DURATION  time between frames (default 1s, at least "
     "100ms)\n",
     NULL, NULL},
    /* set's synopsis and help, reset's synopsis: set.c, from the settings */
    {"set", run_set, NULL, NULL, set_synopsis, set_help},
    {"reset", run_reset, NULL,
     "Forgets what 'nvsharectl set' made of a node setting. A value set at "
     "run\n"
     "time is kept in the state file and wins over the environment at every\n"
     "start (state file > environment > default): reset sets the value the\n"
     "environment gave the scheduler (NVSHARE_TQ, ...), else the default, and\n"
     "takes it out of the state file. 'mode' resets every GPU's mode.\n"
     "A pod's settings are reset with 'nvsharectl set ... POD none'.\n",
     reset_synopsis, NULL},
    {"anti-thrash", run_anti_thrash, "nvsharectl anti-thrash on|off",
     "on:  clients take turns on each GPU, one time quantum at a time.\n"
     "off: every client runs freely, as if nvshare were not there.\n",
     NULL, NULL},
    {"completion", run_completion, "nvsharectl completion bash|zsh",
     "Prints shell completion for nvsharectl, made from its commands and\n"
     "settings: 'source <(nvsharectl completion bash)' in ~/.bashrc, or\n"
     "'source <(nvsharectl completion zsh)' in ~/.zshrc.\n",
     NULL, NULL},
    {"help", run_help, "nvsharectl help [<command>]",
     "Shows the help of a command, or the overview.\n", NULL, NULL},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static int run_completion(const struct command *cmd, int argc, char **argv)
{
    return completion_print(cmd, argc, argv, commands,
                            sizeof(commands) / sizeof(commands[0]));
}

/* ---- main ---------------------------------------------------------------- */

/* Takes the global options out of argv (wherever they are) and sets up
 * target. Leaves the command and its arguments in argv[0..*argc). Returns
 * 0, or an exit status. */
static int global_options(int *argc, char **argv)
{
    const char *sock_dir = NULL, *timeout = NULL;
    char err[PARSE_ERR_LEN];
    uint64_t timeout_ns = CTL_DEFAULT_TIMEOUT_MS * 1000000ull;
    int kept = 0;
    bool dashdash = false;

    for (int i = 0; i < *argc; i++) {
        int got = 0;
        const char *v = NULL;

        if (!dashdash && !strcmp(argv[i], "--")) {
            dashdash = true;
            continue;
        }
        if (!dashdash &&
            (got = option_value("--sock-dir", *argc, argv, &i, &v)) > 0)
            sock_dir = v;
        else if (!dashdash && got == 0 &&
                 (got = option_value("--timeout", *argc, argv, &i, &v)) > 0)
            timeout = v;
        if (got < 0)
            return usage_error(NULL, "option '%s' needs a value", argv[i]);
        if (got == 0)
            argv[kept++] = argv[i];
    }
    *argc = kept;
    if (timeout) {
        if (parse_duration_ns(timeout, &timeout_ns, err))
            return usage_error(NULL, "--timeout: %s", err);
        if (timeout_ns < 1000000ull || timeout_ns > 3600 * 1000000000ull)
            return usage_error(NULL, "--timeout must be between 1ms and 1h");
    }
    target.timeout_ms = (int)(timeout_ns / 1000000ull);
    if (sock_dir) {
        if (!*sock_dir)
            return usage_error(NULL, "--sock-dir needs a directory");
        setenv("NVSHARE_SOCK_DIR", sock_dir, 1);
        snprintf(dir_from, sizeof(dir_from), "--sock-dir %s", sock_dir);
    } else if (getenv("NVSHARE_SOCK_DIR") && *getenv("NVSHARE_SOCK_DIR")) {
        snprintf(dir_from, sizeof(dir_from), "NVSHARE_SOCK_DIR=%s",
                 env_sock_dir());
    } else {
        snprintf(dir_from, sizeof(dir_from),
                 "NVSHARE_SOCK_DIR is unset: default %s", env_sock_dir());
    }
    target.dir_from = dir_from;
    if (socket_path(CONTROL_SOCKET_NAME, target.path, sizeof(target.path)))
        return usage_error(NULL, "socket path too long: %s/%s", env_sock_dir(),
                           CONTROL_SOCKET_NAME);
    return 0;
}

int main(int argc, char **argv)
{
    const struct command *cmd;
    int rc;

    argc--, argv++; /* drop the program name */
    if ((rc = global_options(&argc, argv)))
        return rc;
    if (argc == 0)
        return usage_error(NULL, "no command given");
    if (is_help(argv[0])) {
        print_overview();
        return 0;
    }
    if (!strcmp(argv[0], "--version")) {
        printf("nvsharectl %s (protocol %d)\n", nvshare_version, PROTO_VERSION);
        return 0;
    }
    if (argv[0][0] == '-')
        return usage_error(NULL, "unknown option '%s'", argv[0]);
    cmd = find_command(argv[0]);
    if (!cmd)
        return usage_error(NULL, "unknown command '%s'", argv[0]);
    rc = cmd->run(cmd, argc, argv);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "nvsharectl: cannot write the output: %s\n",
                strerror(errno));
        return EXIT_REFUSED;
    }
    return rc;
}
