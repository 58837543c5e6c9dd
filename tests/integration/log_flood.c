/* log_flood.c - drives log.c for the log_format test:
 *
 *   log_flood N
 *   log_flood uids UIDS N
 *
 * logs one info line whose text needs escaping (a quote, a backslash, a tab,
 * a newline, ESC, a right-to-left override and a byte that is not UTF-8),
 * then the same warning N times in a row, then exits (which reports the
 * pending repeat count). With uids, logs N lines charged to each of UIDS
 * uids (log_uid), round after round, then exits (which reports every count
 * of suppressed lines). NVSHARE_LOG_FORMAT chooses the format, as in every
 * component. */
#include <stdlib.h>
#include <string.h>

#include "log.h"

int main(int argc, char **argv)
{
    log_init("log-flood", LOG_INFO);
    if (argc == 4 && !strcmp(argv[1], "uids")) {
        int uids = atoi(argv[2]), n = atoi(argv[3]);
        for (int i = 0; i < n; i++)
            for (int uid = 0; uid < uids; uid++)
                log_uid_warn((uint32_t)uid, "uid %d: line %d", uid, i);
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 1000;

    log_info("escapes: \"quoted\" back\\slash tab\tnew\nline esc\x1b[2J "
             "rlo\u202e bad\xff byte");
    for (int i = 0; i < n; i++)
        log_warn("the same warning again");
    return 0;
}
