/* context.h - the context registry and each thread's current GPU. */
#ifndef NVSHARE_HOOK_CONTEXT_H
#define NVSHARE_HOOK_CONTEXT_H

#include "hook.h"
#include "driver.h"

/* The GPU of the calling thread's current context (0 with one GPU). */
extern HOOK_TLS int hook_current_gpu;

/* Who hears of contexts, registered at load (before any CUDA call): made
 * (created or retained: client_start.c starts the client), destroying and
 * destroyed (gone: NULL if the driver refused; swap.c and its ring). */
struct hook_context_observer {
    void (*made)(void);
    void (*destroying)(void);
    void (*destroyed)(CUcontext gone);
};
void hook_context_observe(const struct hook_context_observer *observer);
/* The client tracks count GPUs: with more than one, each thread's current
 * GPU is followed. */
void hook_context_track_gpus(int count);

/* Runs fn(drv, ctx, arg) on every context this process created or retained
 * on gpu, with ctx pushed on the calling thread (the previous current
 * context is current again afterwards) and stream capture relaxed. The
 * registry lock is held throughout, so no context dies meanwhile. Stops
 * early when fn returns false; returns false then. */
bool hook_for_each_context(int gpu,
                           bool (*fn)(const struct hook_driver *drv,
                                      CUcontext ctx, void *arg),
                           void *arg);
/* Whether ctx is a context this process created or retained and has not
 * destroyed or released. */
bool hook_context_live(CUcontext ctx);
/* One of this process's contexts on gpu, or NULL. Alive while the caller
 * holds swap_pins_pause() (a destruction waits for it). */
CUcontext hook_first_context(int gpu);

#endif
