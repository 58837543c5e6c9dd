/* file.h - reading the small text files the kernel keeps in /proc and
 * /sys (meminfo, a cgroup's limits, a process's stat), whole, at once. */
#ifndef NVSHARE_FILE_H
#define NVSHARE_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Up to size - 1 bytes of path into text, NUL-terminated; false (text
 * untouched) when it cannot be opened. */
bool file_read_text(const char *path, char *text, size_t size);

#endif
