#include "codec/ulp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/rans.h"
#include "format/dtype.h"

#define ULP_MODEL_VERSION 1
/* Frequency precision of the tables. The table records it, but the
 * decoding loops have it built in and models with another one are
 * refused: changing it means a new model version. Measured on a 15-delta
 * BF16 trajectory (codes + tables, bits per weight): 4.3110 at 8, 4.2942
 * at 9, 4.2883 at 10, 4.2878 at 11; 12 was worse than 11 (bigger tables
 * for no coding gain) and 2^11 slots keep a row's decoding table at 8 KiB. */
#define ULP_PREC 11

/* rANS lanes of a chunk's stream: as fast as 8 in scalar code, and the
 * width of two AVX2 (or one AVX-512) registers. The fast decoding loops
 * have it built in. Chunks of fewer than ULP_ONE_LANE_BELOW elements use a
 * single lane instead: their speed does not matter, and 16 lane states
 * (64 bytes) would be a visible share of them. */
#define ULP_LANES 16
#define ULP_ONE_LANE_BELOW 2048

/* The hot loops are written once and instantiated per float format, so
 * that element size, field positions and masks are constants. */
#define ULP_ALWAYS_INLINE static inline __attribute__((always_inline))

/* X(dtype, bytes, mantissa bits, exponent bits) for every format ULPack
 * handles (the same figures as format/dtype.c). */
#define ULP_FORMATS(X)                  \
    X(TF_DT_BF16, 2, 7, 8)              \
    X(TF_DT_F16, 2, 10, 5)              \
    X(TF_DT_F32, 4, 23, 8)              \
    X(TF_DT_F64, 8, 52, 11)             \
    X(TF_DT_F8_E4M3, 1, 3, 4)           \
    X(TF_DT_F8_E5M2, 1, 2, 5)

typedef struct {
    unsigned dtype, bytes, n_ctx, n_sym;
} ulp_format;

/* Fails (EINVAL) unless dtype is a float ULPack handles and len is a
 * whole number of elements matching a reference of the same length. */
static int format_of(const tf_codec_ctx *ctx, size_t len, ulp_format *f, tf_error *e)
{
    *f = (ulp_format){ .dtype = ctx->dtype };
    switch (ctx->dtype) {
#define X(dt, size, man, exp)                    \
    case dt:                                     \
        f->bytes = size;                         \
        f->n_ctx = 1u << exp;                    \
        f->n_sym = tf_ulp_symbol_count(8 * size); \
        break;
        ULP_FORMATS(X)
#undef X
    default:
        return tf_fail(e, EINVAL, "ulp: needs a float dtype, not %u", ctx->dtype);
    }
    if (!ctx->ref || ctx->ref_len != len || len % f->bytes)
        return tf_fail(e, EINVAL, "ulp: %zu bytes of %s need a reference of the same length",
                       len, tf_dtype_get(ctx->dtype)->name);
    return 0;
}

/* Little-endian element access that compiles to single loads and
 * stores (a byte loop does not, at -O2). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ULP_LE16(v) __builtin_bswap16(v)
#define ULP_LE32(v) __builtin_bswap32(v)
#define ULP_LE64(v) __builtin_bswap64(v)
#else
#define ULP_LE16(v) (v)
#define ULP_LE32(v) (v)
#define ULP_LE64(v) (v)
#endif

ULP_ALWAYS_INLINE uint64_t load_elem(const uint8_t *p, unsigned bytes)
{
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    switch (bytes) {
    case 1: return p[0];
    case 2: memcpy(&v16, p, 2); return ULP_LE16(v16);
    case 4: memcpy(&v32, p, 4); return ULP_LE32(v32);
    default: memcpy(&v64, p, 8); return ULP_LE64(v64);
    }
}

ULP_ALWAYS_INLINE void store_elem(uint8_t *p, uint64_t v, unsigned bytes)
{
    uint16_t v16 = ULP_LE16((uint16_t)v);
    uint32_t v32 = ULP_LE32((uint32_t)v);
    uint64_t v64 = ULP_LE64(v);
    switch (bytes) {
    case 1: p[0] = (uint8_t)v; break;
    case 2: memcpy(p, &v16, 2); break;
    case 4: memcpy(p, &v32, 4); break;
    default: memcpy(p, &v64, 8); break;
    }
}

/* e_r: the exponent field of the reference element. */
ULP_ALWAYS_INLINE unsigned context_of(uint64_t r, unsigned man, unsigned exp)
{
    return (unsigned)(r >> man) & ((1u << exp) - 1);
}

