/* bytegroup: the bytes of multi-byte elements regrouped by significance
 * (every element's most significant byte first, which carries the sign
 * and exponent, then the next byte, ...) and compressed with zstd. The
 * exponent bytes of trained weights are highly repetitive; the mantissa
 * bytes are close to random, and grouping keeps them from diluting each
 * other. */
#ifndef TRAJFS_CODEC_BYTEGROUP_H
#define TRAJFS_CODEC_BYTEGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"

extern const tf_codec tf_codec_bytegroup;

/* Plane p (p = 0 is the most significant byte) of n elements of width w
 * goes to dst[p * n ...]. */
void tf_bytegroup_split(const uint8_t *src, size_t n, unsigned w, uint8_t *dst);
void tf_bytegroup_join(const uint8_t *src, size_t n, unsigned w, uint8_t *dst);

#endif
