/* log.c - see log.h. Lines are formatted into a stack buffer and written with
 * one write(2) so that concurrent threads and processes do not interleave. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024
#define LOG_REPEAT_SLOTS 8 /* distinct warnings tracked at once */

static const char *const level_names[] = {"error", "warning", "info", "debug"};
static const char *log_component = "nvshare";
static bool debug_enabled, json_format;

/* A warning printed at first_ns whose repeats are being counted. */
struct repeat {
    char msg[LOG_LINE_MAX];
    uint64_t first_ns;
    unsigned long count; /* repeats suppressed since first_ns */
};

static struct repeat repeats[LOG_REPEAT_SLOTS];
static pthread_mutex_t repeats_lock = PTHREAD_MUTEX_INITIALIZER;

int log_set_format(const char *name)
{
    if (!strcmp(name, "json"))
        json_format = true;
    else if (!strcmp(name, "text"))
        json_format = false;
    else
        return -1;
    return 0;
}

static void flush_all_repeats(void);

void log_init(const char *component)
{
    const char *debug = getenv("NVSHARE_DEBUG");
    const char *format = getenv("NVSHARE_LOG_FORMAT");
    static bool flush_at_exit;

    log_component = component;
    debug_enabled = debug && strcmp(debug, "0") != 0 && debug[0] != '\0';
    if (format && *format && log_set_format(format) < 0)
        log_warn("NVSHARE_LOG_FORMAT=%s is not text or json: using text", format);
    if (!flush_at_exit)
        flush_at_exit = atexit(flush_all_repeats) == 0;
}

bool log_debug_enabled(void)
{
    return debug_enabled;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "2026-11-23T17:10:26.123Z" */
static void format_time(uint64_t ns, char *buf, size_t len)
{
    time_t sec = (time_t)(ns / 1000000000ull);
    struct tm tm;

    if (!gmtime_r(&sec, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf + strlen(buf), len - strlen(buf), ".%03uZ",
             (unsigned)(ns / 1000000ull % 1000));
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if it is not one. */
static int utf8_len(const unsigned char *p)
{
    int n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2
          : p[0] >= 0xe0 && p[0] < 0xf0 ? 3 : p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : 0;

    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* Appends s to buf[*len..cap) as the inside of a JSON string: quotes,
 * backslashes and control characters escaped, broken UTF-8 as U+FFFD.
 * Stops (leaving room for the line's end) rather than overflow. */
static void json_append(char *buf, size_t *len, size_t cap, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char esc[8];
        const char *out = esc;
        size_t n;
        int seq = utf8_len(p);

        if (*p == '"' || *p == '\\')
            snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p == '\n')
            snprintf(esc, sizeof(esc), "\\n");
        else if (*p < 0x20 || *p == 0x7f)
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
        else if (seq == 0)
            snprintf(esc, sizeof(esc), "\\ufffd");
        else
            out = NULL;
        if (out) {
            n = strlen(out);
            p += seq ? seq : 1;
        } else {
            out = (const char *)p;
            n = (size_t)seq;
            p += seq;
        }
        if (*len + n + 3 > cap) /* room for "}\n */
            return;
        memcpy(buf + *len, out, n);
        *len += n;
    }
}

/* Writes one line carrying msg (already formatted) at level. */
static void emit(enum log_level level, const char *msg)
{
    char line[2 * LOG_LINE_MAX], stamp[40];
    size_t len;
    int n;

    format_time(realtime_ns(), stamp, sizeof(stamp));
    if (json_format) {
        n = snprintf(line, sizeof(line), "{\"time\":\"%s\",\"level\":\"%s\",\"component\":\"",
                     stamp, level_names[level]);
        len = (size_t)n;
        json_append(line, &len, sizeof(line), log_component);
        n = snprintf(line + len, sizeof(line) - len, "\",\"pid\":%d,\"msg\":\"",
                     (int)getpid());
        len += (size_t)n;
        json_append(line, &len, sizeof(line), msg);
        memcpy(line + len, "\"}", 2);
        len += 2;
    } else {
        n = snprintf(line, sizeof(line), "%s nvshare[%s %d] %s: %s", stamp,
                     log_component, (int)getpid(), level_names[level], msg);
        len = n < (int)sizeof(line) - 1 ? (size_t)n : sizeof(line) - 2;
    }
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}

/* Reports and frees a slot. Called with repeats_lock held. */
static void repeat_report(struct repeat *r, uint64_t now)
{
    if (r->count) {
        char msg[LOG_LINE_MAX + 64];
        double span = (double)(now - r->first_ns) / 1e9;
        /* The precision bounds what -O3's truncation check cannot see. */
        snprintf(msg, sizeof(msg), "%.*s (repeated %lu time%s in %.0f s)",
                 LOG_LINE_MAX - 1, r->msg, r->count,
                 r->count == 1 ? "" : "s", span < 1 ? 1 : span);
        emit(LOG_WARN, msg);
    }
    r->msg[0] = '\0';
    r->count = 0;
}

/* Reports the slots whose window is over (all of them if every). */
static void repeats_expire(uint64_t now, bool every)
{
    for (int i = 0; i < LOG_REPEAT_SLOTS; i++) {
        struct repeat *r = &repeats[i];
        if (r->msg[0] &&
            (every || now - r->first_ns >= LOG_REPEAT_WINDOW_S * 1000000000ull))
            repeat_report(r, now);
    }
}

/* True if msg repeats a warning printed in the current window (it is then
 * counted); false if it is to be printed, and from now on counted. */
static bool warning_is_repeat(const char *msg)
{
    uint64_t now = realtime_ns();
    struct repeat *slot = &repeats[0];

    for (int i = 0; i < LOG_REPEAT_SLOTS; i++) {
        struct repeat *r = &repeats[i];
        if (r->msg[0] && !strcmp(r->msg, msg)) {
            r->count++;
            return true;
        }
        if (!r->msg[0] || (slot->msg[0] && r->first_ns < slot->first_ns))
            slot = r; /* a free slot, else the oldest */
    }
    if (slot->msg[0])
        repeat_report(slot, now);
    snprintf(slot->msg, sizeof(slot->msg), "%s", msg);
    slot->first_ns = now;
    return false;
}

/* trylock everywhere: a fork() while another thread held the lock must not
 * hang the host application's child, and two threads logging at once must
 * not wait on each other; either only costs the limiting of one line. */
static void flush_repeats(bool every)
{
    if (pthread_mutex_trylock(&repeats_lock))
        return;
    repeats_expire(realtime_ns(), every);
    pthread_mutex_unlock(&repeats_lock);
}

void log_flush_repeats(void)
{
    flush_repeats(false);
}

static void flush_all_repeats(void)
{
    flush_repeats(true);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    char msg[LOG_LINE_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (pthread_mutex_trylock(&repeats_lock) == 0) {
        bool repeat;
        repeats_expire(realtime_ns(), false);
        repeat = level == LOG_WARN && warning_is_repeat(msg);
        pthread_mutex_unlock(&repeats_lock);
        if (repeat)
            return;
    }
    emit(level, msg);
}
