/* status.c - the limits a prepared claim's devices hold its pods to,
 * written to the claim's status.devices[].data (KEP-4817), where
 * `kubectl get resourceclaim -o yaml` shows them.
 *
 * It is news, not state: nothing reads it back, so it stays off Prepare's
 * path. Prepare queues the claim and returns; one thread writes the queue
 * out. A node is one of thousands talking to one API server, so the
 * thread keeps a budget: at most NVSHARE_DRA_STATUS_QPS requests a second
 * (GCRA, a burst of as many), and after a failure a doubling, jittered
 * pause before the next request of any claim. A full queue drops the new
 * claim; a claim that failed STATUS_TRIES times is dropped. A server that
 * answers 404 for the status subresource or 422 for the entry does not
 * offer device status (older, or the DRAResourceClaimDeviceStatus gate
 * off): the thread says so once and writes no more.
 *
 * The write is a server-side apply of this driver's entries alone, so the
 * entries of other drivers of the claim stay; the claim's UID in it makes
 * the API server refuse a claim recreated under the same name. */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "env.h"
#include "log.h"

#define STATUS_QUEUE 128
#define STATUS_TRIES 6
#define BACKOFF_MIN_NS 200000000ULL   /* 200 ms */
#define BACKOFF_MAX_NS 60000000000ULL /* 60 s */

