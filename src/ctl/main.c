/* main.c - nvsharectl: the command line, in the style of git and kubectl.
 *
 *     nvsharectl [global options] <command> [command options and arguments]
 *
 * Global options (--sock-dir, --timeout) may also follow the command. Each
 * command is one row of the commands table below: its name, its synopsis
 * and help text, and the function that runs it with its own arguments.
 *
 * Exit status: 0 done; 1 the scheduler could not be reached, did not answer
 * or refused a setting; 2 bad usage (the message and the synopsis go to
 * stderr). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "ctl.h"
#include "env.h"
#include "parse.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define HELP_SHOWN (-1) /* from argument checks: --help was printed, exit 0 */
#define WATCH_MIN_INTERVAL_NS                                                  \
    100000000ull /* each status briefly holds the daemon's loop */

struct command {
    const char *name;
    int (*run)(const struct command *cmd, int argc, char **argv);
    const char *synopsis; /* usage lines, each starting "nvsharectl" */
    const char *help;     /* what follows the synopsis in --help */
};

static struct ctl_target target;
static char dir_from[300];

static const char top_usage[] = "usage: nvsharectl [--sock-dir DIR] [--timeout "
                                "DURATION] <command> [<args>]\n"
                                "       nvsharectl --help | --version\n";

static const char top_help[] =
    "\n"
    "Operate the nvshare scheduler of this node.\n"
    "\n"
    "Commands:\n"
    "  status [--json]          GPUs (mode, memory, swaps, running clients, "
    "wait\n"
    "                           queue) and clients\n"
    "  watch [--interval 1s]    redraw the status every interval until Ctrl-C\n"
    "  top [--interval 1s]      live per-GPU view: holders, waiters, share "
    "over\n"
    "                           the last windows and memory against limits\n"
    "  set tq <duration>|auto   pin the time quantum (100ms, 2s) or let each\n"
    "                           GPU's hand-over cost choose it (the default)\n"
    "  set core-limit POD PCT   limit a pod to PCT % of each GPU's time\n"
    "  set memory-limit POD SZ  limit a pod's GPU memory on each GPU, e.g. "
    "4Gi\n"
    "  set priority POD CLASS   high, normal or low: a higher class preempts\n"
    "  set min-share POD PCT    a floor of each window under higher classes\n"
    "  set owner POD USER       on a plain host, the user the pod belongs to:\n"
    "                           only its processes get the pod's priority and "
    "floor\n"
    "  set mode MODE [--gpu G]  scheduling mode serial, concurrent or auto, "
    "of\n"
    "                           one GPU or (without --gpu) of every GPU\n"
    "  set switch-time D|auto   how long clients that swap keep a GPU before\n"
    "                           rotating: fixed, e.g. 45s, or auto (measured)\n"
    "  reset SETTING            forget a run-time tq, anti-thrash, mode or\n"
    "                           switch-time: the environment's value (else "
    "the\n"
    "                           default) applies again, now and after "
    "restarts\n"
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

static const struct command *find_command(const char *name);
static const struct command *all_commands(size_t *n);

/* The setting 'set' was given (argv[1]), once known: its usage errors show
 * that setting's synopsis line only, not all of them. */
static const char *set_subject;

/* ---- errors -------------------------------------------------------------- */

/* Writes cmd's synopsis lines, only set_subject's where one of them is. */
static void print_synopsis(const struct command *cmd)
{
    char prefix[64];
    bool found = false;

    if (set_subject) {
        snprintf(prefix, sizeof(prefix), "nvsharectl set %s ", set_subject);
        for (const char *line = cmd->synopsis; line; line = strchr(line, '\n')) {
            line += strspn(line, "\n ");
            size_t len = strcspn(line, "\n");
            if (!strncmp(line, prefix, strlen(prefix))) {
                fprintf(stderr, "%s%.*s\n",
                        found ? "       " : "usage: ", (int)len, line);
                found = true;
            }
        }
    }
    if (!found)
        fprintf(stderr, "usage: %s\n", cmd->synopsis);
}

