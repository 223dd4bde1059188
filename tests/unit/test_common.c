/* The common layer and the small store helpers: byte buffers and readers,
 * varints, error messages, content ids, the id map, natural sort, the
 * byte-bounded LRU cache, the clocks, the CPU count, the reading of a
 * blob's payload and the parsing of the writer's settings. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/idmap.h"
#include "store/blob_io.h"
#include "store/cache.h"
#include "store/natsort.h"
#include "store/write_opts.h"

/* ---- tf_buf -------------------------------------------------------------- */

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

    tf_reader r = tf_reader_make(b.data, b.len);
    ck_assert_uint_eq(tf_read_u8(&r), 0xab);
    ck_assert_uint_eq(tf_read_u32(&r), 0x12345678u);
    ck_assert_uint_eq(tf_read_u64(&r), 0x0102030405060708ull);
    ck_assert(!r.bad);
    ck_assert_uint_eq(tf_reader_left(&r), 0);
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
    tf_reader r = tf_reader_make(b.data, b.len);
    ck_assert_uint_eq(tf_read_varint(&r), v);
    ck_assert(!r.bad);
    ck_assert_uint_eq(tf_reader_left(&r), 0);
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
    tf_reader r = tf_reader_make(p, len);
    uint64_t v = tf_read_varint(&r);
    ck_assert_msg(r.bad, "accepted a varint that is %s", bad_varints[_i].why);
    ck_assert_uint_eq(v, 0);
    ck_assert_uint_eq(tf_reader_left(&r), 0);
    free(p);
}
END_TEST

START_TEST(varint_ten_bytes_at_the_limit_is_accepted)
{
    static const uint8_t max[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    tf_reader r = tf_reader_make(max, sizeof max);
    ck_assert_uint_eq(tf_read_varint(&r), UINT64_MAX);
    ck_assert(!r.bad);
}
END_TEST

START_TEST(reader_overrun_sets_bad_and_reads_zeros)
{
    static const uint8_t bytes[] = { 1, 2, 3, 4, 5 };
    tf_reader r = tf_reader_make(bytes, sizeof bytes);
    ck_assert_uint_eq(tf_read_u8(&r), 1);
    ck_assert_uint_eq(tf_reader_left(&r), 4);
    ck_assert_uint_eq(tf_read_u64(&r), 0); /* 8 > 4 bytes left */
    ck_assert(r.bad);
    ck_assert_uint_eq(tf_reader_left(&r), 0);
    /* Sticky: later reads fail although bytes are left. */
    ck_assert_uint_eq(tf_read_u8(&r), 0);
    ck_assert_uint_eq(tf_read_u32(&r), 0);
    ck_assert_ptr_null(tf_read_bytes(&r, 0));
    ck_assert_uint_eq(tf_read_varint(&r), 0);
    ck_assert(r.bad);

    tf_reader s = tf_reader_make(bytes, sizeof bytes);
    ck_assert_ptr_null(tf_read_bytes(&s, SIZE_MAX));
    ck_assert(s.bad);

    tf_reader t = tf_reader_make(bytes, sizeof bytes);
    const uint8_t *p = tf_read_bytes(&t, sizeof bytes);
    ck_assert_ptr_eq(p, bytes);
    ck_assert(!t.bad);
    ck_assert_ptr_nonnull(tf_read_bytes(&t, 0));
    ck_assert_uint_eq(tf_read_u32(&t), 0);
    ck_assert(t.bad);
}
END_TEST

/* ---- tf_error ------------------------------------------------------------ */

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

/* ---- content ids --------------------------------------------------------- */

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
    ck_assert_uint_eq(m.count, n);
    ck_assert_uint_ge(m.cap, 2 * n); /* load factor at most 1/2 */
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
    ck_assert_uint_eq(m.cap, 0);
    ck_assert_uint_eq(m.count, 0);
}
END_TEST

START_TEST(idmap_duplicate_put_keeps_first_value)
{
    tf_idmap m = { 0 };
    tf_blob_id id = id_of_number(7);
    uint64_t v;
    ck_assert_int_eq(tf_idmap_put(&m, &id, 0), 0); /* value 0 is a real value */
    ck_assert_int_eq(tf_idmap_put(&m, &id, 99), 0);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_int_eq(tf_idmap_get(&m, &id, &v), 1);
    ck_assert_uint_eq(v, 0);
    tf_idmap_free(&m);
}
END_TEST

