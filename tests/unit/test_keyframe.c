/* The keyframe codec (codec/keyframe.h) beyond what every self-contained
 * codec is held to (test_codecs.c): bit-exact round trips of F16, BF16
 * and F32 chunks of every shape its planes can take (constant, coded,
 * incompressible, partial elements, lengths around the SIMD step), the
 * same bytes with and without SIMD, a bounded size on random bytes, and
 * hostile payloads failing cleanly. And the codec the writer stores a
 * newest checkpoint with. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/codec.h"
#include "codec/keyframe.h"
#include "codec/prog/prog_ast.h"
#include "common/dtype.h"
#include "common/simd.h"

static const unsigned kf_dtypes[] = { TF_DT_F16, TF_DT_BF16, TF_DT_F32 };

/* The most a plane's framing adds: kind, varint body length, coding. */
#define PLANE_FRAMING 12

static size_t elem_size(unsigned dtype)
{
    return tf_dtype_get(dtype)->size;
}

static void encode(unsigned dtype, const uint8_t *src, size_t len, tf_buf *enc)
{
    tf_codec_ctx ctx = { .dtype = dtype };
    tf_error e = { 0 };
    enc->len = 0;
    ck_assert_msg(tf_codec_keyframe.encode(src, len, &ctx, enc, &e) == 0,
                  "encode of %zu bytes (dtype %u): %s", len, dtype, e.msg);
}

/* Decodes enc (copied to an exactly sized buffer) into an exactly sized
 * one of len bytes; returns the decoder's result, out the bytes. */
static int decode(unsigned dtype, const uint8_t *enc, size_t enc_len, uint8_t *out, size_t len)
{
    tf_codec_ctx ctx = { .dtype = dtype };
    uint8_t *stored = exact_copy(enc, enc_len);
    uint8_t *dst = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(dst);
    tf_error e = { 0 };
    int rc = tf_codec_keyframe.decode(stored, enc_len, &ctx, dst, len, &e);
    if (rc < 0)
        ck_assert_msg(e.msg[0] != '\0', "failed without a message");
    else if (out && len)
        memcpy(out, dst, len);
    free(dst);
    free(stored);
    return rc;
}

/* Round trip of src; returns the encoded size. */
static size_t round_trip(unsigned dtype, const uint8_t *src, size_t len)
{
    tf_buf enc = { 0 };
    encode(dtype, src, len, &enc);
    uint8_t *out = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(decode(dtype, enc.data, enc.len, out, len) == 0,
                  "decode of %zu bytes (dtype %u) failed", len, dtype);
    ck_assert_msg(len == 0 || memcmp(out, src, len) == 0,
                  "round trip of %zu bytes (dtype %u) differs", len, dtype);
    size_t size = enc.len;
    free(out);
    tf_buf_free(&enc);
    return size;
}

/* n elements of dtype like trained weights: values of about 0.02 in
 * magnitude, either sign, their exponents few and skewed. */
static uint8_t *weights(unsigned dtype, size_t n)
{
    const size_t w = elem_size(dtype);
    uint8_t *p = malloc(n * w + 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        double u = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
        float f = (float)(0.02 * log(u) * (rng_next() & 1 ? 1 : -1));
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (dtype == TF_DT_F32) {
            test_put_elem(p + 4 * i, 4, bits);
        } else if (dtype == TF_DT_BF16) {
            test_put_elem(p + 2 * i, 2, bits >> 16);
        } else { /* F16 of the same magnitude: sign, 5-bit exponent, 10 bits */
            int exp = (int)(bits >> 23 & 0xff) - 127 + 15;
            uint32_t half = bits >> 16 & 0x8000;
            if (exp > 0)
                half |= (uint32_t)exp << 10 | (bits >> 13 & 0x3ff);
            test_put_elem(p + 2 * i, 2, half);
        }
    }
    return p;
}

/* Lengths in elements: empty, below and around the SIMD step of 32,
 * around the decoder's piece of 4096 and a HUFF4 turn of 1024. */
static const size_t elem_counts[] = { 0, 1, 2, 31, 32, 33, 63, 1023, 1025, 4095, 4097, 70000 };

/* With every length of partial element after the whole ones: the rest
 * is kept raw. */
START_TEST(weights_round_trip_and_shrink)
{
    const unsigned dtype = kf_dtypes[_i];
    const size_t w = elem_size(dtype);
    for (size_t k = 0; k < ARRAY_LEN(elem_counts); k++) {
        rng_state = 11 + k;
        const size_t n = elem_counts[k];
        uint8_t *src = weights(dtype, n + 1);
        for (size_t extra = 1; extra < w; extra++)
            round_trip(dtype, src, n * w + extra);
        size_t size = round_trip(dtype, src, n * w);
        /* the exponent plane is coded: a bit an element saved at least */
        if (n >= 1023)
            ck_assert_msg(size <= n * w - n / 8, "%zu elements of dtype %u took %zu bytes", n,
                          dtype, size);
        free(src);
    }
}
END_TEST

