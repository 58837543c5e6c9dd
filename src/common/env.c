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

/* Whether a parser refused the variable's value (rc != 0): then it says
 * so, once, and the caller keeps its fallback. */
static bool refused(const char *name, int rc, const char *err)
{
    if (rc)
        log_warn("ignoring %s: %s", name, err);
    return rc != 0;
}

uint64_t env_duration_ns(const char *name, uint64_t fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    uint64_t ns;

    return text && !refused(name, parse_duration_ns(text, &ns, err), err)
               ? ns
               : fallback;
}

uint64_t env_size_bytes(const char *name, uint64_t fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    uint64_t bytes;

    return text && !refused(name, parse_size_bytes(text, &bytes, err), err)
               ? bytes
               : fallback;
}

long env_int_range(const char *name, long min, long max, long fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    long value;

    return text && !refused(name, parse_int_range(text, min, max, &value, err),
                            err)
               ? value
               : fallback;
}

bool env_switch(const char *name, bool fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    int on;

    return text && !refused(name, parse_switch(text, &on, err), err) ? on
                                                                     : fallback;
}

unsigned env_priority(const char *name, unsigned fallback)
{
    const char *text = env_value(name);
    char err[PARSE_ERR_LEN];
    unsigned priority;

    return text && !refused(name, parse_priority(text, &priority, err), err)
               ? priority
               : fallback;
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
