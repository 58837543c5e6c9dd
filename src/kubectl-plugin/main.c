/* main.c - kubectl-nvshare: the sharing of GPUs across a cluster, from
 * each node's scheduler (plugin.h). kubectl runs it for `kubectl nvshare
 * ...` because its name on the PATH is kubectl-nvshare.
 *
 * This file reads the command line (options may come before or after the
 * command), then the API server's address and credentials, and dispatches.
 * Every argument is checked before anything is asked of the cluster, so a
 * typo costs no request. Exit status: 0 done, 1 the cluster could not be
 * read, 2 bad usage. */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"
#include "parse.h"
#include "plugin.h"

enum { TOP = 1, WHY = 2, NODES = 4, ALL = 7 };

struct command {
    const char *name;
    unsigned bit;
    int positional; /* arguments after the name */
    const char *synopsis, *help;
};

static const struct command commands[] = {
    {"top", TOP, 0,
     "kubectl nvshare top [--node NODE] [-n NAMESPACE | -A] [-o json]\n"
     "                    [--interval 2s | --once]",
     "Per node and GPU, each pod's share of the GPU's time (GPU%) against\n"
     "its core limit and priority, its memory on the GPU and swapped out\n"
     "against its quota, what it does (running, throttled, waiting and\n"
     "why, idle, swapped) and since when; then totals per namespace. On a\n"
     "terminal it redraws every interval until q or Ctrl-C.\n"
     "  --node NODE          only this node\n"
     "  -n, --namespace NS   only this namespace's pods\n"
     "  -A, --all-namespaces every namespace's pods (the default)\n"
     "  -o json              one JSON document, for scripts (implies --once)\n"
     "  --interval DURATION  redraw every DURATION (default 2s, at least 1s)\n"
     "  --once               print once and exit\n"},
    {"why", WHY, 1, "kubectl nvshare why POD [-n NAMESPACE] [-o json]",
     "Why POD runs as it does, in plain words from its node's scheduler:\n"
     "running; throttled at its core limit; waiting behind a higher\n"
     "priority (and whose); waiting for memory (and who holds it); swapped\n"
     "out as idle; not on an nvshare node; not hooked (a process of the pod\n"
     "uses the GPU without libnvshare.so).\n"
     "  -n, --namespace NS   the pod's namespace (default: the context's)\n"
     "  -o json              the same as JSON\n"},
    {"nodes", NODES, 0, "kubectl nvshare nodes [--node NODE] [-o json]",
     "Each node's scheduler: its version, GPUs, time quantum and mode; and\n"
     "the nodes whose scheduler does not answer, with the reason.\n"
     "  --node NODE          only this node\n"
     "  -o json              one JSON document, for scripts\n"},
};

static const char global_help[] =
    "Options of every command:\n"
    "  --kubeconfig PATH       the kubeconfig (default: kubectl's)\n"
    "  --context NAME          its context (default: the current one)\n"
    "  --nvshare-namespace NS  where nvshare runs (default nvshare-system)\n"
    "  --selector LABELS       its scheduler pods (default\n"
    "                          app.kubernetes.io/name=nvshare)\n"
    "  --request-timeout DUR   each node's answer (default 5s)\n"
    "  -h, --help              show this help\n"
    "\n"
    "Reading needs get on pods/proxy and list on pods in the nvshare\n"
    "namespace: the nvshare-viewer Role (docs/kubernetes.md).\n"
    "Exit status: 0 done, 1 the cluster could not be read, 2 bad usage.\n";

static void overview(FILE *out)
{
    fputs("usage: kubectl nvshare <command> [options]\n"
          "       kubectl nvshare --help | --version\n"
          "\n"
          "The GPUs nvshare shares, across the cluster.\n"
          "\n"
          "Commands:\n"
          "  top         each pod's share of its GPU, memory, waits and why\n"
          "  why POD     why a pod runs, waits or is slow, in plain words\n"
          "  nodes       each node's scheduler, and the ones not answering\n"
          "\n",
          out);
    fputs(global_help, out);
    fputs("Run 'kubectl nvshare <command> --help' for a command's options.\n",
          out);
}

