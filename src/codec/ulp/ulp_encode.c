#include "codec/ulp/ulp_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/sample.h"
#include "codec/ulp/ulp.h"
#include "common/buf.h"
#include "common/dtype.h"

/* ---- symbols ----
 * The coding index of an element (rans.h): its row (ctx_span) above its
 * symbol, sym_bits wide. Fitting counts indexes; encoding codes them. */

/* Element i's index; its raw bits go to *raw, *n_raw of them. */
ULP_ALWAYS_INLINE unsigned index_one(const uint8_t *src, const uint8_t *ref, size_t i,
                                     ctx_span span, unsigned *n_raw, uint64_t *raw,
                                     unsigned bytes, unsigned man, unsigned exp, unsigned sb)
{
    uint64_t r = tf_le_get(ref + i * bytes, bytes);
    uint64_t z = tf_ulp_residual(tf_le_get(src + i * bytes, bytes), r, 8 * bytes);
    unsigned sym = tf_ulp_symbol(z, n_raw);
    *raw = z & (((uint64_t)1 << *n_raw) - 1); /* n_raw <= 61 */
    return row_of_context(context_of(r, man, exp), span) << sb | sym;
}

#ifdef TF_X86_SIMD
/* The symbols of eight residuals z (32-bit lanes), without a bit length
 * instruction: converted to float, z < 2^24 is exact, its exponent is
 * b - 1 and the two mantissa bits below the implicit one are q1 and q2, so
 * the float's bits shifted down by 21 are 4 (b + 126) + 2 q1 + q2, which
 * is the symbol 4 (b - 2) + 2 q1 + q2 plus 512. z >= 2^10 (F32 only) is
 * converted shifted down by 8 (b - 8 >= 3 bits keep q1 and q2), and
 * 4 x 8 added back. Below 8 the symbol is z. */
TF_AVX2_INLINE __m256i avx2_symbols(__m256i z, unsigned bytes)
{
    __m256i t = z, add = avx2_set((uint32_t)-512), small = _mm256_cmpgt_epi32(avx2_set(8), z);
    if (bytes == 4) { /* z up to 2^32 - 1: compare unsigned */
        __m256i high = _mm256_srli_epi32(z, 8);
        __m256i big = _mm256_cmpgt_epi32(high, avx2_set(3));
        t = _mm256_blendv_epi8(z, high, big);
        add = _mm256_add_epi32(add, _mm256_and_si256(big, avx2_set(32)));
        small = _mm256_cmpeq_epi32(_mm256_min_epu32(z, avx2_set(7)), z);
    }
    __m256i bits = _mm256_castps_si256(_mm256_cvtepi32_ps(t));
    __m256i sym = _mm256_add_epi32(_mm256_srli_epi32(bits, 21), add);
    return _mm256_blendv_epi8(sym, z, small);
}

/* The raw bit counts of eight symbols: b - 3 = (sym >> 2) - 1, at least 0. */
TF_AVX2_INLINE __m256i avx2_raw_counts(__m256i sym)
{
    return _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(sym, 2), avx2_set(1)),
                            _mm256_setzero_si256());
}

/* tf_ulp_residual of sixteen 16-bit elements in 16-bit lanes. */
TF_AVX2_INLINE __m256i avx2_residuals16(__m256i x, __m256i r)
{
    const __m256i top = avx2_set16(0x8000);
    __m256i kx = _mm256_xor_si256(x, _mm256_or_si256(_mm256_srai_epi16(x, 15), top));
    __m256i kr = _mm256_xor_si256(r, _mm256_or_si256(_mm256_srai_epi16(r, 15), top));
    __m256i d = _mm256_sub_epi16(kx, kr);
    return _mm256_xor_si256(_mm256_slli_epi16(d, 1), _mm256_srai_epi16(d, 15));
}

/* ... of eight 32-bit elements. */
TF_AVX2_INLINE __m256i avx2_residuals32(__m256i x, __m256i r)
{
    const __m256i top = avx2_set(0x80000000u);
    __m256i kx = _mm256_xor_si256(x, _mm256_or_si256(_mm256_srai_epi32(x, 31), top));
    __m256i kr = _mm256_xor_si256(r, _mm256_or_si256(_mm256_srai_epi32(r, 31), top));
    __m256i d = _mm256_sub_epi32(kx, kr);
    return _mm256_xor_si256(_mm256_slli_epi32(d, 1), _mm256_srai_epi32(d, 31));
}

/* The indexes of sixteen 16-bit elements (16-bit lanes), and their
 * residuals widened to two vectors of eight 32-bit lanes. */
TF_AVX2_INLINE __m256i avx2_indexes16(const uint8_t *src, const uint8_t *ref, ctx_span span,
                                      __m256i *z0, __m256i *z1, __m256i *s0, __m256i *s1,
                                      unsigned man, unsigned exp, unsigned sb)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)src);
    __m256i r = _mm256_loadu_si256((const __m256i *)ref);
    __m256i z = avx2_residuals16(x, r);
    __m256i ctx = _mm256_and_si256(_mm256_srli_epi16(r, (int)man),
                                   avx2_set16((uint16_t)((1u << exp) - 1)));
    __m256i row = _mm256_min_epu16(_mm256_sub_epi16(ctx, avx2_set16((uint16_t)span.lo)),
                                   avx2_set16((uint16_t)span.n));
    *z0 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(z));
    *z1 = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(z, 1));
    *s0 = avx2_symbols(*z0, 2);
    *s1 = avx2_symbols(*z1, 2);
    /* packus works within 128-bit halves: the qword shuffle restores order */
    __m256i sym = _mm256_permute4x64_epi64(_mm256_packus_epi32(*s0, *s1), 0xd8);
    return _mm256_or_si256(_mm256_slli_epi16(row, (int)sb), sym);
}

