/* ulp_stats: the breakdown of a stored ulp chunk adds up to its bits,
 * gives each stage what belongs to it, counts raw bits exactly and
 * refuses corrupt chunks; the entropy of a histogram obeys the chain
 * rule. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/ulp/ulp.h"
#include "codec/ulp/ulp_stats.h"
#include "common/dtype.h"

/* What the residuals of a test delta look like. */
typedef enum {
    RES_TRAJECTORY, /* mostly short, now and then any length */
    RES_ZERO_ONE,   /* z in {0, 1}: b is 0 or 1, no refinement bits */
    RES_LENGTH_3,   /* z in [4, 8): b is always 3, q1 and q2 uniform */
} residuals;

static uint64_t residual(residuals kind, unsigned width)
{
    switch (kind) {
    case RES_ZERO_ONE:
        return rng_next() & 1;
    case RES_LENGTH_3:
        return 4 + (rng_next() & 3);
    default: {
        unsigned b = rng_next() % 10 ? (unsigned)(rng_next() % 9) : (unsigned)(rng_next() % (width + 1));
        return b ? (rng_next() & (tf_ulp_mask(b) >> 1)) | (uint64_t)1 << (b - 1) : 0;
    }
    }
}

/* Random references and targets at the chosen residuals from them;
 * returns the raw tail bits the paper's split leaves. */
static uint64_t make_delta(unsigned dtype, residuals kind, size_t n, uint64_t seed, uint8_t *x,
                           uint8_t *r)
{
    unsigned size = tf_dtype_get(dtype)->size, width = 8 * size;
    uint64_t raw_bits = 0;
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t rv = rng_next() & tf_ulp_mask(width), z = residual(kind, width);
        unsigned b = tf_ulp_bitlen(z);
        raw_bits += b > 3 ? b - 3 : 0;
        test_put_elem(r + i * size, size, rv);
        test_put_elem(x + i * size, size, tf_ulp_unresidual(z, rv, width));
    }
    return raw_bits;
}

/* A delta of n elements, its model and one encoded chunk of all of it. */
typedef struct {
    unsigned dtype;
    size_t len;
    uint8_t *x, *r;
    uint64_t raw_bits;
    tf_buf model, enc;
} fixture;

static tf_codec_ctx ctx_of(const fixture *f)
{
    return (tf_codec_ctx){ .dtype = f->dtype, .ref = f->r, .ref_len = f->len,
                           .model = f->model.data, .model_len = f->model.len };
}

static fixture make_fixture(unsigned dtype, residuals kind, size_t n, uint64_t seed)
{
    fixture f = { .dtype = dtype, .len = n * tf_dtype_get(dtype)->size };
    f.x = malloc(f.len + 1);
    f.r = malloc(f.len + 1);
    ck_assert(f.x && f.r);
    f.raw_bits = make_delta(dtype, kind, n, seed, f.x, f.r);
    tf_codec_ctx ctx = ctx_of(&f);
    tf_error e;
    ck_assert_msg(tf_codec_ulp.fit(f.x, f.len, &ctx, &f.model, &e) == 0, "%s", e.msg);
    ctx = ctx_of(&f);
    ck_assert_msg(tf_codec_ulp.encode(f.x, f.len, &ctx, &f.enc, &e) == 0, "%s", e.msg);
    return f;
}

static void free_fixture(fixture *f)
{
    tf_buf_free(&f->model);
    tf_buf_free(&f->enc);
    free(f->x);
    free(f->r);
}

static tf_ulp_bits breakdown_of(const fixture *f, const uint8_t *enc, size_t enc_len, int *rc)
{
    tf_codec_ctx ctx = ctx_of(f);
    tf_ulp_bits bits = { 0 };
    tf_error e;
    *rc = tf_ulp_breakdown(enc, enc_len, &ctx, f->len, &bits, &e);
    return bits;
}

static void assert_sums_to(const tf_ulp_bits *bits, size_t enc_len)
{
    double coded = tf_ulp_bits_total(bits), stored = 8.0 * (double)enc_len;
    ck_assert_msg(fabs(coded - stored) <= 1e-9 * stored + 1e-9,
                  "breakdown %.6f bits, stored %.0f", coded, stored);
    ck_assert(bits->b >= 0 && bits->q1 >= 0 && bits->q2 >= 0);
}

START_TEST(test_breakdown_sums_to_stored_bits)
{
    /* One element, a one-lane stream, a 16-lane stream, two 16-lane
     * streams taking turns (a chunk of at least 2^15 elements). */
    const size_t sizes[] = { 1, 1000, 5000, 40000 };
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++) {
        for (size_t k = 0; k < 4; k++) {
            fixture f = make_fixture(test_float_dtypes[d], RES_TRAJECTORY, sizes[k], 1 + d + 10 * k);
            int rc;
            tf_ulp_bits bits = breakdown_of(&f, f.enc.data, f.enc.len, &rc);
            ck_assert_msg(rc == 0, "dtype %u, %zu elements", f.dtype, sizes[k]);
            assert_sums_to(&bits, f.enc.len);
            ck_assert_uint_eq(bits.raw, f.raw_bits);
            ck_assert_uint_eq(bits.weights, sizes[k]);
            ck_assert_uint_eq(bits.tables, 0);
            /* A few bytes of header a stream, and padding. */
            ck_assert_msg(bits.framing < 8 * 16, "dtype %u, %zu elements: %llu bits of framing",
                          f.dtype, sizes[k], (unsigned long long)bits.framing);
            free_fixture(&f);
        }
    }
}
END_TEST

