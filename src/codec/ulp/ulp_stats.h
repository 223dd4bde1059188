/* ulp_stats: where the bits of ULPack data go, broken down as the paper
 * does (papers/ulpack.txt): the bit length b, the refinement bits q1 and
 * q2 (rANS-coded under the reference exponent e_r), the raw tail, the
 * tables, and framing. Pure analysis, for `trajpack stats` and benchmarks:
 * nothing here is part of a format.
 *
 * Two measurements share one histogram of (e_r, symbol) pairs:
 *   - tf_ulp_breakdown() takes a stored chunk apart: its rANS stream's
 *     bits are split between b, q1 and q2 in proportion to the ideal code
 *     lengths under the chunk's own table, -log2 P(b|e_r),
 *     -log2 P(q1|b,e_r) and -log2 P(q2|b,q1,e_r) (marginals of the joint
 *     row P(b,q1,q2|e_r)), so that the three sum to the stream exactly;
 *   - tf_ulp_hist_entropy() gives the empirical conditional entropy of a
 *     tensor delta under the paper's model: the size an ideal static
 *     coder with tables fit to the data would reach, tables not counted. */
#ifndef TRAJFS_CODEC_ULP_ULP_STATS_H
#define TRAJFS_CODEC_ULP_ULP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/error.h"

/* Bits of ulp-coded weights by what they code. */
typedef struct {
    uint64_t weights;
    double b, q1, q2; /* modelled symbols: bit length, refinement bits */
    uint64_t raw;     /* the raw tail: bits written verbatim */
    /* Stream length and lane count of each chunk's rANS stream, and the
     * zero bits that pad its raw tail to a byte. (The lanes' terminal
     * states are part of the stream, shared by b, q1 and q2.) */
    uint64_t framing;
    uint64_t tables; /* model blobs: left to callers, which know them */
} tf_ulp_bits;

/* All the bits: b + q1 + q2 + raw + framing + tables. */
double tf_ulp_bits_total(const tf_ulp_bits *x);
void tf_ulp_bits_add(tf_ulp_bits *sum, const tf_ulp_bits *x);

/* Adds the breakdown of one stored ulp chunk (enc, decoded with ctx into
 * len bytes, as the codec's decode would) to *out; b + q1 + q2 + raw +
 * framing of the chunk is exactly 8 * enc_len. The chunk is decoded and
 * checked in full: a corrupt one, or one that does not fit ctx, is an
 * error (-1, *out unchanged). */
int tf_ulp_breakdown(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx, size_t len,
                     tf_ulp_bits *out, tf_error *e);

/* Counts of (e_r, symbol) pairs of target elements against their
 * reference elements: all that the paper's model sees. */
typedef struct {
    unsigned dtype, bytes, n_ctx, n_sym;
    uint64_t *counts; /* n_ctx rows of n_sym */
    uint64_t weights, raw_bits;
} tf_ulp_hist;

/* Fails (EINVAL) for a dtype ULPack does not code, ENOMEM. */
int tf_ulp_hist_init(tf_ulp_hist *h, unsigned dtype, tf_error *e);
void tf_ulp_hist_clear(tf_ulp_hist *h);
void tf_ulp_hist_free(tf_ulp_hist *h);
/* Adds n elements of src against the same elements of ref. */
void tf_ulp_hist_add(tf_ulp_hist *h, const uint8_t *src, const uint8_t *ref, size_t n);
/* Adds the counted weights, their raw bits, and the plug-in estimates
 * H(b|e_r), H(q1|b,e_r), H(q2|b,q1,e_r) (in bits, over all the weights) to
 * *out as b, q1 and q2. */
void tf_ulp_hist_entropy(const tf_ulp_hist *h, tf_ulp_bits *out);
/* The plug-in entropy of the counted symbols, in bits over all the
 * weights, with every context's counts pooled in one row: what the
 * symbols would cost a coder without the context e_r. Against b + q1 +
 * q2 of tf_ulp_hist_entropy it measures what the context is worth. */
double tf_ulp_hist_entropy_without_context(const tf_ulp_hist *h);

#endif
