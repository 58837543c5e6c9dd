/* render_top.c - one screen of `nvsharectl top`: a header with the node's
 * settings, then per GPU a summary line (mode, memory, hand-overs, swaps)
 * and one row per client on it, holders first, then the queue in order,
 * then idle clients. Each row shows the pod, its state and why it waits,
 * the client's share of the GPU over the last few windows against its pod's
 * core limit ('|' marks it on the bar), and the pod's memory against its
 * quota.
 *
 * A share is measured, not sampled: the difference of the client's time
 * held (held_ns) between this status and one TOP_SHARE_WINDOWS accounting
 * windows older, over the scheduler's time between them (uptime_ns, taken
 * at the same instant as held_ns). A frame drawn at the same phase of every
 * window therefore reads what the client got, and a client that holds the
 * GPU throughout reads 100 %. top_history keeps the statuses it needs.
 *
 * The frame fits the terminal. The header and GPU lines keep the parts that
 * fit, the most useful first; the rows drop whole columns, PID first, then
 * the memory bar, the share bar, the priority and what a waiter waits on,
 * and narrow the pod's, so that 80 columns hold POD, PRIO, STATE, WAITS ON,
 * SHARE and MEMORY. Lines are cut at width columns (a name can be long) and
 * the rows stop at height lines, the last then saying how many were left
 * out. Names pass through ctl_printable (see render_table.c) so that a pod
 * name cannot drive the terminal. main.c owns the terminal. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "parse.h"

#define BAR_WIDTH 10
#define POD_MIN 12
#define POD_MAX 24
#define TOP_SHARE_WINDOWS 3
#define TOP_HISTORY_MAX 64 /* statuses: 6.4 s at the shortest interval */

/* ---- history ------------------------------------------------------------- */

struct held_sample {
    uint64_t client_id, held_ns;
    uint16_t gpu;
};

struct snapshot {
    uint64_t uptime_ns;
    struct held_sample *held;
    int n;
};

struct top_history {
    struct snapshot ring[TOP_HISTORY_MAX];
    int first, n; /* oldest at ring[first] */
};

struct top_history *top_history_new(void)
{
    return calloc(1, sizeof(struct top_history));
}

static void drop_oldest(struct top_history *h)
{
    free(h->ring[h->first].held);
    h->first = (h->first + 1) % TOP_HISTORY_MAX;
    h->n--;
}

void top_history_free(struct top_history *h)
{
    while (h && h->n)
        drop_oldest(h);
    free(h);
}

void top_history_add(struct top_history *h, const struct ctl_status *st)
{
    struct snapshot *last =
        h->n ? &h->ring[(h->first + h->n - 1) % TOP_HISTORY_MAX] : NULL;
    struct held_sample *held =
        malloc(((size_t)st->n_clients + 1) * sizeof(*held));

    if (!held)
        return;
    /* A restarted scheduler's clock starts again: older samples mean nothing. */
    if (last && st->node.uptime_ns < last->uptime_ns)
        while (h->n)
            drop_oldest(h);
    if (h->n == TOP_HISTORY_MAX)
        drop_oldest(h);
    for (int i = 0; i < st->n_clients; i++)
        held[i] = (struct held_sample){st->clients[i].client_id,
                                       st->clients[i].held_ns,
                                       st->clients[i].gpu};
    h->ring[(h->first + h->n) % TOP_HISTORY_MAX] =
        (struct snapshot){st->node.uptime_ns, held, st->n_clients};
    h->n++;
}

static const struct held_sample *sample_of(const struct snapshot *s,
                                           const struct msg_status_client *c)
{
    for (int i = 0; i < s->n; i++)
        if (s->held[i].client_id == c->client_id && s->held[i].gpu == c->gpu)
            return &s->held[i];
    return NULL;
}

/* The client's share of the GPU since the oldest status within the last
 * TOP_SHARE_WINDOWS windows that knew it (at least the status before this
 * one), 0-1; the current window's billing when none did. */
