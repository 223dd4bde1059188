#include "format/behind.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/pool.h"

/* The lock is the job's: the submitter and the thread hand it over
 * through `busy`; readers look at the bytes under it. */
struct tf_behind {
    tf_io *io;
    tf_pool *thread; /* one long-lived worker: behind_main */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool queued;   /* submitted, not yet waited for */
    bool busy;     /* submitted, not yet written and synced */
    bool stopping;
    tf_buf blobs, tail;
    uint64_t blobs_off, tail_off;
    int rc;
    tf_error err;
};

/* The blobs, a sync, then the trailer's run, published: a trailer is
 * never on the disk before what it points to. */
static int write_job(tf_behind *b, tf_error *e)
{
    if (b->blobs.len && tf_io_append(b->io, b->blobs.data, b->blobs.len, b->blobs_off, e) < 0)
        return -1;
    if (tf_io_sync(b->io, e) < 0 ||
        tf_io_append(b->io, b->tail.data, b->tail.len, b->tail_off, e) < 0)
        return -1;
    return tf_io_publish(b->io, e);
}

static void behind_main(void *arg)
{
    tf_behind *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->busy && !b->stopping)
            pthread_cond_wait(&b->changed, &b->lock);
        if (!b->busy)
            break; /* stopping, and nothing in flight */
        pthread_mutex_unlock(&b->lock);
        /* The bytes are the job's until busy goes false: no one else
         * writes them, readers only copy. */
        tf_error err = { 0 };
        int rc = write_job(b, &err);
        pthread_mutex_lock(&b->lock);
        b->rc = rc;
        b->err = err;
        b->busy = false;
        pthread_cond_broadcast(&b->changed);
    }
    pthread_mutex_unlock(&b->lock);
}

tf_behind *tf_behind_new(tf_io *io)
{
    tf_behind *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->io = io;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->changed, NULL);
    if (!(b->thread = tf_pool_new(1)) || tf_pool_add(b->thread, behind_main, b, NULL) < 0) {
        tf_behind_free(b);
        return NULL;
    }
    return b;
}

void tf_behind_free(tf_behind *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->stopping = true;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    tf_pool_free(b->thread); /* the worker returns once nothing is in flight */
    pthread_cond_destroy(&b->changed);
    pthread_mutex_destroy(&b->lock);
    tf_buf_free(&b->blobs);
    tf_buf_free(&b->tail);
    free(b);
}

void tf_behind_submit(tf_behind *b, tf_buf *blobs, uint64_t blobs_off, tf_buf *tail,
                      uint64_t tail_off)
{
    pthread_mutex_lock(&b->lock);
    tf_buf_free(&b->blobs);
    tf_buf_free(&b->tail);
    b->blobs = *blobs;
    b->tail = *tail;
    *blobs = *tail = (tf_buf){ 0 };
    b->blobs_off = blobs_off;
    b->tail_off = tail_off;
    b->queued = b->busy = true;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
}

int tf_behind_wait(tf_behind *b, bool *waited, tf_error *e)
{
    pthread_mutex_lock(&b->lock);
    while (b->busy)
        pthread_cond_wait(&b->changed, &b->lock);
    *waited = b->queued;
    int rc = b->queued ? b->rc : 0;
    if (rc < 0 && e)
        *e = b->err;
    b->queued = false;
    b->blobs.len = b->tail.len = 0; /* on the disk now: read from there */
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* Copies [off, off + len) from the run of n bytes at at, when within it. */
static bool copy_within(const uint8_t *run, uint64_t at, size_t n, uint64_t off, void *buf,
                        size_t len)
{
    if (!run || off < at || off - at > n || len > n - (off - at))
        return false;
    memcpy(buf, run + (off - at), len);
    return true;
}

bool tf_behind_read(tf_behind *b, uint64_t off, void *buf, size_t len)
{
    pthread_mutex_lock(&b->lock);
    bool found = b->queued &&
                 (copy_within(b->blobs.data, b->blobs_off, b->blobs.len, off, buf, len) ||
                  copy_within(b->tail.data, b->tail_off, b->tail.len, off, buf, len));
    pthread_mutex_unlock(&b->lock);
    return found;
}
