/* The id map (common/idmap.h) and the id index under it
 * (common/id_index.h): many ids, duplicates, collisions. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "testlib.h"

#include "common/hash.h"
#include "common/id_index.h"
#include "common/idmap.h"

static tf_blob_id id_of_number(uint64_t n)
{
    return tf_blob_id_of(&n, sizeof n);
}

START_TEST(idmap_many_ids)
{
    tf_idmap m = { 0 };
    const uint64_t n = 100000;
    uint64_t v;
    ck_assert_int_eq(tf_idmap_get(&m, &(tf_blob_id){ { 0 } }, &v), 0); /* empty map */
    int failed = 0;
    for (uint64_t i = 0; i < n; i++) {
        tf_blob_id id = id_of_number(i);
        failed |= tf_idmap_put(&m, &id, i * 3);
    }
    ck_assert_int_eq(failed, 0);
    ck_assert_uint_eq(m.index.count, n);
    ck_assert_uint_ge(m.index.cap, 2 * n); /* load factor at most 1/2 */
    uint64_t missing = 0, wrong = 0, phantom = 0;
    for (uint64_t i = 0; i < n; i++) {
        tf_blob_id id = id_of_number(i);
        v = UINT64_MAX;
        if (!tf_idmap_get(&m, &id, &v))
            missing++;
        else if (v != i * 3)
            wrong++;
    }
    for (uint64_t i = n; i < n + 1000; i++) {
        tf_blob_id id = id_of_number(i);
        phantom += (uint64_t)tf_idmap_get(&m, &id, &v);
    }
    ck_assert_uint_eq(missing, 0);
    ck_assert_uint_eq(wrong, 0);
    ck_assert_uint_eq(phantom, 0);
    tf_idmap_free(&m);
    ck_assert_uint_eq(m.index.cap, 0);
    ck_assert_uint_eq(m.index.count, 0);
}
END_TEST

/* Room reserved for n ids, putting them moves nothing; ids put before
 * the reserve stay found. */
START_TEST(idmap_reserve_then_put)
{
    tf_idmap m = { 0 };
    const uint64_t n = 5000;
    tf_blob_id first = id_of_number(0);
    ck_assert_int_eq(tf_idmap_put(&m, &first, 0), 0);
    ck_assert_int_eq(tf_idmap_reserve(&m, n), 0);
    const uint64_t cap = m.index.cap;
    const uint64_t *slots = m.index.slots;
    const tf_idmap_pair *pairs = m.pairs;
    ck_assert_uint_ge(cap, 2 * n);
    ck_assert_uint_lt(cap, 4 * n); /* the smallest power of two that holds them */
    int failed = 0;
    for (uint64_t i = 1; i < n; i++) {
        tf_blob_id id = id_of_number(i);
        failed |= tf_idmap_put(&m, &id, i);
    }
    ck_assert_int_eq(failed, 0);
    ck_assert_uint_eq(m.index.cap, cap);
    ck_assert_ptr_eq(m.index.slots, slots);
    ck_assert_ptr_eq(m.pairs, pairs);
    uint64_t wrong = 0, v;
    for (uint64_t i = 0; i < n; i++) {
        tf_blob_id id = id_of_number(i);
        wrong += !tf_idmap_get(&m, &id, &v) || v != i;
    }
    ck_assert_uint_eq(wrong, 0);
    ck_assert_int_eq(tf_idmap_reserve(&m, n / 2), 0); /* never shrinks */
    ck_assert_uint_eq(m.index.cap, cap);
    ck_assert_int_eq(tf_idmap_reserve(&m, UINT64_MAX), -1);
    tf_idmap_free(&m);
}
END_TEST

START_TEST(idmap_duplicate_put_keeps_first_value)
{
    tf_idmap m = { 0 };
    tf_blob_id id = id_of_number(7);
    uint64_t v;
    ck_assert_int_eq(tf_idmap_put(&m, &id, 0), 0); /* value 0 is a real value */
    ck_assert_int_eq(tf_idmap_put(&m, &id, 99), 0);
    ck_assert_uint_eq(m.index.count, 1);
    ck_assert_int_eq(tf_idmap_get(&m, &id, &v), 1);
    ck_assert_uint_eq(v, 0);
    tf_idmap_free(&m);
}
END_TEST

START_TEST(idmap_ids_sharing_first_bytes_stay_apart)
{
    /* Ids alike in their first 8 bytes (the same home slot: probing), then
     * in their first 12 (the 24 bits of the id a slot keeps too: only the
     * ids of the table tell them apart). */
    static const size_t differ_from[] = { 8, 12 };
    for (size_t k = 0; k < ARRAY_LEN(differ_from); k++) {
        tf_idmap m = { 0 };
        tf_blob_id ids[600];
        for (unsigned i = 0; i < ARRAY_LEN(ids); i++) {
            memset(ids[i].b, 0xaa, sizeof ids[i].b);
            memcpy(ids[i].b + differ_from[k], &i, sizeof i);
            ck_assert_int_eq(tf_idmap_put(&m, &ids[i], 1000 + i), 0);
        }
        for (unsigned i = 0; i < ARRAY_LEN(ids); i++) {
            uint64_t v;
            ck_assert_int_eq(tf_idmap_get(&m, &ids[i], &v), 1);
            ck_assert_uint_eq(v, 1000 + i);
        }
        tf_blob_id other = ids[0];
        other.b[15] ^= 0x80;
        uint64_t v;
        ck_assert_int_eq(tf_idmap_get(&m, &other, &v), 0);
        tf_idmap_free(&m);
    }
}
END_TEST

/* The index reads ids from the caller's table: here an array of ids. */
static const tf_blob_id *id_in_array(const void *table, uint64_t pos)
{
    return &((const tf_blob_id *)table)[pos];
}

START_TEST(id_index_refuses_a_position_too_large)
{
    tf_id_index x = { 0 };
    tf_blob_id id = id_of_number(1);
    ck_assert_int_eq(tf_id_index_put(&x, &id, TF_ID_INDEX_MAX, id_in_array, &id), -1);
    ck_assert_uint_eq(x.count, 0);
    uint64_t pos;
    ck_assert_int_eq(tf_id_index_get(&x, &id, id_in_array, &id, &pos), 0);
    ck_assert_int_eq(tf_id_index_put(&x, &id, 0, id_in_array, &id), 0);
    ck_assert_int_eq(tf_id_index_get(&x, &id, id_in_array, &id, &pos), 1);
    ck_assert_uint_eq(pos, 0);
    tf_id_index_free(&x);
}
END_TEST

static Suite *idmap_suite(void)
{
    Suite *s = suite_create("idmap");
    TCase *ids = tcase_create("ids");
    tcase_add_test(ids, idmap_many_ids);
    tcase_add_test(ids, idmap_reserve_then_put);
    tcase_add_test(ids, idmap_duplicate_put_keeps_first_value);
    tcase_add_test(ids, idmap_ids_sharing_first_bytes_stay_apart);
    tcase_add_test(ids, id_index_refuses_a_position_too_large);
    suite_add_tcase(s, ids);
    return s;
}

int main(void)
{
    return run_suite(idmap_suite());
}
