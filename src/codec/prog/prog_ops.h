/* The reversible word operators of prog, in both directions: the
 * executor composes (G in the paper), the synthesizer decomposes (D) a
 * target into what a child must produce. Words are b-bit values in the
 * low bits of a uint64_t; results are masked to b bits. */
#ifndef TRAJFS_CODEC_PROG_PROG_OPS_H
#define TRAJFS_CODEC_PROG_PROG_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_ast.h"

static inline uint64_t tf_prog_zigzag_decode(uint64_t v, unsigned width)
{
    return ((v >> 1) ^ (0 - (v & 1))) & tf_prog_mask(width);
}

static inline uint64_t tf_prog_zigzag_encode(uint64_t v, unsigned width)
{
    uint64_t negative = v >> (width - 1) & 1;
    return ((v << 1) ^ (0 - negative)) & tf_prog_mask(width);
}

static inline uint64_t tf_prog_gray_decode(uint64_t v)
{
    for (unsigned s = 1; s < 64; s <<= 1)
        v ^= v >> s;
    return v;
}

static inline uint64_t tf_prog_bitrev(uint64_t v, unsigned width)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    v = __builtin_bswap64(v);
    return v >> (64 - width);
}

static inline uint64_t tf_prog_rotl(uint64_t v, unsigned r, unsigned width)
{
    return ((v << r) | (v >> (width - r))) & tf_prog_mask(width);
}

/* u of map(kind, param) on n words in place (the executor's direction). */
void tf_prog_map_apply(unsigned kind, uint64_t param, unsigned width, uint64_t *v, size_t n);
/* u^-1 on n words, src to dst (the synthesizer's direction). */
void tf_prog_map_invert(unsigned kind, uint64_t param, unsigned width, const uint64_t *src,
                        uint64_t *dst, size_t n);

/* Scan: out[i] = q(prev, upd[i]) with prev = *carry before the first;
 * *carry ends as the last output. */
void tf_prog_scan_apply(unsigned kind, unsigned width, uint64_t *carry, const uint64_t *upd,
                        uint64_t *out, size_t n);
/* The n - 1 updates that rebuild x[0..n) from v0 = x[0]. */
void tf_prog_scan_invert(unsigned kind, unsigned width, const uint64_t *x, uint64_t *upd,
                         size_t n);
/* Lagged scan of lag m (kind XOR_LAG or ADD_LAG): out[i] = q(ring[at],
 * upd[i]), which then replaces ring[at], at stepping round the m words of
 * the ring (the words m back; zeros before the first m words, since
 * q(0, p) = p). *at ends where the next word goes. */
void tf_prog_scan_lag_apply(unsigned kind, unsigned width, uint64_t *ring, uint64_t m,
                            uint64_t *at, const uint64_t *upd, uint64_t *out, size_t n);
/* The n updates that rebuild x[0..n) by the lagged scan of lag m. */
void tf_prog_scan_lag_invert(unsigned kind, unsigned width, uint64_t m, const uint64_t *x,
                             uint64_t *upd, size_t n);

/* Merge: out[i] |= field[i] << shift for one child (out starts zeroed). */
void tf_prog_merge_field(const uint64_t *restrict field, unsigned shift, uint64_t *restrict out,
                         size_t n);
/* The field of `bits` bits at `shift` of each word. */
void tf_prog_split_field(const uint64_t *x, unsigned shift, unsigned bits, uint64_t *field,
                         size_t n);

/* Elements of `bytes` bytes, little-endian, to words and back. */
void tf_prog_words_load(const uint8_t *src, size_t n, unsigned bytes, uint64_t *v);
void tf_prog_words_store(const uint64_t *v, size_t n, unsigned bytes, uint8_t *dst);

#endif
