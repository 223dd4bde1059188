#include "codec/ulp/ulp_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/ulp/ulp.h"
#include "common/buf.h"
#include "common/dtype.h"

/* The span of the contexts that have rows in t (n = 0: none). */
static ctx_span occupied_span(const tf_rans_table *t)
{
    ctx_span span = { 0, 0 };
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        if (span.n == 0)
            span.lo = c;
        span.n = c + 1 - span.lo;
    }
    return span;
}

/* LSB-first bit reader over [p, end). It never reads outside; wanting
 * more bits than there are sets `bad` and yields zeros. */
typedef struct {
    uint64_t acc;
    unsigned count;
    const uint8_t *p, *end;
    bool bad;
} bit_reader;

/* Tops up to 56..63 bits from 8 readable bytes at p. The bits above
 * `count` are those of the bytes at p, so loading them again is harmless. */
ULP_ALWAYS_INLINE void bits_refill_fast(bit_reader *r)
{
    r->acc |= tf_le_get(r->p, 8) << r->count;
    r->p += (63 - r->count) >> 3;
    r->count |= 56;
}

ULP_ALWAYS_INLINE uint64_t bits_take(bit_reader *r, unsigned n) /* n <= count, n < 64 */
{
    uint64_t v = r->acc & (((uint64_t)1 << n) - 1);
    r->acc >>= n;
    r->count -= n;
    return v;
}

/* n <= 56 bits anywhere in the section, byte by byte near its end. */
ULP_ALWAYS_INLINE uint64_t bits_get_checked(bit_reader *r, unsigned n)
{
    if (r->count < n) {
        if (r->end - r->p >= 8) {
            bits_refill_fast(r);
        } else {
            while (r->count <= 56 && r->p < r->end) {
                r->acc |= (uint64_t)*r->p++ << r->count;
                r->count += 8;
            }
            if (r->count < n) {
                r->bad = true;
                r->count = n;
            }
        }
    }
    return bits_take(r, n);
}

/* The raw section must end exactly: no whole byte left, zero padding. */
static int bits_finish(const bit_reader *r, tf_error *e)
{
    if (r->bad)
        return tf_fail(e, EIO, "ulp: raw bits are truncated");
    if (r->p != r->end || r->count >= 8 || r->acc)
        return tf_fail(e, EIO, "ulp: raw bits have trailing data");
    return 0;
}

/* Decoding slots, one per (row, x mod 2^ULP_PREC), each all a decoding
 * step needs in 32 bits, so that the vector loop fetches it with one
 * gather:
 *   bits 20-31  freq of the symbol
 *   bits  9-19  slot - cum, the symbol's bias
 *   bits  3-8   its raw bit count
 *   bits  0-2   its lead bits (tf_ulp_symbol_lead)
 * A slot of 0 is poison: rows of contexts without a table row are all
 * poison, and a chunk that meets one is refused once decoded (the
 * decoding itself is harmless: state 0, no raw bits). A real slot has a
 * positive freq, so it is at least SLOT_MIN. */
#define SLOT_MIN (1u << 20)

ULP_ALWAYS_INLINE uint32_t slot_freq(uint32_t slot)
{
    return slot >> 20;
}

ULP_ALWAYS_INLINE uint32_t slot_bias(uint32_t slot)
{
    return slot >> 9 & 0x7ff;
}

ULP_ALWAYS_INLINE unsigned slot_raw_count(uint32_t slot)
{
    return slot >> 3 & 63;
}

ULP_ALWAYS_INLINE uint32_t slot_lead(uint32_t slot)
{
    return slot & 7;
}

/* The slots of a chunk's decoding: a row per context of the table's span
 * (ctx_span), then a poison row, so that row r is at
 * slots + (r << ULP_PREC) for the vector loop. row_of gives each context
 * its row. A small chunk gets only the rows of the contexts its reference
 * uses, found first (the others are left unwritten, and the loops never
 * read them); a large one gets every row without looking (unoccupied
 * contexts' rows are poison). */
typedef struct {
    uint32_t *slots;
    const uint32_t **row_of; /* n_ctx entries */
    ctx_span span;
} slot_table;

static void slot_table_free(slot_table *st)
{
    free(st->slots);
    free(st->row_of);
}

/* The slots of one row from its frequencies. A symbol's slots are one
 * run, the bias counting up: written eight at a time where AVX2 is, each
 * run may spill up to 7 slots past its end, which the next run (or the
 * next row, or the poison row, filled last) overwrites. */
static void fill_row(uint32_t *row, const uint16_t *freq, unsigned n_sym, bool avx2);

/* Marks the contexts the reference of a chunk uses. */
ULP_ALWAYS_INLINE void mark_sized(const uint8_t *ref, size_t n, uint8_t *used, unsigned bytes,
                                  unsigned man, unsigned exp)
{
    /* Unrolled: the loop is all overhead otherwise. */
#pragma GCC unroll 8
    for (size_t i = 0; i < n; i++)
        used[context_of(tf_le_get(ref + i * bytes, bytes), man, exp)] = 1;
}

static void mark_contexts(unsigned dtype, const uint8_t *ref, size_t n, uint8_t *used)
{
    switch (dtype) {
#define X(dt, bytes, man, exp, sb) \
    case dt: mark_sized(ref, n, used, bytes, man, exp); break;
        ULP_FORMATS(X)
#undef X
    }
}

/* Building every row costs about as much as finding the contexts a chunk
 * uses among ALL_ROWS_PER_ELEM elements per row of the span: a row is 8
 * KiB of stores. (At 64, six unchanged BF16 tensors of 16384 elements,
 * whose span is 128 rows with 2 occupied, built every row and decoded in
 * 1.35x the time they take at 512, which did not slow larger chunks.) */
#define ALL_ROWS_PER_ELEM 512

static int slot_table_build(slot_table *st, const ulp_format *f, const tf_rans_table *t,
                            const uint8_t *ref, size_t n, bool avx2, tf_error *e)
{
    *st = (slot_table){ .span = occupied_span(t) };
    const size_t row_slots = (size_t)1 << ULP_PREC;
    const bool all_rows = n >= (size_t)ALL_ROWS_PER_ELEM * st->span.n;
    uint8_t *used = all_rows ? NULL : calloc(f->n_ctx, 1);
    st->slots = malloc(((st->span.n + 1) * row_slots + 8) * sizeof *st->slots);
    st->row_of = malloc(f->n_ctx * sizeof *st->row_of);
    if (!st->slots || !st->row_of || (!all_rows && !used)) {
        free(used);
        slot_table_free(st);
        return tf_fail(e, ENOMEM, "ulp: out of memory for decoding tables");
    }
    if (used)
        mark_contexts(f->dtype, ref, n, used);
    uint32_t *poison = st->slots + (size_t)st->span.n * row_slots;
    for (unsigned c = 0; c < f->n_ctx; c++) {
        unsigned row = row_of_context(c, st->span);
        uint32_t *slots = st->slots + row * row_slots;
        st->row_of[c] = slots;
        if (row == st->span.n || (used && !used[c]))
            continue; /* the poison row, or a row never read */
        if (t->row_of_ctx[c] >= 0)
            fill_row(slots, t->freq + (size_t)t->row_of_ctx[c] * t->n_sym, t->n_sym, avx2);
        else
            memset(slots, 0, row_slots * sizeof *slots);
    }
    /* last: row fills spill up to 7 slots into the next row */
    memset(poison, 0, row_slots * sizeof *poison);
    free(used);
    return 0;
}

