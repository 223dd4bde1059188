/* The pool of the cache's large blocks (store/block_pool.h): blocks cut
 * from shared huge-page regions, what it counts, free regions reused. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "testlib.h"

#include "store/block_pool.h"

#define MIB ((size_t)1 << 20)
#define HUGE_PAGE (2 * MIB)

static uint8_t *take(tf_block_pool *p, size_t len, tf_block_region **r, uint8_t fill)
{
    uint8_t *b = tf_block_pool_take(p, len, r);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(*r);
    ck_assert_uint_eq((uintptr_t)b % 4096, 0);
    memset(b, fill, len);
    return b;
}

static void assert_filled(const uint8_t *b, size_t len, uint8_t fill)
{
    size_t wrong = 0;
    for (size_t i = 0; i < len; i++)
        wrong += b[i] != fill;
    ck_assert_uint_eq(wrong, 0);
}

/* Two blocks of 1 MiB share a region, which stays counted until both
 * are back; a third takes a new region. */
START_TEST(block_pool_blocks_share_a_region)
{
    tf_block_pool *p = tf_block_pool_new();
    ck_assert_ptr_nonnull(p);
    tf_block_region *ra, *rb, *rc;
    uint8_t *a = take(p, MIB, &ra, 0xa1);
    uint8_t *b = take(p, MIB, &rb, 0xb2);
    ck_assert_ptr_eq(ra, rb);
    ck_assert(b >= a + MIB || a >= b + MIB);
    ck_assert_uint_eq(tf_block_pool_bytes(p), HUGE_PAGE);
    uint8_t *c = take(p, MIB, &rc, 0xc3);
    ck_assert_ptr_ne(rc, ra);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 2 * HUGE_PAGE);
    assert_filled(a, MIB, 0xa1);
    assert_filled(b, MIB, 0xb2);
    assert_filled(c, MIB, 0xc3);
    tf_block_pool_give(p, ra);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 2 * HUGE_PAGE); /* b holds it */
    tf_block_pool_give(p, rb);
    ck_assert_uint_eq(tf_block_pool_bytes(p), HUGE_PAGE);
    tf_block_pool_give(p, rc);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 0);
    tf_block_pool_free(p);
}
END_TEST

/* Regions begin at a huge page boundary, shared or a block's own. */
START_TEST(block_pool_regions_are_huge_page_aligned)
{
    tf_block_pool *p = tf_block_pool_new();
    tf_block_region *r[3];
    uint8_t *small = take(p, 100, &r[0], 1);
    uint8_t *big = take(p, 3 * MIB + 5, &r[1], 2);
    ck_assert_uint_eq((uintptr_t)small % HUGE_PAGE, 0);
    ck_assert_uint_eq((uintptr_t)big % HUGE_PAGE, 0);
    /* a block larger than a huge page is counted by its whole pages */
    ck_assert_uint_eq(tf_block_pool_bytes(p), HUGE_PAGE + 3 * MIB + 4096);
    /* blocks are cut at page boundaries: 100 bytes took one page */
    uint8_t *next = take(p, 4097, &r[2], 3);
    ck_assert_ptr_eq(next, small + 4096);
    assert_filled(small, 100, 1);
    assert_filled(big, 3 * MIB + 5, 2);
    for (int i = 0; i < 3; i++)
        tf_block_pool_give(p, r[i]);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 0);
    tf_block_pool_free(p);
}
END_TEST

/* A free region serves the next blocks: the shared one from its start,
 * a large one for a block of its size. */
START_TEST(block_pool_reuses_free_regions)
{
    tf_block_pool *p = tf_block_pool_new();
    tf_block_region *r;
    uint8_t *first = take(p, MIB + MIB / 2, &r, 1);
    tf_block_pool_give(p, r);
    ck_assert_ptr_eq(take(p, MIB + MIB / 2, &r, 2), first);
    tf_block_pool_give(p, r);
    uint8_t *big = take(p, 5 * MIB, &r, 3);
    tf_block_pool_give(p, r);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 0);
    ck_assert_ptr_eq(take(p, 5 * MIB, &r, 4), big);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 5 * MIB);
    tf_block_pool_give(p, r);
    /* a full shared region, freed after another took its place, is kept
     * and serves the next region needed */
    tf_block_region *full, *other;
    uint8_t *a = take(p, HUGE_PAGE, &full, 5);
    take(p, MIB, &other, 6);
    ck_assert_ptr_ne(full, other);
    tf_block_pool_give(p, full);
    tf_block_region *third;
    take(p, MIB, &third, 7); /* fits beside the 1 MiB block */
    ck_assert_ptr_eq(third, other);
    tf_block_region *again;
    ck_assert_ptr_eq(take(p, MIB + 1, &again, 8), a);
    tf_block_pool_give(p, other);
    tf_block_pool_give(p, third);
    tf_block_pool_give(p, again);
    ck_assert_uint_eq(tf_block_pool_bytes(p), 0);
    tf_block_pool_free(p);
}
END_TEST

static Suite *block_pool_suite(void)
{
    Suite *s = suite_create("block_pool");
    TCase *t = tcase_create("block_pool");
    tcase_add_test(t, block_pool_blocks_share_a_region);
    tcase_add_test(t, block_pool_regions_are_huge_page_aligned);
    tcase_add_test(t, block_pool_reuses_free_regions);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return run_suite(block_pool_suite());
}
