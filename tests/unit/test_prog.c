/* The prog codec through its codec row: bit-exact round trips of every
 * dtype and of the structured tensors the language exists for (constant
 * buffers, arange position ids, repeated rows, triangular masks, special
 * float values), sizes 0, 1 and odd, a chunk encoded with the model of a
 * larger tensor, determinism of fit and encode, and the text form of a
 * model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/prog/prog.h"
#include "codec/prog/prog_exec.h"
#include "codec/prog/prog_serialize.h"
#include "common/dtype.h"

/* Roughly normal, scale 0.02: what trained weights look like. */
static double weight(void)
{
    double sum = 0;
    for (int k = 0; k < 12; k++)
        sum += (double)(rng_next() >> 11) / 9007199254740992.0;
    return (sum - 6) * 0.02;
}

/* The float32 bits of a weight. */
static uint32_t weight_bits(void)
{
    float f = (float)weight();
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static unsigned elem(unsigned dtype)
{
    return tf_dtype_get(dtype)->size;
}

static void put_word(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned b = 0; b < bytes; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

/* The chunk's program run on the general executor alone, and decoded
 * with no SIMD: the same bytes as the codec's decoding (its fast paths). */
static void check_executors(const uint8_t *stored, size_t enc_len, unsigned dtype,
                            const uint8_t *src, size_t len)
{
    unsigned bytes = dtype == TF_DT_NONE ? 1 : elem(dtype);
    tf_prog *p = malloc(sizeof *p);
    uint8_t *out = malloc(len ? len : 1);
    tf_error e = { 0 };
    ck_assert_msg(tf_prog_read(stored + 1, enc_len - 1, 8 * bytes, len / bytes, p, &e) == 0,
                  "%s", e.msg);
    memset(out, 0xa5, len);
    ck_assert_msg(tf_prog_exec_general(p, out, &e) == 0, "general executor: %s", e.msg);
    ck_assert_msg(len == 0 || memcmp(out, src, len) == 0, "general executor differs");
    tf_simd_level_cap(TF_SIMD_NONE);
    memset(out, 0xa5, len);
    tf_codec_ctx dctx = { .dtype = dtype };
    int rc = tf_codec_prog.decode(stored, enc_len, &dctx, out, len, &e);
    tf_simd_level_cap(TF_SIMD_AVX512);
    ck_assert_msg(rc == 0, "decode without SIMD: %s", e.msg);
    ck_assert_msg(len == 0 || memcmp(out, src, len) == 0, "decoding without SIMD differs");
    free(out);
    free(p);
}

/* Encodes src with the model (none: the chunk searches itself), decodes
 * from exactly sized buffers, checks every bit, and so do the general
 * executor and the decoder without SIMD; returns the chunk size. */
static size_t round_trip_with(const tf_buf *model, unsigned dtype, const uint8_t *src,
                              size_t len)
{
    tf_codec_ctx ctx = { .dtype = dtype };
    if (model) {
        ctx.model = model->data;
        ctx.model_len = model->len;
    }
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    ck_assert_msg(tf_codec_prog.encode(src, len, &ctx, &enc, &e) == 0, "encode %zu bytes of %s: %s",
                  len, tf_dtype_get(dtype)->name, e.msg);
    uint8_t *stored = exact_copy(enc.data, enc.len);
    uint8_t *out = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(out);
    memset(out, 0xa5, len);
    tf_codec_ctx dctx = { .dtype = dtype }; /* decoding needs no model */
    ck_assert_msg(tf_codec_prog.decode(stored, enc.len, &dctx, out, len, &e) == 0,
                  "decode %zu bytes of %s: %s", len, tf_dtype_get(dtype)->name, e.msg);
    ck_assert_msg(len == 0 || memcmp(out, src, len) == 0, "round trip of %zu bytes of %s differs",
                  len, tf_dtype_get(dtype)->name);
    check_executors(stored, enc.len, dtype, src, len);
    size_t size = enc.len;
    free(out);
    free(stored);
    tf_buf_free(&enc);
    return size;
}

static void fit(unsigned dtype, const uint8_t *src, size_t len, tf_buf *model)
{
    tf_error e = { 0 };
    model->len = 0;
    ck_assert_msg(tf_prog_fit(src, len, dtype, NULL, model, &e) == 0, "fit %zu bytes of %s: %s",
                  len, tf_dtype_get(dtype)->name, e.msg);
}

/* fit on the data, then round trip; returns the chunk size, and the model
 * text in text (when not NULL). */
static size_t round_trip(unsigned dtype, const uint8_t *src, size_t len, char *text,
                         size_t text_size)
{
    tf_buf model = { 0 };
    fit(dtype, src, len, &model);
    if (text)
        ck_assert_int_ge(tf_prog_describe(model.data, model.len, text, text_size), 1);
    size_t size = round_trip_with(&model, dtype, src, len);
    tf_buf_free(&model);
    return size;
}

static const unsigned all_dtypes[] = {
    TF_DT_NONE, TF_DT_BOOL, TF_DT_U8,  TF_DT_I8,  TF_DT_I16,  TF_DT_U16,     TF_DT_I32,    TF_DT_U32,
    TF_DT_I64,  TF_DT_U64,  TF_DT_F16, TF_DT_BF16, TF_DT_F32, TF_DT_F64, TF_DT_F8_E4M3, TF_DT_F8_E5M2,
};

START_TEST(test_every_dtype_random_and_sizes)
{
    static const size_t counts[] = { 0, 1, 2, 3, 7, 64, 1001, 4099 };
    unsigned dtype = all_dtypes[_i];
    rng_state = 100 + _i;
    for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
        size_t len = counts[c] * elem(dtype);
        uint8_t *src = malloc(len ? len : 1);
        fill_random(src, len);
        size_t size = round_trip(dtype, src, len, NULL, 0);
        /* random bytes cost at most a few bytes more than raw */
        ck_assert_msg(size <= len + 16, "%zu random bytes took %zu", len, size);
        free(src);
    }
}
END_TEST

START_TEST(test_every_dtype_weights)
{
    unsigned dtype = all_dtypes[_i];
    unsigned w = elem(dtype);
    size_t n = 3001, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 7 + _i;
    for (size_t i = 0; i < n; i++) {
        double x = weight();
        float f = (float)x;
        uint32_t u;
        uint64_t d;
        memcpy(&u, &f, 4);
        memcpy(&d, &x, 8);
        uint64_t v = dtype == TF_DT_F64 ? d : dtype == TF_DT_F32 ? u
                   : dtype == TF_DT_BF16 ? u >> 16 : (uint64_t)(int64_t)(x * 1000);
        put_word(src + i * w, v, w);
    }
    round_trip(dtype, src, len, NULL, 0);
    free(src);
}
END_TEST

START_TEST(test_constant_is_a_few_bytes)
{
    unsigned dtype = all_dtypes[_i];
    unsigned w = elem(dtype);
    size_t n = 5000, len = n * w;
    uint8_t *src = malloc(len);
    for (size_t i = 0; i < n; i++)
        put_word(src + i * w, 0x3f80a5c3e1ull * (_i + 1), w);
    char text[128];
    size_t size = round_trip(dtype, src, len, text, sizeof text);
    ck_assert_msg(size <= 12, "constant %s took %zu bytes (%s)", tf_dtype_get(dtype)->name, size,
                  text);
    ck_assert_str_eq(text, "const");
    free(src);
}
END_TEST

START_TEST(test_arange_is_a_few_bytes)
{
    static const size_t counts[] = { 2, 128, 2048, 100000 };
    for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
        size_t n = counts[c];
        uint8_t *src = malloc(8 * n);
        for (size_t i = 0; i < n; i++)
            put_word(src + 8 * i, i, 8);
        char text[128];
        size_t size = round_trip(TF_DT_I64, src, 8 * n, text, sizeof text);
        ck_assert_msg(size <= 12, "arange of %zu took %zu bytes (%s)", n, size, text);
        if (n > 2)
            ck_assert_str_eq(text, "scan_add(const)");
        free(src);
    }
}
END_TEST

