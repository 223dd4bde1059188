#include "codec/prog/prog_fields.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/entropy/rans.h"
#include "codec/prog/prog_leaf_codings.h"
#include "codec/sample.h"
#include "common/dtype.h"
#include "common/simd.h"

/* The hot loops are written once and instantiated per element size, so
 * that loads are single moves. */
#define FIELDS_INLINE static inline __attribute__((always_inline))

/* rANS under its own words is tried where the sample's exponents cost
 * this many bits a word less under the exponent a turn earlier than
 * alone: its decoding's price over HUFF4's (3/16 bits a word,
 * prog_leaf.c) and a little for its table and the sample's bias (a
 * plug-in entropy of a few thousand words is low by a few hundredths of
 * a bit). The exact sizes decide between the two then. On the
 * benchmark's float32 AdamW state, 3/8 bits tried it on 7 tensors and
 * stored 0.18% more than 1/4, which tries it on 13. */
#define SELF_GAIN_BITS 0.25
/* ... in chunks of at least this many elements (a smaller one's sample
 * says little about contexts, nor would the gain pay for the attempt). */
#define SELF_MIN 4096
/* Contexts of such a literal: the values of a window around the mode. */
#define SELF_WINDOW 32
/* ... and its precision, which the rANS plan search (prog_leaf_rans.c)
 * picks for large literals. */
#define SELF_PREC 11
/* A field of at most 8 bits tries Huffman codes where its sample's
 * entropy is this much below its width. */
#define HUFF_GAIN_BITS 0.25

static unsigned element_bytes(unsigned dtype)
{
    return tf_dtype_get(dtype)->size;
}

static uint64_t mask_of(unsigned width)
{
    return width >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << width) - 1;
}

/* The lowest bit of each field. */
static void field_shifts(const tf_prog_fields *f, unsigned *shift)
{
    unsigned at = 8 * element_bytes(f->dtype);
    for (unsigned j = 0; j < f->n; j++) {
        at -= f->width[j];
        shift[j] = at;
    }
}

static size_t packed_bytes(size_t n, unsigned bits)
{
    return (size_t)(((uint64_t)n * bits + 7) / 8);
}

static unsigned bit_length(uint64_t v)
{
    return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

/* ---- the model ---- */

int tf_prog_fields_write_model(const tf_prog_fields *f, tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, TF_PROG_FIELDS_VERSION) | tf_buf_u8(out, (uint8_t)f->dtype) |
             tf_buf_u8(out, (uint8_t)f->n);
    for (unsigned j = 0; j < f->n; j++)
        rc |= tf_buf_u8(out, f->width[j]) | tf_buf_u8(out, f->tries[j]);
    return rc ? tf_fail(e, ENOMEM, "prog: out of memory for a model") : 0;
}

int tf_prog_fields_read_model(const uint8_t *model, size_t len, unsigned dtype,
                              tf_prog_fields *f, tf_error *e)
{
    tf_cursor r = tf_cursor_make(model, len);
    unsigned version = tf_read_u8(&r);
    f->dtype = tf_read_u8(&r);
    f->n = tf_read_u8(&r);
    if (r.bad || version != TF_PROG_FIELDS_VERSION || f->dtype != dtype || !tf_dtype_get(dtype) ||
        f->n < 2 || f->n > TF_PROG_MAX_ARITY)
        return tf_fail(e, EINVAL, "prog: not a fields model for dtype %u", dtype);
    unsigned sum = 0;
    for (unsigned j = 0; j < f->n; j++) {
        f->width[j] = tf_read_u8(&r);
        f->tries[j] = tf_read_u8(&r);
        sum += f->width[j];
        if (f->width[j] < 1 || f->tries[j] >= TF_PROG_FIELD_TRIES ||
            (f->tries[j] != TF_PROG_FIELD_FIXED && f->width[j] > 8))
            r.bad = true;
    }
    if (r.bad || tf_cursor_left(&r) || sum != 8 * element_bytes(dtype))
        return tf_fail(e, EINVAL, "prog: malformed fields model");
    return 0;
}

