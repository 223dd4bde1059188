/* ULPack codec: the transform, bit-exact round trips for every float
 * dtype and every kind of bit pattern, chunking and determinism, and
 * refusal of hostile models and payloads. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/ulp/ulp.h"
#include "common/hash.h"
#include "common/dtype.h"
#include "common/simd.h"

static uint64_t make_float(unsigned dtype, uint64_t sign, uint64_t exp, uint64_t man)
{
    const tf_dtype_info *d = tf_dtype_get(dtype);
    return sign << (d->exp_bits + d->man_bits) | exp << d->man_bits | man;
}

/* Signed zeros, smallest and largest subnormals, infinities, NaNs with
 * payloads, smallest and largest normals, both signs. */
static size_t special_values(unsigned dtype, uint64_t *out)
{
    const tf_dtype_info *d = tf_dtype_get(dtype);
    uint64_t exp_max = (1ull << d->exp_bits) - 1, man_max = (1ull << d->man_bits) - 1;
    size_t n = 0;
    for (uint64_t sign = 0; sign < 2; sign++) {
        out[n++] = make_float(dtype, sign, 0, 0);
        out[n++] = make_float(dtype, sign, 0, 1);
        out[n++] = make_float(dtype, sign, 0, man_max);
        out[n++] = make_float(dtype, sign, exp_max, 0);
        out[n++] = make_float(dtype, sign, exp_max, 1);
        out[n++] = make_float(dtype, sign, exp_max, man_max);
        out[n++] = make_float(dtype, sign, exp_max, 1ull << (d->man_bits - 1));
        out[n++] = make_float(dtype, sign, 1, 0);
        out[n++] = make_float(dtype, sign, exp_max - 1, man_max);
    }
    return n;
}

/* A weight-like value: random sign and mantissa, exponent in a narrow
 * band below 1 (or anywhere when the format has few exponents). */
static uint64_t weight_like(unsigned dtype)
{
    const tf_dtype_info *d = tf_dtype_get(dtype);
    uint64_t bias = (1ull << (d->exp_bits - 1)) - 1;
    uint64_t band = bias > 12 ? 12 : bias;
    uint64_t exp = bias - 1 - rng_next() % band;
    return make_float(dtype, rng_next() & 1, exp, rng_next() & ((1ull << d->man_bits) - 1));
}

/* A target close to r in rank: a few ULPs mostly, now and then far. */
static uint64_t step_from(uint64_t r, unsigned dtype)
{
    unsigned width = 8 * tf_dtype_get(dtype)->size;
    uint64_t mask = tf_ulp_mask(width);
    uint64_t roll = rng_next() % 100;
    int64_t step = roll < 70 ? (int64_t)(rng_next() % 9) - 4
                 : roll < 95 ? (int64_t)(rng_next() % 2001) - 1000
                             : (int64_t)(rng_next() & mask);
    return tf_ulp_unkey((tf_ulp_key(r, width) + (uint64_t)step) & mask, width);
}

typedef enum { PAT_RANDOM, PAT_SPECIAL, PAT_TRAJECTORY, PAT_SAME } pattern;

/* Fills target and reference with n elements of dtype. */
static void make_pair(unsigned dtype, pattern pat, size_t n, uint64_t seed, uint8_t *x, uint8_t *r)
{
    unsigned size = tf_dtype_get(dtype)->size;
    uint64_t mask = tf_ulp_mask(8 * size), specials[32];
    size_t n_special = special_values(dtype, specials);
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t rv, xv;
        switch (pat) {
        case PAT_RANDOM:
            rv = rng_next() & mask;
            xv = rng_next() & mask;
            break;
        case PAT_SPECIAL:
            rv = rng_next() % 3 ? specials[rng_next() % n_special] : rng_next() & mask;
            xv = rng_next() % 3 ? specials[rng_next() % n_special] : step_from(rv, dtype);
            break;
        case PAT_TRAJECTORY:
            rv = weight_like(dtype);
            xv = step_from(rv, dtype);
            break;
        default:
            rv = xv = weight_like(dtype);
            break;
        }
        test_put_elem(r + i * size, size, rv);
        test_put_elem(x + i * size, size, xv);
    }
}

static tf_codec_ctx ctx_for(unsigned dtype, const uint8_t *ref, size_t len, const tf_buf *model)
{
    return (tf_codec_ctx){ .dtype = dtype, .ref = ref, .ref_len = len,
                           .model = model ? model->data : NULL,
                           .model_len = model ? model->len : 0 };
}

static void fit(unsigned dtype, const uint8_t *x, const uint8_t *r, size_t len, tf_buf *model)
{
    tf_codec_ctx ctx = ctx_for(dtype, r, len, NULL);
    tf_error e;
    *model = (tf_buf){ 0 };
    ck_assert_msg(tf_codec_ulp.fit(x, len, &ctx, model, &e) == 0, "%s", e.msg);
}

static void encode(unsigned dtype, const uint8_t *x, const uint8_t *r, size_t len,
                   const tf_buf *model, tf_buf *enc)
{
    tf_codec_ctx ctx = ctx_for(dtype, r, len, model);
    tf_error e;
    ck_assert_msg(tf_codec_ulp.encode(x, len, &ctx, enc, &e) == 0, "%s", e.msg);
}

/* Decodes from exactly sized copies of payload and model, so that ASan
 * catches any read past either. */
static int decode_copy(unsigned dtype, const uint8_t *enc, size_t enc_len, const uint8_t *r,
                       const uint8_t *model, size_t model_len, uint8_t *dst, size_t len)
{
    uint8_t *enc_copy = malloc(enc_len ? enc_len : 1), *model_copy = malloc(model_len + 1);
    ck_assert(enc_copy && model_copy);
    if (enc_len)
        memcpy(enc_copy, enc, enc_len);
    memcpy(model_copy, model, model_len);
    tf_codec_ctx ctx = { .dtype = dtype, .ref = r, .ref_len = len,
                         .model = model_copy, .model_len = model_len };
    tf_error e;
    int rc = tf_codec_ulp.decode(enc_copy, enc_len, &ctx, dst, len, &e);
    if (rc < 0)
        ck_assert_msg(e.errnum == EIO, "decode failed with errno %d: %s", e.errnum, e.msg);
    free(enc_copy);
    free(model_copy);
    return rc;
}

