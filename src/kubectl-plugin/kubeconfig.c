/* kubeconfig.c - which API server, with which credentials (plugin.h).
 *
 * Inside a pod, or in tests (NVSHARE_API_SERVER), the API-server client's
 * own configuration (kube_config). Elsewhere the kubeconfig kubectl would
 * use: the plugin runs under kubectl, so kubectl itself resolves it
 * (`kubectl config view --minify --raw -o json`: KUBECONFIG's merged
 * files, the current or --context's context), and what it says is read
 * here: the server, its CA, a token or a client certificate. An exec or
 * auth-provider credential plugin is not run; the error says so. */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "plugin.h"

#define CONFIG_MAX (1u << 20) /* a kubeconfig, or a file it names */

extern char **environ;

/* The output of kubectl config view, malloc'd; NULL with err. */
static char *kubectl_view(const char *kubeconfig, const char *context, char *err)
{
    char *argv[10] = {"kubectl", "config", "view", "--minify",
                      "--raw",   "-o",     "json"};
    int argc = 7, fds[2], status;
    posix_spawn_file_actions_t fa;
    char *out = malloc(CONFIG_MAX + 1);
    size_t len = 0;
    ssize_t got = 0;
    pid_t pid;

    if (kubeconfig)
        argv[argc++] = "--kubeconfig", argv[argc++] = (char *)kubeconfig;
    if (context)
        argv[argc++] = "--context", argv[argc++] = (char *)context;
    argv[argc] = NULL;
    if (!out || pipe(fds)) {
        free(out);
        snprintf(err, KUBE_ERR_LEN, "cannot run kubectl: %s", strerror(errno));
        return NULL;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    if ((errno = posix_spawnp(&pid, "kubectl", &fa, NULL, argv, environ))) {
        snprintf(err, KUBE_ERR_LEN,
                 "cannot run kubectl to read the kubeconfig: %s",
                 strerror(errno));
        pid = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    while (pid > 0 && len < CONFIG_MAX &&
           ((got = read(fds[0], out + len, CONFIG_MAX - len)) > 0 ||
            (got < 0 && errno == EINTR)))
        len += got > 0 ? (size_t)got : 0;
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) || len == CONFIG_MAX) {
        if (pid > 0)
            snprintf(err, KUBE_ERR_LEN,
                     "kubectl config view failed: no kubeconfig (set "
                     "KUBECONFIG or --kubeconfig)");
        free(out);
        return NULL;
    }
    out[len] = '\0';
    return out;
}

static int b64_value(int c)
{
    const char *alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(alphabet, c) : NULL;

    return p ? (int)(p - alphabet) : -1;
}

/* The decoded text of base64 in, NUL-terminated; NULL if not base64. */
static char *b64_decode(const char *in)
{
    char *out = malloc(strlen(in) / 4 * 3 + 4), *o = out;
    unsigned acc = 0;
    int bits = 0;

    for (; out && *in && *in != '='; in++) {
        int v = b64_value(*in);

        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        if ((bits += 6) >= 8) {
            bits -= 8;
            *o++ = (char)(acc >> bits);
        }
    }
    if (out)
        *o = '\0';
    return out;
}

/* A file's text, at most CONFIG_MAX bytes, trailing newline cut. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = malloc(CONFIG_MAX + 1);
    size_t n = 0;

    if (f && text) {
        n = fread(text, 1, CONFIG_MAX, f);
        text[n] = '\0';
    }
    if (f)
        fclose(f);
    if (!f || !text || n == CONFIG_MAX) {
        free(text);
        return NULL;
    }
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    return text;
}

/* The "data" form (base64) or the file form of a credential; NULL when
 * neither is there. *bad when one is but cannot be read. */
static char *credential(const cJSON *o, const char *data_key,
                        const char *file_key, bool *bad)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, data_key);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, file_key);
    char *text = NULL;

    if (cJSON_IsString(data))
        text = b64_decode(data->valuestring);
    else if (cJSON_IsString(file))
        text = read_file(file->valuestring);
    else
        return NULL;
    if (!text)
        *bad = true;
    return text;
}

