/* grow.h - tables that grow: one helper for every module that keeps some. */
#ifndef NVSHARE_GROW_H
#define NVSHARE_GROW_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Resizes the array that `array` points to (a T **) from old to new
 * entries of size bytes, the new ones zero. On failure the array is left
 * as it was, still valid, and false returned. */
static inline bool grow_zeroed(void *array, size_t size, int old, int new)
{
    void **a = array;
    char *grown = realloc(*a, size * (size_t) new);

    if (!grown)
        return false;
    memset(grown + size * (size_t)old, 0, size * (size_t)(new - old));
    *a = grown;
    return true;
}

#endif
