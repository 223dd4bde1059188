#include "codec/entropy/rans.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tf_rans_decoder_free(tf_rans_decoder *dec)
{
    free(dec->slots_of_ctx);
    free(dec->slots);
    *dec = (tf_rans_decoder){ 0 };
}

static void build_slots(const uint16_t *freq, unsigned n_sym, uint32_t *slots)
{
    unsigned cum = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        for (unsigned k = 0; k < freq[s]; k++)
            slots[cum + k] = s | (uint32_t)k << 8 | (uint32_t)freq[s] << 20;
        cum += freq[s];
    }
}

void tf_rans_row_slots(const tf_rans_table *t, unsigned ctx, uint32_t *slots)
{
    if (ctx < t->n_ctx && t->row_of_ctx[ctx] >= 0)
        build_slots(t->freq + (size_t)t->row_of_ctx[ctx] * t->n_sym, t->n_sym, slots);
    else
        memset(slots, 0, sizeof *slots << t->prec);
}

static int count_rows_to_build(const tf_rans_table *t, const uint8_t *used, unsigned *n,
                               tf_error *e)
{
    *n = 0;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (used && !used[c])
            continue;
        if (t->row_of_ctx[c] >= 0)
            (*n)++;
        else if (used)
            return tf_fail(e, EIO, "rans: context %u is used but has no table row", c);
    }
    return 0;
}

int tf_rans_decoder_init(tf_rans_decoder *dec, const tf_rans_table *t, const uint8_t *used,
                         bool dense, tf_error *e)
{
    *dec = (tf_rans_decoder){ .n_ctx = t->n_ctx, .prec = t->prec };
    unsigned n_build;
    if (count_rows_to_build(t, used, &n_build, e) < 0)
        return -1;
    size_t row_slots = (size_t)1 << t->prec;
    size_t n_slots = dense ? (size_t)t->n_ctx << t->prec : n_build * row_slots;
    dec->slots_of_ctx = calloc(t->n_ctx, sizeof *dec->slots_of_ctx);
    dec->slots = malloc((n_slots + 1) * sizeof *dec->slots);
    if (!dec->slots_of_ctx || !dec->slots) {
        tf_rans_decoder_free(dec);
        return tf_fail(e, ENOMEM, "rans: out of memory for a decoder");
    }
    uint32_t *next = dec->slots;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if ((used && !used[c]) || t->row_of_ctx[c] < 0)
            continue;
        uint32_t *row = dense ? dec->slots + ((size_t)c << t->prec) : next;
        build_slots(t->freq + (size_t)t->row_of_ctx[c] * t->n_sym, t->n_sym, row);
        dec->slots_of_ctx[c] = row;
        next += row_slots;
    }
    return 0;
}

int tf_rans_stream_open(tf_rans_stream *s, tf_cursor *r, tf_error *e)
{
    uint64_t len = tf_read_varint(r);
    if (r->bad || len < 1 || len > tf_cursor_left(r))
        return tf_fail(e, EIO, "rans: stream length is invalid or truncated");
    const uint8_t *p = tf_read_bytes(r, (size_t)len);
    unsigned lanes = p[0];
    if (!tf_rans_lanes_valid(lanes) || len < 1 + 4 * lanes || (len - 1 - 4 * lanes) % 2)
        return tf_fail(e, EIO, "rans: stream header is invalid");
    for (unsigned l = 0; l < lanes; l++) {
        s->x[l] = tf_le32_get(p + 1 + 4 * l);
        if (s->x[l] < TF_RANS_L)
            return tf_fail(e, EIO, "rans: lane %u starts in an impossible state", l);
    }
    s->lanes = lanes;
    s->p = p + 1 + 4 * lanes;
    s->end = p + len;
    s->bad = false;
    return 0;
}

int tf_rans_stream_close(const tf_rans_stream *s, tf_error *e)
{
    if (s->bad)
        return tf_fail(e, EIO, "rans: stream ended early");
    if (s->p != s->end)
        return tf_fail(e, EIO, "rans: %zu stream bytes left over", (size_t)(s->end - s->p));
    for (unsigned l = 0; l < s->lanes; l++)
        if (s->x[l] != TF_RANS_L)
            return tf_fail(e, EIO, "rans: lane %u did not end in its initial state", l);
    return 0;
}

