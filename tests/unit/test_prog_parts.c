/* The parts of prog below the codec row: canonical Huffman codes, the
 * word operators in both directions, every literal coding on its own,
 * hand-built programs of every operator executed against the words they
 * mean, and the validation of programs that break the typing rules. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/entropy/huffman.h"
#include "codec/prog/prog_exec.h"
#include "codec/prog/prog_leaf.h"
#include "codec/prog/prog_leaf_codings.h"
#include "codec/prog/prog_ops.h"
#include "codec/prog/prog_serialize.h"

/* ---- Huffman ---- */

static uint32_t kraft(const uint8_t *len, unsigned n)
{
    uint32_t k = 0;
    for (unsigned s = 0; s < n; s++)
        k += len[s] ? 1u << (TF_HUFF_MAX_LEN - len[s]) : 0;
    return k;
}

START_TEST(test_huffman_lengths)
{
    rng_state = 1;
    for (int round = 0; round < 200; round++) {
        uint64_t count[256] = { 0 };
        unsigned n = 1 + (unsigned)(rng_next() % 256), shape = round % 3;
        double total = 0;
        for (unsigned s = 0; s < n; s++) {
            /* uniform, geometric (deep trees, past the limit), sparse */
            count[s] = shape == 0   ? 1 + rng_next() % 1000
                       : shape == 1 ? (uint64_t)1 << (s < 40 ? 40 - s : 0)
                                    : (rng_next() % 4 == 0) * (1 + rng_next() % 50);
            total += (double)count[s];
        }
        uint8_t len[256];
        /* any limit; raised to what the symbols present need */
        unsigned limit = 1 + (unsigned)(rng_next() % TF_HUFF_MAX_LEN), need = 0, present = 0;
        for (unsigned s = 0; s < n; s++)
            present += count[s] > 0;
        while ((1u << need) < present)
            need++;
        limit = limit > need ? limit : need;
        tf_huff_lengths(count, n, limit, len);
        present = 0;
        double entropy = 0;
        for (unsigned s = 0; s < n; s++) {
            ck_assert_int_le(len[s], limit > 1 ? limit : 1);
            ck_assert_int_eq(len[s] > 0, count[s] > 0);
            present += count[s] > 0;
            if (count[s])
                entropy -= (double)count[s] * log2((double)count[s] / total);
        }
        ck_assert_uint_le(kraft(len, n), 1u << TF_HUFF_MAX_LEN);
        if (present >= 2 && shape == 0 && limit == TF_HUFF_MAX_LEN) /* within a bit a symbol */
            ck_assert_double_le((double)tf_huff_cost_bits(count, len, n), entropy + total);
    }
}
END_TEST

START_TEST(test_huffman_table)
{
    uint8_t len[256] = { 0 }, back[256];
    len[3] = 1;
    len[4] = 2;
    len[9] = 3;
    len[10] = 3;
    tf_buf b = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_huff_table_write(len, 256, &b, &e), 0);
    ck_assert_uint_eq(b.len, tf_huff_table_size(len, 256));
    tf_cursor r = tf_cursor_make(b.data, b.len);
    unsigned first = 0;
    ck_assert_int_eq(tf_huff_table_read(&r, 256, back, &first, &e), 8); /* symbols 3..10 */
    ck_assert_uint_eq(first, 3);
    ck_assert_mem_eq(len, back, 256);
    ck_assert_uint_eq(tf_cursor_left(&r), 0);
    r = tf_cursor_make(b.data, b.len);
    ck_assert_int_eq(tf_huff_table_read(&r, 10, back, &first, &e), -1); /* symbols out of range */
    /* over-full: Kraft sum above 1 */
    static const uint8_t over[] = { 3, 3, 0x11, 0x01 };
    r = tf_cursor_make(over, sizeof over);
    ck_assert_int_eq(tf_huff_table_read(&r, 256, back, &first, &e), -1);
    /* a length past the limit, a nonzero padding nibble */
    static const uint8_t deep[] = { 0, 2, 0xd1 }, pad[] = { 0, 1, 0x11 };
    r = tf_cursor_make(deep, sizeof deep);
    ck_assert_int_eq(tf_huff_table_read(&r, 256, back, &first, &e), -1);
    r = tf_cursor_make(pad, sizeof pad);
    ck_assert_int_eq(tf_huff_table_read(&r, 256, back, &first, &e), -1);
    tf_buf_free(&b);
}
END_TEST

/* ---- word operators ---- */

