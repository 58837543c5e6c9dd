/* parse.c - see parse.h. */
#include "parse.h"
#include "protocol.h" /* enum priority_class */

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Kubernetes quantities, as a pod's resources are written: binary
 * suffixes (Ki = 2^10) and decimal ones (k = 10^3; "K" is not one). */
const struct parse_unit parse_quantity_units[] = {
    {"", 1},
    {"Ki", 1ull << 10},
    {"Mi", 1ull << 20},
    {"Gi", 1ull << 30},
    {"Ti", 1ull << 40},
    {"Pi", 1ull << 50},
    {"Ei", 1ull << 60},
    {"k", 1000ull},
    {"M", 1000000ull},
    {"G", 1000000000ull},
    {"T", 1000000000000ull},
    {"P", 1000000000000000ull},
    {"E", 1000000000000000000ull},
    {NULL, 0},
};

static void set_err(char *err, const char *fmt, const char *text)
{
    if (err)
        snprintf(err, PARSE_ERR_LEN, fmt, text);
}

/* Parses "<decimal number><suffix>" exactly: the digits become an integer
 * mantissa and a count of decimal places, so "1.001k" is exactly 1001 bytes
 * and nothing goes through floating point. Only decimal digits and one '.'
 * are accepted (no signs, exponents, hex or spaces). Sets *exact to whether
 * the scaled value is a whole number; the result is rounded to nearest. */
static int parse_scaled(const char *text, const struct parse_unit *units,
                        uint64_t max, uint64_t *out, bool *exact, char *err,
                        const char *what, const char *units_help)
{
    unsigned __int128 mantissa = 0, divisor = 1;
    const char *p = text;
    bool digits = false, point = false;

    if (!text || !*text) {
        set_err(err, "empty %s", what);
        return -1;
    }
    for (; isdigit((unsigned char)*p) || (*p == '.' && !point); p++) {
        if (*p == '.') {
            point = true;
            continue;
        }
        digits = true;
        if (mantissa > (unsigned __int128)max * 10 ||
            divisor > (unsigned __int128)max * 10) {
            if (err)
                snprintf(err, PARSE_ERR_LEN, "%s '%s' is too large", what, text);
            return -1;
        }
        mantissa = mantissa * 10 + (unsigned)(*p - '0');
        if (point)
            divisor *= 10;
    }
    if (!digits) {
        if (err)
            snprintf(err, PARSE_ERR_LEN,
                     "invalid %s '%s': must start with a number", what, text);
        return -1;
    }
    for (const struct parse_unit *u = units; u->suffix; u++) {
        if (strcmp(p, u->suffix) != 0)
            continue;
        unsigned __int128 scaled = mantissa * u->scale;
        unsigned __int128 value = (scaled + divisor / 2) / divisor;
        if (value > max) {
            if (err)
                snprintf(err, PARSE_ERR_LEN, "%s '%s' is too large", what, text);
            return -1;
        }
        *exact = scaled % divisor == 0;
        *out = (uint64_t)value;
        return 0;
    }
    if (err && !*p)
        snprintf(err, PARSE_ERR_LEN, "%s '%s' needs a unit: %s", what, text,
                 units_help);
    else if (err)
        snprintf(err, PARSE_ERR_LEN, "invalid %s '%s': unknown unit '%s': %s",
                 what, text, p, units_help);
    return -1;
}

int parse_duration_ns(const char *text, uint64_t *out, char err[PARSE_ERR_LEN])
{
    /* No bare number: "500" would be read as seconds by some and as
     * milliseconds by others. */
    static const struct parse_unit units[] = {
        {"s", 1000000000ull},
        {"ms", 1000000ull},
        {"us", 1000ull},
        {"ns", 1ull},
        {"m", 60000000000ull},
        {"h", 3600000000000ull},
        {NULL, 0},
    };
    uint64_t ns;
    bool exact;

    /* Ten years is far beyond any sane setting and far below 2^64 ns. */
    if (parse_scaled(text, units, 320000000000000000ull, &ns, &exact, err,
                     "duration", "ns, us, ms, s, m or h, e.g. 500ms, 2s"))
        return -1;
    if (ns == 0) {
        set_err(err, "duration '%s' must be greater than zero", text);
        return -1;
    }
    *out = ns;
    return 0;
}

