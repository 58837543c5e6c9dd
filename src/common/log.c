/* log.c - see log.h. Lines are formatted into a stack buffer and written with
 * one write(2) so that concurrent threads and processes do not interleave. */
#include "log.h"

#include "clock.h"
#include "text.h"

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
static enum log_level max_level = LOG_INFO;
static bool json_format;

/* A warning printed at first_ns whose repeats are being counted. */
struct repeat {
    char msg[LOG_LINE_MAX];
    uint64_t first_ns;
    unsigned long count; /* repeats suppressed since first_ns */
};

static struct repeat repeats[LOG_REPEAT_SLOTS];
/* Guards the repeat slots and the uids' budgets. */
static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void flush_all_counts(void);

void log_init(const char *component, enum log_level default_level)
{
    const char *debug = getenv("NVSHARE_DEBUG");
    const char *format = getenv("NVSHARE_LOG_FORMAT");
    const char *level = getenv("NVSHARE_LOG_LEVEL");
    static bool flush_at_exit;
    int named = -1;

    log_component = component;
    max_level = debug && strcmp(debug, "0") != 0 && debug[0] != '\0'
                    ? LOG_DEBUG
                    : default_level;
    for (int i = 0; level && *level && i <= LOG_DEBUG; i++)
        if (!strcmp(level, level_names[i]))
            named = i;
    if (named >= 0)
        max_level = (enum log_level)named;
    else if (level && *level)
        log_warn("NVSHARE_LOG_LEVEL=%s is not error, warning, info or debug",
                 level);
    if (format && *format && log_set_format(format) < 0)
        log_warn("NVSHARE_LOG_FORMAT=%s is not text or json: using text", format);
    if (!flush_at_exit)
        flush_at_exit = atexit(flush_all_counts) == 0;
}

bool log_debug_enabled(void)
{
    return max_level >= LOG_DEBUG;
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

/* Code points that would break a text line or mislead its reader: C0 and
 * C1 controls, DEL, the line and paragraph separators, and the
 * bidirectional embeddings, overrides and isolates. */
static bool breaks_text(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 ||
           cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* How the character at s goes on a text line (see log.h): the bytes to
 * write, either esc or s itself, as json_escape_char gives them. */
static const char *text_escape_char(const unsigned char *s,
                                    char esc[TEXT_ESC_MAX], size_t *n,
                                    size_t *used)
{
    int seq = utf8_seq_len(s);
    uint32_t cp = seq ? utf8_decode(s, seq) : 0;

    *used = seq ? (size_t)seq : 1;
    if (seq == 0)
        snprintf(esc, TEXT_ESC_MAX, "\\x%02x", *s);
    else if (cp == '\n' || cp == '\t' || cp == '\r')
        snprintf(esc, TEXT_ESC_MAX, "\\%c",
                 cp == '\n'   ? 'n'
                 : cp == '\t' ? 't'
                              : 'r');
    else if (breaks_text(cp))
        snprintf(esc, TEXT_ESC_MAX, cp < 0x80 ? "\\x%02x" : "\\u%04x",
                 (unsigned)cp);
    else {
        *n = (size_t)seq;
        return (const char *)s;
    }
    *n = strlen(esc);
    return esc;
}

/* Appends s to buf[*len..cap) so that it cannot escape its place: for JSON
 * the inside of a string, for text the rest of one line. Stops (leaving
 * room for the line's end) rather than overflow. */
static void append_escaped(char *buf, size_t *len, size_t cap, const char *s,
                           bool json)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char esc[TEXT_ESC_MAX];
        size_t n, used;
        const char *out = json ? json_escape_char(p, esc, &n, &used)
                               : text_escape_char(p, esc, &n, &used);

        if (*len + n + 3 > cap) /* room for "}\n */
            return;
        memcpy(buf + *len, out, n);
        *len += n;
        p += used;
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
        n = snprintf(line, sizeof(line),
                     "{\"time\":\"%s\",\"level\":\"%s\",\"component\":\"",
                     stamp, level_names[level]);
        len = (size_t)n;
        append_escaped(line, &len, sizeof(line), log_component, true);
        n = snprintf(line + len, sizeof(line) - len, "\",\"pid\":%d,\"msg\":\"",
                     (int)getpid());
        len += (size_t)n;
        append_escaped(line, &len, sizeof(line), msg, true);
        memcpy(line + len, "\"}", 2);
        len += 2;
    } else {
        n = snprintf(line, sizeof(line), "%s nvshare[%s %d] %s: ", stamp,
                     log_component, (int)getpid(), level_names[level]);
        len = (size_t)n;
        append_escaped(line, &len, sizeof(line), msg, false);
    }
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}

