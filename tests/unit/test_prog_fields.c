/* prog's fields path (codec/prog/prog_fields.h) and sampled fit:
 * bit-exact round trips of every float dtype at sizes around the
 * literals' segments, lanes and streams, through the codec's decoder,
 * the general executor and the decoder without SIMD; the same bytes
 * whatever SIMD the encoder may use; constant fields and chunks, a
 * mantissa's trailing zeros, exponents that predict their neighbours;
 * the sample's estimate near the size; malformed models refused; and
 * the sampled fit's choice between fields, a search and no program. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/prog/prog.h"
#include "codec/prog/prog_exec.h"
#include "codec/prog/prog_fields.h"
#include "codec/prog/prog_serialize.h"
#include "common/dtype.h"
#include "common/simd.h"

static unsigned elem(unsigned dtype)
{
    return tf_dtype_get(dtype)->size;
}

/* Roughly normal, scale 0.02: what trained weights look like. */
static double weight(void)
{
    double sum = 0;
    for (int k = 0; k < 12; k++)
        sum += (double)(rng_next() >> 11) / 9007199254740992.0;
    return (sum - 6) * 0.02;
}

/* The bits of a weight in dtype (the float8 ones: its top bits). */
static uint64_t weight_in(unsigned dtype)
{
    double x = weight();
    float f = (float)x;
    uint32_t u;
    uint64_t d;
    memcpy(&u, &f, 4);
    memcpy(&d, &x, 8);
    switch (dtype) {
    case TF_DT_F64: return d;
    case TF_DT_F32: return u;
    case TF_DT_BF16: return u >> 16;
    case TF_DT_F16: return (u >> 31) << 15 | ((u >> 23 & 0xff) - 112) << 10 | (u >> 13 & 0x3ff);
    default: return u >> 24;
    }
}

/* The sampled fit of src: fields, or (for few distinct values, as in
 * float8 weights) a searched template. */
static void sampled_model(unsigned dtype, const uint8_t *src, size_t len, tf_buf *model)
{
    tf_prog_fit_opts o = { .sampled = true };
    tf_error e = { 0 };
    model->len = 0;
    ck_assert_msg(tf_prog_fit(src, len, dtype, &o, model, &e) == 0, "fit: %s", e.msg);
}

/* The same, asserted to be fields. */
static void fields_model(unsigned dtype, const uint8_t *src, size_t len, tf_buf *model)
{
    sampled_model(dtype, src, len, model);
    ck_assert_uint_eq(model->data[0], TF_PROG_FIELDS_VERSION);
}

static void encode(const tf_buf *model, unsigned dtype, const uint8_t *src, size_t len,
                   tf_buf *enc)
{
    tf_codec_ctx ctx = { .dtype = dtype, .model = model->data, .model_len = model->len };
    tf_error e = { 0 };
    enc->len = 0;
    ck_assert_msg(tf_codec_prog.encode(src, len, &ctx, enc, &e) == 0, "encode %zu bytes of %s: %s",
                  len, tf_dtype_get(dtype)->name, e.msg);
}

/* Decodes enc three ways (the codec, the general executor, the codec
 * without SIMD) from an exactly sized copy; each must give src. */
static void check_decodes(const tf_buf *enc, unsigned dtype, const uint8_t *src, size_t len)
{
    uint8_t *stored = exact_copy(enc->data, enc->len), *out = malloc(len ? len : 1);
    tf_prog *p = malloc(sizeof *p);
    tf_codec_ctx ctx = { .dtype = dtype };
    tf_error e = { 0 };
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(p);
    for (int way = 0; way < 3; way++) {
        memset(out, 0xa5, len);
        int rc;
        if (way == 1) {
            rc = tf_prog_read(stored + 1, enc->len - 1, 8 * elem(dtype), len / elem(dtype), p, &e);
            if (rc == 0)
                rc = tf_prog_exec_general(p, out, &e);
        } else {
            if (way == 2)
                tf_simd_level_cap(TF_SIMD_NONE);
            rc = tf_codec_prog.decode(stored, enc->len, &ctx, out, len, &e);
            tf_simd_level_cap(TF_SIMD_AVX512);
        }
        ck_assert_msg(rc == 0, "decoding %zu bytes of %s (way %d): %s", len,
                      tf_dtype_get(dtype)->name, way, e.msg);
        ck_assert_msg(memcmp(out, src, len) == 0, "%zu bytes of %s differ (way %d)", len,
                      tf_dtype_get(dtype)->name, way);
    }
    free(p);
    free(out);
    free(stored);
}

