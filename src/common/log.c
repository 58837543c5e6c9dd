/* log.c - see log.h. Lines are formatted into a stack buffer and written with
 * one write(2) so that concurrent threads and processes do not interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_component = "nvshare";
static bool debug_enabled;

void log_init(const char *component)
{
    const char *debug = getenv("NVSHARE_DEBUG");

    log_component = component;
    debug_enabled = debug && strcmp(debug, "0") != 0 && debug[0] != '\0';
}

bool log_debug_enabled(void)
{
    return debug_enabled;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char line[1024];
    va_list ap;
    int len;

    len = snprintf(line, sizeof(line), "nvshare[%s %d] %s: ", log_component,
                   (int)getpid(), names[level]);
    va_start(ap, fmt);
    len += vsnprintf(line + len, sizeof(line) - (size_t)len, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof(line) - 1)
        len = (int)sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)len);
    (void)ignored;
}
