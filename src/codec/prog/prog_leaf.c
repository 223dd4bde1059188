/* Literal leaves: the choice among codings, and the two fixed-width ones
 * (RAW and PACK) that need no tables. */
#include "codec/prog/prog_leaf.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_leaf_codings.h"
#include "common/simd.h"

static unsigned bit_length(uint64_t v)
{
    return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

static size_t packed_bytes(size_t n, unsigned bits)
{
    return (size_t)(((uint64_t)n * bits + 7) / 8);
}

unsigned tf_prog_leaf_symbols(const uint64_t *v, size_t n, uint8_t *sym)
{
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        top = v[i] > top ? v[i] : top;
        sym[i] = (uint8_t)v[i];
    }
    return n == 0 || top >= 256 ? 0 : (unsigned)top + 1;
}

/* What decoding n words of a coding costs, in 1/64 bits: a quarter of a
 * bit a nanosecond per word (a file 1.5% larger for a decode twice as
 * fast is a good trade for a mount that decodes on every cold read).
 * Nanoseconds a word measured with bench/prog_bench on bf16 and float32
 * weights, on an AMD EPYC with AVX-512: RAW and PACK about 0.1 (not
 * priced), HUFF4 0.45, HUFF and RANS (one chain of table lookups; rANS
 * with its gather and multiply) 1.2. */
static uint64_t decode_price(unsigned coding, size_t n)
{
    static const uint8_t price[TF_PROG_CODINGS] = {
        [TF_PROG_CODE_HUFF] = 19, [TF_PROG_CODE_RANS] = 19, [TF_PROG_CODE_HUFF4] = 7
    };
    return (uint64_t)n * price[coding];
}

uint64_t tf_prog_lit_cost(const tf_prog_lit_plan *plan, size_t n)
{
    return 64 * 8 * (uint64_t)plan->size + decode_price(plan->coding, n);
}

int tf_prog_lit_plan_best(const uint64_t *v, size_t n, unsigned width,
                          const tf_prog_ctx_source *sources, unsigned n_src,
                          tf_prog_lit_plan *plan, tf_error *e)
{
    *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RAW, .size = 1 + packed_bytes(n, width) };
    uint64_t all = 0;
    for (size_t i = 0; i < n; i++)
        all |= v[i];
    unsigned w = bit_length(all);
    if (w >= 1 && w < width && 2 + packed_bytes(n, w) < plan->size)
        *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_PACK, .pack_width = (uint8_t)w,
                                    .size = 2 + packed_bytes(n, w) };
    if (n == 0 || w > 8)
        return 0;
    uint8_t *sym = malloc(n);
    if (!sym)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu symbols", n);
    unsigned n_sym = tf_prog_leaf_symbols(v, n, sym);
    tf_prog_lit_plan huff = { .size = SIZE_MAX }, huff4 = huff, rans = huff;
    int rc = tf_prog_huff_plan(sym, n, n_sym, &huff, &huff4);
    /* the cheapest: exact bits plus the decoding's price; rANS last, for
     * it need not encode what could not beat the others */
    uint64_t best = tf_prog_lit_cost(plan, n);
    const tf_prog_lit_plan *huffman[] = { &huff, &huff4 };
    for (unsigned k = 0; rc == 0 && k < 2; k++)
        if (tf_prog_lit_cost(huffman[k], n) < best) {
            best = tf_prog_lit_cost(huffman[k], n);
            *plan = *huffman[k];
        }
    const uint64_t price = decode_price(TF_PROG_CODE_RANS, n);
    const uint64_t below = best > price ? (best - price) / (64 * 8) : 0;
    if (rc == 0)
        rc = tf_prog_rans_plan(sym, n, n_sym, sources, n_src, (size_t)below, &rans, e);
    free(sym);
    if (rc < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory planning a literal");
    if (rans.size != SIZE_MAX && tf_prog_lit_cost(&rans, n) < best)
        *plan = rans;
    return 0;
}

