/* checkpoint.c - the prepared claims, in <plugin dir>/checkpoint.json,
 * rewritten whole after every change.
 *
 * A claim enters it as PrepareStarted before its limits are set or its
 * CDI spec written, becomes PrepareCompleted after both, and leaves it
 * once both are undone. A driver killed in the middle of a Prepare thus
 * finds the claim when it starts again: the Prepare kubelet sends again
 * completes it, an Unprepare undoes whatever of it was done. Every step
 * can be repeated harmlessly. */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "log.h"
#include "protocol.h"

#define CHECKPOINT_MAX (64u << 20)

int file_replace(const char *path, const char *text, char err[DRA_ERR_LEN])
{
    char tmp[PATH_MAX + 8];
    FILE *f;
    bool failed;

    if (!text) {
        snprintf(err, DRA_ERR_LEN, "out of memory");
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        snprintf(err, DRA_ERR_LEN, "cannot write %.150s: %s", tmp,
                 strerror(errno));
        return -1;
    }
    failed = fputs(text, f) < 0;
    failed |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    failed |= fclose(f) != 0;
    if (failed || rename(tmp, path)) {
        snprintf(err, DRA_ERR_LEN, "cannot write %.150s: %s", path,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void path_of(const struct driver *d, char *buf, size_t len)
{
    snprintf(buf, len, "%s/checkpoint.json", d->plugin_dir);
}

int checkpoint_save(const struct driver *d, char err[DRA_ERR_LEN])
{
    cJSON *root = cJSON_CreateObject();
    cJSON *claims = cJSON_AddArrayToObject(root, "claims");
    char path[PATH_MAX];
    char *text;
    int rc;

    for (int i = 0; i < d->n_claims; i++) {
        const struct dra_claim *c = &d->claims[i];
        cJSON *o = cJSON_CreateObject(), *shares, *pods;

        cJSON_AddStringToObject(o, "uid", c->uid);
        cJSON_AddStringToObject(o, "namespace", c->namespace_);
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "state",
                                c->completed ? "PrepareCompleted"
                                             : "PrepareStarted");
        cJSON_AddNumberToObject(o, "priority", c->priority);
        shares = cJSON_AddArrayToObject(o, "shares");
        for (int s = 0; s < c->n_shares; s++) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "gpu", c->shares[s].gpu);
            cJSON_AddStringToObject(j, "request", c->shares[s].request);
            cJSON_AddStringToObject(j, "shareID", c->shares[s].share_id);
            cJSON_AddNumberToObject(j, "memory", (double)c->shares[s].memory);
            cJSON_AddNumberToObject(j, "compute", c->shares[s].compute);
            cJSON_AddItemToArray(shares, j);
        }
        pods = cJSON_AddArrayToObject(o, "pods");
        for (int p = 0; p < c->n_pods; p++) {
            cJSON_AddItemToArray(pods, cJSON_CreateString(c->pods[p]));
        }
        cJSON_AddItemToArray(claims, o);
    }
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    path_of(d, path, sizeof(path));
    rc = file_replace(path, text, err);
    cJSON_free(text);
    return rc;
}

static void copy_string(char *dst, size_t size, const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    snprintf(dst, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static double number(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* An entry that does not read back whole is dropped with a warning: its
 * Unprepare then finds nothing and succeeds, as for an unknown claim. */
static bool load_claim(const struct driver *d, const cJSON *o,
                       struct dra_claim *c)
{
    const cJSON *j;

    memset(c, 0, sizeof(*c));
    copy_string(c->uid, sizeof(c->uid), o, "uid");
    copy_string(c->namespace_, sizeof(c->namespace_), o, "namespace");
    copy_string(c->name, sizeof(c->name), o, "name");
    c->completed =
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "state")) &&
        !strcmp(cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring,
                "PrepareCompleted");
    double priority = cJSON_GetObjectItemCaseSensitive(o, "priority")
                          ? number(o, "priority")
                          : 0;
    if (priority < 0 || priority > PRIORITY_HIGHEST)
        return false;
    c->priority = (unsigned)priority;
    cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(o, "shares"))
    {
        struct dra_share *s = &c->shares[c->n_shares];
        double gpu = number(j, "gpu"), memory = number(j, "memory"),
               compute = number(j, "compute");

        if (c->n_shares == DRA_MAX_RESULTS || gpu < 0 ||
            gpu >= d->gpus.gpu_count || memory < 0 || compute < 0 ||
            compute > 100)
            return false;
        s->gpu = (int)gpu;
        s->memory = (uint64_t)memory;
        s->compute = (unsigned)compute;
        copy_string(s->request, sizeof(s->request), j, "request");
        copy_string(s->share_id, sizeof(s->share_id), j, "shareID");
        c->n_shares++;
    }
    cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(o, "pods"))
    {
        if (c->n_pods == DRA_MAX_PODS || !cJSON_IsString(j) ||
            strlen(j->valuestring) >= sizeof(c->pods[0]))
            return false;
        snprintf(c->pods[c->n_pods++], sizeof(c->pods[0]), "%s", j->valuestring);
    }
    return c->uid[0] && c->n_shares > 0;
}

int checkpoint_load(struct driver *d)
{
    char path[PATH_MAX];
    FILE *f;
    char *text = NULL;
    long size;
    cJSON *root = NULL;
    const cJSON *o;

    path_of(d, path, sizeof(path));
    if (!(f = fopen(path, "r")))
        return errno == ENOENT
                   ? 0
                   : (log_error("cannot read %s: %s", path, strerror(errno)), -1);
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 ||
        size > (long)CHECKPOINT_MAX || fseek(f, 0, SEEK_SET) ||
        !(text = calloc(1, (size_t)size + 1)) ||
        fread(text, 1, (size_t)size, f) != (size_t)size) {
        log_error("cannot read %s (over %u MiB?)", path, CHECKPOINT_MAX >> 20);
        fclose(f);
        free(text);
        return -1;
    }
    fclose(f);
    root = cJSON_Parse(text);
    free(text);
    if (!root) {
        log_error("%s is not JSON: move it away to start with no claims "
                  "prepared",
                  path);
        return -1;
    }
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(root, "claims"))
    {
        if (d->n_claims == DRA_MAX_CLAIMS)
            break;
        if (load_claim(d, o, &d->claims[d->n_claims]))
            d->n_claims++;
        else
            log_warn("%s: dropped an entry that does not read back", path);
    }
    cJSON_Delete(root);
    log_info("%d prepared claims from %s", d->n_claims, path);
    return 0;
}