/* A model as the given version: version 1 (release 1: one rANS stream a
 * chunk) has the same bytes but the first, and encoding with it writes
 * release 1's chunks. */
static void set_model_version(tf_buf *model, uint8_t version)
{
    model->data[0] = version;
}

/* Fits, encodes and decodes x against reference r, with a model of each
 * version, decoding at every SIMD level: the same len bytes must come
 * back (what names the case in a failure). */
static void check_roundtrip(unsigned dtype, const uint8_t *x, const uint8_t *r, size_t len,
                            const char *what)
{
    static const tf_simd_level levels[] = { TF_SIMD_NONE, TF_SIMD_AVX2, TF_SIMD_AVX512 };
    uint8_t *got = malloc(len + 1);
    tf_buf model;
    fit(dtype, x, r, len, &model);
    for (uint8_t version = 1; version <= 2; version++) {
        tf_buf enc = { 0 };
        set_model_version(&model, version);
        encode(dtype, x, r, len, &model, &enc);
        for (size_t l = 0; l < ARRAY_LEN(levels); l++) {
            tf_simd_level_cap(levels[l]);
            int rc = decode_copy(dtype, enc.data, enc.len, r, model.data, model.len, got, len);
            tf_simd_level_cap(TF_SIMD_AVX512);
            ck_assert_msg(rc == 0, "%s, model version %u, SIMD level %d: decoding failed", what,
                          version, (int)levels[l]);
            ck_assert_msg(len == 0 || memcmp(got, x, len) == 0,
                          "%s, model version %u, SIMD level %d: other bytes", what, version,
                          (int)levels[l]);
        }
        tf_buf_free(&enc);
    }
    tf_buf_free(&model);
    free(got);
}

static void roundtrip(unsigned dtype, pattern pat, size_t n, uint64_t seed)
{
    size_t len = n * tf_dtype_get(dtype)->size;
    uint8_t *x = malloc(len + 1), *r = malloc(len + 1);
    make_pair(dtype, pat, n, seed, x, r);
    char what[64];
    snprintf(what, sizeof what, "dtype %u pattern %d n %zu", dtype, pat, n);
    check_roundtrip(dtype, x, r, len, what);
    free(x);
    free(r);
}

START_TEST(test_key_is_monotone)
{
    /* Walking up the key space walks up the reals, through -0 < +0. */
    const float ordered[] = { -__builtin_inff(), -3.5f, -1e-40f, -0.0f, 0.0f,
                              1e-45f, 1e-38f, 1.0f, 1.0000001f, __builtin_inff() };
    uint64_t prev = 0;
    for (size_t i = 0; i < sizeof ordered / sizeof ordered[0]; i++) {
        uint32_t bits;
        memcpy(&bits, &ordered[i], 4);
        uint64_t k = tf_ulp_key(bits, 32);
        ck_assert(i == 0 || k > prev);
        ck_assert_uint_eq(tf_ulp_unkey(k, 32), bits);
        prev = k;
    }
    ck_assert_uint_eq(tf_ulp_key(0x80000000u, 32) + 1, tf_ulp_key(0, 32));
}
END_TEST

START_TEST(test_residual_values)
{
    const unsigned w = 16;
    /* ZigZag: 0, -1, +1, -2, +2 -> 0, 1, 2, 3, 4. */
    ck_assert_uint_eq(tf_ulp_residual(0x3f80, 0x3f80, w), 0);
    ck_assert_uint_eq(tf_ulp_residual(0x3f7f, 0x3f80, w), 1);
    ck_assert_uint_eq(tf_ulp_residual(0x3f81, 0x3f80, w), 2);
    ck_assert_uint_eq(tf_ulp_residual(0x3f7e, 0x3f80, w), 3);
    ck_assert_uint_eq(tf_ulp_residual(0x3f82, 0x3f80, w), 4);
    /* -0 to +0 is one step up. The key space is a ring: the top key
     * (largest positive NaN) sits one step below the bottom one (largest
     * negative NaN), and half the ring away is the largest residual. */
    ck_assert_uint_eq(tf_ulp_residual(0x0000, 0x8000, w), 2);
    ck_assert_uint_eq(tf_ulp_residual(0x7fff, 0xffff, w), 1);
    ck_assert_uint_eq(tf_ulp_residual(0x0000, 0xffff, w), 0xffff);
    rng_state = 1;
    for (unsigned width = 8; width <= 64; width *= 2) {
        uint64_t m = tf_ulp_mask(width);
        for (int i = 0; i < 10000; i++) {
            uint64_t x = rng_next() & m, r = rng_next() & m;
            uint64_t z = tf_ulp_residual(x, r, width);
            ck_assert_uint_le(z, m);
            ck_assert_uint_eq(tf_ulp_unresidual(z, r, width), x);
        }
    }
}
END_TEST

START_TEST(test_symbol_split)
{
    /* (b, q1, q2) and the raw bits rebuild every residual length. */
    rng_state = 2;
    for (unsigned width = 8; width <= 64; width *= 2) {
        for (unsigned b = 0; b <= width; b++) {
            for (int i = 0; i < 50; i++) {
                uint64_t z = b == 0 ? 0 : (1ull << (b - 1)) | (rng_next() & tf_ulp_mask(b - 1));
                unsigned n_raw, n_raw2;
                unsigned sym = tf_ulp_symbol(z, &n_raw);
                ck_assert_uint_lt(sym, tf_ulp_symbol_count(width));
                ck_assert_uint_eq(n_raw, b > 3 ? b - 3 : 0);
                uint64_t lead = tf_ulp_symbol_lead(sym, &n_raw2);
                ck_assert_uint_eq(n_raw2, n_raw);
                ck_assert_uint_eq(lead << n_raw | (z & tf_ulp_mask(n_raw)), z);
            }
        }
    }
}
END_TEST