/* ... of eight 32-bit elements (32-bit lanes) and their residuals. */
TF_AVX2_INLINE __m256i avx2_indexes32(const uint8_t *src, const uint8_t *ref, ctx_span span,
                                      __m256i *z, __m256i *s, unsigned man, unsigned exp,
                                      unsigned sb)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)src);
    __m256i r = _mm256_loadu_si256((const __m256i *)ref);
    *z = avx2_residuals32(x, r);
    *s = avx2_symbols(*z, 4);
    __m256i ctx = _mm256_and_si256(_mm256_srli_epi32(r, (int)man), avx2_set((1u << exp) - 1));
    __m256i row = _mm256_min_epu32(_mm256_sub_epi32(ctx, avx2_set(span.lo)), avx2_set(span.n));
    return _mm256_or_si256(_mm256_slli_epi32(row, (int)sb), *s);
}
#endif

/* ---- fitting ---- */

/* Fitting counts coding indexes in a table of rows of 1 << sym_bits
 * cells, one row per exponent of a span that covers the reference's: all
 * exponents for a large tensor, for which clearing a table of them all
 * costs little; the reference's own range for a small one (FIT_SMALL
 * elements or fewer), which a pass over the reference finds first. (A
 * table per element of four in turn, against increments of one counter
 * waiting for each other, measured no faster on a Zen 4.) */
#define FIT_BLOCK 4096 /* indexes computed ahead of counting (AVX2) */
#define FIT_SMALL ((size_t)1 << 16)

/* Counts the indexes of n elements straight from registers. */
ULP_ALWAYS_INLINE void count_scalar(uint64_t *cells, ctx_span span, const uint8_t *src,
                                    const uint8_t *ref, size_t n, unsigned bytes, unsigned man,
                                    unsigned exp, unsigned sb)
{
    for (size_t i = 0; i < n; i++) {
        unsigned n_raw;
        uint64_t raw;
        cells[index_one(src, ref, i, span, &n_raw, &raw, bytes, man, exp, sb)]++;
    }
}

static void count_indexes(uint64_t *cells, const uint16_t *idx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cells[idx[i]]++;
}

/* count_indexes of many indexes below `cells` (a count each): four
 * tables of 32-bit counts in turn, so that a run of one index does not
 * wait on its own increments. Fewer indexes than the tables' cells (a
 * small chunk) are counted directly: clearing and adding up the tables
 * would cost more. */
static int count_many_indexes(uint64_t *counts, size_t cells, const uint16_t *idx, size_t n,
                              tf_error *e)
{
    if (n < 4 * cells) {
        count_indexes(counts, idx, n);
        return 0;
    }
    uint32_t *t = calloc(4 * cells, sizeof *t);
    if (!t)
        return tf_fail(e, ENOMEM, "ulp: out of memory for counts");
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        t[idx[i]]++;
        t[cells + idx[i + 1]]++;
        t[2 * cells + idx[i + 2]]++;
        t[3 * cells + idx[i + 3]]++;
    }
    for (; i < n; i++)
        t[idx[i]]++;
    for (size_t c = 0; c < cells; c++)
        counts[c] += (uint64_t)t[c] + t[cells + c] + t[2 * cells + c] + t[3 * cells + c];
    free(t);
    return 0;
}

#ifdef TF_X86_SIMD
/* The indexes of n elements, whole vectors of them, into idx; returns
 * how many. */
TF_AVX2_INLINE size_t index_vectors(ctx_span span, const uint8_t *src, const uint8_t *ref,
                                    size_t n, uint16_t *idx, unsigned bytes, unsigned man,
                                    unsigned exp, unsigned sb)
{
    size_t i = 0;
    if (bytes == 2) {
        for (; i + 16 <= n; i += 16) {
            __m256i z0, z1, s0, s1;
            _mm256_storeu_si256((__m256i *)(idx + i),
                                avx2_indexes16(src + 2 * i, ref + 2 * i, span, &z0, &z1, &s0,
                                               &s1, man, exp, sb));
        }
        return i;
    }
    for (; i + 8 <= n; i += 8) {
        __m256i z, s;
        __m256i v = avx2_indexes32(src + 4 * i, ref + 4 * i, span, &z, &s, man, exp, sb);
        v = _mm256_packus_epi32(v, v); /* indexes < 2^15 */
        _mm_storeu_si128((__m128i *)(idx + i),
                         _mm256_castsi256_si128(_mm256_permute4x64_epi64(v, 0x08)));
    }
    return i;
}

