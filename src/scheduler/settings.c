/* settings.c - see settings.h. */
#include "settings.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "parse.h"
#include "policy.h"
#include "protocol.h"

static const char *const switch_time_modes[] =
    {[SWITCH_TIME_AUTO] = "auto", [SWITCH_TIME_FIXED] = "fixed", NULL};

#define DURATION(min_ns, max_ns)                                               \
    SETTING_DURATION, .min = (min_ns), .max = (max_ns)
#define INT(lo, hi) SETTING_INT, .min = (lo), .max = (hi)
#define SWITCH SETTING_SWITCH, .min = 0, .max = 1

const struct setting settings_table[SETTING_COUNT] = {
    /* nvsharectl set tq and NVSHARE_TQ: a quantum over an hour leaves the
     * others waiting for longer than anyone would notice a stuck GPU. */
    [SETTING_TQ] =
        {"tq", "NVSHARE_TQ", "time quantum",
         DURATION(NS_PER_MS, 3600 * NS_PER_SEC), .fallback = POLICY_TQ_AUTO,
         .runtime = true, .zero_is_auto = true,
         .help = "time quantum: auto (per GPU, 100 x its mean hand-over, "
                 "100ms-30s) or pinned, e.g. 2s, 100ms"},
    [SETTING_DRAIN_TIMEOUT] = {"drain-timeout", "NVSHARE_DRAIN_TIMEOUT",
                               "drain timeout", DURATION(1, UINT64_MAX),
                               .fallback = 10 * NS_PER_SEC,
                               .help = "the longest a drain that says DRAINING "
                                       "may take after DROP_LOCK"},
    [SETTING_ANTI_THRASH] =
        {"anti-thrash", "NVSHARE_ANTI_THRASH", "anti-thrash", SWITCH,
         .fallback = 1, .runtime = true,
         .help = "on|off: take turns, or let clients run freely"},
    [SETTING_COMPUTE_WINDOW_MS] =
        {"compute-window-ms", "NVSHARE_COMPUTE_WINDOW_MS", "compute window",
         INT(100, 60000), .fallback = 1000,
         .help = "compute-limit accounting window, in ms"},
    [SETTING_QUOTA_CARRYOVER_PERCENT] =
        {"quota-carryover-percent", "NVSHARE_QUOTA_CARRYOVER_PERCENT",
         "quota carryover", INT(0, 100), .fallback = 100,
         .help = "share of a window's overshoot billed "
                 "to the next one, in percent"},
    [SETTING_SCHEDULING_MODE] =
        {"mode", "NVSHARE_SCHEDULING_MODE", "mode", SETTING_ENUM, .min = 0,
         .max = SCHED_MODE_AUTO, .fallback = SCHED_MODE_AUTO,
         .choices = sched_mode_names, .runtime = true,
         .help = "serial|concurrent|auto: one holder at a time, "
                 "everyone whose memory fits, or co-run light "
                 "clients that fit and time-slice the rest"},
    [SETTING_MEMORY_RESERVE_PERCENT] =
        {"memory-reserve-percent", "NVSHARE_MEMORY_RESERVE_PERCENT",
         "memory reserve", INT(0, 50), .fallback = POLICY_RESERVE_PERCENT,
         .help = "of each GPU kept free, in percent"},
    [SETTING_CONTEXT_OVERHEAD] =
        {"context-overhead", "NVSHARE_CONTEXT_OVERHEAD", "context overhead",
         SETTING_SIZE, .min = 0, .max = UINT64_MAX, .fallback = 512ull << 20,
         .help = "a client's memory beyond its allocations "
                 "where NVML cannot measure it"},
    [SETTING_SWITCH_TIME_MODE] =
        {"switch-time-mode", "NVSHARE_SWITCH_TIME_MODE", "switch time mode",
         SETTING_ENUM, .min = 0, .max = SWITCH_TIME_FIXED,
         .fallback = SWITCH_TIME_AUTO, .choices = switch_time_modes,
         .help = "auto|fixed: quantum of memory rotations, "
                 "measured swap time x multiplier or fixed"},
    /* nvsharectl set switch-time sends 0 for auto, which the scheduler
     * checks apart from these bounds. */
    [SETTING_SWITCH_TIME_FIXED] = {"switch-time", "NVSHARE_SWITCH_TIME_FIXED",
                                   "switch time",
                                   DURATION(100 * NS_PER_MS, 3600 * NS_PER_SEC),
                                   .fallback = 60 * NS_PER_SEC, .runtime = true,
                                   .help = "the switch time in fixed mode"},
    [SETTING_SWITCH_TIME_MULTIPLIER] = {"switch-time-multiplier",
                                        "NVSHARE_SWITCH_TIME_MULTIPLIER",
                                        "switch time multiplier", INT(1, 1000),
                                        .fallback = POLICY_SWITCH_MULTIPLIER,
                                        .help = "in auto switch time mode"},
    [SETTING_ENABLE_OVERSUB] = {"oversub", "NVSHARE_ENABLE_OVERSUB",
                                "oversubscription", SWITCH, .fallback = 0,
                                .help =
                                    "on: clients that do not say otherwise get "
                                    "managed memory and can be swapped"},
    [SETTING_OVERSUB_RATIO] =
        {"oversub-ratio", "NVSHARE_OVERSUB_RATIO", "oversubscription ratio",
         INT(1, 16), .fallback = 2,
         .help = "oversubscribed clients of a GPU hold at most "
                 "this x its capacity"},
    /* A tenant sets its own environment: what it declares can only lower
     * the operator's limits, and with this off it counts not at all. */
    [SETTING_DECLARED_LIMITS] =
        {"declared-limits", "NVSHARE_DECLARED_LIMITS", "declared limits",
         SWITCH, .fallback = 1,
         .help = "on: a client's NVSHARE_GPU_CORE_LIMIT and "
                 "NVSHARE_GPU_MEMORY_LIMIT can lower its pod's "
                 "limits (never raise them); off: only the "
                 "operator's limits count"},
    /* Root and the daemon's own uid are exempt: they may use the control
     * socket anyway, and in Kubernetes most containers run as root, which
     * a cap would otherwise make one tenant for the whole node. */
    [SETTING_MAX_CONNECTIONS_PER_UID] =
        {"max-connections-per-uid", "NVSHARE_MAX_CONNECTIONS_PER_UID",
         "connections per uid", INT(0, 1000000), .fallback = 256,
         .help =
             "connections one uid (not root, not the scheduler's) may hold; "
             "0: no limit"},
};