START_TEST(test_roundtrip_all_dtypes)
{
    /* from 2^15 elements two streams, the last round ending in each */
    const size_t sizes[] = { 0, 1, 2, 7, 8, 9, 17, 1000, 32775, 32789, 65537 };
    const pattern pats[] = { PAT_RANDOM, PAT_SPECIAL, PAT_TRAJECTORY, PAT_SAME };
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++)
        for (size_t p = 0; p < 4; p++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                roundtrip(test_float_dtypes[d], pats[p], sizes[s], 1000 * d + 100 * p + s);
}
END_TEST

START_TEST(test_raw_tail_of_every_length)
{
    /* Chunks of every small length, residuals of every size: the last
     * raw bits of a chunk, wherever they fall in a byte, are written
     * (the heap is dirtied first, so that bytes left unwritten by the
     * encoder would show). */
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++) {
        for (size_t n = 1; n <= 80; n++) {
            for (uint64_t seed = 0; seed < 3; seed++) {
                size_t len = n * tf_dtype_get(test_float_dtypes[d])->size;
                uint8_t *dirty = malloc(4 * len + 64);
                memset(dirty, 0xa5, 4 * len + 64);
                free(dirty);
                roundtrip(test_float_dtypes[d], seed == 2 ? PAT_SPECIAL : PAT_RANDOM, n,
                          5000 + 100 * n + seed);
            }
        }
    }
}
END_TEST

START_TEST(test_raw_bits_that_run_out_early)
{
    /* Residuals with raw bits, then none (elements equal to the
     * reference): the vector loops stop for want of raw bytes long before
     * the end of the chunk, and the rest decodes element by element. */
    const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F16, TF_DT_F32 };
    const size_t n = 6000, cuts[] = { 16, 100, 1000, 3000, 5990 };
    for (size_t d = 0; d < 3; d++) {
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            size_t size = tf_dtype_get(dtypes[d])->size, len = n * size, k = cuts[c] * size;
            uint8_t *x = malloc(len), *r = malloc(len);
            make_pair(dtypes[d], c % 2 ? PAT_RANDOM : PAT_TRAJECTORY, cuts[c], 40 + c, x, r);
            make_pair(dtypes[d], PAT_SAME, n - cuts[c], 50 + c, x + k, r + k);
            char what[64];
            snprintf(what, sizeof what, "dtype %u cut %zu", dtypes[d], cuts[c]);
            check_roundtrip(dtypes[d], x, r, len, what);
            free(x);
            free(r);
        }
    }
}
END_TEST

START_TEST(test_every_bit_pattern_8bit)
{
    /* All 256 x 256 (target, reference) pairs of both 8-bit formats. */
    const unsigned dtypes[] = { TF_DT_F8_E4M3, TF_DT_F8_E5M2 };
    uint8_t *x = malloc(65536), *r = malloc(65536);
    for (size_t i = 0; i < 65536; i++) {
        x[i] = (uint8_t)i;
        r[i] = (uint8_t)(i >> 8);
    }
    for (size_t d = 0; d < 2; d++)
        check_roundtrip(dtypes[d], x, r, 65536, tf_dtype_get(dtypes[d])->name);
    free(x);
    free(r);
}
END_TEST

START_TEST(test_same_as_reference_is_tiny)
{
    /* z = 0 everywhere: every row has one symbol and costs no bits; what
     * is left are the stream headers (length, lane count, 16 lane states;
     * two streams from 2^15 elements, one with a single lane for small
     * chunks). */
    const size_t n = 100000, len = 2 * n;
    uint8_t *x = malloc(len), *r = malloc(len);
    make_pair(TF_DT_BF16, PAT_SAME, n, 5, x, r);
    tf_buf model, enc = { 0 };
    fit(TF_DT_BF16, x, r, len, &model);
    encode(TF_DT_BF16, x, r, len, &model, &enc);
    ck_assert_uint_eq(enc.len, 2 * (1 + 1 + 4 * 16));
    tf_buf small = { 0 };
    encode(TF_DT_BF16, x, r, 2 * 100, &model, &small);
    ck_assert_uint_eq(small.len, 1 + 1 + 4);
    tf_buf_free(&small);
    tf_buf_free(&model);
    tf_buf_free(&enc);
    free(x);
    free(r);
}
END_TEST

START_TEST(test_chunks_decode_alone_and_encode_deterministically)
{
    /* A model fit on the whole tensor; each chunk encoded as part of a
     * chunk-by-chunk pass over the tensor must be byte-identical to the
     * chunk encoded on its own, and decode on its own. */
    const unsigned dtype = TF_DT_F32;
    const size_t n = 50000, chunk = 4096, size = 4, len = n * size;
    uint8_t *x = malloc(len), *r = malloc(len), *got = malloc(chunk * size);
    make_pair(dtype, PAT_TRAJECTORY, n, 6, x, r);
    tf_buf model, all = { 0 };
    fit(dtype, x, r, len, &model);
    size_t offsets[64], n_chunks = 0;
    for (size_t at = 0; at < n; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk;
        offsets[n_chunks++] = all.len;
        encode(dtype, x + at * size, r + at * size, k * size, &model, &all);
    }
    offsets[n_chunks] = all.len;
    for (size_t c = 0; c < n_chunks; c++) {
        size_t at = c * chunk, k = n - at < chunk ? n - at : chunk;
        tf_buf alone = { 0 };
        encode(dtype, x + at * size, r + at * size, k * size, &model, &alone);
        ck_assert_uint_eq(alone.len, offsets[c + 1] - offsets[c]);
        ck_assert(memcmp(alone.data, all.data + offsets[c], alone.len) == 0);
        ck_assert_int_eq(decode_copy(dtype, alone.data, alone.len, r + at * size, model.data,
                                     model.len, got, k * size), 0);
        ck_assert(memcmp(got, x + at * size, k * size) == 0);
        tf_buf_free(&alone);
    }
    tf_buf_free(&model);
    tf_buf_free(&all);
    free(x);
    free(r);
    free(got);
}
END_TEST

/* fit_encode of a chunk is fit of the chunk and encode with its model,
 * byte for byte (the model too), for every dtype, pattern and a range
 * of sizes, with and without SIMD; what it refuses, fit refuses. */