/* ---- model ---- */

ULP_ALWAYS_INLINE void count_sized(const uint8_t *src, const uint8_t *ref, size_t n,
                                   uint64_t *counts, unsigned bytes, unsigned man, unsigned exp)
{
    const unsigned n_sym = tf_ulp_symbol_count(8 * bytes);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = load_elem(ref + i * bytes, bytes);
        uint64_t z = tf_ulp_residual(load_elem(src + i * bytes, bytes), r, 8 * bytes);
        unsigned n_raw;
        counts[(size_t)context_of(r, man, exp) * n_sym + tf_ulp_symbol(z, &n_raw)]++;
    }
}

static void count_symbols(unsigned dtype, const uint8_t *src, const uint8_t *ref, size_t n,
                          uint64_t *counts)
{
    switch (dtype) {
#define X(dt, bytes, man, exp) \
    case dt: count_sized(src, ref, n, counts, bytes, man, exp); break;
        ULP_FORMATS(X)
#undef X
    }
}

static int ulp_fit(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
                   tf_error *e)
{
    ulp_format f;
    if (format_of(ctx, len, &f, e) < 0)
        return -1;
    uint64_t *counts = calloc((size_t)f.n_ctx * f.n_sym, sizeof *counts);
    if (!counts)
        return tf_fail(e, ENOMEM, "ulp: out of memory for counts");
    count_symbols(f.dtype, src, ctx->ref, len / f.bytes, counts);
    tf_rans_table t;
    int rc = tf_rans_table_fit(&t, f.n_ctx, f.n_sym, ULP_PREC, counts, e);
    free(counts);
    if (rc < 0)
        return -1;
    if (tf_buf_u8(model, ULP_MODEL_VERSION) < 0 || tf_buf_u8(model, (uint8_t)f.dtype) < 0)
        rc = tf_fail(e, ENOMEM, "ulp: out of memory writing the model");
    else
        rc = tf_rans_table_write(&t, model, e);
    tf_rans_table_free(&t);
    return rc;
}

static int read_model(const tf_codec_ctx *ctx, const ulp_format *f, tf_rans_table *t,
                      tf_error *e)
{
    if (!ctx->model)
        return tf_fail(e, EINVAL, "ulp: no model");
    tf_reader r = tf_reader_make(ctx->model, ctx->model_len);
    unsigned version = tf_read_u8(&r), dtype = tf_read_u8(&r);
    if (r.bad || version != ULP_MODEL_VERSION || dtype != f->dtype)
        return tf_fail(e, EIO, "ulp: model is not a version %d model for dtype %u",
                       ULP_MODEL_VERSION, f->dtype);
    if (tf_rans_table_read(t, &r, f->n_ctx, f->n_sym, e) < 0)
        return -1;
    if (tf_reader_left(&r) || t->prec != ULP_PREC) {
        tf_rans_table_free(t);
        return tf_fail(e, EIO, "ulp: model has trailing bytes or precision other than %d",
                       ULP_PREC);
    }
    return 0;
}

/* ---- encode ---- */

/* LSB-first bit writer. Every put stores 8 bytes, so the buffer needs 8
 * bytes of slack; fewer than 8 bits stay pending between puts. */
typedef struct {
    uint64_t acc;
    unsigned count;
    uint8_t *p;
} bit_writer;

ULP_ALWAYS_INLINE void bits_put(bit_writer *w, uint64_t v, unsigned n) /* n <= 56 */
{
    w->acc |= v << w->count;
    w->count += n;
    store_elem(w->p, w->acc, 8);
    unsigned whole = w->count >> 3;
    w->p += whole;
    w->acc >>= 8 * whole;
    w->count &= 7;
}

