/* cli.c - see cli.h. */
#include "cli.h"

#include <string.h>

void cli_print_version(const char *program)
{
    printf("%s %s\n", program, nvshare_version);
}

int cli_standard_args(int argc, char **argv, const char *program,
                      void (*usage)(FILE *out))
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            cli_print_version(program);
            return 0;
        }
    }
    if (argc > 1) {
        fprintf(stderr, "%s: unknown argument '%s' (see %s --help)\n", program,
                argv[1], program);
        return CLI_EXIT_USAGE;
    }
    return -1;
}
