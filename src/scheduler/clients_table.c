/* clients_table.c - the bottom of the client socket's files (clients*.c):
 * what they and the metrics read of the clients' table, calling none of
 * them: a client's pod for the logs, the bound of what it may hold, the
 * counts. */
#include <stdint.h>

#include "clients_internal.h"
#include "scheduler.h"

/* Where a GPU's capacity is not known: 1 PiB (clients.c, "Bounds"). */
#define CLIENT_BYTES_UNKNOWN_MAX (1ull << 50)

const char *client_pod(const struct client *c)
{
    static char text[2 * PROTO_NAME_MAX + 8];

    pod_id_format(&c->sched->accounts[c->account].pod, text, sizeof(text));
    return text;
}

uint64_t client_bytes_bound(const struct scheduler *s, int gpu)
{
    struct policy_gpu_view g;

    policy_view_gpu(s->policy, gpu, &g);
    if (!g.capacity)
        return CLIENT_BYTES_UNKNOWN_MAX;
    return g.capacity < UINT64_MAX / CLIENT_BYTES_PER_CAPACITY
               ? g.capacity * CLIENT_BYTES_PER_CAPACITY
               : UINT64_MAX;
}

int clients_count(const struct scheduler *s)
{
    int n = 0;

    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && s->clients[i]->registered;
    return n;
}

int clients_pending(const struct scheduler *s)
{
    int n = 0;

    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && !s->clients[i]->registered;
    return n;
}

int client_account_on(const struct client *c, int g)
{
    for (int i = 0; i < c->n_gpus; i++)
        if (c->node_gpu[i] == g)
            return c->billed[i];
    return c->account;
}

bool client_billed_to(const struct client *c, int account)
{
    if (c->account == account)
        return true;
    for (int i = 0; i < c->n_gpus; i++)
        if (c->node_gpu[i] >= 0 && c->billed[i] == account)
            return true;
    return false;
}
