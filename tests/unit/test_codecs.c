/* The self-contained codecs (raw, zstd, bytegroup, keyframe) through the codec
 * table: bit-exact round trips on random bytes and on float arrays full of
 * special values, refusal of dtypes a codec does not take, and corrupt
 * payloads that must fail without reading past the bytes given. And what
 * the table's rows declare: a standalone codec for every dtype, a model
 * decode needs exactly where it says so, fit options taken from the
 * context. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/codec.h"
#include "codec/keyframe.h"
#include "codec/prog/prog.h"
#include "common/dtype.h"

#define MIB ((size_t)1 << 20)

static const unsigned self_contained_codecs[] = { TF_CODEC_RAW, TF_CODEC_ZSTD, TF_CODEC_BYTEGROUP,
                                                 TF_CODEC_KEYFRAME };

static const tf_codec *codec_of(unsigned id)
{
    const tf_codec *c = tf_codec_get(id);
    ck_assert_msg(c != NULL, "no codec with id %u", id);
    return c;
}

/* Whether a codec takes elements of this dtype. */
static int codec_takes(unsigned codec, unsigned dtype)
{
    if (codec == TF_CODEC_KEYFRAME)
        return tf_keyframe_dtype(dtype);
    if (codec != TF_CODEC_BYTEGROUP)
        return 1;
    return tf_dtype_is_float(dtype) && tf_dtype_get(dtype)->size >= 2;
}

/* Encodes src with the codec, decodes the result from an exactly sized
 * buffer into an exactly sized one and checks every bit. */
static void check_round_trip(unsigned codec_id, unsigned dtype, const uint8_t *src, size_t len)
{
    const tf_codec *codec = codec_of(codec_id);
    tf_codec_ctx ctx = { .dtype = dtype };
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    ck_assert_msg(codec->encode(src, len, &ctx, &enc, &e) == 0, "%s encode of %zu bytes: %s",
                  codec->name, len, e.msg);
    uint8_t *stored = exact_copy(enc.data, enc.len);
    uint8_t *out = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(out);
    memset(out, 0xa5, len);
    ck_assert_msg(codec->decode(stored, enc.len, &ctx, out, len, &e) == 0,
                  "%s decode of %zu bytes (dtype %u): %s", codec->name, len, dtype, e.msg);
    ck_assert_msg(len == 0 || memcmp(out, src, len) == 0, "%s round trip of %zu bytes differs",
                  codec->name, len);
    free(out);
    free(stored);
    tf_buf_free(&enc);
}

/* ---- random bytes -------------------------------------------------------- */

static const size_t random_sizes[] = { 0, 1, 2, 7, 12345, MIB + 1 };

/* Dtypes the random bytes are typed as: opaque, and floats of each width
 * (bytegroup takes only the latter, keyframe those of 2 and 4 bytes). */
static const unsigned random_dtypes[] = { TF_DT_NONE, TF_DT_U8, TF_DT_BF16, TF_DT_F32, TF_DT_F64 };

START_TEST(random_bytes_round_trip)
{
    unsigned codec = self_contained_codecs[_i];
    for (size_t k = 0; k < ARRAY_LEN(random_sizes); k++) {
        size_t len = random_sizes[k];
        uint8_t *src = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(src);
        rng_state = len;
        fill_random(src, len);
        for (size_t d = 0; d < ARRAY_LEN(random_dtypes); d++) {
            unsigned dtype = random_dtypes[d];
            if (codec_takes(codec, dtype)) /* whole elements only */
                check_round_trip(codec, dtype, src, len - len % tf_dtype_get(dtype)->size);
        }
        free(src);
    }
}
END_TEST

/* ---- float arrays with special values ------------------------------------ */

/* Bit patterns worth keeping exact, for a format with the given exponent
 * and mantissa widths: signed zeros, subnormals, the largest finite value,
 * infinities and NaNs with payloads (quiet, signalling, negative). In
 * F8_E4M3 (no infinities) the "infinity" pattern is an ordinary number;
 * exactness is all that matters here. */
