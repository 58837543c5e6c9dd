/* swap.h - moving evictable memory to the host and back. */
#ifndef NVSHARE_HOOK_SWAP_H
#define NVSHARE_HOOK_SWAP_H

#include "hook.h"

/* nvshare_client_ops swap_out / swap_in (contracts in nvshare_client.h):
 * move every managed allocation of gpu to the host / back to gpu on
 * private streams of its context, wait, and tell the bytes moved (a
 * swap-in: and whether all is back). Call the real driver only (never
 * gated), on any thread. */
uint64_t hook_swap_out(int gpu, void *user);
bool hook_swap_in(int gpu, void *user, uint64_t *bytes);
/* nvshare_client_ops prepare_swap: makes staging.c's ring on a background
 * thread, so that no swap-out pins. */
void hook_prepare_swap(int gpu, void *user);
/* Around the destruction of a context: the ring is not being made in it
 * meanwhile (waits for the pin in progress). */
void swap_pins_pause(void);
void swap_pins_resume(void);

#endif