TF_AVX2_INLINE void count_avx2_sized(uint64_t *cells, ctx_span span, const uint8_t *src,
                                     const uint8_t *ref, size_t n, unsigned bytes, unsigned man,
                                     unsigned exp, unsigned sb)
{
    uint16_t idx[FIT_BLOCK];
    size_t i = 0;
    while (n - i >= FIT_BLOCK) {
        count_indexes(cells, idx, index_vectors(span, src + i * bytes, ref + i * bytes,
                                                FIT_BLOCK, idx, bytes, man, exp, sb));
        i += FIT_BLOCK;
    }
    size_t done = index_vectors(span, src + i * bytes, ref + i * bytes, n - i, idx, bytes, man,
                                exp, sb);
    count_indexes(cells, idx, done);
    i += done;
    count_scalar(cells, span, src + i * bytes, ref + i * bytes, n - i, bytes, man, exp, sb);
}

TF_AVX2_FUNCTION void count_avx2(uint64_t *cells, ctx_span span, unsigned dtype,
                                 const uint8_t *src, const uint8_t *ref, size_t n)
{
    switch (dtype) {
    case TF_DT_BF16: count_avx2_sized(cells, span, src, ref, n, 2, 7, 8, 6); break;
    case TF_DT_F16: count_avx2_sized(cells, span, src, ref, n, 2, 10, 5, 6); break;
    default: count_avx2_sized(cells, span, src, ref, n, 4, 23, 8, 7); break;
    }
}
#endif

/* Counts n elements whose exponents all lie in span (F64's indexes, 19
 * bits, do not fit 16, but count the same way). */
static void count_cells(uint64_t *cells, ctx_span span, const ulp_format *f, const uint8_t *src,
                        const uint8_t *ref, size_t n)
{
#ifdef TF_X86_SIMD
    if (use_avx2(f->bytes)) {
        count_avx2(cells, span, f->dtype, src, ref, n);
        return;
    }
#endif
    switch (f->dtype) {
#define X(dt, bytes, man, exp, sb) \
    case dt: count_scalar(cells, span, src, ref, n, bytes, man, exp, sb); break;
        ULP_FORMATS(X)
#undef X
    }
}

/* The least and greatest exponent (context) of n elements, into *lo and
 * *hi, which hold those of elements before them. */
ULP_ALWAYS_INLINE void span_sized(const uint8_t *ref, size_t n, unsigned bytes, unsigned man,
                                  unsigned exp, unsigned *lo, unsigned *hi)
{
    for (size_t i = 0; i < n; i++) {
        unsigned c = context_of(tf_le_get(ref + i * bytes, bytes), man, exp);
        *lo = c < *lo ? c : *lo;
        *hi = c > *hi ? c : *hi;
    }
}

#ifdef TF_X86_SIMD
/* span_sized of 2- and 4-byte elements, whole vectors of them by min and
 * max, the rest one by one. */
TF_AVX2_FUNCTION void span_avx2(const uint8_t *ref, size_t n, unsigned bytes, unsigned man,
                                unsigned exp, unsigned *lo, unsigned *hi)
{
    const size_t per = 32 / bytes;
    size_t i = 0;
    if (n >= per) {
        __m256i least = _mm256_set1_epi32(-1), most = _mm256_setzero_si256();
        const __m256i mask = _mm256_set1_epi32((1 << exp) - 1);
        for (; i + per <= n; i += per) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(ref + i * bytes));
            if (bytes == 2) { /* each 16-bit context in the low half of a 32-bit lane */
                __m256i even = _mm256_and_si256(_mm256_srli_epi32(v, man), mask);
                __m256i odd = _mm256_and_si256(_mm256_srli_epi32(v, 16 + man), mask);
                least = _mm256_min_epu32(least, _mm256_min_epu32(even, odd));
                most = _mm256_max_epu32(most, _mm256_max_epu32(even, odd));
            } else {
                __m256i c = _mm256_and_si256(_mm256_srli_epi32(v, man), mask);
                least = _mm256_min_epu32(least, c);
                most = _mm256_max_epu32(most, c);
            }
        }
        uint32_t l[8], h[8];
        _mm256_storeu_si256((__m256i *)l, least);
        _mm256_storeu_si256((__m256i *)h, most);
        for (unsigned k = 0; k < 8; k++) {
            *lo = l[k] < *lo ? l[k] : *lo;
            *hi = h[k] > *hi ? h[k] : *hi;
        }
    }
    span_sized(ref + i * bytes, n - i, bytes, man, exp, lo, hi);
}
#endif

/* The exponents of n reference elements, from the least to the
 * greatest. */
static ctx_span reference_span_exact(const ulp_format *f, const uint8_t *ref, size_t n)
{
    unsigned lo = ~0u, hi = 0;
    switch (f->dtype) {
#ifdef TF_X86_SIMD
#define X(dt, bytes, man, exp, sb)                           \
    case dt:                                                 \
        if (use_avx2(bytes))                                 \
            span_avx2(ref, n, bytes, man, exp, &lo, &hi);    \
        else                                                 \
            span_sized(ref, n, bytes, man, exp, &lo, &hi);   \
        break;
#else
#define X(dt, bytes, man, exp, sb) \
    case dt: span_sized(ref, n, bytes, man, exp, &lo, &hi); break;
#endif
        ULP_FORMATS(X)
#undef X
    default: return (ctx_span){ 0, f->n_ctx };
    }
    return n ? (ctx_span){ lo, hi + 1 - lo } : (ctx_span){ 0, 0 };
}

/* The span counting the indexes of n elements needs. */
static ctx_span reference_span(const ulp_format *f, const uint8_t *ref, size_t n)
{
    return n > FIT_SMALL ? (ctx_span){ 0, f->n_ctx } : reference_span_exact(f, ref, n);
}