static int usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "nvsharectl: <message>", the synopsis and where to read more. */
static int usage_error(const struct command *cmd, const char *fmt, ...)
{
    va_list ap;

    fputs("nvsharectl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (cmd) {
        print_synopsis(cmd);
        fprintf(stderr, "See 'nvsharectl %s --help'.\n", cmd->name);
    } else
        fprintf(stderr, "\n%sSee 'nvsharectl --help'.\n", top_usage);
    return EXIT_USAGE;
}

static int fail(const char *err)
{
    fprintf(stderr, "nvsharectl: %s\n", err);
    return EXIT_REFUSED;
}

static int show_help(const struct command *cmd)
{
    printf("usage: %s\n\n%s", cmd->synopsis, cmd->help);
    return 0;
}

static bool is_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

/* Matches "--name VALUE" and "--name=VALUE". Returns 1 and sets *value (and
 * advances *i past a separate value) on a match, 0 if arg is another option,
 * -1 if the value is missing. */
static int option_value(const char *name, int argc, char **argv, int *i,
                        const char **value)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];

    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *value = argv[++*i];
    return 1;
}

/* ---- status and watch ---------------------------------------------------- */

static int run_status(const struct command *cmd, int argc, char **argv)
{
    char err[CTL_ERR_LEN];
    struct ctl_status st;
    bool json = false;

    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return show_help(cmd);
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (argv[i][0] == '-')
            return usage_error(cmd, "unknown option '%s'", argv[i]);
        else
            return usage_error(cmd, "unexpected argument '%s'", argv[i]);
    }
    if (ctl_fetch_status(&target, &st, err))
        return fail(err);
    if (json)
        render_json(stdout, &st);
    else
        render_table(stdout, &st);
    ctl_status_free(&st);
    return 0;
}

static volatile sig_atomic_t stop_watching;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_watching = 1;
}

/* Sleeps ns unless a stop signal arrives first. */
static void sleep_unless_stopped(uint64_t ns)
{
    struct timespec left = {.tv_sec = (time_t)(ns / 1000000000ull),
                            .tv_nsec = (long)(ns % 1000000000ull)};

    while (!stop_watching && nanosleep(&left, &left) < 0 && errno == EINTR)
        ;
}

/* One frame of the live view, composed in memory and written at once so
 * the terminal never shows half a frame. */
