/* client_start.h - starting the nvshare client of this process. */
#ifndef NVSHARE_HOOK_CLIENT_START_H
#define NVSHARE_HOOK_CLIENT_START_H

#include "hook.h"
#include "driver.h"

enum hook_gating { HOOK_GATING_UNKNOWN, HOOK_GATING_ON, HOOK_GATING_OFF };
extern _Atomic int hook_gating;

/* Starts the client if that has not been tried yet and CUDA is initialised.
 * Returns the resulting enum hook_gating. */
int hook_gating_start(void);
/* The GPU index (CUDA ordinal) of the device with this UUID
 * ("GPU-xxxxxxxx-..."), or -1. Initialises the driver if the process has
 * not (nvidia-smi never does). */
int hook_gpu_by_uuid(const char *uuid);

#endif