/* The first item's named object: kubectl's --minify leaves one. */
static const cJSON *only(const cJSON *doc, const char *list, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, list), 0), key);
}

static int from_kubeconfig(struct kube *k, const char *text, char *ns, char *err)
{
    cJSON *doc = cJSON_Parse(text);
    const cJSON *context_ns =
        cJSON_GetObjectItemCaseSensitive(only(doc, "contexts", "context"),
                                         "namespace");
    const cJSON *cluster = only(doc, "clusters", "cluster");
    const cJSON *user = only(doc, "users", "user");
    const cJSON *server = cJSON_GetObjectItemCaseSensitive(cluster, "server");
    const cJSON *tok, *tok_file;
    bool bad = false;
    char *token = NULL;

    if (!cJSON_IsString(server) || strlen(server->valuestring) >= sizeof(k->api)) {
        snprintf(err, KUBE_ERR_LEN, "the kubeconfig names no server");
        cJSON_Delete(doc);
        return -1;
    }
    if (cJSON_GetObjectItemCaseSensitive(user, "exec") ||
        cJSON_GetObjectItemCaseSensitive(user, "auth-provider")) {
        snprintf(err, KUBE_ERR_LEN,
                 "the kubeconfig's user runs a credential plugin, which "
                 "kubectl-nvshare does not: use a token or a client "
                 "certificate (docs/kubernetes.md)");
        cJSON_Delete(doc);
        return -1;
    }
    memset(k, 0, sizeof(*k));
    if (cJSON_IsString(context_ns) && strlen(context_ns->valuestring) < NAME_LEN)
        strcpy(ns, context_ns->valuestring);
    snprintf(k->api, sizeof(k->api), "%s", server->valuestring);
    k->api[strcspn(k->api, "\n")] = '\0';
    while (strlen(k->api) && k->api[strlen(k->api) - 1] == '/')
        k->api[strlen(k->api) - 1] = '\0';
    k->insecure = cJSON_IsTrue(
        cJSON_GetObjectItemCaseSensitive(cluster, "insecure-skip-tls-verify"));
    k->ca_pem = credential(cluster, "certificate-authority-data",
                           "certificate-authority", &bad);
    k->cert_pem =
        credential(user, "client-certificate-data", "client-certificate", &bad);
    k->key_pem = credential(user, "client-key-data", "client-key", &bad);
    tok = cJSON_GetObjectItemCaseSensitive(user, "token");
    tok_file = cJSON_GetObjectItemCaseSensitive(user, "tokenFile");
    if (cJSON_IsString(tok))
        token = strdup(tok->valuestring);
    else if (cJSON_IsString(tok_file) &&
             !(token = read_file(tok_file->valuestring)))
        bad = true;
    k->token = token;
    cJSON_Delete(doc);
    if (bad) {
        snprintf(err, KUBE_ERR_LEN,
                 "the kubeconfig names a certificate, key or token that "
                 "cannot be read");
        plugin_kube_free(k);
        return -1;
    }
    return 0;
}

int plugin_kube(struct kube *k, const char *kubeconfig, const char *context,
                char *ns, char *err)
{
    const char *api = getenv("NVSHARE_API_SERVER");
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    char *view;
    int rc;

    memset(k, 0, sizeof(*k));
    if ((api && *api) ||
        (host && *host && !kubeconfig && !context && !getenv("KUBECONFIG")))
        return kube_config(k)
                   ? (snprintf(err, KUBE_ERR_LEN, "no API server"), -1)
                   : 0;
    if (!(view = kubectl_view(kubeconfig, context, err)))
        return -1;
    rc = from_kubeconfig(k, view, ns, err);
    free(view);
    return rc;
}

void plugin_kube_free(struct kube *k)
{
    free((char *)k->token);
    free((char *)k->ca_pem);
    free((char *)k->cert_pem);
    free((char *)k->key_pem);
    k->token = k->ca_pem = k->cert_pem = k->key_pem = NULL;
}