static int watch_frame(FILE *frame, bool tty, uint64_t interval, bool first)
{
    char err[CTL_ERR_LEN], every[32], stamp[32];
    struct ctl_status st;
    time_t now = time(NULL);
    struct tm *local = localtime(&now);
    int rc;

    format_duration(interval, every, sizeof(every));
    if (!local || !strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", local))
        stamp[0] = '\0';
    rc = ctl_fetch_status(&target, &st, err);
    if (rc && first)
        return fail(err);
    if (tty)
        fputs("\033[H\033[2J", frame);
    else if (!first)
        fputc('\n', frame);
    fprintf(frame, "Every %s: nvsharectl status    %s\n\n", every, stamp);
    if (rc) {
        fprintf(frame, "nvsharectl: %s (retrying)\n", err);
        return 0;
    }
    render_table(frame, &st);
    ctl_status_free(&st);
    return 0;
}

/* --interval of watch and top: a duration of at least 100ms. 0, or the
 * usage error's exit code. */
static int parse_interval(const struct command *cmd, const char *text,
                          uint64_t *interval)
{
    char err[PARSE_ERR_LEN];

    if (parse_duration_ns(text, interval, err))
        return usage_error(cmd, "%s", err);
    if (*interval < WATCH_MIN_INTERVAL_NS)
        return usage_error(cmd, "interval '%s' is below the minimum of 100ms",
                           text);
    return 0;
}

static int run_watch(const struct command *cmd, int argc, char **argv)
{
    uint64_t interval = 1000000000ull;
    long count = 0; /* 0: until stopped */
    char err[PARSE_ERR_LEN];
    bool tty = isatty(STDOUT_FILENO);
    struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART */

    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int got;

        if (is_help(argv[i]))
            return show_help(cmd);
        if ((got = option_value("--interval", argc, argv, &i, &v)) == 0)
            got = option_value("--count", argc, argv, &i, &v) * 2;
        if (got < 0)
            return usage_error(cmd, "option '%s' needs a value", argv[i]);
        if (got == 1) {
            if ((got = parse_interval(cmd, v, &interval)))
                return got;
        } else if (got == 2) {
            if (parse_int_range(v, 1, LONG_MAX, &count, err))
                return usage_error(cmd, "invalid --count: %s", err);
        } else if (argv[i][0] == '-') {
            return usage_error(cmd, "unknown option '%s'", argv[i]);
        } else {
            return usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (long n = 0; !stop_watching && (count == 0 || n < count); n++) {
        char *text = NULL;
        size_t len = 0;
        FILE *frame = open_memstream(&text, &len);
        int rc;

        if (!frame)
            return fail("out of memory");
        rc = watch_frame(frame, tty, interval, n == 0);
        fclose(frame);
        if (rc) {
            free(text);
            return rc;
        }
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        free(text);
        if (count == 0 || n + 1 < count)
            sleep_unless_stopped(interval);
    }
    return 0;
}

/* ---- top ----------------------------------------------------------------- */

/* top draws on the terminal's alternate screen, reads keys one at a time
 * without echo, and puts everything back however it ends: q, Ctrl-C,
 * SIGTERM or an error. Ctrl-C stays a signal (ISIG is kept). */
static struct termios saved_termios;
static volatile sig_atomic_t resized;

static void on_resize(int sig)
{
    (void)sig;
    resized = 1;
}

static void terminal_size(int *width, int *height)
{
    struct winsize ws;

    *width = 80, *height = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row)
        *width = ws.ws_col, *height = ws.ws_row;
}

static int terminal_enter(void)
{
    struct termios raw;

    if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
        return -1;
    raw = saved_termios;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
        return -1;
    fputs("\033[?1049h\033[?25l", stdout); /* alternate screen, no cursor */
    fflush(stdout);
    return 0;
}

static void terminal_leave(void)
{
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
}

/* Draws one frame over the previous one, each line cleared to its end. */
static void top_frame(struct top_history *history)
{
    char *text = NULL;
    size_t len = 0;
    FILE *frame = open_memstream(&text, &len);
    struct ctl_status st;
    char fetch_err[CTL_ERR_LEN];
    int width, height;

    if (!frame)
        return;
    terminal_size(&width, &height);
    if (ctl_fetch_status(&target, &st, fetch_err))
        fprintf(frame, "nvsharectl: %s (retrying)\n", fetch_err);
    else {
        top_history_add(history, &st);
        render_top(frame, &st, history, width, height);
        ctl_status_free(&st);
    }
    fclose(frame);
    fputs("\033[H", stdout);
    for (char *line = text, *end; line && *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end)
            break;
        fwrite(line, 1, (size_t)(end - line), stdout);
        fputs(end[1] ? "\033[K\r\n" : "\033[K", stdout);
    }
    fputs("\033[J", stdout);
    fflush(stdout);
    free(text);
}

/* Waits up to ns for a key; returns true when it asks to quit. */
static bool top_wait_for_quit(uint64_t ns)
{
    struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
    uint64_t deadline = now_ns() + ns, now;
    char key;

    while (!stop_watching && !resized && (now = now_ns()) < deadline) {
        int ms = (int)((deadline - now + 999999) / 1000000);
        if (poll(&in, 1, ms) <= 0)
            continue;
        if (read(STDIN_FILENO, &key, 1) != 1)
            return true; /* the terminal went away */
        if (key == 'q' || key == 'Q')
            return true;
        if (key == ' ')
            return false; /* redraw now */
    }
    return stop_watching;
}

