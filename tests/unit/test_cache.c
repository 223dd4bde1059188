/* The byte-bounded LRU cache of reconstructed blobs (store/cache.h):
 * eviction, bounds, holds, waiters. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "store/cache.h"

/* Fills the claimed item with len bytes of `byte`. */
static void fill_item(tf_cache *c, tf_cache_item *it, size_t len, uint8_t byte)
{
    uint8_t *p = tf_cache_buffer(c, it, len);
    ck_assert_ptr_nonnull(p);
    memset(p, byte, len);
    tf_cache_fill(c, it);
}

/* Claims key (it must be absent) and fills it with len bytes of
 * (uint8_t)key; returns it still held. */
static tf_cache_item *cache_put_held(tf_cache *c, uint64_t key, size_t len)
{
    bool claimed = false;
    tf_cache_item *it = tf_cache_acquire(c, key, &claimed);
    ck_assert_ptr_nonnull(it);
    ck_assert_msg(claimed, "key %llu was already cached", (unsigned long long)key);
    ck_assert_ptr_null(it->data);
    fill_item(c, it, len, (uint8_t)key);
    ck_assert_uint_eq(it->len, len);
    return it;
}

static void cache_put_released(tf_cache *c, uint64_t key, size_t len)
{
    tf_cache_release(c, cache_put_held(c, key, len));
}

/* 1 when key is cached (checking its bytes; this touches it, moving it to
 * the front), else 0 (the claim a miss gets is abandoned). Adds its length
 * to *bytes. */
static int cache_has(tf_cache *c, uint64_t key, size_t *bytes)
{
    bool claimed = true;
    tf_cache_item *it = tf_cache_acquire(c, key, &claimed);
    ck_assert_ptr_nonnull(it);
    if (claimed) {
        tf_cache_abandon(c, it);
        return 0;
    }
    ck_assert_uint_eq(it->key, key);
    size_t wrong = 0;
    for (size_t i = 0; i < it->len; i++)
        wrong += it->data[i] != (uint8_t)key;
    ck_assert_uint_eq(wrong, 0);
    if (bytes)
        *bytes += it->len;
    tf_cache_release(c, it);
    return 1;
}

