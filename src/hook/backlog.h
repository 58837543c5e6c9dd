/* backlog.h - bounding the GPU work a thread may have queued, and measuring busy
 * time. */
#ifndef NVSHARE_HOOK_BACKLOG_H
#define NVSHARE_HOOK_BACKLOG_H

#include "hook.h"

extern HOOK_TLS int hook_backlog_countdown;
extern HOOK_TLS CUgraphExec hook_backlog_graph; /* the last one launched */
void hook_backlog_check(CUstream stream, int pt_flags);
/* What the thread submits next is new work: measure its cost afresh. */
void hook_backlog_restart(void);

/* Busy measurement (backlog.c) around the SYNC wrappers (cuCtxSynchronize,
 * cuStreamSynchronize): the time a thread waits there is time its work kept
 * the GPU busy. begin: before the real call, whether the mark of the
 * thread's last backlog check is still pending (then the wait proves it
 * pending up to the end); a thread-local load when there is no such mark. */
extern HOOK_TLS bool hook_busy_mark_live;
bool hook_busy_sync_begin(void);
void hook_busy_sync_end(uint64_t start_ns, bool mark_pending);
/* The drain of gpu began: spans around it are not reported. */
void hook_busy_released(int gpu);

#endif
