/* top.c - nvsharectl top: the live per-GPU view on the terminal's
 * alternate screen (render_top.c draws each frame). */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"

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

int run_top(const struct command *cmd, int argc, char **argv)
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
