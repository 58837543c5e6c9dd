/* parse.h - the one place where operator-supplied values become numbers.
 *
 * Every parser returns 0 on success and -1 on bad input, in which case it
 * leaves *out untouched and writes a human sentence into err (if err is not
 * NULL). Nothing here accepts trailing garbage, negative numbers or silent
 * overflow: "4Gx", "-1", "" and "99999999999999999999Gi" are all errors. */
#ifndef NVSHARE_PARSE_H
#define NVSHARE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define PARSE_ERR_LEN 160

/* A unit's suffix and how many of the base unit it is. */
struct parse_unit {
    const char *suffix;
    uint64_t scale;
};

/* The suffixes of Kubernetes quantities, "" (none) among them; the list
 * ends with a NULL suffix. */
extern const struct parse_unit parse_quantity_units[];

/* Durations: "30s", "100ms", "250us", "1.5s", "2m"; a bare number is
 * refused (it needs a unit). The result is in nanoseconds and must be > 0. */
int parse_duration_ns(const char *text, uint64_t *out, char err[PARSE_ERR_LEN]);

/* Memory sizes as Kubernetes quantities: plain bytes, or a number with a
 * binary suffix (Ki Mi Gi Ti Pi Ei: 4Gi = 4x2^30) or a decimal one (k M G
 * T P E: 4G = 4x10^9), e.g. "4Gi", "4096Mi", "512M". */
int parse_size_bytes(const char *text, uint64_t *out, char err[PARSE_ERR_LEN]);

/* An integer within [min, max]. */
int parse_int_range(const char *text, long min, long max, long *out,
                    char err[PARSE_ERR_LEN]);

/* A priority class (enum priority_class in protocol.h): "high", "normal",
 * "low" or an integer from 1 (lowest) to 9 (highest); low = 1, normal = 2,
 * high = 3. */
int parse_priority(const char *text, unsigned *out, char err[PARSE_ERR_LEN]);

/* "high", "normal", "low", or the class's number for the others. */
void format_priority(unsigned priority, char *buf, size_t len);

/* "on"/"off" (also 1/0, true/false, yes/no). */
int parse_switch(const char *text, int *out, char err[PARSE_ERR_LEN]);

/* Formats a duration for people: "100ms", "1.25s", "2m05s", "3h07m". */
void format_duration(uint64_t ns, char *buf, size_t len);

/* Formats a byte count for people: "4.00 GiB". */
void format_size(uint64_t bytes, char *buf, size_t len);

/* As the operator would write them, exact, so they parse back: "1h",
 * "250ms", "512Mi", "1000" (bytes). */
void format_duration_exact(uint64_t ns, char *buf, size_t len);
void format_size_exact(uint64_t bytes, char *buf, size_t len);

#endif