static int run_top(const struct command *cmd, int argc, char **argv)
{
    uint64_t interval = 1000000000ull;
    char err[CTL_ERR_LEN];
    struct sigaction stop = {.sa_handler = on_stop_signal}; /* no SA_RESTART */
    struct sigaction winch = {.sa_handler = on_resize};
    struct ctl_status st;
    struct top_history *history;

    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int got;

        if (is_help(argv[i]))
            return show_help(cmd);
        got = option_value("--interval", argc, argv, &i, &v);
        if (got < 0)
            return usage_error(cmd, "option '%s' needs a value", argv[i]);
        if (got == 1) {
            if ((got = parse_interval(cmd, v, &interval)))
                return got;
        } else if (argv[i][0] == '-') {
            return usage_error(cmd, "unknown option '%s'", argv[i]);
        } else {
            return usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return fail("top needs a terminal: use 'nvsharectl watch' or 'status' "
                    "in scripts");
    /* Reach the scheduler before taking the screen, so a mistake reads as
     * one line on the normal screen. */
    if (ctl_fetch_status(&target, &st, err))
        return fail(err);
    /* The first frame's shares are measured from this status on. */
    history = top_history_new();
    if (!history) {
        ctl_status_free(&st);
        return fail("out of memory");
    }
    top_history_add(history, &st);
    ctl_status_free(&st);
    sigemptyset(&stop.sa_mask);
    sigemptyset(&winch.sa_mask);
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    sigaction(SIGWINCH, &winch, NULL);
    if (terminal_enter() < 0) {
        top_history_free(history);
        return fail("cannot set up the terminal");
    }
    do {
        resized = 0;
        top_frame(history);
    } while (!top_wait_for_quit(interval));
    terminal_leave();
    top_history_free(history);
    return 0;
}

/* ---- settings ------------------------------------------------------------ */

/* Sends one setting and reports the scheduler's answer. */
static int apply(uint16_t key, uint64_t value, const char *subject)
{
    char err[CTL_ERR_LEN];
    struct msg_ctl_reply reply;

    if (ctl_set(&target, key, value, subject, &reply, err))
        return fail(err);
    if (reply.status != 0)
        return fail(reply.text);
    puts(reply.text);
    return 0;
}

/* Accepts "-h" anywhere and nothing else that looks like an option, and
 * insists on exactly want arguments after the command name. Returns 0,
 * HELP_SHOWN, or an exit status after a usage error. */
static int plain_args(const struct command *cmd, int argc, char **argv,
                      int want, const char *what)
{
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return show_help(cmd), HELP_SHOWN;
        if (argv[i][0] == '-' && argv[i][1] != '\0' && argv[i][1] != '.' &&
            (argv[i][1] < '0' || argv[i][1] > '9'))
            return usage_error(cmd, "unknown option '%s'", argv[i]);
    }
    if (argc - 1 < want)
        return usage_error(cmd, "%s", what);
    if (argc - 1 > want)
        return usage_error(cmd, "unexpected argument '%s'", argv[want + 1]);
    return 0;
}

static int set_anti_thrash(const struct command *cmd, const char *text)
{
    char err[PARSE_ERR_LEN];
    int on;

    if (parse_switch(text, &on, err))
        return usage_error(cmd, "anti-thrash: %s", err);
    return apply(CTL_SET_ANTI_THRASH, (uint64_t)on, "");
}

static int run_anti_thrash(const struct command *cmd, int argc, char **argv)
{
    int rc = plain_args(cmd, argc, argv, 1, "say on or off");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    return set_anti_thrash(cmd, argv[1]);
}

/* A per-pod percentage: "none" removes the operator's setting (a lower
 * limit the pod's processes declared still holds); otherwise 1-100. */
static int set_percent(const struct command *cmd, uint16_t key,
                       const char *what, const char *subject, const char *text)
{
    char err[PARSE_ERR_LEN];
    long pct = 0;

    if (strcmp(text, "none") && parse_int_range(text, 1, 100, &pct, err))
        return usage_error(cmd, "%s: %s (1-100, or none)", what, err);
    return apply(key, (uint64_t)pct, subject);
}

static int set_core_limit(const struct command *cmd, const char *subject,
                          const char *text)
{
    return set_percent(cmd, CTL_SET_CORE_LIMIT, "core limit", subject, text);
}

/* "none" removes a run-time quota; otherwise a size such as 4Gi. */
static int set_memory_limit(const struct command *cmd, const char *subject,
                            const char *text)
{
    char err[PARSE_ERR_LEN];
    uint64_t bytes = 0;

    if (strcmp(text, "none") && parse_size_bytes(text, &bytes, err))
        return usage_error(cmd, "memory limit: %s; or none", err);
    if (strcmp(text, "none") && bytes == 0)
        return usage_error(cmd, "memory limit: must be above 0 (or none)");
    return apply(CTL_SET_MEMORY_LIMIT, bytes, subject);
}

/* "none" removes the operator's priority (back to the annotation's, else
 * normal); otherwise high, normal, low or a class 1-9. */
