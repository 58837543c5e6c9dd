/* driver.h - nvshare-dra-driver: the node's GPUs as DRA devices of
 * gpu.nvshare.com, shared by consumable capacity and held to it by the
 * scheduler.
 *
 * Each GPU is one device ("gpu-<index>") that many claims may share: its
 * capacity "memory" (bytes, times the oversubscription ratio) and
 * "computePercent" (100) are what the Kubernetes scheduler divides among
 * them. On Prepare the driver reads each claim's allocation from the API
 * server and hands what it consumed to nvshare's scheduler as the
 * operator's limits of the pod it is reserved for; the container gets a
 * CDI device with libnvshare.so. What is prepared is kept, by claim UID,
 * in a checkpoint, so Unprepare needs nothing but the UID and a restart
 * forgets nothing. */
#ifndef NVSHARE_DRA_DRIVER_H
#define NVSHARE_DRA_DRIVER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube.h"
#include "plugin.h"

#define DRA_DRIVER_NAME "gpu.nvshare.com"
#define DRA_CDI_KIND "k8s.gpu.nvshare.com/claim"
#define DRA_ERR_LEN 256
#define DRA_UID_MAX 64       /* a Kubernetes UID is 36 characters */
#define DRA_NAME_MAX 254     /* DNS subdomain, and its NUL */
#define DRA_NAMESPACE_MAX 64 /* DNS label, and its NUL */
#define DRA_MAX_RESULTS 32   /* allocation results per claim (API limit) */
#define DRA_MAX_PODS 256     /* reservedFor entries (API limit) */
#define DRA_MAX_CLAIMS 512   /* prepared on this node at once */

/* One device a claim was allocated, as Prepare returns it. */
struct dra_share {
    int gpu;          /* index into driver.gpus.gpus */
    char request[64]; /* base request name (no /subrequest) */
    char share_id[DRA_UID_MAX];
    uint64_t memory;  /* bytes consumed; 0: the whole device */
    unsigned compute; /* percent consumed; 0: the whole device */
};

/* A prepared claim, or one being prepared. */
struct dra_claim {
    char uid[DRA_UID_MAX];
    char namespace_[DRA_NAMESPACE_MAX];
    char name[DRA_NAME_MAX];
    struct dra_share shares[DRA_MAX_RESULTS];
    int n_shares;
    char pods[DRA_MAX_PODS][DRA_UID_MAX]; /* UIDs of those reserving it */
    int n_pods;
    unsigned priority; /* enum priority_class from opaque config; 0: none */
    bool completed;    /* false: a Prepare began and may have set limits */
};

struct driver {
    struct plugin gpus; /* the device plugin's view: GPUs, unit, paths */
    struct kube kube;
    char node[DRA_NAME_MAX];
    char node_uid[DRA_UID_MAX];       /* "" until the Node was read */
    char plugin_dir[PATH_MAX - 64];   /* dra.sock, checkpoint.json */
    char registry_dir[PATH_MAX - 64]; /* kubelet's plugins_registry */
    char cdi_dir[PATH_MAX - 128];
    uint64_t default_memory; /* what a claim that names none consumes */
    unsigned default_compute;
    /* The claim table, the checkpoint, the CDI specs and the scheduler's
     * limits, which the workers change, are under lock; the API server is
     * read outside it. */
    pthread_mutex_t lock;
    struct dra_claim *claims; /* prepared, as in the checkpoint */
    int n_claims;
    long long slice_generation;    /* the pool's, as last published */
    char slice_name[DRA_NAME_MAX]; /* "" when none is known to exist */
};

/* config.c's environment and GPUs, the API server, the checkpoint. 0, or
 * -1 after logging why the driver cannot run. */
int driver_configure(struct driver *d);

/* claim.c: quantities and the ResourceClaim JSON (no I/O). */

/* A Kubernetes quantity ("4Gi", "4096Mi", "30", "1500m", "1.5G") rounded
 * up to a whole number. false when it is not one or overflows. */
bool quantity_parse(const char *text, uint64_t *out);

/* Fills c from a ResourceClaim's JSON: the results of this driver, which
 * must name this node's pool and devices, the pods it is reserved for,
 * and the priority its opaque configuration names. 0, or -1 with why in
 * err. */
int claim_parse(const struct driver *d, const char *json, const char *uid,
                struct dra_claim *c, char err[DRA_ERR_LEN]);

/* prepare.c: on any thread. A prepared claim is copied to out. 0, or -1
 * with err. */
int prepare_claim(struct driver *d, const char *namespace_, const char *uid,
                  const char *name, struct dra_claim *out, char err[DRA_ERR_LEN]);
int unprepare_claim(struct driver *d, const char *uid, char err[DRA_ERR_LEN]);

/* checkpoint.c: prepared claims on disk, written whole and renamed. */
int checkpoint_load(struct driver *d);
int checkpoint_save(const struct driver *d, char err[DRA_ERR_LEN]);
/* Replaces path with text (NULL: out of memory) through a temporary file
 * and a rename: a reader never sees half of it. 0, or -1 with err. */
int file_replace(const char *path, const char *text, char err[DRA_ERR_LEN]);

/* cdi.c: one spec file per claim, one CDI device per share. */
int cdi_write(const struct driver *d, const struct dra_claim *c,
              char err[DRA_ERR_LEN]);
bool cdi_exists(const struct driver *d, const char *uid);
void cdi_remove(const struct driver *d, const char *uid);
void cdi_device_id(const struct dra_claim *c, int share, char *buf, size_t len);

/* limits.c: tells the scheduler the limits of each pod of c, from the
 * claims in d's table but skip (NULL: none); a pod with none left gets
 * none. 0, or -1 with err. */
int limits_apply(const struct driver *d, const struct dra_claim *c,
                 const struct dra_claim *skip, char err[DRA_ERR_LEN]);

/* slice.c: this node's ResourceSlice. publish makes the API server hold
 * exactly the one the GPUs call for; check re-creates it when it went
 * (kubelet deletes a node's slices when it restarts). 0 or -1 logged. */
int slice_publish(struct driver *d);
int slice_check(struct driver *d);

/* status.c: writes a prepared claim's limits to its status, on a thread of
 * its own within a request budget. start: 0, or -1 logged; queue never
 * waits for the API server; stop drops what is queued. */
int status_start(struct driver *d);
void status_queue(const struct dra_claim *c);
void status_stop(void);

#endif