START_TEST(idmap_ids_sharing_a_slot_stay_apart)
{
    /* Same first 8 bytes (same home slot), different tails: probing. */
    tf_idmap m = { 0 };
    tf_blob_id ids[600];
    for (unsigned i = 0; i < ARRAY_LEN(ids); i++) {
        memset(ids[i].b, 0xaa, sizeof ids[i].b);
        memcpy(ids[i].b + 8, &i, sizeof i);
        ck_assert_int_eq(tf_idmap_put(&m, &ids[i], 1000 + i), 0);
    }
    for (unsigned i = 0; i < ARRAY_LEN(ids); i++) {
        uint64_t v;
        ck_assert_int_eq(tf_idmap_get(&m, &ids[i], &v), 1);
        ck_assert_uint_eq(v, 1000 + i);
    }
    tf_idmap_free(&m);
}
END_TEST

/* ---- natural sort -------------------------------------------------------- */

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

/* ---- cache --------------------------------------------------------------- */

/* Fills the claimed item with len bytes of `byte`. */
static void fill_item(tf_cache *c, tf_cache_item *it, size_t len, uint8_t byte)
{
    uint8_t *p = tf_cache_buffer(c, it, len);
    ck_assert_ptr_nonnull(p);
    memset(p, byte, len);
    tf_cache_fill(c, it);
}

/* Claims key (it must be absent) and fills it with len bytes of
 * (uint8_t)key; returns it still held. */
static tf_cache_item *cache_put_held(tf_cache *c, uint64_t key, size_t len)
{
    bool claimed = false;
    tf_cache_item *it = tf_cache_acquire(c, key, &claimed);
    ck_assert_ptr_nonnull(it);
    ck_assert_msg(claimed, "key %llu was already cached", (unsigned long long)key);
    ck_assert_ptr_null(it->data);
    fill_item(c, it, len, (uint8_t)key);
    ck_assert_uint_eq(it->len, len);
    return it;
}

static void cache_put_released(tf_cache *c, uint64_t key, size_t len)
{
    tf_cache_release(c, cache_put_held(c, key, len));
}

/* 1 when key is cached (checking its bytes; this touches it, moving it to
 * the front), else 0 (the claim a miss gets is abandoned). Adds its length
 * to *bytes. */
static int cache_has(tf_cache *c, uint64_t key, size_t *bytes)
{
    bool claimed = true;
    tf_cache_item *it = tf_cache_acquire(c, key, &claimed);
    ck_assert_ptr_nonnull(it);
    if (claimed) {
        tf_cache_abandon(c, it);
        return 0;
    }
    ck_assert_uint_eq(it->key, key);
    size_t wrong = 0;
    for (size_t i = 0; i < it->len; i++)
        wrong += it->data[i] != (uint8_t)key;
    ck_assert_uint_eq(wrong, 0);
    if (bytes)
        *bytes += it->len;
    tf_cache_release(c, it);
    return 1;
}

