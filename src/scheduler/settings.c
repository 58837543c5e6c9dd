/* settings.c - the settings table's rows (settings.def) and what reads,
 * checks, formats and describes them, for the scheduler and nvsharectl. */
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

/* The rows of settings.def; their apply functions are the scheduler's. */
#define SETTING(id, name_, env_, label_, kind_, lo, hi, def, help_, ...)       \
    [SETTING_##id] = {.name = name_,                                           \
                      .env = env_,                                             \
                      .label = label_,                                         \
                      .kind = SETTING_##kind_,                                 \
                      .min = lo,                                               \
                      .max = hi,                                               \
                      .fallback = def,                                         \
                      .help = help_,                                           \
                      __VA_ARGS__},
#define RUNTIME_SETTING(id, apply, ...)                                        \
    SETTING(id, __VA_ARGS__, .runtime = true)
const struct setting settings_table[SETTING_COUNT] = {
#include "settings.def"
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
    const char *text = s->kind == SETTING_TEXT ? getenv(s->env) : NULL;

    if (s->kind == SETTING_TEXT)
        snprintf(buf, len, "%s", text ? text : s->text);
    else if ((s->zero_is_auto || s->auto_at_runtime) && v == 0)
        snprintf(buf, len, "auto");
    else if (s->kind == SETTING_SWITCH)
        snprintf(buf, len, "%s", v ? "on" : "off");
    else if (s->kind == SETTING_ENUM)
        snprintf(buf, len, "%s", s->choices[v]);
    else
        format_exact(s, v, buf, len);
}

/* "serial, concurrent or auto" */
static void choices_text(const struct setting *s, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int i = 0; s->choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s",
                              i == 0 ? "" : (s->choices[i + 1] ? ", " : " or "),
                              s->choices[i]);
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
        char choices[128];
        choices_text(s, choices, sizeof(choices));
        snprintf(err, len, "%s must be %s", s->label, choices);
        return -1;
    }
    format_exact(s, s->min, lo, sizeof(lo));
    format_exact(s, s->max, hi, sizeof(hi));
    snprintf(err, len, "%s must be between %s and %s%s", s->label, lo, hi,
             s->zero_is_auto ? ", or auto" : "");
    return -1;
}

int setting_read(enum setting_id id, const char *text, uint64_t *value,
                 char *err, size_t len)
{
    const struct setting *s = &settings_table[id];
    char why[PARSE_ERR_LEN];
    uint64_t parsed = 0;
    long number;
    int on, rc = -1;

    if ((s->zero_is_auto || s->auto_at_runtime) && !strcmp(text, "auto")) {
        *value = 0;
        return 0;
    }
    switch (s->kind) {
    case SETTING_DURATION:
        /* A zero duration is a mistake for most settings, and
         * parse_duration_ns refuses it; one whose bounds take 0 reads it. */
        if (s->min == 0 && (!strcmp(text, "0") || !strcmp(text, "0s")))
            rc = 0;
        else
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
    case SETTING_TEXT:
        break; /* never read as a value */
    case SETTING_ENUM:
        /* Unknown: the bounds' sentence lists the choices. */
        parsed = s->max + 1;
        for (uint64_t i = 0; s->choices[i]; i++)
            if (!strcmp(text, s->choices[i]))
                parsed = i;
        rc = setting_check(id, parsed, why, sizeof(why));
        break;
    }
    if (rc) {
        snprintf(err, len, "%s", why);
        return -1;
    }
    *value = parsed;
    return 0;
}

void setting_read_error(enum setting_id id, const char *text, const char *why,
                        char *err, size_t len)
{
    const struct setting *s = &settings_table[id];
    char choices[128];

    if (s->kind == SETTING_ENUM) {
        choices_text(s, choices, sizeof(choices));
        snprintf(err, len, "unknown %s '%s' (%s)", s->label, text, choices);
    } else if (s->example) {
        snprintf(err, len, "%s: %s (e.g. %s)", s->label, why, s->example);
    } else if (s->kind == SETTING_DURATION) {
        snprintf(err, len, "%s", why); /* says "duration" already */
    } else {
        snprintf(err, len, "%s: %s", s->name, why);
    }
}

int setting_parse(enum setting_id id, const char *text, uint64_t *value,
                  char *err, size_t len)
{
    uint64_t parsed;

    if (setting_read(id, text, &parsed, err, len) ||
        setting_check(id, parsed, err, len))
        return -1;
    *value = parsed;
    return 0;
}

int setting_check_runtime(enum setting_id id, uint64_t value, char *err,
                          size_t len)
{
    const struct setting *s = &settings_table[id];
    char why[PARSE_ERR_LEN];

    if (!s->auto_at_runtime)
        return setting_check(id, value, err, len);
    if (value == 0 || !setting_check(id, value, why, sizeof(why)))
        return 0;
    snprintf(err, len, "%s, or auto", why);
    return -1;
}

int setting_find_runtime(const char *name)
{
    for (int id = 0; id < SETTING_COUNT; id++)
        if (settings_table[id].runtime && !strcmp(settings_table[id].name, name))
            return id;
    return -1;
}

void setting_runtime_names(char *buf, size_t len)
{
    int left = 0;
    size_t n = 0;

    for (int id = 0; id < SETTING_COUNT; id++)
        left += settings_table[id].runtime;
    buf[0] = '\0';
    for (int id = 0; id < SETTING_COUNT && n < len; id++) {
        if (!settings_table[id].runtime)
            continue;
        left--;
        n += (size_t)snprintf(buf + n, len - n, "%s%s", settings_table[id].name,
                              left > 1    ? ", "
                              : left == 1 ? " or "
                                          : "");
    }
}

