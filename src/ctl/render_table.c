/* render_table.c - `nvsharectl status`: the snapshot as aligned tables for
 * people (kubectl style: upper-case headers, columns two spaces apart).
 *
 * Pod, namespace and container names come from whatever registered with the
 * scheduler, i.e. from any local user: they are printed with control
 * characters and invalid UTF-8 replaced by '?', so that a name cannot move
 * the operator's cursor or rewrite their terminal. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "json_out.h"
#include "parse.h"

#define TABLE_MAX_COLS 16
#define CELL_LEN 600 /* namespace/pod: two names of at most 253 bytes */

struct table {
    int n_cols;
    size_t width[TABLE_MAX_COLS];
    char **cells; /* n_rows * n_cols, row 0 is the header */
    int n_rows, cap_rows;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fputs("nvsharectl: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

/* Copies text into a fresh string fit for a terminal (see the top). */
static char *printable(const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    char *out = xrealloc(NULL, strlen(text) + 1), *o = out;

    while (*p) {
        int n = utf8_seq_len(p);
        /* C0, DEL, C1 (U+0080..U+009F: 0xC2 0x80..0x9F) and broken bytes */
        if (n == 0 || *p < 0x20 || *p == 0x7f ||
            (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
            *o++ = '?';
            p += n ? n : 1;
            continue;
        }
        memcpy(o, p, (size_t)n);
        o += n;
        p += n;
    }
    *o = '\0';
    return out;
}

/* Display width, counting code points (no East Asian wide forms). */
static size_t text_width(const char *s)
{
    size_t w = 0;

    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void table_row(struct table *t, const char *const *cells)
{
    if (t->n_rows == t->cap_rows) {
        t->cap_rows = t->cap_rows ? 2 * t->cap_rows : 8;
        t->cells = xrealloc(t->cells, (size_t)t->cap_rows * (size_t)t->n_cols *
                                          sizeof(*t->cells));
    }
    for (int c = 0; c < t->n_cols; c++) {
        char *cell = printable(cells[c]);
        size_t w = text_width(cell);
        t->cells[t->n_rows * t->n_cols + c] = cell;
        if (w > t->width[c])
            t->width[c] = w;
    }
    t->n_rows++;
}

/* Prints and frees the table. The last column is not padded. */
static void table_flush(FILE *out, struct table *t)
{
    for (int r = 0; r < t->n_rows; r++) {
        for (int c = 0; c < t->n_cols; c++) {
            char *cell = t->cells[r * t->n_cols + c];
            if (c == t->n_cols - 1)
                fprintf(out, "%s\n", cell);
            else
                fprintf(out, "%s%*s", cell,
                        (int)(t->width[c] - text_width(cell) + 2), "");
            free(cell);
        }
    }
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

/* "namespace/pod", "pod", or "-" for a client outside Kubernetes. */
static void pod_label(const struct msg_status_client *c, char *buf, size_t len)
{
    if (c->pod_namespace[0] && c->pod_name[0])
        snprintf(buf, len, "%s/%s", c->pod_namespace, c->pod_name);
    else
        snprintf(buf, len, "%s", c->pod_name[0] ? c->pod_name : "-");
}

static void gpu_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[] = {"GPU", "UUID", "NAME", "MEMORY",
                                         "HOLDER", "DRAINING", "SWITCHES",
                                         "QUEUE"};
    struct table t = {.n_cols = 8};

    table_row(&t, header);
    for (int i = 0; i < st->n_gpus; i++) {
        const struct msg_status_gpu *g = &st->gpus[i];
        const struct msg_status_client *h = ctl_status_holder(st, g);
        char index[8], mem[32], holder[CELL_LEN + 24], pod[CELL_LEN],
            switches[24], queue[PROTO_MAX_WAITERS * 21 + 1] = "-";
        size_t used = 0;

        snprintf(index, sizeof(index), "%u", g->index);
        format_size(g->memory_total, mem, sizeof(mem));
        if (!g->holder_id) {
            snprintf(holder, sizeof(holder), "free");
        } else {
            pod[0] = '\0';
            if (h)
                pod_label(h, pod, sizeof(pod));
            snprintf(holder, sizeof(holder), "%" PRIu64 "%s%s", g->holder_id,
                     h ? " " : "", pod);
        }
        snprintf(switches, sizeof(switches), "%" PRIu64, g->switches);
        for (int w = 0; w < g->n_waiting; w++)
            used += (size_t)snprintf(queue + used, sizeof(queue) - used,
                                     "%s%" PRIu64, w ? "," : "", g->waiting[w]);
        const char *row[] = {index, g->uuid, g->name, mem, holder,
                             g->holder_id ? (g->holder_draining ? "yes" : "no") : "-",
                             switches, queue};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

/* "40%", or "80%=50.0%" when limits above 100 % in sum are scaled down. */
static void limit_label(const struct msg_status_client *c, uint64_t window_ns,
                        char *buf, size_t len)
{
    double effective;

    if (!c->core_limit)
        return;
    effective = window_ns ? 100.0 * (double)c->budget_ns / (double)window_ns : 0;
    if (effective < c->core_limit - 0.05)
        snprintf(buf, len, "%u%%=%.1f%%", c->core_limit, effective);
    else
        snprintf(buf, len, "%u%%", c->core_limit);
}

/* "1.00 GiB/4.00 GiB (peak 3.00 GiB, 2 refused)": the pod's usage of its
 * quota on this GPU; without a quota, its usage and peak. */
static void pod_memory_label(const struct msg_status_client *c, char *buf,
                             size_t len)
{
    char held[32], quota[32], peak[32];
    int n;

    format_size(c->pod_mem_held, held, sizeof(held));
    format_size(c->pod_mem_peak, peak, sizeof(peak));
    if (c->mem_quota) {
        format_size(c->mem_quota, quota, sizeof(quota));
        n = snprintf(buf, len, "%s/%s (peak %s", held, quota, peak);
    } else {
        n = snprintf(buf, len, "%s (peak %s", held, peak);
    }
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, c->pod_mem_refused ? ", %llu refused)" : ")",
                 (unsigned long long)c->pod_mem_refused);
}

static void client_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[] = {"CLIENT", "PID", "POD", "CONTAINER",
                                         "GPU", "STATE", "HELD", "WAIT",
                                         "GRANTS", "LAST DRAIN", "LIMIT",
                                         "USED/WINDOW", "MEMORY", "POD MEM"};
    struct table t = {.n_cols = 14};

    if (st->n_clients == 0) {
        fputs("no clients registered\n", out);
        return;
    }
    table_row(&t, header);
    for (int i = 0; i < st->n_clients; i++) {
        const struct msg_status_client *c = &st->clients[i];
        char id[24], pid[16], pod[CELL_LEN], gpu[8], held[32], wait[32] = "-",
            grants[24], drain[32] = "-", limit[32] = "-", used[32],
            state[24], mem[32], pod_mem[96];

        snprintf(id, sizeof(id), "%" PRIu64, c->client_id);
        snprintf(pid, sizeof(pid), "%" PRIu32, c->pid);
        pod_label(c, pod, sizeof(pod));
        snprintf(gpu, sizeof(gpu), "%u", c->gpu);
        format_duration(c->held_ns, held, sizeof(held));
        if (c->state == CLIENT_WAITING)
            format_duration(c->wait_ns, wait, sizeof(wait));
        snprintf(grants, sizeof(grants), "%" PRIu64, c->grants);
        if (c->last_drain_ns)
            format_duration(c->last_drain_ns, drain, sizeof(drain));
        limit_label(c, st->node.window_ns, limit, sizeof(limit));
        format_duration(c->used_ns, used, sizeof(used));
        snprintf(state, sizeof(state), "%s%s", ctl_state_name(c->state),
                 c->throttled ? ",throttled" : "");
        format_size(c->mem_allocated, mem, sizeof(mem));
        pod_memory_label(c, pod_mem, sizeof(pod_mem));
        const char *row[] = {id, pid, pod,
                             c->container_name[0] ? c->container_name : "-",
                             gpu, state, held, wait, grants, drain, limit, used,
                             mem, pod_mem};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

void render_table(FILE *out, const struct ctl_status *st)
{
    char tq[32], up[32], window[32];

    format_duration(st->node.tq_ns, tq, sizeof(tq));
    format_duration(st->node.uptime_ns, up, sizeof(up));
    format_duration(st->node.window_ns, window, sizeof(window));
    fprintf(out, "TQ %s   anti-thrash %s   window %s   uptime %s   clients %u   "
            "gpus %u\n\n", tq, st->node.anti_thrash ? "on" : "off", window, up,
            st->node.n_clients, st->node.n_gpus);
    gpu_table(out, st);
    fputc('\n', out);
    client_table(out, st);
}