/* Reports and frees a slot. Called with counts_lock held. */
static void repeat_report(struct repeat *r, uint64_t now)
{
    if (r->count) {
        char msg[LOG_LINE_MAX + 64];
        double span = (double)(now - r->first_ns) / 1e9;
        /* The precision bounds what -O3's truncation check cannot see. */
        snprintf(msg, sizeof(msg), "%.*s (repeated %lu time%s in %.0f s)",
                 LOG_LINE_MAX - 1, r->msg, r->count, r->count == 1 ? "" : "s",
                 span < 1 ? 1 : span);
        emit(LOG_WARN, msg);
    }
    r->msg[0] = '\0';
    r->count = 0;
}

/* The earlier of two delays, 0 meaning none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
    return a && (!b || a < b) ? a : b;
}

/* Reports the slots whose window is over (all of them if every); returns
 * the delay until the next is due, 0 if none. */
static uint64_t repeats_expire(uint64_t now, bool every)
{
    uint64_t next = 0;

    for (int i = 0; i < LOG_REPEAT_SLOTS; i++) {
        struct repeat *r = &repeats[i];
        uint64_t due = r->first_ns + LOG_REPEAT_WINDOW_S * NS_PER_SEC;
        if (!r->msg[0])
            continue;
        if (every || now >= due)
            repeat_report(r, now);
        else
            next = sooner(next, due - now);
    }
    return next;
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

/* ---- lines charged to a uid (log_uid) ---------------------------------
 * Each budget is a token bucket kept as its theoretical arrival time
 * (GCRA): a line is allowed while tat is at most (burst - 1) intervals
 * ahead of now, and pushes tat one interval further. Budgets are on the
 * monotonic clock, so that a step of the wall clock neither silences nor
 * unleashes anyone. The table is bounded: past LOG_UID_SLOTS uids, the one
 * quiet the longest is forgotten, its pending count folded into the
 * global budget's, so that many uids cost at most one report line each
 * per window and the global budget bounds them all. */
#define LOG_UID_SLOTS 64

struct budget {
    bool used;
    uint32_t uid;
    uint64_t tat;
    uint64_t last_ns;    /* its latest line: who is forgotten first */
    uint64_t suppressed; /* lines suppressed since suppressed_since */
    uint64_t suppressed_since;
};

static struct budget uid_budgets[LOG_UID_SLOTS], all_uids;
static uint64_t suppressed_total;

static bool budget_allows(const struct budget *b, uint64_t now, int burst,
                          uint64_t interval)
{
    return b->tat <= now + (uint64_t)(burst - 1) * interval;
}

static void budget_take(struct budget *b, uint64_t now, uint64_t interval)
{
    b->tat = (b->tat > now ? b->tat : now) + interval;
}

static bool budget_suppress(struct budget *b, uint64_t now)
{
    if (b->suppressed++ == 0)
        b->suppressed_since = now;
    suppressed_total++;
    return false;
}

static void budget_report(struct budget *b, uint64_t now)
{
    char msg[160];
    double span = (double)(now - b->suppressed_since) / 1e9;

    if (b == &all_uids)
        snprintf(msg, sizeof(msg),
                 "%llu lines about clients of all uids "
                 "suppressed in the last %.0f s",
                 (unsigned long long)b->suppressed, span < 1 ? 1 : span);
    else if (b->uid == LOG_UID_ANY)
        snprintf(msg, sizeof(msg),
                 "%llu lines about clients together "
                 "suppressed in the last %.0f s",
                 (unsigned long long)b->suppressed, span < 1 ? 1 : span);
    else
        snprintf(msg, sizeof(msg),
                 "uid %u: %llu lines about its clients "
                 "suppressed in the last %.0f s",
                 (unsigned)b->uid, (unsigned long long)b->suppressed,
                 span < 1 ? 1 : span);
    emit(LOG_WARN, msg);
    b->suppressed = 0;
}

static uint64_t budget_expire(struct budget *b, uint64_t now, bool every)
{
    uint64_t due = b->suppressed_since + LOG_REPEAT_WINDOW_S * NS_PER_SEC;

    if (!b->suppressed)
        return 0;
    if (every || now >= due) {
        budget_report(b, now);
        return 0;
    }
    return due - now;
}

static uint64_t budgets_expire(uint64_t now, bool every)
{
    uint64_t next = budget_expire(&all_uids, now, every);

    for (int i = 0; i < LOG_UID_SLOTS; i++)
        if (uid_budgets[i].used)
            next = sooner(next, budget_expire(&uid_budgets[i], now, every));
    return next;
}

static struct budget *budget_of(uint32_t uid)
{
    struct budget *slot = &uid_budgets[0];

    for (int i = 0; i < LOG_UID_SLOTS; i++) {
        struct budget *b = &uid_budgets[i];
        if (b->used && b->uid == uid)
            return b;
        if (!b->used || (slot->used && b->last_ns < slot->last_ns))
            slot = b; /* a free slot, else the quietest */
    }
    if (slot->used && slot->suppressed) {
        if (all_uids.suppressed == 0)
            all_uids.suppressed_since = slot->suppressed_since;
        all_uids.suppressed += slot->suppressed;
    }
    *slot = (struct budget){.used = true, .uid = uid};
    return slot;
}

/* Whether a line of uid may be written now; if not, it is counted. */
static bool budget_charge(uint32_t uid, uint64_t now)
{
    const uint64_t uid_interval = LOG_UID_INTERVAL_MS * NS_PER_MS;
    const uint64_t all_interval = LOG_UIDS_INTERVAL_MS * NS_PER_MS;
    struct budget *b = budget_of(uid);

    b->last_ns = now;
    if (!budget_allows(b, now, LOG_UID_BURST, uid_interval))
        return budget_suppress(b, now);
    if (!budget_allows(&all_uids, now, LOG_UIDS_BURST, all_interval))
        return budget_suppress(&all_uids, now);
    budget_take(b, now, uid_interval);
    budget_take(&all_uids, now, all_interval);
    return true;
}

/* trylock everywhere: a fork() while another thread held the lock must not
 * hang the host application's child, and two threads logging at once must
 * not wait on each other; either only costs the limiting of one line. */
static uint64_t flush_counts(bool every)
{
    uint64_t next;

    if (pthread_mutex_trylock(&counts_lock))
        return 0;
    next = sooner(repeats_expire(realtime_ns(), every),
                  budgets_expire(now_ns(), every));
    pthread_mutex_unlock(&counts_lock);
    return next;
}

uint64_t log_flush_repeats(void)
{
    return flush_counts(false);
}

static void flush_all_counts(void)
{
    flush_counts(true);
}

uint64_t log_suppressed_total(void)
{
    return suppressed_total;
}

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
    char msg[LOG_LINE_MAX];

    if (level > max_level)
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (pthread_mutex_trylock(&counts_lock) == 0) {
        bool repeat;
        repeats_expire(realtime_ns(), false);
        repeat = level == LOG_WARN && warning_is_repeat(msg);
        pthread_mutex_unlock(&counts_lock);
        if (repeat)
            return;
    }
    emit(level, msg);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

void log_uid(uint32_t uid, enum log_level level, const char *fmt, ...)
{
    va_list ap;
    bool allowed = true;

    if (pthread_mutex_trylock(&counts_lock) == 0) {
        uint64_t now = now_ns();
        budgets_expire(now, false);
        allowed = budget_charge(uid, now);
        pthread_mutex_unlock(&counts_lock);
    }
    if (!allowed)
        return;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}
