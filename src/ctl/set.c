/* set.c - nvsharectl set, reset and anti-thrash: changing a setting.
 *
 * The node settings are the scheduler's table (settings.def): their names,
 * arguments, parsing, synopsis and help come from its run-time rows, so a
 * new one is here as soon as it is there. nvsharectl reads a value's text
 * and leaves its bounds to the scheduler, which judges every value alike
 * (exit status 1 for a refusal, 2 for text that is no value at all). A
 * pod's settings are this file's own rows: each reads its value its own way
 * (a user name is this host's). */
#include <ctype.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "parse.h"
#include "settings.h"


/* Prints the scheduler's answer: exit status 1 for a refusal. */
static int answer(const struct msg_ctl_reply *reply)
{
    if (reply->status != 0)
        return fail(reply->text);
    puts(reply->text);
    return 0;
}

/* Sends one CTL_SET or CTL_RESET and reports the scheduler's answer. */
/* gpu: a pod's limit on that GPU alone (CTL_SET_GPU), else NULL. */
static int apply(uint16_t type, const char *name, uint64_t value,
                 const char *subject, const char *gpu)
{
    char err[CTL_ERR_LEN];
    struct msg_ctl_reply reply;

    if (ctl_set(&target, type, name, value, subject, gpu, &reply, err))
        return fail(err);
    return answer(&reply);
}

/* ---- a pod's settings ---------------------------------------------------- */

/* Each reads text into *value or returns a usage error's exit status;
 * "none" (0 on the wire) removes the setting. */
typedef int pod_parse_fn(const struct command *cmd, const char *text,
                         uint64_t *value);

/* A per-pod percentage: "none" removes the operator's setting (a lower
 * limit the pod's processes declared still holds); otherwise 1-100. */
static int parse_percent(const struct command *cmd, const char *what,
                         const char *text, uint64_t *value)
{
    char err[PARSE_ERR_LEN];
    long pct = 0;

    if (strcmp(text, "none") && parse_int_range(text, 1, 100, &pct, err))
        return usage_error(cmd, "%s: %s (1-100, or none)", what, err);
    *value = (uint64_t)pct;
    return 0;
}

static int parse_core_limit(const struct command *cmd, const char *text,
                            uint64_t *value)
{
    return parse_percent(cmd, "core limit", text, value);
}

static int parse_min_share(const struct command *cmd, const char *text,
                           uint64_t *value)
{
    return parse_percent(cmd, "min share", text, value);
}

/* "none" removes a run-time quota; otherwise a size such as 4Gi. */
static int parse_memory_limit(const struct command *cmd, const char *text,
                              uint64_t *value)
{
    char err[PARSE_ERR_LEN];

    *value = 0;
    if (strcmp(text, "none") && parse_size_bytes(text, value, err))
        return usage_error(cmd, "memory limit: %s; or none", err);
    if (strcmp(text, "none") && *value == 0)
        return usage_error(cmd, "memory limit: must be above 0 (or none)");
    return 0;
}

/* "none" removes the operator's priority (back to the annotation's, else
 * normal); otherwise high, normal, low or a class 1-9. */
static int parse_pod_priority(const struct command *cmd, const char *text,
                              uint64_t *value)
{
    char err[PARSE_ERR_LEN];
    unsigned priority = PRIORITY_UNSET;

    if (strcmp(text, "none") && parse_priority(text, &priority, err))
        return usage_error(cmd, "%s (or none)", err);
    *value = priority;
    return 0;
}

/* "off" keeps the pod's idle memory on the GPU, "on" lets it be swapped
 * out (over an annotation's off), "none" removes the operator's word. */
static int parse_idle_swap(const struct command *cmd, const char *text,
                           uint64_t *value)
{
    if (!strcmp(text, "off"))
        *value = IDLE_SWAP_OFF;
    else if (!strcmp(text, "on"))
        *value = IDLE_SWAP_ON;
    else if (!strcmp(text, "none"))
        *value = IDLE_SWAP_UNSET;
    else
        return usage_error(cmd, "idle swap: off, on or none, not '%s'", text);
    return 0;
}

/* A user name or uid. Root is no owner to name: its processes may join any
 * pod already. */
