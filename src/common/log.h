/* log.h - one-line diagnostics for every nvshare component.
 *
 * Every line starts with its UTC time (RFC 3339, milliseconds) and carries
 * the component, the pid and the level:
 *
 *     2026-11-23T17:10:26.123Z nvshare[scheduler 4242] warning: <message>
 *
 * so that lines from the interposer, which share stderr with the host
 * application, are unmistakable and an incident can be reconstructed. With
 * NVSHARE_LOG_FORMAT=json (or the scheduler's --log-format json) each line
 * is instead one JSON object {"time", "level", "component", "pid", "msg"}
 * for log collectors.
 *
 * A warning identical to one printed less than LOG_REPEAT_WINDOW_S ago is
 * counted instead of printed; once the window is over (or at exit) one line
 * "<message> (repeated N times in S s)" reports the count, so a flood costs
 * at most two lines per window.
 *
 * Logging never allocates and never fails loudly: a diagnostic must not be
 * able to hurt the process that emits it. */
#ifndef NVSHARE_LOG_H
#define NVSHARE_LOG_H

#include <stdbool.h>

#define LOG_REPEAT_WINDOW_S 10

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the component name and reads NVSHARE_DEBUG (1 enables debug lines)
 * and NVSHARE_LOG_FORMAT (text or json). */
void log_init(const char *component);
/* "text" or "json"; returns -1 (and changes nothing) for anything else. */
int log_set_format(const char *name);
bool log_debug_enabled(void);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the counts of repeated warnings whose window is over; the
 * scheduler calls it from its loop so that a flood that stops is still
 * reported. At exit, every pending count is reported. */
void log_flush_repeats(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
    do {                                                                       \
        if (log_debug_enabled())                                               \
            log_msg(LOG_DEBUG, __VA_ARGS__);                                   \
    } while (0)

#endif
