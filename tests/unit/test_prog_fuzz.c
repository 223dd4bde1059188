/* prog on untrusted bytes: random chunks, valid chunks mutated, truncated
 * or extended, random and mutated models. Decoding must fail cleanly or
 * succeed, never crash, hang or read outside the bytes given (every input
 * sits in an exactly sized heap block, so ASan sees an over-read), and a
 * strict prefix of a valid chunk must fail. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/prog/prog.h"
#include "common/dtype.h"

/* Decodes enc (copied to an exact block) into an exact block of len. */
static int decode_exact(const uint8_t *enc, size_t enc_len, unsigned dtype, size_t len)
{
    uint8_t *in = exact_copy(enc, enc_len), *out = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(out);
    tf_codec_ctx ctx = { .dtype = dtype };
    tf_error e;
    int rc = tf_codec_prog.decode(in, enc_len, &ctx, out, len, &e);
    free(in);
    free(out);
    return rc;
}

/* Chunks whose programs exercise every operator and coding. */
typedef struct {
    unsigned dtype;
    size_t len;
    uint8_t *src;
    tf_buf enc;
} sample;

static void make_words(uint8_t *p, size_t n, unsigned w, unsigned kind)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        switch (kind) {
        case 0: v = rng_next() >> (rng_next() % 64); break;           /* skewed */
        case 1: v = i; break;                                         /* arange */
        case 2: v = (i % 37) * 3 + (i / 1000); break;                 /* rows, runs */
        case 3: v = (i % 64) <= (i / 64) % 64 ? 0x3f800000 : 0; break; /* mask */
        case 4: v = i < n / 2 ? 7 : rng_next() & 0x3f; break;         /* run then noise */
        default: v = (rng_next() & 0x807f0000) | 0x3c000000 | (rng_next() % 4) << 23; break;
        }
        for (unsigned b = 0; b < w; b++)
            p[i * w + b] = (uint8_t)(v >> (8 * b));
    }
}

static sample make_sample(unsigned dtype, size_t n, unsigned kind)
{
    sample s = { .dtype = dtype };
    unsigned w = tf_dtype_get(dtype)->size;
    s.len = n * w;
    s.src = malloc(s.len ? s.len : 1);
    make_words(s.src, n, w, kind);
    tf_codec_ctx ctx = { .dtype = dtype };
    tf_error e;
    ck_assert_msg(tf_codec_prog.encode(s.src, s.len, &ctx, &s.enc, &e) == 0, "%s", e.msg);
    return s;
}

static void free_sample(sample *s)
{
    free(s->src);
    tf_buf_free(&s->enc);
}

static const unsigned sample_dtypes[] = { TF_DT_F32, TF_DT_BF16, TF_DT_I64, TF_DT_U8, TF_DT_F16 };

START_TEST(test_prefixes_fail)
{
    rng_state = 77 + _i;
    for (unsigned kind = 0; kind < 6; kind++) {
        sample s = make_sample(sample_dtypes[_i], 3000, kind);
        ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, s.dtype, s.len), 0);
        for (size_t cut = 0; cut < s.enc.len; cut++)
            ck_assert_msg(decode_exact(s.enc.data, cut, s.dtype, s.len) == -1,
                          "prefix of %zu of %zu bytes decoded (kind %u)", cut, s.enc.len, kind);
        tf_buf_u8(&s.enc, 0); /* a byte more is refused too */
        ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, s.dtype, s.len), -1);
        free_sample(&s);
    }
}
END_TEST

