/* cdi.c - the CDI spec of a prepared claim: one file per claim
 * (gpu.nvshare.com-claim_<uid>.json, in /var/run/cdi by default), one
 * device per share, named after the claim UID so that two shares of one
 * GPU never get the same ID and no name is reused (runtimes cache specs).
 * A device gives the container its GPU (NVIDIA_VISIBLE_DEVICES, for the
 * NVIDIA runtime), libnvshare.so preloaded and the scheduler's socket
 * directory. It states no limit: a container may hold several claims
 * (and a claim several pods), whose sum no one claim's spec can know, and
 * a limit in the environment could only lower it. The limits are the
 * operator's in the scheduler (limits.c), which keeps them over its
 * restarts. */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "log.h"

static void spec_path(const struct driver *d, const char *uid, char *buf,
                      size_t len)
{
    snprintf(buf, len, "%s/%s-claim_%s.json", d->cdi_dir, DRA_DRIVER_NAME, uid);
}

static void device_name(const struct dra_claim *c, int share, char *buf,
                        size_t len)
{
    snprintf(buf, len, "%s-gpu-%d-%d", c->uid, c->shares[share].gpu, share);
}

void cdi_device_id(const struct dra_claim *c, int share, char *buf, size_t len)
{
    char name[DRA_UID_MAX + 32];

    device_name(c, share, name, sizeof(name));
    snprintf(buf, len, "%s=%s", DRA_CDI_KIND, name);
}

static void add_env(cJSON *env, const char *key, const char *value)
{
    char line[PATH_MAX + 64];

    snprintf(line, sizeof(line), "%s=%s", key, value);
    cJSON_AddItemToArray(env, cJSON_CreateString(line));
}

static void add_mount(cJSON *mounts, const char *host, const char *container,
                      bool read_only)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *options = cJSON_AddArrayToObject(m, "options");

    cJSON_AddStringToObject(m, "hostPath", host);
    cJSON_AddStringToObject(m, "containerPath", container);
    cJSON_AddItemToArray(options, cJSON_CreateString(read_only ? "ro" : "rw"));
    cJSON_AddItemToArray(options, cJSON_CreateString("nosuid"));
    cJSON_AddItemToArray(options, cJSON_CreateString("nodev"));
    cJSON_AddItemToArray(options, cJSON_CreateString("bind"));
    cJSON_AddItemToArray(mounts, m);
}

static cJSON *device_json(const struct driver *d, const struct dra_claim *c,
                          int share)
{
    const struct dra_share *s = &c->shares[share];
    cJSON *dev = cJSON_CreateObject(), *edits, *env, *mounts;
    char name[DRA_UID_MAX + 32];

    device_name(c, share, name, sizeof(name));
    cJSON_AddStringToObject(dev, "name", name);
    edits = cJSON_AddObjectToObject(dev, "containerEdits");
    env = cJSON_AddArrayToObject(edits, "env");
    add_env(env, "NVIDIA_VISIBLE_DEVICES", d->gpus.gpus[s->gpu].uuid);
    add_env(env, "LD_PRELOAD", CONTAINER_LIB_DIR "/libnvshare.so");
    add_env(env, "NVSHARE_SOCK_DIR", CONTAINER_SOCK_DIR);
    if (d->gpus.oversubscribed)
        add_env(env, "NVSHARE_ENABLE_OVERSUB", "1");
    mounts = cJSON_AddArrayToObject(edits, "mounts");
    add_mount(mounts, d->gpus.lib_dir, CONTAINER_LIB_DIR, true);
    add_mount(mounts, d->gpus.sock_dir, CONTAINER_SOCK_DIR, false);
    return dev;
}

int cdi_write(const struct driver *d, const struct dra_claim *c,
              char err[DRA_ERR_LEN])
{
    cJSON *spec = cJSON_CreateObject(), *devices;
    char path[PATH_MAX];
    char *text;
    int rc;

    /* 0.5.0: the first version that takes a device name starting with a
     * digit, as a claim UID may. */
    cJSON_AddStringToObject(spec, "cdiVersion", "0.5.0");
    cJSON_AddStringToObject(spec, "kind", DRA_CDI_KIND);
    devices = cJSON_AddArrayToObject(spec, "devices");
    for (int s = 0; s < c->n_shares; s++)
        cJSON_AddItemToArray(devices, device_json(d, c, s));
    text = cJSON_Print(spec);
    cJSON_Delete(spec);
    spec_path(d, c->uid, path, sizeof(path));
    rc = file_replace(path, text, err);
    cJSON_free(text);
    return rc;
}

bool cdi_exists(const struct driver *d, const char *uid)
{
    char path[PATH_MAX];

    spec_path(d, uid, path, sizeof(path));
    return access(path, F_OK) == 0;
}

void cdi_remove(const struct driver *d, const char *uid)
{
    char path[PATH_MAX];

    spec_path(d, uid, path, sizeof(path));
    if (unlink(path) && errno != ENOENT)
        log_warn("cannot remove CDI spec %s: %s", path, strerror(errno));
}
