/* text.h - UTF-8 checking and JSON string escaping: what counts as valid
 * text and how a string is quoted, defined once for the log (log.c) and
 * nvsharectl (json_out.c, render_table.c).
 *
 * Nothing here allocates or locks: log.c calls it while formatting a line
 * that must not fail. */
#ifndef NVSHARE_TEXT_H
#define NVSHARE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence that starts at s (1-4), or 0 if the
 * bytes there are not one: overlong forms, surrogates and code points above
 * U+10FFFF are refused. Stops at a NUL. */
int utf8_seq_len(const unsigned char *s);

/* The code point of the n-byte sequence at s, valid per utf8_seq_len. */
uint32_t utf8_decode(const unsigned char *s, int n);

/* Room for any escape text_escape functions write, NUL included. */
#define TEXT_ESC_MAX 8

/* How the character at s (not a NUL) goes inside a JSON string: quotes,
 * backslashes and control characters escaped, a byte that starts no valid
 * UTF-8 sequence as \ufffd. Returns the bytes to write, either esc (filled)
 * or s itself, with their count in *n; *used is how many bytes of s they
 * stand for (at least 1). */
const char *json_escape_char(const unsigned char *s, char esc[TEXT_ESC_MAX],
                             size_t *n, size_t *used);

/* Copies in to out (size bytes, NUL included) fit for a terminal: control
 * characters and broken UTF-8 become '?'; a sequence that does not fit
 * whole is left out. Names come from tenants: nothing of theirs reaches a
 * terminal without this. Returns the length written. */
size_t text_printable(const char *in, char *out, size_t size);

#endif
