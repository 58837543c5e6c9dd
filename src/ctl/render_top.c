/* render_top.c - one screen of `nvsharectl top`: a header with the node's
 * settings, then per GPU a summary line (mode, memory bar, hand-overs,
 * swaps) and one row per client on it, holders first, then the queue in
 * order, then idle clients. Each row shows the pod, its state and why it
 * waits, a bar of the pod's GPU time in the current accounting window with
 * its limit marked '|', and a bar of the pod's memory against its quota.
 *
 * The frame is plain text sized to the terminal: every line is cut at
 * width columns and the rows stop at height lines, the last then saying how
 * many were left out. Names pass through ctl_printable (see render_table.c)
 * so that a pod name cannot drive the terminal. main.c owns the terminal. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "parse.h"

#define BAR_WIDTH 12
#define POD_WIDTH 24

/* Lines of one frame, cut to the screen. */
struct screen {
    FILE *out;
    int width, height, lines, left_out;
};

/* Prints one line cut at width code points, unless the screen is full (the
 * last line is kept for the count of those left out). */
static void screen_line(struct screen *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void screen_line(struct screen *s, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int cols = 0;
    size_t i;

    if (s->lines >= s->height - 1) {
        s->left_out++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (i = 0; line[i]; i++) {
        if (((unsigned char)line[i] & 0xc0) != 0x80 && cols++ == s->width)
            break;
    }
    line[i] = '\0';
    fprintf(s->out, "%s\n", line);
    s->lines++;
}

/* "[#######.....|......]": fraction filled, the mark at limit (if >= 0). */
static void bar(double fraction, double limit, char *buf)
{
    int fill = (int)(fraction * BAR_WIDTH + 0.5);
    int mark = limit >= 0 ? (int)(limit * BAR_WIDTH + 0.5) : -1;

    buf[0] = '[';
    for (int i = 0; i < BAR_WIDTH; i++)
        buf[1 + i] = i == mark && i >= fill ? '|' : i < fill ? '#' : '.';
    if (mark == BAR_WIDTH && fill < BAR_WIDTH)
        buf[BAR_WIDTH] = '|';
    buf[BAR_WIDTH + 1] = ']';
    buf[BAR_WIDTH + 2] = '\0';
}

static double ratio(uint64_t part, uint64_t whole)
{
    double r = whole ? (double)part / (double)whole : 0;
    return r > 1 ? 1 : r;
}

/* "[###|....]  45% of 20%": the pod's time in this window against its
 * (effective) limit. */
static void share_cell(const struct msg_status_client *c, uint64_t window_ns,
                       char *buf, size_t len)
{
    char b[BAR_WIDTH + 3];
    double used = ratio(c->used_ns, window_ns);
    double limit = c->core_limit ? ratio(c->budget_ns, window_ns) : -1;

    bar(used, limit, b);
    if (c->core_limit)
        snprintf(buf, len, "%s %3.0f%% of %u%%", b, 100 * used, c->core_limit);
    else
        snprintf(buf, len, "%s %3.0f%%", b, 100 * used);
}

/* "[##......]  1.00 GiB/4.00 GiB": the pod's memory against its quota on
 * this GPU, or against the GPU's capacity when it has none. */
static void memory_cell(const struct msg_status_client *c, uint64_t capacity,
                        char *buf, size_t len)
{
    char b[BAR_WIDTH + 3], held[32], quota[32];

    format_size(c->pod_mem_held, held, sizeof(held));
    if (c->mem_quota) {
        format_size(c->mem_quota, quota, sizeof(quota));
        bar(ratio(c->pod_mem_held, c->mem_quota), 1, b);
        snprintf(buf, len, "%s %s/%s", b, held, quota);
    } else {
        bar(ratio(c->pod_mem_held, capacity), -1, b);
        snprintf(buf, len, "%s %s (no quota)", b, held);
    }
}

static void client_row(struct screen *s, const struct ctl_status *st,
                       const struct msg_status_gpu *g, uint64_t id)
{
    const struct msg_status_client *c = ctl_status_client(st, id, g->index);
    char label[2 * PROTO_NAME_MAX + 8], *pod, share[96], memory[96], prio[16];
    const char *why;

    if (!c)
        return;
    ctl_pod_name_label(c->pod_namespace, c->pod_name, c->pod_uid, label,
                       sizeof(label));
    /* A rank of a multi-GPU job: its GPUs go together. */
    if (c->gang) {
        size_t n = strlen(label);
        snprintf(label + n, sizeof(label) - n, " [gang %" PRIu32 "]", c->gang - 1);
    }
    pod = ctl_printable(label);
    why = c->state == CLIENT_WAITING && c->wait_reason != WAIT_NONE
              ? ctl_wait_reason_name(c->wait_reason) : "";
    share_cell(c, st->node.window_ns, share, sizeof(share));
    memory_cell(c, g->memory_total, memory, sizeof(memory));
    format_priority(c->priority, prio, sizeof(prio));
    screen_line(s, "  %-*.*s %7" PRIu32 "  %-6s %-8s %-9s  %-27s %s", POD_WIDTH,
                POD_WIDTH, pod, c->pid, prio, ctl_state_name(c->state), why, share,
                memory);
    free(pod);
}

static bool listed(const struct msg_status_gpu *g, uint64_t id)
{
    for (int i = 0; i < g->n_running; i++)
        if (g->running[i] == id)
            return true;
    for (int i = 0; i < g->n_waiting; i++)
        if (g->waiting[i].client_id == id)
            return true;
    return false;
}

static void gpu_section(struct screen *s, const struct ctl_status *st,
                        const struct msg_status_gpu *g)
{
    char b[BAR_WIDTH + 3], used[32], total[32], *uuid = ctl_printable(g->uuid);
    char quantum[96];

    format_size(g->running_footprint, used, sizeof(used));
    format_size(g->memory_total, total, sizeof(total));
    bar(ratio(g->running_footprint, g->memory_total),
        g->memory_total ? 1 - ratio(g->reserve, g->memory_total) : -1, b);
    screen_line(s, "GPU %u %s  %s  memory %s %s/%s  %" PRIu64 " switches  %" PRIu64
                " swaps", g->index, uuid, sched_mode_name(g->mode), b, used,
                g->memory_total ? total : "?", g->switches,
                g->swaps_out + g->swaps_in);
    free(uuid);
    ctl_quantum_label(g, quantum, sizeof(quantum));
    screen_line(s, "  quantum %s", quantum);
    screen_line(s, "  %-*s %7s  %-6s %-8s %-9s  %-27s %s", POD_WIDTH, "POD", "PID",
                "PRIO", "STATE", "WAITS ON", "GPU TIME (WINDOW)/LIMIT", "POD MEMORY/QUOTA");
    for (int i = 0; i < g->n_running; i++)
        client_row(s, st, g, g->running[i]);
    for (int i = 0; i < g->n_waiting; i++)
        client_row(s, st, g, g->waiting[i].client_id);
    if (g->truncated_waiting)
        screen_line(s, "  (+%" PRIu32 " more waiting)", g->truncated_waiting);
    for (int i = 0; i < st->n_clients; i++)
        if (st->clients[i].gpu == g->index && !listed(g, st->clients[i].client_id))
            client_row(s, st, g, st->clients[i].client_id);
    if (!g->n_running && !g->n_waiting)
        screen_line(s, "  (no client holds or waits)");
    screen_line(s, "%s", "");
}

void render_top(FILE *out, const struct ctl_status *st, int width, int height)
{
    struct screen s = {.out = out, .width = width, .height = height};
    char up[32], tq[32], window[32], stamp[16];
    time_t now = time(NULL);
    struct tm tm;

    format_duration(st->node.uptime_ns, up, sizeof(up));
    if (st->node.tq_ns)
        format_duration(st->node.tq_ns, tq, sizeof(tq));
    else
        snprintf(tq, sizeof(tq), "auto");
    format_duration(st->node.window_ns, window, sizeof(window));
    if (!localtime_r(&now, &tm) || !strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm))
        stamp[0] = '\0';
    screen_line(&s, "nvshare top - %s  up %s  GPUs %u  clients %u  tq %s  "
                "window %s  anti-thrash %s   (q quits)", stamp, up,
                st->node.n_gpus, st->node.n_clients, tq, window,
                st->node.anti_thrash ? "on" : "off");
    screen_line(&s, "%s", "");
    for (int i = 0; i < st->n_gpus; i++)
        gpu_section(&s, st, &st->gpus[i]);
    if (s.left_out)
        fprintf(out, "(%d more lines: enlarge the terminal)\n", s.left_out);
}
