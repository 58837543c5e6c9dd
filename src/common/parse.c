/* parse.c - see parse.h. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
    const char *suffix;
    double scale;
};

static void set_err(char *err, const char *fmt, const char *text)
{
    if (err)
        snprintf(err, PARSE_ERR_LEN, fmt, text);
}

/* Splits "<decimal number><suffix>" and looks the suffix up in units.
 * Used by both duration and size parsing so the rules are identical. */
static int parse_scaled(const char *text, const struct unit *units,
                        double max, double *out, char *err, const char *what)
{
    char *end;
    double value;

    if (!text || !*text) {
        set_err(err, "empty %s", what);
        return -1;
    }
    if (!isdigit((unsigned char)text[0]) && text[0] != '.') {
        if (err)
            snprintf(err, PARSE_ERR_LEN, "invalid %s '%s': must start with a digit",
                     what, text);
        return -1;
    }
    errno = 0;
    value = strtod(text, &end);
    if (errno || end == text || !isfinite(value)) {
        if (err)
            snprintf(err, PARSE_ERR_LEN, "invalid %s '%s'", what, text);
        return -1;
    }
    for (const struct unit *u = units; u->suffix; u++) {
        if (strcmp(end, u->suffix) != 0)
            continue;
        value *= u->scale;
        if (value > max) {
            if (err)
                snprintf(err, PARSE_ERR_LEN, "%s '%s' is too large", what, text);
            return -1;
        }
        *out = value;
        return 0;
    }
    if (err)
        snprintf(err, PARSE_ERR_LEN, "invalid %s '%s': unknown unit '%s'", what,
                 text, end);
    return -1;
}

int parse_duration_ns(const char *text, uint64_t *out, char err[PARSE_ERR_LEN])
{
    static const struct unit units[] = {
        {"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3},
        {"ns", 1}, {"m", 60e9}, {"h", 3600e9}, {NULL, 0},
    };
    double ns;

    /* Ten years is far beyond any sane setting and far below 2^64 ns. */
    if (parse_scaled(text, units, 3.2e17, &ns, err, "duration"))
        return -1;
    if (ns < 1) {
        set_err(err, "duration '%s' must be greater than zero", text);
        return -1;
    }
    *out = (uint64_t)llround(ns);
    return 0;
}

int parse_size_bytes(const char *text, uint64_t *out, char err[PARSE_ERR_LEN])
{
    static const struct unit units[] = {
        {"", 1},
        {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
        {"Ti", 1099511627776.0},
        {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
        {NULL, 0},
    };
    double bytes;

    /* 2^63: keeps every later sum of sizes from overflowing uint64_t. */
    if (parse_scaled(text, units, 9.2e18, &bytes, err, "size"))
        return -1;
    if (bytes != floor(bytes)) {
        set_err(err, "size '%s' is not a whole number of bytes", text);
        return -1;
    }
    *out = (uint64_t)bytes;
    return 0;
}

int parse_int_range(const char *text, long min, long max, long *out,
                    char err[PARSE_ERR_LEN])
{
    char *end;
    long value;

    if (!text || !*text) {
        set_err(err, "empty number%s", "");
        return -1;
    }
    errno = 0;
    value = strtol(text, &end, 10);
    if (errno || *end != '\0' || isspace((unsigned char)text[0])) {
        set_err(err, "invalid number '%s'", text);
        return -1;
    }
    if (value < min || value > max) {
        if (err)
            snprintf(err, PARSE_ERR_LEN, "%ld is out of range [%ld, %ld]", value,
                     min, max);
        return -1;
    }
    *out = value;
    return 0;
}

int parse_switch(const char *text, int *out, char err[PARSE_ERR_LEN])
{
    static const char *const on[] = {"on", "1", "true", "yes", NULL};
    static const char *const off[] = {"off", "0", "false", "no", NULL};

    for (int i = 0; text && on[i]; i++) {
        if (strcasecmp(text, on[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(text, off[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    set_err(err, "expected on or off, got '%s'", text ? text : "");
    return -1;
}

void format_duration(uint64_t ns, char *buf, size_t len)
{
    unsigned long long s = ns / 1000000000ull;

    if (ns == 0)
        snprintf(buf, len, "0s");
    else if (s >= 86400)
        snprintf(buf, len, "%llud%02lluh", s / 86400, s / 3600 % 24);
    else if (s >= 3600)
        snprintf(buf, len, "%lluh%02llum", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, len, "%llum%02llus", s / 60, s % 60);
    else if (ns >= 1000000000ull)
        snprintf(buf, len, "%.3gs", (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(buf, len, "%.3gms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.3gus", (double)ns / 1e3);
}

void format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = (double)bytes;
    int u = 0;

    while (value >= 1024 && u < 4) {
        value /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", value, units[u]);
}