/* Counts of the coding indexes of a span's rows: (span.n << sym_bits)
 * cells, one more for the row past it (none counted there). */
static uint64_t *new_counts(const ulp_format *f, ctx_span span, tf_error *e)
{
    uint64_t *counts = calloc(((size_t)span.n << f->sym_bits) + 1, sizeof *counts);
    if (!counts)
        tf_fail(e, ENOMEM, "ulp: out of memory for counts");
    return counts;
}

/* The table of counted indexes (consumed: rows move down in place), and
 * the model that holds it. */
static int fit_counts(const ulp_format *f, ctx_span span, uint64_t *counts, tf_rans_table *t,
                      tf_buf *model, tf_error *e)
{
    /* rows of n_sym counts, as tf_rans_table_fit wants them: each moves
     * down (n_sym <= 1 << sym_bits), so in place, in order */
    for (size_t r = 1; r < span.n; r++)
        memmove(counts + r * f->n_sym, counts + (r << f->sym_bits), f->n_sym * sizeof *counts);
    if (tf_rans_table_fit_span(t, f->n_ctx, f->n_sym, ULP_PREC, counts, span.lo, span.n, e) < 0)
        return -1;
    int rc = 0;
    if (tf_buf_u8(model, ULP_MODEL_VERSION) < 0 || tf_buf_u8(model, (uint8_t)f->dtype) < 0)
        rc = tf_fail(e, ENOMEM, "ulp: out of memory writing the model");
    else
        rc = tf_rans_table_write(t, model, e);
    if (rc < 0)
        tf_rans_table_free(t);
    return rc;
}

int tf_ulp_fit(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
               tf_error *e)
{
    ulp_format f;
    if (tf_ulp_format_of(ctx, len, &f, e) < 0)
        return -1;
    const size_t n = len / f.bytes;
    const ctx_span span = reference_span(&f, ctx->ref, n);
    uint64_t *counts = new_counts(&f, span, e);
    if (!counts)
        return -1;
    count_cells(counts, span, &f, src, ctx->ref, n);
    tf_rans_table t;
    int rc = fit_counts(&f, span, counts, &t, model, e);
    free(counts);
    if (rc == 0)
        tf_rans_table_free(&t);
    return rc;
}

/* ---- encode ---- */

/* LSB-first bit writer. Every put stores 8 bytes (bits_put2 16), so the
 * buffer needs 16 bytes of slack; fewer than 8 bits stay pending between
 * puts. */
typedef struct {
    uint64_t acc;
    unsigned count;
    uint8_t *p;
} bit_writer;

ULP_ALWAYS_INLINE void bits_put(bit_writer *w, uint64_t v, unsigned n) /* n <= 56 */
{
    w->acc |= v << w->count;
    w->count += n;
    tf_le_put(w->p, w->acc, 8);
    unsigned whole = w->count >> 3;
    w->p += whole;
    w->acc >>= 8 * whole;
    w->count &= 7;
}

/* Two puts in one: a (na < 64 bits) then b (nb bits), na + nb <= 120
 * with the pending bits; stores 16 bytes, so the buffer needs 16 bytes
 * of slack. Half the chain of shifts that two puts make. The 128 bits
 * are two words shifted apart, not an __int128: its shifts by a
 * variable count (shld, shrd) were a quarter of a split's time, on the
 * chain from one put to the next. */
ULP_ALWAYS_INLINE void bits_put2(bit_writer *w, uint64_t a, unsigned na, uint64_t b, unsigned nb)
{
    uint64_t lo = a | b << na, hi = b >> 1 >> (63 - na); /* b >> (64 - na), 0 for na 0 */
    unsigned count = w->count;
    hi = hi << count | lo >> 1 >> (63 - count);
    lo = lo << count | w->acc;
    tf_le64_put(w->p, lo);
    tf_le64_put(w->p + 8, hi);
    unsigned total = count + na + nb, whole = total >> 3;
    w->p += whole;
    /* the bits past the whole bytes, all in one word (none above them) */
    w->acc = whole < 8 ? lo >> (8 * whole) : hi >> (8 * whole - 64);
    w->count = total & 7;
}

/* Stores the pending bits; returns the bytes written since `start`. */
ULP_ALWAYS_INLINE size_t bits_flush(bit_writer *w, const uint8_t *start)
{
    if (w->count)
        *w->p = (uint8_t)w->acc;
    return (size_t)(w->p - start) + (w->count > 0);
}

/* Puts element's raw bits: F64's up to 61 in two halves. */
ULP_ALWAYS_INLINE void put_raw_f64(bit_writer *w, uint64_t raw, unsigned n_raw)
{
    unsigned half = n_raw < 32 ? n_raw : 32;
    bits_put(w, raw & 0xffffffffu, half);
    bits_put(w, raw >> 32, n_raw - half);
}

/* Splits each residual into its coding index and raw bits, elements
 * [from, n); the raw bits of a group of elements are gathered in a
 * register first: one put per group keeps the writer's serial dependency
 * chain short. */