static size_t special_patterns(unsigned exp_bits, unsigned man_bits, uint64_t out[16])
{
    uint64_t sign = (uint64_t)1 << (exp_bits + man_bits);
    uint64_t man = ((uint64_t)1 << man_bits) - 1;
    uint64_t exp = (((uint64_t)1 << exp_bits) - 1) << man_bits;
    uint64_t quiet = (uint64_t)1 << (man_bits - 1);
    size_t n = 0;
    out[n++] = 0;                       /* +0 */
    out[n++] = sign;                    /* -0 */
    out[n++] = 1;                       /* smallest subnormal */
    out[n++] = sign | man;              /* largest negative subnormal */
    out[n++] = (uint64_t)1 << man_bits; /* smallest normal */
    out[n++] = (exp - ((uint64_t)1 << man_bits)) | man; /* largest finite */
    out[n++] = exp;                     /* +inf */
    out[n++] = sign | exp;              /* -inf */
    out[n++] = exp | quiet;             /* quiet NaN */
    out[n++] = exp | 1;                 /* signalling NaN, payload 1 */
    out[n++] = exp | man;               /* NaN, all payload bits */
    out[n++] = sign | exp | quiet | ((man >> 1) & 0x5555555555555555ull); /* -NaN, mixed payload */
    return n;
}

/* n elements of dtype: the special patterns, then random bit patterns,
 * with specials sprinkled among them. */
static uint8_t *special_floats(unsigned dtype, size_t n)
{
    const tf_dtype_info *info = tf_dtype_get(dtype);
    uint64_t specials[16];
    size_t nspecial = special_patterns(info->exp_bits, info->man_bits, specials);
    uint64_t width_mask = info->size == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * info->size)) - 1;
    uint8_t *p = malloc(n * info->size + 1);
    ck_assert_ptr_nonnull(p);
    rng_state = dtype * 1000 + n;
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = i < nspecial ? specials[i]
                        : rng_next() % 4 == 0 ? specials[rng_next() % nspecial]
                        : rng_next() & width_mask;
        test_put_elem(p + i * info->size, info->size, bits);
    }
    return p;
}

static const size_t float_counts[] = { 0, 1, 12, 777, MIB + 1 };

/* One loop index per (codec, dtype) pair. */
START_TEST(special_floats_round_trip)
{
    unsigned codec = self_contained_codecs[_i / N_TEST_FLOAT_DTYPES];
    unsigned dtype = test_float_dtypes[_i % N_TEST_FLOAT_DTYPES];
    if (!codec_takes(codec, dtype))
        return; /* covered by bytegroup_refuses_other_dtypes */
    unsigned size = tf_dtype_get(dtype)->size;
    for (size_t k = 0; k < ARRAY_LEN(float_counts); k++) {
        uint8_t *src = special_floats(dtype, float_counts[k]);
        check_round_trip(codec, dtype, src, float_counts[k] * size);
        free(src);
    }
}
END_TEST

START_TEST(special_patterns_are_what_they_claim)
{
    /* The generator itself, on F32 and BF16 where the values are known. */
    uint64_t p[16];
    ck_assert_uint_eq(special_patterns(8, 23, p), 12);
    ck_assert_uint_eq(p[1], 0x80000000u);        /* -0 */
    ck_assert_uint_eq(p[5], 0x7f7fffffu);        /* FLT_MAX */
    ck_assert_uint_eq(p[6], 0x7f800000u);        /* +inf */
    ck_assert_uint_eq(p[8], 0x7fc00000u);        /* quiet NaN */
    special_patterns(8, 7, p);
    ck_assert_uint_eq(p[7], 0xff80u);            /* BF16 -inf */
    ck_assert_uint_eq(p[3], 0x807fu);            /* BF16 largest negative subnormal */
}
END_TEST

static const unsigned non_bytegroup_dtypes[] = {
    TF_DT_NONE, TF_DT_BOOL, TF_DT_U8, TF_DT_I8, TF_DT_I16, TF_DT_U16, TF_DT_I32,
    TF_DT_U32, TF_DT_I64, TF_DT_U64, TF_DT_F8_E4M3, TF_DT_F8_E5M2, TF_DT_COUNT, 255,
};

START_TEST(bytegroup_refuses_other_dtypes)
{
    const tf_codec *bg = codec_of(TF_CODEC_BYTEGROUP);
    tf_codec_ctx ctx = { .dtype = non_bytegroup_dtypes[_i] };
    uint8_t src[64], dst[64];
    rng_state = 5;
    fill_random(src, sizeof src);
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(bg->encode(src, sizeof src, &ctx, &enc, &e), -1);
    ck_assert_str_ne(e.msg, "");
    /* A payload that would decode fine as BF16 is refused for this dtype. */
    tf_codec_ctx bf16 = { .dtype = TF_DT_BF16 };
    ck_assert_int_eq(bg->encode(src, sizeof src, &bf16, &enc, &e), 0);
    e.msg[0] = '\0';
    ck_assert_int_eq(bg->decode(enc.data, enc.len, &ctx, dst, sizeof dst, &e), -1);
    ck_assert_str_ne(e.msg, "");
    tf_buf_free(&enc);
}
END_TEST

