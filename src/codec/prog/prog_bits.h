/* LSB-first bit packing for the literal leaves of prog (fixed-width words
 * and Huffman codes). The writer appends to a tf_buf; the reader (of
 * Huffman codes) is bounded: its refill never reads past the end, and
 * the decoder notes codes longer than the bits left. */
#ifndef TRAJFS_CODEC_PROG_PROG_BITS_H
#define TRAJFS_CODEC_PROG_PROG_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef struct {
    tf_buf *out;
    uint64_t acc;   /* pending bits, the oldest at bit 0 */
    unsigned count; /* how many are pending, < 8 between puts */
    bool oom;
} tf_bit_writer;

/* Appends the low n bits of v (n <= 57). */
static inline void tf_bits_put(tf_bit_writer *w, uint64_t v, unsigned n)
{
    if (n == 0)
        return;
    w->acc |= (v & (((uint64_t)1 << n) - 1)) << w->count;
    w->count += n;
    if (w->count < 8)
        return;
    uint8_t *p = tf_buf_reserve(w->out, 8);
    if (!p) {
        w->oom = true;
        w->count = 0;
        w->acc = 0;
        return;
    }
    unsigned whole = w->count >> 3;
    tf_le64_put(p, w->acc);
    tf_buf_commit(w->out, whole);
    w->acc = whole == 8 ? 0 : w->acc >> (8 * whole);
    w->count &= 7;
}

/* Any width up to 64. */
static inline void tf_bits_put_wide(tf_bit_writer *w, uint64_t v, unsigned n)
{
    if (n > 32) {
        tf_bits_put(w, v, 32);
        v >>= 32;
        n -= 32;
    }
    tf_bits_put(w, v, n);
}

/* Flushes the last partial byte, zero-padded. Returns -1 when out of
 * memory at any point. */
static inline int tf_bits_flush(tf_bit_writer *w)
{
    if (w->count && !w->oom && tf_buf_u8(w->out, (uint8_t)w->acc) < 0)
        w->oom = true;
    w->count = 0;
    w->acc = 0;
    return w->oom ? -1 : 0;
}

typedef struct {
    const uint8_t *p, *end;
    uint64_t acc;
    unsigned count; /* valid bits in acc */
} tf_bit_reader;

static inline tf_bit_reader tf_bit_reader_make(const uint8_t *p, size_t len)
{
    return (tf_bit_reader){ .p = p, .end = p + len };
}

/* Makes at least 57 bits available unless the input ends first. */
static inline void tf_bits_refill(tf_bit_reader *r)
{
    if (r->end - r->p >= 8) {
        uint64_t v = tf_le64_get(r->p);
        r->acc |= v << r->count;
        r->p += (63 - r->count) >> 3;
        r->count |= 56;
        return;
    }
    while (r->count <= 56 && r->p < r->end) {
        r->acc |= (uint64_t)*r->p++ << r->count;
        r->count += 8;
    }
}

/* True when the reader consumed exactly its input: no whole byte left,
 * and the padding bits of the last byte zero (a read past the end is
 * the caller's to note). */
static inline bool tf_bits_exhausted(const tf_bit_reader *r)
{
    return r->p == r->end && r->count < 8 && r->acc == 0;
}

#endif
