/* Static interleaved rANS: table fitting and serialization, stream round
 * trips, and refusal of anything a hostile archive could feed it. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/entropy/rans.h"

/* A geometric-ish symbol: small values are much more likely. */
static unsigned skewed_symbol(unsigned n_sym)
{
    unsigned s = (unsigned)__builtin_ctzll(rng_next() | (1ull << 63));
    return (s + (unsigned)(rng_next() % 3)) % n_sym;
}

typedef struct {
    unsigned n_ctx, n_sym;
    size_t n;
    uint16_t *ctx;
    uint8_t *sym;
    uint64_t *counts;
} sample;

static sample make_sample(unsigned n_ctx, unsigned n_sym, size_t n, uint64_t seed)
{
    rng_state = seed;
    sample s = { .n_ctx = n_ctx, .n_sym = n_sym, .n = n };
    s.ctx = malloc((n + 1) * sizeof *s.ctx);
    s.sym = malloc(n + 1);
    s.counts = calloc((size_t)n_ctx * n_sym, sizeof *s.counts);
    ck_assert(s.ctx && s.sym && s.counts);
    for (size_t i = 0; i < n; i++) {
        s.ctx[i] = (uint16_t)(rng_next() % n_ctx);
        /* Context c shifts its distribution, so contexts differ. */
        s.sym[i] = (uint8_t)((skewed_symbol(n_sym) + s.ctx[i]) % n_sym);
        s.counts[(size_t)s.ctx[i] * n_sym + s.sym[i]]++;
    }
    return s;
}

static void free_sample(sample *s)
{
    free(s->ctx);
    free(s->sym);
    free(s->counts);
}

/* Encodes s with a table fit on it; returns the stream in *stream. */
static void encode_sample(const sample *s, unsigned prec, unsigned lanes, tf_rans_table *t,
                          tf_buf *stream)
{
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(t, s->n_ctx, s->n_sym, prec, s->counts, &e), 0);
    tf_rans_encoder enc;
    ck_assert_int_eq(tf_rans_encoder_init(&enc, t, &e), 0);
    *stream = (tf_buf){ 0 };
    ck_assert_msg(tf_rans_encode(&enc, s->ctx, s->sym, s->n, lanes, stream, &e) == 0, "%s",
                  e.msg);
    tf_rans_encoder_free(&enc);
}

/* Decodes stream[0..len) from an exactly sized copy, so that ASan sees
 * any read past it; with packed or dense decoding slots. */
static int decode_copy_with(const tf_rans_table *t, bool dense, const uint8_t *stream,
                            size_t len, const uint16_t *ctx, uint8_t *sym, size_t n, tf_error *e)
{
    uint8_t *copy = malloc(len ? len : 1);
    ck_assert(copy);
    if (len)
        memcpy(copy, stream, len);
    tf_rans_decoder dec;
    int rc = tf_rans_decoder_init(&dec, t, NULL, dense, e);
    if (rc == 0) {
        tf_cursor r = tf_cursor_make(copy, len);
        rc = tf_rans_decode(&dec, &r, ctx, sym, n, e);
        if (rc == 0 && tf_cursor_left(&r))
            rc = -1;
        tf_rans_decoder_free(&dec);
    }
    free(copy);
    return rc;
}

static int decode_copy(const tf_rans_table *t, const uint8_t *stream, size_t len,
                       const uint16_t *ctx, uint8_t *sym, size_t n, tf_error *e)
{
    return decode_copy_with(t, false, stream, len, ctx, sym, n, e);
}

static void roundtrip(unsigned n_ctx, unsigned n_sym, size_t n, unsigned prec, unsigned lanes,
                      uint64_t seed)
{
    sample s = make_sample(n_ctx, n_sym, n, seed);
    tf_rans_table t;
    tf_buf stream;
    encode_sample(&s, prec, lanes, &t, &stream);
    tf_cursor head = tf_cursor_make(stream.data, stream.len);
    ck_assert_uint_eq(tf_read_varint(&head), stream.len - head.pos);
    ck_assert_uint_eq(tf_read_u8(&head), lanes);
    uint8_t *got = malloc(n + 1);
    tf_error e;
    for (int dense = 0; dense < 2; dense++) {
        memset(got, 0, n + 1);
        ck_assert_msg(decode_copy_with(&t, dense, stream.data, stream.len, s.ctx, got, n, &e) == 0,
                      "%s", e.msg);
        ck_assert(n == 0 || memcmp(got, s.sym, n) == 0);
    }
    free(got);
    tf_buf_free(&stream);
    tf_rans_table_free(&t);
    free_sample(&s);
}

