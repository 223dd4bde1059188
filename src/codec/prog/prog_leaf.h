/* Literal leaves of prog: n words of b bits in the physical coding of
 * least cost: its exact size (paper §2.2, "Physical literal coding") plus
 * a price on the time its decoding takes (prog_leaf.c, lit_cost), which
 * trades up to about 1% of size for a decoder two to three times faster.
 *
 * The body of a literal (its length is stored by the program around it):
 *   u8 coding, then
 *   RAW   n * b bits, LSB first, zero-padded to a byte
 *   PACK  u8 w (1 <= w < b) | n * w bits: every word is below 2^w
 *   HUFF  Huffman lengths (huffman.h) over symbols < min(256, 2^b) |
 *         the codes, LSB first, zero-padded
 *   HUFF4 Huffman lengths as HUFF | varint bytes of streams 0, 1, 2 |
 *         streams 0..3, each as HUFF's codes: word i is coded in stream
 *         (i / TF_PROG_HUFF_SEGMENT) mod 4, so a decoder runs four
 *         independent chains of lookups over each turn of 4 segments
 *   RANS  u8 context source (0: none; 1 + j: the words of sibling j of the
 *         parent merge, decoded before this leaf; 255: this literal's own
 *         word a turn earlier, word i - L for the L = streams x lanes of
 *         its rANS streams, words 0..L-1 being under context 0) | when a
 *         source:
 *         varint base, u8 count (1..64): a source word v is context
 *         1 + v - base when v - base < count, else context 0 |
 *         varint n_sym (1..min(256, 2^b)) | rANS table (rans.h) over
 *         1 or count + 1 contexts | the rANS streams of the n symbols:
 *         one, or for n >= 2^17 two of 16 lanes each that take turns by
 *         rounds of 16 symbols (rans.h, tf_rans_decode_rows);
 *         a source sibling is at most 16 bits wide, base below 2^width
 *         (of the sibling; for its own words, below 2^min(width, 8))
 * Every part must be consumed exactly. */
#ifndef TRAJFS_CODEC_PROG_PROG_LEAF_H
#define TRAJFS_CODEC_PROG_PROG_LEAF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/entropy/huffman.h"
#include "codec/entropy/rans.h"
#include "codec/prog/prog_ast.h"
#include "codec/prog/prog_bits.h"
#include "common/buf.h"
#include "common/error.h"

#define TF_PROG_HUFF_STREAMS 4
#define TF_PROG_HUFF_SEGMENT 256

/* The words of an earlier sibling, a possible source of contexts. */
typedef struct {
    const uint64_t *v; /* n words; NULL when this sibling cannot serve */
    unsigned width;
} tf_prog_ctx_source;

/* The context source byte of a rANS literal that takes its contexts from
 * its own words, each from the word a turn of its streams earlier. */
#define TF_PROG_CTX_SELF 255
/* The longest turn of rANS streams: how far back such a context looks. */
#define TF_PROG_SELF_MAX (TF_RANS_MAX_STREAMS * TF_RANS_MAX_LANES)

/* How to code one literal, and what that costs. */
typedef struct {
    uint8_t coding;      /* tf_prog_coding */
    uint8_t pack_width;  /* PACK */
    uint8_t prec;        /* RANS */
    uint8_t ctx_sibling; /* RANS: 0 or 1 + j */
    bool ctx_self;       /* RANS: the source is the literal's own words */
    uint8_t ctx_count;   /* RANS with a source */
    uint64_t ctx_base;
    size_t size;         /* exact bytes of the body */
} tf_prog_lit_plan;

/* What a plan of n words costs, in 1/64 bits: its exact size, and a
 * price on the time its decoding takes (prog_leaf.c). The cheapest
 * plan is the one chosen. */
uint64_t tf_prog_lit_cost(const tf_prog_lit_plan *plan, size_t n);

/* The cheapest coding of v[0..n) (width bits each: exact size plus the
 * decoding's price), trying contexts from the n_src sources (sources[j]
 * is sibling j). */
