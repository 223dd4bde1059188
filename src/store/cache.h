/* LRU cache of reconstructed blobs, keyed by global blob index, bounded
 * in bytes and shared by all threads of a process. Items are reference
 * counted so a reader can keep using a buffer while another thread evicts
 * it. A blob being decoded is present as an item claimed by the decoding
 * thread: other threads asking for it wait for that decode instead of
 * repeating it. */
#ifndef TRAJFS_STORE_CACHE_H
#define TRAJFS_STORE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/block_pool.h"

typedef struct tf_cache tf_cache;

typedef struct tf_cache_item {
    uint64_t key;
    size_t len;
    uint8_t *data; /* the bytes, once filled */
    /* private */
    tf_block_region *region; /* where data is the pool's; NULL: malloc's */
    unsigned refs;
    int state;
    struct tf_cache_item *prev, *next, *hnext;
} tf_cache_item;

tf_cache *tf_cache_new(size_t max_bytes);
void tf_cache_free(tf_cache *c);

/* Returns the item for key with a reference taken. A filled item is
 * returned at once (*claimed = false); one that another thread is
 * filling is waited for. An absent key gets a new, empty item claimed by
 * the caller (*claimed = true), who must then tf_cache_fill or
 * tf_cache_abandon it. NULL when out of memory.
 *
 * A thread that holds claims may wait here only for keys smaller than
 * every key it has claimed (blobs reference earlier blobs only, so
 * walking a reference chain downwards does that); waits then cannot
 * form a cycle. */
tf_cache_item *tf_cache_acquire(tf_cache *c, uint64_t key, bool *claimed);
/* Whether key is filled or being filled now: a hint, true or not a moment
 * later. */
bool tf_cache_has(tf_cache *c, uint64_t key);
/* Threads waiting now for claimed items to be filled or abandoned (once
 * this is seen, they wait: the wait begins under the cache's lock). */
unsigned tf_cache_waiting(tf_cache *c);

/* The filled item for key with a reference taken, or NULL (absent, or
 * being filled): never waits, never claims. */
tf_cache_item *tf_cache_peek(tf_cache *c, uint64_t key);
/* The filled item for key with a reference taken, waiting for one being
 * filled (by the rule of tf_cache_acquire); NULL when absent: never
 * claims. */
tf_cache_item *tf_cache_get(tf_cache *c, uint64_t key);
/* Memory for the len bytes of a claimed item, which the item holds from
 * now on: tf_cache_fill publishes them, tf_cache_abandon frees them. NULL
 * when out of memory. Blocks of 64 KiB and more come from the cache's
 * block pool (store/block_pool.h), in huge pages, and count against the
 * bound from now on as the pool counts them: whole regions. So the
 * process's memory follows the cache's bound while malloc may keep freed
 * blocks in its heap for reuse (tf_malloc_reuse). Under AddressSanitizer
 * every block comes from malloc, which it guards. */
uint8_t *tf_cache_buffer(tf_cache *c, tf_cache_item *it, size_t len);
/* Gives a claimed item the len bytes at data, a malloc'd block, instead
 * of tf_cache_buffer's: the cache frees it when it evicts the item. */
void tf_cache_adopt(tf_cache *c, tf_cache_item *it, uint8_t *data, size_t len);
/* Publishes a claimed item's bytes (of tf_cache_buffer) and wakes its
 * waiters; the caller keeps its reference. The item counts against the
 * bound from now on (a pooled block, since tf_cache_buffer), even when
 * larger than all of it: it is evicted once released. */
void tf_cache_fill(tf_cache *c, tf_cache_item *it);
/* Gives up a claimed item (its decode failed) and drops the caller's
 * reference; waiters retry, so each gets its own error. */
void tf_cache_abandon(tf_cache *c, tf_cache_item *it);
/* Drops a reference to a filled item. */
void tf_cache_release(tf_cache *c, tf_cache_item *it);
/* Sets the bound to max_bytes, evicting down to it what nobody holds. */
void tf_cache_set_bound(tf_cache *c, size_t max_bytes);
/* The bound now. */
size_t tf_cache_bound(tf_cache *c);

#endif
