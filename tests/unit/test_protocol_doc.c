/* test_protocol_doc.c - docs/protocol.md's payload tables agree with
 * protocol.def.
 *
 * Under "## Payloads" each payload has a "### " heading naming the messages
 * that carry it (or, for a list item, its struct) and a table whose first
 * three columns are field, wire type and range; the fourth, the meaning, is
 * the reader's. The test renders the same three columns from protocol.def
 * and compares them row by row, and checks that every message with a
 * payload and every record is documented exactly once. On a mismatch it
 * prints the rows the table should have. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol.h"

#define MAX_PAYLOADS 32
#define LAYOUT_MAX 8192

/* One payload or record: its key (union member or record struct) and its
 * rows as "field | wire | range" lines. */
struct layout {
    const char *key;
    char rows[LAYOUT_MAX];
    int documented;
};

static struct layout layouts[MAX_PAYLOADS];
static int n_layouts;

static void begin(const char *key)
{
    assert_true(n_layouts < MAX_PAYLOADS);
    layouts[n_layouts++].key = key;
}

static void row(const char *field, const char *wire, const char *range)
{
    struct layout *l = &layouts[n_layouts - 1];
    size_t len = strlen(l->rows);

    snprintf(l->rows + len, sizeof(l->rows) - len, "%s | %s | %s\n", field,
             wire, range);
}

static const char *upto(unsigned long long max)
{
    static char buf[32];

    snprintf(buf, sizeof(buf), "0-%llu", max);
    return buf;
}

static const char *at_most(unsigned long long max, const char *unit)
{
    static char buf[32];

    snprintf(buf, sizeof(buf), "<= %llu%s", max, unit);
    return buf;
}

#define WIRE_U8 "u8"
#define WIRE_U16 "u16"
#define WIRE_U32 "u32"
#define WIRE_U64 "u64"
#define WIRE_I32 "i32"
#define RANGE_ANY ""
#define RANGE_UPTO(max) upto(max)
#define RANGE_UPTO_FIELD(field) "<= " #field

static void render(void)
{
    n_layouts = 0;
#define PROTO_PAYLOAD(type, member)                                            \
    {                                                                          \
        const struct type *m = NULL;                                           \
        (void)m;                                                               \
        begin(#member);
#define PROTO_RECORD(type)                                                     \
    {                                                                          \
        const struct type *m = NULL;                                           \
        (void)m;                                                               \
        begin(#type);
#define PROTO_END() }
#define PROTO_FIELD(kind, name, bound) row(#name, WIRE_##kind, RANGE_##bound);
#define PROTO_STR(name, size) row(#name, "str", at_most((size)-1, " bytes"));
#define PROTO_COUNT(name, list)                                                \
    row(#name, "u16", at_most(sizeof(m->list) / sizeof(m->list[0]), ""));
#define PROTO_LIST(kind, name, count, capacity)                                \
    row(#name, WIRE_##kind "[" #count "]", "");
#define PROTO_STR_LIST(name, count, capacity, size)                            \
    row(#name, "str[" #count "]", at_most((size)-1, " bytes each"));
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    row(#name, #record "[" #count "]", "");
#include "protocol.def"
}

static struct layout *find_layout(const char *key)
{
    for (int i = 0; i < n_layouts; i++)
        if (strcmp(layouts[i].key, key) == 0)
            return &layouts[i];
    return NULL;
}

/* The payload a message name carries, NULL for none or an unknown name. */
static const char *payload_of(const char *msg)
{
#define PROTO_MSG(name, number, payload)                                       \
    if (strcmp(msg, #name) == 0)                                               \
        return #payload;
#include "protocol.def"
    return NULL;
}

static char *trim(char *s)
{
    char *end;

    while (*s == ' ')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\n'))
        *--end = '\0';
    return s;
}

/* "| a | b | c | meaning |" -> "a | b | c\n" appended to out. */
static void doc_row(char *line, char *out, size_t cap)
{
    char *cells[3];
    char *p = line + 1;

    for (int i = 0; i < 3; i++) {
        char *bar = strchr(p, '|');
        assert_non_null(bar);
        *bar = '\0';
        cells[i] = trim(p);
        p = bar + 1;
    }
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s | %s | %s\n", cells[0], cells[1],
             cells[2]);
}

/* Checks one documented payload: heading names its messages or a record. */
static int check_heading(char *heading, const char *rows)
{
    struct layout *l = NULL;
    int bad = 0;
    char *save, *name;

    for (name = strtok_r(heading, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        name = trim(name);
        const char *key = payload_of(name);
        struct layout *this = find_layout(key ? key : name);
        if (!this) {
            fprintf(stderr,
                    "### %s: not a message with a payload nor a "
                    "record of protocol.def\n",
                    name);
            return 1;
        }
        if (l && this != l) {
            fprintf(stderr,
                    "### %s: carries %s, not %s like the others "
                    "under its heading\n",
                    name, this->key, l->key);
            return 1;
        }
        l = this;
    }
    assert_non_null(l);
    l->documented++;
    if (strcmp(l->rows, rows) != 0) {
        fprintf(stderr,
                "payload %s: docs/protocol.md has\n%s\nprotocol.def "
                "says\n%s\n",
                l->key, rows, l->rows);
        bad = 1;
    }
    return bad;
}

static void test_payload_tables_match(void **state)
{
    static char rows[LAYOUT_MAX];
    char line[4096], heading[512] = "";
    int in_section = 0, bad = 0;
    FILE *f = fopen(PROTOCOL_DOC, "r");

    (void)state;
    assert_non_null(f);
    render();
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "## ", 3) == 0) {
            in_section = strcmp(trim(line), "## Payloads") == 0;
            continue;
        }
        if (!in_section)
            continue;
        if (strncmp(line, "### ", 4) == 0) {
            if (heading[0])
                bad |= check_heading(heading, rows);
            snprintf(heading, sizeof(heading), "%s", trim(line + 4));
            rows[0] = '\0';
        } else if (heading[0] && line[0] == '|' &&
                   strncmp(line, "| field", 7) != 0 &&
                   strncmp(line, "| ---", 5) != 0) {
            doc_row(line, rows, sizeof(rows));
        }
    }
    fclose(f);
    if (heading[0])
        bad |= check_heading(heading, rows);
    for (int i = 0; i < n_layouts; i++) {
        if (layouts[i].documented != 1) {
            fprintf(stderr, "payload %s is documented %d times, not once:\n%s",
                    layouts[i].key, layouts[i].documented, layouts[i].rows);
            bad = 1;
        }
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_tables_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