/* One decoding step of a lane: the slot of its state, and the state
 * before renormalization. The slot's freq and bias are those of the
 * symbol; freq * (x >> prec) + bias is the rANS decoding step. */
ULP_ALWAYS_INLINE uint32_t slot_step(uint32_t *x, const uint32_t *row)
{
    uint32_t slot = row[*x & ((1u << ULP_PREC) - 1)];
    *x = slot_freq(slot) * (*x >> ULP_PREC) + slot_bias(slot);
    return slot;
}

/* Decodes a slot; the caller guarantees a word is available
 * (tf_rans_words_suffice). */
ULP_ALWAYS_INLINE uint32_t slot_get_fast(tf_rans_stream *s, unsigned lane, const uint32_t *row)
{
    uint32_t x = s->x[lane];
    uint32_t slot = slot_step(&x, row);
    tf_rans_renorm_fast(s, lane, x);
    return slot;
}

/* Decodes a slot near the end of the stream, never reading past it. */
ULP_ALWAYS_INLINE uint32_t slot_get_checked(tf_rans_stream *s, unsigned lane, const uint32_t *row)
{
    uint32_t x = s->x[lane];
    uint32_t slot = slot_step(&x, row);
    tf_rans_renorm_checked(s, lane, x);
    return slot;
}

/* The residual of an element whose symbol's slot is `slot`. */
ULP_ALWAYS_INLINE uint64_t residual_of(uint32_t slot, bit_reader *r, bool checked, unsigned bytes)
{
    unsigned n_raw = slot_raw_count(slot);
    uint64_t lead = (uint64_t)slot_lead(slot) << n_raw;
    if (bytes < 8 && checked)
        return lead | bits_get_checked(r, n_raw);
    if (bytes < 8) /* the round refilled enough bits */
        return lead | bits_take(r, n_raw);
    /* F64: up to 61 raw bits, in two halves of at most 32 */
    unsigned low_bits = n_raw < 32 ? n_raw : 32, high_bits = n_raw - low_bits;
    if (checked) {
        uint64_t low = bits_get_checked(r, low_bits);
        return lead | low | bits_get_checked(r, high_bits) << 32;
    }
    bits_refill_fast(r);
    uint64_t low = bits_take(r, low_bits);
    bits_refill_fast(r);
    return lead | low | bits_take(r, high_bits) << 32;
}

/* Raw bytes the vector loops' second stage of sixteen elements may read
 * from its first raw bit's byte on: 16-bit formats read 32 bytes from at
 * most 29 bytes in (AVX2: two windows of 16, the second from at most
 * (7 + 8 * 13) / 8 bytes on; AVX-512: one of 32 from the start); F32
 * reads 60 bytes with AVX2 (two windows of 16, from at most 15 bytes
 * into the group, from groups at most 29 bytes in) and 64 with AVX-512
 * (one window from the start). Sixteen elements' raw bits take
 * fewer than 64 bytes, so a round of k streams reads at most k times
 * this. */
#define SIMD_RAW_MARGIN 64
/* Bytes the vector loops may load past the last word or raw bit they
 * use: a round's raw bits (its words take at most 32 bytes). */
#define SIMD_READ_PAST (ULP_STREAMS * SIMD_RAW_MARGIN)
/* Chunks shorter than this decode from a copy (decode_chunk). */
#define COPY_CHUNKS_BELOW 4096

/* A chunk's rANS streams (ulp.h: one, or ULP_STREAMS taking turns by
 * rounds of their lanes), all with the same number of lanes, and the end
 * of the memory the vector loops may load from: the chunk's end, or past
 * it where the chunk was copied with zeros after it (decode_chunk). */
typedef struct {
    tf_rans_stream s[ULP_STREAMS];
    unsigned k;
    const uint8_t *readable_end;
} chunk_streams;

/* A round may skip bounds checks when every lane has a word and the raw
 * bits have 8 readable bytes for each refill (a refill advances at most
 * 7 bytes; F64 refills twice per element). */
ULP_ALWAYS_INLINE bool round_is_safe(const chunk_streams *cs, const bit_reader *r, unsigned k)
{
    for (unsigned t = 0; t < k; t++)
        if (!tf_rans_words_suffice(&cs->s[t], ULP_LANES))
            return false;
    return (size_t)(r->end - r->p) >= 16 * ULP_LANES * k + 8;
}

/* Decodes element i; returns its slot (for the poison check). */
ULP_ALWAYS_INLINE uint32_t decode_one(const uint32_t *const *row_of, tf_rans_stream *s,
                                      bit_reader *br, const uint8_t *ref, uint8_t *dst, size_t i,
                                      unsigned lane, bool checked, unsigned bytes, unsigned man,
                                      unsigned exp)
{
    uint64_t r = tf_le_get(ref + i * bytes, bytes);
    const uint32_t *row = row_of[context_of(r, man, exp)];
    uint32_t slot = checked ? slot_get_checked(s, lane, row) : slot_get_fast(s, lane, row);
    uint64_t z = residual_of(slot, br, checked, bytes);
    tf_le_put(dst + i * bytes, tf_ulp_unresidual(z, r, 8 * bytes), bytes);
    return slot;
}

ULP_ALWAYS_INLINE uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Whole rounds of k streams of ULP_LANES lanes while no bounds check is
 * needed; returns the elements done. The streams and reader live in
 * locals (registers) meanwhile. */
ULP_ALWAYS_INLINE size_t decode_rounds(const uint32_t *const *row_of, chunk_streams *streams,
                                       bit_reader *reader, const uint8_t *ref, uint8_t *dst,
                                       size_t n, uint32_t *min_slot, unsigned k, unsigned bytes,
                                       unsigned man, unsigned exp)
{
    chunk_streams cs = *streams;
    bit_reader br = *reader;
    uint32_t low = *min_slot;
    const unsigned round = k * ULP_LANES;
    size_t i = 0;
    for (; i + round <= n && round_is_safe(&cs, &br, k); i += round) {
#pragma GCC unroll 32
        for (unsigned j = 0; j < round; j++) {
            if (bytes < 8 && j % elems_per_56_bits(bytes) == 0)
                bits_refill_fast(&br);
            low = min_u32(low, decode_one(row_of, &cs.s[j / ULP_LANES], &br, ref, dst, i + j,
                                          j % ULP_LANES, false, bytes, man, exp));
        }
    }
    *streams = cs;
    *reader = br;
    *min_slot = low;
    return i;
}

/* Every element from the first; rounds of ULP_LANES lanes where they are
 * safe, then element by element with checks (streams of other than
 * ULP_LANES lanes, a small chunk, go that way throughout). Returns the
 * lowest slot met. */