START_TEST(test_fit_encode_is_fit_then_encode)
{
    static const size_t counts[] = { 0, 1, 15, 16, 17, 2047, 2048, 4099, 65536, 65537, 100003 };
    static const pattern pats[] = { PAT_RANDOM, PAT_SPECIAL, PAT_TRAJECTORY, PAT_SAME };
    unsigned dtype = test_float_dtypes[_i], size = tf_dtype_get(dtype)->size;
    for (int simd = 0; simd < 2; simd++) {
        tf_simd_level_cap(simd ? TF_SIMD_AVX512 : TF_SIMD_NONE);
        for (size_t c = 0; c < ARRAY_LEN(counts); c++)
            for (size_t p = 0; p < ARRAY_LEN(pats); p++) {
                size_t n = counts[c], len = n * size;
                uint8_t *x = malloc(len + 1), *r = malloc(len + 1);
                make_pair(dtype, pats[p], n, 50 + c + p, x, r);
                tf_buf model, enc = { 0 }, fused_model = { 0 }, fused = { 0 };
                fit(dtype, x, r, len, &model);
                encode(dtype, x, r, len, &model, &enc);
                tf_codec_ctx ctx = ctx_for(dtype, r, len, NULL);
                tf_error e;
                ck_assert_msg(tf_codec_ulp.fit_encode(x, len, &ctx, &fused_model, &fused, &e) == 0,
                              "%s", e.msg);
                ck_assert_msg(fused_model.len == model.len &&
                                  memcmp(fused_model.data, model.data, model.len) == 0,
                              "dtype %u n %zu pattern %zu: another model", dtype, n, p);
                ck_assert_msg(fused.len == enc.len && memcmp(fused.data, enc.data, enc.len) == 0,
                              "dtype %u n %zu pattern %zu: other bytes", dtype, n, p);
                tf_buf_free(&model);
                tf_buf_free(&enc);
                tf_buf_free(&fused_model);
                tf_buf_free(&fused);
                free(x);
                free(r);
            }
    }
    tf_simd_level_cap(TF_SIMD_AVX512);
    uint8_t x[8] = { 0 };
    tf_codec_ctx none = { .dtype = dtype };
    tf_buf model = { 0 }, out = { 0 };
    tf_error e;
    ck_assert_int_lt(tf_codec_ulp.fit_encode(x, size, &none, &model, &out, &e), 0);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_uint_eq(tf_codec_ulp.estimate(x, size, &none), SIZE_MAX);
}
END_TEST

/* A model prepared once (tf_codec.prepare) encodes each chunk that
 * shares it to the bytes encode gives with the model alone, for every
 * dtype, pattern and a range of chunk sizes (one lane and sixteen, one
 * stream and two), with and without SIMD; a bad model prepares to NULL. */
START_TEST(test_prepared_model_encodes_the_same)
{
    static const size_t counts[] = { 1, 15, 17, 1024, 2047, 2048, 4099, 32768, 40000 };
    static const pattern pats[] = { PAT_RANDOM, PAT_SPECIAL, PAT_TRAJECTORY };
    unsigned dtype = test_float_dtypes[_i], size = tf_dtype_get(dtype)->size;
    const size_t n = 100000, len = n * size;
    for (size_t p = 0; p < ARRAY_LEN(pats); p++) {
        uint8_t *x = malloc(len), *r = malloc(len);
        make_pair(dtype, pats[p], n, 90 + p, x, r);
        tf_buf model;
        fit(dtype, x, r, len, &model);
        tf_codec_ctx ctx = ctx_for(dtype, r, len, &model);
        void *prepared = tf_codec_ulp.prepare(&ctx);
        ck_assert_ptr_nonnull(prepared);
        for (int simd = 0; simd < 2; simd++) {
            tf_simd_level_cap(simd ? TF_SIMD_AVX512 : TF_SIMD_NONE);
            for (size_t c = 0, at = 0; c < ARRAY_LEN(counts); at += counts[c], c++) {
                const size_t k = counts[c] * size;
                tf_buf alone = { 0 }, with = { 0 };
                encode(dtype, x + at * size, r + at * size, k, &model, &alone);
                tf_codec_ctx chunk = ctx_for(dtype, r + at * size, k, &model);
                chunk.prepared = prepared;
                tf_error e;
                ck_assert_msg(tf_codec_ulp.encode(x + at * size, k, &chunk, &with, &e) == 0,
                              "%s", e.msg);
                ck_assert_msg(with.len == alone.len && memcmp(with.data, alone.data, with.len) == 0,
                              "dtype %u pattern %zu chunk of %zu: other bytes", dtype, p,
                              counts[c]);
                tf_buf_free(&alone);
                tf_buf_free(&with);
            }
        }
        tf_simd_level_cap(TF_SIMD_AVX512);
        tf_codec_ulp.prepared_free(prepared);
        ctx.model_len = model.len - 1;
        ck_assert_ptr_null(tf_codec_ulp.prepare(&ctx));
        ctx.model_len = model.len;
        ctx.dtype = dtype == TF_DT_F32 ? TF_DT_BF16 : TF_DT_F32;
        ck_assert_ptr_null(tf_codec_ulp.prepare(&ctx));
        tf_buf_free(&model);
        free(x);
        free(r);
    }
}
END_TEST

/* encode_pair of two chunks is encode of each, byte for byte, appended
 * after what the buffers held: side by side (one lane each, a prepared
 * model) or one after the other (no prepared model, more lanes, two
 * streams, F64), for every dtype. */