ULP_ALWAYS_INLINE void split_scalar(const uint8_t *src, const uint8_t *ref, size_t from,
                                    size_t n, ctx_span span, uint16_t *idx, bit_writer *writer,
                                    unsigned bytes, unsigned man, unsigned exp, unsigned sb)
{
    /* A local copy: stores of bytes through w.p could alias *writer, which
     * would then go back to memory after each one. */
    bit_writer lw = *writer, *w = &lw;
    const unsigned group = elems_per_56_bits(bytes);
    size_t i = from;
    while (i < n) {
        size_t end = n - i < group ? n : i + group;
        uint64_t bits = 0;
        unsigned n_bits = 0;
        for (; i < end; i++) {
            unsigned n_raw;
            uint64_t raw;
            idx[i] = (uint16_t)index_one(src, ref, i, span, &n_raw, &raw, bytes, man, exp, sb);
            bits |= raw << n_bits;
            n_bits += n_raw;
        }
        bits_put(w, bits, n_bits);
    }
    *writer = lw;
}

#ifdef TF_X86_SIMD
/* The raw bits of eight elements (residuals z, symbols sym), packed in
 * lane order in 64-bit lanes: lanes 2j and 2j + 1 into lane j, z_2j
 * below z_2j+1; their bit counts in *len. */
TF_AVX2_INLINE __m256i avx2_raw_pairs(__m256i z, __m256i sym, __m256i *len)
{
    const __m256i low = _mm256_set1_epi64x(0xffffffff);
    __m256i n = avx2_raw_counts(sym);
    __m256i keep = _mm256_sub_epi32(_mm256_sllv_epi32(avx2_set(1), n), avx2_set(1));
    __m256i raw = _mm256_and_si256(z, keep);
    __m256i n_even = _mm256_and_si256(n, low);
    *len = _mm256_add_epi64(n_even, _mm256_srli_epi64(n, 32));
    return _mm256_or_si256(_mm256_and_si256(raw, low),
                           _mm256_sllv_epi64(_mm256_srli_epi64(raw, 32), n_even));
}

/* BF16, F16 (13 raw bits at most): pairs join again into quads within
 * 128-bit halves, at most 52 bits each: one put for eight elements. */
TF_AVX2_INLINE void avx2_put_raw16(bit_writer *w, __m256i z, __m256i sym)
{
    __m256i len, v = avx2_raw_pairs(z, sym, &len);
    v = _mm256_or_si256(v, _mm256_sllv_epi64(_mm256_srli_si256(v, 8), len));
    len = _mm256_add_epi64(len, _mm256_srli_si256(len, 8));
    __m128i v_high = _mm256_extracti128_si256(v, 1), len_high = _mm256_extracti128_si256(len, 1);
    bits_put2(w, (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(v)),
              (unsigned)_mm_cvtsi128_si64(_mm256_castsi256_si128(len)),
              (uint64_t)_mm_cvtsi128_si64(v_high), (unsigned)_mm_cvtsi128_si64(len_high));
}

/* F32 (29 raw bits at most): pairs of up to 58 bits, two of them a put. */
TF_AVX2_INLINE void avx2_put_raw32(bit_writer *w, __m256i z, __m256i sym)
{
    __m256i len, v = avx2_raw_pairs(z, sym, &len);
    uint64_t pv[4], pl[4];
    _mm256_storeu_si256((__m256i *)pv, v);
    _mm256_storeu_si256((__m256i *)pl, len);
    bits_put2(w, pv[0], (unsigned)pl[0], pv[1], (unsigned)pl[1]);
    bits_put2(w, pv[2], (unsigned)pl[2], pv[3], (unsigned)pl[3]);
}

/* split_scalar for whole vectors of elements from 0; returns where the
 * scalar loop takes over. */
TF_AVX2_INLINE size_t split_avx2_sized(const uint8_t *src, const uint8_t *ref, size_t n,
                                       ctx_span span, uint16_t *idx, bit_writer *writer,
                                       unsigned bytes, unsigned man, unsigned exp, unsigned sb)
{
    bit_writer lw = *writer, *w = &lw; /* in registers (split_scalar) */
    size_t i = 0;
    if (bytes == 2) {
        for (; i + 16 <= n; i += 16) {
            __m256i z0, z1, s0, s1;
            __m256i v = avx2_indexes16(src + 2 * i, ref + 2 * i, span, &z0, &z1, &s0, &s1, man,
                                       exp, sb);
            _mm256_storeu_si256((__m256i *)(idx + i), v);
            avx2_put_raw16(w, z0, s0);
            avx2_put_raw16(w, z1, s1);
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256i z, s;
            __m256i v = avx2_indexes32(src + 4 * i, ref + 4 * i, span, &z, &s, man, exp, sb);
            v = _mm256_packus_epi32(v, v); /* indexes < 2^16 */
            _mm_storeu_si128((__m128i *)(idx + i),
                             _mm256_castsi256_si128(_mm256_permute4x64_epi64(v, 0x08)));
            avx2_put_raw32(w, z, s);
        }
    }
    *writer = lw;
    return i;
}

TF_AVX2_FUNCTION size_t split_avx2(unsigned dtype, const uint8_t *src, const uint8_t *ref,
                                   size_t n, ctx_span span, uint16_t *idx, bit_writer *w)
{
    switch (dtype) {
    case TF_DT_BF16: return split_avx2_sized(src, ref, n, span, idx, w, 2, 7, 8, 6);
    case TF_DT_F16: return split_avx2_sized(src, ref, n, span, idx, w, 2, 10, 5, 6);
    default: return split_avx2_sized(src, ref, n, span, idx, w, 4, 23, 8, 7);
    }
}
#endif