START_TEST(test_normalize_sums_and_support)
{
    sample s = make_sample(40, 200, 20000, 7);
    for (unsigned prec = TF_RANS_MIN_PREC; prec <= TF_RANS_MAX_PREC; prec++) {
        tf_rans_table t;
        tf_error e;
        ck_assert_int_eq(tf_rans_table_fit(&t, 40, 200, prec, s.counts, &e), 0);
        for (unsigned c = 0; c < 40; c++) {
            unsigned sum = 0;
            for (unsigned k = 0; k < 200; k++) {
                unsigned f = tf_rans_table_freq(&t, c, k);
                ck_assert_int_eq(f > 0, s.counts[c * 200 + k] > 0);
                sum += f;
            }
            ck_assert_uint_eq(sum, 1u << prec);
        }
        tf_rans_table_free(&t);
    }
    free_sample(&s);
}
END_TEST

START_TEST(test_normalize_extremes)
{
    /* One symbol takes the whole row; a huge count next to tiny ones
     * leaves the tiny ones at frequency 1; unseen contexts get no row. */
    uint64_t counts[3 * 256] = { 0 };
    counts[0 * 256 + 17] = 5;
    counts[2 * 256 + 0] = 1ull << 60;
    for (unsigned k = 1; k < 256; k++)
        counts[2 * 256 + k] = 1;
    tf_rans_table t;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 3, 256, TF_RANS_MIN_PREC, counts, &e), 0);
    ck_assert_uint_eq(t.n_rows, 2);
    ck_assert_uint_eq(tf_rans_table_freq(&t, 0, 17), 1u << TF_RANS_MIN_PREC);
    ck_assert_int_eq(t.row_of_ctx[1], -1);
    ck_assert_uint_eq(tf_rans_table_freq(&t, 2, 0), 1);
    ck_assert_uint_eq(tf_rans_table_freq(&t, 2, 255), 1);
    tf_rans_table_free(&t);
    ck_assert_int_eq(tf_rans_table_fit(&t, 3, 256, TF_RANS_MAX_PREC + 1, counts, &e), -1);
}
END_TEST

START_TEST(test_table_write_read)
{
    sample s = make_sample(300, 60, 50000, 11);
    tf_rans_table t, back;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 300, 60, 11, s.counts, &e), 0);
    tf_buf b = { 0 };
    ck_assert_int_eq(tf_rans_table_write(&t, &b, &e), 0);
    tf_cursor r = tf_cursor_make(b.data, b.len);
    ck_assert_int_eq(tf_rans_table_read(&back, &r, 300, 60, &e), 0);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    ck_assert_uint_eq(back.n_rows, t.n_rows);
    ck_assert_uint_eq(back.prec, 11);
    for (unsigned c = 0; c < 300; c++)
        for (unsigned k = 0; k < 60; k++)
            ck_assert_uint_eq(tf_rans_table_freq(&back, c, k), tf_rans_table_freq(&t, c, k));
    tf_rans_table_free(&back);
    tf_rans_table_free(&t);
    tf_buf_free(&b);
    free_sample(&s);
}
END_TEST

static int read_table_bytes(const uint8_t *p, size_t len, unsigned n_ctx, unsigned n_sym)
{
    uint8_t *copy = malloc(len ? len : 1);
    ck_assert(copy);
    if (len)
        memcpy(copy, p, len);
    tf_cursor r = tf_cursor_make(copy, len);
    tf_rans_table t;
    tf_error e;
    int rc = tf_rans_table_read(&t, &r, n_ctx, n_sym, &e);
    if (rc == 0)
        tf_rans_table_free(&t);
    free(copy);
    return rc;
}