START_TEST(test_pair_encodes_the_same)
{
    static const size_t pairs[][2] = { { 1, 1 }, { 1024, 1024 }, { 1024, 1000 }, { 17, 2047 },
                                       { 2047, 2048 }, { 4099, 1024 }, { 40000, 1024 } };
    unsigned dtype = test_float_dtypes[_i], size = tf_dtype_get(dtype)->size;
    const size_t n = 100000, len = n * size;
    uint8_t *x = malloc(len), *r = malloc(len);
    make_pair(dtype, PAT_TRAJECTORY, n, 140, x, r);
    tf_buf model;
    fit(dtype, x, r, len, &model);
    tf_codec_ctx whole = ctx_for(dtype, r, len, &model);
    void *prepared = tf_codec_ulp.prepare(&whole);
    ck_assert_ptr_nonnull(prepared);
    for (int given = 0; given < 2; given++)
        for (size_t k = 0; k < ARRAY_LEN(pairs); k++) {
            const size_t at[2] = { 0, pairs[k][0] };
            const uint8_t *src[2];
            size_t bytes[2];
            tf_codec_ctx ctx[2];
            tf_buf want[2] = { 0 }, got[2] = { 0 };
            for (unsigned j = 0; j < 2; j++) {
                src[j] = x + at[j] * size;
                bytes[j] = pairs[k][j] * size;
                ctx[j] = ctx_for(dtype, r + at[j] * size, bytes[j], &model);
                ctx[j].prepared = given ? prepared : NULL;
                encode(dtype, src[j], ctx[j].ref, bytes[j], &model, &want[j]);
                tf_buf_put(&got[j], "held", 3 + j);
            }
            const tf_codec_ctx *const cp[2] = { &ctx[0], &ctx[1] };
            tf_buf *const out[2] = { &got[0], &got[1] };
            tf_error e;
            ck_assert_msg(tf_codec_ulp.encode_pair(src, bytes, cp, out, &e) == 0, "%s", e.msg);
            for (unsigned j = 0; j < 2; j++) {
                ck_assert_msg(got[j].len == 3 + j + want[j].len &&
                                  memcmp(got[j].data + 3 + j, want[j].data, want[j].len) == 0,
                              "dtype %u chunks of %zu and %zu, chunk %u: other bytes", dtype,
                              pairs[k][0], pairs[k][1], j);
                tf_buf_free(&want[j]);
                tf_buf_free(&got[j]);
            }
        }
    tf_codec_ulp.prepared_free(prepared);
    tf_buf_free(&model);
    /* A model that does not cover the second chunk: the pair fails and
     * neither buffer changes. */
    const size_t m = 1024, bytes = m * size;
    make_pair(dtype, PAT_SAME, m, 141, x, r);
    make_pair(dtype, PAT_RANDOM, m, 142, x + bytes, r + bytes);
    fit(dtype, x, r, bytes, &model);
    tf_codec_ctx ctx[2] = { ctx_for(dtype, r, bytes, &model),
                            ctx_for(dtype, r + bytes, bytes, &model) };
    ctx[0].prepared = ctx[1].prepared = prepared = tf_codec_ulp.prepare(&ctx[0]);
    const uint8_t *const src[2] = { x, x + bytes };
    const size_t lens[2] = { bytes, bytes };
    const tf_codec_ctx *const cp[2] = { &ctx[0], &ctx[1] };
    tf_buf got[2] = { 0 };
    tf_buf *const out[2] = { &got[0], &got[1] };
    tf_buf_put(&got[0], "held", 4);
    tf_error e;
    ck_assert_int_lt(tf_codec_ulp.encode_pair(src, lens, cp, out, &e), 0);
    ck_assert_uint_eq(got[0].len, 4);
    ck_assert_uint_eq(got[1].len, 0);
    tf_buf_free(&got[0]);
    tf_buf_free(&got[1]);
    tf_codec_ulp.prepared_free(prepared);
    tf_buf_free(&model);
    free(x);
    free(r);
}
END_TEST

/* A fit gives the same model with SIMD and without, for tensors small
 * enough that it counts in the reference's own range of exponents (found
 * by vectors, and the rest one by one), of every dtype and pattern. */
START_TEST(test_fit_same_with_and_without_simd)
{
    static const size_t counts[] = { 1, 7, 15, 16, 17, 31, 33, 1000, 4099, 65536 };
    static const pattern pats[] = { PAT_RANDOM, PAT_SPECIAL, PAT_TRAJECTORY, PAT_SAME };
    unsigned dtype = test_float_dtypes[_i], size = tf_dtype_get(dtype)->size;
    for (size_t c = 0; c < ARRAY_LEN(counts); c++)
        for (size_t p = 0; p < ARRAY_LEN(pats); p++) {
            size_t len = counts[c] * size;
            uint8_t *x = malloc(len), *r = malloc(len);
            make_pair(dtype, pats[p], counts[c], 120 + c + p, x, r);
            tf_buf plain, vector;
            tf_simd_level_cap(TF_SIMD_NONE);
            fit(dtype, x, r, len, &plain);
            tf_simd_level_cap(TF_SIMD_AVX512);
            fit(dtype, x, r, len, &vector);
            ck_assert_msg(plain.len == vector.len && memcmp(plain.data, vector.data, plain.len) == 0,
                          "dtype %u n %zu pattern %zu: another model", dtype, counts[c], p);
            tf_buf_free(&plain);
            tf_buf_free(&vector);
            free(x);
            free(r);
        }
}
END_TEST

/* The estimate from a chunk's sample lands near what fit_encode stores
 * (the chunk and its model). */
START_TEST(test_estimate_near_the_size)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32 };
    unsigned dtype = dtypes[_i], size = tf_dtype_get(dtype)->size;
    const size_t n = (size_t)1 << 20, len = n * size;
    uint8_t *x = malloc(len), *r = malloc(len);
    make_pair(dtype, PAT_TRAJECTORY, n, 31, x, r);
    tf_codec_ctx ctx = ctx_for(dtype, r, len, NULL);
    tf_buf model = { 0 }, enc = { 0 };
    tf_error e;
    ck_assert_msg(tf_codec_ulp.fit_encode(x, len, &ctx, &model, &enc, &e) == 0, "%s", e.msg);
    size_t est = tf_codec_ulp.estimate(x, len, &ctx), stored = enc.len + model.len;
    ck_assert_msg(est > stored * 97 / 100 && est < stored * 103 / 100, "estimate %zu, stored %zu",
                  est, stored);
    tf_buf_free(&model);
    tf_buf_free(&enc);
    free(x);
    free(r);
}
END_TEST

