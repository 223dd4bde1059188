/* The CPU count (common/cpus.h). */
#include <check.h>
#include <unistd.h>

#include "testlib.h"

#include "common/cpus.h"

START_TEST(online_cpus_is_sysconfs_count)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_uint_eq(tf_online_cpus(), n > 0 ? (unsigned)n : 1);
}
END_TEST

static Suite *cpus_suite(void)
{
    Suite *s = suite_create("cpus");
    TCase *sys = tcase_create("CPUs");
    tcase_add_test(sys, online_cpus_is_sysconfs_count);
    suite_add_tcase(s, sys);
    return s;
}

int main(void)
{
    return run_suite(cpus_suite());
}