int parse_size_bytes(const char *text, uint64_t *out, char err[PARSE_ERR_LEN])
{
    uint64_t bytes;
    bool exact;

    /* 2^63: keeps every later sum of sizes from overflowing uint64_t. */
    if (parse_scaled(text, parse_quantity_units, (1ull << 63) - 1, &bytes,
                     &exact, err, "size",
                     "Kubernetes quantities: 4G = 4x10^9 bytes, 4Gi = 4x2^30 "
                     "bytes "
                     "(k M G T P E, Ki Mi Gi Ti Pi Ei)"))
        return -1;
    if (!exact) {
        set_err(err, "size '%s' is not a whole number of bytes", text);
        return -1;
    }
    *out = bytes;
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
            snprintf(err, PARSE_ERR_LEN, "%ld is out of range [%ld, %ld]",
                     value, min, max);
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

    /* Units are chosen after rounding to three digits, so 999.9999 ms is
     * "1s", never "1e+03ms". */
    if (ns == 0)
        snprintf(buf, len, "0s");
    else if (s >= 86400)
        snprintf(buf, len, "%llud%02lluh", s / 86400, s / 3600 % 24);
    else if (s >= 3600)
        snprintf(buf, len, "%lluh%02llum", s / 3600, s / 60 % 60);
    else if (ns >= 59500000000ull)
        snprintf(buf, len, "%llum%02llus", (ns + 500000000ull) / 60000000000ull,
                 (ns + 500000000ull) / 1000000000ull % 60);
    else if (ns >= 999500000ull)
        snprintf(buf, len, "%.3gs", (double)ns / 1e9);
    else if (ns >= 999500ull)
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

/* The largest unit that keeps v exact: 1h, not format_duration's "1h00m";
 * 512Mi, not "512.00 MiB". What it prints parses back to the same value. */
struct exact_unit {
    uint64_t size;
    const char *name;
};

static void format_exact(uint64_t v, const struct exact_unit *u, char *buf,
                         size_t len)
{
    if (v == 0) {
        snprintf(buf, len, "0");
        return;
    }
    while (v % u->size)
        u++;
    snprintf(buf, len, "%llu%s", (unsigned long long)(v / u->size), u->name);
}

void format_duration_exact(uint64_t ns, char *buf, size_t len)
{
    static const struct exact_unit units[] = {{3600000000000ull, "h"},
                                              {60000000000ull, "m"},
                                              {1000000000ull, "s"},
                                              {1000000ull, "ms"},
                                              {1000ull, "us"},
                                              {1, "ns"}};

    format_exact(ns, units, buf, len);
}

void format_size_exact(uint64_t bytes, char *buf, size_t len)
{
    static const struct exact_unit units[] = {{1ull << 40, "Ti"},
                                              {1ull << 30, "Gi"},
                                              {1ull << 20, "Mi"},
                                              {1ull << 10, "Ki"},
                                              {1, ""}};

    format_exact(bytes, units, buf, len);
}

int parse_priority(const char *text, unsigned *out, char err[PARSE_ERR_LEN])
{
    static const char *const names[] = {
        [PRIORITY_LOW] = "low",
        [PRIORITY_NORMAL] = "normal",
        [PRIORITY_HIGH] = "high",
    };
    long number;

    for (unsigned i = PRIORITY_LOW; i <= PRIORITY_HIGH; i++) {
        if (text && !strcasecmp(text, names[i])) {
            *out = i;
            return 0;
        }
    }
    if (!text || parse_int_range(text, PRIORITY_LOWEST, PRIORITY_HIGHEST,
                                 &number, NULL)) {
        set_err(err,
                "priority must be high, normal, low or a class 1-9 "
                "(9 highest), not '%s'",
                text ? text : "");
        return -1;
    }
    *out = (unsigned)number;
    return 0;
}

void format_priority(unsigned priority, char *buf, size_t len)
{
    switch (priority) {
    case PRIORITY_LOW:
        snprintf(buf, len, "low");
        break;
    case PRIORITY_NORMAL:
        snprintf(buf, len, "normal");
        break;
    case PRIORITY_HIGH:
        snprintf(buf, len, "high");
        break;
    default:
        snprintf(buf, len, "%u", priority);
        break;
    }
}