/* XXH3-64 of model || chunk || chunk ... for a fixed pseudo-random
 * tensor of each dtype, with a model of the given version, recorded from
 * the original implementation of that version: the coded bytes must
 * never change (archives exist), however fit and encode are optimized.
 * The tensor mixes trajectory-like steps, special values and random bit
 * patterns (wide residuals, every raw-bit length); its chunks include a
 * one-lane one, ragged 16-lane ones and one of two streams (version 2). */
static uint64_t pinned_output_hash(unsigned dtype, uint8_t version)
{
    const size_t parts[] = { 130000, 3000, 2001 }; /* elements per pattern */
    const pattern pats[] = { PAT_TRAJECTORY, PAT_SPECIAL, PAT_RANDOM };
    const size_t chunks[] = { 40000, 1500, 2049, 21452, 70000 };
    size_t size = tf_dtype_get(dtype)->size, n = parts[0] + parts[1] + parts[2], len = n * size;
    uint8_t *x = malloc(len), *r = malloc(len);
    ck_assert(x && r);
    for (size_t p = 0, at = 0; p < 3; at += parts[p], p++)
        make_pair(dtype, pats[p], parts[p], 77 + p, x + at * size, r + at * size);
    tf_buf model, all = { 0 };
    fit(dtype, x, r, len, &model);
    set_model_version(&model, version);
    tf_buf_put(&all, model.data, model.len);
    for (size_t c = 0, at = 0; c < ARRAY_LEN(chunks); at += chunks[c], c++)
        encode(dtype, x + at * size, r + at * size, chunks[c] * size, &model, &all);
    uint64_t h = tf_hash64(all.data, all.len);
    tf_buf_free(&model);
    tf_buf_free(&all);
    free(x);
    free(r);
    return h;
}

START_TEST(test_encode_output_is_pinned)
{
    static const struct {
        unsigned dtype;
        uint64_t hash[2]; /* model version 1, 2 */
    } pinned[] = {
        { TF_DT_BF16, { 0x16e6741d060869cdull, 0xe8fd3a28c9147ca6ull } },
        { TF_DT_F16, { 0xc993e6c2d82e3593ull, 0xb3500bf5fa802e5eull } },
        { TF_DT_F32, { 0xef4cd799ed90ede7ull, 0xd8124687b4aac972ull } },
        { TF_DT_F64, { 0x44ce2b54e9ba0190ull, 0x673b93dad7be5ea1ull } },
        { TF_DT_F8_E4M3, { 0x3591e8cbd15449b1ull, 0x804a008ce7133d48ull } },
        { TF_DT_F8_E5M2, { 0x904c8d26584a915eull, 0x304da3d7e04c94c2ull } },
    };
    /* every SIMD level the encoder has, from none up */
    static const tf_simd_level levels[] = { TF_SIMD_NONE, TF_SIMD_AVX2, TF_SIMD_AVX512 };
    unsigned differ = 0;
    for (size_t l = 0; l < ARRAY_LEN(levels); l++) {
        tf_simd_level_cap(levels[l]);
        for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
            for (uint8_t v = 1; v <= 2; v++) {
                uint64_t h = pinned_output_hash(pinned[i].dtype, v), want = pinned[i].hash[v - 1];
                if (h != want) /* every case reported, not just the first */
                    fprintf(stderr,
                            "%s, model version %u, at SIMD level %d: output hash 0x%016llx, "
                            "pinned 0x%016llx\n",
                            tf_dtype_get(pinned[i].dtype)->name, v, (int)levels[l],
                            (unsigned long long)h, (unsigned long long)want);
                differ += h != want;
            }
        }
    }
    tf_simd_level_cap(TF_SIMD_AVX512);
    ck_assert_msg(differ == 0, "%u codings differ from the pinned output", differ);
}
END_TEST

START_TEST(test_refuses_what_does_not_apply)
{
    uint8_t x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, r[8] = { 0 };
    tf_buf model = { 0 }, enc = { 0 };
    tf_error e;
    tf_codec_ctx ctx = ctx_for(TF_DT_I32, r, 8, NULL);
    ck_assert_int_eq(tf_codec_ulp.fit(x, 8, &ctx, &model, &e), -1);
    ck_assert_int_eq(tf_codec_ulp.encode(x, 8, &ctx, &enc, &e), -1);
    ctx = ctx_for(TF_DT_NONE, r, 8, NULL);
    ck_assert_int_eq(tf_codec_ulp.fit(x, 8, &ctx, &model, &e), -1);
    ctx = ctx_for(TF_DT_F32, NULL, 0, NULL);
    ck_assert_int_eq(tf_codec_ulp.fit(x, 8, &ctx, &model, &e), -1);
    ctx = ctx_for(TF_DT_F32, r, 4, NULL); /* reference of another length */
    ck_assert_int_eq(tf_codec_ulp.fit(x, 8, &ctx, &model, &e), -1);
    ctx = ctx_for(TF_DT_F32, r, 6, NULL); /* not a whole number of elements */
    ck_assert_int_eq(tf_codec_ulp.fit(x, 6, &ctx, &model, &e), -1);
    ctx = ctx_for(TF_DT_F32, r, 8, NULL); /* no model */
    ck_assert_int_eq(tf_codec_ulp.encode(x, 8, &ctx, &enc, &e), -1);
    ck_assert_uint_eq(model.len, 0);
    ck_assert_uint_eq(enc.len, 0);
}
END_TEST