/* Elements whose raw bits fit one 56-bit put or refill together: an
 * element has at most 8 * bytes - 3. F64 goes element by element. */
ULP_ALWAYS_INLINE unsigned elems_per_56_bits(unsigned bytes)
{
    return bytes < 8 ? 56 / (8 * bytes - 3) : 1;
}

/* Symbol and context of element i; returns its raw bits, *n_raw of them. */
ULP_ALWAYS_INLINE uint64_t split_one(const uint8_t *src, const uint8_t *ref, size_t i,
                                     uint8_t *sym, uint16_t *ctx, unsigned *n_raw,
                                     unsigned bytes, unsigned man, unsigned exp)
{
    uint64_t r = load_elem(ref + i * bytes, bytes);
    uint64_t z = tf_ulp_residual(load_elem(src + i * bytes, bytes), r, 8 * bytes);
    sym[i] = (uint8_t)tf_ulp_symbol(z, n_raw);
    ctx[i] = (uint16_t)context_of(r, man, exp);
    return z & (((uint64_t)1 << *n_raw) - 1); /* n_raw <= 61 */
}

/* Splits each residual into its symbol (with its context) and raw bits;
 * returns the raw section's length in bytes. The raw bits of a group of
 * elements are gathered in a register first: one put per group keeps the
 * writer's serial dependency chain short. */
ULP_ALWAYS_INLINE size_t split_sized(const uint8_t *src, const uint8_t *ref, size_t n,
                                     uint8_t *sym, uint16_t *ctx, uint8_t *raw, unsigned bytes,
                                     unsigned man, unsigned exp)
{
    const unsigned group = elems_per_56_bits(bytes);
    bit_writer w = { .p = raw };
    size_t i = 0;
    while (i < n) {
        size_t end = n - i < group ? n : i + group;
        uint64_t bits = 0;
        unsigned n_bits = 0;
        for (; i < end; i++) {
            unsigned n_raw;
            uint64_t low = split_one(src, ref, i, sym, ctx, &n_raw, bytes, man, exp);
            if (bytes < 8) {
                bits |= low << n_bits;
                n_bits += n_raw;
            } else { /* F64: up to 61 bits, in two halves */
                unsigned half = n_raw < 32 ? n_raw : 32;
                bits_put(&w, low & 0xffffffffu, half);
                bits_put(&w, low >> 32, n_raw - half);
            }
        }
        if (bytes < 8)
            bits_put(&w, bits, n_bits);
    }
    return (size_t)(w.p - raw) + (w.count > 0);
}

static size_t split_residuals(unsigned dtype, const uint8_t *src, const uint8_t *ref, size_t n,
                              uint8_t *sym, uint16_t *ctx, uint8_t *raw)
{
    switch (dtype) {
#define X(dt, bytes, man, exp) \
    case dt: return split_sized(src, ref, n, sym, ctx, raw, bytes, man, exp);
        ULP_FORMATS(X)
#undef X
    }
    return 0;
}

static int encode_chunk(const ulp_format *f, const tf_rans_table *t, const uint8_t *src,
                        const uint8_t *ref, size_t n, tf_buf *out, tf_error *e)
{
    /* At most 8 * bytes - 3 raw bits per element, plus the writer's slack. */
    size_t raw_cap = n * f->bytes + 16;
    uint8_t *sym = malloc(n + 1), *raw = malloc(raw_cap);
    uint16_t *ctx = malloc((n + 1) * sizeof *ctx);
    tf_rans_encoder enc = { 0 };
    int rc = -1;
    if (!sym || !raw || !ctx) {
        tf_fail(e, ENOMEM, "ulp: out of memory encoding %zu elements", n);
        goto done;
    }
    size_t raw_len = split_residuals(f->dtype, src, ref, n, sym, ctx, raw);
    if (tf_rans_encoder_init(&enc, t, e) < 0 ||
        tf_rans_encode(&enc, ctx, sym, n, n < ULP_ONE_LANE_BELOW ? 1 : ULP_LANES, out, e) < 0)
        goto done;
    if (tf_buf_put(out, raw, raw_len) < 0) {
        tf_fail(e, ENOMEM, "ulp: out of memory for the raw bits");
        goto done;
    }
    rc = 0;
done:
    tf_rans_encoder_free(&enc);
    free(sym);
    free(raw);
    free(ctx);
    return rc;
}

