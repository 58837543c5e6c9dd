/* quota.c - see quota.h for the model. */
#include "quota.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

void quota_init(struct quota *q, int n_gpus)
{
    memset(q, 0, sizeof(*q));
    q->n_gpus = n_gpus;
}

bool quota_grow(struct quota *q, int table_size)
{
    bool ok = true;

    if (table_size <= q->table_size)
        return true;
    for (int gpu = 0; ok && gpu < q->n_gpus; gpu++) {
        struct quota_gpu *g = &q->gpus[gpu];
        ok = grow_zeroed(&g->clients, sizeof(*g->clients), q->table_size,
                         table_size) &&
             grow_zeroed(&g->accounts, sizeof(*g->accounts), q->table_size,
                         table_size);
    }
    if (ok)
        q->table_size = table_size;
    return ok;
}

void quota_destroy(struct quota *q)
{
    for (int gpu = 0; gpu < q->n_gpus; gpu++) {
        free(q->gpus[gpu].clients);
        free(q->gpus[gpu].accounts);
        q->gpus[gpu] = (struct quota_gpu){0};
    }
    q->table_size = 0;
}

void quota_actions_free(struct quota_actions *out)
{
    free(out->list);
    *out = (struct quota_actions){0};
}

/* What the account's clients on gpu hold (allocated + credit) and have
 * allocated. */
static void account_totals(const struct quota *q, int gpu, int account,
                           uint64_t *held, uint64_t *allocated)
{
    *held = *allocated = 0;
    for (int c = 0; c < q->table_size; c++) {
        const struct quota_client *qc = &q->gpus[gpu].clients[c];
        if (qc->present && qc->account == account) {
            *held += qc->held;
            *allocated += qc->allocated;
        }
    }
}

uint64_t quota_account_held(const struct quota *q, int gpu, int account)
{
    uint64_t held, allocated;

    account_totals(q, gpu, account, &held, &allocated);
    return held;
}

uint64_t quota_account_allocated(const struct quota *q, int gpu, int account)
{
    uint64_t held, allocated;

    account_totals(q, gpu, account, &held, &allocated);
    return allocated;
}

/* Actions carry what the client is told, as it is when they are decided. */
static void emit(const struct quota *q, struct quota_actions *out,
                 enum quota_action_kind kind, int gpu, int client, uint32_t seq,
                 uint64_t bytes)
{
    struct quota_action a = {kind, gpu, client, seq, bytes, 0, 0};
    int account = q->gpus[gpu].clients[client].account;

    if (out->n == out->size) {
        int size = out->size ? 2 * out->size : 8;
        struct quota_action *list = realloc(out->list, sizeof(a) * (size_t)size);
        if (!list) {
            out->lost++;
            return;
        }
        out->list = list;
        out->size = size;
    }
    if (kind != QUOTA_RECLAIM) {
        a.quota = q->gpus[gpu].accounts[account].limit;
        a.pod_held = quota_account_held(q, gpu, account);
    }
    out->list[out->n++] = a;
}

void quota_join(struct quota *q, int gpu, int client, int account,
                struct quota_actions *out)
{
    q->gpus[gpu].clients[client] =
        (struct quota_client){.present = true, .account = account};
    emit(q, out, QUOTA_LIMIT, gpu, client, 0, 0);
}

void quota_move(struct quota *q, int gpu, int client, int account,
                struct quota_actions *out)
{
    struct quota_gpu *g = &q->gpus[gpu];
    int from = g->clients[client].account;

    g->clients[client].account = account;
    for (int c = 0; c < q->table_size; c++)
        if (g->clients[c].present &&
            (g->clients[c].account == from || g->clients[c].account == account))
            emit(q, out, QUOTA_LIMIT, gpu, c, 0, 0);
}

static void note_allocated(struct quota *q, int gpu, int client,
                           uint64_t allocated)
{
    struct quota_client *qc = &q->gpus[gpu].clients[client];
    struct quota_account *a = &q->gpus[gpu].accounts[qc->account];

    qc->allocated = allocated;
    uint64_t total = quota_account_allocated(q, gpu, qc->account);
    if (total > a->peak)
        a->peak = total;
}

/* Grants the request if the pod has room for `need`; returns whether it did. */
static bool try_grant(struct quota *q, const struct quota_request *r,
                      struct quota_actions *out)
{
    struct quota_client *qc = &q->gpus[r->gpu].clients[r->client];
    uint64_t limit = q->gpus[r->gpu].accounts[qc->account].limit;
    uint64_t held = quota_account_held(q, r->gpu, qc->account);
    uint64_t room = held < limit ? limit - held : 0, grant;

    if (limit == 0) {
        grant = r->want;
    } else {
        if (r->need > room)
            return false;
        grant = r->want < room ? r->want : room;
    }
    qc->held += grant;
    emit(q, out, QUOTA_GRANT, r->gpu, r->client, r->seq, grant);
    return true;
}

