/* Internal to the literal leaf coder (prog_leaf*.c), and used by the
 * keyframe codec (codec/keyframe.c), whose byte planes are literals: one
 * set of functions per entropy coding, over byte symbols. Each *_plan
 * fills plan with its best variant and that variant's exact body size;
 * -1 means out of memory. */
#ifndef TRAJFS_CODEC_PROG_PROG_LEAF_CODINGS_H
#define TRAJFS_CODEC_PROG_PROG_LEAF_CODINGS_H

#include "codec/prog/prog_leaf.h"

/* Symbols of a literal whose words are all below 256 (and below 2^width);
 * returns n_sym = max + 1, or 0 when some word is 256 or more. */
unsigned tf_prog_leaf_symbols(const uint64_t *v, size_t n, uint8_t *sym);

/* HUFF and HUFF4 (the same codes; coding says which). */
int tf_prog_huff_plan(const uint8_t *sym, size_t n, unsigned n_sym, tf_prog_lit_plan *huff,
                      tf_prog_lit_plan *huff4);
int tf_prog_huff_write(const uint8_t *sym, size_t n, unsigned n_sym, unsigned coding,
                       tf_buf *out, tf_error *e);
/* The same from the symbols' counts in each HUFF4 stream (word i is in
 * stream (i / TF_PROG_HUFF_SEGMENT) mod 4), for a caller that counts
 * them while it makes them. */
typedef struct {
    uint64_t count[TF_PROG_HUFF_STREAMS][TF_HUFF_MAX_SYMBOLS];
} tf_prog_huff_counts;
void tf_prog_huff_count(const uint8_t *sym, size_t n, tf_prog_huff_counts *c);
int tf_prog_huff_plan_counts(const tf_prog_huff_counts *c, size_t n, unsigned n_sym,
                             tf_prog_lit_plan *huff, tf_prog_lit_plan *huff4);
int tf_prog_huff_write_counts(const uint8_t *sym, size_t n, unsigned n_sym,
                              const tf_prog_huff_counts *c, unsigned coding, tf_buf *out,
                              tf_error *e);
/* The same with the code lengths given, fitted by the caller on a sample
 * (tf_huff_lengths, at most tf_prog_huff_limit(n) bits): every symbol of
 * sym must have a code. The streams' lengths are known once written. */
int tf_prog_huff_write_lengths(const uint8_t *sym, size_t n, unsigned n_sym,
                               const uint8_t *len, unsigned coding, tf_buf *out, tf_error *e);
/* The longest code a literal of n words has: at most log2(n / 4) bits
 * for a short one, so that the decoder fills a table of at most a
 * quarter as many entries as it reads codes (a cost its few codes would
 * not repay). */
unsigned tf_prog_huff_limit(size_t n);
int tf_prog_huff_open(tf_prog_lit_reader *r, tf_cursor *in, tf_error *e);
void tf_prog_huff_read(tf_prog_lit_reader *r, uint8_t *out, size_t count);
/* Whether every stream was consumed exactly. */
bool tf_prog_huff_exhausted(const tf_prog_lit_reader *r);

/* below: a size the plan must beat to be of use (variants estimated well
 * above it are not encoded; plan->size is SIZE_MAX when none is). */
int tf_prog_rans_plan(const uint8_t *sym, size_t n, unsigned n_sym,
                      const tf_prog_ctx_source *sources, unsigned n_src, size_t below,
                      tf_prog_lit_plan *plan, tf_error *e);
int tf_prog_rans_write(const uint8_t *sym, size_t n, unsigned n_sym,
                       const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                       tf_buf *out, tf_error *e);
/* A plan of RANS under the literal's own words a turn earlier (the
 * word i - tf_prog_rans_self_lag(n)), its contexts the window of at most
 * `window` values that holds the most of the n_sym counts, at precision
 * prec (TF_RANS_MIN_PREC..TF_RANS_MAX_PREC); its size is left unknown
 * (SIZE_MAX): tf_prog_rans_write tells it. */
void tf_prog_rans_self_plan(const uint64_t *count, unsigned n_sym, unsigned window,
                            unsigned prec, tf_prog_lit_plan *plan);
unsigned tf_prog_rans_self_lag(size_t n);
int tf_prog_rans_open(tf_prog_lit_reader *r, tf_cursor *in, const tf_prog_siblings *siblings,
                      tf_error *e);
void tf_prog_rans_read(tf_prog_lit_reader *r, uint32_t *out, size_t count,
                       const uint32_t *ctx_words);

#endif
