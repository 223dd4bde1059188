/* Canonical, length-limited Huffman codes over byte symbols.
 *
 * A code is its list of code lengths (0 for an absent symbol, at most
 * TF_HUFF_MAX_LEN); codes are assigned canonically (shorter first, then
 * by symbol). Bits go LSB first: the encoder's codes come bit-reversed so
 * that the first bit of a code is the lowest bit written, and the decoder
 * looks up TF_HUFF_MAX_LEN peeked bits in one table.
 *
 * Serialized lengths: varint first symbol | varint count | count lengths
 * as 4-bit nibbles, low nibble first, zero-padded to a byte. The first
 * and last listed lengths are positive; the Kraft sum is at most 1. */
#ifndef TRAJFS_CODEC_ENTROPY_HUFFMAN_H
#define TRAJFS_CODEC_ENTROPY_HUFFMAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

#define TF_HUFF_MAX_SYMBOLS 256
#define TF_HUFF_MAX_LEN 12

/* Optimal lengths of at most `limit` bits (<= TF_HUFF_MAX_LEN; raised to
 * what the symbols present need) for the counts of n_sym <= 256 symbols
 * (len[s] = 0 where count[s] = 0; a lone symbol gets length 1). A
 * decoder's table has an entry per pattern of the longest length: a
 * lower limit makes it cheaper to fill. Deterministic. */
void tf_huff_lengths(const uint64_t *count, unsigned n_sym, unsigned limit, uint8_t *len);

/* Bits the code spends on the counted symbols. */
uint64_t tf_huff_cost_bits(const uint64_t *count, const uint8_t *len, unsigned n_sym);

typedef struct {
    uint16_t code[TF_HUFF_MAX_SYMBOLS]; /* bit-reversed, ready for LSB-first output */
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
} tf_huff_encoder;

/* len: n_sym lengths from tf_huff_lengths (or a valid table). */
void tf_huff_encoder_init(tf_huff_encoder *enc, const uint8_t *len, unsigned n_sym);

/* Bytes tf_huff_table_write takes; SIZE_MAX when out of memory. */
size_t tf_huff_table_size(const uint8_t *len, unsigned n_sym);
int tf_huff_table_write(const uint8_t *len, unsigned n_sym, tf_buf *out, tf_error *e);
/* Reads lengths for symbols < max_sym (<= 256) into len[0..max_sym),
 * validating ranges and the Kraft sum. Returns how many symbols the
 * table spans from *first on (the first and the last with a code), or
 * -1. */
int tf_huff_table_read(tf_cursor *r, unsigned max_sym, uint8_t *len, unsigned *first,
                       tf_error *e);

/* Decoding tables, in one allocation sized to them. entry = symbol |
 * length << 8 for every pattern of `bits` bits (read LSB first), bits
 * being the longest code's length (a smaller table to fill for a short
 * code); length 0 marks a pattern no code starts. */
typedef struct {
    unsigned bits;
    uint16_t *entry;
    /* When built (has_multi: there are at least 16 times more codes to
     * read than patterns, which pays for the filling), every pattern of
     * multi_bits bits read as the whole codes it begins with, up to
     * three: symbols 1, 2, 3 in bytes 0, 1, 2 | how many << 24 (2 bits)
     * | their total length << 28 (4 bits). multi_bits follows the codes
     * to read, not the longest code: a pattern whose first code is
     * longer than multi_bits, or that no code starts, is
     * TF_HUFF_MULTI_LONG, for the decoder to look up in entry
     * (tf_huff_long_code). Several symbols a lookup shorten the chain of
     * dependent lookups. */
    bool has_multi;
    unsigned multi_bits;
    uint32_t *multi;
} tf_huff_decoder;

#define TF_HUFF_MULTI_MAX 3
#define TF_HUFF_MULTI_LONG (1u << 27)
/* A pattern no code starts: one symbol 0 of no bits (a decoder moves on,
 * its stream stays on the pattern) and bit 26. */
#define TF_HUFF_MULTI_BAD (1u << 26 | 1u << 24)

/* The multi entry of the one code the low bits of `bits` begin with (a
 * pattern marked TF_HUFF_MULTI_LONG), or TF_HUFF_MULTI_BAD. */
static inline uint32_t tf_huff_long_code(const tf_huff_decoder *dec, uint64_t bits)
{
    uint32_t e = dec->entry[bits & ((1u << dec->bits) - 1)], l = e >> 8;
    return l ? (e & 0xffu) | 1u << 24 | l << 28 : TF_HUFF_MULTI_BAD;
}

/* The decoder of the symbols [first, first + count) of len (the span
 * tf_huff_table_read gives); codes: how many it will read (to size the
 * multi table). free() releases it; NULL when out of memory. */
tf_huff_decoder *tf_huff_decoder_new(const uint8_t *len, unsigned first, unsigned count,
                                     uint64_t codes);

#endif