START_TEST(test_table_rejects_bad_bytes)
{
    /* prec 8, 1 row: context 2, symbols 1..3, freqs 100, 0, rest. */
    const uint8_t good[] = { 8, 1, 2, 1, 2, 100, 0 };
    ck_assert_int_eq(read_table_bytes(good, sizeof good, 4, 4), 0);
    for (size_t cut = 0; cut < sizeof good; cut++)
        ck_assert_int_eq(read_table_bytes(good, cut, 4, 4), -1);
    const uint8_t bad[][8] = {
        { 7, 1, 2, 1, 2, 100, 0 },      /* precision below range */
        { 12, 1, 2, 1, 2, 100, 0 },     /* precision above range */
        { 8, 1, 4, 1, 2, 100, 0 },      /* context out of range */
        { 8, 1, 2, 1, 3, 100, 0, 0 },   /* span past the alphabet */
        { 8, 1, 2, 1, 2, 0, 100 },      /* first symbol has no frequency */
        { 8, 1, 2, 1, 2, 0x80, 2, 0 },  /* sum reaches 256: last gets 0 */
        { 8, 5, 0, 0, 0, 0, 0, 0 },     /* more rows than contexts */
        { 8, 2, 3, 0, 0, 0, 0, 0 },     /* second row's context out of range */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(read_table_bytes(bad[i], sizeof bad[i], 4, 4) == -1, "case %zu", i);
    rng_state = 3;
    for (int trial = 0; trial < 2000; trial++) {
        uint8_t junk[64];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)rng_next();
        junk[0] = (uint8_t)(8 + trial % 5);
        read_table_bytes(junk, 1 + (size_t)trial % sizeof junk, 16, 60); /* must not crash */
    }
}
END_TEST

START_TEST(test_roundtrip_sizes)
{
    const size_t sizes[] = { 0, 1, 2, 7, 8, 9, 15, 16, 17, 1001, 100003 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (unsigned lanes = 1; lanes <= TF_RANS_MAX_LANES; lanes *= 2) {
            roundtrip(1, 2, sizes[i], 11, lanes, 100 + i);
            roundtrip(37, 60, sizes[i], TF_RANS_MAX_PREC, lanes, 200 + i);
            roundtrip(5, 256, sizes[i], TF_RANS_MIN_PREC, lanes, 300 + i);
        }
    }
}
END_TEST

START_TEST(test_roundtrip_without_contexts)
{
    sample s = make_sample(1, 100, 5000, 5);
    tf_rans_table t;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 1, 100, 10, s.counts, &e), 0);
    tf_rans_encoder enc;
    ck_assert_int_eq(tf_rans_encoder_init(&enc, &t, &e), 0);
    tf_buf stream = { 0 };
    ck_assert_int_eq(tf_rans_encode(&enc, NULL, s.sym, s.n, 4, &stream, &e), 0);
    uint8_t *got = malloc(s.n);
    ck_assert_int_eq(decode_copy(&t, stream.data, stream.len, NULL, got, s.n, &e), 0);
    ck_assert(memcmp(got, s.sym, s.n) == 0);
    free(got);
    tf_buf_free(&stream);
    tf_rans_encoder_free(&enc);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

START_TEST(test_certain_symbol_costs_nothing)
{
    /* A row with one symbol has frequency 1 << prec: no words at all. */
    uint64_t counts[4] = { 0, 0, 1000, 0 };
    uint8_t sym[1000];
    memset(sym, 2, sizeof sym);
    tf_rans_table t;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 1, 4, TF_RANS_MAX_PREC, counts, &e), 0);
    tf_rans_encoder enc;
    ck_assert_int_eq(tf_rans_encoder_init(&enc, &t, &e), 0);
    tf_buf stream = { 0 };
    ck_assert_int_eq(tf_rans_encode(&enc, NULL, sym, sizeof sym, 8, &stream, &e), 0);
    ck_assert_uint_eq(stream.len, 1 + 1 + 4 * 8);
    uint8_t got[1000];
    ck_assert_int_eq(decode_copy(&t, stream.data, stream.len, NULL, got, sizeof got, &e), 0);
    ck_assert(memcmp(got, sym, sizeof sym) == 0);
    tf_buf_free(&stream);
    tf_rans_encoder_free(&enc);
    tf_rans_table_free(&t);
}
END_TEST

