/* status_http.c - /status.json: the document `nvsharectl status --json`
 * prints, for readers off the node (kubectl-nvshare, through the API
 * server's pod proxy). The records the control socket would carry are
 * taken in process by the same code nvsharectl reads them with, and
 * rendered by the same writer, so both show one set of numbers. */
#include <stdio.h>
#include <stdlib.h>

#include "scheduler.h"
#include "status_json.h"

static int take(void *ctx, const struct msg *m)
{
    enum status_record r = ctl_status_take(ctx, m);

    return r == RECORD_TAKEN || r == RECORD_END ? 0 : -1;
}

char *status_json_render(struct scheduler *s, size_t *len)
{
    struct ctl_status st = {0};
    struct status_sink out = {take, &st};
    char *text = NULL;
    FILE *f = NULL;

    if (control_status(s, &out, true) == 0 && (f = open_memstream(&text, len))) {
        render_json(f, &st);
        if (fclose(f) || !text || !*len) { /* a write failed: memory */
            free(text);
            text = NULL;
        }
    }
    ctl_status_free(&st);
    return text;
}
