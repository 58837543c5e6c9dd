/* file.c - see file.h. */
#include "file.h"

#include <stdio.h>
#include <string.h>

bool file_read_text(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f)
        return false;
    n = fread(text, 1, size - 1, f);
    fclose(f);
    text[n] = '\0';
    return true;
}

const char *file_keyed_line(const char *text, const char *key)
{
    size_t len = strlen(key);

    for (const char *line = text; line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, len) == 0)
            return line + len;
    }
    return NULL;
}