static int ulp_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *out,
                      tf_error *e)
{
    ulp_format f;
    tf_rans_table t;
    if (format_of(ctx, len, &f, e) < 0 || read_model(ctx, &f, &t, e) < 0)
        return -1;
    size_t before = out->len;
    int rc = encode_chunk(&f, &t, src, ctx->ref, len / f.bytes, out, e);
    tf_rans_table_free(&t);
    if (rc < 0)
        out->len = before; /* nothing half-written is left behind */
    return rc;
}

/* ---- decode ---- */

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
    r->acc |= load_elem(r->p, 8) << r->count;
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

/* What a symbol means to the decoder: the residual's bits above the raw
 * ones, already in place, and the raw bits below them. */
typedef struct {
    uint64_t lead;
    uint32_t raw_mask; /* unused for F64, which takes its raw bits in halves */
    uint32_t n_raw;
} symbol_info;

static void fill_symbol_info(symbol_info *info, unsigned n_sym)
{
    for (unsigned sym = 0; sym < n_sym; sym++) {
        unsigned n_raw;
        uint64_t lead = tf_ulp_symbol_lead(sym, &n_raw);
        info[sym] = (symbol_info){ lead << n_raw, (uint32_t)((uint64_t)1 << n_raw) - 1, n_raw };
    }
}

/* The residual of an element whose symbol is described by `info`. */
ULP_ALWAYS_INLINE uint64_t residual_of(const symbol_info *info, bit_reader *r, bool checked,
                                       unsigned bytes)
{
    if (bytes < 8 && checked)
        return info->lead | bits_get_checked(r, info->n_raw);
    if (bytes < 8) { /* the round refilled enough bits */
        uint64_t raw = r->acc & info->raw_mask;
        r->acc >>= info->n_raw;
        r->count -= info->n_raw;
        return info->lead | raw;
    }
    /* F64: up to 61 raw bits, in two halves of at most 32 */
    unsigned low_bits = info->n_raw < 32 ? info->n_raw : 32, high_bits = info->n_raw - low_bits;
    if (checked) {
        uint64_t low = bits_get_checked(r, low_bits);
        return info->lead | low | bits_get_checked(r, high_bits) << 32;
    }
    bits_refill_fast(r);
    uint64_t low = bits_take(r, low_bits);
    bits_refill_fast(r);
    return info->lead | low | bits_take(r, high_bits) << 32;
}

/* A round may skip bounds checks when every lane has a word and the raw
 * bits have 8 readable bytes for each refill (a refill advances at most
 * 7 bytes; F64 refills twice per element). */
ULP_ALWAYS_INLINE bool round_is_safe(const tf_rans_stream *s, const bit_reader *r)
{
    return tf_rans_words_suffice(s, ULP_LANES) && (size_t)(r->end - r->p) >= 16 * ULP_LANES + 8;
}

ULP_ALWAYS_INLINE void decode_one(const uint32_t *const *slots_of_ctx, const symbol_info *info,
                                  tf_rans_stream *s, bit_reader *br, const uint8_t *ref,
                                  uint8_t *dst, size_t i, unsigned lane, bool checked,
                                  unsigned bytes, unsigned man, unsigned exp)
{
    uint64_t r = load_elem(ref + i * bytes, bytes);
    const uint32_t *slots = slots_of_ctx[context_of(r, man, exp)];
    unsigned sym = checked ? tf_rans_get_checked(s, lane, slots, ULP_PREC)
                           : tf_rans_get_fast(s, lane, slots, ULP_PREC);
    uint64_t z = residual_of(&info[sym], br, checked, bytes);
    store_elem(dst + i * bytes, tf_ulp_unresidual(z, r, 8 * bytes), bytes);
}

/* Whole rounds while no bounds check is needed; returns the elements
 * done. The stream and reader live in locals (registers) meanwhile. */
