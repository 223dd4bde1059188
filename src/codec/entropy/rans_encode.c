#include "codec/entropy/rans.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Division by freq without a divide: for x < 2^32 and l = ceil(log2 f),
 * m = ceil(2^(32+l) / f) gives floor(x / f) = floor(x * m / 2^(32+l)):
 * the excess x * (m - 2^(32+l) / f) / 2^(32+l) is below 2^-l <= 1 / f,
 * too little to carry x / f past the next integer. m lies in
 * [2^32, 2^33), so only rcp = m - 2^32 is stored, and x * m / 2^32 is
 * x + (x * rcp >> 32) (exact in the floor, as x is an integer). */
static tf_rans_enc_sym make_enc_sym(unsigned freq, unsigned cum, unsigned prec)
{
    unsigned l = freq > 1 ? 32 - (unsigned)__builtin_clz(freq - 1) : 0; /* ceil(log2 freq) */
    uint64_t m = ((1ull << (32 + l)) + freq - 1) / freq;
    return (tf_rans_enc_sym){
        .x_lim = (uint32_t)(((uint64_t)freq << (32 - prec)) - 1),
        .rcp = (uint32_t)(m - (1ull << 32)),
        .freq = (uint16_t)freq,
        .cum = (uint16_t)cum,
        .cmpl = (uint16_t)((1u << prec) - freq),
        .shift = (uint8_t)l,
    };
}

int tf_rans_encoder_init(tf_rans_encoder *enc, const tf_rans_table *t, tf_error *e)
{
    *enc = (tf_rans_encoder){ .n_ctx = t->n_ctx, .n_sym = t->n_sym };
    enc->row_of_ctx = malloc(t->n_ctx * sizeof *enc->row_of_ctx);
    enc->sym = calloc(((size_t)t->n_rows + 1) * t->n_sym, sizeof *enc->sym);
    if (!enc->row_of_ctx || !enc->sym) {
        tf_rans_encoder_free(enc);
        return tf_fail(e, ENOMEM, "rans: out of memory for an encoder");
    }
    const tf_rans_enc_sym *zero_row = enc->sym + (size_t)t->n_rows * t->n_sym;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        int32_t row = t->row_of_ctx[c];
        enc->row_of_ctx[c] = row < 0 ? zero_row : enc->sym + (size_t)row * t->n_sym;
    }
    for (size_t row = 0; row < t->n_rows; row++) {
        const uint16_t *freq = t->freq + row * t->n_sym;
        unsigned cum = 0;
        for (unsigned s = 0; s < t->n_sym; s++) {
            if (freq[s]) /* an absent symbol keeps freq 0 */
                enc->sym[row * t->n_sym + s] = make_enc_sym(freq[s], cum, t->prec);
            cum += freq[s];
        }
    }
    return 0;
}

void tf_rans_encoder_free(tf_rans_encoder *enc)
{
    free(enc->row_of_ctx);
    free(enc->sym);
    *enc = (tf_rans_encoder){ 0 };
}

/* Encodes one symbol into a lane state, writing a renormalization word
 * just below *w when needed. Branch-free, like the decoder; the word is
 * stored even when not kept (the space below *w is reserved). A symbol
 * with freq 0 leaves the state unchanged but for a renormalization. */
static inline uint32_t enc_put(uint32_t x, const tf_rans_enc_sym *s, uint8_t **w)
{
    uint32_t emit = x > s->x_lim;
    (*w)[-2] = (uint8_t)x;
    (*w)[-1] = (uint8_t)(x >> 8);
    *w -= 2 * emit;
    x >>= 16 * emit;
    uint32_t q = (uint32_t)(((uint64_t)x + ((uint64_t)x * s->rcp >> 32)) >> s->shift);
    return x + s->cum + q * s->cmpl;
}

/* The coding entry of symbol i; its freq is 0 when the table cannot code
 * it. */
static inline const tf_rans_enc_sym *enc_entry(const tf_rans_encoder *enc, const uint16_t *ctx,
                                               const uint8_t *sym, size_t i)
{
    static const tf_rans_enc_sym uncodable = { 0 };
    unsigned c = ctx ? ctx[i] : 0;
    if (c >= enc->n_ctx || sym[i] >= enc->n_sym)
        return &uncodable;
    return &enc->row_of_ctx[c][sym[i]];
}