START_TEST(test_ops_are_inverse)
{
    rng_state = 2;
    uint64_t x[257], child[257], back[257];
    for (unsigned width = 1; width <= 64; width++) {
        for (size_t i = 0; i < ARRAY_LEN(x); i++)
            x[i] = rng_next() & tf_prog_mask(width);
        for (unsigned kind = 0; kind < TF_PROG_MAP_KINDS; kind++) {
            if (kind == TF_PROG_MAP_ROTL && width < 2)
                continue;
            uint64_t param = kind == TF_PROG_MAP_ROTL ? 1 + rng_next() % (width - 1)
                                                     : rng_next() & tf_prog_mask(width);
            tf_prog_map_invert(kind, param, width, x, child, ARRAY_LEN(x));
            memcpy(back, child, sizeof back);
            tf_prog_map_apply(kind, param, width, back, ARRAY_LEN(x));
            ck_assert_msg(memcmp(back, x, sizeof x) == 0, "map %u of width %u", kind, width);
            for (size_t i = 0; i < ARRAY_LEN(x); i++)
                ck_assert_uint_le(child[i], tf_prog_mask(width));
        }
        for (unsigned kind = 0; kind < TF_PROG_SCAN_KINDS; kind++) {
            if (tf_prog_scan_lagged(kind)) {
                /* lags short and long, a ring that wraps mid-call */
                static const uint64_t lags[] = { 1, 2, 37, 256 };
                for (size_t l = 0; l < ARRAY_LEN(lags); l++) {
                    uint64_t ring[256] = { 0 }, at = 0;
                    tf_prog_scan_lag_invert(kind, width, lags[l], x, child, ARRAY_LEN(x));
                    tf_prog_scan_lag_apply(kind, width, ring, lags[l], &at, child, back, 100);
                    tf_prog_scan_lag_apply(kind, width, ring, lags[l], &at, child + 100, back + 100,
                                           ARRAY_LEN(x) - 100);
                    ck_assert_msg(memcmp(back, x, sizeof x) == 0, "scan %u lag %u of width %u",
                                  kind, (unsigned)lags[l], width);
                }
                continue;
            }
            tf_prog_scan_invert(kind, width, x, child, ARRAY_LEN(x));
            uint64_t carry = x[0];
            tf_prog_scan_apply(kind, width, &carry, child, back + 1, ARRAY_LEN(x) - 1);
            back[0] = x[0];
            ck_assert_msg(memcmp(back, x, sizeof x) == 0, "scan %u of width %u", kind, width);
        }
        unsigned low = width / 3, high = width - low;
        memset(back, 0, sizeof back);
        tf_prog_split_field(x, low, high, child, ARRAY_LEN(x));
        tf_prog_merge_field(child, low, back, ARRAY_LEN(x));
        tf_prog_split_field(x, 0, low ? low : 1, child, ARRAY_LEN(x));
        if (low)
            tf_prog_merge_field(child, 0, back, ARRAY_LEN(x));
        ck_assert_msg(memcmp(back, x, sizeof x) == 0, "fields of width %u", width);
    }
}
END_TEST

/* ---- literals ---- */

static void lit_round_trip(const uint64_t *v, size_t n, unsigned width, tf_prog_lit_plan plan,
                           const tf_prog_ctx_source *src, unsigned n_src)
{
    tf_buf body = { 0 };
    tf_error e = { 0 };
    ck_assert_msg(tf_prog_lit_write(v, n, width, src, &plan, &body, &e) == 0, "%s", e.msg);
    uint8_t *exact = malloc(body.len);
    memcpy(exact, body.data, body.len);
    tf_prog_siblings sib = { .count = n_src };
    for (unsigned j = 0; j < n_src; j++)
        sib.width[j] = (uint8_t)src[j].width;
    uint64_t *out = malloc((n + 1) * sizeof *out);
    /* with the SIMD the CPU has, and none; in uneven pieces (as a
     * program's concat pulls), and in blocks of 1024 (as a merge does) */
    for (int pass = 0; pass < 4; pass++) {
        const int simd = pass < 2, blocks = pass % 2;
        if (!simd)
            tf_simd_level_cap(TF_SIMD_NONE);
        tf_prog_lit_reader r;
        ck_assert_msg(tf_prog_lit_open(&r, exact, body.len, width, n, &sib, &e) == 0,
                      "coding %u width %u n %zu: %s", plan.coding, width, n, e.msg);
        tf_simd_level_cap(TF_SIMD_AVX512);
        for (size_t at = 0; at < n;) {
            size_t k = blocks ? 1024 : 1 + rng_next() % 700;
            k = k < n - at ? k : n - at;
            const uint64_t *ctx = src && plan.ctx_sibling ? src[plan.ctx_sibling - 1].v + at : NULL;
            if (blocks && tf_prog_lit_narrow(&r)) { /* the executor's 32-bit way */
                uint32_t word[1024], ctx32[1024];
                for (size_t i = 0; ctx && i < k; i++)
                    ctx32[i] = (uint32_t)ctx[i];
                tf_prog_lit_read32(&r, word, k, ctx ? ctx32 : NULL);
                for (size_t i = 0; i < k; i++)
                    out[at + i] = word[i];
            } else {
                tf_prog_lit_read(&r, out + at, k, ctx);
            }
            at += k;
        }
        ck_assert_msg(tf_prog_lit_finish(&r, &e) == 0, "coding %u: %s", plan.coding, e.msg);
        ck_assert_msg(n == 0 || memcmp(out, v, n * sizeof *v) == 0,
                      "coding %u width %u n %zu pass %d", plan.coding, width, n, pass);
        tf_prog_lit_close(&r);
    }
    free(out);
    free(exact);
    tf_buf_free(&body);
}