START_TEST(test_repeated_rows)
{
    static const unsigned dtypes[] = { TF_DT_F32, TF_DT_BF16, TF_DT_U8, TF_DT_I64 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t cols = 96, rows = 200, len = cols * rows * w;
    uint8_t *src = malloc(len);
    rng_state = 42;
    fill_random(src, cols * w);
    for (size_t r = 1; r < rows; r++)
        memcpy(src + r * cols * w, src, cols * w);
    char text[128];
    size_t size = round_trip(dtype, src, len, text, sizeof text);
    ck_assert_msg(size <= cols * w + 24, "repeated rows of %s took %zu bytes (%s)",
                  tf_dtype_get(dtype)->name, size, text);
    ck_assert_msg(strstr(text, "repeat") != NULL, "%s", text);
    /* a chunk that cuts the last row short still repeats */
    size_t cut = len - w * (cols / 3);
    ck_assert_uint_le(round_trip(dtype, src, cut, NULL, 0), cols * w + 24);
    free(src);
}
END_TEST

/* torch.tril(torch.ones(L, L)) as stored in attention bias buffers. */
START_TEST(test_triangular_mask)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32, TF_DT_F16, TF_DT_U8 };
    static const uint64_t one[] = { 0x3f80, 0x3f800000, 0x3c00, 1 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t L = 128, len = L * L * w;
    uint8_t *src = malloc(len);
    for (size_t r = 0; r < L; r++)
        for (size_t c = 0; c < L; c++)
            put_word(src + (r * L + c) * w, c <= r ? one[_i] : 0, w);
    char text[128];
    size_t size = round_trip(dtype, src, len, text, sizeof text);
    ck_assert_msg(size <= len / 20, "mask of %s took %zu bytes (%s)", tf_dtype_get(dtype)->name,
                  size, text);
    free(src);
}
END_TEST