static int set_priority(const struct command *cmd, const char *subject,
                        const char *text)
{
    char err[PARSE_ERR_LEN];
    unsigned priority = PRIORITY_UNSET;

    if (strcmp(text, "none") && parse_priority(text, &priority, err))
        return usage_error(cmd, "%s (or none)", err);
    return apply(CTL_SET_PRIORITY, priority, subject);
}

static int set_min_share(const struct command *cmd, const char *subject,
                         const char *text)
{
    return set_percent(cmd, CTL_SET_MIN_SHARE, "min share", subject, text);
}

/* A user name or uid; "none" removes the owner (0 on the wire). Root is no
 * owner to name: its processes may join any pod already. */
static int set_owner(const struct command *cmd, const char *subject,
                     const char *text)
{
    char err[PARSE_ERR_LEN];
    long uid = 0;

    if (!strcmp(text, "none"))
        return apply(CTL_SET_OWNER, 0, subject);
    if (strspn(text, "0123456789") == strlen(text)) {
        if (parse_int_range(text, 0, UINT32_MAX - 1, &uid, err))
            return usage_error(cmd, "owner: %s (a user name, a uid or none)",
                               err);
    } else {
        struct passwd *pw = getpwnam(text);
        if (!pw)
            return usage_error(cmd, "owner: no user '%s' on this host", text);
        uid = (long)pw->pw_uid;
    }
    if (uid == 0)
        return usage_error(cmd,
                           "owner: root's processes may join any pod; name "
                           "the user that runs it");
    return apply(CTL_SET_OWNER, (uint64_t)uid, subject);
}

/* set mode MODE [--gpu INDEX|UUID]: argv[0] is "set"; --gpu was taken out
 * already (gpu is NULL without it). */
static int set_mode(const struct command *cmd, int argc, char **argv,
                    const char *gpu)
{
    int rc = plain_args(cmd, argc, argv, 2,
                        "set mode needs a mode: serial, concurrent or auto");
    uint8_t mode;

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    if (ctl_parse_mode(argv[2], &mode))
        return usage_error(cmd, "unknown mode '%s' (serial, concurrent or auto)",
                           argv[2]);
    return apply(CTL_SET_MODE, mode, gpu ? gpu : "");
}

/* set switch-time <duration>|auto: auto (0 on the wire) derives it from the
 * measured swap times. */
static int set_switch_time(const struct command *cmd, const char *text)
{
    char err[PARSE_ERR_LEN];
    uint64_t ns = 0;

    if (strcmp(text, "auto") && parse_duration_ns(text, &ns, err))
        return usage_error(cmd, "switch time: %s (e.g. 45s, 2m, or auto)", err);
    return apply(CTL_SET_SWITCH_TIME, ns, "");
}

static int run_set(const struct command *cmd, int argc, char **argv)
{
    char err[PARSE_ERR_LEN];
    uint64_t ns;
    const char *gpu = NULL;
    int kept = 1;

    /* --gpu may come anywhere after "set"; it belongs to "set mode". */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int got = option_value("--gpu", argc, argv, &i, &v);

        if (got < 0)
            return usage_error(cmd, "option '--gpu' needs a GPU index or UUID");
        if (got == 0) {
            argv[kept++] = argv[i];
            continue;
        }
        if (!*v)
            return usage_error(cmd, "option '--gpu' needs a GPU index or UUID");
        gpu = v;
    }
    argc = kept;
    if (argc > 1)
        set_subject = argv[1];

    bool mode = argc > 1 && !strcmp(argv[1], "mode");
    bool core = argc > 1 && !strcmp(argv[1], "core-limit");
    bool memory = argc > 1 && !strcmp(argv[1], "memory-limit");
    bool priority = argc > 1 && !strcmp(argv[1], "priority");
    bool min_share = argc > 1 && !strcmp(argv[1], "min-share");
    bool owner = argc > 1 && !strcmp(argv[1], "owner");
    bool per_pod = core || memory || priority || min_share || owner;

    if (gpu && !mode) {
        for (int i = 1; i < argc; i++)
            if (is_help(argv[i]))
                return show_help(cmd);
        return usage_error(cmd, "option '--gpu' applies to 'set mode' only");
    }
    if (mode)
        return set_mode(cmd, argc, argv, gpu);

    int rc =
        plain_args(cmd, argc, argv, per_pod ? 3 : 2,
                   per_pod
                       ? "a pod setting needs a pod (or client id) and a value"
                       : "which setting, and to what?");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    if (core)
        return set_core_limit(cmd, argv[2], argv[3]);
    if (memory)
        return set_memory_limit(cmd, argv[2], argv[3]);
    if (priority)
        return set_priority(cmd, argv[2], argv[3]);
    if (min_share)
        return set_min_share(cmd, argv[2], argv[3]);
    if (owner)
        return set_owner(cmd, argv[2], argv[3]);
    if (!strcmp(argv[1], "tq")) {
        /* 0 asks for auto, which no duration can mean: parse_duration_ns
         * refuses 0. */
        if (strcmp(argv[2], "auto") && parse_duration_ns(argv[2], &ns, err))
            return usage_error(cmd, "%s", err);
        return apply(CTL_SET_TQ, strcmp(argv[2], "auto") ? ns : 0, "");
    }
    if (!strcmp(argv[1], "switch-time"))
        return set_switch_time(cmd, argv[2]);
    if (!strcmp(argv[1], "anti-thrash"))
        return set_anti_thrash(cmd, argv[2]);
    return usage_error(cmd,
                       "unknown setting '%s' (tq, anti-thrash, core-limit, "
                       "memory-limit, priority, min-share, owner, mode or "
                       "switch-time)",
                       argv[1]);
}