START_TEST(test_every_coding)
{
    /* the last two: one rANS stream of 16 lanes, and two taking turns */
    static const size_t counts[] = { 1, 2, 15, 16, 17, 2047, 2048, 5003, 20011, 131101 };
    rng_state = 3 + _i;
    size_t n = counts[_i];
    uint64_t *v = malloc(n * sizeof *v), *exp = malloc(n * sizeof *exp);
    for (unsigned width = 1; width <= 64; width += width < 12 ? 1 : 13) {
        for (size_t i = 0; i < n; i++)
            v[i] = (rng_next() >> (rng_next() % 64)) & tf_prog_mask(width);
        lit_round_trip(v, n, width, (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RAW }, NULL, 0);
        uint64_t all = 0;
        for (size_t i = 0; i < n; i++)
            all |= v[i];
        unsigned w = all ? 64 - (unsigned)__builtin_clzll(all) : 1;
        if (w < width)
            lit_round_trip(v, n, width,
                           (tf_prog_lit_plan){ .coding = TF_PROG_CODE_PACK, .pack_width = (uint8_t)w },
                           NULL, 0);
        for (size_t i = 0; i < n; i++) /* byte symbols, skewed */
            v[i] = (rng_next() % 7 ? rng_next() % 5 : rng_next() % 256) & tf_prog_mask(width);
        lit_round_trip(v, n, width, (tf_prog_lit_plan){ .coding = TF_PROG_CODE_HUFF }, NULL, 0);
        lit_round_trip(v, n, width, (tf_prog_lit_plan){ .coding = TF_PROG_CODE_HUFF4 }, NULL, 0);
        for (unsigned prec = TF_RANS_MIN_PREC; prec <= TF_RANS_MAX_PREC; prec++)
            lit_round_trip(v, n, width,
                           (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RANS, .prec = (uint8_t)prec },
                           NULL, 0);
        /* contexts from a sibling: an exponent-like source */
        for (size_t i = 0; i < n; i++)
            exp[i] = 120 + rng_next() % 9;
        tf_prog_ctx_source src[2] = { { v, width }, { exp, 8 } };
        lit_round_trip(v, n, width,
                       (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RANS, .prec = 11, .ctx_sibling = 2,
                                           .ctx_base = 121, .ctx_count = 5 },
                       src, 2);
        /* contexts from its own words */
        lit_round_trip(v, n, width,
                       (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RANS, .prec = 10, .ctx_self = true,
                                           .ctx_base = 1, .ctx_count = 3 },
                       src, 2);
        /* and the planner's choice */
        tf_prog_lit_plan best;
        tf_error e;
        ck_assert_int_eq(tf_prog_lit_plan_best(v, n, width, src, 2, &best, &e), 0);
        tf_buf body = { 0 };
        ck_assert_int_eq(tf_prog_lit_write(v, n, width, src, &best, &body, &e), 0);
        ck_assert_uint_eq(body.len, best.size); /* the plan's size is exact */
        tf_buf_free(&body);
        lit_round_trip(v, n, width, best, src, 2);
    }
    free(v);
    free(exp);
}
END_TEST

/* Words in runs of one value: each tells the next ones, which the
 * planner codes under contexts from the literal's own words. */
START_TEST(test_self_context)
{
    static const size_t counts[] = { 1, 3, 17, 1023, 5003, 20011, 131101 };
    rng_state = 11 + _i;
    size_t n = counts[_i];
    uint64_t *v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = i % 200 ? v[i - 1] : rng_next() % 12;
    tf_prog_lit_plan best;
    tf_error e;
    ck_assert_int_eq(tf_prog_lit_plan_best(v, n, 8, NULL, 0, &best, &e), 0);
    if (n >= 5003)
        ck_assert(best.coding == TF_PROG_CODE_RANS && best.ctx_self);
    lit_round_trip(v, n, 8, best, NULL, 0);
    for (unsigned count = 1; count <= 64; count *= 4) /* windows that miss values too */
        lit_round_trip(v, n, 8,
                       (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RANS, .prec = 9,
                                           .ctx_self = true, .ctx_base = 2, .ctx_count = (uint8_t)count },
                       NULL, 0);
    /* a reader refuses a window of no or too many contexts, or one that
     * no word of 4 bits could fall in: coding, source, base, count */
    for (size_t i = 0; i < n; i++)
        v[i] &= 3;
    tf_prog_lit_plan plan = { .coding = TF_PROG_CODE_RANS, .prec = 9, .ctx_self = true,
                              .ctx_base = 1, .ctx_count = 3 };
    tf_buf body = { 0 };
    ck_assert_int_eq(tf_prog_lit_write(v, n, 4, NULL, &plan, &body, &e), 0);
    ck_assert_uint_eq(body.data[1], TF_PROG_CTX_SELF);
    static const uint8_t bad[][2] = { { 3, 0 }, { 3, 65 }, { 2, 16 } };
    for (size_t b = 0; b < ARRAY_LEN(bad); b++) {
        uint8_t keep = body.data[bad[b][0]];
        body.data[bad[b][0]] = bad[b][1];
        tf_prog_lit_reader r;
        ck_assert_int_eq(tf_prog_lit_open(&r, body.data, body.len, 4, n, NULL, &e), -1);
        tf_prog_lit_close(&r);
        body.data[bad[b][0]] = keep;
    }
    tf_buf_free(&body);
    free(v);
}
END_TEST