/* Fits, encodes, checks the decodings, and that the encoder without SIMD
 * writes the same bytes; returns the chunk's size, its text in text. */
static size_t round_trip(unsigned dtype, const uint8_t *src, size_t len, char *text,
                         size_t text_size)
{
    tf_buf model = { 0 }, enc = { 0 }, plain = { 0 };
    sampled_model(dtype, src, len, &model);
    encode(&model, dtype, src, len, &enc);
    check_decodes(&enc, dtype, src, len);
    tf_simd_level_cap(TF_SIMD_NONE);
    encode(&model, dtype, src, len, &plain);
    tf_simd_level_cap(TF_SIMD_AVX512);
    ck_assert_msg(plain.len == enc.len && memcmp(plain.data, enc.data, enc.len) == 0,
                  "%zu bytes of %s encode otherwise without SIMD", len, tf_dtype_get(dtype)->name);
    if (text)
        ck_assert_int_ge(tf_prog_describe_chunk(enc.data, enc.len, dtype, len, text, text_size),
                         1);
    size_t size = enc.len;
    tf_buf_free(&plain);
    tf_buf_free(&enc);
    tf_buf_free(&model);
    return size;
}

static const unsigned float_dtypes[] = { TF_DT_F16, TF_DT_BF16, TF_DT_F32, TF_DT_F64,
                                         TF_DT_F8_E4M3, TF_DT_F8_E5M2 };

/* Around a Huffman segment (256) and turn (1024), the sample's size
 * (16384), rANS's lanes (16384) and two streams (2^17). */
static const size_t counts[] = { 1, 2, 3, 7, 64, 255, 257, 1023, 1025, 4099, 16383, 16385,
                                 70001, 131073 };

START_TEST(test_every_float_dtype_and_size)
{
    unsigned dtype = float_dtypes[_i], w = elem(dtype);
    rng_state = 40 + _i;
    for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
        size_t n = counts[c], len = n * w;
        uint8_t *src = malloc(len);
        for (size_t i = 0; i < n; i++)
            test_put_elem(src + i * w, w, weight_in(dtype));
        round_trip(dtype, src, len, NULL, 0);
        fill_random(src, len);
        size_t size = round_trip(dtype, src, len, NULL, 0);
        ck_assert_msg(size <= len + 24, "%zu random bytes of %s took %zu", len,
                      tf_dtype_get(dtype)->name, size);
        free(src);
    }
}
END_TEST

START_TEST(test_special_values)
{
    static const uint64_t specials[] = { 0, 0x8000000000000000ull, 1, 0x800fffffffffffffull,
                                         0x7ff0000000000000ull, 0xfff0000000000000ull,
                                         0x7ff8000000000001ull, 0xfff5a5a5a5a5a5a5ull };
    unsigned dtype = float_dtypes[_i], w = elem(dtype);
    size_t n = 5000, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 3;
    /* a float's sign, exponent and mantissa at their extremes, in any width */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = specials[rng_next() % ARRAY_LEN(specials)] >> (64 - 8 * w);
        test_put_elem(src + i * w, w, rng_next() % 4 ? weight_in(dtype) : v);
    }
    round_trip(dtype, src, len, NULL, 0);
    free(src);
}
END_TEST

START_TEST(test_constants)
{
    size_t n = 30000;
    uint32_t *v = malloc(4 * n);
    char text[256];
    for (size_t i = 0; i < n; i++)
        v[i] = 0x3c23d70a; /* 0.01f */
    size_t size = round_trip(TF_DT_F32, (uint8_t *)v, 4 * n, text, sizeof text);
    ck_assert_str_eq(text, "const");
    ck_assert_uint_lt(size, 12);
    /* non-negative: a constant sign */
    rng_state = 8;
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)weight_in(TF_DT_F32) & 0x7fffffff;
    round_trip(TF_DT_F32, (uint8_t *)v, 4 * n, text, sizeof text);
    ck_assert_msg(strncmp(text, "merge_f32(const, ", 17) == 0, "%s", text);
    free(v);
}
END_TEST

