/* settings.h - the scheduler's settings, described once.
 *
 * One table (settings.c) gives each setting its name, environment variable,
 * parser, bounds, default and whether nvsharectl may change it at run time.
 * The start-up environment, the usage text, the start-up log line and the
 * scheduler's checks of `nvsharectl set` all come from it, so a value is
 * judged the same whichever way it arrives. The settings nvsharectl may
 * change are the ones the state file keeps across restarts (state.h). */
#ifndef NVSHARE_SETTINGS_H
#define NVSHARE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum setting_id {
    SETTING_TQ,
    SETTING_DRAIN_TIMEOUT,
    SETTING_ANTI_THRASH,
    SETTING_COMPUTE_WINDOW_MS,
    SETTING_QUOTA_CARRYOVER_PERCENT,
    SETTING_SCHEDULING_MODE,
    SETTING_MEMORY_RESERVE_PERCENT,
    SETTING_CONTEXT_OVERHEAD,
    SETTING_SWITCH_TIME_MODE,
    SETTING_SWITCH_TIME_FIXED,
    SETTING_SWITCH_TIME_MULTIPLIER,
    SETTING_ENABLE_OVERSUB,
    SETTING_OVERSUB_RATIO,
    SETTING_DECLARED_LIMITS,
    SETTING_MAX_CONNECTIONS_PER_UID,
    SETTING_COUNT
};

/* How a setting's text becomes its value. */
enum setting_kind {
    SETTING_DURATION, /* parse_duration_ns: nanoseconds */
    SETTING_SIZE,     /* parse_size_bytes: bytes */
    SETTING_INT,      /* a plain integer */
    SETTING_SWITCH,   /* parse_switch: 0 or 1 */
    SETTING_ENUM,     /* an index into choices */
};

/* NVSHARE_SWITCH_TIME_MODE's values. */
enum switch_time_mode { SWITCH_TIME_AUTO = 0, SWITCH_TIME_FIXED = 1 };

struct setting {
    const char *name;  /* nvsharectl's name for it, and the log line's */
    const char *env;   /* NVSHARE_... */
    const char *label; /* what error messages call it: "time quantum" */
    enum setting_kind kind;
    uint64_t min, max;          /* inclusive; max UINT64_MAX: no upper bound */
    uint64_t fallback;          /* the default */
    const char *const *choices; /* SETTING_ENUM: names, NULL-terminated */
    bool runtime;               /* nvsharectl set may change it */
    bool zero_is_auto;          /* 0 stands for "auto": the scheduler chooses */
    const char *help;           /* one sentence for the usage text */
};

extern const struct setting settings_table[SETTING_COUNT];

/* Whether value is within the setting's bounds: 0, or -1 with a sentence
 * naming the setting and its bounds in err. Used for the environment and
 * for nvsharectl set alike. */
int setting_check(enum setting_id id, uint64_t value, char *err, size_t len);

/* Parses text as the setting's kind and checks it: 0, or -1 with err and
 * *value untouched. */
int setting_parse(enum setting_id id, const char *text, uint64_t *value,
                  char *err, size_t len);

/* The value as text that setting_parse reads back: 1h, 512Mi, on, serial. */
void setting_format(enum setting_id id, uint64_t value, char *buf, size_t len);

/* Every setting from the environment into values. An unset variable gives
 * the default; a malformed or out-of-bounds number is ignored with a
 * warning (the default is kept, as env.h does); an unknown choice of an
 * enum is an error (-1): it names a way of scheduling that we would not be
 * following. */
int settings_load(uint64_t values[SETTING_COUNT]);

/* The value id has in the state file's terms (state.h), from values as
 * settings_load gives them: the switch time is 0 there for auto. */
uint64_t setting_state_value(const uint64_t values[SETTING_COUNT],
                             enum setting_id id);

/* What the environment says of id, as "NVSHARE_TQ=3s" (the switch time:
 * both of its variables that are set), or "" when it says nothing. */
void setting_env_text(enum setting_id id, char *buf, size_t len);

/* One log line with every setting's value. */
void settings_log(const uint64_t values[SETTING_COUNT]);

/* The usage text's lines for every setting: variable, help, bounds,
 * default. */
void settings_usage(FILE *out);

#endif