START_TEST(test_empty_literal)
{
    lit_round_trip(NULL, 0, 13, (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RAW }, NULL, 0);
    tf_prog_lit_plan best;
    tf_error e;
    ck_assert_int_eq(tf_prog_lit_plan_best(NULL, 0, 13, NULL, 0, &best, &e), 0);
    ck_assert_uint_eq(best.coding, TF_PROG_CODE_RAW);
    ck_assert_uint_eq(best.size, 1);
}
END_TEST

/* Huffman codes written from the lengths alone (their streams' sizes
 * known once written) are the bytes written from the counts, in one
 * stream and in four, for lengths of every turn of streams. */
START_TEST(test_huffman_from_lengths)
{
    static const size_t lens[] = { 1, 255, 256, 1023, 1024, 1025, 3000, 70001 };
    for (size_t k = 0; k < ARRAY_LEN(lens); k++) {
        const size_t n = lens[k];
        uint8_t *sym = malloc(n);
        ck_assert_ptr_nonnull(sym);
        rng_state = 90 + k;
        for (size_t i = 0; i < n; i++) /* skewed: about 3 bits a symbol */
            sym[i] = (uint8_t)(100 + __builtin_ctzll(rng_next() | 1u << 20));
        tf_prog_huff_counts *c = malloc(sizeof *c);
        ck_assert_ptr_nonnull(c);
        tf_prog_huff_count(sym, n, c);
        uint64_t count[256] = { 0 };
        for (unsigned st = 0; st < TF_PROG_HUFF_STREAMS; st++)
            for (unsigned v = 0; v < 256; v++)
                count[v] += c->count[st][v];
        uint8_t len[256];
        tf_huff_lengths(count, 256, tf_prog_huff_limit(n), len);
        static const unsigned codings[] = { TF_PROG_CODE_HUFF, TF_PROG_CODE_HUFF4 };
        for (size_t j = 0; j < ARRAY_LEN(codings); j++) {
            tf_buf by_counts = { 0 }, by_lengths = { 0 };
            tf_error e;
            ck_assert_int_eq(tf_prog_huff_write_counts(sym, n, 256, c, codings[j], &by_counts, &e),
                             0);
            ck_assert_int_eq(
                tf_prog_huff_write_lengths(sym, n, 256, len, codings[j], &by_lengths, &e), 0);
            ck_assert_msg(by_counts.len == by_lengths.len &&
                              memcmp(by_counts.data, by_lengths.data, by_counts.len) == 0,
                          "coding %u of %zu symbols differs", codings[j], n);
            tf_buf_free(&by_counts);
            tf_buf_free(&by_lengths);
        }
        free(c);
        free(sym);
    }
}
END_TEST

/* Asserts that a decoder of n words of 8 bits refuses body at its end,
 * read in blocks of 1024 (the executor's four-stream path) and word by
 * word, with and without SIMD. */
static void check_refused(const tf_buf *body, size_t n, const char *what)
{
    for (int pass = 0; pass < 4; pass++) {
        tf_prog_lit_reader r;
        tf_error e;
        if (pass >= 2)
            tf_simd_level_cap(TF_SIMD_NONE);
        ck_assert_int_eq(tf_prog_lit_open(&r, body->data, body->len, 8, n, NULL, &e), 0);
        tf_simd_level_cap(TF_SIMD_AVX512);
        uint32_t word[1024];
        for (size_t at = 0; at < n;) {
            size_t k = pass % 2 ? 1 : 1024;
            k = k < n - at ? k : n - at;
            tf_prog_lit_read32(&r, word, k, NULL);
            at += k;
        }
        ck_assert_msg(tf_prog_lit_finish(&r, &e) == -1, "%s, pass %d", what, pass);
        tf_prog_lit_close(&r);
    }
}

/* Huffman bodies a decoder must refuse: streams overrunning the body, and
 * codes no table entry starts (an incomplete code: lengths 1 and 2 leave
 * the pattern 11 unused), read as the executor reads, by the fast paths,
 * and word by word, with and without SIMD. */