/* Fails on the first context of ctx[0..n) (all 0 when ctx is NULL) that
 * has no decoding slots. */
static int check_contexts(const tf_rans_decoder *dec, const uint16_t *ctx, size_t n,
                          tf_error *e)
{
    if (!ctx)
        return tf_rans_slots(dec, 0) || n == 0
                   ? 0 : tf_fail(e, EIO, "rans: context 0 has no table row");
    for (size_t i = 0; i < n; i++)
        if (!tf_rans_slots(dec, ctx[i]))
            return tf_fail(e, EIO, "rans: context %u at %zu has no table row", ctx[i], i);
    return 0;
}

int tf_rans_decode(const tf_rans_decoder *dec, tf_cursor *r, const uint16_t *ctx,
                   uint8_t *sym, size_t n, tf_error *e)
{
    tf_rans_stream s;
    if (check_contexts(dec, ctx, n, e) < 0 || tf_rans_stream_open(&s, r, e) < 0)
        return -1;
    const unsigned prec = dec->prec, lanes = s.lanes;
    size_t i = 0;
    for (; i + lanes <= n && tf_rans_words_suffice(&s, lanes); i += lanes)
        for (unsigned l = 0; l < lanes; l++)
            sym[i + l] = (uint8_t)tf_rans_get_fast(
                &s, l, tf_rans_slots(dec, ctx ? ctx[i + l] : 0), prec);
    for (; i < n; i++)
        sym[i] = (uint8_t)tf_rans_get_checked(
            &s, (unsigned)(i % lanes), tf_rans_slots(dec, ctx ? ctx[i] : 0), prec);
    return tf_rans_stream_close(&s, e);
}

/* ---- decoding into rows of dense slots ---- */

#ifdef TF_X86_SIMD
#define WL_BIT(m, l) ((m) >> (l) & 1)
#define WL_BEFORE(m, l) \
    ((l) > 0 && WL_BIT(m, 0)) + ((l) > 1 && WL_BIT(m, 1)) + ((l) > 2 && WL_BIT(m, 2)) + \
        ((l) > 3 && WL_BIT(m, 3)) + ((l) > 4 && WL_BIT(m, 4)) + ((l) > 5 && WL_BIT(m, 5)) + \
        ((l) > 6 && WL_BIT(m, 6))
#define WL(m, l) (WL_BIT(m, l) ? WL_BEFORE(m, l) : 0)
#define WL_ROW(m) \
    { WL(m, 0), WL(m, 1), WL(m, 2), WL(m, 3), WL(m, 4), WL(m, 5), WL(m, 6), WL(m, 7) },
#define WL_ROWS4(m) WL_ROW(m) WL_ROW((m) + 1) WL_ROW((m) + 2) WL_ROW((m) + 3)
#define WL_ROWS16(m) WL_ROWS4(m) WL_ROWS4((m) + 4) WL_ROWS4((m) + 8) WL_ROWS4((m) + 12)
#define WL_ROWS64(m) WL_ROWS16(m) WL_ROWS16((m) + 16) WL_ROWS16((m) + 32) WL_ROWS16((m) + 48)
const int32_t tf_rans_avx2_word_lane[256][8] = {
    WL_ROWS64(0) WL_ROWS64(64) WL_ROWS64(128) WL_ROWS64(192)
};

/* One step of eight lanes (states *x, rows `row`): stores their symbols,
 * folds their slots into *min_slot, renormalizes from *words in lane
 * order as tf_rans_renorm_fast does lane by lane. */
