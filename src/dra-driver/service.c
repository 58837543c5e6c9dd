/* service.c - see service.h. A request that does not decode gets
 * INVALID_ARGUMENT; a claim that cannot be prepared gets its own error in
 * the response, and the others of the call are prepared all the same. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra.pb-c.h"
#include "log.h"
#include "pb_strings.h"
#include "pluginregistration.pb-c.h"

/* Claims are prepared one after another, each read from the API server
 * with retries: past this budget the rest of a call's claims get an error
 * at once (kubelet retries them), well inside kubelet's 45 s. */
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

/* One claim's answer: its devices, or its error. Strings point into the
 * driver's claim table, valid until the next Prepare or Unprepare. */
struct prepared {
    Dra__NodePrepareResourcesResponse__ClaimsEntry entry;
    Dra__NodePrepareResourceResponse resp;
    Dra__Device devices[DRA_MAX_RESULTS];
    Dra__Device *device_ptrs[DRA_MAX_RESULTS];
    char *request_ptrs[DRA_MAX_RESULTS];
    char device_names[DRA_MAX_RESULTS][16];
    char cdi_ids[DRA_MAX_RESULTS][DRA_UID_MAX + 64];
    char *cdi_ptrs[DRA_MAX_RESULTS];
    char error[DRA_ERR_LEN];
};

static void answer_claim(struct driver *d, const struct dra_claim *c,
                         struct prepared *p)
{
    for (int s = 0; s < c->n_shares; s++) {
        Dra__Device *dev = &p->devices[s];

        dra__device__init(dev);
        p->request_ptrs[s] = (char *)c->shares[s].request;
        dev->n_request_names = c->shares[s].request[0] ? 1 : 0;
        dev->request_names = &p->request_ptrs[s];
        dev->pool_name = d->node;
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

static void prepare(struct driver *d, const Dra__NodePrepareResourcesRequest *req,
                    struct reply *out)
{
    Dra__NodePrepareResourcesResponse resp =
        DRA__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    struct prepared *answers =
        reply_calloc(out, req->n_claims + 1, sizeof(*answers));
    Dra__NodePrepareResourcesResponse__ClaimsEntry **entries =
        reply_calloc(out, req->n_claims + 1, sizeof(*entries));
    long long deadline = now_ms() + CALL_BUDGET_MS;
    size_t n = 0;

    if (!answers || !entries)
        return;
    /* A Prepare only appends to the claim table, so the answers may
     * point into it until they are packed. */
    for (size_t i = 0; i < req->n_claims; i++) {
        const Dra__Claim *claim = req->claims[i];
        struct prepared *p = &answers[n];
        const struct dra_claim *c;

        if (seen_before(req->claims, i))
            continue; /* one entry per UID */
        dra__node_prepare_resources_response__claims_entry__init(&p->entry);
        dra__node_prepare_resource_response__init(&p->resp);
        p->entry.key = claim->uid;
        p->entry.value = &p->resp;
        entries[n++] = &p->entry;
        if (now_ms() > deadline)
            snprintf(p->error, sizeof(p->error),
                     "not tried: the call ran out of time "
                     "(%d ms) on the claims before it",
                     CALL_BUDGET_MS);
        else if (prepare_claim(d, claim->namespace_, claim->uid, claim->name,
                               &c, p->error) == 0)
            answer_claim(d, c, p);
        if (p->error[0]) {
            p->resp.error = p->error;
            log_warn("cannot prepare claim %.63s/%.100s (%.63s): %s",
                     claim->namespace_, claim->name, claim->uid, p->error);
        }
    }
    resp.n_claims = n;
    resp.claims = entries;
    reply_pack(out, &resp.base);
}

static void unprepare(struct driver *d,
                      const Dra__NodeUnprepareResourcesRequest *req,
                      struct reply *out)
{
    Dra__NodeUnprepareResourcesResponse resp =
        DRA__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    Dra__NodeUnprepareResourcesResponse__ClaimsEntry *entries =
        reply_calloc(out, req->n_claims + 1, sizeof(*entries));
    Dra__NodeUnprepareResourcesResponse__ClaimsEntry **entry_ptrs =
        reply_calloc(out, req->n_claims + 1, sizeof(*entry_ptrs));
    Dra__NodeUnprepareResourceResponse *answers =
        reply_calloc(out, req->n_claims + 1, sizeof(*answers));
    char(*errors)[DRA_ERR_LEN] =
        reply_calloc(out, req->n_claims + 1, sizeof(*errors));
    size_t n = 0;

    if (!entries || !entry_ptrs || !answers || !errors)
        return;
    for (size_t i = 0; i < req->n_claims; i++) {
        if (seen_before(req->claims, i))
            continue;
        dra__node_unprepare_resources_response__claims_entry__init(&entries[n]);
        dra__node_unprepare_resource_response__init(&answers[n]);
        entries[n].key = req->claims[i]->uid;
        entries[n].value = &answers[n];
        if (unprepare_claim(d, req->claims[i]->uid, errors[n])) {
            answers[n].error = errors[n];
            log_warn("cannot unprepare claim %.63s: %s", req->claims[i]->uid,
                     errors[n]);
        }
        entry_ptrs[n] = &entries[n];
        n++;
    }
    resp.n_claims = n;
    resp.claims = entry_ptrs;
    reply_pack(out, &resp.base);
}

/* NodePrepareResources and NodeUnprepareResources: both requests are a
 * list of claims, refused as a whole when it does not decode, names too
 * many claims or hides a NUL byte in a string (protobuf-c would hand over
 * its prefix). */
static void claims_call(struct driver *d, enum dra_method m,
                        const unsigned char *data, size_t len, struct reply *out)
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
    const char *why =
        pb_request_flaw(req != NULL,
                        n > CALL_MAX_CLAIMS
                            ? "more than " STR(CALL_MAX_CLAIMS) " claims"
                            : NULL,
                        "a string holds a NUL byte", desc, data, len);

    if (why)
        reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT, "%s: %s",
                   preparing ? "NodePrepareResources" : "NodeUnprepareResources",
                   why);
    else if (preparing)
        prepare(d, (Dra__NodePrepareResourcesRequest *)req, out);
    else
        unprepare(d, (Dra__NodeUnprepareResourcesRequest *)req, out);
    if (req)
        protobuf_c_message_free_unpacked(req, NULL);
}

void dra_service_call(struct driver *d, enum dra_method m,
                      const unsigned char *request, size_t len, struct reply *out)
{
    memset(out, 0, sizeof(*out));
    switch (m) {
    case DRA_GET_INFO:
        if (!pb_decodes(&pluginregistration__info_request__descriptor, request,
                        len)) {
            reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT,
                       "InfoRequest does not decode");
            return;
        }
        get_info(d, out);
        return;
    case DRA_NOTIFY_REGISTRATION:
        notify(request, len, out);
        return;
    case DRA_PREPARE:
    case DRA_UNPREPARE:
        claims_call(d, m, request, len, out);
        return;
    case DRA_UNKNOWN:
        break;
    }
    reply_fail(out, GRPC_STATUS_UNIMPLEMENTED, "no such method");
}