/* Causal masks of L x L: `on` on and below the diagonal (or, upper, on
 * and above it), `off` elsewhere; the first `count` elements. */
static uint8_t *mask_of(unsigned dtype, size_t L, size_t count, bool upper, uint64_t on,
                        uint64_t off)
{
    unsigned w = elem(dtype);
    uint8_t *src = malloc(count * w);
    for (size_t i = 0; i < count; i++) {
        size_t r = i / L, c = i % L;
        put_word(src + i * w, (upper ? c >= r : c <= r) ? on : off, w);
    }
    return src;
}

/* torch.tril(torch.ones(L, L)), torch.triu(...) and the additive masks
 * of 0 and -inf: each row differs from the one above in one word, which
 * a lagged scan turns into a period of a few runs, a few bytes. */
START_TEST(test_causal_mask_is_a_few_bytes)
{
    static const struct {
        unsigned dtype;
        bool upper;
        uint64_t on, off;
    } cases[] = {
        { TF_DT_U8, false, 1, 0 },          { TF_DT_BOOL, false, 1, 0 },
        { TF_DT_F32, false, 0, 0xff800000 }, { TF_DT_BF16, false, 0, 0xff80 },
        { TF_DT_F16, false, 0, 0xfc00 },    { TF_DT_U8, true, 1, 0 },
        { TF_DT_F32, true, 0x3f800000, 0 }, { TF_DT_BF16, true, 0xff80, 0 },
    };
    unsigned dtype = cases[_i].dtype, w = elem(dtype);
    const size_t L = 512, n = L * L;
    uint8_t *src = mask_of(dtype, L, n, cases[_i].upper, cases[_i].on, cases[_i].off);
    tf_buf model = { 0 };
    fit(dtype, src, n * w, &model);
    char text[128];
    ck_assert_int_ge(tf_prog_describe(model.data, model.len, text, sizeof text), 1);
    size_t size = round_trip_with(&model, dtype, src, n * w);
    ck_assert_msg(size <= 64 && model.len <= 32, "mask %u of %s took %zu bytes, model %zu (%s)",
                  _i, tf_dtype_get(dtype)->name, size, model.len, text);
    ck_assert_msg(strstr(text, "scan_xorlag") || strstr(text, "scan_addlag"), "%s", text);
    /* a chunk that ends mid-row, with the model and searching itself */
    size_t cut = 300 * L + 77;
    ck_assert_uint_le(round_trip_with(&model, dtype, src, cut * w), 64);
    ck_assert_uint_le(round_trip_with(NULL, dtype, src, cut * w), 64);
    /* one that starts mid-row: exact, whatever it costs */
    round_trip_with(&model, dtype, src + (100 * L + 5) * w, (n - 100 * L - 5) * w);
    tf_buf_free(&model);
    free(src);
}
END_TEST