START_TEST(bytegroup_refuses_a_partial_element)
{
    const tf_codec *bg = codec_of(TF_CODEC_BYTEGROUP);
    tf_codec_ctx ctx = { .dtype = TF_DT_F32 };
    uint8_t src[7] = { 0 }, dst[7];
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(bg->encode(src, sizeof src, &ctx, &enc, &e), -1);
    ck_assert_int_eq(bg->decode(src, sizeof src, &ctx, dst, sizeof dst, &e), -1);
    tf_buf_free(&enc);
}
END_TEST

/* ---- corrupt payloads ---------------------------------------------------- */

/* Decodes enc (copied to an exactly sized buffer) into an exactly sized
 * buffer of len bytes; returns the decoder's result. */
static int decode_exact(const tf_codec *codec, unsigned dtype, const uint8_t *enc, size_t enc_len,
                        size_t len)
{
    tf_codec_ctx ctx = { .dtype = dtype };
    uint8_t *stored = exact_copy(enc, enc_len);
    uint8_t *dst = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(dst);
    tf_error e = { 0 };
    int rc = codec->decode(stored, enc_len, &ctx, dst, len, &e);
    if (rc < 0)
        ck_assert_msg(e.msg[0] != '\0', "%s failed without a message", codec->name);
    free(dst);
    free(stored);
    return rc;
}

/* A small, compressible float payload (so zstd emits real blocks). */
static void encode_sample(unsigned codec_id, size_t len, uint8_t *src, tf_buf *enc)
{
    rng_state = 77;
    for (size_t i = 0; i < len; i++)
        src[i] = (uint8_t)(i % 4 == 3 ? 0x3f : rng_next() % 8);
    tf_codec_ctx ctx = { .dtype = TF_DT_F32 };
    ck_assert_int_eq(codec_of(codec_id)->encode(src, len, &ctx, enc, NULL), 0);
}

START_TEST(every_truncation_fails)
{
    const tf_codec *codec = codec_of(self_contained_codecs[_i]);
    enum { LEN = 400 };
    uint8_t src[LEN];
    tf_buf enc = { 0 };
    encode_sample(codec->id, LEN, src, &enc);
    ck_assert_int_eq(decode_exact(codec, TF_DT_F32, enc.data, enc.len, LEN), 0);
    for (size_t cut = 0; cut < enc.len; cut++)
        ck_assert_msg(decode_exact(codec, TF_DT_F32, enc.data, cut, LEN) == -1,
                      "%s accepted the payload cut to %zu of %zu bytes", codec->name, cut, enc.len);
    tf_buf_free(&enc);
}
END_TEST

START_TEST(wrong_output_length_fails)
{
    const tf_codec *codec = codec_of(self_contained_codecs[_i]);
    enum { LEN = 400 };
    uint8_t src[LEN];
    tf_buf enc = { 0 };
    encode_sample(codec->id, LEN, src, &enc);
    static const size_t wrong[] = { 0, 4, LEN - 4, LEN + 4, 2 * LEN };
    for (size_t k = 0; k < ARRAY_LEN(wrong); k++)
        ck_assert_msg(decode_exact(codec, TF_DT_F32, enc.data, enc.len, wrong[k]) == -1,
                      "%s decoded %zu bytes into %zu", codec->name, (size_t)LEN, wrong[k]);
    tf_buf_free(&enc);
}
END_TEST

START_TEST(random_payloads_fail)
{
    const tf_codec *codec = codec_of(self_contained_codecs[_i]);
    enum { LEN = 256 };
    uint8_t junk[LEN + 64];
    rng_state = 4242;
    for (int trial = 0; trial < 500; trial++) {
        size_t n = (size_t)(rng_next() % sizeof junk);
        if (n == LEN)
            n++; /* raw keeps any LEN bytes: that is not corruption */
        fill_random(junk, n);
        ck_assert_msg(decode_exact(codec, TF_DT_F32, junk, n, LEN) == -1,
                      "%s accepted %zu random bytes", codec->name, n);
    }
}
END_TEST

/* Rewrites the frame content size of a single-segment zstd frame whose
 * content is under 256 bytes (one FCS byte right after the frame header
 * descriptor). */
static void set_frame_content_size(tf_buf *frame, uint8_t size)
{
    ck_assert_uint_ge(frame->len, 6);
    ck_assert_uint_eq(tf_le32_get(frame->data), 0xfd2fb528u); /* zstd magic */
    uint8_t fhd = frame->data[4];
    ck_assert_msg((fhd & 0x20) && (fhd >> 6) == 0 && (fhd & 3) == 0,
                  "frame header descriptor 0x%02x is not single segment, 1-byte FCS", fhd);
    frame->data[5] = size;
}