ULP_ALWAYS_INLINE size_t decode_rounds(const tf_rans_decoder *dec, const symbol_info *info,
                                       tf_rans_stream *stream, bit_reader *reader,
                                       const uint8_t *ref, uint8_t *dst, size_t n,
                                       unsigned bytes, unsigned man, unsigned exp)
{
    const uint32_t *const *slots_of_ctx = dec->slots_of_ctx;
    tf_rans_stream s = *stream;
    bit_reader br = *reader;
    size_t i = 0;
    for (; i + ULP_LANES <= n && round_is_safe(&s, &br); i += ULP_LANES) {
#pragma GCC unroll 16
        for (unsigned l = 0; l < ULP_LANES; l++) {
            if (bytes < 8 && l % elems_per_56_bits(bytes) == 0)
                bits_refill_fast(&br);
            decode_one(slots_of_ctx, info, &s, &br, ref, dst, i + l, l, false, bytes, man, exp);
        }
    }
    *stream = s;
    *reader = br;
    return i;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ULP_HAVE_AVX2 1
#define ULP_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,popcnt")))

/* ---- AVX2 decoding ----
 * The rounds of decode_rounds, sixteen elements each, with lanes 0-7 and
 * 8-15 as two groups of eight 32-bit vector lanes. Each group takes its
 * words and raw bits in lane order, group 0-7 first, exactly as the
 * scalar loop does: the output is the same. The rANS lookup is one gather
 * per group (rows are dense, so no second gather finds the row), and the
 * two groups' independent dependency chains overlap its latency. Raw bits
 * come from 16-byte windows by byte shuffles: gathers are slow on some
 * CPUs (on an AMD Zen 4, a row gather halved the speed, raw-bit gathers
 * cost F32 a fifth). There this loop decodes BF16 and F32 2.1-2.3x as
 * fast as the scalar one. */

/* What a group's decoding needs besides its elements. The decoding slots
 * are dense: context c's row starts at slot c << ULP_PREC. */
typedef struct {
    const uint32_t *slots;
    int32_t word_lane[256][8]; /* renormalizing lanes (bit mask) -> word index */
} avx2_tables;

static void fill_avx2_tables(avx2_tables *t, const tf_rans_decoder *dec)
{
    t->slots = dec->slots;
    for (unsigned mask = 0; mask < 256; mask++) {
        int32_t words = 0;
        for (unsigned l = 0; l < 8; l++) {
            t->word_lane[mask][l] = mask >> l & 1 ? words : 0;
            words += mask >> l & 1;
        }
    }
}

ULP_AVX2_INLINE __m256i avx2_set(uint32_t v)
{
    return _mm256_set1_epi32((int)v);
}

/* Eight elements, zero-extended to 32-bit lanes. */
ULP_AVX2_INLINE __m256i avx2_load(const uint8_t *p, unsigned bytes)
{
    if (bytes == 2)
        return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_loadu_si256((const __m256i *)p);
}

ULP_AVX2_INLINE void avx2_store(uint8_t *p, __m256i v, unsigned bytes)
{
    if (bytes == 2) { /* pack within 128-bit halves, then join the halves */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
        _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
    } else {
        _mm256_storeu_si256((__m256i *)p, v);
    }
}

/* tf_rans_get_fast for eight lanes under contexts ctx; returns their
 * symbols. */
ULP_AVX2_INLINE __m256i avx2_rans_get(__m256i *x, __m256i ctx, const avx2_tables *t,
                                      const uint8_t **words)
{
    __m256i slot_index = _mm256_or_si256(_mm256_slli_epi32(ctx, ULP_PREC),
                                         _mm256_and_si256(*x, avx2_set((1u << ULP_PREC) - 1)));
    __m256i slot = _mm256_i32gather_epi32((const int *)t->slots, slot_index, 4);
    __m256i freq = _mm256_srli_epi32(slot, 20);
    __m256i bias = _mm256_and_si256(_mm256_srli_epi32(slot, 8), avx2_set(0xfff));
    __m256i next = _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32(*x, ULP_PREC)), bias);
    __m256i need = _mm256_cmpeq_epi32(_mm256_min_epu32(next, avx2_set(TF_RANS_L - 1)), next);
    unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
    __m256i word = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)*words));
    word = _mm256_permutevar8x32_epi32(
        word, _mm256_loadu_si256((const __m256i *)t->word_lane[mask]));
    *x = _mm256_blendv_epi8(next, _mm256_or_si256(_mm256_slli_epi32(next, 16), word), need);
    *words += 2 * (unsigned)_mm_popcnt_u32(mask);
    return _mm256_and_si256(slot, avx2_set(0xff));
}