/* Odd shapes: rows of 37, a chunk ending mid-row. */
START_TEST(test_causal_mask_odd_shapes)
{
    static const size_t counts[] = { 37 * 37, 37 * 20 + 11, 37 * 3 };
    for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
        uint8_t *src = mask_of(TF_DT_F32, 37, counts[c], false, 0, 0xff800000);
        char text[128];
        size_t size = round_trip(TF_DT_F32, src, 4 * counts[c], text, sizeof text);
        ck_assert_msg(c == 2 || size <= 64, "37-wide mask of %zu took %zu bytes (%s)", counts[c],
                      size, text);
        free(src);
    }
}
END_TEST

/* A prior learned from a checkpoint with masks and weights guides a
 * search of a few expansions to the mask's few hundred bytes. */
START_TEST(test_learned_prior)
{
    size_t L = 128, n = L * L;
    uint8_t *mask = malloc(4 * n), *weights = malloc(4 * n);
    rng_state = 21;
    for (size_t i = 0; i < n; i++) {
        put_word(mask + 4 * i, i % L <= i / L ? 0x3f800000 : 0, 4);
        float f = (float)weight();
        memcpy(weights + 4 * i, &f, 4);
    }
    tf_prog_tensor checkpoint[] = { { mask, 4 * n, TF_DT_F32 }, { weights, 4 * n, TF_DT_F32 } };
    tf_prog_prior *prior;
    tf_error e;
    ck_assert_int_eq(tf_prog_prior_learn(checkpoint, 2, &prior, &e), 0);
    ck_assert_ptr_nonnull(prior);
    tf_buf model = { 0 };
    tf_prog_fit_opts opts = { .prior = prior };
    ck_assert_int_eq(tf_prog_fit(mask, 4 * n, TF_DT_F32, &opts, &model, &e), 0);
    size_t size = round_trip_with(&model, TF_DT_F32, mask, 4 * n);
    ck_assert_msg(size <= 512, "mask took %zu bytes with the prior", size);
    tf_buf_free(&model);
    tf_prog_prior_free(prior);
    /* nothing to learn from */
    ck_assert_int_eq(tf_prog_prior_learn(checkpoint, 0, &prior, &e), 0);
    ck_assert_ptr_null(prior);
    free(mask);
    free(weights);
}
END_TEST

START_TEST(test_special_values)
{
    static const uint64_t f16[] = { 0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e01, 0xfd55, 0x3c00 };
    static const uint64_t f32[] = { 0, 0x80000000, 1, 0x807fffff, 0x7f800000, 0xff800000,
                                    0x7fc00001, 0xffa5a5a5, 0x3f800000 };
    static const uint64_t f64[] = { 0, 0x8000000000000000ull, 1, 0x800fffffffffffffull,
                                    0x7ff0000000000000ull, 0xfff0000000000000ull,
                                    0x7ff8000000000001ull, 0xfff5a5a5a5a5a5a5ull, 0x3ff0000000000000ull };
    static const uint64_t f8[] = { 0, 0x80, 1, 0x87, 0x7f, 0xff, 0x7c, 0xfe, 0x38 };
    static const struct {
        unsigned dtype;
        const uint64_t *v;
    } cases[] = { { TF_DT_F16, f16 }, { TF_DT_BF16, f16 }, { TF_DT_F32, f32 },
                  { TF_DT_F64, f64 }, { TF_DT_F8_E4M3, f8 }, { TF_DT_F8_E5M2, f8 } };
    unsigned dtype = cases[_i].dtype, w = elem(dtype);
    size_t n = 2000, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 3;
    /* mostly weights, a sprinkle of every special value */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rng_next() % 5 ? rng_next() : cases[_i].v[rng_next() % 9];
        put_word(src + i * w, v, w);
    }
    round_trip(dtype, src, len, NULL, 0);
    for (size_t i = 0; i < n; i++) /* and only special values */
        put_word(src + i * w, cases[_i].v[i % 9], w);
    round_trip(dtype, src, len, NULL, 0);
    free(src);
}
END_TEST

/* The model comes from the whole tensor; each chunk (of any size, down to
 * none) is encoded with it. */
