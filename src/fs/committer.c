#include "fs/committer.h"

#include "fs/mutate.h"

static void *committer_main(void *arg)
{
    fs_committer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stopping)
            pthread_cond_wait(&c->wake, &c->lock);
        fs_job *job = c->head;
        if (!job)
            break; /* stopping, and nothing left */
        c->head = job->next;
        if (!c->head)
            c->tail = NULL;
        pthread_mutex_unlock(&c->lock);
        fs_job_run(c->fs, job);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int fs_committer_start(fs_committer *c, struct fs_state *fs)
{
    *c = (fs_committer){ .fs = fs };
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->progress, NULL);
    if (pthread_create(&c->thread, NULL, committer_main, c) != 0) {
        pthread_cond_destroy(&c->progress);
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    c->running = true;
    return 0;
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
    pthread_cond_signal(&c->wake);
    pthread_cond_broadcast(&c->progress);
    pthread_mutex_unlock(&c->lock);
}

void fs_committer_stop(fs_committer *c)
{
    if (!c->running)
        return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    pthread_cond_signal(&c->wake);
    pthread_cond_broadcast(&c->progress);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->progress);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    c->running = false;
}

fs_queued fs_committer_queued(const fs_committer *c, uint64_t fh)
{
    fs_queued q = FS_QUEUED_NOTHING;
    for (const fs_job *j = c->head; j; j = j->next) {
        if ((j->kind == FS_JOB_COMMIT || j->kind == FS_JOB_RELEASE) && j->fh == fh)
            return FS_QUEUED_CLOSE;
        q = FS_QUEUED_OTHER;
    }
    return q;
}

void fs_committer_wait(fs_committer *c)
{
    pthread_cond_wait(&c->progress, &c->lock);
}

void fs_committer_progress(fs_committer *c)
{
    pthread_cond_broadcast(&c->progress);
}
