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
#ifndef TRAJFS_CODEC_HUFFMAN_H
#define TRAJFS_CODEC_HUFFMAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

#define TF_HUFF_MAX_SYMBOLS 256
#define TF_HUFF_MAX_LEN 12

/* Optimal lengths under the length limit for the counts of n_sym <= 256
 * symbols (len[s] = 0 where count[s] = 0; a lone symbol gets length 1).
 * Deterministic. */
void tf_huff_lengths(const uint64_t *count, unsigned n_sym, uint8_t *len);

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
 * validating ranges and the Kraft sum. */
int tf_huff_table_read(tf_reader *r, unsigned max_sym, uint8_t *len, tf_error *e);

/* Decoding table: entry = symbol | length << 8 for every pattern of
 * `bits` bits (read LSB first), bits being the longest code's length
 * (a smaller table to fill for a short code); length 0 marks a pattern no
 * code starts. */
typedef struct {
    unsigned bits;
    uint16_t entry[1u << TF_HUFF_MAX_LEN];
    /* When built (has_pairs), the same patterns read as the one or two
     * codes they begin with: symbol 1 | symbol 2 << 8 | their total
     * length << 16 | how many (1 or 2; 0 where no code starts) << 24.
     * Decoding two symbols a lookup halves the chain of dependent
     * lookups, which pays for the table on streams of more codes than
     * it has entries. */
    bool has_pairs;
    uint32_t pair[1u << TF_HUFF_MAX_LEN];
} tf_huff_decoder;

/* codes: how many the decoder will read (to choose whether pairs pay). */
void tf_huff_decoder_init(tf_huff_decoder *dec, const uint8_t *len, unsigned n_sym,
                          uint64_t codes);

#endif