static int run_reset(const struct command *cmd, int argc, char **argv)
{
    int rc = plain_args(cmd, argc, argv, 1,
                        "which setting? tq, anti-thrash, mode or switch-time");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    return apply(CTL_RESET, 0, argv[1]);
}

/* ---- completion ---------------------------------------------------------- */

/* Shell completion, made from the commands table: each command's name, the
 * literal words its synopsis lines allow first (set's settings, reset's,
 * top's none) and the options they name. A new command or setting is
 * completed as soon as its synopsis says so. */

/* Appends word to the space-separated list unless it is there already. */
static void add_word(char *list, size_t len, const char *word, size_t n)
{
    size_t used = strlen(list);

    for (const char *p = list; *p; p += strcspn(p, " "), p += *p == ' ')
        if (strcspn(p, " ") == n && !strncmp(p, word, n))
            return;
    if (n && used + n + 2 < len)
        snprintf(list + used, len - used, "%s%.*s", used ? " " : "", (int)n,
                 word);
}

/* The words a synopsis allows right after the command: literals among the
 * alternatives of its first argument ("tq|anti-thrash", "<duration>|auto"),
 * command names for "<command>"; and every --option in it. */
static void synopsis_words(const struct command *cmd, char *first,
                           char *options, size_t len)
{
    size_t n_commands;
    const struct command *list = all_commands(&n_commands);

    first[0] = options[0] = '\0';
    for (const char *line = cmd->synopsis; *line;) {
        line += strspn(line, "\n ");
        size_t line_len = strcspn(line, "\n");
        int token = 0;
        for (const char *t = line; t < line + line_len; token++) {
            size_t n = strcspn(t, " \n");
            for (const char *o = t; (o = strstr(o, "--")) && o < t + n; o += 2)
                add_word(options, len, o,
                         strspn(o, "-abcdefghijklmnopqrstuvwxyz"));
            if (token == 2 && n >= 9 && !strncmp(t, "[<command>", 10))
                for (size_t c = 0; c < n_commands; c++)
                    add_word(first, len, list[c].name, strlen(list[c].name));
            else if (token == 2 && *t != '[' && *t != '-')
                for (const char *a = t; a < t + n;
                     a += strcspn(a, "| \n"), a += *a == '|')
                    if (*a != '<')
                        add_word(first, len, a, strcspn(a, "| \n"));
            t += n;
            t += strspn(t, " ");
        }
        line += line_len;
    }
    add_word(options, len, "--help", 6);
}

