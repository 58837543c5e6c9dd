/* cli.h - what every nvshare binary says to its command line.
 *
 * Each one answers --help (-h) with its usage, --version with the version
 * that the build took from git (cmake/version.cmake), the same string for
 * all of them, and refuses an argument it does not know with one line and
 * exit status 2, rather than start a daemon that was asked something else. */
#ifndef NVSHARE_CLI_H
#define NVSHARE_CLI_H

#include <stdio.h>

#define CLI_EXIT_USAGE 2

extern const char nvshare_version[];

/* "<program> <version>" on stdout. */
void cli_print_version(const char *program);

/* For a program that takes no argument but --help and --version: returns
 * -1 to go on, or the status to exit with (0 after help or version,
 * CLI_EXIT_USAGE after an unknown argument). */
int cli_standard_args(int argc, char **argv, const char *program,
                      void (*usage)(FILE *out));

#endif