TF_AVX2_INLINE void avx2_dense_step(__m256i *x, __m256i row, const uint32_t *slots, unsigned prec,
                                    const uint8_t **words, __m256i *min_slot, uint32_t *sym)
{
    const __m256i low = _mm256_set1_epi32((int)((1u << prec) - 1));
    __m128i count = _mm_cvtsi32_si128((int)prec);
    __m256i index = _mm256_or_si256(_mm256_sll_epi32(row, count), _mm256_and_si256(*x, low));
    __m256i slot = _mm256_i32gather_epi32((const int *)slots, index, 4);
    __m256i freq = _mm256_srli_epi32(slot, 20);
    __m256i bias = _mm256_and_si256(_mm256_srli_epi32(slot, 8), _mm256_set1_epi32(0xfff));
    __m256i next = _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srl_epi32(*x, count)), bias);
    *min_slot = _mm256_min_epu32(*min_slot, slot);
    _mm256_storeu_si256((__m256i *)sym, _mm256_and_si256(slot, _mm256_set1_epi32(0xff)));
    __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(next, 16), _mm256_setzero_si256());
    unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
    __m256i word = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)*words));
    word = _mm256_permutevar8x32_epi32(
        word, _mm256_loadu_si256((const __m256i *)tf_rans_avx2_word_lane[mask]));
    *words += 2 * (unsigned)_mm_popcnt_u32(mask);
    *x = _mm256_blendv_epi8(next, _mm256_or_si256(_mm256_slli_epi32(next, 16), word), need);
}

TF_AVX2_INLINE __m256i avx2_rows(const uint32_t *ctx, __m256i lo, __m256i n_rows)
{
    __m256i c = _mm256_loadu_si256((const __m256i *)ctx);
    return _mm256_min_epu32(_mm256_sub_epi32(c, lo), n_rows);
}

/* The 16 lanes of a stream in two groups of eight, in registers. */
typedef struct {
    __m256i x0, x1;
    const uint8_t *words;
} avx2_lanes;

TF_AVX2_INLINE avx2_lanes avx2_lanes_load(const tf_rans_stream *s)
{
    return (avx2_lanes){ _mm256_loadu_si256((const __m256i *)s->x),
                         _mm256_loadu_si256((const __m256i *)(s->x + 8)), s->p };
}

TF_AVX2_INLINE void avx2_lanes_store(const avx2_lanes *l, tf_rans_stream *s)
{
    _mm256_storeu_si256((__m256i *)s->x, l->x0);
    _mm256_storeu_si256((__m256i *)(s->x + 8), l->x1);
    s->p = l->words;
}

/* Whether a round cannot run out of words (it reads at most 32 bytes). */
TF_AVX2_INLINE bool avx2_room(const avx2_lanes *l, const tf_rans_stream *s)
{
    return (size_t)(s->end - l->words) >= 32;
}

/* A round of 16 symbols, rows from ctx (NULL: row 0). */
TF_AVX2_INLINE void avx2_round(avx2_lanes *l, const uint32_t *slots, unsigned prec,
                               const uint32_t *ctx, __m256i lo, __m256i n, __m256i *least,
                               uint32_t *sym)
{
    __m256i row0 = _mm256_setzero_si256(), row1 = row0;
    if (ctx) {
        row0 = avx2_rows(ctx, lo, n);
        row1 = avx2_rows(ctx + 8, lo, n);
    }
    avx2_dense_step(&l->x0, row0, slots, prec, &l->words, least, sym);
    avx2_dense_step(&l->x1, row1, slots, prec, &l->words, least, sym + 8);
}

TF_AVX2_INLINE void avx2_fold_min(__m256i least, uint32_t *min_slot)
{
    uint32_t m[8];
    _mm256_storeu_si256((__m256i *)m, least);
    for (unsigned l = 0; l < 8; l++)
        *min_slot = m[l] < *min_slot ? m[l] : *min_slot;
}

/* Whole turns (a round of each stream) from the first stream's lane 0
 * while the words suffice; return the symbols decoded. With two streams,
 * four independent dependency chains (a gather, a multiply, the
 * renormalization) overlap their latencies. */
TF_AVX2_FUNCTION size_t
avx2_turns_1(tf_rans_stream *s, const uint32_t *slots, unsigned prec, const uint32_t *ctx,
             uint32_t ctx_lo, uint32_t n_rows, uint32_t *sym, size_t count, uint32_t *min_slot)
{
    const __m256i lo = _mm256_set1_epi32((int)ctx_lo), n = _mm256_set1_epi32((int)n_rows);
    __m256i least = _mm256_set1_epi32(-1);
    avx2_lanes a = avx2_lanes_load(&s[0]);
    size_t i = 0;
    for (; i + 16 <= count && avx2_room(&a, &s[0]); i += 16)
        avx2_round(&a, slots, prec, ctx ? ctx + i : NULL, lo, n, &least, sym + i);
    avx2_lanes_store(&a, &s[0]);
    avx2_fold_min(least, min_slot);
    return i;
}

