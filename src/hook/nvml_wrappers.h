/* nvml_wrappers.h - NVML queries under the quota. */
#ifndef NVSHARE_HOOK_NVML_WRAPPERS_H
#define NVSHARE_HOOK_NVML_WRAPPERS_H

#include "hook.h"

/* libnvshare's NVML wrapper of that exact name, or NULL. */
void *hook_nvml_wrapper(const char *name);

#endif
