/* vmm_app.h - the application's own VMM memory, behind tokens while swappable. */
#ifndef NVSHARE_HOOK_VMM_APP_H
#define NVSHARE_HOOK_VMM_APP_H

#include "hook.h"
#include "staging.h"

/* vmm_app.c: the application's own VMM, behind tokens while swappable. */
bool vmm_app_is_token(uint64_t handle);
CUresult vmm_app_create(int gpu, CUmemGenericAllocationHandle *handle,
                        uint64_t size, const CUmemAllocationProp *prop);
CUresult vmm_app_release(uint64_t token);
/* Whether releasing token ends the application's hold (no retain left):
 * only then does the quota get its bytes back. */
bool vmm_app_last_ref(uint64_t token);
/* A swap of gpu: begin locks the application's VMM until end; queue puts
 * the copies of what moves on run (and, in, maps it again first), and
 * returns their bytes; end settles them once run's copies were waited
 * for (copied: all succeeded). */
void vmm_app_swap_begin(void);
uint64_t vmm_app_queue(int gpu, bool to_device, struct staging_run *run);
void vmm_app_swap_end(int gpu, bool to_device, bool copied);
/* Bytes of gpu's allocations still out after a swap-in (no room for them
 * on the GPU). */
uint64_t vmm_app_out_bytes(int gpu);
/* Calls add(copy, arg) for each mapping a swap-out of gpu would copy
 * that has no host copy yet: what staging_host_make_ahead makes. */
void vmm_app_host_copies(int gpu,
                         void (*add)(struct staging_host_copy copy, void *arg),
                         void *arg);

#endif
