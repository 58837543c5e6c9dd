/* render_table.c - `nvsharectl status`: the snapshot for people. The node's
 * settings on two lines, then one block per GPU (labelled lines: a GPU has
 * more to say than fits in a table row), then the clients as two aligned
 * tables (kubectl style: upper-case headers, columns two spaces apart), one
 * about scheduling and one about limits and memory, so that each fits in
 * 120 columns with ordinary pod names. Processes that use a GPU without
 * nvshare follow in a table of their own, when there are any. With
 * --settings, a table of every setting of the scheduler's instead.
 *
 * Pod, namespace and container names come from whatever registered with the
 * scheduler, i.e. from any local user: they are printed with control
 * characters and invalid UTF-8 replaced by '?', so that a name cannot move
 * the operator's cursor or rewrite their terminal. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "parse.h"
#include "text.h"

#define TABLE_MAX_COLS 16
#define CELL_LEN 600   /* namespace/pod: two names of at most 253 bytes */
#define LINE_WIDTH 120 /* GPU blocks wrap their client lists here */

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
char *ctl_printable(const char *text)
{
    size_t size = strlen(text) + 1;
    char *out = xrealloc(NULL, size);

    text_printable(text, out, size);
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
        char *cell = ctl_printable(cells[c]);
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

/* "namespace/pod", "pod", "uid:<pod-uid>" (a Kubernetes pod not named
 * yet), or "-" for a client in no pod. */
void ctl_pod_name_label(const char *pod_namespace, const char *pod_name,
                        const char *pod_uid, char *buf, size_t len)
{
    if (pod_namespace[0] && pod_name[0])
        snprintf(buf, len, "%s/%s", pod_namespace, pod_name);
    else if (pod_name[0])
        snprintf(buf, len, "%s", pod_name);
    else
        snprintf(buf, len, "%s%s", pod_uid[0] ? "uid:" : "-", pod_uid);
}

/* The pod, and the group it is billed to on the record's GPU, if any:
 * "ml/a (group 3f2a...)". */
static void pod_label(const struct msg_status_client *c, char *buf, size_t len)
{
    size_t n;

    ctl_pod_name_label(c->pod_namespace, c->pod_name, c->pod_uid, buf, len);
    n = strlen(buf);
    if (c->group[0] && n < len)
        snprintf(buf + n, len - n, " (group %s)", c->group);
}

/* Writes a list of items after a label, comma-separated, wrapping before
 * LINE_WIDTH with continuation lines indented under the first item. */
struct wrap {
    FILE *out;
    size_t col, indent;
    bool empty;
};

static void wrap_begin(struct wrap *w, FILE *out, const char *label)
{
    w->out = out;
    w->indent = (size_t)fprintf(out, "  %-12s ", label);
    w->col = w->indent;
    w->empty = true;
}

/* sep goes between the previous item and this one ("," or ""). Items are
 * made printable here. */
static void wrap_item(struct wrap *w, const char *sep, const char *text)
{
    char *item = ctl_printable(text);
    size_t width = text_width(item);

    if (!w->empty) {
        w->col += (size_t)fprintf(w->out, "%s", sep);
        if (w->col + 1 + width > LINE_WIDTH) {
            fprintf(w->out, "\n%*s", (int)w->indent, "");
            w->col = w->indent;
        } else {
            fputc(' ', w->out);
            w->col++;
        }
    }
    fputs(item, w->out);
    w->col += width;
    w->empty = false;
    free(item);
}

static void wrap_end(struct wrap *w, const char *if_empty)
{
    if (w->empty)
        fputs(if_empty, w->out);
    fputc('\n', w->out);
}

/* "3 team-a/trainer-0" (the client's id and pod), or "3" outside a pod. */
static void client_label(const struct ctl_status *st, uint64_t id, uint16_t gpu,
                         char *buf, size_t len)
{
    const struct msg_status_client *c = ctl_status_client(st, id, gpu);
    char pod[CELL_LEN];

    pod[0] = '\0';
    if (c)
        pod_label(c, pod, sizeof(pod));
    if (pod[0] && strcmp(pod, "-"))
        snprintf(buf, len, "%" PRIu64 " %s", id, pod);
    else
        snprintf(buf, len, "%" PRIu64, id);
}

/* "3 out (12.00 GiB, last 1.02s)", "0 out". */
static void swap_label(const char *dir, uint64_t count, uint64_t bytes,
                       uint64_t last_ns, char *buf, size_t len)
{
    char size[32], last[32];

    if (!count) {
        snprintf(buf, len, "0 %s", dir);
        return;
    }
    format_size(bytes, size, sizeof(size));
    format_duration(last_ns, last, sizeof(last));
    snprintf(buf, len, "%" PRIu64 " %s (%s, last %s)", count, dir, size, last);
}

/* The running set and the queue of one GPU, wrapped to the terminal. */
static void gpu_members(FILE *out, const struct ctl_status *st,
                        const struct msg_status_gpu *g)
{
    char text[CELL_LEN + 64];
    struct wrap w;

    wrap_begin(&w, out, "running");
    for (int i = 0; i < g->n_running; i++) {
        const struct msg_status_client *r =
            ctl_status_client(st, g->running[i], g->index);
        client_label(st, g->running[i], g->index, text, sizeof(text));
        if (r && r->state == CLIENT_DRAINING)
            strncat(text, " (draining)", sizeof(text) - strlen(text) - 1);
        wrap_item(&w, ",", text);
    }
    wrap_end(&w, "none");
    wrap_begin(&w, out, "waiting");
    for (int i = 0; i < g->n_waiting; i++) {
        size_t n;
        client_label(st, g->waiting[i].client_id, g->index, text, sizeof(text));
        n = strlen(text);
        const struct msg_status_client *c =
            ctl_status_client(st, g->waiting[i].client_id, g->index);
        if (c && c->wait_why[0])
            snprintf(text + n, sizeof(text) - n, " (%s: %s)",
                     ctl_wait_reason_name(g->waiting[i].reason), c->wait_why);
        else
            snprintf(text + n, sizeof(text) - n, " (%s)",
                     ctl_wait_reason_name(g->waiting[i].reason));
        wrap_item(&w, ",", text);
    }
    if (g->truncated_waiting) {
        snprintf(text, sizeof(text), "(+%" PRIu32 " more)", g->truncated_waiting);
        wrap_item(&w, "", text);
    }
    wrap_end(&w, "none");
}

static void gpu_block(FILE *out, const struct ctl_status *st,
                      const struct msg_status_gpu *g)
{
    char a[32], b[32], c[32], d[32];
    char *name = ctl_printable(g->name), *uuid = ctl_printable(g->uuid);

    fprintf(out, "GPU %u  %s  %s\n", g->index, uuid, name);
    free(name);
    free(uuid);
    fprintf(out, "  %-12s %s\n", "mode", sched_mode_name(g->mode));
    if (g->memory_total) {
        format_size(g->memory_total, a, sizeof(a));
        format_size(g->reserve, b, sizeof(b));
        format_size(g->running_footprint, c, sizeof(c));
        format_size(g->resident, d, sizeof(d));
        fprintf(out, "  %-12s %s capacity, %s reserve, %s running, %s resident\n",
                "memory", a, b, c, d);
    } else {
        format_size(g->running_footprint, c, sizeof(c));
        fprintf(out, "  %-12s capacity unknown (not checked), %s running\n",
                "memory", c);
    }
    char quantum[96];
    ctl_quantum_label(g, quantum, sizeof(quantum));
    fprintf(out, "  %-12s %s\n", "quantum", quantum);
    format_duration(g->switch_time_ns, a, sizeof(a));
    fprintf(out, "  %-12s %s %s, %" PRIu64 " switch%s\n", "switch time", a,
            st->node.switch_time_fixed_ns ? "(fixed)"
            : g->switch_measured          ? "(measured)"
                                          : "(not measured yet)",
            g->switches, g->switches == 1 ? "" : "es");
    if (g->swaps_out || g->swaps_in) {
        char out_text[128], in_text[128];
        swap_label("out", g->swaps_out, g->swap_out_bytes, g->last_swap_out_ns,
                   out_text, sizeof(out_text));
        swap_label("in", g->swaps_in, g->swap_in_bytes, g->last_swap_in_ns,
                   in_text, sizeof(in_text));
        fprintf(out, "  %-12s %s, %s\n", "swaps", out_text, in_text);
    } else {
        fprintf(out, "  %-12s none\n", "swaps");
    }
    gpu_members(out, st, g);
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
        snprintf(buf + n, len - (size_t)n,
                 c->pod_mem_refused ? ", %llu refused)" : ")",
                 (unsigned long long)c->pod_mem_refused);
}

/* "23%" (rounded), or "-" before the first measurement. */
static void load_label(uint16_t permille, char *buf, size_t len)
{
    if (permille == CTL_LOAD_UNMEASURED)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%u%%", (permille + 5u) / 10u);
}

/* "holding", "waiting:memory", ... */
static void state_label(const struct msg_status_client *c, char *buf, size_t len)
{
    if (c->state == CLIENT_WAITING && c->wait_reason != WAIT_NONE)
        snprintf(buf, len, "%s:%s", ctl_state_name(c->state),
                 ctl_wait_reason_name(c->wait_reason));
    else
        snprintf(buf, len, "%s", ctl_state_name(c->state));
}

/* "oversub,swapped,throttled" or "-". */
static void flags_label(const struct msg_status_client *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", c->oversubscribed ? ",oversub" : "",
             c->swapped_out ? ",swapped" : "", c->throttled ? ",throttled" : "");
    if (buf[0])
        memmove(buf, buf + 1, strlen(buf));
    else
        snprintf(buf, len, "-");
}