static double share_of(const struct top_history *h, const struct ctl_status *st,
                       const struct msg_status_client *c)
{
    uint64_t now = st->node.uptime_ns,
             span = TOP_SHARE_WINDOWS * st->node.window_ns;

    for (int k = 0; h && k < h->n; k++) {
        const struct snapshot *s = &h->ring[(h->first + k) % TOP_HISTORY_MAX];
        const struct held_sample *then;

        if (s->uptime_ns >= now || (now - s->uptime_ns > span && k < h->n - 2))
            continue;
        if (!(then = sample_of(s, c)) || c->held_ns < then->held_ns)
            continue;
        double share =
            (double)(c->held_ns - then->held_ns) / (double)(now - s->uptime_ns);
        return share > 1 ? 1 : share;
    }
    return st->node.window_ns ? (double)c->used_ns / (double)st->node.window_ns
                              : 0;
}

/* ---- the screen ---------------------------------------------------------- */

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

/* A line of parts separated by two spaces: lead, then those of parts that
 * fit the width, taken by rank (0 first), shown in their order. */
struct part {
    char text[96];
    int rank;
};

static void parts_line(struct screen *s, const char *lead,
                       const struct part *parts, int n)
{
    bool shown[16] = {false};
    int used = (int)strlen(lead);
    char line[1024];
    size_t len;

    for (int rank = 0; rank < 16; rank++)
        for (int i = 0; i < n && i < 16; i++)
            if (parts[i].rank == rank &&
                used + 2 + (int)strlen(parts[i].text) <= s->width) {
                shown[i] = true;
                used += 2 + (int)strlen(parts[i].text);
            }
    len = (size_t)snprintf(line, sizeof(line), "%s", lead);
    for (int i = 0; i < n && i < 16 && len < sizeof(line); i++)
        if (shown[i])
            len += (size_t)snprintf(line + len, sizeof(line) - len, "  %s",
                                    parts[i].text);
    screen_line(s, "%s", line);
}