/* ---- passes over the elements ---- */

FIELDS_INLINE void or_and_sized(const uint8_t *src, size_t n, uint64_t *or_out,
                                uint64_t *and_out, unsigned bytes)
{
    uint64_t o = 0, a = ~(uint64_t)0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = tf_le_get(src + i * bytes, bytes);
        o |= v;
        a &= v;
    }
    *or_out = o;
    *and_out = a;
}

#ifdef TF_X86_SIMD
/* The OR and AND of whole 32-byte blocks (of whole elements) folded to
 * 64 bits; returns the bytes done. */
TF_AVX2_FUNCTION size_t or_and_avx2(const uint8_t *src, size_t len, uint64_t *o, uint64_t *a)
{
    __m256i vo = _mm256_setzero_si256(), va = _mm256_set1_epi8(-1);
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(src + i));
        vo = _mm256_or_si256(vo, v);
        va = _mm256_and_si256(va, v);
    }
    uint64_t lo[4], la[4];
    _mm256_storeu_si256((__m256i *)lo, vo);
    _mm256_storeu_si256((__m256i *)la, va);
    *o = lo[0] | lo[1] | lo[2] | lo[3];
    *a = la[0] & la[1] & la[2] & la[3];
    return i;
}
#endif

/* The OR (and) of the elements side by side in 64 bits, in the low
 * element's bits. */
static uint64_t fold_or(uint64_t v, unsigned bytes)
{
    for (unsigned w = 32; w >= 8 * bytes; w /= 2)
        v |= v >> w;
    return v & mask_of(8 * bytes);
}

static uint64_t fold_and(uint64_t v, unsigned bytes)
{
    for (unsigned w = 32; w >= 8 * bytes; w /= 2)
        v &= v >> w;
    return v & mask_of(8 * bytes);
}

/* The OR and the AND of n elements: a field is constant where they agree,
 * and its values fit the bit length of its part of the OR. */
static void or_and(const uint8_t *src, size_t n, unsigned bytes, uint64_t *o, uint64_t *a)
{
    size_t done = 0;
    uint64_t vo = 0, va = ~(uint64_t)0;
#ifdef TF_X86_SIMD
    if (tf_simd_level_get() >= TF_SIMD_AVX2) {
        done = or_and_avx2(src, n * bytes, &vo, &va) / bytes;
        vo = fold_or(vo, bytes);
        va = fold_and(va, bytes);
    }
#endif
    switch (bytes) {
    case 1: or_and_sized(src + done, n - done, o, a, 1); break;
    case 2: or_and_sized(src + 2 * done, n - done, o, a, 2); break;
    case 4: or_and_sized(src + 4 * done, n - done, o, a, 4); break;
    default: or_and_sized(src + 8 * done, n - done, o, a, 8); break;
    }
    *o |= vo;
    *a &= va;
}

/* Counts of a field's values in each HUFF4 stream, four tables a stream
 * so that a run of one value does not wait on its own increments. */
typedef uint32_t stream_hist[TF_PROG_HUFF_STREAMS][4][256];

/* A field of at most 8 bits whose values a scan puts in sym and counts. */
typedef struct {
    unsigned shift, mask;
    uint8_t *sym;
    stream_hist *hist;
} counted_field;

/* Element i of a scan, counted in table k of its stream's. */
FIELDS_INLINE void scan_one(const uint8_t *src, size_t i, unsigned k, unsigned nf,
                            const counted_field *c0, const counted_field *c1,
                            uint32_t (*h0)[256], uint32_t (*h1)[256], uint64_t *o, uint64_t *a,
                            unsigned bytes)
{
    uint64_t v = tf_le_get(src + i * bytes, bytes);
    *o |= v;
    *a &= v;
    uint8_t x = (uint8_t)(v >> c0->shift & c0->mask);
    c0->sym[i] = x;
    h0[k][x]++;
    if (nf > 1) {
        uint8_t y = (uint8_t)(v >> c1->shift & c1->mask);
        c1->sym[i] = y;
        h1[k][y]++;
    }
}