/* Constant planes: all zeros, all one value, a constant sign (F32's
 * Adam second moments), a mantissa of few bits (BF16 values in F32). */
START_TEST(constant_planes_round_trip)
{
    const unsigned dtype = kf_dtypes[_i];
    const size_t w = elem_size(dtype), n = 5000, len = n * w;
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    memset(src, 0, len);
    ck_assert_uint_le(round_trip(dtype, src, len), (size_t)2 * w);
    for (size_t i = 0; i < n; i++)
        test_put_elem(src + i * w, (unsigned)w, w == 2 ? 0xbc00 : 0xbf800000u);
    ck_assert_uint_le(round_trip(dtype, src, len), (size_t)2 * w);
    rng_state = 31;
    uint8_t *wt = weights(dtype, n);
    for (size_t i = 0; i < n; i++) /* |x|: the sign constant */
        wt[i * w + w - 1] &= 0x7f;
    size_t positive = round_trip(dtype, wt, len);
    for (size_t i = 0; i < n && w == 4; i++) /* F32 holding BF16 values */
        wt[i * w] = wt[i * w + 1] = 0;
    size_t short_mantissa = round_trip(dtype, wt, len);
    ck_assert_uint_le(short_mantissa, positive);
    free(wt);
    free(src);
}
END_TEST

/* Random bits: no plane pays for codes, the payload stays the bytes and
 * the planes' framing. */
START_TEST(random_bytes_stay_bounded)
{
    const unsigned dtype = kf_dtypes[_i];
    const size_t w = elem_size(dtype);
    static const size_t lens[] = { 0, 1, 3, 64, 4097, 100003, 1 << 20 };
    for (size_t k = 0; k < ARRAY_LEN(lens); k++) {
        uint8_t *src = malloc(lens[k] + 1);
        ck_assert_ptr_nonnull(src);
        rng_state = 41 + k;
        fill_random(src, lens[k]);
        size_t size = round_trip(dtype, src, lens[k]);
        ck_assert_msg(size <= lens[k] + PLANE_FRAMING * w, "%zu random bytes took %zu",
                      lens[k], size);
        free(src);
    }
}
END_TEST

/* Every SIMD level makes the same payload, and each decodes the other's. */
START_TEST(simd_levels_agree)
{
    const unsigned dtype = kf_dtypes[_i];
    const size_t w = elem_size(dtype), n = 10007;
    rng_state = 51;
    uint8_t *src = weights(dtype, n);
    tf_buf fast = { 0 }, plain = { 0 };
    encode(dtype, src, n * w + 1, &fast);
    tf_simd_level_cap(TF_SIMD_NONE);
    encode(dtype, src, n * w + 1, &plain);
    ck_assert(fast.len == plain.len && memcmp(fast.data, plain.data, fast.len) == 0);
    uint8_t *out = malloc(n * w + 1);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(decode(dtype, fast.data, fast.len, out, n * w + 1), 0);
    ck_assert(memcmp(out, src, n * w + 1) == 0);
    tf_simd_level_cap(TF_SIMD_AVX512);
    free(out);
    tf_buf_free(&fast);
    tf_buf_free(&plain);
    free(src);
}
END_TEST

START_TEST(other_dtypes_are_refused)
{
    for (unsigned dtype = 0; dtype <= TF_DT_COUNT; dtype++) {
        if (tf_keyframe_dtype(dtype))
            continue;
        uint8_t src[64] = { 0 }, dst[64];
        tf_codec_ctx ctx = { .dtype = dtype };
        tf_buf enc = { 0 };
        tf_error e = { 0 };
        ck_assert_int_eq(tf_codec_keyframe.encode(src, sizeof src, &ctx, &enc, &e), -1);
        tf_codec_ctx f32 = { .dtype = TF_DT_F32 };
        ck_assert_int_eq(tf_codec_keyframe.encode(src, sizeof src, &f32, &enc, &e), 0);
        ck_assert_int_eq(tf_codec_keyframe.decode(enc.data, enc.len, &ctx, dst, sizeof dst, &e),
                         -1);
        tf_buf_free(&enc);
    }
}
END_TEST

/* ---- hostile payloads ---------------------------------------------------- */

enum { HOSTILE_N = 3000 };