ULP_ALWAYS_INLINE uint32_t decode_sized(const uint32_t *const *row_of, chunk_streams *cs,
                                        bit_reader *br, const uint8_t *ref, uint8_t *dst,
                                        size_t n, unsigned bytes, unsigned man, unsigned exp)
{
    uint32_t low = ~0u;
    size_t i = 0;
    if (cs->s[0].lanes == ULP_LANES)
        i = cs->k == 1 ? decode_rounds(row_of, cs, br, ref, dst, n, &low, 1, bytes, man, exp)
                       : decode_rounds(row_of, cs, br, ref, dst, n, &low, ULP_STREAMS, bytes,
                                       man, exp);
    /* i is at a turn's start: stream 0, lane 0. Counting lanes and
     * streams along, not dividing i by the lane count (unknown at compile
     * time), halves the time of chunks this loop decodes throughout. */
    unsigned lane = 0, t = 0;
    for (; i < n; i++) {
        low = min_u32(low, decode_one(row_of, &cs->s[t], br, ref, dst, i, lane, true, bytes, man,
                                      exp));
        if (++lane == cs->s[0].lanes) {
            lane = 0;
            t = t + 1 == cs->k ? 0 : t + 1;
        }
    }
    return low;
}

#ifdef TF_X86_SIMD
/* ---- AVX2 decoding ----
 * The rounds of decode_rounds, sixteen elements per stream, with lanes
 * 0-7 and 8-15 of each stream as two groups of eight 32-bit vector lanes.
 * Each group takes its words and raw bits in lane order, group 0-7 first,
 * exactly as the scalar loop does: the output is the same. The rANS
 * lookup is one gather per group (a row's address is arithmetic, so no
 * second gather finds it, and the slot carries the symbol's raw bit count
 * and lead bits), and the groups' independent dependency chains overlap
 * its latency. Its
 * rows are 8 KiB: on real BF16 data the hot ones exceed a 32 KiB L1, and
 * the gathers then wait on L2, which the format's 2^11 slots per row fix
 * (with 1 row instead of 16 in use, the rANS steps alone take 54 cycles
 * a round instead of 73 on a Zen 4). Raw bits
 * come from 16-byte windows by byte shuffles: gathers are slow on some
 * CPUs (on an AMD Zen 4, a row gather halved the speed, raw-bit gathers
 * cost F32 a fifth). 16-bit formats convert back sixteen elements at a
 * time in 16-bit lanes. */


/* What the loop needs besides its elements. */
typedef struct {
    const uint32_t *slots;
    ctx_span span;
} avx2_tables;

/* slot_step for eight lanes in rows `row`: their slots, and the states
 * before renormalization. */
TF_AVX2_INLINE __m256i avx2_rans_step(__m256i x, __m256i row, const avx2_tables *t,
                                      __m256i *slot)
{
    __m256i slot_index = _mm256_or_si256(_mm256_slli_epi32(row, ULP_PREC),
                                         _mm256_and_si256(x, avx2_set((1u << ULP_PREC) - 1)));
    *slot = _mm256_i32gather_epi32((const int *)t->slots, slot_index, 4);
    __m256i freq = _mm256_srli_epi32(*slot, 20);
    __m256i bias = _mm256_and_si256(_mm256_srli_epi32(*slot, 9), avx2_set(0x7ff));
    return _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32(x, ULP_PREC)), bias);
}

/* The renormalization of slot_get_fast for eight lanes: those below
 * TF_RANS_L take the next words in lane order, placed by a permutation
 * looked up by the mask of those lanes. */
TF_AVX2_INLINE __m256i avx2_renormalize(__m256i next, const uint8_t **words)
{
    __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(next, 16), _mm256_setzero_si256());
    unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
    __m256i word = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)*words));
    word = _mm256_permutevar8x32_epi32(
        word, _mm256_loadu_si256((const __m256i *)tf_rans_avx2_word_lane[mask]));
    *words += 2 * (unsigned)_mm_popcnt_u32(mask);
    return _mm256_blendv_epi8(next, _mm256_or_si256(_mm256_slli_epi32(next, 16), word), need);
}

/* Where the raw bits of eight elements start, n_raw[l] of them for lane
 * l, from bit `*bit` of `*base` on (the start, relative to *base); advances
 * *base and *bit past them. */
TF_AVX2_INLINE __m256i avx2_raw_starts(__m256i n_raw, const uint8_t **base, unsigned *bit)
{
    __m256i end = _mm256_add_epi32(n_raw, _mm256_slli_si256(n_raw, 4)); /* prefix sums */
    end = _mm256_add_epi32(end, _mm256_slli_si256(end, 8));            /* in each half */
    __m256i low_half = _mm256_permutevar8x32_epi32(end, avx2_set(3));
    end = _mm256_add_epi32(end, _mm256_blend_epi32(_mm256_setzero_si256(), low_half, 0xf0));
    __m256i start = _mm256_add_epi32(_mm256_sub_epi32(end, n_raw), avx2_set(*bit));
    unsigned total = (unsigned)_mm256_extract_epi32(end, 7) + *bit;
    *base += total >> 3;
    *bit = total & 7;
    return start;
}

/* Byte indexes picking, for each 32-bit lane, the 4 (or for 64-bit
 * lanes, 5 then 3 zero) bytes from `byte` on. */
TF_AVX2_INLINE __m256i avx2_pick4(__m256i byte)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                            0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    return _mm256_add_epi32(_mm256_shuffle_epi8(byte, spread), avx2_set(0x03020100));
}

/* Four lanes' raw bits (F32: up to 29 after a bit offset up to 7, in the
 * 5 bytes from `byte`), in 64-bit lanes, from the 16 bytes at `from`,
 * which hold them all (offsets up to 7 + 3 * 29 bits). */
TF_AVX2_INLINE __m256i avx2_raw_bits_wide(const uint8_t *from, __m128i byte, __m128i shift)
{
    __m256i window = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)from));
    __m256i first = _mm256_cvtepu32_epi64(byte);
    __m256i pick = _mm256_add_epi64(_mm256_mul_epu32(first, _mm256_set1_epi64x(0x01010101)),
                                    _mm256_slli_epi64(first, 32)); /* 5 x first */
    pick = _mm256_or_si256(_mm256_add_epi64(pick, _mm256_set1_epi64x(0x0403020100)),
                           _mm256_set1_epi64x((long long)0x8080800000000000ull)); /* 3 x zero */
    return _mm256_srlv_epi64(_mm256_shuffle_epi8(window, pick), _mm256_cvtepu32_epi64(shift));
}

/* The raw bits themselves, gathered with byte shuffles from 16-byte
 * windows. Narrow formats (13 raw bits at most): the group's bits, at most
 * 7 + 8 * 13, lie in the 16 bytes at base, and each lane picks the 4
 * bytes holding its own. F32: each half group has a window of its own
 * and 64-bit lanes. */