static void refuse(struct quota *q, const struct quota_request *r,
                   struct quota_actions *out)
{
    int account = q->gpus[r->gpu].clients[r->client].account;

    q->gpus[r->gpu].accounts[account].refused++;
    emit(q, out, QUOTA_REFUSE, r->gpu, r->client, r->seq, 0);
}

void quota_refuse(struct quota *q, int gpu, int client, uint32_t seq,
                  struct quota_actions *out)
{
    refuse(q, &(struct quota_request){.gpu = gpu, .client = client, .seq = seq},
           out);
}

static void unpark(struct quota *q, int i)
{
    q->parked[i] = q->parked[--q->n_parked];
}

/* Decides parked requests that now fit, oldest first. */
static void retry_parked(struct quota *q, uint64_t now, bool final,
                         struct quota_actions *out)
{
    for (int i = 0; i < q->n_parked;) {
        struct quota_request *r = &q->parked[i];
        if (try_grant(q, r, out)) {
            unpark(q, i);
        } else if (final && now >= r->deadline) {
            refuse(q, r, out);
            unpark(q, i);
        } else {
            i++;
        }
    }
}

void quota_request(struct quota *q, int gpu, int client, uint32_t seq,
                   uint64_t need, uint64_t want, uint64_t allocated,
                   uint64_t now, struct quota_actions *out)
{
    struct quota_gpu *g = &q->gpus[gpu];
    struct quota_client *qc = &g->clients[client];
    struct quota_request r = {gpu,
                              client,
                              seq,
                              need,
                              want < need ? need : want,
                              now + QUOTA_RECLAIM_TIMEOUT_NS};
    uint64_t reclaimable = 0;

    if (!qc->present)
        return;
    note_allocated(q, gpu, client, allocated);
    if (try_grant(q, &r, out))
        return;
    for (int c = 0; c < q->table_size; c++) {
        struct quota_client *peer = &g->clients[c];
        if (c != client && peer->present && peer->account == qc->account &&
            peer->held > peer->allocated)
            reclaimable += peer->held - peer->allocated;
    }
    uint64_t limit = g->accounts[qc->account].limit;
    uint64_t held = quota_account_held(q, gpu, qc->account);
    uint64_t room = held < limit ? limit - held : 0;
    if (reclaimable == 0 || room + reclaimable < need ||
        q->n_parked == QUOTA_MAX_PARKED) {
        refuse(q, &r, out);
        return;
    }
    q->parked[q->n_parked++] = r;
    for (int c = 0; c < q->table_size; c++) {
        struct quota_client *peer = &g->clients[c];
        if (c != client && peer->present && peer->account == qc->account &&
            peer->held > peer->allocated)
            emit(q, out, QUOTA_RECLAIM, gpu, c, 0, 0);
    }
}

void quota_return(struct quota *q, int gpu, int client, uint64_t bytes,
                  uint64_t allocated, uint64_t now, struct quota_actions *out)
{
    struct quota_client *qc = &q->gpus[gpu].clients[client];

    if (!qc->present)
        return;
    qc->held = bytes < qc->held ? qc->held - bytes : 0;
    note_allocated(q, gpu, client, allocated);
    retry_parked(q, now, false, out);
}

void quota_report(struct quota *q, int gpu, int client, uint64_t allocated)
{
    struct quota_client *qc = &q->gpus[gpu].clients[client];

    if (!qc->present)
        return;
    if (qc->held < allocated)
        qc->held = allocated;
    note_allocated(q, gpu, client, allocated);
}

void quota_leave(struct quota *q, int client, uint64_t now,
                 struct quota_actions *out)
{
    for (int i = 0; i < q->n_parked;)
        if (q->parked[i].client == client)
            unpark(q, i);
        else
            i++;
    for (int gpu = 0; gpu < q->n_gpus; gpu++)
        q->gpus[gpu].clients[client] = (struct quota_client){0};
    retry_parked(q, now, false, out);
}

void quota_set_limit(struct quota *q, int gpu, int account, uint64_t limit,
                     struct quota_actions *out)
{
    q->gpus[gpu].accounts[account].limit = limit;
    for (int c = 0; c < q->table_size; c++) {
        const struct quota_client *qc = &q->gpus[gpu].clients[c];
        if (qc->present && qc->account == account)
            emit(q, out, QUOTA_LIMIT, gpu, c, 0, 0);
    }
}

uint64_t quota_tick(struct quota *q, uint64_t now, struct quota_actions *out)
{
    uint64_t next = 0;

    retry_parked(q, now, true, out);
    for (int i = 0; i < q->n_parked; i++)
        if (next == 0 || q->parked[i].deadline < next)
            next = q->parked[i].deadline;
    return next;
}

void quota_reset_account(struct quota *q, int account)
{
    for (int gpu = 0; gpu < q->n_gpus; gpu++)
        q->gpus[gpu].accounts[account] = (struct quota_account){0};
}