/* Coding indexes of n elements into idx, their raw bits into raw;
 * returns the raw section's length in bytes. */
static size_t split_residuals(const ulp_format *f, const uint8_t *src, const uint8_t *ref,
                              size_t n, ctx_span span, uint16_t *idx, uint8_t *raw)
{
    bit_writer w = { .p = raw };
    size_t done = 0;
#ifdef TF_X86_SIMD
    if (use_avx2(f->bytes))
        done = split_avx2(f->dtype, src, ref, n, span, idx, &w);
#endif
    switch (f->dtype) {
#define X(dt, bytes, man, exp, sb) \
    case dt: split_scalar(src, ref, done, n, span, idx, &w, bytes, man, exp, sb); break;
        ULP_FORMATS(X)
#undef X
    }
    return bits_flush(&w, raw);
}

/* F64, whose indexes do not fit 16 bits: contexts and symbols apart,
 * for the generic encoder. */
static size_t split_f64(const uint8_t *src, const uint8_t *ref, size_t n, uint8_t *sym,
                        uint16_t *ctx, uint8_t *raw)
{
    bit_writer w = { .p = raw };
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tf_le_get(ref + 8 * i, 8);
        uint64_t z = tf_ulp_residual(tf_le_get(src + 8 * i, 8), r, 64);
        unsigned n_raw;
        sym[i] = (uint8_t)tf_ulp_symbol(z, &n_raw);
        ctx[i] = (uint16_t)context_of(r, 52, 11);
        put_raw_f64(&w, z & (((uint64_t)1 << n_raw) - 1), n_raw);
    }
    return bits_flush(&w, raw);
}

/* The lanes of each stream of a chunk of n elements. */
static unsigned lanes_of(size_t n)
{
    return n < ULP_ONE_LANE_BELOW ? 1 : ULP_LANES;
}

/* Copies the elements of stream t of k (ulp.h: the streams take turns by
 * rounds of `lanes` elements) from v, n elements of `size` bytes, to
 * mine, in order; returns how many. */
ULP_ALWAYS_INLINE size_t stream_elements(const void *v, size_t n, size_t size, unsigned lanes,
                                         unsigned k, unsigned t, void *mine)
{
    size_t count = 0;
    for (size_t at = (size_t)t * lanes; at < n; at += (size_t)k * lanes) {
        uint8_t *to = (uint8_t *)mine + count * size;
        const uint8_t *from = (const uint8_t *)v + at * size;
        if (n - at >= ULP_LANES && lanes == ULP_LANES) { /* a copy of constant size */
            memcpy(to, from, ULP_LANES * size);
            count += ULP_LANES;
        } else {
            size_t run = n - at < lanes ? n - at : lanes;
            memcpy(to, from, run * size);
            count += run;
        }
    }
    return count;
}

static int encode_f64(const tf_rans_table *t, unsigned k, const uint8_t *src, const uint8_t *ref,
                      size_t n, uint8_t *raw, tf_buf *out, size_t *raw_len, tf_error *e)
{
    uint8_t *sym = malloc(2 * (n + 1));
    uint16_t *ctx = malloc(2 * (n + 1) * sizeof *ctx);
    tf_rans_encoder enc = { 0 };
    int rc = -1;
    if (!sym || !ctx)
        tf_fail(e, ENOMEM, "ulp: out of memory encoding %zu elements", n);
    else if (tf_rans_encoder_init(&enc, t, e) == 0) {
        *raw_len = split_f64(src, ref, n, sym, ctx, raw);
        /* each stream's symbols and contexts, after all of them */
        uint8_t *my_sym = sym + n + 1;
        uint16_t *my_ctx = ctx + n + 1;
        rc = 0;
        for (unsigned j = 0; j < k && rc == 0; j++) {
            size_t m = stream_elements(sym, n, 1, lanes_of(n), k, j, my_sym);
            stream_elements(ctx, n, sizeof *ctx, lanes_of(n), k, j, my_ctx);
            rc = tf_rans_encode(&enc, my_ctx, my_sym, m, lanes_of(n), out, e);
        }
    }
    tf_rans_encoder_free(&enc);
    free(sym);
    free(ctx);
    return rc;
}

/* The k streams of the chunk whose coding indexes are idx[0..n). */
static int encode_streams(const tf_rans_indexed *ix, unsigned k, const uint16_t *idx, size_t n,
                          tf_buf *out, tf_error *e)
{
    for (unsigned j = 0; j < k; j++)
        if (tf_rans_encode_indexed_turn(ix, idx, n, lanes_of(n), k, j, out, e) < 0)
            return -1;
    return 0;
}

/* A model read, and its encoder built: per chunk, or once for the chunks
 * that share the model (tf_ulp_prepare). */
typedef struct {
    ulp_format f;
    tf_rans_table t;
    tf_rans_indexed ix; /* all but F64, whose indexes do not fit 16 bits */
} ulp_prepared;

static void prepared_release(ulp_prepared *p)
{
    tf_rans_indexed_free(&p->ix);
    tf_rans_table_free(&p->t);
}