START_TEST(test_mutations_never_crash)
{
    rng_state = 1234 + _i;
    for (unsigned kind = 0; kind < 6; kind++) {
        sample s = make_sample(sample_dtypes[_i], 2000 + 17 * kind, kind);
        uint8_t *m = malloc(s.enc.len);
        for (int round = 0; round < 300; round++) {
            memcpy(m, s.enc.data, s.enc.len);
            int flips = 1 + (int)(rng_next() % 4);
            for (int f = 0; f < flips; f++) {
                size_t at = rng_next() % s.enc.len;
                if (rng_next() % 2)
                    m[at] ^= (uint8_t)(1u << (rng_next() % 8));
                else
                    m[at] = (uint8_t)rng_next();
            }
            decode_exact(m, s.enc.len, s.dtype, s.len); /* either result; no crash */
        }
        free(m);
        free_sample(&s);
    }
}
END_TEST

START_TEST(test_random_bytes_never_crash)
{
    rng_state = 99;
    static const unsigned dtypes[] = { TF_DT_NONE, TF_DT_U8, TF_DT_BF16, TF_DT_F32, TF_DT_I64 };
    uint8_t buf[512];
    for (int round = 0; round < 4000; round++) {
        size_t n = rng_next() % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)rng_next();
        if (n && rng_next() % 2)
            buf[0] = 1; /* the version, to get past it */
        if (n > 1 && rng_next() % 2)
            buf[1] = (uint8_t)(rng_next() % 7); /* an operator */
        unsigned dtype = dtypes[rng_next() % ARRAY_LEN(dtypes)];
        size_t len = (rng_next() % 3000) * tf_dtype_get(dtype)->size;
        decode_exact(buf, n, dtype, len);
    }
}
END_TEST

/* Models come from fit, but a corrupt one must not take encode down, and
 * describe must not read past it. */
START_TEST(test_bad_models_never_crash)
{
    rng_state = 5;
    size_t n = 1500;
    uint8_t *src = malloc(4 * n);
    make_words(src, n, 4, 5);
    tf_buf model = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_prog_fit(src, 4 * n, TF_DT_F32, NULL, &model, &e), 0);
    char text[256];
    for (int round = 0; round < 500; round++) {
        uint8_t *m = exact_copy(model.data, model.len);
        size_t len = round % 5 == 0 ? rng_next() % (model.len + 1) : model.len;
        for (int f = 0; f < 3; f++)
            m[rng_next() % model.len] = (uint8_t)rng_next();
        tf_codec_ctx ctx = { .dtype = TF_DT_F32, .model = m, .model_len = len };
        tf_buf enc = { 0 };
        if (tf_codec_prog.encode(src, 4 * n, &ctx, &enc, &e) == 0)
            ck_assert_int_eq(decode_exact(enc.data, enc.len, TF_DT_F32, 4 * n), 0);
        tf_prog_describe(m, len, text, sizeof text);
        tf_buf_free(&enc);
        free(m);
    }
    tf_buf_free(&model);
    free(src);
}
END_TEST

/* A program with literals fits one length only (a constant, or a scan of
 * one, rightly fits any). */
START_TEST(test_wrong_shape_fails)
{
    rng_state = 8;
    sample s = make_sample(TF_DT_F32, 100, 0);
    ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, TF_DT_F32, s.len), 0);
    ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, TF_DT_F32, s.len - 4), -1);
    ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, TF_DT_F32, s.len + 4), -1);
    ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, TF_DT_F32, s.len - 1), -1);
    ck_assert_int_eq(decode_exact(s.enc.data, s.enc.len, 77, s.len), -1);
    ck_assert_int_eq(decode_exact(s.enc.data, 0, TF_DT_F32, 0), -1);
    free_sample(&s);
}
END_TEST

static Suite *fuzz_suite(void)
{
    Suite *s = suite_create("prog_fuzz");
    TCase *tc = tcase_create("prog_fuzz");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_prefixes_fail, 0, ARRAY_LEN(sample_dtypes));
    tcase_add_loop_test(tc, test_mutations_never_crash, 0, ARRAY_LEN(sample_dtypes));
    tcase_add_test(tc, test_random_bytes_never_crash);
    tcase_add_test(tc, test_bad_models_never_crash);
    tcase_add_test(tc, test_wrong_shape_fails);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(fuzz_suite());
}
