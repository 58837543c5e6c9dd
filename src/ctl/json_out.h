/* json_out.h - a small, output-only JSON writer (cJSON is not available
 * everywhere nvsharectl must build).
 *
 * Calls mirror the document: begin/end an object or array, and emit values.
 * Inside an object every call names its key; at the top level and inside
 * arrays the key is NULL. Commas, indentation and string escaping are the
 * writer's business. Strings are arbitrary bytes from the wire: control
 * characters are escaped and invalid UTF-8 becomes U+FFFD, so the output is
 * always valid JSON. Write errors surface through ferror(out). */
#ifndef NVSHARE_JSON_OUT_H
#define NVSHARE_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_out {
    FILE *out;
    int depth;
    bool has_items[JSON_MAX_DEPTH]; /* a comma is due before the next item */
};

void json_init(struct json_out *j, FILE *out);
void json_begin_object(struct json_out *j, const char *key);
void json_end_object(struct json_out *j);
void json_begin_array(struct json_out *j, const char *key);
void json_end_array(struct json_out *j);
void json_string(struct json_out *j, const char *key, const char *value);
void json_uint(struct json_out *j, const char *key, uint64_t value);
void json_bool(struct json_out *j, const char *key, bool value);
void json_null(struct json_out *j, const char *key);
/* value, or null where it is empty: a field the record does not have. */
void json_string_or_null(struct json_out *j, const char *key, const char *value);
/* value / 10^decimals as a JSON number, without trailing zeros: (235, 1)
 * is 23.5, (230, 1) is 23. */
void json_decimal(struct json_out *j, const char *key, uint64_t value,
                  unsigned decimals);

/* Writes s as a JSON string literal, quotes included. */
void json_write_string(FILE *out, const char *s);

#endif