/* Symbols are encoded last to first so that they decode first to last;
 * words go downwards from *words. Returns whether every symbol was
 * codable. Instantiated per lane count. */
static inline __attribute__((always_inline)) bool
encode_backwards_lanes(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                       size_t n, uint32_t *x, uint8_t **words, unsigned lanes)
{
    uint32_t codable = 1;
    uint8_t *w = *words;
    for (size_t i = n; i-- > 0;) {
        const tf_rans_enc_sym *s = enc_entry(enc, ctx, sym, i);
        codable &= s->freq != 0;
        x[i % lanes] = enc_put(x[i % lanes], s, &w);
    }
    *words = w;
    return codable;
}

static bool encode_backwards(const tf_rans_encoder *enc, const uint16_t *ctx,
                             const uint8_t *sym, size_t n, uint32_t *x, uint8_t **words,
                             unsigned lanes)
{
    switch (lanes) {
    case 1: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 1);
    case 2: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 2);
    case 4: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 4);
    case 8: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 8);
    default: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 16);
    }
}

/* LEB128, as tf_buf_varint writes it; returns the bytes written. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

static int fail_uncodable(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                          size_t n, tf_error *e)
{
    size_t i = 0;
    while (i < n && enc_entry(enc, ctx, sym, i)->freq)
        i++;
    return tf_fail(e, EINVAL, "rans: symbol %u at %zu has no frequency under context %u",
                   i < n ? sym[i] : 0, i, ctx && i < n ? ctx[i] : 0);
}

/* A stream under construction: each symbol renormalizes at most once
 * (prec <= 16), so its words fit in 2n bytes; they are written downwards
 * from the top of a reservation and moved down behind the header once its
 * length is known. Below the words, the header's space doubles as slack
 * for the vector encoder's 16-byte stores. */
#define STREAM_HEAD_MAX (10 + 1 + 4 * TF_RANS_MAX_LANES)

typedef struct {
    uint8_t *base, *top;
    uint32_t x[TF_RANS_MAX_LANES];
} stream_writer;

static int stream_begin(stream_writer *sw, size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    if (!tf_rans_lanes_valid(lanes))
        return tf_fail(e, EINVAL, "rans: %u lanes is not a power of two up to %d", lanes,
                       TF_RANS_MAX_LANES);
    if (n > (SIZE_MAX - STREAM_HEAD_MAX) / 2)
        return tf_fail(e, ENOMEM, "rans: %zu symbols is too many", n);
    sw->base = tf_buf_reserve(out, STREAM_HEAD_MAX + 2 * n);
    if (!sw->base)
        return tf_fail(e, ENOMEM, "rans: out of memory for a stream");
    sw->top = sw->base + STREAM_HEAD_MAX + 2 * n;
    for (unsigned l = 0; l < TF_RANS_MAX_LANES; l++)
        sw->x[l] = TF_RANS_L;
    return 0;
}

/* Writes the header before the words (which start at `words`). */
static void stream_end(const stream_writer *sw, const uint8_t *words, unsigned lanes,
                       tf_buf *out)
{
    size_t words_len = (size_t)(sw->top - words);
    uint8_t *p = sw->base + put_varint(sw->base, 1 + 4 * lanes + words_len);
    *p++ = (uint8_t)lanes;
    for (unsigned l = 0; l < lanes; l++, p += 4)
        tf_le32_put(p, sw->x[l]);
    memmove(p, words, words_len);
    tf_buf_commit(out, (size_t)(p - sw->base) + words_len);
}

int tf_rans_encode(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                   size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    stream_writer sw;
    if (stream_begin(&sw, n, lanes, out, e) < 0)
        return -1;
    uint8_t *words = sw.top;
    if (!encode_backwards(enc, ctx, sym, n, sw.x, &words, lanes))
        return fail_uncodable(enc, ctx, sym, n, e);
    stream_end(&sw, words, lanes, out);
    return 0;
}