START_TEST(test_chunks_of_a_larger_tensor)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32, TF_DT_I64, TF_DT_U8 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t n = 20000, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 11;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = weight_bits();
        put_word(src + i * w, dtype == TF_DT_BF16 ? u >> 16 : dtype == TF_DT_I64 ? i : u, w);
    }
    tf_buf model = { 0 };
    fit(dtype, src, len, &model);
    static const size_t starts[] = { 0, 1, 777, 19999, 20000 };
    static const size_t counts[] = { 20000, 1, 4097, 1, 0 };
    for (size_t c = 0; c < ARRAY_LEN(starts); c++) {
        size_t count = counts[c] < n - starts[c] ? counts[c] : n - starts[c];
        round_trip_with(&model, dtype, src + starts[c] * w, count * w);
    }
    /* a chunk unlike the tensor the model was fit on */
    fill_random(src, len);
    round_trip_with(&model, dtype, src, len / 2);
    round_trip_with(NULL, dtype, src, len / 3 / w * w);
    tf_buf_free(&model);
    free(src);
}
END_TEST

/* Literals long enough for two rANS streams taking turns (2^17 symbols
 * and more), an odd count ending mid-round, on every executor. */
START_TEST(test_long_literals)
{
    static const unsigned dtypes[] = { TF_DT_BF16, TF_DT_F32, TF_DT_F16 };
    unsigned dtype = dtypes[_i], w = elem(dtype);
    size_t n = ((size_t)1 << 17) + 4099, len = n * w;
    uint8_t *src = malloc(len);
    rng_state = 13;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = weight_bits();
        put_word(src + i * w, dtype == TF_DT_F32 ? u : dtype == TF_DT_BF16 ? u >> 16
                                                     : (uint64_t)(rng_next() % 3) << 10 | (u >> 20 & 0x3ff), w);
    }
    round_trip(dtype, src, len, NULL, 0);
    free(src);
}
END_TEST

START_TEST(test_weights_compress)
{
    size_t n = 100000;
    uint8_t *src = malloc(2 * n);
    rng_state = 5;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = weight_bits();
        put_word(src + 2 * i, u >> 16, 2);
    }
    char text[128];
    size_t size = round_trip(TF_DT_BF16, src, 2 * n, text, sizeof text);
    /* sign and mantissa are close to incompressible, the exponent is not */
    ck_assert_msg(size < 2 * n * 7 / 10, "bf16 weights took %zu of %zu bytes (%s)", size, 2 * n,
                  text);
    free(src);
}
END_TEST

/* float32 words whose exponent runs in rows and whose top 4 mantissa
 * bits mostly follow the exponent, the rest noise: the fields come apart
 * (the top mantissa bits under the exponent's contexts), and every
 * executor gives the same bytes. */
START_TEST(test_float32_fields)
{
    size_t n = 150001; /* two rANS streams, an odd count */
    uint8_t *src = malloc(4 * n);
    rng_state = 9;
    uint32_t exp = 120;
    for (size_t i = 0; i < n; i++) {
        if (i % 96 == 0)
            exp = 118 + (uint32_t)(rng_next() % 8);
        uint32_t top = rng_next() % 8 ? exp * 5 % 16 : (uint32_t)(rng_next() % 16);
        uint32_t u = (uint32_t)(rng_next() & 1) << 31 | exp << 23 | top << 19 |
                     (uint32_t)(rng_next() & 0x7ffff);
        put_word(src + 4 * i, u, 4);
    }
    char text[128];
    size_t size = round_trip(TF_DT_F32, src, 4 * n, text, sizeof text);
    ck_assert_msg(strstr(text, "merge_1_8_4_19"), "float32 words as %s", text);
    ck_assert_msg(size < 4 * n * 8 / 10, "float32 words took %zu of %zu bytes (%s)", size, 4 * n,
                  text);
    free(src);
}
END_TEST