/* The scan of n elements: their OR and AND, and the values of nf (1 or
 * 2) counted fields. (What the loop uses is copied to locals: its stores
 * of bytes could alias anything else.) */
FIELDS_INLINE void scan_sized(const uint8_t *src, size_t n, counted_field *cf, unsigned nf,
                              uint64_t *or_out, uint64_t *and_out, unsigned bytes)
{
    const size_t seg = TF_PROG_HUFF_SEGMENT;
    const counted_field c0 = cf[0], c1 = nf > 1 ? cf[1] : cf[0];
    uint64_t o = 0, a = ~(uint64_t)0;
    for (size_t at = 0; at < n; at += seg) {
        const unsigned s = (unsigned)(at / seg) % TF_PROG_HUFF_STREAMS;
        uint32_t(*const h0)[256] = (*c0.hist)[s];
        uint32_t(*const h1)[256] = (*c1.hist)[s];
        const size_t end = n - at < seg ? n : at + seg;
        size_t i = at;
        for (; i + 4 <= end; i += 4) {
            scan_one(src, i, 0, nf, &c0, &c1, h0, h1, &o, &a, bytes);
            scan_one(src, i + 1, 1, nf, &c0, &c1, h0, h1, &o, &a, bytes);
            scan_one(src, i + 2, 2, nf, &c0, &c1, h0, h1, &o, &a, bytes);
            scan_one(src, i + 3, 3, nf, &c0, &c1, h0, h1, &o, &a, bytes);
        }
        for (; i < end; i++)
            scan_one(src, i, 0, nf, &c0, &c1, h0, h1, &o, &a, bytes);
    }
    *or_out = o;
    *and_out = a;
}

FIELDS_INLINE void scan_fields(const uint8_t *src, size_t n, unsigned bytes, counted_field *cf,
                               uint64_t *o, uint64_t *a, unsigned nf)
{
    switch (bytes) {
    case 1: scan_sized(src, n, cf, nf, o, a, 1); break;
    case 2: scan_sized(src, n, cf, nf, o, a, 2); break;
    case 4: scan_sized(src, n, cf, nf, o, a, 4); break;
    default: scan_sized(src, n, cf, nf, o, a, 8); break;
    }
}

/* A pass for one or two counted fields. */
static void scan_pass(const uint8_t *src, size_t n, unsigned bytes, counted_field *cf,
                      unsigned nf, uint64_t *o, uint64_t *a)
{
    if (nf == 1)
        scan_fields(src, n, bytes, cf, o, a, 1);
    else
        scan_fields(src, n, bytes, cf, o, a, 2);
}

#ifdef TF_X86_SIMD
/* The same where BMI2 shifts by a register without tying up CL. */
__attribute__((target("bmi2"))) static void scan_pass_bmi2(const uint8_t *src, size_t n,
                                                           unsigned bytes, counted_field *cf,
                                                           unsigned nf, uint64_t *o,
                                                           uint64_t *a)
{
    if (nf == 1)
        scan_fields(src, n, bytes, cf, o, a, 1);
    else
        scan_fields(src, n, bytes, cf, o, a, 2);
}
#endif

/* One pass over the elements for their OR and AND and the values of the
 * nf counted fields; a pass more for each beyond two. */
static void scan(const uint8_t *src, size_t n, unsigned bytes, counted_field *cf, unsigned nf,
                 uint64_t *o, uint64_t *a)
{
    if (nf == 0) {
        or_and(src, n, bytes, o, a);
        return;
    }
    void (*pass)(const uint8_t *, size_t, unsigned, counted_field *, unsigned, uint64_t *,
                 uint64_t *) = scan_pass;
#ifdef TF_X86_SIMD
    if (tf_simd_level_get() >= TF_SIMD_AVX2) /* AVX2 includes BMI2 */
        pass = scan_pass_bmi2;
#endif
    pass(src, n, bytes, cf, nf < 2 ? nf : 2, o, a);
    for (unsigned f = 2; f < nf; f++) {
        uint64_t o2, a2;
        pass(src, n, bytes, cf + f, 1, &o2, &a2);
    }
}