TF_AVX2_INLINE __m256i avx2_raw_bits(__m256i n_raw, const uint8_t **base, unsigned *bit,
                                     unsigned bytes)
{
    const uint8_t *from = *base;
    __m256i start = avx2_raw_starts(n_raw, base, bit);
    __m256i keep = _mm256_sub_epi32(_mm256_sllv_epi32(avx2_set(1), n_raw), avx2_set(1));
    if (bytes == 2) {
        __m256i byte = _mm256_srli_epi32(start, 3), shift = _mm256_and_si256(start, avx2_set(7));
        __m256i window = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)from));
        __m256i bits = _mm256_srlv_epi32(_mm256_shuffle_epi8(window, avx2_pick4(byte)), shift);
        return _mm256_and_si256(bits, keep);
    }
    unsigned high_from = (unsigned)_mm256_extract_epi32(start, 4) >> 3;
    start = _mm256_sub_epi32(start, _mm256_blend_epi32(_mm256_setzero_si256(),
                                                       avx2_set(8 * high_from), 0xf0));
    __m256i byte = _mm256_srli_epi32(start, 3), shift = _mm256_and_si256(start, avx2_set(7));
    __m256i low = avx2_raw_bits_wide(from, _mm256_castsi256_si128(byte),
                                     _mm256_castsi256_si128(shift));
    __m256i high = avx2_raw_bits_wide(from + high_from, _mm256_extracti128_si256(byte, 1),
                                      _mm256_extracti128_si256(shift, 1));
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    __m256i bits = _mm256_permute2x128_si256(_mm256_permutevar8x32_epi32(low, even),
                                             _mm256_permutevar8x32_epi32(high, even), 0x20);
    return _mm256_and_si256(bits, keep);
}

/* tf_ulp_unresidual for eight 32-bit elements. */
TF_AVX2_INLINE __m256i avx2_unresidual32(__m256i z, __m256i r)
{
    const __m256i zero = _mm256_setzero_si256(), one = avx2_set(1);
    const __m256i top = avx2_set(0x80000000u);
    __m256i d = _mm256_xor_si256(_mm256_srli_epi32(z, 1),
                                 _mm256_sub_epi32(zero, _mm256_and_si256(z, one)));
    __m256i r_key = _mm256_xor_si256(r, _mm256_or_si256(_mm256_srai_epi32(r, 31), top));
    __m256i k = _mm256_add_epi32(r_key, d);
    /* unkey: flip the sign bit of a top-half key, complement a bottom one */
    __m256i bottom = _mm256_srai_epi32(_mm256_xor_si256(k, avx2_set(~0u)), 31);
    return _mm256_xor_si256(k, _mm256_or_si256(bottom, top));
}

/* ... for sixteen 16-bit elements in 16-bit lanes. */
TF_AVX2_INLINE __m256i avx2_unresidual16(__m256i z, __m256i r)
{
    const __m256i top = avx2_set16(0x8000);
    __m256i d = _mm256_xor_si256(_mm256_srli_epi16(z, 1),
                                 _mm256_srai_epi16(_mm256_slli_epi16(z, 15), 15));
    __m256i r_key = _mm256_xor_si256(r, _mm256_or_si256(_mm256_srai_epi16(r, 15), top));
    __m256i k = _mm256_add_epi16(r_key, d);
    __m256i bottom = _mm256_srai_epi16(_mm256_xor_si256(k, avx2_set16(0xffff)), 15);
    return _mm256_xor_si256(k, _mm256_or_si256(bottom, top));
}

/* The residuals of eight elements whose slots are `slot`. */
TF_AVX2_INLINE __m256i avx2_residuals(__m256i slot, const uint8_t **base, unsigned *bit,
                                      unsigned bytes)
{
    __m256i n_raw = _mm256_and_si256(_mm256_srli_epi32(slot, 3), avx2_set(63));
    __m256i lead = _mm256_and_si256(slot, avx2_set(7));
    return _mm256_or_si256(_mm256_sllv_epi32(lead, n_raw), avx2_raw_bits(n_raw, base, bit, bytes));
}

/* The rows of eight 32-bit reference elements. */
TF_AVX2_INLINE __m256i avx2_rows32(__m256i r, ctx_span span, unsigned man, unsigned exp)
{
    __m256i ctx = _mm256_and_si256(_mm256_srli_epi32(r, (int)man), avx2_set((1u << exp) - 1));
    return _mm256_min_epu32(_mm256_sub_epi32(ctx, avx2_set(span.lo)), avx2_set(span.n));
}

/* A round is sixteen elements per stream (k streams, 2k groups of eight
 * lanes), in two stages: the rANS steps of all groups give their slots,
 * from which the raw bits and the elements follow. The loop runs the
 * first stage of a round before the second stage of the round before it:
 * the rANS steps are a chain of long latency (a gather, a multiply, the
 * renormalization), and the other stage's work, ready to run, fills its
 * wait instead of queueing behind it. (Measured on an AMD Zen 4: BF16
 * decoding 1.1x, F32 1.2x as fast.) A second stream doubles the chains
 * that overlap, and gives the words a second pointer: with the raw bits'
 * offset off the vector registers' chain (avx512_residuals16), BF16
 * decoding 1.3x as fast again, where each change alone measured within
 * noise of neither (a Zen 4 VM; four streams measured no faster than
 * two). */
#define AVX2_MAX_GROUPS (2 * ULP_STREAMS)

typedef struct {
    __m256i slot[AVX2_MAX_GROUPS];
} avx2_round;

/* Where the loop is in the words and the raw bits (the lanes' states
 * are the loop's own, in registers of its width). */
typedef struct {
    const avx2_tables *t;
    const uint8_t *words[ULP_STREAMS], *base, *raw_end, *readable_end;
    unsigned bit;
} simd_cursor;

/* The rows of a round's reference elements, by group. */
TF_AVX2_INLINE void avx2_round_rows(const avx2_tables *t, const uint8_t *ref, __m256i *row,
                                    unsigned k, unsigned bytes, unsigned man, unsigned exp)
{
#pragma GCC unroll 4
    for (unsigned g = 0; g < 2 * k; g += 2, ref += 16 * bytes) {
        if (bytes == 2) {
            __m256i r = _mm256_loadu_si256((const __m256i *)ref);
            __m256i ctx = _mm256_and_si256(_mm256_srli_epi16(r, (int)man),
                                           avx2_set16((uint16_t)((1u << exp) - 1)));
            __m256i rows = _mm256_min_epu16(
                _mm256_sub_epi16(ctx, avx2_set16((uint16_t)t->span.lo)),
                avx2_set16((uint16_t)t->span.n));
            row[g] = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(rows));
            row[g + 1] = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(rows, 1));
        } else {
            row[g] = avx2_rows32(_mm256_loadu_si256((const __m256i *)ref), t->span, man, exp);
            row[g + 1] = avx2_rows32(_mm256_loadu_si256((const __m256i *)(ref + 32)), t->span,
                                     man, exp);
        }
    }
}

/* The second stage for sixteen elements, whose slots are slot0 and slot1. */
TF_AVX2_INLINE void avx2_sixteen_elements(simd_cursor *lp, __m256i slot0, __m256i slot1,
                                          const uint8_t *ref, uint8_t *dst, unsigned bytes)
{
    __m256i z0 = avx2_residuals(slot0, &lp->base, &lp->bit, bytes);
    __m256i z1 = avx2_residuals(slot1, &lp->base, &lp->bit, bytes);
    if (bytes == 2) {
        /* residuals of 16-bit formats are below 2^16: packus keeps them */
        __m256i z = _mm256_permute4x64_epi64(_mm256_packus_epi32(z0, z1), 0xd8);
        __m256i r = _mm256_loadu_si256((const __m256i *)ref);
        _mm256_storeu_si256((__m256i *)dst, avx2_unresidual16(z, r));
        return;
    }
    __m256i r0 = _mm256_loadu_si256((const __m256i *)ref);
    __m256i r1 = _mm256_loadu_si256((const __m256i *)(ref + 32));
    _mm256_storeu_si256((__m256i *)dst, avx2_unresidual32(z0, r0));
    _mm256_storeu_si256((__m256i *)(dst + 32), avx2_unresidual32(z1, r1));
}