START_TEST(test_breakdown_accumulates)
{
    fixture f = make_fixture(TF_DT_BF16, RES_TRAJECTORY, 3000, 5);
    tf_codec_ctx ctx = ctx_of(&f);
    tf_ulp_bits sum = { .tables = 800 };
    tf_error e;
    for (int i = 0; i < 3; i++)
        ck_assert(tf_ulp_breakdown(f.enc.data, f.enc.len, &ctx, f.len, &sum, &e) == 0);
    ck_assert_uint_eq(sum.weights, 9000);
    ck_assert_uint_eq(sum.raw, 3 * f.raw_bits);
    ck_assert_uint_eq(sum.tables, 800);
    sum.tables = 0;
    assert_sums_to(&sum, 3 * f.enc.len);
    free_fixture(&f);
}
END_TEST

START_TEST(test_stages_get_their_bits)
{
    int rc;
    /* b alone carries information: no refinement bits exist. */
    fixture f = make_fixture(TF_DT_F32, RES_ZERO_ONE, 4000, 6);
    tf_ulp_bits bits = breakdown_of(&f, f.enc.data, f.enc.len, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(bits.q1 == 0 && bits.q2 == 0 && bits.b > 3000);
    ck_assert_uint_eq(bits.raw, 0);
    free_fixture(&f);
    /* b is certain: q1 and q2 take the stream, about half each. */
    f = make_fixture(TF_DT_BF16, RES_LENGTH_3, 4000, 7);
    bits = breakdown_of(&f, f.enc.data, f.enc.len, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(bits.b == 0);
    ck_assert_msg(bits.q1 > 0.9 * 4000 && bits.q2 > 0.9 * 4000 && fabs(bits.q1 - bits.q2) < 400,
                  "q1 %.1f q2 %.1f", bits.q1, bits.q2);
    assert_sums_to(&bits, f.enc.len);
    free_fixture(&f);
}
END_TEST

START_TEST(test_corrupt_chunks_fail)
{
    fixture f = make_fixture(TF_DT_BF16, RES_TRAJECTORY, 3000, 8);
    uint8_t *bytes = malloc(f.enc.len);
    int rc;
    for (size_t cut = 0; cut < f.enc.len; cut += 7) { /* exactly sized: ASan sees over-reads */
        uint8_t *part = malloc(cut ? cut : 1);
        memcpy(part, f.enc.data, cut);
        tf_ulp_bits bits = breakdown_of(&f, part, cut, &rc);
        ck_assert_int_eq(rc, -1);
        ck_assert(tf_ulp_bits_total(&bits) == 0 && bits.weights == 0);
        free(part);
    }
    rng_state = 9;
    for (int trial = 0; trial < 500; trial++) {
        /* A flip in the raw tail may decode to other data, which must
         * still break down exactly; anything else fails. */
        memcpy(bytes, f.enc.data, f.enc.len);
        bytes[rng_next() % f.enc.len] ^= (uint8_t)(1u << (rng_next() % 8));
        tf_ulp_bits bits = breakdown_of(&f, bytes, f.enc.len, &rc);
        if (rc == 0)
            assert_sums_to(&bits, f.enc.len);
        else
            ck_assert(tf_ulp_bits_total(&bits) == 0);
        for (size_t i = 0; i < f.enc.len; i++)
            bytes[i] = (uint8_t)rng_next();
        breakdown_of(&f, bytes, f.enc.len, &rc);
        ck_assert_int_eq(rc, -1);
    }
    free(bytes);
    free_fixture(&f);
}
END_TEST

START_TEST(test_refuses_what_is_not_ulp)
{
    fixture f = make_fixture(TF_DT_F16, RES_TRAJECTORY, 100, 10);
    tf_codec_ctx ctx = ctx_of(&f);
    tf_ulp_bits bits = { 0 };
    tf_error e;
    ctx.ref = NULL;
    ck_assert_int_eq(tf_ulp_breakdown(f.enc.data, f.enc.len, &ctx, f.len, &bits, &e), -1);
    ctx = ctx_of(&f);
    ctx.dtype = TF_DT_I16;
    ck_assert_int_eq(tf_ulp_breakdown(f.enc.data, f.enc.len, &ctx, f.len, &bits, &e), -1);
    ctx = ctx_of(&f);
    ctx.model_len = 1;
    ck_assert_int_eq(tf_ulp_breakdown(f.enc.data, f.enc.len, &ctx, f.len, &bits, &e), -1);
    ck_assert(tf_ulp_bits_total(&bits) == 0);
    tf_ulp_hist h;
    ck_assert_int_eq(tf_ulp_hist_init(&h, TF_DT_I32, &e), -1);
    free_fixture(&f);
}
END_TEST

/* H(b,q1,q2 | e_r) computed directly from the joint counts. */
static double joint_entropy(const tf_ulp_hist *h)
{
    double bits = 0;
    for (unsigned c = 0; c < h->n_ctx; c++) {
        const uint64_t *row = h->counts + (size_t)c * h->n_sym;
        double n = 0;
        for (unsigned s = 0; s < h->n_sym; s++)
            n += (double)row[s];
        for (unsigned s = 0; s < h->n_sym; s++)
            if (row[s])
                bits -= (double)row[s] * log2((double)row[s] / n);
    }
    return bits;
}

START_TEST(test_entropy_chain_rule)
{
    for (size_t d = 0; d < N_TEST_FLOAT_DTYPES; d++) {
        unsigned dtype = test_float_dtypes[d];
        size_t n = 20000, len = n * tf_dtype_get(dtype)->size;
        uint8_t *x = malloc(len), *r = malloc(len);
        uint64_t raw_bits = make_delta(dtype, RES_TRAJECTORY, n, 20 + d, x, r);
        tf_ulp_hist h;
        tf_error e;
        ck_assert(tf_ulp_hist_init(&h, dtype, &e) == 0);
        tf_ulp_hist_add(&h, x, r, n / 2); /* in two parts: counts add up */
        tf_ulp_hist_add(&h, x + len / 2, r + len / 2, n - n / 2);
        tf_ulp_bits bits = { 0 };
        tf_ulp_hist_entropy(&h, &bits);
        double joint = joint_entropy(&h), staged = bits.b + bits.q1 + bits.q2;
        ck_assert_msg(fabs(staged - joint) < 1e-6 * joint, "%s: %.3f vs %.3f",
                      tf_dtype_get(dtype)->name, staged, joint);
        ck_assert(bits.b > 0 && bits.q1 > 0 && bits.q2 > 0);
        ck_assert_uint_eq(bits.raw, raw_bits);
        ck_assert_uint_eq(bits.weights, n);
        /* The same tensor as its reference: nothing to code. */
        tf_ulp_hist_clear(&h);
        tf_ulp_hist_add(&h, r, r, n);
        bits = (tf_ulp_bits){ 0 };
        tf_ulp_hist_entropy(&h, &bits);
        ck_assert(tf_ulp_bits_total(&bits) == 0 && bits.weights == n);
        tf_ulp_hist_free(&h);
        free(x);
        free(r);
    }
}
END_TEST

/* Pooling the contexts costs exactly what they told apart. */
START_TEST(test_entropy_without_context)
{
    tf_ulp_hist h;
    tf_error e;
    ck_assert(tf_ulp_hist_init(&h, TF_DT_BF16, &e) == 0);
    uint64_t *low = h.counts + (size_t)100 * h.n_sym, *high = h.counts + (size_t)120 * h.n_sym;
    /* Each context certain of its symbol: 0 bits with it, 1 a symbol
     * without. */
    low[0] = high[9] = 2;
    h.weights = 4;
    tf_ulp_bits bits = { 0 };
    tf_ulp_hist_entropy(&h, &bits);
    ck_assert(bits.b + bits.q1 + bits.q2 == 0);
    ck_assert_double_eq_tol(tf_ulp_hist_entropy_without_context(&h), 4.0, 1e-12);
    /* Both contexts alike: the context is worth nothing. */
    low[9] = high[0] = 2;
    h.weights = 8;
    bits = (tf_ulp_bits){ 0 };
    tf_ulp_hist_entropy(&h, &bits);
    ck_assert_double_eq_tol(bits.b + bits.q1 + bits.q2, 8.0, 1e-12);
    ck_assert_double_eq_tol(tf_ulp_hist_entropy_without_context(&h), 8.0, 1e-12);
    tf_ulp_hist_clear(&h);
    ck_assert(tf_ulp_hist_entropy_without_context(&h) == 0);
    tf_ulp_hist_free(&h);
}
END_TEST

static Suite *ulp_stats_suite(void)
{
    Suite *s = suite_create("ulp_stats");
    TCase *tc = tcase_create("ulp_stats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_breakdown_sums_to_stored_bits);
    tcase_add_test(tc, test_breakdown_accumulates);
    tcase_add_test(tc, test_stages_get_their_bits);
    tcase_add_test(tc, test_corrupt_chunks_fail);
    tcase_add_test(tc, test_refuses_what_is_not_ulp);
    tcase_add_test(tc, test_entropy_chain_rule);
    tcase_add_test(tc, test_entropy_without_context);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ulp_stats_suite());
}