static int write_fixed(const uint64_t *v, size_t n, unsigned bits, tf_buf *out, tf_error *e)
{
    tf_bit_writer w = { .out = out };
    for (size_t i = 0; i < n; i++)
        tf_bits_put_wide(&w, v[i], bits);
    return tf_bits_flush(&w) < 0 ? tf_fail(e, ENOMEM, "prog: out of memory for a literal") : 0;
}

int tf_prog_lit_write(const uint64_t *v, size_t n, unsigned width,
                      const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                      tf_buf *out, tf_error *e)
{
    if (tf_buf_u8(out, plan->coding) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    switch (plan->coding) {
    case TF_PROG_CODE_RAW: return write_fixed(v, n, width, out, e);
    case TF_PROG_CODE_PACK:
        if (tf_buf_u8(out, plan->pack_width) < 0)
            return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
        return write_fixed(v, n, plan->pack_width, out, e);
    default: break;
    }
    uint8_t *sym = malloc(n ? n : 1);
    if (!sym)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu symbols", n);
    unsigned n_sym = tf_prog_leaf_symbols(v, n, sym);
    int rc = plan->coding != TF_PROG_CODE_RANS
                 ? tf_prog_huff_write(sym, n, n_sym, plan->coding, out, e)
                 : tf_prog_rans_write(sym, n, n_sym, sources, plan, out, e);
    free(sym);
    return rc;
}

/* ---- decoding ---- */

/* For words of bits <= 7 bits whose first lies at bit `offset` of its
 * byte: for each of 64 words, the byte its 64-bit lane starts at (those
 * of its group of 8 words; plan[0], as a byte permutation) and its first
 * bit in that lane (plan[1]). */
static void spread_plan(unsigned bits, unsigned offset, uint8_t plan[2][64])
{
    for (unsigned k = 0; k < 64; k++) {
        unsigned lane = (8 * (k / 8) * bits + offset) / 8;
        plan[0][k] = (uint8_t)(lane + k % 8);
        plan[1][k] = (uint8_t)(k * bits + offset - 8 * lane);
    }
}

/* RAW and PACK: the payload must be exactly n words of `bits` bits. */
static int open_fixed(tf_prog_lit_reader *r, tf_cursor *in, unsigned bits, tf_error *e)
{
    size_t need = packed_bytes((size_t)r->n, bits);
    if (tf_cursor_left(in) != need)
        return tf_fail(e, EIO, "prog: literal of %llu words of %u bits has %zu bytes, not %zu",
                       (unsigned long long)r->n, bits, tf_cursor_left(in), need);
    r->pack_width = bits;
    r->fixed = tf_read_bytes(in, need);
    r->fixed_len = need;
    if (bits <= 7)
        spread_plan(bits, 0, r->spread);
    return 0;
}

int tf_prog_lit_open(tf_prog_lit_reader *r, const uint8_t *body, size_t len, unsigned width,
                     uint64_t n, const tf_prog_siblings *siblings, tf_error *e)
{
    memset(r, 0, offsetof(tf_prog_lit_reader, spread)); /* the rest is the coding's */
    r->width = width;
    r->n = n;
    r->simd = tf_simd_level_get();
    tf_cursor in = tf_cursor_make(body, len);
    r->coding = tf_read_u8(&in);
    if (in.bad)
        return tf_fail(e, EIO, "prog: empty literal");
    bool entropy = r->coding >= TF_PROG_CODE_HUFF && r->coding < TF_PROG_CODINGS;
    if (entropy && n == 0)
        return tf_fail(e, EIO, "prog: entropy-coded literal of no words");
    switch (r->coding) {
    case TF_PROG_CODE_RAW: return open_fixed(r, &in, width, e);
    case TF_PROG_CODE_PACK: {
        unsigned w = tf_read_u8(&in);
        if (in.bad || w < 1 || w >= width)
            return tf_fail(e, EIO, "prog: packed literal of width %u in %u bits", w, width);
        return open_fixed(r, &in, w, e);
    }
    case TF_PROG_CODE_HUFF:
    case TF_PROG_CODE_HUFF4: return tf_prog_huff_open(r, &in, e);
    case TF_PROG_CODE_RANS: return tf_prog_rans_open(r, &in, siblings, e);
    }
    return tf_fail(e, EIO, "prog: unknown literal coding %u", r->coding);
}

int tf_prog_lit_open_node(tf_prog_lit_reader *r, const tf_prog *p, unsigned i, tf_error *e)
{
    const tf_prog_node *k = &p->node[i];
    tf_prog_siblings sib = { 0 };
    if (i != 0 && p->node[k->parent].op == TF_PROG_MERGE)
        for (; sib.count < k->pos; sib.count++)
            sib.width[sib.count] = p->node[p->node[k->parent].kid0 + sib.count].width;
    return tf_prog_lit_open(r, k->body, k->body_len, k->width, k->n, &sib, e);
}

bool tf_prog_lit_narrow(const tf_prog_lit_reader *r)
{
    bool fixed = r->coding == TF_PROG_CODE_RAW || r->coding == TF_PROG_CODE_PACK;
    return !fixed || r->pack_width <= 32;
}

/* Bits [bit, bit + bits) of the payload (bits <= 57), LSB first, from
 * one unaligned load where 8 bytes are left, else byte by byte. Never
 * reads past the payload. */
static inline uint64_t fixed_get(const uint8_t *p, size_t len, uint64_t bit, unsigned bits)
{
    size_t at = (size_t)(bit >> 3);
    unsigned shift = (unsigned)(bit & 7);
    uint64_t v = 0;
    if (at <= len && len - at >= 8) {
        v = tf_le64_get(p + at) >> shift;
    } else {
        for (unsigned k = 0; at + k < len && 8 * k < shift + bits; k++)
            v |= (uint64_t)p[at + k] << (8 * k);
        v >>= shift;
    }
    return v & tf_prog_mask(bits);
}

#ifdef TF_X86_SIMD
/* Words of bits < 32 bits from bit `first` on, LANES at a time while the
 * 4 * LANES bytes from the first one's byte lie in the payload; returns
 * how many. Lane k's word starts at bit o = k * bits + first % 8 of those
 * bytes and ends in their 32-bit words o / 32 and o / 32 + 1 (the second
 * one within them too: LANES * bits + 7 <= 32 * LANES). A step is
 * LANES * bits whole bytes, so o, and what follows from it, is the same
 * every step. One body for AVX2 (8 lanes) and AVX-512 (16): V(op) names
 * an intrinsic of the width, SI its suffix for whole registers. */
#define UNPACK_WORDS(name, target_isa, LANES, VEC, V, SI, IOTA, PERM)                          \
    __attribute__((target(target_isa))) static size_t name(                                  \
        const uint8_t *p, size_t len, uint64_t first, unsigned bits, uint32_t *out, size_t count) \
    {                                                                                         \
        const VEC off = V(add_epi32)(V(mullo_epi32)(IOTA, V(set1_epi32)((int)bits)),          \
                                     V(set1_epi32)((int)(first & 7)));                        \
        const VEC word = V(srli_epi32)(off, 5), next = V(add_epi32)(word, V(set1_epi32)(1));  \
        const VEC shift = V(and_##SI)(off, V(set1_epi32)(31));                                \
        const VEC back = V(sub_epi32)(V(set1_epi32)(32), shift);                              \
        const VEC mask = V(set1_epi32)((int)((1u << bits) - 1));                              \
        size_t i = 0;                                                                         \
        for (uint64_t bit = first; count - i >= LANES && len - (bit >> 3) >= 4 * LANES;       \
             i += LANES, bit += LANES * (uint64_t)bits) {                                     \
            VEC data = V(loadu_##SI)((const void *)(p + (bit >> 3)));                         \
            VEC v = V(or_##SI)(V(srlv_epi32)(PERM(data, word), shift),                        \
                               V(sllv_epi32)(PERM(data, next), back));                        \
            V(storeu_##SI)((void *)(out + i), V(and_##SI)(v, mask));                          \
        }                                                                                     \
        return i;                                                                             \
    }
#define V256(op) _mm256_##op
#define V512(op) _mm512_##op
#define PERM256(data, index) _mm256_permutevar8x32_epi32(data, index)
#define PERM512(data, index) _mm512_permutexvar_epi32(index, data)
UNPACK_WORDS(avx2_unpack, "avx2", 8, __m256i, V256, si256,
             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), PERM256)
UNPACK_WORDS(avx512_unpack, "avx512f", 16, __m512i, V512, si512,
             _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), PERM512)

/* Words of bits <= 7 bits into bytes, eight a step: the 8 * bits bits
 * of a step deposited one word a byte (BMI2); returns how many. */
__attribute__((target("avx2,bmi2"))) static size_t bmi2_unpack_bytes(const uint8_t *p, size_t len,
                                                                     uint64_t first, unsigned bits,
                                                                     uint8_t *out, size_t count)
{
    const uint64_t spread = 0x0101010101010101ull * ((1u << bits) - 1);
    size_t i = 0;
    for (uint64_t bit = first; count - i >= 8 && len - (bit >> 3) >= 8;
         i += 8, bit += 8 * (uint64_t)bits) {
        uint64_t v = _pdep_u64(tf_le64_get(p + (bit >> 3)) >> (bit & 7), spread);
        memcpy(out + i, &v, 8);
    }
    return i;
}

/* Words of bits <= 7 bits into bytes, 64 a step: their 64 * bits bits
 * (at most 57 bytes from the first word's byte) permuted so that each
 * group of 8 words lies in one 64-bit lane, and each word's bits then
 * picked out to a byte of its own (VBMI); returns how many. The
 * first word's bit offset in its byte is the same every step (a step is
 * 8 * bits whole bytes), so the permutation and the shifts are too
 * (tf_prog_lit_reader.spread, for an offset of 0). */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static size_t
avx512_unpack_bytes(const uint8_t *p, size_t len, uint64_t first, unsigned bits, uint8_t *out,
                    size_t count, const uint8_t (*spread)[64])
{
    uint8_t local[2][64];
    if (first & 7) {
        spread_plan(bits, (unsigned)(first & 7), local);
        spread = local;
    }
    const __m512i by = _mm512_loadu_si512(spread[0]), at = _mm512_loadu_si512(spread[1]);
    const __m512i mask = _mm512_set1_epi8((char)((1u << bits) - 1));
    size_t i = 0;
    for (uint64_t bit = first; count - i >= 64 && len - (bit >> 3) >= 64;
         i += 64, bit += 64 * (uint64_t)bits) {
        __m512i lanes = _mm512_permutexvar_epi8(by, _mm512_loadu_si512(p + (bit >> 3)));
        _mm512_storeu_si512(out + i,
                            _mm512_and_si512(_mm512_multishift_epi64_epi8(at, lanes), mask));
    }
    return i;
}
#endif

static inline __attribute__((always_inline)) void store_word(void *out, unsigned size,
                                                             size_t at, uint64_t v)
{
    if (size == 1)
        ((uint8_t *)out)[at] = (uint8_t)v;
    else
        ((uint32_t *)out)[at] = (uint32_t)v;
}

/* Words i.. of count of the payload from bit `first` on, stored in `out`
 * as elements of `size` bytes (1 or 4, a constant once inlined). Each
 * load of 8 bytes serves the `per` words wholly in its 57 bits past the
 * bit offset; the last words of the payload, which may lie in fewer than
 * 8 bytes, go one by one. */
static inline __attribute__((always_inline)) void
unpack_scalar(const uint8_t *p, size_t len, uint64_t first, unsigned bits, void *out,
              unsigned size, size_t i, size_t count)
{
    const unsigned per = 57 / bits;
    const uint64_t mask = tf_prog_mask(bits);
    for (uint64_t bit = first + (uint64_t)i * bits;
         count - i >= per && len - (bit >> 3) >= 8; i += per, bit += (uint64_t)per * bits) {
        uint64_t v = tf_le64_get(p + (bit >> 3)) >> (bit & 7);
        for (unsigned k = 0; k < per; k++)
            store_word(out, size, i + k, v >> (k * bits) & mask);
    }
    for (; i < count; i++)
        store_word(out, size, i, fixed_get(p, len, first + (uint64_t)i * bits, bits));
}

/* The next RAW or PACK words of at most 8 bits, as bytes. */
static void read_fixed8(const tf_prog_lit_reader *r, uint8_t *out, size_t count)
{
    const unsigned bits = r->pack_width;
    const uint8_t *p = r->fixed;
    const uint64_t first = r->done * bits;
    if (bits == 8) {
        memcpy(out, p + r->done, count);
        return;
    }
    size_t i = 0;
#ifdef TF_X86_SIMD
    if (r->simd >= TF_SIMD_AVX512)
        i = avx512_unpack_bytes(p, r->fixed_len, first, bits, out, count, r->spread);
    if (r->simd >= TF_SIMD_AVX2)
        i += bmi2_unpack_bytes(p, r->fixed_len, first + i * bits, bits, out + i, count - i);
#endif
    unpack_scalar(p, r->fixed_len, first, bits, out, 1, i, count);
}

/* The next RAW or PACK words of 9 to 32 bits. open_fixed sized the
 * payload for exactly n words, and the caller never asks for more. */
static void read_fixed32(const tf_prog_lit_reader *r, uint32_t *out, size_t count)
{
    const unsigned bits = r->pack_width;
    const uint8_t *p = r->fixed;
    const uint64_t first = r->done * bits;
    switch (bits) { /* whole bytes: straight loads */
    case 16:
        for (size_t i = 0; i < count; i++)
            out[i] = tf_le16_get(p + 2 * (r->done + i));
        return;
    case 32:
        for (size_t i = 0; i < count; i++)
            out[i] = tf_le32_get(p + 4 * (r->done + i));
        return;
    }
    size_t i = 0;
#ifdef TF_X86_SIMD
    if (r->simd >= TF_SIMD_AVX2)
        i = (r->simd >= TF_SIMD_AVX512 ? avx512_unpack : avx2_unpack)(p, r->fixed_len, first,
                                                                       bits, out, count);
#endif
    unpack_scalar(p, r->fixed_len, first, bits, out, 4, i, count);
}

/* RAW and PACK words of more than 32 bits, in two halves. */
static void read_fixed_wide(const tf_prog_lit_reader *r, uint64_t *out, size_t count)
{
    const unsigned bits = r->pack_width;
    for (size_t i = 0; i < count; i++) {
        uint64_t bit = (r->done + i) * bits;
        out[i] = fixed_get(r->fixed, r->fixed_len, bit, 32) |
                 fixed_get(r->fixed, r->fixed_len, bit + 32, bits - 32) << 32;
    }
}

/* A caller bug, never a read past the payload. */
static bool read_too_far(tf_prog_lit_reader *r, size_t count)
{
    if (count <= r->n - r->done)
        return false;
    r->bad = true;
    return true;
}

bool tf_prog_lit_bytes(const tf_prog_lit_reader *r)
{
    bool fixed = r->coding == TF_PROG_CODE_RAW || r->coding == TF_PROG_CODE_PACK;
    return !fixed || r->pack_width <= 8; /* the entropy codings' symbols are bytes */
}

/* Words a piece when one width of words is read through another: the
 * executor's block, so that a four-stream Huffman literal pulled by the
 * general executor still decodes whole turns of its streams. */
#define PIECE 1024

void tf_prog_lit_read8(tf_prog_lit_reader *r, uint8_t *out, size_t count,
                       const uint32_t *ctx_words)
{
    if (read_too_far(r, count) || !tf_prog_lit_bytes(r)) {
        r->bad = true;
        memset(out, 0, count);
        return;
    }
    if (r->coding == TF_PROG_CODE_RANS) { /* its decoder goes from r->done */
        for (size_t at = 0; at < count; at += PIECE) {
            uint32_t word[PIECE];
            size_t take = count - at < PIECE ? count - at : PIECE;
            tf_prog_rans_read(r, word, take, ctx_words ? ctx_words + at : NULL);
            for (size_t i = 0; i < take; i++)
                out[at + i] = (uint8_t)word[i];
            r->done += take;
        }
        return;
    }
    if (r->coding == TF_PROG_CODE_HUFF || r->coding == TF_PROG_CODE_HUFF4)
        tf_prog_huff_read(r, out, count);
    else
        read_fixed8(r, out, count);
    r->done += count;
}

void tf_prog_lit_read32(tf_prog_lit_reader *r, uint32_t *out, size_t count,
                        const uint32_t *ctx_words)
{
    if (read_too_far(r, count) || !tf_prog_lit_narrow(r)) {
        r->bad = true;
        memset(out, 0, count * sizeof *out);
        return;
    }
    if (r->coding == TF_PROG_CODE_RANS) {
        tf_prog_rans_read(r, out, count, ctx_words);
        r->done += count;
    } else if (tf_prog_lit_bytes(r)) {
        for (size_t at = 0; at < count; at += PIECE) {
            uint8_t byte[PIECE];
            size_t take = count - at < PIECE ? count - at : PIECE;
            tf_prog_lit_read8(r, byte, take, NULL);
            for (size_t i = 0; i < take; i++)
                out[at + i] = byte[i];
        }
    } else {
        read_fixed32(r, out, count);
        r->done += count;
    }
}

void tf_prog_lit_read(tf_prog_lit_reader *r, uint64_t *out, size_t count,
                      const uint64_t *ctx_words)
{
    if (!tf_prog_lit_narrow(r)) {
        if (read_too_far(r, count)) {
            memset(out, 0, count * sizeof *out);
            return;
        }
        read_fixed_wide(r, out, count);
        r->done += count;
        return;
    }
    uint32_t word[PIECE], ctx[PIECE];
    for (size_t at = 0; at < count; at += PIECE) {
        size_t take = count - at < PIECE ? count - at : PIECE;
        /* a source is at most 16 bits wide (tf_prog_rans_open) */
        for (size_t i = 0; ctx_words && i < take; i++)
            ctx[i] = (uint32_t)ctx_words[at + i];
        tf_prog_lit_read32(r, word, take, ctx_words ? ctx : NULL);
        for (size_t i = 0; i < take; i++)
            out[at + i] = word[i];
    }
}

int tf_prog_lit_finish(const tf_prog_lit_reader *r, tf_error *e)
{
    if (r->bad)
        return tf_fail(e, EIO, "prog: literal payload is corrupt or truncated");
    for (unsigned st = 0; r->coding == TF_PROG_CODE_RANS && st < r->n_streams; st++)
        if (tf_rans_stream_close(&r->stream[st], e) < 0)
            return -1;
    if (r->coding == TF_PROG_CODE_RANS)
        return 0;
    if (r->coding == TF_PROG_CODE_HUFF || r->coding == TF_PROG_CODE_HUFF4)
        return tf_prog_huff_exhausted(r)
                   ? 0 : tf_fail(e, EIO, "prog: literal payload has trailing data");
    /* RAW, PACK: the size was exact; the padding bits must be zero */
    uint64_t used = r->n * r->pack_width;
    bool clean = used % 8 == 0 || r->fixed[r->fixed_len - 1] >> (used % 8) == 0;
    return clean ? 0 : tf_fail(e, EIO, "prog: literal payload has trailing data");
}

void tf_prog_lit_close(tf_prog_lit_reader *r)
{
    free(r->huff);
    free(r->slots);
    tf_rans_table_free(&r->table);
    r->huff = NULL;
    r->slots = NULL;
}
