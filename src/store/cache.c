#include "store/cache.h"

#include <pthread.h>
#include <stdlib.h>

enum { ITEM_CLAIMED, ITEM_FILLED, ITEM_ABANDONED };

struct tf_cache {
    pthread_mutex_t lock;
    pthread_cond_t settled; /* some claimed item was filled or abandoned */
    size_t max_bytes, bytes;
    tf_cache_item *head, *tail; /* head = most recently used */
    tf_cache_item **buckets;
    size_t nbuckets, count;
};

tf_cache *tf_cache_new(size_t max_bytes)
{
    tf_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nbuckets = 1024;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->settled, NULL);
    c->max_bytes = max_bytes;
    return c;
}

static size_t bucket_of(const tf_cache *c, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (c->nbuckets - 1);
}

static void unlink_lru(tf_cache *c, tf_cache_item *it)
{
    tf_cache_item *p = it->prev, *n = it->next;
    if (p)
        p->next = n;
    else
        c->head = n;
    if (n)
        n->prev = p;
    else
        c->tail = p;
    it->prev = it->next = NULL;
}

static void push_front(tf_cache *c, tf_cache_item *it)
{
    it->prev = NULL;
    it->next = c->head;
    if (c->head)
        c->head->prev = it;
    c->head = it;
    if (!c->tail)
        c->tail = it;
}

static void unlink_bucket(tf_cache *c, tf_cache_item *it)
{
    tf_cache_item **pp = &c->buckets[bucket_of(c, it->key)];
    while (*pp != it)
        pp = &(*pp)->hnext;
    *pp = it->hnext;
}

static void destroy(tf_cache_item *it)
{
    free(it->data);
    free(it);
}

/* Evicts least recently used items nobody holds until the bound holds.
 * Items in use stay; the bound is then exceeded only by what readers hold
 * at this moment. Only filled items are on the LRU list. */
static void evict(tf_cache *c)
{
    tf_cache_item *it = c->tail;
    while (it && c->bytes > c->max_bytes) {
        tf_cache_item *prev = it->prev;
        if (it->refs == 0) {
            unlink_lru(c, it);
            unlink_bucket(c, it);
            c->bytes -= it->len;
            c->count--;
            destroy(it);
        }
        it = prev;
    }
}

static tf_cache_item *find(tf_cache *c, uint64_t key)
{
    for (tf_cache_item *it = c->buckets[bucket_of(c, key)]; it; it = it->hnext)
        if (it->key == key)
            return it;
    return NULL;
}

static void grow_buckets(tf_cache *c)
{
    size_t n = c->nbuckets * 2;
    tf_cache_item **b = calloc(n, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    tf_cache_item **old = c->buckets;
    size_t oldn = c->nbuckets;
    c->buckets = b;
    c->nbuckets = n;
    for (size_t i = 0; i < oldn; i++)
        for (tf_cache_item *it = old[i], *next; it; it = next) {
            next = it->hnext;
            size_t k = bucket_of(c, it->key);
            it->hnext = b[k];
            b[k] = it;
        }
    free(old);
}

/* Drops one reference to an item already taken off the table. */
static void unref_detached(tf_cache_item *it)
{
    if (--it->refs == 0)
        destroy(it);
}

tf_cache_item *tf_cache_acquire(tf_cache *c, uint64_t key, bool *claimed)
{
    tf_cache_item *fresh = NULL;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        tf_cache_item *it = find(c, key);
        if (it) {
            it->refs++;
            while (it->state == ITEM_CLAIMED)
                pthread_cond_wait(&c->settled, &c->lock);
            if (it->state == ITEM_FILLED) {
                unlink_lru(c, it);
                push_front(c, it);
                pthread_mutex_unlock(&c->lock);
                free(fresh);
                *claimed = false;
                return it;
            }
            unref_detached(it); /* abandoned: look again, perhaps claim it */
            continue;
        }
        if (fresh)
            break;
        /* A miss: allocate the claim outside the lock, then look again. */
        pthread_mutex_unlock(&c->lock);
        fresh = calloc(1, sizeof *fresh);
        if (!fresh)
            return NULL;
        pthread_mutex_lock(&c->lock);
    }
    *fresh = (tf_cache_item){ .key = key, .refs = 1, .state = ITEM_CLAIMED };
    size_t k = bucket_of(c, key);
    fresh->hnext = c->buckets[k];
    c->buckets[k] = fresh;
    if (++c->count > c->nbuckets)
        grow_buckets(c);
    pthread_mutex_unlock(&c->lock);
    *claimed = true;
    return fresh;
}

void tf_cache_fill(tf_cache *c, tf_cache_item *it, uint8_t *data, size_t len)
{
    pthread_mutex_lock(&c->lock);
    it->data = data;
    it->len = len;
    it->state = ITEM_FILLED;
    push_front(c, it);
    c->bytes += len;
    evict(c);
    pthread_cond_broadcast(&c->settled);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_abandon(tf_cache *c, tf_cache_item *it)
{
    pthread_mutex_lock(&c->lock);
    unlink_bucket(c, it);
    c->count--;
    it->state = ITEM_ABANDONED;
    unref_detached(it);
    pthread_cond_broadcast(&c->settled);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_release(tf_cache *c, tf_cache_item *it)
{
    pthread_mutex_lock(&c->lock);
    it->refs--;
    if (c->bytes > c->max_bytes)
        evict(c);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_free(tf_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (tf_cache_item *it = c->buckets[i], *next; it; it = next) {
            next = it->hnext;
            destroy(it);
        }
    free(c->buckets);
    pthread_cond_destroy(&c->settled);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