/* The counts of a counted field's values, by stream. */
static void stream_counts(const stream_hist *h, tf_prog_huff_counts *c)
{
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        for (unsigned v = 0; v < 256; v++)
            c->count[s][v] = (uint64_t)(*h)[s][0][v] + (*h)[s][1][v] + (*h)[s][2][v] +
                             (*h)[s][3][v];
}

/* LSB-first bits to a buffer with 8 bytes of slack: every put stores 8
 * bytes; fewer than 8 bits wait in acc. */
typedef struct {
    uint8_t *p;
    uint64_t acc;
    unsigned count;
} bit_writer;

FIELDS_INLINE void put_bits(bit_writer *w, uint64_t v, unsigned n) /* n <= 64, v < 2^n */
{
    uint64_t low = w->acc | v << w->count;
    uint64_t spill = (v >> 1) >> (63 - w->count); /* the bits past 64, for count + n >= 64 */
    tf_le64_put(w->p, low);
    unsigned total = w->count + n, whole = total >> 3;
    w->p += whole;
    w->acc = whole == 8 ? spill : low >> (8 * whole & 63);
    w->count = total & 7;
}

/* Packing goes by units of elements whose bits fill whole bytes, 8 of
 * them at least: each unit's bits start at a byte of their own, so the
 * units' chains of shifts do not wait for each other. */
static size_t unit_elems(unsigned bits)
{
    return bits >= 8 ? 8 : 8 * (size_t)((8 + bits - 1) / bits);
}

FIELDS_INLINE void pack_scalar(const uint8_t *src, size_t from, size_t n, unsigned shift,
                               unsigned bits, uint8_t *dst, unsigned bytes)
{
    const uint64_t mask = mask_of(bits);
    const size_t unit = unit_elems(bits);
    size_t i = from;
    for (; i + unit <= n; i += unit) {
        bit_writer w = { .p = dst + i / 8 * bits };
        for (size_t k = i; k < i + unit; k++)
            put_bits(&w, tf_le_get(src + k * bytes, bytes) >> shift & mask, bits);
    }
    bit_writer w = { .p = dst + i / 8 * bits };
    for (; i < n; i++)
        put_bits(&w, tf_le_get(src + i * bytes, bytes) >> shift & mask, bits);
    if (w.count)
        *w.p = (uint8_t)w.acc;
}

#ifdef TF_X86_SIMD
/* With BMI2, the field of every element of an 8-byte word in one
 * extraction: the order of its bits is the literal's. Returns how many
 * elements it packed, whole units. */
__attribute__((target("bmi2"))) static size_t pack_bmi2(const uint8_t *src, size_t n,
                                                        unsigned bytes, unsigned shift,
                                                        unsigned bits, uint8_t *dst)
{
    const unsigned per = 8 / bytes;
    uint64_t mask = 0;
    for (unsigned k = 0; k < per; k++)
        mask |= mask_of(bits) << shift << (8 * bytes * k);
    /* as many words' bits as fit 64 gathered for one put */
    const unsigned word_bits = per * bits, group = 64 / word_bits;
    const size_t unit = unit_elems(bits), words = unit / per;
    size_t i = 0;
    for (; i + unit <= n; i += unit) {
        bit_writer w = { .p = dst + i / 8 * bits };
        for (size_t k = 0; k < words; k += group) {
            uint64_t v = 0;
            unsigned g = 0;
            for (; g < group && k + g < words; g++)
                v |= _pext_u64(tf_le64_get(src + (i + (k + g) * per) * bytes), mask)
                     << (g * word_bits);
            put_bits(&w, v, g * word_bits);
        }
    }
    return i;
}
#endif

/* Writes the field of the n elements, `bits` wide (its width, or less
 * where its values fit), to dst: packed_bytes(n, bits) bytes and 8 of
 * slack. */