START_TEST(test_deterministic)
{
    size_t n = 30000;
    uint8_t *src = malloc(4 * n);
    rng_state = 9;
    for (size_t i = 0; i < n; i++) {
        float f = (float)weight();
        memcpy(src + 4 * i, &f, 4);
    }
    tf_buf m1 = { 0 }, m2 = { 0 }, c1 = { 0 }, c2 = { 0 };
    fit(TF_DT_F32, src, 4 * n, &m1);
    fit(TF_DT_F32, src, 4 * n, &m2);
    ck_assert_uint_eq(m1.len, m2.len);
    ck_assert_mem_eq(m1.data, m2.data, m1.len);
    tf_codec_ctx ctx = { .dtype = TF_DT_F32, .model = m1.data, .model_len = m1.len };
    tf_error e;
    ck_assert_int_eq(tf_codec_prog.encode(src, 4 * n, &ctx, &c1, &e), 0);
    ck_assert_int_eq(tf_codec_prog.encode(src, 4 * n, &ctx, &c2, &e), 0);
    ck_assert_uint_eq(c1.len, c2.len);
    ck_assert_mem_eq(c1.data, c2.data, c1.len);
    tf_buf_free(&m1);
    tf_buf_free(&m2);
    tf_buf_free(&c1);
    tf_buf_free(&c2);
    free(src);
}
END_TEST

START_TEST(test_refuses_what_does_not_fit)
{
    uint8_t src[12] = { 0 };
    tf_buf out = { 0 }, model = { 0 };
    tf_error e;
    tf_codec_ctx ctx = { .dtype = TF_DT_F32 };
    /* not a whole number of elements, unknown dtype */
    ck_assert_int_eq(tf_codec_prog.encode(src, 6, &ctx, &out, &e), -1);
    ck_assert_int_eq(tf_prog_fit(src, 6, TF_DT_F32, NULL, &model, &e), -1);
    ctx.dtype = 99;
    ck_assert_int_eq(tf_codec_prog.encode(src, 12, &ctx, &out, &e), -1);
    ck_assert_uint_eq(out.len, 0);
    /* a model of another dtype */
    fit(TF_DT_BF16, src, 12, &model);
    ctx = (tf_codec_ctx){ .dtype = TF_DT_F32, .model = model.data, .model_len = model.len };
    ck_assert_int_eq(tf_codec_prog.encode(src, 12, &ctx, &out, &e), -1);
    ck_assert_uint_eq(out.len, 0);
    tf_buf_free(&model);
}
END_TEST

START_TEST(test_describe)
{
    size_t n = 4096;
    uint8_t *src = malloc(2 * n);
    rng_state = 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = weight_bits();
        put_word(src + 2 * i, u >> 16, 2);
    }
    tf_buf model = { 0 };
    fit(TF_DT_BF16, src, 2 * n, &model);
    char text[256], small[8];
    int len = tf_prog_describe(model.data, model.len, text, sizeof text);
    ck_assert_int_eq(len, (int)strlen(text));
    ck_assert_msg(strncmp(text, "merge_bf16", 10) == 0 || strncmp(text, "map_rotl1", 9) == 0,
                  "%s", text);
    ck_assert_int_eq(tf_prog_describe(model.data, model.len, small, sizeof small), len);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(tf_prog_describe(model.data, model.len - 1, text, sizeof text), -1);
    ck_assert_int_eq(tf_prog_describe(NULL, 0, text, sizeof text), -1);
    tf_buf_free(&model);
    free(src);
}
END_TEST

static Suite *prog_suite(void)
{
    Suite *s = suite_create("prog");
    TCase *tc = tcase_create("prog");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_every_dtype_random_and_sizes, 0, ARRAY_LEN(all_dtypes));
    tcase_add_loop_test(tc, test_every_dtype_weights, 0, ARRAY_LEN(all_dtypes));
    tcase_add_loop_test(tc, test_constant_is_a_few_bytes, 0, ARRAY_LEN(all_dtypes));
    tcase_add_test(tc, test_arange_is_a_few_bytes);
    tcase_add_loop_test(tc, test_repeated_rows, 0, 4);
    tcase_add_loop_test(tc, test_triangular_mask, 0, 4);
    tcase_add_loop_test(tc, test_causal_mask_is_a_few_bytes, 0, 8);
    tcase_add_test(tc, test_causal_mask_odd_shapes);
    tcase_add_test(tc, test_learned_prior);
    tcase_add_loop_test(tc, test_special_values, 0, 6);
    tcase_add_loop_test(tc, test_chunks_of_a_larger_tensor, 0, 4);
    tcase_add_loop_test(tc, test_long_literals, 0, 3);
    tcase_add_test(tc, test_weights_compress);
    tcase_add_test(tc, test_float32_fields);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_refuses_what_does_not_fit);
    tcase_add_test(tc, test_describe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(prog_suite());
}
