/* file.h - reading the small text files the kernel keeps in /proc and
 * /sys (meminfo, a cgroup's limits, a process's stat), whole, at once. */
#ifndef NVSHARE_FILE_H
#define NVSHARE_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Up to size - 1 bytes of path into text, NUL-terminated; false (text
 * untouched) when it cannot be opened. */
bool file_read_text(const char *path, char *text, size_t size);

/* In such a text, what follows `key` on the first line that starts with
 * it ("MemFree:" in meminfo, "inactive_file " in memory.stat), or NULL. */
const char *file_keyed_line(const char *text, const char *key);

#endif
