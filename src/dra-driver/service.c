/* service.c - see service.h. A request that does not decode gets
 * INVALID_ARGUMENT; a claim that cannot be prepared gets its own error in
 * the response, and the others of the call are prepared all the same,
 * each on a worker (workers.h): the call is answered when its last claim
 * is done, from that claim's thread. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra.pb-c.h"
#include "log.h"
#include "pb_strings.h"
#include "pluginregistration.pb-c.h"
#include "workers.h"

/* A call's claims run side by side on the workers, each read from the
 * API server with retries: one that has not begun within this budget gets
 * an error at once (kubelet retries it), well inside kubelet's 45 s. */
#define CALL_BUDGET_MS 30000
/* kubelet sends one pod's claims a call; far more is no kubelet's. */
#define CALL_MAX_CLAIMS 1024
#define STR_(x) #x
#define STR(x) STR_(x)

static const struct {
    const char *path;
    enum dra_method method;
} methods[] = {
    {"/pluginregistration.Registration/GetInfo", DRA_GET_INFO},
    {"/pluginregistration.Registration/NotifyRegistrationStatus",
     DRA_NOTIFY_REGISTRATION},
    {"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
     DRA_PREPARE},
    {"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
     DRA_UNPREPARE},
    {"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
     DRA_PREPARE},
    {"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
     DRA_UNPREPARE},
};

enum dra_method dra_method_from_path(const char *path, size_t len)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i].path) == len && !memcmp(methods[i].path, path, len))
            return methods[i].method;
    return DRA_UNKNOWN;
}

static void get_info(const struct driver *d, struct reply *out)
{
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    static char *versions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
    char endpoint[PATH_MAX];

    snprintf(endpoint, sizeof(endpoint), "%s/dra.sock", d->plugin_dir);
    info.type = "DRAPlugin";
    info.name = DRA_DRIVER_NAME;
    info.endpoint = endpoint;
    /* kubelet takes the first it knows: v1 from 1.34 on, v1beta1 before */
    info.n_supported_versions = 2;
    info.supported_versions = versions;
    reply_pack(out, &info.base);
}

static void notify(const unsigned char *data, size_t len, struct reply *out)
{
    Pluginregistration__RegistrationStatus *st =
        pluginregistration__registration_status__unpack(NULL, len, data);
    Pluginregistration__RegistrationStatusResponse resp =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;

    if (!st) {
        reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT,
                   "RegistrationStatus does not decode");
        return;
    }
    if (st->plugin_registered)
        log_info("registered with kubelet");
    else
        log_error("kubelet refused the registration: %.200s", st->error);
    pluginregistration__registration_status__free_unpacked(st, NULL);
    reply_pack(out, &resp.base);
}

static bool seen_before(Dra__Claim **claims, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (!strcmp(claims[j]->uid, claims[i]->uid))
            return true;
    return false;
}

/* A Prepare or Unprepare in flight: each of its claims is a job on the
 * workers (workers.h), and the last job to end answers the call. */
struct claim_job {
    struct job job;
    struct call *call;
    const Dra__Claim *claim;
    struct dra_claim prepared; /* a copy: the table changes meanwhile */
    char error[DRA_ERR_LEN];
};

struct call {
    struct driver *d;
    bool preparing;
    ProtobufCMessage *req;
    long long deadline;
    int pending; /* jobs not ended, atomic */
    dra_done_fn *done;
    void *ctx;
    size_t n; /* jobs: one per claim UID */
    struct claim_job jobs[];
};

/* One claim's answer: its devices, or its error. */
struct prepared {
    Dra__NodePrepareResourcesResponse__ClaimsEntry entry;
    Dra__NodePrepareResourceResponse resp;
    Dra__Device devices[DRA_MAX_RESULTS];
    Dra__Device *device_ptrs[DRA_MAX_RESULTS];
    char *request_ptrs[DRA_MAX_RESULTS];
    char device_names[DRA_MAX_RESULTS][16];
    char cdi_ids[DRA_MAX_RESULTS][DRA_UID_MAX + 64];
    char *cdi_ptrs[DRA_MAX_RESULTS];
};