/* Whether the rANS steps of a round may load each stream's next 16
 * words (32 bytes). They are bounded by the readable memory, not by the
 * streams' ends: a lane takes words only while its stream has them,
 * unless the chunk is corrupt, and simd_cursor_end catches a stream that
 * ran past its end. */
ULP_ALWAYS_INLINE bool simd_cursor_words_fit(const simd_cursor *c, unsigned k)
{
    bool words = true;
#pragma GCC unroll 4
    for (unsigned t = 0; t < k; t++)
        words &= (size_t)(c->readable_end - c->words[t]) >= 2 * ULP_LANES;
    return words;
}

/* Whether the loop may start: at least the last round is left to the
 * scalar loop, with the raw bits of the one before it (which keeps the
 * scalar code exercised on every machine, by every chunk). */
static inline bool simd_cursor_begin(simd_cursor *c, const avx2_tables *t,
                                     const chunk_streams *cs, const bit_reader *br, size_t n,
                                     unsigned k)
{
    *c = (simd_cursor){ .t = t, .base = br->p, .raw_end = br->end,
                        .readable_end = cs->readable_end };
    for (unsigned j = 0; j < k; j++)
        c->words[j] = cs->s[j].p;
    return n >= 2 * k * ULP_LANES && simd_cursor_words_fit(c, k);
}

/* Whether the round from element i may run, with the second stage of
 * the round before it, which loads up to k * SIMD_RAW_MARGIN bytes of raw
 * bits (from readable memory: as with the words, what lies past the raw
 * bits' end only reaches corrupt chunks' elements). */
ULP_ALWAYS_INLINE bool simd_cursor_round_fits(const simd_cursor *c, size_t i, size_t n,
                                              unsigned k)
{
    return i + 2 * k * ULP_LANES <= n && simd_cursor_words_fit(c, k) &&
           (size_t)(c->readable_end - c->base) >= k * SIMD_RAW_MARGIN;
}

/* Hands the words and the reader back (the loop has stored the lanes'
 * states), folds the lowest slots of its vector lanes low[0..n_low) into
 * *min_slot, and gives the elements of the pending round (from element
 * `at`, their slots in `slots`) to checked scalar code: the loop's raw
 * bound held for the rounds before it, not necessarily for this one. */
static void simd_cursor_end(const simd_cursor *c, const uint32_t *slots, const uint32_t *low,
                            unsigned n_low, size_t at, chunk_streams *cs, bit_reader *br,
                            const uint8_t *ref, uint8_t *dst, uint32_t *min_slot, unsigned k,
                            unsigned bytes)
{
    for (unsigned t = 0; t < k; t++) {
        /* a corrupt stream's lanes may have taken words past its end */
        bool overrun = c->words[t] > cs->s[t].end;
        cs->s[t].p = overrun ? cs->s[t].end : c->words[t];
        cs->s[t].bad |= overrun;
    }
    for (unsigned l = 0; l < n_low; l++)
        *min_slot = min_u32(*min_slot, low[l]);
    /* and a corrupt chunk's raw bits, bits past theirs */
    bool raw_overrun = c->base > c->raw_end;
    *br = (bit_reader){ .p = raw_overrun ? c->raw_end : c->base, .end = c->raw_end,
                        .bad = raw_overrun };
    bits_get_checked(br, c->bit);
    for (size_t j = 0; j < 16 * k; j++, at++) {
        uint64_t r = tf_le_get(ref + at * bytes, bytes);
        uint64_t z = residual_of(slots[j], br, true, bytes);
        tf_le_put(dst + at * bytes, tf_ulp_unresidual(z, r, 8 * bytes), bytes);
    }
}

/* The loop `sized` (isa_rounds_sized) of a chunk of dtype (BF16, F16 or
 * F32) and k streams, called from isa_rounds with its arguments. */
#define SIMD_ROUNDS_OF(sized, dtype, k)                                        \
    ((dtype) == TF_DT_BF16  ? sized(t, cs, br, ref, dst, n, min_slot, k, 2, 7, 8)  \
     : (dtype) == TF_DT_F16 ? sized(t, cs, br, ref, dst, n, min_slot, k, 2, 10, 5) \
                            : sized(t, cs, br, ref, dst, n, min_slot, k, 4, 23, 8))

/* The first stage of the round of elements at ref. */
TF_AVX2_INLINE avx2_round avx2_round_slots(simd_cursor *c, __m256i *x, __m256i *low,
                                           const uint8_t *ref, unsigned k, unsigned bytes,
                                           unsigned man, unsigned exp)
{
    __m256i row[AVX2_MAX_GROUPS];
    avx2_round round;
    avx2_round_rows(c->t, ref, row, k, bytes, man, exp);
#pragma GCC unroll 4
    for (unsigned g = 0; g < 2 * k; g++) {
        x[g] = avx2_renormalize(avx2_rans_step(x[g], row[g], c->t, &round.slot[g]),
                                &c->words[g / 2]);
        *low = _mm256_min_epu32(*low, round.slot[g]);
    }
    return round;
}

/* The loop from the start of a chunk of k streams; returns the elements
 * done. */
TF_AVX2_INLINE size_t avx2_rounds_sized(const avx2_tables *t, chunk_streams *cs, bit_reader *br,
                                        const uint8_t *ref, uint8_t *dst, size_t n,
                                        uint32_t *min_slot, unsigned k, unsigned bytes,
                                        unsigned man, unsigned exp)
{
    simd_cursor c;
    const size_t round = k * ULP_LANES;
    if (!simd_cursor_begin(&c, t, cs, br, n, k))
        return 0;
    __m256i x[AVX2_MAX_GROUPS], low = _mm256_set1_epi32(-1);
#pragma GCC unroll 4
    for (unsigned g = 0; g < 2 * k; g++)
        x[g] = _mm256_loadu_si256((const __m256i *)(cs->s[g / 2].x + 8 * (g % 2)));
    avx2_round pending = avx2_round_slots(&c, x, &low, ref, k, bytes, man, exp);
    size_t i = round; /* the next round's first element */
    for (; simd_cursor_round_fits(&c, i, n, k); i += round) {
        avx2_round next = avx2_round_slots(&c, x, &low, ref + i * bytes, k, bytes, man, exp);
#pragma GCC unroll 2
        for (unsigned g = 0; g < 2 * k; g += 2) {
            size_t at = (i - round + 8 * g) * bytes;
            avx2_sixteen_elements(&c, pending.slot[g], pending.slot[g + 1], ref + at, dst + at,
                                  bytes);
        }
        pending = next;
    }
    uint32_t slots[8 * AVX2_MAX_GROUPS], lows[8];
    for (unsigned g = 0; g < 2 * k; g++) {
        _mm256_storeu_si256((__m256i *)(cs->s[g / 2].x + 8 * (g % 2)), x[g]);
        _mm256_storeu_si256((__m256i *)(slots + 8 * g), pending.slot[g]);
    }
    _mm256_storeu_si256((__m256i *)lows, low);
    simd_cursor_end(&c, slots, lows, 8, i - round, cs, br, ref, dst, min_slot, k, bytes);
    return i;
}

