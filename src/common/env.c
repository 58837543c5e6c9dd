/* env.c - see env.h. */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "parse.h"
#include "protocol.h"

static const char *env_value(const char *name)
{
    const char *value = getenv(name);

    return value && *value ? value : NULL;
}

uint64_t env_duration_ns(const char *name, uint64_t fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    uint64_t ns;

    if (!text)
        return fallback;
    if (parse_duration_ns(text, &ns, err)) {
        log_warn("ignoring %s: %s", name, err);
        return fallback;
    }
    return ns;
}

uint64_t env_size_bytes(const char *name, uint64_t fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    uint64_t bytes;

    if (!text)
        return fallback;
    if (parse_size_bytes(text, &bytes, err)) {
        log_warn("ignoring %s: %s", name, err);
        return fallback;
    }
    return bytes;
}

long env_int_range(const char *name, long min, long max, long fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    long value;

    if (!text)
        return fallback;
    if (parse_int_range(text, min, max, &value, err)) {
        log_warn("ignoring %s: %s", name, err);
        return fallback;
    }
    return value;
}

bool env_switch(const char *name, bool fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    int on;

    if (!text)
        return fallback;
    if (parse_switch(text, &on, err)) {
        log_warn("ignoring %s: %s", name, err);
        return fallback;
    }
    return on;
}

const char *env_sock_dir(void)
{
    const char *dir = env_value("NVSHARE_SOCK_DIR");

    return dir ? dir : DEFAULT_SOCK_DIR;
}

int socket_path(const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s", env_sock_dir(), name);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}