static void answer_claim(const struct driver *d, const struct dra_claim *c,
                         struct prepared *p)
{
    for (int s = 0; s < c->n_shares; s++) {
        Dra__Device *dev = &p->devices[s];

        dra__device__init(dev);
        p->request_ptrs[s] = (char *)c->shares[s].request;
        dev->n_request_names = c->shares[s].request[0] ? 1 : 0;
        dev->request_names = &p->request_ptrs[s];
        dev->pool_name = (char *)d->node;
        snprintf(p->device_names[s], sizeof(p->device_names[s]), "gpu-%d",
                 c->shares[s].gpu);
        dev->device_name = p->device_names[s];
        cdi_device_id(c, s, p->cdi_ids[s], sizeof(p->cdi_ids[s]));
        p->cdi_ptrs[s] = p->cdi_ids[s];
        dev->n_cdi_device_ids = 1;
        dev->cdi_device_ids = &p->cdi_ptrs[s];
        dev->share_id = (char *)c->shares[s].share_id;
        p->device_ptrs[s] = dev;
    }
    p->resp.n_devices = (size_t)c->n_shares;
    p->resp.devices = p->device_ptrs;
}

static void prepare_answer(struct call *call, struct reply *out)
{
    Dra__NodePrepareResourcesResponse resp =
        DRA__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    struct prepared *answers = reply_calloc(out, call->n + 1, sizeof(*answers));
    Dra__NodePrepareResourcesResponse__ClaimsEntry **entries =
        reply_calloc(out, call->n + 1, sizeof(*entries));

    if (!answers || !entries)
        return;
    for (size_t i = 0; i < call->n; i++) {
        struct claim_job *j = &call->jobs[i];
        struct prepared *p = &answers[i];

        dra__node_prepare_resources_response__claims_entry__init(&p->entry);
        dra__node_prepare_resource_response__init(&p->resp);
        p->entry.key = j->claim->uid;
        p->entry.value = &p->resp;
        if (j->error[0])
            p->resp.error = j->error;
        else
            answer_claim(call->d, &j->prepared, p);
        entries[i] = &p->entry;
    }
    resp.n_claims = call->n;
    resp.claims = entries;
    reply_pack(out, &resp.base);
}

static void unprepare_answer(struct call *call, struct reply *out)
{
    Dra__NodeUnprepareResourcesResponse resp =
        DRA__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    Dra__NodeUnprepareResourcesResponse__ClaimsEntry *entries =
        reply_calloc(out, call->n + 1, sizeof(*entries));
    Dra__NodeUnprepareResourcesResponse__ClaimsEntry **entry_ptrs =
        reply_calloc(out, call->n + 1, sizeof(*entry_ptrs));
    Dra__NodeUnprepareResourceResponse *answers =
        reply_calloc(out, call->n + 1, sizeof(*answers));

    if (!entries || !entry_ptrs || !answers)
        return;
    for (size_t i = 0; i < call->n; i++) {
        dra__node_unprepare_resources_response__claims_entry__init(&entries[i]);
        dra__node_unprepare_resource_response__init(&answers[i]);
        entries[i].key = call->jobs[i].claim->uid;
        entries[i].value = &answers[i];
        if (call->jobs[i].error[0])
            answers[i].error = call->jobs[i].error;
        entry_ptrs[i] = &entries[i];
    }
    resp.n_claims = call->n;
    resp.claims = entry_ptrs;
    reply_pack(out, &resp.base);
}

/* The call's answer, once its last claim ended. */
static void call_end(struct call *call)
{
    struct reply out;

    memset(&out, 0, sizeof(out));
    if (call->preparing)
        prepare_answer(call, &out);
    else
        unprepare_answer(call, &out);
    call->done(call->ctx, &out);
    protobuf_c_message_free_unpacked(call->req, NULL);
    free(call);
}

static void run_claim(struct job *job, bool stopping)
{
    struct claim_job *j = CONTAINER_OF(job, struct claim_job, job);
    struct call *call = j->call;
    const Dra__Claim *claim = j->claim;

    if (stopping)
        snprintf(j->error, sizeof(j->error), "not tried: the driver is stopping");
    else if (now_ms() > call->deadline)
        snprintf(j->error, sizeof(j->error),
                 "not tried: the call ran out of time (%d ms) before it",
                 CALL_BUDGET_MS);
    else if (call->preparing)
        prepare_claim(call->d, claim->namespace_, claim->uid, claim->name,
                      &j->prepared, j->error);
    else
        unprepare_claim(call->d, claim->uid, j->error);
    if (j->error[0])
        log_warn("cannot %s claim %.63s/%.100s (%.63s): %s",
                 call->preparing ? "prepare" : "unprepare", claim->namespace_,
                 claim->name, claim->uid, j->error);
    if (__atomic_sub_fetch(&call->pending, 1, __ATOMIC_ACQ_REL) == 0)
        call_end(call);
}