START_TEST(test_compresses_to_entropy)
{
    /* 2 contexts, each a biased coin: about 0.47 bits per symbol. */
    const size_t n = 200000;
    uint8_t *sym = malloc(n);
    uint16_t *ctx = malloc(n * sizeof *ctx);
    uint64_t counts[4] = { 0 };
    rng_state = 9;
    for (size_t i = 0; i < n; i++) {
        ctx[i] = (uint16_t)(i & 1);
        sym[i] = (uint8_t)(rng_next() % 10 == 0 ? !ctx[i] : ctx[i]);
        counts[ctx[i] * 2 + sym[i]]++;
    }
    tf_rans_table t;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 2, 2, TF_RANS_MAX_PREC, counts, &e), 0);
    tf_rans_encoder enc;
    ck_assert_int_eq(tf_rans_encoder_init(&enc, &t, &e), 0);
    tf_buf stream = { 0 };
    ck_assert_int_eq(tf_rans_encode(&enc, ctx, sym, n, 1, &stream, &e), 0);
    double bits = 8.0 * (double)stream.len / (double)n;
    ck_assert_msg(bits > 0.46 && bits < 0.48, "%.4f bits per symbol", bits);
    tf_buf_free(&stream);
    tf_rans_encoder_free(&enc);
    tf_rans_table_free(&t);
    free(sym);
    free(ctx);
}
END_TEST

/* The plug-in entropy, row by row: sum c log2(total / c), for counts
 * small and large (below and above the lookup of c log2 c), zeros and
 * empty rows. */
START_TEST(test_entropy_bits)
{
    const uint64_t flat[4] = { 1, 1, 1, 1 };
    ck_assert_double_eq_tol(tf_rans_entropy_bits(flat, 1, 4), 8.0, 1e-12);
    const uint64_t rows[3][3] = { { 3, 0, 1 }, { 0, 0, 0 }, { 5000, 5000, 0 } };
    ck_assert_double_eq_tol(tf_rans_entropy_bits(&rows[0][0], 3, 3),
                            3 * log2(4.0 / 3) + 2 + 10000, 1e-9);
    for (int round = 0; round < 20; round++) {
        uint64_t c[64];
        double want = 0;
        uint64_t total = 0;
        for (unsigned i = 0; i < 64; i++) {
            c[i] = rng_next() % (round & 1 ? 100000 : 50);
            total += c[i];
        }
        for (unsigned i = 0; i < 64; i++)
            if (c[i])
                want += (double)c[i] * log2((double)total / (double)c[i]);
        ck_assert_double_eq_tol(tf_rans_entropy_bits(c, 1, 64), want, want * 1e-12 + 1e-9);
    }
}
END_TEST

START_TEST(test_encode_refuses_uncovered_symbols)
{
    uint64_t counts[2 * 4] = { 5, 5, 0, 0, 0, 0, 0, 0 }; /* context 1 unseen */
    tf_rans_table t;
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(&t, 2, 4, 10, counts, &e), 0);
    tf_rans_encoder enc;
    ck_assert_int_eq(tf_rans_encoder_init(&enc, &t, &e), 0);
    tf_buf stream = { 0 };
    uint8_t zero_freq[] = { 0, 1, 3 };
    uint16_t ctx0[] = { 0, 0, 0 }, ctx1[] = { 0, 1, 0 }, ctx_big[] = { 0, 7, 0 };
    uint8_t fine[] = { 0, 1, 1 }, too_big[] = { 0, 9, 1 };
    ck_assert_int_eq(tf_rans_encode(&enc, ctx0, zero_freq, 3, 2, &stream, &e), -1);
    ck_assert_int_eq(tf_rans_encode(&enc, ctx1, fine, 3, 2, &stream, &e), -1);
    ck_assert_int_eq(tf_rans_encode(&enc, ctx_big, fine, 3, 2, &stream, &e), -1);
    ck_assert_int_eq(tf_rans_encode(&enc, ctx0, too_big, 3, 2, &stream, &e), -1);
    ck_assert_int_eq(tf_rans_encode(&enc, ctx0, fine, 3, 3, &stream, &e), -1); /* bad lanes */
    ck_assert_int_eq(tf_rans_encode(&enc, ctx0, fine, 3, 32, &stream, &e), -1);
    ck_assert_uint_eq(stream.len, 0);
    ck_assert_int_eq(tf_rans_encode(&enc, ctx0, fine, 3, 2, &stream, &e), 0);
    /* Decoding needs a row for every context the data uses. */
    tf_rans_decoder dec;
    uint8_t used[2] = { 1, 1 };
    ck_assert_int_eq(tf_rans_decoder_init(&dec, &t, used, false, &e), -1);
    uint8_t got[3];
    ck_assert_int_eq(decode_copy(&t, stream.data, stream.len, ctx1, got, 3, &e), -1);
    tf_buf_free(&stream);
    tf_rans_encoder_free(&enc);
    tf_rans_table_free(&t);
}
END_TEST

