/* group.c - nvsharectl set group and reset group: pods that draw on one
 * budget on one GPU (the scheduler's groups.h; a shared DRA claim).
 *
 * nvsharectl reads the options; the scheduler judges the group (its name,
 * its pods, the GPU) as it judges every setting. */
#include <string.h>

#include "commands.h"
#include "parse.h"

const char group_set_synopsis[] =
    "nvsharectl set group NAME --gpu INDEX|UUID --pods POD,POD... "
    "[--memory SIZE] [--core PCT] [--priority CLASS]";
const char group_reset_synopsis[] = "nvsharectl reset group NAME";
const char group_help[] =
    "the pods (1-16, as set's pods) draw on one budget on that GPU: their "
    "processes there are held together to SIZE of memory and PCT % of its "
    "time, at CLASS (default normal), so one may use what the others leave "
    "idle; on other GPUs each pod keeps its own limits. Setting a group of "
    "the same NAME replaces it; kept across restarts. 'reset group NAME' "
    "removes it";

/* "a,b,c" into the message's members. 0, or a usage error's exit status. */
static int take_pods(const struct command *cmd, const char *list,
                     struct msg_ctl_set_group *g)
{
    const char *p = list;

    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof(g->members[0]))
            return usage_error(cmd, "--pods: '%s' is no list of pods", list);
        if (g->n_members == PROTO_GROUP_MAX_MEMBERS)
            return usage_error(cmd, "--pods: %d pods at most",
                               PROTO_GROUP_MAX_MEMBERS);
        memcpy(g->members[g->n_members++], p, n);
        p += n + (p[n] == ',');
    }
    return g->n_members ? 0 : usage_error(cmd, "--pods: name the pods");
}

/* One option of set group's: 1 taken, 0 not one of them, or a usage
 * error's exit status (negated). */
static int take_option(const struct command *cmd, int argc, char **argv, int *i,
                       struct msg_ctl_set_group *g)
{
    static const char *const names[] = {"--pods", "--memory", "--core",
                                        "--priority"};
    char err[PARSE_ERR_LEN];
    const char *v = NULL;
    uint64_t bytes;
    unsigned priority;
    long core;

    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int got = option_value(names[k], argc, argv, i, &v);
        if (got < 0)
            return -usage_error(cmd, "option '%s' needs a value", names[k]);
        if (!got)
            continue;
        switch (k) {
        case 0:
            return take_pods(cmd, v, g) ? -EXIT_USAGE : 1;
        case 1:
            if (parse_size_bytes(v, &bytes, err) || !bytes)
                return -usage_error(cmd, "--memory: %s", *err ? err : "above 0");
            g->memory_limit = bytes;
            return 1;
        case 2:
            if (parse_int_range(v, 1, 100, &core, err))
                return -usage_error(cmd, "--core: %s (1-100)", err);
            g->core_limit = (uint8_t)core;
            return 1;
        default:
            if (parse_priority(v, &priority, err))
                return -usage_error(cmd, "--priority: %s", err);
            g->priority = (uint8_t)priority;
            return 1;
        }
    }
    return 0;
}

int set_group(const struct command *cmd, int argc, char **argv, const char *gpu,
              struct msg_ctl_reply *reply)
{
    struct msg_ctl_set_group g = {0};
    char err[CTL_ERR_LEN];
    const char *name = NULL;

    for (int i = 2; i < argc; i++) {
        int got = take_option(cmd, argc, argv, &i, &g);
        if (got < 0)
            return -got;
        if (got)
            continue;
        if (argv[i][0] == '-' || name)
            return usage_error(cmd, "set group: unexpected '%s'", argv[i]);
        name = argv[i];
    }
    if (!name || strlen(name) >= sizeof(g.name))
        return usage_error(cmd, "set group: a NAME of at most %d bytes",
                           PROTO_GROUP_NAME_MAX - 1);
    if (!gpu || strlen(gpu) >= sizeof(g.gpu))
        return usage_error(cmd, "set group: --gpu names its GPU");
    if (!g.n_members)
        return usage_error(cmd, "set group: --pods names its pods");
    strcpy(g.name, name);
    strcpy(g.gpu, gpu);
    if (ctl_set_group(&target, &g, reply, err))
        return fail(err);
    return 0;
}