static void print_bash_completion(void)
{
    char first[512], options[256], names[512] = "";
    size_t n;
    const struct command *list = all_commands(&n);

    for (size_t i = 0; i < n; i++)
        add_word(names, sizeof(names), list[i].name, strlen(list[i].name));
    printf(
        "# nvsharectl completion, made by 'nvsharectl completion' from its "
        "commands.\n"
        "_nvsharectl() {\n"
        "    local cur=${COMP_WORDS[COMP_CWORD]} "
        "prev=${COMP_WORDS[COMP_CWORD-1]}\n"
        "    local cmd= at=0 i words\n"
        "    case $prev in\n"
        "        --sock-dir) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
        "        --timeout|--interval|--count|--gpu) COMPREPLY=(); return ;;\n"
        "    esac\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --sock-dir|--timeout) ((i++)) ;;\n"
        "            -*) ;;\n"
        "            *) cmd=${COMP_WORDS[i]}; at=$i; break ;;\n"
        "        esac\n"
        "    done\n"
        "    case $cmd in\n"
        "        '') words='%s --sock-dir --timeout --help --version' ;;\n",
        names);
    for (size_t i = 0; i < n; i++) {
        synopsis_words(&list[i], first, options, sizeof(first));
        printf("        %s) if ((COMP_CWORD == at + 1)); then words='%s%s%s'; "
               "else words='%s'; fi ;;\n",
               list[i].name, first, *first ? " " : "", options, options);
    }
    printf("    esac\n"
           "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
           "}\n"
           "complete -F _nvsharectl nvsharectl\n");
}

static int run_completion(const struct command *cmd, int argc, char **argv)
{
    int rc = plain_args(cmd, argc, argv, 1, "which shell? bash or zsh");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    if (!strcmp(argv[1], "zsh"))
        printf("# zsh: the bash completion, through zsh's bashcompinit.\n"
               "autoload -U +X bashcompinit && bashcompinit\n");
    else if (strcmp(argv[1], "bash"))
        return usage_error(cmd, "no completion for '%s': bash or zsh", argv[1]);
    print_bash_completion();
    return 0;
}

/* ---- help ---------------------------------------------------------------- */