/* "high", "low" with its source unless the operator's, and its floor:
 * "low declared", "low 10%". */
static void priority_label(const struct msg_status_client *c, char *buf,
                           size_t len)
{
    char name[16];
    int n;

    format_priority(c->priority, name, sizeof(name));
    n = snprintf(buf, len, "%s%s", name,
                 c->priority_source == LIMIT_DECLARED     ? " declared"
                 : c->priority_source == LIMIT_ANNOTATION ? " annotation"
                                                          : "");
    if (c->min_share && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " %u%%", c->min_share);
}

/* Drops column GANG_COL from a row of the scheduling table. */
enum { GANG_COL = 5, SCHED_COLS = 13 };
static void without_gang(const char *const *row, const char **out)
{
    for (int i = 0, o = 0; i < SCHED_COLS; i++)
        if (i != GANG_COL)
            out[o++] = row[i];
}

/* Who each client is and where it stands in the scheduling. The GANG
 * column shows only while some job spans several GPUs. */
static void client_sched_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[SCHED_COLS] =
        {"CLIENT", "PID",  "POD",  "CONTAINER", "GPU",    "GANG",      "PRIO",
         "STATE",  "LOAD", "HELD", "WAIT",      "GRANTS", "LAST DRAIN"};
    const char *narrow[SCHED_COLS];
    bool gangs = false;

    for (int i = 0; i < st->n_clients; i++)
        gangs |= st->clients[i].gang != 0;
    struct table t = {.n_cols = gangs ? SCHED_COLS : SCHED_COLS - 1};
    without_gang(header, narrow);
    table_row(&t, gangs ? header : narrow);
    for (int i = 0; i < st->n_clients; i++) {
        const struct msg_status_client *c = &st->clients[i];
        char id[24], pid[16], pod[CELL_LEN], gpu[8],
            gang[16] = "-", state[48], load[8], held[32], wait[32] = "-",
            grants[24], drain[32] = "-", prio[40];

        snprintf(id, sizeof(id), "%" PRIu64, c->client_id);
        snprintf(pid, sizeof(pid), "%" PRIu32, c->pid);
        pod_label(c, pod, sizeof(pod));
        snprintf(gpu, sizeof(gpu), "%u", c->gpu);
        priority_label(c, prio, sizeof(prio));
        if (c->gang)
            snprintf(gang, sizeof(gang), "%" PRIu32, c->gang - 1);
        state_label(c, state, sizeof(state));
        load_label(c->load_permille, load, sizeof(load));
        format_duration(c->held_ns, held, sizeof(held));
        if (c->state == CLIENT_WAITING)
            format_duration(c->wait_ns, wait, sizeof(wait));
        snprintf(grants, sizeof(grants), "%" PRIu64, c->grants);
        if (c->last_drain_ns)
            format_duration(c->last_drain_ns, drain, sizeof(drain));
        const char *row[SCHED_COLS] =
            {id,   pid,  pod,  c->container_name[0] ? c->container_name : "-",
             gpu,  gang, prio, state,
             load, held, wait, grants,
             drain};
        without_gang(row, narrow);
        table_row(&t, gangs ? row : narrow);
    }
    table_flush(out, &t);
}