/* The loop for the formats it handles (BF16, F16, F32) and chunks of 1
 * or ULP_STREAMS streams. */
TF_AVX2_FUNCTION size_t avx2_rounds(unsigned dtype, const avx2_tables *t, chunk_streams *cs,
                                    bit_reader *br, const uint8_t *ref, uint8_t *dst, size_t n,
                                    uint32_t *min_slot)
{
    return cs->k == 1 ? SIMD_ROUNDS_OF(avx2_rounds_sized, dtype, 1)
                      : SIMD_ROUNDS_OF(avx2_rounds_sized, dtype, ULP_STREAMS);
}

#define ULP_AVX512_TARGET "avx2,popcnt,avx512f,avx512vl,avx512bw,avx512dq,avx512vbmi"
#define ULP_AVX512_INLINE static inline __attribute__((always_inline, target(ULP_AVX512_TARGET)))
#define ULP_AVX512_FUNCTION __attribute__((target(ULP_AVX512_TARGET))) static

/* ---- AVX-512 decoding ----
 * The AVX2 loop's rounds with each stream's sixteen lanes in one 512-bit
 * vector: a gather, a multiply and a renormalization per stream instead
 * of two of each (on an AMD Zen 5, which runs 512-bit operations at full
 * width, BF16 decoding 1.15 to 1.35x as fast as on 256-bit halves, a
 * loaded VM). The renormalization compares into a mask and expands the
 * words into the lanes it selects, in lane order, where AVX2 needs the
 * mask in a general register, a table lookup and a permutation. The
 * raw bits are taken for all sixteen lanes at once, from one window:
 * for F32 that is about a third of the operations of the AVX2 halves,
 * whose 64-bit windows were most of the loop's work (F32 decoding
 * 1.3-1.5x as fast, a Zen 5 VM). */

/* The residuals of sixteen elements with slots `slot`: each one's lead
 * bits above its n_raw raw bits, the low n_raw bits of `bits` (whose
 * higher bits may be anything). */
ULP_AVX512_INLINE __m512i avx512_residuals_of(__m512i slot, __m512i n_raw, __m512i bits)
{
    __m512i keep = _mm512_sub_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), n_raw),
                                    _mm512_set1_epi32(1));
    __m512i lead = _mm512_sllv_epi32(_mm512_and_si512(slot, _mm512_set1_epi32(7)), n_raw);
    return _mm512_ternarylogic_epi32(lead, bits, keep, 0xf8); /* lead | (bits & keep) */
}

/* The raw bits of sixteen elements of a 16-bit format, and their
 * residuals. At most
 * 13 raw bits per lane after a bit offset below 8: all lie in the 32
 * bytes from *base, and every lane's start fits a byte. The starts are
 * prefix sums of the bit counts as bytes, which one multiply per eight
 * lanes gives (each byte of x * 0x0101010101010101 sums the bytes of x
 * up to it); each lane then picks its 4 bytes with a byte permutation. */
ULP_AVX512_INLINE __m512i avx512_residuals16(__m512i slot, const uint8_t **base, unsigned *bit)
{
    __m512i n_raw = _mm512_and_si512(_mm512_srli_epi32(slot, 3), _mm512_set1_epi32(63));
    __m128i counts = _mm512_cvtepi32_epi8(n_raw);
    __m128i ends = _mm_mullo_epi64(counts, _mm_set1_epi64x(0x0101010101010101));
    const __m128i low_total = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 7, 7, 7, 7, 7, 7, 7, 7);
    ends = _mm_add_epi8(ends, _mm_shuffle_epi8(ends, low_total)); /* lanes 8-15 after 0-7 */
    /* the bit offset joins after the total is taken: the offset's chain
     * from one call to the next stays in general registers */
    unsigned total = (unsigned)_mm_extract_epi8(ends, 15) + *bit;
    ends = _mm_add_epi8(ends, _mm_set1_epi8((char)*bit));
    __m512i start = _mm512_cvtepu8_epi32(_mm_sub_epi8(ends, counts));
    __m512i window = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)*base));
    *base += total >> 3;
    *bit = total & 7;
    /* lane l picks bytes (start_l >> 3) + 0, 1, 2, 3 */
    const __m512i first = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
    __m512i byte = _mm512_shuffle_epi8(_mm512_srli_epi32(start, 3), first);
    __m512i pick = _mm512_add_epi8(byte, _mm512_set1_epi32(0x03020100));
    __m512i bits = _mm512_srlv_epi32(_mm512_permutexvar_epi8(pick, window),
                                     _mm512_and_si512(start, _mm512_set1_epi32(7)));
    return avx512_residuals_of(slot, n_raw, bits);
}

/* avx2_unresidual16 with three-input logic: 9 operations instead of 12
 * in the second stage, whose operations, more than its latencies, bound
 * the loop's speed. */
ULP_AVX512_INLINE __m256i avx512_unresidual16(__m256i z, __m256i r)
{
    const __m256i top = avx2_set16(0x8000);
    __m256i d = _mm256_xor_si256(_mm256_srli_epi16(z, 1),
                                 _mm256_srai_epi16(_mm256_slli_epi16(z, 15), 15));
    /* 0x1e: a ^ (b | c), 0x4b: a ^ (~b | c) */
    __m256i r_key = _mm256_ternarylogic_epi32(r, _mm256_srai_epi16(r, 15), top, 0x1e);
    __m256i k = _mm256_add_epi16(r_key, d);
    return _mm256_ternarylogic_epi32(k, _mm256_srai_epi16(k, 15), top, 0x4b);
}

/* The round's rows of a stream's sixteen reference elements at ref. */
ULP_AVX512_INLINE __m512i avx512_rows(const avx2_tables *t, const uint8_t *ref, unsigned bytes,
                                      unsigned man, unsigned exp)
{
    __m512i r = bytes == 2 ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)ref))
                           : _mm512_loadu_si512((const void *)ref);
    __m512i ctx = _mm512_and_si512(_mm512_srli_epi32(r, man),
                                   _mm512_set1_epi32((int)((1u << exp) - 1)));
    return _mm512_min_epu32(_mm512_sub_epi32(ctx, _mm512_set1_epi32((int)t->span.lo)),
                            _mm512_set1_epi32((int)t->span.n));
}

/* slot_get_fast for the sixteen lanes x of a stream, in rows `row`:
 * returns their slots. */
ULP_AVX512_INLINE __m512i avx512_rans_step(__m512i *x, __m512i row, const uint32_t *slots,
                                           const uint8_t **words)
{
    /* row << ULP_PREC | (x & mask): 0xf8 is a | (b & c) */
    __m512i index = _mm512_ternarylogic_epi32(_mm512_slli_epi32(row, ULP_PREC), *x,
                                              _mm512_set1_epi32((1 << ULP_PREC) - 1), 0xf8);
    __m512i slot = _mm512_i32gather_epi32(index, (const void *)slots, 4);
    __m512i freq = _mm512_srli_epi32(slot, 20);
    __m512i bias = _mm512_and_si512(_mm512_srli_epi32(slot, 9), _mm512_set1_epi32(0x7ff));
    __m512i next =
        _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(*x, ULP_PREC)), bias);
    __mmask16 need = _mm512_cmplt_epu32_mask(next, _mm512_set1_epi32(TF_RANS_L));
    __m512i word = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)*words));
    *words += 2 * (unsigned)_mm_popcnt_u32(need);
    *x = _mm512_mask_or_epi32(next, need, _mm512_slli_epi32(next, 16),
                              _mm512_maskz_expand_epi32(need, word));
    return slot;
}

