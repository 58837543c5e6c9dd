/* prepare.c - NodePrepareResources and NodeUnprepareResources for one
 * claim. Both are idempotent, keyed by the claim's UID: a claim prepared
 * already gets the same devices again (its CDI spec re-made if it went,
 * as after a reboot empties /var/run/cdi), one not prepared is unprepared
 * at once. Unprepare needs only the checkpoint: the claim may be gone from
 * the API server by then. Both run on the workers, the table under
 * d->lock, released while the API server is read. */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* kubelet gives a call 45 s; a claim's read gets a few short tries. */
#define FETCH_ATTEMPTS 3
#define FETCH_BACKOFF_MS 100

static struct dra_claim *find(struct driver *d, const char *uid)
{
    for (int i = 0; i < d->n_claims; i++)
        if (!strcmp(d->claims[i].uid, uid))
            return &d->claims[i];
    return NULL;
}

/* UIDs name files, namespaces and names go into a URL path. */
static bool valid_chars(const char *s, size_t max, const char *allowed)
{
    size_t n = strlen(s);

    return n > 0 && n < max && strspn(s, allowed) == n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The claim's JSON in body, retried with back-off while the API server
 * fails or cannot be reached. 0, or -1 with err. */
static int fetch(struct driver *d, const char *namespace_, const char *name,
                 struct kube_body *body, char err[DRA_ERR_LEN])
{
    char path[512], why[KUBE_ERR_LEN] = "";
    long status = -1;

    snprintf(path, sizeof(path),
             "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
             namespace_, name);
    for (int attempt = 0; attempt < FETCH_ATTEMPTS; attempt++) {
        if (attempt)
            sleep_ms(FETCH_BACKOFF_MS << (2 * (attempt - 1)));
        kube_body_free(body);
        status = kube_request(&d->kube, "GET", path, NULL, body, why);
        if (status == 200)
            return 0;
        if (status >= 400 && status < 500 && status != 429)
            break; /* not found, forbidden: another try changes nothing */
        if (status > 0)
            snprintf(why, sizeof(why), "HTTP %ld", status);
    }
    if (status == 404)
        snprintf(err, DRA_ERR_LEN, "claim %s/%s not found in the API server",
                 namespace_, name);
    else if (status > 0)
        snprintf(err, DRA_ERR_LEN, "reading claim %s/%s: HTTP %ld", namespace_,
                 name, status);
    else
        snprintf(err, DRA_ERR_LEN, "reading claim %s/%s: %.180s", namespace_,
                 name, why);
    kube_body_free(body);
    return -1;
}

/* Whether the shares of c fit beside the claims prepared already. The
 * scheduler of Kubernetes keeps the sum within the capacity; this guards
 * against what it cannot see (a stale allocation, a changed GPU). */
static bool fits(const struct driver *d, const struct dra_claim *c,
                 char err[DRA_ERR_LEN])
{
    for (int s = 0; s < c->n_shares; s++) {
        int gpu = c->shares[s].gpu;
        uint64_t capacity = d->gpus.gpus[gpu].capacity_bytes;
        uint64_t memory = c->shares[s].memory ? c->shares[s].memory : capacity;
        unsigned compute = c->shares[s].compute ? c->shares[s].compute : 100;

        for (int i = 0; i < d->n_claims; i++) {
            for (int t = 0; t < d->claims[i].n_shares; t++) {
                const struct dra_share *o = &d->claims[i].shares[t];
                if (o->gpu != gpu)
                    continue;
                memory += o->memory ? o->memory : capacity;
                compute += o->compute ? o->compute : 100;
            }
        }
        if (memory > capacity || compute > 100) {
            snprintf(err, DRA_ERR_LEN,
                     "gpu-%d has not enough capacity left: the claims "
                     "prepared on it and this one need %llu MiB and %u%% of "
                     "%llu MiB and 100%%",
                     gpu, (unsigned long long)(memory >> 20), compute,
                     (unsigned long long)(capacity >> 20));
            return false;
        }
    }
    return true;
}

/* Drops c from the table (the last entry takes its place). */
static void forget(struct driver *d, struct dra_claim *c)
{
    struct dra_claim *last = &d->claims[--d->n_claims];

    if (c != last)
        memcpy(c, last, sizeof(*c));
}

/* Sets the limits, writes the CDI spec and records the claim completed. */
static int complete(struct driver *d, struct dra_claim *c, char err[DRA_ERR_LEN])
{
    if (limits_apply(d, c, NULL, err) || cdi_write(d, c, err))
        return -1;
    c->completed = true;
    return checkpoint_save(d, err);
}

/* Undoes what a Prepare of c may have done; -1 when the scheduler could
 * not be told, and c stays for the next try. */
static int undo(struct driver *d, struct dra_claim *c, char err[DRA_ERR_LEN])
{
    if (limits_apply(d, c, c, err))
        return -1; /* kubelet retries: the limits must not outlive the claim */
    cdi_remove(d, c->uid);
    forget(d, c);
    return checkpoint_save(d, err);
}

/* A claim not prepared yet: read, checked against the table, recorded
 * PrepareStarted and completed. Under d->lock but for the read. */
static int prepare_new(struct driver *d, const char *namespace_,
                       const char *uid, const char *name, struct dra_claim *out,
                       char err[DRA_ERR_LEN])
{
    struct kube_body body = {0};
    struct dra_claim *c;
    char why[DRA_ERR_LEN];
    int rc = -1;

    pthread_mutex_unlock(&d->lock);
    if (fetch(d, namespace_, name, &body, err)) {
        pthread_mutex_lock(&d->lock);
        return -1;
    }
    pthread_mutex_lock(&d->lock);
    if (d->n_claims == DRA_MAX_CLAIMS) {
        snprintf(err, DRA_ERR_LEN,
                 "%d claims are prepared on this node already", DRA_MAX_CLAIMS);
        goto out;
    }
    c = &d->claims[d->n_claims];
    if (claim_parse(d, body.data, uid, c, err) || !fits(d, c, err))
        goto out;
    d->n_claims++;
    if (checkpoint_save(d, err)) {
        d->n_claims--;
        goto out;
    }
    if (complete(d, c, err)) {
        if (undo(d, c, why))
            log_warn("claim %s: %s", uid, why);
        goto out;
    }
    for (int s = 0; s < c->n_shares; s++)
        log_info("prepared claim %s/%s (%s) for %d pods: gpu-%d, %llu MiB, "
                 "%u%%",
                 namespace_, name, uid, c->n_pods, c->shares[s].gpu,
                 (unsigned long long)(c->shares[s].memory >> 20),
                 c->shares[s].compute);
    status_queue(c);
    *out = *c;
    rc = 0;
out:
    kube_body_free(&body);
    return rc;
}

int prepare_claim(struct driver *d, const char *namespace_, const char *uid,
                  const char *name, struct dra_claim *out, char err[DRA_ERR_LEN])
{
    static const char dns[] = "abcdefghijklmnopqrstuvwxyz0123456789-.";
    static const char uid_chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        "0123456789-";
    struct dra_claim *c;
    int rc = 0;

    if (!valid_chars(uid, DRA_UID_MAX, uid_chars) ||
        !valid_chars(namespace_, DRA_NAMESPACE_MAX, dns) ||
        !valid_chars(name, DRA_NAME_MAX, dns)) {
        snprintf(err, DRA_ERR_LEN,
                 "malformed claim reference (namespace, uid or name)");
        return -1;
    }
    /* The workers run one job of a UID at a time: no other thread adds
     * this claim while its read runs unlocked. */
    pthread_mutex_lock(&d->lock);
    if ((c = find(d, uid))) { /* prepared, or begun before a restart */
        rc = c->completed && cdi_exists(d, uid) ? limits_apply(d, c, NULL, err)
                                                : complete(d, c, err);
        if (!rc)
            *out = *c;
    } else {
        rc = prepare_new(d, namespace_, uid, name, out, err);
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int unprepare_claim(struct driver *d, const char *uid, char err[DRA_ERR_LEN])
{
    struct dra_claim *c;
    char what[DRA_NAME_MAX + 80];
    int rc = 0;

    pthread_mutex_lock(&d->lock);
    if ((c = find(d, uid))) { /* else never prepared here, or undone */
        snprintf(what, sizeof(what), "%s/%s (%s)", c->namespace_, c->name, uid);
        if (!(rc = undo(d, c, err)))
            log_info("unprepared claim %s", what);
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}