/* Each client's compute limit and memory. Of the footprint, the evictable
 * part leaves the GPU when the client swaps out; the rest stays. */
static void client_resource_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[] = {"CLIENT",        "GPU",
                                         "LIMIT",         "USED/WINDOW",
                                         "FOOTPRINT",     "EVICTABLE",
                                         "NON-EVICTABLE", "ALLOCATED",
                                         "FLAGS",         "POD MEM"};
    struct table t = {.n_cols = 10};

    table_row(&t, header);
    for (int i = 0; i < st->n_clients; i++) {
        const struct msg_status_client *c = &st->clients[i];
        char id[24], gpu[8], limit[32] = "-", used[32], footprint[32],
                             evictable[32], fixed[32], allocated[32], flags[32],
                             pod_mem[96];

        snprintf(id, sizeof(id), "%" PRIu64, c->client_id);
        snprintf(gpu, sizeof(gpu), "%u", c->gpu);
        limit_label(c, st->node.window_ns, limit, sizeof(limit));
        format_duration(c->used_ns, used, sizeof(used));
        format_size(c->footprint, footprint, sizeof(footprint));
        format_size(c->evictable, evictable, sizeof(evictable));
        format_size(c->footprint - c->evictable, fixed, sizeof(fixed));
        format_size(c->mem_allocated, allocated, sizeof(allocated));
        flags_label(c, flags, sizeof(flags));
        pod_memory_label(c, pod_mem, sizeof(pod_mem));
        const char *row[] = {id,        gpu,   limit,     used,  footprint,
                             evictable, fixed, allocated, flags, pod_mem};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

/* "off", "on annotation": a pod's idle reclaim, with its source unless the
 * operator's or the default. */
static void idle_swap_label(unsigned idle_swap, uint8_t source, char *buf,
                            size_t len)
{
    snprintf(buf, len, "%s%s", idle_swap == IDLE_SWAP_OFF ? "off" : "on",
             source == LIMIT_ANNOTATION ? " annotation" : "");
}

/* What each client keeps on the GPU and in host memory, how long it has
 * been idle (its memory is swapped out for others after idle-swap-after),
 * and what its swaps cost it. */
static void client_swap_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[] = {"CLIENT",      "GPU",
                                         "RESIDENT",    "PARKED",
                                         "IDLE",        "IDLE SWAP",
                                         "SWAPS OUT",   "SWAPS IN",
                                         "SWAP-IN WAIT"};
    struct table t = {.n_cols = 9};

    table_row(&t, header);
    for (int i = 0; i < st->n_clients; i++) {
        const struct msg_status_client *c = &st->clients[i];
        char id[24], gpu[8], resident[32], parked[32],
            idle[32] = "-", idle_swap[32], outs[24], ins[24], wait[32];

        snprintf(id, sizeof(id), "%" PRIu64, c->client_id);
        snprintf(gpu, sizeof(gpu), "%u", c->gpu);
        format_size(c->resident, resident, sizeof(resident));
        format_size(c->parked, parked, sizeof(parked));
        if (c->idle_ns)
            format_duration(c->idle_ns, idle, sizeof(idle));
        idle_swap_label(c->idle_swap, c->idle_swap_source, idle_swap,
                        sizeof(idle_swap));
        snprintf(outs, sizeof(outs), "%" PRIu64, c->swap_outs);
        snprintf(ins, sizeof(ins), "%" PRIu64, c->swap_ins);
        format_duration(c->swap_in_wait_ns, wait, sizeof(wait));
        const char *row[] = {id,        gpu,  resident, parked, idle,
                             idle_swap, outs, ins,      wait};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

/* The lowest core limit and memory quota the pod's clients declared
 * (NVSHARE_GPU_CORE_LIMIT, NVSHARE_GPU_MEMORY_LIMIT) where they hold: what
 * the pod runs under when neither the operator nor an annotation set one. */
static void declared_limits(const struct ctl_status *st,
                            const struct msg_status_pod *p, unsigned *core,
                            uint64_t *memory)
{
    *core = 0, *memory = 0;
    for (int i = 0; i < st->n_clients; i++) {
        const struct msg_status_client *c = &st->clients[i];
        if (strcmp(c->pod_namespace, p->pod_namespace) ||
            strcmp(c->pod_name, p->pod_name) || strcmp(c->pod_uid, p->pod_uid))
            continue;
        if (c->limit_source == LIMIT_DECLARED && (!*core || c->core_limit < *core))
            *core = c->core_limit;
        if (c->mem_quota_source == LIMIT_DECLARED &&
            (!*memory || c->mem_quota < *memory))
            *memory = c->mem_quota;
    }
}

/* Appends the pod's limits on single GPUs ("gpu1:10%", "gpu1:2Gi") to a
 * cell, in place of its "-" (they hold there instead of the cell's). */
static void append_gpu_limits(char *cell, size_t len,
                              const struct msg_status_pod *p, bool memory)
{
    size_t n = strcmp(cell, "-") ? strlen(cell) : 0;
    char size[32];

    for (int i = 0; i < p->n_gpu_limits && n < len; i++) {
        const struct pod_gpu_limit *l = &p->gpu_limits[i];
        if (memory ? !l->memory_limit : !l->core_limit)
            continue;
        if (memory)
            format_size(l->memory_limit, size, sizeof(size));
        else
            snprintf(size, sizeof(size), "%u%%", l->core_limit);
        n += (size_t)snprintf(cell + n, len - n, "%sgpu%u:%s", n ? " " : "",
                              l->gpu, size);
    }
}

/* The pods the scheduler knows, with their limits: those set for pods not
 * connected show here before their first process does. */
static void pod_table(FILE *out, const struct ctl_status *st)
{
    static const char *const head[] = {"POD",          "OWNER",    "CORE LIMIT",
                                       "MEMORY LIMIT", "PRIORITY", "MIN SHARE",
                                       "IDLE SWAP",    "CLIENTS"};
    struct table t = {.n_cols = 8};

    table_row(&t, head);
    for (int i = 0; i < st->n_pods; i++) {
        const struct msg_status_pod *p = &st->pods[i];
        char pod[CELL_LEN], owner[24], core[CELL_LEN], memory[CELL_LEN],
            size[32], clients[16], priority[32] = "-", name[16], floor[8] = "-",
                                   idle_swap[32] = "-";
        ctl_pod_name_label(p->pod_namespace, p->pod_name, p->pod_uid, pod,
                           sizeof(pod));
        snprintf(owner, sizeof(owner), p->bound ? "uid %u" : "-", p->owner);
        /* The source that holds (kubernetes.md's order), named unless it
         * is the operator's. */
        unsigned declared_core;
        uint64_t declared_memory;
        declared_limits(st, p, &declared_core, &declared_memory);
        if (p->core_limit || p->annotation_core_limit || declared_core)
            snprintf(core, sizeof(core), "%u%%%s",
                     p->core_limit              ? p->core_limit
                     : p->annotation_core_limit ? p->annotation_core_limit
                                                : declared_core,
                     p->core_limit              ? ""
                     : p->annotation_core_limit ? " annotation"
                                                : " declared");
        else
            snprintf(core, sizeof(core), "-");
        uint64_t bytes = p->memory_limit              ? p->memory_limit
                         : p->annotation_memory_limit ? p->annotation_memory_limit
                         : p->memory_request          ? p->memory_request
                                                      : declared_memory;
        format_size(bytes, size, sizeof(size));
        snprintf(memory, sizeof(memory), "%s%s", bytes ? size : "-",
                 p->memory_limit || !bytes    ? ""
                 : p->annotation_memory_limit ? " annotation"
                 : p->memory_request          ? " request"
                                              : " declared");
        append_gpu_limits(core, sizeof(core), p, false);
        append_gpu_limits(memory, sizeof(memory), p, true);
        if (p->priority || p->annotation_priority) {
            format_priority(p->priority ? p->priority : p->annotation_priority,
                            name, sizeof(name));
            snprintf(priority, sizeof(priority), "%s%s", name,
                     p->priority ? "" : " annotation");
        }
        if (p->min_share)
            snprintf(floor, sizeof(floor), "%u%%", p->min_share);
        if (p->idle_swap || p->annotation_idle_swap)
            idle_swap_label(p->idle_swap ? p->idle_swap : p->annotation_idle_swap,
                            p->idle_swap ? LIMIT_RUNTIME : LIMIT_ANNOTATION,
                            idle_swap, sizeof(idle_swap));
        snprintf(clients, sizeof(clients), "%u", p->clients);
        const char *row[] = {pod,      owner, core,      memory,
                             priority, floor, idle_swap, clients};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

/* Processes that escaped libnvshare, with the pod their cgroup names. */
static void unhooked_table(FILE *out, const struct ctl_status *st)
{
    static const char *const header[] = {"PID",    "GPU", "USED",     "SEEN",
                                         "ORIGIN", "QOS", "CONTAINER"};
    struct table t = {.n_cols = 7};

    fprintf(out,
            "Using a GPU without nvshare (not scheduled, not limited; %" PRIu64
            " seen since start):\n",
            st->node.unhooked_seen);
    table_row(&t, header);
    for (int i = 0; i < st->n_unhooked; i++) {
        const struct msg_status_unhooked *u = &st->unhooked[i];
        char pid[16], gpu[8], used[32], seen[32], container[16];
        bool pod = u->origin == IDENTITY_POD;

        snprintf(pid, sizeof(pid), "%" PRIu32, u->pid);
        snprintf(gpu, sizeof(gpu), "%u", u->gpu);
        format_size(u->used, used, sizeof(used));
        format_duration(u->seen_ns, seen, sizeof(seen));
        snprintf(container, sizeof(container), "%.12s",
                 u->container_id[0] ? u->container_id : "-");
        const char *row[] = {pid,
                             gpu,
                             used,
                             seen,
                             pod ? u->pod_uid : ctl_origin_name(u->origin),
                             pod ? pod_qos_name(u->qos) : "-",
                             container};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

void render_settings(FILE *out, const struct ctl_status *st)
{
    struct table t = {.n_cols = 3};
    static const char *const header[] = {"SETTING", "VALUE", "SOURCE"};

    table_row(&t, header);
    for (int i = 0; i < st->n_settings; i++) {
        const struct msg_status_setting *s = &st->settings[i];
        const char *row[] = {s->name, s->value,
                             ctl_setting_source_name(s->source)};
        table_row(&t, row);
    }
    table_flush(out, &t);
}

void render_table(FILE *out, const struct ctl_status *st)
{
    char tq[32], up[32], window[32], sw[32];

    if (st->node.tq_ns)
        format_duration(st->node.tq_ns, tq, sizeof(tq));
    else
        snprintf(tq, sizeof(tq), "auto");
    format_duration(st->node.uptime_ns, up, sizeof(up));
    format_duration(st->node.window_ns, window, sizeof(window));
    fprintf(out,
            "TQ %s   anti-thrash %s   window %s   uptime %s   clients %u   "
            "gpus %u   unregistered %u   refused %llu\n",
            tq, st->node.anti_thrash ? "on" : "off", window, up,
            st->node.n_clients, st->node.n_gpus, st->node.n_pending,
            (unsigned long long)st->node.refused);
    if (st->node.switch_time_fixed_ns) {
        format_duration(st->node.switch_time_fixed_ns, sw, sizeof(sw));
        fprintf(out, "switch time %s (fixed)", sw);
    } else {
        fprintf(out, "switch time auto (swap time x %u)",
                st->node.switch_multiplier);
    }
    fprintf(out, "   memory reserve %u%%   oversubscription %s by default\n",
            st->node.reserve_percent, st->node.oversub_default ? "on" : "off");
    for (int i = 0; i < st->n_gpus; i++) {
        fputc('\n', out);
        gpu_block(out, st, &st->gpus[i]);
    }
    fputc('\n', out);
    if (st->n_clients == 0) {
        fputs("no clients registered\n", out);
    } else {
        client_sched_table(out, st);
        fputc('\n', out);
        client_resource_table(out, st);
        fputc('\n', out);
        client_swap_table(out, st);
    }
    if (st->n_pods) {
        fputc('\n', out);
        pod_table(out, st);
    }
    if (st->n_unhooked) {
        fputc('\n', out);
        unhooked_table(out, st);
    }
}
