/* kube.c - see kube.h. */
#include "kube.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "log.h"

#define CONNECT_TIMEOUT_S 5L
#define REQUEST_TIMEOUT_S 30L /* a list or an event post */
#define STREAM_STALL_S                                                         \
    90L /* a watch quiet this long (bookmarks come
                                  every minute or so) is dead */

int kube_config(struct kube *k)
{
    const char *api = getenv("NVSHARE_API_SERVER");
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *sa = getenv("NVSHARE_SA_DIR");

    memset(k, 0, sizeof(*k));
    snprintf(k->sa_dir, sizeof(k->sa_dir), "%s", sa && *sa ? sa : KUBE_SA_DIR);
    if (api && *api) {
        snprintf(k->api, sizeof(k->api), "%s", api);
    } else if (host && *host) {
        /* An IPv6 service address needs brackets in a URL. */
        bool v6 = strchr(host, ':') != NULL;
        snprintf(k->api, sizeof(k->api), "https://%s%s%s:%s", v6 ? "[" : "",
                 host, v6 ? "]" : "", port && *port ? port : "443");
    } else {
        log_error(
            "no API server: set KUBERNETES_SERVICE_HOST (set in every pod) "
            "or NVSHARE_API_SERVER");
        return -1;
    }
    size_t n = strlen(k->api);
    while (n > 0 && k->api[n - 1] == '/')
        k->api[--n] = '\0';
    return 0;
}

void kube_body_free(struct kube_body *b)
{
    free(b->data);
    *b = (struct kube_body){0};
}

/* Appends len bytes and a NUL. 0, EFBIG when the body would exceed max
 * bytes, ENOMEM. */
