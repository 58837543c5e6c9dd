/* workers.h - a few threads that run the claims' Prepare and Unprepare,
 * so that one claim's slow API server delays no other claim. Jobs of one
 * claim UID run one at a time, in the order they came; jobs of different
 * claims run side by side, DRA_WORKERS at most. */
#ifndef NVSHARE_DRA_WORKERS_H
#define NVSHARE_DRA_WORKERS_H

#include <stdbool.h>

#define DRA_WORKERS 8

struct job {
    struct job *next;
    const char *uid; /* the claim's: its jobs run in order */
    /* Runs the job, once, on a worker; stopping: the driver is stopping
     * and the job was not begun, so it should only answer. The job may
     * be freed by it. */
    void (*run)(struct job *job, bool stopping);
};

/* Starts the threads: 0, or -1 logged. */
int workers_start(void);
/* Queues job; it runs on a worker once no job of its UID runs. */
void workers_submit(struct job *job);
/* Runs what is queued as stopping, waits for the jobs running and joins
 * the threads. */
void workers_stop(void);

#endif