static int parse_owner(const struct command *cmd, const char *text,
                       uint64_t *value)
{
    char err[PARSE_ERR_LEN];
    long uid = 0;

    if (!strcmp(text, "none")) {
        *value = 0;
        return 0;
    }
    if (strspn(text, "0123456789") == strlen(text)) {
        if (parse_int_range(text, 0, UINT32_MAX - 1, &uid, err))
            return usage_error(cmd, "owner: %s (a user name, a uid or none)",
                               err);
    } else {
        struct passwd *pw = getpwnam(text);
        if (!pw)
            return usage_error(cmd, "owner: no user '%s' on this host", text);
        uid = (long)pw->pw_uid;
    }
    if (uid == 0)
        return usage_error(cmd,
                           "owner: root's processes may join any pod; name "
                           "the user that runs it");
    *value = (uint64_t)uid;
    return 0;
}

#define ANY_POD "<pod|namespace/pod|client-id>"

static const struct pod_arg {
    const char *name; /* the scheduler's too (control_set.c) */
    const char *args; /* after the name in the synopsis */
    const char *head; /* the help's first column */
    pod_parse_fn *parse;
    const char *brief; /* the overview's line */
    const char *help;
} pod_args[] = {
    {"core-limit", ANY_POD " <1-100|none> [--gpu INDEX|UUID]",
     "core-limit POD PCT", parse_core_limit,
     "limit a pod to PCT % of each GPU's time",
     "the share of each GPU's time the pod may use per accounting window; "
     "applies "
     "at once and keeps the time already used; 'none' removes the run-time "
     "limit "
     "(back to NVSHARE_GPU_CORE_LIMIT, if declared); with --gpu, on that GPU "
     "alone, in place of the one for every GPU"},
    {"memory-limit", ANY_POD " <size|none> [--gpu INDEX|UUID]",
     "memory-limit POD SIZE", parse_memory_limit,
     "limit a pod's GPU memory on each GPU, e.g. 4Gi",
     "the pod's GPU memory quota on each GPU (4Gi, 512Mi, plain bytes): "
     "raising "
     "applies to the next allocation, lowering refuses new ones until usage "
     "falls "
     "under it (nothing is revoked); 'none' falls back to "
     "NVSHARE_GPU_MEMORY_LIMIT, "
     "if declared; with --gpu, on that GPU alone, in place of the one for "
     "every GPU"},
    {"priority", ANY_POD " <high|normal|low|1-9|none>", "priority POD CLASS",
     parse_pod_priority, "high, normal or low: a higher class preempts",
     "high, normal (default) or low, or a class 1-9 (low 1, normal 2, high 3): "
     "a "
     "pod of a higher class that wants a GPU preempts lower ones at once, and "
     "lower "
     "classes run only while no higher one wants it; also before the pod "
     "connects; "
     "'none' falls back to the nvshare.com/priority annotation, else normal; "
     "NVSHARE_PRIORITY in a process can only lower it"},
    {"min-share", ANY_POD " <1-100|none>", "min-share POD PCT", parse_min_share,
     "a floor of each window under higher classes",
     "a floor: the pod gets PCT % of each accounting window even while higher "
     "classes want the GPU (its core limit still caps it); 'none' removes it"},
    {"idle-swap", ANY_POD " <off|on|none>", "idle-swap POD off|on",
     parse_idle_swap, "off: the pod's idle memory stays on the GPU",
     "off: the pod's memory stays on the GPU while it is idle (gave the GPU "
     "back and has not asked again), however long others wait for the room; "
     "on (default): idle for idle-swap-after, it is swapped out for them. A "
     "pod that takes turns with others still swaps when its turn ends. Also "
     "before the pod connects, kept across restarts; 'none' falls back to the "
     "nvshare.com/idle-swap annotation, else on"},
    {"owner", "<pod|namespace/pod> <user|uid|none>", "owner POD USER", parse_owner,
     "on a plain host, the user the pod belongs to: only its processes get the "
     "pod's priority and floor",
     "on a plain host, the user (name or uid) the pod belongs to: only its "
     "processes (and root's) join it; others are billed on their own. Without "
     "an "
     "owner, a pod with settings binds no one: each user's processes of it are "
     "held to its limits apart, and only root's get a priority above normal or "
     "the "
     "floor. Kept across restarts; 'none' removes it"},
};
#define N_POD_ARGS (sizeof(pod_args) / sizeof(pod_args[0]))

/* Whether the pod setting can be set on one GPU (--gpu): the limits, which
 * a pod's DRA claims give it GPU by GPU. */
static bool pod_per_gpu(const struct pod_arg *a)
{
    return a->parse == parse_core_limit || a->parse == parse_memory_limit;
}

static const struct pod_arg *find_pod_arg(const char *name)
{
    for (size_t i = 0; i < N_POD_ARGS; i++)
        if (!strcmp(pod_args[i].name, name))
            return &pod_args[i];
    return NULL;
}

/* ---- the commands -------------------------------------------------------- */