START_TEST(test_huffman_rejects)
{
    enum { N = 5000, STREAM = 2000 };
    tf_buf body = { 0 };
    tf_buf_u8(&body, TF_PROG_CODE_HUFF4);
    tf_buf_varint(&body, 0);       /* first symbol */
    tf_buf_varint(&body, 2);       /* two lengths: 1, 2 */
    tf_buf_u8(&body, 1 | 2 << 4);
    size_t sizes_at = body.len;
    for (int k = 0; k < 3; k++)
        tf_buf_varint(&body, STREAM);
    for (int k = 0; k < 4 * STREAM; k++)
        tf_buf_u8(&body, 0xff);
    check_refused(&body, N, "all ones");
    /* one unused pattern amid valid codes, the bits still adding up:
     * stream 0 is 100 zeros (symbol 0), 11, 0, 153 zeros, so that read
     * as 1 bit of an unused pattern and the code 10 its 256 words take
     * all its 257 bits; streams 1..3 are 256 zeros each */
    body.len = sizes_at;
    tf_buf_varint(&body, 33);
    tf_buf_varint(&body, 32);
    tf_buf_varint(&body, 32);
    uint8_t stream0[33] = { 0 };
    stream0[100 / 8] |= 1u << 100 % 8;
    stream0[101 / 8] |= 1u << 101 % 8;
    tf_buf_put(&body, stream0, sizeof stream0);
    for (int k = 0; k < 3 * 32; k++)
        tf_buf_u8(&body, 0);
    check_refused(&body, 1024, "amid valid codes");
    /* the same in a literal of 12 words, too few for a multi table (each
     * code looked up alone): stream 0 is 5 zeros, 11, 0, 5 zeros, the 13
     * bits that 12 words take when the unused pattern is read as 1 bit */
    body.len = sizes_at;
    for (int k = 0; k < 3; k++)
        tf_buf_varint(&body, k ? 0 : 2);
    tf_buf_u8(&body, 1u << 5 | 1u << 6);
    tf_buf_u8(&body, 0);
    check_refused(&body, 12, "12 words");
    /* the same in one stream (HUFF) of 512 words, read by its fast loops
     * and word by word: k zeros, 11, 0, 510 - k zeros, the unused
     * pattern placed where each of the loops reads it (about the end of
     * the first segment of 256 words, and of the stream) */
    tf_buf one = { 0 };
    for (unsigned k = 100; k <= 510; k += k < 230 || (k > 260 && k < 450) ? 10 : 1) {
        one.len = 0;
        tf_buf_u8(&one, TF_PROG_CODE_HUFF);
        tf_buf_put(&one, body.data + 1, sizes_at - 1); /* the table */
        uint8_t stream[65] = { 0 };
        stream[k / 8] |= (uint8_t)(1u << k % 8);
        stream[(k + 1) / 8] |= (uint8_t)(1u << (k + 1) % 8);
        tf_buf_put(&one, stream, sizeof stream);
        char what[32];
        snprintf(what, sizeof what, "one stream, k %u", k);
        check_refused(&one, 512, what);
    }
    tf_buf_free(&one);
    /* a stream longer than what is left */
    tf_prog_lit_reader r;
    tf_error e;
    body.len = sizes_at;
    for (int k = 0; k < 3; k++)
        tf_buf_varint(&body, k == 1 ? 5 * STREAM : STREAM);
    for (int k = 0; k < 4 * STREAM; k++)
        tf_buf_u8(&body, 0xff);
    ck_assert_int_eq(tf_prog_lit_open(&r, body.data, body.len, 8, N, NULL, &e), -1);
    tf_prog_lit_close(&r);
    tf_buf_free(&body);
}
END_TEST

/* ---- hand-built programs ---- */

typedef struct {
    tf_prog p;
    tf_buf bodies[TF_PROG_MAX_NODES];
} builder;

static unsigned node(builder *b, unsigned parent, unsigned op, unsigned width, uint64_t n)
{
    int i = tf_prog_add_kids(&b->p, parent, 1);
    ck_assert_int_ge(i, 0);
    tf_prog_node *k = &b->p.node[i];
    k->op = (uint8_t)op;
    k->width = (uint8_t)width;
    k->n = n;
    return (unsigned)i;
}

/* Children must be added in one go to be contiguous: kids(b, parent, k). */
static unsigned kids(builder *b, unsigned parent, unsigned count)
{
    int first = tf_prog_add_kids(&b->p, parent, count);
    ck_assert_int_ge(first, 0);
    return (unsigned)first;
}

static void set(builder *b, unsigned i, unsigned op, unsigned width, uint64_t n, uint64_t param)
{
    tf_prog_node *k = &b->p.node[i];
    k->op = (uint8_t)op;
    k->width = (uint8_t)width;
    k->n = n;
    k->param = param;
}

static void raw_lit(builder *b, unsigned i, const uint64_t *v)
{
    tf_prog_node *k = &b->p.node[i];
    tf_prog_lit_plan plan = { .coding = TF_PROG_CODE_RAW };
    tf_error e;
    ck_assert_int_eq(tf_prog_lit_write(v, k->n, k->width, NULL, &plan, &b->bodies[i], &e), 0);
    k->op = TF_PROG_LIT;
    k->body = b->bodies[i].data;
    k->body_len = b->bodies[i].len;
}

/* Writes the program, reads it back as width[n], executes it, and checks
 * the result against expect (little-endian words of width / 8 bytes). */