/* A BF16 payload of weights: the mantissa plane raw, then the exponent
 * plane in Huffman codes. */
static void hostile_sample(uint8_t *src, tf_buf *enc)
{
    rng_state = 61;
    uint8_t *wt = weights(TF_DT_BF16, HOSTILE_N);
    memcpy(src, wt, 2 * HOSTILE_N);
    free(wt);
    encode(TF_DT_BF16, src, 2 * HOSTILE_N, enc);
    /* lowest plane first: const/literal kind 1, body length 1 + n, raw */
    ck_assert_uint_eq(enc->data[0], 1);
    ck_assert_uint_eq(enc->data[3], TF_PROG_CODE_RAW);
    ck_assert_uint_eq(enc->data[4 + HOSTILE_N], 1);
}

START_TEST(every_truncation_and_extension_fails)
{
    uint8_t src[2 * HOSTILE_N];
    tf_buf enc = { 0 };
    hostile_sample(src, &enc);
    for (size_t cut = 0; cut < enc.len; cut++)
        ck_assert_msg(decode(TF_DT_BF16, enc.data, cut, NULL, sizeof src) == -1,
                      "accepted the payload cut to %zu of %zu bytes", cut, enc.len);
    tf_buf_put(&enc, "x", 1);
    ck_assert_int_eq(decode(TF_DT_BF16, enc.data, enc.len, NULL, sizeof src), -1);
    tf_buf_free(&enc);
}
END_TEST

/* Each byte of the payload changed, one at a time, to a few values: a
 * decode either fails with a message or fills the output; never a crash
 * or a read past the payload (ASan). The framing bytes must fail. */
START_TEST(corrupt_bytes_fail_cleanly)
{
    uint8_t src[2 * HOSTILE_N], out[2 * HOSTILE_N];
    tf_buf enc = { 0 };
    hostile_sample(src, &enc);
    static const uint8_t values[] = { 0x00, 0x01, 0x7f, 0x80, 0xff };
    for (size_t at = 0; at < enc.len; at += at < 8 || at > 4 + HOSTILE_N ? 1 : 97)
        for (size_t v = 0; v < ARRAY_LEN(values); v++) {
            uint8_t keep = enc.data[at];
            if (keep == values[v])
                continue;
            enc.data[at] = values[v];
            int rc = decode(TF_DT_BF16, enc.data, enc.len, out, sizeof src);
            if (at < 4 || at == 4 + HOSTILE_N) /* kinds, lengths, coding */
                ck_assert_msg(rc == -1, "byte %zu = 0x%02x decoded", at, values[v]);
            enc.data[at] = keep;
        }
    tf_buf_free(&enc);
}
END_TEST

/* Framing out of range: an unknown plane kind or literal coding, a body
 * length past the payload or too large for any, a const plane cut. */
START_TEST(bad_framing_fails)
{
    const uint8_t n = 16; /* BF16 elements: 32 bytes */
    uint8_t p[64];
    /* kind 2 */
    memset(p, 0, sizeof p);
    p[0] = 2;
    ck_assert_int_eq(decode(TF_DT_BF16, p, 4, NULL, 2 * n), -1);
    /* body length 2^63: varint of 9 bytes */
    p[0] = 1;
    memset(p + 1, 0xff, 8);
    p[9] = 0x7f;
    ck_assert_int_eq(decode(TF_DT_BF16, p, sizeof p, NULL, 2 * n), -1);
    /* a literal of an unknown coding */
    p[0] = 1;
    p[1] = 1 + n;
    p[2] = 9;
    ck_assert_int_eq(decode(TF_DT_BF16, p, 3 + n + 2, NULL, 2 * n), -1);
    /* a raw literal one word short, then a const plane */
    p[1] = n;
    p[2] = TF_PROG_CODE_RAW;
    p[2 + n] = 0;
    p[3 + n] = 0;
    ck_assert_int_eq(decode(TF_DT_BF16, p, 4 + n, NULL, 2 * n), -1);
    /* two const planes decode; cut, they do not */
    const uint8_t two[4] = { 0, 0x12, 0, 0x34 };
    uint8_t out[2 * 16];
    ck_assert_int_eq(decode(TF_DT_BF16, two, 4, out, 2 * n), 0);
    for (unsigned i = 0; i < n; i++) /* rotated 0x3412, rotated back */
        ck_assert_uint_eq(tf_le16_get(out + 2 * i), 0x1a09);
    ck_assert_int_eq(decode(TF_DT_BF16, two, 3, NULL, 2 * n), -1);
}
END_TEST

/* A Huffman table that is no prefix code, lengths over the limit, and
 * stream lengths past the body. */
