#include "fs/stream_state.h"

void fs_stream_state_init(fs_stream_state *s, bool streaming)
{
    *s = (fs_stream_state){ .streaming = streaming };
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
}

void fs_stream_state_destroy(fs_stream_state *s)
{
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
}

void fs_stream_state_wrote(fs_stream_state *s, uint64_t off, size_t len)
{
    pthread_mutex_lock(&s->lock);
    if (s->streaming) {
        /* A write past the bytes in order leaves them as they are (the
         * stream then waits for the close, and gives up). */
        if (off < s->in_order)
            s->broken = true;
        else if (off == s->in_order)
            s->in_order += len;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
}

void fs_stream_state_truncated(fs_stream_state *s, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    if (s->streaming && size < s->in_order) {
        s->broken = true;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
}

void fs_stream_state_close(fs_stream_state *s)
{
    pthread_mutex_lock(&s->lock);
    s->closed = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

void fs_stream_state_give_way(void *arg)
{
    fs_stream_state *s = arg;
    pthread_mutex_lock(&s->lock);
    s->give_way = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

void fs_stream_state_end(fs_stream_state *s)
{
    pthread_mutex_lock(&s->lock);
    s->streaming = false;
    pthread_mutex_unlock(&s->lock);
}

bool fs_stream_state_await_bytes(fs_stream_state *s, uint64_t end)
{
    pthread_mutex_lock(&s->lock);
    while (!s->broken && !s->closed && !s->give_way && s->in_order < end)
        pthread_cond_wait(&s->changed, &s->lock);
    bool got = !s->broken && s->in_order >= end;
    pthread_mutex_unlock(&s->lock);
    return got;
}

bool fs_stream_state_await_close(fs_stream_state *s, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    while (!s->broken && !s->closed && !s->give_way && s->in_order <= size)
        pthread_cond_wait(&s->changed, &s->lock);
    bool closed = s->closed && !s->broken && s->in_order <= size;
    pthread_mutex_unlock(&s->lock);
    return closed;
}

bool fs_stream_state_whole(fs_stream_state *s, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    bool whole = !s->broken && s->in_order == size;
    pthread_mutex_unlock(&s->lock);
    return whole;
}
