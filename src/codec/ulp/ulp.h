/* ulp: ULPack (papers/ulpack.txt), a delta of a float chunk against the
 * same chunk of the reference (parent) checkpoint.
 *
 * Per element, with w the element width in bits:
 *   key(u)  = u with the sign bit flipped when u is non-negative, all bits
 *             complemented when negative (monotone in the value)
 *   d       = key(x) - key(r) mod 2^w, read as a w-bit two's complement
 *   z       = ZigZag(d): 0, -1, 1, -2, ... -> 0, 1, 2, 3, ...
 *   b       = bit length of z; q1, q2 = the two bits below its leading
 *             one when present; the b - 3 bits below them are raw.
 * (b, q1, q2) is coded as one rANS symbol under the context e_r, the
 * exponent field of the reference element: P(b,q1,q2|e_r) is the paper's
 * model P(b|e_r) P(q1|b,e_r) P(q2|b,q1,e_r), with one decode per element
 * instead of up to three. The symbol is z itself when b <= 2, else
 * 4 (b - 2) + 2 q1 + q2: 4 (w - 1) symbols in all. (Measured on a BF16
 * trajectory: same code length within 0.03%, half the table bytes, 3.5x
 * faster rANS decoding than three separate streams.)
 *
 * fit() sees the whole tensor and its reference and writes the model:
 *   u8 version (2; 1 in release 1, still decoded) | u8 dtype | rANS table
 *   (contexts: 2^exp_bits; rows only for exponents the reference has)
 * A chunk is:
 *   rANS streams of the symbols (rans.h; 16 lanes, 1 for chunks under
 *   2048 elements) | raw bits, LSB first, element by element, zero-padded
 *   to a byte (their count follows from the symbols)
 * With a version 2 model, a chunk of at least 2^15 elements has two
 * streams that take turns by rounds of their lanes L: element i is
 * symbol i of the chunk, on stream (i / L) mod 2, lane i mod L (stream
 * 0 holds elements 0..15, 32..47, ...); smaller chunks, and every chunk
 * of a version 1 model, have one stream. Two streams give the decoder
 * twice the independent rANS states to overlap (ulp_format.h).
 * Chunks are independent: each decodes from itself, the model and the
 * reference chunk, and its bytes depend on nothing else.
 *
 * BF16, F16, F32, F64, F8_E4M3 and F8_E5M2; every bit pattern (signed
 * zeros, subnormals, infinities, NaN payloads) round-trips exactly. */
#ifndef TRAJFS_CODEC_ULP_ULP_H
#define TRAJFS_CODEC_ULP_ULP_H

#include <stdint.h>

#include "codec/codec.h"
#include "codec/entropy/rans.h"

extern const tf_codec tf_codec_ulp;

/* The rANS table of ctx->model, read and checked as decoding a chunk of
 * len bytes against ctx->ref does (for measurement tools). The caller
 * frees *t with tf_rans_table_free. */
int tf_ulp_read_model(const tf_codec_ctx *ctx, size_t len, tf_rans_table *t, tf_error *e);

/* The transform, exposed for measurement tools and tests. Values are
 * w-bit patterns in the low bits of a uint64_t, w = width. */
static inline uint64_t tf_ulp_mask(unsigned width)
{
    return width >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << width) - 1;
}

/* Bits above the low w of the result are not defined: callers mask. */
static inline uint64_t tf_ulp_key_unmasked(uint64_t u, unsigned width)
{
    uint64_t top = (uint64_t)1 << (width - 1), negative = u >> (width - 1);
    return u ^ (top | (0 - negative));
}

static inline uint64_t tf_ulp_key(uint64_t u, unsigned width)
{
    return tf_ulp_key_unmasked(u, width) & tf_ulp_mask(width);
}

static inline uint64_t tf_ulp_unkey(uint64_t k, unsigned width)
{
    uint64_t top = (uint64_t)1 << (width - 1), non_negative = k >> (width - 1);
    return (k ^ (top | (non_negative - 1))) & tf_ulp_mask(width);
}

static inline uint64_t tf_ulp_residual(uint64_t x, uint64_t r, unsigned width)
{
    uint64_t d = (tf_ulp_key_unmasked(x, width) - tf_ulp_key_unmasked(r, width)) &
                 tf_ulp_mask(width);
    uint64_t negative = d >> (width - 1);
    return ((d << 1) ^ (0 - negative)) & tf_ulp_mask(width);
}

/* Only the low w bits of the sum matter, so it is masked once. */
static inline uint64_t tf_ulp_unresidual(uint64_t z, uint64_t r, unsigned width)
{
    uint64_t d = (z >> 1) ^ (0 - (z & 1));
    return tf_ulp_unkey((tf_ulp_key_unmasked(r, width) + d) & tf_ulp_mask(width), width);
}

/* Branch-free: z == 0 is common and unpredictable. */
static inline unsigned tf_ulp_bitlen(uint64_t z)
{
    return (z != 0) + 63 - (unsigned)__builtin_clzll(z | 1);
}

/* The symbol of residual z; *n_raw gets the number of raw bits below it
 * (the low *n_raw bits of z). */
static inline unsigned tf_ulp_symbol(uint64_t z, unsigned *n_raw)
{
    unsigned b = tf_ulp_bitlen(z);
    unsigned raw = b > 3 ? b - 3 : 0;
    *n_raw = raw;
    return 4 * (b > 2 ? b - 2 : 0) + (unsigned)(z >> raw & 3);
}

/* Inverse of tf_ulp_symbol: z without its raw bits, shifted down. */
static inline uint64_t tf_ulp_symbol_lead(unsigned sym, unsigned *n_raw)
{
    unsigned high = sym >> 2, long_residual = high != 0;
    *n_raw = high - long_residual;
    return (sym & 3) | long_residual << 2;
}

static inline unsigned tf_ulp_symbol_count(unsigned width)
{
    return 4 * (width - 1);
}

#endif