/* float32 values of bfloat16 precision: the low 16 mantissa bits are a
 * constant field of their own. */
START_TEST(test_trailing_zeros)
{
    size_t n = 40000;
    uint32_t *v = malloc(4 * n);
    rng_state = 12;
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)weight_in(TF_DT_F32) & 0xffff0000;
    char text[256];
    size_t size = round_trip(TF_DT_F32, (uint8_t *)v, 4 * n, text, sizeof text);
    ck_assert_msg(strcmp(text, "merge_1_8_7_16(lit_raw, lit_huff4, lit_raw, const)") == 0, "%s",
                  text);
    ck_assert_msg(size < 2 * n * 7 / 10, "%zu bytes", size);
    free(v);
}
END_TEST

/* Exponents that come in runs: rANS under the exponent a turn earlier
 * is tried, and wins. */
START_TEST(test_exponents_predicted_by_neighbours)
{
    size_t n = 150001;
    uint32_t *v = malloc(4 * n);
    rng_state = 9;
    uint32_t exp = 120;
    for (size_t i = 0; i < n; i++) {
        if (i % 256 == 0)
            exp = 100 + (uint32_t)(rng_next() % 24);
        uint32_t e = exp + (uint32_t)(rng_next() % 3);
        v[i] = e << 23 | (uint32_t)(rng_next() & 0x7fffff);
    }
    char text[256];
    round_trip(TF_DT_F32, (uint8_t *)v, 4 * n, text, sizeof text);
    ck_assert_msg(strcmp(text, "merge_f32(const, lit_rans|self, lit_raw)") == 0, "%s", text);
    free(v);
}
END_TEST

/* The estimate from the sample lands near the size of the chunk. */
START_TEST(test_estimate)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t n = (size_t)1 << 20, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 21;
    for (size_t i = 0; i < n; i++)
        test_put_elem(src + i * w, w, weight_in(dtype));
    tf_buf model = { 0 }, enc = { 0 };
    fields_model(dtype, src, len, &model);
    encode(&model, dtype, src, len, &enc);
    tf_codec_ctx ctx = { .dtype = dtype, .model = model.data, .model_len = model.len };
    size_t est = tf_codec_prog.estimate(src, len, &ctx);
    ck_assert_msg(est > enc.len * 98 / 100 && est < enc.len * 102 / 100,
                  "%s: estimate %zu, size %zu", tf_dtype_get(dtype)->name, est, enc.len);
    /* a template, not fields: no estimate */
    tf_buf searched = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(tf_prog_fit(src, 4096 * w, dtype, NULL, &searched, &e), 0);
    ctx.model = searched.data;
    ctx.model_len = searched.len;
    ck_assert_uint_eq(tf_codec_prog.estimate(src, len, &ctx), SIZE_MAX);
    tf_buf_free(&searched);
    tf_buf_free(&enc);
    tf_buf_free(&model);
    free(src);
}
END_TEST

START_TEST(test_malformed_models)
{
    static const uint8_t bad[][8] = {
        { 1, TF_DT_BF16, 3, 1, 0, 8, 1 },             /* another version */
        { 2, TF_DT_BF16, 3, 1, 0, 8, 1, 7 },          /* truncated */
        { 2, TF_DT_BF16, 2, 8, 1, 7, 0 },             /* widths sum to 15 */
        { 2, TF_DT_BF16, 2, 7, 3, 9, 0 },             /* a try that does not exist */
        { 2, TF_DT_BF16, 2, 6, 0, 10, 1 },            /* Huffman codes of 10 bits */
        { 2, TF_DT_BF16, 1, 16, 0 },                  /* one field */
        { 2, TF_DT_BF16, 2, 0, 0, 16, 0 },            /* a field of no bits */
    };
    static const size_t lens[] = { 7, 8, 7, 7, 7, 5, 7 };
    uint16_t src[16] = { 0 };
    for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
        tf_codec_ctx ctx = { .dtype = TF_DT_BF16, .model = bad[k], .model_len = lens[k] };
        tf_buf out = { 0 };
        tf_error e = { 0 };
        if (bad[k][0] == TF_PROG_FIELDS_VERSION)
            ck_assert_msg(tf_codec_prog.encode((uint8_t *)src, sizeof src, &ctx, &out, &e) < 0,
                          "model %zu accepted", k);
        ck_assert_uint_eq(tf_codec_prog.estimate((uint8_t *)src, sizeof src, &ctx), SIZE_MAX);
        ck_assert_uint_eq(out.len, 0);
        tf_buf_free(&out);
    }
    /* a model for another dtype */
    tf_buf model = { 0 };
    fields_model(TF_DT_F16, (uint8_t *)src, sizeof src, &model);
    tf_codec_ctx ctx = { .dtype = TF_DT_BF16, .model = model.data, .model_len = model.len };
    tf_buf out = { 0 };
    tf_error e = { 0 };
    ck_assert_int_lt(tf_codec_prog.encode((uint8_t *)src, sizeof src, &ctx, &out, &e), 0);
    tf_buf_free(&model);
}
END_TEST