/* ---- indexed encoder ----
 * An entry packs a symbol's coding parameters (make_enc_sym):
 *   bits  0-31  rcp
 *   bits 32-35  shift
 *   bits 36-46  cum
 *   bits 52-63  freq
 * and is 0 for a symbol without frequency. */

static uint64_t pack_entry(unsigned freq, unsigned cum, unsigned prec)
{
    tf_rans_enc_sym s = make_enc_sym(freq, cum, prec);
    return (uint64_t)s.rcp | (uint64_t)((uint32_t)freq << 20 | cum << 4 | s.shift) << 32;
}

void tf_rans_indexed_free(tf_rans_indexed *ix)
{
    free(ix->entry);
    *ix = (tf_rans_indexed){ 0 };
}

int tf_rans_indexed_init(tf_rans_indexed *ix, const tf_rans_table *t, unsigned sym_bits,
                         tf_error *e)
{
    unsigned lo = 0, end = 0; /* occupied contexts: [lo, end) */
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        if (end == 0)
            lo = c;
        end = c + 1;
    }
    return tf_rans_indexed_init_span(ix, t, sym_bits, lo, end - lo, e);
}

int tf_rans_indexed_init_span(tf_rans_indexed *ix, const tf_rans_table *t, unsigned sym_bits,
                              unsigned ctx_lo, unsigned n_rows, tf_error *e)
{
    *ix = (tf_rans_indexed){ .prec = t->prec, .sym_bits = sym_bits };
    if (ctx_lo > t->n_ctx || n_rows > t->n_ctx - ctx_lo)
        return tf_fail(e, EINVAL, "rans: contexts [%u, %u + %u) are out of range", ctx_lo,
                       ctx_lo, n_rows);
    const unsigned lo = ctx_lo, end = ctx_lo + n_rows;
    ix->ctx_lo = lo;
    ix->n_rows = n_rows;
    if (sym_bits > 8 || t->n_sym > 1u << sym_bits ||
        ((size_t)ix->n_rows + 1) << sym_bits > 65536)
        return tf_fail(e, EINVAL, "rans: %u contexts x %u symbols do not fit 16-bit indexes",
                       ix->n_rows, t->n_sym);
    ix->entry = calloc(((size_t)ix->n_rows + 1) << sym_bits, sizeof *ix->entry);
    if (!ix->entry)
        return tf_fail(e, ENOMEM, "rans: out of memory for an encoder");
    for (unsigned c = lo; c < end; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        const uint16_t *freq = t->freq + (size_t)t->row_of_ctx[c] * t->n_sym;
        uint64_t *row = ix->entry + ((size_t)(c - lo) << sym_bits);
        unsigned cum = 0;
        for (unsigned s = 0; s < t->n_sym; s++) {
            if (freq[s])
                row[s] = pack_entry(freq[s], cum, t->prec);
            cum += freq[s];
        }
    }
    return 0;
}

/* enc_put from a packed entry. Every step stays within 32 bits: after
 * renormalization x < freq << (32 - prec), so x / freq < 2^(32 - prec)
 * and x + (x * rcp >> 32), whose top (32 - prec) + shift bits are that
 * quotient, is below 2^(32 - prec + shift) <= 2^32 (shift <= prec). */
static inline uint32_t put_packed(uint32_t x, uint64_t entry, unsigned prec, uint8_t **w)
{
    uint32_t hi = (uint32_t)(entry >> 32), freq = hi >> 20;
    /* x >> (32 - prec) >= freq, with the shift on freq, known before x
     * is: the chain from x to x, what bounds one lane, is a step
     * shorter. */
    uint32_t emit = x >= (uint64_t)freq << (32 - prec);
    (*w)[-2] = (uint8_t)x;
    (*w)[-1] = (uint8_t)(x >> 8);
    *w -= 2 * emit;
    x >>= 16 * emit;
    uint32_t q = (x + (uint32_t)((uint64_t)x * (uint32_t)entry >> 32)) >> (hi & 15);
    return x + (hi >> 4 & 0x7ff) + q * ((1u << prec) - freq);
}