static void check_program(builder *b, const uint64_t *expect)
{
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    const tf_prog_node *root = &b->p.node[0];
    ck_assert_int_eq(tf_prog_write(&b->p, &enc, &e), 0);
    tf_prog *p = malloc(sizeof *p);
    ck_assert_msg(tf_prog_read(enc.data, enc.len, root->width, root->n, p, &e) == 0, "%s", e.msg);
    size_t bytes = root->width / 8;
    uint8_t *out = malloc(root->n * bytes + 1), *want = malloc(root->n * bytes + 1);
    ck_assert_msg(tf_prog_exec(p, out, &e) == 0, "%s", e.msg);
    tf_prog_words_store(expect, root->n, (unsigned)bytes, want);
    ck_assert_mem_eq(out, want, root->n * bytes);
    memset(out, 0xa5, root->n * bytes);
    ck_assert_msg(tf_prog_exec_general(p, out, &e) == 0, "%s", e.msg);
    ck_assert_mem_eq(out, want, root->n * bytes);
    free(out);
    free(want);
    free(p);
    tf_buf_free(&enc);
    for (unsigned i = 0; i < TF_PROG_MAX_NODES; i++)
        tf_buf_free(&b->bodies[i]);
}

/* A lagged scan of kind over a raw literal of 4100 random words of
 * `width` bits (v and expect: room for them). */
static void check_lagged_scan(builder *b, unsigned kind, unsigned width, uint64_t lag,
                              uint64_t *v, uint64_t *expect)
{
    memset(b, 0, sizeof *b);
    unsigned root = node(b, 0, TF_PROG_SCAN, width, 4100);
    b->p.node[root].kind = (uint8_t)kind;
    b->p.node[root].param = lag;
    unsigned leaf = kids(b, root, 1);
    set(b, leaf, TF_PROG_LIT, width, 4100, 0);
    const uint64_t mask = tf_prog_mask(width);
    for (uint64_t i = 0; i < 4100; i++) {
        v[i] = rng_next() & mask;
        expect[i] = i < lag ? v[i]
                    : kind == TF_PROG_SCAN_XOR_LAG ? expect[i - lag] ^ v[i]
                                                   : (expect[i - lag] + v[i]) & mask;
    }
    raw_lit(b, leaf, v);
    check_program(b, expect);
}