int tf_prog_lit_plan_best(const uint64_t *v, size_t n, unsigned width,
                          const tf_prog_ctx_source *sources, unsigned n_src,
                          tf_prog_lit_plan *plan, tf_error *e);

/* Appends the body that plan describes. */
int tf_prog_lit_write(const uint64_t *v, size_t n, unsigned width,
                      const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                      tf_buf *out, tf_error *e);

/* The earlier siblings (in a merge) a literal may take contexts from. */
typedef struct {
    unsigned count;
    uint8_t width[TF_PROG_MAX_ARITY];
} tf_prog_siblings;

/* Streaming decoder of one literal body. Opening clears the fields up to
 * `spread`; those from it on, a coding's own, its opening sets. */
typedef struct {
    uint8_t coding;
    unsigned width, pack_width, ctx_sibling, ctx_count, source_width;
    bool ctx_self;       /* RANS: contexts from its own words */
    uint64_t ctx_base;
    uint64_t n, done;
    const uint8_t *fixed; /* RAW, PACK: the payload, exactly n words */
    size_t fixed_len;
    tf_huff_decoder *huff;
    tf_rans_table table;  /* RANS */
    /* Dense decoding slots of the contexts as tf_rans_decode_rows wants
     * them: context 1 + j (source word ctx_base + j) at row j, context 0
     * at row ctx_count (prog_leaf_rans.c). */
    uint32_t *slots;
    unsigned n_streams;
    tf_simd_level simd;
    bool bad; /* the data ran out, or a code or context does not exist */
    uint8_t spread[2][64]; /* RAW, PACK of <= 7 bits: how to unpack them
                              64 at a time (prog_leaf.c, spread_plan) */
    tf_bit_reader bits[TF_PROG_HUFF_STREAMS]; /* HUFF: bits[0]; HUFF4 */
    tf_rans_stream stream[TF_RANS_MAX_STREAMS]; /* RANS: n_streams */
    /* ctx_self: the last turn of words decoded, word i at i % turn */
    uint32_t last[TF_PROG_SELF_MAX];
} tf_prog_lit_reader;

/* Parses and validates a body for n words of `width` bits; siblings are
 * those this leaf may take contexts from (NULL: none). Everything but the
 * entropy-coded payload is checked here. */
int tf_prog_lit_open(tf_prog_lit_reader *r, const uint8_t *body, size_t len, unsigned width,
                     uint64_t n, const tf_prog_siblings *siblings, tf_error *e);
/* tf_prog_lit_open of the body of literal node i of an instance, whose
 * possible context sources are the earlier children of its parent merge. */
int tf_prog_lit_open_node(tf_prog_lit_reader *r, const tf_prog *p, unsigned i, tf_error *e);
/* The next count words. ctx_words: the source sibling's words at the same
 * positions (RANS with a source), else unused. Problems set r->bad. */
void tf_prog_lit_read(tf_prog_lit_reader *r, uint64_t *out, size_t count,
                      const uint64_t *ctx_words);
/* The same into bytes, for a literal whose words fit them: an entropy
 * coding's (byte symbols), or RAW or PACK of at most 8 bits
 * (tf_prog_lit_bytes). */
void tf_prog_lit_read8(tf_prog_lit_reader *r, uint8_t *out, size_t count,
                       const uint32_t *ctx_words);
bool tf_prog_lit_bytes(const tf_prog_lit_reader *r);
/* The same into 32-bit words, for a literal whose words fit them: not RAW
 * or PACK of more than 32 bits (tf_prog_lit_narrow). */
void tf_prog_lit_read32(tf_prog_lit_reader *r, uint32_t *out, size_t count,
                        const uint32_t *ctx_words);
bool tf_prog_lit_narrow(const tf_prog_lit_reader *r);
/* After all n words: checks the body was consumed exactly. */
int tf_prog_lit_finish(const tf_prog_lit_reader *r, tf_error *e);
void tf_prog_lit_close(tf_prog_lit_reader *r);

#endif
