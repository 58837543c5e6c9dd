/* tables.c - the tables indexed by client slot or account, grown together.
 *
 * A slot is given out only below the table size of every module (the
 * clients, the accounts, the per-GPU measurements, the policy and the
 * quota), so none of them needs a bound check of its own; the size doubles
 * when the slots run out, so the copying costs O(1) per connection over
 * time. */
#include "scheduler.h"

#include "grow.h"

bool scheduler_grow(struct scheduler *s, int table_size)
{
    int old = s->table_size;

    if (table_size <= old)
        return true;
    /* Each step leaves what it grew valid: a failure keeps the old size,
     * and a later call grows what is left. */
    if (!grow_zeroed(&s->clients, sizeof(*s->clients), old, table_size) ||
        !grow_zeroed(&s->accounts, sizeof(*s->accounts), old, table_size))
        return false;
    for (int g = 0; g < s->n_gpus; g++)
        if (!grow_zeroed(&s->overhead[g], sizeof(uint64_t), old, table_size) ||
            !grow_zeroed(&s->evictable[g], sizeof(uint64_t), old, table_size) ||
            !grow_zeroed(&s->pending[g], sizeof(uint64_t), old, table_size))
            return false;
    if (!policy_grow(s->policy, table_size) || !quota_grow(&s->quota, table_size))
        return false;
    /* Last, and undone on failure: a later call zeroes these pointers. */
    for (int i = old; i < table_size; i++) {
        if (!(s->clients[i] = calloc(1, sizeof(struct client)))) {
            while (i-- > old) {
                free(s->clients[i]);
                s->clients[i] = NULL;
            }
            return false;
        }
        s->clients[i]->slot = i;
        s->clients[i]->fd = -1;
    }
    s->table_size = table_size;
    return true;
}

bool scheduler_account_room(struct scheduler *s)
{
    for (int i = 0; i < s->table_size; i++)
        if (!s->accounts[i].refs)
            return true;
    return scheduler_grow(s, 2 * s->table_size);
}