int settings_load(uint64_t values[SETTING_COUNT])
{
    char err[PARSE_ERR_LEN];
    int rc = 0;

    for (int id = 0; id < SETTING_COUNT; id++) {
        const struct setting *s = &settings_table[id];
        const char *text = getenv(s->env);

        values[id] = s->fallback;
        if (!text || !*text || s->kind == SETTING_TEXT ||
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

bool setting_from_env(enum setting_id id)
{
    char err[PARSE_ERR_LEN];
    uint64_t value;
    const char *text = getenv(settings_table[id].env);

    if (id == SETTING_SWITCH_TIME_FIXED &&
        setting_from_env(SETTING_SWITCH_TIME_MODE))
        return true;
    if (settings_table[id].kind == SETTING_TEXT)
        return text != NULL;
    return text && *text && !setting_parse(id, text, &value, err, sizeof(err));
}

const char *setting_text(enum setting_id id)
{
    return getenv(settings_table[id].env);
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
enum { HELP_COL = SETTINGS_HELP_COL, WIDTH = 78 };

/* Prints text's words wrapped at WIDTH, continuation lines indented to
 * column at; col is where the cursor stands. Returns where it ends. */
static int wrap(FILE *out, const char *text, int col, int at)
{
    while (*text) {
        int word = (int)strcspn(text, " ");
        if (col + 1 + word > WIDTH && col > at) {
            fprintf(out, "\n%*s", at, "");
            col = at;
        } else if (col > at) {
            fputc(' ', out);
            col++;
        }
        col += fprintf(out, "%.*s", word, text);
        text += word;
        text += strspn(text, " ");
    }
    return col;
}

/* "(1ms-1h, default auto)" */
static void bounds_text(const struct setting *s, char *buf, size_t len)
{
    char lo[32], hi[32], def[32];

    format_exact(s, s->min, lo, sizeof(lo));
    format_exact(s, s->max, hi, sizeof(hi));
    format_value(s, s->fallback, def, sizeof(def));
    if (s->kind == SETTING_TEXT)
        snprintf(buf, len, "(default %s)", s->text);
    else if ((s->kind == SETTING_INT || s->kind == SETTING_DURATION) &&
             s->max != UINT64_MAX)
        snprintf(buf, len, "(%s-%s, default %s)", lo, hi, def);
    else
        snprintf(buf, len, "(default %s)", def);
}

/* head in the first column, then text wrapped from column at on; returns
 * the column where it ends. */
static int paragraph(FILE *out, int at, const char *head, const char *text)
{
    int col = fprintf(out, "  %s", head);

    if (col >= at) {
        fputc('\n', out);
        col = 0;
    }
    col += fprintf(out, "%*s", at - col, "");
    return wrap(out, text, col, at);
}

void settings_paragraph(FILE *out, int at, const char *head, const char *text)
{
    paragraph(out, at, head, text);
    fputc('\n', out);
}

/* One entry of a usage text: head, then the help and the bounds. */
static void usage_entry(FILE *out, const struct setting *s, const char *head)
{
    char bounds[128];
    int col = paragraph(out, HELP_COL, head, s->help);

    bounds_text(s, bounds, sizeof(bounds));
    wrap(out, bounds, col, HELP_COL);
    fputc('\n', out);
}

void settings_usage(FILE *out)
{
    for (int id = 0; id < SETTING_COUNT; id++)
        usage_entry(out, &settings_table[id], settings_table[id].env);
}

void setting_synopsis_arg(enum setting_id id, char *buf, size_t len)
{
    const struct setting *s = &settings_table[id];
    size_t n = 0;

    buf[0] = '\0';
    switch (s->kind) {
    case SETTING_DURATION:
        n = (size_t)snprintf(buf, len, "<duration>");
        break;
    case SETTING_SIZE:
        n = (size_t)snprintf(buf, len, "<size>");
        break;
    case SETTING_INT:
        n = (size_t)snprintf(buf, len, "<number>");
        break;
    case SETTING_SWITCH:
        n = (size_t)snprintf(buf, len, "on|off");
        break;
    case SETTING_TEXT:
        n = (size_t)snprintf(buf, len, "<text>");
        break;
    case SETTING_ENUM:
        for (int i = 0; s->choices[i] && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "",
                                  s->choices[i]);
        break;
    }
    if ((s->zero_is_auto || s->auto_at_runtime) && n < len)
        snprintf(buf + n, len - n, "|auto");
}

void settings_runtime_help(FILE *out)
{
    char head[128], arg[96];

    for (int id = 0; id < SETTING_COUNT; id++) {
        if (!settings_table[id].runtime)
            continue;
        setting_synopsis_arg(id, arg, sizeof(arg));
        snprintf(head, sizeof(head), "%s %s", settings_table[id].name, arg);
        usage_entry(out, &settings_table[id], head);
        if (settings_table[id].per_gpu) {
            int col = fprintf(out, "    --gpu INDEX|UUID%*s", HELP_COL - 20, "");
            wrap(out,
                 "one GPU (its index in status, or its UUID); every GPU "
                 "without it",
                 col, HELP_COL);
            fputc('\n', out);
        }
    }
}