static void format_exact(const struct setting *s, uint64_t v, char *buf,
                         size_t len)
{
    if (s->kind == SETTING_DURATION)
        format_duration_exact(v, buf, len);
    else if (s->kind == SETTING_SIZE)
        format_size_exact(v, buf, len);
    else
        snprintf(buf, len, "%" PRIu64, v);
}

/* A value as the log line, the usage text and the state file show it. */
static void format_value(const struct setting *s, uint64_t v, char *buf,
                         size_t len)
{
    if (s->zero_is_auto && v == 0)
        snprintf(buf, len, "auto");
    else if (s->kind == SETTING_SWITCH)
        snprintf(buf, len, "%s", v ? "on" : "off");
    else if (s->kind == SETTING_ENUM)
        snprintf(buf, len, "%s", s->choices[v]);
    else
        format_exact(s, v, buf, len);
}

void setting_format(enum setting_id id, uint64_t value, char *buf, size_t len)
{
    format_value(&settings_table[id], value, buf, len);
}

int setting_check(enum setting_id id, uint64_t value, char *err, size_t len)
{
    const struct setting *s = &settings_table[id];
    char lo[32], hi[32];

    if ((value >= s->min && value <= s->max) || (s->zero_is_auto && value == 0))
        return 0;
    if (s->kind == SETTING_SWITCH) {
        snprintf(err, len, "%s is on or off", s->label);
        return -1;
    }
    if (s->kind == SETTING_ENUM) {
        size_t n = (size_t)snprintf(err, len, "%s must be ", s->label);
        for (int i = 0; s->choices[i] && n < len; i++)
            n += (size_t)snprintf(err + n, len - n, "%s%s",
                                  i == 0 ? ""
                                         : (s->choices[i + 1] ? ", " : " or "),
                                  s->choices[i]);
        return -1;
    }
    format_exact(s, s->min, lo, sizeof(lo));
    format_exact(s, s->max, hi, sizeof(hi));
    snprintf(err, len, "%s must be between %s and %s%s", s->label, lo, hi,
             s->zero_is_auto ? ", or auto" : "");
    return -1;
}