/* A node setting from its text: read here, judged by the scheduler. */
static int set_node(const struct command *cmd, int id, const char *text,
                    const char *gpu)
{
    char why[PARSE_ERR_LEN], err[CTL_ERR_LEN];
    uint64_t value;

    if (setting_read(id, text, &value, why, sizeof(why))) {
        setting_read_error(id, text, why, err, sizeof(err));
        return usage_error(cmd, "%s", err);
    }
    return apply(MSG_CTL_SET, settings_table[id].name, value, gpu ? gpu : "",
                 NULL);
}

/* Takes --gpu (anywhere after "set") out of argv into *gpu. 0, or a usage
 * error's exit status. */
static int take_gpu_option(const struct command *cmd, int *argc, char **argv,
                           const char **gpu)
{
    int kept = 1;

    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        int got = option_value("--gpu", *argc, argv, &i, &v);

        if (got < 0 || (got > 0 && !*v))
            return usage_error(cmd, "option '--gpu' needs a GPU index or UUID");
        if (got == 0)
            argv[kept++] = argv[i];
        else
            *gpu = v;
    }
    *argc = kept;
    return 0;
}

/* The names of every setting (node ones first) or of the per-GPU ones,
 * joined as "a, b or c" with prefix before each. */
static void names(char *buf, size_t len, bool per_gpu_only, const char *prefix)
{
    const char *list[SETTING_COUNT + N_POD_ARGS];
    size_t n = 0, used = 0;

    for (int id = 0; id < SETTING_COUNT; id++)
        if (settings_table[id].runtime &&
            (!per_gpu_only || settings_table[id].per_gpu))
            list[n++] = settings_table[id].name;
    for (size_t i = 0; i < N_POD_ARGS; i++)
        if (!per_gpu_only || pod_per_gpu(&pod_args[i]))
            list[n++] = pod_args[i].name;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s%s",
                                 i == 0      ? ""
                                 : i + 1 < n ? ", "
                                             : " or ",
                                 prefix, list[i]);
}

int run_set(const struct command *cmd, int argc, char **argv)
{
    const char *gpu = NULL;
    char list[256];
    int rc, id;

    if ((rc = take_gpu_option(cmd, &argc, argv, &gpu)))
        return rc;
    if (argc > 1)
        set_subject = argv[1];
    if (argc > 1 && !strcmp(argv[1], "group")) {
        struct msg_ctl_reply reply;
        for (int i = 2; i < argc; i++)
            if (is_help(argv[i]))
                return show_help(cmd);
        if ((rc = set_group(cmd, argc, argv, gpu, &reply)))
            return rc;
        return answer(&reply);
    }
    id = argc > 1 ? setting_find_runtime(argv[1]) : -1;
    const struct pod_arg *pod = argc > 1 ? find_pod_arg(argv[1]) : NULL;

    if (gpu && !(pod && pod_per_gpu(pod)) &&
        (id < 0 || !settings_table[id].per_gpu)) {
        for (int i = 1; i < argc; i++)
            if (is_help(argv[i]))
                return show_help(cmd);
        names(list, sizeof(list), true, "set ");
        return usage_error(cmd, "option '--gpu' applies to '%s' only", list);
    }
    rc = plain_args(cmd, argc, argv, pod ? 3 : 2,
                    pod ? "a pod setting needs a pod (or client id) and a value"
                        : "which setting, and to what?");
    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    if (id >= 0)
        return set_node(cmd, id, argv[2], gpu);
    if (pod) {
        uint64_t value;
        if ((rc = pod->parse(cmd, argv[3], &value)))
            return rc;
        return apply(MSG_CTL_SET, pod->name, value, argv[2], gpu);
    }
    names(list, sizeof(list), false, "");
    return usage_error(cmd, "unknown setting '%s' (%s)", argv[1], list);
}

int run_reset(const struct command *cmd, int argc, char **argv)
{
    char list[128], what[160];
    int rc;

    setting_runtime_names(list, sizeof(list));
    snprintf(what, sizeof(what), "which setting? %s", list);
    if (argc > 1 && !strcmp(argv[1], "group")) {
        if ((rc = plain_args(cmd, argc, argv, 2, "which group?")))
            return rc == HELP_SHOWN ? 0 : rc;
        return apply(MSG_CTL_RESET, "group", 0, argv[2], NULL);
    }
    if ((rc = plain_args(cmd, argc, argv, 1, what)))
        return rc == HELP_SHOWN ? 0 : rc;
    return apply(MSG_CTL_RESET, argv[1], 0, "", NULL);
}

