/* Natural sort (store/natsort.h): step-20 before step-100. */
#include <check.h>
#include <stdlib.h>

#include "testlib.h"

#include "store/natsort.h"

static int sign_of(int v)
{
    return (v > 0) - (v < 0);
}

static const struct {
    const char *a, *b;
    int order; /* sign of tf_natcmp(a, b) */
} natcmp_cases[] = {
    { "step-900", "step-1000", -1 },
    { "run/step-900/model.safetensors", "run/step-1000/model.safetensors", -1 },
    { "step-9.safetensors", "step-10.safetensors", -1 },
    { "step-0099", "step-100", -1 },    /* leading zeros do not add value */
    { "step-010", "step-9", 1 },
    { "a1", "a01", -1 },                /* same value: fewer zeros first */
    { "a0", "a00", -1 },
    { "a007", "a007", 0 },
    { "x2y10", "x2y9", 1 },            /* every digit run compares */
    { "abc", "abd", -1 },               /* plain text compares bytewise */
    { "file", "file1", -1 },            /* a prefix sorts first */
    { "file.txt", "file1.txt", -1 },    /* '.' < '1' */
    { "a1b", "a1c", -1 },
    { "B", "a", -1 },
    { "step-100", "step-100", 0 },
    { "", "", 0 },
    { "", "a", -1 },
    { "n18446744073709551616", "n18446744073709551615", 1 }, /* beyond 64 bits */
    { "n99999999999999999999999", "n100000000000000000000000", -1 },
};

START_TEST(natcmp_orders_pairs)
{
    const char *a = natcmp_cases[_i].a, *b = natcmp_cases[_i].b;
    int want = natcmp_cases[_i].order;
    ck_assert_msg(sign_of(tf_natcmp(a, b)) == want, "tf_natcmp(\"%s\", \"%s\") is %d, want %d",
                  a, b, tf_natcmp(a, b), want);
    ck_assert_msg(sign_of(tf_natcmp(b, a)) == -want, "tf_natcmp(\"%s\", \"%s\") not antisymmetric",
                  b, a);
}
END_TEST

static int natcmp_qsort(const void *a, const void *b)
{
    return tf_natcmp(*(const char *const *)a, *(const char *const *)b);
}

START_TEST(natcmp_sorts_a_trajectory)
{
    static const char *const sorted[] = {
        "ckpt/step-1", "ckpt/step-2", "ckpt/step-10", "ckpt/step-20",
        "ckpt/step-100", "ckpt/step-1000", "ckpt/step-1000a", "ckpt/step-10000",
    };
    const char *v[ARRAY_LEN(sorted)];
    /* Reverse then sort. */
    for (size_t i = 0; i < ARRAY_LEN(sorted); i++)
        v[i] = sorted[ARRAY_LEN(sorted) - 1 - i];
    qsort(v, ARRAY_LEN(v), sizeof v[0], natcmp_qsort);
    for (size_t i = 0; i < ARRAY_LEN(sorted); i++)
        ck_assert_str_eq(v[i], sorted[i]);
}
END_TEST

static Suite *natsort_suite(void)
{
    Suite *s = suite_create("natsort");
    TCase *nat = tcase_create("natsort");
    tcase_add_loop_test(nat, natcmp_orders_pairs, 0, ARRAY_LEN(natcmp_cases));
    tcase_add_test(nat, natcmp_sorts_a_trajectory);
    suite_add_tcase(s, nat);
    return s;
}

int main(void)
{
    return run_suite(natsort_suite());
}