/* Where the raw bits of eight elements start, n_raw[l] of them for lane
 * l, from bit `*bit` of `*base` on (the start, relative to *base); advances
 * *base and *bit past them. */
ULP_AVX2_INLINE __m256i avx2_raw_starts(__m256i n_raw, const uint8_t **base, unsigned *bit)
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

/* Four lanes' raw bits (F32: up to 29 after a bit offset up to 7, in the
 * 5 bytes from `byte`), in 64-bit lanes, from the 16 bytes at `from`,
 * which hold them all (offsets up to 7 + 3 * 29 bits). */
ULP_AVX2_INLINE __m256i avx2_raw_bits_wide(const uint8_t *from, __m128i byte, __m128i shift)
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
ULP_AVX2_INLINE __m256i avx2_raw_bits(__m256i n_raw, const uint8_t **base, unsigned *bit,
                                      unsigned bytes)
{
    const uint8_t *from = *base;
    __m256i start = avx2_raw_starts(n_raw, base, bit);
    __m256i keep = _mm256_sub_epi32(_mm256_sllv_epi32(avx2_set(1), n_raw), avx2_set(1));
    if (bytes == 2) {
        __m256i byte = _mm256_srli_epi32(start, 3), shift = _mm256_and_si256(start, avx2_set(7));
        __m256i window = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)from));
        __m256i pick = _mm256_add_epi32(_mm256_mullo_epi32(byte, avx2_set(0x01010101)),
                                        avx2_set(0x03020100));
        __m256i bits = _mm256_srlv_epi32(_mm256_shuffle_epi8(window, pick), shift);
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

/* tf_ulp_unresidual for eight w-bit elements. */
ULP_AVX2_INLINE __m256i avx2_unresidual(__m256i z, __m256i r, unsigned width)
{
    const __m256i zero = _mm256_setzero_si256(), one = avx2_set(1);
    const __m256i top = avx2_set(1u << (width - 1));
    const __m256i mask = avx2_set((uint32_t)tf_ulp_mask(width));
    __m256i d = _mm256_xor_si256(_mm256_srli_epi32(z, 1), _mm256_sub_epi32(zero, _mm256_and_si256(z, one)));
    __m256i r_key = _mm256_xor_si256(
        r, _mm256_or_si256(_mm256_sub_epi32(zero, _mm256_srli_epi32(r, width - 1)), top));
    __m256i k = _mm256_and_si256(_mm256_add_epi32(r_key, d), mask);
    __m256i non_negative = _mm256_srli_epi32(k, width - 1);
    return _mm256_and_si256(
        _mm256_xor_si256(k, _mm256_or_si256(_mm256_sub_epi32(non_negative, one), top)), mask);
}

/* decode_one for eight consecutive elements in eight lanes. */
ULP_AVX2_INLINE void avx2_decode_group(const avx2_tables *t, __m256i *x, const uint8_t **words,
                                       const uint8_t **base, unsigned *bit, const uint8_t *ref,
                                       uint8_t *dst, unsigned bytes, unsigned man, unsigned exp)
{
    __m256i r = avx2_load(ref, bytes);
    __m256i ctx = _mm256_and_si256(_mm256_srli_epi32(r, man), avx2_set((1u << exp) - 1));
    __m256i sym = avx2_rans_get(x, ctx, t, words);
    __m256i high = _mm256_srli_epi32(sym, 2);
    __m256i is_long = _mm256_cmpgt_epi32(high, _mm256_setzero_si256()); /* -1 or 0 */
    __m256i n_raw = _mm256_add_epi32(high, is_long);
    __m256i lead = _mm256_or_si256(_mm256_and_si256(sym, avx2_set(3)),
                                   _mm256_and_si256(is_long, avx2_set(4)));
    __m256i z = _mm256_or_si256(_mm256_sllv_epi32(lead, n_raw),
                                avx2_raw_bits(n_raw, base, bit, bytes));
    avx2_store(dst, avx2_unresidual(z, r, 8 * bytes), bytes);
}