START_TEST(test_uncovered_symbols)
{
    /* A model fit on other data: encoding a residual or a reference
     * exponent it never saw fails cleanly; decoding against a reference
     * whose exponents the model lacks is an error. */
    const size_t n = 1000, len = 2 * n;
    uint8_t *x = malloc(len), *r = malloc(len), *x2 = malloc(len), *got = malloc(len);
    make_pair(TF_DT_BF16, PAT_SAME, n, 7, x, r);
    tf_buf model, enc = { 0 };
    fit(TF_DT_BF16, x, r, len, &model);
    memcpy(x2, x, len);
    x2[10] ^= 1; /* a nonzero residual: never seen by the model */
    tf_codec_ctx ctx = ctx_for(TF_DT_BF16, r, len, &model);
    tf_error e;
    ck_assert_int_eq(tf_codec_ulp.encode(x2, len, &ctx, &enc, &e), -1);
    ck_assert_uint_eq(enc.len, 0);
    encode(TF_DT_BF16, x, r, len, &model, &enc);
    uint8_t *r2 = malloc(len);
    memcpy(r2, r, len);
    test_put_elem(r2 + 6, 2, make_float(TF_DT_BF16, 0, 200, 0)); /* exponent 200: no row */
    ctx = ctx_for(TF_DT_BF16, r2, len, &model);
    tf_buf other = { 0 };
    ck_assert_int_eq(tf_codec_ulp.encode(x, len, &ctx, &other, &e), -1);
    ck_assert_uint_eq(other.len, 0);
    tf_buf_free(&other);
    ck_assert_int_eq(decode_copy(TF_DT_BF16, enc.data, enc.len, r2, model.data, model.len, got,
                                 len), -1);
    tf_buf_free(&model);
    tf_buf_free(&enc);
    free(x);
    free(x2);
    free(r);
    free(r2);
    free(got);
}
END_TEST

/* A small trajectory-like chunk with its model and encoding. */
typedef struct {
    unsigned dtype;
    size_t len;
    uint8_t *x, *r, *got;
    tf_buf model, enc;
} fixture;

static fixture make_fixture(unsigned dtype, size_t n, uint64_t seed)
{
    fixture f = { .dtype = dtype, .len = n * tf_dtype_get(dtype)->size };
    f.x = malloc(f.len);
    f.r = malloc(f.len);
    f.got = malloc(f.len);
    make_pair(dtype, PAT_TRAJECTORY, n, seed, f.x, f.r);
    fit(dtype, f.x, f.r, f.len, &f.model);
    encode(dtype, f.x, f.r, f.len, &f.model, &f.enc);
    return f;
}

static void free_fixture(fixture *f)
{
    free(f->x);
    free(f->r);
    free(f->got);
    tf_buf_free(&f->model);
    tf_buf_free(&f->enc);
}

static int decode_fixture(fixture *f, const uint8_t *enc, size_t enc_len, const uint8_t *model,
                          size_t model_len)
{
    return decode_copy(f->dtype, enc, enc_len, f->r, model, model_len, f->got, f->len);
}

START_TEST(test_truncated_payload_fails)
{
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++) {
        fixture f = make_fixture(test_float_dtypes[d], 45, 8 + d);
        ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, f.model.data, f.model.len), 0);
        for (size_t cut = 0; cut < f.enc.len; cut++)
            ck_assert_msg(decode_fixture(&f, f.enc.data, cut, f.model.data, f.model.len) == -1,
                          "dtype %u cut %zu of %zu", f.dtype, cut, f.enc.len);
        for (size_t cut = 0; cut < f.model.len; cut++)
            ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, f.model.data, cut), -1);
        /* Trailing bytes after the raw bits, or a model for another dtype. */
        tf_buf longer = { 0 };
        tf_buf_put(&longer, f.enc.data, f.enc.len);
        tf_buf_u8(&longer, 0);
        ck_assert_int_eq(decode_fixture(&f, longer.data, longer.len, f.model.data, f.model.len),
                         -1);
        f.model.data[1] = (uint8_t)(f.dtype == TF_DT_F32 ? TF_DT_F16 : TF_DT_F32);
        ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, f.model.data, f.model.len),
                         -1);
        tf_buf_free(&longer);
        free_fixture(&f);
    }
}
END_TEST

START_TEST(test_large_chunks_refuse_corruption)
{
    /* Chunks big enough for the 16-lane fast paths (vector and scalar):
     * truncations fail, mutations never crash or read out of bounds. */
    const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F16, TF_DT_F32, TF_DT_F64 };
    for (size_t d = 0; d < 4; d++) {
        fixture f = make_fixture(dtypes[d], 5000, 20 + d);
        ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, f.model.data, f.model.len), 0);
        ck_assert(memcmp(f.got, f.x, f.len) == 0);
        for (size_t cut = 0; cut < f.enc.len; cut += cut + 600 < f.enc.len ? 37 : 1)
            ck_assert_msg(decode_fixture(&f, f.enc.data, cut, f.model.data, f.model.len) == -1,
                          "dtype %u cut %zu of %zu", f.dtype, cut, f.enc.len);
        uint8_t *bytes = malloc(f.enc.len);
        rng_state = 21;
        for (int trial = 0; trial < 200; trial++) {
            memcpy(bytes, f.enc.data, f.enc.len);
            for (int k = 0; k < 1 + trial % 4; k++)
                bytes[rng_next() % f.enc.len] ^= (uint8_t)(1 + rng_next() % 255);
            decode_fixture(&f, bytes, f.enc.len, f.model.data, f.model.len);
        }
        free(bytes);
        free_fixture(&f);
    }
}
END_TEST

START_TEST(test_few_bytes_for_many_elements)
{
    /* Chunks of 16-lane streams, one and two of them, that changed in a
     * few elements only: a few hundred bytes for thousands of elements,
     * too few for the vector loops' loads, which then decode them from a
     * padded copy. Every SIMD level decodes them; truncations fail;
     * mutations, which can send a lane past its stream's end, never crash
     * or read out of bounds. */
    const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F16, TF_DT_F32 };
    const size_t sizes[] = { 5000, 40000 }, changed = 40;
    for (size_t d = 0; d < ARRAY_LEN(dtypes); d++) {
        for (size_t s = 0; s < ARRAY_LEN(sizes); s++) {
            size_t size = tf_dtype_get(dtypes[d])->size, n = sizes[s], len = n * size;
            uint8_t *x = malloc(len), *r = malloc(len), *got = malloc(len);
            make_pair(dtypes[d], PAT_SAME, n, 60 + s, x, r);
            make_pair(dtypes[d], PAT_TRAJECTORY, changed, 70 + s, x + len / 2, r + len / 2);
            char what[64];
            snprintf(what, sizeof what, "dtype %u n %zu", dtypes[d], n);
            check_roundtrip(dtypes[d], x, r, len, what);
            tf_buf model, enc = { 0 };
            fit(dtypes[d], x, r, len, &model);
            encode(dtypes[d], x, r, len, &model, &enc);
            ck_assert_uint_lt(enc.len, 1000);
            for (size_t cut = 0; cut < enc.len; cut++)
                ck_assert_msg(decode_copy(dtypes[d], enc.data, cut, r, model.data, model.len,
                                          got, len) == -1,
                              "%s cut %zu of %zu", what, cut, enc.len);
            rng_state = 80 + s;
            for (int trial = 0; trial < 300; trial++) {
                tf_buf bytes = { 0 };
                tf_buf_put(&bytes, enc.data, enc.len);
                bytes.data[rng_next() % enc.len] ^= (uint8_t)(1 + rng_next() % 255);
                decode_copy(dtypes[d], bytes.data, bytes.len, r, model.data, model.len, got, len);
                tf_buf_free(&bytes);
            }
            tf_buf_free(&model);
            tf_buf_free(&enc);
            free(x);
            free(r);
            free(got);
        }
    }
}
END_TEST