struct status_entry {
    char namespace_[DRA_NAMESPACE_MAX];
    char name[DRA_NAME_MAX];
    char uid[DRA_UID_MAX];
    struct dra_share shares[DRA_MAX_RESULTS];
    int n_shares;
    int tries;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, stopping, off;
    bool dropping; /* the queue was full: said once until it has room */
    struct status_entry *queue; /* a ring */
    int head, count;
    struct driver *d;
    uint64_t interval_ns; /* 1 s / qps */
    unsigned burst;
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void status_queue(const struct dra_claim *c)
{
    struct status_entry *e;

    pthread_mutex_lock(&st.lock);
    if (!st.started || st.off || st.stopping) {
        pthread_mutex_unlock(&st.lock);
        return;
    }
    if (st.count == STATUS_QUEUE) {
        if (!st.dropping)
            log_warn("claim status: %d claims wait to be written: not "
                     "writing %s/%s's, nor others' until there is room",
                     STATUS_QUEUE, c->namespace_, c->name);
        st.dropping = true;
        pthread_mutex_unlock(&st.lock);
        return;
    }
    st.dropping = false;
    e = &st.queue[(st.head + st.count++) % STATUS_QUEUE];
    memset(e, 0, sizeof(*e));
    snprintf(e->namespace_, sizeof(e->namespace_), "%s", c->namespace_);
    snprintf(e->name, sizeof(e->name), "%s", c->name);
    snprintf(e->uid, sizeof(e->uid), "%s", c->uid);
    memcpy(e->shares, c->shares, sizeof(e->shares));
    e->n_shares = c->n_shares;
    pthread_cond_signal(&st.wake);
    pthread_mutex_unlock(&st.lock);
}

/* The apply configuration: this driver's entries, one per share. */
static char *apply_json(const struct driver *d, const struct status_entry *e)
{
    cJSON *root = cJSON_CreateObject(), *meta, *devices;
    char *text;

    cJSON_AddStringToObject(root, "apiVersion", "resource.k8s.io/v1");
    cJSON_AddStringToObject(root, "kind", "ResourceClaim");
    meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddStringToObject(meta, "name", e->name);
    cJSON_AddStringToObject(meta, "namespace", e->namespace_);
    cJSON_AddStringToObject(meta, "uid", e->uid);
    devices = cJSON_AddArrayToObject(cJSON_AddObjectToObject(root, "status"),
                                     "devices");
    for (int s = 0; s < e->n_shares; s++) {
        const struct dra_share *share = &e->shares[s];
        cJSON *dev = cJSON_CreateObject(), *data;
        char name[32];

        snprintf(name, sizeof(name), "gpu-%d", share->gpu);
        cJSON_AddStringToObject(dev, "driver", DRA_DRIVER_NAME);
        cJSON_AddStringToObject(dev, "pool", d->node);
        cJSON_AddStringToObject(dev, "device", name);
        if (share->share_id[0])
            cJSON_AddStringToObject(dev, "shareID", share->share_id);
        /* A whole device (0) holds its pods to no limit: none stated. */
        data = cJSON_AddObjectToObject(dev, "data");
        if (share->memory)
            cJSON_AddNumberToObject(data, "memoryLimitBytes",
                                    (double)share->memory);
        if (share->compute && share->compute < 100)
            cJSON_AddNumberToObject(data, "coreLimitPercent", share->compute);
        cJSON_AddItemToArray(devices, dev);
    }
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* A 404 that names the claim: it is gone, not the status subresource. */
static bool claim_gone(const struct kube_body *body, const char *name)
{
    cJSON *root = body->data ? cJSON_Parse(body->data) : NULL;
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
    const cJSON *what = cJSON_GetObjectItemCaseSensitive(details, "name");
    bool gone = cJSON_IsString(what) && !strcmp(what->valuestring, name);

    cJSON_Delete(root);
    return gone;
}

enum outcome { WRITTEN, DROP, RETRY, OFF };

static enum outcome write_status(const struct status_entry *e, long *status)
{
    char path[DRA_NAMESPACE_MAX + DRA_NAME_MAX + 160], err[KUBE_ERR_LEN];
    struct kube_body body = {0};
    char *json = apply_json(st.d, e);
    enum outcome out;

    if (!json)
        return DROP;
    snprintf(path, sizeof(path),
             "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s/"
             "status?fieldManager=" DRA_DRIVER_NAME "&force=true",
             e->namespace_, e->name);
    *status = kube_request(&st.d->kube, "PATCH", path, json, &body, err);
    cJSON_free(json);
    if (*status >= 200 && *status < 300)
        out = WRITTEN;
    else if (*status == 404 && claim_gone(&body, e->name))
        out = DROP;
    else if (*status == 404 || *status == 422)
        out = OFF;
    else if (*status == 409) /* another claim under the name now */
        out = DROP;
    else
        out = RETRY;
    if (out == RETRY)
        log_warn("claim status of %s/%s: %s", e->namespace_, e->name,
                 *status < 0 ? err : "HTTP error");
    kube_body_free(&body);
    return out;
}

/* Waits until the monotonic time at (ns) or a stop; false on a stop. */
static bool wait_until(uint64_t at)
{
    while (!st.stopping) {
        uint64_t now = now_ns();
        struct timespec ts;

        if (now >= at)
            return true;
        ts.tv_sec = (time_t)(at / 1000000000ULL);
        ts.tv_nsec = (long)(at % 1000000000ULL);
        pthread_cond_timedwait(&st.wake, &st.lock, &ts);
    }
    return false;
}

static void *run(void *arg)
{
    uint64_t tat = 0; /* GCRA's theoretical arrival time */
    uint64_t backoff = 0, not_before = 0;

    (void)arg;
    pthread_mutex_lock(&st.lock);
    for (;;) {
        struct status_entry e;
        uint64_t slack = (uint64_t)(st.burst - 1) * st.interval_ns, now;
        enum outcome out;
        long status;

        while (!st.stopping && !st.count)
            pthread_cond_wait(&st.wake, &st.lock);
        if (!wait_until(not_before) || !wait_until(tat > slack ? tat - slack : 0))
            break;
        now = now_ns();
        tat = (tat > now ? tat : now) + st.interval_ns;
        e = st.queue[st.head]; /* stays queued while it may be retried */
        pthread_mutex_unlock(&st.lock);
        out = write_status(&e, &status);
        pthread_mutex_lock(&st.lock);
        if (out == RETRY) {
            /* The pause: a random part of a doubling span, so that the
             * nodes a failing server turned away do not return at once. */
            backoff = backoff ? backoff * 2 : BACKOFF_MIN_NS;
            if (backoff > BACKOFF_MAX_NS)
                backoff = BACKOFF_MAX_NS;
            not_before =
                now_ns() + backoff / 2 + (uint64_t)random() % (backoff / 2 + 1);
            if (++st.queue[st.head].tries < STATUS_TRIES)
                continue;
        } else {
            backoff = 0;
        }
        st.head = (st.head + 1) % STATUS_QUEUE;
        st.count--;
        if (out == OFF) { /* before the line: a Prepare after it queues none */
            st.off = true;
            st.count = 0;
            log_warn("claim status: the API server does not take device "
                     "status (HTTP %ld for %s/%s): not writing it any more",
                     status, e.namespace_, e.name);
        }
    }
    pthread_mutex_unlock(&st.lock);
    return NULL;
}

int status_start(struct driver *d)
{
    long qps = env_int_range("NVSHARE_DRA_STATUS_QPS", 0, 1000, 5);
    pthread_condattr_t attr;

    if (qps == 0) {
        log_info("claim status: off (NVSHARE_DRA_STATUS_QPS=0)");
        return 0;
    }
    st.d = d;
    /* Each node its own pauses: a server that turned many away must not
     * see them all return at once. */
    srandom((unsigned)(getpid() ^ now_ns()));
    st.interval_ns = 1000000000ULL / (uint64_t)qps;
    st.burst = (unsigned)qps;
    if (!(st.queue = calloc(STATUS_QUEUE, sizeof(*st.queue)))) {
        log_error("out of memory for the claim status queue");
        return -1;
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&st.wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&st.thread, NULL, run, NULL)) {
        log_error("cannot start the claim status thread");
        free(st.queue);
        return -1;
    }
    st.started = true;
    return 0;
}

void status_stop(void)
{
    if (!st.started)
        return;
    pthread_mutex_lock(&st.lock);
    st.stopping = true;
    pthread_cond_signal(&st.wake);
    pthread_mutex_unlock(&st.lock);
    pthread_join(st.thread, NULL);
    st.started = false;
    free(st.queue);
}