static int append(struct kube_body *b, const char *data, size_t len, size_t max)
{
    if (len > max || b->len > max - len)
        return EFBIG;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        char *grown;

        while (cap < b->len + len + 1)
            cap *= 2;
        if (!(grown = realloc(b->data, cap)))
            return ENOMEM;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

/* The error line of a read that append() refused. */
static void bound_error(const struct kube *k, int failure, const char *what,
                        size_t max, char *err)
{
    if (failure == EFBIG)
        snprintf(err, KUBE_ERR_LEN, "API server %.150s: %s over %zu MiB: refused",
                 k->api, what, max >> 20);
    else
        snprintf(err, KUBE_ERR_LEN, "API server %.150s: out of memory for %s",
                 k->api, what);
}

/* The service account's token, trailing newline cut; "" when none. */
static void read_token(const struct kube *k, char *token, size_t len)
{
    char path[600];
    FILE *f;
    size_t n = 0;

    token[0] = '\0';
    snprintf(path, sizeof(path), "%s/token", k->sa_dir);
    if (!(f = fopen(path, "r")))
        return;
    n = fread(token, 1, len - 1, f);
    fclose(f);
    token[n] = '\0';
    while (n > 0 &&
           (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
        token[--n] = '\0';
}

/* k's certificates; the service account's CA where k names none. */
static void set_tls(CURL *h, const struct kube *k)
{
    char ca[600];

    if (k->ca_pem) {
        struct curl_blob b = {(void *)k->ca_pem, strlen(k->ca_pem),
                              CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    } else {
        snprintf(ca, sizeof(ca), "%s/ca.crt", k->sa_dir);
        if (access(ca, R_OK) == 0)
            curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    }
    if (k->cert_pem && k->key_pem) {
        struct curl_blob cert = {(void *)k->cert_pem, strlen(k->cert_pem),
                                 CURL_BLOB_COPY},
                         key = {(void *)k->key_pem, strlen(k->key_pem),
                                CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    }
    if (k->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

CURL *kube_handle(const struct kube *k, const char *path,
                  struct curl_slist **headers, char *err)
{
    char token[8192]; /* per call: the DRA driver's workers call at once */
    char url[2048], auth[8300];
    CURL *h = curl_easy_init();

    if (!h) {
        snprintf(err, KUBE_ERR_LEN, "cannot make an HTTP handle");
        return NULL;
    }
    snprintf(url, sizeof(url), "%s%s", k->api, path);
    if (k->token)
        snprintf(token, sizeof(token), "%s", k->token);
    else
        read_token(k, token, sizeof(token));
    *headers = curl_slist_append(NULL, "Accept: application/json");
    if (token[0]) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        *headers = curl_slist_append(*headers, auth);
    }
    set_tls(h, k);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    return h;
}

struct collected {
    struct kube_body *body;
    int failure; /* of append() */
};

static size_t collect(char *data, size_t size, size_t n, void *userdata)
{
    struct collected *c = userdata;

    c->failure = append(c->body, data, size * n, KUBE_BODY_MAX);
    return c->failure ? 0 : size * n;
}

long kube_request(const struct kube *k, const char *method, const char *path,
                  const char *json, struct kube_body *body, char *err)
{
    struct curl_slist *headers = NULL;
    CURL *h = kube_handle(k, path, &headers, err);
    struct collected c = {body, 0};
    long status = -1;
    CURLcode rc;

    if (!h)
        return -1;
    if (json) {
        headers =
            curl_slist_append(headers, strcmp(method, "PATCH")
                                           ? "Content-Type: application/json"
                                           : "Content-Type: "
                                             "application/apply-patch+yaml");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_TIMEOUT,
                     k->timeout_s ? k->timeout_s : REQUEST_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    if ((rc = curl_easy_perform(h)) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else if (c.failure)
        bound_error(k, c.failure, "an answer", KUBE_BODY_MAX, err);
    else
        snprintf(err, KUBE_ERR_LEN, "API server %.150s: %.80s", k->api,
                 curl_easy_strerror(rc));
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    return status;
}

struct stream {
    CURL *h;
    const struct kube_stream_calls *calls;
    struct kube_body pending; /* a line not finished yet, or an error body */
    long status;
    int failure;  /* of append(), or EFBIG for a line over KUBE_LINE_MAX */
    bool stopped; /* a call ended it */
};

static size_t stream_data(char *data, size_t size, size_t n, void *userdata)
{
    struct stream *s = userdata;
    size_t len = size * n, scanned = s->pending.len, done = 0;
    char *nl;

    if (!s->status)
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
    /* An error body is kept whole for the caller's Status; a line is
     * bounded below, once the lines it ends are taken out. */
    s->failure = append(&s->pending, data, len,
                        s->status == 200 ? SIZE_MAX : KUBE_BODY_MAX);
    if (s->failure)
        return 0;
    if (s->status != 200)
        return len;
    /* One event per line; a line may span chunks. The bytes kept from
     * earlier chunks hold no newline, so only the new ones are searched:
     * a long line costs its length once, not once per chunk. */
    while ((nl = memchr(s->pending.data + scanned, '\n',
                        s->pending.len - scanned))) {
        size_t end = (size_t)(nl - s->pending.data);
        int stop = end > done
                       ? s->calls->line(s->calls->ctx, s->pending.data + done,
                                        end - done)
                       : 0;
        done = scanned = end + 1;
        if (stop) {
            s->stopped = true;
            return 0;
        }
    }
    s->pending.len -= done;
    memmove(s->pending.data, s->pending.data + done, s->pending.len);
    s->pending.data[s->pending.len] = '\0';
    if (s->pending.len > KUBE_LINE_MAX) {
        s->failure = EFBIG;
        return 0;
    }
    return len;
}

/* Runs the transfer, calling tick between reads and waking for its
 * descriptor too. The transfer's result; CURLE_FAILED_INIT when it never
 * finished (a call stopped it, the multi interface failed). */
static CURLcode stream_run(struct stream *s)
{
    CURLM *m = curl_multi_init();
    CURLcode rc = CURLE_FAILED_INIT;
    CURLMsg *msg;
    int running = 1, left;

    if (!m || curl_multi_add_handle(m, s->h)) {
        curl_multi_cleanup(m);
        return rc;
    }
    while (curl_multi_perform(m, &running) == CURLM_OK && running && !s->stopped) {
        struct curl_waitfd also = {.fd = -1, .events = CURL_WAIT_POLLIN};
        int timeout_ms = 1000;

        if (s->calls->tick(s->calls->ctx, &also.fd, &timeout_ms)) {
            s->stopped = true;
            break;
        }
        if (curl_multi_poll(m, &also, also.fd >= 0, timeout_ms, NULL) != CURLM_OK)
            break;
    }
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            rc = msg->data.result;
    curl_multi_remove_handle(m, s->h);
    curl_multi_cleanup(m);
    return rc;
}

long kube_stream(const struct kube *k, const char *path,
                 const struct kube_stream_calls *calls, struct kube_body *body,
                 char *err)
{
    struct curl_slist *headers = NULL;
    struct stream s = {.calls = calls};
    CURLcode rc;

    if (!(s.h = kube_handle(k, path, &headers, err)))
        return -1;
    curl_easy_setopt(s.h, CURLOPT_WRITEFUNCTION, stream_data);
    curl_easy_setopt(s.h, CURLOPT_WRITEDATA, &s);
    /* A watch that goes silent (a dead peer, a half-open connection) ends
     * like a dropped one. */
    curl_easy_setopt(s.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(s.h, CURLOPT_LOW_SPEED_TIME, STREAM_STALL_S);
    rc = stream_run(&s);
    if (!s.status)
        curl_easy_getinfo(s.h, CURLINFO_RESPONSE_CODE, &s.status);
    curl_easy_cleanup(s.h);
    curl_slist_free_all(headers);
    if (s.stopped) {
        kube_body_free(&s.pending);
        return -2;
    }
    if (s.failure) {
        if (s.status == 200)
            bound_error(k, s.failure, "a watch event (a line)", KUBE_LINE_MAX,
                        err);
        else
            bound_error(k, s.failure, "an answer", KUBE_BODY_MAX, err);
        kube_body_free(&s.pending);
        return -1;
    }
    if (rc != CURLE_OK && s.status == 200) {
        snprintf(err, KUBE_ERR_LEN, "watch dropped: %s", curl_easy_strerror(rc));
        kube_body_free(&s.pending);
        return -1;
    }
    if (rc != CURLE_OK && !s.status) {
        snprintf(err, KUBE_ERR_LEN, "API server %.150s: %.80s", k->api,
                 curl_easy_strerror(rc));
        kube_body_free(&s.pending);
        return -1;
    }
    *body = s.pending;
    return s.status;
}