static int usage(const struct command *cmd, const char *fmt, const char *arg)
{
    fputs("kubectl nvshare: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    if (cmd)
        fprintf(stderr, "usage: %s\nRun 'kubectl nvshare %s --help'.\n",
                cmd->synopsis, cmd->name);
    else
        fputs("Run 'kubectl nvshare --help'.\n", stderr);
    return EXIT_USAGE;
}

/* The options: name, short form, takes a value, which commands have it. */
struct option {
    const char *name, *short_;
    bool value;
    unsigned cmds;
};

static const struct option options_table[] = {
    {"--kubeconfig", NULL, true, ALL},
    {"--context", NULL, true, ALL},
    {"--nvshare-namespace", NULL, true, ALL},
    {"--selector", NULL, true, ALL},
    {"--request-timeout", NULL, true, ALL},
    {"--node", NULL, true, TOP | NODES},
    {"--namespace", "-n", true, TOP | WHY},
    {"--all-namespaces", "-A", false, TOP},
    {"--output", "-o", true, ALL},
    {"--interval", NULL, true, TOP},
    {"--once", NULL, false, TOP},
};

struct parsed {
    const struct command *cmd;
    const char *values[sizeof(options_table) / sizeof(options_table[0])];
    const char *positional;
    bool help;
};

#define OPT(p, name) ((p)->values[opt_index(name)])

static int opt_index(const char *name)
{
    for (size_t i = 0; i < sizeof(options_table) / sizeof(options_table[0]); i++)
        if (!strcmp(options_table[i].name, name))
            return (int)i;
    abort(); /* a name of this file's own */
}

/* Matches arg to an option; its value from "=VALUE" or the next argument. */
static int take_option(struct parsed *p, int argc, char **argv, int *i)
{
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t len = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);

    for (size_t o = 0; o < sizeof(options_table) / sizeof(options_table[0]); o++) {
        const struct option *opt = &options_table[o];

        if (!((strlen(opt->name) == len && !strncmp(arg, opt->name, len)) ||
              (opt->short_ && !strcmp(arg, opt->short_))))
            continue;
        if (!opt->value) {
            if (len != strlen(arg))
                return usage(p->cmd, "'%s' takes no value", opt->name);
            p->values[o] = "";
        } else if (len != strlen(arg)) {
            p->values[o] = arg + len + 1;
        } else if (*i + 1 < argc) {
            p->values[o] = argv[++*i];
        } else {
            return usage(p->cmd, "'%s' needs a value", arg);
        }
        return 0;
    }
    return usage(p->cmd, "unknown option '%s'", arg);
}

static int parse_args(struct parsed *p, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];

        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            p->help = true;
        } else if (arg[0] == '-' && arg[1]) {
            if (take_option(p, argc, argv, &i))
                return EXIT_USAGE;
        } else if (!p->cmd) {
            for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
                if (!strcmp(arg, commands[c].name))
                    p->cmd = &commands[c];
            if (!p->cmd)
                return usage(NULL, "unknown command '%s'", arg);
        } else if (!p->positional && p->cmd->positional) {
            p->positional = arg;
        } else {
            return usage(p->cmd, "unexpected argument '%s'", arg);
        }
    }
    return 0;
}