START_TEST(cache_evicts_least_recently_used)
{
    tf_cache *c = tf_cache_new(300);
    ck_assert_ptr_nonnull(c);
    for (uint64_t k = 1; k <= 3; k++)
        cache_put_released(c, k, 100);
    ck_assert(cache_has(c, 1, NULL)); /* 1 is now the most recent; 2 the least */
    cache_put_released(c, 4, 100);
    ck_assert(!cache_has(c, 2, NULL));
    /* Order now, most recent first: 4 1 3. Checking touches, so check the
     * ones that must survive the next put after it. */
    cache_put_released(c, 5, 100); /* evicts 3 */
    ck_assert(!cache_has(c, 3, NULL));
    ck_assert(cache_has(c, 1, NULL));
    ck_assert(cache_has(c, 4, NULL));
    ck_assert(cache_has(c, 5, NULL));
    cache_put_released(c, 6, 200); /* evicts 1 and 4, the two oldest */
    ck_assert(!cache_has(c, 1, NULL));
    ck_assert(!cache_has(c, 4, NULL));
    ck_assert(cache_has(c, 5, NULL));
    ck_assert(cache_has(c, 6, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_respects_the_byte_bound)
{
    const size_t max = 10000;
    const uint64_t n = 5000; /* more items than the initial hash buckets */
    tf_cache *c = tf_cache_new(max);
    rng_state = 1;
    for (uint64_t k = 0; k < n; k++)
        cache_put_released(c, k, 1 + rng_next() % 300);
    size_t bytes = 0;
    unsigned present = 0;
    for (uint64_t k = 0; k < n; k++)
        present += (unsigned)cache_has(c, k, &bytes);
    ck_assert_uint_le(bytes, max);
    ck_assert_uint_gt(bytes, max - 300); /* evicts no more than it must */
    ck_assert_uint_gt(present, 0);
    ck_assert(cache_has(c, n - 1, NULL)); /* the newest survived */
    /* Larger than the whole cache: usable while held, gone once released,
     * having pushed everything else out. */
    tf_cache_item *big = cache_put_held(c, n, max + 1);
    ck_assert(cache_has(c, n, NULL));
    ck_assert(!cache_has(c, n - 1, NULL));
    tf_cache_release(c, big);
    ck_assert(!cache_has(c, n, NULL));
    /* Exactly the whole cache fits, alone. */
    cache_put_released(c, n + 1, max);
    bytes = 0;
    for (uint64_t k = 0; k < n + 2; k++)
        cache_has(c, k, &bytes);
    ck_assert_uint_eq(bytes, max);
    tf_cache_free(c);
}
END_TEST

/* Items of 64 KiB and more have blocks of their own (mapped, except
 * under ASan); an evicted one's block serves a new item, resized. */
START_TEST(cache_large_items)
{
    const size_t big = (size_t)1 << 20;
    tf_cache *c = tf_cache_new(3 * big);
    const uint8_t *block[4];
    for (uint64_t k = 1; k <= 3; k++) {
        tf_cache_item *it = cache_put_held(c, k, big);
        block[k] = it->data;
        tf_cache_release(c, it);
    }
    size_t bytes = 0;
    for (uint64_t k = 1; k <= 3; k++)
        ck_assert(cache_has(c, k, &bytes));
    ck_assert_uint_eq(bytes, 3 * big);
    cache_put_released(c, 4, big - 100); /* evicts 1 */
    ck_assert(!cache_has(c, 1, NULL));
    ck_assert(cache_has(c, 4, NULL));
    cache_put_released(c, 5, big + 200); /* evicts 2 and 3 */
    ck_assert(!cache_has(c, 2, NULL));
    ck_assert(!cache_has(c, 3, NULL));
    ck_assert(cache_has(c, 4, NULL));
    ck_assert(cache_has(c, 5, NULL));
    /* a claim abandoned after its block was given: the block is not
     * leaked (LeakSanitizer) */
    bool claimed;
    tf_cache_item *failed = tf_cache_acquire(c, 6, &claimed);
    ck_assert(claimed);
    ck_assert_ptr_nonnull(tf_cache_buffer(c, failed, big));
    tf_cache_abandon(c, failed);
    ck_assert(!cache_has(c, 6, NULL));
    tf_cache_item *reused = cache_put_held(c, 7, big - 4096);
#if !defined(__SANITIZE_ADDRESS__) /* there every block is malloc's */
    /* the block of an evicted item of 1 MiB serves one a page smaller */
    ck_assert(reused->data == block[1] || reused->data == block[2] || reused->data == block[3]);
#else
    (void)block;
#endif
    tf_cache_release(c, reused);
    ck_assert(cache_has(c, 7, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_keeps_many_small_items)
{
    const uint64_t n = 5000; /* forces the bucket table to grow */
    tf_cache *c = tf_cache_new(1 << 20);
    for (uint64_t k = 0; k < n; k++)
        cache_put_released(c, k * 0x100000001ull, 1);
    for (uint64_t k = 0; k < n; k++)
        ck_assert(cache_has(c, k * 0x100000001ull, NULL));
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_never_evicts_held_items)
{
    tf_cache *c = tf_cache_new(100);
    tf_cache_item *held = cache_put_held(c, 1, 100);
    /* The bound would need 1 gone; it is held, so it stays and the bound
     * is exceeded only by what is held. */
    tf_cache_item *other = cache_put_held(c, 2, 60);
    for (uint64_t k = 3; k < 50; k++)
        cache_put_released(c, k, 50);
    ck_assert_uint_eq(held->len, 100);
    for (size_t i = 0; i < held->len; i++)
        ck_assert_uint_eq(held->data[i], 1);
    ck_assert(cache_has(c, 1, NULL));
    ck_assert(cache_has(c, 2, NULL));
    tf_cache_release(c, other);
    tf_cache_release(c, held);
    /* Nothing held: back within the bound. */
    size_t bytes = 0;
    for (uint64_t k = 1; k < 50; k++)
        cache_has(c, k, &bytes);
    ck_assert_uint_le(bytes, 100);
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_acquire_of_a_cached_key_returns_the_item)
{
    tf_cache *c = tf_cache_new(1000);
    tf_cache_item *first = cache_put_held(c, 9, 10);
    bool claimed = true;
    tf_cache_item *second = tf_cache_acquire(c, 9, &claimed);
    ck_assert_ptr_eq(second, first);
    ck_assert(!claimed);
    ck_assert_uint_eq(second->len, 10);
    tf_cache_release(c, second);
    tf_cache_release(c, first);
    size_t bytes = 0;
    ck_assert(cache_has(c, 9, &bytes));
    ck_assert_uint_eq(bytes, 10);
    tf_cache_free(c);
}
END_TEST

/* A second thread asking for a key the main thread has claimed. */
typedef struct {
    tf_cache *c;
    uint64_t key;
    tf_cache_item *got;
    bool claimed;
} waiter;

static void *wait_for_key(void *arg)
{
    waiter *w = arg;
    w->got = tf_cache_acquire(w->c, w->key, &w->claimed);
    return NULL;
}

/* Starts the waiter and returns once it waits for the claimed key. */
static void start_waiter(waiter *w, pthread_t *t)
{
    ck_assert_int_eq(pthread_create(t, NULL, wait_for_key, w), 0);
    struct timespec pause = { 0, 1000 * 1000 };
    for (int ms = 0; tf_cache_waiting(w->c) == 0; ms++) {
        ck_assert_msg(ms < 60 * 1000, "the waiter did not wait for the claimed key");
        nanosleep(&pause, NULL);
    }
}

START_TEST(cache_waiter_gets_the_claimers_fill)
{
    tf_cache *c = tf_cache_new(1000);
    bool claimed = false;
    tf_cache_item *mine = tf_cache_acquire(c, 5, &claimed);
    ck_assert(claimed);
    waiter w = { .c = c, .key = 5, .claimed = true };
    pthread_t t;
    start_waiter(&w, &t);
    fill_item(c, mine, 33, 5);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_eq(w.got, mine); /* decoded once, shared */
    ck_assert(!w.claimed);
    ck_assert_uint_eq(w.got->len, 33);
    tf_cache_release(c, w.got);
    tf_cache_release(c, mine);
    tf_cache_free(c);
}
END_TEST

START_TEST(cache_waiter_claims_after_an_abandon)
{
    tf_cache *c = tf_cache_new(1000);
    bool claimed = false;
    tf_cache_item *mine = tf_cache_acquire(c, 5, &claimed);
    ck_assert(claimed);
    waiter w = { .c = c, .key = 5, .claimed = false };
    pthread_t t;
    start_waiter(&w, &t);
    tf_cache_abandon(c, mine); /* the decode failed */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_nonnull(w.got);
    ck_assert(w.claimed); /* the waiter tries for itself */
    fill_item(c, w.got, 4, 5);
    tf_cache_release(c, w.got);
    ck_assert(cache_has(c, 5, NULL));
    tf_cache_free(c);
}
END_TEST

/* ---- clocks and CPUs ----------------------------------------------------- */

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

START_TEST(online_cpus_is_sysconfs_count)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_uint_eq(tf_online_cpus(), n > 0 ? (unsigned)n : 1);
}
END_TEST

/* ---- blob payloads ------------------------------------------------------- */

/* An archive in the test directory holding one opaque file; returns it
 * open read-only, its only blob at *b. */
static tf_archive *archive_of_one_blob(const char *name, const tf_blob **b)
{
    char path[TEST_PATH_MAX], src[TEST_PATH_MAX];
    FILE *f = fopen(test_path("data.bin", src), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 5000; i++)
        fprintf(f, "line %d of a file stored as opaque bytes\n", i);
    ck_assert_int_eq(fclose(f), 0);
    tf_writer *w = test_open_writer(test_path(name, path), true, 20, 1, 16);
    test_add(w, src, "data.bin");
    tf_writer_close(w);
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, false, &ar, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(tf_archive_nblobs(ar), 1);
    *b = tf_archive_blob(ar, 0);
    return ar;
}

START_TEST(blob_payload_reads_its_stored_bytes)
{
    const tf_blob *b;
    tf_archive *ar = archive_of_one_blob("a.traj", &b);
    tf_buf out = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(tf_buf_put(&out, "left over", 9), 0);
    ck_assert_msg(tf_blob_read_payload(ar, b, &out, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(out.len, b->enc_len);
    ck_assert(tf_hash64(out.data, out.len) == b->enc_hash);
    tf_buf_free(&out);
    tf_archive_close(ar);
}
END_TEST

START_TEST(blob_payload_damaged_is_refused)
{
    const tf_blob *b;
    tf_archive *ar = archive_of_one_blob("a.traj", &b);
    uint64_t at = b->offset + b->enc_len / 2;
    tf_archive_close(ar);
    char path[TEST_PATH_MAX];
    FILE *f = fopen(test_path("a.traj", path), "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)at, SEEK_SET), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, (long)at, SEEK_SET), 0);
    ck_assert_int_ne(fputc(c ^ 0x20, f), EOF);
    ck_assert_int_eq(fclose(f), 0);

    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, false, &ar, &e) == 0, "%s", e.msg);
    tf_buf out = { 0 };
    ck_assert_int_eq(tf_blob_read_payload(ar, tf_archive_blob(ar, 0), &out, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_str_eq(e.msg, "checksum mismatch (stored bytes are damaged)");
    tf_buf_free(&out);
    tf_archive_close(ar);
}
END_TEST

/* ---- writer settings ----------------------------------------------------- */

START_TEST(write_opts_default_is_one_thread_per_cpu)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    unsigned cpus = tf_online_cpus();
    ck_assert_uint_eq(o.threads, cpus < TF_WRITE_THREADS_MAX ? cpus : TF_WRITE_THREADS_MAX);
    ck_assert_uint_eq(o.max_chain, TF_MAX_CHAIN_DEFAULT);
    ck_assert_uint_eq(o.prog_budget, 0);
    ck_assert(!o.search);
    ck_assert(!o.all_programs);
    ck_assert_ptr_null(o.progress);
    ck_assert_uint_eq(o.cache_bytes, 0);
}
END_TEST

START_TEST(write_opts_set_takes_each_setting)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    tf_error e = { 0 };
    ck_assert_msg(tf_write_opts_set(&o, "threads", "3", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "max_chain", "0", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "prog_budget", "4096", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "search", NULL, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(o.threads, 3);
    ck_assert_uint_eq(o.max_chain, 0);
    ck_assert_uint_eq(o.prog_budget, 4096);
    ck_assert(o.search && !o.all_programs);
    /* all programs are searched programs */
    tf_write_opts_default(&o);
    ck_assert_msg(tf_write_opts_set(&o, "all_programs", NULL, &e) == 0, "%s", e.msg);
    ck_assert(o.search && o.all_programs);
}
END_TEST

static const struct {
    const char *name, *value, *msg;
    int errnum;
} bad_settings[] = {
    { "threads", "0", "expected a whole number from 1 to 1024, got '0'", EINVAL },
    { "threads", "1025", "expected a whole number from 1 to 1024, got '1025'", EINVAL },
    { "threads", "-1", "expected a whole number from 1 to 1024, got '-1'", EINVAL },
    { "threads", " 2", "expected a whole number from 1 to 1024, got ' 2'", EINVAL },
    { "max_chain", "4097", "expected a whole number from 0 to 4096, got '4097'", EINVAL },
    { "max_chain", "2x", "expected a whole number from 0 to 4096, got '2x'", EINVAL },
    { "max_chain", "99999999999999999999",
      "expected a whole number from 0 to 4096, got '99999999999999999999'", EINVAL },
    { "max_chain", NULL, "expected a whole number from 0 to 4096", EINVAL },
    { "prog_budget", "", "expected a whole number from 1 to 4096, got ''", EINVAL },
    { "all_programs", "1", "takes no value, got '1'", EINVAL },
    { "search", "", "takes no value, got ''", EINVAL },
    { "budget", "4", "not a writer setting", ENOENT }, /* trajpack's spelling */
    { "cache_size", "1G", "not a writer setting", ENOENT },
};

START_TEST(write_opts_set_refuses_bad_values)
{
    tf_write_opts o, before;
    tf_write_opts_default(&o);
    before = o;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_write_opts_set(&o, bad_settings[_i].name, bad_settings[_i].value, &e), -1);
    ck_assert_str_eq(e.msg, bad_settings[_i].msg);
    ck_assert_int_eq(e.errnum, bad_settings[_i].errnum);
    ck_assert_uint_eq(o.threads, before.threads);
    ck_assert_uint_eq(o.max_chain, before.max_chain);
    ck_assert_uint_eq(o.prog_budget, before.prog_budget);
    ck_assert(o.search == before.search);
    ck_assert(o.all_programs == before.all_programs);
}
END_TEST

/* The help text of each spelling, written to a string. */
static char *write_opts_help_text(tf_write_opts_spelling spelling)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    tf_write_opts_help(f, spelling);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

START_TEST(write_opts_help_spells_every_setting)
{
    char *options = write_opts_help_text(TF_WRITE_OPTS_OPTIONS);
    char *mount = write_opts_help_text(TF_WRITE_OPTS_MOUNT_OPTIONS);
    static const char *const spelled[][2] = {
        { "  -T, --threads N      encoder threads", "    -o threads=N           encoder threads" },
        { "      --max-chain N    longest chain", "    -o max_chain=N         longest chain" },
        { "      --budget N       search budget", "    -o prog_budget=N       search budget" },
        { "      --search         search programs", "    -o search              search programs" },
        { "      --all-programs   the search, and", "    -o all_programs        the search, and" },
    };
    for (size_t i = 0; i < ARRAY_LEN(spelled); i++) {
        ck_assert_msg(strstr(options, spelled[i][0]), "no '%s' in:\n%s", spelled[i][0], options);
        ck_assert_msg(strstr(mount, spelled[i][1]), "no '%s' in:\n%s", spelled[i][1], mount);
    }
    /* A description's next lines start in its column. */
    ck_assert_ptr_nonnull(strstr(options, "\n                       4096 (default 2)\n"));
    ck_assert_ptr_nonnull(strstr(mount, "\n                           4096 (default 2)\n"));
    free(options);
    free(mount);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *common_suite(void)
{
    Suite *s = suite_create("common");
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

    TCase *err = tcase_create("error");
    tcase_add_test(err, error_fail_formats_and_returns_minus_one);
    tcase_add_test(err, error_prefix_prepends_and_keeps_errnum);
    tcase_add_loop_test(err, error_prefix_truncates_long_messages, 0, ARRAY_LEN(long_prefix_cases));
    suite_add_tcase(s, err);

    TCase *ids = tcase_create("ids");
    tcase_add_test(ids, hash_known_values_and_hex);
    tcase_add_test(ids, idmap_many_ids);
    tcase_add_test(ids, idmap_duplicate_put_keeps_first_value);
    tcase_add_test(ids, idmap_ids_sharing_a_slot_stay_apart);
    suite_add_tcase(s, ids);

    TCase *nat = tcase_create("natsort");
    tcase_add_loop_test(nat, natcmp_orders_pairs, 0, ARRAY_LEN(natcmp_cases));
    tcase_add_test(nat, natcmp_sorts_a_trajectory);
    suite_add_tcase(s, nat);

    TCase *cache = tcase_create("cache");
    tcase_add_test(cache, cache_evicts_least_recently_used);
    tcase_add_test(cache, cache_respects_the_byte_bound);
    tcase_add_test(cache, cache_large_items);
    tcase_add_test(cache, cache_keeps_many_small_items);
    tcase_add_test(cache, cache_never_evicts_held_items);
    tcase_add_test(cache, cache_acquire_of_a_cached_key_returns_the_item);
    tcase_add_test(cache, cache_waiter_gets_the_claimers_fill);
    tcase_add_test(cache, cache_waiter_claims_after_an_abandon);
    suite_add_tcase(s, cache);

    TCase *sys = tcase_create("clocks and CPUs");
    tcase_add_test(sys, time_of_day_is_now);
    tcase_add_test(sys, monotonic_seconds_count_a_sleep);
    tcase_add_test(sys, online_cpus_is_sysconfs_count);
    suite_add_tcase(s, sys);

    TCase *payload = tcase_create("blob payloads");
    tcase_add_checked_fixture(payload, test_dir_make, test_dir_remove);
    tcase_add_test(payload, blob_payload_reads_its_stored_bytes);
    tcase_add_test(payload, blob_payload_damaged_is_refused);
    suite_add_tcase(s, payload);

    TCase *wopts = tcase_create("writer settings");
    tcase_add_test(wopts, write_opts_default_is_one_thread_per_cpu);
    tcase_add_test(wopts, write_opts_set_takes_each_setting);
    tcase_add_loop_test(wopts, write_opts_set_refuses_bad_values, 0, ARRAY_LEN(bad_settings));
    tcase_add_test(wopts, write_opts_help_spells_every_setting);
    suite_add_tcase(s, wopts);
    return s;
}

int main(void)
{
    return run_suite(common_suite());
}
