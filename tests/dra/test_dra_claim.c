/* test_dra_claim.c - the quantities and ResourceClaims nvshare-dra-driver
 * reads (src/dra-driver/claim.c): one row per case. */
#include <stdio.h>
#include <string.h>

#include "driver.h"

static int failures;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static const struct {
    const char *text;
    bool ok;
    uint64_t value;
} quantities[] = {
    {"4Gi", true, 4ULL << 30},
    {"4096Mi", true, 4ULL << 30},
    {"30", true, 30},
    {"100", true, 100},
    {"1500m", true, 2},
    {"1000m", true, 1},
    {"1.5Gi", true, 3ULL << 29},
    {"1G", true, 1000000000ULL},
    {"0.1Ki", true, 103},
    {"256Mi", true, 256ULL << 20},
    {"16Ei", false, 0},
    {"99999999999999999999", false, 0},
    {"", false, 0},
    {"Gi", false, 0},
    {"-1", false, 0},
    {"4 Gi", false, 0},
    {"4gi", false, 0},
    {"1e3", false, 0},
};

static const char claim_json[] =
    "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\",\"uid\":\"u-1\"},"
    "\"status\":{\"allocation\":{\"devices\":{\"results\":["
    "{\"request\":\"gpu/"
    "big\",\"driver\":\"gpu.nvshare.com\",\"pool\":\"node-a\","
    "\"device\":\"gpu-1\",\"shareID\":\"s-1\","
    "\"consumedCapacity\":{\"memory\":\"4Gi\",\"computePercent\":\"30\"}},"
    "{\"request\":\"nic\",\"driver\":\"net.example.com\",\"pool\":\"node-a\","
    "\"device\":\"x\"}]}},"
    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"pod-1\"}]"
    "}}";

int main(void)
{
    static struct driver d;
    static struct dra_claim c;
    char err[DRA_ERR_LEN];

    for (size_t i = 0; i < sizeof(quantities) / sizeof(quantities[0]); i++) {
        uint64_t v = 0;
        bool ok = quantity_parse(quantities[i].text, &v);
        EXPECT(ok == quantities[i].ok && (!ok || v == quantities[i].value),
               "quantity '%s': ok %d value %llu", quantities[i].text, ok,
               (unsigned long long)v);
    }
    printf("%zu quantities\n", sizeof(quantities) / sizeof(quantities[0]));

    snprintf(d.node, sizeof(d.node), "node-a");
    d.gpus.gpu_count = 2;
    d.gpus.gpus[0].capacity_bytes = d.gpus.gpus[1].capacity_bytes = 16ULL << 30;
    EXPECT(claim_parse(&d, claim_json, "u-1", &c, err) == 0, "claim: %s", err);
    EXPECT(c.n_shares == 1 && c.shares[0].gpu == 1 &&
               c.shares[0].memory == 4ULL << 30 && c.shares[0].compute == 30 &&
               !strcmp(c.shares[0].request, "gpu") &&
               !strcmp(c.shares[0].share_id, "s-1"),
           "claim shares");
    EXPECT(c.n_pods == 1 && !strcmp(c.pods[0], "pod-1"), "claim pods");
    EXPECT(claim_parse(&d, claim_json, "u-2", &c, err) == -1 &&
               strstr(err, "replaced"),
           "a replaced claim: %s", err);
    EXPECT(c.priority == 0, "no opaque config: priority %u", c.priority);

    /* opaque config: the class's, then the claim's, which wins; another
     * driver's and another request's are not ours */
    static const char with_config[] =
        "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"allocation\":{"
        "\"devices\":{"
        "\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvshare.com\","
        "\"pool\":\"node-a\",\"device\":\"gpu-0\"}],\"config\":["
        "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gpu.nvshare.com\","
        "\"parameters\":{\"kind\":\"GpuConfig\",\"priority\":\"high\"}}},"
        "{\"source\":\"FromClaim\",\"requests\":[\"gpu\"],\"opaque\":{"
        "\"driver\":\"gpu.nvshare.com\",\"parameters\":{\"priority\":\"low\"}}}"
        ","
        "{\"source\":\"FromClaim\",\"requests\":[\"other\"],\"opaque\":{"
        "\"driver\":\"gpu.nvshare.com\",\"parameters\":{\"priority\":\"9\"}}},"
        "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"x.example.com\","
        "\"parameters\":{\"priority\":7}}}]}},"
        "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"pod-"
        "1\"}]}}";
    EXPECT(claim_parse(&d, with_config, "u-1", &c, err) == 0 &&
               c.priority == PRIORITY_LOW,
           "opaque config: %s, priority %u", err, c.priority);
    static const char bad_config[] =
        "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"allocation\":{"
        "\"devices\":{"
        "\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvshare.com\","
        "\"pool\":\"node-a\",\"device\":\"gpu-0\"}],\"config\":["
        "{\"opaque\":{\"driver\":\"gpu.nvshare.com\",\"parameters\":{"
        "\"priorty\":\"high\"}}}]}},"
        "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"pod-"
        "1\"}]}}";
    EXPECT(claim_parse(&d, bad_config, "u-1", &c, err) == -1 &&
               strstr(err, "priorty"),
           "a misspelt parameter: %s", err);

    d.gpus.gpu_count = 1;
    EXPECT(claim_parse(&d, claim_json, "u-1", &c, err) == -1 &&
               strstr(err, "gpu-1"),
           "a device the node lacks: %s", err);
    EXPECT(claim_parse(&d, "{\"metadata\":", "u-1", &c, err) == -1,
           "truncated JSON");
    if (failures)
        return 1;
    printf("PASS: test_dra_claim\n");
    return 0;
}