/* What the sampled fit gives: fields for weights; a search where the
 * sample shows structure worth it (a causal mask, an arange); nothing
 * for integers without structure, nor a search for a small table of a
 * few distinct values (too little to gain). */
START_TEST(test_sampled_fit_choices)
{
    tf_prog_fit_opts o = { .sampled = true };
    tf_error e = { 0 };
    tf_buf model = { 0 };
    size_t n = (size_t)1 << 18;
    float *mask = malloc(4 * n);
    for (size_t i = 0; i < n; i++)
        mask[i] = i % 512 <= i / 512 ? 1.0f : 0.0f;
    ck_assert_int_eq(tf_prog_fit((uint8_t *)mask, 4 * n, TF_DT_F32, &o, &model, &e), 0);
    ck_assert_uint_eq(model.data[0], 1); /* a template */
    int64_t *ids = malloc(8 * 4096);
    for (int64_t i = 0; i < 4096; i++)
        ids[i] = i;
    model.len = 0;
    ck_assert_int_eq(tf_prog_fit((uint8_t *)ids, 8 * 4096, TF_DT_I64, &o, &model, &e), 0);
    ck_assert_uint_eq(model.data[0], 1);
    rng_state = 4;
    fill_random((uint8_t *)ids, 8 * 4096);
    model.len = 0;
    ck_assert_int_lt(tf_prog_fit((uint8_t *)ids, 8 * 4096, TF_DT_I64, &o, &model, &e), 0);
    uint16_t ln[768];
    for (size_t i = 0; i < ARRAY_LEN(ln); i++)
        ln[i] = (uint16_t)(0x3f80 + rng_next() % 24); /* near 1.0 */
    model.len = 0;
    ck_assert_int_eq(tf_prog_fit((uint8_t *)ln, sizeof ln, TF_DT_BF16, &o, &model, &e), 0);
    ck_assert_uint_eq(model.data[0], TF_PROG_FIELDS_VERSION);
    tf_buf_free(&model);
    free(ids);
    free(mask);
}
END_TEST

/* On weights, the fields are about what the search finds. */
START_TEST(test_fields_against_the_search)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t n = 200000, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 30;
    for (size_t i = 0; i < n; i++)
        test_put_elem(src + i * w, w, weight_in(dtype));
    size_t fields = round_trip(dtype, src, len, NULL, 0);
    tf_buf model = { 0 }, enc = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(tf_prog_fit(src, len, dtype, NULL, &model, &e), 0);
    encode(&model, dtype, src, len, &enc);
    ck_assert_msg(fields <= enc.len + enc.len / 200, "%s: fields %zu, searched %zu",
                  tf_dtype_get(dtype)->name, fields, enc.len);
    tf_buf_free(&enc);
    tf_buf_free(&model);
    free(src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prog_fields");
    TCase *tc = tcase_create("prog_fields");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_every_float_dtype_and_size, 0, ARRAY_LEN(float_dtypes));
    tcase_add_loop_test(tc, test_special_values, 0, ARRAY_LEN(float_dtypes));
    tcase_add_test(tc, test_constants);
    tcase_add_test(tc, test_trailing_zeros);
    tcase_add_test(tc, test_exponents_predicted_by_neighbours);
    tcase_add_loop_test(tc, test_estimate, 0, 2);
    tcase_add_test(tc, test_malformed_models);
    tcase_add_test(tc, test_sampled_fit_choices);
    tcase_add_loop_test(tc, test_fields_against_the_search, 0, 2);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