START_TEST(test_random_payloads_fail)
{
    fixture f = make_fixture(TF_DT_BF16, 300, 9);
    uint8_t junk[700];
    rng_state = 10;
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = (size_t)(rng_next() % sizeof junk);
        for (size_t i = 0; i < n; i++)
            junk[i] = (uint8_t)rng_next();
        if (trial % 2 && n > 0)
            junk[0] = (uint8_t)(n - 1 < 0x7f ? n - 1 : 0x7f); /* a plausible length */
        ck_assert_int_eq(decode_fixture(&f, junk, n, f.model.data, f.model.len), -1);
    }
    free_fixture(&f);
}
END_TEST

START_TEST(test_mutations_never_crash)
{
    /* Flipped payload bits in the raw tail can decode (to other data);
     * anything else should fail. Nothing may crash or read out of bounds. */
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++) {
        fixture f = make_fixture(test_float_dtypes[d], 200, 11 + d);
        uint8_t *bytes = malloc(f.enc.len), *model = malloc(f.model.len);
        rng_state = 12;
        for (int trial = 0; trial < 1000; trial++) {
            memcpy(bytes, f.enc.data, f.enc.len);
            bytes[rng_next() % f.enc.len] ^= (uint8_t)(1u << (rng_next() % 8));
            decode_fixture(&f, bytes, f.enc.len, f.model.data, f.model.len);
        }
        for (size_t at = 0; at < f.model.len; at++) {
            for (unsigned bit = 0; bit < 8; bit++) {
                memcpy(model, f.model.data, f.model.len);
                model[at] ^= (uint8_t)(1u << bit);
                decode_fixture(&f, f.enc.data, f.enc.len, model, f.model.len);
            }
        }
        free(bytes);
        free(model);
        free_fixture(&f);
    }
}
END_TEST

START_TEST(test_bad_model_tables)
{
    fixture f = make_fixture(TF_DT_F16, 100, 13);
    const uint8_t *table = f.model.data + 2; /* after version and dtype */
    /* Versions there never were. */
    uint8_t *bad = malloc(f.model.len);
    memcpy(bad, f.model.data, f.model.len);
    const uint8_t never[] = { 0, 3 };
    for (size_t i = 0; i < ARRAY_LEN(never); i++) {
        bad[0] = never[i];
        ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, bad, f.model.len), -1);
    }
    free(bad);
    /* No rows at all, though the reference needs some. */
    const uint8_t empty[] = { 1, TF_DT_F16, table[0], 0 };
    ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, empty, sizeof empty), -1);
    /* Precision out of range. */
    const uint8_t bad_prec[] = { 1, TF_DT_F16, 12, 0 };
    ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, bad_prec, sizeof bad_prec), -1);
    /* A row whose frequencies overflow the total. */
    const uint8_t overflow[] = { 1, TF_DT_F16, 8, 1, 0, 0, 1, 0x80, 0x04 };
    ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, overflow, sizeof overflow), -1);
    /* Trailing bytes after the table. */
    tf_buf longer = { 0 };
    tf_buf_put(&longer, f.model.data, f.model.len);
    tf_buf_u8(&longer, 0);
    ck_assert_int_eq(decode_fixture(&f, f.enc.data, f.enc.len, longer.data, longer.len), -1);
    tf_buf_free(&longer);
    free_fixture(&f);
}
END_TEST

static Suite *ulp_suite(void)
{
    Suite *s = suite_create("ulp");
    TCase *tc = tcase_create("ulp");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_key_is_monotone);
    tcase_add_test(tc, test_residual_values);
    tcase_add_test(tc, test_symbol_split);
    tcase_add_test(tc, test_roundtrip_all_dtypes);
    tcase_add_test(tc, test_raw_tail_of_every_length);
    tcase_add_test(tc, test_raw_bits_that_run_out_early);
    tcase_add_test(tc, test_every_bit_pattern_8bit);
    tcase_add_test(tc, test_same_as_reference_is_tiny);
    tcase_add_test(tc, test_chunks_decode_alone_and_encode_deterministically);
    tcase_add_test(tc, test_encode_output_is_pinned);
    tcase_add_loop_test(tc, test_fit_encode_is_fit_then_encode, 0, N_TEST_FLOAT_DTYPES);
    tcase_add_loop_test(tc, test_prepared_model_encodes_the_same, 0, N_TEST_FLOAT_DTYPES);
    tcase_add_loop_test(tc, test_fit_same_with_and_without_simd, 0, N_TEST_FLOAT_DTYPES);
    tcase_add_loop_test(tc, test_pair_encodes_the_same, 0, N_TEST_FLOAT_DTYPES);
    tcase_add_loop_test(tc, test_estimate_near_the_size, 0, 2);
    tcase_add_test(tc, test_refuses_what_does_not_apply);
    tcase_add_test(tc, test_uncovered_symbols);
    tcase_add_test(tc, test_truncated_payload_fails);
    tcase_add_test(tc, test_large_chunks_refuse_corruption);
    tcase_add_test(tc, test_few_bytes_for_many_elements);
    tcase_add_test(tc, test_random_payloads_fail);
    tcase_add_test(tc, test_mutations_never_crash);
    tcase_add_test(tc, test_bad_model_tables);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ulp_suite());
}
