/* footprints.c - what each client occupies on a GPU, for memory-aware
 * admission: the bytes it holds under the quota arbiter (allocated plus
 * credit) and its context overhead; of those, the evictable part is the
 * managed memory the client reports (MEM_UPDATE and the other memory
 * messages), which alone leaves the GPU when it swaps out, and of that
 * the pending part (MEM_UPDATE's extra), not on the GPU yet; its credit,
 * no memory yet, stops counting there with it (policy_set_credit).
 *
 * A CUDA context costs 300-500 MiB that no allocation call shows, so a
 * fixed percentage of the GPU cannot stand for it. It counts on the GPUs a
 * client has asked for or holds memory on. Where NVML can tell a
 * process's used memory (nvmlDeviceGetComputeRunningProcesses), the overhead
 * of a running client is that minus what it allocated; elsewhere (no NVML,
 * a PID namespace that hides the process, managed memory that NVML does not
 * count) it is NVSHARE_CONTEXT_OVERHEAD.
 *
 * The same sample, compute and graphics processes together, shows who uses
 * a GPU without having registered (unhooked.c). */
#include <dlfcn.h>
#include <string.h>

#include "clock.h"
#include "nvml_abi.h"
#include "scheduler.h"

#define SAMPLE_EVERY_NS (2 * NS_PER_SEC)
#define MAX_PROCS 256
/* Below this, a difference is noise or a process NVML does not describe
 * well (managed memory): the assumed overhead stands. */
#define MIN_MEASURED_OVERHEAD (64ull << 20)

static struct {
    bool tried, ok;
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
    /* optional: not every NVML has it, and compute alone still tells */
    nvmlReturn_t (*graphics)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
    uint64_t next_sample;
} nvml;

static void load_nvml(void)
{
    void *lib;
    nvmlReturn_t (*init)(void);

    nvml.tried = true;
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&nvml.by_uuid = dlsym(lib, "nvmlDeviceGetHandleByUUID");
    *(void **)&nvml.processes =
        dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    *(void **)&nvml.graphics =
        dlsym(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
    nvml.ok = init && nvml.by_uuid && nvml.processes && init() == NVML_SUCCESS;
    if (!nvml.ok)
        dlclose(lib); /* kept open for the daemon's life otherwise */
}

void footprint_update(struct scheduler *s, int gpu, int slot)
{
    const struct quota_client *q = &s->quota.gpus[gpu].clients[slot];
    uint64_t held = q->held > q->allocated ? q->held : q->allocated;
    /* A process registers every GPU it sees and has a context only on
     * those it uses: a rank of an 8-GPU job would otherwise weigh a
     * context on each of the other seven. */
    bool uses = held || (s->clients[slot]->asked_gpus >> gpu & 1);
    uint64_t overhead = !uses                    ? 0
                        : s->overhead[gpu][slot] ? s->overhead[gpu][slot]
                                                 : s->context_overhead;

    policy_set_footprint(s->policy, gpu, slot, held + overhead,
                         s->evictable[gpu][slot], s->pending[gpu][slot]);
    policy_set_credit(s->policy, gpu, slot, held - q->allocated);
}

static void sample_gpu(struct scheduler *s, int gpu, uint64_t now)
{
    nvmlProcessInfo_t procs[2 * MAX_PROCS];
    unsigned int n = MAX_PROCS, n_graphics = MAX_PROCS;
    nvmlDevice_t dev;

    if (nvml.by_uuid(s->gpus[gpu].uuid, &dev) != NVML_SUCCESS ||
        nvml.processes(dev, &n, procs) != NVML_SUCCESS)
        return;
    n = n < MAX_PROCS ? n : MAX_PROCS; /* NVML says how many there were */
    if (!nvml.graphics ||
        nvml.graphics(dev, &n_graphics, procs + n) != NVML_SUCCESS)
        n_graphics = 0;
    n_graphics = n_graphics < MAX_PROCS ? n_graphics : MAX_PROCS;
    unhooked_observe(s, gpu, procs, n + n_graphics, now);
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered ||
            !policy_is_running(s->policy, gpu, slot))
            continue;
        uint64_t allocated = s->quota.gpus[gpu].clients[slot].allocated;
        for (unsigned int i = 0; i < n; i++) {
            if (procs[i].pid != (unsigned int)c->pid)
                continue;
            if (procs[i].usedGpuMemory > allocated + MIN_MEASURED_OVERHEAD) {
                s->overhead[gpu][slot] = procs[i].usedGpuMemory - allocated;
                footprint_update(s, gpu, slot);
            }
            break;
        }
    }
}

uint64_t footprint_sample_overheads(struct scheduler *s, uint64_t now)
{
    if (now >= nvml.next_sample) {
        nvml.next_sample = now + SAMPLE_EVERY_NS;
        if (!nvml.tried)
            load_nvml();
        for (int gpu = 0; nvml.ok && gpu < s->n_gpus; gpu++)
            sample_gpu(s, gpu, now);
    }
    return nvml.ok ? nvml.next_sample : 0;
}

void footprint_forget(struct scheduler *s, int slot)
{
    for (int gpu = 0; gpu < s->n_gpus; gpu++)
        s->overhead[gpu][slot] = s->evictable[gpu][slot] =
            s->pending[gpu][slot] = 0;
}