START_TEST(test_programs_execute)
{
    builder *b = calloc(1, sizeof *b);
    uint64_t expect[4100], v[4100];
    static uint64_t hv2[1037], lv2[1037], expect2[1037];
    /* concat(const, lit) */
    unsigned root = node(b, 0, TF_PROG_CONCAT, 16, 7), k = kids(b, root, 2);
    set(b, k, TF_PROG_CONST, 16, 4, 0xbeef);
    set(b, k + 1, TF_PROG_LIT, 16, 3, 0);
    static const uint64_t tail[] = { 1, 2, 65535 };
    raw_lit(b, k + 1, tail);
    for (int i = 0; i < 7; i++)
        expect[i] = i < 4 ? 0xbeef : tail[i - 4];
    check_program(b, expect);
    /* repeat with a cut last copy, across blocks */
    memset(b, 0, sizeof *b);
    root = node(b, 0, TF_PROG_REPEAT, 32, 4100);
    b->p.node[root].param = 3;
    k = kids(b, root, 1);
    set(b, k, TF_PROG_LIT, 32, 3, 0);
    static const uint64_t period[] = { 7, 0xffffffff, 0 };
    raw_lit(b, k, period);
    for (int i = 0; i < 4100; i++)
        expect[i] = period[i % 3];
    check_program(b, expect);
    /* scan_add(v0, map_zigzag(lit)): deltas of a ramp */
    memset(b, 0, sizeof *b);
    root = node(b, 0, TF_PROG_SCAN, 64, 4100);
    b->p.node[root].kind = TF_PROG_SCAN_ADD;
    b->p.node[root].param = 1000;
    k = kids(b, root, 1);
    set(b, k, TF_PROG_MAP, 64, 4099, 0);
    b->p.node[k].kind = TF_PROG_MAP_ZIGZAG;
    unsigned leaf = kids(b, k, 1);
    set(b, leaf, TF_PROG_LIT, 64, 4099, 0);
    rng_state = 4;
    expect[0] = 1000;
    for (int i = 0; i < 4099; i++) {
        int64_t d = (int64_t)(rng_next() % 21) - 10;
        v[i] = tf_prog_zigzag_encode((uint64_t)d, 64);
        expect[i + 1] = expect[i] + (uint64_t)d;
    }
    raw_lit(b, leaf, v);
    check_program(b, expect);
    /* merge(8: map_rotl3(lit), 8: scan_xor(lit)) */
    memset(b, 0, sizeof *b);
    root = node(b, 0, TF_PROG_MERGE, 16, 50);
    k = kids(b, root, 2);
    set(b, k, TF_PROG_MAP, 8, 50, 3);
    b->p.node[k].kind = TF_PROG_MAP_ROTL;
    set(b, k + 1, TF_PROG_SCAN, 8, 50, 0x5a);
    b->p.node[k + 1].kind = TF_PROG_SCAN_XOR;
    unsigned high = kids(b, k, 1), low = kids(b, k + 1, 1);
    set(b, high, TF_PROG_LIT, 8, 50, 0);
    set(b, low, TF_PROG_LIT, 8, 49, 0);
    uint64_t hv[50], lv[49], prev = 0x5a;
    for (int i = 0; i < 50; i++) {
        hv[i] = rng_next() & 0xff;
        uint64_t hi = tf_prog_rotl(hv[i], 3, 8);
        if (i)
            prev ^= lv[i - 1] = rng_next() & 0xff;
        expect[i] = hi << 8 | prev;
    }
    raw_lit(b, high, hv);
    raw_lit(b, low, lv);
    check_program(b, expect);
    /* map_xor(map_rotl5(merge(1: lit, 4: const, 19: lit))) of 24 bits,
     * the fast path's shape, over 1037 words (a block and a bit) */
    memset(b, 0, sizeof *b);
    root = node(b, 0, TF_PROG_MAP, 24, 1037);
    b->p.node[root].param = 0xa5a5a5;
    b->p.node[root].kind = TF_PROG_MAP_XOR;
    unsigned rot = kids(b, root, 1);
    set(b, rot, TF_PROG_MAP, 24, 1037, 5);
    b->p.node[rot].kind = TF_PROG_MAP_ROTL;
    unsigned merge = kids(b, rot, 1);
    set(b, merge, TF_PROG_MERGE, 24, 1037, 0);
    k = kids(b, merge, 3);
    set(b, k, TF_PROG_LIT, 1, 1037, 0);
    set(b, k + 1, TF_PROG_CONST, 4, 1037, 9);
    set(b, k + 2, TF_PROG_LIT, 19, 1037, 0);
    for (int i = 0; i < 1037; i++) {
        hv2[i] = rng_next() & 1;
        lv2[i] = rng_next() & 0x7ffff;
        expect2[i] = tf_prog_rotl(hv2[i] << 23 | 9u << 19 | lv2[i], 5, 24) ^ 0xa5a5a5;
    }
    raw_lit(b, k, hv2);
    raw_lit(b, k + 2, lv2);
    check_program(b, expect2);
    /* merge(1: lit, 8: lit under its own words, 23: lit) of 32 bits over
     * 20011 words: the fast path's shape */
    static uint64_t sign[20011], exp[20011], man[20011], expect3[20011];
    memset(b, 0, sizeof *b);
    root = node(b, 0, TF_PROG_MERGE, 32, 20011);
    k = kids(b, root, 3);
    set(b, k, TF_PROG_LIT, 1, 20011, 0);
    set(b, k + 1, TF_PROG_LIT, 8, 20011, 0);
    set(b, k + 2, TF_PROG_LIT, 23, 20011, 0);
    for (int i = 0; i < 20011; i++) {
        sign[i] = rng_next() & 1;
        exp[i] = i % 37 ? exp[i - 1] : 110 + rng_next() % 20;
        man[i] = rng_next() & 0x7fffff;
        expect3[i] = sign[i] << 31 | exp[i] << 23 | man[i];
    }
    raw_lit(b, k, sign);
    raw_lit(b, k + 2, man);
    tf_prog_lit_plan plan = { .coding = TF_PROG_CODE_RANS, .prec = 11, .ctx_self = true,
                              .ctx_base = 112, .ctx_count = 16 };
    tf_error e;
    ck_assert_int_eq(tf_prog_lit_write(exp, 20011, 8, NULL, &plan, &b->bodies[k + 1], &e), 0);
    b->p.node[k + 1].body = b->bodies[k + 1].data;
    b->p.node[k + 1].body_len = b->bodies[k + 1].len;
    check_program(b, expect3);
    /* scan_xorlag37(lit) over 4100 words: the ring wraps inside blocks;
     * scan_addlag1500(lit): a lag longer than a block */
    check_lagged_scan(b, TF_PROG_SCAN_XOR_LAG, 16, 37, v, expect);
    check_lagged_scan(b, TF_PROG_SCAN_ADD_LAG, 8, 1500, v, expect);
    /* map_xor(-inf, scan_xorlag37(repeat38(concat(const -inf, const 0))))
     * of 32 bits: the additive causal mask of 37 x 37, 0 on and below
     * the diagonal, -inf above, ending mid-row */
    memset(b, 0, sizeof *b);
    const uint64_t ninf = 0xff800000;
    const uint64_t words = 37 * 30 + 11;
    root = node(b, 0, TF_PROG_MAP, 32, words);
    b->p.node[root].kind = TF_PROG_MAP_XOR;
    b->p.node[root].param = ninf;
    unsigned scan = kids(b, root, 1);
    set(b, scan, TF_PROG_SCAN, 32, words, 37);
    b->p.node[scan].kind = TF_PROG_SCAN_XOR_LAG;
    unsigned rep = kids(b, scan, 1);
    set(b, rep, TF_PROG_REPEAT, 32, words, 38);
    unsigned cat = kids(b, rep, 1);
    set(b, cat, TF_PROG_CONCAT, 32, 38, 0);
    k = kids(b, cat, 2);
    set(b, k, TF_PROG_CONST, 32, 1, ninf);
    set(b, k + 1, TF_PROG_CONST, 32, 37, 0);
    for (uint64_t i = 0; i < words; i++)
        expect[i] = i % 37 <= i / 37 ? 0 : ninf;
    check_program(b, expect);
    free(b);
}
END_TEST