/* Where symbol i of a stream is in the coding indexes of k streams
 * taking turns by rounds of `lanes` (tf_rans_encode_indexed_turn). */
static inline size_t turn_pos(size_t i, unsigned lanes, unsigned k, unsigned turn)
{
    return (i / lanes * k + turn) * lanes + (i & (lanes - 1));
}

/* Symbols [from, to) backwards, one lane each in turn; returns whether
 * all were codable. (A state that runs wild after an uncodable symbol is
 * harmless: the stream is discarded.) */
static inline __attribute__((always_inline)) bool
put_range(const tf_rans_indexed *ix, const uint16_t *idx, unsigned k, unsigned turn, size_t from,
          size_t to, uint32_t *lane_x, unsigned lanes, uint8_t **words)
{
    /* Local copies: stores of bytes through w could alias *words and
     * lane_x, which would then go back to memory after each one. */
    uint32_t x[TF_RANS_MAX_LANES];
    uint8_t *w = *words;
    memcpy(x, lane_x, sizeof x);
    bool codable = true;
    for (size_t i = to; i-- > from;) {
        uint64_t entry = ix->entry[idx[turn_pos(i, lanes, k, turn)]];
        codable &= entry != 0;
        x[i & (lanes - 1)] = put_packed(x[i & (lanes - 1)], entry, ix->prec, &w);
    }
    memcpy(lane_x, x, sizeof x);
    *words = w;
    return codable;
}

#ifdef TF_X86_SIMD

/* For each mask of renormalizing lanes (bit l: lane l of eight), the
 * permutation that moves those lanes to the top of the vector in lane
 * order: their words, stored just below the words written so far, land
 * exactly where the scalar encoder puts them. Entry p of mask m is the
 * lane with (number of lanes of m) - (8 - p) lanes of m below it, any
 * lane (0) for positions below those. A constant table, so that no call
 * builds it. */
#define TT_BIT(m, l) ((m) >> (l) & 1)
#define TT_COUNT(m) \
    (TT_BIT(m, 0) + TT_BIT(m, 1) + TT_BIT(m, 2) + TT_BIT(m, 3) + TT_BIT(m, 4) + TT_BIT(m, 5) + \
     TT_BIT(m, 6) + TT_BIT(m, 7))
/* the lane of the k-th (from 0) set bit of m, 0 when there is none */
#define TT_IS(m, k, l) (TT_BIT(m, l) && TT_COUNT((m) & ((1u << (l)) - 1)) == (k))
#define TT_NTH(m, k)                                                                      \
    (TT_IS(m, k, 1) * 1 + TT_IS(m, k, 2) * 2 + TT_IS(m, k, 3) * 3 + TT_IS(m, k, 4) * 4 + \
     TT_IS(m, k, 5) * 5 + TT_IS(m, k, 6) * 6 + TT_IS(m, k, 7) * 7)
#define TT(m, p) ((p) + TT_COUNT(m) >= 8 ? TT_NTH(m, (p) + TT_COUNT(m) - 8) : 0)
#define TT_ROW(m) \
    { TT(m, 0), TT(m, 1), TT(m, 2), TT(m, 3), TT(m, 4), TT(m, 5), TT(m, 6), TT(m, 7) },
#define TT_ROWS4(m) TT_ROW(m) TT_ROW((m) + 1) TT_ROW((m) + 2) TT_ROW((m) + 3)
#define TT_ROWS16(m) TT_ROWS4(m) TT_ROWS4((m) + 4) TT_ROWS4((m) + 8) TT_ROWS4((m) + 12)
#define TT_ROWS64(m) TT_ROWS16(m) TT_ROWS16((m) + 16) TT_ROWS16((m) + 32) TT_ROWS16((m) + 48)
static const int32_t avx2_to_top[256][8] = {
    TT_ROWS64(0) TT_ROWS64(64) TT_ROWS64(128) TT_ROWS64(192)
};

/* The high 32 bits of x * rcp, lane by lane. */
TF_AVX2_INLINE __m256i avx2_mulhi(__m256i x, __m256i rcp)
{
    __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(x, rcp), 32);
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(rcp, 32));
    return _mm256_blend_epi32(even, odd, 0xaa);
}

