/* main.c - nvshare-dra-driver: the node's GPUs as DRA devices of
 * gpu.nvshare.com (see driver.h, and docs/dra.md for its settings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "cli.h"
#include "driver.h"
#include "env.h"
#include "log.h"
#include "server.h"

#define API_TIMEOUT_S 5 /* one request: a claim's read is retried (prepare.c) */

static void env_path(const char *name, const char *fallback, char *buf, size_t len)
{
    const char *text = getenv(name);

    snprintf(buf, len, "%s", text && *text ? text : fallback);
}

/* The Node's UID, for the slice's owner reference: the API server deletes
 * the slice with its node. Without it the slice has no owner. */
static void read_node_uid(struct driver *d)
{
    char path[DRA_NAME_MAX + 16], err[KUBE_ERR_LEN];
    struct kube_body body = {0};
    long status;
    cJSON *node;

    snprintf(path, sizeof(path), "/api/v1/nodes/%s", d->node);
    status = kube_request(&d->kube, "GET", path, NULL, &body, err);
    node = status == 200 ? cJSON_Parse(body.data) : NULL;
    const cJSON *uid =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"),
                                         "uid");
    if (cJSON_IsString(uid) && strlen(uid->valuestring) < sizeof(d->node_uid))
        snprintf(d->node_uid, sizeof(d->node_uid), "%s", uid->valuestring);
    else
        log_warn("cannot read Node %s (%s): its ResourceSlice gets no owner",
                 d->node, status < 0 ? err : "HTTP error or no uid");
    cJSON_Delete(node);
    kube_body_free(&body);
}

int driver_configure(struct driver *d)
{
    const char *node = getenv("NODE_NAME");

    if (plugin_configure(&d->gpus))
        return -1;
    nvml_describe(&d->gpus);
    if (!node || !*node || strlen(node) >= sizeof(d->node) ||
        strspn(node, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(node)) {
        log_error(
            "NODE_NAME must name this node (a DNS subdomain): set it from "
            "spec.nodeName in the DaemonSet");
        return -1;
    }
    snprintf(d->node, sizeof(d->node), "%s", node);
    env_path("NVSHARE_DRA_PLUGIN_DIR",
             "/var/lib/kubelet/plugins/" DRA_DRIVER_NAME, d->plugin_dir,
             sizeof(d->plugin_dir));
    env_path("NVSHARE_DRA_REGISTRY_DIR", "/var/lib/kubelet/plugins_registry",
             d->registry_dir, sizeof(d->registry_dir));
    env_path("NVSHARE_CDI_DIR", "/var/run/cdi", d->cdi_dir, sizeof(d->cdi_dir));
    d->default_memory = env_size_bytes("NVSHARE_DRA_DEFAULT_MEMORY", 1ULL << 30);
    d->default_compute =
        (unsigned)env_int_range("NVSHARE_DRA_DEFAULT_COMPUTE", 1, 100, 10);
    pthread_mutex_init(&d->lock, NULL);
    if (!(d->claims = calloc(DRA_MAX_CLAIMS, sizeof(*d->claims)))) {
        log_error("out of memory for the claim table");
        return -1;
    }
    if (kube_config(&d->kube))
        return -1;
    d->kube.timeout_s = API_TIMEOUT_S;
    read_node_uid(d);
    return checkpoint_load(d);
}

static void print_usage(FILE *out)
{
    fputs("usage: nvshare-dra-driver [--help | --version]\n"
          "\n"
          "Kubernetes DRA driver for gpu.nvshare.com (docs/dra.md): publishes "
          "this\n"
          "node's GPUs as a ResourceSlice and, for each prepared claim, sets "
          "its\n"
          "pod's memory quota and core limit in the scheduler. Settings, from "
          "the\n"
          "environment:\n"
          "  NODE_NAME               this node's name (the downward API's\n"
          "                          spec.nodeName); required\n"
          "  NVSHARE_API_SERVER      the API server's URL (default: the "
          "in-cluster\n"
          "                          KUBERNETES_SERVICE_HOST/_PORT)\n"
          "  NVSHARE_DRA_PLUGIN_DIR  its kubelet plugin directory (default\n"
          "                          /var/lib/kubelet/plugins/" DRA_DRIVER_NAME
          ")\n"
          "  NVSHARE_DRA_REGISTRY_DIR kubelet's plugin registry (default\n"
          "                          /var/lib/kubelet/plugins_registry)\n"
          "  NVSHARE_CDI_DIR         where CDI specs go (default "
          "/var/run/cdi)\n"
          "  NVSHARE_DRA_DEFAULT_MEMORY a claim's memory when it names none\n"
          "                          (default 1Gi)\n"
          "  NVSHARE_DRA_DEFAULT_COMPUTE a claim's compute when it names none, "
          "percent\n"
          "                          (1-100, default 10)\n"
          "  NVSHARE_DRA_STATUS_QPS  claim status writes a second at most "
          "(0: none,\n"
          "                          default 5)\n"
          "  NVSHARE_SOCK_DIR        the scheduler's socket directory\n"
          "  NVSHARE_LOG_FORMAT      text (default) or json\n",
          out);
}

int main(int argc, char **argv)
{
    static struct driver driver;
    int rc = cli_standard_args(argc, argv, "nvshare-dra-driver", print_usage);

    if (rc >= 0)
        return rc;
    log_init("dra-driver", LOG_INFO);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = driver_configure(&driver) ? 1 : server_run(&driver);
    free(driver.claims);
    curl_global_cleanup();
    return rc;
}