int run_anti_thrash(const struct command *cmd, int argc, char **argv)
{
    int rc = plain_args(cmd, argc, argv, 1, "say on or off");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    return set_node(cmd, SETTING_ANTI_THRASH, argv[1], NULL);
}

/* ---- synopsis and help --------------------------------------------------- */

/* Text written by fill into memory, kept for the process's life. */
static const char *memory_text(void (*fill)(FILE *out))
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (!out)
        return "";
    fill(out);
    fclose(out);
    return text ? text : "";
}

static void write_set_synopsis(FILE *out)
{
    char arg[96];

    for (int id = 0; id < SETTING_COUNT; id++) {
        if (!settings_table[id].runtime)
            continue;
        setting_synopsis_arg(id, arg, sizeof(arg));
        fprintf(out, "%snvsharectl set %s %s%s", ftell(out) ? "\n       " : "",
                settings_table[id].name, arg,
                settings_table[id].per_gpu ? " [--gpu INDEX|UUID]" : "");
    }
    for (size_t i = 0; i < N_POD_ARGS; i++)
        fprintf(out, "\n       nvsharectl set %s %s", pod_args[i].name,
                pod_args[i].args);
    fprintf(out, "\n       %s", group_set_synopsis);
}

static void write_set_help(FILE *out)
{
    fputs("Changes a setting of the running scheduler and prints its "
          "answer.\n\n",
          out);
    settings_runtime_help(out);
    for (size_t i = 0; i < N_POD_ARGS; i++)
        settings_paragraph(out, SETTINGS_HELP_COL, pod_args[i].head,
                           pod_args[i].help);
    settings_paragraph(out, SETTINGS_HELP_COL, "group NAME", group_help);
    fputs("\nExit status 1 if the scheduler refuses the value.\n", out);
}

static void write_reset_synopsis(FILE *out)
{
    fputs("nvsharectl reset ", out);
    for (int id = 0, n = 0; id < SETTING_COUNT; id++)
        if (settings_table[id].runtime)
            fprintf(out, "%s%s", n++ ? "|" : "", settings_table[id].name);
    fprintf(out, "\n       %s", group_reset_synopsis);
}

const char *set_synopsis(void)
{
    static const char *text;
    return text ? text : (text = memory_text(write_set_synopsis));
}

const char *set_help(void)
{
    static const char *text;
    return text ? text : (text = memory_text(write_set_help));
}

const char *reset_synopsis(void)
{
    static const char *text;
    return text ? text : (text = memory_text(write_reset_synopsis));
}

/* The overview's second column, as main.c's lines of the other commands. */
#define OVERVIEW_COL 27

/* The overview's argument of a node setting: "D|auto", "MODE [--gpu G]". */
static void overview_arg(int id, char *buf, size_t len)
{
    const struct setting *s = &settings_table[id];
    char upper[32];
    size_t i = 0;

    for (; s->name[i] && i + 1 < sizeof(upper); i++)
        upper[i] = (char)toupper((unsigned char)s->name[i]);
    upper[i] = '\0';
    snprintf(buf, len, "%s%s%s",
             s->kind == SETTING_DURATION ? "D"
             : s->kind == SETTING_SWITCH ? "on|off"
                                         : upper,
             s->zero_is_auto || s->auto_at_runtime ? "|auto" : "",
             s->per_gpu ? " [--gpu G]" : "");
}

void set_overview(FILE *out)
{
    char head[96], arg[64], list[128], text[256];

    for (int id = 0; id < SETTING_COUNT; id++) {
        if (!settings_table[id].runtime)
            continue;
        overview_arg(id, arg, sizeof(arg));
        snprintf(head, sizeof(head), "set %s %s", settings_table[id].name, arg);
        settings_paragraph(out, OVERVIEW_COL, head, settings_table[id].help);
    }
    for (size_t i = 0; i < N_POD_ARGS; i++) {
        snprintf(head, sizeof(head), "set %s", pod_args[i].head);
        settings_paragraph(out, OVERVIEW_COL, head, pod_args[i].brief);
    }
    settings_paragraph(out, OVERVIEW_COL, "set group NAME --gpu G --pods P,..",
                       "pods that draw on one budget on a GPU");
    setting_runtime_names(list, sizeof(list));
    snprintf(text, sizeof(text),
             "forget a run-time %s: the environment's value (else "
             "the default) applies again, now and after restarts",
             list);
    settings_paragraph(out, OVERVIEW_COL, "reset SETTING", text);
    settings_paragraph(out, OVERVIEW_COL, "reset group NAME",
                       "remove a group: its pods are billed on their own");
}