static int prepare(ulp_prepared *p, const tf_codec_ctx *ctx, tf_error *e)
{
    *p = (ulp_prepared){ 0 };
    if (tf_ulp_model_of(ctx, &p->f, &p->t, e) < 0)
        return -1;
    if (p->f.bytes != 8 && tf_rans_indexed_init(&p->ix, &p->t, p->f.sym_bits, e) < 0) {
        prepared_release(p);
        return -1;
    }
    return 0;
}

void *tf_ulp_prepare(const tf_codec_ctx *ctx)
{
    ulp_prepared *p = malloc(sizeof *p);
    if (p && prepare(p, ctx, NULL) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

void tf_ulp_prepared_free(void *prepared)
{
    if (prepared)
        prepared_release(prepared);
    free(prepared);
}

/* A chunk of n elements split under a prepared model: its coding
 * indexes (all but F64's) and its raw bits. */
typedef struct {
    uint16_t *idx;
    uint8_t *raw;
    size_t n, raw_len;
} split_chunk;

static void split_free(split_chunk *s)
{
    free(s->idx);
    free(s->raw);
}

/* Room for the split (F64: for the raw bits alone), and, but for F64,
 * the split itself. */
static int split_chunk_of(const ulp_prepared *p, const uint8_t *src, const uint8_t *ref, size_t n,
                          split_chunk *s, tf_error *e)
{
    /* At most 8 * bytes - 3 raw bits per element, plus the writer's slack. */
    *s = (split_chunk){ .n = n, .raw = malloc(n * p->f.bytes + 16) };
    if (p->f.bytes != 8)
        s->idx = malloc((n + 1) * sizeof *s->idx);
    if (!s->raw || (p->f.bytes != 8 && !s->idx)) {
        split_free(s);
        return tf_fail(e, ENOMEM, "ulp: out of memory encoding %zu elements", n);
    }
    if (p->f.bytes != 8)
        s->raw_len = split_residuals(&p->f, src, ref, n, (ctx_span){ p->ix.ctx_lo, p->ix.n_rows },
                                     s->idx, s->raw);
    return 0;
}

static int put_raw(const split_chunk *s, tf_buf *out, tf_error *e)
{
    return tf_buf_put(out, s->raw, s->raw_len) < 0
               ? tf_fail(e, ENOMEM, "ulp: out of memory for the raw bits")
               : 0;
}

static int encode_chunk(const ulp_prepared *p, const uint8_t *src, const uint8_t *ref, size_t n,
                        tf_buf *out, tf_error *e)
{
    split_chunk s;
    if (split_chunk_of(p, src, ref, n, &s, e) < 0)
        return -1;
    const unsigned k = streams_of_chunk(&p->f, n);
    int rc = p->f.bytes == 8 ? encode_f64(&p->t, k, src, ref, n, s.raw, out, &s.raw_len, e)
                             : encode_streams(&p->ix, k, s.idx, n, out, e);
    if (rc == 0)
        rc = put_raw(&s, out, e);
    split_free(&s);
    return rc;
}

int tf_ulp_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *out,
                  tf_error *e)
{
    ulp_format f;
    if (tf_ulp_format_of(ctx, len, &f, e) < 0)
        return -1;
    ulp_prepared own;
    const ulp_prepared *p = ctx->prepared;
    if (!p) {
        if (prepare(&own, ctx, e) < 0)
            return -1;
        p = &own;
    }
    size_t before = out->len;
    int rc = encode_chunk(p, src, ctx->ref, len / f.bytes, out, e);
    if (p == &own)
        prepared_release(&own);
    if (rc < 0)
        out->len = before; /* nothing half-written is left behind */
    return rc;
}

/* Two one-lane chunks of a prepared model (not F64): their streams
 * coded side by side, each followed by its raw bits. */
static int encode_pair_of(const ulp_prepared *p, const uint8_t *const src[2],
                          const uint8_t *const ref[2], const size_t n[2], tf_buf *const out[2],
                          tf_error *e)
{
    split_chunk s[2];
    if (split_chunk_of(p, src[0], ref[0], n[0], &s[0], e) < 0)
        return -1;
    if (split_chunk_of(p, src[1], ref[1], n[1], &s[1], e) < 0) {
        split_free(&s[0]);
        return -1;
    }
    const uint16_t *const idx[2] = { s[0].idx, s[1].idx };
    int rc = tf_rans_encode_indexed_pair(&p->ix, idx, n, out, e);
    for (unsigned j = 0; j < 2 && rc == 0; j++)
        rc = put_raw(&s[j], out[j], e);
    split_free(&s[0]);
    split_free(&s[1]);
    return rc;
}

int tf_ulp_encode_pair(const uint8_t *const src[2], const size_t len[2],
                       const tf_codec_ctx *const ctx[2], tf_buf *const out[2], tf_error *e)
{
    ulp_format f[2];
    size_t n[2], before[2] = { out[0]->len, out[1]->len };
    for (unsigned j = 0; j < 2; j++) {
        if (tf_ulp_format_of(ctx[j], len[j], &f[j], e) < 0)
            return -1;
        n[j] = len[j] / f[j].bytes;
    }
    const ulp_prepared *p = ctx[0]->prepared;
    int rc;
    /* one lane: under ULP_ONE_LANE_BELOW elements, so one stream */
    _Static_assert(ULP_ONE_LANE_BELOW <= ULP_STREAMS_FROM, "a one-lane chunk has two streams");
    if (p && p == ctx[1]->prepared && f[0].dtype == f[1].dtype && p->f.bytes != 8 &&
        lanes_of(n[0]) == 1 && lanes_of(n[1]) == 1) {
        const uint8_t *const ref[2] = { ctx[0]->ref, ctx[1]->ref };
        rc = encode_pair_of(p, src, ref, n, out, e);
    } else {
        rc = tf_ulp_encode(src[0], len[0], ctx[0], out[0], e);
        if (rc == 0)
            rc = tf_ulp_encode(src[1], len[1], ctx[1], out[1], e);
    }
    if (rc < 0)
        for (unsigned j = 0; j < 2; j++)
            out[j]->len = before[j]; /* nothing half-written is left behind */
    return rc;
}

/* ---- fitted on the chunk itself ---- */

/* The indexes are computed once, under the span the fit counts in, and
 * serve both the counting and the coding (an encoder of that span's
 * rows): the same bytes as tf_ulp_fit of the chunk and tf_ulp_encode
 * with the model, one pass over the elements fewer. */
int tf_ulp_fit_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
                      tf_buf *out, tf_error *e)
{
    ulp_format f;
    if (tf_ulp_format_of(ctx, len, &f, e) < 0)
        return -1;
    const size_t n = len / f.bytes;
    if (f.bytes == 8) { /* F64's indexes do not fit 16 bits */
        if (tf_ulp_fit(src, len, ctx, model, e) < 0)
            return -1;
        tf_codec_ctx with = *ctx;
        with.model = model->data;
        with.model_len = model->len;
        with.prepared = NULL;
        return tf_ulp_encode(src, len, &with, out, e);
    }
    const ctx_span span = reference_span(&f, ctx->ref, n);
    uint16_t *idx = malloc((n + 1) * sizeof *idx);
    uint8_t *raw = malloc(n * f.bytes + 16);
    uint64_t *counts = new_counts(&f, span, e);
    tf_rans_table t = { 0 };
    tf_rans_indexed ix = { 0 };
    size_t before = out->len;
    int rc = -1;
    if (!idx || !raw) {
        tf_fail(e, ENOMEM, "ulp: out of memory encoding %zu elements", n);
        goto done;
    }
    if (!counts)
        goto done;
    size_t raw_len = split_residuals(&f, src, ctx->ref, n, span, idx, raw);
    if (count_many_indexes(counts, (size_t)span.n << f.sym_bits, idx, n, e) < 0 ||
        fit_counts(&f, span, counts, &t, model, e) < 0)
        goto done;
    if (tf_rans_indexed_init_span(&ix, &t, f.sym_bits, span.lo, span.n, e) < 0)
        goto done;
    rc = encode_streams(&ix, streams_of_chunk(&f, n), idx, n, out, e);
    if (rc == 0 && tf_buf_put(out, raw, raw_len) < 0)
        rc = tf_fail(e, ENOMEM, "ulp: out of memory for the raw bits");
done:
    if (rc < 0)
        out->len = before;
    tf_rans_indexed_free(&ix);
    tf_rans_table_free(&t);
    free(counts);
    free(raw);
    free(idx);
    return rc;
}