START_TEST(bad_huffman_table_fails)
{
    uint8_t src[2 * HOSTILE_N];
    tf_buf enc = { 0 };
    hostile_sample(src, &enc);
    const size_t lit = 4 + HOSTILE_N; /* the exponent plane */
    ck_assert_uint_eq(enc.data[lit], 1);
    size_t at = lit + 1;
    while (enc.data[at] & 0x80) /* body length */
        at++;
    at++;
    ck_assert_uint_eq(enc.data[at], TF_PROG_CODE_HUFF4);
    const size_t table = at + 1; /* varint first, varint count, nibbles */
    uint8_t *bad = exact_copy(enc.data, enc.len);
    size_t nibbles = table + 2;
    ck_assert_uint_lt(enc.data[table], 0x80);
    ck_assert_uint_lt(enc.data[table + 1], 0x80);
    bad[nibbles] = 0x11; /* two codes of one bit: Kraft sum full at once */
    bad[nibbles + 1] = 0x11;
    ck_assert_int_eq(decode(TF_DT_BF16, bad, enc.len, NULL, sizeof src), -1);
    memcpy(bad, enc.data, enc.len);
    bad[nibbles] = 0xff; /* length 15 */
    ck_assert_int_eq(decode(TF_DT_BF16, bad, enc.len, NULL, sizeof src), -1);
    memcpy(bad, enc.data, enc.len);
    bad[table + 1] = 0; /* no symbols */
    ck_assert_int_eq(decode(TF_DT_BF16, bad, enc.len, NULL, sizeof src), -1);
    free(bad);
    tf_buf_free(&enc);
}
END_TEST

/* ---- the newest checkpoint's codec --------------------------------------- */

START_TEST(newest_keyframe_codec_per_dtype)
{
    for (unsigned dtype = 0; dtype < TF_DT_COUNT; dtype++) {
        tf_codec_id id = tf_codec_newest_keyframe((uint8_t)dtype);
        const tf_codec *c = tf_codec_get(id);
        ck_assert_ptr_nonnull(c);
        ck_assert(!c->delta && !c->needs_model && !c->fit);
        if (tf_keyframe_dtype(dtype))
            ck_assert_uint_eq(id, TF_CODEC_KEYFRAME);
        else
            ck_assert_uint_ne(id, TF_CODEC_KEYFRAME);
        /* it takes a chunk of the dtype */
        const size_t w = elem_size(dtype), len = 64 * w;
        uint8_t src[64 * 8], out[64 * 8];
        rng_state = 71 + dtype;
        fill_random(src, len);
        tf_codec_ctx ctx = { .dtype = dtype };
        tf_buf enc = { 0 };
        tf_error e = { 0 };
        ck_assert_msg(c->encode(src, len, &ctx, &enc, &e) == 0, "%s on dtype %u: %s", c->name,
                      dtype, e.msg);
        ck_assert_int_eq(c->decode(enc.data, enc.len, &ctx, out, len, &e), 0);
        ck_assert(memcmp(out, src, len) == 0);
        tf_buf_free(&enc);
    }
    /* keyframe does not compete for chunks (the writer stores it where
     * it asks for it) */
    ck_assert_ptr_null(tf_codec_keyframe.standalone_for);
}
END_TEST

static Suite *keyframe_suite(void)
{
    Suite *s = suite_create("keyframe");
    TCase *rt = tcase_create("round trip");
    tcase_set_timeout(rt, 120);
    tcase_add_loop_test(rt, weights_round_trip_and_shrink, 0, ARRAY_LEN(kf_dtypes));
    tcase_add_loop_test(rt, constant_planes_round_trip, 0, ARRAY_LEN(kf_dtypes));
    tcase_add_loop_test(rt, random_bytes_stay_bounded, 0, ARRAY_LEN(kf_dtypes));
    tcase_add_loop_test(rt, simd_levels_agree, 0, ARRAY_LEN(kf_dtypes));
    tcase_add_test(rt, other_dtypes_are_refused);
    suite_add_tcase(s, rt);
    TCase *bad = tcase_create("hostile");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, every_truncation_and_extension_fails);
    tcase_add_test(bad, corrupt_bytes_fail_cleanly);
    tcase_add_test(bad, bad_framing_fails);
    tcase_add_test(bad, bad_huffman_table_fails);
    suite_add_tcase(s, bad);
    TCase *choice = tcase_create("choice");
    tcase_add_test(choice, newest_keyframe_codec_per_dtype);
    suite_add_tcase(s, choice);
    return s;
}

int main(void)
{
    return run_suite(keyframe_suite());
}