START_TEST(cache_evicts_least_recently_used)
{
    tf_cache *c = tf_cache_new(300);
    ck_assert_ptr_nonnull(c);
    for (uint64_t k = 1; k <= 3; k++)
        cache_put_released(c, k, 100);
    ck_assert(cache_has(c, 1, NULL)); /* 1 is now the most recent; 2 the least */
    cache_put_released(c, 4, 100);
    ck_assert(!cache_has(c, 2, NULL));
    /* Order now, most recent first: 4 1 3. Checking touches, so check the
     * ones that must survive the next put after it. */
    cache_put_released(c, 5, 100); /* evicts 3 */
    ck_assert(!cache_has(c, 3, NULL));
    ck_assert(cache_has(c, 1, NULL));
    ck_assert(cache_has(c, 4, NULL));
    ck_assert(cache_has(c, 5, NULL));
    cache_put_released(c, 6, 200); /* evicts 1 and 4, the two oldest */
    ck_assert(!cache_has(c, 1, NULL));
    ck_assert(!cache_has(c, 4, NULL));
    ck_assert(cache_has(c, 5, NULL));
    ck_assert(cache_has(c, 6, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_respects_the_byte_bound)
{
    const size_t max = 10000;
    const uint64_t n = 5000; /* more items than the initial hash buckets */
    tf_cache *c = tf_cache_new(max);
    rng_state = 1;
    for (uint64_t k = 0; k < n; k++)
        cache_put_released(c, k, 1 + rng_next() % 300);
    size_t bytes = 0;
    unsigned present = 0;
    for (uint64_t k = 0; k < n; k++)
        present += (unsigned)cache_has(c, k, &bytes);
    ck_assert_uint_le(bytes, max);
    ck_assert_uint_gt(bytes, max - 300); /* evicts no more than it must */
    ck_assert_uint_gt(present, 0);
    ck_assert(cache_has(c, n - 1, NULL)); /* the newest survived */
    /* Larger than the whole cache: usable while held, gone once released,
     * having pushed everything else out. */
    tf_cache_item *big = cache_put_held(c, n, max + 1);
    ck_assert(cache_has(c, n, NULL));
    ck_assert(!cache_has(c, n - 1, NULL));
    tf_cache_release(c, big);
    ck_assert(!cache_has(c, n, NULL));
    /* Exactly the whole cache fits, alone. */
    cache_put_released(c, n + 1, max);
    bytes = 0;
    for (uint64_t k = 0; k < n + 2; k++)
        cache_has(c, k, &bytes);
    ck_assert_uint_eq(bytes, max);
    tf_cache_free(c);
}
END_TEST

/* Items of 64 KiB and more have blocks from the pool (except under
 * ASan), which counts whole regions of 2 MiB against the bound: two
 * items of 1 MiB that share one are evicted together. */
START_TEST(cache_large_items)
{
    const size_t big = (size_t)1 << 20;
    tf_cache *c = tf_cache_new(4 * big);
    for (uint64_t k = 1; k <= 4; k++)
        cache_put_released(c, k, big);
    size_t bytes = 0;
    for (uint64_t k = 1; k <= 4; k++)
        ck_assert(cache_has(c, k, &bytes));
    ck_assert_uint_eq(bytes, 4 * big);
    cache_put_released(c, 5, big); /* evicts 1, and 2 with it in the pool */
    ck_assert(!cache_has(c, 1, NULL));
#if !defined(__SANITIZE_ADDRESS__) /* there every block is malloc's */
    ck_assert(!cache_has(c, 2, NULL));
#endif
    for (uint64_t k = 3; k <= 5; k++)
        ck_assert(cache_has(c, k, NULL));
    /* a claim abandoned after its block was given: the block is not
     * leaked (LeakSanitizer), nor counted (the pool) */
    bool claimed;
    tf_cache_item *failed = tf_cache_acquire(c, 6, &claimed);
    ck_assert(claimed);
    ck_assert_ptr_nonnull(tf_cache_buffer(c, failed, big));
    tf_cache_abandon(c, failed);
    ck_assert(!cache_has(c, 6, NULL));
    for (uint64_t k = 3; k <= 5; k++)
        ck_assert(cache_has(c, k, NULL));
    /* one larger than a region */
    cache_put_released(c, 7, 3 * big + 1);
    ck_assert(cache_has(c, 7, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_keeps_many_small_items)
{
    const uint64_t n = 5000; /* forces the bucket table to grow */
    tf_cache *c = tf_cache_new(1 << 20);
    for (uint64_t k = 0; k < n; k++)
        cache_put_released(c, k * 0x100000001ull, 1);
    for (uint64_t k = 0; k < n; k++)
        ck_assert(cache_has(c, k * 0x100000001ull, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_never_evicts_held_items)
{
    tf_cache *c = tf_cache_new(100);
    tf_cache_item *held = cache_put_held(c, 1, 100);
    /* The bound would need 1 gone; it is held, so it stays and the bound
     * is exceeded only by what is held. */
    tf_cache_item *other = cache_put_held(c, 2, 60);
    for (uint64_t k = 3; k < 50; k++)
        cache_put_released(c, k, 50);
    ck_assert_uint_eq(held->len, 100);
    for (size_t i = 0; i < held->len; i++)
        ck_assert_uint_eq(held->data[i], 1);
    ck_assert(cache_has(c, 1, NULL));
    ck_assert(cache_has(c, 2, NULL));
    tf_cache_release(c, other);
    tf_cache_release(c, held);
    /* Nothing held: back within the bound. */
    size_t bytes = 0;
    for (uint64_t k = 1; k < 50; k++)
        cache_has(c, k, &bytes);
    ck_assert_uint_le(bytes, 100);
    tf_cache_free(c);
}
END_TEST

/* A new bound holds at once: the oldest items nobody holds go, a held
 * one stays; a larger bound keeps what the smaller one would evict. */
START_TEST(cache_set_bound_evicts_down_to_it)
{
    tf_cache *c = tf_cache_new(1000);
    for (uint64_t k = 1; k <= 10; k++)
        cache_put_released(c, k, 100);
    tf_cache_item *held = cache_put_held(c, 11, 100); /* evicts 1 */
    tf_cache_set_bound(c, 300);
    size_t bytes = 0;
    for (uint64_t k = 1; k <= 8; k++)
        ck_assert_msg(!cache_has(c, k, &bytes), "key %llu outlived the new bound",
                      (unsigned long long)k);
    ck_assert(cache_has(c, 9, &bytes));
    ck_assert(cache_has(c, 10, &bytes));
    ck_assert(cache_has(c, 11, &bytes));
    ck_assert_uint_eq(bytes, 300);
    tf_cache_release(c, held);
    tf_cache_set_bound(c, 500);
    for (uint64_t k = 12; k <= 13; k++)
        cache_put_released(c, k, 100);
    bytes = 0;
    for (uint64_t k = 9; k <= 13; k++)
        ck_assert(cache_has(c, k, &bytes));
    ck_assert_uint_eq(bytes, 500);
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_acquire_of_a_cached_key_returns_the_item)
{
    tf_cache *c = tf_cache_new(1000);
    tf_cache_item *first = cache_put_held(c, 9, 10);
    bool claimed = true;
    tf_cache_item *second = tf_cache_acquire(c, 9, &claimed);
    ck_assert_ptr_eq(second, first);
    ck_assert(!claimed);
    ck_assert_uint_eq(second->len, 10);
    tf_cache_release(c, second);
    tf_cache_release(c, first);
    size_t bytes = 0;
    ck_assert(cache_has(c, 9, &bytes));
    ck_assert_uint_eq(bytes, 10);
    tf_cache_free(c);
}
END_TEST

/* A second thread asking for a key the main thread has claimed. */
typedef struct {
    tf_cache *c;
    uint64_t key;
    tf_cache_item *got;
    bool claimed;
} waiter;

static void *wait_for_key(void *arg)
{
    waiter *w = arg;
    w->got = tf_cache_acquire(w->c, w->key, &w->claimed);
    return NULL;
}

/* Starts the waiter and returns once it waits for the claimed key. */
static void start_waiter(waiter *w, pthread_t *t)
{
    ck_assert_int_eq(pthread_create(t, NULL, wait_for_key, w), 0);
    struct timespec pause = { 0, 1000 * 1000 };
    for (int ms = 0; tf_cache_waiting(w->c) == 0; ms++) {
        ck_assert_msg(ms < 60 * 1000, "the waiter did not wait for the claimed key");
        nanosleep(&pause, NULL);
    }
}

START_TEST(cache_waiter_gets_the_claimers_fill)
{
    tf_cache *c = tf_cache_new(1000);
    bool claimed = false;
    tf_cache_item *mine = tf_cache_acquire(c, 5, &claimed);
    ck_assert(claimed);
    waiter w = { .c = c, .key = 5, .claimed = true };
    pthread_t t;
    start_waiter(&w, &t);
    fill_item(c, mine, 33, 5);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_eq(w.got, mine); /* decoded once, shared */
    ck_assert(!w.claimed);
    ck_assert_uint_eq(w.got->len, 33);
    tf_cache_release(c, w.got);
    tf_cache_release(c, mine);
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_waiter_claims_after_an_abandon)
{
    tf_cache *c = tf_cache_new(1000);
    bool claimed = false;
    tf_cache_item *mine = tf_cache_acquire(c, 5, &claimed);
    ck_assert(claimed);
    waiter w = { .c = c, .key = 5, .claimed = false };
    pthread_t t;
    start_waiter(&w, &t);
    tf_cache_abandon(c, mine); /* the decode failed */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_nonnull(w.got);
    ck_assert(w.claimed); /* the waiter tries for itself */
    fill_item(c, w.got, 4, 5);
    tf_cache_release(c, w.got);
    ck_assert(cache_has(c, 5, NULL));
    tf_cache_free(c);
}
END_TEST

static Suite *cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *cache = tcase_create("cache");
    tcase_add_test(cache, cache_evicts_least_recently_used);
    tcase_add_test(cache, cache_respects_the_byte_bound);
    tcase_add_test(cache, cache_large_items);
    tcase_add_test(cache, cache_keeps_many_small_items);
    tcase_add_test(cache, cache_never_evicts_held_items);
    tcase_add_test(cache, cache_set_bound_evicts_down_to_it);
    tcase_add_test(cache, cache_acquire_of_a_cached_key_returns_the_item);
    tcase_add_test(cache, cache_waiter_gets_the_claimers_fill);
    tcase_add_test(cache, cache_waiter_claims_after_an_abandon);
    suite_add_tcase(s, cache);
    return s;
}

int main(void)
{
    return run_suite(cache_suite());
}
