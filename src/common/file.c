/* file.c - see file.h. */
#include "file.h"

#include <stdio.h>

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