/* The symbols of s with their contexts spread out: context c becomes
 * 2 + 3c, so that the occupied contexts start above 0 and have gaps. */
static sample spread_contexts(sample s)
{
    unsigned n_ctx = 3 * s.n_ctx + 3;
    uint64_t *counts = calloc((size_t)n_ctx * s.n_sym, sizeof *counts);
    ck_assert(counts);
    for (size_t i = 0; i < s.n; i++) {
        s.ctx[i] = (uint16_t)(2 + 3 * s.ctx[i]);
        counts[(size_t)s.ctx[i] * s.n_sym + s.sym[i]]++;
    }
    free(s.counts);
    s.counts = counts;
    s.n_ctx = n_ctx;
    return s;
}

static unsigned bits_for(unsigned n_sym)
{
    unsigned b = 0;
    while ((1u << b) < n_sym)
        b++;
    return b;
}

/* Each SIMD cap the tests run under; the last lifts it. */
static const tf_simd_level simd_caps[] = { TF_SIMD_NONE, TF_SIMD_AVX2, TF_SIMD_AVX512 };
#define N_SIMD_CAPS (sizeof simd_caps / sizeof simd_caps[0])

/* tf_rans_encode_indexed of s with SIMD capped at cap. */
static int encode_indexed_with(tf_simd_level cap, const tf_rans_indexed *ix, const uint16_t *idx,
                               size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    tf_simd_level_cap(cap);
    int rc = tf_rans_encode_indexed(ix, idx, n, lanes, out, e);
    tf_simd_level_cap(TF_SIMD_AVX512);
    return rc;
}

START_TEST(test_simd_cap)
{
    /* each cap holds until lifted, whatever the CPU has */
    const tf_simd_level full = tf_simd_level_get();
    for (size_t v = 0; v < N_SIMD_CAPS; v++) {
        tf_simd_level_cap(simd_caps[v]);
        tf_simd_level want = full < simd_caps[v] ? full : simd_caps[v];
        ck_assert_int_eq(tf_simd_level_get(), want);
        ck_assert_int_eq(tf_simd_level_get(), want);
    }
    ck_assert_int_eq(tf_simd_level_get(), full);
}
END_TEST

/* A precision 11 table fit on s, and its coding indexes of sym_bits. */
static void fit_indexed(const sample *s, unsigned sym_bits, tf_rans_table *t, tf_rans_indexed *ix)
{
    tf_error e;
    ck_assert_int_eq(tf_rans_table_fit(t, s->n_ctx, s->n_sym, 11, s->counts, &e), 0);
    ck_assert_int_eq(tf_rans_indexed_init(ix, t, sym_bits, &e), 0);
}

/* Two one-lane streams coded side by side are the two streams coded one
 * after the other, byte for byte, for lengths equal and not (either
 * longer, either empty), appended after what their buffers held; a
 * symbol without a frequency fails the pair. */
