/* json_out.c - see json_out.h. Pretty-printed with two-space indents, one
 * member per line, so that the output also reads well and diffs well. */
#include "json_out.h"

#include <inttypes.h>

void json_init(struct json_out *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->has_items[0] = false;
}

/* Rejects overlong forms, surrogates and code points above U+10FFFF. */
int utf8_seq_len(const unsigned char *s)
{
    int n;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void json_write_string(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', out);
    while (*p) {
        int n = utf8_seq_len(p);

        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, (size_t)n, out);
            p += n;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
        p++;
    }
    fputc('"', out);
}

/* Starts an item: the comma after its predecessor, a new line, the indent
 * and the key. */
static void item(struct json_out *j, const char *key)
{
    if (j->depth > 0) {
        fputs(j->has_items[j->depth] ? ",\n" : "\n", j->out);
        fprintf(j->out, "%*s", 2 * j->depth, "");
    }
    j->has_items[j->depth] = true;
    if (key) {
        json_write_string(j->out, key);
        fputs(": ", j->out);
    }
}

static void begin(struct json_out *j, const char *key, char open)
{
    item(j, key);
    fputc(open, j->out);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = false;
}

static void end(struct json_out *j, char close)
{
    bool had = j->has_items[j->depth];

    if (j->depth > 0)
        j->depth--;
    if (had)
        fprintf(j->out, "\n%*s", 2 * j->depth, "");
    fputc(close, j->out);
    if (j->depth == 0)
        fputc('\n', j->out);
}

void json_begin_object(struct json_out *j, const char *key) { begin(j, key, '{'); }
void json_end_object(struct json_out *j) { end(j, '}'); }
void json_begin_array(struct json_out *j, const char *key) { begin(j, key, '['); }
void json_end_array(struct json_out *j) { end(j, ']'); }

void json_string(struct json_out *j, const char *key, const char *value)
{
    item(j, key);
    json_write_string(j->out, value);
}

void json_uint(struct json_out *j, const char *key, uint64_t value)
{
    item(j, key);
    fprintf(j->out, "%" PRIu64, value);
}

void json_bool(struct json_out *j, const char *key, bool value)
{
    item(j, key);
    fputs(value ? "true" : "false", j->out);
}

void json_null(struct json_out *j, const char *key)
{
    item(j, key);
    fputs("null", j->out);
}

void json_decimal(struct json_out *j, const char *key, uint64_t value,
                  unsigned decimals)
{
    uint64_t scale = 1;

    for (unsigned i = 0; i < decimals && i < 19; i++)
        scale *= 10;
    item(j, key);
    fprintf(j->out, "%" PRIu64, value / scale);
    uint64_t frac = value % scale;
    if (!frac)
        return;
    while (frac % 10 == 0) {
        frac /= 10;
        scale /= 10;
    }
    /* digits of frac, zero-padded to those of scale - 1 */
    int width = 0;
    for (uint64_t s = scale; s > 1; s /= 10)
        width++;
    fprintf(j->out, ".%0*" PRIu64, width, frac);
}
