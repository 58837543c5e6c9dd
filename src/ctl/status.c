/* status.c - nvsharectl status and watch: the scheduler's state, once or
 * redrawn every interval. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "parse.h"

#define WATCH_MIN_INTERVAL_NS                                                  \
    100000000ull /* each status briefly holds the daemon's loop */

int run_status(const struct command *cmd, int argc, char **argv)
{
    char err[CTL_ERR_LEN];
    struct ctl_status st;
    bool json = false, settings = false;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return show_help(cmd);
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--settings"))
            settings = true;
        else if (argv[i][0] == '-')
            return usage_error(cmd, "unknown option '%s'", argv[i]);
        else
            return usage_error(cmd, "unexpected argument '%s'", argv[i]);
    }
    /* The plain view asks for no settings, so it still reads a scheduler
     * older than them. */
    if (json || settings)
        rc = ctl_fetch_status_settings(&target, &st, err);
    else
        rc = ctl_fetch_status(&target, &st, err);
    if (rc)
        return fail(err);
    if (json)
        render_json(stdout, &st);
    else if (settings)
        render_settings(stdout, &st);
    else
        render_table(stdout, &st);
    ctl_status_free(&st);
    return 0;
}

volatile sig_atomic_t stop_watching;

void on_stop_signal(int sig)
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
int parse_interval(const struct command *cmd, const char *text, uint64_t *interval)
{
    char err[PARSE_ERR_LEN];

    if (parse_duration_ns(text, interval, err))
        return usage_error(cmd, "%s", err);
    if (*interval < WATCH_MIN_INTERVAL_NS)
        return usage_error(cmd, "interval '%s' is below the minimum of 100ms",
                           text);
    return 0;
}

int run_watch(const struct command *cmd, int argc, char **argv)
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
