#include "common/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/malloc_tune.h"

typedef struct {
    void (*fn)(void *arg);
    void *arg;
} task;

struct tf_pool {
    pthread_mutex_t lock;
    pthread_cond_t queued; /* a task queued, or stopping */
    task *ring;            /* the tasks queued, oldest at head */
    size_t head, len, cap;
    bool stop;
    pthread_t *threads;
    unsigned nthreads;
};

/* Runs tasks until the pool stops and its queue is empty. */
static void *thread_main(void *arg)
{
    tf_pool *p = arg;
    tf_malloc_thread_heap();
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->len && !p->stop)
            pthread_cond_wait(&p->queued, &p->lock);
        if (!p->len)
            break;
        task t = p->ring[p->head];
        p->head = (p->head + 1) % p->cap;
        p->len--;
        pthread_mutex_unlock(&p->lock);
        t.fn(t.arg);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

tf_pool *tf_pool_new(unsigned threads)
{
    tf_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (!threads)
        threads = 1;
    if (!(p->threads = calloc(threads, sizeof *p->threads))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->queued, NULL);
    while (p->nthreads < threads &&
           pthread_create(&p->threads[p->nthreads], NULL, thread_main, p) == 0)
        p->nthreads++;
    if (p->nthreads < threads) {
        tf_pool_free(p);
        return NULL;
    }
    return p;
}

void tf_pool_free(tf_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->queued);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->queued);
    pthread_mutex_destroy(&p->lock);
    free(p->ring);
    free(p->threads);
    free(p);
}

unsigned tf_pool_threads(const tf_pool *p)
{
    return p->nthreads;
}

/* Doubles the ring, its tasks moved to its start; the caller holds the
 * lock. */
static int grow(tf_pool *p)
{
    size_t cap = p->cap ? 2 * p->cap : 16;
    task *ring = malloc(cap * sizeof *ring);
    if (!ring)
        return -1;
    for (size_t i = 0; i < p->len; i++)
        ring[i] = p->ring[(p->head + i) % p->cap];
    free(p->ring);
    p->ring = ring;
    p->head = 0;
    p->cap = cap;
    return 0;
}

int tf_pool_add(tf_pool *p, void (*fn)(void *arg), void *arg, tf_error *e)
{
    pthread_mutex_lock(&p->lock);
    int rc = p->len < p->cap ? 0 : grow(p);
    if (rc == 0) {
        p->ring[(p->head + p->len++) % p->cap] = (task){ fn, arg };
        pthread_cond_signal(&p->queued);
    }
    pthread_mutex_unlock(&p->lock);
    return rc == 0 ? 0 : tf_fail(e, ENOMEM, "out of memory for a task");
}