/* put_packed for eight lanes, symbols idx[0..8). Returns the lanes'
 * entries' top halves (for the codability check). */
TF_AVX2_INLINE __m256i avx2_put8(__m256i *x, const uint16_t *idx, const uint64_t *entry,
                                 unsigned prec, uint8_t **w)
{
    __m256i i = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)idx));
    const long long *table = (const long long *)entry;
    __m256i e0 = _mm256_i32gather_epi64(table, _mm256_castsi256_si128(i), 8);
    __m256i e1 = _mm256_i32gather_epi64(table, _mm256_extracti128_si256(i, 1), 8);
    const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    e0 = _mm256_permutevar8x32_epi32(e0, split); /* rcp 0-3 | hi 0-3 */
    e1 = _mm256_permutevar8x32_epi32(e1, split); /* rcp 4-7 | hi 4-7 */
    __m256i rcp = _mm256_permute2x128_si256(e0, e1, 0x20);
    __m256i hi = _mm256_permute2x128_si256(e0, e1, 0x31);
    __m256i freq = _mm256_srli_epi32(hi, 20);
    /* freq > x >> (32 - prec): no renormalization (both below 2^12) */
    __m256i stay = _mm256_cmpgt_epi32(freq, _mm256_srli_epi32(*x, (int)(32 - prec)));
    unsigned emit = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(stay)) & 0xff;
    __m256i words = _mm256_permutevar8x32_epi32(
        *x, _mm256_loadu_si256((const __m256i *)avx2_to_top[emit]));
    const __m256i low_halves = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    words = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, low_halves), 0x08);
    _mm_storeu_si128((__m128i *)(*w - 16), _mm256_castsi256_si128(words));
    *w -= 2 * (unsigned)_mm_popcnt_u32(emit);
    __m256i v = _mm256_blendv_epi8(_mm256_srli_epi32(*x, 16), *x, stay);
    __m256i q = _mm256_srlv_epi32(_mm256_add_epi32(v, avx2_mulhi(v, rcp)),
                                  _mm256_and_si256(hi, _mm256_set1_epi32(15)));
    __m256i cum = _mm256_and_si256(_mm256_srli_epi32(hi, 4), _mm256_set1_epi32(0x7ff));
    __m256i cmpl = _mm256_sub_epi32(_mm256_set1_epi32(1 << prec), freq);
    *x = _mm256_add_epi32(_mm256_add_epi32(v, cum), _mm256_mullo_epi32(q, cmpl));
    return hi;
}

/* Whole rounds of 16 symbols [0, rounds * 16), backwards, round r's
 * indexes at idx + r * stride; lanes 8-15 of a round go first, as in the
 * scalar loop. */
TF_AVX2_FUNCTION uint32_t
avx2_put_rounds(const tf_rans_indexed *ix, const uint16_t *idx, size_t rounds, size_t stride,
                uint32_t *x, uint8_t **words)
{
    __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 8));
    __m256i all = _mm256_set1_epi32(-1);
    uint8_t *w = *words;
    for (size_t r = rounds; r-- > 0;) {
        all = _mm256_min_epu32(all, avx2_put8(&x1, idx + stride * r + 8, ix->entry, ix->prec, &w));
        all = _mm256_min_epu32(all, avx2_put8(&x0, idx + stride * r, ix->entry, ix->prec, &w));
    }
    _mm256_storeu_si256((__m256i *)x, x0);
    _mm256_storeu_si256((__m256i *)(x + 8), x1);
    *words = w;
    /* codable: every entry's freq (the top 12 bits) is positive */
    __m128i m = _mm_min_epu32(_mm256_castsi256_si128(all), _mm256_extracti128_si256(all, 1));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(m) >> 20;
}
#endif

#ifdef TF_X86_SIMD
#define RANS_AVX512_TARGET "avx2,popcnt,avx512f,avx512vl,avx512bw,avx512dq"
#define RANS_AVX512_INLINE static inline __attribute__((always_inline, target(RANS_AVX512_TARGET)))
#define RANS_AVX512_FUNCTION __attribute__((target(RANS_AVX512_TARGET))) static

