/* text.c - see text.h. */
#include "text.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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

uint32_t utf8_decode(const unsigned char *s, int n)
{
    static const unsigned char lead_bits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = s[0] & lead_bits[n];

    for (int i = 1; i < n; i++)
        cp = cp << 6 | (s[i] & 0x3f);
    return cp;
}

const char *json_escape_char(const unsigned char *s, char esc[TEXT_ESC_MAX],
                             size_t *n, size_t *used)
{
    static const char plain[] = "\"\\\n\r\t\b\f", named[] = "\"\\nrtbf";
    int seq = utf8_seq_len(s);
    const char *c = seq == 1 ? strchr(plain, *s) : NULL;

    *used = seq ? (size_t)seq : 1;
    if (seq == 0) {
        strcpy(esc, "\\ufffd");
    } else if (c) {
        esc[0] = '\\';
        esc[1] = named[c - plain];
        esc[2] = '\0';
    } else if (seq > 1 || (*s >= 0x20 && *s != 0x7f)) {
        *n = (size_t)seq;
        return (const char *)s;
    } else {
        snprintf(esc, TEXT_ESC_MAX, "\\u%04x", *s);
    }
    *n = strlen(esc);
    return esc;
}

size_t text_printable(const char *in, char *out, size_t size)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;

    while (*p) {
        int n = utf8_seq_len(p);
        /* C0, DEL, C1 (U+0080..U+009F: 0xC2 0x80..0x9F) and broken bytes */
        bool bad = n == 0 || *p < 0x20 || *p == 0x7f ||
                   (n == 2 && p[0] == 0xc2 && p[1] < 0xa0);
        size_t w = bad ? 1 : (size_t)n;

        if (o + w >= size)
            break;
        if (bad)
            out[o] = '?';
        else
            memcpy(out + o, p, w);
        o += w;
        p += n ? n : 1;
    }
    if (size)
        out[o] = '\0';
    return o;
}
