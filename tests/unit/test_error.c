/* Error messages (common/error.h): formatting, prefixes, truncation. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "common/error.h"

START_TEST(error_fail_formats_and_returns_minus_one)
{
    tf_error e = { 0 };
    ck_assert_int_eq(tf_fail(&e, ENOENT, "no such %s %d", "thing", 42), -1);
    ck_assert_str_eq(e.msg, "no such thing 42");
    ck_assert_int_eq(e.errnum, ENOENT);
    ck_assert_int_eq(tf_fail(NULL, EIO, "ignored"), -1);
    tf_error_prefix(NULL, "ignored too");
}
END_TEST

START_TEST(error_prefix_prepends_and_keeps_errnum)
{
    tf_error e = { 0 };
    tf_fail(&e, EIO, "checksum mismatch");
    tf_error_prefix(&e, "%s", "archive.tj");
    ck_assert_str_eq(e.msg, "archive.tj: checksum mismatch");
    tf_error_prefix(&e, "open %d", 2);
    ck_assert_str_eq(e.msg, "open 2: archive.tj: checksum mismatch");
    ck_assert_int_eq(e.errnum, EIO);
}
END_TEST

static char *repeat_char(char c, size_t n)
{
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* prefix length, old message length: every combination must leave a
 * NUL-terminated message of at most sizeof msg - 1 bytes that starts with
 * the prefix. */
static const struct {
    size_t prefix_len, old_len;
} long_prefix_cases[] = {
    { 10, 600 }, { 600, 10 }, { 600, 600 }, { 508, 5 }, { 509, 5 },
    { 510, 5 }, { 511, 5 }, { 512, 5 }, { 0, 511 }, { 300, 300 },
};

START_TEST(error_prefix_truncates_long_messages)
{
    const size_t max = sizeof ((tf_error *)0)->msg - 1;
    size_t plen = long_prefix_cases[_i].prefix_len, olen = long_prefix_cases[_i].old_len;
    char *prefix = repeat_char('p', plen), *old = repeat_char('o', olen);
    tf_error e;
    memset(&e, 0x55, sizeof e);
    tf_fail(&e, ENOSPC, "%s", old);
    ck_assert_uint_eq(strlen(e.msg), olen < max ? olen : max);
    tf_error_prefix(&e, "%s", prefix);
    size_t len = strnlen(e.msg, sizeof e.msg);
    ck_assert_uint_lt(len, sizeof e.msg);
    size_t want_prefix = plen < max ? plen : max;
    ck_assert_int_eq(strncmp(e.msg, prefix, want_prefix), 0);
    if (want_prefix + 2 < sizeof e.msg) {
        /* The separator follows, then as much of the old message as fits. */
        ck_assert_int_eq(memcmp(e.msg + want_prefix, ": ", 2), 0);
        size_t kept = len - want_prefix - 2;
        ck_assert_uint_eq(kept, olen < max - want_prefix - 2 ? olen : max - want_prefix - 2);
        ck_assert_int_eq(strncmp(e.msg + want_prefix + 2, old, kept), 0);
    } else {
        ck_assert_uint_eq(len, want_prefix);
    }
    ck_assert_int_eq(e.errnum, ENOSPC);
    free(prefix);
    free(old);
}
END_TEST

static Suite *error_suite(void)
{
    Suite *s = suite_create("error");
    TCase *err = tcase_create("error");
    tcase_add_test(err, error_fail_formats_and_returns_minus_one);
    tcase_add_test(err, error_prefix_prepends_and_keeps_errnum);
    tcase_add_loop_test(err, error_prefix_truncates_long_messages, 0, ARRAY_LEN(long_prefix_cases));
    suite_add_tcase(s, err);
    return s;
}

int main(void)
{
    return run_suite(error_suite());
}
