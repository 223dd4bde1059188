/* The in-memory blob table (store/blob_table.h): records that fit its
 * 32-bit fields and records that do not read back whole. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "testlib.h"

#include "store/blob_table.h"

static tf_blob record(uint64_t n)
{
    tf_blob b = { .offset = 4096 + n * 100, .enc_len = 50 + n, .raw_len = 2048,
                  .enc_hash = n * 0x9e3779b97f4a7c15u, .codec = 3, .dtype = 7,
                  .ref = n, .model = n ? n - 1 : 0 };
    b.id = tf_blob_id_of(&n, sizeof n);
    return b;
}

static void expect_record(const tf_blob_table *t, uint64_t idx, const tf_blob *want)
{
    tf_blob got = tf_blob_table_get(t, idx);
    ck_assert(tf_blob_id_eq(&got.id, &want->id));
    ck_assert_uint_eq(got.offset, want->offset);
    ck_assert_uint_eq(got.enc_len, want->enc_len);
    ck_assert_uint_eq(got.raw_len, want->raw_len);
    ck_assert_uint_eq(got.enc_hash, want->enc_hash);
    ck_assert_uint_eq(got.codec, want->codec);
    ck_assert_uint_eq(got.dtype, want->dtype);
    ck_assert_uint_eq(got.ref, want->ref);
    ck_assert_uint_eq(got.model, want->model);
    ck_assert_uint_eq(tf_blob_table_ref(t, idx), want->ref);
    ck_assert_uint_eq(tf_blob_table_model(t, idx), want->model);
    ck_assert_uint_eq(tf_blob_table_raw_len(t, idx), want->raw_len);
    ck_assert(tf_blob_id_eq(tf_blob_table_id(t, idx), &want->id));
}

START_TEST(records_read_back_whole)
{
    tf_blob_table t = { 0 };
    tf_error e = { 0 };
    const uint64_t n = 1000;
    ck_assert_int_eq(tf_blob_table_reserve(&t, n, &e), 0);
    tf_blob want[1000];
    for (uint64_t i = 0; i < n; i++) {
        want[i] = record(i);
        /* Every seventh one with a field past 32 bits, in turn. */
        switch (i % 7 == 0 ? i / 7 % 4 : 4) {
        case 0: want[i].enc_len = (uint64_t)UINT32_MAX + 1 + i; break;
        case 1: want[i].raw_len = (uint64_t)1 << 40; break;
        case 2: want[i].ref = (uint64_t)UINT32_MAX + 1; break;
        case 3: want[i].model = UINT64_MAX; break;
        default: break;
        }
        ck_assert_int_eq(tf_blob_table_set(&t, i, &want[i], &e), 0);
    }
    ck_assert_uint_eq(t.nwide, (n + 6) / 7);
    for (uint64_t i = 0; i < n; i++)
        expect_record(&t, i, &want[i]);
    /* Redirects overwrite slots: a wide record by one that fits, and the
     * other way round. */
    ck_assert_int_eq(tf_blob_table_set(&t, 7, &want[8], &e), 0);
    ck_assert_int_eq(tf_blob_table_set(&t, 9, &want[14], &e), 0);
    ck_assert_uint_eq(t.nwide, (n + 6) / 7);
    expect_record(&t, 7, &want[8]);
    expect_record(&t, 9, &want[14]);
    expect_record(&t, 14, &want[14]);
    /* Growing keeps them. */
    ck_assert_int_eq(tf_blob_table_reserve(&t, 4 * n, &e), 0);
    for (uint64_t i = 10; i < n; i++)
        expect_record(&t, i, &want[i]);
    tf_blob_table_free(&t);
    ck_assert_ptr_null(t.slots);
    ck_assert_ptr_null(t.wide);
}
END_TEST

START_TEST(slot_is_52_bytes)
{
    ck_assert_uint_eq(sizeof(tf_blob_slot), 52);
}
END_TEST

static Suite *blob_table_suite(void)
{
    Suite *s = suite_create("blob_table");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, records_read_back_whole);
    tcase_add_test(tc, slot_is_52_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(blob_table_suite());
}