int setting_parse(enum setting_id id, const char *text, uint64_t *value,
                  char *err, size_t len)
{
    const struct setting *s = &settings_table[id];
    char why[PARSE_ERR_LEN];
    uint64_t parsed = 0;
    long number;
    int on, rc = -1;

    if (s->zero_is_auto && !strcmp(text, "auto")) {
        *value = 0;
        return 0;
    }
    switch (s->kind) {
    case SETTING_DURATION:
        rc = parse_duration_ns(text, &parsed, why);
        break;
    case SETTING_SIZE:
        rc = parse_size_bytes(text, &parsed, why);
        break;
    case SETTING_INT:
        if ((rc = parse_int_range(text, 0, LONG_MAX, &number, why)) == 0)
            parsed = (uint64_t)number;
        break;
    case SETTING_SWITCH:
        if ((rc = parse_switch(text, &on, why)) == 0)
            parsed = (uint64_t)on;
        break;
    case SETTING_ENUM:
        /* Out of bounds when unknown: the bounds' sentence lists the choices. */
        parsed = s->max + 1;
        for (uint64_t i = 0; s->choices[i]; i++)
            if (!strcmp(text, s->choices[i]))
                parsed = i;
        rc = 0;
        break;
    }
    if (rc) {
        snprintf(err, len, "%s", why);
        return -1;
    }
    if (setting_check(id, parsed, err, len))
        return -1;
    *value = parsed;
    return 0;
}

int settings_load(uint64_t values[SETTING_COUNT])
{
    char err[PARSE_ERR_LEN];
    int rc = 0;

    for (int id = 0; id < SETTING_COUNT; id++) {
        const struct setting *s = &settings_table[id];
        const char *text = getenv(s->env);

        values[id] = s->fallback;
        if (!text || !*text ||
            !setting_parse(id, text, &values[id], err, sizeof(err)))
            continue;
        if (s->kind == SETTING_ENUM) {
            log_error("%s: '%s': %s", s->env, text, err);
            rc = -1;
        } else {
            log_warn("ignoring %s: %s", s->env, err);
        }
    }
    return rc;
}

uint64_t setting_state_value(const uint64_t v[SETTING_COUNT], enum setting_id id)
{
    if (id == SETTING_SWITCH_TIME_FIXED)
        return v[SETTING_SWITCH_TIME_MODE] == SWITCH_TIME_FIXED ? v[id] : 0;
    return v[id];
}

void setting_env_text(enum setting_id id, char *buf, size_t len)
{
    int ids[2] = {id, -1};
    size_t n = 0;

    buf[0] = '\0';
    if (id == SETTING_SWITCH_TIME_FIXED)
        ids[0] = SETTING_SWITCH_TIME_MODE, ids[1] = SETTING_SWITCH_TIME_FIXED;
    for (int i = 0; i < 2 && ids[i] >= 0 && n < len; i++) {
        const char *text = getenv(settings_table[ids[i]].env);
        if (text && *text)
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "",
                                  settings_table[ids[i]].env, text);
    }
}

void settings_log(const uint64_t values[SETTING_COUNT])
{
    char line[1024], value[32];
    size_t n = 0;

    for (int id = 0; id < SETTING_COUNT && n < sizeof(line); id++) {
        format_value(&settings_table[id], values[id], value, sizeof(value));
        n += snprintf(line + n, sizeof(line) - n, "%s%s=%s", id ? " " : "",
                      settings_table[id].name, value);
    }
    log_info("settings: %s", line);
}

/* The usage text: variables in the first column, help from HELP_COL on. */
enum { HELP_COL = 26, WIDTH = 78 };

/* Prints text's words wrapped at WIDTH, continuation lines indented to
 * HELP_COL; col is where the cursor stands. Returns where it ends. */
static int wrap(FILE *out, const char *text, int col)
{
    while (*text) {
        int word = (int)strcspn(text, " ");
        if (col + 1 + word > WIDTH && col > HELP_COL) {
            fprintf(out, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else if (col > HELP_COL) {
            fputc(' ', out);
            col++;
        }
        col += fprintf(out, "%.*s", word, text);
        text += word;
        text += strspn(text, " ");
    }
    return col;
}

void settings_usage(FILE *out)
{
    for (int id = 0; id < SETTING_COUNT; id++) {
        const struct setting *s = &settings_table[id];
        char lo[32], hi[32], def[32], extra[128];
        int col = fprintf(out, "  %s", s->env);

        if (col >= HELP_COL) {
            fputc('\n', out);
            col = 0;
        }
        col += fprintf(out, "%*s", HELP_COL - col, "");
        col = wrap(out, s->help, col);
        format_exact(s, s->min, lo, sizeof(lo));
        format_exact(s, s->max, hi, sizeof(hi));
        format_value(s, s->fallback, def, sizeof(def));
        if ((s->kind == SETTING_INT || s->kind == SETTING_DURATION) &&
            s->max != UINT64_MAX)
            snprintf(extra, sizeof(extra), "(%s-%s, default %s)", lo, hi, def);
        else
            snprintf(extra, sizeof(extra), "(default %s)", def);
        wrap(out, extra, col);
        fputc('\n', out);
    }
}