static int run_help(const struct command *cmd, int argc, char **argv)
{
    const struct command *about;

    if (argc < 2) {
        printf("%s%s", top_usage, top_help);
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

static const struct command commands[] = {
    {"status", run_status, "nvsharectl status [--json]",
     "Shows the scheduler's settings; each GPU: its scheduling mode, memory\n"
     "(capacity, reserve, running footprint, resident), switch time, lock\n"
     "hand-overs, swaps, the clients running on it and the wait queue in\n"
     "order with why each waits (lock, memory, throttled); and each client on\n"
     "each GPU: state, measured load, time held, current wait, grants, last\n"
     "drain time, compute limit and use, memory footprint, oversubscription.\n"
     "\n"
     "  --json     print one JSON document instead of tables (times in ns,\n"
     "             sizes in bytes; schema in docs/nvsharectl.md)\n"},
    {"watch", run_watch, "nvsharectl watch [--interval DURATION] [--count N]",
     "Redraws the status every interval until Ctrl-C. The screen is cleared\n"
     "between frames only when the output is a terminal. If the scheduler "
     "goes\n"
     "away after the first frame, the view says so and keeps retrying.\n"
     "\n"
     "  --interval DURATION  time between frames (default 1s, at least 100ms)\n"
     "  --count N            stop after N frames\n"},
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
     "100ms)\n"},
    {"set", run_set,
     "nvsharectl set tq <duration>|auto\n       nvsharectl set anti-thrash "
     "on|off\n"
     "       nvsharectl set core-limit <pod|namespace/pod|client-id> "
     "<1-100|none>\n"
     "       nvsharectl set memory-limit <pod|namespace/pod|client-id> "
     "<size|none>\n"
     "       nvsharectl set priority <pod|namespace/pod|client-id> "
     "<high|normal|low|1-9|none>\n"
     "       nvsharectl set min-share <pod|namespace/pod|client-id> "
     "<1-100|none>\n"
     "       nvsharectl set owner <pod|namespace/pod> <user|uid|none>\n"
     "       nvsharectl set mode serial|concurrent|auto [--gpu INDEX|UUID]\n"
     "       nvsharectl set switch-time <duration>|auto",
     "Changes a setting of the running scheduler and prints its answer.\n"
     "\n"
     "  tq <duration>|auto   the time quantum a holder keeps a GPU while "
     "others\n"
     "                       wait. auto (the default): per GPU, 100 x the "
     "mean\n"
     "                       cost of its recent hand-overs, within 100ms-30s; "
     "a\n"
     "                       duration (100ms, 2s; 1ms to 1h) pins it. Applies\n"
     "                       to the current holders at once\n"
     "  anti-thrash on|off   same as 'nvsharectl anti-thrash on|off'\n"
     "  core-limit POD PCT   the share of each GPU's time the pod may use per\n"
     "                       accounting window; applies at once and keeps the\n"
     "                       time already used; 'none' removes the run-time\n"
     "                       limit (back to NVSHARE_GPU_CORE_LIMIT, if "
     "declared)\n"
     "  memory-limit POD SIZE the pod's GPU memory quota on each GPU (4Gi, "
     "512Mi,\n"
     "                       plain bytes): raising applies to the next "
     "allocation,\n"
     "                       lowering refuses new ones until usage falls under "
     "it\n"
     "                       (nothing is revoked); 'none' falls back to\n"
     "                       NVSHARE_GPU_MEMORY_LIMIT, if declared\n"
     "  priority POD CLASS   high, normal (default) or low, or a class 1-9 "
     "(low 1,\n"
     "                       normal 2, high 3): a pod of a higher class that\n"
     "                       wants a GPU preempts lower ones at once, and "
     "lower\n"
     "                       classes run only while no higher one wants it;\n"
     "                       also before the pod connects; 'none' falls back "
     "to\n"
     "                       the nvshare.com/priority annotation, else "
     "normal;\n"
     "                       NVSHARE_PRIORITY in a process can only lower it\n"
     "  min-share POD PCT    a floor: the pod gets PCT % of each accounting\n"
     "                       window even while higher classes want the GPU\n"
     "                       (its core limit still caps it); 'none' removes "
     "it\n"
     "  owner POD USER       on a plain host, the user (name or uid) the pod\n"
     "                       belongs to: only its processes (and root's) join\n"
     "                       it; others are billed on their own. Without an\n"
     "                       owner, a pod with settings binds no one: each\n"
     "                       user's processes of it are held to its limits\n"
     "                       apart, and only root's get a priority above "
     "normal\n"
     "                       or the floor. Kept across restarts; 'none' "
     "removes it\n"
     "  mode MODE            how clients share a GPU: serial (one at a time),\n"
     "                       concurrent (all whose memory fits run at once) "
     "or\n"
     "                       auto (light clients that fit run together, heavy\n"
     "                       ones take turns); every GPU unless --gpu names "
     "one\n"
     "    --gpu INDEX|UUID   the scheduler's GPU index (as in status) or UUID\n"
     "  switch-time D|auto   how long a client keeps a GPU before it rotates "
     "out\n"
     "                       for one that waits for memory (swapping costs\n"
     "                       seconds): a fixed duration (100ms to 1h) or "
     "auto,\n"
     "                       the measured swap time times the multiplier\n"
     "\n"
     "Exit status 1 if the scheduler refuses the value.\n"},
    {"reset", run_reset, "nvsharectl reset tq|anti-thrash|mode|switch-time",
     "Forgets what 'nvsharectl set' made of a node setting. A value set at "
     "run\n"
     "time is kept in the state file and wins over the environment at every\n"
     "start (state file > environment > default): reset sets the value the\n"
     "environment gave the scheduler (NVSHARE_TQ, ...), else the default, and\n"
     "takes it out of the state file. 'mode' resets every GPU's mode.\n"
     "A pod's settings are reset with 'nvsharectl set ... POD none'.\n"},
    {"anti-thrash", run_anti_thrash, "nvsharectl anti-thrash on|off",
     "on:  clients take turns on each GPU, one time quantum at a time.\n"
     "off: every client runs freely, as if nvshare were not there.\n"},
    {"completion", run_completion, "nvsharectl completion bash|zsh",
     "Prints shell completion for nvsharectl, made from its commands and\n"
     "settings: 'source <(nvsharectl completion bash)' in ~/.bashrc, or\n"
     "'source <(nvsharectl completion zsh)' in ~/.zshrc.\n"},
    {"help", run_help, "nvsharectl help [<command>]",
     "Shows the help of a command, or the overview.\n"},
};

static const struct command *all_commands(size_t *n)
{
    *n = sizeof(commands) / sizeof(commands[0]);
    return commands;
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
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
        printf("%s%s", top_usage, top_help);
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