ULP_AVX2_INLINE size_t avx2_rounds_sized(const avx2_tables *t, tf_rans_stream *s,
                                         bit_reader *br, const uint8_t *ref, uint8_t *dst,
                                         size_t n, unsigned bytes, unsigned man, unsigned exp)
{
    __m256i x0 = _mm256_loadu_si256((const __m256i *)s->x);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(s->x + 8));
    const uint8_t *words = s->p, *base = br->p;
    unsigned bit = 0;
    size_t i = 0;
    /* The last eight rounds are left to the scalar loop: that costs
     * nothing measurable and keeps the scalar loop exercised on every
     * machine, by every chunk. */
    for (; i + 8 * ULP_LANES <= n && (size_t)(s->end - words) >= 2 * ULP_LANES &&
           (size_t)(br->end - base) >= 16 * ULP_LANES + 8;
         i += ULP_LANES) {
        avx2_decode_group(t, &x0, &words, &base, &bit, ref + i * bytes, dst + i * bytes, bytes,
                          man, exp);
        avx2_decode_group(t, &x1, &words, &base, &bit, ref + (i + 8) * bytes,
                          dst + (i + 8) * bytes, bytes, man, exp);
    }
    _mm256_storeu_si256((__m256i *)s->x, x0);
    _mm256_storeu_si256((__m256i *)(s->x + 8), x1);
    s->p = words;
    /* The scalar reader takes over at bit `bit` of base. */
    *br = (bit_reader){ .p = base, .end = br->end };
    bits_get_checked(br, bit);
    return i;
}

/* Rounds decoded with AVX2 for the formats it handles (BF16, F16, F32),
 * from the start of a chunk; returns the elements done. */
__attribute__((target("avx2,popcnt"))) static size_t
avx2_rounds(unsigned dtype, const tf_rans_decoder *dec, tf_rans_stream *s, bit_reader *br,
            const uint8_t *ref, uint8_t *dst, size_t n)
{
    avx2_tables t;
    fill_avx2_tables(&t, dec);
    switch (dtype) {
    case TF_DT_BF16: return avx2_rounds_sized(&t, s, br, ref, dst, n, 2, 7, 8);
    case TF_DT_F16: return avx2_rounds_sized(&t, s, br, ref, dst, n, 2, 10, 5);
    case TF_DT_F32: return avx2_rounds_sized(&t, s, br, ref, dst, n, 4, 23, 8);
    }
    return 0;
}

#endif

/* Whether the chunk decodes with AVX2, which needs dense decoding slots.
 * Worth it past a few hundred elements: its tables cost about that much. */
static bool use_avx2(unsigned dtype, size_t n)
{
#ifdef ULP_HAVE_AVX2
    return (dtype == TF_DT_BF16 || dtype == TF_DT_F16 || dtype == TF_DT_F32) && n >= 1024 &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#else
    (void)dtype, (void)n;
    return false;
#endif
}

/* Every context of the reference must have slots (mark_contexts). A
 * stream of other than ULP_LANES lanes (a small chunk) decodes element by
 * element, with checks. */
ULP_ALWAYS_INLINE void decode_sized(const tf_rans_decoder *dec, tf_rans_stream *s,
                                    bit_reader *br, const uint8_t *ref, uint8_t *dst, size_t n,
                                    unsigned bytes, unsigned man, unsigned exp)
{
    symbol_info info[TF_RANS_MAX_SYMBOLS];
    fill_symbol_info(info, tf_ulp_symbol_count(8 * bytes));
    size_t i = 0;
    if (s->lanes == ULP_LANES)
        i = decode_rounds(dec, info, s, br, ref, dst, n, bytes, man, exp);
    for (; i < n; i++)
        decode_one(dec->slots_of_ctx, info, s, br, ref, dst, i, (unsigned)(i % s->lanes), true,
                   bytes, man, exp);
}

