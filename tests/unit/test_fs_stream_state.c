/* The state of a file encoded as it is written (fs/stream_state.h):
 * bytes count only when written in order from the start; rewriting or
 * cutting bytes already counted breaks the stream; a close, or a request
 * to give way, ends every wait; a waiter wakes for a write made by
 * another thread. */
#include <check.h>
#include <pthread.h>

#include "testlib.h"

#include "fs/stream_state.h"

static fs_stream_state s;

static void setup(void)
{
    fs_stream_state_init(&s, true);
}

static void teardown(void)
{
    fs_stream_state_destroy(&s);
}

START_TEST(bytes_in_order_count)
{
    fs_stream_state_wrote(&s, 0, 10);
    fs_stream_state_wrote(&s, 10, 5);
    fs_stream_state_wrote(&s, 30, 5); /* past the bytes in order: not counted */
    ck_assert(fs_stream_state_await_bytes(&s, 15));
    ck_assert_uint_eq(s.in_order, 15);
    ck_assert(!s.broken);
}
END_TEST

START_TEST(rewriting_counted_bytes_breaks)
{
    fs_stream_state_wrote(&s, 0, 10);
    fs_stream_state_wrote(&s, 4, 2);
    ck_assert(s.broken);
    ck_assert(!fs_stream_state_await_bytes(&s, 5));
    ck_assert(!fs_stream_state_whole(&s, 10));
}
END_TEST

START_TEST(cutting_counted_bytes_breaks)
{
    fs_stream_state_wrote(&s, 0, 10);
    fs_stream_state_truncated(&s, 20); /* longer: nothing counted is lost */
    ck_assert(!s.broken);
    fs_stream_state_truncated(&s, 9);
    ck_assert(s.broken);
}
END_TEST

START_TEST(close_ends_the_waits)
{
    fs_stream_state_wrote(&s, 0, 10);
    fs_stream_state_close(&s);
    ck_assert(!fs_stream_state_await_bytes(&s, 11)); /* complete, and short */
    ck_assert(fs_stream_state_await_close(&s, 10));
    ck_assert(fs_stream_state_whole(&s, 10));
    ck_assert(!fs_stream_state_whole(&s, 11));
}
END_TEST

START_TEST(more_than_the_size_is_no_close)
{
    fs_stream_state_wrote(&s, 0, 11);
    ck_assert(!fs_stream_state_await_close(&s, 10)); /* returns without a close */
}
END_TEST

START_TEST(giving_way_ends_the_waits)
{
    fs_stream_state_give_way(&s);
    ck_assert(!fs_stream_state_await_bytes(&s, 1));
    ck_assert(!fs_stream_state_await_close(&s, 0));
}
END_TEST

START_TEST(an_ended_stream_notes_nothing)
{
    fs_stream_state_end(&s);
    fs_stream_state_wrote(&s, 0, 10);
    ck_assert_uint_eq(s.in_order, 0);
}
END_TEST

static void *write_then_close(void *arg)
{
    (void)arg;
    for (uint64_t off = 0; off < 1000; off += 10)
        fs_stream_state_wrote(&s, off, 10);
    fs_stream_state_close(&s);
    return NULL;
}

START_TEST(waiters_wake_for_other_threads)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, write_then_close, NULL), 0);
    ck_assert(fs_stream_state_await_bytes(&s, 1000));
    ck_assert(fs_stream_state_await_close(&s, 1000));
    pthread_join(t, NULL);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("fs_stream_state");
    TCase *tc = tcase_create("stream_state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bytes_in_order_count);
    tcase_add_test(tc, rewriting_counted_bytes_breaks);
    tcase_add_test(tc, cutting_counted_bytes_breaks);
    tcase_add_test(tc, close_ends_the_waits);
    tcase_add_test(tc, more_than_the_size_is_no_close);
    tcase_add_test(tc, giving_way_ends_the_waits);
    tcase_add_test(tc, an_ended_stream_notes_nothing);
    tcase_add_test(tc, waiters_wake_for_other_threads);
    suite_add_tcase(suite, tc);
    return run_suite(suite);
}