START_TEST(test_pair_writes_the_same_bytes)
{
    const size_t lens[][2] = { { 0, 0 }, { 1, 0 }, { 0, 5 }, { 1024, 1024 }, { 1024, 1000 },
                               { 7, 2047 }, { 333, 334 } };
    sample s = make_sample(6, 40, 4096, 77);
    tf_rans_table t;
    tf_rans_indexed ix;
    fit_indexed(&s, bits_for(s.n_sym), &t, &ix);
    uint16_t *idx = malloc(s.n * sizeof *idx);
    for (size_t i = 0; i < s.n; i++)
        idx[i] = (uint16_t)tf_rans_index(&ix, s.ctx[i], s.sym[i]);
    tf_error e;
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const uint16_t *const two[2] = { idx, idx + 2048 };
        tf_buf want[2] = { 0 }, got[2] = { 0 };
        for (unsigned j = 0; j < 2; j++) {
            ck_assert_int_eq(tf_rans_encode_indexed(&ix, two[j], lens[k][j], 1, &want[j], &e), 0);
            tf_buf_put(&got[j], "head", 4 + j); /* what the buffers held */
        }
        tf_buf *const out[2] = { &got[0], &got[1] };
        ck_assert_msg(tf_rans_encode_indexed_pair(&ix, two, lens[k], out, &e) == 0, "%s", e.msg);
        for (unsigned j = 0; j < 2; j++) {
            ck_assert_uint_eq(got[j].len, 4 + j + want[j].len);
            ck_assert(memcmp(got[j].data + 4 + j, want[j].data, want[j].len) == 0);
            tf_buf_free(&want[j]);
            tf_buf_free(&got[j]);
        }
    }
    /* an index whose entry has no frequency: the row past the last */
    idx[2048 + 17] = (uint16_t)(ix.n_rows << ix.sym_bits);
    const uint16_t *const two[2] = { idx, idx + 2048 };
    const size_t n[2] = { 100, 100 };
    tf_buf got[2] = { 0 };
    tf_buf *const out[2] = { &got[0], &got[1] };
    ck_assert_int_lt(tf_rans_encode_indexed_pair(&ix, two, n, out, &e), 0);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_uint_eq(got[0].len + got[1].len, 0);
    tf_buf_free(&got[0]);
    tf_buf_free(&got[1]);
    free(idx);
    tf_rans_indexed_free(&ix);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

START_TEST(test_indexed_encoder_writes_the_same_bytes)
{
    /* Every size around the 16-lane rounds, every lane count, with and
     * without SIMD: byte for byte what tf_rans_encode writes. */
    const size_t sizes[] = { 0, 1, 15, 16, 17, 63, 64, 65, 1000, 4099, 100003 };
    const unsigned shapes[][3] = { { 1, 2, 11 }, { 37, 60, 11 }, { 5, 124, 10 }, { 9, 28, 8 } };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            sample s = spread_contexts(
                make_sample(shapes[k][0], shapes[k][1], sizes[z], 400 + 10 * k + z));
            tf_rans_table t;
            tf_rans_encoder enc;
            tf_rans_indexed ix;
            tf_error e;
            ck_assert_int_eq(
                tf_rans_table_fit(&t, s.n_ctx, s.n_sym, shapes[k][2], s.counts, &e), 0);
            ck_assert_int_eq(tf_rans_encoder_init(&enc, &t, &e), 0);
            ck_assert_msg(tf_rans_indexed_init(&ix, &t, bits_for(s.n_sym), &e) == 0, "%s", e.msg);
            uint16_t *idx = malloc((s.n + 1) * sizeof *idx);
            for (size_t i = 0; i < s.n; i++)
                idx[i] = (uint16_t)tf_rans_index(&ix, s.ctx[i], s.sym[i]);
            for (unsigned lanes = 1; lanes <= TF_RANS_MAX_LANES; lanes *= 2) {
                tf_buf want = { 0 };
                ck_assert_int_eq(tf_rans_encode(&enc, s.ctx, s.sym, s.n, lanes, &want, &e), 0);
                for (size_t v = 0; v < N_SIMD_CAPS; v++) {
                    tf_buf got = { 0 };
                    ck_assert_int_eq(
                        encode_indexed_with(simd_caps[v], &ix, idx, s.n, lanes, &got, &e), 0);
                    ck_assert_msg(got.len == want.len && memcmp(got.data, want.data, got.len) == 0,
                                  "shape %zu n %zu lanes %u simd cap %d", k, s.n, lanes,
                                  (int)simd_caps[v]);
                    tf_buf_free(&got);
                }
                tf_buf_free(&want);
            }
            free(idx);
            tf_rans_indexed_free(&ix);
            tf_rans_encoder_free(&enc);
            tf_rans_table_free(&t);
            free_sample(&s);
        }
    }
}
END_TEST