/* Queues one job per claim UID of the request, which the call now owns. */
static void claims_start(struct driver *d, bool preparing,
                         ProtobufCMessage *req, Dra__Claim **claims,
                         size_t n_claims, dra_done_fn *done, void *ctx)
{
    struct call *call =
        calloc(1, sizeof(*call) + n_claims * sizeof(call->jobs[0]));
    struct reply out;

    if (!call) {
        memset(&out, 0, sizeof(out));
        reply_fail(&out, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        done(ctx, &out);
        protobuf_c_message_free_unpacked(req, NULL);
        return;
    }
    call->d = d;
    call->preparing = preparing;
    call->req = req;
    call->done = done;
    call->ctx = ctx;
    call->deadline = now_ms() + CALL_BUDGET_MS;
    for (size_t i = 0; i < n_claims; i++) {
        if (seen_before(claims, i))
            continue; /* one entry per UID */
        call->jobs[call->n].call = call;
        call->jobs[call->n].claim = claims[i];
        call->jobs[call->n].job.uid = claims[i]->uid;
        call->jobs[call->n++].job.run = run_claim;
    }
    /* one count held while queueing, so that no job ends the call early */
    call->pending = (int)call->n + 1;
    for (size_t i = 0; i < call->n; i++)
        workers_submit(&call->jobs[i].job);
    if (__atomic_sub_fetch(&call->pending, 1, __ATOMIC_ACQ_REL) == 0)
        call_end(call);
}

/* NodePrepareResources and NodeUnprepareResources: both requests are a
 * list of claims, refused as a whole when it does not decode, names too
 * many claims or hides a NUL byte in a string (protobuf-c would hand over
 * its prefix). */
static void claims_call(struct driver *d, enum dra_method m,
                        const unsigned char *data, size_t len,
                        dra_done_fn *done, void *ctx)
{
    bool preparing = m == DRA_PREPARE;
    const ProtobufCMessageDescriptor *desc =
        preparing ? &dra__node_prepare_resources_request__descriptor
                  : &dra__node_unprepare_resources_request__descriptor;
    ProtobufCMessage *req = protobuf_c_message_unpack(desc, NULL, len, data);
    size_t n = !req ? 0
               : preparing
                   ? ((Dra__NodePrepareResourcesRequest *)req)->n_claims
                   : ((Dra__NodeUnprepareResourcesRequest *)req)->n_claims;
    Dra__Claim **claims =
        !req        ? NULL
        : preparing ? ((Dra__NodePrepareResourcesRequest *)req)->claims
                    : ((Dra__NodeUnprepareResourcesRequest *)req)->claims;
    const char *why =
        pb_request_flaw(req != NULL,
                        n > CALL_MAX_CLAIMS
                            ? "more than " STR(CALL_MAX_CLAIMS) " claims"
                            : NULL,
                        "a string holds a NUL byte", desc, data, len);
    struct reply out;

    if (!why) {
        claims_start(d, preparing, req, claims, n, done, ctx);
        return;
    }
    memset(&out, 0, sizeof(out));
    reply_fail(&out, GRPC_STATUS_INVALID_ARGUMENT, "%s: %s",
               preparing ? "NodePrepareResources" : "NodeUnprepareResources",
               why);
    done(ctx, &out);
    if (req)
        protobuf_c_message_free_unpacked(req, NULL);
}

void dra_service_call(struct driver *d, enum dra_method m,
                      const unsigned char *request, size_t len,
                      dra_done_fn *done, void *ctx)
{
    struct reply out;

    memset(&out, 0, sizeof(out));
    switch (m) {
    case DRA_GET_INFO:
        if (!pb_decodes(&pluginregistration__info_request__descriptor, request,
                        len))
            reply_fail(&out, GRPC_STATUS_INVALID_ARGUMENT,
                       "InfoRequest does not decode");
        else
            get_info(d, &out);
        break;
    case DRA_NOTIFY_REGISTRATION:
        notify(request, len, &out);
        break;
    case DRA_PREPARE:
    case DRA_UNPREPARE:
        claims_call(d, m, request, len, done, ctx);
        return;
    case DRA_UNKNOWN:
        reply_fail(&out, GRPC_STATUS_UNIMPLEMENTED, "no such method");
        break;
    }
    done(ctx, &out);
}