/* avx2_put8 for the sixteen lanes of a round at once: the lanes that
 * renormalize compressed to the top of one vector, in lane order, and
 * stored just below the words written so far. */
RANS_AVX512_INLINE __m512i avx512_put16(__m512i *x, const uint16_t *idx, const uint64_t *entry,
                                        unsigned prec, uint8_t **w)
{
    __m512i i = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)idx));
    const long long *table = (const long long *)entry;
    __m512i e0 = _mm512_i32gather_epi64(_mm512_castsi512_si256(i), table, 8);
    __m512i e1 = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(i, 1), table, 8);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    __m512i rcp = _mm512_permutex2var_epi32(e0, even, e1);
    __m512i hi = _mm512_permutex2var_epi32(e0, _mm512_add_epi32(even, _mm512_set1_epi32(1)), e1);
    __m512i freq = _mm512_srli_epi32(hi, 20);
    /* freq > x >> (32 - prec): no renormalization (both below 2^12) */
    __mmask16 stay = _mm512_cmpgt_epu32_mask(freq, _mm512_srli_epi32(*x, (int)(32 - prec)));
    __mmask16 emit = (__mmask16)~stay;
    unsigned count = (unsigned)_mm_popcnt_u32(emit);
    /* lane j of the top count lanes: the (j + count - 16)th emitting lane */
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i at = _mm512_and_si512(_mm512_add_epi32(lane, _mm512_set1_epi32((int)count)),
                                  _mm512_set1_epi32(15));
    __m512i words = _mm512_permutexvar_epi32(at, _mm512_maskz_compress_epi32(emit, *x));
    _mm256_storeu_si256((__m256i *)(*w - 32), _mm512_cvtepi32_epi16(words));
    *w -= 2 * count;
    __m512i v = _mm512_mask_blend_epi32(stay, _mm512_srli_epi32(*x, 16), *x);
    __m512i lo = _mm512_srli_epi64(_mm512_mul_epu32(v, rcp), 32);
    __m512i up = _mm512_mul_epu32(_mm512_srli_epi64(v, 32), _mm512_srli_epi64(rcp, 32));
    __m512i mulhi = _mm512_mask_blend_epi32(0xaaaa, lo, up);
    __m512i q = _mm512_srlv_epi32(_mm512_add_epi32(v, mulhi),
                                  _mm512_and_si512(hi, _mm512_set1_epi32(15)));
    __m512i cum = _mm512_and_si512(_mm512_srli_epi32(hi, 4), _mm512_set1_epi32(0x7ff));
    __m512i cmpl = _mm512_sub_epi32(_mm512_set1_epi32(1 << prec), freq);
    *x = _mm512_add_epi32(_mm512_add_epi32(v, cum), _mm512_mullo_epi32(q, cmpl));
    return hi;
}

/* avx2_put_rounds with AVX-512: the same words. */
RANS_AVX512_FUNCTION uint32_t avx512_put_rounds(const tf_rans_indexed *ix, const uint16_t *idx,
                                                size_t rounds, size_t stride, uint32_t *x,
                                                uint8_t **words)
{
    __m512i lanes = _mm512_loadu_si512(x);
    __m512i all = _mm512_set1_epi32(-1);
    uint8_t *w = *words;
    for (size_t r = rounds; r-- > 0;)
        all = _mm512_min_epu32(all,
                               avx512_put16(&lanes, idx + stride * r, ix->entry, ix->prec, &w));
    _mm512_storeu_si512(x, lanes);
    *words = w;
    /* codable: every entry's freq (the top 12 bits) is positive */
    return _mm512_reduce_min_epu32(all) >> 20;
}
#endif