/* Each broken instance as bytes: version-less programs of type 16[8]. */
START_TEST(test_validation_rejects)
{
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } bad[] = {
        { "unknown op", { 9 }, 1 },
        { "const too wide", { 1, 0x80, 0x80, 0x04 }, 4 },
        { "concat arity 1", { 2, 1, 1, 5 }, 4 },
        { "concat lengths past n", { 2, 2, 8, 1, 1, 1, 2 }, 7 },
        { "concat zero length", { 2, 2, 0, 1, 1, 1, 2 }, 7 },
        { "repeat period n", { 3, 8, 1, 0 }, 4 },
        { "repeat period 0", { 3, 0, 1, 0 }, 4 },
        { "map kind", { 4, 9, 1, 0 }, 4 },
        { "rotation 0", { 4, 5, 0, 1, 0 }, 5 },
        { "rotation 16", { 4, 5, 16, 1, 0 }, 5 },
        { "merge widths short", { 6, 2, 8, 7, 1, 0, 1, 0 }, 8 },
        { "merge widths long", { 6, 2, 8, 9, 1, 0, 1, 0 }, 8 },
        { "merge width 0", { 6, 2, 16, 0, 1, 0, 1, 0 }, 8 },
        { "scan child short", { 5, 1, 0, 0, 2, 1 }, 6 },
        { "scan kind", { 5, 4, 1, 1, 0 }, 5 },
        { "scan lag 0", { 5, 2, 0, 1, 0 }, 5 },
        { "scan lag n", { 5, 3, 8, 1, 0 }, 5 },
        { "scan lag huge", { 5, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0x7f, 1, 0 }, 15 },
        { "scan lag truncated", { 5, 2, 0x87 }, 3 },
        { "scan lag and period past n", { 5, 2, 5, 3, 4, 1, 0 }, 7 },
        { "literal body past end", { 0, 20, 0 }, 3 },
        { "trailing bytes", { 1, 5, 0 }, 3 },
        { "truncated", { 6, 2, 8 }, 3 },
    };
    tf_prog *p = malloc(sizeof *p);
    tf_error e;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++)
        ck_assert_msg(tf_prog_read(bad[i].bytes, bad[i].len, 16, 8, p, &e) == -1, "accepted: %s",
                      bad[i].what);
    /* the same shapes made valid are accepted */
    static const uint8_t good_const[] = { 1, 5 }, good_repeat[] = { 3, 7, 1, 0 },
                         good_lag[] = { 5, 2, 7, 1, 0 }, good_lags[] = { 5, 3, 4, 3, 4, 1, 0 };
    ck_assert_int_eq(tf_prog_read(good_const, sizeof good_const, 16, 8, p, &e), 0);
    ck_assert_int_eq(tf_prog_read(good_repeat, sizeof good_repeat, 16, 8, p, &e), 0);
    ck_assert_int_eq(tf_prog_read(good_lag, sizeof good_lag, 16, 8, p, &e), 0);
    ck_assert_int_eq(tf_prog_read(good_lags, sizeof good_lags, 16, 8, p, &e), 0);
    /* nesting past the depth limit */
    uint8_t deep[2 * TF_PROG_MAX_DEPTH + 2];
    size_t len = 0;
    for (unsigned d = 0; d < TF_PROG_MAX_DEPTH; d++) {
        deep[len++] = TF_PROG_MAP;
        deep[len++] = TF_PROG_MAP_BITREV;
    }
    deep[len++] = TF_PROG_CONST;
    deep[len++] = 1;
    ck_assert_int_eq(tf_prog_read(deep, len, 16, 8, p, &e), -1);
    ck_assert_int_eq(tf_prog_read(deep + 2, len - 2, 16, 8, p, &e), 0);
    /* more nodes than allowed: a merge of 64 one-bit constants */
    uint8_t wide[2 + 64 + 128];
    len = 0;
    wide[len++] = TF_PROG_MERGE;
    wide[len++] = 64;
    for (int c = 0; c < 64; c++)
        wide[len++] = 1;
    for (int c = 0; c < 64; c++) {
        wide[len++] = TF_PROG_CONST;
        wide[len++] = (uint8_t)(c & 1);
    }
    ck_assert_int_eq(tf_prog_read(wide, len, 64, 8, p, &e), -1); /* 65 nodes */
    free(p);
}
END_TEST

static Suite *parts_suite(void)
{
    Suite *s = suite_create("prog_parts");
    TCase *tc = tcase_create("prog_parts");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_huffman_lengths);
    tcase_add_test(tc, test_huffman_table);
    tcase_add_test(tc, test_ops_are_inverse);
    tcase_add_loop_test(tc, test_every_coding, 0, 10);
    tcase_add_loop_test(tc, test_self_context, 0, 7);
    tcase_add_test(tc, test_empty_literal);
    tcase_add_test(tc, test_huffman_rejects);
    tcase_add_test(tc, test_huffman_from_lengths);
    tcase_add_test(tc, test_programs_execute);
    tcase_add_test(tc, test_validation_rejects);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(parts_suite());
}