START_TEST(zstd_frame_declaring_the_wrong_size_fails)
{
    const tf_codec *zstd = codec_of(TF_CODEC_ZSTD);
    enum { LEN = 200 };
    uint8_t src[LEN];
    tf_buf enc = { 0 };
    encode_sample(TF_CODEC_ZSTD, LEN, src, &enc);
    ck_assert_uint_eq(enc.data[5], LEN);
    static const uint8_t lies[] = { LEN - 1, LEN + 1, 0, 255 };
    for (size_t k = 0; k < ARRAY_LEN(lies); k++) {
        set_frame_content_size(&enc, lies[k]);
        /* Asked for what the frame claims, and for what it really holds. */
        ck_assert_msg(decode_exact(zstd, TF_DT_NONE, enc.data, enc.len, lies[k]) == -1,
                      "frame claiming %u bytes decoded as %u", lies[k], lies[k]);
        ck_assert_msg(decode_exact(zstd, TF_DT_NONE, enc.data, enc.len, LEN) == -1,
                      "frame claiming %u bytes decoded as %u", lies[k], LEN);
    }
    set_frame_content_size(&enc, LEN);
    ck_assert_int_eq(decode_exact(zstd, TF_DT_NONE, enc.data, enc.len, LEN), 0);
    tf_buf_free(&enc);
}
END_TEST

/* ---- the codec table ----------------------------------------------------- */

START_TEST(codec_table_lookups)
{
    static const char *const names[] = { "raw", "zstd", "bytegroup", "ulp", "prog", "keyframe" };
    for (unsigned id = 0; id < ARRAY_LEN(names); id++) {
        const tf_codec *c = tf_codec_get(id);
        ck_assert_ptr_nonnull(c);
        ck_assert_uint_eq(c->id, id);
        ck_assert_str_eq(c->name, names[id]);
        ck_assert_ptr_eq(tf_codec_by_name(names[id]), c);
        ck_assert_ptr_nonnull(c->encode);
        ck_assert_ptr_nonnull(c->decode);
    }
    ck_assert_uint_eq(TF_CODEC_COUNT, ARRAY_LEN(names));
    for (unsigned k = 0; k < ARRAY_LEN(self_contained_codecs); k++)
        ck_assert(!codec_of(self_contained_codecs[k])->delta);
    ck_assert_ptr_null(tf_codec_get(TF_CODEC_COUNT));
    ck_assert_ptr_null(tf_codec_get(255));
    ck_assert_ptr_null(tf_codec_get(~0u));
    ck_assert_ptr_null(tf_codec_by_name(""));
    ck_assert_ptr_null(tf_codec_by_name("ZSTD"));
    ck_assert_ptr_null(tf_codec_by_name("zstd "));
    ck_assert_ptr_null(tf_codec_by_name("lz4"));
}
END_TEST

/* Every dtype has raw and one compressing codec that compete for its
 * chunks with nothing else to go on, and that one takes the dtype. */
START_TEST(every_dtype_has_one_standalone_codec)
{
    for (unsigned dtype = 0; dtype < TF_DT_COUNT; dtype++) {
        unsigned compressing = TF_CODEC_COUNT, count = 0;
        for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
            const tf_codec *c = codec_of(id);
            if (!c->standalone_for || !c->standalone_for(dtype))
                continue;
            count++;
            if (id != TF_CODEC_RAW)
                compressing = id;
        }
        ck_assert_msg(codec_of(TF_CODEC_RAW)->standalone_for(dtype), "raw skips dtype %u", dtype);
        ck_assert_msg(count == 2, "%u standalone codecs for dtype %u", count, dtype);
        uint8_t src[64];
        rng_state = dtype;
        fill_random(src, sizeof src);
        check_round_trip(compressing, dtype, src, sizeof src);
    }
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
        const tf_codec *c = codec_of(id);
        ck_assert_msg(!c->standalone_for || (!c->delta && !c->fit),
                      "%s needs more than a chunk, yet is standalone", c->name);
    }
}
END_TEST

/* float32 elements 0, 1, 2, ...: a tensor every codec with a fit step
 * takes (and the prog search finds a short program for). */
static uint8_t *counting_floats(size_t n)
{
    uint8_t *p = malloc(4 * n);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        float f = (float)i;
        memcpy(p + 4 * i, &f, 4);
    }
    return p;
}

/* Each codec with a fit step encodes a chunk with its model, and decode
 * fails without the model exactly when the codec says it needs it. */