/* "[#######.....|......]": fraction filled, the mark at limit (if >= 0). */
static void bar(double fraction, double limit, char *buf)
{
    int fill = (int)(fraction * BAR_WIDTH + 0.5);
    int mark = limit >= 0 ? (int)(limit * BAR_WIDTH + 0.5) : -1;

    buf[0] = '[';
    for (int i = 0; i < BAR_WIDTH; i++)
        buf[1 + i] = i < fill ? '#' : i == mark ? '|' : '.';
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

/* The rows' columns, chosen once per frame from the width. */
struct columns {
    int pod; /* the pod's width */
    bool pid, prio, waits, share_bar, memory_bar;
};

enum {
    BASE_WIDTH =
        2 + POD_MIN + 1 + 8 + 1 + 12 + 1 + 22, /* pod, state, share, memory */
    BAR_COLS = BAR_WIDTH + 3,
};

static struct columns choose_columns(int width)
{
    struct columns c = {.pod = POD_MIN};
    int used = BASE_WIDTH;
    /* Kept in this order while they fit: the most useful first. */
    struct {
        bool *on;
        int cols;
    } optional[] = {{&c.waits, 10},
                    {&c.prio, 7},
                    {&c.share_bar, BAR_COLS},
                    {&c.memory_bar, BAR_COLS},
                    {&c.pid, 8}};

    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
        if (used + optional[i].cols <= width) {
            *optional[i].on = true;
            used += optional[i].cols;
        }
    c.pod += width - used > POD_MAX - POD_MIN ? POD_MAX - POD_MIN
             : width > used                   ? width - used
                                              : 0;
    return c;
}

/* Appends " text" padded to width (negative: left-aligned). */
static void cell(char *line, size_t *len, size_t cap, int width, const char *text)
{
    if (*len < cap)
        *len += (size_t)snprintf(line + *len, cap - *len, " %*s", width, text);
}

/* One row, or with c NULL the titles. */
/* The pod's memory against its quota, or against the GPU without one. */
static void pod_memory(const struct msg_status_client *c,
                       const struct msg_status_gpu *g, char *memory,
                       size_t size, char *memory_bar)
{
    char held[32], quota[32];

    format_size(c->pod_mem_held, held, sizeof(held));
    if (c->mem_quota) {
        format_size(c->mem_quota, quota, sizeof(quota));
        bar(ratio(c->pod_mem_held, c->mem_quota), 1, memory_bar);
        snprintf(memory, size, "%s/%s", held, quota);
    } else {
        bar(ratio(c->pod_mem_held, g->memory_total), -1, memory_bar);
        snprintf(memory, size, "%s (no quota)", held);
    }
}

static void client_row(struct screen *s, const struct columns *cols,
                       const struct ctl_status *st, const struct top_history *h,
                       const struct msg_status_gpu *g,
                       const struct msg_status_client *c)
{
    char label[2 * PROTO_NAME_MAX + 24], *pod, pid[16] = "PID", prio[16] = "PRIO";
    char share[32] = "SHARE/LIMIT", share_bar[BAR_WIDTH + 3] = "";
    char memory[80] = "POD MEMORY/QUOTA", memory_bar[BAR_WIDTH + 3] = "";
    const char *state = "STATE", *why = "WAITS ON";
    char line[512];
    size_t line_len;

    if (c) {
        double used = share_of(h, st, c);
        double limit = c->core_limit ? ratio(c->budget_ns, st->node.window_ns)
                                     : -1;

        ctl_pod_name_label(c->pod_namespace, c->pod_name, c->pod_uid, label,
                           sizeof(label));
        /* A rank of a multi-GPU job: its GPUs go together. */
        if (c->gang) {
            size_t n = strlen(label);
            snprintf(label + n, sizeof(label) - n, " [gang %" PRIu32 "]",
                     c->gang - 1);
        }
        snprintf(pid, sizeof(pid), "%" PRIu32, c->pid);
        format_priority(c->priority, prio, sizeof(prio));
        state = ctl_state_name(c->state);
        why = c->state == CLIENT_WAITING && c->wait_reason != WAIT_NONE
                  ? ctl_wait_reason_name(c->wait_reason)
                  : "";
        bar(used, limit, share_bar);
        if (c->core_limit)
            snprintf(share, sizeof(share), "%3.0f%% of %u%%", 100 * used,
                     c->core_limit);
        else
            snprintf(share, sizeof(share), "%3.0f%%", 100 * used);
        pod_memory(c, g, memory, sizeof(memory), memory_bar);
    } else {
        snprintf(label, sizeof(label), "POD");
    }
    pod = ctl_printable(label);
    line_len = (size_t)snprintf(line, sizeof(line), "  %-*.*s", cols->pod,
                                cols->pod, pod);
    free(pod);
    if (cols->pid)
        cell(line, &line_len, sizeof(line), 7, pid);
    if (cols->prio)
        cell(line, &line_len, sizeof(line), -6, prio);
    cell(line, &line_len, sizeof(line), -8, state);
    if (cols->waits)
        cell(line, &line_len, sizeof(line), -9, why);
    if (cols->share_bar)
        cell(line, &line_len, sizeof(line), -BAR_WIDTH - 2, share_bar);
    cell(line, &line_len, sizeof(line), -12, share);
    if (cols->memory_bar)
        cell(line, &line_len, sizeof(line), -BAR_WIDTH - 2, memory_bar);
    cell(line, &line_len, sizeof(line), 0, memory);
    screen_line(s, "%s", line);
    /* Who keeps a memory waiter out, under its row: too long for a cell. */
    if (c && c->state == CLIENT_WAITING && c->wait_why[0]) {
        char *text = ctl_printable(c->wait_why);
        screen_line(s, "    waiting for memory: %s", text);
        free(text);
    }
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

static void gpu_section(struct screen *s, const struct columns *cols,
                        const struct ctl_status *st, const struct top_history *h,
                        const struct msg_status_gpu *g)
{
    char b[BAR_WIDTH + 3], used[32], total[32], lead[32],
        *uuid = ctl_printable(g->uuid);
    char quantum[96];
    struct part parts[6];
    int n = 0;

    format_size(g->running_footprint, used, sizeof(used));
    format_size(g->memory_total, total, sizeof(total));
    bar(ratio(g->running_footprint, g->memory_total),
        g->memory_total ? 1 - ratio(g->reserve, g->memory_total) : -1, b);
    snprintf(lead, sizeof(lead), "GPU %u", g->index);
    parts[n] = (struct part){.rank = 5};
    snprintf(parts[n++].text, sizeof(parts[0].text), "%s", uuid);
    parts[n] = (struct part){.rank = 0};
    snprintf(parts[n++].text, sizeof(parts[0].text), "%s",
             sched_mode_name(g->mode));
    parts[n] = (struct part){.rank = 1};
    snprintf(parts[n++].text, sizeof(parts[0].text), "memory %s/%s", used,
             g->memory_total ? total : "?");
    parts[n] = (struct part){.rank = 4};
    snprintf(parts[n++].text, sizeof(parts[0].text), "%s", b);
    parts[n] = (struct part){.rank = 2};
    snprintf(parts[n++].text, sizeof(parts[0].text), "%" PRIu64 " switches",
             g->switches);
    parts[n] = (struct part){.rank = 3};
    snprintf(parts[n++].text, sizeof(parts[0].text), "%" PRIu64 " swaps",
             g->swaps_out + g->swaps_in);
    parts_line(s, lead, parts, n);
    free(uuid);
    ctl_quantum_label(g, quantum, sizeof(quantum));
    screen_line(s, "  quantum %s", quantum);
    client_row(s, cols, st, h, g, NULL);
    for (int i = 0; i < g->n_running; i++)
        client_row(s, cols, st, h, g,
                   ctl_status_client(st, g->running[i], g->index));
    for (int i = 0; i < g->n_waiting; i++)
        client_row(s, cols, st, h, g,
                   ctl_status_client(st, g->waiting[i].client_id, g->index));
    if (g->truncated_waiting)
        screen_line(s, "  (+%" PRIu32 " more waiting)", g->truncated_waiting);
    for (int i = 0; i < st->n_clients; i++)
        if (st->clients[i].gpu == g->index && !listed(g, st->clients[i].client_id))
            client_row(s, cols, st, h, g, &st->clients[i]);
    if (!g->n_running && !g->n_waiting)
        screen_line(s, "  (no client holds or waits)");
    screen_line(s, "%s", "");
}

void render_top(FILE *out, const struct ctl_status *st,
                const struct top_history *h, int width, int height)
{
    struct screen s = {.out = out, .width = width, .height = height};
    struct columns cols = choose_columns(width);
    char lead[48], stamp[16];
    struct part parts[7];
    time_t now = time(NULL);
    struct tm tm;
    int n = 0;

    if (!localtime_r(&now, &tm) ||
        !strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm))
        stamp[0] = '\0';
    snprintf(lead, sizeof(lead), "nvshare top - %s", stamp);
    parts[n] = (struct part){.rank = 1};
    if (st->node.tq_ns) {
        char tq[32];
        format_duration(st->node.tq_ns, tq, sizeof(tq));
        snprintf(parts[n++].text, sizeof(parts[0].text), "tq %s", tq);
    } else {
        snprintf(parts[n++].text, sizeof(parts[0].text), "tq auto");
    }
    parts[n] = (struct part){.rank = 2};
    format_duration(st->node.window_ns, parts[n].text + 7,
                    sizeof(parts[0].text) - 7);
    memcpy(parts[n++].text, "window ", 7);
    parts[n] = (struct part){.rank = 3};
    snprintf(parts[n++].text, sizeof(parts[0].text), "anti-thrash %s",
             st->node.anti_thrash ? "on" : "off");
    parts[n] = (struct part){.rank = 4};
    snprintf(parts[n++].text, sizeof(parts[0].text), "clients %u",
             st->node.n_clients);
    parts[n] = (struct part){.rank = 5};
    snprintf(parts[n++].text, sizeof(parts[0].text), "GPUs %u", st->node.n_gpus);
    parts[n] = (struct part){.rank = 6};
    format_duration(st->node.uptime_ns, parts[n].text + 3,
                    sizeof(parts[0].text) - 3);
    memcpy(parts[n++].text, "up ", 3);
    parts[n] = (struct part){.rank = 0};
    snprintf(parts[n++].text, sizeof(parts[0].text), "(q quits)");
    parts_line(&s, lead, parts, n);
    screen_line(&s, "%s", "");
    for (int i = 0; i < st->n_gpus; i++)
        gpu_section(&s, &cols, st, h, &st->gpus[i]);
    if (s.left_out)
        fprintf(out, "(%d more lines: enlarge the terminal)\n", s.left_out);
}