static void pack_field(const uint8_t *src, size_t n, unsigned bytes, unsigned shift,
                       unsigned bits, uint8_t *dst)
{
    size_t done = 0;
#ifdef TF_X86_SIMD
    if (bytes < 8 && tf_simd_level_get() >= TF_SIMD_AVX2) /* AVX2 includes BMI2 */
        done = pack_bmi2(src, n, bytes, shift, bits, dst);
#endif
    switch (bytes) {
    case 1: pack_scalar(src, done, n, shift, bits, dst, 1); break;
    case 2: pack_scalar(src, done, n, shift, bits, dst, 2); break;
    case 4: pack_scalar(src, done, n, shift, bits, dst, 4); break;
    default: pack_scalar(src, done, n, shift, bits, dst, 8); break;
    }
}

/* ---- choosing each field's literal ---- */

typedef struct {
    const uint8_t *src;
    size_t n;
    unsigned bytes;
    counted_field counted[TF_PROG_MAX_ARITY]; /* of the fields trying entropy codings */
    unsigned n_counted;
    tf_prog_huff_counts counts;
    tf_buf rans; /* a rANS body tried */
} encoder;

/* The cheapest literal of field j (shift, width; its part of the OR
 * `or`; its values in cf when counted, else NULL): into *plan, with the
 * rANS body in enc->rans where the plan is rANS. */
