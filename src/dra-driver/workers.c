/* workers.c - see workers.h. One queue under one mutex: a worker takes the
 * first job whose claim has no job running, so a claim's calls keep their
 * order (a Prepare and the Unprepare that follows it), and a claim whose
 * API read hangs holds one worker, not the queue. */
#include "workers.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct job *queue, **queue_tail = &queue;
/* The UIDs of the jobs running, copied: a job may free itself. */
static char running[DRA_WORKERS][64];
static pthread_t threads[DRA_WORKERS];
static int n_threads;
static bool stopping;

static bool uid_running(const char *uid)
{
    for (int i = 0; i < DRA_WORKERS; i++)
        if (running[i][0] && !strncmp(running[i], uid, sizeof(running[i]) - 1))
            return true;
    return false;
}

/* The first queued job whose claim has none running, taken off the queue;
 * NULL if none. Under lock. */
static struct job *take(void)
{
    for (struct job **p = &queue; *p; p = &(*p)->next) {
        struct job *j = *p;

        if (uid_running(j->uid))
            continue;
        *p = j->next;
        if (!*p)
            queue_tail = p;
        return j;
    }
    return NULL;
}

static void *work(void *arg)
{
    int slot = (int)(long)arg;

    pthread_mutex_lock(&lock);
    for (;;) {
        struct job *j = take();
        bool stop_now = stopping;

        if (!j) {
            if (stopping)
                break;
            pthread_cond_wait(&wake, &lock);
            continue;
        }
        snprintf(running[slot], sizeof(running[slot]), "%s", j->uid);
        pthread_mutex_unlock(&lock);
        j->run(j, stop_now); /* may free j: its uid too */
        pthread_mutex_lock(&lock);
        running[slot][0] = '\0';
        pthread_cond_broadcast(&wake); /* a job of that claim may wait */
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int workers_start(void)
{
    for (; n_threads < DRA_WORKERS; n_threads++) {
        int e = pthread_create(&threads[n_threads], NULL, work,
                               (void *)(long)n_threads);
        if (e) {
            log_error("cannot start a worker thread: %s", strerror(e));
            workers_stop();
            return -1;
        }
    }
    return 0;
}

void workers_submit(struct job *job)
{
    pthread_mutex_lock(&lock);
    job->next = NULL;
    *queue_tail = job;
    queue_tail = &job->next;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

void workers_stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    for (; n_threads > 0; n_threads--)
        pthread_join(threads[n_threads - 1], NULL);
}