static void decode_elems(unsigned dtype, const tf_rans_decoder *dec, bool avx2,
                         tf_rans_stream *s, bit_reader *br, const uint8_t *ref, uint8_t *dst,
                         size_t n)
{
    size_t done = 0;
#ifdef ULP_HAVE_AVX2
    if (avx2 && s->lanes == ULP_LANES)
        done = avx2_rounds(dtype, dec, s, br, ref, dst, n);
#else
    (void)avx2;
#endif
    const size_t skip = done * tf_dtype_get(dtype)->size;
    switch (dtype) {
#define X(dt, bytes, man, exp) \
    case dt: decode_sized(dec, s, br, ref + skip, dst + skip, n - done, bytes, man, exp); break;
        ULP_FORMATS(X)
#undef X
    }
}

ULP_ALWAYS_INLINE void mark_sized(const uint8_t *ref, size_t n, uint8_t *used, unsigned bytes,
                                  unsigned man, unsigned exp)
{
    /* Unrolled: the loop is all overhead otherwise (a tenth of decoding). */
#pragma GCC unroll 8
    for (size_t i = 0; i < n; i++)
        used[context_of(load_elem(ref + i * bytes, bytes), man, exp)] = 1;
}

/* Flags the contexts the reference chunk uses, so that only their
 * decoding slots are built (and each is checked to exist). */
static void mark_contexts(unsigned dtype, const uint8_t *ref, size_t n, uint8_t *used)
{
    switch (dtype) {
#define X(dt, bytes, man, exp) \
    case dt: mark_sized(ref, n, used, bytes, man, exp); break;
        ULP_FORMATS(X)
#undef X
    }
}

/* A chunk is its rANS stream, then its raw bits up to the end. */
static int open_chunk(const uint8_t *enc, size_t enc_len, tf_rans_stream *s, bit_reader *br,
                      tf_error *e)
{
    tf_reader r = tf_reader_make(enc, enc_len);
    if (tf_rans_stream_open(s, &r, e) < 0)
        return -1;
    *br = (bit_reader){ .p = enc + r.pos, .end = enc + enc_len };
    return 0;
}

static int decode_chunk(const ulp_format *f, const tf_rans_table *t, const uint8_t *enc,
                        size_t enc_len, const uint8_t *ref, uint8_t *dst, size_t n,
                        tf_error *e)
{
    uint8_t *used = calloc(f->n_ctx, 1);
    if (!used)
        return tf_fail(e, ENOMEM, "ulp: out of memory");
    mark_contexts(f->dtype, ref, n, used);
    bool avx2 = use_avx2(f->dtype, n);
    tf_rans_decoder dec;
    int rc = tf_rans_decoder_init(&dec, t, used, avx2, e);
    free(used);
    if (rc < 0)
        return -1;
    tf_rans_stream s;
    bit_reader br;
    rc = open_chunk(enc, enc_len, &s, &br, e);
    if (rc == 0) {
        decode_elems(f->dtype, &dec, avx2, &s, &br, ref, dst, n);
        rc = tf_rans_stream_close(&s, e) < 0 || bits_finish(&br, e) < 0 ? -1 : 0;
    }
    tf_rans_decoder_free(&dec);
    return rc;
}

static int ulp_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                      uint8_t *dst, size_t len, tf_error *e)
{
    ulp_format f;
    tf_rans_table t;
    if (format_of(ctx, len, &f, e) < 0 || read_model(ctx, &f, &t, e) < 0) {
        if (e && e->errnum != ENOMEM)
            e->errnum = EIO; /* the archive says ulp where ulp cannot be */
        return -1;
    }
    int rc = decode_chunk(&f, &t, enc, enc_len, ctx->ref, dst, len / f.bytes, e);
    tf_rans_table_free(&t);
    return rc;
}

const tf_codec tf_codec_ulp = {
    .id = TF_CODEC_ULP,
    .name = "ulp",
    .delta = true,
    .fit = ulp_fit,
    .encode = ulp_encode,
    .decode = ulp_decode,
};
