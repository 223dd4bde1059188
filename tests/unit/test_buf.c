/* The byte buffer and the bounded cursor (common/buf.h): growth,
 * little-endian integers, varints, reads past the end. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "common/buf.h"

START_TEST(buf_grows_byte_by_byte_and_keeps_contents)
{
    tf_buf b = { 0 };
    const size_t n = 100000;
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        failed |= tf_buf_u8(&b, (uint8_t)(i * 7));
    ck_assert_int_eq(failed, 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_uint_ge(b.cap, n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += b.data[i] != (uint8_t)(i * 7);
    ck_assert_uint_eq(wrong, 0);
    tf_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(buf_reserve_then_commit_appends)
{
    tf_buf b = { 0 };
    ck_assert_int_eq(tf_buf_put(&b, "ab", 2), 0);
    uint8_t *p = tf_buf_reserve(&b, 5000);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_eq(p, b.data + 2);
    ck_assert_uint_eq(b.len, 2); /* reserving does not change the length */
    memset(p, 'x', 5000);
    tf_buf_commit(&b, 5000);
    ck_assert_uint_eq(b.len, 5002);
    ck_assert_int_eq(memcmp(b.data, "abxxx", 5), 0);
    ck_assert_uint_eq(b.data[5001], 'x');
    /* A size that cannot be added to the length fails cleanly. */
    ck_assert_ptr_null(tf_buf_reserve(&b, SIZE_MAX));
    ck_assert_uint_eq(b.len, 5002);
    /* Putting nothing from NULL is allowed. */
    ck_assert_int_eq(tf_buf_put(&b, NULL, 0), 0);
    ck_assert_uint_eq(b.len, 5002);
    tf_buf_free(&b);
}
END_TEST

START_TEST(buf_empty_writes_on_a_fresh_buffer)
{
    /* Zero bytes into a buffer that has never held any (an empty chunk,
     * an empty string) is a success, not "out of memory". */
    tf_buf b = { 0 };
    ck_assert_ptr_nonnull(tf_buf_reserve(&b, 0));
    tf_buf_free(&b);
    ck_assert_int_eq(tf_buf_put(&b, "", 0), 0);
    ck_assert_uint_eq(b.len, 0);
    tf_buf_free(&b);
}
END_TEST

START_TEST(buf_integers_are_little_endian)
{
    tf_buf b = { 0 };
    ck_assert_int_eq(tf_buf_u8(&b, 0xab), 0);
    ck_assert_int_eq(tf_buf_u32(&b, 0x12345678u), 0);
    ck_assert_int_eq(tf_buf_u64(&b, 0x0102030405060708ull), 0);
    static const uint8_t want[] = { 0xab, 0x78, 0x56, 0x34, 0x12, 0x08, 0x07,
                                    0x06, 0x05, 0x04, 0x03, 0x02, 0x01 };
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_mem_eq(b.data, want, sizeof want);
    ck_assert_uint_eq(tf_le32_get(want + 1), 0x12345678u);
    ck_assert_uint_eq(tf_le64_get(want + 5), 0x0102030405060708ull);

    uint8_t p[8];
    tf_le32_put(p, 0xdeadbeefu);
    ck_assert_uint_eq(p[0], 0xef);
    ck_assert_uint_eq(p[3], 0xde);
    ck_assert_uint_eq(tf_le32_get(p), 0xdeadbeefu);
    tf_le64_put(p, UINT64_MAX - 1);
    ck_assert_uint_eq(p[0], 0xfe);
    ck_assert_uint_eq(tf_le64_get(p), UINT64_MAX - 1);

    tf_cursor r = tf_cursor_make(b.data, b.len);
    ck_assert_uint_eq(tf_read_u8(&r), 0xab);
    ck_assert_uint_eq(tf_read_u32(&r), 0x12345678u);
    ck_assert_uint_eq(tf_read_u64(&r), 0x0102030405060708ull);
    ck_assert(!r.bad);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    tf_buf_free(&b);
}
END_TEST

/* ---- varints ------------------------------------------------------------- */

static const struct {
    uint64_t value;
    size_t encoded_len;
} varint_cases[] = {
    { 0, 1 },
    { 1, 1 },
    { 127, 1 },
    { 128, 2 },
    { 300, 2 },
    { 16383, 2 },
    { 16384, 3 },
    { (uint64_t)1 << 62, 9 },
    { (uint64_t)1 << 63, 10 },
    { UINT64_MAX - 1, 10 },
    { UINT64_MAX, 10 },
};