typedef struct {
    __m512i slot[ULP_STREAMS];
} avx512_round;

/* The first stage of the round of elements at ref. */
ULP_AVX512_INLINE avx512_round avx512_round_slots(simd_cursor *c, __m512i *x, __m512i *low,
                                                  const uint8_t *ref, unsigned k, unsigned bytes,
                                                  unsigned man, unsigned exp)
{
    avx512_round round;
#pragma GCC unroll 4
    for (unsigned j = 0; j < k; j++) {
        __m512i row = avx512_rows(c->t, ref + j * ULP_LANES * bytes, bytes, man, exp);
        round.slot[j] = avx512_rans_step(&x[j], row, c->t->slots, &c->words[j]);
        *low = _mm512_min_epu32(*low, round.slot[j]);
    }
    return round;
}

/* Eight F32 lanes' raw bits, in 64-bit lanes: each lane's 8 bytes of
 * window from its start's byte (a lane's bits may span 5), shifted down
 * by the start's bit offset. start: the lanes' first raw bits, relative
 * to the window. */
ULP_AVX512_INLINE __m512i avx512_raw_bits8(__m512i window, __m256i start)
{
    __m512i at = _mm512_cvtepu32_epi64(start);
    const __m512i first = _mm512_set_epi64(0x0808080808080808, 0, 0x0808080808080808, 0,
                                           0x0808080808080808, 0, 0x0808080808080808, 0);
    __m512i byte = _mm512_shuffle_epi8(_mm512_srli_epi64(at, 3), first);
    __m512i pick = _mm512_add_epi8(byte, _mm512_set1_epi64(0x0706050403020100));
    return _mm512_srlv_epi64(_mm512_permutexvar_epi8(pick, window),
                             _mm512_and_si512(at, _mm512_set1_epi64(7)));
}

/* The raw bits of sixteen F32 elements, and their residuals. At most 29
 * raw bits per lane after a bit offset below 8: the last lane's start
 * lies within byte (7 + 15 * 29) / 8 = 55, so all lie in the 64 bytes
 * from *base. The starts are prefix sums of the bit counts across the
 * vector, by lanes shifted up 1, 2, 4 and 8. */
ULP_AVX512_INLINE __m512i avx512_residuals32(__m512i slot, const uint8_t **base, unsigned *bit)
{
    __m512i n_raw = _mm512_and_si512(_mm512_srli_epi32(slot, 3), _mm512_set1_epi32(63));
    const __m512i zero = _mm512_setzero_si512();
    __m512i end = _mm512_add_epi32(n_raw, _mm512_alignr_epi32(n_raw, zero, 15));
    end = _mm512_add_epi32(end, _mm512_alignr_epi32(end, zero, 14));
    end = _mm512_add_epi32(end, _mm512_alignr_epi32(end, zero, 12));
    end = _mm512_add_epi32(end, _mm512_alignr_epi32(end, zero, 8));
    /* as in avx512_residuals16, the offset joins after the total */
    unsigned total = (unsigned)_mm_extract_epi32(_mm512_extracti32x4_epi32(end, 3), 3) + *bit;
    __m512i start = _mm512_add_epi32(_mm512_sub_epi32(end, n_raw), _mm512_set1_epi32((int)*bit));
    __m512i window = _mm512_loadu_si512((const void *)*base);
    *base += total >> 3;
    *bit = total & 7;
    __m256i low = _mm512_cvtepi64_epi32(avx512_raw_bits8(window, _mm512_castsi512_si256(start)));
    __m256i high =
        _mm512_cvtepi64_epi32(avx512_raw_bits8(window, _mm512_extracti64x4_epi64(start, 1)));
    __m512i bits = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
    return avx512_residuals_of(slot, n_raw, bits);
}

/* avx2_unresidual32 with three-input logic, sixteen lanes. */
ULP_AVX512_INLINE __m512i avx512_unresidual32(__m512i z, __m512i r)
{
    const __m512i top = _mm512_set1_epi32((int)0x80000000u);
    __m512i d = _mm512_xor_si512(_mm512_srli_epi32(z, 1),
                                 _mm512_srai_epi32(_mm512_slli_epi32(z, 31), 31));
    /* 0x1e: a ^ (b | c), 0x4b: a ^ (~b | c) */
    __m512i r_key = _mm512_ternarylogic_epi32(r, _mm512_srai_epi32(r, 31), top, 0x1e);
    __m512i k = _mm512_add_epi32(r_key, d);
    return _mm512_ternarylogic_epi32(k, _mm512_srai_epi32(k, 31), top, 0x4b);
}

/* The second stage for a stream's sixteen elements. */
ULP_AVX512_INLINE void avx512_sixteen_elements(simd_cursor *c, __m512i slot, const uint8_t *ref,
                                               uint8_t *dst, unsigned bytes)
{
    if (bytes == 4) {
        __m512i z = avx512_residuals32(slot, &c->base, &c->bit);
        __m512i r = _mm512_loadu_si512((const void *)ref);
        _mm512_storeu_si512((void *)dst, avx512_unresidual32(z, r));
        return;
    }
    __m256i z = _mm512_cvtepi32_epi16(avx512_residuals16(slot, &c->base, &c->bit));
    __m256i r = _mm256_loadu_si256((const __m256i *)ref);
    _mm256_storeu_si256((__m256i *)dst, avx512_unresidual16(z, r));
}

/* avx2_rounds_sized with 512-bit vectors: the same output. */
ULP_AVX512_INLINE size_t avx512_rounds_sized(const avx2_tables *t, chunk_streams *cs,
                                             bit_reader *br, const uint8_t *ref, uint8_t *dst,
                                             size_t n, uint32_t *min_slot, unsigned k,
                                             unsigned bytes, unsigned man, unsigned exp)
{
    __m512i x[ULP_STREAMS], low = _mm512_set1_epi32(-1);
#pragma GCC unroll 4
    for (unsigned j = 0; j < k; j++)
        x[j] = _mm512_loadu_si512((const void *)cs->s[j].x);
    simd_cursor c;
    const size_t round = k * ULP_LANES;
    if (!simd_cursor_begin(&c, t, cs, br, n, k))
        return 0;
    avx512_round pending = avx512_round_slots(&c, x, &low, ref, k, bytes, man, exp);
    size_t i = round; /* the next round's first element */
    for (; simd_cursor_round_fits(&c, i, n, k); i += round) {
        avx512_round next = avx512_round_slots(&c, x, &low, ref + i * bytes, k, bytes, man, exp);
#pragma GCC unroll 4
        for (unsigned j = 0; j < k; j++) {
            size_t at = (i - round + j * ULP_LANES) * bytes;
            avx512_sixteen_elements(&c, pending.slot[j], ref + at, dst + at, bytes);
        }
        pending = next;
    }
    uint32_t slots[ULP_LANES * ULP_STREAMS], lows[ULP_LANES];
    for (unsigned j = 0; j < k; j++) {
        _mm512_storeu_si512((void *)cs->s[j].x, x[j]);
        _mm512_storeu_si512((void *)(slots + ULP_LANES * j), pending.slot[j]);
    }
    _mm512_storeu_si512((void *)lows, low);
    simd_cursor_end(&c, slots, lows, ULP_LANES, i - round, cs, br, ref, dst, min_slot, k, bytes);
    return i;
}

