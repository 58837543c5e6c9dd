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
 * A text line is always one line, whatever its message holds: control
 * characters (newline, ESC, ...), C1 controls, Unicode line separators and
 * bidirectional overrides, and bytes that are not UTF-8 are written as
 * escapes (\n, \x1b, \u202e). Escaping here, not in callers, means that no
 * caller can forget a name that came from a client: none can forge a line
 * or drive the operator's terminal. Backslashes are left as they are: the
 * escapes exist to keep the line whole, and an operator's path or pattern
 * should read as written.
 *
 * Lines that a client's behaviour causes (a malformed message, a refused
 * registration, a connection coming and going) are charged to its uid with
 * log_uid(): each uid may log LOG_UID_BURST lines at once and then one
 * every LOG_UID_INTERVAL_MS, all uids together LOG_UIDS_BURST at once and
 * then one every LOG_UIDS_INTERVAL_MS. Lines beyond are counted, and the
 * count reported once the window is over:
 *
 *     uid 65534: 12345 lines about its clients suppressed in the last 10 s
 *
 * The daemon's own lines (start-up, the operator's settings) are never
 * limited.
 *
 * Logging never allocates and never fails loudly: a diagnostic must not be
 * able to hurt the process that emits it. */
#ifndef NVSHARE_LOG_H
#define NVSHARE_LOG_H

#include <stdbool.h>
#include <stdint.h>

#define LOG_REPEAT_WINDOW_S 10
#define LOG_UID_BURST 20
#define LOG_UID_INTERVAL_MS 1000
#define LOG_UIDS_BURST 200
#define LOG_UIDS_INTERVAL_MS 50

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the component name and the level up to which lines are written:
 * NVSHARE_LOG_LEVEL (error, warning, info or debug), else debug where
 * NVSHARE_DEBUG=1, else default_level. The daemons default to info; the
 * hook, which writes on the application's stderr, to warning: a process
 * that runs normally under nvshare prints nothing, one that runs
 * unscheduled says so. Reads NVSHARE_LOG_FORMAT (text or json) too. */
void log_init(const char *component, enum log_level default_level);
/* "text" or "json"; returns -1 (and changes nothing) for anything else. */
int log_set_format(const char *name);
bool log_debug_enabled(void);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A line caused by what a client of uid did, subject to the limits above;
 * LOG_UID_ANY (no uid is ever it) for one that clients cause together: it
 * has a budget of its own, as a uid has. */
#define LOG_UID_ANY UINT32_MAX
void log_uid(uint32_t uid, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the counts (repeated warnings, suppressed lines) whose window is
 * over; returns the nanoseconds until the next one is due, 0 if none is
 * pending. The scheduler calls it from its loop, and wakes for it, so that
 * a flood that stops is still reported. At exit, every pending count is
 * reported. */
uint64_t log_flush_repeats(void);
/* Lines that log_uid() suppressed since the process started. */
uint64_t log_suppressed_total(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_uid_warn(uid, ...) log_uid(uid, LOG_WARN, __VA_ARGS__)
#define log_uid_info(uid, ...) log_uid(uid, LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
    do {                                                                       \
        if (log_debug_enabled())                                               \
            log_msg(LOG_DEBUG, __VA_ARGS__);                                   \
    } while (0)

#endif