static int plan_field(encoder *enc, const tf_prog_fields *f, unsigned j, uint64_t or,
                      const counted_field *cf, tf_prog_lit_plan *plan, unsigned *n_sym,
                      tf_error *e)
{
    const size_t n = enc->n;
    const unsigned width = f->width[j], pack = bit_length(or);
    *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RAW, .size = 1 + packed_bytes(n, width) };
    if (pack >= 1 && pack < width && 2 + packed_bytes(n, pack) < plan->size)
        *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_PACK, .pack_width = (uint8_t)pack,
                                    .size = 2 + packed_bytes(n, pack) };
    if (!cf)
        return 0;
    stream_counts(cf->hist, &enc->counts);
    *n_sym = (unsigned)or + 1 > (1u << pack) ? 1u << pack : (unsigned)or + 1;
    uint64_t total[256] = { 0 };
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        for (unsigned v = 0; v < *n_sym; v++)
            total[v] += enc->counts.count[s][v];
    while (*n_sym > 1 && !total[*n_sym - 1]) /* the largest value + 1 */
        --*n_sym;
    tf_prog_lit_plan huff, huff4;
    if (tf_prog_huff_plan_counts(&enc->counts, n, *n_sym, &huff, &huff4) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory planning a literal");
    if (tf_prog_lit_cost(&huff, n) < tf_prog_lit_cost(plan, n))
        *plan = huff;
    if (tf_prog_lit_cost(&huff4, n) < tf_prog_lit_cost(plan, n))
        *plan = huff4;
    if (f->tries[j] != TF_PROG_FIELD_SELF)
        return 0;
    tf_prog_lit_plan rans;
    tf_prog_rans_self_plan(total, *n_sym, SELF_WINDOW, SELF_PREC, &rans);
    enc->rans.len = 0;
    if (tf_buf_u8(&enc->rans, TF_PROG_CODE_RANS) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    if (tf_prog_rans_write(cf->sym, n, *n_sym, NULL, &rans, &enc->rans, e) < 0)
        return -1;
    rans.size = enc->rans.len;
    if (tf_prog_lit_cost(&rans, n) < tf_prog_lit_cost(plan, n))
        *plan = rans;
    return 0;
}

/* Appends the literal node of a field (shift, width) under plan. */
static int write_literal(encoder *enc, unsigned shift, unsigned width,
                         const tf_prog_lit_plan *plan, const counted_field *cf, unsigned n_sym,
                         tf_buf *out, tf_error *e)
{
    if (tf_buf_u8(out, TF_PROG_LIT) < 0 || tf_buf_varint(out, plan->size) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    if (plan->coding == TF_PROG_CODE_RANS)
        return tf_buf_put(out, enc->rans.data, enc->rans.len) < 0
                   ? tf_fail(e, ENOMEM, "prog: out of memory for a literal")
                   : 0;
    size_t start = out->len;
    if (tf_buf_u8(out, plan->coding) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    if (plan->coding == TF_PROG_CODE_HUFF || plan->coding == TF_PROG_CODE_HUFF4) {
        if (tf_prog_huff_write_counts(cf->sym, enc->n, n_sym, &enc->counts, plan->coding, out,
                                      e) < 0)
            return -1;
    } else {
        unsigned bits = plan->coding == TF_PROG_CODE_PACK ? plan->pack_width : width;
        if (plan->coding == TF_PROG_CODE_PACK && tf_buf_u8(out, plan->pack_width) < 0)
            return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
        size_t payload = packed_bytes(enc->n, bits);
        uint8_t *p = tf_buf_reserve(out, payload + 8);
        if (!p)
            return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
        pack_field(enc->src, enc->n, enc->bytes, shift, bits, p);
        tf_buf_commit(out, payload);
    }
    if (out->len - start != plan->size)
        return tf_fail(e, EIO, "prog: literal of %zu bytes planned as %zu", out->len - start,
                       plan->size);
    return 0;
}

/* The merge's children: a constant or the cheapest literal each. */
static int write_fields(encoder *enc, const tf_prog_fields *f, const unsigned *shift,
                        uint64_t o, uint64_t differ, tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, TF_PROG_MERGE) | tf_buf_u8(out, (uint8_t)f->n);
    for (unsigned j = 0; j < f->n; j++)
        rc |= tf_buf_u8(out, f->width[j]);
    if (rc)
        return tf_fail(e, ENOMEM, "prog: out of memory for a program");
    const uint64_t a = o & ~differ; /* the constant fields' values */
    for (unsigned j = 0, c = 0; j < f->n && rc == 0; j++) {
        const uint64_t m = mask_of(f->width[j]);
        const counted_field *cf = f->tries[j] != TF_PROG_FIELD_FIXED ? &enc->counted[c++] : NULL;
        if (!(differ >> shift[j] & m)) {
            rc = tf_buf_u8(out, TF_PROG_CONST) | tf_buf_varint(out, a >> shift[j] & m)
                     ? tf_fail(e, ENOMEM, "prog: out of memory for a program")
                     : 0;
            continue;
        }
        tf_prog_lit_plan plan;
        unsigned n_sym = 0;
        rc = plan_field(enc, f, j, o >> shift[j] & m, cf, &plan, &n_sym, e);
        if (rc == 0)
            rc = write_literal(enc, shift[j], f->width[j], &plan, cf, n_sym, out, e);
    }
    return rc;
}

int tf_prog_fields_encode(const uint8_t *src, size_t n, const tf_prog_fields *f, tf_buf *out,
                          tf_error *e)
{
    const unsigned bytes = element_bytes(f->dtype);
    unsigned shift[TF_PROG_MAX_ARITY];
    field_shifts(f, shift);
    encoder *enc = calloc(1, sizeof *enc);
    if (!enc)
        return tf_fail(e, ENOMEM, "prog: out of memory for an encoder");
    *enc = (encoder){ .src = src, .n = n, .bytes = bytes };
    int rc = 0;
    for (unsigned j = 0; j < f->n && rc == 0; j++) {
        if (f->tries[j] == TF_PROG_FIELD_FIXED)
            continue;
        counted_field *cf = &enc->counted[enc->n_counted++];
        *cf = (counted_field){ .shift = shift[j], .mask = (unsigned)mask_of(f->width[j]),
                               .sym = malloc(n), .hist = calloc(1, sizeof *cf->hist) };
        if (!cf->sym || !cf->hist)
            rc = tf_fail(e, ENOMEM, "prog: out of memory for %zu symbols", n);
    }
    /* Room for the program of incompressible bytes: no growing on the way. */
    if (rc == 0 && !tf_buf_reserve(out, n * bytes + 16 + 8 * f->n))
        rc = tf_fail(e, ENOMEM, "prog: out of memory for a program");
    uint64_t o = 0, a = 0;
    if (rc == 0)
        scan(src, n, bytes, enc->counted, enc->n_counted, &o, &a);
    const uint64_t word = mask_of(8 * bytes), differ = (o ^ a) & word;
    if (rc == 0 && !differ) /* every field constant: the chunk is one word n times */
        rc = tf_buf_u8(out, TF_PROG_CONST) | tf_buf_varint(out, a & word)
                 ? tf_fail(e, ENOMEM, "prog: out of memory for a program")
                 : 0;
    else if (rc == 0)
        rc = write_fields(enc, f, shift, o & word, differ, out, e);
    for (unsigned c = 0; c < enc->n_counted; c++) {
        free(enc->counted[c].sym);
        free(enc->counted[c].hist);
    }
    tf_buf_free(&enc->rans);
    free(enc);
    return rc;
}

/* ---- from a sample ---- */

/* A field's values in the sample: their histogram, how many, and the
 * OR and AND of the elements (all fields at once). */
typedef struct {
    uint64_t count[256];
    size_t n;
    uint64_t or, and;
} sample_stats;

static void sample_or_and(const uint8_t *src, size_t n, unsigned bytes, sample_stats *st)
{
    st->or = 0;
    st->and = ~(uint64_t)0;
    for (size_t k = 0; k < tf_sample_runs(n); k++) {
        uint64_t o, a;
        or_and(src + tf_sample_run_start(n, k) * bytes, tf_sample_run_len(n), bytes, &o, &a);
        st->or |= o;
        st->and &= a;
    }
    st->n = tf_sample_len(n);
}

static void sample_histogram(const uint8_t *src, size_t n, unsigned bytes, unsigned shift,
                             unsigned width, sample_stats *st)
{
    memset(st->count, 0, sizeof st->count);
    const uint64_t mask = mask_of(width);
    for (size_t k = 0; k < tf_sample_runs(n); k++) {
        const uint8_t *p = src + tf_sample_run_start(n, k) * bytes;
        for (size_t i = 0; i < tf_sample_run_len(n); i++)
            st->count[tf_le_get(p + i * bytes, bytes) >> shift & mask]++;
    }
}

/* Entropy in bits of the counted values, per value. */
static double entropy_per(const uint64_t *count, unsigned n_sym, size_t n)
{
    return n ? tf_rans_entropy_bits(count, 1, n_sym) / (double)n : 0;
}

/* Bits a word of the sample's field (shift, width) takes under the
 * field's value lag words earlier (runs of the sample only), its
 * contexts those of a rANS plan for its own words; *alone gets the
 * entropy of the same words without contexts. */
static double self_entropy_per(const uint8_t *src, size_t n, unsigned bytes, unsigned shift,
                               unsigned width, const sample_stats *st, double *alone)
{
    tf_prog_lit_plan plan;
    tf_prog_rans_self_plan(st->count, 256, SELF_WINDOW, SELF_PREC, &plan);
    const size_t lag = tf_prog_rans_self_lag(n), rows = (size_t)plan.ctx_count + 1;
    uint64_t *pairs = calloc(rows * 256, sizeof *pairs), totals[256] = { 0 };
    if (!pairs) {
        *alone = 0;
        return 0;
    }
    const uint64_t mask = mask_of(width);
    size_t m = 0;
    for (size_t k = 0; k < tf_sample_runs(n); k++) {
        const uint8_t *p = src + tf_sample_run_start(n, k) * bytes;
        for (size_t i = lag; i < tf_sample_run_len(n); i++, m++) {
            unsigned v = (unsigned)(tf_le_get(p + i * bytes, bytes) >> shift & mask);
            uint64_t c = (tf_le_get(p + (i - lag) * bytes, bytes) >> shift & mask) - plan.ctx_base;
            pairs[(c < plan.ctx_count ? c + 1 : 0) * 256 + v]++;
            totals[v]++;
        }
    }
    double bits = m ? tf_rans_entropy_bits(pairs, rows, 256) / (double)m : 0;
    *alone = entropy_per(totals, 256, m);
    free(pairs);
    return bits;
}

bool tf_prog_fields_choose(const uint8_t *src, size_t n, unsigned dtype, tf_prog_fields *f)
{
    unsigned exp_bits, man_bits;
    if (!tf_prog_ieee_fields(dtype, &exp_bits, &man_bits) || n == 0)
        return false;
    const unsigned bytes = element_bytes(dtype);
    *f = (tf_prog_fields){ .dtype = dtype, .n = 3, .width = { 1, (uint8_t)exp_bits,
                                                              (uint8_t)man_bits },
                           .tries = { TF_PROG_FIELD_FIXED, TF_PROG_FIELD_HUFF,
                                      TF_PROG_FIELD_FIXED } };
    sample_stats st;
    sample_or_and(src, n, bytes, &st);
    /* The exponent: rANS under its neighbours where they predict it. */
    if (exp_bits <= 8 && n >= SELF_MIN) {
        sample_histogram(src, n, bytes, man_bits, exp_bits, &st);
        double alone, self = self_entropy_per(src, n, bytes, man_bits, exp_bits, &st, &alone);
        if (alone - self >= SELF_GAIN_BITS)
            f->tries[1] = TF_PROG_FIELD_SELF;
    }
    if (exp_bits > 8)
        f->tries[1] = TF_PROG_FIELD_FIXED;
    /* A narrow mantissa: Huffman codes where its values are skewed. */
    if (man_bits <= 8) {
        sample_histogram(src, n, bytes, 0, man_bits, &st);
        if (entropy_per(st.count, 256, st.n) <= man_bits - HUFF_GAIN_BITS)
            f->tries[2] = TF_PROG_FIELD_HUFF;
    }
    /* Trailing zero bits of every mantissa (values of a narrower format,
     * widened) are a constant field of their own. */
    uint64_t man_or = st.or & mask_of(man_bits);
    unsigned zeros = man_or ? (unsigned)__builtin_ctzll(man_or) : 0;
    if (zeros > 0) {
        f->n = 4;
        f->width[2] = (uint8_t)(man_bits - zeros);
        f->width[3] = (uint8_t)zeros;
        f->tries[3] = TF_PROG_FIELD_FIXED;
        if (f->width[2] > 8)
            f->tries[2] = TF_PROG_FIELD_FIXED;
    }
    return true;
}

size_t tf_prog_fields_estimate(const uint8_t *src, size_t n, const tf_prog_fields *f)
{
    const unsigned bytes = element_bytes(f->dtype);
    unsigned shift[TF_PROG_MAX_ARITY];
    field_shifts(f, shift);
    sample_stats st;
    sample_or_and(src, n, bytes, &st);
    double bits = 0; /* a word */
    size_t fixed = 4; /* version, the merge's header */
    for (unsigned j = 0; j < f->n; j++) {
        const uint64_t m = mask_of(f->width[j]);
        fixed += 3;
        if (!((st.or ^ st.and) >> shift[j] & m))
            continue;
        unsigned pack = bit_length(st.or >> shift[j] & m);
        if (f->tries[j] == TF_PROG_FIELD_FIXED || pack > 8) {
            bits += pack;
            continue;
        }
        sample_histogram(src, n, bytes, shift[j], f->width[j], &st);
        double alone = entropy_per(st.count, 256, st.n), self = alone;
        if (f->tries[j] == TF_PROG_FIELD_SELF)
            self = self_entropy_per(src, n, bytes, shift[j], f->width[j], &st, &alone);
        bits += self < alone ? self : alone;
        size_t symbols = 0;
        for (unsigned v = 0; v < 256; v++)
            symbols += st.count[v] != 0;
        fixed += 2 + symbols / 2; /* a code table: half a byte a symbol */
    }
    return fixed + (size_t)(bits * (double)n / 8);
}
