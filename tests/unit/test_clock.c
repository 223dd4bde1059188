/* The clocks (common/clock.h): time of day, monotonic seconds. */
#include <check.h>
#include <errno.h>
#include <time.h>

#include "testlib.h"

#include "common/clock.h"

/* time() reads a coarser clock that may lag the precise one by up to a
 * tick: a second of slack each way. */
START_TEST(time_of_day_is_now)
{
    time_t before = time(NULL);
    struct timespec ts;
    tf_time_of_day(&ts);
    time_t after = time(NULL);
    ck_assert_int_ge(ts.tv_sec, before - 1);
    ck_assert_int_le(ts.tv_sec, after + 1);
    ck_assert_int_ge(ts.tv_nsec, 0);
    ck_assert_int_lt(ts.tv_nsec, 1000000000);
}
END_TEST

START_TEST(monotonic_seconds_count_a_sleep)
{
    double start = tf_monotonic_seconds();
    struct timespec pause = { .tv_nsec = 20 * 1000 * 1000 };
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
    double slept = tf_monotonic_seconds() - start;
    ck_assert_msg(slept >= 0.02 && slept < 3600, "%f seconds", slept);
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *sys = tcase_create("clocks");
    tcase_add_test(sys, time_of_day_is_now);
    tcase_add_test(sys, monotonic_seconds_count_a_sleep);
    suite_add_tcase(s, sys);
    return s;
}

int main(void)
{
    return run_suite(clock_suite());
}
