/* test_text.c - the one UTF-8 checker and JSON escaper (src/common/text.c)
 * that the log and nvsharectl share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "text.h"

static int seq_len(const char *s)
{
    return utf8_seq_len((const unsigned char *)s);
}

static void test_utf8_valid(void **state)
{
    (void)state;
    assert_int_equal(seq_len("a"), 1);
    assert_int_equal(seq_len("\xc3\xa9"), 2);         /* U+00E9 */
    assert_int_equal(seq_len("\xe2\x80\xae"), 3);     /* U+202E */
    assert_int_equal(seq_len("\xf0\x9f\x98\x80"), 4); /* U+1F600 */
    assert_int_equal(seq_len("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
    assert_int_equal(utf8_decode((const unsigned char *)"\xe2\x80\xae", 3),
                     0x202e);
}

/* Overlong forms, surrogates, code points past U+10FFFF, stray and cut
 * sequences are not text. */
static void test_utf8_invalid(void **state)
{
    static const char *const bad[] = {
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xf0\x80\x80\xaf", /* overlong, 4 bytes */
        "\xed\xa0\x80",     /* U+D800, a surrogate */
        "\xf4\x90\x80\x80", /* U+110000 */
        "\x80",             /* a continuation byte alone */
        "\xe2\x80",         /* cut short by the NUL */
        "\xff",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (seq_len(bad[i]) != 0)
            fail_msg("case %zu: length %d, want 0", i, seq_len(bad[i]));
}

/* The JSON string of s, built from json_escape_char. */
static void escape(const char *s, char *out)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char esc[TEXT_ESC_MAX];
        size_t n, used;
        const char *bytes = json_escape_char(p, esc, &n, &used);

        memcpy(out, bytes, n);
        out += n;
        p += used;
    }
    *out = '\0';
}

static void test_json_escape(void **state)
{
    char out[128];

    (void)state;
    escape("plain é \xe2\x80\xae", out);
    assert_string_equal(out, "plain é \xe2\x80\xae");
    escape("\"q\" \\ \n\r\t\b\f", out);
    assert_string_equal(out, "\\\"q\\\" \\\\ \\n\\r\\t\\b\\f");
    escape("\x01\x1b\x7f", out);
    assert_string_equal(out, "\\u0001\\u001b\\u007f");
    /* each byte of a broken sequence becomes one U+FFFD */
    escape("a\xed\xa0\x80z", out);
    assert_string_equal(out, "a\\ufffd\\ufffd\\ufffdz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_utf8_invalid),
        cmocka_unit_test(test_json_escape),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