START_TEST(varint_round_trip)
{
    uint64_t v = varint_cases[_i].value;
    tf_buf b = { 0 };
    ck_assert_int_eq(tf_buf_varint(&b, v), 0);
    ck_assert_uint_eq(b.len, varint_cases[_i].encoded_len);
    /* Every byte but the last carries the continuation bit. */
    for (size_t k = 0; k < b.len; k++)
        ck_assert_uint_eq(b.data[k] >> 7, k + 1 < b.len);
    tf_cursor r = tf_cursor_make(b.data, b.len);
    ck_assert_uint_eq(tf_read_varint(&r), v);
    ck_assert(!r.bad);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    tf_buf_free(&b);
}
END_TEST

START_TEST(varint_known_encoding)
{
    tf_buf b = { 0 };
    ck_assert_int_eq(tf_buf_varint(&b, 300), 0);
    static const uint8_t want[] = { 0xac, 0x02 };
    ck_assert_mem_eq(b.data, want, sizeof want);
    tf_buf_free(&b);
}
END_TEST

static const struct {
    const char *why;
    uint8_t bytes[12];
    size_t len;
} bad_varints[] = {
    { "empty", { 0 }, 0 },
    { "truncated after a continuation byte", { 0x80 }, 1 },
    { "truncated in the middle", { 0xff, 0xff, 0xff }, 3 },
    { "eleven bytes", { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 11 },
    { "ten bytes, the last continues", { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81 }, 10 },
    { "overflows 64 bits (bit 64 set)", { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02 }, 10 },
    { "overflows 64 bits (all bits)", { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f }, 10 },
};

START_TEST(varint_rejects_malformed)
{
    /* An exactly sized copy so an over-read shows up under ASan. */
    size_t len = bad_varints[_i].len;
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    memcpy(p, bad_varints[_i].bytes, len);
    tf_cursor r = tf_cursor_make(p, len);
    uint64_t v = tf_read_varint(&r);
    ck_assert_msg(r.bad, "accepted a varint that is %s", bad_varints[_i].why);
    ck_assert_uint_eq(v, 0);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    free(p);
}
END_TEST

START_TEST(varint_ten_bytes_at_the_limit_is_accepted)
{
    static const uint8_t max[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    tf_cursor r = tf_cursor_make(max, sizeof max);
    ck_assert_uint_eq(tf_read_varint(&r), UINT64_MAX);
    ck_assert(!r.bad);
}
END_TEST

START_TEST(reader_overrun_sets_bad_and_reads_zeros)
{
    static const uint8_t bytes[] = { 1, 2, 3, 4, 5 };
    tf_cursor r = tf_cursor_make(bytes, sizeof bytes);
    ck_assert_uint_eq(tf_read_u8(&r), 1);
    ck_assert_uint_eq(tf_cursor_left(&r), 4);
    ck_assert_uint_eq(tf_read_u64(&r), 0); /* 8 > 4 bytes left */
    ck_assert(r.bad);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    /* Sticky: later reads fail although bytes are left. */
    ck_assert_uint_eq(tf_read_u8(&r), 0);
    ck_assert_uint_eq(tf_read_u32(&r), 0);
    ck_assert_ptr_null(tf_read_bytes(&r, 0));
    ck_assert_uint_eq(tf_read_varint(&r), 0);
    ck_assert(r.bad);

    tf_cursor s = tf_cursor_make(bytes, sizeof bytes);
    ck_assert_ptr_null(tf_read_bytes(&s, SIZE_MAX));
    ck_assert(s.bad);

    tf_cursor t = tf_cursor_make(bytes, sizeof bytes);
    const uint8_t *p = tf_read_bytes(&t, sizeof bytes);
    ck_assert_ptr_eq(p, bytes);
    ck_assert(!t.bad);
    ck_assert_ptr_nonnull(tf_read_bytes(&t, 0));
    ck_assert_uint_eq(tf_read_u32(&t), 0);
    ck_assert(t.bad);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *buf = tcase_create("buf");
    tcase_add_test(buf, buf_grows_byte_by_byte_and_keeps_contents);
    tcase_add_test(buf, buf_reserve_then_commit_appends);
    tcase_add_test(buf, buf_empty_writes_on_a_fresh_buffer);
    tcase_add_test(buf, buf_integers_are_little_endian);
    tcase_add_loop_test(buf, varint_round_trip, 0, ARRAY_LEN(varint_cases));
    tcase_add_test(buf, varint_known_encoding);
    tcase_add_loop_test(buf, varint_rejects_malformed, 0, ARRAY_LEN(bad_varints));
    tcase_add_test(buf, varint_ten_bytes_at_the_limit_is_accepted);
    tcase_add_test(buf, reader_overrun_sets_bad_and_reads_zeros);
    suite_add_tcase(s, buf);
    return s;
}

int main(void)
{
    return run_suite(buf_suite());
}