/* ---- estimate ---- */

/* Bytes of a model of `cells` occupied cells in `rows` rows, about: a
 * byte or two a frequency, three a row. */
static size_t model_bytes(size_t cells, size_t rows)
{
    return 2 + 3 * rows + cells + cells / 2;
}

size_t tf_ulp_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx)
{
    ulp_format f;
    if (tf_ulp_format_of(ctx, len, &f, NULL) < 0)
        return SIZE_MAX;
    const size_t n = len / f.bytes, runs = tf_sample_runs(n), run = tf_sample_run_len(n);
    unsigned lo = ~0u, hi = 0;
    for (size_t k = 0; k < runs; k++) {
        ctx_span s = reference_span_exact(&f, ctx->ref + tf_sample_run_start(n, k) * f.bytes, run);
        lo = s.lo < lo ? s.lo : lo;
        hi = s.lo + s.n > hi ? s.lo + s.n : hi;
    }
    const ctx_span span = { lo, hi > lo ? hi - lo : 0 };
    uint64_t *counts = span.n ? new_counts(&f, span, NULL) : NULL;
    if (!counts)
        return SIZE_MAX;
    for (size_t k = 0; k < runs; k++) {
        size_t at = tf_sample_run_start(n, k) * f.bytes;
        count_cells(counts, span, &f, src + at, ctx->ref + at, run);
    }
    /* the symbols' entropy under their contexts, their raw bits */
    double bits = tf_rans_entropy_bits(counts, span.n, 1u << f.sym_bits);
    size_t cells = 0, rows = 0;
    for (size_t r = 0; r < span.n; r++) {
        bool occupied = false;
        for (unsigned sym = 0; sym < f.n_sym; sym++) {
            uint64_t c = counts[(r << f.sym_bits) + sym];
            unsigned n_raw = sym >> 2 > 1 ? (sym >> 2) - 1 : 0;
            bits += (double)c * n_raw;
            cells += c != 0;
            occupied |= c != 0;
        }
        rows += occupied;
    }
    free(counts);
    double sampled = (double)(runs * run);
    return model_bytes(cells, rows) + 4 * ULP_LANES * streams_of_chunk(&f, n) +
           (size_t)(bits / sampled * (double)n / 8);
}