ULP_AVX512_FUNCTION size_t avx512_rounds(unsigned dtype, const avx2_tables *t,
                                         chunk_streams *cs, bit_reader *br, const uint8_t *ref,
                                         uint8_t *dst, size_t n, uint32_t *min_slot)
{
    return cs->k == 1 ? SIMD_ROUNDS_OF(avx512_rounds_sized, dtype, 1)
                      : SIMD_ROUNDS_OF(avx512_rounds_sized, dtype, ULP_STREAMS);
}

/* fill_row's runs, eight slots per store. */
TF_AVX2_FUNCTION void fill_row_avx2(uint32_t *row, const uint16_t *freq, unsigned n_sym)
{
    const __m256i bias =
        _mm256_setr_epi32(0, 1 << 9, 2 << 9, 3 << 9, 4 << 9, 5 << 9, 6 << 9, 7 << 9);
    unsigned cum = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        if (!freq[s])
            continue;
        unsigned n_raw;
        uint32_t lead = (uint32_t)tf_ulp_symbol_lead(s, &n_raw);
        __m256i v = _mm256_add_epi32(avx2_set((uint32_t)freq[s] << 20 | n_raw << 3 | lead), bias);
        for (unsigned k = 0; k < freq[s]; k += 8) {
            _mm256_storeu_si256((__m256i *)(row + cum + k), v);
            v = _mm256_add_epi32(v, avx2_set(8 << 9));
        }
        cum += freq[s];
    }
}
#endif

static void fill_row(uint32_t *row, const uint16_t *freq, unsigned n_sym, bool avx2)
{
#ifdef TF_X86_SIMD
    if (avx2) {
        fill_row_avx2(row, freq, n_sym);
        return;
    }
#else
    (void)avx2;
#endif
    unsigned cum = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        unsigned n_raw;
        uint32_t lead = (uint32_t)tf_ulp_symbol_lead(s, &n_raw);
        uint32_t slot = (uint32_t)freq[s] << 20 | n_raw << 3 | lead;
        for (unsigned k = 0; k < freq[s]; k++)
            row[cum + k] = slot + (k << 9);
        cum += freq[s];
    }
}

/* Decodes every element; returns the lowest slot met. */
static uint32_t decode_elems(unsigned dtype, const slot_table *st, bool avx2, chunk_streams *s,
                             bit_reader *br, const uint8_t *ref, uint8_t *dst, size_t n)
{
    size_t done = 0;
    uint32_t low = ~0u;
#ifdef TF_X86_SIMD
    if (avx2 && s->s[0].lanes == ULP_LANES) {
        const avx2_tables t = { st->slots, st->span };
        done = tf_simd_level_get() >= TF_SIMD_AVX512
                   ? avx512_rounds(dtype, &t, s, br, ref, dst, n, &low)
                   : avx2_rounds(dtype, &t, s, br, ref, dst, n, &low);
    }
#else
    (void)avx2;
#endif
    const size_t skip = done * tf_dtype_get(dtype)->size;
    const uint32_t *const *row_of = st->row_of;
    switch (dtype) {
#define X(dt, bytes, man, exp, sb)                                                      \
    case dt:                                                                            \
        low = min_u32(low, decode_sized(row_of, s, br, ref + skip, dst + skip, n - done, \
                                        bytes, man, exp));                              \
        break;
        ULP_FORMATS(X)
#undef X
    }
    return low;
}

/* A chunk is its rANS streams, then its raw bits up to the end; the
 * vector loops may load from it up to readable bytes from enc. */
static int open_chunk(const uint8_t *enc, size_t enc_len, size_t readable, chunk_streams *cs,
                      bit_reader *br, tf_error *e)
{
    tf_cursor r = tf_cursor_make(enc, enc_len);
    for (unsigned t = 0; t < cs->k; t++) {
        if (tf_rans_stream_open(&cs->s[t], &r, e) < 0)
            return -1;
        if (cs->s[t].lanes != cs->s[0].lanes)
            return tf_fail(e, EIO, "ulp: the streams of a chunk have different lane counts");
    }
    *br = (bit_reader){ .p = enc + r.pos, .end = enc + enc_len };
    cs->readable_end = enc + readable;
    return 0;
}

static int close_chunk(const chunk_streams *cs, const bit_reader *br, tf_error *e)
{
    for (unsigned t = 0; t < cs->k; t++)
        if (tf_rans_stream_close(&cs->s[t], e) < 0)
            return -1;
    return bits_finish(br, e);
}

static int decode_chunk(const ulp_format *f, const tf_rans_table *t, const uint8_t *enc,
                        size_t enc_len, const uint8_t *ref, uint8_t *dst, size_t n,
                        tf_error *e)
{
    const bool avx2 = use_avx2(f->bytes);
    /* The vector loops stop where their loads would pass the chunk's end.
     * A chunk that codes many elements in few bytes (on real data, a
     * tensor that did not change codes to a few dozen) would go to
     * scalar code almost whole: it is decoded from a copy with room after
     * it. (6 such tensors of 16384 BF16 elements took 8% of a checkpoint's
     * decoding time.) */
    uint8_t copy[COPY_CHUNKS_BELOW + SIMD_READ_PAST];
    size_t readable = enc_len;
    if (avx2 && enc_len && enc_len < COPY_CHUNKS_BELOW) {
        memcpy(copy, enc, enc_len);
        memset(copy + enc_len, 0, SIMD_READ_PAST);
        enc = copy;
        readable = enc_len + SIMD_READ_PAST;
    }
    chunk_streams cs = { .k = streams_of_chunk(f, n) };
    bit_reader br;
    if (open_chunk(enc, enc_len, readable, &cs, &br, e) < 0)
        return -1;
    slot_table st;
    if (slot_table_build(&st, f, t, ref, n, avx2, e) < 0)
        return -1;
    uint32_t low = decode_elems(f->dtype, &st, avx2, &cs, &br, ref, dst, n);
    slot_table_free(&st);
    if (n && low < SLOT_MIN)
        return tf_fail(e, EIO, "ulp: the reference has exponents the model has no row for");
    return close_chunk(&cs, &br, e);
}

int tf_ulp_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx, uint8_t *dst,
                  size_t len, tf_error *e)
{
    ulp_format f;
    tf_rans_table t;
    if (tf_ulp_format_and_model(ctx, len, &f, &t, e) < 0) {
        if (e && e->errnum != ENOMEM)
            e->errnum = EIO; /* the archive says ulp where ulp cannot be */
        return -1;
    }
    int rc = decode_chunk(&f, &t, enc, enc_len, ctx->ref, dst, len / f.bytes, e);
    tf_rans_table_free(&t);
    return rc;
}