/* Checks what the command was given and fills o. */
static int check_args(const struct parsed *p, struct options *o)
{
    const struct command *cmd = p->cmd;
    const char *out = OPT(p, "--output"), *v;
    char err[PARSE_ERR_LEN];
    uint64_t ns;

    for (size_t i = 0; i < sizeof(options_table) / sizeof(options_table[0]); i++)
        if (p->values[i] && !(options_table[i].cmds & cmd->bit))
            return usage(cmd, "'%s' is not an option of this command",
                         options_table[i].name);
    if (cmd->positional && !p->positional)
        return usage(cmd, "which pod?%s", "");
    if (out && strcmp(out, "json"))
        return usage(cmd, "-o '%s': only json is known", out);
    if (OPT(p, "--namespace") && OPT(p, "--all-namespaces"))
        return usage(cmd, "-n and -A exclude each other%s", "");
    o->json = out != NULL;
    o->node = OPT(p, "--node");
    o->namespace_ = OPT(p, "--namespace");
    if ((v = OPT(p, "--nvshare-namespace")))
        o->nvshare_namespace = v;
    if ((v = OPT(p, "--selector")))
        o->selector = v;
    if ((v = OPT(p, "--request-timeout"))) {
        if (parse_duration_ns(v, &ns, err) || ns < 1000000ull ||
            ns > 600000000000ull)
            return usage(cmd,
                         "--request-timeout: a duration of 1ms-10m, not '%s'", v);
        o->timeout_ms = (long)(ns / 1000000ull);
    }
    if ((v = OPT(p, "--interval"))) {
        if (parse_duration_ns(v, &ns, err) || ns < 1000000000ull ||
            ns > 3600000000000ull)
            return usage(cmd, "--interval: a duration of 1s-1h, not '%s'", v);
        o->interval_ms = (long)(ns / 1000000ull);
    }
    if (OPT(p, "--once") || o->json)
        o->interval_ms = 0;
    return 0;
}

/* A DNS-1123 name as Kubernetes takes for a namespace, node or pod: the
 * names go into request paths, so nothing else may. */
static bool k8s_name(const char *s)
{
    size_t n = strlen(s);

    if (!n || n >= NAME_LEN)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.'))
            return false;
    return true;
}

int main(int argc, char **argv)
{
    struct parsed p = {0};
    struct options o = {.nvshare_namespace = "nvshare-system",
                        .selector = "app.kubernetes.io/name=nvshare",
                        .timeout_ms = FETCH_TIMEOUT_MS,
                        .interval_ms = 2000};
    const char *names[] = {"--nvshare-namespace", "--node", "--namespace",
                           "the pod's name"},
               *values[4];
    char err[KUBE_ERR_LEN], ns[NAME_LEN] = "default";
    struct kube k;
    int rc;

    if (argc == 2 && !strcmp(argv[1], "--version")) {
        cli_print_version("kubectl-nvshare");
        return 0;
    }
    if (parse_args(&p, argc, argv))
        return EXIT_USAGE;
    if (!p.cmd && p.help) {
        overview(stdout);
        return 0;
    }
    if (!p.cmd)
        return usage(NULL, "which command? top, why or nodes%s", "");
    if (p.help) {
        printf("usage: %s\n\n%s\n%s", p.cmd->synopsis, p.cmd->help, global_help);
        return 0;
    }
    if ((rc = check_args(&p, &o)))
        return rc;
    values[0] = o.nvshare_namespace, values[1] = o.node;
    values[2] = o.namespace_, values[3] = p.positional;
    for (int i = 0; i < 4; i++)
        if (values[i] && !k8s_name(values[i]))
            return usage(p.cmd, "%s: not a Kubernetes name", names[i]);
    if (curl_global_init(CURL_GLOBAL_DEFAULT))
        return EXIT_FAILED;
    if (plugin_kube(&k, OPT(&p, "--kubeconfig"), OPT(&p, "--context"), ns, err)) {
        fprintf(stderr, "kubectl nvshare: %s\n", err);
        curl_global_cleanup();
        return EXIT_FAILED;
    }
    k.timeout_s = (o.timeout_ms + 999) / 1000 + 5; /* API-server requests */
    if (!o.namespace_ && p.cmd->bit == WHY)
        o.namespace_ = ns;
    if (p.cmd->bit == TOP)
        rc = cmd_top(&k, &o);
    else if (p.cmd->bit == WHY)
        rc = cmd_why(&k, &o, p.positional);
    else
        rc = cmd_nodes(&k, &o);
    plugin_kube_free(&k);
    curl_global_cleanup();
    return rc;
}