START_TEST(test_turn_streams_are_the_streams_of_their_rounds)
{
    /* Stream j of k taking turns by rounds of `lanes` is what
     * tf_rans_encode_indexed writes for the symbols of its rounds copied
     * out in order: sizes ending in any stream's round, part rounds
     * included, every SIMD cap. */
    const size_t sizes[] = { 0, 5, 16, 47, 64, 129, 1000, 4099, 33000 };
    sample s = spread_contexts(make_sample(37, 60, 33000, 77));
    tf_rans_table t;
    tf_rans_indexed ix;
    tf_error e;
    fit_indexed(&s, 6, &t, &ix);
    uint16_t *idx = malloc(s.n * sizeof *idx), *mine = malloc(s.n * sizeof *mine);
    ck_assert(idx && mine);
    for (size_t i = 0; i < s.n; i++)
        idx[i] = (uint16_t)tf_rans_index(&ix, s.ctx[i], s.sym[i]);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        for (unsigned lanes = 1; lanes <= TF_RANS_MAX_LANES; lanes *= 4) {
            for (unsigned k = 1; k <= 3; k++) {
                for (unsigned j = 0; j < k; j++) {
                    size_t m = 0;
                    for (size_t i = 0; i < sizes[z]; i++)
                        if (i / lanes % k == j)
                            mine[m++] = idx[i];
                    tf_buf want = { 0 };
                    ck_assert_int_eq(tf_rans_encode_indexed(&ix, mine, m, lanes, &want, &e), 0);
                    for (size_t v = 0; v < N_SIMD_CAPS; v++) {
                        tf_buf got = { 0 };
                        tf_simd_level_cap(simd_caps[v]);
                        int rc = tf_rans_encode_indexed_turn(&ix, idx, sizes[z], lanes, k, j,
                                                             &got, &e);
                        tf_simd_level_cap(TF_SIMD_AVX512);
                        ck_assert_int_eq(rc, 0);
                        ck_assert_msg(got.len == want.len &&
                                          memcmp(got.data, want.data, got.len) == 0,
                                      "n %zu lanes %u stream %u of %u simd cap %d", sizes[z],
                                      lanes, j, k, (int)simd_caps[v]);
                        tf_buf_free(&got);
                    }
                    tf_buf_free(&want);
                }
            }
        }
    }
    /* A symbol without a frequency is refused by its stream alone. */
    idx[16 * 7 + 3] = (uint16_t)tf_rans_index(&ix, 0, 0); /* context 0 has no row */
    for (unsigned j = 0; j < 2; j++) {
        tf_buf out = { 0 };
        ck_assert_int_eq(tf_rans_encode_indexed_turn(&ix, idx, 4099, 16, 2, j, &out, &e),
                         j == 1 ? -1 : 0);
        tf_buf_free(&out);
    }
    free(idx);
    free(mine);
    tf_rans_indexed_free(&ix);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

