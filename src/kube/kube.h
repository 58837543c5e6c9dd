/* kube.h - the few calls nvshare makes to the Kubernetes API server.
 *
 * libcurl, one request at a time on each thread: threads may make their
 * own at once (the DRA driver's workers do), for nothing is shared but
 * the struct kube they only read; kube_handle gives the caller a handle
 * for its own curl_multi (kubectl-nvshare). In a pod the server is
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, verified with
 * the service account's ca.crt; tests point NVSHARE_API_SERVER at a plain
 * http server on loopback and NVSHARE_SA_DIR at their own token. The token
 * is read again for every request, so a rotated one is used from the next
 * connection on (a watch lasts at most the timeout the watcher asks for).
 *
 * Every read is bounded, so that a broken or hostile server costs the node
 * an error line, not its memory or a core: a response body holds at most
 * KUBE_BODY_MAX bytes and a streamed line KUBE_LINE_MAX. */
#ifndef NVSHARE_KUBE_H
#define NVSHARE_KUBE_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#define KUBE_ERR_LEN 256 /* an error text: the server and curl's reason */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* A list page of 250 pods at 64 KiB each: a pod is a few KiB, and one
 * with the largest annotations the API server takes (256 KiB) is rare.
 * The watcher's container is given 64 MiB in all (deploy/). */
#define KUBE_BODY_MAX (16u << 20)
/* One watch event is one pod: etcd stores at most 1.5 MiB per object, and
 * its JSON is not several times larger. */
#define KUBE_LINE_MAX (8u << 20)

struct kube {
    char api[512];    /* base URL, no trailing slash */
    char sa_dir[512]; /* token and ca.crt */
    long timeout_s;   /* of one request; 0: 30 s */
    /* A kubeconfig's credentials (kubectl-nvshare), owned by whoever set
     * them; NULL: the service account's token and ca.crt. The PEM texts are
     * certificate-authority, client-certificate and client-key, read or
     * decoded. */
    const char *token, *ca_pem, *cert_pem, *key_pem;
    bool insecure; /* insecure-skip-tls-verify */
};

/* From the environment; -1 with one error line when no server is named. */
int kube_config(struct kube *k);

/* An easy handle for a GET of path with k's credentials, for callers that
 * run several at once (curl_multi); *headers is theirs to free after the
 * handle. NULL with err when out of memory. */
CURL *kube_handle(const struct kube *k, const char *path,
                  struct curl_slist **headers, char *err);

/* A response body as it arrives. */
struct kube_body {
    char *data;
    size_t len, cap;
};
void kube_body_free(struct kube_body *b);

/* method ("GET", "POST", "DELETE", "PATCH") of path, with json as the
 * body when not NULL; a PATCH's is a server-side apply configuration
 * (JSON is YAML), which path names a fieldManager for: the HTTP status, or -1 with err when no answer came or it
 * exceeded KUBE_BODY_MAX. */
long kube_request(const struct kube *k, const char *method, const char *path,
                  const char *json, struct kube_body *body, char *err);

/* line is called for each line of a streamed 200 response (a watch
 * event); tick before each wait for the server, which lasts *timeout_ms at
 * most (1000 unless tick lowers it) and ends early when *fd (-1 unless
 * tick names one) is readable too. Nonzero from either ends the stream. */
struct kube_stream_calls {
    int (*line)(void *ctx, const char *line, size_t len);
    int (*tick)(void *ctx, int *fd, int *timeout_ms);
    void *ctx;
};

/* A streamed GET of path. The HTTP status (body holds the response of a
 * non-200 one), -1 with err when the connection failed or dropped or a
 * line exceeded KUBE_LINE_MAX, -2 when a call ended it. */
long kube_stream(const struct kube *k, const char *path,
                 const struct kube_stream_calls *calls, struct kube_body *body,
                 char *err);

#endif
