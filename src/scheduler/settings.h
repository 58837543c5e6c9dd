/* settings.h - the scheduler's settings, described once.
 *
 * One table (settings.def, a row each) gives each setting its name,
 * environment variable, parser, bounds, default, help and, for those
 * nvsharectl may change at run time, the function that applies a new value.
 * The start-up environment, the usage texts of the scheduler and of
 * nvsharectl, nvsharectl's parsing and completion, the scheduler's checks of
 * `nvsharectl set` and the state file all come from it, so a value is judged
 * the same whichever way it arrives. This part (settings.c) is a library
 * that nvsharectl links as well; the apply functions are the scheduler's
 * (control_set.c). */
#ifndef NVSHARE_SETTINGS_H
#define NVSHARE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum setting_id {
#define SETTING(id, ...) SETTING_##id,
#define RUNTIME_SETTING(id, ...) SETTING_##id,
#include "settings.def"
    SETTING_COUNT
};

/* How a setting's text becomes its value. */
enum setting_kind {
    SETTING_DURATION, /* parse_duration_ns: nanoseconds */
    SETTING_SIZE,     /* parse_size_bytes: bytes */
    SETTING_INT,      /* a plain integer */
    SETTING_SWITCH,   /* parse_switch: 0 or 1 */
    SETTING_ENUM,     /* an index into choices */
    SETTING_TEXT,     /* a string: setting_text, not in the values */
};

#define STATE_DEFAULT_PATH "/var/lib/nvshare/state.conf"
#define METRICS_DEFAULT_ADDR "127.0.0.1:9402"

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
    bool auto_at_runtime;       /* nvsharectl and the state file say auto (0),
                             the environment says it with another variable */
    bool per_gpu;               /* nvsharectl set may name one GPU (--gpu) */
    const char *example; /* values for nvsharectl's usage errors, or NULL */
    const char *text;    /* SETTING_TEXT: the default, as the help shows it */
    const char *help;    /* one sentence for the usage texts */
};

extern const struct setting settings_table[SETTING_COUNT];

/* Whether value is within the setting's bounds: 0, or -1 with a sentence
 * naming the setting and its bounds in err. Used for the environment and
 * for nvsharectl set alike. */
int setting_check(enum setting_id id, uint64_t value, char *err, size_t len);

/* Reads text as the setting's kind without judging its bounds (nvsharectl
 * leaves those to the scheduler): "auto" is 0 where the setting knows
 * auto at run time. 0, or -1 with err and *value untouched. */
int setting_read(enum setting_id id, const char *text, uint64_t *value,
                 char *err, size_t len);

/* setting_read's err as nvsharectl's usage error says it. */
void setting_read_error(enum setting_id id, const char *text, const char *why,
                        char *err, size_t len);

/* setting_check for a value from nvsharectl or the state file, where a
 * switch time of 0 means auto. */
int setting_check_runtime(enum setting_id id, uint64_t value, char *err,
                          size_t len);

/* The run-time setting called name, or -1. */
int setting_find_runtime(const char *name);

/* The run-time settings' names, as "tq, anti-thrash, mode or switch-time". */
void setting_runtime_names(char *buf, size_t len);

/* Parses text as the setting's kind and checks it: 0, or -1 with err and
 * *value untouched. */
int setting_parse(enum setting_id id, const char *text, uint64_t *value,
                  char *err, size_t len);

/* The value as text that setting_parse reads back: 1h, 512Mi, on, serial;
 * auto for 0 where setting_read takes it. */
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

/* Whether the environment gives id its value: its variable is set and
 * valid (a SETTING_TEXT's: set, "" included); the switch time's, either of
 * its two. */
bool setting_from_env(enum setting_id id);

/* A SETTING_TEXT's value from the environment, "" included; NULL when
 * unset (its user applies the default). */
const char *setting_text(enum setting_id id);

/* One log line with every setting's value. */
void settings_log(const uint64_t values[SETTING_COUNT]);

/* The usage text's lines for every setting: variable, help, bounds,
 * default. */
void settings_usage(FILE *out);

/* A run-time setting's argument as nvsharectl's synopsis writes it:
 * "<duration>|auto", "on|off", "serial|concurrent|auto". */
void setting_synopsis_arg(enum setting_id id, char *buf, size_t len);

/* nvsharectl set's help: a paragraph per run-time setting, its help, its
 * bounds and default. */
void settings_runtime_help(FILE *out);

/* A paragraph of a usage text as the settings' are: head indented by two,
 * text wrapped at 78 columns from column at (SETTINGS_HELP_COL in theirs)
 * on. */
#define SETTINGS_HELP_COL 26
void settings_paragraph(FILE *out, int at, const char *head, const char *text);

#endif
