/* log.h - one-line diagnostics for every nvshare component.
 *
 * Every line is prefixed "nvshare[<component> <pid>]: " so that lines from the
 * interposer, which share stderr with the host application, are unmistakable.
 * Logging never allocates and never fails loudly: a diagnostic must not be able
 * to hurt the process that emits it. */
#ifndef NVSHARE_LOG_H
#define NVSHARE_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the component name and reads NVSHARE_DEBUG (1 enables debug lines). */
void log_init(const char *component);
bool log_debug_enabled(void);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
    do {                                                                       \
        if (log_debug_enabled())                                               \
            log_msg(LOG_DEBUG, __VA_ARGS__);                                   \
    } while (0)

#endif
