/* json_out.c - see json_out.h. Pretty-printed with two-space indents, one
 * member per line, so that the output also reads well and diffs well. */
#include "json_out.h"

#include <inttypes.h>

#include "text.h"

void json_init(struct json_out *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->has_items[0] = false;
}

void json_write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char esc[TEXT_ESC_MAX];
        size_t n, used;
        const char *bytes = json_escape_char(p, esc, &n, &used);

        fwrite(bytes, 1, n, out);
        p += used;
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

void json_begin_object(struct json_out *j, const char *key)
{
    begin(j, key, '{');
}
void json_end_object(struct json_out *j)
{
    end(j, '}');
}
void json_begin_array(struct json_out *j, const char *key)
{
    begin(j, key, '[');
}
void json_end_array(struct json_out *j)
{
    end(j, ']');
}

void json_string(struct json_out *j, const char *key, const char *value)
{
    item(j, key);
    json_write_string(j->out, value);
}

void json_string_or_null(struct json_out *j, const char *key, const char *value)
{
    if (value[0])
        json_string(j, key, value);
    else
        json_null(j, key);
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
