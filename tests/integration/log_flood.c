/* log_flood.c - drives log.c for the log_format test:
 *
 *   log_flood N
 *
 * logs one info line whose text needs escaping (a quote, a backslash, a tab,
 * a newline, ESC, a right-to-left override and a byte that is not UTF-8),
 * then the same warning N
 * times in a row, then exits (which reports the pending repeat count).
 * NVSHARE_LOG_FORMAT chooses the format, as in every component. */
#include <stdlib.h>

#include "log.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;

    log_init("log-flood");
    log_info("escapes: \"quoted\" back\\slash tab\tnew\nline esc\x1b[2J "
             "rlo\u202e bad\xff byte");
    for (int i = 0; i < n; i++)
        log_warn("the same warning again");
    return 0;
}
