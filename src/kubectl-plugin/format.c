/* format.c - numbers and states in the few columns 80 allow (plugin.h). */
#include <string.h>

#include "plugin.h"

/* in, cut to width columns on a character boundary ('~' marks a cut). */
void fit(char *out, const char *in, size_t width)
{
    size_t n = strlen(in);

    if (n <= width) {
        memcpy(out, in, n + 1);
        return;
    }
    n = width - 1;
    while (n && ((unsigned char)in[n] & 0xc0) == 0x80)
        n--;
    memcpy(out, in, n);
    strcpy(out + n, "~");
}

void fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char units[][3] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    double v = (double)bytes;
    int u = -1;

    if (bytes < 1024) {
        snprintf(buf, len, "%u", (unsigned)bytes);
        return;
    }
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, v < 10 ? "%.1f%s" : "%.0f%s", v, units[u]);
}

void fmt_ns(uint64_t ns, char *buf, size_t len)
{
    uint64_t s = ns / 1000000000ull;

    if (s == 0)
        snprintf(buf, len, "%ums", (unsigned)(ns / 1000000ull));
    else if (s < 120)
        snprintf(buf, len, "%us", (unsigned)s);
    else if (s < 7200)
        snprintf(buf, len, "%um", (unsigned)(s / 60));
    else if (s < 172800)
        snprintf(buf, len, "%uh", (unsigned)(s / 3600));
    else
        snprintf(buf, len, "%ud", (unsigned)(s / 86400));
}

void fmt_pod(const struct st_client *c, char *buf, size_t len)
{
    if (c->pod[0])
        snprintf(buf, len, "%s/%s", c->ns[0] ? c->ns : "default", c->pod);
    else
        snprintf(buf, len, "pid %u (no pod)", (unsigned)c->pid);
}

const char *client_doing(const struct st_client *c)
{
    if (!strcmp(c->state, "holding") || !strcmp(c->state, "draining"))
        return "running";
    if (!strcmp(c->state, "waiting")) {
        if (!strcmp(c->wait_reason, "throttled"))
            return "throttled";
        if (!strcmp(c->wait_reason, "priority"))
            return "wait:prio";
        if (!strcmp(c->wait_reason, "memory"))
            return "wait:mem";
        return "wait:turn";
    }
    return c->swapped_out ? "swapped" : "idle";
}
