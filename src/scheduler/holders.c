/* holders.c - holders that cannot answer DROP_LOCK: a stopped process
 * (SIGSTOP, a debugger) would keep its GPU idle until the drain deadline,
 * and, holding it without a DROP, for a whole quantum. The daemon looks at
 * the state of the processes that run on a GPU someone waits for, or that
 * drain, and has the policy revoke a stopped one at once. */
#include <stdio.h>
#include <string.h>

#include "file.h"
#include "log.h"
#include "scheduler.h"

#define STOP_CHECK_NS 250000000ull /* 250 ms */

bool process_stopped(pid_t pid)
{
    char path[64], stat[512];

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (pid <= 0 || !file_read_text(path, stat, sizeof(stat)))
        return false; /* gone, or another pid namespace: not ours to judge */
    /* "pid (comm) S ...": comm may hold spaces and parentheses. */
    const char *end = strrchr(stat, ')');
    return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
}

/* Whether the client runs on gpu while someone waits for it, or drains it:
 * then its silence costs others time. */
static bool watched(const struct scheduler *s, int gpu, int slot, uint64_t now)
{
    struct policy_member_view m;

    if (!policy_is_running(s->policy, gpu, slot) ||
        !policy_view_member(s->policy, gpu, slot, now, &m))
        return false;
    return m.state == MEMBER_DRAINING ||
           policy_view_waiting(s->policy, gpu, now, NULL, 0) > 0;
}

uint64_t holders_revoke_stopped(struct scheduler *s, uint64_t now,
                                struct policy_actions *out)
{
    bool watching = false;

    if (s->stop_check_due && now < s->stop_check_due)
        return s->stop_check_due;
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered || c->doomed)
            continue;
        for (int i = 0; i < c->n_gpus; i++) {
            int gpu = c->node_gpu[i];
            if (gpu < 0 || !watched(s, gpu, slot, now))
                continue;
            watching = true;
            if (process_stopped(c->pid))
                policy_revoke(s->policy, gpu, slot, now, out);
        }
    }
    /* Nothing watched: the next tick (a REQ_LOCK, a DROP) looks at once. */
    s->stop_check_due = watching ? now + STOP_CHECK_NS : 0;
    return s->stop_check_due;
}