START_TEST(decode_needs_the_model_as_declared)
{
    enum { N = 4096 };
    uint8_t *src = counting_floats(N), *ref = counting_floats(N), out[4 * N];
    ref[5] ^= 1;
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
        const tf_codec *c = codec_of(id);
        if (!c->fit)
            continue;
        tf_codec_ctx ctx = { .dtype = TF_DT_F32 };
        if (c->delta) {
            ctx.ref = ref;
            ctx.ref_len = 4 * N;
        }
        tf_buf model = { 0 }, enc = { 0 };
        tf_error e = { 0 };
        ck_assert_msg(c->fit(src, 4 * N, &ctx, &model, &e) == 0, "%s fit: %s", c->name, e.msg);
        ctx.model = model.data;
        ctx.model_len = model.len;
        ck_assert_msg(c->encode(src, 4 * N, &ctx, &enc, &e) == 0, "%s encode: %s", c->name,
                      e.msg);
        ck_assert_int_eq(c->decode(enc.data, enc.len, &ctx, out, sizeof out, &e), 0);
        ck_assert(memcmp(out, src, sizeof out) == 0);
        ctx.model = NULL;
        ctx.model_len = 0;
        memset(out, 0, sizeof out);
        int rc = c->decode(enc.data, enc.len, &ctx, out, sizeof out, &e);
        ck_assert_msg((rc < 0) == c->needs_model, "%s decoded %s its model", c->name,
                      rc < 0 ? "only with" : "without");
        ck_assert(rc < 0 || memcmp(out, src, sizeof out) == 0);
        tf_buf_free(&model);
        tf_buf_free(&enc);
    }
    free(src);
    free(ref);
}
END_TEST

/* prog's fit through the table searches with the options in
 * ctx->fit_opts: one expansion finds another program than the default
 * budget does. */
START_TEST(prog_fit_takes_its_options_from_the_context)
{
    enum { N = 4096 };
    uint8_t *src = counting_floats(N);
    tf_prog_fit_opts one = { .budget = 1 };
    tf_codec_ctx ctx = { .dtype = TF_DT_F32, .fit_opts = &one };
    tf_buf by_table = { 0 }, direct = { 0 }, by_default = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_codec_prog.fit(src, 4 * N, &ctx, &by_table, &e), 0);
    ck_assert_int_eq(tf_prog_fit(src, 4 * N, TF_DT_F32, &one, &direct, &e), 0);
    ck_assert_int_eq(tf_prog_fit(src, 4 * N, TF_DT_F32, NULL, &by_default, &e), 0);
    ck_assert(by_table.len == direct.len && memcmp(by_table.data, direct.data, direct.len) == 0);
    ck_assert(by_default.len != direct.len ||
              memcmp(by_default.data, direct.data, direct.len) != 0);
    tf_buf_free(&by_table);
    tf_buf_free(&direct);
    tf_buf_free(&by_default);
    free(src);
}
END_TEST

static Suite *codecs_suite(void)
{
    Suite *s = suite_create("codecs");
    TCase *rt = tcase_create("round trip");
    tcase_set_timeout(rt, 120);
    tcase_add_loop_test(rt, random_bytes_round_trip, 0, ARRAY_LEN(self_contained_codecs));
    tcase_add_loop_test(rt, special_floats_round_trip, 0,
                        ARRAY_LEN(self_contained_codecs) * N_TEST_FLOAT_DTYPES);
    tcase_add_test(rt, special_patterns_are_what_they_claim);
    tcase_add_loop_test(rt, bytegroup_refuses_other_dtypes, 0, ARRAY_LEN(non_bytegroup_dtypes));
    tcase_add_test(rt, bytegroup_refuses_a_partial_element);
    suite_add_tcase(s, rt);

    TCase *bad = tcase_create("corrupt");
    tcase_add_loop_test(bad, every_truncation_fails, 0, ARRAY_LEN(self_contained_codecs));
    tcase_add_loop_test(bad, wrong_output_length_fails, 0, ARRAY_LEN(self_contained_codecs));
    tcase_add_loop_test(bad, random_payloads_fail, 0, ARRAY_LEN(self_contained_codecs));
    tcase_add_test(bad, zstd_frame_declaring_the_wrong_size_fails);
    suite_add_tcase(s, bad);

    TCase *table = tcase_create("table");
    tcase_add_test(table, codec_table_lookups);
    tcase_add_test(table, every_dtype_has_one_standalone_codec);
    tcase_add_test(table, decode_needs_the_model_as_declared);
    tcase_add_test(table, prog_fit_takes_its_options_from_the_context);
    suite_add_tcase(s, table);
    return s;
}

int main(void)
{
    return run_suite(codecs_suite());
}
