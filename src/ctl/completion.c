/* completion.c - nvsharectl completion: bash and zsh completion, made
 * from the commands table that main.c hands over (it is below the table,
 * which names it: completion_print). */
#include <string.h>

#include "commands.h"

/* Shell completion, made from the commands table: each command's name, the
 * literal words its synopsis lines allow first (set's settings, reset's,
 * top's none) and the options they name. A new command or setting is
 * completed as soon as its synopsis says so. */

/* Appends word to the space-separated list unless it is there already. */
static void add_word(char *list, size_t len, const char *word, size_t n)
{
    size_t used = strlen(list);

    for (const char *p = list; *p; p += strcspn(p, " "), p += *p == ' ')
        if (strcspn(p, " ") == n && !strncmp(p, word, n))
            return;
    if (n && used + n + 2 < len)
        snprintf(list + used, len - used, "%s%.*s", used ? " " : "", (int)n,
                 word);
}

/* The words a synopsis allows right after the command: literals among the
 * alternatives of its first argument ("tq|anti-thrash", "<duration>|auto"),
 * command names for "<command>"; and every --option in it. */
static void synopsis_words(const struct command *cmd,
                           const struct command *list, size_t n_commands,
                           char *first, char *options, size_t len)
{
    first[0] = options[0] = '\0';
    for (const char *line = command_synopsis(cmd); *line;) {
        line += strspn(line, "\n ");
        size_t line_len = strcspn(line, "\n");
        int token = 0;
        for (const char *t = line; t < line + line_len; token++) {
            size_t n = strcspn(t, " \n");
            for (const char *o = t; (o = strstr(o, "--")) && o < t + n; o += 2)
                add_word(options, len, o,
                         strspn(o, "-abcdefghijklmnopqrstuvwxyz"));
            if (token == 2 && n >= 9 && !strncmp(t, "[<command>", 10))
                for (size_t c = 0; c < n_commands; c++)
                    add_word(first, len, list[c].name, strlen(list[c].name));
            else if (token == 2 && *t != '[' && *t != '-')
                for (const char *a = t; a < t + n;
                     a += strcspn(a, "| \n"), a += *a == '|')
                    if (*a != '<')
                        add_word(first, len, a, strcspn(a, "| \n"));
            t += n;
            t += strspn(t, " ");
        }
        line += line_len;
    }
    add_word(options, len, "--help", 6);
}

static void print_bash_completion(const struct command *list, size_t n)
{
    char first[512], options[256], names[512] = "";

    for (size_t i = 0; i < n; i++)
        add_word(names, sizeof(names), list[i].name, strlen(list[i].name));
    printf(
        "# nvsharectl completion, made by 'nvsharectl completion' from its "
        "commands.\n"
        "_nvsharectl() {\n"
        "    local cur=${COMP_WORDS[COMP_CWORD]} "
        "prev=${COMP_WORDS[COMP_CWORD-1]}\n"
        "    local cmd= at=0 i words\n"
        "    case $prev in\n"
        "        --sock-dir) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
        "        --timeout|--interval|--count|--gpu) COMPREPLY=(); return ;;\n"
        "    esac\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --sock-dir|--timeout) ((i++)) ;;\n"
        "            -*) ;;\n"
        "            *) cmd=${COMP_WORDS[i]}; at=$i; break ;;\n"
        "        esac\n"
        "    done\n"
        "    case $cmd in\n"
        "        '') words='%s --sock-dir --timeout --help --version' ;;\n",
        names);
    for (size_t i = 0; i < n; i++) {
        synopsis_words(&list[i], list, n, first, options, sizeof(first));
        printf("        %s) if ((COMP_CWORD == at + 1)); then words='%s%s%s'; "
               "else words='%s'; fi ;;\n",
               list[i].name, first, *first ? " " : "", options, options);
    }
    printf("    esac\n"
           "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
           "}\n"
           "complete -F _nvsharectl nvsharectl\n");
}

int completion_print(const struct command *cmd, int argc, char **argv,
                     const struct command *list, size_t n)
{
    int rc = plain_args(cmd, argc, argv, 1, "which shell? bash or zsh");

    if (rc)
        return rc == HELP_SHOWN ? 0 : rc;
    if (!strcmp(argv[1], "zsh"))
        printf("# zsh: the bash completion, through zsh's bashcompinit.\n"
               "autoload -U +X bashcompinit && bashcompinit\n");
    else if (strcmp(argv[1], "bash"))
        return usage_error(cmd, "no completion for '%s': bash or zsh", argv[1]);
    print_bash_completion(list, n);
    return 0;
}
