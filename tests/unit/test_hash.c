/* Content ids (common/hash.h): XXH3 values and their hex form. */
#include <check.h>
#include <string.h>

#include "testlib.h"

#include "common/hash.h"

START_TEST(hash_known_values_and_hex)
{
    /* Reference values of XXH3-64 and XXH3-128 (seed 0) of no bytes. */
    ck_assert_uint_eq(tf_hash64("", 0), 0x2d06800538d394c2ull);
    tf_blob_id id = tf_blob_id_of("", 0);
    char hex[33];
    tf_blob_id_hex(&id, hex);
    ck_assert_str_eq(hex, "99aa06d3014798d86001c324468d497f");

    tf_blob_id a = tf_blob_id_of("trajfs", 6), b = tf_blob_id_of("trajfs", 6);
    tf_blob_id c = tf_blob_id_of("trajfS", 6);
    ck_assert(tf_blob_id_eq(&a, &b));
    ck_assert(!tf_blob_id_eq(&a, &c));
    tf_blob_id_hex(&a, hex);
    ck_assert_uint_eq(strlen(hex), 32);
    ck_assert_uint_eq(strspn(hex, "0123456789abcdef"), 32);
}
END_TEST

/* ---- tf_idmap ------------------------------------------------------------ */

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *ids = tcase_create("ids");
    tcase_add_test(ids, hash_known_values_and_hex);
    suite_add_tcase(s, ids);
    return s;
}

int main(void)
{
    return run_suite(hash_suite());
}
