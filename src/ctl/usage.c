/* usage.c - the bottom of nvsharectl: the scheduler it talks to and the
 * helpers every command shares (commands.h): usage errors, --help, option
 * and argument checks. It calls no file of nvsharectl; the commands above
 * it call it, and main.c, with the commands table, is the top. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

struct ctl_target target;
const char *set_subject;

const char top_usage[] = "usage: nvsharectl [--sock-dir DIR] [--timeout "
                         "DURATION] <command> [<args>]\n"
                         "       nvsharectl --help | --version\n";

/* Writes cmd's synopsis lines, only set_subject's where one of them is. */
static void print_synopsis(const struct command *cmd)
{
    char prefix[64];
    bool found = false;

    if (set_subject) {
        snprintf(prefix, sizeof(prefix), "nvsharectl set %s ", set_subject);
        for (const char *line = command_synopsis(cmd); line;
             line = strchr(line, '\n')) {
            line += strspn(line, "\n ");
            size_t len = strcspn(line, "\n");
            if (!strncmp(line, prefix, strlen(prefix))) {
                fprintf(stderr, "%s%.*s\n",
                        found ? "       " : "usage: ", (int)len, line);
                found = true;
            }
        }
    }
    if (!found)
        fprintf(stderr, "usage: %s\n", command_synopsis(cmd));
}

int usage_error(const struct command *cmd, const char *fmt, ...)
{
    va_list ap;

    fputs("nvsharectl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (cmd) {
        print_synopsis(cmd);
        fprintf(stderr, "See 'nvsharectl %s --help'.\n", cmd->name);
    } else
        fprintf(stderr, "\n%sSee 'nvsharectl --help'.\n", top_usage);
    return EXIT_USAGE;
}

int fail(const char *err)
{
    fprintf(stderr, "nvsharectl: %s\n", err);
    return EXIT_REFUSED;
}

const char *command_synopsis(const struct command *cmd)
{
    return cmd->synopsis ? cmd->synopsis : cmd->make_synopsis();
}

const char *command_help(const struct command *cmd)
{
    return cmd->help ? cmd->help : cmd->make_help();
}

int show_help(const struct command *cmd)
{
    printf("usage: %s\n\n%s", command_synopsis(cmd), command_help(cmd));
    return 0;
}

bool is_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

int option_value(const char *name, int argc, char **argv, int *i,
                 const char **value)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];

    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *value = argv[++*i];
    return 1;
}

int plain_args(const struct command *cmd, int argc, char **argv, int want,
               const char *what)
{
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return show_help(cmd), HELP_SHOWN;
        if (argv[i][0] == '-' && argv[i][1] != '\0' && argv[i][1] != '.' &&
            (argv[i][1] < '0' || argv[i][1] > '9'))
            return usage_error(cmd, "unknown option '%s'", argv[i]);
    }
    if (argc - 1 < want)
        return usage_error(cmd, "%s", what);
    if (argc - 1 > want)
        return usage_error(cmd, "unexpected argument '%s'", argv[want + 1]);
    return 0;
}