START_TEST(test_indexed_encoder_refuses_uncovered_symbols)
{
    /* Contexts 2, 5, 8, ... are occupied; a symbol without frequency, or
     * a context outside the span or in a gap of it, is refused wherever it
     * falls: in the vector rounds or in the scalar tail. */
    sample s = spread_contexts(make_sample(4, 20, 1000, 31));
    tf_rans_table t;
    tf_rans_indexed ix;
    tf_error e;
    fit_indexed(&s, 5, &t, &ix);
    ck_assert_uint_eq(ix.ctx_lo, 2);
    ck_assert_uint_eq(ix.n_rows, 10);
    uint16_t *idx = malloc(s.n * sizeof *idx);
    const size_t at[] = { 0, 500, 995, 999 };
    const unsigned bad_ctx[] = { 0, 3, 14, 200 };
    for (size_t a = 0; a < 4; a++) {
        for (size_t b = 0; b < 5; b++) {
            for (size_t i = 0; i < s.n; i++)
                idx[i] = (uint16_t)tf_rans_index(&ix, s.ctx[i], s.sym[i]);
            unsigned ctx = b < 4 ? bad_ctx[b] : s.ctx[at[a]], sym = s.sym[at[a]];
            if (b == 4) /* an occupied context, a symbol it never saw */
                while (tf_rans_table_freq(&t, ctx, sym))
                    sym = (sym + 1) % s.n_sym;
            idx[at[a]] = (uint16_t)tf_rans_index(&ix, ctx, sym);
            for (size_t v = 0; v < N_SIMD_CAPS; v++) {
                tf_buf out = { 0 };
                ck_assert_int_eq(encode_indexed_with(simd_caps[v], &ix, idx, s.n, 16, &out, &e), -1);
                ck_assert_uint_eq(out.len, 0);
                tf_buf_free(&out);
            }
        }
    }
    /* Indexes must fit 16 bits and every symbol its field. */
    tf_rans_indexed small;
    ck_assert_int_eq(tf_rans_indexed_init(&small, &t, 4, &e), -1);
    free(idx);
    tf_rans_indexed_free(&ix);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

START_TEST(test_decode_rejects_truncation)
{
    sample s = make_sample(3, 20, 333, 21);
    tf_rans_table t;
    tf_buf stream;
    encode_sample(&s, 11, 16, &t, &stream);
    uint8_t *got = malloc(s.n);
    tf_error e;
    for (size_t cut = 0; cut < stream.len; cut++)
        ck_assert_msg(decode_copy(&t, stream.data, cut, s.ctx, got, s.n, &e) == -1, "cut %zu",
                      cut);
    /* Asking for fewer or more symbols than were coded fails too. */
    ck_assert_int_eq(decode_copy(&t, stream.data, stream.len, s.ctx, got, s.n - 1, &e), -1);
    free(got);
    got = malloc(s.n + 1);
    s.ctx[s.n] = 0;
    ck_assert_int_eq(decode_copy(&t, stream.data, stream.len, s.ctx, got, s.n + 1, &e), -1);
    free(got);
    tf_buf_free(&stream);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

START_TEST(test_decode_survives_corruption)
{
    sample s = make_sample(4, 30, 2000, 31);
    tf_rans_table t;
    tf_buf stream;
    encode_sample(&s, TF_RANS_MAX_PREC, 8, &t, &stream);
    uint8_t *got = malloc(s.n), *bytes = malloc(stream.len);
    tf_error e;
    rng_state = 77;
    int failures = 0;
    for (int trial = 0; trial < 3000; trial++) {
        memcpy(bytes, stream.data, stream.len);
        size_t at = (size_t)(rng_next() % stream.len);
        bytes[at] ^= (uint8_t)(1 + rng_next() % 255);
        failures += decode_copy(&t, bytes, stream.len, s.ctx, got, s.n, &e) < 0;
    }
    /* Any change moves the final lane states: nearly all must fail. */
    ck_assert_int_ge(failures, 2990);
    for (int trial = 0; trial < 500; trial++) {
        for (size_t i = 0; i < stream.len; i++)
            bytes[i] = (uint8_t)rng_next();
        ck_assert_int_eq(decode_copy(&t, bytes, stream.len, s.ctx, got, s.n, &e), -1);
    }
    free(got);
    free(bytes);
    tf_buf_free(&stream);
    tf_rans_table_free(&t);
    free_sample(&s);
}
END_TEST

static Suite *rans_suite(void)
{
    Suite *s = suite_create("rans");
    TCase *tc = tcase_create("rans");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_normalize_sums_and_support);
    tcase_add_test(tc, test_normalize_extremes);
    tcase_add_test(tc, test_table_write_read);
    tcase_add_test(tc, test_table_rejects_bad_bytes);
    tcase_add_test(tc, test_roundtrip_sizes);
    tcase_add_test(tc, test_roundtrip_without_contexts);
    tcase_add_test(tc, test_certain_symbol_costs_nothing);
    tcase_add_test(tc, test_compresses_to_entropy);
    tcase_add_test(tc, test_entropy_bits);
    tcase_add_test(tc, test_encode_refuses_uncovered_symbols);
    tcase_add_test(tc, test_simd_cap);
    tcase_add_test(tc, test_indexed_encoder_writes_the_same_bytes);
    tcase_add_test(tc, test_pair_writes_the_same_bytes);
    tcase_add_test(tc, test_indexed_encoder_refuses_uncovered_symbols);
    tcase_add_test(tc, test_turn_streams_are_the_streams_of_their_rounds);
    tcase_add_test(tc, test_decode_rejects_truncation);
    tcase_add_test(tc, test_decode_survives_corruption);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(rans_suite());
}
