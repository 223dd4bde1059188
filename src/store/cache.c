#include "store/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Blocks this large come from the block pool (tf_cache_buffer). */
#if defined(__SANITIZE_ADDRESS__)
#define POOLED_MIN SIZE_MAX
#else
#define POOLED_MIN ((size_t)64 << 10)
#endif

enum { ITEM_CLAIMED, ITEM_FILLED, ITEM_ABANDONED };

struct tf_cache {
    pthread_mutex_t lock;
    pthread_cond_t settled; /* some claimed item was filled or abandoned */
    size_t max_bytes;
    size_t bytes; /* of the filled items whose blocks are malloc's */
    tf_block_pool *pool; /* the larger blocks, which it counts */
    unsigned waiting; /* threads in the wait for a claimed item */
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
    c->pool = tf_block_pool_new();
    if (!c->buckets || !c->pool) {
        free(c->buckets);
        tf_block_pool_free(c->pool);
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

/* Bytes an item adds to c->bytes once filled: a pooled block is the
 * pool's to count. */
static size_t counted(const tf_cache_item *it)
{
    return it->region ? 0 : it->len;
}

/* What the cache holds, against its bound. */
static size_t cached_bytes(tf_cache *c)
{
    return c->bytes + tf_block_pool_bytes(c->pool);
}

uint8_t *tf_cache_buffer(tf_cache *c, tf_cache_item *it, size_t len)
{
    it->len = len;
    if (len < POOLED_MIN)
        return it->data = malloc(len ? len : 1);
    return it->data = tf_block_pool_take(c->pool, len, &it->region);
}

void tf_cache_adopt(tf_cache *c, tf_cache_item *it, uint8_t *data, size_t len)
{
    (void)c;
    it->len = len;
    it->data = data;
    it->region = NULL;
}

static void drop_buffer(tf_cache *c, tf_cache_item *it)
{
    if (it->region)
        tf_block_pool_give(c->pool, it->region);
    else
        free(it->data);
    it->data = NULL;
    it->region = NULL;
}

static void destroy(tf_cache *c, tf_cache_item *it)
{
    drop_buffer(c, it);
    free(it);
}

/* Evicts least recently used items nobody holds until the bound holds.
 * Items in use stay; the bound is then exceeded only by what readers hold
 * at this moment. Only filled items are on the LRU list. */
static void evict(tf_cache *c)
{
    tf_cache_item *it = c->tail;
    while (it && cached_bytes(c) > c->max_bytes) {
        tf_cache_item *prev = it->prev;
        if (it->refs == 0) {
            unlink_lru(c, it);
            unlink_bucket(c, it);
            c->bytes -= counted(it);
            c->count--;
            destroy(c, it);
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
static void unref_detached(tf_cache *c, tf_cache_item *it)
{
    if (--it->refs == 0)
        destroy(c, it);
}

tf_cache_item *tf_cache_peek(tf_cache *c, uint64_t key)
{
    pthread_mutex_lock(&c->lock);
    tf_cache_item *it = find(c, key);
    if (it && it->state == ITEM_FILLED) {
        it->refs++;
        unlink_lru(c, it);
        push_front(c, it);
    } else {
        it = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return it;
}

/* The filled item for key with a reference taken, after waiting for one
 * being filled; NULL when absent. The caller holds the lock. */
static tf_cache_item *find_filled(tf_cache *c, uint64_t key)
{
    for (;;) {
        tf_cache_item *it = find(c, key);
        if (!it)
            return NULL;
        it->refs++;
        c->waiting++;
        while (it->state == ITEM_CLAIMED)
            pthread_cond_wait(&c->settled, &c->lock);
        c->waiting--;
        if (it->state == ITEM_FILLED) {
            unlink_lru(c, it);
            push_front(c, it);
            return it;
        }
        unref_detached(c, it); /* abandoned: perhaps claimed again since */
    }
}

tf_cache_item *tf_cache_get(tf_cache *c, uint64_t key)
{
    pthread_mutex_lock(&c->lock);
    tf_cache_item *it = find_filled(c, key);
    pthread_mutex_unlock(&c->lock);
    return it;
}

tf_cache_item *tf_cache_acquire(tf_cache *c, uint64_t key, bool *claimed)
{
    tf_cache_item *fresh = NULL;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        tf_cache_item *it = find_filled(c, key);
        if (it) {
            pthread_mutex_unlock(&c->lock);
            free(fresh);
            *claimed = false;
            return it;
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

bool tf_cache_has(tf_cache *c, uint64_t key)
{
    pthread_mutex_lock(&c->lock);
    const tf_cache_item *it = find(c, key);
    bool has = it && it->state != ITEM_ABANDONED;
    pthread_mutex_unlock(&c->lock);
    return has;
}

unsigned tf_cache_waiting(tf_cache *c)
{
    pthread_mutex_lock(&c->lock);
    unsigned n = c->waiting;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void tf_cache_fill(tf_cache *c, tf_cache_item *it)
{
    pthread_mutex_lock(&c->lock);
    it->state = ITEM_FILLED;
    push_front(c, it);
    c->bytes += counted(it);
    evict(c);
    pthread_cond_broadcast(&c->settled);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_abandon(tf_cache *c, tf_cache_item *it)
{
    pthread_mutex_lock(&c->lock);
    unlink_bucket(c, it);
    c->count--;
    drop_buffer(c, it);
    it->state = ITEM_ABANDONED;
    unref_detached(c, it);
    pthread_cond_broadcast(&c->settled);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_release(tf_cache *c, tf_cache_item *it)
{
    pthread_mutex_lock(&c->lock);
    it->refs--;
    if (cached_bytes(c) > c->max_bytes)
        evict(c);
    pthread_mutex_unlock(&c->lock);
}

void tf_cache_set_bound(tf_cache *c, size_t max_bytes)
{
    pthread_mutex_lock(&c->lock);
    c->max_bytes = max_bytes;
    evict(c);
    pthread_mutex_unlock(&c->lock);
}

size_t tf_cache_bound(tf_cache *c)
{
    pthread_mutex_lock(&c->lock);
    size_t bound = c->max_bytes;
    pthread_mutex_unlock(&c->lock);
    return bound;
}

void tf_cache_free(tf_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (tf_cache_item *it = c->buckets[i], *next; it; it = next) {
            next = it->hnext;
            destroy(c, it);
        }
    tf_block_pool_free(c->pool);
    free(c->buckets);
    pthread_cond_destroy(&c->settled);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