int tf_rans_encode_indexed_turn(const tf_rans_indexed *ix, const uint16_t *idx, size_t n,
                                unsigned lanes, unsigned k, unsigned turn, tf_buf *out,
                                tf_error *e)
{
    /* the symbols of this stream: whole rounds, and a part of its last */
    size_t rounds = n / lanes, m = (rounds / k + (turn < rounds % k)) * lanes;
    if (rounds % k == turn)
        m += n % lanes;
    stream_writer sw;
    if (stream_begin(&sw, m, lanes, out, e) < 0)
        return -1;
    uint8_t *words = sw.top;
    size_t vector_end = 0; /* symbols below it go to the vector loop */
#ifdef TF_X86_SIMD
    if (lanes == 16 && m >= 64 && tf_simd_level_get() >= TF_SIMD_AVX2)
        vector_end = m & ~(size_t)15;
#endif
    /* One lane in one stream (a small chunk) gets a loop of its own: with
     * the constants in, the index is the symbol's, with no division. */
    bool codable = lanes == 1 && k == 1
                       ? put_range(ix, idx, 1, 0, vector_end, m, sw.x, 1, &words)
                       : put_range(ix, idx, k, turn, vector_end, m, sw.x, lanes, &words);
#ifdef TF_X86_SIMD
    const uint16_t *mine = idx + (size_t)turn * lanes;
    if (vector_end && tf_simd_level_get() >= TF_SIMD_AVX512)
        codable &= avx512_put_rounds(ix, mine, vector_end / 16, 16 * k, sw.x, &words) != 0;
    else if (vector_end)
        codable &= avx2_put_rounds(ix, mine, vector_end / 16, 16 * k, sw.x, &words) != 0;
#endif
    if (!codable) {
        size_t i = 0;
        while (i < m && ix->entry[idx[turn_pos(i, lanes, k, turn)]])
            i++;
        return tf_fail(e, EINVAL, "rans: symbol index %u at %zu has no frequency",
                       i < m ? idx[turn_pos(i, lanes, k, turn)] : 0,
                       i < m ? turn_pos(i, lanes, k, turn) : i);
    }
    stream_end(&sw, words, lanes, out);
    return 0;
}

int tf_rans_encode_indexed(const tf_rans_indexed *ix, const uint16_t *idx, size_t n,
                           unsigned lanes, tf_buf *out, tf_error *e)
{
    return tf_rans_encode_indexed_turn(ix, idx, n, lanes, 1, 0, out, e);
}

/* Symbol i of a one-lane stream: its entry put into state *x, words
 * below *w; false when it has no frequency. */
static inline __attribute__((always_inline)) bool
put_one(const tf_rans_indexed *ix, const uint16_t *idx, size_t i, uint32_t *x, uint8_t **w)
{
    uint64_t en = ix->entry[idx[i]];
    *x = put_packed(*x, en, ix->prec, w);
    return en != 0;
}

int tf_rans_encode_indexed_pair(const tf_rans_indexed *ix, const uint16_t *const idx[2],
                                const size_t n[2], tf_buf *const out[2], tf_error *e)
{
    stream_writer a, b;
    if (stream_begin(&a, n[0], 1, out[0], e) < 0 || stream_begin(&b, n[1], 1, out[1], e) < 0)
        return -1;
    /* Locals, not the writers' fields: the stores of words through wa
     * and wb could alias those, which would then go back to memory. */
    uint32_t xa = a.x[0], xb = b.x[0];
    uint8_t *wa = a.top, *wb = b.top;
    size_t ia = n[0], ib = n[1];
    bool codable = true;
    for (; ia && ib; ia--, ib--) {
        codable &= put_one(ix, idx[0], ia - 1, &xa, &wa);
        codable &= put_one(ix, idx[1], ib - 1, &xb, &wb);
    }
    for (; ia; ia--)
        codable &= put_one(ix, idx[0], ia - 1, &xa, &wa);
    for (; ib; ib--)
        codable &= put_one(ix, idx[1], ib - 1, &xb, &wb);
    for (unsigned j = 0; !codable && j < 2; j++)
        for (size_t i = 0; i < n[j]; i++)
            if (!ix->entry[idx[j][i]])
                return tf_fail(e, EINVAL, "rans: symbol index %u at %zu has no frequency",
                               idx[j][i], i);
    a.x[0] = xa;
    b.x[0] = xb;
    stream_end(&a, wa, 1, out[0]);
    stream_end(&b, wb, 1, out[1]);
    return 0;
}
