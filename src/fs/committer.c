#include "fs/committer.h"

#include <stddef.h>

static void *committer_main(void *arg)
{
    fs_committer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stopping)
            pthread_cond_wait(&c->queued, &c->lock);
        fs_job *job = c->head;
        if (!job)
            break; /* stopping, and nothing left */
        c->head = job->next;
        if (!c->head)
            c->tail = NULL;
        pthread_mutex_unlock(&c->lock);
        job->run(job, c->ctx);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int fs_committer_start(fs_committer *c, void *ctx)
{
    *c = (fs_committer){ .ctx = ctx };
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->queued, NULL);
    if (pthread_create(&c->thread, NULL, committer_main, c) != 0) {
        pthread_cond_destroy(&c->queued);
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    c->running = true;
    return 0;
}

/* Under c->lock. */
static void wake_running_job(fs_committer *c)
{
    if (c->give_way)
        c->give_way(c->give_way_arg);
}

void fs_committer_push(fs_committer *c, fs_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->tail)
        c->tail->next = job;
    else
        c->head = job;
    c->tail = job;
    pthread_cond_signal(&c->queued);
    wake_running_job(c);
    pthread_mutex_unlock(&c->lock);
}

void fs_committer_stop(fs_committer *c)
{
    if (!c->running)
        return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    pthread_cond_signal(&c->queued);
    wake_running_job(c);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->queued);
    pthread_mutex_destroy(&c->lock);
    c->running = false;
}

void fs_committer_on_waiting(fs_committer *c, void (*give_way)(void *arg), void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->give_way = give_way;
    c->give_way_arg = arg;
    if (c->head || c->stopping)
        wake_running_job(c);
    pthread_mutex_unlock(&c->lock);
}