TF_AVX2_FUNCTION size_t
avx2_turns_2(tf_rans_stream *s, const uint32_t *slots, unsigned prec, const uint32_t *ctx,
             uint32_t ctx_lo, uint32_t n_rows, uint32_t *sym, size_t count, uint32_t *min_slot)
{
    const __m256i lo = _mm256_set1_epi32((int)ctx_lo), n = _mm256_set1_epi32((int)n_rows);
    __m256i least = _mm256_set1_epi32(-1);
    avx2_lanes a = avx2_lanes_load(&s[0]), b = avx2_lanes_load(&s[1]);
    size_t i = 0;
    for (; i + 32 <= count && avx2_room(&a, &s[0]) && avx2_room(&b, &s[1]); i += 32) {
        avx2_round(&a, slots, prec, ctx ? ctx + i : NULL, lo, n, &least, sym + i);
        avx2_round(&b, slots, prec, ctx ? ctx + i + 16 : NULL, lo, n, &least, sym + i + 16);
    }
    avx2_lanes_store(&a, &s[0]);
    avx2_lanes_store(&b, &s[1]);
    avx2_fold_min(least, min_slot);
    return i;
}
#endif

/* Symbol i of k streams, never reading past the words. */
static inline uint32_t dense_checked(tf_rans_stream *s, unsigned k, uint64_t i,
                                     const uint32_t *row, unsigned prec, uint32_t *min_slot)
{
    const unsigned lanes = s[0].lanes, lane = (unsigned)(i & (lanes - 1));
    tf_rans_stream *st = &s[(i / lanes) % k];
    uint32_t x = st->x[lane], slot = tf_rans_step_slot(&x, row, prec);
    tf_rans_renorm_checked(st, lane, x);
    *min_slot = slot < *min_slot ? slot : *min_slot;
    return slot & 0xff;
}

static bool words_suffice(const tf_rans_stream *s, unsigned k)
{
    bool enough = true;
    for (unsigned t = 0; t < k; t++)
        enough &= tf_rans_words_suffice(&s[t], s[t].lanes);
    return enough;
}

bool tf_rans_decode_rows(tf_rans_stream *s, unsigned k, uint64_t at, const uint32_t *slots,
                         unsigned prec, const uint32_t *ctx, uint32_t ctx_lo, uint32_t n_rows,
                         uint32_t *sym, size_t count, tf_simd_level simd)
{
    const unsigned lanes = s[0].lanes, turn = k * lanes;
    uint32_t min_slot = UINT32_MAX;
#define ROW(j)                                                                          \
    (slots + (ctx ? (size_t)(ctx[j] - ctx_lo < n_rows ? ctx[j] - ctx_lo : n_rows) << prec \
                  : 0))
    size_t j = 0;
    for (; j < count && (at + j) % turn; j++) /* up to the first stream's lane 0 */
        sym[j] = dense_checked(s, k, at + j, ROW(j), prec, &min_slot);
#ifdef TF_X86_SIMD
    if (lanes == 16 && simd >= TF_SIMD_AVX2)
        j += (k == 2 ? avx2_turns_2 : avx2_turns_1)(s, slots, prec, ctx ? ctx + j : NULL, ctx_lo,
                                                    n_rows, sym + j, count - j, &min_slot);
#endif
    for (; j + turn <= count && words_suffice(s, k); j += turn)
        for (unsigned t = 0; t < k; t++)
            for (unsigned l = 0; l < lanes; l++) {
                size_t i = j + t * lanes + l;
                uint32_t x = s[t].x[l], slot = tf_rans_step_slot(&x, ROW(i), prec);
                tf_rans_renorm_fast(&s[t], l, x);
                min_slot = slot < min_slot ? slot : min_slot;
                sym[i] = slot & 0xff;
            }
    for (; j < count; j++)
        sym[j] = dense_checked(s, k, at + j, ROW(j), prec, &min_slot);
#undef ROW
    /* every slot of a present row has a positive frequency in bits 20.. */
    return count == 0 || min_slot >> 20;
}
